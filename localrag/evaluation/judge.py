"""LLM judge of retrieved passages: which of the first k passages answer the question?

Page matching (is the gold page among the results?) misses equivalent passages in another
book or on another page. The judge shows a language model the question and the first
`JUDGE_K` retrieved passages, whatever their file and page, and asks which of them answer
it, through the cached, retrying client of `localrag.models.llm` (any OpenAI-compatible server).

Every answered call is cached in a committed JSON file keyed by sha256(model, prompt), so
a rerun asks only what it has not asked before: same model and same passages cost
nothing.

Agreement with page matching is reported because the two measures fail differently: the
page can match while the passage does not answer (only page), and an answer can come
from a page that is not the gold page (only judge); see Thakur et al. 2025, "Support
Evaluation for the TREC 2024 RAG Track" (LLM relevance judges vs. human assessors).
The report's text section is rendered by `localrag.evaluation.report.render_judge` from `judge_to_json`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localrag.models.llm import (CachedChat, CallLimitReached, ChatStopped, Limits, Progress, Retrying, Server,
                                 UnreadableReply, cache_key, collapse_whitespace, first_json_object, open_cache,
                                 reply_text)

# Passages shown to the judge per question (the first k retrieved).
JUDGE_K = 5
# Cache of verdicts, committed next to the report so reruns are free.
# Field of the documents, e.g. "Franz Kafka literature" or "option pricing"; "" for none.
JUDGE_DOMAIN = ""
# Passages longer than this are cut (characters, after collapsing whitespace).
JUDGE_MAX_PASSAGE_CHARS = 2000
# The model's reason is cut to this many characters in verdicts and reports.
JUDGE_MAX_REASON_CHARS = 300
# Characters of the question kept in a cache entry, so the file can be read by people.
JUDGE_QUESTION_EXCERPT_CHARS = 80

# Prompt template: {domain_clause}, {count}, {question} and {passages} are filled in.
JUDGE_PROMPT = """\
You check the results of a search engine{domain_clause}. Below are a question and \
{count} numbered passages the search returned for it, each with its file and page.

Question: {question}

Passages:
{passages}

Which passages answer the question, fully or in its essential core? A passage that \
merely touches the topic, mentions the same names or terms, or gives related background \
without the answer does not count. Use only what the passages say, not your own \
knowledge. The question may be in another language than the passages.

Reply with JSON only, no other text, in this form:
{{"answering": [<numbers of the answering passages; [] if none>], "reason": "<one sentence>"}}"""

# Keys accepted for the list of answering passages and for the reason, first found wins.
ANSWER_KEYS = ("answering", "answering_passages", "passages")
REASON_KEYS = ("reason", "reasoning", "explanation")
# Verdict statuses.
OK, UNREADABLE, NOT_JUDGED = "ok", "unreadable", "not judged"
# Why a question was not judged.
CALL_LIMIT, SERVER_STOPPED = "call limit", "server stopped"


@dataclass(frozen=True)
class Judging:
    """The judge of a run (--judge MODEL) and its options: where its verdicts are cached, how many passages it
    reads, how many new calls it may make and the documents' field."""

    model: str
    cache: str | os.PathLike[str]  # the verdict cache (--judge-cache, else the evaluation's default cache)
    k: int | None = None  # passages shown to the judge (None: JUDGE_K)
    max_calls: int | None = None  # new (uncached) calls allowed in this run (None: no limit)
    domain: str | None = None  # the documents' field, to sharpen the prompt


@dataclass(frozen=True)
class Passage:
    """One retrieved passage; `page` is 1-based, for display only."""

    source: str
    page: int | None
    text: str


@dataclass(frozen=True)
class JudgeItem:
    """A question and its retrieved passages, best first."""

    query_id: str
    question: str
    passages: Sequence[Passage]


@dataclass(frozen=True)
class Verdict:
    """The judge's answer for one question; `answering` holds 1-based passage numbers."""

    query_id: str
    status: str  # OK, UNREADABLE or NOT_JUDGED
    answering: list[int] = field(default_factory=list)
    reason: str = ""
    cached: bool = False
    error: str = ""  # why unreadable, or CALL_LIMIT / SERVER_STOPPED


@dataclass
class JudgeRun:
    """Verdicts in question order, call counts and why judging stopped early, if it did."""

    model: str
    verdicts: list[Verdict]
    cached_calls: int = 0
    new_calls: int = 0
    unreadable: int = 0
    stopped: str | None = None
    cache_warning: str | None = None


# -- cache --------------------------------------------------------------------------------


def read_entries(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The cache's entries by key, read without touching the file; none when it is
    missing or unreadable (`open_cache` moves such a file aside and says so)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def questions_without_verdict(
    questions: Iterable[str], model: str, cache_path: str | os.PathLike[str]
) -> list[str]:
    """The questions no cached verdict of `model` is about (by the question excerpt every
    verdict keeps): judging them surely asks the server. Known before any retrieval; a
    question with a verdict may still need a new one when its passages changed
    (`items_to_ask`)."""
    asked = {
        entry.get("question")
        for entry in read_entries(cache_path).values()
        if isinstance(entry, dict) and entry.get("model") == model
    }
    return [
        q for q in questions
        if cut(collapse_whitespace(q), JUDGE_QUESTION_EXCERPT_CHARS) not in asked
    ]


def items_to_ask(
    items: Iterable[JudgeItem],
    model: str,
    *,
    cache_path: str | os.PathLike[str],
    k: int | None = None,
    domain: str | None = None,
) -> list[str]:
    """The query ids of the items `run_judge` would ask the server about: passages to
    show, and no usable cached verdict for their prompt."""
    k = JUDGE_K if k is None else k
    entries = read_entries(cache_path)
    out = []
    for item in items:
        passages = list(item.passages)[:k]
        if not passages:
            continue
        prompt = build_prompt(item.question, passages, domain)
        entry = entries.get(cache_key(model, prompt))
        if not (isinstance(entry, dict) and is_valid_verdict_entry(entry, len(passages))):
            out.append(item.query_id)
    return out


# -- prompt -------------------------------------------------------------------------------


def cut(text: str, max_chars: int) -> str:
    """`text` cut to at most `max_chars` characters, marked with an ellipsis when cut."""
    if len(text) <= max_chars:
        return text
    return text[: max_chars - 1].rstrip() + "…"


def format_passage(number: int, passage: Passage, max_chars: int) -> str:
    """One numbered passage for the prompt: `[n] (file, page p) text`."""
    where = passage.source if passage.page is None else f"{passage.source}, page {passage.page}"
    return f"[{number}] ({where}) {cut(collapse_whitespace(passage.text), max_chars)}"


def build_prompt(
    question: str,
    passages: Sequence[Passage],
    domain: str | None = None,
    *,
    template: str | None = None,
    max_passage_chars: int | None = None,
) -> str:
    """The judge prompt for `question` and its numbered `passages` (settings at the top).

    The prompt is part of the cache key, so pass stable sources (file names, not
    absolute paths) or every machine asks anew.
    """
    domain = (JUDGE_DOMAIN if domain is None else domain).strip()
    max_chars = JUDGE_MAX_PASSAGE_CHARS if max_passage_chars is None else max_passage_chars
    return (JUDGE_PROMPT if template is None else template).format(
        domain_clause=f" about {domain}" if domain else "",
        count=len(passages),
        question=collapse_whitespace(question),
        passages="\n\n".join(
            format_passage(i, p, max_chars) for i, p in enumerate(passages, start=1)
        ),
    )


# -- reading replies ----------------------------------------------------------------------


def find_verdict_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text` with an answer key; prose and fences around it are fine."""
    return first_json_object(text, ANSWER_KEYS)


def passage_number(value: Any) -> int:
    """A passage number given as 2, 2.0, "2", "[2]" or "passage 2"."""
    if isinstance(value, bool):
        raise UnreadableReply(f"passage number {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(?:passage\s*)?[#\[(]?\s*(-?\d+)\s*[\])]?\s*", value, re.I)
        if match:
            return int(match.group(1))
    raise UnreadableReply(f"passage number {value!r}")


def parse_reply(content: Any, n_passages: int) -> tuple[list[int], str]:
    """The answering passage numbers (sorted, unique, 1..n) and the reason in a reply.

    Numbers outside 1..n are dropped and named at the end of the reason. Raises
    UnreadableReply when the reply holds no verdict.
    """
    verdict = find_verdict_object(reply_text(content))
    raw = next(verdict[key] for key in ANSWER_KEYS if key in verdict)
    if raw is None:
        raw = []
    elif not isinstance(raw, list):
        raw = [raw]
    numbers = {passage_number(value) for value in raw}
    answering = sorted(n for n in numbers if 1 <= n <= n_passages)
    ignored = sorted(numbers - set(answering))
    reason = next((verdict[key] for key in REASON_KEYS if key in verdict), "")
    reason = collapse_whitespace(reason if isinstance(reason, str) else json.dumps(reason))
    if ignored:
        note = f"[ignored passage numbers outside 1-{n_passages}: {', '.join(map(str, ignored))}]"
        reason = f"{reason} {note}" if reason else note
    return answering, cut(reason, JUDGE_MAX_REASON_CHARS)


# -- judging ------------------------------------------------------------------------------


def is_valid_verdict_entry(entry: Mapping[str, Any], n_passages: int) -> bool:
    """Whether a cache entry holds a usable verdict (it may have been edited by hand)."""
    answering = entry.get("answering")
    return (
        isinstance(answering, list)
        and all(type(n) is int and 1 <= n <= n_passages for n in answering)
        and isinstance(entry.get("reason", ""), str)
    )


def verdict_from_entry(query_id: str, entry: Mapping[str, Any], cached: bool) -> Verdict:
    """A Verdict from a (valid) cache entry."""
    return Verdict(
        query_id, OK, sorted(set(entry["answering"])), entry.get("reason", ""), cached=cached
    )


def run_judge(
    items: Iterable[JudgeItem],
    judging: Judging,
    *,
    server: Server = Server(),
    retrying: Retrying = Retrying(),
    progress: Progress | None = None,
    warn: Progress | None = None,
    flag: str = "the judge",
) -> JudgeRun:
    """Judge the first `judging.k` passages of every item with `judging.model`, in item order.

    Never raises for server trouble: a server that stays down or refuses stops new calls
    (`JudgeRun.stopped` says why) while cached verdicts are still used; unjudged questions
    get status NOT_JUDGED. `server.chat` replaces the ChatOpenAI client (anything with `invoke`).
    A corrupt cache moved aside goes to `warn` (default: `progress`), so a caller can show it without progress.
    `flag` names what needs the server when the environment has none (the CLI passes "--judge").
    """
    report = progress or (lambda _message: None)
    model, domain = judging.model, judging.domain
    k = JUDGE_K if judging.k is None else judging.k
    cache, cache_warning = open_cache(judging.cache)
    if cache_warning:
        (warn or report)(cache_warning)
    client = CachedChat(
        model, cache, who="judge", flag=flag, server=server, retrying=retrying,
        limits=Limits(judging.max_calls), progress=report,
    )
    run = JudgeRun(model=model, verdicts=[], cache_warning=cache_warning)
    items = list(items)
    for position, item in enumerate(items, start=1):
        client.asking = f"question {position} of {len(items)}"  # said while a reply is waited for
        verdict = judge_one(client, item, k, domain)
        run.verdicts.append(verdict)
        run.cached_calls += verdict.cached
        run.unreadable += verdict.status == UNREADABLE
        report(f"judge {position}/{len(items)} {item.query_id}: {describe_verdict(verdict)}")
        if client.stopped is not None and run.stopped is None:
            run.stopped = client.stopped
            report(f"judge stopped: {run.stopped}")
    run.new_calls = client.new_calls
    run.stopped = client.stopped
    return run


def judge_one(client: CachedChat, item: JudgeItem, k: int, domain: str | None) -> Verdict:
    """The verdict for one item: from the cache, a new call, or why there is none."""
    passages = list(item.passages)[:k]
    if not passages:
        return Verdict(item.query_id, OK, [], "no passages were retrieved")
    prompt = build_prompt(item.question, passages, domain)
    meta = {"question": cut(collapse_whitespace(item.question), JUDGE_QUESTION_EXCERPT_CHARS)}

    def parse(text: str) -> dict[str, Any]:
        answering, reason = parse_reply(text, len(passages))
        return {"answering": answering, "reason": reason}

    try:
        entry, cached = client.ask(
            prompt, parse, meta, lambda e: is_valid_verdict_entry(e, len(passages))
        )
    except UnreadableReply as error:
        return Verdict(item.query_id, UNREADABLE, error=str(error))
    except CallLimitReached:
        return Verdict(item.query_id, NOT_JUDGED, error=CALL_LIMIT)
    except ChatStopped:
        return Verdict(item.query_id, NOT_JUDGED, error=SERVER_STOPPED)
    return verdict_from_entry(item.query_id, entry, cached)


def status_note(status: str, error: str) -> str:
    """Why a question has no verdict: "unreadable reply (why)" or "not judged (why)"."""
    return f"unreadable reply ({error})" if status == UNREADABLE else f"not judged ({error})"


def describe_verdict(verdict: Verdict) -> str:
    """A short description of a verdict for progress lines."""
    if verdict.status != OK:
        return status_note(verdict.status, verdict.error)
    found = ", ".join(map(str, verdict.answering)) or "none"
    return f"answering {found}" + (" (cached)" if verdict.cached else "")


def judge_calls_line(run: JudgeRun) -> str:
    """A console line on the calls of a run; kept out of reports because it changes on rerun."""
    line = (
        f"judge {run.model}: {run.new_calls} new calls, {run.cached_calls} from cache, "
        f"{run.unreadable} unreadable"
    )
    return line + (f"; stopped: {run.stopped}" if run.stopped else "")


# -- summary and JSON --------------------------------------------------------------------


def first_answering(verdict: Verdict, k: int) -> int | None:
    """The best-ranked answering passage within the first `k`, or None."""
    return min((n for n in verdict.answering if n <= k), default=None)


def page_hit(page_rank: int | None, k: int) -> bool:
    """Whether page matching found the gold page within the first `k`."""
    return page_rank is not None and page_rank <= k


def summarize_judge(
    run: JudgeRun, page_ranks: Mapping[str, int | None], k: int = JUDGE_K
) -> dict[str, Any]:
    """Answer@k, MRR@k and agreement with page matching over the judged questions.

    Only questions with status OK count in shares and agreement; unreadable and
    unjudged ones are counted apart. A question missing from `page_ranks` counts as
    no page match.
    """
    judged = [v for v in run.verdicts if v.status == OK]
    firsts = [first_answering(v, k) for v in judged]
    judge_yes = [f is not None for f in firsts]
    page_yes = [page_hit(page_ranks.get(v.query_id), k) for v in judged]
    pairs = list(zip(judge_yes, page_yes))
    count = sum(judge_yes)
    return {
        "model": run.model,
        "k": k,
        "questions": len(run.verdicts),
        "judged": len(judged),
        "unreadable": sum(v.status == UNREADABLE for v in run.verdicts),
        "not_judged": sum(v.status == NOT_JUDGED for v in run.verdicts),
        "answer_count": count,
        "answer_at_k": count / len(judged) if judged else None,
        "mrr": sum(1 / f for f in firsts if f is not None) / len(judged) if judged else None,
        "agreement": {
            "both": pairs.count((True, True)),
            "judge_only": pairs.count((True, False)),
            "page_only": pairs.count((False, True)),
            "neither": pairs.count((False, False)),
        },
        "cached_calls": run.cached_calls,
        "new_calls": run.new_calls,
        "stopped": run.stopped,
    }


def question_rows(
    summary: Mapping[str, Any],
    verdicts: Sequence[Verdict],
    questions: Mapping[str, str],
    page_ranks: Mapping[str, int | None],
) -> list[dict[str, Any]]:
    """One row per verdict, in verdict order, with everything a report shows."""
    k = summary["k"]
    return [
        {
            "query_id": v.query_id,
            "question": collapse_whitespace(questions.get(v.query_id, "")),
            "status": v.status,
            "answering": [n for n in v.answering if n <= k],
            "first_answering": first_answering(v, k),
            "page_rank": page_ranks.get(v.query_id),
            "reason": v.reason,
            "error": v.error,
        }
        for v in verdicts
    ]


def judge_to_json(
    summary: Mapping[str, Any],
    verdicts: Sequence[Verdict],
    questions: Mapping[str, str],
    page_ranks: Mapping[str, int | None],
) -> dict[str, Any]:
    """Summary and question rows as a JSON-ready dict, stable on rerun (no call counts);
    the report renders its judge section from it (`localrag.evaluation.report.render_judge`)."""
    stable = {
        key: value for key, value in summary.items() if key not in ("cached_calls", "new_calls")
    }
    return {"summary": stable, "questions": question_rows(summary, verdicts, questions, page_ranks)}
