"""The evaluation's options checked and completed before any work: contradictions, ranges, the profile, the sweep,
the gates and the report paths (outputs.py), each a clear EvalError naming the flag and the fix.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Sequence

from localrag import llm, llm_rerank
from localrag.eval_defaults import log
from localrag.evaluate import EvalError, metric_keys
from localrag.index_settings import parse_chunk_size
from localrag.outputs import check_output_paths, input_paths, output_paths, protected_folders, resolve_report_paths
from localrag.pages import PAGE_OFFSET
from localrag.query_text import text_problem
from localrag.retriever import RETRIEVAL_MODES
from localrag.run_plan import apply_profile, check_sweep, warn_ineffective_settings


def parse_ks(text: str) -> list[int]:
    """--k's text -> sorted distinct cutoffs; EvalError unless each is a positive integer."""
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise EvalError(f"--k must be comma-separated positive integers like 5,10,20, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise EvalError(f"--k must be comma-separated positive integers like 5,10,20, got {text!r}")
    return ks


def resolve_args(args: argparse.Namespace) -> argparse.Namespace:
    """The parsed options (with `args.defaults`) checked and completed: profile, cutoffs, sweep, gates, report
    paths; EvalError at the first contradiction, before any index is opened."""
    apply_profile(args)
    if args.level and not args.dataset:
        raise EvalError("--level works with --dataset (Open RAGBench, e.g. --dataset open_ragbench); drop it")
    d = args.defaults
    args.k_values = parse_ks(args.k) if args.k else list(d.dataset_k_values if args.dataset else d.k_values)
    if args.chunk_size is not None and not isinstance(args.chunk_size, int):
        try:
            args.chunk_size = parse_chunk_size(args.chunk_size)
        except ValueError as exc:
            raise EvalError(f"--chunk-size {exc}") from None
    check_sweep(args)
    if args.ablation or args.sweep_axes:  # the ablation and sweep tables always show Hit@1/3/5
        args.k_values = sorted(set(args.k_values) | {1, 3, 5})
    args.page_offset = PAGE_OFFSET
    check_ranges(args)
    check_actions(args)
    check_run_file(args)
    if args.dataset:  # after the cheap checks: a name is downloaded once, then it is a BEIR folder like a path
        args.dataset = str(resolve_dataset(args))
    check_gate_flags(args)
    resolve_report_paths(args)
    if not (args.lint or args.generate is not None or args.suite or args.compare or args.explain is not None):
        check_output_paths(output_paths(args), input_paths(args), protected_folders(args))
    check_model_flags(args)
    if not (args.lint or args.generate is not None or args.suite or args.compare):
        warn_ineffective_settings(args)
    return args


def check_ranges(args: argparse.Namespace) -> None:
    """EvalError for a number outside its flag's range."""
    # --judge-max-calls also limits the LLM reranker's calls: checked with --judge or without.
    for flag, value in (("--page-tolerance", args.page_tolerance), ("--ivf-lists", args.ivf_lists),
                        ("--ivf-probes", args.ivf_probes), ("--judge-max-calls", args.judge_max_calls)):
        if value is not None and value < 0:
            raise EvalError(f"{flag} must be 0 or more, got {value}")
    # Checked before any index is opened: beir_data and retrieval_metrics would raise a bare ValueError later.
    for flag, value in (("--max-queries", args.max_queries), ("--max-corpus-docs", args.max_corpus_docs),
                        ("--judge-k", args.judge_k), ("--resamples", args.resamples),
                        ("--diagnostic-depth", args.diagnostic_depth), ("--rrf-k", args.rrf_k),
                        ("--ivf-min-chunks", args.ivf_min_chunks),
                        ("--query-cache-entries", args.query_cache_entries)):
        if value is not None and value < 1:
            raise EvalError(f"{flag} must be 1 or more, got {value}")
    if args.dense_weight is not None and not 0 <= args.dense_weight <= 1:
        raise EvalError(f"--dense-weight must be a number from 0 to 1, got {args.dense_weight:g}")
    if args.document_prior is not None and not args.document_prior >= 0:
        raise EvalError(f"--document-prior must be 0 (off) or more, got {args.document_prior:g}")


def check_actions(args: argparse.Namespace) -> None:
    """EvalError when the options ask for two things that run one at a time (a sweep and a lint, ...) or contradict
    each other (an IVF setting and --no-sync)."""
    if args.sweep_axes and (args.ablation or args.lint or args.generate is not None or args.compare or args.suite):
        other = next(flag for flag, on in (("--ablation", args.ablation), ("--lint", args.lint),
                                           ("--generate", args.generate is not None), ("--compare", args.compare),
                                           ("--suite", args.suite)) if on)
        raise EvalError(f"--sweep and {other} cannot be combined; for --ablation's rows sweep "
                        f"mode={','.join(RETRIEVAL_MODES)} and rerank=off,on" if other == "--ablation" else
                        f"--sweep and {other} cannot be combined; run them one at a time")
    actions = [flag for flag, on in (("--dataset", args.dataset), ("--lint", args.lint),
                                     ("--generate", args.generate is not None), ("--suite", args.suite),
                                     ("--compare", args.compare), ("--explain", args.explain is not None),
                                     ("--ablation", args.ablation and args.explain is not None),
                                     ("--judge", args.judge and args.explain is not None)) if on]
    if len(actions) > 1:
        raise EvalError(f"{' and '.join(actions)} cannot be combined; run them one at a time")
    if args.explain is not None and (problem := text_problem(args.explain)):
        raise EvalError(f"--explain {args.explain!r:.60} {problem}; give a question or a query id of the goldset")
    ivf = [f"{flag} {value}" for flag, value in (("--ivf-min-chunks", args.ivf_min_chunks),
                                                 ("--ivf-lists", args.ivf_lists)) if value is not None]
    if ivf and args.no_sync and not args.dataset:  # a dataset's index is a cache, synced with --no-sync too
        raise EvalError(f"{' and '.join(ivf)} and --no-sync cannot be combined: an IVF setting changes the index's "
                        f"IVF, which only a sync writes; drop --no-sync (the sync builds the IVF), or give the "
                        f"setting to add_pdfs.py and evaluate without it")
    if args.llm and args.generate is None:
        raise EvalError("--llm only works with --generate N; for judging retrieved passages use --judge MODEL")


def check_run_file(args: argparse.Namespace) -> None:
    """EvalError when --run-file or --qrels-file cannot be written as asked: a run file holds one configuration's
    lists, and --qrels-file belongs to a goldset's --run-file."""
    table = "--ablation" if args.ablation else "--sweep" if args.sweep_axes else None
    if args.run_file and table:
        raise EvalError(f"--run-file holds the lists of one configuration and {table} evaluates several; drop "
                        f"--run-file, or run the configuration you want (--mode, --no-rerank, ...) with it")
    qrels_file = getattr(args, "qrels_file", None)
    if qrels_file and args.dataset:
        raise EvalError(f"--qrels-file {qrels_file}: a dataset's qrels are its own (qrels/{args.split}.tsv); "
                        f"--qrels-file is for goldset runs")
    if qrels_file and not args.run_file:
        raise EvalError(f"--qrels-file {qrels_file} writes the qrels of a goldset's --run-file; give --run-file "
                        f"FILE too")


def check_model_flags(args: argparse.Namespace) -> None:
    """EvalError when --judge or the reranker flags contradict the run, or their server is not configured."""
    if args.judge:
        if args.dataset or args.ablation or args.sweep_axes:
            raise EvalError("--judge works on a goldset evaluation of one configuration; drop "
                            "--dataset/--ablation/--sweep")
        try:
            llm.check_environment(os.environ, "--judge")
        except llm.ChatError as exc:
            raise EvalError(str(exc)) from None
    if args.no_rerank and args.rerank_model:
        raise EvalError("--no-rerank and --rerank-model contradict each other; give one of them")
    if llm_rerank.is_llm_reranker(args.rerank_model):
        try:
            llm.check_environment(os.environ, llm_rerank.FLAG)
        except llm.ChatError as exc:
            raise EvalError(str(exc)) from None


def resolve_dataset(args: argparse.Namespace) -> Path:
    """The BEIR folder of --dataset: a folder path, or a named benchmark downloaded into --data-dir."""
    from localrag import datasets as beir_data, downloads

    try:
        return downloads.resolve_dataset(args.dataset, args.data_dir, args.level, log=lambda m: log(args, m))
    except (downloads.DownloadError, beir_data.DatasetError) as exc:
        raise EvalError(str(exc)) from None


def check_gate_flags(args: argparse.Namespace) -> None:
    """Gates belong to one evaluation: parse --fail-under against this run's metric keys (before any work)."""
    gated = [flag for flag, on in (("--fail-under", args.fail_under), ("--fail-on-regression",
                                                                       args.fail_on_regression)) if on]
    other = [flag for flag, on in (("--ablation", args.ablation), ("--sweep", args.sweep), ("--lint", args.lint),
                                   ("--generate", args.generate is not None), ("--suite", args.suite),
                                   ("--compare", args.compare), ("--explain", args.explain is not None)) if on]
    if gated and other:
        raise EvalError(f"{' and '.join(gated)} gate one evaluation and do not work with {other[0]}; run the "
                        f"evaluation to gate on its own")
    if args.fail_on_regression and args.no_compare:
        raise EvalError("--fail-on-regression needs a comparison and --no-compare turns it off; drop one of them")
    args.fail_under = parse_fail_under(args.fail_under or [], metric_keys("dataset" if args.dataset else "goldset",
                                                                    args.k_values))


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
