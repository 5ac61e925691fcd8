"""Tests for localrag/goldset/format.py: reading CSV/JSONL goldsets and matching chunks to expected locations."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from pathlib import Path

import pytest

from localrag import files
from localrag.goldset.format import (CSV_COLUMNS, PAGE_TOLERANCE, WRITTEN_FIELDS, Goldset, GoldsetError, GoldsetRow, GoldQuestion,
                                     Location, detect_delimiter, files_by_name, first_match_rank, location_matches,
                                     matching_files, normalize_source, parse_page, query_id, read_goldset, same_file,
                                     source_parts, write_goldset_csv)
from localrag.text.pages import PAGE_OFFSET

BOM = "\ufeff"


def write(tmp_path: Path, text: str, name: str = "gold.csv", encoding: str = "utf-8") -> Path:
    """Write text byte-exactly (no newline translation) and return the path."""
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def qid(question: str) -> str:
    return hashlib.sha1(question.encode("utf-8")).hexdigest()[:10]


# ---------------------------------------------------------------------------------------------
# Constants


def test_constants_are_one_based_goldset_and_one_page_tolerance() -> None:
    assert (PAGE_OFFSET, PAGE_TOLERANCE) == (1, 1)


# ---------------------------------------------------------------------------------------------
# Delimiter, BOM, headers


@pytest.mark.parametrize("bom", ["", BOM])
def test_semicolon_with_and_without_bom_and_quoted_comma(tmp_path: Path, bom: str) -> None:
    # German Excel: ';' delimiter; the question holds a ',' inside quotes, which must stay in it.
    text = (
        bom + "frage;korpus;erwartete_quelle;erwartete_seite;anmerkung\r\n"
        '"Wie hoch war der Umsatz, netto?";berichte;Bericht.pdf;12;Tabelle 3\r\n'
    )
    gold = read_goldset(write(tmp_path, text))
    assert gold.messages == []
    assert gold.questions == [
        GoldQuestion(
            query_id=qid("Wie hoch war der Umsatz, netto?"),
            question="Wie hoch war der Umsatz, netto?",
            corpus="berichte",
            locations=(Location("Bericht.pdf", 12),),
            note="Tabelle 3",
            lines=(2,),
        )
    ]


@pytest.mark.parametrize("bom", ["", BOM])
def test_comma_with_and_without_bom(tmp_path: Path, bom: str) -> None:
    # The header's first name must not keep the BOM, or 'frage' would be unknown.
    text = bom + "frage,erwartete_quelle\nWas kostet X?,x.pdf\n"
    gold = read_goldset(write(tmp_path, text))
    assert [(q.question, q.locations, q.corpus, q.note) for q in gold.questions] == [
        ("Was kostet X?", (Location("x.pdf", None),), None, "")
    ]


def test_semicolon_in_comma_file_stays_in_field(tmp_path: Path) -> None:
    # Trap: the header decides ',' (2 known names against 0 for ';'); the ';' in a row is text.
    text = "question,expected_source\nA; or B?,a.pdf\n"
    gold = read_goldset(write(tmp_path, text))
    assert gold.questions[0].question == "A; or B?"


def test_detect_delimiter() -> None:
    assert detect_delimiter("frage;erwartete_quelle") == ";"
    assert detect_delimiter("frage,erwartete_quelle") == ","
    # Unknown names: ';' gives 3 fields against 1 -> ';'.
    assert detect_delimiter("a;b;c") == ";"
    # Known names win over field count: ',' -> ['frage', 'x;y;erwartete_quelle', 'z'] = 1 known;
    # ';' -> ['frage,x', 'y', 'erwartete_quelle,z'] = 3 fields but 0 known -> ','.
    assert detect_delimiter("frage,x;y;erwartete_quelle,z") == ","
    # 'frage;erwartete_quelle,extra': ';' -> ['frage', 'erwartete_quelle,extra'] = 1 known;
    # ',' -> ['frage;erwartete_quelle', 'extra'] = 0 known -> ';'.
    assert detect_delimiter("frage;erwartete_quelle,extra") == ";"
    # Nothing to tell them apart (one field each, none known): the tie goes to ','.
    assert detect_delimiter("x") == ","


def test_english_headers_with_case_and_whitespace(tmp_path: Path) -> None:
    text = " Question ; CORPUS;Expected_Source ;  expected_page;Note \nWhat is X?;docs;x.pdf;3;n\n"
    gold = read_goldset(write(tmp_path, text))
    assert gold.questions == [
        GoldQuestion(qid("What is X?"), "What is X?", "docs", (Location("x.pdf", 3),), "n", (2,))
    ]


def test_columns_in_any_order_and_mixed_languages(tmp_path: Path) -> None:
    text = "erwartete_seite,expected_source,frage\n7,a.pdf,Q?\n"
    gold = read_goldset(write(tmp_path, text))
    assert gold.questions[0].locations == (Location("a.pdf", 7),)


def test_missing_required_header_exact_message(tmp_path: Path) -> None:
    path = write(tmp_path, "frage;korpus;seite\nQ?;k;1\n")
    with pytest.raises(GoldsetError) as info:
        read_goldset(path)
    assert str(info.value) == (
        f"{path}: unknown column(s) seite; missing required column(s) erwartete_quelle/expected_source. "
        "Found: frage, korpus, seite. Expected: frage, korpus, erwartete_quelle, erwartete_seite, anmerkung, "
        "antwort (German) or question, corpus, expected_source, expected_page, note, answer (English); only the "
        "question and "
        "the source are required. Rename the columns in the header line."
    )


def test_repeated_header_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "frage,question,erwartete_quelle\nQ?,Q?,a.pdf\n")
    with pytest.raises(GoldsetError, match=r"repeated column\(s\) question\. Found: frage, question, "):
        read_goldset(path)


def test_trailing_empty_header_names_are_ignored(tmp_path: Path) -> None:
    # Spreadsheets append empty columns: 'frage;erwartete_quelle;;'.
    gold = read_goldset(write(tmp_path, "frage;erwartete_quelle;;\nQ?;a.pdf;;\n"))
    assert gold.questions[0].locations == (Location("a.pdf", None),)
    assert gold.messages == []


# ---------------------------------------------------------------------------------------------
# Skipped rows and messages


def test_skipped_rows_and_bad_page_exact_messages(tmp_path: Path) -> None:
    # Physical lines: 1 comment, 2 header, 3 ok, 4 empty, 5 no question, 6 comment, 7 no source,
    # 8 page 'S. 4', 9 row with an unquoted ',' (6 fields for 5 columns), 10 ';;;;'-like blank row.
    text = (
        "# Goldset für den Test\n"
        "frage,korpus,erwartete_quelle,erwartete_seite,anmerkung\n"
        "Q1?,k,a.pdf,2,\n"
        "\n"
        ",k,a.pdf,3,\n"
        "# noch ein Kommentar\n"
        "Q2?,k,,4,\n"
        "Q3?,k,b.pdf,Seite vier,\n"
        "Q4 a, b?,k,c.pdf,5,\n"
        ",,,,\n"
    )
    gold = read_goldset(write(tmp_path, text))
    assert gold.messages == [
        "line 5: no question in column 'frage'; row skipped",
        "line 7: no source in column 'erwartete_quelle' for \"Q2?\"; row skipped",
        "line 8: page 'Seite vier' in column 'erwartete_seite' is not a page; write 12, 12-13, S. 12, Seite 12 or p. 12; the question is left out of the metrics until the page is fixed",
        "line 9: 6 fields but the header has 5; put a field that contains ',' in double quotes or remove a stray one; row skipped",
    ]
    # Q3 is kept with its unusable location (it matches nothing; the evaluation leaves the question out), never
    # widened to any page of b.pdf.
    assert [(q.question, q.locations, q.lines) for q in gold.questions] == [
        ("Q1?", (Location("a.pdf", 2),), (3,)),
        ("Q3?", (Location("b.pdf", problem="page 'Seite vier' in column 'erwartete_seite' is not a page; write 12, 12-13, S. 12, Seite 12 or p. 12; "
                                   "the question is left out of the metrics until the page is fixed"),), (8,)),
    ]


def test_messages_use_english_column_names_of_an_english_file(tmp_path: Path) -> None:
    text = "question;expected_source;expected_page\n;a.pdf;1\nQ?;a.pdf;eins\n"
    gold = read_goldset(write(tmp_path, text))
    assert gold.messages == [
        "line 2: no question in column 'question'; row skipped",
        "line 3: page 'eins' in column 'expected_page' is not a page; write 12, 12-13, S. 12, Seite 12 or p. 12; the question is left out of the metrics until the page is fixed",
    ]


def test_line_numbers_count_physical_lines_of_a_multiline_field(tmp_path: Path) -> None:
    # Row 2 spans lines 2-3 (quoted line break); the next row starts on line 4 and lacks a source.
    text = 'frage;erwartete_quelle\n"Erste\nFrage?";a.pdf\nQ2?;\n'
    gold = read_goldset(write(tmp_path, text))
    assert gold.questions[0].question == "Erste Frage?"  # line break normalised to a space
    assert gold.questions[0].lines == (2,)
    assert gold.messages == [
        "line 2: the row runs over lines 2-3 (a quoted field holds a line break); check for an unclosed double quote",
        "line 4: no source in column 'erwartete_quelle' for \"Q2?\"; row skipped",
    ]


def test_crlf_and_comment_before_header(tmp_path: Path) -> None:
    text = "# comment\r\n\r\nfrage;erwartete_quelle\r\nQ?;a.pdf\r\n#x;y\r\n"
    gold = read_goldset(write(tmp_path, text))
    assert [q.lines for q in gold.questions] == [(4,)]
    assert gold.messages == []


def test_comment_with_quote_does_not_swallow_rows(tmp_path: Path) -> None:
    # Trap: fed to csv, '# a;"b' would open a quoted field running to the end of the file.
    text = 'frage;erwartete_quelle\n# a;"b\nQ?;a.pdf\n'
    gold = read_goldset(write(tmp_path, text))
    assert [(q.question, q.lines) for q in gold.questions] == [("Q?", (3,))]


def test_page_values(tmp_path: Path) -> None:
    text = ("frage;erwartete_quelle;erwartete_seite\nA?;a.pdf; 81 \nB?;a.pdf;81.0\nC?;a.pdf;-1\nD?;a.pdf;81.5\n"
            "E?;a.pdf;12-13\nF?;a.pdf;S. 12\nG?;a.pdf;0\nH?;a.pdf;13-12\n")
    gold = read_goldset(write(tmp_path, text))
    assert [(q.locations[0].page, q.locations[0].last_page) for q in gold.questions] == [
        (81, None), (81, None), (None, None), (None, None), (12, 13), (12, None), (None, None), (None, None)]
    first = "is before the first page; pages count from 1, as a PDF viewer shows them"
    assert gold.messages == [
        f"line 4: page '-1' in column 'erwartete_seite' {first}; the question is left out of the metrics until the page is fixed",
        "line 5: page '81.5' in column 'erwartete_seite' is not a page; write 12, 12-13, S. 12, Seite 12 or p. 12; the question is left out of the metrics until the page is fixed",
        f"line 8: page '0' in column 'erwartete_seite' {first}; the question is left out of the metrics until the page is fixed",
        "line 9: page '13-12' in column 'erwartete_seite' is a range that runs backwards; write the first page "
        "first, e.g. 12-13; the question is left out of the metrics until the page is fixed",
    ]
    assert [bool(q.locations[0].problem) for q in gold.questions] == [False, False, True, True, False, False, True,
                                                                       True]


def test_parse_page() -> None:
    good = ("7", " 7 ", "7.00", 7, 7.0, None, "", "  ", "12-13", "12 – 13", "12-12", "S. 12", "s.12", "Seite 12",
            "p. 12", "pp. 12-13", "page 12")
    assert [parse_page(v) for v in good] == [(7, None)] * 5 + [None] * 3 + [
        (12, 13), (12, 13), (12, None), (12, None), (12, None), (12, None), (12, None), (12, 13), (12, None)]
    for bad, why in (("7.5", "is not a page"), ("-1", "is before the first page"), ("0", "is before the first page"),
                     (0, "is before the first page"), (-1, "is before the first page"), ("S. 0", "is before"),
                     ("13-12", "is a range that runs backwards"), ("Seite zwölf", "is not a page"),
                     ("1e2", "is not a page"), (7.5, "is not a whole page number"), (True, "is not a page"),
                     (float("nan"), "is not a whole page number"), ([7], "is not a page"), ("12, 14", "is not")):
        with pytest.raises(ValueError, match=f"^{why}"):
            parse_page(bad)


def test_a_range_matches_every_page_in_it_and_a_bad_page_matches_nothing() -> None:
    pages = Location("a.pdf", 12, 13)
    # 0-based pages 11 and 12 are the range; ±1 reaches 10 and 13.
    assert [location_matches("a.pdf", [p], pages, page_offset=1, tolerance=0) for p in (10, 11, 12, 13)] == [
        False, True, True, False]
    assert [location_matches("a.pdf", [p], pages, page_offset=1, tolerance=1) for p in (9, 10, 13, 14)] == [
        False, True, True, False]
    assert not location_matches("a.pdf", [0, 1, 2], Location("a.pdf", problem="bad page"), tolerance=5)
    assert (pages.page_text(), Location("a.pdf", 12).page_text(), Location("a.pdf").page_text()) == ("12-13", "12", "")


# ---------------------------------------------------------------------------------------------
# File-level errors


def test_missing_file_names_the_template(tmp_path: Path) -> None:
    path, template = tmp_path / "nope.csv", tmp_path / "eval" / "goldset_template.csv"
    with pytest.raises(GoldsetError) as info:
        read_goldset(path, template)
    assert str(info.value) == (
        f"goldset not found: {path}. Start from the template {template}: copy it to {path} "
        "and write one row per question and expected location."
    )
    english = tmp_path / "eval" / "goldset_template_en.csv"
    with pytest.raises(GoldsetError) as info:
        read_goldset(path, (english, template))
    assert str(info.value) == (
        f"goldset not found: {path}. Start from the template {english} or {template}: copy one to {path} "
        "and write one row per question and expected location."
    )
    with pytest.raises(GoldsetError) as info:
        read_goldset(path)  # a caller without a template to offer
    assert str(info.value) == f"goldset not found: {path}; check the path."


def test_no_usable_rows_lists_the_reasons(tmp_path: Path) -> None:
    path = write(tmp_path, "frage;erwartete_quelle\n;a.pdf\n# nur Kommentar\nQ?;\n")
    with pytest.raises(GoldsetError) as info:
        read_goldset(path)
    assert str(info.value) == (
        f"{path}: no usable rows; every row needs a question and an expected source."
        "\n  line 2: no question in column 'frage'; row skipped"
        "\n  line 4: no source in column 'erwartete_quelle' for \"Q?\"; row skipped"
    )


def test_header_only_file_has_no_usable_rows(tmp_path: Path) -> None:
    path = write(tmp_path, "frage;erwartete_quelle\n")
    with pytest.raises(GoldsetError, match="no usable rows"):
        read_goldset(path)


def test_only_comments_means_no_header(tmp_path: Path) -> None:
    path = write(tmp_path, "# a\n\n# b\n")
    with pytest.raises(GoldsetError, match=r"no header line \(the file is empty or holds only comments\)"):
        read_goldset(path)


def test_not_utf8_names_the_line_and_the_fix(tmp_path: Path) -> None:
    # cp1252 'Ü' is byte 0xdc; it sits on line 2.
    path = write(tmp_path, "frage;erwartete_quelle\nWie hoch ist der Überschuss?;a.pdf\n", encoding="cp1252")
    with pytest.raises(GoldsetError) as info:
        read_goldset(path)
    assert str(info.value) == (
        f"{path}: line 2 is not UTF-8 (byte 0xdc); save the file as 'CSV UTF-8' (Excel) or with UTF-8 encoding."
    )


def test_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(GoldsetError, match="is a folder"):
        read_goldset(tmp_path)


# ---------------------------------------------------------------------------------------------
# Merging alternative locations and query ids


def test_alternative_locations_are_merged(tmp_path: Path) -> None:
    # Lines 2, 4 and 5 are the same question once whitespace is collapsed; line 5 repeats line 2's
    # location (bericht.pdf == Bericht.PDF, page 3) and names another corpus. First corpus/note kept.
    text = (
        "frage;korpus;erwartete_quelle;erwartete_seite;anmerkung\n"
        "Wie hoch ist X?;k1;Bericht.pdf;3;erste\n"
        "Andere Frage?;k1;b.pdf;;\n"
        "  Wie  hoch ist\tX? ;k1;Bericht.pdf;4;zweite\n"
        "Wie hoch ist X?;k2;bericht.PDF;3;dritte\n"
    )
    gold = read_goldset(write(tmp_path, text))
    assert gold.questions == [
        GoldQuestion(
            query_id=qid("Wie hoch ist X?"),
            question="Wie hoch ist X?",
            corpus="k1",
            locations=(Location("Bericht.pdf", 3), Location("Bericht.pdf", 4)),
            note="erste",
            lines=(2, 4, 5),
        ),
        GoldQuestion(qid("Andere Frage?"), "Andere Frage?", "k1", (Location("b.pdf", None),), "", (3,)),
    ]
    assert gold.messages == [
        "line 5: same question as line 2 but corpus 'k2' instead of 'k1'; the first row's corpus is kept",
        "line 5: repeats a location of line 2; ignored",
    ]


def test_the_same_page_of_two_folders_files_is_two_locations(tmp_path: Path) -> None:
    # Issue 52: sub1/Same.pdf and sub2/Same.pdf are two files, so their page 3 is not a repeat.
    text = ("frage;erwartete_quelle;erwartete_seite\n"
            "Wo steht X?;sub1/Same.pdf;3\nWo steht X?;sub2/Same.pdf;3\nWo steht X?;SUB2\\same;3\n")
    gold = read_goldset(write(tmp_path, text))
    assert gold.questions[0].locations == (Location("sub1/Same.pdf", 3), Location("sub2/Same.pdf", 3))
    assert gold.messages == ["line 4: repeats a location of line 3; ignored"]


def test_query_id_is_sha1_of_normalised_question_and_survives_reordering(tmp_path: Path) -> None:
    # sha1("abc") = a9993e364706816aba3e25717850c26c9cd0d89d (FIPS 180 test vector) -> "a9993e3647".
    assert query_id("abc") == "a9993e3647"
    assert query_id("  a\u0308bc ") == query_id("\u00e4bc")  # whitespace and NFD/NFC do not change it
    one = read_goldset(write(tmp_path, "frage,erwartete_quelle\nabc,a.pdf\nxyz,b.pdf\n", "one.csv"))
    two = read_goldset(write(tmp_path, "frage,erwartete_quelle\nxyz,b.pdf\nabc,a.pdf\n", "two.csv"))
    assert {q.question: q.query_id for q in one.questions} == {q.question: q.query_id for q in two.questions}
    assert [q.question for q in two.questions] == ["xyz", "abc"]  # order of first appearance


def test_goldset_object(tmp_path: Path) -> None:
    path = write(tmp_path, "frage,erwartete_quelle\nQ?,a.pdf\n")
    gold = read_goldset(str(path))
    assert isinstance(gold, Goldset) and gold.path == path


# ---------------------------------------------------------------------------------------------
# JSONL


X_PAGE = 'page "x" of location 1 is not a page; write 12, 12-13, S. 12, Seite 12 or p. 12; the question is left out of the metrics until the page is fixed'


def test_jsonl_with_bad_lines(tmp_path: Path) -> None:
    lines = [
        json.dumps({"question": "Q1?", "corpus": "k", "locations": [{"source": "a.pdf", "page": 5}], "note": "n"}),
        "{not json",
        "",
        "# comment",
        json.dumps(["a list"]),
        json.dumps({"question": "Q2?", "locations": [{"source": "b.pdf", "page": "x"}, {"page": 3}]}),
        json.dumps({"question": "Q3?", "locations": []}),
        json.dumps({"question": " Q1? ", "locations": [{"source": "a.pdf", "page": 6}, {"source": "c.pdf"}]}),
        json.dumps({"locations": [{"source": "a.pdf"}]}),
    ]
    path = write(tmp_path, BOM + "\n".join(lines) + "\n", "gold.jsonl")
    gold = read_goldset(path)
    assert gold.questions == [
        GoldQuestion(
            qid("Q1?"), "Q1?", "k", (Location("a.pdf", 5), Location("a.pdf", 6), Location("c.pdf", None)), "n", (1, 8)
        ),
        GoldQuestion(qid("Q2?"), "Q2?", None, (Location("b.pdf", problem=X_PAGE),), "", (6,)),
    ]
    assert gold.messages == [
        "line 2: not valid JSON (Expecting property name enclosed in double quotes at column 2); line skipped",
        "line 5: expected a JSON object, got list; line skipped",
        f"line 6: {X_PAGE}",
        'line 6: location 2 has no "source"; location skipped',
        'line 7: no usable "locations" (a list of {"source", "page"}) for "Q3?"; line skipped',
        'line 9: no "question"; line skipped',
    ]


def test_a_question_without_visible_text_or_with_a_lone_surrogate_is_a_reader_problem(tmp_path: Path) -> None:
    """One rule with the retriever's (localrag/text/query.py): a JSONL "\\ud800" escape reached query_id's UTF-8
    encoding (UnicodeEncodeError), and a zero-width question was read as a question."""
    lines = [json.dumps({"question": "vega \ud800", "locations": [{"source": "a.pdf"}]}),  # the escape, as written
             json.dumps({"question": "\u200b\u200b", "locations": [{"source": "a.pdf"}]}),
             json.dumps({"question": "What is vega?", "locations": [{"source": "a.pdf"}]})]
    assert lines[0] == '{"question": "vega \\ud800", "locations": [{"source": "a.pdf"}]}'
    gold = read_goldset(write(tmp_path, "\n".join(lines) + "\n", "gold.jsonl"))
    assert [q.question for q in gold.questions] == ["What is vega?"]
    assert gold.messages == [
        "line 1: the \"question\" 'vega \\ud800' holds U+D800 (character 6), a lone surrogate, which is not valid "
        "Unicode; line skipped",
        "line 2: the \"question\" '\\u200b\\u200b' has no visible text, only U+200B; line skipped"]
    csv = write(tmp_path, "question,expected_source\n\ufeff\u00ad,a.pdf\nWhat is vega?,a.pdf\n")
    gold = read_goldset(csv)
    assert [q.question for q in gold.questions] == ["What is vega?"]
    assert gold.messages == ["line 2: the question '\\ufeff\\xad' in column 'question' has no visible text, only "
                             "U+FEFF, U+00AD; row skipped"]


def test_jsonl_without_usable_lines_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "{bad\n", "gold.jsonl")
    with pytest.raises(GoldsetError, match=r"no usable rows.*\n  line 1: not valid JSON"):
        read_goldset(path)


# ---------------------------------------------------------------------------------------------
# Source names


def test_nfd_and_nfc_names_are_the_same_file() -> None:
    nfd = unicodedata.normalize("NFD", "Prüfbericht.pdf")  # as macOS stores it: 'u' + U+0308
    assert nfd != "Prüfbericht.pdf"
    assert same_file(nfd, "Prüfbericht.pdf")
    assert normalize_source(nfd) == "prüfbericht"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Bericht_.pdf", "bericht.pdf"),
        ("bericht.", "Bericht.pdf"),
        ("Bericht .PDF", "bericht"),
        ("BERICHT", "bericht.pdf"),
        ("docs/sub/Bericht.pdf", "Bericht.pdf"),
        ("C:\\Users\\anna\\docs\\sub1\\Bericht.pdf", "sub1/bericht.pdf"),  # a path ending in the indexed one
        ("./sub1/Same.pdf", "docs/SUB1/same"),
        ("Straße.pdf", "STRASSE.pdf"),  # casefold, not lower: 'ß' -> 'ss'
    ],
)
def test_same_file(a: str, b: str) -> None:
    assert same_file(a, b) and same_file(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Bericht_2022.pdf", "Bericht 2022.pdf"),  # inner characters count
        ("bericht.pdf.bak", "bericht.pdf"),
        ("bericht.txt", "bericht.pdf"),  # only .pdf is dropped
        ("2022/bericht.pdf", "2022.pdf"),  # the folder is not the file
        ("", ""),  # empty names match nothing
        ("./", "."),
        # Issue 52: two files of one name in two folders are two files once a folder is given.
        ("sub1/Same.pdf", "sub2/Same.pdf"),
        ("C:\\docs\\sub1\\Same.pdf", "sub2/same.pdf"),
        ("C:\\Users\\anna\\Bericht.pdf", "/home/anna/bericht.pdf"),  # neither path ends in the other
    ],
)
def test_not_same_file(a: str, b: str) -> None:
    assert not same_file(a, b)


def test_normalize_source() -> None:
    assert normalize_source("C:\\docs\\Bericht_.PDF") == "bericht"
    assert normalize_source(" a/b/Jahres.Bericht.pdf_ ") == "jahres.bericht"


def test_source_parts_and_the_files_a_name_matches() -> None:
    assert source_parts("C:\\docs\\Sub1\\Bericht_.PDF") == ("c:", "docs", "sub1", "bericht")
    assert source_parts("./sub1//Same.pdf") == ("sub1", "same")
    assert source_parts("sub1/") == ()
    by_name = files_by_name(["sub2/Same.pdf", "sub1/Same.pdf", "Other.pdf"])
    assert by_name == {"same": ["sub1/Same.pdf", "sub2/Same.pdf"], "other": ["Other.pdf"]}
    assert [matching_files(name, by_name) for name in ("Same.pdf", "SUB2\\same", "sub3/Same.pdf", "x/Other")] == [
        ["sub1/Same.pdf", "sub2/Same.pdf"], ["sub2/Same.pdf"], [], ["Other.pdf"]]


def test_a_page_of_the_other_folders_file_is_no_hit() -> None:
    # Issue 52: "sub1/Same.pdf;3" was credited at rank 1 from sub2/Same.pdf's page 3.
    retrieved = [("sub2/Same.pdf", [2]), ("sub1/Same.pdf", [7]), ("sub1/Same.pdf", [2])]
    assert first_match_rank(retrieved, [Location("sub1/Same.pdf", 3)], tolerance=0) == 3
    assert first_match_rank(retrieved, [Location("sub2/Same.pdf", 3)], tolerance=0) == 1
    assert first_match_rank(retrieved[:2], [Location("docs/sub1/Same.pdf", 3)], tolerance=0) is None


# ---------------------------------------------------------------------------------------------
# Page matching


@pytest.mark.parametrize(
    ("found", "tolerance", "hit"),
    [
        # Expected page 10 (1-based) -> 9 (0-based); tolerance 1 accepts found pages 8..10.
        (9, 1, True),
        (8, 1, True),  # |8 - 9| = 1 = tolerance: hit
        (10, 1, True),
        (7, 1, False),  # |7 - 9| = 2: one beyond
        (11, 1, False),
        (9, 0, True),
        (10, 0, False),  # trap: page 10 is the *written* number, but the found pages are 0-based
        (6, 3, True),  # |6 - 9| = 3
        (5, 3, False),
    ],
)
def test_page_offset_and_tolerance_edges(found: int, tolerance: int, hit: bool) -> None:
    assert location_matches("a.pdf", [found], Location("a.pdf", 10), page_offset=1, tolerance=tolerance) is hit


def test_page_offset_zero_for_zero_based_goldsets() -> None:
    # Offset 0: expected 10 stays 10; found 9 is 1 away.
    assert location_matches("a.pdf", [9], Location("a.pdf", 10), page_offset=0, tolerance=1)
    assert not location_matches("a.pdf", [9], Location("a.pdf", 10), page_offset=0, tolerance=0)


def test_defaults_are_the_module_constants() -> None:
    # Expected 10 -> 0-based 9; found 10 is within 1, found 11 is not.
    assert location_matches("a.pdf", [10], Location("a.pdf", 10))
    assert not location_matches("a.pdf", [11], Location("a.pdf", 10))


def test_chunk_spanning_pages_counts_for_each_page() -> None:
    # Chunk covers 0-based pages 4 and 5; expected page 7 (-> 6), tolerance 0: only a page 6 would hit.
    assert not location_matches("a.pdf", [4, 5], Location("a.pdf", 7), page_offset=1, tolerance=0)
    assert location_matches("a.pdf", [5, 6], Location("a.pdf", 7), page_offset=1, tolerance=0)
    assert location_matches("a.pdf", (6, 5), Location("a.pdf", 6), page_offset=1, tolerance=0)  # page 5 covered


def test_no_expected_page_lets_the_file_decide() -> None:
    assert location_matches("x/A.pdf", [], Location("a", None), page_offset=1, tolerance=0)
    assert not location_matches("b.pdf", [0], Location("a.pdf", None), page_offset=1, tolerance=0)


def test_chunk_without_pages_cannot_hit_a_page() -> None:
    assert not location_matches("a.pdf", [], Location("a.pdf", 1), page_offset=1, tolerance=5)


def test_right_page_of_wrong_file_is_a_miss() -> None:
    assert not location_matches("b.pdf", [2], Location("a.pdf", 3), page_offset=1, tolerance=1)


def test_negative_tolerance_is_rejected() -> None:
    with pytest.raises(ValueError, match="tolerance must be >= 0, got -1"):
        location_matches("a.pdf", [0], Location("a.pdf", 1), page_offset=1, tolerance=-1)


# ---------------------------------------------------------------------------------------------
# First match rank


def test_first_match_rank_skips_right_file_wrong_page() -> None:
    # Gold: bericht.pdf page 20 (-> 0-based 19) or anhang.pdf page 3 (-> 2), tolerance 1.
    # Rank 1: right file, page 5: |5-19| = 14 -> miss (trap).
    # Rank 2: other file, page 19 -> miss (right page, wrong file).
    # Rank 3: Bericht.PDF pages 17+18: |18-19| = 1 -> hit.
    # Rank 4: anhang.pdf page 2 would also hit, but rank 3 comes first.
    retrieved = [
        ("bericht.pdf", [5]),
        ("other.pdf", [19]),
        ("docs/Bericht.PDF", [17, 18]),
        ("anhang.pdf", [2]),
    ]
    locations = [Location("bericht.pdf", 20), Location("anhang.pdf", 3)]
    assert first_match_rank(retrieved, locations, page_offset=1, tolerance=1) == 3
    # With tolerance 0 rank 3 misses (|18-19| = 1 > 0) and the alternative location at rank 4 hits.
    assert first_match_rank(retrieved, locations, page_offset=1, tolerance=0) == 4


def test_first_match_rank_none_and_empty() -> None:
    assert first_match_rank([("a.pdf", [0])], [Location("b.pdf", 1)], page_offset=1, tolerance=1) is None
    assert first_match_rank([], [Location("a.pdf", 1)], page_offset=1, tolerance=1) is None
    assert first_match_rank([("a.pdf", [0])], [], page_offset=1, tolerance=1) is None


def test_first_match_rank_accepts_a_generator_of_locations() -> None:
    # Locations are iterated once per chunk; a generator must not run dry after rank 1.
    locations = (loc for loc in [Location("a.pdf", 1)])
    assert first_match_rank([("b.pdf", [0]), ("a.pdf", [0])], locations, page_offset=1, tolerance=0) == 2


def test_rows_with_fewer_fields_than_the_header_are_kept(tmp_path: Path) -> None:
    # Hand-written rows may leave out trailing optional cells: line 2 has 2 of 5 fields.
    text = "frage;erwartete_quelle;erwartete_seite;korpus;anmerkung\nQ?;a.pdf\n"
    gold = read_goldset(write(tmp_path, text))
    assert gold.questions == [GoldQuestion(qid("Q?"), "Q?", None, (Location("a.pdf", None),), "", (2,))]
    assert gold.messages == []


def test_trailing_delimiter_beyond_the_header_is_skipped(tmp_path: Path) -> None:
    # 3 fields for 2 columns: cannot tell a stray ';' from shifted cells, so the row is refused.
    gold = read_goldset(write(tmp_path, "frage;erwartete_quelle\nQ?;a.pdf;\nR?;b.pdf\n"))
    assert [q.question for q in gold.questions] == ["R?"]
    assert gold.messages == [
        "line 2: 3 fields but the header has 2; put a field that contains ';' in double quotes or remove a stray one; row skipped"
    ]


def test_runaway_quote_is_an_error_with_its_line(tmp_path: Path) -> None:
    # An unclosed quote on line 3 swallows the rest; past csv's 131,072-character field limit
    # the csv module gives up, and the error names the line where the record began.
    text = "frage;erwartete_quelle\nQ?;a.pdf\n\"" + "x" * 140_000 + ";b.pdf\n"
    path = write(tmp_path, text)
    with pytest.raises(GoldsetError, match=r": line 3: cannot parse CSV \(field larger than field limit"):
        read_goldset(path)


# ---------------------------------------------------------------------------------------------
# Writing


def test_write_goldset_csv_quotes_and_is_atomic(tmp_path):
    rows = [GoldsetRow('Was zeigt "Tabelle 4"; kurz?', "table-ref", "Bericht Ü.pdf", 4, "generated:table-ref")]
    path = tmp_path / "gold.csv"
    path.write_text("old content", encoding="utf-8")
    write_goldset_csv(path, rows)
    assert path.read_text(encoding="utf-8") == (
        "frage;korpus;erwartete_quelle;erwartete_seite;anmerkung\n"
        '"Was zeigt ""Tabelle 4""; kurz?";table-ref;Bericht Ü.pdf;4;generated:table-ref\n'
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gold.csv"]  # no temp file left
    new = tmp_path / "new.csv"
    write_goldset_csv(new, [])
    assert new.read_text(encoding="utf-8") == "frage;korpus;erwartete_quelle;erwartete_seite;anmerkung\n"
    assert new.stat().st_mode & 0o777 == files.new_file_mode()  # not mkstemp's private 0600
    with pytest.raises(FileNotFoundError, match="folder .*missing does not exist"):
        write_goldset_csv(tmp_path / "missing" / "gold.csv", rows)


def test_formula_like_cells_are_neutralised_and_read_back_as_written(tmp_path: Path) -> None:
    evil = '=HYPERLINK("evil.example","x").pdf'
    rows = [GoldsetRow("+ What does the cover say?", "-generated", evil, 1, "@note"),
            GoldsetRow("What is on page 2?", "", "a.pdf", 2, "\tnote")]
    path = tmp_path / "gold.csv"
    write_goldset_csv(path, rows)
    lines = path.read_text(encoding="utf-8").splitlines()
    # Every cell a spreadsheet would run as a formula starts with a single quote; the others are as they were.
    assert lines[1:] == ["'+ What does the cover say?;'-generated;\"'=HYPERLINK(\"\"evil.example\"\",\"\"x\"\").pdf\";"
                         "1;'@note", "What is on page 2?;;a.pdf;2;'\tnote"]
    gold = read_goldset(path)
    assert [(q.question, q.corpus, q.locations, q.note) for q in gold.questions] == [
        ("+ What does the cover say?", "-generated", (Location(evil, 1),), "@note"),
        ("What is on page 2?", None, (Location("a.pdf", 2),), "note")]  # a read cell is stripped, as always
    # A quote a user typed before a harmless text is kept.
    (tmp_path / "own.csv").write_text("question,expected_source,expected_page\n'Quoted' question?,a.pdf,1\n",
                                      encoding="utf-8")
    assert read_goldset(tmp_path / "own.csv").questions[0].question == "'Quoted' question?"


def test_written_goldset_reads_back_with_the_same_fields(tmp_path: Path) -> None:
    # writer and reader agree; a written goldset has no reference answers (generated questions have none)
    assert [field for field in GoldsetRow.__dataclass_fields__] == list(WRITTEN_FIELDS)
    assert set(CSV_COLUMNS) - set(WRITTEN_FIELDS) == {"reference"}
    rows = [GoldsetRow("What does vega measure?", "finance", "a.pdf", 3, "first"),
            GoldsetRow('Was zeigt "Tabelle 4"; kurz?', "", "Bericht Ü.pdf", 12, "")]
    path = tmp_path / "gold.csv"
    write_goldset_csv(path, rows)
    gold = read_goldset(path)
    assert gold.messages == []
    assert [(q.question, q.corpus, q.locations, q.note, q.lines) for q in gold.questions] == [
        ("What does vega measure?", "finance", (Location("a.pdf", 3),), "first", (2,)),
        ('Was zeigt "Tabelle 4"; kurz?', None, (Location("Bericht Ü.pdf", 12),), "", (3,)),
    ]


# ---------------------------------------------------------------------------------------------
# Reference answers


def test_reference_answers_are_read_from_either_header_and_from_jsonl(tmp_path: Path) -> None:
    german = write(tmp_path, "frage;erwartete_quelle;erwartete_seite;antwort\n"
                             "Wie hoch war der Umsatz 2022?;bericht.pdf;3;\"1.577,5 Mio. EUR\"\n"
                             "Wer ist CEO?;bericht.pdf;1;\n", "de.csv")
    gold = read_goldset(german)
    assert [(q.question, q.reference) for q in gold.questions] == [
        ("Wie hoch war der Umsatz 2022?", "1.577,5 Mio. EUR"), ("Wer ist CEO?", "")]
    english = write(tmp_path, "question,expected_source,answer\nWhat was FY2018 capex?,3M.pdf,  $1577.00  \n",
                    "en.csv")
    assert read_goldset(english).questions[0].reference == "$1577.00"
    jsonl = write(tmp_path, json.dumps({"question": "What was FY2018 capex?", "answer": " $1577.00 ",
                                        "locations": [{"source": "3M.pdf", "page": 60}]}) + "\n", "gold.jsonl")
    assert read_goldset(jsonl).questions[0].reference == "$1577.00"
    assert gold.messages == []


def test_rows_of_one_question_keep_the_first_reference_answer_and_name_a_different_one(tmp_path: Path) -> None:
    path = write(tmp_path, "question,expected_source,expected_page,answer\n"
                           "What was capex?,a.pdf,3,\n"                        # no answer on the first row
                           "What was capex?,a.pdf,4,$1577.00\n"
                           "What was capex?,b.pdf,1,$1577.00\n"                # the same answer: no message
                           "What was capex?,b.pdf,2,$1.6 billion\n")
    gold = read_goldset(path)
    assert [q.reference for q in gold.questions] == ["$1577.00"]
    assert gold.messages == ["line 5: same question as line 3 but another reference answer; the one of line 3 is "
                             "kept"]
