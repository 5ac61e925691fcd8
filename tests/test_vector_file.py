"""The vector file (vectors.npy) and the store check it records.

Each fault of the file (deleted, truncated, damaged, stale, from another index, written half, a full disk) and
each change of the store behind the manifest is reproduced here: a rebuild from the store or a clear message,
never a silently wrong list. Runs read no more of the store than the chunks they show.
"""
from __future__ import annotations

import errno
import json
import shutil
import sqlite3
from pathlib import Path

import numpy
import pytest
from conftest import write_corpus, write_pdf

import eval_retrieval as er
from local_rag import LocalRAG
from localrag import files
from localrag.index import store, store_reads, vector_file
from localrag.index.manifest import Manifest
from localrag.runs import rows

QUERY = "What is the sensitivity of an option to volatility?"
GOLD = ("question,expected_source,expected_page\n"
        "What is the sensitivity of an option's value to implied volatility?,options.pdf,1\n"
        "How do plants react to rainfall?,weather.pdf,1\n")


@pytest.fixture
def index(tiny_index, tmp_path) -> tuple[Path, Path]:
    """(docs, a private copy of the tiny index) that a test may damage."""
    docs, built = tiny_index
    shutil.copytree(built, tmp_path / "index")
    return docs, tmp_path / "index"


def fresh(index: Path, **kwargs) -> LocalRAG:
    return LocalRAG(index, reranker_model=None, quiet=True, **kwargs)


def from_store(rag: LocalRAG) -> tuple[list[str], numpy.ndarray]:
    """The indexed vectors as a whole read of the store gives them (the code path before the vector file)."""
    return store.indexed_vectors(rag.vectorstore._collection, rag.index.manifest)


def dense(rag: LocalRAG, query: str = QUERY) -> list[tuple[str, float]]:
    return [(doc.id, score) for doc, score in rag.retrieve(query, k=5, mode="dense", rerank=False)]


def evaluate(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = er.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- the file itself

def test_the_file_is_a_standard_npy_with_a_trailer_and_reads_back_exactly(tmp_path):
    matrix = numpy.array([[0.6, 0.8], [1.0, 0.0], [0.0, -1.0]], dtype=numpy.float32)
    manifest = Manifest(settings={"chunk_size": 10}, files={"a.pdf": {"sha256": "x", "pages": 1, "chunks": 3}})
    state = {"collection": "c", "seq": 7, "chunks": 3}
    vector_file.save(tmp_path, ["a", "b", "c"], matrix, manifest, state)
    assert numpy.array_equal(numpy.load(tmp_path / vector_file.VECTOR_FILE), matrix)  # numpy reads it as it is
    header = vector_file.read_header(tmp_path)
    assert (header.ids, header.rows, header.dimension, header.store) == (("a", "b", "c"), 3, 2, state)
    assert header.fingerprint == manifest.fingerprint()
    loaded = vector_file.load(tmp_path, header)
    assert isinstance(loaded, numpy.memmap) and numpy.array_equal(loaded, matrix)
    assert vector_file.stale_reason(header, manifest, state) is None
    assert vector_file.stale_reason(header, manifest, dict(state, seq=8)) == "the store was written since"
    assert vector_file.stale_reason(header, manifest, None) == "the store's state cannot be read"
    other = Manifest(settings={"chunk_size": 10}, files={"a.pdf": {"sha256": "y", "pages": 1, "chunks": 3}})
    assert vector_file.stale_reason(header, other, state) == "it is of other chunks than the manifest lists"
    # A file being stored (partial) is part of what a check was made against: its chunks are not orphans.
    partial = Manifest(settings=manifest.settings, files=manifest.files, partial={"b.pdf": {"sha256": "z"}})
    assert vector_file.stale_reason(header, partial, state) == "it is of other chunks than the manifest lists"
    assert vector_file.stale_reason(None, manifest, state) == "there is none"
    assert vector_file.read_header(tmp_path / "missing") is None


def test_a_damaged_file_is_unreadable_with_the_reason(tmp_path):
    path = tmp_path / vector_file.VECTOR_FILE
    matrix = numpy.eye(3, dtype=numpy.float32)
    vector_file.save(tmp_path, ["a", "b", "c"], matrix, Manifest(), {"collection": "c", "seq": 1, "chunks": 3})
    whole = path.read_bytes()
    header = vector_file.read_header(tmp_path)
    cases = {
        whole[:-5]: "it does not end in localRAG's marker: truncated, or not written by localRAG",
        b"": "it holds 0 bytes, too few for a vector file",
        # the array lost its last row, the trailer is whole: the sizes disagree
        whole[:header.offset + 24] + whole[header.offset + 36:]:
            "it holds 447 bytes and an array of float32, shape (3, 3), where its trailer says 3 rows of 3 "
                "float32 in 459 bytes",
    }
    for damaged, why in cases.items():
        path.write_bytes(damaged)
        with pytest.raises(vector_file.UnreadableVectors) as caught:
            vector_file.read_header(tmp_path)
        assert caught.value.why == why and caught.value.path == path
    path.write_bytes(b"not numpy at all" + whole[-16:])  # localRAG's marker after a foreign file
    with pytest.raises(vector_file.UnreadableVectors, match="ValueError"):
        vector_file.read_header(tmp_path)
    # A trailer of another format is stale, not damaged: the store is read and the file written again.
    trailer = json.dumps({"format": vector_file.FORMAT + 1}).encode()
    prefix = whole[:header.offset + 36]
    path.write_bytes(prefix + trailer + len(trailer).to_bytes(8, "little") + vector_file.MAGIC)
    assert vector_file.read_header(tmp_path) is None


def test_a_write_that_fails_half_way_leaves_the_old_file_as_it_was(tmp_path, monkeypatch):
    state = {"collection": "c", "seq": 1, "chunks": 2}
    vector_file.save(tmp_path, ["a", "b"], numpy.eye(2, dtype=numpy.float32), Manifest(), state)
    before = (tmp_path / vector_file.VECTOR_FILE).read_bytes()

    class Interrupted:
        def __init__(self, handle):
            self.handle, self.written = handle, 0

        def write(self, data):
            if self.written:  # the array is written, then Ctrl-C
                raise KeyboardInterrupt
            self.written += len(data)
            return self.handle.write(data)

    atomic = files.write_atomic
    monkeypatch.setattr(vector_file, "write_atomic",
                        lambda path, write, binary: atomic(path, lambda h: write(Interrupted(h)), binary=binary))
    with pytest.raises(KeyboardInterrupt):
        vector_file.save(tmp_path, ["a", "b", "c"], numpy.eye(3, dtype=numpy.float32), Manifest(), state)
    assert (tmp_path / vector_file.VECTOR_FILE).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [vector_file.VECTOR_FILE]  # no temp file left


def test_the_store_state_moves_with_every_write_and_only_with_writes(tmp_path):
    import chromadb
    from chromadb.config import Settings

    assert vector_file.store_state(tmp_path, "docs") is None  # no database
    client = chromadb.PersistentClient(path=str(tmp_path), settings=Settings(anonymized_telemetry=False))
    collection = client.get_or_create_collection("docs", embedding_function=None)
    collection.add(ids=["a", "b"], embeddings=[[1.0, 0.0], [0.0, 1.0]], documents=["x", "y"])
    states = [vector_file.store_state(tmp_path, "docs")]
    assert states[0]["chunks"] == 2 and states[0]["collection"] == str(collection.id)
    collection.get(include=["embeddings", "documents"])
    collection.query(query_embeddings=[[1.0, 0.0]], n_results=1)
    assert vector_file.store_state(tmp_path, "docs") == states[0]  # reads change nothing
    for write in (lambda: collection.upsert(ids=["a"], embeddings=[[0.6, 0.8]], documents=["x"]),
                  lambda: collection.update(ids=["b"], metadatas=[{"page": 1}]),
                  lambda: collection.delete(ids=["b"])):
        write()
        states.append(vector_file.store_state(tmp_path, "docs"))
    assert [s["seq"] for s in states] == sorted({s["seq"] for s in states})  # each write a new, larger number
    assert states[-1]["chunks"] == 1
    assert vector_file.store_state(tmp_path, "other") is None  # no such collection
    broken = tmp_path / "broken"
    broken.mkdir()
    sqlite3.connect(broken / "chroma.sqlite3").execute("CREATE TABLE t (x)").connection.commit()
    assert vector_file.store_state(broken, "docs") is None  # a layout this code does not know


# ----------------------------------------------------------------------------- an index and its file

def test_a_sync_writes_the_file_equal_to_the_store_to_the_last_bit(index):
    _, path = index
    rag = fresh(path)
    header = vector_file.read_header(path)
    ids, matrix = from_store(rag)
    assert list(header.ids) == ids == sorted(ids) and header.rows == 5
    assert numpy.array_equal(vector_file.load(path, header), matrix)
    check = rag.check_index()
    assert (check.method, check.describe(), check.orphan_ids, check.stored, check.dimension) == \
        ("recorded", [], [], 5, 384)
    full = rag.check_index(full=True)
    assert (full.method, full.describe(), full.stored, full.dimension) == ("read", [], 5, 384)
    assert fresh(path, check_store=True).check_index().method == "read"  # --check-store: always read whole


def test_a_deleted_or_truncated_file_is_written_again_and_the_lists_do_not_change(index, capsys):
    _, path = index
    expected = dense(fresh(path))
    file = path / vector_file.VECTOR_FILE
    file.unlink()
    rag = fresh(path)
    assert rag.check_index().method == "read" and dense(rag) == expected
    assert fresh(path).check_index().method == "recorded"  # written again by that read
    file.write_bytes(file.read_bytes()[:1000])
    capsys.readouterr()
    rag = fresh(path)
    assert dense(rag) == expected
    assert capsys.readouterr().err == (f"warning: the vector file {file} cannot be read (it does not end in "
                                       f"localRAG's marker: truncated, or not written by localRAG); reading the "
                                       f"vectors from the store and writing the file again\n")
    assert fresh(path).check_index().method == "recorded"


def test_a_stale_file_or_one_from_another_index_is_never_searched(index, tmp_path, capsys):
    docs, path = index
    old = (path / vector_file.VECTOR_FILE).read_bytes()
    added = write_pdf(tmp_path / "new.pdf", ["Zebras graze on the savanna grass of the Serengeti."])
    shutil.copytree(docs, tmp_path / "docs2")
    shutil.copy(added, tmp_path / "docs2" / "new.pdf")
    capsys.readouterr()
    LocalRAG(path, reranker_model=None).sync([tmp_path / "docs2"], progress=False, switch_folder=True)
    assert capsys.readouterr().err == "Writing the vector file of 6 chunks\n"  # no reason: routine after a sync
    (path / vector_file.VECTOR_FILE).write_bytes(old)  # the file of the index before new.pdf
    rag = fresh(path)
    assert rag.check_index().method == "read"  # stale: the store is read, and the file written again
    top = rag.retrieve("Where do zebras graze?", k=1, mode="dense", rerank=False)[0][0]
    assert top.metadata["source"] == "new.pdf"
    assert vector_file.read_header(path).rows == 6
    # The file of another index, put in place: of other chunks, so never searched.
    other = write_corpus(tmp_path / "other_docs", {"x.pdf": ["Quantum chromodynamics of gluons."]})
    other_rag = fresh(tmp_path / "other_index")
    other_rag.sync([other], progress=False)
    expected = dense(fresh(path))
    shutil.copy(tmp_path / "other_index" / vector_file.VECTOR_FILE, path / vector_file.VECTOR_FILE)
    rag = fresh(path)
    assert rag.index.reads.record() == (None, "it is of other chunks than the manifest lists")
    assert dense(rag) == expected


def test_a_vector_changed_behind_the_manifest_is_read_from_the_store(index):
    _, path = index
    rag = fresh(path)
    collection = rag.vectorstore._collection
    target = sorted(collection.get(include=[])["ids"])[0]
    new_vector = numpy.zeros(384, dtype=numpy.float32)
    new_vector[7] = 1.0
    collection.update(ids=[target], embeddings=[new_vector.tolist()])  # another program, same metadata
    rag = fresh(path)
    assert rag.check_index().method == "read"  # the store was written since the file's record
    assert rag.index.nearest(new_vector.tolist(), 1) == [(target, pytest.approx(1.0))]
    header = vector_file.read_header(path)  # written again: the store still matches the manifest
    assert numpy.array_equal(vector_file.load(path, header)[header.ids.index(target)], new_vector)


def test_a_chunk_deleted_behind_the_manifest_stops_the_measurement(index, tmp_path, capsys):
    docs, path = index
    rag = fresh(path)
    collection = rag.vectorstore._collection
    gone = collection.get(where={"source": "weather.pdf"}, include=[])["ids"]
    collection.delete(ids=gone)
    collection.add(ids=["stray"], embeddings=[[0.1] * 384], documents=["stray"], metadatas=[{"source": "x.pdf"}])
    (tmp_path / "gold.csv").write_text(GOLD, encoding="utf-8")
    code, out, err = evaluate(capsys, "--goldset", str(tmp_path / "gold.csv"), "--index", str(path), "--docs",
                              str(docs), "--no-sync", "--no-rerank", "--quiet", "--report", str(tmp_path / "r.txt"))
    assert (code, out) == (2, "")
    assert err == (f"error: the index {path} does not match its manifest (weather.pdf: the store holds 0 of its 1 "
                   f"chunks); measuring it would give wrong numbers. Repair it with add_pdfs.py --index {path} (or "
                   f"evaluate without --no-sync)\n")
    assert not (tmp_path / "r.txt").exists()
    check = fresh(path).check_index()
    assert check.orphan_ids == ["stray"] and check.method == "read"
    assert vector_file.read_header(path) is not None and fresh(path).index.reads.record()[0] is None  # not rewritten


def test_a_write_to_the_store_during_the_whole_read_leaves_no_file(index, monkeypatch):
    """Another process writes while this one reads the store whole: what it read may be of neither state, so no
    file records it; the next open reads the store again."""
    _, path = index
    (path / vector_file.VECTOR_FILE).unlink()
    real = store_reads.read_store

    def read_while_written(collection, include):
        data = real(collection, include)
        collection.update(ids=[data["ids"][0]], metadatas=[dict(data["metadatas"][0], note="written meanwhile")])
        return data

    monkeypatch.setattr(store_reads, "read_store", read_while_written)
    rag = fresh(path)
    assert rag.check_index().describe() == []
    assert not (path / vector_file.VECTOR_FILE).exists()
    monkeypatch.setattr(store_reads, "read_store", real)
    assert fresh(path).check_index().method == "read" and (path / vector_file.VECTOR_FILE).exists()


def test_a_full_disk_for_the_file_is_a_warning_and_nothing_is_lost(index, monkeypatch, capsys):
    _, path = index
    expected = dense(fresh(path))
    (path / vector_file.VECTOR_FILE).unlink()

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path / vector_file.VECTOR_FILE))

    monkeypatch.setattr(vector_file, "save", full)
    capsys.readouterr()
    assert dense(fresh(path)) == expected
    assert capsys.readouterr().err == (f"warning: could not write the vector file {path / vector_file.VECTOR_FILE} "
                                       f"(no space left on the device); dense search reads the vectors from the "
                                       f"store until a run can write it\n")
    assert not (path / vector_file.VECTOR_FILE).exists()


# ----------------------------------------------------------------------------- what a run reads

def test_a_cached_evaluation_reads_only_the_chunks_it_shows(index, tmp_path, capsys, monkeypatch):
    docs, path = index
    (tmp_path / "gold.csv").write_text(GOLD, encoding="utf-8")
    argv = ["--goldset", str(tmp_path / "gold.csv"), "--index", str(path), "--docs", str(docs), "--no-sync",
            "--no-rerank", "--quiet", "--mode", "hybrid", "--no-compare"]
    code, _, err = evaluate(capsys, *argv, "--report", str(tmp_path / "r.txt"))
    assert code == 0, err
    before = (tmp_path / "r.txt").read_text(encoding="utf-8").splitlines()

    def whole_read(*args, **kwargs):
        raise AssertionError("the store was read whole")

    monkeypatch.setattr(store, "read_store", whole_read)
    monkeypatch.setattr("localrag.index.store_reads.read_store", whole_read)
    monkeypatch.setattr("localrag.index.index.indexed_chunks", whole_read)
    code, _, err = evaluate(capsys, *argv, "--report", str(tmp_path / "r.txt"))
    assert code == 0, err
    after = (tmp_path / "r.txt").read_text(encoding="utf-8").splitlines()
    assert [line for line in before if not line.startswith("Generated:")] == \
        [line for line in after if not line.startswith("Generated:")]


def test_the_language_note_reads_the_counts_the_sync_recorded(index, monkeypatch):
    docs, path = index
    rag = fresh(path)
    texts = [t for _, t, _ in rag.indexed_chunks()]
    entries = json.loads((path / "index_info.json").read_text(encoding="utf-8"))["files"]
    assert entries["Literatur_Übersicht.pdf"]["languages"] == {"de": 1, "en": 0}
    share = rows.shelf_german_share(rag)
    assert share == rows.language.german_share(texts) == 0.2
    # An index synced before the counts were recorded: the texts are read, until a sync records them.
    info = json.loads((path / "index_info.json").read_text(encoding="utf-8"))
    for entry in info["files"].values():
        del entry["languages"]
    (path / "index_info.json").write_text(json.dumps(info), encoding="utf-8")
    assert rows.shelf_german_share(fresh(path)) == 0.2
    report = fresh(path).sync([docs], progress=False, switch_folder=True)
    assert report.chunks == 0  # nothing embedded
    assert json.loads((path / "index_info.json").read_text(encoding="utf-8"))["files"] == entries
    monkeypatch.setattr("localrag.index.index.indexed_chunks", lambda *a: pytest.fail("texts read"))
    assert rows.shelf_german_share(fresh(path)) == 0.2


def test_warm_up_loads_everything_the_first_retrieval_would(index, monkeypatch):
    _, path = index
    rag = fresh(path, retrieval_mode="hybrid")
    rag.warm_up()
    from localrag.search.bm25 import BM25Index

    def loading(*args, **kwargs):
        raise AssertionError("loaded at the first retrieval")

    monkeypatch.setattr(vector_file, "load", loading)
    monkeypatch.setattr(vector_file, "read_header", loading)
    monkeypatch.setattr(BM25Index, "load", loading)
    monkeypatch.setattr("chromadb.PersistentClient", loading)
    found = rag.retrieve(QUERY, k=2, rerank=False)
    assert found[0][0].metadata["source"] == "options.pdf"
