"""Evaluate every retrieval mode separately, then all at once with --ablation, and print metrics and wall times.

Each separate run is a fresh `python eval_retrieval.py` process (model loading included), as a user runs it.
Extra arguments after `--` go to eval_retrieval.py unchanged, for example:

  python bench/eval_modes.py --name financebench -- --goldset ../shared/data/financebench/goldset_dev.csv \
      --docs ../shared/data/financebench/pdfs --index ~/.cache/localrag/bench/financebench-index --no-sync --no-rerank
  python bench/eval_modes.py --name scifact --cold-index eval/.cache/datasets -- \
      --dataset ../shared/data/scifact --split train --no-rerank
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("dense", "bm25", "hybrid", "union")  # the rows of the table
OUT_DIR = ROOT / "bench" / "out"  # reports of the runs (ignored by git)
METRICS = ("hit@5", "hit@10", "hit@20", "ndcg@10", "recall@100", "mrr")  # columns, when a run has them


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--name", default="bench", help="prefix of the report files under bench/out")
    p.add_argument("--modes", default=",".join(MODES), help="modes to run separately")
    p.add_argument("--cold-index", default=None, help="folder to delete before the first run, so that run "
                                                      "builds the index (a cold run); default: keep it")
    p.add_argument("--no-ablation", action="store_true", help="skip the single --ablation run")
    p.add_argument("--json", default=None, help="also write the figures as JSON to this file")
    p.add_argument("eval_args", nargs=argparse.REMAINDER, help="arguments for eval_retrieval.py after --")
    return p


def run_eval(argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(ROOT / "eval_retrieval.py"), *argv, "--quiet"], cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"eval_retrieval.py {' '.join(argv)} failed with exit code {done.returncode}")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    extra = [a for a in args.eval_args if a != "--"]
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    if args.cold_index:
        shutil.rmtree(args.cold_index, ignore_errors=True)
    rows = []
    for number, mode in enumerate(args.modes.split(",")):
        report = OUT_DIR / f"{args.name}-{mode}.txt"
        seconds = run_eval([*extra, "--mode", mode, "--report", str(report), "--no-compare"])
        metrics = json.loads(report.with_suffix(".json").read_text(encoding="utf-8"))["metrics"]
        label = "cold (index built)" if number == 0 and args.cold_index else "warm"
        rows.append({"mode": mode, "seconds": seconds, "run": label, "metrics": metrics})
        if number == 0 and args.cold_index:  # the same mode once more on the built index
            seconds = run_eval([*extra, "--mode", mode, "--report", str(report), "--no-compare"])
            rows.append({"mode": mode, "seconds": seconds, "run": "warm", "metrics": metrics})
    keys = [k for k in METRICS if k in rows[0]["metrics"]]
    print(f"{'mode':<8} {'run':<19}" + "".join(f"{k:>11}" for k in keys) + f"{'wall s':>9}")
    for row in rows:
        print(f"{row['mode']:<8} {row['run']:<19}" + "".join(f"{row['metrics'][k]:>11.3f}" for k in keys)
              + f"{row['seconds']:>9.1f}")
    figures = {"rows": rows}
    if not args.no_ablation:
        report = OUT_DIR / f"{args.name}-ablation.txt"
        seconds = run_eval([*extra, "--ablation", "--report", str(report)])
        separate = sum(r["seconds"] for r in rows if r["run"] == "warm")
        print(f"\nablation (all modes{'' if '--no-rerank' in extra else ' x rerank'} in one run): {seconds:.1f} s "
              f"wall; the warm separate runs together: {separate:.1f} s")
        print(report.read_text(encoding="utf-8"))
        figures["ablation_seconds"], figures["separate_seconds"] = seconds, separate
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
