"""localrag/evaluation/result.py: the JSON report is `EvalResult.to_json()`, and `from_json` reads it back unchanged."""
from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import ROOT

from localrag.evaluation import report as eval_report
from localrag.evaluation.result import (Comparison, CorpusResult, EvalResult, ExactRank, LeftOut, MetricComparison,
                                        NotFound, Passage, QuestionResult, RankMove, StageRanks, Status)

STAGES = StageRanks({"dense": 1, "bm25": 41, "rrf": 2, "final": 2}, {"dense": 100, "bm25": 100, "rrf": 52, "final": 20},
                    {"dense": 30, "bm25": 30}, 30)

FULL = EvalResult(
    kind="goldset", title="goldset gold.csv", metrics={"hit@5": 0.5, "mrr": 0.25}, num_queries=2,
    per_query=(QuestionResult("q1", "What is vega?", 2, {"hit@5": 1.0, "mrr": 0.5}, "options",
                              ({"source": "options.pdf", "page": 2, "last_page": 3},),
                              ({"source": "options.pdf", "page": 1, "score": 0.5},), STAGES,
                              (Passage(1, "options.pdf", 1, 0.5, "**vega** text"),),
                              Passage(2, "options.pdf", 2, 0.25, "gold text", "rrf")),
               QuestionResult("q2", "What is rain?", None, {"hit@5": 0.0, "mrr": 0.0}, "weather",
                              ({"source": "weather.pdf", "page": None},), ())),
    name="hybrid", depth=20, goldset="goldset gold.csv", generated="2025-01-01 00:00:00",
    status=Status(1, ("hit@5 >= 0.9",), ("Hit@5 0.5000 is under --fail-under hit@5=0.9",), ("degraded",)),
    config=(("Goldset", "gold.csv (3 questions)"), ("Reranker", "off")), counts={"hit@5": 1},
    per_corpus={"options": CorpusResult(1, {"hit@5": 1.0, "mrr": 0.5}, {"hit@5": 1}),
                "weather": CorpusResult(1, {"hit@5": 0.0, "mrr": 0.0}, {"hit@5": 0})},
    not_found=(NotFound("What is rain?", ({"source": "weather.pdf", "page": None},), ("a hint",)),),
    left_out=(LeftOut("q3", "Where is page 99?", (4, 5), ("options.pdf has 2 pages",)),),
    judge={"model": "stub", "questions": 2},
    compare=Comparison("previous report old.json", 2, "", {
        "hit@5": MetricComparison(2, 0.0, 0.5, 0.5, (0.0, 1.0), 1.0, "no detectable difference", 12)},
        10_000, 0, (RankMove("q1", "What is vega?", None, 2),),
        (RankMove("q2", "What is rain?", 1, None, "in no candidate list (dense – (not within 100))"),)),
    messages=("a note",), seconds=1.5, judge_lines=("LLM judge",), stage_k=5, details="eval/gold.details.md")


def test_json_keys_keep_the_report_order():
    assert list(FULL.to_json()) == ["generated", "title", "kind", "goldset", "status", "config", "metrics",
                                    "num_queries", "per_query", "counts", "per_corpus", "not_found", "left_out",
                                    "judge", "compare", "messages", "stage_k", "details"]
    assert list(FULL.to_json()["per_query"][0]) == ["query_id", "question", "corpus", "locations", "rank",
                                                    "metrics", "top", "stages"]
    assert "stages" not in FULL.to_json()["per_query"][1]  # a question without stage ranks (an older report)
    # Optional sections appear only when they hold something.
    bare = EvalResult("dataset", "dataset d (test)", {"mrr": 1.0}, 1, ())
    assert list(bare.to_json()) == ["generated", "title", "kind", "config", "metrics", "num_queries", "per_query"]


def test_from_json_reads_back_everything_the_json_holds():
    text = eval_report.render_json(FULL)
    back = EvalResult.from_json(json.loads(text))
    # Only the fields that exist while a run lasts are lost: the passages live in the details file.
    per_query = tuple(dataclasses.replace(q, passages=(), gold=None) for q in FULL.per_query)
    assert back == dataclasses.replace(FULL, name="", depth=0, seconds=0.0, judge_lines=(), per_query=per_query)
    assert eval_report.render_json(back) == text


def test_the_committed_report_reads_back_byte_identical():
    text = (ROOT / "eval" / "baseline.json").read_text(encoding="utf-8")
    assert eval_report.render_json(EvalResult.from_json(json.loads(text))) == text


def with_exact() -> EvalResult:
    """FULL scored on the exact page too: q1 at ±1 rank 2 through p. 1, exact page 2 at rank 3; q2 nowhere."""
    q1, q2 = FULL.per_query
    return dataclasses.replace(
        FULL, page_tolerance=1, metrics_exact={"hit@5": 0.5, "mrr": 1 / 6}, counts_exact={"hit@5": 1},
        per_query=(dataclasses.replace(q1, exact=ExactRank(3, {"source": "options.pdf", "page": 1},
                                                          {"source": "options.pdf", "page": 2})),
                   dataclasses.replace(q2, exact=ExactRank(None))),
        per_corpus={"options": CorpusResult(1, {"hit@5": 1.0, "mrr": 0.5}, {"hit@5": 1}, {"hit@5": 1.0, "mrr": 1 / 3},
                                            {"hit@5": 1}),
                    "weather": CorpusResult(1, {"hit@5": 0.0, "mrr": 0.0}, {"hit@5": 0}, {"hit@5": 0.0, "mrr": 0.0},
                                            {"hit@5": 0})})


def test_exact_page_figures_sit_beside_the_tolerant_ones_and_read_back():
    data = with_exact().to_json()
    assert list(data) == ["generated", "title", "kind", "goldset", "status", "config", "metrics", "page_tolerance",
                          "metrics_exact", "num_queries", "per_query", "counts", "counts_exact", "per_corpus",
                          "not_found", "left_out", "judge", "compare", "messages", "stage_k", "details"]
    assert list(data["per_query"][0]) == ["query_id", "question", "corpus", "locations", "rank", "rank_exact", "via",
                                          "exact_page", "metrics", "top", "stages"]
    assert list(data["per_query"][1])[4:6] == ["rank", "rank_exact"] and data["per_query"][1]["rank_exact"] is None
    assert "via" not in data["per_query"][1]
    text = eval_report.render_json(with_exact())
    back = EvalResult.from_json(json.loads(text))
    per_query = tuple(dataclasses.replace(q, passages=(), gold=None) for q in with_exact().per_query)
    assert back == dataclasses.replace(with_exact(), name="", depth=0, seconds=0.0, judge_lines=(),
                                       per_query=per_query)
    assert eval_report.render_json(back) == text


def test_a_report_older_than_exact_pages_still_loads_and_compares():
    from localrag.evaluation import scoring as ev

    old_json = json.loads(eval_report.render_json(FULL))  # written before exact pages: none of their keys
    assert "metrics_exact" not in old_json and "rank_exact" not in old_json["per_query"][0]
    old = EvalResult.from_json(old_json)
    assert (old.page_tolerance, old.metrics_exact, old.counts_exact) == (None, {}, {})
    assert [q.exact for q in old.per_query] == [None, None] and not any(q.via_tolerance for q in old.per_query)
    assert "Made only by" not in eval_report.render_text(old) and "exact page" not in eval_report.render_text(old)
    compared = ev.compare_results(old, with_exact(), False, "old.json", resamples=100)
    assert compared.n == 2 and list(compared.metrics) == ["hit@5", "mrr"]


def test_an_edited_exact_rank_is_refused_with_its_question():
    data = json.loads(eval_report.render_json(with_exact()))
    data["per_query"][0]["rank_exact"] = 0
    with pytest.raises(ValueError) as caught:
        EvalResult.from_json(data)
    assert str(caught.value) == "question 'q1' has the exact rank 0, not a whole number >= 1 or null"
    data = json.loads(eval_report.render_json(with_exact()))
    data["metrics_exact"]["mrr"] = "high"
    with pytest.raises(ValueError) as caught:
        EvalResult.from_json(data)
    assert str(caught.value) == "the metric mrr on the exact page is 'high', not a number"
