"""Tests for localrag/evaluation/answer_prompts.py: the answer and judge prompts, and every way a reply is read or
refused (an unreadable reply is never a silent verdict)."""
from __future__ import annotations

import pytest

from localrag.evaluation import answer_prompts as ap
from localrag.models.llm import UnreadableReply

PASSAGES = [ap.PromptPassage("3M_2018_10K.pdf", 60, "Purchases of property, plant and\nequipment (PP&E) 1,577"),
            ap.PromptPassage("notes.pdf", None, "x" * 10)]


def test_the_answer_prompt_shows_each_passage_under_the_citation_it_asks_for():
    prompt = ap.answer_prompt("What was 3M's  FY2018 capex?", PASSAGES)
    assert prompt.startswith("localRAG answer prompt v1.\n")
    assert prompt.endswith("Question: What was 3M's FY2018 capex?\n\nPassages:\n"
                           "[3M_2018_10K.pdf, p. 60]\nPurchases of property, plant and equipment (PP&E) 1,577\n\n"
                           "[notes.pdf]\nxxxxxxxxxx\n\nAnswer:")
    assert f"reply with exactly this sentence and nothing else: {ap.REFUSAL}" in prompt
    assert ap.format_passages(PASSAGES[1:], max_chars=5) == "[notes.pdf]\nxxxx…"
    assert ap.format_passages([]) == "(none)"


def test_judge_prompts_carry_their_version_and_inputs():
    assert ap.correctness_prompt("Q?", " $1577.00 ", "1.6 billion").endswith(
        "Question: Q?\nReference answer: $1577.00\nModel's answer: 1.6 billion")
    faithful = ap.faithfulness_prompt(PASSAGES[:1], ["Capex was $1,577 million.", "It rose."])
    assert faithful.startswith("localRAG faithfulness judge v1.\n")
    assert faithful.endswith("Sentences:\n1. Capex was $1,577 million.\n2. It rose.")
    assert ap.citation_prompt("It rose.", PASSAGES[:1]).endswith(
        "Sentence: It rose.\n\nCited passages:\n[3M_2018_10K.pdf, p. 60]\nPurchases of property, plant and "
        "equipment (PP&E) 1,577")


def test_correctness_replies():
    assert ap.read_correctness('Sure! ```json\n{"verdict": "Correct", "reason": "same  figure"}\n```') == (
        "correct", "same figure")
    assert ap.read_correctness('{"verdict": "refused"}') == ("refused", "")
    with pytest.raises(UnreadableReply, match=r"verdict 'partly' is not one of correct, incorrect, refused"):
        ap.read_correctness('{"verdict": "partly"}')
    with pytest.raises(UnreadableReply, match=r"verdict 1 is not one of"):
        ap.read_correctness('{"verdict": 1}')
    with pytest.raises(UnreadableReply) as caught:
        ap.read_correctness('{"verdict": "correct"')  # the small model stopped before the brace
    assert str(caught.value) == "no JSON object with 'verdict' in the reply: '{\"verdict\": \"correct\"'"


def test_faithfulness_replies_need_one_flag_per_sentence():
    assert ap.read_faithfulness('{"supported": [true, "no", "Yes"], "reason": 3}', 3) == ([True, False, True], "")
    with pytest.raises(UnreadableReply, match="^2 sentence verdicts for 3 sentences$"):
        ap.read_faithfulness('{"supported": [true, false]}', 3)
    with pytest.raises(UnreadableReply, match="^no list of sentence verdicts for 1 sentences$"):
        ap.read_faithfulness('{"supported": true}', 1)
    with pytest.raises(UnreadableReply, match=r"^sentence 2's verdict is 'maybe', not true or false$"):
        ap.read_faithfulness('{"supported": [true, "maybe"]}', 2)


def test_citation_replies():
    assert ap.read_citation('{"supported": true, "needed": [true, false], "reason": "p. 60 says it"}', 2) == (
        True, [True, False], "p. 60 says it")
    with pytest.raises(UnreadableReply, match="^1 'needed' verdicts for 2 cited passages$"):
        ap.read_citation('{"supported": true, "needed": [true]}', 2)
    with pytest.raises(UnreadableReply, match="^'supported' is None, not true or false$"):
        ap.read_citation('{"supported": null, "needed": []}', 0)


def test_the_refusal_is_recognised_as_written_and_only_then():
    assert ap.is_refusal("  I cannot answer this from the given  passages ")
    assert not ap.is_refusal("I cannot answer this from the given passages, but revenue was $5 bn.")
