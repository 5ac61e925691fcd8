"""Calibrating the LLM judge of answers against a few human labels: how far it agrees with people, and the rate of
correct answers its verdicts and those labels give together.

Why: a small LLM can judge every chat answer, people only a few. Two questions follow. Does the judge agree with
people beyond chance? Cohen's kappa (Cohen, "A coefficient of agreement for nominal scales", Educational and
Psychological Measurement 20(1), 1960), shown with both raters' base rates, since a judge that says "correct" to
everything agrees often with a lenient person and still has kappa 0. And what is the rate of correct answers?
The judge's rate alone is biased by its errors; the labels alone are few. Prediction-powered inference (Angelopoulos,
Bates, Fannjiang, Jordan & Zrnic, "Prediction-powered inference", Science 382, 2023) corrects the judge's rate on
the N unlabelled questions by its error measured on the n labelled ones; PPI++ (Angelopoulos, Duchi & Zrnic,
"PPI++: Efficient Prediction-Powered Inference", arXiv 2311.01453, 2023) weighs the judge by a power-tuned lambda,
so a poor judge costs nothing against the labels alone (lambda 0) and a good one helps (lambda near 1). Lambda 1 is
classic PPI, as ARES uses it (Saad-Falcon et al., NAACL 2024).

The formulas are those of the paper in the mean case, computed as the reference implementation ppi-python 0.2.3
computes them (ppi_py.ppi_mean_pointestimate, ppi_mean_ci, _calc_lam_glm with clip=True; bench/ppi_check.py
compares them on seeded cases), with the normal approximation's two-sided interval. Where every judge verdict is
the same, that code's lambda is 0/0 (NaN, so NaN estimates) and this module's 0, documented at `power_tuned_lambda`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Default error level: 95% intervals (ppi-python's default is 0.1).
DEFAULT_ALPHA = 0.05
# Why kappa is None when both raters gave one and the same verdict throughout.
KAPPA_UNDEFINED = ("undefined: judge and people gave the same single verdict to every question (expected agreement "
                   "1), so agreement beyond chance cannot be measured; label questions of both kinds")
# RateEstimate.method: which estimate it is.
METHOD_PPI_TUNED = "PPI++ (power-tuned lambda)"
METHOD_PPI_FIXED = "PPI (fixed lambda)"
METHOD_LABELS = "labels only"
METHOD_JUDGE = "judge only"


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa of the judge against people on n questions, with both base rates (shares of True).

    `kappa` is None exactly when the expected agreement is 1 (both raters constant and equal); `reason` then says
    why. Raters constant but opposite have expected agreement 0 and kappa 0."""
    n: int
    observed: float
    expected: float
    kappa: float | None
    judge_rate: float
    human_rate: float
    reason: str | None = None


@dataclass(frozen=True)
class RateEstimate:
    """A rate (share of correct answers) with its standard error and (1 - alpha) normal interval [low, high].

    `lam` is the lambda used (None where no judge correction enters); `n_labeled` is n, `n_unlabeled` is N. Like
    ppi-python, neither the estimate nor the interval is clipped to [0, 1]: a report may clip them for display."""
    method: str
    estimate: float
    standard_error: float
    low: float
    high: float
    alpha: float
    lam: float | None
    n_labeled: int
    n_unlabeled: int


def cohen_kappa(judge: Sequence[bool], human: Sequence[bool]) -> Kappa:
    """Cohen's kappa of the judge's verdicts against people's labels on the same questions, in the same order."""
    j, h = _binary(judge, "judge"), _binary(human, "human")
    _check_pairs(len(j), len(h), "judge", "human")
    n = len(j)
    agree = sum(a == b for a, b in zip(j, h))
    yes_j, yes_h = sum(j), sum(h)
    # n^2 times the expected agreement, a whole number: "expected agreement is 1" is tested exactly.
    chance = yes_j * yes_h + (n - yes_j) * (n - yes_h)
    common = dict(n=n, observed=agree / n, expected=chance / (n * n), judge_rate=yes_j / n, human_rate=yes_h / n)
    if chance == n * n:
        return Kappa(kappa=None, reason=KAPPA_UNDEFINED, **common)
    # (p_o - p_e) / (1 - p_e) with both multiplied by n^2: one rounding only.
    return Kappa(kappa=(n * agree - chance) / (n * n - chance), **common)


def power_tuned_lambda(labeled_judge: Sequence[bool], labeled_human: Sequence[bool],
                       unlabeled_judge: Sequence[bool], clip: bool = True) -> float:
    """PPI++'s lambda for a mean: Cov(Y, Yhat) / ((1 + n/N) Var(Yhat)), clipped to [0, 1] unless clip is False.

    As ppi-python estimates them: the covariance over the n labelled pairs divided by n, the variance over all
    n + N judge verdicts divided by n + N - 1. Where all n + N verdicts are equal the formula is 0/0: ppi-python
    gives NaN, and so NaN estimates (or, where its centring leaves a hair of variance, rounding noise anywhere in
    [0, 1]); here lambda is 0, since then every lambda gives the same estimate (the labels' mean) and the same
    standard error."""
    y, yhat, yhat_u = _ppi_inputs(labeled_judge, labeled_human, unlabeled_judge)
    return _tuned_lambda(y, yhat, yhat_u, clip)


def ppi_mean(labeled_judge: Sequence[bool], labeled_human: Sequence[bool], unlabeled_judge: Sequence[bool],
             alpha: float = DEFAULT_ALPHA, lam: float | None = None) -> RateEstimate:
    """The prediction-powered rate: lam * mean(judge on N) + mean(human - lam * judge on n), with its interval.

    lam None: power-tuned (`power_tuned_lambda`, clipped to [0, 1]); a number: fixed (1 is classic PPI, 0 the
    labels alone). Standard error sqrt(Var(lam * judge on N) / N + Var(human - lam * judge on n) / n), variances
    divided by their counts, as ppi-python. All n labels equal (or n = 1) with lambda 0 gives standard error 0
    and a zero-width interval, as in ppi-python: the normal approximation says nothing there."""
    y, yhat, yhat_u = _ppi_inputs(labeled_judge, labeled_human, unlabeled_judge)
    _check_alpha(alpha)
    if lam is None:
        used, method = _tuned_lambda(y, yhat, yhat_u, clip=True), METHOD_PPI_TUNED
    else:
        if not math.isfinite(lam):
            raise ValueError(f"lam must be a finite number or None (power-tuned), not {lam!r}")
        used, method = float(lam), METHOD_PPI_FIXED
    n, big_n = len(y), len(yhat_u)
    imputed, rectifier = used * yhat_u, y - used * yhat
    estimate = float(imputed.mean() + rectifier.mean())
    se = float(np.sqrt((imputed.std() / np.sqrt(big_n)) ** 2 + (rectifier.std() / np.sqrt(n)) ** 2))
    return _estimate(method, estimate, se, alpha, used, n, big_n)


def labels_only_mean(labeled_human: Sequence[bool], alpha: float = DEFAULT_ALPHA) -> RateEstimate:
    """The classical rate of the n human labels: their mean, standard error sd / sqrt(n) with the variance divided
    by n (not n - 1), as ppi_py.baselines.classical_mean_ci. All labels equal gives a zero-width interval."""
    y = _array(labeled_human, "labeled_human")
    if len(y) == 0:
        raise ValueError("no labelled questions: the labels-only rate needs at least one human label")
    _check_alpha(alpha)
    return _estimate(METHOD_LABELS, float(y.mean()), float(y.std() / np.sqrt(len(y))), alpha, None, len(y), 0)


def judge_only_mean(labeled_judge: Sequence[bool], unlabeled_judge: Sequence[bool],
                    alpha: float = DEFAULT_ALPHA) -> RateEstimate:
    """The judge's rate on all n + N questions, with the classical interval of that mean: it covers the judge's
    own rate, not the true one, whatever bias the judge has."""
    yhat, yhat_u = _array(labeled_judge, "labeled_judge"), _array(unlabeled_judge, "unlabeled_judge")
    both = np.concatenate([yhat, yhat_u])
    if len(both) == 0:
        raise ValueError("no judge verdicts: the judge-only rate needs at least one")
    _check_alpha(alpha)
    se = float(both.std() / np.sqrt(len(both)))
    return _estimate(METHOD_JUDGE, float(both.mean()), se, alpha, None, len(yhat), len(yhat_u))


def _tuned_lambda(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray, clip: bool) -> float:
    """`power_tuned_lambda` on checked arrays."""
    predictions = np.concatenate([yhat, yhat_u])
    if predictions.min() == predictions.max():
        return 0.0
    n, big_n = len(y), len(yhat_u)
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    lam = cov / ((1 + n / big_n) * float(np.var(predictions, ddof=1)))
    return min(max(lam, 0.0), 1.0) if clip else lam


def _estimate(method: str, estimate: float, se: float, alpha: float, lam: float | None, n: int,
              big_n: int) -> RateEstimate:
    """The RateEstimate with the two-sided normal interval estimate -+ z(1 - alpha/2) * se."""
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
    return RateEstimate(method, estimate, se, estimate - z * se, estimate + z * se, alpha, lam, n, big_n)


def _ppi_inputs(labeled_judge: Sequence[bool], labeled_human: Sequence[bool],
                unlabeled_judge: Sequence[bool]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(human labels, judge on them, judge on the rest) as float arrays, checked: n >= 1 pairs, N >= 1."""
    yhat, y = _array(labeled_judge, "labeled_judge"), _array(labeled_human, "labeled_human")
    yhat_u = _array(unlabeled_judge, "unlabeled_judge")
    _check_pairs(len(yhat), len(y), "labeled_judge", "labeled_human")
    if len(yhat_u) == 0:
        # ppi-python divides by N; with no unlabelled question there is nothing for the judge to add.
        raise ValueError("no unlabelled questions (N = 0): PPI needs judge verdicts on questions without human "
                         "labels; use labels_only_mean for the labels alone")
    return y, yhat, yhat_u


def _check_pairs(n_judge: int, n_human: int, judge_name: str, human_name: str) -> None:
    """Equal, non-zero lengths of the judge's verdicts and people's labels on the same questions."""
    if n_judge != n_human:
        raise ValueError(f"{judge_name} and {human_name} differ in length ({n_judge} vs {n_human}): they must be "
                         f"the judge's verdicts and people's labels on the same questions, in the same order")
    if n_judge == 0:
        raise ValueError(f"{judge_name} and {human_name} are empty: at least one labelled question is needed")


def _check_alpha(alpha: float) -> None:
    """An error level strictly between 0 and 1."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie strictly between 0 and 1, not {alpha!r}")


def _binary(values: Sequence[bool], name: str) -> list[int]:
    """The verdicts as 0/1 whole numbers; anything but True/False/0/1 is a ValueError naming its position."""
    out = []
    for i, v in enumerate(values):
        # `v == 1` is True for True, 1, 1.0 and numpy's scalars; NaN, strings and None compare unequal to both.
        if not (v == 0 or v == 1):
            raise ValueError(f"{name}[{i}] is {v!r}: verdicts and labels must be True/False (or 1/0)")
        out.append(int(v == 1))
    return out


def _array(values: Sequence[bool], name: str) -> np.ndarray:
    """The checked 0/1 verdicts as a float array."""
    return np.asarray(_binary(values, name), dtype=float)
