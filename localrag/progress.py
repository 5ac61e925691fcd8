"""Progress on stderr: a tqdm bar on a terminal; elsewhere (a CI log, a file) plain lines, one every LINE_SECONDS
while the task runs (a ticker thread prints it when no update did, so one slow step cannot leave a gap), and a
closing line for a task that printed any. `show=False` (--quiet) shows neither.

Two tasks that take turns (PDFs read, then their chunks embedded, then the next PDF read) each print only while
the work is theirs (`paused`), and a task waiting on one item says which (`doing`): a log shows what is under way,
never the count of the task that waits as if it were moving.
`waiting`: the same ticker for one call that may hang (a server's reply), a line every LINE_SECONDS
while it waits.
"""
from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from typing import IO, Callable, Iterable, Iterator, TypeVar

LINE_SECONDS = 10.0  # at most one plain progress line this often

T = TypeVar("T")
_END = object()  # no item left (paused_while_fetched)


class Progress:
    """One task's progress: `update(n)` as its items are done, `close()` at the end (or use it in a with block).

    On stderr: on a terminal a tqdm bar; otherwise 'Embedding chunks: 1,200/22,730 (5 %), 10 s elapsed' once
    LINE_SECONDS passed since the task began or since the last line (checked at each update and by the ticker
    thread), and once more when the task closes after printing any, unless that line showed the final count (a task
    done within LINE_SECONDS prints nothing; with `announce`, a line at its start too). `clock` and `terminal` are
    for tests; the ticker thread runs on the real clock only.
    """

    def __init__(self, desc: str, total: int | None = None, unit: str = "it", *, show: bool = True,
                 clock: Callable[[], float] = time.monotonic, terminal: bool | None = None,
                 leave: bool = False, announce: bool = False) -> None:
        self.stream: IO[str] = sys.stderr
        self.desc, self.total, self.clock = desc, total, clock
        terminal = self.stream.isatty() if terminal is None else terminal
        self.bar = None
        if show and terminal:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit, file=self.stream, leave=leave)
        self.lines = show and not terminal
        self.done = 0
        self.started = self.last = clock()
        self.printed: int | None = None  # the count the last plain line showed, None before the first
        self.doing: str | None = None  # what the task waits on now ("reading b.pdf"), shown in its plain lines
        self.pause_depth = 0  # > 0 while the work is another task's (see paused)
        self.lock = threading.Lock()  # the ticker and update() print from two threads
        self.stopped = threading.Event()
        if announce:
            self.announce()
        # The ticker waits in real time: with a test's own clock, the test ticks (tick()).
        if self.lines and clock is time.monotonic and math.isfinite(LINE_SECONDS):
            threading.Thread(target=self._tick_until_closed, name=f"progress: {desc}", daemon=True).start()

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        else:
            self.tick()

    def tick(self) -> None:
        """Print a plain line when LINE_SECONDS passed since the task began or since the last line."""
        with self.lock:
            finished = self.total is not None and self.done >= self.total and self.printed == self.done
            # A finished count already shown is not repeated while its task waits to close, nor any count while the
            # work is another task's (that task's lines say what is under way).
            if self.lines and not finished and not self.pause_depth and self.clock() - self.last >= LINE_SECONDS:
                self._line()

    def announce(self) -> None:
        """Print the task's line now: a long task says at once that it began (and on what, after `set_doing`), so
        that a log shows it before its first LINE_SECONDS."""
        with self.lock:
            if self.lines and math.isfinite(LINE_SECONDS):
                self._line()

    def set_doing(self, doing: str | None) -> None:
        """Say what the task waits on now ("reading b.pdf"; None: nothing): in its plain lines, beside a bar."""
        self.doing = doing
        if self.bar is not None:
            self.bar.set_postfix_str(doing or "", refresh=False)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """While the work is another task's (the chunks of the file just read are embedded, with their own
        progress), this task prints no timed line; its next one comes once LINE_SECONDS passed since its last."""
        with self.lock:
            self.pause_depth += 1
        try:
            yield
        finally:
            with self.lock:
                self.pause_depth -= 1

    def paused_while_fetched(self, items: Iterable[T]) -> Iterator[T]:
        """`items`, this task paused while each one is made: another task, with its own progress, makes them."""
        iterator = iter(items)
        while True:
            with self.paused():
                item = next(iterator, _END)
            if item is _END:
                return
            yield item

    def _tick_until_closed(self) -> None:
        while not self.stopped.wait(LINE_SECONDS / 4):
            self.tick()

    def close(self) -> None:
        self.stopped.set()
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        else:
            with self.lock:
                if self.lines and self.printed is not None and self.printed != self.done:
                    self._line()
                self.lines = False

    def line(self, now: float) -> str:
        """The plain line at time `now`: done/total (percent) when the total is known, what the task waits on
        (`doing`) when it says, and the seconds elapsed."""
        count = f"{self.done:,}"
        if self.total:
            count += f"/{self.total:,} ({100 * self.done // self.total} %)"
        doing = f", {self.doing}" if self.doing else ""
        return f"{self.desc}: {count}{doing}, {now - self.started:.0f} s elapsed"

    def _line(self) -> None:
        now = self.clock()
        print(self.line(now), file=self.stream, flush=True)
        self.last, self.printed = now, self.done

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_iter(items: Iterable[T], desc: str, total: int | None = None, unit: str = "it", *,
                  show: bool = True, **options) -> Iterator[T]:
    """`items`, each counted on a Progress (`options`: Progress's keywords) closed when they run out."""
    with Progress(desc, total, unit, show=show, **options) as progress:
        for item in items:
            yield item
            progress.update()


@contextlib.contextmanager
def waiting(say: Callable[[float], None]) -> Iterator[None]:
    """While the block runs (one call that may hang, e.g. a request to a model server), ``say(seconds waited)``
    every LINE_SECONDS from a ticker thread, the first after LINE_SECONDS: a stalled call is never silent, and one
    that ends sooner says nothing."""
    every = LINE_SECONDS
    if not math.isfinite(every):
        yield
        return
    started, done = time.monotonic(), threading.Event()

    def ticker() -> None:
        count = 0  # lines said; the next is due at (count + 1) * every, so slow lines do not drift
        while not done.wait(max(0.0, started + every * (count + 1) - time.monotonic())):
            count += 1
            say(time.monotonic() - started)

    thread = threading.Thread(target=ticker, name="waiting", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
