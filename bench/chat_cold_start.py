"""A chat's cold start on the FinanceBench index: import, model load, opening the index, first retrieval, then the
next questions; each variant in a fresh `python` process.

* warm_up: the chat calls `LocalRAG.warm_up()` at start (store, vectors mapped from the vector file, BM25 arrays),
  after the model loaded, so its first question waits only for its search;
* lazy: the first retrieval opens the index itself (chromadb's import and client, the BM25 arrays, the vectors).

Printed per variant: seconds to import local_rag, to load the embedding model (and embed one text), to open the
index (warm_up only), the first retrieval, the median of the next `--questions` retrievals (each question
embedded, as in a chat), the process's peak memory, and the load average. The goal of issue 43: the first
retrieval at most 0.5 s after the model is loaded.

    python bench/chat_cold_start.py [--index DIR] [--questions 20] [--repeats 3]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "financebench"
GOLDSET = DATA / "goldset_dev.csv"
INDEX = Path(os.environ.get("LOCALRAG_CACHE", "~/.cache/localrag")).expanduser() / "bench" / "financebench-index"
QUESTIONS = 20
REPEATS = 3
GOAL_SECONDS = 0.5

# One cold start, in its own process: prints one JSON line of seconds.
CHILD = r"""
import json, resource, sys, time
started = time.perf_counter()
import local_rag
imported = time.perf_counter()
index, warm, questions = sys.argv[1], sys.argv[2] == "warm_up", json.loads(sys.argv[3])
rag = local_rag.LocalRAG(index, reranker_model=None, quiet=True)
rag.embeddings.embed_query("load the model")
loaded = time.perf_counter()
if warm:
    rag.warm_up()
opened = time.perf_counter()
first = rag.retrieve(questions[0], k=5)
answered = time.perf_counter()
later = []
for question in questions[1:]:
    begin = time.perf_counter()
    rag.retrieve(question, k=5)
    later.append(time.perf_counter() - begin)
later.sort()
print(json.dumps({"import": imported - started, "model": loaded - imported, "open": opened - loaded,
                  "first": answered - opened, "next_p50": later[len(later) // 2] if later else None,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "hits": len(first)}))
"""


def questions(path: Path, count: int) -> list[str]:
    text = path.read_text(encoding="utf-8").splitlines()
    rows = csv.DictReader(text, delimiter=";" if ";" in text[0] else ",")
    return list(dict.fromkeys((row.get("frage") or row.get("question")).strip() for row in rows))[:count + 1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, default=INDEX, help=f"the FinanceBench index (default: {INDEX})")
    parser.add_argument("--questions", type=int, default=QUESTIONS,
                        help=f"retrievals timed after the first (default: {QUESTIONS})")
    parser.add_argument("--repeats", type=int, default=REPEATS,
                        help=f"cold starts per variant, alternated (default: {REPEATS})")
    args = parser.parse_args(argv)
    if not (args.index / "index_info.json").exists():
        sys.exit(f"no index at {args.index}; build it with `python bench/index_financebench.py` first")
    asked = json.dumps(questions(GOLDSET, args.questions))
    runs: dict[str, list[dict]] = {"warm_up": [], "lazy": []}
    before = "/".join(f"{v:.2f}" for v in os.getloadavg())
    for _ in range(args.repeats):
        for variant in runs:
            done = subprocess.run([sys.executable, "-c", CHILD, str(args.index), variant, asked], cwd=ROOT,
                                  capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"the {variant} cold start failed ({done.returncode}):\n{done.stderr[-2000:]}")
            runs[variant].append(json.loads(done.stdout.strip().splitlines()[-1]))
    after = "/".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"{'variant':<8} {'import s':>9} {'model s':>8} {'open s':>7} {'first s':>8} {'next p50 ms':>12} "
          f"{'peak MiB':>9}")
    for variant, found in runs.items():
        median = {key: statistics.median(r[key] for r in found) for key in ("import", "model", "open", "first",
                                                                          "next_p50", "peak_mib")}
        print(f"{variant:<8} {median['import']:>9.2f} {median['model']:>8.2f} {median['open']:>7.2f} "
              f"{median['first']:>8.3f} {median['next_p50'] * 1000:>12.1f} {median['peak_mib']:>9.0f}")
    first = statistics.median(r["first"] for r in runs["warm_up"])
    print(f"first retrieval after the model loaded and warm_up: {first:.3f} s (goal: at most {GOAL_SECONDS} s: "
          f"{'met' if first <= GOAL_SECONDS else 'NOT met'})")
    print(f"({args.repeats} cold starts per variant, medians; {args.questions} questions after the first; load "
          f"average {before} -> {after}; python {sys.version.split()[0]}, {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
