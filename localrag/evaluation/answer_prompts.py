"""The prompts of answer-level evaluation and the reading of their replies: the answer a model gives from the
first k passages (with citations in one documented form), and the judge's three verdicts on an answer.

* answer: from the passages only, each claim cited as ``[file, p. 12]`` (the form of the chunk headers, so a model
  can copy it), or the fixed refusal sentence when the passages do not hold the answer;
* correctness against the reference answer: correct / incorrect / refused, as FinanceBench labels answers (Islam et
  al. 2023, arXiv 2311.11944);
* faithfulness: each sentence of the answer supported or not by the passages the answer was given (absence of
  evidence is "not supported");
* citations, ALCE's citation recall and precision (Gao et al. 2023, "Enabling Large Language Models to Generate Text
  with Citations", EMNLP): whether a sentence is supported by the passages it cites, and whether each of its
  citations is needed.

Each template carries a version: the prompt is part of the reply cache's key, so a changed prompt is asked anew and
an old reply is never read as the new prompt's. A reply that cannot be read raises UnreadableReply (the question is
then unjudged, never a silent 0 or 1).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from localrag.models.llm import UnreadableReply, collapse_whitespace, first_json_object

PROMPT_VERSION = 1  # of every template below; part of each prompt, so of its cache key
REFUSAL = "I cannot answer this from the given passages."  # the answer prompt's fixed refusal
CORRECTNESS_LABELS = ("correct", "incorrect", "refused")
MAX_PASSAGE_CHARS = 2400  # characters of a passage in a prompt (a long-pdf page fits)

ANSWER_PROMPT = """localRAG answer prompt v{version}.
Answer the question using only the passages below. After each sentence that uses a passage, cite it exactly as its
header shows it, in square brackets, e.g. [report.pdf, p. 12]. Do not use knowledge outside the passages. If the
passages do not contain the answer, reply with exactly this sentence and nothing else: {refusal}

Question: {question}

Passages:
{passages}

Answer:"""

CORRECTNESS_PROMPT = """localRAG correctness judge v{version}.
Compare a model's answer to a question with the reference answer. Reply with one JSON object:
{{"verdict": "correct" | "incorrect" | "refused", "reason": "<one sentence>"}}
- "correct": the answer states what the reference states (numbers may be rounded or in other units, the wording
  may differ);
- "incorrect": it states something else, or only part of what the question asks;
- "refused": it declines to answer or says the information is not available.

Question: {question}
Reference answer: {reference}
Model's answer: {answer}"""

FAITHFULNESS_PROMPT = """localRAG faithfulness judge v{version}.
For each numbered sentence of an answer, say whether the passages below support it. A sentence the passages do not
mention is not supported. Reply with one JSON object:
{{"supported": [true | false, ... one per sentence, in order], "reason": "<one sentence>"}}

Passages:
{passages}

Sentences:
{sentences}"""

CITATION_PROMPT = """localRAG citation judge v{version}.
A sentence of an answer cites the passages below. Say whether the cited passages together support the sentence,
and for each cited passage whether it is needed (the others alone would not support the sentence as well without
it). Reply with one JSON object:
{{"supported": true | false, "needed": [true | false, ... one per passage, in order], "reason": "<one sentence>"}}

Sentence: {sentence}

Cited passages:
{passages}"""


@dataclass(frozen=True)
class PromptPassage:
    """A passage as the prompts show it: its file, its 1-based page (None: unknown) and its text."""
    source: str
    page: int | None
    text: str


def passage_header(passage: PromptPassage) -> str:
    """`[file, p. 12]`: the citation form the answer prompt asks for."""
    return f"[{passage.source}]" if passage.page is None else f"[{passage.source}, p. {passage.page}]"


def format_passages(passages: Sequence[PromptPassage], max_chars: int = MAX_PASSAGE_CHARS) -> str:
    """The passages, each under its header, cut to `max_chars` characters (marked)."""
    def cut(text: str) -> str:
        text = collapse_whitespace(text)
        return text if len(text) <= max_chars else text[:max_chars - 1].rstrip() + "…"

    return "\n\n".join(f"{passage_header(p)}\n{cut(p.text)}" for p in passages) or "(none)"


def answer_prompt(question: str, passages: Sequence[PromptPassage]) -> str:
    return ANSWER_PROMPT.format(version=PROMPT_VERSION, refusal=REFUSAL, question=collapse_whitespace(question),
                                passages=format_passages(passages))


def correctness_prompt(question: str, reference: str, answer: str) -> str:
    return CORRECTNESS_PROMPT.format(version=PROMPT_VERSION, question=collapse_whitespace(question),
                                     reference=collapse_whitespace(reference), answer=collapse_whitespace(answer))


def faithfulness_prompt(passages: Sequence[PromptPassage], sentences: Sequence[str]) -> str:
    numbered = "\n".join(f"{n}. {collapse_whitespace(s)}" for n, s in enumerate(sentences, start=1))
    return FAITHFULNESS_PROMPT.format(version=PROMPT_VERSION, passages=format_passages(passages), sentences=numbered)


def citation_prompt(sentence: str, cited: Sequence[PromptPassage]) -> str:
    return CITATION_PROMPT.format(version=PROMPT_VERSION, sentence=collapse_whitespace(sentence),
                                  passages=format_passages(cited))


# -- reading replies ----------------------------------------------------------------------------------------------

def json_object_with(text: str, key: str) -> dict[str, Any]:
    """The first JSON object in `text` that has `key` (llm.first_json_object); UnreadableReply when none has."""
    return first_json_object(text, (key,))


def _flag(value: Any, what: str) -> bool:
    """A yes/no the judge gave: true/false, or "yes"/"no"/"true"/"false" as text; else UnreadableReply."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().casefold() in ("true", "yes", "false", "no"):
        return value.strip().casefold() in ("true", "yes")
    raise UnreadableReply(f"{what} is {value!r}, not true or false")


def _reason(found: dict[str, Any]) -> str:
    reason = found.get("reason", "")
    return collapse_whitespace(reason) if isinstance(reason, str) else ""


def read_correctness(text: str) -> tuple[str, str]:
    """(verdict, reason) of a correctness reply; the verdict one of CORRECTNESS_LABELS."""
    found = json_object_with(text, "verdict")
    verdict = found["verdict"].strip().casefold() if isinstance(found["verdict"], str) else found["verdict"]
    if verdict not in CORRECTNESS_LABELS:
        raise UnreadableReply(f"verdict {found['verdict']!r} is not one of {', '.join(CORRECTNESS_LABELS)}")
    return verdict, _reason(found)


def read_faithfulness(text: str, sentences: int) -> tuple[list[bool], str]:
    """(supported per sentence, reason) of a faithfulness reply, exactly one flag per sentence."""
    found = json_object_with(text, "supported")
    flags = found["supported"]
    if not isinstance(flags, list) or len(flags) != sentences:
        count = len(flags) if isinstance(flags, list) else "no list of"
        raise UnreadableReply(f"{count} sentence verdicts for {sentences} sentences")
    return [_flag(flag, f"sentence {n}'s verdict") for n, flag in enumerate(flags, start=1)], _reason(found)


def read_citation(text: str, cited: int) -> tuple[bool, list[bool], str]:
    """(supported, needed per cited passage, reason) of a citation reply."""
    found = json_object_with(text, "supported")
    needed = found.get("needed")
    if not isinstance(needed, list) or len(needed) != cited:
        count = len(needed) if isinstance(needed, list) else "no list of"
        raise UnreadableReply(f"{count} 'needed' verdicts for {cited} cited passages")
    return (_flag(found["supported"], "'supported'"),
            [_flag(flag, f"passage {n}'s 'needed'") for n, flag in enumerate(needed, start=1)], _reason(found))


def is_refusal(answer: str) -> bool:
    """Whether an answer is the answer prompt's refusal (whitespace and case aside)."""
    return collapse_whitespace(answer).casefold().rstrip(".") == REFUSAL.casefold().rstrip(".")
