"""localrag.metrics against trec_eval itself (pytrec_eval, test-only) on seeded random runs with ties and graded qrels.

Tie convention: trec_eval ranks by score descending, then by doc id descending (form_res_rels.c, comp_sim_docno:
strcmp(docno2, docno1), byte order of the UTF-8 ids); rank_run does the same with Python's code-point order, which
is that byte order. So the two agree on ties as they are, with no conversion, and these tests check it on ids that
order differently by length, case and non-ASCII letters. Queries missing from the run score 0 in our means, as with
`trec_eval -c`; pytrec_eval leaves them out, so the means below add them as zeros.
"""
from __future__ import annotations

import random

import pytest
import pytrec_eval

import eval_retrieval as er
from localrag import metrics as rm

CUTOFFS = sorted(set(er.K_VALUES) | set(er.DATASET_K_VALUES))  # every cutoff the evaluation reports
NUM_QUERIES = 400
# Our metric name -> trec_eval measure (with the cutoff appended as "_k", except recip_rank).
TREC_MEASURE = {"hit": "success", "recall": "recall", "precision": "P", "ndcg": "ndcg_cut", rm.MRR_KEY: "recip_rank"}
# Pieces of doc ids that a natural, case-blind or ASCII-only order would sort otherwise: "d10" < "d9", "Z" < "a",
# "z" < "é" < "文" (code points, as strcmp on UTF-8 bytes).
ID_PARTS = ["d9", "d10", "d1", "D1", "a", "b", "z", "Z", "é", "e", "ü", "Ü", "x-1", "x_1", "ß", "文"]
SCORES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0]  # few distinct scores: most rankings have ties


def measures() -> set[str]:
    cutoffs = ",".join(map(str, CUTOFFS))
    return {f"{TREC_MEASURE[name]}.{cutoffs}" for name in rm.CUTOFF_METRICS} | {TREC_MEASURE[rm.MRR_KEY]}


def trec_key(metric_key: str) -> str:
    name, k = rm.parse_metric_key(metric_key)
    return TREC_MEASURE[name] if k is None else f"{TREC_MEASURE[name]}_{k}"


def random_collection(seed: int) -> tuple[dict, dict]:
    """(qrels, run): graded qrels (grades -1..3), runs with tied scores, unjudged documents, empty and missing runs."""
    rnd = random.Random(seed)
    qrels, run = {}, {}
    for i in range(NUM_QUERIES):
        qid = f"q{i}"
        docs = rnd.sample([f"{a}{b}" for a in ID_PARTS for b in ID_PARTS], rnd.randint(1, 120))
        judged = docs[:rnd.randint(1, len(docs))]
        qrels[qid] = {doc: rnd.choice([-1, 0, 0, 0, 1, 1, 2, 3]) for doc in judged}
        shape = rnd.random()
        if shape < 0.05:
            continue  # missing from the run
        retrieved = rnd.sample(docs, rnd.randint(1, len(docs)))
        if shape < 0.15:
            run[qid] = dict.fromkeys(retrieved, 1.0)  # one big tie
        else:
            run[qid] = {doc: rnd.choice(SCORES) + rnd.choice([0.0, 0.0, 0.25]) for doc in retrieved}
    run["only-in-run"] = {"a": 1.0}
    return qrels, run


@pytest.fixture(scope="module", params=[1, 2, 3])
def collection(request):
    qrels, run = random_collection(request.param)
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures()).evaluate(run)
    return qrels, run, trec


def test_the_collections_have_what_they_test(collection):
    qrels, run, _ = collection
    with_relevant = [q for q, docs in qrels.items() if any(g > 0 for g in docs.values())]
    assert len(with_relevant) > 300
    assert sum(q not in run for q in with_relevant) > 5
    tied = sum(len(set(run[q].values())) < len(run[q]) for q in with_relevant if q in run)
    assert tied > 250
    assert sum(any(g > 1 for g in qrels[q].values()) for q in with_relevant) > 250


def test_every_metric_per_query_equals_trec_eval(collection):
    qrels, run, trec = collection
    ours = rm.evaluate(qrels, run, CUTOFFS)
    no_relevant = sorted(q for q, docs in qrels.items() if not any(grade > 0 for grade in docs.values()))
    assert ours["skipped_no_relevant"] == no_relevant
    assert ours["not_in_qrels"] == ["only-in-run"]
    compared = 0
    for qid, values in ours["per_query"].items():
        if qid not in run:
            assert qid not in trec
            assert set(values.values()) == {0.0}  # trec_eval -c
            continue
        for key, value in values.items():
            assert value == pytest.approx(trec[qid][trec_key(key)], rel=1e-12, abs=1e-15), (qid, key)
            compared += 1
    assert compared > 300 * len(rm.metric_keys(CUTOFFS))


def test_means_equal_trec_eval_with_missing_queries_as_zero(collection):
    qrels, run, trec = collection
    ours = rm.evaluate(qrels, run, CUTOFFS)
    evaluated = ours["per_query"]
    for key, mean in ours["mean"].items():
        expected = sum(trec[qid][trec_key(key)] for qid in evaluated if qid in trec) / len(evaluated)
        assert mean == pytest.approx(expected, rel=1e-12), key


def test_goldset_path_from_the_first_relevant_rank_equals_trec_eval(collection):
    # The goldset path knows only the rank of the first relevant result: Hit@k and MRR from that rank.
    qrels, run, trec = collection
    for qid in trec:
        ranked = rm.rank_run(run[qid])
        rank = rm.first_relevant_rank([qrels[qid].get(doc, 0) > 0 for doc in ranked])
        if rank is None and not any(g > 0 for g in qrels[qid].values()):
            continue  # no relevant document: skipped by evaluate
        assert rm.reciprocal_rank_from_rank(rank) == pytest.approx(trec[qid]["recip_rank"], rel=1e-12), qid
        for k in CUTOFFS:
            assert rm.hit_at_k_from_rank(rank, k) == trec[qid][f"success_{k}"], (qid, k)


def test_rank_run_orders_ties_as_trec_eval():
    # Mark one document relevant at a time: trec_eval's reciprocal rank then tells where it put that document.
    rnd = random.Random(4)
    for _ in range(20):
        docs = rnd.sample([f"{a}{b}" for a in ID_PARTS for b in ID_PARTS], 12)
        scores = {doc: rnd.choice([1.0, 1.0, 2.0]) for doc in docs}
        ranked = rm.rank_run(scores)
        for doc in docs:
            trec = pytrec_eval.RelevanceEvaluator({"q": {doc: 1}}, {"recip_rank"}).evaluate({"q": scores})
            assert round(1 / trec["q"]["recip_rank"]) == ranked.index(doc) + 1, (doc, ranked)
