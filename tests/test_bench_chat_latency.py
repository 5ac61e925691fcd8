"""bench/chat_latency.py's own logic: the question list, percentiles, and that its bare script ranks as LocalRAG does."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from localrag.search.bm25 import BM25Index
from localrag.search.fusion import rrf_fuse

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("chat_latency", ROOT / "bench" / "chat_latency.py")
chat_latency = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chat_latency)


def test_question_list_takes_new_questions_first_then_repeats():
    goldset = ["Q1", "Q2 ", "Q1", ""]  # the trap: a repeated row and a padded one are one question, a blank none
    extra = ["Q3", "Q2"]
    questions, distinct = chat_latency.question_list([goldset, extra], 7)
    assert questions == ["Q1", "Q2", "Q3", "Q1", "Q2", "Q3", "Q1"]
    assert distinct == 3
    assert chat_latency.question_list([goldset], 1) == (["Q1"], 1)
    with pytest.raises(ValueError, match="no questions found"):
        chat_latency.question_list([["", " "]], 5)


def test_percentile_is_nearest_rank():
    values = list(range(100, 0, -1))  # 100 .. 1, unsorted on purpose
    assert chat_latency.percentile(values, 0.5) == 50
    assert chat_latency.percentile(values, 0.95) == 95
    assert chat_latency.percentile([7.0], 0.95) == 7.0
    assert chat_latency.percentile([3, 1, 2], 0.5) == 2


def test_bare_fusion_equals_localrag_fusion_with_ties():
    rankings = [["a", "b", "c"], ["b", "a", "d"]]  # a/b and c/d tie: first appearance wins in both
    assert chat_latency.rrf(rankings, 60) == rrf_fuse(rankings, k=60)
    assert [i for i, _ in chat_latency.rrf(rankings, 60)] == ["a", "b", "c", "d"]


def test_bare_bm25_ranks_like_bm25index(tmp_path):
    texts = ["revenue grew in fiscal 2022", "revenue fell", "net income and revenue", "cash flow statement",
             "revenue revenue revenue", "income tax"]
    ids = [f"c{i}" for i in range(len(texts))]
    index = BM25Index.build(ids, texts)
    index.save(tmp_path / "bm25", fingerprint="f")
    bare = object.__new__(chat_latency.Bare)  # its BM25 half only: no Chroma store needed
    bare.np, bare.stemmer = np, "none"
    bare.tokenize = __import__("localrag.search.bm25", fromlist=["tokenize"]).tokenize
    meta = json.loads((tmp_path / "bm25" / "bm25.json").read_text(encoding="utf-8"))
    with np.load(tmp_path / "bm25" / "bm25.npz") as arrays:
        bare.data, bare.indices, bare.indptr = arrays["data"], arrays["indices"], arrays["indptr"]
    bare.ids, bare.terms = meta["ids"], {t: i for i, t in enumerate(meta["vocabulary"])}
    for query, depth in [("revenue income", 3), ("revenue", 2), ("cash income tax", 10), ("nothing here", 5)]:
        assert bare.bm25(query, depth) == index.search(query, depth)


def test_missing_index_exits_2_with_the_command_that_builds_it(tmp_path, capsys):
    assert chat_latency.main(["--index", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == (
        f"error: no index at {tmp_path / 'none'}; build it with python bench/index_financebench.py "
        f"--embedding-backend openvino-int8 --skip-extract, or give --index\n")
