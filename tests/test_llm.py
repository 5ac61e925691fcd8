"""Tests of localrag.models.llm: environment check, reply text, cache, retries, call limit.

Calls go through the real langchain-openai client to a scripted local server
(tests/openai_stub.py), so no network and no model are needed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from localrag.models import llm
from localrag.models.llm import (CachedChat, CallLimitReached, ChatError, ChatStopped, Limits, ReplyCache, Retrying,
                                 Server, UnreadableReply, backoff_delay, check_environment, reply_cache_problem,
                                 reply_text)
from localrag.errors import RAGError
from openai_stub import closed_port, error_body

MODEL = "stub-model"
WHO, FLAG = "asker", "--ask"


# -- fixtures ---------------------------------------------------------------------------


def make_chat(tmp_path: Path, **options) -> CachedChat:
    return CachedChat(MODEL, ReplyCache(tmp_path / "cache.json"), who=WHO, flag=FLAG, **options)


def keep(text: str) -> dict:
    """A parse that keeps the reply as it is."""
    return {"reply": text}


# -- environment ------------------------------------------------------------------------


def test_environment_without_key_or_url_is_a_clear_error_naming_the_callers_flag():
    with pytest.raises(ChatError) as error:
        check_environment({"OPENAI_API_KEY": " ", "HOME": "/root"}, "--judge")
    assert str(error.value) == (
        "--judge needs a language model server, but neither OPENAI_API_KEY nor OPENAI_BASE_URL is set. "
        "Set OPENAI_API_KEY to use OpenAI, or OPENAI_BASE_URL for a local OpenAI-compatible server, e.g. "
        "OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama."
    )
    with pytest.raises(ChatError, match="^--llm m needs a language model server"):
        check_environment({}, "--llm m")


def test_environment_with_key_or_url_is_accepted_and_bad_url_rejected():
    check_environment({"OPENAI_API_KEY": "sk-x"}, FLAG)
    check_environment({"OPENAI_BASE_URL": "http://localhost:11434/v1"}, FLAG)
    with pytest.raises(ChatError, match="'localhost:11434' is not an http"):
        check_environment({"OPENAI_BASE_URL": "localhost:11434"}, FLAG)


def test_missing_environment_stops_the_chat_with_the_callers_flag(monkeypatch, tmp_path):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    chat = make_chat(tmp_path)
    with pytest.raises(ChatStopped, match=f"^{FLAG} needs a language model server"):
        chat.ask("Q?", keep)
    assert chat.stopped.startswith(f"{FLAG} needs") and chat.new_calls == 0


# -- reply text -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, expected",
    [
        ("plain", "plain"),
        (None, ""),
        # A reasoning model's think section, also without its opening tag.
        ("<think>maybe 1</think>answer", "answer"),
        ("maybe 1</think>\nanswer", "\nanswer"),
        # Blocks: plain strings and text dicts joined by newlines, reasoning blocks skipped.
        ([{"type": "reasoning", "text": "r"}, "a", {"type": "text", "text": "b"}, {"n": 1}], "a\nb"),
    ],
)
def test_reply_text(content, expected):
    assert reply_text(content) == expected


def test_reply_text_of_another_type_is_unreadable():
    with pytest.raises(UnreadableReply, match="reply content of type int"):
        reply_text(7)


# -- calls with retries against the stub server -----------------------------------------


def test_cached_chat_asks_once_caches_with_meta_and_sends_our_settings(stub, tmp_path):
    cache = ReplyCache(tmp_path / "goldset_cache.json")
    chat = CachedChat("gen", cache, who=WHO, flag=FLAG, retrying=Retrying(backoff_seconds=0))

    def parse(text: str) -> dict:
        return {"questions": json.loads(text)}

    stub.add(500, error_body("warming up"))
    stub.add_content('["Q1?", "Q2?"]')
    entry, cached = chat.ask("Write two questions.", parse, {"source": "a.pdf"})
    assert entry == {"questions": ["Q1?", "Q2?"], "source": "a.pdf", "model": "gen"}
    assert not cached
    again, cached = chat.ask("Write two questions.", parse, {"source": "a.pdf"})
    assert (again, cached) == (entry, True)
    assert len(stub.requests) == 2 and chat.new_calls == 1
    # Cost as the server reported it (the stub: 1 prompt and 1 completion token a reply), of new calls only.
    assert (chat.cached_hits, chat.prompt_tokens, chat.completion_tokens, chat.unreported_usage) == (1, 1, 1, 0)
    assert cache.get(hashlib.sha256(b"gen\nWrite two questions.").hexdigest()) == entry
    # Our prompt, our model, temperature 0 and the placeholder key (only OPENAI_BASE_URL is set).
    assert [r.prompt() for r in stub.requests] == ["Write two questions."] * 2
    assert {r.body["model"] for r in stub.requests} == {"gen"}
    assert stub.requests[-1].body["temperature"] == 0 and stub.requests[-1].body["seed"] == llm.SEED == 0
    assert stub.requests[-1].headers["authorization"] == f"Bearer {llm.PLACEHOLDER_API_KEY}"


def test_500_then_success_is_retried_and_reported_by_who(stub, tmp_path):
    stub.add(500, error_body("model is loading"))
    stub.add_content("fine")
    messages, sleeps = [], []
    chat = make_chat(tmp_path, retrying=Retrying(backoff_seconds=0.5, sleep=sleeps.append), progress=messages.append)
    assert chat.ask("Q?", keep) == ({"reply": "fine", "model": MODEL}, False)
    assert chat.stopped is None and len(stub.requests) == 2
    assert sleeps == [0.5]
    [message] = messages
    # The error type's name depends on the client version (openai or langchain-openai).
    assert message.startswith(f"{WHO}: ") and "Error" in message and "model is loading" in message
    assert message.endswith("; retry 1 of 4 in 0.5 s")


def test_backoff_doubles_and_honours_retry_after(stub, tmp_path):
    stub.add(500, error_body("a"))
    stub.add(503, error_body("b"))
    stub.add(429, error_body("slow down"), {"Retry-After": "7"})
    stub.add_content("ok")
    sleeps = []
    chat = make_chat(tmp_path, retrying=Retrying(max_retries=3, backoff_seconds=1, sleep=sleeps.append))
    assert chat.ask("Q?", keep)[0]["reply"] == "ok"
    # Waits 1, 2, then max(4, Retry-After 7) = 7.
    assert sleeps == [1, 2, 7]


def test_backoff_delay_by_hand(monkeypatch):
    assert [backoff_delay(r, 2) for r in range(4)] == [2, 4, 8, 16]
    assert backoff_delay(0, 2, retry_after=10) == 10
    assert backoff_delay(1, 2, retry_after=1) == 4  # our backoff wins when longer
    monkeypatch.setattr(llm, "MAX_BACKOFF_SECONDS", 60.0)
    assert backoff_delay(6, 2) == 60  # 128 capped


def test_server_that_stays_down_stops_every_later_uncached_prompt(stub, tmp_path):
    stub.add_content("cached")
    chat = make_chat(tmp_path, retrying=Retrying(max_retries=2, backoff_seconds=0))
    chat.ask("cached prompt", keep)
    for _ in range(3):
        stub.add(502, error_body("bad gateway"))
    with pytest.raises(ChatStopped) as error:
        chat.ask("Q1?", keep)
    assert len(stub.requests) == 4  # the cached prompt, then the first try and 2 retries
    assert str(error.value) == chat.stopped
    assert chat.stopped.startswith(f"The {WHO} server ({stub.base_url}) failed 3 times in a row for model "
                                   f"'{MODEL}'; last error: ")
    assert "bad gateway" in chat.stopped
    with pytest.raises(ChatStopped):
        chat.ask("Q2?", keep)  # not tried at all
    assert len(stub.requests) == 4
    assert chat.ask("cached prompt", keep) == ({"reply": "cached", "model": MODEL}, True)
    assert chat.new_calls == 1  # the failed prompt did not count


def test_closed_port_gives_clear_message_and_no_crash(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    url = f"http://127.0.0.1:{closed_port()}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    chat = make_chat(tmp_path, retrying=Retrying(max_retries=1, backoff_seconds=0))
    with pytest.raises(ChatStopped):
        chat.ask("Q?", keep)
    assert url in chat.stopped and "Connection error" in chat.stopped
    assert "Check that the server is running" in chat.stopped
    assert not (tmp_path / "cache.json").exists()


def test_bad_model_name_stops_at_once_with_the_servers_message(stub, tmp_path):
    stub.add(404, error_body("model 'nope' not found, try pulling it first"))
    chat = CachedChat("nope", ReplyCache(tmp_path / "cache.json"), who=WHO, flag=FLAG, retrying=Retrying(backoff_seconds=0))
    with pytest.raises(ChatStopped):
        chat.ask("Q?", keep)
    assert len(stub.requests) == 1  # no retries for a 4xx other than 429
    assert chat.stopped.startswith(f"The {WHO} server ({stub.base_url}) refused the request for model 'nope' "
                                   "with HTTP 404: ")
    assert "model 'nope' not found" in chat.stopped
    assert chat.stopped.endswith("Check the model name and OPENAI_API_KEY, then rerun; answered questions are "
                                 "cached.")


def test_a_body_that_is_no_chat_completion_is_unreadable_and_not_cached(stub, tmp_path):
    stub.add(200, "this is not a chat completion")
    chat = make_chat(tmp_path)
    with pytest.raises(UnreadableReply, match="not a chat completion"):
        chat.ask("Q?", keep)
    assert chat.new_calls == 1 and chat.stopped is None  # the server answered: the call counts
    assert not (tmp_path / "cache.json").exists()


def test_call_limit_counts_only_new_calls(stub, tmp_path):
    stub.add_content("first")
    chat = make_chat(tmp_path, limits=Limits(max_new_calls=1))
    chat.ask("Q1?", keep)
    assert chat.ask("Q1?", keep)[1]  # cached: free
    with pytest.raises(CallLimitReached):
        chat.ask("Q2?", keep)
    assert len(stub.requests) == 1


def test_injected_chat_needs_no_environment(monkeypatch, tmp_path):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)

    class FakeChat:
        """Answers every prompt with "yes", as a message object with `.content`."""

        def invoke(self, prompt):
            return type("Message", (), {"content": "yes"})()

    chat = make_chat(tmp_path, server=Server(chat=FakeChat()))
    assert chat.ask("Q?", keep) == ({"reply": "yes", "model": MODEL}, False)


# -- cache ------------------------------------------------------------------------------


def test_a_damaged_cache_is_moved_aside(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{\n  "k1": {\n    "x": [1', encoding="utf-8")  # cut off
    (tmp_path / "c.json.corrupt-1").write_text("older", encoding="utf-8")
    cache = ReplyCache(path)
    assert cache.corrupt_backup == tmp_path / "c.json.corrupt-2"
    assert cache.corrupt_error == "Expecting ',' delimiter: line 3 column 12 (char 23)"
    assert len(cache) == 0 and not path.exists()
    assert (tmp_path / "c.json.corrupt-1").read_text(encoding="utf-8") == "older"
    assert (tmp_path / "c.json.corrupt-2").read_text(encoding="utf-8") == '{\n  "k1": {\n    "x": [1'
    path.write_bytes(b'{}\xff')  # not UTF-8 after its start
    assert ReplyCache(path).corrupt_backup == tmp_path / "c.json.corrupt-3"
    path.write_text("", encoding="utf-8")  # empty: an empty cache, nothing moved
    assert (ReplyCache(path).corrupt_backup, len(ReplyCache(path))) == (None, 0)


@pytest.mark.parametrize("text, problem", [
    ("[1, 2]", "is not a reply cache (it does not begin as one: '[1, 2]')"),
    ("question,expected_source\nWhat is vega?,options.pdf\n",
     "is not a reply cache (it does not begin as one: 'question,expected_source What is vega?,o')"),
    ('{"version": 3, "files": {}}', "is not a reply cache (it does not begin as one: '{\"version\": 3, \"files\": {}}')"),
    ('{"settings": {"chunk_size": 800}, "version": 3}', "is a JSON file but not a reply cache (its 'version' is not an "
                                                        "entry)"),
])
def test_a_file_that_is_no_reply_cache_is_refused_and_left_as_it_is(tmp_path, text, problem):
    """A goldset or an index's manifest given as --judge-cache was moved aside and replaced by a cache."""
    path = tmp_path / "c.json"
    path.write_text(text, encoding="utf-8")
    assert reply_cache_problem(path) == problem
    with pytest.raises(RAGError) as caught:
        ReplyCache(path)
    assert str(caught.value) == (f"the reply cache {path} {problem}, so it is no cache of this tool and is left as it "
                                 f"is; give another cache file (a new one is made there), or move that file away")
    assert path.read_text(encoding="utf-8") == text and sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]


def test_readable_cache_has_no_backup_and_is_written_sorted_and_indented(tmp_path):
    path = tmp_path / "c.json"
    ReplyCache(path).put("k2", {"b": 1, "a": "ä"})
    ReplyCache(path).put("k1", {"x": []})  # a second cache reads the first one's file
    cache = ReplyCache(path)
    assert (cache.corrupt_backup, cache.corrupt_error, len(cache)) == (None, None, 2)
    assert path.read_text(encoding="utf-8") == (
        '{\n  "k1": {\n    "x": []\n  },\n  "k2": {\n    "a": "ä",\n    "b": 1\n  }\n}\n'
    )


def test_failed_write_leaves_the_old_cache_whole(tmp_path):
    path = tmp_path / "c.json"
    cache = ReplyCache(path)
    cache.put("k1", {"answering": [1]})
    before = path.read_text(encoding="utf-8")
    with pytest.raises(TypeError):
        cache.put("k2", {"answering": object()})  # not JSON: json.dump fails mid-way
    assert path.read_text(encoding="utf-8") == before
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]  # no temp file left


# -- the server check before a run --------------------------------------------------------


def test_check_server_asks_for_the_model_list_once_and_names_what_failed(stub, monkeypatch):
    chat = llm.make_chat(MODEL, FLAG)
    llm.check_server(chat, WHO)  # up: one GET of the model list, no chat call (no tokens, no model loaded)
    assert [(r.method, r.path) for r in stub.listings] == [("GET", "/v1/models")] and stub.requests == []
    for status, words in ((401, "refused the API key with HTTP 401 (AuthenticationError: Error code: 401 - stub: "
                                "status 401). Set OPENAI_API_KEY to a key it accepts, then rerun"),
                          (503, "failed with HTTP 503 (InternalServerError: Error code: 503 - stub: status 503). "
                                "Check that it runs properly, then rerun")):
        stub.models_status = status
        with pytest.raises(ChatError) as raised:
            llm.check_server(chat, WHO)
        assert str(raised.value) == f"The {WHO} server ({stub.base_url}) {words}"
    stub.models_status = 404  # a server without the list may still chat: up
    llm.check_server(chat, WHO)
    assert len(stub.listings) == 4 and stub.requests == []


def test_check_server_of_a_closed_port_says_which_url(monkeypatch):
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    with pytest.raises(ChatError) as raised:
        llm.check_server(llm.make_chat(MODEL, FLAG), WHO)
    assert str(raised.value) == (f"The {WHO} server ({base_url}) does not answer (APIConnectionError: Connection "
                                 f"error). Start it, or set OPENAI_BASE_URL to a running server, then rerun")


def test_check_first_checks_before_the_first_new_call_only(stub, tmp_path):
    stub.add_content("one")
    chat = make_chat(tmp_path, server=Server(check_first=True))
    assert chat.ask("p1", keep) == ({"reply": "one", "model": MODEL}, False)
    assert chat.ask("p1", keep)[1] is True  # cached
    assert (len(stub.listings), len(stub.requests)) == (1, 1)
    cached = make_chat(tmp_path, server=Server(check_first=True))
    assert cached.ask("p1", keep)[1] is True
    assert len(stub.listings) == 1  # every prompt cached: the server is never reached


def test_token_usage_is_read_as_the_server_reports_it_and_never_guessed():
    message = type("Message", (), {"usage_metadata": {"input_tokens": 120, "output_tokens": 7}})()
    assert llm.usage_of(message) == {"prompt_tokens": 120, "completion_tokens": 7}
    raw = type("Message", (), {"usage_metadata": None,
                               "response_metadata": {"token_usage": {"prompt_tokens": 5, "completion_tokens": 2}}})()
    assert llm.usage_of(raw) == {"prompt_tokens": 5, "completion_tokens": 2}
    assert llm.usage_of("plain text") is None  # a server that reports none: counted apart, not as 0 tokens


def test_a_reply_without_usage_is_counted_as_unreported(tmp_path):
    class Silent:
        def invoke(self, prompt):
            return type("Message", (), {"content": "ok"})()

    chat = make_chat(tmp_path, server=Server(chat=Silent()))
    chat.ask("Q?", keep)
    assert (chat.new_calls, chat.prompt_tokens, chat.completion_tokens, chat.unreported_usage) == (1, 0, 0, 1)


# -- a stalled server ---------------------------------------------------------------------


def test_a_stalled_server_says_what_it_waits_for_every_line_seconds_and_is_given_up_after_one_timeout(
        monkeypatch, tmp_path):
    """A server that answers its model list but never a chat request (a local server stuck in a generation) once
    printed nothing for 180 s and was given up after 5 tries of 180 s (15.5 min). Now a line every LINE_SECONDS
    says which server, model and question it waits for, and the request is not sent again after its timeout."""
    import time

    from localrag import progress
    from openai_stub import StalledServer

    monkeypatch.setattr(progress, "LINE_SECONDS", 1.0)
    monkeypatch.setattr(llm, "TIMEOUT_SECONDS", 2.5)
    lines: list[str] = []
    with StalledServer() as server:
        chat = make_chat(tmp_path, server=Server(environ={"OPENAI_BASE_URL": server.base_url}, check_first=True),
                         progress=lines.append)
        chat.asking = "question 3 of 18"
        started = time.monotonic()
        with pytest.raises(ChatStopped) as stopped:
            chat.ask("What is vega?", keep)
        waited = time.monotonic() - started
        with pytest.raises(ChatStopped):  # a later prompt is not sent: the chat stopped
            chat.ask("What is rho?", keep)
        assert server.chats == 1
    assert 2.5 <= waited < 10  # one timeout, no retries (they took 4 more timeouts and 30 s of backoff)
    waiting = f"waiting for the {WHO} server {server.base_url} (model {MODEL}): "
    assert lines[:2] == [f"{waiting}1 s, question 3 of 18", f"{waiting}2 s, question 3 of 18"]
    assert len(lines) in (2, 3) and all(line.startswith(waiting) for line in lines)  # a busy machine: one late
    assert str(stopped.value) == (
        f"The {WHO} server ({server.base_url}) sent no reply for model '{MODEL}' in 2.5 s (question 3 of 18); it is "
        f"stalled or overloaded. Check that it answers (restart it; a model too slow for this machine needs a "
        f"smaller one), then rerun; answered questions are cached.")
    assert chat.new_calls == 0 and len(chat.cache) == 0
