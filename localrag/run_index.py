"""The indexes an evaluation measures: opened as the chat's retriever, locked for the run, synced (or, with
--no-sync, checked and its staleness reported), and given their questions' vectors before the rows run.

An index holds its writer lock until the run ends, so no other process changes it while it is measured.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from localrag import llm_rerank, query_vectors
from localrag.configuration import profile_suggestion
from localrag.eval_defaults import LocalRAG, log
from localrag.errors import EvalError
from localrag.files import display_path
from localrag.run_plan import (INDEX_SETTINGS, derived_index_path, requested_settings, resolved_index_settings,
                               settings_words)


def open_rag(args: argparse.Namespace, index: str | Path, settings: Mapping[str, Any] | None = None,
             cache: bool = False) -> LocalRAG:
    """The retriever of this run, holding the index's writer lock until the run ends (see `guarded`).

    No other process changes the index while it is synced and measured; a read-only index is only read.
    `settings`: the index settings asked for (INDEX_SETTINGS keys; default: the flags'); `cache`: the index is
    one of the evaluation's caches, synced even with --no-sync.
    """
    settings = requested_settings(args) if settings is None else settings
    # Without --rerank-model the reranker argument is left out: LocalRAG's default model, off when unloadable.
    reranker = {"reranker_model": None} if args.no_rerank else \
        ({"reranker_model": args.rerank_model} if args.rerank_model else {})
    if llm_rerank.is_llm_reranker(args.rerank_model):  # the judge's cache and call limit serve its grades
        reranker.update(rerank_cache=args.judge_cache or args.defaults.judge_cache,
                        rerank_max_calls=args.judge_max_calls)
    # A retrieval option left out (None) takes local_rag.py's default.
    given = {name: getattr(args, name, None) for name in ("rrf_k", "rank_by", "fusion", "dense_weight",
                                                          "document_prior")}
    retrieval = {name: args.defaults.retriever[name] if value is None else value for name, value in given.items()}
    rag = args.defaults.open_retriever(
        index, **{INDEX_SETTINGS[key]: value for key, value in settings.items()}, retrieval_mode=args.mode,
        **reranker, **retrieval, ivf_min_chunks=args.ivf_min_chunks, ivf_lists=args.ivf_lists,
        ivf_probes=args.ivf_probes, query_instructions=args.defaults.query_instructions if args.query_instructions
        else "", quiet=args.quiet, chroma_url=args.chroma_url, allow_downloads=getattr(args, "allow_downloads", None))
    exists = rag.info.get("settings") or rag.info_problem
    if cache or not args.no_sync or (exists and not rag.read_only):
        args.held.enter_context(rag.writing(wait=not args.no_wait))
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


def sync_pdf_index(rag: LocalRAG, args: argparse.Namespace, docs: str | Path | None = None,
                   cache: bool = False) -> list[str]:
    """Sync (default) or, with --no-sync, check the index and list what is stale; returns warnings for the report.

    Without --docs the index's recorded folder is used, so evaluating another index never syncs it with
    the default folder. `docs`: the folder to sync instead; `cache`: sync even with --no-sync.
    """
    docs = Path(docs or args.docs or (rag.followed_paths or [args.defaults.docs])[0])
    if len(rag.followed_paths) > 1 and not args.docs and not cache:
        raise EvalError(f"the index {rag.location} follows several paths ({', '.join(rag.followed_paths)}); "
                        f"pass --docs FOLDER, or sync it with add_pdfs.py and evaluate with --no-sync")
    check_docs_folder(docs)
    if args.no_sync and not cache:
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
            log(args, f"warning: {warning}")
            return [warning]
        return []
    report = rag.sync([docs], rebuild=args.rebuild, progress=not args.quiet, wait=not args.no_wait,
                      switch_folder=args.switch_folder, allow_empty=args.allow_empty)
    if cache:
        log(args, f"Index {display_path(rag.path)} ({', '.join(settings_words(rag.index.settings))}): "
                  + (report.summary() if report.changed else "up to date, nothing embedded"))
    elif report.changed:
        log(args, "Index synced: " + report.summary())
        for label, name in report.file_lines():
            log(args, f"  {label}: {name}")
        for name, why in report.repaired:
            log(args, f"  repaired: {name}: {why}")
    if suggestion := profile_suggestion(rag, args):
        log(args, f"note: suggested profile: {suggestion}")
    return ([f"Not indexed: {name}: {reason}" for name, reason in report.failed]
            + [f"Skipped: {name}: {reason}" for name, reason in report.skipped])


@dataclasses.dataclass
class OpenedIndex:
    """An index of the run, synced: its retriever, the sync's warnings for the report, and the seconds opening
    and syncing took (a build included)."""

    rag: LocalRAG
    warnings: list[str]
    seconds: float


def open_pdf_index(args: argparse.Namespace, wanted: Mapping[str, Any]) -> OpenedIndex:
    """The index a goldset run measures for the index settings `wanted` (option names), synced.

    Settings equal to the evaluated index's (the default one or --index) measure it; other settings measure an
    index built with them from the same docs folder, the rest as the evaluated index has them, kept under
    --index-cache (or, on a Chroma server, in the collection of those settings): the evaluated index is only read.
    """
    started = time.perf_counter()
    base_path = args.index or args.defaults.index
    if not wanted:
        rag = open_rag(args, base_path, {})
        return OpenedIndex(rag, sync_pdf_index(rag, args), time.perf_counter() - started)
    probe = args.defaults.open_retriever(base_path, reranker_model=None, quiet=True, chroma_url=args.chroma_url)
    # On a server the probe has the default settings: a collection is named after its settings, so other
    # settings are another collection there.
    base = {key: probe.settings[key] for key in (*args.defaults.index_settings, "page_chunk_limit")
            if key in probe.settings}
    settings = resolved_index_settings(wanted, base, args.defaults.page_chunk_limit)
    if settings == base:
        rag = open_rag(args, base_path, wanted)
        return OpenedIndex(rag, sync_pdf_index(rag, args), time.perf_counter() - started)
    if len(probe.followed_paths) > 1 and not args.docs:
        raise EvalError(f"the index {probe.location} follows several paths ({', '.join(probe.followed_paths)}); "
                        f"pass --docs FOLDER to say which folder the index of other settings is built from")
    docs = Path(args.docs or (probe.followed_paths or [args.defaults.docs])[0])
    check_docs_folder(docs)
    path = base_path if args.chroma_url else derived_index_path(docs, settings, args.index_cache)
    changed = [key for key in settings if settings.get(key) != base.get(key)]
    log(args, f"Index settings {', '.join(settings_words(settings, changed))} differ from "
              f"{probe.location if args.chroma_url else display_path(base_path)}'s: evaluating "
              + ("the collection of those settings" if args.chroma_url else display_path(path))
              + " (built on first use, synced after)")
    option_names = {index_name: option for option, index_name in INDEX_SETTINGS.items()}
    rag = open_rag(args, path, {option_names[key]: value for key, value in settings.items()}, cache=True)
    return OpenedIndex(rag, sync_pdf_index(rag, args, docs=docs, cache=True), time.perf_counter() - started)


def query_vector_cache(args: argparse.Namespace) -> query_vectors.QueryVectorCache | None:
    """The run's query vector cache (--query-cache), or None with --no-query-cache."""
    if args.no_query_cache:
        return None
    return query_vectors.QueryVectorCache(args.query_cache, args.query_cache_entries,
                                          warn=lambda message: log(args, f"warning: {message}"))


def fill_query_vectors(rag: LocalRAG, questions: Sequence[str], modes: Sequence[str], args: argparse.Namespace,
                       cache: query_vectors.QueryVectorCache | None) -> None:
    """Give `rag` the vector of every question before its rows run: from the query vector cache, the others
    embedded in batches and stored. Nothing when every row is BM25 only: it needs no vector, so no model loads."""
    if all(mode == "bm25" for mode in modes):
        return
    prepared = [rag.prepare_query(q) for q in questions]
    cached, embedded = query_vectors.fill(rag.retriever, cache, prepared, embed=True,
                                          batch_size=args.defaults.embedding_batch_size * 4, refresh=args.rebuild)
    if cache is not None:
        log(args, f"Query vectors: {cached} from the cache {display_path(cache.path)}, {embedded} embedded"
                  + (" (--rebuild: none read from the cache)" if args.rebuild else ""))


def share_query_vectors(rag: LocalRAG, shared: LocalRAG | None) -> LocalRAG:
    """Let `rag` use the query vectors of an earlier index's retriever when both embed queries alike (same model,
    backend and export), so a sweep embeds each question once per embedding model; the retriever to share next."""
    if shared is not None and rag.retriever.share_query_vectors(shared.retriever):
        return shared
    return rag
