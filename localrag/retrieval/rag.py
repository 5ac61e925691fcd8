"""LocalRAG: the one face of the retriever over one index folder.

add_pdfs.py builds the index through it (`sync`), the chat and the evaluation retrieve through it (`retrieve`, or
LangChain's faces of it: `as_retriever`, `as_tool`), so what the evaluation measures is what the chat gets. Its
defaults come from a settings block (`Face`: local_rag.py binds this class to its editable constants); the work is
done by the index (`Index`) and the retriever (`Retriever`).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Protocol, Sequence

from langchain_core.documents import Document

from localrag.retrieval import llm_rerank
from localrag.errors import RAGError
from localrag.index.index import Index, ModelLoading, StoreOptions, reading
from localrag.files import log
from localrag.text.pdf import ExtractedPdf
from localrag.retrieval.retriever import Retriever, Trace, check_k, check_mode
from localrag.settings import IndexSettings, IvfSettings, RetrievalSettings
from localrag.index.store_check import IndexCheck
from localrag.index.sync import PdfReading, SyncOptions
from localrag.index.sync_plan import SyncReport

if TYPE_CHECKING:  # imported when used: LangChain's retriever classes cost about a second
    from localrag.retrieval import chat

DEFAULT: Any = object()  # "the caller did not choose": the settings block's value (a default reranker is not an error)


class Face(Protocol):
    """The settings block LocalRAG reads its defaults from (local_rag.py): the constants of IndexSettings and
    RetrievalSettings (`constant` of each field) and these."""

    DOCS_PATH: str
    ALLOW_DOWNLOADS: bool
    CHROMA_URL: str | None
    COLLECTION_NAME: str
    CACHE_DIR: str
    LOW_DISK_BYTES: int
    SERVER_LOCK_STALE_SECONDS: float
    IVF_MIN_CHUNKS: int
    IVF_LISTS: int
    LLM_RERANK_CACHE: str
    LLM_RERANK_MAX_CALLS: int | None
    RERANKER_MODEL: str | None
    SHIPPED_RERANKER: str
    RERANK_BATCH_SIZE: int
    RETRIEVAL_K: int
    WAIT_FOR_LOCK: bool
    INDEX_GROUP_CHUNKS: int
    EMBEDDING_BATCH_SIZE: int

    def load_embeddings_for(self, name: str, backend: str, allow_downloads: bool) -> Any: ...
    def load_reranker_for(self, name: str, allow_downloads: bool) -> Any: ...
    def expected_export(self, name: str, backend: str) -> str | None: ...
    def iter_extracted(self, paths: Sequence[Path], loader: str, workers: int | None = None) -> Iterator[ExtractedPdf]: ...
    def file_sha256(self, path: str | Path) -> str: ...
    def progress_bars_off(self) -> None: ...


@dataclass(frozen=True)
class OpenOptions:
    """How an index is opened, besides its settings. None / DEFAULT: the settings block's value."""

    quiet: bool = False
    allow_downloads: bool | None = None  # None: ALLOW_DOWNLOADS
    chroma_url: str | None = DEFAULT  # a shared Chroma server; DEFAULT: CHROMA_URL
    ivf_min_chunks: int | None = None  # None: as the index records, else IVF_MIN_CHUNKS
    ivf_lists: int | None = None  # None: as the index records, else IVF_LISTS
    rerank_cache: str | Path | None = None  # an "openai:MODEL" reranker's cache; None: LLM_RERANK_CACHE
    rerank_max_calls: int | None = DEFAULT  # its new calls at most; DEFAULT: LLM_RERANK_MAX_CALLS
    check_store: bool = False  # read the store whole at every check, not the vector file's record of the last read

    def check(self) -> OpenOptions:
        """These options, or a RAGError naming a bad IVF number."""
        for name, value, least in (("ivf_min_chunks", self.ivf_min_chunks, 1), ("ivf_lists", self.ivf_lists, 0)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                raise RAGError(f"{name} must be a whole number of at least {least}, got {value!r}")
        return self


def _read_through(part: str, name: str, settable: bool = False) -> property:
    """A LocalRAG attribute that lives at `self.<part>.<name>`, read there: a reload or sync leaves no stale copy."""
    def get(self):
        return getattr(getattr(self, part), name)

    def set_(self, value):
        setattr(getattr(self, part), name, value)

    return property(get, set_ if settable else None, doc=f"`{part}.{name}`")


class LocalRAG:
    """The retriever over one index folder. Settings left as None come from the index, then the settings block.

    Nothing is downloaded unless `allow_downloads` (default ALLOW_DOWNLOADS): a model that is not on this machine
    (a folder, a pip package, the local Hugging Face cache) is then a RAGError, except the shipped default
    reranker, which is off with its reason (`reranker_off_reason`).
    """

    def __init__(self, path: str | Path, index: IndexSettings = IndexSettings(),
                 retrieval: RetrievalSettings = RetrievalSettings(), reranker_model: str | None | object = DEFAULT, *,
                 face: Face, options: OpenOptions = OpenOptions()):
        """`index` / `retrieval`: the settings chosen (None fields: the index's, then `face`'s constants);
        `reranker_model`: DEFAULT is `face.RERANKER_MODEL`, None none; `face`: the settings block (local_rag.py)
        whose constants are the defaults, read now and, for the sync's batch sizes, at each sync."""
        self.face = face
        constants = vars(face)
        retrieval = retrieval.over(RetrievalSettings.from_constants(constants))
        check_mode(retrieval.retrieval_mode)
        retrieval.check()
        options.check()
        if options.quiet or not sys.stderr.isatty():  # bars redraw with \r: noise in a log file or CI
            face.progress_bars_off()
        self.allow_downloads = face.ALLOW_DOWNLOADS if options.allow_downloads is None else bool(options.allow_downloads)
        allow = self.allow_downloads
        # The embedding model is loaded when a text must be embedded (Index.embeddings), not here. `~` is expanded
        # as a shell would: every message shows paths under the home folder that way.
        self.index = Index(Path(path).expanduser(), index, StoreOptions(
            chroma_url=face.CHROMA_URL if options.chroma_url is DEFAULT else options.chroma_url,
            collection=face.COLLECTION_NAME, cache_dir=face.CACHE_DIR, low_disk_bytes=face.LOW_DISK_BYTES,
            lock_stale_seconds=face.SERVER_LOCK_STALE_SECONDS, full_check=options.check_store),
            defaults=IndexSettings.from_constants(constants),
            model=ModelLoading(lambda name, backend: face.load_embeddings_for(name, backend, allow), face.expected_export),
            ivf=IvfSettings(options.ivf_min_chunks, options.ivf_lists, retrieval.ivf_probes,
                            face.IVF_MIN_CHUNKS, face.IVF_LISTS),
            quiet=options.quiet)
        # an "openai:MODEL" reranker's cache and call limit
        self.rerank_cache = face.LLM_RERANK_CACHE if options.rerank_cache is None else \
            Path(options.rerank_cache).expanduser()
        self.rerank_max_calls = face.LLM_RERANK_MAX_CALLS if options.rerank_max_calls is DEFAULT \
            else options.rerank_max_calls
        # The reranker the settings ask for (None: none), whether or not it loads here: reports record both.
        self.reranker_asked = face.RERANKER_MODEL if reranker_model is DEFAULT else reranker_model
        # The default reranker loads (or warns that it cannot) at its first use; an explicit one loads now, so a
        # model the caller named and that cannot be loaded is an error at once.
        explicit = reranker_model is not DEFAULT and reranker_model is not None
        state = self._init_reranker(reranker_model) if explicit else None
        self.retriever = Retriever(self.index, retrieval, rerank_batch_size=face.RERANK_BATCH_SIZE,
                                   load_reranker=(lambda: state) if explicit else
                                   (lambda: self._init_reranker(reranker_model)))

    def _init_reranker(self, requested):
        """(name, reranker, why it is off) of the reranker `requested` (DEFAULT: the settings block's RERANKER_MODEL). A model that is
        not on this machine is an error, unless it is the shipped default, not chosen by the caller and downloads
        are not allowed: then reranking is off, for a reason the reports carry."""
        if requested is None:
            return None, None, "turned off"
        explicit = requested is not DEFAULT
        name = self.reranker_asked
        if name is None:
            return None, None, "RERANKER_MODEL is None"
        if llm_rerank.is_llm_reranker(name):  # a chat model grades the candidates; nothing loads here
            reranker = llm_rerank.LLMReranker(name, self.rerank_cache, max_new_calls=self.rerank_max_calls)
            if reranker.cache_warning:
                log(f"warning: {reranker.cache_warning}", self.quiet)
            return name, reranker, None
        try:
            return name, self.face.load_reranker_for(name, self.allow_downloads), None
        except RAGError as exc:
            if explicit or name != self.face.SHIPPED_RERANKER or self.allow_downloads:
                raise
            reason = f"{name} {exc.reason}"
            log(f"warning: reranking off: {reason}", self.quiet)
            return None, None, reason

    # ------------------------------------------------------------------ the index (localrag/index/index.py)

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

    def writing(self, wait: bool | None = None):
        """The index's writer lock, as a context manager: one sync (or evaluation) of an index at a time."""
        return self.index.writing(self.face.WAIT_FOR_LOCK if wait is None else wait)

    def reading(self, wait: bool | None = None):
        """The index's reader lock, as a context manager: shared with other readers, never held beside a writer."""
        return reading(self.index, self.face.WAIT_FOR_LOCK if wait is None else wait)

    def list_documents(self) -> list[dict]:
        """The indexed sources with their page and chunk counts, sorted by name."""
        return self.index.list_documents()

    def pdf_changes(self, docs_path: str | Path) -> dict[str, list[str]]:
        """Compare the docs folder with the index by file hash, without changing anything."""
        return self.index.pdf_changes(Path(docs_path).expanduser(), self.face.file_sha256)

    def check_index(self, full: bool = False) -> IndexCheck:
        """Compare the store with the manifest: per-file chunk counts, vector dimension, orphan chunks; from the
        vector file's record of the last whole read while it holds, else (or with `full`) by reading the store."""
        return self.index.check_index(full)

    def require_consistent(self) -> IndexCheck:
        """check_index(), raising a RAGError that says how to repair when the index must not be measured."""
        return self.index.require_consistent()

    def indexed_chunks(self) -> list[tuple[str, str, dict]]:
        """(id, text, metadata) of every chunk of a fully indexed file, sorted by id."""
        return self.index.indexed_chunks()

    def sync(self, paths: Sequence[str | Path] | None = None, rebuild: bool = False,
             docs_root: str | Path | None = None, progress: bool = True, *, wait: bool | None = None,
             switch_folder: bool = False, allow_empty: bool = False) -> SyncReport:
        """Make the index hold exactly the PDFs under `paths`: add new, re-add changed, drop removed files.

        Refused (RAGError) when the index follows other paths (unless `switch_folder` or `rebuild`) and when
        `paths` hold no PDF at all while the index has files (unless `allow_empty`).
        """
        face = self.face
        options = SyncOptions(rebuild=rebuild, progress=progress, wait=face.WAIT_FOR_LOCK if wait is None else wait,
                              group_chunks=face.INDEX_GROUP_CHUNKS, embed_batch=face.EMBEDDING_BATCH_SIZE)
        paths = [Path(p).expanduser() for p in ((face.DOCS_PATH,) if paths is None else paths)]
        return self.index.sync(paths, options,
                               PdfReading(extract=face.iter_extracted, hash_file=face.file_sha256,
                                          docs_root=None if docs_root is None else Path(docs_root).expanduser(),
                                          switch_folder=switch_folder, allow_empty=allow_empty))

    def sync_records(self, records: Iterable[dict], rebuild: bool = False, progress: bool = True, *,
                     wait: bool | None = None) -> SyncReport:
        """Index dataset documents {doc_id, title, text, metadata}: one source each, title as the chunk header."""
        face = self.face
        return self.index.sync_records(records, SyncOptions(rebuild=rebuild, progress=progress,
                                                            wait=face.WAIT_FOR_LOCK if wait is None else wait,
                                                            group_chunks=face.INDEX_GROUP_CHUNKS,
                                                            embed_batch=face.EMBEDDING_BATCH_SIZE))

    # ------------------------------------------------------------------ retrieval (localrag/retrieval/retriever.py)

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
        self.retriever.embed_queries(queries, self.face.EMBEDDING_BATCH_SIZE * 4)

    def candidate_depth(self, k: int) -> int:
        """Chunks each retriever (dense, BM25) contributes to `retrieve(query, k)`: max(k, candidate_k)."""
        return self.retriever.candidate_depth(k)

    def candidates(self, query: str, k: int, mode: str | None = None) -> list[tuple[Document, float]]:
        """The mode's ordered list before reranking, at least `k` long when the index allows."""
        return self.retriever.candidates(query, k, mode)

    def rerank(self, query: str, candidates: Sequence[tuple[Document, float]]) -> list[tuple[Document, float]]:
        """Order candidates by cross-encoder score; each (model, query, chunk) pair is scored once per object."""
        return self.retriever.rerank(query, candidates)

    def warm_up(self) -> None:
        """Load now what the first retrieval would: the embedding model, the reranker when it is on, the store, the
        vectors (mapped from the vector file) and, where the mode uses them, the BM25 arrays. A chat calls it at
        start, so that its first question waits only for its search; RAGError when there is no index."""
        self.retriever.warm_up()

    def retrieve(self, query: str, k: int | None = None, mode: str | None = None,
                 rerank: bool | None = None) -> list[tuple[Document, float]]:
        """The k best chunks for a query, best first, with the score of the stage that ordered them last.

        `mode` and `rerank` override this object's settings for one call (ablations share one loaded model).
        """
        return self.retriever.retrieve(query, self.k(k), mode, rerank)

    def retrieve_traced(self, query: str, k: int | None = None, mode: str | None = None,
                        rerank: bool | None = None, depth: int = 0) -> Trace:
        """`retrieve`'s list together with every stage's list (dense, BM25, fusion, reranker), the dense and
        BM25 lists deepened to `depth` for diagnosis; see `Retriever.retrieve_traced`."""
        return self.retriever.retrieve_traced(query, self.k(k), mode, rerank, depth)

    def describe_order(self, mode: str | None = None, rerank: bool | None = None) -> str:
        """Which stage ordered the final list (and so what the returned score is)."""
        return self.retriever.describe_order(mode, rerank)

    # ------------------------------------------------------------------ LangChain faces (localrag/retrieval/chat.py)

    def k(self, k: int | None) -> int:
        """`k`, or with None the chat's default, RETRIEVAL_K of the settings block."""
        return self.face.RETRIEVAL_K if k is None else k

    def _check_request(self, k: int, mode: str | None, rerank: bool | None) -> None:
        """RAGError now, not at the first query, for no index, a bad k or mode, or reranking that is off."""
        self.index.require_built()
        check_k(k)  # the rule retrieve applies, checked here before the first query
        if mode is not None:
            check_mode(mode)
        if rerank and self.reranker is None:
            raise RAGError(f"reranking was requested but is off ({self.reranker_off_reason})")

    def as_retriever(self, k: int | None = None, mode: str | None = None,
                     rerank: bool | None = None) -> chat.ShelfRetriever:
        """A LangChain retriever whose invoke/batch/ainvoke run exactly `retrieve(query, k, mode, rerank)`.

        Each Document carries its score in metadata["score"]; None for `mode`/`rerank` means this object's
        settings. Raises RAGError when there is no index. (`vectorstore.as_retriever()` would skip BM25,
        fusion and reranking.)
        """
        from localrag.retrieval import chat  # LangChain's retriever classes: imported by the chat only (~1 s)

        k = self.k(k)
        self._check_request(k, mode, rerank)
        return chat.ShelfRetriever(rag=self, k=k, mode=mode, rerank=rerank)

    def as_tool(self, k: int | None = None, mode: str | None = None, rerank: bool | None = None, *,
                name: str | None = None, excerpt_chars: int | None = None):
        """A LangChain tool for agents over `retrieve`: its description names the indexed files; per hit it
        returns file, 1-based page, section when known, score and an excerpt of at most `excerpt_chars`.

        Raises RAGError when there is no index. `name` and `excerpt_chars` default to chat.TOOL_NAME and
        chat.TOOL_EXCERPT_CHARS.
        """
        from localrag.retrieval import chat

        k = self.k(k)
        self._check_request(k, mode, rerank)
        return chat.make_tool(self, sorted(self.files), k, mode, rerank, name=chat.TOOL_NAME if name is None else name,
                              excerpt_chars=chat.TOOL_EXCERPT_CHARS if excerpt_chars is None else excerpt_chars)
