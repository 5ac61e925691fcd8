"""Tests of localrag.evaluation.judge: prompt, reply parsing, verdicts, the judge cache, summary, JSON and report section.

Calls go through the real langchain-openai client to a scripted local server
(tests/openai_stub.py), so no network and no model are needed.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from localrag.evaluation import judge
from localrag.models import llm
from localrag.evaluation.judge import (CALL_LIMIT, NOT_JUDGED, OK, SERVER_STOPPED, UNREADABLE, JudgeItem, JudgeRun,
                                       Judging, Passage, Verdict, build_prompt, judge_to_json, parse_reply, run_judge,
                                       summarize_judge)
from localrag.models.llm import ReplyCache, Retrying, Server, UnreadableReply, cache_key
from localrag.evaluation.report import render_judge
from openai_stub import OpenAIStub, error_body

MODEL = "stub-judge"


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture
def cache_path(tmp_path):
    return tmp_path / "eval" / "judge_cache.json"


def make_items() -> list[JudgeItem]:
    """Three questions with three passages each."""
    return [
        JudgeItem(
            "q1",
            "When was Kafka born?",
            [
                Passage("kafka.pdf", 1, "Kafka was born on 3 July 1883 in Prague."),
                Passage("kafka.pdf", 2, "Prague was part of Austria-Hungary."),
                Passage("letters.pdf", 7, "He wrote many letters."),
            ],
        ),
        JudgeItem(
            "q2",
            "Where did Kafka work?",
            [
                Passage("kafka.pdf", 3, "His father owned a shop."),
                Passage("bio.pdf", 40, "He worked at the Workers' Accident Insurance Institute."),
                Passage("bio.pdf", 41, "Insurance work left him the afternoons."),
            ],
        ),
        JudgeItem(
            "q3",
            "Wer war Max Brod?",
            [
                Passage("bio.pdf", 9, "Max Brod was Kafka's friend and editor."),
                Passage("bio.pdf", 10, "Brod published the novels after Kafka's death."),
                Passage("kafka.pdf", 5, "Kafka studied law."),
            ],
        ),
    ]


def prompts(items: list[JudgeItem]) -> list[str]:
    return [build_prompt(item.question, item.passages) for item in items]


def render(run: JudgeRun, ranks: dict, questions: dict, k: int = judge.JUDGE_K) -> list[str]:
    """The report's judge section for `run`, as eval_retrieval.py builds it."""
    return render_judge(judge_to_json(summarize_judge(run, ranks, k), run.verdicts, questions, ranks))


def script_good_replies(stub: OpenAIStub) -> None:
    """q1: plain JSON; q2: code fence with numbers as strings; q3: content as blocks."""
    stub.add_content('{"answering": [1], "reason": "Passage 1 gives the date."}')
    stub.add_content(
        'Here is my verdict:\n```json\n{"answering": ["2", "3", "2"], '
        '"reason": "Passages 2 and 3 name the institute."}\n```'
    )
    stub.add_content(
        [
            {"type": "text", "text": '{"answering": [1, 2],'},
            {"type": "text", "text": ' "reason": "Both describe Brod."}'},
        ]
    )


# -- prompt -----------------------------------------------------------------------------


def test_prompt_snapshot_collapses_whitespace_and_cuts_long_passages():
    prompt = build_prompt(
        "Wann wurde  Kafka\ngeboren?",
        [
            Passage("kafka.pdf", 12, "Franz Kafka wurde am\n3. Juli 1883\tin Prag geboren."),
            Passage("briefe.pdf", None, "Ein sehr langer Brief an den Vater, der ihn nie erreichte"
                    "."),
        ],
        "Franz Kafka literature",
        max_passage_chars=50,
    )
    # Passage 1 collapses to exactly 50 characters: kept whole (the boundary). Passage 2
    # has 58: cut to its first 49 characters plus the ellipsis, 50 in all.
    assert prompt == (
        "You check the results of a search engine about Franz Kafka literature. Below are "
        "a question and 2 numbered passages the search returned for it, each with its file "
        "and page.\n"
        "\n"
        "Question: Wann wurde Kafka geboren?\n"
        "\n"
        "Passages:\n"
        "[1] (kafka.pdf, page 12) Franz Kafka wurde am 3. Juli 1883 in Prag geboren.\n"
        "\n"
        "[2] (briefe.pdf) Ein sehr langer Brief an den Vater, der ihn nie e…\n"
        "\n"
        "Which passages answer the question, fully or in its essential core? A passage that "
        "merely touches the topic, mentions the same names or terms, or gives related "
        "background without the answer does not count. Use only what the passages say, not "
        "your own knowledge. The question may be in another language than the passages.\n"
        "\n"
        "Reply with JSON only, no other text, in this form:\n"
        '{"answering": [<numbers of the answering passages; [] if none>], '
        '"reason": "<one sentence>"}'
    )


def test_prompt_without_domain_has_no_domain_clause():
    prompt = build_prompt("Q?", [Passage("a.pdf", 1, "x")], domain="")
    assert prompt.startswith("You check the results of a search engine. Below are a question")


# -- reply parsing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, expected",
    [
        ('{"answering": [2], "reason": "It says so."}', ([2], "It says so.")),
        # Prose around the object, and an earlier object without the answer key (trap).
        (
            'I read {"note": 1} first. Verdict: {"answering": [3, 1], "reason": "x"} done.',
            ([1, 3], "x"),
        ),
        ('```json\n{"answering": [], "reason": "None fits."}\n```', ([], "None fits.")),
        # Numbers as strings, duplicates, a float, "passage 2" and "[3]".
        ('{"answering": ["2", 2, 1.0, "passage 2", "[3]"], "reason": "r"}', ([1, 2, 3], "r")),
        # Out of range: 0 and 7 with 5 passages are dropped and noted.
        (
            '{"answering": [7, 2, 0], "reason": "r"}',
            ([2], "r [ignored passage numbers outside 1-5: 0, 7]"),
        ),
        # A single number instead of a list, null for none, other key names.
        ('{"answering": 4, "reasoning": "r"}', ([4], "r")),
        ('{"answering": null, "reason": "none"}', ([], "none")),
        ('{"passages": [5], "explanation": "multi\\n line  reason"}', ([5], "multi line reason")),
        # A reasoning model's think section holding a decoy object.
        ('<think>maybe {"answering": [1]}</think>{"answering": [2], "reason": "r"}', ([2], "r")),
        ('maybe {"answering": [1]}</think>\n{"answering": [2], "reason": "r"}', ([2], "r")),
        # Content as blocks: dicts with "text", plain strings; reasoning blocks skipped.
        (
            [
                {"type": "reasoning", "text": '{"answering": [1]}'},
                '{"answering": [4],',
                {"type": "text", "text": '"reason": "r"}'},
            ],
            ([4], "r"),
        ),
    ],
)
def test_parse_reply_reads_messy_replies(content, expected):
    assert parse_reply(content, 5) == expected


@pytest.mark.parametrize(
    "content",
    [
        '{"answering": [1,}',  # invalid JSON
        "Passage 2 answers the question.",  # no JSON at all
        "",
        None,
        '{"reason": "forgot the list"}',
        '{"answering": [{"n": 1}], "reason": "r"}',
        '{"answering": [true], "reason": "r"}',  # a bool is not a passage number
        '{"answering": ["two"], "reason": "r"}',
    ],
)
def test_parse_reply_rejects_replies_without_verdict(content):
    with pytest.raises(UnreadableReply):
        parse_reply(content, 5)


def test_parse_reply_cuts_long_reasons(monkeypatch):
    monkeypatch.setattr(judge, "JUDGE_MAX_REASON_CHARS", 10)
    # 10 characters allowed: 9 kept, then the ellipsis.
    assert parse_reply('{"answering": [1], "reason": "abcdefghijKLM"}', 1) == ([1], "abcdefghi…")


# -- run_judge against the stub server --------------------------------------------------


def test_run_judge_parses_caches_and_reruns_for_free(stub, cache_path):
    items = make_items()
    script_good_replies(stub)
    run = run_judge(items, Judging(MODEL, cache_path), retrying=Retrying(backoff_seconds=0))

    assert run.stopped is None
    assert [(v.query_id, v.status, v.answering, v.cached) for v in run.verdicts] == [
        ("q1", OK, [1], False),
        ("q2", OK, [2, 3], False),
        ("q3", OK, [1, 2], False),
    ]
    assert (run.new_calls, run.cached_calls, run.unreadable) == (3, 0, 0)

    # The client sent our exact prompts, to our model, with the placeholder key.
    assert [r.path for r in stub.requests] == ["/v1/chat/completions"] * 3
    assert [r.prompt() for r in stub.requests] == prompts(items)
    assert {r.body["model"] for r in stub.requests} == {MODEL}
    assert stub.requests[0].body["temperature"] == 0
    assert stub.requests[0].headers["authorization"] == f"Bearer {llm.PLACEHOLDER_API_KEY}"

    # The cache file: keyed by sha256(model \n prompt), sorted, indented, ending in a newline.
    text = cache_path.read_text(encoding="utf-8")
    data = json.loads(text)
    first_key = hashlib.sha256(f"{MODEL}\n{prompts(items)[0]}".encode()).hexdigest()
    assert data[first_key] == {
        "answering": [1],
        "model": MODEL,
        "question": "When was Kafka born?",
        "reason": "Passage 1 gives the date.",
    }
    assert text == json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert sorted(p.name for p in cache_path.parent.iterdir()) == ["judge_cache.json"]

    rerun = run_judge(items, Judging(MODEL, cache_path), retrying=Retrying(backoff_seconds=0))
    assert len(stub.requests) == 3  # zero new requests
    assert [(v.answering, v.reason, v.cached) for v in rerun.verdicts] == [
        (v.answering, v.reason, True) for v in run.verdicts
    ]
    assert (rerun.new_calls, rerun.cached_calls) == (0, 3)

    # The report text is the same for the fresh run and the cached rerun.
    ranks = {"q1": 1, "q2": None, "q3": 4}
    questions = {item.query_id: item.question for item in items}
    assert render(run, ranks, questions) == render(rerun, ranks, questions)


def test_another_model_is_asked_anew(stub, cache_path):
    items = make_items()[:1]
    stub.add_content('{"answering": [1], "reason": "a"}')
    stub.add_content('{"answering": [], "reason": "b"}')
    run_judge(items, Judging("model-a", cache_path))
    run = run_judge(items, Judging("model-b", cache_path))
    assert len(stub.requests) == 2
    assert run.verdicts[0].answering == [] and not run.verdicts[0].cached
    assert len(json.loads(cache_path.read_text())) == 2


def test_unreadable_reply_is_recorded_not_cached_and_asked_again(stub, cache_path):
    items = make_items()[:2]
    stub.add_content("Passage 1 answers it.")  # q1: prose, no JSON
    stub.add(200, "this is not a chat completion")  # q2: a body the client cannot read
    run = run_judge(items, Judging(MODEL, cache_path))

    assert [v.status for v in run.verdicts] == [UNREADABLE, UNREADABLE]
    assert "Passage 1 answers it." in run.verdicts[0].error
    assert "not a chat completion" in run.verdicts[1].error
    assert (run.unreadable, run.new_calls, run.stopped) == (2, 2, None)
    assert not cache_path.exists()

    stub.add_content('{"answering": [1], "reason": "ok now"}')
    stub.add_content('{"answering": [2], "reason": "ok now"}')
    rerun = run_judge(items, Judging(MODEL, cache_path))
    assert len(stub.requests) == 4
    assert [(v.status, v.answering) for v in rerun.verdicts] == [(OK, [1]), (OK, [2])]


def test_500_then_success_is_retried(stub, cache_path):
    stub.add(500, error_body("model is loading"))
    stub.add_content('{"answering": [1], "reason": "r"}')
    messages, sleeps = [], []
    run = run_judge(
        make_items()[:1], Judging(MODEL, cache_path), retrying=Retrying(backoff_seconds=0.5, sleep=sleeps.append),
        progress=messages.append,
    )
    assert run.verdicts[0].status == OK and run.stopped is None
    assert len(stub.requests) == 2
    assert sleeps == [0.5]
    # The client's retry line names the judge.
    assert any(m.startswith("judge: ") and "retry 1 of 4 in 0.5 s" in m and "model is loading" in m
               for m in messages)


def test_server_that_stays_down_stops_but_cached_verdicts_still_count(stub, cache_path):
    items = make_items()
    # First run caches q3 only.
    stub.add_content('{"answering": [1], "reason": "cached"}')
    run_judge(items[2:], Judging(MODEL, cache_path))
    stub.requests.clear()

    for _ in range(3):
        stub.add(502, error_body("bad gateway"))
    run = run_judge(items, Judging(MODEL, cache_path), retrying=Retrying(max_retries=2, backoff_seconds=0))

    assert len(stub.requests) == 3  # q1: first try and 2 retries; q2 is not tried at all
    assert [(v.status, v.error, v.cached) for v in run.verdicts] == [
        (NOT_JUDGED, SERVER_STOPPED, False),
        (NOT_JUDGED, SERVER_STOPPED, False),
        (OK, "", True),
    ]
    assert (run.new_calls, run.cached_calls) == (0, 1)
    assert "failed 3 times in a row" in run.stopped
    assert stub.base_url in run.stopped and "bad gateway" in run.stopped


def test_missing_environment_stops_instead_of_raising(monkeypatch, cache_path):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    run = run_judge(make_items()[:1], Judging(MODEL, cache_path))
    assert run.verdicts[0].error == SERVER_STOPPED
    assert run.stopped.startswith("the judge needs a language model server, but neither OPENAI_API_KEY nor "
                                  "OPENAI_BASE_URL is set.")
    # The CLI names its flag.
    run = run_judge(make_items()[:1], Judging(MODEL, cache_path), flag="--judge")
    assert run.stopped.startswith("--judge needs a language model server")


def test_max_new_calls_counts_only_new_calls(stub, cache_path):
    items = make_items()
    stub.add_content('{"answering": [1], "reason": "first"}')
    run_judge(items[:1], Judging(MODEL, cache_path))  # q1 now cached

    stub.add_content('{"answering": [2], "reason": "second"}')
    run = run_judge(items, Judging(MODEL, cache_path, max_calls=1))
    # q1 from the cache (free), q2 the one new call, q3 over the limit.
    assert [(v.query_id, v.status, v.error, v.cached) for v in run.verdicts] == [
        ("q1", OK, "", True),
        ("q2", OK, "", False),
        ("q3", NOT_JUDGED, CALL_LIMIT, False),
    ]
    assert len(stub.requests) == 2 and run.new_calls == 1
    lines = render(run, {}, {"q3": "Wer war Max Brod?"})
    assert lines[-1] == "  q3  judge  –  page  –  Wer war Max Brod? | not judged (call limit)"


def test_question_without_passages_needs_no_call(stub, cache_path):
    run = run_judge([JudgeItem("q9", "Anything?", [])], Judging(MODEL, cache_path))
    assert run.verdicts == [Verdict("q9", OK, [], "no passages were retrieved")]
    assert stub.requests == []


def test_only_first_k_passages_are_shown(stub, cache_path):
    item = make_items()[0]
    stub.add_content('{"answering": [2, 3], "reason": "3 is out of range for k=2"}')
    run = run_judge([item], Judging(MODEL, cache_path, k=2))
    assert stub.requests[0].prompt() == build_prompt(item.question, item.passages[:2])
    assert run.verdicts[0].answering == [2]
    assert run.verdicts[0].reason.endswith("[ignored passage numbers outside 1-2: 3]")


# -- cache ------------------------------------------------------------------------------


def test_corrupt_cache_is_kept_aside_not_overwritten(stub, cache_path):
    cache_path.parent.mkdir(parents=True)
    cache_path.write_text('{"abc": {"answering": [1]', encoding="utf-8")  # cut off mid-write
    (cache_path.parent / "judge_cache.json.corrupt-1").write_text("older", encoding="utf-8")
    stub.add_content('{"answering": [1], "reason": "r"}')
    messages = []
    run = run_judge(make_items()[:1], Judging(MODEL, cache_path), progress=messages.append)

    backup = cache_path.parent / "judge_cache.json.corrupt-2"
    assert backup.read_text(encoding="utf-8") == '{"abc": {"answering": [1]'
    assert (cache_path.parent / "judge_cache.json.corrupt-1").read_text() == "older"
    assert run.cache_warning == messages[0] and str(backup) in messages[0]
    assert run.verdicts[0].status == OK
    assert len(json.loads(cache_path.read_text())) == 1


def test_hand_edited_invalid_entry_is_asked_again(stub, cache_path):
    item = make_items()[0]
    key = cache_key(MODEL, build_prompt(item.question, item.passages))
    ReplyCache(cache_path).put(key, {"answering": [9], "reason": "typo", "model": MODEL})
    stub.add_content('{"answering": [1], "reason": "fresh"}')
    run = run_judge([item], Judging(MODEL, cache_path))
    assert len(stub.requests) == 1
    assert (run.verdicts[0].answering, run.verdicts[0].cached) == ([1], False)
    assert ReplyCache(cache_path).get(key)["reason"] == "fresh"


# -- summary and report -----------------------------------------------------------------


def hand_run() -> tuple[JudgeRun, dict[str, int | None], dict[str, str]]:
    verdicts = [
        Verdict("q1", OK, [2, 4], "P2 states it."),
        Verdict("q2", OK, [], "Nothing fits."),
        Verdict("q3", OK, [1], "P1 states it."),
        Verdict("q4", OK, [4], "Only P4."),
        Verdict("q5", UNREADABLE, error="no JSON object"),
        Verdict("q6", NOT_JUDGED, error=CALL_LIMIT),
    ]
    ranks = {"q1": 1, "q2": 3, "q3": None, "q4": 4, "q5": 1}
    questions = {q: f"Question {q[1]}?" for q in ("q1", "q2", "q3", "q4", "q5", "q6")}
    return JudgeRun("m", verdicts, cached_calls=4, new_calls=2, unreadable=1), ranks, questions


def test_summarize_judge_by_hand():
    run, ranks, _ = hand_run()
    # k = 3; judged = q1..q4 (q5 unreadable, q6 not judged are left out).
    # q1: first answering 2 (4 is beyond k), page 1 <= 3 -> both,       rr 1/2
    # q2: none,                              page 3 <= 3 -> page only,  rr 0
    # q3: first answering 1,                 no page     -> judge only, rr 1
    # q4: answering 4 > k, page 4 > k (trap: both beyond k) -> neither, rr 0
    # Answer@3 = 2/4 = 0.5; MRR@3 = (1/2 + 1) / 4 = 0.375.
    assert summarize_judge(run, ranks, k=3) == {
        "model": "m",
        "k": 3,
        "questions": 6,
        "judged": 4,
        "unreadable": 1,
        "not_judged": 1,
        "answer_count": 2,
        "answer_at_k": 0.5,
        "mrr": 0.375,
        "agreement": {"both": 1, "judge_only": 1, "page_only": 1, "neither": 1},
        "cached_calls": 4,
        "new_calls": 2,
        "stopped": None,
    }


def test_summary_of_nothing_judged_has_no_shares():
    summary = summarize_judge(JudgeRun("m", [Verdict("q1", NOT_JUDGED, error=CALL_LIMIT)]), {})
    assert (summary["judged"], summary["answer_at_k"], summary["mrr"]) == (0, None, None)


def test_render_judge_exact_text():
    run, ranks, questions = hand_run()
    assert render(run, ranks, questions, k=3) == [
        "LLM judge: model m, first 3 passages per question",
        "  judged questions    4 of 6 (unreadable 1, not judged 1)",
        "  Answer@3            0.500 (2 of 4)",
        "  MRR@3               0.375",
        "  judge vs page@3     both 1, judge only 1, page only 1, neither 1",
        "",
        "  per question: first answering passage (judge), first page-matching rank (page)",
        "  q1  judge  2  page  1  Question 1? | P2 states it.",
        "  q2  judge  –  page  3  Question 2? | Nothing fits.",
        "  q3  judge  1  page  –  Question 3? | P1 states it.",
        "  q4  judge  –  page  4  Question 4? | Only P4.",
        "  q5  judge  –  page  1  Question 5? | unreadable reply (no JSON object)",
        "  q6  judge  –  page  –  Question 6? | not judged (call limit)",
    ]


def test_judge_to_json_holds_the_report_content_without_call_counts():
    run, ranks, questions = hand_run()
    data = judge_to_json(summarize_judge(run, ranks, k=3), run.verdicts, questions, ranks)
    assert "cached_calls" not in data["summary"] and "new_calls" not in data["summary"]
    assert data["summary"]["mrr"] == 0.375
    assert [row["query_id"] for row in data["questions"]] == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert data["questions"][0] == {
        "query_id": "q1",
        "question": "Question 1?",
        "status": OK,
        "answering": [2],  # 4 is beyond k = 3
        "first_answering": 2,
        "page_rank": 1,
        "reason": "P2 states it.",
        "error": "",
    }
    json.dumps(data)  # JSON-ready


def test_injected_chat_needs_no_environment(monkeypatch, cache_path):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)

    class FakeChat:
        """Answers every prompt with passage 3, as a message object with `.content`."""

        def __init__(self):
            self.prompts = []

        def invoke(self, prompt):
            self.prompts.append(prompt)
            return type("Message", (), {"content": '{"answering": [3], "reason": "fake"}'})()

    fake = FakeChat()
    run = run_judge(make_items()[:2], Judging(MODEL, cache_path), server=Server(chat=fake))
    assert fake.prompts == prompts(make_items()[:2])
    assert [(v.status, v.answering) for v in run.verdicts] == [(OK, [3]), (OK, [3])]
