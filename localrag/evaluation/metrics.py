"""Ranking metrics for retrieval evaluation, as trec_eval computes them.

Pure functions, no I/O. Data shapes:
    qrels: dict[query_id, dict[doc_id, grade]]   (grade > 0 means relevant)
    run:   dict[query_id, dict[doc_id, score]]   (higher score = better)

The ranking metrics follow trec_eval 9.x (https://github.com/usnistgov/trec_eval):
ties in score are broken as in ``form_res_rels.c``, P@k / recall@k / success@k /
recip_rank / ndcg_cut as in ``m_P.c``, ``m_recall.c``, ``m_success.c``,
``m_recip_rank.c`` and ``m_ndcg_cut.c``, and queries missing from a run score zero
as with ``trec_eval -c``. Our own code rather than pytrec_eval: the goldset path has
only the rank of the first relevant chunk, not a scored run to hand to trec_eval, and
each metric is a few lines. pytrec_eval is a test-only dependency that checks every
metric and our tie order against trec_eval (tests/test_trec_eval_crosscheck.py).

Whether the difference between two runs is real is answered in ``localrag.evaluation.stats``;
changed_queries() here lists the queries whose first-relevant rank moved.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

# Names of the metrics that take a cutoff k, in the order evaluate() reports them.
CUTOFF_METRICS = ("hit", "recall", "precision", "ndcg")
# Name of the reciprocal-rank metric (per query: 1/rank; averaged: MRR).
MRR_KEY = "mrr"
# Separator between metric name and cutoff in a metric key, as in "ndcg@10".
KEY_SEPARATOR = "@"


# ---------------------------------------------------------------------------
# Metric keys


def format_metric_key(name: str, k: int | None = None) -> str:
    """Return the report key of a metric: ``("ndcg", 10) -> "ndcg@10"``, ``("mrr", None) -> "mrr"``."""
    if name == MRR_KEY:
        if k is not None:
            raise ValueError(f"metric 'mrr' takes no cutoff, got k={k!r}; call format_metric_key('mrr')")
        return MRR_KEY
    if name not in CUTOFF_METRICS:
        raise ValueError(f"unknown metric {name!r}; use one of {', '.join(CUTOFF_METRICS + (MRR_KEY,))}")
    _check_cutoff(k)
    return f"{name}{KEY_SEPARATOR}{k}"


def parse_metric_key(key: str) -> tuple[str, int | None]:
    """Split a report key into name and cutoff.

    ``"recall@100" -> ("recall", 100)``, ``"mrr" -> ("mrr", None)``.
    """
    if key == MRR_KEY:
        return MRR_KEY, None
    name, sep, cutoff = key.partition(KEY_SEPARATOR)
    if not sep or name not in CUTOFF_METRICS or not (cutoff.isascii() and cutoff.isdigit()) or int(cutoff) < 1:
        raise ValueError(
            f"cannot parse metric key {key!r}; expected 'mrr' or NAME@K with NAME in "
            f"{', '.join(CUTOFF_METRICS)} and K a positive integer, e.g. 'ndcg@10'"
        )
    return name, int(cutoff)


def metric_keys(ks: Sequence[int]) -> list[str]:
    """All keys evaluate() reports for cutoffs ``ks``: hit, recall, precision, ndcg per k, then mrr."""
    _check_cutoffs(ks)
    return [format_metric_key(name, k) for name in CUTOFF_METRICS for k in ks] + [MRR_KEY]


def _check_cutoff(k: object) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"cutoff k must be a positive integer, got {k!r}")


def _check_cutoffs(ks: Sequence[int]) -> None:
    if len(ks) == 0:
        raise ValueError("no cutoffs given; pass at least one k, e.g. ks=[5, 10]")
    for k in ks:
        _check_cutoff(k)
    if len(set(ks)) != len(ks):
        raise ValueError(f"cutoffs contain duplicates: {list(ks)!r}; list each k once")


# ---------------------------------------------------------------------------
# Ranking


def rank_run(run_for_query: Mapping[str, float]) -> list[str]:
    """Doc ids best first, ordered as trec_eval does (form_res_rels.c, comp_sim_docno).

    Score descending; equal scores are broken by doc id in *descending* lexicographic
    order (``strcmp(docno2, docno1)``), so with a tie "d9" ranks above "d2". Python
    compares str by code point, which equals strcmp on UTF-8 bytes. The dict's
    insertion order plays no part.
    """
    for doc_id, score in run_for_query.items():
        if score != score:  # NaN, of any float type
            raise ValueError(
                f"document {doc_id!r} has score NaN, which cannot be ranked; fix the retriever's scores"
            )
    ordered = sorted(run_for_query.items(), key=lambda item: (item[1], item[0]), reverse=True)
    return [doc_id for doc_id, _ in ordered]


def _is_relevant(grade: float) -> bool:
    # trec_eval's default relevance level (-l 1): for integer grades, grade >= 1 == grade > 0.
    return grade > 0


def _num_relevant(qrels_for_query: Mapping[str, float]) -> int:
    return sum(1 for grade in qrels_for_query.values() if _is_relevant(grade))


def _relevant_in_top(ranked: Sequence[str], qrels_for_query: Mapping[str, float], k: int) -> int:
    return sum(1 for doc_id in ranked[:k] if _is_relevant(qrels_for_query.get(doc_id, 0)))


# ---------------------------------------------------------------------------
# Per-query metrics on a ranked list (unjudged documents count as non-relevant)


def hit_at_k(ranked: Sequence[str], qrels_for_query: Mapping[str, float], k: int) -> float:
    """1.0 if a relevant document is among the first k, else 0.0 (trec_eval ``success.k``)."""
    _check_cutoff(k)
    return 1.0 if _relevant_in_top(ranked, qrels_for_query, k) > 0 else 0.0


def recall_at_k(ranked: Sequence[str], qrels_for_query: Mapping[str, float], k: int) -> float:
    """Relevant documents in the first k / all relevant ones (trec_eval ``recall.k``); 0.0 if none is relevant."""
    _check_cutoff(k)
    num_rel = _num_relevant(qrels_for_query)
    return _relevant_in_top(ranked, qrels_for_query, k) / num_rel if num_rel else 0.0


def precision_at_k(ranked: Sequence[str], qrels_for_query: Mapping[str, float], k: int) -> float:
    """Relevant documents in the first k / k (trec_eval ``P.k``: divides by k even if fewer are retrieved)."""
    _check_cutoff(k)
    return _relevant_in_top(ranked, qrels_for_query, k) / k


def reciprocal_rank(ranked: Sequence[str], qrels_for_query: Mapping[str, float]) -> float:
    """1 / rank of the first relevant document over the whole list, 0.0 if none (trec_eval ``recip_rank``)."""
    flags = [_is_relevant(qrels_for_query.get(doc_id, 0)) for doc_id in ranked]
    return reciprocal_rank_from_rank(first_relevant_rank(flags))


def ndcg_at_k(ranked: Sequence[str], qrels_for_query: Mapping[str, float], k: int) -> float:
    """nDCG@k as trec_eval 9.x ``ndcg_cut.k`` (m_ndcg_cut.c; Jarvelin & Kekalainen, ACM TOIS 2002).

    Gain = the qrels grade (grades <= 0 add nothing), discount = 1 / log2(rank + 1).
    The ideal DCG uses the query's positive grades sorted descending, cut at k.
    0.0 when the query has no relevant document.
    """
    _check_cutoff(k)
    ideal_gains = sorted((g for g in qrels_for_query.values() if _is_relevant(g)), reverse=True)[:k]
    ideal = _dcg(ideal_gains)
    if ideal == 0.0:
        return 0.0
    gains = [max(qrels_for_query.get(doc_id, 0), 0) for doc_id in ranked[:k]]
    return _dcg(gains) / ideal


def _dcg(gains: Sequence[float]) -> float:
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1) if gain > 0)


# ---------------------------------------------------------------------------
# Goldset path: only the rank of the first relevant chunk is known


def first_relevant_rank(flags: Sequence[bool]) -> int | None:
    """1-based rank of the first True in ``flags`` (flags[i]: is the result at rank i+1 relevant), or None."""
    for rank, relevant in enumerate(flags, start=1):
        if relevant:
            return rank
    return None


def hit_at_k_from_rank(rank: int | None, k: int) -> float:
    """Hit@k from the rank of the first relevant result (None = not found)."""
    _check_cutoff(k)
    _check_rank(rank)
    return 1.0 if rank is not None and rank <= k else 0.0


def reciprocal_rank_from_rank(rank: int | None) -> float:
    """1/rank from the rank of the first relevant result, 0.0 when not found (None)."""
    _check_rank(rank)
    return 0.0 if rank is None else 1.0 / rank


def ndcg_matched(gains: Sequence[Sequence[float]], k: int) -> float:
    """nDCG@k when the relevant entries are expected locations that several retrieved entries may match: row i holds
    location i's gain (0..1) at each rank. Each location is credited at one rank and each rank credits one location,
    the pairing that gives the largest DCG (a maximum-weight matching, found exactly over the sets of credited
    locations); the ideal is every location at gain 1 in the first ranks (Jarvelin & Kekalainen, ACM TOIS 2002;
    discount 1 / log2(rank + 1)). 0.0 without locations. Lies in 0..1, and a larger gain never lowers it."""
    _check_cutoff(k)
    if any(not 0 <= gain <= 1 for row in gains for gain in row):
        raise ValueError(f"gains must lie in 0..1, got {[list(row) for row in gains]!r}")
    ideal = _dcg([1.0] * min(len(gains), k))
    if not ideal:
        return 0.0
    rows = [row[:k] for row in gains if any(row[:k])]
    best = {0: 0.0}  # the set of credited rows (a bit mask) -> the largest DCG that credits exactly them
    for rank in range(1, k + 1):
        discount = 1.0 / math.log2(rank + 1)
        step = dict(best)
        for mask, value in best.items():
            for i, row in enumerate(rows):
                if rank <= len(row) and row[rank - 1] > 0 and not mask >> i & 1:
                    candidate = value + row[rank - 1] * discount
                    if candidate > step.get(mask | 1 << i, -1.0):
                        step[mask | 1 << i] = candidate
        best = step
    return max(best.values()) / ideal


def _check_rank(rank: object) -> None:
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
        raise ValueError(f"rank must be a 1-based positive integer or None (not found), got {rank!r}")


# ---------------------------------------------------------------------------
# Whole-run evaluation


def query_metrics(
    ranked: Sequence[str], qrels_for_query: Mapping[str, float], ks: Sequence[int]
) -> dict[str, float]:
    """All metrics of one query, keyed as metric_keys(ks); "mrr" holds this query's reciprocal rank."""
    _check_cutoffs(ks)
    per_metric = {"hit": hit_at_k, "recall": recall_at_k, "precision": precision_at_k, "ndcg": ndcg_at_k}
    values = {
        format_metric_key(name, k): per_metric[name](ranked, qrels_for_query, k)
        for name in CUTOFF_METRICS
        for k in ks
    }
    values[MRR_KEY] = reciprocal_rank(ranked, qrels_for_query)
    return values


def evaluate(
    qrels: Mapping[str, Mapping[str, float]],
    run: Mapping[str, Mapping[str, float]],
    ks: Sequence[int],
    depth: int | None = None,
) -> dict:
    """Evaluate a run against qrels; per-query metrics and their means over queries.

    - Each query's documents are ranked with rank_run() and cut to ``depth`` (trec_eval -M;
      None = keep all) before any metric, so reciprocal rank also stops at ``depth``.
    - Queries with no relevant document in qrels are skipped (they have no defined recall
      or nDCG) and counted.
    - Queries in qrels but absent from the run score 0 on every metric and are included
      in the means, as ``trec_eval -c`` does; a retriever that returns nothing is not excused.
    - Queries in the run but not in qrels are ignored, as trec_eval does, and listed.

    Returns a dict with keys:
        "per_query": {query_id: {metric_key: value}}, evaluated queries only
        "mean": {metric_key: mean over evaluated queries}, keys in metric_keys(ks) order
        "num_queries": number of evaluated queries
        "num_skipped_no_relevant": number of queries skipped for having no relevant document
        "skipped_no_relevant": their ids, sorted
        "missing_from_run": ids of evaluated queries absent from the run (scored 0), sorted
        "not_in_qrels": ids of run queries without qrels (ignored), sorted
    """
    keys = metric_keys(ks)
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise ValueError(f"depth must be a positive integer or None (no cut), got {depth!r}")
    skipped = sorted(qid for qid, judged in qrels.items() if _num_relevant(judged) == 0)
    evaluated = sorted(set(qrels) - set(skipped))
    if not evaluated:
        raise ValueError(
            f"none of the {len(qrels)} queries in qrels has a relevant document (grade > 0); "
            "mark at least one relevant document per question in the goldset"
        )
    per_query = {}
    for qid in evaluated:
        ranked = rank_run(run.get(qid, {}))
        if depth is not None:
            ranked = ranked[:depth]
        per_query[qid] = query_metrics(ranked, qrels[qid], ks)
    mean = {key: math.fsum(values[key] for values in per_query.values()) / len(per_query) for key in keys}
    return {
        "per_query": per_query,
        "mean": mean,
        "num_queries": len(evaluated),
        "num_skipped_no_relevant": len(skipped),
        "skipped_no_relevant": skipped,
        "missing_from_run": [qid for qid in evaluated if qid not in run],
        "not_in_qrels": sorted(qid for qid in run if qid not in qrels),
    }


# ---------------------------------------------------------------------------
# Two runs compared query by query


def check_same_queries(old: Mapping[str, object], new: Mapping[str, object]) -> None:
    """Raise ValueError unless the two per-query mappings of a paired comparison have the same query ids."""
    only_old = sorted(set(old) - set(new))
    only_new = sorted(set(new) - set(old))
    if only_old or only_new:
        raise ValueError(
            f"old and new must cover the same query ids; only in old: {only_old[:5]!r}"
            f"{' ...' if len(only_old) > 5 else ''}, only in new: {only_new[:5]!r}"
            f"{' ...' if len(only_new) > 5 else ''}; evaluate both runs against the same goldset"
        )


class RankChange(NamedTuple):
    """One query whose first-relevant rank changed between two runs (None = not found)."""

    qid: str
    old_rank: int | None
    new_rank: int | None


def changed_queries(
    old_ranks: Mapping[str, int | None],
    new_ranks: Mapping[str, int | None],
) -> tuple[list[RankChange], list[RankChange]]:
    """Split queries whose first-relevant rank changed into (improved, worsened).

    None (not found) is worse than any rank, so a change between found and not found is
    larger than any change between two ranks; among those, the one whose found rank is
    better is the larger (1 -> None loses more than 50 -> None). Each list is sorted by
    size of change, largest first, then by query id. Unchanged queries are left out.
    """
    check_same_queries(old_ranks, new_ranks)
    improved: list[RankChange] = []
    worsened: list[RankChange] = []
    for qid in sorted(old_ranks):
        old_rank, new_rank = old_ranks[qid], new_ranks[qid]
        _check_rank(old_rank)
        _check_rank(new_rank)
        if old_rank == new_rank:
            continue
        change = RankChange(qid, old_rank, new_rank)
        is_better = old_rank is None or (new_rank is not None and new_rank < old_rank)
        (improved if is_better else worsened).append(change)
    improved.sort(key=_change_order)
    worsened.sort(key=_change_order)
    return improved, worsened


def _change_order(change: RankChange) -> tuple[int, float, str]:
    if change.old_rank is None or change.new_rank is None:
        found = change.new_rank if change.old_rank is None else change.old_rank
        return (0, found, change.qid)
    return (1, -abs(change.new_rank - change.old_rank), change.qid)
