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

import eval_report

SUITE_OUTPUT_DIR = "eval/suite_reports"  # where entry reports and the summary go
SUITE_METRICS = ["hit@5", "hit@10", "ndcg@10", "recall@100", "mrr"]  # summary columns, when an entry has them
RESERVED = {"name", "report", "json"}  # entry keys that are not passed through as flags
FORBIDDEN = {"suite", "compare", "output_name"}  # flags that make no sense inside an entry


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


def run_suite(path: str | Path, output_name: str | None, common: list[str],
              main: Callable[[list[str]], int], output_dir: str | Path = SUITE_OUTPUT_DIR) -> int:
    """Run every entry through `main`; write the summary table; non-zero if any entry failed."""
    entries = load_suite(path)
    out = Path(output_dir)
    suffix = f"-{output_name}" if output_name else ""
    rows, failed = [], []
    for entry in entries:
        report = Path(entry.get("report") or out / f"{entry['name']}{suffix}.txt")
        print(f"== {entry['name']}", file=sys.stderr, flush=True)
        buffer = io.StringIO()
        with redirect_stdout(buffer):
            code = main(entry_argv(entry, report, common))
        if code != 0:
            failed.append(entry["name"])
            continue
        data = json.loads(report.with_suffix(".json").read_text(encoding="utf-8"))
        rows.append({"name": entry["name"], "metrics": data["metrics"], "queries": data["num_queries"],
                     "report": report.as_posix()})
    keys = [k for k in SUITE_METRICS if any(k in r["metrics"] for r in rows)]
    lines = [f"localRAG suite: {Path(path).as_posix()}{' (' + output_name + ')' if output_name else ''}", "",
             *eval_report.render_table(rows, keys, label="entry", extra=["queries", "report"])]
    if failed:
        lines += ["", f"Failed entries (see the messages above): {', '.join(failed)}"]
    text = "\n".join(lines) + "\n"
    eval_report.write_text_atomic(out / f"summary{suffix}.txt", text)
    eval_report.write_text_atomic(out / f"summary{suffix}.md",
                                  "\n".join(eval_report.render_table(rows, keys, label="entry", markdown=True,
                                                                     extra=["queries"])) + "\n")
    print(text, end="")
    return 1 if failed else 0
