"""Exit codes, CI gates, files that must not be overwritten, strict pages, and warnings --quiet must not hide.

Exit codes of eval_retrieval.py: 0 evaluated and every gate passed; 1 evaluated (report written) but a gate
failed or the run is degraded; 2 usage or input error, nothing evaluated. Ranks on the tiny corpus are listed
in test_eval_retrieval.py; in hybrid mode every depth >= 5 returns all 5 chunks, in bm25 mode only the chunks
that share a word with the question.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

import eval_retrieval as er
from localrag.runs import options, outputs
from localrag.runs.defaults import EvalOptions
from localrag.evaluation.scoring import metric_keys
from openai_stub import OpenAIStub, closed_port

CLEAN = (
    "question,expected_source,expected_page\n"
    "How sensitive is the option value to volatility?,options.pdf,1\n"
    "How do crops react to rainfall?,weather.pdf,1\n"
    "Wie reagiert die Familie auf Gregor Samsa?,Literatur_Übersicht.pdf,1\n"
)
# Questions about options whose expected page is the weather page: hybrid returns every chunk (Hit@5 1.000),
# bm25 only options chunks (Hit@5 0.000).
OFF_TOPIC = [
    "Vega sensitivity explained?",
    "Which Greek measures vega exposure?",
    "Is vega positive for long calls?",
    "Does vega depend on implied volatility?",
    "Black-Scholes-Merton call price formula?",
    "Which equation prices European calls?",
    "Dividend-free stock option pricing?",
    "Long put vega sign?",
]


def run(capsys, *argv) -> tuple[int, str, str]:
    code = er.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def off_topic(n: int) -> str:
    return "question,expected_source,expected_page\n" + "".join(f"{q},weather.pdf,1\n" for q in OFF_TOPIC[:n])


@pytest.fixture
def evaluate(tiny_index, tmp_path, capsys):
    """Run an evaluation of goldset text on the tiny corpus (--quiet); returns (code, stdout, stderr)."""
    docs, index = tiny_index

    def make(text: str, *extra, name: str = "gold.csv") -> tuple[int, str, str]:
        gold = write(tmp_path / name, text)
        return run(capsys, "--goldset", gold, "--docs", docs, "--index", index, "--quiet", *extra)

    return make


def status_lines(report: Path) -> list[str]:
    lines = report.read_text(encoding="utf-8").splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("Generated: "))
    return lines[1:end]


# ----------------------------------------------------------------------------- degraded runs exit 1


def test_every_goldset_file_missing_from_the_index_exits_1(evaluate, tmp_path):
    code, out, err = evaluate("question,expected_source\nWhat is vega?,Greeks.pdf\nWhat is theta?,Theta.pdf\n",
                              "--report", tmp_path / "r.txt")
    assert (code, out) == (1, ("hybrid: Hit@1 0.000, Hit@5 0.000, Hit@10 0.000, Hit@20 0.000, "
                               "NDCG@5 0.000, NDCG@10 0.000, NDCG@20 0.000, MRR 0.000 (2 questions)\n"
                               f"Wrote {tmp_path}/r.txt, {tmp_path}/r.json, {tmp_path}/r.details.md\n"))
    status = [
        "Status: exit 1, evaluated but the run is degraded",
        "  degraded: 2 expected files not in the index (Greeks.pdf, Theta.pdf): their questions count as misses; "
        "index the files or fix the names",
        "  degraded: goldset lint found 2 errors (see Notes, or run --lint)",
    ]
    assert status_lines(tmp_path / "r.txt") == status
    assert err.endswith("\n".join(status) + "\n")  # --quiet hides progress, not a failed status
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["status"] == {
        "exit_code": 1, "gates": [], "failed": [], "degraded": [line.removeprefix("  degraded: ")
                                                                for line in status[1:]]}


def test_a_clean_run_exits_0_and_says_so(evaluate, tmp_path):
    code, _, err = evaluate(CLEAN, "--report", tmp_path / "r.txt")
    assert (code, err) == (0, "")
    assert status_lines(tmp_path / "r.txt") == ["Status: exit 0, evaluated; no gate set"]


GARBAGE = "I am sorry, I cannot judge passages today."


def test_judge_returning_garbage_exits_1(evaluate, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAIStub() as stub:
        for _ in range(3):
            stub.add_content(GARBAGE)
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        code, _, _ = evaluate(CLEAN, "--report", tmp_path / "r.txt", "--judge", "stub-model", "--judge-cache",
                              tmp_path / "cache.json")
    assert code == 1
    assert status_lines(tmp_path / "r.txt") == [
        "Status: exit 1, evaluated but the run is degraded",
        "  degraded: the judge's reply was unreadable for 3 questions (see 'LLM judge'); check that stub-model "
        "answers in the requested JSON",
    ]


def test_quiet_does_not_hide_a_corrupt_judge_cache(evaluate, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cache = write(tmp_path / "cache.json", '{"cut off": {"model": ')  # a cache of this tool, cut off
    with OpenAIStub() as stub:
        for _ in range(3):
            stub.add_content('{"answering": [1], "reason": "r"}')
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        code, _, err = evaluate(CLEAN, "--report", tmp_path / "r.txt", "--judge", "stub-model", "--judge-cache",
                                cache)
    assert code == 0  # every question judged: the run is complete
    warning = (f"The judge cache {cache} is unreadable (Expecting value: line 1 column 23 (char 22)); it was moved "
               f"to {cache}.corrupt-1 and judging starts with an empty cache. Copy any verdicts you need back from "
               f"it, then delete it.")
    assert err == f"warning: {warning}\n"
    assert f"  {warning}" in (tmp_path / "r.txt").read_text(encoding="utf-8").splitlines()


# ----------------------------------------------------------------------------- gates


def test_fail_under_passes_and_fails(evaluate, tmp_path):
    # CLEAN: every question at rank 1 in hybrid mode; in bm25 mode also, MRR 1.000.
    code, _, err = evaluate(CLEAN, "--report", tmp_path / "r.txt", "--fail-under", "hit@5=0.8",
                            "--fail-under", "MRR=1", "--no-compare")
    assert (code, err) == (0, "")
    assert status_lines(tmp_path / "r.txt") == ["Status: exit 0, evaluated; every gate passed (hit@5 >= 0.8; "
                                                "mrr >= 1)"]
    # Off-topic questions: Hit@5 1.000 (every chunk is returned), MRR (1/3 * ... ) < 0.9.
    code, _, err = evaluate(off_topic(6), "--report", tmp_path / "o.txt", "--fail-under", "hit@5=1",
                            "--fail-under", "mrr=0.9", "--no-compare")
    payload = json.loads((tmp_path / "o.json").read_text(encoding="utf-8"))
    mrr = payload["metrics"]["mrr"]
    status = ["Status: exit 1, evaluated but a gate failed",
              f"  gate failed: MRR {mrr:.4f} is under --fail-under mrr=0.9"]
    assert (code, err) == (1, "\n".join(status) + "\n")
    assert status_lines(tmp_path / "o.txt") == status
    assert payload["status"]["gates"] == ["hit@5 >= 1", "mrr >= 0.9"]


@pytest.mark.parametrize("flag, message", [
    ("hit@50=0.8", "--fail-under hit@50=0.8: this run reports no metric 'hit@50'; valid keys: hit@1, hit@5, "
                   "hit@10, hit@20, ndcg@5, ndcg@10, ndcg@20, mrr (the cutoffs follow --k)"),
    ("recall@5=0.5", "--fail-under recall@5=0.5: this run reports no metric 'recall@5'; valid keys: hit@1, hit@5, "
                     "hit@10, hit@20, ndcg@5, ndcg@10, ndcg@20, mrr (the cutoffs follow --k)"),
    ("hit@5", "--fail-under needs METRIC=VALUE like hit@5=0.8, got 'hit@5'"),
    ("hit@5=high", "--fail-under hit@5=high: 'high' is not a number; write a value between 0 and 1 like "
                   "hit@5=0.8"),
    ("hit@5=80", "--fail-under hit@5=80: 80 lies outside 0..1, the range of every metric"),
])
def test_bad_fail_under_exits_2_before_anything_is_evaluated(evaluate, tmp_path, flag, message):
    code, out, err = evaluate(CLEAN, "--report", tmp_path / "r.txt", "--fail-under", flag)
    assert (code, out, err) == (2, "", f"error: {message}\n")
    assert not (tmp_path / "r.txt").exists()


def test_fail_under_knows_the_keys_of_other_cutoffs_and_datasets():
    assert options.parse_fail_under(["hit@1=0.5", "mrr=0.25"], metric_keys("goldset", [1, 3])) == [
        ("hit@1", 0.5), ("mrr", 0.25)]
    assert options.parse_fail_under(["ndcg@10=0.6"], metric_keys("dataset", [1, 10])) == [("ndcg@10", 0.6)]
    with pytest.raises(er.EvalError, match=r"valid keys: hit@1, hit@10, recall@1, recall@10, ndcg@1, ndcg@10, mrr"):
        options.parse_fail_under(["precision@1=0.5"], metric_keys("dataset", [1, 10]))


def test_fail_on_regression_fails_on_a_significant_drop(evaluate, tmp_path):
    report = tmp_path / "r.txt"
    assert evaluate(off_topic(8), "--report", report)[0] == 0
    # bm25 loses all 8 questions: 8 paired differences of -1 per metric, exact randomization p = 2/2^8 = 0.0078;
    # Holm over the 4 metrics: 4 x 0.0078 = 0.031 < 0.05, so all four are worse, and with every test rejected
    # the intervals are 95 % intervals: only the shift -1 leaves differences whose signs may flip.
    code, out, err = evaluate(off_topic(8), "--report", report, "--mode", "bm25", "--fail-on-regression")
    assert code == 1
    # Every run says its verdict on stdout: the comparison, then the metrics line.
    assert out.startswith(f"Compared to previous report {report.with_suffix('.json')} (8 common questions)\n")
    assert out.endswith("\nbm25: Hit@1 0.000, Hit@5 0.000, Hit@10 0.000, Hit@20 0.000, NDCG@5 0.000, "
                        "NDCG@10 0.000, NDCG@20 0.000, MRR 0.000 (8 questions)\n"
                        f"Wrote {report}, {report.with_suffix('.json')}, {tmp_path}/r.details.md\n")
    assert "  Hit@5       1.000  0.000  -1.000  [-1.000, -1.000]    0.008   0.031  worse" in out.splitlines()
    lines = status_lines(report)
    assert lines[0] == "Status: exit 1, evaluated but a gate failed"
    assert lines[1] == (f"  gate failed: Hit@5 is worse than the previous report {report.with_suffix('.json')}: "
                        f"1.000 -> 0.000 (95% CI of the difference [-1.000, -1.000], p = 0.008, 0.031 after Holm's "
                        f"adjustment over the 4 metrics)")
    assert [line.split(" is worse")[0] for line in lines[1:]] == [
        "  gate failed: Hit@5", "  gate failed: Hit@10", "  gate failed: Hit@20", "  gate failed: MRR"]
    assert err == "\n".join(lines) + "\n"


def test_fail_on_regression_ignores_a_drop_the_test_cannot_tell_from_noise(evaluate, tmp_path):
    old = tmp_path / "old.txt"
    assert evaluate(off_topic(5), "--report", old)[0] == 0
    # 5 questions, all lost: Hit@5 1.000 -> 0.000, but p = 2/2^5 = 0.0625 (0.25 after Holm over 4 metrics): "no
    # detectable difference", so the gate passes; the raw difference does not decide. At Holm's level 0.05 / 4 five
    # questions reject no shift at all: the interval is every possible difference.
    code, _, err = evaluate(off_topic(5), "--report", tmp_path / "new.txt", "--mode", "bm25",
                            "--compare-to", old.with_suffix(".json"), "--fail-on-regression")
    assert (code, err) == (0, "")
    text = (tmp_path / "new.txt").read_text(encoding="utf-8")
    assert "  Hit@5       1.000  0.000  -1.000  [-1.000, +1.000]    0.062   0.250  no detectable difference at " \
           "this goldset size" in text
    assert status_lines(tmp_path / "new.txt") == [
        "Status: exit 0, evaluated; every gate passed (no metric worse than the compared report)"]


def test_fail_on_regression_without_a_report_to_compare_with_exits_1(evaluate, tmp_path):
    code, _, err = evaluate(CLEAN, "--report", tmp_path / "r.txt", "--fail-on-regression")
    status = ["Status: exit 1, evaluated but a gate failed",
              f"  gate failed: --fail-on-regression could not be checked: there is no previous report at "
              f"{tmp_path / 'r.json'}; give one with --compare-to REPORT.json"]
    assert (code, err) == (1, "\n".join(status) + "\n")


@pytest.mark.parametrize("extra, message", [
    (["--fail-on-regression", "--no-compare"],
     "--fail-on-regression needs a comparison and --no-compare turns it off; drop one of them"),
    (["--fail-under", "hit@5=0.5", "--ablation"],
     "--fail-under gate one evaluation and do not work with --ablation; run the evaluation to gate on its own"),
    (["--fail-on-regression", "--lint"],
     "--fail-on-regression gate one evaluation and do not work with --lint; run the evaluation to gate on its own"),
])
def test_gate_flag_conflicts_exit_2(evaluate, tmp_path, extra, message):
    code, out, err = evaluate(CLEAN, "--report", tmp_path / "r.txt", *extra)
    assert (code, out, err) == (2, "", f"error: {message}\n")


# ----------------------------------------------------------------------------- files a user keeps


def test_generate_refuses_an_existing_out_unless_forced(tiny_index, tmp_path, capsys):
    docs, index = tiny_index
    kept = write(tmp_path / "existing.csv", CLEAN)
    argv = ["--generate", 3, "--out", kept, "--docs", docs, "--index", index, "--no-sync", "--no-rerank", "--quiet"]
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err == f"error: --out {kept} already exists; pass --force to replace it, or choose another --out\n"
    assert kept.read_text(encoding="utf-8") == CLEAN
    code, out, _ = run(capsys, *argv, "--force")
    assert code == 0 and out.endswith(f" to {kept}\nWrote {kept}\n")  # the path as given, not the bare file name
    assert kept.read_text(encoding="utf-8") != CLEAN


@pytest.mark.parametrize("flags, message", [
    (["--report", "{gold}"], "--report {gold} is the --goldset file {gold}; writing the report there would "
                             "replace it. Give --report another path"),
    (["--report", "{dir}/r.txt", "--json", "{gold}"], "--json {gold} is the --goldset file {gold}; writing the "
                                                      "report there would replace it. Give --json another path"),
    (["--report", "{dir}/r.json"], "--report {dir}/r.json and --json {dir}/r.json are the same file; one would "
                                   "replace the other. Give them different paths"),
    (["--report", "{dir}/r.txt", "--markdown", "{dir}/old.json", "--compare-to", "{dir}/old.json"],
     "--markdown {dir}/old.json is the --compare-to file {dir}/old.json; writing the report there would replace "
     "it. Give --markdown another path"),
])
def test_a_report_path_equal_to_an_input_is_refused(evaluate, tmp_path, flags, message):
    gold = tmp_path / "gold.csv"
    fill = lambda text: text.format(gold=gold, dir=tmp_path)  # noqa: E731
    code, out, err = evaluate(CLEAN, *map(fill, flags))
    assert (code, out, err) == (2, "", f"error: {fill(message)}\n")
    assert gold.read_text(encoding="utf-8") == CLEAN


def test_another_goldset_reports_beside_itself_and_leaves_the_baseline_alone(tiny_index, tmp_path, capsys,
                                                                             monkeypatch):
    docs, index = tiny_index
    monkeypatch.chdir(tmp_path)
    baseline = write(tmp_path / "eval" / "baseline.json", '{"kept": true}')
    write(tmp_path / "eval" / "baseline.txt", "kept")
    write(tmp_path / "sets" / "mine.csv", CLEAN)
    code, out, err = run(capsys, "--goldset", "sets/mine.csv", "--docs", docs, "--index", index)
    assert code == 0
    # Paths inside the working folder are shown relative to it, never as a bare file name.
    assert out.endswith("\nWrote sets/mine.report.txt, sets/mine.report.json, sets/mine.report.details.md\n")
    assert (tmp_path / "sets" / "mine.report.txt").exists()
    # The default goldset on another index is not the committed baseline's run either.
    write(tmp_path / "eval" / "goldset.csv", CLEAN)
    assert er.GOLDSET_PATH == "eval/goldset.csv"
    code, _, err = run(capsys, "--docs", docs, "--index", index, "--quiet")
    assert (code, err) == (0, "")
    assert (tmp_path / "eval" / "goldset.report.json").exists()
    assert baseline.read_text(encoding="utf-8") == '{"kept": true}'
    assert (tmp_path / "eval" / "baseline.txt").read_text(encoding="utf-8") == "kept"


def default_args(**changes) -> EvalOptions:
    return EvalOptions(**{**er.parse([]).flags(), **changes}, defaults=er.eval_defaults())


def test_default_report_paths():
    assert outputs.default_report_path(default_args()) == "eval/baseline.txt"
    assert outputs.default_report_path(default_args(ablation=True)) == "eval/runs/ablation.txt"
    assert outputs.default_report_path(default_args(index="eval/index")) == "eval/baseline.txt"
    assert outputs.default_report_path(default_args(index="other")) == "eval/goldset.report.txt"
    assert outputs.default_report_path(default_args(docs="papers")) == "eval/goldset.report.txt"
    assert outputs.default_report_path(default_args(chroma_url="http://h:8000")) == "eval/goldset.report.txt"
    assert outputs.default_report_path(default_args(goldset="x/gold.jsonl", ablation=True)) == "x/gold.ablation.txt"
    assert outputs.default_report_path(default_args(dataset="../shared/data/scifact", split="train")) == \
        "eval/dataset_reports/scifact-train.txt"


def test_the_automatic_comparison_only_compares_reports_of_one_goldset(evaluate, tmp_path):
    report = tmp_path / "r.txt"
    assert evaluate(CLEAN, "--report", report, name="a.csv")[0] == 0
    code, _, err = evaluate(CLEAN, "--report", report, name="b.csv")
    shown = report.with_suffix(".json")
    why = (f"the previous report {shown} is of goldset {tmp_path / 'a.csv'}, this run of goldset "
           f"{tmp_path / 'b.csv'}; give --compare-to {shown} to compare them anyway")
    assert (code, err) == (0, f"warning: not compared: {why}\n")
    assert "Compared to" not in report.read_text(encoding="utf-8")
    assert json.loads(shown.read_text(encoding="utf-8"))["goldset"] == f"goldset {tmp_path / 'b.csv'}"
    # The same goldset is compared.
    assert evaluate(CLEAN, "--report", report, name="b.csv")[0] == 0
    assert f"Compared to previous report {shown} (3 common questions)" in report.read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- pages


def test_pages_ranges_and_page_words_are_read_bad_pages_are_left_out(evaluate, tmp_path):
    gold = ("question;expected_source;expected_page\n"
            "What does Equation 21.23 give for a European call?;options.pdf;S. 2\n"     # line 2: rank 1
            "How sensitive is the option value to volatility?;options.pdf;1-2\n"         # line 3: rank 1
            "How do crops react to rainfall?;weather.pdf;Seite 1\n"                      # line 4: rank 1
            "Wie reagiert die Familie auf Gregor Samsa?;Literatur_Übersicht.pdf;0\n"     # line 5: left out
            "What is vega?;options.pdf;99999\n"                                           # line 6: left out
            "Which page has no text layer?;scan.pdf;-3\n"                                 # line 7: left out
            "What does the scanned appendix contain?;scan.pdf;zwei\n")                    # line 8: left out
    code, out, _ = evaluate(gold, "--report", tmp_path / "r.txt", "--page-tolerance", "0", "--no-compare")
    assert (code, out) == (1, ("hybrid: Hit@1 1.000, Hit@5 1.000, Hit@10 1.000, Hit@20 1.000, "
                               "NDCG@5 1.000, NDCG@10 1.000, NDCG@20 1.000, MRR 1.000 (3 questions)\n"
                               f"Wrote {tmp_path}/r.txt, {tmp_path}/r.json, {tmp_path}/r.details.md\n"))
    text = (tmp_path / "r.txt").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[1:3] == ["Status: exit 1, evaluated but the run is degraded",
                          "  degraded: 4 questions left out of the metrics for an invalid expected page (see 'Left "
                          "out of the metrics')"]
    assert "  Questions:          3 (4 more left out of the metrics: invalid expected page)" in lines
    start = lines.index("Left out of the metrics (4; not counted in any average)")
    assert lines[start + 1:start + 9] == [
        "  - Wie reagiert die Familie auf Gregor Samsa? (line 5)",
        "    page '0' in column 'expected_page' is before the first page; pages count from 1, as a PDF viewer shows "
        "them; the question is left out of the metrics until the page is fixed",
        "  - What is vega? (line 6)",
        "    page 99999 of 'options.pdf' is beyond its 2 pages; pages in the goldset count from 1",
        "  - Which page has no text layer? (line 7)",
        "    page '-3' in column 'expected_page' is before the first page; pages count from 1, as a PDF viewer "
        "shows them; the question is left out of the metrics until the page is fixed",
        "  - What does the scanned appendix contain? (line 8)",
        "    page 'zwei' in column 'expected_page' is not a page; write 12, 12-13, S. 12, Seite 12 or p. 12; the "
        "question is left out of the metrics until the page is fixed",
    ]
    payload = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert payload["num_queries"] == 3 and len(payload["left_out"]) == 4
    volatility = next(q for q in payload["per_query"] if q["question"].startswith("How sensitive"))
    assert volatility["locations"] == [{"source": "options.pdf", "page": 1, "last_page": 2}]


def test_a_goldset_whose_every_page_is_invalid_exits_2(evaluate, tmp_path):
    code, out, err = evaluate("question,expected_source,expected_page\nWhat is vega?,options.pdf,0\n",
                              "--report", tmp_path / "r.txt")
    assert (code, out) == (2, "")
    assert err.endswith(f"error: every question of {tmp_path / 'gold.csv'} has an invalid expected page (see the "
                        f"warnings above), so nothing can be evaluated; fix the pages and rerun\n")
    assert not (tmp_path / "r.txt").exists()


def test_the_baseline_is_the_default_run_s_and_carries_no_comparison(tiny_index, tmp_path, capsys, monkeypatch):
    docs, index = tiny_index
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(er, "VECTORSTORE_PATH", str(index))
    monkeypatch.setattr(er.local_rag, "DOCS_PATH", str(docs))
    write(tmp_path / "eval" / "goldset.csv", CLEAN)
    without_generated = lambda path: [line for line in path.read_text(encoding="utf-8").splitlines()  # noqa: E731
                                      if not line.startswith(("Generated:", ' "generated": '))]
    assert run(capsys, "--quiet")[0] == 0
    baseline = tmp_path / "eval" / "baseline.txt"
    first, first_json = without_generated(baseline), without_generated(baseline.with_suffix(".json"))
    # The second run compares with the first: the comparison goes to stdout and eval/runs/, the baseline is
    # the same file but for its Generated: line (what a fresh clone's first run must leave).
    code, out, _ = run(capsys, "--quiet")
    assert code == 0 and "Compared to previous report eval/baseline.json (3 common questions)" in out
    compare = (tmp_path / "eval" / "runs" / "baseline.compare.txt").read_text(encoding="utf-8")
    assert compare.startswith("Compared to previous report eval/baseline.json") and compare in out
    assert without_generated(baseline) == first and "Compared to" not in baseline.read_text(encoding="utf-8")
    assert without_generated(baseline.with_suffix(".json")) == first_json
    assert json.loads(baseline.with_suffix(".json").read_text(encoding="utf-8")).get("compare") is None
    # An everyday ablation writes beside it, under a name that says its settings, and compares with it.
    before = baseline.read_bytes(), baseline.with_suffix(".json").read_bytes()
    code, out, err = run(capsys, "--mode", "dense")
    assert code == 0 and out.splitlines()[-1] == ("Wrote eval/runs/baseline.mode-dense.txt, "
                                                  "eval/runs/baseline.mode-dense.json, "
                                                  "eval/runs/baseline.mode-dense.details.md")
    ablation = (tmp_path / "eval" / "runs" / "baseline.mode-dense.txt").read_text(encoding="utf-8")
    assert "Compared to report eval/baseline.json (3 common questions)" in ablation
    assert (baseline.read_bytes(), baseline.with_suffix(".json").read_bytes()) == before


@pytest.fixture
def project(tiny_index, tmp_path) -> dict[str, Path]:
    """A temporary project whose every kept file an output could replace: an index (and another one), the docs,
    a goldset, the query vector and judge caches, the derived-index cache."""
    import shutil

    from localrag.runs.query_vectors import Embedder, QueryVectorCache

    docs, index = tiny_index
    paths = {"docs": shutil.copytree(docs, tmp_path / "docs"), "index": shutil.copytree(index, tmp_path / "index"),
             "other": shutil.copytree(index, tmp_path / "shelf" / "other-index"),
             "gold": write(tmp_path / "gold.csv", CLEAN), "judge": write(tmp_path / "judge.json", '{"kept": 1}'),
             "cache": tmp_path / "qv.sqlite3", "icache": tmp_path / "icache", "out": tmp_path / "out"}
    QueryVectorCache(paths["cache"]).put(Embedder("m", "r", "torch", "torch", ""), {"a question": [0.5, 0.25]})
    write(paths["icache"] / "kept.txt", "kept")
    paths["out"].mkdir()
    return paths


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


PROTECTED = ["index/index_info.json", "index/chroma.sqlite3", "index/bm25/new.json", "index/report.txt",
             "shelf/other-index/index_info.json", "shelf/other-index/new.txt", "docs/options.pdf", "docs/new.txt",
             "gold.csv", "judge.json", "qv.sqlite3", "qv.sqlite3-journal", "qv.sqlite3-wal", "icache/kept.txt",
             "icache/new/report.txt"]


@pytest.mark.parametrize("flag", ["--report", "--json", "--markdown", "--html", "--csv", "--run-file", "--out",
                                  "--label-sample --out"])
def test_no_output_flag_may_replace_what_the_project_keeps(project, tmp_path, capsys, flag):
    """--label-sample's --out was not checked at all: a labels.pdf in the docs folder made the next add_pdfs.py exit
    1."""
    common = ["--goldset", project["gold"], "--index", project["index"], "--docs", project["docs"], "--quiet",
              "--no-rerank", "--query-cache", project["cache"], "--judge-cache", project["judge"], "--index-cache",
              project["icache"]]
    others = {"--out": ["--generate", 2, "--force"],
              "--label-sample --out": ["--answers", project["out"] / "answers.jsonl", "--label-sample", 2]}.get(
        flag, ["--report" if flag == "--json" else "--json", project["out"] / ("r.txt" if flag == "--json" else
                                                                               "r.json")])
    flag = flag.split()[-1]
    before = snapshot(tmp_path)
    for target in [tmp_path / name for name in PROTECTED]:
        code, out, err = run(capsys, *common, *others, flag, target)
        assert (code, out) == (2, ""), (target, err)
        assert err.startswith(f"error: {flag} {target} is ") and (
            err.endswith(f"Give {flag} another path\n") or err.endswith(f"Give {flag} a path outside it\n")), err
        assert snapshot(tmp_path) == before, target  # not a byte changed, nothing new written
    # Two outputs of one run on one path: refused too.
    if flag != "--out":
        same = project["out"] / "same.txt"
        code, _, err = run(capsys, *common, "--report", project["out"] / "r.txt", "--json", project["out"] / "r.json",
                           "--markdown", project["out"] / "r.md", flag, same, "--run-file" if flag == "--report"
                           else "--markdown" if flag == "--json" else "--json", same)
        assert code == 2 and "are the same file; one would replace the other" in err
        assert snapshot(tmp_path) == before


def test_the_protection_names_what_it_protects(project, tmp_path, capsys):
    common = ["--goldset", project["gold"], "--index", project["index"], "--docs", project["docs"], "--quiet",
              "--query-cache", project["cache"], "--judge-cache", project["judge"]]
    cases = {
        project["index"] / "index_info.json": f"is inside the index folder {project['index']}; writing there could "
                                              f"replace what it holds",
        project["other"] / "index_info.json": f"is inside the index folder {project['other']}; writing there could "
                                              f"replace its manifest or store",
        project["cache"]: f"is the --query-cache file {project['cache']}; writing the report there would replace it",
        project["judge"]: f"is the --judge-cache file {project['judge']}; writing the report there would replace it",
        project["docs"] / "options.pdf": f"is inside the docs folder {project['docs']}; writing there could replace "
                                         f"what it holds",
    }
    for target, words in cases.items():
        code, _, err = run(capsys, *common, "--report", project["out"] / "r.txt", "--json", target)
        advice = "another path" if words.endswith("replace it") else "a path outside it"
        assert (code, err) == (2, f"error: --json {target} {words}. Give --json {advice}\n")


@pytest.mark.parametrize("flag, target, extra, words", [
    ("--query-cache", "index/chroma.sqlite3", [], "is inside the index folder {tmp}/index; writing there could replace "
                                                 "what it holds. Give --query-cache a path outside it"),
    ("--query-cache", "gold.csv", [], "is the --goldset file {tmp}/gold.csv; a cache there would replace it, or move "
                                      "it aside as a damaged cache. Give --query-cache another path"),
    ("--judge-cache", "index/index_info.json", ["--judge", "stub-model"],
     "is inside the index folder {tmp}/index; writing there could replace what it holds. Give --judge-cache a path "
     "outside it"),
    ("--judge-cache", "gold.csv", ["--judge", "stub-model"],
     "is the --goldset file {tmp}/gold.csv; a cache there would replace it, or move it aside as a damaged cache. Give "
     "--judge-cache another path"),
    ("--judge-cache", "gold.csv", ["--answer-model", "stub-model"],
     "is the --goldset file {tmp}/gold.csv; a cache there would replace it, or move it aside as a damaged cache. Give "
     "--judge-cache another path"),
    ("--judge-cache", "gold.csv", ["--rerank-model", "openai:stub-model"],
     "is the --goldset file {tmp}/gold.csv; a cache there would replace it, or move it aside as a damaged cache. Give "
     "--judge-cache another path"),
    ("--judge-cache", "docs/options.pdf", ["--judge", "stub-model"],
     "is inside the docs folder {tmp}/docs; writing there could replace what it holds. Give --judge-cache a path "
     "outside it"),
    ("--query-cache", "judge.json", ["--judge", "stub-model"],
     "is the --judge-cache file {tmp}/judge.json; a cache there would replace it, or move it aside as a damaged "
     "cache. Give --query-cache another path"),
    ("--query-cache", "notes.txt", [], "is not an SQLite file, so it is no cache of this tool and is left as it is. "
                                       "Give --query-cache another path (a new cache is made there), or move that file "
                                       "away"),
    ("--query-cache", "shelf/chroma-copy.sqlite3", [],
     "is an SQLite database of other tables (collections, embeddings), not a query vector cache, so it is no cache of "
     "this tool and is left as it is. Give --query-cache another path (a new cache is made there), or move that file "
     "away"),
    ("--judge-cache", "manifest-copy.json", ["--judge", "stub-model"],
     "is not a reply cache (it does not begin as one: '{{\"version\": 3, \"files\": {{}}}}'), so it is no cache of this "
     "tool and is left as it is. Give --judge-cache another path (a new cache is made there), or move that file away"),
])
def test_a_cache_flag_never_replaces_or_moves_aside_a_file_the_user_keeps(project, tmp_path, capsys, monkeypatch,
                                                                        flag, target, extra, words):
    """The issue's cases: --query-cache IDX/chroma.sqlite3 moved the index's store aside as damaged; --judge-cache
    IDX/index_info.json replaced the manifest; --judge-cache or --query-cache GOLDSET.csv moved the goldset aside
    and wrote a cache in its place, exit 0."""
    import sqlite3

    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")  # never asked: refused before
    write(tmp_path / "notes.txt", "my notes\n")
    write(tmp_path / "manifest-copy.json", '{"version": 3, "files": {}}')
    chroma = sqlite3.connect(tmp_path / "shelf" / "chroma-copy.sqlite3")  # a store of Chroma's tables, not ours
    chroma.executescript("CREATE TABLE embeddings (id INTEGER); CREATE TABLE collections (id TEXT);")
    chroma.close()
    common = ["--goldset", project["gold"], "--index", project["index"], "--docs", project["docs"], "--quiet",
              "--report", project["out"] / "r.txt", "--query-cache", project["cache"], "--judge-cache", project["judge"]]
    before = md5s(tmp_path)
    code, out, err = run(capsys, *common, *extra, flag, tmp_path / target)
    assert (code, out) == (2, "")
    assert err == f"error: {flag} {tmp_path / target} {words.format(tmp=tmp_path)}\n"
    assert md5s(tmp_path) == before  # not a byte changed, nothing moved aside or written


def test_a_damaged_query_vector_cache_of_this_tool_is_still_moved_aside(project, tmp_path, capsys):
    cache = tmp_path / "qv2.sqlite3"
    from localrag.runs.query_vectors import Embedder, QueryVectorCache

    QueryVectorCache(cache).put(Embedder("m", "r", "torch", "torch", ""), {f"q{i}": [0.5] * 384 for i in range(100)})
    data = cache.read_bytes()
    cache.write_bytes(data[:len(data) // 2])  # truncated
    code, _, err = run(capsys, "--goldset", project["gold"], "--index", project["index"], "--docs", project["docs"],
                       "--quiet", "--no-rerank", "--report", project["out"] / "r.txt", "--query-cache", cache)
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("qv2.sqlite3.damaged-")]
    assert code == 0 and len(aside) == 1 and aside[0].read_bytes() == data[:len(data) // 2]
    assert err == (f"warning: the query vector cache {cache} is unreadable (DatabaseError: database disk image is "
                   f"malformed); moved it aside to {aside[0].name} (delete it when you like); its questions are "
                   f"embedded again and kept in a new file\n")


BASELINE_FILES = ("baseline.txt", "baseline.json", "baseline.details.md")


@pytest.fixture
def baseline_project(tiny_index, tmp_path, monkeypatch) -> Path:
    """A project folder run from, whose default goldset (off-topic questions: MRR under 0.9) and index are the tiny
    corpus's, with the committed baseline of a plain run."""
    docs, index = tiny_index
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(er, "VECTORSTORE_PATH", str(index))
    monkeypatch.setattr(er.local_rag, "DOCS_PATH", str(docs))
    write(tmp_path / "eval" / "goldset.csv", off_topic(6))
    assert er.main(["--quiet"]) == 0
    return tmp_path / "eval"


def md5s(folder: Path) -> dict[str, str]:
    return {name: hashlib.md5(data).hexdigest() for name, data in snapshot(folder).items()}


@pytest.mark.parametrize("flags", [
    ["--csv", "eval/baseline.json", "--html", "eval/baseline.txt"],
    ["--goldset", "other.csv", "--csv", "eval/baseline.json", "--html", "eval/baseline.txt"],
    ["--html", "eval/baseline.txt"], ["--markdown", "eval/baseline.details.md"], ["--run-file", "eval/baseline.json"],
    ["--run-file", "r.run", "--qrels-file", "eval/baseline.txt"], ["--csv", "eval/baseline.csv"],
    ["--goldset", "other.csv", "--report", "eval/baseline.txt"], ["--mode", "bm25", "--json", "eval/baseline.json"],
    ["--generate", "2", "--out", "eval/baseline.txt", "--force"],
    ["--answers", "answers.jsonl", "--label-sample", "1", "--out", "eval/baseline.csv"],
])
def test_no_output_flag_replaces_the_committed_baseline(baseline_project, capsys, flags):
    """The issue's case: --csv eval/baseline.json --html eval/baseline.txt overwrote the committed baseline, exit 0."""
    write(baseline_project.parent / "other.csv", CLEAN)
    before = md5s(baseline_project)
    flag, path = next((flag, path) for flag, path in zip(flags, flags[1:]) if path.startswith("eval/baseline."))
    code, out, err = run(capsys, "--quiet", *flags)
    assert (code, out) == (2, "")
    assert err == (f"error: {flag} {path} is a file of the committed baseline eval/baseline.*, which only a run of "
                   f"the default goldset, index and settings writes, as its report; writing there would replace it. "
                   f"Give {flag} another path, or add --replace-baseline to replace the baseline on purpose\n")
    assert md5s(baseline_project) == before


def test_replace_baseline_lets_an_output_replace_it_on_purpose(baseline_project, capsys):
    code, out, _ = run(capsys, "--quiet", "--mode", "bm25", "--report", "eval/baseline.txt", "--replace-baseline")
    assert code == 0 and out.endswith("\nWrote eval/baseline.txt, eval/baseline.json, eval/baseline.details.md\n")
    assert json.loads((baseline_project / "baseline.json").read_text(encoding="utf-8"))["settings"]["retrieval_mode"] == "bm25"


def test_no_output_flag_replaces_a_report_of_another_kind_unless_forced(evaluate, tmp_path):
    assert evaluate(CLEAN, "--report", tmp_path / "r.txt", "--no-compare")[0] == 0
    before = md5s(tmp_path)
    for flag, name, kind in [("--csv", "r.json", "JSON report"), ("--html", "r.txt", "report"),
                             ("--markdown", "r.details.md", "details file"), ("--json", "r.txt", "report")]:
        code, out, err = evaluate(CLEAN, "--report", tmp_path / "new.txt", "--json", tmp_path / "new.json", flag,
                                  tmp_path / name, "--no-compare")
        assert (code, out) == (2, "")
        assert err == (f"error: {flag} {tmp_path / name} is a {kind} of this tool; writing there would replace it "
                       f"with another kind of file. Give {flag} another path, or add --force to replace it\n")
        assert md5s(tmp_path) == before
    # A rerun replaces its own report (and is compared with it); --force lets another kind of file replace one.
    assert evaluate(CLEAN, "--report", tmp_path / "r.txt")[0] == 0
    code, _, _ = evaluate(CLEAN, "--report", tmp_path / "new.txt", "--csv", tmp_path / "r.json", "--force")
    assert code == 0 and (tmp_path / "r.json").read_text(encoding="utf-8").startswith("\ufeffquery_id,")


def test_a_gate_run_leaves_the_baseline_as_a_plain_run_would(baseline_project, capsys):
    """The issue's case: --fail-under mrr=0.95 wrote "Status: exit 1, evaluated but a gate failed" and the gates into
    eval/baseline.txt and .json, so git diff showed more than the Generated line."""
    without_generated = lambda name: [  # noqa: E731
        line for line in (baseline_project / name).read_bytes().split(b"\n")
        if not line.startswith((b"Generated: ", b' "generated": '))]
    plain = {name: without_generated(name) for name in BASELINE_FILES}
    for gates, code in ((["--fail-under", "mrr=0.95"], 1), (["--fail-under", "hit@5=0.5", "--fail-on-regression"], 0)):
        result, out, err = run(capsys, "--quiet", *gates)
        mrr = json.loads((baseline_project / "baseline.json").read_text(encoding="utf-8"))["metrics"]["mrr"]
        assert result == code
        # The gates are this run's: in its exit code and its status on stderr, not in the committed files.
        assert err == ("Status: exit 1, evaluated but a gate failed\n"
                       f"  gate failed: MRR {mrr:.4f} is under --fail-under mrr=0.95\n" if code else "")
        assert out.endswith("\nWrote eval/baseline.txt, eval/baseline.json, eval/baseline.details.md, "
                            "eval/runs/baseline.compare.txt\n")
        assert {name: without_generated(name) for name in BASELINE_FILES} == plain
        assert (baseline_project / "baseline.txt").read_text(encoding="utf-8").splitlines()[1] == \
            "Status: exit 0, evaluated; no gate set"
    # The next plain run finds nothing to undo.
    assert run(capsys, "--quiet")[0] == 0
    assert {name: without_generated(name) for name in BASELINE_FILES} == plain
    # A report named for the run keeps its gates.
    code, _, _ = run(capsys, "--quiet", "--fail-under", "mrr=0.95", "--report", "eval/runs/ci.txt")
    assert code == 1 and status_lines(baseline_project / "runs" / "ci.txt")[1].startswith("  gate failed: MRR ")


def test_a_full_disk_while_the_reports_are_written_is_one_message_and_keeps_the_old_ones(evaluate, tmp_path,
                                                                                           monkeypatch):
    from localrag import files

    report = tmp_path / "out" / "r.txt"
    assert evaluate(CLEAN, "--report", report, "--no-compare")[0] == 0
    before = snapshot(tmp_path / "out")
    real_fsync = files.os.fsync

    def full(fd):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path / "out" / ".r.txt.")):
            raise OSError(28, "No space left on device")  # the details file is staged, the text report is not
        return real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", full)
    code, out, err = evaluate(CLEAN, "--report", report, "--no-compare")
    assert (code, out) == (2, "")
    # The report that could not be written, never the temp file; advice that fits a full disk.
    out_dir = tmp_path / "out"
    assert err == (f"error: the reports could not be written: {report}: No space left on device; the reports there "
                   f"before are unchanged ({out_dir / 'r.details.md'}, {report}, {out_dir / 'r.json'}). Free some "
                   f"space on its disk, then run again\n")
    assert snapshot(tmp_path / "out") == before  # old reports as they were, no temp file left


@pytest.mark.parametrize("flag, name", [("--html", "r.html"), ("--csv", "r.csv")])
def test_a_full_disk_on_the_page_or_the_csv_keeps_every_report_as_it_was(evaluate, tmp_path, monkeypatch, flag,
                                                                          name):
    from localrag import files

    out_dir = tmp_path / "out"
    report, extra = out_dir / "r.txt", out_dir / name
    assert evaluate(CLEAN, "--report", report, "--no-compare", flag, extra)[0] == 0
    before = snapshot(out_dir)
    real_fsync = files.os.fsync

    def full(fd):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(out_dir / f".{name}.")):
            raise OSError(28, "No space left on device")  # the page or CSV is the last file staged
        return real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", full)
    code, out, err = evaluate(CLEAN, "--report", report, "--no-compare", flag, extra)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: the reports could not be written: {extra}: No space left on device; the "
                          f"reports there before are unchanged (")
    assert err.endswith("). Free some space on its disk, then run again\n")
    assert snapshot(out_dir) == before  # the report, JSON, details and the old page or CSV as they were


@pytest.mark.parametrize("errno, strerror, advice", [
    (28, "No space left on device", "Free some space on its disk, then run again"),
    (122, "Disk quota exceeded", "Free some space on its disk, then run again"),
    (13, "Permission denied", "Make the folder {folder} writable, or give another path, then run again"),
    (1, "Operation not permitted", "Make the folder {folder} writable, or give another path, then run again"),
    (30, "Read-only file system", "Make the folder {folder} writable, or give another path, then run again"),
    (21, "Is a directory", "A folder is in the way; move it, or give another path, then run again"),
    (5, "Input/output error", "Run again once that is mended"),
])
def test_a_write_error_names_the_report_and_fits_its_advice_to_the_error(tmp_path, monkeypatch, errno, strerror,
                                                                        advice):
    from localrag import files

    def fail(**kwargs):  # the temp file beside the report could not be made
        raise OSError(errno, strerror, str(tmp_path / ".r.txt.abc123.tmp"))

    monkeypatch.setattr(files.tempfile, "mkstemp", fail)
    with pytest.raises(outputs.EvalError) as caught:
        outputs.write_reports([(tmp_path / "r.txt", "report")])
    assert str(caught.value) == (f"the reports could not be written: {tmp_path / 'r.txt'}: {strerror}; the reports "
                                 f"there before are unchanged ({tmp_path / 'r.txt'}). "
                                 + advice.format(folder=tmp_path))
    assert ".tmp" not in str(caught.value)


@pytest.mark.parametrize("flag, example", [("--report", "report.txt"), ("--json", "report.json"),
                                           ("--markdown", "report.md"), ("--run-file", "run.trec"),
                                           ("--out", "goldset.csv")])
def test_an_output_onto_a_folder_is_refused_before_any_work(tiny_index, tmp_path, capsys, flag, example):
    """--report onto a folder ran the whole evaluation, then failed naming a temp file and advising to free space."""
    folder = tmp_path / "runs"
    folder.mkdir()
    index = tmp_path / "new-index"  # not built: nothing is done before the check
    gold = write(tmp_path / "gold.csv", CLEAN)
    others = {"--report": [], "--out": ["--generate", 2]}.get(flag, ["--report", tmp_path / "r.txt"])
    code, out, err = run(capsys, "--goldset", gold, "--docs", tiny_index[0], "--index", index, "--quiet", *others,
                         flag, folder)
    assert (code, out, err) == (2, "", f"error: {flag} {folder} is a folder, not a file; give a file path such as "
                                       f"{folder / example}\n")
    assert not index.exists() and list(folder.iterdir()) == []
    # The details file beside a report: a folder of that name is in the way too.
    (tmp_path / "r.details.md").mkdir()
    code, _, err = run(capsys, "--goldset", gold, "--docs", tiny_index[0], "--index", index, "--quiet",
                       "--report", tmp_path / "r.txt")
    assert (code, err) == (2, f"error: the details file of --report {tmp_path / 'r.details.md'} is a folder, not a "
                              f"file; move that folder, or give --report another path\n")
    assert not index.exists()


@pytest.mark.parametrize("flag", ["--report", "--json", "--markdown", "--run-file", "--out"])
def test_no_output_may_land_in_the_folder_the_index_follows_without_docs(project, tmp_path, capsys, flag):
    """Without --docs the folder the evaluated index follows (its manifest's) is the docs folder: a report named
    like one of its PDFs must not replace it."""
    pdf = project["docs"] / "options.pdf"
    before = snapshot(tmp_path)
    others = {"--report": [], "--out": ["--generate", 2, "--force"]}.get(flag, ["--report", project["out"] / "r.txt"])
    code, out, err = run(capsys, "--goldset", project["gold"], "--index", project["index"], "--quiet", "--no-rerank",
                         "--query-cache", project["cache"], "--judge-cache", project["judge"], "--index-cache",
                         project["icache"], *others, flag, pdf)
    assert (code, out, err) == (2, "", f"error: {flag} {pdf} is inside the docs folder {project['docs']}; writing "
                                       f"there could replace what it holds. Give {flag} a path outside it\n")
    assert snapshot(tmp_path) == before  # the PDF as it was, nothing written


# ----------------------------------------------------------------------------- --output-dir

def test_output_dir_moves_the_default_reports_and_keeps_given_paths(tmp_path):
    assert outputs.in_output_dir("eval/runs/ablation.txt", "out") == "out/ablation.txt"
    assert outputs.in_output_dir("eval/runs/ablation.txt", None) == "eval/runs/ablation.txt"
    moved = outputs.with_report_paths(default_args(output_dir="out"))
    assert (moved.report, moved.json, moved.compare_file) == ("out/baseline.txt", "out/baseline.json",
                                                              "out/baseline.compare.txt")
    assert outputs.details_path(moved.report) == "out/baseline.details.md"
    dense = outputs.with_report_paths(default_args(output_dir="out", mode="dense"))
    assert (dense.report, dense.json, dense.compare_file) == ("out/baseline.mode-dense.txt",
                                                              "out/baseline.mode-dense.json", None)
    assert outputs.with_report_paths(default_args(output_dir="out", ablation=True)).report == "out/ablation.txt"
    dataset = default_args(output_dir="out", dataset="../shared/data/scifact", split="test")
    assert outputs.with_report_paths(dataset).report == "out/scifact-test.txt"
    # A path given keeps its place; the JSON report follows --report, as without --output-dir.
    given = outputs.with_report_paths(default_args(output_dir="out", report="mine/r.txt", markdown="m.md"))
    assert (given.report, given.json, given.markdown) == ("mine/r.txt", "mine/r.json", "m.md")


def test_output_dir_that_is_a_file_or_inside_an_index_is_refused(tmp_path):
    a_file = write(tmp_path / "notes.txt", "x")
    with pytest.raises(outputs.EvalError) as caught:
        outputs.check_output_dir(outputs.with_report_paths(default_args(output_dir=str(a_file))))
    assert str(caught.value) == (f"--output-dir {a_file} is a file, not a folder; give a folder (it is created if "
                                 f"missing)")
    write(tmp_path / "idx" / "index_info.json", "{}")
    inside = tmp_path / "idx" / "reports"
    with pytest.raises(outputs.EvalError) as caught:
        outputs.check_output_dir(outputs.with_report_paths(default_args(output_dir=str(inside),
                                                                        index=str(tmp_path / "idx"))))
    assert str(caught.value) == (f"--output-dir {inside} is inside the index folder {tmp_path / 'idx'}; writing "
                                 f"there could replace what it holds. Give a folder outside it")
    # The folder the committed baseline is in: the default run would replace it.
    with pytest.raises(outputs.EvalError) as caught:
        outputs.check_output_dir(outputs.with_report_paths(default_args(output_dir="eval")))
    assert str(caught.value) == ("--output-dir eval never replaces the committed eval/baseline.txt, and this run "
                                 "would write eval/baseline.txt; give another folder, or drop --output-dir")
    outputs.check_output_dir(outputs.with_report_paths(default_args(output_dir=str(tmp_path / "new" / "out"))))


def test_output_dir_run_writes_there_and_leaves_the_baseline_alone(tiny_index, tmp_path, capsys, monkeypatch):
    docs, index = tiny_index
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(er, "VECTORSTORE_PATH", str(index))
    monkeypatch.setattr(er.local_rag, "DOCS_PATH", str(docs))
    write(tmp_path / "eval" / "goldset.csv", CLEAN)
    assert run(capsys, "--quiet")[0] == 0
    baseline = tmp_path / "eval" / "baseline.txt"
    before = baseline.read_bytes(), baseline.with_suffix(".json").read_bytes()
    code, out, err = run(capsys, "--quiet", "--output-dir", "out/today")  # created, parents too
    assert (code, err) == (0, "")
    # Compared with the committed baseline it would have replaced; the comparison goes to its own file there.
    assert out.startswith("Compared to report eval/baseline.json (3 common questions)\n")
    assert out.splitlines()[-1] == ("Wrote out/today/baseline.txt, out/today/baseline.json, "
                                    "out/today/baseline.details.md, out/today/baseline.compare.txt")
    assert sorted(p.name for p in (tmp_path / "out" / "today").iterdir()) == [
        "baseline.compare.txt", "baseline.details.md", "baseline.json", "baseline.txt"]
    assert (baseline.read_bytes(), baseline.with_suffix(".json").read_bytes()) == before
    assert not (tmp_path / "eval" / "runs" / "baseline.compare.txt").exists()
    # A file in DIR's place, and the baseline's own folder: refused before any work, nothing written.
    write(tmp_path / "taken", "x")
    assert run(capsys, "--output-dir", "taken") == (
        2, "", "error: --output-dir taken is a file, not a folder; give a folder (it is created if missing)\n")
    assert run(capsys, "--output-dir", "eval") == (
        2, "", "error: --output-dir eval never replaces the committed eval/baseline.txt, and this run would write "
               "eval/baseline.txt; give another folder, or drop --output-dir\n")
    assert (baseline.read_bytes(), baseline.with_suffix(".json").read_bytes()) == before
