"""Indexing speed on the real FinanceBench filings: PDF extraction per loader, embedding, build, re-sync.

Answers "how long does `add_pdfs.py` take on 10,000 pages of annual reports, and how much memory":

* Build: ``LocalRAG(index, reranker_model=None).sync([pdf folder])`` with local_rag's default settings into a
  fresh index outside the repo; total time, pages, chunks, chunks/s inside ``embed_documents``, peak RSS of this
  process and of its extraction workers, then the time of a second sync with nothing changed.
* Bare embedding loop (``--bare``): the same chunks, read back from the built index, embedded by a bare script in the
  same run (tokenizer, the backend's model file, mean pooling; no LocalRAG, Chroma or extraction), so that the build
  is reported as a ratio to it as well as in seconds, with the load average beside both. The bare vectors are
  compared with the stored ones (lowest cosine), which shows it did the same work.
* Extraction: ``extract_pdf`` in one process and ``iter_extracted(workers=2)`` for each loader; pages/s.
  pypdf (~15 pages/s) can be timed on the first N files (``--extract-sample N``) and extrapolated by pages.

The build runs first: ``ru_maxrss`` is a lifetime peak, so measuring it before the extraction runs keeps
their memory out of the build's figure, and the workers' peak is then that of the sync's own workers.
Results go to stdout as plain-text tables (and to ``--json FILE``); progress goes to stderr.

    python bench/index_financebench.py [--extract-sample 10] [--fresh] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from localrag.cli import HelpFormatter  # noqa: E402 - the repository root is on sys.path above
import local_rag  # noqa: E402
from local_rag import INDEX_INFO_FILE, LocalRAG, RAGError, extract_pdf, find_pdfs, iter_extracted  # noqa: E402

PDF_DIR = REPO_ROOT.parent / "shared" / "data" / "financebench" / "pdfs"  # the 74 FinanceBench filings
# Outside the repo (indexes are never committed), in the same cache folder local_rag uses for its caches.
INDEX_DIR = Path(os.environ.get("LOCALRAG_CACHE", "~/.cache/localrag")).expanduser() / "bench" / "financebench-index"
LOADERS = local_rag.PDF_LOADERS  # loaders whose extraction is timed
SAMPLED_LOADER = "pypdf"  # the slow loader that --extract-sample applies to
WORKERS = 2  # processes of the parallel extraction run (local_rag.EXTRACT_WORKERS on a 2-core machine)
KIB_PER_MIB = 1024  # ru_maxrss is in KiB on Linux
BARE_ROWS = 4  # rows per inference of the bare OpenVINO loop (embeddings.OPENVINO_JOB_ROWS is the product's)
BARE_BATCH = 16  # texts per encode call of the bare torch loop (sentence-transformers' own loop)
BARE_BACKENDS = ("torch", "openvino-int8")  # backends bare_embed runs


# ----------------------------------------------------------------------------- pure helpers

def per_second(count: int, seconds: float) -> float | None:
    """count / seconds, or None when no time was measured (nothing to divide by)."""
    return count / seconds if seconds > 0 else None


def extrapolated_seconds(sample_pages: int, sample_seconds: float, total_pages: int) -> float | None:
    """Time for `total_pages` at the sample's pages/s; None when the sample has no pages or no time.

    E.g. 600 pages in 40 s is 15 pages/s, so 10,206 pages take 10,206 / 15 = 680.4 s.
    """
    rate = per_second(sample_pages, sample_seconds)
    return total_pages / rate if rate else None


def is_inside(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or lies below it (both resolved, so symlinks and '..' cannot hide it)."""
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def fmt_number(value: float | int | None, digits: int = 1) -> str:
    """Table cell for a number: integers with thousands separators, floats with `digits` decimals, '-' for None."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Fixed-width plain-text table; a column is right-aligned when every cell starts like a number."""
    columns = list(zip(headers, *rows))
    widths = [max(len(cell) for cell in column) for column in columns]
    numeric = [all(cell.lstrip("~")[:1].isdigit() or cell == "-" for cell in column[1:]) and len(column) > 1
               for column in columns]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.rjust(w) if right else cell.ljust(w)
                         for cell, w, right in zip(cells, widths, numeric)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(row) for row in rows])


def peak_rss_mib(who: int) -> float:
    """Peak resident memory in MiB: RUSAGE_SELF, or RUSAGE_CHILDREN (the largest waited-for child)."""
    return resource.getrusage(who).ru_maxrss / KIB_PER_MIB


class TimedEmbeddings:
    """Wraps an embeddings object; adds up the wall time and texts of every `embed_documents` call.

    A wrapper on the LocalRAG object, not a patch of the shared (lru-cached) model, so nothing else is timed.
    """

    def __init__(self, inner: object):
        self.inner = inner
        self.seconds = 0.0
        self.texts = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        started = time.perf_counter()
        vectors = self.inner.embed_documents(texts)
        self.seconds += time.perf_counter() - started
        self.texts += len(texts)
        return vectors

    def __getattr__(self, name: str):
        return getattr(self.inner, name)  # model_name, embed_query, ... come from the wrapped model


# ----------------------------------------------------------------------------- measurements

def load_average() -> float:
    """The 1-minute load average, as `uptime` prints it."""
    return round(os.getloadavg()[0], 2)


def lowest_cosine(a, b) -> float:
    """Lowest row-wise cosine of two equally shaped matrices of vectors."""
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))).min())


def bare_embed(texts: Sequence[str], backend: str) -> list:
    """Vectors of `texts` from a bare loop on `backend`: torch through SentenceTransformer.encode; openvino-int8
    through the cached export (the file LocalRAG runs) compiled with the same CPU settings, all texts tokenized,
    sorted by length, BARE_ROWS rows an inference on an AsyncInferQueue, mean pooling and normalizing in numpy."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from localrag.models import backends, loading

    path, name = loading.resolve_embedding_model(local_rag.EMBEDDING_MODEL)
    model = SentenceTransformer(path, device="cpu")
    if backend == "torch":
        return list(model.encode(list(texts), batch_size=BARE_BATCH, normalize_embeddings=True))
    import torch

    xml = backends.prepare(model, name, backend, calibration=local_rag.calibration_for(backend))
    openvino = backends.import_without_telemetry("openvino")
    threads = torch.get_num_threads()
    config = {**backends.OPENVINO_CONFIG, "NUM_STREAMS": min(backends.OPENVINO_STREAMS, threads),
              "INFERENCE_NUM_THREADS": threads,
              **(backends.OPENVINO_F32_STEPS if backends.runtime_suffix(backend) else {})}
    compiled = openvino.Core().compile_model(str(xml), "CPU", config)
    encoded = model.tokenizer(list(texts), truncation=True, max_length=model.max_seq_length)
    names = [i.get_any_name() for i in compiled.inputs]
    order = sorted(range(len(texts)), key=lambda i: -len(encoded["input_ids"][i]))
    vectors: list = [None] * len(texts)

    def pooled(request, rows) -> None:
        hidden = request.get_output_tensor(0).data
        mask = request.get_tensor("attention_mask").data[..., None].astype(np.float32)
        mean = (hidden * mask).sum(1) / mask.sum(1)
        for row, vector in zip(rows, mean / np.linalg.norm(mean, axis=1, keepdims=True)):
            vectors[row] = vector

    queue = openvino.AsyncInferQueue(compiled, 2 * config["NUM_STREAMS"])
    queue.set_callback(pooled)
    for start in range(0, len(order), BARE_ROWS):
        rows = order[start:start + BARE_ROWS]
        width = len(encoded["input_ids"][rows[0]])
        feeds = {n: np.array([encoded[n][r] + [0] * (width - len(encoded[n][r])) for r in rows], dtype=np.int64)
                 for n in names}
        queue.start_async(feeds, rows)
    queue.wait_all()
    return vectors


def run_bare(index_dir: Path, backend: str) -> dict:
    """The bare embedding loop (model load, tokenizing, forward pass, pooling; see bare_embed) over the chunks
    stored in `index_dir`, timed, with its vectors compared with the stored ones."""
    from localrag.index.store import STORE_READ_PAGE

    collection = LocalRAG(index_dir, reranker_model=None, embedding_backend=backend).index.vectorstore._collection
    store: dict[str, list] = {"ids": [], "documents": [], "embeddings": []}
    for offset in range(0, collection.count(), STORE_READ_PAGE):
        data = collection.get(include=["documents", "embeddings"], limit=STORE_READ_PAGE, offset=offset)
        for key in store:
            store[key] += list(data[key])  # embeddings come as one numpy array
    if not store["ids"]:
        raise RAGError(f"the build stored no chunks in {index_dir} (no page has a text layer), so --bare has nothing "
                       f"to embed; leave --bare out, or give PDFs with text")
    progress(f"bare embedding loop over the {len(store['ids']):,} stored chunks on {backend} ...")
    load_before = load_average()
    started = time.perf_counter()
    vectors = bare_embed(store["documents"], backend)
    seconds = time.perf_counter() - started
    return {"chunks": len(vectors), "seconds": round(seconds, 3), "chunks_per_s": per_second(len(vectors), seconds),
            "load_before": load_before, "load_after": load_average(),
            "lowest_cosine_to_index": round(lowest_cosine(vectors, store["embeddings"]), 6)}


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def count_pages(paths: Sequence[Path]) -> int:
    """Total pages of the PDFs (pypdfium2 reads only the page tree: a second for all filings)."""
    import pypdfium2

    total = 0
    for path in paths:
        pdf = pypdfium2.PdfDocument(str(path))
        try:
            total += len(pdf)
        finally:
            pdf.close()
    return total


def warm_page_cache(paths: Sequence[Path]) -> None:
    """Read every file once, so no loader pays for the first read from disk."""
    for path in paths:
        path.read_bytes()


def time_extraction(paths: Sequence[Path], loader: str, workers: int) -> dict:
    """Extract `paths` with `loader` (extract_pdf in this process when workers is 1, else iter_extracted)."""
    started = time.perf_counter()
    if workers <= 1:
        results = (extract_pdf(str(path), loader) for path in paths)
    else:
        results = iter_extracted(list(paths), loader, workers=workers)
    pages = failed = 0
    for done, pdf in enumerate(results, start=1):
        pages += len(pdf.pages)
        failed += pdf.error is not None
        if pdf.error:
            progress(f"  {loader}: {paths[done - 1].name}: {pdf.error}")
    seconds = time.perf_counter() - started
    return {"loader": loader, "workers": workers, "files": len(paths), "failed": failed, "pages": pages,
            "seconds": round(seconds, 3), "pages_per_s": per_second(pages, seconds)}


def run_extraction(paths: Sequence[Path], loaders: Sequence[str], sample: int | None, workers: int) -> list[dict]:
    """One single-process and one parallel run per loader; the sampled loader sees only the first `sample` files."""
    total_pages = count_pages(paths)
    warm_page_cache(paths)
    rows = []
    for loader in loaders:
        subset = list(paths[:sample]) if loader == SAMPLED_LOADER and sample else list(paths)
        for n_workers in (1, workers):
            progress(f"extracting {len(subset)} files with {loader}, {n_workers} process(es) ...")
            row = time_extraction(subset, loader, n_workers)
            row["sample"] = len(subset) < len(paths)
            row["all_files"] = len(paths)
            row["all_pages"] = total_pages
            row["all_seconds_est"] = (extrapolated_seconds(row["pages"], row["seconds"], total_pages)
                                      if row["sample"] else row["seconds"])
            progress(f"  {row['pages']} pages in {row['seconds']:.1f} s")
            rows.append(row)
    return rows


def prepare_index_dir(index_dir: Path, fresh: bool) -> None:
    """Refuse paths inside the repo; with `fresh`, delete an existing index (only a folder that holds one)."""
    if is_inside(index_dir, REPO_ROOT):
        raise RAGError(f"--index {index_dir} lies inside the repository {REPO_ROOT}; indexes must not be "
                       f"committed, so give a folder outside it (default {INDEX_DIR})")
    if not index_dir.exists() or not any(index_dir.iterdir()):
        return
    if not fresh:
        raise RAGError(f"--index {index_dir} already holds files, so a sync would only measure an update; "
                       f"pass --fresh to delete it and build from scratch, or --skip-build")
    if not (index_dir / INDEX_INFO_FILE).exists():
        raise RAGError(f"--index {index_dir} is not empty and holds no {INDEX_INFO_FILE}, so it is not a "
                       f"LocalRAG index; --fresh deletes only indexes: choose an empty or new folder")
    progress(f"deleting the old index {index_dir} (--fresh)")
    shutil.rmtree(index_dir)


def run_build(pdf_dir: Path, index_dir: Path, embedding_backend: str | None = None) -> dict:
    """Full build with default settings (or another embedding backend), then a second sync with nothing changed."""
    load_before = load_average()
    started = time.perf_counter()
    rag = LocalRAG(index_dir, reranker_model=None, embedding_backend=embedding_backend)
    load_seconds = time.perf_counter() - started
    timer = TimedEmbeddings(rag.embeddings)
    rag.embeddings = timer
    progress(f"building {index_dir} from {pdf_dir} ...")
    first = rag.sync([pdf_dir])
    build_seconds = time.perf_counter() - started
    rss_self, rss_children = peak_rss_mib(resource.RUSAGE_SELF), peak_rss_mib(resource.RUSAGE_CHILDREN)
    load_after = load_average()
    progress(first.summary())
    progress("second sync, nothing changed ...")
    second = rag.sync([pdf_dir])
    progress(second.summary())
    return {"files": len(first.added) + len(first.updated), "failed": len(first.failed), "pages": first.pages,
            "empty_pages": len(first.empty_pages), "chunks": first.chunks,
            "model_load_seconds": round(load_seconds, 3), "sync_seconds": round(first.seconds, 3),
            "build_seconds": round(build_seconds, 3), "embed_seconds": round(timer.seconds, 3),
            "embedded_chunks": timer.texts, "chunks_per_s": per_second(timer.texts, timer.seconds),
            "pages_per_s": per_second(first.pages, build_seconds),
            "peak_rss_mib": round(rss_self, 1), "peak_rss_workers_mib": round(rss_children, 1),
            "resync_seconds": round(second.seconds, 3), "resync_changed": second.changed,
            "resync_chunks": second.chunks, "load_before": load_before, "load_after": load_after,
            "settings": rag.display_settings}


# ----------------------------------------------------------------------------- report

def extraction_table(rows: Sequence[dict]) -> str:
    body = []
    for row in rows:
        files = f"{row['files']} of {row['all_files']} (sample)" if row["sample"] else str(row["files"])
        body.append([row["loader"], "1 process" if row["workers"] <= 1 else f"{row['workers']} workers", files,
                     fmt_number(row["pages"]), fmt_number(row["seconds"]), fmt_number(row["pages_per_s"]),
                     ("~" if row["sample"] else "") + fmt_number(row["all_seconds_est"]),
                     fmt_number(row["failed"])])
    return format_table(["loader", "mode", "files", "pages", "seconds", "pages/s", "all files s", "failed"], body)


def build_table(build: dict, bare: dict | None = None) -> str:
    resync = "nothing re-indexed" if not build["resync_changed"] else f"CHANGED: {build['resync_chunks']} chunks"
    rows = [
        ["files indexed / failed", f"{build['files']} / {build['failed']}", ""],
        ["pages (without text)", f"{build['pages']:,} ({build['empty_pages']:,})", ""],
        ["chunks", fmt_number(build["chunks"]), ""],
        ["total build", fmt_number(build["build_seconds"]),
         f"s, model load + first sync; load average {build['load_before']} before, {build['load_after']} after"],
        ["  model load", fmt_number(build["model_load_seconds"]), "s"],
        ["  first sync", fmt_number(build["sync_seconds"]), "s, hashing + extraction + embedding + BM25"],
        ["  embed_documents", fmt_number(build["embed_seconds"]), "s"],
        ["embedding speed", fmt_number(build["chunks_per_s"]), "chunks/s inside embed_documents"],
        ["build speed", fmt_number(build["pages_per_s"]), "pages/s, whole build"],
        ["peak RSS, this process", fmt_number(build["peak_rss_mib"]), "MiB"],
        ["peak RSS, one extraction worker", fmt_number(build["peak_rss_workers_mib"]), "MiB (forked: shares pages)"],
        ["second sync, nothing changed", fmt_number(build["resync_seconds"], 2), f"s, {resync}"],
    ]
    if bare:
        rows += [
            ["bare embedding loop", fmt_number(bare["seconds"]),
             f"s, {bare['chunks']:,} stored chunks, {fmt_number(bare['chunks_per_s'])} chunks/s; load average "
             f"{bare['load_before']} before, {bare['load_after']} after"],
            ["  total build / bare", fmt_number(per_second(build["build_seconds"], bare["seconds"]), 2), "x"],
            ["  embed_documents / bare", fmt_number(per_second(build["embed_seconds"], bare["seconds"]), 2), "x"],
            ["  lowest cosine to the index", fmt_number(bare["lowest_cosine_to_index"], 6),
             "bare vectors against the stored ones"],
        ]
    return format_table(["build", "value", "unit / note"], rows)


def render(results: dict) -> str:
    parts = [f"FinanceBench indexing: {results['pdf_files']} PDFs in {results['pdf_dir']}, "
             f"{os.cpu_count()} CPU cores"]
    if results.get("build"):
        s = results["build"]["settings"]
        parts += ["", f"Index {results['index']} (loader {s['pdf_loader']}, {s['embedding_model']} on "
                      f"{s['embedding_backend']}, chunk {s['chunk_size']}/"
                      f"{s['chunk_overlap']})", build_table(results["build"], results.get("bare"))]
    if results.get("extraction"):
        parts += ["", "Extraction (all files s: measured, or ~ extrapolated from the sample by pages/s)",
                  extraction_table(results["extraction"])]
    return "\n".join(parts)


# ----------------------------------------------------------------------------- CLI

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Time PDF extraction, embedding, index build and re-sync on the FinanceBench filings.",
        formatter_class=HelpFormatter)
    parser.add_argument("--pdfs", type=Path, default=PDF_DIR, help="folder of PDFs to index")
    parser.add_argument("--index", type=Path, default=INDEX_DIR, help="index folder to build (outside the repo)")
    parser.add_argument("--fresh", action="store_true", help="delete an existing index at --index before building")
    parser.add_argument("--extract-sample", type=int, default=None, metavar="N",
                        help=f"time {SAMPLED_LOADER} on the first N files and extrapolate by pages/s; None: all")
    parser.add_argument("--loaders", nargs="+", choices=LOADERS, default=list(LOADERS), help="loaders to time")
    parser.add_argument("--workers", type=int, default=WORKERS, help="processes of the parallel extraction run")
    parser.add_argument("--embedding-backend", choices=local_rag.EMBEDDING_BACKENDS, default=None,
                        help=f"embedding backend of the build (default: {local_rag.EMBEDDING_BACKEND})")
    parser.add_argument("--bare", action="store_true",
                        help="after the build, time a bare embedding loop over the same chunks (torch, openvino-int8)")
    parser.add_argument("--skip-build", action="store_true", help="only time extraction")
    parser.add_argument("--skip-extract", action="store_true", help="only build and re-sync")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the results as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.extract_sample is not None and args.extract_sample < 1:
            raise RAGError(f"--extract-sample {args.extract_sample} must be at least 1 (leave it out for all files)")
        if args.bare and args.skip_build:
            raise RAGError("--bare times the chunks of the build it follows; leave out --skip-build")
        backend = args.embedding_backend or local_rag.EMBEDDING_BACKEND
        if args.bare and backend not in BARE_BACKENDS:
            raise RAGError(f"--bare runs {' and '.join(BARE_BACKENDS)}, not {backend!r}; leave --bare out for it")
        if args.workers < 2:
            raise RAGError(f"--workers {args.workers} must be at least 2; the single-process run is always timed")
        paths = find_pdfs([args.pdfs])
        if not paths:
            raise RAGError(f"no PDFs below {args.pdfs}; give the FinanceBench pdfs folder with --pdfs")
        results: dict = {"pdf_dir": str(args.pdfs), "pdf_files": len(paths), "index": str(args.index),
                         "cpu_count": os.cpu_count(), "build": None, "extraction": []}
        if not args.skip_build:
            prepare_index_dir(args.index, args.fresh)
            results["build"] = run_build(args.pdfs, args.index, args.embedding_backend)
            if args.bare:
                results["bare"] = run_bare(args.index, backend)
        if not args.skip_extract:
            results["extraction"] = run_extraction(paths, args.loaders, args.extract_sample, args.workers)
    except RAGError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        progress(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
