"""The shape of the house: the imports among the modules of pybroker/ form no circle, and the
wire's sans-I/O core (with its one transport) never reaches up into the engine, the API or
the storage.

Imports are read with ``ast``, so an import under ``if TYPE_CHECKING:`` or inside a function
counts as much as one at the top: a circle of type hints is still a circle to a reader. A
``from pybroker.core.wire import X`` counts as importing the package (its
``__init__``), except from a module inside that package (Python has loaded it already).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pybroker"

# The layers, top to bottom: a module imports modules of its own layer and of the layers below
# it, never above. ``pybroker`` itself is the public surface: it re-exports from every layer.
LAYERS = (
    ("public surface", ("pybroker",)),
    ("command line", ("pybroker.cli", "pybroker.__main__")),
    ("developer tooling", ("pybroker.devtools",)),
    ("adapters", ("pybroker.server",)),
    ("applications", ("pybroker.apps",)),
    ("public API", ("pybroker.api",)),
    ("kernel", ("pybroker.kernel",)),
    ("cores", ("pybroker.core",)),
    ("storage", ("pybroker.storage",)),
    ("foundation", ("pybroker.errors", "pybroker.arguments", "pybroker.timestamps")),
)

# Never imported by the wire's core: the sans-I/O protocol and its transport touch no storage.
ABOVE_THE_WIRE = ("pybroker.storage", "duckdb")


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the layer ``module`` belongs to (None: in none)."""
    for rank, (_, roots) in enumerate(LAYERS):
        for root in roots:
            if module == root or (root != "pybroker" and module.startswith(root + ".")):
                return rank
    return None


def back_up_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module by one in a lower layer, as 'module (layer) imports name
    (layer)'."""
    found = []
    for module in sorted(graph):
        low = layer_of(module)
        for name in sorted(graph[module]):
            high = layer_of(name)
            if low is not None and high is not None and high < low:
                found.append(f"{module} ({LAYERS[low][0]}) imports {name} ({LAYERS[high][0]})")
    return found


def above_the_wire(name: str) -> bool:
    return any(name == above or name.startswith(above + ".") for above in ABOVE_THE_WIRE)


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module under ``root`` (a package directory)."""
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name ``module`` imports, anywhere in the file (relative imports made
    absolute; ``from a import b`` gives both ``a`` and ``a.b``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[: len(up) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same tree it imports."""
    files = module_files(root)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        edges = graph.setdefault(module, set())
        for name in imported_names(module, path):
            while name and name not in files:  # a name inside a module: the module
                name = name.rpartition(".")[0]
            if not name or name == module:
                continue
            if files[name].name == "__init__.py" and module.startswith(name + "."):
                continue  # one's own package is loaded before one is
            edges.add(name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative so
    that a deep chain of imports cannot exhaust the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def test_no_module_of_pybroker_is_in_an_import_circle() -> None:
    found = circles(import_graph(PACKAGE))
    assert found == [], "import circles (every module of each imports the others, through "\
        "TYPE_CHECKING imports too):\n" + "\n".join(
            f"circle of {len(c)}: {', '.join(c)}" for c in found)


def test_every_module_is_in_one_layer() -> None:
    outside = sorted(m for m in module_files(PACKAGE) if layer_of(m) is None)
    assert outside == [], "modules in no layer (tests/test_import_graph.py LAYERS):\n" + \
        "\n".join(outside)


def test_no_module_imports_a_layer_above_its_own() -> None:
    found = back_up_imports(import_graph(PACKAGE))
    assert found == [], "imports against the flow:\n" + "\n".join(found)


def test_the_wire_never_imports_the_storage() -> None:
    files = module_files(PACKAGE)
    wire = {m: p for m, p in files.items() if m == "pybroker.core.wire" or m.startswith(
        "pybroker.core.wire.")}
    assert "pybroker.core.wire.transport" in wire and "pybroker.core.wire.frames" in wire
    reaching_up = sorted(
        f"{module} imports {name}"
        for module, path in wire.items()
        for name in imported_names(module, path)
        if above_the_wire(name))
    assert reaching_up == [], "the wire package reaches above itself:\n" + "\n".join(
        reaching_up)


# -- the checks can fail ---------------------------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_circle_through_a_type_checking_import_is_found(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "",
        "low.py": "from typing import TYPE_CHECKING\n"
                  "if TYPE_CHECKING:\n    from pkg.high import High\n",
        "high.py": "from pkg import low\n",
        "alone.py": "import pkg.low\n",
    })
    assert circles(import_graph(root)) == [["pkg.high", "pkg.low"]]


def test_a_circle_through_a_package_init_is_found(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "",
        "sub/__init__.py": "from pkg.sub.api import Thing\n",
        "sub/api.py": "def f():\n    from pkg import user\n",  # inside a function too
        "sub/core.py": "from . import api\n",  # its own package: no edge to sub/__init__
        "user.py": "from pkg.sub import Thing\n",
    })
    graph = import_graph(root)
    assert graph["pkg.sub.core"] == {"pkg.sub.api"}
    assert circles(graph) == [["pkg.sub", "pkg.sub.api", "pkg.user"]]


def test_no_circle_in_a_one_way_tree(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "from pkg.api import f\n",
        "api.py": "from pkg.core import g\n",
        "core.py": "import duckdb\nfrom pkg import store\n",
        "store.py": "",
    })
    assert circles(import_graph(root)) == []


@pytest.mark.parametrize(("line", "seen"), [
    ("import duckdb", True),
    ("from pybroker.storage.store import Store", True),
    ("from pybroker import storage", True),
    ("if True:\n    from pybroker.storage import templates", True),
    ("from pybroker.core.wire import frames", False),
    ("from pybroker.errors import WireError", False),
    ("import pybroker.storage_of_nothing", False),
])
def test_a_wire_import_of_the_storage_is_seen(tmp_path: Path, line: str, seen: bool) -> None:
    root = _package(tmp_path, {"wire/__init__.py": "", "wire/dialog.py": line + "\n"})
    names = imported_names("pybroker.core.wire.dialog", root / "wire" / "dialog.py")
    assert any(above_the_wire(n) for n in names) is seen


def test_an_import_against_the_flow_is_found(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "from pybroker.cli import main\n",  # the surface: every layer
        "cli/__init__.py": "",
        "cli/main.py": "from pybroker.api.instance import Instance\n",
        "api/__init__.py": "",
        "api/instance.py": "from pybroker.kernel import kernel\n",
        "kernel/__init__.py": "",
        "kernel/kernel.py": "def f():\n    from pybroker.api import instance\n",
        "storage/__init__.py": "",
        "storage/store.py": "from pybroker.errors import BrokerError\n",
        "errors.py": "",
    })
    root = root.rename(root.parent / "pybroker")
    graph = import_graph(root)
    assert back_up_imports(graph) == [
        "pybroker.kernel.kernel (kernel) imports pybroker.api (public API)",
        "pybroker.kernel.kernel (kernel) imports pybroker.api.instance (public API)"]
    assert layer_of("pybroker.tools") is None and layer_of("pybroker.cli.main") == 1
    assert layer_of("pybroker") == 0 and layer_of("pybroker.errors") == len(LAYERS) - 1
