"""What a sync will do, decided from the manifest and the docs folder (or the dataset records) before it writes
anything: which sources are new, changed, unchanged, failed before, gone or to be read again under newer page
text rules (`plan_pdfs`, `plan_records`), why the whole index must be rebuilt (`rebuild_reasons`), and what a
sync must refuse. The report of a sync (sync_report.SyncReport) starts as its plan's file lists."""
from __future__ import annotations

import collections
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from localrag.models import names
from localrag.errors import RAGError
from localrag.settings import PAGE_SETTINGS, REBUILD_SETTINGS, UNRECORDED_SETTINGS, setting_flag
from localrag.index.manifest import INDEX_FORMAT, Manifest
from localrag.text.pdf import TEXT_RULES, discover_pdfs
from localrag.index.sync_report import EmbeddingModel, SourceUnit, SyncReport


@dataclass
class SyncPlan:
    """What a sync writes besides its report's file lists: the sources to read and embed, and those to delete."""
    todo: list[Any] = field(default_factory=list)  # PDFs as (source, path, sha256), dataset records as SourceUnits
    gone: list[str] = field(default_factory=list)  # sources no longer given: their chunks and entries go


def plan_pdfs(manifest: Manifest, found: dict[str, Path], hash_file: Callable[[Path], str],
              report: SyncReport) -> SyncPlan:
    """Compare the PDFs `found` with the manifest by file hash (`hash_file`), filling the report's file lists.

    A file that cannot be hashed (deleted or made unreadable while the folder was read) is skipped and keeps
    what the index holds of it."""
    plan = SyncPlan()
    failed_before = manifest.failed or {}
    for name, path in found.items():
        try:
            digest = hash_file(path)
        except OSError as exc:
            report.skipped.append((name, f"could not be read ({type(exc).__name__}: {exc.strerror or exc})"))
            continue
        entry = manifest.files.get(name) or failed_before.get(name)
        if entry and entry["sha256"] == digest and name in manifest.files and \
                manifest.file_text_rules(entry) != TEXT_RULES:
            report.reread.append(name)  # same file, read by older rules: only chunks whose text changed
            plan.todo.append((name, path, digest))
            continue
        if entry and entry["sha256"] == digest:
            if name in failed_before:
                report.failed.append((name, failed_before[name]["reason"] + " (unchanged since last sync)"))
            else:
                report.unchanged.append(name)
            continue
        (report.updated if name in manifest.files else report.added).append(name)
        plan.todo.append((name, path, digest))
    plan.gone = sorted((set(manifest.files) | set(failed_before) | set(manifest.partial or {})) - set(found))
    report.removed += [name for name in plan.gone if name in manifest.files or name in failed_before]
    return plan


def record_unit(record: dict) -> SourceUnit:
    """A dataset document {doc_id, title, text, metadata} as one source, its title as the chunk header."""
    text = record.get("text") or ""
    title = record.get("title") or ""
    digest = hashlib.sha256(f"{title}\n{text}".encode("utf-8")).hexdigest()
    return SourceUnit(source=record["doc_id"], file_hash=digest, pages=[(0, "1", text)],
                      header=f"{title}\n" if title else "", extra_metadata={"doc_id": record["doc_id"]},
                      extraction_method="text")


def plan_records(manifest: Manifest, records: Iterable[dict], report: SyncReport) -> SyncPlan:
    """Compare dataset documents with the manifest by the hash of their title and text, filling the report's file
    lists."""
    wanted = {record["doc_id"]: record_unit(record) for record in records}
    plan = SyncPlan(gone=sorted((set(manifest.files) | set(manifest.partial or {})) - set(wanted)))
    report.removed += [name for name in plan.gone if name in manifest.files]
    for name, unit in wanted.items():
        entry = manifest.files.get(name)
        if entry and entry["sha256"] == unit.file_hash:
            report.unchanged.append(name)
            continue
        (report.updated if entry else report.added).append(name)
        plan.todo.append(unit)
    return plan


def older_format(manifest: Manifest) -> int | None:
    """The INDEX_FORMAT of the stored index when older than this one's (chunks to upgrade), else None."""
    stored = 1 if manifest.format is None else manifest.format
    return stored if manifest.settings and stored < INDEX_FORMAT else None


def refuse_other_folder(manifest: Manifest, recorded: list[str], location: str, paths: Sequence[str | Path],
                        found: dict[str, Path], *, switch: bool, allow_empty: bool) -> None:
    """RAGError when the index at `location` follows other paths than `paths` (`recorded`: those it follows,
    absolute) unless `switch`, and when `paths` hold no PDF at all while the index has files (unless
    `allow_empty`)."""
    followed = sorted(str(Path(p).resolve()) for p in paths)
    recorded = sorted(recorded)
    if recorded and recorded != followed and manifest.files and not switch:
        raise RAGError(f"the index {location} follows {', '.join(recorded)}, not {', '.join(followed)}; "
                       f"syncing it with another folder would replace its files. Give the folder it follows, "
                       f"or add --switch-folder (or --rebuild) to make it follow {', '.join(followed)}",
                       reason="index follows another folder")
    known = set(manifest.files) | set(manifest.failed or {})
    if not found and known and not allow_empty:  # --rebuild too: a typo must not empty it
        raise RAGError(f"{', '.join(map(str, paths))} holds no PDF files; syncing would remove all "
                       f"{len(known)} files from the index {location}. Check the path, or add "
                       f"--allow-empty to empty the index", reason="no PDF files")


def pdf_changes(manifest: Manifest, docs_path: str | Path, hash_file: Callable[[Path], str]) -> dict[str, list[str]]:
    """Compare the docs folder with the index by file hash (`hash_file`), without changing anything."""
    current = discover_pdfs([docs_path]).found
    known = dict(manifest.files)
    known.update({name: {"sha256": entry["sha256"]} for name, entry in (manifest.failed or {}).items()})
    changes = {"added": [], "updated": [], "removed": sorted(set(known) - set(current)), "unchanged": []}
    for name, path in sorted(current.items()):
        if name not in known:
            changes["added"].append(name)
        elif known[name]["sha256"] != hash_file(path):
            changes["updated"].append(name)
        else:
            changes["unchanged"].append(name)
    return changes


def rebuild_reasons(manifest: Manifest, settings: dict, model: EmbeddingModel) -> list[str]:
    """Settings of the stored index (its `manifest`) that differ from the requested `settings` and `model`: each one
    means a whole rebuild. The model is described, never loaded."""
    stored = manifest.settings
    if not stored:
        return ["no index has been built yet"]
    stored = {**UNRECORDED_SETTINGS, **stored}
    keys = REBUILD_SETTINGS + tuple(k for k in PAGE_SETTINGS if k in stored or k in settings)
    reasons = [f"{key}: index has {stored.get(key)!r}, requested {settings.get(key)!r}"
               for key in keys if stored.get(key) != settings.get(key)]
    # Indexes older than the prefix record were embedded without prefixes (no model had any then).
    built_prefixes = manifest.embedding_prefixes
    built_prefixes = names.NO_PREFIXES if built_prefixes is None else built_prefixes
    if built_prefixes != model.prefixes:
        def shown(p: dict) -> str:
            return f"query {p.get('query', '')!r} passage {p.get('passage', '')!r}"

        reasons.append(f"embedding prefixes: index has {shown(built_prefixes)}, {model.display_name} uses "
                       f"{shown(model.prefixes)}")
    built_with, runs = manifest.embedding_export, model.export
    if not reasons and built_with and runs and built_with != runs:
        # Same backend name, another int8 model: other CPU family (onnx-int8) or calibration (openvino-int8).
        reasons.append(f"embedding export: index was embedded by {built_with!r}, this machine runs {runs!r}")
    return reasons


def refuse_other_settings(manifest: Manifest, requested: dict, settings: dict, location: str, index_flag: str) -> None:
    """RAGError for a reader whose caller chose index settings (`requested`, resolved into `settings`) that change
    what the index at `location` holds (its chunks or vectors) and that the built index (its `manifest`) has other
    values of: a search would answer with chunks those settings do not describe, where a sync rebuilds it (a BM25
    setting only rebuilds the BM25 arrays, which a search does itself)."""
    if not manifest.settings:
        return
    stored = {**UNRECORDED_SETTINGS, **manifest.settings}
    differ = [key for key in REBUILD_SETTINGS + PAGE_SETTINGS
              if key in requested and key in settings and stored.get(key) != settings[key]]
    if not differ:
        return
    given = ", ".join(f"{key}={settings[key]!r}" for key in differ)
    built = ", ".join(f"{key}={stored.get(key)!r}" for key in differ)
    flags = " ".join(setting_flag(key, settings[key]) for key in differ)
    raise RAGError(f"this LocalRAG was given {given}, but the index {location} was built with {built}: it would "
                   f"search chunks those settings do not describe. Rebuild the index with them (add_pdfs.py "
                   f"{index_flag} {flags}, or --profile NAME for the settings of PROFILES[NAME]; or call this "
                   f"LocalRAG's sync()), or leave {'that argument' if len(differ) == 1 else 'those arguments'} out "
                   f"to search the index as it was built", reason="index built with other settings")


def text_rules_reasons(manifest: Manifest) -> list[str]:
    """Why a sync re-reads files: PDFs read with other page text rules than this localRAG's (see plan_pdfs)."""
    if not manifest.docs:  # dataset indexes hold their records' text, untouched by the PDF rules
        return []
    old = collections.Counter(manifest.file_text_rules(e) for e in manifest.files.values()
                              if manifest.file_text_rules(e) != TEXT_RULES)
    return [f"page text rules: {n} of {len(manifest.files)} files were read with version {version}, this localRAG "
            f"applies version {TEXT_RULES} (localrag/text/pdf.py); a sync reads them again and embeds only the "
            f"chunks whose text changed" for version, n in sorted(old.items())]
