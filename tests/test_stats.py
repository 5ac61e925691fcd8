"""Tests of localrag.evaluation.stats: hand-computed values, and scipy.stats as the reference where it agrees."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats

from localrag.evaluation import stats

# ---------------------------------------------------------------------------
# Paired statistics


def _runs(diffs, base=0.5):
    """old/new per-query score dicts whose differences new - old are `diffs`."""
    old = {f"q{i:02d}": base for i in range(len(diffs))}
    new = {f"q{i:02d}": base + d for i, d in enumerate(diffs)}
    return old, new


def test_identical_runs_give_p_one_and_ci_with_zero():
    old = {f"q{i}": 0.1 * i for i in range(30)}
    new = dict(old)
    assert stats.paired_randomization_test(old, new) == 1.0
    assert stats.shift_test(old, new).interval(0.05) == (0.0, 0.0)  # no spread: only "no shift" is kept
    assert stats.required_sample_size([0.0] * 30) is None
    result = stats.compare_metric(old, new)
    assert result.p_value == 1.0 and result.p_adjusted == 1.0
    assert result.diff == 0.0
    assert result.ci == (0.0, 0.0)
    assert result.verdict == "no detectable difference at this goldset size"
    assert result.needed_n is None


def test_winning_on_all_20_queries_is_better():
    # Only the all-plus and all-minus sign patterns reach the observed |sum|: exact p = 2/2^20.
    # Monte Carlo (20 > EXACT_MAX_NONZERO) then gives about 1/10001.
    old, new = _runs([0.01 * (i + 1) for i in range(20)])
    p = stats.paired_randomization_test(old, new)
    assert p < 0.001
    low, high = stats.shift_test(old, new).interval(0.05)
    assert 0.0 < low <= 0.105 <= high
    result = stats.compare_metric(old, new)
    assert result.verdict == "better"
    assert result.n == 20
    # mean diff = 0.01 * (1 + ... + 20) / 20 = 0.105
    assert result.diff == pytest.approx(0.105)
    assert stats.compare_metric(new, old).verdict == "worse"


def test_interval_is_seeded_and_independent_of_dict_order():
    # 20 non-zero differences: Monte Carlo patterns, and zero differences whose signs come from the second stream.
    old, new = _runs([0.3, -0.1, 0.2, 0.0, 0.5, -0.4, 0.1, 0.25] * 3, base=0.45)
    first = stats.shift_test(old, new, seed=42).interval(0.05)
    assert stats.shift_test(old, new, seed=42).interval(0.05) == first
    reversed_old = dict(reversed(list(old.items())))
    reversed_new = dict(reversed(list(new.items())))
    assert stats.shift_test(reversed_old, reversed_new, seed=42).interval(0.05) == first
    assert stats.shift_test(old, new, seed=43).interval(0.05) != first


def test_inverted_interval_of_three_queries_by_hand():
    # diffs 0.2, 0.4, 0.6: sum A = 1.2, mean 0.4. A sign pattern s (a = sum s_i d_i, k = sum s_i) keeps a shift
    # delta when |a - k delta| >= |1.2 - 3 delta|: between (A + a) / (k + 3) and (A - a) / (3 - k).
    #   +++ a  1.2 k  3: every delta      ++- a  0   k  1: [0.3, 0.6]    +-+ a  0.4 k  1: [0.4, 0.4]
    #   +-- a -0.8 k -1: [0.2, 0.5]       -++ a  0.8 k  1: [0.2, 0.5]    -+- a -0.4 k -1: [0.4, 0.4]
    #   --+ a  0   k -1: [0.3, 0.6]       --- a -1.2 k -3: every delta
    # At 0 only +++ and --- count: p = 2/8. At level 0.5 a kept shift needs 4 of 8 patterns: [0.2, 0.6] (0.6: +++,
    # ---, ++-, --+); at level 0.75 it needs 6: [0.3, 0.5] (0.55 has only those 4).
    old, new = _runs([0.2, 0.4, 0.6], base=0.3)
    test = stats.shift_test(old, new)
    assert (test.count, test.total, test.p_value) == (2, 8, 0.25)
    assert test.interval(0.5) == pytest.approx((0.2, 0.6))
    assert test.interval(0.75) == pytest.approx((0.3, 0.5))
    assert test.interval(0.25) == (-1.0, 1.0)  # two patterns suffice everywhere: clipped to the possible range
    assert not test.rejects(0.25) and test.rejects(0.26)


def _brute_force_p(diffs, delta):
    """p of "mean difference = delta" over every sign pattern of all differences, zeros included (reference)."""
    shifted = np.asarray(diffs, dtype=float) - delta
    signs = 1 - 2 * ((np.arange(2 ** len(shifted))[:, None] >> np.arange(len(shifted))) & 1)
    observed = abs(shifted.sum())
    return np.count_nonzero(np.abs(signs @ shifted) >= observed - 1e-9 * max(1.0, observed)) / len(signs)


@pytest.mark.parametrize("diffs", [[0.5, 0.25, -0.25, 1.0, 0.75, 0.5, -0.5, 0.25],
                                   [1 / 3, 1 / 2, 1.0, -1 / 4, 1 / 5, 1 / 2, 1 / 6, -1 / 3, 1.0]])
def test_interval_ends_are_where_the_brute_force_test_starts_to_reject(diffs):
    # No zero differences: the patterns are enumerated, so the ends are exact. At each end the brute-force test
    # over all 2^n patterns keeps the shift, a hair outside it rejects.
    old, new = _runs(diffs, base=0.0)
    test = stats.shift_test(old, new)
    for alpha in (0.05, 0.1, 0.2):
        low, high = test.interval(alpha)
        assert _brute_force_p(diffs, low) >= alpha and _brute_force_p(diffs, high) >= alpha
        assert _brute_force_p(diffs, low - 1e-7) < alpha and _brute_force_p(diffs, high + 1e-7) < alpha


def test_interval_with_zero_differences_counts_their_signs_exactly():
    # 4 of 12 differences are zero: they matter away from 0 through their sign sum, which is counted with its
    # binomial weights (5 sums for 2^8 patterns of the others), so the ends are exact: the brute-force test over
    # all 2^12 patterns keeps each end and rejects a hair beyond it.
    diffs = [0.5, 0.0, 0.75, 0.0, 1.0, -0.25, 0.0, 0.5, 0.75, 0.0, 0.5, 0.25]
    old, new = _runs(diffs, base=0.0)
    test = stats.shift_test(old, new)
    assert test.exact and test.total == 2 ** 12
    for alpha in (0.05, 0.1):  # p at 0 is 0.023 (96 of 4096): both reject "no difference"
        low, high = test.interval(alpha)
        assert 0.0 < low < high
        assert _brute_force_p(diffs, low) >= alpha and _brute_force_p(diffs, high) >= alpha
        assert _brute_force_p(diffs, low - 1e-7) < alpha and _brute_force_p(diffs, high + 1e-7) < alpha
    # The p-value at 0 is the plain test's: the zeros cannot change a sum at 0.
    assert test.p_value == _brute_force_p(diffs, 0.0) == stats.paired_randomization_test(old, new)


def test_too_many_zero_differences_to_count_are_drawn():
    # 10 non-zero and 130 zero differences: 2^10 x 131 sign sums exceed EXACT_MAX_CELLS, so the zero differences'
    # signs are drawn for 10 copies of each of the 1024 patterns; the p-value at 0 stays exact.
    diffs = [0.5, 0.25, 1.0, -0.25, 0.5, 0.75, 0.5, 0.25, 1.0, 0.5] + [0.0] * 130
    old, new = _runs(diffs, base=0.0)
    test = stats.shift_test(old, new)
    assert not test.exact and test.total == 1024 * 10
    nonzero = [d for d in diffs if d]
    assert test.p_value == _brute_force_p(nonzero, 0.0)
    low, high = test.interval(0.05)
    assert 0.0 < low <= test.diff <= high


def _random_scores(rng, n):
    """Old/new per-question scores shaped like this tool's metrics: Hit@k (0/1), reciprocal ranks, or NDCG-like."""
    shape = rng.integers(0, 3)
    if shape == 0:
        old = rng.integers(0, 2, n).astype(float)
        new = np.where(rng.random(n) < rng.uniform(0, 0.4), 1 - old, old)
    elif shape == 1:
        old = np.where(rng.random(n) < 0.2, 0.0, 1.0 / rng.integers(1, 21, n))
        new = np.where(rng.random(n) < rng.uniform(0, 0.6), np.where(rng.random(n) < 0.2, 0.0,
                                                                     1.0 / rng.integers(1, 21, n)), old)
    else:
        old = rng.random(n)
        new = np.clip(old + rng.normal(rng.uniform(-0.1, 0.1), 0.2, n), 0.0, 1.0)
    return _runs_of(old), _runs_of(new)


def test_interval_and_verdict_never_disagree_over_10000_seeded_comparisons():
    # The goal: zero disagreements between the interval (does it exclude 0?) and the test (p < alpha),
    # single comparisons and Holm families alike, exact and Monte Carlo patterns alike.
    rng = np.random.default_rng(2026)
    disagreements = checked = 0
    for trial in range(10_000):
        n = int(rng.integers(1, 80))
        old, new = _random_scores(rng, n)
        test = stats.shift_test(old, new, resamples=int(rng.choice([99, 200, 500])), seed=trial)
        for alpha in (0.05, 0.05 / int(rng.integers(2, 30))):
            low, high = test.interval(alpha)
            disagreements += (low > 0 or high < 0) != (test.p_value < alpha)
            disagreements += not low <= test.diff <= high
            checked += 1
    assert checked == 20_000
    assert disagreements == 0


def test_family_verdicts_agree_with_their_intervals():
    rng = np.random.default_rng(7)
    for trial in range(300):
        pairs = {m: _random_scores(rng, int(rng.integers(5, 60))) for m in range(int(rng.integers(1, 12)))}
        compared = stats.compare_family(pairs, resamples=300, seed=trial)
        for c in compared.values():
            assert (c.ci[0] > 0 or c.ci[1] < 0) == (c.p_adjusted < 0.05) == (c.verdict != stats.VERDICT_NONE)
            assert c.family == len(pairs)


def test_randomization_exact_four_queries_by_hand():
    # diffs [1, 1, 1, -1], observed |sum| = 2. The 16 sign patterns (s1 s2 s3 s4) give
    # sum = s1 + s2 + s3 - s4:
    #   ++++  2*   +++-  4*   ++-+  0    ++--  2*
    #   +-++  0    +-+-  2*   +--+ -2*   +---  0
    #   -+++  0    -++-  2*   -+-+ -2*   -+--  0
    #   --++ -2*   --+-  0    ---+ -4*   ----  -2*
    # (* = |sum| >= 2): 10 of 16 -> p = 0.625
    old, new = _runs([1.0, 1.0, 1.0, -1.0], base=0.0)
    assert stats.paired_randomization_test(old, new) == 0.625
    # Zero differences do not change under a flip, so adding ties leaves p unchanged.
    old, new = _runs([1.0, 1.0, 1.0, -1.0, 0.0, 0.0], base=0.0)
    assert stats.paired_randomization_test(old, new) == 0.625


def test_randomization_counts_ties_hidden_by_float_rounding():
    # TRAP: realistic metric values (thirds, fifths). Per-query diffs in exact arithmetic:
    # -2/3, -1/3, -1/20, 2/3, 1/5; observed sum -11/60. In floats, sign patterns whose exact
    # |sum| equals 11/60 can come out a bit smaller and be missed without a tolerance.
    old = {"q0": 2 / 3, "q1": 1 / 3, "q2": 0.25, "q3": 0.0, "q4": 0.0}
    new = {"q0": 0.0, "q1": 0.0, "q2": 0.2, "q3": 2 / 3, "q4": 0.2}
    exact = [Fraction(-2, 3), Fraction(-1, 3), Fraction(-1, 20), Fraction(2, 3), Fraction(1, 5)]
    observed = abs(sum(exact))
    hits = sum(
        abs(sum(s * d for s, d in zip(signs, exact))) >= observed
        for signs in itertools.product((1, -1), repeat=len(exact))
    )
    assert hits == 28  # of 32 patterns
    assert stats.paired_randomization_test(old, new) == hits / 32


def _exact_p(diffs):
    """Exact two-sided sign-flip p over all 2^n patterns, by meet in the middle (integers)."""
    d = np.array(diffs, dtype=np.int64)
    half = len(d) // 2

    def all_sums(part):
        bits = (np.arange(2 ** len(part))[:, None] >> np.arange(len(part))) & 1
        return (1 - 2 * bits) @ part

    totals = all_sums(d[:half])[:, None] + all_sums(d[half:])[None, :]
    return np.count_nonzero(np.abs(totals) >= abs(d.sum())) / 2 ** len(d)


def test_randomization_monte_carlo_close_to_exact_on_20_queries():
    steps = [3, -1, 2, 1, -2, 1, 1, -3, 2, 1, 1, 1, 2, -1, 1, -2, 3, 1, 1, -2]
    # Quarter steps are exact in binary, so pattern sums tie with the observed one exactly.
    old, new = _runs([s / 4 for s in steps], base=0.0)
    exact = _exact_p(steps)  # 0.258337
    monte_carlo = stats.paired_randomization_test(old, new)
    assert abs(monte_carlo - exact) <= 0.01


def test_randomization_switches_from_exact_to_monte_carlo():
    resamples = 1000
    old, new = _runs([0.1 * (i % 3 + 1) * (-1) ** i for i in range(stats.EXACT_MAX_NONZERO)])
    p_exact = stats.paired_randomization_test(old, new, resamples=resamples)
    assert p_exact * 2**stats.EXACT_MAX_NONZERO == pytest.approx(round(p_exact * 2**stats.EXACT_MAX_NONZERO))
    assert p_exact == pytest.approx(_exact_p([(i % 3 + 1) * (-1) ** i for i in range(stats.EXACT_MAX_NONZERO)]))
    old, new = _runs([0.1 * (i % 3 + 1) * (-1) ** i for i in range(stats.EXACT_MAX_NONZERO + 1)])
    p_mc = stats.paired_randomization_test(old, new, resamples=resamples)
    count_plus_one = p_mc * (resamples + 1)
    assert count_plus_one == pytest.approx(round(count_plus_one))
    again = stats.paired_randomization_test(old, new, resamples=resamples, seed=5)
    assert stats.paired_randomization_test(old, new, resamples=resamples, seed=5) == again


def test_paired_inputs_must_share_query_ids():
    with pytest.raises(ValueError, match="only in old: \\['q2'\\]"):
        stats.shift_test({"q1": 0.1, "q2": 0.2}, {"q1": 0.3})
    with pytest.raises(ValueError, match="non-empty"):
        stats.paired_randomization_test({}, {})


def test_required_sample_size_by_hand():
    # diffs [1, -0.5, 0.5, 0]: mean 0.25; deviations .75 -.75 .25 -.25 -> squares sum 1.25,
    # sd = sqrt(1.25 / 3) = 0.645497. z_0.975 + z_0.8 = 1.959964 + 0.841621 = 2.801585.
    # n = (2.801585 * 0.645497 / 0.25)^2 = 7.233661^2 = 52.33 -> 53
    assert stats.required_sample_size([1.0, -0.5, 0.5, 0.0]) == 53
    # Sign does not matter.
    assert stats.required_sample_size([-1.0, 0.5, -0.5, 0.0]) == 53
    # diffs [0.1, 0.3]: (2.801585 * 0.141421 / 0.2)^2 = 3.92 -> 4, but a sign-flip test needs
    # 2 / 2^n < 0.05, i.e. n >= 6.
    assert stats.required_sample_size([0.1, 0.3]) == 6
    assert stats.min_queries_for_alpha(0.05) == 6  # 2/2^5 = 0.0625, 2/2^6 = 0.03125
    assert stats.min_queries_for_alpha(0.01) == 8  # 2/2^7 = 0.0156, 2/2^8 = 0.0078
    assert stats.required_sample_size([0.2, -0.2]) is None
    with pytest.raises(ValueError, match="at least 2"):
        stats.required_sample_size([0.5])


def test_verdict_follows_the_test_and_refuses_an_interval_that_disagrees():
    assert stats.verdict((0.01, 0.2), 0.01) == "better"
    assert stats.verdict((-0.2, -0.01), 0.01) == "worse"
    none = "no detectable difference at this goldset size"
    assert stats.verdict((-0.01, 0.2), 0.2) == none
    assert stats.verdict((0.0, 0.2), 0.05) == none  # p == alpha is not < alpha; an interval touching 0 keeps it
    with pytest.raises(ValueError, match="disagree"):
        stats.verdict((-0.01, 0.2), 0.01)  # significant p, interval holds 0: not from the same test
    with pytest.raises(ValueError, match="disagree"):
        stats.verdict((0.01, 0.2), 0.2)
    with pytest.raises(ValueError, match="low <= high"):
        stats.verdict((0.2, 0.1), 0.01)


def test_holm_by_hand():
    # p 0.01 0.04 0.03 0.005, sorted 0.005 0.01 0.03 0.04 times 4 3 2 1: 0.02 0.03 0.06 0.04 -> running maximum
    # 0.02 0.03 0.06 0.06, back in the given order:
    adjusted = stats.holm([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # Two rejected at 0.05: Holm's last level is 0.05 / (4 - 2); exactly the rejected raw p-values lie below it.
    assert stats.holm_level(adjusted) == 0.025
    assert stats.holm_level(stats.holm([0.001, 0.002])) == 0.05  # all rejected: the last step's level is alpha
    assert stats.holm_level(stats.holm([0.3, 0.5, 0.9])) == pytest.approx(0.05 / 3)  # none: Bonferroni's level
    assert stats.holm([0.6, 0.6]) == [1.0, 1.0]  # capped at 1
    assert stats.holm([]) == []


def test_family_of_metrics_adjusts_verdicts_and_widens_intervals():
    # Hit@k-like differences: 9 questions gained, 1 lost, 40 unchanged. Alone the test rejects (p about 0.02); in a
    # family with three metrics that show nothing Holm's first step needs p < 0.05 / 4 and keeps it.
    gained = [1.0] * 9 + [-1.0] + [0.0] * 40
    old, new = _runs_of([0.0 if d >= 0 else 1.0 for d in gained]), _runs_of([max(d, 0.0) for d in gained])
    alone = stats.compare_metric(old, new)
    assert alone.p_value < 0.05 and alone.verdict == "better" and alone.ci[0] > 0
    noise = _runs_of([0.5] * 50), _runs_of([0.5] * 50)
    family = stats.compare_family({"hit": (old, new), "a": noise, "b": noise, "c": noise})
    hit = family["hit"]
    assert hit.p_value == alone.p_value and hit.p_adjusted == pytest.approx(4 * alone.p_value)
    assert hit.verdict == stats.VERDICT_NONE and hit.ci[0] <= 0 < hit.ci[1]
    assert hit.level == pytest.approx(0.05 / 4) and hit.family == 4


def test_compare_metric_bundle():
    old = {"a": 0.0, "b": 0.5, "c": 1.0, "d": 0.5}
    new = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0}
    # diffs sorted by qid: a +1, b -0.5, c 0, d +0.5 (the same as the required_sample_size case)
    result = stats.compare_metric(old, new)
    assert result.n == 4
    assert result.old_mean == 0.5
    assert result.new_mean == 0.75
    assert result.diff == 0.25
    # Non-zero diffs 1, -0.5, 0.5, observed sum 1: sign patterns (+ = kept sign)
    # +++ 1*  ++- 0  +-+ 2*  +-- 1*  -++ -1*  -+- -2*  --+ 0  --- -1*  -> 6/8 = 0.75
    assert result.p_value == 0.75 and result.p_adjusted == 0.75
    assert result.verdict == "no detectable difference at this goldset size"
    assert result.needed_n == 53
    low, high = result.ci
    assert low < 0.0 < 0.25 < high
    assert (result.family, result.level, result.exact) == (1, 0.05, True)


# ---------------------------------------------------------------------------
# scipy.stats as the reference


def _runs_of(values):
    return {f"q{i:04d}": float(v) for i, v in enumerate(values)}


def _scipy_exact_p(diffs):
    """scipy's exact two-sided sign-flip test over every pattern of all differences, zeros included."""
    result = scipy.stats.permutation_test((np.asarray(diffs, dtype=float),), np.mean, permutation_type="samples",
                                          vectorized=True, n_resamples=np.inf)
    return float(result.pvalue)


def _exact_cases():
    yield [1.0, 1.0, 1.0, -1.0]
    yield [1.0, 1.0, 1.0, -1.0, 0.0, 0.0]
    yield [1.0, -0.5, 0.0, 0.5]
    yield [0.0, 0.0, 1.0]
    yield [-2 / 3, -1 / 3, 0.2 - 0.25, 2 / 3, 0.2]  # the float-rounding trap above
    yield [0.1 * (i % 3 + 1) * (-1) ** i for i in range(stats.EXACT_MAX_NONZERO)]
    rng = np.random.default_rng(11)
    for _ in range(40):  # quarter steps are exact in binary: ties are exact ties
        yield list(rng.integers(-4, 5, size=int(rng.integers(2, 13))) / 4)


@pytest.mark.parametrize("diffs", list(_exact_cases()))
def test_exact_randomization_p_equals_scipy_permutation_test(diffs):
    old, new = _runs([0.0] * len(diffs), base=0.0)[0], _runs(diffs, base=0.0)[1]
    assert stats.paired_randomization_test(old, new) == _scipy_exact_p(diffs)


def test_randomization_counts_a_tie_that_scipy_tolerance_misses():
    # MRR of ranks old 4 6 8 7 6 2 5 4 5 and new 6 2 10 10 4 9 10 3 3. The observed sum is -17/2520; sign
    # patterns whose exact sum ties with it come out of float arithmetic further apart than scipy's tolerance
    # (100 ulp of the statistic): of the 512 patterns scipy.stats.permutation_test counts 508 (p = 254/256), our
    # tolerance counts 510 (p = 255/256), as exact arithmetic does.
    old_ranks, new_ranks = [4, 6, 8, 7, 6, 2, 5, 4, 5], [6, 2, 10, 10, 4, 9, 10, 3, 3]
    old = {f"q{i}": 1 / r for i, r in enumerate(old_ranks)}
    new = {f"q{i}": 1 / r for i, r in enumerate(new_ranks)}
    exact = [Fraction(1, b) - Fraction(1, a) for a, b in zip(old_ranks, new_ranks) if a != b]
    observed = abs(sum(exact))
    hits = sum(abs(sum(s * d for s, d in zip(signs, exact))) >= observed
               for signs in itertools.product((1, -1), repeat=len(exact)))
    assert hits == 510
    assert stats.paired_randomization_test(old, new) == hits / 2 ** len(exact)
