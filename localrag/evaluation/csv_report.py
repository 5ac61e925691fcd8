"""The per-question CSV (--csv FILE): one row per question, and per configuration in an ablation or sweep, with
its rank, exact-page rank, every metric of the report and the rank at each stage, for a spreadsheet.

Comma-separated, quoted where needed (RFC 4180), UTF-8 with a byte order mark so that a spreadsheet reads umlauts
right; an empty cell is "not retrieved" (no rank) or "no such stage in this run". Written by the one CSV writer
(files.csv_text): a question or file name that a spreadsheet would take for a formula gets a leading quote, numbers
stay numbers.
"""
from __future__ import annotations

from typing import Sequence

from localrag.evaluation.report import location_text
from localrag.evaluation.result import EvalResult
from localrag.files import csv_text

STAGE_ORDER = ("dense", "bm25", "union", "rrf", "convex", "prior", "rerank", "final")  # stage columns, in this order


def stage_names(results: Sequence[EvalResult]) -> list[str]:
    """Every stage any question of `results` has a rank for, in pipeline order (unknown names last, sorted)."""
    names = {name for r in results for q in r.per_query if q.stages for name in q.stages.ranks}
    return [n for n in STAGE_ORDER if n in names] + sorted(names - set(STAGE_ORDER))


def cell(value: object) -> str:
    """A CSV cell: '' for None, a metric with 4 decimals, anything else as text."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def render_csv(results: Sequence[EvalResult]) -> str:
    """The CSV text of `results` (one configuration, or an ablation's or sweep's rows, each named in the
    configuration column); questions in each result's own order."""
    keys = list(dict.fromkeys(key for r in results for key in r.metrics))
    stages = stage_names(results)
    exact = any(q.exact is not None for r in results for q in r.per_query)
    header = (["configuration"] if len(results) > 1 else []) + ["query_id", "corpus", "question", "expected", "rank"]
    header += (["rank_exact_page"] if exact else []) + keys + [f"rank_{name}" for name in stages]
    header += ["first_source", "first_page"]
    table: list[list[object]] = [header]
    for r in results:
        for q in r.per_query:
            first = q.top[0] if q.top else {}
            ranks = q.stages.ranks if q.stages else {}
            row = ([r.name] if len(results) > 1 else []) + [q.query_id, q.corpus, " ".join(q.question.split()),
                                                            "; ".join(location_text(loc) for loc in q.locations),
                                                            q.rank]
            row += ([q.exact.rank if q.exact else None] if exact else []) + [q.metrics.get(key) for key in keys]
            row += [ranks.get(name) for name in stages] + [first.get("source", first.get("doc_id")), first.get("page")]
            table.append([cell(value) for value in row])
    return "\ufeff" + csv_text(table, line_end="\r\n")
