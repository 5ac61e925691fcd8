"""Checks of the shipped sample corpus (eval/docs), its text (eval/sample_corpus), its renderer and its goldset.
No models needed."""
from __future__ import annotations

import csv
import importlib.util
import os
import re
import sys
import unicodedata
from collections import defaultdict
from pathlib import Path

import pytest
from pypdf import PdfReader

ROOT = Path(__file__).resolve().parents[1]
DOCS_DIR = ROOT / "eval" / "docs"
GOLDSET = ROOT / "eval" / "goldset.csv"
TEMPLATE = ROOT / "eval" / "goldset_template.csv"
TEMPLATE_EN = ROOT / "eval" / "goldset_template_en.csv"
GOLDSET_HEADER = "frage;korpus;erwartete_quelle;erwartete_seite;anmerkung"
UMLAUT_NAME = unicodedata.normalize("NFC", "Literaturgeschichte_Überblick.pdf")
OPTIONS_NAME = "Options_Pricing_Lecture_Notes.pdf"
IMAGE_ONLY_PAGE = ("Nordvik_Sensorik_Annual_Report_2023.pdf", 4)  # (file, 1-based page)
BODY_CHARS = (1200, 2500)  # characters of extracted text a body page must hold (issue: chunking test)
EVIDENCE = re.compile(r"Beleg: »([^«]+)«")  # the anmerkung column quotes the answer's wording


def _load_generator():
    spec = importlib.util.spec_from_file_location("make_sample_docs", ROOT / "eval" / "make_sample_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


def _flat(text: str) -> str:
    """Whitespace runs -> one space, so that a phrase broken across lines still matches."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def page_texts() -> dict[str, list[str]]:
    """NFC file name -> whitespace-flattened text of each page, as pypdf extracts it."""
    return {unicodedata.normalize("NFC", path.name): [_flat(p.extract_text()) for p in PdfReader(path).pages]
            for path in sorted(DOCS_DIR.glob("*.pdf"))}


@pytest.fixture(scope="module")
def goldset_rows() -> list[dict[str, str]]:
    with GOLDSET.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter=";"))


# ---------------------------------------------------------------------------------------------
# Pure helpers of the generator


def test_pct_change_rounds_to_one_decimal_with_sign():
    # 612.4 / 565.5 = 1.082935... -> +8.3%; 95 / 100 = 0.95 -> -5.0%; no change still gets a sign.
    assert gen.pct_change(612.4, 565.5) == "+8.3%"
    assert gen.pct_change(95, 100) == "-5.0%"
    assert gen.pct_change(100, 100) == "+0.0%"
    with pytest.raises(ValueError, match="old value is 0"):
        gen.pct_change(5, 0)


def test_pp_change_hides_float_noise():
    # Trap: 11.7 - 10.5 is 1.1999999999999993 in binary floating point; printed it must be +1.2 pp.
    assert 11.7 - 10.5 != 1.2
    assert gen.pp_change(11.7, 10.5) == "+1.2 pp"
    assert gen.pp_change(52.1, 54.6) == "-2.5 pp"


def test_build_index_sorts_terms_case_insensitively_and_pages_ascending():
    # Trap: plain sorted() puts "Greeks" before "delta" (uppercase first); a printed index does not.
    # Pages come in as 10 then 7 for "delta" and must print as 7, 10.
    index = gen.build_index({10: ("delta", "Greeks"), 4: ("volatility",), 7: ("delta",), 14: ("Greeks", "gamma")})
    assert index == [("delta", [7, 10]), ("gamma", [14]), ("Greeks", [10, 14]), ("volatility", [4])]


def _doc(kinds: list[str], first_folio: int = 1, header: str | None = "Book") -> object:
    pages = tuple(gen.Page(kind, (("h1", f"Heading {i}"),) if kind == "body" else ())
                  for i, kind in enumerate(kinds, start=1))
    return gen.Doc("x.pdf", "X", "x", pages, header=header, first_folio=first_folio)


def test_folio_leaves_front_matter_unnumbered():
    # Pages: title, toc, body, body, index with folio 1 on physical page 3 -> None, None, 1, 2, 3.
    doc = _doc(["title", "toc", "body", "body", "index"], first_folio=3)
    assert [gen.folio(doc, n) for n in range(1, 6)] == [None, None, 1, 2, 3]
    plain = _doc(["body", "body"], header=None)  # no running header -> no printed numbers at all
    assert [gen.folio(plain, n) for n in (1, 2)] == [None, None]


def test_toc_entries_use_printed_page_numbers():
    doc = _doc(["title", "toc", "body", "body"], first_folio=3)
    # Physical pages 3 and 4 carry "Heading 3"/"Heading 4" and print as pages 1 and 2.
    assert gen.toc_entries(doc) == [(1, "Heading 3", 1), (1, "Heading 4", 2)]


def test_parse_pages_reads_each_block_kind():
    source = """
=== body
# Chapter 1

First line
second line.

$ a = b @ 1.1
$ c <= d @ 1.2

- one
  more
- two

: Term :: its meaning

@table 1 2.5 LR
| Name | Value
| Section
| a | long
  value

terms: alpha; beta
=== image
@chart Revenue by year
"""
    pages = gen.parse_pages(source)
    table = ("table", ("Name", "Value"), (("Section",), ("a", "long value")), (1.0, 2.5), "LR")
    assert pages == (
        gen.Page("body", (("h1", "Chapter 1"), ("p", "First line second line."), ("eq", "a = b", "1.1"),
                          ("eq", "c <= d", "1.2"), ("ul", ("one more", "two")), ("dl", (("Term", "its meaning"),)),
                          table),
                 ("alpha", "beta")),
        gen.Page("image", (("chart", "Revenue by year"),)),
    )


@pytest.mark.parametrize("line", ["@table 1 2 L", "@table 1 2 LX", "@table LR", "@table one 2 LR"])
def test_parse_table_rejects_widths_that_do_not_match_the_columns(line):
    with pytest.raises(ValueError, match="table line must read '@table 1.0 2.4 LR'"):
        gen.parse_table([line, "| a | b"])


def test_parse_doc_reads_the_keys_above_the_pages():
    source = "title: Notes: Part 1\nsubject: s\nheader: Notes\npage label: Seite\nfirst numbered page: 3\n" \
             "font: Times\n\n=== body\nText.\n"
    pages = (gen.Page("body", (("p", "Text."),)),)
    assert gen.parse_doc("x.pdf", source) == gen.Doc("x.pdf", "Notes: Part 1", "s", pages, header="Notes",
                                                      folio_label="Seite", first_folio=3, font="Times")
    # Only the title and subject are required; the rest keeps the defaults (no running header, no page numbers).
    assert gen.parse_doc("y.pdf", "title: T\nsubject: s\n=== body\nText.\n") == gen.Doc("y.pdf", "T", "s", pages)


@pytest.mark.parametrize("source, message", [
    ("title: T\nsubject: s\n", "x.pdf: no page; a page starts with a '=== KIND' line"),
    ("title: T\n=== body\nText.\n", r"x.pdf: add the line\(s\) subject: ... above the pages"),
    ("title: T\nsubject: s\nauthor: me\n=== body\n", "x.pdf: 'author: me' is no 'key: value' line; keys: title,"),
    ("title: T\nsubject: s\nfont: Arial\n=== body\n", "x.pdf: font 'Arial' is not one of Helvetica, Times"),
    ("title: T\nsubject: s\nfirst numbered page: three\n=== body\n", "'first numbered page' must be a page number"),
    ("title: T\nsubject: s\n=== cover\n", "x.pdf: unknown page kind 'cover'"),
])
def test_parse_doc_names_the_file_and_the_fix(source, message):
    with pytest.raises(ValueError, match=message):
        gen.parse_doc("x.pdf", source)


def test_image_page_holds_one_chart_and_nothing_else():
    doc = gen.Doc("x.pdf", "X", "x", gen.parse_pages("=== image\n@chart Revenue\n\nA caption.\n"))
    with pytest.raises(ValueError, match="x.pdf: page 1 is an image page; it holds one '@chart TITLE' line"):
        gen.build_pdf(doc)


def test_parse_pages_rejects_unknown_page_kind():
    with pytest.raises(ValueError, match="unknown page kind 'cover'"):
        gen.parse_pages("=== cover\ntext\n")


def test_doc_index_rejects_a_term_missing_from_its_page():
    page = gen.Page("body", (("p", "Gamma measures curvature."),), ("gamma", "vega"))
    doc = gen.Doc("x.pdf", "X", "x", (page,), header="Book")
    with pytest.raises(ValueError, match=r"\['vega'\] do not occur on page 1"):
        gen.doc_index(doc)


def test_overflowing_page_is_an_error_not_a_silent_page_break():
    # A page break would shift every later page and silently invalidate the goldset.
    page = gen.Page("body", (("p", "word " * 4000),))
    doc = gen.Doc("long.pdf", "Long", "x", (page,), header="Book")
    with pytest.raises(ValueError, match="long.pdf: page 1 overflows"):
        gen.build_pdf(doc)


def test_report_figures_add_up():
    # Segments and regions must both sum to group revenue: 318.7 + 201.5 + 92.2 = 612.4 and
    # 171.5 + 189.8 + 142.3 + 108.8 = 612.4 (2023); 296.4 + 183.9 + 85.2 = 565.5 = 164.2 + 176.0 + 127.9 + 97.4.
    for year, column in ((2023, 0), (2022, 1)):
        segments = round(sum(gen.SEGMENT_REVENUE[year]), 1)
        regions = round(sum(values[column] for values in gen.REGION_REVENUE.values()), 1)
        assert segments == regions == {2023: 612.4, 2022: 565.5}[year]


# ---------------------------------------------------------------------------------------------
# The committed corpus


def test_corpus_has_at_least_five_pdfs_and_forty_pages(page_texts):
    assert len(page_texts) >= 5
    assert sum(len(pages) for pages in page_texts.values()) >= 40


def test_umlaut_file_name_is_stored_in_nfc():
    names = os.listdir(DOCS_DIR)
    assert UMLAUT_NAME in names, f"expected the NFC name {UMLAUT_NAME!r} among {names}"


def test_committed_pdfs_are_byte_identical_to_a_fresh_run(tmp_path, capsys):
    assert gen.main(["--out", str(tmp_path)]) == 0
    fresh = sorted(unicodedata.normalize("NFC", p.name) for p in tmp_path.glob("*.pdf"))
    committed = sorted(unicodedata.normalize("NFC", p.name) for p in DOCS_DIR.glob("*.pdf"))
    assert committed == fresh, "eval/docs holds files the generator does not write, or misses some"
    stale = [name for name in fresh if (tmp_path / name).read_bytes() != (DOCS_DIR / name).read_bytes()]
    assert not stale, f"stale PDFs {stale}: rerun python eval/make_sample_docs.py and commit eval/docs"
    assert f"{OPTIONS_NAME} (17 pages)" in capsys.readouterr().err


def test_exactly_one_page_has_no_text_and_it_holds_an_image(page_texts):
    empty = [(name, n) for name, pages in page_texts.items() for n, text in enumerate(pages, start=1) if not text]
    assert empty == [IMAGE_ONLY_PAGE]
    name, number = IMAGE_ONLY_PAGE
    assert len(PdfReader(DOCS_DIR / name).pages[number - 1].images) == 1


def test_body_pages_hold_enough_text_for_chunking(page_texts):
    low, high = BODY_CHARS
    wrong = [(doc.filename, n, len(page_texts[doc.filename][n - 1]))
             for doc in gen.sample_docs() for n, page in enumerate(doc.pages, start=1)
             if page.kind == "body" and not low <= len(page_texts[doc.filename][n - 1]) <= high]
    assert not wrong, f"body pages outside {BODY_CHARS} characters: {wrong}"


def test_running_headers_and_page_footers_on_at_least_two_documents(page_texts):
    with_header = [doc for doc in gen.sample_docs() if doc.header]
    assert len(with_header) >= 2
    for doc in with_header:
        for n, page in enumerate(doc.pages, start=1):
            if page.kind in ("body", "index"):
                text = page_texts[doc.filename][n - 1]
                assert text.startswith(doc.header), (doc.filename, n)
                assert text.endswith(f"{doc.folio_label} {gen.folio(doc, n)}"), (doc.filename, n)


def test_front_matter_and_index_point_at_printed_pages(page_texts):
    pages = page_texts[OPTIONS_NAME]
    assert "Options Pricing: Lecture Notes" in pages[0] and "Page" not in pages[0]
    assert pages[1].startswith("Contents")
    assert "21.6 Estimating volatility 9" in pages[1]
    # The index says "implied volatility, 9": printed page 9 is physical page 11 (two unnumbered pages).
    assert "implied volatility, 9" in pages[-1]
    assert "implied volatility" in pages[10] and pages[10].endswith("Page 9")


# ---------------------------------------------------------------------------------------------
# The goldset


def test_goldset_header_and_encoding():
    raw = GOLDSET.read_bytes()
    assert not raw.startswith(b"\xef\xbb\xbf"), "goldset must be UTF-8 without BOM"
    assert raw.decode("utf-8").splitlines()[0] == GOLDSET_HEADER


def test_goldset_size_and_mix(goldset_rows):
    questions = {row["frage"] for row in goldset_rows}
    assert len(questions) >= 32
    assert len({row["korpus"] for row in goldset_rows}) >= 3
    keys = [(row["frage"], row["erwartete_quelle"], row["erwartete_seite"]) for row in goldset_rows]
    assert len(keys) == len(set(keys)), "a row is repeated"
    pages_per_question = defaultdict(set)
    for question, _, page in keys:
        pages_per_question[question].add(page)
    assert sum(len(pages) >= 2 for pages in pages_per_question.values()) >= 2


def test_goldset_rows_point_at_existing_pages(goldset_rows, page_texts):
    for row in goldset_rows:
        name = row["erwartete_quelle"]
        assert unicodedata.is_normalized("NFC", name), name
        assert name in page_texts, f"{name} is not in eval/docs"
        assert 1 <= int(row["erwartete_seite"]) <= len(page_texts[name]), row


def test_goldset_evidence_is_on_the_expected_pages_and_nowhere_else_in_that_file(goldset_rows, page_texts):
    expected = defaultdict(set)
    for row in goldset_rows:
        expected[row["frage"], row["erwartete_quelle"]].add(int(row["erwartete_seite"]))
    for row in goldset_rows:
        match = EVIDENCE.search(row["anmerkung"])
        assert match, f"anmerkung lacks 'Beleg: »...«': {row['anmerkung']!r}"
        phrase, name, page = match.group(1), row["erwartete_quelle"], int(row["erwartete_seite"])
        found = {n for n, text in enumerate(page_texts[name], start=1) if phrase in text}
        assert page in found, f"{phrase!r} not on {name} page {page}"
        assert found <= expected[row["frage"], name], f"{phrase!r} also on unlisted pages {found} of {name}"


def test_goldset_pages_are_physical_not_printed(goldset_rows, page_texts):
    # Trap: the options notes print "Page 9" on their 11th page; the goldset must say 11.
    (row,) = [r for r in goldset_rows if r["frage"] == "What does Equation 21.23 state?"]
    page = int(row["erwartete_seite"])
    assert page == 11
    assert page_texts[OPTIONS_NAME][page - 1].endswith("Page 9")


def test_template_has_header_and_two_commented_examples():
    lines = TEMPLATE.read_text(encoding="utf-8").splitlines()
    assert lines[0] == GOLDSET_HEADER + ";antwort"
    examples = [line for line in lines[1:] if line.strip()]
    assert len(examples) == 2 and all(line.startswith("# ") for line in examples)
    for line in examples:
        fields = line[2:].split(";")
        assert len(fields) == 6 and fields[3].isdigit() and fields[5], line


def test_the_english_template_reads_to_the_same_questions_as_the_german_one(tmp_path):
    """Both templates, their examples uncommented, read with the goldset reader: the same questions' structure
    (pages, corpus, note and reference answer given), the English one under its English headers."""
    from localrag.goldset.format import read_goldset

    assert TEMPLATE_EN.read_text(encoding="utf-8").splitlines()[0] == (
        "question;corpus;expected_source;expected_page;note;answer")
    read = {}
    for template in (TEMPLATE, TEMPLATE_EN):
        text = template.read_text(encoding="utf-8").replace("\n# ", "\n")
        (tmp_path / template.name).write_text(text, encoding="utf-8")
        goldset = read_goldset(tmp_path / template.name)
        assert goldset.messages == [], template.name
        read[template.name] = [(len(q.locations), [loc.page for loc in q.locations], bool(q.corpus), bool(q.note),
                                bool(q.reference)) for q in goldset.questions]
    assert read["goldset_template.csv"] == read["goldset_template_en.csv"] == [(1, [12], True, True, True),
                                                                              (1, [57], True, True, True)]
