"""Tests of localrag/text/identity.py: the context line read from a file's name, metadata title and cover page."""
from __future__ import annotations

from localrag.text.identity import chunk_context, cover_facts, document_context, metadata_title, name_words

# A two-column SEC cover page as pypdfium2 reads it: the period's date stands on the next line, beside the
# commission file number (JPMorgan's 10-Q), and the registrant above "(Exact name of registrant ...)".
COVER_10Q = """UNITED STATES
SECURITIES AND EXCHANGE COMMISSION
FORM 10-Q
Quarterly report pursuant to Section 13 or 15(d) of
For the quarterly period ended Commission file
June 30, 2022 number 1-5805
JPMorgan Chase & Co.
(Exact name of registrant as specified in its charter)
Delaware 13-2624428"""
COVER_8K = """FORM 8-K
CURRENT REPORT
Date of Report (Date of earliest event reported): May 26, 2023
_______________________ PepsiCo, Inc.
(Exact name of registrant as specified in its charter)"""


def test_name_words_split_the_file_name():
    assert name_words("3M_2018_10K.pdf") == "3M 2018 10K"
    assert name_words("reports/PEPSICO_2023_8K_dated-2023-05-30.PDF") == "PEPSICO 2023 8K dated 2023 05 30"
    assert name_words("notes.txt") == "notes.txt"  # only a PDF extension is dropped


def test_metadata_titles_that_name_nothing_are_left_out():
    assert metadata_title("10-K - 02/07/2019 - 3M Company") == "10-K - 02/07/2019 - 3M Company"
    assert metadata_title("0001065280-16-000047") == ""  # an EDGAR accession number
    assert metadata_title("untitled") == ""  # reportlab's placeholder
    assert metadata_title("  ") == ""
    assert metadata_title("x" * 200) == "x" * 120


def test_cover_facts_of_a_10q_and_an_8k():
    assert cover_facts(COVER_10Q) == ["Form 10-Q", "quarterly period ended June 30, 2022", "JPMorgan Chase & Co."]
    # No "ended": the 8-K's report date; the rule of underscores before the name is not part of it.
    assert cover_facts(COVER_8K) == ["Form 8-K", "report dated May 26, 2023", "PepsiCo, Inc."]
    assert cover_facts("Chapter 1\nOptions are contracts.") == []


def test_document_context_leaves_out_a_part_another_one_holds():
    # "Form 10-Q" is inside the title, so it is not repeated; the name words come first.
    line = document_context("JPMORGAN_2022Q2_10Q.pdf", "JPMorgan Form 10-Q 2022", COVER_10Q)
    assert line == ("JPMORGAN 2022Q2 10Q | JPMorgan Form 10-Q 2022 | quarterly period ended June 30, 2022 | "
                    "JPMorgan Chase & Co.")
    assert document_context("notes.pdf", "", "") == "notes"


def test_chunk_context_adds_the_section():
    assert chunk_context("3M 2018 10K", "Item 8.  Financial Statements") == "3M 2018 10K | Item 8. Financial Statements"
    assert chunk_context("3M 2018 10K", None) == "3M 2018 10K"
    assert chunk_context("", "Intro") == "Intro"
