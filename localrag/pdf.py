"""PDF files: finding them below the given folders (links checked), hashing them, and extracting each page's text.

Extraction runs in worker processes (`iter_extracted`), so this module loads no model and imports no
retriever code.
"""
from __future__ import annotations

import errno
import hashlib
import os
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from localrag.errors import RAGError
from localrag.pages import shown_page

PDF_LOADERS = ("pypdf", "pypdfium2")  # the text extractors `extract_pdf` knows
OUTLINE_MAX_DEPTH = 15  # outline (bookmark) levels read; pdfium's own default, deeper than any real document


@dataclass
class ExtractedPdf:
    """Text of each page of one PDF, or why it could not be read, and its outline (bookmarks)."""
    pages: list[tuple[int, str, str]] = field(default_factory=list)  # (0-based page, page label, text)
    error: str | None = None
    outline: list[tuple[int, str]] = field(default_factory=list)  # (0-based start page, title), document order


def extract_pdf(path: str, loader: str) -> ExtractedPdf:
    """Extract every page's text with the chosen library; errors become a reason, never an exception.

    Runs in worker processes, so it must stay importable without loading any model.
    """
    try:
        if loader == "pypdf":
            return _extract_pypdf(path)
        if loader == "pypdfium2":
            return _extract_pypdfium2(path)
        return ExtractedPdf(error=f"unknown loader {loader!r}; use one of {', '.join(PDF_LOADERS)}")
    except Exception as exc:  # noqa: BLE001 - any library error means "this file is unreadable", reported by name
        return ExtractedPdf(error=_describe_pdf_error(exc))


def _describe_pdf_error(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    if "password" in text.lower() or "decrypt" in text.lower() or "encrypt" in text.lower():
        return f"needs a password ({text})"
    return f"not a readable PDF ({text})"


def _extract_pypdf(path: str) -> ExtractedPdf:
    import logging
    import warnings

    from langchain_community.document_loaders import PyPDFLoader
    from pypdf import PdfReader

    # pypdf logs repair notes ("EOF marker not found") straight to stderr; the reason is reported by file name.
    pypdf_logger = logging.getLogger("pypdf")
    level = pypdf_logger.level
    pypdf_logger.setLevel(logging.ERROR)
    try:
        reader = PdfReader(path)  # opens files encrypted with an empty user password by itself (needs cryptography)
        if reader.is_encrypted and not reader.decrypt(""):
            return ExtractedPdf(error="needs a password (encrypted with a non-empty user password)")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            docs = PyPDFLoader(path, mode="page").load()
    finally:
        pypdf_logger.setLevel(level)
    return ExtractedPdf(pages=[(int(d.metadata["page"]), str(d.metadata.get("page_label", shown_page(int(d.metadata["page"])))),
                                d.page_content) for d in docs], outline=_outline_pypdf(reader))


def _extract_pypdfium2(path: str) -> ExtractedPdf:
    import warnings

    import pypdfium2
    from langchain_community.document_loaders import PyPDFium2Loader

    pdf = pypdfium2.PdfDocument(path)  # raises PdfiumError for corrupt or password-protected files
    try:
        labels = [pdf.get_page_label(i) or str(shown_page(i)) for i in range(len(pdf))]
        outline = _outline_pypdfium2(pdf)
    finally:
        pdf.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        docs = PyPDFium2Loader(path, mode="page").load()
    return ExtractedPdf(pages=[(int(d.metadata["page"]), labels[int(d.metadata["page"])], d.page_content)
                               for d in docs], outline=outline)


def read_outline(path: str | Path, loader: str) -> list[tuple[int, str]]:
    """The outline of one PDF as `extract_pdf` reads it with `loader`, without reading any page text."""
    if loader == "pypdf":
        from pypdf import PdfReader

        reader = PdfReader(str(path))
        if reader.is_encrypted:
            reader.decrypt("")
        return _outline_pypdf(reader)
    import pypdfium2

    pdf = pypdfium2.PdfDocument(str(path))
    try:
        return _outline_pypdfium2(pdf)
    finally:
        pdf.close()


def _title(raw: Any) -> str:
    return " ".join(str(raw or "").split())


# An outline only names sections for citations; the indexed text does not depend on it. So a damaged outline
# (or one entry of it) names no section instead of making the whole file unreadable.

def _outline_pypdfium2(pdf) -> list[tuple[int, str]]:
    """(0-based start page, title) of each outline entry in document order; entries without a page are left out."""
    entries = []
    try:
        for item in pdf.get_toc(max_depth=OUTLINE_MAX_DEPTH):
            dest = item.get_dest()
            index = dest.get_index() if dest is not None else None
            title = _title(item.get_title())
            if index is not None and 0 <= index < len(pdf) and title:
                entries.append((int(index), title))
    except Exception:  # noqa: BLE001 - see above: a damaged outline names no section
        return entries
    return entries


def _outline_pypdf(reader) -> list[tuple[int, str]]:
    """Like `_outline_pypdfium2`, read with pypdf (nested lists hold an entry's children)."""
    entries: list[tuple[int, str]] = []
    pages = len(reader.pages)

    def walk(items, depth: int) -> None:
        for item in items:
            if isinstance(item, list):
                if depth + 1 < OUTLINE_MAX_DEPTH:
                    walk(item, depth + 1)
                continue
            try:
                index = reader.get_destination_page_number(item)
            except Exception:  # noqa: BLE001 - see above: a broken entry names no section
                index = None
            title = _title(getattr(item, "title", None))
            if index is not None and 0 <= index < pages and title:
                entries.append((int(index), title))

    try:
        walk(reader.outline, 0)
    except Exception:  # noqa: BLE001 - see above: a damaged outline names no section
        pass
    return entries


def sections_by_page(outline: Sequence[tuple[int, str]], pages: Iterable[int]) -> dict[int, str]:
    """For each 0-based page, the title of the deepest outline entry that starts on or before it.

    Outline entries come in document order, a parent before its children, so among the entries with the latest
    start page not after a page, the last one in that order is the deepest. Pages before the first entry are
    left out (they have no section).
    """
    starts = sorted((start, order, title) for order, (start, title) in enumerate(outline))
    out: dict[int, str] = {}
    position, current = 0, None
    for page in sorted(set(pages)):
        while position < len(starts) and starts[position][0] <= page:
            current = starts[position][2]
            position += 1
        if current is not None:
            out[page] = current
    return out


def iter_extracted(paths: Sequence[Path], loader: str, workers: int) -> Iterator[ExtractedPdf]:
    """Extract files in order, in `workers` processes when that pays off.

    The workers ignore Ctrl-C (the parent reports it, once) and die with the parent, also after kill -9; closing
    the iterator early ends them at once.
    """
    if workers <= 1 or len(paths) < 2:
        for path in paths:
            yield extract_pdf(str(path), loader)
        return
    import multiprocessing

    # spawn, not fork: a child forked while another thread of this process held a lock (an allocator's inside
    # pdfium, seen twice under pytest) hangs for ever. Spawned workers start clean; like any spawned process
    # they import the caller's main script, so a script that syncs must keep its work under a __main__ guard.
    pool = multiprocessing.get_context("spawn").Pool(workers, initializer=_extraction_worker_init,
                                                     initargs=(os.getpid(),))
    try:
        yield from pool.imap(_extract_job, [(str(p), loader) for p in paths])
    finally:
        pool.terminate()  # at the end, on Ctrl-C or any error: no worker outlives the sync
        pool.join()


def _extract_job(job: tuple[str, str]) -> ExtractedPdf:
    return extract_pdf(*job)


def _extraction_worker_init(parent_pid: int) -> None:
    """Ignore Ctrl-C (the parent handles it) and ask the kernel to kill this worker when the parent dies."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1  # prctl(2)
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before the line above took effect
        os._exit(1)


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, in hex: what tells a changed PDF from an unchanged one."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_name(path: Path, docs_root: Path | None) -> str:
    """File name relative to the docs folder (NFC, forward slashes), or the bare name outside it.

    The path is taken as found, never resolved: a link keeps its own name instead of its target's.
    """
    try:
        rel = Path(os.path.relpath(path, docs_root)) if docs_root else Path(path.name)
    except ValueError:
        rel = Path(path.name)
    if rel.parts and rel.parts[0] == "..":
        rel = Path(path.name)
    return unicodedata.normalize("NFC", rel.as_posix())


@dataclass
class Discovery:
    """The PDFs found under the given paths, by source name, and the entries skipped, each with its reason."""
    found: dict[str, Path] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def discover_pdfs(paths: Iterable[str | Path], docs_root: str | Path | None = None) -> Discovery:
    """Every PDF named or found below the given folders, by source name (see `source_name`).

    Links are followed only when their target lies inside the folder being walked; links leading outside it,
    dangling links, link loops and links to folders are skipped and named. Two different files whose names are
    equal after Unicode normalisation are an error naming both. A missing path is an error.
    """
    paths = [Path(p) for p in paths]
    if docs_root is None and len(paths) == 1 and paths[0].is_dir():
        docs_root = paths[0]  # names relative to the one folder; several paths give bare names
    root = Path(docs_root) if docs_root else None
    out = Discovery()
    real_of: dict[str, tuple[Path, Path]] = {}  # source -> (path as found, real path)

    def add(path: Path) -> None:
        name = source_name(path, root)
        real = path.resolve()
        if name in real_of:
            first, first_real = real_of[name]
            if first_real == real:
                return  # the same file named twice (a folder and a file in it)
            raise RAGError(f"two files have the same name {name!r} after Unicode normalisation: {str(first)!r} and "
                           f"{str(path)!r}; rename one of them")
        real_of[name] = (path, real)
        out.found[name] = path

    for path in paths:
        if path.is_dir():
            _walk_pdfs(path, path.resolve(), root, add, out.skipped)
        elif path.is_file():
            add(path)
        else:
            raise RAGError(f"{path} does not exist; give a PDF file or a folder of PDFs")
    out.found = dict(sorted(out.found.items()))
    return out


def _walk_pdfs(top: Path, real_top: Path, root: Path | None, add: Callable[[Path], None],
               skipped: list[tuple[str, str]]) -> None:
    """Walk `top` without following folder links; call `add` for each PDF; name every link it skips."""
    for folder, dirs, files in os.walk(top, followlinks=False):
        for name in sorted(dirs):
            entry = Path(folder) / name
            if entry.is_symlink():
                skipped.append((source_name(entry, root), "a link to a folder: links to folders are not followed "
                                                          "(put the files into the docs folder)"))
        dirs.sort()
        for name in sorted(files):
            entry = Path(folder) / name
            if not name.lower().endswith(".pdf"):
                continue
            if entry.is_symlink():
                reason = _link_problem(entry, real_top)
                if reason:
                    skipped.append((source_name(entry, root), reason))
                    continue
            elif not entry.is_file():
                continue
            add(entry)


def _link_problem(link: Path, real_top: Path) -> str | None:
    """Why a link to a PDF is not followed, or None when its target is a file inside the docs folder."""
    try:
        target = link.resolve(strict=True)
    except RuntimeError:
        return "a link loop"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a link loop"
        return f"a dangling link (its target {os.readlink(link)!r} does not exist)"
    if not target.is_file():
        return "a link to something that is not a file"
    if not target.is_relative_to(real_top):
        return "a link to a file outside the docs folder (not read)"
    return None


def find_pdfs(paths: Iterable[str | Path]) -> list[Path]:
    """Every PDF named or found below the given folders, sorted by source name; a missing path is an error."""
    return list(discover_pdfs(paths).found.values())
