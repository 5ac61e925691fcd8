"""The figure check (localrag/evaluation/figures.py) over FinanceBench's reference answers.

Each reference answer of `financebench_dev.jsonl` is checked against itself (every reference that states figures
must pass: the check may not miss a number it reads) and against its `justification` field, FinanceBench's own
explanation, which states the inputs and often the result of the calculation. Printed: how many references state
figures, how many pass against themselves (and which do not: exit status 1), how many justifications state all,
some or none of their reference's figures, and each reference whose justification misses a figure, with what it
misses. Run from the repository root:

    python bench/figure_check.py [--data ../shared/data/financebench/financebench_dev.jsonl]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from localrag.cli import HelpFormatter  # noqa: E402 - the repository root is on sys.path above
from localrag.evaluation.figures import check_figures, reference_figures  # noqa: E402

DATA = REPO_ROOT.parent / "shared" / "data" / "financebench" / "financebench_dev.jsonl"
EXCERPT_CHARS = 90  # characters of a justification shown beside a miss


def read_items(path: Path) -> list[dict]:
    """The JSON objects of a JSONL file, one a line."""
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def excerpt(text: str) -> str:
    """``text`` on one line, cut to EXCERPT_CHARS."""
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS - 1] + "…"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="FinanceBench JSONL with answer and justification")
    args = parser.parse_args()
    if not args.data.is_file():
        print(f"error: {args.data} not found (the shared FinanceBench data); give its path with --data",
              file=sys.stderr)
        return 2
    items = read_items(args.data)
    stating = [item for item in items if reference_figures(item["answer"])]
    self_failures = [item for item in stating if not check_figures(item["answer"], item["answer"]).passed]
    justified = [item for item in stating if item.get("justification")]
    checks = {item["financebench_id"]: check_figures(item["answer"], item["justification"]) for item in justified}
    all_found = sum(check.passed for check in checks.values())
    none_found = sum(not check.found for check in checks.values())
    print(f"references: {len(items)}")
    print(f"stating figures: {len(stating)} ({sum(len(reference_figures(i['answer'])) for i in stating)} figures); "
          f"not applicable: {len(items) - len(stating)}")
    print(f"pass against themselves: {len(stating) - len(self_failures)} of {len(stating)}")
    for item in self_failures:
        print(f"  FAILS: {item['financebench_id']}: {excerpt(item['answer'])}")
    print(f"with a justification: {len(justified)}; it states all figures: {all_found}, some: "
          f"{len(justified) - all_found - none_found}, none: {none_found}")
    for item in justified:
        check = checks[item["financebench_id"]]
        if check.missing:
            missing = ", ".join(figure.text for figure in check.missing)
            print(f"  {item['financebench_id']}: misses {missing} in: {excerpt(item['justification'])}")
    return 1 if self_failures else 0


if __name__ == "__main__":
    sys.exit(main())
