"""What a sync is given, one source at a time (`SourceUnit`), what it did (`SyncReport`), and what it uses of the
index's embedding model (`EmbeddingModel`): plain records that the sync's plan, its writer and the command lines
share."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class SyncReport:
    """What one sync did; printed by add_pdfs.py and the evaluation."""
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    reread: list[str] = field(default_factory=list)  # unchanged files read again under newer page text rules
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # folder entries not read (links), with why
    repaired: list[tuple[str, str]] = field(default_factory=list)  # sources re-embedded because the store lost chunks
    orphans_removed: int = 0  # stored chunks of no indexed file (left by an interrupted or concurrent run)
    empty_pages: list[tuple[str, int]] = field(default_factory=list)  # (source, 0-based page) without text
    pages: int = 0  # pages of the files this sync completed
    chunks: int = 0  # chunks embedded and stored by this sync (not those of an interrupted run it reused)
    kept: int = 0  # stored chunks of re-read or resumed files whose text and metadata were unchanged (not embedded)
    seconds: float = 0.0
    rebuilt_because: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.reread or self.rebuilt_because
                    or self.repaired or self.orphans_removed)

    def file_lines(self) -> list[tuple[str, str]]:
        """(what happened, file) for each file added, updated, removed or re-read, as the CLIs print them."""
        return [(label, name) for label, names in (("added", self.added), ("updated", self.updated),
                                                    ("removed", self.removed), ("re-read", self.reread))
                for name in names]

    def summary(self) -> str:
        repaired = f" / repaired {len(self.repaired)}" if self.repaired else ""
        reread = f" / re-read {len(self.reread)}" if self.reread else ""
        kept = f" ({self.kept} stored chunks kept as they were)" if self.kept else ""
        skipped = f" / skipped {len(self.skipped)}" if self.skipped else ""
        return (f"files added {len(self.added)} / updated {len(self.updated)} / removed {len(self.removed)} / "
                f"unchanged {len(self.unchanged)} / failed {len(self.failed)}{skipped}{repaired}{reread}; "
                f"{self.pages} pages and {self.chunks} chunks embedded{kept}; {self.seconds:.1f} s")


@dataclass
class SourceUnit:
    """One indexable source: a PDF file or a dataset document, with its pages' texts."""
    source: str
    file_hash: str
    pages: list[tuple[int, str, str]]  # (0-based page, label, text)
    header: str | None = None  # chunk header; None means chunk_header(source, page, context line)
    context: str = ""  # the document's identity (localrag/text/identity.py), for the context lines of its chunks
    extra_metadata: dict = field(default_factory=dict)
    extraction_method: str = ""
    outline: list[tuple[int, str]] = field(default_factory=list)  # (0-based start page, title) of the PDF's outline


class EmbeddingModel(Protocol):
    """What a sync uses of the index's embedding model (index_model.IndexModel): the model, loaded at the first
    access, and its description without loading it."""

    embeddings: Any
    loaded: bool
    export: str | None
    prefixes: dict[str, str]
    display_name: str
