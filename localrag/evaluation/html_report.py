"""The HTML report (--html): one self-contained page of a run, its tables and charts (html_charts), no script, no
stylesheet, font or image from elsewhere, every user text escaped.

A pure function of results, as the text report: the same result gives the same bytes (the only time on the page is
the result's own Generated line).
"""
from __future__ import annotations

import html
import itertools
from typing import Any, Sequence

from localrag.evaluation import diagnosis
from localrag.evaluation import html_charts as charts
from localrag.evaluation import report
from localrag.evaluation.result import Comparison, EvalResult, QuestionResult, Status

# The configuration lines shown under the title; the rest sit in a folded table.
KEY_CONFIG = ("Goldset", "Dataset", "Index", "Embedding model", "Retrieval mode", "Reranker", "Ranked by",
              "Page tolerance")
HEATMAP_METRICS = ("hit@5", "mrr")  # a sweep's heatmaps, when the run has them
MAX_CURVES = len(charts.PALETTE)  # rows of a sweep beyond this get no curve chart
CSS = """
* {box-sizing: border-box}
body {margin: 0; background: #f6f8fa; color: #24292f; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif}
main {max-width: 1180px; margin: 0 auto; padding: 20px 28px 40px; background: #fff}
h1 {font-size: 24px; margin: 0 0 2px}
h2 {font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px}
h3 {font-size: 15px; margin: 6px 0}
.sub {color: #57606a; margin: 0 0 10px}
.status {display: inline-block; padding: 3px 10px; border-radius: 6px; font-weight: 600}
.ok {background: #dafbe1; color: #1a7f37}
.fail {background: #ffebe9; color: #cf222e}
table {border-collapse: collapse; margin: 6px 0 10px; font-size: 14px}
th, td {padding: 4px 10px; border-bottom: 1px solid #eaeef2; text-align: left; vertical-align: top;
        overflow-wrap: break-word}
th {background: #f6f8fa; font-weight: 600}
td:first-child {white-space: nowrap}
td.n, th.n {text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap}
.kv th {background: none; color: #57606a; font-weight: 500}
.fixed {width: 100%; table-layout: fixed}
.fixed td {overflow-wrap: anywhere}
tr.r1 td:first-child {background: #dafbe1}
tr.rk td:first-child {background: #fff8c5}
tr.miss td:first-child {background: #ffebe9; color: #cf222e; font-weight: 600}
tr.better td:first-child, tr.better td:nth-child(3) {color: #1a7f37; font-weight: 600}
tr.worse td:first-child, tr.worse td:nth-child(3) {color: #cf222e; font-weight: 600}
.note {color: #57606a; font-size: 13px; max-width: 700px}
.row {display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start}
.row > table {flex: 1 1 420px}
.side {max-width: 400px}
svg {max-width: 100%; height: auto}
pre {background: #f6f8fa; padding: 10px; font-size: 12.5px; white-space: pre-wrap}
details {margin: 6px 0}
summary {cursor: pointer; color: #0969da}
"""


def e(value: Any) -> str:
    return html.escape(str(value))


def page(title: str, body: Sequence[str]) -> str:
    return "\n".join(["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
                      '<meta name="viewport" content="width=device-width, initial-scale=1">',
                      f"<title>{e(title)}</title>",
                      f"<style>{CSS.strip()}</style>", "</head>", "<body>", "<main>", *body,
                      '<p class="note">Written by eval_retrieval.py --html: one file, no script, nothing loaded from '
                      'elsewhere. Hover a curve, arrow or cell for what it stands for.</p>',
                      "</main>", "</body>", "</html>"]) + "\n"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = (),
          classes: Sequence[str] = (), css: str = "", widths: Sequence[int] = ()) -> str:
    """A table of escaped text; column numbers in `numeric` right-aligned; `classes`: one class per row; `widths`:
    each column's share in percent (a fixed layout: long file names wrap inside their column)."""
    def cells(tag: str, values: Sequence[Any]) -> str:
        return "".join(f'<{tag}{" class=n" if i in numeric else ""}>{e(v)}</{tag}>' for i, v in enumerate(values))

    body = [f"<tr{f' class={c}' if c else ''}>{cells('td', row)}</tr>"
            for row, c in itertools.zip_longest(rows, classes[:len(rows)], fillvalue="")]
    columns = ["<colgroup>" + "".join(f'<col style="width:{w}%">' for w in widths) + "</colgroup>"] if widths else []
    return "\n".join([f"<table{f' class={css}' if css else ''}>", *columns, f"<tr>{cells('th', headers)}</tr>",
                      *body, "</table>"])


def headline(kind: str, first: EvalResult, config: Sequence[tuple[str, str]]) -> list[str]:
    """Title, what was evaluated, the status and the key configuration lines (all of `config` folded below)."""
    key = [(label, value) for label, value in config if label in KEY_CONFIG]
    return [f"<h1>localRAG {e(kind)}</h1>", f'<p class="sub">{e(first.identity)}'
            + (f" · generated {e(first.generated)}" if first.generated else "") + "</p>",
            *status_block(first.status), table(["setting", "value"], key, css="kv"),
            f"<details><summary>All {len(config)} configuration lines</summary>"
            f"{table(['setting', 'value'], config, css='kv')}</details>"]


def status_block(status: Status | None) -> list[str]:
    if status is None:
        return []
    lines = report.render_status(status)
    return [f'<p><span class="status {"ok" if status.exit_code == 0 else "fail"}">{e(lines[0])}</span></p>',
            *([f"<pre>{e(chr(10).join(line.strip() for line in lines[1:]))}</pre>"] if lines[1:] else [])]


def render_html(result: EvalResult, old: EvalResult | None = None) -> str:
    """The page of one run: headline, notes, metrics, the Hit@k curve (with `old`'s, the compared run, when the
    result has a comparison), the comparison and its rank changes, per corpus, per question, never found."""
    body = headline("retrieval evaluation", result, result.config)
    if result.messages:
        body += ["<h2>Notes</h2>", "<ul>", *(f"<li>{e(m)}</li>" for m in result.messages), "</ul>"]
    body += ["<h2>Results</h2>", '<div class="row">', '<div class="side">', *metrics_table(result), "</div>",
             "<div>"]
    curves = [(f"this run ({result.name})" if result.name else "this run", hit_curve_of(result))]
    if result.compare and old is not None:
        curves.append((f"compared: {result.compare.old_label}", hit_curve_of(old)))
    body += [*curve_section(curves, compared=len(curves) > 1, heading="h3"), "</div>", "</div>"]
    if result.compare:
        body += compare_section(result.compare, depth_of(result))
    if result.per_corpus:
        body += ["<h2>Per corpus</h2>", *per_corpus_table(result)]
    for title, lines in (("Where the misses are lost", diagnosis.render_losses(result)[1:]),
                         ("LLM judge", result.judge_lines), ("Answers", result.answer_lines)):
        if lines:
            body += [f"<h2>{e(title)}</h2>", f"<pre>{e(chr(10).join(lines))}</pre>"]
    body += per_question(result)
    if result.not_found:
        rows = [(nf.question, "; ".join(map(report.location_text, nf.locations)), " ".join(nf.hints))
                for nf in result.not_found]
        body += [f"<h2>Never found ({len(rows)})</h2>", table(["question", "expected", "hints"], rows)]
    return page(f"localRAG: {result.title}", body)


def run_ranks(result: EvalResult) -> list[int | None]:
    return [q.rank for q in result.per_query]


def depth_of(result: EvalResult) -> int:
    """How deep the run retrieved: its depth, else (a result read back from JSON) its deepest cutoff."""
    cutoffs = [int(key.split("@")[1]) for key in result.metrics if "@" in key]
    return result.depth or max(cutoffs, default=charts.CURVE_DEPTH)


def metrics_table(result: EvalResult) -> list[str]:
    n = result.num_queries

    def cell(metrics: dict, counts: dict, key: str) -> str:
        return report.fmt(metrics[key]) + (f" ({counts[key]} of {n})" if key in counts else "")

    keys = list(result.metrics)
    if not report.shows_exact(result):
        return [table(["metric", "value"], [(report.metric_label(k), cell(result.metrics, result.counts, k))
                                            for k in keys], numeric=[1])]
    tol = result.page_tolerance
    rows = [(report.metric_label(k), cell(result.metrics, result.counts, k),
             cell(result.metrics_exact, result.counts_exact, k)) for k in keys]
    only = report.tolerance_only(result)
    hits = ", ".join(f"{count} at {key.split('@')[1]}" for key, count in only.items() if key != "mrr")
    return [table(["metric", f"±{tol} page{'s' if tol > 1 else ''}", "exact page"], rows, numeric=[1, 2]),
            f'<p class="note">±{tol}: an expected page or a page within {tol} of it counts, as every other figure '
            f"of this page; exact page: the expected page itself, in the same lists. Hits made only by the "
            f"tolerance: {e(hits)}; ranks made by it: {only['mrr']}.</p>"]


def hit_curve_of(result: EvalResult) -> list[float]:
    """A run's Hit@k for k = 1 to CURVE_DEPTH, or to its depth when it retrieved fewer: no k it did not look at."""
    return charts.hit_curve(run_ranks(result), min(depth_of(result), charts.CURVE_DEPTH))


def curve_section(curves: Sequence[tuple[str, Sequence[float]]], compared: bool, heading: str = "h2") -> list[str]:
    deepest = max(len(values) for _, values in curves)
    caption = (f"Hit@k for k = 1…{deepest} from each question's first acceptable rank; a question with nothing "
               f"acceptable among the results retrieved counts as a miss at every k.")
    if any(len(values) < charts.CURVE_DEPTH for _, values in curves):
        caption += (f" A run that retrieved fewer than {charts.CURVE_DEPTH} results per question has its curve end "
                    f"at its depth (--k): Hit@k beyond it was not measured.")
    if compared:
        caption += " Dashed grey: the compared run, over its own questions."
    return [f"<{heading}>Hit@k for k = 1…{deepest}</{heading}>",
            charts.curve_chart(curves, "hit", compared=compared),
            f'<p class="note">{e(caption)}</p>']


def compare_section(compare: Comparison, depth: int) -> list[str]:
    """The comparison's metric table, then its rank changes: a chart (arrows) beside a table naming each question."""
    rows = [(report.metric_label(k), f"{c.old_mean:.3f}", f"{c.new_mean:.3f}", f"{c.diff:+.3f}",
             f"[{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]", report.fmt_p(c.p_value), report.fmt_p(c.p_adjusted), c.verdict)
            for k, c in compare.metrics.items()]
    level = next(iter(compare.metrics.values())).level if compare.metrics else compare.alpha
    head = f"Compared to {compare.old_label} ({compare.n} common questions" + (
        f"; {compare.note}" if compare.note else "") + ")"
    out = ["<h2>Comparison</h2>", f"<p>{e(head)}</p>"]
    if compare.settings_changed:
        out.append(f"<p>Settings that differ: {e('; '.join(compare.settings_changed))}</p>")
    out += [table(["metric", "old", "new", "diff", f"{report.ci_label(level)} of diff", "p", "p Holm", "verdict"],
                  rows, numeric=[1, 2, 3, 5, 6]),
            f'<p class="note">{e(" ".join(line.strip() for line in report.method_note(compare, len(rows))))}</p>']
    moves = [(m, "better") for m in compare.improved] + [(m, "worse") for m in compare.worsened]
    out.append(f"<h2>Rank changes ({len(compare.improved)} better, {len(compare.worsened)} worse)</h2>")
    if not moves:
        return out + ["<p>No question changed its rank.</p>"]
    drawn = [(f"Q{n}", m.question, m.old_rank, m.new_rank) for n, (m, _) in enumerate(moves, 1)]
    rows = [(f"Q{n}", m.question, f"{report.rank_text(m.old_rank)} → {report.rank_text(m.new_rank)}", m.lost_at)
            for n, (m, _) in enumerate(moves, 1)]
    shown = "" if len(drawn) <= charts.MAX_MOVES else f" The chart draws the first {charts.MAX_MOVES}."
    return out + ['<div class="row">', f"<div>{charts.rank_change_chart(drawn, depth, 'moves')}</div>",
                  table(["", "question", "rank", "lost at"], rows, numeric=[2], classes=[why for _, why in moves]),
                  "</div>",
                  f'<p class="note">Green: better (a lower rank), red: worse; "–" and "not found": nothing '
                  f"acceptable retrieved.{shown}</p>"]


def per_corpus_table(result: EvalResult) -> list[str]:
    keys = list(result.metrics)
    exact = report.shows_exact(result) and all(c.metrics_exact for c in result.per_corpus.values())
    rows = [(corpus, c.n, *(f"{report.fmt(c.metrics[k])} / {report.fmt(c.metrics_exact[k])}" if exact
                            else report.fmt(c.metrics[k]) for k in keys)) for corpus, c in result.per_corpus.items()]
    note = [f'<p class="note">Each cell: ±{result.page_tolerance} page / exact page.</p>'] if exact else []
    return [table(["corpus", "n", *map(report.metric_label, keys)], rows, numeric=range(1, len(keys) + 2)), *note]


def per_question(result: EvalResult) -> list[str]:
    """Every question, sorted as the text report sorts them: rank, corpus, the whole question, where it was
    expected, what ranked first when it is not at rank 1, and why it ranked where it did."""
    questions = sorted(result.per_query, key=lambda q: (q.rank is None, q.rank or 0, q.question))
    with_corpus = any(q.corpus for q in questions)
    rows = [(report.rank_text(q.rank), *([q.corpus] if with_corpus else []), q.question, expected(q),
             report.location_text(q.top[0]) if q.rank != 1 and q.top else "", question_note(q, result))
            for q in questions]
    classes = ["r1" if q.rank == 1 else "miss" if q.rank is None else "rk" if q.rank > 5 else "" for q in questions]
    headers = ["rank", *(["corpus"] if with_corpus else []), "question", "expected", "first retrieved", "note"]
    return [f"<h2>Per question ({len(rows)}, by rank, then question)</h2>",
            table(headers, rows, numeric=[0], classes=classes, css="fixed",
                  widths=[5, 9, 31, 22, 19, 14] if with_corpus else [5, 36, 23, 21, 15])]


def expected(q: QuestionResult) -> str:
    shown = [report.location_text(loc) for loc in q.locations[:report.EXPECTED_SHOWN]]
    more = len(q.locations) - report.EXPECTED_SHOWN
    return "; ".join(shown) + (f" and {more} more" if more > 0 else "")


def question_note(q: QuestionResult, result: EvalResult) -> str:
    parts = [diagnosis.via_text(q, result.page_tolerance)] if q.via_tolerance else []
    if q.stages is not None and result.stage_k and (reason := diagnosis.loss_reason(q.stages, result.stage_k)):
        parts.append(f"lost at k = {result.stage_k}: {reason}")
    return " · ".join(parts)


def render_table_html(results: Sequence[EvalResult], axes: Sequence[tuple[str, Sequence[str]]] = (),
                      reference: str = "") -> str:
    """The page of an --ablation (no `axes`; rows compared with `reference`) or a --sweep (its `axes`, values as
    the row names write them): the table, a heatmap of a sweep, the Hit@k curves of every row, the comparisons."""
    first = results[0]
    labels = list(dict.fromkeys(label for r in results for label, _ in r.config))
    shared = [(label, dict(first.config)[label]) for label in labels
              if len({dict(r.config).get(label) for r in results}) == 1]
    body = headline("sweep" if axes else "ablation", first, shared)
    if axes:
        body.append("<p>Axes: " + e("; ".join(f"{axis} = {', '.join(values)}" for axis, values in axes)) + "</p>")
    rows, keys = report.ablation_table(results)
    best = {k: max((r["metrics"][k] for r in rows if r["metrics"][k] is not None), default=None) for k in keys}
    cells = [[row["name"], *(report.fmt(row["metrics"][k]) + (" ★" if len(rows) > 1 and row["metrics"][k] == best[k]
                                                              and best[k] is not None else "") for k in keys)]
             for row in rows]
    body += ["<h2>Results</h2>", table(["configuration", *map(report.metric_label, keys)], cells,
                                       numeric=range(1, len(keys) + 1)), '<p class="note">★ best in its column.</p>']
    if axes:
        body += heatmap(results, axes, keys)
    if len(results) <= MAX_CURVES:
        body += curve_section([(r.name or f"row {n}", hit_curve_of(r)) for n, r in enumerate(results, 1)], False)
    compared = report.render_row_comparisons(reference or f"the first row ({first.name})",
                                             results if not axes else results[1:], report.SWEEP_COMPARE_METRICS,
                                             "ref" if not axes else "first")
    if compared:
        body += ["<h2>Each row against the reference</h2>", f"<pre>{e(chr(10).join(compared[1:]))}</pre>"]
    return page(f"localRAG {'sweep' if axes else 'ablation'}: {first.title}", body)


def heatmap(results: Sequence[EvalResult], axes: Sequence[tuple[str, Sequence[str]]], keys: Sequence[str]) -> list[str]:
    """A sweep's heatmaps: the last axis across, every combination of the others down (one row for one axis)."""
    metrics = [k for k in HEATMAP_METRICS if k in keys] or list(keys[:2])
    by_name = {r.name: r for r in results}
    across = axes[-1]
    down = list(itertools.product(*(values for _, values in axes[:-1])))
    names = [[" ".join(f"{a}={v}" for (a, _), v in zip(axes, (*combo, value))) for value in across[1]]
             for combo in down]
    panels = [(report.metric_label(k), [[by_name[n].metrics.get(k) if n in by_name else None for n in row]
                                        for row in names]) for k in metrics]
    rows = [" · ".join(combo) for combo in down]
    chart = charts.heatmap_chart(panels, rows, across[1], (" · ".join(a for a, _ in axes[:-1]), across[0]), names,
                                 "heat")
    return [f"<h2>{e(' and '.join(label for label, _ in panels))} by setting</h2>", chart,
            '<p class="note">Hover a cell for its configuration; grey: not evaluated.</p>']
