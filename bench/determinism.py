"""Whether one index gives one report: the same evaluation in fresh processes and on copies of the index, and dense
top-k against an independent exact cosine search.

1. `--processes` runs of `eval_retrieval.py --no-sync` in fresh interpreters on the index folder itself, then one on
   each of `--copies` copies of it (copied with shutil, as a user's backup or a CI cache would be); every report
   (text and JSON, less their `Generated:` stamps, the index path and the run's folder written as <index> and
   <run>) must be byte-identical to the first run's.
2. For every goldset question: the dense top `--k` of `LocalRAG.retrieve(mode="dense")` against a search written
   here without localrag's code: every stored vector read with a plain chromadb client, float64 cosine with the
   question's vector, ordered by similarity then chunk id. A list differs when its chunk ids differ; one whose
   ids differ only where two similarities are within 1e-6 (float32 against float64) is counted apart.

Prints one table per part and exits 1 if anything differs.

    python bench/determinism.py [--index DIR] [--goldset FILE] [--docs DIR] [--processes 20] [--copies 5] [--k 100]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from localrag.cli import HelpFormatter  # noqa: E402

INDEX_DIR = Path.home() / ".cache/localrag/bench/financebench-index"  # bench/index_financebench.py builds it
GOLDSET = ROOT.parent / "shared/data/financebench/goldset_dev.csv"  # 63 questions over the 74 FinanceBench PDFs
PROCESSES = 20  # evaluations in fresh processes on the index folder itself
COPIES = 5  # copies of the index folder, one evaluation each
K = 100  # dense list length compared with exact search
MODE = "hybrid"  # retrieval mode of the evaluations
TIE = 1e-6  # similarities closer than this may swap between float32 and float64


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    p.add_argument("--index", default=str(INDEX_DIR), help="index folder (default: %(default)s)")
    p.add_argument("--goldset", default=str(GOLDSET), help="goldset CSV (default: %(default)s)")
    p.add_argument("--docs", default=None, help="PDF folder of the index, for an index that records it relative to "
                                                "itself (the sample index: eval/docs) (default: the recorded one)")
    p.add_argument("--processes", type=int, default=PROCESSES, help="runs on the folder (default: %(default)s)")
    p.add_argument("--copies", type=int, default=COPIES, help="copies, one run each (default: %(default)s)")
    p.add_argument("--k", type=int, default=K, help="dense list length checked (default: %(default)s)")
    p.add_argument("--mode", default=MODE, help="retrieval mode of the evaluations (default: %(default)s)")
    return p


def without_stamp(path: Path, index: Path) -> bytes:
    """The report's bytes less its `Generated:` line (text) or `generated` key (JSON), with the index folder's path
    (which differs for a copy) written as <index> and the run's own folder (its details file) as <run>."""
    text = path.read_text(encoding="utf-8")
    for form, name in ((str(index), "<index>"), (display(index), "<index>"), (str(path.parent), "<run>")):
        text = text.replace(form, name)
    if path.suffix == ".json":
        data = json.loads(text)
        data.pop("generated", None)
        return json.dumps(data, sort_keys=True).encode("utf-8")
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("Generated: ")).encode()


def evaluate(index: Path, out: Path, args, cache: Path) -> float:
    """One evaluation in a fresh interpreter; its wall seconds."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(ROOT / "eval_retrieval.py"), "--goldset", args.goldset, "--index",
                           str(index), *(["--docs", args.docs] if args.docs else []), "--no-sync", "--no-rerank",
                           "--quiet", "--mode", args.mode, "--no-compare",
                           "--query-cache", str(cache), "--report", str(out)], cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
    if done.returncode not in (0, 1):  # 1: a gate or lint finding, still a report
        sys.exit(f"evaluation failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.perf_counter() - started


def reports_part(args, work: Path) -> bool:
    index = Path(args.index)
    cache = work / "qv.sqlite3"
    runs: list[tuple[str, Path, Path, float]] = []  # (name, report, index, seconds)

    def report_of(name: str) -> Path:  # one folder a run, one file name: the report names its details file
        (work / name).mkdir()
        return work / name / "report.txt"

    for n in range(args.processes):
        out = report_of(f"folder-{n:02d}")
        runs.append((f"folder, process {n + 1}", out, index, evaluate(index, out, args, cache)))
        print(f"  {runs[-1][0]}: {runs[-1][3]:.1f} s", file=sys.stderr)
    for n in range(args.copies):
        copy = work / f"index-copy-{n}"
        shutil.copytree(index, copy, ignore=shutil.ignore_patterns(".localrag.lock"))
        out = report_of(f"copy-{n}")
        runs.append((f"copy {n + 1}", out, copy, evaluate(copy, out, args, cache)))
        shutil.rmtree(copy)
        print(f"  {runs[-1][0]}: {runs[-1][3]:.1f} s", file=sys.stderr)
    first = runs[0][1]
    reference = {suffix: without_stamp(first.with_suffix(suffix), index) for suffix in (".txt", ".json")}
    print(f"Reports of {display(index)} ({args.mode}, {args.processes} processes on the folder, {args.copies} "
          f"copies), each against the first run:")
    print(f"  {'run':<22} {'text':<10} {'JSON':<10} {'seconds':>8}")
    same = True
    for name, out, folder, seconds in runs:
        flags = [without_stamp(out.with_suffix(s), folder) == reference[s] for s in (".txt", ".json")]
        same &= all(flags)
        print(f"  {name:<22} {'identical' if flags[0] else 'DIFFERS':<10} {'identical' if flags[1] else 'DIFFERS':<10} "
              f"{seconds:>8.1f}")
    metrics = json.loads(first.with_suffix(".json").read_text(encoding="utf-8"))["metrics"]
    print("  metrics of the first run: " + ", ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items())
                                                     if isinstance(v, float)))
    return same


def exact_part(args) -> bool:
    import chromadb
    import numpy
    from chromadb.config import Settings

    import local_rag
    from localrag.goldset import format as gs

    questions = list(dict.fromkeys(q.question for q in gs.read_goldset(args.goldset).questions))
    work = Path(tempfile.mkdtemp(prefix="localrag-determinism-exact-"))
    try:
        copy = shutil.copytree(args.index, work / "index", ignore=shutil.ignore_patterns(".localrag.lock"))
        rag = local_rag.LocalRAG(copy, reranker_model=None, quiet=True)
        ours = {q: [doc.id for doc, _ in rag.retrieve(q, k=args.k, mode="dense")] for q in questions}
        vectors = {q: numpy.asarray(rag.retriever.query_vectors()[rag.prepare_query(q)], dtype=numpy.float64)
                   for q in questions}
        del rag
        client = chromadb.PersistentClient(path=str(copy), settings=Settings(anonymized_telemetry=False))
        collection = client.list_collections()[0]
        ids, rows = [], []
        for offset in range(0, collection.count(), 10_000):  # Chroma fails reading ~40,000 at once
            data = collection.get(include=["embeddings"], limit=10_000, offset=offset)
            ids += data["ids"]
            rows += list(data["embeddings"])
        matrix = numpy.asarray(rows, dtype=numpy.float64)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    matrix /= numpy.linalg.norm(matrix, axis=1, keepdims=True)
    order_ids = numpy.argsort(numpy.asarray(ids))  # rank of each id in id order, the tie rule
    id_rank = numpy.empty(len(ids), dtype=numpy.int64)
    id_rank[order_ids] = numpy.arange(len(ids))
    equal = near = 0
    differing = []
    for q in questions:
        v = vectors[q] / numpy.linalg.norm(vectors[q])
        sims = matrix @ v
        top = numpy.lexsort((id_rank, -sims))[:args.k]
        exact = [ids[i] for i in top]
        if exact == ours[q]:
            equal += 1
            continue
        by_id = dict(zip(ids, sims))
        close = len(exact) == len(ours[q]) and all(
            a == b or abs(by_id[a] - by_id.get(b, -9)) < TIE for a, b in zip(exact, ours[q]))
        near += close
        if not close:
            differing.append(q)
    print(f"\nDense top-{args.k} against exact float64 cosine search over the {len(ids)} stored vectors "
          f"({len(questions)} questions):")
    print(f"  identical lists: {equal}/{len(questions)}; differing only between similarities within {TIE:g}: "
          f"{near}; differing: {len(differing)}")
    for q in differing[:5]:
        print(f"  differs: {q}")
    return not differing


def display(path: Path | str) -> str:
    path = Path(path)
    try:
        return "~/" + str(path.resolve().relative_to(Path.home()))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not Path(args.index, "index_info.json").exists():
        print(f"error: no index at {args.index}; build it with python bench/index_financebench.py", file=sys.stderr)
        return 2
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="localrag-determinism-"))
    try:
        same = reports_part(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    exact = exact_part(args)
    print(f"\n{time.perf_counter() - started:.0f} s in all; load average {load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    return 0 if same and exact else 1


if __name__ == "__main__":
    sys.exit(main())
