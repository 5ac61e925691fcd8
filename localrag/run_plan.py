"""The plan of an evaluation: the rows of a --sweep grid or an --ablation, the index settings each asks for, and
the index each group of rows shares.

Rows with equal index settings share one index (opened once, its query vectors embedded once); a row of other
index settings than the evaluated index's measures an index built with them under the index cache, never the
evaluated index. --profile fills the options the command line left out.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from localrag.embeddings import BACKENDS as EMBEDDING_BACKENDS
from localrag.errors import RAGError
from localrag.eval_defaults import log
from localrag.evaluate import EvalError
from localrag.index_settings import parse_chunk_size, resolve_settings, significant_settings
from localrag.pdf import PDF_LOADERS
from localrag.retriever import RETRIEVAL_MODES


# Index settings the evaluation takes, by option name (flag and sweep axis), with the index's name for each.
INDEX_SETTINGS = {"chunk_size": "chunk_size", "chunk_overlap": "chunk_overlap", "page_chunk_limit": "page_chunk_limit",
                  "loader": "pdf_loader", "chunk_headers": "chunk_headers", "chunk_context": "chunk_context",
                  "embedding_model": "embedding_model",
                  "embedding_backend": "embedding_backend", "bm25_stemmer": "bm25_stemmer"}
RETRIEVAL_AXES = ("mode", "rerank")  # sweep axes that share an index (and its query vectors) between rows
SWEEP_AXES = (*INDEX_SETTINGS, *RETRIEVAL_AXES)  # every axis --sweep knows, in the order --help lists them
ON_OFF = {"on": True, "true": True, "yes": True, "off": False, "false": False, "no": False}  # boolean axis values


def requested_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The index settings the command line gives (option name -> value), in INDEX_SETTINGS order."""
    return {key: getattr(args, key) for key in INDEX_SETTINGS if getattr(args, key, None) is not None}


def settings_words(settings: Mapping[str, Any], keys: Sequence[str] | None = None) -> list[str]:
    """Index settings as 'chunk_size 500' words, for logs (`keys`: which, default all; a setting newer than the
    manifest format only when it is on, as older indexes had it off)."""
    shown = settings if keys else significant_settings(settings)
    return [f"{key} {format_setting(shown[key])}" for key in (keys or shown) if key in shown]


def format_setting(value: Any) -> str:
    """A setting's value in messages and settings diffs: text bare, booleans on/off, None as 'none'."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return "none" if value is None else str(value)


def slug(text: str) -> str:
    """Text made safe for a file name (an embedding model 'org/name' -> 'org_name')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "_"


PROFILE_OPTIONS = {"retrieval_mode": "mode"}  # LocalRAG argument -> option name, where the two differ


def profile_words(preset: Mapping[str, Any], used: Mapping[str, Any] | None = None,
                  given: Mapping[str, str] | None = None) -> str:
    """A profile's settings (LocalRAG arguments) as 'chunk_size page, mode hybrid, ...' (option names): the preset's
    values, or with `used` (option -> the value the run used) those, each one that differs from the preset marked
    'dense_weight 0.5 by --dense-weight instead of 0.8' (`given`: option -> what set it: its flag, --sweep, ...)."""
    def shown(value: Any) -> str:
        return f"{value:g}" if isinstance(value, float) else format_setting(value)

    words = []
    for key, preset_value in preset.items():
        option = PROFILE_OPTIONS.get(key, key)
        value = (used or {}).get(option, preset_value)
        mark = "" if value == preset_value else \
            f"{f' by {given[option]}' if option in (given or {}) else ''} instead of {shown(preset_value)}"
        words.append(f"{option} {shown(value)}{mark}")
    return ", ".join(words)


def profile_sources(args: argparse.Namespace) -> dict[str, str]:
    """What set each option of --profile's preset that the preset did not fill: its flag, --sweep (a swept axis),
    or --ablation (the mode of an ablation row)."""
    preset = args.defaults.profiles.get(getattr(args, "profile", None) or "", {})
    swept = {axis for axis, _ in getattr(args, "sweep_axes", None) or []}
    sources = {option: "--sweep" if option in swept else f"--{option.replace('_', '-')}"
               for option in (PROFILE_OPTIONS.get(key, key) for key in preset)
               if option not in getattr(args, "profile_keys", set())}
    return {**sources, **({"mode": "--ablation"} if args.ablation else {})}


# What each fusion flag does, for the note that it does nothing beside a mode or fusion that has no use for it.
FUSION_FLAG_ROLES = {"--fusion": "it chooses how hybrid mode joins the dense and BM25 lists",
                     "--dense-weight": "it weighs hybrid mode's convex fusion",
                     "--rrf-k": "it is the constant of hybrid mode's reciprocal rank fusion"}


def ineffective_settings(mode: str, fusion: str, given: Mapping[str, Any]) -> list[str]:
    """The notes on fusion flags that do nothing in a row of `mode` and `fusion` (`given`: flag -> value, the
    flags the user gave): every one outside hybrid mode, --dense-weight beside RRF fusion, --rrf-k beside convex."""
    notes = []
    for flag, value in given.items():
        shown = f"{value:g}" if isinstance(value, float) else value
        if flag not in FUSION_FLAG_ROLES:
            continue
        if mode != "hybrid":
            notes.append(f"{flag} {shown} has no effect in {mode} mode: {FUSION_FLAG_ROLES[flag]}")
        elif flag == "--dense-weight" and fusion != "convex":
            notes.append(f"--dense-weight {shown} has no effect with RRF fusion: it weighs convex fusion "
                         f"(--fusion convex)")
        elif flag == "--rrf-k" and fusion != "rrf":
            notes.append(f"--rrf-k {shown} has no effect with convex fusion: it is the constant of RRF fusion "
                         f"(--fusion rrf)")
    return notes


def given_fusion_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The fusion flags the command line gave (flag -> value), not those --profile filled."""
    filled = getattr(args, "profile_keys", set())
    return {flag: getattr(args, option) for flag, option in (("--fusion", "fusion"), ("--dense-weight", "dense_weight"),
                                                             ("--rrf-k", "rrf_k"))
            if getattr(args, option, None) is not None and option not in filled}


def warn_ineffective_settings(args: argparse.Namespace) -> None:
    """Warn once, before any work, of each fusion flag that does nothing in a planned row (the rows' reports say it
    again in their Notes)."""
    modes = RETRIEVAL_MODES if args.ablation else dict.fromkeys(row.mode for row in evaluation_rows(args))
    fusion = args.fusion or args.defaults.retriever["fusion"]
    notes = (note for mode in modes for note in ineffective_settings(mode, fusion, given_fusion_flags(args)))
    for note in dict.fromkeys(notes):
        log(args, f"warning: {note}")


def apply_profile(args: argparse.Namespace) -> None:
    """Fill the options the command line (its flags and --sweep axes) left out from --profile's preset, then the
    mode's default; the filled option names are kept in `args.profile_keys` (report names then say the profile,
    not each setting)."""
    args.profile_keys = set()
    swept = {text.partition("=")[0].strip() for text in getattr(args, "sweep", None) or []}
    for key, value in args.defaults.profiles.get(getattr(args, "profile", None) or "", {}).items():
        option = PROFILE_OPTIONS.get(key, key)
        if getattr(args, option, None) is None and option not in swept:
            setattr(args, option, value)
            args.profile_keys.add(option)
    if args.mode is None:
        args.mode = args.defaults.retriever["retrieval_mode"]


def parse_axis_value(axis: str, text: str) -> Any:
    """One value of a --sweep axis, checked as its flag checks it; ValueError saying what is valid."""
    text = text.strip()
    if axis == "chunk_size":
        return parse_chunk_size(text)
    if axis in ("chunk_overlap", "page_chunk_limit"):
        low = 0 if axis == "chunk_overlap" else 1
        if not text.lstrip("-").isdigit() or int(text) < low:
            raise ValueError(f"must be a whole number of characters, {low} or more, got {text!r}")
        return int(text)
    if axis in ("chunk_headers", "chunk_context", "rerank"):
        if text.lower() not in ON_OFF:
            raise ValueError(f"must be on or off, got {text!r}")
        return ON_OFF[text.lower()]
    choices = {"loader": PDF_LOADERS, "embedding_backend": EMBEDDING_BACKENDS, "mode": RETRIEVAL_MODES}.get(axis)
    if choices is not None and text not in choices:
        raise ValueError(f"must be one of {', '.join(choices)}, got {text!r}")
    if not text:
        raise ValueError("must not be empty")
    return text


def parse_sweep(texts: Sequence[str]) -> list[tuple[str, list[Any]]]:
    """--sweep AXIS=V1,V2 flags -> [(axis, values)] in the given order; EvalError naming the valid axes."""
    axes: list[tuple[str, list[Any]]] = []
    for text in texts:
        axis, sep, values = text.partition("=")
        axis = axis.strip()
        if not sep or not axis or not values.strip():
            raise EvalError(f"--sweep needs AXIS=VALUE,VALUE like chunk_size=500,1000, got {text!r}; axes: "
                            f"{', '.join(SWEEP_AXES)}")
        if axis not in SWEEP_AXES:
            raise EvalError(f"--sweep {text}: unknown axis {axis!r}; valid axes: {', '.join(SWEEP_AXES)}")
        if any(axis == seen for seen, _ in axes):
            raise EvalError(f"--sweep names the axis {axis} twice; give all its values in one --sweep")
        parsed = []
        for part in values.split(","):
            try:
                value = parse_axis_value(axis, part)
            except ValueError as exc:
                raise EvalError(f"--sweep {text}: {axis} {exc}") from None
            if value in parsed:
                raise EvalError(f"--sweep {text}: the value {part.strip()} appears twice; give each value once")
            parsed.append(value)
        axes.append((axis, parsed))
    return axes


@dataclasses.dataclass(frozen=True)
class Row:
    """One configuration of an evaluation: its name in tables ("" without --sweep), the index settings it asks
    for (option name -> value), its retrieval mode, and reranking (None: on when the reranker loads)."""

    name: str
    index: tuple[tuple[str, Any], ...]
    mode: str
    rerank: bool | None


def evaluation_rows(args: argparse.Namespace) -> list[Row]:
    """The configurations to evaluate: the command line's one, or --sweep's grid (the first axis varies slowest,
    so the first row takes every axis's first value: the row all others are compared with)."""
    fixed = requested_settings(args)
    rerank = False if args.no_rerank else None
    if not args.sweep_axes:
        return [Row("", tuple(fixed.items()), args.mode, rerank)]
    rows = []
    for values in itertools.product(*(values for _, values in args.sweep_axes)):
        chosen = dict(zip((axis for axis, _ in args.sweep_axes), values))
        index = {**fixed, **{key: value for key, value in chosen.items() if key in INDEX_SETTINGS}}
        name = " ".join(f"{axis}={format_setting(value)}" for axis, value in chosen.items())
        rows.append(Row(name, tuple(index.items()), chosen.get("mode", args.mode), chosen.get("rerank", rerank)))
    return rows


def check_sweep(args: argparse.Namespace) -> None:
    """Parse --sweep into args.sweep_axes; EvalError when it contradicts another flag."""
    args.sweep_axes = parse_sweep(args.sweep or [])
    if not args.sweep_axes:
        return
    given = requested_settings(args)
    for axis, _ in args.sweep_axes:
        if axis in given:
            raise EvalError(f"--{axis.replace('_', '-')} {format_setting(given[axis])} and --sweep {axis}=... both "
                            f"set {axis}; put the value into the sweep or drop the flag")
    if args.no_rerank and any(axis == "rerank" for axis, _ in args.sweep_axes):
        raise EvalError("--no-rerank and --sweep rerank=... both set reranking; drop --no-rerank")
    if args.dataset and args.index and any(axis in INDEX_SETTINGS for axis, _ in args.sweep_axes):
        raise EvalError("--sweep over index settings needs the dataset's cached indexes (one per settings); drop "
                        "--index")


def index_groups(rows: Sequence[Row]) -> list[list[int]]:
    """Row numbers grouped by the index settings they ask for, in order of first appearance: one index each."""
    groups: dict[tuple, list[int]] = {}
    for number, row in enumerate(rows):
        groups.setdefault(tuple(sorted(row.index, key=lambda item: item[0])), []).append(number)
    return list(groups.values())


def row_configs(rag: Any, args: argparse.Namespace,
                rows: Sequence[tuple[int, Row]]) -> tuple[list[tuple[int, str, str, bool]], str]:
    """(row number, name, mode, rerank) of the rows evaluated on `rag`, and why rows are missing ("" if none):
    --ablation's rows, or the given ones (a row asking for reranking without a reranker is missing)."""
    if args.ablation:
        configs, why = ablation_configs(rag)
        return [(n, "", mode, rerank) for n, (mode, rerank) in enumerate(configs)], why
    out = []
    for number, row in rows:
        if row.rerank and rag.reranker is None:
            continue
        out.append((number, row.name, row.mode, rag.reranker is not None if row.rerank is None else row.rerank))
    skipped = len(rows) - len(out)
    why = "" if not skipped else f"the rows with rerank=on are missing (no reranker: {rag.reranker_off_reason})"
    return out, why


def ablation_configs(rag: Any) -> tuple[list[tuple[str, bool]], str]:
    """The (mode, rerank) rows of --ablation, and why the reranked rows are missing ("" if they are not)."""
    if rag.reranker is not None:
        return [(mode, rerank) for mode in RETRIEVAL_MODES for rerank in (False, True)], ""
    why = "--no-rerank was given" if rag.reranker_off_reason == "turned off" else \
        f"no reranker: {rag.reranker_off_reason}"
    return [(mode, False) for mode in RETRIEVAL_MODES], f"every '+ rerank' row is missing ({why})"


def derived_index_path(docs: str | Path, settings: Mapping[str, Any], cache: str | Path) -> Path:
    """The cache folder of an index of `settings` over `docs`: named after the folder (its name and a digest of
    its full path, so two folders named alike never share one) and a digest of the settings."""
    docs = Path(docs).resolve()
    where = hashlib.sha256(str(docs).encode("utf-8")).hexdigest()[:8]
    # Caches named before a setting was recorded keep their names while it stays at its old value.
    what = hashlib.sha256(json.dumps(significant_settings(settings), sort_keys=True).encode("utf-8")).hexdigest()[:10]
    return Path(cache) / f"{docs.name}-{where}-{what}"


def resolved_index_settings(wanted: Mapping[str, Any], base: Mapping[str, Any],
                            page_chunk_limit: int) -> dict[str, Any]:
    """The full index settings (the index's names) of `wanted` (option names) over the `base` index's (and the
    default `page_chunk_limit`); EvalError when they contradict each other (an overlap not smaller than the chunk
    size, ...)."""
    requested = {INDEX_SETTINGS[key]: value for key, value in wanted.items()}
    defaults = {"page_chunk_limit": page_chunk_limit, **base}
    try:
        return resolve_settings(requested, dict(base), defaults)
    except RAGError as exc:
        raise EvalError(f"index settings {', '.join(settings_words(wanted))}: {exc}") from None


def dataset_index_path(args: argparse.Namespace, wanted: Mapping[str, Any] | None = None) -> Path:
    """Cache folder named after the dataset, its sample and the index settings (`wanted`, option names, over the
    defaults; default: the flags'): other settings never reuse it."""
    from localrag import datasets as beir_data

    fingerprint = beir_data.dataset_fingerprint(args.dataset, args.split, args.max_queries, args.max_corpus_docs,
                                                args.seed)
    resolved = dataset_settings(args, wanted)
    settings = {key: resolved[key] for key in ("embedding_model", "embedding_backend", "chunk_size", "chunk_overlap",
                                               "chunk_headers", "page_chunk_limit") if key in resolved}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
    return Path(args.defaults.dataset_cache) / f"{Path(args.dataset).resolve().name}-{fingerprint}-{digest}"


def dataset_settings(args: argparse.Namespace, wanted: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A dataset index's settings (the index's names): `wanted` (option names; default: the flags') over the
    defaults."""
    return resolved_index_settings(requested_settings(args) if wanted is None else wanted,
                                   args.defaults.index_settings, args.defaults.page_chunk_limit)
