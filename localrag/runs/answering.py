"""Answer-level evaluation of a goldset run: the answers (read with --answers FILE, or generated with --answer-model
MODEL from the evaluated configuration's first --answer-k passages), judged (localrag/evaluation/answer_judge.py),
and the report's "Answers" section and JSON.

Generation and judging go through the judge's OpenAI-compatible client and reply cache (CachedChat: retries, the
call limit --judge-max-calls, offline messages): a rerun with the cache makes no call and writes the same section.
The section states the cost of the replies it rests on (replies, tokens as the server reported them), which does
not change between a first run and a cached rerun; this run's new calls and wall time go to stderr.
"""
from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from localrag.evaluation import answer_judge as aj
from localrag.evaluation import answer_prompts as prompts
from localrag.errors import EvalError
from localrag.evaluation.answers import read_answers
from localrag.evaluation.result import EvalResult
from localrag.files import display_path
from localrag.goldset import format as gs
from localrag.models.llm import CachedChat, Limits, Server, open_cache
from localrag.runs.defaults import log
from localrag.text.pages import shown_page, strip_chunk_header

LABEL_WIDTH = 22  # width of the labels of the Answers section


@dataclass(frozen=True)
class Answering:
    """Where a run's answers come from and who judges them: `answers` a file of a chat's answers, or `model` the
    answer model given the first `k` passages; `judge` the judge model (None: the deterministic checks only);
    `cache` the reply cache; `max_calls` new calls allowed per stage (None: no limit). Calibration: `label_sample`
    answers drawn (seed `seed`) into `label_out` for a person to label; `labels` a file of such labels read back."""
    answers: str | None
    model: str | None
    judge: str | None
    k: int
    cache: str
    max_calls: int | None
    label_sample: int | None = None
    label_out: str | None = None
    labels: str | None = None
    seed: int = 0


LABEL_COLUMNS = ("query_id", "question", "reference", "answer", "judge", "judge_reason", "label")
LABEL_VALUES = {"1": True, "0": False, "correct": True, "incorrect": False, "yes": True, "no": False,
                "refused": False}  # a person's label: is the answer correct?


def draw_sample(query_ids: Sequence[str], n: int, seed: int) -> list[str]:
    """`n` of the query ids (all when fewer) drawn uniformly without replacement with `seed`, in their order."""
    import random

    chosen = set(random.Random(seed).sample(sorted(query_ids), min(n, len(query_ids))))
    return [qid for qid in query_ids if qid in chosen]


def existing_label_file(path: str | Path) -> EvalError | None:
    """The error for a --label-sample file that exists (a person may have labelled it), else None; asked before
    any retrieval, and again before writing."""
    if not Path(path).exists():
        return None
    return EvalError(f"--label-sample: {path} exists (it may hold labels already); give another --out FILE or "
                     f"move it away")


def write_label_sample(path: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """The drawn answers with the judge's verdict and an empty `label` column, for a person to fill with 1 or 0;
    an existing file (perhaps labelled already) is never replaced. Written by the one CSV writer (files.csv_text:
    an answer a spreadsheet would take for a formula gets a leading quote). EvalError when it cannot be written."""
    from localrag.files import csv_text, write_text_atomic

    if (error := existing_label_file(path)) is not None:
        raise error
    text = csv_text([LABEL_COLUMNS, *([row.get(column, "") for column in LABEL_COLUMNS] for row in rows)])
    try:
        write_text_atomic(path, text)
    except OSError as exc:
        raise EvalError(f"--label-sample: cannot write {path} ({exc.strerror or exc}); nothing was written. The "
                        f"answers and verdicts are cached: rerun with another --out FILE") from None


@dataclass(frozen=True)
class LabelFile:
    """A person's labels as read from an --answer-labels file: query id -> is the answer correct, the line of each
    id, and messages for the report (rows left without a label)."""
    labels: dict[str, bool]
    lines: dict[str, int]
    messages: tuple[str, ...]


LINES_SHOWN = 10  # line numbers a message lists before "and N more"


def _lines_text(lines: Sequence[int]) -> str:
    shown = ", ".join(map(str, lines[:LINES_SHOWN]))
    return shown + (f" and {len(lines) - LINES_SHOWN} more" if len(lines) > LINES_SHOWN else "")


def _label_records(path: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """(header, [(physical line, cells)]) of a labels CSV; blank lines skipped, cells stripped and restored
    (files.restore_cell). EvalError when it cannot be read or parsed, or has no header."""
    import csv
    import io

    from localrag.files import restore_cell

    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalError(f"cannot read --answer-labels {path} ({type(exc).__name__}: {exc})") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    records, line = [], 0
    try:
        for cells in reader:
            first, line = line + 1, reader.line_num  # a quoted answer may run over several lines
            if any(cell.strip() for cell in cells):
                records.append((first, [restore_cell(cell.strip()) for cell in cells]))
    except csv.Error as exc:
        raise EvalError(f"--answer-labels {path}: line {line + 1}: cannot parse CSV ({exc}); look for a stray "
                        f"double quote") from None
    if not records:
        raise EvalError(f"--answer-labels {path} is empty; it needs a header with the columns query_id and label "
                        f"(as --label-sample writes it) and a row per labelled answer")
    return records[0][1], records[1:]


def read_labels(path: str) -> LabelFile:
    """A person's labels (is the answer correct?) from a labels CSV with the columns query_id and label, as
    --label-sample writes it. A row with an empty label is left out (named in `messages`, never read as 0); every
    other fault is an EvalError naming the file, the line and the fix: a missing column, a row of fewer or more
    cells than the header, no query id, a label other than LABEL_VALUES, one id labelled both correct and not."""
    header, records = _label_records(path)
    names = [name.casefold() for name in header]
    missing = [column for column in ("query_id", "label") if column not in names]
    if missing:
        raise EvalError(f"--answer-labels {path}: line 1: no column {' or '.join(repr(m) for m in missing)} (the "
                        f"header has {', '.join(header)}); the file needs the columns query_id and label, as "
                        f"--label-sample writes it")
    id_at, label_at = names.index("query_id"), names.index("label")
    labels: dict[str, bool] = {}
    lines: dict[str, int] = {}
    unlabelled: list[int] = []
    for line, cells in records:
        if len(cells) != len(header):
            fix = ("give every row a cell for each column (an empty label leaves the row out)" if len(cells) <
                   len(header) else "put a cell that contains a comma in double quotes")
            raise EvalError(f"--answer-labels {path}: line {line}: {len(cells)} cell{'s' if len(cells) != 1 else ''} "
                            f"but the header has {len(header)} columns ({', '.join(header)}); {fix}")
        qid, value = cells[id_at], cells[label_at]
        if not qid:
            raise EvalError(f"--answer-labels {path}: line {line}: no query id in column '{header[id_at]}'; copy it "
                            f"from the file --label-sample wrote, or delete the line")
        if not value:
            unlabelled.append(line)
            continue
        if value.casefold() not in LABEL_VALUES:
            raise EvalError(f"--answer-labels {path}: line {line}: label {value!r} of query id {qid} is not 1 or 0; "
                            f"write 1 (correct) or 0 (not correct), or leave it empty to leave the answer out")
        label = LABEL_VALUES[value.casefold()]
        if qid in labels and labels[qid] != label:
            raise EvalError(f"--answer-labels {path}: query id {qid} is labelled {int(labels[qid])} on line "
                            f"{lines[qid]} and {int(label)} on line {line}; keep the right label and delete the "
                            f"other line")
        labels[qid] = label
        lines.setdefault(qid, line)
    messages = (f"line{'s' if len(unlabelled) != 1 else ''} {_lines_text(unlabelled)}: no label; left out",) \
        if unlabelled else ()
    return LabelFile(labels, lines, messages)


def check_label_ids(labels: LabelFile, path: str, query_ids: Sequence[str], goldset: str) -> None:
    """EvalError naming the first labelled query id that is no question of the goldset (with its line and the fix):
    the labels of another goldset, or of a question whose text changed since (its id is the hash of its text)."""
    known = set(query_ids)
    unknown = sorted((line, qid) for qid, line in labels.lines.items() if qid not in known)
    if unknown:
        line, qid = unknown[0]
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        raise EvalError(f"--answer-labels {path}: line {line}: query id {qid}{more} is no question of the goldset "
                        f"{display_path(goldset)} (an id is the hash of its question's text); label a sample drawn "
                        f"from this goldset (--label-sample), or delete the line")


def calibration_json(verdicts: Sequence[aj.AnswerVerdict], labels: Mapping[str, bool], seed: int,
                     messages: Sequence[str]) -> dict[str, Any]:
    """The judge against a person's labels (Cohen's kappa, both base rates) and the PPI++ estimate of answer
    correctness beside the judge-only and labels-only ones; a warning when the labelled questions are not the
    sample --label-sample draws for as many answers with the same seed."""
    from localrag.evaluation import calibration as cal

    judged = {v.query_id: v.correctness == "correct" for v in verdicts if v.correctness is not None}
    labelled = [qid for qid in judged if qid in labels]
    out: dict[str, Any] = {"labelled": len(labelled), "messages": list(messages), "warning": ""}
    unknown = sorted(set(labels) - set(judged))
    if unknown:
        out["messages"].append(f"{len(unknown)} labelled question(s) have no judged answer in this run; left out")
    if not labelled:
        out["warning"] = "no labelled question has a judged answer in this run"
        return out
    if labelled != draw_sample(list(judged), len(labelled), seed):
        out["warning"] = (f"the labelled questions are not the sample --label-sample {len(labelled)} draws with "
                          f"seed {seed}; the PPI++ interval assumes a uniform random sample")
    kappa = cal.cohen_kappa([judged[q] for q in labelled], [labels[q] for q in labelled])
    out["kappa"] = {"value": kappa.kappa, "observed": kappa.observed, "judge_rate": kappa.judge_rate,
                    "people_rate": kappa.human_rate, "reason": kappa.reason}
    unlabelled = [judged[q] for q in judged if q not in labels]
    estimates = [cal.labels_only_mean([labels[q] for q in labelled])]
    if unlabelled:
        estimates = [cal.ppi_mean([judged[q] for q in labelled], [labels[q] for q in labelled], unlabelled),
                     cal.judge_only_mean([judged[q] for q in labelled], unlabelled), *estimates]
    out["estimates"] = [{"method": e.method, "estimate": e.estimate, "low": e.low, "high": e.high, "lam": e.lam,
                         "labelled": e.n_labeled, "unlabelled": e.n_unlabeled} for e in estimates]
    return out


def render_calibration(section: Mapping[str, Any]) -> list[str]:
    lines = []
    kappa = section.get("kappa")
    if kappa:
        value = "undefined" if kappa["value"] is None else f"{kappa['value']:.3f}"
        lines.append(f"  {'judge vs people:':<{LABEL_WIDTH}}kappa {value}, agreement {kappa['observed']:.3f} over "
                     f"{section['labelled']} labelled answers; correct by the judge {kappa['judge_rate']:.3f}, by "
                     f"people {kappa['people_rate']:.3f}")
    for estimate in section.get("estimates", ()):
        lam = f"; lambda {estimate['lam']:.3f}" if estimate["lam"] is not None else ""
        name = estimate["method"].split(" (")[0]  # "PPI++ (power-tuned lambda)": the lambda is shown after
        # A rate lies in [0, 1]; the normal interval may not (the JSON keeps it as computed).
        low, high = (min(1.0, max(0.0, estimate[key])) for key in ("low", "high"))
        lines.append(f"  {'correct, ' + name + ':':<{LABEL_WIDTH}}{estimate['estimate']:.3f} [{low:.3f}, "
                     f"{high:.3f}] ({estimate['labelled']} labelled, {estimate['unlabelled']} more judged{lam})")
    if section.get("warning"):
        lines.append(f"  warning: {section['warning']}")
    lines += [f"  labels: {message}" for message in section.get("messages", ())]
    return lines


def answering_of(options: Any) -> Answering | None:
    """The answering of a run's EvalOptions (--answers / --answer-model), or None without either."""
    if not (options.answers or options.answer_model):
        return None
    return Answering(options.answers, options.answer_model, options.answer_judge or options.judge,
                     options.answer_k or options.defaults.retrieval_k,
                     str(options.judge_cache or options.defaults.judge_cache), options.judge_max_calls,
                     label_sample=options.label_sample, label_out=options.out or options.defaults.label_sample,
                     labels=options.answer_labels,
                     seed=options.seed)


def chat_for(model: str | None, answering: Answering, who: str, flag: str, quiet: bool) -> CachedChat | None:
    if model is None:
        return None
    cache, warning = open_cache(answering.cache)
    if warning:
        log(f"warning: {warning}", False)
    return CachedChat(model, cache, who=who, flag=flag, server=Server(check_first=True),
                      limits=Limits(answering.max_calls),
                      progress=None if quiet else lambda message: print(message, file=sys.stderr, flush=True))


def passages_of(hits: Sequence[Any], k: int) -> tuple[prompts.PromptPassage, ...]:
    """The first k retrieved chunks as the answer prompt shows them (file, page as a viewer shows it, text)."""
    return tuple(prompts.PromptPassage(d.metadata["source"], shown_page(int(d.metadata["page"])),
                                       strip_chunk_header(d.page_content)) for d, _ in hits[:k])


def generated_answers(client: CachedChat, questions: Sequence[gs.GoldQuestion], hits: Mapping[str, Sequence[Any]],
                      k: int, cost: aj.Cost) -> tuple[dict[str, tuple[str, tuple]], dict[str, str]]:
    """(query id -> (answer, passages given)) of the answer model, and (query id -> why there is none)."""
    answers, missing = {}, {}
    for position, question in enumerate(questions, start=1):
        client.asking = f"question {position} of {len(questions)}"  # said while a reply is waited for
        passages = passages_of(hits[question.query_id], k)
        read, status = aj.ask(client, prompts.answer_prompt(question.question, passages),
                              lambda text: _answer_text(text), cost)
        if read is None:
            missing[question.query_id] = status
        else:
            answers[question.query_id] = (read, passages)
    return answers, missing


def _answer_text(text: str) -> str:
    from localrag.models.llm import UnreadableReply

    if not text.strip():
        raise UnreadableReply("the answer model replied with no text")
    return text.strip()


def collected_answers(answering: Answering, questions: Sequence[gs.GoldQuestion], hits: Mapping[str, Sequence[Any]],
                      cost: aj.Cost, quiet: bool) -> tuple[dict[str, tuple[str, tuple | None]], dict[str, str],
                                                           list[str]]:
    """(query id -> (answer, passages given or None)), (query id -> why it has none), messages about the file."""
    if answering.answers:
        found = read_answers(answering.answers, {q.query_id: q.question for q in questions})
        answers = {qid: (a.answer, None if a.passages is None else tuple(
            prompts.PromptPassage(p.source, p.page, p.text or "") for p in a.passages))
            for qid, a in found.answers.items()}
        missing = {qid: f"no answer in {display_path(answering.answers)}" for qid in found.missing(
            [q.query_id for q in questions])}
        return answers, missing, list(found.messages)
    client = chat_for(answering.model, answering, "answer model", "--answer-model", quiet)
    answers, missing = generated_answers(client, questions, hits, answering.k, cost)
    return answers, missing, [f"the answer model stopped: {client.stopped}"] if client.stopped else []


def add_answers(result: EvalResult, hits: Mapping[str, Sequence[Any]], questions: Sequence[gs.GoldQuestion],
                answering: Answering, tolerance: int, quiet: bool) -> tuple[EvalResult, list[str]]:
    """The result with its Answers section, and why it degrades the run (answers missing or unjudged)."""
    started = time.perf_counter()
    answer_cost, judge_cost = aj.Cost(), aj.Cost()
    answers, missing, messages = collected_answers(answering, questions, hits, answer_cost, quiet)
    for message in messages:
        log(f"warning: answers: {message}", False)
    generated = time.perf_counter()
    client = chat_for(answering.judge, answering, "answer judge", "--answer-judge", quiet)
    verdicts = []
    for position, question in enumerate(questions, start=1):
        if question.query_id not in answers:
            continue
        if client is not None:
            client.asking = f"question {position} of {len(questions)}"  # said while a reply is waited for
        answer, passages = answers[question.query_id]
        gold = tuple((loc.source, loc.page) for loc in question.locations if loc.page is not None and not loc.problem)
        verdicts.append(aj.judge_answer(client, aj.AnswerItem(question.query_id, question.question,
                                                              question.reference, answer, passages, gold, tolerance),
                                        judge_cost))
    rates = aj.answer_rates(verdicts)
    texts = {q.query_id: answers[q.query_id][0] for q in questions if q.query_id in answers}
    section = answers_to_json(answering, verdicts, rates, missing, {"answers": answer_cost, "judge": judge_cost},
                              texts, messages)
    if answering.labels:  # checked before any work (options.resolve, rows.run_goldset): read again as they were
        labelled = read_labels(answering.labels)
        section["calibration"] = calibration_json(verdicts, labelled.labels, answering.seed, labelled.messages)
    if answering.label_sample:
        by_id = {q.query_id: q for q in questions}
        judged = [v for v in verdicts if v.correctness is not None]
        drawn = set(draw_sample([v.query_id for v in judged], answering.label_sample, answering.seed))
        write_label_sample(answering.label_out, [
            {"query_id": v.query_id, "question": by_id[v.query_id].question, "reference": by_id[v.query_id].reference,
             "answer": texts[v.query_id], "judge": v.correctness, "judge_reason": v.correctness_reason}
            for v in judged if v.query_id in drawn])
        log(f"Label sample: {len(drawn)} answer{'s' if len(drawn) != 1 else ''} written to {display_path(answering.label_out)}; fill its label "
            f"column with 1 (correct) or 0, then rerun with --answer-labels {display_path(answering.label_out)}",
            False)
    new_calls = sum(c.new_calls for c in (client,) if c is not None)
    log(f"Answers: {len(verdicts)} judged in {time.perf_counter() - started:.1f} s (answers "
        f"{generated - started:.1f} s); {new_calls} new judge call{'s' if new_calls != 1 else ''}", quiet)
    degraded = degraded_reasons(section)
    if client is not None and client.stopped:  # a dead or stalled server: why, and how to fix it
        log(f"warning: the answer judge stopped: {client.stopped}", False)
        degraded.append(f"the answer judge stopped: {client.stopped}")
    config = (*result.config, ("Answers", answers_source(answering)))
    return dataclasses.replace(result, config=config, answers=section,
                               answer_lines=tuple(render_answers(section))), degraded


def answers_source(answering: Answering) -> str:
    judge = f"judged by {answering.judge}" if answering.judge else "no judge (figures and citations only)"
    where = (display_path(answering.answers) if answering.answers else
             f"{answering.model}, first {answering.k} passages, answer prompt v{prompts.PROMPT_VERSION}")
    return f"{where}; {judge}"


def _rate_json(rate: Any) -> dict[str, Any]:
    return {"count": rate.count, "judged": rate.judged, "unjudged": rate.unjudged, "value": rate.value,
            "low": rate.low, "high": rate.high, "text": rate.text()}


def verdict_json(verdict: aj.AnswerVerdict, answer: str) -> dict[str, Any]:
    """One question's verdicts as the JSON report keeps them (every status and reason)."""
    citations = verdict.citations
    return {
        "query_id": verdict.query_id, "answer": answer, "refusal": verdict.refusal,
        "correctness": verdict.correctness, "correctness_status": verdict.correctness_status,
        "correctness_reason": verdict.correctness_reason,
        "figures": None if verdict.figures is None or not verdict.figures.applies else {
            "found": [f.text for f in verdict.figures.found], "missing": [f.text for f in verdict.figures.missing]},
        "sentences": len(verdict.sentences), "supported": verdict.supported,
        "faithfulness_status": verdict.faithfulness_status, "faithfulness_reason": verdict.faithfulness_reason,
        "citations": None if citations is None else {
            **citations.counts(), "cites_gold": citations.cites_gold,
            "unparsed_texts": [c.text for c in citations.unparsed]},
        "citation_recall": {str(k): v for k, v in verdict.cited_supported.items()},
        "citation_precision": verdict.needed, "citation_status": verdict.citation_status,
    }


def answers_to_json(answering: Answering, verdicts: Sequence[aj.AnswerVerdict], rates: aj.AnswerRates,
                    missing: Mapping[str, str], costs: Mapping[str, aj.Cost], texts: Mapping[str, str],
                    messages: Sequence[str]) -> dict[str, Any]:
    agree, both = aj.agreement_with_figures(verdicts)
    return {
        "source": answers_source(answering), "prompt_version": prompts.PROMPT_VERSION,
        "rates": {name: _rate_json(getattr(rates, name)) for name in (
            "correct", "refused", "figures", "faithful", "cites_gold", "citation_recall", "citation_precision")},
        "judge_agrees_with_figures": {"agree": agree, "both": both},
        "missing": dict(missing), "messages": list(messages),
        "cost": {stage: cost.to_json() for stage, cost in costs.items()},
        "questions": [verdict_json(v, texts[v.query_id]) for v in verdicts],
    }


def unjudged_questions(section: Mapping[str, Any]) -> dict[str, str]:
    """query id -> the first reason one of its verdicts is missing (unreadable reply, call limit, server)."""
    out = {}
    for row in section["questions"]:
        for key in ("correctness_status", "faithfulness_status", "citation_status"):
            status = row[key]
            if status.startswith(("unreadable", "not judged (call", "not judged (server")):
                out.setdefault(row["query_id"], status)
    return out


def degraded_reasons(section: Mapping[str, Any]) -> list[str]:
    reasons = []
    if section["missing"]:
        reasons.append(f"{len(section['missing'])} question(s) have no answer (see 'Answers')")
    unjudged = unjudged_questions(section)
    if unjudged:
        reasons.append(f"{len(unjudged)} answer(s) were not fully judged (see 'Answers'); rerun to judge them "
                       f"(replies are cached)")
    return reasons


RATE_LABELS = (("correct", "correct"), ("refused", "refused"), ("figures", "figures stated"),
               ("faithful", "faithful"), ("cites_gold", "cites a gold page"), ("citation_recall", "citation recall"),
               ("citation_precision", "citation precision"))


def render_answers(section: Mapping[str, Any]) -> list[str]:
    """The report's Answers section: each rate with its interval and denominator, the judge's agreement with the
    figure check, the questions without an answer or a verdict, the cost of the replies."""
    lines = [f"Answers: {section['source']}"]
    for key, label in RATE_LABELS:
        lines.append(f"  {label + ':':<{LABEL_WIDTH}}{section['rates'][key]['text']}")
    agreement = section["judge_agrees_with_figures"]
    if agreement["both"]:
        lines.append(f"  {'judge vs figures:':<{LABEL_WIDTH}}agree on {agreement['agree']} of {agreement['both']} "
                     f"answers whose reference states figures")
    for qid, why in sorted(section["missing"].items()):
        lines.append(f"  {'no answer:':<{LABEL_WIDTH}}{qid} ({why})")
    for qid, why in sorted(unjudged_questions(section).items()):
        lines.append(f"  {'not judged:':<{LABEL_WIDTH}}{qid} ({why})")
    if section.get("calibration"):
        lines += render_calibration(section["calibration"])
    for stage, cost in section["cost"].items():
        if cost["replies"]:
            tokens = (f"{cost['prompt_tokens']:,} prompt + {cost['completion_tokens']:,} completion tokens"
                      + (f" ({cost['usage_not_reported']} replies without usage)" if cost["usage_not_reported"]
                         else ""))
            lines.append(f"  {'cost, ' + stage + ':':<{LABEL_WIDTH}}{cost['replies']} replies, {tokens}")
    return lines


# -- comparing the answers of two reports ------------------------------------------------------------------------

ANSWER_METRICS = (("correct", "correct"), ("figures", "figures stated"), ("faithful", "faithful"),
                  ("cites_gold", "cites a gold page"))


def answer_scores(section: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """metric -> query id -> 1.0 / 0.0 of a report's Answers section, for the questions judged on that metric."""
    scores: dict[str, dict[str, float]] = {name: {} for name, _ in ANSWER_METRICS}
    for row in section["questions"]:
        qid = row["query_id"]
        if row["correctness"] is not None:
            scores["correct"][qid] = float(row["correctness"] == "correct")
        if row["figures"]:
            scores["figures"][qid] = float(not row["figures"]["missing"])
        if row["supported"] is not None:
            scores["faithful"][qid] = float(all(row["supported"]))
        if row["citations"]:
            scores["cites_gold"][qid] = float(row["citations"]["cites_gold"])
    return scores


def compare_answers(old: Mapping[str, Any], new: Mapping[str, Any], resamples: int) -> list[str]:
    """The paired comparison of two reports' answer metrics over the questions judged in both (one family, Holm),
    with the questions whose correctness changed."""
    from localrag.evaluation import stats

    old_scores, new_scores = answer_scores(old), answer_scores(new)
    pairs = {}
    for name, _ in ANSWER_METRICS:
        common = sorted(set(old_scores[name]) & set(new_scores[name]))
        if common:
            pairs[name] = ({q: old_scores[name][q] for q in common}, {q: new_scores[name][q] for q in common})
    lines = [f"Answers compared (paired randomization test over the questions judged in both, {resamples:,} "
             f"resamples; Holm over {len(pairs)} metric{'s' if len(pairs) != 1 else ''})"]
    if not pairs:
        return lines + ["  no question was judged in both reports"]
    compared = stats.compare_family(pairs, resamples=resamples)
    labels = dict(ANSWER_METRICS)
    for name, result in compared.items():
        low, high = result.ci
        lines.append(f"  {labels[name] + ':':<{LABEL_WIDTH}}{result.old_mean:.3f} -> {result.new_mean:.3f}  "
                     f"{result.diff:+.3f} [{low:+.3f}, {high:+.3f}]  p {result.p_value:.3f} (Holm "
                     f"{result.p_adjusted:.3f})  {result.verdict}  ({result.n} questions)")
    if "correct" in pairs:
        old_correct, new_correct = pairs["correct"]
        for qid in sorted(q for q in old_correct if old_correct[q] != new_correct[q]):
            change = "not correct -> correct" if new_correct[qid] else "correct -> not correct"
            lines.append(f"  {'changed:':<{LABEL_WIDTH}}{qid} {change}")
    return lines
