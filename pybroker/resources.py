"""Where the SQL templates and migrations are: beside the package in a checkout, inside it
in an installed wheel (pyproject.toml force-includes them)."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"pybroker's {name}/ folder is missing from {_PACKAGE}")


def sql_dir() -> Path:
    return _find("sql")


def migrations_dir() -> Path:
    return _find("migrations")
