"""localrag.cli, the parser both command lines share, and the sections of eval_retrieval.py's --help."""
from __future__ import annotations

import argparse

import pytest

import eval_retrieval as er
from localrag import cli

# The sections of eval_retrieval.py --help, in the order they are shown.
EVAL_SECTIONS = ["goldset and report", "index", "index settings", "retrieval", "datasets", "judge", "answers",
                 "goldset tools", "comparisons", "gates"]


def words(text: str) -> str:
    return " ".join(text.split())  # argparse wraps lines; compare word by word


def test_help_names_every_default_but_leaves_none_to_the_help_text():
    parser = cli.new_parser("Do things.\n\nMore text that is not the description.")
    parser.add_argument("--size", type=int, default=3, help="how many")
    parser.add_argument("--model", default=None, help="which model (default: the index's)")
    parser.add_argument("--depth", type=int, default=100, help="how deep (default: 100)")
    text = words(parser.format_help())
    assert "Do things." in text and "More text" not in text
    assert "how many (default: 3)" in text
    assert "which model (default: the index's)" in text
    assert "(default: None)" not in text
    assert "how deep (default: 100) (default" not in text and "how deep (default: 100)" in text  # said once


def test_a_shortened_flag_is_an_error_not_another_flag(capsys):
    parser = cli.new_parser("Do things.")
    parser.add_argument("--output-name", default="x")
    with pytest.raises(SystemExit):
        parser.parse_args(["--output", "y"])
    assert "unrecognized arguments: --output y" in capsys.readouterr().err


def eval_flag_sections() -> dict[str, str]:
    """Each option of eval_retrieval's parser (but --help) -> the title of the section it is shown in."""
    parser = er.build_parser()
    sections = {}
    for group in parser._action_groups:
        for action in group._group_actions:
            if not isinstance(action, argparse._HelpAction):
                sections[action.option_strings[0]] = group.title
    return sections


def test_every_eval_flag_sits_in_a_named_section():
    sections = eval_flag_sections()
    assert len(sections) == len(er.build_parser()._actions) - 1  # every option but --help, each once
    assert set(sections.values()) == set(EVAL_SECTIONS)
    text = er.build_parser().format_help()
    assert [title for title in EVAL_SECTIONS if f"\n{title}:\n" in text] == EVAL_SECTIONS
    assert [text.index(f"\n{title}:\n") for title in EVAL_SECTIONS] == sorted(
        text.index(f"\n{title}:\n") for title in EVAL_SECTIONS)
    assert sections["--goldset"] == "goldset and report"
    assert sections["--dataset"] == "datasets"
    assert sections["--judge"] == "judge"
    assert sections["--lint"] == "goldset tools"
    assert sections["--compare"] == "comparisons"
    assert sections["--sweep"] == "comparisons"
    assert sections["--chunk-size"] == sections["--embedding-model"] == "index settings"
    assert sections["--fail-under"] == "gates"


def test_every_eval_flag_help_shows_its_default():
    parser = er.build_parser()
    formatter = parser._get_formatter()
    unwrapped = "".join(parser.format_help().split())  # argparse wraps lines, long words at hyphens too
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        shown = words(formatter._expand_help(action))
        assert "(default: " in shown, action.option_strings[0]
        assert "(default: None)" not in shown, action.option_strings[0]
        assert shown.count("(default: ") == 1, action.option_strings[0]
        assert "".join(shown.split()) in unwrapped, action.option_strings[0]


def test_a_reader_that_closes_stdout_early_gets_no_traceback(tmp_path):
    # `eval_retrieval.py --compare A B | head -1`: head leaves after one line, the script's later prints meet a
    # closed pipe. Python would print a BrokenPipeError traceback (twice); the script exits 141 quietly instead.
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    # Enough moved questions that the output (about 160 KB) outgrows the pipe's buffer (64 KB): the script cannot
    # finish writing before the reader goes away, so the closed pipe is met every time, not only under load.
    per_query = [{"query_id": f"q{i}", "question": f"Question {i}" + " long" * 400, "rank": 1 + i % 3,
                  "metrics": {"mrr": 1 / (1 + i % 3)}} for i in range(3000)]
    report = {"title": "goldset g.csv", "kind": "goldset", "metrics": {"mrr": 0.6}, "per_query": per_query}
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(report), encoding="utf-8")
    for q in per_query:
        q["rank"], q["metrics"]["mrr"] = 1, 1.0  # every question moves: a long "Better" list to print
    new.write_text(json.dumps(report), encoding="utf-8")
    process = subprocess.Popen([sys.executable, str(root / "eval_retrieval.py"), "--compare", str(old), str(new)],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout.readline().startswith(b"new.json vs. old.json")
    process.stdout.close()  # the reader goes away
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 141
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr


def test_help_ends_with_three_examples_that_parse():
    import shlex

    import add_pdfs

    for script, parser in ((er, er.build_parser()), (add_pdfs, add_pdfs.build_parser())):
        examples = script.HELP_EXAMPLES
        assert len(examples) == 3
        text = parser.format_help()
        # The epilog as written, not reflowed: each command on its own line, what it does indented below.
        assert text.endswith("\nexamples:\n" + "".join(f"  {command}\n      {what}\n" for command, what in examples))
        for command, _ in examples:
            words_ = shlex.split(command)
            assert words_[:2] == ["python", f"{script.__name__}.py"]
            parser.parse_args(words_[2:])  # argparse exits on a flag it does not know
    assert er.HELP_EXAMPLES[0][0] == "python eval_retrieval.py --mode dense"
    assert add_pdfs.HELP_EXAMPLES[1][0] == "python add_pdfs.py ~/papers --index ~/papers-index"
