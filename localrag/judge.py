"""LLM judge of retrieved passages: which of the first k passages answer the question?

Page matching (is the gold page among the results?) misses equivalent passages in another
book or on another page. The judge shows a language model the question and the first
`JUDGE_K` retrieved passages, whatever their file and page, and asks which of them answer
it. Any OpenAI-compatible server works (OpenAI, Ollama, llama.cpp, vLLM) through
`langchain-openai`'s `ChatOpenAI`, configured by the standard OPENAI_API_KEY and
OPENAI_BASE_URL variables.

Every answered call is cached in a committed JSON file keyed by sha256(model, prompt), so
a rerun asks only what it has not asked before: same model and same passages cost
nothing. `CachedChat` is the reusable part (cache, retries, call limit) for other prompts
such as the goldset generator's.

Agreement with page matching is reported because the two measures fail differently: the
page can match while the passage does not answer (only page), and an answer can come
from a page that is not the gold page (only judge); see Thakur et al. 2025, "Support
Evaluation for the TREC 2024 RAG Track" (LLM relevance judges vs. human assessors).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localrag.files import write_json_atomic

# Passages shown to the judge per question (the first k retrieved).
JUDGE_K = 5
# Cache of verdicts, committed next to the report so reruns are free.
JUDGE_CACHE_PATH = "eval/judge_cache.json"
# Retries after the first try for transient failures (timeouts, 429, 5xx, no connection).
JUDGE_MAX_RETRIES = 4
# Wait before the first retry, doubled for each further retry.
JUDGE_BACKOFF_SECONDS = 2.0
# Longest wait between two tries, also for a server's Retry-After.
JUDGE_MAX_BACKOFF_SECONDS = 60.0
# Seconds one request may take; local models on a CPU are slow.
JUDGE_TIMEOUT_SECONDS = 180.0
# Sampling temperature: 0 makes verdicts as repeatable as the server allows.
JUDGE_TEMPERATURE = 0.0
# Field of the documents, e.g. "Franz Kafka literature" or "option pricing"; "" for none.
JUDGE_DOMAIN = ""
# Passages longer than this are cut (characters, after collapsing whitespace).
JUDGE_MAX_PASSAGE_CHARS = 2000
# The model's reason is cut to this many characters in verdicts and reports.
JUDGE_MAX_REASON_CHARS = 300
# Characters of the question kept in a cache entry, so the file can be read by people.
JUDGE_QUESTION_EXCERPT_CHARS = 80
# Characters of the question shown on a report line.
JUDGE_REPORT_QUESTION_CHARS = 60
# Key sent when only OPENAI_BASE_URL is set: local servers ignore it, the client needs one.
JUDGE_PLACEHOLDER_API_KEY = "local-server-needs-no-key"
# HTTP statuses worth retrying besides every 5xx (the same set the openai SDK retries).
JUDGE_TRANSIENT_STATUS = frozenset({408, 409, 429})
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

# Width of the labels in the report's summary block.
SUMMARY_LABEL_WIDTH = 20

Progress = Callable[[str], None]


class JudgeError(Exception):
    """The judge cannot run as configured (no server given, bad URL)."""


class JudgeStop(JudgeError):
    """Judging must stop: the server stays down or refuses the request."""


class CallLimitReached(Exception):
    """The run already made its allowed number of new calls."""


class UnreadableReply(ValueError):
    """The model's reply holds no readable verdict."""


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


# -- environment and client ---------------------------------------------------------------


def check_judge_environment(environ: Mapping[str, str]) -> None:
    """Raise JudgeError unless OPENAI_API_KEY or an http(s) OPENAI_BASE_URL is set."""
    key = environ.get("OPENAI_API_KEY", "").strip()
    base_url = environ.get("OPENAI_BASE_URL", "").strip()
    if not key and not base_url:
        raise JudgeError(
            "--judge needs a language model server, but neither OPENAI_API_KEY nor "
            "OPENAI_BASE_URL is set. Set OPENAI_API_KEY to use OpenAI, or OPENAI_BASE_URL "
            "for a local OpenAI-compatible server, e.g. "
            "OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama."
        )
    if base_url and not re.match(r"https?://[^/\s]+", base_url):
        raise JudgeError(
            f"OPENAI_BASE_URL={base_url!r} is not an http(s) URL; write it in full, "
            "e.g. http://localhost:11434/v1."
        )


def make_chat(
    model: str, environ: Mapping[str, str] | None = None, timeout_seconds: float | None = None
) -> Any:
    """A ChatOpenAI client for `model` that never retries by itself (CachedChat does)."""
    env = os.environ if environ is None else environ
    check_judge_environment(env)
    # Imported here so that evaluation without --judge does not load the OpenAI client.
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=model,
        api_key=env.get("OPENAI_API_KEY", "").strip() or JUDGE_PLACEHOLDER_API_KEY,
        base_url=env.get("OPENAI_BASE_URL", "").strip() or None,
        timeout=JUDGE_TIMEOUT_SECONDS if timeout_seconds is None else timeout_seconds,
        max_retries=0,
        temperature=JUDGE_TEMPERATURE,
    )


# -- prompt -------------------------------------------------------------------------------


def collapse_whitespace(text: str) -> str:
    """`text` with every run of whitespace replaced by one space, stripped."""
    return " ".join(text.split())


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


def reply_text(content: Any) -> str:
    """The text of a message's content: a string, or a list of strings and text blocks.

    Reasoning blocks are skipped, and so is a `<think>…</think>` preamble, which local
    reasoning models (DeepSeek-R1, Qwen3) put before their answer.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif (
                isinstance(block, dict)
                and isinstance(block.get("text"), str)
                and block.get("type") not in ("reasoning", "thinking")
            ):
                parts.append(block["text"])
        text = "\n".join(parts)
    else:
        raise UnreadableReply(f"reply content of type {type(content).__name__}")
    # Some servers drop the opening tag, so cut at the last closing one.
    return text.rsplit("</think>", 1)[-1] if "</think>" in text else text


def find_verdict_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text` with an answer key; prose and fences around it are fine."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict) and any(key in value for key in ANSWER_KEYS):
            return value
    raise UnreadableReply(
        f"no JSON object with {ANSWER_KEYS[0]!r} in the reply: "
        f"{cut(collapse_whitespace(text), 120)!r}"
    )


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


# -- cache --------------------------------------------------------------------------------


def cache_key(model: str, prompt: str) -> str:
    """sha256 of the model name and the full prompt (a newline between them)."""
    return hashlib.sha256(f"{model}\n{prompt}".encode("utf-8")).hexdigest()


def free_backup_path(path: Path) -> Path:
    """The first `<path>.corrupt-<n>` (n = 1, 2, ...) that does not exist yet."""
    n = 1
    while (candidate := path.with_name(f"{path.name}.corrupt-{n}")).exists():
        n += 1
    return candidate


class JudgeCache:
    """A JSON file of cache entries by key, rewritten whole after every `put`.

    A file that is not a JSON object of objects is moved aside to
    `<name>.corrupt-<n>` (see `corrupt_backup`, `warning`) and the cache starts empty.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.corrupt_backup: Path | None = None
        self.warning: str | None = None
        self._entries: dict[str, dict[str, Any]] = self._load()

    def _load(self) -> dict[str, dict[str, Any]]:
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
                raise ValueError("expected a JSON object of objects")
            return data
        except (ValueError, UnicodeDecodeError) as error:
            self.corrupt_backup = free_backup_path(self.path)
            os.replace(self.path, self.corrupt_backup)
            self.warning = (
                f"The judge cache {self.path} is unreadable ({error}); it was moved to "
                f"{self.corrupt_backup} and judging starts with an empty cache. Copy any "
                "verdicts you need back from it, then delete it."
            )
            return {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> dict[str, Any] | None:
        """A copy of the entry for `key`, or None."""
        entry = self._entries.get(key)
        return None if entry is None else dict(entry)

    def put(self, key: str, entry: dict[str, Any]) -> None:
        """Store `entry` under `key` and write the file at once."""
        self._entries[key] = dict(entry)
        write_json_atomic(self.path, self._entries, indent=2)  # the committed cache's layout


# -- calls with retries -------------------------------------------------------------------


def is_transient(error: BaseException) -> bool:
    """Whether a failed call may succeed when tried again: no connection, timeout, 429, 5xx."""
    import openai

    if isinstance(error, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(error, openai.APIStatusError):
        return error.status_code in JUDGE_TRANSIENT_STATUS or error.status_code >= 500
    return False


def retry_after_seconds(error: BaseException) -> float | None:
    """The server's Retry-After (seconds) on a failed response, if it sent one."""
    response = getattr(error, "response", None)
    value = getattr(response, "headers", {}).get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:  # an HTTP date: rare enough to fall back to our own backoff
        return None


def backoff_delay(retry: int, backoff_seconds: float, retry_after: float | None = None) -> float:
    """Seconds before retry number `retry` (0-based): doubling, at least Retry-After, capped."""
    delay = backoff_seconds * 2**retry
    if retry_after is not None:
        delay = max(delay, retry_after)
    return min(delay, JUDGE_MAX_BACKOFF_SECONDS)


def describe_error(error: BaseException) -> str:
    """A one-line description of a failed call."""
    message = collapse_whitespace(str(error)).rstrip(".")
    return f"{type(error).__name__}: {message or 'no message'}"


class CachedChat:
    """Ask a chat model through a JudgeCache: cached prompts cost nothing, new ones are retried.

    `ask` serves a cached entry or makes one new call; transient failures are retried
    `max_retries` times with doubling backoff, after which the chat stops (JudgeStop) and
    later uncached prompts fail at once. Other 4xx answers stop at once. At most
    `max_new_calls` new calls are made (then CallLimitReached).
    """

    def __init__(
        self,
        model: str,
        cache: JudgeCache,
        *,
        chat: Any = None,
        environ: Mapping[str, str] | None = None,
        max_new_calls: int | None = None,
        max_retries: int | None = None,
        backoff_seconds: float | None = None,
        timeout_seconds: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        progress: Progress | None = None,
    ) -> None:
        self.model = model
        self.cache = cache
        self.max_new_calls = max_new_calls
        self.max_retries = JUDGE_MAX_RETRIES if max_retries is None else max_retries
        self.backoff_seconds = JUDGE_BACKOFF_SECONDS if backoff_seconds is None else backoff_seconds
        self.timeout_seconds = timeout_seconds
        self.new_calls = 0
        self.stopped: str | None = None
        self._chat = chat
        self._environ = environ
        self._sleep = sleep
        self._progress = progress or (lambda _message: None)

    def lookup(
        self, prompt: str, is_valid: Callable[[dict[str, Any]], bool] = lambda _e: True
    ) -> dict[str, Any] | None:
        """The cached entry for `prompt`, or None (also when `is_valid` rejects it)."""
        entry = self.cache.get(cache_key(self.model, prompt))
        return entry if entry is not None and is_valid(entry) else None

    def ask(
        self,
        prompt: str,
        parse: Callable[[str], dict[str, Any]],
        meta: Mapping[str, Any] | None = None,
        is_valid: Callable[[dict[str, Any]], bool] = lambda _e: True,
    ) -> tuple[dict[str, Any], bool]:
        """The entry for `prompt` and whether it came from the cache.

        A new reply's text goes through `parse`; its result plus `meta` and the model
        name is cached. UnreadableReply from `parse` propagates and nothing is cached.
        """
        entry = self.lookup(prompt, is_valid)
        if entry is not None:
            return entry, True
        if self.stopped is not None:
            raise JudgeStop(self.stopped)
        if self.max_new_calls is not None and self.new_calls >= self.max_new_calls:
            raise CallLimitReached(f"{self.max_new_calls} new calls made")
        # A call counts once the server answered, readable or not; a failed one did not cost.
        try:
            message = self._call_with_retries(prompt)
        finally:
            if self.stopped is None:
                self.new_calls += 1
        text = reply_text(getattr(message, "content", message))
        entry = {**(meta or {}), **parse(text), "model": self.model}
        self.cache.put(cache_key(self.model, prompt), entry)
        return entry, False

    def _client(self) -> Any:
        if self._chat is None:
            try:
                self._chat = make_chat(self.model, self._environ, self.timeout_seconds)
            except JudgeError as error:
                self.stopped = str(error)
                raise JudgeStop(self.stopped) from error
        return self._chat

    def _where(self) -> str:
        env = os.environ if self._environ is None else self._environ
        return env.get("OPENAI_BASE_URL", "").strip() or "the OpenAI API"

    def _call_with_retries(self, prompt: str) -> Any:
        import openai

        chat = self._client()
        for retry in range(self.max_retries + 1):
            try:
                return chat.invoke(prompt)
            except openai.OpenAIError as error:
                if not is_transient(error):
                    status = getattr(error, "status_code", None)
                    self.stopped = (
                        f"The judge server ({self._where()}) refused the request for model "
                        f"{self.model!r}" + (f" with HTTP {status}" if status else "")
                        + f": {describe_error(error)}. Check the model name and "
                        "OPENAI_API_KEY, then rerun; answered questions are cached."
                    )
                    raise JudgeStop(self.stopped) from error
                if retry == self.max_retries:
                    self.stopped = (
                        f"The judge server ({self._where()}) failed {self.max_retries + 1} "
                        f"times in a row for model {self.model!r}; last error: "
                        f"{describe_error(error)}. Check that the server is running and "
                        "reachable, then rerun; answered questions are cached."
                    )
                    raise JudgeStop(self.stopped) from error
                delay = backoff_delay(retry, self.backoff_seconds, retry_after_seconds(error))
                self._progress(
                    f"judge: {describe_error(error)}; retry {retry + 1} of "
                    f"{self.max_retries} in {delay:g} s"
                )
                self._sleep(delay)
            except (ValueError, TypeError, KeyError) as error:
                # A 200 whose body is not a chat completion: nothing to judge, and a retry
                # would most likely get the same body.
                raise UnreadableReply(
                    f"the server's response was not a chat completion ({describe_error(error)})"
                ) from error
        raise AssertionError("unreachable: the loop returns or raises")


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
    model: str,
    *,
    cache_path: str | os.PathLike[str] | None = None,
    max_new_calls: int | None = None,
    chat: Any = None,
    progress: Progress | None = None,
    k: int | None = None,
    domain: str | None = None,
    environ: Mapping[str, str] | None = None,
    max_retries: int | None = None,
    backoff_seconds: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    warn: Progress | None = None,
) -> JudgeRun:
    """Judge the first `k` passages of every item with `model`, in item order.

    Never raises for server trouble: a server that stays down or refuses stops new calls
    (`JudgeRun.stopped` says why) while cached verdicts are still used; unjudged questions
    get status NOT_JUDGED. `chat` replaces the ChatOpenAI client (anything with `invoke`).
    A corrupt cache moved aside goes to `warn` (default: `progress`), so a caller can show it without progress.
    """
    report = progress or (lambda _message: None)
    k = JUDGE_K if k is None else k
    cache = JudgeCache(JUDGE_CACHE_PATH if cache_path is None else cache_path)
    if cache.warning:
        (warn or report)(cache.warning)
    client = CachedChat(
        model, cache, chat=chat, environ=environ, max_new_calls=max_new_calls,
        max_retries=max_retries, backoff_seconds=backoff_seconds, sleep=sleep, progress=report,
    )
    run = JudgeRun(model=model, verdicts=[], cache_warning=cache.warning)
    items = list(items)
    for position, item in enumerate(items, start=1):
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
    except JudgeStop:
        return Verdict(item.query_id, NOT_JUDGED, error=SERVER_STOPPED)
    return verdict_from_entry(item.query_id, entry, cached)


def describe_verdict(verdict: Verdict) -> str:
    """A short description of a verdict for progress lines and reports."""
    if verdict.status == UNREADABLE:
        return f"unreadable reply ({verdict.error})"
    if verdict.status == NOT_JUDGED:
        return f"not judged ({verdict.error})"
    found = ", ".join(map(str, verdict.answering)) or "none"
    return f"answering {found}" + (" (cached)" if verdict.cached else "")


def judge_calls_line(run: JudgeRun) -> str:
    """A console line on the calls of a run; kept out of reports because it changes on rerun."""
    line = (
        f"judge {run.model}: {run.new_calls} new calls, {run.cached_calls} from cache, "
        f"{run.unreadable} unreadable"
    )
    return line + (f"; stopped: {run.stopped}" if run.stopped else "")


# -- summary and report -------------------------------------------------------------------


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


def summary_line(label: str, value: str) -> str:
    """One aligned line of the summary block."""
    return f"  {label:<{SUMMARY_LABEL_WIDTH}}{value}"


def format_share(value: float | None) -> str:
    """A share with three decimals, or "–" when there was nothing to count."""
    return "–" if value is None else f"{value:.3f}"


def format_rank(rank: int | None) -> str:
    """A rank, or "–" for none."""
    return "–" if rank is None else str(rank)


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


def render_judge_section(
    summary: Mapping[str, Any],
    verdicts: Sequence[Verdict],
    questions: Mapping[str, str],
    page_ranks: Mapping[str, int | None],
) -> list[str]:
    """Plain-text report lines: the summary, then one line per question in verdict order.

    Holds nothing that changes between reruns of the same verdicts (no timings, no
    cached/new call counts).
    """
    k = summary["k"]
    agree = summary["agreement"]
    lines = [
        f"LLM judge: model {summary['model']}, first {k} passages per question",
        summary_line(
            "judged questions",
            f"{summary['judged']} of {summary['questions']} "
            f"(unreadable {summary['unreadable']}, not judged {summary['not_judged']})",
        ),
        summary_line(
            f"Answer@{k}",
            f"{format_share(summary['answer_at_k'])} "
            f"({summary['answer_count']} of {summary['judged']})",
        ),
        summary_line(f"MRR@{k}", format_share(summary["mrr"])),
        summary_line(
            f"judge vs page@{k}",
            f"both {agree['both']}, judge only {agree['judge_only']}, "
            f"page only {agree['page_only']}, neither {agree['neither']}",
        ),
    ]
    if summary.get("stopped"):
        lines.append(f"  stopped: {summary['stopped']}")
    rows = question_rows(summary, verdicts, questions, page_ranks)
    width = max((len(row["query_id"]) for row in rows), default=0)
    lines.append("")
    lines.append("  per question: first answering passage (judge), first page-matching rank (page)")
    for row, verdict in zip(rows, verdicts):
        note = verdict.reason if verdict.status == OK else describe_verdict(verdict)
        question = cut(row["question"], JUDGE_REPORT_QUESTION_CHARS)
        lines.append(
            f"  {row['query_id']:<{width}}  judge {format_rank(row['first_answering']):>2}"
            f"  page {format_rank(row['page_rank']):>2}  "
            + (f"{question} | {note}" if question else note)
        )
    return lines


def judge_to_json(
    summary: Mapping[str, Any],
    verdicts: Sequence[Verdict],
    questions: Mapping[str, str],
    page_ranks: Mapping[str, int | None],
) -> dict[str, Any]:
    """The content of `render_judge_section` as a JSON-ready dict (also stable on rerun)."""
    stable = {
        key: value for key, value in summary.items() if key not in ("cached_calls", "new_calls")
    }
    return {"summary": stable, "questions": question_rows(summary, verdicts, questions, page_ranks)}
