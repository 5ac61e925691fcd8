"""Tests for the question generator (goldset/generator.py, goldset/templates.py, goldset/llm_questions.py, text/words.py): question
kinds, gates, sampling, model path, output.

The noise filter's own tests are in test_noise.py, which also holds the shared chunk fixtures.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from localrag.goldset import generator as gg
from localrag.goldset.generator import (allocate, copied_share, detect_language, generate_questions,
                                        render_generation_summary)
from localrag.goldset.llm_questions import parse_llm_reply
from localrag.goldset.templates import template_questions
from localrag.text.words import jaccard, tokens
from localrag.goldset.format import write_goldset_csv
from localrag.goldset.noise import build_noise_context, classify_noise
from localrag.text.pages import strip_chunk_header
from test_noise import DESKS, PROSE_DE, PROSE_EN, chunk, plain_chunk, running_header_doc


# Prose without any reference, heading or definition: gives no template question.
PLAIN_EN = (
    "Traders watch the market closely every morning before the opening bell rings in the hall.\n"
    "Many of them read the news first and then check their positions and the orders of the night."
)


# ---------------------------------------------------------------------------------------------
# Text helpers


def test_tokens_keep_numbers_and_hyphenated_words_whole():
    assert tokens("What does Equation 21.23 state for Black-Scholes?") == [
        "what", "does", "equation", "21.23", "state", "for", "black-scholes"
    ]


def test_detect_language_counts_stop_words_and_ties_go_to_english():
    # English: the, of, to, the, of, the (6) vs German: none.
    assert detect_language(PROSE_EN) == "en"
    # German: die, ist, für, die, eines, und, wird, der, als, eine ... vs English: none.
    assert detect_language(PROSE_DE) == "de"
    # Trap: "in" and "was" are in both languages and in neither list; no stop word at all -> tie -> English.
    assert detect_language("Vega was in Optionen") == "en"
    # One German stop word ("die") against none: German.
    assert detect_language("Vega misst die Empfindlichkeit") == "de"


# ---------------------------------------------------------------------------------------------
# Question kinds


def questions_of(text: str, language: str | None = None) -> list[tuple[str, str]]:
    found = template_questions(text, language or detect_language(text))
    return [(c.kind, c.question) for c in found]


def test_exact_reference_questions_english_only_at_definition_sites():
    text = (
        "C = S N(d1) - K exp(-rT) N(d2)    (21.23)\n"
        "where N is the cumulative normal distribution and the other symbols are as before.\n"
        "(21.24)\n"  # a tag without a relation sign before it: no equation
        "Table 4: Option prices for different strikes\n"
        "Figure 3. Payoff of a long call\n"
        "Table 4.5 shows that the price rises with the strike.\n"  # trap: a mention, not a caption
        "see Figure 7 for the payoff of the put and the tree of the asset price in Equation (21.23)."
    )
    assert questions_of(text) == [
        ("equation-ref", "What does Equation 21.23 state?"),
        ("table-ref", "What does Table 4 show?"),
        ("figure-ref", "What does Figure 3 show?"),
    ]


def test_exact_reference_questions_german():
    text = (
        "Die Formel für den Preis der Kaufoption lautet\n"
        "c = S N(d1) - K e^(-rT) N(d2)\n"
        "(3.2)\n"  # tag on its own line: the line before carries the relation sign
        "Tabelle 4: Werte der Optionen für die verschiedenen Basispreise\n"
        "Abb. 3 Verlauf des Preises\n"
        "Tabelle 5 zeigt, dass der Preis mit der Laufzeit steigt."  # mention: lower-case word after the number
    )
    assert questions_of(text) == [
        ("equation-ref", "Was besagt Gleichung 3.2?"),
        ("table-ref", "Was zeigt Tabelle 4?"),
        ("figure-ref", "Was zeigt Abbildung 3?"),
    ]


def test_defined_term_questions_english():
    text = (
        "21.3 Vega\n"
        "Vega is the sensitivity of an option price to changes in the volatility of the\n"
        "underlying asset. The vega of a portfolio is defined as the rate of change of its value.\n"
        "The term gamma refers to the curvature. Thus vega is a measure. The model we use is a tree.\n"
        "Black-Scholes pricing is a method. Options are the contracts. Theta measures the decay."
    )
    defined = [q for kind, q in questions_of(text) if kind == "defined-term"]
    assert defined == [
        "What is vega?",                     # "Vega is the": sentence-initial capital lower-cased
        "What is the vega of a portfolio?",  # "is defined as", article kept
        "What is gamma?",                    # "The term gamma refers to": "term" and its article dropped
        "What is Black-Scholes pricing?",    # a name keeps its capital
        "What are options?",
        "What does theta measure?",
    ]  # "Thus vega", "The model we use" are no terms (adverb, pronoun)


def test_defined_terms_skip_abbreviations_inversions_and_keep_names():
    text = (
        "Wendell P. Weeks is a director of the company. Mr. Weeks is a member of the board since 2000.\n"
        "Corning is a materials science company. Its founders started Corning in New York.\n"
        "Provided below is a summary of the results. Gamma is de\ufb01ned as the rate of change of delta."
    )
    # "P. Weeks", "Mr. Weeks": no sentence starts after an initial or "Mr.". "Corning" stays capitalised
    # (the text writes it so in mid-sentence); "Provided below" is an inversion; the "ﬁ" ligature is read
    # as "fi" once the text is NFKC-normalised.
    assert [q for _, q in questions_of(gg.analysis_text(text))] == ["What is Corning?", "What is gamma?"]


def test_defined_term_questions_german():
    text = (
        "Unter der impliziten Volatilität versteht man die Volatilität, die in den Preisen steckt.\n"
        "Die Duration ist ein Maß für die Zinsempfindlichkeit einer Anleihe. Es ist ein guter Wert.\n"
        "Vega bezeichnet die Ableitung des Optionspreises nach der Volatilität."
    )
    assert questions_of(text) == [
        ("defined-term", "Was versteht man unter der impliziten Volatilität?"),
        ("defined-term", "Was versteht man unter Duration?"),
        ("defined-term", "Was versteht man unter Vega?"),
    ]  # "Es ist ein": a pronoun, no term


def test_section_questions_from_headings():
    english = ("21.3 Vega\nThe vega of an option tells how its price moves.\nChapter 5 Interest Rate Swaps\n"
               "3.2 Apple 45\n"
               "10.12 Form of Indemnity Agreement* 10-Q 6/26/09\nThe exhibits follow.")
    assert questions_of(english) == [
        ("section-ref", "What is covered in Section 21.3?"),
        ("section-location", "Which section discusses Vega?"),
        ("section-ref", "What is covered in Chapter 5?"),
        ("section-location", "Which chapter discusses Interest Rate Swaps?"),
    ]  # "3.2 Apple 45" (contents or table line) and "10.12 Form ... 6/26/09" (exhibit list) are no headings
    german = "3.2 Implizite Volatilität\nKapitel 5 Zinsswaps\nDer Preis der Option hängt von der Volatilität ab."
    assert questions_of(german) == [
        ("section-ref", "Was behandelt Abschnitt 3.2?"),
        ("section-location", "Welcher Abschnitt behandelt Implizite Volatilität?"),
        ("section-ref", "Was behandelt Kapitel 5?"),
        ("section-location", "Welches Kapitel behandelt Zinsswaps?"),
    ]


def test_running_header_lines_give_no_section_question():
    doc = running_header_doc("21.3 Vega and Gamma", "Page", "b.pdf")
    context = build_noise_context(doc)
    text = strip_chunk_header(doc[0]["text"])
    assert template_questions(text, "en", context.repeated_lines["b.pdf"]) == []
    assert [c.question for c in template_questions(text, "en")][:1] == ["What is covered in Section 21.3?"]


# ---------------------------------------------------------------------------------------------
# Gates


def test_copied_share_counts_content_words_found_verbatim():
    chunk_text = "Vega is the sensitivity of an option price to changes in volatility."
    # Content words (stop and question words dropped): sensitivity, option, price, volatility; all in the chunk.
    assert copied_share("What is the sensitivity of an option price to volatility?", chunk_text) == 1.0
    # strongly, option, react, markets, get, nervous: only "option" is in the chunk -> 1/6.
    assert copied_share("How strongly does an option react when markets get nervous?", chunk_text) == 1 / 6
    # Trap: "vega" is the defined term (allowed): content left is "measure", not in the chunk ("measures" is not
    # verbatim "measure") -> 0/1.
    assert copied_share("What does vega measure?", chunk_text, {"vega"}) == 0.0
    # Without content words at all the share is 0.
    assert copied_share("What is it?", chunk_text) == 0.0


def test_jaccard_on_normalised_tokens():
    # {what, does, vega, measure} vs {what, exactly, does, vega, measure}: 4 / 5.
    assert jaccard("What does vega measure?", "What exactly does VEGA measure") == 0.8
    # {what, does, equation, 3.1, state} vs {..., 3.2, ...}: 4 / 6.
    assert jaccard("What does Equation 3.1 state?", "What does Equation 3.2 state?") == pytest.approx(4 / 6)


# ---------------------------------------------------------------------------------------------
# Sampling


def test_allocate_proportional_with_minimum():
    # Minimum 1 each, rest 8 - 3 = 5 over a and b (c is full at 1): quotas 5*10/15 = 3.33, 5*5/15 = 1.67;
    # floors 3 and 1, one left -> largest fraction (b, .67): a 1+3, b 1+2, c 1.
    assert allocate({"a": 10, "b": 5, "c": 1}, 8, 1) == {"a": 4, "b": 3, "c": 1}
    # Tie trap: rest 1 over three equal documents, fractions 1/3 each, same size -> first name.
    assert allocate({"c": 2, "b": 2, "a": 2}, 4, 1) == {"a": 2, "b": 1, "c": 1}
    # n below the minima: larger documents first (b, c; a is smallest).
    assert allocate({"a": 1, "b": 3, "c": 3}, 2, 1) == {"a": 0, "b": 1, "c": 1}
    # Capacity trap: minimum 2 but a has 1 chunk; b takes the rest: a 1, b 2 + 3.
    assert allocate({"a": 1, "b": 9}, 6, 2) == {"a": 1, "b": 5}
    # More wanted than chunks: every chunk; an empty document gets 0.
    assert allocate({"a": 2, "b": 1, "z": 0}, 10, 1) == {"a": 2, "b": 1, "z": 0}


def table_chunk(source: str, page: int, number: int) -> dict:
    """A clean chunk with one table caption: gives exactly "What does Table <number> show?"."""
    desk = DESKS[page]
    text = (
        f"Table {number}: Prices of the {desk} series options\n"
        f"The table lists the closing prices of all call options in the {desk} series\n"
        f"together with their strikes and the volume the {desk} desk traded on that day.\n"
        f"Prices of the {desk} series are quoted in dollars per share and rounded to cents."
    )
    return chunk(text, page, source, f"{source}#{page}")


def index_chunk(source: str, page: int) -> dict:
    text = "Index\nVega, 312, 315\nVolatility, 45, 210\nZero-coupon bond, 80, 84"
    return chunk(text, page, source, f"{source}#{page}")


def proportional_corpus() -> list[dict]:
    chunks = [table_chunk("a.pdf", page, page) for page in range(3, 9)]           # 6 chunks, Tables 3-8
    chunks += [table_chunk("b.pdf", page, 10 + page) for page in range(3, 6)]     # 3 chunks, Tables 13-15
    chunks += [table_chunk("c.pdf", 3, 21), index_chunk("c.pdf", 40)]             # 1 kept, 1 index page
    return chunks


def test_generation_spreads_questions_in_proportion_with_minimum():
    result = generate_questions(proportional_corpus(), 5, seed=7)
    # Kept sizes a 6, b 3, c 1. Minimum 1 each, rest 2 over a and b (c full): 2*6/9 = 1.33, 2*3/9 = 0.67;
    # floors 1, 0; the last one to b (.67 > .33): a 2, b 2, c 1.
    summary = {name: (d.chunks, d.kept, d.allocated, d.generated) for name, d in result.documents.items()}
    assert summary == {"a.pdf": (6, 6, 2, 2), "b.pdf": (3, 3, 2, 2), "c.pdf": (2, 1, 1, 1)}
    assert result.removed["index"] == 1
    assert [row.source for row in result.rows] == ["a.pdf", "a.pdf", "b.pdf", "b.pdf", "c.pdf"]
    assert result.kinds == {"table-ref": 5}
    c_row = result.rows[-1]
    assert (c_row.question, c_row.corpus, c_row.page, c_row.note) == (
        "What does Table 21 show?", "table-ref", 4, "generated:table-ref chunk=c.pdf#3 seed=7"
    )


def test_generation_gives_a_short_document_quota_to_the_others():
    chunks = [table_chunk("a.pdf", 3, 1)] + [plain_chunk("a.pdf", page) for page in range(4, 7)]
    chunks += [table_chunk("b.pdf", page, 10 + page) for page in range(3, 8)]
    result = generate_questions(chunks, 4, seed=1)
    # Sizes a 4, b 5: minimum 1 each, rest 2: 2*4/9 = .89, 2*5/9 = 1.11 -> a 0+1 (fraction), b 1: a 2, b 2.
    # a has one chunk with a question, so b makes up the difference.
    assert {n: (d.allocated, d.generated) for n, d in result.documents.items()} == {"a.pdf": (2, 1), "b.pdf": (2, 3)}
    assert len(result.rows) == 4


def csv_text(result, tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    write_goldset_csv(path, result.rows)
    return path.read_text(encoding="utf-8")


def test_generation_is_reproducible_and_seed_dependent(tmp_path):
    chunks = [table_chunk("a.pdf", page, page) for page in range(3, 11)]
    chunks += [table_chunk("b.pdf", page, 20 + page) for page in range(3, 11)]
    first = csv_text(generate_questions(chunks, 4, seed=7), tmp_path, "one.csv")
    shuffled = list(chunks)
    random.Random(0).shuffle(shuffled)  # the input order must not matter
    again = csv_text(generate_questions(shuffled, 4, seed=7), tmp_path, "two.csv")
    other = csv_text(generate_questions(chunks, 4, seed=8), tmp_path, "three.csv")
    assert first == again
    assert first != other
    assert first.splitlines()[0] == "frage;korpus;erwartete_quelle;erwartete_seite;anmerkung"
    assert len(first.splitlines()) == 5


def test_gate_rejects_a_duplicate_question_from_another_document():
    chunks = [table_chunk("a.pdf", 3, 4), table_chunk("b.pdf", 3, 4)]
    result = generate_questions(chunks, 2, seed=7)
    # a.pdf comes first; b.pdf's "What does Table 4 show?" is the same question (Jaccard 1.0).
    assert [(row.question, row.source) for row in result.rows] == [("What does Table 4 show?", "a.pdf")]
    assert result.rejected == {"too_short": 0, "noise_page": 0, "copied": 0, "duplicate": 1}


def test_gate_rejects_a_chunk_on_a_reference_page():
    head = chunk("References\nBlack, F., and M. Scholes (1973). The pricing of options. Journal of Political "
                 "Economy 81.", 30, "a.pdf", "a-30-0")
    # An annotated bibliography continued: 2 citation lines of 6 (0.33 < 0.4 without heading): kept alone.
    tail = chunk(
        "Hull, J. (2018). Options, Futures and Other Derivatives. Pearson Education.\n"
        "The binomial model is a discrete-time model that this book explains in detail.\n"
        "Its chapters on trees show how the model prices American options step by step.\n"
        "Cox, J., S. Ross and M. Rubinstein (1979). Option pricing: a simplified approach.\n"
        "The paper introduced the tree that the book later builds on in several chapters.\n"
        "Readers who want the proofs should start with this article before the others.", 30, "a.pdf", "a-30-1")
    assert classify_noise(tail, None) is None
    assert [c.question for c in template_questions(strip_chunk_header(tail["text"]), "en")] == [
        "What is the binomial model?"
    ]
    result = generate_questions([head, tail], 1, seed=7)
    # The whole page has the heading and 3 citation lines of 8 (0.375 >= 0.2): a reference page.
    assert result.rows == []
    assert result.rejected["noise_page"] == 1
    assert result.removed["bibliography"] == 1


def test_a_list_of_headings_gives_no_section_question():
    # Tail of a contents page without page numbers: five "headings" in one chunk are a list.
    text = ("3.1 Pricing European Call Options\n3.2 Pricing American Put Options\n"
            "3.3 Hedging With Delta Neutral Portfolios\n3.4 Trading Strategies Using Spreads\n"
            "3.5 Volatility Smiles And Surfaces\n3.6 Exotic Options")
    assert template_questions(text, "en") == []
    # The last line is never a heading (the chunk may cut it): 3.5 here.
    assert [c.question for c in template_questions("\n".join(text.splitlines()[3:5]), "en")] == [
        "What is covered in Section 3.4?", "Which section discusses Trading Strategies Using Spreads?"
    ]
    # Three numbered lines are still headings.
    three = "\n".join(text.splitlines()[2:5] + ["The next part turns to exotic options."])
    assert [c.question for c in template_questions(three, "en")] == [
        "What is covered in Section 3.3?", "Which section discusses Hedging With Delta Neutral Portfolios?",
        "What is covered in Section 3.4?", "Which section discusses Trading Strategies Using Spreads?",
        "What is covered in Section 3.5?", "Which section discusses Volatility Smiles And Surfaces?",
    ]


# ---------------------------------------------------------------------------------------------
# Model path


def test_parse_llm_reply_variants():
    question = "question"
    assert parse_llm_reply('{"question": "What does vega measure?"}') == (question, "What does vega measure?")
    assert parse_llm_reply('```json\n{"question": "Was misst  Vega?"}\n```') == (question, "Was misst Vega?")
    assert parse_llm_reply("Sure! Here is a question: What does vega measure?") == (question, "What does vega measure?")
    assert parse_llm_reply("Question: How is gamma hedged?\nIt is hedged with options.") == (question,
                                                                                            "How is gamma hedged?")
    # Trap: the dot inside "21.23" does not end a sentence.
    assert parse_llm_reply("What does Equation 21.23 state?") == (question, "What does Equation 21.23 state?")
    assert parse_llm_reply('{"question": null}') == ("declined", None)
    assert parse_llm_reply("I cannot help with that.") == ("failed", None)
    assert parse_llm_reply(None) == ("failed", None)


def llm_corpus() -> list[dict]:
    return [
        chunk(PROSE_EN, 5, "a.pdf", "a5"),
        chunk(PLAIN_EN, 6, "a.pdf", "a6"),
        chunk("Volatility traders buy straddles when they expect large moves in either direction of the "
              "market.\nThey sell straddles when they expect the market to stay calm for the coming weeks.",
              7, "a.pdf", "a7"),
        chunk("Many traders read the news first and check their positions before they place new orders.\n"
              "Orders placed overnight are filled at the opening price of the next trading session.", 8, "a.pdf", "a8"),
        chunk("The exchange publishes the settlement prices of all contracts at the end of each trading day.\n"
              "Members use these prices to compute the margin they owe to the clearing house.", 9, "a.pdf", "a9"),
    ]


def fake_model(prompt: str) -> str | None:
    if "sensitivity of an option price" in prompt:   # page 5: JSON
        return '{"question": "How strongly does an option react when markets get nervous?"}'
    if "opening bell" in prompt:                     # page 6: prose around the question
        return "Sure! Here is a question: What habits do market professionals have at dawn?"
    if "straddles" in prompt:                        # page 7: no reply
        return None
    if "check their positions" in prompt:            # page 8: copies the chunk
        return '{"question": "Do many traders read the news first before they check their positions?"}'
    return '{"question": null}'                      # page 9: declines


def test_llm_questions_with_fake_model():
    result = generate_questions(llm_corpus(), 10, seed=3, ask=fake_model, llm_name="qwen2.5:7b")
    # Page 8: content words many, traders, read, news, first, before, they, check, positions: all in the chunk
    # -> 9/9 > 0.5, rejected. Page 6: habits, market, professionals, dawn: "market" only -> 1/4, kept.
    assert [(row.question, row.page, row.note) for row in result.rows] == [
        ("How strongly does an option react when markets get nervous?", 6,
         "generated:llm model=qwen2.5:7b chunk=a5 seed=3"),
        ("What habits do market professionals have at dawn?", 7, "generated:llm model=qwen2.5:7b chunk=a6 seed=3"),
    ]
    assert result.kinds == {"llm": 2}
    assert result.rejected["copied"] == 1
    llm = result.llm
    assert (llm.asked, llm.answered, llm.declined, llm.failed, llm.gave_up) == (5, 3, 1, 1, False)


def test_gate_rejects_a_near_duplicate_model_question():
    # {why, do, straddle, buyers, hope, for, big, surprises} vs the same + {today}: Jaccard 8/9 >= 0.8.
    # Neither copies its chunk (no content word occurs in the traders' prose), so only the duplicate gate fires.
    def ask(prompt: str) -> str:
        today = " today" if "delta desk" in prompt else ""
        return f'{{"question": "Why do straddle buyers hope for big surprises{today}?"}}'

    result = generate_questions([plain_chunk("a.pdf", 3), plain_chunk("a.pdf", 4)], 2, seed=1, ask=ask)
    assert len(result.rows) == 1
    assert result.rejected == {"too_short": 0, "noise_page": 0, "copied": 0, "duplicate": 1}


def test_llm_prompt_names_the_chunk_language_and_carries_the_text():
    prompts: list[str] = []
    generate_questions([chunk(PROSE_DE, 5, "d.pdf", "d5")], 1, seed=1, ask=lambda p: prompts.append(p) or None)
    assert len(prompts) == 1
    assert "write ONE question in German" in prompts[0]
    assert "Die Volatilität ist ein Maß" in prompts[0]
    assert "[d.pdf, page 6]" not in prompts[0]  # the indexer's header is stripped


def test_llm_short_question_is_rejected_and_dead_model_is_given_up():
    short = generate_questions([chunk(PROSE_EN)], 1, seed=1, ask=lambda p: '{"question": "Vega?"}')
    assert short.rejected["too_short"] == 1 and short.rows == []
    chunks = [plain_chunk("a.pdf", page) for page in range(3, 11)]
    calls: list[str] = []
    dead = generate_questions(chunks, 3, seed=1, ask=lambda p: calls.append(p) or None)
    # 8 chunks, but the model is not asked again after 5 failures in a row.
    assert len(calls) == 5
    assert (dead.llm.failed, dead.llm.gave_up, dead.rows) == (5, True, [])
    assert "model: stopped after 5 unusable replies in a row; check that the model runs and answers with JSON" in (
        render_generation_summary(dead)
    )


def test_generate_rejects_bad_arguments():
    with pytest.raises(ValueError, match="at least 1, got 0"):
        generate_questions([], 0, seed=1)
    with pytest.raises(ValueError, match="chunk 1 lacks page"):
        generate_questions([{"chunk_id": "x", "source": "a.pdf", "text": "t"}], 1, seed=1)


# ---------------------------------------------------------------------------------------------
# Output


def test_render_generation_summary():
    result = generate_questions(proportional_corpus(), 5, seed=7)
    assert render_generation_summary(result) == [
        "generated 5 of 5 requested questions (seed 7)",
        "chunks: 11 read, 10 kept by the noise filter",
        "noise filter removed: index 1",
        "document  chunks    kept  allocated  generated",
        "a.pdf          6       6          2          2",
        "b.pdf          3       3          2          2",
        "c.pdf          2       1          1          1",
        "questions per kind: table-ref 5",
        "questions per language: en 5",
        "rejected by the gates: none",
    ]


def test_a_generated_goldset_has_no_formula_cell_and_reads_back_the_file_names(tmp_path):
    import csv

    from localrag.files import FORMULA_STARTS
    from localrag.goldset.format import read_goldset

    evil = '=HYPERLINK("evil.example","x").pdf'
    chunks = [table_chunk(evil, page, page) for page in range(3, 11)] + [table_chunk("-minus.pdf", 3, 40)]
    result = generate_questions(chunks, 6, seed=1)
    path = tmp_path / "generated.csv"
    write_goldset_csv(path, result.rows)
    cells = [cell for row in csv.reader(path.open(encoding="utf-8"), delimiter=";") for cell in row]
    assert sum(cell.startswith("'=HYPERLINK") for cell in cells) >= 5
    assert not [cell for cell in cells if cell.startswith(FORMULA_STARTS)]
    sources = {loc.source for q in read_goldset(path).questions for loc in q.locations}
    assert sources == {row.source for row in result.rows} and evil in sources
