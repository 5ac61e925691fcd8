"""Tests for localrag/evaluation/answers.py: a chat's answers read from JSONL or CSV, matched to goldset questions,
and every line that is not used named with its reason."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from localrag.errors import EvalError
from localrag.evaluation.answers import GivenAnswer, GivenPassage, read_answers, read_passages
from localrag.goldset.format import query_id

QUESTIONS = {query_id(q): q for q in ("What was 3M's FY2018 capital expenditure?", "Wie hoch war der Umsatz 2022?")}
CAPEX, UMSATZ = list(QUESTIONS)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_answers_by_id_or_question_with_their_passages(tmp_path):
    lines = [{"query_id": CAPEX, "answer": " $1577.00 million [3M_2018_10K.pdf, p. 60] ",
              "passages": [{"source": "3M_2018_10K.pdf", "page": 60, "text": "Purchases of PP&E 1,577"},
                           {"source": "3M_2018_10K.pdf", "page": 61}]},
             {"question": "  Wie hoch  war der Umsatz 2022? ", "answer": "1.577,5 Mio. EUR"}]
    path = write(tmp_path, "answers.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n\n")
    found = read_answers(path, QUESTIONS)
    assert found.messages == ()
    assert found.answers == {
        CAPEX: GivenAnswer(CAPEX, "$1577.00 million [3M_2018_10K.pdf, p. 60]",
                           (GivenPassage("3M_2018_10K.pdf", 60, "Purchases of PP&E 1,577"),
                            GivenPassage("3M_2018_10K.pdf", 61, None)), 1),
        UMSATZ: GivenAnswer(UMSATZ, "1.577,5 Mio. EUR", None, 2)}  # passages not said: None, never ()
    assert found.missing([CAPEX, UMSATZ, "x"]) == ["x"]


def test_csv_answers_with_a_passages_cell(tmp_path):
    passages = json.dumps([{"source": "a.pdf", "page": 2}]).replace('"', '""')
    path = write(tmp_path, "answers.csv", f'question;answer;passages\n'
                                          f'What was 3M\'s FY2018 capital expenditure?;"$1,577 million; roughly";'
                                          f'"{passages}"\n;;\n')
    found = read_answers(path, QUESTIONS)
    assert found.answers == {CAPEX: GivenAnswer(CAPEX, "$1,577 million; roughly", (GivenPassage("a.pdf", 2),), 2)}
    assert found.messages == ()


def test_every_line_not_used_is_named(tmp_path):
    text = "\n".join([
        json.dumps({"query_id": CAPEX, "answer": "first"}),
        "{not json",
        json.dumps(["a", "list"]),
        json.dumps({"query_id": "0000000000", "answer": "x"}),
        json.dumps({"question": "Who is the CEO?", "answer": "x"}),
        json.dumps({"answer": "nobody asked"}),
        json.dumps({"query_id": UMSATZ, "answer": "   "}),
        json.dumps({"query_id": CAPEX, "answer": "second"}),
        json.dumps({"query_id": UMSATZ, "answer": "ok", "passages": [{"page": 3}, {"source": "b.pdf", "page": 0},
                                                                      {"source": "c.pdf", "page": "7"}]}),
    ])
    found = read_answers(write(tmp_path, "a.jsonl", text), QUESTIONS)
    assert found.answers[CAPEX].answer == "first"
    assert found.answers[UMSATZ].passages == (GivenPassage("b.pdf", None), GivenPassage("c.pdf", None))
    assert list(found.messages) == [
        "line 2: not valid JSON (Expecting property name enclosed in double quotes at column 2); line skipped",
        "line 3: expected a JSON object, got list; line skipped",
        "line 4: the goldset has no question with query id '0000000000'; line skipped",
        "line 5: the goldset has no question 'Who is the CEO?'; line skipped",
        'line 6: names no question (a "query_id" or "question"); line skipped',
        "line 7: no \"answer\" for 'Wie hoch war der Umsatz 2022?'; line skipped",
        "line 8: a second answer to the question of line 1; the first is kept",
        'line 9: passage 1 has no "source"; left out',
        "line 9: passage 2 has page 0, not a page number from 1; read without a page",
        "line 9: passage 3 has page '7', not a page number from 1; read without a page",
    ]


def test_passages_that_are_not_a_list_are_read_as_not_given():
    assert read_passages("[{", 4) == (None, ["line 4: passages are not a JSON list (Expecting property name "
                                             "enclosed in double quotes); read as not given"])
    assert read_passages({"source": "a.pdf"}, 5) == (None, ['line 5: passages must be a list of {"source", '
                                                            '"page"}, got dict; read as not given'])
    assert read_passages([], 6) == ((), [])  # given, and empty: the answer saw no passage


def test_a_file_without_usable_answers_or_header_is_an_error(tmp_path):
    with pytest.raises(EvalError) as caught:
        read_answers(write(tmp_path, "a.csv", "id,text\n1,x\n"), QUESTIONS)
    assert str(caught.value) == ('the answers file\'s header (id, text) lacks an "answer" column and a "query_id" '
                                 'or "question" column; see --help for the format')
    with pytest.raises(EvalError) as caught:
        read_answers(write(tmp_path, "b.jsonl", json.dumps({"question": "Who?", "answer": "x"}) + "\n"), QUESTIONS)
    assert str(caught.value) == (f"the answers file {tmp_path / 'b.jsonl'} holds no answer to a question of the "
                                 f"goldset (line 1: the goldset has no question 'Who?'; line skipped)")
    with pytest.raises(EvalError, match=r"cannot read the answers file .*missing.jsonl \(FileNotFoundError"):
        read_answers(tmp_path / "missing.jsonl", QUESTIONS)
    (tmp_path / "latin.csv").write_bytes("question,answer\nUmsatz?,f\xfcnf\n".encode("latin-1"))
    with pytest.raises(EvalError, match="UnicodeDecodeError"):
        read_answers(tmp_path / "latin.csv", QUESTIONS)
