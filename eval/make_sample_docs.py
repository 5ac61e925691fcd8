#!/usr/bin/env python3
"""Render the shipped sample corpus for the retrieval evaluation: eval/sample_corpus/*.txt -> eval/docs/*.pdf.

The text lives in eval/sample_corpus, one plain-text file per PDF, in the page markup that folder's
README.md describes: edit a sentence there, not here. This script lays the pages out (fonts, styles, running
headers, table of contents, index) and computes what must add up (the annual report's key figures and chart).

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

Usage: python eval/make_sample_docs.py [--out DIR]   (after editing eval/sample_corpus; commit eval/docs)
"""

from __future__ import annotations

import argparse
import io
import re
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

CORPUS_DIR = Path(__file__).resolve().parent / "sample_corpus"  # the text: one .txt file per PDF
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
DOC_KEYS = {  # "key: value" lines at the top of a corpus file -> Doc field
    "title": "title", "subject": "subject", "header": "header", "page label": "folio_label",
    "first numbered page": "first_folio", "font": "font",
}
KEY_FIGURES_COLUMNS = (("EUR million", 4.4, "L"), ("2023", 1.1, "R"), ("2022", 1.1, "R"),
                       ("Change", 1.2, "R"))  # the report's key-figures table: heading, width, alignment


# --------------------------------------------------------------------------------------------
# Data model

Block = tuple  # ("p", text), ("h1", text), ("eq", formula, number), ... see parse_block


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
# The page markup of eval/sample_corpus (its README.md describes it)


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


def parse_table(lines: Sequence[str]) -> Block:
    """"@table W1 .. Wn ALIGN" (relative column widths, one L or R per column), then one "| a | b" line per
    row, the first the header; a one-cell row is a section label -> ("table", header, rows, widths, align)."""
    _, *widths, align = lines[0].split()
    if not widths or len(widths) != len(align) or set(align) - {"L", "R"} \
            or not all(re.fullmatch(r"\d+(\.\d*)?", width) for width in widths):
        raise ValueError(f"table line must read '@table 1.0 2.4 LR' (a width per column, then L or R "
                         f"per column), got {lines[0]!r}")
    rows = [tuple(cell.strip() for cell in item.split("|")) for item in _items(lines[1:], "| ")]
    if not rows:
        raise ValueError(f"{lines[0]!r} needs a header row '| a | b' below it")
    return ("table", rows[0], tuple(rows[1:]), tuple(map(float, widths)), align)


def parse_block(lines: Sequence[str]) -> Block:
    """One block of markup lines (no blank line inside) -> a content block tuple."""
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
        return parse_table(lines)
    if first == "@keyfigures":
        header, widths, align = zip(*KEY_FIGURES_COLUMNS)
        return ("table", header, key_figures_rows(), widths, "".join(align))
    if first.startswith("@chart "):
        return ("chart", first[len("@chart "):].strip())
    if first in ("@toc", "@index"):
        return (first[1:],)
    return ("p", _join(lines))


def parse_pages(source: str) -> tuple[Page, ...]:
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
            block = parse_block(chunk)
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


def parse_doc(filename: str, source: str) -> Doc:
    """A document from its corpus file: "key: value" lines (DOC_KEYS), then its pages (parse_pages)."""
    start = re.search(r"^=== ", source, flags=re.MULTILINE)
    if start is None:
        raise ValueError(f"{filename}: no page; a page starts with a '=== KIND' line")
    fields: dict[str, str | int] = {}
    for line in filter(str.strip, source[:start.start()].splitlines()):
        key, colon, value = line.partition(":")
        if not colon or key.strip() not in DOC_KEYS:
            raise ValueError(f"{filename}: {line!r} is no 'key: value' line; keys: {', '.join(DOC_KEYS)}")
        fields[DOC_KEYS[key.strip()]] = value.strip()
    missing = [key for key in ("title", "subject") if key not in fields]
    if missing:
        raise ValueError(f"{filename}: add the line(s) {', '.join(k + ': ...' for k in missing)} above the pages")
    if fields.get("font", "Helvetica") not in FONT_FAMILIES:
        raise ValueError(f"{filename}: font {fields['font']!r} is not one of {', '.join(FONT_FAMILIES)}")
    if "first_folio" in fields:
        if not str(fields["first_folio"]).isdigit():
            raise ValueError(f"{filename}: 'first numbered page' must be a page number, got {fields['first_folio']!r}")
        fields["first_folio"] = int(fields["first_folio"])
    try:
        pages = parse_pages(source[start.start():])
    except ValueError as error:
        raise ValueError(f"{filename}: {error}") from None
    return Doc(filename, pages=pages, **fields)


# --------------------------------------------------------------------------------------------
# The annual report's figures: its key-figures table (@keyfigures) and chart (@chart) agree

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


def _draw_image_page(canvas: Canvas, title: str) -> None:
    """A page holding one raster image and nothing else: no header, no footer, no text."""
    image = revenue_chart(SEGMENT_REVENUE, SEGMENTS, title)
    draw_width = PAGE_WIDTH - 2 * MARGIN_X
    draw_height = draw_width * image.height / image.width
    canvas.drawImage(ImageReader(image), MARGIN_X, (PAGE_HEIGHT - draw_height) / 2,
                     width=draw_width, height=draw_height)


def _draw_page(canvas: Canvas, doc: Doc, page_no: int, running: str,
               styles: Mapping[str, ParagraphStyle]) -> None:
    page = doc.pages[page_no - 1]
    if page.kind == "image":
        if [block[0] for block in page.blocks] != ["chart"]:
            raise ValueError(f"{doc.filename}: page {page_no} is an image page; it holds one '@chart TITLE' "
                             "line and nothing else")
        _draw_image_page(canvas, page.blocks[0][1])
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
# The corpus


def sample_docs() -> tuple[Doc, ...]:
    """The documents of CORPUS_DIR, one per .txt file in name order; each PDF is named after its file."""
    paths = sorted(CORPUS_DIR.glob("*.txt"))
    if not paths:
        raise ValueError(f"no .txt files in {CORPUS_DIR}; restore them with git checkout eval/sample_corpus")
    return tuple(parse_doc(unicodedata.normalize("NFC", path.stem) + ".pdf", path.read_text(encoding="utf-8"))
                 for path in paths)


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
