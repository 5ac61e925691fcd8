"""The locks of an index: one writer (a sync, or an evaluation that syncs) at a time, across processes, and readers
(evaluations with --no-sync) beside each other but never beside a writer.

A local index locks a file in its folder: the writer exclusively (`folder_lock`, filelock), a reader shared
(`folder_read_lock`, flock on the same file, which filelock's exclusive flock excludes), so a reader never sees a
half-written index and two readers never wait for each other. A server index holds a lock record beside its
collection (`ServerLock`), refreshed at every commit and taken over only when older than its stale age; it has no
reader lock, so its readers take that record. Nested holders in one process share the lock.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from localrag.errors import RAGError
from localrag.files import log, new_file_mode

LOCK_FILE = ".localrag.lock"  # the writer lock inside a local index folder
_LOCKS: dict[str, object] = {}  # one FileLock per index folder and process, so nested holders share it
_SERVER_LOCKS: dict[str, list] = {}  # server index -> [lock token, holders] of the locks this process holds
_READ_LOCKS: dict[str, int] = {}  # index folder -> the lock file descriptor of this process's reader lock


@contextlib.contextmanager
def folder_lock(folder: Path, wait: bool, quiet: bool) -> Iterator[bool]:
    """Hold the writer lock of a local index folder; yields whether this is its outermost holder in this process.
    RAGError when another process holds it and not `wait`."""
    import filelock

    folder.mkdir(parents=True, exist_ok=True)
    key = str(folder.resolve())
    if key in _READ_LOCKS:  # its flock would wait for this process's own reader lock forever
        raise RAGError(f"the index {folder} is being read by this run (--no-sync) and cannot be synced by it; run "
                       f"without --no-sync to sync it")
    lock = _LOCKS.get(key)
    if lock is None:
        lock = _LOCKS[key] = filelock.FileLock(folder / LOCK_FILE, mode=new_file_mode(), thread_local=False)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        doing = "read by another process (an evaluation with --no-sync)" if _only_readers(folder) else \
            "written by another process (add_pdfs.py or an evaluation)"
        if not wait:
            raise RAGError(f"the index {folder} is being {doing}; wait until it has finished, or leave out "
                           f"--no-wait to wait for it", reason="index locked by another process") from None
        log(f"waiting: the index {folder} is being {doing.split(' (')[0]}", quiet)
        lock.acquire()
    try:
        yield lock.lock_counter == 1
    finally:
        lock.release()


def _flock() -> Any:
    """The fcntl module where the system has flock (Linux, macOS), else None (Windows)."""
    try:
        import fcntl
    except ImportError:
        return None
    return fcntl


def _only_readers(folder: Path) -> bool:
    """Whether the lock file of `folder`, which a writer cannot take, is held by readers only (a shared lock is
    still free): for the message of a writer that waits. A guess of the moment; False where it cannot tell."""
    fcntl = _flock()
    if fcntl is None:
        return False
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing releases the probe's lock


def _shared_lock(folder: Path, wait: bool, quiet: bool) -> int | None:
    """A descriptor of the folder's lock file holding a shared flock (waited for while a writer holds it, with a
    message), or None where the system or its file system has no flock. RAGError when a writer holds it and not
    `wait`."""
    fcntl = _flock()
    if fcntl is None:
        return None
    fd = os.open(folder / LOCK_FILE, os.O_RDONLY | os.O_CREAT, new_file_mode())
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                raise RAGError(f"the index {folder} is being written by another process (add_pdfs.py or an "
                               f"evaluation); wait until it has finished, or leave out --no-wait to wait for it",
                               reason="index locked by another process") from None
            log(f"waiting: the index {folder} is being written by another process", quiet)
            fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP):  # no flock on this file system
            return None
        raise
    except BaseException:  # refused, or Ctrl-C while waiting
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def folder_read_lock(folder: Path, wait: bool, quiet: bool) -> Iterator[bool]:
    """Hold a reader's lock of a local index folder: shared with other readers, so two evaluations with --no-sync
    never wait for each other, and exclusive of the writer lock (`folder_lock`): taken only while no process
    writes the index, and no process writes it while one is held, so a reader never measures a half-written
    index. Yields whether this is its outermost holder in this process (the caller reads the manifest again).
    Within this process's writer lock the index is read under it. RAGError when a writer holds the lock and not
    `wait`. Where the system has no flock (Windows, some network file systems), the writer lock is taken."""
    key = str(folder.resolve())
    writer = _LOCKS.get(key)
    if writer is not None and writer.is_locked:
        yield False
        return
    if key in _READ_LOCKS:  # an outer holder in this process releases it
        yield False
        return
    fd = _shared_lock(folder, wait, quiet)
    if fd is None:
        with folder_lock(folder, wait, quiet) as outermost:
            yield outermost
        return
    _READ_LOCKS[key] = fd
    try:
        yield True
    finally:
        del _READ_LOCKS[key]
        os.close(fd)  # closing the descriptor releases its flock


class ServerLock:
    """The writer lock of a server index: a {token, heartbeat} record in the side collection `records()` gives,
    which the holder refreshes (`heartbeat`); a record older than `stale_seconds` marks its writer as dead."""

    def __init__(self, records: Callable[[], Any], location: str, *, key: str, stale_seconds: float, quiet: bool):
        self._records = records
        self.location = location
        self.key = key  # the server and collection: what this process's holders share
        self.stale_seconds = stale_seconds
        self.quiet = quiet
        self.token: str | None = None  # this holder's token while it holds the lock

    @contextlib.contextmanager
    def held(self, wait: bool) -> Iterator[None]:
        if self.key in _SERVER_LOCKS:  # held by this process already: nested holders share it
            _SERVER_LOCKS[self.key][1] += 1
            self.token = _SERVER_LOCKS[self.key][0]
            try:
                yield
            finally:
                _SERVER_LOCKS[self.key][1] -= 1
            return
        token = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"
        collection = self._records()
        self._take(collection, token, wait)
        _SERVER_LOCKS[self.key] = [token, 1]
        try:
            yield
        finally:
            del _SERVER_LOCKS[self.key]
            self.token = None
            if self._holder(collection) == token:
                collection.delete(ids=["writer_lock"])

    def _take(self, collection, token: str, wait: bool) -> None:
        announced = False
        while True:
            held = collection.get(ids=["writer_lock"], include=["documents"])
            holder = json.loads(held["documents"][0]) if held["ids"] else None
            if holder and holder["token"] != token and time.time() - holder["heartbeat"] < self.stale_seconds:
                if not wait:
                    raise RAGError(f"the index {self.location} is being written by {holder['token'].rsplit(':', 1)[0]} "
                                   f"(host:pid); wait until it has finished, or leave out --no-wait to wait for it",
                                   reason="index locked by another process")
                if not announced:
                    log(f"waiting: the index {self.location} is being written by {holder['token'].rsplit(':', 1)[0]}",
                        self.quiet)
                    announced = True
                time.sleep(1.0)
                continue
            self.token = token
            self.heartbeat()
            time.sleep(0.3)  # another writer that raced us overwrites the record within this time; read back
            if self._holder(collection) == token:
                return

    @staticmethod
    def _holder(collection) -> str | None:
        """The token of the lock record, or None when there is none."""
        held = collection.get(ids=["writer_lock"], include=["documents"])
        return json.loads(held["documents"][0])["token"] if held["ids"] else None

    def heartbeat(self) -> None:
        """Refresh the lock record while this holder holds the lock."""
        if self.token:
            record = json.dumps({"token": self.token, "heartbeat": time.time()})
            self._records().upsert(ids=["writer_lock"], embeddings=[[1.0]], documents=[record])
