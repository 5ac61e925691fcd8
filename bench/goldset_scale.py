"""Goldset scale: lint time (new vs. the old all-pairs near-duplicate check) and the read / lint / retrieval split
of a whole evaluation of a synthetic goldset on the sample corpus; with --figures, issue 52's figures of a goldset
of near-identical template questions, each command in a process of its own.

  python bench/goldset_scale.py                                  # 100,000 questions, lint sizes 1k/2k/4k
  python bench/goldset_scale.py --questions 20000 --old-max 2000 # smaller and faster
  python bench/goldset_scale.py --figures --questions 20000      # lint output, reports per question, peak memory

Questions are drawn, seeded, from the chunks of the sample index (eval/index, built from eval/docs by
`python eval_retrieval.py`): each names the chunk's file and page and takes 5-10 words of its text, so the
goldset is clean (valid files and pages) but for the near-duplicates planted in it (one question in
50). The evaluation is the CLI itself (`eval_retrieval.main`, --no-rerank --no-compare --quiet) with its phases
timed from outside.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
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
# --figures: questions come in groups of a template asked of GROUP_SIZE items, each two of a group differing in one
# word of ten (Jaccard 9/11 >= 0.8): 20,000 rows give ~2.3 million near-identical pairs, as issue 52's goldset did.
GROUP_SIZE = 234
BASELINE_QUESTIONS = 200  # the run whose report size per question the large run's is measured against
# Goals of issue 52 for the 20,000-row goldset.
GOALS = {"lint stdout bytes": 1_000_000, "lint seconds": 20, "report bytes per question vs 200": 5.0,
         "peak RSS MB": 1536}


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
    p.add_argument("--figures", action="store_true",
                   help=f"issue 52's figures instead: --lint's stdout bytes, seconds and peak memory on a goldset of "
                        f"--questions near-identical template questions (groups of {GROUP_SIZE}), then an "
                        f"evaluation of it and of {BASELINE_QUESTIONS} of its rows: seconds, peak memory, report "
                        f"and JSON bytes per question; each in a fresh process, the load average beside")
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


def template_rows(chunks: list[tuple[str, int, str]], n: int, seed: int) -> list[tuple[str, str, int]]:
    """n (question, source, page) rows in groups of GROUP_SIZE: a group asks one template of 9 words of a random
    chunk about GROUP_SIZE items ("item1", ...), so any two questions of a group are near-identical (one word of
    ten differs) and questions of two groups are not."""
    rng = random.Random(seed)
    words = [sorted(set(WORD.findall(text.casefold()))) for _, _, text in chunks]
    usable = [c for c, found in enumerate(words) if len(found) >= 8]
    rows: list[tuple[str, str, int]] = []
    while len(rows) < n:
        c = rng.choice(usable)
        template = " ".join(rng.sample(words[c], 8))
        for item in range(1, min(GROUP_SIZE, n - len(rows)) + 1):
            rows.append((f"Which {template} item{item}?", chunks[c][0], chunks[c][1]))
    return rows


def write_goldset(path: Path, rows: list[tuple[str, str, int]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    gs.write_goldset_csv(path, (gs.GoldsetRow(question, "", source, page, "") for question, source, page in rows))
    return path


def lint_seconds(questions, docs, old: bool) -> tuple[float, list]:
    """(seconds, findings) of lint_goldset; old=True swaps in the all-pairs near-duplicate check."""
    from localrag.goldset import lint as goldset_lint

    fast = goldset_lint.near_duplicate_groups
    if old:
        goldset_lint.near_duplicate_groups = lambda texts, **_: groups_of(
            len(texts), goldset_lint.near_duplicate_pairs_brute_force(texts))
    try:
        started = time.perf_counter()
        findings = goldset_lint.lint_goldset(questions, [], docs)
        return time.perf_counter() - started, findings
    finally:
        goldset_lint.near_duplicate_groups = fast


def groups_of(n: int, pairs: list[tuple[int, int]]) -> list[list[int]]:
    """The connected sets of two or more of range(n) that `pairs` link (near_duplicate_groups from all pairs)."""
    linked = {i: {i} for i in range(n)}
    for i, j in pairs:
        if linked[i] is not linked[j]:
            merged = linked[i] | linked[j]
            for k in merged:
                linked[k] = merged
    return sorted(sorted(group) for group in {id(group): group for group in linked.values() if len(group) > 1}.values())


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


def measured(command: list[str], stdout: Path) -> dict[str, float]:
    """Exit code, wall seconds, peak RSS (MB, of the process and the children it waited for) and the load average
    before and after of one command in a process of its own, its stdout written to `stdout`."""
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    with open(stdout, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, cwd=ROOT)
        _, status, usage = os.wait4(process.pid, 0)  # the rusage of this child alone
        process.returncode = os.waitstatus_to_exitcode(status)
    return {"exit": process.returncode, "seconds": time.perf_counter() - started,
            "peak_mb": usage.ru_maxrss / 1024, "load_before": load_before, "load_after": os.getloadavg()[0]}


def figures(args, chunks: list[tuple[str, int, str]]) -> list[str]:
    """Issue 52's figures of a goldset of --questions near-identical template questions: --lint, then an
    evaluation of it and of BASELINE_QUESTIONS of its rows (every n-th), each in a fresh process."""
    rows = template_rows(chunks, args.questions, args.seed)
    large = write_goldset(OUT_DIR / f"templates-{args.questions}.csv", rows)
    # The baseline's rows spread evenly over the large goldset: its groups, files and pages in the same shares.
    step = max(1, len(rows) // BASELINE_QUESTIONS)
    small = write_goldset(OUT_DIR / f"templates-{BASELINE_QUESTIONS}.csv", rows[::step][:BASELINE_QUESTIONS])
    common = ["--index", args.index, "--docs", args.docs, "--no-sync", "--no-rerank", "--quiet"]
    script = [sys.executable, str(ROOT / "eval_retrieval.py")]
    lint_out = OUT_DIR / f"templates-{args.questions}.lint.txt"
    lint = measured([*script, "--lint", "--goldset", str(large), *common], lint_out)
    lines = [f"Goldset of {args.questions:,} rows: {len(rows) // GROUP_SIZE} groups of {GROUP_SIZE} near-identical "
             f"questions (and one of {len(rows) % GROUP_SIZE}), {len(chunks)} chunks in the sample index",
             f"  {'command':<26}{'exit':>5}{'seconds':>9}{'peak MB':>9}{'stdout bytes':>14}{'load avg':>14}"]

    def row(name: str, figures_: dict, out_bytes: int) -> str:
        load = f"{figures_['load_before']:.1f}-{figures_['load_after']:.1f}"
        return (f"  {name:<26}{figures_['exit']:>5}{figures_['seconds']:>9.1f}{figures_['peak_mb']:>9.0f}"
                f"{out_bytes:>14,}{load:>14}")

    lines.append(row("--lint", lint, lint_out.stat().st_size))
    sizes = {}
    peak = lint["peak_mb"]
    for goldset, count in ((small, BASELINE_QUESTIONS), (large, args.questions)):
        report = goldset.with_suffix(".report.txt")
        run = measured([*script, "--goldset", str(goldset), *common, "--no-compare", "--no-query-cache",
                        "--report", str(report)], OUT_DIR / f"{goldset.stem}.stdout.txt")
        lines.append(row(f"evaluation, {count:,} rows", run, (OUT_DIR / f"{goldset.stem}.stdout.txt").stat().st_size))
        sizes[count] = [path.stat().st_size if path.exists() else 0 for path in
                        (report, report.with_suffix(".json"), report.with_suffix(".details.md"))]
        peak = max(peak, run["peak_mb"])
    lines.append("")
    lines.append(f"  {'bytes (per question)':<26}{'report':>22}{'JSON':>22}{'details':>22}")
    for count, files in sizes.items():
        lines.append(f"  {f'{count:,} questions':<26}" + "".join(f"{f'{size:,} ({size / count:,.0f})':>22}"
                                                              for size in files))
    ratio = max(sizes[args.questions][i] / args.questions / (sizes[BASELINE_QUESTIONS][i] / BASELINE_QUESTIONS)
                for i in range(3) if sizes[BASELINE_QUESTIONS][i])
    measured_ = {"lint stdout bytes": lint_out.stat().st_size, "lint seconds": lint["seconds"],
                 "report bytes per question vs 200": ratio, "peak RSS MB": peak}
    lines.append("")
    lines.append("  goal                                   measured        goal  met")
    for goal, limit in GOALS.items():
        lines.append(f"  {goal:<36}{measured_[goal]:>11,.1f}{limit:>12,}  {'yes' if measured_[goal] <= limit else 'NO'}")
    return lines


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
    if args.figures:
        print("\n".join(figures(args, chunks)))
        return 0
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
