"""The LLM reranker on a real local model: does a small chat model put the evidence page first?

Takes the first `--questions` FinanceBench dev questions, retrieves the first `--top` pages of each with the
long-pdf profile from a whole-page FinanceBench index (no reranker), lets a chat model on OPENAI_BASE_URL grade
each page 0-10 through localrag/retrieval/llm_rerank.py (`LLMReranker`, the product's prompt and parser; replies cached in
`--cache`), and prints per question the rank of the first acceptable page (±1, as the report counts) before and
after the grades reorder those pages, with the seconds per new grade and the load average (`--movable`: only
questions whose evidence page is among those pages but not first, the ones a reranker can move). It measures little
(a few questions: 20-60 s a prompt on 2 cores) and says only whether the path works on a real model and which
way it leans; the tool's `--rerank-model openai:MODEL` runs it over a whole goldset where a server is fast.

    ../shared/tools/local-llm/setup.sh   # then serve it as its last line says, and:
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 python bench/llm_rerank.py --model qwen [--questions 3 --top 5]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from localrag.cli import HelpFormatter  # noqa: E402 - the repository root is on sys.path above

DATA = REPO_ROOT.parent / "shared" / "data" / "financebench"
GOLDSET = DATA / "goldset_dev.csv"
INDEX = Path(os.environ.get("LOCALRAG_CACHE", "~/.cache/localrag")).expanduser() / "bench" / "fb-page"
CACHE = REPO_ROOT / "bench" / "out" / "llm_rerank_cache.json"  # bench/out is git-ignored


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    parser.add_argument("--model", required=True, help="model name the server answers to")
    parser.add_argument("--index", type=Path, default=INDEX, help="whole-page FinanceBench index "
                                                                  "(add_pdfs.py --chunk-size page)")
    parser.add_argument("--questions", type=int, default=3, help="dev questions graded, from the first")
    parser.add_argument("--top", type=int, default=5, help="pages graded per question")
    parser.add_argument("--cache", type=Path, default=CACHE, help="reply cache of the grades")
    parser.add_argument("--movable", action="store_true",
                        help="only questions whose first acceptable page is among the --top pages but not first: the "
                             "ones a reranker can improve or spoil (default: every question, from the first)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import local_rag
    from localrag.goldset import format as gs
    from localrag.retrieval.llm_rerank import LLMReranker

    if not os.environ.get("OPENAI_BASE_URL"):
        print("error: set OPENAI_BASE_URL to the model server (see the docstring)", file=sys.stderr)
        return 2
    questions = gs.read_goldset(GOLDSET).questions
    options = {k: v for k, v in local_rag.PROFILES["long-pdf"].items() if k != "chunk_size"}
    rag = local_rag.LocalRAG(args.index, reranker_model=None, quiet=True, **options)
    grader = LLMReranker(f"openai:{args.model}", args.cache)
    load_before, started, asked = os.getloadavg(), time.perf_counter(), 0
    print(f"{'question':<60} {'before':>6} {'after':>6}  grades")
    done = 0
    for q in questions:
        if done == args.questions:
            break
        found = rag.retrieve(q.question, k=args.top)
        before = gs.first_match_rank([(d.metadata["source"], [int(d.metadata["page"])]) for d, _ in found],
                                     q.locations)
        if args.movable and before in (None, 1):
            continue
        done += 1
        calls = grader.client.new_calls
        grades = grader.predict([(q.question, d.page_content) for d, _ in found])
        asked += grader.client.new_calls - calls
        order = sorted(range(len(found)), key=lambda i: -grades[i])  # stable: ties keep the profile's order
        after = gs.first_match_rank([(found[i][0].metadata["source"], [int(found[i][0].metadata["page"])])
                                     for i in order], q.locations)
        print(f"{q.question[:60]:<60} {before or '-':>6} {after or '-':>6}  {' '.join(f'{g:.0f}' for g in grades)}")
    seconds = time.perf_counter() - started
    print(f"\n{asked} new grades in {seconds:.0f} s ({seconds / asked:.1f} s each)" if asked else
          f"\nevery grade from the cache {args.cache}")
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
