"""Does an answer state the numbers its reference answer states? A deterministic check, no model involved.

reference_figures reads the figures of a reference answer ("$1577.00", "1.6%", "$8.70 billion", "(1.1)"),
figure_found says whether an answer states one of them, check_figures does both for a whole reference. No
library does this: babel parses a number in one given locale, price-parser picks one price out of a string,
quantulum3 reads English quantities with units; none tells years and list markers from figures or compares two
numbers written at different precisions and scales. The rules:

* A figure is a number written with digits, with its sign, currency, scale word and percent sign as written.
  Numbers in words ("two") are not read; a trailing "x" of a multiple ("2.7x") is. Text in square brackets
  (citations, chunk headers) is not read.
* Not figures of a reference (an answer may state them; they cannot be missing): years (four digits 1900-2099
  written bare: "2022", "FY 2022", "(2022)"; the question names the period, the answer need not repeat it),
  numbers glued to letters ("FY2022", "Q2", "3M", "10th"; the form names "10-K", "8-K"; "COVID-19"), the day of a
  date ("January 28", "28. Januar") and list markers (a bare one- or two-digit whole number in parentheses:
  "(1)"). A year written as an amount ("2,022", "$2022") is a figure; "grew by 2022 units" is taken for a year. A
  figure stated twice (same magnitude, decimals, scale and percent) counts once.
* Separators: with both "," and "." the last one is the decimal mark ("1,577.5", "1.577,5"); one mark used
  several times separates thousands ("8,400,000,000", "8.400.000"); a single mark followed by exactly three digits
  separates thousands if it is "," ("1,577") and is a decimal mark if it is "." ("1.577"), as in English, unless
  a German scale or percent word follows (Tausend, Tsd., Mio., Millionen, Mrd., Milliarden, Prozent), which swaps
  the two ("1,577 Mio." is 1.577 million, "1.577 Mio." 1577 million). Any other single mark is the decimal mark
  ("1,5", "24.26"). A space never separates thousands.
* Scale words: thousand, million, billion, trillion, bn, mn, tn and the German Tausend, Tsd., Million(en), Mio.,
  Milliarde(n), Mrd., Billionen, Bio. (German "Billion(en)" is 10**12; a singular "Billion" is read as English,
  10**9). The single letters k, m, b scale only when glued to a number after a currency sign ("$1.8m", "-$1561M");
  elsewhere "3M" is a name. A figure without a scale word may stand in any scale, so "$1577.00" (FinanceBench
  states millions without saying so) is met by "$1.58 billion" and "$411 million" by "$411"; two unscaled numbers
  are compared as written, so "1.33" is not met by "1,330".
* Percent: "%", "percent", "per cent", "pct", "percentage point(s)", "Prozent", "Prozentpunkt(e)" mark a percent
  figure, which only a percent meets: "1.6%" is met by "1.6 percent" and "1.6 %", never by "0.016" (a bare
  fraction in an answer is as likely another ratio), and "0.66" is not met by "66%".
* Sign and currency are read but not compared: answers state a direction in words ("debt decreased by $229
  million" for -229) and drop or change the currency sign. Parentheses make a number negative only when they
  hold the number alone, as accounts write it ("(1.1)", "$(1,561)"); "($1.8 bn)" and "(36%)" are asides.
* Rounding: an answer written at least as finely as the reference meets it when, rounded half up to the
  reference's last written digit, it equals the reference ("1577.004" meets "1577.00", "1.62%" meets "1.6%",
  "$1,824 million" meets "$1.8 bn"). An answer written more coarsely meets it when it equals the reference
  exactly ("$8.4 billion" meets "$8,400,000,000") or states at least MIN_SIGNIFICANT_DIGITS significant digits
  and equals the reference rounded to the answer's last digit ("$1.58 billion" meets "$1577.00" million; "$2
  billion" and "$1.6 billion" do not).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from itertools import product

# Fewest significant digits an answer coarser than its reference must state to meet it after rounding: 1.58
# billion for 1577 million is the number rounded, 2 billion is another number.
MIN_SIGNIFICANT_DIGITS = 3
# Scale words (casefolded, without a final dot) and their factors.
SCALES = {
    "thousand": 10**3, "thousands": 10**3, "million": 10**6, "millions": 10**6, "mn": 10**6,
    "billion": 10**9, "billions": 10**9, "bn": 10**9, "trillion": 10**12, "trillions": 10**12, "tn": 10**12,
    "tausend": 10**3, "tsd": 10**3, "millionen": 10**6, "mio": 10**6,
    "milliarde": 10**9, "milliarden": 10**9, "mrd": 10**9, "billionen": 10**12, "bio": 10**12,
}
# German words after a number: "," is its decimal mark, "." its thousands separator.
GERMAN_WORDS = frozenset({"tausend", "tsd", "millionen", "mio", "milliarde", "milliarden", "mrd", "billionen", "bio",
                          "prozent", "prozentpunkt", "prozentpunkte"})
# Single letters that scale a number glued to them after a currency sign.
GLUED_SCALES = {"k": 10**3, "m": 10**6, "b": 10**9}
# Bare four-digit numbers in this range are years.
YEARS = range(1900, 2100)
# Parenthesised bare whole numbers below this are list markers, "(1)", "(2)".
LIST_MARKER_BELOW = 100

_SCALE_WORDS = "|".join(sorted((re.escape(word) + (r"\.?" if word in {"tsd", "mio", "mrd", "bio"} else "")
                                 for word in SCALES), key=len, reverse=True))
_CURRENCY = r"US\$|[$€£¥]|(?:USD|EUR|GBP|CHF)(?=\s)"
_PERCENT = r"%|percent|per\s?cent|pct|percentage\s+points?|prozentpunkte?|prozent"
# One number with what belongs to it, whole (never a part of "1,577" or "10th"). Not inside a word ("FY2022",
# "Q2"; "COVID-19": a letter and a hyphen before), not a name ("10-K": a hyphen and a capital letter alone after;
# "3M", "10th": a letter after). "1.5-fold" and "364-day" are read.
_NUMBER = re.compile(
    rf"""(?<![\w.,])(?<![^\W\d_]-)
    (?P<minus>[-−])?(?:(?P<currency>{_CURRENCY})\s?)?(?P<open>\()?(?:(?P<inner_currency>{_CURRENCY})\s?)?
    (?P<inner_minus>[-−])?
    (?P<digits>\d+(?:[.,]\d+)*)
    (?:\s?(?P<scale>{_SCALE_WORDS})|(?P<glued>[kmb])|[x×])?
    (?:\s?(?P<percent>{_PERCENT}))?
    (?P<close>\))?
    (?!\w)(?![.,]\d)(?-i:(?!-[A-Z]\b))""",
    re.IGNORECASE | re.VERBOSE,
)
_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|December|"
           "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|"
           "Januar|Februar|März|Maerz|Mai|Juni|Juli|Oktober|Dezember")
# A date's day: "January 28", "Jan. 28th", "28 January", "28. Januar" (month names capitalised, as written).
_DATE = re.compile(rf"\b(?:(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
                   rf"|\d{{1,2}}(?:st|nd|rd|th|\.)?\s+(?:{_MONTHS})\b)")
# Square-bracketed text: citations and chunk headers, whose page numbers are no figures of the answer.
_BRACKETS = re.compile(r"\[[^\[\]]*\]")


@dataclass(frozen=True)
class Figure:
    """A number as a text states it: ``number`` as written (signed, without its scale: Decimal("1.8") for
    "$1.8 bn", its exponent keeping the written decimals), ``scale`` the scale word's factor (None: no scale word),
    ``percent``, ``currency`` ("" none) and ``text``, the figure as written."""

    text: str
    number: Decimal
    scale: int | None = None
    percent: bool = False
    currency: str = ""

    @property
    def decimals(self) -> int:
        """Digits written after the decimal mark: 2 for "1577.00", 0 for "1,577"."""
        return max(0, -int(self.number.as_tuple().exponent))

    @property
    def significant_digits(self) -> int:
        """Digits written from the first non-zero one: 2 for "0.016", 6 for "1577.00"."""
        return len(self.number.as_tuple().digits) if self.number else 1


@dataclass(frozen=True)
class FigureCheck:
    """The reference's figures the answer states (``found``) and does not (``missing``), in reference order."""

    found: tuple[Figure, ...]
    missing: tuple[Figure, ...]

    @property
    def applies(self) -> bool:
        """False when the reference states no figure: report "not applicable", not a pass."""
        return bool(self.found or self.missing)

    @property
    def passed(self) -> bool:
        """The reference states figures and the answer states every one of them."""
        return self.applies and not self.missing


# ---------------------------------------------------------------------------------------------
# Reading numbers


def parse_number(digits: str, german: bool = False) -> Decimal | None:
    """The number written as ``digits`` (digits, "," and "." only) under the separator rules of the module's
    docstring; ``german``: a German word follows it. None when the marks make no number ("1,2,3")."""
    marks = [mark for mark in ".," if mark in digits]
    if len(marks) == 2:
        decimal_mark = max(marks, key=digits.rindex)
        thousands = "," if decimal_mark == "." else "."
        whole, _, fraction = digits.rpartition(decimal_mark)
        return _grouped(whole, thousands, fraction)
    if not marks:
        return Decimal(digits)
    mark = marks[0]
    groups = digits.split(mark)
    thousands_mark = "." if german else ","
    if len(groups) > 2 or (mark == thousands_mark and len(groups[1]) == 3 and groups[0] != "0"):
        return _grouped(digits, mark, "")
    return Decimal(f"{groups[0]}.{groups[1]}")


def _grouped(whole: str, thousands: str, fraction: str) -> Decimal | None:
    """``whole`` with thousands separators (1-3 digits, then groups of 3) and ``fraction``; None if misgrouped
    or if a decimal mark is left in ``whole``."""
    groups = whole.split(thousands)
    if not (1 <= len(groups[0]) <= 3 and all(len(group) == 3 for group in groups[1:])):
        return None
    if not "".join(groups).isdigit():
        return None
    return Decimal("".join(groups) + (f".{fraction}" if fraction else ""))


def _figure(match: re.Match[str]) -> Figure | None:
    """The figure one match of _NUMBER writes; None for a name ("3M") or a number the marks spoil."""
    scale_word = (match["scale"] or "").casefold().rstrip(".")
    percent_word = (match["percent"] or "").casefold()
    number = parse_number(match["digits"], german=scale_word in GERMAN_WORDS or percent_word in GERMAN_WORDS)
    currency = match["currency"] or match["inner_currency"] or ""
    if number is None or (match["glued"] and not currency):
        return None
    scale = SCALES[scale_word] if scale_word else GLUED_SCALES[match["glued"].casefold()] if match["glued"] else None
    accounting = bool(match["open"] and match["close"]) and not (
        match["inner_currency"] or scale or percent_word or _is_list_number(match["digits"])
        or _is_year_number(match["digits"]))
    if match["minus"] or match["inner_minus"] or accounting:
        number = -number
    return Figure(_written(match), number, scale, bool(percent_word), currency)


def _is_list_number(digits: str) -> bool:
    return digits.isdigit() and int(digits) < LIST_MARKER_BELOW


def _is_year_number(digits: str) -> bool:
    return len(digits) == 4 and digits.isdigit() and int(digits) in YEARS


def _written(match: re.Match[str]) -> str:
    """The match as written, less a parenthesis the other of which it does not hold ("(2021" of "(2021, $230)")."""
    text = match.group().strip()
    if match["open"] and not match["close"]:
        text = (match["minus"] or "") + (match["currency"] or "") + text[text.index("(") + 1:].lstrip()
    elif match["close"] and not match["open"]:
        text = text[:-1].rstrip()
    return text


def stated_numbers(text: str) -> Iterator[Figure]:
    """Every number ``text`` states, years and list markers included, outside square brackets and dates."""
    text = _DATE.sub(lambda found: " " * len(found.group()), _BRACKETS.sub(" ", text))
    for match in _NUMBER.finditer(text):
        figure = _figure(match)
        if figure is not None:
            yield figure


def is_year(figure: Figure) -> bool:
    """A bare four-digit number 1900-2099, as written, alone or in parentheses: "2022" (also of "FY 2022"),
    "(2022)"; not "2,022" or "$2022"."""
    text = figure.text[1:-1] if figure.text.startswith("(") and figure.text.endswith(")") else figure.text
    return _is_year_number(text)


def is_list_marker(figure: Figure) -> bool:
    """A bare whole number below LIST_MARKER_BELOW in parentheses: "(1)"."""
    inner = figure.text[1:-1]
    return figure.text.startswith("(") and figure.text.endswith(")") and _is_list_number(inner)


def reference_figures(reference: str) -> list[Figure]:
    """The figures a reference answer states, in order, each once (the same magnitude, decimals, scale and percent
    count once): every stated number but years and list markers."""
    figures: dict[tuple[Decimal, int, int | None, bool], Figure] = {}
    for figure in stated_numbers(reference):
        if not (is_year(figure) or is_list_marker(figure)):
            key = (abs(figure.number), figure.decimals, figure.scale, figure.percent)
            figures.setdefault(key, figure)
    return list(figures.values())


# ---------------------------------------------------------------------------------------------
# Comparing


def _round_to(value: Decimal, step: Decimal) -> Decimal:
    """``value`` rounded half up (away from zero) to a multiple of ``step``."""
    return (value / step).to_integral_value(rounding=ROUND_HALF_UP) * step


def _scale_pairs(reference: Figure, stated: Figure) -> Iterator[tuple[int, int]]:
    """The scales to compare the two in: as written, where either lacks a scale word any scale for it (both
    lacking one: 1 and 1)."""
    anywhere = (1, *sorted(set(SCALES.values())))
    if (reference.scale is None) == (stated.scale is None):
        yield reference.scale or 1, stated.scale or 1
        return
    yield from product((reference.scale,) if reference.scale else anywhere,
                       (stated.scale,) if stated.scale else anywhere)


def _meets_at(reference: Figure, stated: Figure, scales: tuple[int, int]) -> bool:
    """Whether ``stated`` meets ``reference`` (magnitudes) in the given scales, by the rounding rule."""
    value, exact = abs(stated.number) * scales[1], abs(reference.number) * scales[0]
    step = Decimal(1).scaleb(-stated.decimals) * scales[1]
    reference_step = Decimal(1).scaleb(-reference.decimals) * scales[0]
    if step <= reference_step:
        return _round_to(value, reference_step) == exact
    return value == exact or (stated.significant_digits >= MIN_SIGNIFICANT_DIGITS and _round_to(exact, step) == value)


def meets(reference: Figure, stated: Figure) -> bool:
    """Whether the number ``stated`` (of an answer) is ``reference``'s under the module's rules."""
    if reference.percent != stated.percent:
        return False
    return any(_meets_at(reference, stated, scales) for scales in _scale_pairs(reference, stated))


def figure_found(figure: Figure, answer: str) -> bool:
    """Whether ``answer`` states ``figure``: some number of it meets the figure (see the module's rules)."""
    return any(meets(figure, stated) for stated in stated_numbers(answer))


def check_figures(reference: str, answer: str) -> FigureCheck:
    """Which of the reference answer's figures the answer states; ``applies`` is False when it states none."""
    figures = reference_figures(reference)
    stated = list(stated_numbers(answer))
    found = tuple(figure for figure in figures if any(meets(figure, number) for number in stated))
    return FigureCheck(found, tuple(figure for figure in figures if figure not in found))
