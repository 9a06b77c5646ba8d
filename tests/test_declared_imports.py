"""Every third-party module that the package or the tests import is declared in pyproject.toml.

A fresh virtual environment has only what pyproject.toml declares, so an undeclared import
is a `ModuleNotFoundError` for the first user (and a test module that fails to collect). The
package's imports must be in its dependencies or one of its extras; the tests' imports in the
dependencies or the `test` extra, which is what the README's test command installs. An import
at the top of a package module (not inside a function) runs for every user, so it must be a
core dependency: `pip install .` alone has to run `pybroker demo`.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _requirement_name(requirement: str) -> str:
    return _normal(re.split(r"[<>=!~\[;\s]", requirement.strip(), maxsplit=1)[0])


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = {_requirement_name(r) for r in project.get("dependencies", [])}
    extras = {
        extra: {_requirement_name(r) for r in requirements}
        for extra, requirements in project.get("optional-dependencies", {}).items()
    }
    return core, extras


def _local_names() -> set[str]:
    names = {"pybroker", "conftest", "tests"}
    names |= {p.stem for p in (ROOT / "tests").rglob("*.py")}
    return names


# A package module that only an extra's users load, and that every other module imports
# inside a function (or under TYPE_CHECKING): its own imports at module level run only for
# them. test_an_extra_s_own_module_is_never_imported_at_the_top holds the other half.
EXTRA_MODULES = {"pybroker/kernel/tracing.py": "otel"}


def _top_level_imports(tree: ast.Module) -> set[int]:
    """The ids of the import nodes that run when the module is imported."""
    type_checking = {
        id(inner)
        for node in tree.body
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    return {id(node) for node in tree.body if id(node) not in type_checking}


def _imports(folder: Path) -> dict[str, tuple[str, bool]]:
    """Top-level module name -> (first file importing it, whether any import is at module level)."""
    found: dict[str, tuple[str, bool]] = {}
    local = _local_names()
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        extra_only = str(path.relative_to(folder.parent)) in EXTRA_MODULES
        top_level = set() if extra_only else {id(node) for node in tree.body}
        # imports guarded by `if TYPE_CHECKING:` never run
        type_checking = {
            id(inner)
            for node in tree.body
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in type_checking:
                continue
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in local or top.startswith("_"):
                    continue
                file, at_top = found.get(top, (str(path.relative_to(folder.parent)), False))
                found[top] = (file, at_top or id(node) in top_level)
    return found


def _distributions(module: str) -> set[str]:
    names = importlib.metadata.packages_distributions().get(module)
    return {_normal(n) for n in names} if names else {_normal(module)}


def _package_problems(folder: Path, core: set[str], extras: dict[str, set[str]]) -> list[str]:
    anywhere = core.union(*extras.values())
    problems = []
    for module, (file, at_top) in _imports(folder).items():
        dists = _distributions(module)
        if not dists & anywhere:
            problems.append(f"{module} (imported in {file}) is not declared at all")
        elif at_top and not dists & core:
            problems.append(
                f"{module} is imported at the top of {file} but is only an extra: "
                "`pip install .` would fail to import it"
            )
    return problems


def test_the_package_imports_only_what_it_declares():
    core, extras = _declared()
    assert _package_problems(ROOT / "pybroker", core, extras) == []


def test_an_extra_s_own_module_is_never_imported_at_the_top():
    _core, extras = _declared()
    for file, extra in EXTRA_MODULES.items():
        assert extra in extras, f"{file}: no extra {extra!r} in pyproject.toml"
        module = file.removesuffix(".py").replace("/", ".")
        for path in sorted((ROOT / "pybroker").rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in tree.body:
                if id(node) not in _top_level_imports(tree):
                    continue
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                assert module not in names, (
                    f"{path.relative_to(ROOT)} imports {module} at its top: every user would "
                    f"load what only pybroker[{extra}]'s users have")


def test_the_tests_import_only_what_the_test_extra_declares():
    core, extras = _declared()
    available = core | extras.get("test", set())
    problems = [
        f"{module} (imported in {file})"
        for module, (file, _) in _imports(ROOT / "tests").items()
        if not _distributions(module) & available
    ]
    assert problems == []


def test_the_check_reports_what_a_fresh_environment_would_miss(tmp_path):
    """The check can fail: an undeclared module, and an extra imported at a module's top."""
    package = tmp_path / "pybroker"
    package.mkdir()
    (package / "a.py").write_text(
        "import os\nimport duckdb\nimport cryptography.x509\nimport pyspark\n"
        "from pybroker import b\n\ndef later():\n    import pyarrow\n",
        encoding="utf-8",
    )
    problems = _package_problems(package, {"duckdb"}, {"spark": {"pyspark", "pyarrow"}})
    assert problems == [
        "cryptography (imported in pybroker/a.py) is not declared at all",
        "pyspark is imported at the top of pybroker/a.py but is only an extra: "
        "`pip install .` would fail to import it",
    ]
