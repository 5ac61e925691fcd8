"""Paired comparison of two runs: is the difference between them real? One test, one interval, one verdict.

The test is Fisher's paired randomization (sign-flip) test of the mean per-query difference (Smucker, Allan &
Carterette, "A Comparison of Statistical Significance Tests for Information Retrieval Evaluation", CIKM 2007;
Urbano, Lima & Hanjalic, SIGIR 2019, found it and the t-test reliable where bootstrap variants were not). The
interval is the same test inverted over shifts (Lehmann & Romano, "Testing Statistical Hypotheses", 3rd ed., sec.
3.5; Ernst, "Permutation Methods: A Basis for Exact Inference", Statistical Science 19(4), 2004): every shift delta
of the mean difference that the test of "mean difference = delta" does not reject at level alpha. So the interval
excludes 0 exactly when the test rejects, by construction: the interval and the verdict cannot disagree.

How the interval is computed: under "mean difference = delta" each difference d_i - delta may flip its sign. A sign
pattern s counts against rejection when |sum s_i (d_i - delta)| >= |sum (d_i - delta)|; with a = sum s_i d_i,
k = sum s_i and A = sum d_i that is |a - k delta| >= |A - n delta|, which holds on the closed interval between
(A + a) / (k + n) and (A - a) / (n - k) (the whole line when |k| = n). Every such interval holds the observed mean
A / n, so the number of patterns counting at delta falls as delta moves away from it on either side, and the shifts
not rejected form one interval, read off two order statistics of the patterns' interval ends.

Which sign patterns: the non-zero differences are enumerated exactly (all 2^m patterns) when there are at most
EXACT_MAX_NONZERO of them, else `resamples` patterns are drawn (p = (count + 1) / (resamples + 1), the observed
pattern counted, which never reports an impossible p = 0: Phipson & Smyth, SAGMB 2010). Zero differences do not
matter at delta = 0 but do elsewhere, through their sign sum only: with an enumeration each sum is counted with its
binomial weight (every pattern of all n differences, exactly) while that fits 64-bit whole numbers (EXACT_MAX_BITS,
EXACT_MAX_CELLS); beyond, and for drawn patterns, the zero differences' signs are drawn from a second seeded stream,
an enumeration repeated ceil(resamples / 2^m) times, so the interval rests on at least `resamples` patterns. The
p-value at 0 is always exactly the plain test's.

Several comparisons in one table (the metrics of a comparison, the rows of a sweep or an ablation) form a family:
Holm's step-down adjustment (Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Statist.
6(2), 1979) controls the chance of any false "better"/"worse" in the family at alpha; verdicts come from the adjusted
p-values. Each interval of the family is the inverted test at Holm's last level, alpha / (m - r) with r rejections
(alpha when all are rejected): exactly the rejected comparisons have p below it, so each interval excludes 0 exactly
when its adjusted p-value is below alpha. Those intervals are not simultaneous confidence intervals; they are the
intervals that agree with the verdicts.

Library or own code: scipy.stats.permutation_test gives the same p-values on our hand-computed and seeded cases
(tests/test_stats.py proves it), but it does not invert the test, draws another random stream (a seeded p-value
would change), misses sign patterns that tie in exact arithmetic when the observed sum is small (its tolerance is
100 machine epsilons of the statistic: MRR of ranks 4 6 8 7 6 2 5 4 5 vs 6 2 10 10 4 9 10 3 3 gives 254/256 there,
255/256 in exact arithmetic and here) and refuses a single difference. Holm's adjustment is five lines; the tests
check it against hand-computed values and statsmodels' multipletests convention.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from localrag.evaluation.metrics import check_same_queries

# Default number of sign patterns drawn when the non-zero differences are too many to enumerate.
DEFAULT_RESAMPLES = 10_000
# Default seed for numpy's Generator: equal inputs give equal intervals and p-values.
DEFAULT_SEED = 0
# Default significance level of a comparison (of a family, after Holm's adjustment).
DEFAULT_ALPHA = 0.05
# Default power for the "how many questions would we need" estimate.
DEFAULT_POWER = 0.8
# Up to this many non-zero differences the test enumerates all 2^n sign patterns.
EXACT_MAX_NONZERO = 16
# The zero differences' sign sums are counted exactly (binomial weights) while 2^(all differences) fits a 64-bit
# whole number and the patterns times the sums stay below this many cells; else their signs are drawn.
EXACT_MAX_BITS = 62
EXACT_MAX_CELLS = 1 << 17
# Sign-pattern matrices are built in blocks of about this many cells to bound memory.
BLOCK_CELLS = 2_000_000
# Relative slack when comparing a pattern's sum with the observed one: sums of the same numbers in another order
# differ in the last bits, and such ties must count as ">=".
TIE_TOLERANCE = 1e-9
# The three possible verdicts.
VERDICT_BETTER = "better"
VERDICT_WORSE = "worse"
VERDICT_NONE = "no detectable difference at this goldset size"
# Where every per-query score lies in [0, 1] (each metric of this tool), a mean difference lies in [-1, 1]: intervals
# are clipped there (a test on two questions rejects no shift at all, and would otherwise say -inf to +inf).
DIFF_BOUNDS = (-1.0, 1.0)


def _paired_differences(old: Mapping[str, float], new: Mapping[str, float]) -> np.ndarray:
    """new - old per query, in sorted query-id order so that results do not depend on dict order."""
    check_same_queries(old, new)
    if not old:
        raise ValueError("no per-query scores to compare; evaluate both runs on a non-empty goldset first")
    qids = sorted(old)
    diffs = np.array([new[q] - old[q] for q in qids], dtype=float)
    if not np.all(np.isfinite(diffs)):
        bad = [q for q, d in zip(qids, diffs) if not math.isfinite(d)]
        raise ValueError(f"per-query scores must be finite numbers; queries {bad[:5]!r} are not")
    return diffs


def _check_resamples(resamples: int) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}; 10000 is a good default")


def _check_probability(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")


@dataclass(frozen=True)
class ShiftTest:
    """The paired randomization test of "mean difference = delta" for every delta at once.

    Each sign pattern counts against rejection on an interval of shifts; `lows` (ascending) and `highs`
    (descending) are those intervals' ends, `low_weights` and `high_weights` the running sums of the patterns'
    weights in those orders (whole numbers: 1 for a drawn pattern, the number of zero-difference sign patterns it
    stands for in an exact enumeration). `count` is the weight that counts at delta = 0, of `total`.
    """

    n: int
    diff: float  # observed mean difference new - old
    count: int
    total: int
    lows: np.ndarray
    low_weights: np.ndarray
    highs: np.ndarray
    high_weights: np.ndarray
    exact: bool  # whether every sign pattern was counted (else drawn: Monte Carlo)
    bounds: tuple[float, float] = DIFF_BOUNDS  # the mean differences that are possible at all

    @property
    def p_value(self) -> float:
        """Two-sided p-value of "no difference" (delta = 0)."""
        return self.count / self.total

    def needed(self, alpha: float) -> int:
        """The least weight a shift needs to be kept at level alpha (p(delta) >= alpha), found with the very
        division `p_value` makes, so that rejects() and p_value < alpha never disagree."""
        _check_probability("alpha", alpha)
        low, high = 1, self.total  # weight `total` always has p = 1 >= alpha
        while low < high:
            middle = (low + high) // 2
            if middle / self.total >= alpha:
                high = middle
            else:
                low = middle + 1
        return low

    def rejects(self, alpha: float) -> bool:
        """Whether "no difference" is rejected at level alpha (p < alpha)."""
        return self.count < self.needed(alpha)

    def interval(self, alpha: float) -> tuple[float, float]:
        """The shifts delta the test keeps at level alpha, within `bounds`: excludes 0 exactly when rejects(alpha)."""
        need = self.needed(alpha)
        low = float(self.lows[np.searchsorted(self.low_weights, need)])
        high = float(self.highs[np.searchsorted(self.high_weights, need)])
        return max(low, self.bounds[0]), min(high, self.bounds[1])


def _sign_sums(nonzero: np.ndarray, zeros: int, resamples: int,
               seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(a, k, weight, exact) per sign pattern: a = sum of s_i d_i over the non-zero differences, k = sum of s_i over
    all differences (zeros included). The observed pattern (all +1, k = n) is among them.

    Exact when the non-zero differences' patterns can be enumerated and the zero differences' sign sums counted
    with their binomial weights in 64-bit whole numbers; else the zero differences' signs are drawn (a stream
    apart from the p-value's), for every drawn pattern or for ceil(resamples / 2^m) copies of each enumerated one."""
    m = len(nonzero)
    zero_rng = np.random.default_rng([seed, 1])
    if m <= EXACT_MAX_NONZERO:
        patterns = np.arange(2**m)[:, None]
        signs = 1 - 2 * ((patterns >> np.arange(m)) & 1)
        a, k = signs @ nonzero, signs.sum(axis=1)
        if m + zeros <= EXACT_MAX_BITS and 2**m * (zeros + 1) <= EXACT_MAX_CELLS:
            sums = 2 * np.arange(zeros + 1) - zeros  # the zero differences' sign sums, comb(zeros, i) ways each
            ways = np.array([math.comb(zeros, i) for i in range(zeros + 1)], dtype=np.int64)
            return (np.repeat(a, zeros + 1), (k[:, None] + sums[None, :]).ravel(), np.tile(ways, 2**m), True)
        copies = math.ceil(resamples / 2**m)
        a, k = np.tile(a, copies), np.tile(k, copies) + (2 * zero_rng.binomial(zeros, 0.5, size=2**m * copies) - zeros)
        return a, k, np.ones(len(a), dtype=np.int64), False
    rng = np.random.default_rng(seed)
    sums, counts = [np.array([math.fsum(nonzero)])], [np.array([m])]
    block = max(1, BLOCK_CELLS // m)
    for start in range(0, resamples, block):
        rows = min(block, resamples - start)
        signs = 1 - 2 * rng.integers(0, 2, size=(rows, m), dtype=np.int8)
        sums.append(signs @ nonzero)
        counts.append(signs.sum(axis=1, dtype=np.int64))
    a, k = np.concatenate(sums), np.concatenate(counts)
    if zeros:
        k[1:] += 2 * zero_rng.binomial(zeros, 0.5, size=resamples) - zeros
        k[0] += zeros  # the observed pattern keeps every sign
    return a, k, np.ones(len(a), dtype=np.int64), False


def shift_test(old: Mapping[str, float], new: Mapping[str, float], resamples: int = DEFAULT_RESAMPLES,
               seed: int = DEFAULT_SEED) -> ShiftTest:
    """The paired randomization test of new - old, ready to give its p-value and, at any level, its interval."""
    _check_resamples(resamples)
    diffs = _paired_differences(old, new)
    n = len(diffs)
    mean = math.fsum(diffs) / n
    nonzero = diffs[diffs != 0.0]
    values = [*old.values(), *new.values()]
    bounds = DIFF_BOUNDS if all(0.0 <= v <= 1.0 for v in values) else (-math.inf, math.inf)
    if len(nonzero) == 0:  # identical runs: every pattern ties; only delta = 0 is kept
        ends, ones = np.zeros(1), np.ones(1, dtype=np.int64)
        return ShiftTest(n, 0.0, 1, 1, ends, ones, ends, ones, True, bounds)
    a, k, weights, exact = _sign_sums(nonzero, n - len(nonzero), resamples, seed)
    observed_sum = math.fsum(nonzero)
    observed = abs(observed_sum)
    # Counts at delta = 0, ties within the tolerance included (the sum ranks patterns as the mean does).
    counts_at_zero = np.abs(a) >= observed - TIE_TOLERANCE * max(1.0, observed)
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(k + n > 0, (observed_sum + a) / (k + n), 0.0)
        second = np.where(n - k > 0, (observed_sum - a) / (n - k), 0.0)
    lows, highs = np.minimum(first, second), np.maximum(first, second)
    whole_line = np.abs(k) >= n
    lows[whole_line], highs[whole_line] = -np.inf, np.inf
    # A pattern that ties at 0 keeps 0 (float rounding may put its end a hair beyond); each interval holds the mean.
    lows = np.minimum(np.where(counts_at_zero, np.minimum(lows, 0.0), lows), mean)
    highs = np.maximum(np.where(counts_at_zero, np.maximum(highs, 0.0), highs), mean)
    low_order, high_order = np.argsort(lows, kind="stable"), np.argsort(-highs, kind="stable")
    return ShiftTest(n, mean, int(weights[counts_at_zero].sum()), int(weights.sum()), lows[low_order],
                     np.cumsum(weights[low_order]), highs[high_order], np.cumsum(weights[high_order]), exact, bounds)


def paired_randomization_test(
    old: Mapping[str, float],
    new: Mapping[str, float],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> float:
    """Two-sided p-value of the mean difference new - old by Fisher's paired randomization test.

    Under the null hypothesis the labels old/new are exchangeable within a query, so each per-query difference may
    flip its sign. The p-value is the share of sign patterns whose |mean difference| is at least the observed one:
    exact over all 2^m patterns of the m non-zero differences when m <= EXACT_MAX_NONZERO, else (count + 1) /
    (resamples + 1) over `resamples` seeded random patterns. Identical runs give exactly 1.0.
    """
    return shift_test(old, new, resamples, seed).p_value


def min_queries_for_alpha(alpha: float = DEFAULT_ALPHA) -> int:
    """Smallest number of non-zero differences for which a sign-flip test can reach p < alpha.

    The smallest two-sided p with n differences is 2 / 2^n (all patterns but the observed
    one and its mirror are less extreme), so n must exceed log2(2 / alpha): 6 for alpha = 0.05.
    """
    _check_probability("alpha", alpha)
    return math.floor(math.log2(2 / alpha)) + 1


def required_sample_size(
    differences: Sequence[float],
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
) -> int | None:
    """Rough number of questions needed to detect the observed mean difference with a paired test.

    Normal approximation n = ((z_{1-alpha/2} + z_{power}) * sd / mean)^2, rounded up, with
    sd the sample standard deviation of the per-query differences; never less than
    min_queries_for_alpha(alpha), below which the randomization test cannot reach p < alpha.
    None when the mean difference is 0 (no number of questions would detect it).
    It assumes the observed effect is the true one, so treat it as an order of magnitude.
    """
    _check_probability("alpha", alpha)
    _check_probability("power", power)
    if len(differences) < 2:
        raise ValueError(
            f"need at least 2 per-query differences to estimate their spread, got {len(differences)}; "
            "add questions to the goldset"
        )
    mean = statistics.fmean(differences)
    if mean == 0.0:
        return None
    sd = statistics.stdev(differences)
    z = statistics.NormalDist().inv_cdf
    n = math.ceil(((z(1 - alpha / 2) + z(power)) * sd / abs(mean)) ** 2)
    return max(n, min_queries_for_alpha(alpha))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest p times (m - i + 1), never
    below an earlier one's, at most 1 (Holm 1979; as statsmodels' multipletests(method="holm")). A hypothesis is
    rejected at family-wise level alpha exactly when its adjusted p-value is below alpha."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: (p_values[i], i))
    adjusted = [0.0] * m
    running = 0.0
    for step, i in enumerate(order):
        running = max(running, min(1.0, (m - step) * p_values[i]))
        adjusted[i] = running
    return adjusted


def holm_level(adjusted: Sequence[float], alpha: float = DEFAULT_ALPHA) -> float:
    """The level of Holm's last step: alpha / (m - r) with r the adjusted p-values below alpha, alpha when all are.
    Exactly the rejected hypotheses have a raw p-value below it."""
    _check_probability("alpha", alpha)
    rejected = sum(1 for p in adjusted if p < alpha)
    return alpha / (len(adjusted) - rejected) if rejected < len(adjusted) else alpha


def verdict(ci: tuple[float, float], p_value: float, alpha: float = DEFAULT_ALPHA) -> str:
    """"better" / "worse" when p < alpha, by the side of 0 the interval lies on; else VERDICT_NONE.

    The interval must agree with the test (it excludes 0 exactly when p < alpha, as `ShiftTest.interval` gives
    it); a ValueError says that they disagree rather than pick one."""
    _check_probability("alpha", alpha)
    low, high = ci
    if low > high:
        raise ValueError(f"confidence interval must be (low, high) with low <= high, got {ci!r}")
    excludes_zero = low > 0 or high < 0
    if excludes_zero != (p_value < alpha):
        raise ValueError(f"the interval {ci!r} and p = {p_value!r} disagree at alpha = {alpha!r}; an interval must "
                         f"come from inverting the same test")
    if not excludes_zero:
        return VERDICT_NONE
    return VERDICT_BETTER if low > 0 else VERDICT_WORSE


@dataclass(frozen=True)
class Compared:
    """One comparison of a family: means, the test's raw and Holm-adjusted p-values, the interval at the family's
    level (`level`: the alpha it inverts the test at) and the verdict they share."""

    n: int
    old_mean: float
    new_mean: float
    diff: float
    ci: tuple[float, float]
    p_value: float
    p_adjusted: float
    level: float
    family: int  # comparisons in the family
    verdict: str
    needed_n: int | None  # questions that would detect the difference; None when there is none to detect
    exact: bool


def compare_family(
    pairs: Mapping[Hashable, tuple[Mapping[str, float], Mapping[str, float]]],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
) -> dict[Hashable, Compared]:
    """Compare each (old, new) pair of per-query scores, as one family: Holm-adjusted verdicts at family-wise
    level alpha, each interval the test inverted at Holm's last level (holm_level)."""
    _check_probability("alpha", alpha)
    tests = {name: shift_test(old, new, resamples, seed) for name, (old, new) in pairs.items()}
    adjusted = dict(zip(tests, holm([t.p_value for t in tests.values()])))
    level = holm_level(list(adjusted.values()), alpha)
    kept = [tests[name].p_value for name, p in adjusted.items() if p >= alpha]
    if any((tests[name].p_value < level) != (p < alpha) for name, p in adjusted.items()):
        level = min(kept)  # rounding at the edge: the smallest kept raw p still separates rejected from kept
    out = {}
    for name, test in tests.items():
        old, new = pairs[name]
        qids = sorted(old)
        diffs = [new[q] - old[q] for q in qids]
        ci = test.interval(level)
        out[name] = Compared(
            n=test.n, old_mean=math.fsum(old[q] for q in qids) / len(qids),
            new_mean=math.fsum(new[q] for q in qids) / len(qids), diff=test.diff, ci=ci, p_value=test.p_value,
            p_adjusted=adjusted[name], level=level, family=len(tests),
            verdict=verdict(ci, adjusted[name], alpha),
            needed_n=required_sample_size(diffs, alpha, power) if len(diffs) >= 2 else None, exact=test.exact)
    return out


def compare_metric(
    old: Mapping[str, float],
    new: Mapping[str, float],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
) -> Compared:
    """Compare two runs on one metric's per-query scores (same query ids): a family of one."""
    return compare_family({"": (old, new)}, resamples, seed, alpha, power)[""]
