"""The page text rules (localrag/text/pdf.py, normalize_pages): line-end hyphens rejoined by the document's own words,
soft hyphens, ligatures, no-break spaces and control characters; both loaders give one text; what BM25, the chat
tool and --explain see; the version in the manifest."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import eval_retrieval as er
from local_rag import LocalRAG
from localrag.text.pdf import TEXT_RULES, extract_pdf, normalize_pages

# A filing's page as pdfium gives it: U+FFFE where a line ended in a hyphen (the break dropped), \r\n breaks.
RAW_PDFIUM = ("Annual Report 2023 \u00b7 Page 1 of 3\r\nThe declara\ufffetions of the board name a third\ufffeparty "
              "vendor and non\ufffeGAAP figures.\r\nThird-party vendors and declarations\x02.")


def test_line_end_hyphens_follow_the_words_of_the_document():
    # declarations: the joined word is written elsewhere; third-party: the hyphenated one; non-GAAP: neither,
    # and a capital follows (the trap: joining would make "nonGAAP").
    assert normalize_pages([RAW_PDFIUM]) == [
        "Annual Report 2023 \u00b7 Page 1 of 3\nThe declarations of the board name a third-party vendor and non-GAAP "
        "figures.\nThird-party vendors and declarations."]
    # The vote counts every page of the document, and beats the capital rule: "Multi-Year" is written so.
    assert normalize_pages(["a Multi\ufffeYear plan", "the Multi-Year plan"])[0] == "a Multi-Year plan"
    assert normalize_pages(["re\ufffeorganisation, reorganisation"])[0] == "reorganisation, reorganisation"
    # Neither form elsewhere and a lowercase continuation: joined (a syllable break), as pypdf's "-\n" is.
    assert normalize_pages(["the declara\ufffetions", "the declara-\ntions"]) == ["the declarations"] * 2
    assert normalize_pages(["Form 10-\nK and 2023-\n24"]) == ["Form 10-K and 2023-24"]


def test_soft_hyphens_ligatures_spaces_and_controls():
    assert normalize_pages(["Effec\u00adtive and Effec\u00ad\ntive \ufb01nancial \ufb02ow\u00a0of\u202fcash\x00\x07"
                            "\x1f\x7f\uffff, tab\tkept \u2013 and \u201cquotes\u201d kept\u2028next\x0cpage  \n  x"]) == [
        "Effective and Effective financial flow of cash, tab\tkept \u2013 and \u201cquotes\u201d kept\nnext\npage\nx"]
    assert normalize_pages(["  \n", "\ufffe"]) == ["", ""]


def _bench(name: str):
    """A script of bench/ as a module (bench/ is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rule_counts():
    page_text = _bench("page_text")
    counts = page_text.rule_counts([RAW_PDFIUM, "Effec\u00adtive \ufb01nance\u00a0x\x0cy", "declara-\ntions"])
    assert counts["pdfium line-end hyphen (U+FFFE)"] == 3 and counts["soft hyphen (U+00AD)"] == 1
    assert counts["ligature"] == 1 and counts["no-break space"] == 1 and counts["control character"] == 1
    assert counts["plain line-end hyphen rejoined"] == 1


def hyphenated_pdf(path: Path) -> Path:
    """A PDF in reportlab's own TrueType font (Vera), so ligature and soft hyphen are in its text layer."""
    import reportlab
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(TTFont("Vera", os.path.join(os.path.dirname(reportlab.__file__), "fonts", "Vera.ttf")))
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf = canvas.Canvas(str(path), invariant=1)
    for lines in (["Nordvik Annual Report 2023 \u00b7 Page 1 of 2", "The declara-", "tions of the board name a third-",
                   "party vendor and non-", "GAAP figures. Effec\u00adtive \ufb01nancial data.",
                   "Third-party vendors and declarations."],
                  ["Nordvik Annual Report 2023 \u00b7 Page 2 of 2", "Glaciers retreat every summer."]):
        text = pdf.beginText(72, 760)
        text.setFont("Vera", 11)
        for line in lines:
            text.textLine(line)
        pdf.drawText(text)
        pdf.showPage()
    pdf.save()
    return path


PAGE_1 = ("Nordvik Annual Report 2023 \u00b7 Page 1 of 2\nThe declarations of the board name a third-party vendor and "
          "non-GAAP figures. Effective financial data.\nThird-party vendors and declarations.")


@pytest.mark.parametrize("loader", ["pypdfium2", "pypdf"])
def test_both_loaders_read_the_same_text(tmp_path, loader):
    pages = extract_pdf(str(hyphenated_pdf(tmp_path / "report.pdf")), loader).pages
    assert [(n, label) for n, label, _ in pages] == [(0, "1"), (1, "2")]
    assert pages[0][2] == PAGE_1
    assert pages[1][2] == "Nordvik Annual Report 2023 \u00b7 Page 2 of 2\nGlaciers retreat every summer."


def test_bm25_the_tool_and_explain_see_whole_words(tmp_path, capsys):
    docs = tmp_path / "docs"
    hyphenated_pdf(docs / "report.pdf")
    from conftest import write_pdf

    write_pdf(docs / "other.pdf", ["The board meets twice a year to discuss the weather."])
    rag = LocalRAG(tmp_path / "index", reranker_model=None, quiet=True)
    rag.sync([docs], progress=False)
    info = json.loads((tmp_path / "index" / "index_info.json").read_text(encoding="utf-8"))
    assert info["text_rules"] == TEXT_RULES
    hits = rag.retrieve("declarations", k=3, mode="bm25")
    assert (hits[0][0].metadata["source"], hits[0][0].metadata["page"]) == ("report.pdf", 0)
    assert "declarations of the board" in hits[0][0].page_content and "\ufffe" not in hits[0][0].page_content
    tool = rag.as_tool(k=1, mode="bm25")
    out = tool.invoke({"query": "declarations"})
    assert "declarations of the board name a third-party vendor and non-GAAP" in out and "\ufffe" not in out
    gold = tmp_path / "gold.csv"
    gold.write_text("question,expected_source,expected_page\nWhat do the declarations of the board name?,report.pdf,1\n",
                    encoding="utf-8")
    assert er.main(["--explain", "What do the declarations of the board name?", "--goldset", str(gold), "--index",
                    str(tmp_path / "index"), "--docs", str(docs), "--no-sync", "--no-rerank", "--quiet",
                    "--no-query-cache"]) == 0
    shown = capsys.readouterr().out
    assert "The **declarations** of the **board** **name** a third-party vendor and non-GAAP figures." in shown
    assert "declara\ufffe" not in shown and "declara-" not in shown

    # An index read with the earlier rules (no version in its manifest) is stale: a sync reads its files again.
    del info["text_rules"]
    for entry in info["files"].values():
        del entry["text_rules"]
    (tmp_path / "index" / "index_info.json").write_text(json.dumps(info), encoding="utf-8")
    old = LocalRAG(tmp_path / "index", reranker_model=None, quiet=True)
    assert old.stale_reasons() == [f"page text rules: 2 of 2 files were read with version 1, this localRAG applies "
                                   f"version {TEXT_RULES} (localrag/text/pdf.py); a sync reads them again and embeds only "
                                   f"the chunks whose text changed"]
    report = old.sync([docs], progress=False)
    assert report.rebuilt_because is None and sorted(report.reread) == ["other.pdf", "report.pdf"]
    assert (report.chunks, report.kept) == (0, 3) and old.stale_reasons() == []


def test_newer_text_rules_re_embed_only_the_chunks_whose_text_changed(tmp_path, monkeypatch, capsys):
    """An index whose page 1 was read with the old rules (pdfium's raw U+FFFE) and whose manifest says version 1:
    a sync re-reads both files, embeds the one chunk whose text changed and keeps the other two as stored; an
    interrupt in that embedding loses nothing that the next sync does not finish."""
    from conftest import write_pdf
    from langchain_huggingface import HuggingFaceEmbeddings

    docs = tmp_path / "docs"
    hyphenated_pdf(docs / "report.pdf")
    write_pdf(docs / "other.pdf", ["The board meets twice a year to discuss the weather."])
    index = tmp_path / "index"
    LocalRAG(index, reranker_model=None, quiet=True).sync([docs], progress=False)
    fresh = LocalRAG(index, reranker_model=None, quiet=True)
    found = fresh.index.vectorstore._collection.get(include=["documents", "metadatas"])
    expected = {m["chunk_id"]: (d, m) for d, m in zip(found["documents"], found["metadatas"])}
    dense = [(d.metadata["chunk_id"], round(s, 6)) for d, s in fresh.retrieve("board declarations", k=3, mode="dense")]

    def age(index_folder: Path) -> str:
        """Make the index look read by version 1: its manifest, and page 1's stored text as pdfium gave it."""
        collection = LocalRAG(index_folder, reranker_model=None, quiet=True).index.vectorstore._collection
        page_1 = next(i for i, (_, m) in expected.items() if (m["source"], m["page"]) == ("report.pdf", 0))
        vector = collection.get(ids=[page_1], include=["embeddings"])["embeddings"][0]
        collection.update(ids=[page_1], embeddings=[vector],  # Chroma would embed a text given alone
                          documents=[expected[page_1][0].replace("declarations", "declara\ufffetions")])
        info = json.loads((index_folder / "index_info.json").read_text(encoding="utf-8"))
        info.pop("text_rules")
        for entry in info["files"].values():
            entry.pop("text_rules")
        (index_folder / "index_info.json").write_text(json.dumps(info), encoding="utf-8")
        return page_1

    page_1 = age(index)
    rag = LocalRAG(index, reranker_model=None, quiet=True)
    def bm25_finds_page_1(index_rag: LocalRAG) -> bool:
        return any((d.metadata["source"], d.metadata["page"]) == ("report.pdf", 0)
                   for d, _ in index_rag.retrieve("declarations", k=3, mode="bm25"))

    assert not bm25_finds_page_1(rag)  # the old text split the word
    embedded: list[str] = []

    def interrupted(self, texts):
        embedded.extend(texts)
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(HuggingFaceEmbeddings, "embed_documents", interrupted)
        with pytest.raises(KeyboardInterrupt):
            rag.sync([docs], progress=False)
    assert embedded == [expected[page_1][0]]  # only the changed chunk, in its new text
    after = LocalRAG(index, reranker_model=None, quiet=True)
    assert after.index.check_index().describe() == []  # report.pdf is partial; nothing listed is missing
    stored = after.index.vectorstore._collection.get()
    assert page_1 not in stored["ids"] and len(stored["ids"]) == 2  # its old text is gone, the rest kept

    report = after.sync([docs], progress=False)
    assert (report.chunks, report.kept) == (1, 1) and after.stale_reasons() == []
    got = after.index.vectorstore._collection.get(include=["documents", "metadatas"])
    assert {m["chunk_id"]: (d, m) for d, m in zip(got["documents"], got["metadatas"])} == expected
    info = json.loads((index / "index_info.json").read_text(encoding="utf-8"))
    assert info["text_rules"] == TEXT_RULES and {e["text_rules"] for e in info["files"].values()} == {TEXT_RULES}
    assert bm25_finds_page_1(after)  # BM25 was rebuilt from the new text
    assert [(d.metadata["chunk_id"], round(s, 6))
            for d, s in after.retrieve("board declarations", k=3, mode="dense")] == dense

    # Uninterrupted, one sync does it, and add_pdfs.py names the files it read again.
    age(index)
    import add_pdfs

    assert add_pdfs.main(["--index", str(index), str(docs), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("re-read: other.pdf\nre-read: report.pdf\nfiles added 0 / updated 0 / removed 0 / unchanged 0 / "
                          "failed 0 / re-read 2; 3 pages and 1 chunks embedded (2 stored chunks kept as they were); ")
    got = LocalRAG(index, reranker_model=None, quiet=True).index.vectorstore._collection.get(include=["documents"])
    assert sorted(got["documents"]) == sorted(d for d, _ in expected.values())


def test_furniture_lines_are_found_at_the_page_edges_only():
    """A running header and page number on every page are furniture; the trap: a table's bare figures, one to a
    line, mask to the same "#" as a page number but stand in the body, and a heading on 2 of 5 pages is no
    furniture."""
    page_text = _bench("page_text")
    headings, verbs = ["Risks", "Risks", "Outlook", "Outlook", "Summary"], ["rose", "fell", "held", "grew", "sank"]
    pages = [f"Nordvik AG \u00b7 Annual Report 2023\n{headings[n]}\nRevenue\n2023\n2022\n{n * 7}\nNet sales "
             f"{verbs[n]}.\n{n + 1}" for n in range(5)]
    assert page_text.furniture_lines(pages) == (10, ["#", "Nordvik AG \u00b7 Annual Report #"])
    assert page_text.drop_furniture(pages)[0] == "Risks\nRevenue\n2023\n2022\n0\nNet sales rose."
    assert page_text.drop_furniture(pages)[4] == "Summary\nRevenue\n2023\n2022\n28\nNet sales sank."
    assert page_text.furniture_lines(pages[:3]) == (0, [])  # too short a document to tell
    assert page_text.drop_furniture(pages[:3]) == pages[:3]
