"""Goldset scale: lint time (new vs. the old all-pairs near-duplicate check) and the read / lint / retrieval split
of a whole evaluation of a synthetic goldset on the sample corpus.

  python bench/goldset_scale.py                                  # 100,000 questions, lint sizes 1k/2k/4k
  python bench/goldset_scale.py --questions 20000 --old-max 2000 # smaller and faster

Questions are drawn, seeded, from the chunks of the sample index (eval/index, built from eval/docs by
`python eval_retrieval.py`): each names the chunk's file and page and takes 5-10 words of its text, so the
goldset is clean (valid files and pages) but for the near-duplicates planted in it (one question in
50). The evaluation is the CLI itself (`eval_retrieval.main`, --no-rerank --no-compare --quiet) with its phases
timed from outside.
"""
from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from localrag.cli import HelpFormatter  # noqa: E402 - the repository root is on sys.path above

from localrag.goldset import format as gs  # noqa: E402
from localrag.text.pages import shown_page  # noqa: E402

OUT_DIR = ROOT / "bench" / "out"  # synthetic goldsets and reports (ignored by git)
WORD = re.compile(r"[^\W\d_]{3,}")  # words a question may borrow from its chunk
STARTS = ("What does the text say about", "Where is", "Which page explains", "How is", "Why does")
DUPLICATE_EVERY = 50  # one question in 50 is an earlier one with one word changed


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--questions", type=int, default=100_000, help="questions of the evaluated goldset")
    p.add_argument("--lint-sizes", default="1000,2000,4000", help="goldset sizes of the lint-only timings")
    p.add_argument("--old-max", type=int, default=4000, help="largest size the old all-pairs lint is timed on "
                                                             "(it is quadratic); larger sizes are extrapolated")
    p.add_argument("--index", default=str(ROOT / "eval" / "index"), help="sample index (built by "
                                                                         "eval_retrieval.py)")
    p.add_argument("--docs", default=str(ROOT / "eval" / "docs"), help="PDF folder of the index")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic questions")
    p.add_argument("--skip-eval", action="store_true", help="lint timings only, no evaluation")
    return p


def index_chunks(index: str) -> list[tuple[str, int, str]]:
    """(source, 1-based page, text) of every chunk in the index."""
    from local_rag import LocalRAG

    rag = LocalRAG(index, reranker_model=None, quiet=True)
    return [(m["source"], shown_page(int(m["page"])), text) for _, text, m in rag.indexed_chunks()]


def synthetic_rows(chunks: list[tuple[str, int, str]], n: int, seed: int) -> list[tuple[str, str, int]]:
    """n (question, source, page) rows, seeded: 5-10 words of a random chunk after a question start; one row in
    DUPLICATE_EVERY repeats an earlier question with one word changed (a near-duplicate for lint to find)."""
    rng = random.Random(seed)
    words = [WORD.findall(text) or ["page"] for _, _, text in chunks]
    rows: list[tuple[str, str, int]] = []
    for i in range(n):
        if rows and i % DUPLICATE_EVERY == 0:
            question, source, page = rows[rng.randrange(len(rows))]
            tokens = question.rstrip("?").split()
            tokens[rng.randrange(len(tokens))] = rng.choice(rng.choice(words))
            rows.append((" ".join(tokens) + "?", source, page))
            continue
        c = rng.randrange(len(chunks))
        picked = rng.sample(words[c], min(len(words[c]), rng.randint(5, 10)))
        rows.append((f"{rng.choice(STARTS)} {' '.join(picked)}?", chunks[c][0], chunks[c][1]))
    return rows


def write_goldset(path: Path, rows: list[tuple[str, str, int]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    gs.write_goldset_csv(path, (gs.GoldsetRow(question, "", source, page, "") for question, source, page in rows))
    return path


def lint_seconds(questions, docs, old: bool) -> tuple[float, list]:
    """(seconds, findings) of lint_goldset; old=True swaps in the all-pairs near-duplicate check."""
    from localrag.goldset import lint as goldset_lint

    fast = goldset_lint.near_duplicate_pairs
    if old:
        goldset_lint.near_duplicate_pairs = lambda texts, **_: goldset_lint.near_duplicate_pairs_brute_force(texts)
    try:
        started = time.perf_counter()
        findings = goldset_lint.lint_goldset(questions, [], docs)
        return time.perf_counter() - started, findings
    finally:
        goldset_lint.near_duplicate_pairs = fast


def lint_table(chunks, docs, sizes: list[int], old_max: int, seed: int) -> list[str]:

    lines = ["Lint of the goldset (seconds; near-duplicates: new = only pairs sharing two of their rarest words, "
             "old = every pair)", f"  {'questions':>10}  {'findings':>8}  {'new':>8}  {'old':>10}  {'speed-up':>8}"]
    old_fit = None  # seconds per pair of the largest measured old run, for the extrapolation
    for n in sizes:
        path = write_goldset(OUT_DIR / f"scale-{n}.csv", synthetic_rows(chunks, n, seed))
        questions = gs.read_goldset(path).questions
        new, findings = lint_seconds(questions, docs, old=False)
        if n <= old_max:
            old, old_findings = lint_seconds(questions, docs, old=True)
            assert old_findings == findings, "the new lint must find exactly what the old one finds"
            old_fit = old / (n * n)
            old_text = f"{old:10.2f}"
        else:
            old = old_fit * n * n if old_fit else float("nan")
            old_text = f"~{old:9.0f}"
        lines.append(f"  {len(questions):>10,}  {len(findings):>8,}  {new:8.2f}  {old_text}  {old / new:7.0f}x")
    lines.append("  (~ = extrapolated from the largest measured old run: quadratic in the questions)")
    return lines


def timed_evaluation(goldset: Path, index: str, docs: str) -> tuple[int, dict[str, float]]:
    """Exit code and seconds per phase of one `eval_retrieval.main` run, phases timed by wrapping its steps."""
    import eval_retrieval as er
    from localrag.runs import rows as eval_runs, indexes
    from localrag.evaluation import scoring as ev
    from localrag.goldset import lint as goldset_lint

    seconds: dict[str, float] = {}

    def timed(module, name: str, phase: str) -> None:
        inner = getattr(module, name)

        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                seconds[phase] = seconds.get(phase, 0.0) + time.perf_counter() - started

        setattr(module, name, wrapper)

    timed(gs, "read_goldset", "read")
    # Each step wrapped where the run looks it up (localrag/runs/indexes.py, localrag/runs/rows.py).
    timed(indexes, "open_rag", "open index, load model")
    timed(indexes, "sync_pdf_index", "sync check")
    timed(goldset_lint, "lint_index", "lint")
    timed(eval_runs, "left_out_questions", "page check")
    timed(eval_runs, "fill_query_vectors", "embed questions, load the model")
    timed(ev, "retrieve_goldset", "retrieval (embed, retrieve, score)")
    timed(ev, "evaluate_goldset", "retrieval (embed, retrieve, score)")
    timed(eval_runs, "write_outputs", "write reports")
    started = time.perf_counter()
    code = er.main(["--goldset", str(goldset), "--index", index, "--docs", docs, "--no-rerank", "--no-compare",
                    "--quiet", "--report", str(goldset.with_suffix(".report.txt"))])
    seconds["total"] = time.perf_counter() - started
    return code, seconds


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from localrag.goldset import lint as goldset_lint

    if not (Path(args.index) / "index_info.json").exists():
        print(f"error: no sample index at {args.index}; build it with `python eval_retrieval.py`", file=sys.stderr)
        return 2
    from local_rag import LocalRAG

    rag = LocalRAG(args.index, reranker_model=None, quiet=True)
    docs = {d["source"]: goldset_lint.DocInfo(d["pages"], frozenset(d["empty_pages"])) for d in rag.list_documents()}
    chunks = index_chunks(args.index)
    sizes = [int(n) for n in args.lint_sizes.split(",") if n.strip()] + [args.questions]
    print("\n".join(lint_table(chunks, docs, sizes, args.old_max, args.seed)))
    if args.skip_eval:
        return 0
    goldset = write_goldset(OUT_DIR / f"scale-{args.questions}.csv", synthetic_rows(chunks, args.questions,
                                                                                    args.seed))
    code, seconds = timed_evaluation(goldset, args.index, args.docs)
    total = seconds.pop("total")
    print()
    print(f"Evaluation of a {args.questions:,}-row goldset on the sample corpus ({len(chunks)} chunks; the "
          f"embedding model already loaded), exit code {code}: {total:.1f} s")
    for phase, value in seconds.items():
        print(f"  {phase:<36}{value:9.1f} s  {100 * value / total:5.1f}%")
    rest = total - sum(seconds.values())
    print(f"  {'other (argument checks, summary)':<36}{rest:9.1f} s  {100 * rest / total:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
