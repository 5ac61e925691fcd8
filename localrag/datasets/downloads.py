"""Public benchmarks by name, downloaded once into a cache folder and read into a BEIR folder.

``resolve_dataset(spec, data_dir)`` turns what the user gave as the dataset into a BEIR folder
(corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv, read by localrag/datasets/beir.py):

* a folder path is used as it is (a BEIR folder), or converted when it holds Open RAGBench files;
* ``beir/NAME`` (``beir/scifact``, ``beir/fiqa``, ...) is the BEIR zip of that name, downloaded from
  BEIR_URL into DATA_DIR/beir/NAME;
* ``open_ragbench`` is the ``pdf/arxiv`` subset of the Hugging Face dataset vectara/open_ragbench
  (licence CC BY-NC 4.0), downloaded through huggingface_hub into DATA_DIR/open_ragbench and
  converted to DATA_DIR/open_ragbench-LEVEL.

Downloads are never cached half-done: a file is written to a temporary folder beside the cache,
checked (size and checksum), unpacked there, and only then renamed into place, so that an interrupted,
truncated or corrupt download leaves nothing that a later run could take for the dataset. Once a
dataset folder exists it is used without any network access.

Checksums: BEIR publishes one md5 per zip in the "Available Datasets" table of its README
(https://github.com/beir-cellar/beir, README.md, column "md5"); BEIR_MD5 copies that table. For Open
RAGBench the Hugging Face Hub gives, per file, the sha256 of LFS files and the git blob id of the others
(the tree listing); every downloaded file is checked against it.

Open RAGBench's layout (its dataset card on Hugging Face): ``pdf/arxiv/`` (the card says
``official/pdf/arxiv/``, hence the fallback) holds ``corpus/PAPER_ID.json`` (``{"title", "sections":
[{"text", "tables": {id: markdown}, "images": {id: base64}}], "id", "abstract", ...}``), ``queries.json``
(``{query_id: {"query", "type", "source"}}``), ``qrels.json`` (``{query_id: {"doc_id", "section_id"}}``)
and ``answers.json`` (``{query_id: answer}``). A document is a paper (level "document") or one of its
sections (level "section", id ``PAPER_ID#INDEX``, the index counted from 0 in ``sections`` as
``section_id`` counts); a section's text is its text followed by its tables (markdown); images are left
out. The arXiv abstract field is left out too: the sections are the PDF's own text. Every query gets
split "test"; its answer, type and source go to the query's "metadata".

Why not ir_datasets: it would cover the BEIR names (from the same UKP address, with the same md5s), but
it declares about a dozen dependencies for its other collections (lxml, beautifulsoup4, inscriptis,
trec-car-tools, warc3-wet, warc3-wet-clueweb09, zlib-state, lz4, ijson, unlzw3, pyyaml, requests, ...),
keeps its own cache layout (~/.ir_datasets) and does not know Open RAGBench. A BEIR download is one zip
and an md5; the standard library does it.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

from localrag.datasets.beir import CORPUS_FILE, QRELS_DIR, QRELS_SUFFIX, QUERIES_FILE, DatasetError
from localrag.errors import RAGError

# Where a BEIR zip is downloaded from; {name} is the BEIR name (README of beir-cellar/beir).
BEIR_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/{name}.zip"
# md5 of each public BEIR zip, copied from the "Available Datasets" table of the BEIR README. cqadupstack
# is left out: its zip holds twelve datasets, one folder per forum, not one BEIR folder.
BEIR_MD5 = {
    "msmarco": "444067daf65d982533ea17ebd59501e4",
    "trec-covid": "ce62140cb23feb9becf6270d0d1fe6d1",
    "nfcorpus": "a89dba18a62ef92f7d323ec890a0d38d",
    "nq": "d4d3d2e48787a744b6f6e691ff534307",
    "hotpotqa": "f412724f78b0d91183a0e86805e16114",
    "fiqa": "17918ed23cd04fb15047f73e6c3bd9d9",
    "arguana": "8ad3e3c2a5867cdced806d6503f29b99",
    "webis-touche2020": "46f650ba5a527fc69e0a6521c5a23563",
    "quora": "18fb154900ba42a600f84b839c173167",
    "dbpedia-entity": "c2a39eb420a3164af735795df012ac2c",
    "scidocs": "38121350fc3a4d2f48850f6aff52e4a9",
    "fever": "5a818580227bfb4b35bb6fa46d9b6c03",
    "climate-fever": "8b66f0a9126c521bae2bde127b4dc99d",
    "scifact": "5f7d1de60b170fc8027bb7898e2efca1",
}
BEIR_PREFIX = "beir/"  # a dataset named beir/NAME is the BEIR zip NAME
OPEN_RAGBENCH_NAMES = ("open_ragbench", "vectara/open_ragbench")  # names of Open RAGBench's pdf/arxiv subset
OPEN_RAGBENCH_REPO = "vectara/open_ragbench"  # the Hugging Face dataset repository
OPEN_RAGBENCH_REVISION = "main"  # its branch, tag or commit
# Where the subset lives inside the repository (and inside a folder given by hand), tried in this order.
OPEN_RAGBENCH_SUBSETS = ("pdf/arxiv", "official/pdf/arxiv")
HF_ENDPOINT = None  # Hugging Face address; None: huggingface_hub's own (the HF_ENDPOINT variable or huggingface.co)
DOWNLOAD_TIMEOUT = 60  # seconds a connection may stay silent before a download fails
DOWNLOAD_CHUNK_BYTES = 1 << 20  # read size while downloading (and hashing) a file
LEVELS = ("document", "section")  # what an Open RAGBench document is: a whole paper or one section
DEFAULT_LEVEL = "document"  # a paper, like a PDF on the user's shelf
OPEN_RAGBENCH_SPLIT = "test"  # the split every Open RAGBench query is written to (it has no splits)
CONVERTED_STAMP = "converted_from.json"  # in a converted folder: what it was made from, to redo it on change
CONVERT_VERSION = "open_ragbench_beir/1"  # bump when the conversion changes meaning
OPEN_RAGBENCH_FILES = ("queries.json", "qrels.json", "answers.json")  # the label files (answers.json optional)
OPEN_RAGBENCH_CORPUS = "corpus"  # the folder of per-paper JSON files


class DownloadError(RAGError):
    """A named dataset could not be downloaded; the message says where to put it by hand."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def known_names() -> list[str]:
    """Every dataset name resolve_dataset accepts, e.g. for help texts."""
    return [BEIR_PREFIX + name for name in sorted(BEIR_MD5)] + [OPEN_RAGBENCH_NAMES[0]]


def resolve_dataset(spec: str, data_dir: str | Path, level: str | None = None,
                    log: Callable[[str], None] = _stderr) -> Path:
    """The BEIR folder of SPEC: a folder path (used as it is, or converted from Open RAGBench files), beir/NAME or
    open_ragbench (downloaded into DATA_DIR on first use). LEVEL (document or section; default DEFAULT_LEVEL)
    applies to Open RAGBench only. Raises DownloadError or DatasetError with a message for the user."""
    if level is not None and level not in LEVELS:
        raise DatasetError(f"Unknown level {level!r}; choose one of: {', '.join(LEVELS)}")
    data_dir = Path(data_dir)
    given = Path(spec)
    if given.is_dir():  # a folder path keeps working, even if it looks like a name
        root = None if (given / CORPUS_FILE).is_file() else open_ragbench_root(given)
        if root is None:
            _refuse_level(level, spec)
            return given
        return convert_open_ragbench(root, data_dir / f"{given.resolve().name}-{level or DEFAULT_LEVEL}",
                                     level or DEFAULT_LEVEL, log)
    if spec.startswith(BEIR_PREFIX):
        _refuse_level(level, spec)
        return fetch_beir(spec[len(BEIR_PREFIX):], data_dir, log)
    if spec in OPEN_RAGBENCH_NAMES:
        root = fetch_open_ragbench(data_dir, log)
        return convert_open_ragbench(root, data_dir / f"{OPEN_RAGBENCH_NAMES[0]}-{level or DEFAULT_LEVEL}",
                                     level or DEFAULT_LEVEL, log)
    if spec in BEIR_MD5:
        raise DatasetError(f"Dataset folder not found: {given}; the BEIR dataset of that name is {BEIR_PREFIX}{spec}")
    return given  # a missing folder: loading it says what a BEIR folder holds


def _refuse_level(level: str | None, spec: str) -> None:
    if level is not None:
        raise DatasetError(f"The level ({' or '.join(LEVELS)}) applies to Open RAGBench only; {spec} is a BEIR "
                           f"dataset, scored by its own documents. Drop the level.")


# ----------------------------------------------------------------------------- BEIR


def fetch_beir(name: str, data_dir: Path, log: Callable[[str], None] = _stderr) -> Path:
    """DATA_DIR/beir/NAME, downloaded from BEIR_URL and md5-checked on first use; afterwards no network."""
    if name not in BEIR_MD5:
        raise DatasetError(f"Unknown BEIR dataset {name!r}; known names: "
                           f"{', '.join(BEIR_PREFIX + n for n in sorted(BEIR_MD5))}")
    target = data_dir / "beir" / name
    if (target / CORPUS_FILE).is_file():
        return target
    url = BEIR_URL.format(name=name)
    manual = (f"Download it by hand and unpack it so that {target / CORPUS_FILE} exists (the zip holds one "
              f"folder, {name}/), or give the unpacked folder as the dataset path.")
    if target.exists():
        raise DownloadError(f"{target} exists but has no {CORPUS_FILE}: an unfinished copy by hand? Remove it "
                            f"or complete it. {manual}")
    target.parent.mkdir(parents=True, exist_ok=True)
    log(f"Downloading {BEIR_PREFIX}{name} from {url} into {target} (once) ...")
    with tempfile.TemporaryDirectory(prefix=f".{name}-download-", dir=target.parent) as tmp:
        archive = Path(tmp) / f"{name}.zip"
        try:
            size = download_file(url, archive, BEIR_MD5[name])
        except (OSError, ValueError, http.client.HTTPException, DownloadError) as exc:
            raise DownloadError(f"Cannot download {BEIR_PREFIX}{name} from {url}: {_reason(exc)}.\n{manual}") from None
        unpacked = Path(tmp) / "unpacked"
        unpack_zip(archive, unpacked)
        if not (unpacked / name / CORPUS_FILE).is_file():
            raise DownloadError(f"The zip from {url} has no {name}/{CORPUS_FILE}; it is not a BEIR dataset. "
                                f"{manual}")
        _move_into_place(unpacked / name, target, (target / CORPUS_FILE).is_file)
    log(f"Downloaded {BEIR_PREFIX}{name} ({size:,} bytes, md5 checked) into {target}")
    return target


def _move_into_place(staged: Path, target: Path, complete: Callable[[], bool]) -> None:
    """Rename the checked STAGED folder to TARGET (atomic on one file system). Another run that finished the same
    download first has already put a complete TARGET there: that one is kept."""
    try:
        os.replace(staged, target)
    except OSError:
        if not complete():
            raise


def _reason(exc: BaseException) -> str:
    """The part of a download error worth showing: "HTTP 404 Not Found", "[Errno 111] Connection refused"."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__


def download_file(url: str, dest: Path, md5: str | None = None) -> int:
    """Write URL to DEST; the number of bytes. DownloadError when fewer bytes come than the server announced
    (a cut connection) or when the md5 differs from MD5 (if given); DEST is then incomplete and must be dropped."""
    request = urllib.request.Request(url, headers={"User-Agent": "localrag"})
    digest = hashlib.md5()
    size = 0
    with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT) as response, dest.open("wb") as out:
        announced = response.headers.get("Content-Length")
        while chunk := response.read(DOWNLOAD_CHUNK_BYTES):
            out.write(chunk)
            digest.update(chunk)
            size += len(chunk)
    if announced is not None and announced.isdigit() and size != int(announced):
        raise DownloadError(f"the connection ended after {size:,} of {int(announced):,} bytes")
    if md5 is not None and digest.hexdigest() != md5:
        raise DownloadError(f"md5 {digest.hexdigest()} differs from the published {md5} (a corrupt or changed "
                            f"file)")
    return size


def unpack_zip(archive: Path, dest: Path) -> None:
    """Unpack ARCHIVE into DEST, refusing members that would land outside it."""
    try:
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                parts = Path(member).parts
                if Path(member).is_absolute() or ".." in parts:
                    raise DownloadError(f"{archive.name} holds an unsafe path {member!r}; not unpacked")
            zf.extractall(dest)
    except zipfile.BadZipFile as exc:
        raise DownloadError(f"{archive.name} is not a readable zip file: {exc}") from None


# ----------------------------------------------------------------------------- Open RAGBench


def open_ragbench_root(folder: Path) -> Path | None:
    """The folder holding queries.json, qrels.json and corpus/: FOLDER itself, else FOLDER/pdf/arxiv, else
    FOLDER/official/pdf/arxiv; None when none of them does."""
    for candidate in (folder, *(folder / sub for sub in OPEN_RAGBENCH_SUBSETS)):
        if ((candidate / "queries.json").is_file() and (candidate / "qrels.json").is_file()
                and (candidate / OPEN_RAGBENCH_CORPUS).is_dir()):
            return candidate
    return None


def _hub_address() -> str:
    from huggingface_hub import constants

    return f"{(HF_ENDPOINT or constants.ENDPOINT).rstrip('/')}/datasets/{OPEN_RAGBENCH_REPO}"


def fetch_open_ragbench(data_dir: Path, log: Callable[[str], None] = _stderr) -> Path:
    """The pdf/arxiv folder of Open RAGBench under DATA_DIR/open_ragbench, downloaded through huggingface_hub and
    checked against the Hub's checksums on first use; afterwards no network."""
    target = data_dir / OPEN_RAGBENCH_NAMES[0]
    root = open_ragbench_root(target)
    if root is not None:
        return root
    from huggingface_hub import constants

    address = _hub_address()
    manual = (f"Download its pdf/arxiv folder by hand (e.g. hf download {OPEN_RAGBENCH_REPO} --repo-type dataset "
              f"--include 'pdf/arxiv/*' --local-dir {target}) so that {target / 'pdf' / 'arxiv' / 'queries.json'} "
              f"exists, or give that folder as the dataset path.")
    if target.exists():
        raise DownloadError(f"{target} exists but holds no queries.json, qrels.json and corpus/ (in itself, "
                            f"pdf/arxiv or official/pdf/arxiv). Remove it or complete it. {manual}")
    if constants.HF_HUB_OFFLINE:
        raise DownloadError(f"Cannot download Open RAGBench from {address}: HF_HUB_OFFLINE is set, and it is not "
                            f"in {target} yet.\n{manual}")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix=".open_ragbench-download-", dir=target.parent) as tmp:
            staged = Path(tmp) / OPEN_RAGBENCH_NAMES[0]
            count, size = _download_hub_subset(staged, log, address, target)
            if open_ragbench_root(staged) is None:
                raise DownloadError("the downloaded files hold no queries.json, qrels.json and corpus/")
            shutil.rmtree(staged / ".cache", ignore_errors=True)  # huggingface_hub's bookkeeping of the download
            _move_into_place(staged, target, lambda: open_ragbench_root(target) is not None)
    except DownloadError as exc:
        raise DownloadError(f"Cannot download Open RAGBench from {address}: {exc}.\n{manual}") from None
    except Exception as exc:  # noqa: BLE001 - any failure of the hub client gets the same advice, never a traceback
        raise DownloadError(f"Cannot download Open RAGBench from {address}: {type(exc).__name__}: {exc}.\n"
                            f"{manual}") from None
    log(f"Downloaded Open RAGBench ({count:,} files, {size:,} bytes, checksums checked) into {target}")
    return open_ragbench_root(target)


def _download_hub_subset(staged: Path, log: Callable[[str], None], address: str, target: Path) -> tuple[int, int]:
    """Download the first of OPEN_RAGBENCH_SUBSETS the repository has into STAGED and check every file; the number
    of files and bytes."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.hf_api import RepoFile

    api = HfApi(endpoint=HF_ENDPOINT)
    files = [entry for entry in api.list_repo_tree(OPEN_RAGBENCH_REPO, repo_type="dataset", recursive=True,
                                                   revision=OPEN_RAGBENCH_REVISION) if isinstance(entry, RepoFile)]
    subset = next((sub for sub in OPEN_RAGBENCH_SUBSETS if any(f.path.startswith(sub + "/") for f in files)), None)
    if subset is None:
        raise DownloadError(f"the repository has no {' or '.join(OPEN_RAGBENCH_SUBSETS)} folder")
    wanted = [f for f in files if f.path.startswith(subset + "/")]
    log(f"Downloading Open RAGBench ({subset}, {len(wanted):,} files) from {address} into {target} (once) ...")
    snapshot_download(OPEN_RAGBENCH_REPO, repo_type="dataset", revision=OPEN_RAGBENCH_REVISION,
                      allow_patterns=[subset + "/*"], local_dir=staged, endpoint=HF_ENDPOINT)
    for entry in wanted:
        check_hub_file(staged / entry.path, entry)
    return len(wanted), sum(f.size for f in wanted)


def check_hub_file(path: Path, entry) -> None:
    """DownloadError unless PATH has the size and checksum the Hub lists for ENTRY (a RepoFile): the sha256 of an
    LFS file, the git blob id of any other."""
    if not path.is_file():
        raise DownloadError(f"{entry.path} is missing after the download")
    size = path.stat().st_size
    if size != entry.size:
        raise DownloadError(f"{entry.path} has {size:,} bytes, the Hub lists {entry.size:,}")
    if entry.lfs is not None:
        digest, expected, kind = hashlib.sha256(), entry.lfs.sha256, "sha256"
    else:  # git's blob id: sha1 of "blob SIZE\0" and the content
        digest, expected, kind = hashlib.sha1(f"blob {size}\0".encode()), entry.blob_id, "git blob id"
    with path.open("rb") as handle:
        while chunk := handle.read(DOWNLOAD_CHUNK_BYTES):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        raise DownloadError(f"{entry.path}: {kind} {digest.hexdigest()} differs from the Hub's {expected} (a corrupt "
                            f"or changed file)")


def _source_stamp(root: Path, level: str) -> dict:
    """What a converted folder is made from: the root, the level, and every input file's name, size and mtime."""
    entries = []
    for name in OPEN_RAGBENCH_FILES:
        if (root / name).is_file():
            stat = (root / name).stat()
            entries.append([name, stat.st_size, stat.st_mtime_ns])
    with os.scandir(root / OPEN_RAGBENCH_CORPUS) as scan:
        for item in scan:
            if item.name.endswith(".json") and item.is_file():
                stat = item.stat()
                entries.append([f"{OPEN_RAGBENCH_CORPUS}/{item.name}", stat.st_size, stat.st_mtime_ns])
    listing = hashlib.sha256(json.dumps(sorted(entries)).encode()).hexdigest()
    return {"version": CONVERT_VERSION, "source": str(root.resolve()), "level": level, "files": listing}


def convert_open_ragbench(root: Path, out: Path, level: str, log: Callable[[str], None] = _stderr) -> Path:
    """OUT as a BEIR folder of the Open RAGBench files in ROOT at LEVEL; kept while ROOT's files are unchanged."""
    stamp = _source_stamp(root, level)
    stamp_path = out / CONVERTED_STAMP
    if stamp_path.is_file():
        try:
            kept = json.loads(stamp_path.read_text(encoding="utf-8"))
            if isinstance(kept, dict) and {key: kept.get(key) for key in stamp} == stamp:
                return out
        except (OSError, ValueError):
            pass  # an unreadable stamp: convert again
    elif out.exists():
        raise DatasetError(f"{out} exists and was not made from Open RAGBench files (no {CONVERTED_STAMP}); move it "
                           f"away or choose another data folder")
    documents, queries, qrels, notes = read_open_ragbench(root, level)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}-convert-", dir=out.parent) as tmp:
        staged = Path(tmp) / out.name
        (staged / QRELS_DIR).mkdir(parents=True)
        _write_jsonl(staged / CORPUS_FILE, documents)
        _write_jsonl(staged / QUERIES_FILE, queries)
        (staged / QRELS_DIR / (OPEN_RAGBENCH_SPLIT + QRELS_SUFFIX)).write_text(
            "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels), encoding="utf-8")
        (staged / CONVERTED_STAMP).write_text(json.dumps({**stamp, "notes": notes}, indent=1), encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)  # an older conversion (its stamp was checked above)
        os.replace(staged, out)
    log(f"Open RAGBench ({level} level) written as a BEIR folder: {out} ({len(documents):,} documents, "
        f"{len(queries):,} queries)")
    for note in notes:
        log(f"note: {note}")
    return out


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")


def _read_json_object(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DatasetError(f"Cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{path} must hold one JSON object (id -> entry), found {type(data).__name__}")
    return data


def section_text(section: object) -> str:
    """A section's text followed by its tables (markdown), blank-line separated; images are left out."""
    if not isinstance(section, dict):
        return ""
    parts = [section.get("text") if isinstance(section.get("text"), str) else ""]
    tables = section.get("tables")
    if isinstance(tables, dict):
        parts += [t for t in tables.values() if isinstance(t, str)]
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def read_open_ragbench(root: Path, level: str) -> tuple[list[dict], list[dict], list[tuple[str, str, int]], list[str]]:
    """(corpus rows, query rows, qrels (query, doc, 1), notes on skipped entries) of the Open RAGBench files in
    ROOT at LEVEL, in BEIR's field names."""
    notes: list[str] = []
    documents: list[dict] = []
    unreadable = []
    for path in sorted((root / OPEN_RAGBENCH_CORPUS).glob("*.json")):
        try:
            paper = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            paper = None
        if not isinstance(paper, dict):
            unreadable.append(path.name)
            continue
        title = paper.get("title") if isinstance(paper.get("title"), str) else ""
        sections = paper.get("sections") if isinstance(paper.get("sections"), list) else []
        texts = [section_text(s) for s in sections]
        if level == "document":
            documents.append({"_id": path.stem, "title": title, "text": "\n\n".join(t for t in texts if t)})
        else:
            documents += [{"_id": f"{path.stem}#{i}", "title": title, "text": t} for i, t in enumerate(texts) if t]
    if unreadable:
        notes.append(f"{len(unreadable)} corpus file(s) skipped, not a JSON object: {', '.join(unreadable[:5])}")
    raw_queries = _read_json_object(root / "queries.json")
    answers = _read_json_object(root / "answers.json") if (root / "answers.json").is_file() else {}
    queries = []
    for query_id, entry in raw_queries.items():
        text = entry.get("query") if isinstance(entry, dict) else entry
        metadata = {key: entry[key] for key in ("type", "source") if isinstance(entry, dict) and key in entry}
        if query_id in answers:
            metadata["answer"] = answers[query_id]
        queries.append({"_id": query_id, "text": text if isinstance(text, str) else "", "metadata": metadata})
    qrels = []
    bad = []
    for query_id, entry in _read_json_object(root / "qrels.json").items():
        doc_id = entry.get("doc_id") if isinstance(entry, dict) else None
        section = entry.get("section_id") if isinstance(entry, dict) else None
        if isinstance(section, str) and section.isdigit():
            section = int(section)
        if not isinstance(doc_id, str) or not doc_id or (
                level == "section" and (isinstance(section, bool) or not isinstance(section, int))):
            bad.append(query_id)
            continue
        qrels.append((query_id, doc_id if level == "document" else f"{doc_id}#{section}", 1))
    if bad:
        need = '"doc_id" and an integer "section_id"' if level == "section" else '"doc_id"'
        notes.append(f"{len(bad)} qrels entr{'y' if len(bad) == 1 else 'ies'} skipped, without {need}: "
                     f"{', '.join(bad[:5])}")
    return documents, queries, qrels, notes
