"""--csv FILE: one row per question (and configuration) with its ranks, stage ranks and metrics; and the goldset
report's Hit@1 and NDCG@k beside the tested Hit@k and MRR."""
from __future__ import annotations

import csv
import dataclasses
import io
import json

import pytest

from localrag.evaluation import scoring as ev
from localrag.evaluation.csv_report import render_csv
from localrag.evaluation.result import EvalResult, StageRanks
from conftest import write_corpus
from test_eval_retrieval import GOLD_EN, exact_result, gold_args, run  # noqa: F401 (gold_args is a fixture)


def rows(text: str) -> list[dict[str, str]]:
    assert text.startswith("\ufeff")  # a spreadsheet reads the umlauts right
    return list(csv.DictReader(io.StringIO(text[1:], newline="")))


def test_one_row_per_question_with_ranks_metrics_and_stage_ranks():
    result = exact_result(1)
    # A stage trace on one question; a question text with a comma, quotes and a line break (the trap of CSV).
    near = dataclasses.replace(result.per_query[0], question='Which "near" page,\nfirst?',
                               stages=StageRanks({"dense": 4, "bm25": None, "rrf": 2, "final": 2},
                                                 {"dense": 100, "bm25": 100, "rrf": 3, "final": 3},
                                                 {"dense": 30, "bm25": 30}, 30, "page"))
    result = dataclasses.replace(result, per_query=(near, *result.per_query[1:]))
    text = render_csv([result])
    assert text.splitlines()[0] == (
        "\ufeffquery_id,corpus,question,expected,rank,rank_exact_page,hit@1,hit@2,hit@3,ndcg@1,ndcg@2,ndcg@3,mrr,"
        "rank_dense,rank_bm25,rank_rrf,rank_final,first_source,first_page")
    table = rows(text)
    assert [(r["query_id"], r["rank"], r["rank_exact_page"]) for r in table] == [
        ("near", "2", "3"), ("only", "1", ""), ("exact", "1", "1"), ("never", "", "")]
    first = table[0]
    assert first["question"] == 'Which "near" page, first?'  # whitespace folded: one line in a cell
    assert (first["expected"], first["first_source"], first["first_page"]) == ("a.pdf p. 5", "b.pdf", "1")
    # near: its page itself at rank 3 (1/log2 4 = 0.5) beats its neighbour at rank 2 (0.5/log2 3).
    assert (first["hit@1"], first["hit@2"], first["ndcg@2"], first["ndcg@3"], first["mrr"]) == (
        "0.0000", "1.0000", "0.3155", "0.5000", "0.5000")
    assert (first["rank_dense"], first["rank_bm25"], first["rank_rrf"], first["rank_final"]) == ("4", "", "2", "2")
    assert table[1]["rank_dense"] == ""  # no stage trace for this question


def test_an_ablation_names_each_row_s_configuration():
    a, b = exact_result(1), dataclasses.replace(exact_result(0), name="dense")
    table = rows(render_csv([a, b]))
    assert [(r["configuration"], r["query_id"], r["rank"]) for r in table] == [
        ("hybrid", "near", "2"), ("hybrid", "only", "1"), ("hybrid", "exact", "1"), ("hybrid", "never", ""),
        ("dense", "near", "3"), ("dense", "only", ""), ("dense", "exact", "1"), ("dense", "never", "")]


def test_a_comparison_tests_hit_at_the_asked_cutoffs_and_mrr_not_hit1_or_ndcg():
    old, new = exact_result(1), exact_result(0)
    assert old.tested == ("hit@1", "hit@2", "hit@3", "mrr")  # Scoring((1, 2, 3)): Hit@1 was asked for here
    assert ev.tested_keys("goldset", [5, 10]) == ["hit@5", "hit@10", "mrr"]
    assert ev.metric_keys("goldset", [5, 10]) == ["hit@1", "hit@5", "hit@10", "ndcg@5", "ndcg@10", "mrr"]
    compared = ev.compare_results(old, new, False, "old.json", resamples=100)
    assert list(compared.metrics) == ["hit@1", "hit@2", "hit@3", "mrr"]
    assert compared.family == "the 4 metrics"
    # The JSON report keeps what is tested; an older report without it compares every metric both have.
    back = EvalResult.from_json(json.loads(json.dumps(new.to_json())))
    assert back.tested == new.tested
    older = dataclasses.replace(back, tested=())
    assert list(ev.compare_results(old, older, False, "old.json", resamples=100).metrics) == list(old.metrics)


def test_csv_flag_writes_the_file_and_refuses_a_folder(gold_args, tmp_path, capsys):
    out = tmp_path / "questions.csv"
    code, _, _ = run(capsys, *gold_args(GOLD_EN, "--no-compare", "--quiet", "--csv", out))
    assert code == 1  # the goldset's planted faults degrade the run; the CSV is written all the same
    table = rows(out.read_text(encoding="utf-8"))
    assert len(table) == 7
    vega = next(r for r in table if r["question"] == "What is vega?")
    assert (vega["expected"], vega["rank"], vega["rank_exact_page"]) == (
        "Greeks.pdf p. 3; options.pdf p. 2", "1", "3")
    assert vega["rank_final"] == "1" and vega["rank_dense"] != ""
    (tmp_path / "folder").mkdir()
    code, out_text, err = run(capsys, *gold_args(GOLD_EN, "--no-compare", "--quiet", "--csv", tmp_path / "folder"))
    assert (code, out_text) == (2, "")
    assert err == (f"error: --csv {tmp_path / 'folder'} is a folder, not a file; give a file path such as "
                   f"{tmp_path / 'folder' / 'questions.csv'}\n")


@pytest.mark.parametrize("tolerance", [0, 1])
def test_ndcg_at_the_tolerance_is_never_below_the_exact_page_s(tolerance):
    result = exact_result(tolerance)
    for key, value in result.metrics.items():
        if key.startswith("ndcg@"):
            assert value >= result.metrics_exact[key]


# Files and questions that start like a spreadsheet formula (=, +, -, @): each answerable on its own file only.
FORMULA_CORPUS = {"=SUM(A1).pdf": ["Quarterly revenue of the orchard rose by twelve percent."],
                  "+plus.pdf": ["The lighthouse keeper logs every passing ship at dawn."],
                  "-minus.pdf": ["Glaciers retreat when the summer melt exceeds winter snowfall."],
                  "@mention.pdf": ["The violin maker seasons spruce wood for ten years."]}
FORMULA_GOLD = ("question,expected_source,expected_page\n"
                '"=HYPERLINK(""http://evil.example"",""x"") orchard revenue rose by how much?",=SUM(A1).pdf,1\n'
                "+what does the lighthouse keeper log at dawn?,+plus.pdf,1\n"
                "-when do glaciers retreat in summer?,-minus.pdf,1\n"
                "@how long does the violin maker season spruce wood?,@mention.pdf,1\n")


def test_csv_cells_that_start_like_a_formula_are_text_and_the_numbers_stay_numbers(tmp_path, capsys):
    """The issue's 12 cells (question, expected file, first source of 4 questions) start with a quote: a spreadsheet
    shows them as text instead of running them. Ranks and metrics are written as numbers, unquoted."""
    from localrag.files import FORMULA_STARTS

    docs = write_corpus(tmp_path / "docs", FORMULA_CORPUS)
    (tmp_path / "gold.csv").write_text(FORMULA_GOLD, encoding="utf-8")
    before = {p: p.read_bytes() for p in [tmp_path / "gold.csv", *docs.iterdir()]}
    out = tmp_path / "questions.csv"
    code, _, err = run(capsys, "--goldset", tmp_path / "gold.csv", "--docs", docs, "--index", tmp_path / "index",
                       "--report", tmp_path / "r.txt", "--no-compare", "--no-rerank", "--quiet", "--mode", "bm25",
                       "--csv", out)
    assert (code, err) == (0, "")
    table = rows(out.read_text(encoding="utf-8"))
    assert [(r["question"], r["expected"], r["first_source"]) for r in table] == [
        ("'=HYPERLINK(\"http://evil.example\",\"x\") orchard revenue rose by how much?", "'=SUM(A1).pdf p. 1",
         "'=SUM(A1).pdf"),
        ("'+what does the lighthouse keeper log at dawn?", "'+plus.pdf p. 1", "'+plus.pdf"),
        ("'-when do glaciers retreat in summer?", "'-minus.pdf p. 1", "'-minus.pdf"),
        ("'@how long does the violin maker season spruce wood?", "'@mention.pdf p. 1", "'@mention.pdf")]
    cells = [cell for r in table for cell in r.values()]
    assert sum(cell.startswith("'") for cell in cells) == 12
    assert not [cell for cell in cells if cell.startswith(FORMULA_STARTS)]
    assert [(r["rank"], r["hit@1"], r["mrr"], r["first_page"]) for r in table] == [("1", "1.0000", "1.0000", "1")] * 4
    assert {p: p.read_bytes() for p in before} == before



def test_a_format_is_one_row_of_formats_written_by_a_plain_run_and_by_a_table(tmp_path, capsys, monkeypatch):
    """A throwaway --tsv format registered as one row of outputs.FORMATS: the guard checks its path, a plain run
    writes it among its reports (in the table's order, before the run file), and an ablation's or sweep's table
    writes its table renderer's file; the same dispatch as --markdown's, --csv's and --html's."""
    import eval_retrieval as er
    from localrag.errors import EvalError
    from localrag.runs import outputs, rows as eval_runs
    from localrag.runs.defaults import EvalOptions

    @dataclasses.dataclass(frozen=True)
    class WithTsv(EvalOptions):
        tsv: str | None = None  # the option a --tsv flag would fill

    tsv = outputs.Format("--tsv", "report.tsv", lambda run, report, old: "".join(
        f"{q.query_id}\t{q.rank}\n" for q in report.per_query), lambda results, axes, reference: "".join(
        f"{r.name}\t{q.query_id}\t{q.rank}\n" for r in results for q in r.per_query), table_rank=3)
    monkeypatch.setattr(outputs, "FORMATS", (*outputs.FORMATS, tsv))
    options = WithTsv(**{**er.parse([]).flags(), "report": str(tmp_path / "r.txt"), "json": str(tmp_path / "r.json"),
                         "mode": "hybrid", "markdown": str(tmp_path / "r.md"), "tsv": str(tmp_path / "r.tsv")},
                      defaults=er.eval_defaults())
    assert ("--tsv", str(tmp_path / "r.tsv")) in outputs.output_paths(options)
    with pytest.raises(EvalError) as refused:
        outputs.check_outputs(options, outputs.output_paths(dataclasses.replace(options, tsv=options.report)))
    assert str(refused.value) == (f"--report {tmp_path}/r.txt and --tsv {tmp_path}/r.txt are the same file; one "
                                  f"would replace the other. Give them different paths")
    assert not (tmp_path / "r.txt").exists()

    result = dataclasses.replace(exact_result(1), status=ev.run_status([], [], []))
    written = outputs.write_outputs(result, options, [(str(tmp_path / "r.run"), "run\n")])
    assert written == [str(tmp_path / name) for name in ("r.txt", "r.json", "r.md", "r.tsv", "r.run")]
    assert (tmp_path / "r.tsv").read_text(encoding="utf-8") == "near\t2\nonly\t1\nexact\t1\nnever\tNone\n"

    dense = dataclasses.replace(exact_result(0), name="dense", status=result.status)
    table = eval_runs.write_table("table\n", [result, dense], tmp_path / "t.txt",
                                  dataclasses.replace(options, markdown=None, tsv=str(tmp_path / "t.tsv")))
    assert table == [str(tmp_path / "t.txt"), str(tmp_path / "t.tsv")]
    assert (tmp_path / "t.tsv").read_text(encoding="utf-8").splitlines() == [
        "hybrid\tnear\t2", "hybrid\tonly\t1", "hybrid\texact\t1", "hybrid\tnever\tNone",
        "dense\tnear\t3", "dense\tonly\tNone", "dense\texact\t1", "dense\tnever\tNone"]
    assert capsys.readouterr().out.startswith("table\n")
