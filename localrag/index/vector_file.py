"""The indexed chunks' vectors as one float32 array beside a local Chroma store (`vectors.npy`), and the store's
state that proves it current (`store_state`).

Why a file of our own: Chroma hands out vectors only through `collection.get`, which read the 22,730 vectors of the
FinanceBench index in 2.5 s (as Python lists); memory-mapping this file takes milliseconds, and an exact search
reads it like any array. Chroma stays the store of record: the file is derived from it, and written only by a read
of the whole store that found it consistent with the manifest.

The file is a standard .npy (`numpy.load` reads it) of unit rows sorted by chunk id, followed by a trailer: UTF-8
JSON {format, fingerprint, checked, store, rows, dimension, ids}, its length (8 bytes, little-endian) and MAGIC.
One file, written atomically: a reader sees the old array or the new one, never one's vectors with the other's
ids. It is current when its `checked` key equals the manifest's (`checked_key`: the chunks' fingerprint and the
files being stored) and its `store` equals the store's state now (`store_state`: the collection, the sequence
number of its last write, its chunk count); any write to the collection since (a sync, an interrupted one,
another program) moves the sequence number, and the store is then read whole and checked again.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from localrag.files import write_atomic
from localrag.index.manifest import Manifest

VECTOR_FILE = "vectors.npy"  # inside a local index folder
MAGIC = b"LRAGVEC1"  # the file's last 8 bytes
FORMAT = 1  # of the trailer; another format is read as stale (the store is read and the file written again)
_LENGTH = struct.Struct("<Q")
# Why a file is stale after a sync changed the index (stale_reason): the routine cases.
OTHER_CHUNKS = "it is of other chunks than the manifest lists"
STORE_WRITTEN = "the store was written since"


class UnreadableVectors(Exception):
    """The vector file is there but cannot be read (truncated, damaged, not localRAG's): `path` and why."""

    def __init__(self, path: Path, why: str):
        self.path, self.why = path, why
        super().__init__(f"{path} cannot be read ({why})")


@dataclass(frozen=True)
class VectorHeader:
    """The trailer of a vector file: which chunks its rows are (`ids`, sorted), of which manifest (`fingerprint`,
    `checked`) and store state (`store`), and the array's shape."""
    fingerprint: str
    checked: str
    store: dict
    rows: int
    dimension: int
    ids: tuple[str, ...]
    offset: int  # where the array's data starts in the file


def checked_key(manifest: Manifest) -> str:
    """What a consistency check of the store was made against: the chunks' fingerprint and the files whose chunks
    were being stored (the manifest's `partial`: their chunks are kept, not orphans)."""
    partial = {name: entry.get("sha256") for name, entry in sorted((manifest.partial or {}).items())}
    content = json.dumps({"fingerprint": manifest.fingerprint(), "partial": partial}, sort_keys=True)
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def store_state(folder: Path, collection_name: str) -> dict | None:
    """{collection, seq, chunks} of the collection in the local Chroma database in `folder`: its id, the sequence
    number of its last write as its metadata segment applied it, and its chunk count. One read-only SQLite query,
    without chromadb. None when the database or collection is not there or the layout is not one this code knows
    (the caller then reads the store whole)."""
    database = folder / "chroma.sqlite3"
    if not database.is_file():
        return None
    try:
        db = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        row = db.execute("SELECT c.id, s.id FROM collections c JOIN segments s ON s.collection = c.id "
                         "WHERE c.name = ? AND s.scope = 'METADATA'", (collection_name,)).fetchone()
        if row is None:
            return None
        seq = db.execute("SELECT seq_id FROM max_seq_id WHERE segment_id = ?", (row[1],)).fetchone()
        chunks = db.execute("SELECT COUNT(*) FROM embeddings WHERE segment_id = ?", (row[1],)).fetchone()[0]
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return {"collection": str(row[0]), "seq": None if seq is None else _seq(seq[0]), "chunks": int(chunks)}


def _seq(value: Any) -> int:
    """Chroma stores the sequence number as an integer, or (older layouts) as 8 big-endian bytes."""
    return int.from_bytes(value, "big") if isinstance(value, bytes) else int(value)


def save(folder: Path, ids: Sequence[str], matrix: Any, manifest: Manifest, store: dict) -> None:
    """Write the vectors of `ids` (rows of `matrix`, sorted by id) into `folder`'s vector file atomically."""
    import io

    import numpy

    matrix = numpy.ascontiguousarray(matrix, dtype=numpy.float32)
    if matrix.ndim != 2 or len(matrix) != len(ids):
        raise ValueError(f"{len(ids)} ids but an array of shape {matrix.shape}")
    trailer = json.dumps({"format": FORMAT, "fingerprint": manifest.fingerprint(), "checked": checked_key(manifest),
                          "store": store, "rows": len(ids), "dimension": int(matrix.shape[1]), "ids": list(ids)},
                         ensure_ascii=False, sort_keys=True).encode("utf-8")
    buffer = io.BytesIO()
    numpy.save(buffer, matrix, allow_pickle=False)

    def write(handle) -> None:
        handle.write(buffer.getbuffer())
        handle.write(trailer)
        handle.write(_LENGTH.pack(len(trailer)) + MAGIC)

    write_atomic(folder / VECTOR_FILE, write, binary=True)


def read_header(folder: Path) -> VectorHeader | None:
    """The vector file's trailer, and where its array starts; None when there is no file or it is of another
    format. UnreadableVectors when it is there but truncated, damaged or not localRAG's. Reads the file's ends
    only."""
    from numpy.lib import format as npy

    path = folder / VECTOR_FILE
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableVectors(path, f"{type(exc).__name__}: {exc.strerror}") from None
    with handle:
        try:
            size = handle.seek(0, 2)
            if size < _LENGTH.size + len(MAGIC):
                raise UnreadableVectors(path, f"it holds {size} bytes, too few for a vector file")
            handle.seek(size - _LENGTH.size - len(MAGIC))
            (length,), magic = _LENGTH.unpack(handle.read(_LENGTH.size)), handle.read(len(MAGIC))
            if magic != MAGIC:
                raise UnreadableVectors(path, "it does not end in localRAG's marker: truncated, or not written by "
                                              "localRAG")
            handle.seek(0)
            version = npy.read_magic(handle)
            read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
            shape, fortran, dtype = read(handle)
            offset = handle.tell()
            if length > size - offset:
                raise UnreadableVectors(path, f"its trailer claims {length} bytes of a {size}-byte file")
            handle.seek(size - _LENGTH.size - len(MAGIC) - length)
            data = json.loads(handle.read(length).decode("utf-8"))
        except UnreadableVectors:
            raise
        except (OSError, ValueError, UnicodeDecodeError, struct.error) as exc:
            raise UnreadableVectors(path, f"{type(exc).__name__}: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    try:
        header = VectorHeader(str(data["fingerprint"]), str(data["checked"]), dict(data["store"]), int(data["rows"]),
                              int(data["dimension"]), tuple(map(str, data["ids"])), offset)
    except (KeyError, TypeError, ValueError) as exc:
        raise UnreadableVectors(path, f"its trailer lacks an entry ({type(exc).__name__}: {exc})") from None
    expected = offset + header.rows * header.dimension * 4 + length + _LENGTH.size + len(MAGIC)
    if str(dtype) != "float32" or fortran or shape != (header.rows, header.dimension) or \
            len(header.ids) != header.rows or size != expected:
        raise UnreadableVectors(path, f"it holds {size} bytes and an array of {dtype}, shape {shape}, where its "
                                      f"trailer says {header.rows} rows of {header.dimension} float32 in "
                                      f"{expected} bytes")
    return header


def load(folder: Path, header: VectorHeader) -> Any:
    """The array of the vector file whose trailer is `header`, memory-mapped read-only."""
    import numpy

    if header.rows == 0:
        return numpy.zeros((0, header.dimension), dtype=numpy.float32)
    return numpy.memmap(folder / VECTOR_FILE, dtype=numpy.float32, mode="r", offset=header.offset,
                        shape=(header.rows, header.dimension))


def stale_reason(header: VectorHeader | None, manifest: Manifest, store: dict | None) -> str | None:
    """Why the vector file `header` does not hold the manifest's chunks as the store holds them now; None when it
    does. `store`: store_state now (None: unknown, never current)."""
    if header is None:
        return "there is none"
    if store is None:
        return "the store's state cannot be read"
    if header.checked != checked_key(manifest):
        return OTHER_CHUNKS
    if header.store != store:
        return STORE_WRITTEN
    return None
