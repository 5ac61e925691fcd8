"""Stage attribution: `Retriever.retrieve_traced`, stage ranks, "Where the misses are lost", the details file,
--explain and the stage of a worse question in a comparison.

The planted corpus below is a fake index (fixed dense and BM25 lists), so every stage rank is known exactly:
12 chunks c01..c12 of doc.pdf, chunk cNN on 0-based page NN-1; 3 candidates per retriever, final depth k = 2,
RRF k = 60, diagnostic depth 6, page tolerance 0. A fake reranker scores every chunk 0 except c09 (-1), so it
keeps the fused order (sorted is stable) but drops c09 to the end.

  question  gold  dense (3 deep)     dense (6 deep)                BM25             RRF               reranked
  qa        c05   c01 c02 c03        c02 c01 c03 c04 c05 c06 (*)   c02              c02 c01 c03       = RRF
  qb        c08   c01 c02 c03        c01 c02 c03 c04 c06 c07       c08 c01 c02      c01 c02 c08 c03   = RRF
  qc        c09   c09 c01 c02        (the same, then c03 c04 c05)  c09 c03          c09 c01 c03 c02   c01 c03 c02 c09
  qd        c10   c10 c01 c02        (the same, then c03 c04 c05)  (none)           c10 c01 c02       = RRF

RRF by hand: qa: c02 1/61+1/62 > c01 1/61 > c03 1/63. qb: c01 1/61+1/62 = 0.03252 > c02 1/62+1/63 = 0.03100 >
c08 1/61 = 0.01639 > c03 1/63. qc: c09 2/61 > c01 1/62 = c03 1/62 (tie: dense is walked first) > c02 1/63.
(*) The trap: the 6-deep dense search orders its top differently from the 3-deep one (an approximate search
could); the candidates must stay the 3-deep list, the deeper search only adds a tail.
So qa: (a) outside every candidate list, just outside (dense 5); qb: (b) in the BM25 list at 1, fusion put it
at 3 > 2; qc: (c) fused 1, reranked 4; qd: (d) found at 1.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

import eval_retrieval as er
from localrag.evaluation import diagnosis
from localrag.evaluation import scoring as ev
from localrag.evaluation import report as eval_report
from localrag.goldset.format import Location
from localrag.evaluation.result import EvalResult, QuestionResult, StageRanks, Status
from localrag.retrieval.retriever import Retriever
from localrag.settings import RetrievalSettings

CHUNKS = {f"c{i:02d}": (f"[doc.pdf, page {i}]\nChunk {i} text about topic {i}.", {"source": "doc.pdf", "page": i - 1})
          for i in range(1, 13)}
DENSE = {"qa": (["c01", "c02", "c03"], ["c02", "c01", "c03", "c04", "c05", "c06"]),
         "qb": (["c01", "c02", "c03"], ["c01", "c02", "c03", "c04", "c06", "c07"]),
         "qc": (["c09", "c01", "c02"], ["c09", "c01", "c02", "c03", "c04", "c05"]),
         "qd": (["c10", "c01", "c02"], ["c10", "c01", "c02", "c03", "c04", "c05"])}
BM25 = {"qa": ["c02"], "qb": ["c08", "c01", "c02"], "qc": ["c09", "c03"], "qd": []}
GOLD = {"qa": 5, "qb": 8, "qc": 9, "qd": 10}  # 1-based page of each question's gold chunk (cNN is on page NN)


class FakeIndex:
    """What `Retriever` uses of an `Index`: fixed dense lists (by search depth) and BM25 lists per query."""

    files = {"doc.pdf": {"chunks": len(CHUNKS)}}
    info = {"counts": {"chunks": len(CHUNKS)}}

    def __init__(self):
        self.vectorstore = self
        self._collection = self
        self.embeddings = self
        self.dense_calls: list[int] = []

    def require_built(self):
        pass  # always built

    def embed_query(self, query):
        return query  # the "vector" names the query, so the fake search can look it up

    def nearest(self, vector, k):
        self.dense_calls.append(k)
        shallow, deep = DENSE[vector]
        ids = (shallow if k <= len(shallow) else deep)[:k]
        return [(i, 1.0 - 0.1 * n) for n, i in enumerate(ids)]

    def bm25(self):
        return self

    def search(self, query, k):
        return [(i, 10.0 - n) for n, i in enumerate(BM25[query])][:k]

    def fingerprint(self):
        return "fake"

    def chunks_by_id(self, ids):
        return {i: CHUNKS[i] for i in ids if i in CHUNKS}


class FakeReranker:
    """Scores 0 for every chunk but c09's (-1): the fused order stays, c09 drops to the end."""

    def predict(self, pairs, batch_size, show_progress_bar):
        return [-1.0 if text.startswith("[doc.pdf, page 9]") else 0.0 for _, text in pairs]


def settings(mode: str, rank_by: str) -> RetrievalSettings:
    return RetrievalSettings(retrieval_mode=mode, candidate_k=3, rrf_k=60, fusion="rrf", dense_weight=0.5,
                             document_prior=0.0, rank_by=rank_by, ivf_probes=0, query_instructions="")


def retriever(rerank: bool = True) -> Retriever:
    return Retriever(FakeIndex(), settings("hybrid", "chunk"), rerank_batch_size=8,
                     reranker=("fake", FakeReranker(), None) if rerank else (None, None, "turned off"))


def ids(hits) -> list[str]:
    return [doc.id for doc, _ in hits]


def traced(query: str, rag: Retriever | None = None) -> ev.Traced:
    trace = (rag or retriever()).retrieve_traced(query, k=2, depth=6)
    return ev.trace_goldset(trace, (Location("doc.pdf", GOLD[query]),), page_offset=1, tolerance=0, rank_by="chunk")


EXPECTED = {
    "qa": StageRanks({"dense": 5, "bm25": None, "rrf": None, "rerank": None, "final": None},
                     {"dense": 6, "bm25": 1, "rrf": 3, "rerank": 3, "final": 2}, {"dense": 3, "bm25": 1}, 3, "chunk"),
    "qb": StageRanks({"dense": None, "bm25": 1, "rrf": 3, "rerank": 3, "final": None},
                     {"dense": 6, "bm25": 3, "rrf": 4, "rerank": 4, "final": 2}, {"dense": 3, "bm25": 3}, 3, "chunk"),
    "qc": StageRanks({"dense": 1, "bm25": 1, "rrf": 1, "rerank": 4, "final": None},
                     {"dense": 6, "bm25": 2, "rrf": 4, "rerank": 4, "final": 2}, {"dense": 3, "bm25": 2}, 3, "chunk"),
    "qd": StageRanks({"dense": 1, "bm25": None, "rrf": 1, "rerank": 1, "final": 1},
                     {"dense": 6, "bm25": 0, "rrf": 3, "rerank": 3, "final": 2}, {"dense": 3, "bm25": 0}, 3, "chunk"),
}


@pytest.mark.parametrize("query", ["qa", "qb", "qc", "qd"])
def test_planted_stage_ranks(query):
    assert traced(query).stages == EXPECTED[query]


def test_stage_lists_of_the_trap_question():
    rag = retriever()
    trace = rag.retrieve_traced("qa", k=2, depth=6)
    # The pool is the 3-deep search that fusion used; the 6-deep search (another order) only adds its tail.
    assert ids(trace.stages["dense"]) == ["c01", "c02", "c03", "c04", "c05", "c06"]
    assert ids(trace.stages["rrf"]) == ["c02", "c01", "c03"]
    assert ids(trace.final) == ["c02", "c01"]
    assert trace.pool == 3
    assert rag.index.dense_calls == [3, 6]


@pytest.mark.parametrize("query", ["qa", "qb", "qc", "qd"])
@pytest.mark.parametrize("rerank", [True, False])
def test_traced_final_list_is_retrieve_s_at_every_depth(query, rerank):
    rag = retriever(rerank)
    expected = [(doc.id, score) for doc, score in rag.retrieve(query, k=2)]
    for depth in (0, 3, 6, 100):
        assert [(doc.id, score) for doc, score in rag.retrieve_traced(query, k=2, depth=depth).final] == expected
    assert [(d.id, s) for d, s in rag.candidates(query, 2)] == [
        (d.id, s) for d, s in rag.retrieve_traced(query, 2, rerank=False, depth=6).stages["rrf"]]


def test_categories_and_gold_passages():
    assert {q: diagnosis.loss_stage(traced(q).stages, 2) for q in GOLD} == {
        "qa": diagnosis.CANDIDATES, "qb": diagnosis.ORDER, "qc": diagnosis.RERANKER, "qd": diagnosis.FOUND}
    assert diagnosis.just_outside(traced("qa").stages) and not diagnosis.in_pool(traced("qa").stages)
    # The expected chunk shown in the details: the final list first, else the latest stage that held it.
    assert traced("qa").gold[:2] == ("dense", 5) and traced("qa").gold[2][0].id == "c05"
    assert traced("qb").gold[:2] == ("rerank", 3)
    assert traced("qd").gold[:2] == ("final", 1)
    assert diagnosis.loss_reason(traced("qb").stages, 2) == "fusion (RRF); BM25 had it at 1"
    assert diagnosis.loss_reason(traced("qc").stages, 2) == "the reranker"
    assert diagnosis.stage_text(traced("qa").stages) == (
        "dense 5 (beyond its 3 candidates) · BM25 – (not within 1) · RRF – (not within 3) · reranker – (not "
        "within 3) · final – (not within 2)")


def planted_result(k: int = 2) -> EvalResult:
    per_query = tuple(QuestionResult(q, f"question {q}", EXPECTED[q].ranks["final"],
                                     {"hit@2": float(EXPECTED[q].ranks["final"] is not None)}, stages=EXPECTED[q])
                      for q in sorted(EXPECTED))
    return EvalResult("goldset", "goldset g.csv", {"hit@2": 0.25}, 4, per_query, stage_k=k,
                      details="eval/g.details.md", status=Status(0))


def test_where_the_misses_are_lost_is_a_function_of_the_stage_ranks():
    # By hand at k = 2: qd found; qb in BM25 at 1, fused 3 (fusion lost it); qc fused 1, reranked 4; qa only in
    # the dense list at 5, beyond its 3 candidates. Ceiling: qb, qc, qd in a pool = 3 of 4.
    assert diagnosis.render_losses(planted_result()) == [
        "Where the misses are lost (at k = 2; 4 questions with stage ranks, counted in chunks)",
        "  found within 2                                      1",
        "  in a candidate list, below 2 after fusion (RRF)     1  (fusion lost 1 that a single list had within 2: "
        "dense 0, BM25 1; 0 below 2 in every list)",
        "  pushed below 2 by the reranker                      1",
        "  outside every candidate list                        1  (1 of them just outside: beyond the candidates "
        "but within the first 6 of a list)",
        "  Candidate-pool ceiling: 3 of 4 (0.750) have an acceptable location among the candidates (3 chunks per "
        "retriever, dense and BM25): the best any reranker could reach at this depth",
        "  Stage ranks and passages of every question not at rank 1: eval/g.details.md",
    ]
    assert diagnosis.loss_counts(planted_result().per_query, 2) == {
        "found": 1, "order": 1, "reranker": 1, "candidates": 1, "questions": 4, "in_pool": 3, "just_outside": 1,
        "order_dense": 0, "order_bm25": 1, "order_any": 1}
    # A result without stage ranks (an older report) has no section.
    assert diagnosis.render_losses(EvalResult("goldset", "t", {}, 1, (QuestionResult("q", "q", 1, {}),))) == []


def test_stage_ranks_round_trip_through_the_json_report():
    result = planted_result()
    back = EvalResult.from_json(json.loads(eval_report.render_json(result)))
    assert [q.stages for q in back.per_query] == [EXPECTED[q] for q in sorted(EXPECTED)]
    assert (back.stage_k, back.details) == (2, "eval/g.details.md")
    assert json.loads(eval_report.render_json(result))["per_query"][0]["stages"] == {
        "ranks": {"dense": 5, "bm25": None, "rrf": None, "rerank": None, "final": None},
        "lengths": {"dense": 6, "bm25": 1, "rrf": 3, "rerank": 3, "final": 2},
        "pools": {"dense": 3, "bm25": 1}, "pool": 3, "unit": "chunk"}


def test_compare_names_the_stage_a_worse_question_was_lost_at(tmp_path, capsys):
    new = planted_result()
    old = EvalResult("goldset", "goldset g.csv", {"hit@2": 1.0}, 4,
                     tuple(QuestionResult(q.query_id, q.question, 1, {"hit@2": 1.0}) for q in new.per_query))
    for result, name in ((old, "old.json"), (new, "new.json")):
        (tmp_path / name).write_text(eval_report.render_json(result), encoding="utf-8")
    assert er.main(["--compare", str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    worse = out[out.index("  Worse (3):") + 1:]
    assert worse == [
        "       1 -> –    question qa",
        "                 lost at: in no candidate list (dense 5 (beyond its 3 candidates) · BM25 – (not within "
        "1) · RRF – (not within 3) · reranker – (not within 3) · final – (not within 2))",
        "       1 -> –    question qb",
        "                 lost at: fusion (RRF); BM25 had it at 1 (dense – (not within 6) · BM25 1 · RRF 3 · "
        "reranker 3 · final – (not within 2))",
        "       1 -> –    question qc",
        "                 lost at: the reranker (dense 1 · BM25 1 · RRF 1 · reranker 4 · final – (not within 2))",
    ]


def test_excerpt_marks_query_words_and_escapes_markdown():
    text = "[a.pdf, page 3]\n" + "filler " * 80 + "The *vega* of an  option\nmeasures volatility_risk. " + "x " * 200
    out = diagnosis.excerpt(text, "What is the vega of a call?", width=80)
    # Around the densest run of query words; 'what', 'the', 'of' are not marked; '*' and '_' escaped.
    assert out == "…filler filler filler filler filler filler filler The \\***vega**\\* of an option…"
    assert diagnosis.excerpt("1. Vega matters", "vega") == "1\\. **Vega** matters"
    assert diagnosis.excerpt("", "vega") == ""


# ----------------------------------------------------------------------------- the CLI on the tiny index

CLI_GOLD = ("question,expected_source,expected_page\n"
            "How sensitive is the option value to volatility?,options.pdf,2\n"
            "What is vega?,weather.pdf,1\n"
            "Wie reagiert die Familie auf Gregor Samsa?,Literatur_Übersicht.pdf,1\n")


@pytest.fixture
def cli_args(tiny_index, tmp_path):
    docs, index = tiny_index
    gold = tmp_path / "gold.csv"
    gold.write_text(CLI_GOLD, encoding="utf-8")
    return ["--goldset", str(gold), "--docs", str(docs), "--index", str(index), "--no-sync", "--quiet",
            "--page-tolerance", "0"]


def test_details_file_and_report_are_deterministic(cli_args, tmp_path, capsys):
    report = tmp_path / "r.txt"
    texts = []
    for _ in range(2):
        assert er.main([*cli_args, "--report", str(report), "--no-compare"]) == 0
        texts.append([(report.read_text(encoding="utf-8")), (tmp_path / "r.details.md").read_text(encoding="utf-8")])
    capsys.readouterr()
    for first, second in zip(*texts):
        diff = [(a, b) for a, b in zip(first.splitlines(), second.splitlines()) if a != b]
        assert len(first.splitlines()) == len(second.splitlines()) and len(diff) <= 1
        assert all(a.startswith("Generated: ") for a, _ in diff)
    details = texts[0][1]
    # ±0 pages: volatility ranks options p0 first (expected p. 2 is 0-based p1): rank 2; vega expects weather.pdf,
    # which BM25 does not find ("vega" is not on the weather page) but dense does.
    assert [line for line in details.splitlines() if line.startswith("## ")] == [
        "## rank 2: How sensitive is the option value to volatility?",
        "## rank 2: What is vega?"]
    # The run ranks by page: every stage's rank counts pages, as the final rank does, and says so.
    assert "- stage ranks (pages): dense 2 · BM25 3 · RRF 2 · final 2" in details
    assert "- stage ranks (pages): dense 2 · BM25 – (not within 1 page) · RRF 2 · final 2" in details
    # Query words marked: 'option', 'value', 'volatility'; not 'sensitivity' (the question says 'sensitive').
    assert "1. options.pdf p. 1 · score 1.0000  \n   > Vega is the sensitivity of an **option**'s **value** to the " \
        "implied **volatility** of the underlying asset. A long call or put has positive vega.\n" in details
    assert f"Stage ranks and passages of every question not at rank 1: {tmp_path / 'r.details.md'}" in texts[0][0]
    assert "expected: weather.pdf p. 1 · first: options.pdf p. 1" in texts[0][0]
    stages = {q["question"]: q["stages"]["ranks"] for q in json.loads((tmp_path / "r.json").read_text())["per_query"]}
    assert stages["Wie reagiert die Familie auf Gregor Samsa?"] == {"dense": 1, "bm25": 1, "rrf": 1, "final": 1}


def test_explain_a_goldset_question_by_id_and_by_text(cli_args, tmp_path, capsys):
    from localrag.goldset import format as gs

    qid = gs.query_id("What is vega?")
    outputs = []
    for text in (qid, "  what is   VEGA? "):
        assert er.main([*cli_args, "--explain", text]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    lines = outputs[0].splitlines()
    assert lines[2:8] == ["## rank 2: What is vega?", "", f"- query id `{qid}`", "- expected: weather.pdf p. 1",
                          "- stage ranks (pages): dense 2 · BM25 – (not within 1 page) · RRF 2 · final 2",
                          "- at k = 5: found within 5"]
    assert "First acceptable passage (rank 2 in the final list): weather.pdf p. 1 · score 0.3333  " in lines
    # Stage lists in pages, numbered as the stage ranks count them, the expected page marked where it stands.
    assert "Stage lists (the first 10 pages of each, numbered as the stage ranks count them; ← marks an acceptable " \
           "location):" in lines
    assert lines[lines.index("- BM25:"):lines.index("- RRF:")] == ["- BM25:", "  1. options.pdf p. 1"]
    assert lines[lines.index("- dense:") + 2] == "  2. weather.pdf p. 1  ← expected p. 1"
    assert lines[lines.index("- final:") + 2] == "  2. weather.pdf p. 1  ← expected p. 1"
    assert sum(line.endswith("← expected p. 1") for line in lines) == 3  # dense, RRF and final hold it; not BM25
    assert not list(tmp_path.glob("*.txt")) and not list(tmp_path.glob("*.md"))  # no report written


def test_explain_a_question_not_in_the_goldset(cli_args, capsys):
    assert er.main([*cli_args, "--explain", "Which crops need rain?"]) == 0
    out = capsys.readouterr().out
    assert "; not a question or query id of " in out.splitlines()[0]
    assert "## not in the goldset: Which crops need rain?" in out
    assert "stage ranks" not in out and "First acceptable passage" not in out
    assert "First 5 retrieved (query words in bold):" in out and "\n- dense:\n  1. " in out and "\n- RRF:\n" in out
    assert "Stage lists (the first 10 pages of each):" in out and "←" not in out  # no expected page to mark


def test_explain_prints_no_markdown_escapes(cli_args, capsys):
    assert er.main([*cli_args, "--explain", r"Is Options_Pricing [1] a *call* \ put?"]) == 0
    out = capsys.readouterr().out
    assert r"## not in the goldset: Is Options_Pricing [1] a *call* \ put?" in out.splitlines()


def test_unescape_markdown_inverts_escape_markdown():
    from localrag.evaluation.diagnosis import escape_markdown, unescape_markdown

    for text in ("Options_Pricing", r"a \ b \_ c", "1. first", "- item", "`x` *y* [z] <w> #h |p| ~s", "+= 2) ok"):
        assert unescape_markdown(escape_markdown(text)) == text
    assert escape_markdown(r"a\_b") == r"a\\\_b"


@pytest.mark.parametrize("extra, message", [
    (["--explain", "  "], "error: --explain '  ' has no visible text, only U+0020; give a question or a query id of "
                          "the goldset\n"),
    # The rule of localrag/text/query.py: zero-width characters were searched for, and a lone surrogate (a command
    # line argument that is not UTF-8, decoded with surrogateescape) reached the tokenizer.
    (["--explain", "\u200b\u2060"], "error: --explain '\\u200b\\u2060' has no visible text, only U+200B, U+2060; "
                                    "give a question or a query id of the goldset\n"),
    (["--explain", "vega \udcff"], "error: --explain 'vega \\udcff' holds U+DCFF (character 6), a lone surrogate, "
                                   "which is not valid Unicode; give a question or a query id of the goldset\n"),
    (["--explain", "vega", "--ablation"], "error: --explain and --ablation cannot be combined; run them one at a "
                                          "time\n"),
    (["--explain", "vega", "--diagnostic-depth", "0"], "error: --diagnostic-depth must be 1 or more, got 0\n"),
])
def test_explain_usage_errors(cli_args, capsys, extra, message):
    assert er.main([*cli_args, *extra]) == 2
    assert capsys.readouterr().err == message


def test_the_committed_report_names_its_details_file_without_absolute_paths():
    report = (ROOT / "eval" / "baseline.txt").read_text(encoding="utf-8")
    details = (ROOT / "eval" / "baseline.details.md").read_text(encoding="utf-8")
    assert "  Stage ranks and passages of every question not at rank 1: eval/baseline.details.md" in report
    for text in (report, details):
        assert str(ROOT) not in text and str(Path.home()) + "/" not in text


# ----------------------------------------------------------------------------- stage ranks in pages

# A second planted index whose pages hold several chunks (page N of doc.pdf is 0-based N-1): p1a, p1b on page 1,
# p2a on 2, p3a, p3b on 3, p4a on 4. 3 candidates per retriever, RRF k = 60, the gold page 4 (chunk p4a):
#   dense (3 deep) p1a p1b p3a; (6 deep) p1a p1b p3a p2a p3b p4a; BM25 p1b p3b p4a
#   RRF: p1b 1/61+1/62 > p1a 1/61 > p3b 1/62 > p3a 1/63 = p4a 1/63 (tie: dense is walked first)
# Counted in chunks the gold chunk is dense 6, BM25 3, RRF 5; counted in pages (each list collapsed to its pages
# by their best chunk, as the final list is) dense [1 3 2 4] -> 4, BM25 [1 3 4] -> 3, RRF [1 3 4] -> 3, final 3
# (k = 3 pages). The trap: chunk ranks beside a page rank ("RRF 5 · final 3") say fusion put it lower than the
# final list does. The dense candidates p1a p1b p3a stand on 2 pages: dense's page 4 is beyond them.
PAGE_CHUNKS = {name: (f"[doc.pdf, page {name[1]}]\nText {name}.", {"source": "doc.pdf", "page": int(name[1]) - 1,
                                                                   "chunk": "ab".index(name[2])})
               for name in ("p1a", "p1b", "p2a", "p3a", "p3b", "p4a")}
PAGE_DENSE = (["p1a", "p1b", "p3a"], ["p1a", "p1b", "p3a", "p2a", "p3b", "p4a"])
PAGE_BM25 = ["p1b", "p3b", "p4a"]


class PageFakeIndex(FakeIndex):
    """FakeIndex over PAGE_CHUNKS: one query, fixed lists."""

    files = {"doc.pdf": {"chunks": len(PAGE_CHUNKS)}}

    def nearest(self, vector, k):
        shallow, deep = PAGE_DENSE
        return [(i, 1.0 - 0.1 * n) for n, i in enumerate((shallow if k <= len(shallow) else deep)[:k])]

    def search(self, query, k):
        return [(i, 10.0 - n) for n, i in enumerate(PAGE_BM25)][:k]

    def chunks_by_id(self, ids):
        return {i: PAGE_CHUNKS[i] for i in ids if i in PAGE_CHUNKS}


def page_trace(rank_by: str, mode: str = "hybrid", k: int = 3):
    rag = Retriever(PageFakeIndex(), settings(mode, rank_by), rerank_batch_size=8,
                    reranker=(None, None, "turned off"))
    return rag.retrieve_traced("q", k=k, rerank=False, depth=6)


def test_stage_ranks_count_pages_when_the_run_ranks_by_page():
    gold = (Location("doc.pdf", 4),)
    assert [doc.id for doc, _ in page_trace("page").final] == ["p1b", "p3b", "p4a"]
    assert ev.trace_goldset(page_trace("page"), gold, 1, 0, "page").stages == StageRanks(
        {"dense": 4, "bm25": 3, "rrf": 3, "final": 3}, {"dense": 4, "bm25": 3, "rrf": 3, "final": 3},
        {"dense": 2, "bm25": 3}, 3, "page")
    # Ranked by chunk every list stays chunks, and the final list (3 chunks) misses the gold chunk.
    assert ev.trace_goldset(page_trace("chunk"), gold, 1, 0, "chunk").stages == StageRanks(
        {"dense": 6, "bm25": 3, "rrf": 5, "final": None}, {"dense": 6, "bm25": 3, "rrf": 5, "final": 3},
        {"dense": 3, "bm25": 3}, 3, "chunk")
    stages = ev.trace_goldset(page_trace("page"), gold, 1, 0, "page").stages
    assert diagnosis.stage_text(stages) == "dense 4 (beyond the 2 pages of its candidates) · BM25 3 · RRF 3 · final 3"
    nowhere = ev.trace_goldset(page_trace("page"), (Location("doc.pdf", 5),), 1, 0, "page").stages
    assert diagnosis.stage_text(nowhere) == ("dense – (not within 4 pages) · BM25 – (not within 3 pages) · RRF – "
                                            "(not within 3 pages) · final – (not within 3 pages)")
    # The gold passage the details show is the page's best chunk in the list that ranked it.
    assert ev.trace_goldset(page_trace("page"), (Location("doc.pdf", 3),), 1, 0, "page").gold[2][0].id == "p3b"


def test_union_is_dense_only_where_dense_candidates_fill_the_list():
    # Union = dense's 3 candidates, then BM25's new hits: p1a p1b p3a p3b p4a, in pages p1 p3 p4. Two pages: dense's
    # candidates (2 pages) fill them; three: the third page, 4, is BM25's.
    assert ev.trace_goldset(page_trace("page", "union", k=2), (), 1, 0, "page").dense_order
    assert not ev.trace_goldset(page_trace("page", "union", k=3), (), 1, 0, "page").dense_order
    assert ev.trace_goldset(page_trace("chunk", "union", k=3), (), 1, 0, "chunk").dense_order  # 3 chunks: all dense's
    assert not ev.trace_goldset(page_trace("page", "bm25", k=2), (), 1, 0, "page").dense_order  # no dense list


def test_acceptable_mark_names_why_a_page_counts():
    loc, file_loc, pages = Location("a.pdf", 7), Location("b.pdf"), Location("c.pdf", 3, 5)
    assert ev.acceptable_mark("a.pdf", 6, (loc,), 1, 1) == "expected p. 7"
    assert ev.acceptable_mark("a.pdf", 7, (loc,), 1, 1) == "within ±1 of expected p. 7"
    assert ev.acceptable_mark("a.pdf", 7, (loc,), 1, 0) == ""
    assert ev.acceptable_mark("A.PDF", 5, (loc,), 1, 1) == "within ±1 of expected p. 7"  # names as the goldset matches
    assert ev.acceptable_mark("b.pdf", 40, (loc, file_loc), 1, 0) == "expected file, any page"
    assert ev.acceptable_mark("c.pdf", 4, (pages,), 1, 0) == "expected p. 3-5"
    # Two locations: the exact page wins over a neighbour of the other.
    assert ev.acceptable_mark("a.pdf", 6, (Location("a.pdf", 6), loc), 1, 1) == "expected p. 7"


def test_details_block_marks_a_rank_made_by_the_tolerance():
    from localrag.evaluation.result import ExactRank

    q = QuestionResult("q1", "Was versteht man unter erlebter Rede?", 2, {}, "",
                       ({"source": "lit.pdf", "page": 11},),
                       exact=ExactRank(3, {"source": "lit.pdf", "page": 10}, {"source": "lit.pdf", "page": 11}))
    block = diagnosis.render_question_block(q, 5, tolerance=1)
    assert block[2:5] == ["- query id `q1`", "- expected: lit.pdf p. 11",
                          "- rank 2 via p. 10 (±1); exact page p. 11 at rank 3"]
    missing = QuestionResult("q2", "q", 1, {}, "", ({"source": "a.pdf", "page": 2}, {"source": "b.pdf", "page": 1}),
                             exact=ExactRank(None, {"source": "a.pdf", "page": 3}))
    assert diagnosis.via_text(missing, 1) == "rank 1 via a.pdf p. 3 (±1); exact page not retrieved"
    assert diagnosis.needs_details(missing)  # at rank 1, but only through the tolerance
    exact_one = QuestionResult("q3", "q", 1, {}, exact=ExactRank(1))
    assert diagnosis.via_text(exact_one, 1) == "" and not diagnosis.needs_details(exact_one)
