#!/usr/bin/env python3
"""Write the shipped sample corpus for the retrieval evaluation (five PDFs, 55 pages).

The corpus gives a page-level retrieval test something real to chew on: an options-pricing
text with numbered equations ("Equation 21.23") and the Greeks, a German literary-history
text whose file name has an umlaut, a fictional annual report with a key-figures table,
English notes on retrieval evaluation and a German operating manual. Two documents carry
running headers and "Page N" footers, one has a title page, a table of contents and an
index, and exactly one page is only a raster image with no text layer at all.

All text is original; companies, products and people in the report and the manual are
fictional. The output is byte-for-byte reproducible (reportlab's invariant mode, fixed
metadata, standard PDF fonts that are not embedded), so a test can regenerate the files and
compare them with the committed ones.

Usage: python eval/make_sample_docs.py [--out DIR]
"""

from __future__ import annotations

import argparse
import io
import sys
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from PIL import Image, ImageDraw, ImageFont
from reportlab import rl_config

rl_config.invariant = 1  # fixed creation date and document id, so reruns give identical bytes

from reportlab.lib import colors  # noqa: E402  (must follow the invariant switch)
from reportlab.lib.enums import TA_CENTER, TA_JUSTIFY, TA_LEFT, TA_RIGHT  # noqa: E402
from reportlab.lib.pagesizes import A4  # noqa: E402
from reportlab.lib.styles import ParagraphStyle  # noqa: E402
from reportlab.lib.utils import ImageReader  # noqa: E402
from reportlab.pdfgen.canvas import Canvas  # noqa: E402
from reportlab.platypus import Flowable, Frame, Paragraph, Spacer, Table, TableStyle  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "docs"  # eval/docs next to this script
PAGE_WIDTH, PAGE_HEIGHT = A4  # points; every sample page is A4 portrait
MARGIN_X = 62.0  # left and right margin of the text frame, in points
MARGIN_TOP = 76.0  # space above the text frame, room for the running header
MARGIN_BOTTOM = 68.0  # space below the text frame, room for the folio line
HEADER_Y = PAGE_HEIGHT - 46.0  # baseline of the running header
FOOTER_Y = 38.0  # baseline of the "Page N" footer
BODY_SIZE = 10.5  # body text size in points
BODY_LEADING = 14.4  # body line spacing in points
EQ_NUMBER_WIDTH = 58.0  # width of the right-hand column holding "(21.23)"
CHART_PIXELS = (1500, 1100)  # raster chart size; drawn 15.5 cm wide, about 245 dpi
CHART_FONT_SIZE = 30  # pixel size of the chart's labels (Pillow's bundled default font)
PDF_AUTHOR = "localRAG sample corpus (original text; companies and products are fictional)"
PDF_CREATOR = "eval/make_sample_docs.py"
FONT_FAMILIES = {  # family -> (regular, bold, italic); the 14 standard fonts are never embedded
    "Helvetica": ("Helvetica", "Helvetica-Bold", "Helvetica-Oblique"),
    "Times": ("Times-Roman", "Times-Bold", "Times-Italic"),
}
PAGE_KINDS = ("title", "toc", "body", "index", "image")  # what a page can be
UNNUMBERED_KINDS = ("title", "toc")  # front matter carries no running header and no folio


# --------------------------------------------------------------------------------------------
# Data model

Block = tuple  # ("p", text), ("h1", text), ("eq", formula, number), ... see parse_pages


@dataclass(frozen=True)
class Page:
    """One physical page: what kind it is, its content blocks and the index terms it covers."""

    kind: str
    blocks: tuple[Block, ...] = ()
    terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class Doc:
    """One sample PDF: file name, metadata, pages and the look of its running header/footer."""

    filename: str
    title: str
    subject: str
    pages: tuple[Page, ...]
    header: str | None = None  # left part of the running header; None: no header, no footer
    folio_label: str = "Page"  # word before the printed page number ("Page", "Seite")
    first_folio: int = 1  # physical page (1-based) whose printed number is 1
    font: str = "Helvetica"  # key of FONT_FAMILIES


# --------------------------------------------------------------------------------------------
# Small pure helpers


def pct_change(new: float, old: float) -> str:
    """Relative change as an annual report prints it: "+8.3%" (one decimal, explicit sign)."""
    if old == 0:
        raise ValueError(f"pct_change: old value is 0 (new={new}); use an absolute change instead")
    return f"{(new / old - 1.0) * 100.0:+.1f}%"


def pp_change(new: float, old: float) -> str:
    """Change of a percentage in percentage points: "+1.5 pp"."""
    return f"{new - old:+.1f} pp"


def folio(doc: Doc, page_no: int) -> int | None:
    """Printed page number of physical page `page_no` (1-based); None where none is printed."""
    if doc.header is None or doc.pages[page_no - 1].kind in UNNUMBERED_KINDS:
        return None
    return page_no - doc.first_folio + 1


def running_titles(doc: Doc) -> list[str]:
    """Right part of each page's running header: the last level-1 heading seen so far."""
    titles, current = [], ""
    for page in doc.pages:
        for block in page.blocks:
            if block[0] == "h1":
                current = block[1]
                break  # a page opening a chapter shows that chapter
        titles.append(current)
    return titles


def toc_entries(doc: Doc) -> list[tuple[int, str, int]]:
    """(level, heading, printed page) for every h1/h2 on a numbered page, in reading order."""
    entries = []
    for page_no, page in enumerate(doc.pages, start=1):
        number = folio(doc, page_no)
        if number is None:
            continue
        for block in page.blocks:
            if block[0] in ("h1", "h2"):
                entries.append((1 if block[0] == "h1" else 2, block[1], number))
    return entries


def build_index(terms_by_folio: Mapping[int, Sequence[str]]) -> list[tuple[str, list[int]]]:
    """Alphabetical index: each term with the ascending printed pages that discuss it.

    Terms sort case-insensitively, as in a printed index ("gamma" before "Greeks").
    """
    pages: dict[str, set[int]] = {}
    for number, terms in terms_by_folio.items():
        for term in terms:
            pages.setdefault(term, set()).add(number)
    return [(term, sorted(pages[term])) for term in sorted(pages, key=lambda t: (t.casefold(), t))]


def page_text(page: Page) -> str:
    """Plain text of a page's own blocks (no header/footer), for checks such as the index's."""
    parts: list[str] = []
    for block in page.blocks:
        kind = block[0]
        if kind in ("ul", "ol"):
            parts.extend(block[1])
        elif kind == "dl":
            parts.extend(f"{term} {text}" for term, text in block[1])
        elif kind == "eq":
            parts.append(f"{block[1]} ({block[2]})")
        elif kind == "table":
            parts.extend(" ".join(row) for row in (block[1], *block[2]))
        elif len(block) > 1 and isinstance(block[1], str):
            parts.append(block[1])
    return "\n".join(parts)


def doc_index(doc: Doc) -> list[tuple[str, list[int]]]:
    """The index of `doc`, after checking that each term really occurs on its pages."""
    terms_by_folio: dict[int, tuple[str, ...]] = {}
    for page_no, page in enumerate(doc.pages, start=1):
        if not page.terms:
            continue
        number = folio(doc, page_no)
        if number is None:
            raise ValueError(f"{doc.filename}: page {page_no} has index terms but no printed "
                             "page number; move the terms to a numbered page")
        text = page_text(page).casefold()
        missing = [t for t in page.terms if t.casefold() not in text]
        if missing:
            raise ValueError(f"{doc.filename}: index terms {missing} do not occur on page "
                             f"{page_no}; fix the text or the 'terms:' line")
        terms_by_folio[number] = page.terms
    return build_index(terms_by_folio)


# --------------------------------------------------------------------------------------------
# A tiny page markup, so that the prose below stays readable


def _join(lines: Sequence[str]) -> str:
    return " ".join(line.strip() for line in lines)


def _items(lines: Sequence[str], marker: str) -> tuple[str, ...]:
    """Split a list block into items; lines not starting with `marker` continue the item."""
    items: list[list[str]] = []
    for line in lines:
        if line.startswith(marker):
            items.append([line[len(marker):]])
        elif items:
            items[-1].append(line)
        else:
            raise ValueError(f"list block must start with {marker!r}, got {line!r}")
    return tuple(_join(item) for item in items)


def parse_block(lines: Sequence[str], tables: Mapping[str, Block]) -> Block:
    """One block of markup lines (no blank line inside) -> a content block tuple.

    Markers: "# " h1, "## " h2, "### " h3, "! " title, "!! " subtitle, "^ " centred line,
    "~ " small print, "- " bullet items, "+ " numbered items, ": term :: text" definitions,
    "$ formula @ number" equations (one per line), ">> N" vertical space of N points,
    "@table NAME", "@toc", "@index", "@chart" placeholders; anything else is a paragraph.
    """
    first = lines[0]
    for marker, kind in (("### ", "h3"), ("## ", "h2"), ("# ", "h1"), ("!! ", "subtitle"),
                         ("! ", "title"), ("^ ", "center"), ("~ ", "small")):
        if first.startswith(marker):
            return (kind, _join([first[len(marker):], *lines[1:]]))
    if first.startswith("- "):
        return ("ul", _items(lines, "- "))
    if first.startswith("+ "):
        return ("ol", _items(lines, "+ "))
    if first.startswith(": "):
        pairs = []
        for item in _items(lines, ": "):
            term, sep, text = item.partition(" :: ")
            if not sep:
                raise ValueError(f"definition needs 'term :: text', got {item!r}")
            pairs.append((term.strip(), text.strip()))
        return ("dl", tuple(pairs))
    if first.startswith("$ "):
        equations = []
        for line in lines:
            formula, sep, number = line[2:].rpartition(" @ ")
            if not line.startswith("$ ") or not sep:
                raise ValueError(f"equation line must read '$ formula @ 21.3', got {line!r}")
            equations.append(("eq", formula.strip(), number.strip()))
        return equations[0] if len(equations) == 1 else ("group", tuple(equations))
    if first.startswith(">> "):
        return ("space", float(first[3:]))
    if first.startswith("@table "):
        name = first[len("@table "):].strip()
        if name not in tables:
            raise ValueError(f"unknown table {name!r}; known: {sorted(tables)}")
        return tables[name]
    if first in ("@toc", "@index", "@chart"):
        return (first[1:],)
    return ("p", _join(lines))


def parse_pages(source: str, tables: Mapping[str, Block] | None = None) -> tuple[Page, ...]:
    """Parse page markup: "=== KIND" opens a page, blank lines separate blocks,
    and a "terms: a; b" line lists the index terms the page discusses."""
    pages: list[Page] = []
    kind: str | None = None
    blocks: list[Block] = []
    terms: tuple[str, ...] = ()
    chunk: list[str] = []

    def flush_chunk() -> None:
        nonlocal terms
        if not chunk:
            return
        if chunk[0].startswith("terms:"):
            terms = tuple(t.strip() for t in _join(chunk)[len("terms:"):].split(";") if t.strip())
        else:
            block = parse_block(chunk, tables or {})
            blocks.extend(block[1] if block[0] == "group" else [block])
        chunk.clear()

    def flush_page() -> None:
        nonlocal blocks, terms
        flush_chunk()
        if kind is not None:
            pages.append(Page(kind, tuple(blocks), terms))
        blocks, terms = [], ()

    for raw in source.splitlines():
        line = raw.rstrip()
        if line.startswith("=== "):
            flush_page()
            kind = line[4:].strip()
            if kind not in PAGE_KINDS:
                raise ValueError(f"unknown page kind {kind!r}; use one of {PAGE_KINDS}")
        elif not line.strip():
            flush_chunk()
        elif kind is None:
            raise ValueError(f"text before the first '=== KIND' line: {line!r}")
        else:
            chunk.append(line)
    flush_page()
    return tuple(pages)


# --------------------------------------------------------------------------------------------
# Rendering


def _styles(font: str) -> dict[str, ParagraphStyle]:
    regular, bold, italic = FONT_FAMILIES[font]
    body = ParagraphStyle("body", fontName=regular, fontSize=BODY_SIZE, leading=BODY_LEADING,
                          alignment=TA_JUSTIFY, spaceAfter=6)
    return {
        "p": body,
        "small": ParagraphStyle("small", parent=body, fontSize=8.5, leading=11, alignment=TA_LEFT,
                                spaceAfter=10),
        "h1": ParagraphStyle("h1", parent=body, fontName=bold, fontSize=16, leading=20,
                             alignment=TA_LEFT, spaceBefore=2, spaceAfter=10),
        "h2": ParagraphStyle("h2", parent=body, fontName=bold, fontSize=12.5, leading=16,
                             alignment=TA_LEFT, spaceBefore=6, spaceAfter=5),
        "h3": ParagraphStyle("h3", parent=body, fontName=bold, fontSize=BODY_SIZE,
                             alignment=TA_LEFT, spaceBefore=4, spaceAfter=3),
        "title": ParagraphStyle("title", parent=body, fontName=bold, fontSize=26, leading=32,
                                alignment=TA_CENTER, spaceAfter=14),
        "subtitle": ParagraphStyle("subtitle", parent=body, fontName=regular, fontSize=14,
                                   leading=19, alignment=TA_CENTER, spaceAfter=10),
        "center": ParagraphStyle("center", parent=body, alignment=TA_CENTER),
        "item": ParagraphStyle("item", parent=body, leftIndent=16, bulletIndent=3, spaceAfter=3),
        "eq": ParagraphStyle("eq", parent=body, fontName=italic, fontSize=11, alignment=TA_CENTER,
                             spaceAfter=0),
        "eqno": ParagraphStyle("eqno", parent=body, alignment=TA_RIGHT, spaceAfter=0),
        "cell": ParagraphStyle("cell", parent=body, fontSize=9, leading=11.5, alignment=TA_LEFT,
                               spaceAfter=0),
        "cellr": ParagraphStyle("cellr", parent=body, fontSize=9, leading=11.5,
                                alignment=TA_RIGHT, spaceAfter=0),
        "toc1": ParagraphStyle("toc1", parent=body, fontName=bold, alignment=TA_LEFT,
                               spaceAfter=0),
        "toc2": ParagraphStyle("toc2", parent=body, alignment=TA_LEFT, leftIndent=18,
                               spaceAfter=0),
        "tocno": ParagraphStyle("tocno", parent=body, alignment=TA_RIGHT, spaceAfter=0),
        "cellb": ParagraphStyle("cellb", parent=body, fontName=bold, fontSize=9, leading=11.5,
                                alignment=TA_LEFT, spaceAfter=0),
    }


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], widths: Sequence[float],
           align: str, styles: Mapping[str, ParagraphStyle], width: float) -> Table:
    """A ruled table; a one-cell row is a section label spanning all columns."""
    ncols = len(header)
    if len(widths) != ncols or len(align) != ncols:
        raise ValueError(f"table with {ncols} columns needs {ncols} widths and alignments, "
                         f"got {len(widths)} and {len(align)}")

    def cell(text: str, col: int, bold: bool) -> Paragraph:
        style = "cellb" if bold else ("cellr" if align[col] == "R" else "cell")
        return Paragraph(escape(text), styles[style])

    data = [[cell(text, i, True) for i, text in enumerate(header)]]
    commands = [("LINEABOVE", (0, 0), (-1, 0), 0.8, colors.black),
                ("LINEBELOW", (0, 0), (-1, 0), 0.5, colors.black),
                ("LINEBELOW", (0, -1), (-1, -1), 0.8, colors.black),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("TOPPADDING", (0, 0), (-1, -1), 2.2), ("BOTTOMPADDING", (0, 0), (-1, -1), 2.2)]
    for row in rows:
        r = len(data)
        if len(row) == 1:
            data.append([cell(row[0], 0, True)] + [""] * (ncols - 1))
            commands += [("SPAN", (0, r), (-1, r)),
                         ("BACKGROUND", (0, r), (-1, r), colors.Color(0.9, 0.92, 0.95))]
        elif len(row) == ncols:
            data.append([cell(text, i, False) for i, text in enumerate(row)])
            commands.append(("LINEBELOW", (0, r), (-1, r), 0.25, colors.grey))
        else:
            raise ValueError(f"table row {row!r} has {len(row)} cells, expected {ncols} or 1")
    total = sum(widths)
    table = Table(data, colWidths=[width * w / total for w in widths], repeatRows=0)
    table.setStyle(TableStyle(commands))
    return table


def _toc_table(doc: Doc, styles: Mapping[str, ParagraphStyle], width: float) -> Table:
    rows = []
    for level, heading, number in toc_entries(doc):
        rows.append([Paragraph(escape(heading), styles["toc1" if level == 1 else "toc2"]),
                     Paragraph(str(number), styles["tocno"])])
    table = Table(rows, colWidths=[width - 50, 50])
    table.setStyle(TableStyle([("TOPPADDING", (0, 0), (-1, -1), 0.5),
                               ("BOTTOMPADDING", (0, 0), (-1, -1), 0.5),
                               ("LEFTPADDING", (0, 0), (-1, -1), 0),
                               ("RIGHTPADDING", (0, 0), (-1, -1), 0)]))
    return table


def _index_table(doc: Doc, styles: Mapping[str, ParagraphStyle], width: float) -> Table:
    entries = doc_index(doc)
    half = (len(entries) + 1) // 2  # two columns, filled top to bottom like a printed index
    cells = [Paragraph(f"{escape(term)}, {', '.join(map(str, numbers))}", styles["cell"])
             for term, numbers in entries]
    left, right = cells[:half], cells[half:] + [""] * (2 * half - len(cells))
    table = Table([[a, b] for a, b in zip(left, right)], colWidths=[width / 2, width / 2])
    table.setStyle(TableStyle([("TOPPADDING", (0, 0), (-1, -1), 1.2),
                               ("BOTTOMPADDING", (0, 0), (-1, -1), 1.2),
                               ("VALIGN", (0, 0), (-1, -1), "TOP")]))
    return table


def _flowables(block: Block, doc: Doc, styles: Mapping[str, ParagraphStyle],
               width: float) -> list[Flowable]:
    kind = block[0]
    if kind in ("p", "h1", "h2", "h3", "title", "subtitle", "center", "small"):
        return [Paragraph(escape(block[1]), styles[kind])]
    if kind == "ul":
        return [Paragraph(escape(item), styles["item"], bulletText="\u2022") for item in block[1]]
    if kind == "ol":
        return [Paragraph(escape(item), styles["item"], bulletText=f"{i}.")
                for i, item in enumerate(block[1], start=1)]
    if kind == "dl":
        return [Paragraph(f"<b>{escape(term)}</b> {escape(text)}", styles["item"],
                          bulletText="\u2022") for term, text in block[1]]
    if kind == "eq":
        table = Table([[Paragraph(escape(block[1]), styles["eq"]),
                        Paragraph(f"({escape(block[2])})", styles["eqno"])]],
                      colWidths=[width - EQ_NUMBER_WIDTH, EQ_NUMBER_WIDTH])
        table.setStyle(TableStyle([("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
                                   ("TOPPADDING", (0, 0), (-1, -1), 1),
                                   ("BOTTOMPADDING", (0, 0), (-1, -1), 5)]))
        return [table]
    if kind == "table":
        return [_table(block[1], block[2], block[3], block[4], styles, width), Spacer(1, 8)]
    if kind == "space":
        return [Spacer(1, block[1])]
    if kind == "toc":
        return [_toc_table(doc, styles, width)]
    if kind == "index":
        return [_index_table(doc, styles, width)]
    raise ValueError(f"{doc.filename}: unknown block kind {kind!r}")


def revenue_chart(revenue: Mapping[int, Sequence[float]], segments: Sequence[str],
                  title: str) -> Image.Image:
    """Stacked bar chart of revenue by segment, drawn as pixels only (no text layer).

    Deliberately without data labels: the exact figures live in the report's table, so no
    goldset question can be answered from this page alone.
    """
    width, height = CHART_PIXELS
    image = Image.new("RGB", CHART_PIXELS, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=CHART_FONT_SIZE)
    big = ImageFont.load_default(size=int(CHART_FONT_SIZE * 1.4))
    palette = [(31, 78, 121), (88, 155, 196), (214, 139, 52)]
    left, right, top, bottom = 140, width - 60, 150, height - 190
    y_max, step = 700.0, 100.0

    def y_of(value: float) -> float:
        return bottom - (bottom - top) * value / y_max

    draw.text((left, 40), title, fill="black", font=big)
    for tick in range(0, int(y_max) + 1, int(step)):
        y = y_of(tick)
        draw.line([(left, y), (right, y)], fill=(215, 215, 215), width=2)
        draw.text((left - 20, y), str(tick), fill="black", font=font, anchor="rm")
    years = sorted(revenue)
    slot = (right - left) / len(years)
    for i, year in enumerate(years):
        x0, base = left + i * slot + slot * 0.2, 0.0
        for colour, value in zip(palette, revenue[year]):
            draw.rectangle([x0, y_of(base + value), x0 + slot * 0.6, y_of(base)], fill=colour)
            base += value
        draw.text((x0 + slot * 0.3, bottom + 20), str(year), fill="black", font=font, anchor="mt")
    draw.line([(left, bottom), (right, bottom)], fill="black", width=3)
    x = left
    for colour, name in zip(palette, segments):
        draw.rectangle([x, height - 95, x + 36, height - 59], fill=colour)
        draw.text((x + 50, height - 77), name, fill="black", font=font, anchor="lm")
        x += 60 + draw.textlength(name, font=font) + 40
    return image


def _draw_image_page(canvas: Canvas) -> None:
    """A page holding one raster image and nothing else: no header, no footer, no text."""
    image = revenue_chart(SEGMENT_REVENUE, SEGMENTS, "Revenue by segment 2019 to 2023, EUR million")
    draw_width = PAGE_WIDTH - 2 * MARGIN_X
    draw_height = draw_width * image.height / image.width
    canvas.drawImage(ImageReader(image), MARGIN_X, (PAGE_HEIGHT - draw_height) / 2,
                     width=draw_width, height=draw_height)


def _draw_page(canvas: Canvas, doc: Doc, page_no: int, running: str,
               styles: Mapping[str, ParagraphStyle]) -> None:
    page = doc.pages[page_no - 1]
    if page.kind == "image":
        _draw_image_page(canvas)
        return
    regular = FONT_FAMILIES[doc.font][0]
    number = folio(doc, page_no)
    if number is not None:
        canvas.setFont(regular, 8.5)
        canvas.drawString(MARGIN_X, HEADER_Y, doc.header or "")
        canvas.drawRightString(PAGE_WIDTH - MARGIN_X, HEADER_Y, running)
        canvas.setLineWidth(0.4)
        canvas.line(MARGIN_X, HEADER_Y - 5, PAGE_WIDTH - MARGIN_X, HEADER_Y - 5)
    width = PAGE_WIDTH - 2 * MARGIN_X
    frame = Frame(MARGIN_X, MARGIN_BOTTOM, width, PAGE_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM,
                  leftPadding=0, rightPadding=0, topPadding=0, bottomPadding=0)
    if page.kind == "title":
        story: list[Flowable] = [Spacer(1, 120)]
    else:
        story = []
    for block in page.blocks:
        story.extend(_flowables(block, doc, styles, width))
    frame.addFromList(story, canvas)
    if story:
        raise ValueError(f"{doc.filename}: page {page_no} overflows its text frame "
                         f"({len(story)} blocks left over); shorten that page's text")
    if number is not None:
        canvas.setFont(regular, 9)
        canvas.drawCentredString(PAGE_WIDTH / 2, FOOTER_Y, f"{doc.folio_label} {number}")


def build_pdf(doc: Doc) -> bytes:
    """Render `doc` to PDF bytes, one markup page per physical page."""
    buffer = io.BytesIO()
    canvas = Canvas(buffer, pagesize=A4, invariant=1, pageCompression=1)
    canvas.setTitle(doc.title)
    canvas.setAuthor(PDF_AUTHOR)
    canvas.setSubject(doc.subject)
    canvas.setCreator(PDF_CREATOR)
    styles = _styles(doc.font)
    for page_no, running in enumerate(running_titles(doc), start=1):
        _draw_page(canvas, doc, page_no, running, styles)
        canvas.showPage()
    canvas.save()
    return buffer.getvalue()


# --------------------------------------------------------------------------------------------
# Document 1: options pricing (English; front matter, numbered equations, index)

OPTIONS_SOURCE = r"""
=== title
! Options Pricing: Lecture Notes

!! Chapters 20 to 22: From Payoffs to the Greek Letters

>> 40

^ Course notes for Derivatives I

^ Sample corpus for localRAG. Original text, free to use and redistribute.

^ Edition 2024

=== toc
# Contents

@toc

## About these notes

These notes accompany a one-semester course on derivatives. They assume calculus and an
introductory course in probability, and they develop the theory in three steps: the payoffs
and no-arbitrage relations that hold in any model, the Black-Scholes-Merton model for which
Robert Merton and Myron Scholes received the Nobel prize in economics in 1997 (Fischer Black
had died two years earlier), and the Greek letters that traders use to manage the risk of an
option book. Equations are numbered within each chapter, so Equation 20.4 is the fourth
equation of Chapter 20. Page numbers refer to the printed numbers at the foot of each page;
the title page and this page are not numbered.

=== body
# Chapter 20 · Option Basics and No-Arbitrage Bounds

## 20.1 Calls, puts and payoffs

An option is a contract that gives its holder a right but never an obligation. A call option
gives the right to buy an underlying asset for a fixed price, the strike price K, while a put
option gives the right to sell it for K. The date on which the right lapses is the expiration
date T. A European option can be exercised only on that date; an American option can be
exercised at any time up to and including it. The holder pays a premium up front for this
flexibility, and the party on the other side, the writer, collects the premium and accepts
the obligation to deliver or take delivery if the holder decides to exercise.

Because exercise is voluntary, the holder exercises only when doing so is profitable. If S_T
denotes the price of the underlying at expiration, the payoffs of a long European call and of
a long European put are

$ payoff(call) = max(S_T - K, 0) @ 20.1
$ payoff(put) = max(K - S_T, 0) @ 20.2

Equation 20.1 and Equation 20.2 describe payoffs, not profits: to obtain the profit one
subtracts the premium paid, compounded to the expiration date. The writer's payoff is the
negative of the holder's, which is why writing uncovered calls exposes a trader to losses
without limit while the largest possible gain is the premium received.

Traders describe the relation between the current price S and the strike with the word
moneyness. A call is in the money when S > K, at the money when S is close to K and out of
the money when S < K; for puts the inequalities are reversed. The amount a holder would
receive by exercising immediately, max(S - K, 0) for a call, is called the intrinsic value.
Whatever the option costs above its intrinsic value is its time value, a payment for the
chance that the price moves further in the holder's favour before expiration. Time value is
largest for options at the money and shrinks to zero as expiration approaches.

terms: American option; call option; European option; intrinsic value; moneyness; payoff;
put option; strike price; time value

=== body
## 20.2 Bounds and put-call parity

Arguments that rely only on the absence of arbitrage give limits on option prices that hold
whatever model one believes in. Throughout this section c and p denote the prices of a
European call and put on a stock that pays no dividends, S0 the current stock price and r the
continuously compounded risk-free rate for maturity T. A call can never be worth more than
the stock it entitles its holder to buy, and a put never more than the present value of the
strike it can at best deliver. From below, each is bounded by the value of a forward-like
position:

$ S0 - K e^(-rT) <= c <= S0 @ 20.3
$ K e^(-rT) - S0 <= p <= K e^(-rT) @ 20.4

To see the lower bound in Equation 20.3, compare a portfolio of one call plus cash of
K e^(-rT) with a portfolio holding one share. At expiration the first is worth max(S_T, K)
and the second S_T, so the first can never be worth less today.

The same two-portfolio comparison yields the most useful identity of the chapter. Portfolio A
holds one European call and a zero-coupon bond paying K at time T; portfolio B holds one
European put and one share. Both are worth max(S_T, K) at expiration, and because European
options cannot be exercised early they must have the same value today:

$ c + K e^(-rT) = p + S0 @ 20.5

Equation 20.5 is known as put-call parity. It lets a trader derive the price of a put from
the price of the call with the same strike and expiration, or detect mispricing when quotes
violate it. Example: with S0 = 50, K = 50, r = 5% per annum and T = 0.5 years the bond is
worth 50 e^(-0.025) = 48.77. If the call trades at 4.20, parity implies a put price of
4.20 + 48.77 - 50 = 2.97. A put quoted at 3.40 would be too expensive: selling the put,
buying the call, shorting the share and investing the proceeds locks in 0.43 without risk.

For American options parity weakens to a pair of inequalities,
S0 - K <= C - P <= S0 - K e^(-rT), because the right to exercise early has value for puts.

terms: arbitrage; put-call parity; zero-coupon bond

=== body
## 20.3 The one-step binomial model

The binomial model replaces the continuous path of a stock with a tree. Over a short interval
dt the price either moves up from S to S u or down to S d, where u > 1 > d. An option whose
values in the two states are f_u and f_d can be replicated with a position in the stock and
the bond, so its price follows without any assumption about the probability of an up move.

Hold h shares and sell one option. The position is riskless when S u h - f_u = S d h - f_d,
that is for the hedge ratio h = (f_u - f_d) / (S u - S d). A riskless position must earn the
risk-free rate, and solving for the option value gives

$ f = e^(-r dt) [ q f_u + (1 - q) f_d ] @ 20.6
$ q = (e^(r dt) - d) / (u - d) @ 20.7

The number q lies between zero and one and can be read as the probability of an up move in a
world where every investor is indifferent to risk. Equation 20.6 therefore says that the
option is worth its expected payoff under q, discounted at the risk-free rate. This
principle, risk-neutral valuation, carries over unchanged to the continuous-time model of
Chapter 21. The real-world probability of an up move, and with it the expected return of the
stock, does not appear at all.

Worked example. A stock trades at 40 and will be either 44 or 36 in six months (u = 1.1,
d = 0.9). The risk-free rate is 8% per annum with continuous compounding. A European call
with strike 41 pays 3 in the up state and nothing in the down state. The hedge ratio is
h = 3 / (44 - 36) = 0.375 shares per option, q = (e^(0.04) - 0.9) / 0.2 = 0.7041, and the
call is worth e^(-0.04) × 0.7041 × 3 = 2.03.

Multi-step trees are built by repeating the step. Cox, Ross and Rubinstein (1979) chose the
factors so that the tree matches the volatility sigma of the stock:

$ u = e^(sigma sqrt(dt)),   d = 1 / u @ 20.8

As the number of steps grows, the price of a European option in such a tree converges to the
Black-Scholes-Merton price derived in the next chapter.

terms: binomial model; Cox, Ross and Rubinstein; hedge ratio; risk-neutral valuation

=== body
# Chapter 21 · The Black-Scholes-Merton Model

## 21.1 Origins and assumptions

In 1973 Fischer Black and Myron Scholes published a formula for the price of a European
option on a non-dividend-paying stock, and in the same year Robert Merton published a
derivation that relaxed several assumptions and extended the result to dividends. The model
is therefore called the Black-Scholes-Merton model, or BSM. Its influence on practice was
immediate, since the Chicago Board Options Exchange had opened in the same year. In 1997
Merton and Scholes received the Nobel prize in economics for this work; Black had died in
1995, and the prize is not awarded posthumously.

The derivation rests on a small set of assumptions, each of which later research relaxed:

- The stock price follows geometric Brownian motion with constant expected return mu and
  constant volatility sigma.
- Short selling of securities with full use of the proceeds is permitted.
- There are no transaction costs or taxes, and all securities are perfectly divisible.
- The stock pays no dividends during the life of the option.
- There are no riskless arbitrage opportunities, and trading takes place continuously.
- The risk-free rate r is constant and the same for all maturities.

Under the first assumption, the change dS of the stock price over an instant dt is

$ dS = mu S dt + sigma S dz @ 21.1

where dz is the increment of a Wiener process: over an interval dt it is normally distributed
with mean zero and variance dt, and increments over non-overlapping intervals are
independent. A discrete-time version, used in Monte Carlo simulation, replaces dz by
epsilon sqrt(dt), with epsilon drawn from a standard normal distribution:

$ dS / S = mu dt + sigma epsilon sqrt(dt) @ 21.2

The first term is the expected return over the interval and the second its random part.
Volatility sigma is the standard deviation of the return per unit of time, quoted per annum.

terms: Black-Scholes-Merton model; geometric Brownian motion; Monte Carlo simulation;
Nobel prize; volatility; Wiener process

=== body
## 21.2 The lognormal property

Applying Ito's lemma to ln S shows that the logarithm of the stock price follows a
generalised Wiener process with constant drift mu - sigma^2/2 and variance rate sigma^2.
Consequently the logarithm of the price at time T is normally distributed:

$ ln S_T ~ N( ln S0 + (mu - sigma^2/2) T,  sigma^2 T ) @ 21.3

A variable whose logarithm is normal is called lognormal. It can take any positive value but
never a negative one, and its distribution is skewed to the right. Its mean and variance are

$ E(S_T) = S0 e^(mu T) @ 21.4
$ var(S_T) = S0^2 e^(2 mu T) [ e^(sigma^2 T) - 1 ] @ 21.5

Example: a stock with S0 = 40, an expected return of 16% per annum and a volatility of 20% per
annum is considered over six months. The mean of ln S_T is ln 40 + (0.16 - 0.02) × 0.5 = 3.759
and its standard deviation is 0.2 × sqrt(0.5) = 0.141. With 95% probability ln S_T lies
within 1.96 standard deviations of its mean, so the price in six months will lie between
e^(3.482) = 32.51 and e^(4.036) = 56.60. The expected price is 40 e^(0.08) = 43.33.

The continuously compounded return realised between today and T, x = (1/T) ln(S_T / S0), is
normally distributed as well:

$ x ~ N( mu - sigma^2/2,  sigma^2 / T ) @ 21.6

Equation 21.6 explains a result that often surprises students: the expected continuously
compounded return is mu - sigma^2/2, not mu. The difference is the gap between an arithmetic
and a geometric average. A fund that earns +25% in one year and -20% in the next has an
arithmetic mean return of 2.5% but ends exactly where it started, and the longer the horizon,
the more the geometric figure governs what an investor actually earns. The uncertainty of x
shrinks as T grows, because its standard deviation is sigma / sqrt(T).

terms: continuously compounded return; Ito's lemma; lognormal

=== body
## 21.3 The Black-Scholes-Merton differential equation

Black, Scholes and Merton observed that a derivative and its underlying stock are driven by
the same source of uncertainty dz. Over a short period the derivative price f(S, t) is
perfectly correlated with S, so a suitable combination of the two is instantaneously
riskless. Below, subscripts denote partial derivatives: f_S is the first derivative with
respect to S, f_SS the second and f_t the derivative with respect to time. By Ito's lemma

$ df = ( mu S f_S + f_t + 0.5 sigma^2 S^2 f_SS ) dt + sigma S f_S dz @ 21.7

Form a portfolio that is short one derivative and long f_S shares. Its value is

$ Pi = -f + f_S S @ 21.8

Over an interval dt the dz terms of the two positions cancel exactly, leaving

$ dPi = ( -f_t - 0.5 sigma^2 S^2 f_SS ) dt @ 21.9

Because the portfolio carries no risk over dt, the absence of arbitrage requires that it earn
the risk-free rate, dPi = r Pi dt. Substituting Equation 21.8 and Equation 21.9 and
rearranging gives the Black-Scholes-Merton partial differential equation:

$ f_t + r S f_S + 0.5 sigma^2 S^2 f_SS = r f @ 21.10

Every derivative whose price depends only on S and t satisfies Equation 21.10; the contracts
differ only in their boundary conditions. For a European call the condition is
f = max(S - K, 0) at t = T, for a European put f = max(K - S, 0). The portfolio is riskless
only for an instant: as S and t change, f_S changes and the position must be rebalanced.

The most remarkable feature of the equation is what it lacks. The expected return mu, which
depends on investors' attitude to risk, has cancelled. A world in which all investors are
risk neutral therefore yields the same prices as the real world, and one may value any
derivative by assuming that the stock earns r and discounting the expected payoff at r. This
is the continuous-time form of the risk-neutral valuation argument met in Section 20.3.

terms: Black-Scholes-Merton differential equation; boundary condition; Ito's lemma;
risk-neutral valuation

=== body
## 21.4 The pricing formulas

Solving Equation 21.10 with the boundary condition of a European call, or equivalently
computing the discounted risk-neutral expectation of the payoff, gives the
Black-Scholes-Merton formulas for options on a non-dividend-paying stock:

$ c = S0 N(d1) - K e^(-rT) N(d2) @ 21.11
$ p = K e^(-rT) N(-d2) - S0 N(-d1) @ 21.12
$ d1 = [ ln(S0 / K) + (r + sigma^2/2) T ] / ( sigma sqrt(T) ) @ 21.13
$ d2 = d1 - sigma sqrt(T) @ 21.14

Here N(x) is the cumulative distribution function of the standard normal distribution: the
probability that a standard normal variable is less than x. The terms have an intuitive
reading. N(d2) is the probability, in the risk-neutral world, that the call is exercised, so
K e^(-rT) N(d2) is the present value of the strike payment weighted by that probability. The
factor N(d1) equals the delta of a European call on a non-dividend-paying stock, the number
of shares needed to hedge one written call; S0 N(d1) is the present value of receiving the
stock in exactly those states in which exercise happens.

Worked example. Let S0 = 100, K = 95, r = 4% per annum, sigma = 25% per annum and T = 0.75
years. Then sigma sqrt(T) = 0.2165, d1 = [ln(100/95) + (0.04 + 0.03125) × 0.75] / 0.2165 =
0.4837 and d2 = 0.2672. With N(0.4837) = 0.6857 and N(0.2672) = 0.6054 the call is worth
c = 100 × 0.6857 - 95 e^(-0.03) × 0.6054 = 12.76 and the put p = 4.95. The two values
satisfy put-call parity, Equation 20.5.

Two limiting cases confirm the formulas. When S0 is very large relative to K, d1 and d2
become large, N(d1) and N(d2) approach one and the call is worth S0 - K e^(-rT), the value of
a forward contract with delivery price K. When volatility approaches zero the stock grows at
r with certainty and the call is worth max(S0 - K e^(-rT), 0).

terms: Black-Scholes-Merton formula; cumulative distribution function; delta

=== body
## 21.5 Dividends, indices and currencies

Real stocks pay dividends, and on the ex-dividend date the share price falls by roughly the
amount paid. For European options the adjustment is simple when the dividends during the
life of the option can be predicted. The stock price is split into a riskless part, the
present value of the dividends, and a risky remainder, and the formulas are applied to the
remainder:

$ S0* = S0 - D1 e^(-r t1) - D2 e^(-r t2) - ... @ 21.15

where D_i is the dividend paid at time t_i. The volatility to use is that of the risky part,
which is somewhat higher than the volatility of the whole share price.

For a stock index a continuous dividend yield q is the better description. Merton showed that
an asset paying a yield q behaves like one paying none whose price is reduced from S0 to
S0 e^(-qT). The call formula becomes

$ c = S0 e^(-qT) N(d1) - K e^(-rT) N(d2) @ 21.16
$ d1 = [ ln(S0 / K) + (r - q + sigma^2/2) T ] / ( sigma sqrt(T) ),   d2 = d1 - sigma sqrt(T) @ 21.17

A foreign currency fits the same pattern, because holding it earns the foreign risk-free rate
r_f, which plays the role of the dividend yield. Setting q = r_f in Equation 21.16 gives the
Garman-Kohlhagen model, published by Mark Garman and Steven Kohlhagen in 1983:

$ c = S0 e^(-r_f T) N(d1) - K e^(-rT) N(d2) @ 21.18

where S0 is the spot exchange rate, expressed in units of domestic currency per unit of
foreign currency.

American calls on dividend-paying stocks may be worth exercising early, but only immediately
before an ex-dividend date, since only then does the holder capture a payment that would
otherwise be lost. Fischer Black proposed a simple approximation: compute European prices for
options expiring at T and just before each ex-dividend date, and take the largest.

terms: dividend yield; ex-dividend date; foreign currency; Garman-Kohlhagen model;
stock index

=== body
## 21.6 Estimating volatility

All inputs of the pricing formulas except one can be observed directly: the stock price, the
strike, the time to expiration and the risk-free rate. The exception is volatility. The
historical volatility is estimated from past prices S0, S1, ..., Sn observed at fixed
intervals of tau years. With the returns u_i, their mean u_bar and their sample standard
deviation s,

$ u_i = ln( S_i / S_(i-1) ) @ 21.19
$ u_bar = (1/n) sum_i u_i @ 21.20
$ s = sqrt( (1/(n-1)) sum_i ( u_i - u_bar )^2 ) @ 21.21

the volatility per annum is estimated as

$ sigma_hat = s / sqrt(tau) @ 21.22

Exchanges are closed on weekends and holidays, and practitioners count only trading days, so
with daily closing prices tau = 1/252 and the daily standard deviation is multiplied by
sqrt(252), about 15.9. A daily standard deviation of 1.2% thus corresponds to an annual
volatility of about 19%. Older data improve the accuracy of the estimate, but volatility
itself changes over time, so prices from more than 90 to 180 days back may describe another
regime.

The second approach reads volatility from option prices. The implied volatility of an option
is the value sigma_imp that solves

$ c_BSM( S0, K, r, T, sigma_imp ) = c_market @ 21.23

In words, Equation 21.23 defines implied volatility as the volatility that, inserted into the
Black-Scholes-Merton formula, reproduces the price at which the option actually trades. There
is no closed-form inverse, but the call price increases monotonically with sigma, so a
numerical search always finds the root. Newton-Raphson iteration converges in a few steps:

$ sigma_(n+1) = sigma_n - ( c_BSM(sigma_n) - c_market ) / vega(sigma_n) @ 21.24

Plotted against the strike, implied volatilities form the volatility smile.

terms: historical volatility; implied volatility; Newton-Raphson iteration; volatility smile

=== body
# Chapter 22 · The Greek Letters

A bank that sells an option to a client usually cannot buy the same option elsewhere to
offset it. It manages the risk with positions in the underlying asset and other derivatives,
and it measures that risk with a family of partial derivatives known collectively as the
Greeks. Each one measures how the value Pi of a portfolio responds to a change in one input
while all other inputs are held fixed.

## 22.1 Delta and delta hedging

Delta is the rate of change of the portfolio value with respect to the price of the
underlying asset, dPi/dS; graphically, it is the slope of the curve that relates the option
price to the stock price. For European options on a non-dividend-paying stock the
Black-Scholes-Merton model gives

$ delta(call) = N(d1) @ 22.1
$ delta(put) = N(d1) - 1 @ 22.2

so a call delta lies between 0 and 1 and a put delta between -1 and 0. For an index paying a
yield q both expressions are multiplied by e^(-qT).

Delta tells a trader how many shares to hold to neutralise small stock moves. Suppose a bank
has written 20 call contracts on 100 shares each and the delta of the call is 0.6. It buys
0.6 × 2,000 = 1,200 shares: a rise of 1 in the share price then gains 1,200 on the shares
and loses about 1,200 on the options. A portfolio whose delta is zero is called delta
neutral.

The protection is only local. As the stock price moves and time passes, delta changes, and
the hedge must be adjusted. Rebalancing at discrete intervals means that the hedger
repeatedly buys after prices have risen and sells after they have fallen; on average, the
accumulated cost of this rebalancing is close to the Black-Scholes-Merton price of the
option. The delta of a portfolio of options on one asset is the weighted sum

$ delta(portfolio) = sum_i w_i delta_i @ 22.3

where w_i is the quantity of option i held.

terms: delta; delta hedging; delta neutral; Greeks

=== body
## 22.2 Theta

Theta is the rate of change of the portfolio value with the passage of time, all else equal;
it is also called the time decay of the portfolio. For European options on a
non-dividend-paying stock

$ theta(call) = - S0 N'(d1) sigma / (2 sqrt(T)) - r K e^(-rT) N(d2) @ 22.4
$ theta(put) = - S0 N'(d1) sigma / (2 sqrt(T)) + r K e^(-rT) N(-d2) @ 22.5

where N'(x) is the density function of the standard normal distribution,

$ N'(x) = e^(-x^2/2) / sqrt(2 pi) @ 22.6

The formulas measure time in years, so theta comes out as a change per year. Traders prefer a
change per day and divide by 365 for calendar days or by 252 for trading days. For the option
of the worked example in Section 21.4 the call theta is -7.35 per year, or about -0.020 per
calendar day: with everything else unchanged, the option loses two cents of value each day.

The theta of a long option position is usually negative because, with less time remaining,
there is less opportunity for a favourable move. Exceptions are European puts deep in the
money and calls on a currency with a high foreign interest rate, whose theta can be positive.
Unlike delta, theta is not a hedge parameter in the usual sense, since there is no
uncertainty about the passage of time. It is nevertheless worth monitoring, because in a
delta-neutral portfolio theta serves as a proxy for gamma, as Section 22.3 shows.

An at-the-money option loses time value slowly at first and ever faster as expiration
approaches, while for options far in or out of the money the decay is more even. Writers of
short-dated options at the money therefore collect time value quickly, but they carry the
risk that a sudden move wipes out weeks of collected decay in a single day.

terms: density function; theta; time decay

=== body
## 22.3 Gamma

Gamma is the rate of change of delta with respect to the price of the underlying asset, the
second partial derivative of the portfolio value with respect to S. It measures the
curvature of the relation between option price and stock price, and so tells the hedger how
quickly a delta hedge goes out of date. A European call and a European put on the same
non-dividend-paying stock have the same gamma:

$ gamma = N'(d1) / ( S0 sigma sqrt(T) ) @ 22.7

In the example of Section 21.4 gamma is 0.0164: a rise of 1 in the share price lifts the call
delta of 0.686 to about 0.702. Gamma is largest for options at the money and grows sharply
as such options approach expiration, which is why hedging short-dated at-the-money options is
expensive. For a delta-neutral portfolio, a second-order Taylor expansion describes the change
in value over a short interval:

$ dPi = theta dt + 0.5 gamma dS^2 @ 22.8

A positive gamma means that the portfolio gains from large moves in either direction, a
negative gamma that it loses from them. Because the underlying asset has a gamma of zero,
trading it cannot change gamma, so a gamma-neutral position requires a traded option. If a
portfolio has gamma G and a traded option has gamma G_T, adding w_T = -G / G_T units of the
option makes the portfolio gamma neutral; its delta is then restored with shares.

Gamma, theta and delta are tied together by the differential equation. Substituting the
Greeks into Equation 21.10 gives

$ theta + r S delta + 0.5 sigma^2 S^2 gamma = r Pi @ 22.9

For a delta-neutral portfolio this reduces to theta + 0.5 sigma^2 S^2 gamma = r Pi, so a
large positive theta goes with a large negative gamma and vice versa.

terms: gamma; gamma neutral; Taylor expansion

=== body
## 22.4 Vega

The Black-Scholes-Merton model assumes constant volatility, yet in practice volatility
changes over time, and the value of an option is sensitive to those changes. Vega is the rate
of change of the portfolio value with respect to the volatility of the underlying asset. Vega
is not a letter of the Greek alphabet; some authors call the measure kappa or lambda instead,
but the name vega has become standard on trading floors. For a European call or put on a
non-dividend-paying stock

$ vega = S0 sqrt(T) N'(d1) @ 22.10

Vega is always positive for a long option: more volatility raises the chance of a large
payoff, while the loss stays limited to the premium. It is largest for options at the money
and, unlike gamma, grows with time to expiration, so long-dated options carry most of a
book's volatility exposure. For the example of Section 21.4 vega is 30.73; volatility is
quoted in percent, so traders divide by 100 and say that the option gains about 0.31 for each
percentage point by which volatility rises.

A position with large vega is highly sensitive to small changes in volatility. Like gamma,
vega can be changed only with another option. Making a portfolio both gamma neutral and vega
neutral generally needs two traded options with different strikes or maturities, because a
single option rarely has gamma and vega in the right proportion. With G and V the gamma and
vega of the existing position and G_i, V_i those of the traded options, the quantities w1
and w2 solve

$ w1 G1 + w2 G2 + G = 0,   w1 V1 + w2 V2 + V = 0 @ 22.11

Vega also explains why the search for implied volatility in Section 21.6 converges so
quickly: it is the derivative by which each Newton-Raphson step divides. Where vega is tiny,
for options deep in or out of the money close to expiration, implied volatility is poorly
determined, and quotes for such options reveal little about expected volatility.

terms: vega; vega neutral

=== body
## 22.5 Rho

Rho is the rate of change of the portfolio value with respect to the level of interest
rates. It measures exposure to a parallel shift in the risk-free rate, all other inputs held
constant. For European options on a non-dividend-paying stock

$ rho(call) = K T e^(-rT) N(d2) @ 22.12
$ rho(put) = - K T e^(-rT) N(-d2) @ 22.13

A call gains when rates rise, because the strike is paid later and its present value falls; a
put loses for the same reason. In the example of Section 21.4 the call has a rho of 41.86, or
about 0.42 for a rise of one percentage point in the rate. Rho grows with time to expiration,
which is why it is usually the least important Greek for short-dated equity options but
matters for long-dated ones. Currency options have two rhos, one for the domestic and one for
the foreign interest rate.

## 22.6 Summary

@table greeks

In practice a trader neutralises delta at least once a day with the underlying asset, since
that is cheap, and monitors gamma and vega, correcting them with options only when they
exceed agreed limits, because options are expensive to trade. Scenario analysis, which
revalues the whole book under joint moves of price and volatility, complements the Greeks
when moves are large.

terms: Greeks; rho; scenario analysis

=== index
# Index

@index
"""

OPTIONS_TABLES: dict[str, Block] = {
    "greeks": ("table", ("Greek", "Sensitivity of the value to", "Long call", "Long put"), (
        ("Delta", "price of the underlying asset", "positive", "negative"),
        ("Gamma", "change of delta with the price", "positive", "positive"),
        ("Theta", "passage of time", "usually negative", "usually negative"),
        ("Vega", "volatility", "positive", "positive"),
        ("Rho", "risk-free interest rate", "positive", "negative"),
    ), (1.0, 2.4, 1.3, 1.3), "LLLL"),
}


# --------------------------------------------------------------------------------------------
# Document 2: literary history (German, umlaut file name, "Seite N" footer)

LITERATURE_SOURCE = r"""
=== title
! Literaturgeschichte im Überblick

!! Theodor Fontane und Franz Kafka: Realismus und Moderne

^ Beispielkorpus für localRAG. Originaltext, frei verwendbar.

>> 30

## Vorbemerkung

Diese Einführung stellt zwei Autoren nebeneinander, die selten im selben Seminar behandelt
werden. Theodor Fontane, der märkische Apotheker, Journalist und späte Romancier, gilt als
Meister des deutschen Gesellschaftsromans im bürgerlichen Realismus. Franz Kafka, der Prager
Versicherungsjurist, schrieb wenige Jahre nach Fontanes Tod Erzählungen, die zu Grundtexten
der literarischen Moderne wurden. Zwischen den Buchausgaben von „Effi Briest“ und der
„Verwandlung“ liegen kaum zwanzig Jahre, und doch scheinen die Texte aus verschiedenen Welten
zu stammen. Die folgenden Kapitel fragen, worin dieser Unterschied besteht und wo sich
überraschende Gemeinsamkeiten zeigen. Jedes Kapitel ist in sich geschlossen; ein Glossar
erzähltheoretischer Grundbegriffe am Ende erleichtert die Wiederholung.

=== body
# 1 Realismus und Moderne

Als bürgerlicher oder poetischer Realismus wird die Epoche der deutschsprachigen Literatur
bezeichnet, die etwa von der gescheiterten Revolution von 1848 bis gegen 1890 reicht. Ihre
Autoren, neben Fontane etwa Gottfried Keller, Theodor Storm und Wilhelm Raabe, wollten die
Wirklichkeit ihrer Zeit darstellen, aber nicht bloß abbilden. Das Hässliche und Elende sollte
nicht im Vordergrund stehen; die Kunst hatte die Wirklichkeit zu „verklären“, also das
Wesentliche und Bedeutsame an ihr sichtbar zu machen. Bevorzugte Gattungen waren die Novelle
und der Roman, bevorzugte Schauplätze die Provinz, das Bürgerhaus und der Gutshof.

Die Moderne, die man grob um 1890 beginnen lässt, stellt gerade diese Gewissheiten in Frage.
Naturalismus, Symbolismus, Expressionismus und die Wiener Moderne sind sehr verschiedene
Strömungen, teilen aber das Misstrauen gegenüber einer Sprache, die Welt und Ich verlässlich
zu erfassen scheint. Hugo von Hofmannsthal hat diese Sprachkrise 1902 im sogenannten
Chandos-Brief gestaltet: Der fiktive Briefschreiber berichtet, die abstrakten Worte seien ihm
im Munde zerfallen „wie modrige Pilze“.

Für die Erzählliteratur bedeutet der Epochenwechsel vor allem eine Verschiebung der
Perspektive. Der realistische Roman vertraut noch weitgehend auf einen Erzähler, der Figuren
und Gesellschaft überblickt, auch wenn er sich, wie bei Fontane, diskret zurückhält. In der
Moderne verengt sich der Blick oft auf ein einzelnes Bewusstsein, dessen Wahrnehmung nicht
mehr von außen korrigiert wird. Bei Kafka wird dieses Verfahren zum Prinzip: Der Leser weiß
kaum mehr als die Hauptfigur und kann deren Verwirrung nicht auflösen.

Wer die beiden Epochen vergleicht, sollte die Grenze nicht zu scharf ziehen. Fontanes späte
Romane entstanden in den 1890er Jahren, also bereits in der Zeit der frühen Moderne, und ihre
Kunst der Andeutung weist in vieler Hinsicht über den Realismus hinaus. Umgekehrt erzählt
Kafka seine unerhörten Begebenheiten in einer klaren, fast amtlichen Prosa, die mit der
Sprachskepsis seiner Zeitgenossen wenig gemein zu haben scheint.

=== body
# 2 Theodor Fontane

## 2.1 Lebensweg

Theodor Fontane wurde am 30. Dezember 1819 in Neuruppin geboren, als Sohn eines Apothekers
aus einer Familie hugenottischer Herkunft. Er erlernte selbst den Apothekerberuf und arbeitete
einige Jahre in Apotheken in Leipzig, Dresden und Berlin, bevor er sich 1849 ganz dem
Schreiben zuwandte. Literarisch trat er zunächst als Balladendichter hervor; Gedichte wie
„Archibald Douglas“ und später „Herr von Ribbeck auf Ribbeck im Havelland“ machten ihn
bekannt.

Den Lebensunterhalt verdiente er lange als Journalist. In den 1850er Jahren lebte er mehrere
Jahre als Korrespondent in London, danach arbeitete er für die konservative „Kreuzzeitung“.
Er begleitete die preußischen Kriege als Berichterstatter und geriet 1870 in Frankreich unter
Spionageverdacht für mehrere Wochen in Gefangenschaft. Von 1870 bis 1889 schrieb er
Theaterkritiken für die liberale „Vossische Zeitung“ und wurde zu einem der einflussreichsten
Kritiker Berlins.

Aus seinen Reisen durch die Landschaften um Berlin gingen die „Wanderungen durch die Mark
Brandenburg“ hervor, die zwischen 1862 und 1889 in mehreren Bänden erschienen. Sie verbinden
Landschaftsschilderung, Anekdote und die Geschichte des märkischen Adels und bildeten einen
Fundus, aus dem der spätere Romancier schöpfte.

Erst mit fast sechzig Jahren veröffentlichte Fontane 1878 seinen ersten Roman, „Vor dem
Sturm“. In den folgenden zwei Jahrzehnten entstand in rascher Folge das Werk, das seinen Ruhm
begründet: „L'Adultera“, „Irrungen, Wirrungen“, „Frau Jenny Treibel“, „Effi Briest“ und „Der
Stechlin“. Fontane starb am 20. September 1898 in Berlin. Sein Spätstil, ironisch, gesprächig
und voller Nachsicht mit seinen Figuren, ließ ihn vielen Zeitgenossen jünger erscheinen als
die jungen Naturalisten, die ihn als einen der Ihren verehrten.

=== body
## 2.2 Effi Briest

„Effi Briest“ erschien zuerst 1894/95 in Fortsetzungen in der Zeitschrift „Deutsche
Rundschau“; die Buchausgabe folgte 1896 und wurde Fontanes größter Publikumserfolg. Der
Roman erzählt die Geschichte einer jungen Frau aus dem märkischen Landadel, die mit siebzehn
Jahren den mehr als doppelt so alten Baron Geert von Innstetten heiratet, einen ehrgeizigen
Beamten, der einst um ihre Mutter geworben hatte.

Innstetten ist Landrat in Kessin, einem fiktiven Städtchen an der Ostsee. Effi langweilt sich
dort, fürchtet sich vor einem angeblichen Spuk im Haus, der Geschichte eines verstorbenen
Chinesen, und fühlt sich von ihrem Mann, der den Spuk eher pädagogisch nutzt als vertreibt,
allein gelassen. In dieser Lage lässt sie sich auf eine Affäre mit dem Bezirkskommandanten
Major von Crampas ein, einem charmanten Frauenhelden. Die Beziehung endet, als Innstetten
nach Berlin versetzt wird.

Jahre später findet Innstetten zufällig die Briefe, die Crampas einst an Effi geschrieben
hatte. Obwohl er selbst spürt, dass die Sache lange zurückliegt und er seine Frau noch liebt,
fordert er Crampas zum Duell und tötet ihn. Er beruft sich auf ein
„Gesellschafts-Etwas“, das ihn zwinge, ganz gleich, was er empfinde. Effi wird geschieden,
von ihrer Tochter Annie getrennt und zunächst sogar von den eigenen Eltern verstoßen. Erst
als sie schwer erkrankt, holen die Eltern sie nach Hohen-Cremmen zurück, wo sie jung stirbt.

Der Roman kritisiert den starren Ehrenkodex der preußischen Gesellschaft, ohne die Figuren zu
verurteilen. Auch Innstetten erscheint nicht als Bösewicht, sondern als Gefangener seiner
Prinzipien. Als Effis Mutter am Ende fragt, ob nicht auch sie und ihr Mann Schuld tragen,
weicht der alte Briest mit seiner stehenden Redensart aus, das sei „ein zu weites Feld“. Die
Wendung ist sprichwörtlich geworden.

=== body
## 2.3 Der Stechlin und die Kunst des Gesprächs

Fontanes letzter Roman, „Der Stechlin“, erschien 1897/98 zunächst in der Zeitschrift „Über
Land und Meer“ und im Herbst 1898, kurz nach dem Tod des Autors, als Buch. Die Handlung ist
denkbar knapp. Fontane selbst hat sie sinngemäß so zusammengefasst: Am Ende stirbt ein Alter,
und zwei Junge heiraten; viel mehr geschehe auf den vielen hundert Seiten nicht.

Der Alte ist Dubslav von Stechlin, ein verwitweter Major a. D., der auf seinem märkischen Gut
am See Stechlin lebt. Der See gilt in der Gegend als geheimnisvoll: Wenn irgendwo in der Welt
ein großes Ereignis geschieht, etwa ein Vulkanausbruch auf Island oder Java, soll auf ihm ein
Wasserstrahl aufsteigen, und in besonderen Fällen steigt ein roter Hahn aus der Tiefe. Das
Motiv verbindet die abgelegene Provinz mit dem Weltgeschehen und wird zum Sinnbild dafür,
dass sich auch das scheinbar Beständige dem Wandel nicht entziehen kann.

Woldemar, Dubslavs Sohn, verlobt sich mit Armgard von Barby aus einer weltläufigen Berliner
Familie; ihre ältere Schwester Melusine ist die geistreichste Gesprächspartnerin des Romans.
Eine Reichstagswahl, bei der Dubslav als konservativer Kandidat gegen einen Sozialdemokraten
verliert, bringt die politischen Spannungen der Zeit ins Spiel.

Das eigentliche Ereignis des Romans ist jedoch das Gespräch. Fontane entwickelt die Kunst der
Causerie, des geselligen Plauderns, zu einem Erzählverfahren, in dem sich Weltanschauungen in
Nebensätzen, Pointen und Anekdoten begegnen. Dubslav, der skeptische Konservative, zeigt sich
dabei offener für das Neue als viele Jüngere; von ihm stammt die Einsicht, unanfechtbare
Wahrheiten gebe es eigentlich nicht. Der Roman lässt offen, ob die alte Adelswelt untergehen
oder sich verwandeln wird, und gerade diese Offenheit macht ihn für heutige Leser reizvoll.

=== body
## 2.4 Fontanes Realismus: Verklärung und Andeutung

Seine Vorstellung vom Realismus hat Fontane früh formuliert, in dem Aufsatz „Unsere lyrische
und epische Poesie seit 1848“ aus dem Jahr 1853. Realismus bedeutet dort nicht das nackte
Wiedergeben des alltäglichen Lebens und am wenigsten seines Elends. Er sei vielmehr die
„Widerspiegelung alles wirklichen Lebens“ im Element der Kunst. Das Kunstwerk wählt aus,
ordnet und verklärt, und erst dadurch wird das Wirkliche erkennbar.

In den Romanen zeigt sich diese Haltung vor allem als Kunst der Andeutung. Entscheidende
Ereignisse werden oft ausgespart oder nur indirekt berichtet. Den Ehebruch in „Effi Briest“
erfährt der Leser aus Andeutungen, Symbolen und Gesprächsfetzen, nicht aus einer
ausgeführten Szene. Dingsymbole übernehmen Deutungsarbeit: Die Schaukel im elterlichen Garten
steht für Effis Übermut und ihre Sehnsucht nach Freiheit, der Spuk im Kessiner Haus für Angst
und Kontrolle.

Charakteristisch ist ferner die Figurenrede. Fontanes Figuren charakterisieren sich selbst
durch ihre Art zu sprechen, durch Lieblingswendungen, Ausweichmanöver und Zitate. Der
Erzähler urteilt selten ausdrücklich; er ordnet die Gespräche so an, dass der Leser die
Urteile selbst fällt. Diese Zurückhaltung hat Fontane den Ruf eingetragen, ein Meister der
Ironie zu sein, einer Ironie freilich, die selten verletzt.

Im Mittelpunkt vieler Romane stehen Frauenfiguren, deren Lebensansprüche mit
gesellschaftlichen Regeln kollidieren: Lene Nimptsch in „Irrungen, Wirrungen“ (1888), die
Kommerzienrätin in „Frau Jenny Treibel“ (1892), Effi Briest. Fontane schildert die Macht der
Konventionen genau, ohne ein einfaches Gegenmodell anzubieten. Das macht seine Romane für die
Forschung zum Gesellschaftsroman bis heute ergiebig.

=== body
# 3 Franz Kafka

## 3.1 Lebensweg

Franz Kafka wurde am 3. Juli 1883 in Prag geboren, das damals zu Österreich-Ungarn gehörte.
Er wuchs in einer deutschsprachigen jüdischen Kaufmannsfamilie auf; das Verhältnis zum
übermächtigen Vater Hermann Kafka, einem Galanteriewarenhändler, prägte sein Leben und Werk.
Im „Brief an den Vater“ von 1919, der den Adressaten nie erreichte, hat Kafka diese Beziehung
in einer langen Anklage und Selbstanalyse zu fassen versucht.

Nach dem Studium der Rechte und der Promotion 1906 trat Kafka 1908 in die halbstaatliche
Arbeiter-Unfall-Versicherungs-Anstalt für das Königreich Böhmen ein, wo er bis zu seiner
Pensionierung 1922 tätig war, zuletzt in gehobener Stellung. Er schrieb Gutachten über
Unfallverhütung in Fabriken und Steinbrüchen; die Welt der Akten, Instanzen und
Zuständigkeiten kannte er also aus eigener Anschauung. Geschrieben hat er vor allem nachts.

Kafkas Privatleben war von Bindungsangst und Selbstzweifeln bestimmt. Mit Felice Bauer war er
zweimal verlobt, beide Verlobungen löste er wieder. 1917 wurde bei ihm Lungentuberkulose
festgestellt. In seinen letzten Monaten lebte er mit Dora Diamant in Berlin. Er starb am
3. Juni 1924 im Sanatorium Kierling bei Klosterneuburg, nicht weit von Wien.

Zu Lebzeiten veröffentlichte Kafka nur schmale Bände wie „Betrachtung“, „Das Urteil“, „Die
Verwandlung“ und „Ein Landarzt“; „Ein Hungerkünstler“ erschien kurz nach seinem Tod. Seinem
Freund Max Brod hinterließ er die Anweisung, alle übrigen Manuskripte zu verbrennen. Brod
setzte sich darüber hinweg und gab aus dem Nachlass die Romane „Der Process“ (bei Brod „Der
Prozess“, 1925), „Das Schloss“ (1926) und „Der Verschollene“, den er „Amerika“ nannte (1927),
heraus. Ohne diese Entscheidung wäre der größte Teil des Werks verloren.

=== body
## 3.2 Die Verwandlung

Die Erzählung „Die Verwandlung“ entstand Ende 1912 und erschien 1915. Ihr erster Satz gehört
zu den bekanntesten der deutschen Literatur: Der Handlungsreisende Gregor Samsa erwacht eines
Morgens aus unruhigen Träumen und findet sich in seinem Bett zu einem „ungeheueren
Ungeziefer“ verwandelt. Bemerkenswert ist weniger das Unglaubliche selbst als die Art, wie es
erzählt wird: nüchtern, genau und ohne Erklärung. Gregor sorgt sich zunächst vor allem darum,
dass er den Zug verpasst und seine Stelle verlieren könnte.

Gregor hat mit seinem Verdienst die verschuldete Familie allein ernährt. Nach der Verwandlung
kehrt sich das Verhältnis um: Der Vater nimmt eine Stelle als Bankdiener an, die Mutter näht
Wäsche für ein Modegeschäft, die Schwester Grete arbeitet als Verkäuferin, und man nimmt drei
Zimmerherren auf. Anfangs versorgt Grete den Bruder mit Essen, doch ihre Fürsorge erlahmt.
Bei einem Ausbruch Gregors bombardiert ihn der Vater mit Äpfeln; einer bleibt in seinem Rücken
stecken und entzündet sich.

Als Gregor, angelockt vom Violinspiel der Schwester, sein Zimmer verlässt und die Zimmerherren
ihn sehen, erklärt Grete, man müsse versuchen, „es“ loszuwerden. Gregor stirbt in derselben
Nacht. Die Familie fühlt sich erleichtert, nimmt sich einen freien Tag und fährt mit der
Elektrischen ins Freie; am Ende bemerken die Eltern, dass ihre Tochter zu einem schönen und
üppigen Mädchen aufgeblüht ist.

Die Erzählung wurde biografisch, psychoanalytisch, sozialgeschichtlich und
existenzphilosophisch gedeutet. Die Verwandlung lässt sich als Bild für Entfremdung in der
Arbeitswelt lesen, für Krankheit und Pflegebedürftigkeit oder für die Lage eines Sohnes, der
sich von der Familie als Last empfunden fühlt. Kafka selbst bat den Verlag, das Insekt auf
dem Umschlag auf keinen Fall abzubilden. Das Ungeziefer bleibt so unbestimmt, dass jede
Festlegung die Erzählung ärmer machen würde.

=== body
## 3.3 Der Process und die Türhüterlegende

„Der Process“ entstand 1914 und 1915 und blieb Fragment; Max Brod ordnete die Kapitel und
veröffentlichte den Roman 1925. Josef K., Prokurist einer Bank, wird am Morgen seines
dreißigsten Geburtstags verhaftet, ohne dass er erfährt, was ihm vorgeworfen wird. Er bleibt
auf freiem Fuß und geht weiter seiner Arbeit nach, doch das Verfahren durchdringt allmählich
sein ganzes Leben.

Das Gericht ist nirgends und überall. Es tagt auf Dachböden von Mietshäusern in den
Vorstädten, seine Akten sind unzugänglich, seine Beamten kennen jeweils nur ihren kleinen
Ausschnitt des Verfahrens. Josef K. sucht Hilfe bei einem Advokaten, einem Gerichtsmaler und
bei Frauen, die Einfluss zu haben scheinen, und verstrickt sich dabei immer tiefer. Am
Vorabend seines einunddreißigsten Geburtstags holen ihn zwei Herren ab und töten ihn in einem
Steinbruch.

Im Kapitel „Im Dom“ erzählt ein Geistlicher Josef K. die Legende „Vor dem Gesetz“, die Kafka
schon 1915 gesondert veröffentlicht hatte. Ein Mann vom Lande bittet einen Türhüter um
Einlass in das Gesetz. Der Türhüter sagt, jetzt könne er ihn nicht einlassen, später
vielleicht. Der Mann wartet Tage und Jahre vor der offenen Tür, versucht den Türhüter zu
bestechen und wird alt. Kurz vor seinem Tod fragt er, warum in all den Jahren niemand außer
ihm Einlass verlangt habe. Der Türhüter antwortet, dieser Eingang sei nur für ihn bestimmt
gewesen, und nun gehe er und schließe ihn.

Der Geistliche und Josef K. erörtern anschließend mehrere Auslegungen, ohne zu einem Ergebnis
zu kommen. Die Szene ist damit ein Modell für die Lektüre Kafkas überhaupt: Der Text fordert
zur Deutung heraus und entzieht sich jeder endgültigen Auslegung. Die Forschung hat die
Legende auf das jüdische Gesetz, auf die Bürokratie, auf Schuld und auf das Verhältnis von
Leser und Text bezogen.

=== body
# 4 Wirkung und Vergleich

Beide Autoren haben eine außergewöhnlich reiche Wirkungsgeschichte. Fontane wurde schon zu
Lebzeiten viel gelesen, galt aber lange als liebenswürdiger Plauderer. Thomas Mann gehörte zu
denen, die seine Modernität früh erkannten; sein Essay „Der alte Fontane“ von 1910 hat das
Bild des ironischen, altersweisen Erzählers geprägt. Rainer Werner Fassbinder verfilmte „Effi
Briest“ 1974 in strengem Schwarz-Weiß. Günter Grass gab seinem Roman über die Zeit der
deutschen Einheit 1995 den Titel „Ein weites Feld“ und griff damit die Redensart des alten
Briest auf, mit der dieser jede unbequeme Frage beiseiteschiebt.

Kafkas Ruhm setzte erst nach seinem Tod ein, dann aber weltweit. In vielen Sprachen bezeichnet
das Adjektiv „kafkaesk“ eine Lage, in der ein Mensch undurchschaubaren, anonymen Mächten
ausgeliefert ist, besonders einer Bürokratie, die keine Gründe nennt. Albert Camus las Kafka
als Dichter des Absurden; Gilles Deleuze und Félix Guattari deuteten sein Werk 1975 als
„kleine Literatur“, die eine große Sprache von innen verfremdet.

Stellt man die beiden nebeneinander, zeigen sich neben den Gegensätzen überraschende
Verbindungen. Bei beiden geraten Einzelne unter die Räder einer Ordnung, die niemand
persönlich verantwortet: bei Fontane der Ehrenkodex, den selbst Innstetten für fragwürdig
hält, bei Kafka ein Gericht, dessen Gesetz niemand kennt. Beide erzählen diese Ordnung nicht
von oben, sondern aus der Nähe der Betroffenen. Der Unterschied liegt in der Welt, in der das
geschieht. Fontanes Gesellschaft ist durchschaubar, ihre Regeln sind bekannt und werden bloß
nicht in Frage gestellt. Bei Kafka ist die Ordnung selbst unerkennbar geworden; nicht das
Gesetz ist grausam, sondern seine Unzugänglichkeit.

=== body
# 5 Glossar: Grundbegriffe der Erzähltextanalyse

: Erzähler :: Die Instanz, die im Text erzählt. Sie ist nicht mit dem Autor identisch, auch
  wenn sie in der ersten Person spricht.
: Fokalisierung :: Von Gérard Genette geprägter Begriff für die Perspektive, aus der erzählt
  wird. Bei Nullfokalisierung weiß der Erzähler mehr als die Figuren, bei interner
  Fokalisierung so viel wie eine Figur, bei externer Fokalisierung weniger.
: Erlebte Rede :: Wiedergabe der Gedanken einer Figur in der dritten Person und im
  Präteritum, aber in deren eigener Wortwahl und ohne einleitendes Verb des Denkens.
  Beispiel: Morgen würde sie ihm alles sagen, ja, morgen ganz gewiss.
: Innerer Monolog :: Unmittelbare Wiedergabe von Gedanken in der ersten Person und im
  Präsens, ohne Kommentar eines Erzählers. Arthur Schnitzler hat das Verfahren 1900 in der
  Novelle „Leutnant Gustl“ für die deutschsprachige Literatur erprobt.
: Leitmotiv :: Ein wiederkehrendes Element, etwa ein Gegenstand, eine Formulierung oder eine
  Situation, das über den ganzen Text hinweg Zusammenhänge stiftet.
: Dingsymbol :: Ein konkreter Gegenstand, der eine über sich hinausweisende Bedeutung trägt.
  Paul Heyse leitete aus Boccaccios Falkennovelle die Forderung ab, jede Novelle brauche ein
  solches Symbol, ihren „Falken“.
: Novelle :: Mittellange Erzählform, die nach Goethe eine „sich ereignete unerhörte
  Begebenheit“ darstellt. Typisch sind eine straffe Handlung, ein Wendepunkt und oft eine
  Rahmenerzählung.
: Parabel :: Gleichnishafte Erzählung, deren Sinn auf einen anderen Bereich übertragen werden
  muss. In der Moderne lässt sich die Bildhälfte oft nicht mehr eindeutig auflösen.
: Gesellschaftsroman :: Roman, der das Panorama einer Gesellschaftsschicht entwirft und das
  Handeln der Figuren aus deren Normen und Konventionen verständlich macht.
"""


# --------------------------------------------------------------------------------------------
# Document 3: annual report of a fictional company (table page, the one image-only page)

SEGMENTS = ("Industrial Sensors", "Medical Imaging", "Service & Software")  # report segments
SEGMENT_REVENUE = {  # EUR million per year, in SEGMENTS order; drawn on the chart page
    2019: (241.0, 142.5, 61.3),
    2020: (228.4, 150.2, 66.0),
    2021: (262.7, 165.8, 74.9),
    2022: (296.4, 183.9, 85.2),
    2023: (318.7, 201.5, 92.2),
}
REGION_REVENUE = {  # EUR million, (2023, 2022)
    "Germany": (171.5, 164.2),
    "Rest of Europe": (189.8, 176.0),
    "Americas": (142.3, 127.9),
    "Asia-Pacific": (108.8, 97.4),
}
SHARES_MILLION = 24.0  # shares outstanding, for earnings per share
KEY_FIGURES = (  # (label, 2023, 2022, unit): "m" EUR million, "pct" percent, "eur" EUR, "n" count
    ("Gross margin (%)", 42.1, 40.6, "pct"),
    ("Research and development expenses", 58.2, 52.7, "m"),
    ("EBIT", 71.6, 59.4, "m"),
    ("Net income", 50.9, 41.8, "m"),
    ("Dividend per share (EUR) (1)", 0.75, 0.60, "eur"),
    ("Capital expenditure", 29.4, 24.8, "m"),
    ("Free cash flow", 44.3, 30.1, "m"),
    ("Equity ratio (%)", 54.6, 52.1, "pct"),
    ("Order intake", 648.0, 590.2, "m"),
    ("Order backlog at 31 December", 301.5, 266.3, "m"),
    ("Employees (full-time equivalents, 31 December)", 3140, 2985, "n"),
)


def _figure_row(label: str, new: float, old: float, unit: str) -> tuple[str, str, str, str]:
    """One key-figures row: formatted values and the change column."""
    if unit == "pct":
        return (label, f"{new:.1f}", f"{old:.1f}", pp_change(new, old))
    if unit == "n":
        return (label, f"{new:,.0f}", f"{old:,.0f}", pct_change(new, old))
    fmt = "{:.2f}" if unit == "eur" else "{:.1f}"
    return (label, fmt.format(new), fmt.format(old), pct_change(new, old))


def key_figures_rows() -> tuple[tuple[str, ...], ...]:
    """Rows of the key-figures table; totals, margins and per-share values are computed."""
    new_seg, old_seg = SEGMENT_REVENUE[2023], SEGMENT_REVENUE[2022]
    total_new, total_old = round(sum(new_seg), 1), round(sum(old_seg), 1)
    figures = dict((label, (new, old, unit)) for label, new, old, unit in KEY_FIGURES)
    ebit_new, ebit_old = figures["EBIT"][:2]
    net_new, net_old = figures["Net income"][:2]
    rows: list[tuple[str, ...]] = [("Revenue by segment",)]
    rows += [_figure_row(name, n, o, "m") for name, n, o in zip(SEGMENTS, new_seg, old_seg)]
    rows.append(_figure_row("Group revenue", total_new, total_old, "m"))
    rows.append(("Revenue by region",))
    rows += [_figure_row(name, n, o, "m") for name, (n, o) in REGION_REVENUE.items()]
    rows.append(("Earnings and dividend",))
    for label, new, old, unit in KEY_FIGURES[:4]:
        rows.append(_figure_row(label, new, old, unit))
        if label == "EBIT":
            rows.append(_figure_row("EBIT margin (%)", 100 * ebit_new / total_new,
                                    100 * ebit_old / total_old, "pct"))
    rows.append(_figure_row("Earnings per share (EUR)", net_new / SHARES_MILLION,
                            net_old / SHARES_MILLION, "eur"))
    rows.append(_figure_row(*KEY_FIGURES[4]))
    rows.append(("Cash flow, balance sheet, orders and employees",))
    rows += [_figure_row(*figure) for figure in KEY_FIGURES[5:]]
    return tuple(rows)


REPORT_SOURCE = r"""
=== title
! Nordvik Sensorik AG

!! Annual Report 2023

^ Precision sensing for industry and medicine

>> 40

^ Contents: Letter to shareholders 2 · Key figures 3 · Revenue chart 4 · Segment reports 5 to 7 ·
People and sustainability 8 · Risks and opportunities 9 · Outlook 10

>> 60

~ Nordvik Sensorik AG is a fictional company. This report is part of the localRAG sample corpus;
all names, figures and events are invented.

=== body
# Letter to shareholders

Dear shareholders,

2023 was a year of two halves for Nordvik Sensorik. In the first six months, customers in the
chemical and food industries were still working through inventories built up during the
supply shortages of 2022, and order intake in our largest segment fell short of plan. From
the summer onwards, demand recovered broadly, helped by investment in energy efficiency and by
the first large orders for our new ultrasonic flow meter. Medical Imaging grew throughout the
year, and our service business once again proved its resilience.

For the full year, group revenue rose by 8.3 percent to EUR 612.4 million. Operating profit
grew faster than revenue, because higher volumes met a cost base that we had kept under tight
control, and the EBIT margin improved by more than a percentage point. We spent a record
amount on research and development and still generated enough free cash flow to propose a
higher dividend to the Annual General Meeting: EUR 0.75 per share, after EUR 0.60 a year
earlier.

Three decisions of the past year will shape the years ahead. First, we completed the
certification of our detector modules under the European Medical Device Regulation, a
multi-year effort that secures access to our most important medical market. Second, we began
building a second production site in Gdansk, Poland, which will relieve our plant in Kiel
from 2025 onwards. Third, we brought our software offerings together in one platform, Nordvik
Insight, so that customers can monitor all their connected instruments in one place.

None of this would have been possible without our employees, whose number grew to more than
three thousand during the year. On behalf of the Executive Board I thank them for their
commitment, and I thank you, our shareholders, for your trust. We enter 2024 with a full
order book and the firm intention to grow again.

Kiel, March 2024

Dr. Ingrid Solberg, Chief Executive Officer

=== body
# Key figures

Group figures in EUR million unless stated otherwise. The financial year is the calendar
year. Changes are calculated from the figures shown; for percentages the change is given in
percentage points (pp).

@table keyfigures

~ (1) For 2023: proposal to the Annual General Meeting on 14 May 2024. Earnings per share are
based on 24.0 million shares outstanding in both years. EBIT is earnings before interest and
taxes; the EBIT margin is EBIT divided by group revenue. Free cash flow is cash flow from
operating activities less capital expenditure. Employees are counted in full-time
equivalents. A chart of revenue by segment since 2019 follows on the next page.

=== image
@chart

=== body
# Segment report: Industrial Sensors

Industrial Sensors is our largest segment. It develops and manufactures instruments that
measure flow, pressure, level and temperature in process plants, above all in the chemical,
food and beverage, and water industries. Revenue grew by 7.5 percent to EUR 318.7 million;
adjusted for currency effects, growth was 8.9 percent, since the weaker US dollar reduced the
euro value of our American sales.

The segment's EBIT rose to EUR 41.3 million (2022: EUR 36.0 million), a margin of 13.0
percent. Better utilisation of our Kiel plant in the second half of the year and lower prices
for electronic components contributed to the improvement, while wage increases under the new
collective agreement had the opposite effect.

The most important product launch of the year was the NV-Flux 400, an ultrasonic clamp-on
flow meter that is attached to the outside of a pipe and therefore needs no interruption of
the process for installation. Water utilities in the Netherlands and Denmark placed the first
framework orders in the third quarter. The NV-Flux 400 accounted for EUR 14.2 million of
revenue in its first year, well above our expectations.

Order intake in the segment amounted to EUR 336.9 million and thus exceeded revenue, a
book-to-bill ratio of 1.06. Demand was weakest in Asia, where a major customer in the Chinese
chemical industry postponed a plant expansion, and strongest in the United States, where
programmes to renew water infrastructure are beginning to take effect. For 2024 we expect the
segment to grow in the mid single digits.

=== body
# Segment report: Medical Imaging

Medical Imaging supplies detector modules and sensor assemblies to manufacturers of computed
tomography, dental imaging and X-ray equipment. We do not sell imaging systems ourselves; our
customers are the system manufacturers, who integrate our modules into their devices. Revenue
in the segment increased by 9.6 percent to EUR 201.5 million, the strongest growth of our
three segments.

EBIT reached EUR 18.9 million after EUR 14.7 million in the previous year. The margin of 9.4
percent is still below our target of 12 percent, because certification under the European
Medical Device Regulation (MDR) tied up engineering capacity and caused external costs of
about EUR 3.1 million. The certification of all six detector product families was completed
in October 2023, well before the end of the transition period.

Demand came above all from dental imaging, where cone-beam computed tomography is spreading
from specialist clinics into general dental practices. Our photon-counting detector
prototype, developed together with a university hospital, passed its first clinical
evaluation; series production is not expected before 2026. Photon-counting detectors register
each X-ray photon individually and measure its energy, which promises sharper images at a
lower radiation dose.

The segment's largest customer accounted for 18 percent of segment revenue. To reduce this
dependency we signed supply agreements with two further manufacturers of dental imaging
systems, in Japan and in South Korea.

=== body
# Segment report: Service & Software

Service & Software combines the maintenance, calibration and repair of installed instruments
with software that makes their data usable. Revenue grew by 8.2 percent to EUR 92.2 million.
Recurring revenue from service contracts and software subscriptions accounted for 64 percent
of the segment's revenue, up from 59 percent in 2022, which makes the segment the most
predictable part of our business.

EBIT of EUR 16.8 million (2022: EUR 14.1 million) corresponds to a margin of 18.2 percent,
the highest in the group. Calibration services, which many customers must have performed at
fixed intervals for regulatory reasons, contributed more than half of the segment's profit.

In May we launched Nordvik Insight, a platform that brings together the previously separate
applications for device management, condition monitoring and calibration records. Customers
see the status of all connected instruments, receive a warning when a sensor drifts out of
tolerance and can download calibration certificates for audits. At year end, 41,800
instruments at 1,260 customer sites were connected to the platform. All data are stored in
data centres within the European Union.

We charge for Nordvik Insight per connected instrument and year. Customers welcomed the
pricing model, but the migration of existing customers from the old applications took longer
than planned. We have therefore extended support for the old applications until the end of
2024.

=== body
# People and sustainability

At 31 December 2023 Nordvik Sensorik employed 3,140 people in full-time equivalents, 155 more
than a year earlier. Most of the new positions were created in research and development and
in production in Kiel. Staff turnover fell to 6.8 percent (2022: 8.1 percent). Each employee
received an average of 27 hours of training, with a focus on software development and on
quality management under the Medical Device Regulation.

Women hold 29 percent of leadership positions in the group, compared with 26 percent a year
earlier. Our goal is 35 percent by 2027. In Germany, the proportion of women among our
engineering apprentices rose to 31 percent.

We reduced the greenhouse gas emissions from our own operations and purchased energy
(Scope 1 and 2) to 9,870 tonnes of CO2 equivalent, 21 percent below the 2021 base year. The
main levers were the switch of the Kiel plant to electricity from renewable sources, which
now covers 78 percent of our electricity consumption, and the replacement of an oil-fired
heating plant by a heat pump. Our target is a reduction of 50 percent by 2030 compared with
2021. We are recording the emissions of our supply chain (Scope 3) for the first time; the
results will be published in the 2024 report.

Occupational safety remained a priority. The accident rate fell to 3.2 accidents with lost
working time per million hours worked (2022: 4.0). There were no fatal accidents.

=== body
# Risks and opportunities

Our risk management system records risks at least quarterly and assesses them by the
probability of occurrence and the potential effect on EBIT. The following risks are currently
classified as material.

: Supply of electronic components. :: Several products depend on microcontrollers and analogue
  chips from a small number of suppliers. The shortages of 2021 and 2022 showed how quickly
  production can come to a halt. We have since qualified second sources for 70 percent of
  critical components and raised safety stocks to an average of four months.
: Currency risk. :: About 40 percent of revenue is generated in currencies other than the
  euro, mainly in US dollars. We hedge up to 75 percent of the expected net cash flows of the
  next twelve months with forward contracts; a ten percent depreciation of the US dollar
  would nevertheless reduce EBIT by about EUR 4 million.
: Regulatory risk. :: Medical products require approval in every market, and delays can
  postpone revenue by several quarters, as the MDR certification showed.
: Cyber risk. :: With Nordvik Insight we operate systems on which customers rely. An attack
  could interrupt the service and damage our reputation. External penetration tests check our
  defences twice a year, and we are certified under ISO/IEC 27001.
: Customer concentration. :: The largest customer of Medical Imaging accounts for 18 percent
  of that segment's revenue; the loss of this customer would weigh on group EBIT.

Opportunities arise above all from the modernisation of water infrastructure, from the spread
of dental computed tomography and from regulatory requirements to monitor energy consumption
in industry. Taken together, the Executive Board does not see any risks that could endanger
the continued existence of the company.

=== body
# Outlook 2024

The Executive Board expects the global economy to grow only moderately in 2024. Industrial
investment in Europe is likely to remain subdued in the first half of the year, while demand
in North America and in medical technology should stay robust.

On this basis we expect group revenue of between EUR 640 million and EUR 665 million in 2024
and an EBIT margin of between 11.5 and 12.5 percent. All three segments are expected to
contribute to growth. Capital expenditure will increase to about EUR 38 million, roughly half
of which will go into the new plant in Gdansk, due to start production in the first quarter
of 2025. Research and development expenses are planned at about 9.5 percent of revenue.

The forecast assumes an average exchange rate of 1.08 US dollars per euro and no further
disruptions in the supply of electronic components. It does not include acquisitions. We are
examining small acquisitions in software for process analytics, but no agreements have been
signed.

In the medium term, by 2027, we want to raise revenue to more than EUR 800 million, increase
the EBIT margin to 14 percent and further raise the share of recurring revenue. We continue
to aim to distribute between 30 and 40 percent of net income to our shareholders as
dividends.

~ This outlook contains forward-looking statements based on the Executive Board's current
assumptions. Actual results may differ materially.
"""


# --------------------------------------------------------------------------------------------
# Document 4: notes on retrieval evaluation (English, no running header)

EVALUATION_SOURCE = r"""
=== body
! Notes on Retrieval Evaluation

## 1 Why evaluate retrieval on its own

A retrieval-augmented generation system answers a question in two steps: a retriever selects
passages from a document collection, and a language model writes an answer from them. When
the answer is wrong, either step may be at fault. Judging only the final answers mixes the
two and makes it hard to tell whether a change to the chunking, the embedding model or the
reranker helped. Evaluating the retriever on its own isolates the part that is usually the
easiest to improve and the cheapest to measure.

Retrieval evaluation needs no language model at query time. For each test question one
records where the answer is located, runs the retriever and checks whether those locations
appear among the top results. Because the procedure is deterministic for a fixed index, it
can be repeated after every change and the results compared line by line. Many teams keep a
plain-text report of the metrics under version control; a diff of that report then shows at a
glance which questions improved and which regressed.

The unit of judgment matters. In a collection of PDF files the natural unit is the page:
users cite pages, and a page is small enough for a correct retrieval to be useful but large
enough for annotators to assign answers to it without ambiguity. Judging chunks instead would
tie the goldset to one chunking configuration and make it worthless as soon as the chunk size
changes.

These notes describe how to build such a test set, which metrics to compute, how hybrid
retrieval and reranking influence them, and how to decide whether a difference between two
configurations is real. They are deliberately short: each page covers one topic.

=== body
## 2 Building a goldset

A goldset is a list of questions, each paired with the locations in the collection that
answer it, usually a file name and a page number. In the terminology of information retrieval
these judgments are called qrels, short for query relevance judgments. Every later
measurement is only as good as the care taken at this stage.

Questions should be written by someone who knows the documents, but not by copying sentences
from them. A question that repeats the exact wording of its answer rewards lexical matching
and makes a keyword retriever such as BM25 look better than it will be for real users, who
rarely know the wording in advance. A balanced goldset mixes paraphrased questions, which test
semantic matching, with exact-term questions about names, figures or numbered equations,
which dense retrievers often miss.

Each question needs all of its acceptable locations. If a fact is stated on two pages, both
belong in the qrels; otherwise a retriever that finds the second page is punished for a
correct answer. Conversely, questions whose answer is spread over many pages fit page-level
evaluation poorly and are better left out.

Page numbers must be recorded as the physical position of the page in the file, counting from
one, which is what a PDF viewer shows in its page box. Printed page numbers often differ:
front matter is numbered with Roman numerals or not at all, so the page printed as 5 may be
the seventh page of the file.

Finally, size. Thirty to fifty questions are enough to catch large regressions, but not to
resolve small differences between two good systems. It is better to start with a modest
goldset that has been checked carefully than with a large one full of errors.

=== body
## 3 Hit rate, recall and precision at k

The simplest metrics look at the first k results returned for each question. Hit rate at k,
also called success at k, is the fraction of questions for which at least one relevant page
appears among the top k. It answers the practical question of whether the answer was
available to the language model at all.

Recall at k is the fraction of all relevant pages of a question that appear in the top k,
averaged over the questions. It differs from the hit rate only for questions with more than
one relevant page. Precision at k is the fraction of the top k results that are relevant.
With one relevant page per question, precision at 5 can never exceed 0.2, which makes it
awkward to interpret for goldsets of this kind.

Example. A question has two relevant pages, and the top five results contain one of them, at
rank 3. Then hit@5 = 1, recall@5 = 1/2 = 0.5 and precision@5 = 1/5 = 0.2. If the second
relevant page appears at rank 7, recall@10 becomes 1.0 while hit@10 stays at 1.

All three metrics ignore the order within the top k: a relevant page at rank 1 counts the
same as one at rank k. They are easy to explain, which makes them useful in reports for
readers outside the team, but they should be complemented by a rank-sensitive metric. The
cutoff k should reflect how many passages the application actually hands to the language
model; measuring hit@20 for a system that uses only the top four passages overstates its
quality.

When the retriever returns chunks rather than pages, several chunks of the same page may
appear in one ranking. Before page-level metrics are computed these duplicates must be
collapsed, keeping the best rank of each page; otherwise one page can occupy several of the
k positions and distort precision.

=== body
## 4 Mean reciprocal rank

The reciprocal rank of a question is 1/r, where r is the rank of the first relevant result;
if no relevant result is retrieved within the cutoff, the reciprocal rank is zero. The mean
reciprocal rank, MRR, averages this value over all questions. A system that always places a
relevant page first reaches an MRR of 1.0.

Example. For three questions, the first relevant page appears at rank 1, at rank 3 and not at
all within the top ten. The reciprocal ranks are 1, 1/3 and 0, so MRR@10 = (1 + 0.333 + 0) / 3
= 0.444.

MRR rewards placing the first relevant result high and ignores everything after it. This
suits applications in which the user, or the language model, benefits mainly from the single
best passage. The metric is steep at the top: moving a relevant page from rank 2 to rank 1
adds 0.5 to that question's score, while moving it from rank 10 to rank 9 adds about 0.011.
Small changes to a reranker therefore show up clearly in MRR.

The same steepness makes MRR sensitive to ties. If two pages receive exactly the same score,
the order in which the system lists them decides the reciprocal rank, and that order may
depend on accidents such as the order of insertion into the index. An evaluation should break
ties deterministically, for example by document identifier, and document the rule, so that
two runs of the same configuration give the same result.

MRR looks only at the first relevant result, so additional relevant pages for the same
question do not change it. When every relevant page matters, nDCG is the better choice.

=== body
## 5 Normalised discounted cumulative gain

Discounted cumulative gain, introduced by Järvelin and Kekäläinen in 2002, rewards relevant
results and discounts them the lower they appear in the ranking. With graded relevance rel_i
of the result at rank i, DCG at cutoff k is

$ DCG@k = sum over i = 1..k of rel_i / log2(i + 1) @ 1

A relevant result at rank 1 contributes its full grade, one at rank 3 half of it, since
log2(4) = 2. To make values comparable across questions, DCG is divided by the ideal DCG, the
value obtained when all relevant results are sorted by grade at the top of the ranking. The
ratio, normalised DCG or nDCG, lies between 0 and 1.

Example with binary relevance. A question has two relevant pages, retrieved at ranks 1 and 4.
DCG = 1/log2(2) + 1/log2(5) = 1 + 0.431 = 1.431. The ideal ranking has them at ranks 1 and 2,
so IDCG = 1 + 1/log2(3) = 1 + 0.631 = 1.631, and nDCG = 1.431 / 1.631 = 0.877.

A variant common in web search uses the gain 2^rel - 1 instead of rel, which emphasises highly
relevant results; with binary relevance both forms agree. Graded judgments, for example 2 for
a page that answers the question completely and 1 for a page that gives partial information,
are more informative but cost more annotation time, and annotators agree less on grades than
on yes-or-no decisions.

nDCG is the standard metric of many benchmark suites, but its values are less intuitive than
a hit rate. Reports should therefore show it next to a simpler metric rather than instead of
one.

=== body
## 6 Hybrid retrieval and rank fusion

Keyword retrieval and dense retrieval fail in different ways. BM25 scores a page by the query
terms it contains, weighting rare terms higher and damping the effect of repetition through
the parameter k1 and of document length through b; common defaults are k1 between 1.2 and 2.0
and b = 0.75. It excels at exact names, part numbers and equation labels but misses
paraphrases. Dense retrievers embed question and passage as vectors and compare them by cosine
similarity; they match meaning across different words but can overlook a rare identifier.

A hybrid retriever runs both and merges the two ranked lists. The scores cannot simply be
added: BM25 scores are unbounded and depend on the query, while cosine similarities lie in a
narrow range. Reciprocal rank fusion, proposed by Cormack, Clarke and Büttcher in 2009, avoids
the problem by using ranks only. Each document receives the sum of 1/(k + r) over the lists
in which it appears at rank r, with a constant k that the authors set to 60.

Example with k = 60. A page at rank 1 in the BM25 list and at rank 3 in the dense list scores
1/61 + 1/63 = 0.01639 + 0.01587 = 0.03227. A page at rank 2 in both lists scores 2/62 =
0.03226, almost exactly the same. The constant keeps a single first place from dominating:
documents that both retrievers rank reasonably high tend to win.

Weighted variants multiply each list's contribution by a weight, which lets a collection full
of identifiers favour BM25. Fusion by ranks has a cost, however: it discards the information
that one retriever was very confident. A reranker applied after the fusion can recover some of
it.

=== body
## 7 Reranking with cross-encoders

The retrievers discussed so far encode the question and the passage separately. Such
bi-encoders are fast, because passage vectors can be computed once at indexing time, but the
question never meets the passage inside the model. A cross-encoder instead reads question and
passage together as a single input and outputs one relevance score. Attention between the two
texts lets it notice, for example, that a passage mentions the right term in the wrong
context.

The price is speed. A cross-encoder must run once for every question and passage pair, so it
cannot search a whole collection. It is therefore used as a second stage: a fast retriever
selects a few dozen candidates, typically 20 to 50, and the cross-encoder reorders them. The
cost grows linearly with the number of candidates; on a CPU a small model needs roughly ten to
fifty milliseconds per pair, depending on the passage length.

Widely used cross-encoders were trained on MS MARCO, a large collection of real search queries
with passages judged relevant. Such models transfer reasonably well to other English texts.
For other languages, such as German, a multilingual model is needed, or the gains may vanish.
Passages longer than the model's input limit, often 512 tokens, are truncated, which is one
more reason to keep chunks moderate in size.

Reranking can only reorder what the first stage found. If the relevant page is not among the
candidates, no reranker will recover it, so recall at the candidate depth is an upper bound on
what reranking can achieve. When evaluating a reranker, report the hit rate at the candidate
depth next to the metrics after reranking, so that a failure can be attributed to the stage
that caused it.

=== body
## 8 Chunking and pages

Retrievers do not index whole documents but chunks: passages of a few hundred to a few
thousand characters. Chunk size trades precision against context. Small chunks produce
focused embeddings and let the retriever point at the exact passage, but a chunk may lack the
sentence that names its subject. Large chunks keep the context together but dilute the
embedding with unrelated material, and they fill the language model's context window quickly.

A common starting point for technical prose is a chunk size of about 2,000 characters with an
overlap of 200 characters between neighbouring chunks. The overlap ensures that a sentence cut
at a boundary appears complete in at least one chunk. Splitters that prefer to break at
paragraph and sentence boundaries produce more coherent chunks than splitters that cut at a
fixed character count.

For page-level evaluation, each chunk must remember the file and page it came from. The
simplest way is to split each page separately, so that no chunk spans two pages. A chunk that
crossed a page boundary would have to be assigned to one of the two pages, and a question
about the other page would be scored as a miss although its text was retrieved.

Pages without a text layer deserve attention. Scanned pages and pages that consist only of an
image produce no text at all, so they never enter the index and can never be retrieved. An
indexing tool should report such pages by file and page number instead of skipping them
silently, so that the user can decide whether optical character recognition is worth the
effort.

Running headers and footers repeat on every page. They add the same words to every chunk,
which slightly blurs keyword scores, but removing them reliably is hard, and page-level
evaluation is usually robust to them.

=== body
## 9 Is the difference real?

Two configurations evaluated on the same goldset rarely produce identical numbers. The
question is whether a difference reflects a real improvement or merely the particular choice
of questions. Because both systems answer the same questions, the comparison should be
paired: what matters is the difference per question, not the two averages on their own.

The paired randomization test, also called a permutation test, is simple and makes no
assumption about the distribution of scores. Under the null hypothesis the two systems are
interchangeable, so for each question the labels of the two scores may be swapped. The test
swaps them at random many thousands of times, computes the difference in mean score for each
shuffle, and reports the fraction of shuffles in which the difference is at least as large as
the observed one. Smucker, Allan and Carterette compared significance tests for information
retrieval in 2007 and found the randomization test, the bootstrap and the t-test in close
agreement, while the sign test and the Wilcoxon test were less reliable.

The bootstrap offers a complementary view. Resampling the questions with replacement and
recomputing the mean difference each time yields a confidence interval; if the 95 percent
interval excludes zero, the difference is unlikely to be an accident of question selection.

Small goldsets call for caution. With 32 questions, a difference in MRR of 0.05 often
corresponds to two or three questions changing rank, and such a difference is rarely
significant. Reporting how many questions improved, got worse or stayed the same is an honest
complement to any p-value. When many configurations are compared, some will look better by
chance alone, so the best of twenty variants should be confirmed on fresh questions.

=== body
## 10 Common pitfalls

: Tuning on the test set. :: If chunk size, fusion weights and reranking depth are chosen
  because they maximise the score on the goldset, the score no longer estimates performance
  on new questions. Keep some questions aside, or at least report how many configurations
  were tried.
: Stale page numbers. :: When documents are replaced by new editions, pages shift and the
  goldset silently becomes wrong. Store a checksum of each document with the goldset, or
  generate test documents reproducibly, so that a changed file is noticed.
: Unicode file names. :: A name such as Bericht_Übersicht.pdf can be stored in two Unicode
  forms: with a precomposed Ü (NFC) or with a U followed by a combining diaeresis (NFD). Some
  file systems, notably on macOS, return the decomposed form. Both look identical on screen
  but compare as different strings, so a goldset entry may fail to match the indexed source.
  Normalising all names to NFC before comparing avoids the problem.
: Paths and case. :: Compare file names rather than full paths, and decide once whether the
  comparison is case sensitive.
: Nondeterminism. :: Score ties, parallel index construction and approximate nearest-neighbour
  search can change rankings between runs. Fix random seeds, break ties by a stable key and
  rebuild the index from scratch before recording a baseline.
: Unanswerable questions. :: A question whose answer lies on a page without a text layer
  cannot be answered by any text retriever. Remove such questions, or keep them deliberately
  and report them separately.

A last piece of advice: read the failures. Ten minutes spent looking at the questions a
system gets wrong usually teach more than any additional metric.
"""


# --------------------------------------------------------------------------------------------
# Document 5: operating manual of a fictional espresso machine (German)

MANUAL_SOURCE = r"""
=== body
! Espressomaschine Aurora E20

^ Betriebsanleitung · Brennwald Hausgeräte GmbH · Ausgabe 03/2024

~ Aurora E20 und Brennwald Hausgeräte sind erfunden; diese Anleitung gehört zum Beispielkorpus
von localRAG.

# 1 Sicherheitshinweise

Lesen Sie diese Anleitung vollständig, bevor Sie das Gerät zum ersten Mal benutzen, und
bewahren Sie sie zum späteren Nachschlagen auf. Geben Sie die Anleitung mit, wenn Sie das
Gerät an Dritte weitergeben.

- Das Gerät ist ausschließlich für die Zubereitung von Espresso, Kaffeegetränken und heißem
  Wasser im Haushalt bestimmt. Für den gewerblichen Dauerbetrieb ist es nicht ausgelegt.
- Schließen Sie das Gerät nur an eine ordnungsgemäß installierte Schutzkontakt-Steckdose mit
  einer Netzspannung von 220–240 V, 50/60 Hz an.
- Tauchen Sie das Gerät, das Netzkabel oder den Stecker niemals in Wasser oder andere
  Flüssigkeiten. Ziehen Sie vor jeder Reinigung den Netzstecker.
- Kinder ab 8 Jahren und Personen mit eingeschränkten körperlichen, sensorischen oder
  geistigen Fähigkeiten dürfen das Gerät nur unter Aufsicht oder nach Unterweisung benutzen.
  Reinigung und Wartung dürfen Kinder nur durchführen, wenn sie älter als 8 Jahre sind und
  beaufsichtigt werden.
- Verbrühungsgefahr: Brühgruppe, Siebträger, Dampflanze und austretender Dampf werden sehr
  heiß. Richten Sie die Dampflanze nie auf Personen und fassen Sie den Siebträger nur am
  Griff an.
- Nehmen Sie den Siebträger niemals während des Brühvorgangs ab, denn die Brühkammer steht
  dann unter einem Druck von bis zu 15 bar.
- Betreiben Sie das Gerät nicht, wenn Netzkabel oder Gehäuse beschädigt sind. Reparaturen
  darf nur der Kundendienst oder eine autorisierte Fachwerkstatt ausführen.
- Stellen Sie das Gerät auf eine stabile, waagerechte und hitzebeständige Fläche, nicht
  unmittelbar neben Spülbecken oder Wasserhähne, und lassen Sie nach oben mindestens 15 cm
  Abstand.

=== body
# 2 Lieferumfang und Geräteübersicht

Prüfen Sie nach dem Auspacken, ob alle Teile vorhanden und unbeschädigt sind. Bewahren Sie die
Verpackung für einen eventuellen Transport im Garantiefall auf.

### Lieferumfang

- Espressomaschine Aurora E20 mit eingebautem Kegelmahlwerk
- Siebträger mit Griff aus Walnussholz
- Siebeinsätze für eine Tasse (9 g Kaffee) und für zwei Tassen (18 g Kaffee)
- Tamper aus Edelstahl, Durchmesser 58 mm
- Milchkännchen aus Edelstahl, 350 ml
- Reinigungsbürste und Reinigungsnadel für die Dampflanze
- Teststreifen zur Bestimmung der Wasserhärte und eine Wasserfilterkartusche

### Geräteübersicht

@table overview

Die Buchstaben entsprechen der Abbildung auf der Innenseite des Verpackungsdeckels. Die
zweistellige Anzeige im Bedienfeld zeigt im Betrieb die Temperatur der Brühgruppe und bei
Störungen einen Fehlercode an (siehe Abschnitt 6).

=== body
# 3 Erste Inbetriebnahme

+ Entfernen Sie sämtliche Verpackungsmaterialien und Transportsicherungen, auch das Klebeband
  an der Tropfschale.
+ Spülen Sie Wassertank, Siebträger, Siebeinsätze und Milchkännchen mit warmem Wasser und
  etwas Spülmittel aus und trocknen Sie alle Teile ab.
+ Bestimmen Sie die Wasserhärte: Tauchen Sie den beiliegenden Teststreifen eine Sekunde lang
  in Leitungswasser und zählen Sie nach einer Minute die verfärbten Felder. Stellen Sie den
  Härtebereich ein, wie in Abschnitt 5 beschrieben.
+ Legen Sie die Filterkartusche fünf Minuten in Wasser und drücken Sie sie dann in die
  Halterung am Boden des Wassertanks.
+ Füllen Sie den Wassertank bis zur Markierung MAX mit frischem, kaltem Wasser. Verwenden Sie
  kein kohlensäurehaltiges Mineralwasser und niemals Milch.
+ Stellen Sie ein Gefäß mit mindestens 0,5 Litern Inhalt unter Brühgruppe und Dampflanze und
  schalten Sie das Gerät mit der Ein/Aus-Taste ein. Der Thermoblock heizt auf und ist nach
  etwa 45 Sekunden betriebsbereit; dann leuchten die Tasten dauerhaft.
+ Drücken Sie ohne eingesetzten Siebträger dreimal nacheinander die Taste „2 Tassen“, um das
  System zu spülen. Öffnen Sie anschließend die Dampflanze für 20 Sekunden.

Nach diesem Spülvorgang ist das Gerät betriebsbereit. Der erste Espresso kann noch leicht
nach Kunststoff schmecken; gießen Sie ihn sicherheitshalber weg.

### Energiesparfunktion

Wird das Gerät 30 Minuten lang nicht benutzt, schaltet es sich automatisch aus. Sie können
die Zeit auf 15 oder 60 Minuten ändern: Halten Sie bei ausgeschaltetem Gerät die Taste
„1 Tasse“ gedrückt und schalten Sie das Gerät ein. Jeder weitere Druck auf „1 Tasse“ wechselt
zwischen 15, 30 und 60 Minuten; die Anzeige zeigt den gewählten Wert. Nach fünf Sekunden ohne
Eingabe wird die Einstellung gespeichert. Im ausgeschalteten Zustand nimmt das Gerät weniger
als 0,5 Watt auf.

=== body
# 4 Espresso und Milchschaum zubereiten

Füllen Sie Kaffeebohnen in den Bohnenbehälter. Für einen einfachen Espresso setzen Sie den
kleinen Siebeinsatz ein und mahlen etwa 9 g Kaffee direkt in den Siebträger, für einen
doppelten den großen Siebeinsatz mit 18 g. Verteilen Sie das Pulver gleichmäßig und pressen
Sie es mit dem Tamper fest und waagerecht an. Entscheidend ist weniger die genaue Kraft als
ein Anpressdruck, der bei jeder Zubereitung gleich bleibt.

Setzen Sie den Siebträger von unten in die Brühgruppe ein und drehen Sie ihn bis zum Anschlag
nach rechts. Stellen Sie eine vorgewärmte Tasse darunter und drücken Sie „1 Tasse“ (30 ml)
oder „2 Tassen“ (60 ml). Ein gut eingestellter Espresso beginnt nach einer kurzen Vorbrühzeit
gleichmäßig und honigartig zu fließen; die gesamte Extraktionszeit sollte 25 bis 30 Sekunden
betragen. Das Manometer zeigt während des Brühens idealerweise 8 bis 10 bar.

Läuft der Espresso zu schnell durch und schmeckt er sauer und dünn, ist das Mahlgut zu grob:
Stellen Sie den Mahlgradregler auf eine kleinere Zahl. Tropft er nur langsam und schmeckt
bitter, ist es zu fein: Wählen Sie eine größere Zahl. Verstellen Sie den Mahlgrad nur bei
laufendem Mahlwerk und jeweils nur um eine Stufe, und beurteilen Sie das Ergebnis erst nach
der nächsten Tasse.

### Milchschaum

Füllen Sie das Milchkännchen zu einem Drittel mit kalter Milch (4 bis 6 °C). Drücken Sie die
Taste „Dampf“; nach etwa 20 Sekunden ist die Dampftemperatur erreicht. Halten Sie die Spitze
der Dampflanze knapp unter die Milchoberfläche und öffnen Sie den Drehknopf ganz. Sobald das
Volumen um etwa die Hälfte gewachsen ist, tauchen Sie die Lanze tiefer ein, damit die Milch
rotiert und feinporig wird. Beenden Sie das Aufschäumen bei etwa 65 °C, also wenn sich das
Kännchen an der Unterseite kaum noch halten lässt. Wischen Sie die Dampflanze sofort mit einem
feuchten Tuch ab und öffnen Sie sie kurz, um Milchreste auszublasen.

=== body
# 5 Reinigung und Entkalken

Regelmäßige Pflege erhält den Geschmack des Kaffees und verlängert die Lebensdauer des
Geräts. Ziehen Sie vor allen Reinigungsarbeiten den Netzstecker und lassen Sie das Gerät
abkühlen. Keines der Teile ist spülmaschinenfest. Leeren Sie täglich die Tropfschale und
spülen Sie Siebträger und Siebeinsatz unter warmem Wasser aus. Einmal pro Woche reinigen Sie
die Dichtung der Brühgruppe mit der Reinigungsbürste. Das Mahlwerk darf nicht mit Wasser in
Berührung kommen.

### Entkalken

Kalk entsteht beim Erhitzen von Wasser und lagert sich im Thermoblock ab. Wie oft Sie
entkalken müssen, hängt von der Wasserhärte ab. Die Kontrollleuchte „Entkalken“ erinnert Sie
automatisch, sobald die für den eingestellten Härtebereich berechnete Wassermenge
durchgelaufen ist. Mit eingesetzter Filterkartusche verdoppeln sich die Intervalle.

@table hardness

Härtebereich einstellen: Halten Sie bei eingeschaltetem Gerät die Taste „2 Tassen“ drei
Sekunden lang gedrückt. Die Anzeige zeigt den aktuellen Bereich; jeder Druck auf „1 Tasse“
erhöht ihn um eins. Zum Speichern drücken Sie erneut „2 Tassen“.

Entkalkungsprogramm: Lösen Sie 100 ml flüssigen Entkalker für Espressomaschinen in 500 ml
Wasser und füllen Sie die Lösung in den Wassertank. Stellen Sie ein Gefäß mit mindestens
einem Liter Inhalt unter Brühgruppe und Dampflanze und halten Sie die Tasten „1 Tasse“ und
„Dampf“ gleichzeitig fünf Sekunden lang gedrückt. Das Programm dauert etwa 25 Minuten und
fordert Sie nach der Hälfte auf, den Wassertank auszuspülen und mit klarem Wasser zu füllen.
Verwenden Sie keinen Essig: Essig greift die Dichtungen an. Auch Zitronensäure ist ungeeignet,
weil sie beim Erhitzen schwer lösliche Ablagerungen bilden kann.

=== body
# 6 Störungen beheben

Viele Störungen lassen sich ohne Kundendienst beheben. Bei den Fehlercodes E1 bis E6 blinkt
zusätzlich die Ein/Aus-Taste. Schalten Sie das Gerät nach Behebung der Ursache aus und wieder
ein.

@table faults

Lässt sich eine Störung mit diesen Maßnahmen nicht beheben, wenden Sie sich an den
Kundendienst. Halten Sie dafür die Seriennummer bereit; sie steht auf dem Typenschild an der
Unterseite des Geräts. Senden Sie das Gerät nur nach Rücksprache ein, gut verpackt, mit
leerem Wassertank und ohne Kaffeebohnen im Bohnenbehälter.

=== body
# 7 Technische Daten, Garantie und Entsorgung

@table specs

### Garantie

Brennwald Hausgeräte gewährt auf dieses Gerät eine Garantie von zwei Jahren ab Kaufdatum,
zusätzlich zu Ihren gesetzlichen Gewährleistungsrechten gegenüber dem Verkäufer. Die Garantie
umfasst Material- und Herstellungsfehler. Ausgenommen sind Verschleißteile wie Dichtungen und
Siebeinsätze, Schäden durch Kalk infolge unterlassener Entkalkung sowie Schäden durch
unsachgemäßen Gebrauch. Bewahren Sie den Kaufbeleg als Nachweis auf.

### Entsorgung

Das Symbol der durchgestrichenen Mülltonne bedeutet, dass Elektrogeräte nicht in den Hausmüll
gehören. Geben Sie das Altgerät bei einer kommunalen Sammelstelle ab. Händler mit einer
Verkaufsfläche für Elektrogeräte von mindestens 400 m² sind nach dem Elektro- und
Elektronikgerätegesetz verpflichtet, Altgeräte kostenlos zurückzunehmen. Entnehmen Sie vorher
die Filterkartusche; sie gehört in den Restmüll. Die Verpackung besteht aus Pappe und
recycelbarem Kunststoff.
"""

MANUAL_TABLES: dict[str, Block] = {
    "overview": ("table", ("Teil", "Bezeichnung", "Hinweis"), (
        ("A", "Bohnenbehälter", "oben auf dem Gerät, fasst 250 g Bohnen, mit Aromadeckel"),
        ("B", "Mahlgradregler", "12 Stufen, 1 = sehr fein, 12 = grob"),
        ("C", "Wassertank", "hinten, herausnehmbar, 1,8 Liter"),
        ("D", "Manometer", "zeigt den Brühdruck in bar"),
        ("E", "Brühgruppe mit Siebträger", "Siebträger von unten einsetzen, nach rechts drehen"),
        ("F", "Dampflanze", "rechts, mit Drehknopf; schwenkbar"),
        ("G", "Tropfschale", "mit Schwimmer; rot sichtbar heißt: leeren"),
        ("H", "Bedienfeld", "Tasten Ein/Aus, 1 Tasse, 2 Tassen, Dampf; zweistellige Anzeige"),
    ), (0.5, 2.2, 4.0), "LLL"),
    "hardness": ("table", ("Härtebereich", "Verfärbte Felder", "Härte in °dH",
                           "Entkalken etwa alle"), (
        ("1 weich", "1", "unter 7", "4 Monate"),
        ("2 mittel", "2", "7 bis 14", "3 Monate"),
        ("3 hart", "3", "14 bis 21", "2 Monate"),
        ("4 sehr hart", "4", "über 21", "1 Monat"),
    ), (1.4, 1.4, 1.4, 1.6), "LLLL"),
    "faults": ("table", ("Anzeige", "Ursache", "Abhilfe"), (
        ("E1", "Wassertank leer oder nicht richtig eingesetzt",
         "Wassertank füllen und bis zum Einrasten einsetzen."),
        ("E2", "Thermoblock überhitzt, etwa nach langem Dampfbezug",
         "Gerät ausschalten und 20 Minuten abkühlen lassen."),
        ("E3", "Temperaturfühler defekt",
         "Gerät nicht weiter benutzen, Kundendienst kontaktieren."),
        ("E4", "Mahlwerk blockiert, etwa durch einen Fremdkörper oder sehr ölige Bohnen",
         "Netzstecker ziehen, Bohnenbehälter leeren, Mahlwerk mit der Bürste reinigen."),
        ("E5", "Entkalken dringend nötig; Bezug nur noch eingeschränkt möglich",
         "Entkalkungsprogramm starten (Abschnitt 5)."),
        ("E6", "Pumpe fördert kein Wasser, Luft im System",
         "Dampflanze öffnen und „2 Tassen“ drücken, bis Wasser gleichmäßig fließt."),
        ("kein Code", "Espresso läuft zu schnell durch: Mahlgrad zu grob, zu wenig Kaffee oder "
         "zu schwach angepresst", "Feiner mahlen, Kaffeemenge prüfen, fester anpressen."),
        ("kein Code", "Kaffee tritt seitlich am Siebträger aus",
         "Siebträger bis zum Anschlag drehen, Dichtung der Brühgruppe reinigen."),
        ("kein Code", "Milch schäumt nicht",
         "Kalte Milch verwenden, Spitze der Dampflanze mit der Reinigungsnadel säubern."),
    ), (0.9, 2.6, 2.9), "LLL"),
    "specs": ("table", ("Merkmal", "Wert"), (
        ("Nennspannung", "220–240 V, 50/60 Hz"),
        ("Leistungsaufnahme", "1.450 W"),
        ("Pumpendruck", "max. 15 bar"),
        ("Wassertank / Bohnenbehälter", "1,8 l / 250 g"),
        ("Mahlgradstufen", "12"),
        ("Aufheizzeit", "ca. 45 s"),
        ("Abmessungen (B × H × T)", "31 × 40 × 36 cm"),
        ("Gewicht", "7,9 kg"),
        ("Länge des Netzkabels", "1,1 m"),
    ), (2.0, 3.0), "LL"),
}


# --------------------------------------------------------------------------------------------
# The corpus


def sample_docs() -> tuple[Doc, ...]:
    """The five sample documents, in the order they are written."""
    report_tables: dict[str, Block] = {
        "keyfigures": ("table", ("EUR million", "2023", "2022", "Change"), key_figures_rows(),
                       (4.4, 1.1, 1.1, 1.2), "LRRR"),
    }
    return (
        Doc("Options_Pricing_Lecture_Notes.pdf", "Options Pricing: Lecture Notes",
            "Option payoffs, the Black-Scholes-Merton model and the Greeks",
            parse_pages(OPTIONS_SOURCE, OPTIONS_TABLES),
            header="Options Pricing: Lecture Notes", folio_label="Page", first_folio=3,
            font="Times"),
        Doc(unicodedata.normalize("NFC", "Literaturgeschichte_Überblick.pdf"),
            "Literaturgeschichte im Überblick", "Theodor Fontane und Franz Kafka",
            parse_pages(LITERATURE_SOURCE), header="Literaturgeschichte im Überblick",
            folio_label="Seite", font="Times"),
        Doc("Nordvik_Sensorik_Annual_Report_2023.pdf", "Nordvik Sensorik AG: Annual Report 2023",
            "Annual report of a fictional sensor manufacturer",
            parse_pages(REPORT_SOURCE, report_tables),
            header="Nordvik Sensorik AG · Annual Report 2023", folio_label="Page"),
        Doc("Retrieval_Evaluation_Notes.pdf", "Notes on Retrieval Evaluation",
            "Goldsets, metrics, hybrid retrieval, reranking and significance tests",
            parse_pages(EVALUATION_SOURCE)),
        Doc("Betriebsanleitung_Espressomaschine_Aurora_E20.pdf",
            "Betriebsanleitung Espressomaschine Aurora E20",
            "Bedienung, Reinigung und Störungsbehebung eines erfundenen Geräts",
            parse_pages(MANUAL_SOURCE, MANUAL_TABLES),
            header="Betriebsanleitung Espressomaschine Aurora E20", folio_label="Seite"),
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Write the localRAG sample corpus (five reproducible PDFs) into a folder.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="DIR",
                        help="folder to write the PDFs into, created if missing "
                             f"(default: {DEFAULT_OUT})")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out: Path = args.out
    try:
        docs = sample_docs()
        rendered = [(doc, build_pdf(doc)) for doc in docs]  # render all before writing any
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    for doc, data in rendered:
        (out / doc.filename).write_bytes(data)
        print(f"wrote {out / doc.filename} ({len(doc.pages)} pages)", file=sys.stderr)
    total = sum(len(doc.pages) for doc in docs)
    print(f"{len(docs)} files, {total} pages in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
