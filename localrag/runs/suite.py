"""Run several evaluations from one TOML file (`eval_retrieval.py --suite eval/suite.toml`).

Each `[[entry]]` names a goldset or a dataset plus any eval_retrieval.py options (`mode = "dense"`,
`no_rerank = true`, `max_queries = 100`, `sweep = ["chunk_size=500,1000", "mode=dense,hybrid"]`, ...). One
report per entry (a sweep's table), then a summary table across entries (a sweep entry: one row per configuration).
Entries run in this process through the function eval_retrieval.py hands in, which returns each result.
"""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import AbstractSet as Set, Any, Callable, Mapping

from localrag.evaluation import report as eval_report
from localrag.errors import RAGError
from localrag.files import write_texts_atomic
from localrag.runs.outputs import write_error_advice
from localrag.evaluation.result import EXIT_OK, EvalResult

SUITE_METRICS = ["hit@5", "hit@10", "ndcg@10", "recall@100", "mrr"]  # summary columns, when an entry has them
RESERVED = {"name", "report", "json"}  # entry keys of the suite itself, not eval_retrieval.py options
# Flags that make no sense inside an entry: other suites, or runs that write no JSON report with one metrics row.
FORBIDDEN = {"suite", "compare", "output_name", "ablation", "lint", "generate"}
# evaluate(options, report path) -> the entry's result with its status, a sweep entry's results (one per row; its
# table is at the report path), or None (the reason on stderr) when it evaluated nothing; eval_retrieval.py passes
# the function in.
EvaluateEntry = Callable[[dict[str, Any], Path], EvalResult | list[EvalResult] | None]


class SuiteError(RAGError):
    """A malformed suite file; the message names the entry and key."""


def load_suite(path: str | Path) -> list[dict[str, Any]]:
    """The entries of a suite file, checked: each has a unique name and a goldset or a dataset."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuiteError(f"suite file {path} does not exist; see eval/suite.toml for an example") from None
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"suite file {path} is not valid TOML: {exc}") from None
    entries = data.get("entry")
    if not isinstance(entries, list) or not entries:
        raise SuiteError(f"suite file {path} has no [[entry]] tables; each entry needs name and goldset or dataset")
    seen: set[str] = set()
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            raise SuiteError(f"entry {number} in {path} is not a table but {entry!r}; write each entry as [[entry]] "
                             f"followed by key = value lines")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip() or "/" in name:
            raise SuiteError(f"entry {number} in {path} needs a name (text without '/'), got {name!r}")
        if name in seen:
            raise SuiteError(f"entry name {name!r} appears twice in {path}; names must be unique")
        seen.add(name)
        if ("goldset" in entry) == ("dataset" in entry):
            raise SuiteError(f"entry {name!r} in {path} needs exactly one of goldset = ... or dataset = ...")
        bad = FORBIDDEN & set(entry)
        if bad:
            raise SuiteError(f"entry {name!r} in {path} uses {', '.join(sorted(bad))}, which only works on the "
                             f"command line")
    return entries


def entry_options(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry's eval_retrieval.py options: its keys other than name, report and json."""
    return {key: value for key, value in entry.items() if key not in RESERVED}


def report_path(entry: dict[str, Any], output_dir: Path, suffix: str) -> Path:
    """Where an entry's report goes: its `report`, else `<output_dir>/<name>.txt`; `suffix` before the extension."""
    report = Path(entry["report"]) if entry.get("report") else output_dir / f"{entry['name']}.txt"
    return report.with_name(f"{report.stem}{suffix}{report.suffix}")


def run_suite(path: str | Path, output_name: str | None, evaluate: EvaluateEntry,
              output_dir: str | Path, written: list[str] | None = None) -> int:
    """Run every entry through `evaluate`; write the summary table (its paths added to `written`); non-zero if any
    entry failed."""
    entries = load_suite(path)
    out = Path(output_dir)
    suffix = f"-{output_name}" if output_name else ""
    summaries = (out / f"summary{suffix}.txt", out / f"summary{suffix}.md")
    for summary in summaries:  # refused before the entries run, not when the summary is written after them
        if summary.is_dir():
            raise SuiteError(f"the suite's summary {summary} is a folder, not a file; move that folder, or give "
                             f"another --output-name")
    rows, failed, degraded = [], [], []
    for entry in entries:
        report = report_path(entry, out, suffix)
        print(f"== {entry['name']}", file=sys.stderr, flush=True)
        result = evaluate(entry_options(entry), report)
        if result is None:
            failed.append(entry["name"])
            continue
        # A sweep entry gives one row per configuration, each named after the entry and the configuration.
        for row in result if isinstance(result, list) else [result]:
            name = f"{entry['name']} {row.name}" if isinstance(result, list) else entry["name"]
            rows.append({"name": name, "metrics": row.metrics, "queries": row.num_queries,
                         "report": report.as_posix()})
        if any(row.status.exit_code != EXIT_OK for row in (result if isinstance(result, list) else [result])):
            degraded.append(entry["name"])
    keys = [k for k in SUITE_METRICS if any(k in r["metrics"] for r in rows)]
    table = eval_report.render_table(rows, keys, label="entry", extra=["queries", "report"]) if rows else \
        ["  no entry finished"]
    lines = [f"localRAG suite: {Path(path).as_posix()}{' (' + output_name + ')' if output_name else ''}", "",
             *table]
    if failed:
        lines += ["", f"Failed entries (see the messages above): {', '.join(failed)}"]
    if degraded:
        lines += ["", f"Entries with a failed gate or a degraded run (see the status in their reports): "
                      f"{', '.join(degraded)}"]
    text = "\n".join(lines) + "\n"
    markdown = eval_report.render_table(rows, keys, label="entry", markdown=True, extra=["queries"])
    try:
        write_texts_atomic([(summaries[0], text), (summaries[1], "\n".join(markdown) + "\n")])
    except OSError as exc:
        raise SuiteError(f"the suite's summary could not be written: {exc.filename}: {exc.strerror or exc}; the "
                         f"entries' reports are written. {write_error_advice(exc)}") from None
    if written is not None:
        written += [str(summary) for summary in summaries]
    print(text, end="")
    return 1 if failed or degraded else 0


def option_flags(options: Mapping[str, Any], repeatable: Set[str]) -> list[str]:
    """Suite entry options as command-line flags: `key = true` is --key, false leaves it out, a list is joined
    with commas (`k = [5, 10]` is --k 5,10), except for a `repeatable` flag (by option name), which is repeated
    (`sweep = ["chunk_size=500,1000", "mode=dense,hybrid"]`)."""
    flags: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif isinstance(value, list) and key in repeatable:
            for item in value:
                flags += [flag, str(item)]
        elif isinstance(value, list):
            flags += [flag, ",".join(str(v) for v in value)]
        elif value is not False:
            flags += [flag, str(value)]
    return flags
