"""Tests for localrag/goldset/noise.py: each noise rule in English and German, running headers, chunk-text helpers.

The chunk fixtures here (chunk, PROSE_EN, PROSE_DE, DESKS, plain_chunk, running_header_doc) are shared
with tests/test_generate.py, which imports them.
"""

from __future__ import annotations

import pytest

from localrag.goldset.noise import analysis_text, build_noise_context, classify_noise, filter_chunks
from localrag.text.pages import chunk_header


def chunk(text: str, page: int = 5, source: str = "a.pdf", cid: str = "c1") -> dict:
    """A chunk as the index stores it, with the indexer's header line."""
    return {"chunk_id": cid, "source": source, "page": page, "text": chunk_header(source, page) + text}


PROSE_EN = (
    "Vega is the sensitivity of an option price to changes in the volatility of the underlying asset.\n"
    "A long position in a call or a put option has a positive vega, so its value rises with volatility."
)
PROSE_DE = (
    "Die Volatilität ist ein Maß für die Schwankung eines Kurses und wird aus historischen Daten geschätzt.\n"
    "Eine Option mit langer Laufzeit reagiert stärker auf Änderungen der Volatilität als eine kurze."
)

# One word per page, so that body lines differ between pages (identical lines on 3 pages are running headers).
DESKS = "alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike november".split()


def plain_chunk(source: str, page: int) -> dict:
    """Clean prose without references, headings or definitions: gives no template question."""
    desk = DESKS[page]
    text = (f"Traders at the {desk} desk watch the market closely every morning before the opening bell rings.\n"
            f"Many of them at the {desk} desk read the news first and then check their positions.")
    return chunk(text, page, source, f"{source}#{page}")


# ---------------------------------------------------------------------------------------------
# Text helpers


def test_analysis_text_drops_the_chunk_header_and_applies_nfkc():
    # "ﬁ" (U+FB01) and a no-break space, as PDFs extract them; the header line is the indexer's, not text.
    assert analysis_text(chunk_header("Hull, Options.pdf", 2) + "Die \ufb01nale\u00a0Zahl") == "Die finale Zahl"


# ---------------------------------------------------------------------------------------------
# Noise filter: each rule in English and German


NOISE_CASES = {
    # Heading "Contents" alone on a line.
    "toc_en": (chunk("Contents\n1 Introduction .......... 1\n2 Futures markets .......... 15\n3 Hedging .......... 47"),
               "front_matter"),
    "toc_de": (chunk("Inhaltsverzeichnis\n1 Einleitung . . . . . . . . 1\n2 Terminmärkte . . . . . . . . 15"),
               "front_matter"),
    # No heading: 2 of 4 lines have dotted leaders, 0.5 >= TOC_LINE_SHARE 0.3.
    "toc_leaders": (chunk("1.1 Options . . . . . . . . 3\n1.2 Futures . . . . . . . . 9\n"
                          "The first part of the book explains the markets in which derivatives trade every day.\n"
                          "It then turns to pricing."), "front_matter"),
    # 4 lines with a copyright cue (©/copyright, all rights reserved, isbn, printed in) >= 3.
    "copyright_en": (chunk("Copyright © 2018 Pearson Education, Inc.\n"
                           "All rights reserved. No part of this publication may be reproduced, stored or "
                           "transmitted.\n"
                           "ISBN 978-0-13-447208-9\nPrinted in the United States of America", page=4), "front_matter"),
    "copyright_de": (chunk("© Springer-Verlag GmbH Deutschland 2019\n"
                           "Alle Rechte vorbehalten. Das Werk einschließlich aller seiner Teile ist urheberrechtlich "
                           "geschützt.\nISBN 978-3-662-58370-5\nBibliografische Information der Deutschen "
                           "Nationalbibliothek", page=4), "front_matter"),
    # Page 0, 7 lines, none with >= 6 words: prose share 0 < 0.25.
    "title_en": (chunk("Options, Futures,\nand Other Derivatives\nTENTH EDITION\nJohn C. Hull\nUniversity of Toronto\n"
                       "Pearson\nNew York Boston Columbus", page=0), "front_matter"),
    "title_de": (chunk("Optionen, Futures\nund andere Derivate\n10., aktualisierte Auflage\nJohn C. Hull\n"
                       "Pearson Studium\nMünchen", page=1), "front_matter"),
    # Trap: the same title page on page 7 is no title page (only pages 0-2 are); it has 18 words < 20.
    "title_late": (chunk("Options, Futures,\nand Other Derivatives\nTENTH EDITION\nJohn C. Hull\n"
                         "University of Toronto\n"
                         "Pearson\nNew York Boston Columbus", page=7), "too_short"),
    # Trap: a paper's first page has a copyright line (one line, < 3 cue lines) and prose (3 of 5 lines): kept.
    "paper_first_page": (chunk(
        "Pricing options under stochastic volatility\nAbstract\n"
        "We study how the price of an option changes when the volatility of the underlying asset follows its "
        "own random process.\nWe find that a long call gains value when volatility rises and loses value "
        "when it falls again.\nCopyright © 2021 Elsevier Ltd. All rights reserved.", page=0), None),
    # Heading "Index" and 7 of 8 lines "term, 12" or "see also": 0.875 >= 0.2.
    "index_en": (chunk("Index\nVega, 312, 315-318\nVolatility, 45, 210\nimplied, 302\nsee also Greek letters\n"
                       "Value at risk, 499\nWeather derivatives, 771\nZero-coupon bond, 80, 84"), "index"),
    "index_de": (chunk("Sachverzeichnis\nVolatilität, 45, 210\nimplizite, 302\nsiehe auch Griechen\n"
                       "Zinsswap, 160, 171\n"
                       "Termingeschäft, 5\nOption, 7, 12"), "index"),
    # Heading "References"; lines 2, 3, 4, 5 have a year and a cue (Journal, "Merton, R."): 4/5 >= 0.2.
    "bibliography_en": (chunk(
        "References\nBlack, F., and M. Scholes. The pricing of options and corporate liabilities (1973).\n"
        "Journal of Political Economy 81 (1973): 637-659.\n"
        "Merton, R. C. Theory of rational option pricing. Bell Journal of Economics, 4 (1973): 141-183.\n"
        "Hull, J. and A. White. Options on assets with stochastic volatilities. Journal of Finance 42 (1987)."),
        "bibliography"),
    # Heading "Literaturverzeichnis"; 2 citation lines (year + "Hull, J." / "Verlag") of 4: 0.5 >= 0.2.
    "bibliography_de": (chunk(
        "Literaturverzeichnis\nHull, J. (2019): Optionen, Futures und andere Derivate. 10. Aufl., München: Pearson.\n"
        "Branger, N., Schlag, C. (2004): Zinsderivate. Berlin: Springer Verlag.\n"
        "Die weiteren Quellen sind im Anhang aufgeführt, geordnet nach Kapiteln und Themen des Buches."),
        "bibliography"),
    # 2 of 3 lines start with "Figure 3.x": 0.67 >= 0.5.
    "captions_en": (chunk("Figure 3.1: Payoff of a long call option at maturity\n"
                          "Figure 3.2: Payoff of a short put option at maturity\nstrike price K"), "captions"),
    "captions_de": (chunk("Abb. 2: Verlauf des Optionspreises in Abhängigkeit vom Kurs\nAbb. 3: Verlauf des Deltas\n"
                          "Kurs S"), "captions"),
    # 18 of 20 whitespace tokens are numbers (all but Strike, Total): 0.9 >= 0.4.
    "numeric_en": (chunk("Strike 2019 2020 2021\n100 12.5 13.1 14.2\n110 8.4 9.0 9.7\n120 5.1 5.6 6.3\n"
                         "Total 26.0 27.7 30.2"), "numeric"),
    # Trap for the index rule: "Umsatz 1.234,5 ... 1.678,9" ends in ",9" like "term, 12" but has digits in the
    # term part; it is a number table (12 of 16 tokens numeric).
    "numeric_de": (chunk("Umsatz 1.234,5 1.456,7 1.678,9\nKosten 987,6 1.001,2 1.100,0\nGewinn 246,9 455,5 578,9\n"
                         "Quote 20,0% 31,3% 34,5%"), "numeric"),
    # Trap: "$" signs are no tokens. 12 numbers among 22 tokens with a letter or digit = 0.55 >= 0.4
    # (counting the nine "$" as words would give 12/31 = 0.39: kept).
    "numeric_dollars": (chunk("Selected results (in millions)\nNet sales $ 11,303 $ 11,503 $ 11,290\n"
                              "Cost of sales $ 7,772 $ 7,485 $ 7,221\nGross margin $ 3,531 $ 4,018 $ 4,069"),
                        "numeric"),
    # 6 and 7 words < 20.
    "short_en": (chunk("Vega is the sensitivity to volatility."), "too_short"),
    "short_de": (chunk("Vega misst die Empfindlichkeit gegenüber der Volatilität."), "too_short"),
    "prose_en": (chunk(PROSE_EN), None),
    "prose_de": (chunk(PROSE_DE), None),
}


@pytest.mark.parametrize("name", sorted(NOISE_CASES))
def test_classify_noise_rules(name):
    case, expected = NOISE_CASES[name]
    assert classify_noise(case, None) == expected


def running_header_doc(header: str, footer_word: str, source: str) -> list[dict]:
    """Pages 10-13 with the same header and a page-number footer, plus page 14 holding little else."""
    body = [
        "The binomial tree divides the life of the option into many small time steps of equal length.",
        "At each step the price of the asset moves up or down by a factor that depends on volatility.",
        "Working backwards through the tree gives the value of the option at the start of its life.",
        "The method also values American options because early exercise can be checked at each node.",
    ]
    # Each page words its body lines differently, so only header and footer repeat.
    names = {10: "binomial", 11: "trinomial", 12: "lattice", 13: "recombining"}
    pages = [chunk("\n".join([header, *(f"In the {names[page]} method: {line}" for line in body),
                               f"{footer_word} {page + 1}"]), page, source, f"{source}-{page}")
             for page in range(10, 14)]
    # Header and footer (digits do not count) repeat; with "Page": 37 + 7 of 37 + 23 + 7 characters = 0.66 >= 0.5.
    pages.append(chunk(f"{header}\nSummary of the chapter.\n{footer_word} 15", 14, source, f"{source}-14"))
    return pages


@pytest.mark.parametrize(
    ("header", "footer"),
    [("CHAPTER 21 Basic Numerical Procedures", "Page"), ("Kapitel 3 Optionen und Futures", "Seite")],
)
def test_running_headers_are_found_per_document(header, footer):
    doc = running_header_doc(header, footer, "b.pdf")
    context = build_noise_context(doc)
    # Body pages: header and footer are 44 of about 480 characters, kept; the page-14 chunk goes.
    assert [classify_noise(c, context) for c in doc] == [None, None, None, None, "running_headers"]
    # Trap: the same header in another document on fewer than 3 pages is not repeated there.
    other = chunk(f"{header}\nSummary of the chapter.\n{footer} 15", 8, "c.pdf")
    assert classify_noise(other, build_noise_context(doc + [other])) == "too_short"


def test_a_contents_link_on_every_page_makes_no_contents_page():
    # Filings repeat a "Table of Contents" link on every page; only the real contents page is front matter.
    contents = chunk("Table of Contents\nPART I\nItem 1. Business 4\nItem 1A. Risk Factors 10\nItem 2. Properties 12\n"
                     "Item 3. Legal Proceedings 12", 1, "f.pdf", "f1")
    body = [plain_chunk("f.pdf", page) for page in range(3, 7)]
    body = [dict(c, text=c["text"].replace("]\n", "]\nTable of Contents\n", 1)) for c in body]
    context = build_noise_context([contents, *body])
    # Page 1 without its repeated link line: 4 of 5 lines are contents entries ("Item 1. Business 4").
    assert classify_noise(contents, context) == "front_matter"
    assert [classify_noise(c, context) for c in body] == [None, None, None, None]
    # Without the context the link looks like a heading.
    assert classify_noise(body[0], None) == "front_matter"


def test_filter_chunks_counts_every_rule():
    chunks = [case for case, _ in NOISE_CASES.values()]
    chunks += running_header_doc("CHAPTER 21 Basic Numerical Procedures", "Page", "hdr.pdf")
    kept, counts = filter_chunks(chunks)
    # front_matter: toc_en, toc_de, toc_leaders, copyright_en/de, title_en/de = 7; index 2; bibliography 2;
    # running_headers 1; captions 2; numeric 3; too_short: title_late, short_en, short_de = 3.
    assert counts == {"front_matter": 7, "index": 2, "bibliography": 2, "running_headers": 1, "captions": 2,
                      "numeric": 3, "too_short": 3}
    # Kept: paper_first_page, prose_en, prose_de and the four body pages, in input order.
    assert len(kept) == 7
    assert [c["page"] for c in kept[-4:]] == [10, 11, 12, 13]
