"""Tests of localrag/search/fusion.py: reciprocal rank fusion worked by hand, exact ties, and the union of two lists."""
from __future__ import annotations

import pytest

import numpy

from localrag.search.fusion import (convex_fuse, first_per_key, minmax_normalize, rrf_fuse, strictly_decreasing,
                                    union_ids)
from localrag.evaluation.metrics import rank_run


def scores(results) -> list[float]:
    return [score for _, score in results]


def test_rrf_fuse_by_hand():
    # a: 1/61; b: 1/62 + 1/61; c: 1/63 + 1/62; d: 1/63.  b > c (0.03200) > a (0.01639) > d (0.01587).
    fused = rrf_fuse([["a", "b", "c"], ["b", "c", "d"]], k=60)
    assert [doc for doc, _ in fused] == ["b", "c", "a", "d"]
    assert scores(fused) == pytest.approx([1 / 62 + 1 / 61, 1 / 63 + 1 / 62, 1 / 61, 1 / 63], abs=1e-15)


def test_rrf_fuse_exact_tie_keeps_first_appearance():
    # x: 1/61 + 1/62, y: 1/62 + 1/61 -- the same float (addition commutes), so the walk order decides: x first.
    fused = rrf_fuse([["x", "y"], ["y", "x"]], k=60)
    assert fused == [("x", 1 / 61 + 1 / 62), ("y", 1 / 61 + 1 / 62)]
    assert fused[0][1] == fused[1][1]
    # k=0: each id has 1/1 from its only list; "q" appears first although "p" sorts first.
    assert rrf_fuse([["q"], ["p"]], k=0) == [("q", 1.0), ("p", 1.0)]
    assert rrf_fuse([[], []], k=60) == []


def test_minmax_normalize_by_hand():
    # (x - 0.2) / (0.8 - 0.2): 0.8 -> 1, 0.5 -> 0.5, 0.2 -> 0; equal scores all 1 (no spread to scale).
    assert minmax_normalize([("a", 0.8), ("b", 0.5), ("c", 0.2)]) == pytest.approx({"a": 1.0, "b": 0.5, "c": 0.0})
    assert minmax_normalize([("a", 3.0), ("b", 3.0)]) == {"a": 1.0, "b": 1.0}
    assert minmax_normalize([]) == {}


def test_convex_fuse_by_hand():
    # dense a 1, b .75, c .5 -> 1, .5, 0 (binary fractions: exact); BM25 c 12, d 8, a 4 -> 1, .5, 0.  w = 0.7:
    # a .7 + .3*0 = .7; b .35 + 0 = .35; c 0 + .3 = .3; d 0 + .15 = .15.
    fused = convex_fuse([("a", 1.0), ("b", 0.75), ("c", 0.5)], [("c", 12.0), ("d", 8.0), ("a", 4.0)], 0.7)
    assert [doc for doc, _ in fused] == ["a", "b", "c", "d"]
    assert scores(fused) == pytest.approx([0.7, 0.35, 0.3, 0.15], abs=1e-12)
    # The trap: BM25's raw score 12 dwarfs every cosine, yet with w = 0.5 the first of each list tie at 0.5 and
    # the dense list's walk order decides (a before c), as RRF's ties do.
    even = convex_fuse([("a", 1.0), ("b", 0.75), ("c", 0.5)], [("c", 12.0), ("d", 8.0), ("a", 4.0)], 0.5)
    assert even == [("a", 0.5), ("c", 0.5), ("b", 0.25), ("d", 0.25)]
    # w = 1 is the dense order, w = 0 the BM25 order (the other list's chunks follow with score 0).
    assert [d for d, _ in convex_fuse([("a", .9), ("b", .1)], [("b", 5.0), ("a", 1.0)], 1.0)] == ["a", "b"]
    assert [d for d, _ in convex_fuse([("a", .9), ("b", .1)], [("b", 5.0), ("a", 1.0)], 0.0)] == ["b", "a"]
    with pytest.raises(ValueError, match="between 0 and 1, got 1.5"):
        convex_fuse([], [], 1.5)


def test_first_per_key_ranks_pages_by_their_best_chunk():
    # Chunks (page, chunk) best first; page 7's second chunk and page 2's tie with the next page's must go, and
    # the trap: page 3's chunk scores like page 7's best but comes later, so it stays behind it.
    ranked = [(("p7", 0), 0.9), (("p7", 1), 0.8), (("p3", 0), 0.9), (("p2", 0), 0.7), (("p7", 2), 0.7),
              (("p2", 1), 0.6), (("p5", 0), 0.5)]
    assert first_per_key(ranked, key=lambda chunk: chunk[0]) == [(("p7", 0), 0.9), (("p3", 0), 0.9),
                                                                 (("p2", 0), 0.7), (("p5", 0), 0.5)]
    assert first_per_key([], key=lambda chunk: chunk) == []
    # A rank never grows: the first chunk of page p5 was 7th, its page is 4th.
    pages = [chunk[0] for chunk, _ in first_per_key(ranked, key=lambda chunk: chunk[0])]
    assert pages.index("p5") + 1 == 4 and [c for c, _ in ranked].index(("p5", 0)) + 1 == 7


def test_union_ids_first_then_new_ids_once():
    assert union_ids(["a", "b"], ["c", "a", "d", "c"]) == ["a", "b", "c", "d"]
    assert union_ids([], ["b", "b"]) == ["b"]
    assert union_ids(["a", "a"], []) == ["a"]


def test_strictly_decreasing_breaks_ties_and_rises_in_list_order():
    # The trap: "b" ties "a", "c" scores above both (a reranker's equal or out-of-order scores), "d" is below.
    # "e" and "f" differ as doubles but not as float32, the precision trec_eval keeps scores in.
    out = strictly_decreasing([("a", 0.5), ("b", 0.5), ("c", 0.9), ("d", 0.1), ("e", 0.05), ("f", 0.05 - 1e-12)])
    below_a = 0.5 - 2 ** -25  # float32 has 24 significant bits: one unit below 0.5 is 2^-25
    assert out[:4] == [("a", 0.5), ("b", below_a), ("c", below_a - 2 ** -25), ("d", 0.1)]
    assert out[4] == ("e", 0.05) and out[5][1] == float(numpy.nextafter(numpy.float32(0.05), numpy.float32(0)))
    singles = [numpy.float32(s) for _, s in out]
    assert all(x > y for x, y in zip(singles, singles[1:]))
    assert strictly_decreasing([]) == []


def test_strictly_decreasing_makes_trec_order_the_list_order():
    # RRF at k = 1: 1/2 + 1/3 from either list ties; trec_eval would put "z" (greater id) first.
    fused = rrf_fuse([["a", "z"], ["z", "a"]], k=1)
    assert fused == [("a", 1 / 2 + 1 / 3), ("z", 1 / 2 + 1 / 3)]
    assert rank_run(dict(fused)) == ["z", "a"]
    assert rank_run(dict(strictly_decreasing(fused))) == ["a", "z"]
