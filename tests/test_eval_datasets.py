"""BEIR dataset evaluation through the CLI: document-level rankings, collapse of chunks, metrics, sampling,
malformed lines, output files and the dataset index cache.

The dataset (written by `write_dataset`) has 11 documents; doc1, doc2 and doc6 are longer than the 200-character
chunks the shared index uses, so they have 2 chunks each (14 chunks). doc11 is a byte-identical copy of doc9, so
both retrievers give them equal scores: a tie. Hybrid orders, chunk level -> document level (best chunk, cut at 5):

  q1 "How does melting ice raise the sea level?"
       chunks [doc1#1, doc1#0, doc2#0, doc6#1, doc6#0, doc2#1, doc5, doc9, ...] -> [doc1, doc2, doc6, doc5, doc9]
  q2 "Which insects carry pollen between flowers?"  -> [doc8, doc7, doc1, doc11, doc9]
  q3 "What is sweet and made by insects?"          -> [doc8, doc10, doc7, doc5, doc6]
  q4 "How do I repair a flat bicycle tyre?"        -> [doc6, doc2, doc1, doc10, doc11]   (doc6 has chunks 1 and 2)
  q5 "How much caffeine is in a cup?"              -> [doc3, doc4, doc2, doc10, doc1]
  q7 "How did the Romans bring water to their cities?"
       dense: doc9 and doc11 have the same cosine, and exact search orders equal similarities by chunk id, which
       puts doc11 first; BM25 ranks doc11 first too, so the relevant doc11 is first (2/61) and doc9 second.
  Equal scores elsewhere (doc9/doc11 further down, a reranker's equal scores for the twins) are kept in the
  order retrieved and made strictly decreasing, so trec_eval, which orders ties by doc id descending ("doc9" >
  "doc11"), scores the run file in that order (test_run_file_reproduces_the_json_metrics_with_trec_eval).
  q6 "Who invented the telephone?" has no relevant document (doc99 is not in the corpus, doc10 is graded 0).
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from langchain_core.documents import Document

from localrag.datasets import beir
import eval_retrieval as er
from localrag.runs import plan
from localrag.runs.defaults import EvalOptions
from localrag.runs.options import resolve
from localrag.evaluation import scoring as ev
import local_rag
from localrag.evaluation import metrics as rm
from local_rag import LocalRAG

DOCS = {
    "doc1": ("Glaciers", "Mountain glaciers are shrinking in most regions of the world. As the air warms, the ice "
             "melts faster in summer than new snow can replace it in winter. Meltwater from glaciers and ice sheets "
             "flows into the ocean and raises the global sea level by a few millimetres every year, which threatens "
             "low coasts."),
    "doc2": ("Volcanoes", "A volcano erupts when molten rock, called magma, rises through cracks in the crust. "
             "Explosive eruptions throw ash high into the sky. Lava flows can bury villages, and volcanic ash can "
             "cool the climate for a year or two by blocking sunlight."),
    "doc3": ("Coffee", "Coffee beans are the roasted seeds of the coffee plant. A cup of brewed coffee holds about "
             "ninety milligrams of caffeine."),
    "doc4": ("Tea", "Black and green tea come from the leaves of the same plant. A cup of tea holds less caffeine "
             "than coffee, around forty milligrams."),
    "doc5": ("Chess openings", "The Sicilian Defence and the Queen's Gambit are popular chess openings. Players "
             "study them to gain control of the centre."),
    "doc6": ("Bicycle repair", "To fix a flat tyre, remove the wheel and lever the tyre off the rim. Find the hole "
             "in the inner tube by pumping it up and listening for air. Patch the tube or replace it, then refit "
             "the tyre, inflate it to the pressure printed on its side, and check the brakes before riding."),
    "doc7": ("Honey bees", "Honey bees collect nectar from flowers and turn it into honey inside the hive. They "
             "also gather pollen as food for their larvae."),
    "doc8": ("Photosynthesis", "Plants use sunlight, water and carbon dioxide to make sugar. Flowers produce nectar "
             "from this sugar to attract pollinating insects."),
    "doc9": ("Roman aqueducts", "The Romans built aqueducts to carry water from distant springs into their cities, "
             "using a gentle downhill slope over many kilometres."),
    "doc11": ("Roman aqueducts", "The Romans built aqueducts to carry water from distant springs into their "
              "cities, using a gentle downhill slope over many kilometres."),
    "doc10": ("Jazz", "Jazz began in New Orleans in the early twentieth century. Louis Armstrong made the trumpet "
              "solo a central part of the music."),
}
QUERIES = {
    "q1": "How does melting ice raise the sea level?",
    "q2": "Which insects carry pollen between flowers?",
    "q3": "What is sweet and made by insects?",
    "q7": "How did the Romans bring water to their cities?",
    "q4": "How do I repair a flat bicycle tyre?",
    "q5": "How much caffeine is in a cup?",
    "q6": "Who invented the telephone?",
}
QRELS = ("query-id\tcorpus-id\tscore\n"  # line 1: header
         "q1\tdoc1\t2\nq1\tdoc2\t0\n"     # lines 2-3: doc2 judged, not relevant
         "q2\tdoc7\t2\nq2\tdoc8\t1\n"     # lines 4-5: graded
         "q3\tdoc7\t1\n"                  # line 6
         "q7\tdoc11\t1\n"                 # line 7: the copy, not the original, is judged relevant
         "q4\tdoc6\t1\n"                  # line 8
         "q5\tdoc3\t1\nq5\tdoc4\t1\n"     # lines 9-10: two relevant documents
         "q6\tdoc99\t1\nq6\tdoc10\t0\n")  # lines 11-12: unknown document (dropped), then a 0 grade
CHUNK_SIZE, CHUNK_OVERLAP = 200, 20  # small chunks, so the long documents split in two
HYBRID_TOP = {
    "q1": ["doc1", "doc2", "doc6", "doc5", "doc11"],
    "q2": ["doc8", "doc7", "doc11", "doc1", "doc9"],
    "q3": ["doc8", "doc10", "doc7", "doc5", "doc6"],
    "q4": ["doc6", "doc2", "doc1", "doc10", "doc11"],
    "q5": ["doc3", "doc4", "doc2", "doc11", "doc10"],
    "q7": ["doc11", "doc9", "doc8", "doc7", "doc6"],
}


def write_dataset(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    lines = [json.dumps({"_id": d, "title": t, "text": x}) for d, (t, x) in DOCS.items()]
    lines.insert(5, "{not json")  # line 6 of corpus.jsonl
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text(QRELS, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, Path]:
    """(BEIR folder "ds", index folder) with the index built once at 200-character chunks."""
    base = tmp_path_factory.mktemp("beir")
    folder = write_dataset(base / "ds")
    data = beir.load_beir(folder)
    rag = LocalRAG(base / "index", reranker_model=None, chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP,
                   quiet=True)
    rag.sync_records([{"doc_id": d.doc_id, "title": d.title, "text": d.text, "metadata": d.metadata}
                      for d in data.documents.values()], progress=False)
    return folder, base / "index"


@pytest.fixture(scope="module")
def hybrid_run(dataset, tmp_path_factory) -> dict:
    """One hybrid run at k = 1, 3, 5 with every output file; returns their paths and the exit code."""
    folder, index = dataset
    out = tmp_path_factory.mktemp("hybrid-out")
    paths = {"report": out / "ds.txt", "json": out / "ds.json", "run": out / "ds.run", "markdown": out / "ds.md",
             "html": out / "ds.html", "csv": out / "ds.csv"}
    # The corpus's ranks and its tie (q7) were worked out by hand for RRF k = 60, Cormack et al.'s constant.
    code = er.main(["--dataset", str(folder), "--index", str(index), "--k", "1,3,5", "--quiet", "--no-compare",
                    "--rrf-k", "60",
                    "--report", str(paths["report"]), "--run-file", str(paths["run"]),
                    "--markdown", str(paths["markdown"]), "--html", str(paths["html"]), "--csv", str(paths["csv"])])
    return {"code": code, "index": index, **paths}


def run(capsys, *argv) -> tuple[int, str, str]:
    code = er.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- collapse of chunks (pure)


def test_collapse_keeps_each_document_once_at_its_best_chunk():
    def chunk(doc_id: str, n: int) -> Document:
        return Document(page_content=f"{doc_id} {n}", metadata={"doc_id": doc_id, "source": doc_id})

    hits = [(chunk("A", 1), 0.9), (chunk("A", 0), 0.8), (chunk("B", 0), 0.7), (chunk("A", 2), 0.6),
            (chunk("C", 0), 0.5)]
    assert ev.collapse_to_documents(hits, depth=5) == {"A": 0.9, "B": 0.7, "C": 0.5}
    assert ev.collapse_to_documents(hits, depth=2) == {"A": 0.9, "B": 0.7}  # A's 3 chunks fill one place
    # PDF chunks have no doc_id: the source names the document.
    pdf = Document(page_content="x", metadata={"source": "a.pdf", "page": 3})
    assert ev.collapse_to_documents([(pdf, 1.0), (pdf, 0.5)], depth=3) == {"a.pdf": 1.0}


# ----------------------------------------------------------------------------- rankings and metrics


def test_chunks_of_one_document_count_once(dataset):
    _, index = dataset
    rag = LocalRAG(index, reranker_model=None, quiet=True, rrf_k=60, rank_by="chunk")  # HYBRID_TOP: k = 60
    assert rag.info["counts"] == {"files": 11, "pages": 11, "chunks": 14}
    hits = rag.retrieve(QUERIES["q1"], k=15, mode="hybrid", rerank=False)
    # doc1's two chunks are the two best chunks; at document level doc1 takes rank 1 only and doc2 rank 2.
    assert [(d.metadata["doc_id"], d.metadata["chunk"]) for d, _ in hits[:3]] == [("doc1", 1), ("doc1", 0),
                                                                                  ("doc2", 0)]
    assert list(ev.collapse_to_documents(hits, 5)) == HYBRID_TOP["q1"]
    # Ranked by page (a record is one page), the list holds each document once, at its best chunk's score.
    pages = LocalRAG(index, reranker_model=None, quiet=True, rrf_k=60, rank_by="page").retrieve(
        QUERIES["q1"], k=15, mode="hybrid", rerank=False)
    assert [(d.metadata["doc_id"], round(s, 9)) for d, s in pages] == \
        [(doc_id, round(s, 9)) for doc_id, s in ev.collapse_to_documents(hits, 15).items()]


def test_exact_document_rankings(hybrid_run):
    assert hybrid_run["code"] == 1  # degraded: the fixture's broken corpus line and unknown document
    payload = json.loads(hybrid_run["json"].read_text(encoding="utf-8"))
    assert payload["kind"] == "dataset"
    tops = {q["query_id"]: [t["doc_id"] for t in q["top"]] for q in payload["per_query"]}
    assert tops == HYBRID_TOP  # q6 (no relevant document) is not evaluated
    for q in payload["per_query"]:
        assert len(set(tops[q["query_id"]])) == 5  # no document twice
    scores = {q["query_id"]: [t["score"] for t in q["top"]] for q in payload["per_query"]}
    assert scores["q1"][0] == round(2 / 61, 6)  # rank 1 in both dense and BM25: 1/61 + 1/61
    assert scores["q7"][:2] == [round(2 / 61, 6), round(2 / 62, 6)]  # doc11 first in both lists, doc9 second
    ranks = {q["query_id"]: q["rank"] for q in payload["per_query"]}
    assert ranks == {"q1": 1, "q2": 1, "q3": 3, "q4": 1, "q5": 1, "q7": 1}
    q2 = next(q for q in payload["per_query"] if q["query_id"] == "q2")
    assert q2["locations"] == [{"doc_id": "doc7", "grade": 2}, {"doc_id": "doc8", "grade": 1}]
    q1 = next(q for q in payload["per_query"] if q["query_id"] == "q1")
    assert q1["locations"] == [{"doc_id": "doc1", "grade": 2}]  # the grade-0 judgement is not a location


def test_metrics_by_hand(hybrid_run):
    payload = json.loads(hybrid_run["json"].read_text(encoding="utf-8"))
    per_query = {q["query_id"]: q["metrics"] for q in payload["per_query"]}
    log2 = math.log2
    # q2: [doc8 (grade 1), doc7 (grade 2)]: the lower grade first. NDCG@1 = 1/2;
    # NDCG@3 = (1 + 2/log2(3)) / (2 + 1/log2(3)) = 2.26186 / 2.63093 = 0.85972. Recall@1 = 1 of 2 relevant.
    ndcg3_q2 = (1 + 2 / log2(3)) / (2 + 1 / log2(3))
    assert per_query["q2"]["ndcg@1"] == pytest.approx(0.5)
    assert per_query["q2"]["ndcg@3"] == pytest.approx(ndcg3_q2)
    assert per_query["q2"]["recall@1"] == pytest.approx(0.5)
    # q3: relevant doc7 at rank 3: NDCG@3 = (1/log2(4)) / 1 = 0.5, MRR 1/3, nothing at rank 1.
    assert per_query["q3"] == pytest.approx({"hit@1": 0, "hit@3": 1, "hit@5": 1, "recall@1": 0, "recall@3": 1,
                                             "recall@5": 1, "ndcg@1": 0, "ndcg@3": 0.5, "ndcg@5": 0.5,
                                             "mrr": 1 / 3})
    # q7: doc11 at rank 1, ahead of its twin: NDCG@3 = 1, MRR 1.
    assert per_query["q7"]["ndcg@3"] == pytest.approx(1.0)
    assert per_query["q7"]["mrr"] == pytest.approx(1.0)
    # q5: both relevant documents first: Recall@1 = 1/2 but NDCG@1 = 1 (the ideal list also starts with grade 1).
    assert (per_query["q5"]["recall@1"], per_query["q5"]["ndcg@1"]) == (0.5, 1.0)
    # Means over the 6 evaluated queries q1, q2, q3, q4, q5, q7:
    assert payload["metrics"] == pytest.approx({
        "hit@1": 5 / 6,                                   # q3 misses rank 1
        "hit@3": 1.0, "hit@5": 1.0,
        "recall@1": (1 + 0.5 + 0 + 1 + 0.5 + 1) / 6,      # = 0.667
        "recall@3": 1.0, "recall@5": 1.0,
        "ndcg@1": (1 + 0.5 + 0 + 1 + 1 + 1) / 6,          # = 0.75
        "ndcg@3": (1 + ndcg3_q2 + 0.5 + 1 + 1 + 1) / 6,   # = 0.8933
        "ndcg@5": (1 + ndcg3_q2 + 0.5 + 1 + 1 + 1) / 6,   # nothing relevant at ranks 4-5
        "mrr": (1 + 1 + 1 / 3 + 1 + 1 + 1) / 6,           # = 0.889
    })
    assert payload["num_queries"] == 6
    assert "precision@1" not in payload["metrics"]


def test_report_notes_malformed_lines(hybrid_run):
    report = hybrid_run["report"].read_text(encoding="utf-8")
    lines = report.splitlines()
    notes = lines[lines.index("Notes") + 1:lines.index("Results") - 1]
    assert notes == [
        "  corpus.jsonl: 1 line skipped, not a JSON object (line 6)",
        "  qrels/test.tsv: 1 line skipped, document id not in corpus.jsonl (dropped) (line 11)",
        "  1 query without any relevant document was skipped",
    ]
    assert "  Dataset:            ds, split test (all queries and documents)" in lines
    assert "  Chunking:           200 characters, overlap 20, chunk headers on" in lines
    assert f"  Index:              {hybrid_run['index']} (11 files, 11 pages, 14 chunks)" in lines
    assert "  Hit@1     0.833" in lines and "  NDCG@3    0.893" in lines and "  MRR       0.889" in lines


def test_broken_lines_degrade_the_run_on_stderr_in_the_status_and_the_exit_code(dataset, tmp_path, capsys):
    folder, index = dataset
    argv = ["--index", index, "--k", "1,3,5", "--quiet", "--no-compare", "--no-rerank"]
    code, _, err = run(capsys, "--dataset", folder, *argv, "--report", tmp_path / "broken.txt")
    assert code == 1
    reason = ("the dataset's files have lines that were skipped or dropped (corpus.jsonl: 1 line skipped, not a "
              "JSON object (line 6); qrels/test.tsv: 1 line skipped, document id not in corpus.jsonl (dropped) "
              "(line 11)): the metrics are not those of the dataset as published; repair the files")
    assert err.splitlines() == [
        "warning: dataset: corpus.jsonl: 1 line skipped, not a JSON object (line 6)",
        "warning: dataset: qrels/test.tsv: 1 line skipped, document id not in corpus.jsonl (dropped) (line 11)",
        "Status: exit 1, evaluated but the run is degraded", f"  degraded: {reason}"]
    status = json.loads((tmp_path / "broken.json").read_text(encoding="utf-8"))["status"]
    assert status["exit_code"] == 1 and status["degraded"] == [reason]
    assert "  degraded: the dataset's files have lines that were skipped or dropped (" in \
        (tmp_path / "broken.txt").read_text(encoding="utf-8")
    # The same dataset repaired: no warning, exit 0.
    clean = tmp_path / "clean"
    shutil.copytree(folder, clean)
    corpus = clean / "corpus.jsonl"
    corpus.write_text("".join(line + "\n" for line in corpus.read_text(encoding="utf-8").splitlines()
                              if line != "{not json"), encoding="utf-8")
    qrels = clean / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text(encoding="utf-8").replace("q6\tdoc99\t1\n", ""), encoding="utf-8")
    code, _, err = run(capsys, "--dataset", clean, *argv, "--report", tmp_path / "clean.txt")
    assert (code, err) == (0, "")


def test_trec_run_file(hybrid_run):
    lines = hybrid_run["run"].read_text(encoding="utf-8").splitlines()
    rows = [line.split() for line in lines]
    assert all(len(row) == 6 and row[1] == "Q0" and row[5] == "localrag-hybrid" for row in rows)
    # 7 queries (q6 is retrieved even though it cannot be scored) x 5 documents, queries in natural order.
    assert len(rows) == 35
    assert [row[0] for row in rows[::5]] == ["q1", "q2", "q3", "q4", "q5", "q6", "q7"]
    for start in range(0, 35, 5):
        assert [int(row[3]) for row in rows[start:start + 5]] == [1, 2, 3, 4, 5]
        scores = [float(row[4]) for row in rows[start:start + 5]]
        assert scores == sorted(scores, reverse=True)
    by_query = {qid: [row[2] for row in rows if row[0] == qid] for qid in HYBRID_TOP}
    assert by_query == HYBRID_TOP  # the ranks written agree with the JSON report, tie included
    q7 = [row for row in rows if row[0] == "q7"]
    assert float(q7[0][4]) > float(q7[1][4])  # scores strictly decrease with rank
    run = beir.read_trec_run(hybrid_run["run"])
    assert rm.rank_run(run["q7"]) == HYBRID_TOP["q7"]


def test_markdown_table(hybrid_run):
    payload = json.loads(hybrid_run["json"].read_text(encoding="utf-8"))
    lines = hybrid_run["markdown"].read_text(encoding="utf-8").splitlines()
    assert lines[:4] == ["### dataset ds (test)", "", "| setting | value |", "|---|---|"]
    settings = lines[4:lines.index("", 4)]
    assert settings == [f"| {label} | {value} |" for label, value in payload["config"].items()]
    table = lines[lines.index("", 4) + 1:]
    assert table[0] == ("| configuration | Hit@1 | Hit@3 | Hit@5 | Recall@1 | Recall@3 | Recall@5 | NDCG@1 | "
                        "NDCG@3 | NDCG@5 | MRR |")
    assert len(table) == 3  # header, alignment row, one row for the one configuration
    assert table[2].startswith("| hybrid | 0.833 | 1.000 |")  # one row: nothing is marked best


def test_a_dataset_run_writes_its_page_and_its_csv(hybrid_run):
    import csv
    import io

    payload = json.loads(hybrid_run["json"].read_text(encoding="utf-8"))
    page = hybrid_run["html"].read_text(encoding="utf-8")
    assert "<h1>localRAG retrieval evaluation</h1>" in page and page.count("<svg") == 1  # the Hit@k curve
    assert "http" not in page and "<script" not in page
    text = hybrid_run["csv"].read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text.lstrip("\ufeff"), newline="")))
    assert [r["query_id"] for r in rows] == [q["query_id"] for q in payload["per_query"]]
    # Documents, not pages: the expected column names each relevant document with its grade, the first hit its id.
    first = payload["per_query"][0]
    assert rows[0]["rank"] == ("" if first["rank"] is None else str(first["rank"]))
    assert rows[0]["first_source"] == first["top"][0].get("source", first["top"][0].get("doc_id"))
    assert rows[0]["ndcg@5"] == f"{first['metrics']['ndcg@5']:.4f}"


# ----------------------------------------------------------------------------- sampling and cache


def test_sample_keeps_gold_documents(dataset, tmp_path, capsys, monkeypatch):
    folder, _ = dataset
    monkeypatch.setattr(er, "DATASET_CACHE", str(tmp_path / "cache"))
    code, out, _ = run(capsys, "--dataset", folder, "--max-queries", "2", "--max-corpus-docs", "4", "--k", "1,3",
                       "--quiet", "--no-compare", "--report", tmp_path / "sample.txt")
    assert code == 1  # degraded, as every run of this dataset (its broken lines)
    assert out.endswith(f"(2 questions)\nWrote {tmp_path}/sample.txt, {tmp_path}/sample.json\n")
    # Seed 0 orders the 6 queries with a relevant document as q4, q1, q5, q7, q3, q2 (q6 has none): the sample
    # is q1 and q4, whose relevant documents doc1 and doc6 are both kept; the other 2 of the 4 documents are
    # seeded distractors (doc2, which q1 judged not relevant, and doc3).
    sample = ("sample: 2 of 7 queries (1 without a relevant document left out), 4 of 11 documents (all 2 "
              "relevant documents included), seed 0")
    report = (tmp_path / "sample.txt").read_text(encoding="utf-8").splitlines()
    assert f"  Dataset:            ds, split test ({sample})" in report
    assert f"  These numbers come from a sample: {sample}" in report
    payload = json.loads((tmp_path / "sample.json").read_text(encoding="utf-8"))
    assert sorted(q["query_id"] for q in payload["per_query"]) == ["q1", "q4"]
    [index] = (tmp_path / "cache").iterdir()
    indexed = {d["source"] for d in LocalRAG(index, reranker_model=None, quiet=True).list_documents()}
    assert indexed == {"doc1", "doc2", "doc3", "doc6"}
    # In 4 documents both questions find their document first.
    assert payload["metrics"]["mrr"] == 1.0


def test_index_cache_is_reused(dataset, tmp_path, capsys, monkeypatch):
    from langchain_huggingface import HuggingFaceEmbeddings

    folder, _ = dataset
    monkeypatch.setattr(er, "DATASET_CACHE", str(tmp_path / "cache"))
    # Without the query vector cache, so that the second run's query batch shows (tests/test_lazy_loading.py has
    # the cached rerun).
    argv = ["--dataset", folder, "--k", "1,3", "--quiet", "--no-compare", "--no-query-cache", "--report",
            tmp_path / "r.txt"]
    assert run(capsys, *argv)[0] == 1
    expected = plan.dataset_index_path(resolve(er.parse([str(a) for a in argv]), er.eval_defaults()))
    assert expected.parent == tmp_path / "cache"
    assert (expected / local_rag.INDEX_INFO_FILE).exists()
    embedded: list[list[str]] = []
    original = HuggingFaceEmbeddings.embed_documents

    def count(self, texts):
        embedded.append(list(texts))
        return original(self, texts)

    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", count)
    assert run(capsys, *argv)[0] == 1
    # Second run: no document is embedded again; the one call is the batch of the 7 queries (sorted ids).
    assert embedded == [[QUERIES[q] for q in sorted(QUERIES)]]
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [expected.name]


def test_index_path_follows_the_settings(dataset, monkeypatch):
    folder, _ = dataset

    def path(*extra: str) -> Path:
        return plan.dataset_index_path(EvalOptions(**er.parse(["--dataset", str(folder), *extra]).flags(),
                                                       defaults=er.eval_defaults()))

    default = path()
    assert default == path()  # stable
    assert default.name.startswith("ds-")
    sampled = path("--max-queries", "2")
    assert sampled != default and sampled.name.rsplit("-", 1)[1] == default.name.rsplit("-", 1)[1]
    monkeypatch.setattr(local_rag, "CHUNK_SIZE", 300)
    smaller = path()
    # Same dataset fingerprint, other settings digest: a different folder, never a stale index.
    assert smaller != default
    assert smaller.name.rsplit("-", 1)[0] == default.name.rsplit("-", 1)[0]


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("flag, value", [("--max-queries", "0"), ("--max-corpus-docs", "-1")])
def test_sample_sizes_below_one(dataset, tmp_path, capsys, flag, value):
    folder, _ = dataset
    code, out, err = run(capsys, "--dataset", folder, flag, value, "--report", tmp_path / "r.txt")
    assert (code, out) == (2, "")
    assert err == f"error: {flag} must be 1 or more, got {value}\n"


def test_missing_dataset_folder(tmp_path, capsys):
    code, out, err = run(capsys, "--dataset", tmp_path / "nope", "--report", tmp_path / "r.txt")
    assert (code, out) == (2, "")
    assert err.startswith(f"error: Dataset folder not found: {tmp_path / 'nope'}\nExpected a BEIR folder:")
    assert not (tmp_path / "r.txt").exists()


def test_stage_ranks_count_documents(hybrid_run):
    # q7: dense and BM25 both [doc11, doc9, ...] by document (see the module docstring): the relevant doc11
    # is 1st at every stage.
    payload = json.loads(hybrid_run["json"].read_text(encoding="utf-8"))
    stages = {q["query_id"]: q["stages"] for q in payload["per_query"]}
    assert stages["q7"]["ranks"] == {"dense": 1, "bm25": 1, "rrf": 1, "final": 1}
    assert stages["q7"]["lengths"]["final"] == 5  # the final list as scored, cut at the deepest k
    assert all(s["ranks"]["final"] == q["rank"] for s, q in zip(stages.values(), payload["per_query"]))
    assert payload["stage_k"] == 5  # the first cutoff that holds the chat's 5 passages
    report = hybrid_run["report"].read_text(encoding="utf-8")
    assert "Where the misses are lost (at k = 5; 6 questions with stage ranks)" in report
    assert "  found within 5                                      6" in report
    assert not list(hybrid_run["report"].parent.glob("*.details.md"))  # passages are shown for goldsets only


@pytest.mark.parametrize("mode", local_rag.RETRIEVAL_MODES)
@pytest.mark.parametrize("rerank", [False, True])
def test_run_file_reproduces_the_json_metrics_with_trec_eval(dataset, spread_cross_encoder, tmp_path, mode, rerank):
    """trec_eval (pytrec_eval) on the written run file gives the JSON report's per-query metrics, for every mode
    with and without a reranker. The corpus ties: doc9 and doc11 are byte-identical (equal cosine, BM25 and
    cross-encoder scores), and at RRF k = 1 (the default) 1/2 + 1/3 ties whichever list ranks a document first."""
    import pytrec_eval

    folder, index = dataset
    flags = ["--rerank-model", str(spread_cross_encoder)] if rerank else ["--no-rerank"]
    code = er.main(["--dataset", str(folder), "--index", str(index), "--k", "1,3,5", "--quiet", "--no-compare",
                    "--mode", mode, *flags, "--report", str(tmp_path / "r.txt"),
                    "--run-file", str(tmp_path / "r.run")])
    assert code == 1  # degraded by the broken lines; the reports are written
    payload = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    ours = {q["query_id"]: q["metrics"] for q in payload["per_query"]}
    run = beir.read_trec_run(tmp_path / "r.run")
    for scores in run.values():  # the documented rule: scores strictly decrease with rank
        assert len(set(scores.values())) == len(scores)
    qrels = {qid: {d: int(g) for d, g in docs.items()} for qid, docs in beir.load_beir(folder).qrels.items()
             if qid in ours}
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"success.1,3,5", "recall.1,3,5", "ndcg_cut.1,3,5",
                                                  "recip_rank"}).evaluate(run)
    names = {"hit": "success", "recall": "recall", "ndcg": "ndcg_cut"}
    assert set(ours) == set(trec) and len(ours) == 6
    for qid, metrics in ours.items():
        for key, value in metrics.items():
            name, _, k = key.partition("@")
            expected = trec[qid]["recip_rank" if name == "mrr" else f"{names[name]}_{k}"]
            assert value == pytest.approx(expected, abs=1e-9), (mode, rerank, qid, key)
    # The list scored is the list users get: each query's top documents in the JSON are, in order, the documents
    # of LocalRAG.retrieve's own list (first chunk of each), not a re-sort of equal scores by id.
    rag = LocalRAG(index, reranker_model=str(spread_cross_encoder) if rerank else None, quiet=True)
    queries = beir.load_beir(folder).queries
    for q in payload["per_query"]:
        returned = list(dict.fromkeys(doc.metadata["doc_id"] for doc, _ in rag.retrieve(
            queries[q["query_id"]].question, k=14, mode=mode, rerank=rerank)))
        assert [t["doc_id"] for t in q["top"]] == returned[:len(q["top"])], (mode, rerank, q["query_id"])


def test_document_collection_asks_once_with_the_runs_k():
    """A list ranked by page holds each record once, so it may hold fewer documents than the depth: the query is
    scored on what came back, from one call with the run's k (no second, deeper call that no chat makes)."""
    from types import SimpleNamespace

    def chunk(doc_id: str, n: int) -> Document:
        return Document(page_content=f"{doc_id} {n}", metadata={"doc_id": doc_id, "source": doc_id, "page": 0})

    # 4 documents of 3 chunks each, best first: d0's chunks, then d1's, ...
    chunks = [(chunk(f"d{i // 3}", i % 3), 1.0 - i / 100) for i in range(12)]
    asked: list[int] = []

    class Fake:
        def retrieve_traced(self, question, k, mode, rerank, depth):
            asked.append(k)
            pool = chunks[:k]
            pages = list({d.metadata["doc_id"]: (d, s) for d, s in reversed(pool)}.values())[::-1]
            return SimpleNamespace(final=pages[:k], stages={"dense": pool}, pool=len(pool))

    docs, trace = ev.retrieve_documents(Fake(), "q", depth=3, k=5, mode="dense", rerank=False)
    assert list(docs) == ["d0", "d1"] and asked == [5]  # 5 chunks: d0's three, d1's two
    assert trace.pool == 5
    assert ev.short_lists_note({"q1": docs, "q2": {"a": 1.0, "b": 0.5, "c": 0.2}}, depth=3, k=5) == [
        "1 of 2 queries got fewer than 3 documents: the candidate lists of retrieve(query, k=5) held no more; they "
        "are scored on the documents that came back"]
    assert ev.short_lists_note({"q2": {"a": 1.0, "b": 0.5, "c": 0.2}}, depth=3, k=5) == []


def test_dataset_k_is_one_figure_per_index():
    # depth x chunks per document x 1.5, rounded up, computed exactly: 10 x 64/24 x 1.5 = 40 (floats: 40.000...04,
    # which would round up to 41).
    assert ev.dataset_k({"files": 24, "chunks": 64}, 10) == 40
    assert ev.dataset_k({"files": 5183, "chunks": 5789}, 100) == 168  # SciFact train: 167.54 -> 168
    assert ev.dataset_k({"files": 11, "chunks": 14}, 5) == 10  # this module's index: 9.55 -> 10
    assert ev.dataset_k({"files": 4, "chunks": 2}, 10) == 10  # never under the depth
    assert ev.dataset_k({}, 5) == 5  # an empty index
