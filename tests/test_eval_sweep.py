"""Index settings from the evaluation (indexes of other settings built into a cache, the evaluated index only
read), whole-page chunks, --sweep grids, and the settings block of the JSON report.

The tiny corpus (conftest.TINY_CORPUS) has pages far shorter than 2,000 characters, so whole-page chunks hold
the same text as the default 2,000-character chunks: a sweep over chunk_size=2000,page must give equal ranks in
both rows (the trap: any difference would come from the sweep, not the chunking). Ranks at --page-tolerance 0
(see test_eval_compare.py): dense 2, 1, 1, 1, 3, –; bm25 3, 1, 1, 1, –, –, so dense Hit@1 = 3/6 = 0.500, Hit@3 =
5/6 = 0.833, MRR = (1/2 + 1 + 1 + 1 + 1/3) / 6 = 0.639; bm25 Hit@1 = 0.500, Hit@3 = 4/6 = 0.667, MRR =
(1/3 + 3) / 6 = 0.556.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

import eval_retrieval as er
from localrag.runs import indexes, plan
from localrag.runs.defaults import EvalOptions
from localrag.runs.options import resolve
import local_rag
from local_rag import LocalRAG, RAGError
from conftest import TINY_GOLD
from localrag.settings import parse_chunk_size, resolve_settings, text_splitter

GOLD = TINY_GOLD
AXES = ("chunk_size, chunk_overlap, page_chunk_limit, loader, chunk_headers, chunk_context, embedding_model, "
        "embedding_backend, bm25_stemmer, mode, rerank")


def run(capsys, *argv) -> tuple[int, str, str]:
    code = er.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def workdir(tmp_path, monkeypatch, tiny_docs) -> Path:
    """tmp_path as the working folder, with docs/ (the tiny corpus) and gold.csv. Index folders are given as
    absolute paths: Chroma keeps one client per path string in a process, so "base" in two tests would be one."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gold.csv").write_text(GOLD, encoding="utf-8")
    return tmp_path


# ----------------------------------------------------------------------------- whole-page chunks


def test_page_splitter_keeps_a_page_whole_and_splits_only_above_the_limit():
    words = "one two three four five six seven eight nine ten"
    assert text_splitter({"chunk_size": "page", "page_chunk_limit": 8000}).split_text(words) == [words]
    assert text_splitter({"chunk_size": "page", "page_chunk_limit": 20}).split_text(words) == [
        "one two three four", "five six seven", "eight nine ten"]  # no overlap: no word twice
    # Character chunks of the same size overlap (the difference page chunks make).
    assert text_splitter({"chunk_size": 20, "chunk_overlap": 9}).split_text(words) == [
        "one two three four", "four five six seven", "seven eight nine", "nine ten"]


def test_page_settings_force_no_overlap_and_record_the_limit():
    defaults = {"embedding_model": "m", "embedding_backend": "torch", "chunk_size": 2000, "chunk_overlap": 200,
                "pdf_loader": "pypdfium2", "chunk_headers": True, "page_chunk_limit": 8000,
                "bm25_stemmer": "none"}
    settings = resolve_settings({"chunk_size": "page"}, {}, defaults)
    assert (settings["chunk_size"], settings["chunk_overlap"], settings["page_chunk_limit"]) == ("page", 0, 8000)
    assert "page_chunk_limit" not in resolve_settings({}, {}, defaults)  # only whole-page chunks have a limit
    with pytest.raises(RAGError) as error:
        resolve_settings({"chunk_size": "page", "chunk_overlap": 50}, {}, defaults)
    assert str(error.value) == ("whole-page chunks (chunk size 'page') have no overlap, got chunk overlap 50; leave "
                                "the overlap out or give 0")
    assert parse_chunk_size(" page ") == "page" and parse_chunk_size("800") == 800
    with pytest.raises(ValueError) as bad:
        parse_chunk_size("pages")
    assert str(bad.value) == "must be a positive number of characters or 'page' (one chunk per page), got 'pages'"


def test_page_index_has_one_chunk_per_page_and_a_new_limit_rebuilds(tiny_docs, tmp_path):
    rag = LocalRAG(tmp_path / "idx", reranker_model=None, chunk_size="page", quiet=True)
    rag.sync([tiny_docs], progress=False)
    chunks = rag.indexed_chunks()
    assert sorted((m["source"], m["page"], m["chunk"]) for _, _, m in chunks) == [
        ("Literatur_Übersicht.pdf", 0, 0), ("options.pdf", 0, 0), ("options.pdf", 1, 0), ("scan.pdf", 0, 0),
        ("weather.pdf", 0, 0)]  # the image-only page of scan.pdf has no chunk
    info = json.loads((tmp_path / "idx" / "index_info.json").read_text(encoding="utf-8"))
    assert (info["settings"]["chunk_size"], info["settings"]["chunk_overlap"],
            info["settings"]["page_chunk_limit"]) == ("page", 0, local_rag.PAGE_CHUNK_LIMIT)
    # A limit of 100 characters splits the two longer pages of options.pdf (each ~125 characters) in two.
    smaller = LocalRAG(tmp_path / "idx", reranker_model=None, page_chunk_limit=100, quiet=True)
    assert smaller.stale_reasons() == [f"page_chunk_limit: index has {local_rag.PAGE_CHUNK_LIMIT}, requested 100"]
    report = smaller.sync([tiny_docs], progress=False)
    assert report.rebuilt_because == f"settings changed: page_chunk_limit: index has {local_rag.PAGE_CHUNK_LIMIT}, " \
                                     f"requested 100"
    pieces = [(m["source"], m["page"], t) for _, t, m in smaller.indexed_chunks() if m["source"] == "options.pdf"]
    assert [(source, page) for source, page, _ in pieces] == [("options.pdf", 0), ("options.pdf", 0),
                                                              ("options.pdf", 1), ("options.pdf", 1)]
    assert all(len(text.split("]", 1)[1]) <= 100 for _, _, text in pieces)  # header "[file, page N]" excluded


# ----------------------------------------------------------------------------- index settings from the evaluation


def test_other_settings_build_a_cached_index_once_and_never_touch_the_evaluated_one(workdir, capsys):
    code, _, err = run(capsys, "--goldset", "gold.csv", "--index", workdir / "base", "--docs", "docs", "--no-rerank",
                       "--page-tolerance", "0")
    assert code == 1, err  # scans.pdf is not in the corpus: degraded, as in every run below
    manifest = (workdir / "base" / "index_info.json").read_bytes()
    listing = sorted(p.relative_to(workdir / "base") for p in (workdir / "base").rglob("*"))

    code, _, err = run(capsys, "--goldset", "gold.csv", "--index", workdir / "base", "--chunk-size", "page", "--no-rerank",
                       "--page-tolerance", "0", "--index-cache", workdir / "cache")
    assert code == 1
    derived = plan.derived_index_path(workdir / "docs", {
        "embedding_model": local_rag.EMBEDDING_MODEL, "embedding_backend": local_rag.EMBEDDING_BACKEND,
        "chunk_size": "page", "chunk_overlap": 0, "pdf_loader": local_rag.PDF_LOADER, "chunk_headers": True,
        "page_chunk_limit": local_rag.PAGE_CHUNK_LIMIT, "bm25_stemmer": local_rag.BM25_STEMMER}, "cache")
    digest = hashlib.sha256(str((workdir / "docs").resolve()).encode()).hexdigest()[:8]
    assert derived.parent == Path("cache") and derived.name.startswith(f"docs-{digest}-")
    lines = err.splitlines()
    assert (f"Index settings chunk_size page, chunk_overlap 0, page_chunk_limit {local_rag.PAGE_CHUNK_LIMIT} differ "
            f"from base's: evaluating {derived.as_posix()} (built on first use, synced after)") in lines
    built = next(line for line in lines if line.startswith(f"Index {derived.as_posix()} ("))
    assert "files added 4 / updated 0 / removed 0 / unchanged 0 / failed 0" in built
    # The report is named after the settings given, and compared with the report of the evaluated index.
    text = (workdir / "gold.report.chunk_size-page.rerank-off.page_tolerance-0.txt").read_text(encoding="utf-8")
    assert ("  Settings that differ: index base → " + derived.as_posix() + "; chunk_size 2000 → page; chunk_overlap "
            f"200 → 0; page_chunk_limit unset → {local_rag.PAGE_CHUNK_LIMIT}") in text.splitlines()
    assert "Compared to report gold.report.rerank-off.page_tolerance-0.json (6 common questions)" in text
    settings = json.loads((workdir / "gold.report.chunk_size-page.rerank-off.page_tolerance-0.json").read_text(encoding="utf-8"))["settings"]
    assert settings == {"index": derived.as_posix(), "embedding_model": local_rag.EMBEDDING_MODEL,
                        "embedding_backend": local_rag.EMBEDDING_BACKEND, "chunk_size": "page", "chunk_overlap": 0,
                        "page_chunk_limit": local_rag.PAGE_CHUNK_LIMIT, "chunk_headers": True,
                        "pdf_loader": local_rag.PDF_LOADER, "bm25_stemmer": local_rag.BM25_STEMMER,
                        "query_instructions": "", "retrieval_mode": "hybrid",
                        "candidate_k": local_rag.CANDIDATE_K, "rrf_k": local_rag.RRF_K, "rank_by": local_rag.RANK_BY,
                        "reranker": None, "reranker_asked": None,
                        "page_tolerance": 0}

    code, _, err = run(capsys, "--goldset", "gold.csv", "--index", workdir / "base", "--chunk-size", "page", "--no-rerank",
                       "--page-tolerance", "0", "--index-cache", workdir / "cache", "--no-sync")
    assert code == 1
    # Second run: the cache is synced (even with --no-sync, which concerns the evaluated index) and embeds nothing.
    assert (f"Index {derived.as_posix()} (embedding_model {local_rag.EMBEDDING_MODEL}, embedding_backend "
            f"{local_rag.EMBEDDING_BACKEND}, chunk_size page, chunk_overlap 0, pdf_loader {local_rag.PDF_LOADER}, "
            f"chunk_headers on, bm25_stemmer {local_rag.BM25_STEMMER}, page_chunk_limit {local_rag.PAGE_CHUNK_LIMIT}): "
            "up to date, nothing embedded"
            ) in err.splitlines()
    text = (workdir / "gold.report.chunk_size-page.rerank-off.page_tolerance-0.txt").read_text(encoding="utf-8")
    # Again compared with the run it differs from (not with its own previous report): the verdict says whether the
    # setting helped.
    assert "Compared to report gold.report.rerank-off.page_tolerance-0.json (6 common questions)" in text
    assert ("  Settings that differ: index base → " + derived.as_posix() + "; chunk_size 2000 → page; chunk_overlap "
            f"200 → 0; page_chunk_limit unset → {local_rag.PAGE_CHUNK_LIMIT}") in text.splitlines()
    assert (workdir / "base" / "index_info.json").read_bytes() == manifest
    assert sorted(p.relative_to(workdir / "base") for p in (workdir / "base").rglob("*")) == listing


def test_settings_equal_to_the_evaluated_index_use_it(workdir, capsys):
    assert run(capsys, "--goldset", "gold.csv", "--index", workdir / "base", "--docs", "docs", "--no-rerank")[0] == 1
    code, _, err = run(capsys, "--goldset", "gold.csv", "--index", workdir / "base", "--chunk-size", "2000", "--no-rerank",
                       "--index-cache", workdir / "cache")
    assert code == 1 and "differ from" not in err and not Path("cache").exists()
    report = json.loads((workdir / "gold.report.chunk_size-2000.rerank-off.json").read_text(encoding="utf-8"))
    assert report["settings"]["index"] == "base"


def test_report_names_say_which_settings_were_given(monkeypatch):
    def path_of(*argv):
        return resolve(er.parse(list(argv)), er.eval_defaults()).report

    assert path_of() == er.REPORT_PATH
    assert path_of("--chunk-size", "800") == "eval/runs/baseline.chunk_size-800.txt"
    assert path_of("--no-chunk-headers", "--loader", "pypdf") == \
        "eval/runs/baseline.loader-pypdf.chunk_headers-off.txt"
    assert path_of("--embedding-model", "BAAI/bge-small-en-v1.5", "--sweep", "mode=dense,hybrid") == \
        "eval/runs/sweep.embedding_model-BAAI_bge-small-en-v1.5.txt"
    # Retrieval and scoring settings name the report too: an everyday ablation never replaces the baseline.
    assert path_of("--mode", "dense") == "eval/runs/baseline.mode-dense.txt"
    assert path_of("--mode", local_rag.RETRIEVAL_MODE) == er.REPORT_PATH  # the default, given: still the baseline
    assert path_of("--no-rerank", "--rrf-k", "60", "--k", "5,10") == "eval/runs/baseline.rerank-off.rrf_k-60.k-5_10.txt"
    assert path_of("--chunk-size", "800", "--mode", "bm25", "--page-tolerance", "0") == \
        "eval/runs/baseline.chunk_size-800.mode-bm25.page_tolerance-0.txt"
    assert path_of("--goldset", "my/gold.csv", "--sweep", "chunk_size=500,page") == "my/gold.sweep.txt"
    assert path_of("--dataset", "data/scifact", "--chunk-size", "page") == \
        f"{er.DATASET_REPORT_DIR}/scifact-test.chunk_size-page.txt"
    assert path_of("--chunk-size", "800", "--report", "r.txt") == "r.txt"


def test_dataset_cache_names_are_unchanged_for_the_default_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "scifact" / "qrels").mkdir(parents=True)
    (tmp_path / "data" / "scifact" / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "x"}\n')
    (tmp_path / "data" / "scifact" / "queries.jsonl").write_text('{"_id": "q1", "text": "y"}\n')
    (tmp_path / "data" / "scifact" / "qrels" / "test.tsv").write_text("q1\td1\t1\n")
    args = EvalOptions(**er.parse(["--dataset", "data/scifact"]).flags(), defaults=er.eval_defaults())
    digest = hashlib.sha256(json.dumps({
        "embedding_model": local_rag.EMBEDDING_MODEL, "embedding_backend": local_rag.EMBEDDING_BACKEND,
        "chunk_size": local_rag.CHUNK_SIZE, "chunk_overlap": local_rag.CHUNK_OVERLAP,
        "chunk_headers": local_rag.CHUNK_HEADERS}, sort_keys=True).encode()).hexdigest()[:10]
    from localrag.datasets import beir as beir_data

    fingerprint = beir_data.dataset_fingerprint("data/scifact", "test", None, None, 0)
    assert plan.dataset_index_path(args) == Path(er.DATASET_CACHE) / f"scifact-{fingerprint}-{digest}"
    assert plan.dataset_index_path(args, {"chunk_size": "page"}) != plan.dataset_index_path(args)


# ----------------------------------------------------------------------------- sweeps


def test_sweep_table_rows_share_indexes_and_query_vectors(workdir, capsys, monkeypatch):
    assert run(capsys, "--goldset", "gold.csv", "--index", workdir / "base", "--docs", "docs", "--no-rerank")[0] == 1
    opened = []
    real_open = indexes.open_rag
    monkeypatch.setattr(indexes, "open_rag", lambda *a, **k: opened.append(real_open(*a, **k)) or opened[-1])
    # Without the query vector cache (which the first run filled): the sharing between indexes shows in the counts.
    code, out, err = run(capsys, "--goldset", "gold.csv", "--index", workdir / "base", "--no-rerank", "--page-tolerance", "0",
                         "--index-cache", workdir / "cache", "--sweep", "chunk_size=2000,page", "--sweep", "mode=dense,bm25",
                         "--no-query-cache")
    assert code == 1  # degraded (scans.pdf missing), as the status line says
    assert len(opened) == 2  # one index per chunk size, shared by both modes
    assert [rag.stats["query_embeddings"] for rag in opened] == [6, 0]  # the page index reused the vectors
    table = (workdir / "gold.sweep.rerank-off.page_tolerance-0.txt").read_text(encoding="utf-8")
    # The table, then the last line: every file written, the table first, then each row's report, JSON, details.
    base = "gold.sweep.rerank-off.page_tolerance-0"
    rows = [f"{base}-chunk_size-{size}.mode-{mode}" for size in ("2000", "page") for mode in ("dense", "bm25")]
    assert out == table + "Wrote " + ", ".join([f"{base}.txt"] + [row + ext for row in rows for ext in (
        ".txt", ".json", ".details.md")]) + "\n"
    lines = [re.sub(r"\s+[\d.]+$", "", line) for line in table.splitlines()]  # seconds vary between runs
    start = lines.index("Results (* = best in column; seconds = wall time of the row, including opening and "
                        "syncing its index on the first row that uses it)")
    assert lines[start + 1:start + 6] == [
        "  configuration                Hit@1   Hit@3   Hit@5  Hit@10  Hit@20  NDCG@5  NDCG@10     MRR  seconds",
        "  chunk_size=2000 mode=dense  0.500*  0.833*  0.833*  0.833*  0.833*  0.688*   0.688*  0.639*",
        "  chunk_size=2000 mode=bm25   0.500*  0.667   0.667   0.667   0.667   0.583    0.583   0.556",
        "  chunk_size=page mode=dense  0.500*  0.833*  0.833*  0.833*  0.833*  0.688*   0.688*  0.639*",
        "  chunk_size=page mode=bm25   0.500*  0.667   0.667   0.667   0.667   0.583    0.583   0.556",
    ]
    assert lines[1] == "Status: exit 1, evaluated but the run is degraded"
    assert "Axes: chunk_size = 2000, page; mode = dense, bm25" in lines
    # bm25 against dense: MRR differences -1/6 (volatility, rank 2 -> 3) and -1/3 (vega, 3 -> –), the rest 0:
    # diff -0.5/6 = -0.083; the exact randomization test over the 2 non-zero differences finds 2 of 4 sign
    # patterns as extreme (|sum| >= 0.5): p = 0.500. NDCG@10 the same way: volatility 1/log2(3) -> 1/log2(4), vega
    # 1/log2(4) -> 0, diff (0.131 + 0.5) / 6 = -0.105, p = 0.500. The 3 rows x 3 metrics are one family: Holm
    # multiplies the smallest p by 9 (capped at 1), none is rejected, and the intervals invert the test at 0.05 / 9.
    # With 6 questions no shift reaches that level (the smallest p of 6 non-zero differences is 2/2^6 = 0.031), so
    # every row that differs from the first gets the whole range of possible differences.
    compared = lines.index("Compared with the first row (chunk_size=2000 mode=dense), 6 common questions; family: 3 "
                           "rows x 3 metrics = 9 tests")
    none = "no detectable difference at this goldset size"
    assert lines[compared + 1:compared + 14] == [
        "  configuration               metric    first    row    diff  99.44% CI of diff       p  p Holm  verdict",
        f"  chunk_size=2000 mode=bm25   Hit@5     0.833  0.667  -0.167  [-1.000, +1.000]    1.000   1.000  {none}",
        f"  chunk_size=2000 mode=bm25   NDCG@10   0.688  0.583  -0.105  [-1.000, +1.000]    0.500   1.000  {none}",
        f"  chunk_size=2000 mode=bm25   MRR       0.639  0.556  -0.083  [-1.000, +1.000]    0.500   1.000  {none}",
        f"  chunk_size=page mode=dense  Hit@5     0.833  0.833  +0.000  [+0.000, +0.000]    1.000   1.000  {none}",
        f"  chunk_size=page mode=dense  NDCG@10   0.688  0.688  +0.000  [+0.000, +0.000]    1.000   1.000  {none}",
        f"  chunk_size=page mode=dense  MRR       0.639  0.639  +0.000  [+0.000, +0.000]    1.000   1.000  {none}",
        f"  chunk_size=page mode=bm25   Hit@5     0.833  0.667  -0.167  [-1.000, +1.000]    1.000   1.000  {none}",
        f"  chunk_size=page mode=bm25   NDCG@10   0.688  0.583  -0.105  [-1.000, +1.000]    0.500   1.000  {none}",
        f"  chunk_size=page mode=bm25   MRR       0.639  0.556  -0.083  [-1.000, +1.000]    0.500   1.000  {none}",
        "  (two-sided paired randomization test: every sign pattern where at most 16 questions differ, else 10,000 "
        "drawn with",
        "   seed 0; Holm's adjustment over 3 rows x 3 metrics = 9 tests: a verdict needs an adjusted p < 0.05; each "
        "interval",
        "   inverts the test at Holm's last level, 0.005556, so it excludes 0 exactly when the verdict says better "
        "or worse)",
    ]
    # One report per row beside the table, each compared with the first row and naming what differs.
    row = (workdir / "gold.sweep.rerank-off.page_tolerance-0-chunk_size-page.mode-bm25.txt").read_text(encoding="utf-8").splitlines()
    assert "Compared to first row (chunk_size=2000 mode=dense) (6 common questions)" in row
    derived = er.display_path(opened[1].path)
    assert (f"  Settings that differ: index base → {derived}; chunk_size 2000 → page; chunk_overlap 200 → 0; "
            f"page_chunk_limit unset → {local_rag.PAGE_CHUNK_LIMIT}; retrieval_mode dense → bm25") in row


@pytest.mark.parametrize("argv, message", [
    (["--sweep", "chunk=1"], f"--sweep chunk=1: unknown axis 'chunk'; valid axes: {AXES}"),
    (["--sweep", "chunk_size"], f"--sweep needs AXIS=VALUE,VALUE like chunk_size=500,1000, got 'chunk_size'; axes: "
                                f"{AXES}"),
    (["--sweep", "chunk_size=500,0"], "--sweep chunk_size=500,0: chunk_size must be a positive number of characters "
                                      "or 'page' (one chunk per page), got '0'"),
    (["--sweep", "mode=dense,fast"], "--sweep mode=dense,fast: mode must be one of dense, bm25, hybrid, union, got "
                                     "'fast'"),
    (["--sweep", "rerank=on,maybe"], "--sweep rerank=on,maybe: rerank must be on or off, got 'maybe'"),
    (["--sweep", "mode=dense,dense"], "--sweep mode=dense,dense: the value dense appears twice; give each value once"),
    (["--sweep", "mode=dense", "--sweep", "mode=bm25"], "--sweep names the axis mode twice; give all its values in "
                                                        "one --sweep"),
    (["--chunk-size", "800", "--sweep", "chunk_size=500"], "--chunk-size 800 and --sweep chunk_size=... both set "
                                                           "chunk_size; put the value into the sweep or drop the flag"),
    (["--no-rerank", "--sweep", "rerank=on,off"], "--no-rerank and --sweep rerank=... both set reranking; drop "
                                                  "--no-rerank"),
    (["--ablation", "--sweep", "mode=dense"], "--sweep and --ablation cannot be combined; for --ablation's rows "
                                              "sweep mode=dense,bm25,hybrid,union and rerank=off,on"),
    (["--sweep", "mode=dense", "--fail-under", "hit@5=0.5"], "--fail-under gate one evaluation and do not work "
                                                             "with --sweep; run the evaluation to gate on its own"),
    (["--chunk-size", "big"], "--chunk-size must be a positive number of characters or 'page' (one chunk per "
                              "page), got 'big'"),
])
def test_bad_sweeps_exit_2_before_any_work(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no eval/ here: nothing may be read or written
    code, out, err = run(capsys, *argv)
    assert (code, out, err) == (2, "", f"error: {message}\n")
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_says_each_warning_once_and_nothing_of_reused_query_vectors(workdir, capsys):
    assert run(capsys, "--goldset", "gold.csv", "--index", workdir / "base", "--docs", "docs", "--no-rerank",
               "--quiet")[0] == 1
    # Two indexes (chunk sizes), each opened with the default reranker, which is not on this machine.
    code, _, err = run(capsys, "--goldset", "gold.csv", "--index", workdir / "base", "--index-cache",
                       workdir / "cache", "--sweep", "chunk_size=2000,page", "--mode", "dense",
                       "--query-cache", workdir / "qv.sqlite3")
    assert code == 1
    lines = err.splitlines()
    assert [line for line in lines if line.startswith("warning: reranking off")] == [
        "warning: reranking off: cross-encoder/ms-marco-MiniLM-L-6-v2 is not downloaded: not in the local Hugging "
        "Face cache; --allow-downloads fetches it once"]
    # The page index reuses the first index's vectors: only the first says where its vectors came from.
    assert [line for line in lines if line.startswith("Query vectors:")] == [
        "Query vectors: 0 from the cache qv.sqlite3, 6 embedded"]


def test_a_suite_entry_sweeps(workdir, capsys):
    assert run(capsys, "--goldset", "gold.csv", "--index", workdir / "base", "--docs", "docs", "--no-rerank")[0] == 1
    (workdir / "suite.toml").write_text(
        f'[[entry]]\nname = "modes"\ngoldset = "gold.csv"\nindex = "{workdir / "base"}"\nno_rerank = true\n'
        'page_tolerance = 0\n'
        'sweep = ["mode=dense,bm25"]\nreport = "out/modes.txt"\n', encoding="utf-8")
    code, out, _ = run(capsys, "--suite", "suite.toml")
    assert code == 1  # the entry's runs are degraded (scans.pdf missing)
    summary = out.splitlines()
    summary = summary[summary.index("localRAG suite: suite.toml"):]
    assert summary[2:5] == [
        "  entry              Hit@5  Hit@10  NDCG@10     MRR  queries         report",
        "  modes mode=dense  0.833*  0.833*   0.688*  0.639*        6  out/modes.txt",
        "  modes mode=bm25   0.667   0.667    0.583   0.556         6  out/modes.txt",
    ]
    assert (workdir / "out" / "modes.txt").read_text(encoding="utf-8").startswith("localRAG sweep: goldset gold.csv")
    assert (workdir / "out" / "modes-mode-bm25.json").exists()


def test_indexed_chunks_are_read_in_pages(tiny_index, monkeypatch):
    """Chroma fails on one read of ~40,000 chunks ("too many SQL variables"): the store is read in pages."""
    from localrag.index import store as store_module

    rag = LocalRAG(tiny_index[1], reranker_model=None, quiet=True)
    whole = rag.indexed_chunks()
    monkeypatch.setattr(store_module, "STORE_READ_PAGE", 2)  # 5 chunks: pages of 2, 2 and 1
    assert len(whole) == 5 and rag.indexed_chunks() == whole
