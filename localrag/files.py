"""Files: atomic writes, the one CSV writer, paths as messages show them, and notes for the user on stderr (log).

Atomic writes: a reader, a crash or Ctrl-C sees the old file or the new one, never half a file. One mechanism
for every file localRAG rewrites (reports, index manifest, BM25 arrays, judge cache, goldsets): a temp file beside
the target (same filesystem, so the rename is atomic), flushed and fsynced, then ``os.replace``; on any failure the
temp file is removed and the old file stays as it was.
"""
from __future__ import annotations

import contextlib
import contextvars
import csv
import errno
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator, Sequence


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (/proc), else by setting it back."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """Mode of a file written for the first time: 0666 less the umask, as open() would give it.

    mkstemp's own 0600 would hide a report from others; a fixed 0644 would ignore a user's umask 077.
    """
    return 0o666 & ~current_umask()


def _staged(path: Path, write: Callable[[IO], Any], binary: bool) -> str:
    """A temp file beside `path`, written by ``write(handle)`` and on disk (fsync), with the mode `path` has, else
    the umask's; removed again if writing fails. Returns its name, for os.replace."""
    mode = path.stat().st_mode & 0o777 if path.exists() else new_file_mode()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, mode)
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def write_atomic(path: str | Path, write: Callable[[IO], Any], *, binary: bool = False,
                 make_parents: bool = False) -> None:
    """Call ``write(handle)`` on a temp file beside `path`, then replace `path` with it.

    Text handles are UTF-8 with newline="" ("\\n" stays "\\n" on every OS, as csv wants). The file keeps the
    mode of the one it replaces, else the umask's mode (`new_file_mode`). `make_parents` creates missing folders first.
    """
    write_many_atomic([(path, write)], binary=binary, make_parents=make_parents)


def write_many_atomic(items: Sequence[tuple[str | Path, Callable[[IO], Any]]], *, binary: bool = False,
                      make_parents: bool = False) -> None:
    """Several files as `write_atomic` writes one, all or none: every temp file is on disk before the renames
    replace the old files (renames need no space). On an error (a full disk, a read-only folder) the temp files
    are removed and every old file is as it was; an OSError names the target it failed on (`filename`)."""
    staged: list[tuple[str, Path]] = []
    target = None
    try:
        for path, write in items:
            target = Path(path)
            if make_parents:
                target.parent.mkdir(parents=True, exist_ok=True)
            staged.append((_staged(target, write, binary), target))
        for _, target in staged:  # a folder in the way would fail its rename after earlier ones: none is made
            if target.is_dir():
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
        for tmp, target in staged:
            os.replace(tmp, target)
    except BaseException as exc:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno is not None and target is not None:
            # The file it was about, never the temp file beside it (os.replace and mkstemp name that one).
            raise OSError(exc.errno, exc.strerror, str(target)) from exc
        raise


def write_texts_atomic(items: Sequence[tuple[str | Path, str]]) -> None:
    """Several texts into their paths (folders created), all or none (`write_many_atomic`)."""
    write_many_atomic([(path, lambda handle, text=text: handle.write(text)) for path, text in items],
                      make_parents=True)


def write_text_atomic(path: str | Path, text: str) -> None:
    """`text` into `path` (folders created), atomically."""
    write_atomic(path, lambda handle: handle.write(text), make_parents=True)


def write_json_atomic(path: str | Path, data: Any, indent: int = 1) -> None:
    """`data` as key-sorted JSON (non-ASCII kept) plus a final newline into `path` (folders created), atomically."""
    write_text_atomic(path, json.dumps(data, ensure_ascii=False, indent=indent, sort_keys=True) + "\n")


# A cell starting so is a formula in Excel, LibreOffice and Google Sheets (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A plain decimal number ("-0.5", "+1", "2e-3"): a spreadsheet reads it as that number, never as a formula.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def formula_like(text: str) -> bool:
    """Whether a spreadsheet would take `text` for a formula: it starts like one and is not a plain number."""
    return text.startswith(FORMULA_STARTS) and _PLAIN_NUMBER.fullmatch(text) is None


def spreadsheet_cell(value: object) -> str:
    """A value as the CSV cell localRAG writes: '' for None, a number as it is, text that a spreadsheet would take
    for a formula prefixed with a single quote.

    The rule is OWASP's against CSV injection (https://owasp.org/www-community/attacks/CSV_Injection): a cell
    starting with =, +, -, @, a tab or a carriage return gets a leading ' so that Excel, LibreOffice and Google
    Sheets show it as text (a question "=HYPERLINK(...)", a file named "-x.pdf"). A plain decimal number
    ("-0.5000", "+1", a rank) is left as it is: it is no formula, and a metric column stays numeric.
    `restore_cell` is the inverse, for the CSV files localRAG reads back."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    return "'" + text if formula_like(text) else text


def restore_cell(cell: str) -> str:
    """A cell as it was before `spreadsheet_cell`: the quote it put before a formula-like text removed; any other
    cell (one a person wrote with a leading quote, "'-5") as it is."""
    return cell[1:] if cell.startswith("'") and formula_like(cell[1:]) else cell


def csv_text(rows: Iterable[Sequence[object]], delimiter: str = ",", line_end: str = "\n") -> str:
    """The text of a CSV file with `rows` (the header first), every cell through `spreadsheet_cell`, quoted where
    needed (RFC 4180): the one writer of every CSV localRAG writes (--csv, --label-sample, goldsets)."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator=line_end)
    for row in rows:
        writer.writerow([spreadsheet_cell(value) for value in row])
    return out.getvalue()


def display_path(path: str | Path) -> str:
    """A path as messages and reports show it: relative to the working folder when inside it, else as given
    with the home folder written ~ (never a user's home folder in a committed report, never a bare file name)."""
    path = Path(path)
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        pass
    try:
        return "~/" + path.relative_to(Path.home()).as_posix()
    except ValueError:
        return path.as_posix()


def same_path(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name the same file or folder (existing or not)."""
    return Path(a).resolve() == Path(b).resolve()


def wrote_line(paths: Sequence[str | Path]) -> str:
    """The last line of a run on stdout: every file it wrote, in the order given, each once, as messages show
    paths ('Wrote eval/baseline.txt, eval/baseline.json'); 'Wrote no file' when there is none. Every writer of a
    run adds its paths to one list and the script renders it here, so a new output joins by being added."""
    shown = list(dict.fromkeys(display_path(path) for path in paths))
    return "Wrote " + (", ".join(shown) if shown else "no file")


# The warnings shown in the run now (`warnings_once`), None outside one.
_shown_warnings: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("shown_warnings", default=None)


@contextlib.contextmanager
def warnings_once() -> Iterator[None]:
    """One run of a command: within it a warning (a `log` message starting "warning: ") of the same text is shown
    once, e.g. the reranker that is off on every index of a sweep or every entry of a suite."""
    token = _shown_warnings.set(set())
    try:
        yield
    finally:
        _shown_warnings.reset(token)


def log(message: str, quiet: bool = False) -> None:
    """A note for the user on stderr, unless `quiet`: what the index's parts say while they work (waiting for a
    lock, rebuilding, skipping a file), and the evaluation's progress. Within `warnings_once` a warning already
    shown is not shown again."""
    if quiet:
        return
    shown = _shown_warnings.get()
    if shown is not None and message.startswith("warning: "):
        if message in shown:
            return
        shown.add(message)
    print(message, file=sys.stderr, flush=True)
