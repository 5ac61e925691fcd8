"""Dense search over an index's stored vectors (`DenseSearch`): exact cosine (vectors.top_k_cosine) or, on a shelf
a sync gave one, the IVF's approximate search (localrag/search/ivf.py), and after a sync the IVF kept in step with the
chunks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from localrag.search import ivf
from localrag.errors import RAGError
from localrag.files import log
from localrag.index.manifest import Manifest
from localrag.index.store import IndexPlace
from localrag.search.vectors import cosine_similarities, top_k_of


@dataclass(frozen=True)
class DenseSource:
    """What dense search reads of an index as its manifest stands now: the manifest, the fingerprint of its chunks,
    and `vectors()`, which reads (ids sorted, unit float32 rows) of its indexed chunks from the store."""
    manifest: Manifest
    fingerprint: str
    vectors: Callable[[], tuple[list[str], Any]]


class DenseSearch:
    """Dense search of the index at `place`. `ivf_defaults` / `ivf_requested`: "min_chunks" and "lists" of the
    approximate search (requested None: as the manifest records, else the default), `ivf_probes` the lists a search
    reads (0: ivf.default_probes); `quiet` silences notes on progress (never warnings)."""

    def __init__(self, place: IndexPlace, ivf_defaults: dict[str, int], ivf_requested: dict[str, int | None],
                 ivf_probes: int, quiet: bool):
        self.place, self.quiet = place, quiet
        self.ivf_defaults, self.ivf_requested, self.ivf_probes = dict(ivf_defaults), dict(ivf_requested), ivf_probes
        self._ivf: tuple[str, Any] | None = None  # (fingerprint, the loaded IVF or None)
        self._vectors: tuple[str, list[str], Any] | None = None  # (fingerprint, ids, unit vectors) for nearest()
        # The last query's exact similarities: an evaluation searches each query twice (candidates, then deeper).
        self._last: tuple[tuple[str, bytes], Any] | None = None

    def forget_vectors(self) -> None:
        """Drop the in-memory copy of the stored vectors (the manifest changed)."""
        self._vectors = None
        self._last = None

    def nearest(self, source: DenseSource, vector: Sequence[float], k: int,
                exact: bool = False) -> list[tuple[str, float]]:
        """(chunk id, cosine similarity) of the k indexed chunks nearest to `vector`, best first; equal
        similarities are ordered by chunk id. Exact search over the stored vectors, or, on a shelf the sync gave
        an IVF (`describe`), its approximate search; `exact` forces exact search (to measure the IVF's recall).

        Not Chroma's HNSW search: Chroma rebuilds that graph from its write-ahead log at every open, and the
        graph is not deterministic; one 912-chunk index gave Hit@20 0.915 to 0.949 from one open to the next.
        Both searches here return the same list for the same index and query on every copy of it."""
        ids, matrix = self._vectors_of(source)
        index = None if exact else self._loaded_ivf(source, len(ids))
        if index is not None:
            found = ivf.search(index, matrix, vector, k, self._probes(index.lists))
        elif len(ids) == 0:
            found = []
        else:
            import numpy

            key = (source.fingerprint, numpy.asarray(vector, dtype=numpy.float64).tobytes())
            if self._last is None or self._last[0] != key:
                self._last = (key, cosine_similarities(matrix, vector))
            found = top_k_of(self._last[1], k)
        return [(ids[i], similarity) for i, similarity in found]

    def _vectors_of(self, source: DenseSource) -> tuple[list[str], Any]:
        if self._vectors is None or self._vectors[0] != source.fingerprint:
            self._vectors = (source.fingerprint, *source.vectors())
        return self._vectors[1], self._vectors[2]

    def load(self, source: DenseSource) -> None:
        """Read what `nearest` reads at its first call: the vectors, and the IVF where the manifest names one."""
        ids, _ = self._vectors_of(source)
        self._loaded_ivf(source, len(ids))

    def describe(self, source: DenseSource) -> dict:
        """How `nearest` searches this index: {"method": "exact"} or {"method": "ivf", "lists", "probes",
        "seed"}; "exact" also where the manifest names an IVF whose file is missing or stale (a warning said so)."""
        manifest = source.manifest
        recorded = manifest.dense_search or {"method": "exact"}
        if recorded.get("method") != "ivf" or \
                self._loaded_ivf(source, (manifest.counts or {}).get("chunks", 0)) is None:
            return {"method": "exact"}
        return {"method": "ivf", "lists": recorded["lists"], "probes": self._probes(recorded["lists"]),
                "seed": recorded["seed"]}

    def _probes(self, lists: int) -> int:
        return min(lists, self.ivf_probes or ivf.default_probes(lists))

    def _loaded_ivf(self, source: DenseSource, rows: int):
        """The IVF of the indexed chunks when the manifest names one and its file matches them, else None."""
        if (source.manifest.dense_search or {}).get("method") != "ivf":
            return None
        fingerprint = source.fingerprint
        if self._ivf is None or self._ivf[0] != fingerprint:
            try:
                loaded = ivf.load(self.place.ivf_dir(), fingerprint, rows)
            except ivf.UnreadableIVF as exc:  # never exact search unasked where the manifest says approximate
                raise RAGError(f"the IVF file {exc.path} of the index {self.place.location} cannot be read "
                               f"({exc.why}); run `add_pdfs.py {self.place.index_flag()}`: "
                               f"a sync builds it again", reason="unreadable IVF file") from None
            if loaded is None:
                log(f"warning: the IVF of the index {self.place.location} ({ivf.IVF_FILE}) is missing or does not "
                    f"match its chunks; dense search is exact (slower) until `add_pdfs.py "
                    f"{self.place.index_flag()}` builds it again", False)
            self._ivf = (fingerprint, loaded)
        return self._ivf[1]

    def setting(self, manifest: Manifest, key: str) -> int:
        """An IVF setting ("min_chunks", "lists"): as asked for, else as the manifest records it, else the default;
        a later sync without the flag keeps what an earlier one was given."""
        asked, recorded = self.ivf_requested.get(key), manifest.ivf_settings or {}
        return asked if asked is not None else recorded.get(key, self.ivf_defaults[key])

    def update(self, source: DenseSource) -> bool:
        """After a sync: give a shelf of setting("min_chunks") chunks or more the IVF of its chunks (rebuilt when
        the chunks or its settings changed), record it in the manifest; a smaller shelf is searched exactly.
        Whether the manifest's record changed (the caller writes it)."""
        manifest, folder = source.manifest, self.place.ivf_dir()
        chunks = manifest.counts["chunks"]
        recorded, recorded_settings = manifest.dense_search, manifest.ivf_settings
        settings = {key: self.setting(manifest, key) for key in self.ivf_defaults
                    if self.setting(manifest, key) != self.ivf_defaults[key]} or None
        if chunks < self.setting(manifest, "min_chunks"):
            wanted = None  # exact search: the manifest names no IVF
            (folder / ivf.IVF_FILE).unlink(missing_ok=True)
        else:
            lists = self.setting(manifest, "lists") or ivf.default_lists(chunks)
            wanted = {"method": "ivf", "lists": min(chunks, lists), "seed": 0}
            try:
                current = ivf.is_current(folder, source.fingerprint, chunks)
            except ivf.UnreadableIVF as exc:
                log(f"warning: the IVF file {exc.path} cannot be read ({exc.why}); building it again", False)
                current = False
            if recorded != wanted or not current:
                log(f"Building the IVF of {chunks} chunks ({wanted['lists']} lists) for approximate dense search",
                    self.quiet)
                _, matrix = source.vectors()
                folder.mkdir(parents=True, exist_ok=True)
                ivf.save(ivf.build(matrix, wanted["lists"], wanted["seed"]), folder, source.fingerprint)
        self._ivf = None
        if (recorded, recorded_settings) == (wanted, settings):
            return False
        manifest.dense_search, manifest.ivf_settings = wanted, settings
        return True
