"""Tests for localrag/text/pages.py: the page convention and the chunk header written and stripped again."""

from __future__ import annotations

from localrag.text.pages import PAGE_OFFSET, chunk_header, shown_page, strip_chunk_header


def test_people_count_pages_from_one_loaders_from_zero():
    assert PAGE_OFFSET == 1
    assert [shown_page(page) for page in range(3)] == [1, 2, 3]


def test_chunk_header_names_the_file_and_the_page_people_see():
    assert chunk_header("options.pdf", 1) == "[options.pdf, page 2]\n"  # 0-based page 1 is the viewer's page 2


def test_strip_chunk_header_removes_only_the_first_indexer_line():
    assert strip_chunk_header(chunk_header("Hull, Options.pdf", 2) + "Vega is") == "Vega is"  # a comma in the name
    assert strip_chunk_header("Vega is\n[a.pdf, page 3]\nrest") == "Vega is\n[a.pdf, page 3]\nrest"
    # Not the indexer's form ("Seite" instead of "page"): left alone.
    assert strip_chunk_header("[a.pdf, Seite 3]\nVega") == "[a.pdf, Seite 3]\nVega"
