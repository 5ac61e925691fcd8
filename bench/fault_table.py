"""The fault table of a user's own shelf: each case run as a user runs it, classified from outside.

Every case is a real command (`eval_retrieval.py`, `add_pdfs.py`, or a few lines of Python over `LocalRAG`) on a
copy of a shelf of PDFs with its index and goldset in a temporary folder. Before and after each command the
script takes the md5 of every file the user keeps (the goldset, the index, the reports, the committed baseline)
and classifies the outcome:

- `ok`: the case's expectation held (a refusal: non-zero exit and the expected words on stderr; a success: exit 0);
- `silently wrong`: exit 0 where the case must be refused, or a figure other than the expected one;
- `data lost`: a kept file changed or vanished;
- `traceback`: a Python traceback on stderr.

Run from the project folder: `python bench/fault_table.py --shelf FOLDER_OF_PDFS --goldset CSV`. The shelf's
index is built once in the temporary folder (minutes for a few hundred pages). Prints one row a case and the counts.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]  # after the interpreter: a script and its flags, or ["-c", CODE]
    refuse: bool  # the command must exit non-zero
    says: str = ""  # words its stderr (or stdout) must hold
    lacks: str = ""  # words it must not print
    opens_store: bool | None = None  # whether it rightly opens the index's Chroma store; default: when not refused
    cwd: Path | None = None  # default: the project folder


def md5s(paths: list[Path], engine_files: bool) -> dict[str, str]:
    """md5 of every file under `paths` (files or folders). A report's `Generated:` lines are left out (a run of
    the same configuration changes only them). Without `engine_files`, Chroma's own database and segment files
    are left out: Chroma rewrites their bytes whenever it opens a collection, reads included (measured on
    41b9496 too), so a run that opens the store is judged by the files this tool writes (manifest, vectors.npy,
    BM25 arrays)."""
    sums = {}
    for top in paths:
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file()) if top.exists() else []
        for f in files:
            if "lock" in f.name:  # a lock file's contents are a pid: not data
                continue
            if not engine_files and (f.name == "chroma.sqlite3" or f.parent.name.count("-") == 4):
                continue
            data = f.read_bytes()
            if f.name.startswith("baseline."):
                data = b"\n".join(line for line in data.split(b"\n") if b"enerated" not in line)
            sums[str(f)] = hashlib.md5(data).hexdigest()
    return sums


def run(case: Case, kept: list[Path], env: dict[str, str]) -> tuple[str, str]:
    engine_files = not (case.opens_store if case.opens_store is not None else not case.refuse)
    before = md5s(kept, engine_files)
    proc = subprocess.run([PYTHON, *case.argv], cwd=case.cwd or PROJECT, env=env, capture_output=True, text=True,
                          timeout=600)
    after = md5s(kept, engine_files)
    out = proc.stdout + proc.stderr
    changed = sorted(k for k in before if before[k] != after.get(k))
    if "Traceback (most recent call last)" in proc.stderr:
        return "traceback", proc.stderr.strip().splitlines()[-1][:120]
    if changed:
        return "data lost", f"changed: {', '.join(Path(c).name for c in changed[:3])}"
    if case.refuse and proc.returncode == 0:
        return "silently wrong", "exit 0 where a refusal was due"
    if not case.refuse and proc.returncode != 0:
        return "failed", f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1][:120] if proc.stderr else ''}"
    if case.says and case.says not in out:
        return "silently wrong", f"output lacks {case.says!r}"
    if case.lacks and case.lacks in out:
        return "silently wrong", f"output holds {case.lacks!r}"
    first = next((line for line in proc.stderr.splitlines() if line.startswith("error")), "")
    return "ok", f"exit {proc.returncode} {first[:150]}"


def cases(shelf: Path, index: Path, goldset: Path, tmp: Path) -> list[Case]:
    ev, add = str(PROJECT / "eval_retrieval.py"), str(PROJECT / "add_pdfs.py")
    g, i = str(goldset), str(index)
    base = ["--goldset", g, "--index", i, "--no-sync", "--quiet"]
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    labels = tmp / "labels.csv"
    labels.write_text("label,query_id\n1\n", encoding="utf-8")
    twice = tmp / "twice.csv"
    twice.write_text("query_id,label\nq1,1\nq1,0\n", encoding="utf-8")
    answers = tmp / "answers.jsonl"
    answers.write_text('{"question": "x", "answer": "y", "passages": []}\n', encoding="utf-8")
    rag = ("import sys\nfrom local_rag import LocalRAG, RAGError\ntry:\n"
           f"    print(len(LocalRAG({str(tmp / 'broken-index')!r}).retrieve('x', k=3)))\n"
           "except RAGError as exc:\n    sys.exit(f'error: {exc}')")
    tilde = f"from local_rag import LocalRAG; print(len(LocalRAG('~/{index.name}').retrieve('What is it?', k=3)))"
    twins, twins_index = str(tmp / "home" / "twins"), str(tmp / "home" / "twins-index")
    first = [(q, p) for q, _, f, p, *_ in (line.split(";") for line in goldset.read_text(encoding="utf-8")
                                            .splitlines()[1:]) if f == sorted(p.name for p in shelf.glob("*.pdf"))[0]]
    header = "question;corpus;expected_source;expected_page;note;answer\n"
    named, bare, formula = tmp / "named.csv", tmp / "bare.csv", tmp / "formula.csv"
    named.write_text(header + "".join(f"{q};twins;sub1/Same.pdf;{p};;\n" for q, p in first), encoding="utf-8")
    bare.write_text(header + "".join(f"{q};twins;Same.pdf;{p};;\n" for q, p in first), encoding="utf-8")
    formula.write_text(header + "".join(f"=HYPERLINK(\"http://x\",\"{q}\");shelf;-{f};{p};;\n"
                                        for q, _, f, p, *_ in (line.split(";") for line in
                                                               goldset.read_text(encoding="utf-8").splitlines()[1:3])),
                       encoding="utf-8")
    csv_out = tmp / "questions.csv"
    return [
        Case("two files of one name, path given", [ev, "--goldset", str(named), "--index", twins_index, "--no-sync",
                                                   "--report", str(tmp / "named.txt")], False, "Hit@1"),
        Case("two files of one name, bare name", [ev, "--goldset", str(bare), "--index", twins_index, "--no-sync",
                                                  "--report", str(tmp / "bare.txt")], True, "is ambiguous"),
        Case("two files of one name, bare, --lint", [ev, "--goldset", str(bare), "--index", twins_index, "--lint"],
             True, "write sub1/Same.pdf or sub2/Same.pdf", opens_store=True),
        Case("formula cells in --csv", ["-c", f"""
import subprocess, sys
r = subprocess.run([sys.executable, {ev!r}, "--goldset", {str(formula)!r}, "--index", {i!r}, "--no-sync", "--quiet",
                    "--report", {str(tmp / 'f.txt')!r}, "--csv", {str(csv_out)!r}])
cells = [c for line in open({str(csv_out)!r}, encoding="utf-8-sig") for c in line.split(",")]
bad = [c for c in cells if c.lstrip('"').startswith(("=", "+", "@")) or c.lstrip('"').startswith("-") and not
       c.lstrip('"-').replace(".", "").isdigit()]
print(f"{{len(bad)}} formula cells")
sys.exit(1 if bad else 0)"""], False, "0 formula cells"),
        Case("typo in --index", [ev, "--goldset", g, "--index", i + "-typo", "--quiet"], True, "no index there"),
        Case("typo in --index, --no-sync", [ev, "--goldset", g, "--index", i + "-typo", "--no-sync"], True),
        Case("typo in --index, --lint", [ev, "--goldset", g, "--index", i + "-typo", "--lint"], True),
        Case("typo in --goldset", [ev, "--goldset", g + "x", "--index", i], True),
        Case("typo in add_pdfs folder", [add, str(shelf) + "-typo", "--index", i], True),
        Case("--query-cache IDX/chroma.sqlite3", [ev, *base, "--query-cache", str(index / "chroma.sqlite3")], True),
        Case("--query-cache IDX/index_info.json", [ev, *base, "--query-cache", str(index / "index_info.json")], True),
        Case("--query-cache GOLDSET", [ev, *base, "--query-cache", g], True),
        Case("--judge-cache IDX/index_info.json", [ev, *base, "--judge", "openai:m",
                                                  "--judge-cache", str(index / "index_info.json")], True),
        Case("--judge-cache GOLDSET", [ev, *base, "--judge", "openai:m", "--judge-cache", g], True),
        Case("--csv/--html onto the baseline", [ev, *base, "--csv", "eval/baseline.json",
                                                "--html", "eval/baseline.txt"], True, "committed baseline"),
        Case("--csv onto the goldset", [ev, *base, "--csv", g], True),
        Case("--html inside the index", [ev, *base, "--html", str(index / "report.html")], True),
        Case("--report inside the docs folder", [ev, *base, "--report", str(shelf / "r.txt")], True),
        Case("--label-sample --out in docs", [ev, *base, "--label-sample", "3", "--out", str(shelf / "labels.pdf")],
             True),
        Case("--answer-labels short row", [ev, *base, "--answers", str(answers), "--answer-labels", str(labels)], True,
             "labels.csv"),
        Case("--answer-labels contradictory", [ev, *base, "--answers", str(answers), "--answer-labels", str(twice)], True,
             "is labelled 1 on line 2 and 0 on line 3"),
        Case("gate fails: exit 1, baseline kept", [ev, "--no-sync", "--quiet", "--fail-under", "mrr=0.99"], True),
        Case("LocalRAG on a 0-byte chroma.sqlite3", ["-c", rag], True, "chroma.sqlite3"),
        Case("LocalRAG('~/index')", ["-c", tilde], False, "3", cwd=elsewhere),
        Case("run from another folder, every path given", [ev, "--goldset", g, "--index", i, "--no-sync", "--report",
                                                          str(tmp / "r.txt")], False, cwd=elsewhere),
        Case("no profile suggestion", [ev, "--goldset", g, "--index", i, "--lint"], False, lacks="suggested profile"),
        Case("a plain run on the shelf", [ev, "--goldset", g, "--index", i, "--no-sync", "--report",
                                          str(tmp / "plain.txt")], False, "MRR"),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shelf", required=True, help="folder of PDFs (copied; never written)")
    p.add_argument("--goldset", required=True, help="its goldset (copied)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        home = tmp / "home"
        home.mkdir()
        shelf, index, goldset = home / "shelf", home / "shelf-index", home / "goldset.csv"
        shutil.copytree(args.shelf, shelf)
        shutil.copy(args.goldset, goldset)
        env = {**os.environ, "HOME": str(home), "LOCALRAG_CACHE": str(home / ".cache" / "localrag"),
               "PYTHONPATH": str(PROJECT)}  # as `pip install -e .` would, for the cases run from another folder
        subprocess.run([PYTHON, str(PROJECT / "add_pdfs.py"), str(shelf), "--index", str(index), "--quiet"],
                       env=env, check=True)
        twins = home / "twins"  # the shelf's two PDFs under one name in two folders
        for sub, pdf in zip(("sub1", "sub2"), sorted(shelf.glob("*.pdf"))):
            (twins / sub).mkdir(parents=True)
            shutil.copy(pdf, twins / sub / "Same.pdf")
        subprocess.run([PYTHON, str(PROJECT / "add_pdfs.py"), str(twins), "--index", str(home / "twins-index"),
                        "--quiet"], env=env, check=True)
        broken = tmp / "broken-index"
        shutil.copytree(index, broken)
        (broken / "chroma.sqlite3").write_bytes(b"")
        kept = [shelf, index, goldset, twins, home / "twins-index", PROJECT / "eval" / "baseline.txt", PROJECT / "eval" / "baseline.json",
                PROJECT / "eval" / "goldset.csv"]
        counts: dict[str, int] = {}
        for case in cases(shelf, index, goldset, tmp):
            verdict, detail = run(case, kept + ([broken] if "0-byte" in case.name else []), env)
            counts[verdict] = counts.get(verdict, 0) + 1
            print(f"{verdict:15} {case.name:45} {detail}", flush=True)
        leftovers = sorted(p.name for p in (tmp / "elsewhere").iterdir())
        print(f"files left in the other working folder: {leftovers or 'none'}")
        print("counts: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        return 0 if set(counts) <= {"ok"} and not leftovers else 1


if __name__ == "__main__":
    sys.exit(main())
