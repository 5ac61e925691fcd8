"""Read and write retrieval goldsets and decide whether a retrieved chunk hits an expected location.

A goldset lists questions and where their answer is: a PDF file name and, optionally, a page
as a PDF viewer shows it (1-based): ``12``, a range ``12-13`` (every page in it counts), or ``S. 12`` /
``Seite 12`` / ``p. 12`` / ``page 12``. An empty page means any page of the file counts. Any other page
text, page 0 or a negative page makes the location invalid: the reader says so and the question is left
out of the metrics (never widened to the whole file). Two formats are read:

* CSV (UTF-8 with or without BOM; ``;`` or ``,`` as delimiter, detected from the header line),
  with the German columns ``frage, korpus, erwartete_quelle, erwartete_seite, anmerkung, antwort`` or the
  English ones ``question, corpus, expected_source, expected_page, note, answer``. Only the question and
  the source are required; ``antwort`` / ``answer`` is the reference answer that answer-level evaluation
  judges a chat's answer against. Lines whose first non-blank character is ``#`` are comments; empty
  lines are ignored. Line numbers in messages are physical lines of the file (1 = first line).
* JSONL, one object a line: ``{"question", "corpus", "locations": [{"source", "page"}], "note", "answer"}``.

Written goldsets (write_goldset_csv, e.g. generated ones) are CSV with the German columns of WRITTEN_FIELDS and
``;``, a formula-like cell with a leading quote (files.spreadsheet_cell), which reading removes.

Rows with the same question (after whitespace normalisation) form one question with several
acceptable locations, e.g. a fact stated on two pages: retrieving any of them is a hit.

Query ids are ``sha1(normalised question)[:10]`` (hex; normalised = whitespace runs collapsed,
Unicode NFC), not running numbers, so that an id, and
with it every per-question line of a committed report, survives reordering, inserting or deleting
other rows. With 40 bits, a collision among 10,000 questions has a probability below 1e-4.

Matching is page-based: retrieved chunks carry 0-based page numbers (as LangChain's PDF loaders
give them); the goldset's page minus ``PAGE_OFFSET`` (localrag/text/pages.py) is compared within ``PAGE_TOLERANCE``.
Files are compared by path (same_file): chunks record theirs relative to the docs folder (``sub1/Same.pdf``); a bare
name in the goldset matches that file in any folder, a path only the file there.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from localrag.errors import RAGError
from localrag.files import csv_text, restore_cell, write_atomic
from localrag.text.pages import PAGE_OFFSET
from localrag.text.query import text_problem

# A neighbouring page still counts: page labels are often off by one and facts run over pages.
PAGE_TOLERANCE = 1
# Delimiters tried on the header line; on a tie the first wins.
CSV_DELIMITERS = (",", ";")
# Field delimiter of written goldsets.
WRITE_DELIMITER = ";"
# Field -> accepted header names (German as existing goldsets have them, then English); the order of the
# columns in a written goldset, which uses the German names.
CSV_COLUMNS = {
    "question": ("frage", "question"),
    "corpus": ("korpus", "corpus"),
    "source": ("erwartete_quelle", "expected_source"),
    "page": ("erwartete_seite", "expected_page"),
    "note": ("anmerkung", "note"),
    "reference": ("antwort", "answer"),
}
# The columns a written goldset has (a generated question has no reference answer).
WRITTEN_FIELDS = ("question", "corpus", "source", "page", "note")
# Fields a goldset cannot do without.
REQUIRED_FIELDS = ("question", "source")
# Questions quoted in messages are cut to this many characters.
MESSAGE_QUESTION_CHARS = 60
# File suffix that selects the JSONL reader; anything else is read as CSV.
JSONL_SUFFIX = ".jsonl"
# A page cell: a page number (with a zero fraction as spreadsheets export it, "81.0") or a range "12-13",
# optionally after a page word as people write it by hand ("S. 12", "Seite 12", "p. 12", "pp. 12-13").
_PAGE_NUMBER = r"(\d+)(?:\.0+)?"
_PAGE_TEXT = re.compile(
    rf"(?:(?:s|seite|seiten|p|pp|page|pages)\.?\s*)?{_PAGE_NUMBER}(?:\s*[-–]\s*{_PAGE_NUMBER})?", re.IGNORECASE
)
# What the reader accepts as a page, for messages.
PAGE_FORMATS = "12, 12-13, S. 12, Seite 12 or p. 12"
# Why page 0 or a negative page is unusable.
_BEFORE_FIRST = f"is before the first page; pages count from {PAGE_OFFSET}, as a PDF viewer shows them"
# Why a location with a bad page is not used, appended to its message.
LEFT_OUT = "the question is left out of the metrics until the page is fixed"


class GoldsetError(RAGError, ValueError):
    """A goldset that cannot be used: missing, unreadable, bad header or no usable rows."""


@dataclass(frozen=True)
class Location:
    """One acceptable place for an answer.

    ``page`` as written in the goldset (1-based), None = any page of the file; ``last_page`` ends a range
    ``page-last_page`` of pages that all count (None = the one page). ``problem`` says why the written page is
    unusable ("" = usable); such a location matches nothing and its question is left out of the metrics.
    """

    source: str
    page: int | None = None
    last_page: int | None = None
    problem: str = ""

    @property
    def end_page(self) -> int | None:
        """The last acceptable page: ``last_page`` of a range, else ``page``."""
        return self.page if self.last_page is None else self.last_page

    def page_text(self) -> str:
        """The page as a report shows it: "12", "12-13", or "" for any page."""
        if self.page is None:
            return ""
        return str(self.page) if self.last_page is None else f"{self.page}-{self.last_page}"


@dataclass(frozen=True)
class GoldQuestion:
    """A question with every acceptable location and the goldset lines it came from."""

    query_id: str
    question: str
    corpus: str | None
    locations: tuple[Location, ...]
    note: str
    lines: tuple[int, ...]
    reference: str = ""  # the reference answer ("antwort" / "answer"); "" when the goldset gives none


@dataclass
class Goldset:
    """The questions of one goldset file plus the messages about rows that were skipped or odd."""

    questions: list[GoldQuestion]
    messages: list[str]
    path: Path


@dataclass(frozen=True)
class GoldsetRow:
    """One row of a written goldset: the fields of CSV_COLUMNS, in their order; ``page`` is 1-based."""

    question: str
    corpus: str
    source: str
    page: int
    note: str


@dataclass(frozen=True)
class _Row:
    """One usable goldset row or JSONL line before questions are merged."""

    line: int
    question: str
    corpus: str | None
    locations: tuple[Location, ...]
    note: str
    reference: str = ""


# ---------------------------------------------------------------------------------------------
# Small pure helpers


# Token Jaccard similarity from which two questions count as near-duplicates.
NEAR_DUPLICATE_JACCARD = 0.8

# Fewest words a question may have (generation gate and lint warning).
MIN_QUESTION_WORDS = 3

def normalize_question(text: str) -> str:
    """Collapse all whitespace runs to one space, trim, and apply Unicode NFC."""
    return unicodedata.normalize("NFC", " ".join(text.split()))


def query_id(question: str) -> str:
    """Stable id of a question: the first 10 hex digits of sha1 of its normalised UTF-8 text."""
    return hashlib.sha1(normalize_question(question).encode("utf-8")).hexdigest()[:10]


def parse_page(value: object) -> tuple[int, int | None] | None:
    """(first page, last page of a range or None) from a cell or JSON value; None for empty.

    ``"81"``, ``" 81 "``, ``81``, ``"81.0"``/``81.0`` (spreadsheets export floats), ``"S. 81"``, ``"Seite 81"``
    and ``"p. 81"`` give (81, None); ``"12-13"`` gives (12, 13). ValueError saying what is wrong for anything
    else, for page 0 or below, and for a range that runs backwards.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        match = _PAGE_TEXT.fullmatch(value.strip())
        if match is None and _PAGE_TEXT.fullmatch(value.strip().removeprefix("-")):
            raise ValueError(_BEFORE_FIRST)
        if match is None:
            raise ValueError(f"is not a page; write {PAGE_FORMATS}")
        first, last = int(match.group(1)), None if match.group(2) is None else int(match.group(2))
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"is not a page; write {PAGE_FORMATS}")
    elif isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError(f"is not a whole page number; write {PAGE_FORMATS}")
    else:
        first, last = int(value), None
    if first < PAGE_OFFSET:
        raise ValueError(_BEFORE_FIRST)
    if last is not None and last < first:
        raise ValueError(f"is a range that runs backwards; write the first page first, e.g. {last}-{first}")
    return first, (None if last == first else last)


def _location(source: str, page_value: object, what: str) -> Location:
    """A location; an unusable page makes it carry ``problem``: ``what`` (the page as written) and why."""
    try:
        page = parse_page(page_value)
    except ValueError as error:
        return Location(source, problem=f"{what} {error}; {LEFT_OUT}")
    return Location(source, *(page or (None, None)))


def _short(question: str) -> str:
    """The question cut to MESSAGE_QUESTION_CHARS, for messages."""
    if len(question) <= MESSAGE_QUESTION_CHARS:
        return question
    return question[: MESSAGE_QUESTION_CHARS - 3] + "..."


def _is_skippable(line: str) -> bool:
    """Blank lines and ``#`` comments (leading whitespace allowed) carry no row."""
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


# ---------------------------------------------------------------------------------------------
# CSV


def detect_delimiter(header_line: str) -> str:
    """The delimiter under which the header line yields the most known column names.

    Ties (e.g. an unknown header) go to the delimiter with more fields, then to ``,``.
    """
    known = {name for names in CSV_COLUMNS.values() for name in names}

    def score(delimiter: str) -> tuple[int, int]:
        fields = next(csv.reader([header_line], delimiter=delimiter))
        return sum(f.strip().casefold() in known for f in fields), len(fields)

    return max(CSV_DELIMITERS, key=score)  # max keeps the first of equal scores


def _expected_columns_text() -> str:
    german = [names[0] for names in CSV_COLUMNS.values()]
    english = [names[1] for names in CSV_COLUMNS.values()]
    return f"{', '.join(german)} (German) or {', '.join(english)} (English)"


def map_header(names: Sequence[str]) -> dict[str, int]:
    """Field -> column index for a CSV header; GoldsetError on unknown, repeated or missing names.

    Names are trimmed and case-insensitive; empty names (trailing delimiters) are ignored.
    """
    by_name = {name: field for field, names_ in CSV_COLUMNS.items() for name in names_}
    mapping: dict[str, int] = {}
    unknown: list[str] = []
    repeated: list[str] = []
    for index, raw in enumerate(names):
        name = raw.strip().casefold()
        if not name:
            continue
        field = by_name.get(name)
        if field is None:
            unknown.append(raw.strip())
        elif field in mapping:
            repeated.append(raw.strip())
        else:
            mapping[field] = index
    missing = [CSV_COLUMNS[f][0] + "/" + CSV_COLUMNS[f][1] for f in REQUIRED_FIELDS if f not in mapping]
    problems = []
    if unknown:
        problems.append("unknown column(s) " + ", ".join(unknown))
    if repeated:
        problems.append("repeated column(s) " + ", ".join(repeated))
    if missing:
        problems.append("missing required column(s) " + ", ".join(missing))
    if problems:
        found = ", ".join(n.strip() for n in names if n.strip()) or "(none)"
        raise GoldsetError(
            f"{'; '.join(problems)}. Found: {found}. Expected: {_expected_columns_text()}; "
            "only the question and the source are required. Rename the columns in the header line."
        )
    return mapping


class _LineFeed:
    """Feeds physical lines to csv.reader, dropping blank and comment lines between records.

    Lines inside a quoted multi-line field are passed through untouched. Call ``start_record``
    before each record; afterwards ``first_line`` is the physical number of its first line and
    ``last_line`` that of its last.
    """

    def __init__(self, lines: Iterator[str], lines_before: int) -> None:
        self._lines = lines
        self._at_start = True
        self.first_line = 0
        self.last_line = lines_before

    def start_record(self) -> None:
        self._at_start = True

    def __iter__(self) -> _LineFeed:
        return self

    def __next__(self) -> str:
        while True:
            line = next(self._lines)
            self.last_line += 1
            if self._at_start:
                if _is_skippable(line):
                    continue
                self._at_start = False
                self.first_line = self.last_line
            return line


def _cell(row: Sequence[str], mapping: dict[str, int], field: str) -> str:
    index = mapping.get(field)
    return row[index].strip() if index is not None and index < len(row) else ""


def _csv_row(
    row: Sequence[str], line: int, mapping: dict[str, int], header: Sequence[str], delimiter: str
) -> tuple[_Row | None, list[str]]:
    """One CSV record as a usable row (or None) plus messages about it."""
    width = len(header)
    # More fields than columns: an unquoted delimiter has shifted the cells, so none can be trusted.
    if len(row) > width:
        return None, [
            f"line {line}: {len(row)} fields but the header has {width}; "
            f"put a field that contains '{delimiter}' in double quotes or remove a stray one; row skipped"
        ]
    question = normalize_question(_cell(row, mapping, "question"))
    source = _cell(row, mapping, "source")
    if not question:
        column = header[mapping["question"]].strip()
        return None, [f"line {line}: no question in column '{column}'; row skipped"]
    if problem := text_problem(question):  # the retriever's rule: no visible text, or not valid Unicode
        column = header[mapping["question"]].strip()
        return None, [f"line {line}: the question {question!r} in column '{column}' {problem}; row skipped"]
    if not source:
        column = header[mapping["source"]].strip()
        return None, [f'line {line}: no source in column \'{column}\' for "{_short(question)}"; row skipped']
    messages = []
    page_text = _cell(row, mapping, "page")
    column = header[mapping["page"]].strip() if "page" in mapping else ""
    location = _location(source, page_text, f"page '{page_text}' in column '{column}'")
    if location.problem:
        messages.append(f"line {line}: {location.problem}")
    corpus = _cell(row, mapping, "corpus") or None
    note = _cell(row, mapping, "note")
    return _Row(line, question, corpus, (location,), note, _cell(row, mapping, "reference")), messages


def _read_csv_rows(text: str) -> tuple[list[_Row], list[str]]:
    """Usable rows and messages from CSV text (BOM already removed)."""
    lines = iter(io.StringIO(text, newline=""))
    header_line, header_number = "", 0
    for header_number, line in enumerate(lines, start=1):
        if not _is_skippable(line):
            header_line = line.rstrip("\r\n")
            break
    if not header_line:
        raise GoldsetError(
            f"no header line (the file is empty or holds only comments). Expected: {_expected_columns_text()}."
        )
    delimiter = detect_delimiter(header_line)
    header = next(csv.reader([header_line], delimiter=delimiter))
    mapping = map_header(header)

    feed = _LineFeed(lines, header_number)
    reader = csv.reader(feed, delimiter=delimiter)
    rows: list[_Row] = []
    messages: list[str] = []
    while True:
        feed.start_record()
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            raise GoldsetError(
                f"line {feed.first_line}: cannot parse CSV ({error}); look for an unclosed double quote"
            ) from error
        if not any(cell.strip() for cell in record):
            continue  # e.g. ";;;;" left by a spreadsheet
        record = [restore_cell(cell) for cell in record]
        if feed.last_line > feed.first_line:
            messages.append(
                f"line {feed.first_line}: the row runs over lines {feed.first_line}-{feed.last_line} "
                "(a quoted field holds a line break); check for an unclosed double quote"
            )
        row, row_messages = _csv_row(record, feed.first_line, mapping, header, delimiter)
        messages.extend(row_messages)
        if row is not None:
            rows.append(row)
    return rows, messages


# ---------------------------------------------------------------------------------------------
# JSONL


def _json_locations(raw: object, line: int) -> tuple[list[Location], list[str]]:
    """Locations from a JSONL ``locations`` value plus messages about bad entries."""
    if not isinstance(raw, list):
        return [], []
    locations: list[Location] = []
    messages: list[str] = []
    for number, entry in enumerate(raw, start=1):
        source = entry.get("source") if isinstance(entry, dict) else None
        if not isinstance(source, str) or not source.strip():
            messages.append(f'line {line}: location {number} has no "source"; location skipped')
            continue
        shown = json.dumps(entry.get("page"), ensure_ascii=False)
        location = _location(source.strip(), entry.get("page"), f"page {shown} of location {number}")
        if location.problem:
            messages.append(f"line {line}: {location.problem}")
        locations.append(location)
    return locations, messages


def _json_text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def jsonl_objects(text: str) -> tuple[list[tuple[int, dict]], list[str]]:
    """(line, object) of every JSON object line of a JSONL text (blank and ``#`` lines skipped), and a message
    for each other line (not JSON, or JSON but no object), which is skipped."""
    objects: list[tuple[int, dict]] = []
    messages: list[str] = []
    for line, raw_line in enumerate(io.StringIO(text, newline=""), start=1):
        if _is_skippable(raw_line):
            continue
        try:
            item = json.loads(raw_line)
        except json.JSONDecodeError as error:
            messages.append(f"line {line}: not valid JSON ({error.msg} at column {error.colno}); line skipped")
            continue
        if not isinstance(item, dict):
            messages.append(f"line {line}: expected a JSON object, got {type(item).__name__}; line skipped")
            continue
        objects.append((line, item))
    return objects, messages


def _read_jsonl_rows(text: str) -> tuple[list[_Row], list[str]]:
    """Usable rows and messages from JSONL text (BOM already removed)."""
    rows: list[_Row] = []
    found, messages = jsonl_objects(text)
    for line, item in found:
        question = normalize_question(_json_text(item.get("question")))
        if not question:
            messages.append(f'line {line}: no "question"; line skipped')
            continue
        if problem := text_problem(question):  # a "\ud800" escape is a lone surrogate; the retriever's rule
            messages.append(f'line {line}: the "question" {question!r} {problem}; line skipped')
            continue
        locations, location_messages = _json_locations(item.get("locations"), line)
        messages.extend(location_messages)
        if not locations:
            messages.append(
                f'line {line}: no usable "locations" (a list of {{"source", "page"}}) '
                f'for "{_short(question)}"; line skipped'
            )
            continue
        corpus = _json_text(item.get("corpus")) or None
        rows.append(_Row(line, question, corpus, tuple(locations), _json_text(item.get("note")),
                         _json_text(item.get("answer")).strip()))
    return rows, messages


# ---------------------------------------------------------------------------------------------
# Merging and reading


def _merge_rows(rows: Iterable[_Row]) -> tuple[list[GoldQuestion], list[str]]:
    """One GoldQuestion per distinct question, in order of first appearance.

    Locations are joined (repeats dropped); the first row's corpus and note are kept, and the first reference
    answer given (another one on a later row is named in a message).
    """
    groups: dict[str, list[_Row]] = {}
    for row in rows:
        groups.setdefault(row.question, []).append(row)
    questions: list[GoldQuestion] = []
    messages: list[str] = []
    for question, group in groups.items():
        first = group[0]
        seen: dict[tuple[tuple[str, ...], int | None, int | None, str], int] = {}
        locations: list[Location] = []
        answered = next((row for row in group if row.reference), None)
        for row in group:
            if answered is not None and row.reference and row is not answered and \
                    " ".join(row.reference.split()) != " ".join(answered.reference.split()):
                messages.append(f"line {row.line}: same question as line {answered.line} but another reference "
                                f"answer; the one of line {answered.line} is kept")
            if row.corpus is not None and row.corpus != first.corpus:
                messages.append(
                    f"line {row.line}: same question as line {first.line} but corpus '{row.corpus}' "
                    f"instead of '{first.corpus or ''}'; the first row's corpus is kept"
                )
            for location in row.locations:
                key = (source_parts(location.source), location.page, location.last_page, location.problem)
                if key in seen:
                    if seen[key] != row.line:
                        messages.append(f"line {row.line}: repeats a location of line {seen[key]}; ignored")
                    continue
                seen[key] = row.line
                locations.append(location)
        questions.append(
            GoldQuestion(
                query_id=query_id(question),
                question=question,
                corpus=first.corpus,
                locations=tuple(locations),
                note=first.note,
                lines=tuple(row.line for row in group),
                reference=answered.reference if answered is not None else "",
            )
        )
    return questions, messages


def read_goldset(path: str | Path, template: str | Path | Sequence[str | Path] | None = None) -> Goldset:
    """Read a CSV or JSONL goldset; GoldsetError if it is missing, unreadable or has no usable row.

    ``template`` is the goldset a user copies to start one (or several, e.g. with English and with German
    headers); the error for a missing goldset names it.
    """
    path = Path(path)
    if not path.exists() and template is None:
        raise GoldsetError(f"goldset not found: {path}; check the path.")
    if not path.exists():
        templates = [template] if isinstance(template, (str, Path)) else list(template)
        one = "it" if len(templates) == 1 else "one"
        raise GoldsetError(
            f"goldset not found: {path}. Start from the template {' or '.join(map(str, templates))}: copy {one} "
            f"to {path} and write one row per question and expected location."
        )
    if path.is_dir():
        raise GoldsetError(f"goldset {path} is a folder; give the path of a .csv or .jsonl file.")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise GoldsetError(
            f"{path}: line {line} is not UTF-8 (byte 0x{data[error.start]:02x}); "
            "save the file as 'CSV UTF-8' (Excel) or with UTF-8 encoding."
        ) from error
    read_rows = _read_jsonl_rows if path.suffix.casefold() == JSONL_SUFFIX else _read_csv_rows
    try:
        rows, messages = read_rows(text)
    except GoldsetError as error:
        raise GoldsetError(f"{path}: {error}") from error
    questions, merge_messages = _merge_rows(rows)
    messages = sorted(messages + merge_messages, key=_message_line)
    if not questions:
        details = "".join(f"\n  {message}" for message in messages)
        raise GoldsetError(
            f"{path}: no usable rows; every row needs a question and an expected source.{details}"
        )
    return Goldset(questions=questions, messages=messages, path=path)


def _message_line(message: str) -> int:
    """Line number a message starts with, so messages print in file order (sort is stable)."""
    return int(message.split(":", 1)[0].removeprefix("line "))


# ---------------------------------------------------------------------------------------------
# Writing


def write_goldset_csv(path: str | Path, rows: Iterable[GoldsetRow]) -> None:
    """Write rows as a ``;``-delimited UTF-8 goldset with a header line through the one CSV writer (files.csv_text:
    formula-like cells get a leading quote, which read_goldset removes); atomic (temp file + os.replace)."""
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(
            f"cannot write goldset {path}: folder {path.parent} does not exist; create it or choose another --out"
        )

    text = csv_text([[CSV_COLUMNS[field][0] for field in WRITTEN_FIELDS],
                     *([getattr(row, field) for field in WRITTEN_FIELDS] for row in rows)], delimiter=WRITE_DELIMITER)
    write_atomic(path, lambda stream: stream.write(text))


# ---------------------------------------------------------------------------------------------
# Matching


def normalize_source(name: str) -> str:
    """Comparable form of a file name: base name only, NFC, casefolded, no trailing ``_ .``/spaces, no ``.pdf``.

    ``"C:\\docs\\Bericht_.PDF"`` and ``"bericht."`` both give ``"bericht"``.
    """
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    # NFC before and after casefold: casefolding can decompose (e.g. U+0130).
    base = unicodedata.normalize("NFC", unicodedata.normalize("NFC", base).casefold())
    base = base.strip().rstrip("_. ")
    base = base.removesuffix(".pdf")
    return base.rstrip("_. ")


@functools.lru_cache(maxsize=65536)  # matching asks for the same few names once per retrieved chunk
def source_parts(name: str) -> tuple[str, ...]:
    """Comparable form of a file's path: its folders (NFC, casefolded, trimmed; ``.`` and empty parts dropped) and
    last the file name as normalize_source gives it; () when there is no file name.

    ``"C:\\docs\\sub1\\Bericht_.PDF"`` gives ``("c:", "docs", "sub1", "bericht")``, ``"Bericht.pdf"`` gives
    ``("bericht",)``.
    """
    base = normalize_source(name)
    if not base:
        return ()
    folders = name.replace("\\", "/").split("/")[:-1]
    kept = [unicodedata.normalize("NFC", unicodedata.normalize("NFC", part).casefold()).strip() for part in folders]
    return (*[part for part in kept if part not in ("", ".")], base)


def same_file(a: str, b: str) -> bool:
    """Whether two source names denote the same file: the shorter path (source_parts) is the end of the longer.

    A bare file name matches that file in any folder; a path with folders (``sub1/Same.pdf``, as the index
    records a file below the docs folder) only a file under those folders, so ``sub1/Same.pdf`` is not
    ``sub2/Same.pdf``, while ``C:\\docs\\sub1\\Same.pdf`` is ``sub1/Same.pdf``. Empty names match nothing.
    """
    parts_a, parts_b = source_parts(a), source_parts(b)
    shared = min(len(parts_a), len(parts_b))
    return shared > 0 and parts_a[-shared:] == parts_b[-shared:]


def files_by_name(names: Iterable[str]) -> dict[str, list[str]]:
    """Source names grouped by their file name (normalize_source), each group sorted: what matching_files reads."""
    groups: dict[str, list[str]] = {}
    for name in sorted(set(names)):
        groups.setdefault(normalize_source(name), []).append(name)
    return groups


def matching_files(source: str, by_name: Mapping[str, Sequence[str]]) -> list[str]:
    """The names of ``by_name`` (files_by_name) that ``source`` denotes (same_file): one, none, or several when a
    bare name fits files of that name in several folders."""
    return [name for name in by_name.get(normalize_source(source), ()) if same_file(source, name)]


def location_matches(
    source: str,
    pages: Iterable[int],
    location: Location,
    *,
    page_offset: int = PAGE_OFFSET,
    tolerance: int = PAGE_TOLERANCE,
) -> bool:
    """Whether a chunk from ``source`` covering 0-based ``pages`` hits ``location``.

    Hit: same file and, if the location has a page (or range), some covered page p within ``tolerance`` of
    it: ``location.page - page_offset - tolerance <= p <= location.end_page - page_offset + tolerance``.
    A chunk without pages cannot hit a page; a location with a ``problem`` hits nothing.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    if location.problem or not same_file(source, location.source):
        return False
    if location.page is None:
        return True
    low, high = location.page - page_offset - tolerance, location.end_page - page_offset + tolerance
    return any(low <= page <= high for page in pages)


def first_match_rank(
    retrieved: Sequence[tuple[str, Sequence[int]]],
    locations: Iterable[Location],
    *,
    page_offset: int = PAGE_OFFSET,
    tolerance: int = PAGE_TOLERANCE,
) -> int | None:
    """1-based rank of the first retrieved (source, pages) chunk that hits any location; None if none does."""
    locations = tuple(locations)
    for rank, (source, pages) in enumerate(retrieved, start=1):
        if any(
            location_matches(source, pages, location, page_offset=page_offset, tolerance=tolerance)
            for location in locations
        ):
            return rank
    return None
