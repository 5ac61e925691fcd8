"""Citations in a chat answer: read them, and check them against the passages given and the gold pages.

The documented citation form is the chunk header's with a page word: ``[file, p. 12]``; also read are
``[file, page 12]``, ``[file, pp. 12-13]`` (every page of the range is cited), ``[file, S. 12]`` and
``[file, Seite 12]`` (German), the page word in any case, with or without its dot, and several citations in one
bracket separated by ``;``: ``[a.pdf, p. 3; b.pdf, S. 7]``. The file is everything before the last comma that
precedes the page word, so a file name may hold commas ("[Hull, Options.pdf, p. 3]") but not ``;``. Pages are
1-based, as a PDF viewer shows them and as the chunk header writes them (localrag/text/pages.py).

A bracket is a citation attempt when its text holds a digit, ".pdf" or a page word with something after it ("p. x",
not the "s" of "Apple's"); then each ``;`` part that is not a citation is kept as an unparsed Citation with its
``problem`` (no page, no file, no comma between them, page 0 or below, a range that runs backwards or spans more
than MAX_CITED_PAGES pages, ...), to be
counted, never dropped. Other brackets ("[sic]", "[...]", "[x]", a Markdown link's text) are not attempts. An
unclosed bracket is no bracket.

Sentences (split_sentences) end at ".", "!" or "?" followed by white space, unless the next text starts with a
lower-case letter ("U.S. sales"), the word before a "." is a known abbreviation (ABBREVIATIONS: "p. 12", "S. 12",
"e.g."; "No." and "Nr." only before a number), or the mark is inside square brackets (".pdf" or "p. 12" in a
citation). A decimal point has no space after it, so "1.6" never ends one. A blank line or a line starting a list
item ("- ", "* ", "• ", "1. ") ends one too, and so does a line break after a citation bracket unless the next line
starts lower-case; other line breaks do not (wrapped lines). A part holding nothing but citations ("… in 2022.
[a.pdf, p. 3]") belongs to the sentence before it, since that is what it cites.

check_citations compares file names as the goldset does (localrag.goldset.format.same_file) and decides a gold
hit with the goldset's own rule, location_matches: the same file and a cited page within ``tolerance`` of the gold
page. A citation names a passage the answer was given only if its file and one of its pages are exactly among
``given``: a neighbouring page was not shown to the model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from localrag.goldset.format import Location, location_matches, same_file
from localrag.text.pages import PAGE_OFFSET

# Words before a "." that does not end a sentence (casefolded, without the dot). Abbreviations that also end
# sentences ("Inc.", "etc.") are left out: before a lower-case word they do not split anyway.
ABBREVIATIONS = frozenset({"p", "pp", "s", "vs", "e.g", "i.e", "z.b", "bzw", "ca", "approx", "fig", "abb", "dr", "mr",
                           "mrs", "ms", "st", "vgl", "cf"})
# Abbreviations that do not end a sentence only before a number: "No. 5", not "The answer is No. The ...".
NUMBER_ABBREVIATIONS = frozenset({"no", "nr"})
# Most pages one citation may span: a longer range cites no passage (and would be expanded page by page).
MAX_CITED_PAGES = 50
# Page words of a citation, as a pattern; "S" and "Seite(n)" are German.
_PAGE_WORD = r"(?:pp?|pages?|s|seiten?)\b\.?"
# One citation: file, last comma, page word, page text (checked by _pages).
_CITATION = re.compile(rf"(?P<file>.+),\s*{_PAGE_WORD}\s*(?P<pages>.*)", re.IGNORECASE | re.DOTALL)
# A page or a range as a citation writes it; a sign is read so that a negative page gets its own reason.
_PAGES = re.compile(r"(?P<first>[-−]?\d+)(?:\s*[-–]\s*(?P<last>[-−]?\d+))?")
# A page word as a word (not the "s" of "Apple's") with something after it: "p. 12", "page x", "S. 3".
_PAGE_MENTION = re.compile(r"(?<![\w'’])(?:pp?|pages?|s|seiten?)(?:\.\s*|\s+)\S", re.IGNORECASE)
# A bracket's text that is a citation attempt: a digit, ".pdf" or a page mention.
_ATTEMPT = re.compile(rf"\d|\.pdf\b|{_PAGE_MENTION.pattern}", re.IGNORECASE)
_BRACKET = re.compile(r"\[(?P<text>[^\[\]\n]*)\](?!\()")  # "[text](url)" is a Markdown link, not a citation
# Where a sentence may end: a sentence mark and white space; a blank line or a line break before a list item (a
# paragraph); a line break after a citation bracket ("… million [a.pdf, p. 3]" and a new line).
_BREAK = re.compile(r"(?P<mark>[.!?]+[\"'”’)]*\s+)|(?P<paragraph>\n\s*\n\s*|\n(?=[ \t]*(?:[-*•]|\d+[.)])\s))"
                    r"|(?P<line>(?<=\])[ \t]*\n\s*)")


@dataclass(frozen=True)
class Citation:
    """One citation of an answer: ``file`` and its 1-based pages ``first_page``-``last_page`` (equal for one page),
    ``sentence`` (0-based index of split_sentences' sentence it stands in) and ``text`` as written. An unparsed
    citation attempt has ``problem`` (why; "" for a parsed one) and may lack file and pages."""

    text: str
    sentence: int
    file: str = ""
    first_page: int | None = None
    last_page: int | None = None
    problem: str = ""

    @property
    def pages(self) -> tuple[int, ...]:
        """Every cited page, 1-based; () for an unparsed citation."""
        if self.problem or self.first_page is None or self.last_page is None:
            return ()
        return tuple(range(self.first_page, self.last_page + 1))


@dataclass(frozen=True)
class CitationCheck:
    """The citations of an answer against its passages, each group in answer order: ``parsed`` name a file and
    pages, of which ``given`` name a passage shown to the model and ``not_given`` none; ``unparsed`` are attempts
    that name no file and page; ``gold`` are the parsed ones within the tolerance of a gold page."""

    parsed: tuple[Citation, ...]
    unparsed: tuple[Citation, ...]
    given: tuple[Citation, ...]
    not_given: tuple[Citation, ...]
    gold: tuple[Citation, ...]

    @property
    def cites_gold(self) -> bool:
        """Whether some citation names a gold file and page (within the tolerance)."""
        return bool(self.gold)

    def counts(self) -> dict[str, int]:
        """How many citations are parsed, unparsed, given and not given, for a report."""
        return {"parsed": len(self.parsed), "unparsed": len(self.unparsed), "given": len(self.given),
                "not given": len(self.not_given)}


# ---------------------------------------------------------------------------------------------
# Sentences


def _ends_sentence(text: str, mark: re.Match[str], brackets: Sequence[tuple[int, int]]) -> bool:
    """Whether the break ``mark`` in ``text`` ends a sentence (see the module's rules)."""
    if any(start < mark.start() < end for start, end in brackets):
        return False
    if mark["paragraph"]:
        return True
    rest = text[mark.end():]
    if rest[:1].islower():
        return False
    if mark["line"]:
        return True
    word = re.search(r"(\S*)$", text[:mark.start()]).group(1).casefold().lstrip("([\"'")
    abbreviations = ABBREVIATIONS | NUMBER_ABBREVIATIONS if rest[:1].isdigit() else ABBREVIATIONS
    return not (mark.group().startswith(".") and word in abbreviations)


def sentence_spans(answer: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``answer`` (end excluded), white space between them left out."""
    brackets = [(found.start(), found.end()) for found in _BRACKET.finditer(answer)]
    spans, start = [], 0
    for mark in _BREAK.finditer(answer):
        if _ends_sentence(answer, mark, brackets):
            spans.append((start, mark.start() + len(mark.group().rstrip())))
            start = mark.end()
    spans.append((start, len(answer.rstrip())))
    spans = [(start, end) for start, end in spans if answer[start:end].strip()]
    return _citations_join_before(answer, spans)


def _citations_join_before(answer: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans with each one that holds only citations (and punctuation) joined to the one before it."""
    joined: list[tuple[int, int]] = []
    for start, end in spans:
        rest = _BRACKET.sub("", answer[start:end]).strip(" \t\n.,;:")
        if joined and not rest and _BRACKET.search(answer[start:end]):
            joined[-1] = (joined[-1][0], end)
        else:
            joined.append((start, end))
    return joined


def split_sentences(answer: str) -> list[str]:
    """The sentences of ``answer`` under the module's rules, stripped, in order."""
    return [answer[start:end].strip() for start, end in sentence_spans(answer)]


# ---------------------------------------------------------------------------------------------
# Citations


def _pages(text: str) -> tuple[int, int] | str:
    """(first, last) 1-based page of a citation's page text, or why it is none."""
    match = _PAGES.fullmatch(text.strip().rstrip("."))
    if match is None:
        return f"'{text.strip()}' is not a page; write p. 12 or pp. 12-13"
    first = int(match["first"].replace("−", "-"))
    last = first if match["last"] is None else int(match["last"].replace("−", "-"))
    if min(first, last) < PAGE_OFFSET:
        return f"page {min(first, last)} is before the first page; pages count from {PAGE_OFFSET}"
    if last < first:
        return f"the range {first}-{last} runs backwards; write {last}-{first}"
    if (span := last - first + 1) > MAX_CITED_PAGES:
        return f"the range {first}-{last} spans {span} pages, more than {MAX_CITED_PAGES}; cite the passage's pages"
    return first, last


def _unparsed_reason(part: str) -> str:
    """Why a bracket part that is no citation fails: what it lacks."""
    if re.fullmatch(r"\s*\d+\s*", part):
        return "is a numbered reference, not [file, p. 12]"
    mention = _PAGE_MENTION.search(part)
    if mention and not part[:mention.start()].strip(" ,"):
        return "names no file before the page; write [file, p. 12]"
    if mention:
        return "needs a comma between file and page; write [file, p. 12]"
    if re.search(r",\s*[-−]?\d+\s*$", part):
        return "has no page word before the page; write p., page or S."
    return "names no page; write [file, p. 12]"


def parse_citation(part: str, sentence: int) -> Citation:
    """One ``;`` part of a citation bracket as a Citation, unparsed (with ``problem``) when it is none."""
    text = part.strip()
    match = _CITATION.fullmatch(text)
    if match is None or not match["file"].strip():
        return Citation(text, sentence, problem=_unparsed_reason(text))
    pages = _pages(match["pages"])
    if isinstance(pages, str):
        return Citation(text, sentence, file=match["file"].strip(), problem=pages)
    return Citation(text, sentence, match["file"].strip(), *pages)


def parse_citations(answer: str) -> list[Citation]:
    """Every citation and citation attempt of ``answer`` in order, each with its sentence; attempts that are no
    citation carry their ``problem``."""
    spans = sentence_spans(answer)
    citations = []
    for bracket in _BRACKET.finditer(answer):
        if not _ATTEMPT.search(bracket["text"]):
            continue
        sentence = next((i for i, (_, end) in enumerate(spans) if bracket.start() < end), len(spans) - 1)
        citations += [parse_citation(part, sentence) for part in bracket["text"].split(";") if part.strip()]
    return citations


def _check_pages(passages: Sequence[tuple[str, int]], what: str) -> None:
    """ValueError unless every page of ``passages`` is a 1-based page."""
    for file, page in passages:
        if page < PAGE_OFFSET:
            raise ValueError(f"{what} passage ({file!r}, {page}) has page {page}; pages count from {PAGE_OFFSET}, "
                             "as a PDF viewer shows them")


def check_citations(citations: Sequence[Citation], given: Sequence[tuple[str, int]],
                    gold: Sequence[tuple[str, int]], tolerance: int) -> CitationCheck:
    """The citations sorted into given / not given / unparsed, and those that hit a gold (file, page).

    ``given``: the (file, 1-based page) of every passage the answer was given; ``gold``: where the answer is, as
    a goldset names it; ``tolerance``: pages a gold hit may be off (the goldset's PAGE_TOLERANCE is the usual).
    ValueError for a page below 1 in ``given`` or ``gold`` or a negative tolerance.
    """
    _check_pages(given, "given")
    _check_pages(gold, "gold")
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    parsed = tuple(citation for citation in citations if not citation.problem)
    shown = [any(same_file(c.file, file) and page in c.pages for file, page in given) for c in parsed]
    locations = [Location(file, page) for file, page in gold]
    # page_offset 0: cited and gold pages are both 1-based, as people see them.
    hits = tuple(c for c in parsed if any(location_matches(c.file, c.pages, location, page_offset=0,
                                                           tolerance=tolerance) for location in locations))
    return CitationCheck(parsed=parsed, unparsed=tuple(c for c in citations if c.problem),
                         given=tuple(c for c, ok in zip(parsed, shown) if ok),
                         not_given=tuple(c for c, ok in zip(parsed, shown) if not ok), gold=hits)
