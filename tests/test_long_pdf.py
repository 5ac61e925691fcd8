"""Tests of what issue 31 added for long PDFs: convex fusion and the document prior in the retriever, the
identity lines the manifest records (and fills in for older indexes), and the long-pdf profile of the CLIs."""
from __future__ import annotations

import json
import shutil

import pytest

import eval_retrieval as er
import local_rag
from localrag.runs.options import resolve
from local_rag import LocalRAG, RAGError
from localrag.search.fusion import with_document_prior

VEGA_QUERY = "How sensitive is the option value to volatility?"
# Stage scores of VEGA_QUERY on the tiny index (tests/test_local_rag.py: test_dense_order, test_bm25_order).
DENSE = {("options.pdf", 0): 0.49725, ("options.pdf", 1): 0.22392, ("weather.pdf", 0): 0.20558,
         ("scan.pdf", 0): -0.04505, ("Literatur_Übersicht.pdf", 0): -0.09334}
BM25 = {("options.pdf", 0): 3.99175, ("weather.pdf", 0): 3.23031, ("options.pdf", 1): 0.55782}


def keys(results) -> list[tuple[str, int]]:
    return [(doc.metadata["source"], doc.metadata["page"]) for doc, _ in results]


def rag_of(index, **kwargs) -> LocalRAG:
    return LocalRAG(index, reranker_model=None, quiet=True, **kwargs)


def test_with_document_prior_by_hand():
    # a .9 + .5 * 0 = .9; b .8 + .5 * 1 = 1.3; c .7 + .5 * .4 = .9, equal to a: a stays first (the list's order).
    ranked = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
    doc = {"a": "x.pdf", "b": "y.pdf", "c": "z.pdf"}
    out = with_document_prior(ranked, doc.get, {"y.pdf": 1.0, "z.pdf": 0.4}, 0.5)
    assert [i for i, _ in out] == ["b", "a", "c"]
    assert [s for _, s in out] == pytest.approx([1.3, 0.9, 0.9])
    assert with_document_prior(ranked, doc.get, {}, 0.5) == ranked  # no prior: the order and scores as they were


def test_convex_fusion_on_the_tiny_index(tiny_index):
    rag = rag_of(tiny_index[1], fusion="convex", dense_weight=0.8)
    found = rag.retrieve(VEGA_QUERY, k=6, mode="hybrid")
    # Min-max: dense (s + 0.09334) / 0.59059, BM25 (s - 0.55782) / 3.43393; 0.8 x dense + 0.2 x BM25:
    # options p0 1.0; weather 0.8 x 0.50614 + 0.2 x 0.77826 = 0.56056; options p1 0.8 x 0.53719 = 0.42975;
    # scan 0.8 x 0.08177 = 0.06541; Literatur 0. The trap: RRF ties weather with options p1 and keeps options p1
    # first; convex fusion puts weather ahead on BM25's score, which RRF reads only as a rank.
    assert keys(found) == [("options.pdf", 0), ("weather.pdf", 0), ("options.pdf", 1), ("scan.pdf", 0),
                           ("Literatur_Übersicht.pdf", 0)]
    assert [s for _, s in found] == pytest.approx([1.0, 0.56056, 0.42975, 0.06541, 0.0], abs=1e-4)
    assert rag.describe_order("hybrid", rerank=False) == \
        "convex fusion of min-max-normalised scores (0.8 x dense + 0.2 x BM25)"


def test_document_prior_needs_a_question_that_names_a_document(tiny_index):
    rag = rag_of(tiny_index[1], document_prior=0.6)
    # The identity lines of the tiny corpus are the file names' words; only "weather" is in this question.
    question = VEGA_QUERY + " (weather)"
    assert rag.retriever.prior_of(question) == {"weather.pdf": 1.0}
    trace = rag.retrieve_traced(question, k=5, mode="dense", rerank=False)
    dense = trace.stages["dense"]
    low, high = dense[-1][1], dense[0][1]
    # Each chunk's cosine scaled by the list's min and max, plus 0.6 for the weather page's document.
    expected = sorted(((score - low) / (high - low) + (0.6 if doc.metadata["source"] == "weather.pdf" else 0.0)
                       for doc, score in dense), reverse=True)
    assert [s for _, s in trace.stages["prior"]] == pytest.approx(expected)
    # The best cosine (options p0, 1.0 after scaling) loses to the weather page, which its document lifts.
    assert keys(trace.final)[0] == ("weather.pdf", 0)
    # No document named: no prior stage, the dense order and scores as they were.
    plain = rag.retrieve_traced(VEGA_QUERY, k=5, mode="dense", rerank=False)
    assert "prior" not in plain.stages
    assert keys(plain.final) == [("options.pdf", 0), ("options.pdf", 1), ("weather.pdf", 0), ("scan.pdf", 0),
                                 ("Literatur_Übersicht.pdf", 0)]
    assert rag.describe_order("dense", rerank=False) == \
        "cosine similarity (dense), scaled to [0, 1], plus 0.6 x document prior"


@pytest.mark.parametrize("kwargs, message", [
    ({"fusion": "max"}, "unknown fusion 'max'; use one of rrf, convex"),
    ({"dense_weight": 1.5}, "the dense weight of convex fusion must be a number from 0 to 1, got 1.5"),
    ({"document_prior": -1}, "the document prior's weight must be a number of at least 0 (0 turns it off), got -1"),
])
def test_bad_fusion_settings_are_refused_before_the_index_opens(tmp_path, kwargs, message):
    with pytest.raises(RAGError) as info:
        rag_of(tmp_path / "nothing-here", **kwargs)
    assert str(info.value) == message
    assert not (tmp_path / "nothing-here").exists()


def test_manifest_records_identities_and_fills_them_in_for_an_older_index(tiny_index, tmp_path):
    docs, index = tiny_index
    files = json.loads((index / "index_info.json").read_text())["files"]
    assert {name: entry["identity"] for name, entry in files.items()} == {
        "options.pdf": "options", "weather.pdf": "weather", "Literatur_Übersicht.pdf": "Literatur Übersicht",
        "scan.pdf": "scan"}
    # An index written before identities were recorded: the next sync reads them, embedding nothing.
    copy = tmp_path / "index"
    shutil.copytree(index, copy)
    docs = shutil.copytree(docs, tmp_path / "docs")  # the manifest names its folder relative to the index
    info = json.loads((copy / "index_info.json").read_text())
    for entry in info["files"].values():
        del entry["identity"]
    (copy / "index_info.json").write_text(json.dumps(info))
    rag = rag_of(copy)
    assert rag.retriever.prior_of("weather") == {}
    report = rag.sync([docs], progress=False)
    assert report.chunks == 0 and not report.changed
    filled = json.loads((copy / "index_info.json").read_text())["files"]
    assert filled["weather.pdf"]["identity"] == "weather"
    assert rag.retriever.prior_of("weather") == {"weather.pdf": 1.0}  # the same object sees them at once
    assert rag_of(copy).retriever.prior_of("weather") == {"weather.pdf": 1.0}


def test_profile_fills_what_the_command_line_left_out():
    def resolved(*argv):
        return resolve(er.parse(list(argv)), er.eval_defaults())

    args = resolved("--profile", "long-pdf")
    assert (args.chunk_size, args.mode, args.fusion, args.dense_weight, args.document_prior) == \
        ("page", "hybrid", "convex", 0.8, 0.8)
    assert args.report == "eval/runs/baseline.profile-long-pdf.txt"  # named by the profile, not each setting
    # A flag given beside the profile wins, and names the report.
    args = resolved("--profile", "long-pdf", "--mode", "dense", "--dense-weight", "0.7")
    assert (args.mode, args.dense_weight, args.fusion) == ("dense", 0.7, "convex")
    assert args.report == "eval/runs/baseline.profile-long-pdf.mode-dense.dense_weight-0.7.txt"
    assert resolved().mode == local_rag.RETRIEVAL_MODE  # no profile: the module's mode
    # A swept axis is the sweep's, not the profile's: no "--chunk-size page and --sweep chunk_size" conflict.
    args = resolved("--profile", "long-pdf", "--sweep", "chunk_size=page,2000")
    assert args.chunk_size is None and args.fusion == "convex"


def test_profile_words_show_the_values_used_and_mark_what_overrode_the_preset():
    from localrag.runs.plan import profile_words

    preset = local_rag.PROFILES["long-pdf"]
    assert profile_words(preset) == ("chunk_size page, mode hybrid, fusion convex, dense_weight 0.8, "
                                     "document_prior 0.8")  # --help's words: the preset
    used = {"chunk_size": 2000, "mode": "dense", "fusion": "convex", "dense_weight": 0.8, "document_prior": 0.0}
    assert profile_words(preset, used, {"chunk_size": "--sweep", "mode": "--ablation", "document_prior":
                                        "--document-prior", "fusion": "--fusion"}) == (
        "chunk_size 2000 by --sweep instead of page, mode dense by --ablation instead of hybrid, fusion convex, "
        "dense_weight 0.8, document_prior 0 by --document-prior instead of 0.8")  # a flag equal to the preset: no mark


def test_profile_and_bad_weights_on_the_command_line(capsys):
    assert er.main(["--dense-weight", "2"]) == 2
    assert capsys.readouterr().err == "error: --dense-weight must be a number from 0 to 1, got 2\n"
    assert er.main(["--document-prior", "-0.5"]) == 2
    assert capsys.readouterr().err == "error: --document-prior must be 0 (off) or more, got -0.5\n"


def test_add_pdfs_builds_whole_pages_with_the_profile(tiny_index, tmp_path, capsys):
    import add_pdfs

    docs = shutil.copytree(tiny_index[0], tmp_path / "docs")
    assert add_pdfs.main([str(docs), "--index", str(tmp_path / "index"), "--profile", "long-pdf", "--quiet"]) == 0
    settings = json.loads((tmp_path / "index" / "index_info.json").read_text())["settings"]
    assert (settings["chunk_size"], settings["chunk_overlap"]) == ("page", 0)
    # A flag beside the profile wins.
    assert add_pdfs.main([str(docs), "--index", str(tmp_path / "other"), "--profile", "long-pdf",
                          "--chunk-size", "500", "--quiet"]) == 0
    assert json.loads((tmp_path / "other" / "index_info.json").read_text())["settings"]["chunk_size"] == 500


def test_no_profile_is_suggested_from_page_counts(tmp_path, monkeypatch, capsys):
    # Issue 52: every lint, run and sweep of a shelf averaging 50 pages or more printed "note: suggested profile:
    # long-pdf", from the page count alone; on two manuals the profile lowered Hit@1 from 0.533 to 0.400. A
    # suggestion must come from a measurement on the user's goldset, so page counts make none.
    from conftest import write_pdf

    monkeypatch.chdir(tmp_path)
    write_pdf(tmp_path / "docs" / "manual.pdf", [f"Chapter {n} of the manual explains the option number {n}."
                                                 for n in range(1, 51)])  # 50 pages: the old threshold
    (tmp_path / "gold.csv").write_text("question,expected_source,expected_page\n"
                                       "Which chapter explains the option number 7?,manual.pdf,7\n"
                                       "Which chapter explains the option number 42?,manual.pdf,42\n", encoding="utf-8")
    base = ["--goldset", "gold.csv", "--index", str(tmp_path / "idx"), "--docs", "docs", "--no-rerank"]
    assert er.main(base + ["--report", "plain.txt", "--no-compare"]) == 0
    assert er.main(base + ["--lint"]) == 0
    assert er.main(base + ["--sweep", "mode=dense,bm25", "--report", "sweep.txt", "--no-compare"]) == 0
    out, err = capsys.readouterr()
    assert "goldset OK: no problems found\n" in out
    assert "suggest" not in (out + err).casefold()
    for report in ("plain.txt", "plain.json", "sweep.txt"):
        assert "suggest" not in (tmp_path / report).read_text(encoding="utf-8").casefold()


def test_the_evaluation_names_the_profile_when_used(tiny_docs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    from conftest import TINY_GOLD

    (tmp_path / "gold.csv").write_text(TINY_GOLD, encoding="utf-8")
    base = ["--goldset", "gold.csv", "--index", str(tmp_path / "idx"), "--docs", "docs", "--no-rerank"]
    er.main(base + ["--profile", "long-pdf", "--report", "profiled.txt"])
    text = (tmp_path / "profiled.txt").read_text()
    assert ("  Profile:            long-pdf (chunk_size page, mode hybrid, fusion convex, dense_weight 0.8, "
            "document_prior 0.8)\n") in text
    assert "  Document prior:     0.8 x how well a file's identity matches the question (4 of 4 files have one)\n" \
        in text
    settings = json.loads((tmp_path / "profiled.json").read_text())["settings"]
    assert {key: settings[key] for key in ("profile", "fusion", "dense_weight", "document_prior", "chunk_size")} == \
        {"profile": "long-pdf", "fusion": "convex", "dense_weight": 0.8, "document_prior": 0.8, "chunk_size": "page"}
    # A flag beside the profile: the line shows the value the run used and marks it (it listed the preset's 0.8).
    er.main(base + ["--profile", "long-pdf", "--dense-weight", "0.5", "--document-prior", "0.8", "--report",
                    "weighted.txt"])
    assert ("  Profile:            long-pdf (chunk_size page, mode hybrid, fusion convex, dense_weight 0.5 by "
            "--dense-weight instead of 0.8, document_prior 0.8)\n") in (tmp_path / "weighted.txt").read_text()


def test_an_unreadable_front_page_leaves_the_file_name_as_its_identity(tiny_index, tmp_path, monkeypatch, capsys):
    from localrag.index import sync as sync_module
    from localrag.text.pdf import ExtractedPdf

    copy = shutil.copytree(tiny_index[1], tmp_path / "index")
    docs = shutil.copytree(tiny_index[0], tmp_path / "docs")
    info = json.loads((copy / "index_info.json").read_text())
    del info["files"]["options.pdf"]["identity"]
    (copy / "index_info.json").write_text(json.dumps(info))

    def broken(path, loader):
        return ExtractedPdf(error="OSError: disk went away")

    monkeypatch.setattr(sync_module, "extract_pdf", broken)
    report = LocalRAG(copy, reranker_model=None).sync([docs], progress=False)
    assert report.chunks == 0
    assert ("note: the title and first page of options.pdf could not be read (OSError: disk went away); the "
            "document prior knows it by its file name until the file changes\n") in capsys.readouterr().err
    assert json.loads((copy / "index_info.json").read_text())["files"]["options.pdf"]["identity"] == "options"


def test_significant_settings_leave_out_only_old_values_of_newer_settings():
    from localrag.settings import significant_settings

    assert significant_settings({"chunk_context": False, "chunk_size": 800, "chunk_headers": False}) == \
        {"chunk_size": 800, "chunk_headers": False}
    assert significant_settings({"chunk_context": True}) == {"chunk_context": True}
