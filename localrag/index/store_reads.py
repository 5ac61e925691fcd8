"""Reading an index's store whole, and the vector file that spares it (`StoreReads`).

A whole read (every chunk's metadata and vector) compares the store with the manifest (store_check.check_records)
and gives the unit vectors of the indexed chunks; when the store matches (no orphan either) and nothing wrote to
it during the read, the vectors go into the vector file (localrag/index/vector_file.py) with the store's state.
While that record holds (same chunks in the manifest, no write to the store since), the store check is read from
it and the vectors are memory-mapped from the file: a run reads no more of the store than the chunks it shows.
A server index keeps no vector file: its store is read whole once per process, as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from localrag.files import log
from localrag.index import vector_file
from localrag.index.manifest import Manifest
from localrag.index.store import IndexPlace, read_store, storage_error, unit_rows
from localrag.index.store_check import IndexCheck, check_records


@dataclass(frozen=True)
class StoreRead:
    """One read of the whole store: how it agrees with the manifest, and the unit vectors of its indexed chunks
    (ids sorted)."""
    check: IndexCheck
    ids: list[str]
    matrix: Any


class StoreReads:
    """The whole reads of the store at `place` and its vector file. `manifest()` and `revision()` give the index's
    manifest and its revision now (what is kept here is kept per revision and store state); `collection()` the
    store's collection, opened if need be; `quiet` silences notes (never warnings)."""

    def __init__(self, place: IndexPlace, manifest: Callable[[], Manifest], revision: Callable[[], int],
                 collection: Callable[[], Any], quiet: bool):
        self.place, self.quiet = place, quiet
        self._manifest, self._revision, self._collection = manifest, revision, collection
        self._whole: tuple[tuple, StoreRead] | None = None  # ((revision, store state), the last whole read)
        self._record: tuple[tuple, tuple] | None = None  # ((revision, store state), (header or None, why not))

    def forget(self) -> None:
        """The manifest changed: the last whole read and the file's verdict are stale."""
        self._whole = None
        self._record = None

    def state(self) -> dict | None:
        """The local store's state (vector_file.store_state); None for a server index or an unknown layout."""
        if self.place.chroma_url:
            return None
        return vector_file.store_state(self.place.folder, self.place.collection_name)

    def record(self) -> tuple[vector_file.VectorHeader | None, str | None]:
        """(the vector file's header, None) when it holds the manifest's chunks as the store holds them now, else
        (None, why not). An unreadable file is named in a warning once (the next whole read writes it again)."""
        state = self.state()
        key = (self._revision(), repr(state))
        if self._record is not None and self._record[0] == key:
            return self._record[1]
        if self.place.chroma_url:
            found: tuple = (None, "a server index keeps none")
        else:
            try:
                header = vector_file.read_header(self.place.folder)
                why = vector_file.stale_reason(header, self._manifest(), state)
                found = (header, None) if why is None else (None, why)
            except vector_file.UnreadableVectors as exc:
                log(f"warning: the vector file {exc.path} cannot be read ({exc.why}); reading the vectors from the "
                    f"store{'' if self.place.read_only else ' and writing the file again'}", False)
                found = (None, f"it cannot be read ({exc.why})")
        self._record = (key, found)
        return found

    def recorded_check(self) -> IndexCheck | None:
        """The store check the vector file records, while it holds; None when the store must be read."""
        header = self.record()[0]
        state = self.state()
        if header is None or state is None or (header.rows == 0 and state["chunks"]):
            return None
        check = IndexCheck(stored=state["chunks"], dimension=header.dimension if header.rows else None,
                           method="recorded")
        recorded = self._manifest().dimension
        if header.rows and recorded and header.dimension != recorded:
            check.problems.append(f"the store holds vectors of {header.dimension} dimensions, the manifest says "
                                  f"{recorded}")
        return check

    def vectors(self) -> tuple[list[str], Any]:
        """(ids sorted, unit float32 rows) of the indexed chunks: memory-mapped from the vector file while it
        holds, else from a whole read of the store (which writes the file when it can)."""
        header = self.record()[0]
        if header is not None:
            return list(header.ids), vector_file.load(self.place.folder, header)
        whole = self.read_whole()
        return whole.ids, whole.matrix

    def read_whole(self) -> StoreRead:
        """Read the store whole (metadata and vectors), compare it with the manifest and, when it matches (no
        orphan either) and nothing wrote to it meanwhile, write the vector file; once per revision and store
        state."""
        before = self.state()
        key = (self._revision(), repr(before))
        if self._whole is not None and self._whole[0] == key:
            return self._whole[1]
        manifest, collection = self._manifest(), self._collection()
        stored = collection.count()
        data = read_store(collection, ["embeddings", "metadatas"]) if stored else \
            {"ids": [], "embeddings": [], "metadatas": []}
        dimension = len(data["embeddings"][0]) if stored else None
        check = check_records(manifest, stored, dimension, data["ids"], data["metadatas"])
        ids, matrix = unit_rows(manifest, data["ids"], data["embeddings"], data["metadatas"])
        del data
        if before is not None and not self.place.read_only and not (check.describe() or check.orphan_ids) \
                and self.state() == before:
            self._save(manifest, ids, matrix, before)
        whole = StoreRead(check, ids, matrix)
        self._whole = (key, whole)
        return whole

    def _save(self, manifest: Manifest, ids: list[str], matrix: Any, state: dict) -> None:
        """Write the vector file. It is derived data: a full or read-only disk is a warning (dense search then
        reads the store until a later run writes it), never a failed sync."""
        try:
            vector_file.save(self.place.folder, ids, matrix, manifest, state)
        except OSError as exc:
            why = storage_error(exc, self.place.folder, self.place.low_disk_bytes) or f"{type(exc).__name__}: {exc}"
            log(f"warning: could not write the vector file {self.place.folder / vector_file.VECTOR_FILE} ({why}); "
                f"dense search reads the vectors from the store until a run can write it", False)
            return
        self._record = None

    def refresh(self) -> None:
        """After a sync: unless the vector file holds the chunks as stored now, read the store whole (which writes
        it when the store matches the manifest)."""
        if self.place.chroma_url or self.place.read_only:
            return
        header, why = self.record()
        if header is None:
            chunks = (self._manifest().counts or {}).get("chunks", 0)
            routine = why in (vector_file.OTHER_CHUNKS, vector_file.STORE_WRITTEN)  # what a sync that wrote does
            log(f"Writing the vector file of {chunks} chunks{'' if routine else f' ({why})'}", self.quiet)
            self.read_whole()
