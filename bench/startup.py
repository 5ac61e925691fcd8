"""Start-up of the two commands users repeat: a fully cached re-evaluation of the sample goldset and a no-op resync.

Each command runs in its own `python` process, `--repeats` times, beside a bare script that does the same core
work in the same run (so the ratio survives a busy machine); prints the median and fastest wall times, the ratio
of the medians, and the load average before and after each row. With `--imports N` it also prints the N
top-level imports of one cached evaluation by cumulative time (`python -X importtime`).

    python bench/startup.py [--repeats 5] [--imports 12]

Needs the sample index (`python eval_retrieval.py` builds it). The evaluation writes its reports and its query
vector cache under bench/out/startup/ (never the committed eval/baseline.txt); one untimed run first fills the
cache and leaves the previous report that the timed runs compare with, as the default command does.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "startup"  # reports and the query vector cache of the timed evaluations
INDEX = ROOT / "eval" / "index"  # the sample index the commands use by default
DOCS = ROOT / "eval" / "docs"
GOLDSET = ROOT / "eval" / "goldset.csv"
REPEATS = 5  # timed runs of each command (the median is reported)

# The bare evaluation: what any script must do to score the goldset from cached query vectors. Python, chromadb,
# the goldset read (csv), the store opened, the 54 vectors read from the same SQLite cache, one dense query each (20
# deep) and Hit@5/10/20 by file and page (±1). It skips what the real run does besides: BM25 and fusion, the goldset's lint, the language
# note, the comparison with the previous report (bootstrap, randomization test) and writing three report files.
BARE_EVAL = r"""
import csv, sqlite3, sys
from array import array
import chromadb
from chromadb.config import Settings
index, goldset, cache = sys.argv[1:4]
text = open(goldset, encoding="utf-8").read()
names = {"frage": "question", "erwartete_quelle": "expected_source", "erwartete_seite": "expected_page"}
questions = [{names.get(key, key): value for key, value in row.items()}
             for row in csv.DictReader(text.splitlines(), delimiter=";" if ";" in text.splitlines()[0] else ",")]
db = sqlite3.connect(cache)
vectors = {}
for question in questions:
    row = db.execute("SELECT dtype, vector FROM vectors WHERE text = ?", (question["question"].strip(),)).fetchone()
    vectors[question["question"]] = array(row[0], row[1]).tolist()
collection = chromadb.PersistentClient(path=index, settings=Settings(anonymized_telemetry=False)).get_collection("localrag")
hits = {5: 0, 10: 0, 20: 0}
for question in questions:
    found = collection.query(query_embeddings=[vectors[question["question"]]], n_results=20, include=["metadatas"])
    expected_page = int(question["expected_page"]) - 1 if question["expected_page"].strip() else None
    ranks = [n for n, meta in enumerate(found["metadatas"][0], 1) if meta["source"] == question["expected_source"]
             and (expected_page is None or abs(int(meta["page"]) - expected_page) <= 1)]
    for k in hits:
        hits[k] += bool(ranks and ranks[0] <= k)
print({k: round(v / len(questions), 3) for k, v in hits.items()})
"""

# The bare no-op sync: hash every PDF, compare with the manifest, open the store and count its chunks.
BARE_SYNC = r"""
import hashlib, json, sys
from pathlib import Path
import chromadb
from chromadb.config import Settings
index, docs = Path(sys.argv[1]), Path(sys.argv[2])
info = json.loads((index / "index_info.json").read_text(encoding="utf-8"))
changed = [p.name for p in sorted(docs.glob("*.pdf"))
           if info["files"].get(p.name, {}).get("sha256") != hashlib.sha256(p.read_bytes()).hexdigest()]
collection = chromadb.PersistentClient(path=str(index), settings=Settings(anonymized_telemetry=False)).get_collection("localrag")
assert collection.count() == info["counts"]["chunks"] and not changed, changed
print("unchanged", len(info["files"]))
"""


def timed(argv: list[str], repeats: int, cpu: list[float] | None = None) -> list[float]:
    """Wall seconds of `repeats` runs of `argv` from the repository root (each must exit 0); each run's CPU
    seconds (user + system, its child processes included) are appended to `cpu`."""
    times = []
    for _ in range(repeats):
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
        times.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if cpu is not None:
            cpu.append(after.ru_utime - used.ru_utime + after.ru_stime - used.ru_stime)
        if done.returncode != 0:
            sys.exit(f"{' '.join(argv)} failed with exit code {done.returncode}:\n{done.stderr[-2000:]}")
    return times


def load() -> str:
    return "/".join(f"{value:.2f}" for value in os.getloadavg())


def top_imports(argv: list[str], count: int) -> list[tuple[float, str]]:
    """(cumulative seconds, module) of the `count` slowest top-level imports of one run of `argv`."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=ROOT, capture_output=True, text=True)
    found = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line.split("|")
            if not name.startswith("  ") and cumulative.strip().isdigit():  # top level: one leading space
                found.append((int(cumulative) / 1e6, name.strip()))
    return sorted(found, reverse=True)[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=REPEATS, help=f"timed runs of each command (default: "
                                                                     f"{REPEATS})")
    parser.add_argument("--imports", type=int, default=12, metavar="N",
                        help="print the N slowest top-level imports of a cached evaluation (default: 12; 0: none)")
    args = parser.parse_args(argv)
    if not (INDEX / "index_info.json").exists():
        sys.exit(f"no sample index at {INDEX}; build it with `python eval_retrieval.py` first")
    OUT.mkdir(parents=True, exist_ok=True)
    cache = OUT / "query_vectors.sqlite3"
    evaluation = [sys.executable, "eval_retrieval.py", "--no-sync", "--quiet", "--report", str(OUT / "report.txt"),
                  "--query-cache", str(cache)]
    bare_eval = [sys.executable, "-c", BARE_EVAL, str(INDEX), str(GOLDSET), str(cache)]
    sync = [sys.executable, "add_pdfs.py", "--quiet"]
    bare_sync = [sys.executable, "-c", BARE_SYNC, str(INDEX), str(DOCS)]
    print("warming up (one untimed run each: fills the query vector cache, writes the previous report)",
          file=sys.stderr)
    for command in (evaluation, bare_eval, sync, bare_sync):
        timed(command, 1)
    print(f"{'command':<44} {'median s':>9} {'min s':>7} {'cpu s':>6} {'bare median s':>14} {'bare cpu s':>11} "
          f"{'ratio':>6}  load before -> after")
    for name, command, bare in (("eval_retrieval.py --no-sync --quiet (cached)", evaluation, bare_eval),
                                ("add_pdfs.py (no-op resync)", sync, bare_sync)):
        before = load()
        full, plain, full_cpu, plain_cpu = [], [], [], []
        for _ in range(args.repeats):  # alternated, so both see the same load
            full += timed(command, 1, full_cpu)
            plain += timed(bare, 1, plain_cpu)
        ratio = statistics.median(full) / statistics.median(plain)
        print(f"{name:<44} {statistics.median(full):>9.2f} {min(full):>7.2f} {statistics.median(full_cpu):>6.2f} "
              f"{statistics.median(plain):>14.2f} {statistics.median(plain_cpu):>11.2f} {ratio:>6.2f}  "
              f"{before} -> {load()}")
    print(f"({args.repeats} runs each, medians; cpu s = user + system seconds of the process and its children, "
          f"about the wall time on an idle machine for these single-threaded runs; python "
          f"{sys.version.split()[0]}, {os.cpu_count()} cores)")
    if args.imports:
        print("\nSlowest top-level imports of one cached evaluation (cumulative seconds):")
        for seconds, module in top_imports(evaluation[1:], args.imports):
            print(f"  {seconds:6.3f}  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
