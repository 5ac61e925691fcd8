"""The indexes an evaluation measures: opened as the chat's retriever, locked for the run, synced (or, with
--no-sync, checked and its staleness reported), and given their questions' vectors before the rows run.

An index holds its lock until the run ends, so no other process changes it while it is measured: the writer lock
when the run syncs it, a reader's lock with --no-sync, which other readers share (localrag/index/locks.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from localrag.retrieval import llm_rerank
from localrag.runs import query_vectors
from localrag.runs.defaults import EvalOptions, LocalRAGLike, log
from localrag.errors import EvalError
from localrag.files import display_path, same_path
from localrag.settings import IndexSettings, mode_of
from localrag.runs.plan import (INDEX_SETTINGS, derived_index_path, requested_settings, resolved_index_settings,
                                settings_words)


def open_rag(options: EvalOptions, held: contextlib.ExitStack, index: str | Path,
             settings: Mapping[str, Any] | None = None, cache: bool = False) -> LocalRAGLike:
    """The retriever of this run, holding the index's lock on `held` (the run's lock stack) until the run ends: the
    writer lock when the run syncs it, a reader's lock with --no-sync (two such runs never wait for each other).

    No other process changes the index while it is synced and measured; a read-only index is only read.
    `settings`: the index settings asked for (INDEX_SETTINGS keys; default: the flags'); `cache`: the index is
    one of the evaluation's caches, synced even with --no-sync.
    """
    o, d = options, options.defaults
    settings = requested_settings(o) if settings is None else settings
    # Without --rerank-model the reranker argument is left out: LocalRAG's default model, off when unloadable.
    reranker: dict[str, Any] = {"reranker_model": None} if o.no_rerank else \
        ({"reranker_model": o.rerank_model} if o.rerank_model else {})
    if llm_rerank.is_llm_reranker(o.rerank_model):  # the judge's cache and call limit serve its grades
        reranker.update(rerank_cache=o.judge_cache or d.judge_cache, rerank_max_calls=o.judge_max_calls)
    # A retrieval option left out (None) takes local_rag.py's default.
    given = {name: getattr(o, name) for name in ("rrf_k", "rank_by", "fusion", "dense_weight", "document_prior")}
    retrieval = {name: d.retriever[name] if value is None else value for name, value in given.items()}
    rag = d.open_retriever(
        index, index=IndexSettings.from_options(settings), retrieval_mode=o.mode,
        **reranker, **retrieval, ivf_min_chunks=o.ivf_min_chunks, ivf_lists=o.ivf_lists,
        ivf_probes=o.ivf_probes, query_instructions=d.query_instructions if o.query_instructions else "",
        quiet=o.quiet, chroma_url=o.chroma_url, allow_downloads=o.allow_downloads, check_store=o.check_store)
    exists = rag.info.get("settings") or rag.info_problem
    if cache or not o.no_sync:
        held.enter_context(rag.writing(wait=not o.no_wait))
    elif exists and not rag.read_only:  # --no-sync only reads: beside other readers, never beside a writer
        held.enter_context(rag.reading(wait=not o.no_wait))
    return rag


def check_docs_folder(docs: Path) -> None:
    """EvalError when the docs folder is missing or this user may not list it."""
    try:
        found = docs.is_dir()
    except OSError as exc:  # a folder above it that this user may not enter
        raise EvalError(f"docs folder {docs} cannot be read ({exc.strerror}); pass --docs FOLDER with your PDFs, or "
                        f"make it readable") from None
    if not found:
        raise EvalError(f"docs folder {docs} does not exist; pass --docs FOLDER with your PDFs")
    if not os.access(docs, os.R_OK | os.X_OK):
        raise EvalError(f"docs folder {docs} cannot be read (Permission denied); pass --docs FOLDER with your PDFs, "
                        f"or make it readable")


def followed_folder(followed: Sequence[str], location: str, options: EvalOptions) -> str:
    """The folder a run without --docs syncs an index with (`followed`: the paths it follows): the first it follows;
    for the default index that follows none yet (its first run), the default docs folder. EvalError for any other
    index that follows none (a new one, a server's new collection): it is built only from a folder the user named."""
    o, d = options, options.defaults
    if followed:
        return followed[0]
    if o.chroma_url == d.chroma_url and (o.index is None or same_path(o.index, d.index)):
        return d.docs
    raise EvalError(f"the index {location} follows no folder of PDFs yet, and without --docs this run has none to "
                    f"build it from. Check --index{' and --chroma-url' if o.chroma_url else ''}, or pass --docs "
                    f"FOLDER to build a new index there")


def sync_pdf_index(rag: LocalRAGLike, options: EvalOptions, docs: str | Path | None = None,
                   cache: bool = False) -> list[str]:
    """Sync (default) or, with --no-sync, check the index and list what is stale; returns warnings for the report.

    Without --docs the index's recorded folder is used, so evaluating another index never syncs it with
    the default folder. `docs`: the folder to sync instead; `cache`: sync even with --no-sync.
    """
    o = options
    docs = Path(docs or o.docs or followed_folder(rag.followed_paths, rag.location, o))
    if len(rag.followed_paths) > 1 and not o.docs and not cache:
        raise EvalError(f"the index {rag.location} follows several paths ({', '.join(rag.followed_paths)}); "
                        f"pass --docs FOLDER, or sync it with add_pdfs.py and evaluate with --no-sync")
    check_docs_folder(docs)
    if o.no_sync and not cache:
        if not rag.info.get("settings") and not rag.info_problem:
            raise EvalError(f"no index at {rag.path} and --no-sync was given; run without --no-sync or run "
                            f"add_pdfs.py first")
        rag.require_consistent()
        changes = rag.pdf_changes(docs)
        stale = [f"{what}: {name}" for what in ("added", "updated", "removed") for name in changes[what]]
        stale += [f"settings: {reason}" for reason in rag.stale_reasons()]
        if stale:
            warning = (f"--no-sync: the index is stale ({len(stale)} difference{'s' if len(stale) != 1 else ''}): "
                       + "; ".join(stale))
            log(f"warning: {warning}", o.quiet)
            return [warning]
        return []
    report = rag.sync([docs], rebuild=o.rebuild, progress=not o.quiet, wait=not o.no_wait,
                      switch_folder=o.switch_folder, allow_empty=o.allow_empty)
    if cache:
        log(f"Index {display_path(rag.path)} ({', '.join(settings_words(rag.index.settings))}): "
            + (report.summary() if report.changed else "up to date, nothing embedded"), o.quiet)
    elif report.changed:
        log("Index synced: " + report.summary(), o.quiet)
        for label, name in report.file_lines():
            log(f"  {label}: {name}", o.quiet)
        for name, why in report.repaired:
            log(f"  repaired: {name}: {why}", o.quiet)
    return ([f"Not indexed: {name}: {reason}" for name, reason in report.failed]
            + [f"Skipped: {name}: {reason}" for name, reason in report.skipped])


@dataclasses.dataclass
class OpenedIndex:
    """An index of the run, synced: its retriever, the sync's warnings for the report, and the seconds opening
    and syncing took (a build included)."""

    rag: LocalRAGLike
    warnings: list[str]
    seconds: float


def open_pdf_index(options: EvalOptions, held: contextlib.ExitStack, wanted: Mapping[str, Any]) -> OpenedIndex:
    """The index a goldset run measures for the index settings `wanted` (option names), synced.

    Settings equal to the evaluated index's (the default one or --index) measure it; other settings measure an
    index built with them from the same docs folder, the rest as the evaluated index has them, kept under
    --index-cache (or, on a Chroma server, in the collection of those settings): the evaluated index is only read.
    Each index's writer lock is held on `held` until the run ends.
    """
    o, d = options, options.defaults
    started = time.perf_counter()
    base_path = o.index or d.index
    if not wanted:
        rag = open_rag(o, held, base_path, {})
        return OpenedIndex(rag, sync_pdf_index(rag, o), time.perf_counter() - started)
    probe = d.open_retriever(base_path, reranker_model=None, quiet=True, chroma_url=o.chroma_url)
    # On a server the probe has the default settings: a collection is named after its settings, so other
    # settings are another collection there.
    base = {key: probe.settings[key] for key in (*d.index_settings, "page_chunk_limit") if key in probe.settings}
    settings = resolved_index_settings(wanted, base, d.page_chunk_limit)
    if settings == base:
        rag = open_rag(o, held, base_path, wanted)
        return OpenedIndex(rag, sync_pdf_index(rag, o), time.perf_counter() - started)
    if len(probe.followed_paths) > 1 and not o.docs:
        raise EvalError(f"the index {probe.location} follows several paths ({', '.join(probe.followed_paths)}); "
                        f"pass --docs FOLDER to say which folder the index of other settings is built from")
    docs = Path(o.docs or followed_folder(probe.followed_paths, probe.location, o))
    check_docs_folder(docs)
    path = base_path if o.chroma_url else derived_index_path(docs, settings, o.index_cache)
    changed = [key for key in settings if settings.get(key) != base.get(key)]
    log(f"Index settings {', '.join(settings_words(settings, changed))} differ from "
        f"{probe.location if o.chroma_url else display_path(base_path)}'s: evaluating "
        + ("the collection of those settings" if o.chroma_url else display_path(path))
        + " (built on first use, synced after)", o.quiet)
    option_names = {index_name: option for option, index_name in INDEX_SETTINGS.items()}
    rag = open_rag(o, held, path, {option_names[key]: value for key, value in settings.items()}, cache=True)
    return OpenedIndex(rag, sync_pdf_index(rag, o, docs=docs, cache=True), time.perf_counter() - started)


def query_vector_cache(options: EvalOptions) -> query_vectors.QueryVectorCache | None:
    """The run's query vector cache (--query-cache), or None with --no-query-cache."""
    if options.no_query_cache:
        return None
    return query_vectors.QueryVectorCache(options.query_cache, options.query_cache_entries,
                                          warn=lambda message: log(f"warning: {message}", options.quiet))


def fill_query_vectors(rag: LocalRAGLike, questions: Sequence[str], modes: Sequence[str], options: EvalOptions,
                       cache: query_vectors.QueryVectorCache | None) -> None:
    """Give `rag` the vector of every question before its rows run: from the query vector cache, the others
    embedded in batches (the defaults' batch size) and stored, all of them again with --rebuild. Nothing when every
    row is BM25 only: it needs no vector, so no model loads."""
    if not any(mode_of(mode).dense for mode in modes):
        return
    prepared = [rag.prepare_query(q) for q in questions]
    cached, embedded = query_vectors.fill(rag.retriever, cache, prepared, embed=True,
                                          batch_size=options.defaults.embedding_batch_size * 4,
                                          refresh=options.rebuild)
    if cache is not None and (cached or embedded):  # neither: an earlier index's retriever lent them (reused)
        log(f"Query vectors: {cached} from the cache {display_path(cache.path)}, {embedded} embedded"
            + (" (--rebuild: none read from the cache)" if options.rebuild else ""), options.quiet)


def share_query_vectors(rag: LocalRAGLike, shared: LocalRAGLike | None) -> LocalRAGLike:
    """Let `rag` use the query vectors of an earlier index's retriever when both embed queries alike (same model,
    backend and export), so a sweep embeds each question once per embedding model; the retriever to share next."""
    if shared is not None and rag.retriever.share_query_vectors(shared.retriever):
        return shared
    return rag
