"""How two ranked lists of chunk ids become one (reciprocal rank fusion, the convex combination of normalised
scores, the plain union), how chunks become the
pages they stand on (`first_per_key`), and the rule that makes a final list a total order that any scorer reads
back in the same order (`strictly_decreasing`)."""
from __future__ import annotations

from typing import Callable, Hashable, Mapping, Sequence, TypeVar

T = TypeVar("T")


def rrf_fuse(rankings: Sequence[Sequence[str]], k: int) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: score(d) = sum over rankings of 1 / (k + rank(d)), ranks 1-based.

    Cormack, Clarke & Buettcher (2009), as in ranx's fusion/rrf.py. Equal scores keep the order of first
    appearance across the rankings (the first ranking is walked first), so the result is deterministic.
    """
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])  # sorted() is stable: ties keep first appearance


def minmax_normalize(scored: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Scores of one list mapped to [0, 1] by the list's own minimum and maximum; all 1.0 when they are equal.

    As ranx's norms.min_max_norm (Bruch et al. 2023 call it MM): the best candidate gets 1, the worst 0."""
    if not scored:
        return {}
    low, high = min(score for _, score in scored), max(score for _, score in scored)
    return {doc_id: (score - low) / (high - low) if high > low else 1.0 for doc_id, score in scored}


def convex_fuse(dense: Sequence[tuple[str, float]], sparse: Sequence[tuple[str, float]],
                weight: float) -> list[tuple[str, float]]:
    """Convex combination of min-max-normalised scores: weight * dense + (1 - weight) * sparse, where a chunk
    missing from a list scores 0 in it (it ranked below that list's worst candidate).

    Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 42(1), 2023: it beats
    RRF in and out of domain and its one weight is learnt from few queries. Equal scores keep the order of first
    appearance (the dense list is walked first), so the result is deterministic."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"the dense weight must be between 0 and 1, got {weight!r}")
    d, s = minmax_normalize(dense), minmax_normalize(sparse)
    order = list(dict.fromkeys([doc_id for doc_id, _ in dense] + [doc_id for doc_id, _ in sparse]))
    fused = [(doc_id, weight * d.get(doc_id, 0.0) + (1.0 - weight) * s.get(doc_id, 0.0)) for doc_id in order]
    return sorted(fused, key=lambda item: -item[1])


def with_document_prior(ranked: Sequence[tuple[T, float]], document_of: Callable[[T], str],
                        prior: Mapping[str, float], weight: float) -> list[tuple[T, float]]:
    """Each item's score plus `weight` times its document's prior (0 for a document without one), re-sorted;
    equal scores keep the order of `ranked`.

    Passage and document evidence combined (Callan, "Passage-level evidence in document retrieval", SIGIR 1994):
    on a shelf of similar long documents (one company's filings of several years) the page that matches a
    question best often stands in the wrong document; the document's own match tips the balance."""
    scored = [(item, score + weight * prior.get(document_of(item), 0.0)) for item, score in ranked]
    return sorted(scored, key=lambda pair: -pair[1])


def union_ids(first: Sequence[str], second: Sequence[str]) -> list[str]:
    """`first`, then the ids of `second` not already present, each once."""
    seen: set[str] = set()
    out: list[str] = []
    for doc_id in list(first) + list(second):
        if doc_id not in seen:
            seen.add(doc_id)
            out.append(doc_id)
    return out


def first_per_key(ranked: Sequence[tuple[T, float]], key: Callable[[T], Hashable]) -> list[tuple[T, float]]:
    """`ranked` (best first) with only the first item of each key: a page ranked by its best chunk, which stands
    for it with its score (MaxP, the maximum over a document's passages: Dai & Callan, SIGIR 2019).

    The first appearances keep their order, so an item's rank never grows: page Hit@k and MRR are never lower
    than those of the chunk list."""
    seen: set = set()
    out: list[tuple[T, float]] = []
    for item, score in ranked:
        unit = key(item)
        if unit not in seen:
            seen.add(unit)
            out.append((item, score))
    return out


def strictly_decreasing(ranked: Sequence[tuple[T, float]]) -> list[tuple[T, float]]:
    """`ranked` (best first) with each score that does not fall below the one before it, as single-precision
    floats compare, lowered to the next single-precision value below that one: scores strictly decrease.

    trec_eval (and our metrics, which follow it) order equal scores by doc id, and trec_eval keeps scores as C
    `float`: a list whose scores tie or rise there would be scored in another order than it is returned. A tie
    moves by one unit in float32's last place (6e-8 for scores near 1, 2e-9 near 1/30); the order never changes.
    """
    import numpy

    out: list[tuple[T, float]] = []
    last = None  # the previous score as float32
    for item, score in ranked:
        single = numpy.float32(score)
        if last is not None and not single < last:
            single = numpy.nextafter(last, numpy.float32(-numpy.inf))
            score = float(single)
        out.append((item, float(score)))
        last = single
    return out
