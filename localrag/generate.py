"""Generate goldset questions from indexed chunks.

Generation works on plain chunk dicts ``{"chunk_id", "source", "page" (0-based), "text"}``:

1. A noise filter (localrag/noise.py) drops chunks no reader would ask about (front matter, index and
   bibliography pages, number tables, caption residue, running headers, very short chunks); every rule
   is counted.
2. The wanted number of questions is spread over the documents in proportion to their kept chunk
   count, with a minimum per document (largest-remainder apportionment).
3. Each sampled chunk gives at most one question: without a model an exact-reference question
   (equation, table, figure, section number at its definition site), a defined-term question or a
   section-location question; with a model (``ask``), one natural question the chunk answers.
4. Quality gates reject questions that copy the chunk's words (so BM25 does not win by
   construction), near-duplicates, too-short questions and answers that lie on a noise page.

The same chunks, seed and model replies give the same rows, in the same order. Rows are
localrag/goldset.py's GoldsetRow; that module owns the goldset format and writes them (write_goldset_csv).

Lint (localrag/lint.py) takes the gates' thresholds from here and counts and compares words with words.py as
the gates do, so lint and the gates agree on what a short or near-duplicate question is.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localrag import llm
from localrag.errors import EvalError
from localrag.files import display_path
from localrag.goldset import GoldsetRow, write_goldset_csv
from localrag.language import guess_language
from localrag.noise import (
    PROSE_LINE_MIN_WORDS,
    analysis_text,
    build_noise_context,
    filter_chunks,
    fraction,
    header_key,
    nonempty_lines,
    page_noise,
)
from localrag.pages import shown_page
from localrag.words import CONTENT_STOPWORDS, jaccard, tokens, word_count

# --- Sampling and question kinds ------------------------------------------------------------------
# Questions every document with kept chunks gets at least (if n allows).
MIN_PER_DOCUMENT = 1
# Longest defined term, in words.
DEFINED_TERM_MAX_WORDS = 4
# Longest section heading turned into a question, in words.
HEADING_MAX_WORDS = 10
# More numbered headings than this in one chunk make a list (contents, exhibits), not section starts.
MAX_HEADINGS_PER_CHUNK = 3
# After this many unusable model replies in a row the model is no longer asked.
LLM_MAX_CONSECUTIVE_FAILURES = 5
# Chunk text longer than this is cut before it goes into the model prompt.
LLM_MAX_CHUNK_CHARS = 4000

# --- Quality gates --------------------------------------------------------------------------------
# Highest share of a question's content words that may occur verbatim in its chunk.
MAX_COPIED_SHARE = 0.5
# Token Jaccard similarity from which two questions count as near-duplicates.
NEAR_DUPLICATE_JACCARD = 0.8
# Fewest words a question may have (generation gate and lint warning).
MIN_QUESTION_WORDS = 3

# Quality gates in the order they are applied.
GATES = ("too_short", "noise_page", "copied", "duplicate")
# Question kinds, in summary order; the ``corpus`` of a generated row is one of these.
KINDS = ("equation-ref", "table-ref", "figure-ref", "section-ref", "defined-term", "section-location", "llm")

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

# Question templates: (kind, language) -> format string.
TEMPLATES = {
    ("equation-ref", "en"): "What does Equation {num} state?",
    ("equation-ref", "de"): "Was besagt Gleichung {num}?",
    ("table-ref", "en"): "What does Table {num} show?",
    ("table-ref", "de"): "Was zeigt Tabelle {num}?",
    ("figure-ref", "en"): "What does Figure {num} show?",
    ("figure-ref", "de"): "Was zeigt Abbildung {num}?",
    ("section-ref", "en"): "What is covered in {unit} {num}?",
    ("section-ref", "de"): "Was behandelt {unit} {num}?",
    ("section-location", "en"): "Which {unit_lower} discusses {title}?",
    ("section-location", "de"): "{which} {unit} behandelt {title}?",
    ("defined-term-is", "en"): "What is {term}?",
    ("defined-term-are", "en"): "What are {term}?",
    ("defined-term-measures", "en"): "What does {term} measure?",
    ("defined-term", "de"): "Was versteht man unter {term}?",
}
# Words of the templates: the frame of a template question, never counted as copied.
TEMPLATE_WORDS = frozenset(
    word.casefold()
    for template in TEMPLATES.values()
    for word in re.findall(r"[^\W\d_]+", template)
) | frozenset("section chapter abschnitt kapitel welcher welches".split())

# Heading units: keyword in the text -> (English unit, German unit).
HEADING_UNITS = {
    "section": ("Section", "Abschnitt"),
    "chapter": ("Chapter", "Kapitel"),
    "abschnitt": ("Section", "Abschnitt"),
    "kapitel": ("Chapter", "Kapitel"),
}
# German interrogative per unit ("Welcher Abschnitt", "Welches Kapitel").
GERMAN_WHICH = {"Abschnitt": "Welcher", "Kapitel": "Welches"}

# First words that make a "X is a ..." sentence no definition ("This is a ...", "The result is the ...").
NOT_A_TERM = frozenset(
    """this that these those it its there here which what who one each every such our your his her their
    my some any all both either neither another other same former latter first second third next last
    following above below result results answer problem solution proof idea goal aim reason purpose point
    question difference example case figure table equation section chapter main key only new way
    company firm management author authors paper study article book report document text
    der die das den dem des ein eine einer eines dies diese dieser dieses es er sie hier dabei damit daher
    dann man wir ergebnis folgende folgendes beispiel abbildung tabelle gleichung abschnitt kapitel grund
    ziel frage antwort lösung idee problem unterschied vorteil nachteil erste zweite nächste letzte
    andere jede jeder jedes solche unser unsere
    thus hence therefore however also so then now finally clearly note recall again moreover furthermore
    similarly if when since because although while after before during under with without for at on by
    also somit deshalb jedoch nun zudem ebenso außerdem wenn weil da ob nachdem bevor während
    provided shown listed included presented described summarized set given attached enclosed""".split()
)
# Last words that make an inverted sentence ("Provided below is a ..."), not a term.
NOT_A_TERM_END = frozenset("below above here there following hereto unten oben folgend".split())
# Pronouns: a "term" containing one is a clause ("The model we use is a ..."), not a name.
PRONOUNS = frozenset("i you he she we they me us them ich du er sie wir ihr es man".split())
# Function words allowed inside a term ("vega of an option", "Wert des Portfolios").
TERM_CONNECTORS = frozenset("of for and the a an von für und der des dem im eines einer".split())

# --- Patterns -------------------------------------------------------------------------------------
_NUMBER = r"\d{1,2}(?:\.\d{1,3}){0,2}[a-z]?"
# Equation number tag at the end of a line: "C = S N(d1) - K e^{-rT} N(d2)   (21.23)".
_EQUATION_TAG = re.compile(rf"^(?P<body>.*?)\s*\((?P<num>{_NUMBER})\)\s*$")
_RELATION = re.compile(r"[=<>≤≥≈≡∝]")
# Caption at the start of a line: "Table 4: ...", "Table 4. ...", "Table 4 Prices ...", "Abb. 3 ...".
_CAPTION_TAIL = r"(?=:|\.\s+\S|\s+[A-ZÄÖÜ])"
_TABLE_CAPTION = re.compile(rf"^(?P<label>Table|Tab\.|Tabelle)\s+(?P<num>{_NUMBER}){_CAPTION_TAIL}")
_FIGURE_CAPTION = re.compile(rf"^(?P<label>Figure|Fig\.|Abbildung|Abb\.)\s+(?P<num>{_NUMBER}){_CAPTION_TAIL}")
# "3.2 Option Pricing" (at least two number parts: a lone "3 Options" is too often a list item).
_NUMBERED_HEADING = re.compile(r"^(?P<num>\d{1,2}(?:\.\d{1,2}){1,3})\.?\s+(?P<title>[A-ZÄÖÜ].*)$")
# Any line opening with a "3.2"-style number, heading or not: many of them make a list.
_NUMBERED_LINE = re.compile(r"^\d{1,3}(?:\.\d{1,3})+[A-Z]?\.?\s")
_KEYWORD_HEADING = re.compile(
    r"^(?P<unit>Section|Chapter|Abschnitt|Kapitel)\s+(?P<num>\d{1,2}(?:\.\d{1,2}){0,3})[:.]?\s+"
    r"(?P<title>[A-ZÄÖÜ].*)$"
)
_TERM_WORD = r"[^\W\d_][\w\-]*"
# Words of a term are separated by spaces, not line breaks: a heading line above a sentence is no part of it.
_TERM = rf"{_TERM_WORD}(?:[^\S\n]+{_TERM_WORD}){{0,{DEFINED_TERM_MAX_WORDS - 1}}}"
_GERMAN_TERM = rf"{_TERM_WORD}(?:[^\S\n]+{_TERM_WORD}){{0,{DEFINED_TERM_MAX_WORDS + 1}}}"
# Optional article and "term"/"concept" before an English term: "The term gamma refers to".
_EN_LEAD = rf"(?:(?P<article>The|An?)[^\S\n]+)?(?P<label>(?:term|concept)[^\S\n]+)?(?P<term>{_TERM})\s+"
_DE_LEAD = rf"(?:(?:Der|Die|Das|Ein|Eine)[^\S\n]+)?(?:Begriff[^\S\n]+)?(?P<term>{_TERM})\s+"
# English definitions at a sentence start; group "verb" picks the question template.
_EN_DEFINITIONS = (
    re.compile(rf"{_EN_LEAD}(?P<verb>is)\s+defined\s+as\b"),
    re.compile(rf"{_EN_LEAD}(?P<verb>is|are)\s+(?:a|an|the)\s"),
    re.compile(rf"{_EN_LEAD}(?P<verb>refers\s+to|denotes)\s"),
    re.compile(rf"{_EN_LEAD}(?P<verb>measures)\s+(?:the|a|an|how|whether)\b"),
)
# German definitions: "Unter X versteht man", "X ist ein ...", "X bezeichnet", "X wird definiert als".
_DE_DEFINITIONS = (
    re.compile(
        rf"Unter\s+(?P<article>(?:dem|der|den|einem|einer|einen)\s+)?(?P<term>{_GERMAN_TERM})\s+versteht\s+man\b"
    ),
    re.compile(rf"{_DE_LEAD}(?:ist|sind)\s+(?:ein|eine|einer|der|die|das|definiert\s+als)\s"),
    re.compile(rf"{_DE_LEAD}bezeichnet\s"),
    re.compile(rf"{_DE_LEAD}wird\s+(?:definiert|bezeichnet)\s+als\b"),
)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-ZÄÖÜ])")
# Word before a period that does not end a sentence ("Mr. Weeks", "Abb. 3", initials "Wendell P. Weeks").
_ABBREVIATION = re.compile(
    r"(?:\b(?:mr|mrs|ms|dr|prof|st|inc|co|corp|ltd|no|nr|fig|eq|vs|etc|approx|e\.g|i\.e|bzw|z\.b|ca|vgl|abb|s)"
    r"|(?-i:\b[A-Z]))\.\s*$",
    re.IGNORECASE,
)


# =================================================================================================
# Data


@dataclass(frozen=True)
class Candidate:
    """A question proposed for a chunk, before the gates; ``allowed`` words never count as copied."""

    kind: str
    question: str
    language: str
    allowed: frozenset[str] = frozenset()


@dataclass
class DocumentSample:
    """Per-document counts of one generation run."""

    chunks: int = 0
    kept: int = 0
    allocated: int = 0
    generated: int = 0


@dataclass
class LlmStats:
    """How the model calls went: asked, usable questions, explicit declines, failures."""

    asked: int = 0
    answered: int = 0
    declined: int = 0
    failed: int = 0
    consecutive_failures: int = 0  # failures since the last usable reply or decline
    gave_up: bool = False


@dataclass
class GenerationResult:
    """Generated rows (sorted by file, page, chunk) and the counts the summary reports."""

    rows: list[GoldsetRow]
    requested: int
    seed: int
    chunks_total: int
    removed: dict[str, int]
    documents: dict[str, DocumentSample]
    kinds: dict[str, int]
    languages: dict[str, int]
    rejected: dict[str, int]
    llm: LlmStats | None = None


# =================================================================================================
# Text helpers


def detect_language(text: str) -> str:
    """The language of a chunk's questions: language.guess_language's ``"de"`` or ``"en"``; English when it
    has no guess (a tie, or no stop word), since every question needs a language."""
    return guess_language(text) or "en"


# =================================================================================================
# Template questions


def _reference_candidate(kind: str, num: str, language: str) -> Candidate:
    question = TEMPLATES[(kind, language)].format(num=num)
    return Candidate(kind, question, language, frozenset(tokens(num)) | TEMPLATE_WORDS)


def reference_questions(text: str, language: str) -> list[Candidate]:
    """Exact-reference questions for equations, tables and figures defined in the text.

    Only definition sites count: an equation tag ``(21.23)`` closing a line with a relation sign
    (on that line or, for a tag on its own line, the line before), and captions at a line start
    (``Table 4: ...``, ``Abb. 3 Verlauf ...``). A mere mention ("see Table 4") points to another page.
    """
    candidates: list[Candidate] = []
    lines = nonempty_lines(text)
    for index, line in enumerate(lines):
        tag = _EQUATION_TAG.match(line)
        if tag:
            body = tag["body"] or (lines[index - 1] if index else "")
            if _RELATION.search(body):
                candidates.append(_reference_candidate("equation-ref", tag["num"], language))
        for kind, pattern in (("table-ref", _TABLE_CAPTION), ("figure-ref", _FIGURE_CAPTION)):
            caption = pattern.match(line)
            if caption:
                candidates.append(_reference_candidate(kind, caption["num"], language))
    return candidates


def _heading_title_ok(title: str) -> bool:
    """A heading title: a few words, not a sentence, no page number or dates, no formula or table row.

    Rejects e.g. "Apple 45" (contents line), "Form of Agreement* 10-Q 6/26/09" (exhibit list).
    """
    words = title.split()
    return (
        len(words) <= HEADING_MAX_WORDS
        and not re.search(r"[.,;:?!]$", title)
        and sum(bool(re.search(r"\d", word)) for word in words) == 0
        and not re.search(r"[=*/|$%€£]", title)
        and len(re.findall(r"[^\W\d_]", title)) >= 2
    )


def section_questions(text: str, language: str, repeated: frozenset[str] = frozenset()) -> list[Candidate]:
    """Section-reference and section-location questions from numbered headings in the text.

    Headings are ``3.2 Title`` lines (two or more number parts) and ``Chapter 3 Title`` /
    ``Kapitel 3 Title`` lines. Skipped: lines in ``repeated`` (running headers sit on every page
    of a section, not where it starts), the last line (the chunk may cut it, and its section's
    text is in the next chunk), and chunks with more than MAX_HEADINGS_PER_CHUNK lines that start
    with a ``3.2``-style number (a list of contents or exhibits, or a table; not section starts).
    """
    lines = nonempty_lines(text)
    if sum(bool(_NUMBERED_LINE.match(line)) for line in lines) > MAX_HEADINGS_PER_CHUNK:
        return []
    headings = []
    for line in lines[:-1]:
        match = None if header_key(line) in repeated else _NUMBERED_HEADING.match(line) or _KEYWORD_HEADING.match(line)
        if match and _heading_title_ok(match["title"]):
            headings.append(match)
    candidates: list[Candidate] = []
    for match in headings:
        keyword = match.groupdict().get("unit")
        english_unit, german_unit = HEADING_UNITS[keyword.casefold() if keyword else "section"]
        unit = german_unit if language == "de" else english_unit
        num, title = match["num"], " ".join(match["title"].split())
        frame = frozenset(tokens(num)) | TEMPLATE_WORDS
        reference = TEMPLATES[("section-ref", language)].format(unit=unit, num=num)
        location = TEMPLATES[("section-location", language)].format(
            unit=unit, unit_lower=unit.lower(), which=GERMAN_WHICH.get(unit, ""), title=title
        )
        candidates.append(Candidate("section-ref", reference, language, frame))
        candidates.append(Candidate("section-location", location, language, frame | frozenset(tokens(title))))
    return candidates


def _sentence_starts(text: str) -> tuple[str, list[int]]:
    """Non-empty lines joined by newlines, and the offsets where sentences start.

    A sentence starts at the text start, after ``. ! ?`` plus space before a capital (not after an
    abbreviation or an initial), and at a line whose previous line ends a sentence or is a
    heading-like short line without punctuation.
    """
    lines = nonempty_lines(re.sub(r"([a-zäöüß])-\n\s*([a-zäöüß])", r"\1\2", text))
    joined, starts, offset = "", [], 0
    for index, line in enumerate(lines):
        previous = lines[index - 1] if index else ""
        if not index or previous.endswith((".", "!", "?", ":")) or (
            len(previous.split()) < PROSE_LINE_MIN_WORDS and not previous.endswith((",", "-"))
        ):
            starts.append(offset)
        joined += line + "\n"
        offset = len(joined)
    starts.extend(
        match.end() for match in _SENTENCE_BREAK.finditer(joined)
        if not _ABBREVIATION.search(joined[max(0, match.start() - 8):match.start()])
    )
    return joined, sorted(set(starts))


def _english_term(term: str, text: str) -> str:
    """Lower-case a capital that is only there because the term starts a sentence (``Vega`` -> ``vega``).

    Kept for names: a word with inner capitals (``Black-Scholes``), a term with more capitalised
    words (``Monte Carlo``), or a first word the text also capitalises in mid-sentence (``Corning``).
    """
    first, *rest = term.split(" ")
    mid_sentence = re.search(rf"[a-zäöüß,;][^\S\n]+{re.escape(first)}\b", text)
    if first[:1].isupper() and first[1:].islower() and not any(w[:1].isupper() for w in rest) and not mid_sentence:
        return first[0].lower() + first[1:] + (" " + " ".join(rest) if rest else "")
    return term


def _term_ok(term: str) -> bool:
    """A term: >= 3 characters, no generic first word, no pronoun or non-connector function word."""
    words = term.casefold().split()
    inner_ok = all(w not in PRONOUNS and (w in TERM_CONNECTORS or w not in CONTENT_STOPWORDS) for w in words)
    ending_ok = words[-1] not in CONTENT_STOPWORDS and words[-1] not in NOT_A_TERM_END
    return len(term) >= 3 and words[0] not in NOT_A_TERM and ending_ok and inner_ok


def defined_term_questions(text: str, language: str) -> list[Candidate]:
    """Questions for terms the text defines at a sentence start.

    English: "X is defined as", "X is/are a|an|the ...", "X refers to", "X denotes", "X measures the";
    German: "Unter X versteht man", "X ist/sind ein|eine|der|die|das ...", "X bezeichnet",
    "X wird definiert als". A leading article is dropped; generic subjects (NOT_A_TERM) are ignored.
    """
    joined, starts = _sentence_starts(text)
    patterns = _DE_DEFINITIONS if language == "de" else _EN_DEFINITIONS
    candidates: list[Candidate] = []
    for start in starts:
        if not joined[start:start + 1].isupper():
            continue
        for pattern in patterns:
            match = pattern.match(joined, start)
            if not match:
                continue
            term = " ".join(match["term"].split())
            if not _term_ok(term):
                continue
            if language == "de":
                article = (match.groupdict().get("article") or "").strip()
                question = TEMPLATES[("defined-term", "de")].format(term=f"{article} {term}".strip())
            else:
                verb = match["verb"].split()[0]
                template = {"are": "defined-term-are", "measures": "defined-term-measures"}.get(verb, "defined-term-is")
                article = "" if match.groupdict().get("label") else (match["article"] or "").lower()
                question = TEMPLATES[(template, "en")].format(term=f"{article} {_english_term(term, joined)}".strip())
            # The article belongs to the term ("unter einem Future"): copying it is no copying of content.
            allowed = frozenset(tokens(f"{article} {term}")) | TEMPLATE_WORDS
            candidates.append(Candidate("defined-term", question, language, allowed))
            break
    return candidates


def template_questions(text: str, language: str, repeated: frozenset[str] = frozenset()) -> list[Candidate]:
    """All model-free questions for one chunk text, duplicates removed, in detection order."""
    found = reference_questions(text, language) + section_questions(text, language, repeated)
    found += defined_term_questions(text, language)
    unique: dict[str, Candidate] = {}
    for candidate in found:
        unique.setdefault(candidate.question, candidate)
    return list(unique.values())


# =================================================================================================
# Model questions


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


# =================================================================================================
# Gates


def copied_share(question: str, chunk_text: str, allowed: Iterable[str] = ()) -> float:
    """Share of the question's content words that occur verbatim (casefolded) in the chunk.

    Content words are tokens not in CONTENT_STOPWORDS and not in ``allowed`` (the reference token,
    defined term or template frame: they are the point of the question). No content words: 0.0.
    """
    allowed = set(allowed)
    content = [t for t in tokens(question) if t not in CONTENT_STOPWORDS and t not in allowed]
    chunk_tokens = set(tokens(chunk_text))
    return fraction(sum(t in chunk_tokens for t in content), len(content))


def is_near_duplicate(question: str, others: Iterable[str]) -> bool:
    """Whether the question reaches NEAR_DUPLICATE_JACCARD with any of ``others``."""
    return any(jaccard(question, other) >= NEAR_DUPLICATE_JACCARD for other in others)


def gate_question(
    candidate: Candidate, chunk_text: str, accepted: Sequence[str], page_rule: str | None
) -> str | None:
    """The first GATES gate the candidate fails, or None if it may go into the goldset.

    ``page_rule`` is what page_noise() says about the chunk's page; ``accepted`` are the questions
    kept so far.
    """
    if word_count(candidate.question) < MIN_QUESTION_WORDS:
        return "too_short"
    if page_rule is not None:
        return "noise_page"
    if copied_share(candidate.question, chunk_text, candidate.allowed) > MAX_COPIED_SHARE:
        return "copied"
    if is_near_duplicate(candidate.question, accepted):
        return "duplicate"
    return None


# =================================================================================================
# Sampling


def allocate(sizes: Mapping[str, int], n: int, minimum: int = MIN_PER_DOCUMENT) -> dict[str, int]:
    """Questions per document: ``minimum`` each, the rest in proportion to size, never above size.

    The rest is apportioned by largest remainder (Hamilton) over documents with room left, repeated
    while capped documents leave questions over; remainder ties go to the larger document, then to
    the name first in sort order. If ``n`` cannot give every document its minimum, larger documents
    get theirs first, one question per round.
    """
    names = sorted(name for name, size in sizes.items() if size > 0)
    result = dict.fromkeys(sorted(sizes), 0)
    n = min(max(n, 0), sum(sizes[name] for name in names))
    by_size = sorted(names, key=lambda name: (-sizes[name], name))
    floors = {name: min(minimum, sizes[name]) for name in names}
    if sum(floors.values()) >= n:
        while n > 0:
            for name in by_size:
                if n and result[name] < floors[name]:
                    result[name] += 1
                    n -= 1
        return result
    result.update(floors)
    rest = n - sum(floors.values())
    while rest > 0:
        open_ = [name for name in names if result[name] < sizes[name]]
        weight = sum(sizes[name] for name in open_)
        quotas = {name: rest * sizes[name] / weight for name in open_}
        given = 0
        for name in open_:
            add = min(int(quotas[name]), sizes[name] - result[name])
            result[name] += add
            given += add
        left = rest - given
        for name in sorted(open_, key=lambda name: (-(quotas[name] - int(quotas[name])), -sizes[name], name)):
            if left and result[name] < sizes[name]:
                result[name] += 1
                left -= 1
        rest = left
    return result


def _chunk_key(chunk: Mapping[str, Any]) -> tuple[str, int, str]:
    return (chunk["source"], chunk["page"], str(chunk["chunk_id"]))


def _check_chunks(chunks: Sequence[Mapping[str, Any]]) -> None:
    for number, chunk in enumerate(chunks, start=1):
        missing = [key for key in ("chunk_id", "source", "page", "text") if key not in chunk]
        if missing:
            raise ValueError(
                f"chunk {number} lacks {', '.join(missing)}; "
                "every chunk needs chunk_id, source, page (0-based) and text"
            )


def _shuffled_queues(
    by_document: Mapping[str, Sequence[Mapping[str, Any]]], seed: int
) -> dict[str, tuple[list[Mapping[str, Any]], random.Random]]:
    """Per document: its chunks in seeded random order and the generator that shuffled them.

    The generator is seeded with ``f"{seed}/{source}"`` (string seeds hash with SHA-512, not with
    Python's per-process hash), so one document's draw does not depend on the others.
    """
    queues = {}
    for source in sorted(by_document):
        rng = random.Random(f"{seed}/{source}")
        queue = list(by_document[source])
        rng.shuffle(queue)
        queues[source] = (queue, rng)
    return queues


def _draw(
    queues: Mapping[str, list[Mapping[str, Any]]],
    quotas: Mapping[str, int],
    n: int,
    try_chunk: Callable[[str, Mapping[str, Any]], bool],
    stopped: Callable[[], bool],
) -> None:
    """Try chunks until every document met its quota, then round-robin by name until ``n`` questions.

    ``try_chunk(source, chunk)`` says whether the chunk gave a question; ``stopped()`` ends early.
    """
    made: Counter[str] = Counter()
    for source in sorted(queues):
        while made[source] < quotas.get(source, 0) and queues[source] and not stopped():
            made[source] += try_chunk(source, queues[source].pop(0))
    while sum(made.values()) < n and any(queues.values()) and not stopped():
        for source in sorted(queues):
            while queues[source] and sum(made.values()) < n and not stopped():
                if try_chunk(source, queues[source].pop(0)):
                    made[source] += 1
                    break


def _first_passing(
    candidates: Sequence[Candidate], text: str, accepted: Sequence[str], page_rule: str | None,
    rejected: dict[str, int],
) -> Candidate | None:
    """The first candidate through all gates; each rejection is counted in ``rejected``."""
    for candidate in candidates:
        failed = gate_question(candidate, text, accepted, page_rule)
        if failed is None:
            return candidate
        rejected[failed] += 1
    return None


def _row(chunk: Mapping[str, Any], candidate: Candidate, seed: int, llm_name: str | None) -> GoldsetRow:
    model = f" model={llm_name}" if llm_name and candidate.kind == "llm" else ""
    return GoldsetRow(
        question=candidate.question,
        corpus=candidate.kind,
        source=chunk["source"],
        page=shown_page(chunk["page"]),
        note=f"generated:{candidate.kind}{model} chunk={chunk['chunk_id']} seed={seed}",
    )


def generate_questions(
    chunks: Sequence[Mapping[str, Any]],
    n: int,
    seed: int,
    ask: Callable[[str], str | None] | None = None,
    *,
    llm_name: str | None = None,
) -> GenerationResult:
    """Sample chunks and make up to ``n`` goldset questions with their file and 1-based page.

    Chunks are noise-filtered, ``n`` is allocated over documents by kept chunk count (see
    allocate), each document's chunks are tried in seeded random order until its quota is met; a
    document that runs out leaves its quota to the others (see _draw). Each chunk gives at most
    one question: with ``ask`` the model's (kind ``llm``), else one of its template questions,
    picked by the document's generator. ``llm_name`` goes into the ``note`` of model rows.
    Rows come sorted by file, page and chunk id; input order does not matter.
    """
    if n < 1:
        raise ValueError(f"number of questions must be at least 1, got {n}; pass --generate N with N >= 1")
    _check_chunks(chunks)
    ordered = sorted(chunks, key=_chunk_key)
    context = build_noise_context(ordered)
    kept, removed = filter_chunks(ordered, context)
    pages: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    documents: dict[str, DocumentSample] = {}
    by_document: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for chunk in ordered:
        pages[(chunk["source"], chunk["page"])].append(chunk)
        documents.setdefault(chunk["source"], DocumentSample()).chunks += 1
    for chunk in kept:
        documents[chunk["source"]].kept += 1
        by_document[chunk["source"]].append(chunk)
    quotas = allocate({source: doc.kept for source, doc in documents.items()}, n)
    for source, quota in quotas.items():
        documents[source].allocated = quota
    queues = _shuffled_queues(by_document, seed)

    accepted: list[str] = []
    made: list[tuple[Mapping[str, Any], Candidate]] = []
    rejected = dict.fromkeys(GATES, 0)
    llm = LlmStats() if ask is not None else None

    def try_chunk(source: str, chunk: Mapping[str, Any]) -> bool:
        text = analysis_text(chunk["text"])
        language = detect_language(text)
        rng = queues[source][1]
        if ask is not None and llm is not None:
            candidates = _ask_model(ask, text, language, llm)
        else:
            candidates = template_questions(text, language, context.repeated_lines.get(source, frozenset()))
            rng.shuffle(candidates)
        page_rule = page_noise(pages[(source, chunk["page"])], context) if candidates else None
        chosen = _first_passing(candidates, text, accepted, page_rule, rejected)
        if chosen is None:
            return False
        accepted.append(chosen.question)
        made.append((chunk, chosen))
        documents[source].generated += 1
        return True

    _draw({source: queue for source, (queue, _) in queues.items()}, quotas, n, try_chunk,
          lambda: llm is not None and llm.gave_up)
    made.sort(key=lambda item: _chunk_key(item[0]))
    kinds = Counter(candidate.kind for _, candidate in made)
    return GenerationResult(
        rows=[_row(chunk, candidate, seed, llm_name) for chunk, candidate in made],
        requested=n,
        seed=seed,
        chunks_total=len(ordered),
        removed=removed,
        documents=dict(sorted(documents.items())),
        kinds={kind: kinds[kind] for kind in KINDS if kinds[kind]},
        languages=dict(sorted(Counter(candidate.language for _, candidate in made).items())),
        rejected=rejected,
        llm=llm,
    )


def _ask_model(ask: Callable[[str], str | None], text: str, language: str, stats: LlmStats) -> list[Candidate]:
    """The model's question for one chunk as a one-element list, or [] (stats updated)."""
    stats.asked += 1
    outcome, question = parse_llm_reply(ask(build_llm_prompt(text, language)))
    if outcome == "failed":
        stats.failed += 1
        stats.consecutive_failures += 1
        stats.gave_up = stats.consecutive_failures >= LLM_MAX_CONSECUTIVE_FAILURES
        return []
    stats.consecutive_failures = 0
    if outcome == "declined":
        stats.declined += 1
        return []
    stats.answered += 1
    return [Candidate("llm", question or "", language)]


# =================================================================================================
# Output


def _counts_text(counts: Mapping[str, int]) -> str:
    items = [f"{name} {count}" for name, count in counts.items() if count]
    return ", ".join(items) if items else "none"


def render_generation_summary(result: GenerationResult) -> list[str]:
    """Plain-text lines describing a generation run: filter, per document, kinds, gates, model."""
    made = len(result.rows)
    lines = [f"generated {made} of {result.requested} requested questions (seed {result.seed})"]
    kept = sum(doc.kept for doc in result.documents.values())
    lines.append(f"chunks: {result.chunks_total} read, {kept} kept by the noise filter")
    lines.append(f"noise filter removed: {_counts_text(result.removed)}")
    if result.documents:
        width = max(len("document"), *(len(name) for name in result.documents))
        lines.append(f"{'document':<{width}}  chunks    kept  allocated  generated")
        for name, doc in result.documents.items():
            lines.append(f"{name:<{width}}  {doc.chunks:>6}  {doc.kept:>6}  {doc.allocated:>9}  {doc.generated:>9}")
    lines.append(f"questions per kind: {_counts_text(result.kinds)}")
    lines.append(f"questions per language: {_counts_text(result.languages)}")
    lines.append(f"rejected by the gates: {_counts_text(result.rejected)}")
    if result.llm is not None:
        stats = result.llm
        lines.append(
            f"model: asked {stats.asked}, questions {stats.answered}, declined {stats.declined}, "
            f"unusable replies {stats.failed}"
        )
        if stats.gave_up:
            lines.append(
                f"model: stopped after {LLM_MAX_CONSECUTIVE_FAILURES} unusable replies in a row; "
                "check that the model runs and answers with JSON"
            )
    if made < result.requested:
        lines.append(
            f"note: {result.requested - made} question{'s' if result.requested - made != 1 else ''} short: the "
            "remaining chunks gave no question that passed the gates (see the per-document table)"
        )
    return lines


def check_out_file(out: str, force: bool) -> None:
    """EvalError unless --out can take the goldset: a file in an existing folder, replaced only with --force."""
    path = Path(out)
    if path.is_dir() or not path.parent.is_dir():
        raise EvalError(f"--out {out}: {'is a folder' if path.is_dir() else f'folder {path.parent} does not exist'}"
                        f"; give the path of a .csv file in an existing folder")
    if path.exists() and not force:
        raise EvalError(f"--out {out} already exists; pass --force to replace it, or choose another --out")


def generate_goldset(rag: Any, n: int, seed: int, out: str, ask: Callable[[str], str | None] | None,
                     llm_name: str | None, stopped: Callable[[], str | None]) -> int:
    """Sample chunks of a LocalRAG's index, print the summary and write the goldset to `out`; 1 if the model
    stopped early, else 0."""
    chunks = [{"chunk_id": i, "source": m["source"], "page": int(m["page"]), "text": t}
              for i, t, m in rag.indexed_chunks()]
    if not chunks:
        raise EvalError(f"the index at {rag.location} holds no chunks; index PDFs first (add_pdfs.py)")
    result = generate_questions(chunks, n, seed, ask=ask, llm_name=llm_name)
    print("\n".join(render_generation_summary(result)))
    if not result.rows:
        raise EvalError(f"no question was generated, so {display_path(out)} was not written; see the summary above")
    try:
        write_goldset_csv(Path(out), result.rows)
    except OSError as exc:
        raise EvalError(f"--out {out} could not be written ({exc}); choose another --out") from None
    made = len(result.rows)
    print(f"Wrote {made} question{'s' if made != 1 else ''} to {display_path(out)}")
    if stopped():
        print(f"error: the model stopped before the goldset was complete: {stopped()}; rerun when it answers "
              f"again (answered chunks are cached)", file=sys.stderr)
        return 1
    return 0


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
