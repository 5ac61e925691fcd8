"""Dense retrieval is deterministic: exact search over the stored vectors, the same top-100 in every fresh process
and on every copy of the index, equal to a brute-force cosine search computed here (float64, ties by chunk id).

Chroma's own HNSW search is rebuilt from its write-ahead log at every open and is not deterministic, which is why
the retriever does not use it (localrag/index/index.py, Index.nearest). The store has 2,000 chunks; every 40th text is
a copy of the one before it, so equal similarities (the trap) occur in every top-100.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy
import pytest
from conftest import ROOT

from local_rag import LocalRAG
from localrag.search.vectors import top_k_cosine

WORDS = ("option volatility pricing rainfall harvest espresso grinder castle trial clerk ledger dividend glacier "
         "volcano tyre bicycle aqueduct honey pollen jazz trumpet caffeine river bridge").split()
N_RECORDS, DEPTH, PROCESSES, COPIES = 2000, 100, 15, 5
OPEN_AND_SEARCH = """
import json, sys
from local_rag import LocalRAG
rag = LocalRAG(sys.argv[1], reranker_model=None, quiet=True)
vectors = json.load(open(sys.argv[2]))
print(json.dumps([[i for i, _ in rag.index.nearest(v, {depth})] for v in vectors]))
"""


def text(n: int) -> str:
    n = n - 1 if n % 40 == 39 else n  # a byte-identical copy of the record before: equal vectors
    rng = numpy.random.default_rng(n)
    return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), 12))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    base = tmp_path_factory.mktemp("exact")
    rag = LocalRAG(base / "index", reranker_model=None, chunk_size=2000, quiet=True)
    rag.sync_records([{"doc_id": f"d{n}", "title": "", "text": text(n), "metadata": {}} for n in range(N_RECORDS)],
                     progress=False)
    vectors = [rag.index.embeddings.embed_query(q) for q in ("volatility of an option", "harvest after rain",
                                                              "espresso grinder", "a trial in a castle")]
    return base, rag, vectors


def brute_force(rag, vector) -> list[str]:
    data = rag.index.vectorstore._collection.get(include=["embeddings"])
    ids = numpy.array(data["ids"])
    matrix = numpy.asarray(data["embeddings"], dtype=numpy.float64)
    similarities = (matrix / numpy.linalg.norm(matrix, axis=1, keepdims=True)) @ (vector / numpy.linalg.norm(vector))
    # Rounded to float32 first: the store keeps float32, so float64 sums may split a tie by 1e-17.
    similarities = similarities.astype(numpy.float32)
    order = numpy.lexsort((ids, -similarities))
    return list(ids[order[:DEPTH]])


def test_top_k_cosine_by_hand():
    matrix = numpy.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8]], dtype=numpy.float32)
    # Rows 0 and 2 tie at 1.0 and stay in row order; at k = 2 the tie at the cut is kept whole before cutting.
    assert top_k_cosine(matrix, [2.0, 0.0], 2) == [(0, 1.0), (2, 1.0)]
    assert [i for i, _ in top_k_cosine(matrix, [0.0, 1.0], 4)] == [1, 3, 0, 2]
    assert top_k_cosine(matrix, [1.0, 0.0], 0) == []


def test_the_store_ties(store):
    _, rag, vectors = store
    found = rag.index.nearest(vectors[0], DEPTH)
    assert len(found) == DEPTH and len({s for _, s in found}) < DEPTH  # equal similarities among the top 100


def test_every_fresh_process_and_copy_returns_exact_search(store, tmp_path):
    base, rag, vectors = store
    expected = [brute_force(rag, numpy.asarray(v)) for v in vectors]
    assert [[i for i, _ in rag.index.nearest(v, DEPTH)] for v in vectors] == expected
    (tmp_path / "vectors.json").write_text(json.dumps(vectors), encoding="utf-8")
    script = OPEN_AND_SEARCH.format(depth=DEPTH)
    folders = [base / "index"] * PROCESSES
    for n in range(COPIES):
        shutil.copytree(base / "index", tmp_path / f"copy{n}")
        folders.append(tmp_path / f"copy{n}")
    results = []
    for start in range(0, len(folders), 2):  # two at a time: the machine has two cores
        running = [subprocess.Popen([sys.executable, "-c", script, str(f), str(tmp_path / "vectors.json")], cwd=ROOT,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for f in folders[start:start + 2]]
        for process in running:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
            results.append(json.loads(out))
    assert len(results) == PROCESSES + COPIES
    assert all(result == expected for result in results)


def test_an_ivf_recorded_in_the_manifest_is_searched_the_same_everywhere_and_all_probes_are_exact(store, tmp_path,
                                                                                                  capsys):
    from localrag.runs import config_block
    from localrag.search import ivf

    base, rag, vectors = store
    records = [{"doc_id": f"d{n}", "title": "", "text": text(n), "metadata": {}} for n in range(N_RECORDS)]
    folder = shutil.copytree(base / "index", tmp_path / "ivf-index")
    built = LocalRAG(folder, reranker_model=None, quiet=True, ivf_min_chunks=1000, ivf_lists=20)
    built.sync_records(records, progress=False)  # nothing to embed: only the IVF is built
    info = json.loads((folder / "index_info.json").read_text(encoding="utf-8"))
    assert info["dense_search"] == {"method": "ivf", "lists": 20, "seed": 0}
    assert info["ivf_settings"] == {"min_chunks": 1000, "lists": 20} and (folder / ivf.IVF_FILE).exists()
    expected = [brute_force(rag, numpy.asarray(v)) for v in vectors]

    default = LocalRAG(folder, reranker_model=None, quiet=True)  # the recorded settings, an eighth of 20 lists
    assert default.index.dense_search() == {"method": "ivf", "lists": 20, "probes": 2, "seed": 0}
    every = LocalRAG(folder, reranker_model=None, quiet=True, ivf_probes=50)  # more probes than lists: all of them
    assert every.index.dense_search() == {"method": "ivf", "lists": 20, "probes": 20, "seed": 0}
    assert [[i for i, _ in every.index.nearest(v, DEPTH)] for v in vectors] == expected

    few = LocalRAG(folder, reranker_model=None, quiet=True, ivf_probes=2)
    approx = [[i for i, _ in few.index.nearest(v, DEPTH)] for v in vectors]
    assert approx != expected and 0 < ivf.recall(expected, approx) < 1
    copy = shutil.copytree(folder, tmp_path / "ivf-copy")
    script = OPEN_AND_SEARCH.format(depth=DEPTH).replace("quiet=True)", "quiet=True, ivf_probes=2)")
    (tmp_path / "vectors.json").write_text(json.dumps(vectors), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", script, str(copy), str(tmp_path / "vectors.json")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and json.loads(done.stdout) == approx  # another process, another copy: same lists
    # The report's configuration says how the dense list was searched, with the recall measured on its questions.
    questions = ["volatility of an option", "harvest after rain", "espresso grinder", "a trial in a castle"]
    recall = ivf.recall([[i for i, _ in few.index.nearest(few.retriever.query_vector(q), 30, exact=True)]
                         for q in questions],
                        [[i for i, _ in few.index.nearest(few.retriever.query_vector(q), 30)] for q in questions])
    assert config_block.dense_search_text(few, questions) == (
        f"approximate: IVF of 20 lists, 2 probed per query (seed 0); "
        f"recall@30 against exact search {recall:.3f} over 4 questions")
    assert config_block.dense_search_text(every, questions).endswith(
        "recall@30 against exact search 1.000 over 4 questions")
    assert config_block.dense_search_text(rag, questions) == "exact cosine over all 2000 indexed chunks"

    # A missing IVF file: exact search, said once on stderr; a sync under a higher threshold drops the IVF.
    (copy / ivf.IVF_FILE).unlink()
    capsys.readouterr()
    gone = LocalRAG(copy, reranker_model=None, quiet=True, ivf_probes=2)
    assert [[i for i, _ in gone.index.nearest(v, DEPTH)] for v in vectors] == expected
    assert gone.index.dense_search() == {"method": "exact"}
    assert capsys.readouterr().err.count(f"warning: the IVF of the index {copy} (ivf.npz) is missing") == 1
    LocalRAG(folder, reranker_model=None, quiet=True, ivf_min_chunks=5000).sync_records(records, progress=False)
    info = json.loads((folder / "index_info.json").read_text(encoding="utf-8"))
    assert "dense_search" not in info and not (folder / ivf.IVF_FILE).exists()
    assert info["ivf_settings"] == {"min_chunks": 5000, "lists": 20}
