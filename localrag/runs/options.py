"""The evaluation's options checked and completed once, before any work: `resolve` turns the parsed command line
into the immutable EvalOptions every later step reads (contradictions, ranges, the profile, the sweep, the gates and
the report paths, outputs.py), each problem a clear EvalError naming the flag and the fix.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Sequence

from localrag.models import llm
from localrag.retrieval import llm_rerank
from localrag.runs.defaults import CommandLine, EvalDefaults, EvalOptions, Gates, log
from localrag.errors import EvalError
from localrag.evaluation.scoring import metric_keys
from localrag.files import same_path
from localrag.runs.outputs import (INDEX_MARKERS, check_cache_paths, check_kept_reports, check_output_dir,
                                   check_output_paths, check_outputs, output_paths, with_report_paths)
from localrag.settings import MODES, parse_chunk_size
from localrag.text.pages import PAGE_OFFSET
from localrag.text.query import text_problem
from localrag.runs.plan import apply_profile, check_sweep, warn_ineffective_settings
from localrag.runs.answering import existing_label_file, read_labels


def parse_ks(text: str) -> list[int]:
    """--k's text -> sorted distinct cutoffs; EvalError unless each is a positive integer."""
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise EvalError(f"--k must be comma-separated positive integers like 5,10,20, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise EvalError(f"--k must be comma-separated positive integers like 5,10,20, got {text!r}")
    return ks


def resolve(command: CommandLine, defaults: EvalDefaults) -> EvalOptions:
    """The command line checked against the defaults and completed: profile, cutoffs, sweep, gates, report paths;
    EvalError at the first contradiction, before any index is opened."""
    command, profile_keys = apply_profile(command, defaults.profiles, defaults.retriever["retrieval_mode"])
    if command.level and not command.dataset:
        raise EvalError("--level works with --dataset (Open RAGBench, e.g. --dataset open_ragbench); drop it")
    k_values = parse_ks(command.k) if command.k else list(defaults.dataset_k_values if command.dataset
                                                          else defaults.k_values)
    if command.chunk_size is not None and not isinstance(command.chunk_size, int):
        try:
            command = command.with_options(chunk_size=parse_chunk_size(command.chunk_size))
        except ValueError as exc:
            raise EvalError(f"--chunk-size {exc}") from None
    sweep_axes = check_sweep(command)
    if command.ablation or sweep_axes:  # the ablation and sweep tables always show Hit@1/3/5
        k_values = sorted(set(k_values) | {1, 3, 5})
    check_ranges(command)
    check_actions(command, bool(sweep_axes))
    check_run_file(command, "--ablation" if command.ablation else "--sweep" if sweep_axes else None)
    if command.dataset:  # after the cheap checks: a name is downloaded once, then it is a BEIR folder like a path
        command = dataclasses.replace(command, dataset=str(resolve_dataset(command.dataset, command.data_dir,
                                                                           command.level, command.quiet)))
    gates = check_gate_flags(command, k_values)
    axes = tuple((axis, tuple(values)) for axis, values in sweep_axes)
    # The report paths last: a default report's name says the settings resolved above.
    options = with_report_paths(EvalOptions(**command.flags(), defaults=defaults, k_values=tuple(k_values),
                                            sweep_axes=axes, profile_keys=profile_keys, page_offset=PAGE_OFFSET,
                                            gates=gates))
    check_output_dir(options)
    check_index_source(options)
    tool = options.lint or options.generate is not None or options.suite or options.compare
    if not (tool or options.explain is not None):
        check_outputs(options, output_paths(options))
    check_cache_paths(options)
    check_html(options)
    check_model_flags(options)
    if not tool:
        warn_ineffective_settings(options)
    return options


def check_ranges(command: CommandLine) -> None:
    """EvalError for a number outside its flag's range."""
    # --judge-max-calls also limits the LLM reranker's calls: checked with --judge or without.
    for flag, value in (("--page-tolerance", command.page_tolerance), ("--ivf-lists", command.ivf_lists),
                        ("--ivf-probes", command.ivf_probes), ("--judge-max-calls", command.judge_max_calls)):
        if value is not None and value < 0:
            raise EvalError(f"{flag} must be 0 or more, got {value}")
    # Checked before any index is opened: beir_data and retrieval_metrics would raise a bare ValueError later.
    for flag, value in (("--max-queries", command.max_queries), ("--max-corpus-docs", command.max_corpus_docs),
                        ("--judge-k", command.judge_k), ("--answer-k", command.answer_k),
                        ("--label-sample", command.label_sample), ("--resamples", command.resamples),
                        ("--diagnostic-depth", command.diagnostic_depth), ("--rrf-k", command.rrf_k),
                        ("--ivf-min-chunks", command.ivf_min_chunks),
                        ("--query-cache-entries", command.query_cache_entries)):
        if value is not None and value < 1:
            raise EvalError(f"{flag} must be 1 or more, got {value}")
    if command.dense_weight is not None and not 0 <= command.dense_weight <= 1:
        raise EvalError(f"--dense-weight must be a number from 0 to 1, got {command.dense_weight:g}")
    if command.document_prior is not None and not command.document_prior >= 0:
        raise EvalError(f"--document-prior must be 0 (off) or more, got {command.document_prior:g}")


def check_actions(command: CommandLine, sweep: bool) -> None:
    """EvalError when the options ask for two things that run one at a time (a sweep and a lint, ...) or contradict
    each other (an IVF setting and --no-sync). `sweep`: whether --sweep gave axes."""
    c = command
    if sweep and (c.ablation or c.lint or c.generate is not None or c.compare or c.suite):
        other = next(flag for flag, on in (("--ablation", c.ablation), ("--lint", c.lint),
                                           ("--generate", c.generate is not None), ("--compare", c.compare),
                                           ("--suite", c.suite)) if on)
        raise EvalError(f"--sweep and {other} cannot be combined; for --ablation's rows sweep "
                        f"mode={','.join(MODES)} and rerank=off,on" if other == "--ablation" else
                        f"--sweep and {other} cannot be combined; run them one at a time")
    actions = [flag for flag, on in (("--dataset", c.dataset), ("--lint", c.lint),
                                     ("--generate", c.generate is not None), ("--suite", c.suite),
                                     ("--compare", c.compare), ("--explain", c.explain is not None),
                                     ("--ablation", c.ablation and c.explain is not None),
                                     ("--judge", c.judge and c.explain is not None)) if on]
    if len(actions) > 1:
        raise EvalError(f"{' and '.join(actions)} cannot be combined; run them one at a time")
    if c.explain is not None and (problem := text_problem(c.explain)):
        raise EvalError(f"--explain {c.explain!r:.60} {problem}; give a question or a query id of the goldset")
    ivf = [f"{flag} {value}" for flag, value in (("--ivf-min-chunks", c.ivf_min_chunks),
                                                 ("--ivf-lists", c.ivf_lists)) if value is not None]
    if ivf and c.no_sync and not c.dataset:  # a dataset's index is a cache, synced with --no-sync too
        raise EvalError(f"{' and '.join(ivf)} and --no-sync cannot be combined: an IVF setting changes the index's "
                        f"IVF, which only a sync writes; drop --no-sync (the sync builds the IVF), or give the "
                        f"setting to add_pdfs.py and evaluate without it")
    if c.llm and c.generate is None:
        raise EvalError("--llm only works with --generate N; for judging retrieved passages use --judge MODEL")


def check_html(options: EvalOptions) -> None:
    """EvalError when --html has no page to write (a tool other than --compare, --explain), or would replace a
    report --compare reads."""
    o = options
    if not o.html:
        return
    other = next((flag for flag, on in (("--lint", o.lint), ("--generate", o.generate is not None),
                                        ("--suite", o.suite), ("--explain", o.explain is not None)) if on), None)
    if other:
        raise EvalError(f"--html writes the page of an evaluation or of --compare OLD NEW, and {other} writes "
                        f"none; drop --html")
    if o.compare:
        check_output_paths([("--html", o.html)], [("--compare report", path) for path in o.compare])
        check_kept_reports(o, [("--html", o.html)])


def check_index_source(options: EvalOptions) -> None:
    """EvalError when --index names a folder that holds no index and no --docs says what to build there: a new
    index is built only from a folder the user named, never from the sample folder a mistyped --index would get.
    The default index (no --index, or the default path) is built from the default docs folder on its first run."""
    o, d = options, options.defaults
    if (o.dataset or o.compare or o.suite or o.chroma_url or o.docs or o.index is None
            or same_path(o.index, d.index)):
        return
    index = Path(o.index)
    if index.is_dir() and any((index / marker).exists() for marker in INDEX_MARKERS):
        return
    what = ("it does not exist" if not index.exists() else "it is a file, not an index folder" if not index.is_dir()
            else f"the folder holds no {INDEX_MARKERS[0]}")
    raise EvalError(f"--index {o.index}: there is no index there ({what}), and without --docs this run has no "
                    f"folder of PDFs to build one from. Check the path, or pass --docs FOLDER to build a new index "
                    f"there")


def check_run_file(command: CommandLine, table: str | None) -> None:
    """EvalError when --run-file or --qrels-file cannot be written as asked: a run file holds one configuration's
    lists (`table`: the flag of a run of several, or None), and --qrels-file belongs to a goldset's --run-file."""
    if command.run_file and table:
        raise EvalError(f"--run-file holds the lists of one configuration and {table} evaluates several; drop "
                        f"--run-file, or run the configuration you want (--mode, --no-rerank, ...) with it")
    qrels_file = command.qrels_file
    if qrels_file and command.dataset:
        raise EvalError(f"--qrels-file {qrels_file}: a dataset's qrels are its own (qrels/{command.split}.tsv); "
                        f"--qrels-file is for goldset runs")
    if qrels_file and not command.run_file:
        raise EvalError(f"--qrels-file {qrels_file} writes the qrels of a goldset's --run-file; give --run-file "
                        f"FILE too")


def check_model_flags(options: EvalOptions) -> None:
    """EvalError when --judge or the reranker flags contradict the run; llm.ChatError when their server is not
    configured."""
    if options.judge:
        if options.dataset or options.ablation or options.sweep_axes:
            raise EvalError("--judge works on a goldset evaluation of one configuration; drop "
                            "--dataset/--ablation/--sweep")
        llm.check_environment(os.environ, "--judge")
    if (options.label_sample or options.answer_labels) and not (options.answers or options.answer_model):
        flag = "--label-sample" if options.label_sample else "--answer-labels"
        raise EvalError(f"{flag} works on judged answers: give --answers FILE or --answer-model MODEL, and "
                        f"--answer-judge MODEL")
    if options.answers or options.answer_model:
        if options.dataset or options.ablation or options.sweep_axes:
            raise EvalError("--answers and --answer-model work on a goldset evaluation of one configuration; drop "
                            "--dataset/--ablation/--sweep")
        if options.label_sample and (error := existing_label_file(options.out or options.defaults.label_sample)):
            raise error  # before any retrieval or model call, which may take an hour with a local model
        if options.answer_labels:
            read_labels(options.answer_labels)  # a malformed file stops the run here, not after the judging
        if options.answers and options.answer_model:
            raise EvalError("--answers and --answer-model contradict each other: evaluate the answers of your chat "
                            "(--answers FILE) or generate them (--answer-model MODEL), not both")
        for flag, model in (("--answer-model", options.answer_model),
                            ("--answer-judge", options.answer_judge or options.judge)):
            if model:
                llm.check_environment(os.environ, flag)
    if options.no_rerank and options.rerank_model:
        raise EvalError("--no-rerank and --rerank-model contradict each other; give one of them")
    if llm_rerank.is_llm_reranker(options.rerank_model):
        llm.check_environment(os.environ, llm_rerank.FLAG)


def resolve_dataset(dataset: str, data_dir: str, level: str | None, quiet: bool) -> Path:
    """The BEIR folder of --dataset: a folder path, or a named benchmark downloaded into --data-dir."""
    from localrag.datasets import downloads

    return downloads.resolve_dataset(dataset, data_dir, level, log=lambda m: log(m, quiet))


def check_gate_flags(command: CommandLine, k_values: Sequence[int]) -> Gates:
    """Gates belong to one evaluation: --fail-under parsed against this run's metric keys (before any work)."""
    c = command
    gated = [flag for flag, on in (("--fail-under", c.fail_under), ("--fail-on-regression",
                                                                    c.fail_on_regression)) if on]
    other = [flag for flag, on in (("--ablation", c.ablation), ("--sweep", c.sweep), ("--lint", c.lint),
                                   ("--generate", c.generate is not None), ("--suite", c.suite),
                                   ("--compare", c.compare), ("--explain", c.explain is not None)) if on]
    if gated and other:
        raise EvalError(f"{' and '.join(gated)} gate one evaluation and do not work with {other[0]}; run the "
                        f"evaluation to gate on its own")
    if c.fail_on_regression and c.no_compare:
        raise EvalError("--fail-on-regression needs a comparison and --no-compare turns it off; drop one of them")
    fail_under = parse_fail_under(c.fail_under or [], metric_keys("dataset" if c.dataset else "goldset", k_values))
    return Gates(tuple(fail_under), c.fail_on_regression)


def parse_fail_under(texts: Sequence[str], valid: Sequence[str]) -> list[tuple[str, float]]:
    """--fail-under METRIC=VALUE flags -> [(metric key, threshold)]; EvalError naming the valid keys."""
    gates = []
    for text in texts:
        key, sep, value = text.partition("=")
        key = key.strip().lower()
        if not sep or not key:
            raise EvalError(f"--fail-under needs METRIC=VALUE like hit@5=0.8, got {text!r}")
        try:
            threshold = float(value)
        except ValueError:
            raise EvalError(f"--fail-under {text}: {value.strip()!r} is not a number; write a value between 0 and 1 "
                            f"like hit@5=0.8") from None
        if not 0 <= threshold <= 1:
            raise EvalError(f"--fail-under {text}: {threshold:g} lies outside 0..1, the range of every metric")
        if key not in valid:
            raise EvalError(f"--fail-under {text}: this run reports no metric {key!r}; valid keys: "
                            f"{', '.join(valid)} (the cutoffs follow --k)")
        gates.append((key, threshold))
    return gates
