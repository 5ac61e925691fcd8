"""What a report says about the configuration it measured: the configuration block of the text report and the
JSON report's `settings` (what --compare diffs).

Paths are shown relative to the working folder (outputs.display_path), never as this machine's absolute path: a
committed report is diffed on other people's machines.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Mapping, Sequence

from localrag.eval_defaults import LocalRAG
from localrag.index import PAGE_CHUNKS, significant_settings
from localrag.outputs import display_path
from localrag.report import plural
from localrag.run_plan import profile_words
def dense_search_text(rag: LocalRAG, questions: Sequence[str], depth: int | None = None) -> str:
    """How the dense list was searched: exactly, or by the index's IVF with its recall against exact search,
    measured here on the run's questions at the candidate depth (`depth`, else `candidate_k`; localrag/ivf.py)."""
    from localrag import ivf

    search = rag.index.dense_search()
    if search["method"] == "exact":
        return f"exact cosine over all {rag.info.get('counts', {}).get('chunks', 0)} indexed chunks"
    k, asked = depth or rag.candidate_k, tuple(dict.fromkeys(questions))
    # Keyed by what decides the figure (the chunks, the IVF's lists and seed, the probes, k, the questions), not
    # by the object: a suite opens many indexes in one process, and an IVF of other lists has the same chunks.
    key = (rag.index.fingerprint(), search["lists"], search["seed"], search["probes"], k, asked)
    if key not in _IVF_RECALL:  # once per index and question set, not per ablation row
        vectors = [rag.retriever.query_vector(rag.prepare_query(q)) for q in asked]
        exact = [[i for i, _ in rag.index.nearest(v, k, exact=True)] for v in vectors]
        found = [[i for i, _ in rag.index.nearest(v, k)] for v in vectors]
        _IVF_RECALL[key] = ivf.recall(exact, found)
    return (f"approximate: IVF of {search['lists']} lists, {search['probes']} probed per query (seed "
            f"{search['seed']}); recall@{k} against exact search {_IVF_RECALL[key]:.3f} over "
            f"{plural(len(asked), 'question')}")


_IVF_RECALL: dict[tuple, float] = {}  # dense_search_text's measurements in this process


def reranker_name(model: str) -> str:
    """A cross-encoder as reports name it: a local folder by display_path (no absolute path in a committed
    report), a hub name as given."""
    return display_path(model) if Path(model).is_dir() else model


def config_block(rag: LocalRAG, args: argparse.Namespace, mode: str, rerank: bool, extra: list,
                 questions: Sequence[str] = (), *, k: int) -> list:
    """The configuration block of a run that asks `retrieve(question, k)` of every question: the candidates per
    retriever it states are the ones that k gives (`LocalRAG.candidate_depth`), as the stage ranks count them."""
    s = rag.display_settings
    depth = rag.candidate_depth(k)
    counts = rag.info.get("counts", {})
    if rerank:
        reranker = f"on ({reranker_name(rag.reranker_model)})"
    elif rag.reranker is not None:
        reranker = "off (--no-rerank for this row)"
    else:
        reranker = f"off ({rag.reranker_off_reason})" if rag.reranker_off_reason != "turned off" else \
            "off (--no-rerank)"
    profile = getattr(args, "profile", None)
    preset = profile and f"{profile} ({profile_words(args.defaults.profiles[profile])}; flags given beside it win)"
    rows = [*extra,
            *([("Profile", preset)] if profile else []),
            *([("Suggested profile", suggestion)] if (suggestion := profile_suggestion(rag, args)) else []),
            ("Index", f"{rag.location if rag.chroma_url else display_path(rag.path)} ({counts.get('files', 0)} files, "
                      f"{counts.get('pages', 0)} pages, {counts.get('chunks', 0)} chunks)"),
            ("Embedding model", f"{s['embedding_model']} ({s['embedding_backend']})"),
            ("Chunking", f"{chunking_text(s)}, chunk headers {headers_text(s, bool(args.dataset))}"),
            *([("PDF loader", f"{s['pdf_loader']} (page text rules {rag.index.text_rules_summary()})")]
              if not args.dataset else []),
            *([("BM25 stemmer", s["bm25_stemmer"])] if s["bm25_stemmer"] != "none" else []),
            ("Query instructions", f"on ({rag.query_instructions!r})" if rag.query_instructions else "off"),
            ("Retrieval mode", f"{mode} ({depth} candidates per retriever"
                               + (f", {fusion_words(rag)})" if mode == "hybrid" else ")")),
            *([("Dense search", dense_search_text(rag, questions, depth))] if mode != "bm25" else []),
            ("Document prior", document_prior_text(rag)),
            ("Reranker", reranker),
            ("Final order by", rag.describe_order(mode, rerank)),
            ("Ranked by", "pages (each page once, by its best chunk)" if rag.rank_by == "page" else
             "chunks (a page may appear more than once)")]
    return rows


def headers_text(settings: Mapping[str, Any], dataset: bool) -> str:
    """Whether chunks carry headers, and for PDFs whether those hold each chunk's context line."""
    if not settings["chunk_headers"]:
        return "off"
    if dataset:
        return "on"
    return "on, with context lines (title, form, period, registrant, section)" if settings.get("chunk_context") \
        else "on, without context lines"


def profile_suggestion(rag: LocalRAG, args: argparse.Namespace) -> str | None:
    """Why --profile long-pdf may serve this shelf better: its PDFs average LONG_PDF_PAGES (local_rag.py) pages or
    more and no profile was chosen; None otherwise (datasets, short documents)."""
    if getattr(args, "profile", None) or args.dataset or not rag.index.files:
        return None
    pages = sum(entry.get("pages", 0) for entry in rag.index.files.values()) / len(rag.index.files)
    if pages < args.defaults.long_pdf_pages:
        return None
    return (f"long-pdf (the indexed PDFs average {pages:.0f} pages; on long filings it finds the right page more "
            f"often: README, \"Long PDFs\"; run with --profile long-pdf)")


def document_prior_text(rag: LocalRAG) -> str:
    """The document prior in the configuration block: its weight and how many files it knows, or off."""
    if rag.document_prior <= 0:
        return "off"
    known = sum(1 for entry in rag.index.files.values() if entry.get("identity"))
    return (f"{rag.document_prior:g} x how well a file's identity matches the question ({known} of "
            f"{len(rag.index.files)} files have one)")


def fusion_words(rag: LocalRAG) -> str:
    """Hybrid mode's fusion in the retrieval mode's line: 'RRF k=1' or 'convex fusion, dense weight 0.8'."""
    return f"convex fusion, dense weight {rag.dense_weight:g}" if rag.fusion == "convex" else f"RRF k={rag.rrf_k}"


def fusion_settings(rag: LocalRAG) -> dict[str, Any]:
    """Hybrid mode's fusion as JSON settings: RRF's k, or convex fusion and its dense weight."""
    if rag.fusion == "convex":
        return {"fusion": "convex", "dense_weight": rag.dense_weight}
    return {"rrf_k": rag.rrf_k}


def chunking_text(settings: Mapping[str, Any]) -> str:
    """How an index is chunked, in the configuration block's words."""
    if settings["chunk_size"] == PAGE_CHUNKS:
        return (f"whole pages (one chunk per page, no overlap; a page over {settings['page_chunk_limit']} "
                f"characters is split)")
    return f"{settings['chunk_size']} characters, overlap {settings['chunk_overlap']}"


def settings_json(rag: LocalRAG, args: argparse.Namespace, mode: str, rerank: bool) -> dict[str, Any]:
    """The configuration as machine-readable values (the JSON report's `settings`): what --compare diffs."""
    s = rag.index.settings
    index = rag.location if rag.chroma_url else display_path(rag.path)
    settings = {"index": index, "embedding_model": s["embedding_model"], "embedding_backend": s["embedding_backend"],
                "chunk_size": s["chunk_size"], "chunk_overlap": s["chunk_overlap"],
                **({"page_chunk_limit": s["page_chunk_limit"]} if "page_chunk_limit" in s else {}),
                "chunk_headers": s["chunk_headers"],
                # A setting newer than older reports appears when it differs from their old value, so a comparison
                # with them names only real changes.
                **({} if args.dataset else significant_settings({"chunk_context": s["chunk_context"],
                                                                 "pdf_loader": s["pdf_loader"]})),
                "bm25_stemmer": s["bm25_stemmer"],
                "query_instructions": rag.query_instructions, "retrieval_mode": mode,
                "candidate_k": rag.candidate_k, **(fusion_settings(rag) if mode == "hybrid" else {}),
                "rank_by": rag.rank_by, **({"document_prior": rag.document_prior} if rag.document_prior else {}),
                **({"profile": args.profile} if getattr(args, "profile", None) else {}),
                "reranker": reranker_name(rag.reranker_model) if rerank else None}
    if not args.dataset:
        settings["page_tolerance"] = args.page_tolerance
    return settings
