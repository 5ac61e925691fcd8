"""A cached, retrying client for one chat model on any OpenAI-compatible server.

Works with OpenAI, Ollama, llama.cpp or vLLM through `langchain-openai`'s `ChatOpenAI`,
configured by the standard OPENAI_API_KEY and OPENAI_BASE_URL variables. Every answered
prompt is cached in a JSON file keyed by sha256(model, prompt), so a rerun asks only
what it has not asked before.

Retries are our own, not the openai SDK's (`max_retries=0`): a server that stays down
must stop every later prompt of the run at once, each retry is reported to the caller,
and a call counts against the call limit only once the server answered.

How long a server is waited for: a request waits TIMEOUT_SECONDS for its reply, saying every
10 s (progress.LINE_SECONDS) what it waits for; one without a reply by then is not sent again
(the server is stalled, or busy with it: a local server answers one request at a time, so a
retry would queue behind it) and the chat stops. A stalled server is therefore given up after
TIMEOUT_SECONDS (3 min), where it was 5 tries of 3 min before. Failures that come back at once
(no connection, 429, 5xx) are retried MAX_RETRIES times, BACKOFF_SECONDS doubled between tries.

The client knows nothing of its callers: the name its messages give the asker (`who`) and
the command-line flag that turned it on (`flag`) come from the caller. One exception: `open_cache` names its file
the judge cache, the file the evaluation's judge and --llm questions share.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localrag.errors import RAGError
from localrag.files import write_json_atomic
from localrag.progress import waiting

# Retries after the first try for transient failures (429, 5xx, no connection); a timeout is not retried.
MAX_RETRIES = 4
# Wait before the first retry, doubled for each further retry.
BACKOFF_SECONDS = 2.0
# Longest wait between two tries, also for a server's Retry-After.
MAX_BACKOFF_SECONDS = 60.0
# Seconds one request waits for its reply (local models on a CPU are slow): the longest a stalled server holds a run.
TIMEOUT_SECONDS = 180.0
# Sampling temperature: 0 makes replies as repeatable as the server allows.
TEMPERATURE = 0.0
SEED = 0  # sent with every request: servers that honour it sample the same reply for the same prompt
# Key sent when only OPENAI_BASE_URL is set: local servers ignore it, the client needs one.
PLACEHOLDER_API_KEY = "local-server-needs-no-key"
# HTTP statuses worth retrying besides every 5xx (the same set the openai SDK retries).
TRANSIENT_STATUS = frozenset({408, 409, 429})
# Seconds the server check before a run (`check_server`) waits for the server's answer.
CHECK_TIMEOUT_SECONDS = 10.0

Progress = Callable[[str], None]


class ChatError(RAGError):
    """The model cannot be asked as configured (no server given, bad URL)."""


class ChatStopped(ChatError):
    """Asking must stop: the server stays down or refuses the request."""


class CallLimitReached(RAGError):
    """The run already made its allowed number of new calls."""


class UnreadableReply(RAGError, ValueError):
    """The model's reply holds nothing the caller can use."""


# -- environment and client ---------------------------------------------------------------


def check_environment(environ: Mapping[str, str], flag: str) -> None:
    """Raise ChatError unless OPENAI_API_KEY or an http(s) OPENAI_BASE_URL is set.

    The message starts with `flag`, the caller's name for what needs the server.
    """
    key = environ.get("OPENAI_API_KEY", "").strip()
    base_url = environ.get("OPENAI_BASE_URL", "").strip()
    if not key and not base_url:
        raise ChatError(
            f"{flag} needs a language model server, but neither OPENAI_API_KEY nor "
            "OPENAI_BASE_URL is set. Set OPENAI_API_KEY to use OpenAI, or OPENAI_BASE_URL "
            "for a local OpenAI-compatible server, e.g. "
            "OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama."
        )
    if base_url and not re.match(r"https?://[^/\s]+", base_url):
        raise ChatError(
            f"OPENAI_BASE_URL={base_url!r} is not an http(s) URL; write it in full, "
            "e.g. http://localhost:11434/v1."
        )


def make_chat(
    model: str,
    flag: str,
    environ: Mapping[str, str] | None = None,
    timeout_seconds: float | None = None,
) -> Any:
    """A ChatOpenAI client for `model` that never retries by itself (CachedChat does)."""
    env = os.environ if environ is None else environ
    check_environment(env, flag)
    # Imported here so that a run that never asks a model does not load the OpenAI client.
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=model,
        api_key=env.get("OPENAI_API_KEY", "").strip() or PLACEHOLDER_API_KEY,
        base_url=env.get("OPENAI_BASE_URL", "").strip() or None,
        timeout=TIMEOUT_SECONDS if timeout_seconds is None else timeout_seconds,
        max_retries=0,
        temperature=TEMPERATURE,
        seed=SEED,
    )


def server_address(environ: Mapping[str, str] | None = None) -> str:
    """Where the client sends its requests: OPENAI_BASE_URL, else the OpenAI API."""
    env = os.environ if environ is None else environ
    return env.get("OPENAI_BASE_URL", "").strip() or "the OpenAI API"


def check_server(chat: Any, who: str, environ: Mapping[str, str] | None = None) -> None:
    """One cheap request before any work: the server's list of models (GET /models: no
    tokens, no model loaded), through `chat`'s own client, so its URL and key.

    ChatError saying which server, what failed and how to fix it when there is no
    connection, the key is refused (401, 403) or the server fails (5xx). Any other answer
    counts as up, a 404 or 501 too: a server without the list may still chat. A `chat`
    without an OpenAI client (a test's fake) is not checked.
    """
    import openai

    client = getattr(chat, "root_client", None)
    if client is None:
        return
    where = server_address(environ)
    try:
        client.with_options(timeout=CHECK_TIMEOUT_SECONDS, max_retries=0).models.list()
    except openai.APIConnectionError as error:  # includes APITimeoutError
        raise ChatError(
            f"The {who} server ({where}) does not answer ({describe_error(error)}). "
            "Start it, or set OPENAI_BASE_URL to a running server, then rerun"
        ) from error
    except openai.APIStatusError as error:
        status = error.status_code
        if status in (401, 403):
            raise ChatError(
                f"The {who} server ({where}) refused the API key with HTTP {status} "
                f"({describe_error(error)}). Set OPENAI_API_KEY to a key it accepts, "
                "then rerun"
            ) from error
        if status >= 500 and status != 501:
            raise ChatError(
                f"The {who} server ({where}) failed with HTTP {status} "
                f"({describe_error(error)}). Check that it runs properly, then rerun"
            ) from error
    except openai.OpenAIError:  # an answer the client cannot read: the server is there
        pass


# -- reading replies ----------------------------------------------------------------------


def collapse_whitespace(text: str) -> str:
    """`text` with every run of whitespace replaced by one space, stripped."""
    return " ".join(text.split())


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


# -- cache --------------------------------------------------------------------------------


def first_json_object(text: str, keys: Sequence[str]) -> dict[str, Any]:
    """The first JSON object in a reply that has one of `keys` (prose and code fences around it are fine, as small
    models write them); UnreadableReply naming the first key and the reply's start when there is none."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict) and any(key in value for key in keys):
            return value
    shown = collapse_whitespace(text)
    shown = shown if len(shown) <= 120 else shown[:119].rstrip() + "…"
    raise UnreadableReply(f"no JSON object with {keys[0]!r} in the reply: {shown!r}")


def cache_key(model: str, prompt: str) -> str:
    """sha256 of the model name and the full prompt (a newline between them)."""
    return hashlib.sha256(f"{model}\n{prompt}".encode("utf-8")).hexdigest()


def free_backup_path(path: Path) -> Path:
    """The first `<path>.corrupt-<n>` (n = 1, 2, ...) that does not exist yet."""
    n = 1
    while (candidate := path.with_name(f"{path.name}.corrupt-{n}")).exists():
        n += 1
    return candidate


# How a reply cache's file begins as ReplyCache writes it: `{` and the first entry's key and `{`, or `{}`. A file that
# begins so but does not read as a JSON object of objects is a cache cut off or damaged; any other is not a cache.
CACHE_START = re.compile(r'\s*\{\s*(?:"(?:[^"\\]|\\.)*"\s*:\s*\{|\})')


def reply_cache_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the file at `path` is not a reply cache of this tool ('is not a reply cache (it does not begin as one:
    ...)', 'is a JSON file but not a reply cache (...)'), or None when it may be used: missing, empty, a JSON object of objects, or a cache that begins as ReplyCache writes one
    but is damaged (ReplyCache moves it aside). A folder or an unreadable file is left to the caller's open."""
    try:
        with open(path, "rb") as file:
            head = file.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return None
    if not head.strip():
        return None
    if not CACHE_START.match(head):
        return f"is not a reply cache (it does not begin as one: {collapse_whitespace(head)[:40]!r})"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # UnicodeDecodeError included: a cache of this tool, damaged
        return None
    bad = [key for key, value in data.items() if not isinstance(value, dict)] if isinstance(data, dict) else []
    if bad:
        return f"is a JSON file but not a reply cache (its {bad[0]!r} is not an entry)"
    return None


class ReplyCache:
    """A JSON file of cache entries by key, rewritten whole (atomically) after every `put`.

    A cache of this tool that does not read as a JSON object of objects (cut off, damaged) is moved aside to
    `<name>.corrupt-<n>` (`corrupt_backup`, with the reason in `corrupt_error`) and the cache starts empty; an empty
    file is an empty cache. Any other file (reply_cache_problem: a goldset, an index's manifest) is a RAGError and is
    left as it is.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.corrupt_backup: Path | None = None
        self.corrupt_error: str | None = None
        self._entries: dict[str, dict[str, Any]] = self._load()

    def _load(self) -> dict[str, dict[str, Any]]:
        if not self.path.exists():
            return {}
        if problem := reply_cache_problem(self.path):
            raise RAGError(f"the reply cache {self.path} {problem}, so it is no cache of this tool and is left as it "
                           f"is; give another cache file (a new one is made there), or move that file away")
        try:
            text = self.path.read_text(encoding="utf-8")
            if not text.strip():
                return {}
            data = json.loads(text)
            if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
                raise ValueError("expected a JSON object of objects")
            return data
        except (ValueError, UnicodeDecodeError) as error:
            self.corrupt_backup = free_backup_path(self.path)
            self.corrupt_error = str(error)
            os.replace(self.path, self.corrupt_backup)
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


def open_cache(path: str | os.PathLike[str]) -> tuple[ReplyCache, str | None]:
    """The judge cache at `path` and, if its file was corrupt and moved aside, a warning that says where.

    The evaluation's judge and its --llm questions share this file (--judge-cache), so the warning names the judge;
    the LLM reranker words its own."""
    cache = ReplyCache(path)
    if cache.corrupt_backup is None:
        return cache, None
    return cache, (
        f"The judge cache {cache.path} is unreadable ({cache.corrupt_error}); it was moved to "
        f"{cache.corrupt_backup} and judging starts with an empty cache. Copy any "
        "verdicts you need back from it, then delete it."
    )


# -- calls with retries -------------------------------------------------------------------


def is_transient(error: BaseException) -> bool:
    """Whether a failed call may succeed when tried again: no connection, timeout, 429, 5xx."""
    import openai

    if isinstance(error, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(error, openai.APIStatusError):
        return error.status_code in TRANSIENT_STATUS or error.status_code >= 500
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
    return min(delay, MAX_BACKOFF_SECONDS)


def describe_error(error: BaseException) -> str:
    """A one-line description of a failed call."""
    message = collapse_whitespace(str(error)).rstrip(".")
    return f"{type(error).__name__}: {message or 'no message'}"


@dataclass(frozen=True)
class Retrying:
    """How a client retries a transient failure: `max_retries` times after the first try, waiting
    `backoff_seconds` doubled for each further retry, through `sleep` (a test passes a recorder)."""

    max_retries: int | None = None  # None: MAX_RETRIES
    backoff_seconds: float | None = None  # None: BACKOFF_SECONDS
    sleep: Callable[[float], None] = time.sleep


@dataclass(frozen=True)
class Limits:
    """What a client may spend: at most `max_new_calls` new calls (None: no limit), each one at most
    `timeout_seconds` (None: TIMEOUT_SECONDS)."""

    max_new_calls: int | None = None
    timeout_seconds: float | None = None


@dataclass(frozen=True)
class Server:
    """Where a client's calls go: the environment naming the server (None: os.environ), or `chat`, a client
    that replaces ChatOpenAI (anything with `invoke`); with `check_first` the server is checked before the first
    new call."""

    environ: Mapping[str, str] | None = None
    chat: Any = None
    check_first: bool = False


def usage_of(message: Any) -> dict[str, int] | None:
    """{"prompt_tokens", "completion_tokens"} of a reply as the server reported them (LangChain's usage_metadata,
    else the OpenAI response's token_usage); None when it reported none (a count is never guessed)."""
    usage = getattr(message, "usage_metadata", None)
    if isinstance(usage, Mapping) and isinstance(usage.get("input_tokens"), int) \
            and isinstance(usage.get("output_tokens"), int):
        return {"prompt_tokens": usage["input_tokens"], "completion_tokens": usage["output_tokens"]}
    usage = (getattr(message, "response_metadata", None) or {}).get("token_usage")
    if isinstance(usage, Mapping) and isinstance(usage.get("prompt_tokens"), int) \
            and isinstance(usage.get("completion_tokens"), int):
        return {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"]}
    return None


class CachedChat:
    """Ask a chat model through a ReplyCache: cached prompts cost nothing, new ones are retried.

    `ask` serves a cached entry or makes one new call; transient failures are retried
    as `retrying` says, after which the chat stops (ChatStopped) and later uncached
    prompts fail at once. Other 4xx answers stop at once. At most `limits.max_new_calls`
    new calls are made (then CallLimitReached). Messages call the asker
    `who` ("The <who> server ...") and name `flag` when the environment lacks a server.
    With `server.check_first`, the server is checked (`check_server`) before the first new call,
    so a server that is not running stops the chat at once instead of after the retries;
    a run whose every prompt is cached never reaches it. `asking`, set by the caller before `ask` (e.g. "question 3
    of 18"), says what is asked in the lines said while a reply is waited for and in the message of a stall.
    """

    def __init__(
        self,
        model: str,
        cache: ReplyCache,
        *,
        who: str,
        flag: str,
        server: Server = Server(),
        retrying: Retrying = Retrying(),
        limits: Limits = Limits(),
        progress: Progress | None = None,
    ) -> None:
        self.model = model
        self.check_first = server.check_first
        self.cache = cache
        self.who = who
        self.flag = flag
        self.max_new_calls = limits.max_new_calls
        self.max_retries = MAX_RETRIES if retrying.max_retries is None else retrying.max_retries
        self.backoff_seconds = BACKOFF_SECONDS if retrying.backoff_seconds is None else retrying.backoff_seconds
        self.timeout_seconds = limits.timeout_seconds
        self.new_calls = 0
        self.cached_hits = 0
        # Tokens of the new calls as the server reported them; calls whose reply reported none are counted apart.
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.unreported_usage = 0
        self.stopped: str | None = None
        self.asking = ""
        self._chat = server.chat
        self._environ = server.environ
        self._sleep = retrying.sleep
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
        keep_usage: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        """The entry for `prompt` and whether it came from the cache.

        A new reply's text goes through `parse`; its result plus `meta` and the model
        name is cached, with `keep_usage` also its tokens as the server reported them ("usage", usage_of), so
        that a report can state the cost of its replies whether they were asked now or before.
        UnreadableReply from `parse` propagates and nothing is cached.
        """
        entry = self.lookup(prompt, is_valid)
        if entry is not None:
            self.cached_hits += 1
            return entry, True
        if self.stopped is not None:
            raise ChatStopped(self.stopped)
        if self.max_new_calls is not None and self.new_calls >= self.max_new_calls:
            raise CallLimitReached(f"{self.max_new_calls} new calls made")
        if self.check_first:
            self.check_first = False
            try:
                check_server(self._client(), self.who, self._environ)
            except ChatError as error:
                self.stopped = str(error)
                raise ChatStopped(self.stopped) from error
        # A call counts once the server answered, readable or not; a failed one did not cost.
        try:
            message = self._call_with_retries(prompt)
        finally:
            if self.stopped is None:
                self.new_calls += 1
        usage = usage_of(message)
        if usage is None:
            self.unreported_usage += 1
        else:
            self.prompt_tokens += usage["prompt_tokens"]
            self.completion_tokens += usage["completion_tokens"]
        text = reply_text(getattr(message, "content", message))
        entry = {**(meta or {}), **parse(text), "model": self.model}
        if keep_usage and usage is not None:
            entry["usage"] = usage
        self.cache.put(cache_key(self.model, prompt), entry)
        return entry, False

    def _client(self) -> Any:
        if self._chat is None:
            try:
                self._chat = make_chat(self.model, self.flag, self._environ, self.timeout_seconds)
            except ChatError as error:
                self.stopped = str(error)
                raise ChatStopped(self.stopped) from error
        return self._chat

    def _where(self) -> str:
        return server_address(self._environ)

    def _say_waiting(self, seconds: float) -> None:
        """The line said while a reply is waited for: which server, model and question, and for how long."""
        self._progress(f"waiting for the {self.who} server {self._where()} (model {self.model}): {seconds:.0f} s"
                       + (f", {self.asking}" if self.asking else ""))

    def _call_with_retries(self, prompt: str) -> Any:
        import openai

        chat = self._client()
        for retry in range(self.max_retries + 1):
            try:
                with waiting(self._say_waiting):
                    return chat.invoke(prompt)
            except openai.APITimeoutError as error:
                # No reply in time: sent again, the request would queue behind the first or stall the same.
                waited = self.timeout_seconds or TIMEOUT_SECONDS
                self.stopped = (
                    f"The {self.who} server ({self._where()}) sent no reply for model {self.model!r} in "
                    f"{waited:g} s" + (f" ({self.asking})" if self.asking else "") + "; it is stalled or "
                    "overloaded. Check that it answers (restart it; a model too slow for this machine needs a smaller "
                    "one), then rerun; answered questions are cached."
                )
                raise ChatStopped(self.stopped) from error
            except openai.OpenAIError as error:
                if not is_transient(error):
                    status = getattr(error, "status_code", None)
                    self.stopped = (
                        f"The {self.who} server ({self._where()}) refused the request for model "
                        f"{self.model!r}" + (f" with HTTP {status}" if status else "")
                        + f": {describe_error(error)}. Check the model name and "
                        "OPENAI_API_KEY, then rerun; answered questions are cached."
                    )
                    raise ChatStopped(self.stopped) from error
                if retry == self.max_retries:
                    self.stopped = (
                        f"The {self.who} server ({self._where()}) failed {self.max_retries + 1} "
                        f"times in a row for model {self.model!r}; last error: "
                        f"{describe_error(error)}. Check that the server is running and "
                        "reachable, then rerun; answered questions are cached."
                    )
                    raise ChatStopped(self.stopped) from error
                delay = backoff_delay(retry, self.backoff_seconds, retry_after_seconds(error))
                self._progress(
                    f"{self.who}: {describe_error(error)}; retry {retry + 1} of "
                    f"{self.max_retries} in {delay:g} s"
                )
                self._sleep(delay)
            except (ValueError, TypeError, KeyError) as error:
                # A 200 whose body is not a chat completion: nothing to use, and a retry
                # would most likely get the same body.
                raise UnreadableReply(
                    f"the server's response was not a chat completion ({describe_error(error)})"
                ) from error
        raise AssertionError("unreachable: the loop returns or raises")
