"""Progress in a CI log: an index build with stderr piped (not a terminal), every stderr line timed.

Copies the first --files FinanceBench PDFs (default 3) into a temporary folder outside the repository (add_pdfs.py
reads no link that leaves its folder), builds a fresh index of them with `add_pdfs.py`, its stderr read line by line
as a CI runner reads it, and prints each line with the seconds since the command started, then the number of
lines, the largest gap between two lines (from the start to the first line, and from the last line to the end,
included) and the load average before and after. The goal: a line at least every 10 s. Exit 1 when a gap is
longer than --max-gap.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "financebench" / "pdfs"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pdfs", default=str(DATA), help=f"folder of PDFs (default: {DATA})")
    p.add_argument("--files", type=int, default=3, help="how many PDFs, in name order (default: 3)")
    p.add_argument("--max-gap", type=float, default=10.5,
                   help="longest allowed gap between two stderr lines, in seconds (default: 10.5)")
    return p


def timed_lines(command: list[str]) -> tuple[int, list[tuple[float, str]], float]:
    """(exit code, [(seconds since start, stderr line)], total seconds) of `command`, stdout discarded."""
    start = time.monotonic()
    proc = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines = [(time.monotonic() - start, line.rstrip("\n")) for line in proc.stderr]
    proc.wait()
    return proc.returncode, lines, time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    pdfs = sorted(Path(args.pdfs).glob("*.pdf"))[:args.files]
    if not pdfs:
        print(f"error: no PDF in {args.pdfs}; give a folder with --pdfs", file=sys.stderr)
        return 2
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="localrag-progress-") as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        for pdf in pdfs:
            shutil.copy(pdf, docs / pdf.name)
        code, lines, total = timed_lines([sys.executable, "add_pdfs.py", str(docs), "--index", str(Path(tmp) / "index")])
    for seconds, line in lines:
        print(f"{seconds:7.1f}  {line}")
    times = [0.0, *(seconds for seconds, _ in lines), total]
    gap = max(b - a for a, b in zip(times, times[1:]))
    print(f"exit {code}; {len(pdfs)} PDFs; {total:.1f} s; {len(lines)} stderr lines; largest gap {gap:.1f} s")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if code or gap > args.max_gap else 0


if __name__ == "__main__":
    sys.exit(main())
