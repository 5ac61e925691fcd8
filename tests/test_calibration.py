"""Tests for localrag/evaluation/calibration.py: Cohen's kappa and the PPI++ / PPI / labels-only / judge-only rates.

Every expected value is worked out by hand in the comments (fractions), and asserted to 1e-12 relative: a wrong
formula (n - 1 for n, the wrong variance, no clipping) fails. bench/ppi_check.py compares with ppi-python itself.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from localrag.evaluation.calibration import (KAPPA_UNDEFINED, METHOD_JUDGE, METHOD_LABELS, METHOD_PPI_FIXED,
                                             METHOD_PPI_TUNED, Kappa, RateEstimate, cohen_kappa, judge_only_mean,
                                             labels_only_mean, power_tuned_lambda, ppi_mean)

# z(0.975) and z(0.95): the two-sided 95% and 90% normal quantiles.
Z95 = 1.959963984540054
Z90 = 1.6448536269514722
T, F = True, False


def close(x: float) -> object:
    return pytest.approx(x, rel=1e-12, abs=1e-15)


def assert_estimate(got: RateEstimate, estimate: float, se: float, z: float = Z95) -> None:
    assert got.estimate == close(estimate)
    assert got.standard_error == close(se)
    assert (got.low, got.high) == (close(estimate - z * se), close(estimate + z * se))


# ---- Cohen's kappa: kappa = (p_o - p_e) / (1 - p_e), p_e = pJ * pH + (1 - pJ) * (1 - pH) ----

def test_kappa_and_both_base_rates_by_hand():
    # judge T T F F, people T T T F: agree on 3 of 4, p_o = 3/4; pJ = 2/4, pH = 3/4;
    # p_e = 1/2 * 3/4 + 1/2 * 1/4 = 1/2; kappa = (3/4 - 1/2) / (1 - 1/2) = 1/2.
    assert cohen_kappa([T, T, F, F], [T, T, T, F]) == Kappa(n=4, observed=0.75, expected=0.5, kappa=0.5,
                                                            judge_rate=0.5, human_rate=0.75, reason=None)


def test_kappa_of_a_third():
    # judge T T T F F F, people T T F T F F: agree on 1, 2, 5, 6: p_o = 4/6; pJ = pH = 1/2, p_e = 1/2;
    # kappa = (2/3 - 1/2) / (1/2) = 1/3.
    k = cohen_kappa([T, T, T, F, F, F], [T, T, F, T, F, F])
    assert (k.observed, k.expected, k.judge_rate, k.human_rate) == (close(2 / 3), 0.5, 0.5, 0.5)
    assert k.kappa == close(1 / 3)


def test_a_judge_that_always_says_correct_agrees_75_percent_with_kappa_0():
    # The trap: p_o = 3/4 looks good. pJ = 1, pH = 3/4: p_e = 1 * 3/4 + 0 * 1/4 = 3/4, kappa = 0 / (1/4) = 0.
    k = cohen_kappa([T, T, T, T], [T, T, T, F])
    assert (k.observed, k.expected, k.kappa, k.judge_rate, k.human_rate) == (0.75, 0.75, 0.0, 1.0, 0.75)


def test_a_judge_that_is_always_wrong_has_kappa_minus_1():
    # p_o = 0; pJ = pH = 1/2, p_e = 1/2; kappa = (0 - 1/2) / (1/2) = -1.
    assert cohen_kappa([T, F, T, F], [F, T, F, T]).kappa == -1.0


@pytest.mark.parametrize("verdict", [True, False])
def test_kappa_is_none_with_a_reason_when_both_raters_give_one_same_verdict(verdict):
    # pJ = pH = 1 (or 0): p_e = 1, kappa = 0/0: None, never NaN, 0 or 1.
    k = cohen_kappa([verdict] * 3, [verdict] * 3)
    assert k == Kappa(n=3, observed=1.0, expected=1.0, kappa=None, judge_rate=float(verdict),
                      human_rate=float(verdict), reason=KAPPA_UNDEFINED)


def test_constant_but_opposite_raters_have_kappa_0():
    # pJ = 1, pH = 0: p_e = 1 * 0 + 0 * 1 = 0, p_o = 0: kappa = 0 / 1 = 0 (defined).
    k = cohen_kappa([T, T, T], [F, F, F])
    assert (k.observed, k.expected, k.kappa, k.reason) == (0.0, 0.0, 0.0, None)


def test_kappa_takes_numpy_booleans_and_0_1():
    assert cohen_kappa(np.array([1, 1, 0, 0], dtype=bool), [1, 1, 1, 0]).kappa == 0.5


def test_kappa_refuses_unequal_empty_and_non_boolean_inputs():
    with pytest.raises(ValueError, match=r"judge and human differ in length \(4 vs 3\)"):
        cohen_kappa([T, T, F, F], [T, T, F])
    with pytest.raises(ValueError, match="empty"):
        cohen_kappa([], [])
    with pytest.raises(ValueError, match=r"human\[1\] is 2"):
        cohen_kappa([T, F], [1, 2])
    with pytest.raises(ValueError, match=r"judge\[0\] is nan"):
        cohen_kappa([math.nan], [T])


# ---- PPI++ (lambda power-tuned and clipped), classic PPI (lambda 1), labels only, judge only ----
# Case A, n = 4, N = 6. Labelled (judge, human): (1, 1) (1, 1) (0, 1) (0, 0); judge on the 6 others: 1 1 1 1 0 0.
# mean(human) = 3/4, mean(judge on n) = 1/2, mean(judge on N) = 4/6 = 2/3.
A = ([1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1, 0, 0])


def test_power_tuned_lambda_by_hand():
    # Cov(human, judge) over the n pairs, divided by n: mean(human * judge) - 3/4 * 1/2 = 2/4 - 3/8 = 1/8.
    # Var(judge) over all n + N = 10 verdicts (6 True, mean 3/5), divided by n + N - 1 = 9:
    # (6 * (2/5)^2 + 4 * (3/5)^2) / 9 = (60/25) / 9 = 4/15.
    # lambda = (1/8) / ((1 + 4/6) * 4/15) = (1/8) / (4/9) = 9/32.
    assert power_tuned_lambda(*A) == close(9 / 32)


def test_ppi_plus_plus_by_hand():
    # estimate = 9/32 * 2/3 + (3/4 - 9/32 * 1/2) = 12/64 + 48/64 - 9/64 = 51/64.
    # SE^2 = Var(9/32 * judge on N) / N + Var(human - 9/32 * judge on n) / n, variances divided by their counts:
    #   Var(judge on N) = 2/3 * 1/3 = 2/9, so (81/1024) * (2/9) / 6 = 3/1024 = 48/16384;
    #   human - 9/32 * judge = 23/32, 23/32, 1, 0: mean 39/64, mean of squares 1041/2048,
    #   variance 1041/2048 - 1521/4096 = 561/4096, divided by 4: 561/16384.
    # SE^2 = 609/16384, SE = sqrt(609) / 128 (about 0.1928); interval 51/64 -+ 1.96 * SE.
    got = ppi_mean(*A)
    assert (got.method, got.lam, got.alpha, got.n_labeled, got.n_unlabeled) == (METHOD_PPI_TUNED, close(9 / 32),
                                                                                 0.05, 4, 6)
    assert_estimate(got, 51 / 64, math.sqrt(609) / 128)


def test_classic_ppi_by_hand():
    # lambda 1: estimate = 2/3 + mean(human - judge on n) = 2/3 + 1/4 = 11/12.
    # SE^2 = Var(judge on N) / 6 + Var(0, 0, 1, 0) / 4 = (2/9) / 6 + (3/16) / 4 = 1/27 + 3/64 = 145/1728.
    got = ppi_mean(*A, lam=1)
    assert (got.method, got.lam) == (METHOD_PPI_FIXED, 1.0)
    assert_estimate(got, 11 / 12, math.sqrt(145 / 1728))


def test_labels_only_and_judge_only_by_hand():
    # Labels only: 3 of 4, variance 3/4 * 1/4 = 3/16, SE = sqrt(3/16 / 4) = sqrt(3) / 8 (about 0.2165).
    got = labels_only_mean(A[1])
    assert (got.method, got.lam, got.n_labeled, got.n_unlabeled) == (METHOD_LABELS, None, 4, 0)
    assert_estimate(got, 3 / 4, math.sqrt(3) / 8)
    # Judge only, all 10 verdicts: 6 of 10, variance 3/5 * 2/5 = 6/25, SE = sqrt(6/25 / 10) = sqrt(3/125).
    got = judge_only_mean(A[0], A[2])
    assert (got.method, got.lam, got.n_labeled, got.n_unlabeled) == (METHOD_JUDGE, None, 4, 6)
    assert_estimate(got, 3 / 5, math.sqrt(3 / 125))


def test_power_tuning_is_narrower_than_the_labels_and_than_classic_ppi_here():
    # sqrt(609)/128 = 0.193 < sqrt(3)/8 = 0.217 < sqrt(145/1728) = 0.290: lambda 1 is worse than the labels alone.
    ses = [ppi_mean(*A).standard_error, labels_only_mean(A[1]).standard_error, ppi_mean(*A, lam=1).standard_error]
    assert ses == sorted(ses)


def test_alpha_sets_the_quantile():
    assert_estimate(ppi_mean(*A, alpha=0.1), 51 / 64, math.sqrt(609) / 128, z=Z90)


def test_trap_lambda_above_1_is_clipped_to_1():
    # n = 4, N = 12. (judge, human): (0, 0) (0, 0) (0, 1) (1, 1); judge on the 12 others: all 0.
    # Cov = mean(human * judge) - 1/2 * 1/4 = 1/4 - 1/8 = 1/8; all 16 verdicts: 1 True, variance (÷15)
    # (1 * (15/16)^2 + 15 * (1/16)^2) / 15 = (240/256) / 15 = 1/16; lambda = (1/8) / ((1 + 4/12) * 1/16) = 3/2.
    case = ([0, 0, 0, 1], [0, 0, 1, 1], [0] * 12)
    assert power_tuned_lambda(*case, clip=False) == close(3 / 2)
    assert power_tuned_lambda(*case) == 1.0
    # Clipped, lambda 1: estimate = 0 + mean(0, 0, 1, 0) = 1/4; SE^2 = 0 + (3/16) / 4, SE = sqrt(3) / 8.
    # The interval is not clipped to [0, 1]: low = 1/4 - 1.96 * 0.2165 = -0.174.
    got = ppi_mean(*case)
    assert got.lam == 1.0
    assert_estimate(got, 1 / 4, math.sqrt(3) / 8)
    assert got.low < 0
    # Unclipped, lambda 3/2 would give human - 3/2 * judge = 0, 0, 1, -1/2: estimate 1/8, variance
    # 5/16 - 1/64 = 19/64, SE = sqrt(19/64 / 4) = sqrt(19) / 16 (about 0.272): wider.
    assert_estimate(ppi_mean(*case, lam=1.5), 1 / 8, math.sqrt(19) / 16)


def test_trap_an_always_wrong_judge_gets_lambda_0_and_the_labels_alone():
    # (judge, human): (0, 1) (0, 1) (0, 1) (1, 0); judge on the 6 others: 0 0 0 0 1 1.
    # Cov = 0 - 3/4 * 1/4 = -3/16; all 10 verdicts: 3 True, variance (÷9) 10/9 * 3/10 * 7/10 = 7/30;
    # lambda = (-3/16) / ((5/3) * (7/30)) = (-3/16) / (7/18) = -27/56, clipped to 0.
    case = ([0, 0, 0, 1], [1, 1, 1, 0], [0, 0, 0, 0, 1, 1])
    assert power_tuned_lambda(*case, clip=False) == close(-27 / 56)
    got = ppi_mean(*case)
    assert got.lam == 0.0
    # Lambda 0 is the labels alone: 3/4, SE sqrt(3) / 8, the same numbers as labels_only_mean.
    assert_estimate(got, 3 / 4, math.sqrt(3) / 8)
    labels = labels_only_mean(case[1])
    assert (got.estimate, got.standard_error, got.low, got.high) == (labels.estimate, labels.standard_error,
                                                                     labels.low, labels.high)
    # Classic PPI trusts it: 2/6 + mean(1, 1, 1, -1) = 1/3 + 1/2 = 5/6; SE^2 = (2/9) / 6 + (3/4) / 4 = 97/432.
    assert_estimate(ppi_mean(*case, lam=1), 5 / 6, math.sqrt(97 / 432))


def test_all_judge_verdicts_equal_gives_lambda_0_where_ppi_python_gives_nan():
    # Var(judge) = 0 and Cov = 0: lambda = 0/0. Any lambda gives lambda * 1 + mean(human) - lambda * 1 = 3/4 and
    # SE^2 = 0 + Var(human) / 4 = 3/64, so lambda 0 (the labels alone) is the finite answer.
    case = ([1, 1, 1, 1], [1, 0, 1, 1], [1] * 6)
    assert power_tuned_lambda(*case) == 0.0
    assert power_tuned_lambda(*case, clip=False) == 0.0
    assert_estimate(ppi_mean(*case), 3 / 4, math.sqrt(3) / 8)
    assert_estimate(ppi_mean(*case, lam=1), 3 / 4, math.sqrt(3) / 8)


def test_all_labels_equal_gives_a_zero_width_interval():
    # Labels all 1: Cov = 0, lambda = 0 / (positive) = 0; estimate 1, SE 0: [1, 1] (ppi-python alike).
    got = ppi_mean([1, 0, 0, 1], [1, 1, 1, 1], [1, 0, 1, 0, 0, 0])
    assert (got.lam, got.estimate, got.standard_error, got.low, got.high) == (0.0, 1.0, 0.0, 1.0, 1.0)
    assert labels_only_mean([T]).standard_error == 0.0


def test_ppi_refuses_empty_unequal_and_invalid_inputs():
    with pytest.raises(ValueError, match=r"labeled_judge and labeled_human differ in length \(3 vs 4\)"):
        ppi_mean([1, 1, 0], [1, 1, 1, 0], [1])
    with pytest.raises(ValueError, match="empty: at least one labelled question"):
        ppi_mean([], [], [1, 0])
    with pytest.raises(ValueError, match=r"no unlabelled questions \(N = 0\)"):
        ppi_mean([1], [1], [])
    with pytest.raises(ValueError, match=r"unlabeled_judge\[2\] is 0.5"):
        ppi_mean([1], [1], [1, 0, 0.5])
    with pytest.raises(ValueError, match="alpha must lie strictly between 0 and 1"):
        ppi_mean(*A, alpha=1.0)
    with pytest.raises(ValueError, match="lam must be a finite number"):
        ppi_mean(*A, lam=math.nan)
    with pytest.raises(ValueError, match="no labelled questions"):
        labels_only_mean([])
    with pytest.raises(ValueError, match="no judge verdicts"):
        judge_only_mean([], [])
