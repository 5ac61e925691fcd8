"""Words of a question or chunk as the goldset tools count and compare them: tokens, word counts, Jaccard
similarity, and the function words that never count as content.

One definition for the generator's gates and for lint, so both agree on what a short or near-duplicate question
is. Telling German from English is language.py's job, not this module's.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Set

# Tokens for comparing questions: numbers with inner dots/commas stay whole ("21.23").
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_][\w]*(?:[-'’][\w]+)*|\d\w*")
_WORD = re.compile(r"\w+")

# Function words of English and German (with the question words below: never counted as copied content).
ENGLISH_STOPWORDS = frozenset(
    "the and of to is are that this with for which be by as from it we can on or not these has have were "
    "been its their will would there than into".split()
)
GERMAN_STOPWORDS = frozenset(
    "der die das und ist sind nicht mit von zu den dem des ein eine einer eines wird werden auf für sich "
    "auch als bei im dass oder wir kann durch zum zur nach über wenn noch".split()
)
# Question words and other function words that never count as copied content.
QUESTION_FUNCTION_WORDS = frozenset(
    "what which who whom whose when where why how does do did is are was were a an in at about "
    "was welche welcher welches wer wen wem wann wo warum wieso wie worum woran wofür gibt es ein "
    "eine einen in im am um man".split()
)
CONTENT_STOPWORDS = ENGLISH_STOPWORDS | GERMAN_STOPWORDS | QUESTION_FUNCTION_WORDS


def tokens(text: str) -> list[str]:
    """Casefolded NFKC word tokens; numbers like ``21.23`` and words like ``Black-Scholes`` stay whole."""
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def word_count(text: str) -> int:
    """Number of ``\\w+`` runs: the unit of MIN_CHUNK_WORDS, PROSE_LINE_MIN_WORDS and MIN_QUESTION_WORDS."""
    return len(_WORD.findall(text))


def jaccard(a: str, b: str) -> float:
    """Jaccard similarity of the two texts' token sets (see tokens); 1.0 for two empty texts."""
    return set_jaccard(set(tokens(a)), set(tokens(b)))


def set_jaccard(first: Set[str], second: Set[str]) -> float:
    """Jaccard similarity of two token sets; 1.0 for two empty sets."""
    if not first and not second:
        return 1.0
    shared = len(first & second)
    return shared / (len(first) + len(second) - shared)  # the size of the union, without building it
