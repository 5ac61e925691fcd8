"""The answers a chat gave, read from a file (`--answers FILE`), matched to the goldset's questions.

So that people evaluate their real chain, not only the tool's own answer prompt. Two formats, one result shape:

* JSONL, one object a line: ``{"query_id" or "question", "answer", "passages": [{"source", "page", "text"}]}``;
  ``passages`` (what the answer was given; ``text`` optional) may be left out.
* CSV (UTF-8, ``,`` or ``;``): columns ``query_id`` or ``question``, ``answer``, and optionally ``passages``
  holding the same JSON list as text.

A line names its question by the goldset's query id or by the question's text (compared after whitespace
normalisation, as the goldset merges rows). Nothing is dropped without a word: a line whose question the goldset
does not have, a second answer to one question, a line without an answer, or a passage that cannot be read is a
message naming the line; goldset questions without an answer are listed by the caller (`missing`).
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from localrag.errors import EvalError
from localrag.goldset.format import jsonl_objects, normalize_question, query_id

ID_KEYS = ("query_id", "question")  # how a line names its question, in the order they are tried
ANSWER_KEY = "answer"
PASSAGES_KEY = "passages"


@dataclass(frozen=True)
class GivenPassage:
    """A passage the answer was given: its file, its 1-based page as a PDF viewer shows it, its text if known."""
    source: str
    page: int | None
    text: str | None = None


@dataclass(frozen=True)
class GivenAnswer:
    """A chat's answer to one goldset question: its text, the passages it was given (None: not said), the line."""
    query_id: str
    answer: str
    passages: tuple[GivenPassage, ...] | None
    line: int


@dataclass(frozen=True)
class AnswerFile:
    """The answers of a file by query id, and the messages about lines that were not used as they stand."""
    answers: dict[str, GivenAnswer]
    messages: tuple[str, ...]

    def missing(self, query_ids: Sequence[str]) -> list[str]:
        """The query ids of `query_ids` that have no answer."""
        return [qid for qid in query_ids if qid not in self.answers]


def read_passages(value: Any, line: int) -> tuple[tuple[GivenPassage, ...] | None, list[str]]:
    """The passages of one line (a JSON list, or its text in a CSV cell), with messages about unusable ones."""
    if value is None or value == "":
        return None, []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            return None, [f"line {line}: passages are not a JSON list ({exc.msg}); read as not given"]
    if not isinstance(value, list):
        return None, [f"line {line}: passages must be a list of {{\"source\", \"page\"}}, got "
                      f"{type(value).__name__}; read as not given"]
    passages, messages = [], []
    for number, item in enumerate(value, start=1):
        source = item.get("source") if isinstance(item, dict) else None
        page = item.get("page") if isinstance(item, dict) else None
        if not isinstance(source, str) or not source.strip():
            messages.append(f"line {line}: passage {number} has no \"source\"; left out")
            continue
        if page is not None and (isinstance(page, bool) or not isinstance(page, int) or page < 1):
            messages.append(f"line {line}: passage {number} has page {page!r}, not a page number from 1; read "
                            f"without a page")
            page = None
        text = item.get("text")
        passages.append(GivenPassage(source.strip(), page, text if isinstance(text, str) else None))
    return tuple(passages), messages


def answer_of(record: Mapping[str, Any], line: int, questions: Mapping[str, str]) -> tuple[GivenAnswer | None,
                                                                                          list[str]]:
    """One line's answer, matched to a goldset question (`questions`: query id -> question), or None and why."""
    wanted = str(record.get("query_id") or "").strip()
    if not wanted:
        text = normalize_question(str(record.get("question") or ""))
        if not text:
            return None, [f"line {line}: names no question (a \"query_id\" or \"question\"); line skipped"]
        wanted = query_id(text)
        if wanted not in questions:
            return None, [f"line {line}: the goldset has no question {text[:60]!r}; line skipped"]
    elif wanted not in questions:
        return None, [f"line {line}: the goldset has no question with query id {wanted!r}; line skipped"]
    answer = record.get(ANSWER_KEY)
    if not isinstance(answer, str) or not answer.strip():
        return None, [f"line {line}: no \"answer\" for {questions[wanted][:60]!r}; line skipped"]
    passages, messages = read_passages(record.get(PASSAGES_KEY), line)
    return GivenAnswer(wanted, answer.strip(), passages, line), messages


def records(text: str, jsonl: bool) -> tuple[list[tuple[int, dict]], list[str]]:
    """(line, record) of every object line of a JSONL text (goldset.format.jsonl_objects: blank and # lines
    skipped) or row of a CSV text, and messages."""
    if jsonl:
        return jsonl_objects(text)
    first = text.splitlines()[0] if text.strip() else ""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=";" if first.count(";") > first.count(",") else ",")
    header = [name.strip().casefold() for name in next(reader, [])]
    if ANSWER_KEY not in header or not any(key in header for key in ID_KEYS):
        raise EvalError(f"the answers file's header ({', '.join(header) or 'none'}) lacks an \"answer\" column "
                        f"and a \"query_id\" or \"question\" column; see --help for the format")
    return [(reader.line_num, dict(zip(header, row))) for row in reader if any(cell.strip() for cell in row)], []


def read_answers(path: str | Path, questions: Mapping[str, str]) -> AnswerFile:
    """The answers of `path` (JSONL by its suffix, else CSV) to the goldset `questions` (query id -> question).
    EvalError when the file cannot be read or names no usable answer."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalError(f"cannot read the answers file {path} ({type(exc).__name__}: {exc}); give a UTF-8 JSONL or "
                        f"CSV file") from None
    found, messages = records(text, path.suffix.lower() == ".jsonl")
    answers: dict[str, GivenAnswer] = {}
    for line, record in found:
        answer, said = answer_of(record, line, questions)
        messages += said
        if answer is None:
            continue
        if answer.query_id in answers:
            messages.append(f"line {line}: a second answer to the question of line "
                            f"{answers[answer.query_id].line}; the first is kept")
            continue
        answers[answer.query_id] = answer
    if not answers:
        raise EvalError(f"the answers file {path} holds no answer to a question of the goldset"
                        + (f" ({messages[0]})" if messages else ""))
    return AnswerFile(answers, tuple(messages))
