"""The plan of an evaluation: the rows of a --sweep grid or an --ablation, the index settings each asks for, and
the index each group of rows shares.

Rows with equal index settings share one index (opened once, its query vectors embedded once); a row of other
index settings than the evaluated index's measures an index built with them under the index cache, never the
evaluated index. --profile fills the options the command line left out.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from localrag.errors import EvalError, RAGError
from localrag.runs.defaults import CommandLine, EvalOptions, LocalRAGLike, log
from localrag.settings import (MODES, OPTION_NAMES, index_setting_fields, mode_of, option_name, profile_filling,
                               resolve_settings, significant_settings)


# Index settings the evaluation takes, by option name (flag and sweep axis), with the index's name for each.
INDEX_SETTINGS = OPTION_NAMES
RETRIEVAL_AXES = ("mode", "rerank")  # sweep axes that share an index (and its query vectors) between rows
SWEEP_AXES = (*INDEX_SETTINGS, *RETRIEVAL_AXES)  # every axis --sweep knows, in the order --help lists them
ON_OFF = {"on": True, "true": True, "yes": True, "off": False, "false": False, "no": False}  # boolean axis values


def requested_settings(flags: CommandLine) -> dict[str, Any]:
    """The index settings the command line gives (option name -> value), in INDEX_SETTINGS order."""
    return {key: getattr(flags, key) for key in INDEX_SETTINGS if getattr(flags, key) is not None}


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




def profile_words(preset: Mapping[str, Any], used: Mapping[str, Any] | None = None,
                  given: Mapping[str, str] | None = None) -> str:
    """A profile's settings (LocalRAG arguments) as 'chunk_size page, mode hybrid, ...' (option names): the preset's
    values, or with `used` (option -> the value the run used) those, each one that differs from the preset marked
    'dense_weight 0.5 by --dense-weight instead of 0.8' (`given`: option -> what set it: its flag, --sweep, ...)."""
    def shown(value: Any) -> str:
        return f"{value:g}" if isinstance(value, float) else format_setting(value)

    words = []
    for key, preset_value in preset.items():
        option = option_name(key)
        value = (used or {}).get(option, preset_value)
        mark = "" if value == preset_value else \
            f"{f' by {given[option]}' if option in (given or {}) else ''} instead of {shown(preset_value)}"
        words.append(f"{option} {shown(value)}{mark}")
    return ", ".join(words)


def profile_sources(options: EvalOptions) -> dict[str, str]:
    """What set each option of --profile's preset that the preset did not fill: its flag, --sweep (a swept axis),
    or --ablation (the mode of an ablation row)."""
    preset = options.defaults.profiles.get(options.profile or "", {})
    swept = {axis for axis, _ in options.sweep_axes}
    sources = {option: "--sweep" if option in swept else f"--{option.replace('_', '-')}"
               for option in (option_name(key) for key in preset)
               if option not in options.profile_keys}
    return {**sources, **({"mode": "--ablation"} if options.ablation else {})}


# What each fusion flag does, for the note that it does nothing beside a mode or fusion that has no use for it.
FUSION_FLAG_ROLES = {"--fusion": "it chooses how hybrid mode joins the dense and BM25 lists",
                     "--dense-weight": "it weighs hybrid mode's convex fusion",
                     "--rrf-k": "it is the constant of hybrid mode's reciprocal rank fusion"}


def ineffective_settings(mode: str, fusion: str, given: Mapping[str, Any]) -> list[str]:
    """The notes on fusion flags that do nothing in a row of `mode` and `fusion` (`given`: flag -> value, the
    flags the user gave): every one in a mode that does not fuse by them (MODES: only hybrid does), --dense-weight
    beside RRF fusion, --rrf-k beside convex."""
    notes = []
    for flag, value in given.items():
        shown = f"{value:g}" if isinstance(value, float) else value
        if flag not in FUSION_FLAG_ROLES:
            continue
        if not mode_of(mode).fuses:
            notes.append(f"{flag} {shown} has no effect in {mode} mode: {FUSION_FLAG_ROLES[flag]}")
        elif flag == "--dense-weight" and fusion != "convex":
            notes.append(f"--dense-weight {shown} has no effect with RRF fusion: it weighs convex fusion "
                         f"(--fusion convex)")
        elif flag == "--rrf-k" and fusion != "rrf":
            notes.append(f"--rrf-k {shown} has no effect with convex fusion: it is the constant of RRF fusion "
                         f"(--fusion rrf)")
    return notes


def given_fusion_flags(options: EvalOptions) -> dict[str, Any]:
    """The fusion flags the command line gave (flag -> value), not those --profile filled."""
    flags = (("--fusion", "fusion"), ("--dense-weight", "dense_weight"), ("--rrf-k", "rrf_k"))
    return {flag: getattr(options, option) for flag, option in flags
            if getattr(options, option) is not None and option not in options.profile_keys}


def warn_ineffective_settings(options: EvalOptions) -> None:
    """Warn once, before any work, of each fusion flag that does nothing in a planned row (the rows' reports say it
    again in their Notes)."""
    modes = MODES if options.ablation else dict.fromkeys(row.mode for row in evaluation_rows(options))
    fusion = options.fusion or options.defaults.retriever["fusion"]
    notes = (note for mode in modes for note in ineffective_settings(mode, fusion, given_fusion_flags(options)))
    for note in dict.fromkeys(notes):
        log(f"warning: {note}", options.quiet)


def apply_profile(command: CommandLine, profiles: Mapping[str, Mapping[str, Any]],
                  default_mode: str) -> tuple[CommandLine, frozenset[str]]:
    """The command line with the options it (its flags and --sweep axes) left out filled from --profile's preset
    (`profiles`: the presets by name), then the mode's `default_mode`; and the option names the preset filled
    (report names then say the profile, not each setting)."""
    swept = {text.partition("=")[0].strip() for text in command.sweep or []}
    filled = profile_filling(profiles.get(command.profile or "", {}), lambda option: getattr(command, option), swept)
    mode = filled.get("mode", command.mode)
    return command.with_options(**{**filled, "mode": default_mode if mode is None else mode}), frozenset(filled)


def parse_axis_value(axis: str, text: str) -> Any:
    """One value of a --sweep axis, checked as its flag checks it (an index setting as its field in
    settings.IndexSettings says); ValueError saying what is valid."""
    text = text.strip()
    meta = index_setting_fields_by_option().get(axis, {})
    parse = bool if axis == "rerank" else meta.get("parse")
    if parse is int:
        low = 1 if axis == "page_chunk_limit" else 0
        if not text.lstrip("-").isdigit() or int(text) < low:
            raise ValueError(f"must be a whole number of characters, {low} or more, got {text!r}")
        return int(text)
    if parse is bool:
        if text.lower() not in ON_OFF:
            raise ValueError(f"must be on or off, got {text!r}")
        return ON_OFF[text.lower()]
    if parse is not None:  # chunk_size: a number of characters or "page"
        return parse(text)
    choices = MODES if axis == "mode" else meta.get("choices")
    if choices is not None and text not in choices:
        raise ValueError(f"must be one of {', '.join(choices)}, got {text!r}")
    if not text:
        raise ValueError("must not be empty")
    return text


def index_setting_fields_by_option() -> dict[str, Mapping[str, Any]]:
    """Each index setting's field metadata (settings.setting) by its option name."""
    return {(f.metadata["option"] or f.name): f.metadata for f in index_setting_fields()}


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


def evaluation_rows(options: EvalOptions) -> list[Row]:
    """The configurations to evaluate: the command line's one, or --sweep's grid (the first axis varies slowest,
    so the first row takes every axis's first value: the row all others are compared with)."""
    fixed = requested_settings(options)
    rerank = False if options.no_rerank else None
    if not options.sweep_axes:
        return [Row("", tuple(fixed.items()), options.mode, rerank)]
    rows = []
    for values in itertools.product(*(values for _, values in options.sweep_axes)):
        chosen = dict(zip((axis for axis, _ in options.sweep_axes), values))
        index = {**fixed, **{key: value for key, value in chosen.items() if key in INDEX_SETTINGS}}
        name = " ".join(f"{axis}={format_setting(value)}" for axis, value in chosen.items())
        rows.append(Row(name, tuple(index.items()), chosen.get("mode", options.mode), chosen.get("rerank", rerank)))
    return rows


def check_sweep(command: CommandLine) -> list[tuple[str, list[Any]]]:
    """--sweep parsed into its axes (parse_sweep); EvalError when it contradicts another flag."""
    axes = parse_sweep(command.sweep or [])
    if not axes:
        return axes
    given = requested_settings(command)
    for axis, _ in axes:
        if axis in given:
            raise EvalError(f"--{axis.replace('_', '-')} {format_setting(given[axis])} and --sweep {axis}=... both "
                            f"set {axis}; put the value into the sweep or drop the flag")
    if command.no_rerank and any(axis == "rerank" for axis, _ in axes):
        raise EvalError("--no-rerank and --sweep rerank=... both set reranking; drop --no-rerank")
    if command.dataset and command.index and any(axis in INDEX_SETTINGS for axis, _ in axes):
        raise EvalError("--sweep over index settings needs the dataset's cached indexes (one per settings); drop "
                        "--index")
    return axes


def index_groups(rows: Sequence[Row]) -> list[list[int]]:
    """Row numbers grouped by the index settings they ask for, in order of first appearance: one index each."""
    groups: dict[tuple, list[int]] = {}
    for number, row in enumerate(rows):
        groups.setdefault(tuple(sorted(row.index, key=lambda item: item[0])), []).append(number)
    return list(groups.values())


def row_configs(rag: LocalRAGLike, ablation: bool,
                rows: Sequence[tuple[int, Row]]) -> tuple[list[tuple[int, str, str, bool]], str]:
    """(row number, name, mode, rerank) of the rows evaluated on `rag`, and why rows are missing ("" if none):
    --ablation's rows (`ablation`), or the given ones (a row asking for reranking without a reranker is missing)."""
    if ablation:
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


def ablation_configs(rag: LocalRAGLike) -> tuple[list[tuple[str, bool]], str]:
    """The (mode, rerank) rows of --ablation, and why the reranked rows are missing ("" if they are not)."""
    if rag.reranker is not None:
        return [(mode, rerank) for mode in MODES for rerank in (False, True)], ""
    why = "--no-rerank was given" if rag.reranker_off_reason == "turned off" else \
        f"no reranker: {rag.reranker_off_reason}"
    return [(mode, False) for mode in MODES], f"every '+ rerank' row is missing ({why})"


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


def dataset_index_path(options: EvalOptions, wanted: Mapping[str, Any] | None = None) -> Path:
    """Cache folder named after the dataset, its sample and the index settings (`wanted`, option names, over the
    defaults; default: the flags'): other settings never reuse it."""
    from localrag.datasets import beir as beir_data

    fingerprint = beir_data.dataset_fingerprint(options.dataset, options.split, options.max_queries,
                                                options.max_corpus_docs, options.seed)
    resolved = dataset_settings(options, wanted)
    settings = {key: resolved[key] for key in ("embedding_model", "embedding_backend", "chunk_size", "chunk_overlap",
                                               "chunk_headers", "page_chunk_limit") if key in resolved}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
    return Path(options.defaults.dataset_cache) / f"{Path(options.dataset).resolve().name}-{fingerprint}-{digest}"


def dataset_settings(options: EvalOptions, wanted: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A dataset index's settings (the index's names): `wanted` (option names; default: the flags') over the
    defaults."""
    return resolved_index_settings(requested_settings(options) if wanted is None else wanted,
                                   options.defaults.index_settings, options.defaults.page_chunk_limit)
