"""`eval_retrieval.py --lint` and `--generate` (model-free and `--llm` against the local stub) through the CLI.

Lint runs on the tiny corpus (conftest.TINY_CORPUS: options.pdf 2 pages, weather.pdf 1, Literatur_Übersicht.pdf 1,
scan.pdf 2 with page 2 image-only). Generation runs on GEN_CORPUS below, where every text page defines one term, so
the page of a generated question can be checked by hand.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import write_corpus, write_pdf

import eval_retrieval as er
from localrag.goldset import format as gs
from localrag.models import llm
from openai_stub import OpenAIStub, error_body

# Every text page defines one term at its start, so the model-free generator makes exactly one defined-term
# question per page ("What is delta?" -> greeks.pdf page 1). greeks.pdf page 5 is a number line: the noise filter
# drops it ("numeric": 25 of its 29 tokens are numbers, 0.86 >= NUMERIC_TOKEN_SHARE 0.4).
GEN_CORPUS = {
    "greeks.pdf": [
        "Delta is the rate at which the price of an option changes when the price of the underlying share "
        "moves by one unit. Traders rebalance their hedge every day.",
        "Gamma is the rate at which delta itself changes when the underlying share moves. A portfolio with "
        "large gamma must be rebalanced often to stay neutral.",
        "Theta is the loss of option value as time passes with everything else unchanged. Short option "
        "positions earn theta while the market stays calm.",
        "Rho is the sensitivity of an option price to the risk-free interest rate. It matters most for "
        "long-dated options on bonds and currencies.",
        "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 Delta Gamma Theta Rho",
    ],
    "glossar.pdf": [
        "Unter der Volatilität versteht man die Schwankungsbreite eines Kurses über einen bestimmten Zeitraum. "
        "Sie wird meist als annualisierte Standardabweichung der Renditen angegeben.",
        "Unter einem Future versteht man einen standardisierten Terminkontrakt, der an einer Börse gehandelt "
        "wird. Beide Seiten sind zur Erfüllung des Geschäfts verpflichtet.",
    ],
}
# The template question of each page (file, 1-based page).
GEN_QUESTIONS = {
    ("greeks.pdf", 1): "What is delta?",
    ("greeks.pdf", 2): "What is gamma?",
    ("greeks.pdf", 3): "What is theta?",
    ("greeks.pdf", 4): "What is rho?",
    ("glossar.pdf", 1): "Was versteht man unter der Volatilität?",
    ("glossar.pdf", 2): "Was versteht man unter einem Future?",
}
HEADER = "frage;korpus;erwartete_quelle;erwartete_seite;anmerkung"
# The per-document order in which chunks are tried is random.Random(f"{seed}/{file}").shuffle of the kept chunks
# in page order (goldset_generation._shuffled_queues); for the seeds used here:
#   seed 0: glossar.pdf pages [2, 1], greeks.pdf pages [3, 1, 4, 2]
#   seed 1: glossar.pdf pages [2, 1], greeks.pdf pages [2, 1, 4, 3]
# With --generate 3 the quotas are glossar 1, greeks 2 (allocate: 1 each, the third by largest remainder
# 1 * 4/6 = 0.67 for greeks vs 1 * 2/6 = 0.33 for glossar), so a document's first chunks in that order are used.


def run(capsys, *argv) -> tuple[int, str, str]:
    """main() in-process; returns (exit code, stdout, stderr)."""
    code = er.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def write_text(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.fixture
def tiny_copy(tiny_index, tmp_path) -> tuple[Path, Path]:
    """(docs, index) copies of the session's tiny corpus, free to sync and change."""
    docs, index = tiny_index
    return Path(shutil.copytree(docs, tmp_path / "docs")), Path(shutil.copytree(index, tmp_path / "index"))


@pytest.fixture(scope="module")
def gen_index(tmp_path_factory) -> tuple[Path, Path]:
    """(docs, index) of GEN_CORPUS, built once; the CLI's syncs find nothing to change."""
    from local_rag import LocalRAG

    base = tmp_path_factory.mktemp("gen")
    docs = write_corpus(base / "docs", GEN_CORPUS)
    LocalRAG(base / "index", reranker_model=None, quiet=True).sync([docs], progress=False)
    return docs, base / "index"


def generate(gen_index, out: Path, *extra) -> list:
    docs, index = gen_index
    return ["--generate", 3, "--out", out, "--docs", docs, "--index", index, "--no-rerank", "--quiet", *extra]


# ----------------------------------------------------------------------------- lint

# Line numbers are physical lines of the file; each row names what lint must find in it.
LINT_GOLDSET = "\n".join([
    HEADER,                                                                               # line 1
    "How sensitive is the option value to volatility?;;options.pdf;1;fine",              # line 2
    "What does the scanned appendix show?;;scan.pdf;2;image-only page",                  # line 3
    "What is the Black-Scholes-Merton price of a call?;;option.pdf;2;typo",             # line 4
    "How do crops react to rainfall?;;weather.pdf;3;weather.pdf has 1 page",             # line 5
    "Vega?;;options.pdf;1;one word",                                                     # line 6
    # Same token set as line 2 ("the" twice counts once): Jaccard 1.0 >= 0.8, but another file.
    "How sensitive is the option value to the volatility?;;weather.pdf;1;duplicate",     # line 7
    ";;options.pdf;1;row without a question",                                            # line 8
    "What is the vega of a long call?;;options.pdf;zwei;page as a word",                 # line 9
    "What does the scanned letter say?;;letter.pdf;1;in the docs folder, no text at all",  # line 10
    "Who wrote the chapter on the Greeks?;;Greeks.pdf;;no similar file name",            # line 11
]) + "\n"


def test_lint_lists_every_finding_and_exits_1(tiny_copy, tmp_path, capsys):
    docs, index = tiny_copy
    write_pdf(docs / "letter.pdf", [None])  # image-only: the sync records it as failed, not indexed
    gold = write_text(tmp_path / "gold.csv", LINT_GOLDSET)
    code, out, _ = run(capsys, "--lint", "--goldset", gold, "--docs", docs, "--index", index, "--no-rerank",
                       "--quiet")
    # Sorted by first line, errors before warnings on one line. 'Greeks' is close to no indexed name (difflib
    # ratio < 0.6 with options, weather, scan, literatur_übersicht); 'option' is close to 'options' (12/13).
    assert out.splitlines() == [
        "warning lines 2, 7: near-identical questions on lines 2 and 7 expect different files ('options.pdf' vs "
        "'weather.pdf'); give them the same text and both locations, or make them distinct",
        "error   line 3: page 2 of 'scan.pdf' has no text (scanned page?); no retriever can find it: OCR the PDF or "
        "point to a page with text",
        "error   line 4: expected file 'option.pdf' is not in the index; did you mean 'options.pdf'?",
        "error   line 5: page 3 of 'weather.pdf' is beyond its 1 page; pages in the goldset count from 1",
        "warning line 6: question 'Vega?' has 1 word; write a full question of at least 3 words",
        "error   line 8: reader: line 8: no question in column 'frage'; row skipped",
        "error   line 9: reader: line 9: page 'zwei' in column 'erwartete_seite' is not a page; write 12, 12-13, "
        "S. 12, Seite 12 or p. 12; the question is left out of the metrics until the page is fixed",
        "error   line 10: expected file 'letter.pdf' is in the docs folder but could not be indexed: no text layer "
        "on any page (scanned? run OCR first)",
        "error   line 11: expected file 'Greeks.pdf' is not in the index; no similar name among the 4 indexed "
        "files; index the file or fix the name",
        "7 errors, 2 warnings",
    ]
    assert code == 1


def md5(path: Path) -> str:
    import hashlib

    return hashlib.md5(path.read_bytes()).hexdigest()


def test_two_files_of_one_name_in_two_folders(tmp_path, capsys):
    # Issue 52: with docs/sub1/Same.pdf (20 pages) and docs/sub2/Same.pdf (10 pages) both indexed, "sub1/Same.pdf;3"
    # was credited at rank 1 from sub2's page 3 and "sub1/Same.pdf;15" called beyond its 10 pages (sub2's). A path
    # names its file; a bare name of both is a lint error and the evaluation refuses it (exit 2) naming both.
    docs = tmp_path / "docs"
    write_pdf(docs / "sub1" / "Same.pdf", [f"Chapter {n} of the Bayesian phylogenetics manual explains the Markov "
                                           f"chain sampler settings, part {n}." for n in range(1, 21)])
    write_pdf(docs / "sub2" / "Same.pdf", ["The camlidl stub compiler reads an IDL file and writes C stub code so "
                                           "that OCaml programs can call C functions." if n == 3 else
                                           f"Section {n} of the camlidl manual lists the build options." for n in
                                           range(1, 11)])
    gold = write_text(tmp_path / "gold.csv", "\n".join([
        HEADER,
        "Which tool writes C stub code for OCaml from an IDL file?;;sub2/Same.pdf;3;",
        "What does the camlidl stub compiler read and write?;;sub1/Same.pdf;3;the other file's page 3",
        "Which chapter explains the sampler settings, part 15?;;sub1/Same.pdf;15;page 15 of 20",
    ]) + "\n")
    index, report = tmp_path / "index", tmp_path / "report.txt"
    common = ["--goldset", gold, "--docs", docs, "--index", index, "--no-rerank", "--quiet"]
    assert run(capsys, "--lint", *common) == (0, "goldset OK: no problems found\n", "")
    code, _, err = run(capsys, *common, "--report", report, "--no-compare")
    assert (code, "Traceback" in err) == (0, False)
    saved = json.loads(report.with_suffix(".json").read_text(encoding="utf-8"))
    assert saved["num_queries"] == 3 and "left_out" not in saved
    found = {q["question"]: (q["rank"], (q["top"][0]["source"], q["top"][0]["page"])) for q in saved["per_query"]}
    assert found == {
        "Which tool writes C stub code for OCaml from an IDL file?": (1, ("sub2/Same.pdf", 3)),
        # sub2's page 3 is first in the list and no hit; sub1's pages 2-4 are not among the first 20.
        "What does the camlidl stub compiler read and write?": (None, ("sub2/Same.pdf", 3)),
        "Which chapter explains the sampler settings, part 15?": (1, ("sub1/Same.pdf", 15)),
    }

    # The goldset edited to a bare name that both files have.
    write_text(gold, f"{HEADER}\nWhich tool writes C stub code for OCaml from an IDL file?;;Same.pdf;3;\n")
    kept = {path: md5(path) for path in (gold, report, report.with_suffix(".json"))}
    ambiguous = ("expected file 'Same.pdf' is ambiguous: 2 files have that name ('sub1/Same.pdf', 'sub2/Same.pdf'), "
                 "and a page of either would be credited; write sub1/Same.pdf or sub2/Same.pdf in the goldset")
    assert run(capsys, "--lint", *common, "--no-sync") == (1, f"error   line 2: {ambiguous}\n1 error, 0 warnings\n", "")
    code, out, err = run(capsys, *common, "--no-sync", "--report", report, "--no-compare")
    assert (code, out, err) == (2, "", f"error: {gold}: line 2: {ambiguous}; nothing was evaluated\n")
    code, out, err = run(capsys, *common, "--no-sync", "--explain", "Which tool writes C stub code for OCaml from an "
                                                                    "IDL file?")
    assert (code, out, err) == (2, "", f"error: {gold}: line 2: {ambiguous}; nothing was evaluated\n")
    assert {path: md5(path) for path in kept} == kept


def test_lint_clean_goldset_exits_0(tiny_index, tmp_path, capsys):
    docs, index = tiny_index
    # Traps that are all fine: the last page of options.pdf (2 of 2), a name without ".pdf" and in other case,
    # a question of exactly MIN_QUESTION_WORDS = 3 words, and one question on two rows (alternative locations,
    # merged by the reader, no duplicate finding).
    gold = write_text(tmp_path / "gold.csv", "\n".join([
        HEADER,
        "What is the Black-Scholes-Merton price of a call?;;options.pdf;2;last page",
        "How do crops react to rainfall?;;WEATHER;1;no extension",
        "What is vega?;;options.pdf;1;three words",
        "What is vega?;;options.pdf;2;second location",
        "Which report has a scanned appendix?;;scan.pdf;1;page 1 has text",
    ]) + "\n")
    # --no-sync keeps the session's index untouched.
    code, out, _ = run(capsys, "--lint", "--goldset", gold, "--docs", docs, "--index", index, "--no-sync",
                       "--no-rerank", "--quiet")
    assert (code, out) == (0, "goldset OK: no problems found\n")


def test_lint_warning_alone_exits_1(tiny_index, tmp_path, capsys):
    docs, index = tiny_index
    gold = write_text(tmp_path / "gold.csv", f"{HEADER}\nVega sensitivity?;;options.pdf;1;\n")
    code, out, _ = run(capsys, "--lint", "--goldset", gold, "--docs", docs, "--index", index, "--no-sync",
                       "--no-rerank", "--quiet")
    assert out.splitlines() == [
        "warning line 2: question 'Vega sensitivity?' has 2 words; write a full question of at least 3 words",
        "0 errors, 1 warning",
    ]
    assert code == 1  # "exit 1 when anything is wrong": a warning is something wrong, too


def test_evaluation_reports_lint_findings_in_notes_and_on_stderr(tiny_index, tmp_path, capsys):
    docs, index = tiny_index
    gold = write_text(tmp_path / "gold.csv", "\n".join([
        HEADER,
        "How do crops react to rainfall?;;weather.pdf;1;fine",
        "What is the Black-Scholes-Merton price of a call?;;option.pdf;2;typo",
        "What does the scanned appendix show?;;scan.pdf;2;image-only page",
        "What is the vega of a long call?;;options.pdf;zwei;page as a word",
    ]) + "\n")
    report = tmp_path / "report.txt"
    code, _, err = run(capsys, "--goldset", gold, "--docs", docs, "--index", index, "--no-sync", "--no-rerank",
                       "--report", report, "--no-compare")
    assert code == 1  # lint errors degrade the run: the report is written, the exit code says so
    lint = ["Goldset lint (error): line 3: expected file 'option.pdf' is not in the index; did you mean "
            "'options.pdf'?",
            "Goldset lint (error): line 4: page 2 of 'scan.pdf' has no text (scanned page?); no retriever can find "
            "it: OCR the PDF or point to a page with text"]
    reader = ("line 5: page 'zwei' in column 'erwartete_seite' is not a page; write 12, 12-13, S. 12, Seite 12 or "
              "p. 12; the question is left out of the metrics until the page is fixed")
    for line in lint:
        assert f"warning: {line}\n" in err
    lines = report.read_text(encoding="utf-8").splitlines()
    notes = lines[lines.index("Notes") + 1:]
    # The reader's message is listed once, as a reader message, not again as a lint finding.
    assert notes[:3] == [f"  {reader}", f"  {lint[0]}", f"  {lint[1]}"]
    assert not any("Goldset lint" in line and "zwei" in line for line in notes)


# ----------------------------------------------------------------------------- generation without a model

def test_near_identical_and_repeated_findings_are_grouped_and_capped(tiny_index, tmp_path, capsys):
    # Issue 52: a goldset of near-identical questions printed one warning per pair (2,334,017 for 20,000 rows, 385 MB
    # of --lint output) and put each into the report's notes. Here 60 questions of one template (1,770 pairs) are one
    # finding, and of 25 short questions 20 are shown and one line counts the other 5.
    docs, index = tiny_index
    rows = [f"What does the text say about the option value, item {n}?;;options.pdf;1;" for n in range(60)]
    rows += [f"Vega {n}?;;options.pdf;1;" for n in range(62, 87)]
    gold = write_text(tmp_path / "gold.csv", "\n".join([HEADER, *rows]) + "\n")
    common = ["--goldset", gold, "--docs", docs, "--index", index, "--no-sync", "--no-rerank", "--quiet"]
    group = ("60 near-identical questions expect the same places; merge them or make them distinct (each counts in "
             "the averages)")
    short = [f"line {n}: question 'Vega {n}?' has 2 words; write a full question of at least 3 words"
             for n in range(62, 87)]  # the rows of lines 62-86
    rest = "lines 82, 83, 84, 85, 86: 5 more short or empty questions like the 20 above, not shown"
    code, out, _ = run(capsys, "--lint", *common)
    assert (code, out.splitlines()) == (1, [
        f"warning lines 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 50 more: {group}",
        *[f"warning {line}" for line in short[:20]], f"warning {rest}", "0 errors, 26 warnings"])
    report = tmp_path / "report.txt"
    code, _, err = run(capsys, *common, "--report", report, "--no-compare")
    assert code == 0
    lint = [f"Goldset lint (warning): lines 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 50 more: {group}",
            *[f"Goldset lint (warning): {line}" for line in short[:20]], f"Goldset lint (warning): {rest}"]
    assert [line for line in err.splitlines() if "Goldset lint" in line] == [f"warning: {line}" for line in lint]
    lines = report.read_text(encoding="utf-8").splitlines()
    notes = lines[lines.index("Notes") + 1:]
    assert [line.strip() for line in notes if "Goldset lint" in line] == lint
    assert json.loads(report.with_suffix(".json").read_text(encoding="utf-8"))["messages"][:len(lint)] == lint


def test_generate_is_seeded_and_reproducible(gen_index, tmp_path, capsys):
    first, again, other = tmp_path / "seed0.csv", tmp_path / "seed0-again.csv", tmp_path / "seed1.csv"
    code, out, _ = run(capsys, *generate(gen_index, first, "--seed", 0))
    assert code == 0
    # Seed 0 tries glossar page 2 and greeks pages 3, 1 first; each gives its template question.
    # greeks.pdf: 5 chunks, 4 kept (page 5 is numeric); glossar.pdf: 2 of 2 kept.
    assert out.splitlines() == [
        "generated 3 of 3 requested questions (seed 0)",
        "chunks: 7 read, 6 kept by the noise filter",
        "noise filter removed: numeric 1",
        "document     chunks    kept  allocated  generated",
        "glossar.pdf       2       2          1          1",
        "greeks.pdf        5       4          2          2",
        "questions per kind: defined-term 3",
        "questions per language: de 1, en 2",
        "rejected by the gates: none",
        f"Wrote 3 questions to {er.display_path(first)}",
        f"Wrote {er.display_path(first)}",
    ]
    lines = first.read_text(encoding="utf-8").splitlines()
    assert lines[0] == HEADER
    rows = [line.split(";") for line in lines[1:]]
    # Sorted by file and page; the question is the one of its page, the page is 1-based.
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("Was versteht man unter einem Future?", "defined-term", "glossar.pdf", "2"),
        ("What is delta?", "defined-term", "greeks.pdf", "1"),
        ("What is theta?", "defined-term", "greeks.pdf", "3"),
    ]
    # anmerkung: how the row was made; the chunk id ends in ":<0-based page>:<chunk on the page>".
    assert [re.fullmatch(r"generated:defined-term chunk=\S+:(\d+):0 seed=0", r[4]).group(1) for r in rows] == \
        ["1", "0", "2"]

    code, _, _ = run(capsys, *generate(gen_index, again, "--seed", 0))
    assert code == 0
    assert again.read_bytes() == first.read_bytes()
    code, _, _ = run(capsys, *generate(gen_index, other, "--seed", 1))
    assert code == 0
    # Seed 1 tries greeks page 2 first: gamma replaces theta; the seed is in every note.
    assert other.read_bytes() != first.read_bytes()
    other_rows = [line.split(";") for line in other.read_text(encoding="utf-8").splitlines()[1:]]
    assert [r[0] for r in other_rows] == ["Was versteht man unter einem Future?", "What is delta?", "What is gamma?"]
    assert all(r[4].endswith(" seed=1") for r in other_rows)


def test_generated_goldset_reads_back_lints_clean_and_evaluates(gen_index, tmp_path, capsys):
    docs, index = gen_index
    out = tmp_path / "generated.csv"
    assert run(capsys, *generate(gen_index, out, "--seed", 0))[0] == 0
    goldset = gs.read_goldset(out)
    assert goldset.messages == []
    assert [(q.question, q.corpus, q.locations, q.lines) for q in goldset.questions] == [
        ("Was versteht man unter einem Future?", "defined-term", (gs.Location("glossar.pdf", 2),), (2,)),
        ("What is delta?", "defined-term", (gs.Location("greeks.pdf", 1),), (3,)),
        ("What is theta?", "defined-term", (gs.Location("greeks.pdf", 3),), (4,)),
    ]
    for (source, page), question in GEN_QUESTIONS.items():  # every question sits on its defining page
        assert all(q.locations == (gs.Location(source, page),) for q in goldset.questions if q.question == question)
    code, text, _ = run(capsys, "--lint", "--goldset", out, "--docs", docs, "--index", index, "--no-sync",
                        "--no-rerank", "--quiet")
    assert (code, text) == (0, "goldset OK: no problems found\n")
    report = tmp_path / "report.txt"
    code, _, _ = run(capsys, "--goldset", out, "--docs", docs, "--index", index, "--no-sync", "--no-rerank",
                     "--quiet", "--report", report)
    assert code == 0
    payload = json.loads(report.with_suffix(".json").read_text(encoding="utf-8"))
    assert payload["num_queries"] == 3
    # korpus = the question kind; one kind, so no per-corpus table.
    assert [(q["question"], q["corpus"]) for q in payload["per_query"]] == [
        (q.question, "defined-term") for q in goldset.questions]


def test_generate_bad_arguments_fail_before_indexing(tiny_index, tmp_path, capsys, monkeypatch):
    docs, _ = tiny_index
    fresh = tmp_path / "fresh-index"
    base = ["--docs", docs, "--index", fresh, "--no-rerank", "--quiet"]
    code, _, err = run(capsys, "--generate", 0, "--out", tmp_path / "g.csv", *base)
    assert (code, err) == (2, "error: --generate needs a positive number of questions, got 0\n")
    code, _, err = run(capsys, "--generate", 2, "--out", tmp_path / "missing" / "g.csv", *base)
    assert (code, err) == (2, f"error: --out {tmp_path / 'missing' / 'g.csv'}: folder {tmp_path / 'missing'} does "
                              f"not exist; give the path of a .csv file in an existing folder\n")
    code, _, err = run(capsys, "--generate", 2, "--out", tmp_path, *base)
    assert (code, err) == (2, f"error: --out {tmp_path} is a folder, not a file; give a file path such as "
                              f"{tmp_path / 'goldset.csv'}\n")  # the words of every output flag (outputs.py)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, _, err = run(capsys, "--generate", 2, "--out", tmp_path / "g.csv", "--llm", "stub-model", *base)
    assert (code, err) == (2, "error: --llm stub-model needs a language model server, but neither OPENAI_API_KEY nor "
                              "OPENAI_BASE_URL is set. Set OPENAI_API_KEY to use OpenAI, or OPENAI_BASE_URL for a "
                              "local OpenAI-compatible server, e.g. OPENAI_BASE_URL=http://localhost:11434/v1 for "
                              "Ollama.\n")
    assert not fresh.exists()  # nothing was indexed for a run that could not succeed
    assert not (tmp_path / "g.csv").exists()


# ----------------------------------------------------------------------------- generation with a model (stub)

# Seed 1, --generate 3: glossar.pdf is tried first (documents in name order), pages 2 then 1; then greeks.pdf
# pages 2, 1. Every reply's question is checked by the copy gate against its chunk (share of content words found
# in the chunk must be <= 0.5):
VOLATILITY_Q = "Wie misst man, wie stark ein Aktienkurs schwankt?"  # misst, stark, aktienkurs, schwankt: 0 of 4
GAMMA_Q = "How quickly does the hedge ratio of a position drift as the stock moves?"  # only "moves": 1 of 7
DELTA_Q = "By how much does a derivative's premium shift per unit step of the stock?"  # only "unit": 1 of 8
# Trap: "verpflichtet" and "Beide" are in the Future chunk, 2 of 5 content words = 0.4, just under the gate.
FUTURE_Q = "Welcher Börsenvertrag verpflichtet beide Parteien zur Lieferung?"


@pytest.fixture
def llm_env(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    def point_at(stub: OpenAIStub) -> None:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)

    return point_at


def cache_entries(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_llm_questions_are_cached_and_rerun_without_requests(gen_index, tmp_path, capsys, llm_env):
    out, cache = tmp_path / "llm.csv", tmp_path / "cache.json"
    argv = generate(gen_index, out, "--seed", 1, "--llm", "stub-model", "--judge-cache", cache)
    with OpenAIStub() as stub:
        stub.add_content('{"question": null}')                         # glossar p2: the model declines
        stub.add_content(json.dumps({"question": VOLATILITY_Q}))        # glossar p1
        stub.add_content(f"Sure! Here is one: {GAMMA_Q}")               # greeks p2: prose around the question
        stub.add_content(f'```json\n{{"question": "{DELTA_Q}"}}\n```')  # greeks p1: fenced JSON
        llm_env(stub)
        code, text, _ = run(capsys, *argv)
        assert code == 0
        prompts = [request.prompt() for request in stub.requests]
    assert len(prompts) == 4
    assert [request.body["model"] for request in stub.requests] == ["stub-model"] * 4
    for prompt, cue, language in zip(prompts, ["Unter einem Future", "Unter der Volatilität", "Gamma is the rate",
                                               "Delta is the rate"], ["German", "German", "English", "English"]):
        assert cue in prompt and f"ONE question in {language}" in prompt
    assert "model: asked 4, questions 3, declined 1, unusable replies 0" in text.splitlines()
    assert "questions per kind: llm 3" in text.splitlines()
    rows = [line.split(";") for line in out.read_text(encoding="utf-8").splitlines()[1:]]
    assert [r[:4] for r in rows] == [[VOLATILITY_Q, "llm", "glossar.pdf", "1"], [DELTA_Q, "llm", "greeks.pdf", "1"],
                                     [GAMMA_Q, "llm", "greeks.pdf", "2"]]
    assert all(re.fullmatch(r"generated:llm model=stub-model chunk=\S+ seed=1", r[4]) for r in rows)
    # All four answers are cached, the decline too (it is an answer): keyed by sha256(model, prompt).
    entries = cache_entries(cache)
    assert set(entries) == {llm.cache_key("stub-model", p) for p in prompts}
    assert {e["kind"] for e in entries.values()} == {"generate"}
    first = out.read_bytes()

    with OpenAIStub() as stub:
        stub.add(400, error_body("this run must not ask"))  # a request would stop generation at once
        llm_env(stub)
        code, text, _ = run(capsys, *argv, "--force")
        assert code == 0
        assert stub.requests == []
    assert out.read_bytes() == first
    assert "model: asked 4, questions 3, declined 1, unusable replies 0" in text.splitlines()

    # Four questions: quotas glossar 2, greeks 2 (1 each; the 2 left by largest remainder: greeks int(2 * 4/6) = 1,
    # then glossar's remainder 0.67 beats greeks' 0.33). The cached replies give 3 (glossar has no third page);
    # greeks page 4 is asked, refused (HTTP 401), and page 3 is not asked any more. The 3 questions are written,
    # but the goldset is incomplete: exit 1.
    more = tmp_path / "llm4.csv"
    with OpenAIStub() as stub:
        stub.add(401, error_body("invalid api key", "invalid_api_key"))
        llm_env(stub)
        code, text, err = run(capsys, *generate(gen_index, more, "--seed", 1, "--llm", "stub-model",
                                                "--judge-cache", cache)[2:], "--generate", 4)
        assert len(stub.requests) == 1 and "Rho is the sensitivity" in stub.requests[0].prompt()
    assert code == 1
    assert text.splitlines()[-5:] == [
        "rejected by the gates: none",
        "model: asked 6, questions 3, declined 1, unusable replies 2",
        "note: 1 question short: the remaining chunks gave no question that passed the gates (see the "
        "per-document table)",
        f"Wrote 3 questions to {er.display_path(more)}",
        f"Wrote {er.display_path(more)}",
    ]
    assert err.count("warning: question generation stopped: ") == 1
    assert "error: the model stopped before the goldset was complete: " in err
    assert more.read_text(encoding="utf-8").splitlines()[1:] == first.decode("utf-8").splitlines()[1:]


def test_llm_unreadable_reply_is_not_cached(gen_index, tmp_path, capsys, llm_env):
    out, cache = tmp_path / "llm.csv", tmp_path / "cache.json"
    argv = generate(gen_index, out, "--seed", 1, "--llm", "stub-model", "--judge-cache", cache)
    with OpenAIStub() as stub:
        stub.add_content("I cannot help with that.")              # glossar p2: no question in it
        stub.add_content(json.dumps({"question": VOLATILITY_Q}))  # glossar p1
        stub.add_content(json.dumps({"question": GAMMA_Q}))       # greeks p2
        stub.add_content(json.dumps({"question": DELTA_Q}))       # greeks p1
        llm_env(stub)
        code, text, _ = run(capsys, *argv)
        assert code == 0
        prompts = [request.prompt() for request in stub.requests]
    assert "model: asked 4, questions 3, declined 0, unusable replies 1" in text.splitlines()
    assert set(cache_entries(cache)) == {llm.cache_key("stub-model", p) for p in prompts[1:]}

    # The rerun asks only the prompt whose reply was unreadable; this time glossar p2 gives the question.
    with OpenAIStub() as stub:
        stub.add_content(json.dumps({"question": FUTURE_Q}))
        llm_env(stub)
        code, text, _ = run(capsys, *argv, "--force")
        assert code == 0
        assert [request.prompt() for request in stub.requests] == [prompts[0]]
    assert "model: asked 3, questions 3, declined 0, unusable replies 0" in text.splitlines()
    rows = [line.split(";")[:4] for line in out.read_text(encoding="utf-8").splitlines()[1:]]
    assert rows == [[FUTURE_Q, "llm", "glossar.pdf", "2"], [DELTA_Q, "llm", "greeks.pdf", "1"],
                    [GAMMA_Q, "llm", "greeks.pdf", "2"]]
    assert len(cache_entries(cache)) == 4


def test_llm_server_refusal_stops_once_and_writes_nothing(gen_index, tmp_path, capsys, llm_env):
    out = tmp_path / "llm.csv"
    with OpenAIStub() as stub:
        stub.add(401, error_body("invalid api key", "invalid_api_key"))
        llm_env(stub)
        code, text, err = run(capsys, *generate(gen_index, out, "--seed", 1, "--llm", "stub-model",
                                                "--judge-cache", tmp_path / "cache.json"))
        # One refused request; later prompts fail without asking (glossar p2, p1, greeks p2, p1, p4: five
        # failures in a row, then the generator gives up).
        assert len(stub.requests) == 1
    assert code == 2
    assert "model: asked 5, questions 0, declined 0, unusable replies 5" in text.splitlines()
    assert err.count("warning: question generation stopped: ") == 1
    assert "refused the request for model 'stub-model' with HTTP 401" in err
    assert err.endswith(f"error: no question was generated, so {er.display_path(out)} was not written; see the "
                        f"summary above\n")
    assert not out.exists()
    assert not (tmp_path / "cache.json").exists()
