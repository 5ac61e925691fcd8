"""What the page text rules (localrag/text/pdf.py, normalize_pages) change on a shelf of PDFs.

Reads every PDF below FOLDER with the chosen loader, raw and by the rules, and prints per rule how many characters
or places it changed (pdfium's line-end hyphen U+FFFE, soft hyphens, pypdf's plain line-end hyphens rejoined,
ligatures, no-break spaces, control characters), how many of those line-end hyphens were kept as hyphens
(compounds such as non-GAAP) or joined (declara-tions), the pages whose words changed, what the rules leave
(pages with U+FFFE, U+00AD or a control character after them: 0 expected; exit 1 otherwise, and when a PDF
could not be read), the page furniture lines (running headers, footers, page numbers; kept by the rules, see
bench/furniture.py), and the extraction time raw and by the rules with their ratio. `drop_furniture` is what
bench/furniture.py measures removing.

    python bench/page_text.py [FOLDER] [--loader pypdfium2] [--limit N]
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from localrag.cli import HelpFormatter  # noqa: E402
from localrag.text.pdf import (CONTROL, FOLDED, PDF_LOADERS, PDFIUM_HYPHEN, PLAIN_HYPHEN, extract_pdf,  # noqa: E402
                               find_pdfs, normalize_pages)

FOLDER = Path(__file__).resolve().parents[2] / "shared/data/financebench/pdfs"  # 74 SEC filings
LIGATURES = "".join(c for c, letters in FOLDED.items() if letters != " ")
SPACES = "".join(c for c, letters in FOLDED.items() if letters == " ")


def rule_counts(texts: list[str]) -> Counter:
    """How often each rule changed the raw pages of one document: pdfium's and pypdf's line-end hyphens, soft
    hyphens, ligatures, no-break spaces, control characters (line separators such as a form feed, which become
    line breaks, not counted)."""
    raw = "\n".join("\n".join(t.splitlines()) for t in texts)
    counts = Counter()
    counts["pdfium line-end hyphen (U+FFFE)"] = raw.count("\ufffe")
    counts["soft hyphen (U+00AD)"] = raw.count("\u00ad")
    counts["ligature"] = sum(raw.count(c) for c in LIGATURES)
    counts["no-break space"] = sum(raw.count(c) for c in SPACES)
    counts["control character"] = sum(c not in "\ufffe\u00ad" for c in CONTROL.findall(raw))
    before = Counter(PLAIN_HYPHEN.findall(raw))
    after = Counter(PLAIN_HYPHEN.findall("\n".join(normalize_pages(texts))))
    counts["plain line-end hyphen rejoined"] = sum((before - after).values())
    return counts


FURNITURE_SHARE = 0.5  # a line (digits masked) at the edge of at least this share of a document's pages is furniture
FURNITURE_EDGE = 2  # lines read at the top and at the bottom of a page, where running headers and footers stand
FURNITURE_MIN_PAGES = 4  # documents shorter than this have no running furniture to find


def _masked(line: str) -> str:
    return re.sub(r"\d+", "#", line.strip())


def _edges(page: str) -> list[int]:
    """Indexes of the first and last FURNITURE_EDGE non-empty lines of a page (its lines split at \\n)."""
    lines = [i for i, line in enumerate(page.split("\n")) if line.strip()]
    return sorted(set(lines[:FURNITURE_EDGE] + lines[-FURNITURE_EDGE:]))


def furniture_lines(pages: list[str]) -> tuple[int, list[str]]:
    """(furniture lines on the pages, their distinct masked forms): a running header or footer ("Nordvik AG · Page
    3 of 40", "Table of Contents", a page number) is a line that stands, digits masked, among the top or bottom
    FURNITURE_EDGE lines of FURNITURE_SHARE of the pages or more. Only the edges count: a table's bare figures,
    one to a line, are masked alike in the body of every page."""
    if len(pages) < FURNITURE_MIN_PAGES:
        return 0, []
    edges = [{_masked(page.split("\n")[i]) for i in _edges(page)} for page in pages]
    seen = Counter(line for lines in edges for line in lines)
    furniture = {line for line, n in seen.items() if n >= FURNITURE_SHARE * len(pages)}
    return sum(len(lines & furniture) for lines in edges), sorted(furniture)


def drop_furniture(pages: list[str]) -> list[str]:
    """The pages without their furniture lines (furniture_lines), every other line as it was."""
    _, found = furniture_lines(pages)
    if not found:
        return list(pages)
    furniture, out = set(found), []
    for page in pages:
        lines, edge = page.split("\n"), set(_edges(page))
        out.append("\n".join(line for i, line in enumerate(lines) if i not in edge or _masked(line) not in furniture))
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    p.add_argument("folder", nargs="?", default=str(FOLDER), help="folder of PDFs (default: %(default)s)")
    p.add_argument("--loader", default="pypdfium2", choices=PDF_LOADERS, help="PDF loader (default: %(default)s)")
    p.add_argument("--limit", type=int, default=None, help="read only the first N files (default: all)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    files = find_pdfs([args.folder])[:args.limit]
    if not files:
        print(f"error: no PDF below {args.folder}", file=sys.stderr)
        return 2
    counts, outcome = Counter(), Counter()
    examples: list[str] = []  # one furniture line of each document that has any
    pages = touched = left = skipped = 0
    seconds = {"raw": 0.0, "rules": 0.0}
    load = os.getloadavg()[0]
    for path in files:
        started = time.perf_counter()
        raw = extract_pdf(str(path), args.loader, normalize=False)
        seconds["raw"] += time.perf_counter() - started
        started = time.perf_counter()
        ruled = extract_pdf(str(path), args.loader)
        seconds["rules"] += time.perf_counter() - started
        if raw.error:
            print(f"skipped {path.name}: {raw.error}", file=sys.stderr)
            skipped += 1
            continue
        texts = [t for _, _, t in raw.pages]
        counts += rule_counts(texts)
        lines, kinds = furniture_lines([t for _, _, t in ruled.pages])
        counts["furniture line (kept)"] += lines
        examples.extend(kinds[:1])
        joined = "\n".join(t for _, _, t in ruled.pages)
        for left_part, right_part in PDFIUM_HYPHEN.findall("\n".join(texts)):
            outcome["kept as hyphen" if f"{left_part}-{right_part}" in joined else "joined"] += 1
        pages += len(texts)
        # A page counts when its words changed, not only its line breaks (\r\n) or the spaces at line ends.
        touched += sum(raw_text.split() != new.split() for raw_text, (_, _, new) in zip(texts, ruled.pages))
        left += sum(bool(CONTROL.search(t)) for _, _, t in ruled.pages)
    print(f"{len(files)} PDFs, {pages:,} pages, loader {args.loader}; pages whose words the rules changed: "
          f"{touched:,}")
    print(f"{'rule':<36} {'count':>8}")
    for name, n in sorted(counts.items()):
        print(f"{name:<36} {n:>8,}")
    for name, n in sorted(outcome.items()):
        print(f"{'  U+FFFE ' + name:<36} {n:>8,}")
    print(f"pages still holding U+FFFE, U+00AD or a control character: {left}")
    if examples:
        print(f"furniture lines, e.g.: {'; '.join(repr(e[:60]) for e in examples[:5])}")
    print(f"extraction {seconds['raw']:.1f} s raw, {seconds['rules']:.1f} s by the rules "
          f"({seconds['rules'] / max(seconds['raw'], 1e-9):.2f}x); load average {load:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    if skipped:
        print(f"{skipped} PDF{'s' if skipped != 1 else ''} could not be read (see stderr); their pages are not counted")
    return 1 if left or skipped else 0


if __name__ == "__main__":
    sys.exit(main())
