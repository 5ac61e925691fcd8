"""Lint a parsed goldset against the index: files, page counts, pages without text, short and
near-identical questions, and the reader's own messages.

Questions are any objects with ``question``, ``locations`` (``source``, ``page``, optionally ``last_page``
of a range and ``problem``) and the goldset's ``lines``; the index is described per file by DocInfo. Short
and near-identical questions are measured as the generator's gates measure them (word_count, jaccard),
so lint and generation agree on them (words.py).

IndexedFiles.diagnose is the one diagnosis of a goldset location against the index (unknown or unindexed
file, page out of range, page without text); lint states its findings, and the evaluation's hints for
questions never found point to them instead of stating them again. File names are compared as matching
compares them (goldset.same_file): a bare name that fits files in two folders is an error naming both.

Near-identical questions are found in about linear time: only pairs that share two of their rarest words
are compared (prefix filtering, exact for a Jaccard threshold: a pair reaching it always shares them), so
a 100,000-question goldset lints in seconds with the same findings as comparing every pair.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from localrag.goldset.format import (MIN_QUESTION_WORDS, NEAR_DUPLICATE_JACCARD, files_by_name, matching_files,
                                     normalize_source, source_parts)
from localrag.progress import progress_iter
from localrag.text.pages import PAGE_OFFSET
from localrag.text.words import jaccard, set_jaccard, tokens, word_count

# Goldsets with at least this many questions show a progress bar (stderr) while they are linted.
PROGRESS_MIN_QUESTIONS = 5000
# Findings of one kind shown in full (--lint, a report's notes); the rest of that kind is one line with their count.
SHOWN_PER_KIND = 20
# Line numbers, and file names, a finding lists before "and N more".
SHOWN_LINES = 10
SHOWN_FILES = 5
# The kinds of finding (LintFinding.kind), as "N more <kind>" counts them.
READER = "reader messages"
QUESTION = "short or empty questions"
LOCATION = "expected files or pages the index does not have"
AMBIGUOUS = "ambiguous file names"
DUPLICATES = "groups of near-identical questions"
REFERENCES = "questions without a reference answer"
EMPTY_INDEX = "empty index"
KINDS = (READER, QUESTION, LOCATION, AMBIGUOUS, DUPLICATES, REFERENCES, EMPTY_INDEX)

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


@dataclasses.dataclass(frozen=True)
class DocInfo:
    """What the index knows of one file: page count and 0-based pages without text."""

    pages: int
    empty_pages: frozenset[int] = frozenset()


@dataclasses.dataclass(frozen=True)
class LintFinding:
    """One problem in a goldset; ``severity`` is ``"error"`` or ``"warning"``; ``kind``: the check that found it (one
    of KINDS), by which shown_findings groups repeated findings (not part of a finding's equality)."""

    severity: str
    message: str
    lines: tuple[int, ...] = ()
    kind: str = dataclasses.field(default="", compare=False)


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
    the goldset's first page number. A goldset source names the files it denotes (goldset.same_file): a bare name
    the file of that name in any folder, a path the file under those folders.
    """

    def __init__(self, docs: Mapping[str, Any], unindexed: Mapping[str, str] | None = None,
                 page_offset: int = PAGE_OFFSET) -> None:
        self.docs = docs
        self.page_offset = page_offset
        self._by_name = files_by_name(docs)
        self._unindexed = dict(unindexed or {})
        self._failed = files_by_name(self._unindexed)
        self._suggestions: dict[str, str] = {}  # difflib is slow: each missing name is looked up once

    def names_of(self, source: str) -> list[str]:
        """Every file, indexed or not (failed), that a goldset source may mean: more than one is ambiguous."""
        return sorted({*matching_files(source, self._by_name), *matching_files(source, self._failed)})

    def name_of(self, source: str) -> str | None:
        """The indexed file a goldset source names, or None (no such file, or an ambiguous name)."""
        names = self.names_of(source)
        return names[0] if len(names) == 1 and names[0] in self.docs else None

    def diagnose(self, location: LocationLike) -> str | None:
        """Why no retriever can find ``location`` in the index, or None when nothing is wrong with it.

        A name that fits several files (ambiguous_text), a file that is not indexed (with the reason it failed,
        or similar indexed names), a page or range its file does not have, a page (every page of a range) without
        text. A page the reader already found unusable (``problem``) is the reader's to report.
        """
        names = self.names_of(location.source)
        if len(names) > 1:
            return ambiguous_text(location.source, names)
        return self._diagnose_one(location, names)

    def finding(self, location: LocationLike, lines: tuple[int, ...]) -> LintFinding | None:
        """diagnose's problem as an error on ``lines``, of kind AMBIGUOUS or LOCATION; None when there is none."""
        names = self.names_of(location.source)
        if len(names) > 1:
            return LintFinding("error", ambiguous_text(location.source, names), lines, AMBIGUOUS)
        problem = self._diagnose_one(location, names)
        return None if problem is None else LintFinding("error", problem, lines, LOCATION)

    def _diagnose_one(self, location: LocationLike, names: Sequence[str]) -> str | None:
        """diagnose for a location that names one file or none (``names``)."""
        if names and names[0] not in self.docs:
            # The file is there but unreadable: "did you mean" would send the user after a typo that is not one.
            return (f"expected file '{location.source}' is in the docs folder but could not be indexed: "
                    f"{self._unindexed[names[0]]}")
        if not names:
            hint = self._suggest(normalize_source(location.source))
            return f"expected file '{location.source}' is not in the index; {hint}"
        doc = self.docs[names[0]]
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
            close = difflib.get_close_matches(normal, list(self._by_name), n=3, cutoff=0.6)
            self._suggestions[normal] = (
                f"did you mean {_quote_list([name for base in close for name in self._by_name[base]])}?"
                if close
                else f"no similar name among the {len(self.docs)} indexed files; index the file or fix the name"
            )
        return self._suggestions[normal]


def ambiguous_text(source: str, names: Sequence[str]) -> str:
    """Why a goldset source that fits several files cannot be scored, and how to name one of them."""
    return (f"expected file '{source}' is ambiguous: {len(names)} files have that name ({_quote_list(names)}), and "
            f"a page of either would be credited; write {' or '.join(names)} in the goldset")


def _length_finding(question: QuestionLike) -> LintFinding | None:
    words = word_count(question.question)
    if not question.question.strip():
        return LintFinding("error", "question is empty", tuple(question.lines), QUESTION)
    if words < MIN_QUESTION_WORDS:
        return LintFinding(
            "warning",
            f"question '{question.question.strip()}' has {words} word{'s' if words != 1 else ''}; "
            f"write a full question of at least {MIN_QUESTION_WORDS} words",
            tuple(question.lines),
            QUESTION,
        )
    return None


def _places(question: QuestionLike) -> set[tuple[str, int | None, int | None]]:
    return {(source_parts(location.source), location.page, getattr(location, "last_page", None))
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
    # Token-less texts ("???") have Jaccard 1.0 with each other and share no token to be found by.
    empty = [i for i, tokens_ in enumerate(sets) if not tokens_]
    pairs = {(i, j) for n, i in enumerate(empty) for j in empty[n + 1:] if texts[i].strip()}
    pairs.update(_similar_pairs(sets, threshold, progress))
    return sorted(pairs)


def _similar_pairs(sets: Sequence[frozenset[str]], threshold: float, progress: bool,
                   skip: Callable[[int, int], bool] = lambda i, j: False) -> Iterator[tuple[int, int]]:
    """Pairs (i < j) of non-empty token sets whose Jaccard reaches `threshold`, by prefix filtering, j ascending;
    `skip(i, j)` is asked, lazily, before a candidate pair is compared (a pair already in one group)."""
    frequency = Counter(token for tokens_ in sets for token in tokens_)
    rank = {token: r for r, token in enumerate(sorted(frequency, key=lambda token: (frequency[token], token)))}
    index: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for j in _progress(range(len(sets)), len(sets), progress, "Lint: near-duplicates"):
        if not sets[j]:
            continue
        keys = signatures(sorted(sets[j], key=rank.__getitem__), threshold)
        for i in {i for key in keys for i in index[key]}:
            if not skip(i, j) and set_jaccard(sets[i], sets[j]) >= threshold:
                yield i, j
        for key in keys:
            index[key].append(j)


def near_duplicate_groups(
    texts: Sequence[str], threshold: float = NEAR_DUPLICATE_JACCARD, *, progress: bool = False
) -> list[list[int]]:
    """The groups of near_duplicate_pairs: each connected set of two or more texts linked by near-duplicate pairs,
    sorted, the groups in order of their first text.

    A group of n texts has up to n(n-1)/2 pairs (a template question asked of 200 items: 19,900); a group is one
    finding. Candidates come as in near_duplicate_pairs, and a pair already in one group is not compared.
    """
    sets = [frozenset(tokens(text)) for text in texts]
    parent = list(range(len(texts)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]  # path halving: the trees stay flat
            i = parent[i]
        return i

    def join(i: int, j: int) -> None:
        parent[max(root(i), root(j))] = min(root(i), root(j))

    # Token-less texts ("???"): each non-blank one pairs with every later token-less text (Jaccard 1.0).
    empty = [i for i, tokens_ in enumerate(sets) if not tokens_]
    first = next((i for i in empty if texts[i].strip()), None)
    for j in empty:
        if first is not None and j > first:
            join(first, j)
    for i, j in _similar_pairs(sets, threshold, progress, skip=lambda i, j: root(i) == root(j)):
        join(i, j)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(len(texts)):
        groups[root(i)].append(i)
    return [members for _, members in sorted(groups.items()) if len(members) > 1]


def near_duplicate_pairs_brute_force(
    texts: Sequence[str], threshold: float = NEAR_DUPLICATE_JACCARD
) -> list[tuple[int, int]]:
    """The reference near_duplicate_pairs is tested against: every pair compared (quadratic)."""
    return [(i, j) for i in range(len(texts)) for j in range(i + 1, len(texts))
            if texts[i].strip() and jaccard(texts[i], texts[j]) >= threshold]


def _duplicate_findings(questions: Sequence[QuestionLike], progress: bool = False) -> list[LintFinding]:
    """Near-identical questions (token Jaccard >= NEAR_DUPLICATE_JACCARD), one finding per group
    (near_duplicate_groups), by how their locations differ."""
    findings = []
    for group in near_duplicate_groups([q.question for q in questions], progress=progress):
        members = [questions[i] for i in group]
        lines = tuple(sorted({line for q in members for line in q.lines}))
        findings.append(LintFinding("warning", _duplicate_message(members), lines, DUPLICATES))
    return findings


def _duplicate_message(members: Sequence[QuestionLike]) -> str:
    """What is wrong with a group of near-identical questions: two named by their lines, more by their count (the
    finding's lines say where they are)."""
    if len(members) == 2:
        firsts = [min(q.lines, default=0) for q in members]
        who, every = f"near-identical questions on lines {firsts[0]} and {firsts[1]}", "both locations"
    else:
        who, every = f"{len(members)} near-identical questions", "every location"
    if len({tuple(sorted({source_parts(loc.source) for loc in q.locations})) for q in members}) > 1:
        sources = [_quote_list(sorted({loc.source for loc in q.locations})) for q in members]
        files = " vs ".join(sources) if len(members) == 2 else count_list(list(dict.fromkeys(sources)), SHOWN_FILES)
        return f"{who} expect different files ({files}); give them the same text and {every}, or make them distinct"
    what = "expect the same places" if len({frozenset(_places(q)) for q in members}) == 1 else "expect different pages"
    return f"{who} {what}; merge them or make them distinct (each counts in the averages)"


def count_list(items: Sequence[str], shown: int) -> str:
    """``a, b and c``; past ``shown`` items the first ones and ``and N more``."""
    if len(items) > shown:
        return f"{', '.join(items[:shown])} and {len(items) - shown:,} more"
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


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
                                   f"evaluate answers on the others only", lines, REFERENCES)]


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
    location was skipped or a question left out (it is not evaluated), else a warning. A problem found on
    several questions (a missing file they all name) is one finding on all their lines, and each group of
    near-identical questions is one finding. ``progress`` shows a bar on stderr for goldsets of
    PROGRESS_MIN_QUESTIONS or more.
    """
    files = IndexedFiles(index_docs, unindexed, page_offset)
    findings: list[LintFinding] = []
    for message in reader_messages:
        found = _LINE_NUMBER.search(message)
        severity = "error" if _SKIPPED.search(message) else "warning"
        findings.append(LintFinding(severity, f"reader: {message}", (int(found.group(1)),) if found else (), READER))
    nothing_indexed = not index_docs and not unindexed
    if nothing_indexed and any(question.locations for question in questions):
        expected = sorted({loc.source for q in questions for loc in q.locations})
        findings.append(LintFinding("error", f"the index holds no files, so none of the {len(expected)} expected "
                                             f"files ({', '.join(expected[:3])}{', ...' if len(expected) > 3 else ''}) "
                                             f"can be found; index the docs folder with add_pdfs.py", (),
                                    EMPTY_INDEX))
    per_question: list[LintFinding] = []
    for question in _progress(questions, len(questions), progress, "Lint: questions"):
        length = _length_finding(question)
        if length is not None:
            per_question.append(length)
        if nothing_indexed:
            continue  # one finding above, not one per location
        # Two locations of one question may have the same problem (two pages of a missing file): said once.
        found = (files.finding(location, tuple(question.lines)) for location in question.locations)
        per_question.extend({finding.message: finding for finding in found if finding is not None}.values())
    findings.extend(merge_repeats(per_question))
    findings.extend(_duplicate_findings(questions, progress))  # a group's message is its own: never merged
    findings.extend(_reference_findings(questions))
    return sorted(findings, key=lambda f: (min(f.lines, default=0), f.severity != "error", f.message))


def merge_repeats(findings: Iterable[LintFinding]) -> list[LintFinding]:
    """One finding per message: the lines of every finding that says the same (questions naming one missing file),
    in order of the first."""
    first: dict[tuple[str, str], LintFinding] = {}
    lines: dict[tuple[str, str], set[int]] = defaultdict(set)
    for finding in findings:
        key = (finding.severity, finding.message)
        first.setdefault(key, finding)
        lines[key].update(finding.lines)
    return [finding if len(lines[key]) == len(finding.lines) else
            dataclasses.replace(finding, lines=tuple(sorted(lines[key]))) for key, finding in first.items()]


def shown_findings(findings: Sequence[LintFinding], per_kind: int = SHOWN_PER_KIND) -> list[LintFinding]:
    """The findings to print, in their order: the first ``per_kind`` of each severity and kind, then for each with
    more one finding that counts the rest (their lines as its lines), so a goldset of 20,000 near-identical questions
    prints a page, not every group."""
    shown: list[LintFinding] = []
    rest: dict[tuple[str, str], list[LintFinding]] = {}
    counts: Counter = Counter()
    for finding in findings:
        key = (finding.severity, finding.kind)
        counts[key] += 1
        if counts[key] <= per_kind:
            shown.append(finding)
        else:
            rest.setdefault(key, []).append(finding)
    for (severity, kind), more in rest.items():
        lines = tuple(sorted({line for finding in more for line in finding.lines}))
        shown.append(LintFinding(severity, f"{len(more):,} more {kind or 'findings'} like the {per_kind} above, not "
                                           f"shown", lines, kind))
    return shown


def where_text(lines: Sequence[int]) -> str:
    """Where in the goldset a finding is: "line 4", "lines 2, 8", or "goldset" for none; past SHOWN_LINES lines
    the first ones and how many more."""
    if not lines:
        return "goldset"
    shown = ", ".join(str(line) for line in lines[:SHOWN_LINES])
    more = f" and {len(lines) - SHOWN_LINES:,} more" if len(lines) > SHOWN_LINES else ""
    return f"line{'s' if len(lines) > 1 else ''} {shown}{more}"


def render_lint(findings: Sequence[LintFinding], per_kind: int = SHOWN_PER_KIND) -> list[str]:
    """One line per finding (``error   line 4: ...``; past ``per_kind`` of a kind, one line counts the rest:
    shown_findings) and a closing count line of every finding."""
    lines = [f"{finding.severity:<7} {where_text(finding.lines)}: {finding.message}"
             for finding in shown_findings(findings, per_kind)]
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    if not findings:
        lines.append("goldset OK: no problems found")
    else:
        lines.append(f"{errors:,} error{'s' if errors != 1 else ''}, {warnings:,} warning{'s' if warnings != 1 else ''}")
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
