"""Lint a parsed goldset against the index: files, page counts, pages without text, short and
near-identical questions, and the reader's own messages.

Questions are any objects with ``question``, ``locations`` (``source``, ``page``) and the goldset's
``lines``; the index is described per file by DocInfo. Short and near-identical questions are measured
as goldset_generation's gates measure them (word_count, jaccard), so lint and generation agree on them.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from goldset_generation import MIN_QUESTION_WORDS, NEAR_DUPLICATE_JACCARD, PAGE_OFFSET, jaccard, word_count

_LINE_NUMBER = re.compile(r"\b(?:line|zeile)\s+(\d+)", re.IGNORECASE)
# A reader message about something it dropped ("row skipped", "location skipped").
_SKIPPED = re.compile(r"\bskipped\b|übersprungen", re.IGNORECASE)


class LocationLike(Protocol):
    source: str
    page: int | None


class QuestionLike(Protocol):
    question: str
    locations: Sequence[LocationLike]
    lines: Sequence[int]


@dataclass(frozen=True)
class DocInfo:
    """What the index knows of one file: page count and 0-based pages without text."""

    pages: int
    empty_pages: frozenset[int] = frozenset()


@dataclass(frozen=True)
class LintFinding:
    """One problem in a goldset; ``severity`` is ``"error"`` or ``"warning"``."""

    severity: str
    message: str
    lines: tuple[int, ...] = ()


def normalize_name(name: str) -> str:
    """File name for comparison: NFC, casefolded, NFC again (casefolding can decompose), trimmed."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold()).strip()


def _quote_list(names: Sequence[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def _location_findings(
    question: QuestionLike,
    index_docs: Mapping[str, Any],
    by_normal: Mapping[str, str],
    page_offset: int,
    normalize: Callable[[str], str],
    unindexed: Mapping[str, str],
) -> list[LintFinding]:
    lines = tuple(question.lines)
    findings = []
    for location in question.locations:
        indexed = by_normal.get(normalize(location.source))
        if indexed is None and normalize(location.source) in unindexed:
            # The file is there but unreadable: "did you mean" would send the user after a typo that is not one.
            message = (f"expected file '{location.source}' is in the docs folder but could not be indexed: "
                       f"{unindexed[normalize(location.source)]}")
            findings.append(LintFinding("error", message, lines))
            continue
        if indexed is None:
            close = difflib.get_close_matches(normalize(location.source), list(by_normal), n=3, cutoff=0.6)
            hint = (
                f"did you mean {_quote_list([by_normal[name] for name in close])}?"
                if close
                else f"no similar name among the {len(index_docs)} indexed files; index the file or fix the name"
            )
            message = f"expected file '{location.source}' is not in the index; {hint}"
            findings.append(LintFinding("error", message, lines))
            continue
        if location.page is None:
            continue
        doc = index_docs[indexed]
        page = location.page - page_offset
        if page < 0:
            findings.append(LintFinding(
                "error",
                f"page {location.page} of '{location.source}' is before the first page; "
                f"pages in the goldset count from {page_offset}",
                lines,
            ))
        elif page >= doc.pages:
            findings.append(LintFinding(
                "error",
                f"page {location.page} of '{location.source}' is beyond its {doc.pages} "
                f"page{'s' if doc.pages != 1 else ''}; "
                f"pages in the goldset count from {page_offset}",
                lines,
            ))
        elif page in doc.empty_pages:
            findings.append(LintFinding(
                "error",
                f"page {location.page} of '{location.source}' has no text (scanned page?); no retriever can "
                "find it: OCR the PDF or point to a page with text",
                lines,
            ))
    return findings


def _length_finding(question: QuestionLike) -> LintFinding | None:
    words = word_count(question.question)
    if not question.question.strip():
        return LintFinding("error", "question is empty", tuple(question.lines))
    if words < MIN_QUESTION_WORDS:
        return LintFinding(
            "warning",
            f"question '{question.question.strip()}' has {words} word{'s' if words != 1 else ''}; "
            f"write a full question of at least {MIN_QUESTION_WORDS} words",
            tuple(question.lines),
        )
    return None


def _places(question: QuestionLike, normalize: Callable[[str], str]) -> set[tuple[str, int | None]]:
    return {(normalize(location.source), location.page) for location in question.locations}


def _duplicate_findings(questions: Sequence[QuestionLike], normalize: Callable[[str], str]) -> list[LintFinding]:
    """Near-identical questions (token Jaccard >= NEAR_DUPLICATE_JACCARD), by how their locations differ."""
    findings = []
    for i, first in enumerate(questions):
        for second in questions[i + 1:]:
            if not first.question.strip() or jaccard(first.question, second.question) < NEAR_DUPLICATE_JACCARD:
                continue
            files_a = sorted({normalize(loc.source) for loc in first.locations})
            files_b = sorted({normalize(loc.source) for loc in second.locations})
            line_a, line_b = min(first.lines, default=0), min(second.lines, default=0)
            lines = tuple(sorted(set(first.lines) | set(second.lines)))
            if files_a != files_b:
                sources_a = _quote_list(sorted({loc.source for loc in first.locations}))
                sources_b = _quote_list(sorted({loc.source for loc in second.locations}))
                message = (
                    f"near-identical questions on lines {line_a} and {line_b} expect different files "
                    f"({sources_a} vs {sources_b}); give them the same text and both locations, or make them distinct"
                )
            else:
                same = _places(first, normalize) == _places(second, normalize)
                what = "expect the same places" if same else "expect different pages"
                message = (
                    f"near-identical questions on lines {line_a} and {line_b} {what}; "
                    "merge them or make them distinct (each counts in the averages)"
                )
            findings.append(LintFinding("warning", message, lines))
    return findings


def lint_goldset(
    questions: Sequence[QuestionLike],
    reader_messages: Iterable[str],
    index_docs: Mapping[str, Any],
    *,
    page_offset: int = PAGE_OFFSET,
    normalize: Callable[[str], str] = normalize_name,
    unindexed: Mapping[str, str] | None = None,
) -> list[LintFinding]:
    """Problems of a read goldset against the index, sorted by first line, errors first.

    ``index_docs`` maps indexed file names to objects with ``pages`` and ``empty_pages`` (0-based,
    see DocInfo). File names are compared after ``normalize``; pass the evaluation's own
    normalisation so lint agrees with matching. ``unindexed`` maps files of the docs folder that
    could not be indexed to the reason; a location naming one gets that reason instead of name
    suggestions. Each reader message becomes a finding: an error when it says a row, line or
    location was skipped (it is not evaluated), else a warning.
    """
    by_normal = {normalize(name): name for name in sorted(index_docs)}
    failed = {normalize(name): reason for name, reason in sorted((unindexed or {}).items())}
    findings: list[LintFinding] = []
    for message in reader_messages:
        found = _LINE_NUMBER.search(message)
        severity = "error" if _SKIPPED.search(message) else "warning"
        findings.append(LintFinding(severity, f"reader: {message}", (int(found.group(1)),) if found else ()))
    for question in questions:
        length = _length_finding(question)
        if length is not None:
            findings.append(length)
        findings.extend(_location_findings(question, index_docs, by_normal, page_offset, normalize, failed))
    findings.extend(_duplicate_findings(questions, normalize))
    return sorted(findings, key=lambda f: (min(f.lines, default=0), f.severity != "error", f.message))


def render_lint(findings: Sequence[LintFinding]) -> list[str]:
    """One line per finding (``error   line 4: ...``) and a closing count line."""
    lines = []
    for finding in findings:
        if not finding.lines:
            where = "goldset"
        elif len(finding.lines) == 1:
            where = f"line {finding.lines[0]}"
        else:
            where = "lines " + ", ".join(str(line) for line in finding.lines)
        lines.append(f"{finding.severity:<7} {where}: {finding.message}")
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    if not findings:
        lines.append("goldset OK: no problems found")
    else:
        lines.append(f"{errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}")
    return lines
