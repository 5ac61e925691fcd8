"""Noise filter for goldset generation: which indexed chunks and pages no reader would ask about.

A chunk is noise when it is front matter (contents, copyright or title page), an index or a reference
list, mostly running headers, caption residue or numbers, or too short; classify_noise() names the
first NOISE_RULES rule it falls under. Running headers are found per document over all chunks
(build_noise_context). page_noise() applies the whole-page rules to a page's joined chunks.

It also holds the chunk-text helpers the question generator shares with the filter (analysis_text,
nonempty_lines, header_key, fraction); it imports nothing from there.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from localrag.text.pages import strip_chunk_header
from localrag.text.words import word_count

# --- Limits ---------------------------------------------------------------------------------------
# A chunk with fewer words than this carries too little to ask about.
MIN_CHUNK_WORDS = 20
# Share of dotted-leader or "1.2 Title 15" lines from which a chunk is a table of contents.
TOC_LINE_SHARE = 0.3
# Lines with a copyright cue ("©", "ISBN", "All rights reserved", ...) that mark a copyright page.
COPYRIGHT_MIN_CUE_LINES = 3
# Title pages are looked for on the first pages only (0-based page < this).
TITLE_PAGE_MAX_PAGE = 3
# A line with at least this many words is prose; title pages have (almost) none.
PROSE_LINE_MIN_WORDS = 6
# Below this share of prose lines, an early chunk is a title page.
TITLE_PAGE_PROSE_SHARE = 0.25
# Share of "term, 12, 45" lines that makes an index page, with / without an "Index" heading.
INDEX_LINE_SHARE_WITH_HEADING = 0.2
INDEX_LINE_SHARE = 0.5
# Share of citation-like lines that makes a bibliography, with / without a "References" heading.
CITATION_LINE_SHARE_WITH_HEADING = 0.2
CITATION_LINE_SHARE = 0.4
# Share of numeric tokens (among tokens with a letter or digit) from which a chunk is a number table.
NUMERIC_TOKEN_SHARE = 0.4
# Share of "Figure 3: ..." / "Abb. 3" lines from which a chunk is caption residue.
CAPTION_LINE_SHARE = 0.5
# A line that occurs on at least this many pages of one document is a running header or footer.
RUNNING_HEADER_MIN_PAGES = 3
# Longer lines are never running headers (reports repeat whole boilerplate sentences across pages).
RUNNING_HEADER_MAX_CHARS = 80
# Share of characters in running-header lines from which a chunk is header residue (characters, not
# lines: a wrapped "million." that recurs on many pages must not outweigh a long line).
RUNNING_HEADER_CHAR_SHARE = 0.5

# Noise rules in the order they are tried; the first that matches names the reason.
NOISE_RULES = ("front_matter", "index", "bibliography", "running_headers", "captions", "numeric", "too_short")
# Rules that describe a whole page; the noise-page gate checks the answer's page with these.
PAGE_NOISE_RULES = ("front_matter", "index", "bibliography")

# --- Patterns -------------------------------------------------------------------------------------
_WORD = re.compile(r"\w+")
# A number as tables print it: "12", "-0.45", "1,234.5", "12%", "(3)", "$100", "3/4".
_NUMERIC_TOKEN = re.compile(r"[(\[$€£+\-−]*\d[\d.,:/]*[%)\]]*[.,;:]?")
_DOTTED_LEADER = re.compile(r"(?:\.\s?){4,}\s*(?:\d+|[ivxlcdm]+)\s*$", re.IGNORECASE)
# A contents line: optional label ("3.2", "Chapter 3", "Item 7A.", "Note 4."), digit-free title, page
# number of at most 3 digits (a 4-digit number at a line end is more often a year); no currency
# sign ("Total securities $ 417" is a table row) and no comma ("vega, 45" is an index line) before it;
# "Page 12" is a footer.
_TOC_ENTRY = re.compile(
    r"^(?!(?:page|seite)\s)(?:(?:chapter|kapitel|item|part|teil|section|abschnitt|note|appendix|anhang)\s+)?"
    r"(?:(?:\d+(?:\.\d+)*|[IVX]+)[A-Z]?\.?\s+)?[^\d\n$€£%]{2,}?[^\d\n$€£%,]\s\d{1,3}$",
    re.IGNORECASE,
)
_TOC_HEADING = re.compile(
    r"^(?:table of contents|contents|brief contents|contents at a glance|inhalt|inhaltsverzeichnis|"
    r"inhaltsübersicht)$"
)
_COPYRIGHT_CUES = (
    "©", "copyright", "all rights reserved", "isbn", "printed in", "library of congress",
    "first published", "alle rechte vorbehalten", "gedruckt in", "deutsche nationalbibliothek",
    "bibliografische information", "bibliographic information",
)
_INDEX_HEADING = re.compile(
    r"^(?:index|subject index|author index|register|sachregister|sachverzeichnis|stichwortverzeichnis|"
    r"stichwortregister|namensregister|personenregister)$"
)
_INDEX_LINE = re.compile(
    r"^[^\d,][^\d]*?,\s*\d+(?:\s*[-–]\s*\d+)?(?:\s*,\s*\d+(?:\s*[-–]\s*\d+)?)*\s*$"
    r"|^(?:see also|siehe auch)\s+\w|^[^\d,][^\d]*?,\s*(?:see|siehe)\s+\w",
    re.IGNORECASE,
)
_BIBLIOGRAPHY_HEADING = re.compile(
    r"^(?:\d+(?:\.\d+)*\.?\s+)?(?:references|bibliography|literature|works cited|further reading|"
    r"literatur|literaturverzeichnis|quellen|quellenverzeichnis|literaturhinweise|weiterführende literatur)$"
)
_YEAR = re.compile(r"(?<!\d)(?:1[5-9]|20)\d\d[a-z]?(?!\d)")
# Citation cues: "[3]", "3. Black", "Black, F.", "S. 12" (case matters), then words in any case.
_CITATION_MARK = re.compile(
    r"^\s*\[\d+\]|^\s*\d+\.\s+[A-ZÄÖÜ]|[A-ZÄÖÜ][\w'’-]+,\s+(?:[A-ZÄÖÜ]\.\s*)+|\bS\.\s*\d"
)
_CITATION_WORD = re.compile(
    r"et al\.|\bpp?\.\s*\d|\bvol\.|\bhrsg\.|\beds?\.|\bdoi\b|journal|review|proceedings|press\b|verlag|university",
    re.IGNORECASE,
)
_CAPTION_LINE = re.compile(
    r"^(?:figure|fig\.|table|tab\.|exhibit|chart|abbildung|abb\.|tabelle|grafik|schaubild|diagramm)\s*\d",
    re.IGNORECASE,
)


# =================================================================================================
# Data


@dataclass(frozen=True)
class NoiseContext:
    """What the noise rules need beyond one chunk: running-header lines per document."""

    repeated_lines: Mapping[str, frozenset[str]] = field(default_factory=dict)


# =================================================================================================
# Text helpers


def analysis_text(text: str) -> str:
    """Chunk text as the filter and the question finders read it: header stripped, NFKC.

    NFKC turns PDF ligatures (``ﬁ``) into letters and no-break spaces into spaces.
    """
    return unicodedata.normalize("NFKC", strip_chunk_header(text))


def nonempty_lines(text: str) -> list[str]:
    """Non-empty lines, stripped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def fraction(count: int, total: int) -> float:
    """``count / total``; 0.0 when ``total`` is 0."""
    return count / total if total else 0.0


def header_key(line: str) -> str:
    """Line form for finding running headers: casefold, digits as ``#`` (page numbers vary), one space."""
    return " ".join(re.sub(r"\d+", "#", line.casefold()).split())


# =================================================================================================
# Noise filter


def build_noise_context(chunks: Iterable[Mapping[str, Any]]) -> NoiseContext:
    """Find running headers and footers, per document.

    A running header is a line (compared by header_key) of at most RUNNING_HEADER_MAX_CHARS
    characters on at least RUNNING_HEADER_MIN_PAGES distinct pages of the same document.
    """
    pages_of: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for chunk in chunks:
        for line in nonempty_lines(analysis_text(chunk["text"])):
            if len(line) <= RUNNING_HEADER_MAX_CHARS:
                pages_of[chunk["source"]][header_key(line)].add(chunk["page"])
    return NoiseContext(
        repeated_lines={
            source: frozenset(key for key, pages in lines.items() if len(pages) >= RUNNING_HEADER_MIN_PAGES)
            for source, lines in pages_of.items()
        }
    )


def _is_front_matter(lines: list[str], page: int) -> bool:
    """Table of contents, copyright page or title page."""
    if any(_TOC_HEADING.match(line.casefold()) for line in lines):
        return True
    toc_lines = sum(bool(_DOTTED_LEADER.search(line) or _TOC_ENTRY.match(line)) for line in lines)
    if fraction(toc_lines, len(lines)) >= TOC_LINE_SHARE:
        return True
    cue_lines = sum(any(cue in line.casefold() for cue in _COPYRIGHT_CUES) for line in lines)
    if cue_lines >= COPYRIGHT_MIN_CUE_LINES:
        return True
    prose = sum(word_count(line) >= PROSE_LINE_MIN_WORDS for line in lines)
    return page < TITLE_PAGE_MAX_PAGE and fraction(prose, len(lines)) < TITLE_PAGE_PROSE_SHARE


def _is_index(lines: list[str]) -> bool:
    """A back-of-book index: "Index"/"Register" heading or many "term, 12, 45" lines."""
    share = fraction(sum(bool(_INDEX_LINE.match(line)) for line in lines), len(lines))
    has_heading = any(_INDEX_HEADING.match(line.casefold()) for line in lines)
    return share >= (INDEX_LINE_SHARE_WITH_HEADING if has_heading else INDEX_LINE_SHARE)


def _is_citation_line(line: str) -> bool:
    """A line with a year and a citation cue (``[3]``, ``Black, F.``, ``et al.``, ``pp. 3``, ``Verlag``)."""
    return bool(_YEAR.search(line) and (_CITATION_MARK.search(line) or _CITATION_WORD.search(line)))


def _is_bibliography(lines: list[str]) -> bool:
    """A reference list: "References"/"Literatur" heading or many citation-like lines."""
    share = fraction(sum(_is_citation_line(line) for line in lines), len(lines))
    has_heading = any(_BIBLIOGRAPHY_HEADING.match(line.casefold()) for line in lines)
    return share >= (CITATION_LINE_SHARE_WITH_HEADING if has_heading else CITATION_LINE_SHARE)


def _is_running_headers(lines: list[str], repeated: frozenset[str]) -> bool:
    repeated_chars = sum(len(line) for line in lines if header_key(line) in repeated)
    return fraction(repeated_chars, sum(len(line) for line in lines)) >= RUNNING_HEADER_CHAR_SHARE


def _is_captions(lines: list[str]) -> bool:
    return fraction(sum(bool(_CAPTION_LINE.match(line)) for line in lines), len(lines)) >= CAPTION_LINE_SHARE


def _is_numeric(text: str) -> bool:
    """Mostly numbers; tokens without a letter or digit (``$``, ``-``) count neither way."""
    words = [word for word in text.split() if _WORD.search(word)]
    return fraction(sum(bool(_NUMERIC_TOKEN.fullmatch(word)) for word in words), len(words)) >= NUMERIC_TOKEN_SHARE


def classify_noise(chunk: Mapping[str, Any], context: NoiseContext | None = None) -> str | None:
    """The first NOISE_RULES rule the chunk falls under, or None for a chunk worth asking about.

    ``context`` (from build_noise_context over all chunks) supplies the running headers; without it
    the running-header rule never fires. The content rules read only the chunk's own lines, not
    its running headers: a "Table of Contents" or "Index" link on every page of a filing does not
    make every page a contents or index page, and a "Page 12" footer is no contents line.
    """
    text = analysis_text(chunk["text"])
    lines = nonempty_lines(text)
    if not lines:
        return "too_short"
    repeated = context.repeated_lines.get(chunk["source"], frozenset()) if context else frozenset()
    own = [line for line in lines if header_key(line) not in repeated]
    checks: dict[str, Callable[[], bool]] = {
        "front_matter": lambda: _is_front_matter(own, chunk["page"]),
        "index": lambda: _is_index(own),
        "bibliography": lambda: _is_bibliography(own),
        "running_headers": lambda: _is_running_headers(lines, repeated),
        "captions": lambda: _is_captions(own),
        "numeric": lambda: _is_numeric(text),
        "too_short": lambda: word_count(text) < MIN_CHUNK_WORDS,
    }
    return next((rule for rule in NOISE_RULES if checks[rule]()), None)


def filter_chunks(
    chunks: Sequence[Mapping[str, Any]], context: NoiseContext | None = None
) -> tuple[list[Mapping[str, Any]], dict[str, int]]:
    """Chunks that pass the noise filter (input order kept) and the number removed per rule.

    The context is built from ``chunks`` unless given.
    """
    context = build_noise_context(chunks) if context is None else context
    counts = dict.fromkeys(NOISE_RULES, 0)
    kept = []
    for chunk in chunks:
        rule = classify_noise(chunk, context)
        if rule is None:
            kept.append(chunk)
        else:
            counts[rule] += 1
    return kept, counts


def page_noise(page_chunks: Sequence[Mapping[str, Any]], context: NoiseContext | None = None) -> str | None:
    """The PAGE_NOISE_RULES rule the whole page (its chunks joined) falls under, or None.

    Catches a chunk that looks clean alone but sits on a contents, index or reference page whose
    heading landed in another chunk.
    """
    if not page_chunks:
        return None
    first = page_chunks[0]
    text = "\n".join(analysis_text(chunk["text"]) for chunk in page_chunks)
    rule = classify_noise({"source": first["source"], "page": first["page"], "text": text}, context)
    return rule if rule in PAGE_NOISE_RULES else None
