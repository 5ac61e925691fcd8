"""The writer locks of an index: one sync (or evaluation) of an index at a time, across processes.

A local index locks a file in its folder (`folder_lock`, filelock); a server index holds a lock record beside its
collection (`ServerLock`), refreshed at every commit and taken over only when older than its stale age. Nested
holders in one process share the lock.
"""
from __future__ import annotations

import contextlib
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


@contextlib.contextmanager
def folder_lock(folder: Path, wait: bool, quiet: bool) -> Iterator[bool]:
    """Hold the writer lock of a local index folder; yields whether this is its outermost holder in this process.
    RAGError when another process holds it and not `wait`."""
    import filelock

    folder.mkdir(parents=True, exist_ok=True)
    key = str(folder.resolve())
    lock = _LOCKS.get(key)
    if lock is None:
        lock = _LOCKS[key] = filelock.FileLock(folder / LOCK_FILE, mode=new_file_mode(), thread_local=False)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        if not wait:
            raise RAGError(f"the index {folder} is being written by another process (add_pdfs.py or an "
                           f"evaluation); wait until it has finished, or leave out --no-wait to wait for it",
                           reason="index locked by another process") from None
        log(f"waiting: the index {folder} is being written by another process", quiet)
        lock.acquire()
    try:
        yield lock.lock_counter == 1
    finally:
        lock.release()


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
