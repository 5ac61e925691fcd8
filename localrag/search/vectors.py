"""Exact vector search over unit rows (`top_k_cosine`), and the guard that runs numpy's BLAS on one thread while a
search multiplies (`one_blas_thread`). Pure: it knows no index."""
from __future__ import annotations

from typing import Any, Sequence

_BLAS: list = []  # the threadpoolctl controller, made at the first search (finding the libraries takes ~0.1 s)


def one_blas_thread():
    """A context in which numpy's BLAS runs one thread. A search is one memory-bound matrix-vector product, and
    OpenBLAS's other threads kept spinning after it and slowed the next question's embedding (torch): a new chat
    question on the FinanceBench index took 30.9 ms at p50 with all threads, 17.0 ms with one."""
    if not _BLAS:
        import threadpoolctl

        _BLAS.append(threadpoolctl.ThreadpoolController())
    return _BLAS[0].limit(limits=1, user_api="blas")


def cosine_similarities(matrix: Any, vector: Sequence[float]) -> Any:
    """The cosine similarity of `vector` to each row of `matrix` (unit rows, float32)."""
    import numpy

    query = numpy.asarray(vector, dtype=numpy.float32)
    with one_blas_thread():
        return matrix @ (query / (float(numpy.linalg.norm(query)) or 1.0))


def top_k_of(similarities: Any, k: int) -> list[tuple[int, float]]:
    """(row, similarity) of the k highest `similarities`, best first; equal similarities in row order, also at the
    cut."""
    import numpy

    n = len(similarities)
    k = min(k, n)
    if k <= 0:
        return []
    cut = numpy.partition(similarities, n - k)[n - k]  # the k-th best similarity
    top = numpy.flatnonzero(similarities >= cut)  # every row tied at the cut, so the row rule decides there too
    order = top[numpy.lexsort((top, -similarities[top]))][:k]
    return [(int(i), float(similarities[i])) for i in order]


def top_k_cosine(matrix: Any, vector: Sequence[float], k: int) -> list[tuple[int, float]]:
    """(row, cosine similarity) of the k rows of `matrix` (unit rows, float32) nearest to `vector`, best first;
    equal similarities in row order, also at the cut."""
    if min(k, len(matrix)) <= 0:
        return []
    return top_k_of(cosine_similarities(matrix, vector), k)
