"""Tests of localrag.evaluation.metrics: every expected value is worked out by hand in a comment."""

import math
import random

import pytest

from localrag.evaluation import metrics as rm

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
# Changed queries


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


# ----------------------------------------------------------------------------- NDCG of expected locations


def test_ndcg_matched_one_location_takes_its_best_match():
    # A neighbour (0.5) at rank 1 and the page itself (1) at rank 2: 0.5 / 1 < 1 / log2(3) = 0.631, so the exact
    # page counts; the ideal is that location at rank 1 (1.0).
    assert rm.ndcg_matched([[0.5, 1.0, 0.0]], 5) == pytest.approx(1 / math.log2(3))
    # The page itself at rank 4 (1 / log2(5) = 0.431) loses to the neighbour at rank 1 (0.5).
    assert rm.ndcg_matched([[0.5, 0.0, 0.0, 1.0]], 5) == 0.5
    # Cut at k = 3: the page at rank 4 is not seen.
    assert rm.ndcg_matched([[0.0, 0.0, 0.0, 1.0]], 3) == 0.0


def test_ndcg_matched_credits_each_rank_once_and_pairs_for_the_largest_dcg():
    # Two locations both on rank 1; location A also on rank 3. Greedy "A takes rank 1" gives B nothing more:
    # 1 + 0 = 1. The best pairing: B at rank 1, A at rank 3 -> 1 + 1/2 = 1.5. Ideal: 1 + 1/log2(3).
    gains = [[1.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    assert rm.ndcg_matched(gains, 3) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    # Two locations sharing one page only: one is credited, the other is not (never above 1).
    assert rm.ndcg_matched([[1.0], [1.0]], 5) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    # A location nothing matches still counts in the ideal.
    assert rm.ndcg_matched([[1.0, 0.0], [0.0, 0.0]], 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    # Ideal cut at k: three locations, k = 1 -> ideal 1.
    assert rm.ndcg_matched([[1.0], [0.0], [0.0]], 1) == 1.0


def test_ndcg_matched_without_locations_is_0_and_rejects_bad_gains():
    assert rm.ndcg_matched([], 10) == 0.0
    with pytest.raises(ValueError, match=r"gains must lie in 0..1, got \[\[1.5\]\]"):
        rm.ndcg_matched([[1.5]], 10)
    with pytest.raises(ValueError, match="cutoff k must be a positive integer, got 0"):
        rm.ndcg_matched([[1.0]], 0)


def test_ndcg_matched_equals_trec_ndcg_when_every_location_is_one_page():
    # One page per location, each page at most one location, binary gains: the standard nDCG (ndcg_at_k).
    rng = random.Random(7)
    for _ in range(200):
        ranked = [f"d{i}" for i in rng.sample(range(12), 8)]
        relevant = rng.sample(range(12), rng.randint(1, 4))
        qrels = {f"d{i}": 1 for i in relevant}
        gains = [[1.0 if doc == f"d{i}" else 0.0 for doc in ranked] for i in relevant]
        for k in (1, 3, 5, 10):
            assert rm.ndcg_matched(gains, k) == pytest.approx(rm.ndcg_at_k(ranked, qrels, k))


def test_ndcg_matched_never_falls_when_a_gain_rises():
    rng = random.Random(3)
    for _ in range(200):
        gains = [[rng.choice((0.0, 0.0, 0.5, 1.0)) for _ in range(6)] for _ in range(rng.randint(1, 3))]
        i, j = rng.randrange(len(gains)), rng.randrange(6)
        higher = [row[:] for row in gains]
        higher[i][j] = 1.0
        assert rm.ndcg_matched(higher, 5) >= rm.ndcg_matched(gains, 5) - 1e-12
        assert 0.0 <= rm.ndcg_matched(higher, 5) <= 1.0 + 1e-12


def test_location_gains_grade_the_page_itself_above_its_neighbour():
    from localrag.evaluation.scoring import NEIGHBOUR_GAIN, location_gains
    from localrag.goldset.format import Location

    retrieved = [("a.pdf", 3), ("a.pdf", 4), ("b.pdf", 0), ("a.pdf", 9)]  # 0-based pages
    locations = [Location("a.pdf", 5),                   # page 5 = 0-based 4: neighbour at rank 1, itself at 2
                 Location("a.pdf", 9, 11),               # a range: 0-based 8..10; rank 4 (0-based 9) is in it
                 Location("b.pdf"),                      # a whole file: any page is the location itself
                 Location("c.pdf", 2, problem="page 0")]  # unusable: no row, not in the ideal
    assert NEIGHBOUR_GAIN == 0.5
    assert location_gains(retrieved, locations, 1, 1) == [[0.5, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0],
                                                          [0.0, 0.0, 1.0, 0.0]]
    # At tolerance 0 the neighbour earns nothing.
    assert location_gains(retrieved, locations, 1, 0)[0] == [0.0, 1.0, 0.0, 0.0]
    # The question's NDCG@5: a at rank 2 (1/log2 3), the range at 4 (1/log2 5), b at 3 (1/2); ideal 3 at the top.
    ideal = 1 + 1 / math.log2(3) + 0.5
    assert rm.ndcg_matched(location_gains(retrieved, locations, 1, 1), 5) == pytest.approx(
        (1 / math.log2(3) + 0.5 + 1 / math.log2(5)) / ideal)
