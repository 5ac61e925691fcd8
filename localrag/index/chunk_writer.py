"""A sync's sources cut into chunks, embedded and stored in groups (`ChunkWriter`): chunk ids and citation
metadata, the stored chunks an interrupted sync left reused, each group embedded longest text first and written
while the next one is embedded (`GroupWriter`). The manifest lists a source once all its chunks are stored."""
from __future__ import annotations

import collections
import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from localrag.models import backends as embedding_backends
from localrag.text import language
from localrag.text.identity import chunk_context
from localrag.files import log
from localrag.progress import Progress
from localrag.index.manifest import Manifest
from localrag.settings import text_splitter
from localrag.text.pages import chunk_header, shown_page
from localrag.text.pdf import TEXT_RULES, sections_by_page
from localrag.index.store import IndexPlace, delete_ids
from localrag.index.sync_report import EmbeddingModel, SourceUnit, SyncReport

# Chunks per Chroma write done in OpenVINO's wait (GroupWriter): a call costs ~36 ms besides ~1.2 ms a chunk, so
# one write per group of 256 (~0.35 s, two batches of 16) costs the least CPU; 32 a call took 1.7x as long.
STORE_WRITE_ROWS = 256


@dataclass(frozen=True)
class SyncTarget:
    """The index a sync writes, its store made ready: where it lives (`place`), its manifest and Chroma collection,
    its settings and embedding model (loaded at the first text to embed). `write_manifest()` writes the manifest
    (what was derived from the old one is stale); `heartbeat()` refreshes a server index's lock record; `check()`
    compares the store with the manifest (Index.check_index); `quiet` silences the notes."""
    place: IndexPlace
    manifest: Manifest
    collection: Any
    settings: dict
    model: EmbeddingModel
    write_manifest: Callable[[], None]
    heartbeat: Callable[[], None]
    check: Callable[[], Any]
    quiet: bool


def citation_metadata(meta: dict, section: str | None) -> dict:
    """`meta` with what a citation needs: `page_number` (1-based, as a PDF viewer shows it; `page` stays the
    loaders' 0-based number) and, when known, `section` (Chroma metadata cannot hold None, so no key at all)."""
    out = dict(meta, page_number=shown_page(int(meta["page"])))
    out.pop("section", None)
    if section:
        out["section"] = section
    return out


def chunk_id(source: str, file_hash: str, page: int, chunk: int) -> str:
    """Stable id of a chunk: the same file name, content and settings always give the same ids.

    The name is part of it because two copies of one PDF (same hash) are two sources, each with its own chunks.
    """
    name = hashlib.sha256(source.encode("utf-8")).hexdigest()[:8]
    return f"{file_hash[:16]}-{name}:{page}:{chunk}"


class GroupWriter:
    """The store writes of a sync, done while the embedding model computes the next group.

    Chroma's write holds the GIL for its whole call (~1.2 ms a 2,000-character chunk): in a thread of its own it
    stalled the embedding's Python steps, done after each group it left the cores to one thread. Here a group's
    write is cut into pieces that OpenVINO runs in its wait, one per batch (`embeddings.wait_work`); backends
    without that wait run them at `wait`. Everything runs in the caller's thread, in order.

    `submit(pieces, done)` first finishes the previous group: runs its pieces still queued, raises its error, or
    runs its `done` (the manifest update), which thus only ever follows its own complete write.
    """

    def __init__(self, queue: Any = None) -> None:
        self._queue = queue if queue is not None else collections.deque()
        self._done: Callable[[], None] | None = None
        self._error: BaseException | None = None

    def submit(self, pieces: Sequence[Callable[[], None]], done: Callable[[], None]) -> None:
        self.wait()
        self._done, self._error = done, None
        self._queue.extend(self._guarded(piece) for piece in pieces)

    def _guarded(self, piece: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            if self._error is None:  # after a failed piece the rest of its group is skipped
                try:
                    piece()
                except Exception as exc:  # noqa: BLE001 - raised by `wait` in the sync's own flow, not in the model's
                    self._error = exc
                except BaseException as exc:  # Ctrl-C inside a write: the group is never reported done
                    self._error = exc
                    raise
        return run

    def wait(self) -> None:
        """Finish the group in flight, if any: run its queued pieces, raise its error, else run its `done`."""
        while self._queue:
            self._queue.popleft()()
        done, error, self._done, self._error = self._done, self._error, None, None
        if error is not None:
            raise error
        if done is not None:
            done()

    def close(self, failing: bool) -> None:
        """Finish the group in flight. While the caller is failing already (Ctrl-C during embedding), its write is
        still completed and recorded unless a piece failed or was interrupted; that error, or one of recording it,
        is dropped for the caller's."""
        if not failing:
            self.wait()
            return
        try:
            while self._queue:
                self._queue.popleft()()
        finally:
            self._queue.clear()
        done, error, self._done, self._error = self._done, self._error, None, None
        if error is None and done is not None:
            try:
                done()
            except Exception:  # noqa: BLE001 - the caller's exception is the one to report
                pass


class ChunkWriter:
    """Embeds the chunks of a sync's sources into `target` and stores them, `group_chunks` at a time, embedding
    `embed_batch` texts per model call; what it did goes into `report`."""

    def __init__(self, target: SyncTarget, report: SyncReport, *, group_chunks: int, embed_batch: int) -> None:
        self.target = target
        self.report = report
        self.group_chunks = group_chunks
        self.embed_batch = embed_batch
        self.pending: dict[str, tuple] = {}  # source -> (unit, chunks still to store, empty pages, chunks in all)
        self.languages: dict[str, dict[str, int]] = {}  # source -> its chunks' language guesses (language_counts)

    def run(self, units: Iterator[SourceUnit], progress: bool, total: int) -> None:
        """Embed and store chunks in groups of `group_chunks`, however the files divide.

        A file whose chunks span several groups is recorded as partial after each group; its stored chunks are
        reused by the next sync (chunk ids depend on file hash and settings only), as are those of a file read
        again under newer page text rules: a stored chunk is kept when its text and metadata equal the new ones.
        A group is written to the store while the next one is embedded (`GroupWriter`), so an interrupt loses the
        embedding of the group in hand and, of the group being written beside it, the chunks not yet stored: with
        Ctrl-C between two writes the write in flight is finished first (less than one group is lost); with Ctrl-C
        inside a write, or a killed process, up to two groups. The manifest lists a file only once all its chunks
        are stored.
        """
        bar = Progress("Embedding chunks", None, "chunk", show=progress and not self.target.quiet and total > 0,
                       leave=True)
        group: list[tuple[str, str, str, dict]] = []  # (source, id, text, metadata)
        writer = GroupWriter(embedding_backends.wait_work(self.target.model.embeddings) if total else None)
        failed = True
        try:
            for unit in bar.paused_while_fetched(units):  # a PDF read meanwhile says so in its own progress
                ids, texts, metas, empty = self.chunks_of(unit)
                stored = self._kept_ids(unit, ids, texts, metas)
                self.report.kept += len(stored)
                todo = [(unit.source, i, t, m) for i, t, m in zip(ids, texts, metas) if i not in stored]
                self.pending[unit.source] = (unit, len(todo), empty, len(ids))
                self.languages[unit.source] = language.language_counts(texts)
                if not todo:  # only files whose stored writes were reported done count as complete
                    self._complete_sources()
                for item in todo:
                    group.append(item)
                    if len(group) >= self.group_chunks:
                        self._commit_group(group, bar, writer)
                        group = []
            if group:
                self._commit_group(group, bar, writer)
            writer.wait()
            failed = False
        finally:
            writer.close(failed)
            bar.close()

    def chunks_of(self, unit: SourceUnit) -> tuple[list[str], list[str], list[dict], list[int]]:
        """(ids, texts, metadata) of a unit's chunks, and its pages without text."""
        settings = self.target.settings
        splitter = text_splitter(settings)
        ids, texts, metas, empty = [], [], [], []
        sections = sections_by_page(unit.outline, [page for page, _, _ in unit.pages])
        for page, label, text in unit.pages:
            pieces = splitter.split_text(text) if text.strip() else []
            if not pieces:
                empty.append(page)
            for index, piece in enumerate(pieces):
                if unit.header is not None:
                    header = unit.header
                elif settings["chunk_context"]:
                    header = chunk_header(unit.source, page, chunk_context(unit.context, sections.get(page)))
                else:
                    header = chunk_header(unit.source, page)
                ids.append(chunk_id(unit.source, unit.file_hash, page, index))
                texts.append((header if settings["chunk_headers"] else "") + piece)
                metas.append(citation_metadata({
                    "source": unit.source, "page": page, "page_label": label, "file_hash": unit.file_hash,
                    "chunk": index, "chunk_id": ids[-1], "embedding_model": self.target.model.embeddings.model_name,
                    "extraction_method": unit.extraction_method, **unit.extra_metadata}, sections.get(page)))
        return ids, texts, metas, empty

    def _kept_ids(self, unit: SourceUnit, ids: list[str], texts: list[str], metas: list[dict]) -> set[str]:
        """Ids of this unit's stored chunks that stay as they are: same id, text and metadata as the new chunk
        (left by an interrupted sync of the same content, or a file read again under newer text rules); every
        other stored chunk of the source is deleted. A chunk an older format stored (no page_number) differs in
        its metadata, so the file ends up in one format; another file version has other ids.

        From here the source is partial: the manifest lists it again once all its chunks are stored. It is
        written before a listed file loses chunks, so an interrupt leaves no listed file incomplete."""
        manifest, collection = self.target.manifest, self.target.collection
        found = collection.get(where={"source": unit.source}, include=["documents", "metadatas"])
        wanted = {i: (t, m) for i, t, m in zip(ids, texts, metas)}
        kept = {i for i, text, meta in zip(found["ids"], found["documents"], found["metadatas"])
                if wanted.get(i) == (text, meta)}
        drop = [i for i in found["ids"] if i not in kept]
        listed = manifest.files.pop(unit.source, None) is not None
        if manifest.partial is None:
            manifest.partial = {}
        manifest.partial[unit.source] = {"sha256": unit.file_hash}
        if listed and drop:
            self.target.write_manifest()
        delete_ids(collection, drop)
        return kept

    def _commit_group(self, group: list[tuple[str, str, str, dict]], bar, writer: GroupWriter) -> None:
        """Embed a group, then hand its store write to `writer`, which does it while the next group is embedded;
        once it is stored, the manifest records which files are complete."""
        vectors = self._embed_longest_first([text for _, _, text, _ in group], bar)

        def piece(rows: slice) -> Callable[[], None]:
            # No clean-up if a write fails: whatever part of the group was stored are valid chunks of a partial
            # file, which the next sync reuses or, for a file the manifest does not name, deletes as orphans. (A
            # clean-up delete on a full disk hangs inside Chroma.)
            return lambda: self.target.collection.upsert(
                ids=[chunk for _, chunk, _, _ in group[rows]], embeddings=vectors[rows],
                documents=[text for _, _, text, _ in group[rows]], metadatas=[meta for _, _, _, meta in group[rows]])

        def stored() -> None:
            self.report.chunks += len(group)
            for source, *_ in group:
                unit, left, empty, total = self.pending[source]
                self.pending[source] = (unit, left - 1, empty, total)
            self._complete_sources()

        rows = STORE_WRITE_ROWS
        writer.submit([piece(slice(start, start + rows)) for start in range(0, len(group), rows)], stored)

    def _embed_longest_first(self, texts: list[str], bar) -> list[list[float]]:
        """Vectors of `texts` in their order, embedded `embed_batch` at a time from the longest text down.

        The model pads every batch to its longest text; sorting the whole group (sentence-transformers sorts
        only within one call) puts texts of like length together: 5-7% more FinanceBench chunks/s with
        openvino-int8 (bench/README.md). A text's vector may move in the last digits with its batch's padded
        length, as it does with any batching.
        """
        embeddings = self.target.model.embeddings
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # stable: ties keep the group's order
        vectors: list[list[float]] = [[] for _ in texts]
        with embedding_backends.runtime_pooling_threads(embeddings):
            for start in range(0, len(order), self.embed_batch):
                part = order[start:start + self.embed_batch]
                for i, vector in zip(part, embeddings.embed_documents([texts[i] for i in part])):
                    vectors[i] = vector
                bar.update(len(part))
        return vectors

    def _complete_sources(self) -> None:
        """Move every source whose chunks are all stored from partial into the manifest's files; write it."""
        manifest = self.target.manifest
        for source in [s for s, (_, left, _, _) in self.pending.items() if left == 0]:
            unit, _, empty, total = self.pending.pop(source)
            manifest.partial.pop(source, None)
            entry = manifest.files[source] = {"sha256": unit.file_hash, "pages": len(unit.pages), "chunks": total,
                                              "empty_pages": empty}
            entry["languages"] = self.languages.pop(source)  # the report's language note reads these
            if unit.context:  # the document's identity line: the document prior (localrag/retrieval/retriever.py) reads it
                entry["identity"] = unit.context
            if unit.extraction_method != "text":  # dataset records are indexed as given, by no page text rules
                entry["text_rules"] = TEXT_RULES
            self.report.pages += len(unit.pages)
            self.report.empty_pages.extend((unit.source, page) for page in empty)
            if unit.extraction_method != "text":
                for page in empty:
                    log(f"note: {unit.source} page {shown_page(page)} has no text layer (image only?); it cannot be "
                        f"retrieved", self.target.quiet)
        self.target.write_manifest()
        self.target.heartbeat()
