"""The index as the rest of localRAG sees it (`Index`): one local folder or server collection, opened with its
settings, searched (dense and BM25), and synced.

`Index` composes the parts that do the work and hands each the pieces it uses: where the index lives and Chroma's
client (localrag/index/store.py), its manifest (localrag/index/manifest.py) and settings (localrag/settings.py), its
embedding model (localrag/index/model.py), the writer locks (localrag/index/locks.py), the store check
(localrag/index/store_check.py), sync (localrag/index/sync.py, planned by localrag/index/sync_plan.py, embedded and stored by
localrag/index/chunk_writer.py) and dense search (localrag/index/dense.py); the BM25 arrays are kept here. What a part defines
is imported from that part.

`Index.sync` follows the docs folder by file hash and never re-embeds unchanged files; chunks are embedded and
committed in groups, and a later sync reuses every stored chunk of an interrupted one. add_pdfs.py builds an index
through local_rag.py's `LocalRAG`, which hands this module its settings at call time; retrieval reads it
(localrag/retrieval/retriever.py).
"""
from __future__ import annotations

import contextlib
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from localrag.models import loading
from localrag.search.bm25 import BM25Index
from localrag.index.chunk_writer import SyncTarget
from localrag.index.dense import DenseSearch, DenseSource
from localrag.errors import RAGError
from localrag.index.model import IndexModel
from localrag.index.locks import ServerLock, folder_lock, folder_read_lock
from localrag.files import log
from localrag.index.manifest import Manifest, damaged_manifest_error, followed_paths, read_manifest
from localrag.text.pdf import discover_pdfs
from localrag.settings import IndexSettings, IvfSettings, collection_name, resolve_settings
from localrag.index.store import IndexPlace, LazyStore, chunks_by_id, indexed_chunks
from localrag.index.store_check import IndexCheck, foreign_collection, inconsistency_error
from localrag.index.store_reads import StoreReads
from localrag.index.sync import PdfReading, Sync, SyncOptions
from localrag.index.sync_plan import (SyncReport, older_format, pdf_changes, rebuild_reasons,
                                      refuse_other_folder, refuse_other_settings, text_rules_reasons)


@dataclass(frozen=True)
class StoreOptions:
    """Where an index is stored and how its writes are guarded: a shared Chroma server (`chroma_url`, None: the local
    folder), the `collection` inside a local folder, where a server index keeps its BM25 arrays (`cache_dir`), the
    free bytes under which a write error is a full disk (`low_disk_bytes`, see store.storage_error), and the age of a
    server lock record without a heartbeat that marks its writer as dead (`lock_stale_seconds`)."""

    chroma_url: str | None
    collection: str
    cache_dir: str | Path
    low_disk_bytes: int
    lock_stale_seconds: float
    full_check: bool = False  # read the store whole at every check, even where the vector file's record holds


@dataclass(frozen=True)
class ModelLoading:
    """How an index's embedding model is loaded, `load(name, backend)`, and the export that loading would run,
    `expected_export(name, backend)` (None: models.expected_export without calibration texts), so that the manifest
    can be checked without loading the model."""

    load: Callable[[str, str], Any]
    expected_export: Callable[[str, str], str | None] | None = None


class Index:
    """One index folder or server collection. Settings left as None come from the index, then from `defaults`."""

    def __init__(self, path: str | Path, settings: IndexSettings, store: StoreOptions, *, defaults: IndexSettings,
                 model: ModelLoading, ivf: IvfSettings, quiet: bool = False):
        """`settings`: the index settings the caller chose (None fields: the index's, else `defaults`'s); `store`:
        where the index is stored and how its writes are guarded; `model`: how its embedding model is loaded, at
        its first use (`embeddings`), and described without loading it; `ivf`: the approximate dense search's
        settings (IvfSettings)."""
        self.path = Path(path)
        self.quiet = quiet
        self.chroma_url = store.chroma_url.rstrip("/") if store.chroma_url else None
        self.place = IndexPlace(self.path, self.chroma_url, cache_dir=Path(store.cache_dir),
                                low_disk_bytes=store.low_disk_bytes, quiet=quiet, listed_chunks=self._listed_chunks)
        self.dense = DenseSearch(self.place, {"min_chunks": ivf.default_min_chunks, "lists": ivf.default_lists},
                                 {"min_chunks": ivf.min_chunks, "lists": ivf.lists}, ivf.probes, quiet)
        self._requested = settings.chosen()
        self._defaults = defaults.chosen()
        self._load_embeddings = model.load
        self._store: LazyStore | None = None
        self.revision = 0  # counts manifest writes and reloads: what was derived from an older manifest is stale
        self._consistent_revision: int | None = None  # the revision whose store require_built found consistent
        self.info_problem: str | None = None  # why index_info.json cannot be trusted; None when it can
        self.manifest_moved = False  # a sync moved a damaged manifest aside
        # On a server the collection name is derived from the settings, so stored settings cannot be read first.
        self.manifest = Manifest() if self.chroma_url else self._load_manifest()
        self.settings = resolve_settings(self._requested, self.manifest.settings or {}, self._defaults)
        self.place.collection_name = collection_name(self.settings) if self.chroma_url else store.collection
        if self.chroma_url:
            self.manifest = self._load_manifest()
        self._expected_export = model.expected_export or (lambda name, backend: loading.expected_export(name, backend))
        self.model = self._new_model()  # loaded at the first text to embed
        self._bm25 = None
        self._fingerprint: str | None = None
        self.full_check = store.full_check
        self.reads = StoreReads(self.place, lambda: self.manifest, lambda: self.revision, self._opened_collection,
                                quiet)
        self._server_lock = None if not self.chroma_url else ServerLock(
            self.place.info_collection, self.location, key=f"{self.chroma_url} {self.collection_name}",
            stale_seconds=store.lock_stale_seconds, quiet=quiet)

    # ------------------------------------------------------------------ the embedding model, loaded lazily

    def _new_model(self) -> IndexModel:
        return IndexModel(self.settings["embedding_model"], self.settings["embedding_backend"],
                          self._load_embeddings, self._expected_export)

    @property
    def embeddings(self):
        """The embedding model (LangChain Embeddings), loaded at the first access."""
        return self.model.embeddings

    @embeddings.setter
    def embeddings(self, value) -> None:
        self.model.embeddings = value

    @property
    def embedding_export(self) -> str | None:
        """The export the model runs (IndexModel.export), without loading it."""
        return self.model.export

    @property
    def embedding_prefixes(self) -> dict[str, str]:
        """The prefixes the model applies (IndexModel.prefixes), without loading it."""
        return self.model.prefixes

    @property
    def embedding_model_name(self) -> str:
        """The model's name as reports show it (IndexModel.display_name), without loading it."""
        return self.model.display_name

    # ------------------------------------------------------------------ manifest and store

    @property
    def info(self) -> dict:
        """The manifest's entries, as index_info.json holds them."""
        return self.manifest.to_json()

    @property
    def files(self) -> dict[str, dict]:
        """Manifest: source -> {sha256, pages, chunks, empty_pages}; only fully indexed sources appear."""
        return self.manifest.files

    def _listed_chunks(self) -> int:
        return sum(entry.get("chunks", 0) for entry in self.files.values())

    def _load_manifest(self) -> Manifest:
        """The manifest, or an empty one with `info_problem` set when it is damaged (sync --rebuild moves it
        aside)."""
        self.info_problem = None
        manifest, self.info_problem = read_manifest(self.place.manifest_text)
        return manifest

    def manifest_error(self) -> RAGError:
        return damaged_manifest_error(self.place.manifest_location, self.place.index_flag(), self.info_problem)

    def write_manifest(self) -> None:
        """Write the manifest where the index keeps it; what was derived from the old one is stale."""
        self.revision += 1
        self._forget_derived()
        self.place.write_manifest(self.manifest)

    def move_manifest_aside(self) -> None:
        """Start again without a damaged manifest (sync --rebuild); a local one is kept under another name."""
        self.place.move_manifest_aside()
        self.info_problem = None
        self.manifest = Manifest()
        self.manifest_moved = True

    def drop_everything(self) -> None:
        """Delete the collection and forget every file: the start of a rebuild."""
        self.place.drop_collection()
        self._store = None
        self.open_store()
        self.manifest = Manifest(failed={})
        self._bm25 = None
        self._forget_derived()

    @property
    def vectorstore(self):
        """The LangChain Chroma store of the index (a `LazyStore`), opened on first use; None while no index has been
        built."""
        if self._store is None and self.manifest.settings:
            self.open_store()
        return self._store

    def open_store(self) -> None:
        index = weakref.ref(self)  # the store must not keep the index alive (LazyEmbeddings holds it weakly too)
        self._store = self.place.open_store(lambda: loading.LazyEmbeddings(index))

    @property
    def collection(self):
        """The Chroma collection of the opened store, which localRAG reads and writes; None before it is opened."""
        return self._store._collection if self._store is not None else None

    def require_built(self) -> None:
        """RAGError before a retrieval: chosen settings it was not built with, no index, a store off its manifest."""
        if self.info_problem:
            raise self.manifest_error()
        refuse_other_settings(self.manifest, self._requested, self.settings, self.location, self.place.index_flag())
        if self.vectorstore is None:  # retrieving from nothing must not look like finding nothing
            raise self.place.no_index_error()
        if self._consistent_revision != self.revision:  # once per manifest revision: a record, or a whole read
            self.require_consistent()
            self._consistent_revision = self.revision

    @property
    def location(self) -> str:
        """Where the index lives, as reports show it."""
        return self.place.location

    @property
    def collection_name(self) -> str:
        return self.place.collection_name

    @property
    def read_only(self) -> bool:
        """Whether the index folder cannot be written: it is read from a temporary copy, and never synced."""
        return self.place.read_only

    @property
    def display_settings(self) -> dict:
        """Settings in the words a report uses."""
        return dict(self.settings, embedding_model=self.embedding_model_name)

    def stale_reasons(self) -> list[str]:
        """Why the stored index does not match this object's settings (empty when it does)."""
        return rebuild_reasons(self.manifest, self.settings, self.model) + text_rules_reasons(self.manifest)

    def file_text_rules(self, entry: dict) -> int:
        """The page text rules version a manifest entry's file was read with."""
        return self.manifest.file_text_rules(entry)

    def text_rules_summary(self) -> str:
        """The page text rules the indexed PDFs were read with, for a report: `2`, or `1 (3 files), 2 (5 files)`."""
        return self.manifest.text_rules_summary()

    # ------------------------------------------------------------------ the writer lock

    @contextlib.contextmanager
    def writing(self, wait: bool) -> Iterator[None]:
        """Hold the index's writer lock: one sync (or evaluation) of an index at a time, across processes
        (localrag/index/locks.py). After taking it the manifest is read again, since the previous holder may have
        changed it."""
        if self.read_only:
            raise RAGError(f"the index folder {self.path} is read-only: it can be evaluated as it is (with --no-sync), "
                           f"not changed; make it writable to sync it", reason="read-only index")
        if self._server_lock is not None:
            with self._server_lock.held(wait):
                self._reload()
                yield
            return
        with folder_lock(self.path, wait, self.quiet) as outermost:
            if outermost:
                self._reload()
            yield

    def heartbeat(self) -> None:
        """Refresh the lock record of a server index while this object holds its lock (at every commit)."""
        if self._server_lock is not None:
            self._server_lock.heartbeat()

    def _reload(self) -> None:
        """Read the manifest again and drop everything derived from the old one."""
        self.manifest = self._load_manifest()
        settings = resolve_settings(self._requested, self.manifest.settings or {}, self._defaults)
        if settings != self.settings:
            self.settings = settings
            self.model = self._new_model()  # the model of the new settings is loaded when a text is embedded
            self._store = None
        self._bm25 = None
        self._forget_derived()
        self.revision += 1

    # ------------------------------------------------------------------ index contents

    def list_documents(self) -> list[dict]:
        """The indexed sources with their page and chunk counts, sorted by name."""
        return [{"source": name, "pages": entry["pages"], "chunks": entry["chunks"],
                 "empty_pages": entry.get("empty_pages", [])} for name, entry in sorted(self.files.items())]

    @property
    def followed_paths(self) -> list[str]:
        """The PDF folders or files this index follows (absolute), as recorded at its last sync; [] if unknown."""
        docs = self.manifest.docs or []
        return list(docs) if self.chroma_url else followed_paths(docs, self.path)

    def pdf_changes(self, docs_path: str | Path, hash_file: Callable[[Path], str]) -> dict[str, list[str]]:
        """Compare the docs folder with the index by file hash (`hash_file`), without changing anything."""
        return pdf_changes(self.manifest, docs_path, hash_file)

    def check_index(self, full: bool = False) -> IndexCheck:
        """Compare the store with the manifest: per-file chunk counts, vector dimension, orphan chunks.

        Read from the vector file's record when it holds (the store was read whole and found to match this
        manifest's chunks, and nothing wrote to it since: localrag/index/vector_file.py); else, with `full` or the
        index's `full_check`, the store is read whole (and the vector file written again when it matches). Raises
        RAGError for a damaged manifest."""
        if self.info_problem:
            raise self.manifest_error()
        if self._store is None and not self.manifest.settings:
            return IndexCheck()
        if not (full or self.full_check):
            recorded = self.reads.recorded_check()
            if recorded is not None:
                return recorded
        return self.reads.read_whole().check

    def require_consistent(self) -> IndexCheck:
        """check_index(), raising a RAGError that says how to repair when the index must not be measured."""
        check = self.check_index()
        error = inconsistency_error(check, self.place)
        if error is not None:
            raise error
        return check

    # ------------------------------------------------------------------ indexing (localrag/index/sync.py)

    def sync(self, paths: Sequence[str | Path], options: SyncOptions, reading: PdfReading) -> SyncReport:
        """Make the index hold exactly the PDFs under `paths`: add new, re-add changed, drop removed files.

        Refused (RAGError) when the index follows other paths (unless `reading.switch_folder` or `options.rebuild`)
        and when `paths` hold no PDF at all while the index has files (unless `reading.allow_empty`). Chunks are
        embedded and committed as `options` say; `reading` says how the PDFs are read and hashed.
        """
        discovery = discover_pdfs(paths, reading.docs_root)  # a missing path is refused before the index is touched
        with self.writing(options.wait), self.place.storage_errors(), self.place.creating_store():
            started, older = time.perf_counter(), older_format(self.manifest)
            refuse_other_folder(self.manifest, self.followed_paths, self.location, paths, discovery.found,
                                switch=reading.switch_folder or options.rebuild, allow_empty=reading.allow_empty)
            run = self._start_sync(options.rebuild, started)
            run.report.skipped = discovery.skipped  # named once, by the caller (add_pdfs.py's output, the report)
            run.write_pdfs(paths, discovery.found, older, options, reading)
            self._finish_sync(run)
        return run.report

    def sync_records(self, records: Iterable[dict], options: SyncOptions) -> SyncReport:
        """Index dataset documents {doc_id, title, text, metadata}: one source each, title as the chunk header.

        Embedded and committed as `sync` does."""
        with self.writing(options.wait), self.place.storage_errors():
            started, older = time.perf_counter(), older_format(self.manifest)
            run = self._start_sync(options.rebuild, started)
            run.write_records(records, older, options)
            self._finish_sync(run)
        return run.report

    def _start_sync(self, rebuild: bool, started: float) -> Sync:
        """Under the writer lock: ready the store for a sync (rebuild when asked or stale; refuse a foreign one);
        the Sync that writes it, once it refused mismatched vectors and repaired what the store lost."""
        report = SyncReport()
        if self.info_problem:
            if not rebuild:
                raise self.manifest_error()
            self.move_manifest_aside()
        # A manifest (even a damaged one) says localRAG built this index.
        if not (self.manifest.settings or self.info_problem or self.manifest_moved):
            foreign = foreign_collection(self.place)
            if foreign:
                raise RAGError(foreign, reason="foreign Chroma collection")
        reasons = rebuild_reasons(self.manifest, self.settings, self.model) if self.manifest.settings else []
        if rebuild or reasons:
            report.rebuilt_because = "--rebuild was given" if rebuild else "settings changed: " + "; ".join(reasons)
            log(f"Rebuilding the whole index ({report.rebuilt_because})", self.quiet)
            self.drop_everything()
        if self.collection is None:
            self.open_store()
        run = Sync(SyncTarget(self.place, self.manifest, self.collection, self.settings, self.model,
                              self.write_manifest, self.heartbeat, self.check_index, self.quiet), report, started)
        run.prepare(rebuild, rebuilding=bool(rebuild or reasons))
        return run

    def _finish_sync(self, run: Sync) -> None:
        """Finish the sync's manifest, then bring the IVF and BM25 arrays up to date with the chunks."""
        run.finish()
        self.reads.refresh()
        if self.dense.update(self._dense_source()):
            self.write_manifest()
        run.drop_orphan_segments()
        self.renew_bm25()
        run.report.seconds = time.perf_counter() - run.started

    # ------------------------------------------------------------------ derived from the indexed chunks

    def fingerprint(self) -> str:
        """Hash of the settings and of each source's hash and chunk count; cached until the manifest is written.

        Everything derived from the indexed chunks (BM25 arrays, in-memory copies) is keyed by it."""
        if self._fingerprint is None:
            self._fingerprint = self.manifest.fingerprint()
        return self._fingerprint

    def bm25(self):
        """The BM25 index of exactly the chunks the manifest lists; loaded from disk, rebuilt when stale."""
        fingerprint, stemmer = self.fingerprint(), self.settings["bm25_stemmer"]
        if self._bm25 is not None and self._bm25[0] == (fingerprint, stemmer):
            return self._bm25[1]
        index = BM25Index.load(self.place.bm25_dir(), expected_fingerprint=fingerprint, expected_stemmer=stemmer)
        if index is None:
            chunks = self.indexed_chunks()
            index = BM25Index.build([i for i, _, _ in chunks], [t for _, t, _ in chunks], stemmer=stemmer)
            if not self.read_only:
                index.save(self.place.bm25_dir(), fingerprint=fingerprint)
        self._bm25 = ((fingerprint, stemmer), index)
        return index

    def renew_bm25(self) -> None:
        """After a sync: forget the BM25 arrays in memory, and unless the saved ones match the chunks, rebuild and
        save them now, so later runs only load them (a no-op sync loads nothing)."""
        self._bm25 = None
        if not BM25Index.is_saved(self.place.bm25_dir(), self.fingerprint(), self.settings["bm25_stemmer"]):
            self.bm25()

    def indexed_chunks(self) -> list[tuple[str, str, dict]]:
        """(id, text, metadata) of every chunk of a fully indexed file, sorted by id; one read of the store."""
        return indexed_chunks(self._stored_collection(), self.manifest)

    def chunks_by_id(self, ids: Sequence[str]) -> dict[str, tuple[str, dict]]:
        """id -> (text, metadata) of those of `ids` that are chunks of a fully indexed file, read by id."""
        return chunks_by_id(self._stored_collection(), self.manifest, ids)

    def indexed_vectors(self) -> tuple[list[str], Any]:
        """(ids sorted, their stored vectors scaled to unit length as float32 rows) of every fully indexed chunk:
        memory-mapped from the vector file when it is current, else read from the store (StoreReads.vectors)."""
        if self._stored_collection() is None:
            import numpy

            return [], numpy.zeros((0, 0), dtype=numpy.float32)
        return self.reads.vectors()

    def _stored_collection(self):
        return None if self.vectorstore is None else self.vectorstore._collection

    def _opened_collection(self):
        """The collection, the store opened first where it is not (a sync's store before its first manifest too)."""
        if self._store is None:
            self.open_store()
        return self._store._collection

    def _forget_derived(self) -> None:
        """The manifest changed: what was derived from the old one is stale."""
        self._fingerprint = None
        self.reads.forget()
        self.dense.forget_vectors()

    def nearest(self, vector: Sequence[float], k: int, exact: bool = False) -> list[tuple[str, float]]:
        """(chunk id, cosine similarity) of the k indexed chunks nearest to `vector`, best first (DenseSearch.nearest:
        exact, or the IVF's approximate search where the sync gave the shelf one; `exact` forces exact search)."""
        return self.dense.nearest(self._dense_source(), vector, k, exact)

    def load_vectors(self) -> None:
        """Ready dense search now: map (or read) the indexed vectors and load the IVF where the index has one."""
        self.dense.load(self._dense_source())

    def dense_search(self) -> dict:
        """How `nearest` searches this index: {"method": "exact"} or {"method": "ivf", "lists", "probes", "seed"}."""
        return self.dense.describe(self._dense_source())

    def _dense_source(self) -> DenseSource:
        return DenseSource(self.manifest, self.fingerprint(), self.indexed_vectors)


@contextlib.contextmanager
def reading(index: Index, wait: bool) -> Iterator[None]:
    """Hold a reader's lock of `index` for a run that only reads it (--no-sync): beside other readers, never beside
    a writer (localrag/index/locks.py), so nothing writes the index while it is measured and it is never measured
    half-written. After taking it the manifest is read again, since a writer may have changed it meanwhile. A
    read-only folder takes none (this user cannot write it, and a lock file may not be made there); a server index
    takes its writer's record (it has no reader lock)."""
    if index.read_only:
        yield
        return
    if index.chroma_url:
        with index.writing(wait):
            yield
        return
    with folder_read_lock(index.path, wait, index.quiet) as outermost:
        if outermost:
            index._reload()  # noqa: SLF001 (this module's own class)
        yield
