"""Tests for localrag/evaluation/citations.py: sentences, citations read from an answer, and their check against the
passages given and the gold pages."""

from __future__ import annotations

import pytest

from localrag.evaluation.citations import Citation, check_citations, parse_citations, split_sentences
from localrag.goldset.format import PAGE_TOLERANCE


def pages_of(answer: str) -> list[tuple[str, tuple[int, ...], int]]:
    """(file, pages, sentence) of each parsed citation of ``answer``."""
    return [(c.file, c.pages, c.sentence) for c in parse_citations(answer) if not c.problem]


def problems_of(answer: str) -> list[tuple[str, str]]:
    """(text, problem) of each unparsed citation attempt of ``answer``."""
    return [(c.text, c.problem) for c in parse_citations(answer) if c.problem]


# ----------------------------------------------------------------------------- sentences


def test_sentences_end_at_a_mark_before_white_space():
    assert split_sentences("Sales grew. Did they? Yes!  Margins fell") == [
        "Sales grew.", "Did they?", "Yes!", "Margins fell"]


def test_page_words_decimals_and_abbreviations_end_no_sentence():
    answer = ("Margins were 1.6% on p. 12 and S. 3 of the report, e.g. The table. U.S. sales rose vs. FY2021. "
              "See No. 5. The answer is No. Done")
    assert split_sentences(answer) == [
        "Margins were 1.6% on p. 12 and S. 3 of the report, e.g. The table.", "U.S. sales rose vs. FY2021.",
        "See No. 5.", "The answer is No.", "Done"]


def test_a_mark_inside_a_citation_bracket_ends_no_sentence():
    # The trap: ".pdf", "p." and a decimal point inside the bracket, each followed by a space.
    answer = "Capex was $1577 million [3M 2018. Annual report v1. 2.pdf, p. 59]. It fell [a.pdf, p. 3]."
    assert split_sentences(answer) == ["Capex was $1577 million [3M 2018. Annual report v1. 2.pdf, p. 59].",
                                       "It fell [a.pdf, p. 3]."]
    assert pages_of(answer) == [("3M 2018. Annual report v1. 2.pdf", (59,), 0), ("a.pdf", (3,), 1)]


def test_citations_after_the_full_stop_belong_to_the_sentence_before():
    answer = "Debt fell by $229 million. [VERIZON_2022_10K.pdf, p. 77] [a.pdf, p. 2]\nIt rose."
    assert split_sentences(answer) == ["Debt fell by $229 million. [VERIZON_2022_10K.pdf, p. 77] [a.pdf, p. 2]",
                                       "It rose."]
    assert [c.sentence for c in parse_citations(answer)] == [0, 0]


def test_blank_lines_and_list_items_end_sentences_wrapped_lines_do_not():
    answer = "Two acquisitions:\n- one in the Czech Republic\n- one in\nShanghai\n\nBoth closed"
    assert split_sentences(answer) == ["Two acquisitions:", "- one in the Czech Republic", "- one in\nShanghai",
                                       "Both closed"]


def test_no_text_no_sentence():
    assert split_sentences("") == [] and split_sentences("  \n ") == []
    assert parse_citations("") == []


# ----------------------------------------------------------------------------- citations


def test_every_documented_citation_form_is_read():
    answer = ("A [a.pdf, p. 12]. B [a.pdf, page 3]. C [b.pdf, pp. 12-13]. D [c.pdf, S. 7]. E [c.pdf, Seite 8]. "
              "F [d.pdf, P. 9; e.pdf, pp. 4–5]. G [Hull, Options.pdf, p.2]. H [f.pdf, p 6].")
    assert pages_of(answer) == [
        ("a.pdf", (12,), 0), ("a.pdf", (3,), 1), ("b.pdf", (12, 13), 2), ("c.pdf", (7,), 3), ("c.pdf", (8,), 4),
        ("d.pdf", (9,), 5), ("e.pdf", (4, 5), 5), ("Hull, Options.pdf", (2,), 6), ("f.pdf", (6,), 7)]
    assert problems_of(answer) == []


def test_a_citation_keeps_its_text_and_a_range_its_ends():
    assert parse_citations("X [b.pdf, pp. 12-13]") == [Citation("b.pdf, pp. 12-13", 0, "b.pdf", 12, 13)]


def test_attempts_that_are_no_citation_are_kept_with_their_problem():
    answer = ("X [a.pdf] [p. x] [1] [a.pdf, p. 0] [a.pdf, p. -2] [a.pdf, pp. 13-12] [a.pdf, p. x] [a.pdf p. 3] "
              "[a.pdf, 3] [a.pdf, p. 12.5; b.pdf, p. 4] [a.pdf, pp. 1-51] [a.pdf, pp. 1-50]")
    assert problems_of(answer) == [
        ("a.pdf", "names no page; write [file, p. 12]"),
        ("p. x", "names no file before the page; write [file, p. 12]"),
        ("1", "is a numbered reference, not [file, p. 12]"),
        ("a.pdf, p. 0", "page 0 is before the first page; pages count from 1"),
        ("a.pdf, p. -2", "page -2 is before the first page; pages count from 1"),
        ("a.pdf, pp. 13-12", "the range 13-12 runs backwards; write 12-13"),
        ("a.pdf, p. x", "'x' is not a page; write p. 12 or pp. 12-13"),
        ("a.pdf p. 3", "needs a comma between file and page; write [file, p. 12]"),
        ("a.pdf, 3", "has no page word before the page; write p., page or S."),
        ("a.pdf, p. 12.5", "'12.5' is not a page; write p. 12 or pp. 12-13"),
        ("a.pdf, pp. 1-51", "the range 1-51 spans 51 pages, more than 50; cite the passage's pages"),
    ]
    assert pages_of(answer) == [("b.pdf", (4,), 0), ("a.pdf", tuple(range(1, 51)), 0)]  # the good part stays


def test_brackets_that_are_no_attempt_are_ignored():
    assert parse_citations("Revenue [sic] rose [...] as [the report](http://x/1.pdf) says [ ] [x] [Apple's view]") == []


# ----------------------------------------------------------------------------- the check


def test_check_sorts_citations_and_finds_the_gold_page_within_tolerance():
    answer = ("Turnover was 2.7 [JOHNSON_JOHNSON_2022_10K.pdf, p. 46]. Inventories rose "
              "[docs/johnson_johnson_2022_10k.PDF, p. 48; other.pdf, p. 3]. [p. 4]")
    given = [("JOHNSON_JOHNSON_2022_10K", 46), ("JOHNSON_JOHNSON_2022_10K", 47), ("other.pdf", 2)]
    check = check_citations(parse_citations(answer), given, [("JOHNSON_JOHNSON_2022_10K.pdf", 47)], PAGE_TOLERANCE)
    assert check.counts() == {"parsed": 3, "unparsed": 1, "given": 1, "not given": 2}
    assert [c.text for c in check.given] == ["JOHNSON_JOHNSON_2022_10K.pdf, p. 46"]
    assert [c.text for c in check.not_given] == ["docs/johnson_johnson_2022_10k.PDF, p. 48", "other.pdf, p. 3"]
    # The trap: p. 46 and p. 48 are each one off the gold page 47: both hit within the tolerance of 1, none at 0.
    assert [c.first_page for c in check.gold] == [46, 48] and check.cites_gold
    exact = check_citations(parse_citations(answer), given, [("JOHNSON_JOHNSON_2022_10K.pdf", 47)], 0)
    assert exact.gold == () and not exact.cites_gold


def test_a_range_is_given_when_one_of_its_pages_was():
    check = check_citations(parse_citations("X [a.pdf, pp. 11-12]"), [("a.pdf", 12)], [("a.pdf", 20)], 1)
    assert check.counts() == {"parsed": 1, "unparsed": 0, "given": 1, "not given": 0} and not check.cites_gold


def test_no_citation_no_gold():
    check = check_citations([], [("a.pdf", 1)], [("a.pdf", 1)], 1)
    assert check.counts() == {"parsed": 0, "unparsed": 0, "given": 0, "not given": 0} and not check.cites_gold


@pytest.mark.parametrize("given, gold, tolerance, message", [
    ([("a.pdf", 0)], [], 1, "given passage ('a.pdf', 0) has page 0; pages count from 1"),
    ([], [("a.pdf", -1)], 1, "gold passage ('a.pdf', -1) has page -1; pages count from 1"),
    ([], [], -1, "tolerance must be >= 0, got -1"),
])
def test_pages_below_one_and_a_negative_tolerance_are_refused(given, gold, tolerance, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_citations([], given, gold, tolerance)


# ----------------------------------------------------------------------------- FinanceBench references

# Reference answers copied literally from FinanceBench (financebench_dev.jsonl's "answer") with their evidence file
# and 1-based pages (goldset_dev.csv), an answer citing a gold page the model was given, and one citing no gold page
# (the given passages: the gold pages and page 5 of the file), with the counts of the second.
FINANCEBENCH = [
    ("JnJ sold its inventory 2.7 times in FY2022.", "JOHNSON_JOHNSON_2022_10K.pdf", (46, 47),  # id_00711
     "[JOHNSON_JOHNSON_2022_10K.pdf, p. 47]", "[JOHNSON_JOHNSON_2023_10K.pdf, p. 47]", (1, 0, 0, 1)),
    ("The effective tax rate for American Express has changed/dropped from 24.6% in FY 2021 to 21.6% in FY 2022.",
     "AMERICANEXPRESS_2022_10K.pdf", (44,),  # id_01351
     "[AMERICANEXPRESS_2022_10K.pdf, page 44]", "[AMERICANEXPRESS_2022_10K.pdf, p. 5]", (1, 0, 1, 0)),
    ("Yes, CVS paid a $ 0.55 dividend per share every quarter in FY2022", "CVSHEALTH_2022_10K.pdf", (68,),  # 01244
     "[CVSHEALTH_2022_10K.pdf, pp. 67-68]", "[CVSHEALTH_2022_10K.pdf]", (0, 1, 0, 0)),
    ("Best Buy generated the most cash flow from operating activities in FY 2023 ($1.8 bn)",  # id_01275
     "BESTBUY_2023_10K.pdf", (42,), "[BESTBUY_2023_10K.pdf, S. 42]", "[BESTBUY_2023_10K.pdf, p. 44]", (1, 0, 0, 1)),
    ("Pepsico's restructuring costs in FY2022 amounted to $411 million .", "PEPSICO_2022_10K.pdf", (78,),  # 01328
     "[pepsico_2022_10k, p. 78]", "[PEPSICO_2022_10K.pdf, p. 0]", (0, 1, 0, 0)),
    ("No, American Water Works had negative working capital of -$1561M in FY 2022.",  # id_00070
     "AMERICANWATERWORKS_2022_10K.pdf", (81, 82),
     "[AMERICANWATERWORKS_2022_10K.pdf, p. 81; AMERICANWATERWORKS_2022_10K.pdf, p. 82]",
     "[AMERICANWATERWORKS_2021_10K.pdf, p. 81; AMERICANWATERWORKS_2022_10K.pdf, p. 5]", (2, 0, 1, 1)),
    ("$1577.00", "3M_2018_10K.pdf", (60,),  # id_03029
     "[3M_2018_10K.pdf, p. 60]", "[p. 60]", (0, 1, 0, 0)),
    ("24.26", "ACTIVISIONBLIZZARD_2019_10K.pdf", (69, 70),  # id_02987
     "[ACTIVISIONBLIZZARD_2019_10K.pdf, p. 70]", "[ACTIVISIONBLIZZARD_2019_10K.pdf, p. 72]", (1, 0, 0, 1)),
    ("Total amount Pepsico may borrow under unsecured revolving credit agreements = $8,400,000,000.",  # id_00882
     "PEPSICO_2023_8K_dated-2023-05-30.pdf", (2,),
     "[PEPSICO_2023_8K_dated-2023-05-30.pdf, p. 2]", "[PEPSICO_2023_8K_dated-2023-05-30.pdf, p. 5]", (1, 0, 1, 0)),
    ("No, rate of growth in adjusted EPS is expected to decelerate slightly from 3.6% in FY2022 to 3.5% in FY2023.",
     "JOHNSON_JOHNSON_2022Q4_EARNINGS.pdf", (1,),  # id_00651
     "[JOHNSON_JOHNSON_2022Q4_EARNINGS.pdf, p. 1]", "[JOHNSON_JOHNSON_2022Q4_EARNINGS.pdf, p. 3]", (1, 0, 0, 1)),
    ("Yes. Multiple lawsuits have been filed against Boeing resulting from a 2018 Lion Air crash and a 2019 Ethiopian "
     "Airlines crash.", "BOEING_2022_10K.pdf", (113,),  # id_01091
     "[BOEING_2022_10K.pdf, Seite 113]", "[1]", (0, 1, 0, 0)),
    ("Best Buy closed two acquisitions, both these companies were already partially owned by Best Buy, but Best Buy "
     "acquired all outstanding shares of these two companies during FY 2022: (1) Current Health Ltd and (2) Two "
     "Peaks, LLC d/b/a Yardbird Furniture", "BESTBUY_2023_10K.pdf", (51,),  # id_01077
     "[BESTBUY_2023_10K.pdf, p. 51]", "[BESTBUY_2022_10K.pdf, p. 51]", (1, 0, 0, 1)),
]


@pytest.mark.parametrize("reference, file, gold_pages, right, wrong, wrong_counts", FINANCEBENCH)
def test_financebench_references_with_a_right_and_a_wrong_citation(reference, file, gold_pages, right, wrong,
                                                                    wrong_counts):
    gold = [(file, page) for page in gold_pages]
    given = gold + [(file, 5)]
    check = check_citations(parse_citations(f"{reference} {right}"), given, gold, PAGE_TOLERANCE)
    assert check.cites_gold and len(check.unparsed) == 0 and len(check.not_given) == 0
    assert len(check.given) == len(check.parsed) >= 1
    sentences = split_sentences(reference)
    assert {c.sentence for c in check.parsed} == {len(sentences) - 1}  # the last sentence's citation
    check = check_citations(parse_citations(f"{reference} {wrong}"), given, gold, PAGE_TOLERANCE)
    assert not check.cites_gold
    assert tuple(check.counts().values()) == wrong_counts
