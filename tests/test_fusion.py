"""Tests of localrag/fusion.py: reciprocal rank fusion worked by hand, exact ties, and the union of two lists."""
from __future__ import annotations

import pytest

from localrag.fusion import rrf_fuse, union_ids


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


def test_union_ids_first_then_new_ids_once():
    assert union_ids(["a", "b"], ["c", "a", "d", "c"]) == ["a", "b", "c", "d"]
    assert union_ids([], ["b", "b"]) == ["b"]
    assert union_ids(["a", "a"], []) == ["a"]
