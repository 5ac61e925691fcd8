"""Notes for the user on stderr: what the index's parts say while they work (waiting for a lock, rebuilding,
skipping a file), unless the caller asked for quiet."""
from __future__ import annotations

import sys


def log(message: str, quiet: bool = False) -> None:
    """A note for the user on stderr, unless `quiet`."""
    if not quiet:
        print(message, file=sys.stderr, flush=True)
