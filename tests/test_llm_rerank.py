"""Tests of localrag/retrieval/llm_rerank.py: grades parsed by hand, a rerank through the scripted OpenAI-compatible stub
(order, ties, the cache serving a rerun), the call limit and an unreadable reply as clear errors."""
from __future__ import annotations

import json

import pytest

import eval_retrieval as er
from local_rag import LocalRAG, RAGError
from localrag.models.llm import UnreadableReply
from localrag.retrieval.llm_rerank import parse_grade, prompt_for
from openai_stub import closed_port

VEGA_QUERY = "How sensitive is the option value to volatility?"


def keys(results) -> list[tuple[str, int]]:
    return [(doc.metadata["source"], doc.metadata["page"]) for doc, _ in results]


@pytest.mark.parametrize("reply, grade", [
    ("7", 7), ("Grade: 10/10", 10), (" 0\n", 0), ("7/10", 7), ("Grade: 7", 7), ("**8**", 8), ("7.", 7),
    ("9 out of 10", 9), ("Grade (0-10): 6", 6),  # the prompt's scale echoed is no grade
    ("8\n\nThe passage gives Equation 21.23.", 8),  # the grade first, words after
    ("It names 2 options and the answer. Grade: 4", 4),  # a labelled grade wins over an earlier number
])
def test_parse_grade(reply, grade):
    assert parse_grade(reply) == {"grade": grade, "reply": reply}  # the reply is kept: a cached grade is re-read


@pytest.mark.parametrize("reply, why", [
    ("no idea", "no grade from 0 to 10 in the reply 'no idea'"), ("-", "no grade from 0 to 10 in the reply '-'"),
    ("", "no grade from 0 to 10 in the reply ''"),
    ("-3", "the reply '-3' grades -3, not a whole number from 0 to 10"),  # was read as 3 and cached
    ("11", "the reply '11' grades 11, not a whole number from 0 to 10"),
    ("100", "the reply '100' grades 100, not a whole number from 0 to 10"),
    ("3.5", "the reply '3.5' grades 3.5, not a whole number from 0 to 10"),  # was read as 3
    ("+5", "the reply '+5' grades +5, not a whole number from 0 to 10"),
    ("Grade: 7/5", "the reply 'Grade: 7/5' grades 7/5, not a whole number from 0 to 10"),
    ("Grade: -1", "the reply 'Grade: -1' grades -1, not a whole number from 0 to 10"),
])
def test_replies_without_a_grade_are_unreadable(reply, why):
    with pytest.raises(UnreadableReply) as caught:
        parse_grade(reply)
    assert str(caught.value) == why


def test_prompt_shows_the_page_text_without_its_header():
    prompt = prompt_for(" Why? ", "[a.pdf, page 3] a | Item 7\nThe   answer\nis here.")
    assert "Question: Why?\n" in prompt and "Passage:\nThe answer is here.\n" in prompt and "a.pdf" not in prompt


def test_llm_rerank_orders_by_grade_and_a_rerun_asks_nothing(tiny_index, stub, tmp_path):
    cache = tmp_path / "judge_cache.json"
    # Dense order: options p0, options p1, weather p0, scan p0, Literatur p0; graded 3, 9, 9, 1, 0. The tie of 9s
    # keeps the dense order (options p1 first), and every reply is cached.
    for grade in ("3", "9", "Grade: 9", "1", "0"):
        stub.add_content(grade)
    rag = LocalRAG(tiny_index[1], reranker_model="openai:stub-model", rerank_cache=cache, quiet=True)
    found = rag.retrieve(VEGA_QUERY, k=5, mode="dense")
    assert keys(found) == [("options.pdf", 1), ("weather.pdf", 0), ("options.pdf", 0), ("scan.pdf", 0),
                           ("Literatur_Übersicht.pdf", 0)]
    assert [s for _, s in found][2:] == [3.0, 1.0, 0.0] and found[1][1] < found[0][1] == 9.0
    assert len(stub.requests) == 5 and "Question: " + VEGA_QUERY in stub.requests[0].prompt()
    assert rag.describe_order("dense") == "LLM grades 0-10 (openai:stub-model) over dense candidates"
    # Another LocalRAG over the same cache: every grade from the file, no request.
    again = LocalRAG(tiny_index[1], reranker_model="openai:stub-model", rerank_cache=cache, quiet=True)
    assert keys(again.retrieve(VEGA_QUERY, k=5, mode="dense")) == keys(found)
    assert len(stub.requests) == 5
    assert len(json.loads(cache.read_text())) == 5


def test_call_limit_and_unreadable_reply_are_errors_that_keep_the_grades(tiny_index, stub, tmp_path):
    cache = tmp_path / "cache.json"
    for grade in ("3", "9"):
        stub.add_content(grade)
    rag = LocalRAG(tiny_index[1], reranker_model="openai:stub-model", rerank_cache=cache, rerank_max_calls=2,
                   quiet=True)
    with pytest.raises(RAGError) as limit:
        rag.retrieve(VEGA_QUERY, k=5, mode="dense")
    assert str(limit.value) == ("the LLM reranker openai:stub-model made its 2 new calls (the call limit); its "
                                "grades so far are cached, so a rerun goes on from there, or raise the limit")
    assert len(json.loads(cache.read_text())) == 2
    stub.add_content("I cannot say.")
    rag = LocalRAG(tiny_index[1], reranker_model="openai:stub-model", rerank_cache=cache, quiet=True)
    with pytest.raises(RAGError) as unreadable:
        rag.retrieve(VEGA_QUERY, k=5, mode="dense")
    assert str(unreadable.value) == (
        "the LLM reranker openai:stub-model gave no grade for a passage (no grade from 0 to 10 in the reply "
        "'I cannot say.'); a model that cannot follow the prompt cannot rerank")
    assert len(json.loads(cache.read_text())) == 2  # nothing cached for the unreadable reply


def test_a_reranker_server_that_is_not_running_stops_at_once(tiny_index, tmp_path, monkeypatch):
    """The server is checked before the first new grade: no retries for a server that is not there."""
    from localrag.models import llm

    monkeypatch.setattr(llm, "BACKOFF_SECONDS", 0.0)  # the old code retried (30 s) before it said so
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    rag = LocalRAG(tiny_index[1], reranker_model="openai:stub-model", rerank_cache=tmp_path / "cache.json",
                   quiet=True)
    with pytest.raises(RAGError) as raised:
        rag.retrieve(VEGA_QUERY, k=5, mode="dense")
    assert str(raised.value) == (f"the LLM reranker openai:stub-model stopped: The reranker server ({base_url}) does "
                                 f"not answer (APIConnectionError: Connection error). Start it, or set OPENAI_BASE_URL "
                                 f"to a running server, then rerun")


def test_cli_refuses_an_llm_reranker_without_a_server(monkeypatch, capsys):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert er.main(["--rerank-model", "openai:qwen"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: --rerank-model openai:MODEL needs a language model server, but neither OPENAI_API_KEY nor "
        "OPENAI_BASE_URL is set.")


def test_a_negative_reply_is_never_cached_and_a_cached_grade_is_read_again_from_its_reply(tiny_index, stub,
                                                                                           tmp_path):
    """"-3" was graded 3 and cached as a valid grade. A cached grade is now trusted only when its kept reply reads
    as that grade today; an entry without its reply (made by the old parser) cannot be read again, so it is asked
    again once, like a prompt never asked."""
    cache = tmp_path / "cache.json"
    stub.add_content("-3")
    rag = LocalRAG(tiny_index[1], reranker_model="openai:stub-model", rerank_cache=cache, quiet=True)
    with pytest.raises(RAGError) as unreadable:
        rag.retrieve(VEGA_QUERY, k=5, mode="dense")
    assert str(unreadable.value) == (
        "the LLM reranker openai:stub-model gave no grade for a passage (the reply '-3' grades -3, not a whole "
        "number from 0 to 10); a model that cannot follow the prompt cannot rerank")
    assert not cache.exists()  # nothing cached
    for grade in ("3", "9", "9", "1", "0"):
        stub.add_content(grade)
    first = keys(LocalRAG(tiny_index[1], reranker_model="openai:stub-model", rerank_cache=cache,
                          quiet=True).retrieve(VEGA_QUERY, k=5, mode="dense"))
    entries = json.loads(cache.read_text())
    assert sorted(e["reply"] for e in entries.values()) == ["0", "1", "3", "9", "9"] and len(stub.requests) == 6
    # Three entries as the old parser left them: "-3" read as 3, "8.5" as 8, and one without its reply.
    tampered = {"3": {"grade": 3, "reply": "-3"}, "1": {"grade": 8, "reply": "8.5"}, "0": {"grade": 0}}
    for key, entry in entries.items():
        if entry["reply"] in tampered:
            entries[key] = {**tampered.pop(entry["reply"]), "model": "stub-model"}
    cache.write_text(json.dumps(entries))
    for grade in ("3", "1", "0"):  # the model's replies, asked again in dense order: options p0, scan p0, Literatur
        stub.add_content(grade)
    again = LocalRAG(tiny_index[1], reranker_model="openai:stub-model", rerank_cache=cache, quiet=True)
    assert keys(again.retrieve(VEGA_QUERY, k=5, mode="dense")) == first
    assert len(stub.requests) == 9  # the three untrusted entries asked again, the two good ones served
    assert sorted(e["reply"] for e in json.loads(cache.read_text()).values()) == ["0", "1", "3", "9", "9"]

