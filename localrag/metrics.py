"""Ranking metrics and paired comparison statistics for retrieval evaluation.

Pure functions, no I/O. Data shapes:
    qrels: dict[query_id, dict[doc_id, grade]]   (grade > 0 means relevant)
    run:   dict[query_id, dict[doc_id, score]]   (higher score = better)

The ranking metrics follow trec_eval 9.x (https://github.com/usnistgov/trec_eval):
ties in score are broken as in ``form_res_rels.c``, P@k / recall@k / success@k /
recip_rank / ndcg_cut as in ``m_P.c``, ``m_recall.c``, ``m_success.c``,
``m_recip_rank.c`` and ``m_ndcg_cut.c``, and queries missing from a run score zero
as with ``trec_eval -c``.

The paired comparison answers "is the difference between two runs real?" with a
percentile bootstrap confidence interval and Fisher's paired randomization test
(Smucker, Allan & Carterette, "A Comparison of Statistical Significance Tests for
Information Retrieval Evaluation", CIKM 2007).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

# Names of the metrics that take a cutoff k, in the order evaluate() reports them.
CUTOFF_METRICS = ("hit", "recall", "precision", "ndcg")
# Name of the reciprocal-rank metric (per query: 1/rank; averaged: MRR).
MRR_KEY = "mrr"
# Separator between metric name and cutoff in a metric key, as in "ndcg@10".
KEY_SEPARATOR = "@"
# Default number of resamples for the bootstrap CI and the Monte Carlo randomization test.
DEFAULT_RESAMPLES = 10_000
# Default seed for numpy's Generator: equal inputs give equal CIs and p-values.
DEFAULT_SEED = 0
# Default significance level of the paired comparison.
DEFAULT_ALPHA = 0.05
# Default power for the "how many questions would we need" estimate.
DEFAULT_POWER = 0.8
# Up to this many non-zero differences the randomization test enumerates all 2^n sign patterns.
EXACT_MAX_NONZERO = 16
# Resample matrices are built in blocks of about this many cells to bound memory.
BLOCK_CELLS = 2_000_000
# Relative slack when comparing a resampled statistic with the observed one: sums of the
# same numbers in another order differ in the last bits, and such ties must count as ">=".
TIE_TOLERANCE = 1e-9
# The three possible outcomes of verdict().
VERDICT_BETTER = "better"
VERDICT_WORSE = "worse"
VERDICT_NONE = "no detectable difference at this goldset size"


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
# Paired comparison of two runs on one metric


def _paired_differences(old: Mapping[str, float], new: Mapping[str, float]) -> np.ndarray:
    """new - old per query, in sorted query-id order so that results do not depend on dict order."""
    _check_same_queries(old, new)
    if not old:
        raise ValueError("no per-query scores to compare; evaluate both runs on a non-empty goldset first")
    qids = sorted(old)
    diffs = np.array([new[q] - old[q] for q in qids], dtype=float)
    if not np.all(np.isfinite(diffs)):
        bad = [q for q, d in zip(qids, diffs) if not math.isfinite(d)]
        raise ValueError(f"per-query scores must be finite numbers; queries {bad[:5]!r} are not")
    return diffs


def _check_same_queries(old: Mapping[str, object], new: Mapping[str, object]) -> None:
    only_old = sorted(set(old) - set(new))
    only_new = sorted(set(new) - set(old))
    if only_old or only_new:
        raise ValueError(
            f"old and new must cover the same query ids; only in old: {only_old[:5]!r}"
            f"{' ...' if len(only_old) > 5 else ''}, only in new: {only_new[:5]!r}"
            f"{' ...' if len(only_new) > 5 else ''}; evaluate both runs against the same goldset"
        )


def _check_resamples(resamples: int) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}; 10000 is a good default")


def _check_probability(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")


def paired_bootstrap_ci(
    old: Mapping[str, float],
    new: Mapping[str, float],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    alpha: float = DEFAULT_ALPHA,
) -> tuple[float, float]:
    """Percentile bootstrap (1 - alpha) CI of the mean per-query difference new - old.

    Resamples query ids with replacement (Efron & Tibshirani 1993, ch. 13; Sakai,
    SIGIR 2006). Deterministic: numpy Generator seeded with ``seed``, queries taken
    in sorted id order.
    """
    _check_resamples(resamples)
    _check_probability("alpha", alpha)
    diffs = _paired_differences(old, new)
    n = len(diffs)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    block = max(1, BLOCK_CELLS // n)
    for start in range(0, resamples, block):
        stop = min(start + block, resamples)
        means[start:stop] = diffs[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def paired_randomization_test(
    old: Mapping[str, float],
    new: Mapping[str, float],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> float:
    """Two-sided p-value of the mean difference new - old by Fisher's paired randomization test.

    Under the null hypothesis the labels old/new are exchangeable within a query, so each
    per-query difference may flip its sign (Smucker, Allan & Carterette, CIKM 2007). The
    p-value is the share of sign patterns whose |mean difference| is at least the observed one.
    Zero differences do not change under a flip and are left out. With at most
    EXACT_MAX_NONZERO non-zero differences all 2^n patterns are enumerated (exact p);
    otherwise ``resamples`` random patterns are drawn and p = (count + 1) / (resamples + 1),
    which never reports an impossible p = 0 (Phipson & Smyth, SAGMB 2010).
    Identical runs give exactly 1.0.
    """
    _check_resamples(resamples)
    diffs = _paired_differences(old, new)
    nonzero = diffs[diffs != 0.0]
    m = len(nonzero)
    if m == 0:
        return 1.0
    # The sum ranks sign patterns exactly as the mean does (same n), with less rounding.
    observed = abs(math.fsum(nonzero))
    threshold = observed - TIE_TOLERANCE * max(1.0, observed)
    if m <= EXACT_MAX_NONZERO:
        patterns = np.arange(2**m)[:, None]
        signs = 1 - 2 * ((patterns >> np.arange(m)) & 1)
        count = int(np.count_nonzero(np.abs(signs @ nonzero) >= threshold))
        return count / 2**m
    rng = np.random.default_rng(seed)
    count = 0
    block = max(1, BLOCK_CELLS // m)
    for start in range(0, resamples, block):
        rows = min(block, resamples - start)
        signs = 1 - 2 * rng.integers(0, 2, size=(rows, m), dtype=np.int8)
        count += int(np.count_nonzero(np.abs(signs @ nonzero) >= threshold))
    return (count + 1) / (resamples + 1)


def min_queries_for_alpha(alpha: float = DEFAULT_ALPHA) -> int:
    """Smallest number of non-zero differences for which a sign-flip test can reach p < alpha.

    The smallest two-sided p with n differences is 2 / 2^n (all patterns but the observed
    one and its mirror are less extreme), so n must exceed log2(2 / alpha): 6 for alpha = 0.05.
    """
    _check_probability("alpha", alpha)
    return math.floor(math.log2(2 / alpha)) + 1


def required_sample_size(
    differences: Sequence[float],
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
) -> int | None:
    """Rough number of questions needed to detect the observed mean difference with a paired test.

    Normal approximation n = ((z_{1-alpha/2} + z_{power}) * sd / mean)^2, rounded up, with
    sd the sample standard deviation of the per-query differences; never less than
    min_queries_for_alpha(alpha), below which the randomization test cannot reach p < alpha.
    None when the mean difference is 0 (no number of questions would detect it).
    It assumes the observed effect is the true one, so treat it as an order of magnitude.
    """
    _check_probability("alpha", alpha)
    _check_probability("power", power)
    if len(differences) < 2:
        raise ValueError(
            f"need at least 2 per-query differences to estimate their spread, got {len(differences)}; "
            "add questions to the goldset"
        )
    mean = statistics.fmean(differences)
    if mean == 0.0:
        return None
    sd = statistics.stdev(differences)
    z = statistics.NormalDist().inv_cdf
    n = math.ceil(((z(1 - alpha / 2) + z(power)) * sd / abs(mean)) ** 2)
    return max(n, min_queries_for_alpha(alpha))


def verdict(ci: tuple[float, float], p_value: float, alpha: float = DEFAULT_ALPHA) -> str:
    """"better" / "worse" only when p < alpha AND the CI lies wholly above / below 0; else VERDICT_NONE."""
    _check_probability("alpha", alpha)
    low, high = ci
    if low > high:
        raise ValueError(f"confidence interval must be (low, high) with low <= high, got {ci!r}")
    if p_value < alpha and low > 0:
        return VERDICT_BETTER
    if p_value < alpha and high < 0:
        return VERDICT_WORSE
    return VERDICT_NONE


def compare_metric(
    old: Mapping[str, float],
    new: Mapping[str, float],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
) -> dict:
    """Compare two runs on one metric's per-query scores (same query ids).

    Returns a dict with keys:
        "n": number of queries
        "old_mean", "new_mean": mean score of each run
        "diff": new_mean - old_mean
        "ci": paired_bootstrap_ci() of the difference, (low, high)
        "p_value": paired_randomization_test()
        "verdict": verdict(ci, p_value, alpha)
        "needed_n": required_sample_size() of the differences; None when the mean
                    difference is 0 or there is only one query
    """
    diffs = _paired_differences(old, new)
    qids = sorted(old)
    old_mean = math.fsum(old[q] for q in qids) / len(qids)
    new_mean = math.fsum(new[q] for q in qids) / len(qids)
    ci = paired_bootstrap_ci(old, new, resamples=resamples, seed=seed, alpha=alpha)
    p_value = paired_randomization_test(old, new, resamples=resamples, seed=seed)
    return {
        "n": len(qids),
        "old_mean": old_mean,
        "new_mean": new_mean,
        "diff": new_mean - old_mean,
        "ci": ci,
        "p_value": p_value,
        "verdict": verdict(ci, p_value, alpha),
        "needed_n": required_sample_size(diffs.tolist(), alpha, power) if len(diffs) >= 2 else None,
    }


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
    _check_same_queries(old_ranks, new_ranks)
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
