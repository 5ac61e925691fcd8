"""Where an index lives and how it is reached (`IndexPlace`): a local folder, read from a private copy when it is
read-only, or a collection on a Chroma server; Chroma's client of it, the collection (`LazyStore`), paged reads
(the chunks and vectors of the files a manifest lists: `indexed_chunks`, `indexed_vectors`), where its manifest and
derived arrays are kept, and storage errors (a full or read-only disk) in a few words.

chromadb is imported when a client is first needed (a local index's manifest is read without one).
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from localrag.errors import RAGError
from localrag.files import log
from localrag.index.locks import LOCK_FILE
from localrag.index.manifest import INDEX_FORMAT, INDEX_INFO_FILE, Manifest
from localrag.text.pages import shown_page

# Chroma phones home unless told not to; set before chromadb is imported (this module imports it when used).
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

COLLECTION_MARKER = "localrag_format"  # collection metadata key that marks a collection localRAG made
BM25_DIR = "bm25"  # folder of the saved BM25 arrays inside a local index folder
# Chunks read from the store per call: Chroma fails reading ~40,000 at once ("too many SQL variables", seen on a
# FinanceBench index of 1,000-character chunks).
STORE_READ_PAGE = 10_000
STORE_CHANGE_ROWS = 5000  # chunks deleted or updated per Chroma call


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file
EMPTY_FILE = "is empty (0 bytes)"
NOT_SQLITE = "is not a SQLite database (overwritten or damaged)"
# SQLite's words, in Chroma's error, for a database whose header is intact but whose pages are not (truncated)
DAMAGED_DATABASE = ("database disk image is malformed", "file is not a database")


def store_file_problem(database: Path) -> str | None:
    """What is wrong with the store file, seen from its first bytes: EMPTY_FILE, NOT_SQLITE, or None when it starts
    as a SQLite database does (Chroma reads the rest)."""
    try:
        with open(database, "rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except OSError:  # unreadable for this user: Chroma's own error says so
        return None
    if not head:
        return EMPTY_FILE
    return None if head == SQLITE_HEADER else NOT_SQLITE


def _forget_failed_client(folder: Path) -> None:
    """Chroma keeps a client whose start failed in its per-process cache, and hands every later client of the
    folder that broken one ("no attribute 'bindings'"): forget it, so that once the user has moved the damaged
    file aside, a new LocalRAG in the same process (a notebook) opens the folder."""
    from chromadb.api.shared_system_client import SharedSystemClient

    if str(folder) not in getattr(SharedSystemClient, "_identifier_to_refcount", {str(folder): 1}):
        getattr(SharedSystemClient, "_identifier_to_system", {}).pop(str(folder), None)


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


def read_store(collection, include: list[str]) -> dict[str, list]:
    """Every record of a Chroma collection ({"ids": [...], and each of `include`}), read STORE_READ_PAGE at a time."""
    out: dict[str, list] = {"ids": [], **{key: [] for key in include}}
    for offset in range(0, collection.count(), STORE_READ_PAGE):
        data = collection.get(include=include, limit=STORE_READ_PAGE, offset=offset)
        for key in out:
            out[key] += list(data[key])  # embeddings come as one array
    return out


def _indexed(manifest: Manifest, meta: dict | None) -> bool:
    """Whether a stored chunk belongs to a fully indexed file (orphans of interrupted runs never do)."""
    entry = manifest.files.get((meta or {}).get("source"))
    return bool(entry) and meta.get("file_hash") == entry["sha256"]


def _with_page_number(meta: dict) -> dict:
    """Chunks of an older format (synced since by no version that writes page_number) get page_number here, derived
    exactly from `page`; their section stays unknown until a sync upgrades them (Sync.upgrade_chunks)."""
    return meta if "page_number" in meta else dict(meta, page_number=shown_page(int(meta["page"])))


def indexed_chunks(collection, manifest: Manifest) -> list[tuple[str, str, dict]]:
    """(id, text, metadata) of every chunk of a file `manifest` lists as fully indexed, sorted by id; one read of
    the collection (None, no store yet: none)."""
    if collection is None:
        return []
    data = read_store(collection, ["documents", "metadatas"])
    return sorted((i, t, _with_page_number(m))
                  for i, t, m in zip(data["ids"], data["documents"], data["metadatas"]) if _indexed(manifest, m))


def chunks_by_id(collection, manifest: Manifest, ids: Sequence[str]) -> dict[str, tuple[str, dict]]:
    """id -> (text, metadata) of those of `ids` that are chunks of a file `manifest` lists as fully indexed; read
    by id, STORE_READ_PAGE at a time (None, no store yet: none)."""
    out: dict[str, tuple[str, dict]] = {}
    if collection is None:
        return out
    ids = list(dict.fromkeys(ids))
    for start in range(0, len(ids), STORE_READ_PAGE):
        data = collection.get(ids=ids[start:start + STORE_READ_PAGE], include=["documents", "metadatas"])
        out.update((i, (t, _with_page_number(m))) for i, t, m in zip(data["ids"], data["documents"],
                                                                      data["metadatas"]) if _indexed(manifest, m))
    return out


def unit_rows(manifest: Manifest, ids: Sequence[str], embeddings: Sequence, metadatas: Sequence) -> tuple[list[str],
                                                                                                         Any]:
    """(ids sorted, their vectors scaled to unit length as float32 rows) of the records of chunks of a file
    `manifest` lists as fully indexed."""
    import numpy

    kept = sorted((i, v) for i, v, m in zip(ids, embeddings, metadatas) if _indexed(manifest, m))
    if not kept:
        return [], numpy.zeros((0, 0), dtype=numpy.float32)
    matrix = numpy.asarray([v for _, v in kept], dtype=numpy.float32)
    norms = numpy.linalg.norm(matrix, axis=1, keepdims=True)
    return [i for i, _ in kept], matrix / numpy.where(norms == 0, 1.0, norms)


def indexed_vectors(collection, manifest: Manifest) -> tuple[list[str], Any]:
    """(ids sorted, their stored vectors scaled to unit length as float32 rows) of every chunk of a file `manifest`
    lists as fully indexed (None, no store yet: none)."""
    import numpy

    if collection is None:
        return [], numpy.zeros((0, 0), dtype=numpy.float32)
    data = read_store(collection, ["embeddings", "metadatas"])
    return unit_rows(manifest, data["ids"], data["embeddings"], data["metadatas"])


def delete_ids(collection, ids: Sequence[str]) -> None:
    """Delete these chunks, STORE_CHANGE_ROWS per call."""
    for start in range(0, len(ids), STORE_CHANGE_ROWS):
        collection.delete(ids=ids[start:start + STORE_CHANGE_ROWS])


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

    def __init__(self, client, name: str, embedding_function: Callable[[], Any], metadata: dict):
        """`embedding_function()` makes LangChain's embedding function, when LangChain's store is first used."""
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
            self._langchain = Chroma(collection_name=collection, embedding_function=embedding_function(),
                                     client=client, collection_metadata=metadata)
        return getattr(self._langchain, name)


class IndexPlace:
    """Where one index lives: a local folder (`path`) or the collection `collection_name` on the Chroma server at
    `chroma_url`, and Chroma's client of it, opened at first use.

    `listed_chunks()` counts the chunks the manifest lists (see `_refuse_unusable_store`); `cache_dir` is where a
    server index keeps its BM25 arrays; `low_disk_bytes`: see `storage_error`."""

    def __init__(self, path: Path, chroma_url: str | None, *, cache_dir: Path, low_disk_bytes: int, quiet: bool,
                 listed_chunks: Callable[[], int]):
        self.path = path
        self.chroma_url = chroma_url
        self.cache_dir = cache_dir
        self.low_disk_bytes = low_disk_bytes
        self.quiet = quiet
        self.collection_name = ""  # set by the Index once its settings are known: a server's is derived from them
        self.folder = path  # the folder Chroma opens: a temporary copy when the index folder is read-only
        self.read_only = not chroma_url and path.exists() and not _writable(path)
        self.may_create_store = False  # True inside sync (see _refuse_unusable_store)
        self._listed_chunks = listed_chunks
        self._client = None
        self._temp_copy: Path | None = None

    @property
    def location(self) -> str:
        """Where the index lives, as reports show it."""
        return f"{self.chroma_url} collection {self.collection_name}" if self.chroma_url else str(self.path)

    def index_flag(self) -> str:
        """The flag that names this index to add_pdfs.py."""
        return f"--chroma-url {self.chroma_url}" if self.chroma_url else f"--index {self.path}"

    def no_index_error(self) -> RAGError:
        """There is no index here to read (`vectorstore is None` asks without raising)."""
        return RAGError(f"there is no index at {self.location}; build it with `python add_pdfs.py PDF_FOLDER "
                        f"{self.index_flag()}`, or give the path of an existing index", reason="no index")

    @property
    def manifest_location(self) -> str:
        """Where the manifest is, as messages name it."""
        return self.location if self.chroma_url else str(self.path / INDEX_INFO_FILE)

    def client(self):
        """A client of the local index folder, or of the Chroma server at `chroma_url`."""
        if self._client is None:
            import chromadb
            from chromadb.config import Settings

            settings = Settings(anonymized_telemetry=False)
            self._client = self._server_client(chromadb, settings) if self.chroma_url else \
                self._local_client(chromadb, settings)
        return self._client

    def _local_client(self, chromadb, settings):
        self._refuse_unusable_store()
        if self.read_only and self._temp_copy is None:
            self._copy_read_only_index()
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            return chromadb.PersistentClient(path=str(self.folder), settings=settings)
        except Exception as exc:  # noqa: BLE001 - chromadb's own errors carry the reason
            _forget_failed_client(self.folder)
            text = str(exc)
            if any(words in text for words in DAMAGED_DATABASE):  # a header intact, its pages not (truncated)
                raise self._damaged_store_error(f"cannot be read ({text.rsplit(') ', 1)[-1]})") from exc
            why = storage_error(exc)
            raise RAGError(f"cannot open the index {self.path}: {why or f'{type(exc).__name__}: {exc}'}") from exc

    def _server_client(self, chromadb, settings):
        from urllib.parse import urlparse

        url = urlparse(self.chroma_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise RAGError(f"Chroma URL {self.chroma_url!r} is not of the form http://HOST:PORT")
        try:
            client = chromadb.HttpClient(host=url.hostname, port=url.port or (443 if url.scheme == "https" else 8000),
                                         ssl=url.scheme == "https", settings=settings)
            client.heartbeat()
        except Exception as exc:  # noqa: BLE001 - any connection problem gets the same advice
            raise RAGError(f"cannot reach the Chroma server at {self.chroma_url} ({type(exc).__name__}: {exc}); "
                           f"start one with `chroma run --path DIR --port PORT` or check --chroma-url") from exc
        return client

    def _refuse_unusable_store(self) -> None:
        """Raise, before Chroma opens the folder, when the store file cannot hold the chunks the manifest lists:
        Chroma would create an empty database (and segment folder) where the file is missing or empty, in a folder
        that a reader (--no-sync, the chat) must not change, and every search would find nothing. A sync creates
        or fills it and re-embeds every file; a file that is not a SQLite database is refused to a sync too (it is
        the user's to move: it is no cache)."""
        database = self.path / "chroma.sqlite3"
        listed = self._listed_chunks()
        problem = "is missing" if not database.exists() else store_file_problem(database)
        if problem == NOT_SQLITE:
            raise self._damaged_store_error(problem)
        if not listed or problem is None or self.may_create_store:
            return
        raise RAGError(f"the index {self.path} does not match its manifest (it lists {listed} chunks, but the store "
                       f"file {database} {problem}); measuring it would give wrong numbers. Repair it with "
                       f"add_pdfs.py {self.index_flag()} (or evaluate without --no-sync)",
                       reason="index does not match its manifest")

    def _damaged_store_error(self, problem: str) -> RAGError:
        """The store file exists but Chroma cannot read it: nothing here repairs it in place."""
        database = self.path / "chroma.sqlite3"
        return RAGError(f"the store file {database} of the index {self.path} {problem}; the index was not changed. "
                        f"Move it aside (mv {database} {database}.damaged) and run add_pdfs.py {self.index_flag()}, "
                        f"which embeds every file again", reason="damaged store file")

    @contextlib.contextmanager
    def creating_store(self) -> Iterator[None]:
        """Inside a sync: a missing store file may be created (and every file re-embedded into it)."""
        self.may_create_store = True
        try:
            yield
        finally:
            self.may_create_store = False

    def _copy_read_only_index(self) -> None:
        """Chroma opens its database for writing even to read; a read-only index is read from a private copy."""
        import shutil
        import tempfile
        import weakref

        self._temp_copy = Path(tempfile.mkdtemp(prefix="localrag-readonly-"))
        # Removed when this object goes, or at exit (Ctrl-C too: weakref.finalize runs at interpreter exit).
        weakref.finalize(self, remove_tree, self._temp_copy)
        self.folder = self._temp_copy / "index"
        # copytree keeps the modes: a copy of a folder read-only for this user would be read-only too, and
        # Chroma (which writes even to read) could not open it. The copy is this user's, so it is made writable.
        shutil.copytree(self.path, self.folder, ignore=shutil.ignore_patterns(LOCK_FILE),
                        copy_function=shutil.copyfile)
        for folder, _, _ in os.walk(self.folder):
            os.chmod(folder, 0o700)
        log(f"note: the index {self.path} is read-only; reading a temporary copy of it", self.quiet)

    def info_collection(self):
        # index_info.json of a server index lives beside its collection, as one record of a side collection.
        return self.client().get_or_create_collection(f"{self.collection_name}-info", embedding_function=None)

    def open_store(self, embedding_function: Callable[[], Any]) -> LazyStore:
        # The marker tells collections made by localRAG from foreign ones, which are never written or deleted.
        return LazyStore(self.client(), self.collection_name, embedding_function,
                         {"hnsw:space": "cosine", COLLECTION_MARKER: INDEX_FORMAT})

    def has_collection(self) -> bool:
        return self.collection_name in [c.name if hasattr(c, "name") else c for c in self.client().list_collections()]

    def drop_collection(self) -> None:
        if self.has_collection():
            self.client().delete_collection(self.collection_name)

    # ------------------------------------------------------------------ the manifest's place

    def manifest_text(self) -> str | None:
        """The manifest's text, or None when the index has none."""
        if self.chroma_url:
            data = self.info_collection().get(ids=["index_info"], include=["documents"])
            return data["documents"][0] if data["ids"] else None
        path = self.path / INDEX_INFO_FILE
        return path.read_text(encoding="utf-8") if path.exists() else None

    def write_manifest(self, manifest: Manifest) -> None:
        if self.chroma_url:
            self.info_collection().upsert(ids=["index_info"], embeddings=[[1.0]], documents=[manifest.compact_json()])
            return
        self.path.mkdir(parents=True, exist_ok=True)
        manifest.write(self.path / INDEX_INFO_FILE)

    def move_manifest_aside(self) -> None:
        """Take a damaged manifest out of the way of a rebuild: a local one is kept beside under another name."""
        if self.chroma_url:
            self.info_collection().delete(ids=["index_info"])
            return
        damaged = self.path / INDEX_INFO_FILE
        aside = damaged.with_name(f"{INDEX_INFO_FILE}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        os.replace(damaged, aside)
        log(f"Moved the damaged manifest aside to {aside}", self.quiet)

    # ------------------------------------------------------------------ derived arrays and storage errors

    def bm25_dir(self) -> Path:
        """Saved BM25 arrays: in the index folder, or for a server index a local cache named after it.

        The arrays are derived data: their fingerprint comes from the index manifest, so a stale copy is
        rebuilt from the collection's texts, never used.
        """
        if not self.chroma_url:
            return self.folder / BM25_DIR
        server = hashlib.sha256(self.chroma_url.encode("utf-8")).hexdigest()[:12]
        return self.cache_dir.expanduser() / "bm25" / f"{server}-{self.collection_name}"

    def ivf_dir(self) -> Path:
        """The saved IVF: in the index folder, or for a server index beside its local BM25 arrays."""
        return self.folder if not self.chroma_url else self.bm25_dir()

    @contextlib.contextmanager
    def storage_errors(self) -> Iterator[None]:
        """A full or read-only disk becomes one RAGError; the index keeps every completely indexed file."""
        try:
            yield
        except RAGError:
            raise
        except Exception as exc:  # noqa: BLE001 - only storage errors are translated; the rest propagate
            why = storage_error(exc, None if self.chroma_url else self.folder, self.low_disk_bytes)
            if why is None:
                raise
            raise RAGError(f"{why} while writing the index {self.location}: the index keeps every file that was "
                           f"completely indexed; {'free some space' if 'space' in why else 'make it writable'} "
                           f"and run the same command again", reason=why) from exc
