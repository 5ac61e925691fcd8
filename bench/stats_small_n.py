"""How the comparison's interval and verdict behave on few questions, against the truth of many.

Reads two JSON reports of the same queries (e.g. two `eval_retrieval.py --dataset ../shared/data/scifact --split
train` runs of different modes: 809 queries) and takes the mean per-query difference of `--metric` over all of
them as the truth. Then, for each size n of `--sizes`, it draws `--draws` seeded subsamples of n queries (without
replacement) and compares the two runs on each subsample as the tool does, and with two other intervals:

- the tool: the paired randomization test inverted over shifts (localrag.evaluation.stats.shift_test), its verdict p < alpha;
- percentile bootstrap (the tool's former interval, scipy.stats.bootstrap) beside the randomization test's p (the
  former verdict needed both, so it could show an interval without 0 and "no detectable difference");
- Student's t interval of the mean difference beside the paired t-test.

Per method and n it prints: coverage (the share of intervals that contain the truth; 1 - alpha is the target),
the median width, the share of subsamples with a verdict (p < alpha: the power to see the full sample's difference)
and the share with a verdict of the wrong sign (type III error), and, for the former pair, how often interval and
verdict disagreed. Run from the repository root:

    python bench/stats_small_n.py OLD.json NEW.json [--metric ndcg@10] [--sizes 10,20,30,50,100] [--draws 2000]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from localrag.evaluation import stats  # noqa: E402 - the repository root is on sys.path above
from localrag.cli import HelpFormatter  # noqa: E402


def per_query(path: str, metric: str) -> dict[str, float]:
    """query id -> the metric's per-query value in a JSON report."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {q["query_id"]: float(q["metrics"][metric]) for q in data["per_query"]}


def bootstrap_interval(diffs: np.ndarray, resamples: int, seed: int, alpha: float) -> tuple[float, float]:
    import scipy.stats

    if len(diffs) == 1 or np.all(diffs == diffs[0]):
        return float(diffs[0]), float(diffs[0])
    result = scipy.stats.bootstrap((diffs,), np.mean, n_resamples=resamples, vectorized=True,
                                   confidence_level=1 - alpha, method="percentile", rng=np.random.default_rng(seed))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def t_interval(diffs: np.ndarray, alpha: float) -> tuple[tuple[float, float], float]:
    """(Student's t interval of the mean, the paired t-test's two-sided p)."""
    import scipy.stats

    n, mean = len(diffs), float(diffs.mean())
    sd = float(diffs.std(ddof=1)) if n > 1 else 0.0
    if sd == 0.0:
        return (mean, mean), (1.0 if mean == 0.0 else 0.0)
    se = sd / math.sqrt(n)
    half = float(scipy.stats.t.ppf(1 - alpha / 2, n - 1)) * se
    return (mean - half, mean + half), float(2 * scipy.stats.t.sf(abs(mean) / se, n - 1))


class Tally:
    """Coverage, widths, verdicts and wrong-sign verdicts of one method at one n."""

    def __init__(self) -> None:
        self.covered = self.verdicts = self.wrong = self.disagree = self.draws = 0
        self.widths: list[float] = []

    def add(self, interval: tuple[float, float], rejects: bool, truth: float, mean: float,
            excludes_zero: bool | None = None) -> None:
        low, high = interval
        self.draws += 1
        self.covered += low <= truth <= high
        self.widths.append(high - low)
        self.verdicts += rejects
        self.wrong += rejects and truth != 0 and (mean > 0) != (truth > 0)
        if excludes_zero is not None:
            self.disagree += excludes_zero != rejects

    def row(self, name: str, n: int, disagreement: bool) -> str:
        d = self.draws
        extra = f"  {self.disagree / d:>10.3f}" if disagreement else f"  {'-':>10}"
        return (f"  {n:>4}  {name:<32}{self.covered / d:>9.3f}{float(np.median(self.widths)):>9.3f}"
                f"{self.verdicts / d:>9.3f}{self.wrong / d:>9.3f}{extra}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("old", help="JSON report of the first run")
    p.add_argument("new", help="JSON report of the second run (same queries)")
    p.add_argument("--metric", default="ndcg@10", help="per-query metric compared")
    p.add_argument("--sizes", default="10,20,30,50,100", help="subsample sizes, comma-separated")
    p.add_argument("--draws", type=int, default=2000, help="subsamples per size")
    p.add_argument("--resamples", type=int, default=stats.DEFAULT_RESAMPLES, help="sign patterns / bootstrap "
                                                                                  "resamples per comparison")
    p.add_argument("--alpha", type=float, default=stats.DEFAULT_ALPHA, help="level of every test")
    p.add_argument("--seed", type=int, default=0, help="seed of the subsamples")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    old, new = per_query(args.old, args.metric), per_query(args.new, args.metric)
    if set(old) != set(new):
        print(f"error: the reports cover different queries ({len(old)} and {len(new)})", file=sys.stderr)
        return 2
    qids = sorted(old)
    diffs_all = np.array([new[q] - old[q] for q in qids])
    truth = float(diffs_all.mean())
    full = stats.compare_metric(old, new, resamples=args.resamples, alpha=args.alpha)
    started, load = time.perf_counter(), os.getloadavg()[0]
    print(f"{args.metric}: {Path(args.new).name} - {Path(args.old).name} over all {len(qids)} queries: "
          f"{truth:+.4f} (the truth below); the tool on all of them: {full.ci[0]:+.4f} to {full.ci[1]:+.4f}, "
          f"p = {full.p_value:.4f}, {full.verdict}; {np.count_nonzero(diffs_all)} queries differ")
    print(f"{args.draws} subsamples per size (seed {args.seed}), alpha {args.alpha:g}, {args.resamples:,} resamples")
    print(f"  {'n':>4}  {'method':<32}{'coverage':>9}{'width':>9}{'verdict':>9}{'wrong':>9}  {'disagree':>10}")
    rng = np.random.default_rng(args.seed)
    for n in (int(s) for s in args.sizes.split(",")):
        tool, former, student = Tally(), Tally(), Tally()
        for draw in range(args.draws):
            picked = sorted(rng.choice(len(qids), size=n, replace=False))
            sub_old = {qids[i]: old[qids[i]] for i in picked}
            sub_new = {qids[i]: new[qids[i]] for i in picked}
            diffs = diffs_all[picked]
            mean = float(diffs.mean())
            test = stats.shift_test(sub_old, sub_new, args.resamples, seed=draw)
            tool.add(test.interval(args.alpha), test.rejects(args.alpha), truth, mean)
            low, high = bootstrap_interval(diffs, args.resamples, draw, args.alpha)
            former.add((low, high), test.p_value < args.alpha, truth, mean, excludes_zero=low > 0 or high < 0)
            interval, p = t_interval(diffs, args.alpha)
            student.add(interval, p < args.alpha, truth, mean)
        print(tool.row("randomization, inverted (tool)", n, False))
        print(former.row("bootstrap + randomization (former)", n, True))
        print(student.row("t interval + t-test", n, False))
    print(f"  ({time.perf_counter() - started:.0f} s; load average {load:.2f} before, {os.getloadavg()[0]:.2f} after)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
