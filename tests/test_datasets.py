"""Tests for beir_data: loading, malformed lines, sampling, fingerprint and TREC run files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from localrag.datasets.beir import (BeirDataset, DatasetError, Document, LoadProblem, Query, RunFormatError,
                                    available_splits, dataset_fingerprint, load_beir, natural_key, parse_qrels_fields,
                                    read_trec_run, sample_dataset, trec_order, write_trec_run)

# ----------------------------------------------------------------------------- fixtures

DOCS = [
    {"_id": "d1", "title": "Solarzellen", "text": "Photovoltaic cells turn light into current.",
     "metadata": {"source": "solar.pdf", "page": 3}},
    {"_id": "d2", "text": "Inverters convert direct current to alternating current."},
    {"_id": "d3", "title": "", "text": "Wind turbines have three blades.", "url": "http://w"},
    {"_id": "d4", "text": "Hydro power uses dams."},
    {"_id": "d5", "text": "Batteries store energy chemically."},
    {"_id": "d6", "text": "Lithium-ion cells degrade with heat."},
    {"_id": "d7", "text": "Pumped storage lifts water uphill."},
    {"_id": "d8", "text": "Coal plants emit CO2."},
    {"_id": "d9", "text": "Nuclear plants split uranium."},
    {"_id": "d10", "text": "Geothermal heat comes from the earth."},
]
QUERIES = [
    {"_id": "q1", "text": "Wie funktionieren Solarzellen?", "metadata": {}},
    {"_id": "q2", "text": "How do wind turbines work?"},
    {"_id": "q3", "text": "How is energy stored?"},
    {"_id": "q4", "text": "Is coal clean?"},
    {"_id": "q5", "text": "A query of the train split only"},
]
# Header line, grades 2, 1 and 0; q4 has only a grade-0 judgement; q5 only appears in train.
QRELS_TEST = ("query-id\tcorpus-id\tscore\n"
              "q1\td1\t2\nq1\td2\t1\n"
              "q2\td3\t1\nq2\td4\t0\n"
              "q3\td5\t2\nq3\td6\t1\nq3\td7\t1\n"
              "q4\td8\t0\n")
QRELS_TRAIN = "q5\td9\t1\n"


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _make_beir(root: Path, corpus: str | bytes, queries: str, qrels: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    data = corpus if isinstance(corpus, bytes) else corpus.encode("utf-8")
    (root / "corpus.jsonl").write_bytes(data)
    (root / "queries.jsonl").write_text(queries, encoding="utf-8")
    (root / "qrels").mkdir(exist_ok=True)
    for split, text in qrels.items():
        (root / "qrels" / f"{split}.tsv").write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def beir_dir(tmp_path: Path) -> Path:
    """A clean 10-document BEIR folder with splits test and train."""
    return _make_beir(tmp_path / "energy", _jsonl(DOCS), _jsonl(QUERIES),
                      {"test": QRELS_TEST, "train": QRELS_TRAIN})


@pytest.fixture
def dataset(beir_dir: Path) -> BeirDataset:
    return load_beir(beir_dir, "test")


# ----------------------------------------------------------------------------- loading


def test_load_exact_shapes(dataset: BeirDataset, beir_dir: Path) -> None:
    assert dataset.path == beir_dir and dataset.split == "test" and dataset.name == "energy"
    assert list(dataset.documents) == [f"d{i}" for i in range(1, 11)]  # file order
    assert dataset.documents["d1"] == Document(
        "d1", "Solarzellen", "Photovoltaic cells turn light into current.",
        {"source": "solar.pdf", "page": 3})
    # No title -> "", no metadata -> {}; an unknown top-level key lands in metadata.
    assert dataset.documents["d2"] == Document(
        "d2", "", "Inverters convert direct current to alternating current.", {})
    assert dataset.documents["d3"].metadata == {"url": "http://w"}
    # q5 has qrels only in train, so it is not part of the test split.
    assert dataset.queries == {
        "q1": Query("q1", "Wie funktionieren Solarzellen?"),
        "q2": Query("q2", "How do wind turbines work?"),
        "q3": Query("q3", "How is energy stored?"),
        "q4": Query("q4", "Is coal clean?"),
    }
    assert dataset.queries_outside_split == 1
    # The header line is not data; grades 2, 1 and 0 are kept as written.
    assert dataset.qrels == {
        "q1": {"d1": 2, "d2": 1},
        "q2": {"d3": 1, "d4": 0},
        "q3": {"d5": 2, "d6": 1, "d7": 1},
        "q4": {"d8": 0},
    }
    assert dataset.problems == ()
    # 8 judgements, of which 6 have grade >= 1.
    assert dataset.describe() == "energy (test): 10 documents, 4 queries, 8 judgements (6 relevant)"


def test_load_other_split_and_no_header(beir_dir: Path) -> None:
    ds = load_beir(beir_dir, "train")  # train.tsv has no header line
    assert ds.qrels == {"q5": {"d9": 1}}
    assert list(ds.queries) == ["q5"] and ds.queries_outside_split == 4


def test_first_line_with_known_query_and_bad_grade_is_not_a_header(tmp_path: Path) -> None:
    # Trap: "q1 d1 high" looks like a header (non-integer grade) but names a known query.
    root = _make_beir(tmp_path / "ds", _jsonl(DOCS), _jsonl(QUERIES),
                      {"test": "q1\td1\thigh\nq1\td2\t1\n"})
    ds = load_beir(root, "test")
    assert ds.qrels == {"q1": {"d2": 1}}
    assert ds.problems == (LoadProblem("qrels/test.tsv", "non_integer_grade", 1, (1,)),)


BAD_JSON_TAIL = ["{oops"] * 7  # corpus lines 13..19


def _malformed_dir(tmp_path: Path) -> Path:
    corpus_lines = [
        json.dumps({"_id": "d1", "text": "valid one"}).encode(),           # 1
        b"{bad json",                                                       # 2 bad_json
        json.dumps({"title": "x", "text": "no id"}).encode(),              # 3 missing_id
        json.dumps({"_id": "d2", "title": "", "text": "  "}).encode(),     # 4 empty_text
        json.dumps({"_id": "d1", "text": "duplicate"}).encode(),           # 5 duplicate_id
        b"   ",                                                             # 6 blank: ignored
        b"[1, 2]",                                                          # 7 bad_json (no object)
        json.dumps({"_id": "d3", "text": 5}).encode(),                     # 8 wrong_type
        json.dumps({"_id": "d4", "title": "Only a title"}).encode(),       # 9 valid (title only)
        b'{"_id": "d5", "text": "caf\xe9"}',                                # 10 bad_encoding (latin-1)
        json.dumps({"_id": True, "text": "bool id"}).encode(),             # 11 missing_id
        json.dumps({"_id": 7, "text": "integer id"}).encode(),             # 12 valid, id "7"
    ] + [s.encode() for s in BAD_JSON_TAIL]                                 # 13..19 bad_json
    queries = "\n".join([
        json.dumps({"_id": "q1", "text": "first"}),                         # 1
        json.dumps({"_id": "q2", "text": ""}),                              # 2 empty_text
        json.dumps({"_id": "q1", "text": "again"}),                         # 3 duplicate_id
        json.dumps({"_id": "q3", "text": "third"}),                         # 4
        json.dumps({"_id": "", "text": "no id"}),                           # 5 missing_id
    ]) + "\n"
    qrels = "".join([
        "q1\td1\t1\n",      # 1 kept (first line is data, not a header)
        "q1\td4\t2\n",      # 2 kept
        "q1\td1\t2\n",      # 3 duplicate_pair: first grade 1 stays
        "q3\t7\t1\n",       # 4 kept: the integer _id 7 became "7"
        "q1\td1\n",         # 5 wrong_columns
        "q1\td4\t1.5\n",    # 6 non_integer_grade
        "q9\td1\t1\n",      # 7 unknown_query
        "q3\tnope\t1\n",    # 8 unknown_document
        "q2\td1\t1\n",      # 9 unknown_query: q2 was skipped for its empty text
        "q1 d4 0 1\n",      # 10 wrong_columns (4 whitespace-separated columns)
        "q3\td4\t1_0\n",    # 11 non_integer_grade, although int("1_0") == 10
        "q3\t\t1\n",        # 12 missing_id
    ])
    return _make_beir(tmp_path / "bad", b"\n".join(corpus_lines) + b"\n", queries,
                      {"test": qrels})


def test_malformed_lines_counted_with_first_line_numbers(tmp_path: Path) -> None:
    ds = load_beir(_malformed_dir(tmp_path), "test")
    assert list(ds.documents) == ["d1", "d4", "7"]
    assert ds.documents["d1"].text == "valid one"  # the duplicate on line 5 did not win
    assert ds.documents["d4"] == Document("d4", "Only a title", "", {})
    assert list(ds.queries) == ["q1", "q3"]
    assert ds.qrels == {"q1": {"d1": 1, "d4": 2}, "q3": {"7": 1}}
    problems = {(p.file, p.kind): (p.count, p.first_lines) for p in ds.problems}
    assert problems == {
        # 2 + 7 bad JSON lines, only the first 5 line numbers are kept.
        ("corpus.jsonl", "bad_json"): (9, (2, 7, 13, 14, 15)),
        ("corpus.jsonl", "missing_id"): (2, (3, 11)),
        ("corpus.jsonl", "empty_text"): (1, (4,)),
        ("corpus.jsonl", "duplicate_id"): (1, (5,)),
        ("corpus.jsonl", "wrong_type"): (1, (8,)),
        ("corpus.jsonl", "bad_encoding"): (1, (10,)),
        ("queries.jsonl", "empty_text"): (1, (2,)),
        ("queries.jsonl", "duplicate_id"): (1, (3,)),
        ("queries.jsonl", "missing_id"): (1, (5,)),
        ("qrels/test.tsv", "duplicate_pair"): (1, (3,)),
        ("qrels/test.tsv", "wrong_columns"): (2, (5, 10)),
        ("qrels/test.tsv", "non_integer_grade"): (2, (6, 11)),
        ("qrels/test.tsv", "unknown_query"): (2, (7, 9)),
        ("qrels/test.tsv", "unknown_document"): (1, (8,)),
        ("qrels/test.tsv", "missing_id"): (1, (12,)),
    }
    lines = ds.problem_lines()
    assert "corpus.jsonl: 9 lines skipped, not a JSON object (lines 2, 7, 13, 14, 15, ...)" in lines
    assert ("qrels/test.tsv: 1 line skipped, document id not in corpus.jsonl (dropped) (line 8)"
            in lines)


def test_a_query_without_visible_text_or_with_a_lone_surrogate_is_skipped_and_counted(tmp_path: Path) -> None:
    """The retriever's rule for a query's text (localrag/text/query.py): such a query ended the run in the
    tokenizer (a lone surrogate: TypeError) or was searched for (zero-width characters)."""
    queries = "".join(line + "\n" for line in ['{"_id": "q1", "text": "first"}', '{"_id": "q2", "text": "\\u200b"}',
                                                 '{"_id": "q3", "text": "x \\ud800"}'])
    root = _make_beir(tmp_path / "odd", _jsonl(DOCS), queries, {"test": "q1\td1\t1\nq2\td1\t1\nq3\td1\t1\n"})
    ds = load_beir(root, "test")
    assert list(ds.queries) == ["q1"] and ds.qrels == {"q1": {"d1": 1}}
    problems = {(p.file, p.kind): (p.count, p.first_lines) for p in ds.problems}
    assert problems == {("queries.jsonl", "no_visible_text"): (1, (2,)),
                        ("queries.jsonl", "lone_surrogate"): (1, (3,)),
                        ("qrels/test.tsv", "unknown_query"): (2, (2, 3))}
    assert "queries.jsonl: 1 line skipped, text with a lone surrogate, not valid Unicode (line 3)" in ds.problem_lines()


def test_parse_qrels_fields() -> None:
    assert parse_qrels_fields(["q", "d", "-1"]) == ("q", "d", -1)
    assert parse_qrels_fields(["q", "d", " 1"]) == "non_integer_grade"
    assert parse_qrels_fields(["q", "d"]) == "wrong_columns"


def test_missing_folder_and_files_name_path_and_layout(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="Dataset folder not found") as err:
        load_beir(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere" / "corpus.jsonl") in str(err.value)
    assert "qrels/test.tsv" in str(err.value)
    root = tmp_path / "half"
    root.mkdir()
    (root / "corpus.jsonl").write_text(_jsonl(DOCS))
    with pytest.raises(DatasetError, match="Missing file: .*queries.jsonl"):
        load_beir(root)
    (root / "queries.jsonl").write_text(_jsonl(QUERIES))
    with pytest.raises(DatasetError, match=r"No qrels/\*\.tsv file found"):
        load_beir(root)


def test_missing_split_lists_existing_splits(beir_dir: Path) -> None:
    assert available_splits(beir_dir) == ["test", "train"]
    with pytest.raises(DatasetError) as err:
        load_beir(beir_dir, "dev")
    message = str(err.value)
    assert "No qrels for split 'dev'" in message
    assert str(beir_dir / "qrels" / "dev.tsv") in message
    assert "Splits present in" in message and "test, train" in message


def test_nothing_usable_raises(tmp_path: Path) -> None:
    root = _make_beir(tmp_path / "empty", "{oops\n", _jsonl(QUERIES), {"test": "q1\td1\t1\n"})
    with pytest.raises(DatasetError, match="No usable document"):
        load_beir(root)
    root = _make_beir(tmp_path / "unjudged", _jsonl(DOCS), _jsonl(QUERIES),
                      {"test": "qX\td1\t1\n"})
    with pytest.raises(DatasetError, match="No query .* has a usable judgement"):
        load_beir(root)


# ----------------------------------------------------------------------------- sampling

# Queries with a relevant document: q1, q2, q3 (q4 has only grade 0).
# Their relevant documents: q1 -> d1, d2; q2 -> d3; q3 -> d5, d6, d7: 6 gold documents.
GOLD = {"d1", "d2", "d3", "d5", "d6", "d7"}


def test_sample_all_eligible_queries_keeps_gold_and_respects_m(dataset: BeirDataset) -> None:
    sampled, info = sample_dataset(dataset, None, 8, seed=0)
    assert list(sampled.queries) == ["q1", "q2", "q3"]
    assert GOLD <= set(sampled.documents)
    assert len(sampled.documents) == 8  # 6 gold + 2 distractors out of d4, d8, d9, d10
    assert set(sampled.documents) - GOLD <= {"d4", "d8", "d9", "d10"}
    assert list(sampled.documents) == [d for d in dataset.documents if d in sampled.documents]
    assert info.describe() == ("sample: 3 of 4 queries (1 without a relevant document left out), "
                               "8 of 10 documents (all 6 relevant documents included), seed 0")


def test_sample_with_m_equal_to_gold_drops_judged_irrelevant_document(dataset: BeirDataset) -> None:
    sampled, info = sample_dataset(dataset, None, 6, seed=3)
    assert set(sampled.documents) == GOLD
    # d4 (grade 0 for q2) is not in the corpus, so its judgement goes too.
    assert sampled.qrels == {"q1": {"d1": 2, "d2": 1}, "q2": {"d3": 1},
                             "q3": {"d5": 2, "d6": 1, "d7": 1}}
    assert not info.limit_raised_for_relevant


def test_sample_limit_below_gold_keeps_all_gold(dataset: BeirDataset) -> None:
    sampled, info = sample_dataset(dataset, None, 4, seed=0)
    assert set(sampled.documents) == GOLD
    assert info.limit_raised_for_relevant
    assert info.describe() == ("sample: 3 of 4 queries (1 without a relevant document left out), "
                               "6 of 10 documents (limit 4 raised to keep all 6 relevant "
                               "documents), seed 0")


def test_sample_queries_reproducible_nested_and_seed_dependent(dataset: BeirDataset) -> None:
    one, info = sample_dataset(dataset, 1, 5, seed=0)
    again, _ = sample_dataset(dataset, 1, 5, seed=0)
    assert one == again
    (qid,) = one.queries
    gold = {d for d, g in dataset.qrels[qid].items() if g >= 1}
    assert gold <= set(one.documents) and len(one.documents) == 5
    assert info.n_relevant_documents == len(gold)
    # A larger sample with the same seed contains the smaller one.
    two, _ = sample_dataset(dataset, 2, 5, seed=0)
    assert set(one.queries) <= set(two.queries) and len(two.queries) == 2
    # Over ten seeds, a query sample of 1 out of 3 cannot always be the same query
    # unless the seed is ignored; the same holds for the 4 distractors out of 7 documents.
    query_picks = {tuple(sample_dataset(dataset, 1, None, s)[0].queries) for s in range(10)}
    assert len(query_picks) > 1
    doc_picks = {frozenset(sample_dataset(dataset, 1, 5, s)[0].documents) for s in range(10)}
    assert len(doc_picks) > 1


def test_sample_independent_of_dict_order(dataset: BeirDataset) -> None:
    reversed_ds = BeirDataset(
        dataset.path, dataset.split,
        dict(reversed(dataset.documents.items())), dict(reversed(dataset.queries.items())),
        {q: dict(reversed(d.items())) for q, d in reversed(dataset.qrels.items())})
    for seed in range(5):
        a, _ = sample_dataset(dataset, 2, 7, seed)
        b, _ = sample_dataset(reversed_ds, 2, 7, seed)
        assert set(a.queries) == set(b.queries)
        assert set(a.documents) == set(b.documents)


def test_no_sample_sentence_and_bad_limits(dataset: BeirDataset) -> None:
    _, info = sample_dataset(dataset, None, None, seed=0)
    assert info.describe() == ("no sample: 3 of 4 queries (1 without a relevant document left "
                               "out), all 10 documents")
    _, info = sample_dataset(dataset, 50, 20, seed=1)  # limits above the sizes
    assert info.describe() == ("sample: 3 of 4 queries (1 without a relevant document left out), "
                               "10 of 10 documents (all 6 relevant documents included), seed 1")
    with pytest.raises(ValueError, match="max_queries must be a positive integer"):
        sample_dataset(dataset, 0, None, seed=0)


# ----------------------------------------------------------------------------- fingerprint


def test_fingerprint_depends_on_content_and_settings(beir_dir: Path, tmp_path: Path) -> None:
    base = dataset_fingerprint(beir_dir, "test", 2, 8, 0)
    assert len(base) == 16 and all(c in "0123456789abcdef" for c in base)
    copy = _make_beir(tmp_path / "copy", _jsonl(DOCS), _jsonl(QUERIES),
                      {"test": QRELS_TEST, "train": QRELS_TRAIN})
    os.utime(copy / "corpus.jsonl", (0, 0))  # another folder and mtime, same content
    assert dataset_fingerprint(copy, "test", 2, 8, 0) == base
    assert dataset_fingerprint(beir_dir, "test", 2, 8, 1) != base
    assert dataset_fingerprint(beir_dir, "test", 3, 8, 0) != base
    assert dataset_fingerprint(beir_dir, "test", 2, None, 0) != base
    assert dataset_fingerprint(beir_dir, "train", 2, 8, 0) != base
    # The seed changes nothing when nothing is sampled.
    assert dataset_fingerprint(beir_dir, "test", seed=0) == dataset_fingerprint(beir_dir, "test",
                                                                                seed=9)
    (copy / "qrels" / "test.tsv").write_text(QRELS_TEST.replace("q4\td8\t0", "q4\td8\t1"))
    assert dataset_fingerprint(copy, "test", 2, 8, 0) != base


# ----------------------------------------------------------------------------- TREC runs

# Trap: dict order disagrees with scores; dA and dB tie at 0.5 (trec_eval puts dB first:
# doc id descending); dD and dE differ only in the 7th decimal, where "%.6f" would make a tie.
RUN = {
    "q10": {"x": 1.0},
    "q2": {"dA": 0.5, "dD": 0.1234564, "dB": 0.5, "dE": 0.1234561, "dC": 0.9},
    "q1": {},
}


def test_trec_order_ties_by_doc_id_descending() -> None:
    assert trec_order(RUN["q2"]) == [("dC", 0.9), ("dB", 0.5), ("dA", 0.5),
                                     ("dD", 0.1234564), ("dE", 0.1234561)]


def test_write_trec_run_lines(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "r.trec"
    write_trec_run(path, RUN, "bm25")
    lines = path.read_text().splitlines()
    # q1 has no documents, so no line; q2 before q10 (natural order).
    assert lines == [
        "q2 Q0 dC 1 0.9 bm25",
        "q2 Q0 dB 2 0.5 bm25",
        "q2 Q0 dA 3 0.5 bm25",
        "q2 Q0 dD 4 0.1234564 bm25",
        "q2 Q0 dE 5 0.1234561 bm25",
        "q10 Q0 x 1 1.0 bm25",
    ]
    assert all(len(line.split()) == 6 for line in lines)


def test_trec_round_trip_exact_floats(tmp_path: Path) -> None:
    run = {"7": {"a": 1 / 3, "b": 0.1 + 0.2, "c": -2.5e-12, "d": 3}, "q": {"z": 0.0}}
    path = tmp_path / "r.trec"
    write_trec_run(path, run, "tag")
    assert read_trec_run(path) == run  # 1/3 and 0.30000000000000004 come back bit for bit


def test_read_trec_run_ignores_rank_column(tmp_path: Path) -> None:
    path = tmp_path / "r.trec"
    # The rank column claims d2 is first, but its score is lower; scores are what count.
    path.write_text("q1 Q0 d2 1 0.1 t\nq1 Q0 d1 2 0.7 t\n\n")
    run = read_trec_run(path)
    assert run == {"q1": {"d2": 0.1, "d1": 0.7}}
    assert [d for d, _ in trec_order(run["q1"])] == ["d1", "d2"]


def test_trec_errors(tmp_path: Path) -> None:
    path = tmp_path / "r.trec"
    with pytest.raises(RunFormatError, match="NaN"):
        write_trec_run(path, {"q": {"d": float("nan")}}, "t")
    with pytest.raises(RunFormatError, match="no whitespace"):
        write_trec_run(path, {"q": {"doc 1": 1.0}}, "t")
    with pytest.raises(RunFormatError, match="no whitespace"):
        write_trec_run(path, {"q": {"d": 1.0}}, "my tag")
    path.write_text("q1 Q0 d1 1 0.5\n")
    with pytest.raises(RunFormatError, match=r"r.trec:1: expected 6 columns"):
        read_trec_run(path)
    path.write_text("q1 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.4 t\n")
    with pytest.raises(RunFormatError, match=r"r.trec:2: document 'd1' appears twice"):
        read_trec_run(path)


def test_natural_key() -> None:
    assert sorted(["q10", "q2", "10", "9", "a"], key=natural_key) == ["9", "10", "a", "q2", "q10"]
