"""The HTML report (--html, localrag/evaluation/html_report.py and html_charts.py): one self-contained page per run.

The unit tests build results by hand: four questions at ranks 1, 3, 20 and none. The trap is in the Hit@k curve:
the question at rank 20 counts at k = 20 and nowhere before, the one not found at no k (0.25 up to k = 2, 0.5
from 3 to 19, 0.75 at 20, never 1). One CLI test writes a page from the tiny index.
"""
from __future__ import annotations

import re
import shutil

import pytest

import eval_retrieval as er
from conftest import TINY_GOLD
from localrag.evaluation import html_charts as charts
from localrag.evaluation.html_report import render_html, render_table_html
from localrag.evaluation.result import (Comparison, EvalResult, MetricComparison, QuestionResult, RankMove,
                                        Status)

LONG = ("How much did the company's operating margin change between the first and the second half of the fiscal "
        "year, and why?")  # longer than the text report's 70 characters: shown whole here
ODD = "Is <b>vega</b> & gamma the same?"  # must be escaped


def question(qid: str, text: str, rank: int | None, corpus: str = "options") -> QuestionResult:
    metrics = {"hit@5": float(rank is not None and rank <= 5), "hit@10": float(rank is not None and rank <= 10),
               "hit@20": float(rank is not None and rank <= 20), "mrr": 1 / rank if rank else 0.0}
    return QuestionResult(qid, text, rank, metrics, corpus, locations=({"source": "options.pdf", "page": 3},),
                          top=({"source": "weather.pdf", "page": 1, "score": 0.5},))


def result(ranks=(1, 3, 20, None), name: str = "hybrid", **more) -> EvalResult:
    texts = [ODD, "What is delta?", LONG, "Wie reagiert die Familie?"]
    per_query = tuple(question(f"q{n}", text, rank) for n, (text, rank) in enumerate(zip(texts, ranks), 1))
    keys = ("hit@5", "hit@10", "hit@20", "mrr")
    metrics = {k: sum(q.metrics[k] for q in per_query) / len(per_query) for k in keys}
    counts = {k: sum(int(q.metrics[k]) for q in per_query) for k in keys if k != "mrr"}
    return EvalResult(kind="goldset", title="goldset gold.csv", metrics=metrics, num_queries=4, per_query=per_query,
                      name=name, depth=more.pop("depth", 20), goldset="goldset gold.csv", generated="2026-01-02 03:04:05",
                      status=Status(0), counts=counts,
                      config=(("Goldset", "gold.csv (4 questions)"), ("Retrieval mode", name),
                              ("Chunking", "2000 characters")), **more)


def comparison() -> Comparison:
    metric = MetricComparison(4, 0.4, 0.5, 0.1, (-0.5, 0.75), 0.5, "no detectable difference", 40, 1.0, 0.0125)
    return Comparison("report old.json", 4, "", {"hit@5": metric}, 10_000, 0,
                      improved=(RankMove("q1", ODD, 4, 1),), worsened=(RankMove("q3", LONG, 2, 20, "fusion (RRF)"),),
                      family="1 metric")


def test_hit_curve_counts_rank_20_at_20_only_and_none_never():
    assert charts.hit_curve([1, 3, 20, None]) == [0.25, 0.25] + [0.5] * 17 + [0.75]
    assert charts.hit_curve([1, 3, 20, None], depth=5) == [0.25, 0.25, 0.5, 0.5, 0.5]
    assert charts.hit_curve([]) == [0.0] * 20


def test_a_shallow_run_s_curve_ends_at_its_depth():
    # --k 1,5: five results retrieved; Hit@6..20 were never measured, so the curve does not draw them.
    shallow = render_html(result((1, 3, None, None), depth=5))
    assert "<h3>Hit@k for k = 1…5</h3>" in shallow
    assert "<title>this run (hybrid): Hit@1 0.250, @3 0.500, @5 0.500</title>" in shallow  # no @10, no @20
    assert "has its curve end at its depth (--k): Hit@k beyond it was not measured" in shallow
    deep = render_html(result())
    assert "<h3>Hit@k for k = 1…20</h3>" in deep and "not measured" not in deep


def test_page_holds_the_metrics_whole_questions_escaped_and_no_outside_resource():
    page = render_html(result())
    assert page.startswith("<!DOCTYPE html>\n<html lang=\"en\">")
    assert "<td class=n>0.500 (2 of 4)</td>" in page  # Hit@5 and its count
    assert "<td class=n>0.346</td>" in page  # MRR: (1 + 1/3 + 1/20 + 0) / 4 = 0.3458
    assert LONG in page.replace("&#x27;", "'")
    assert "Is &lt;b&gt;vega&lt;/b&gt; &amp; gamma the same?" in page and "<b>vega" not in page
    assert page.count("<svg") == 1  # no comparison: the curve alone
    assert "<title>this run (hybrid): Hit@1 0.250, @3 0.500, @5 0.500, @10 0.500, @20 0.750</title>" in page
    assert "http" not in page and "<script" not in page and "<link" not in page and "url(" not in page.replace(
        "url(#hit-", "")
    # Every id of the page is unique (several charts share it).
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids))


def test_the_same_result_gives_the_same_bytes():
    assert render_html(result()) == render_html(result())
    first, again = result(), result()
    assert render_table_html([first, result(name="dense")], [("mode", ["hybrid", "dense"])]) == render_table_html(
        [again, result(name="dense")], [("mode", ["hybrid", "dense"])])


def test_a_comparison_adds_the_compared_curve_and_the_rank_changes():
    old = result((4, 3, 2, None))
    page = render_html(result(compare=comparison()), old)
    assert page.count("<svg") == 2  # the curves, the rank changes
    assert "<title>compared: report old.json: Hit@1 0.000, @3 0.500, @5 0.750, @10 0.750, @20 0.750</title>" in page
    assert "Rank changes (1 better, 1 worse)" in page
    assert "<title>Q1: Is &lt;b&gt;vega&lt;/b&gt; &amp; gamma the same? (rank 4 -&gt; 1, better)</title>" in page
    assert f"<title>Q2: {LONG} (rank 2 -&gt; 20, worse)</title>".replace("'", "&#x27;") in page
    # The table beside the chart names each question, coloured by its direction.
    assert ("<tr class=better><td>Q1</td><td>Is &lt;b&gt;vega&lt;/b&gt; &amp; gamma the same?</td><td class=n>4 → 1"
            "</td>") in page
    assert "<td class=n>2 → 20</td><td>fusion (RRF)</td></tr>" in page and "<tr class=worse>" in page
    # Without the old result the comparison's tables stay, its curve does not; without a comparison neither.
    alone = render_html(result(compare=comparison()))
    assert "compared: report old.json" not in alone and alone.count("<svg") == 2
    assert "Rank changes" not in render_html(result(), old)


def test_a_sweep_draws_a_heatmap_of_hit5_and_mrr_by_setting():
    rows = [result(ranks, name=f"chunk_size={size} mode={mode}")
            for (size, mode), ranks in zip([("500", "dense"), ("500", "bm25"), ("page", "dense")],
                                           [(1, 3, 20, None), (1, 1, 1, None), (2, None, None, None)])]
    page = render_table_html(rows, [("chunk_size", ["500", "page"]), ("mode", ["dense", "bm25"])])
    assert "<h1>localRAG sweep</h1>" in page and "<h2>Hit@5 and MRR by setting</h2>" in page
    assert "<title>Heatmap of Hit@5, MRR by setting</title>" in page
    assert "<title>chunk_size=500 mode=bm25: Hit@5 0.750</title>" in page
    assert "<title>chunk_size=page mode=dense: MRR 0.125</title>" in page
    assert "<title>chunk_size=page mode=bm25: Hit@5 not evaluated</title>" in page  # a row that is missing
    assert page.count("<svg") == 2  # the heatmap and the curves of the three rows
    # One axis: one row of cells.
    single = render_table_html(rows[:2], [("mode", ["dense", "bm25"])])
    assert "<title>mode=dense: Hit@5 0.500</title>" not in single  # the names are the rows'
    assert single.count('id="heat-cell0-0-') == 2 and 'id="heat-cell0-1-' not in single


def test_an_ablation_shows_its_table_and_every_rows_curve():
    rows = [result(ranks, name=name) for name, ranks in (("dense", (1, 3, 20, None)), ("bm25", (2, 2, None, None)))]
    page = render_table_html(rows, reference="dense (the configured retriever)")
    assert "<h1>localRAG ablation</h1>" in page and "heat-" not in page
    # The text report's columns (Hit@k by k, then MRR), the best of each column starred.
    assert ("<tr><td>bm25</td><td class=n>0.500 ★</td><td class=n>0.500 ★</td><td class=n>0.500</td><td class=n>"
            "0.250</td></tr>") in page
    assert "<title>dense: Hit@1 0.250, @3 0.500, @5 0.500, @10 0.500, @20 0.750</title>" in page
    assert "<title>bm25: Hit@1 0.000, @3 0.500, @5 0.500, @10 0.500, @20 0.500</title>" in page


def test_eval_retrieval_writes_the_page(tiny_index, tmp_path, capsys):
    docs, index = tiny_index
    gold = tmp_path / "gold.csv"
    gold.write_text("".join(TINY_GOLD.splitlines(keepends=True)[:6]), encoding="utf-8")  # without scans.pdf
    common = ["--goldset", gold, "--index", shutil.copytree(index, tmp_path / "index"), "--docs", docs, "--no-sync",
              "--no-rerank", "--quiet"]
    code = er.main([str(a) for a in [*common, "--report", tmp_path / "r.txt", "--html", tmp_path / "r.html"]])
    assert code == 0
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "How sensitive is the option value to volatility?" in page and page.count("<svg") == 1
    assert "http" not in page
    # The same path as another output: refused before any work, nothing written.
    code = er.main([str(a) for a in [*common, "--report", tmp_path / "s.txt", "--html", tmp_path / "s.txt"]])
    assert code == 2 and not (tmp_path / "s.txt").exists()
    assert capsys.readouterr().err.endswith(f"error: --report {tmp_path / 's.txt'} and --html {tmp_path / 's.txt'} "
                                            f"are the same file; one would replace the other. Give them different "
                                            f"paths\n")


@pytest.mark.parametrize("flag", ["--lint", "--suite"])
def test_html_beside_a_tool_that_writes_no_page_is_refused(tmp_path, capsys, flag):
    code = er.main([flag, *(["eval/suite.toml"] if flag == "--suite" else []), "--html", str(tmp_path / "p.html")])
    assert code == 2
    assert capsys.readouterr().err == (f"error: --html writes the page of an evaluation or of --compare OLD NEW, and "
                                       f"{flag} writes none; drop --html\n")


def test_compare_two_reports_writes_the_page_of_the_new_one(tmp_path, capsys):
    from localrag.evaluation.report import render_json
    from localrag.files import display_path

    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(render_json(result((4, 3, 2, None))), encoding="utf-8")
    new.write_text(render_json(result()), encoding="utf-8")
    assert er.main(["--compare", str(old), str(new), "--html", str(tmp_path / "c.html")]) == 0
    page = (tmp_path / "c.html").read_text(encoding="utf-8")
    assert "Rank changes (1 better, 1 worse)" in page and page.count("<svg") == 2
    assert f"<title>compared: {display_path(old)}: Hit@1 0.000, @3 0.500, @5 0.750, @10 0.750, @20 0.750</title>" in page
    capsys.readouterr()
    # The page may not replace a report it compares.
    assert er.main(["--compare", str(old), str(new), "--html", str(old)]) == 2
    assert capsys.readouterr().err == (f"error: --html {old} is the --compare report {old}; writing the report there "
                                       f"would replace it. Give --html another path\n")
