"""Why a question missed: which stage lost its right passage, and what ranked above it.

Stage ranks (`StageRanks`, recorded by the evaluation for every question) say where the first acceptable
location ranked in the dense and BM25 candidate lists, after fusion, after the reranker and in the final list.
Everything here is a pure function of results: the "Where the misses are lost" section of the report, the
stage a worse question was lost at in a comparison, and the Markdown details file with the passages behind
every question not at rank 1 (the block `eval_retrieval.py --explain` prints for one question).
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from localrag.retrieval.stages import STAGE_ORDERS
from localrag.search.bm25 import TOKEN_PATTERN, normalize
from localrag.text.pages import strip_chunk_header
from localrag.evaluation.result import EvalResult, Passage, QuestionResult, StageRanks

EXCERPT_CHARS = 300  # characters of a passage shown in the details file, whitespace collapsed
EXCERPT_LEAD = 60  # characters shown before the first query word of the excerpt's window
STAGE_LIST_SHOWN = 10  # entries of each stage's list that --explain prints
DASH = "–"  # a stage whose list did not hold the expected location
# Frequent English and German words of four letters or more that would mark half of every excerpt.
UNMARKED_WORDS = frozenset("""about also been does from have into more most only over some such than that their them
then there these they this those very were what when where which while whom whose will with would your aber alle
auch beim dass dein denn dessen dieser diese dieses durch eine einem einen einer eines gibt habe haben hatte kann
können mich nach nicht noch oder sehr sein seine sich sind soll über unter viel wann warum welche welcher welches
werden wird wurde wurden zwischen""".split())

# The categories of "Where the misses are lost", in the order the section lists them.
FOUND, ORDER, RERANKER, CANDIDATES = "found", "order", "reranker", "candidates"
# The other stages' labels: a mode's ordering stage carries its own (retrieval/stages.py, see stage_label).
STAGE_LABELS = {"dense": "dense", "bm25": "BM25", "prior": "document prior", "rerank": "reranker", "final": "final"}
RETRIEVERS = ("dense", "bm25")  # the stages whose first `pools` entries are the candidates
UNKNOWN_STAGE = "stage unknown (older report)"  # a worse question of a report without stage ranks

_WORD = re.compile(TOKEN_PATTERN)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~])")


def in_pool(stages: StageRanks) -> bool:
    """Whether an acceptable location was among the candidates of the dense or the BM25 list."""
    return any(stages.ranks.get(name) is not None and stages.ranks[name] <= size
               for name, size in stages.pools.items())


def just_outside(stages: StageRanks) -> bool:
    """Whether a dense or BM25 list held an acceptable location only beyond its candidates (diagnostic depth)."""
    return not in_pool(stages) and any(stages.ranks.get(name) is not None for name in stages.pools)


def before_rerank(stages: StageRanks) -> str:
    """The stage whose order the reranker (or, without one, the final cut) took: the fusion or the one list."""
    names = [name for name in stages.ranks if name not in ("rerank", "final")]
    return names[-1]


def loss_stage(stages: StageRanks, cutoff: int) -> str:
    """Where the first acceptable location fell below `cutoff`: FOUND (it did not: final rank <= cutoff),
    CANDIDATES (in no candidate list), RERANKER (within cutoff before reranking, below after) or ORDER (in a
    candidate list, but the fusion, or a single retriever's own order, put it below cutoff)."""
    final = stages.ranks.get("final")
    if final is not None and final <= cutoff:
        return FOUND
    if not in_pool(stages):
        return CANDIDATES
    if "rerank" in stages.ranks:
        before = stages.ranks[before_rerank(stages)]
        if before is not None and before <= cutoff:
            return RERANKER
    return ORDER


def lists_within(stages: StageRanks, cutoff: int) -> list[str]:
    """The dense and BM25 lists that held an acceptable location within `cutoff` (in a fusing mode)."""
    if len(stages.pools) < 2:
        return []
    return [name for name in RETRIEVERS if stages.ranks.get(name) is not None and stages.ranks[name] <= cutoff]


def loss_reason(stages: StageRanks, cutoff: int) -> str:
    """Why a question is not within `cutoff`, in a few words: 'fusion (RRF); dense had it at 1', 'below 5 in
    every candidate list', 'the reranker', 'in no candidate list'; '' when it is within."""
    category = loss_stage(stages, cutoff)
    if category == ORDER:
        had = lists_within(stages, cutoff)
        if had:
            return f"{order_label(stages)}; " + ", ".join(f"{stage_label(name)} had it at {stages.ranks[name]}"
                                                          for name in had)
        if len(stages.pools) > 1:
            return f"below {cutoff} in every candidate list"
        return order_label(stages)
    return {FOUND: "", RERANKER: "the reranker", CANDIDATES: "in no candidate list"}[category]


def order_label(stages: StageRanks) -> str:
    """What ordered the candidates before any reranker, in words: 'fusion (RRF)', 'the dense order'."""
    stage = before_rerank(stages)
    if stage in STAGE_ORDERS:
        return STAGE_ORDERS[stage].words
    if stage == "prior":
        return "the document prior"
    return f"the {stage_label(stage)} order (no fusion in this mode)"


def stage_label(name: str) -> str:
    """A stage's name in the details file ('BM25', 'RRF'); a name no stage has (a newer report's) as it is."""
    return STAGE_ORDERS[name].label if name in STAGE_ORDERS else STAGE_LABELS.get(name, name)


def stage_text(stages: StageRanks) -> str:
    """'dense 3 · BM25 41 (beyond its 30 candidates) · RRF 7 · final 7'; '–' with how far a list reached. Ranks
    in pages name the pages: 'BM25 41 (beyond the 24 pages of its candidates)', 'BM25 – (not within 87 pages)'."""
    pages = stages.unit == "page"
    parts = []
    for name, rank in stages.ranks.items():
        label = stage_label(name)
        if rank is None:
            length = stages.lengths.get(name, 0)
            parts.append(f"{label} {DASH} (not within {length}{pages_word(length) if pages else ''})")
        elif name in stages.pools and rank > stages.pools[name]:
            parts.append(f"{label} {rank} (beyond the {stages.pools[name]} pages of its candidates)" if pages else
                         f"{label} {rank} (beyond its {stages.pools[name]} candidates)")
        else:
            parts.append(f"{label} {rank}")
    return " · ".join(parts)


def pages_word(n: int) -> str:
    """' page' or ' pages' after a count of n."""
    return " page" if n == 1 else " pages"


def unit_words(stages: StageRanks | None) -> str:
    """What stage ranks count, for a label: 'pages', 'chunks', or '' when a report does not say."""
    return {"page": "pages", "chunk": "chunks"}.get(stages.unit, "") if stages is not None else ""


def via_text(q: QuestionResult, tolerance: int | None) -> str:
    """For a question whose rank only the page tolerance made: 'rank 2 via p. 10 (±1); exact page p. 11 at rank
    3' ('exact page not retrieved' when none was); '' for any other question. Files are named only when the
    question's locations name several."""
    if not q.via_tolerance:
        return ""
    several = len({loc.get("source") for loc in q.locations}) > 1

    def where(hit: Mapping[str, Any]) -> str:
        return f"{hit['source']} p. {hit['page']}" if several else f"p. {hit['page']}"

    exact = (f"exact page {where(q.exact.page)} at rank {q.exact.rank}" if q.exact.page is not None
             else "exact page not retrieved")
    within = f"±{tolerance}" if tolerance else "the page tolerance"
    return f"rank {q.rank} via {where(q.exact.via)} ({within}); {exact}"


def lost_at(stages: StageRanks | None, cutoff: int) -> str:
    """For a question that got worse: the stage that pushed it below its old rank `cutoff`, with its ranks."""
    if stages is None:
        return UNKNOWN_STAGE
    return f"{loss_reason(stages, cutoff) or f'still within {cutoff}'} ({stage_text(stages)})"


def loss_counts(per_query: Sequence[QuestionResult], k: int) -> dict[str, int]:
    """Counts of the questions with stage ranks by category at cutoff k, plus: `questions` (with stage ranks),
    `in_pool` (the candidate-pool ceiling), `just_outside` (of CANDIDATES: in a list beyond its candidates),
    `order_dense`/`order_bm25` (of ORDER: within k in that single list), `order_any` (of ORDER: within k in
    some single list, so the fusion itself lost it)."""
    counts = dict.fromkeys([FOUND, ORDER, RERANKER, CANDIDATES, "questions", "in_pool", "just_outside",
                            "order_dense", "order_bm25", "order_any"], 0)
    for q in per_query:
        if q.stages is None:
            continue
        category = loss_stage(q.stages, k)
        counts["questions"] += 1
        counts[category] += 1
        counts["in_pool"] += in_pool(q.stages)
        counts["just_outside"] += category == CANDIDATES and just_outside(q.stages)
        if category == ORDER:
            had = lists_within(q.stages, k)
            counts["order_any"] += bool(had)
            for name in had:
                counts[f"order_{name}"] += 1
    return counts


def render_losses(result: EvalResult) -> list[str]:
    """The "Where the misses are lost" section: one line per category at k = result.stage_k, the
    candidate-pool ceiling, and the details file; [] when no question has stage ranks."""
    with_stages = [q for q in result.per_query if q.stages is not None]
    if not with_stages or result.stage_k < 1:
        return []
    k, first = result.stage_k, with_stages[0].stages
    c = loss_counts(with_stages, k)
    n = c["questions"]
    unit = "documents" if result.kind == "dataset" else "chunks"
    retrievers = " and ".join(stage_label(name) for name in first.pools)
    order = ""
    if len(first.pools) > 1 and c[ORDER]:
        order = (f"  (fusion lost {c['order_any']} that a single list had within {k}: dense {c['order_dense']}, "
                 f"BM25 {c['order_bm25']}; {c[ORDER] - c['order_any']} below {k} in every list)")
    rerank = (str(c[RERANKER]), "") if "rerank" in first.ranks else (DASH, "  (no reranker in this run)")
    outside = ""
    if c[CANDIDATES]:
        longest = max(first.lengths[name] for name in first.pools)
        outside = (f"  ({c['just_outside']} of them just outside: beyond the candidates but within the first "
                   f"{longest}{pages_word(longest) if first.unit == 'page' else ''} of a list)")
    rows = [(f"found within {k}", str(c[FOUND]), ""),
            (f"in a candidate list, below {k} after {order_label(first).split(' (no')[0]}", str(c[ORDER]), order),
            (f"pushed below {k} by the reranker", *rerank),
            ("outside every candidate list", str(c[CANDIDATES]), outside)]
    width = max(len(label) for label, _, _ in rows) + 2
    counted = f", counted in {unit_words(first)}" if unit_words(first) else ""
    lines = [f"Where the misses are lost (at k = {k}; {n} question{'s' if n != 1 else ''} with stage ranks{counted})"]
    lines += [f"  {label:<{width}}{value:>4}{extra}" for label, value, extra in rows]
    lines.append(f"  Candidate-pool ceiling: {c['in_pool']} of {n} ({c['in_pool'] / n:.3f}) have an acceptable "
                 f"{'document' if unit == 'documents' else 'location'} among the candidates ({first.pool} chunks "
                 f"per retriever, {retrievers}): the best any reranker could reach at this depth")
    if result.details:
        via = sum(1 for q in result.per_query if q.rank == 1 and q.via_tolerance)
        lines.append(f"  Stage ranks and passages of every question not at rank 1: {result.details}"
                     + (f" (and of the {via} at rank 1 only through the ±{result.page_tolerance} page tolerance)"
                        if via else ""))
    return lines


# ----------------------------------------------------------------------------- passages

def query_terms(query: str) -> set[str]:
    """The query's words worth marking: BM25 tokens with a digit, or of 4 letters or more and not frequent."""
    return {t for t in _WORD.findall(normalize(query))
            if (len(t) >= 4 and t not in UNMARKED_WORDS) or any(ch.isdigit() for ch in t)}


def escape_markdown(text: str) -> str:
    """Text that renders as itself in Markdown, also at the start of a line ('1.' or '-' start no list)."""
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    return re.sub(r"^(\d+)([.)])", r"\1\\\2", re.sub(r"^([-+=])", r"\\\1", text))


def unescape_markdown(text: str) -> str:
    """The inverse of escape_markdown, for text shown on a terminal (--explain): every backslash there is one it
    added (a backslash of the text itself was doubled), so dropping each one before a character is exact."""
    return re.sub(r"\\(.)", r"\1", text)


def excerpt(text: str, query: str, width: int = EXCERPT_CHARS) -> str:
    """About `width` characters of a chunk (header dropped, whitespace collapsed) around the densest run of
    the query's words, Markdown-escaped, those words in **bold**, '…' where it was cut."""
    text = " ".join(strip_chunk_header(text).split())
    terms = query_terms(query)
    hits = [(m.start(), m.end()) for m in _WORD.finditer(text) if normalize(m.group()) in terms]
    start = 0
    if hits and len(text) > width:
        # The window after some hit's lead that holds the most hits; the earliest such window on ties.
        best, last = (0, 0), 0
        for i, (pos, _) in enumerate(hits):
            while last < len(hits) and hits[last][1] <= pos - min(EXCERPT_LEAD, pos) + width:
                last += 1
            if last - i > best[0]:
                best = (last - i, pos)
        start = max(0, best[1] - EXCERPT_LEAD)
        start = min(start, max(0, len(text) - width))
        if start:
            space = text.find(" ", start)
            start = space + 1 if 0 <= space < best[1] else start
    end = min(len(text), start + width)
    if end < len(text):
        space = text.rfind(" ", start, end)
        end = space if space > start else end
    out, cursor = [], start
    for hit_start, hit_end in hits:
        if hit_start < start or hit_end > end:
            continue
        out += [escape_markdown(text[cursor:hit_start]), f"**{escape_markdown(text[hit_start:hit_end])}**"]
        cursor = hit_end
    out.append(escape_markdown(text[cursor:end]))
    return ("…" if start else "") + "".join(out) + ("…" if end < len(text) else "")


def passage_where(passage: Passage) -> str:
    return passage.source if passage.page is None else f"{passage.source} p. {passage.page}"


def location_text(loc: Mapping[str, Any]) -> str:
    """An expected location: 'file.pdf p. 3', 'file.pdf p. 3-5', 'file.pdf' (any page), 'doc7 (grade 2)'."""
    if "doc_id" in loc:
        return f"{loc['doc_id']} (grade {loc['grade']})"
    if loc.get("page") is None:
        return f"{loc['source']} (any page)"
    return f"{loc['source']} p. {loc['page']}" + (f"-{loc['last_page']}" if loc.get("last_page") else "")


def render_question_block(q: QuestionResult, k: int, stage_lists: Mapping[str, Sequence[str]] | None = None,
                          in_goldset: bool = True, tolerance: int | None = None, list_unit: str = "") -> list[str]:
    """One question's Markdown block: rank, expected locations, the exact page when only the page `tolerance`
    made the rank, stage ranks and the stage that lost it, the first retrieved passages, the expected passage
    when a list held it; with `stage_lists` (--explain) the first entries of every stage's list too, in
    `list_unit`s ("page" or "chunk"), numbered as the stage ranks count them."""
    rank = "not in the goldset" if not in_goldset else \
        (f"rank {q.rank}" if q.rank is not None else "never found")
    lines = [f"## {rank}: {escape_markdown(' '.join(q.question.split()))}", ""]
    if in_goldset:
        corpus = f" · corpus {q.corpus}" if q.corpus else ""
        lines.append(f"- query id `{q.query_id}`{corpus}")
        lines.append(f"- expected: {'; '.join(escape_markdown(location_text(loc)) for loc in q.locations)}")
        if q.via_tolerance:
            lines.append(f"- {escape_markdown(via_text(q, tolerance))}")
    if q.stages is not None and in_goldset:
        counted = f" ({unit_words(q.stages)})" if unit_words(q.stages) else ""
        lines.append(f"- stage ranks{counted}: {stage_text(q.stages)}")
        reason = loss_reason(q.stages, k)
        lines.append(f"- at k = {k}: " + (f"lost: {reason}" if reason else f"found within {k}"))
    lines += ["", f"First {len(q.passages)} retrieved (query words in bold):", ""]
    for p in q.passages:
        lines += [f"{p.rank}. {escape_markdown(passage_where(p))} · score {p.score:.4f}  ", f"   > {p.excerpt}", ""]
    if not q.passages:
        lines += ["(nothing was retrieved)", ""]
    if in_goldset:
        if q.gold is None:
            lines += ["First acceptable passage: in no stage's list.", ""]
        else:
            where = f"rank {q.gold.rank} in the {stage_label(q.gold.stage)} list"
            lines += [f"First acceptable passage ({where}): {escape_markdown(passage_where(q.gold))} · score "
                      f"{q.gold.score:.4f}  ", f"> {q.gold.excerpt}", ""]
    if stage_lists:
        unit = {"page": "pages", "chunk": "chunks"}.get(list_unit, "entries")
        how = ", numbered as the stage ranks count them; ← marks an acceptable location" if in_goldset else ""
        lines += [f"Stage lists (the first {STAGE_LIST_SHOWN} {unit} of each{how}):", ""]
        for name, entries in stage_lists.items():
            lines.append(f"- {stage_label(name)}:" + ("" if entries else " (empty)"))
            lines += [f"  {rank}. {escape_markdown(entry)}" for rank, entry in enumerate(entries, 1)]
        lines.append("")
    return lines


def needs_details(q: QuestionResult) -> bool:
    """Whether a question's passages go into the details file: rank worse than 1, never found, or at rank 1 only
    through the page tolerance."""
    return q.rank != 1 or q.via_tolerance


def render_details(result: EvalResult, report: str) -> str:
    """The Markdown details file: a block per question not at rank 1, in the report's per-question order.
    Only the "Generated:" line changes between two runs of one configuration on one index."""
    rows = sorted((q for q in result.per_query if needs_details(q)),
                  key=lambda q: (q.rank is None, q.rank or 0, q.question))
    mode = dict(result.config).get("Retrieval mode", result.name)
    via = sum(1 for q in rows if q.rank == 1)  # needs_details: at rank 1 only through the tolerance
    tolerance = result.page_tolerance
    which = (f"whose first acceptable rank is worse than 1, that were never found, or whose rank 1 came only "
             f"through the ±{tolerance} page tolerance" if via else
             "whose first acceptable rank is worse than 1 or that were never found")
    at_one = f"; {via} at rank 1 through the tolerance" if via else ""
    exact = (" A rank that only the tolerance made (a neighbouring page ranked before the exact one) names that "
             "page and where the exact page ranked." if tolerance else "")
    counted = next((unit_words(q.stages) for q in rows if unit_words(q.stages)), "")
    stage_unit = f" (stage ranks count {counted}, as the final rank does)" if counted else ""
    lines = [f"# Retrieval details: {escape_markdown(result.title)}", "", f"Generated: {result.generated}", "",
             f"The questions of {escape_markdown(report)} {which} ({len(rows)} of {result.num_queries}{at_one}), in "
             f"the report's order: where the expected location ranked at each stage{stage_unit}, the first "
             f"{result.stage_k} passages retrieved and the first acceptable passage (expected file, page within the "
             f"tolerance) when any stage's list held it.{exact} Retrieval mode: {escape_markdown(mode)}.", ""]
    for q in rows:
        lines += render_question_block(q, result.stage_k, tolerance=tolerance)
    if result.answers:
        from localrag.evaluation.answer_details import render_answer_details

        lines += render_answer_details(result.answers, {q.query_id: q.question for q in result.per_query})
    return "\n".join(lines).rstrip() + "\n"
