"""What a report says about the configuration it measured: the configuration block of the text report and the
JSON report's `settings` (what --compare diffs), and when a run's configuration may replace the committed report's
(`baseline_refusal`).

Paths are shown relative to the working folder (files.display_path), never as this machine's absolute path: a
committed report is diffed on other people's machines.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from localrag.runs.defaults import EvalOptions, LocalRAGLike
from localrag.files import display_path
from localrag.settings import PAGE_CHUNKS, mode_of, significant_settings
from localrag.evaluation.report import plural
from localrag.runs.plan import INDEX_SETTINGS, profile_sources, profile_words, slug


def dense_search_text(rag: LocalRAGLike, questions: Sequence[str], depth: int | None = None) -> str:
    """How the dense list was searched: exactly, or by the index's IVF with its recall against exact search,
    measured here on the run's questions at the candidate depth (`depth`, else `candidate_k`; localrag/search/ivf.py)."""
    from localrag.search import ivf

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


def config_block(rag: LocalRAGLike, options: EvalOptions, mode: str, rerank: bool, extra: list,
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
    profile = options.profile
    # The values this row used, each one a flag, the sweep or the ablation set marked (not the preset's values).
    preset = profile and (f"{profile} (" + profile_words(options.defaults.profiles[profile], used_settings(rag, mode),
                                                         profile_sources(options)) + ")")
    rows = [*extra,
            *([("Profile", preset)] if profile else []),
            ("Index", f"{rag.location if rag.chroma_url else display_path(rag.path)} ({counts.get('files', 0)} files, "
                      f"{counts.get('pages', 0)} pages, {counts.get('chunks', 0)} chunks)"),
            ("Embedding model", f"{s['embedding_model']} ({s['embedding_backend']})"),
            ("Chunking", f"{chunking_text(s)}, chunk headers {headers_text(s, bool(options.dataset))}"),
            *([("PDF loader", f"{s['pdf_loader']} (page text rules {rag.index.text_rules_summary()})")]
              if not options.dataset else []),
            *([("BM25 stemmer", s["bm25_stemmer"])] if s["bm25_stemmer"] != "none" else []),
            ("Query instructions", f"on ({rag.query_instructions!r})" if rag.query_instructions else "off"),
            ("Retrieval mode", f"{mode} ({depth} candidates per retriever"
                               + (f", {fusion_words(rag)})" if mode_of(mode).fuses else ")")),
            *([("Dense search", dense_search_text(rag, questions, depth))] if mode_of(mode).dense else []),
            ("Document prior", document_prior_text(rag)),
            ("Reranker", reranker),
            ("Final order by", rag.describe_order(mode, rerank)),
            ("Ranked by", "pages (each page once, by its best chunk)" if rag.rank_by == "page" else
             "chunks (a page may appear more than once)")]
    return rows


def used_settings(rag: LocalRAGLike, mode: str) -> dict[str, Any]:
    """The settings a row used, by option name (what --profile's preset may set): its index's and retriever's."""
    index = {option: rag.index.settings[name] for option, name in INDEX_SETTINGS.items() if name in rag.index.settings}
    return {**index, "mode": mode, **{key: getattr(rag, key) for key in ("fusion", "dense_weight", "document_prior",
                                                                          "rrf_k", "rank_by")}}


def headers_text(settings: Mapping[str, Any], dataset: bool) -> str:
    """Whether chunks carry headers, and for PDFs whether those hold each chunk's context line."""
    if not settings["chunk_headers"]:
        return "off"
    if dataset:
        return "on"
    return "on, with context lines (title, form, period, registrant, section)" if settings.get("chunk_context") \
        else "on, without context lines"


def document_prior_text(rag: LocalRAGLike) -> str:
    """The document prior in the configuration block: its weight and how many files it knows, or off."""
    if rag.document_prior <= 0:
        return "off"
    known = sum(1 for entry in rag.index.files.values() if entry.get("identity"))
    return (f"{rag.document_prior:g} x how well a file's identity matches the question ({known} of "
            f"{len(rag.index.files)} files have one)")


def fusion_words(rag: LocalRAGLike) -> str:
    """Hybrid mode's fusion in the retrieval mode's line: 'RRF k=1' or 'convex fusion, dense weight 0.8'."""
    return f"convex fusion, dense weight {rag.dense_weight:g}" if rag.fusion == "convex" else f"RRF k={rag.rrf_k}"


def fusion_settings(rag: LocalRAGLike) -> dict[str, Any]:
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


def settings_json(rag: LocalRAGLike, options: EvalOptions, mode: str, rerank: bool) -> dict[str, Any]:
    """The configuration as machine-readable values (the JSON report's `settings`): what --compare diffs."""
    s = rag.index.settings
    index = rag.location if rag.chroma_url else display_path(rag.path)
    settings = {"index": index, "embedding_model": s["embedding_model"], "embedding_backend": s["embedding_backend"],
                **export_settings(rag.embedding_export, s["embedding_backend"]),
                "chunk_size": s["chunk_size"], "chunk_overlap": s["chunk_overlap"],
                **({"page_chunk_limit": s["page_chunk_limit"]} if "page_chunk_limit" in s else {}),
                "chunk_headers": s["chunk_headers"],
                # A setting newer than older reports appears when it differs from their old value, so a comparison
                # with them names only real changes.
                **({} if options.dataset else significant_settings({"chunk_context": s["chunk_context"],
                                                                 "pdf_loader": s["pdf_loader"]})),
                "bm25_stemmer": s["bm25_stemmer"],
                "query_instructions": rag.query_instructions, "retrieval_mode": mode,
                "candidate_k": rag.candidate_k, **(fusion_settings(rag) if mode_of(mode).fuses else {}),
                "rank_by": rag.rank_by, **({"document_prior": rag.document_prior} if rag.document_prior else {}),
                **({"profile": options.profile} if options.profile else {}),
                **reranker_settings(rag, rerank)}
    if not options.dataset:
        settings["page_tolerance"] = options.page_tolerance
    return settings


def export_settings(export: str | None, backend: str) -> dict[str, Any]:
    """{"embedding_export": the export that ran} where it says more than the backend: an int8 export depends on the
    CPU (embeddings.export_name), so one backend may run another export on another machine."""
    return {} if export in (None, backend) else {"embedding_export": export}


def reranker_settings(rag: LocalRAGLike, rerank: bool) -> dict[str, Any]:
    """The reranker as it ran and as the settings asked for it: "reranker" (what ordered the list; None: no
    reranking), "reranker_asked" (RERANKER_MODEL, --rerank-model or the argument; None: none, or this row turns it
    off) and, for an asked-for reranker that is off on this machine, "reranker_off_reason"."""
    if rerank:
        name = reranker_name(rag.reranker_model)
        return {"reranker": name, "reranker_asked": name}
    asked = None if rag.reranker is not None else rag.reranker_asked  # loaded, yet off: this row turns it off
    if asked is None:
        return {"reranker": None, "reranker_asked": None}
    return {"reranker": None, "reranker_asked": reranker_name(asked), "reranker_off_reason": rag.reranker_off_reason}


_UNKNOWN = object()  # what a report written before "reranker_asked" asked for, when its reranker was off


def _reranker_asked(settings: Mapping[str, Any]) -> Any:
    if "reranker_asked" in settings:
        return settings["reranker_asked"]
    return settings.get("reranker") or _UNKNOWN  # an older report records only what ran


def machine_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name part, words) of each part of the configuration that differs between two reports' JSON settings
    although the settings asked for the same: the reranker (on here, off there, or the reverse) and the embedding
    export (the same model and backend, another CPU). A difference that follows from a changed setting is none."""
    out = []
    old_asked, new_asked = _reranker_asked(old), _reranker_asked(new)
    same_ask = old_asked == new_asked or _UNKNOWN in (old_asked, new_asked)
    # Both ran: then they ran what was asked for, and the same asked-for name ran the same reranker.
    if same_ask and bool(old.get("reranker")) != bool(new.get("reranker")):
        if new.get("reranker"):
            why = old.get("reranker_off_reason") or "it did not run there"
            out.append(("reranker-on", f"the reranker {new['reranker']} ran here but was off in the committed "
                                       f"report ({why})"))
        else:
            why = new.get("reranker_off_reason") or "it did not run here"
            out.append(("reranker-off", f"the reranker {old['reranker']} ran for the committed report but is off "
                                        f"here ({why})"))
    if ("embedding_export" in old and "embedding_export" in new and old["embedding_export"] != new["embedding_export"]
            and all(old.get(key) == new.get(key) for key in ("embedding_model", "embedding_backend"))):
        out.append((f"embedding_export-{slug(str(new['embedding_export']))}",
                    f"the embedding model {new.get('embedding_model')} ran as the export {new['embedding_export']} "
                    f"here and as {old['embedding_export']} for the committed report (the "
                    f"{new.get('embedding_backend')} backend's export depends on the CPU)"))
    return out


def baseline_refusal(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why a run whose JSON report settings are `new` must not replace the committed report whose settings are
    `old`: the same settings asked for ran another configuration on this machine (`machine_differences`). None
    when the configurations agree, or when each difference follows from a setting the user changed (CHUNK_SIZE
    edited, RERANKER_MODEL set to None, ...): such a run is the new baseline."""
    return "; ".join(words for _, words in machine_differences(old, new)) or None


def difference_name(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The name part of a refused run's reports, after what differs: 'reranker-on', 'embedding_export-...'."""
    return ".".join(name for name, _ in machine_differences(old, new))
