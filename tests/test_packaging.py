"""The project from outside its folder: `pip install -e .` (pyproject.toml) makes local_rag and localrag (with
its sub-packages) importable anywhere, the CLIs stay scripts of the project folder (the console commands run
them), README's Python example runs from another folder, and the scripts started elsewhere with a
default path stop with "run from the project folder X" instead of a wrong "not found"."""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import add_pdfs
import eval_retrieval as er
import local_rag
from test_chat import readme_example

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_installs_the_face_and_the_package_with_the_pinned_requirements():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = project["tool"]["setuptools"]
    assert setuptools["py-modules"] == ["local_rag"]  # eval_retrieval and add_pdfs are no modules to import
    assert setuptools["packages"] == {"find": {"include": ["localrag*"]}}  # every sub-package, nothing else
    assert project["project"]["dynamic"] == ["dependencies"]
    assert project["tool"]["setuptools"]["dynamic"]["dependencies"] == {"file": ["requirements.txt"]}
    assert project["build-system"]["build-backend"] == "setuptools.build_meta"


def test_the_console_commands_run_the_project_scripts(tmp_path, monkeypatch, capsys):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["scripts"] == {"localrag-eval": "local_rag:eval_command",
                                             "localrag-add": "local_rag:add_command"}
    for command, usage in ((local_rag.eval_command, "usage: eval_retrieval.py"),
                           (local_rag.add_command, "usage: add_pdfs.py")):
        monkeypatch.setattr(sys, "argv", ["localrag-x", "--help"])
        with pytest.raises(SystemExit) as done:
            command()
        assert done.value.code == 0
        assert capsys.readouterr().out.startswith(usage)
    # Installed without the project folder: a clear error, exit 2.
    monkeypatch.setattr(local_rag, "PROJECT_DIR", tmp_path)
    with pytest.raises(SystemExit) as done:
        local_rag.run_script("eval_retrieval.py", ["--help"])
    assert done.value.code == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'eval_retrieval.py'} is not there: the commands run the scripts of a localRAG project "
        f"folder; install it with `pip install -e .` from that folder, or run `python eval_retrieval.py` there\n")


def test_the_readme_python_example_runs_from_another_folder(tiny_index, tmp_path):
    """As after `pip install -e .`: the project on the import path, the working folder elsewhere. The example
    opens `local_rag.PROJECT_DIR / local_rag.VECTORSTORE_PATH`; here that setting names the tiny index (an
    absolute path, which the join keeps), as a fresh clone has no index yet."""
    _, index = tiny_index
    example = readme_example()
    assert "LocalRAG(local_rag.PROJECT_DIR / local_rag.VECTORSTORE_PATH)" in example
    script = f"import local_rag\nlocal_rag.VECTORSTORE_PATH = {str(index)!r}\n" + example
    elsewhere = tmp_path / "chat_app"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], cwd=elsewhere, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("  options.pdf, page 1")  # "What does vega measure?": the options text ranks first
    assert "[options.pdf, page 1]" in done.stdout  # the chain's context and the tool's reply carry citations
    assert list(elsewhere.iterdir()) == []  # nothing written where it ran


def test_the_evaluation_from_another_folder_says_run_from_the_project_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert er.main(["--no-rerank"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"error: run from the project folder {ROOT} (cd {ROOT}): the default goldset "
                              f"eval/goldset.csv is read from the working folder, and {tmp_path.resolve()} has none; "
                              f"or give --goldset\n")
    assert list(tmp_path.iterdir()) == []


def test_the_evaluation_from_another_folder_with_its_paths_given_runs(tiny_index, tmp_path, monkeypatch, capsys):
    docs, index = tiny_index
    (tmp_path / "gold.csv").write_text("question,expected_source,expected_page\n"
                                       "What does vega measure?,options.pdf,2\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert er.main(["--goldset", "gold.csv", "--index", str(index), "--docs", str(docs), "--no-sync",
                    "--no-rerank", "--quiet", "--report", "r.txt"]) == 0
    assert "Hit@5 1.000" in capsys.readouterr().out


def test_add_pdfs_from_another_folder_says_run_from_the_project_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert add_pdfs.main(["--quiet"]) == 2
    # The default index comes first; a fresh clone has none yet, so there the docs folder is named.
    what, path, flag = (("index", "eval/index", "--index") if (ROOT / "eval" / "index").exists()
                        else ("docs folder", "eval/docs", "a folder of PDFs"))
    assert capsys.readouterr().err == (f"error: run from the project folder {ROOT} (cd {ROOT}): the default {what} "
                                       f"{path} is read from the working folder, and {tmp_path.resolve()} has none; "
                                       f"or give {flag}\n")
    assert list(tmp_path.iterdir()) == []
