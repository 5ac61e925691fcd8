"""The page convention and the chunk-header format, in one place for the retriever and the goldset tools.

PDF loaders (LangChain's) number pages from 0; people, PDF viewers and goldsets from 1. Code that stores or
compares pages uses the loaders' 0-based page; code that shows a page to people (shown_page) or reads one
from them (PAGE_OFFSET) converts with what is here. Each chunk of the index stores both: ``page`` (0-based) and
``page_number`` (shown_page of it, what a citation gives), and starts with a header line naming its file and
1-based page, ``[<source>, page <n>]``, and may go on with the chunk's context line (localrag/text/identity.py:
document identity and section) before its line break; chunk_header writes it and strip_chunk_header removes it.
"""

from __future__ import annotations

import re
from typing import Any

# People count pages from 1 (what a PDF viewer shows); the loaders count from 0.
PAGE_OFFSET = 1
# Version of the page text rules (pdf.normalize_pages; 1: the raw text of LangChain's loaders): recorded per file in
# the manifest, so that a change of the rules re-reads the files.
TEXT_RULES = 2
# The header chunk_header writes, as a pattern: anchored at the start, one line, the page a whole number.
_CHUNK_HEADER = re.compile(r"\A\[[^\n]*?, page \d+\](?: [^\n]*)?\n")


def shown_page(page: int) -> int:
    """The 1-based page people see for a loader's 0-based ``page``."""
    return page + PAGE_OFFSET


def chunk_header(source: str, page: int, context: str = "") -> str:
    """The header line put before each chunk: file name and 1-based page of the 0-based ``page``, then the
    chunk's context line when there is one."""
    context = " ".join(context.split())
    return f"[{source}, page {shown_page(page)}]{' ' + context if context else ''}\n"


def strip_chunk_header(text: str) -> str:
    """The chunk text without its first line if that is a header chunk_header wrote."""
    return _CHUNK_HEADER.sub("", text, count=1)


def page_key(doc: Any) -> tuple[str, int]:
    """The page a chunk (a LangChain Document) stands on: (file, 0-based page)."""
    return doc.metadata["source"], int(doc.metadata["page"])
