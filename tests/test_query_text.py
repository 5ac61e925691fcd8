"""localrag/text/query.py: the one rule for a query's text (valid Unicode, something visible), by hand."""
from __future__ import annotations

import pytest

from localrag.text.query import code_point, text_problem


@pytest.mark.parametrize("text, problem", [
    ("", "is empty"),
    ("   \n\t", "has no visible text, only U+0020, U+000A, U+0009"),
    ("\u200b\u200b", "has no visible text, only U+200B"),  # zero-width spaces: accepted before, while "" was not
    ("\ufeff\u00ad\u2060\u200c\u200d", "has no visible text, only U+FEFF, U+00AD, U+2060, U+200C, U+200D"),
    ("\u00a0\u3000\u2028\u2029\x00\u200e", "has no visible text, only U+00A0, U+3000, U+2028, U+2029, U+0000, ..."),
    ("vega \ud800", "holds U+D800 (character 6), a lone surrogate, which is not valid Unicode"),
    ("\udcff", "holds U+DCFF (character 1), a lone surrogate, which is not valid Unicode"),  # surrogateescape
    ("\u200b\udfff", "holds U+DFFF (character 2), a lone surrogate, which is not valid Unicode"),  # the worse one
])
def test_text_without_a_query(text, problem):
    assert text_problem(text) == problem


@pytest.mark.parametrize("text", ["vega", " x ", "\u200bvega", "é", "\U0001F600", "\ue000", "Ökonomie\u00ad",
                                  "\ud83d\ude00".encode("utf-16", "surrogatepass").decode("utf-16")])
def test_text_with_something_visible_is_a_query(text):
    # The trap: a surrogate *pair* written as two escapes is one valid character once decoded (the last case).
    assert text_problem(text) is None


def test_code_point():
    assert [code_point(c) for c in ("\u200b", "a", "\U0001F600")] == ["U+200B", "U+0061", "U+1F600"]
