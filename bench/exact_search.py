"""Cost of exact dense search (`localrag.search.vectors.top_k_cosine`, what `Index.nearest` runs) on synthetic shelves,
and of the IVF that shelves past IVF_MIN_CHUNKS get (`localrag.search.ivf`).

For each size (default 100,000 and 1,000,000 chunks of 384 dimensions, float32 unit vectors, seeded) it times
`--queries` searches of `--k` results beside a bare numpy loop doing the same core work in the same run
(one matrix-vector product and argpartition, no tie rule), and prints per-query median and p95 in ms, the ratio of
the medians, the matrix's memory and the load average before and after each row.

With `--ivf` it then builds the IVF of each shelf with local_rag.py's defaults (4 x sqrt(n) lists, an eighth
of them probed) and prints its build seconds, per-query median and p95 and recall@k against exact
search. The vectors are
then clustered (a seeded mixture of n/50 centres plus noise), as embeddings of real text are: uniform random
vectors have no neighbourhoods for any index to find, which would understate every approximate search.

    python bench/exact_search.py [--sizes 100000,1000000] [--queries 50] [--k 100] [--ivf]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from localrag.cli import HelpFormatter  # noqa: E402
from localrag.search.vectors import top_k_cosine  # noqa: E402

SIZES = "100000,1000000"  # chunks per synthetic shelf
DIMENSIONS = 384  # all-MiniLM-L6-v2's
QUERIES = 50  # timed searches per size
K = 100  # results per search (the diagnostic depth)
SEED = 0  # the vectors' seed


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    p.add_argument("--sizes", default=SIZES, help="comma-separated shelf sizes in chunks")
    p.add_argument("--queries", type=int, default=QUERIES, help="timed searches per size")
    p.add_argument("--k", type=int, default=K, help="results per search")
    p.add_argument("--ivf", action="store_true", help="also build and time the IVF of each shelf (clustered vectors)")
    return p


def clustered_rows(rng: numpy.random.Generator, n: int) -> numpy.ndarray:
    centres = unit_rows(rng, max(1, n // 50))
    matrix = centres[rng.integers(0, len(centres), n)]
    matrix += rng.standard_normal(matrix.shape, dtype=numpy.float32) * numpy.float32(0.04)
    matrix /= numpy.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def ivf_rows(sizes: list[int], args) -> None:
    import local_rag
    from localrag.search import ivf

    rng = numpy.random.default_rng(SEED + 1)
    print("\nIVF (4 x sqrt(n) lists, an eighth of them probed; clustered vectors)")
    print(f"{'chunks':>10}  {'lists':>6}  {'build s':>8}  {'ivf p50':>8}  {'p95':>7}  {'exact p50':>9}  "
          f"{'recall@' + str(args.k):>10}  load")
    for n in sizes:
        matrix = clustered_rows(rng, n)
        queries = clustered_rows(rng, args.queries)
        k = min(args.k, n)
        load = os.getloadavg()[0]
        started = time.perf_counter()
        index = ivf.build(matrix, ivf.default_lists(n))
        build = time.perf_counter() - started
        found = []
        probes = local_rag.IVF_PROBES or ivf.default_probes(index.lists)
        ours = timed(lambda q: found.append([r for r, _ in ivf.search(index, matrix, q, k, probes)]), queries)
        exact = []
        full = timed(lambda q: exact.append([r for r, _ in top_k_cosine(matrix, q, k)]), queries)
        print(f"{n:>10,}  {index.lists:>6}  {build:>8.1f}  {statistics.median(ours):>8.2f}  {p95(ours):>7.2f}  "
              f"{statistics.median(full):>9.2f}  {ivf.recall(exact, found):>10.4f}  {load:.2f} -> "
              f"{os.getloadavg()[0]:.2f}")
        del matrix, index


def unit_rows(rng: numpy.random.Generator, n: int) -> numpy.ndarray:
    matrix = rng.standard_normal((n, DIMENSIONS), dtype=numpy.float32)
    matrix /= numpy.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def timed(search, queries) -> list[float]:
    out = []
    for q in queries:
        start = time.perf_counter()
        search(q)
        out.append((time.perf_counter() - start) * 1000)
    return out


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(round(0.95 * len(values))) - 1)]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        print(f"error: --sizes must be whole numbers separated by commas, got {args.sizes!r}", file=sys.stderr)
        return 2
    if min(sizes) < 1 or args.queries < 1 or args.k < 1:
        print("error: --sizes, --queries and --k must be 1 or more", file=sys.stderr)
        return 2
    rng = numpy.random.default_rng(SEED)
    print(f"{'chunks':>10}  {'MB':>6}  {'ours p50':>9}  {'p95':>7}  {'bare p50':>9}  {'p95':>7}  {'ratio':>5}  load")
    for n in sizes:
        matrix = unit_rows(rng, n)
        queries = unit_rows(rng, args.queries)
        k = min(args.k, n)
        top_k_cosine(matrix, queries[0], k)  # warm-up: first touch of the pages
        load = os.getloadavg()[0]
        ours = timed(lambda q: top_k_cosine(matrix, q, k), queries)
        bare = timed(lambda q: numpy.argpartition(-(matrix @ q), k - 1)[:k], queries)
        ratio = statistics.median(ours) / statistics.median(bare)
        print(f"{n:>10,}  {matrix.nbytes / 1e6:>6.0f}  {statistics.median(ours):>9.2f}  {p95(ours):>7.2f}  "
              f"{statistics.median(bare):>9.2f}  {p95(bare):>7.2f}  {ratio:>5.2f}  {load:.2f} -> "
              f"{os.getloadavg()[0]:.2f}")
        del matrix
    if args.ivf:
        ivf_rows(sizes, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
