"""Tests for localrag/evaluation/answer_judge.py with a scripted chat: correct, incorrect and refused answers, a
broken reply, a call limit and a stopped server, each with its exact counts; a cached rerun makes no call."""
from __future__ import annotations

import json

from localrag.evaluation import answer_judge as aj
from localrag.evaluation.answer_prompts import REFUSAL, PromptPassage
from localrag.models.llm import CachedChat, Limits, ReplyCache, Retrying, Server

P60 = PromptPassage("3M_2018_10K.pdf", 60, "Purchases of property, plant and equipment (PP&E) were $1,577 million.")
P12 = PromptPassage("3M_2018_10K.pdf", 12, "3M is a diversified technology company.")
GOLD = (("3M_2018_10K.pdf", 60),)


def item(query_id: str, answer: str, reference: str = "$1577.00", passages=(P60, P12)) -> aj.AnswerItem:
    return aj.AnswerItem(query_id, "What was 3M's FY2018 capital expenditure?", reference, answer, passages, GOLD)


ITEMS = [
    item("right", "3M spent $1,577 million on capital expenditure [3M_2018_10K.pdf, p. 60]. "
                  "It is a technology company [3M_2018_10K.pdf, p. 12]."),
    item("wrong", "3M spent $2.1 billion [3M_2018_10K.pdf, p. 12]."),
    item("refused", REFUSAL),
    item("noref", "About $1.6 billion [3M_2018_10K.pdf, p. 60].", reference=""),
]


class ScriptedJudge:
    """Replies by prompt: the correctness verdict by the answer's query, faithfulness and citations by content."""

    def __init__(self, broken: str = ""):
        self.prompts: list[str] = []
        self.broken = broken

    def invoke(self, prompt: str):
        self.prompts.append(prompt)
        if self.broken and self.broken in prompt:
            return type("Message", (), {"content": "Sure, the verdict is: correct"})()  # no JSON
        if prompt.startswith("localRAG correctness judge"):
            verdict = ("refused" if REFUSAL in prompt else "correct" if "1,577" in prompt or "1.6 billion" in prompt
                       else "incorrect")
            reply = {"verdict": verdict, "reason": "compared"}
        elif prompt.startswith("localRAG faithfulness judge"):
            sentences = prompt.split("Sentences:\n", 1)[1].splitlines()
            reply = {"supported": ["2.1 billion" not in s for s in sentences]}
        else:
            sentence = prompt.split("Sentence: ", 1)[1].split("\n", 1)[0]
            reply = {"supported": "2.1 billion" not in sentence, "needed": [True], "reason": "cited"}
        return type("Message", (), {"content": json.dumps(reply)})()


def chat(tmp_path, judge, **options) -> CachedChat:
    return CachedChat("judge-model", ReplyCache(tmp_path / "cache.json"), who="judge", flag="--answer-judge",
                      server=Server(chat=judge), retrying=Retrying(max_retries=0, backoff_seconds=0), **options)


def test_each_verdict_of_each_answer(tmp_path):
    client = chat(tmp_path, ScriptedJudge())
    right, wrong, refused, noref = [aj.judge_answer(client, i) for i in ITEMS]
    assert (right.correctness, right.figures.passed, right.supported, right.citations.cites_gold) == (
        "correct", True, [True, True], True)
    assert (right.cited_supported, right.needed) == ({0: True, 1: True}, [True, True])
    assert (wrong.correctness, wrong.figures.passed, wrong.supported, wrong.citations.cites_gold) == (
        "incorrect", False, [False], False)
    assert wrong.cited_supported == {0: False}
    assert (refused.refusal, refused.correctness, refused.faithfulness_status, refused.citations.parsed) == (
        True, "refused", "refused", ())
    assert (noref.correctness, noref.correctness_status, noref.figures) == (None, "no reference", None)
    # 3 correctness + 3 faithfulness (not the refusal) + 4 cited sentences = 10 calls
    assert client.new_calls == 10
    rates = aj.answer_rates([right, wrong, refused, noref], resamples=200)
    assert [(r.count, r.judged, r.unjudged) for r in (rates.correct, rates.refused, rates.figures, rates.faithful,
                                                      rates.cites_gold, rates.citation_recall,
                                                      rates.citation_precision)] == [
        (1, 3, 0), (1, 3, 0), (1, 3, 0), (2, 3, 0), (2, 4, 0), (3, 4, 0), (4, 4, 0)]
    assert aj.agreement_with_figures([right, wrong, refused, noref]) == (2, 2)
    # A rerun with the cache asks nothing and judges alike.
    again = chat(tmp_path, ScriptedJudge())
    assert [aj.judge_answer(again, i) for i in ITEMS] == [right, wrong, refused, noref]
    assert again.new_calls == 0 and again.cached_hits == 10


def test_an_unreadable_reply_leaves_that_question_unjudged_and_says_so(tmp_path):
    client = chat(tmp_path, ScriptedJudge(broken="2.1 billion"))
    verdicts = [aj.judge_answer(client, i) for i in ITEMS[:2]]
    assert verdicts[1].correctness is None
    assert verdicts[1].correctness_status == ("unreadable reply (no JSON object with 'verdict' in the reply: "
                                              "'Sure, the verdict is: correct')")
    assert verdicts[1].supported is None and verdicts[1].faithfulness_status.startswith("unreadable reply")
    rates = aj.answer_rates(verdicts, resamples=200)
    assert (rates.correct.count, rates.correct.judged, rates.correct.unjudged) == (1, 1, 1)
    assert rates.correct.text() == "1.000 [1.000, 1.000] (1 of 1; 1 not judged)"


def test_a_call_limit_and_a_stopped_server_are_not_judged(tmp_path):
    limited = chat(tmp_path, ScriptedJudge(), limits=Limits(max_new_calls=1))
    verdict = aj.judge_answer(limited, ITEMS[0])
    assert (verdict.correctness, verdict.faithfulness_status, verdict.citation_status) == (
        "correct", "not judged (call limit reached)", "not judged (call limit reached)")
    assert verdict.cited_supported == {0: None, 1: None} and verdict.needed == [None, None]

    class Down:
        def invoke(self, prompt):
            import httpx
            import openai

            raise openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1"))

    stopped = chat(tmp_path / "other", Down())
    (tmp_path / "other").mkdir()
    verdict = aj.judge_answer(stopped, ITEMS[1])
    assert verdict.correctness_status == verdict.faithfulness_status == "not judged (server stopped)"
    assert stopped.new_calls == 0 and stopped.stopped.startswith("The judge server")
    rates = aj.answer_rates([verdict], resamples=200)
    assert rates.correct.text() == "no question judged (1 not judged)"
