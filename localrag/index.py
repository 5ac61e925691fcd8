"""The index: its manifest (index_info.json), Chroma store, writer lock, consistency check, sync and BM25 arrays.

`Index.sync` follows the docs folder by file hash and never re-embeds unchanged files; chunks are embedded and
committed in groups, and a later sync reuses every stored chunk of an interrupted one (see _index_units).
add_pdfs.py builds an index through local_rag.py's `LocalRAG`, which hands this module its settings at call
time; retrieval reads it (localrag/retriever.py).
"""
from __future__ import annotations

import collections
import contextlib
import errno
import hashlib
import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from localrag import embeddings as embedding_backends
from localrag import ivf
from localrag import models
from localrag.bm25 import BM25Index, check_stemmer
from localrag.context import chunk_context, document_context
from localrag.errors import RAGError
from localrag.files import new_file_mode, write_json_atomic
from localrag.pages import chunk_header, shown_page
from localrag.pdf import (PDF_LOADERS, TEXT_RULES, ExtractedPdf, discover_pdfs, extract_pdf, front_page,
                          read_outline, sections_by_page)

# Chroma phones home unless told not to; set before chromadb is imported (this module imports it when used).
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

INDEX_INFO_FILE = "index_info.json"  # the manifest inside a local index folder
LOCK_FILE = ".localrag.lock"  # the writer lock inside a local index folder
COLLECTION_MARKER = "localrag_format"  # collection metadata key that marks a collection localRAG made
BM25_DIR = "bm25"  # folder of the saved BM25 arrays inside a local index folder
# Written into the manifest and the collection metadata. 2: chunks carry page_number and section; a sync of an
# older index adds them to its stored chunks in place (`Index._upgrade_chunks`), without embedding again.
INDEX_FORMAT = 2
# Settings whose change invalidates every stored chunk.
REBUILD_SETTINGS = ("embedding_model", "embedding_backend", "chunk_size", "chunk_overlap", "pdf_loader",
                    "chunk_headers", "chunk_context")
# What a manifest written before a setting existed was built with: indexes before context lines had none.
UNRECORDED_SETTINGS = {"chunk_context": False}


def significant_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` less those at the value indexes had before the setting was recorded: names, digests and logs
    derived from them stay as they were for every index that does not use a newer setting."""
    return {key: value for key, value in settings.items()
            if key not in UNRECORDED_SETTINGS or value != UNRECORDED_SETTINGS[key]}
# Chunks read from the store per call: Chroma fails reading ~40,000 at once ("too many SQL variables", seen on a
# FinanceBench index of 1,000-character chunks).
STORE_READ_PAGE = 10_000
# Chunks per Chroma write done in OpenVINO's wait (GroupWriter): a call costs ~36 ms besides ~1.2 ms a chunk, so
# one write per group of 256 (~0.35 s, two batches of 16) costs the least CPU; 32 a call took 1.7x as long.
STORE_WRITE_ROWS = 256
PAGE_CHUNKS = "page"  # the chunk size that keeps each page whole (one chunk per page, no overlap)
# Settings that exist only with whole-page chunks: the characters above which a page is still split.
PAGE_SETTINGS = ("page_chunk_limit",)
# Settings of the BM25 side only: recorded in the manifest, and a change rebuilds the BM25 arrays (seconds), never
# the embeddings.
BM25_SETTINGS = ("bm25_stemmer",)
# The versions recorded in the manifest of each build.
RECORDED_PACKAGES = ("langchain-core", "langchain-chroma", "chromadb", "sentence-transformers",
                     "transformers", "torch", "pypdf", "pypdfium2", "rank-bm25", "onnx", "onnxruntime")


def citation_metadata(meta: dict, section: str | None) -> dict:
    """`meta` with what a citation needs: `page_number` (1-based, as a PDF viewer shows it; `page` stays the
    loaders' 0-based number) and, when known, `section` (Chroma metadata cannot hold None, so no key at all)."""
    out = dict(meta, page_number=shown_page(int(meta["page"])))
    out.pop("section", None)
    if section:
        out["section"] = section
    return out


def log(message: str, quiet: bool = False) -> None:
    """A note for the user on stderr, unless `quiet`."""
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def chunk_id(source: str, file_hash: str, page: int, chunk: int) -> str:
    """Stable id of a chunk: the same file name, content and settings always give the same ids.

    The name is part of it because two copies of one PDF (same hash) are two sources, each with its own chunks.
    """
    name = hashlib.sha256(source.encode("utf-8")).hexdigest()[:8]
    return f"{file_hash[:16]}-{name}:{page}:{chunk}"


def _writable(folder: Path) -> bool:
    """Whether the index folder and its Chroma database can be written (False on a read-only mount)."""
    database = folder / "chroma.sqlite3"
    return os.access(folder, os.W_OK) and (not database.exists() or os.access(database, os.W_OK))


def remove_tree(folder: Path) -> None:
    """Delete a folder of this user's, also where a file or folder in it lost its write permission."""
    import shutil
    import stat

    def retry(function, path, _exc) -> None:
        os.chmod(os.path.dirname(path), stat.S_IRWXU)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, stat.S_IRWXU)
        function(path)

    if folder.exists():
        shutil.rmtree(folder, onexc=retry) if sys.version_info >= (3, 12) else shutil.rmtree(folder, onerror=retry)


def package_versions(names: Iterable[str]) -> dict[str, str]:
    """Installed version of each package, or "not installed"."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def collection_name(settings: dict) -> str:
    """Server collection name derived from the index settings, so two configurations never share one.

    Only the REBUILD_SETTINGS name it: another BM25 stemmer reuses the same stored vectors."""
    embedded = {key: settings[key] for key in REBUILD_SETTINGS}
    digest = hashlib.sha256(json.dumps(embedded, sort_keys=True).encode("utf-8")).hexdigest()[:12]
    return f"localrag-{digest}"


def resolve_settings(requested: dict, stored: dict, defaults: dict) -> dict:
    """Each rebuild setting: the caller's choice, else the index's, else the default; RAGError when invalid."""
    built = stored if not stored else {**UNRECORDED_SETTINGS, **stored}
    defaults = {**UNRECORDED_SETTINGS, **defaults}
    settings = {key: (requested[key] if requested.get(key) is not None else built.get(key, defaults[key]))
                for key in REBUILD_SETTINGS + BM25_SETTINGS}
    try:
        check_stemmer(settings["bm25_stemmer"])
    except ValueError as exc:
        raise RAGError(f"{exc} (BM25_STEMMER in local_rag.py, or --bm25-stemmer)") from None
    if settings["pdf_loader"] not in PDF_LOADERS:
        raise RAGError(f"unknown PDF loader {settings['pdf_loader']!r}; use one of {', '.join(PDF_LOADERS)}")
    if settings["chunk_size"] == PAGE_CHUNKS:
        return _page_settings(settings, requested, stored, defaults)
    if not isinstance(settings["chunk_size"], int):
        raise RAGError(f"chunk size must be a number of characters or {PAGE_CHUNKS!r}, got "
                       f"{settings['chunk_size']!r}")
    if settings["chunk_size"] < 1 or settings["chunk_overlap"] < 0:
        raise RAGError(f"chunk size must be at least 1 and chunk overlap at least 0 characters, got size "
                       f"{settings['chunk_size']} and overlap {settings['chunk_overlap']}")
    if settings["chunk_overlap"] >= settings["chunk_size"]:
        raise RAGError(f"chunk overlap {settings['chunk_overlap']} must be smaller than the chunk size "
                       f"{settings['chunk_size']}")
    return settings


def _page_settings(settings: dict, requested: dict, stored: dict, defaults: dict) -> dict:
    """Whole-page chunks: no overlap (an explicit other one is a RAGError) and the page limit of PAGE_SETTINGS."""
    if requested.get("chunk_overlap") not in (None, 0):
        raise RAGError(f"whole-page chunks (chunk size {PAGE_CHUNKS!r}) have no overlap, got chunk overlap "
                       f"{requested['chunk_overlap']}; leave the overlap out or give 0")
    limit = next((source["page_chunk_limit"] for source in (requested, stored, defaults)
                  if source.get("page_chunk_limit") is not None), None)
    if not isinstance(limit, int) or limit < 1:
        raise RAGError(f"the page chunk limit must be a positive number of characters, got {limit!r}")
    return dict(settings, chunk_overlap=0, page_chunk_limit=limit)


def read_store(collection, include: list[str]) -> dict[str, list]:
    """Every record of a Chroma collection ({"ids": [...], and each of `include`}), read STORE_READ_PAGE at a time."""
    out: dict[str, list] = {"ids": [], **{key: [] for key in include}}
    for offset in range(0, collection.count(), STORE_READ_PAGE):
        data = collection.get(include=include, limit=STORE_READ_PAGE, offset=offset)
        for key in out:
            out[key] += list(data[key])  # embeddings come as one array
    return out


_BLAS: list = []  # the threadpoolctl controller, made at the first search (finding the libraries takes ~0.1 s)


def one_blas_thread():
    """A context in which numpy's BLAS runs one thread. A search is one memory-bound matrix-vector product, and
    OpenBLAS's other threads kept spinning after it and slowed the next question's embedding (torch): a new chat
    question on the FinanceBench index took 30.9 ms at p50 with all threads, 17.0 ms with one."""
    if not _BLAS:
        import threadpoolctl

        _BLAS.append(threadpoolctl.ThreadpoolController())
    return _BLAS[0].limit(limits=1, user_api="blas")


def top_k_cosine(matrix: Any, vector: Sequence[float], k: int) -> list[tuple[int, float]]:
    """(row, cosine similarity) of the k rows of `matrix` (unit rows, float32) nearest to `vector`, best first;
    equal similarities in row order, also at the cut."""
    import numpy

    n = len(matrix)
    k = min(k, n)
    if k <= 0:
        return []
    query = numpy.asarray(vector, dtype=numpy.float32)
    with one_blas_thread():
        similarities = matrix @ (query / (float(numpy.linalg.norm(query)) or 1.0))
    cut = numpy.partition(similarities, n - k)[n - k]  # the k-th best similarity
    top = numpy.flatnonzero(similarities >= cut)  # every row tied at the cut, so the row rule decides there too
    order = top[numpy.lexsort((top, -similarities[top]))][:k]
    return [(int(i), float(similarities[i])) for i in order]


def parse_chunk_size(text: str) -> int | str:
    """A --chunk-size value: a positive number of characters, or "page" (ValueError naming both otherwise)."""
    text = str(text).strip()
    if text == PAGE_CHUNKS:
        return PAGE_CHUNKS
    try:
        size = int(text)
    except ValueError:
        size = 0
    if size < 1:
        raise ValueError(f"must be a positive number of characters or {PAGE_CHUNKS!r} (one chunk per page), "
                         f"got {text!r}")
    return size


def text_splitter(settings: dict):
    """The splitter of one page's text: chunk_size characters with chunk_overlap, or with whole-page chunks the
    page in one piece unless it is longer than page_chunk_limit (then pieces of at most that, no overlap)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    if settings["chunk_size"] == PAGE_CHUNKS:
        return RecursiveCharacterTextSplitter(chunk_size=settings["page_chunk_limit"], chunk_overlap=0)
    return RecursiveCharacterTextSplitter(chunk_size=settings["chunk_size"], chunk_overlap=settings["chunk_overlap"])


@dataclass
class SyncReport:
    """What one sync did; printed by add_pdfs.py and the evaluation."""
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    reread: list[str] = field(default_factory=list)  # unchanged files read again under newer page text rules
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # folder entries not read (links), with why
    repaired: list[tuple[str, str]] = field(default_factory=list)  # sources re-embedded because the store lost chunks
    orphans_removed: int = 0  # stored chunks of no indexed file (left by an interrupted or concurrent run)
    empty_pages: list[tuple[str, int]] = field(default_factory=list)  # (source, 0-based page) without text
    pages: int = 0  # pages of the files this sync completed
    chunks: int = 0  # chunks embedded and stored by this sync (not those of an interrupted run it reused)
    kept: int = 0  # stored chunks of re-read or resumed files whose text and metadata were unchanged (not embedded)
    seconds: float = 0.0
    rebuilt_because: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.reread or self.rebuilt_because
                    or self.repaired or self.orphans_removed)

    def file_lines(self) -> list[tuple[str, str]]:
        """(what happened, file) for each file added, updated, removed or re-read, as the CLIs print them."""
        return [(label, name) for label, names in (("added", self.added), ("updated", self.updated),
                                                    ("removed", self.removed), ("re-read", self.reread))
                for name in names]

    def summary(self) -> str:
        repaired = f" / repaired {len(self.repaired)}" if self.repaired else ""
        reread = f" / re-read {len(self.reread)}" if self.reread else ""
        kept = f" ({self.kept} stored chunks kept as they were)" if self.kept else ""
        skipped = f" / skipped {len(self.skipped)}" if self.skipped else ""
        return (f"files added {len(self.added)} / updated {len(self.updated)} / removed {len(self.removed)} / "
                f"unchanged {len(self.unchanged)} / failed {len(self.failed)}{skipped}{repaired}{reread}; "
                f"{self.pages} pages and {self.chunks} chunks embedded{kept}; {self.seconds:.1f} s")


@dataclass
class SourceUnit:
    """One indexable source: a PDF file or a dataset document, with its pages' texts."""
    source: str
    file_hash: str
    pages: list[tuple[int, str, str]]  # (0-based page, label, text)
    header: str | None = None  # chunk header; None means chunk_header(source, page, context line)
    context: str = ""  # the document's identity (localrag/context.py), for the context lines of its chunks
    extra_metadata: dict = field(default_factory=dict)
    extraction_method: str = ""
    outline: list[tuple[int, str]] = field(default_factory=list)  # (0-based start page, title) of the PDF's outline


@dataclass
class IndexCheck:
    """How the store agrees with the manifest (`Index.check_index`)."""
    stored: int = 0  # chunks in the store
    dimension: int | None = None  # size of the stored vectors; None for an empty store
    problems: list[str] = field(default_factory=list)  # measuring this index would be wrong; sync cannot repair
    repairs: dict[str, str] = field(default_factory=dict)  # source -> what its stored chunks lack; sync re-embeds
    orphan_ids: list[str] = field(default_factory=list)  # chunks of no indexed or partial file: sync deletes them

    def describe(self) -> list[str]:
        return self.problems + [f"{source}: {why}" for source, why in sorted(self.repairs.items())]


def manifest_problem(data: object) -> str | None:
    """What is structurally wrong with a parsed index_info.json, or None when it can be trusted."""
    if not isinstance(data, dict):
        return f"it holds a JSON {type(data).__name__} instead of an object"
    lacking = [key for key in ("files", "settings") if key not in data]
    if lacking:  # every manifest localRAG writes has both; `{}` is not an empty index's manifest
        return f"it lacks the {' and '.join(repr(k) for k in lacking)} entr{'ies' if len(lacking) > 1 else 'y'} " \
               f"that every manifest localRAG writes has"
    for key in ("files", "failed", "partial", "settings", "counts"):
        if key in data and not isinstance(data[key], dict):
            return f'its "{key}" entry is not an object'
    for name, entry in data.get("files", {}).items():
        if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
                and isinstance(entry.get("pages"), int) and isinstance(entry.get("chunks"), int)):
            return f"its entry for {name!r} lacks sha256, pages or chunks"
    for key in ("failed", "partial"):
        for name, entry in data.get(key, {}).items():
            if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)):
                return f'its "{key}" entry for {name!r} lacks sha256'
    if data.get("files") and not data.get("settings"):
        return "it lists files but no settings"
    missing = [key for key in REBUILD_SETTINGS if data.get("settings") and key not in data["settings"]]
    if missing:
        return f"its settings lack {', '.join(missing)}"
    return None


def storage_error(exc: BaseException, folder: Path | None = None, low_disk_bytes: int = 0) -> str | None:
    """A short reason when `exc` means the disk is full or read-only, else None.

    Chroma reports a full disk in its own words ("Error in compaction: ..."), so a write error while the disk
    of `folder` has less than `low_disk_bytes` free counts as a full disk too.
    """
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device"
    if folder is not None and not isinstance(exc, (KeyboardInterrupt, RAGError)):
        import shutil

        try:
            if shutil.disk_usage(folder).free < low_disk_bytes:
                return "no space left on the device"
        except OSError:
            pass
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        return "the file system is read-only"
    text = str(exc).lower()
    if "disk is full" in text or "no space left" in text or "disk full" in text:
        return "no space left on the device"
    if "readonly database" in text or "read-only file system" in text:
        return "the index is read-only"
    return None


class LazyStore:
    """An index's store: its Chroma collection (`_collection`, which localRAG reads and writes) at once, and
    LangChain's Chroma vector store over it, with all its attributes, only when a caller uses one: importing
    langchain_chroma takes about two seconds, which an evaluation or a sync does not need."""

    def __init__(self, client, name: str, embedding_function, metadata: dict):
        # As langchain_chroma.Chroma opens it (no embedding function of Chroma's own), so both see one collection.
        self._collection = client.get_or_create_collection(name=name, embedding_function=None, metadata=metadata)
        self._open = (client, name, embedding_function, metadata)
        self._langchain = None

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("_open", "_langchain"):  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        if self._langchain is None:
            from langchain_chroma import Chroma

            client, collection, embedding_function, metadata = self._open
            self._langchain = Chroma(collection_name=collection, embedding_function=embedding_function, client=client,
                                     collection_metadata=metadata)
        return getattr(self._langchain, name)


class GroupWriter:
    """The store writes of a sync, done while the embedding model computes the next group.

    Chroma's write holds the GIL for its whole call (~1.2 ms a 2,000-character chunk): in a thread of its own it
    stalled the embedding's Python steps, done after each group it left the cores to one thread. Here a group's
    write is cut into pieces that OpenVINO runs in its wait, one per batch (`embeddings.wait_work`); backends
    without that wait run them at `wait`. Everything runs in the caller's thread, in order.

    `submit(pieces, done)` first finishes the previous group: runs its pieces still queued, raises its error, or
    runs its `done` (the manifest update), which thus only ever follows its own complete write.
    """

    def __init__(self, queue: Any = None) -> None:
        import collections

        self._queue = queue if queue is not None else collections.deque()
        self._done: Callable[[], None] | None = None
        self._error: BaseException | None = None

    def submit(self, pieces: Sequence[Callable[[], None]], done: Callable[[], None]) -> None:
        self.wait()
        self._done, self._error = done, None
        self._queue.extend(self._guarded(piece) for piece in pieces)

    def _guarded(self, piece: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            if self._error is None:  # after a failed piece the rest of its group is skipped
                try:
                    piece()
                except Exception as exc:  # noqa: BLE001 - raised by `wait` in the sync's own flow, not in the model's
                    self._error = exc
                except BaseException as exc:  # Ctrl-C inside a write: the group is never reported done
                    self._error = exc
                    raise
        return run

    def wait(self) -> None:
        """Finish the group in flight, if any: run its queued pieces, raise its error, else run its `done`."""
        while self._queue:
            self._queue.popleft()()
        done, error, self._done, self._error = self._done, self._error, None, None
        if error is not None:
            raise error
        if done is not None:
            done()

    def close(self, failing: bool) -> None:
        """Finish the group in flight. While the caller is failing already (Ctrl-C during embedding), its write is
        still completed and recorded unless a piece failed or was interrupted; that error, or one of recording it,
        is dropped for the caller's."""
        if not failing:
            self.wait()
            return
        try:
            while self._queue:
                self._queue.popleft()()
        finally:
            self._queue.clear()
        done, error, self._done, self._error = self._done, self._error, None, None
        if error is None and done is not None:
            try:
                done()
            except Exception:  # noqa: BLE001 - the caller's exception is the one to report
                pass


_LOCKS: dict[str, object] = {}  # one FileLock per index folder and process, so nested holders share it
_SERVER_LOCKS: dict[str, list] = {}  # server index -> [lock token, holders] of the locks this process holds


class Index:
    """One index folder or server collection. Settings left as None come from the index, then from `defaults`."""

    def __init__(self, path: str | Path, requested: dict, defaults: dict,
                 load_embeddings: Callable[[str, str], Any], *, chroma_url: str | None, collection: str,
                 cache_dir: str | Path, low_disk_bytes: int, lock_stale_seconds: float, quiet: bool = False,
                 expected_export: Callable[[str, str], str | None] | None = None,
                 ivf_defaults: dict[str, int], ivf_requested: dict[str, int | None], ivf_probes: int):
        """`requested`/`defaults`: the REBUILD_SETTINGS as the caller chose them (None: not chosen) and their
        defaults; `load_embeddings(name, backend)` loads the model, at its first use (`embeddings`);
        `expected_export(name, backend)`: the export that loading would run (default: models.expected_export
        without calibration texts), so that the manifest can be checked without loading the model;
        `collection`: the collection inside a local folder; `cache_dir`: where a server index keeps its BM25
        arrays; `low_disk_bytes`: see `storage_error`; `lock_stale_seconds`: age of a server lock record without
        a heartbeat that marks its writer as dead. `ivf_defaults` / `ivf_requested`: "min_chunks" and "lists" of
        the approximate dense search (localrag/ivf.py; requested None: as the manifest records, else the default),
        `ivf_probes` the lists a search reads (0: ivf.default_probes)."""
        self.path = Path(path)
        self.quiet = quiet
        self.ivf_defaults, self.ivf_requested, self.ivf_probes = dict(ivf_defaults), dict(ivf_requested), ivf_probes
        self._ivf: tuple[str, Any] | None = None  # (fingerprint, the loaded IVF or None)
        self.chroma_url = chroma_url.rstrip("/") if chroma_url else None
        self.cache_dir = Path(cache_dir)
        self.low_disk_bytes = low_disk_bytes
        self.lock_stale_seconds = lock_stale_seconds
        self._requested = dict(requested)
        self._defaults = dict(defaults)
        self._load_embeddings = load_embeddings
        self._client = None
        self._store = None
        self._store_path = self.path  # a temporary copy when the index folder is read-only
        self._may_create_store = False  # True inside sync (see _refuse_missing_store)
        self._temp_copy = None
        self.revision = 0  # counts manifest writes and reloads: what was derived from an older manifest is stale
        self.info_problem: str | None = None  # why index_info.json cannot be trusted; None when it can
        self._manifest_moved = False
        # On a server the collection name is derived from the settings, so stored settings cannot be read first.
        self.info = {} if self.chroma_url else self._load_info()
        self.settings = resolve_settings(self._requested, self.info.get("settings", {}), self._defaults)
        self.collection_name = collection_name(self.settings) if self.chroma_url else collection
        if self.chroma_url:
            self.info = self._load_info()
        self.read_only = not self.chroma_url and self.path.exists() and not _writable(self.path)
        # Loaded at the first text to embed: opening an index, a no-op sync and a cached evaluation need no model.
        self._embeddings = None
        self._expected_export = expected_export or (lambda name, backend: models.expected_export(name, backend))
        self._bm25 = None
        self._fingerprint: str | None = None
        self._vectors: tuple[str, list[str], Any] | None = None  # (fingerprint, ids, unit vectors) for nearest()
        self._lock_token: str | None = None

    # ------------------------------------------------------------------ the embedding model, loaded lazily

    @property
    def embeddings(self):
        """The embedding model (LangChain Embeddings), loaded at the first access."""
        if self._embeddings is None:
            self._embeddings = self._load_embeddings(self.settings["embedding_model"],
                                                     self.settings["embedding_backend"])
        return self._embeddings

    @embeddings.setter
    def embeddings(self, value) -> None:
        self._embeddings = value

    @property
    def embeddings_loaded(self) -> bool:
        """Whether the embedding model has been loaded (or set) in this object."""
        return self._embeddings is not None

    @property
    def embedding_export(self) -> str | None:
        """The export the model runs ("torch", "onnx-int8-avx2", ...): the loaded model's, else the one loading it
        would give."""
        if self._embeddings is not None:
            return embedding_backends.export_name(self._embeddings)
        return self._expected_export(self.settings["embedding_model"], self.settings["embedding_backend"])

    @property
    def embedding_prefixes(self) -> dict[str, str]:
        """The prefixes the model applies (recorded in the manifest): the loaded model's, else by its name."""
        if self._embeddings is not None:
            return models.embedding_prefixes(self._embeddings)
        return models.model_prefixes(self.settings["embedding_model"])

    @property
    def embedding_model_name(self) -> str:
        """The model's name as reports show it (never a local path): the loaded model's, else by its name."""
        if self._embeddings is not None:
            return self._embeddings.model_name
        return models.display_name(self.settings["embedding_model"])

    # ------------------------------------------------------------------ manifest and store

    def _load_info(self) -> dict:
        """The manifest, or {} with `info_problem` set when it is damaged (sync --rebuild moves it aside)."""
        self.info_problem = None
        try:
            if self.chroma_url:
                data = self._info_collection().get(ids=["index_info"], include=["documents"])
                if not data["ids"]:
                    return {}
                info = json.loads(data["documents"][0])
            else:
                path = self.path / INDEX_INFO_FILE
                if not path.exists():
                    return {}
                info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            self.info_problem = f"it cannot be read ({type(exc).__name__}: {exc})"
            return {}
        self.info_problem = manifest_problem(info)
        return {} if self.info_problem else info

    def _manifest_error(self) -> RAGError:
        where = self.location if self.chroma_url else str(self.path / INDEX_INFO_FILE)
        return RAGError(f"the index manifest {where} is damaged: {self.info_problem}; run add_pdfs.py "
                        f"{'--chroma-url ' + self.chroma_url if self.chroma_url else '--index ' + str(self.path)} "
                        f"--rebuild (it moves the damaged manifest aside and builds the index again)",
                        reason="damaged index manifest")

    def _chroma_client(self):
        """A client of the local index folder, or of the Chroma server at `chroma_url`."""
        if self._client is not None:
            return self._client
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False)
        if not self.chroma_url:
            self._refuse_missing_store()
            if self.read_only and self._temp_copy is None:
                self._copy_read_only_index()
            self._store_path.mkdir(parents=True, exist_ok=True)
            try:
                self._client = chromadb.PersistentClient(path=str(self._store_path), settings=settings)
            except Exception as exc:  # noqa: BLE001 - chromadb's own errors carry the reason
                why = storage_error(exc)
                raise RAGError(f"cannot open the index {self.path}: {why or f'{type(exc).__name__}: {exc}'}") from exc
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

    def _refuse_missing_store(self) -> None:
        """Raise when the manifest lists chunks but the store file is gone, outside a sync: Chroma would create an
        empty database (and segment folder) in a folder that a reader (--no-sync, the chat) must not change. A
        sync creates it and re-embeds every file."""
        database = self.path / "chroma.sqlite3"
        listed = sum(entry.get("chunks", 0) for entry in self.files.values())
        if not listed or database.exists():
            return
        if self._may_create_store:
            return
        raise RAGError(f"the index {self.path} does not match its manifest (it lists {listed} chunks, but the store "
                       f"file {database} is missing); measuring it would give wrong numbers. Repair it with "
                       f"add_pdfs.py {self._index_flag()} (or evaluate without --no-sync)",
                       reason="index does not match its manifest")

    @contextlib.contextmanager
    def _creating_store(self) -> Iterator[None]:
        """Inside a sync: a missing store file may be created (and every file re-embedded into it)."""
        self._may_create_store = True
        try:
            yield
        finally:
            self._may_create_store = False

    def _remove_orphan_segments(self) -> list[str]:
        """Delete the segment folders of the local store that its database does not name (left by a deleted or
        replaced chroma.sqlite3, or a dropped collection); returns their names. Only folders named like Chroma's
        (a UUID) holding nothing but HNSW files are touched."""
        import shutil
        import sqlite3
        import uuid

        database = self._store_path / "chroma.sqlite3"
        if self.chroma_url or not database.exists():
            return []
        db = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            known = {row[0] for row in db.execute("SELECT id FROM segments")}
        except sqlite3.Error:
            return []  # a layout this code does not know: leave every folder as it is
        finally:
            db.close()
        hnsw = {"header.bin", "data_level0.bin", "length.bin", "link_lists.bin", "index_metadata.pickle"}
        removed = []
        for folder in sorted(p for p in self._store_path.iterdir() if p.is_dir() and p.name not in known):
            try:
                uuid.UUID(folder.name)
            except ValueError:
                continue
            if all(f.is_file() and f.name in hnsw for f in folder.iterdir()):
                shutil.rmtree(folder)
                removed.append(folder.name)
        return removed

    def _copy_read_only_index(self) -> None:
        """Chroma opens its database for writing even to read; a read-only index is read from a private copy."""
        import shutil
        import tempfile
        import weakref

        self._temp_copy = Path(tempfile.mkdtemp(prefix="localrag-readonly-"))
        # Removed when this object goes, or at exit (Ctrl-C too: weakref.finalize runs at interpreter exit).
        weakref.finalize(self, remove_tree, self._temp_copy)
        self._store_path = self._temp_copy / "index"
        # copytree keeps the modes: a copy of a folder read-only for this user would be read-only too, and
        # Chroma (which writes even to read) could not open it. The copy is this user's, so it is made writable.
        shutil.copytree(self.path, self._store_path, ignore=shutil.ignore_patterns(LOCK_FILE),
                        copy_function=shutil.copyfile)
        for folder, _, _ in os.walk(self._store_path):
            os.chmod(folder, 0o700)
        log(f"note: the index {self.path} is read-only; reading a temporary copy of it", self.quiet)

    def _info_collection(self):
        # index_info.json of a server index lives beside its collection, as one record of a side collection.
        return self._chroma_client().get_or_create_collection(f"{self.collection_name}-info",
                                                              embedding_function=None)

    @property
    def vectorstore(self):
        """The LangChain Chroma store of the index (a `LazyStore`), opened on first use; None while no index has been
        built."""
        if self._store is None and self.info.get("settings"):
            self._open_store()
        return self._store

    def _open_store(self) -> None:
        # The marker tells collections made by localRAG from foreign ones, which are never written or deleted.
        self._store = LazyStore(self._chroma_client(), self.collection_name, models.LazyEmbeddings(self),
                                {"hnsw:space": "cosine", COLLECTION_MARKER: INDEX_FORMAT})

    def require_built(self) -> None:
        """Raise a RAGError naming the index and the command that builds it when there is none to read.

        Retrieving from nothing must not look like finding nothing (`vectorstore is None` asks without raising)."""
        if self.info_problem:
            raise self._manifest_error()
        if self.vectorstore is None:
            raise RAGError(f"there is no index at {self.location}; build it with `python add_pdfs.py PDF_FOLDER "
                           f"{self._index_flag()}`, or give the path of an existing index", reason="no index")

    @property
    def location(self) -> str:
        """Where the index lives, as reports show it."""
        return f"{self.chroma_url} collection {self.collection_name}" if self.chroma_url else str(self.path)

    def _index_flag(self) -> str:
        return f"--chroma-url {self.chroma_url}" if self.chroma_url else f"--index {self.path}"

    @property
    def display_settings(self) -> dict:
        """Settings in the words a report uses."""
        return dict(self.settings, embedding_model=self.embedding_model_name)

    def stale_reasons(self) -> list[str]:
        """Why the stored index does not match this object's settings (empty when it does)."""
        return self._rebuild_reasons() + self._text_rules_reasons()

    def file_text_rules(self, entry: dict) -> int:
        """The page text rules version a manifest entry's file was read with (before per-file records: the
        index's, and before any record: 1, LangChain's raw text)."""
        return entry.get("text_rules", self.info.get("text_rules", 1))

    def text_rules_summary(self) -> str:
        """The page text rules the indexed PDFs were read with, for a report: `2`, or `1 (3 files), 2 (5 files)`."""
        versions = collections.Counter(self.file_text_rules(entry) for entry in self.files.values())
        if len(versions) <= 1:
            return str(next(iter(versions), self.info.get("text_rules", TEXT_RULES)))
        return ", ".join(f"{v} ({n} file{'s' if n != 1 else ''})" for v, n in sorted(versions.items()))

    def _text_rules_reasons(self) -> list[str]:
        """Why a sync re-reads files: PDFs read with other page text rules than this localRAG's (see sync)."""
        if not self.info.get("docs"):  # dataset indexes hold their records' text, untouched by the PDF rules
            return []
        old = collections.Counter(self.file_text_rules(e) for e in self.files.values()
                                  if self.file_text_rules(e) != TEXT_RULES)
        return [f"page text rules: {n} of {len(self.files)} files were read with version {version}, this localRAG "
                f"applies version {TEXT_RULES} (localrag/pdf.py); a sync reads them again and embeds only the "
                f"chunks whose text changed" for version, n in sorted(old.items())]

    def _rebuild_reasons(self) -> list[str]:
        """Settings of the stored index that differ from this object's: each one means a whole rebuild."""
        stored = self.info.get("settings")
        if not stored:
            return ["no index has been built yet"]
        stored = {**UNRECORDED_SETTINGS, **stored}
        keys = REBUILD_SETTINGS + tuple(k for k in PAGE_SETTINGS if k in stored or k in self.settings)
        reasons = [f"{key}: index has {stored.get(key)!r}, requested {self.settings.get(key)!r}"
                   for key in keys if stored.get(key) != self.settings.get(key)]
        # Indexes older than the prefix record were embedded without prefixes (no model had any then).
        built_prefixes = self.info.get("embedding_prefixes", models.NO_PREFIXES)
        if built_prefixes != self.embedding_prefixes:
            def shown(p: dict) -> str:
                return f"query {p.get('query', '')!r} passage {p.get('passage', '')!r}"

            reasons.append(f"embedding prefixes: index has {shown(built_prefixes)}, {self.embedding_model_name} uses "
                           f"{shown(self.embedding_prefixes)}")
        built_with, runs = self.info.get("embedding_export"), self.embedding_export
        if not reasons and built_with and runs and built_with != runs:
            # Same backend name, another int8 model: other CPU family (onnx-int8) or calibration (openvino-int8).
            reasons.append(f"embedding export: index was embedded by {built_with!r}, this machine runs {runs!r}")
        return reasons

    # ------------------------------------------------------------------ the writer lock

    @contextlib.contextmanager
    def writing(self, wait: bool) -> Iterator[None]:
        """Hold the index's writer lock: one sync (or evaluation) of an index at a time, across processes.

        A local index locks a file in its folder (filelock); a server index holds a lock record beside its
        collection, refreshed at every commit and taken over only when older than `lock_stale_seconds`.
        Nested holders in one process share the lock. After taking it the manifest is read again, since the
        previous holder may have changed it.
        """
        if self.read_only:
            raise RAGError(f"the index folder {self.path} is read-only: it can be evaluated as it is (with --no-sync), "
                           f"not changed; make it writable to sync it", reason="read-only index")
        if self.chroma_url:
            with self._server_lock(wait):
                self._reload()
                yield
            return
        import filelock

        self.path.mkdir(parents=True, exist_ok=True)
        key = str(self.path.resolve())
        lock = _LOCKS.get(key)
        if lock is None:
            lock = _LOCKS[key] = filelock.FileLock(self.path / LOCK_FILE, mode=new_file_mode(), thread_local=False)
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            if not wait:
                raise RAGError(f"the index {self.path} is being written by another process (add_pdfs.py or an "
                               f"evaluation); wait until it has finished, or leave out --no-wait to wait for it",
                               reason="index locked by another process") from None
            log(f"waiting: the index {self.path} is being written by another process", self.quiet)
            lock.acquire()
        try:
            if lock.lock_counter == 1:
                self._reload()
            yield
        finally:
            lock.release()

    @contextlib.contextmanager
    def _server_lock(self, wait: bool) -> Iterator[None]:
        key = f"{self.chroma_url} {self.collection_name}"
        if key in _SERVER_LOCKS:  # held by this process already: nested holders share it
            _SERVER_LOCKS[key][1] += 1
            self._lock_token = _SERVER_LOCKS[key][0]
            try:
                yield
            finally:
                _SERVER_LOCKS[key][1] -= 1
            return
        token = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"
        collection = self._info_collection()
        announced = False
        while True:
            held = collection.get(ids=["writer_lock"], include=["documents"])
            holder = json.loads(held["documents"][0]) if held["ids"] else None
            if holder and holder["token"] != token and time.time() - holder["heartbeat"] < self.lock_stale_seconds:
                if not wait:
                    raise RAGError(f"the index {self.location} is being written by {holder['token'].rsplit(':', 1)[0]} "
                                   f"(host:pid); wait until it has finished, or leave out --no-wait to wait for it",
                                   reason="index locked by another process")
                if not announced:
                    log(f"waiting: the index {self.location} is being written by {holder['token'].rsplit(':', 1)[0]}",
                        self.quiet)
                    announced = True
                time.sleep(1.0)
                continue
            self._lock_token = token
            self._heartbeat()
            time.sleep(0.3)  # another writer that raced us overwrites the record within this time; read back
            held = collection.get(ids=["writer_lock"], include=["documents"])
            if held["ids"] and json.loads(held["documents"][0])["token"] == token:
                break
        _SERVER_LOCKS[key] = [token, 1]
        try:
            yield
        finally:
            del _SERVER_LOCKS[key]
            self._lock_token = None
            held = collection.get(ids=["writer_lock"], include=["documents"])
            if held["ids"] and json.loads(held["documents"][0])["token"] == token:
                collection.delete(ids=["writer_lock"])

    def _heartbeat(self) -> None:
        if self.chroma_url and self._lock_token:
            record = json.dumps({"token": self._lock_token, "heartbeat": time.time()})
            self._info_collection().upsert(ids=["writer_lock"], embeddings=[[1.0]], documents=[record])

    def _reload(self) -> None:
        """Read the manifest again and drop everything derived from the old one."""
        self.info = self._load_info()
        settings = resolve_settings(self._requested, self.info.get("settings", {}), self._defaults)
        if settings != self.settings:
            self.settings = settings
            self._embeddings = None  # the model of the new settings is loaded when a text is embedded
            self._store = None
        self._fingerprint = None
        self._bm25 = None
        self._vectors = None
        self.revision += 1

    # ------------------------------------------------------------------ index contents

    @property
    def files(self) -> dict[str, dict]:
        """Manifest: source -> {sha256, pages, chunks, empty_pages}; only fully indexed sources appear."""
        return self.info.get("files", {})

    def list_documents(self) -> list[dict]:
        """The indexed sources with their page and chunk counts, sorted by name."""
        return [{"source": name, "pages": entry["pages"], "chunks": entry["chunks"],
                 "empty_pages": entry.get("empty_pages", [])} for name, entry in sorted(self.files.items())]

    @property
    def followed_paths(self) -> list[str]:
        """The PDF folders or files this index follows (absolute), as recorded at its last sync; [] if unknown."""
        return [str((self.path.resolve() / p).resolve()) if not self.chroma_url else p for p in self.info.get("docs", [])]

    def _recorded_paths(self, paths: Sequence[str | Path]) -> list[str]:
        """How the manifest records followed paths: relative to a local index folder, so that moving or
        copying the index and its docs folder together keeps them paired; absolute for a server index."""
        resolved = [Path(p).resolve() for p in paths]
        if self.chroma_url:
            return sorted(str(p) for p in resolved)
        return sorted(os.path.relpath(p, self.path.resolve()) for p in resolved)

    def pdf_changes(self, docs_path: str | Path, hash_file: Callable[[Path], str]) -> dict[str, list[str]]:
        """Compare the docs folder with the index by file hash (`hash_file`), without changing anything."""
        current = discover_pdfs([docs_path]).found
        known = dict(self.files)
        known.update({name: {"sha256": entry["sha256"]} for name, entry in self.info.get("failed", {}).items()})
        changes = {"added": [], "updated": [], "removed": sorted(set(known) - set(current)), "unchanged": []}
        for name, path in sorted(current.items()):
            if name not in known:
                changes["added"].append(name)
            elif known[name]["sha256"] != hash_file(path):
                changes["updated"].append(name)
            else:
                changes["unchanged"].append(name)
        return changes

    def check_index(self) -> IndexCheck:
        """Compare the store with the manifest: per-file chunk counts, vector dimension, orphan chunks.

        One read of the stored metadata (no texts, no vectors). Raises RAGError for a damaged manifest.
        """
        if self.info_problem:
            raise self._manifest_error()
        check = IndexCheck()
        store = self._store if self._store is not None else self.vectorstore
        if store is None:
            return check
        collection = store._collection
        check.stored = collection.count()
        recorded = self.info.get("dimension")
        if check.stored:
            check.dimension = len(collection.get(limit=1, include=["embeddings"])["embeddings"][0])
            if recorded and check.dimension != recorded:
                check.problems.append(f"the store holds vectors of {check.dimension} dimensions, the manifest says "
                                      f"{recorded}")
        counts: dict[str, int] = {}
        partial = self.info.get("partial", {})
        # (a store opened by sync before its first manifest is written is checked too: all its chunks are orphans)
        metadatas = read_store(collection, ["metadatas"]) if check.stored else {"ids": [], "metadatas": []}
        for chunk, meta in zip(metadatas["ids"], metadatas["metadatas"]):
            source = (meta or {}).get("source")
            entry = self.files.get(source) or partial.get(source)
            if entry and meta.get("file_hash") == entry["sha256"]:
                counts[source] = counts.get(source, 0) + 1  # a partial file's chunks are kept for the next sync
                continue
            check.orphan_ids.append(chunk)
        for source, entry in self.files.items():
            if counts.get(source, 0) != entry["chunks"]:
                check.repairs[source] = (f"the store holds {counts.get(source, 0)} of its {entry['chunks']} "
                                         f"chunks")
        return check

    def require_consistent(self) -> IndexCheck:
        """check_index(), raising a RAGError that says how to repair when the index must not be measured."""
        check = self.check_index()
        found = check.describe()
        if found:
            shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
            raise RAGError(f"the index {self.location} does not match its manifest ({shown}); measuring it would "
                           f"give wrong numbers. Repair it with add_pdfs.py {self._index_flag()} (or evaluate "
                           f"without --no-sync){'' if not check.problems else ', or rebuild it with --rebuild'}",
                           reason="index does not match its manifest")
        return check

    # ------------------------------------------------------------------ indexing

    def sync(self, paths: Sequence[str | Path], rebuild: bool, docs_root: str | Path | None, progress: bool, *,
             wait: bool, switch_folder: bool, allow_empty: bool, group_chunks: int, embed_batch: int,
             extract: Callable[[Sequence[Path], str], Iterator[ExtractedPdf]],
             hash_file: Callable[[Path], str]) -> SyncReport:
        """Make the index hold exactly the PDFs under `paths`: add new, re-add changed, drop removed files.

        Refused (RAGError) when the index follows other paths (unless `switch_folder` or `rebuild`) and when
        `paths` hold no PDF at all while the index has files (unless `allow_empty`). Chunks are embedded
        `embed_batch` at a time and committed in groups of `group_chunks`; `extract(paths, loader)` reads the
        PDFs and `hash_file` tells changed files from unchanged ones.
        """
        discovery = discover_pdfs(paths, docs_root)  # a missing path is refused before the index is touched
        with self.writing(wait), self._storage_errors(), self._creating_store():
            report = SyncReport()
            older_format = self._older_format()
            started = time.perf_counter()
            report.skipped = discovery.skipped  # named once, by the caller (add_pdfs.py's output, the report)
            followed = sorted(str(Path(p).resolve()) for p in paths)
            recorded = sorted(self.followed_paths)
            if recorded and recorded != followed and self.files and not (switch_folder or rebuild):
                raise RAGError(f"the index {self.location} follows {', '.join(recorded)}, not {', '.join(followed)}; "
                               f"syncing it with another folder would replace its files. Give the folder it follows, "
                               f"or add --switch-folder (or --rebuild) to make it follow {', '.join(followed)}",
                               reason="index follows another folder")
            known = set(self.files) | set(self.info.get("failed", {}))
            if not discovery.found and known and not allow_empty:  # --rebuild too: a typo must not empty it
                raise RAGError(f"{', '.join(map(str, paths))} holds no PDF files; syncing would remove all "
                               f"{len(known)} files from the index {self.location}. Check the path, or add "
                               f"--allow-empty to empty the index", reason="no PDF files")
            self._prepare(report, rebuild)
            self.info["docs"] = self._recorded_paths(paths)
            for entry in self.files.values():  # before the index-wide version below changes, which they default to
                entry["text_rules"] = self.file_text_rules(entry)
            self.info["text_rules"] = TEXT_RULES
            failed_before = self.info.setdefault("failed", {})
            todo: list[tuple[str, Path, str]] = []
            for name, path in discovery.found.items():
                try:
                    digest = hash_file(path)
                except OSError as exc:  # deleted or made unreadable while the folder was read
                    report.skipped.append((name, f"could not be read ({type(exc).__name__}: {exc.strerror or exc})"))
                    discovery.found[name] = None
                    continue
                entry = self.files.get(name) or failed_before.get(name)
                if entry and entry["sha256"] == digest and name in self.files and \
                        entry["text_rules"] != TEXT_RULES:
                    report.reread.append(name)  # same file, read by older rules: only chunks whose text changed
                    todo.append((name, path, digest))
                    continue
                if entry and entry["sha256"] == digest:
                    if name in failed_before:
                        report.failed.append((name, failed_before[name]["reason"] + " (unchanged since last sync)"))
                    else:
                        report.unchanged.append(name)
                    continue
                (report.updated if name in self.files else report.added).append(name)
                todo.append((name, path, digest))
            for name in sorted(set(self.files) | set(failed_before) | set(self.info.get("partial", {}))):
                if name not in discovery.found:
                    if name in self.files or name in failed_before:
                        report.removed.append(name)
                    self._delete_source(name)
                    failed_before.pop(name, None)
            if older_format and report.unchanged:
                self._upgrade_chunks({name: self._outline_of(name, discovery.found[name])
                                      for name in report.unchanged}, older_format)
            for name in report.unchanged:  # indexed before identities were recorded: read them (no embedding)
                if "identity" not in self.files[name]:
                    self.files[name]["identity"] = self._identity_of(name, discovery.found[name])
            self._write_info()
            units = self._pdf_units(todo, report, progress, extract)
            try:
                self._index_units(units, report, progress, len(todo), group_chunks, embed_batch)
            finally:
                units.close()
            self._finish(report, started)
        return report

    def sync_records(self, records: Iterable[dict], rebuild: bool, progress: bool, *, wait: bool,
                     group_chunks: int, embed_batch: int) -> SyncReport:
        """Index dataset documents {doc_id, title, text, metadata}: one source each, title as the chunk header.

        Embedded and committed as `sync` does."""
        with self.writing(wait), self._storage_errors():
            report = SyncReport()
            started = time.perf_counter()
            older_format = self._older_format()
            self._prepare(report, rebuild)
            wanted: dict[str, SourceUnit] = {}
            for rec in records:
                text = rec.get("text") or ""
                title = rec.get("title") or ""
                digest = hashlib.sha256(f"{title}\n{text}".encode("utf-8")).hexdigest()
                wanted[rec["doc_id"]] = SourceUnit(source=rec["doc_id"], file_hash=digest, pages=[(0, "1", text)],
                                                   header=f"{title}\n" if title else "",
                                                   extra_metadata={"doc_id": rec["doc_id"]},
                                                   extraction_method="text")
            for name in sorted((set(self.files) | set(self.info.get("partial", {}))) - set(wanted)):
                if name in self.files:
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
            if older_format and report.unchanged:
                self._upgrade_chunks({name: [] for name in report.unchanged}, older_format)
            self._write_info()
            self._index_units(iter(todo), report, progress, len(todo), group_chunks, embed_batch)
            self._finish(report, started)
        return report

    def _older_format(self) -> int | None:
        """The INDEX_FORMAT of the stored index when older than this one's (chunks to upgrade), else None."""
        stored = self.info.get("format", 1)
        return stored if self.info.get("settings") and stored < INDEX_FORMAT else None

    def _outline_of(self, source: str, path: Path) -> list[tuple[int, str]]:
        """The outline of an indexed PDF, read as its pages were; [] with a note when the file cannot be read."""
        try:
            return read_outline(path, self.settings["pdf_loader"])
        except Exception as exc:  # noqa: BLE001 - the file's text is indexed already; only its sections are lost
            log(f"note: the outline of {source} could not be read ({type(exc).__name__}: {exc}); its chunks name no "
                f"section until the file changes or the index is rebuilt (--rebuild)", self.quiet)
            return []

    def _identity_of(self, source: str, path: Path) -> str:
        """The identity line of an indexed PDF (localrag/context.py), read as a build reads it (the whole file by
        the page text rules, which spell by the whole document); its name's words alone, with a note, when the
        file cannot be read."""
        pdf = extract_pdf(str(path), self.settings["pdf_loader"])
        if pdf.error:  # its chunks are indexed already; only the document prior loses the title and cover
            log(f"note: the title and first page of {source} could not be read ({pdf.error}); the document prior "
                f"knows it by its file name until the file changes", self.quiet)
        return document_context(source, pdf.title, front_page(pdf))

    def _upgrade_chunks(self, outlines: dict[str, list[tuple[int, str]]], old_format: int) -> None:
        """Give the stored chunks of these sources, written by an older INDEX_FORMAT, this format's metadata in
        place (page_number; section from the given outline): their texts and vectors stay, nothing is embedded."""
        log(f"Upgrading the index from format {old_format} to {INDEX_FORMAT}: adding page numbers and sections to "
            f"the chunks of {len(outlines)} unchanged file{'s' if len(outlines) != 1 else ''} (no embedding)",
            self.quiet)
        collection = self._store._collection
        for source, outline in outlines.items():
            found = collection.get(where={"source": source}, include=["metadatas"])
            pages = [int(meta["page"]) for meta in found["metadatas"]]
            sections = sections_by_page(outline, pages)
            metas = [citation_metadata(meta, sections.get(page)) for meta, page in zip(found["metadatas"], pages)]
            for start in range(0, len(metas), 5000):
                collection.update(ids=found["ids"][start:start + 5000], metadatas=metas[start:start + 5000])

    @contextlib.contextmanager
    def _storage_errors(self) -> Iterator[None]:
        """A full or read-only disk becomes one RAGError; the index keeps every completely indexed file."""
        try:
            yield
        except RAGError:
            raise
        except Exception as exc:  # noqa: BLE001 - only storage errors are translated; the rest propagate
            why = storage_error(exc, None if self.chroma_url else self._store_path, self.low_disk_bytes)
            if why is None:
                raise
            raise RAGError(f"{why} while writing the index {self.location}: the index keeps every file that was "
                           f"completely indexed; {'free some space' if 'space' in why else 'make it writable'} "
                           f"and run the same command again", reason=why) from exc

    def _prepare(self, report: SyncReport, rebuild: bool) -> None:
        """Rebuild when asked or stale; refuse foreign or mismatched stores; repair what the store lost."""
        if self.info_problem:
            if not rebuild:
                raise self._manifest_error()
            self._move_manifest_aside()
        foreign = self._foreign_collection()
        if foreign:
            raise RAGError(foreign, reason="foreign Chroma collection")
        reasons = self._rebuild_reasons() if self.info.get("settings") else []
        if rebuild or reasons:
            report.rebuilt_because = "--rebuild was given" if rebuild else "settings changed: " + "; ".join(reasons)
            log(f"Rebuilding the whole index ({report.rebuilt_because})", self.quiet)
            self._drop_everything()
        if self._store is None:
            self._open_store()
        dimension = self._embedding_dimension(rebuilding=bool(rebuild or reasons))
        check = self.check_index()
        if check.dimension is not None and check.dimension != dimension:
            raise RAGError(f"the index {self.location} holds vectors of {check.dimension} dimensions, but "
                           f"{self.embedding_model_name} makes {dimension}: it was built with another embedding "
                           f"model. Rebuild it with add_pdfs.py {self._index_flag()} --rebuild, or use another index "
                           f"folder", reason="embedding dimension differs")
        if check.orphan_ids and self.info.get("settings") and "format" not in self.info and not rebuild:
            # Only a manifest localRAG wrote (it always writes "format") may condemn chunks it does not list.
            where = self.location if self.chroma_url else self.path / INDEX_INFO_FILE
            raise RAGError(f"the index manifest {where} carries no format marker, so localRAG did not write it (or an old version did), and "
                           f"the store holds {len(check.orphan_ids)} chunks it does not list; nothing was deleted. "
                           f"Put the right manifest back, or run add_pdfs.py {self._index_flag()} --rebuild to "
                           f"build the index again", reason="manifest without format marker")
        if check.orphan_ids:
            for start in range(0, len(check.orphan_ids), 5000):
                self._store._collection.delete(ids=check.orphan_ids[start:start + 5000])
            report.orphans_removed = len(check.orphan_ids)
            log(f"Removed {len(check.orphan_ids)} stored chunks of no indexed file (left by an interrupted run)",
                self.quiet)
        for source, why in sorted(check.repairs.items()):
            report.repaired.append((source, why))
            log(f"Repairing {source}: {why}; it is embedded again", self.quiet)
            self._delete_source(source)
        self.info.setdefault("files", {})
        self.info["settings"] = dict(self.settings)
        self.info["embedding_export"] = self.embedding_export
        self.info["embedding_prefixes"] = self.embedding_prefixes
        self.info["format"] = INDEX_FORMAT
        self.info["dimension"] = dimension

    def _foreign_collection(self) -> str | None:
        """Why the store may not be written: a non-empty collection that localRAG did not make, else None."""
        if self.info.get("settings") or self.info_problem or self._manifest_moved:
            return None  # a manifest (even a damaged one) says localRAG built this index
        client = self._chroma_client()
        if self.collection_name not in [c.name if hasattr(c, "name") else c for c in client.list_collections()]:
            return None
        collection = client.get_collection(self.collection_name)
        if (collection.metadata or {}).get(COLLECTION_MARKER) or collection.count() == 0:
            return None
        return (f"the index {self.location} holds a Chroma collection {self.collection_name!r} with "
                f"{collection.count()} chunks that localRAG did not make (no {INDEX_INFO_FILE}); it is left "
                f"untouched. Use another index folder (--index), or move this one away yourself")

    def _move_manifest_aside(self) -> None:
        if self.chroma_url:
            self._info_collection().delete(ids=["index_info"])
        else:
            damaged = self.path / INDEX_INFO_FILE
            aside = damaged.with_name(f"{INDEX_INFO_FILE}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
            os.replace(damaged, aside)
            log(f"Moved the damaged manifest aside to {aside}", self.quiet)
        self.info_problem = None
        self.info = {}
        self._manifest_moved = True

    def _embedding_dimension(self, rebuilding: bool = False) -> int:
        """The model's vector size, read from the loaded model (embedding a probe text only as a last resort).

        Without loading it when the manifest records the size and its settings, prefixes and export are the ones
        asked for (not `rebuilding`): the model that made the stored vectors is this one."""
        if not rebuilding and self._embeddings is None and isinstance(self.info.get("dimension"), int):
            return self.info["dimension"]
        model = getattr(self.embeddings, "_client", None)
        for method in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
            size = getattr(model, method, lambda: None)()
            if size:
                return int(size)
        return len(self.embeddings.embed_documents(["dimension"])[0])

    def _drop_everything(self) -> None:
        client = self._chroma_client()
        if self.collection_name in [c.name if hasattr(c, "name") else c for c in client.list_collections()]:
            client.delete_collection(self.collection_name)
        self._store = None
        self._open_store()
        self.info = {"files": {}, "failed": {}}
        self._fingerprint = None
        self._bm25 = None
        self._vectors = None

    def _pdf_units(self, todo: list[tuple[str, Path, str]], report: SyncReport, progress: bool,
                   extract: Callable[[Sequence[Path], str], Iterator[ExtractedPdf]]) -> Iterator[SourceUnit]:
        from tqdm import tqdm

        loader = self.settings["pdf_loader"]
        # No bar on a non-terminal stderr (CI logs, files): tqdm's \r redraws only garble them.
        bar = tqdm(total=len(todo), desc="Reading PDFs", unit="file", file=sys.stderr,
                   disable=not progress or self.quiet or not todo or not sys.stderr.isatty())
        extracted = extract([path for _, path, _ in todo], loader)
        try:
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
                    self.info["failed"][name] = {"sha256": digest, "reason": pdf.error}
                    self._write_info()
                    report.failed.append((name, pdf.error))
                    log(f"skipped {name}: {pdf.error}", self.quiet)
                    continue
                self.info["failed"].pop(name, None)
                yield SourceUnit(source=name, file_hash=digest, pages=pdf.pages, extraction_method=loader,
                                 outline=pdf.outline, context=document_context(name, pdf.title, front_page(pdf)))
        finally:
            extracted.close()
            bar.close()

    def _chunks_of(self, unit: SourceUnit) -> tuple[list[str], list[str], list[dict], list[int]]:
        splitter = text_splitter(self.settings)
        ids, texts, metas, empty = [], [], [], []
        sections = sections_by_page(unit.outline, [page for page, _, _ in unit.pages])
        for page, label, text in unit.pages:
            pieces = splitter.split_text(text) if text.strip() else []
            if not pieces:
                empty.append(page)
            for index, piece in enumerate(pieces):
                if unit.header is not None:
                    header = unit.header
                elif self.settings["chunk_context"]:
                    header = chunk_header(unit.source, page, chunk_context(unit.context, sections.get(page)))
                else:
                    header = chunk_header(unit.source, page)
                ids.append(chunk_id(unit.source, unit.file_hash, page, index))
                texts.append((header if self.settings["chunk_headers"] else "") + piece)
                metas.append(citation_metadata({
                    "source": unit.source, "page": page, "page_label": label, "file_hash": unit.file_hash,
                    "chunk": index, "chunk_id": ids[-1], "embedding_model": self.embeddings.model_name,
                    "extraction_method": unit.extraction_method, **unit.extra_metadata}, sections.get(page)))
        return ids, texts, metas, empty

    def _index_units(self, units: Iterator[SourceUnit], report: SyncReport, progress: bool, total: int,
                     group_chunks: int, embed_batch: int) -> None:
        """Embed and store chunks in groups of `group_chunks`, however the files divide.

        A file whose chunks span several groups is recorded as partial after each group; its stored chunks are
        reused by the next sync (chunk ids depend on file hash and settings only), as are those of a file read
        again under newer page text rules: a stored chunk is kept when its text and metadata equal the new ones.
        A group is written to the store while the next one is embedded (`GroupWriter`), so an interrupt loses the
        embedding of the group in hand and, of the group being written beside it, the chunks not yet stored: with
        Ctrl-C between two writes the write in flight is finished first (less than one group is lost); with Ctrl-C
        inside a write, or a killed process, up to two groups. The manifest lists a file only once all its chunks
        are stored.
        """
        from tqdm import tqdm

        bar = tqdm(desc="Embedding", unit="chunk", file=sys.stderr,
                   disable=not progress or self.quiet or total == 0 or not sys.stderr.isatty())
        pending: dict[str, tuple] = {}  # source -> (unit, chunks still to store, empty pages, chunks in all)
        group: list[tuple[str, str, str, dict]] = []  # (source, id, text, metadata)
        writer = GroupWriter(embedding_backends.wait_work(self.embeddings) if total else None)
        failed = True
        try:
            for unit in units:
                ids, texts, metas, empty = self._chunks_of(unit)
                stored = self._kept_ids(unit, ids, texts, metas)
                report.kept += len(stored)
                todo = [(unit.source, i, t, m) for i, t, m in zip(ids, texts, metas) if i not in stored]
                pending[unit.source] = (unit, len(todo), empty, len(ids))
                if not todo:  # only files whose stored writes were reported done count as complete
                    self._complete_sources(pending, report)
                for item in todo:
                    group.append(item)
                    if len(group) >= group_chunks:
                        self._commit_group(group, pending, report, bar, embed_batch, writer)
                        group = []
            if group:
                self._commit_group(group, pending, report, bar, embed_batch, writer)
            writer.wait()
            failed = False
        finally:
            writer.close(failed)
            bar.close()

    def _kept_ids(self, unit: SourceUnit, ids: list[str], texts: list[str], metas: list[dict]) -> set[str]:
        """Ids of this unit's stored chunks that stay as they are: same id, text and metadata as the new chunk
        (left by an interrupted sync of the same content, or a file read again under newer text rules); every
        other stored chunk of the source is deleted. A chunk an older format stored (no page_number) differs in
        its metadata, so the file ends up in one format; another file version has other ids.

        From here the source is partial: the manifest lists it again once all its chunks are stored. It is
        written before a listed file loses chunks, so an interrupt leaves no listed file incomplete."""
        found = self._store._collection.get(where={"source": unit.source}, include=["documents", "metadatas"])
        wanted = {i: (t, m) for i, t, m in zip(ids, texts, metas)}
        kept = {i for i, text, meta in zip(found["ids"], found["documents"], found["metadatas"])
                if wanted.get(i) == (text, meta)}
        drop = [i for i in found["ids"] if i not in kept]
        listed = self.files.pop(unit.source, None) is not None
        self.info.setdefault("partial", {})[unit.source] = {"sha256": unit.file_hash}
        if listed and drop:
            self._write_info()
        for start in range(0, len(drop), 5000):
            self._store._collection.delete(ids=drop[start:start + 5000])
        return kept

    def _commit_group(self, group: list[tuple[str, str, str, dict]], pending: dict, report: SyncReport,
                      bar, embed_batch: int, writer: "GroupWriter") -> None:
        """Embed a group, then hand its store write to `writer`, which does it while the next group is embedded;
        once it is stored, the manifest records which files are complete."""
        vectors = self._embed_longest_first([text for _, _, text, _ in group], bar, embed_batch)

        def piece(rows: slice) -> Callable[[], None]:
            # No clean-up if a write fails: whatever part of the group was stored are valid chunks of a partial
            # file, which the next sync reuses or, for a file the manifest does not name, deletes as orphans. (A
            # clean-up delete on a full disk hangs inside Chroma.)
            return lambda: self._store._collection.upsert(
                ids=[chunk for _, chunk, _, _ in group[rows]], embeddings=vectors[rows],
                documents=[text for _, _, text, _ in group[rows]], metadatas=[meta for _, _, _, meta in group[rows]])

        def stored() -> None:
            report.chunks += len(group)
            for source, *_ in group:
                unit, left, empty, total = pending[source]
                pending[source] = (unit, left - 1, empty, total)
            self._complete_sources(pending, report)

        rows = STORE_WRITE_ROWS
        writer.submit([piece(slice(start, start + rows)) for start in range(0, len(group), rows)], stored)

    def _embed_longest_first(self, texts: list[str], bar, embed_batch: int) -> list[list[float]]:
        """Vectors of `texts` in their order, embedded `embed_batch` at a time from the longest text down.

        The model pads every batch to its longest text; sorting the whole group (sentence-transformers sorts
        only within one call) puts texts of like length together: 5-7% more FinanceBench chunks/s with
        openvino-int8 (bench/README.md). A text's vector may move in the last digits with its batch's padded
        length, as it does with any batching.
        """
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # stable: ties keep the group's order
        vectors: list[list[float]] = [[] for _ in texts]
        with embedding_backends.runtime_pooling_threads(self.embeddings):
            for start in range(0, len(order), embed_batch):
                part = order[start:start + embed_batch]
                for i, vector in zip(part, self.embeddings.embed_documents([texts[i] for i in part])):
                    vectors[i] = vector
                bar.update(len(part))
        return vectors

    def _complete_sources(self, pending: dict, report: SyncReport) -> None:
        """Move every source whose chunks are all stored from partial into the manifest's files; write it."""
        for source in [s for s, (_, left, _, _) in pending.items() if left == 0]:
            unit, _, empty, total = pending.pop(source)
            self.info["partial"].pop(source, None)
            self.files[source] = {"sha256": unit.file_hash, "pages": len(unit.pages), "chunks": total,
                                  "empty_pages": empty}
            if unit.context:  # the document's identity line: the document prior (localrag/retriever.py) reads it
                self.files[source]["identity"] = unit.context
            if unit.extraction_method != "text":  # dataset records are indexed as given, by no page text rules
                self.files[source]["text_rules"] = TEXT_RULES
            report.pages += len(unit.pages)
            report.empty_pages.extend((unit.source, page) for page in empty)
            if unit.extraction_method != "text":
                for page in empty:
                    log(f"note: {unit.source} page {shown_page(page)} has no text layer (image only?); it cannot be "
                        f"retrieved", self.quiet)
        self._write_info()
        self._heartbeat()

    def _delete_source(self, source: str) -> None:
        if self._store is not None:
            self._store._collection.delete(where={"source": source})
        self.files.pop(source, None)
        self.info.get("partial", {}).pop(source, None)

    def _finish(self, report: SyncReport, started: float) -> None:
        if not self.info.get("partial"):
            self.info.pop("partial", None)
        self.info["counts"] = {"files": len(self.files), "pages": sum(e["pages"] for e in self.files.values()),
                               "chunks": sum(e["chunks"] for e in self.files.values())}
        if report.changed or "built_at" not in self.info:
            self.info["built_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
            self.info["build_seconds"] = round(time.perf_counter() - started, 2)
            self.info["versions"] = package_versions(RECORDED_PACKAGES)
        self._write_info()
        stored = self._store._collection.count()
        if stored != self.info["counts"]["chunks"]:  # another writer, or a store that dropped writes
            raise RAGError(f"after the sync the index {self.location} stores {stored} chunks but its manifest lists "
                           f"{self.info['counts']['chunks']}; was it written by another program at the same time? "
                           f"Run add_pdfs.py {self._index_flag()} again to repair it",
                           reason="index does not match its manifest")
        self._update_ivf()
        if report.changed:
            for name in self._remove_orphan_segments():
                log(f"note: removed the segment folder {name} of the index {self.path}: its database no longer "
                    f"names it (a deleted chroma.sqlite3 or a dropped collection left it)", self.quiet)
        self._bm25 = None
        if not BM25Index.is_saved(self._bm25_dir(), self.fingerprint(), self.settings["bm25_stemmer"]):
            self.bm25()  # rebuilt and saved now, so later runs only load it (a no-op sync loads nothing)
        report.seconds = time.perf_counter() - started

    def _write_info(self) -> None:
        self.revision += 1
        self._fingerprint = None
        self._vectors = None
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
            return self._store_path / BM25_DIR
        server = hashlib.sha256(self.chroma_url.encode("utf-8")).hexdigest()[:12]
        return self.cache_dir.expanduser() / "bm25" / f"{server}-{self.collection_name}"

    # ------------------------------------------------------------------ derived from the indexed chunks

    def fingerprint(self) -> str:
        """Hash of the settings and of each source's hash and chunk count; cached until the manifest is written.

        Everything derived from the indexed chunks (BM25 arrays, in-memory copies) is keyed by it."""
        if self._fingerprint is None:
            self._fingerprint = self._compute_fingerprint()
        return self._fingerprint

    def _compute_fingerprint(self) -> str:
        stored = self.info.get("settings")
        # The chunks' identity: BM25 settings are left out (bm25() keys its arrays by them besides this).
        content = json.dumps({"settings": stored and {k: v for k, v in stored.items() if k not in BM25_SETTINGS},
                              "format": self.info.get("format", 1),
                              "files": {k: [v["sha256"], v["chunks"], *([v["text_rules"]] if "text_rules" in v
                                                                               else [])]
                                        for k, v in sorted(self.files.items())}},
                             sort_keys=True)
        return hashlib.sha256(content.encode("utf-8")).hexdigest()

    def bm25(self):
        """The BM25 index of exactly the chunks the manifest lists; loaded from disk, rebuilt when stale."""
        fingerprint, stemmer = self.fingerprint(), self.settings["bm25_stemmer"]
        if self._bm25 is not None and self._bm25[0] == (fingerprint, stemmer):
            return self._bm25[1]
        index = BM25Index.load(self._bm25_dir(), expected_fingerprint=fingerprint, expected_stemmer=stemmer)
        if index is None:
            chunks = self.indexed_chunks()
            index = BM25Index.build([i for i, _, _ in chunks], [t for _, t, _ in chunks], stemmer=stemmer)
            if not self.read_only:
                index.save(self._bm25_dir(), fingerprint=fingerprint)
        self._bm25 = ((fingerprint, stemmer), index)
        return index

    def _indexed(self, meta: dict | None) -> bool:
        """Whether a stored chunk belongs to a fully indexed file (orphans of interrupted runs never do)."""
        entry = self.files.get((meta or {}).get("source"))
        return bool(entry) and meta.get("file_hash") == entry["sha256"]

    def indexed_chunks(self) -> list[tuple[str, str, dict]]:
        """(id, text, metadata) of every chunk of a fully indexed file, sorted by id; one read of the store."""
        if self.vectorstore is None:
            return []
        data = read_store(self.vectorstore._collection, ["documents", "metadatas"])
        # Chunks of an older format (synced since by no version that writes page_number) get page_number here,
        # derived exactly from `page`; their section stays unknown until a sync upgrades them (_upgrade_chunks).
        return sorted((i, t, m if "page_number" in m else dict(m, page_number=shown_page(int(m["page"]))))
                      for i, t, m in zip(data["ids"], data["documents"], data["metadatas"]) if self._indexed(m))

    def nearest(self, vector: Sequence[float], k: int, exact: bool = False) -> list[tuple[str, float]]:
        """(chunk id, cosine similarity) of the k indexed chunks nearest to `vector`, best first; equal
        similarities are ordered by chunk id. Exact search over the stored vectors, or, on a shelf the sync gave
        an IVF (`dense_search`), its approximate search; `exact` forces exact search (to measure the IVF's
        recall).

        Not Chroma's HNSW search: Chroma rebuilds that graph from its write-ahead log at every open, and the
        graph is not deterministic; one 912-chunk index gave Hit@20 0.915 to 0.949 from one open to the next.
        Both searches here return the same list for the same index and query on every copy of it."""
        fingerprint = self.fingerprint()
        if self._vectors is None or self._vectors[0] != fingerprint:
            self._vectors = (fingerprint, *self.indexed_vectors())
        ids, matrix = self._vectors[1], self._vectors[2]
        index = None if exact else self._loaded_ivf(len(ids))
        found = ivf.search(index, matrix, vector, k, self._probes(index.lists)) if index is not None else \
            top_k_cosine(matrix, vector, k)
        return [(ids[i], similarity) for i, similarity in found]

    def dense_search(self) -> dict:
        """How `nearest` searches this index: {"method": "exact"} or {"method": "ivf", "lists", "probes",
        "seed"}; "exact" also where the manifest names an IVF whose file is missing or stale (a warning said so)."""
        recorded = self.info.get("dense_search") or {"method": "exact"}
        if recorded.get("method") != "ivf" or self._loaded_ivf(self.info.get("counts", {}).get("chunks", 0)) is None:
            return {"method": "exact"}
        return {"method": "ivf", "lists": recorded["lists"], "probes": self._probes(recorded["lists"]),
                "seed": recorded["seed"]}

    def _probes(self, lists: int) -> int:
        return min(lists, self.ivf_probes or ivf.default_probes(lists))

    def _ivf_dir(self) -> Path:
        """The saved IVF: in the index folder, or for a server index beside its local BM25 arrays."""
        return self._store_path if not self.chroma_url else self._bm25_dir()

    def _loaded_ivf(self, rows: int):
        """The IVF of the indexed chunks when the manifest names one and its file matches them, else None."""
        if (self.info.get("dense_search") or {}).get("method") != "ivf":
            return None
        fingerprint = self.fingerprint()
        if self._ivf is None or self._ivf[0] != fingerprint:
            loaded = ivf.load(self._ivf_dir(), fingerprint, rows)
            if loaded is None:
                log(f"warning: the IVF of the index {self.location} ({ivf.IVF_FILE}) is missing or does not match "
                    f"its chunks; dense search is exact (slower) until `add_pdfs.py {self._index_flag()}` "
                    f"builds it again", False)
            self._ivf = (fingerprint, loaded)
        return self._ivf[1]

    def ivf_setting(self, key: str) -> int:
        """An IVF setting ("min_chunks", "lists"): as asked for, else as the manifest records it, else the default;
        a later sync without the flag keeps what an earlier one was given."""
        asked = self.ivf_requested.get(key)
        return asked if asked is not None else self.info.get("ivf_settings", {}).get(key, self.ivf_defaults[key])

    def _update_ivf(self) -> None:
        """After a sync: give a shelf of ivf_setting("min_chunks") chunks or more the IVF of its chunks (rebuilt
        when the chunks or its settings changed), record it in the manifest; a smaller shelf is searched exactly."""
        chunks = self.info["counts"]["chunks"]
        recorded, recorded_settings = self.info.get("dense_search"), self.info.get("ivf_settings")
        settings = {key: self.ivf_setting(key) for key in self.ivf_defaults
                    if self.ivf_setting(key) != self.ivf_defaults[key]} or None
        if chunks < self.ivf_setting("min_chunks"):
            wanted = None  # exact search: the manifest names no IVF
            (self._ivf_dir() / ivf.IVF_FILE).unlink(missing_ok=True)
        else:
            lists = self.ivf_setting("lists") or ivf.default_lists(chunks)
            wanted = {"method": "ivf", "lists": min(chunks, lists), "seed": 0}
            if recorded != wanted or not ivf.is_current(self._ivf_dir(), self.fingerprint(), chunks):
                log(f"Building the IVF of {chunks} chunks ({wanted['lists']} lists) for approximate dense search",
                    self.quiet)
                _, matrix = self.indexed_vectors()
                self._ivf_dir().mkdir(parents=True, exist_ok=True)
                ivf.save(ivf.build(matrix, wanted["lists"], wanted["seed"]), self._ivf_dir(), self.fingerprint())
        self._ivf = None
        if (recorded, recorded_settings) != (wanted, settings):
            for key, value in (("dense_search", wanted), ("ivf_settings", settings)):
                if value is None:
                    self.info.pop(key, None)
                else:
                    self.info[key] = value
            self._write_info()

    def indexed_vectors(self) -> tuple[list[str], "numpy.ndarray"]:
        """(ids sorted, their stored vectors scaled to unit length as float32 rows) of every fully indexed chunk."""
        import numpy

        if self.vectorstore is None:
            return [], numpy.zeros((0, 0), dtype=numpy.float32)
        data = read_store(self.vectorstore._collection, ["embeddings", "metadatas"])
        kept = sorted((i, v) for i, v, m in zip(data["ids"], data["embeddings"], data["metadatas"])
                      if self._indexed(m))
        if not kept:
            return [], numpy.zeros((0, 0), dtype=numpy.float32)
        matrix = numpy.asarray([v for _, v in kept], dtype=numpy.float32)
        norms = numpy.linalg.norm(matrix, axis=1, keepdims=True)
        return [i for i, _ in kept], matrix / numpy.where(norms == 0, 1.0, norms)
