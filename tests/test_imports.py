"""No import circles (issue #21, the layout): between the modules of each package in SCOPE
(tracecheck, protoref), and between tracecheck's sub-packages, which are its layers (tla, runner,
traces, protocols, replay, campaigns, cli).

Every import counts, a function's local one too: a circle broken by importing lazily is still a
circle, only hidden (tracecheck's explain <-> validate was one). The graph is read from the source
with ``ast``, so nothing is imported to build it.
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The packages whose modules must not import each other in a circle.
SCOPE: dict[str, Path] = {
    "tracecheck": ROOT / "conformance" / "tracecheck",
    "protoref": ROOT / "impl" / "protoref",
}

#: Packages whose sub-packages must not import each other in a circle either.
LAYERED = ("tracecheck",)

Graph = dict[str, set[str]]


def _modules(package: str, folder: Path) -> dict[str, Path]:
    """Dotted module name -> source file, for every module under ``folder``."""
    found: dict[str, Path] = {}
    for path in sorted(folder.rglob("*.py")):
        parts = [package, *path.relative_to(folder).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(package: str, folder: Path) -> Graph:
    """Each module of ``package`` -> the modules of the package it imports, anywhere in it.

    ``from a.b import c`` imports the module ``a.b.c`` when there is one, else ``a.b``; an import
    of a name inside a module is an import of the module."""
    modules = _modules(package, folder)

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: Graph = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            imported: list[str] = []
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported = [
                    f"{node.module}.{alias.name}"
                    if f"{node.module}.{alias.name}" in modules
                    else node.module
                    for alias in node.names
                ]
            targets |= {t for t in map(owner, imported) if t is not None and t != name}
        graph[name] = targets
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (each a circle), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Tarjan's algorithm, iterative: (node, its remaining successors)
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def layers(package: str, graph: Graph) -> Graph:
    """The graph between ``package``'s direct children (sub-packages and top-level modules); the
    package's own ``__init__`` (its public re-exports) is left out."""
    depth = package.count(".") + 2

    def layer(module: str) -> str:
        return ".".join(module.split(".")[:depth])

    collapsed: Graph = {}
    for module, targets in graph.items():
        if module == package:
            continue
        edges = collapsed.setdefault(layer(module), set())
        edges |= {layer(t) for t in targets if t != package and layer(t) != layer(module)}
    return collapsed


def _describe(graph: Graph, circles: list[list[str]]) -> str:
    return "; ".join(
        " ".join(f"{m} -> {sorted(set(graph[m]) & set(c))}" for m in c) for c in circles
    )


@pytest.mark.parametrize("package", sorted(SCOPE))
def test_no_import_circles(package: str) -> None:
    graph = import_graph(package, SCOPE[package])
    assert len(graph) > 1
    circles = cycles(graph)
    assert not circles, f"import circles in {package}: {_describe(graph, circles)}"


@pytest.mark.parametrize("package", LAYERED)
def test_sub_packages_are_layers(package: str) -> None:
    graph = layers(package, import_graph(package, SCOPE[package]))
    assert {"tracecheck.replay", "tracecheck.runner"} <= set(graph)
    circles = cycles(graph)
    assert not circles, f"{package}'s sub-packages import each other: {_describe(graph, circles)}"


def test_every_folder_of_modules_is_a_package() -> None:
    """A sub-package without ``__init__.py`` imports (as a namespace package) but is left out of
    the installed package; ``traces/`` was nearly one, its name being ignored by git for a while."""
    for folder in SCOPE.values():
        holders = {p.parent for p in folder.rglob("*.py") if "__pycache__" not in p.parts}
        missing = sorted(
            str(f.relative_to(ROOT)) for f in holders if not (f / "__init__.py").is_file()
        )
        assert not missing, f"folders of modules without __init__.py: {missing}"


def test_no_module_is_ignored_by_git() -> None:
    """What git ignores is never committed: ruff skips it too, and a clean clone lacks it."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = [str(p) for folder in SCOPE.values() for p in folder.rglob("*.py")]
    found = subprocess.run(
        ["git", "check-ignore", "--no-index", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode == 1, f"ignored by git: {found.stdout or found.stderr}"


# --- the checks reject circles ------------------------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "pkg"
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return folder


def test_a_circle_through_a_local_import_is_found(tmp_path: Path) -> None:
    folder = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg.b import run\n",
            "b.py": "def run() -> None:\n    from pkg import a  # lazy\n",
            "c.py": "import pkg.a\n",
        },
    )
    assert cycles(import_graph("pkg", folder)) == [["pkg.a", "pkg.b"]]


def test_a_circle_between_sub_packages_is_found(tmp_path: Path) -> None:
    folder = _package(
        tmp_path,
        {
            "__init__.py": "from pkg.low.x import X\nfrom pkg.high.y import Y\n",
            "low/__init__.py": "",
            "low/x.py": "X = 1\n",
            "low/z.py": "from pkg.high.y import Y\n",
            "high/__init__.py": "",
            "high/y.py": "from pkg.low.x import X\nY = X\n",
        },
    )
    graph = import_graph("pkg", folder)
    assert cycles(graph) == []  # no module circle: x <- y <- z
    assert cycles(layers("pkg", graph)) == [["pkg.high", "pkg.low"]]


def test_no_circle_no_report(tmp_path: Path) -> None:
    folder = _package(
        tmp_path,
        {
            "__init__.py": "from pkg.a import A\n",
            "a.py": "from pkg.b import B\nA = B\n",
            "b.py": "B = 1\n",
        },
    )
    graph = import_graph("pkg", folder)
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": set()}
    assert cycles(graph) == []
