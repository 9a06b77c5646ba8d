"""No module of pybroker reaches another object's private attributes.

A name that begins with one underscore belongs to the class (or module) that defines it.
Read with ``ast``: ``obj._name`` is a reach unless ``obj`` is ``self`` or ``cls``, or the
code is inside a class that itself assigns ``self._name`` (another instance of the same
class, as ``__eq__`` compares); ``from pybroker.x import _name`` is a reach into module x.
The few private names of the standard library meant for callers (namedtuple's ``_replace``,
``sys._getframe``, ``os._exit``) are not reaches.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pybroker"

# private by spelling, public by their owners' documentation
STANDARD = {"_replace", "_asdict", "_fields", "_make", "_getframe", "_exit", "_field_defaults",
            "_jvm"}  # PySpark's gateway to the JVM (SparkContext._jvm)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in STANDARD


def _own_names(cls: ast.ClassDef) -> set[str]:
    """The private attributes a class assigns on ``self`` or ``cls`` (or declares in its
    body), with its private methods."""
    names = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id in {"self", "cls"} and _private(node.attr):
            names.add(node.attr)
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(node.name):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def reaches(source: str, filename: str = "<source>") -> list[str]:
    """Every reach into another object's or module's private names, as 'line: text'."""
    tree = ast.parse(source, filename)
    found: list[str] = []

    def visit(node: ast.AST, own: set[str]) -> None:
        if isinstance(node, ast.ClassDef):
            own = own | _own_names(node)
        if isinstance(node, ast.Attribute) and _private(node.attr):
            holder = node.value
            mine = isinstance(holder, ast.Name) and holder.id in {"self", "cls"}
            if not mine and node.attr not in own:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pybroker"):
            found.extend(f"{node.lineno}: from {node.module} import {alias.name}"
                         for alias in node.names if _private(alias.name))
        for child in ast.iter_child_nodes(node):
            visit(child, own)

    visit(tree, set())
    return found


def test_no_module_reaches_another_objects_private_names() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent)
        found.extend(f"{rel}:{reach}" for reach in reaches(path.read_text("utf-8"), str(path)))
    assert found == [], f"{len(found)} reaches into private names:\n" + "\n".join(found)


# -- the check can fail ----------------------------------------------------------------------


def test_a_reach_is_found() -> None:
    source = (
        "from pybroker.storage.store import _helper\n"
        "class Front:\n"
        "    def __init__(self, kernel):\n"
        "        self._kernel = kernel\n"
        "    def store(self):\n"
        "        return self._kernel._store\n"
        "    def same(self, other):\n"
        "        return other._kernel is self._kernel\n"
        "def f(instance):\n"
        "    return instance._write(), instance.kernel.write()\n"
        "def g(row):\n"
        "    return row._replace(a=1), row.__class__\n"
    )
    assert reaches(source) == [
        "1: from pybroker.storage.store import _helper",
        "6: self._kernel._store",
        "10: instance._write",
    ]
