"""Every command of README.md and docs/*.md runs as written, in a fresh copy of the project.

A ```bash block's lines are commands (a trailing `\\` continues a line, a heredoc runs to its end marker, `#` lines
are comments). Each runs through `bash -c` in one sandbox: the project's files (`git ls-files -co
--exclude-standard`) made into a git repository of one commit, with a `.venv` of its own (a virtual environment
that sees the packages of this test's), HOME a temporary folder with a tiny shelf at ~/papers, OPENAI_BASE_URL a
scripted stub server (tests/openai_stub.py), and no virtual environment on PATH: `python` is the system's until
README's activation line (ACTIVATE, right after its set-up commands) has run, and every command after it runs as in
a shell where it ran. Pages run in order, README first, so the sample index the first README command builds serves
every page.
A command must exit as its trailing comment says (`# exits 1`; 0 without one); a ```text block right after a
```bash block shows lines its last command prints, and they must appear (`…` stands for any text in a line).
Markers on the line before a block:
  <!-- bench -->              commands that need what this test has not (../shared/data, the local LLM, a
                              server, much time): their script must exist and its --help list every flag given;
  <!-- not run: REASON -->    a command that cannot run here (a server, an installation), with the reason.
After every page, `git status --porcelain` lists only eval/baseline.* files: nothing a documented command
writes lands untracked in the repository.
Adding a command to a page is all it takes to test it.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import write_pdf
from openai_stub import OpenAIStub, chat_completion

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
# README's set-up lines install into a new virtual environment; the sandbox has one already (this interpreter).
SETUP_PREFIX = "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt && "
# The test command of README's set-up: the suite this test belongs to, never run from inside it.
SUITE_COMMAND = ".venv/bin/python -m pytest -q tests"
# README's line after its set-up that makes every later `python` the environment's, as a user's shell runs it.
ACTIVATE = ". .venv/bin/activate"
MAX_NOT_RUN = 5
EXIT_COMMENT = re.compile(r"#\s*exits (\d+)\s*$")
MARKER = re.compile(r"^<!--\s*(bench|not run:\s*(.+?))\s*-->$")
HEREDOC = re.compile(r"<<-?\s*'?\"?([A-Za-z_]+)'?\"?")
COMMAND_TIMEOUT_S = 600

# The shelf of README's walkthrough (~/papers): the questions its goldset asks stand on these pages; "\n" starts a
# line (a numbered heading, for --generate's section questions).
SHELF = {
    "attention.pdf": [
        "Attention Is All You Need\nA sequence transduction model built on attention alone, without recurrence"
        " or convolution, trains faster and translates better than recurrent models.",
        "3.2 Scaled Dot-Product Attention\nThe dot products of the query with all keys are divided by the "
        "square root of the key dimension, because for large dimensions the dot products grow large and push "
        "the softmax into regions with extremely small gradients. Scaled dot-product attention is the "
        "attention function of every layer of the model, computed for all queries at once as matrix products.",
        "3.3 Multi-Head Attention\nMulti-head attention is a mechanism that runs several attention functions "
        "in parallel on learned projections of queries, keys and values, so the model attends to information "
        "from different representation subspaces at different positions. Eight heads of dimension 64 cost "
        "about as much as one head of full dimension."],
    "bm25.pdf": [
        "The Probabilistic Relevance Framework: BM25 and Beyond\nBM25 ranks documents by the frequency of "
        "query terms, saturated by the parameter k1, and by the inverse document frequency of each term in "
        "the collection.",
        "3.4 Document Length Normalisation\nThe parameter b controls how strongly the length of a document, "
        "relative to the average length, scales down its term frequencies; b = 0 switches normalisation off "
        "and b = 1 applies it fully. Verbose documents repeat terms without being more relevant, which the "
        "normalisation corrects.",
        "4.1 Field Weighting\nBM25F is a variant of BM25 that combines the term frequencies of several fields "
        "such as title, abstract and body with a weight per field before saturation, so that a title match "
        "counts more than a body match."],
}


@dataclass
class Command:
    page: str  # path relative to the project, e.g. "docs/goldsets.md"
    line: int  # 1-based line of the page where the command starts
    text: str  # as bash gets it (continuations joined, heredoc lines kept)
    kind: str  # "run", "bench", "not run" or "suite"
    reason: str = ""  # of a "not run" command
    exit_code: int = 0
    output: tuple[str, ...] = ()  # lines the page shows this command print

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def commands(text: str, page: str = "page.md") -> list[Command]:
    """The commands of a page's ```bash blocks, in order, with the output lines a ```text block after shows."""
    lines, found = text.splitlines(), []
    i, before, last = 0, "", ""  # the last non-blank line outside blocks; the language of the last block
    while i < len(lines):
        line = lines[i].strip()
        if not line.startswith("```"):
            before = line or before
            i += 1
            continue
        language, end = line[3:].strip(), lines.index("```", i + 1)
        if language == "text" and last == "bash" and found:
            found[-1].output = tuple(x for x in lines[i + 1:end] if x.strip())
        elif language == "bash":
            marker = MARKER.match(before)
            kind = "run" if not marker else "bench" if marker.group(1) == "bench" else "not run"
            found += _block(lines, i + 1, end, page, kind, marker.group(2) or "" if marker else "")
        last, before, i = language, "", end + 1
    return found


def _block(lines: list[str], i: int, end: int, page: str, kind: str, reason: str) -> list[Command]:
    found = []
    while i < end:
        start, command = i, lines[i]
        heredoc = HEREDOC.search(command) if not command.lstrip().startswith("#") else None
        while command.endswith("\\"):
            i += 1
            command = command[:-1] + lines[i].lstrip()
        if heredoc:
            while lines[i].strip() != heredoc.group(1):
                i += 1
                command += "\n" + lines[i]
        i += 1
        if not command.strip() or command.lstrip().startswith("#"):
            continue
        exits = EXIT_COMMENT.search(command.splitlines()[0])
        this_kind = "suite" if command.strip().endswith(SUITE_COMMAND) else kind
        found.append(Command(page, start + 1, command.strip(), this_kind, reason, int(exits.group(1)) if exits else 0))
    return found


def page_commands(path: Path) -> list[Command]:
    return commands(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())


ALL = [c for path in PAGES for c in page_commands(path)]


# ----------------------------------------------------------------------------- the extraction itself

def test_commands_are_read_as_bash_would_get_them():
    page = (
        "<!-- bench -->\n```bash\npython bench/speed.py --ndcg\n```\n\n"
        "Prose.\n\n```bash\n# a comment\npython a.py --x 1 \\\n    --y 2   # note\n"
        "cat > f.csv <<'EOF'\nq;a.pdf;2\n# not a comment inside a heredoc\nEOF\n"
        "python a.py --fail-under hit@5=0.99   # exits 1\n```\n\n```text\nhit@5 0.944\n```\n"
        "<!-- not run: needs a Chroma server -->\n```bash\nchroma run --path /srv/chroma\n```\n"
        "```python\nprint('not bash')\n```\n")
    found = commands(page)
    assert [(c.kind, c.text, c.exit_code, c.output) for c in found] == [
        ("bench", "python bench/speed.py --ndcg", 0, ()),
        ("run", "python a.py --x 1 --y 2   # note", 0, ()),
        ("run", "cat > f.csv <<'EOF'\nq;a.pdf;2\n# not a comment inside a heredoc\nEOF", 0, ()),
        ("run", "python a.py --fail-under hit@5=0.99   # exits 1", 1, ("hit@5 0.944",)),
        ("not run", "chroma run --path /srv/chroma", 0, ())]
    assert found[-1].reason == "needs a Chroma server"
    assert [c.line for c in found] == [3, 10, 12, 16, 24]


def test_every_page_has_commands_and_starts_with_what_it_answers():
    for path in PAGES[1:]:
        text = path.read_text(encoding="utf-8")
        assert text.startswith("# ") and text.splitlines()[1] == "", path.name
        assert text.splitlines()[2].strip(), f"{path.name}: one sentence saying what the page answers"
    assert len([c for c in ALL if c.kind == "run"]) >= 20


def test_every_link_between_pages_names_a_file_that_exists():
    broken = [(path.name, target) for path in PAGES
              for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8"))
              if not target.startswith(("http://", "https://")) and not (path.parent / target).exists()]
    assert broken == []


def test_readme_says_how_to_activate_right_after_its_set_up():
    # Its later commands say `python`, which only the environment the set-up made has the packages for (a newcomer
    # once got "No module named 'langchain_core'"); the sandbox runs each command after ACTIVATE as a shell would.
    first = page_commands(ROOT / "README.md")[:3]
    assert [c.text for c in first] == [SETUP_PREFIX + ".venv/bin/python eval_retrieval.py",
                                       SETUP_PREFIX + SUITE_COMMAND, ACTIVATE]
    assert [c.line for c in first] == [5, 7, 10]  # one block: nothing in between but its comment


def test_few_commands_are_not_run_and_each_says_why():
    not_run = [c for c in ALL if c.kind == "not run"]
    assert len(not_run) <= MAX_NOT_RUN, "\n".join(map(str, not_run))
    assert all(c.reason for c in not_run)
    assert [c.text for c in ALL if c.kind == "suite"] == [SETUP_PREFIX + SUITE_COMMAND]


def _script_and_flags(command: Command) -> tuple[str, list[str]]:
    words = shlex.split(command.text, comments=True)
    while words and re.match(r"^[A-Z_]+=", words[0]):  # VAR=value before the command
        words.pop(0)
    assert words[0] in ("python", ".venv/bin/python") and words[1].endswith(".py"), str(command)
    return words[1], [w.split("=", 1)[0] for w in words[2:] if w.startswith("--")]


def test_bench_commands_name_scripts_that_exist_with_flags_they_take():
    helps: dict[str, str] = {}
    bench = [c for c in ALL if c.kind == "bench"]
    assert bench
    for command in bench:
        script, flags = _script_and_flags(command)
        assert (ROOT / script).is_file(), str(command)
        if script not in helps:
            done = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT_S)
            assert done.returncode == 0, f"{script} --help: {done.stderr[-2000:]}"
            helps[script] = done.stdout
        unknown = [f for f in flags if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", helps[script])]
        assert unknown == [], f"{command}: {script} --help does not list {unknown}"


# ----------------------------------------------------------------------------- the sandbox

def _respond(request) -> tuple[int, dict, dict]:
    """A plausible reply to each prompt the documented commands send: answers cite their first passage, judges
    accept, --generate --llm gets a different question each time."""
    prompt = request.prompt()
    if prompt.startswith("localRAG answer prompt"):
        header = re.search(r"^\[([^\]\n]+)\]$", prompt.split("Passages:", 1)[1], flags=re.M)
        content = f"The passages answer it [{header.group(1)}]." if header else "I cannot answer this."
    elif prompt.startswith("localRAG correctness judge"):
        content = json.dumps({"verdict": "correct", "reason": "stub"})
    elif prompt.startswith("localRAG faithfulness judge"):
        sentences = re.findall(r"^\d+\. ", prompt.split("Sentences:", 1)[1], flags=re.M)
        content = json.dumps({"supported": [True] * len(sentences), "reason": "stub"})
    elif prompt.startswith("localRAG citation judge"):
        cited = re.findall(r"^\[[^\]\n]+\]$", prompt.split("Cited passages:", 1)[1], flags=re.M)
        content = json.dumps({"supported": True, "needed": [True] * len(cited), "reason": "stub"})
    elif '"answering"' in prompt:
        content = json.dumps({"answering": [1], "reason": "stub"})
    else:  # --generate --llm
        n = len(request_log)
        request_log.append(prompt)
        content = json.dumps({"question": QUESTIONS[n % len(QUESTIONS)]})
    return 200, chat_completion(content), {}


request_log: list[str] = []
QUESTIONS = ["Which quantity keeps the softmax gradients from vanishing?", "How are several heads combined?",
             "What saturates repeated term counts?", "Why normalise by document length?",
             "How does one weight title fields?", "What replaces recurrence in this model?",
             "Which parameter switches length scaling off?", "What do learned projections provide?"]


@dataclass
class Sandbox:
    repo: Path
    env: dict[str, str]
    ran: set[str]
    activated: bool = False  # README's ACTIVATE has run: later commands run in its environment


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    base = tmp_path_factory.mktemp("docs")
    repo, home = base / "localRAG", base / "home"
    names = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode("utf-8").split("\0")
    for name in filter(None, names):
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@example.org", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "fresh clone"]):
        subprocess.run(git + args, cwd=repo, check=True, capture_output=True)
    for name, pages in SHELF.items():
        write_pdf(home / "papers" / name, pages)
    _make_venv(repo / ".venv")
    with OpenAIStub(responder=_respond) as stub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PYTHON", "VIRTUAL_ENV"))}
        # No environment's bin on PATH (this test's may be activated): a bare `python` is what a new shell has.
        bins = {str(Path(sys.executable).parent), str(Path(sys.prefix) / "bin")}
        env.update(HOME=str(home), OPENAI_BASE_URL=stub.base_url, HF_HUB_OFFLINE="1", COLUMNS="120",
                   PATH=os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p not in bins))
        yield Sandbox(repo, env, set())


def _make_venv(folder: Path) -> None:
    """A virtual environment at `folder` as README's set-up makes one, whose packages are this test's (its
    site-packages added by a .pth file), so that nothing is installed."""
    import sysconfig
    import venv

    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    done = subprocess.run([str(folder / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True)
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    Path(done.stdout.strip(), "localrag-test-packages.pth").write_text(
        "".join(f"import site; site.addsitedir({path!r})\n" for path in ours), encoding="utf-8")


def _runnable(command: Command, activated: bool) -> str:
    text = command.text
    if text.startswith(SETUP_PREFIX):  # the sandbox's .venv has the packages already: no venv made, nothing installed
        text = text[len(SETUP_PREFIX):]
    return f"{ACTIVATE}\n{text}" if activated else text


def _shows(output: str, line: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in line.strip().split("…"))
    return any(re.search(pattern, got) for got in output.splitlines())


def run_page(box: Sandbox, page: str) -> None:
    if page in box.ran:
        return
    if page != "README.md":  # the pages read after README: its set-up and index first
        run_page(box, "README.md")
    box.ran.add(page)
    for command in page_commands(ROOT / page):
        if command.kind != "run":
            continue
        done = subprocess.run(["bash", "-c", _runnable(command, box.activated)], cwd=box.repo, env=box.env,
                              capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        box.activated = box.activated or command.text == ACTIVATE
        output = done.stdout + done.stderr
        assert done.returncode == command.exit_code, (
            f"{command}\nexit {done.returncode}, the page says {command.exit_code}\n{output[-3000:]}")
        missing = [line for line in command.output if not _shows(output, line)]
        assert missing == [], f"{command}\ndoes not print {missing}\n{output[-3000:]}"


@pytest.mark.parametrize("page", [p.relative_to(ROOT).as_posix() for p in PAGES])
def test_the_commands_of_each_page_run_as_written(sandbox, page):
    run_page(sandbox, page)


def test_a_fresh_clone_after_every_command_changes_only_the_baseline(sandbox):
    for path in PAGES:
        run_page(sandbox, path.relative_to(ROOT).as_posix())
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=sandbox.repo,
                            check=True, capture_output=True, text=True).stdout.splitlines()
    assert [line for line in status if not re.match(r"^ M eval/baseline\.[a-z.]+$", line)] == []
