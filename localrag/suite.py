"""Run several evaluations from one TOML file (`eval_retrieval.py --suite eval/suite.toml`).

Each `[[entry]]` names a goldset or a dataset plus any eval_retrieval.py options (`mode = "dense"`,
`no_rerank = true`, `max_queries = 100`, ...). One report per entry, then a summary table across entries.
"""
from __future__ import annotations

import io
import json
import sys
import tomllib
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, Callable

from localrag import report as eval_report
from localrag.files import write_text_atomic

SUITE_OUTPUT_DIR = "eval/suite_reports"  # where entry reports and the summary go
SUITE_METRICS = ["hit@5", "hit@10", "ndcg@10", "recall@100", "mrr"]  # summary columns, when an entry has them
RESERVED = {"name", "report", "json"}  # entry keys that are not passed through as flags
# Flags that make no sense inside an entry: other suites, or runs that write no JSON report with one metrics row.
FORBIDDEN = {"suite", "compare", "output_name", "ablation", "lint", "generate"}


class SuiteError(Exception):
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


def entry_argv(entry: dict[str, Any], report: Path, common: list[str]) -> list[str]:
    """eval_retrieval.py arguments for one entry: its keys as flags, then the report paths."""
    argv: list[str] = []
    for key, value in entry.items():
        if key in RESERVED:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False:
            continue
        elif isinstance(value, list):
            argv += [flag, ",".join(str(v) for v in value)]
        else:
            argv += [flag, str(value)]
    return argv + common + ["--report", str(report), "--json", str(report.with_suffix(".json"))]


def report_path(entry: dict[str, Any], output_dir: Path, suffix: str) -> Path:
    """Where an entry's report goes: its `report`, else `<output_dir>/<name>.txt`; `suffix` before the extension."""
    report = Path(entry["report"]) if entry.get("report") else output_dir / f"{entry['name']}.txt"
    return report.with_name(f"{report.stem}{suffix}{report.suffix}")


def file_identity(path: Path) -> tuple[int, int] | None:
    """(inode, modification time in ns) of a file, None if it does not exist: changes when the file is rewritten."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def run_entry(entry: dict[str, Any], report: Path, common: list[str],
              main: Callable[[list[str]], int]) -> dict[str, Any] | None:
    """The JSON report of one entry run through `main`, or None (with a message on stderr) if it failed.

    Exit code 1 still wrote a report (a gate failed or the run is degraded): its JSON is returned, with its status.
    """
    json_path = report.with_suffix(".json")
    # The previous JSON report stays (the entry compares with it), but must not pass for this run's result.
    before = file_identity(json_path)
    with redirect_stdout(io.StringIO()):
        try:
            code = main(entry_argv(entry, report, common))
        except SystemExit as exc:  # argparse rejects an unknown key; the other entries still run
            code = exc.code if isinstance(exc.code, int) else 2
    if code not in (0, 1):
        return None
    try:
        if file_identity(json_path) == before:
            raise FileNotFoundError("the run did not write it")
        return json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"error: entry {entry['name']!r} wrote no readable JSON report at {json_path} ({exc})",
              file=sys.stderr)
        return None


def run_suite(path: str | Path, output_name: str | None, common: list[str],
              main: Callable[[list[str]], int], output_dir: str | Path | None = None) -> int:
    """Run every entry through `main`; write the summary table; non-zero if any entry failed."""
    entries = load_suite(path)
    out = Path(SUITE_OUTPUT_DIR if output_dir is None else output_dir)  # read at call time, so tests can move it
    suffix = f"-{output_name}" if output_name else ""
    rows, failed, degraded = [], [], []
    for entry in entries:
        report = report_path(entry, out, suffix)
        print(f"== {entry['name']}", file=sys.stderr, flush=True)
        data = run_entry(entry, report, common, main)
        if data is None:
            failed.append(entry["name"])
            continue
        rows.append({"name": entry["name"], "metrics": data["metrics"], "queries": data["num_queries"],
                     "report": report.as_posix()})
        if data.get("status", {}).get("exit_code", 0) != 0:
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
    write_text_atomic(out / f"summary{suffix}.txt", text)
    markdown = eval_report.render_table(rows, keys, label="entry", markdown=True, extra=["queries"])
    write_text_atomic(out / f"summary{suffix}.md", "\n".join(markdown) + "\n")
    print(text, end="")
    return 1 if failed or degraded else 0
