"""Lint a parsed goldset against the index: files, page counts, pages without text, short and
near-identical questions, and the reader's own messages.

Questions are any objects with ``question``, ``locations`` (``source``, ``page``, optionally ``last_page``
of a range and ``problem``) and the goldset's ``lines``; the index is described per file by DocInfo. Short
and near-identical questions are measured as the generator's gates measure them (word_count, jaccard),
so lint and generation agree on them (words.py).

IndexedFiles.diagnose is the one diagnosis of a goldset location against the index (unknown or unindexed
file, page out of range, page without text); lint states its findings, and the evaluation's hints for
questions never found point to them instead of stating them again. File names are compared as matching
compares them (goldset.normalize_source).

Near-identical questions are found in about linear time: only pairs that share two of their rarest words
are compared (prefix filtering, exact for a Jaccard threshold: a pair reaching it always shares them), so
a 100,000-question goldset lints in seconds with the same findings as comparing every pair.
"""

from __future__ import annotations

import difflib
import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from localrag.goldset.format import MIN_QUESTION_WORDS, NEAR_DUPLICATE_JACCARD, normalize_source
from localrag.progress import progress_iter
from localrag.text.pages import PAGE_OFFSET
from localrag.text.words import jaccard, set_jaccard, tokens, word_count

# Goldsets with at least this many questions show a progress bar (stderr) while they are linted.
PROGRESS_MIN_QUESTIONS = 5000

_LINE_NUMBER = re.compile(r"\b(?:line|zeile)\s+(\d+)", re.IGNORECASE)
# A reader message about something it dropped ("row skipped", "location skipped").
_SKIPPED = re.compile(r"\bskipped\b|übersprungen|\bleft out\b", re.IGNORECASE)


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


def _quote_list(names: Sequence[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def page_text(location: LocationLike) -> str:
    """The page of a location as written: "12", or "12-13" for a range."""
    last = getattr(location, "last_page", None)
    return str(location.page) if last is None else f"{location.page}-{last}"


def page_range_problem(location: LocationLike, doc: Any, page_offset: int = PAGE_OFFSET) -> str | None:
    """Why a location's page (or range) does not exist in its indexed file ``doc``, or None if it does.

    A location without a page, or with a ``problem`` the reader already reported, has none here.
    """
    if location.page is None or getattr(location, "problem", ""):
        return None
    first = location.page - page_offset
    last = (getattr(location, "last_page", None) or location.page) - page_offset
    if first < 0:
        return (f"page {page_text(location)} of '{location.source}' is before the first page; "
                f"pages in the goldset count from {page_offset}")
    if last >= doc.pages:
        return (f"page {page_text(location)} of '{location.source}' is beyond its {doc.pages} "
                f"page{'s' if doc.pages != 1 else ''}; pages in the goldset count from {page_offset}")
    return None


class IndexedFiles:
    """The indexed files (name -> DocInfo-like ``pages``, ``empty_pages``) as a goldset names them.

    ``unindexed`` maps files of the docs folder that could not be indexed to the reason; ``page_offset`` is
    the goldset's first page number.
    """

    def __init__(self, docs: Mapping[str, Any], unindexed: Mapping[str, str] | None = None,
                 page_offset: int = PAGE_OFFSET) -> None:
        self.docs = docs
        self.page_offset = page_offset
        self._by_normal = {normalize_source(name): name for name in sorted(docs)}
        self._failed = {normalize_source(name): reason for name, reason in sorted((unindexed or {}).items())}
        self._suggestions: dict[str, str] = {}  # difflib is slow: each missing name is looked up once

    def name_of(self, source: str) -> str | None:
        """The indexed file a goldset source names, or None."""
        return self._by_normal.get(normalize_source(source))

    def diagnose(self, location: LocationLike) -> str | None:
        """Why no retriever can find ``location`` in the index, or None when nothing is wrong with it.

        A file that is not indexed (with the reason it failed, or similar indexed names), a page or range
        its file does not have, a page (every page of a range) without text. A page the reader already
        found unusable (``problem``) is the reader's to report.
        """
        normal = normalize_source(location.source)
        name = self._by_normal.get(normal)
        if name is None and normal in self._failed:
            # The file is there but unreadable: "did you mean" would send the user after a typo that is not one.
            return (f"expected file '{location.source}' is in the docs folder but could not be indexed: "
                    f"{self._failed[normal]}")
        if name is None:
            return f"expected file '{location.source}' is not in the index; {self._suggest(normal)}"
        doc = self.docs[name]
        problem = page_range_problem(location, doc, self.page_offset)
        if problem is not None or location.page is None or getattr(location, "problem", ""):
            return problem
        last = getattr(location, "last_page", None) or location.page
        if all(page - self.page_offset in doc.empty_pages for page in range(location.page, last + 1)):
            return (f"page {page_text(location)} of '{location.source}' has no text (scanned page?); no retriever "
                    "can find it: OCR the PDF or point to a page with text")
        return None

    def _suggest(self, normal: str) -> str:
        """The "did you mean ...?" hint for a missing normalised name, or how to fix a name like no indexed one."""
        if normal not in self._suggestions:
            close = difflib.get_close_matches(normal, list(self._by_normal), n=3, cutoff=0.6)
            self._suggestions[normal] = (
                f"did you mean {_quote_list([self._by_normal[name] for name in close])}?"
                if close
                else f"no similar name among the {len(self.docs)} indexed files; index the file or fix the name"
            )
        return self._suggestions[normal]


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


def _places(question: QuestionLike) -> set[tuple[str, int | None, int | None]]:
    return {(normalize_source(location.source), location.page, getattr(location, "last_page", None))
            for location in question.locations}


def _progress(items: Iterable, total: int, enabled: bool, desc: str) -> Iterable:
    """``items`` with a tqdm bar on stderr when enabled and the goldset is large."""
    if not enabled or total < PROGRESS_MIN_QUESTIONS:
        return items
    return progress_iter(items, desc, total, "q")


def min_overlap(size: int, threshold: float) -> int:
    """Fewest shared tokens a set of ``size`` tokens needs with another to reach Jaccard ``threshold``.

    Rounded down a hair, so float error can only make the prefix longer (more candidates), never miss a pair.
    """
    return max(1, math.ceil(threshold * size - 1e-9))


def signatures(ordered: Sequence[str], threshold: float) -> list[tuple[str, ...]]:
    """Keys a token set (``ordered`` rarest first) is indexed under; two sets reaching ``threshold`` share one.

    A pair with Jaccard >= threshold shares o >= min_overlap(n) tokens of each set of n tokens, so at most
    n - min_overlap(n) of a set's tokens lie outside the pair's common ones: the two rarest common tokens lie
    among the first n - min_overlap(n) + 2 of both sets. Every 2-token combination of that prefix is a key.
    A pair sharing a single token can only reach the threshold among sets of at most 1/threshold tokens;
    those are also indexed under each token alone.
    """
    n = len(ordered)
    keys: list[tuple[str, ...]] = list(itertools.combinations(ordered[: n - min_overlap(n, threshold) + 2], 2))
    if n * threshold <= 1 + 1e-9:
        keys += [(token,) for token in ordered]
    return keys


def near_duplicate_pairs(
    texts: Sequence[str], threshold: float = NEAR_DUPLICATE_JACCARD, *, progress: bool = False
) -> list[tuple[int, int]]:
    """Index pairs (i < j) whose token Jaccard reaches ``threshold`` (0 < threshold <= 1; texts[i] not blank), sorted.

    Prefix filtering: tokens are ordered rarest first (over all texts) and each set is indexed under the
    pairs of tokens of its prefix (see signatures); only sets sharing a key are compared, with the exact
    Jaccard. Same pairs as near_duplicate_pairs_brute_force, in about linear time: a key of two rare words
    is shared by few questions, even in a goldset of 100,000 on a corpus of 60 chunks.
    """
    sets = [frozenset(tokens(text)) for text in texts]
    pairs: set[tuple[int, int]] = set()
    # Token-less texts ("???") have Jaccard 1.0 with each other and share no token to be found by.
    empty = [i for i, tokens_ in enumerate(sets) if not tokens_]
    pairs.update((i, j) for n, i in enumerate(empty) for j in empty[n + 1:] if texts[i].strip())
    frequency = Counter(token for tokens_ in sets for token in tokens_)
    rank = {token: r for r, token in enumerate(sorted(frequency, key=lambda token: (frequency[token], token)))}
    index: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for j in _progress(range(len(sets)), len(sets), progress, "Lint: near-duplicates"):
        if not sets[j]:
            continue
        keys = signatures(sorted(sets[j], key=rank.__getitem__), threshold)
        for i in {i for key in keys for i in index[key]}:
            if set_jaccard(sets[i], sets[j]) >= threshold:  # sets[i] has tokens, so texts[i] is not blank
                pairs.add((i, j))
        for key in keys:
            index[key].append(j)
    return sorted(pairs)


def near_duplicate_pairs_brute_force(
    texts: Sequence[str], threshold: float = NEAR_DUPLICATE_JACCARD
) -> list[tuple[int, int]]:
    """The reference near_duplicate_pairs is tested against: every pair compared (quadratic)."""
    return [(i, j) for i in range(len(texts)) for j in range(i + 1, len(texts))
            if texts[i].strip() and jaccard(texts[i], texts[j]) >= threshold]


def _duplicate_findings(questions: Sequence[QuestionLike], progress: bool = False) -> list[LintFinding]:
    """Near-identical questions (token Jaccard >= NEAR_DUPLICATE_JACCARD), by how their locations differ."""
    findings = []
    for i, j in near_duplicate_pairs([q.question for q in questions], progress=progress):
        first, second = questions[i], questions[j]
        files_a = sorted({normalize_source(loc.source) for loc in first.locations})
        files_b = sorted({normalize_source(loc.source) for loc in second.locations})
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
            same = _places(first) == _places(second)
            what = "expect the same places" if same else "expect different pages"
            message = (
                f"near-identical questions on lines {line_a} and {line_b} {what}; "
                "merge them or make them distinct (each counts in the averages)"
            )
        findings.append(LintFinding("warning", message, lines))
    return findings


def _reference_findings(questions: Sequence[QuestionLike]) -> list[LintFinding]:
    """A goldset that gives reference answers ("antwort" / "answer") to some questions only: those without one
    cannot be judged for answer correctness, which a rate over the others would hide."""
    answered = [q for q in questions if getattr(q, "reference", "").strip()]
    missing = [q for q in questions if not getattr(q, "reference", "").strip()]
    if not answered or not missing:
        return []
    lines = tuple(sorted(line for q in missing for line in q.lines))
    return [LintFinding("warning", f"{len(missing)} of {len(questions)} questions have no reference answer (column "
                                   f"antwort / answer): answer correctness cannot be judged for them; add one, or "
                                   f"evaluate answers on the others only", lines)]


def lint_goldset(
    questions: Sequence[QuestionLike],
    reader_messages: Iterable[str],
    index_docs: Mapping[str, Any],
    *,
    page_offset: int = PAGE_OFFSET,
    unindexed: Mapping[str, str] | None = None,
    progress: bool = False,
) -> list[LintFinding]:
    """Problems of a read goldset against the index, sorted by first line, errors first.

    ``index_docs`` maps indexed file names to objects with ``pages`` and ``empty_pages`` (0-based,
    see DocInfo). Each location is diagnosed by IndexedFiles.diagnose; ``unindexed`` maps files of
    the docs folder that could not be indexed to the reason, which a location naming one gets instead
    of name suggestions. Each reader message becomes a finding: an error when it says a row, line or
    location was skipped or a question left out (it is not evaluated), else a warning. ``progress``
    shows a bar on stderr for goldsets of PROGRESS_MIN_QUESTIONS or more.
    """
    files = IndexedFiles(index_docs, unindexed, page_offset)
    findings: list[LintFinding] = []
    for message in reader_messages:
        found = _LINE_NUMBER.search(message)
        severity = "error" if _SKIPPED.search(message) else "warning"
        findings.append(LintFinding(severity, f"reader: {message}", (int(found.group(1)),) if found else ()))
    nothing_indexed = not index_docs and not unindexed
    if nothing_indexed and any(question.locations for question in questions):
        expected = sorted({loc.source for q in questions for loc in q.locations})
        findings.append(LintFinding("error", f"the index holds no files, so none of the {len(expected)} expected "
                                             f"files ({', '.join(expected[:3])}{', ...' if len(expected) > 3 else ''}) "
                                             f"can be found; index the docs folder with add_pdfs.py", ()))
    for question in _progress(questions, len(questions), progress, "Lint: questions"):
        length = _length_finding(question)
        if length is not None:
            findings.append(length)
        if nothing_indexed:
            continue  # one finding above, not one per location
        # Two locations of one question may have the same problem (two pages of a missing file): said once.
        problems = dict.fromkeys(files.diagnose(location) for location in question.locations)
        findings.extend(LintFinding("error", problem, tuple(question.lines)) for problem in problems if problem)
    findings.extend(_duplicate_findings(questions, progress))
    findings.extend(_reference_findings(questions))
    return sorted(findings, key=lambda f: (min(f.lines, default=0), f.severity != "error", f.message))


def where_text(lines: Sequence[int]) -> str:
    """Where in the goldset a finding is: "line 4", "lines 2, 8", or "goldset" for none."""
    if not lines:
        return "goldset"
    return f"line{'s' if len(lines) > 1 else ''} {', '.join(str(line) for line in lines)}"


def render_lint(findings: Sequence[LintFinding]) -> list[str]:
    """One line per finding (``error   line 4: ...``) and a closing count line."""
    lines = [f"{finding.severity:<7} {where_text(finding.lines)}: {finding.message}" for finding in findings]
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    if not findings:
        lines.append("goldset OK: no problems found")
    else:
        lines.append(f"{errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}")
    return lines


def index_docs(rag: Any) -> dict[str, DocInfo]:
    """Indexed file -> DocInfo (page count, 0-based pages without text) of a LocalRAG's index."""
    return {d["source"]: DocInfo(d["pages"], frozenset(d["empty_pages"])) for d in rag.list_documents()}


def lint_index(rag: Any, questions: Sequence[QuestionLike], messages: Sequence[str], docs: Mapping[str, DocInfo],
               progress: bool = False) -> list[LintFinding]:
    """Lint findings of a read goldset against a LocalRAG's index: files (also those that failed to index), pages,
    text."""
    unindexed = {name: entry["reason"] for name, entry in rag.info.get("failed", {}).items()}
    return lint_goldset(questions, messages, docs, page_offset=PAGE_OFFSET, unindexed=unindexed, progress=progress)
