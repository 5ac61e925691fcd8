"""Sync: make an index hold exactly the given PDFs (`sync_pdfs`) or dataset records (`sync_records`).

Under the writer lock a sync first readies the store (`Sync.prepare`: rebuilds when asked or stale, refuses a
foreign or mismatched store, repairs what the store lost), then plans by file hash (localrag/sync_plan.py, which
writes nothing), deletes what is gone, upgrades the stored chunks of unchanged files in place, embeds the rest
(localrag/chunk_writer.py) and finishes the manifest, the IVF and the BM25 arrays. It never re-embeds unchanged
files, and a later sync reuses every stored chunk of an interrupted one.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from localrag.chunk_writer import ChunkWriter, citation_metadata
from localrag.context import document_context
from localrag.errors import RAGError
from localrag.manifest import INDEX_FORMAT, RECORDED_PACKAGES, package_versions
from localrag.notes import log
from localrag.pdf import (TEXT_RULES, ExtractedPdf, discover_pdfs, extract_pdf, front_page, read_outline,
                          sections_by_page)
from localrag.store import STORE_CHANGE_ROWS, delete_ids
from localrag.store_check import (dimension_error, foreign_collection, remove_orphan_segments,
                                  unmarked_manifest_error)
from localrag.sync_plan import (SourceUnit, SyncReport, older_format, plan_pdfs, plan_records, rebuild_reasons,
                                refuse_other_folder)

if TYPE_CHECKING:
    from localrag.index import Index


def sync_pdfs(index: Index, paths: Sequence[str | Path], rebuild: bool, docs_root: str | Path | None,
              progress: bool, *, wait: bool, switch_folder: bool, allow_empty: bool, group_chunks: int,
              embed_batch: int, extract: Callable[[Sequence[Path], str], Iterator[ExtractedPdf]],
              hash_file: Callable[[Path], str]) -> SyncReport:
    """Make the index hold exactly the PDFs under `paths` (Index.sync says how)."""
    discovery = discover_pdfs(paths, docs_root)  # a missing path is refused before the index is touched
    with index.writing(wait), index.place.storage_errors(), index.place.creating_store():
        run = Sync(index)
        older = older_format(index.manifest)
        run.report.skipped = discovery.skipped  # named once, by the caller (add_pdfs.py's output, the report)
        refuse_other_folder(index, paths, discovery.found, switch=switch_folder or rebuild, allow_empty=allow_empty)
        run.prepare(rebuild)
        run.record_reading(paths)
        plan = plan_pdfs(index.manifest, discovery.found, hash_file, run.report)
        for name in plan.gone:
            run.delete_source(name)
            index.manifest.failed.pop(name, None)
        if older and run.report.unchanged:
            run.upgrade_chunks({name: run.outline_of(name, discovery.found[name]) for name in run.report.unchanged},
                               older)
        for name in run.report.unchanged:  # indexed before identities were recorded: read them (no embedding)
            if "identity" not in index.files[name]:
                index.files[name]["identity"] = run.identity_of(name, discovery.found[name])
        index.write_manifest()
        units = run.pdf_units(plan.todo, progress, extract)
        try:
            run.embed(units, progress, len(plan.todo), group_chunks, embed_batch)
        finally:
            units.close()
        run.finish()
    return run.report


def sync_records(index: Index, records: Iterable[dict], rebuild: bool, progress: bool, *, wait: bool,
                 group_chunks: int, embed_batch: int) -> SyncReport:
    """Index dataset documents {doc_id, title, text, metadata}: one source each, title as the chunk header.

    Embedded and committed as `sync_pdfs` does."""
    with index.writing(wait), index.place.storage_errors():
        run = Sync(index)
        older = older_format(index.manifest)
        run.prepare(rebuild)
        plan = plan_records(index.manifest, records, run.report)
        for name in plan.gone:
            run.delete_source(name)
        if older and run.report.unchanged:
            run.upgrade_chunks({name: [] for name in run.report.unchanged}, older)
        index.write_manifest()
        run.embed(iter(plan.todo), progress, len(plan.todo), group_chunks, embed_batch)
        run.finish()
    return run.report


class Sync:
    """One sync of `index`, under its writer lock: the steps that change the store and the manifest, and the
    report of what they did."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self.report = SyncReport()
        self.started = time.perf_counter()

    def prepare(self, rebuild: bool) -> None:
        """Rebuild when asked or stale; refuse foreign or mismatched stores; repair what the store lost."""
        index = self.index
        if index.info_problem:
            if not rebuild:
                raise index.manifest_error()
            index.move_manifest_aside()
        # A manifest (even a damaged one) says localRAG built this index.
        if not (index.manifest.settings or index.info_problem or index.manifest_moved):
            foreign = foreign_collection(index.place)
            if foreign:
                raise RAGError(foreign, reason="foreign Chroma collection")
        report = self.report
        reasons = rebuild_reasons(index) if index.manifest.settings else []
        if rebuild or reasons:
            report.rebuilt_because = "--rebuild was given" if rebuild else "settings changed: " + "; ".join(reasons)
            log(f"Rebuilding the whole index ({report.rebuilt_because})", index.quiet)
            index.drop_everything()
        if index.collection is None:
            index.open_store()
        dimension = self._embedding_dimension(rebuilding=bool(rebuild or reasons))
        self._repair(dimension, rebuild)
        index.manifest.record_build(index.settings, index.embedding_export, index.embedding_prefixes, dimension)

    def _repair(self, dimension: int, rebuild: bool) -> None:
        """Refuse a store of other vectors, or unlisted chunks beside a manifest localRAG did not write; delete the
        chunks of no indexed file, and the chunks of files that lost some (they are embedded again)."""
        index = self.index
        check = index.check_index()
        if check.dimension is not None and check.dimension != dimension:
            raise dimension_error(index.place, check.dimension, index.embedding_model_name, dimension)
        if check.orphan_ids and index.manifest.settings and index.manifest.format is None and not rebuild:
            # Only a manifest localRAG wrote (it always writes "format") may condemn chunks it does not list.
            raise unmarked_manifest_error(index.place, len(check.orphan_ids))
        if check.orphan_ids:
            delete_ids(index.collection, check.orphan_ids)
            self.report.orphans_removed = len(check.orphan_ids)
            log(f"Removed {len(check.orphan_ids)} stored chunks of no indexed file (left by an interrupted run)",
                index.quiet)
        for source, why in sorted(check.repairs.items()):
            self.report.repaired.append((source, why))
            log(f"Repairing {source}: {why}; it is embedded again", index.quiet)
            self.delete_source(source)

    def _embedding_dimension(self, rebuilding: bool = False) -> int:
        """The model's vector size, read from the loaded model (embedding a probe text only as a last resort).

        Without loading it when the manifest records the size and its settings, prefixes and export are the ones
        asked for (not `rebuilding`): the model that made the stored vectors is this one."""
        index = self.index
        if not rebuilding and not index.embeddings_loaded and isinstance(index.manifest.dimension, int):
            return index.manifest.dimension
        model = getattr(index.embeddings, "_client", None)
        for method in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
            size = getattr(model, method, lambda: None)()
            if size:
                return int(size)
        return len(index.embeddings.embed_documents(["dimension"])[0])

    def record_reading(self, paths: Sequence[str | Path]) -> None:
        """Record what a PDF sync reads: the followed paths, the page text rules each indexed file was read with
        (before this localRAG's become the index's), and a place for the files that cannot be read."""
        manifest = self.index.manifest
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
        if self.index.chroma_url:
            return sorted(str(p) for p in resolved)
        return sorted(os.path.relpath(p, self.index.path.resolve()) for p in resolved)

    def delete_source(self, source: str) -> None:
        """Delete a source's stored chunks and its manifest entries."""
        if self.index.collection is not None:
            self.index.collection.delete(where={"source": source})
        self.index.manifest.files.pop(source, None)
        (self.index.manifest.partial or {}).pop(source, None)

    def outline_of(self, source: str, path: Path) -> list[tuple[int, str]]:
        """The outline of an indexed PDF, read as its pages were; [] with a note when the file cannot be read."""
        try:
            return read_outline(path, self.index.settings["pdf_loader"])
        except Exception as exc:  # noqa: BLE001 - the file's text is indexed already; only its sections are lost
            log(f"note: the outline of {source} could not be read ({type(exc).__name__}: {exc}); its chunks name no "
                f"section until the file changes or the index is rebuilt (--rebuild)", self.index.quiet)
            return []

    def identity_of(self, source: str, path: Path) -> str:
        """The identity line of an indexed PDF (localrag/context.py), read as a build reads it (the whole file by
        the page text rules, which spell by the whole document); its name's words alone, with a note, when the
        file cannot be read."""
        pdf = extract_pdf(str(path), self.index.settings["pdf_loader"])
        if pdf.error:  # its chunks are indexed already; only the document prior loses the title and cover
            log(f"note: the title and first page of {source} could not be read ({pdf.error}); the document prior "
                f"knows it by its file name until the file changes", self.index.quiet)
        return document_context(source, pdf.title, front_page(pdf))

    def upgrade_chunks(self, outlines: dict[str, list[tuple[int, str]]], old_format: int) -> None:
        """Give the stored chunks of these sources, written by an older INDEX_FORMAT, this format's metadata in
        place (page_number; section from the given outline): their texts and vectors stay, nothing is embedded."""
        log(f"Upgrading the index from format {old_format} to {INDEX_FORMAT}: adding page numbers and sections to "
            f"the chunks of {len(outlines)} unchanged file{'s' if len(outlines) != 1 else ''} (no embedding)",
            self.index.quiet)
        collection = self.index.collection
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
        from tqdm import tqdm

        index, report = self.index, self.report
        loader = index.settings["pdf_loader"]
        # No bar on a non-terminal stderr (CI logs, files): tqdm's \r redraws only garble them.
        bar = tqdm(total=len(todo), desc="Reading PDFs", unit="file", file=sys.stderr,
                   disable=not progress or index.quiet or not todo or not sys.stderr.isatty())
        extracted = extract([path for _, path, _ in todo], loader)
        try:
            for (name, path, digest), pdf in zip(todo, extracted):
                bar.update(1)
                if pdf.error is None and not any(text.strip() for _, _, text in pdf.pages):
                    pdf.error = "no text layer on any page (scanned? run OCR first)" if pdf.pages else "no pages"
                if pdf.error:
                    # A failed file is reported as failed only; one that turned unreadable loses its old chunks.
                    for bucket in (report.added, report.updated):
                        if name in bucket:
                            bucket.remove(name)
                    if name in index.files:
                        report.removed.append(name)
                    self.delete_source(name)
                    index.manifest.failed[name] = {"sha256": digest, "reason": pdf.error}
                    index.write_manifest()
                    report.failed.append((name, pdf.error))
                    log(f"skipped {name}: {pdf.error}", index.quiet)
                    continue
                index.manifest.failed.pop(name, None)
                yield SourceUnit(source=name, file_hash=digest, pages=pdf.pages, extraction_method=loader,
                                 outline=pdf.outline, context=document_context(name, pdf.title, front_page(pdf)))
        finally:
            extracted.close()
            bar.close()

    def embed(self, units: Iterator[SourceUnit], progress: bool, total: int, group_chunks: int,
              embed_batch: int) -> None:
        writer = ChunkWriter(self.index, self.report, group_chunks=group_chunks, embed_batch=embed_batch)
        writer.run(units, progress, total)

    def finish(self) -> None:
        """Count and stamp the manifest, check the store against it, bring the IVF and BM25 arrays up to date."""
        index, manifest, report = self.index, self.index.manifest, self.report
        if not manifest.partial:
            manifest.partial = None
        manifest.counts = {"files": len(manifest.files), "pages": sum(e["pages"] for e in manifest.files.values()),
                           "chunks": sum(e["chunks"] for e in manifest.files.values())}
        if report.changed or manifest.built_at is None:
            manifest.built_at = time.strftime("%Y-%m-%d %H:%M:%S")
            manifest.build_seconds = round(time.perf_counter() - self.started, 2)
            manifest.versions = package_versions(RECORDED_PACKAGES)
        index.write_manifest()
        stored = index.collection.count()
        if stored != manifest.counts["chunks"]:  # another writer, or a store that dropped writes
            raise RAGError(f"after the sync the index {index.location} stores {stored} chunks but its manifest lists "
                           f"{manifest.counts['chunks']}; was it written by another program at the same time? "
                           f"Run add_pdfs.py {index.place.index_flag()} again to repair it",
                           reason="index does not match its manifest")
        if index.dense.update(index._dense_source()):
            index.write_manifest()
        if report.changed and not index.chroma_url:
            for name in remove_orphan_segments(index.place.folder):
                log(f"note: removed the segment folder {name} of the index {index.path}: its database no longer "
                    f"names it (a deleted chroma.sqlite3 or a dropped collection left it)", index.quiet)
        index.renew_bm25()
        report.seconds = time.perf_counter() - self.started
