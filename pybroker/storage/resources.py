"""Where the SQL templates and migrations are: beside the package in a checkout, inside it
in an installed wheel (pyproject.toml force-includes them). The documents the package ships
(pybroker/docs/) are inside it either way."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def _find(name: str) -> Path:
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"pybroker's {name}/ folder is missing from {_PACKAGE}")


def sql_dir() -> Path:
    return _find("sql")


def migrations_dir() -> Path:
    return _find("migrations")


def step_codes_document() -> Path:
    """pybroker/docs/codes.md: what each step code (R2.3, P5.2, C3) means."""
    return _PACKAGE / "docs" / "codes.md"


def finding_codes_document() -> Path:
    """pybroker/docs/diagnose.md: what each finding code of diagnose (D-CFG-001) means."""
    return _PACKAGE / "docs" / "diagnose.md"
