"""How two ranked lists of chunk ids become one: reciprocal rank fusion and the plain union."""
from __future__ import annotations

from typing import Sequence


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


def union_ids(first: Sequence[str], second: Sequence[str]) -> list[str]:
    """`first`, then the ids of `second` not already present, each once."""
    seen: set[str] = set()
    out: list[str] = []
    for doc_id in list(first) + list(second):
        if doc_id not in seen:
            seen.add(doc_id)
            out.append(doc_id)
    return out
