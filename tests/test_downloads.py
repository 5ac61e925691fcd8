"""Named benchmarks (localrag/datasets/downloads.py) against a local HTTP server started here: nothing leaves the machine.

The server serves a tiny BEIR zip in the published layout (one top folder NAME/ with corpus.jsonl, queries.jsonl,
qrels/test.tsv) at BEIR_URL, and a tiny Hugging Face dataset repository (the tree listing, the revision info and the
resolve URLs huggingface_hub asks for) holding Open RAGBench's pdf/arxiv layout with two papers. Every request is
counted, so that "the second run makes no request" is a checked fact.

The trap: the hub repository also holds an official/pdf/arxiv copy in some tests; pdf/arxiv must win, and a folder
given by hand with both must be read from pdf/arxiv too.
"""
from __future__ import annotations

import hashlib
import io
import json
import socket
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import eval_retrieval as er
from localrag.datasets import beir as datasets, downloads

COMMIT = "a" * 40


class Server:
    """ThreadingHTTPServer on 127.0.0.1, port 0; routes: path (without query) -> (status, headers, body)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.requests: list[str] = []
        self.truncate: dict[str, int] = {}  # path -> bytes actually sent, though Content-Length says all
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep the test output clean
                pass

            def _answer(self, body_too: bool) -> None:
                path = self.path.split("?", 1)[0]
                server.requests.append(f"{self.command} {path}")
                status, headers, body = server.routes.get(path, (404, {}, b"not found"))
                self.send_response(status)
                for key, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(key, value)
                self.end_headers()
                if body_too:
                    self.wfile.write(body[: server.truncate.get(path, len(body))])
                    self.wfile.flush()
                    if path in server.truncate:
                        self.close_connection = True

            def do_GET(self) -> None:
                self._answer(True)

            def do_HEAD(self) -> None:
                self._answer(False)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "Server":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    with Server() as running:
        yield running


# ----------------------------------------------------------------------------- BEIR


BEIR_FILES = {
    "corpus.jsonl": "".join(json.dumps(d) + "\n" for d in (
        {"_id": "d1", "title": "Vaccines", "text": "Vaccines train the immune system."},
        {"_id": "d2", "title": "Coffee", "text": "Coffee holds caffeine."},
        {"_id": "d3", "title": "Tea", "text": "Tea holds less caffeine than coffee."})),
    "queries.jsonl": "".join(json.dumps(q) + "\n" for q in (
        {"_id": "q1", "text": "How do vaccines work?"}, {"_id": "q2", "text": "Which drink has caffeine?"},
        {"_id": "q3", "text": "A training query"})),
    "qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq2\td3\t1\n",
    "qrels/train.tsv": "query-id\tcorpus-id\tscore\nq3\td1\t1\n",
}


def beir_zip(name: str) -> bytes:
    """A zip in BEIR's published layout: one top folder NAME/."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path, text in BEIR_FILES.items():
            zf.writestr(f"{name}/{path}", text)
    return buffer.getvalue()


@pytest.fixture
def beir(server, monkeypatch):
    """The server serving tinyfact.zip with its md5 registered as the published one."""
    body = beir_zip("tinyfact")
    server.routes["/tinyfact.zip"] = (200, {"Content-Type": "application/zip"}, body)
    monkeypatch.setattr(downloads, "BEIR_URL", server.url + "/{name}.zip")
    monkeypatch.setattr(downloads, "BEIR_MD5", {"tinyfact": hashlib.md5(body).hexdigest()})
    return server


def test_beir_name_is_downloaded_once_then_read_without_network(beir, tmp_path):
    data = tmp_path / "data"
    messages: list[str] = []
    folder = downloads.resolve_dataset("beir/tinyfact", data, log=messages.append)
    assert folder == data / "beir" / "tinyfact"
    assert beir.requests == ["GET /tinyfact.zip"]
    ds = datasets.load_beir(folder)
    assert ds.describe() == "tinyfact (test): 3 documents, 2 queries, 3 judgements (3 relevant)"
    assert datasets.available_splits(folder) == ["test", "train"]
    assert sorted(p.name for p in (data / "beir").iterdir()) == ["tinyfact"]  # no temporary file left
    assert messages[-1] == (f"Downloaded beir/tinyfact ({len(beir.routes['/tinyfact.zip'][2]):,} bytes, md5 "
                            f"checked) into {folder}")
    # Second run: the cached folder, no request at all.
    assert downloads.resolve_dataset("beir/tinyfact", data, log=messages.append) == folder
    assert beir.requests == ["GET /tinyfact.zip"]


def test_corrupt_download_is_detected_and_not_cached(beir, tmp_path):
    good = beir.routes["/tinyfact.zip"][2]
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF  # same length, one byte flipped
    beir.routes["/tinyfact.zip"] = (200, {}, bytes(bad))
    data = tmp_path / "data"
    with pytest.raises(downloads.DownloadError) as caught:
        downloads.resolve_dataset("beir/tinyfact", data, log=lambda m: None)
    target = data / "beir" / "tinyfact"
    assert str(caught.value) == (
        f"Cannot download beir/tinyfact from {beir.url}/tinyfact.zip: md5 {hashlib.md5(bad).hexdigest()} differs "
        f"from the published {hashlib.md5(good).hexdigest()} (a corrupt or changed file).\n"
        f"Download it by hand and unpack it so that {target / 'corpus.jsonl'} exists (the zip holds one folder, "
        f"tinyfact/), or give the unpacked folder as the dataset path.")
    assert list((data / "beir").iterdir()) == []  # nothing cached, no temporary file left
    # Not cached: once the server is right again, the next run downloads.
    beir.routes["/tinyfact.zip"] = (200, {}, good)
    assert downloads.resolve_dataset("beir/tinyfact", data, log=lambda m: None) == target
    assert beir.requests == ["GET /tinyfact.zip", "GET /tinyfact.zip"]


def test_truncated_download_is_detected_and_not_cached(beir, tmp_path):
    body = beir.routes["/tinyfact.zip"][2]
    beir.truncate["/tinyfact.zip"] = 100  # the connection ends after 100 bytes
    data = tmp_path / "data"
    with pytest.raises(downloads.DownloadError) as caught:
        downloads.resolve_dataset("beir/tinyfact", data, log=lambda m: None)
    assert str(caught.value).startswith(f"Cannot download beir/tinyfact from {beir.url}/tinyfact.zip: the "
                                        f"connection ended after 100 of {len(body):,} bytes.\n")
    assert list((data / "beir").iterdir()) == []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_offline_gives_one_clear_message_and_exit_2(tmp_path, capsys, monkeypatch):
    """No server listens: the CLI prints one message with the address and where to put the folder, no traceback."""
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setattr(downloads, "BEIR_URL", url + "/{name}.zip")
    data = tmp_path / "data"
    code = er.main(["--dataset", "beir/scifact", "--data-dir", str(data), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (f"error: Cannot download beir/scifact from {url}/scifact.zip: [Errno 111] Connection refused.\n"
                   f"Download it by hand and unpack it so that {data / 'beir' / 'scifact' / 'corpus.jsonl'} exists "
                   f"(the zip holds one folder, scifact/), or give the unpacked folder as the dataset path.\n")
    assert list((data / "beir").iterdir()) == []


def test_http_error_names_the_status(server, tmp_path, monkeypatch):
    monkeypatch.setattr(downloads, "BEIR_URL", server.url + "/{name}.zip")
    with pytest.raises(downloads.DownloadError) as caught:
        downloads.resolve_dataset("beir/fiqa", tmp_path, log=lambda m: None)
    assert str(caught.value).splitlines()[0] == f"Cannot download beir/fiqa from {server.url}/fiqa.zip: HTTP 404 " \
                                                f"Not Found."


def test_unknown_names_and_missing_folders_are_refused(tmp_path):
    with pytest.raises(datasets.DatasetError, match=r"^Unknown BEIR dataset 'scifakt'; known names: beir/arguana, "):
        downloads.resolve_dataset("beir/scifakt", tmp_path)
    with pytest.raises(datasets.DatasetError) as caught:
        downloads.resolve_dataset("fiqa", tmp_path)
    assert str(caught.value) == "Dataset folder not found: fiqa; the BEIR dataset of that name is beir/fiqa"
    # Any other missing path is passed on: loading it says what a BEIR folder holds (as before names existed).
    assert downloads.resolve_dataset(str(tmp_path / "nowhere"), tmp_path) == tmp_path / "nowhere"


def test_a_folder_path_keeps_working_and_refuses_a_level(beir, tmp_path):
    folder = tmp_path / "beir" / "tinyfact"  # looks like a name, but it is a folder: no download
    for path, text in BEIR_FILES.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text, encoding="utf-8")
    assert downloads.resolve_dataset(str(folder), tmp_path / "data") == folder
    assert beir.requests == []
    with pytest.raises(datasets.DatasetError, match=r"^The level \(document or section\) applies to Open RAGBench "
                                                    r"only; "):
        downloads.resolve_dataset(str(folder), tmp_path / "data", level="section")


def test_cli_evaluates_a_named_dataset_and_reuses_it(beir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(er, "DATASET_CACHE", str(tmp_path / "cache"))
    argv = ["--dataset", "beir/tinyfact", "--data-dir", str(tmp_path / "data"), "--mode", "bm25", "--no-rerank",
            "--k", "1,3", "--quiet", "--no-compare", "--report", str(tmp_path / "r.txt")]
    assert er.main(argv) == 0
    payload = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert payload["metrics"]["mrr"] == 1.0  # both questions find a relevant document first
    assert beir.requests == ["GET /tinyfact.zip"]
    assert er.main(argv) == 0
    assert beir.requests == ["GET /tinyfact.zip"]
    capsys.readouterr()
    assert er.main(["--level", "section", "--quiet"]) == 2
    assert capsys.readouterr().err == ("error: --level works with --dataset (Open RAGBench, e.g. --dataset "
                                       "open_ragbench); drop it\n")


# ----------------------------------------------------------------------------- Open RAGBench


PAPERS = {
    "2401.00001v1": {"id": "2401.00001v1", "title": "Glacier melt", "abstract": "Not indexed.",
                     "sections": [{"text": "Introduction. Glaciers shrink.", "tables": {}, "images": {}},
                                  {"text": "Results. Melt raises the sea level. [table_1]",
                                   "tables": {"table_1": "| year | mm |\n|---|---|\n| 2020 | 3 |"},
                                   "images": {"img_1": "aGVsbG8="}}]},
    "2401.00002v2": {"id": "2401.00002v2", "title": "Bee pollen",
                     "sections": [{"text": "Bees carry pollen between flowers.", "tables": {}, "images": {}},
                                  {"text": "  ", "tables": {}, "images": {}}]},
}
LABELS = {
    "queries.json": {"q1": {"query": "How much does melt raise the sea?", "type": "extractive", "source": "text-table"},
                     "q2": {"query": "What do bees carry?", "type": "abstractive", "source": "text"},
                     "q3": {"query": "A query with a broken qrels entry", "type": "extractive", "source": "text"}},
    "qrels.json": {"q1": {"doc_id": "2401.00001v1", "section_id": 1}, "q2": {"doc_id": "2401.00002v2",
                                                                             "section_id": 0},
                   "q3": {"doc_id": "2401.00002v2"}},
    "answers.json": {"q1": "3 mm in 2020", "q2": "Pollen"},
}


def ragbench_files(prefix: str) -> dict[str, bytes]:
    files = {f"{prefix}/{name}": json.dumps(value).encode() for name, value in LABELS.items()}
    files |= {f"{prefix}/corpus/{pid}.json": json.dumps(paper).encode() for pid, paper in PAPERS.items()}
    files[f"{prefix}/pdf_urls.json"] = json.dumps({pid: f"https://arxiv.org/pdf/{pid}" for pid in PAPERS}).encode()
    return files


def git_blob_id(content: bytes) -> str:
    return hashlib.sha1(f"blob {len(content)}\0".encode() + content).hexdigest()


def serve_hub(server: Server, files: dict[str, bytes], served: dict[str, bytes] | None = None,
              lfs: tuple[str, ...] = ()) -> None:
    """The Hub API huggingface_hub uses for vectara/open_ragbench: revision info, recursive tree listing, resolve.
    SERVED replaces the bytes sent for some files (a corrupt download); LFS files are listed with their sha256."""
    repo = downloads.OPEN_RAGBENCH_REPO
    tree = []
    for path, content in files.items():
        entry = {"type": "file", "path": path, "size": len(content), "oid": git_blob_id(content)}
        if path in lfs:
            entry["lfs"] = {"oid": hashlib.sha256(content).hexdigest(), "size": len(content), "pointerSize": 130}
        tree.append(entry)
    listing = json.dumps(tree).encode()
    info = json.dumps({"id": repo, "sha": COMMIT, "siblings": [{"rfilename": p} for p in files]}).encode()
    json_type = {"Content-Type": "application/json"}
    server.routes[f"/api/datasets/{repo}/revision/main"] = (200, json_type, info)
    for revision in ("main", COMMIT):
        server.routes[f"/api/datasets/{repo}/tree/{revision}"] = (200, json_type, listing)
        for path, content in files.items():
            body = (served or {}).get(path, content)
            etag = hashlib.sha256(content).hexdigest() if path in lfs else git_blob_id(content)
            server.routes[f"/datasets/{repo}/resolve/{revision}/{path}"] = (
                200, {"X-Repo-Commit": COMMIT, "ETag": f'"{etag}"'}, body)


@pytest.fixture
def hub(server, monkeypatch):
    """The server as the Hugging Face endpoint, with HF_HUB_OFFLINE (set for the whole suite) lifted."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(downloads, "HF_ENDPOINT", server.url)
    return server


def test_open_ragbench_is_downloaded_once_at_document_level(hub, tmp_path):
    files = ragbench_files("pdf/arxiv")
    serve_hub(hub, files, lfs=("pdf/arxiv/corpus/2401.00001v1.json",))
    data = tmp_path / "data"
    messages: list[str] = []
    folder = downloads.resolve_dataset("open_ragbench", data, log=messages.append)
    assert folder == data / "open_ragbench-document"
    downloaded = sorted(r for r in hub.requests if r.startswith("GET /datasets/"))
    assert downloaded == sorted(f"GET /datasets/vectara/open_ragbench/resolve/{COMMIT}/{p}" for p in files)
    assert sorted(p.relative_to(data / "open_ragbench").as_posix() for p in (data / "open_ragbench").rglob("*")
                  if p.is_file()) == sorted(files)  # the pdf/arxiv tree, without the client's bookkeeping
    ds = datasets.load_beir(folder)
    assert {d: (doc.title, doc.text) for d, doc in ds.documents.items()} == {
        "2401.00001v1": ("Glacier melt", "Introduction. Glaciers shrink.\n\nResults. Melt raises the sea level. "
                                         "[table_1]\n\n| year | mm |\n|---|---|\n| 2020 | 3 |"),
        "2401.00002v2": ("Bee pollen", "Bees carry pollen between flowers."),
    }
    assert ds.qrels == {"q1": {"2401.00001v1": 1}, "q2": {"2401.00002v2": 1}, "q3": {"2401.00002v2": 1}}
    assert ds.queries["q1"].question == "How much does melt raise the sea?"
    first = json.loads((folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert first["metadata"] == {"type": "extractive", "source": "text-table", "answer": "3 mm in 2020"}
    assert messages[-1] == f"Open RAGBench (document level) written as a BEIR folder: {folder} (2 documents, 3 queries)"
    # Second run, and the other level: from the cache, no request.
    count = len(hub.requests)
    assert downloads.resolve_dataset("open_ragbench", data, log=messages.append) == folder
    section = downloads.resolve_dataset("open_ragbench", data, level="section", log=messages.append)
    assert len(hub.requests) == count
    ds = datasets.load_beir(section)
    assert list(ds.documents) == ["2401.00001v1#0", "2401.00001v1#1", "2401.00002v2#0"]  # the blank section is out
    assert ds.qrels == {"q1": {"2401.00001v1#1": 1}, "q2": {"2401.00002v2#0": 1}}
    assert messages[-1] == "note: 1 qrels entry skipped, without \"doc_id\" and an integer \"section_id\": q3"


def test_open_ragbench_falls_back_to_official_pdf_arxiv(hub, tmp_path):
    serve_hub(hub, ragbench_files("official/pdf/arxiv"))
    folder = downloads.resolve_dataset("open_ragbench", tmp_path, level="section", log=lambda m: None)
    assert (tmp_path / "open_ragbench" / "official" / "pdf" / "arxiv" / "queries.json").is_file()
    assert len(datasets.load_beir(folder).documents) == 3


def test_pdf_arxiv_wins_over_official_on_the_hub(hub, tmp_path):
    official = {p: c.replace(b"Glacier", b"WRONG") for p, c in ragbench_files("official/pdf/arxiv").items()}
    serve_hub(hub, {**official, **ragbench_files("pdf/arxiv")})
    folder = downloads.resolve_dataset("open_ragbench", tmp_path, log=lambda m: None)
    assert not (tmp_path / "open_ragbench" / "official").exists()  # only the chosen subset is downloaded
    assert datasets.load_beir(folder).documents["2401.00001v1"].title == "Glacier melt"


def test_corrupt_hub_file_is_detected_and_not_cached(hub, tmp_path):
    files = ragbench_files("pdf/arxiv")
    path = "pdf/arxiv/qrels.json"
    bad = files[path].replace(b"section_id\": 1", b"section_id\": 7")  # same size, other bytes
    serve_hub(hub, files, served={path: bad})
    with pytest.raises(downloads.DownloadError) as caught:
        downloads.resolve_dataset("open_ragbench", tmp_path, log=lambda m: None)
    assert str(caught.value).splitlines()[0] == (
        f"Cannot download Open RAGBench from {hub.url}/datasets/vectara/open_ragbench: {path}: git blob id "
        f"{git_blob_id(bad)} differs from the Hub's {git_blob_id(files[path])} (a corrupt or changed file).")
    assert list(tmp_path.iterdir()) == []  # nothing cached, no temporary folder left


def test_hf_offline_gives_the_manual_way(server, tmp_path, monkeypatch):
    """HF_HUB_OFFLINE is set for the whole suite (conftest): respected, no request made."""
    monkeypatch.setattr(downloads, "HF_ENDPOINT", server.url)
    target = tmp_path / "open_ragbench"
    with pytest.raises(downloads.DownloadError) as caught:
        downloads.resolve_dataset("open_ragbench", tmp_path)
    assert str(caught.value) == (
        f"Cannot download Open RAGBench from {server.url}/datasets/vectara/open_ragbench: HF_HUB_OFFLINE is set, and "
        f"it is not in {target} yet.\nDownload its pdf/arxiv folder by hand (e.g. hf download vectara/open_ragbench "
        f"--repo-type dataset --include 'pdf/arxiv/*' --local-dir {target}) so that "
        f"{target / 'pdf' / 'arxiv' / 'queries.json'} exists, or give that folder as the dataset path.")
    assert server.requests == []


def test_a_folder_given_by_hand_prefers_pdf_arxiv_and_follows_changes(tmp_path):
    given = tmp_path / "my_ragbench"
    for prefix, title in (("official/pdf/arxiv", b"WRONG"), ("pdf/arxiv", b"Glacier")):
        for path, content in ragbench_files(prefix).items():
            (given / path).parent.mkdir(parents=True, exist_ok=True)
            (given / path).write_bytes(content.replace(b"Glacier", title))
    data = tmp_path / "data"
    folder = downloads.resolve_dataset(str(given), data, log=lambda m: None)
    assert folder == data / "my_ragbench-document"
    assert datasets.load_beir(folder).documents["2401.00001v1"].title == "Glacier melt"
    # An edited paper is converted again; an unchanged folder is not.
    paper = given / "pdf" / "arxiv" / "corpus" / "2401.00002v2.json"
    paper.write_text(json.dumps({**PAPERS["2401.00002v2"], "title": "Wasps"}), encoding="utf-8")
    messages: list[str] = []
    downloads.resolve_dataset(str(given), data, log=messages.append)
    assert datasets.load_beir(folder).documents["2401.00002v2"].title == "Wasps"
    assert len(messages) == 1
    downloads.resolve_dataset(str(given), data, log=messages.append)
    assert len(messages) == 1


def test_an_interrupted_download_leaves_nothing(beir, tmp_path, monkeypatch):
    """Ctrl-C in the middle of the download: the partial zip is removed with its temporary folder."""
    monkeypatch.setattr(downloads, "DOWNLOAD_CHUNK_BYTES", 64)
    real_md5 = hashlib.md5

    class Interrupting:
        def __init__(self) -> None:
            self.digest, self.calls = real_md5(), 0

        def update(self, chunk: bytes) -> None:
            self.calls += 1
            if self.calls == 3:
                raise KeyboardInterrupt
            self.digest.update(chunk)

    monkeypatch.setattr(downloads.hashlib, "md5", Interrupting)
    data = tmp_path / "data"
    with pytest.raises(KeyboardInterrupt):
        downloads.resolve_dataset("beir/tinyfact", data, log=lambda m: None)
    assert list((data / "beir").iterdir()) == []
