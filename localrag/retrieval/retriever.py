"""Retrieval from an index: dense (Chroma), BM25, hybrid (RRF of both) or union, then an optional cross-encoder.

The chat calls `LocalRAG.retrieve` (local_rag.py), which hands the work to `Retriever`; the evaluation calls
`retrieve_traced`, whose final list is the one `retrieve` returns (it is that call), so what the evaluation
measures is what the chat gets for the same k.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from langchain_core.documents import Document

from localrag.models import loading
from localrag.errors import RAGError
from localrag.text import identity
from localrag.retrieval import llm_rerank
from localrag.retrieval.stages import STAGE_ORDERS, stage_order  # noqa: F401 - STAGE_ORDERS: where modes order
from localrag.search.fusion import first_per_key, minmax_normalize, strictly_decreasing, with_document_prior
from localrag.text.pages import page_key  # noqa: F401 - where retrieval ranks by page
from localrag.text.query import text_problem
from localrag.settings import (FUSIONS, MODES, RANK_UNITS, RetrievalSettings,  # noqa: F401 - face
                               check_fusion, check_mode, check_rank_by, mode_of)

RETRIEVAL_MODES = tuple(MODES)  # the modes' names, for the face (local_rag.py); the code asks MODES itself


class Index(Protocol):
    """What retrieval uses of an index (index.Index): its chunks, vectors, BM25 arrays and state."""

    embeddings: Any  # the embedding model, loaded at the first access
    embedding_export: str | None
    settings: dict
    files: dict[str, dict]
    vectorstore: Any
    revision: int

    def fingerprint(self) -> str: ...
    def bm25(self) -> Any: ...
    def chunks_by_id(self, ids: Sequence[str]) -> dict[str, tuple[str, dict]]: ...
    def nearest(self, vector: Sequence[float], k: int, exact: bool = False) -> list[tuple[str, float]]: ...
    def load_vectors(self) -> None: ...
    def require_built(self) -> None: ...


@dataclass(frozen=True)
class Trace:
    """One retrieval with the lists behind it. `stages`: stage name -> its ordered (chunk, score) list, in
    pipeline order: "dense" and/or "bm25", "rrf" or "union" when the mode fuses, "rerank" when a reranker ran.
    The first `pool` entries of the dense and BM25 lists are the candidates the later stages saw."""

    final: list[tuple[Document, float]]
    stages: dict[str, list[tuple[Document, float]]]
    pool: int


def _deepened(pool: list[tuple[Document, float]], deeper: list[tuple[Document, float]],
              depth: int) -> list[tuple[Document, float]]:
    """The pool's list, then the hits of a deeper search of the same retriever that it lacks, `depth` in all."""
    seen = {doc.id for doc, _ in pool}
    return (pool + [(doc, score) for doc, score in deeper if doc.id not in seen])[:depth]


def check_request(query: object, k: object) -> None:
    """The one rule for every way in (retrieve, the LangChain retriever and tool, the chat): a query is text with
    something visible in valid Unicode (query_text.text_problem) and k a whole number of at least 1; else a
    RAGError saying which."""
    if not isinstance(query, str):
        raise RAGError(f"a query must be text, got {type(query).__name__} ({query!r:.60})")
    if problem := text_problem(query):
        raise RAGError(f"the query {query!r:.60} {problem}; ask a question or give key words")
    check_k(k)


def check_k(k: object) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise RAGError(f"k must be a whole number of at least 1 chunk, got {k!r}")






class Retriever:
    """Ordered chunks for a query from one `Index`; query vectors and reranker scores are computed once each."""

    def __init__(self, index: Index, settings: RetrievalSettings, *, rerank_batch_size: int,
                 reranker: tuple[str | None, Any, str | None] | None = None,
                 load_reranker: Callable[[], tuple[str | None, Any, str | None]] | None = None):
        """`settings`: every retrieval setting given (`RetrievalSettings.over` the defaults); `reranker`: (name,
        loaded CrossEncoder, why reranking is off): (None, None, reason) when it is off.

        `load_reranker` instead returns those three at the first use of any of them, so that a retriever that never
        reranks (lint, generate, a chat without reranking) neither loads the model nor warns that it cannot.
        """
        self.index = index
        check_mode(settings.retrieval_mode)
        self.settings = settings.check()
        self.retrieval_mode = settings.retrieval_mode
        self.candidate_k = settings.candidate_k
        self.rrf_k = settings.rrf_k
        self.fusion = settings.fusion
        self.dense_weight = float(settings.dense_weight)
        self.document_prior = float(settings.document_prior)
        self._identity_index: tuple[tuple, Any] | None = None  # ((fingerprint, revision), BM25 over identities)
        self.rank_by = settings.rank_by
        self.query_instructions = settings.query_instructions
        self._load_reranker = load_reranker
        self._reranker_state = None if load_reranker else reranker
        self.rerank_batch_size = rerank_batch_size
        self._query_vectors: dict[str, list[float]] = {}
        self._chunks: tuple[str, dict[str, tuple[str, dict]]] | None = None  # (index fingerprint, id -> chunk)
        self._rerank_scores: dict[tuple[str, str, str], float] = {}
        self.stats = {"query_embeddings": 0, "rerank_pairs": 0}

    def _reranker_part(self, index: int):
        if self._reranker_state is None:
            self._reranker_state = self._load_reranker()
        return self._reranker_state[index]

    reranker_model = property(lambda self: self._reranker_part(0), doc="the cross-encoder's name; None when off")
    reranker = property(lambda self: self._reranker_part(1), doc="the loaded cross-encoder, or None")
    reranker_off_reason = property(lambda self: self._reranker_part(2), doc="why reranking is off, or None")

    def prepare_query(self, query: str, instructions: bool = True) -> str:
        extra = self.query_instructions.strip() if instructions else ""
        return f"{query.strip()} {extra}".strip()

    def query_vector(self, query: str) -> list[float]:
        """Embedding of a query, computed once per Retriever."""
        if query not in self._query_vectors:
            self._query_vectors[query] = self.index.embeddings.embed_query(query)
            self.stats["query_embeddings"] += 1
        return self._query_vectors[query]

    def share_query_vectors(self, other: Retriever) -> bool:
        """Use (and add to) `other`'s query vectors when both indexes embed alike: same model, backend and export.
        False, sharing nothing, when they do not."""
        def embedder(index: Index) -> tuple:
            return index.settings["embedding_model"], index.settings["embedding_backend"], index.embedding_export

        if other is self or embedder(other.index) != embedder(self.index):
            return False
        self._query_vectors = other._query_vectors
        return True

    def query_vectors(self) -> dict[str, list[float]]:
        """The query vectors this retriever holds, by query as embedded (`prepare_query`); a copy."""
        return dict(self._query_vectors)

    def add_query_vectors(self, vectors: dict[str, list[float]]) -> None:
        """Take query vectors computed elsewhere (localrag/runs/query_vectors.py) for this retriever's model, backend,
        export and prefix; they are not counted as embedded."""
        self._query_vectors.update(vectors)

    def embed_queries(self, queries: Sequence[str], batch_size: int) -> None:
        """Embed many queries up front, `batch_size` per call (much faster than one by one)."""
        todo = [q for q in dict.fromkeys(queries) if q not in self._query_vectors]
        for start in range(0, len(todo), batch_size):
            batch = todo[start:start + batch_size]
            # Queries in one call, with the model's query prefix (embed_documents would give them the passage one).
            for query, vector in zip(batch, loading.embed_queries(self.index.embeddings, batch)):
                self._query_vectors[query] = vector
            self.stats["query_embeddings"] += len(batch)

    def _dense(self, query: str, k: int) -> list[tuple[str, float]]:
        """(chunk id, cosine similarity) of the k most similar chunks (`Index.nearest`: exact search, ties by id)."""
        if self.index.vectorstore is None or not self.index.files:
            return []
        return self.index.nearest(self.query_vector(query), k)

    def _bm25_hits(self, query: str, k: int) -> list[tuple[str, float]]:
        return self.index.bm25().search(query, k) if self.index.files else []

    def _documents(self, ids: Sequence[str]) -> dict[str, Document]:
        """Chunks by id: read from the store by id the first time, then from this object's copy (per index state).

        Only the chunks a retrieval returns are read: reading the whole store once took 2.2 s on the FinanceBench
        index (22,730 chunks), where the 63 dev questions' results take about a tenth of that."""
        if not ids:
            return {}
        fingerprint = self.index.fingerprint()
        if self._chunks is None or self._chunks[0] != fingerprint:
            self._chunks = (fingerprint, {})
        chunks = self._chunks[1]
        missing = [i for i in ids if i not in chunks]
        if missing:
            chunks.update(self.index.chunks_by_id(missing))
        # A fresh Document per call: callers may attach ids or scores without touching the cache.
        return {i: Document(id=i, page_content=chunks[i][0], metadata=dict(chunks[i][1])) for i in ids if i in chunks}

    def warm_up(self) -> None:
        """Load what a retrieval in this object's mode uses (see LocalRAG.warm_up)."""
        self.index.require_built()
        self.index.embeddings.embed_query("warm up")  # loads the model and runs it once
        _ = self.reranker
        mode = mode_of(self.retrieval_mode)
        if mode.bm25 and self.index.files:
            self.index.bm25()
        if mode.dense:
            self.index.load_vectors()

    def candidates(self, query: str, k: int, mode: str | None = None) -> list[tuple[Document, float]]:
        """The mode's ordered list before reranking, at least `k` long when the index allows.

        Raises a RAGError naming the path and the command that builds it when there is no index."""
        return self._candidate_stages(query, k, mode)[0]

    def _candidate_stages(self, query: str, k: int, mode: str | None) -> tuple[list[tuple[Document, float]],
                                                                               dict[str, list], int]:
        """(the mode's ordered list before reranking, stage name -> that stage's list, candidates per retriever).

        Stages in pipeline order: "dense" and/or "bm25", then the mode's ordering stage when it is no search ("rrf"
        or "convex" for hybrid, by `fusion`; "union"), then "prior" when the document prior is on and the question
        matches a document.
        """
        found, stages, depth = self._fused_stages(query, k, mode)
        if self.document_prior > 0:
            prior = self.prior_of(query)
            if prior:
                base = found
                if stages.get("convex") is not found:  # convex fusion's scores lie on [0, 1]; others are scaled
                    scaled = minmax_normalize([(doc.id, score) for doc, score in found])
                    base = [(doc, scaled[doc.id]) for doc, _ in found]
                found = stages["prior"] = with_document_prior(base, lambda doc: doc.metadata["source"], prior,
                                                              self.document_prior)
        return found, stages, depth

    def prior_of(self, query: str) -> dict[str, float]:
        """Each indexed file's document prior for `query` (context.document_prior over the identity lines the
        manifest records); empty when the index records none (a dataset index, an empty one)."""
        # The chunks' fingerprint leaves identities out (a sync may fill them in); the manifest's revision does not.
        key = (self.index.fingerprint(), self.index.revision)
        if self._identity_index is None or self._identity_index[0] != key:
            identities = {name: entry["identity"] for name, entry in self.index.files.items()
                          if entry.get("identity")}
            self._identity_index = (key, identity.identity_index(identities) if identities else None)
        return identity.document_prior(self._identity_index[1], query) if self._identity_index[1] else {}

    def _fused_stages(self, query: str, k: int, mode: str | None) -> tuple[list[tuple[Document, float]],
                                                                            dict[str, list], int]:
        mode_name = mode or self.retrieval_mode
        spec = mode_of(mode_name)
        self.index.require_built()
        depth = self.candidate_depth(k)
        dense_hits = self._dense(query, depth) if spec.dense else []
        bm25_hits = self._bm25_hits(query, depth) if spec.bm25 else []
        by_id = self._documents([i for i, _ in dense_hits] + [i for i, _ in bm25_hits])  # one read of the store
        stages = {search: [(by_id[i], score) for i, score in hits if i in by_id]
                  for search, hits, used in (("dense", dense_hits, spec.dense), ("bm25", bm25_hits, spec.bm25)) if used}
        stage = spec.stage(self.settings)
        if stage not in stages:  # an order of its own over the searches' lists, as the stages show them
            dense, bm25 = ([(doc.id, score) for doc, score in stages.get(search, [])] for search in ("dense", "bm25"))
            ordered = stage_order(mode_name, stage)(dense, bm25, self.settings)
            stages[stage] = [(by_id[i], score) for i, score in ordered if i in by_id]
        return stages[stage], stages, depth

    def rerank(self, query: str, candidates: Sequence[tuple[Document, float]]) -> list[tuple[Document, float]]:
        """Order candidates by cross-encoder score; each (model, query, chunk) pair is scored once per object."""
        keys = [(self.reranker_model, query, hashlib.sha256(d.page_content.encode("utf-8")).hexdigest())
                for d, _ in candidates]
        todo = [(key, doc) for key, (doc, _) in zip(keys, candidates) if key not in self._rerank_scores]
        todo = list({key: doc for key, doc in todo}.items())
        if todo:
            scores = self.reranker.predict([(query, doc.page_content) for _, doc in todo],
                                           batch_size=self.rerank_batch_size, show_progress_bar=False)
            for (key, _), score in zip(todo, scores):
                self._rerank_scores[key] = float(score)
            self.stats["rerank_pairs"] += len(todo)
        scored = [(doc, self._rerank_scores[key]) for key, (doc, _) in zip(keys, candidates)]
        return sorted(scored, key=lambda pair: -pair[1])  # stable: equal scores keep the candidate order

    def retrieve(self, query: str, k: int, mode: str | None = None,
                 rerank: bool | None = None) -> list[tuple[Document, float]]:
        """The k best chunks for a query, best first, with the score of the stage that ordered them last; with
        `rank_by` "page" each page once, by its best chunk.

        Scores strictly decrease with rank (`strictly_decreasing`): equal scores keep the stage's order and
        are lowered by a unit in the last place, so a run file built from the list is scored in this order.

        `mode` and `rerank` override this object's settings for one call (ablations share one loaded model).
        It is `retrieve_traced(...).final`: the evaluation traces the very code path the chat runs.
        """
        return self.retrieve_traced(query, k, mode, rerank).final

    def candidate_depth(self, k: int) -> int:
        """How many chunks each retriever (dense, BM25) contributes to a retrieval of k: `candidate_k`, or k when
        larger. Fusion and the reranker see these lists, so the same query asked for another k may be ordered
        differently; a report states this figure for the k it asks."""
        return max(k, self.candidate_k)

    def retrieve_traced(self, query: str, k: int, mode: str | None = None, rerank: bool | None = None,
                        depth: int = 0) -> Trace:
        """`retrieve`'s list (its `final`: `retrieve` is this call) together with every stage's list.

        `depth` deepens the dense and BM25 lists for diagnosis only: they keep the candidates fusion and the
        reranker saw, followed by the further hits of a second search `depth` deep, so a gold chunk just
        outside the pool shows. (The second search never replaces the pool: the stage lists stay the ones
        fusion and the reranker saw.)
        """
        check_request(query, k)
        query = self.prepare_query(query)
        use_rerank = self.reranker is not None if rerank is None else rerank
        if use_rerank and self.reranker is None:
            raise RAGError(f"reranking was requested but is off ({self.reranker_off_reason})")
        found, stages, pool = self._candidate_stages(query, k, mode)
        if use_rerank:
            found = stages["rerank"] = self.rerank(query, found)
        if depth > pool:
            deeper = {name: self._dense(query, depth) if name == "dense" else self._bm25_hits(query, depth)
                      for name in ("dense", "bm25") if name in stages}
            docs = self._documents([i for hits in deeper.values() for i, _ in hits])
            for name, hits in deeper.items():
                stages[name] = _deepened(stages[name], [(docs[i], s) for i, s in hits if i in docs], depth)
        return Trace(strictly_decreasing(self._units(found)[:k]), stages, pool)

    def _units(self, found: list[tuple[Document, float]]) -> list[tuple[Document, float]]:
        """The final order as `rank_by` counts it: each page once, by its best chunk, or every chunk.

        The pool stays `candidate_depth(k)` chunks per retriever, so a page list can hold fewer than k entries."""
        return first_per_key(found, page_key) if self.rank_by == "page" else found

    def describe_order(self, mode: str | None = None, rerank: bool | None = None) -> str:
        """Which stage ordered the final list (and so what the returned score is)."""
        mode = mode or self.retrieval_mode
        if (self.reranker is not None if rerank is None else rerank):
            if llm_rerank.is_llm_reranker(self.reranker_model):
                return f"LLM grades 0-10 ({self.reranker_model}) over {mode} candidates"
            return f"cross-encoder {self.reranker_model} over {mode} candidates"
        if self.document_prior > 0:
            # Convex fusion's scores lie on [0, 1] already (as in _candidate_stages); the others are scaled.
            scaled = "" if mode_of(mode).stage(self.settings) == "convex" else ", scaled to [0, 1]"
            return f"{mode_of(mode).describe(self.settings)}{scaled}, plus {self.document_prior:g} x document prior"
        return mode_of(mode).describe(self.settings)
