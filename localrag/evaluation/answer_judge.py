"""Judging one answer: its correctness against the reference answer, its faithfulness to the passages it was given,
and its citations (deterministic, then ALCE's recall and precision by the judge); and the rates over a run.

Every verdict has a status: "ok", or why there is none ("no reference", "no passages", "refused", "unreadable
reply (...)", "not judged (call limit ...)", "not judged (server stopped)"). A rate counts only "ok" verdicts and
says how many questions it could not judge (rates.Rate), so a small judge that breaks its JSON lowers the
denominator in plain sight instead of turning into a 0, a 1 or NaN. The judge's calls go through CachedChat
(localrag/models/llm.py): a rerun with the cache makes no call.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from localrag.evaluation.answer_details import OK
from localrag.evaluation import answer_prompts as prompts
from localrag.evaluation.citations import Citation, CitationCheck, check_citations, parse_citations, split_sentences
from localrag.evaluation.figures import FigureCheck, check_figures
from localrag.evaluation.rates import Rate, rate
from localrag.models.llm import CachedChat, CallLimitReached, ChatStopped, UnreadableReply

NO_JUDGE = "not judged (no --answer-judge model)"


@dataclass
class Cost:
    """What a stage's replies cost, counted over every reply the run uses (from the cache or new): replies, prompt
    and completion tokens as the server reported them, and replies whose usage it did not report."""
    replies: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    unreported: int = 0

    def add(self, entry: dict) -> None:
        self.replies += 1
        usage = entry.get("usage")
        if isinstance(usage, dict):
            self.prompt_tokens += int(usage.get("prompt_tokens", 0))
            self.completion_tokens += int(usage.get("completion_tokens", 0))
        else:
            self.unreported += 1

    def to_json(self) -> dict[str, int]:
        return {"replies": self.replies, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "usage_not_reported": self.unreported}


@dataclass(frozen=True)
class AnswerItem:
    """One answer to judge: the question, its reference answer ("" none), the answer, the passages the answer was
    given (None: not said), where the goldset says the answer is (file, 1-based page) and the page tolerance."""
    query_id: str
    question: str
    reference: str
    answer: str
    passages: tuple[prompts.PromptPassage, ...] | None
    gold: tuple[tuple[str, int], ...] = ()
    tolerance: int = 1


@dataclass
class AnswerVerdict:
    """The verdicts on one answer, each with its status (OK, or why there is none) and the judge's reason."""
    query_id: str
    refusal: bool
    correctness: str | None = None  # "correct" / "incorrect" / "refused"
    correctness_status: str = OK
    correctness_reason: str = ""
    figures: FigureCheck | None = None  # None: no reference answer
    sentences: list[str] = field(default_factory=list)
    supported: list[bool] | None = None  # per sentence, by the passages the answer was given
    faithfulness_status: str = OK
    faithfulness_reason: str = ""
    citations: CitationCheck | None = None  # None: the passages given are not known
    cited_supported: dict[int, bool | None] = field(default_factory=dict)  # sentence -> ALCE recall (None: unjudged)
    needed: list[bool | None] = field(default_factory=list)  # per citation given, in order: ALCE precision
    citation_status: str = OK


def ask(client: CachedChat | None, prompt: str, read: Callable[[str], Any], cost: Cost | None = None) -> tuple[
        Any, str]:
    """(what `read` makes of the reply, OK) or (None, why there is none); never raises for the server's trouble.
    `client` None: no judge model was given. The reply's tokens go into `cost`."""
    if client is None:
        return None, NO_JUDGE
    try:
        entry, _ = client.ask(prompt, lambda text: {"read": read(text)}, is_valid=lambda entry: "read" in entry,
                              keep_usage=True)
    except UnreadableReply as error:
        return None, f"unreadable reply ({error})"
    except CallLimitReached:
        return None, "not judged (call limit reached)"
    except ChatStopped:
        return None, "not judged (server stopped)"
    if cost is not None:
        cost.add(entry)
    return entry["read"], OK


def judge_correctness(client: CachedChat | None, item: AnswerItem, verdict: AnswerVerdict, cost: Cost | None = None) -> None:
    if not item.reference.strip():
        verdict.correctness_status = "no reference"
        return
    verdict.figures = check_figures(item.reference, item.answer)
    read, verdict.correctness_status = ask(client, prompts.correctness_prompt(item.question, item.reference,
                                                                              item.answer), prompts.read_correctness,
                                           cost)
    if read is not None:
        verdict.correctness, verdict.correctness_reason = read


def judge_faithfulness(client: CachedChat | None, item: AnswerItem, verdict: AnswerVerdict,
                       cost: Cost | None = None) -> None:
    """Each sentence supported or not by the passages given; a refusal is a refusal, not a faithful answer."""
    if verdict.refusal:
        verdict.faithfulness_status = "refused"
    elif not item.passages or not any(p.text for p in item.passages):
        verdict.faithfulness_status = "no passages"  # nothing to check the sentences against
    else:
        sentences = verdict.sentences
        read, verdict.faithfulness_status = ask(client, prompts.faithfulness_prompt(item.passages, sentences),
                                                lambda text: prompts.read_faithfulness(text, len(sentences)), cost)
        if read is not None:
            verdict.supported, verdict.faithfulness_reason = read


def cited_passages(citations: Sequence[Citation], passages: Sequence[prompts.PromptPassage]) -> list[
        prompts.PromptPassage]:
    """The given passages that `citations` name (file and page), in citation order, each once."""
    from localrag.goldset.format import same_file

    out: list[prompts.PromptPassage] = []
    for citation in citations:
        for passage in passages:
            if passage not in out and passage.page in citation.pages and same_file(citation.file, passage.source):
                out.append(passage)
    return out


def judge_citations(client: CachedChat | None, item: AnswerItem, verdict: AnswerVerdict,
                    cost: Cost | None = None) -> None:
    """The deterministic check, then per cited sentence ALCE's recall (its cited passages support it) and
    precision (each cited passage is needed)."""
    if item.passages is None:
        verdict.citation_status = "no passages"
        return
    parsed = parse_citations(item.answer)
    given = [(p.source, p.page) for p in item.passages if p.page is not None]
    verdict.citations = check_citations(parsed, given, item.gold, item.tolerance)
    by_sentence: dict[int, list[Citation]] = {}
    for citation in verdict.citations.given:
        by_sentence.setdefault(citation.sentence, []).append(citation)
    for sentence, citations in sorted(by_sentence.items()):
        cited = cited_passages(citations, item.passages)
        read, status = ask(client, prompts.citation_prompt(verdict.sentences[sentence], cited),
                           lambda text, n=len(cited): prompts.read_citation(text, n), cost)
        if read is None:
            verdict.citation_status = status
            verdict.cited_supported[sentence] = None
            verdict.needed += [None] * len(cited)
            continue
        supported, needed, _ = read
        verdict.cited_supported[sentence] = supported
        verdict.needed += needed


def judge_answer(client: CachedChat | None, item: AnswerItem, cost: Cost | None = None) -> AnswerVerdict:
    """Every verdict on one answer, in a fixed order (correctness, faithfulness, citations); `client` None: the
    deterministic checks only (figures, citations), every judge verdict "not judged"."""
    verdict = AnswerVerdict(item.query_id, prompts.is_refusal(item.answer), sentences=split_sentences(item.answer))
    judge_correctness(client, item, verdict, cost)
    judge_faithfulness(client, item, verdict, cost)
    judge_citations(client, item, verdict, cost)
    return verdict


@dataclass(frozen=True)
class AnswerRates:
    """The rates of a run's answers (each over the questions it applies to, with the unjudged said)."""
    correct: Rate  # correct over answers with a reference and a verdict
    refused: Rate
    figures: Rate  # every figure of the reference stated, over references that state figures (no judge)
    faithful: Rate  # every sentence supported, over non-refused answers with passages
    cites_gold: Rate  # some citation names a gold page, over answers whose passages are known
    citation_recall: Rate  # cited sentences supported by their citations (ALCE), over cited sentences
    citation_precision: Rate  # citations needed (ALCE), over citations of given passages


def answer_rates(verdicts: Sequence[AnswerVerdict], resamples: int = 10_000, seed: int = 0) -> AnswerRates:
    """The rates over `verdicts`; a question without a verdict of a kind counts as unjudged for that kind only
    when it should have had one (a missing reference is no unjudged question)."""
    judged = [v for v in verdicts if v.correctness_status != "no reference"]

    def flags(values: Sequence[bool | None]) -> Rate:
        return rate(values, resamples, seed)

    return AnswerRates(
        correct=flags([None if v.correctness is None else v.correctness == "correct" for v in judged]),
        refused=flags([None if v.correctness is None else v.correctness == "refused" for v in judged]),
        figures=flags([v.figures.passed for v in verdicts if v.figures is not None and v.figures.applies]),
        faithful=flags([None if v.supported is None else all(v.supported) for v in verdicts
                        if v.faithfulness_status not in ("refused", "no passages")]),
        cites_gold=flags([v.citations.cites_gold for v in verdicts if v.citations is not None]),
        citation_recall=flags([flag for v in verdicts for flag in v.cited_supported.values()]),
        citation_precision=flags([flag for v in verdicts for flag in v.needed]),
    )


def agreement_with_figures(verdicts: Sequence[AnswerVerdict]) -> tuple[int, int]:
    """(questions where the judge's correct / not correct agrees with the figure check, questions both judged):
    how far the judge's verdict and the deterministic check agree where the reference states numbers."""
    both = [v for v in verdicts if v.correctness in ("correct", "incorrect") and v.figures is not None
            and v.figures.applies]
    return sum((v.correctness == "correct") == v.figures.passed for v in both), len(both)

