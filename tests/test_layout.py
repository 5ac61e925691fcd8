"""The layout's rules, read from the source with ast (docs/layout.md, "How the code is laid out").

The package's import graph counts every import: at module level and inside functions, under TYPE_CHECKING,
relative ones, and `from package import name` where the name is a module. On that graph:
- no import cycle between modules, and no import chain longer than MAX_CHAIN modules;
- every module lives in a declared unit (a top-level module or a folder one level deep), and each unit imports
  only the units before it in ORDER; search, index and retrieval never reach evaluation, goldset or runs, and
  neither does the retriever's face, local_rag.py;
- each folder's __init__.py is one docstring that imports nothing;
- the package never imports a root script; the root scripts meet only at local_rag.py, the face;
- no parameter in the package is an argparse Namespace; no function takes more than MAX_PARAMETERS (self and
  cls not counted) but the compatibility layer;
- nothing under localrag/ names a path under eval/; no class over 400 lines, no function over 80;
  eval_retrieval.py stays the settings, the parser and the story; docs/layout.md lists every module once.

`python tests/test_layout.py [PROJECT_ROOT]` prints what each rule finds in another checkout.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "localrag"
ROOT_SCRIPTS = {"local_rag", "eval_retrieval", "add_pdfs"}
# The units from the bottom up: top-level modules, then folders. A unit may import only the units before it.
ORDER = ("errors", "files", "progress", "settings", "cli",
         "models", "search", "text", "datasets",
         "index", "retrieval", "goldset", "evaluation", "runs")
RETRIEVER_SIDE = {"search", "index", "retrieval"}
EVALUATION_SIDE = {"evaluation", "goldset", "runs"}
MAX_CHAIN = 8
MAX_PARAMETERS = 8
# None: the compatibility layer of LocalRAG's old keyword arguments (wide on purpose) lives in local_rag.py, outside
# the package.
WIDE_ALLOWED: set[tuple[str, str]] = set()


# ----------------------------------------------------------------------------- the import graph

def modules(root: Path) -> dict[str, Path]:
    """Every module of the package under `root` by dotted name; a folder's __init__.py is the folder's name."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported_names(path: Path, name: str) -> set[str]:
    """Absolute dotted names of everything the module `name` (at `path`) imports, anywhere in its source: for
    `from a.b import c` both a.b and a.b.c, since c may be a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x, from ..search import bm25
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports. A name resolves to the longest module it names; a folder's
    __init__ counts only where the name is no module of it, and a module's own folders never count."""
    mods = modules(root)
    graph = {}
    for name, path in mods.items():
        targets = set()
        for imported in imported_names(path, name):
            while imported and imported not in mods:
                imported = imported.rpartition(".")[0]
            if imported and imported != name and not name.startswith(imported + "."):
                targets.add(imported)
        # `from localrag.search import bm25` names the folder and its module: the module is the import.
        graph[name] = {t for t in targets if not any(o.startswith(t + ".") for o in targets)
                       or mods[t].name != "__init__.py"}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest chain of imports, as the modules on it from the importer down. A cycle is walked once: its
    modules count as one stop each, named together as {a, b}."""
    group = {v: v for v in graph}
    for component in cycles(graph):
        for v in component:
            group[v] = "{" + ", ".join(component) + "}"
    size = {g: g.count(", ") + 1 if g.startswith("{") else 1 for g in group.values()}
    down = {g: set() for g in group.values()}
    for v, targets in graph.items():
        down[group[v]].update(group[t] for t in targets if t in group and group[t] != group[v])
    best: dict[str, list[str]] = {}

    def chain(g: str) -> list[str]:
        if g not in best:
            tails = [chain(t) for t in sorted(down[g])]
            best[g] = [g] + max(tails, key=lambda c: sum(size[x] for x in c), default=[])
        return best[g]

    chains = [chain(g) for g in sorted(down)]
    return max(chains, key=lambda c: sum(size[x] for x in c), default=[])


def chain_length(chain: list[str]) -> int:
    return sum(stop.count(", ") + 1 for stop in chain)


def unit(module: str) -> str:
    """The unit a module lives in: its folder, or the top-level module itself ('' for the package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def reached(graph: dict[str, set[str]], start: set[str]) -> set[str]:
    """Every module imported from `start`, directly or through others."""
    seen, todo = set(), list(start)
    while todo:
        v = todo.pop()
        if v not in seen:
            seen.add(v)
            todo += graph.get(v, ())
    return seen


# ----------------------------------------------------------------------------- the rules, each a list of offenders

def undeclared_modules(root: Path) -> list[str]:
    """Modules outside the declared units, or in a folder inside a folder."""
    return [name for name in modules(root) if name != PACKAGE
            and (unit(name) not in ORDER or name.count(".") > 2)]


def upward_imports(graph: dict[str, set[str]], order: tuple[str, ...] = ORDER) -> list[str]:
    """Imports of a unit after the importer's own in `order`."""
    rank = {u: i for i, u in enumerate(order)}
    return [f"{v} -> {t}" for v in sorted(graph) for t in sorted(graph[v])
            if unit(v) in rank and unit(t) in rank and rank[unit(t)] > rank[unit(v)]]


def retriever_side_reaching_evaluation(graph: dict[str, set[str]], root: Path) -> list[str]:
    """Modules of search, index, retrieval, and the face local_rag.py's imports, that reach evaluation, goldset
    or runs code."""
    face = {n for n in (imported_names(root / "local_rag.py", "local_rag") if (root / "local_rag.py").exists()
                        else ()) if n in graph}
    starts = {v: {v} for v in graph if unit(v) in RETRIEVER_SIDE} | {"local_rag.py": face}
    return [f"{v} reaches {', '.join(bad)}" for v, start in sorted(starts.items())
            if (bad := sorted(m for m in reached(graph, start) if unit(m) in EVALUATION_SIDE))]


def busy_inits(root: Path) -> list[str]:
    """Folder __init__.py files that hold more than one docstring."""
    offenders = []
    for name, path in modules(root).items():
        if path.name == "__init__.py" and name != PACKAGE:
            body = ast.parse(path.read_text(encoding="utf-8")).body
            if not (len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                offenders.append(name)
    return offenders


def root_script_imports(root: Path) -> list[str]:
    """Package modules that import a root script."""
    return [f"{name} imports {', '.join(found)}" for name, path in modules(root).items()
            if (found := sorted({n.split(".")[0] for n in imported_names(path, name)} & ROOT_SCRIPTS))]


def functions(root: Path):
    """(module, qualified name, FunctionDef) of every function and method in the package, nested ones too."""
    for name, path in modules(root).items():
        def walk(node: ast.AST, prefix: str):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield name, prefix + child.name, child
                    yield from walk(child, prefix + child.name + ".")
                elif isinstance(child, ast.ClassDef):
                    yield from walk(child, prefix + child.name + ".")
                else:
                    yield from walk(child, prefix)
        yield from walk(ast.parse(path.read_text(encoding="utf-8")), "")


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    a = node.args
    return a.posonlyargs + a.args + a.kwonlyargs + [p for p in (a.vararg, a.kwarg) if p]


def namespace_parameters(root: Path) -> list[str]:
    return [f"{module}.{qualname}({p.arg})" for module, qualname, node in functions(root)
            for p in parameters(node) if p.annotation is not None and "Namespace" in ast.unparse(p.annotation)]


def wide_functions(root: Path) -> list[str]:
    """Functions with more than MAX_PARAMETERS named parameters (self, cls, *args and **kwargs not counted)."""
    found = []
    for module, qualname, node in functions(root):
        a = node.args
        named = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg not in ("self", "cls")]
        if len(named) > MAX_PARAMETERS and (unit(module), qualname) not in WIDE_ALLOWED:
            found.append(f"{module}.{qualname} ({len(named)})")
    return found


def eval_paths(root: Path) -> list[str]:
    """Strings of the package (docstrings aside) that name a path under eval/, and every use of __file__."""
    eval_path = re.compile(r"^\.?/?eval(/|$)")
    offenders = []
    for name, path in modules(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        offenders += [f"{name}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and isinstance(node.value, str)
                      and id(node) not in docstrings and eval_path.match(node.value)]
        offenders += [f"{name}:{node.lineno}: __file__" for node in ast.walk(tree)
                      if isinstance(node, ast.Name) and node.id == "__file__"]
    return offenders


def sizes(path: Path) -> list[tuple[str, str, int]]:
    """(kind, name, lines) of every function and class in `path`, nested ones included."""
    return [(type(node).__name__, node.name, node.end_lineno - node.lineno + 1)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def too_big(root: Path) -> list[str]:
    return [f"{name}: {kind} {what} ({n} lines)" for name, path in modules(root).items()
            for kind, what, n in sizes(path) if n > (400 if kind == "ClassDef" else 80)]


def readme_listing(readme: str) -> list[str]:
    """The package's modules the layout page (docs/layout.md) lists, as paths under localrag/ ('search/bm25.py'): an
    entry is written as a path, or indented under its folder's line ('  search/' then '    bm25.py')."""
    section = readme[readme.index("# How the code is laid out"):]
    tree = section[section.index("```\n") + 4:]
    tree = tree[:tree.index("```")].splitlines()
    start = tree.index(f"{PACKAGE}/") + 1
    listed, folders = [], []  # folders: (indent, "search/") of the open folder lines
    for line in tree[start:]:
        entry = re.match(r"^( *)((?:[a-z_0-9]+/)*(?:[a-z_0-9]+\.py|[a-z_0-9]+/))(?:  |$)", line)
        if not line.startswith(" "):
            break
        if not entry:
            continue
        indent, name = len(entry.group(1)), entry.group(2)
        folders = [(i, f) for i, f in folders if i < indent]
        if name.endswith("/"):
            folders.append((indent, name))
        else:
            listed.append("".join(f for _, f in folders) + name)
    return listed


# ----------------------------------------------------------------------------- the tests

def test_no_import_cycle_between_modules():
    assert cycles(import_graph(ROOT)) == []


def test_the_longest_import_chain_has_at_most_8_modules():
    chain = longest_chain(import_graph(ROOT))
    assert chain_length(chain) <= MAX_CHAIN, " -> ".join(chain)


def test_every_module_lives_in_a_declared_unit_one_level_deep():
    assert undeclared_modules(ROOT) == []


def test_each_unit_imports_only_the_units_before_it():
    assert upward_imports(import_graph(ROOT)) == []


def test_search_index_retrieval_and_the_face_never_reach_evaluation_goldset_or_runs():
    graph = import_graph(ROOT)
    assert retriever_side_reaching_evaluation(graph, ROOT) == []
    face = {unit(m) for m in reached(graph, imported_names(ROOT / "local_rag.py", "local_rag") & set(graph))}
    assert {"text", "models", "index", "retrieval"} <= face  # the walk did follow the face's imports


def test_each_folder_init_is_a_docstring_that_imports_nothing():
    assert busy_inits(ROOT) == []


def test_the_package_never_imports_a_root_script():
    assert root_script_imports(ROOT) == []


def test_root_scripts_meet_only_at_the_face():
    for script in ROOT_SCRIPTS:
        names = {n.split(".")[0] for n in imported_names(ROOT / f"{script}.py", script)}
        assert names & ROOT_SCRIPTS <= ({"local_rag"} if script != "local_rag" else set()), script


def test_no_parameter_of_the_package_is_an_argparse_namespace():
    assert namespace_parameters(ROOT) == []


def test_no_function_of_the_package_takes_more_than_8_parameters_but_the_compatibility_layer():
    assert wide_functions(ROOT) == []


def test_the_package_names_no_path_under_eval():
    assert eval_paths(ROOT) == []


def test_no_class_or_function_of_the_package_is_a_house_of_its_own():
    assert too_big(ROOT) == []


def test_the_script_reads_as_settings_parser_and_story():
    script = ROOT / "eval_retrieval.py"
    assert len(script.read_text(encoding="utf-8").splitlines()) <= 700
    assert [(name, n) for kind, name, n in sizes(script) if n > 60 and name != "build_parser"] == []


def test_readme_lists_every_module_of_the_package_once():
    listed = readme_listing((ROOT / "docs" / "layout.md").read_text(encoding="utf-8"))
    package = ROOT / PACKAGE
    assert sorted(listed) == sorted(p.relative_to(package).as_posix() for p in package.rglob("*.py")
                                    if p.name != "__init__.py")
    assert len(listed) == len(set(listed))


def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_rule_checks_can_fail(tmp_path):
    """A small package with every fault the rules look for, where they would hide: imports inside functions,
    under TYPE_CHECKING, relative ones, a module imported by `from folder import name`."""
    chain = {f"text/t{i}.py": f"from localrag.text import t{i + 1}\n" for i in range(8)}  # t0 -> ... -> t8
    root = write_package(tmp_path, {
        "__init__.py": '"""The package."""\n',
        "errors.py": "def f():\n    from .files import atomic\n",  # upward, inside a function
        "files.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from localrag import errors\n",
        "text/__init__.py": '"""Text."""\nimport os\n',  # an __init__ that imports
        **chain,
        "text/t8.py": "",
        "search/__init__.py": '"""Search."""\n',
        "search/bm25.py": "from ..runs import suite\nimport eval_retrieval\n",  # upward, reaches runs; root script
        "runs/__init__.py": '"""Runs."""\n',
        "runs/suite.py": "import argparse\ndef go(args: argparse.Namespace, a, b, c, d, e, f, g, h):\n"
                         "    return open(__file__)\nPATH = 'eval/goldset.csv'\n",
        "retrieval/__init__.py": '"""Retrieval."""\n',
        "retrieval/rag.py": "class LocalRAG:\n    def __init__(self, a, b, c, d, e, f, g, h, i):\n        pass\n",
        "search/deep/x.py": "",  # a folder in a folder
        "stray.py": "",
    })
    graph = import_graph(root)
    assert graph["localrag.files"] == {"localrag.errors"} and graph["localrag.errors"] == {"localrag.files"}
    assert graph["localrag.text.t0"] == {"localrag.text.t1"}  # the module, not its folder
    assert cycles(graph) == [["localrag.errors", "localrag.files"]]
    assert longest_chain(graph) == [f"localrag.text.t{i}" for i in range(9)]
    assert chain_length(longest_chain(graph)) == 9 > MAX_CHAIN
    assert upward_imports(graph) == ["localrag.errors -> localrag.files", "localrag.search.bm25 -> localrag.runs.suite"]
    assert upward_imports({"localrag.search.a": {"localrag.text.b"}}) == ["localrag.search.a -> localrag.text.b"]
    assert retriever_side_reaching_evaluation(graph, root) == ["localrag.search.bm25 reaches localrag.runs.suite"]
    assert undeclared_modules(root) == ["localrag.search.deep.x", "localrag.stray"]
    assert busy_inits(root) == ["localrag.text"]
    assert root_script_imports(root) == ["localrag.search.bm25 imports eval_retrieval"]
    assert namespace_parameters(root) == ["localrag.runs.suite.go(args)"]
    # No function of the package is allowed to be wide: LocalRAG's compatibility layer lives in local_rag.py.
    assert wide_functions(root) == ["localrag.retrieval.rag.LocalRAG.__init__ (9)", "localrag.runs.suite.go (9)"]
    assert eval_paths(root) == ["localrag.runs.suite:4: 'eval/goldset.csv'", "localrag.runs.suite:3: __file__"]
    module = tmp_path / "m.py"
    module.write_text("class C:\n    def g(self):\n" + "        x = 1\n" * 81, encoding="utf-8")
    assert sizes(module) == [("ClassDef", "C", 83), ("FunctionDef", "g", 82)]


def test_the_readme_listing_reads_paths_and_folders(tmp_path):
    readme = ("## How the code is laid out\n\n```\nlocal_rag.py   the face\nlocalrag/\n  errors.py      one base\n"
              "  search/        pure search\n    bm25.py      BM25, continued on\n                 the next line.py\n"
              "  index/sync.py  a sync\n  runs/\n    suite.py     --suite\neval/          data\n```\n")
    assert readme_listing(readme) == ["errors.py", "search/bm25.py", "index/sync.py", "runs/suite.py"]


def summary(root: Path) -> list[str]:
    """What each rule finds under `root`, a line per finding."""
    graph = import_graph(root)
    chain = longest_chain(graph)
    found = {"import cycles": [", ".join(c) for c in cycles(graph)],
             f"longest chain ({chain_length(chain)} modules, at most {MAX_CHAIN})":
                 [" -> ".join(chain)] if chain_length(chain) > MAX_CHAIN else [],
             "modules outside the declared units": undeclared_modules(root),
             "imports of a later unit": upward_imports(graph),
             "retriever side reaching evaluation": retriever_side_reaching_evaluation(graph, root),
             "folder __init__ with more than a docstring": busy_inits(root),
             "root scripts imported by the package": root_script_imports(root),
             "argparse Namespace parameters": namespace_parameters(root),
             f"functions over {MAX_PARAMETERS} parameters": wide_functions(root),
             "paths under eval/": eval_paths(root),
             "classes over 400 lines, functions over 80": too_big(root)}
    return [line for rule, offenders in found.items()
            for line in [f"{rule}: {len(offenders) or 'none'}"] + [f"  {o}" for o in offenders]]


if __name__ == "__main__":
    print("\n".join(summary(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)))
