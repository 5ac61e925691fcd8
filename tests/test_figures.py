"""Tests for localrag/evaluation/figures.py: the figures of a reference answer and whether an answer states them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from localrag.evaluation.figures import (Figure, check_figures, figure_found, is_list_marker, is_year, meets,
                                         parse_number, reference_figures, stated_numbers)


def texts(figures) -> list[str]:
    return [figure.text for figure in figures]


def one(text: str) -> Figure:
    """The one figure ``text`` states."""
    figures = reference_figures(text)
    assert len(figures) == 1, figures
    return figures[0]


# ----------------------------------------------------------------------------- reading figures


@pytest.mark.parametrize("text, number, scale, percent, currency", [
    ("$1577.00", "1577.00", None, False, "$"),
    ("1.6%", "1.6", None, True, ""),
    ("0.66", "0.66", None, False, ""),
    ("$8.70 billion", "8.70", 10**9, False, "$"),
    ("24.26", "24.26", None, False, ""),
    ("(1.1)", "-1.1", None, False, ""),  # accounts' negative
    ("65.4%", "65.4", None, True, ""),
    ("$ 0.55", "0.55", None, False, "$"),
    ("-$1561M", "-1561", 10**6, False, "$"),  # a glued letter scales after a currency sign
    ("$(1,561)", "-1561", None, False, "$"),
    ("($1.8 bn)", "1.8", 10**9, False, "$"),  # an aside: the parentheses hold more than the number
    ("(36%)", "36", None, True, ""),
    ("$13.2B", "13.2", 10**9, False, "$"),
    ("1.8bn", "1.8", 10**9, False, ""),
    ("3 Tausend", "3", 10**3, False, ""),
    ("2,5 Mio.", "2.5", 10**6, False, ""),
    ("2,5 Millionen", "2.5", 10**6, False, ""),
    ("1,5 Mrd. €", "1.5", 10**9, False, ""),
    ("4 Milliarden", "4", 10**9, False, ""),
    ("12,5 Prozent", "12.5", None, True, ""),
    ("1.6 percent", "1.6", None, True, ""),
    ("3 percentage points", "3", None, True, ""),
    ("−2.5", "-2.5", None, False, ""),  # U+2212, the minus sign
    ("2.7x", "2.7", None, False, ""),
    ("a 1.5-fold rise", "1.5", None, False, ""),
])
def test_a_figure_is_read_with_sign_scale_percent_and_currency(text, number, scale, percent, currency):
    figure = one(text)
    assert (figure.number, figure.scale, figure.percent, figure.currency) == (Decimal(number), scale, percent,
                                                                               currency)
    assert str(figure.number) == number  # the written decimals survive: "1577.00", not "1577"


@pytest.mark.parametrize("digits, german, number", [
    ("1,577", False, "1577"),  # English thousands
    ("1.577", False, "1.577"),  # English decimal
    ("1,577", True, "1.577"),  # German decimal ("1,577 Mio.")
    ("1.577", True, "1577"),  # German thousands ("1.577 Mio.")
    ("1.577,5", False, "1577.5"),  # both marks: the last is the decimal mark, whatever the language
    ("1,577.5", True, "1577.5"),
    ("8,400,000,000", False, "8400000000"),  # one mark several times: thousands
    ("8.400.000", False, "8400000"),
    ("1,5", False, "1.5"),  # a single mark before other than three digits: decimal
    ("24,26", False, "24.26"),
    ("0,577", False, "0.577"),  # "0," never starts a thousands group
    ("1577", False, "1577"),
])
def test_separators_are_read_by_the_documented_rule(digits, german, number):
    assert str(parse_number(digits, german)) == number


@pytest.mark.parametrize("digits", ["1,2,3", "12,34,567", "1,234.5,6", "1.234,567.8"])
def test_misgrouped_separators_make_no_number(digits):
    assert parse_number(digits) is None


def test_decimals_and_significant_digits_are_as_written():
    assert [(f.decimals, f.significant_digits) for f in reference_figures("$1577.00, 0.016 and 1,577")] == [
        (2, 6), (3, 2), (0, 4)]


def test_years_dates_list_markers_and_names_are_no_figures():
    # The trap: only 36% and the 12 months count; the years, the day of the date and the form name do not.
    text = ("FY2022 and FY 2022, Q2, 3M, the 10-K and 8-K, COVID-19, the 10th, (1) first (2) second: 36% over the "
            "12 months ended on January 28, 2023 (fiscal 2022); 28. Januar 2023 (2023)")
    assert texts(reference_figures(text)) == ["36%", "12"]
    stated = list(stated_numbers(text))  # an answer's numbers: the years and markers are kept
    assert [f.text for f in stated if is_year(f)] == ["2022", "2023", "2022", "2023", "(2023)"]
    assert [f.number for f in stated if is_year(f)][-1] == 2023  # a year in parentheses is no negative amount
    assert [f.text for f in stated if is_list_marker(f)] == ["(1)", "(2)"]


def test_a_year_written_as_an_amount_is_a_figure():
    assert texts(reference_figures("$2022 in FY2022")) == ["$2022"]
    assert texts(reference_figures("2,022 units in 2022")) == ["2,022"]


def test_citation_brackets_are_not_read():
    assert texts(reference_figures("[report.pdf, p. 12] 5 [a.pdf, page 3]")) == ["5"]
    assert not figure_found(one("12"), "as shown [report.pdf, p. 12]")


def test_a_figure_stated_twice_counts_once():
    assert texts(reference_figures("3.5% in FY2023, after 3.6%; 3.5% again, and -3.5%")) == ["3.5%", "3.6%"]


# ----------------------------------------------------------------------------- comparing


@pytest.mark.parametrize("reference, answer, found", [
    # rounding to the reference's last digit, half up
    ("1577.00", "1577.004", True),
    ("1577.00", "1577.006", False),
    ("1.6%", "1.62%", True),
    ("1.6%", "1.65%", False),  # 1.65 rounds half up to 1.7
    ("1.6%", "1.55%", True),
    # units: scale words in both, in one, in neither
    ("$1577.00 million", "$1.58 billion", True),
    ("$1577.00", "$1.58 billion", True),  # an unscaled reference may stand in millions
    ("$1577.00", "$1,577 million", True),
    ("$411 million", "$411", True),  # and an unscaled answer too
    ("$411 million", "$411 billion", False),  # two scale words must agree
    ("1.33", "1,330", False),  # two unscaled numbers are compared as written
    ("$1.8 bn", "$1,824 million", True),
    ("$20 billion", "$19.6 billion", True),
    ("1,5 Mrd. €", "1.500 Mio.", True),  # German separators and scales
    ("$8,400,000,000", "$8.4 billion", True),  # coarser but exact
    # a coarser answer needs MIN_SIGNIFICANT_DIGITS digits
    ("$1577.00", "$1.6 billion", False),
    ("$1577.00", "$2 billion", False),
    ("42.69", "42.7", True),
    ("1.33", "1.3", False),
    # percent meets only percent
    ("1.6%", "1.6 percent", True),
    ("1.6%", "1.6 %", True),
    ("1.6%", "0.016", False),
    ("0.66", "66%", False),
    ("1.6%", "1.6", False),
    # sign and currency are not compared
    ("-3.7", "3.7 days", True),
    ("(1.1)", "1.1", True),
    ("$229 million", "-229", True),
    ("$303.00", "303 euros", True),
])
def test_an_answer_states_a_figure_after_units_separators_percent_and_rounding(reference, answer, found):
    assert figure_found(one(reference), answer) is found


def test_meets_is_the_comparison_figure_found_applies():
    assert meets(one("$1577.00"), one("$1.58 billion"))
    assert not meets(one("$1577.00"), one("$1.6 billion"))


def test_check_figures_lists_found_and_missing_in_reference_order():
    check = check_figures("Revenue rose 4.8% to $3,502 million; margin 5.3%.", "Margin 5.3%, revenue $3.50 billion")
    assert texts(check.found) == ["$3,502 million", "5.3%"]
    assert texts(check.missing) == ["4.8%"]
    assert check.applies and not check.passed


def test_a_reference_without_figures_is_not_applicable_rather_than_passed():
    check = check_figures("Customer deposits", "Customer deposits of $1 billion")
    assert (check.found, check.missing, check.applies, check.passed) == ((), (), False, False)


# ----------------------------------------------------------------------------- FinanceBench references

# Reference answers copied literally from FinanceBench (financebench_dev.jsonl's "answer"), each with an answer
# that states its figures and one that does not, and the figures the second misses.
FINANCEBENCH = [
    ("JnJ sold its inventory 2.7 times in FY2022.",  # financebench_id_00711
     "Inventory turned about 2.7x in fiscal 2022 [JOHNSON_JOHNSON_2022_10K.pdf, p. 46].",
     "JnJ sold its inventory 2.2 times in FY2022.", ["2.7"]),
    ("The effective tax rate for American Express has changed/dropped from 24.6% in FY 2021 to 21.6% in FY 2022.",
     "It fell from 24.6 percent in 2021 to 21.6 percent in 2022.",  # financebench_id_01351
     "It fell from 24.6% in 2021 to 21.0% in 2022.", ["21.6%"]),
    ("Yes, CVS paid a $ 0.55 dividend per share every quarter in FY2022",  # financebench_id_01244
     "Yes: $0.55 per share in each quarter of 2022.",
     "Yes: $0.50 per share in each quarter of 2022.", ["$ 0.55"]),
    ("Best Buy generated the most cash flow from operating activities in FY 2023 ($1.8 bn)",  # financebench_id_01275
     "FY2023, with $1,824 million of operating cash flow.",
     "FY2023, with $1.7 billion of operating cash flow.", ["($1.8 bn)"]),
    ("Pepsico's restructuring costs in FY2022 amounted to $411 million .",  # financebench_id_01328
     "They were $411 million in 2022.",
     "They were $411 billion in 2022.", ["$411 million"]),
    ("No, American Water Works had negative working capital of -$1561M in FY 2022.",  # financebench_id_00070
     "No: working capital was negative, $1,561 million, in FY2022.",
     "No: working capital was -$1,516 million in FY2022.", ["-$1561M"]),
    ("$1577.00",  # financebench_id_03029
     "3M's capital expenditure in FY2018 was $1.58 billion.",
     "3M's capital expenditure in FY2018 was about $1.6 billion.", ["$1577.00"]),
    ("24.26",  # financebench_id_02987
     "The fixed asset turnover ratio was 24.3 in FY2019.",
     "The fixed asset turnover ratio was 24.62 in FY2019.", ["24.26"]),
    ("0.68",  # financebench_id_03471
     "The quick ratio was 0.68.",
     "The quick ratio was 68%.", ["0.68"]),
    ("-3.7",  # financebench_id_04103
     "The cash conversion cycle was (3.7) days.",
     "The cash conversion cycle was -3.8 days.", ["-3.7"]),
    ("Total amount Pepsico may borrow under unsecured revolving credit agreements = $8,400,000,000.",
     "Up to $8.4 billion under the two agreements.",  # financebench_id_00882
     "Up to $4.2 billion under the five-year agreement.", ["$8,400,000,000"]),
    ("No, rate of growth in adjusted EPS is expected to decelerate slightly from 3.6% in FY2022 to 3.5% in FY2023.",
     "Growth slows from 3.6% (2022) to 3.5% (2023).",  # financebench_id_00651
     "Growth slows from 3.6% (2022) to 3.4% (2023).", ["3.5%"]),
    ("Yes, there is decline in number stores by 1.32% from 982 stores in Q2 FY 2023 to 969 by the end of Q2 FY2024.",
     "Stores fell from 982 to 969, down 1.32%.",  # financebench_id_00460
     "Stores fell from 982 to 969, down 1.3%.", ["1.32%"]),
    ("36%. The answer here assumes FY2023 refers to the 12 months ended on January 28, 2023 (although the company "
     "refers to this period as its fiscal 2022.",  # financebench_id_00605
     "36% of the year's spend (12 months to 28 January 2023).",
     "About 28% of the fiscal 2023 spend, i.e. the 12 months.", ["36%"]),
    ("JnJ realised $13.2 billion in cash proceeds from the separation of Kenvue.",  # financebench_id_01491
     "About $13.2B in cash.",
     "About $13 billion in cash.", ["$13.2 billion"]),
]


@pytest.mark.parametrize("reference, right, wrong, missed", FINANCEBENCH)
def test_financebench_references_against_a_right_and_a_wrong_answer(reference, right, wrong, missed):
    assert check_figures(reference, reference).passed  # a reference states its own figures
    assert check_figures(reference, right).passed
    check = check_figures(reference, wrong)
    assert check.applies and texts(check.missing) == missed


@pytest.mark.parametrize("reference", [
    # financebench_id_01077: "(1)" and "(2)" are list markers, 2022 a year
    "Best Buy closed two acquisitions, both these companies were already partially owned by Best Buy, but Best Buy "
    "acquired all outstanding shares of these two companies during FY 2022: (1) Current Health Ltd and (2) Two "
    "Peaks, LLC d/b/a Yardbird Furniture",
    # financebench_id_01091: years only
    "Yes. Multiple lawsuits have been filed against Boeing resulting from a 2018 Lion Air crash and a 2019 Ethiopian "
    "Airlines crash.",
    # financebench_id_01964
    "Customer deposits",
])
def test_financebench_references_without_figures_are_not_applicable(reference):
    assert not check_figures(reference, "anything at all, 2018 or 1 or 2").applies
