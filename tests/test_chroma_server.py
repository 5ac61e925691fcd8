"""A real Chroma server (`chroma run`) on 127.0.0.1: build through it, evaluate, restart, nothing lost."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import add_pdfs
import eval_retrieval
import local_rag
from local_rag import LocalRAG, RAGError

GOLDSET = """question;expected_source;expected_page
How sensitive is the option value to volatility?;options.pdf;1
Wie erwacht Gregor Samsa?;Literatur_Übersicht.pdf;1
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def chroma_binary() -> str:
    beside = Path(sys.executable).parent / "chroma"
    found = str(beside) if beside.exists() else shutil.which("chroma")
    if not found:
        pytest.fail("the `chroma` command (from the chromadb package in requirements.txt) is not installed")
    return found


class ChromaServer:
    """`chroma run` as a child process, started and stopped by the test."""

    def __init__(self, path: Path, port: int):
        self.path, self.port, self.process = path, port, None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.path.parent / f"chroma-{self.port}.log", "ab")
        self.process = subprocess.Popen([chroma_binary(), "run", "--path", str(self.path), "--host", "127.0.0.1",
                                         "--port", str(self.port)], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"chroma run exited with {self.process.returncode}; see {log.name}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.2)
        pytest.fail("chroma run did not open its port within 60 s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


@pytest.fixture
def server(tmp_path):
    srv = ChromaServer(tmp_path / "chroma-data", free_port())
    srv.start()
    yield srv
    srv.stop()


def keys(hits):
    return [(doc.metadata["source"], doc.metadata["page"]) for doc, _ in hits]


def test_build_evaluate_restart_through_a_chroma_server(server, tiny_docs, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("local_rag.CACHE_DIR", str(tmp_path / "cache"))  # BM25 arrays of server indexes
    assert add_pdfs.main([str(tiny_docs), "--chroma-url", server.url, "--quiet"]) == 0
    assert "files added 4 / updated 0 / removed 0 / unchanged 0 / failed 0" in capsys.readouterr().out

    goldset = tmp_path / "goldset.csv"
    goldset.write_text(GOLDSET, encoding="utf-8")
    report = tmp_path / "report.txt"
    assert eval_retrieval.main(["--goldset", str(goldset), "--docs", str(tiny_docs), "--chroma-url", server.url,
                                "--report", str(report), "--no-compare", "--quiet"]) == 0
    text = report.read_text(encoding="utf-8")
    assert f"Index:              {server.url} collection localrag-" in text
    assert "(4 files, 6 pages, 5 chunks)" in text
    assert "Hit@5    1.000  (2 of 2)" in text

    before = LocalRAG("unused", reranker_model=None, chroma_url=server.url, quiet=True)
    hybrid_before = keys(before.retrieve("How sensitive is the option value to volatility?", k=5))
    server.stop()
    server.start()

    # A fresh client after the restart: the manifest, the chunks and so BM25 are all still there.
    after = LocalRAG("unused", reranker_model=None, chroma_url=server.url, quiet=True)
    assert after.info["counts"] == {"files": 4, "pages": 6, "chunks": 5}
    assert after.vectorstore._collection.count() == 5
    assert keys(after.retrieve("How sensitive is the option value to volatility?", k=5)) == hybrid_before
    resync = after.sync([tiny_docs], progress=False)
    assert (len(resync.unchanged), resync.chunks) == (4, 0)


def test_unreachable_server_is_a_clear_error(tiny_docs, capsys):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert add_pdfs.main([str(tiny_docs), "--chroma-url", url, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"error: cannot reach the Chroma server at {url}" in err
    assert "start one with `chroma run --path DIR --port PORT` or check --chroma-url" in err
    with pytest.raises(RAGError, match="is not of the form http://HOST:PORT"):
        LocalRAG("unused", reranker_model=None, chroma_url="localhost:8000", quiet=True)


def test_a_server_index_has_one_writer(server, tiny_docs, tmp_path, capsys, monkeypatch):
    """Another host's fresh lock record makes --no-wait fail; a record without a heartbeat for long is taken over."""

    monkeypatch.setattr("local_rag.CACHE_DIR", str(tmp_path / "cache"))
    rag = LocalRAG("unused", reranker_model=None, chroma_url=server.url, quiet=True)
    record = {"token": "otherhost:4242:abcd", "heartbeat": time.time()}
    rag.index.place.info_collection().upsert(ids=["writer_lock"], embeddings=[[1.0]], documents=[json.dumps(record)])
    capsys.readouterr()
    assert add_pdfs.main([str(tiny_docs), "--chroma-url", server.url, "--quiet", "--no-wait"]) == 2
    assert capsys.readouterr().err == (f"error: the index {rag.location} is being written by otherhost:4242 "
                                       f"(host:pid); wait until it has finished, or leave out --no-wait to wait "
                                       f"for it\n")
    record["heartbeat"] = time.time() - local_rag.SERVER_LOCK_STALE_SECONDS - 1  # its writer died long ago
    rag.index.place.info_collection().upsert(ids=["writer_lock"], embeddings=[[1.0]], documents=[json.dumps(record)])
    assert add_pdfs.main([str(tiny_docs), "--chroma-url", server.url, "--quiet", "--no-wait"]) == 0
    assert rag.index.place.info_collection().get(ids=["writer_lock"])["ids"] == []  # released after the sync
