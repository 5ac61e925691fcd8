"""Ranking by page (RANK_BY, --rank-by): match with chunks, rank and cite pages, each page once by its best chunk."""
from __future__ import annotations

import json

import pytest
from conftest import write_pdf

import eval_retrieval as er
from localrag.runs import outputs
from localrag.runs.defaults import EvalOptions
from local_rag import LocalRAG, RAGError

# Page 1 of harbour.pdf is long enough for three 120-character chunks about tides; page 2 and lakes.pdf are short.
HARBOUR = ["The harbour tides rise twice a day. " * 3 + "Tides at the harbour follow the moon. " * 3
           + "Harbour tides are measured at the pier. " * 3, "The harbour cafe sells fish soup."]
LAKES = ["Mountain lakes have no tides; their level follows the snow melt."]


@pytest.fixture(scope="module")
def shelf(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages")
    write_pdf(root / "docs" / "harbour.pdf", HARBOUR)
    write_pdf(root / "docs" / "lakes.pdf", LAKES)
    rag = LocalRAG(root / "index", reranker_model=None, quiet=True, chunk_size=120, chunk_overlap=0)
    rag.sync([root / "docs"], progress=False)
    return root


def pages_of(hits) -> list[tuple[str, int]]:
    return [(d.metadata["source"], d.metadata["page"]) for d, _ in hits]


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid", "union"])
def test_a_page_appears_once_at_its_best_chunk(shelf, mode):
    chunks = LocalRAG(shelf / "index", reranker_model=None, quiet=True, rank_by="chunk").retrieve(
        "harbour tides", k=10, mode=mode)
    pages = LocalRAG(shelf / "index", reranker_model=None, quiet=True).retrieve("harbour tides", k=10, mode=mode)
    assert pages_of(chunks).count(("harbour.pdf", 0)) >= 3  # the trap: page 1's chunks crowd the chunk list
    assert pages_of(pages) == list(dict.fromkeys(pages_of(chunks)))  # first appearances, in their order
    best = {key: next(doc.id for doc, _ in chunks if pages_of([(doc, 0)])[0] == key) for key in pages_of(pages)}
    assert [doc.id for doc, _ in pages] == [best[key] for key in pages_of(pages)]  # each page's best chunk
    assert all(a[1] > b[1] for a, b in zip(pages, pages[1:]))  # scores strictly decrease
    assert len(LocalRAG(shelf / "index", reranker_model=None, quiet=True).retrieve("harbour tides", k=2,
                                                                                    mode=mode)) == 2


def test_rank_by_is_checked_before_anything_opens(tmp_path):
    with pytest.raises(RAGError) as caught:
        LocalRAG(tmp_path / "index", reranker_model=None, quiet=True, rank_by="pages")
    assert str(caught.value) == "unknown ranking unit 'pages'; use one of page, chunk"
    assert not (tmp_path / "index").exists()


def test_the_report_names_the_ranking_and_chunk_ranking_is_an_ablation(shelf, tmp_path, capsys):
    gold = tmp_path / "gold.csv"
    gold.write_text("question,expected_source,expected_page\nWhat does the harbour cafe sell?,harbour.pdf,2\n"
                    "When do the harbour tides rise?,harbour.pdf,1\n", encoding="utf-8")
    common = ["--goldset", str(gold), "--index", str(shelf / "index"), "--docs", str(shelf / "docs"), "--no-sync",
              "--no-rerank", "--quiet", "--no-query-cache", "--no-compare", "--mode", "bm25"]
    assert er.main(common + ["--report", str(tmp_path / "page.txt")]) == 0
    assert er.main(common + ["--rank-by", "chunk", "--report", str(tmp_path / "chunk.txt")]) == 0
    page_report = (tmp_path / "page.txt").read_text(encoding="utf-8")
    assert "  Final order by:     BM25 score\n  Ranked by:          pages (each page once, by its best chunk)\n" \
        in page_report
    assert "  Ranked by:          chunks (a page may appear more than once)\n" in \
        (tmp_path / "chunk.txt").read_text(encoding="utf-8")
    page, chunk = (json.loads((tmp_path / f"{n}.json").read_text(encoding="utf-8")) for n in ("page", "chunk"))
    assert (page["settings"]["rank_by"], chunk["settings"]["rank_by"]) == ("page", "chunk")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        er.main(["--rank-by", "pages"] + common)
    assert exited.value.code == 2
    assert "argument --rank-by: invalid choice: 'pages' (choose from 'page', 'chunk')" in capsys.readouterr().err
    args = EvalOptions(**er.parse(["--rank-by", "chunk"]).flags(), defaults=er.eval_defaults())
    assert outputs.retrieval_suffix(args) == ".rank_by-chunk"


def test_a_local_cross_encoder_folder_is_named_relative_to_the_project(shelf, tmp_path, monkeypatch,
                                                                       tiny_cross_encoder):
    """--rerank-model DIR reranks with that folder; the report names it as the user's folder is, not by the
    absolute path of this machine."""
    import shutil

    shutil.copytree(tiny_cross_encoder, tmp_path / "models" / "tiny-cross-encoder")
    monkeypatch.chdir(tmp_path)
    gold = tmp_path / "gold.csv"
    gold.write_text("question,expected_source,expected_page\nWhat does the harbour cafe sell?,harbour.pdf,2\n",
                    encoding="utf-8")
    assert er.main(["--goldset", str(gold), "--index", str(shelf / "index"), "--docs", str(shelf / "docs"),
                    "--no-sync", "--quiet", "--no-query-cache", "--no-compare", "--rerank-model",
                    str(tmp_path / "models" / "tiny-cross-encoder"), "--report", "out.txt"]) == 0
    assert "  Reranker:           on (models/tiny-cross-encoder)\n" in (tmp_path / "out.txt").read_text(encoding="utf-8")
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))["settings"]["reranker"] == \
        "models/tiny-cross-encoder"


def test_stage_ranks_count_pages_at_every_stage_when_ranking_by_page(shelf, tmp_path, capsys):
    """"harbour tides" expects harbour.pdf p. 2 (the cafe page). Page 1's four chunks crowd every chunk list: the
    cafe chunk is dense 6, BM25 5, RRF 6 among chunks. Among pages (each list collapsed to its pages by their best
    chunk, as the final list is) dense [harbour p1, lakes p1, harbour p2] -> 3, BM25 [harbour p1, harbour p2,
    lakes p1] -> 2, RRF 3, final 3: the old report said "dense 6 · BM25 5 · RRF 6 · final 3"."""
    gold = tmp_path / "gold.csv"
    gold.write_text("question,expected_source,expected_page\nharbour tides,harbour.pdf,2\n", encoding="utf-8")
    common = ["--goldset", str(gold), "--index", str(shelf / "index"), "--docs", str(shelf / "docs"), "--no-sync",
              "--no-rerank", "--quiet", "--no-query-cache", "--no-compare", "--mode", "hybrid", "--page-tolerance", "0"]
    assert er.main(common + ["--report", str(tmp_path / "page.txt")]) == 0
    assert er.main(common + ["--rank-by", "chunk", "--report", str(tmp_path / "chunk.txt")]) == 0
    page, chunk = (json.loads((tmp_path / f"{n}.json").read_text(encoding="utf-8"))["per_query"][0]["stages"]
                   for n in ("page", "chunk"))
    assert page == {"ranks": {"dense": 3, "bm25": 2, "rrf": 3, "final": 3},
                    "lengths": {"dense": 3, "bm25": 3, "rrf": 3, "final": 3}, "pools": {"dense": 3, "bm25": 3},
                    "pool": 30, "unit": "page"}
    assert chunk == {"ranks": {"dense": 6, "bm25": 5, "rrf": 6, "final": 6},
                     "lengths": {"dense": 6, "bm25": 6, "rrf": 6, "final": 6}, "pools": {"dense": 6, "bm25": 6},
                     "pool": 30, "unit": "chunk"}
    assert "- stage ranks (pages): dense 3 · BM25 2 · RRF 3 · final 3\n" in \
        (tmp_path / "page.details.md").read_text(encoding="utf-8")
    capsys.readouterr()
    assert er.main(common + ["--explain", "harbour tides"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "- stage ranks (pages): dense 3 · BM25 2 · RRF 3 · final 3" in lines
    assert lines[lines.index("- dense:"):lines.index("- BM25:")] == [
        "- dense:", "  1. harbour.pdf p. 1", "  2. lakes.pdf p. 1", "  3. harbour.pdf p. 2  ← expected p. 2"]
    assert er.main(common + ["--rank-by", "chunk", "--explain", "harbour tides"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "- stage ranks (chunks): dense 6 · BM25 5 · RRF 6 · final 6" in lines
    assert ("Stage lists (the first 10 chunks of each, numbered as the stage ranks count them; ← marks an "
            "acceptable location):") in lines
    assert lines[lines.index("- dense:"):lines.index("- BM25:")] == [
        "- dense:", *(f"  {n}. harbour.pdf p. 1" for n in range(1, 5)), "  5. lakes.pdf p. 1",
        "  6. harbour.pdf p. 2  ← expected p. 2"]
