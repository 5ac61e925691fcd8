"""The ordering stages of the retrieval modes that are no search (a mode's `stage` in settings.MODES): how each makes
its list from the dense and BM25 lists, and its words in the details file.

A new mode that orders in a new way is one entry here (its ordering function) and one in settings.MODES.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from localrag.errors import RAGError
from localrag.search.fusion import convex_fuse, rrf_fuse, union_ids
from localrag.settings import RetrievalSettings

Hits = Sequence[tuple[str, float]]  # (chunk id, score), best first


def convex_order(dense: Hits, bm25: Hits, settings: RetrievalSettings) -> list[tuple[str, float]]:
    """Convex fusion of the two lists' min-max-normalised scores, `settings.dense_weight` on dense's."""
    return convex_fuse(list(dense), list(bm25), float(settings.dense_weight))


def rrf_order(dense: Hits, bm25: Hits, settings: RetrievalSettings) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of the two rankings, constant `settings.rrf_k`."""
    return rrf_fuse([[i for i, _ in dense], [i for i, _ in bm25]], k=settings.rrf_k)


def union_order(dense: Hits, bm25: Hits, settings: RetrievalSettings) -> list[tuple[str, float]]:
    """Dense's hits, then BM25's new ones. The concatenation is the ordering stage, so its score is 1 / position:
    dense and BM25 scores live on different scales and, mixed, would disagree with the order."""
    return [(i, 1.0 / position) for position, i in enumerate(union_ids([i for i, _ in dense], [i for i, _ in bm25]),
                                                              start=1)]


@dataclass(frozen=True)
class OrderingStage:
    """An ordering stage that is no search (a mode's `stage` in settings.MODES): `order` makes its list from the
    searches' (id, score) lists of found chunks and the retrieval settings; `label` names it in stage ranks
    ("RRF 7"), `words` say that it ordered a question's candidates ("fusion (RRF)")."""

    order: Callable[[Hits, Hits, RetrievalSettings], list[tuple[str, float]]]
    label: str
    words: str


STAGE_ORDERS: dict[str, OrderingStage] = {
    "rrf": OrderingStage(rrf_order, "RRF", "fusion (RRF)"),
    "convex": OrderingStage(convex_order, "convex fusion", "fusion (convex)"),
    "union": OrderingStage(union_order, "union", "the union order (dense first, then new BM25 hits)"),
}


def stage_order(mode: str, stage: str) -> Callable[[Hits, Hits, RetrievalSettings], list[tuple[str, float]]]:
    """The ordering function of `stage`, or a RAGError saying that the mode orders by a stage none computes."""
    if stage not in STAGE_ORDERS:
        raise RAGError(f"retrieval mode {mode!r} orders by the stage {stage!r}, which no ordering function "
                       f"computes; add one to STAGE_ORDERS in localrag/retrieval/stages.py, or use one of "
                       f"{', '.join(STAGE_ORDERS)}")
    return STAGE_ORDERS[stage].order
