"""An evaluation run: each planned row retrieved and scored on its index, compared with the previous report,
gated, and written (one report, or an --ablation / --sweep table with one report per row).

A goldset run lints the goldset against each index first and leaves out questions whose expected page cannot be
scored; a dataset run syncs a cached index of the dataset's documents. Scoring lives in localrag/evaluation/scoring.py,
the plan in localrag/runs/plan.py, the indexes in localrag/runs/indexes.py, the paths in localrag/runs/outputs.py.
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from localrag.evaluation import scoring as ev
from localrag.goldset import format as gs
from localrag.text import language
from localrag.models import loading
from localrag.settings import mode_of
from localrag.evaluation import report as eval_report
from localrag.runs import answering as answers_run
from localrag.runs.config_block import config_block, settings_json
from localrag.goldset import lint as goldset_lint
from localrag.runs.defaults import EvalOptions, Gates, LocalRAGLike, log
from localrag.errors import EvalError
from localrag.files import display_path
from localrag.evaluation.judge import Judging
from localrag.runs.outputs import (chosen_formats, details_path, load_json_report, qrels_path, write_outputs,
                                   write_reports, write_row_reports)
from localrag.text.pages import PAGE_OFFSET, shown_page
from localrag.evaluation.report import plural
from localrag.evaluation.result import EXIT_OK, EvalResult, LeftOut, Status
from localrag.runs.indexes import fill_query_vectors, open_pdf_index, open_rag, query_vector_cache, share_query_vectors
from localrag.runs.plan import (INDEX_SETTINGS, dataset_index_path, dataset_settings, evaluation_rows, format_setting,
                                given_fusion_flags, index_groups, ineffective_settings, row_configs, slug)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What an evaluation gives back: its results (one, or an --ablation's or --sweep's rows, each with its status)
    and where its report and JSON report went (beside --report when the report there was kept); `written`: every
    file it wrote, as the run's last line names them (files.wrote_line)."""

    results: list[EvalResult]
    report: str
    json: str
    written: tuple[str, ...] = ()


def evaluate(options: EvalOptions, held: contextlib.ExitStack) -> Outcome:
    """Evaluate the goldset or dataset of `options` and write the reports: one result with its status, or with
    --ablation one per configuration (the table is printed). Each index's writer lock is held on `held`."""
    return run_dataset(options, held) if options.dataset else run_goldset(options, held)


def run_goldset(options: EvalOptions, held: contextlib.ExitStack) -> Outcome:
    """Evaluate the goldset on each planned row's index (opened and linted once per index) and write the reports."""
    goldset = gs.read_goldset(options.goldset, options.defaults.goldset_template)
    for message in goldset.messages:
        log(f"warning: goldset: {message}", options.quiet)
    if options.answer_labels and (options.answers or options.answer_model):  # before any index or model
        answers_run.check_label_ids(answers_run.read_labels(options.answer_labels), options.answer_labels,
                                    [q.query_id for q in goldset.questions], options.goldset)
    judging, judge_server_checked = options.judging, False
    if judging:  # a question whose location cannot be read is left out: it never gets a verdict
        judge_server_checked = check_judge_server(judging, [q.question for q in goldset.questions
                                                            if not any(loc.problem for loc in q.locations)])
    identity = "goldset " + display_path(options.goldset)
    rows = evaluation_rows(options)
    results: dict[int, EvalResult] = {}
    degraded: list[str] = []
    missing_rows, previous, hits, checked, shared = "", None, {}, None, None
    vector_cache = query_vector_cache(options)
    for group in index_groups(rows):
        opened = open_pdf_index(options, held, dict(rows[group[0]].index))
        rag = opened.rag
        shared = share_query_vectors(rag, shared)
        checked = check_goldset(options, goldset, rag, opened.warnings)
        if previous is None:
            previous = previous_report(options, identity, [q.query_id for q in checked.scored])
        degraded += [reason for reason in checked.degraded if reason not in degraded]
        configs, why_missing = row_configs(rag, options.ablation, [(n, rows[n]) for n in group])
        missing_rows = missing_rows or why_missing
        fill_query_vectors(rag, [q.question for q in checked.scored], [mode for _, _, mode, _ in configs], options,
                           vector_cache)
        setup = opened.seconds  # the first row on an index carries its opening and sync (a build included)
        for number, name, mode, rerank in configs:
            started = time.perf_counter()
            result, hits = score_goldset_row(options, rag, checked, identity, name, mode, rerank)
            results[number] = dataclasses.replace(result, seconds=time.perf_counter() - started + setup)
            setup = 0.0
    results_list = [results[n] for n in sorted(results)]
    if judging:  # one configuration: --judge and --ablation/--sweep exclude each other
        results_list[0], judge_degraded = add_judge(results_list[0], hits, checked.scored, judging,
                                                    judge_server_checked, options.quiet)
        degraded += judge_degraded
    answering = answers_run.answering_of(options)
    if answering:  # one configuration, as --judge
        results_list[0], answer_degraded = answers_run.add_answers(results_list[0], hits, checked.scored, answering,
                                                                   options.page_tolerance, options.quiet)
        degraded += answer_degraded
    # One configuration (--run-file and --ablation/--sweep exclude each other): its lists and the qrels of its index.
    trec = (goldset_trec(rag, checked, hits, options.page_offset, options.page_tolerance)
            if options.run_file and len(results_list) == 1 else None)
    return finish(results_list, options, previous, degraded, missing_rows, trec=trec)


def goldset_trec(rag: LocalRAGLike, checked: CheckedGoldset, hits: Mapping[str, Sequence[ev.Hit]], page_offset: int,
                 tolerance: int) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, int]]]:
    """(TREC run, qrels) of a goldset run's scored lists: pages when ranking by page, chunks when by chunk (every
    indexed page, or chunk, a candidate of the qrels, within `tolerance` pages); the questions left out of the
    metrics are in neither."""
    units = (ev.page_units(checked.indexed, page_offset) if rag.rank_by == "page"
             else ev.chunk_units(rag.indexed_chunks(), page_offset))
    return (ev.goldset_run(hits, page_offset, rag.rank_by),
            ev.goldset_qrels(checked.scored, units, page_offset, tolerance))


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


def check_goldset(options: EvalOptions, goldset: gs.Goldset, rag: LocalRAGLike,
                  warnings: list[str]) -> CheckedGoldset:
    """Lint the goldset against `rag`'s index (each finding a warning), leave out what cannot be scored; EvalError
    when nothing can be. `warnings`: the index's sync warnings, which the notes carry first."""
    docs = goldset_lint.index_docs(rag)
    findings = goldset_lint.lint_index(rag, goldset.questions, goldset.messages, docs, progress=not options.quiet)
    refuse_ambiguous(findings, options.goldset)
    left_out = left_out_questions(goldset.questions, docs)
    for warning in lint_warnings(goldset.questions, findings, left_out):
        warnings.append(warning)
        log(f"warning: {warning}", options.quiet)
    scored = [q for q in goldset.questions if q.query_id not in left_out]
    if not scored:
        raise EvalError(f"every question of {display_path(options.goldset)} has an invalid expected page (see the "
                        f"warnings above), so nothing can be evaluated; fix the pages and rerun")
    indexed = {d["source"]: d for d in rag.list_documents()}
    notes = [*goldset.messages, *warnings]  # a missing file is in the notes as a lint error on its line
    notes += language_note(rag, [q.question for q in goldset.questions], lambda: shelf_german_share(rag), "goldset")
    left_out_rows = tuple(LeftOut(q.query_id, q.question, tuple(q.lines), tuple(left_out[q.query_id]))
                          for q in goldset.questions if q.query_id in left_out)
    degraded = ev.degraded_reasons(ev.missing_files(scored, indexed), sum(f.severity == "error" for f in findings),
                                   len(left_out))
    questions = str(len(scored)) + (f" ({len(left_out)} more left out of the metrics: invalid expected "
                                    f"page)" if left_out else "")
    header = [("Goldset", f"{display_path(options.goldset)} ({plural(len(goldset.questions), 'question')})")]
    tail = [("Page tolerance", f"±{options.page_tolerance} (expected pages are 1-based)"), ("Questions", questions)]
    return CheckedGoldset(scored, left_out_rows, tuple(notes), degraded, indexed, header, tail)


def refuse_ambiguous(findings: Sequence[goldset_lint.LintFinding], goldset: str | Path) -> None:
    """EvalError (exit 2) when the goldset names a file by a name that fits files in several folders: a page of
    either would be credited, so nothing is scored until the goldset says which."""
    ambiguous = [f for f in findings if f.kind == goldset_lint.AMBIGUOUS]
    if not ambiguous:
        return
    named = "; ".join(f"{goldset_lint.where_text(f.lines)}: {f.message}" for f in ambiguous[:3])
    more = f"; and {len(ambiguous) - 3} more (run --lint)" if len(ambiguous) > 3 else ""
    raise EvalError(f"{display_path(goldset)}: {named}{more}; nothing was evaluated")


def lint_warnings(questions: Sequence[gs.GoldQuestion], findings: Sequence[goldset_lint.LintFinding],
                  left_out: Mapping[str, Sequence[str]]) -> list[str]:
    """The lint findings as report warnings, each stated once: reader messages are already listed, and an invalid
    page is listed under 'Left out of the metrics' with its question. Past SHOWN_PER_KIND findings of a kind, one
    warning counts the rest (goldset_lint.shown_findings), so the notes stay a page long."""
    stated = {(line, reason) for q in questions if q.query_id in left_out
              for line in q.lines for reason in left_out[q.query_id]}
    kept = [finding for finding in findings
            if not finding.message.startswith("reader: ")
            and not any((line, finding.message) in stated for line in finding.lines)]
    out = []
    for finding in goldset_lint.shown_findings(kept):
        where = f"{goldset_lint.where_text(finding.lines)}: " if finding.lines else ""
        out.append(f"Goldset lint ({finding.severity}): {where}{finding.message}")
    return out


def score_goldset_row(options: EvalOptions, rag: LocalRAGLike, checked: CheckedGoldset, identity: str, name: str,
                      mode: str, rerank: bool) -> tuple[EvalResult, Mapping[str, Sequence[ev.Hit]]]:
    """One row of a goldset run: its result (configuration included) and the passages retrieved per question."""
    scoring = goldset_scoring(options)
    hits, traced = ev.retrieve_goldset(rag, checked.scored, scoring, mode, rerank, progress=not options.quiet)
    result = ev.evaluate_goldset(checked.scored, hits, checked.indexed, scoring,
                                 name=name or ev.config_name(mode, rerank), title=identity, traced=traced)
    config = config_block(rag, options, mode, rerank, checked.header, [q.question for q in checked.scored],
                          k=max(options.k_values))
    if mode_of(mode).dense_first and not rerank and all(t.dense_order for t in traced.values()):  # it scores as dense
        depth = max(options.k_values)
        config = ev.with_union_note(config, depth, rag.rank_by, rag.candidate_depth(depth))
    notes = (*checked.notes, *ineffective_settings(mode, rag.fusion, given_fusion_flags(options)))
    return dataclasses.replace(result, goldset=identity, config=tuple(config + checked.tail),
                               settings=settings_json(rag, options, mode, rerank), messages=notes,
                               left_out=checked.left_out), hits


def left_out_questions(questions: Sequence[gs.GoldQuestion], docs: dict[str, Any],
                       page_offset: int = PAGE_OFFSET) -> dict[str, list[str]]:
    """query_id -> why the question cannot be scored: a page the reader could not use, or one its indexed file
    does not have. Such a question is left out of the metrics, never widened to the whole file."""
    files = goldset_lint.IndexedFiles(docs, page_offset=page_offset)
    out = {}
    for q in questions:
        reasons = [loc.problem for loc in q.locations if loc.problem]
        for loc in q.locations:
            name = files.name_of(loc.source)  # None also for an ambiguous name, which check_goldset refuses
            problem = goldset_lint.page_range_problem(loc, docs[name], page_offset) if name is not None else None
            if problem:
                reasons.append(problem)
        if reasons:
            out[q.query_id] = reasons
    return out


def add_judge(result: EvalResult, hits: Mapping[str, Sequence[ev.Hit]], questions: Sequence[gs.GoldQuestion],
              judging: Judging, server_checked: bool, quiet: bool) -> tuple[EvalResult, list[str]]:
    """The result with the judge's verdicts on the first passages of every question, and why the judge degrades
    the run (it stopped, or returned unreadable replies). `server_checked`: the server answered before retrieval."""
    from localrag.evaluation import judge

    k = judging.k or judge.JUDGE_K
    items = [judge.JudgeItem(q.query_id, q.question,
                             [judge.Passage(d.metadata["source"], shown_page(int(d.metadata["page"])),
                                            d.page_content) for d, _ in hits[q.query_id][:k]])
             for q in questions]
    cache = judging.cache
    if not server_checked:  # every question had a verdict before retrieval
        asked = judge.items_to_ask(items, judging.model, cache_path=cache, k=k, domain=judging.domain)
        if asked:
            require_judge_server(judging, len(asked), len(items))
    run = judge.run_judge(items, dataclasses.replace(judging, k=k),
                          progress=None if quiet else lambda message: print(message, file=sys.stderr, flush=True),
                          warn=lambda message: log(f"warning: {message}", False),  # once a run, also under --quiet
                          flag="--judge")
    log(judge.judge_calls_line(run), quiet)
    messages, degraded = list(result.messages), []
    if run.cache_warning:
        messages.append(run.cache_warning)
    if run.stopped:
        log(f"warning: judging stopped: {run.stopped}", False)
        messages.append(f"Judging stopped early: {run.stopped}")
        degraded.append(f"the judge stopped before every question was judged: {run.stopped}")
    if run.unreadable:
        degraded.append(f"the judge's reply was unreadable for {plural(run.unreadable, 'question')} "
                        f"(see 'LLM judge'); check that {judging.model} answers in the requested JSON")
    limited = sum(v.error == judge.CALL_LIMIT for v in run.verdicts)
    if limited:
        degraded.append(f"the judge's call limit (--judge-max-calls {judging.max_calls}) left "
                        f"{plural(limited, 'question')} not judged; rerun to judge them (verdicts are cached)")
    by_id = {q.query_id: q.question for q in questions}
    ranks = result.ranks
    summary = judge.summarize_judge(run, ranks, k)
    judged = judge.judge_to_json(summary, run.verdicts, by_id, ranks)
    return dataclasses.replace(
        result, messages=tuple(messages),
        config=(*result.config, ("LLM judge", f"{judging.model}, first {k} passages")),
        judge_lines=tuple(eval_report.render_judge(judged)), judge=judged), degraded


def check_judge_server(judging: Judging, questions: Sequence[str]) -> bool:
    """Before any retrieval: the judge's server asked once (llm.check_server) unless every question has a verdict
    of the judge model in its cache, so that a fully cached run needs no server; whether it was asked. EvalError
    (exit 2, nothing written) when the server does not answer."""
    from localrag.evaluation import judge

    missing = judge.questions_without_verdict(questions, judging.model, judging.cache)
    if missing:
        require_judge_server(judging, len(missing), len(questions))
    return bool(missing)


def require_judge_server(judging: Judging, needed: int, total: int) -> None:
    """EvalError (exit 2) when the judge's server does not answer one cheap request (llm.check_server), naming
    its URL, what failed and how to fix it; `needed` of `total` questions need a new verdict. Checked once a run."""
    from localrag.models import llm

    try:
        llm.check_server(llm.make_chat(judging.model, "--judge"), "judge")
    except llm.ChatError as exc:
        cache = display_path(judging.cache)
        raise EvalError(f"{exc} (or run without --judge). No report was written: {needed} of "
                        f"{plural(total, 'question')} need{'s' if needed == 1 else ''} a new verdict of "
                        f"{judging.model}, which the judge cache {cache} does not hold") from None


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


def keep_complete_reports(result: EvalResult, options: EvalOptions) -> tuple[EvalResult, EvalOptions]:
    """Send the reports beside those at --report/--json when they must not replace them, with the reason on
    stderr and in the Notes: the committed baseline is replaced only by a complete run of its configuration
    (configuration.baseline_refusal; --replace-baseline overrides that rule, not the judge's), and a complete judge
    section only by a complete one. The result with its note, and the options with the report paths it goes to."""
    from localrag.runs.config_block import baseline_refusal, difference_name
    from localrag.runs.outputs import beside_report_path, check_outputs, is_committed_baseline, output_paths

    baseline = is_committed_baseline(options.report, options.json, options.defaults.report)
    incomplete = judge_incomplete(result.judge)
    if not (baseline or incomplete):
        return result, options
    try:
        old = load_json_report(options.json) if Path(options.json).exists() else None
    except EvalError:  # not a report of this tool: nothing complete to keep
        old = None
    reasons, names, advice = [], [], ""
    if incomplete and (baseline or (old is not None and old.judge and not judge_incomplete(old.judge))):
        reasons.append(f"{incomplete}, and a judge section that is not complete never replaces "
                       + ("the committed baseline" if baseline else "a complete one"))
        names.append("judge-incomplete")
        advice = "; rerun when the judge can answer (its verdicts so far are cached)"
    if baseline and old is not None and not options.replace_baseline:
        if why := baseline_refusal(old.settings, result.settings):
            reasons.insert(0, f"{why}: the same settings ran another configuration on this machine")
            names.insert(0, difference_name(old.settings, result.settings))
            advice = "; to make this configuration the baseline, run again with --replace-baseline" + advice
    if not reasons:
        return result, options
    kept = display_path(options.report)
    report = beside_report_path(options, ".".join(names))
    # Not the baseline: its comparison goes into its own report.
    options = dataclasses.replace(options, report=report, json=str(Path(report).with_suffix(".json")),
                                  compare_file=None)
    check_outputs(options, output_paths(options))
    note = f"Not written to {kept}: {'; '.join(reasons)}{advice}"
    log(f"warning: {kept} not replaced: {'; '.join(reasons)}. Reports written to {display_path(options.report)} "
        f"and {display_path(options.json)}{advice}", options.quiet)
    return dataclasses.replace(result, messages=(*result.messages, note)), options


def run_dataset(options: EvalOptions, held: contextlib.ExitStack) -> Outcome:
    """Evaluate the BEIR dataset on each planned row's cached index of its documents and write the reports."""
    dataset, messages, degraded, sample_text = load_dataset(options)
    identity = f"dataset {Path(options.dataset).resolve().name} ({options.split})"
    queries = ev.dataset_queries(dataset)
    previous = previous_report(options, identity, [q.query_id for q in queries])
    records = [{"doc_id": d.doc_id, "title": d.title, "text": d.text, "metadata": d.metadata}
               for d in dataset.documents.values()]
    header = [("Dataset", f"{Path(options.dataset).resolve().name}, split {options.split} ({sample_text})")]
    rows = evaluation_rows(options)
    results: dict[int, EvalResult] = {}
    missing_rows, run, shared = "", {}, None
    vector_cache = query_vector_cache(options)
    for group in index_groups(rows):
        started = time.perf_counter()
        rag = open_dataset_index(options, held, dict(rows[group[0]].index), records)
        messages += [note for note in language_note(rag, [q.question for q in dataset.queries.values()],
                                                    lambda: language.german_share(language.spread_sample(
                                                        [r["text"] for r in records])), "queries")
                     if note not in messages]
        shared = share_query_vectors(rag, shared)
        configs, why_missing = row_configs(rag, options.ablation, [(n, rows[n]) for n in group])
        missing_rows = missing_rows or why_missing
        fill_query_vectors(rag, [q.question for q in queries], [mode for _, _, mode, _ in configs], options,
                           vector_cache)
        setup = time.perf_counter() - started
        depth = max(options.k_values)
        k = ev.dataset_k(rag.info.get("counts", {}), depth)  # one k for every query and row of this index
        for number, row_name, mode, rerank in configs:
            started = time.perf_counter()
            run, stages = ev.retrieve_dataset(rag, dataset, depth, k, mode, rerank,
                                              progress=not options.quiet, diagnostic_depth=options.diagnostic_depth)
            result = ev.evaluate_dataset(dataset, run, options.k_values, name=row_name or ev.config_name(mode, rerank),
                                         title=identity, stages=stages,
                                         stage_k=stage_cutoff(options.k_values, options.defaults.retrieval_k))
            config = config_block(rag, options, mode, rerank, header, [q.question for q in queries], k=k) + [
                ("Scoring", scoring_text(rag, depth, k)), ("Queries", str(result.num_queries))]
            results[number] = dataclasses.replace(result, seconds=time.perf_counter() - started + setup,
                                                  goldset=identity, config=tuple(config),
                                                  settings=settings_json(rag, options, mode, rerank),
                                                  messages=(*messages, *result.messages,
                                                            *ev.short_lists_note(run, depth, k),
                                                            *ineffective_settings(mode, rag.fusion,
                                                                                  given_fusion_flags(options))))
            setup = 0.0
    return finish([results[n] for n in sorted(results)], options, previous, degraded, missing_rows, run=run)


def scoring_text(rag: LocalRAGLike, depth: int, k: int) -> str:
    """How a dataset run scores documents: the list it asks of every query (evaluate.dataset_k), and how its
    entries become documents."""
    counts = rag.info.get("counts", {})
    collapse = ("a document is one page, so the list holds each once" if rag.rank_by == "page" else
                "its chunks collapsed by doc_id (best chunk)")
    return (f"document level: each query's list is retrieve(query, k={k}) (one k for every query: {depth} x "
            f"{counts.get('chunks', 0)} chunks / {counts.get('files', 0)} documents x {ev.DATASET_OVERFETCH:g}, "
            f"rounded up); {collapse}; cut at {depth} documents")


def load_dataset(options: EvalOptions) -> tuple[Any, list[str], list[str], str]:
    """(dataset, its problem notes, why they degrade the run, what sample it is) of --dataset, sampled as
    --max-queries / --max-corpus-docs ask; datasets.DatasetError when it cannot be read."""
    from localrag.datasets import beir as beir_data

    dataset = beir_data.load_beir(options.dataset, options.split)
    messages = list(dataset.problem_lines())
    for message in messages:
        log(f"warning: dataset: {message}", options.quiet)
    degraded = ev.dataset_degraded_reasons(messages)
    sample_text = "all queries and documents"
    if options.max_queries or options.max_corpus_docs:
        dataset, info = beir_data.sample_dataset(dataset, options.max_queries, options.max_corpus_docs, options.seed)
        sample_text = info.describe()
        messages.append("These numbers come from a sample: " + sample_text)
    return dataset, messages, degraded, sample_text


def open_dataset_index(options: EvalOptions, held: contextlib.ExitStack, wanted: Mapping[str, Any],
                       records: Sequence[dict]) -> LocalRAGLike:
    """The dataset's index for the index settings `wanted` (option names): --index, else its cache folder of
    those settings; synced with the dataset's documents, its writer lock held on `held`."""
    index = options.index or dataset_index_path(options, wanted)
    # All settings are passed, so a cache folder is built with exactly the settings its name stands for.
    option_names = {index_name: option for option, index_name in INDEX_SETTINGS.items()}
    rag = open_rag(options, held, index, wanted if options.index else
                   {option_names[key]: value for key, value in dataset_settings(options, wanted).items()})
    report = rag.sync_records(records, rebuild=options.rebuild, progress=not options.quiet)
    if report.changed:
        log("Dataset index synced: " + report.summary(), options.quiet)
    return rag


def language_note(rag: LocalRAGLike, questions: Sequence[str], indexed_share: Callable[[], float | None],
                  what: str) -> list[str]:
    """The note that the embedding model does not cover the language of the questions or the text (or none).

    `indexed_share` gives the indexed text's German share (language.language_hint); called only for an
    English-only model."""
    model = rag.display_settings["embedding_model"]
    if not loading.english_only(model):
        return []
    hint = language.language_hint(model, questions, indexed_share(), what)
    return [hint] if hint else []


def shelf_german_share(rag: LocalRAGLike) -> float | None:
    """The German share of an index's chunks as its sync recorded it per file; for an index synced before that was
    recorded, guessed from an evenly spread sample of its texts (one read of the store, until a sync records it)."""
    recorded, share = language.recorded_german_share(rag.info.get("files", {}))
    if recorded:
        return share
    return language.german_share(language.spread_sample([t for _, t, _ in rag.indexed_chunks()]))


def goldset_scoring(options: EvalOptions) -> ev.Scoring:
    """How a goldset run of `options` is scored: its cutoffs, page offset and tolerance, diagnostic depth and the
    stage cutoff (stage_cutoff)."""
    return ev.Scoring(tuple(options.k_values), options.page_offset, options.page_tolerance,
                      diagnostic_depth=options.diagnostic_depth,
                      stage_k=stage_cutoff(options.k_values, options.defaults.retrieval_k))


def stage_cutoff(ks: Sequence[int], retrieval_k: int) -> int:
    """The cutoff of "Where the misses are lost": the first that holds the `retrieval_k` passages the chat
    gets, else the deepest."""
    return min((k for k in ks if k >= retrieval_k), default=max(ks))


def previous_report(options: EvalOptions, identity: str,
                    query_ids: Sequence[str]) -> tuple[EvalResult | None, str, str]:
    """(report to compare with, its label, why there is none): --compare-to; else, for a run of other settings, the
    report of the run it differs from (options.settings_base_json); else the JSON report about to be overwritten if it
    evaluated the same goldset. An explicit --compare-to over other questions (without --intersect) is an
    EvalError here, before any retrieval."""
    if options.no_compare:
        return None, "", "--no-compare was given"
    if options.compare_to:
        old = load_json_report(options.compare_to)
        ev.common_questions([q.query_id for q in old.per_query], query_ids, options.intersect)
        return old, display_path(options.compare_to), ""
    shown = display_path(options.json)
    path = Path(options.json)
    if options.settings_base_json and Path(options.settings_base_json).exists():
        # A run of other settings answers "did this setting help?": compare with the run it differs from, not with
        # its own previous report (outputs.with_report_paths).
        path = Path(options.settings_base_json)
        shown = display_path(path)
    if not path.exists():
        return None, "", f"there is no previous report at {shown}; give one with --compare-to REPORT.json"
    try:
        old = load_json_report(path)
    except EvalError as exc:
        log(f"warning: not comparing with the previous report: {exc}", options.quiet)
        return None, "", f"the previous report is unreadable: {exc}"
    if old.identity != identity:
        why = (f"the previous report {shown} is of {old.identity or 'an unknown goldset'}, this run of "
               f"{identity}; give --compare-to {shown} to compare them anyway")
        log(f"warning: not compared: {why}", options.quiet)
        return None, "", why
    return old, f"{'previous report' if path == Path(options.json) else 'report'} {shown}", ""


def finish(results: list[EvalResult], options: EvalOptions, previous: tuple[EvalResult | None, str, str],
           degraded: Sequence[str], missing_rows: str = "",
           run: Mapping[str, dict[str, float]] | None = None,
           trec: tuple[Mapping[str, dict[str, float]], Mapping[str, dict[str, int]]] | None = None) -> Outcome:
    """Compare, check the gates, write the reports (and the --run-file of a dataset `run`, or a goldset's `trec`
    run and qrels, written all or none with the reports); the results with their status, and where they went."""
    generated = time.strftime("%Y-%m-%d %H:%M:%S")
    results = [dataclasses.replace(r, generated=generated) for r in results]
    if not results:  # a sweep whose every row asked for a reranker that could not be loaded
        raise EvalError(f"no row of the sweep could be evaluated: {missing_rows}")
    if len(results) == 1 and not (options.sweep_axes or options.ablation):  # before the details file is named
        kept, options = keep_complete_reports(results[0], options)
        results = [kept]
    if not options.dataset:  # a goldset's questions not at rank 1 get their passages in the details file
        results = [dataclasses.replace(r, details=display_path(details_path(options.report))) for r in results]
    if options.sweep_axes or len(results) > 1:
        table = write_sweep if options.sweep_axes else write_ablation
        rows, written = table(results, options, degraded, missing_rows)
        return Outcome(rows, options.report, options.json, written)
    result = results[0]
    old, label, why_not = previous
    if old is not None:
        # The previous report at the output path is overwritten now, so "rerun with --intersect" would compare
        # the run with itself: compare the common questions, or say why there is no comparison.
        implicit = not options.compare_to
        try:
            result = dataclasses.replace(result, compare=ev.compare_results(
                old, result, options.intersect or implicit, label, resamples=options.resamples))
        except EvalError as exc:
            if not implicit:
                raise
            why_not = f"not compared with the {label}: {exc}"
            log(f"warning: {why_not}", options.quiet)
            result = dataclasses.replace(result, messages=(*result.messages, why_not[0].upper() + why_not[1:]))
    gates = options.gates
    failed = ev.gate_failures(result.metrics, gates.fail_under, gates.fail_on_regression, result.compare, why_not)
    result = dataclasses.replace(result, status=ev.run_status(degraded, failed, gate_descriptions(gates)))
    written = write_outputs(result, options, trec_files(options, result.name, *trec) if options.run_file and trec
                            else (), old=old if result.compare else None)
    if options.run_file and run is not None:
        from localrag.datasets import beir as beir_data

        try:
            beir_data.write_trec_run(options.run_file, run, tag=f"localrag-{result.name.replace(' ', '')}")
        except beir_data.RunFormatError as exc:
            raise EvalError(f"--run-file {options.run_file} not written (the reports are: "
                            f"{', '.join(display_path(path) for path in written)}): {exc}") from None
        written.append(options.run_file)
    return Outcome([result], options.report, options.json, tuple(written))


def trec_files(options: EvalOptions, name: str, run: Mapping[str, dict[str, float]],
               qrels: Mapping[str, dict[str, int]]) -> list[tuple[str, str]]:
    """(path, text) of a goldset run's --run-file and its qrels (--qrels-file); EvalError, before anything is
    written, when they cannot be written as TREC."""
    from localrag.datasets import beir as beir_data

    try:
        return [(options.run_file, beir_data.render_trec_run(run, tag=f"localrag-{name.replace(' ', '')}")),
                (qrels_path(options), beir_data.render_trec_qrels(qrels))]
    except beir_data.RunFormatError as exc:
        raise EvalError(f"--run-file {options.run_file} cannot be written: {exc}; no report was written") from None


def gate_descriptions(gates: Gates) -> list[str]:
    """The gates of this run as the status line names them."""
    described = [f"{key} >= {threshold:g}" for key, threshold in gates.fail_under]
    return described + (["no metric worse than the compared report"] if gates.fail_on_regression else [])


def write_table(table_text: str, results: Sequence[EvalResult], path: Path, options: EvalOptions,
                reference: str = "") -> list[str]:
    """An --ablation or --sweep table: written to `path` (and each optional format's file, FORMATS: a sweep's by its
    axes, an ablation's rows compared with `reference`), printed, with the run's status; the paths
    written."""
    axes = [(axis, [format_setting(v) for v in values]) for axis, values in options.sweep_axes]
    chosen = sorted(chosen_formats(options), key=lambda chosen: chosen[0].table_rank)
    written = write_reports([(str(path), table_text),
                             *((path, f.render_table(results, axes, reference)) for f, path in chosen)])
    print(table_text, end="")
    print_status(results[0].status, options.quiet)
    return written


def write_ablation(results: list[EvalResult], options: EvalOptions, degraded: Sequence[str],
                   missing_rows: str = "") -> tuple[list[EvalResult], tuple[str, ...]]:
    """One table over all configurations (written and printed) plus one report per configuration beside it; the
    results and the paths written (the table first)."""
    results = [dataclasses.replace(r, status=ev.run_status(degraded, [], [])) for r in results]
    reference = ablation_reference(results, options.mode)
    label = f"{results[reference].name} (the configured retriever)"
    others = [r for n, r in enumerate(results) if n != reference]
    compared = iter(ev.compare_rows(results[reference], others, True, label, resamples=options.resamples,
                                    keys=eval_report.SWEEP_COMPARE_METRICS) if others else [])
    results = [r if n == reference else dataclasses.replace(r, compare=next(compared)) for n, r in enumerate(results)]
    base = Path(options.report)
    rows = write_row_reports(results, [base.with_name(f"{base.stem}-{r.name.replace(' + ', '-')}.txt")
                                       for r in results])
    table_text = eval_report.render_ablation(results, missing_rows,
                                             display_path(base.with_name(base.stem + "-<configuration>.txt")),
                                             label)
    table = write_table(table_text, results, base, options, label)
    log(f"Ablation: {len(results)} configurations in {sum(r.seconds for r in results):.1f} s of retrieval",
        options.quiet)
    return results, (*table, *rows)


def ablation_reference(results: Sequence[EvalResult], mode: str) -> int:
    """The row an ablation compares the others with: the configured retriever, `mode` reranked when the table has
    reranked rows (the reranker loaded and was not turned off), else `mode` alone; the first row if neither is
    there."""
    names = [r.name for r in results]
    reranked = any(name.endswith(" + rerank") for name in names)
    wanted = ev.config_name(mode, reranked)
    return names.index(wanted) if wanted in names else 0


def write_sweep(results: list[EvalResult], options: EvalOptions, degraded: Sequence[str],
                missing_rows: str = "") -> tuple[list[EvalResult], tuple[str, ...]]:
    """The sweep table (written and printed), each row compared with the first by the paired test, plus one
    report per row beside it (its comparison with the first row included); the results and the paths written
    (the table first)."""
    first = results[0]
    label = f"first row ({first.name})"
    # Every row against the first on the table's metrics: one family of tests, adjusted together (Holm).
    compared = ev.compare_rows(first, results[1:], True, label, resamples=options.resamples,
                               keys=eval_report.SWEEP_COMPARE_METRICS) if len(results) > 1 else []
    results = [dataclasses.replace(r, status=ev.run_status(degraded, [], []), compare=None if n == 0 else
                                   compared[n - 1]) for n, r in enumerate(results)]
    base = Path(options.report)
    rows = write_row_reports(results, [base.with_name(f"{base.stem}-{slug(r.name.replace('=', '-').replace(' ', '.'))}"
                                                      f".txt") for r in results])
    axes = [(axis, [format_setting(v) for v in values]) for axis, values in options.sweep_axes]
    table_text = eval_report.render_sweep(results, axes, missing_rows,
                                          display_path(base.with_name(base.stem + "-<row>.txt")))
    table = write_table(table_text, results, base, options)
    log(f"Sweep: {len(results)} configurations in {sum(r.seconds for r in results):.1f} s", options.quiet)
    return results, (*table, *rows)


def print_summary(outcome: Outcome, quiet: bool) -> None:
    """The comparison of a run of one configuration (every run that has one says its verdict) and the metrics line
    on stdout, then its status on stderr (the files written are the run's last line: files.wrote_line)."""
    result = outcome.results[0]
    if result.compare:
        print("\n".join(eval_report.render_compare(result.compare)))
    parts = [f"{eval_report.metric_label(k)} {eval_report.fmt(v)}" for k, v in result.metrics.items()]
    print(f"{result.name}: " + ", ".join(parts) + f" ({plural(result.num_queries, 'question')})")
    print_outcome(outcome, quiet)


def print_outcome(outcome: Outcome, quiet: bool) -> None:
    """The status of a run of one configuration on stderr (always when the exit code is not 0)."""
    print_status(outcome.results[0].status, quiet)


def print_status(status: Status, quiet: bool) -> None:
    """The status lines on stderr: always when the exit code is not 0 (a failure is no progress note)."""
    if status.exit_code != EXIT_OK or not quiet:
        print("\n".join(eval_report.render_status(status)), file=sys.stderr, flush=True)
