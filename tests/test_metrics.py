"""Tests of retrieval_metrics: every expected value is worked out by hand in a comment."""

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from localrag import metrics as rm

# ---------------------------------------------------------------------------
# Fixtures
#
# q1: relevant d1 (grade 2), d2 (1), d3 (1); d9 judged non-relevant (0).
#     Run scores: d4 .9, d2 .8, d9 .8, d1 .5, d5 .4, d3 .1 (inserted in another order).
#     TRAP: d2 and d9 tie at .8; trec_eval breaks ties by doc id DESCENDING, so d9 ranks 2
#     and d2 ranks 3. (Ascending ids or insertion order would put the relevant d2 at rank 2.)
#     Ranking: 1 d4(0) 2 d9(0) 3 d2(1) 4 d1(2) 5 d5(-) 6 d3(1)
# q2: relevant a (1), b (2). Run: a .7, x .6, b .6 -> tie, "x" > "b", ranking a, x, b.
# q3: relevant z, but q3 is absent from the run -> every metric 0 (trec_eval -c).
# q4: only a non-relevant judgement -> skipped and counted, even though the run has it.
# q5: in the run only -> ignored.

KS = [2, 5]


@pytest.fixture
def qrels():
    return {
        "q1": {"d1": 2, "d2": 1, "d3": 1, "d9": 0},
        "q2": {"a": 1, "b": 2},
        "q3": {"z": 1},
        "q4": {"n1": 0},
    }


@pytest.fixture
def run():
    return {
        "q1": {"d1": 0.5, "d2": 0.8, "d3": 0.1, "d4": 0.9, "d5": 0.4, "d9": 0.8},
        "q2": {"b": 0.6, "x": 0.6, "a": 0.7},
        "q4": {"n1": 0.3},
        "q5": {"d1": 1.0},
    }


# Hand computation of nDCG (gain = grade, discount 1/log2(rank+1)):
#   log2(3) = 1.584963, log2(4) = 2, log2(5) = 2.321928
# q1 nDCG@5: DCG  = 1/log2(4) [d2, rank 3] + 2/log2(5) [d1, rank 4] = 0.5 + 0.861353 = 1.361353
#            IDCG = grades [2, 1, 1] -> 2/1 + 1/log2(3) + 1/log2(4) = 2 + 0.630930 + 0.5 = 3.130930
#            nDCG = 1.361353 / 3.130930 = 0.434808
# q1 nDCG@2: nothing relevant in the top 2 -> 0
# q2 nDCG@2: DCG = 1/1 [a] = 1; IDCG@2 = 2/1 + 1/log2(3) = 2.630930 -> 0.380094
# q2 nDCG@5: DCG = 1/1 [a] + 2/log2(4) [b, rank 3] = 2; IDCG = 2.630930 -> 0.760188
Q1_NDCG5 = 0.434808
Q2_NDCG2 = 0.380094
Q2_NDCG5 = 0.760188


# ---------------------------------------------------------------------------
# Ranking and per-query metrics


def test_rank_run_breaks_ties_by_doc_id_descending(run):
    assert rm.rank_run(run["q1"]) == ["d4", "d9", "d2", "d1", "d5", "d3"]
    assert rm.rank_run(run["q2"]) == ["a", "x", "b"]


def test_rank_run_ignores_insertion_order_and_rejects_nan():
    assert rm.rank_run({"b": 1.0, "a": 2.0, "c": 1.0}) == ["a", "c", "b"]
    with pytest.raises(ValueError, match="NaN"):
        rm.rank_run({"a": float("nan"), "b": 1.0})


def test_q1_metrics_by_hand(qrels, run):
    ranked = rm.rank_run(run["q1"])
    judged = qrels["q1"]
    # Top 2 = d4, d9: nothing relevant. Top 5 holds d2 and d1: 2 of 3 relevant.
    assert rm.hit_at_k(ranked, judged, 2) == 0.0
    assert rm.hit_at_k(ranked, judged, 5) == 1.0
    assert rm.recall_at_k(ranked, judged, 2) == 0.0
    assert rm.recall_at_k(ranked, judged, 5) == pytest.approx(2 / 3)
    assert rm.precision_at_k(ranked, judged, 2) == 0.0
    assert rm.precision_at_k(ranked, judged, 5) == pytest.approx(2 / 5)
    # First relevant is d2 at rank 3 (rank 2 with a wrong tie-break).
    assert rm.reciprocal_rank(ranked, judged) == pytest.approx(1 / 3)
    assert rm.ndcg_at_k(ranked, judged, 2) == 0.0
    assert rm.ndcg_at_k(ranked, judged, 5) == pytest.approx(Q1_NDCG5, abs=1e-6)


def test_q2_metrics_by_hand(qrels, run):
    ranked = rm.rank_run(run["q2"])
    judged = qrels["q2"]
    assert rm.hit_at_k(ranked, judged, 2) == 1.0
    assert rm.recall_at_k(ranked, judged, 2) == 0.5
    assert rm.recall_at_k(ranked, judged, 5) == 1.0
    assert rm.precision_at_k(ranked, judged, 2) == 0.5
    # Only 3 retrieved, yet P@5 divides by 5 (trec_eval): 2/5.
    assert rm.precision_at_k(ranked, judged, 5) == pytest.approx(0.4)
    assert rm.reciprocal_rank(ranked, judged) == 1.0
    # Ideal cut at k=2 uses the grades [2, 1], not just [2].
    assert rm.ndcg_at_k(ranked, judged, 2) == pytest.approx(Q2_NDCG2, abs=1e-6)
    assert rm.ndcg_at_k(ranked, judged, 5) == pytest.approx(Q2_NDCG5, abs=1e-6)


def test_ideal_ranking_scores_one_and_no_relevant_scores_zero():
    judged = {"a": 2, "b": 1, "c": 0}
    assert rm.ndcg_at_k(["a", "b", "c"], judged, 3) == pytest.approx(1.0)
    # Swapping the grades is not ideal: DCG = 1 + 2/log2(3) = 2.261860, IDCG = 2.630930 -> 0.859719
    assert rm.ndcg_at_k(["b", "a"], judged, 2) == pytest.approx(0.859719, abs=1e-6)
    assert rm.ndcg_at_k(["a"], {"a": 0}, 5) == 0.0
    assert rm.recall_at_k(["a"], {"a": 0}, 5) == 0.0


def test_ndcg_matches_a_straightforward_reimplementation():
    rng = random.Random(7)
    for _ in range(50):
        docs = [f"d{i}" for i in range(12)]
        judged = {d: rng.choice([0, 0, 1, 2, 3]) for d in rng.sample(docs, 8)}
        ranked = rng.sample(docs, 10)
        for k in (1, 3, 10, 20):
            dcg = sum(judged.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
            ideal = sorted(judged.values(), reverse=True)[:k]
            idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
            expected = dcg / idcg if idcg else 0.0
            assert rm.ndcg_at_k(ranked, judged, k) == pytest.approx(expected)


def test_metrics_reject_bad_cutoffs():
    with pytest.raises(ValueError, match="positive integer"):
        rm.hit_at_k(["a"], {"a": 1}, 0)
    with pytest.raises(ValueError, match="positive integer"):
        rm.ndcg_at_k(["a"], {"a": 1}, 2.5)


# ---------------------------------------------------------------------------
# Goldset path


def test_first_relevant_rank_and_rank_helpers():
    assert rm.first_relevant_rank([False, False, True, True]) == 3
    assert rm.first_relevant_rank([True]) == 1
    assert rm.first_relevant_rank([False, False]) is None
    assert rm.first_relevant_rank([]) is None
    assert rm.hit_at_k_from_rank(3, 2) == 0.0
    assert rm.hit_at_k_from_rank(3, 3) == 1.0
    assert rm.hit_at_k_from_rank(None, 100) == 0.0
    assert rm.reciprocal_rank_from_rank(4) == 0.25
    assert rm.reciprocal_rank_from_rank(None) == 0.0
    with pytest.raises(ValueError, match="1-based"):
        rm.reciprocal_rank_from_rank(0)


# ---------------------------------------------------------------------------
# Metric keys


def test_metric_keys_format_and_parse():
    assert rm.metric_keys([5, 100]) == [
        "hit@5", "hit@100", "recall@5", "recall@100",
        "precision@5", "precision@100", "ndcg@5", "ndcg@100", "mrr",
    ]
    assert rm.format_metric_key("ndcg", 10) == "ndcg@10"
    assert rm.parse_metric_key("recall@100") == ("recall", 100)
    assert rm.parse_metric_key("mrr") == ("mrr", None)
    for bad in ("ndcg", "ndcg@0", "map@5", "hit@x", "mrr@10"):
        with pytest.raises(ValueError, match="cannot parse"):
            rm.parse_metric_key(bad)
    with pytest.raises(ValueError, match="unknown metric"):
        rm.format_metric_key("map", 5)
    with pytest.raises(ValueError, match="duplicates"):
        rm.metric_keys([5, 5])


# ---------------------------------------------------------------------------
# evaluate


def test_evaluate_by_hand(qrels, run):
    result = rm.evaluate(qrels, run, KS)
    assert result["num_queries"] == 3
    assert result["num_skipped_no_relevant"] == 1
    assert result["skipped_no_relevant"] == ["q4"]
    assert result["missing_from_run"] == ["q3"]
    assert result["not_in_qrels"] == ["q5"]
    assert sorted(result["per_query"]) == ["q1", "q2", "q3"]
    assert result["per_query"]["q3"] == {key: 0.0 for key in rm.metric_keys(KS)}
    assert list(result["mean"]) == rm.metric_keys(KS)
    # Means over q1, q2, q3 (q3 all zero):
    #   hit@2 (0+1+0)/3, hit@5 (1+1+0)/3, recall@2 (0+.5+0)/3, recall@5 (2/3+1+0)/3 = 5/9,
    #   precision@2 (0+.5+0)/3, precision@5 (.4+.4+0)/3, mrr (1/3+1+0)/3 = 4/9,
    #   ndcg@2 (0+0.380094+0)/3 = 0.126698, ndcg@5 (0.434808+0.760188+0)/3 = 0.398332
    expected = {
        "hit@2": 1 / 3, "hit@5": 2 / 3, "recall@2": 1 / 6, "recall@5": 5 / 9,
        "precision@2": 1 / 6, "precision@5": 0.8 / 3, "ndcg@2": 0.126698, "ndcg@5": 0.398332, "mrr": 4 / 9,
    }
    for key, value in expected.items():
        assert result["mean"][key] == pytest.approx(value, abs=1e-6), key


def test_evaluate_depth_cuts_before_every_metric(qrels, run):
    # depth 3 keeps d4, d9, d2 for q1: recall@5 = 1/3, P@5 = 1/5, RR still 1/3.
    cut3 = rm.evaluate(qrels, run, KS, depth=3)["per_query"]["q1"]
    assert cut3["recall@5"] == pytest.approx(1 / 3)
    assert cut3["precision@5"] == pytest.approx(0.2)
    assert cut3["mrr"] == pytest.approx(1 / 3)
    # depth 2 keeps d4, d9: the first relevant document (rank 3) is beyond the depth.
    cut2 = rm.evaluate(qrels, run, KS, depth=2)["per_query"]["q1"]
    assert cut2["mrr"] == 0.0
    assert cut2["hit@5"] == 0.0
    with pytest.raises(ValueError, match="depth"):
        rm.evaluate(qrels, run, KS, depth=0)


def test_evaluate_without_any_relevant_query_says_so():
    with pytest.raises(ValueError, match="no.*relevant|has a relevant"):
        rm.evaluate({"q": {"a": 0}}, {"q": {"a": 1.0}}, [5])


# ---------------------------------------------------------------------------
# Paired statistics


def _runs(diffs, base=0.5):
    """old/new per-query score dicts whose differences new - old are `diffs`."""
    old = {f"q{i:02d}": base for i in range(len(diffs))}
    new = {f"q{i:02d}": base + d for i, d in enumerate(diffs)}
    return old, new


def test_identical_runs_give_p_one_and_ci_with_zero():
    old = {f"q{i}": 0.1 * i for i in range(30)}
    new = dict(old)
    assert rm.paired_randomization_test(old, new) == 1.0
    low, high = rm.paired_bootstrap_ci(old, new)
    assert low <= 0.0 <= high
    assert rm.required_sample_size([0.0] * 30) is None
    result = rm.compare_metric(old, new)
    assert result["p_value"] == 1.0
    assert result["diff"] == 0.0
    assert result["verdict"] == "no detectable difference at this goldset size"
    assert result["needed_n"] is None


def test_winning_on_all_20_queries_is_better():
    # Only the all-plus and all-minus sign patterns reach the observed |sum|: exact p = 2/2^20.
    # Monte Carlo (20 > EXACT_MAX_NONZERO) then gives about 1/10001.
    old, new = _runs([0.01 * (i + 1) for i in range(20)])
    p = rm.paired_randomization_test(old, new)
    assert p < 0.001
    low, high = rm.paired_bootstrap_ci(old, new)
    assert 0.0 < low <= high
    result = rm.compare_metric(old, new)
    assert result["verdict"] == "better"
    assert result["n"] == 20
    # mean diff = 0.01 * (1 + ... + 20) / 20 = 0.105
    assert result["diff"] == pytest.approx(0.105)
    assert rm.compare_metric(new, old)["verdict"] == "worse"


def test_bootstrap_is_seeded_and_independent_of_dict_order():
    old, new = _runs([0.3, -0.1, 0.2, 0.0, 0.5, -0.4, 0.1, 0.25])
    first = rm.paired_bootstrap_ci(old, new, seed=42)
    assert rm.paired_bootstrap_ci(old, new, seed=42) == first
    reversed_old = dict(reversed(list(old.items())))
    reversed_new = dict(reversed(list(new.items())))
    assert rm.paired_bootstrap_ci(reversed_old, reversed_new, seed=42) == first
    assert rm.paired_bootstrap_ci(old, new, seed=43) != first


def test_bootstrap_ci_of_two_queries_by_hand():
    # diffs [0, 1]: a resample of 2 has mean 0 (p=1/4), 0.5 (1/2) or 1 (1/4). Among 10000
    # resamples both extremes occur far more than 2.5% of the time, so the 95% CI is (0, 1).
    old, new = _runs([0.0, 1.0], base=0.0)
    assert rm.paired_bootstrap_ci(old, new) == (0.0, 1.0)


def test_randomization_exact_four_queries_by_hand():
    # diffs [1, 1, 1, -1], observed |sum| = 2. The 16 sign patterns (s1 s2 s3 s4) give
    # sum = s1 + s2 + s3 - s4:
    #   ++++  2*   +++-  4*   ++-+  0    ++--  2*
    #   +-++  0    +-+-  2*   +--+ -2*   +---  0
    #   -+++  0    -++-  2*   -+-+ -2*   -+--  0
    #   --++ -2*   --+-  0    ---+ -4*   ----  -2*
    # (* = |sum| >= 2): 10 of 16 -> p = 0.625
    old, new = _runs([1.0, 1.0, 1.0, -1.0], base=0.0)
    assert rm.paired_randomization_test(old, new) == 0.625
    # Zero differences do not change under a flip, so adding ties leaves p unchanged.
    old, new = _runs([1.0, 1.0, 1.0, -1.0, 0.0, 0.0], base=0.0)
    assert rm.paired_randomization_test(old, new) == 0.625


def test_randomization_counts_ties_hidden_by_float_rounding():
    # TRAP: realistic metric values (thirds, fifths). Per-query diffs in exact arithmetic:
    # -2/3, -1/3, -1/20, 2/3, 1/5; observed sum -11/60. In floats, sign patterns whose exact
    # |sum| equals 11/60 can come out a bit smaller and be missed without a tolerance.
    old = {"q0": 2 / 3, "q1": 1 / 3, "q2": 0.25, "q3": 0.0, "q4": 0.0}
    new = {"q0": 0.0, "q1": 0.0, "q2": 0.2, "q3": 2 / 3, "q4": 0.2}
    exact = [Fraction(-2, 3), Fraction(-1, 3), Fraction(-1, 20), Fraction(2, 3), Fraction(1, 5)]
    observed = abs(sum(exact))
    hits = sum(
        abs(sum(s * d for s, d in zip(signs, exact))) >= observed
        for signs in itertools.product((1, -1), repeat=len(exact))
    )
    assert hits == 28  # of 32 patterns
    assert rm.paired_randomization_test(old, new) == hits / 32


def _exact_p(diffs):
    """Exact two-sided sign-flip p over all 2^n patterns, by meet in the middle (integers)."""
    d = np.array(diffs, dtype=np.int64)
    half = len(d) // 2

    def all_sums(part):
        bits = (np.arange(2 ** len(part))[:, None] >> np.arange(len(part))) & 1
        return (1 - 2 * bits) @ part

    totals = all_sums(d[:half])[:, None] + all_sums(d[half:])[None, :]
    return np.count_nonzero(np.abs(totals) >= abs(d.sum())) / 2 ** len(d)


def test_randomization_monte_carlo_close_to_exact_on_20_queries():
    steps = [3, -1, 2, 1, -2, 1, 1, -3, 2, 1, 1, 1, 2, -1, 1, -2, 3, 1, 1, -2]
    # Quarter steps are exact in binary, so pattern sums tie with the observed one exactly.
    old, new = _runs([s / 4 for s in steps], base=0.0)
    exact = _exact_p(steps)  # 0.258337
    monte_carlo = rm.paired_randomization_test(old, new)
    assert abs(monte_carlo - exact) <= 0.01


def test_randomization_switches_from_exact_to_monte_carlo():
    resamples = 1000
    old, new = _runs([0.1 * (i % 3 + 1) * (-1) ** i for i in range(rm.EXACT_MAX_NONZERO)])
    p_exact = rm.paired_randomization_test(old, new, resamples=resamples)
    assert p_exact * 2**rm.EXACT_MAX_NONZERO == pytest.approx(round(p_exact * 2**rm.EXACT_MAX_NONZERO))
    assert p_exact == pytest.approx(_exact_p([(i % 3 + 1) * (-1) ** i for i in range(rm.EXACT_MAX_NONZERO)]))
    old, new = _runs([0.1 * (i % 3 + 1) * (-1) ** i for i in range(rm.EXACT_MAX_NONZERO + 1)])
    p_mc = rm.paired_randomization_test(old, new, resamples=resamples)
    count_plus_one = p_mc * (resamples + 1)
    assert count_plus_one == pytest.approx(round(count_plus_one))
    again = rm.paired_randomization_test(old, new, resamples=resamples, seed=5)
    assert rm.paired_randomization_test(old, new, resamples=resamples, seed=5) == again


def test_paired_inputs_must_share_query_ids():
    with pytest.raises(ValueError, match="only in old: \\['q2'\\]"):
        rm.paired_bootstrap_ci({"q1": 0.1, "q2": 0.2}, {"q1": 0.3})
    with pytest.raises(ValueError, match="non-empty"):
        rm.paired_randomization_test({}, {})


def test_required_sample_size_by_hand():
    # diffs [1, -0.5, 0.5, 0]: mean 0.25; deviations .75 -.75 .25 -.25 -> squares sum 1.25,
    # sd = sqrt(1.25 / 3) = 0.645497. z_0.975 + z_0.8 = 1.959964 + 0.841621 = 2.801585.
    # n = (2.801585 * 0.645497 / 0.25)^2 = 7.233661^2 = 52.33 -> 53
    assert rm.required_sample_size([1.0, -0.5, 0.5, 0.0]) == 53
    # Sign does not matter.
    assert rm.required_sample_size([-1.0, 0.5, -0.5, 0.0]) == 53
    # diffs [0.1, 0.3]: (2.801585 * 0.141421 / 0.2)^2 = 3.92 -> 4, but a sign-flip test needs
    # 2 / 2^n < 0.05, i.e. n >= 6.
    assert rm.required_sample_size([0.1, 0.3]) == 6
    assert rm.min_queries_for_alpha(0.05) == 6  # 2/2^5 = 0.0625, 2/2^6 = 0.03125
    assert rm.min_queries_for_alpha(0.01) == 8  # 2/2^7 = 0.0156, 2/2^8 = 0.0078
    assert rm.required_sample_size([0.2, -0.2]) is None
    with pytest.raises(ValueError, match="at least 2"):
        rm.required_sample_size([0.5])


def test_verdict_needs_both_p_and_ci():
    assert rm.verdict((0.01, 0.2), 0.01) == "better"
    assert rm.verdict((-0.2, -0.01), 0.01) == "worse"
    none = "no detectable difference at this goldset size"
    assert rm.verdict((-0.01, 0.2), 0.01) == none  # significant p, CI touches 0
    assert rm.verdict((0.01, 0.2), 0.2) == none  # CI above 0, p too large
    assert rm.verdict((0.01, 0.2), 0.05) == none  # p == alpha is not < alpha
    assert rm.verdict((0.0, 0.2), 0.001) == none  # CI including 0 does not exclude it
    with pytest.raises(ValueError, match="low <= high"):
        rm.verdict((0.2, 0.1), 0.01)


def test_compare_metric_bundle():
    old = {"a": 0.0, "b": 0.5, "c": 1.0, "d": 0.5}
    new = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0}
    # diffs sorted by qid: a +1, b -0.5, c 0, d +0.5 (the same as the required_sample_size case)
    result = rm.compare_metric(old, new)
    assert result["n"] == 4
    assert result["old_mean"] == 0.5
    assert result["new_mean"] == 0.75
    assert result["diff"] == 0.25
    # Non-zero diffs 1, -0.5, 0.5, observed sum 1: sign patterns (+ = kept sign)
    # +++ 1*  ++- 0  +-+ 2*  +-- 1*  -++ -1*  -+- -2*  --+ 0  --- -1*  -> 6/8 = 0.75
    assert result["p_value"] == 0.75
    assert result["verdict"] == "no detectable difference at this goldset size"
    assert result["needed_n"] == 53
    low, high = result["ci"]
    assert low < 0.25 < high
    assert set(result) == {"n", "old_mean", "new_mean", "diff", "ci", "p_value", "verdict", "needed_n"}


def test_changed_queries_order():
    old = {"a": 1, "b": 3, "c": None, "d": 2, "e": None, "f": 5, "g": 4, "h": 6, "i": 7, "j": None}
    new = {"a": 3, "b": 1, "c": 2, "d": None, "e": None, "f": 5, "g": 10, "h": 8, "i": None, "j": 9}
    improved, worsened = rm.changed_queries(old, new)
    # Improved: c None->2 and j None->9 (found again: largest, better found rank first), then b 3->1.
    assert improved == [("c", None, 2), ("j", None, 9), ("b", 3, 1)]
    # Worsened: d 2->None, i 7->None (lost), then g 4->10 (6), a 1->3 (2), h 6->8 (2, after a by qid).
    assert worsened == [("d", 2, None), ("i", 7, None), ("g", 4, 10), ("a", 1, 3), ("h", 6, 8)]
    assert improved[0].qid == "c" and improved[0].new_rank == 2
    with pytest.raises(ValueError, match="same query ids"):
        rm.changed_queries({"a": 1}, {"b": 1})
