"""What a query's text must be, one rule for every way in (LocalRAG.retrieve and retrieve_traced, the LangChain
retriever and tool, --explain, a goldset's questions, a dataset's queries): valid Unicode with something visible.

Visible is what is left after removing whitespace (Unicode categories Zs, Zl, Zp), control characters (Cc: tab,
newline, ...) and format characters (Cf: zero-width space and joiners, BOM, word joiner, soft hyphen, ...). A lone
surrogate (U+D800 to U+DFFF) is not valid Unicode: it cannot be encoded as UTF-8, so no tokenizer, hash or file
takes it. Python text gets one from bytes decoded with errors="surrogateescape" (a command line argument that is
not UTF-8) or from a JSON escape such as "\\ud800".
"""
from __future__ import annotations

import unicodedata

INVISIBLE_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})
SHOWN_CODE_POINTS = 5  # the invisible characters a message names, in order of first appearance


def code_point(char: str) -> str:
    """A character as messages name it: U+200B, U+1F600."""
    return f"U+{ord(char):04X}"


def lone_surrogate(text: str) -> tuple[int, str] | None:
    """(1-based position, character) of the first lone surrogate in `text`, or None when it is valid Unicode."""
    return next(((n, c) for n, c in enumerate(text, start=1) if 0xD800 <= ord(c) <= 0xDFFF), None)


def has_visible_text(text: str) -> bool:
    """Whether anything is left of `text` after removing whitespace, control and format characters."""
    return any(unicodedata.category(char) not in INVISIBLE_CATEGORIES for char in text)


def text_problem(text: str) -> str | None:
    """Why `text` cannot be a query, as words that follow its name ("the query 'x' ..."), or None when it can:
    'is empty', 'holds U+D800 (character 6), a lone surrogate, which is not valid Unicode', or 'has no visible
    text, only U+200B' (its distinct characters, at most SHOWN_CODE_POINTS)."""
    if not text:
        return "is empty"
    if surrogate := lone_surrogate(text):
        position, char = surrogate
        return f"holds {code_point(char)} (character {position}), a lone surrogate, which is not valid Unicode"
    if has_visible_text(text):
        return None
    distinct = list(dict.fromkeys(text))
    more = ", ..." if len(distinct) > SHOWN_CODE_POINTS else ""
    return f"has no visible text, only {', '.join(map(code_point, distinct[:SHOWN_CODE_POINTS]))}{more}"
