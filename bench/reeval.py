"""The loop users live in, on a real shelf and on the sample: a fully cached re-evaluation, timed beside a bare script.

Two commands, each run in its own `python` process `--repeats` times, alternated with a bare script that does the
same searches in the same run (so the ratios survive a busy machine):

* the sample goldset on the sample index (`eval_retrieval.py --no-sync --quiet`);
* the FinanceBench dev goldset (63 questions) on the FinanceBench index (22,730 chunks; bench/index_financebench.py
  builds it), `--no-sync --no-rerank --quiet`.

The bare script loads the index's vectors from its `.npy` file (numpy only, memory-mapped), the goldset's query
vectors from the evaluation's query cache (SQLite), and runs one exact top-100 cosine search per question, as the
evaluation's dense stage does; it prints a checksum of the rows found. It skips what the real run does besides (the
index check, BM25 and fusion, the chunks' texts, the metrics, the comparison with the previous report, three
report files). Printed: median and fastest wall seconds, CPU seconds (user + system), the bare script's, the
ratio of the medians, and the load average before and after each row; then FinanceBench's median over the
sample's, the goal being at most GOAL.

    python bench/reeval.py [--repeats 5] [--index DIR]

Reports and query caches go under bench/out/reeval/ (never the committed eval/baseline.txt); one untimed run of
each first fills the caches, writes the previous report that the timed runs compare with, and, for an index synced
before the vector file existed, writes it.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from startup import load, timed  # bench/ is on sys.path when this script runs

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "reeval"
SAMPLE_INDEX = ROOT / "eval" / "index"
SAMPLE_GOLDSET = ROOT / "eval" / "goldset.csv"
DATA = ROOT.parent / "shared" / "data" / "financebench"
FB_GOLDSET = DATA / "goldset_dev.csv"
FB_DOCS = DATA / "pdfs"
FB_INDEX = Path(os.environ.get("LOCALRAG_CACHE", "~/.cache/localrag")).expanduser() / "bench" / "financebench-index"
REPEATS = 5  # timed runs of each command (the median is reported)
GOAL = 1.5  # FinanceBench's cached re-evaluation over the sample's, at most (issue 43)

# The bare evaluation: numpy, the goldset's questions (csv), their vectors from the evaluation's query cache (the
# latest entry of each question's text), the index's vectors memory-mapped from its .npy file, one exact top-100
# search per question.
BARE = r"""
import csv, sqlite3, sys
import numpy
vectors, goldset, cache = sys.argv[1:4]
text = open(goldset, encoding="utf-8").read().splitlines()
rows = csv.DictReader(text, delimiter=";" if ";" in text[0] else ",")
questions = list(dict.fromkeys((row.get("frage") or row.get("question")).strip() for row in rows))
db = sqlite3.connect(cache)
matrix = numpy.load(vectors, mmap_mode="r")
checksum = 0
for question in questions:
    dtype, blob = db.execute("SELECT dtype, vector FROM vectors WHERE text = ? ORDER BY used DESC",
                             (question,)).fetchone()
    query = numpy.frombuffer(blob, dtype=dtype).astype(numpy.float32)
    similarities = matrix @ (query / numpy.linalg.norm(query))
    k = min(100, len(similarities))
    top = numpy.argpartition(-similarities, k - 1)[:k]
    top = top[numpy.lexsort((top, -similarities[top]))]
    checksum = (checksum * 31 + int(top[0])) % 1_000_000_007
print(len(questions), "questions", matrix.shape, "checksum", checksum)
"""


def commands(index: Path) -> list[tuple[str, list[str], list[str]]]:
    """(name, evaluation, bare script) of the two rows."""
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, goldset, folder, extra in (
            ("sample (60 chunks, 54 questions)", SAMPLE_GOLDSET, SAMPLE_INDEX, []),
            ("FinanceBench dev (22,730 chunks, 63 questions)", FB_GOLDSET, index,
             ["--docs", str(FB_DOCS), "--no-rerank"])):
        tag = "sample" if folder == SAMPLE_INDEX else "financebench"
        cache = OUT / f"{tag}.query_vectors.sqlite3"
        evaluation = [sys.executable, "eval_retrieval.py", "--goldset", str(goldset), "--index", str(folder),
                      *extra, "--no-sync", "--quiet", "--report", str(OUT / f"{tag}.txt"), "--query-cache",
                      str(cache)]
        bare = [sys.executable, "-c", BARE, str(folder / "vectors.npy"), str(goldset), str(cache)]
        rows.append((name, evaluation, bare))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=REPEATS,
                        help=f"timed runs of each command (default: {REPEATS})")
    parser.add_argument("--index", type=Path, default=FB_INDEX,
                        help=f"the FinanceBench index (default: {FB_INDEX})")
    args = parser.parse_args(argv)
    for folder, build in ((SAMPLE_INDEX, "python eval_retrieval.py"),
                          (args.index, "python bench/index_financebench.py")):
        if not (folder / "index_info.json").exists():
            sys.exit(f"no index at {folder}; build it with `{build}` first")
    rows = commands(args.index)
    print("warming up (one untimed run each: query vector caches, previous reports, vector files)", file=sys.stderr)
    for _, evaluation, bare in rows:
        timed(evaluation, 1)
        timed(bare, 1)
    print(f"{'cached re-evaluation':<48} {'median s':>9} {'min s':>7} {'cpu s':>6} {'bare median s':>14} "
          f"{'bare cpu s':>11} {'ratio':>6}  load before -> after")
    medians = []
    for name, evaluation, bare in rows:
        before = load()
        full, plain, full_cpu, plain_cpu = [], [], [], []
        for _ in range(args.repeats):  # alternated, so both see the same load
            full += timed(evaluation, 1, full_cpu)
            plain += timed(bare, 1, plain_cpu)
        medians.append(statistics.median(full))
        print(f"{name:<48} {statistics.median(full):>9.2f} {min(full):>7.2f} {statistics.median(full_cpu):>6.2f} "
              f"{statistics.median(plain):>14.2f} {statistics.median(plain_cpu):>11.2f} "
              f"{statistics.median(full) / statistics.median(plain):>6.2f}  {before} -> {load()}")
    ratio = medians[1] / medians[0]
    print(f"FinanceBench / sample: {ratio:.2f} (goal: at most {GOAL}: {'met' if ratio <= GOAL else 'NOT met'})")
    print(f"({args.repeats} runs each, medians; cpu s = user + system seconds of the process and its children; "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
