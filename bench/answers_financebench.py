"""Answer-level evaluation end to end on FinanceBench dev with a real local model: generate, judge, cite.

Builds a goldset of the first `--questions` dev questions with their reference answers (the anmerkung column of
goldset_dev.csv names the FinanceBench id, whose record in financebench_dev.jsonl holds the answer), then runs

    eval_retrieval.py --goldset THAT --index FB_INDEX --no-sync --no-rerank --answer-model M --answer-judge M
                      --answer-k K --judge-cache bench/out/answers/cache.json

against the OpenAI-compatible server at OPENAI_BASE_URL (../shared/tools/local-llm/: Qwen2.5-Coder-1.5B through
llama.cpp), and prints the Answers section, the wall time per question and the load average. With `--labels FILE`
(CSV: query_id,correct with 1/0, written by a person who read each answer beside its reference answer) it also
prints the judge's agreement with the labels (Cohen's kappa, both base rates), the figure check's agreement, and
the PPI++ estimate of answer correctness beside the judge-only and labels-only ones (localrag/evaluation/
calibration.py), the labelled questions standing in for the human sample.

    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 python bench/answers_financebench.py [--questions 15] [--answer-k 3]
        [--model NAME] [--labels FILE]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "financebench"
INDEX = Path(os.environ.get("LOCALRAG_CACHE", "~/.cache/localrag")).expanduser() / "bench" / "financebench-index"
OUT = ROOT / "bench" / "out" / "answers"


def goldset_with_answers(data: Path, count: int, path: Path) -> int:
    """Write the first `count` dev questions (all their rows) with their reference answers; returns questions."""
    answers = {}
    for line in (data / "financebench_dev.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        answers[record["financebench_id"]] = record["answer"]
    rows = list(csv.DictReader((data / "goldset_dev.csv").read_text(encoding="utf-8").splitlines()))
    chosen: list[str] = []
    for row in rows:
        if row["frage"] not in chosen and len(chosen) < count:
            chosen.append(row["frage"])
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["frage", "erwartete_quelle", "erwartete_seite", "antwort"])
        for row in rows:
            if row["frage"] in chosen:
                writer.writerow([row["frage"], row["erwartete_quelle"], row["erwartete_seite"],
                                 answers[row["anmerkung"]]])
    return len(chosen)


def calibration(report: Path, labels: Path) -> None:
    """Kappa of the judge and of the figure check against the labels; PPI++ beside judge-only and labels-only."""
    from localrag.evaluation import calibration as cal

    people = {row["query_id"]: row["correct"].strip() == "1"
              for row in csv.DictReader(labels.read_text(encoding="utf-8").splitlines())}
    questions = json.loads(report.read_text(encoding="utf-8"))["answers"]["questions"]
    judged = {q["query_id"]: q["correctness"] == "correct" for q in questions if q["correctness"] is not None}
    figures = {q["query_id"]: not q["figures"]["missing"] for q in questions if q["figures"]}
    both = [qid for qid in people if qid in judged]
    kappa = cal.cohen_kappa([judged[q] for q in both], [people[q] for q in both])
    print(f"judge vs people: {len(both)} answers, agreement {kappa.observed:.3f}, kappa "
          f"{'undefined (' + kappa.reason + ')' if kappa.kappa is None else f'{kappa.kappa:.3f}'}; correct by the "
          f"judge {kappa.judge_rate:.3f}, by people {kappa.human_rate:.3f}")
    fig = [qid for qid in people if qid in figures]
    if fig:
        agree = sum(figures[q] == people[q] for q in fig)
        print(f"figure check vs people: agree on {agree} of {len(fig)} answers whose reference states figures")
    unlabeled = [judged[q] for q in judged if q not in people]
    if not unlabeled:
        print("PPI++: every judged answer is labelled; the labels alone are the estimate:")
        est = cal.labels_only_mean([people[q] for q in both])
        print(f"  labels only: {est.estimate:.3f} [{est.low:.3f}, {est.high:.3f}]")
        return
    for estimate in (cal.ppi_mean([judged[q] for q in both], [people[q] for q in both], unlabeled),
                     cal.judge_only_mean([judged[q] for q in both], unlabeled),
                     cal.labels_only_mean([people[q] for q in both])):
        print(f"  {estimate.method}: {estimate.estimate:.3f} [{estimate.low:.3f}, {estimate.high:.3f}]"
              + (f" (lambda {estimate.lam:.3f})" if estimate.lam is not None else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=15, help="dev questions evaluated (default: 15)")
    parser.add_argument("--answer-k", type=int, default=3, help="passages each answer is given (default: 3)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct", help="model name sent to the server "
                                                                               "(default: qwen2.5-coder-1.5b-instruct)")
    parser.add_argument("--index", type=Path, default=INDEX, help=f"FinanceBench index (default: {INDEX})")
    parser.add_argument("--data", type=Path, default=DATA, help=f"the FinanceBench folder (default: {DATA})")
    parser.add_argument("--labels", type=Path, default=None, help="CSV query_id,correct of a person's labels "
                                                                   "(default: none)")
    args = parser.parse_args(argv)
    if not os.environ.get("OPENAI_BASE_URL"):
        sys.exit("set OPENAI_BASE_URL to the local model's server (../shared/tools/local-llm/setup.sh says how)")
    OUT.mkdir(parents=True, exist_ok=True)
    goldset = OUT / "goldset.csv"
    count = goldset_with_answers(args.data, args.questions, goldset)
    command = [sys.executable, "eval_retrieval.py", "--goldset", str(goldset), "--index", str(args.index),
               "--docs", str(args.data / "pdfs"), "--no-sync", "--no-rerank", "--no-compare",
               "--answer-model", args.model, "--answer-judge", args.model, "--answer-k", str(args.answer_k),
               "--judge-cache", str(OUT / "cache.json"), "--report", str(OUT / "report.txt")]
    load = "/".join(f"{v:.2f}" for v in os.getloadavg())
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    lines = (OUT / "report.txt").read_text(encoding="utf-8").splitlines() if (OUT / "report.txt").exists() else []
    start = next((i for i, line in enumerate(lines) if line.startswith("Answers: ")), None)
    print("\n".join(lines[start:lines.index("", start)]) if start is not None else done.stderr[-2000:])
    print(f"exit {done.returncode}; {count} questions in {seconds:.0f} s ({seconds / count:.0f} s a question, "
          f"answers and verdicts; a rerun with the cache makes no call); load average {load} -> "
          f"{'/'.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.labels:
        calibration(OUT / "report.json", args.labels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
