"""The page text rules (localrag/pdf.py, normalize_pages): line-end hyphens rejoined by the document's own words,
soft hyphens, ligatures, no-break spaces and control characters; both loaders give one text; what BM25, the chat
tool and --explain see; the version in the manifest."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import eval_retrieval as er
from local_rag import LocalRAG
from localrag.pdf import TEXT_RULES, extract_pdf, normalize_pages

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


def test_rule_counts():
    import importlib.util

    spec = importlib.util.spec_from_file_location("page_text", Path(__file__).resolve().parents[1] / "bench" /
                                                  "page_text.py")
    page_text = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page_text)
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

    # An index read with the earlier rules (no version in its manifest) is stale and is rebuilt by a sync.
    del info["text_rules"]
    (tmp_path / "index" / "index_info.json").write_text(json.dumps(info), encoding="utf-8")
    old = LocalRAG(tmp_path / "index", reranker_model=None, quiet=True)
    assert old.stale_reasons() == [f"page text rules: index has version 1, this localRAG applies version "
                                   f"{TEXT_RULES} (localrag/pdf.py)"]
    report = old.sync([docs], progress=False)
    assert report.rebuilt_because.startswith("settings changed: page text rules: index has version 1")
