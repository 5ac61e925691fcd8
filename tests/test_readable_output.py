"""Readable output: questions wrapped whole, a sweep's differing settings as one table, the run's "Wrote" line,
one warning per text per run."""
from __future__ import annotations

from localrag import files
from localrag.evaluation import report
from localrag.evaluation.result import EvalResult, NotFound, QuestionResult, Status

LONG = ("By how much did the company cut its Scope 1 and 2 emissions compared with the base year, and which "
        "measures does the report credit for it?")


def test_a_long_question_wraps_under_its_column_and_is_never_cut():
    lines = report.question_lines("     1  ", LONG)
    assert lines == [
        "     1  By how much did the company cut its Scope 1 and 2 emissions compared with the base year, and",
        "        which measures does the report credit for it?",
    ]
    assert all(len(line) <= 100 for line in lines)
    # A word longer than the line stays whole (a URL, a file name), on a line of its own.
    assert report.question_lines("  - ", "see " + "x" * 120) == ["  - see", "    " + "x" * 120]
    assert report.question_lines("  - ", "  Short   question? ") == ["  - Short question?"]


def test_per_question_and_never_found_blocks_show_the_whole_question():
    q = QuestionResult("q1", LONG, None, {"hit@5": 0.0}, locations=({"source": "bericht.pdf", "page": 7},))
    result = EvalResult("goldset", "goldset g.csv", {"hit@5": 0.0}, 1, (q,),
                        not_found=(NotFound(LONG, q.locations, ()),))
    assert report.render_per_query(result) == [
        "Per question (1, sorted by rank, then question)",
        "     –  By how much did the company cut its Scope 1 and 2 emissions compared with the base year, and",
        "        which measures does the report credit for it?",
        "        expected: bericht.pdf p. 7 · first: nothing retrieved",
    ]
    assert report.render_not_found(result.not_found) == [
        "Never found (1)",
        "  - By how much did the company cut its Scope 1 and 2 emissions compared with the base year, and",
        "    which measures does the report credit for it?",
        "    expected: bericht.pdf p. 7",
    ]


def sweep_row(name: str, config: list[tuple[str, str]]) -> EvalResult:
    return EvalResult("goldset", "goldset g.csv", {"hit@5": 0.5, "mrr": 0.5}, 2, (), name=name,
                      config=tuple(config), status=Status(0))


def test_a_sweep_shows_the_settings_that_differ_as_one_table():
    rows = [sweep_row("chunk_size=2000 mode=dense", [("Index", "a (2000 characters)"), ("Retrieval mode", "dense"),
                                                     ("Reranker", "off")]),
            sweep_row("chunk_size=page mode=bm25", [("Index", "b (whole pages)"), ("Retrieval mode", "bm25"),
                                                    ("Reranker", "off"), ("IVF", "4 lists")])]
    text = report.render_sweep(rows, [("chunk_size", ["2000", "page"]), ("mode", ["dense", "bm25"])], "",
                               "g.sweep-<row>.txt")
    lines = text.splitlines()
    start = lines.index("Configuration (shared by every row)")
    assert lines[start:start + 8] == [
        "Configuration (shared by every row)",
        "  Reranker:           off",
        "",
        "Configuration (per row)",
        "  row                         Index                Retrieval mode  IVF",
        "  chunk_size=2000 mode=dense  a (2000 characters)  dense           –",  # the first row has no IVF line
        "  chunk_size=page mode=bm25   b (whole pages)      bm25            4 lists",
        "",
    ]


def test_the_wrote_line_names_each_file_once_in_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert files.wrote_line(["eval/baseline.txt", "eval/baseline.json", "eval/baseline.details.md",
                             "eval/runs/baseline.compare.txt", "eval/baseline.txt"]) == (
        "Wrote eval/baseline.txt, eval/baseline.json, eval/baseline.details.md, eval/runs/baseline.compare.txt")
    assert files.wrote_line([tmp_path / "r.txt"]) == "Wrote r.txt"
    assert files.wrote_line([]) == "Wrote no file"


def test_a_warning_is_shown_once_per_run(capsys):
    warning = "warning: reranking off: cross-encoder/x is not downloaded"
    with files.warnings_once():
        for _ in range(3):  # one per index of a sweep
            files.log(warning)
            files.log("Index synced")  # notes are not warnings: each is shown
        files.log("warning: another cause")
    with files.warnings_once():  # the next run says it again
        files.log(warning)
    files.log(warning)  # outside a run: every time
    files.log(warning)
    assert capsys.readouterr().err.splitlines() == [warning, "Index synced", "Index synced", "Index synced",
                                                    "warning: another cause", warning, warning, warning]
