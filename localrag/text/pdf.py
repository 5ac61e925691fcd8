"""PDF files: finding them below the given folders (links checked), hashing them, and extracting each page's text.

Extraction runs in worker processes (`iter_extracted`), so this module loads no model and imports no
retriever code. Pages are read with pypdfium2 or pypdf directly (LangChain's loaders for them are being retired
upstream and added nothing but a trailing newline), and every page's raw text goes through `normalize_pages`, the
one place that decides the text that chunking, BM25, embeddings, excerpts, the generator and the judge see.

Page text rules (TEXT_RULES; the manifest records each file's version, and a sync reads files of another version
again, embedding only the chunks whose text changed):
1. Line-end hyphens. pdfium writes U+FFFE where a line ended in a hyphen, and drops the line break: 1,854 times in
   the FinanceBench filings (`third\ufffeparty`, `non\ufffeGAAP`, `declara\ufffetions`), which BM25 split into two
   tokens. The document's own words decide: the hyphenated form is kept when the document spells it so more often
   than joined (`third-party`, `non-GAAP`), joined when the joined word is more common there (`declarations`);
   when it has neither, a capital or digit after the break keeps the hyphen (`non-GAAP`), else the parts are
   joined. pypdf writes the same break as a plain `-` and a line break (`declara-\\ntions`): the same rule, so
   both loaders give one word.
2. Soft hyphens (U+00AD, a syllable break by definition) are removed with the line break after them.
3. Typographic ligatures (U+FB00-U+FB06: `ﬁ` in `ﬁnancial`) become their letters, and no-break spaces (U+00A0,
   U+2007, U+202F) plain spaces, so a query's words match them.
4. Line breaks of every kind (`\r\n`, `\r`, form feed, U+2028, ...: where str.splitlines splits, as LangChain's
   pdfium loader did) become `\n`; other control and non-characters (U+0000-U+001F but tab, U+007F, U+FFFE,
   U+FFFF) are dropped.
5. Spaces at the start and end of a line, and around a page, are dropped: pypdf starts some lines with a space
   where pdfium does not (the sample corpus), and both loaders are to give one text.
Everything else is kept as extracted, character for character.

What the rules do not make equal (measured, see docs/): the two libraries order and break a page's lines as its
layout leads them. By the rules both give one text on simple pages (the tests' PDFs); on the sample corpus 12 of
55 pages are identical and 49 have the same words (pdfium reads the bullet glyphs `•` that pypdf does not);
on five short FinanceBench filings 4 of 42 pages are identical and 32 have the same words. And pdfium reads some
fonts' ff and ffi ligature glyphs as a lone `f` and a space (`af ect`, `Of icer`, `suf icient`: at least 320
times in 243 of the 22,730 FinanceBench chunks), where pypdf reads the whole word; the text alone cannot tell
which letters are missing, so no rule guesses them (`--loader pypdf` reads them whole, about ten times slower).
"""
from __future__ import annotations

import errno
import hashlib
import os
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from localrag.errors import RAGError
from localrag.text.pages import TEXT_RULES, shown_page  # noqa: F401 - TEXT_RULES: the version of normalize_pages' rules
from localrag.settings import PDF_LOADERS  # noqa: F401 - the text extractors `extract_pdf` knows

OUTLINE_MAX_DEPTH = 15  # outline (bookmark) levels read; pdfium's own default, deeper than any real document


@dataclass
class ExtractedPdf:
    """Text of each page of one PDF, or why it could not be read, and its outline (bookmarks)."""
    pages: list[tuple[int, str, str]] = field(default_factory=list)  # (0-based page, page label, text)
    error: str | None = None
    outline: list[tuple[int, str]] = field(default_factory=list)  # (0-based start page, title), document order
    title: str = ""  # the Title of the PDF's metadata ("" when it has none)


def extract_pdf(path: str, loader: str, normalize: bool = True) -> ExtractedPdf:
    """Extract every page's text with the chosen library, by the page text rules (`normalize_pages`; without
    `normalize` as the library gives it, for bench/page_text.py); errors become a reason, never an exception.

    Runs in worker processes, so it must stay importable without loading any model.
    """
    rules = normalize_pages if normalize else list
    try:
        if loader == "pypdf":
            return _extract_pypdf(path, rules)
        if loader == "pypdfium2":
            return _extract_pypdfium2(path, rules)
        return ExtractedPdf(error=f"unknown loader {loader!r}; use one of {', '.join(PDF_LOADERS)}")
    except Exception as exc:  # noqa: BLE001 - any library error means "this file is unreadable", reported by name
        return ExtractedPdf(error=_describe_pdf_error(exc))


def _describe_pdf_error(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    if "password" in text.lower() or "decrypt" in text.lower() or "encrypt" in text.lower():
        return f"needs a password ({text})"
    return f"not a readable PDF ({text})"


def _extract_pypdf(path: str, rules: Callable[[list[str]], list[str]]) -> ExtractedPdf:
    import logging

    from pypdf import PdfReader

    # pypdf logs repair notes ("EOF marker not found") straight to stderr; the reason is reported by file name.
    pypdf_logger = logging.getLogger("pypdf")
    level = pypdf_logger.level
    pypdf_logger.setLevel(logging.ERROR)
    try:
        reader = PdfReader(path)  # opens files encrypted with an empty user password by itself (needs cryptography)
        if reader.is_encrypted and not reader.decrypt(""):
            return ExtractedPdf(error="needs a password (encrypted with a non-empty user password)")
        texts = [page.extract_text(extraction_mode="plain") for page in reader.pages]
        labels = [str(reader.page_labels[n]) if n < len(reader.page_labels) else str(shown_page(n))
                  for n in range(len(texts))]
        outline = _outline_pypdf(reader)
        title = _title((reader.metadata or {}).get("/Title"))
    finally:
        pypdf_logger.setLevel(level)
    return ExtractedPdf(pages=list(zip(range(len(texts)), labels, rules(texts))), outline=outline, title=title)


def _extract_pypdfium2(path: str, rules: Callable[[list[str]], list[str]]) -> ExtractedPdf:
    import pypdfium2

    pdf = pypdfium2.PdfDocument(path)  # raises PdfiumError for corrupt or password-protected files
    try:
        labels = [pdf.get_page_label(i) or str(shown_page(i)) for i in range(len(pdf))]
        outline = _outline_pypdfium2(pdf)
        title = _title(pdf.get_metadata_value("Title"))
        texts = []
        for i in range(len(pdf)):
            page = pdf[i]
            textpage = page.get_textpage()
            texts.append(textpage.get_text_range())
            textpage.close()
            page.close()
    finally:
        pdf.close()
    return ExtractedPdf(pages=list(zip(range(len(texts)), labels, rules(texts))), outline=outline, title=title)


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


FRONT_PAGES = 3  # the first page with text among these is a document's front page (a cover may be an image)


def front_page(pdf: ExtractedPdf) -> str:
    """The text of the first page with text among the first FRONT_PAGES ("" when none has any)."""
    return next((text for _, _, text in pdf.pages[:FRONT_PAGES] if text.strip()), "")


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


# ----------------------------------------------------------------------------- page text rules

# Ligatures to their letters, no-break spaces to spaces (rule 3)
FOLDED = {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl", "\ufb05": "st",
          "\ufb06": "st", "\u00a0": " ", "\u2007": " ", "\u202f": " "}


def _fold(text: str) -> str:
    for char, letters in FOLDED.items():  # str.replace per character: 10x faster than str.translate here
        if char in text:
            text = text.replace(char, letters)
    return text


CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\ufffe\uffff\u00ad]")
PDFIUM_HYPHEN = re.compile(r"(\w+)\ufffe[ \t]*\n?[ \t]*(\w+)")  # pdfium's line-end hyphen, the break usually dropped
_SOFT = re.compile(r"(\w)\u00ad[ \t]*\n?[ \t]*(?=\w)")
PLAIN_HYPHEN = re.compile(r"(\w+)-[ \t]*\n[ \t]*(\w+)")  # pypdf's line-end hyphen: a plain one, then the break
_HYPHEN_BREAK = re.compile(r"-[ \t]*\n")  # a page that may hold one (a cheap scan before PLAIN_HYPHEN's)


def normalize_pages(texts: Sequence[str]) -> list[str]:
    """The pages of one document as every consumer reads them (the rules in the module docstring): the spelling
    of the whole document decides each line-end hyphen."""
    pages = [_fold("\n".join(t.splitlines())) for t in texts]  # \r\n, \r, \f, U+2028, ...: \n
    marked = [("\ufffe" in p, bool(_HYPHEN_BREAK.search(p))) for p in pages]  # (pdfium's mark, a plain one)
    pairs = [pair for page, (fffe, plain) in zip(pages, marked)
             for pattern, on in ((PDFIUM_HYPHEN, fffe), (PLAIN_HYPHEN, plain)) if on for pair in pattern.findall(page)]
    # How often the document writes each form in question, also inside a longer word ("declarations" in
    # "redeclarations"): a substring count per form, not a tokenisation of the whole document (that cost 28% of
    # the extraction time on FinanceBench, one regular expression of all forms 10%).
    document = "\n".join(pages).lower() if pairs else ""
    votes = {form: document.count(form) for form in {f.lower() for left, right in pairs
                                                     for f in (left + right, f"{left}-{right}")}}

    def rejoin(left: str, right: str) -> str:
        joined, hyphened = votes.get((left + right).lower(), 0), votes.get(f"{left}-{right}".lower(), 0)
        if joined != hyphened:
            return left + right if joined > hyphened else f"{left}-{right}"
        return f"{left}-{right}" if right[0].isupper() or right[0].isdigit() or left[-1].isdigit() else left + right

    out = []
    for page, (fffe, plain) in zip(pages, marked):
        # Each pattern only where its mark is: their word scans were most of the rules' cost.
        if fffe:
            page = PDFIUM_HYPHEN.sub(lambda m: rejoin(m.group(1), m.group(2)), page)
        if "\u00ad" in page:
            page = _SOFT.sub(r"\1", page)
        if plain:
            page = PLAIN_HYPHEN.sub(lambda m: rejoin(m.group(1), m.group(2)), page)
        page = CONTROL.sub("", page)
        out.append("\n".join(line.strip(" \t") for line in page.split("\n")).strip())
    return out
