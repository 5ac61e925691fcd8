"""Where every output of an evaluation goes, and what it may not overwrite.

The committed report only for the default goldset, index and settings; runs of other settings under the runs
folder, named after the settings given; another goldset's report beside it. No output may replace an input, a
cache or another output of the run, or land inside an index, docs or dataset folder. Reports are written all
or none (files.write_texts_atomic).
"""
from __future__ import annotations

import dataclasses
import errno
import json
import re
from pathlib import Path
from typing import Callable, Sequence

from localrag.evaluation import diagnosis
from localrag.evaluation import report as eval_report
from localrag.evaluation.csv_report import render_csv
from localrag.evaluation.scoring import run_status
from localrag.runs.defaults import CommandLine, EvalOptions
from localrag.errors import EvalError
from localrag.files import display_path, same_path, write_texts_atomic
from localrag.index.manifest import local_followed_paths
from localrag.models import llm
from localrag.retrieval.llm_rerank import is_llm_reranker
from localrag.runs import query_vectors
from localrag.evaluation.result import EvalResult
from localrag.runs.plan import format_setting, requested_settings, slug

DETAILS_SUFFIX = ".details.md"  # the details file beside a goldset report: baseline.txt -> baseline.details.md
QRELS_SUFFIX = ".qrels"  # a goldset run's qrels beside its --run-file: r.run -> r.run.qrels (without --qrels-file)
SQLITE_SIDE_FILES = ("-journal", "-wal", "-shm")  # files SQLite keeps beside the query vector cache
INDEX_MARKERS = ("index_info.json", "chroma.sqlite3")  # a folder holding one of these is an index folder
# The first line of each report file this tool writes, and what it is called: an output flag never replaces such a
# file unless it writes one of that kind there (a rerun of --report replaces its previous report; --csv never does).
REPORT_HEADS = (("localRAG retrieval evaluation: ", "report"), ("localRAG ablation: ", "report"),
                ("localRAG sweep: ", "report"), ("# Retrieval details: ", "details file"))
JSON_REPORT_HEAD = re.compile(r'\{\s*"generated"\s*:\s*"[^"\n]*"\s*,\s*"title"\s*:')  # render_json's first keys
FLAG_KINDS = {"--report": "report", "--json": "JSON report", "the details file of --report": "details file"}
# Whether an existing file at a cache flag's path is not a cache of that kind (why, or None): only a cache of this
# tool, damaged or not, may be read, moved aside when damaged, and written.
CACHE_PROBLEMS: dict[str, Callable[[str | Path], str | None]] = {
    "--query-cache": query_vectors.foreign_file_problem, "--judge-cache": llm.reply_cache_problem}


@dataclasses.dataclass(frozen=True)
class Format:
    """An optional output format of an evaluation: its flag (the option of the same name holds its path), the file
    name its messages suggest, the renderer of one run, and the renderer of an --ablation's or --sweep's table.

    `render_run(run, report, old)`: `run` is the result as it ran (its comparison and gates, which the committed
    baseline's reports leave out), `report` the one the text report shows, `old` the compared run's result.
    `render_table(results, axes, reference)`: a sweep's `axes` (values as the row names write them), an ablation's
    `reference` (the row the others are compared with). `last`: written after a run's run file and qrels;
    `table_rank`: the place among a table's files (both as the files were always written: the 'Wrote' line)."""
    flag: str
    example: str
    render_run: Callable[[EvalResult, EvalResult, EvalResult | None], str]
    render_table: Callable[[Sequence[EvalResult], Sequence[tuple[str, list[str]]], str], str]
    table_rank: int
    last: bool = False

    @property
    def option(self) -> str:
        """The options field holding this format's path: --markdown -> markdown."""
        return self.flag.removeprefix("--").replace("-", "_")


def markdown_table(results: Sequence[EvalResult], axes: Sequence[tuple[str, list[str]]], reference: str) -> str:
    """An ablation's or a sweep's table in Markdown (a row per configuration, its seconds included)."""
    rows, keys = eval_report.ablation_table(results)
    return "\n".join(eval_report.render_table(rows, keys, markdown=True, extra=["seconds"])) + "\n"


def html_run(run: EvalResult, report: EvalResult, old: EvalResult | None) -> str:
    """The page of one run, with its comparison (and `old`'s Hit@k curve) even for the committed baseline."""
    from localrag.evaluation import html_report  # matplotlib only with --html

    return html_report.render_html(run, old)


def html_table(results: Sequence[EvalResult], axes: Sequence[tuple[str, list[str]]], reference: str) -> str:
    from localrag.evaluation import html_report  # matplotlib only with --html

    return html_report.render_table_html(results, axes, reference)


# The optional output formats, in the order a run writes them (and output_paths lists them). A new format is one
# renderer and one row here, plus its flag in build_parser and its field in EvalOptions.
FORMATS = (
    Format("--markdown", "report.md", lambda run, report, old: eval_report.render_markdown(report), markdown_table,
           table_rank=1),
    Format("--csv", "questions.csv", lambda run, report, old: render_csv([report]),
           lambda results, axes, reference: render_csv(results), table_rank=0),
    Format("--html", "report.html", html_run, html_table, table_rank=2, last=True))
# A file name each output flag's message suggests when the path given is a folder.
EXAMPLE_NAMES = {"--report": "report.txt", "--json": "report.json", **{f.flag: f.example for f in FORMATS},
                 "--run-file": "run.trec",
                 "--out": "goldset.csv", "--query-cache": "query_vectors.sqlite3", "--judge-cache": "judge_cache.json"}


def is_default_setup(options: EvalOptions) -> bool:
    """Whether this run evaluates the default goldset on the default index (the one the committed report is of)."""
    # Without --docs the index's own folder is synced: for the default index that is DOCS_PATH.
    o, d = options, options.defaults
    return (not o.dataset and same_path(o.goldset, d.goldset)
            and (o.docs is None or same_path(o.docs, d.docs))
            and (o.index is None or same_path(o.index, d.index))
            and o.chroma_url == d.chroma_url)


def default_report_path(options: EvalOptions, suffix: str | None = None) -> str:
    """The report path without --report: the committed one only for the default goldset, index and settings;
    the default goldset under other index or retrieval settings, --ablation and --sweep under the runs folder;
    another goldset or index gets one beside the goldset, named after it; a dataset one under its folder. Settings
    given as flags add themselves to the name (eval/runs/baseline.chunk_size-800.mode-dense.txt)."""
    # The settings given name the report: a run of other settings never replaces the committed baseline.
    suffix = run_suffix(options) if suffix is None else suffix
    o, d = options, options.defaults
    sweep = bool(o.sweep_axes)
    if o.dataset:
        table = "-sweep" if sweep else "-ablation" if o.ablation else ""
        name = f"{Path(o.dataset).resolve().name}-{o.split}{table}{suffix}.txt"
        return str(Path(d.dataset_report_dir) / name)
    if is_default_setup(o):
        if not (sweep or o.ablation or suffix):
            return d.report
        path = Path(d.sweep_report if sweep else d.ablation_report if o.ablation
                    else Path(d.runs_dir) / Path(d.report).name)
        return str(path.with_name(path.stem + suffix + path.suffix))
    goldset = Path(o.goldset)
    table = ".sweep" if sweep else ".ablation" if o.ablation else d.goldset_report_suffix
    return str(goldset.with_name(f"{goldset.stem}{table}{suffix}.txt"))


def in_output_dir(path: str, output_dir: str | None) -> str:
    """A default output path moved into --output-dir under its own file name; unchanged without one."""
    return str(Path(output_dir) / Path(path).name) if output_dir else path


def with_report_paths(options: EvalOptions) -> EvalOptions:
    """The options with the report paths they left out filled in: `report` and `json`, and `settings_base_json`
    (the JSON report a run of other settings is compared with: the run of its retrieval settings on the evaluated
    index, else the run of the default settings; with --output-dir, else the report the run would have replaced
    without it) and `compare_file` (where the committed baseline's comparison goes instead of into the baseline), or
    None. With --output-dir the default paths are in that folder (in_output_dir)."""
    report, json_report, settings_base_json, compare_file = options.report, options.json, None, None
    if report is None:
        default = default_report_path(options)
        report = in_output_dir(default, options.output_dir)
        if default == options.defaults.report and not (options.ablation or options.sweep_axes):
            compare_file = in_output_dir(options.defaults.compare_path, options.output_dir)
        if run_suffix(options) and json_report is None:
            # Other index settings: the same retrieval settings on the evaluated index, if that run exists; else the
            # run of the default settings (the committed baseline for the default goldset and index).
            bases = [str(Path(default_report_path(options, suffix=suffix)).with_suffix(".json"))
                     for suffix in dict.fromkeys((retrieval_suffix(options) if settings_suffix(options) else "", ""))]
            settings_base_json = next((base for base in bases if Path(base).exists()), bases[-1])
        elif options.output_dir and json_report is None and Path(default).with_suffix(".json").exists():
            settings_base_json = str(Path(default).with_suffix(".json"))
    if json_report is None:
        json_report = str(Path(report).with_suffix(".json"))
    return dataclasses.replace(options, report=report, json=json_report, settings_base_json=settings_base_json,
                               compare_file=compare_file)


def check_output_dir(options: EvalOptions) -> None:
    """EvalError (before any work) when --output-dir is a file, lies inside an index, docs or dataset folder, or
    would let this run replace the committed baseline (by its default name or by --report/--json)."""
    folder = options.output_dir
    if not folder:
        return
    if Path(folder).exists() and not Path(folder).is_dir():
        raise EvalError(f"--output-dir {folder} is a file, not a folder; give a folder (it is created if missing)")
    refuse_inside("--output-dir", folder, protected_folders(options), "Give a folder outside it")
    baseline = options.defaults.report
    if options.report and options.json and is_committed_baseline(options.report, options.json, baseline):
        raise EvalError(f"--output-dir {folder} never replaces the committed {display_path(baseline)}, and this run "
                        f"would write {display_path(options.report)}; give another folder, or drop --output-dir")


def is_committed_baseline(report: str, json_report: str, baseline: str) -> bool:
    """Whether a run's `report` or `json_report` is the committed baseline's (`baseline`, its text report): by
    default or by --report/--json."""
    return same_path(report, baseline) or same_path(json_report, Path(baseline).with_suffix(".json"))


def beside_report_path(options: EvalOptions, name: str) -> str:
    """Where a run's report goes when it must not replace the one at `options.report`: for the committed baseline
    the runs folder (eval/runs/baseline.reranker-on.txt, with the settings given), else beside the report, `name`
    added (r.judge-incomplete.txt)."""
    d = options.defaults
    if is_committed_baseline(options.report, options.json, d.report):
        report = Path(d.report)
        return str(Path(d.runs_dir) / f"{report.stem}{run_suffix(options)}.{name}{report.suffix}")
    report = Path(options.report)
    return str(report.with_name(f"{report.stem}.{name}{report.suffix}"))


def settings_suffix(options: EvalOptions) -> str:
    """What the default report name adds for the index settings given: '.chunk_size-800.loader-pypdf'."""
    return "".join(f".{key}-{slug(format_setting(value))}" for key, value in requested_settings(options).items()
                   if key not in options.profile_keys)


def retrieval_suffix(options: EvalOptions) -> str:
    """What the default report name adds for retrieval and scoring settings other than the defaults:
    '.mode-dense.rerank-off.rrf_k-60'."""
    o, d, r = options, options.defaults, options.defaults.retriever
    given = [("profile", o.profile),
             ("mode", o.mode if o.mode != r["retrieval_mode"] else None),
             ("rerank", "off" if o.no_rerank else None), ("rerank_model", o.rerank_model),
             ("rrf_k", o.rrf_k if o.rrf_k not in (None, r["rrf_k"]) else None),
             ("fusion", o.fusion if o.fusion not in (None, r["fusion"]) else None),
             ("dense_weight", f"{o.dense_weight:g}" if o.dense_weight not in (None, r["dense_weight"])
              else None),
             ("document_prior", f"{o.document_prior:g}"
              if o.document_prior not in (None, r["document_prior"]) else None),
             ("rank_by", o.rank_by if o.rank_by != r["rank_by"] else None),
             ("ivf_probes", o.ivf_probes if o.ivf_probes != r["ivf_probes"] else None),
             ("ivf_min_chunks", o.ivf_min_chunks), ("ivf_lists", o.ivf_lists),
             ("k", o.k and o.k.replace(",", "_")),
             ("query_instructions", "on" if o.query_instructions != d.use_query_instructions else None),
             ("page_tolerance", o.page_tolerance if o.page_tolerance != d.page_tolerance else None)]
    return "".join(f".{key}-{slug(str(value))}" for key, value in given
                   if value is not None and key not in o.profile_keys)


def run_suffix(options: EvalOptions) -> str:
    """The default report name's addition for every setting given: index settings, then retrieval ones."""
    return settings_suffix(options) + retrieval_suffix(options)


def output_paths(options: EvalOptions) -> list[tuple[str, str]]:
    """(flag, path) of every file an evaluation writes, --label-sample's answers to label included."""
    o = options
    details = None if o.dataset else details_path(o.report)
    labels = (o.out or o.defaults.label_sample) if o.label_sample else None
    return [(flag, path) for flag, path in (("--report", o.report), ("--json", o.json),
                                            *((f.flag, path) for f, path in chosen_formats(o)),
                                            ("--run-file", o.run_file),
                                            ("--qrels-file", qrels_path(o)),
                                            ("the details file of --report", details),
                                            ("the comparison file", o.compare_file), ("--out", labels)) if path]


def chosen_formats(options: EvalOptions) -> list[tuple[Format, str]]:
    """(format, path) of each optional format this run writes (its flag given), in FORMATS' order."""
    return [(f, path) for f in FORMATS if (path := getattr(options, f.option))]


def qrels_path(flags: CommandLine) -> str | None:
    """Where a goldset run's qrels go: --qrels-file, else beside --run-file (QRELS_SUFFIX appended); None without
    --run-file, and for a dataset (its qrels are the dataset's)."""
    if flags.dataset or not flags.run_file:
        return None
    return flags.qrels_file or flags.run_file + QRELS_SUFFIX


def details_path(report: str | Path) -> str:
    """The details file beside a goldset report: eval/baseline.txt -> eval/baseline.details.md."""
    report = Path(report)
    return str(report.with_name(report.stem + DETAILS_SUFFIX))


def input_paths(options: EvalOptions) -> list[tuple[str, str]]:
    """(what, path) of every file a run reads or keeps and an output must not replace: its inputs, and the caches
    whether or not this run uses them (the judge cache is committed; the query cache holds every earlier run's
    vectors)."""
    o = options
    caches = [("--judge-cache file", o.judge_cache or o.defaults.judge_cache)]
    caches += [("--query-cache file", o.query_cache + side) for side in ("", *SQLITE_SIDE_FILES)]
    return [*run_inputs(options), *((what, path) for what, path in caches if path)]


def run_inputs(options: EvalOptions) -> list[tuple[str, str]]:
    """(what, path) of every file a run reads, its caches left out: the goldset or the dataset's files, the
    --compare-to report, the answers and their labels."""
    o = options
    inputs = [("--compare-to file", o.compare_to)]
    if o.dataset:
        inputs += [("--dataset file", str(Path(o.dataset) / name))
                   for name in ("corpus.jsonl", "queries.jsonl", f"qrels/{o.split}.tsv")]
    else:
        inputs.append(("--goldset file", o.goldset))
    inputs += [("--answers file", o.answers), ("--answer-labels file", o.answer_labels)]
    return [(what, path) for what, path in inputs if path]


def used_caches(options: EvalOptions) -> list[tuple[str, str]]:
    """(flag, path) of the caches this run reads and writes: the query vector cache (an evaluation or --explain,
    without --no-query-cache) and the reply cache of --judge-cache, which the judge, the answers' model and judge,
    --generate's --llm and an LLM reranker share."""
    o = options
    caches = []
    if not (o.lint or o.generate is not None or o.suite or o.compare or o.no_query_cache):
        caches.append(("--query-cache", o.query_cache))
    judged_answers = (o.answers or o.answer_model) and (o.answer_model or o.answer_judge or o.judge)
    if o.judge or judged_answers or (o.llm and o.generate is not None) or is_llm_reranker(o.rerank_model):
        caches.append(("--judge-cache", o.judge_cache or o.defaults.judge_cache))
    return caches


def check_cache_paths(options: EvalOptions) -> None:
    """EvalError (before any work) when a cache this run uses could replace or move aside a file the user keeps: it
    is an input or an output of the run or the other cache, lies inside an index, docs or dataset folder, or is an
    existing file that is not such a cache of this tool. Only a cache of this tool that is damaged is ever moved
    aside (when it is read)."""
    caches = used_caches(options)
    others = [*run_inputs(options), *((f"{flag} file" if flag.startswith("--") else flag, path)
                                      for flag, path in output_paths(options))]
    for n, (flag, path) in enumerate(caches):
        for what, other in [*others, *((f"{other_flag} file", other) for other_flag, other in caches[n + 1:])]:
            if same_path(path, other):
                raise EvalError(f"{flag} {path} is the {what} {other}; a cache there would replace it, or move it "
                                f"aside as a damaged cache. Give {flag} another path")
        refuse_inside(flag, path, protected_folders(options), f"Give {flag} a path outside it")
        if Path(path).is_dir():
            raise EvalError(f"{flag} {path} is a folder, not a file; give a file path such as "
                            f"{Path(path) / EXAMPLE_NAMES[flag]}")
        if problem := CACHE_PROBLEMS[flag](path):
            raise EvalError(f"{flag} {path} {problem}, so it is no cache of this tool and is left as it is. Give "
                            f"{flag} another path (a new cache is made there), or move that file away")


def protected_folders(options: EvalOptions) -> list[tuple[str, str]]:
    """(what, folder) of the folders no output may be written into: the index, the docs folder (--docs, and every
    folder or PDF the index follows by its manifest, --docs given or not), the dataset and the cache of derived
    indexes. Any other index folder is found by check_output_paths."""
    o = options
    folders = [("--index-cache folder", o.index_cache)]
    if o.dataset:
        folders.append(("--dataset folder", o.dataset))
    else:
        index = o.index or o.defaults.index
        folders += [("index folder", index),
                    ("docs folder", o.docs or (o.defaults.docs if o.index is None else None))]
        if not o.chroma_url:  # a server index's manifest is read when it is opened, after these checks
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


def refuse_inside(flag: str, path: str | Path, folders: Sequence[tuple[str, str]], fix: str) -> None:
    """EvalError naming `flag` and `fix` when `path` lies inside one of the (what, folder) `folders` or inside any
    other index folder."""
    for what, folder in folders:
        if is_inside(path, folder):
            raise EvalError(f"{flag} {path} is inside the {what} {folder}; writing there could replace what it holds. "
                            f"{fix}")
    index = index_folder_above(path)
    if index is not None:
        raise EvalError(f"{flag} {path} is inside the index folder {display_path(index)}; writing there could "
                        f"replace its manifest or store. {fix}")


def check_output_paths(outputs: Sequence[tuple[str, str]], inputs: Sequence[tuple[str, str]],
                       folders: Sequence[tuple[str, str]] = ()) -> None:
    """EvalError when an output would replace an input or a cache, land inside an index, docs or dataset folder,
    be a folder, or replace another output of the same run."""
    for n, (flag, path) in enumerate(outputs):
        for what, other in inputs:
            if same_path(path, other):
                raise EvalError(f"{flag} {path} is the {what} {other}; writing the report there would replace it. "
                                f"Give {flag} another path")
        refuse_inside(flag, path, folders, f"Give {flag} a path outside it")
        if Path(path).is_dir():  # refused now, not after the whole evaluation when the write fails
            example = EXAMPLE_NAMES.get(flag)
            raise EvalError(f"{flag} {path} is a folder, not a file; " + (
                f"give a file path such as {Path(path) / example}" if example else
                "move that folder, or give --report another path"))
        for other_flag, other in outputs[n + 1:]:
            if same_path(path, other):
                raise EvalError(f"{flag} {path} and {other_flag} {other} are the same file; one would replace the "
                                f"other. Give them different paths")


def check_outputs(options: EvalOptions, outputs: Sequence[tuple[str, str]]) -> None:
    """The one guard of every output flag (--report, --json, --markdown, --csv, --html, --run-file, --qrels-file,
    --generate's and --label-sample's --out), before any work: EvalError when an output would replace an input, a
    cache or another output of the run, land inside an index, docs or dataset folder (check_output_paths), or
    replace the committed baseline or a report of this tool (check_kept_reports, first: its message says more than
    "the same file" when --html names the default run's own eval/baseline.txt)."""
    check_kept_reports(options, outputs)
    check_output_paths(outputs, input_paths(options), protected_folders(options))


def check_kept_reports(options: EvalOptions, outputs: Sequence[tuple[str, str]]) -> None:
    """EvalError when an output would replace a file of the committed baseline (eval/baseline.*) other than as the
    default run's own report, JSON report and details file, unless --replace-baseline; or an existing report of
    this tool (report, JSON report, details file) with a file of another kind, unless --force. A rerun of --report
    replaces its own previous report (and is compared with it)."""
    d = options.defaults
    baseline = Path(d.report)
    own = {"--report": baseline, "--json": baseline.with_suffix(".json"),
           "the details file of --report": Path(details_path(baseline))}
    writes_baseline = default_report_path(options) == d.report
    for flag, path in outputs:
        if is_baseline_file(path, baseline):
            if options.replace_baseline or (writes_baseline and flag in own and same_path(path, own[flag])):
                continue
            raise EvalError(f"{flag} {path} is a file of the committed baseline "
                            f"{display_path(baseline.with_name(baseline.stem + '.*'))}, which only a run of the "
                            f"default goldset, index and settings writes, as its report; writing there would "
                            f"replace it. Give {flag} another path, or add --replace-baseline to replace the "
                            f"baseline on purpose")
        kind = report_kind(path)
        if kind and kind != FLAG_KINDS.get(flag) and not options.force:
            raise EvalError(f"{flag} {path} is a {kind} of this tool; writing there would replace it with another "
                            f"kind of file. Give {flag} another path, or add --force to replace it")


def is_baseline_file(path: str | Path, baseline: str | Path) -> bool:
    """Whether `path` is a file of the committed baseline: beside its report `baseline`, named like it
    (eval/baseline.txt: eval/baseline.json, eval/baseline.details.md, eval/baseline.csv, ...)."""
    resolved, report = Path(path).resolve(), Path(baseline).resolve()
    return resolved.parent == report.parent and resolved.name.startswith(report.stem + ".")


def report_kind(path: str | Path) -> str | None:
    """What report of this tool the file at `path` is, by its first line: 'report' (a text report, an ablation's
    or a sweep's table), 'JSON report', 'details file'; None for any other file, a missing one or a folder."""
    try:
        with open(path, "rb") as file:
            head = file.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return None
    kind = next((kind for start, kind in REPORT_HEADS if head.startswith(start)), None)
    return kind or ("JSON report" if JSON_REPORT_HEAD.match(head) else None)


def write_outputs(result: EvalResult, options: EvalOptions, extra: Sequence[tuple[str, str]] = (),
                  old: EvalResult | None = None) -> list[str]:
    """The details file (a goldset's), the report and the JSON report, plus the `extra` (path, text) files (a
    goldset's run file and qrels) and each optional format's (FORMATS; with `old`, the compared run's result), all
    or none; the
    details first, so a report never names a details file that is not there. Returns the paths written as the
    run's last line names them: the report and the JSON report first, then the others in the order written.

    The committed baseline carries no comparison: it would differ between the run that made it (compared
    with the report before) and the same run on a fresh clone (compared with itself). Its comparison goes to
    the comparison file instead (and, as every run's, to stdout: eval_runs.print_summary), and to the HTML page.
    Nor does it carry the gates: they are about this run (a CI job's), so its status there is a plain run's, and
    the gates go to the exit code and the status printed (rows.print_status)."""
    run = result
    files: list[tuple[str, str]] = []
    if result.details:
        files.append((details_path(options.report), diagnosis.render_details(result, display_path(options.report))))
    if options.compare_file and result.compare:
        files.append((options.compare_file, "\n".join(eval_report.render_compare(result.compare)) + "\n"))
        result = dataclasses.replace(result, compare=None)
    if is_committed_baseline(options.report, options.json, options.defaults.report):
        result = dataclasses.replace(result, status=run_status(result.status.degraded, [], []))
    files += [(options.report, eval_report.render_text(result)), (options.json, eval_report.render_json(result))]
    formats = [(f, path, f.render_run(run, result, old)) for f, path in chosen_formats(options)]
    written = write_reports([*files, *((path, text) for f, path, text in formats if not f.last), *extra,
                             *((path, text) for f, path, text in formats if f.last)])
    return [options.report, options.json, *(path for path in written if path not in (options.report, options.json))]


def write_reports(files: Sequence[tuple[str, str]]) -> list[str]:
    """Write a run's report files all or none (files.write_texts_atomic); the paths written, in order. An OSError
    (a full disk, a read-only folder) is one EvalError naming the report and the error, with advice that fits it,
    and every earlier report left as it was."""
    try:
        write_texts_atomic(files)
        return [str(path) for path, _ in files]
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


def write_row_reports(results: Sequence[EvalResult], reports: Sequence[Path]) -> list[str]:
    """Each configuration's own report (text and JSON) at its path, with its details file first when it has one;
    the paths written, each row's report and JSON report before its details file."""
    files = []
    for r, report in zip(results, reports):
        if r.details:
            r = dataclasses.replace(r, details=display_path(details_path(report)))
            files.append((details_path(report), diagnosis.render_details(r, display_path(report))))
        files += [(str(report), eval_report.render_text(r)), (str(report.with_suffix(".json")),
                                                               eval_report.render_json(r))]
    write_reports(files)
    return [path for report in reports for path in (str(report), str(report.with_suffix(".json")),
                                                    details_path(report)) if path in dict(files)]


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
