"""Query vectors kept on disk between runs, so that a rerun of an evaluation embeds only new or changed questions
and, when every vector is there, never loads the embedding model.

Where it sits: the evaluation uses it (eval_retrieval.py passes the file, by default under eval/.cache/, and fills
the Retriever's query vectors from it before a run); the chat does not: its questions are asked once each, so a
disk cache would only write what users type to disk, and the Retriever keeps each question's vector in memory
for the life of a LocalRAG anyway.

Key: what decides a vector. The embedder (`Embedder`: model name, a stamp of its weights from
models.model_revision, backend, the export that runs it, e.g. "onnx-int8-avx2", and the query prefix) and the
exact text the model embeds: the prefix, then the query. Each row keeps these in clear and they are compared on
every read (the hash of them is only the row's primary key), together with a checksum over them and the vector's
bytes: a row that does not match in every part is never used; it is embedded again and replaced.

Storage: one SQLite file, not the atomic JSON writer of localrag/files.py: a run reads only the rows of its
questions and writes only its new ones, in one transaction, where a rewritten JSON file would be read and written
whole at every run (tens of megabytes for a BEIR dataset). SQLite's journal rolls back a transaction that an
interrupted run left unfinished, so a reader sees the old rows or the new ones, never half a row, and its file lock
serialises two evaluations that write at once (each waits up to BUSY_TIMEOUT_SECONDS). A cache of this tool that
SQLite cannot read (truncated, of another layout) is moved aside, never deleted, with a warning, and a new one is
started: its vectors are embedded again. Any other file (not SQLite, or SQLite without the cache's table: an index's
chroma.sqlite3, a goldset) is never moved or written: the cache is off for the run, with a warning, and the
evaluation refuses such a --query-cache before any work (foreign_file_problem).

Bound: at most `max_entries` rows; beyond it the least recently used rows (by their last read or write) are
deleted.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from array import array
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

QUERY_VECTOR_CACHE_ENTRIES = 50_000  # most query vectors kept (LRU); 50,000 of 384 dimensions take about 80 MB
BUSY_TIMEOUT_SECONDS = 60.0  # how long a writer waits for another evaluation's transaction on the same file
FORMAT = 1  # the file's layout (SQLite user_version); a file of another layout is moved aside
_SCHEMA = """CREATE TABLE IF NOT EXISTS vectors (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, revision TEXT NOT NULL, backend TEXT NOT NULL, export TEXT NOT NULL,
    prefix TEXT NOT NULL, text TEXT NOT NULL, dtype TEXT NOT NULL, vector BLOB NOT NULL, checksum TEXT NOT NULL,
    used INTEGER NOT NULL)"""
# How SQLite keeps the table's definition in the file (without IF NOT EXISTS): what marks a damaged cache as ours.
_SCHEMA_START = _SCHEMA.replace(" IF NOT EXISTS", "").split(",")[0].encode("ascii")
_OWN_COLUMNS = {"key", "model", "text", "vector", "checksum"}  # a `vectors` table with these is this cache's, any FORMAT
_BATCH = 500  # keys per SELECT (SQLite's limit on variables is 32,766 in this build, 999 in old ones)


@dataclass(frozen=True)
class Embedder:
    """What makes a query's vector, besides its text: two embedders that differ in any part never share one."""

    model: str
    revision: str  # models.model_revision: which weights the name stands for
    backend: str
    export: str  # embeddings.export_name ("torch", "onnx-int8-avx2", "openvino-int8-<calibration>"); "" for none
    prefix: str  # the query prefix the model puts before each query ("query: " for e5 models)


def embedder_of(index) -> Embedder:
    """The embedder of an Index (localrag/index/index.py), without loading its model: the loaded model's export and
    prefix when it is loaded, else the ones loading it would give."""
    from localrag.models import loading

    name = index.settings["embedding_model"]
    return Embedder(model=index.embedding_model_name, revision=loading.model_revision(name),
                    backend=index.settings["embedding_backend"], export=index.embedding_export or "",
                    prefix=index.embedding_prefixes["query"])


def _key(embedder: Embedder, text: str) -> str:
    return hashlib.sha256(json.dumps([asdict(embedder), text], ensure_ascii=False).encode("utf-8")).hexdigest()


def _checksum(key: str, dtype: str, blob: bytes) -> str:
    return hashlib.sha256(key.encode("ascii") + dtype.encode("ascii") + blob).hexdigest()[:32]


def _pack(vector: Sequence[float]) -> tuple[str, bytes]:
    """(array typecode, bytes): float32 when that keeps every value exactly (model outputs are float32), else
    float64, so a vector read back is always equal to the one stored."""
    values = [float(v) for v in vector]
    single = array("f", values)
    return ("f", single.tobytes()) if single.tolist() == values else ("d", array("d", values).tobytes())


class QueryVectorCache:
    """The query vectors in one SQLite file (see the module's docstring). `warn(message)` reports a damaged or
    unusable file; the cache then works without it (a damaged one is moved aside first)."""

    def __init__(self, path: str | Path, max_entries: int = QUERY_VECTOR_CACHE_ENTRIES,
                 warn: Callable[[str], None] = lambda message: None):
        if max_entries < 1:
            raise ValueError(f"the query vector cache must keep at least 1 vector, got {max_entries}")
        self.path = Path(path)
        self.max_entries = max_entries
        self.warn = warn
        self.disabled: str | None = None  # why the cache is not used this run (a warning said so)

    # ------------------------------------------------------------------ reading and writing

    def get(self, embedder: Embedder, queries: Sequence[str]) -> dict[str, list[float]]:
        """query -> its cached vector, for each query whose row matches `embedder` and prefix + query exactly."""
        wanted = {_key(embedder, embedder.prefix + q): q for q in dict.fromkeys(queries)}
        if not wanted or not self.path.exists():
            return {}
        found: dict[str, list[float]] = {}

        def read(db: sqlite3.Connection) -> None:
            keys = list(wanted)
            for start in range(0, len(keys), _BATCH):
                part = keys[start:start + _BATCH]
                rows = db.execute(f"SELECT key, model, revision, backend, export, prefix, text, dtype, vector, checksum "
                                  f"FROM vectors WHERE key IN ({','.join('?' * len(part))})", part).fetchall()
                for key, model, revision, backend, export, prefix, text, dtype, blob, checksum in rows:
                    query = wanted[key]
                    if (Embedder(model, revision, backend, export, prefix) != embedder
                            or text != embedder.prefix + query or dtype not in ("f", "d")
                            or checksum != _checksum(key, dtype, blob)):
                        continue  # a damaged or foreign row: embedded again, and replaced by put
                    found[query] = array(dtype, blob).tolist()
            if found:  # mark them used, for the LRU bound
                db.execute("BEGIN IMMEDIATE")
                now = time.time_ns()
                db.executemany("UPDATE vectors SET used = ? WHERE key = ?",
                               [(now, _key(embedder, embedder.prefix + q)) for q in found])
                db.execute("COMMIT")

        return found if self._run(read) else {}

    def put(self, embedder: Embedder, vectors: Mapping[str, Sequence[float]]) -> int:
        """Store query -> vector for `embedder` in one transaction (replacing rows of the same key), then delete the
        least recently used rows beyond `max_entries`. Returns how many rows were written (0 when the cache is
        unusable; a warning said why)."""
        if not vectors:
            return 0
        now = time.time_ns()
        rows = []
        for query, vector in vectors.items():
            text = embedder.prefix + query
            key = _key(embedder, text)
            dtype, blob = _pack(vector)
            rows.append((key, embedder.model, embedder.revision, embedder.backend, embedder.export, embedder.prefix,
                         text, dtype, blob, _checksum(key, dtype, blob), now))

        def write(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            db.execute("DELETE FROM vectors WHERE key IN (SELECT key FROM vectors ORDER BY used DESC, key "
                       "LIMIT -1 OFFSET ?)", (self.max_entries,))
            db.execute("COMMIT")

        return len(rows) if self._run(write, create=True) else 0

    def __len__(self) -> int:
        """Rows in the file (0 when there is none or it is unusable)."""
        count: list[int] = [0]

        def read(db: sqlite3.Connection) -> None:
            count[0] = db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]

        return count[0] if self.path.exists() and self._run(read) else 0

    # ------------------------------------------------------------------ the file

    def _run(self, work: Callable[[sqlite3.Connection], None], create: bool = False) -> bool:
        """Run `work` on an open connection; False (after a warning) when the file is unusable. A file that is
        not a readable cache of this FORMAT is moved aside and, when `create`, `work` runs on a new one."""
        if self.disabled:
            return False
        for attempt in (1, 2):
            try:
                if create:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
            except (OSError, sqlite3.Error) as exc:
                return self._disable(f"cannot open it ({type(exc).__name__}: {exc})")
            try:
                self._check_format(db)
                work(db)
                return True
            except _Damaged as exc:
                problem = str(exc)
            except sqlite3.DatabaseError as exc:
                if isinstance(exc, sqlite3.OperationalError) and not _damage_message(exc):
                    # locked past the timeout, read-only file or disk full: the file itself is sound
                    return self._disable(f"{type(exc).__name__}: {exc}")
                problem = f"{type(exc).__name__}: {exc}"
            finally:
                db.close()
            if (foreign := foreign_file_problem(self.path)) is not None:
                return self._disable(f"{problem}; the file {foreign}, so it is no cache of this tool and is left as "
                                     f"it is")
            if attempt == 2 or not self._move_aside(problem):
                return False
            if not create:
                return False
        return False

    def _check_format(self, db: sqlite3.Connection) -> None:
        version, tables = _layout(db)
        if version == 0 and not tables:  # a new (or empty) file
            db.execute("BEGIN IMMEDIATE")
            try:
                version, tables = _layout(db)  # again under the write lock: another run may have made it meanwhile
                if version == 0 and not tables:
                    db.execute(_SCHEMA)
                    db.execute(f"PRAGMA user_version = {FORMAT}")
                    version, tables = FORMAT, {"vectors"}
                db.execute("COMMIT")
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")
        if version != FORMAT or "vectors" not in tables:
            raise _Damaged(f"it is not a query vector cache of format {FORMAT} (format {version}, tables "
                           f"{', '.join(sorted(tables)) or 'none'})")

    def _move_aside(self, problem: str) -> bool:
        stem = f"{self.path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        aside = self.path.with_name(stem)
        number = 1
        while aside.exists():  # one moved aside this second already: never replace it
            number += 1
            aside = self.path.with_name(f"{stem}-{number}")
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            return True  # another evaluation moved it aside already
        except OSError as exc:
            self._disable(f"{problem}; it could not be moved aside either ({exc}); move or delete it yourself")
            return False
        for suffix in ("-journal", "-wal", "-shm"):  # SQLite's side files belong to the damaged file
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                os.replace(side, aside.with_name(aside.name + suffix))
        self.warn(f"the query vector cache {self.path} is unreadable ({problem}); moved it aside to {aside.name} "
                  f"(delete it when you like); its questions are embedded again and kept in a new file")
        return True

    def _disable(self, why: str) -> bool:
        self.disabled = why
        self.warn(f"the query vector cache {self.path} is not used in this run: {why}; questions are embedded as "
                  f"without a cache (check the file, or give another with --query-cache)")
        return False


SQLITE_HEADER = b"SQLite format 3\x00"  # the first bytes of every SQLite database file


def foreign_file_problem(path: str | Path) -> str | None:
    """Why the file at `path` is not a query vector cache of this tool ('is not an SQLite file', ...), or None when it
    may be used: missing, empty, an SQLite database without tables, or one with the cache's table `vectors` (damaged
    or not, of any FORMAT: such a one is moved aside when read). A file SQLite cannot tell the tables of is one only
    when page 1 holds that table's definition (a truncated cache)."""
    try:
        with open(path, "rb") as file:
            head = file.read(65536)  # the largest page SQLite writes: page 1 holds the table definitions
    except OSError:
        return None  # missing, unreadable or a folder: opening it fails, and the run says so
    if not head:
        return None
    if not head.startswith(SQLITE_HEADER):
        return "is not an SQLite file"
    try:
        db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_SECONDS)
        try:
            _, tables = _layout(db)
            columns = {row[1] for row in db.execute("PRAGMA table_info(vectors)")}
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and not _damage_message(exc):
            return None  # locked, or a hot journal only a writer may roll back: the file itself may be ours
        if _SCHEMA_START in head:  # a cache of this tool, damaged (truncated): its table's definition is on page 1
            return None
        return f"is an SQLite file whose tables cannot be read ({exc}) and holds no query vector table"
    if not tables or _OWN_COLUMNS <= columns:
        return None
    return f"is an SQLite database of other tables ({', '.join(sorted(tables))}), not a query vector cache"


def _layout(db: sqlite3.Connection) -> tuple[int, set[str]]:
    """The file's user_version and table names, read in one statement: one snapshot, never a version from before
    another run created the file and tables from after."""
    version, names = db.execute("SELECT (SELECT user_version FROM pragma_user_version), "
                                "(SELECT group_concat(name, char(31)) FROM sqlite_master WHERE type = 'table')"
                                ).fetchone()
    return version, set(names.split("\x1f")) if names else set()


class _Damaged(Exception):
    """The file is not a cache this code can read."""


def _damage_message(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return any(word in text for word in ("malformed", "not a database", "corrupt", "no such table", "no such column"))


def fill(retriever, cache: QueryVectorCache | None, queries: Sequence[str], *, embed: bool, batch_size: int,
         refresh: bool = False) -> tuple[int, int]:
    """Give `retriever` (localrag/retrieval/retriever.py) the vector of every query: from the cache, else embedded now (in
    batches of `batch_size`) and stored. `queries` as the retriever embeds them (`prepare_query`). With `refresh`
    (--rebuild) nothing is read from the cache: every vector is embedded again and replaces its row. Without
    `embed` only cached vectors are given (the model is never loaded). Returns (from the cache, embedded)."""
    todo = [q for q in dict.fromkeys(queries) if q not in retriever.query_vectors()]
    cached = {} if cache is None or refresh or not todo else cache.get(embedder_of(retriever.index), todo)
    retriever.add_query_vectors(cached)
    missing = [q for q in todo if q not in cached]
    if not embed or not missing:
        return len(cached), 0
    retriever.embed_queries(missing, batch_size)
    if cache is not None:
        known = retriever.query_vectors()
        cache.put(embedder_of(retriever.index), {q: known[q] for q in missing})  # the loaded model's export
    return len(cached), len(missing)
