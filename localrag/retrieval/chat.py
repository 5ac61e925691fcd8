"""LangChain faces of the retriever for a chat or an agent: a `BaseRetriever` and a tool.

Both run exactly `LocalRAG.retrieve` (candidates, fusion, reranking, scores), so what the evaluation measures is
what the chat gets; `rag.vectorstore.as_retriever()` would skip BM25, fusion and reranking. `LocalRAG.as_retriever`
and `LocalRAG.as_tool` (local_rag.py) build them.
"""
from __future__ import annotations

import threading
import weakref
from typing import Any, Protocol, Sequence

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, ConfigDict, Field

from localrag.errors import RAGError
from localrag.text.pages import strip_chunk_header

TOOL_NAME = "search_pdf_shelf"  # the name an agent calls the tool by
TOOL_EXCERPT_CHARS = 600  # most characters of each hit's text in the tool's output, so results never flood a context
TOOL_MIN_EXCERPT_CHARS = 20  # the smallest excerpt length a tool accepts: below it an excerpt says nothing
TOOL_SECTION_CHARS = 120  # most characters of a section title in the tool's output (titles can be whole sentences)
TOOL_FILES_NAMED = 12  # indexed file names listed in the tool's description; the rest are counted
SCORE_KEY = "score"  # metadata key of the retrieval score on each Document the retriever returns
ELLIPSIS = " …"  # marks an excerpt or title that was cut

_LOCKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # one lock per LocalRAG object
_LOCKS_GUARD = threading.Lock()


class Searcher(Protocol):
    """What the faces need: `LocalRAG.retrieve`."""

    def retrieve(self, query: str, k: int = ..., mode: str | None = None,
                 rerank: bool | None = None) -> list[tuple[Document, float]]: ...


def _lock_of(rag: Searcher) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(rag, threading.Lock())


def retrieve_serialized(rag: Searcher, query: str, k: int, mode: str | None,
                        rerank: bool | None) -> list[tuple[Document, float]]:
    """`rag.retrieve`, one call at a time per object.

    LangChain runs `batch` and the async methods in threads; a LocalRAG's caches and counters (query vectors,
    reranker scores, `stats`) are not made for concurrent use, and its models use every core anyway."""
    with _lock_of(rag):
        return rag.retrieve(query, k=k, mode=mode, rerank=rerank)


def scored(doc: Document, score: float) -> Document:
    """A copy of `doc` with `score` (of the stage that ordered it last) in its metadata under SCORE_KEY."""
    return Document(id=doc.id, page_content=doc.page_content, metadata={**doc.metadata, SCORE_KEY: float(score)})


class ShelfRetriever(BaseRetriever):
    """A LangChain retriever whose invoke/batch/ainvoke/abatch run `LocalRAG.retrieve` with these settings.

    Each Document is the chunk `retrieve` returns (same id, text and metadata), with its score added to the
    metadata under "score"."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    rag: Any = Field(description="the LocalRAG (anything with its `retrieve`)")
    k: int = Field(description="chunks returned per query")
    mode: str | None = Field(default=None, description="retrieval mode; None: the LocalRAG's own")
    rerank: bool | None = Field(default=None, description="reranking on or off; None: the LocalRAG's own")

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [scored(doc, score) for doc, score in retrieve_serialized(self.rag, query, self.k, self.mode,
                                                                          self.rerank)]


def excerpt(text: str, max_chars: int) -> str:
    """The chunk's text without its header, whitespace collapsed, at most `max_chars` long.

    A longer text is cut at the last word boundary that leaves room for the ELLIPSIS (mid-word only when a
    single word is that long)."""
    text = " ".join(strip_chunk_header(text).split())
    if len(text) <= max_chars:
        return text
    room = max_chars - len(ELLIPSIS)
    head = text[:room + 1]  # one more: a space right after the room is a word boundary too
    cut = head.rsplit(" ", 1)[0] if " " in head else text[:room]
    return cut.rstrip() + ELLIPSIS


def hit_heading(number: int, doc: Document, score: float) -> str:
    """'[1] report.pdf, page 12 (printed "10"), section "Risk factors", score 0.8312'.

    The page is the 1-based one a PDF viewer jumps to; the printed label follows when the page prints another."""
    meta = doc.metadata
    parts = [f"[{number}] {meta.get('source', '?')}"]
    if meta.get("page_number") is not None:
        page = f"page {meta['page_number']}"
        label = meta.get("page_label")
        if label and str(label) != str(meta["page_number"]):
            page += f' (printed "{label}")'
        parts.append(page)
    if meta.get("section"):
        parts.append(f'section "{excerpt(str(meta["section"]), TOOL_SECTION_CHARS)}"')
    parts.append(f"score {score:.4f}")
    return ", ".join(parts)


def format_hits(hits: Sequence[tuple[Document, float]], excerpt_chars: int = TOOL_EXCERPT_CHARS) -> str:
    """The tool's output: per hit a heading line (`hit_heading`) and an excerpt of at most `excerpt_chars`."""
    if not hits:
        return "No passage on the shelf matches this query."
    return "\n\n".join(f"{hit_heading(n, doc, score)}\n{excerpt(doc.page_content, excerpt_chars)}"
                       for n, (doc, score) in enumerate(hits, start=1))


def tool_description(files: Sequence[str], files_named: int = TOOL_FILES_NAMED) -> str:
    """What the shelf holds and when to call the tool, in words a model can act on."""
    files = sorted(files)
    names = ", ".join(files[:files_named])
    if len(files) > files_named:
        names += f" and {len(files) - files_named} more"
    return (f"Searches the user's PDF shelf ({len(files)} indexed file{'s' if len(files) != 1 else ''}: {names}) "
            "and returns the most relevant passages, each with its file, page (as a PDF viewer numbers it), "
            "section when known, score and an excerpt. Call it whenever the answer may be in these documents, "
            "before answering from memory, and cite file and page. Input: a search query in the documents' "
            "language.")


class ShelfQuery(BaseModel):
    """The tool's one argument."""
    query: str = Field(description="what to search for: a question or key words")


def make_tool(rag: Searcher, files: Sequence[str], k: int, mode: str | None = None, rerank: bool | None = None,
              name: str = TOOL_NAME, excerpt_chars: int = TOOL_EXCERPT_CHARS) -> StructuredTool:
    """A LangChain tool over `rag.retrieve` for the indexed `files`: k hits, excerpts of at most `excerpt_chars`."""
    if excerpt_chars < TOOL_MIN_EXCERPT_CHARS:
        raise RAGError(f"excerpt_chars must be at least {TOOL_MIN_EXCERPT_CHARS}, got {excerpt_chars}")

    def search(query: str) -> str:
        return format_hits(retrieve_serialized(rag, query, k, mode, rerank), excerpt_chars)

    return StructuredTool.from_function(func=search, name=name, description=tool_description(files),
                                        args_schema=ShelfQuery)
