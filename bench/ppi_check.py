"""localrag/evaluation/calibration.py against the reference implementation ppi-python on seeded random cases.

For each case (n labelled questions with the judge's verdict and a human label, N more with the judge's verdict
only; rates, judge sensitivity and specificity, n, N and alpha drawn from a seeded generator, plus hand-made edge
cases: n = 1, constant labels, constant verdicts, a perfect and an always-wrong judge) it compares
- PPI++ (power-tuned lambda): lambda with ppi_py.ppi._calc_lam_glm(clip=True), the point estimate with
  ppi_mean_pointestimate, the interval with ppi_mean_ci;
- classic PPI (lambda 1): ppi_mean_pointestimate and ppi_mean_ci at lam=1;
- labels only and judge only: ppi_py.baselines.classical_mean_ci on the labels, on all n + N verdicts;
and prints the largest absolute difference of each figure. Where every judge verdict is equal the tuned lambda is
0/0: calibration.py's is 0 by design, ppi-python's NaN, or rounding noise anywhere in [0, 1] where its centred
verdicts keep a hair of variance. Any lambda gives the same estimate and interval there, so those cases are counted
apart, their lambda is not compared, and the rest is compared with ppi-python at its own lambda (at lam=0 if NaN).
Exit status 1 if any difference exceeds --tolerance or any of our figures is not finite.

ppi-python is not a dependency of the project (not in requirements.txt). Run it from a throwaway venv:

    python3 -m venv /tmp/ppivenv && /tmp/ppivenv/bin/pip install ppi-python numpy
    /tmp/ppivenv/bin/python bench/ppi_check.py [--cases 200] [--seed 0] [--tolerance 1e-9]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from localrag.cli import HelpFormatter  # noqa: E402 - the repository root is on sys.path above
from localrag.evaluation import calibration  # noqa: E402

try:
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
    from ppi_py.baselines import classical_mean_ci
    from ppi_py.ppi import _calc_lam_glm
except ImportError as error:
    sys.exit(f"bench/ppi_check.py needs ppi-python, which is not a project dependency ({error}). Make a throwaway "
             "venv: python3 -m venv /tmp/ppivenv && /tmp/ppivenv/bin/pip install ppi-python numpy; then run "
             "/tmp/ppivenv/bin/python bench/ppi_check.py")

# Sizes drawn from: small labelled sets (where degenerate cases live) up to a few hundred; N up to thousands.
LABELED_SIZES = (1, 2, 3, 4, 5, 8, 10, 20, 30, 50, 100, 300)
UNLABELED_SIZES = (1, 2, 6, 10, 50, 200, 1000, 5000)
ALPHAS = (0.05, 0.1, 0.2)


@dataclass(frozen=True)
class Case:
    human: np.ndarray      # labels on the n labelled questions
    judge: np.ndarray      # the judge on the same n
    judge_rest: np.ndarray  # the judge on the N others
    alpha: float


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    parser.add_argument("--cases", type=int, default=200, help="random cases, besides the fixed edge cases")
    parser.add_argument("--seed", type=int, default=0, help="seed of numpy's generator")
    parser.add_argument("--tolerance", type=float, default=1e-9, help="largest allowed absolute difference")
    return parser.parse_args(argv)


def judged(truth: np.ndarray, sensitivity: float, specificity: float, rng: np.random.Generator) -> np.ndarray:
    """The judge's verdicts on answers of the given truth: right with the given rates."""
    right = np.where(truth == 1, rng.random(len(truth)) < sensitivity, rng.random(len(truth)) < specificity)
    return np.where(right, truth, 1 - truth).astype(float)


def judge_rate(rng: np.random.Generator) -> float:
    """A sensitivity or specificity: 1 in 10% of cases, 0 in 5%, else uniform in [0.3, 1]."""
    u = rng.random()
    return 1.0 if u < 0.1 else 0.0 if u < 0.15 else float(rng.uniform(0.3, 1.0))


def random_cases(count: int, rng: np.random.Generator) -> Iterator[Case]:
    """Seeded cases: the true rate, the judge's sensitivity and specificity (1 or 0 now and then), n, N, alpha."""
    for _ in range(count):
        n, big_n = int(rng.choice(LABELED_SIZES)), int(rng.choice(UNLABELED_SIZES))
        rate = rng.uniform(0.02, 0.98)
        sensitivity, specificity = (judge_rate(rng) for _ in range(2))
        truth = (rng.random(n + big_n) < rate).astype(float)
        verdicts = judged(truth, sensitivity, specificity, rng)
        yield Case(truth[:n], verdicts[:n], verdicts[n:], float(rng.choice(ALPHAS)))


def edge_cases() -> Iterator[Case]:
    """n = 1, constant labels, constant verdicts (ppi-python's NaN), a perfect and an always-wrong judge."""
    a = np.array
    yield Case(a([1.0]), a([1.0]), a([0.0, 1.0]), 0.05)
    yield Case(a([1.0, 1, 1, 1]), a([1.0, 0, 0, 1]), a([1.0, 0, 1, 0, 0, 0]), 0.05)
    yield Case(a([1.0, 0, 1, 1]), a([1.0, 1, 1, 1]), a([1.0] * 6), 0.05)
    yield Case(a([0.0, 0, 0, 1]), a([0.0, 0, 0, 1]), a([0.0] * 6), 0.05)
    yield Case(a([1.0, 1, 1, 0]), a([0.0, 0, 0, 1]), a([0.0, 0, 0, 0, 1, 1]), 0.05)
    yield Case(a([0.0, 0, 1, 1]), a([0.0, 0, 0, 1]), a([0.0] * 12), 0.1)


def reference_lambda(case: Case) -> float:
    """ppi-python's power-tuned lambda for the mean, computed as ppi_mean_pointestimate does."""
    theta = ppi_mean_pointestimate(case.human, case.judge, case.judge_rest, lam=1)
    grads = (case.human - theta).reshape(-1, 1)
    grads_hat = (case.judge - theta).reshape(-1, 1)
    grads_rest = (case.judge_rest - theta).reshape(-1, 1)
    return float(_calc_lam_glm(grads, grads_hat, grads_rest, np.eye(1), clip=True))


def scalar(value: object) -> float:
    return float(np.asarray(value).ravel()[0])


def constant_verdicts(case: Case) -> bool:
    """Every judge verdict the same: the tuned lambda is 0/0."""
    verdicts = np.concatenate([case.judge, case.judge_rest])
    return bool(verdicts.min() == verdicts.max())


def compare(case: Case) -> dict[str, float]:
    """|ours - ppi-python| per figure of one case; lambda left out where every judge verdict is equal."""
    args = (case.judge, case.human, case.judge_rest)
    ref = (case.human, case.judge, case.judge_rest)
    tuned = calibration.ppi_mean(*args, alpha=case.alpha)
    ref_lam = reference_lambda(case)
    ref_tuned_lam = 0.0 if math.isnan(ref_lam) else None  # None: ppi-python tunes lambda itself
    ref_point = scalar(ppi_mean_pointestimate(*ref, lam=ref_tuned_lam))
    ref_low, ref_high = map(scalar, ppi_mean_ci(*ref, alpha=case.alpha, lam=ref_tuned_lam))
    classic = calibration.ppi_mean(*args, alpha=case.alpha, lam=1)
    c_low, c_high = map(scalar, ppi_mean_ci(*ref, alpha=case.alpha, lam=1))
    labels = calibration.labels_only_mean(case.human, alpha=case.alpha)
    l_low, l_high = classical_mean_ci(case.human, alpha=case.alpha)
    judge = calibration.judge_only_mean(case.judge, case.judge_rest, alpha=case.alpha)
    j_low, j_high = classical_mean_ci(np.concatenate([case.judge, case.judge_rest]), alpha=case.alpha)
    pairs = {} if constant_verdicts(case) else {"PPI++ lambda": (tuned.lam, ref_lam)}
    pairs |= {
        "PPI++ point estimate": (tuned.estimate, ref_point),
        "PPI++ interval low": (tuned.low, ref_low),
        "PPI++ interval high": (tuned.high, ref_high),
        "PPI (lambda 1) point estimate": (classic.estimate, scalar(ppi_mean_pointestimate(*ref, lam=1))),
        "PPI (lambda 1) interval low": (classic.low, c_low),
        "PPI (lambda 1) interval high": (classic.high, c_high),
        "labels only interval low": (labels.low, l_low),
        "labels only interval high": (labels.high, l_high),
        "judge only interval low": (judge.low, j_low),
        "judge only interval high": (judge.high, j_high),
    }
    # A NaN of ours (or of the reference outside the known case) makes the difference NaN: reported as a failure.
    return {name: abs(ours - float(theirs)) for name, (ours, theirs) in pairs.items()}


def worse(a: float, b: float) -> float:
    """The larger difference; NaN (a figure not finite) wins, where max(0.0, nan) would drop it."""
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cases = [*edge_cases(), *random_cases(args.cases, np.random.default_rng(args.seed))]
    worst: dict[str, float] = {}
    constant = nan_lambda = clipped_0 = clipped_1 = 0
    for case in cases:
        diffs = compare(case)
        if constant_verdicts(case):
            constant, nan_lambda = constant + 1, nan_lambda + math.isnan(reference_lambda(case))
        raw = calibration.power_tuned_lambda(case.judge, case.human, case.judge_rest, clip=False)
        clipped_0, clipped_1 = clipped_0 + (raw < 0), clipped_1 + (raw > 1)
        for name, diff in diffs.items():
            worst[name] = worse(worst.get(name, 0.0), diff)
    print(f"{len(cases)} cases ({len(cases) - args.cases} edge cases, {args.cases} random with seed {args.seed}); "
          f"ppi-python {metadata.version('ppi-python')}, numpy {np.__version__}")
    print(f"{'figure':32} max |ours - ppi-python|")
    for name, diff in worst.items():
        print(f"{name:32} {diff:.3g}")
    print(f"power-tuned lambda clipped: {clipped_0} cases below 0, {clipped_1} above 1")
    print(f"every judge verdict equal (lambda not compared): {constant} cases; ppi-python's lambda NaN in "
          f"{nan_lambda} (compared at its lam=0), rounding noise in {constant - nan_lambda}")
    bad = [name for name, diff in worst.items() if not diff <= args.tolerance]
    print(f"all within {args.tolerance:g}: " + ("yes" if not bad else "NO: " + ", ".join(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
