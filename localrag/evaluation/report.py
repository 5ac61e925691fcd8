"""Render evaluation results (`EvalResult`) as the committed plain-text report, Markdown tables and JSON.

Everything here is a pure function of a result; only the "Generated:" line holds the time, so two runs of one
configuration on one index differ in that line alone. The lines above it give the status: the exit code and,
when it is 1, each failed gate and why the run is degraded.
"""
from __future__ import annotations

import json
import textwrap
from typing import Any, Mapping, Sequence

from localrag.evaluation import diagnosis
from localrag.evaluation.judge import OK, status_note
from localrag.evaluation.metrics import parse_metric_key
from localrag.evaluation.result import Comparison, EvalResult, LeftOut, NotFound, QuestionResult, Status

QUESTION_LINE_WIDTH = 100  # a line of the report showing a question wraps at this width, the question never cut
NOTE_WIDTH = 116  # characters of a wrapped explanatory line under a table
LABEL_WIDTH = 20  # width of the label column in the configuration block
JUDGE_LABEL_WIDTH = 20  # width of the labels in the judge's summary block
DASH = "–"  # shown instead of a rank when nothing acceptable was retrieved
ABLATION_METRICS = ["hit@1", "hit@3", "hit@5", "ndcg@5", "ndcg@10", "mrr"]  # columns of the ablation table
# Metrics each sweep or ablation row is compared on with its reference row, when the run has them: one family.
SWEEP_COMPARE_METRICS = ["hit@5", "ndcg@10", "mrr"]
NEIGHBOUR_GAIN = 0.5  # NDCG's gain of a page only within the page tolerance of an expected location (on it: 1)
EXPECTED_SHOWN = 3  # expected locations named on a per-question line (a dataset query may have dozens)


def metric_label(key: str) -> str:
    """'hit@5' -> 'Hit@5', 'ndcg@10' -> 'NDCG@10', 'mrr' -> 'MRR'."""
    name, k = parse_metric_key(key)
    label = {"hit": "Hit", "recall": "Recall", "precision": "P", "ndcg": "NDCG", "mrr": "MRR"}[name]
    return label if k is None else f"{label}@{k}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def question_lines(prefix: str, text: str, width: int = QUESTION_LINE_WIDTH) -> list[str]:
    """`prefix` and the whole question (its whitespace collapsed), wrapped at `width` with each continuation line
    indented under the question's first character; words are never broken."""
    return textwrap.wrap(" ".join(text.split()), width=width, initial_indent=prefix,
                         subsequent_indent=" " * len(prefix), break_long_words=False,
                         break_on_hyphens=False) or [prefix.rstrip()]


def fmt(value: float | None, digits: int = 3) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def signed(value: float) -> str:
    """A difference with sign at 3 decimals, or at 2 significant digits where 3 decimals would show 0.000."""
    return f"{value:+.3f}" if value == 0 or round(value, 3) != 0 else f"{value:+.2g}"


def rank_text(rank: int | None) -> str:
    return DASH if rank is None else str(rank)


def location_text(loc: Mapping[str, Any]) -> str:
    """An expected or retrieved location: 'a.pdf p. 3', 'a.pdf p. 3-5', 'a.pdf', 'doc7 (grade 2)', 'doc7'."""
    if "doc_id" in loc:
        return f"{loc['doc_id']} (grade {loc['grade']})" if "grade" in loc else loc["doc_id"]
    if loc.get("page") is None:
        return loc["source"]
    return f"{loc['source']} p. {loc['page']}" + (f"-{loc['last_page']}" if loc.get("last_page") else "")


def render_status(status: Status) -> list[str]:
    """The status lines at the top of a report: the exit code and why (failed gates, degradations)."""
    if status.exit_code == 0:
        gates = f"every gate passed ({'; '.join(status.gates)})" if status.gates else "no gate set"
        return [f"Status: exit 0, evaluated; {gates}"]
    what = " and ".join(text for text, items in (("a gate failed", status.failed),
                                                 ("the run is degraded", status.degraded)) if items)
    return ([f"Status: exit {status.exit_code}, evaluated but {what}"]
            + [f"  gate failed: {m}" for m in status.failed] + [f"  degraded: {m}" for m in status.degraded])


def render_left_out(entries: Sequence[LeftOut]) -> list[str]:
    """Questions not scored because an expected page is invalid, each with its goldset lines and why."""
    lines = [f"Left out of the metrics ({len(entries)}; not counted in any average)"]
    for entry in entries:
        where = f"line{'s' if len(entry.lines) > 1 else ''} {', '.join(map(str, entry.lines))}"
        lines += question_lines("  - ", f"{entry.question} ({where})")
        lines += [f"    {reason}" for reason in entry.reasons]
    return lines


# ----------------------------------------------------------------------------- text report

def render_text(result: EvalResult) -> str:
    """The whole plain-text report."""
    lines = [f"localRAG retrieval evaluation: {result.title}", *render_status(result.status),
             f"Generated: {result.generated}", ""]
    lines += ["Configuration"] + [f"  {label + ':':<{LABEL_WIDTH}}{value}" for label, value in result.config]
    if result.messages:
        lines += ["", "Notes"] + [f"  {m}" for m in result.messages]
    lines += ["", *render_metrics(result)]
    if result.left_out:
        lines += ["", *render_left_out(result.left_out)]
    if result.per_corpus:
        lines += ["", *render_per_corpus(result)]
    if result.compare:
        lines += ["", *render_compare(result.compare)]
    if result.judge_lines:
        lines += ["", *result.judge_lines]
    if result.answer_lines:
        lines += ["", *result.answer_lines]
    losses = diagnosis.render_losses(result)
    if losses:
        lines += ["", *losses]
    lines += ["", *render_per_query(result)]
    if result.not_found:
        lines += ["", *render_not_found(result.not_found)]
    return "\n".join(lines).rstrip() + "\n"


def render_metrics(result: EvalResult) -> list[str]:
    """The Results block; a goldset scored with a page tolerance shows the exact-page figures beside its own and
    counts what only the tolerance made."""
    n = result.num_queries
    lines = ["Results"]
    if result.kind == "goldset":
        lines.append(f"  (Hit@k: share of questions with an acceptable location among the first k results; with one "
                     f"expected location per question it equals Recall@k. MRR over the first {result.depth}.)")
        if any(key.startswith("ndcg@") for key in result.metrics):
            lines.append(f"  (NDCG@k: each expected location counts once, where it scores best: gain 1 on the "
                         f"expected page, {NEIGHBOUR_GAIN:g} on a page only within the tolerance; ideal: every "
                         f"expected location at the top)")
    else:
        lines.append(f"  (document level: chunks collapsed to documents by best rank, then cut at k; "
                     f"MRR over the first {result.depth} documents)")
    width = max(len(metric_label(key)) for key in result.metrics) + 2

    def cell(metrics: Mapping[str, float], counts: Mapping[str, int], key: str) -> str:
        return fmt(metrics[key]) + (f"  ({counts[key]} of {n})" if key in counts else "")

    if not shows_exact(result):
        lines += [f"  {metric_label(key):<{width}}{cell(result.metrics, result.counts, key)}" for key in result.metrics]
        return lines
    tolerance = result.page_tolerance
    lines.append(f"  (±{tolerance}: an acceptable location is an expected page or a page within {tolerance} of it, as "
                 f"every other figure of this report counts; exact page: the expected page itself, in the same lists)")
    tolerant = {key: cell(result.metrics, result.counts, key) for key in result.metrics}
    column = max(len(f"±{tolerance} page{'s' if tolerance > 1 else ''}"), *map(len, tolerant.values())) + 3
    lines.append(f"  {'':<{width}}{f'±{tolerance} page' + ('s' if tolerance > 1 else ''):<{column}}exact page")
    lines += [f"  {metric_label(key):<{width}}{tolerant[key]:<{column}}"
              f"{cell(result.metrics_exact, result.counts_exact, key)}" for key in result.metrics]
    only = tolerance_only(result)
    hits = [(key, count) for key, count in only.items() if key != "mrr"]
    at_k = ", ".join(f"{plural(count, 'hit') if i == 0 else count} at {parse_metric_key(key)[1]}"
                     for i, (key, count) in enumerate(hits))
    lines.append(f"  Made only by the ±{tolerance} tolerance: {at_k}; the rank of {plural(only['mrr'], 'question')} "
                 f"(a neighbouring page ranked before the exact one: \"via\" under Per question)")
    return lines


def shows_exact(result: EvalResult) -> bool:
    """Whether the report shows exact-page figures beside the tolerant ones: a goldset scored with a tolerance
    above 0 (at 0 the two are one)."""
    return bool(result.metrics_exact) and bool(result.page_tolerance)


def tolerance_only(result: EvalResult) -> dict[str, int]:
    """How many hits only the page tolerance made: per Hit@k key the questions within k at the tolerance but not
    on an exact page, and under "mrr" the questions whose rank the tolerance made (a neighbouring page ranked
    before any exact one)."""
    questions = [q for q in result.per_query if q.exact is not None]
    out = {key: sum(1 for q in questions if q.rank is not None and q.rank <= k
                    and (q.exact.rank is None or q.exact.rank > k))
           for key, k in ((key, parse_metric_key(key)[1]) for key in result.metrics if key.startswith("hit@"))}
    out["mrr"] = sum(1 for q in questions if q.via_tolerance)
    return out


def render_per_corpus(result: EvalResult) -> list[str]:
    """The metrics of each corpus but NDCG (the table stays readable); with exact-page figures (shows_exact) each
    cell holds both: 'tolerant / exact'."""
    keys = [key for key in result.metrics if not key.startswith("ndcg@")]
    width = max(len("corpus"), *(len(c) for c in result.per_corpus))
    exact = shows_exact(result) and all(entry.metrics_exact for entry in result.per_corpus.values())
    column = 13 if exact else 8

    def value(entry, key: str) -> str:
        return f"{fmt(entry.metrics[key])} / {fmt(entry.metrics_exact[key])}" if exact else fmt(entry.metrics[key])

    header = f"  {'corpus':<{width}}  {'n':>4}" + "".join(f"  {metric_label(k):>{column}}" for k in keys)
    lines = [f"Per corpus (±{result.page_tolerance} / exact page)" if exact else "Per corpus", header]
    for corpus, entry in result.per_corpus.items():
        lines.append(f"  {corpus:<{width}}  {entry.n:>4}" + "".join(f"  {value(entry, k):>{column}}" for k in keys))
    return lines


def render_per_query(result: EvalResult) -> list[str]:
    """One line per question (rank, corpus, question), then where it was expected and, when it is not at rank
    1, what ranked first; a question lost within the categories' cutoff says at which stage."""
    rows = sorted(result.per_query, key=lambda q: (q.rank is None, q.rank or 0, q.question))
    with_corpus = any(q.corpus for q in rows)
    lines = [f"Per question ({len(rows)}, sorted by rank, then question)"]
    indent = " " * (8 + (14 if with_corpus else 0))
    for q in rows:
        corpus = f"  {q.corpus:<12}" if with_corpus else ""
        lines += question_lines(f"  {rank_text(q.rank):>4}{corpus}  ", q.question)
        lines.append(f"{indent}{where_line(q, result.stage_k, result.page_tolerance)}")
    return lines


def where_line(q: QuestionResult, k: int, tolerance: int | None = None) -> str:
    """'expected: a.pdf p. 3 · first: b.pdf p. 9 · rank 2 via p. 2 (±1); exact page p. 3 at rank 4 · lost:
    fusion (RRF)' for one question."""
    shown = [location_text(loc) for loc in q.locations[:EXPECTED_SHOWN]]
    more = f" and {len(q.locations) - EXPECTED_SHOWN} more" if len(q.locations) > EXPECTED_SHOWN else ""
    parts = [f"expected: {'; '.join(shown) or 'nothing'}{more}"]
    if q.rank != 1:
        parts.append(f"first: {location_text(q.top[0]) if q.top else 'nothing retrieved'}")
    if q.via_tolerance:
        parts.append(diagnosis.via_text(q, tolerance))
    reason = diagnosis.loss_reason(q.stages, k) if q.stages is not None and k else ""
    if reason:
        parts.append(f"lost at k = {k}: {reason}")
    return " · ".join(parts)


def render_not_found(entries: Sequence[NotFound]) -> list[str]:
    lines = [f"Never found ({len(entries)})"]
    for entry in entries:
        lines += question_lines("  - ", entry.question)
        lines.append(f"    expected: {'; '.join(location_text(loc) for loc in entry.locations)}")
        lines += [f"    hint: {hint}" for hint in entry.hints]
    return lines


def ci_label(level: float) -> str:
    """The interval's name at the level it inverts the test: '95% CI', '98.75% CI'."""
    return f"{100 * (1 - level):.4g}% CI"


def fmt_p(p: float | None) -> str:
    """A p-value at 3 decimals; '<0.001' below that; the dash when a report older than Holm has none."""
    if p is None:
        return DASH
    return "<0.001" if p < 0.0005 else f"{p:.3f}"


def method_note(compare: Comparison, tests: int) -> list[str]:
    """How the verdicts of a comparison (or a table of them) were reached: the lines under its table."""
    if not compare.family:  # a report written before comparisons were families
        text = (f"(paired bootstrap CI, {compare.resamples:,} resamples, seed {compare.seed}; two-sided paired "
                f"randomization test)")
    else:
        level = next(iter(compare.metrics.values())).level if compare.metrics else compare.alpha
        rule = (f"Holm's adjustment over {compare.family}: a verdict needs an adjusted p < {compare.alpha:g}; each "
                f"interval inverts the test at Holm's last level, {level:.4g}," if tests > 1 else
                f"a verdict needs p < {compare.alpha:g}; the interval inverts the test,")
        text = (f"(two-sided paired randomization test: every sign pattern where at most 16 questions differ, else "
                f"{compare.resamples:,} drawn with seed {compare.seed}; {rule} so it excludes 0 exactly when the "
                f"verdict says better or worse)")
    return textwrap.wrap(text, width=NOTE_WIDTH, initial_indent="  ", subsequent_indent="   ")


def render_compare(compare: Comparison) -> list[str]:
    """The comparison block: one line per metric with interval, raw and Holm-adjusted p-values and verdict, then
    the moved questions."""
    lines = [f"Compared to {compare.old_label} ({compare.n} common questions"
             + (f"; {compare.note}" if compare.note else "") + ")"]
    if compare.settings_changed:
        lines.append(f"  Settings that differ: {'; '.join(compare.settings_changed)}")
    elif compare.settings_note:
        lines.append(f"  Settings: {compare.settings_note}")
    level = next(iter(compare.metrics.values())).level if compare.metrics else compare.alpha
    ci_head = f"{ci_label(level)} of diff"
    lines.append(f"  {'metric':<10}{'old':>7}{'new':>7}{'diff':>8}  {ci_head:<18}{'p':>7}{'p Holm':>8}  verdict")
    for key, c in compare.metrics.items():
        ci = f"[{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]"
        needed = ""
        if c.verdict.startswith("no detectable") and c.needed_n and c.diff != 0:
            needed = f" (about {c.needed_n} questions would detect {signed(c.diff)})"
        lines.append(f"  {metric_label(key):<10}{c.old_mean:>7.3f}{c.new_mean:>7.3f}{c.diff:>+8.3f}  "
                     f"{ci:<18}{fmt_p(c.p_value):>7}{fmt_p(c.p_adjusted):>8}  {c.verdict}{needed}")
    lines += method_note(compare, len(compare.metrics))
    for title, moved in (("Better", compare.improved), ("Worse", compare.worsened)):
        lines.append(f"  {title} ({len(moved)}):" + ("" if moved else " none"))
        for m in moved:
            lines += question_lines(f"    {rank_text(m.old_rank):>4} -> {rank_text(m.new_rank):<4} ", m.question)
            if m.lost_at:
                lines.append(f"                 lost at: {m.lost_at}")
    return lines


def render_row_comparisons(reference: str, compared: Sequence[EvalResult], metrics: Sequence[str],
                           base: str) -> list[str]:
    """The block under a sweep or ablation table: each row compared with the `reference` row (column `base`) on
    `metrics`, every test of the table one family (Holm)."""
    compared = [r for r in compared if r.compare]
    metrics = [k for k in metrics if any(k in r.compare.metrics for r in compared)]
    if not compared or not metrics:
        return []
    c0 = compared[0].compare
    note = f"; {c0.note}" if any(r.compare.note for r in compared) else ""
    level = next(iter(c0.metrics.values())).level
    tests = sum(len(r.compare.metrics) for r in compared)
    lines = ["", f"Compared with {reference}, {c0.n} common questions{note}; family: {c0.family}"]
    width = max(len("configuration"), *(len(r.name) for r in compared))
    ci_head = f"{ci_label(level)} of diff"
    lines.append(f"  {'configuration':<{width}}  {'metric':<8}{base:>7}{'row':>7}{'diff':>8}  "
                 f"{ci_head:<18}{'p':>7}{'p Holm':>8}  verdict")
    for r in compared:
        for key in metrics:
            c = r.compare.metrics.get(key)
            if c is None:
                continue
            ci = f"[{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]"
            lines.append(f"  {r.name:<{width}}  {metric_label(key):<8}{c.old_mean:>7.3f}{c.new_mean:>7.3f}"
                         f"{c.diff:>+8.3f}  {ci:<18}{fmt_p(c.p_value):>7}{fmt_p(c.p_adjusted):>8}  {c.verdict}")
    lines += method_note(c0, tests)
    return lines


# ----------------------------------------------------------------------------- tables

def render_table(rows: Sequence[Mapping[str, Any]], keys: Sequence[str], *, label: str = "configuration",
                 markdown: bool = False, extra: Sequence[str] = (), mark_best: bool = True) -> list[str]:
    """Rows of {'name', 'metrics', ...extra} as a table; the best value of each metric column marked with * (unless
    not `mark_best`: rows that are one configuration counted two ways)."""
    best = {k: max((r["metrics"].get(k) for r in rows if r["metrics"].get(k) is not None), default=None)
            for k in keys}

    def cell(row, key):
        value = row["metrics"].get(key)
        is_best = (mark_best and len(rows) > 1 and value is not None and best[key] is not None
                   and abs(value - best[key]) < 1e-12)
        mark = "*" if is_best else " "
        return f"{fmt(value)}{mark}"

    headers = [label, *(metric_label(k) for k in keys), *extra]
    body = [[row["name"], *(cell(row, k) for k in keys), *(str(row.get(e, "")) for e in extra)] for row in rows]
    if markdown:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|"]
        out += ["| " + " | ".join(c.replace("*", " **best**").strip() if c.endswith("*") else c.strip()
                                  for c in line) + " |" for line in body]
        return out
    widths = [max(len(h), *(len(line[i]) for line in body)) for i, h in enumerate(headers)]
    out = ["  " + "  ".join(h.ljust(widths[0]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(headers))]
    out += ["  " + "  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(line))
            for line in body]
    return out


def render_markdown(result: EvalResult) -> str:
    """A pasteable Markdown summary of one evaluation: configuration and one metrics row."""
    lines = [f"### {result.title}", "", "| setting | value |", "|---|---|"]
    lines += [f"| {label} | {str(value).replace('|', '/')} |" for label, value in result.config]
    rows = [{"name": result.name, "metrics": result.metrics}]
    if shows_exact(result):
        rows[0]["name"] = f"{result.name} (±{result.page_tolerance} page)"
        rows.append({"name": f"{result.name} (exact page)", "metrics": result.metrics_exact})
    lines += ["", *render_table(rows, list(result.metrics), markdown=True, mark_best=False)]
    return "\n".join(lines) + "\n"


def render_json(result: EvalResult) -> str:
    """The JSON report: config, metrics and per_query, plus whatever else the run produced."""
    return json.dumps(result.to_json(), ensure_ascii=False, indent=1) + "\n"


# ----------------------------------------------------------------------------- ablation

def ablation_table(results: Sequence[EvalResult]) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows, metric keys) of the ablation table: one row per configuration, with its wall time."""
    present = [k for k in ABLATION_METRICS if any(k in r.metrics for r in results)]
    hits = {k for k in (*present, *results[0].metrics) if k.startswith("hit@")}
    keys = [*sorted(hits, key=lambda k: parse_metric_key(k)[1]), *(k for k in present if not k.startswith("hit@"))]
    rows = [{"name": r.name, "metrics": {k: r.metrics.get(k) for k in keys}, "seconds": f"{r.seconds:.1f}"}
            for r in results]
    return rows, keys


def render_ablation(results: Sequence[EvalResult], missing_rows: str, per_config_reports: str,
                    reference: str = "") -> str:
    """The ablation report: the settings all rows share, one table row per configuration, then each row compared
    with the `reference` row (the results' `compare`)."""
    first = results[0]
    rows, keys = ablation_table(results)
    shared = [row for row in first.config if row[0] not in ("Retrieval mode", "Reranker", "Final order by")]
    rows_line = f"Rows: {len(results)} configurations" + (f"; {missing_rows}" if missing_rows else "")
    lines = [f"localRAG ablation: {first.title}", *render_status(first.status),
             f"Generated: {first.generated}", rows_line, "", "Configuration",
             *[f"  {label + ':':<{LABEL_WIDTH}}{value}" for label, value in shared], "",
             "Results (* = best in column; seconds = wall time of the row, not part of the comparison)",
             *render_table(rows, keys, extra=["seconds"]),
             f"  total wall time of the {len(results)} rows: {sum(r.seconds for r in results):.1f} s",
             *(["", *notes] if (notes := union_notes(results)) else []),
             *render_row_comparisons(reference, results, SWEEP_COMPARE_METRICS, "ref"), "",
             f"Per-configuration reports: {per_config_reports}"]
    return "\n".join(lines) + "\n"


def union_notes(results: Sequence[EvalResult]) -> list[str]:
    """The ablation's line saying that its union row (no reranker) equals its dense row on every metric of every
    question, when it does; [] otherwise. Union is dense's candidates followed by BM25's new hits, so without a
    reranker it differs from dense only where dense's candidates do not fill the list."""
    rows = {r.name: r for r in results}
    union, dense = rows.get("union"), rows.get("dense")
    if union is None or dense is None:
        return []
    dense_metrics = {q.query_id: q.metrics for q in dense.per_query}
    if {q.query_id: q.metrics for q in union.per_query} != dense_metrics:
        return []
    return [f"union = dense here, on every metric of each of the {plural(len(dense_metrics), 'question')}: without "
            f"a reranker union is dense's candidates followed by BM25's new hits, which only count where dense's "
            f"candidates do not fill the list; union is the candidate pool a reranker reorders "
            f"(docs/settings-and-sweeps.md, \"Retrieval modes\")"]


# ----------------------------------------------------------------------------- sweep



def render_varied(results: Sequence[EvalResult], varied: Sequence[str],
                  values: Mapping[str, Sequence[Any]]) -> list[str]:
    """The settings that differ between a table's rows as a table: the row's name, then one column per setting
    (`values`: each setting's value per row, None where a row lacks it: the dash)."""
    cells = [["row", *varied]] + [[r.name, *(DASH if values[label][n] is None else str(values[label][n])
                                             for label in varied)] for n, r in enumerate(results)]
    widths = [max(len(row[column]) for row in cells) for column in range(len(cells[0]))]
    return ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]


def render_sweep(results: Sequence[EvalResult], axes: Sequence[tuple[str, Sequence[str]]], missing_rows: str,
                 per_row_reports: str) -> str:
    """The sweep report: the axes, the settings all rows share, one table row per configuration, then each row
    compared with the first by the paired test (the results' `compare`)."""
    first = results[0]
    rows, keys = ablation_table(results)
    labels = list(dict.fromkeys(label for r in results for label, _ in r.config))
    values = {label: [dict(r.config).get(label) for r in results] for label in labels}
    shared = [(label, vals[0]) for label, vals in values.items() if len(set(vals)) == 1]
    varied = [label for label, vals in values.items() if len(set(vals)) > 1]
    rows_line = f"Rows: {len(results)} configurations" + (f"; {missing_rows}" if missing_rows else "")
    lines = [f"localRAG sweep: {first.title}", *render_status(first.status), f"Generated: {first.generated}",
             "Axes: " + "; ".join(f"{axis} = {', '.join(vals)}" for axis, vals in axes), rows_line, "",
             "Configuration (shared by every row)",
             *[f"  {label + ':':<{LABEL_WIDTH}}{value}" for label, value in shared]]
    if varied:
        lines += ["", "Configuration (per row)", *render_varied(results, varied, values)]
    lines += ["", "Results (* = best in column; seconds = wall time of the row, including opening and syncing its "
                  "index on the first row that uses it)", *render_table(rows, keys, extra=["seconds"]),
              f"  total wall time of the {len(results)} rows: {sum(r.seconds for r in results):.1f} s"]
    lines += render_row_comparisons(f"the first row ({first.name})", results[1:], SWEEP_COMPARE_METRICS, "first")
    lines += ["", f"Per-row reports (each with its comparison with the first row): {per_row_reports}"]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- LLM judge

def judge_summary_line(label: str, value: str) -> str:
    """One aligned line of the judge's summary block."""
    return f"  {label:<{JUDGE_LABEL_WIDTH}}{value}"


def render_judge(judge: Mapping[str, Any]) -> list[str]:
    """The judge section from `localrag.evaluation.judge.judge_to_json`: the summary, then one line per question in
    verdict order. Holds nothing that changes between reruns of the same verdicts (no timings, no call counts)."""
    summary, rows = judge["summary"], judge["questions"]
    k = summary["k"]
    agree = summary["agreement"]
    lines = [
        f"LLM judge: model {summary['model']}, first {k} passages per question",
        judge_summary_line("judged questions", f"{summary['judged']} of {summary['questions']} (unreadable "
                                               f"{summary['unreadable']}, not judged {summary['not_judged']})"),
        judge_summary_line(f"Answer@{k}", f"{fmt(summary['answer_at_k'])} ({summary['answer_count']} of "
                                          f"{summary['judged']})"),
        judge_summary_line(f"MRR@{k}", fmt(summary["mrr"])),
        judge_summary_line(f"judge vs page@{k}", f"both {agree['both']}, judge only {agree['judge_only']}, "
                                                 f"page only {agree['page_only']}, neither {agree['neither']}"),
    ]
    if summary.get("stopped"):
        lines.append(f"  stopped: {summary['stopped']}")
    width = max((len(row["query_id"]) for row in rows), default=0)
    lines.append("")
    lines.append("  per question: first answering passage (judge), first page-matching rank (page)")
    for row in rows:
        note = row["reason"] if row["status"] == OK else status_note(row["status"], row["error"])
        prefix = (f"  {row['query_id']:<{width}}  judge {rank_text(row['first_answering']):>2}"
                  f"  page {rank_text(row['page_rank']):>2}  ")
        lines += question_lines(prefix, f"{row['question']} | {note}" if row["question"] else note)
    return lines
