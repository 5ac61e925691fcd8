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
from typing import Any, Mapping, Sequence

from localrag.evaluation import answer_judge as aj
from localrag.evaluation import answer_prompts as prompts
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
    `cache` the reply cache; `max_calls` new calls allowed per stage (None: no limit)."""
    answers: str | None
    model: str | None
    judge: str | None
    k: int
    cache: str
    max_calls: int | None


def answering_of(options: Any) -> Answering | None:
    """The answering of a run's EvalOptions (--answers / --answer-model), or None without either."""
    if not (options.answers or options.answer_model):
        return None
    return Answering(options.answers, options.answer_model, options.answer_judge or options.judge,
                     options.answer_k or options.defaults.retrieval_k,
                     str(options.judge_cache or options.defaults.judge_cache), options.judge_max_calls)


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
    for question in questions:
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
    return answers, missing, []


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
    for question in questions:
        if question.query_id not in answers:
            continue
        answer, passages = answers[question.query_id]
        gold = tuple((loc.source, loc.page) for loc in question.locations if loc.page is not None and not loc.problem)
        verdicts.append(aj.judge_answer(client, aj.AnswerItem(question.query_id, question.question,
                                                              question.reference, answer, passages, gold, tolerance),
                                        judge_cost))
    rates = aj.answer_rates(verdicts)
    section = answers_to_json(answering, verdicts, rates, missing, {"answers": answer_cost, "judge": judge_cost},
                              {q.query_id: answers[q.query_id][0] for q in questions if q.query_id in answers},
                              messages)
    new_calls = sum(c.new_calls for c in (client,) if c is not None)
    log(f"Answers: {len(verdicts)} judged in {time.perf_counter() - started:.1f} s (answers "
        f"{generated - started:.1f} s); {new_calls} new judge call{'s' if new_calls != 1 else ''}", quiet)
    degraded = degraded_reasons(section)
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
    for stage, cost in section["cost"].items():
        if cost["replies"]:
            tokens = (f"{cost['prompt_tokens']:,} prompt + {cost['completion_tokens']:,} completion tokens"
                      + (f" ({cost['usage_not_reported']} replies without usage)" if cost["usage_not_reported"]
                         else ""))
            lines.append(f"  {'cost, ' + stage + ':':<{LABEL_WIDTH}}{cost['replies']} replies, {tokens}")
    return lines
