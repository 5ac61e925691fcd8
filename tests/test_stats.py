"""Tests of localrag.stats: hand-computed values, and scipy.stats as the reference where it agrees."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats

from localrag import stats

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
    low, high = stats.paired_bootstrap_ci(old, new)
    assert low <= 0.0 <= high
    assert stats.required_sample_size([0.0] * 30) is None
    result = stats.compare_metric(old, new)
    assert result["p_value"] == 1.0
    assert result["diff"] == 0.0
    assert result["verdict"] == "no detectable difference at this goldset size"
    assert result["needed_n"] is None


def test_winning_on_all_20_queries_is_better():
    # Only the all-plus and all-minus sign patterns reach the observed |sum|: exact p = 2/2^20.
    # Monte Carlo (20 > EXACT_MAX_NONZERO) then gives about 1/10001.
    old, new = _runs([0.01 * (i + 1) for i in range(20)])
    p = stats.paired_randomization_test(old, new)
    assert p < 0.001
    low, high = stats.paired_bootstrap_ci(old, new)
    assert 0.0 < low <= high
    result = stats.compare_metric(old, new)
    assert result["verdict"] == "better"
    assert result["n"] == 20
    # mean diff = 0.01 * (1 + ... + 20) / 20 = 0.105
    assert result["diff"] == pytest.approx(0.105)
    assert stats.compare_metric(new, old)["verdict"] == "worse"


def test_bootstrap_is_seeded_and_independent_of_dict_order():
    old, new = _runs([0.3, -0.1, 0.2, 0.0, 0.5, -0.4, 0.1, 0.25])
    first = stats.paired_bootstrap_ci(old, new, seed=42)
    assert stats.paired_bootstrap_ci(old, new, seed=42) == first
    reversed_old = dict(reversed(list(old.items())))
    reversed_new = dict(reversed(list(new.items())))
    assert stats.paired_bootstrap_ci(reversed_old, reversed_new, seed=42) == first
    assert stats.paired_bootstrap_ci(old, new, seed=43) != first


def test_bootstrap_ci_of_two_queries_by_hand():
    # diffs [0, 1]: a resample of 2 has mean 0 (p=1/4), 0.5 (1/2) or 1 (1/4). Among 10000
    # resamples both extremes occur far more than 2.5% of the time, so the 95% CI is (0, 1).
    old, new = _runs([0.0, 1.0], base=0.0)
    assert stats.paired_bootstrap_ci(old, new) == (0.0, 1.0)


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
        stats.paired_bootstrap_ci({"q1": 0.1, "q2": 0.2}, {"q1": 0.3})
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


def test_verdict_needs_both_p_and_ci():
    assert stats.verdict((0.01, 0.2), 0.01) == "better"
    assert stats.verdict((-0.2, -0.01), 0.01) == "worse"
    none = "no detectable difference at this goldset size"
    assert stats.verdict((-0.01, 0.2), 0.01) == none  # significant p, CI touches 0
    assert stats.verdict((0.01, 0.2), 0.2) == none  # CI above 0, p too large
    assert stats.verdict((0.01, 0.2), 0.05) == none  # p == alpha is not < alpha
    assert stats.verdict((0.0, 0.2), 0.001) == none  # CI including 0 does not exclude it
    with pytest.raises(ValueError, match="low <= high"):
        stats.verdict((0.2, 0.1), 0.01)


def test_compare_metric_bundle():
    old = {"a": 0.0, "b": 0.5, "c": 1.0, "d": 0.5}
    new = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0}
    # diffs sorted by qid: a +1, b -0.5, c 0, d +0.5 (the same as the required_sample_size case)
    result = stats.compare_metric(old, new)
    assert result["n"] == 4
    assert result["old_mean"] == 0.5
    assert result["new_mean"] == 0.75
    assert result["diff"] == 0.25
    # Non-zero diffs 1, -0.5, 0.5, observed sum 1: sign patterns (+ = kept sign)
    # +++ 1*  ++- 0  +-+ 2*  +-- 1*  -++ -1*  -+- -2*  --+ 0  --- -1*  -> 6/8 = 0.75
    assert result["p_value"] == 0.75
    assert result["verdict"] == "no detectable difference at this goldset size"
    assert result["needed_n"] == 53
    low, high = result["ci"]
    assert low < 0.25 < high
    assert set(result) == {"n", "old_mean", "new_mean", "diff", "ci", "p_value", "verdict", "needed_n"}


# ---------------------------------------------------------------------------
# scipy.stats as the reference


def _former_bootstrap_ci(diffs, resamples, seed, alpha):
    """The bootstrap as this module computed it before scipy did: seeded draws in blocks, numpy.quantile."""
    diffs = np.asarray(diffs, dtype=float)
    n = len(diffs)
    rng = np.random.default_rng(seed)
    block = max(1, stats.BLOCK_CELLS // n)
    means = np.concatenate([diffs[rng.integers(0, n, size=(min(block, resamples - start), n))].mean(axis=1)
                            for start in range(0, resamples, block)])
    return tuple(np.quantile(means, [alpha / 2, 1 - alpha / 2]))


@pytest.mark.parametrize("n, resamples, seed, alpha", [(2, 10_000, 0, 0.05), (7, 2_000, 3, 0.05),
                                                       (54, 10_000, 0, 0.05), (301, 10_000, 1, 0.1),
                                                       (1_000, 3_000, 7, 0.05)])
def test_scipy_bootstrap_draws_the_resamples_of_the_former_code(n, resamples, seed, alpha):
    # n = 301 and 1,000 need more than one block (BLOCK_CELLS // n < resamples): scipy's batches draw the same
    # stream. The percentile interpolation may differ in the last bit (scipy.stats.quantile vs numpy.quantile).
    rng = np.random.default_rng(n)
    old_values = 1.0 / rng.integers(1, 21, size=n)
    new_values = np.where(rng.random(n) < 0.2, 0.0, 1.0 / rng.integers(1, 21, size=n))
    old, new = _runs_of(old_values), _runs_of(new_values)
    expected = _former_bootstrap_ci(new_values - old_values, resamples, seed, alpha)
    assert stats.paired_bootstrap_ci(old, new, resamples=resamples, seed=seed, alpha=alpha) == pytest.approx(
        expected, rel=1e-12, abs=1e-15)


def _runs_of(values):
    return {f"q{i:04d}": float(v) for i, v in enumerate(values)}


def test_bootstrap_of_one_query_is_that_query():
    # scipy refuses a sample of one; every resample of one query is that query.
    assert stats.paired_bootstrap_ci({"q": 0.25}, {"q": 1.0}) == (0.75, 0.75)


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
