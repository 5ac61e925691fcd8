"""localrag.evaluation.metrics against trec_eval itself (pytrec_eval, test-only) on seeded random runs with ties and graded qrels.

Tie convention: trec_eval ranks by score descending, then by doc id descending (form_res_rels.c, comp_sim_docno:
strcmp(docno2, docno1), byte order of the UTF-8 ids); rank_run does the same with Python's code-point order, which
is that byte order. So the two agree on ties as they are, with no conversion, and these tests check it on ids that
order differently by length, case and non-ASCII letters. Queries missing from the run score 0 in our means, as with
`trec_eval -c`; pytrec_eval leaves them out, so the means below add them as zeros.

A goldset run's --run-file and qrels (the tiny corpus, by page and by chunk, at tolerance 0 and 1) are read back
and scored by pytrec_eval: success@k and recip_rank equal the JSON report's Hit@k and MRR per question.
"""
from __future__ import annotations

import json
import random

import pytest
import pytrec_eval

import eval_retrieval as er
from localrag.goldset import format as gs
from localrag.evaluation import metrics as rm

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


# ----------------------------------------------------------------------------- a goldset run's --run-file and qrels

# The tiny corpus (conftest.TINY_CORPUS): options.pdf 2 pages, weather.pdf 1, Literatur_Übersicht.pdf 1, scan.pdf 2
# (page 2 image-only). Rows: a neighbour ranks before the expected page at ±1 (volatility: options p. 1 first); a
# range; two locations, one file not indexed (vega); any page of a file (crops); the image-only page; a file not
# indexed at all (never found: it must stay in trec_eval's means as 0); a page beyond its file (left out of the
# metrics, so in neither file).
RUN_GOLD = (
    "question,expected_source,expected_page\n"
    "How sensitive is the option value to volatility?,options.pdf,2\n"
    "What is the Black-Scholes-Merton price of a European call?,options.pdf,1-2\n"
    "What is vega?,Greeks.pdf,3\n"
    "What is vega?,options.pdf,2\n"
    "How do crops react to rainfall?,weather.pdf,\n"
    "Which page has no text layer?,scan.pdf,2\n"
    "What does the scanned appendix contain?,scans.pdf,1\n"
    "How do crops react to rainfall in autumn?,weather.pdf,3\n"
)


def read_run(path) -> dict[str, list[tuple[str, float]]]:
    """A TREC run file as query id -> [(doc id, score)] in the file's rank order."""
    run: dict[str, list[tuple[str, float]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, q0, doc, rank, score, tag = line.split()
        assert (q0, int(rank), tag) == ("Q0", len(run.get(qid, [])) + 1, "localrag-hybrid")
        run.setdefault(qid, []).append((doc, float(score)))
    return run


def read_qrels(path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, zero, doc, grade = line.split()
        assert zero == "0"
        qrels.setdefault(qid, {})[doc] = int(grade)
    return qrels


@pytest.fixture(scope="module")
def goldset_runs(tiny_index, tmp_path_factory):
    """(tolerance, rank_by) -> (JSON report, run, qrels) of the tiny goldset, written by the CLI."""
    docs, index = tiny_index
    out = tmp_path_factory.mktemp("goldset-runs")
    gold = out / "gold.csv"
    gold.write_text(RUN_GOLD, encoding="utf-8")
    runs = {}
    for tolerance in (0, 1):
        for rank_by in ("page", "chunk"):
            name = f"t{tolerance}-{rank_by}"
            code = er.main(["--goldset", str(gold), "--docs", str(docs), "--index", str(index), "--no-sync", "--quiet",
                            "--no-compare", "--page-tolerance", str(tolerance), "--rank-by", rank_by,
                            "--report", str(out / f"{name}.txt"), "--run-file", str(out / f"{name}.run")])
            assert code == 1  # degraded: the files that are not indexed, the page beyond its file
            report = json.loads((out / f"{name}.json").read_text(encoding="utf-8"))
            runs[tolerance, rank_by] = (report, read_run(out / f"{name}.run"),
                                        read_qrels(out / f"{name}.run.qrels"))  # the default qrels path
    return runs


@pytest.mark.parametrize("tolerance", [0, 1])
@pytest.mark.parametrize("rank_by", ["page", "chunk"])
def test_trec_eval_on_a_goldset_run_file_equals_the_report(goldset_runs, tolerance, rank_by):
    report, run, qrels = goldset_runs[tolerance, rank_by]
    scored = {q["query_id"]: q for q in report["per_query"]}
    left_out = gs.query_id("How do crops react to rainfall in autumn?")
    assert len(scored) == 6 and left_out not in scored and left_out not in run and left_out not in qrels
    assert set(qrels) == set(scored) and set(run) == set(scored)
    for entries in run.values():  # the file's ranks are the list's order, its scores strictly decreasing
        assert all(a[1] > b[1] for a, b in zip(entries, entries[1:]))
    ks = [int(key.split("@")[1]) for key in report["metrics"] if key.startswith("hit@")]
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"success." + ",".join(map(str, ks)), "recip_rank"}).evaluate(
        {qid: dict(entries) for qid, entries in run.items()})
    assert set(trec) == set(scored)  # every question judged, the never-found ones included
    for qid, q in scored.items():
        assert trec[qid]["recip_rank"] == pytest.approx(q["metrics"]["mrr"], abs=1e-9), (qid, q["question"])
        for k in ks:
            assert trec[qid][f"success_{k}"] == pytest.approx(q["metrics"][f"hit@{k}"], abs=1e-9), (qid, k)
    means = {key: sum(q["metrics"][key] for q in scored.values()) / len(scored) for key in report["metrics"]}
    assert means == pytest.approx(report["metrics"], abs=1e-12)
    never = scored[gs.query_id("What does the scanned appendix contain?")]
    assert never["rank"] is None and trec[never["query_id"]]["recip_rank"] == 0.0


def test_the_goldset_qrels_hold_every_acceptable_page_and_the_run_names_pages_or_chunks(goldset_runs):
    names = ["How sensitive is the option value to volatility?",
             "What is the Black-Scholes-Merton price of a European call?", "What is vega?",
             "How do crops react to rainfall?", "Which page has no text layer?",
             "What does the scanned appendix contain?"]
    vol, bsm, vega, crops, scan, scans = map(gs.query_id, names)
    qrels = goldset_runs[1, "page"][2]
    # ±1 around p. 2 of a 2-page file: pp. 1-2 (p. 3 is clipped); a range 1-2 at ±1: the same two pages.
    assert qrels[vol] == qrels[bsm] == {"options.pdf#p1": 1, "options.pdf#p2": 1}
    # Two locations; Greeks.pdf is not indexed, so its pages are named as the goldset writes them: never retrieved.
    assert qrels[vega] == {"Greeks.pdf#p2": 1, "Greeks.pdf#p3": 1, "Greeks.pdf#p4": 1, "options.pdf#p1": 1,
                           "options.pdf#p2": 1}
    assert qrels[crops] == {"weather.pdf#p1": 1}  # any page: every page of the file
    assert qrels[scan] == {"scan.pdf#p1": 1, "scan.pdf#p2": 1} and qrels[scans] == {"scans.pdf#p1": 1,
                                                                                      "scans.pdf#p2": 1}
    exact = goldset_runs[0, "page"][2]
    assert exact[vol] == {"options.pdf#p2": 1} and exact[scan] == {"scan.pdf#p2": 1}
    # Ranked by chunk: the chunks on the acceptable pages; the image-only page has none, so it is named as a page.
    chunk_exact = goldset_runs[0, "chunk"][2]
    assert chunk_exact[vol] == {"options.pdf#p2#c0": 1} and chunk_exact[scan] == {"scan.pdf#p2": 1}
    report, run, _ = goldset_runs[1, "page"]
    volatility = next(q for q in report["per_query"] if q["query_id"] == vol)
    assert [doc for doc, _ in run[vol]][:5] == [f"{t['source']}#p{t['page']}" for t in volatility["top"]]
    assert [doc for doc, _ in run[vol]][:2] == ["options.pdf#p1", "options.pdf#p2"]  # the neighbour first, as scored
    assert [doc for doc, _ in goldset_runs[1, "chunk"][1][vol]][:2] == ["options.pdf#p1#c0", "options.pdf#p2#c0"]


def test_a_goldset_run_never_reorders_tied_scores():
    from langchain_core.documents import Document

    from localrag.evaluation import scoring as ev

    def chunk(source, page):
        return Document(page_content="x", metadata={"source": source, "page": page - 1, "chunk": 0})

    # Equal scores: trec_eval would put "b.pdf#p1" first (doc ids descending break ties). The run keeps the list's
    # order by lowering each tie by a unit of float32's last place, so "a.pdf#p1" stays first.
    run = ev.goldset_run({"q": [(chunk("a.pdf", 1), 0.5), (chunk("b.pdf", 1), 0.5), (chunk("c d.pdf", 2), 0.5)]}, 1,
                         "page")
    assert list(run["q"]) == ["a.pdf#p1", "b.pdf#p1", "c%20d.pdf#p2"]
    assert run["q"]["a.pdf#p1"] == 0.5 > run["q"]["b.pdf#p1"] > run["q"]["c%20d.pdf#p2"]
    for position, doc in enumerate(run["q"], start=1):
        trec = pytrec_eval.RelevanceEvaluator({"q": {doc: 1}}, {"recip_rank"}).evaluate(run)
        assert trec["q"]["recip_rank"] == pytest.approx(1 / position)
    assert ev.trec_doc_id("Bericht 2023 #1 100%.pdf", 7) == "Bericht%202023%20%231%20100%25.pdf#p7"
    assert ev.trec_doc_id("Über\tsicht.pdf") == "Über%09sicht.pdf"
