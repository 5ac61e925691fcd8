"""The package's one error family: a problem the user can fix, told in words that say how.

Every error class of localrag derives from RAGError, so each script's `main` catches the one base and prints the
message. A class lives where it is raised; one raised by several layers lives here.
"""
from __future__ import annotations


class RAGError(Exception):
    """A problem the user can fix; the message says what and how. `reason` is a short form for reports."""

    def __init__(self, message: str, reason: str | None = None):
        super().__init__(message)
        self.reason = reason or message


class EvalError(RAGError):
    """Bad input to an evaluation, a goldset tool or a report: main() prints the message and exits 2."""
