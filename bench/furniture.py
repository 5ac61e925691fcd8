"""Does removing repeated page furniture (running headers, footers, page numbers) help retrieval? (issue 30)

Builds a copy of an index whose page texts lost their furniture lines (`drop_furniture` of bench/page_text.py:
lines that stand, digits masked, at the top or bottom of at least half of a document's pages), with local_rag's
default settings otherwise, then evaluates both indexes on the same goldset in each mode (fresh
`eval_retrieval.py` processes, --no-sync --no-rerank) and prints the tool's own paired comparison
(`--compare OLD.json NEW.json`) per mode. Page numbers for citations come from the PDF's page labels, not
from the text, so they are the same in both indexes.

The copy's manifest names the page text rules it was built with, as every index does; its text differs from
them by the dropped lines only, so it lives under the bench cache and is never an index a user evaluates.

    python bench/furniture.py [--pdfs FOLDER] [--goldset CSV] [--index KEPT] [--dropped DROPPED] [--modes ...]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from page_text import drop_furniture, furniture_lines  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "financebench"
CACHE = Path.home() / ".cache" / "localrag" / "bench"
OUT_DIR = ROOT / "bench" / "out"  # reports of the runs (ignored by git)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--pdfs", default=str(SHARED / "pdfs"), help="folder of PDFs both indexes hold")
    p.add_argument("--goldset", default=str(SHARED / "goldset_dev.csv"), help="goldset to evaluate")
    p.add_argument("--index", default=str(CACHE / "financebench-index"),
                   help="index of the PDFs as localRAG reads them (built first if missing)")
    p.add_argument("--dropped", default=str(CACHE / "financebench-index-nofurniture"),
                   help="index of the same PDFs without furniture lines (built if missing)")
    p.add_argument("--modes", default="dense,bm25,hybrid", help="retrieval modes to compare")
    p.add_argument("--name", default="furniture", help="prefix of the report files under bench/out")
    return p


def build(index: Path, pdfs: Path, drop: bool) -> None:
    """Build `index` from `pdfs` with local_rag's defaults; with `drop`, without furniture lines."""
    import local_rag

    read = local_rag.iter_extracted
    lines = {"pages": 0, "furniture": 0}

    def without_furniture(paths, loader, workers=None):
        for pdf in read(paths, loader, workers):
            texts = [text for _, _, text in pdf.pages]
            lines["pages"] += len(texts)
            lines["furniture"] += furniture_lines(texts)[0]
            pdf.pages = [(n, label, text) for (n, label, _), text in zip(pdf.pages, drop_furniture(texts))]
            yield pdf

    if drop:
        local_rag.iter_extracted = without_furniture
    started, load = time.perf_counter(), os.getloadavg()[0]
    try:
        report = local_rag.LocalRAG(index, reranker_model=None).sync([pdfs])
    finally:
        local_rag.iter_extracted = read
    dropped = f"; {lines['furniture']:,} furniture lines dropped from {lines['pages']:,} pages" if drop else ""
    print(f"built {index}: {report.summary()}{dropped}; {time.perf_counter() - started:.0f} s, load average "
          f"{load:.2f} before, {os.getloadavg()[0]:.2f} after", flush=True)


def evaluate(index: Path, args: argparse.Namespace, mode: str, out: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "eval_retrieval.py"), "--goldset", args.goldset, "--docs", args.pdfs,
                    "--index", str(index), "--no-sync", "--no-rerank", "--mode", mode, "--quiet", "--no-compare",
                    "--no-query-cache", "--report", str(out.with_suffix(".txt")), "--json", str(out)],
                   check=True, cwd=ROOT)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for index, drop in ((Path(args.index), False), (Path(args.dropped), True)):
        if not (index / "index_info.json").exists():
            build(index, Path(args.pdfs), drop)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for mode in args.modes.split(","):
        kept, dropped = OUT_DIR / f"{args.name}-{mode}-kept.json", OUT_DIR / f"{args.name}-{mode}-dropped.json"
        evaluate(Path(args.index), args, mode, kept)
        evaluate(Path(args.dropped), args, mode, dropped)
        print(f"\n== {mode}: furniture kept (old) against dropped (new)", flush=True)
        subprocess.run([sys.executable, str(ROOT / "eval_retrieval.py"), "--compare", str(kept), str(dropped)],
                       check=True, cwd=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
