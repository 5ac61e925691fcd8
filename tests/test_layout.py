"""The layout's rules, read from the source (README, "How the code is laid out"):

- README's layout lists every module of the package, each once;
- eval_retrieval.py stays the settings, the parser and the story (at most 700 lines, no function but
  build_parser over 60); no class in localrag/ over 400 lines, no function over 80;
- the package never imports a root script;
- the retriever side (local_rag.py and every package module it reaches) never imports goldset, evaluation or
  judge code;
- nothing under localrag/ names a path under eval/ (the root scripts pass such paths in);
- the package is one level deep; the root scripts import each other only through local_rag.py, the face.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "localrag"
ROOT_SCRIPTS = {"local_rag", "eval_retrieval", "add_pdfs"}
# llm.py is a plain OpenAI-compatible client that knows nothing of its callers: the judge and the LLM reranker share it.
EVALUATION_SIDE = {"goldset", "lint", "noise", "generate", "evaluate", "result", "report", "judge", "suite",
                   "stats", "metrics", "datasets", "downloads", "eval_defaults", "eval_options", "eval_runs",
                   "outputs", "run_plan", "run_index", "configuration"}


def imports(path: Path) -> set[str]:
    """Top-level names of every module `path` imports, anywhere in the file; localrag.X counts as X's own name
    prefixed 'localrag.'."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x / from .x import y
                base = "localrag" + (f".{node.module}" if node.module else "")
            else:
                base = node.module or ""
            if base == "localrag":
                found.update(f"localrag.{alias.name}" for alias in node.names)
            else:
                found.add(base)
    return found


def package_imports(path: Path) -> set[str]:
    return {name.split(".")[1] for name in imports(path) if name.startswith("localrag.")}


def test_the_package_never_imports_a_root_script():
    offenders = {p.name: sorted(imports(p) & ROOT_SCRIPTS) for p in PACKAGE.glob("*.py")}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_retriever_side_never_reaches_evaluation_code():
    reached, todo = set(), list(package_imports(ROOT / "local_rag.py"))
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo += package_imports(PACKAGE / f"{name}.py")
    assert reached & EVALUATION_SIDE == set()
    assert {"index", "retriever", "pdf", "models"} <= reached  # the walk did follow the face's imports


def test_the_package_names_no_path_under_eval():
    eval_path = re.compile(r"^\.?/?eval(/|$)")
    offenders = []
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        offenders += [f"{path.name}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and isinstance(node.value, str)
                      and id(node) not in docstrings and eval_path.match(node.value)]
        offenders += [f"{path.name}:{node.lineno}: __file__" for node in ast.walk(tree)
                      if isinstance(node, ast.Name) and node.id == "__file__"]
    assert offenders == []


def test_the_package_is_one_level_deep_and_root_scripts_meet_only_at_the_face():
    assert [p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"] == []
    for script in ROOT_SCRIPTS - {"local_rag"}:
        assert imports(ROOT / f"{script}.py") & ROOT_SCRIPTS <= {"local_rag"}, script


def test_readme_lists_every_module_of_the_package_once():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## How the code is laid out"):]
    tree = section[section.index("```\n") + 4:]
    tree = tree[:tree.index("```")]
    listed = re.findall(r"^  ([a-z_0-9]+\.py) ", tree, re.M)
    assert sorted(listed) == sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(listed) == len(set(listed))


def sizes(path: Path) -> list[tuple[str, str, int]]:
    """(kind, name, lines) of every function and class in `path`, nested ones included."""
    return [(type(node).__name__, node.name, node.end_lineno - node.lineno + 1)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def test_the_script_reads_as_settings_parser_and_story():
    script = ROOT / "eval_retrieval.py"
    assert len(script.read_text(encoding="utf-8").splitlines()) <= 700
    assert [(name, n) for kind, name, n in sizes(script) if n > 60 and name != "build_parser"] == []


def test_no_class_or_function_of_the_package_is_a_house_of_its_own():
    too_big = [f"{path.name}: {kind} {name} ({n} lines)" for path in sorted(PACKAGE.glob("*.py"))
               for kind, name, n in sizes(path) if n > (400 if kind == "ClassDef" else 80)]
    assert too_big == []


def test_the_rule_checks_can_fail(tmp_path):
    """The import reader sees function-level and relative imports, which is where a layer break would hide."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from . import judge\n    import eval_retrieval\n", encoding="utf-8")
    assert imports(module) == {"localrag.judge", "eval_retrieval"}
    module.write_text("class C:\n    def g(self):\n" + "        x = 1\n" * 81, encoding="utf-8")
    assert sizes(module) == [("ClassDef", "C", 83), ("FunctionDef", "g", 82)]
