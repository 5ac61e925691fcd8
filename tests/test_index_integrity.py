"""Faults that once left a wrong index behind exit 0: each is reproduced here, with the exit code and message.

Concurrent syncs, a store that lost its data, an index synced with another folder, an empty folder, a foreign
collection, colliding names and links, a damaged manifest, workers outliving their parent, a file vanishing,
a read-only index, a full disk and the user's umask.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import unicodedata
from pathlib import Path

import pytest
from conftest import ROOT, write_corpus, write_pdf

import add_pdfs
import eval_retrieval as er
import local_rag
from local_rag import LocalRAG

CORPUS_A = {"alpha.pdf": ["Alpha page about red apples."],
            "beta.pdf": ["Beta page about green pears.", "Beta second page about yellow lemons."]}
CORPUS_B = {"gamma.pdf": ["Gamma page about blue plums."]}
GOLD_A = "question,expected_source,expected_page\nWhich fruit is red?,alpha.pdf,1\nWhat is yellow?,beta.pdf,2\n"


def run(capsys, *argv: str, quiet: bool = True) -> tuple[int, list[str], str]:
    """add_pdfs.py in this process; --quiet unless asked, so stderr holds only errors (no model loading bar)."""
    capsys.readouterr()
    code = add_pdfs.main(list(argv) + (["--quiet"] if quiet and "--quiet" not in argv else []))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def evaluate(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = er.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def manifest(index: Path) -> dict:
    return json.loads((index / "index_info.json").read_text(encoding="utf-8"))


def stored_sources(index: Path) -> list[str]:
    rag = LocalRAG(index, reranker_model=None, quiet=True)
    return sorted(m["source"] for m in rag.vectorstore._collection.get(include=["metadatas"])["metadatas"])


def script(code: str) -> list[str]:
    """argv running `code` (sys imported) in this Python; run it with ENV, which makes the project importable."""
    return [sys.executable, "-c", "import sys\n" + textwrap.dedent(code)]


# The project importable from any working folder, as after `pip install -e .`, and no hub access.
ENV = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")


@pytest.fixture
def docs_a(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "docs_a", CORPUS_A)


# ----------------------------------------------------------------------------- one writer at a time

def test_two_syncs_at_once_embed_once_and_agree(tmp_path, docs_a):
    index = tmp_path / "index"
    argv = [sys.executable, str(ROOT / "add_pdfs.py"), str(docs_a), "--index", str(index)]
    runs = [subprocess.Popen(argv, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    outs = [proc.communicate(timeout=240) for proc in runs]
    assert [proc.returncode for proc in runs] == [0, 0], outs
    summaries = sorted(out.splitlines()[-1] for out, _ in outs)
    # One run embedded the 3 chunks; the other waited for the lock, read the new manifest, and found nothing to do.
    assert summaries[0].startswith("files added 0 / updated 0 / removed 0 / unchanged 2 / failed 0; 0 pages and 0 ")
    assert summaries[1].startswith("files added 2 / updated 0 / removed 0 / unchanged 0 / failed 0; 3 pages and 3 ")
    assert stored_sources(index) == ["alpha.pdf", "beta.pdf", "beta.pdf"]
    assert manifest(index)["counts"] == {"files": 2, "pages": 3, "chunks": 3}


def test_a_locked_index_waits_or_fails_at_once_with_no_wait(capsys, tmp_path, docs_a):
    index = tmp_path / "index"
    index.mkdir()
    holder = subprocess.Popen(script(f"""
        import filelock, time
        lock = filelock.FileLock({str(index / local_rag.LOCK_FILE)!r})
        lock.acquire()
        print("held", flush=True)
        time.sleep(4)
    """), env=ENV, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    code, out, err = run(capsys, str(docs_a), "--index", str(index), "--no-wait")
    assert code == 2 and out == []
    assert err == (f"error: the index {index} is being written by another process (add_pdfs.py or an evaluation); "
                   f"wait until it has finished, or leave out --no-wait to wait for it\n")
    assert not (index / "index_info.json").exists()
    started = time.monotonic()
    code, out, err = run(capsys, str(docs_a), "--index", str(index), quiet=False)
    assert code == 0 and f"waiting: the index {index} is being written by another process\n" in err
    assert time.monotonic() - started > 1  # it did wait for the holder
    holder.wait(timeout=30)


def test_evaluations_with_no_sync_share_the_index_and_keep_writers_out(capsys, tmp_path, docs_a):
    """An evaluation with --no-sync only reads the index: a second one (here with --no-wait) does not wait for it,
    while add_pdfs.py, a writer, still does. The first one is held in a stalled answer judge (the issue: a second
    --no-sync run waited 230 s under "being written by another process")."""
    import hashlib

    from openai_stub import StalledServer

    index = tmp_path / "index"
    assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
    gold = tmp_path / "gold.csv"
    gold.write_text("question,expected_source,expected_page,answer\nWhich fruit is red?,alpha.pdf,1,Apples.\n",
                    encoding="utf-8")
    (tmp_path / "answers.jsonl").write_text(json.dumps({"question": "Which fruit is red?", "answer": "Apples."})
                                            + "\n", encoding="utf-8")
    # What the user keeps and what localRAG wrote into the index; Chroma rewrites its own files at every open.
    kept = {p: hashlib.md5(p.read_bytes()).hexdigest() for p in [gold, *docs_a.iterdir(), index / "index_info.json",
                                                                   index / "vectors.npy", *index.glob("bm25/*")]}
    common = ["--goldset", str(gold), "--docs", str(docs_a), "--index", str(index), "--no-sync", "--no-rerank",
              "--no-compare", "--no-query-cache", "--judge-cache", str(tmp_path / "cache.json")]
    with StalledServer() as server:
        first = subprocess.Popen(script(f"""
            from localrag.models import llm
            import eval_retrieval
            llm.TIMEOUT_SECONDS = 600.0  # stalled until this test ends it
            sys.exit(eval_retrieval.main({common + ["--report", str(tmp_path / "first.txt"), "--answers",
                                                     str(tmp_path / "answers.jsonl"), "--answer-judge", "stub-model",
                                                     "--quiet"]!r}))
        """), env=dict(ENV, OPENAI_BASE_URL=server.base_url), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            assert server.stalled.wait(timeout=180), first.communicate(timeout=5)
            # The first run holds its lock and waits for the judge; the second measures the same index at once.
            code, out, err = evaluate(capsys, *common, "--no-wait", "--quiet", "--report",
                                      str(tmp_path / "second.txt"))
            assert (code, err) == (0, "")
            second = [tmp_path / f"second.{suffix}" for suffix in ("txt", "json", "details.md")]
            assert out.splitlines()[-1] == f"Wrote {', '.join(map(str, second))}"
            code, out, err = run(capsys, str(docs_a), "--index", str(index), "--no-wait")
            assert (code, out) == (2, [])
            assert err == (f"error: the index {index} is being read by another process (an evaluation with "
                           f"--no-sync); wait until it has finished, or leave out --no-wait to wait for it\n")
            assert first.poll() is None  # still waiting for the judge: the lock was the first run's all along
        finally:
            first.kill()
            first.communicate(timeout=30)
    assert {p: hashlib.md5(p.read_bytes()).hexdigest() for p in kept} == kept
    assert not (tmp_path / "first.txt").exists()


def test_a_reader_waits_for_a_writer_and_this_process_never_deadlocks_on_its_own_locks(tmp_path):
    """A reader's lock (--no-sync) is refused while another process writes (or waited for); in this process a
    reader inside the writer lock reads under it, and a writer inside a reader's lock is an error, not a hang."""
    from localrag.errors import RAGError
    from localrag.index.locks import folder_lock, folder_read_lock

    index = tmp_path / "index"
    index.mkdir()
    holder = subprocess.Popen(script(f"""
        import filelock, time
        lock = filelock.FileLock({str(index / local_rag.LOCK_FILE)!r})
        lock.acquire()
        print("held", flush=True)
        time.sleep(3)
    """), env=ENV, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(RAGError) as refused:
        with folder_read_lock(index, wait=False, quiet=True):
            pass
    assert str(refused.value) == (f"the index {index} is being written by another process (add_pdfs.py or an "
                                  f"evaluation); wait until it has finished, or leave out --no-wait to wait for it")
    started = time.monotonic()
    with folder_read_lock(index, wait=True, quiet=True) as outermost:
        assert outermost and time.monotonic() - started > 1  # it waited for the writer
    holder.wait(timeout=30)
    with folder_lock(index, wait=False, quiet=True):
        with folder_read_lock(index, wait=False, quiet=True) as outermost:
            assert not outermost  # read under this process's own writer lock
    with folder_read_lock(index, wait=False, quiet=True):
        with folder_read_lock(index, wait=False, quiet=True) as outermost:
            assert not outermost
        with pytest.raises(RAGError) as own:
            with folder_lock(index, wait=True, quiet=True):
                pass
    assert str(own.value) == (f"the index {index} is being read by this run (--no-sync) and cannot be synced by it; "
                              f"run without --no-sync to sync it")
    with folder_lock(index, wait=False, quiet=True):  # every lock released
        pass


# ----------------------------------------------------------------------------- the store against the manifest

def test_a_store_that_lost_its_data_is_refused_unsynced_and_repaired_by_sync(capsys, tmp_path, docs_a):
    index = tmp_path / "index"
    assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
    (tmp_path / "gold.csv").write_text(GOLD_A, encoding="utf-8")
    # The user deletes Chroma's files but keeps index_info.json.
    (index / "chroma.sqlite3").unlink()
    for folder in [p for p in index.iterdir() if p.is_dir() and p.name != "bm25"]:
        shutil.rmtree(folder)
    import chromadb.api.client

    chromadb.api.client.SharedSystemClient.clear_system_cache()  # as a new process would open it
    code, out, err = evaluate(capsys, "--goldset", str(tmp_path / "gold.csv"), "--index", str(index), "--no-sync",
                              "--no-rerank", "--quiet", "--report", str(tmp_path / "r.txt"))
    assert code == 2 and out == ""
    assert err == (f"error: the index {index} does not match its manifest (it lists 3 chunks, but the store file "
                   f"{index / 'chroma.sqlite3'} is missing); measuring it would give wrong numbers. "
                   f"Repair it with add_pdfs.py --index {index} (or evaluate without --no-sync)\n")
    assert not (tmp_path / "r.txt").exists()
    assert sorted(p.name for p in index.iterdir()) == [".localrag.lock", "bm25", "index_info.json",
                                                       "vectors.npy"]  # nothing written

    code, out, _ = run(capsys, str(docs_a), "--index", str(index))
    assert code == 0
    assert out[:2] == ["repaired: alpha.pdf: the store holds 0 of its 1 chunks",
                       "repaired: beta.pdf: the store holds 0 of its 2 chunks"]
    assert out[2].startswith("files added 2 / updated 0 / removed 0 / unchanged 0 / failed 0 / repaired 2; "
                             "3 pages and 3 chunks")
    assert stored_sources(index) == ["alpha.pdf", "beta.pdf", "beta.pdf"]
    code, out, _ = evaluate(capsys, "--goldset", str(tmp_path / "gold.csv"), "--index", str(index), "--no-sync",
                            "--no-rerank", "--quiet", "--report", str(tmp_path / "r.txt"))
    assert code == 0 and "MRR 1.000" in out


def test_a_deleted_store_file_is_refused_without_writing_and_its_repair_leaves_no_orphan_segment(
        capsys, tmp_path, docs_a):
    index = tmp_path / "index"
    assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
    (tmp_path / "gold.csv").write_text(GOLD_A, encoding="utf-8")
    old_segments = [p.name for p in index.iterdir() if p.is_dir() and p.name != "bm25"]
    assert len(old_segments) == 1
    (index / "chroma.sqlite3").unlink()  # only the database: its segment folder stays behind
    import chromadb.api.client

    chromadb.api.client.SharedSystemClient.clear_system_cache()
    before = sorted(p.name for p in index.iterdir())
    code, out, err = evaluate(capsys, "--goldset", str(tmp_path / "gold.csv"), "--index", str(index), "--no-sync",
                              "--no-rerank", "--quiet", "--report", str(tmp_path / "r.txt"))
    assert (code, out) == (2, "") and "the store file" in err and "is missing" in err
    assert sorted(p.name for p in index.iterdir()) == before  # no empty chroma.sqlite3, no new segment folder
    with pytest.raises(local_rag.RAGError, match="is missing"):  # the chat's reader is refused the same way
        LocalRAG(index, reranker_model=None, quiet=True).retrieve("red apples", mode="dense")
    assert sorted(p.name for p in index.iterdir()) == before

    code, out, _ = run(capsys, str(docs_a), "--index", str(index))
    assert code == 0 and out[-1].startswith("files added 2 / updated 0 / removed 0 / unchanged 0 / failed 0 / "
                                            "repaired 2; 3 pages and 3 chunks embedded")
    segments = [p.name for p in index.iterdir() if p.is_dir() and p.name != "bm25"]
    assert old_segments[0] not in segments  # the orphan of the deleted database is gone
    assert stored_sources(index) == ["alpha.pdf", "beta.pdf", "beta.pdf"]


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (relative name -> bytes): what a reader must leave as it was."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _fresh_chroma_database(folder: Path) -> bytes:
    """The bytes of a valid Chroma database holding an empty collection named like the index's."""
    import chromadb

    chromadb.PersistentClient(path=str(folder)).get_or_create_collection(local_rag.COLLECTION_NAME)
    return (folder / "chroma.sqlite3").read_bytes()


# What became of chroma.sqlite3 -> what LocalRAG (also with check_store=True) and --no-sync say: the same error.
DAMAGED_STORES = {
    "empty": "the index {index} does not match its manifest (it lists 3 chunks, but the store file {db} is empty "
             "(0 bytes)); measuring it would give wrong numbers. Repair it with add_pdfs.py --index {index} (or "
             "evaluate without --no-sync)",
    "garbage": "the store file {db} of the index {index} is not a SQLite database (overwritten or damaged); the "
               "index was not changed. Move it aside (mv {db} {db}.damaged) and run add_pdfs.py --index {index}, "
               "which embeds every file again",
    "truncated": "the store file {db} of the index {index} cannot be read (database disk image is malformed); the "
                 "index was not changed. Move it aside (mv {db} {db}.damaged) and run add_pdfs.py --index {index}, "
                 "which embeds every file again",
    "emptied": "the index {index} does not match its manifest (alpha.pdf: the store holds 0 of its 1 chunks; "
               "beta.pdf: the store holds 0 of its 2 chunks); measuring it would give wrong numbers. Repair it with "
               "add_pdfs.py --index {index} (or evaluate without --no-sync)",
}


@pytest.mark.parametrize("damage", list(DAMAGED_STORES))
def test_a_damaged_store_file_is_refused_by_the_chat_as_by_no_sync_and_left_as_it_is(capsys, tmp_path, docs_a,
                                                                                   damage):
    # A 0-byte chroma.sqlite3 once gave [] for every question, also with check_store=True, while --no-sync refused it.
    index, db = tmp_path / "index", tmp_path / "index" / "chroma.sqlite3"
    assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
    (tmp_path / "gold.csv").write_text(GOLD_A, encoding="utf-8")
    store = db.read_bytes()
    db.write_bytes({"empty": b"", "garbage": b"<html>not a database</html>\n" * 50,
                    "truncated": store[:len(store) // 2], "emptied": _fresh_chroma_database(tmp_path / "fresh")}[damage])
    import chromadb.api.client

    chromadb.api.client.SharedSystemClient.clear_system_cache()  # as a new process would open it
    before = _files(index)
    message = DAMAGED_STORES[damage].format(index=index, db=db)
    for check_store in (False, True):
        for use in ("retrieve", "warm_up", "as_tool"):
            rag = LocalRAG(index, reranker_model=None, quiet=True, check_store=check_store)
            with pytest.raises(local_rag.RAGError) as raised:
                getattr(rag, use)(*(["red apples"] if use == "retrieve" else []))
            assert str(raised.value) == message, (check_store, use)
            chromadb.api.client.SharedSystemClient.clear_system_cache()
    code, out, err = evaluate(capsys, "--goldset", str(tmp_path / "gold.csv"), "--index", str(index), "--no-sync",
                              "--no-rerank", "--quiet", "--report", str(tmp_path / "r.txt"))
    assert (code, out, err) == (2, "", f"error: {message}\n")
    after = _files(index)
    if damage == "emptied":  # a valid database: Chroma opens it as it opens any (its header's change counter moves)
        assert len(after.pop("chroma.sqlite3")) == len(before.pop("chroma.sqlite3"))
    assert after == before  # byte for byte: no database created in the file, no segment folder
    assert not (tmp_path / "r.txt").exists()

    chromadb.api.client.SharedSystemClient.clear_system_cache()
    if damage in ("garbage", "truncated"):  # no sync can repair it in place: it says so, and keeps the file
        code, out, err = run(capsys, str(docs_a), "--index", str(index))
        assert (code, out, err) == (2, [], f"error: {message}\n") and _files(index) == before
        db.rename(db.with_name("chroma.sqlite3.damaged"))  # the fix the message names
    code, out, err = run(capsys, str(docs_a), "--index", str(index))
    assert code == 0 and out[-1].startswith("files added 2 / updated 0 / removed 0 / unchanged 0 / failed 0 / "
                                            "repaired 2; 3 pages and 3 chunks embedded"), (out, err)
    chromadb.api.client.SharedSystemClient.clear_system_cache()
    assert [d.metadata["source"] for d, _ in LocalRAG(index, reranker_model=None, quiet=True,
                                                      check_store=True).retrieve("red apples", k=1)] == ["alpha.pdf"]


def test_a_rebuild_removes_its_old_segment_folder_without_a_note(capsys, tmp_path, docs_a):
    index = tmp_path / "index"
    assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
    old_segments = [p.name for p in index.iterdir() if p.is_dir() and p.name != "bm25"]
    code, out, err = run(capsys, str(docs_a), "--index", str(index), "--rebuild", quiet=False)
    assert code == 0 and out[-1].startswith("files added 2 / updated 0")
    # The tool's own housekeeping after its rebuild: done, not announced.
    assert "segment folder" not in err and "Rebuilding the whole index (--rebuild was given)" in err
    assert not set(old_segments) & {p.name for p in index.iterdir()}


def test_chunks_of_no_indexed_file_are_removed_and_never_measured(tmp_path, docs_a):
    index = tmp_path / "index"
    rag = LocalRAG(index, reranker_model=None, quiet=True)
    rag.sync([docs_a], progress=False)
    vector = rag.embeddings.embed_query("Alpha page about red apples.")
    # A stray chunk (an earlier run killed mid-write, say) closer to the query than any real chunk.
    rag.vectorstore._collection.upsert(ids=["stray"], embeddings=[vector], documents=["stray"],
                                       metadatas=[{"source": "ghost.pdf", "page": 0, "file_hash": "x"}])
    fresh = LocalRAG(index, reranker_model=None, quiet=True)
    assert [d.metadata["source"] for d, _ in fresh.retrieve("Alpha page about red apples.", k=3, mode="dense")] \
        == ["alpha.pdf", "beta.pdf", "beta.pdf"]  # never the stray, and still 3 results
    assert fresh.check_index().orphan_ids == ["stray"] and fresh.check_index().describe() == []
    report = fresh.sync([docs_a], progress=False)
    assert report.orphans_removed == 1 and fresh.vectorstore._collection.count() == 3


# ----------------------------------------------------------------------------- the folder an index follows

def test_an_index_follows_its_folder(capsys, tmp_path, docs_a):
    docs_b = write_corpus(tmp_path / "docs_b", CORPUS_B)
    index = tmp_path / "index"
    assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
    assert manifest(index)["docs"] == ["../docs_a"]  # relative: an index moved with its folder still pairs

    code, out, err = run(capsys, str(docs_b), "--index", str(index))
    assert code == 2 and out == []
    assert err == (f"error: the index {index} follows {docs_a.resolve()}, not {docs_b.resolve()}; syncing it with "
                   f"another folder would replace its files. Give the folder it follows, or add --switch-folder "
                   f"(or --rebuild) to make it follow {docs_b.resolve()}\n")
    assert stored_sources(index) == ["alpha.pdf", "beta.pdf", "beta.pdf"]

    # With no paths, add_pdfs.py syncs the folder the index follows, and so does the evaluation without --docs.
    code, out, _ = run(capsys, "--index", str(index))
    assert code == 0 and out[-1].startswith("files added 0 / updated 0 / removed 0 / unchanged 2 ")
    (tmp_path / "gold.csv").write_text(GOLD_A, encoding="utf-8")
    code, out, _ = evaluate(capsys, "--goldset", str(tmp_path / "gold.csv"), "--index", str(index), "--no-rerank",
                            "--quiet", "--report", str(tmp_path / "r.txt"))
    assert code == 0 and "MRR 1.000" in out
    assert stored_sources(index) == ["alpha.pdf", "beta.pdf", "beta.pdf"]

    code, out, _ = run(capsys, str(docs_b), "--index", str(index), "--switch-folder")
    assert code == 0 and out[-1].startswith("files added 1 / updated 0 / removed 2 / unchanged 0 ")
    assert manifest(index)["docs"] == ["../docs_b"]


def test_an_empty_folder_never_empties_an_index_unasked(capsys, tmp_path, docs_a):
    index = tmp_path / "index"
    assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
    (tmp_path / "moved").mkdir()
    for pdf in list(docs_a.iterdir()):  # the user moved the PDFs elsewhere, or a network drive is not mounted
        shutil.move(pdf, tmp_path / "moved" / pdf.name)
    code, out, err = run(capsys, str(docs_a), "--index", str(index))
    assert code == 2 and out == []
    assert err == (f"error: {docs_a} holds no PDF files; syncing would remove all 2 files from the index {index}. "
                   f"Check the path, or add --allow-empty to empty the index\n")
    assert manifest(index)["counts"]["files"] == 2
    assert run(capsys, str(docs_a), "--index", str(index), "--rebuild")[:2] == (2, [])  # explicit flag only
    assert manifest(index)["counts"]["files"] == 2
    code, out, _ = run(capsys, str(docs_a), "--index", str(index), "--allow-empty")
    assert code == 0 and out[-1].startswith("files added 0 / updated 0 / removed 2 ")


# ----------------------------------------------------------------------------- stores localRAG did not make

def test_a_foreign_collection_is_never_written_or_deleted(capsys, tmp_path, docs_a):
    import chromadb

    index = tmp_path / "index"
    client = chromadb.PersistentClient(path=str(index))
    foreign = client.create_collection("localrag")
    foreign.add(ids=[f"f{i}" for i in range(10)], embeddings=[[float(i)] * 768 for i in range(10)],
                documents=["theirs"] * 10)
    for argv in ([str(docs_a), "--index", str(index)], [str(docs_a), "--index", str(index), "--rebuild"]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == []
        assert err == (f"error: the index {index} holds a Chroma collection 'localrag' with 10 chunks that localRAG "
                       f"did not make (no index_info.json); it is left untouched. Use another index folder "
                       f"(--index), or move this one away yourself\n")
        assert client.get_collection("localrag").count() == 10


def test_a_store_of_another_dimension_is_refused_and_kept_until_rebuild(capsys, tmp_path, docs_a):
    index = tmp_path / "index"
    assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
    rag = LocalRAG(index, reranker_model=None, quiet=True)
    collection = rag.vectorstore._collection
    ids = collection.get()["ids"]
    rag.index.place.client().delete_collection("localrag")  # as if built by a 768-dimension model
    col = rag.index.place.client().create_collection("localrag", metadata={"hnsw:space": "cosine",
                                                                     local_rag.COLLECTION_MARKER: 1})
    col.add(ids=ids, embeddings=[[0.5] * 768] * len(ids), documents=["x"] * len(ids),
            metadatas=[{"source": "alpha.pdf", "file_hash": "old"}] * len(ids))
    write_pdf(docs_a / "delta.pdf", ["Delta page about orange kumquats."])
    code, out, err = run(capsys, str(docs_a), "--index", str(index))
    assert code == 2 and out == []
    assert err == (f"error: the index {index} holds vectors of 768 dimensions, but all-MiniLM-L6-v2 makes 384: it "
                   f"was built with another embedding model. Rebuild it with add_pdfs.py --index {index} --rebuild, "
                   f"or use another index folder\n")
    assert col.count() == 3  # nothing deleted
    code, out, _ = run(capsys, str(docs_a), "--index", str(index), "--rebuild")
    assert code == 0 and out[-1].startswith("files added 3 ")


# ----------------------------------------------------------------------------- names and links

def test_names_equal_after_normalisation_are_an_error_naming_both(capsys, tmp_path):
    docs = tmp_path / "docs"
    nfc, nfd = "\u00dcbersicht.pdf", unicodedata.normalize("NFD", "\u00dcbersicht.pdf")
    write_pdf(docs / nfc, ["Erste Übersicht."])
    write_pdf(docs / nfd, ["Zweite Übersicht."])
    code, out, err = run(capsys, str(docs), "--index", str(tmp_path / "index"))
    first, second = sorted([str(docs / nfc), str(docs / nfd)])
    assert code == 2 and out == []
    assert err == (f"error: two files have the same name '\u00dcbersicht.pdf' after Unicode normalisation: "
                   f"{first!r} and {second!r}; rename one of them\n")
    assert not (tmp_path / "index").exists()


def test_links_are_followed_only_inside_the_folder_and_every_skip_is_named(capsys, tmp_path):
    docs = tmp_path / "docs"
    write_pdf(docs / "real.pdf", ["The real page about lighthouses."])
    outside = write_pdf(tmp_path / "outside" / "real.pdf", ["An outside page about deserts."])
    (docs / "sub").mkdir()
    (docs / "sub" / "real.pdf").symlink_to(outside)  # once shadowed docs/real.pdf
    (docs / "alias.pdf").symlink_to(docs / "real.pdf")  # inside: followed
    (docs / "passwd.pdf").symlink_to("/etc/passwd")
    (docs / "dangling.pdf").symlink_to(docs / "gone.pdf")
    (docs / "loop.pdf").symlink_to(docs / "loop.pdf")
    (docs / "linked_folder").symlink_to(tmp_path / "outside")
    code, out, err = run(capsys, str(docs), "--index", str(tmp_path / "index"))
    assert code == 1
    assert out[:-1] == [
        "added: alias.pdf",
        "added: real.pdf",
        "skipped: linked_folder: a link to a folder: links to folders are not followed (put the files into the "
        "docs folder)",
        "skipped: dangling.pdf: a dangling link (its target "
        f"{str(docs / 'gone.pdf')!r} does not exist)",
        "skipped: loop.pdf: a link loop",
        "skipped: passwd.pdf: a link to a file outside the docs folder (not read)",
        "skipped: sub/real.pdf: a link to a file outside the docs folder (not read)",
    ]
    assert out[-1].startswith("files added 2 / updated 0 / removed 0 / unchanged 0 / failed 0 / skipped 5; ")
    assert stored_sources(tmp_path / "index") == ["alias.pdf", "real.pdf"]
    assert "loop.pdf" not in err and "passwd" not in err  # each skip is named once: in the output above


# ----------------------------------------------------------------------------- a damaged manifest

@pytest.mark.parametrize("content, problem", [
    ('{"files": {"alpha.pdf": {"sha256": "ab', "it cannot be read (JSONDecodeError: Unterminated string starting "
                                              "at: line 1 column 36 (char 35))"),
    ("[]", "it holds a JSON list instead of an object"),
    # `{}` is no empty index's manifest: once read as "no index", and a sync deleted the stored chunks.
    ("{}", "it lacks the 'files' and 'settings' entries that every manifest localRAG writes has"),
    ('{"files": {}}', "it lacks the 'settings' entry that every manifest localRAG writes has"),
])
def test_a_damaged_manifest_is_named_and_rebuild_moves_it_aside(capsys, tmp_path, docs_a, content, problem):
    index = tmp_path / "index"
    assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
    (index / "index_info.json").write_text(content, encoding="utf-8")
    store = (index / "chroma.sqlite3").read_bytes()
    message = (f"error: the index manifest {index / 'index_info.json'} is damaged: {problem}; run add_pdfs.py "
               f"--index {index} --rebuild (it moves the damaged manifest aside and builds the index again)\n")
    code, out, err = run(capsys, str(docs_a), "--index", str(index))
    assert (code, out, err) == (2, [], message)
    assert run(capsys, "--index", str(index))[:3] == (2, [], message)  # the folder it follows is not guessed
    assert (index / "chroma.sqlite3").read_bytes() == store  # nothing deleted
    (tmp_path / "gold.csv").write_text(GOLD_A, encoding="utf-8")
    for extra in ([], ["--no-sync"]):
        code, out, err = evaluate(capsys, "--goldset", str(tmp_path / "gold.csv"), "--index", str(index),
                                  "--docs", str(docs_a), "--no-rerank", "--quiet", "--report",
                                  str(tmp_path / "r.txt"), *extra)
        assert (code, out, err) == (2, "", message)
    code, out, err = run(capsys, str(docs_a), "--index", str(index), "--rebuild")
    assert code == 0 and out[-1].startswith("files added 2 ")
    aside = [p.name for p in index.iterdir() if p.name.startswith("index_info.json.damaged-")]
    assert len(aside) == 1 and (index / aside[0]).read_text(encoding="utf-8") == content
    assert stored_sources(index) == ["alpha.pdf", "beta.pdf", "beta.pdf"]


def test_a_json_report_written_over_the_manifest_deletes_nothing(capsys, tmp_path, docs_a):
    index = tmp_path / "index"
    assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
    settings = manifest(index)["settings"]
    report = {"generated": "2026-12-03 10:00:00", "settings": settings, "metrics": {"mrr": 1.0}, "per_query": []}
    (index / "index_info.json").write_text(json.dumps(report), encoding="utf-8")
    code, out, err = run(capsys, str(docs_a), "--index", str(index))
    assert (code, out) == (2, []) and "is damaged: it lacks the 'files' entry" in err
    # The same, shaped like a manifest (files and settings) but without the format marker localRAG writes.
    (index / "index_info.json").write_text(json.dumps({"files": {}, "settings": settings}), encoding="utf-8")
    code, out, err = run(capsys, str(docs_a), "--index", str(index))
    assert (code, out) == (2, [])
    assert err == (f"error: the index manifest {index / 'index_info.json'} carries no format marker, so localRAG did "
                   f"not write it (or an old version did), and the store holds 3 chunks it does not list; nothing "
                   f"was deleted. Put the right manifest back, or run add_pdfs.py --index {index} --rebuild to "
                   f"build the index again\n")
    rag = LocalRAG(index, reranker_model=None, quiet=True)
    assert rag.vectorstore._collection.count() == 3  # every chunk still stored


# ----------------------------------------------------------------------------- workers, Ctrl-C, vanishing files

@pytest.fixture
def slow_env(tmp_path) -> dict:
    """Environment whose Python processes, the spawned extraction workers too, take a minute per PDF; each
    process that starts extracting leaves a file named after its pid in the folder `started_folder(env)`."""
    folder = tmp_path / "slow"
    (folder / "started").mkdir(parents=True)
    (folder / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import os, time
        from localrag.text import pdf
        real = pdf.extract_pdf
        def slow(path, loader):
            open(os.path.join({str(folder / "started")!r}, str(os.getpid())), "w").close()
            time.sleep(60)
            return real(path, loader)
        pdf.extract_pdf = slow
    """), encoding="utf-8")
    return dict(ENV, PYTHONPATH=os.pathsep.join([str(folder), str(ROOT)]))


REPORT_WORKERS = """
    import multiprocessing, threading, time

    def report():
        while len(multiprocessing.active_children()) < 2:
            time.sleep(0.1)
        print(*[p.pid for p in multiprocessing.active_children()], flush=True)

    threading.Thread(target=report, daemon=True).start()
"""


def started_folder(env: dict) -> Path:
    """Where slow_env's processes note that they are extracting (their initializer has run by then)."""
    return Path(env["PYTHONPATH"].split(os.pathsep)[0]) / "started"  # the folder of sitecustomize.py


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_extraction_workers_die_with_their_parent_after_kill_9(tmp_path, slow_env):
    paths = [str(write_pdf(tmp_path / f"f{i}.pdf", [f"Page {i}."])) for i in range(4)]
    parent = subprocess.Popen(script(REPORT_WORKERS + f"""
    import pathlib, local_rag
    for pdf in local_rag.iter_extracted([pathlib.Path(p) for p in {paths!r}], "pypdfium2", 2):
        pass
    """), env=slow_env, stdout=subprocess.PIPE, text=True)
    workers = [int(pid) for pid in parent.stdout.readline().split()]
    assert len(workers) == 2 and all(map(_alive, workers))
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(map(_alive, workers))


def test_ctrl_c_during_extraction_prints_one_line(tmp_path, slow_env):
    docs = tmp_path / "docs"
    for i in range(4):
        write_pdf(docs / f"f{i}.pdf", [f"Page {i}."])
    proc = subprocess.Popen(script(REPORT_WORKERS + f"""
    import faulthandler, signal
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the stacks, should it not stop
    # Ctrl-C live as in a terminal: a test runner started in the background (`cmd &` in a script) passes SIGINT
    # on ignored, and Python then never raises KeyboardInterrupt (seen in CI: the sync waited on).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import add_pdfs
    sys.exit(add_pdfs.main([{str(docs)!r}, "--index", {str(tmp_path / 'index')!r}, "--quiet"]))
    """), env=slow_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    workers = [int(pid) for pid in proc.stdout.readline().split()]
    assert len(workers) == 2
    # Ctrl-C once both workers are extracting: their initializer (Ctrl-C ignored) has run, and the parent waits
    # for their results. A fixed sleep was not enough on a fresh venv, where a worker's imports take seconds.
    deadline = time.monotonic() + 120
    while len(list(started_folder(slow_env).iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(int(p.name) for p in started_folder(slow_env).iterdir()) == sorted(workers)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGUSR1)
        time.sleep(2)
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"add_pdfs.py did not stop within 60 s of Ctrl-C; stdout {out!r}, stderr {err!r}")
    assert proc.returncode == 130 and out == ""
    assert err == "interrupted: the index holds every file that was completely indexed; run again to finish\n"
    assert not any(map(_alive, workers))


def test_a_file_deleted_while_the_folder_is_read_is_skipped_by_name(capsys, tmp_path, docs_a, monkeypatch):
    real = local_rag.file_sha256

    def vanishing(path):
        if Path(path).name == "beta.pdf":
            Path(path).unlink()
        return real(path)

    monkeypatch.setattr(local_rag, "file_sha256", vanishing)
    code, out, _ = run(capsys, str(docs_a), "--index", str(tmp_path / "index"))
    assert code == 1
    assert out[:2] == ["added: alpha.pdf",
                       "skipped: beta.pdf: could not be read (FileNotFoundError: No such file or directory)"]
    assert out[2].startswith("files added 1 / updated 0 / removed 0 / unchanged 0 / failed 0 / skipped 1; ")


# ----------------------------------------------------------------------------- read-only and full disks

def _mount(*argv: str) -> bool:
    return subprocess.run(["mount", *argv], capture_output=True).returncode == 0


@pytest.fixture
def read_only_copy(tmp_path):
    """A read-only bind mount of a folder (root only); yields a function that mounts `src` and returns the path."""
    mounted = []

    def make(src: Path) -> Path:
        target = tmp_path / f"ro_{src.name}"
        target.mkdir()
        if not (_mount("--bind", str(src), str(target)) and _mount("-o", "remount,ro,bind", str(target))):
            subprocess.run(["umount", str(target)], capture_output=True)
            pytest.skip("read-only bind mounts need root and mount(8)")
        mounted.append(target)
        return target

    yield make
    for target in mounted:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def test_a_read_only_index_is_evaluated_with_no_sync_and_never_written(capsys, tmp_path, docs_a, read_only_copy):
    index = tmp_path / "index"
    assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
    (tmp_path / "gold.csv").write_text(GOLD_A, encoding="utf-8")
    common = ["--goldset", str(tmp_path / "gold.csv"), "--no-rerank", "--quiet", "--mode", "hybrid"]
    code, writable, _ = evaluate(capsys, *common, "--index", str(index), "--no-sync",
                                 "--report", str(tmp_path / "w.txt"))
    assert code == 0
    ro = read_only_copy(index)
    with pytest.raises(OSError):
        (ro / "probe").write_text("x")
    code, out, err = evaluate(capsys, *common, "--index", str(ro), "--no-sync", "--report", str(tmp_path / "r.txt"))
    assert code == 0 and err == ""
    # The same metrics; the same files written, at the other report path.
    assert [line.split(":", 1)[1] for line in out.splitlines()[:-1]] == [
        line.split(":", 1)[1] for line in writable.splitlines()[:-1]]
    assert out.splitlines()[-1] == writable.splitlines()[-1].replace(f"{tmp_path}/w.", f"{tmp_path}/r.")
    code, out, err = run(capsys, str(docs_a), "--index", str(ro))
    assert code == 2
    assert err == (f"error: the index folder {ro} is read-only: it can be evaluated as it is (with --no-sync), not "
                   f"changed; make it writable to sync it\n")


def test_a_read_only_index_without_its_vector_file_is_read_from_the_store_and_left_as_it_is(capsys, tmp_path, docs_a,
                                                                                          read_only_copy):
    index = tmp_path / "index"
    assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
    (tmp_path / "gold.csv").write_text(GOLD_A, encoding="utf-8")
    common = ["--goldset", str(tmp_path / "gold.csv"), "--no-rerank", "--quiet", "--no-sync"]
    code, writable, _ = evaluate(capsys, *common, "--index", str(index), "--report", str(tmp_path / "w.txt"))
    assert code == 0
    (index / "vectors.npy").unlink()  # an index synced before the vector file existed
    ro = read_only_copy(index)
    code, out, err = evaluate(capsys, *common, "--index", str(ro), "--report", str(tmp_path / "r.txt"))
    assert code == 0 and err == ""
    # The same metrics, from the store's vectors; the same files written, at the other report path.
    assert [line.split(":", 1)[1] for line in out.splitlines()[:-1]] == [
        line.split(":", 1)[1] for line in writable.splitlines()[:-1]]
    assert out.splitlines()[-1] == writable.splitlines()[-1].replace(f"{tmp_path}/w.", f"{tmp_path}/r.")
    assert not (ro / "vectors.npy").exists() and not (index / "vectors.npy").exists()


def test_a_full_disk_gives_one_message_and_a_consistent_index(capsys, tmp_path, docs_a, monkeypatch):
    import chromadb.api.models.Collection as collection_module

    write_pdf(docs_a / "gamma.pdf", ["Gamma page about blue plums."])
    monkeypatch.setattr(local_rag, "INDEX_GROUP_CHUNKS", 2)
    real_upsert = collection_module.Collection.upsert
    calls = []

    def full(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise collection_module.InternalError("database or disk is full") if hasattr(
                collection_module, "InternalError") else OSError(28, "No space left on device")
        return real_upsert(self, *args, **kwargs)

    monkeypatch.setattr(collection_module.Collection, "upsert", full)
    index = tmp_path / "index"
    code, out, err = run(capsys, str(docs_a), "--index", str(index), "--quiet")
    assert code == 2 and out == []
    assert err == (f"error: no space left on the device while writing the index {index}: the index keeps every "
                   f"file that was completely indexed; free some space and run the same command again\n")
    rag = LocalRAG(index, reranker_model=None, quiet=True)
    assert sorted(rag.files) == ["alpha.pdf"] and rag.check_index().describe() == []
    monkeypatch.setattr(collection_module.Collection, "upsert", real_upsert)
    code, out, _ = run(capsys, str(docs_a), "--index", str(index), "--quiet")
    assert code == 0 and out[-1].startswith("files added 2 / updated 0 / removed 0 / unchanged 1 ")
    assert LocalRAG(index, reranker_model=None, quiet=True).check_index().describe() == []


def test_a_real_full_disk(capsys, tmp_path):
    """A 1 MiB tmpfs (root only): Chroma's own write fails; after the disk grows, the next sync finishes."""
    docs = tmp_path / "docs"
    for i in range(10):
        write_pdf(docs / f"f{i}.pdf", [" ".join(f"word{i}_{j}_{k}" for k in range(250)) for j in range(8)])
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)):
        pytest.skip("mounting a tmpfs needs root")
    try:
        index = disk / "index"
        code, out, err = run(capsys, str(docs), "--index", str(index), "--quiet")
        assert code == 2 and out == []
        assert err == (f"error: no space left on the device while writing the index {index}: the index keeps every "
                       f"file that was completely indexed; free some space and run the same command again\n")
        assert _mount("-o", "remount,size=64m", str(disk))
        # The user frees space and runs again: a new process (this one's Chroma client saw the failed write).
        again = subprocess.run([sys.executable, str(ROOT / "add_pdfs.py"), str(docs), "--index", str(index),
                                "--quiet"], env=ENV, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert again.stdout.splitlines()[-1].startswith("files added ")
        checked = subprocess.run(script(f"""
            from local_rag import LocalRAG
            rag = LocalRAG({str(index)!r}, reranker_model=None, quiet=True)
            print(len(rag.files), rag.check_index().describe())
        """), env=ENV, capture_output=True, text=True, timeout=300)
        assert checked.stdout == "10 []\n", checked.stderr
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)  # lazy: Chroma still holds files open


# ----------------------------------------------------------------------------- umask

def test_created_files_respect_the_umask(capsys, tmp_path, docs_a):
    old = os.umask(0o077)
    try:
        index = tmp_path / "index"
        assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
        (tmp_path / "gold.csv").write_text(GOLD_A, encoding="utf-8")
        assert evaluate(capsys, "--goldset", str(tmp_path / "gold.csv"), "--index", str(index), "--no-rerank",
                        "--quiet", "--report", str(tmp_path / "out" / "r.txt"))[0] == 0
    finally:
        os.umask(old)
    created = [p for p in [*index.rglob("*"), *(tmp_path / "out").rglob("*")] if p.is_file()]
    assert {p.name for p in created} >= {"index_info.json", "chroma.sqlite3", local_rag.LOCK_FILE, "r.txt", "r.json"}
    assert {p.relative_to(tmp_path).as_posix(): oct(p.stat().st_mode & 0o077) for p in created
            if p.stat().st_mode & 0o077} == {}


def as_other_user(argv: list[str], env: dict, **kwargs) -> subprocess.Popen:
    """`argv` as a user who may not write the index: nobody (via setpriv) when the tests run as root, else the
    user running them, for whom `chmod -R a-w` already takes the write permission away."""
    prefix = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as a non-root user needs setpriv(1)")
        prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    # Ctrl-C as in a terminal: a test runner started in the background (`cmd &` in a script) passes SIGINT on
    # ignored, and Python then never raises KeyboardInterrupt (seen in CI: the run finished with exit 0).
    return subprocess.Popen(prefix + argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kwargs)


@pytest.fixture
def unwritable_index(capsys, tmp_path):
    """(index folder with every file and folder read-only for all, goldset, empty TMPDIR, env) in a world-readable
    folder outside pytest's private one, so that nobody can read them."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="localrag-ro-test-"))
    os.chmod(base, 0o755)
    docs_a = write_corpus(base / "docs", CORPUS_A)
    index = base / "index"
    assert run(capsys, str(docs_a), "--index", str(index))[0] == 0
    (base / "gold.csv").write_text(GOLD_A, encoding="utf-8")
    temp = base / "tmp"
    temp.mkdir(mode=0o777)
    os.chmod(temp, 0o777)
    out = base / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    for folder, dirs, files in os.walk(index):
        for name in files:
            os.chmod(Path(folder) / name, 0o444)
    for folder, _, _ in sorted(os.walk(index), reverse=True):
        os.chmod(folder, 0o555)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(temp), "TMPDIR": str(temp), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    yield index, base / "gold.csv", temp, out, env, docs_a
    for folder, _, _ in os.walk(base):
        os.chmod(folder, 0o755)
    shutil.rmtree(base, ignore_errors=True)


def test_an_index_read_only_for_a_non_root_user_is_evaluated_from_a_copy_that_is_always_removed(unwritable_index):
    index, gold, temp, out, env, docs = unwritable_index
    before = sorted((str(p), p.stat().st_mode) for p in index.rglob("*"))
    argv = [sys.executable, str(ROOT / "eval_retrieval.py"), "--goldset", str(gold), "--index", str(index),
            "--no-sync", "--no-rerank", "--mode", "hybrid", "--no-query-cache", "--no-compare"]
    done = as_other_user([*argv, "--report", str(out / "r.txt")], env)
    stdout, stderr = done.communicate(timeout=300)
    assert done.returncode == 0, stderr
    assert f"note: the index {index} is read-only; reading a temporary copy of it" in stderr
    assert "MRR 1.000" in stdout
    assert list(temp.glob("localrag-*")) == []  # the copy is gone (torch may leave its own cache folder)
    assert sorted((str(p), p.stat().st_mode) for p in index.rglob("*")) == before

    # Ctrl-C once the copy exists: exit 130, and the copy is removed all the same.
    running = as_other_user([*argv, "--report", str(out / "c.txt")], env)
    deadline = time.monotonic() + 120
    while not list(temp.glob("localrag-readonly-*/index/chroma.sqlite3")) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert running.poll() is None, running.communicate()
    running.send_signal(signal.SIGINT)
    _, stderr = running.communicate(timeout=120)
    assert running.returncode == 130, stderr
    assert list(temp.glob("localrag-*")) == []

    # A docs folder this user may not read is a clear error too, not a traceback.
    os.chmod(docs, 0o700)
    done = as_other_user([*argv, "--report", str(out / "d.txt")], env)
    _, stderr = done.communicate(timeout=300)
    if os.geteuid() == 0:  # (a non-root owner can still read its own folder)
        assert (done.returncode, stderr) == (2, f"error: docs folder {docs} cannot be read (Permission denied); "
                                                f"pass --docs FOLDER with your PDFs, or make it readable\n")
