"""Where every output of an evaluation goes, and what it may not overwrite.

The committed report only for the default goldset, index and settings; runs of other settings under the runs
folder, named after the settings given; another goldset's report beside it. No output may replace an input, a
cache or another output of the run, or land inside an index, docs or dataset folder. Reports are written all
or none (files.write_texts_atomic).
"""
from __future__ import annotations

import argparse
import dataclasses
import errno
import json
from pathlib import Path
from typing import Sequence

from localrag import diagnose
from localrag import report as eval_report
from localrag.errors import EvalError
from localrag.files import display_path, same_path, write_texts_atomic
from localrag.manifest import local_followed_paths
from localrag.result import EvalResult
from localrag.run_plan import format_setting, requested_settings, slug

DETAILS_SUFFIX = ".details.md"  # the details file beside a goldset report: baseline.txt -> baseline.details.md
QRELS_SUFFIX = ".qrels"  # a goldset run's qrels beside its --run-file: r.run -> r.run.qrels (without --qrels-file)
SQLITE_SIDE_FILES = ("-journal", "-wal", "-shm")  # files SQLite keeps beside the query vector cache
INDEX_MARKERS = ("index_info.json", "chroma.sqlite3")  # a folder holding one of these is an index folder
# A file name each output flag's message suggests when the path given is a folder.
EXAMPLE_NAMES = {"--report": "report.txt", "--json": "report.json", "--markdown": "report.md", "--run-file": "run.trec",
                 "--out": "goldset.csv"}


def is_default_setup(args: argparse.Namespace) -> bool:
    """Whether this run evaluates the default goldset on the default index (the one the committed report is of)."""
    # Without --docs the index's own folder is synced: for the default index that is DOCS_PATH.
    d = args.defaults
    return (not args.dataset and same_path(args.goldset, d.goldset)
            and (args.docs is None or same_path(args.docs, d.docs))
            and (args.index is None or same_path(args.index, d.index))
            and args.chroma_url == d.chroma_url)


def default_report_path(args: argparse.Namespace, suffix: str | None = None) -> str:
    """The report path without --report: the committed one only for the default goldset, index and settings;
    the default goldset under other index or retrieval settings, --ablation and --sweep under the runs folder;
    another goldset or index gets one beside the goldset, named after it; a dataset one under its folder. Settings
    given as flags add themselves to the name (eval/runs/baseline.chunk_size-800.mode-dense.txt)."""
    # The settings given name the report: a run of other settings never replaces the committed baseline.
    suffix = run_suffix(args) if suffix is None else suffix
    d = args.defaults
    sweep = bool(getattr(args, "sweep_axes", None))  # set by resolve_args
    if args.dataset:
        table = "-sweep" if sweep else "-ablation" if args.ablation else ""
        name = f"{Path(args.dataset).resolve().name}-{args.split}{table}{suffix}.txt"
        return str(Path(d.dataset_report_dir) / name)
    if is_default_setup(args):
        if not (sweep or args.ablation or suffix):
            return d.report
        path = Path(d.sweep_report if sweep else d.ablation_report if args.ablation
                    else Path(d.runs_dir) / Path(d.report).name)
        return str(path.with_name(path.stem + suffix + path.suffix))
    goldset = Path(args.goldset)
    table = ".sweep" if sweep else ".ablation" if args.ablation else d.goldset_report_suffix
    return str(goldset.with_name(f"{goldset.stem}{table}{suffix}.txt"))


def resolve_report_paths(args: argparse.Namespace) -> None:
    """Fill in the report paths the options left out: `args.report` and `args.json`, and
    `args.settings_base_json` (the JSON report a run of other settings is compared with: the run of its retrieval
    settings on the evaluated index, else the run of the default settings) and `args.compare_file` (where the
    committed baseline's comparison goes instead of into the baseline), or None."""
    args.settings_base_json = None
    args.compare_file = None
    if args.report is None:
        args.report = default_report_path(args)
        if args.report == args.defaults.report and not (args.ablation or args.sweep_axes):
            args.compare_file = args.defaults.compare_path
        if run_suffix(args) and args.json is None:
            # Other index settings: the same retrieval settings on the evaluated index, if that run exists; else the
            # run of the default settings (the committed baseline for the default goldset and index).
            bases = [str(Path(default_report_path(args, suffix=suffix)).with_suffix(".json"))
                     for suffix in dict.fromkeys((retrieval_suffix(args) if settings_suffix(args) else "", ""))]
            args.settings_base_json = next((base for base in bases if Path(base).exists()), bases[-1])
    if args.json is None:
        args.json = str(Path(args.report).with_suffix(".json"))


def is_committed_baseline(args: argparse.Namespace) -> bool:
    """Whether this run's report or JSON report is the committed baseline's (by default or by --report/--json)."""
    report = Path(args.defaults.report)
    return same_path(args.report, report) or same_path(args.json, report.with_suffix(".json"))


def beside_report_path(args: argparse.Namespace, name: str) -> str:
    """Where a run's report goes when it must not replace the one at `args.report`: for the committed baseline
    the runs folder (eval/runs/baseline.reranker-on.txt, with the settings given), else beside the report, `name`
    added (r.judge-incomplete.txt)."""
    if is_committed_baseline(args):
        report = Path(args.defaults.report)
        return str(Path(args.defaults.runs_dir) / f"{report.stem}{run_suffix(args)}.{name}{report.suffix}")
    report = Path(args.report)
    return str(report.with_name(f"{report.stem}.{name}{report.suffix}"))


def settings_suffix(args: argparse.Namespace) -> str:
    """What the default report name adds for the index settings given: '.chunk_size-800.loader-pypdf'."""
    return "".join(f".{key}-{slug(format_setting(value))}" for key, value in requested_settings(args).items()
                   if key not in getattr(args, "profile_keys", ()))


def retrieval_suffix(args: argparse.Namespace) -> str:
    """What the default report name adds for retrieval and scoring settings other than the defaults:
    '.mode-dense.rerank-off.rrf_k-60'."""
    d, r = args.defaults, args.defaults.retriever
    given = [("profile", getattr(args, "profile", None)),
             ("mode", args.mode if args.mode != r["retrieval_mode"] else None),
             ("rerank", "off" if args.no_rerank else None), ("rerank_model", args.rerank_model),
             ("rrf_k", args.rrf_k if args.rrf_k not in (None, r["rrf_k"]) else None),
             ("fusion", args.fusion if args.fusion not in (None, r["fusion"]) else None),
             ("dense_weight", f"{args.dense_weight:g}" if args.dense_weight not in (None, r["dense_weight"])
              else None),
             ("document_prior", f"{args.document_prior:g}"
              if args.document_prior not in (None, r["document_prior"]) else None),
             ("rank_by", args.rank_by if args.rank_by != r["rank_by"] else None),
             ("ivf_probes", args.ivf_probes if args.ivf_probes != r["ivf_probes"] else None),
             ("ivf_min_chunks", args.ivf_min_chunks), ("ivf_lists", args.ivf_lists),
             ("k", args.k and args.k.replace(",", "_")),
             ("query_instructions", "on" if args.query_instructions != d.use_query_instructions else None),
             ("page_tolerance", args.page_tolerance if args.page_tolerance != d.page_tolerance else None)]
    skipped = getattr(args, "profile_keys", set())
    return "".join(f".{key}-{slug(str(value))}" for key, value in given if value is not None and key not in skipped)


def run_suffix(args: argparse.Namespace) -> str:
    """The default report name's addition for every setting given: index settings, then retrieval ones."""
    return settings_suffix(args) + retrieval_suffix(args)


def output_paths(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(flag, path) of every file an evaluation writes."""
    details = None if args.dataset else details_path(args.report)
    return [(flag, path) for flag, path in (("--report", args.report), ("--json", args.json),
                                            ("--markdown", args.markdown), ("--run-file", args.run_file),
                                            ("--qrels-file", qrels_path(args)),
                                            ("the details file of --report", details),
                                            ("the comparison file", getattr(args, "compare_file", None))) if path]


def qrels_path(args: argparse.Namespace) -> str | None:
    """Where a goldset run's qrels go: --qrels-file, else beside --run-file (QRELS_SUFFIX appended); None without
    --run-file, and for a dataset (its qrels are the dataset's)."""
    if args.dataset or not args.run_file:
        return None
    return getattr(args, "qrels_file", None) or args.run_file + QRELS_SUFFIX


def details_path(report: str | Path) -> str:
    """The details file beside a goldset report: eval/baseline.txt -> eval/baseline.details.md."""
    report = Path(report)
    return str(report.with_name(report.stem + DETAILS_SUFFIX))


def input_paths(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(what, path) of every file a run reads or keeps and an output must not replace: its inputs, and the caches
    whether or not this run uses them (the judge cache is committed; the query cache holds every earlier run's
    vectors)."""
    inputs = [("--compare-to file", args.compare_to)]
    if args.dataset:
        inputs += [("--dataset file", str(Path(args.dataset) / name))
                   for name in ("corpus.jsonl", "queries.jsonl", f"qrels/{args.split}.tsv")]
    else:
        inputs.append(("--goldset file", args.goldset))
    inputs.append(("--judge-cache file", args.judge_cache or args.defaults.judge_cache))
    inputs += [("--query-cache file", args.query_cache + side) for side in ("", *SQLITE_SIDE_FILES)]
    return [(what, path) for what, path in inputs if path]


def protected_folders(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(what, folder) of the folders no output may be written into: the index, the docs folder (--docs, and every
    folder or PDF the index follows by its manifest, --docs given or not), the dataset and the cache of derived
    indexes. Any other index folder is found by check_output_paths."""
    folders = [("--index-cache folder", args.index_cache)]
    if args.dataset:
        folders.append(("--dataset folder", args.dataset))
    else:
        index = args.index or args.defaults.index
        folders += [("index folder", index),
                    ("docs folder", args.docs or (args.defaults.docs if args.index is None else None))]
        if not args.chroma_url:  # a server index's manifest is read when it is opened, after these checks
            folders += [("docs folder", followed) for followed in local_followed_paths(index)]
    return [(what, folder) for what, folder in folders if folder]


def index_folder_above(path: str | Path) -> Path | None:
    """The nearest folder at or above `path` (a folder) or its folder that holds an index (its manifest or Chroma
    database)."""
    resolved = Path(path).resolve()
    folder = resolved if resolved.is_dir() else resolved.parent
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in INDEX_MARKERS):
            return candidate
    return None


def is_inside(path: str | Path, folder: str | Path) -> bool:
    resolved, top = Path(path).resolve(), Path(folder).resolve()
    return resolved == top or top in resolved.parents


def check_output_paths(outputs: Sequence[tuple[str, str]], inputs: Sequence[tuple[str, str]],
                       folders: Sequence[tuple[str, str]] = ()) -> None:
    """EvalError when an output would replace an input or a cache, land inside an index, docs or dataset folder,
    be a folder, or replace another output of the same run."""
    for n, (flag, path) in enumerate(outputs):
        for what, other in inputs:
            if same_path(path, other):
                raise EvalError(f"{flag} {path} is the {what} {other}; writing the report there would replace it. "
                                f"Give {flag} another path")
        for what, folder in folders:
            if is_inside(path, folder):
                raise EvalError(f"{flag} {path} is inside the {what} {folder}; writing there could replace what "
                                f"it holds. Give {flag} a path outside it")
        index = index_folder_above(path)
        if index is not None:
            raise EvalError(f"{flag} {path} is inside the index folder {display_path(index)}; writing there could "
                            f"replace its manifest or store. Give {flag} a path outside it")
        if Path(path).is_dir():  # refused now, not after the whole evaluation when the write fails
            example = EXAMPLE_NAMES.get(flag)
            raise EvalError(f"{flag} {path} is a folder, not a file; " + (
                f"give a file path such as {Path(path) / example}" if example else
                "move that folder, or give --report another path"))
        for other_flag, other in outputs[n + 1:]:
            if same_path(path, other):
                raise EvalError(f"{flag} {path} and {other_flag} {other} are the same file; one would replace the "
                                f"other. Give them different paths")


def write_outputs(result: EvalResult, args: argparse.Namespace, extra: Sequence[tuple[str, str]] = ()) -> None:
    """The details file (a goldset's), the report and the JSON report, plus the `extra` (path, text) files (a
    goldset's run file and qrels), all or none; the details first, so a report never names a details file that
    is not there.

    The committed baseline carries no comparison: it would differ between the run that made it (compared
    with the report before) and the same run on a fresh clone (compared with itself). Its comparison goes to
    the comparison file instead (and, as every run's, to stdout: eval_runs.print_summary)."""
    files: list[tuple[str, str]] = []
    if getattr(args, "compare_file", None) and result.compare:
        files.append((args.compare_file, "\n".join(eval_report.render_compare(result.compare)) + "\n"))
        result = dataclasses.replace(result, compare=None)
    if result.details:
        files.append((details_path(args.report), diagnose.render_details(result, display_path(args.report))))
    files += [(args.report, eval_report.render_text(result)), (args.json, eval_report.render_json(result))]
    if args.markdown:
        files.append((args.markdown, eval_report.render_markdown(result)))
    write_reports([*files, *extra])


def write_reports(files: Sequence[tuple[str, str]]) -> None:
    """Write a run's report files all or none (files.write_texts_atomic); an OSError (a full disk, a read-only
    folder) is one EvalError naming the report and the error, with advice that fits it, and every earlier report
    left as it was."""
    try:
        write_texts_atomic(files)
    except OSError as exc:
        where = f"{display_path(exc.filename)}: " if exc.filename else ""
        raise EvalError(f"the reports could not be written: {where}{exc.strerror or exc}; the reports there before "
                        f"are unchanged ({', '.join(display_path(path) for path, _ in files)}). "
                        f"{write_error_advice(exc)}") from None


def write_error_advice(exc: OSError) -> str:
    """What to do about a failed write, by its errno: free space, make the folder writable, move a folder away."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "Free some space on its disk, then run again"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        folder = f" {display_path(Path(exc.filename).parent)}" if exc.filename else ""
        return f"Make the folder{folder} writable, or give another path, then run again"
    if exc.errno == errno.EISDIR:
        return "A folder is in the way; move it, or give another path, then run again"
    return "Run again once that is mended"


def write_row_reports(results: Sequence[EvalResult], reports: Sequence[Path]) -> None:
    """Each configuration's own report (text and JSON) at its path, with its details file first when it has one."""
    files = []
    for r, report in zip(results, reports):
        if r.details:
            r = dataclasses.replace(r, details=display_path(details_path(report)))
            files.append((details_path(report), diagnose.render_details(r, display_path(report))))
        files += [(str(report), eval_report.render_text(r)), (str(report.with_suffix(".json")),
                                                               eval_report.render_json(r))]
    write_reports(files)


def load_json_report(path: str | Path) -> EvalResult:
    """A JSON report written earlier (--compare, --compare-to, the previous report); EvalError if it is none."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvalError(f"{path} does not exist; write one with --json FILE") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise EvalError(f"{path} is not a JSON report of this tool ({exc})") from None
    if not isinstance(data, dict) or "per_query" not in data or "metrics" not in data:
        raise EvalError(f"{path} is not a JSON report of this tool (no 'metrics'/'per_query'); write one with "
                        f"--json FILE")
    try:
        return EvalResult.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        what = f"the field {exc} is missing" if isinstance(exc, KeyError) else f"a field is malformed: {exc}"
        raise EvalError(f"{path} is not a JSON report of this tool ({what}); write one with --json FILE") from None
