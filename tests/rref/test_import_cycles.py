"""No import circle among protoref's modules (issue #21 section 4), and the finder has teeth."""

from __future__ import annotations

from pathlib import Path

from support.import_graph import cycles, import_graph

PROTOREF = Path(__file__).resolve().parents[2] / "impl" / "protoref"


def test_protoref_has_no_import_cycle() -> None:
    graph = import_graph(PROTOREF)
    assert "protoref.rref.runtime.agent" in graph  # the graph is protoref's, read whole
    assert "protoref.rref.runtime.handle" in graph["protoref.rref.runtime.node_payload"]
    assert cycles(graph) == []


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_the_finder_sees_lazy_type_only_relative_and_self_imports(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\n",
            # a -> b at module level, b -> a inside a function (the lazy circle)
            "pkg/a.py": "from pkg import b\nA = 1\n",
            "pkg/b.py": "def f():\n    from pkg.a import A\n    return A\n",
            # c -> d only for type checking, d -> c by a relative import
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.d import D\n"
            ),
            "pkg/sub/d.py": "from . import c\nD = 1\n",
            "pkg/e.py": "import pkg.e\n",
            # a parent package's __init__ re-exporting its module is no circle
            "pkg/f.py": "import pkg.a\n",
        },
    )
    graph = import_graph(pkg)
    assert graph["pkg.sub.d"] == {"pkg.sub.c"}
    assert cycles(graph) == [["pkg.a", "pkg.b"], ["pkg.e"], ["pkg.sub.c", "pkg.sub.d"]]


def test_a_package_reexporting_its_modules_is_no_cycle(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.x import X\nfrom pkg.y import Y\n",
            "pkg/x.py": "from pkg.y import Y\nX = Y\n",
            "pkg/y.py": "Y = 1\n",
        },
    )
    assert cycles(import_graph(pkg)) == []
