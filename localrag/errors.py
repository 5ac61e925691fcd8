"""The one error type of the retriever side: a problem the user can fix, told in words that say how."""
from __future__ import annotations


class RAGError(Exception):
    """A problem the user can fix; the message says what and how. `reason` is a short form for reports."""

    def __init__(self, message: str, reason: str | None = None):
        super().__init__(message)
        self.reason = reason or message
