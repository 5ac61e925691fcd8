"""`--compare OLD.json NEW.json` on hand-written reports and real runs, and `--ablation` on the tiny corpus.

Ranks on TINY_CORPUS at --page-tolerance 0 (expected page must match exactly; orders listed in
test_eval_retrieval.py), for the goldset GOLD below:

  question                                      dense  bm25  hybrid  union
  volatility (options p. 2)                       2     3      2      2     bm25: [options p0, weather p0, options p1]
  Black-Scholes (options p. 2)                    1     1      1      1
  crops (weather.pdf)                             1     1      1      1
  Kafka (Literatur_Übersicht.pdf p. 1)            1     1      1      1
  vega (options p. 2)                             3     –      3      3     bm25 returns options p0 only
  scanned appendix (scans.pdf, not indexed)       –     –      –      –
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import eval_retrieval as er
from conftest import TINY_GOLD

GOLD = TINY_GOLD
NO_DIFFERENCE = "no detectable difference at this goldset size"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = er.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


SETTINGS = {"index": "eval/index", "chunk_size": 2000, "chunk_headers": True, "retrieval_mode": "hybrid"}


def fake_report(ranks: dict[str, int | None], questions: dict[str, str] | None = None,
                settings: dict | None = SETTINGS) -> dict:
    """A JSON report as eval_retrieval writes it, from first-match ranks (None = not found): Hit@1, Hit@5, MRR;
    `settings` None: a report written before reports had machine-readable settings."""
    per_query = []
    for qid, rank in ranks.items():
        metrics = {"hit@1": float(rank == 1), "hit@5": float(rank is not None and rank <= 5),
                   "mrr": 0.0 if rank is None else 1 / rank}
        per_query.append({"query_id": qid, "question": (questions or {}).get(qid, f"Question {qid}"),
                          "corpus": "", "locations": [], "rank": rank, "metrics": metrics, "top": []})
    means = {key: sum(q["metrics"][key] for q in per_query) / len(per_query) for key in ("hit@1", "hit@5", "mrr")}
    return {"generated": "2025-01-01 00:00:00", "title": "goldset gold.csv", "kind": "goldset", "config": {},
            **({"settings": settings} if settings is not None else {}),
            "metrics": means, "num_queries": len(per_query), "per_query": per_query}


def write_json(path: Path, payload: dict) -> Path:
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def metric_line(out: str, label: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"  {label} "))


QIDS = [f"q{i:02d}" for i in range(1, 21)]


# ----------------------------------------------------------------------------- --compare on hand-written reports


def test_identical_reports(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # paths inside the working folder are shown relative to it
    # Ranks 1, 2, 3, None, 1, 2, 3, None, ... : Hit@1 = 5/20, Hit@5 = 15/20, MRR = 5 * (1 + 1/2 + 1/3) / 20.
    payload = fake_report({qid: [1, 2, 3, None][i % 4] for i, qid in enumerate(QIDS)})
    old, new = write_json(tmp_path / "old.json", payload), write_json(tmp_path / "new.json", payload)
    code, out, err = run(capsys, "--compare", old, new)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "new.json vs. old.json",
        "Compared to old.json (20 common questions)",
        # Three metrics, none rejected: Holm's last level is 0.05 / 3, so the intervals are 98.33 % intervals.
        "  metric        old    new    diff  98.33% CI of diff       p  p Holm  verdict",
        f"  Hit@1       0.250  0.250  +0.000  [+0.000, +0.000]    1.000   1.000  {NO_DIFFERENCE}",
        f"  Hit@5       0.750  0.750  +0.000  [+0.000, +0.000]    1.000   1.000  {NO_DIFFERENCE}",
        f"  MRR         0.458  0.458  +0.000  [+0.000, +0.000]    1.000   1.000  {NO_DIFFERENCE}",
        "  (two-sided paired randomization test: every sign pattern where at most 16 questions differ, else 10,000 "
        "drawn with",
        "   seed 0; Holm's adjustment over the 3 metrics: a verdict needs an adjusted p < 0.05; each interval inverts "
        "the",
        "   test at Holm's last level, 0.01667, so it excludes 0 exactly when the verdict says better or worse)",
        "  Better (0): none",
        "  Worse (0): none",
    ]


def test_compare_names_the_settings_that_differ_and_refuses_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ranks = {qid: [1, 2, 3, None][i % 4] for i, qid in enumerate(QIDS)}
    # chunk_size and index differ; chunk_headers is equal (not listed); the old report lacks retrieval_mode and
    # has a key the new one lacks (listed last, after the new report's keys in their order).
    old_settings = {"index": "eval/index", "chunk_size": 2000, "chunk_headers": True, "rrf_k": 60}
    new_settings = {"index": "eval/.cache/indexes/docs-1-2", "chunk_size": "page", "chunk_headers": True,
                    "retrieval_mode": "dense"}
    old = write_json(tmp_path / "old.json", fake_report(ranks, settings=old_settings))
    new = write_json(tmp_path / "new.json", fake_report(ranks, settings=new_settings))
    code, out, err = run(capsys, "--compare", old, new)
    assert (code, err) == (0, "")
    assert out.splitlines()[:3] == [
        "new.json vs. old.json",
        "Compared to old.json (20 common questions)",
        "  Settings that differ: index eval/index → eval/.cache/indexes/docs-1-2; chunk_size 2000 → page; "
        "retrieval_mode unset → dense; rrf_k 60 → unset",
    ]
    assert out.splitlines()[3] == "  metric        old    new    diff  98.33% CI of diff       p  p Holm  verdict"


def test_compare_with_a_report_older_than_settings_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ranks = {qid: 1 for qid in QIDS}
    old = write_json(tmp_path / "old.json", fake_report(ranks, settings=None))
    new = write_json(tmp_path / "new.json", fake_report(ranks))
    code, out, err = run(capsys, "--compare", old, new)
    assert (code, err) == (0, "")
    assert out.splitlines()[2] == ("  Settings: the old report records no machine-readable settings (written before "
                                   "reports had them), so which settings differ is unknown; compare their "
                                   "Configuration blocks")
    assert out.splitlines()[3].startswith("  metric ")


def test_new_wins_on_every_question(tmp_path, capsys):
    # Old: q01-q10 at rank 2, q11-q20 never found; new: all at rank 1.
    # Hit@1: every difference is +1; 20 non-zero differences are more than EXACT_MAX_NONZERO (16), so p is Monte
    #   Carlo: only the all-plus and all-minus sign patterns (2 of 2^20) reach |sum| = 20, none is drawn in 10,000,
    #   p = (0 + 1) / 10,001 = 0.0001 -> "<0.001". Any shift but 1 leaves 20 equal differences d - delta, which
    #   again only those two patterns reach: the interval is [1, 1].
    # Hit@5: 10 differences of +1 and 10 of 0; the exact test over the 10 non-zero ones gives
    #   p = 2 / 2^10 = 0.00195 -> "0.002". Holm over the 3 metrics: Hit@1 and MRR (p 0.0001 each) come first,
    #   times 3 and 2; Hit@5 is last, times 1: adjusted 0.00195 as well. All three are rejected, so Holm's last
    #   level is 0.05 and the intervals are 95 % intervals.
    # MRR: old mean (10 * 1/2) / 20 = 0.25, new 1: diff +0.75.
    old = write_json(tmp_path / "old.json", fake_report({q: (2 if i < 10 else None) for i, q in enumerate(QIDS)}))
    new = write_json(tmp_path / "new.json", fake_report({q: 1 for q in QIDS}))
    code, out, _ = run(capsys, "--compare", old, new)
    assert code == 0
    assert out.splitlines()[2] == "  metric        old    new    diff  95% CI of diff          p  p Holm  verdict"
    assert metric_line(out, "Hit@1") == "  Hit@1       0.000  1.000  +1.000  [+1.000, +1.000]   <0.001  <0.001  better"
    assert metric_line(out, "Hit@5").startswith("  Hit@5       0.500  1.000  +0.500  [+")
    assert metric_line(out, "Hit@5").endswith("    0.002   0.002  better")
    assert metric_line(out, "MRR").startswith("  MRR         0.250  1.000  +0.750  [+")
    assert metric_line(out, "MRR").endswith("   <0.001  <0.001  better")
    lines = out.splitlines()
    better = lines.index("  Better (20):")
    # Found-vs-not-found changes first (q11-q20: – -> 1), then rank changes (q01-q10: 2 -> 1), each by id.
    assert lines[better + 1:better + 21] == (
        [f"       – -> 1    Question q{i}" for i in range(11, 21)]
        + [f"       2 -> 1    Question q{i:02d}" for i in range(1, 11)])
    assert lines[better + 21:] == ["  Worse (0): none"]


def test_one_worse_question_is_no_detectable_difference(tmp_path, capsys):
    # 19 questions unchanged at rank 1, q07 falls from 1 to 3. Hit@1: differences 19 x 0 and one -1, so
    # diff = -1/20 = -0.050; the only non-zero difference flips to +1 or -1, both as extreme: p = 1.
    # Questions needed: mean -0.05, sd = sqrt((19 * 0.05^2 + 0.95^2) / 19) = sqrt(0.05) = 0.2236;
    # n = ceil(((1.95996 + 0.84162) * 0.2236 / 0.05)^2) = ceil(12.529^2) = ceil(156.98) = 157.
    # MRR: differences 19 x 0 and -2/3: the same sd/mean ratio, so 157 again, for diff -2/3/20 = -0.033.
    old_ranks = {q: 1 for q in QIDS}
    questions = {"q07": "Which page explains the vega of a call?"}
    old = write_json(tmp_path / "old.json", fake_report(old_ranks, questions))
    new = write_json(tmp_path / "new.json", fake_report({**old_ranks, "q07": 3}, questions))
    code, out, _ = run(capsys, "--compare", old, new)
    assert code == 0
    assert metric_line(out, "Hit@1").startswith("  Hit@1       1.000  0.950  -0.050  [-")
    assert metric_line(out, "Hit@1").endswith(
        f", +0.000]    1.000   1.000  {NO_DIFFERENCE} (about 157 questions would detect -0.050)")
    # Hit@5 did not change at all (rank 3 is within 5): no estimate of the questions needed.
    assert metric_line(out, "Hit@5") == (f"  Hit@5       1.000  1.000  +0.000  [+0.000, +0.000]    1.000   1.000  "
                                         f"{NO_DIFFERENCE}")
    assert metric_line(out, "MRR").endswith(f"    1.000   1.000  {NO_DIFFERENCE} (about 157 questions would detect "
                                            f"-0.033)")
    # The fake reports have no stage ranks (as reports written before them): the stage is unknown, never an error.
    assert out.splitlines()[-4:] == ["  Better (0): none", "  Worse (1):",
                                     "       1 -> 3    Which page explains the vega of a call?",
                                     "                 lost at: stage unknown (older report)"]


def test_a_difference_under_half_a_thousandth_is_written_with_its_digits(tmp_path, capsys):
    # q07 falls from rank 10 to 11: MRR diff (1/11 - 1/10) / 20 = -0.000455, which 3 decimals would show as
    # "-0.000"; the single non-zero difference gives 157 questions as above.
    old_ranks = {q: 1 for q in QIDS}
    old = write_json(tmp_path / "old.json", fake_report({**old_ranks, "q07": 10}))
    new = write_json(tmp_path / "new.json", fake_report({**old_ranks, "q07": 11}))
    code, out, _ = run(capsys, "--compare", old, new)
    assert code == 0
    assert metric_line(out, "MRR").endswith(f"    1.000   1.000  {NO_DIFFERENCE} (about 157 questions would detect "
                                            f"-0.00045)")
    assert metric_line(out, "Hit@5") == (f"  Hit@5       0.950  0.950  +0.000  [+0.000, +0.000]    1.000   1.000  "
                                         f"{NO_DIFFERENCE}")


def test_signed_differences():
    from localrag.evaluation.report import signed

    assert [signed(v) for v in (0.0, 0.0125, -0.05, 0.0004999, -0.00045454, 0.0005)] == [
        "+0.000", "+0.013", "-0.050", "+0.0005", "-0.00045", "+0.001"]


def test_different_questions_need_intersect(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    old = write_json(tmp_path / "old.json", fake_report({q: 2 for q in QIDS}))
    new = write_json(tmp_path / "new.json", fake_report({q: 1 for q in QIDS[:19]}))
    code, out, err = run(capsys, "--compare", old, new)
    assert (code, out) == (2, "")
    assert err == ("error: the two runs cover different questions (20 and 19, 19 in common); pass --intersect "
                   "to compare the common questions only\n")
    code, out, err = run(capsys, "--compare", old, new, "--intersect")
    assert (code, err) == (0, "")
    assert out.splitlines()[1] == ("Compared to old.json (19 common questions; questions differ: 20 old, 19 new; "
                                   "only the common ones are compared)")
    assert metric_line(out, "Hit@1").startswith("  Hit@1       0.000  1.000  +1.000")  # q20 left out of both
    assert out.splitlines().count("  Better (19):") == 1


def test_runs_without_a_common_question_do_not_suggest_intersect(tmp_path, capsys):
    old = write_json(tmp_path / "old.json", fake_report({q: 2 for q in QIDS[:10]}))
    new = write_json(tmp_path / "new.json", fake_report({q: 1 for q in QIDS[10:]}))
    for flags in ((), ("--intersect",)):
        code, out, err = run(capsys, "--compare", old, new, *flags)
        assert (code, out) == (2, "")
        assert err == ("error: the two runs have no question in common (10 and 10 questions); nothing to compare: "
                       "are they runs of the same goldset or dataset?\n")


def test_compare_input_errors(tmp_path, capsys):
    good = write_json(tmp_path / "good.json", fake_report({"q1": 1}))
    code, _, err = run(capsys, "--compare", tmp_path / "missing.json", good)
    assert (code, err) == (2, f"error: {tmp_path / 'missing.json'} does not exist; write one with --json FILE\n")
    (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
    code, _, err = run(capsys, "--compare", good, tmp_path / "list.json")
    assert (code, err) == (2, f"error: {tmp_path / 'list.json'} is not a JSON report of this tool (no "
                              f"'metrics'/'per_query'); write one with --json FILE\n")
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    code, _, err = run(capsys, "--compare", good, tmp_path / "broken.json")
    assert code == 2 and err.startswith(f"error: {tmp_path / 'broken.json'} is not a JSON report of this tool (")
    rankless = fake_report({"q1": 1})
    del rankless["per_query"][0]["rank"]
    code, _, err = run(capsys, "--compare", good, write_json(tmp_path / "rankless.json", rankless))
    assert (code, err) == (2, f"error: {tmp_path / 'rankless.json'} is not a JSON report of this tool (the field "
                              f"'rank' is missing); write one with --json FILE\n")
    # A report whose ranks or metrics were edited to text: the same message, never a traceback.
    for name, edit, what in (("text-rank", ("rank", "three"), "question 'q1' has the rank 'three', not a whole "
                                                               "number >= 1 or null"),
                             ("zero-rank", ("rank", 0), "question 'q1' has the rank 0, not a whole number >= 1 or "
                                                        "null"),
                             ("text-metric", ("metrics", {"hit@1": "1.0", "hit@5": 1.0, "mrr": 1.0}),
                              "question 'q1' has the hit@1 '1.0', not a number")):
        edited = fake_report({"q1": 1})
        edited["per_query"][0][edit[0]] = edit[1]
        path = write_json(tmp_path / f"{name}.json", edited)
        code, out, err = run(capsys, "--compare", good, path)
        assert (code, out, err) == (2, "", f"error: {path} is not a JSON report of this tool (a field is malformed: "
                                           f"{what}); write one with --json FILE\n")
    edited = fake_report({"q1": 1})
    edited["metrics"]["mrr"] = "high"
    code, _, err = run(capsys, "--compare", good, write_json(tmp_path / "mean.json", edited))
    assert (code, err) == (2, f"error: {tmp_path / 'mean.json'} is not a JSON report of this tool (a field is "
                              f"malformed: the metric mrr is 'high', not a number); write one with --json FILE\n")
    code, _, err = run(capsys, "--compare", good, good, "--resamples", "0")
    assert (code, err) == (2, "error: --resamples must be 1 or more, got 0\n")


# ----------------------------------------------------------------------------- real runs


@pytest.fixture
def gold(tmp_path) -> Path:
    path = tmp_path / "gold.csv"
    path.write_text(GOLD, encoding="utf-8")
    return path


def test_compare_two_real_runs(tiny_index, gold, tmp_path, capsys):
    docs, index = tiny_index
    common = ["--goldset", gold, "--docs", docs, "--index", index, "--page-tolerance", "0", "--no-compare",
              "--quiet"]
    # Exit 1: scans.pdf is not in the index (degraded), but both reports are written.
    assert run(capsys, *common, "--mode", "bm25", "--report", tmp_path / "bm25.txt")[0] == 1
    assert run(capsys, *common, "--mode", "hybrid", "--report", tmp_path / "hybrid.txt")[0] == 1
    code, out, _ = run(capsys, "--compare", tmp_path / "bm25.json", tmp_path / "hybrid.json")
    assert code == 0
    # bm25 -> hybrid: vega – -> 3 (found vs not found comes first), volatility 3 -> 2; nothing got worse.
    # MRR: bm25 (1/3 + 1 + 1 + 1) / 6 = 0.556, hybrid (1/2 + 1 + 1 + 1 + 1/3) / 6 = 0.639.
    assert metric_line(out, "MRR").startswith("  MRR         0.556  0.639  +0.083  [")
    assert out.splitlines()[-4:] == [
        "  Better (2):",
        "       – -> 3    What is vega?",
        "       3 -> 2    How sensitive is the option value to volatility?",
        "  Worse (0): none",
    ]


# ----------------------------------------------------------------------------- ablation


def table_rows(text: str) -> dict[str, list[str]]:
    """Configuration name -> cells of the ablation table (without the seconds column)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  configuration"))
    rows = {}
    for line in lines[start + 1:]:
        if not line.strip():
            break
        if line.startswith("  total wall time"):  # a summary line under the table, not a row
            continue
        cells = line.split("  ")
        cells = [c.strip() for c in cells if c.strip()]
        rows[cells[0]] = cells[1:-1]
    return rows


def test_ablation_without_reranker(tiny_index, gold, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    docs, index = tiny_index
    report = tmp_path / "abl.txt"
    code, out, err = run(capsys, "--goldset", gold, "--docs", docs, "--index", index, "--page-tolerance", "0",
                         "--k", "1,3,5", "--ablation", "--quiet", "--report", report, "--markdown",
                         tmp_path / "abl.md")
    assert code == 1  # scans.pdf is not in the index: degraded
    text = report.read_text(encoding="utf-8")
    # The table as written, then every file written: the table, the Markdown table, each row's three files.
    assert out == text + "Wrote abl.txt, abl.md, " + ", ".join(
        f"abl-{name}{ext}" for name in ("dense", "bm25", "hybrid", "union")
        for ext in (".txt", ".json", ".details.md")) + "\n"
    lines = text.splitlines()
    assert lines[1] == "Status: exit 1, evaluated but the run is degraded"
    assert lines[1] in err
    # The header says why the reranked rows are missing (no download allowed: the default reranker is off).
    rows_line = next(line for line in lines if line.startswith("Rows: "))
    assert rows_line == ("Rows: 4 configurations; every '+ rerank' row is missing (no reranker: "
                         "cross-encoder/ms-marco-MiniLM-L-6-v2 is not downloaded: not in the local Hugging Face "
                         "cache; --allow-downloads fetches it once)")
    assert "  configuration   Hit@1   Hit@3   Hit@5  NDCG@5     MRR  seconds" in text
    # From the rank table above (6 questions): Hit@1 = 3/6 for every mode (a four-way tie: all marked);
    # Hit@3 = Hit@5 = 5/6 for dense/hybrid/union, 4/6 for bm25 (volatility at 3 counts, vega is lost);
    # MRR = (1/2 + 1 + 1 + 1 + 1/3) / 6 = 0.639 for dense/hybrid/union, (1/3 + 3) / 6 = 0.556 for bm25.
    # NDCG@5 = (1/log2(3) + 3 + 1/log2(4)) / 6 = 0.688, for bm25 (3 + 1/log2(4)) / 6 = 0.583.
    best = ["0.500*", "0.833*", "0.833*", "0.688*", "0.639*"]
    assert table_rows(text) == {"dense": best, "bm25": ["0.500*", "0.667", "0.667", "0.583", "0.556"],
                                "hybrid": best, "union": best}
    for name in ("dense", "bm25", "hybrid", "union"):
        assert (tmp_path / f"abl-{name}.txt").exists()
        assert (tmp_path / f"abl-{name}.json").exists()
    assert not (tmp_path / "abl-dense-rerank.txt").exists()  # no reranker offline: no rerank rows
    bm25 = json.loads((tmp_path / "abl-bm25.json").read_text(encoding="utf-8"))
    assert bm25["metrics"]["mrr"] == pytest.approx((1 / 3 + 3) / 6)
    assert bm25["config"]["Retrieval mode"] == "bm25 (30 candidates per retriever)"
    assert "  Retrieval mode:     bm25 (30 candidates per retriever)" in \
        (tmp_path / "abl-bm25.txt").read_text(encoding="utf-8")
    assert "Per-configuration reports: abl-<configuration>.txt" in text
    # The tiny index's 5 chunks are all among dense's 30 candidates, so union (BM25's new hits after them) is dense.
    assert lines[lines.index(next(line for line in lines if line.startswith("  total wall time"))) + 1:][:2] == [
        "", "union = dense here, on every metric of each of the 6 questions: without a reranker union is dense's "
            "candidates followed by BM25's new hits, which only count where dense's candidates do not fill the list; "
            "union is the candidate pool a reranker reorders (docs/settings-and-sweeps.md, \"Retrieval modes\")"]
    union = json.loads((tmp_path / "abl-union.json").read_text(encoding="utf-8"))
    assert union["config"]["Retrieval mode"] == (
        "union (30 candidates per retriever); ranks as dense here: without a reranker each question's first 5 pages "
        "were dense's, as union appends BM25's new hits after dense's 30 candidates (union is the candidate pool a "
        "reranker reorders)")
    assert bm25["config"]["Retrieval mode"] == "bm25 (30 candidates per retriever)"  # said of union only
    markdown = (tmp_path / "abl.md").read_text(encoding="utf-8").splitlines()
    assert markdown[0] == "| configuration | Hit@1 | Hit@3 | Hit@5 | NDCG@5 | MRR | seconds |"
    assert markdown[3].startswith("| bm25 | 0.500 **best** | 0.667 | 0.667 | 0.583 | 0.556 | ")
    assert len(markdown) == 6


def test_ablation_with_reranker_shares_embeddings_and_scores(tiny_index, tiny_cross_encoder, gold, tmp_path,
                                                             capsys, monkeypatch):
    from langchain_huggingface import HuggingFaceEmbeddings
    from sentence_transformers import CrossEncoder

    docs, index = tiny_index
    embedded: list[list[str]] = []
    queried: list[str] = []
    scored: list[int] = []
    embed_documents, embed_query, predict = (HuggingFaceEmbeddings.embed_documents,
                                             HuggingFaceEmbeddings.embed_query, CrossEncoder.predict)

    def count_documents(self, texts):
        embedded.append(list(texts))
        return embed_documents(self, texts)

    def count_query(self, text):
        queried.append(text)
        return embed_query(self, text)

    def count_pairs(self, pairs, *args, **kwargs):
        scored.append(len(pairs))
        return predict(self, pairs, *args, **kwargs)

    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", count_documents)
    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_query", count_query)
    monkeypatch.setattr(CrossEncoder, "predict", count_pairs)
    code, out, _ = run(capsys, "--goldset", gold, "--docs", docs, "--index", index, "--ablation", "--quiet",
                       "--rerank-model", tiny_cross_encoder, "--report", tmp_path / "abl.txt")
    assert code == 1  # scans.pdf is not in the index: degraded
    assert [line for line in out.splitlines() if line.startswith("Rows: ")] == ["Rows: 8 configurations"]
    assert list(table_rows(out)) == ["dense", "dense + rerank", "bm25", "bm25 + rerank", "hybrid",
                                     "hybrid + rerank", "union", "union + rerank"]
    for name in ("dense-rerank", "bm25-rerank", "hybrid-rerank", "union-rerank"):
        assert (tmp_path / f"abl-{name}.txt").exists()
    # The index is unchanged, so the only embedding call is the one batch of the 6 questions, shared by all
    # eight rows; no question is embedded one by one.
    assert embedded == [[line.split(",")[0] for line in GOLD.splitlines()[1:]]]
    assert queried == []
    # Dense candidates (30 deep) hold all 5 chunks, and the other modes' candidates are subsets, so the four
    # rerank rows need exactly 6 questions x 5 chunks = 30 distinct pairs; without the score cache they would
    # need about four times as many.
    assert sum(scored) == 30


def test_ablation_with_no_rerank_says_so_in_its_header(tiny_index, tmp_path, capsys):
    docs, index = tiny_index
    clean = tmp_path / "clean.csv"
    clean.write_text("question,expected_source,expected_page\nWhat is vega?,options.pdf,1\n", encoding="utf-8")
    code, out, _ = run(capsys, "--goldset", clean, "--docs", docs, "--index", index, "--ablation", "--quiet",
                       "--no-rerank", "--report", tmp_path / "abl.txt")
    assert code == 0
    assert out.splitlines()[1] == "Status: exit 0, evaluated; no gate set"
    assert out.splitlines()[3] == "Rows: 4 configurations; every '+ rerank' row is missing (--no-rerank was given)"


def test_union_is_said_to_equal_dense_only_when_every_question_scores_alike():
    from localrag.evaluation.report import union_notes
    from localrag.evaluation.result import EvalResult, QuestionResult

    def row(name: str, mrr: dict[str, float]) -> EvalResult:
        return EvalResult("goldset", "g", {}, len(mrr), tuple(QuestionResult(q, q, None, {"mrr": v})
                                                              for q, v in mrr.items()), name=name)

    dense = row("dense", {"q1": 1.0, "q2": 0.5})
    assert union_notes([dense, row("union", {"q1": 1.0, "q2": 0.5})])[0].startswith(
        "union = dense here, on every metric of each of the 2 questions:")
    # One question apart (a BM25 hit came within the list where dense's candidates did not fill it): no line,
    # though the means are equal.
    assert union_notes([dense, row("union", {"q1": 0.5, "q2": 1.0})]) == []
    assert union_notes([dense, row("union + rerank", {"q1": 1.0, "q2": 0.5})]) == []  # a reranked union is other
