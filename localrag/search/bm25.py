"""Fast, persisted BM25 whose scores equal rank-bm25's ``BM25Okapi``.

Equality with rank-bm25 0.2.2 (``rank_bm25.BM25Okapi``): for the same token lists and the same
``k1``, ``b`` and ``epsilon``,

    BM25Index.build_from_tokens(ids, tokenized, k1, b, epsilon).score_tokens(query_tokens)
    == BM25Okapi(tokenized, k1=k1, b=b, epsilon=epsilon).get_scores(query_tokens)

to 1e-9 for every document (the test suite checks it). ``build(ids, texts, ...)`` is the same with
``tokenized = [tokenize(t) for t in texts]`` and ``scores(query)`` with ``tokenize(query)``; pass the
corpus pre-tokenized to ``BM25Okapi`` (its ``tokenizer=`` argument starts a multiprocessing pool).
The reproduced quirks of ``BM25Okapi``:

- idf(t) = log(N - n_t + 0.5) - log(n_t + 0.5) (no "+1" inside the log, so common terms go negative);
- every negative idf is replaced by ``epsilon * average_idf``, the average taken over all vocabulary
  terms *before* the replacement (it can itself be negative; an idf of exactly 0 is kept);
- avgdl = total tokens / N, document length = number of tokens (repeats counted);
- a query token repeated r times adds its term's weight r times; unknown query tokens add 0.

Known differences, all where rank-bm25 fails: an empty corpus builds an empty index (rank-bm25
raises ZeroDivisionError); where rank-bm25 divides 0 by 0 and returns NaN, this returns 0 -- with
``k1 == 0`` for every document lacking a known query token, with ``b == 1`` for empty documents.

Each (term, document) weight idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)) is
precomputed into a scipy CSR matrix with one row per term, so a query adds a few rows into a dense
score vector, in query-token order as rank-bm25 does.

Persistence: ``save(directory, fingerprint)`` writes ``bm25.npz`` (arrays) then ``bm25.json`` (ids,
vocabulary, parameters, fingerprint), each atomically (temp file + ``os.replace``); both carry the same
random save token, so an interrupted save (new npz beside old json) is detected. ``BM25Index.load``
returns None, logging why, when the files are missing, corrupt, inconsistent, from another format or
tokenizer version, or (if ``expected_fingerprint`` is given) built from another corpus; callers then
rebuild.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
import unicodedata
import uuid
import zipfile
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from localrag.files import write_atomic
from localrag.settings import DECOMPOUND_STEMMERS, NO_STEMMER, check_stemmer, stemmer_names  # noqa: F401

if TYPE_CHECKING:  # imported where a matrix is made: an index that never searches BM25 needs no scipy
    import scipy.sparse as sp

# Bump when the saved layout or the meaning of the saved arrays changes; older saves then load as None.
FORMAT_VERSION = 1
# Decimal numbers with inner dots/commas stay one token ("21.23", "1,000.5"); otherwise runs of \w.
TOKEN_PATTERN = r"\d+(?:[.,]\d+)+|\w+"
# Saved with the index: a tokenizer change makes older saves stale, so load refuses them.
TOKENIZER_ID = f"nfc-casefold-nfc:{TOKEN_PATTERN}"
# rank-bm25's BM25Okapi defaults.
DEFAULT_K1 = 1.5
DEFAULT_B = 0.75
DEFAULT_EPSILON = 0.25
COMPOUND_MIN_WORD = 8  # letters a word needs before it is ever split (short words are rarely compounds)
COMPOUND_MIN_PART = 4  # letters of each part at least: shorter "parts" (ab, ein, tag) split ordinary words
COMPOUND_MAX_PARTS = 4  # parts one word is split into at most ("bundes|verfassungs|gericht" is three)
# File names inside the directory passed to save/load.
ARRAYS_FILE = "bm25.npz"
META_FILE = "bm25.json"

_TOKEN_RE = re.compile(TOKEN_PATTERN)
_RUNS_RE = re.compile(r"\d+|[^\W\d_]+")  # the runs of digits and of letters inside a word
_NUMBER_RE = re.compile(r"[\d.,]+")
# What a missing, truncated, garbled or foreign save can raise while loading (load turns them into None).
_UNREADABLE = (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, zipfile.BadZipFile, zlib.error)
_log = logging.getLogger(__name__)


def normalize(text: str) -> str:
    """NFC, casefold, NFC again: casefold can emit decomposed letters (e.g. "ǰ") that \\w would split."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).casefold())


@functools.lru_cache(maxsize=8)
def _stem_words(name: str):
    """The bound stemWords of one PyStemmer stemmer (it keeps its own cache of stemmed words)."""
    import Stemmer

    check_stemmer(name)
    return Stemmer.Stemmer(DECOMPOUND_STEMMERS[name][0] if name in DECOMPOUND_STEMMERS else name).stemWords


class CompoundSplitter:
    """Splits compounds into words of the corpus (Koehn & Knight 2003): of the ways to write a word as at most
    COMPOUND_MAX_PARTS corpus words (each but the last optionally followed by a linking element), the one whose
    parts' geometric mean corpus frequency is highest, if that beats the word's own frequency.

    `frequencies`: casefolded word -> count in the corpus (only alphabetic words of COMPOUND_MIN_PART letters or
    more matter; `from_texts` keeps only those)."""

    def __init__(self, frequencies: dict[str, int], links: Sequence[str]):
        self.frequencies = frequencies
        self.links = tuple(links)
        self._splits: dict[str, list[str]] = {}
        self._ways: dict[tuple[str, int], list[list[str]]] = {}

    @classmethod
    def from_texts(cls, texts: Iterable[str], links: Sequence[str]) -> CompoundSplitter:
        counts = Counter(t for text in texts for t in _TOKEN_RE.findall(normalize(text))
                         if len(t) >= COMPOUND_MIN_PART and t.isalpha())
        return cls(dict(counts), links)

    def _segmentations(self, word: str, parts: int) -> list[list[str]]:
        key = (word, parts)
        if key not in self._ways:
            freq = self.frequencies
            found = [[word]] if len(word) >= COMPOUND_MIN_PART and freq.get(word, 0) else []
            if parts > 1:
                for cut in range(COMPOUND_MIN_PART, len(word) - COMPOUND_MIN_PART + 1):
                    head, tail = word[:cut], word[cut:]
                    for link in self.links:
                        part = head[:len(head) - len(link)] if link and head.endswith(link) else None if link else head
                        if part is not None and len(part) >= COMPOUND_MIN_PART and freq.get(part, 0):
                            found += [[part, *rest] for rest in self._segmentations(tail, parts - 1)]
            self._ways[key] = found
        return self._ways[key]

    def split(self, word: str) -> list[str]:
        """The parts of `word`, or [word] when it is no compound of corpus words."""
        if word not in self._splits:
            best, best_score = [word], float(self.frequencies.get(word, 0))
            if len(word) >= COMPOUND_MIN_WORD and word.isalpha():
                for parts in self._segmentations(word, COMPOUND_MAX_PARTS):
                    if len(parts) > 1:
                        score = math.exp(sum(math.log(self.frequencies[p]) for p in parts) / len(parts))
                        if score > best_score:
                            best, best_score = parts, score
            self._splits[word] = best
        return self._splits[word]


def _split_joined(tokens: Iterable[str]) -> list[str]:
    """Tokens split at underscores, and each word of letters and digits followed by its runs of each:
    "3m_2018_10k" -> "3m", "3", "m", "2018", "10k", "10", "k"; "fy2018" -> "fy2018", "fy", "2018".

    A file name in a chunk header then meets a question's "3M" and "2018", and "FY2018" meets "2018"; the
    whole word stays, so an exact match still counts. Decimal numbers ("21.23") are left whole."""
    out: list[str] = []
    for token in tokens:
        for word in token.split("_"):
            if not word:
                continue
            out.append(word)
            runs = _RUNS_RE.findall(word)
            if len(runs) > 1 and not _NUMBER_RE.fullmatch(word):
                out.extend(runs)
    return out


def tokenize(text: str, stemmer: str = NO_STEMMER, splitter: CompoundSplitter | None = None,
             split_joined: bool = False) -> list[str]:
    """Lower-cased (casefold) word and decimal-number tokens: "Equation 21.23" -> ["equation", "21.23"].

    With a Snowball `stemmer` ("german", "english", ...) each token is stemmed: german turns both
    "Kündigungsfristen" and "Kündigungsfrist" into "kundigungsfrist" (it also folds umlauts and "ue" to "u").
    A stemmer of DECOMPOUND_STEMMERS ("german+decompound") needs the corpus's `splitter`: a compound is followed
    by its parts, all stemmed ("kündigungsfrist" -> "kundigungsfrist", "kundig", "frist").
    """
    tokens = _TOKEN_RE.findall(normalize(text))
    if split_joined:
        tokens = _split_joined(tokens)
    if stemmer in DECOMPOUND_STEMMERS:
        if splitter is None:
            raise ValueError(f"the BM25 stemmer {stemmer!r} splits compounds by the corpus's words; pass the "
                             f"corpus's CompoundSplitter")
        tokens = [piece for token in tokens for piece in _with_parts(token, splitter.split(token))]
    return tokens if stemmer == NO_STEMMER else _stem_words(stemmer)(tokens)


def _with_parts(token: str, parts: list[str]) -> list[str]:
    """A split compound keeps its whole form (an exact match still counts) before its parts."""
    return [token, *parts] if len(parts) > 1 else [token]


def okapi_idf(n_docs: int, doc_freq: np.ndarray, epsilon: float) -> tuple[np.ndarray, float]:
    """rank-bm25 BM25Okapi idf per term and the pre-floor average idf (0.0 for an empty vocabulary)."""
    idf = np.log(n_docs - doc_freq + 0.5) - np.log(doc_freq + 0.5)
    # Sequential sum in vocabulary order, as BM25Okapi._calc_idf does.
    average_idf = sum(idf.tolist()) / len(idf) if len(idf) else 0.0
    return np.where(idf < 0, epsilon * average_idf, idf), average_idf


def okapi_weights(
    tf: np.ndarray, doc_len: np.ndarray, idf: np.ndarray, avgdl: float, k1: float, b: float
) -> np.ndarray:
    """Per-(term, doc) BM25 weight, in BM25Okapi.get_scores' operation order so both round alike."""
    return idf * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avgdl)))


def top_k(scores: np.ndarray, candidates: np.ndarray, k: int) -> np.ndarray:
    """The k candidates (doc indices) with the highest scores; equal scores: lower index first."""
    candidates = np.asarray(candidates)
    if k <= 0 or len(candidates) == 0:
        return candidates[:0]
    values = scores[candidates]
    if len(candidates) > k:
        # Keep every candidate tied with the k-th best, so the tie-break below sees all of them.
        kth_best = np.partition(values, len(values) - k)[len(values) - k]
        keep = values >= kth_best
        candidates, values = candidates[keep], values[keep]
    order = np.lexsort((candidates, -values))
    return candidates[order[:k]]


@dataclass(frozen=True)
class Okapi:
    """The numbers a BM25Index's weights were computed with: BM25Okapi's ``k1``, ``b`` and ``epsilon``, and the
    corpus's average document length (``avgdl``) and average idf before the epsilon floor (``average_idf``)."""

    k1: float
    b: float
    epsilon: float
    avgdl: float
    average_idf: float


@dataclass(frozen=True)
class Analyzer:
    """How the documents were tokenized, and so how queries are (see ``tokenize``): the ``stemmer`` and, for a
    stemmer of DECOMPOUND_STEMMERS, the corpus's compound ``splitter``."""

    stemmer: str = NO_STEMMER
    splitter: CompoundSplitter | None = None

    def __post_init__(self) -> None:
        if self.stemmer in DECOMPOUND_STEMMERS and self.splitter is None:
            raise ValueError(f"stemmer {self.stemmer!r} needs the corpus's CompoundSplitter")


class BM25Index:
    """BM25 (rank-bm25 BM25Okapi scores) over a fixed list of documents; build, query, save, load.

    Ranking: ``search`` returns only documents sharing at least one token with the query, best
    score first; equal scores keep insertion order (the order of ``ids`` at build time).
    """

    def __init__(
        self,
        *,
        ids: Sequence[str],
        vocabulary: Sequence[str],
        weights: sp.csr_matrix,
        doc_len: np.ndarray,
        idf: np.ndarray,
        okapi: Okapi,
        fingerprint: str = "",
        analyzer: Analyzer = Analyzer(),
    ) -> None:
        """Use ``build``, ``build_from_tokens`` or ``load``; this only stores consistent parts.

        ``analyzer``: how documents were tokenized; queries are tokenized the same way."""
        self.ids: tuple[str, ...] = tuple(ids)
        self.vocabulary: tuple[str, ...] = tuple(vocabulary)
        self.term_ids: dict[str, int] = {term: i for i, term in enumerate(self.vocabulary)}
        self.weights = weights
        self.doc_len = doc_len
        self.idf = idf
        self.k1, self.b, self.epsilon = float(okapi.k1), float(okapi.b), float(okapi.epsilon)
        self.avgdl, self.average_idf = float(okapi.avgdl), float(okapi.average_idf)
        self.fingerprint = fingerprint
        self.stemmer, self.splitter = analyzer.stemmer, analyzer.splitter
        # The last query's scores: an evaluation asks each query twice (its candidates, then deeper for diagnosis).
        self._last: tuple[str, tuple[np.ndarray, np.ndarray]] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return (
            f"BM25Index(docs={len(self.ids)}, terms={len(self.vocabulary)}, "
            f"k1={self.k1}, b={self.b}, epsilon={self.epsilon}, stemmer={self.stemmer!r})"
        )

    @classmethod
    def build(
        cls,
        ids: Sequence[str],
        texts: Sequence[str],
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        epsilon: float = DEFAULT_EPSILON,
        fingerprint: str = "",
        stemmer: str = NO_STEMMER,
    ) -> BM25Index:
        """Index ``texts`` (tokenized with ``tokenize(text, stemmer)``) under ``ids``; ids must be unique.
        A stemmer of DECOMPOUND_STEMMERS splits compounds by the words of ``texts``."""
        if len(ids) != len(texts):
            raise ValueError(f"got {len(ids)} ids but {len(texts)} texts; pass one id per text")
        check_stemmer(stemmer)
        splitter = CompoundSplitter.from_texts(texts, DECOMPOUND_STEMMERS[stemmer][1]) \
            if stemmer in DECOMPOUND_STEMMERS else None
        return cls.build_from_tokens(ids, [tokenize(t, stemmer, splitter) for t in texts], k1, b, epsilon,
                                     fingerprint, stemmer, splitter)

    @classmethod
    def build_from_tokens(
        cls,
        ids: Sequence[str],
        tokenized: Sequence[Sequence[str]],
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        epsilon: float = DEFAULT_EPSILON,
        fingerprint: str = "",
        stemmer: str = NO_STEMMER,
        splitter: CompoundSplitter | None = None,
    ) -> BM25Index:
        """Index already tokenized documents (the corpus exactly as BM25Okapi would get it); ``stemmer`` (and
        ``splitter``) name how they were tokenized, so that ``scores``/``search`` tokenize queries alike."""
        _check_build_args(ids, tokenized, k1, b, epsilon)
        # A missing term gets the next id in C (default_factory = current size): the hot loop stays out of Python.
        vocabulary: defaultdict[str, int] = defaultdict()
        vocabulary.default_factory = vocabulary.__len__
        term_of_entry: list[int] = []
        tf_of_entry: list[int] = []
        distinct_per_doc = np.zeros(len(tokenized), dtype=np.int64)
        doc_len = np.zeros(len(tokenized), dtype=np.int64)
        for j, tokens in enumerate(tokenized):
            counts = Counter(tokens)
            # Vocabulary in order of first appearance, like BM25Okapi's nd dict (same idf average).
            term_of_entry.extend(map(vocabulary.__getitem__, counts))
            tf_of_entry.extend(counts.values())
            distinct_per_doc[j] = len(counts)
            doc_len[j] = len(tokens)
        rows = np.asarray(term_of_entry, dtype=np.int64)
        cols = np.repeat(np.arange(len(tokenized), dtype=np.int64), distinct_per_doc)
        tf = np.asarray(tf_of_entry, dtype=np.float64)
        n_docs, n_terms = len(tokenized), len(vocabulary)
        idf, average_idf = okapi_idf(n_docs, np.bincount(rows, minlength=n_terms), epsilon)
        avgdl = int(doc_len.sum()) / n_docs if n_docs else 0.0
        data = okapi_weights(tf, doc_len[cols], idf[rows], avgdl, k1, b) if len(rows) else tf
        import scipy.sparse as sp

        weights = sp.csr_matrix((data, (rows, cols)), shape=(n_terms, n_docs))
        return cls(
            ids=ids, vocabulary=list(vocabulary), weights=weights, doc_len=doc_len, idf=idf,
            okapi=Okapi(k1, b, epsilon, avgdl, average_idf), fingerprint=fingerprint,
            analyzer=Analyzer(stemmer, splitter),
        )

    def score_tokens(self, tokens: Iterable[str]) -> np.ndarray:
        """BM25 score of every document (insertion order) for already tokenized query tokens."""
        return self._score_and_match(tokens)[0]

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document (insertion order, aligned with ``ids``) for a query string."""
        return self.score_tokens(tokenize(query, self.stemmer, self.splitter))

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """Up to k (id, score) of documents sharing a token with the query; best first, ties by insertion order."""
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        if self._last is None or self._last[0] != query:
            self._last = (query, self._score_and_match(tokenize(query, self.stemmer, self.splitter)))
        scores, matched = self._last[1]
        best = top_k(scores, matched, k)
        return [(self.ids[i], float(scores[i])) for i in best.tolist()]

    def _score_and_match(self, tokens: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """Scores of all documents and the sorted indices of documents containing a query token."""
        scores = np.zeros(len(self.ids))
        indptr, indices, data = self.weights.indptr, self.weights.indices, self.weights.data
        matched = np.zeros(len(self.ids), dtype=bool)
        for token in tokens:
            term = self.term_ids.get(token)
            if term is None:
                continue
            docs = indices[indptr[term] : indptr[term + 1]]
            # Indices within one row are distinct, so fancy += adds each weight exactly once.
            scores[docs] += data[indptr[term] : indptr[term + 1]]
            matched[docs] = True
        return scores, np.flatnonzero(matched)

    def save(self, directory: str | os.PathLike[str], fingerprint: str | None = None) -> None:
        """Write bm25.npz then bm25.json into ``directory`` atomically; ``fingerprint`` replaces the stored one."""
        if fingerprint is not None:
            self.fingerprint = fingerprint
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        token = uuid.uuid4().hex
        arrays = {
            "save_token": np.array(token),
            "data": self.weights.data,
            "indices": self.weights.indices,
            "indptr": self.weights.indptr,
            "doc_len": self.doc_len,
            "idf": self.idf,
        }
        write_atomic(folder / ARRAYS_FILE, lambda f: np.savez(f, **arrays), binary=True)
        meta = {
            "format_version": FORMAT_VERSION,
            "tokenizer": TOKENIZER_ID,
            "stemmer": self.stemmer,
            "save_token": token,
            "fingerprint": self.fingerprint,
            "k1": self.k1,
            "b": self.b,
            "epsilon": self.epsilon,
            "avgdl": self.avgdl,
            "average_idf": self.average_idf,
            "ids": list(self.ids),
            "vocabulary": list(self.vocabulary),
            **({"compound_frequencies": self.splitter.frequencies} if self.splitter else {}),
        }
        payload = json.dumps(meta, ensure_ascii=False).encode("utf-8")
        write_atomic(folder / META_FILE, lambda f: f.write(payload), binary=True)

    @classmethod
    def load(
        cls, directory: str | os.PathLike[str], expected_fingerprint: str | None = None,
        expected_stemmer: str | None = None,
    ) -> BM25Index | None:
        """The index saved in ``directory``, or None (reason logged) if missing, corrupt, stale or mismatched
        (another corpus than ``expected_fingerprint``, another stemmer than ``expected_stemmer``)."""
        folder = Path(directory)
        if not (folder / META_FILE).is_file() or not (folder / ARRAYS_FILE).is_file():
            _log.info("no saved BM25 index in %s (expected %s and %s)", folder, META_FILE, ARRAYS_FILE)
            return None
        try:
            meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
            with np.load(folder / ARRAYS_FILE, allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in npz.files}
            index = cls._from_saved(meta, arrays)
        except _UNREADABLE as exc:
            _log.warning("ignoring unreadable BM25 index in %s (%s: %s); rebuild it", folder, type(exc).__name__, exc)
            return None
        if expected_fingerprint is not None and index.fingerprint != expected_fingerprint:
            _log.info("saved BM25 index in %s was built from another corpus (fingerprint differs)", folder)
            return None
        if expected_stemmer is not None and index.stemmer != expected_stemmer:
            _log.info("saved BM25 index in %s was built with stemmer %r, %r is asked for", folder, index.stemmer,
                      expected_stemmer)
            return None
        return index

    @staticmethod
    def is_saved(directory: str | os.PathLike[str], fingerprint: str, stemmer: str) -> bool:
        """Whether ``directory`` holds a save of this format and tokenizer for ``fingerprint`` and ``stemmer``,
        by its META_FILE alone (no arrays are read; ``load`` still checks them and returns None when they
        do not match)."""
        folder = Path(directory)
        try:
            meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return (isinstance(meta, dict) and (folder / ARRAYS_FILE).is_file()
                and meta.get("format_version") == FORMAT_VERSION and meta.get("tokenizer") == TOKENIZER_ID
                and meta.get("fingerprint") == fingerprint and meta.get("stemmer", NO_STEMMER) == stemmer)

    @classmethod
    def _from_saved(cls, meta: dict, arrays: dict[str, np.ndarray]) -> BM25Index:
        """Rebuild from saved parts; ValueError names the first inconsistency."""
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"format version {meta.get('format_version')!r}, this code reads {FORMAT_VERSION}")
        if meta.get("tokenizer") != TOKENIZER_ID:
            raise ValueError(f"tokenizer {meta.get('tokenizer')!r}, this code uses {TOKENIZER_ID!r}")
        if str(arrays["save_token"]) != meta["save_token"]:
            raise ValueError(f"{ARRAYS_FILE} and {META_FILE} come from different saves")
        ids, vocabulary = meta["ids"], meta["vocabulary"]
        data, indices, indptr = arrays["data"], arrays["indices"], arrays["indptr"]
        doc_len, idf = arrays["doc_len"], arrays["idf"]
        _check_saved_arrays(len(ids), len(vocabulary), data, indices, indptr, doc_len, idf)
        import scipy.sparse as sp

        weights = sp.csr_matrix((data, indices, indptr), shape=(len(vocabulary), len(ids)))
        stemmer = str(meta.get("stemmer", NO_STEMMER))  # saves older than the stemmer setting did not stem
        splitter = None
        if stemmer in DECOMPOUND_STEMMERS:
            frequencies = meta["compound_frequencies"]  # KeyError: a save without it is unreadable
            if not isinstance(frequencies, dict):
                raise ValueError("compound_frequencies is not a word -> count table")
            splitter = CompoundSplitter(frequencies, DECOMPOUND_STEMMERS[stemmer][1])
        return cls(
            ids=ids, vocabulary=vocabulary, weights=weights, doc_len=doc_len, idf=idf,
            okapi=Okapi(meta["k1"], meta["b"], meta["epsilon"], meta["avgdl"], meta["average_idf"]),
            fingerprint=str(meta["fingerprint"]), analyzer=Analyzer(stemmer, splitter),
        )


def _check_build_args(
    ids: Sequence[str], tokenized: Sequence[Sequence[str]], k1: float, b: float, epsilon: float
) -> None:
    if len(ids) != len(tokenized):
        raise ValueError(f"got {len(ids)} ids but {len(tokenized)} documents; pass one id per document")
    if len(set(ids)) != len(ids):
        duplicate = next(i for i, n in Counter(ids).items() if n > 1)
        raise ValueError(f"document id {duplicate!r} occurs more than once; ids must be unique")
    if not (np.isfinite(k1) and k1 >= 0):
        raise ValueError(f"k1 must be a finite number >= 0, got {k1!r} (rank-bm25 default {DEFAULT_K1})")
    if not (0 <= b <= 1):
        raise ValueError(f"b must be between 0 and 1, got {b!r} (rank-bm25 default {DEFAULT_B})")
    if not np.isfinite(epsilon):
        raise ValueError(f"epsilon must be a finite number, got {epsilon!r} (rank-bm25 default {DEFAULT_EPSILON})")


def _check_saved_arrays(
    n_docs: int, n_terms: int, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
    doc_len: np.ndarray, idf: np.ndarray,
) -> None:
    """Raise ValueError unless the arrays form a (n_terms x n_docs) CSR matrix with matching vectors."""
    if indptr.shape != (n_terms + 1,) or doc_len.shape != (n_docs,) or idf.shape != (n_terms,):
        raise ValueError(f"array shapes do not fit {n_docs} documents and {n_terms} terms")
    if data.shape != indices.shape or indptr[0] != 0 or indptr[-1] != len(data):
        raise ValueError(
            f"CSR arrays inconsistent: {len(data)} values, {len(indices)} indices, indptr end {indptr[-1]}"
        )
    if np.any(np.diff(indptr) < 0) or (len(indices) and (indices.min() < 0 or indices.max() >= n_docs)):
        raise ValueError("CSR row pointers decrease or document indices are out of range")
    if not np.issubdtype(data.dtype, np.floating) or not np.all(np.isfinite(data)):
        raise ValueError(f"weights must be finite floats, got dtype {data.dtype}")
