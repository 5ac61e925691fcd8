"""Score retrieval and compare runs: goldsets by file and page, BEIR datasets at document level.

Retrieval goes through the retriever handed in (the `LocalRAG` of local_rag.py, the one the chat uses); scoring
turns what it retrieved into an `EvalResult`, which keeps no retrieved chunk. Comparisons, gates and the status
of a run work on results directly.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable, Mapping, Protocol, Sequence

from localrag.goldset import format as gs
from localrag.evaluation import metrics as rm
from localrag.evaluation import diagnosis, stats
from localrag.errors import EvalError
from localrag.retrieval.stages import STAGE_ORDERS
from localrag.settings import mode_of
from localrag.search.fusion import first_per_key, strictly_decreasing
from localrag.evaluation.report import NEIGHBOUR_GAIN, ci_label, fmt_p, metric_label, plural
from localrag.evaluation.result import (EXIT_FAILED, EXIT_OK, Comparison, CorpusResult, EvalResult, ExactRank,
                                        MetricComparison, NotFound, Passage, QuestionResult, RankMove, StageRanks,
                                        Status)
from localrag.progress import progress_iter
from localrag.text.pages import page_key

TOP_IN_JSON = 5  # retrieved (source, page) pairs kept per question in the JSON output
DATASET_OVERFETCH = 1.5  # a dataset run asks retrieve for depth x chunks per document x this (dataset_k)
COMPARE_SEED = 0  # seed of the comparison statistics

Hit = tuple[Any, float]  # a retrieved chunk (metadata "source", "page", for datasets "doc_id") and its score


class Retriever(Protocol):
    """What the evaluation uses of a retriever (`LocalRAG` in local_rag.py)."""

    info: dict
    rank_by: str  # "page" or "chunk": what the final list holds once each

    def prepare_query(self, query: str) -> str: ...

    def embed_queries(self, queries: Sequence[str]) -> None: ...

    def retrieve(self, query: str, k: int, mode: str, rerank: bool) -> list[Hit]: ...

    def retrieve_traced(self, query: str, k: int, mode: str, rerank: bool, depth: int) -> Any: ...


@dataclass(frozen=True)
class Traced:
    """What a question's retrieval trace leaves once matched: its stage ranks and the first acceptable chunk
    any stage's list held, as (stage, rank, (chunk, score)), or None."""

    stages: StageRanks
    gold: tuple[str, int, Hit] | None
    dense_order: bool = False  # the final list is the first entries of the dense candidates, in their order


@dataclass(frozen=True)
class Scoring:
    """How a goldset run is scored: its cutoffs, when a retrieved page counts for an expected one, and how far the
    diagnosis of a question looks."""

    ks: tuple[int, ...]  # the Hit@k cutoffs; the deepest is how many chunks are retrieved per question
    page_offset: int  # a 0-based stored page + page_offset = the page a goldset names
    tolerance: int  # pages either side of an expected page that still count as found
    diagnostic_depth: int = 0  # how deep the dense and BM25 lists are searched for the expected location
    stage_k: int = 0  # passages of each stage kept for a question not at rank 1 (the details file)


# The stage whose chunk the details file shows as the expected passage: the final list first, then the latest
# stage that held it (a mode's ordering stage: STAGE_ORDERS); between the dense and BM25 lists the one that ranked
# it higher.
GOLD_STAGE_ORDER = ("final", "rerank", "prior")


def config_name(mode: str, rerank: bool) -> str:
    """A configuration's name in reports and tables: 'hybrid', 'dense + rerank'."""
    return f"{mode}{' + rerank' if rerank else ''}"


def metric_keys(kind: str, ks: Sequence[int]) -> list[str]:
    """The metric keys of a report ("goldset" or "dataset" kind) for cutoffs ks, in report order."""
    if kind == "dataset":
        return [k for k in rm.metric_keys(ks) if not k.startswith("precision")]  # P@k adds little for retrieval
    return [f"hit@{k}" for k in sorted({1, *ks})] + [f"ndcg@{k}" for k in ks] + ["mrr"]


def tested_keys(kind: str, ks: Sequence[int]) -> list[str]:
    """The metrics a comparison of two reports tests (one Holm family): a goldset's Hit@k at the cutoffs asked for
    and MRR; Hit@1 (unless asked for) and NDCG@k are shown beside them, not tested, so that they do not make every
    other verdict stricter. A dataset's every metric."""
    if kind == "dataset":
        return metric_keys(kind, ks)
    return [f"hit@{k}" for k in ks] + ["mrr"]


def progress_bar(items: Sequence, show: bool, desc: str) -> Iterable:
    """`items` counted on stderr (localrag.progress: a bar on a terminal, plain lines elsewhere)."""
    return progress_iter(items, desc, len(items), "q", show=show)


# ----------------------------------------------------------------------------- goldsets

def goldset_metrics(ranks: Mapping[str, int | None], gains: Mapping[str, Sequence[Sequence[float]]],
                    ks: Sequence[int]) -> tuple[dict, dict, dict]:
    """(means, counts, per-query values) of Hit@k (and Hit@1) and MRR from first-match ranks (None = not found),
    and NDCG@k from each question's gains by location and rank (location_gains)."""
    hit_ks = sorted({1, *ks})
    per_query = {qid: {**{f"hit@{k}": rm.hit_at_k_from_rank(r, k) for k in hit_ks},
                       **{f"ndcg@{k}": rm.ndcg_matched(gains[qid], k) for k in ks},
                       "mrr": rm.reciprocal_rank_from_rank(r)} for qid, r in ranks.items()}
    keys = metric_keys("goldset", ks)
    means = {key: math.fsum(v[key] for v in per_query.values()) / len(per_query) for key in keys}
    counts = {f"hit@{k}": sum(1 for r in ranks.values() if r is not None and r <= k) for k in hit_ks}
    return means, counts, per_query


def location_gains(retrieved: Sequence[tuple[str, int]], locations: Sequence[gs.Location], page_offset: int,
                   tolerance: int) -> list[list[float]]:
    """Each usable expected location's NDCG gain at each rank of the retrieved (file, 0-based page) list: 1 on the
    location itself (a page of it, any page of a whole-file location), NEIGHBOUR_GAIN on a page only within
    `tolerance` of it, else 0 (metrics.ndcg_matched credits each location once)."""
    def gain(source: str, page: int, loc: gs.Location) -> float:
        if gs.location_matches(source, [page], loc, page_offset=page_offset, tolerance=0):
            return 1.0
        near = tolerance and gs.location_matches(source, [page], loc, page_offset=page_offset, tolerance=tolerance)
        return NEIGHBOUR_GAIN if near else 0.0

    return [[gain(source, page, loc) for source, page in retrieved] for loc in locations if not loc.problem]


def retrieve_goldset(rag: Retriever, questions: Sequence[gs.GoldQuestion], scoring: Scoring, mode: str, rerank: bool,
                     progress: bool) -> tuple[dict[str, list[Hit]], dict[str, Traced]]:
    """(query_id -> the first max(`scoring.ks`) chunks retrieved for the question, best first; query_id -> where
    its expected location ranked at every stage, the dense and BM25 lists searched `scoring.diagnostic_depth`
    deep)."""
    if mode_of(mode).dense:  # only a dense search needs query vectors: without one no model is loaded
        rag.embed_queries([rag.prepare_query(q.question) for q in questions])
    hits, traced = {}, {}
    # One Document per chunk, kept for the whole run: each retrieval makes its own copies, and 20,000 questions of
    # 20 passages held 400,000 of them (15 KB a question, 300 MB) where the shelf has a few thousand chunks.
    chunks: dict[str, Any] = {}
    for q in progress_bar(questions, progress, f"Questions ({mode}{', rerank' if rerank else ''})"):
        trace = rag.retrieve_traced(q.question, k=max(scoring.ks), mode=mode, rerank=rerank,
                                    depth=scoring.diagnostic_depth)
        hits[q.query_id] = [shared_hit(hit, chunks) for hit in trace.final]
        found = trace_goldset(trace, q.locations, scoring.page_offset, scoring.tolerance, rag.rank_by)
        gold = found.gold and (found.gold[0], found.gold[1], shared_hit(found.gold[2], chunks))
        traced[q.query_id] = dataclasses.replace(found, gold=gold)
    return hits, traced


def shared_hit(hit: Hit, chunks: dict[str, Any]) -> Hit:
    """The hit with the first Document of its chunk id that `chunks` (id -> Document) saw, which it records."""
    doc, score = hit
    return (doc if doc.id is None else chunks.setdefault(doc.id, doc)), score


def stage_lists(trace: Any) -> dict[str, list[Hit]]:
    """A trace's lists in pipeline order, the final list last."""
    return {**trace.stages, "final": trace.final}


def ranked_units(hits: Sequence[Hit], rank_by: str) -> list[Hit]:
    """A list of chunks in the unit the run ranks: each page once, by its best chunk, when ranking by page (as
    the final list is: Retriever._units), else every chunk."""
    return first_per_key(hits, page_key) if rank_by == "page" else list(hits)


def unit_lists(trace: Any, rank_by: str) -> dict[str, list[Hit]]:
    """A trace's lists (stage_lists) in the unit the run ranks, so that a stage's rank counts what the final
    rank counts."""
    return {name: ranked_units(hits, rank_by) for name, hits in stage_lists(trace).items()}


def trace_goldset(trace: Any, locations: Sequence[gs.Location], page_offset: int, tolerance: int,
                  rank_by: str) -> Traced:
    """Where the first acceptable location (file and page, within the tolerance) ranked in each list of a trace,
    every list counted in the run's unit (pages when ranking by page, else chunks); the pools are the pages (or
    chunks) of each retriever's candidates."""
    lists = unit_lists(trace, rank_by)
    ranks = {name: gs.first_match_rank([(d.metadata["source"], [int(d.metadata["page"])]) for d, _ in hits],
                                       locations, page_offset=page_offset, tolerance=tolerance)
             for name, hits in lists.items()}
    # A page is among the candidates when its best chunk is: the first pools[name] pages of the collapsed list.
    pools = {name: len(ranked_units(trace.stages[name][:trace.pool], rank_by)) for name in diagnosis.RETRIEVERS
             if name in lists}
    return Traced(StageRanks(ranks, {name: len(hits) for name, hits in lists.items()}, pools, trace.pool, rank_by),
                  gold_hit(lists, ranks), dense_order(trace, rank_by))


def dense_order(trace: Any, rank_by: str) -> bool:
    """Whether a trace's final list is the first entries of its dense candidates (in the run's unit), in their
    order: a union list without a reranker is, whenever dense's candidates fill it, since union appends BM25's
    new hits after them; its metrics are then dense's."""
    if "dense" not in trace.stages:
        return False
    dense = ranked_units(trace.stages["dense"][:trace.pool], rank_by)
    return [doc.id for doc, _ in trace.final] == [doc.id for doc, _ in dense[:len(trace.final)]]


def gold_hit(lists: Mapping[str, Sequence[Hit]], ranks: Mapping[str, int | None]) -> tuple[str, int, Hit] | None:
    """(stage, rank, hit) of the expected chunk as the details file shows it (see GOLD_STAGE_ORDER)."""
    retrievers = sorted((name for name in diagnosis.RETRIEVERS if ranks.get(name) is not None),
                        key=lambda name: ranks[name])
    for name in (*GOLD_STAGE_ORDER, *STAGE_ORDERS, *retrievers):
        if ranks.get(name) is not None:
            return name, ranks[name], lists[name][ranks[name] - 1]
    return None


def passage(hit: Hit, rank: int, question: str, page_offset: int, stage: str = "final") -> Passage:
    """A retrieved chunk as the details file shows it, with an excerpt around the question's words."""
    doc, score = hit
    page = doc.metadata.get("page")
    return Passage(rank, doc.metadata.get("doc_id", doc.metadata["source"]),
                   None if page is None or "doc_id" in doc.metadata else int(page) + page_offset,
                   round(float(score), 6), diagnosis.excerpt(doc.page_content, question), stage)


def evaluate_goldset(questions: Sequence[gs.GoldQuestion], hits: Mapping[str, Sequence[Hit]],
                     indexed: Mapping[str, dict], scoring: Scoring, *, name: str, title: str,
                     traced: Mapping[str, Traced] | None = None) -> EvalResult:
    """Score every question's hits by file and page; `indexed` (file -> list_documents entry) explains misses.

    With `traced` (from retrieve_goldset) every question carries its stage ranks, and each one not at rank 1
    its first `scoring.stage_k` passages and expected passage for the details file."""
    ks, page_offset, tolerance, stage_k = scoring.ks, scoring.page_offset, scoring.tolerance, scoring.stage_k
    retrieved = {qid: [(d.metadata["source"], int(d.metadata["page"])) for d, _ in chunks]
                 for qid, chunks in hits.items()}
    ranks = {q.query_id: gs.first_match_rank([(src, [page]) for src, page in retrieved[q.query_id]], q.locations,
                                             page_offset=page_offset, tolerance=tolerance) for q in questions}
    exact = {q.query_id: exact_rank(retrieved[q.query_id], q.locations, ranks[q.query_id], page_offset)
             for q in questions}
    gains = {q.query_id: location_gains(retrieved[q.query_id], q.locations, page_offset, tolerance)
             for q in questions}
    gains_exact = {q.query_id: location_gains(retrieved[q.query_id], q.locations, page_offset, 0) for q in questions}
    exact_ranks = {qid: e.rank for qid, e in exact.items()}
    means, counts, per_query_values = goldset_metrics(ranks, gains, ks)
    means_exact, counts_exact, _ = goldset_metrics(exact_ranks, gains_exact, ks)
    per_query = tuple(
        diagnosed(QuestionResult(q.query_id, q.question, ranks[q.query_id], per_query_values[q.query_id],
                                 q.corpus or "", tuple(location_json(loc) for loc in q.locations),
                                 tuple({"source": d.metadata["source"], "page": int(d.metadata["page"]) + page_offset,
                                        "score": round(float(score), 6)}
                                       for d, score in hits[q.query_id][:TOP_IN_JSON]), exact=exact[q.query_id]),
                  hits[q.query_id], (traced or {}).get(q.query_id), stage_k, page_offset)
        for q in questions)
    per_corpus = {}
    corpora = sorted({q.corpus for q in questions if q.corpus})
    if len(corpora) > 1:
        for corpus in corpora:
            ids = [q.query_id for q in questions if q.corpus == corpus]
            c_means, c_counts, _ = goldset_metrics({qid: ranks[qid] for qid in ids}, gains, ks)
            e_means, e_counts, _ = goldset_metrics({qid: exact_ranks[qid] for qid in ids}, gains_exact, ks)
            per_corpus[corpus] = CorpusResult(len(ids), c_means, c_counts, e_means, e_counts)
    not_found = tuple(
        NotFound(q.question, tuple(location_json(loc) for loc in q.locations),
                 tuple(not_found_hints(q, retrieved[q.query_id], indexed, page_offset, tolerance)))
        for q in sorted(questions, key=lambda q: q.question) if ranks[q.query_id] is None)
    return EvalResult("goldset", title, means, len(questions), per_query, name=name, depth=max(ks), counts=counts,
                      per_corpus=per_corpus, not_found=not_found, stage_k=stage_k if traced else 0,
                      page_tolerance=tolerance, metrics_exact=means_exact, counts_exact=counts_exact,
                      tested=tuple(tested_keys("goldset", ks)))


def exact_rank(retrieved: Sequence[tuple[str, int]], locations: Sequence[gs.Location], rank: int | None,
               page_offset: int) -> ExactRank:
    """A question's rank on an expected page itself (tolerance 0) in its retrieved (file, 0-based page) list, beside
    `rank`, its rank at the run's tolerance; when the two differ (only the tolerance made `rank`), the
    neighbouring page at `rank` and the exact page at the exact rank."""
    exact = gs.first_match_rank([(src, [page]) for src, page in retrieved], locations, page_offset=page_offset,
                                tolerance=0)
    if exact == rank or rank is None:  # the tolerance only widens what counts: no rank without a tolerant one
        return ExactRank(exact)

    def where(at: int) -> dict[str, Any]:
        source, page = retrieved[at - 1]
        return {"source": source, "page": page + page_offset}

    return ExactRank(exact, where(rank), None if exact is None else where(exact))


# ----------------------------------------------------------------------------- a goldset run as TREC run and qrels

def trec_doc_id(source: str, page: int | None = None, chunk: int | None = None) -> str:
    """A file, page (1-based) or chunk as a goldset's TREC run and qrels name it: 'a.pdf', 'a.pdf#p15',
    'a.pdf#p15#c2' (chunk 2 of that page, counted from 0 as the index cuts them). Whitespace, '%' and '#' in the
    file name are written %XX (their UTF-8 bytes), so an id is one token and its page part is unambiguous."""
    name = re.sub(r"[\s%#]", lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), source)
    return name + ("" if page is None else f"#p{page}") + ("" if chunk is None else f"#c{chunk}")


def hit_doc_id(doc: Any, page_offset: int, rank_by: str) -> str:
    """The TREC id of a retrieved entry: its page when the run ranks by page, else its chunk."""
    page = int(doc.metadata["page"]) + page_offset
    return trec_doc_id(doc.metadata["source"], page, int(doc.metadata["chunk"]) if rank_by == "chunk" else None)


def page_units(indexed: Mapping[str, Mapping[str, Any]], page_offset: int) -> list[tuple[str, int, str]]:
    """(file, 0-based page, TREC id) of every page of every indexed file (list_documents entries by file)."""
    return [(source, page, trec_doc_id(source, page + page_offset))
            for source, entry in indexed.items() for page in range(entry["pages"])]


def chunk_units(chunks: Iterable[tuple[str, str, Mapping[str, Any]]], page_offset: int) -> list[tuple[str, int, str]]:
    """(file, 0-based page, TREC id) of every indexed chunk ((id, text, metadata) as Index.indexed_chunks gives)."""
    return [(meta["source"], int(meta["page"]),
             trec_doc_id(meta["source"], int(meta["page"]) + page_offset, int(meta["chunk"])))
            for _, _, meta in chunks]


def goldset_run(hits: Mapping[str, Sequence[Hit]], page_offset: int, rank_by: str) -> dict[str, dict[str, float]]:
    """The lists a goldset run scored as a TREC run ({query id: {TREC id: score}}): each entry with its score in
    the final list. Those scores strictly decrease (Retriever.retrieve), which strictly_decreasing keeps as they
    are; a tie would be lowered, never reordered, so trec_eval reads every list in the order it was scored."""
    run = {}
    for query_id, entries in hits.items():
        docs: dict[str, float] = {}
        for doc, score in strictly_decreasing(list(entries)):
            doc_id = hit_doc_id(doc, page_offset, rank_by)
            if doc_id in docs:
                raise EvalError(f"the list of question {query_id} holds {doc_id} twice, so no TREC run can hold it "
                                f"in its order; rank by page or by chunk (--rank-by), which hold each once")
            docs[doc_id] = score
        run[query_id] = docs
    return run


def goldset_qrels(questions: Sequence[gs.GoldQuestion], units: Sequence[tuple[str, int, str]], page_offset: int,
                  tolerance: int) -> dict[str, dict[str, int]]:
    """Every acceptable entry of each question as TREC qrels (grade 1): the indexed `units` (file, 0-based page,
    TREC id: page_units or chunk_units) that goldset.location_matches accepts, so a page range, a neighbouring page
    within the tolerance and a whole file (empty page) count as the report counts them, clipped to the file's
    pages. A location no unit matches (its file is not indexed; ranking by chunk, a page without text) is written
    as its pages (or its file) by name, which no retrieved entry carries: its question scores 0 in trec_eval, as in
    the report, instead of being left out of the means."""
    by_file: dict[str, list[tuple[str, int, str]]] = {}
    for unit in units:
        by_file.setdefault(gs.normalize_source(unit[0]), []).append(unit)
    qrels = {}
    for q in questions:
        judged: dict[str, int] = {}
        for loc in q.locations:
            matched = [doc_id for source, page, doc_id in by_file.get(gs.normalize_source(loc.source), ())
                       if gs.location_matches(source, [page], loc, page_offset=page_offset, tolerance=tolerance)]
            judged.update(dict.fromkeys(matched or unmatched_ids(loc, page_offset, tolerance), 1))
        qrels[q.query_id] = judged
    return qrels


def unmatched_ids(loc: gs.Location, page_offset: int, tolerance: int) -> list[str]:
    """The TREC ids of a location no indexed unit matches: its pages within the tolerance, or its file."""
    if loc.page is None:
        return [trec_doc_id(loc.source)]
    return [trec_doc_id(loc.source, page) for page in range(max(page_offset, loc.page - tolerance),
                                                            loc.end_page + tolerance + 1)]


def diagnosed(q: QuestionResult, hits: Sequence[Hit], traced: Traced | None, k: int, page_offset: int,
              always: bool = False) -> QuestionResult:
    """The question with its stage ranks, and, when it is not at rank 1 (or `always`), its first k passages and
    the expected passage (which its stage ranks place)."""
    if traced is None:
        return q
    if not (always or diagnosis.needs_details(q)):
        return dataclasses.replace(q, stages=traced.stages)
    gold = None
    if traced.gold is not None:
        stage, rank, hit = traced.gold
        gold = passage(hit, rank, q.question, page_offset, stage)
    return dataclasses.replace(q, stages=traced.stages, gold=gold,
                               passages=tuple(passage(hit, rank, q.question, page_offset)
                                              for rank, hit in enumerate(hits[:k], start=1)))


def not_found_hints(question: gs.GoldQuestion, retrieved: Sequence[tuple[str, int]], indexed: dict[str, dict],
                    page_offset: int, tolerance: int) -> list[str]:
    """Why a question may have been missed: a goldset lint error on its location (named in the notes, pointed to
    here), its file retrieved on other pages, or its file not retrieved at all."""
    from localrag.goldset import lint as goldset_lint

    hints = []
    files = goldset_lint.IndexedFiles({name: goldset_lint.DocInfo(entry["pages"], frozenset(entry["empty_pages"]))
                                       for name, entry in indexed.items()}, page_offset=page_offset)
    for loc in question.locations:
        if files.diagnose(loc) is not None:  # goldset lint runs before every evaluation and states it in the notes
            hints.append(f"{loc.source}: see the goldset lint error for {goldset_lint.where_text(question.lines)} "
                         f"in Notes")
            continue
        name = files.name_of(loc.source)
        seen = [(rank, page) for rank, (src, page) in enumerate(retrieved, 1) if gs.same_file(src, name)]
        if seen and loc.page is not None:
            shown = ", ".join(f"p. {page + page_offset} at rank {rank}" for rank, page in seen[:3])
            hints.append(f"{name} was retrieved ({shown}) but not within ±{tolerance} of page {loc.page_text()}: "
                         f"is the expected page right?")
        elif not seen:
            hints.append(f"{name} is indexed but none of its chunks came within the first {len(retrieved)}: the "
                         f"question may use other words than the page")
    return hints


# ----------------------------------------------------------------------------- configuration block

def union_note(k: int, rank_by: str, candidate_k: int) -> str:
    """What a union row without a reranker whose every list was dense's first entries (dense_order) is."""
    return (f"ranks as dense here: without a reranker each question's first {k} {rank_by}s were dense's, as union "
            f"appends BM25's new hits after dense's {candidate_k} candidates (union is the candidate pool a reranker "
            f"reorders)")


def with_union_note(config: Sequence[tuple[str, str]], k: int, rank_by: str,
                    candidate_k: int) -> list[tuple[str, str]]:
    """The configuration block with union_note after its retrieval mode."""
    return [(label, f"{value}; {union_note(k, rank_by, candidate_k)}" if label == "Retrieval mode" else value)
            for label, value in config]


def location_json(loc: gs.Location) -> dict[str, Any]:
    """A goldset location in the JSON report: source and page, plus last_page for a range."""
    return {"source": loc.source, "page": loc.page, **({"last_page": loc.last_page} if loc.last_page else {})}


def missing_files(questions: Sequence[gs.GoldQuestion], indexed: Iterable[str]) -> list[str]:
    """Expected files (as the goldset writes them) that are not in the index, sorted."""
    by_name = gs.files_by_name(indexed)
    return sorted({loc.source for q in questions for loc in q.locations if not gs.matching_files(loc.source, by_name)})


# ----------------------------------------------------------------------------- datasets

def dataset_queries(dataset) -> list:
    """The queries of a BEIR dataset that have qrels, by query id."""
    return [dataset.queries[qid] for qid in sorted(dataset.qrels) if qid in dataset.queries]


def dataset_k(counts: Mapping[str, int], depth: int) -> int:
    """The k every query of a dataset run asks `retrieve` for: `depth` x the index's chunks per document x
    DATASET_OVERFETCH, rounded up; at least `depth`.

    A document of several chunks fills several places of each retriever's candidate list (and of a final list
    ranked by chunk), so k = depth would leave fewer than `depth` documents for many queries; one k for every
    query keeps the candidate depth (`candidate_depth(k)`) one figure per run, stated in the report."""
    # Exact arithmetic: 10 x 64/24 x 1.5 is 40, not the 40.000000000000004 floats make of it (then 41).
    wanted = Fraction(depth * counts.get("chunks", 0), max(1, counts.get("files", 0))) * Fraction(DATASET_OVERFETCH)
    return max(depth, math.ceil(wanted))


def retrieve_dataset(rag: Retriever, dataset, depth: int, k: int, mode: str, rerank: bool, progress: bool, *,
                     diagnostic_depth: int = 0) -> tuple[dict[str, dict[str, float]], dict[str, StageRanks]]:
    """(the run: query_id -> {doc_id: score} of the first `depth` documents of `retrieve(query, k)`;
    query_id -> where its first relevant document ranked at every stage, by document)."""
    queries = dataset_queries(dataset)
    if mode_of(mode).dense:  # only a dense search needs query vectors: without one no model is loaded
        rag.embed_queries([rag.prepare_query(q.question) for q in queries])
    run, stages = {}, {}
    for q in progress_bar(queries, progress, f"Queries ({mode}{', rerank' if rerank else ''})"):
        run[q.query_id], trace = retrieve_documents(rag, q.question, depth, k, mode, rerank, diagnostic_depth)
        stages[q.query_id] = document_stage_ranks(trace, dataset.qrels[q.query_id], depth)
    return run, stages


def retrieve_documents(rag: Retriever, question: str, depth: int, k: int, mode: str, rerank: bool,
                       diagnostic_depth: int = 0) -> tuple[dict[str, float], Any]:
    """(the first `depth` distinct documents of `retrieve(question, k)`, the trace that holds that list as its
    final one). Fewer than `depth` when the list holds fewer documents: the query is scored on what came back."""
    trace = rag.retrieve_traced(question, k=k, mode=mode, rerank=rerank, depth=diagnostic_depth)
    return collapse_to_documents(trace.final, depth), trace


def short_lists_note(run: Mapping[str, Mapping[str, float]], depth: int, k: int) -> list[str]:
    """The report's note on the queries whose list held fewer than `depth` documents (none: no note)."""
    short = sum(1 for docs in run.values() if len(docs) < depth)
    if not short:
        return []
    return [f"{short} of {len(run)} {'query' if len(run) == 1 else 'queries'} got fewer than {depth} documents: "
            f"the candidate lists of retrieve(query, k={k}) held no more; they are scored on the documents that "
            f"came back"]


def document_order(hits: Sequence[Hit]) -> list[str]:
    """The distinct documents of chunks (best first), each at the rank of its best chunk."""
    return list(dict.fromkeys(doc.metadata.get("doc_id", doc.metadata["source"]) for doc, _ in hits))


def document_stage_ranks(trace: Any, qrels: Mapping[str, int], depth: int) -> StageRanks:
    """Where the first relevant document ranked in each list of a trace, lists collapsed to documents (the
    final one cut at `depth`, as scored)."""
    lists = {name: document_order(hits) for name, hits in stage_lists(trace).items()}
    lists["final"] = lists["final"][:depth]
    ranks = {name: next((rank for rank, d in enumerate(docs, 1) if qrels.get(d, 0) > 0), None)
             for name, docs in lists.items()}
    pools = {name: len(document_order(trace.stages[name][:trace.pool])) for name in diagnosis.RETRIEVERS
             if name in trace.stages}
    return StageRanks(ranks, {name: len(docs) for name, docs in lists.items()}, pools, trace.pool)


def collapse_to_documents(hits: Sequence[Hit], depth: int) -> dict[str, float]:
    """Chunks (best first) -> {doc_id: score of its best chunk}, first `depth` documents; no document twice."""
    out: dict[str, float] = {}
    for doc, score in hits:
        doc_id = doc.metadata.get("doc_id", doc.metadata["source"])
        if doc_id not in out:
            out[doc_id] = float(score)
            if len(out) == depth:
                break
    return out


def evaluate_dataset(dataset, run: Mapping[str, dict[str, float]], ks: Sequence[int], *, name: str,
                     title: str, stages: Mapping[str, StageRanks] | None = None, stage_k: int = 0) -> EvalResult:
    """Document-level scores of a run over a BEIR dataset (documents collapsed from chunks, cut at k), with
    each query's stage ranks when `stages` (from retrieve_dataset) holds them."""
    depth = max(ks)
    qrels = {q.query_id: dataset.qrels[q.query_id] for q in dataset_queries(dataset)}
    evaluated = rm.evaluate(qrels, run, ks, depth=depth)
    shown = metric_keys("dataset", ks)
    per_query = []
    for qid, values in evaluated["per_query"].items():
        ranked = rm.rank_run(run.get(qid, {}))
        per_query.append(QuestionResult(
            qid, dataset.queries[qid].question, rm.first_relevant_rank([qrels[qid].get(d, 0) > 0 for d in ranked]),
            {k: values[k] for k in shown}, "",
            tuple({"doc_id": d, "grade": g} for d, g in sorted(qrels[qid].items()) if g > 0),
            tuple({"doc_id": d, "score": round(run[qid][d], 6)} for d in ranked[:TOP_IN_JSON]),
            (stages or {}).get(qid)))
    skipped = evaluated["num_skipped_no_relevant"]
    messages = (f"{skipped} {'query' if skipped == 1 else 'queries'} without any relevant document "
                f"{'was' if skipped == 1 else 'were'} skipped",) if skipped else ()
    return EvalResult("dataset", title, {k: evaluated["mean"][k] for k in shown}, evaluated["num_queries"],
                      tuple(per_query), name=name, depth=depth, messages=messages,
                      stage_k=stage_k if stages else 0)


# ----------------------------------------------------------------------------- comparison

def compare_results(old: EvalResult, new: EvalResult, intersect: bool, old_label: str, resamples: int,
                    seed: int = COMPARE_SEED) -> Comparison:
    """Paired comparison of two results over their questions, every metric they share: one family (Holm)."""
    return compare_rows(old, [new], intersect, old_label, resamples, seed)[0]


def compare_rows(old: EvalResult, news: Sequence[EvalResult], intersect: bool, old_label: str, resamples: int,
                 seed: int = COMPARE_SEED, keys: Sequence[str] | None = None) -> list[Comparison]:
    """Each of `news` compared with `old` on the metrics `keys` (default: the new result's tested ones that both
    have, or every metric both have), every (row,
    metric) test one family: Holm-adjusted verdicts, intervals at Holm's last level (stats.compare_family)."""
    old_q = {q.query_id: q for q in old.per_query}
    rows, pairs = [], {}
    for number, new in enumerate(news):
        new_q = {q.query_id: q for q in new.per_query}
        common, note = common_questions(old_q, new_q, intersect)
        shared = [k for k in (keys or new.tested or new.metrics) if k in new.metrics and k in old.metrics]
        for key in shared:
            pairs[number, key] = ({q: old_q[q].metrics[key] for q in common},
                                  {q: new_q[q].metrics[key] for q in common})
        rows.append((new, new_q, common, note, shared))
    compared = stats.compare_family(pairs, resamples=resamples, seed=seed)
    family = family_words(len(news), len({key for *_, shared in rows for key in shared}), len(pairs))
    out = []
    for number, (new, new_q, common, note, shared) in enumerate(rows):
        metrics = {key: MetricComparison(c.n, c.old_mean, c.new_mean, c.diff, c.ci, c.p_value, c.verdict,
                                         c.needed_n, c.p_adjusted, c.level)
                   for key in shared for c in [compared[number, key]]}
        improved, worsened = rm.changed_queries({q: old_q[q].rank for q in common},
                                                {q: new_q[q].rank for q in common})
        improved = tuple(RankMove(m.qid, new_q[m.qid].question, m.old_rank, m.new_rank) for m in improved)
        # A worse question had an old rank: the stage of the new run that pushed it below that rank lost it.
        worsened = tuple(RankMove(m.qid, new_q[m.qid].question, m.old_rank, m.new_rank,
                                  diagnosis.lost_at(new_q[m.qid].stages, m.old_rank)) for m in worsened)
        changed, settings_note = settings_changes(old.settings, new.settings)
        out.append(Comparison(old_label, len(common), note, metrics, resamples, seed, improved, worsened, changed,
                              settings_note, family, stats.DEFAULT_ALPHA))
    return out


def family_words(rows: int, metrics: int, tests: int) -> str:
    """The family a table's verdicts are adjusted over, in words: '4 metrics', '5 rows x 2 metrics = 10 tests'."""
    if rows == 1:
        return "the 1 metric" if metrics == 1 else f"the {metrics} metrics"
    return f"{plural(rows, 'row')} x {plural(metrics, 'metric')} = {plural(tests, 'test')}"


def settings_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[tuple[str, ...], str]:
    """(the settings that differ, as "chunk_size 2000 → 800", in the new report's order; why that is unknown, or
    ""). A report without machine-readable settings is named, never refused."""
    missing = [which for which, settings in (("old", old), ("new", new)) if not settings]
    if missing:
        plural_s = len(missing) > 1
        return (), (f"the {' and '.join(missing)} report{'s' if plural_s else ''} record{'' if plural_s else 's'} no "
                    f"machine-readable settings (written before reports had them), so which settings differ is "
                    f"unknown; compare their Configuration blocks")
    shown = lambda settings, key: _setting_text(settings[key]) if key in settings else "unset"
    keys = [*new, *(key for key in old if key not in new)]
    return tuple(f"{key} {shown(old, key)} → {shown(new, key)}" for key in keys
                 if key not in old or key not in new or old[key] != new[key]), ""


def _setting_text(value: Any) -> str:
    """A setting's value in a settings diff: text bare, booleans on/off, None as 'none'."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return "none" if value is None else str(value)


def common_questions(old_ids: Iterable[str], new_ids: Iterable[str], intersect: bool) -> tuple[list[str], str]:
    """(sorted common question ids, note) of two runs; EvalError if they differ without intersect, or share none."""
    old_ids, new_ids = set(old_ids), set(new_ids)
    common = sorted(old_ids & new_ids)
    if not common:  # checked first: --intersect cannot help, so it is not suggested
        raise EvalError(f"the two runs have no question in common ({len(old_ids)} and {len(new_ids)} questions); "
                        f"nothing to compare: are they runs of the same goldset or dataset?")
    note = ""
    if old_ids != new_ids:
        if not intersect:
            raise EvalError(f"the two runs cover different questions ({len(old_ids)} and {len(new_ids)}, "
                            f"{len(common)} in common); pass --intersect to compare the common questions only")
        note = f"questions differ: {len(old_ids)} old, {len(new_ids)} new; only the common ones are compared"
    return common, note


# ----------------------------------------------------------------------------- gates and status

def gate_failures(metrics: Mapping[str, float], fail_under: Sequence[tuple[str, float]], on_regression: bool,
                  compare: Comparison | None, why_not: str) -> list[str]:
    """Which gates failed: a metric under its --fail-under value; with --fail-on-regression, a metric whose
    verdict (paired significance test, not the raw difference) is "worse", or no comparison to check."""
    failed = [f"{metric_label(key)} {metrics[key]:.4f} is under --fail-under {key}={threshold:g}"
              for key, threshold in fail_under if metrics[key] < threshold]
    if on_regression and compare is None:
        failed.append(f"--fail-on-regression could not be checked: {why_not}")
    elif on_regression:
        failed += [f"{metric_label(key)} is worse than the {compare.old_label}: {c.old_mean:.3f} -> "
                   f"{c.new_mean:.3f} ({ci_label(c.level)} of the difference [{c.ci[0]:+.3f}, {c.ci[1]:+.3f}], "
                   f"p = {c.p_value:.3f}, {fmt_p(c.p_adjusted)} after Holm's adjustment over {compare.family})"
                   for key, c in compare.metrics.items() if c.verdict == stats.VERDICT_WORSE]
    return failed


def run_status(degraded: Sequence[str], failed: Sequence[str], gates: Sequence[str]) -> Status:
    """The status of an evaluated run: exit code 1 when a gate failed or the run is degraded, else 0."""
    return Status(EXIT_FAILED if degraded or failed else EXIT_OK, tuple(gates), tuple(failed), tuple(degraded))


def dataset_degraded_reasons(problem_lines: Sequence[str]) -> list[str]:
    """Why a BEIR evaluation's numbers are not the dataset's: lines of its files were skipped or dropped, so a
    query may have lost its only relevant document (and left the metrics) and Recall/NDCG count fewer."""
    if not problem_lines:
        return []
    return [f"the dataset's files have lines that were skipped or dropped ({'; '.join(problem_lines)}): the metrics "
            f"are not those of the dataset as published; repair the files"]


def degraded_reasons(missing: Sequence[str], lint_errors: int, left_out: int) -> list[str]:
    """Why a goldset evaluation's numbers cannot be trusted as they stand (empty = they can)."""
    reasons = []
    if missing:
        reasons.append(f"{plural(len(missing), 'expected file')} not in the index ({', '.join(missing)}): their "
                       f"questions count as misses; index the files or fix the names")
    if left_out:
        reasons.append(f"{plural(left_out, 'question')} left out of the metrics for an invalid expected page (see "
                       f"'Left out of the metrics')")
    if lint_errors:
        reasons.append(f"goldset lint found {plural(lint_errors, 'error')} (see Notes, or run --lint)")
    return reasons


def explain_question(rag: Retriever, question: gs.GoldQuestion | None, text: str, scoring: Scoring, *, mode: str,
                     rerank: bool) -> list[str]:
    """The details block of one question (`question` of the goldset, or None for any other `text`): where its
    expected location ranked at each stage, and the first entries of each stage's list in the run's unit (pages
    when ranking by page), the acceptable ones marked (for --explain)."""
    page_offset, tolerance, k = scoring.page_offset, scoring.tolerance, scoring.stage_k
    trace = rag.retrieve_traced(text, k=max(scoring.ks), mode=mode, rerank=rerank, depth=scoring.diagnostic_depth)
    locations = question.locations if question is not None else ()
    if question is not None:
        traced = trace_goldset(trace, locations, page_offset, tolerance, rag.rank_by)
        retrieved = [(d.metadata["source"], int(d.metadata["page"])) for d, _ in trace.final]
        final = traced.stages.ranks["final"]
        entry = QuestionResult(question.query_id, text, final, {}, question.corpus or "",
                               tuple(location_json(loc) for loc in locations),
                               exact=exact_rank(retrieved, locations, final, page_offset))
        entry = diagnosed(entry, trace.final, traced, k, page_offset, always=True)
    else:
        entry = QuestionResult("", text, None, {}, passages=tuple(passage(hit, rank, text, page_offset)
                                                          for rank, hit in enumerate(trace.final[:k], 1)))
    lists = {name: [stage_entry(hit, locations, page_offset, tolerance) for hit in hits[:diagnosis.STAGE_LIST_SHOWN]]
             for name, hits in unit_lists(trace, rag.rank_by).items()}
    return diagnosis.render_question_block(entry, k, lists, in_goldset=question is not None, tolerance=tolerance,
                                          list_unit=rag.rank_by)


def stage_entry(hit: Hit, locations: Sequence[gs.Location], page_offset: int, tolerance: int) -> str:
    """An entry of an --explain stage list: 'file.pdf p. 11', with '  ← expected p. 11' (or what else makes it
    acceptable: acceptable_mark) when it is an acceptable location."""
    doc = hit[0]
    mark = acceptable_mark(doc.metadata["source"], int(doc.metadata["page"]), locations, page_offset, tolerance)
    where = f"{doc.metadata['source']} p. {int(doc.metadata['page']) + page_offset}"
    return f"{where}  ← {mark}" if mark else where


def acceptable_mark(source: str, page: int, locations: Sequence[gs.Location], page_offset: int,
                    tolerance: int) -> str:
    """Why a chunk of `source` on 0-based `page` is acceptable for a question of `locations`: 'expected p. 7',
    'within ±1 of expected p. 7' (the tolerance alone), 'expected file, any page'; '' when it is not. An exact
    page wins over a neighbouring one when several locations match."""
    marks = []
    for loc in locations:
        if not gs.location_matches(source, [page], loc, page_offset=page_offset, tolerance=tolerance):
            continue
        if loc.page is None:
            marks.append((0, "expected file, any page"))
        elif gs.location_matches(source, [page], loc, page_offset=page_offset, tolerance=0):
            marks.append((0, f"expected p. {loc.page_text()}"))
        else:
            marks.append((1, f"within ±{tolerance} of expected p. {loc.page_text()}"))
    return min(marks)[1] if marks else ""
