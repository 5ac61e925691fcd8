"""Goldset questions asked of a language model: the prompt for one natural question per chunk, the reading of
its reply, and the asker that sends prompts through the cached, retrying chat client (--generate N --llm MODEL).
"""
from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable

from localrag.models import llm

# Chunk text longer than this is cut before it goes into the model prompt.
LLM_MAX_CHUNK_CHARS = 4000

# Prompt for one natural question per chunk; fill with build_llm_prompt().
LLM_QUESTION_PROMPT = """You write test questions for a document search engine.
Read the passage below and write ONE question in {language} that the passage answers.
Rules:
- Ask as a reader would who has not seen the passage: use your own words, not the passage's.
- Do not copy any run of more than three words from the passage.
- The question must make sense on its own; do not mention "the passage", "the text" or "the author".
- If the passage has nothing a reader would ask about (table of contents, index, reference list,
  only numbers or headers), reply {{"question": null}}.
Reply with JSON only, like {{"question": "..."}}.

Passage:
\"\"\"
{text}
\"\"\"
"""

# Language codes -> names used in the prompt.
LANGUAGE_NAMES = {"en": "English", "de": "German"}


def build_llm_prompt(text: str, language: str) -> str:
    """LLM_QUESTION_PROMPT filled with the chunk text (cut to LLM_MAX_CHUNK_CHARS) and language name."""
    return LLM_QUESTION_PROMPT.format(language=LANGUAGE_NAMES[language], text=text[:LLM_MAX_CHUNK_CHARS])


def parse_llm_reply(reply: str | None) -> tuple[str, str | None]:
    """(``"question"``, text), (``"declined"``, None) or (``"failed"``, None) for one model reply."""
    if reply is None or not reply.strip():
        return "failed", None
    body = re.sub(r"```(?:json)?", "", reply).strip()
    object_match = re.search(r"\{.*\}", body, re.DOTALL)
    if object_match:
        try:
            data = json.loads(object_match.group(0))
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and "question" in data:
            value = data["question"]
            if value is None or (isinstance(value, str) and not value.strip()):
                return "declined", None
            if isinstance(value, str):
                return "question", " ".join(value.split())
            return "failed", None
    if body.strip().strip('"').upper() in {"NONE", "NULL", "KEINE"}:
        return "declined", None
    for line in body.splitlines():
        # Prose around the question: keep the last sentence that ends with "?".
        pieces = re.split(r"(?<=[!?:])\s+|(?<=[a-zäöüß]{2}\.)\s+(?=[A-ZÄÖÜ])", line.strip())
        for piece in reversed(pieces):
            piece = re.sub(r"^(?:[-*•]|\d+[.)]|question:|frage:)\s*", "", piece.strip(), flags=re.IGNORECASE)
            piece = piece.strip().strip("\"'“”„*").strip()
            if piece.endswith("?") and len(piece) > 1:
                return "question", " ".join(piece.split())
    return "failed", None


def llm_question_asker(model: str, cache_path: str, quiet: bool) -> tuple[Callable[[str], str | None],
                                                                          Callable[[], str | None]]:
    """(ask, stopped): ask(prompt) -> reply text or None through the cached, retrying client and the judge's cache;
    stopped() -> why the model stopped answering (server down, refused), or None.

    Replies with a question and explicit declines are cached; an unreadable reply is not, so the next run asks again.
    """
    flag = f"--llm {model}"
    llm.check_environment(os.environ, flag)
    cache, cache_warning = llm.open_cache(cache_path)
    if cache_warning:
        print(f"warning: {cache_warning}", file=sys.stderr)
    # The judge's server and cache (--judge-cache) serve the questions too, so messages name the judge.
    client = llm.CachedChat(model, cache, who="judge", flag=flag, progress=None if quiet else
                            (lambda message: print(message, file=sys.stderr, flush=True)))
    stops: list[str] = []

    def readable(text: str) -> dict:
        if parse_llm_reply(text)[0] == "failed":
            raise llm.UnreadableReply(f"no question in reply {text[:80]!r}")
        return {"reply": text}

    def ask(prompt: str) -> str | None:
        try:
            entry, _ = client.ask(prompt, parse=readable, meta={"kind": "generate"},
                                  is_valid=lambda e: isinstance(e.get("reply"), str))
        except llm.UnreadableReply:
            return None
        except (llm.ChatError, llm.CallLimitReached) as exc:
            if not stops:  # every later prompt fails the same way; say it once
                stops.append(str(exc))
                print(f"warning: question generation stopped: {exc}", file=sys.stderr, flush=True)
            return None
        return entry["reply"]

    return ask, lambda: stops[0] if stops else None
