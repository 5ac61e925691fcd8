"""An evaluation run: each planned row retrieved and scored on its index, compared with the previous report,
gated, and written (one report, or an --ablation / --sweep table with one report per row).

A goldset run lints the goldset against each index first and leaves out questions whose expected page cannot be
scored; a dataset run syncs a cached index of the dataset's documents. Scoring lives in localrag/evaluate.py,
the plan in localrag/run_plan.py, the indexes in localrag/run_index.py, the paths in localrag/outputs.py.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from localrag import evaluate as ev
from localrag import goldset as gs
from localrag import language, models
from localrag import report as eval_report
from localrag.configuration import config_block, settings_json
from localrag import lint as goldset_lint
from localrag.eval_defaults import LocalRAG, log
from localrag.errors import EvalError
from localrag.files import display_path
from localrag.outputs import (details_path, load_json_report, qrels_path, write_outputs, write_reports,
                              write_row_reports)
from localrag.pages import PAGE_OFFSET, shown_page
from localrag.report import plural
from localrag.result import EXIT_OK, EvalResult, LeftOut, Status
from localrag.run_index import fill_query_vectors, open_pdf_index, open_rag, query_vector_cache, share_query_vectors
from localrag.run_plan import (INDEX_SETTINGS, dataset_index_path, dataset_settings, evaluation_rows, format_setting,
                               given_fusion_flags, index_groups, ineffective_settings, row_configs, slug)


def evaluate(args: argparse.Namespace) -> list[EvalResult]:
    """Evaluate the goldset or dataset of `args` and write the reports: one result with its status, or with
    --ablation one per configuration (the table is printed)."""
    return run_dataset(args) if args.dataset else run_goldset(args)


def run_goldset(args: argparse.Namespace) -> list[EvalResult]:
    """Evaluate the goldset on each planned row's index (opened and linted once per index) and write the reports."""
    goldset = gs.read_goldset(args.goldset, args.defaults.goldset_template)
    for message in goldset.messages:
        log(args, f"warning: goldset: {message}")
    if args.judge:  # a question whose location cannot be read is left out: it never gets a verdict
        check_judge_server(args, [q.question for q in goldset.questions
                                  if not any(loc.problem for loc in q.locations)])
    identity = "goldset " + display_path(args.goldset)
    rows = evaluation_rows(args)
    results: dict[int, EvalResult] = {}
    degraded: list[str] = []
    missing_rows, previous, hits, checked, shared = "", None, {}, None, None
    vector_cache = query_vector_cache(args)
    for group in index_groups(rows):
        opened = open_pdf_index(args, dict(rows[group[0]].index))
        rag = opened.rag
        shared = share_query_vectors(rag, shared)
        checked = check_goldset(args, goldset, rag, opened.warnings)
        if previous is None:
            previous = previous_report(args, identity, [q.query_id for q in checked.scored])
        degraded += [reason for reason in checked.degraded if reason not in degraded]
        configs, why_missing = row_configs(rag, args, [(n, rows[n]) for n in group])
        missing_rows = missing_rows or why_missing
        fill_query_vectors(rag, [q.question for q in checked.scored], [mode for _, _, mode, _ in configs], args,
                           vector_cache)
        setup = opened.seconds  # the first row on an index carries its opening and sync (a build included)
        for number, name, mode, rerank in configs:
            started = time.perf_counter()
            result, hits = score_goldset_row(args, rag, checked, identity, name, mode, rerank)
            results[number] = dataclasses.replace(result, seconds=time.perf_counter() - started + setup)
            setup = 0.0
    results_list = [results[n] for n in sorted(results)]
    if args.judge:  # one configuration: --judge and --ablation/--sweep exclude each other
        results_list[0], judge_degraded = add_judge(results_list[0], hits, checked.scored, args)
        degraded += judge_degraded
    # One configuration (--run-file and --ablation/--sweep exclude each other): its lists and the qrels of its index.
    trec = goldset_trec(args, rag, checked, hits) if args.run_file and len(results_list) == 1 else None
    return finish(results_list, args, previous, degraded, missing_rows, trec=trec)


def goldset_trec(args: argparse.Namespace, rag: LocalRAG, checked: CheckedGoldset,
                 hits: Mapping[str, Sequence[ev.Hit]]) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, int]]]:
    """(TREC run, qrels) of a goldset run's scored lists: pages when ranking by page, chunks when by chunk (every
    indexed page, or chunk, a candidate of the qrels); the questions left out of the metrics are in neither."""
    units = (ev.page_units(checked.indexed, args.page_offset) if rag.rank_by == "page"
             else ev.chunk_units(rag.indexed_chunks(), args.page_offset))
    return (ev.goldset_run(hits, args.page_offset, rag.rank_by),
            ev.goldset_qrels(checked.scored, units, args.page_offset, args.page_tolerance))


@dataclasses.dataclass
class CheckedGoldset:
    """A goldset checked against one index: the questions scored, those left out (invalid expected page) and why,
    the notes and degraded reasons for the report, the indexed files, and the configuration lines it adds."""

    scored: list[gs.GoldQuestion]
    left_out: tuple[LeftOut, ...]
    notes: tuple[str, ...]
    degraded: list[str]
    indexed: dict[str, Any]
    header: list[tuple[str, str]]
    tail: list[tuple[str, str]]


def check_goldset(args: argparse.Namespace, goldset: gs.Goldset, rag: LocalRAG,
                  warnings: list[str]) -> CheckedGoldset:
    """Lint the goldset against `rag`'s index (each finding a warning), leave out what cannot be scored; EvalError
    when nothing can be. `warnings`: the index's sync warnings, which the notes carry first."""
    docs = goldset_lint.index_docs(rag)
    findings = goldset_lint.lint_index(rag, goldset.questions, goldset.messages, docs, progress=not args.quiet)
    left_out = left_out_questions(goldset.questions, docs)
    for warning in lint_warnings(goldset.questions, findings, left_out):
        warnings.append(warning)
        log(args, f"warning: {warning}")
    scored = [q for q in goldset.questions if q.query_id not in left_out]
    if not scored:
        raise EvalError(f"every question of {display_path(args.goldset)} has an invalid expected page (see the "
                        f"warnings above), so nothing can be evaluated; fix the pages and rerun")
    indexed = {d["source"]: d for d in rag.list_documents()}
    notes = [*goldset.messages, *warnings]  # a missing file is in the notes as a lint error on its line
    notes += language_note(rag, [q.question for q in goldset.questions],
                           lambda: [t for _, t, _ in rag.indexed_chunks()], "goldset")
    left_out_rows = tuple(LeftOut(q.query_id, q.question, tuple(q.lines), tuple(left_out[q.query_id]))
                          for q in goldset.questions if q.query_id in left_out)
    degraded = ev.degraded_reasons(ev.missing_files(scored, indexed), sum(f.severity == "error" for f in findings),
                                   len(left_out))
    questions = str(len(scored)) + (f" ({len(left_out)} more left out of the metrics: invalid expected "
                                    f"page)" if left_out else "")
    header = [("Goldset", f"{display_path(args.goldset)} ({plural(len(goldset.questions), 'question')})")]
    tail = [("Page tolerance", f"±{args.page_tolerance} (expected pages are 1-based)"), ("Questions", questions)]
    return CheckedGoldset(scored, left_out_rows, tuple(notes), degraded, indexed, header, tail)


def lint_warnings(questions: Sequence[gs.GoldQuestion], findings: Sequence[goldset_lint.LintFinding],
                  left_out: Mapping[str, Sequence[str]]) -> list[str]:
    """The lint findings as report warnings, each stated once: reader messages are already listed, and an invalid
    page is listed under 'Left out of the metrics' with its question."""
    stated = {(line, reason) for q in questions if q.query_id in left_out
              for line in q.lines for reason in left_out[q.query_id]}
    out = []
    for finding in findings:
        if finding.message.startswith("reader: ") or any((line, finding.message) in stated
                                                         for line in finding.lines):
            continue
        where = (f"line{'s' if len(finding.lines) > 1 else ''} {', '.join(map(str, finding.lines))}: "
                 if finding.lines else "")
        out.append(f"Goldset lint ({finding.severity}): {where}{finding.message}")
    return out


def score_goldset_row(args: argparse.Namespace, rag: LocalRAG, checked: CheckedGoldset, identity: str, name: str,
                      mode: str, rerank: bool) -> tuple[EvalResult, Mapping[str, Sequence[ev.Hit]]]:
    """One row of a goldset run: its result (configuration included) and the passages retrieved per question."""
    hits, traced = ev.retrieve_goldset(rag, checked.scored, max(args.k_values), mode, rerank,
                                       progress=not args.quiet, diagnostic_depth=args.diagnostic_depth,
                                       page_offset=args.page_offset, tolerance=args.page_tolerance)
    result = ev.evaluate_goldset(checked.scored, hits, checked.indexed, args.k_values,
                                 name=name or ev.config_name(mode, rerank), title=identity,
                                 page_offset=args.page_offset, tolerance=args.page_tolerance,
                                 traced=traced, stage_k=stage_cutoff(args.k_values, args.defaults.retrieval_k))
    config = config_block(rag, args, mode, rerank, checked.header, [q.question for q in checked.scored],
                          k=max(args.k_values))
    if mode == "union" and not rerank and all(t.dense_order for t in traced.values()):  # it scores as dense
        config = ev.with_union_note(config, max(args.k_values), rag.rank_by, rag.candidate_depth(max(args.k_values)))
    notes = (*checked.notes, *ineffective_settings(mode, rag.fusion, given_fusion_flags(args)))
    return dataclasses.replace(result, goldset=identity, config=tuple(config + checked.tail),
                               settings=settings_json(rag, args, mode, rerank), messages=notes,
                               left_out=checked.left_out), hits


def left_out_questions(questions: Sequence[gs.GoldQuestion], docs: dict[str, Any],
                       page_offset: int = PAGE_OFFSET) -> dict[str, list[str]]:
    """query_id -> why the question cannot be scored: a page the reader could not use, or one its indexed file
    does not have. Such a question is left out of the metrics, never widened to the whole file."""
    by_norm = {gs.normalize_source(name): doc for name, doc in docs.items()}
    out = {}
    for q in questions:
        reasons = [loc.problem for loc in q.locations if loc.problem]
        for loc in q.locations:
            doc = by_norm.get(gs.normalize_source(loc.source))
            problem = goldset_lint.page_range_problem(loc, doc, page_offset) if doc is not None else None
            if problem:
                reasons.append(problem)
        if reasons:
            out[q.query_id] = reasons
    return out


def add_judge(result: EvalResult, hits: Mapping[str, Sequence[ev.Hit]], questions: Sequence[gs.GoldQuestion],
              args: argparse.Namespace) -> tuple[EvalResult, list[str]]:
    """The result with the judge's verdicts on the first passages of every question, and why the judge degrades
    the run (it stopped, or returned unreadable replies)."""
    from localrag import judge

    k = args.judge_k or judge.JUDGE_K
    items = [judge.JudgeItem(q.query_id, q.question,
                             [judge.Passage(d.metadata["source"], shown_page(int(d.metadata["page"])),
                                            d.page_content) for d, _ in hits[q.query_id][:k]])
             for q in questions]
    cache = args.judge_cache or args.defaults.judge_cache
    if not getattr(args, "judge_server_checked", False):  # every question had a verdict before retrieval
        asked = judge.items_to_ask(items, args.judge, cache_path=cache, k=k, domain=args.judge_domain)
        if asked:
            require_judge_server(args, len(asked), len(items))
    run = judge.run_judge(items, args.judge, cache_path=cache,
                          max_new_calls=args.judge_max_calls, k=k, domain=args.judge_domain,
                          progress=None if args.quiet else lambda message: print(message, file=sys.stderr,
                                                                                 flush=True),
                          warn=lambda message: print(f"warning: {message}", file=sys.stderr, flush=True),
                          flag="--judge")
    log(args, judge.judge_calls_line(run))
    messages, degraded = list(result.messages), []
    if run.cache_warning:
        messages.append(run.cache_warning)
    if run.stopped:
        print(f"warning: judging stopped: {run.stopped}", file=sys.stderr)
        messages.append(f"Judging stopped early: {run.stopped}")
        degraded.append(f"the judge stopped before every question was judged: {run.stopped}")
    if run.unreadable:
        degraded.append(f"the judge's reply was unreadable for {plural(run.unreadable, 'question')} "
                        f"(see 'LLM judge'); check that {args.judge} answers in the requested JSON")
    limited = sum(v.error == judge.CALL_LIMIT for v in run.verdicts)
    if limited:
        degraded.append(f"the judge's call limit (--judge-max-calls {args.judge_max_calls}) left "
                        f"{plural(limited, 'question')} not judged; rerun to judge them (verdicts are cached)")
    by_id = {q.query_id: q.question for q in questions}
    ranks = result.ranks
    summary = judge.summarize_judge(run, ranks, k)
    judged = judge.judge_to_json(summary, run.verdicts, by_id, ranks)
    return dataclasses.replace(
        result, messages=tuple(messages), config=(*result.config, ("LLM judge", f"{args.judge}, first {k} passages")),
        judge_lines=tuple(eval_report.render_judge(judged)), judge=judged), degraded


def check_judge_server(args: argparse.Namespace, questions: Sequence[str]) -> None:
    """Before any retrieval: the judge's server asked once (llm.check_server) unless every question has a verdict
    of the judge model in its cache, so that a fully cached run needs no server. EvalError (exit 2, nothing
    written) when the server does not answer."""
    from localrag import judge

    missing = judge.questions_without_verdict(questions, args.judge, args.judge_cache or args.defaults.judge_cache)
    if missing:
        require_judge_server(args, len(missing), len(questions))


def require_judge_server(args: argparse.Namespace, needed: int, total: int) -> None:
    """EvalError (exit 2) when the judge's server does not answer one cheap request (llm.check_server), naming
    its URL, what failed and how to fix it; `needed` of `total` questions need a new verdict. Checked once a run."""
    from localrag import llm

    try:
        llm.check_server(llm.make_chat(args.judge, "--judge"), "judge")
    except llm.ChatError as exc:
        cache = display_path(args.judge_cache or args.defaults.judge_cache)
        raise EvalError(f"{exc} (or run without --judge). No report was written: {needed} of "
                        f"{plural(total, 'question')} need{'s' if needed == 1 else ''} a new verdict of {args.judge}, "
                        f"which the judge cache {cache} does not hold") from None
    args.judge_server_checked = True


def judge_incomplete(section: Mapping[str, Any] | None) -> str | None:
    """Why a judge section (result.judge) is incomplete: questions not judged or with unreadable replies; None
    when every question was judged, or there is no section."""
    if not section:
        return None
    summary = section["summary"]
    if summary["judged"] == summary["questions"]:
        return None
    return (f"the judge judged {summary['judged']} of {plural(summary['questions'], 'question')} "
            f"({summary['not_judged']} not judged, {summary['unreadable']} unreadable)")


def keep_complete_reports(result: EvalResult, args: argparse.Namespace) -> EvalResult:
    """Send the reports beside those at --report/--json when they must not replace them, with the reason on
    stderr and in the Notes: the committed baseline is replaced only by a complete run of its configuration
    (configuration.baseline_refusal; --replace-baseline overrides that rule, not the judge's), and a complete judge
    section only by a complete one. Changes `args.report` and `args.json`; the result with its note."""
    from localrag.configuration import baseline_refusal, difference_name
    from localrag.outputs import (beside_report_path, check_output_paths, input_paths, is_committed_baseline,
                                  output_paths, protected_folders)

    baseline = is_committed_baseline(args)
    incomplete = judge_incomplete(result.judge)
    if not (baseline or incomplete):
        return result
    try:
        old = load_json_report(args.json) if Path(args.json).exists() else None
    except EvalError:  # not a report of this tool: nothing complete to keep
        old = None
    reasons, names, advice = [], [], ""
    if incomplete and (baseline or (old is not None and old.judge and not judge_incomplete(old.judge))):
        reasons.append(f"{incomplete}, and a judge section that is not complete never replaces "
                       + ("the committed baseline" if baseline else "a complete one"))
        names.append("judge-incomplete")
        advice = "; rerun when the judge can answer (its verdicts so far are cached)"
    if baseline and old is not None and not getattr(args, "replace_baseline", False):
        if why := baseline_refusal(old.settings, result.settings):
            reasons.insert(0, f"{why}: the same settings ran another configuration on this machine")
            names.insert(0, difference_name(old.settings, result.settings))
            advice = "; to make this configuration the baseline, run again with --replace-baseline" + advice
    if not reasons:
        return result
    kept = display_path(args.report)
    args.report = beside_report_path(args, ".".join(names))
    args.json = str(Path(args.report).with_suffix(".json"))
    args.compare_file = None  # not the baseline: its comparison goes into its own report
    check_output_paths(output_paths(args), input_paths(args), protected_folders(args))
    note = f"Not written to {kept}: {'; '.join(reasons)}{advice}"
    log(args, f"warning: {kept} not replaced: {'; '.join(reasons)}. Reports written to {display_path(args.report)} "
              f"and {display_path(args.json)}{advice}")
    return dataclasses.replace(result, messages=(*result.messages, note))


def run_dataset(args: argparse.Namespace) -> list[EvalResult]:
    """Evaluate the BEIR dataset on each planned row's cached index of its documents and write the reports."""
    dataset, messages, degraded, sample_text = load_dataset(args)
    identity = f"dataset {Path(args.dataset).resolve().name} ({args.split})"
    queries = ev.dataset_queries(dataset)
    previous = previous_report(args, identity, [q.query_id for q in queries])
    records = [{"doc_id": d.doc_id, "title": d.title, "text": d.text, "metadata": d.metadata}
               for d in dataset.documents.values()]
    header = [("Dataset", f"{Path(args.dataset).resolve().name}, split {args.split} ({sample_text})")]
    rows = evaluation_rows(args)
    results: dict[int, EvalResult] = {}
    missing_rows, run, shared = "", {}, None
    vector_cache = query_vector_cache(args)
    for group in index_groups(rows):
        started = time.perf_counter()
        rag = open_dataset_index(args, dict(rows[group[0]].index), records)
        messages += [note for note in language_note(rag, [q.question for q in dataset.queries.values()],
                                                    lambda: [r["text"] for r in records], "queries")
                     if note not in messages]
        shared = share_query_vectors(rag, shared)
        configs, why_missing = row_configs(rag, args, [(n, rows[n]) for n in group])
        missing_rows = missing_rows or why_missing
        fill_query_vectors(rag, [q.question for q in queries], [mode for _, _, mode, _ in configs], args, vector_cache)
        setup = time.perf_counter() - started
        depth = max(args.k_values)
        k = ev.dataset_k(rag.info.get("counts", {}), depth)  # one k for every query and row of this index
        for number, row_name, mode, rerank in configs:
            started = time.perf_counter()
            run, stages = ev.retrieve_dataset(rag, dataset, depth, k, mode, rerank,
                                              progress=not args.quiet, diagnostic_depth=args.diagnostic_depth)
            result = ev.evaluate_dataset(dataset, run, args.k_values, name=row_name or ev.config_name(mode, rerank),
                                         title=identity, stages=stages,
                                         stage_k=stage_cutoff(args.k_values, args.defaults.retrieval_k))
            config = config_block(rag, args, mode, rerank, header, [q.question for q in queries], k=k) + [
                ("Scoring", scoring_text(rag, depth, k)), ("Queries", str(result.num_queries))]
            results[number] = dataclasses.replace(result, seconds=time.perf_counter() - started + setup,
                                                  goldset=identity, config=tuple(config),
                                                  settings=settings_json(rag, args, mode, rerank),
                                                  messages=(*messages, *result.messages,
                                                            *ev.short_lists_note(run, depth, k),
                                                            *ineffective_settings(mode, rag.fusion,
                                                                                  given_fusion_flags(args))))
            setup = 0.0
    return finish([results[n] for n in sorted(results)], args, previous, degraded, missing_rows, run=run)


def scoring_text(rag: LocalRAG, depth: int, k: int) -> str:
    """How a dataset run scores documents: the list it asks of every query (evaluate.dataset_k), and how its
    entries become documents."""
    counts = rag.info.get("counts", {})
    collapse = ("a document is one page, so the list holds each once" if rag.rank_by == "page" else
                "its chunks collapsed by doc_id (best chunk)")
    return (f"document level: each query's list is retrieve(query, k={k}) (one k for every query: {depth} x "
            f"{counts.get('chunks', 0)} chunks / {counts.get('files', 0)} documents x {ev.DATASET_OVERFETCH:g}, "
            f"rounded up); {collapse}; cut at {depth} documents")


def load_dataset(args: argparse.Namespace) -> tuple[Any, list[str], list[str], str]:
    """(dataset, its problem notes, why they degrade the run, what sample it is) of --dataset, sampled as
    --max-queries / --max-corpus-docs ask; datasets.DatasetError when it cannot be read."""
    from localrag import datasets as beir_data

    dataset = beir_data.load_beir(args.dataset, args.split)
    messages = list(dataset.problem_lines())
    for message in messages:
        log(args, f"warning: dataset: {message}")
    degraded = ev.dataset_degraded_reasons(messages)
    sample_text = "all queries and documents"
    if args.max_queries or args.max_corpus_docs:
        dataset, info = beir_data.sample_dataset(dataset, args.max_queries, args.max_corpus_docs, args.seed)
        sample_text = info.describe()
        messages.append("These numbers come from a sample: " + sample_text)
    return dataset, messages, degraded, sample_text


def open_dataset_index(args: argparse.Namespace, wanted: Mapping[str, Any], records: Sequence[dict]) -> LocalRAG:
    """The dataset's index for the index settings `wanted` (option names): --index, else its cache folder of
    those settings; synced with the dataset's documents."""
    index = args.index or dataset_index_path(args, wanted)
    # All settings are passed, so a cache folder is built with exactly the settings its name stands for.
    option_names = {index_name: option for option, index_name in INDEX_SETTINGS.items()}
    rag = open_rag(args, index, wanted if args.index else
                   {option_names[key]: value for key, value in dataset_settings(args, wanted).items()})
    report = rag.sync_records(records, rebuild=args.rebuild, progress=not args.quiet)
    if report.changed:
        log(args, "Dataset index synced: " + report.summary())
    return rag


def language_note(rag: LocalRAG, questions: Sequence[str], indexed: Callable[[], Sequence[str]],
                  what: str) -> list[str]:
    """The note that the embedding model does not cover the language of the questions or the text (or none).

    `indexed` gives the indexed texts; it reads the whole store, so it is called only for an English-only model."""
    model = rag.display_settings["embedding_model"]
    if not models.english_only(model):
        return []
    hint = language.language_hint(model, questions, indexed(), what)
    return [hint] if hint else []


def stage_cutoff(ks: Sequence[int], retrieval_k: int) -> int:
    """The cutoff of "Where the misses are lost": the first that holds the `retrieval_k` passages the chat
    gets, else the deepest."""
    return min((k for k in ks if k >= retrieval_k), default=max(ks))


def previous_report(args: argparse.Namespace, identity: str,
                    query_ids: Sequence[str]) -> tuple[EvalResult | None, str, str]:
    """(report to compare with, its label, why there is none): --compare-to; else, for a run of other settings, the
    report of the run it differs from (args.settings_base_json); else the JSON report about to be overwritten if it
    evaluated the same goldset. An explicit --compare-to over other questions (without --intersect) is an
    EvalError here, before any retrieval."""
    if args.no_compare:
        return None, "", "--no-compare was given"
    if args.compare_to:
        old = load_json_report(args.compare_to)
        ev.common_questions([q.query_id for q in old.per_query], query_ids, args.intersect)
        return old, display_path(args.compare_to), ""
    shown = display_path(args.json)
    path = Path(args.json)
    if args.settings_base_json and Path(args.settings_base_json).exists():
        # A run of other settings answers "did this setting help?": compare with the run it differs from, not with
        # its own previous report (outputs.resolve_report_paths).
        path = Path(args.settings_base_json)
        shown = display_path(path)
    if not path.exists():
        return None, "", f"there is no previous report at {shown}; give one with --compare-to REPORT.json"
    try:
        old = load_json_report(path)
    except EvalError as exc:
        log(args, f"warning: not comparing with the previous report: {exc}")
        return None, "", f"the previous report is unreadable: {exc}"
    if old.identity != identity:
        why = (f"the previous report {shown} is of {old.identity or 'an unknown goldset'}, this run of "
               f"{identity}; give --compare-to {shown} to compare them anyway")
        log(args, f"warning: not compared: {why}")
        return None, "", why
    return old, f"{'previous report' if path == Path(args.json) else 'report'} {shown}", ""


def finish(results: list[EvalResult], args: argparse.Namespace, previous: tuple[EvalResult | None, str, str],
           degraded: Sequence[str], missing_rows: str = "",
           run: Mapping[str, dict[str, float]] | None = None,
           trec: tuple[Mapping[str, dict[str, float]], Mapping[str, dict[str, int]]] | None = None) -> list[EvalResult]:
    """Compare, check the gates, write the reports (and the --run-file of a dataset `run`, or a goldset's `trec`
    run and qrels, written all or none with the reports); the results with their status."""
    generated = time.strftime("%Y-%m-%d %H:%M:%S")
    results = [dataclasses.replace(r, generated=generated) for r in results]
    if not results:  # a sweep whose every row asked for a reranker that could not be loaded
        raise EvalError(f"no row of the sweep could be evaluated: {missing_rows}")
    if len(results) == 1 and not (args.sweep_axes or args.ablation):  # before the details file is named
        results = [keep_complete_reports(results[0], args)]
    if not args.dataset:  # a goldset's questions not at rank 1 get their passages in the details file
        results = [dataclasses.replace(r, details=display_path(details_path(args.report))) for r in results]
    if args.sweep_axes:
        return write_sweep(results, args, degraded, missing_rows)
    if len(results) > 1:
        return write_ablation(results, args, degraded, missing_rows)
    result = results[0]
    old, label, why_not = previous
    if old is not None:
        # The previous report at the output path is overwritten now, so "rerun with --intersect" would compare
        # the run with itself: compare the common questions, or say why there is no comparison.
        implicit = not args.compare_to
        try:
            result = dataclasses.replace(result, compare=ev.compare_results(
                old, result, args.intersect or implicit, label, resamples=args.resamples))
        except EvalError as exc:
            if not implicit:
                raise
            why_not = f"not compared with the {label}: {exc}"
            log(args, f"warning: {why_not}")
            result = dataclasses.replace(result, messages=(*result.messages, why_not[0].upper() + why_not[1:]))
    failed = ev.gate_failures(result.metrics, args.fail_under, args.fail_on_regression, result.compare, why_not)
    result = dataclasses.replace(result, status=ev.run_status(degraded, failed, gate_descriptions(args)))
    write_outputs(result, args, trec_files(args, result.name, *trec) if args.run_file and trec else ())
    if args.run_file and run is not None:
        from localrag import datasets as beir_data

        try:
            beir_data.write_trec_run(args.run_file, run, tag=f"localrag-{result.name.replace(' ', '')}")
        except beir_data.RunFormatError as exc:
            raise EvalError(f"--run-file {args.run_file} not written (the reports are): {exc}") from None
    return [result]


def trec_files(args: argparse.Namespace, name: str, run: Mapping[str, dict[str, float]],
               qrels: Mapping[str, dict[str, int]]) -> list[tuple[str, str]]:
    """(path, text) of a goldset run's --run-file and its qrels (--qrels-file); EvalError, before anything is
    written, when they cannot be written as TREC."""
    from localrag import datasets as beir_data

    try:
        return [(args.run_file, beir_data.render_trec_run(run, tag=f"localrag-{name.replace(' ', '')}")),
                (qrels_path(args), beir_data.render_trec_qrels(qrels))]
    except beir_data.RunFormatError as exc:
        raise EvalError(f"--run-file {args.run_file} cannot be written: {exc}; no report was written") from None


def gate_descriptions(args: argparse.Namespace) -> list[str]:
    """The gates of this run as the status line names them."""
    gates = [f"{key} >= {threshold:g}" for key, threshold in args.fail_under]
    return gates + (["no metric worse than the compared report"] if args.fail_on_regression else [])


def write_table(table_text: str, results: Sequence[EvalResult], path: Path, args: argparse.Namespace) -> None:
    """An --ablation or --sweep table: written to `path` (and --markdown), printed, with the run's status."""
    files = [(str(path), table_text)]
    if args.markdown:
        rows, keys = eval_report.ablation_table(results)
        files.append((args.markdown, "\n".join(eval_report.render_table(rows, keys, markdown=True,
                                                                        extra=["seconds"])) + "\n"))
    write_reports(files)
    print(table_text, end="")
    print_status(results[0].status, args)


def write_ablation(results: list[EvalResult], args: argparse.Namespace, degraded: Sequence[str],
                   missing_rows: str = "") -> list[EvalResult]:
    """One table over all configurations (written and printed) plus one report per configuration beside it."""
    results = [dataclasses.replace(r, status=ev.run_status(degraded, [], [])) for r in results]
    reference = ablation_reference(results, args.mode)
    label = f"{results[reference].name} (the configured retriever)"
    others = [r for n, r in enumerate(results) if n != reference]
    compared = iter(ev.compare_rows(results[reference], others, True, label, resamples=args.resamples,
                                    keys=eval_report.SWEEP_COMPARE_METRICS) if others else [])
    results = [r if n == reference else dataclasses.replace(r, compare=next(compared)) for n, r in enumerate(results)]
    base = Path(args.report)
    write_row_reports(results, [base.with_name(f"{base.stem}-{r.name.replace(' + ', '-')}.txt") for r in results])
    table_text = eval_report.render_ablation(results, missing_rows,
                                             display_path(base.with_name(base.stem + "-<configuration>.txt")),
                                             label)
    write_table(table_text, results, base, args)
    log(args, f"Ablation: {len(results)} configurations in {sum(r.seconds for r in results):.1f} s of retrieval")
    return results


def ablation_reference(results: Sequence[EvalResult], mode: str) -> int:
    """The row an ablation compares the others with: the configured retriever, `mode` reranked when the table has
    reranked rows (the reranker loaded and was not turned off), else `mode` alone; the first row if neither is
    there."""
    names = [r.name for r in results]
    reranked = any(name.endswith(" + rerank") for name in names)
    wanted = ev.config_name(mode, reranked)
    return names.index(wanted) if wanted in names else 0


def write_sweep(results: list[EvalResult], args: argparse.Namespace, degraded: Sequence[str],
                missing_rows: str = "") -> list[EvalResult]:
    """The sweep table (written and printed), each row compared with the first by the paired test, plus one
    report per row beside it (its comparison with the first row included)."""
    first = results[0]
    label = f"first row ({first.name})"
    # Every row against the first on the table's metrics: one family of tests, adjusted together (Holm).
    compared = ev.compare_rows(first, results[1:], True, label, resamples=args.resamples,
                               keys=eval_report.SWEEP_COMPARE_METRICS) if len(results) > 1 else []
    results = [dataclasses.replace(r, status=ev.run_status(degraded, [], []), compare=None if n == 0 else
                                   compared[n - 1]) for n, r in enumerate(results)]
    base = Path(args.report)
    write_row_reports(results, [base.with_name(f"{base.stem}-{slug(r.name.replace('=', '-').replace(' ', '.'))}.txt")
                                for r in results])
    axes = [(axis, [format_setting(v) for v in values]) for axis, values in args.sweep_axes]
    table_text = eval_report.render_sweep(results, axes, missing_rows,
                                          display_path(base.with_name(base.stem + "-<row>.txt")))
    write_table(table_text, results, base, args)
    log(args, f"Sweep: {len(results)} configurations in {sum(r.seconds for r in results):.1f} s; table written to "
              f"{display_path(base)}")
    return results


def print_summary(result: EvalResult, args: argparse.Namespace) -> None:
    """The comparison (every run that has one says its verdict) and the metrics line on stdout, then the outcome
    on stderr."""
    if result.compare:
        print("\n".join(eval_report.render_compare(result.compare)))
    parts = [f"{eval_report.metric_label(k)} {eval_report.fmt(v)}" for k, v in result.metrics.items()]
    print(f"{result.name}: " + ", ".join(parts) + f" ({plural(result.num_queries, 'question')})")
    print_outcome(result, args)


def print_outcome(result: EvalResult, args: argparse.Namespace) -> None:
    """The status (always when the exit code is not 0) and where the reports went, on stderr."""
    print_status(result.status, args)
    log(args, f"Report written to {display_path(args.report)} and {display_path(args.json)}")


def print_status(status: Status, args: argparse.Namespace) -> None:
    """The status lines on stderr: always when the exit code is not 0 (a failure is no progress note)."""
    if status.exit_code != EXIT_OK or not args.quiet:
        print("\n".join(eval_report.render_status(status)), file=sys.stderr, flush=True)
