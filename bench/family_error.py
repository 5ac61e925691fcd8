"""How often does a table of comparisons report a difference that is not there? Measured, not assumed.

Simulates `--tables` tables of `--rows` rows over `--questions` questions in which every row is drawn from one and
the same distribution, so any "better" or "worse" verdict in a table is a false positive. Each row is compared with
the first on Hit@5 and MRR, as a sweep or an ablation compares its rows (report.SWEEP_COMPARE_METRICS present in a
goldset run): (rows - 1) x 2 tests per table. Per-question scores have the shapes of this tool's goldset runs: each
question has its own difficulty (most questions easy: the first acceptable page at rank 1 in most rows, some hard:
often not found within 20), and every row draws the question's first acceptable rank from that question's
distribution independently, so the rows are exchangeable within a question (the null hypothesis holds exactly) and
paired (the same questions are easy for every row), with many tied questions as in real tables.

Prints the share of tables with any verdict: with the tool's rule (Holm's adjustment over the table's family,
localrag.evaluation.stats.compare_family) and, beside it, with every test at its own alpha (no adjustment), each with its
sampling error (binomial, one standard error), and the share of single tests that rejected. Run from the repository
root:

    python bench/family_error.py [--tables 1000] [--rows 6] [--questions 50] [--resamples 10000]
"""
from __future__ import annotations

import argparse
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

DEPTH = 20  # ranks beyond this are "not found", as a goldset run retrieving 20 pages sees them
HIT_K = 5


def question_ranks(rng: np.random.Generator, questions: int, rows: int) -> np.ndarray:
    """rows x questions first acceptable ranks (0 = not found within DEPTH): per question a geometric rank with
    its own success probability (Beta(4, 1): most questions easy), drawn independently for each row."""
    success = rng.beta(4.0, 1.0, size=questions)
    ranks = rng.geometric(success, size=(rows, questions))
    return np.where(ranks > DEPTH, 0, ranks)


def scores(ranks: np.ndarray) -> dict[str, np.ndarray]:
    """Hit@5 and reciprocal rank per row and question."""
    found = ranks > 0
    return {"hit@5": (found & (ranks <= HIT_K)).astype(float),
            "mrr": np.where(found, 1.0 / np.maximum(ranks, 1), 0.0)}


def table_verdicts(rng: np.random.Generator, args: argparse.Namespace, seed: int) -> tuple[bool, bool, int, int]:
    """(any verdict after Holm, any verdict unadjusted, single tests rejected unadjusted, tests) of one table."""
    values = scores(question_ranks(rng, args.questions, args.rows))
    qids = [f"q{i:03d}" for i in range(args.questions)]
    pairs = {}
    for row in range(1, args.rows):
        for metric, matrix in values.items():
            pairs[row, metric] = (dict(zip(qids, matrix[0].tolist())), dict(zip(qids, matrix[row].tolist())))
    family = stats.compare_family(pairs, resamples=args.resamples, seed=seed, alpha=args.alpha)
    raw = sum(1 for c in family.values() if c.p_value < args.alpha)
    adjusted = any(c.verdict != stats.VERDICT_NONE for c in family.values())
    return adjusted, raw > 0, raw, len(family)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--tables", type=int, default=1000, help="simulated tables")
    p.add_argument("--rows", type=int, default=6, help="rows per table (each compared with the first)")
    p.add_argument("--questions", type=int, default=50, help="questions per table")
    p.add_argument("--resamples", type=int, default=stats.DEFAULT_RESAMPLES, help="sign patterns drawn per test")
    p.add_argument("--alpha", type=float, default=stats.DEFAULT_ALPHA, help="family-wise level")
    p.add_argument("--seed", type=int, default=0, help="seed of the simulation")
    return p


def share_text(count: int, total: int) -> str:
    share = count / total
    return f"{share:.3f} ± {math.sqrt(share * (1 - share) / total):.3f} ({count} of {total})"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    adjusted = unadjusted = rejected = tests = 0
    for table in range(args.tables):
        a, u, r, t = table_verdicts(rng, args, seed=table)
        adjusted += a
        unadjusted += u
        rejected += r
        tests += t
        if (table + 1) % 100 == 0:
            print(f"{table + 1} tables, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    per_table = (args.rows - 1) * 2
    print(f"{args.tables} tables of {args.rows} rows x {args.questions} questions, every row from one distribution; "
          f"{per_table} tests per table (rows 2-{args.rows} against row 1 on Hit@5 and MRR), alpha {args.alpha:g}, "
          f"{args.resamples:,} sign patterns per test")
    print(f"  tables with any verdict, Holm's adjustment (the tool):  {share_text(adjusted, args.tables)}")
    print(f"  tables with any verdict, every test at alpha:           {share_text(unadjusted, args.tables)}")
    print(f"  single tests rejected at alpha (unadjusted):            {share_text(rejected, tests)}")
    print(f"  ({time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
