"""Generate goldset questions from indexed chunks.

Generation works on plain chunk dicts ``{"chunk_id", "source", "page" (0-based), "text"}``:

1. A noise filter (localrag/goldset/noise.py) drops chunks no reader would ask about (front matter, index and
   bibliography pages, number tables, caption residue, running headers, very short chunks); every rule
   is counted.
2. The wanted number of questions is spread over the documents in proportion to their kept chunk
   count, with a minimum per document (largest-remainder apportionment).
3. Each sampled chunk gives at most one question: without a model an exact-reference question
   (equation, table, figure, section number at its definition site), a defined-term question or a
   section-location question (templates.py); with a model (``ask``), one natural question the
   chunk answers (llm_questions.py).
4. Quality gates reject questions that copy the chunk's words (so BM25 does not win by
   construction), near-duplicates, too-short questions and answers that lie on a noise page.

The same chunks, seed and model replies give the same rows, in the same order. Rows are
localrag/goldset/format.py's GoldsetRow; that module owns the goldset format and writes them (write_goldset_csv).

Lint (localrag/goldset/lint.py) takes the gates' thresholds from here and counts and compares words with words.py as
the gates do, so lint and the gates agree on what a short or near-duplicate question is.
"""

from __future__ import annotations

import random
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localrag.errors import EvalError
from localrag.files import display_path
from localrag.goldset.format import MIN_QUESTION_WORDS, NEAR_DUPLICATE_JACCARD, GoldsetRow, write_goldset_csv  # noqa: F401
from localrag.text.language import guess_language
from localrag.goldset.llm_questions import build_llm_prompt, parse_llm_reply
from localrag.goldset.noise import analysis_text, build_noise_context, filter_chunks, fraction, page_noise
from localrag.text.pages import shown_page
from localrag.goldset.templates import Candidate, template_questions
from localrag.text.words import CONTENT_STOPWORDS, jaccard, tokens, word_count

# --- Sampling -------------------------------------------------------------------------------------
# Questions every document with kept chunks gets at least (if n allows).
MIN_PER_DOCUMENT = 1
# After this many unusable model replies in a row the model is no longer asked.
LLM_MAX_CONSECUTIVE_FAILURES = 5

# --- Quality gates --------------------------------------------------------------------------------
# Highest share of a question's content words that may occur verbatim in its chunk.
MAX_COPIED_SHARE = 0.5

# Quality gates in the order they are applied.
GATES = ("too_short", "noise_page", "copied", "duplicate")
# Question kinds, in summary order; the ``corpus`` of a generated row is one of these.
KINDS = ("equation-ref", "table-ref", "figure-ref", "section-ref", "defined-term", "section-location", "llm")


# =================================================================================================
# Data


@dataclass
class DocumentSample:
    """Per-document counts of one generation run."""

    chunks: int = 0
    kept: int = 0
    allocated: int = 0
    generated: int = 0


@dataclass
class LlmStats:
    """How the model calls went: asked, usable questions, explicit declines, failures."""

    asked: int = 0
    answered: int = 0
    declined: int = 0
    failed: int = 0
    consecutive_failures: int = 0  # failures since the last usable reply or decline
    gave_up: bool = False


@dataclass
class GenerationResult:
    """Generated rows (sorted by file, page, chunk) and the counts the summary reports."""

    rows: list[GoldsetRow]
    requested: int
    seed: int
    chunks_total: int
    removed: dict[str, int]
    documents: dict[str, DocumentSample]
    kinds: dict[str, int]
    languages: dict[str, int]
    rejected: dict[str, int]
    llm: LlmStats | None = None


# =================================================================================================
# Language


def detect_language(text: str) -> str:
    """The language of a chunk's questions: language.guess_language's ``"de"`` or ``"en"``; English when it
    has no guess (a tie, or no stop word), since every question needs a language."""
    return guess_language(text) or "en"


# =================================================================================================
# Gates


def copied_share(question: str, chunk_text: str, allowed: Iterable[str] = ()) -> float:
    """Share of the question's content words that occur verbatim (casefolded) in the chunk.

    Content words are tokens not in CONTENT_STOPWORDS and not in ``allowed`` (the reference token,
    defined term or template frame: they are the point of the question). No content words: 0.0.
    """
    allowed = set(allowed)
    content = [t for t in tokens(question) if t not in CONTENT_STOPWORDS and t not in allowed]
    chunk_tokens = set(tokens(chunk_text))
    return fraction(sum(t in chunk_tokens for t in content), len(content))


def is_near_duplicate(question: str, others: Iterable[str]) -> bool:
    """Whether the question reaches NEAR_DUPLICATE_JACCARD with any of ``others``."""
    return any(jaccard(question, other) >= NEAR_DUPLICATE_JACCARD for other in others)


def gate_question(
    candidate: Candidate, chunk_text: str, accepted: Sequence[str], page_rule: str | None
) -> str | None:
    """The first GATES gate the candidate fails, or None if it may go into the goldset.

    ``page_rule`` is what page_noise() says about the chunk's page; ``accepted`` are the questions
    kept so far.
    """
    if word_count(candidate.question) < MIN_QUESTION_WORDS:
        return "too_short"
    if page_rule is not None:
        return "noise_page"
    if copied_share(candidate.question, chunk_text, candidate.allowed) > MAX_COPIED_SHARE:
        return "copied"
    if is_near_duplicate(candidate.question, accepted):
        return "duplicate"
    return None


# =================================================================================================
# Sampling


def allocate(sizes: Mapping[str, int], n: int, minimum: int = MIN_PER_DOCUMENT) -> dict[str, int]:
    """Questions per document: ``minimum`` each, the rest in proportion to size, never above size.

    The rest is apportioned by largest remainder (Hamilton) over documents with room left, repeated
    while capped documents leave questions over; remainder ties go to the larger document, then to
    the name first in sort order. If ``n`` cannot give every document its minimum, larger documents
    get theirs first, one question per round.
    """
    names = sorted(name for name, size in sizes.items() if size > 0)
    result = dict.fromkeys(sorted(sizes), 0)
    n = min(max(n, 0), sum(sizes[name] for name in names))
    by_size = sorted(names, key=lambda name: (-sizes[name], name))
    floors = {name: min(minimum, sizes[name]) for name in names}
    if sum(floors.values()) >= n:
        while n > 0:
            for name in by_size:
                if n and result[name] < floors[name]:
                    result[name] += 1
                    n -= 1
        return result
    result.update(floors)
    rest = n - sum(floors.values())
    while rest > 0:
        open_ = [name for name in names if result[name] < sizes[name]]
        weight = sum(sizes[name] for name in open_)
        quotas = {name: rest * sizes[name] / weight for name in open_}
        given = 0
        for name in open_:
            add = min(int(quotas[name]), sizes[name] - result[name])
            result[name] += add
            given += add
        left = rest - given
        for name in sorted(open_, key=lambda name: (-(quotas[name] - int(quotas[name])), -sizes[name], name)):
            if left and result[name] < sizes[name]:
                result[name] += 1
                left -= 1
        rest = left
    return result


def _chunk_key(chunk: Mapping[str, Any]) -> tuple[str, int, str]:
    return (chunk["source"], chunk["page"], str(chunk["chunk_id"]))


def _check_chunks(chunks: Sequence[Mapping[str, Any]]) -> None:
    for number, chunk in enumerate(chunks, start=1):
        missing = [key for key in ("chunk_id", "source", "page", "text") if key not in chunk]
        if missing:
            raise ValueError(
                f"chunk {number} lacks {', '.join(missing)}; "
                "every chunk needs chunk_id, source, page (0-based) and text"
            )


def _shuffled_queues(
    by_document: Mapping[str, Sequence[Mapping[str, Any]]], seed: int
) -> dict[str, tuple[list[Mapping[str, Any]], random.Random]]:
    """Per document: its chunks in seeded random order and the generator that shuffled them.

    The generator is seeded with ``f"{seed}/{source}"`` (string seeds hash with SHA-512, not with
    Python's per-process hash), so one document's draw does not depend on the others.
    """
    queues = {}
    for source in sorted(by_document):
        rng = random.Random(f"{seed}/{source}")
        queue = list(by_document[source])
        rng.shuffle(queue)
        queues[source] = (queue, rng)
    return queues


def _draw(
    queues: Mapping[str, list[Mapping[str, Any]]],
    quotas: Mapping[str, int],
    n: int,
    try_chunk: Callable[[str, Mapping[str, Any]], bool],
    stopped: Callable[[], bool],
) -> None:
    """Try chunks until every document met its quota, then round-robin by name until ``n`` questions.

    ``try_chunk(source, chunk)`` says whether the chunk gave a question; ``stopped()`` ends early.
    """
    made: Counter[str] = Counter()
    for source in sorted(queues):
        while made[source] < quotas.get(source, 0) and queues[source] and not stopped():
            made[source] += try_chunk(source, queues[source].pop(0))
    while sum(made.values()) < n and any(queues.values()) and not stopped():
        for source in sorted(queues):
            while queues[source] and sum(made.values()) < n and not stopped():
                if try_chunk(source, queues[source].pop(0)):
                    made[source] += 1
                    break


def _first_passing(
    candidates: Sequence[Candidate], text: str, accepted: Sequence[str], page_rule: str | None,
    rejected: dict[str, int],
) -> Candidate | None:
    """The first candidate through all gates; each rejection is counted in ``rejected``."""
    for candidate in candidates:
        failed = gate_question(candidate, text, accepted, page_rule)
        if failed is None:
            return candidate
        rejected[failed] += 1
    return None


def _row(chunk: Mapping[str, Any], candidate: Candidate, seed: int, llm_name: str | None) -> GoldsetRow:
    model = f" model={llm_name}" if llm_name and candidate.kind == "llm" else ""
    return GoldsetRow(
        question=candidate.question,
        corpus=candidate.kind,
        source=chunk["source"],
        page=shown_page(chunk["page"]),
        note=f"generated:{candidate.kind}{model} chunk={chunk['chunk_id']} seed={seed}",
    )


def generate_questions(
    chunks: Sequence[Mapping[str, Any]],
    n: int,
    seed: int,
    ask: Callable[[str], str | None] | None = None,
    *,
    llm_name: str | None = None,
) -> GenerationResult:
    """Sample chunks and make up to ``n`` goldset questions with their file and 1-based page.

    Chunks are noise-filtered, ``n`` is allocated over documents by kept chunk count (see
    allocate), each document's chunks are tried in seeded random order until its quota is met; a
    document that runs out leaves its quota to the others (see _draw). Each chunk gives at most
    one question: with ``ask`` the model's (kind ``llm``), else one of its template questions,
    picked by the document's generator. ``llm_name`` goes into the ``note`` of model rows.
    Rows come sorted by file, page and chunk id; input order does not matter.
    """
    if n < 1:
        raise ValueError(f"number of questions must be at least 1, got {n}; pass --generate N with N >= 1")
    _check_chunks(chunks)
    ordered = sorted(chunks, key=_chunk_key)
    context = build_noise_context(ordered)
    kept, removed = filter_chunks(ordered, context)
    pages: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    documents: dict[str, DocumentSample] = {}
    by_document: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for chunk in ordered:
        pages[(chunk["source"], chunk["page"])].append(chunk)
        documents.setdefault(chunk["source"], DocumentSample()).chunks += 1
    for chunk in kept:
        documents[chunk["source"]].kept += 1
        by_document[chunk["source"]].append(chunk)
    quotas = allocate({source: doc.kept for source, doc in documents.items()}, n)
    for source, quota in quotas.items():
        documents[source].allocated = quota
    queues = _shuffled_queues(by_document, seed)

    accepted: list[str] = []
    made: list[tuple[Mapping[str, Any], Candidate]] = []
    rejected = dict.fromkeys(GATES, 0)
    llm = LlmStats() if ask is not None else None

    def try_chunk(source: str, chunk: Mapping[str, Any]) -> bool:
        text = analysis_text(chunk["text"])
        language = detect_language(text)
        rng = queues[source][1]
        if ask is not None and llm is not None:
            candidates = _ask_model(ask, text, language, llm)
        else:
            candidates = template_questions(text, language, context.repeated_lines.get(source, frozenset()))
            rng.shuffle(candidates)
        page_rule = page_noise(pages[(source, chunk["page"])], context) if candidates else None
        chosen = _first_passing(candidates, text, accepted, page_rule, rejected)
        if chosen is None:
            return False
        accepted.append(chosen.question)
        made.append((chunk, chosen))
        documents[source].generated += 1
        return True

    _draw({source: queue for source, (queue, _) in queues.items()}, quotas, n, try_chunk,
          lambda: llm is not None and llm.gave_up)
    made.sort(key=lambda item: _chunk_key(item[0]))
    kinds = Counter(candidate.kind for _, candidate in made)
    return GenerationResult(
        rows=[_row(chunk, candidate, seed, llm_name) for chunk, candidate in made],
        requested=n,
        seed=seed,
        chunks_total=len(ordered),
        removed=removed,
        documents=dict(sorted(documents.items())),
        kinds={kind: kinds[kind] for kind in KINDS if kinds[kind]},
        languages=dict(sorted(Counter(candidate.language for _, candidate in made).items())),
        rejected=rejected,
        llm=llm,
    )


def _ask_model(ask: Callable[[str], str | None], text: str, language: str, stats: LlmStats) -> list[Candidate]:
    """The model's question for one chunk as a one-element list, or [] (stats updated)."""
    stats.asked += 1
    outcome, question = parse_llm_reply(ask(build_llm_prompt(text, language)))
    if outcome == "failed":
        stats.failed += 1
        stats.consecutive_failures += 1
        stats.gave_up = stats.consecutive_failures >= LLM_MAX_CONSECUTIVE_FAILURES
        return []
    stats.consecutive_failures = 0
    if outcome == "declined":
        stats.declined += 1
        return []
    stats.answered += 1
    return [Candidate("llm", question or "", language)]


# =================================================================================================
# Output


def _counts_text(counts: Mapping[str, int]) -> str:
    items = [f"{name} {count}" for name, count in counts.items() if count]
    return ", ".join(items) if items else "none"


def render_generation_summary(result: GenerationResult) -> list[str]:
    """Plain-text lines describing a generation run: filter, per document, kinds, gates, model."""
    made = len(result.rows)
    lines = [f"generated {made} of {result.requested} requested questions (seed {result.seed})"]
    kept = sum(doc.kept for doc in result.documents.values())
    lines.append(f"chunks: {result.chunks_total} read, {kept} kept by the noise filter")
    lines.append(f"noise filter removed: {_counts_text(result.removed)}")
    if result.documents:
        width = max(len("document"), *(len(name) for name in result.documents))
        lines.append(f"{'document':<{width}}  chunks    kept  allocated  generated")
        for name, doc in result.documents.items():
            lines.append(f"{name:<{width}}  {doc.chunks:>6}  {doc.kept:>6}  {doc.allocated:>9}  {doc.generated:>9}")
    lines.append(f"questions per kind: {_counts_text(result.kinds)}")
    lines.append(f"questions per language: {_counts_text(result.languages)}")
    lines.append(f"rejected by the gates: {_counts_text(result.rejected)}")
    if result.llm is not None:
        stats = result.llm
        lines.append(
            f"model: asked {stats.asked}, questions {stats.answered}, declined {stats.declined}, "
            f"unusable replies {stats.failed}"
        )
        if stats.gave_up:
            lines.append(
                f"model: stopped after {LLM_MAX_CONSECUTIVE_FAILURES} unusable replies in a row; "
                "check that the model runs and answers with JSON"
            )
    if made < result.requested:
        lines.append(
            f"note: {result.requested - made} question{'s' if result.requested - made != 1 else ''} short: the "
            "remaining chunks gave no question that passed the gates (see the per-document table)"
        )
    return lines


def check_out_file(out: str, force: bool) -> None:
    """EvalError unless --out can take the goldset: a file in an existing folder, replaced only with --force."""
    path = Path(out)
    if path.is_dir() or not path.parent.is_dir():
        raise EvalError(f"--out {out}: {'is a folder' if path.is_dir() else f'folder {path.parent} does not exist'}"
                        f"; give the path of a .csv file in an existing folder")
    if path.exists() and not force:
        raise EvalError(f"--out {out} already exists; pass --force to replace it, or choose another --out")


def generate_goldset(rag: Any, n: int, seed: int, out: str, ask: Callable[[str], str | None] | None,
                     llm_name: str | None, stopped: Callable[[], str | None]) -> int:
    """Sample chunks of a LocalRAG's index, print the summary and write the goldset to `out`; 1 if the model
    stopped early, else 0."""
    chunks = [{"chunk_id": i, "source": m["source"], "page": int(m["page"]), "text": t}
              for i, t, m in rag.indexed_chunks()]
    if not chunks:
        raise EvalError(f"the index at {rag.location} holds no chunks; index PDFs first (add_pdfs.py)")
    result = generate_questions(chunks, n, seed, ask=ask, llm_name=llm_name)
    print("\n".join(render_generation_summary(result)))
    if not result.rows:
        raise EvalError(f"no question was generated, so {display_path(out)} was not written; see the summary above")
    try:
        write_goldset_csv(Path(out), result.rows)
    except OSError as exc:
        raise EvalError(f"--out {out} could not be written ({exc}); choose another --out") from None
    made = len(result.rows)
    print(f"Wrote {made} question{'s' if made != 1 else ''} to {display_path(out)}")
    if stopped():
        print(f"error: the model stopped before the goldset was complete: {stopped()}; rerun when it answers "
              f"again (answered chunks are cached)", file=sys.stderr)
        return 1
    return 0


