"""The index settings: which of them rebuild an index and which only its BM25 arrays, how a run's choices meet the
manifest's and the defaults (`resolve_settings`), and how the chunk settings cut a page (`text_splitter`)."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from localrag.bm25 import check_stemmer
from localrag.errors import RAGError
from localrag.pdf import PDF_LOADERS

# Settings whose change invalidates every stored chunk.
REBUILD_SETTINGS = ("embedding_model", "embedding_backend", "chunk_size", "chunk_overlap", "pdf_loader",
                    "chunk_headers", "chunk_context")
# What a manifest written before a setting existed was built with: indexes before context lines had none.
UNRECORDED_SETTINGS = {"chunk_context": False}
PAGE_CHUNKS = "page"  # the chunk size that keeps each page whole (one chunk per page, no overlap)
# Settings that exist only with whole-page chunks: the characters above which a page is still split.
PAGE_SETTINGS = ("page_chunk_limit",)
# Settings of the BM25 side only: recorded in the manifest, and a change rebuilds the BM25 arrays (seconds), never
# the embeddings.
BM25_SETTINGS = ("bm25_stemmer",)


def significant_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` less those at the value indexes had before the setting was recorded: names, digests and logs
    derived from them stay as they were for every index that does not use a newer setting."""
    return {key: value for key, value in settings.items()
            if key not in UNRECORDED_SETTINGS or value != UNRECORDED_SETTINGS[key]}


def collection_name(settings: dict) -> str:
    """Server collection name derived from the index settings, so two configurations never share one.

    Only the REBUILD_SETTINGS name it: another BM25 stemmer reuses the same stored vectors."""
    embedded = {key: settings[key] for key in REBUILD_SETTINGS}
    digest = hashlib.sha256(json.dumps(embedded, sort_keys=True).encode("utf-8")).hexdigest()[:12]
    return f"localrag-{digest}"


def resolve_settings(requested: dict, stored: dict, defaults: dict) -> dict:
    """Each rebuild setting: the caller's choice, else the index's, else the default; RAGError when invalid."""
    built = stored if not stored else {**UNRECORDED_SETTINGS, **stored}
    defaults = {**UNRECORDED_SETTINGS, **defaults}
    settings = {key: (requested[key] if requested.get(key) is not None else built.get(key, defaults[key]))
                for key in REBUILD_SETTINGS + BM25_SETTINGS}
    try:
        check_stemmer(settings["bm25_stemmer"])
    except ValueError as exc:
        raise RAGError(f"{exc} (BM25_STEMMER in local_rag.py, or --bm25-stemmer)") from None
    if settings["pdf_loader"] not in PDF_LOADERS:
        raise RAGError(f"unknown PDF loader {settings['pdf_loader']!r}; use one of {', '.join(PDF_LOADERS)}")
    if settings["chunk_size"] == PAGE_CHUNKS:
        return _page_settings(settings, requested, stored, defaults)
    if not isinstance(settings["chunk_size"], int):
        raise RAGError(f"chunk size must be a number of characters or {PAGE_CHUNKS!r}, got "
                       f"{settings['chunk_size']!r}")
    if settings["chunk_size"] < 1 or settings["chunk_overlap"] < 0:
        raise RAGError(f"chunk size must be at least 1 and chunk overlap at least 0 characters, got size "
                       f"{settings['chunk_size']} and overlap {settings['chunk_overlap']}")
    if settings["chunk_overlap"] >= settings["chunk_size"]:
        raise RAGError(f"chunk overlap {settings['chunk_overlap']} must be smaller than the chunk size "
                       f"{settings['chunk_size']}")
    return settings


def _page_settings(settings: dict, requested: dict, stored: dict, defaults: dict) -> dict:
    """Whole-page chunks: no overlap (an explicit other one is a RAGError) and the page limit of PAGE_SETTINGS."""
    if requested.get("chunk_overlap") not in (None, 0):
        raise RAGError(f"whole-page chunks (chunk size {PAGE_CHUNKS!r}) have no overlap, got chunk overlap "
                       f"{requested['chunk_overlap']}; leave the overlap out or give 0")
    limit = next((source["page_chunk_limit"] for source in (requested, stored, defaults)
                  if source.get("page_chunk_limit") is not None), None)
    if not isinstance(limit, int) or limit < 1:
        raise RAGError(f"the page chunk limit must be a positive number of characters, got {limit!r}")
    return dict(settings, chunk_overlap=0, page_chunk_limit=limit)


def parse_chunk_size(text: str) -> int | str:
    """A --chunk-size value: a positive number of characters, or "page" (ValueError naming both otherwise)."""
    text = str(text).strip()
    if text == PAGE_CHUNKS:
        return PAGE_CHUNKS
    try:
        size = int(text)
    except ValueError:
        size = 0
    if size < 1:
        raise ValueError(f"must be a positive number of characters or {PAGE_CHUNKS!r} (one chunk per page), "
                         f"got {text!r}")
    return size


def text_splitter(settings: dict):
    """The splitter of one page's text: chunk_size characters with chunk_overlap, or with whole-page chunks the
    page in one piece unless it is longer than page_chunk_limit (then pieces of at most that, no overlap)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    if settings["chunk_size"] == PAGE_CHUNKS:
        return RecursiveCharacterTextSplitter(chunk_size=settings["page_chunk_limit"], chunk_overlap=0)
    return RecursiveCharacterTextSplitter(chunk_size=settings["chunk_size"], chunk_overlap=settings["chunk_overlap"])
