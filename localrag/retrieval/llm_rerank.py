"""Reranking by a chat model on an OpenAI-compatible server, for users who run one (llama.cpp, Ollama, vLLM).

Pointwise relevance generation, as in RankGPT's and UPR's baselines (Sun et al., EMNLP 2023; Sachan et al.,
2022): the model reads one question and one passage and answers with a grade from 0 (unrelated) to 10 (answers
the question); candidates are ordered by it, equal grades keeping the first stage's order. Pointwise grades cost
one call a candidate but can be cached pair by pair, so a rerun or another mode asks only for new pairs: the
replies go through localrag/models/llm.py's ReplyCache (the judge's cache file in the evaluation) and its call limit.

A reply without a grade, a server that stops answering and a spent call limit are errors (RAGError), never a
grade of 0: a list reranked with made-up grades would be measured as if the model had read it.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from localrag.models import llm
from localrag.errors import RAGError
from localrag.text.pages import strip_chunk_header

PREFIX = "openai:"  # a reranker name "openai:MODEL" asks MODEL on the OpenAI-compatible server
PASSAGE_CHARS = 2000  # characters of a passage shown to the model (a whole page can be 8,000: small contexts)
FLAG = "--rerank-model openai:MODEL"  # how the user turned it on, for the client's messages
PROMPT = """You grade search results. Read the question and the passage, then grade how well the passage answers \
the question, from 0 (unrelated) to 10 (it holds the answer). Reply with the grade alone.

Question: {question}

Passage:
{passage}

Grade (0-10):"""
# What a reply is read as (parse_grade): a number, signed or with decimals so that "-3" or "3.5" is read whole and
# refused, never as 3; the prompt's scale echoed ("(0-10)"); a label that names the grade ("Grade: 7").
NUMBER_RE = re.compile(r"[-+\u2212]?\d+(?:[.,]\d+)?(?:\s*/\s*\d+(?:[.,]\d+)?)?")
SCALE_RE = re.compile(r"\(\s*0\s*(?:-|\u2013|to)\s*10\s*\)|\bout of 10\b", re.IGNORECASE)
LABEL_RE = re.compile(r"\b(?:grade|score|rating)\b", re.IGNORECASE)
GRADE_RE = re.compile(r"(10|\d)(?:\s*/\s*10)?")  # a whole grade alone, or out of 10 ("7/10")


def is_llm_reranker(name: object) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX) and len(name) > len(PREFIX)


def prompt_for(question: str, passage: str) -> str:
    text = " ".join(strip_chunk_header(passage).split())
    return PROMPT.format(question=question.strip(), passage=text[:PASSAGE_CHARS])


def parse_grade(text: str) -> dict[str, Any]:
    """{"grade": the reply's grade, "reply": the reply} (the reply kept so that a cached grade is read again by
    today's rule, `is_graded_entry`); UnreadableReply when there is none.

    The grade is the number after the reply's last label "grade", "score" or "rating", else its first number; the
    prompt's scale echoed ("(0-10)", "out of 10") is no number. It must be a whole number from 0 to 10 standing
    alone, optionally out of 10: "7", "Grade: 7", "7/10", "**7**", "9 out of 10" are 7 or 9; "-3", "+5", "11",
    "3.5", "7/5" are refused, never read as 3, 5, 1, 3 or 7 (a model that grades off the scale is not followed)."""
    shown = SCALE_RE.sub(" ", text)
    labels = list(LABEL_RE.finditer(shown))
    found = NUMBER_RE.search(shown, labels[-1].end() if labels else 0) or NUMBER_RE.search(shown)
    if not found:
        raise llm.UnreadableReply(f"no grade from 0 to 10 in the reply {text[:80]!r}")
    grade = GRADE_RE.fullmatch(found.group())
    if not grade:
        raise llm.UnreadableReply(f"the reply {text[:80]!r} grades {found.group()}, not a whole number from 0 to 10")
    return {"grade": int(grade.group(1)), "reply": text}


def is_graded_entry(entry: dict[str, Any]) -> bool:
    """Whether a cached entry is a grade to trust: its kept reply reads as its grade by today's parse_grade. An
    entry without its reply was made before replies were kept, by a parser that read "-3" as 3 and "3.5" as 3: it
    cannot be read again, so it is not trusted and the pair is asked again (once; the new entry keeps its reply)."""
    reply, grade = entry.get("reply"), entry.get("grade")
    if not isinstance(reply, str) or isinstance(grade, bool) or not isinstance(grade, int):
        return False
    try:
        return parse_grade(reply)["grade"] == grade
    except llm.UnreadableReply:
        return False


class LLMReranker:
    """A CrossEncoder stand-in (`predict(pairs)` -> scores) whose scores are a chat model's grades."""

    def __init__(self, name: str, cache_path: str | Path, *, max_new_calls: int | None = None,
                 environ: Mapping[str, str] | None = None, chat: Any = None, max_retries: int | None = None,
                 backoff_seconds: float | None = None, progress: llm.Progress | None = None):
        if not is_llm_reranker(name):
            raise RAGError(f"an LLM reranker is named {PREFIX}MODEL, got {name!r}")
        self.name = name
        self.model = name[len(PREFIX):]
        cache = llm.ReplyCache(cache_path)
        # A corrupt cache file was moved aside (nothing lost); say where, once, where the caller reads warnings.
        self.cache_warning = None if cache.corrupt_backup is None else (
            f"the LLM reranker's cache {cache.path} was unreadable ({cache.corrupt_error}); it was moved to "
            f"{cache.corrupt_backup} and grading starts with an empty cache")
        # The server is checked before the first new grade: one that is not running stops the run at once, not
        # after the retries, and a run whose grades are all cached needs none.
        self.client = llm.CachedChat(self.model, cache, who="reranker", flag=FLAG,
                                     server=llm.Server(environ, chat, check_first=True),
                                     retrying=llm.Retrying(max_retries, backoff_seconds),
                                     limits=llm.Limits(max_new_calls), progress=progress)
        self.cached_calls = 0

    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int | None = None,
                show_progress_bar: bool = False) -> list[float]:
        """The model's grade of each (question, passage) pair, from the cache where it was asked before."""
        grades = []
        for question, passage in pairs:
            try:
                entry, cached = self.client.ask(prompt_for(question, passage), parse_grade,
                                                is_valid=is_graded_entry)
            except llm.CallLimitReached:
                raise RAGError(f"the LLM reranker {self.name} made its {self.client.max_new_calls} new calls "
                               f"(the call limit); its grades so far are cached, so a rerun goes on from there, or "
                               f"raise the limit") from None
            except llm.ChatStopped as exc:
                raise RAGError(f"the LLM reranker {self.name} stopped: {exc}") from None
            except llm.UnreadableReply as exc:
                raise RAGError(f"the LLM reranker {self.name} gave no grade for a passage ({exc}); a model that "
                               f"cannot follow the prompt cannot rerank") from None
            self.cached_calls += cached
            grades.append(float(entry["grade"]))
        return grades
