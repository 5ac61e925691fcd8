"""The retriever as a chat uses it: the LangChain retriever and tool (localrag/retrieval/chat.py), citations (page_number,
section from the PDF outline), the error for a missing index, and the README's Python example.

Everything runs on tiny PDFs written here or in conftest, the bundled all-MiniLM-L6-v2 and a tiny local
cross-encoder; nothing reaches the network.
"""
from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, write_corpus, write_pdf
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool

import local_rag
from local_rag import LocalRAG, RAGError, extract_pdf
from localrag.retrieval import chat
from localrag.text.pdf import read_outline, sections_by_page

VEGA_QUERY = "How sensitive is the option value to volatility?"
QUERIES = (VEGA_QUERY, "Kafka Verwandlung Gregor Samsa", "Black-Scholes price of a European call")


def new_rag(index: Path, **kwargs) -> LocalRAG:
    return LocalRAG(index, reranker_model=kwargs.pop("reranker_model", None), quiet=True, **kwargs)


def as_pairs(docs) -> list[tuple]:
    """(id, text, metadata without the score, score) of each Document a LangChain face returned."""
    return [(d.id, d.page_content, {k: v for k, v in d.metadata.items() if k != "score"}, d.metadata["score"])
            for d in docs]


def expected_pairs(results) -> list[tuple]:
    return [(d.id, d.page_content, d.metadata, score) for d, score in results]


# ----------------------------------------------------------------------------- the LangChain retriever

def test_retriever_runs_retrieve_for_every_mode_with_and_without_reranking(tiny_index, spread_cross_encoder):
    rag = new_rag(tiny_index[1], reranker_model=str(spread_cross_encoder))
    orders = set()
    for mode in local_rag.RETRIEVAL_MODES:
        for rerank in (False, True):
            retriever = rag.as_retriever(k=4, mode=mode, rerank=rerank)
            assert isinstance(retriever, BaseRetriever)
            expected = [expected_pairs(rag.retrieve(q, k=4, mode=mode, rerank=rerank)) for q in QUERIES]
            assert as_pairs(retriever.invoke(QUERIES[0])) == expected[0], (mode, rerank)
            assert [as_pairs(docs) for docs in retriever.batch(list(QUERIES))] == expected, (mode, rerank)
            assert as_pairs(asyncio.run(retriever.ainvoke(QUERIES[2]))) == expected[2], (mode, rerank)
            assert [as_pairs(docs) for docs in asyncio.run(retriever.abatch(list(QUERIES)))] == expected
            assert all(expected), (mode, rerank)  # every query finds something (BM25 may find fewer than k)
            orders.add(tuple(d[0] for d in expected[0]))
    # The premise: the settings change the order, so a retriever that ignored mode or rerank would fail above.
    assert len(orders) >= 3
    # None means the LocalRAG's own settings: hybrid, reranked (a reranker is loaded).
    default = rag.as_retriever()
    assert (default.k, default.mode, default.rerank) == (local_rag.RETRIEVAL_K, None, None)
    assert as_pairs(default.invoke(VEGA_QUERY)) == expected_pairs(rag.retrieve(VEGA_QUERY, k=local_rag.RETRIEVAL_K,
                                                                                mode="hybrid", rerank=True))


def test_retriever_in_a_chain_and_bad_requests(tiny_index):
    from langchain_core.runnables import RunnableLambda

    rag = new_rag(tiny_index[1])
    chain = rag.as_retriever(k=2, mode="bm25") | RunnableLambda(lambda docs: [d.metadata["source"] for d in docs])
    # BM25 finds only the page that has these words: one hit, not two.
    assert chain.invoke("Kafka Verwandlung") == [d.metadata["source"] for d, _ in rag.retrieve(
        "Kafka Verwandlung", k=2, mode="bm25")] == ["Literatur_Übersicht.pdf"]
    with pytest.raises(RAGError, match=r"^unknown retrieval mode 'sparse'; use one of dense, bm25, hybrid, union$"):
        rag.as_retriever(mode="sparse")
    # One rule for k and for the query, whichever way in: retrieve, the retriever, the tool.
    for k in (0, -1, 2.5, True):
        for make in (rag.as_tool, rag.as_retriever):
            with pytest.raises(RAGError, match=rf"^k must be a whole number of at least 1 chunk, got {k!r}$"):
                make(k=k)
        with pytest.raises(RAGError, match=rf"^k must be a whole number of at least 1 chunk, got {k!r}$"):
            rag.retrieve("Kafka", k=k)
    tool, retriever = rag.as_tool(k=3), rag.as_retriever(k=3)
    # One rule for a query without visible text (zero-width characters were searched for, "" was refused) and for
    # text that is not valid Unicode (a lone surrogate reached the tokenizer: TypeError).
    for query, problem in (("", "is empty"), ("   \n", "has no visible text, only U+0020, U+000A"),
                           ("\u200b\u200b", "has no visible text, only U+200B"),
                           ("\ufeff\u2060\u00ad", "has no visible text, only U+FEFF, U+2060, U+00AD"),
                           ("vega \ud800", "holds U+D800 (character 6), a lone surrogate, which is not valid Unicode")):
        message = f"^{re.escape(f'the query {query!r} {problem}; ask a question or give key words')}$"
        for call in (lambda q: tool.invoke({"query": q}), retriever.invoke, lambda q: rag.retrieve(q, k=3),
                     lambda q: rag.retrieve_traced(q, k=3)):
            with pytest.raises(RAGError, match=message):
                call(query)
    with pytest.raises(RAGError, match=r"^a query must be text, got NoneType \(None\)$"):
        retriever.invoke(None)
    with pytest.raises(RAGError, match=r"^a query must be text, got int \(42\)$"):
        rag.retrieve(42, k=3)
    with pytest.raises(RAGError, match=r"^reranking was requested but is off \(turned off\)$"):
        rag.as_retriever(rerank=True)


# ----------------------------------------------------------------------------- the agent tool

def test_tool_output_through_langchains_tool_interface(tiny_index):
    rag = new_rag(tiny_index[1])
    tool = rag.as_tool(k=2, excerpt_chars=60)
    assert isinstance(tool, BaseTool)
    assert tool.name == "search_pdf_shelf"
    assert tool.args == {"query": {"description": "what to search for: a question or key words", "title": "Query",
                                   "type": "string"}}
    assert tool.description == (
        "Searches the user's PDF shelf (4 indexed files: Literatur_Übersicht.pdf, options.pdf, scan.pdf, "
        "weather.pdf) and returns the most relevant passages, each with its file, page (as a PDF viewer numbers "
        "it), section when known, score and an excerpt. Call it whenever the answer may be in these documents, "
        "before answering from memory, and cite file and page. Input: a search query in the documents' language.")
    hits = rag.retrieve(VEGA_QUERY, k=2)
    # RRF (k=1): the vega page is first in both lists; the Black-Scholes page is 2nd and 3rd (it ties with the
    # weather page, 3rd and 2nd, and keeps its place by the fusion's stable order).
    assert [(d.metadata["source"], d.metadata["page"]) for d, _ in hits] == [("options.pdf", 0), ("options.pdf", 1)]
    assert [s for _, s in hits] == pytest.approx([1 / 2 + 1 / 2, 1 / 3 + 1 / 4], abs=1e-12)
    # The 0-based page 0 is cited as page 1; excerpts cut at a word boundary within 60 characters.
    assert tool.invoke({"query": VEGA_QUERY}) == (
        "[1] options.pdf, page 1, score 1.0000\n"
        "Vega is the sensitivity of an option's value to the …\n"
        "\n"
        "[2] options.pdf, page 2, score 0.5833\n"
        "Equation 21.23 gives the Black-Scholes-Merton price of a …")
    assert asyncio.run(tool.ainvoke({"query": VEGA_QUERY})) == tool.invoke({"query": VEGA_QUERY})


def test_tool_output_is_bounded(tiny_index):
    rag = new_rag(tiny_index[1])
    for excerpt_chars in (20, 21, 33, 600):
        out = rag.as_tool(k=5, excerpt_chars=excerpt_chars).invoke({"query": VEGA_QUERY})
        blocks = out.split("\n\n")
        assert len(blocks) == 5
        for block, (doc, _) in zip(blocks, rag.retrieve(VEGA_QUERY, k=5)):
            heading, text = block.split("\n")
            assert heading.startswith(f"[{blocks.index(block) + 1}] {doc.metadata['source']}, page ")
            full = " ".join(doc.page_content.split("\n", 1)[1].split())  # without the chunk header
            assert len(text) <= excerpt_chars
            if len(full) <= excerpt_chars:
                assert text == full
            else:  # cut at a word boundary, marked
                assert text.endswith(" …") and full.startswith(text[:-2]) and full[len(text) - 2] == " "
    # A word longer than the room is cut inside it; the bound holds all the same.
    assert chat.excerpt("[a.pdf, page 3]\n" + "x" * 50 + " tail", 20) == "x" * 18 + " …"
    assert chat.excerpt("exactly twenty chars", 20) == "exactly twenty chars"
    with pytest.raises(RAGError, match=r"^excerpt_chars must be at least 20, got 19$"):
        rag.as_tool(excerpt_chars=19)


def test_tool_description_counts_files_beyond_those_it_names():
    files = [f"f{i:02d}.pdf" for i in range(14)]
    assert chat.tool_description(files).startswith(
        "Searches the user's PDF shelf (14 indexed files: f00.pdf, f01.pdf, f02.pdf, f03.pdf, f04.pdf, f05.pdf, "
        "f06.pdf, f07.pdf, f08.pdf, f09.pdf, f10.pdf, f11.pdf and 2 more) and returns")
    assert chat.format_hits([]) == "No passage on the shelf matches this query."


# ----------------------------------------------------------------------------- citations: page_number, section

# Outline in document order, with two traps: "Appendix" is listed first but starts last, and "1.1 Scope" and its
# child "1.1.1 Detail" start on one page (the deeper one names it). The title's odd spaces are collapsed.
OUTLINE = [("Appendix", 5, None), ("1 Intro", 1, None), ("1.1 Scope", 2, "1 Intro"),
           ("1.1.1  Detail\n", 2, "1.1 Scope"), ("1.2 Method", 3, "1 Intro"), ("2 Results", 4, None)]
OUTLINE_READ = [(5, "Appendix"), (1, "1 Intro"), (2, "1.1 Scope"), (2, "1.1.1 Detail"), (3, "1.2 Method"),
                (4, "2 Results")]
SECTIONS = {1: "1 Intro", 2: "1.1.1 Detail", 3: "1.2 Method", 4: "2 Results", 5: "Appendix"}  # page 0: none
# Pages 0-1 print roman numbers, then the count restarts at 1: page_number and the printed label differ.
LABELS = ["i", "ii", "1", "2", "3", "4"]
PAGE_TEXTS = ["Title page of the handbook.", "Introduction to the espresso machine Aurora.",
              "Scope: the steam wand and its cleaning.", "Detail method for descaling with citric acid.",
              "Results of the descaling test over twelve weeks.", "Appendix with the spare parts list."]


def write_outlined_pdf(path: Path) -> Path:
    from pypdf import PdfReader, PdfWriter

    plain = write_pdf(path.with_suffix(".plain"), PAGE_TEXTS)
    writer = PdfWriter(clone_from=PdfReader(plain))
    made: dict[str, object] = {}  # title -> its outline item, the parent of later entries
    for title, page, parent in OUTLINE:
        made[title] = writer.add_outline_item(title=title, page_number=page,
                                              parent=made[parent] if parent else None)
    writer.set_page_label(0, 1, style="/r")
    writer.set_page_label(2, 5, style="/D", start=1)
    writer.write(path)
    plain.unlink()
    return path


@pytest.mark.parametrize("loader", ["pypdf", "pypdfium2"])
def test_both_loaders_read_the_outline_and_labels(tmp_path, loader):
    path = write_outlined_pdf(tmp_path / "handbook.pdf")
    pdf = extract_pdf(str(path), loader)
    assert pdf.error is None
    assert pdf.outline == OUTLINE_READ
    assert read_outline(path, loader) == OUTLINE_READ
    assert [(page, label) for page, label, _ in pdf.pages] == list(enumerate(LABELS))
    assert sections_by_page(pdf.outline, range(6)) == SECTIONS


def test_sections_by_page_edge_cases():
    assert sections_by_page([], range(3)) == {}
    # A page number no entry starts before; pages given out of order and twice.
    assert sections_by_page([(2, "B"), (0, "A")], [3, 0, 1, 3]) == {0: "A", 1: "A", 3: "B"}


@pytest.mark.parametrize("loader", ["pypdf", "pypdfium2"])
def test_chunks_carry_page_number_and_section(tmp_path, loader):
    docs = tmp_path / "docs"
    write_outlined_pdf(docs / "handbook.pdf")
    rag = new_rag(tmp_path / "index", pdf_loader=loader)
    rag.sync([docs], progress=False)
    chunks = {meta["page"]: (text, meta) for _, text, meta in rag.indexed_chunks()}
    assert sorted(chunks) == [0, 1, 2, 3, 4, 5]
    for page, (text, meta) in chunks.items():
        assert (meta["page_number"], meta["page_label"], meta.get("section")) == (page + 1, LABELS[page],
                                                                                 SECTIONS.get(page))
        assert text.startswith(f"[handbook.pdf, page {page + 1}]\n")  # the header uses the same number
    assert "section" not in chunks[0][1]  # no None in Chroma metadata: no key at all
    out = rag.as_tool(k=1, mode="bm25").invoke({"query": "descaling citric acid"})
    assert out.startswith('[1] handbook.pdf, page 4 (printed "2"), section "1.2 Method", score ')


def test_an_index_of_the_older_format_is_read_and_upgraded_in_place(tmp_path, monkeypatch):
    """An index built before page_number and section existed (format 1): retrieval derives page_number, and
    the next sync adds page_number and section to the stored chunks without embedding anything."""
    from langchain_huggingface import HuggingFaceEmbeddings

    docs = tmp_path / "docs"
    write_outlined_pdf(docs / "handbook.pdf")
    write_corpus(docs, {"weather.pdf": ["Plants are sensitive to changes in rainfall."]})
    index = tmp_path / "index"
    new_rag(index).sync([docs], progress=False)
    # Make it what format 1 wrote: chunks without page_number and section, manifest format 1.
    rag = new_rag(index)
    collection = rag.vectorstore._collection
    data = collection.get(include=["embeddings", "documents", "metadatas"])
    old = [{k: v for k, v in m.items() if k not in ("page_number", "section")} for m in data["metadatas"]]
    collection.delete(ids=data["ids"])
    collection.add(ids=data["ids"], embeddings=data["embeddings"], documents=data["documents"], metadatas=old)
    info = json.loads((index / "index_info.json").read_text(encoding="utf-8"))
    info["format"] = 1
    (index / "index_info.json").write_text(json.dumps(info), encoding="utf-8")

    rag = new_rag(index)
    hits = rag.retrieve("descaling citric acid", k=1, mode="bm25")
    assert (hits[0][0].metadata["page"], hits[0][0].metadata["page_number"]) == (3, 4)  # derived when read
    assert "section" not in hits[0][0].metadata  # unknown until a sync
    assert "page_number" not in collection.get(ids=[hits[0][0].id])["metadatas"][0]

    calls = []
    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", lambda self, texts: calls.append(texts))
    report = rag.sync([docs], progress=False)
    assert calls == [] and report.unchanged == ["handbook.pdf", "weather.pdf"] and not report.changed
    stored = {m["source"] + f":{m['page']}": m for m in rag.vectorstore._collection.get()["metadatas"]}
    assert {key: (m["page_number"], m.get("section")) for key, m in stored.items()} == {
        "handbook.pdf:0": (1, None), "handbook.pdf:1": (2, "1 Intro"), "handbook.pdf:2": (3, "1.1.1 Detail"),
        "handbook.pdf:3": (4, "1.2 Method"), "handbook.pdf:4": (5, "2 Results"), "handbook.pdf:5": (6, "Appendix"),
        "weather.pdf:0": (1, None)}
    assert json.loads((index / "index_info.json").read_text(encoding="utf-8"))["format"] == local_rag.INDEX_FORMAT
    # The same object retrieves the upgraded chunks (its in-memory copy is keyed by the manifest's format).
    assert rag.retrieve("descaling citric acid", k=1, mode="bm25")[0][0].metadata["section"] == "1.2 Method"


# ----------------------------------------------------------------------------- no index

def test_no_index_is_a_clear_error(tmp_path):
    typo = tmp_path / "typo"
    rag = new_rag(typo)
    assert rag.vectorstore is None  # the documented way to ask, without an error
    message = (f"there is no index at {typo}; build it with `python add_pdfs.py PDF_FOLDER --index {typo}`, or give "
               f"the path of an existing index")
    for call in (lambda: rag.retrieve("vega"), lambda: rag.candidates("vega", 3), lambda: rag.as_retriever(),
                 lambda: rag.as_tool()):
        with pytest.raises(RAGError) as caught:
            call()
        assert str(caught.value) == message
        assert caught.value.reason == "no index"
    assert not typo.exists()  # asking created nothing


def test_a_damaged_manifest_is_named_instead(tmp_path):
    index = tmp_path / "index"
    index.mkdir()
    (index / "index_info.json").write_text("[]", encoding="utf-8")
    with pytest.raises(RAGError, match=r"^the index manifest .*index_info\.json is damaged: it holds a JSON list "
                                        r"instead of an object; run add_pdfs\.py --index .* --rebuild"):
        new_rag(index).retrieve("vega")


# ----------------------------------------------------------------------------- the README's example

def readme_example() -> str:
    """The Python block of the README's "Use it from Python or a chat" section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use it from Python or a chat", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    return blocks[0]


def test_the_readme_example_runs(tiny_index, tmp_path, monkeypatch, capsys):
    code = readme_example()
    assert "LocalRAG(local_rag.PROJECT_DIR / local_rag.VECTORSTORE_PATH)" in code  # the setting the test points
    shutil.copytree(tiny_index[1], tmp_path / "eval" / "index")                 # at the tiny index (absolute: kept)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(local_rag, "VECTORSTORE_PATH", str(tmp_path / "eval" / "index"))
    monkeypatch.setattr(local_rag, "RERANKER_MODEL", None)  # the default cross-encoder would need the network
    exec(compile(code, "README.md", "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out
    rag = new_rag(tmp_path / "eval" / "index")
    first, score = rag.retrieve("What does vega measure?", k=3)[0]
    assert (first.metadata["source"], first.metadata["page_number"]) == ("options.pdf", 1)
    assert out.startswith(f"{score:.3f}  options.pdf, page 1\n")
    assert "\n[options.pdf, page 1]\nVega is the sensitivity" in out  # the chain's context
    assert "\n[1] options.pdf, page 1, score " in out  # the tool's output
