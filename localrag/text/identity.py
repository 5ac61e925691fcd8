"""The context line a chunk carries into BM25 and the embedding: its document's identity and its section.

A chunk cut from page 87 of a filing rarely names the company, the form or the period; the question does.
Contextual chunk text (Anthropic, "Introducing Contextual Retrieval", 2024: an LLM-written context per chunk cut
retrieval failures by about a third with embeddings, by about half with BM25 beside them) is done here without a
model, deterministically, from what the PDF itself says:

- the file name, split into words (``3M_2018_10K.pdf`` -> ``3M 2018 10K``);
- the title in the PDF's metadata, unless it is an identifier (``0001065280-16-000047``);
- from the first page: the form (``Form 10-K``), the period (``fiscal year ended December 31, 2018``, a report
  date) and the registrant (the line above ``(Exact name of registrant ...)``), as SEC cover pages print them;
- the section of the chunk's page from the PDF's outline (localrag/text/pdf.py, ``sections_by_page``).

Parts that another part already contains are left out. The line is put before the chunk's text for BM25 and
the embedding only: excerpts, citations and the judge see the page text (`localrag.text.pages.strip_chunk_header`).
"""
from __future__ import annotations

import re
from pathlib import PurePosixPath

MAX_PART_CHARS = 120  # a longer title or registrant line is cut here: a context line, not a paragraph
FIRST_PAGE_CHARS = 4000  # how much of the first page is searched for form, period and registrant
SEPARATOR = " | "  # between the parts of the context line
# Metadata titles that PDF writers fill in by themselves (reportlab, Word, scanners): they name no document.
PLACEHOLDER_TITLES = frozenset({"untitled", "document", "anonymous", "title", "none", "null", "unknown"})

_MONTH = (r"(?:January|February|March|April|May|June|July|August|September|October|November|December|"
          r"Jan\.?|Feb\.?|Mar\.?|Apr\.?|Jun\.?|Jul\.?|Aug\.?|Sept?\.?|Oct\.?|Nov\.?|Dec\.?)")
_DATE = rf"{_MONTH}\s+\d{{1,2}},?\s*\d{{4}}"
FORM_RE = re.compile(r"\bFORM\s+(10-K|10-Q|8-K|20-F|40-F|6-K|S-1|S-4|DEF\s14A|11-K)\b", re.IGNORECASE)
# "For the fiscal year ended December 31, 2018"; the date may stand a line further down (two-column cover pages).
PERIOD_RE = re.compile(rf"\b(fiscal year|quarterly period|transition period|year|quarter|period)\s+ended\b"
                       rf"[^\n]{{0,60}}\n?[^\n]{{0,60}}?({_DATE})", re.IGNORECASE)
REPORT_DATE_RE = re.compile(rf"Date of Report[^\n:]{{0,60}}:?\s*\n?\s*({_DATE})", re.IGNORECASE)
REGISTRANT_RE = re.compile(r"^([^\n]{2,%d})\n[^\n]{0,20}\(Exact name of registrant" % MAX_PART_CHARS,
                           re.IGNORECASE | re.MULTILINE)
# Metadata titles that name no document: accession numbers, bare dates or numbers, "Microsoft Word - x.docx".
_ID_TITLE = re.compile(r"^[\d\s\-_./:]+$")
_RULE = re.compile(r"_{3,}")  # a printed rule (cover pages draw lines with underscores)
_WORD = re.compile(r"[^\W\d_]{3,}")


def name_words(source: str) -> str:
    """The file name without its folder and extension, underscores and hyphens read as spaces."""
    stem = PurePosixPath(source.replace("\\", "/")).name
    if stem.lower().endswith(".pdf"):
        stem = stem[:-4]
    return " ".join(re.sub(r"[_\-]+", " ", stem).split())


def metadata_title(title: str) -> str:
    """A PDF metadata title worth reading, or "": identifiers and titles without a word of 3 letters are not."""
    title = " ".join(str(title or "").split())
    if not title or _ID_TITLE.match(title) or not _WORD.search(title) or title.casefold() in PLACEHOLDER_TITLES:
        return ""
    return title[:MAX_PART_CHARS]


def cover_facts(first_page: str) -> list[str]:
    """Form, period (or report date) and registrant named on a first page, in that order, each once."""
    text = first_page[:FIRST_PAGE_CHARS]
    facts = []
    form = FORM_RE.search(text)
    if form:
        facts.append("Form " + " ".join(form.group(1).upper().split()))
    period = PERIOD_RE.search(text)
    if period:
        facts.append(f"{period.group(1).lower()} ended {' '.join(period.group(2).split())}")
    else:
        report = REPORT_DATE_RE.search(text)
        if report:
            facts.append(f"report dated {' '.join(report.group(1).split())}")
    registrant = REGISTRANT_RE.search(text)
    if registrant:  # the name stands after any rule of underscores that shares its line
        name = " ".join(_RULE.split(registrant.group(1))[-1].split())
        if name:
            facts.append(name)
    return facts


def document_context(source: str, title: str, first_page: str) -> str:
    """The document's identity as one line: file name words, metadata title, cover facts; no part twice."""
    parts: list[str] = []
    for part in (name_words(source), metadata_title(title), *cover_facts(first_page)):
        if part and not any(part.casefold() in kept.casefold() for kept in parts):
            parts.append(part)
    return SEPARATOR.join(parts)


def chunk_context(document: str, section: str | None) -> str:
    """The context line of one chunk: the document's identity, then its section when the outline names one."""
    section = " ".join((section or "").split())[:MAX_PART_CHARS]
    return SEPARATOR.join(part for part in (document, section) if part)


def identity_tokens(text: str) -> list[str]:
    """BM25 tokens of an identity line or a question: words, with file-name joins and letter-digit runs split
    (``3M_2018_10K`` and ``FY2018`` both meet ``2018``)."""
    from localrag.search.bm25 import tokenize

    return tokenize(text, split_joined=True)


def identity_index(identities: dict[str, str]):
    """A BM25 index over the documents' identity lines (file name -> line), for `document_prior`."""
    from localrag.search.bm25 import BM25Index

    names = sorted(identities)
    return BM25Index.build_from_tokens(names, [identity_tokens(identities[name]) for name in names])


def document_prior(index, question: str) -> dict[str, float]:
    """How well each document's identity matches the question, as a share of the best match: BM25 over the
    identity lines divided by the highest score, so the best document gets 1.0. Documents that match no word of
    the question get nothing; where no document scores above 0 (the question names none) the prior is empty and
    changes no order."""
    scores = index.score_tokens(identity_tokens(question))
    best = float(scores.max()) if len(scores) else 0.0
    if best <= 0:
        return {}
    return {name: float(score) / best for name, score in zip(index.ids, scores) if score > 0}
