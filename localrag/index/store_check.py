"""Whether an index's store agrees with its manifest (`check_records`, `IndexCheck`) and what follows when it does
not: the error that stops a measurement, and what a sync refuses (a foreign collection, vectors of another size,
unlisted chunks beside a manifest localRAG did not write) or repairs (orphan chunks, files that lost chunks,
segment folders the database no longer names)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from localrag.errors import RAGError
from localrag.index.manifest import INDEX_INFO_FILE, Manifest
from localrag.index.store import COLLECTION_MARKER, IndexPlace


@dataclass
class IndexCheck:
    """How the store agrees with the manifest (`Index.check_index`)."""
    stored: int = 0  # chunks in the store
    dimension: int | None = None  # size of the stored vectors; None for an empty store
    problems: list[str] = field(default_factory=list)  # measuring this index would be wrong; sync cannot repair
    repairs: dict[str, str] = field(default_factory=dict)  # source -> what its stored chunks lack; sync re-embeds
    orphan_ids: list[str] = field(default_factory=list)  # chunks of no indexed or partial file: sync deletes them
    # How it was made: "read" (the store read whole and compared), or "recorded" (the vector file's record of such
    # a read still holds: same manifest, no write to the store since; localrag/index/vector_file.py).
    method: str = "read"

    def describe(self) -> list[str]:
        return self.problems + [f"{source}: {why}" for source, why in sorted(self.repairs.items())]


def check_records(manifest: Manifest, stored: int, dimension: int | None, ids: Sequence[str],
                  metadatas: Sequence[dict | None]) -> IndexCheck:
    """Compare the store's records (`ids` and `metadatas` of all `stored` chunks, vectors of `dimension`) with the
    manifest."""
    check = IndexCheck(stored=stored, dimension=dimension)
    recorded = manifest.dimension
    if dimension is not None and recorded and dimension != recorded:
        check.problems.append(f"the store holds vectors of {dimension} dimensions, the manifest says {recorded}")
    counts: dict[str, int] = {}
    partial = manifest.partial or {}
    for chunk, meta in zip(ids, metadatas):
        source = (meta or {}).get("source")
        entry = manifest.files.get(source) or partial.get(source)
        if entry and meta.get("file_hash") == entry["sha256"]:
            counts[source] = counts.get(source, 0) + 1  # a partial file's chunks are kept for the next sync
            continue
        check.orphan_ids.append(chunk)
    for source, entry in manifest.files.items():
        if counts.get(source, 0) != entry["chunks"]:
            check.repairs[source] = (f"the store holds {counts.get(source, 0)} of its {entry['chunks']} "
                                     f"chunks")
    return check


def inconsistency_error(check: IndexCheck, place: IndexPlace) -> RAGError | None:
    """The error that stops measuring an index whose store does not match its manifest, saying how to repair it;
    None when it matches."""
    found = check.describe()
    if not found:
        return None
    shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
    return RAGError(f"the index {place.location} does not match its manifest ({shown}); measuring it would "
                    f"give wrong numbers. Repair it with add_pdfs.py {place.index_flag()} (or evaluate "
                    f"without --no-sync){'' if not check.problems else ', or rebuild it with --rebuild'}",
                    reason="index does not match its manifest")


def foreign_collection(place: IndexPlace) -> str | None:
    """Why the store may not be written: a non-empty collection that localRAG did not make, else None.

    Only asked where no manifest (not even a damaged one) says that localRAG built the index."""
    client = place.client()
    if not place.has_collection():
        return None
    collection = client.get_collection(place.collection_name)
    if (collection.metadata or {}).get(COLLECTION_MARKER) or collection.count() == 0:
        return None
    return (f"the index {place.location} holds a Chroma collection {place.collection_name!r} with "
            f"{collection.count()} chunks that localRAG did not make (no {INDEX_INFO_FILE}); it is left "
            f"untouched. Use another index folder (--index), or move this one away yourself")


def dimension_error(place: IndexPlace, stored: int, model_name: str, dimension: int) -> RAGError:
    """The store holds vectors of `stored` dimensions, the model makes `dimension`: another model built it."""
    return RAGError(f"the index {place.location} holds vectors of {stored} dimensions, but "
                    f"{model_name} makes {dimension}: it was built with another embedding "
                    f"model. Rebuild it with add_pdfs.py {place.index_flag()} --rebuild, or use another index "
                    f"folder", reason="embedding dimension differs")


def unmarked_manifest_error(place: IndexPlace, orphans: int) -> RAGError:
    """Only a manifest localRAG wrote (it always writes "format") may condemn chunks it does not list."""
    return RAGError(f"the index manifest {place.manifest_location} carries no format marker, so localRAG did not "
                    f"write it (or an old version did), and the store holds {orphans} chunks it does not list; "
                    f"nothing was deleted. Put the right manifest back, or run add_pdfs.py {place.index_flag()} "
                    f"--rebuild to build the index again", reason="manifest without format marker")


def remove_orphan_segments(folder: Path) -> list[str]:
    """Delete the segment folders of the local store in `folder` that its database does not name (left by a
    deleted or replaced chroma.sqlite3, or a dropped collection); returns their names. Only folders named like
    Chroma's (a UUID) holding nothing but HNSW files are touched."""
    import shutil
    import sqlite3
    import uuid

    database = folder / "chroma.sqlite3"
    if not database.exists():
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
    for segment in sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in known):
        try:
            uuid.UUID(segment.name)
        except ValueError:
            continue
        if all(f.is_file() and f.name in hnsw for f in segment.iterdir()):
            shutil.rmtree(segment)
            removed.append(segment.name)
    return removed
