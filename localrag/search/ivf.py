"""Approximate dense search for shelves past exact search's reach: an inverted file (IVF) over spherical k-means.

Why our own code and not Chroma's HNSW or faiss: Chroma rebuilds its graph at every open and the graph is not
deterministic (issue 29: one index gave Hit@20 0.915 to 0.949 from one open to the next), and faiss is not a
dependency. This IVF is built once by a sync (seeded k-means, Lloyd 1982 / Dhillon & Modha 2001 for the
spherical variant; the inverted file of Jégou et al. 2011 without quantisation) and saved in the index folder, so
every open and every copy of the index searches the same lists; probing every list gives exact search's list
(tests/test_ivf.py; a similarity may differ from exact search's in float32's last place).

Data: `matrix` rows are unit float32 vectors sorted by chunk id (Index.indexed_vectors); an IVF holds the
centroids, and the rows of each list in ascending row order (`order` cut by `offsets`).
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from localrag.search.vectors import one_blas_thread

IVF_FILE = "ivf.npz"  # in the index folder, beside index_info.json
TRAIN_ROWS_PER_LIST = 64  # k-means trains on at most this many sampled rows per list (the rest are assigned)
ITERATIONS = 12  # Lloyd iterations of the training
ASSIGN_ROWS = 32_768  # rows scored against the centroids at once (bounds the memory of one step)
FORMAT = 1  # the saved file's layout


@dataclass
class IVF:
    centroids: Any  # (lists, dimensions) float32, unit rows
    order: Any  # (rows,) int64: the rows of list 0, then of list 1, ..., each list in ascending row order
    offsets: Any  # (lists + 1,) int64: list j is order[offsets[j]:offsets[j + 1]]
    seed: int
    # The matrix's rows in `order`, made at the first search: a list is then one contiguous block, read without
    # copying (gathering the probed rows instead cost more than exact search at 1M chunks). Twice the memory.
    grouped: Any = None

    @property
    def lists(self) -> int:
        return len(self.centroids)


def default_lists(rows: int) -> int:
    """4·sqrt(rows) lists (faiss's guideline of 4-16·sqrt(n)), at least 1 and at most `rows`."""
    return max(1, min(rows, int(round(4 * rows ** 0.5))))


def default_probes(lists: int) -> int:
    """An eighth of the lists, at least 1: on the FinanceBench index's real vectors (603 lists) recall@30 against
    exact search was 0.985 at 128 probes, 0.916 at 32 and 0.758 at 8 (docs/speed.md, "The same list every time")."""
    return max(1, lists // 8)


def _assign(matrix: Any, centroids: Any) -> Any:
    """Each row's nearest centroid by cosine; equal similarities go to the lower list."""
    import numpy

    out = numpy.empty(len(matrix), dtype=numpy.int64)
    for start in range(0, len(matrix), ASSIGN_ROWS):
        out[start:start + ASSIGN_ROWS] = numpy.argmax(matrix[start:start + ASSIGN_ROWS] @ centroids.T, axis=1)
    return out


def build(matrix: Any, lists: int, seed: int = 0) -> IVF:
    """Spherical k-means of `lists` centroids, trained on a seeded sample of the rows, then every row assigned."""
    import numpy

    n = len(matrix)
    if not 1 <= lists <= n:
        raise ValueError(f"an IVF needs between 1 and {n} lists for {n} vectors, got {lists}")
    rng = numpy.random.default_rng(seed)
    sample = numpy.sort(rng.choice(n, size=min(n, lists * TRAIN_ROWS_PER_LIST), replace=False))
    train = matrix[sample]
    centroids = train[numpy.sort(rng.choice(len(train), size=lists, replace=False))].copy()
    for _ in range(ITERATIONS):
        assigned = _assign(train, centroids)
        sums = numpy.zeros_like(centroids)
        numpy.add.at(sums, assigned, train)
        norms = numpy.linalg.norm(sums, axis=1, keepdims=True)
        kept = norms[:, 0] > 0  # an empty list keeps its centroid
        centroids[kept] = sums[kept] / norms[kept]
    assigned = _assign(matrix, centroids)
    order = numpy.argsort(assigned, kind="stable").astype(numpy.int64)  # stable: rows ascending in each list
    offsets = numpy.concatenate([[0], numpy.cumsum(numpy.bincount(assigned, minlength=lists))]).astype(numpy.int64)
    return IVF(centroids.astype(numpy.float32), order, offsets, seed)


def search(ivf: IVF, matrix: Any, vector: Sequence[float], k: int, probes: int) -> list[tuple[int, float]]:
    """(row, cosine) of the k best rows of the `probes` lists nearest to `vector`, best first; equal similarities
    in row order, as vectors.top_k_cosine orders them (probing every list gives its list)."""
    import numpy

    query = numpy.asarray(vector, dtype=numpy.float32)
    query = query / (float(numpy.linalg.norm(query)) or 1.0)
    if ivf.grouped is None:
        ivf.grouped = numpy.ascontiguousarray(matrix[ivf.order])
    with one_blas_thread():  # why: vectors.one_blas_thread
        near = ivf.centroids @ query
        probed = numpy.lexsort((numpy.arange(ivf.lists), -near))[:max(1, min(probes, ivf.lists))]
        blocks = [(ivf.offsets[j], ivf.offsets[j + 1]) for j in probed]
        similarities = numpy.concatenate([ivf.grouped[a:b] @ query for a, b in blocks])
    rows = numpy.concatenate([ivf.order[a:b] for a, b in blocks])
    top = top_k_cosine_of(similarities, rows, k)
    return [(int(rows[i]), float(similarities[i])) for i in top]


def top_k_cosine_of(similarities: Any, rows: Any, k: int) -> Any:
    """Positions of the k best similarities, equal ones in ascending row order (vectors.top_k_cosine's rule)."""
    import numpy

    n, k = len(similarities), min(k, len(similarities))
    if k <= 0:
        return numpy.zeros(0, dtype=numpy.int64)
    cut = numpy.partition(similarities, n - k)[n - k]
    top = numpy.flatnonzero(similarities >= cut)
    return top[numpy.lexsort((rows[top], -similarities[top]))][:k]


def recall(exact: Sequence[Sequence[str]], approximate: Sequence[Sequence[str]]) -> float:
    """Mean over queries of |approximate ∩ exact| / |exact| (recall@k of the approximate lists, k = len(exact)):
    1.0 when every exact result was found. Queries with an empty exact list are left out."""
    shares = [len(set(a) & set(e)) / len(e) for e, a in zip(exact, approximate) if e]
    return sum(shares) / len(shares) if shares else 1.0


def save(ivf: IVF, folder: Path, fingerprint: str) -> None:
    """Write the IVF of the chunks of `fingerprint` into `folder` atomically (a reader sees the old file or this)."""
    import io

    import numpy

    from localrag.files import write_atomic

    buffer = io.BytesIO()
    numpy.savez(buffer, centroids=ivf.centroids, order=ivf.order, offsets=ivf.offsets,
                meta=numpy.array([fingerprint, str(ivf.seed), str(FORMAT)]))
    write_atomic(folder / IVF_FILE, lambda handle: handle.write(buffer.getvalue()), binary=True)


class UnreadableIVF(Exception):
    """The saved IVF file is there but cannot be read (empty, truncated, damaged, not this tool's): `path` and why."""

    def __init__(self, path: Path, exc: BaseException):
        self.path, self.why = path, f"{type(exc).__name__}: {exc}"
        super().__init__(f"{path} cannot be read ({self.why})")


# What numpy.load raises on a file it cannot read: an empty file EOFError, a truncated zip BadZipFile, a damaged
# member's header NotImplementedError (an unknown compression), a foreign file ValueError, an array missing KeyError.
_UNREADABLE = (OSError, ValueError, KeyError, IndexError, EOFError, zipfile.BadZipFile, NotImplementedError)


def is_current(folder: Path, fingerprint: str, rows: int) -> bool:
    """Whether the saved IVF is of the chunks of `fingerprint`, reading only its small arrays (a no-op sync asks);
    False when there is none, UnreadableIVF when it cannot be read."""
    import numpy

    path = folder / IVF_FILE
    if not path.exists():
        return False
    try:
        with numpy.load(path, allow_pickle=False) as data:
            stored, _, layout = (str(v) for v in data["meta"])
            return stored == fingerprint and layout == str(FORMAT) and int(data["offsets"][-1]) == rows
    except _UNREADABLE as exc:
        raise UnreadableIVF(path, exc) from None


def load(folder: Path, fingerprint: str, rows: int) -> IVF | None:
    """The saved IVF when it is of the chunks of `fingerprint` (and of `rows` rows), else None (missing, stale or of
    another layout); UnreadableIVF when the file is there but cannot be read."""
    import numpy

    path = folder / IVF_FILE
    if not path.exists():
        return None
    try:
        with numpy.load(path, allow_pickle=False) as data:
            stored, seed, layout = (str(v) for v in data["meta"])
            ivf = IVF(data["centroids"], data["order"], data["offsets"], int(seed))
    except _UNREADABLE as exc:
        raise UnreadableIVF(path, exc) from None
    if stored != fingerprint or layout != str(FORMAT) or len(ivf.order) != rows or ivf.offsets[-1] != rows:
        return None
    return ivf
