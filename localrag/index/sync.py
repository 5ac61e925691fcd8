"""A sync's writes into an index whose store is ready (`Sync`): what makes PDFs (`write_pdfs`) or dataset records
(`write_records`) the index's exact content, and how a sync runs (`SyncOptions`, `PdfReading`).

The index (localrag/index/index.py) takes its writer lock, readies the store (a rebuild when asked or stale, a foreign
store refused) and hands this module the pieces it writes (`SyncTarget`). Here the store's losses are repaired
(`Sync.prepare`), the plan is made by file hash (localrag/index/sync_plan.py, which writes nothing), what is gone is
deleted, the stored chunks of unchanged files are upgraded in place, the rest is embedded (localrag/index/chunk_writer.py)
and the manifest finished; the index then brings its IVF and BM25 arrays up to date. A sync never re-embeds
unchanged files, and a later sync reuses every stored chunk of an interrupted one.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from localrag.index.chunk_writer import ChunkWriter, SyncTarget, citation_metadata
from localrag.text import language
from localrag.text.identity import document_context
from localrag.errors import RAGError
from localrag.files import log
from localrag.progress import Progress
from localrag.index.manifest import INDEX_FORMAT, RECORDED_PACKAGES, package_versions
from localrag.text.pdf import TEXT_RULES, ExtractedPdf, extract_pdf, front_page, read_outline, sections_by_page
from localrag.index.store import STORE_CHANGE_ROWS, delete_ids
from localrag.index.store_check import dimension_error, remove_orphan_segments, unmarked_manifest_error
from localrag.index.sync_plan import SourceUnit, SyncReport, plan_pdfs, plan_records

LANGUAGE_READ_SOURCES = 50  # files whose stored texts one read gives, where a sync records their language counts


@dataclass(frozen=True)
class SyncOptions:
    """How a sync runs: `rebuild` the whole index first; show progress bars (`progress`); `wait` for another
    writer's lock rather than fail; embed `embed_batch` texts per model call and commit `group_chunks` chunks at a
    time."""
    rebuild: bool
    progress: bool
    wait: bool
    group_chunks: int
    embed_batch: int


@dataclass(frozen=True)
class PdfReading:
    """How a PDF sync reads its paths: `extract(paths, loader)` reads the PDFs, `hash_file` tells changed files from
    unchanged ones, `docs_root` names sources relative to it (None: to each given path); `switch_folder` lets the
    index follow other paths, `allow_empty` lets paths without PDFs empty it."""
    extract: Callable[[Sequence[Path], str], Iterator[ExtractedPdf]]
    hash_file: Callable[[Path], str]
    docs_root: str | Path | None
    switch_folder: bool
    allow_empty: bool


class Sync:
    """One sync of the index `target` (its store made ready, under its writer lock): the steps that change the
    store and the manifest, and `report`, what they did. `started`: when the sync began (time.perf_counter)."""

    def __init__(self, target: SyncTarget, report: SyncReport, started: float) -> None:
        self.target = target
        self.report = report
        self.started = started

    def prepare(self, rebuild: bool, rebuilding: bool) -> None:
        """Refuse a store of other vectors, repair what the store lost, record what this build is (settings, model,
        format, dimension) before anything is written. `rebuilding`: the store was just emptied for a rebuild."""
        target = self.target
        dimension = self._embedding_dimension(rebuilding)
        self._repair(dimension, rebuild)
        target.manifest.record_build(target.settings, target.model.export, target.model.prefixes, dimension)

    def write_pdfs(self, paths: Sequence[str | Path], found: dict[str, Path], older: int | None,
                   options: SyncOptions, reading: PdfReading) -> None:
        """Make the index hold exactly the PDFs `found` under `paths`; `older`: the INDEX_FORMAT of the stored chunks
        when older than this one's (they are upgraded in place)."""
        manifest, report = self.target.manifest, self.report
        self.record_reading(paths)
        plan = plan_pdfs(manifest, found, reading.hash_file, report)
        for name in plan.gone:
            self.delete_source(name)
            manifest.failed.pop(name, None)
        if older and report.unchanged:
            self.upgrade_chunks({name: self.outline_of(name, found[name]) for name in report.unchanged}, older)
        for name in report.unchanged:  # indexed before identities were recorded: read them (no embedding)
            if "identity" not in manifest.files[name]:
                manifest.files[name]["identity"] = self.identity_of(name, found[name])
        self.record_languages(report.unchanged)
        self.target.write_manifest()
        units = self.pdf_units(plan.todo, options.progress, reading.extract)
        try:
            self.embed(units, len(plan.todo), options)
        finally:
            units.close()

    def write_records(self, records: Iterable[dict], older: int | None, options: SyncOptions) -> None:
        """Make the index hold exactly these dataset documents {doc_id, title, text, metadata}: one source each,
        title as the chunk header."""
        plan = plan_records(self.target.manifest, records, self.report)
        for name in plan.gone:
            self.delete_source(name)
        if older and self.report.unchanged:
            self.upgrade_chunks({name: [] for name in self.report.unchanged}, older)
        self.record_languages(self.report.unchanged)
        self.target.write_manifest()
        self.embed(iter(plan.todo), len(plan.todo), options)

    def record_languages(self, names: Sequence[str]) -> None:
        """Give the files of `names` indexed before their language counts were recorded those counts, guessed from
        their stored texts (read by source, no embedding): the report's language note then reads none."""
        files, collection = self.target.manifest.files, self.target.collection
        missing = [name for name in names if "languages" not in files[name]]
        for start in range(0, len(missing), LANGUAGE_READ_SOURCES):
            batch = missing[start:start + LANGUAGE_READ_SOURCES]
            texts: dict[str, list[str]] = {name: [] for name in batch}
            data = collection.get(where={"source": {"$in": batch}}, include=["documents", "metadatas"])
            for text, meta in zip(data["documents"], data["metadatas"]):
                if meta.get("file_hash") == files[meta["source"]]["sha256"]:
                    texts[meta["source"]].append(text)
            for name in batch:
                files[name]["languages"] = language.language_counts(texts[name])

    def _repair(self, dimension: int, rebuild: bool) -> None:
        """Refuse a store of other vectors, or unlisted chunks beside a manifest localRAG did not write; delete the
        chunks of no indexed file, and the chunks of files that lost some (they are embedded again)."""
        target = self.target
        check = target.check()
        if check.dimension is not None and check.dimension != dimension:
            raise dimension_error(target.place, check.dimension, target.model.display_name, dimension)
        if check.orphan_ids and target.manifest.settings and target.manifest.format is None and not rebuild:
            # Only a manifest localRAG wrote (it always writes "format") may condemn chunks it does not list.
            raise unmarked_manifest_error(target.place, len(check.orphan_ids))
        if check.orphan_ids:
            delete_ids(target.collection, check.orphan_ids)
            self.report.orphans_removed = len(check.orphan_ids)
            log(f"Removed {len(check.orphan_ids)} stored chunks of no indexed file (left by an interrupted run)",
                target.quiet)
        for source, why in sorted(check.repairs.items()):
            self.report.repaired.append((source, why))
            log(f"Repairing {source}: {why}; it is embedded again", target.quiet)
            self.delete_source(source)

    def _embedding_dimension(self, rebuilding: bool = False) -> int:
        """The model's vector size, read from the loaded model (embedding a probe text only as a last resort).

        Without loading it when the manifest records the size and its settings, prefixes and export are the ones
        asked for (not `rebuilding`): the model that made the stored vectors is this one."""
        model, manifest = self.target.model, self.target.manifest
        if not rebuilding and not model.loaded and isinstance(manifest.dimension, int):
            return manifest.dimension
        client = getattr(model.embeddings, "_client", None)
        for method in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
            size = getattr(client, method, lambda: None)()
            if size:
                return int(size)
        return len(model.embeddings.embed_documents(["dimension"])[0])

    def record_reading(self, paths: Sequence[str | Path]) -> None:
        """Record what a PDF sync reads: the followed paths, the page text rules each indexed file was read with
        (before this localRAG's become the index's), and a place for the files that cannot be read."""
        manifest = self.target.manifest
        manifest.docs = self._recorded_paths(paths)
        for entry in manifest.files.values():  # before the index-wide version below changes, which they default to
            entry["text_rules"] = manifest.file_text_rules(entry)
        manifest.text_rules = TEXT_RULES
        if manifest.failed is None:
            manifest.failed = {}

    def _recorded_paths(self, paths: Sequence[str | Path]) -> list[str]:
        """How the manifest records followed paths: relative to a local index folder, so that moving or
        copying the index and its docs folder together keeps them paired; absolute for a server index."""
        resolved = [Path(p).resolve() for p in paths]
        place = self.target.place
        if place.chroma_url:
            return sorted(str(p) for p in resolved)
        return sorted(os.path.relpath(p, place.path.resolve()) for p in resolved)

    def delete_source(self, source: str) -> None:
        """Delete a source's stored chunks and its manifest entries."""
        self.target.collection.delete(where={"source": source})
        self.target.manifest.files.pop(source, None)
        (self.target.manifest.partial or {}).pop(source, None)

    def outline_of(self, source: str, path: Path) -> list[tuple[int, str]]:
        """The outline of an indexed PDF, read as its pages were; [] with a note when the file cannot be read."""
        try:
            return read_outline(path, self.target.settings["pdf_loader"])
        except Exception as exc:  # noqa: BLE001 - the file's text is indexed already; only its sections are lost
            log(f"note: the outline of {source} could not be read ({type(exc).__name__}: {exc}); its chunks name no "
                f"section until the file changes or the index is rebuilt (--rebuild)", self.target.quiet)
            return []

    def identity_of(self, source: str, path: Path) -> str:
        """The identity line of an indexed PDF (localrag/text/identity.py), read as a build reads it (the whole file by
        the page text rules, which spell by the whole document); its name's words alone, with a note, when the
        file cannot be read."""
        pdf = extract_pdf(str(path), self.target.settings["pdf_loader"])
        if pdf.error:  # its chunks are indexed already; only the document prior loses the title and cover
            log(f"note: the title and first page of {source} could not be read ({pdf.error}); the document prior "
                f"knows it by its file name until the file changes", self.target.quiet)
        return document_context(source, pdf.title, front_page(pdf))

    def upgrade_chunks(self, outlines: dict[str, list[tuple[int, str]]], old_format: int) -> None:
        """Give the stored chunks of these sources, written by an older INDEX_FORMAT, this format's metadata in
        place (page_number; section from the given outline): their texts and vectors stay, nothing is embedded."""
        log(f"Upgrading the index from format {old_format} to {INDEX_FORMAT}: adding page numbers and sections to "
            f"the chunks of {len(outlines)} unchanged file{'s' if len(outlines) != 1 else ''} (no embedding)",
            self.target.quiet)
        collection = self.target.collection
        for source, outline in outlines.items():
            found = collection.get(where={"source": source}, include=["metadatas"])
            pages = [int(meta["page"]) for meta in found["metadatas"]]
            sections = sections_by_page(outline, pages)
            metas = [citation_metadata(meta, sections.get(page)) for meta, page in zip(found["metadatas"], pages)]
            for start in range(0, len(metas), STORE_CHANGE_ROWS):
                collection.update(ids=found["ids"][start:start + STORE_CHANGE_ROWS],
                                  metadatas=metas[start:start + STORE_CHANGE_ROWS])

    def pdf_units(self, todo: list[tuple[str, Path, str]], progress: bool,
                  extract: Callable[[Sequence[Path], str], Iterator[ExtractedPdf]]) -> Iterator[SourceUnit]:
        """The PDFs to embed, read by `extract`; a file that fails is recorded as failed and loses its old chunks."""
        target, report = self.target, self.report
        loader = target.settings["pdf_loader"]
        bar = Progress("Reading PDFs", len(todo), "file", show=progress and not target.quiet and bool(todo),
                       leave=True)
        following = [f"reading {name}" for name, _, _ in todo[1:]] + [None]  # the file waited for after each
        bar.set_doing(f"reading {todo[0][0]}" if todo else None)
        bar.announce()
        extracted = extract([path for _, path, _ in todo], loader)
        try:
            for ((name, path, digest), pdf), doing in zip(zip(todo, extracted), following):
                bar.set_doing(doing)
                bar.update(1)
                if pdf.error is None and not any(text.strip() for _, _, text in pdf.pages):
                    pdf.error = "no text layer on any page (scanned? run OCR first)" if pdf.pages else "no pages"
                if pdf.error:
                    # A failed file is reported as failed only; one that turned unreadable loses its old chunks.
                    for bucket in (report.added, report.updated):
                        if name in bucket:
                            bucket.remove(name)
                    if name in target.manifest.files:
                        report.removed.append(name)
                    self.delete_source(name)
                    target.manifest.failed[name] = {"sha256": digest, "reason": pdf.error}
                    target.write_manifest()
                    report.failed.append((name, pdf.error))
                    log(f"skipped {name}: {pdf.error}", target.quiet)
                    continue
                target.manifest.failed.pop(name, None)
                with bar.paused():  # its chunks are embedded meanwhile, with their own progress
                    yield SourceUnit(source=name, file_hash=digest, pages=pdf.pages, extraction_method=loader,
                                     outline=pdf.outline, context=document_context(name, pdf.title, front_page(pdf)))
        finally:
            extracted.close()
            bar.close()

    def embed(self, units: Iterator[SourceUnit], total: int, options: SyncOptions) -> None:
        writer = ChunkWriter(self.target, self.report, group_chunks=options.group_chunks,
                             embed_batch=options.embed_batch)
        writer.run(units, options.progress, total)

    def finish(self) -> None:
        """Count and stamp the manifest, write it, and check the store against it."""
        target, manifest, report = self.target, self.target.manifest, self.report
        if not manifest.partial:
            manifest.partial = None
        manifest.counts = {"files": len(manifest.files), "pages": sum(e["pages"] for e in manifest.files.values()),
                           "chunks": sum(e["chunks"] for e in manifest.files.values())}
        if report.changed or manifest.built_at is None:
            manifest.built_at = time.strftime("%Y-%m-%d %H:%M:%S")
            manifest.build_seconds = round(time.perf_counter() - self.started, 2)
            manifest.versions = package_versions(RECORDED_PACKAGES)
        target.write_manifest()
        stored = target.collection.count()
        if stored != manifest.counts["chunks"]:  # another writer, or a store that dropped writes
            raise RAGError(f"after the sync the index {target.place.location} stores {stored} chunks but its manifest "
                           f"lists {manifest.counts['chunks']}; was it written by another program at the same time? "
                           f"Run add_pdfs.py {target.place.index_flag()} again to repair it",
                           reason="index does not match its manifest")

    def drop_orphan_segments(self) -> None:
        """After a sync that changed a local index: delete the segment folders its database no longer names; said
        only when the sync did not rebuild (a rebuild's emptied database leaves them: the tool's own housekeeping)."""
        place = self.target.place
        if self.report.changed and not place.chroma_url:
            for name in remove_orphan_segments(place.folder):
                if not self.report.rebuilt_because:
                    log(f"note: removed the segment folder {name} of the index {place.path}: its database no "
                        f"longer names it (a deleted chroma.sqlite3 or a dropped collection left it)",
                        self.target.quiet)
