"""Load BEIR-format datasets, sample them reproducibly, and read/write TREC run files.

A BEIR folder (https://github.com/beir-cellar/beir, "Load your own dataset") holds::

    corpus.jsonl       {"_id": ..., "title": ..., "text": ..., "metadata": {...}} per line
    queries.jsonl      {"_id": ..., "text": ...} per line
    qrels/<split>.tsv  query-id <TAB> corpus-id <TAB> score, header line optional

Every source is turned into one shape, built from frozen dataclasses (not TypedDicts, so
that fields are checked by name and the objects cannot be changed by accident):

* documents: ``dict[doc_id, Document]`` with ``Document(doc_id, title, text, metadata)``
* queries:   ``dict[query_id, Query]`` with ``Query(query_id, question)``
* qrels:     ``dict[query_id, dict[doc_id, grade]]``; graded relevance is kept, and a grade
  of 0 or less is kept but means "judged not relevant" (trec_eval's convention).

Malformed lines never stop a load: they are skipped, counted per kind, and reported with
their first line numbers in ``BeirDataset.problems``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from localrag.errors import RAGError
from localrag.text.query import has_visible_text, lone_surrogate

# File names of a BEIR folder.
CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_DIR = "qrels"
QRELS_SUFFIX = ".tsv"
# How many line numbers are reported per kind of problem.
MAX_REPORTED_LINES = 5
# Grades at or above this count as relevant (trec_eval's default relevance level is 1).
RELEVANT_MIN_GRADE = 1
# Hex digits kept from the sha256 in dataset_fingerprint: 64 bits, short enough for a folder name.
FINGERPRINT_LENGTH = 16
# Bump when loading or sampling changes meaning, so that cached indexes are rebuilt.
FINGERPRINT_VERSION = "beir_data/1"
# Chunk size for streaming files into sha256.
HASH_CHUNK_BYTES = 1 << 20
# Second column of a TREC run line; trec_eval ignores it.
TREC_Q0 = "Q0"

# Kinds of malformed lines, with the English text used in reports.
PROBLEM_TEXT = {
    "bad_encoding": "not UTF-8",
    "bad_json": "not a JSON object",
    "missing_id": "missing or empty id",
    "wrong_type": "title, text or metadata of the wrong type",
    "empty_text": "empty text",
    "no_visible_text": "text with nothing visible (only whitespace, control or format characters)",
    "lone_surrogate": "text with a lone surrogate, not valid Unicode",
    "duplicate_id": "duplicate id (first one kept)",
    "wrong_columns": "not 3 tab-separated columns (query-id, corpus-id, score)",
    "non_integer_grade": "grade is not an integer",
    "unknown_query": "query id not in queries.jsonl (dropped)",
    "unknown_document": "document id not in corpus.jsonl (dropped)",
    "duplicate_pair": "same query and document listed again (first grade kept)",
}

_INTEGER = re.compile(r"[+-]?\d+")


class DatasetError(RAGError):
    """The dataset folder or one of its files is missing or unusable."""


class RunFormatError(RAGError, ValueError):
    """A TREC run file line cannot be read, or a run cannot be written as TREC."""


@dataclass(frozen=True)
class Document:
    """One corpus entry. ``metadata`` holds the file's "metadata" object plus any extra keys."""

    doc_id: str
    title: str
    text: str
    metadata: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Query:
    """One query of the split."""

    query_id: str
    question: str


@dataclass(frozen=True)
class LoadProblem:
    """How many lines of one kind were skipped in one file, and the first line numbers (1-based)."""

    file: str
    kind: str
    count: int
    first_lines: tuple[int, ...]

    def describe(self) -> str:
        """One English line, e.g. "corpus.jsonl: 2 lines skipped, not a JSON object (lines 3, 9)"."""
        lines = ", ".join(str(n) for n in self.first_lines)
        if self.count > len(self.first_lines):
            lines += ", ..."
        word = "line" if self.count == 1 else "lines"
        return (f"{self.file}: {_plural(self.count, 'line')} skipped, "
                f"{PROBLEM_TEXT.get(self.kind, self.kind)} ({word} {lines})")


@dataclass(frozen=True)
class BeirDataset:
    """A loaded split: only queries that have qrels in this split are kept (as BEIR's loader does)."""

    path: Path
    split: str
    documents: dict[str, Document]
    queries: dict[str, Query]
    qrels: dict[str, dict[str, int]]
    problems: tuple[LoadProblem, ...] = ()
    # Valid queries of queries.jsonl that have no qrels in this split (e.g. they belong to another split).
    queries_outside_split: int = 0

    @property
    def name(self) -> str:
        """The folder name, e.g. "scifact"."""
        return self.path.name

    def describe(self) -> str:
        """One English sentence with the sizes of the split."""
        n_pairs = sum(len(docs) for docs in self.qrels.values())
        n_relevant = sum(is_relevant(g) for docs in self.qrels.values() for g in docs.values())
        return (f"{self.name} ({self.split}): {_plural(len(self.documents), 'document')}, "
                f"{_plural(len(self.queries), 'query', 'queries')}, "
                f"{_plural(n_pairs, 'judgement')} ({n_relevant:,} relevant)")

    def problem_lines(self) -> list[str]:
        """One English line per kind of skipped line; empty when the files were clean."""
        return [p.describe() for p in self.problems]


@dataclass(frozen=True)
class SampleInfo:
    """What sample_dataset kept; ``describe()`` is the sentence for the report."""

    seed: int
    max_queries: int | None
    max_corpus_docs: int | None
    n_queries: int
    n_queries_total: int
    # Queries of the split left out because none of their judged documents is relevant.
    n_queries_without_relevant: int
    n_documents: int
    n_documents_total: int
    n_relevant_documents: int
    # True when max_corpus_docs was smaller than the number of relevant documents needed.
    limit_raised_for_relevant: bool

    def describe(self) -> str:
        """E.g. "sample: 50 of 809 queries, 1,000 of 5,183 documents (all 61 relevant documents included), seed 0"."""
        if self.n_queries == self.n_queries_total:
            queries = f"all {_plural(self.n_queries, 'query', 'queries')}"
        else:
            queries = f"{self.n_queries:,} of {_plural(self.n_queries_total, 'query', 'queries')}"
        if self.n_queries_without_relevant:
            queries += (f" ({self.n_queries_without_relevant:,} without a relevant document "
                        f"left out)")
        if self.max_corpus_docs is None:
            documents = f"all {_plural(self.n_documents, 'document')}"
        else:
            documents = f"{self.n_documents:,} of {_plural(self.n_documents_total, 'document')}"
            relevant = _plural(self.n_relevant_documents, "relevant document")
            if self.limit_raised_for_relevant:
                documents += (f" (limit {self.max_corpus_docs:,} raised to keep all {relevant})")
            else:
                documents += f" (all {relevant} included)"
        sampled = self.max_queries is not None or self.max_corpus_docs is not None
        if not sampled:
            return f"no sample: {queries}, {documents}"
        return f"sample: {queries}, {documents}, seed {self.seed}"


# ----------------------------------------------------------------------------- loading


def is_relevant(grade: int) -> bool:
    """trec_eval's rule: a judged document is relevant when its grade is at least 1."""
    return grade >= RELEVANT_MIN_GRADE


def available_splits(directory: str | Path) -> list[str]:
    """Names of the qrels files in DIR/qrels (without .tsv), sorted; empty when there are none."""
    qrels_dir = Path(directory) / QRELS_DIR
    if not qrels_dir.is_dir():
        return []
    return sorted(p.name[: -len(QRELS_SUFFIX)] for p in qrels_dir.iterdir()
                  if p.is_file() and p.name.endswith(QRELS_SUFFIX))


def _layout(directory: Path, split: str) -> str:
    return ("Expected a BEIR folder:\n"
            f"  {directory / CORPUS_FILE}  one JSON object per line: "
            '{"_id", "title", "text", "metadata"}\n'
            f"  {directory / QUERIES_FILE}  one JSON object per line: {{\"_id\", \"text\"}}\n"
            f"  {directory / QRELS_DIR / (split + QRELS_SUFFIX)}  "
            "query-id<TAB>corpus-id<TAB>score per line (header line optional)")


def dataset_files(directory: str | Path, split: str) -> tuple[Path, Path, Path]:
    """Paths of corpus, queries and qrels of SPLIT; DatasetError naming what is missing."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DatasetError(f"Dataset folder not found: {directory}\n{_layout(directory, split)}")
    corpus, queries = directory / CORPUS_FILE, directory / QUERIES_FILE
    qrels = directory / QRELS_DIR / (split + QRELS_SUFFIX)
    for path in (corpus, queries):
        if not path.is_file():
            raise DatasetError(f"Missing file: {path}\n{_layout(directory, split)}")
    if not qrels.is_file():
        splits = available_splits(directory)
        if splits:
            hint = f"Splits present in {directory / QRELS_DIR}: {', '.join(splits)}; choose one of them."
        else:
            hint = f"No qrels/*.tsv file found in {directory}."
        raise DatasetError(f"No qrels for split {split!r}: {qrels} does not exist. {hint}\n"
                           f"{_layout(directory, split)}")
    return corpus, queries, qrels


class _ProblemLog:
    """Counts skipped lines per (file, kind) and keeps the first line numbers."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}
        self._lines: dict[tuple[str, str], list[int]] = {}

    def add(self, file: str, kind: str, line_no: int) -> None:
        key = (file, kind)
        self._counts[key] = self._counts.get(key, 0) + 1
        lines = self._lines.setdefault(key, [])
        if len(lines) < MAX_REPORTED_LINES:
            lines.append(line_no)

    def problems(self) -> tuple[LoadProblem, ...]:
        return tuple(LoadProblem(f, k, n, tuple(self._lines[(f, k)]))
                     for (f, k), n in self._counts.items())


def _read_lines(path: Path) -> Iterator[tuple[int, str | None]]:
    """(1-based line number, text) for each non-blank line; text is None when not UTF-8.

    Decoding line by line lets one bad byte cost one line instead of the whole file.
    """
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte order mark, as written by some Windows editors
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                yield line_no, None
                continue
            if text.strip():
                yield line_no, text


def _parse_id(value: object) -> str | None:
    """A JSON id as a string: strings and integers are accepted (qrels ids are strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _optional_str(value: object) -> str | None:
    """A text field: absent or null means empty; any other non-string is wrong (None returned)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else None


def parse_document(obj: dict) -> Document | str:
    """A corpus object as a Document, or the problem kind when it is malformed.

    A document counts as empty only when both title and text are blank: a titled document
    without a body can still be found.
    """
    doc_id = _parse_id(obj.get("_id"))
    if doc_id is None:
        return "missing_id"
    title, text = _optional_str(obj.get("title")), _optional_str(obj.get("text"))
    metadata = obj.get("metadata") or {}
    if title is None or text is None or not isinstance(metadata, dict):
        return "wrong_type"
    if not title.strip() and not text.strip():
        return "empty_text"
    extra = {k: v for k, v in obj.items() if k not in ("_id", "title", "text", "metadata")}
    return Document(doc_id, title, text, {**extra, **metadata})


def parse_query(obj: dict) -> Query | str:
    """A queries object as a Query, or the problem kind when it is malformed."""
    query_id = _parse_id(obj.get("_id"))
    if query_id is None:
        return "missing_id"
    text = _optional_str(obj.get("text"))
    if text is None:
        return "wrong_type"
    if not text.strip():
        return "empty_text"
    if lone_surrogate(text):  # the retriever's rule for a query's text (localrag/text/query.py)
        return "lone_surrogate"
    if not has_visible_text(text):
        return "no_visible_text"
    return Query(query_id, text)


def _load_jsonl(path: Path, parse: Callable[[dict], Document | Query | str],
                log: _ProblemLog) -> dict[str, Document | Query]:
    """Items by id in file order; malformed and duplicate lines are logged and skipped."""
    items: dict[str, Document | Query] = {}
    for line_no, text in _read_lines(path):
        if text is None:
            log.add(path.name, "bad_encoding", line_no)
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):
            log.add(path.name, "bad_json", line_no)
            continue
        item = parse(obj)
        if isinstance(item, str):
            log.add(path.name, item, line_no)
            continue
        item_id = item.doc_id if isinstance(item, Document) else item.query_id
        if item_id in items:
            log.add(path.name, "duplicate_id", line_no)
            continue
        items[item_id] = item
    return items


def split_qrels_line(line: str) -> list[str]:
    """Columns of a qrels line: tab-separated as BEIR writes them, or whitespace when there is no tab."""
    line = line.rstrip("\r\n")
    return [c.strip() for c in line.split("\t")] if "\t" in line else line.split()


def parse_qrels_fields(fields: list[str]) -> tuple[str, str, int] | str:
    """(query_id, doc_id, grade) from the columns of a qrels line, or the problem kind."""
    if len(fields) != 3:
        return "wrong_columns"
    query_id, doc_id, grade = fields
    if not query_id or not doc_id:
        return "missing_id"
    if not _INTEGER.fullmatch(grade):  # int() would also take "1_0" and " 1"
        return "non_integer_grade"
    return query_id, doc_id, int(grade)


def _load_qrels(path: Path, doc_ids: Mapping[str, object], query_ids: Mapping[str, object],
                log: _ProblemLog) -> dict[str, dict[str, int]]:
    """Qrels restricted to known queries and documents; the rest is logged and dropped."""
    name = f"{QRELS_DIR}/{path.name}"
    qrels: dict[str, dict[str, int]] = {}
    first = True
    for line_no, text in _read_lines(path):
        if text is None:
            log.add(name, "bad_encoding", line_no)
            first = False
            continue
        fields = split_qrels_line(text)
        entry = parse_qrels_fields(fields)
        # A header is a first line whose grade column is not a number ("query-id corpus-id score").
        if first and entry == "non_integer_grade" and fields[0] not in query_ids:
            first = False
            continue
        first = False
        if isinstance(entry, str):
            log.add(name, entry, line_no)
            continue
        query_id, doc_id, grade = entry
        if query_id not in query_ids:
            log.add(name, "unknown_query", line_no)
        elif doc_id not in doc_ids:
            log.add(name, "unknown_document", line_no)
        elif doc_id in qrels.get(query_id, {}):
            log.add(name, "duplicate_pair", line_no)
        else:
            qrels.setdefault(query_id, {})[doc_id] = grade
    return qrels


def load_beir(directory: str | Path, split: str = "test") -> BeirDataset:
    """Load DIR/corpus.jsonl, DIR/queries.jsonl and DIR/qrels/SPLIT.tsv into a BeirDataset.

    Raises DatasetError when a file is missing, or when nothing usable is left (no document,
    or no query with qrels in the split).
    """
    directory = Path(directory)
    corpus_path, queries_path, qrels_path = dataset_files(directory, split)
    log = _ProblemLog()
    documents = _load_jsonl(corpus_path, parse_document, log)
    all_queries = _load_jsonl(queries_path, parse_query, log)
    qrels = _load_qrels(qrels_path, documents, all_queries, log)
    problems = log.problems()
    details = "".join(f"\n  {p.describe()}" for p in problems)
    if not documents:
        raise DatasetError(f"No usable document in {corpus_path}; each line must be a JSON "
                           f'object with "_id" and a non-empty "title" or "text".{details}')
    queries = {qid: q for qid, q in all_queries.items() if qid in qrels}
    if not queries:
        raise DatasetError(f"No query of {queries_path} has a usable judgement in {qrels_path}; "
                           f"check that the ids in both files match.{details}")
    # Qrels follow the order of queries.jsonl, so that the dataset does not depend on qrels order.
    qrels = {qid: qrels[qid] for qid in queries}
    return BeirDataset(directory, split, documents, queries, qrels, problems,
                       queries_outside_split=len(all_queries) - len(queries))


# ----------------------------------------------------------------------------- sampling


def seeded_order(ids: list[str] | set[str], seed: int, salt: str) -> list[str]:
    """IDS sorted by sha256(salt:seed:id): a seeded shuffle independent of input order.

    Unlike random.sample, a larger sample with the same seed contains every smaller one,
    and the result does not depend on the Python version.
    """
    def key(item_id: str) -> tuple[str, str]:
        digest = hashlib.sha256(f"{salt}:{seed}:{item_id}".encode("utf-8")).hexdigest()
        return digest, item_id
    return sorted(ids, key=key)


def choose_queries(qrels: Mapping[str, Mapping[str, int]], max_queries: int | None,
                   seed: int) -> set[str]:
    """Up to MAX_QUERIES query ids, seeded, among those with at least one relevant document."""
    eligible = [qid for qid, docs in qrels.items() if any(is_relevant(g) for g in docs.values())]
    ordered = seeded_order(eligible, seed, "query")
    return set(ordered if max_queries is None else ordered[:max_queries])


def choose_documents(doc_ids: list[str], gold: set[str], max_corpus_docs: int | None,
                     seed: int) -> set[str]:
    """All GOLD documents, then seeded distractors from DOC_IDS up to MAX_CORPUS_DOCS in total."""
    if max_corpus_docs is None:
        return set(doc_ids)
    others = seeded_order([d for d in doc_ids if d not in gold], seed, "document")
    return gold | set(others[: max(0, max_corpus_docs - len(gold))])


def _check_limit(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be a positive integer or None (no limit), got {value!r}")


def sample_dataset(ds: BeirDataset, max_queries: int | None, max_corpus_docs: int | None,
                   seed: int) -> tuple[BeirDataset, SampleInfo]:
    """A smaller dataset: MAX_QUERIES seeded queries with a relevant document, and a corpus of
    all their relevant documents plus seeded distractors up to MAX_CORPUS_DOCS.

    None means no limit. When MAX_CORPUS_DOCS is below the number of relevant documents, all
    relevant documents are kept anyway (SampleInfo says so). Dicts keep the order of DS.
    """
    _check_limit("max_queries", max_queries)
    _check_limit("max_corpus_docs", max_corpus_docs)
    chosen = choose_queries(ds.qrels, max_queries, seed)
    gold = {d for qid in chosen for d, g in ds.qrels[qid].items() if is_relevant(g)}
    kept_docs = choose_documents(list(ds.documents), gold, max_corpus_docs, seed)
    documents = {d: doc for d, doc in ds.documents.items() if d in kept_docs}
    queries = {q: query for q, query in ds.queries.items() if q in chosen}
    qrels = {q: {d: g for d, g in ds.qrels[q].items() if d in kept_docs} for q in queries}
    n_eligible = sum(any(is_relevant(g) for g in docs.values()) for docs in ds.qrels.values())
    info = SampleInfo(
        seed=seed, max_queries=max_queries, max_corpus_docs=max_corpus_docs,
        n_queries=len(queries), n_queries_total=len(ds.queries),
        n_queries_without_relevant=len(ds.queries) - n_eligible,
        n_documents=len(documents), n_documents_total=len(ds.documents),
        n_relevant_documents=len(gold),
        limit_raised_for_relevant=max_corpus_docs is not None and len(gold) > max_corpus_docs,
    )
    sampled = BeirDataset(ds.path, ds.split, documents, queries, qrels, ds.problems,
                          ds.queries_outside_split)
    return sampled, info


# ----------------------------------------------------------------------------- fingerprint


def dataset_fingerprint(directory: str | Path, split: str = "test", max_queries: int | None = None,
                        max_corpus_docs: int | None = None, seed: int = 0) -> str:
    """Short hex hash of the split's three files (sha256 of their content) and the sample settings.

    Content, not size and mtime, so that a copied or touched folder keeps its cache and an
    edited one does not. The seed is left out when nothing is sampled, since it changes nothing.
    """
    _check_limit("max_queries", max_queries)
    _check_limit("max_corpus_docs", max_corpus_docs)
    digest = hashlib.sha256(FINGERPRINT_VERSION.encode("utf-8"))
    for path in dataset_files(directory, split):
        # Name and length frame each file, so that bytes cannot move from one file to the next.
        digest.update(f"\0{path.name}\0{path.stat().st_size}\0".encode("utf-8"))
        with path.open("rb") as handle:
            while chunk := handle.read(HASH_CHUNK_BYTES):
                digest.update(chunk)
    sampled = max_queries is not None or max_corpus_docs is not None
    settings = {"split": split, "max_queries": max_queries, "max_corpus_docs": max_corpus_docs,
                "seed": seed if sampled else None}
    digest.update(json.dumps(settings, sort_keys=True).encode("utf-8"))
    return digest.hexdigest()[:FINGERPRINT_LENGTH]


# ----------------------------------------------------------------------------- TREC runs


def trec_order(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    """(doc_id, score) by score descending, ties by doc id descending: the order trec_eval
    uses (comp_sim_docno in trec_eval's form_res_rels.c), whatever the rank column says."""
    return sorted(((d, float(s)) for d, s in scores.items()),
                  key=lambda item: (item[1], item[0]), reverse=True)


def format_score(score: float) -> str:
    """repr of the float: the shortest text that reads back as the same double.

    "%.6f" would turn 0.1234564 and 0.1234561 into the same 0.123456, and trec_eval would
    then break that new tie by doc id, reordering what the ranks column says.
    """
    return repr(float(score))


def natural_key(item_id: str) -> tuple[tuple[str | int, ...], str]:
    """Sort key putting digit runs in numeric order: "q2" before "q10", "9" before "10".

    re.split with a group alternates text and digits, so ints are only compared with ints.
    """
    parts = re.split(r"(\d+)", item_id)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), item_id


def _check_token(what: str, value: str) -> None:
    if not value or any(c.isspace() for c in value):
        raise RunFormatError(f"{what} {value!r} cannot be written to a TREC run: it must be "
                             f"non-empty and contain no whitespace")


def write_trec_run(path: str | Path, run: Mapping[str, Mapping[str, float]], tag: str) -> None:
    """Write RUN as "qid Q0 docid rank score tag" lines (render_trec_run)."""
    text = render_trec_run(run, tag)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def render_trec_run(run: Mapping[str, Mapping[str, float]], tag: str) -> str:
    """RUN as "qid Q0 docid rank score tag" lines, ranks 1-based in trec_order.

    Queries are written in natural id order so that the file diffs well; a query without
    documents has no line (TREC runs cannot express it). NaN scores are refused.
    """
    _check_token("Run tag", tag)
    lines = []
    for query_id in sorted(run, key=natural_key):
        _check_token("Query id", query_id)
        for rank, (doc_id, score) in enumerate(trec_order(run[query_id]), start=1):
            _check_token("Document id", doc_id)
            if math.isnan(score):
                raise RunFormatError(f"Score of document {doc_id!r} for query {query_id!r} is "
                                     f"NaN; a TREC run needs a comparable number")
            lines.append(f"{query_id} {TREC_Q0} {doc_id} {rank} {format_score(score)} {tag}\n")
    return "".join(lines)


def render_trec_qrels(qrels: Mapping[str, Mapping[str, int]]) -> str:
    """QRELS as trec_eval reads them: "qid 0 docid grade" lines, queries in natural id order, documents sorted."""
    lines = []
    for query_id in sorted(qrels, key=natural_key):
        _check_token("Query id", query_id)
        for doc_id, grade in sorted(qrels[query_id].items()):
            _check_token("Document id", doc_id)
            lines.append(f"{query_id} 0 {doc_id} {int(grade)}\n")
    return "".join(lines)


def read_trec_run(path: str | Path) -> dict[str, dict[str, float]]:
    """A TREC run file as {query_id: {doc_id: score}}; the rank column is ignored, as trec_eval does."""
    path = Path(path)
    run: dict[str, dict[str, float]] = {}
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 6:
                raise RunFormatError(f"{path}:{line_no}: expected 6 columns "
                                     f"'qid Q0 docid rank score tag', got {len(fields)}: {line!r}")
            query_id, _, doc_id, _, score, _ = fields
            try:
                value = float(score)
            except ValueError:
                raise RunFormatError(f"{path}:{line_no}: score {score!r} is not a number") from None
            docs = run.setdefault(query_id, {})
            if doc_id in docs:
                raise RunFormatError(f"{path}:{line_no}: document {doc_id!r} appears twice for "
                                     f"query {query_id!r}; trec_eval refuses such runs")
            docs[doc_id] = value
    return run


def _plural(n: int, word: str, plural: str | None = None) -> str:
    """ "1 document", "1,000 documents"."""
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"
