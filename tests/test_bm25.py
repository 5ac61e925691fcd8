"""Tests for bm25_index: hand-computed BM25, equality with rank-bm25, tokenizer, ties, persistence."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from localrag.search import bm25 as bm25_index
from localrag.search.bm25 import ARRAYS_FILE, META_FILE, BM25Index, tokenize, top_k

LN_5_3 = math.log(5 / 3)


@pytest.fixture
def fruit() -> BM25Index:
    """Three documents, lengths 3, 2, 4 (avgdl = 9 / 3 = 3)."""
    texts = ["apple banana apple", "banana cherry", "cherry date elder fig"]
    return BM25Index.build(["d1", "d2", "d3"], texts)


def test_hand_computed_scores(fruit: BM25Index) -> None:
    # N = 3, k1 = 1.5, b = 0.75, avgdl = 3.
    # idf(apple) = idf(date) = idf(elder) = idf(fig) = ln(2.5) - ln(1.5) = ln(5/3) = 0.510826
    # idf(banana) = idf(cherry) = ln(1.5) - ln(2.5) = -ln(5/3) < 0 -> replaced by epsilon * average idf:
    #   average over the 6 terms = (4 ln(5/3) - 2 ln(5/3)) / 6 = ln(5/3) / 3; times 0.25 -> ln(5/3) / 12 = 0.042569
    # d1 (dl 3): K = 1.5 * (0.25 + 0.75 * 3/3) = 1.5
    #   apple tf 2: 2 * 2.5 / (2 + 1.5) = 10/7;  banana tf 1: 2.5 / 2.5 = 1
    #   score = ln(5/3) * 10/7 + ln(5/3)/12 = ln(5/3) * 127/84 = 0.772320
    # d2 (dl 2): K = 1.5 * (0.25 + 0.75 * 2/3) = 1.125
    #   banana tf 1: 2.5 / 2.125 = 20/17  -> ln(5/3)/12 * 20/17 = ln(5/3) * 5/51 = 0.050081
    # d3: neither term -> 0
    expected = [LN_5_3 * 127 / 84, LN_5_3 * 5 / 51, 0.0]
    np.testing.assert_allclose(fruit.scores("apple banana"), expected, rtol=0, atol=1e-12)
    assert fruit.scores("apple banana")[0] == pytest.approx(0.772320, abs=1e-6)
    hits = fruit.search("apple banana", k=10)
    assert [doc_id for doc_id, _ in hits] == ["d1", "d2"]  # d3 shares no token: not returned
    assert hits[1][1] == pytest.approx(LN_5_3 * 5 / 51, abs=1e-12)


def test_shorter_document_wins_on_equal_term_frequency(fruit: BM25Index) -> None:
    # Trap: d1 and d2 both contain "banana" once, yet d2 (dl 2) beats d1 (dl 3):
    # d1 = ln(5/3)/12 * 1 = 0.042569 < d2 = ln(5/3)/12 * 20/17 = 0.050081.
    hits = fruit.search("banana", k=2)
    assert [doc_id for doc_id, _ in hits] == ["d2", "d1"]
    assert hits[0][1] == pytest.approx(LN_5_3 / 12 * 20 / 17, abs=1e-12)
    assert hits[1][1] == pytest.approx(LN_5_3 / 12, abs=1e-12)


def _random_corpus(rng: random.Random, n_docs: int) -> list[list[str]]:
    words = [f"w{i}" for i in range(60)]
    docs = []
    for _ in range(n_docs):
        # Skewed choice so some terms are frequent (df > N/2, negative idf) and most are rare.
        body = [words[min(int(rng.expovariate(0.12)), 59)] for _ in range(rng.randint(0, 25))]
        docs.append(body + ["everywhere"])
    return docs


def _queries(rng: random.Random) -> list[list[str]]:
    queries = [
        ["everywhere"],  # in every document: negative idf -> epsilon floor
        ["w0", "w0", "w0"],  # repeated token counts three times
        ["unknown", "w5"],  # unknown token adds 0
        ["unknown"],
        [],
        ["w1", "everywhere", "w1", "w59", "nothere"],
    ]
    while len(queries) < 20:
        queries.append([f"w{rng.randint(0, 40)}" for _ in range(rng.randint(1, 6))] + rng.choice([[], ["everywhere"]]))
    return queries


def test_equals_rank_bm25_on_random_corpus() -> None:
    rng = random.Random(7)
    docs = _random_corpus(rng, 50)
    index = BM25Index.build_from_tokens([f"doc{i}" for i in range(50)], docs)
    reference = BM25Okapi(docs)
    assert reference.idf["everywhere"] == pytest.approx(0.25 * reference.average_idf)  # the floor path is used
    for query in _queries(rng):
        np.testing.assert_allclose(index.score_tokens(query), reference.get_scores(query), rtol=0, atol=1e-9)


@pytest.mark.parametrize(("k1", "b", "epsilon"), [(1.2, 0.75, 0.25), (0.3, 0.5, 0.1), (2.0, 1.0, 0.5), (1.5, 0.0, 0.0)])
def test_equals_rank_bm25_with_other_parameters(k1: float, b: float, epsilon: float) -> None:
    rng = random.Random(11)
    docs = [d + ["pad"] for d in _random_corpus(rng, 50)]  # no empty document: rank-bm25 gives NaN for it at b = 1
    index = BM25Index.build_from_tokens([str(i) for i in range(50)], docs, k1=k1, b=b, epsilon=epsilon)
    reference = BM25Okapi(docs, k1=k1, b=b, epsilon=epsilon)
    for query in _queries(rng):
        np.testing.assert_allclose(index.score_tokens(query), reference.get_scores(query), rtol=0, atol=1e-9)


def test_build_from_texts_equals_rank_bm25_on_tokenized_texts() -> None:
    texts = ["Die Übersicht zeigt Equation 21.23.", "Black-Scholes-Merton in der STRASSE", "Straße, Übersicht", ""]
    index = BM25Index.build(["a", "b", "c", "d"], texts)
    reference = BM25Okapi([tokenize(t) for t in texts])
    for query in ["übersicht", "Strasse 21.23", "black merton merton", "nichts"]:
        np.testing.assert_allclose(index.scores(query), reference.get_scores(tokenize(query)), rtol=0, atol=1e-9)


def test_zero_idf_is_kept_not_floored() -> None:
    # N = 2: "a" in one document -> idf = ln(1.5) - ln(1.5) = 0, which rank-bm25 keeps (only idf < 0 is floored);
    # "b" in both -> ln(0.5) - ln(2.5) = ln(0.2) < 0 -> epsilon * average idf = 0.25 * ln(0.2) / 2 (also < 0).
    docs = [["a", "b"], ["b"]]
    index = BM25Index.build_from_tokens(["x", "y"], docs)
    assert index.idf[0] == 0.0
    assert index.idf[1] == pytest.approx(0.25 * math.log(0.2) / 2, abs=1e-15)
    expected = BM25Okapi(docs).get_scores(["a", "b"])
    np.testing.assert_allclose(index.score_tokens(["a", "b"]), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Übersicht", ["übersicht"]),
        ("U\u0308bersicht", ["übersicht"]),  # macOS decomposed umlaut
        ("J\u030cA", ["\u01f0a"]),  # casefold decomposes again ("ǰ" = j + caron): NFC after it keeps one token
        ("Equation 21.23", ["equation", "21.23"]),
        ("Black-Scholes-Merton", ["black", "scholes", "merton"]),
        ("Straße STRASSE", ["strasse", "strasse"]),
        ("Revenue 1,000.50 in 2023.", ["revenue", "1,000.50", "in", "2023"]),
        ("v2.0, page 3", ["v2", "0", "page", "3"]),
        ("", []),
    ],
)
def test_tokenize(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_tie_keeps_insertion_order() -> None:
    # "z" and "a" are identical documents, so their scores are equal; insertion order ("z" first) decides,
    # not the id. "m" has the same terms in a longer document, so it scores lower. The four unrelated
    # documents keep idf(risk) = idf(factor) = ln(4.5) - ln(3.5) positive.
    texts = ["risk factor", "risk factor long document text", "risk factor"]
    fillers = ["unrelated one", "unrelated two", "unrelated three", "other four"]
    filler_ids = ["f1", "f2", "f3", "f4"]
    index = BM25Index.build(["z", "m", "a", *filler_ids], texts + fillers)
    hits = index.search("risk factor", k=3)
    assert hits[0][1] == hits[1][1]
    assert [doc_id for doc_id, _ in hits] == ["z", "a", "m"]
    assert index.search("risk factor", k=1) == hits[:1]
    reordered = BM25Index.build(["a", "m", "z", *filler_ids], [texts[2], texts[1], texts[0], *fillers])
    assert [doc_id for doc_id, _ in reordered.search("risk factor", k=3)] == ["a", "z", "m"]


def test_negative_floor_favours_longer_documents() -> None:
    # Trap: every document contains the query terms, so the epsilon floor replaces their idf, and here the
    # average idf it scales is negative; all scores are negative and the longer document ranks first.
    # N = 3: idf(risk) = idf(factor) = ln(0.5) - ln(3.5) = ln(1/7) = -1.945910;
    # idf(long) = idf(document) = idf(text) = ln(2.5) - ln(1.5) = 0.510826.
    # average = (2 ln(1/7) + 3 ln(5/3)) / 5 = -0.471869; floor = 0.25 * average = -0.117967.
    # avgdl = 9 / 3 = 3. z (dl 2): K = 1.125, tf part 2.5 / 2.125 = 20/17 -> 2 * floor * 20/17 = -0.277570.
    # m (dl 5): K = 1.5 * (0.25 + 0.75 * 5/3) = 2.25, tf part 2.5 / 3.25 = 10/13 -> 2 * floor * 10/13 = -0.181488.
    floor = 0.25 * (2 * math.log(1 / 7) + 3 * LN_5_3) / 5
    index = BM25Index.build(["z", "m", "a"], ["risk factor", "risk factor long document text", "risk factor"])
    hits = index.search("risk factor", k=3)
    assert [doc_id for doc_id, _ in hits] == ["m", "z", "a"]
    assert hits[0][1] == pytest.approx(2 * floor * 10 / 13, abs=1e-12)
    assert hits[1][1] == pytest.approx(2 * floor * 20 / 17, abs=1e-12)
    assert hits[0][1] == pytest.approx(-0.181488, abs=1e-6)


def test_k1_zero_gives_zero_where_rank_bm25_gives_nan() -> None:
    # With k1 = 0 rank-bm25 divides 0 by 0 for documents without a query term; here they score 0.
    docs = [["a", "b"], ["b", "c"], ["c"]]
    index = BM25Index.build_from_tokens(["x", "y", "z"], docs, k1=0.0)
    with np.errstate(invalid="ignore"):
        expected = BM25Okapi(docs, k1=0.0).get_scores(["a"])
    assert np.isnan(expected[1]) and np.isnan(expected[2])
    np.testing.assert_allclose(index.score_tokens(["a"]), np.nan_to_num(expected, nan=0.0), rtol=0, atol=1e-12)


def test_top_k_orders_by_score_then_index() -> None:
    scores = np.array([1.0, 3.0, 3.0, 2.0, 3.0])
    assert top_k(scores, np.arange(5), 2).tolist() == [1, 2]  # three-way tie at 3.0 cut at k = 2
    assert top_k(scores, np.arange(5), 4).tolist() == [1, 2, 4, 3]
    assert top_k(scores, np.array([0, 3, 4]), 5).tolist() == [4, 3, 0]
    assert top_k(scores, np.arange(5), 0).tolist() == []


def test_search_edge_cases(fruit: BM25Index) -> None:
    assert fruit.search("unknown words", k=5) == []
    assert fruit.search("apple", k=0) == []
    with pytest.raises(ValueError, match="k must be >= 0"):
        fruit.search("apple", k=-1)
    empty = BM25Index.build([], [])
    assert empty.search("apple") == [] and empty.scores("apple").shape == (0,)


def test_build_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="'a' occurs more than once"):
        BM25Index.build(["a", "b", "a"], ["x", "y", "z"])
    with pytest.raises(ValueError, match="2 ids but 1 texts"):
        BM25Index.build(["a", "b"], ["x"])
    with pytest.raises(ValueError, match="b must be between 0 and 1"):
        BM25Index.build(["a"], ["x"], b=1.5)


def test_save_load_round_trip(fruit: BM25Index, tmp_path: Path) -> None:
    fingerprint = "fruit corpus v1"  # the caller's (local_rag: from the index manifest); stored as given
    fruit.save(tmp_path / "bm25", fingerprint=fingerprint)
    loaded = BM25Index.load(tmp_path / "bm25", expected_fingerprint=fingerprint)
    assert loaded is not None
    assert loaded.ids == fruit.ids and loaded.vocabulary == fruit.vocabulary
    assert (loaded.k1, loaded.b, loaded.epsilon, loaded.fingerprint) == (1.5, 0.75, 0.25, fingerprint)
    assert loaded.scores("apple banana fig").tolist() == fruit.scores("apple banana fig").tolist()
    assert loaded.search("banana") == fruit.search("banana")
    # No temp files left behind.
    assert sorted(p.name for p in (tmp_path / "bm25").iterdir()) == sorted([ARRAYS_FILE, META_FILE])
    assert BM25Index.load(tmp_path / "bm25", expected_fingerprint="other corpus") is None


def test_load_missing_folder_returns_none(tmp_path: Path) -> None:
    assert BM25Index.load(tmp_path / "nowhere") is None


@pytest.mark.parametrize("name", [ARRAYS_FILE, META_FILE])
def test_truncated_file_loads_as_none(fruit: BM25Index, tmp_path: Path, name: str) -> None:
    fruit.save(tmp_path)
    path = tmp_path / name
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert BM25Index.load(tmp_path) is None


def test_files_from_different_saves_load_as_none(fruit: BM25Index, tmp_path: Path) -> None:
    # Simulates a crash between the two replaces: new arrays beside the previous metadata.
    fruit.save(tmp_path)
    old_meta = (tmp_path / META_FILE).read_bytes()
    fruit.save(tmp_path)
    (tmp_path / META_FILE).write_bytes(old_meta)
    assert BM25Index.load(tmp_path) is None


def test_other_format_version_loads_as_none(fruit: BM25Index, tmp_path: Path) -> None:
    fruit.save(tmp_path)
    meta = json.loads((tmp_path / META_FILE).read_text(encoding="utf-8"))
    meta["format_version"] = bm25_index.FORMAT_VERSION + 1
    (tmp_path / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    assert BM25Index.load(tmp_path) is None


def test_failed_save_keeps_previous_files(fruit: BM25Index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fruit.save(tmp_path, fingerprint="v1")
    other = BM25Index.build(["q"], ["quince"])

    def broken_savez(handle, **arrays) -> None:
        handle.write(b"PK half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(bm25_index.np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        other.save(tmp_path, fingerprint="v2")
    monkeypatch.undo()
    loaded = BM25Index.load(tmp_path, expected_fingerprint="v1")
    assert loaded is not None and loaded.ids == ("d1", "d2", "d3")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([ARRAYS_FILE, META_FILE])
