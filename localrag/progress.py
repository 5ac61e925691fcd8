"""Progress on stderr: a tqdm bar on a terminal; elsewhere (a CI log, a file) plain lines, one every LINE_SECONDS
while the task runs (a ticker thread prints it when no update did, so one slow step cannot leave a gap), and a
closing line for a task that printed any. `show=False` (--quiet) shows neither. `waiting`: the same ticker for one
call that may hang (a server's reply), a line every LINE_SECONDS while it waits.
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
        self.lock = threading.Lock()  # the ticker and update() print from two threads
        self.stopped = threading.Event()
        if self.lines and announce and math.isfinite(LINE_SECONDS):
            self._line()  # a long task says at once that it began: a log shows it before its first 10 s
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
            if self.lines and not finished and self.clock() - self.last >= LINE_SECONDS:
                self._line()  # a finished count already shown is not repeated while its task waits to close

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
        """The plain line at time `now`: done/total (percent) when the total is known, and the seconds elapsed."""
        count = f"{self.done:,}"
        if self.total:
            count += f"/{self.total:,} ({100 * self.done // self.total} %)"
        return f"{self.desc}: {count}, {now - self.started:.0f} s elapsed"

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
