"""SQL templates of sql/: rendered with jinja2 (StrictUndefined), checked by sqlglot, and
transpiled from DuckDB's dialect to Spark SQL with unsupported constructs raising.

Templates only ever receive relation names and switches, never user values: values travel
as bound parameters (``$name`` in DuckDB) or as rows of an input relation.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jinja2
import sqlglot
from sqlglot.errors import ErrorLevel, SqlglotError

from pybroker.errors import TemplateError
from pybroker.resources import sql_dir

# The catalog relations the routing templates read, by default the tables of migrations/.
# The pipeline passes other names (e.g. Spark temp views of an exported instance).
CATALOG_RELATIONS: Mapping[str, str] = {
    "databases": "databases",
    "services": "services",
    "routes": "routes",
    "route_requests": "route_requests",
    "instance_settings": "instance_settings",
}


def _raise(message: str) -> None:
    raise TemplateError(message)


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(sql_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.globals["raise_unknown_pick"] = lambda pick: _raise(f"unknown pick mode {pick!r}")
    return env


def render(name: str, **variables: Any) -> str:
    """Render template ``name`` (path under sql/) to DuckDB SQL."""
    merged = {**CATALOG_RELATIONS, **variables}
    return _render_cached(name, tuple(sorted(merged.items())))


@functools.lru_cache(maxsize=256)
def _render_cached(name: str, variables: tuple[tuple[str, Any], ...]) -> str:
    try:
        return _environment().get_template(name).render(**dict(variables))
    except jinja2.TemplateError as exc:
        raise TemplateError(f"SQL template {name} failed to render: {exc}") from exc


def parse(name: str, **variables: Any) -> sqlglot.Expression:
    """Render and parse; a template that sqlglot cannot parse is a bug, reported as such."""
    text = render(name, **variables)
    try:
        return sqlglot.parse_one(text, read="duckdb")
    except SqlglotError as exc:
        raise TemplateError(f"SQL template {name} does not parse as DuckDB SQL: {exc}") from exc


def to_spark(name: str, **variables: Any) -> str:
    """The template in Spark SQL. Unsupported constructs raise; nothing is patched after."""
    text = render(name, **variables)
    try:
        statements = sqlglot.transpile(
            text,
            read="duckdb",
            write="spark",
            unsupported_level=ErrorLevel.RAISE,
            pretty=True,
        )
    except SqlglotError as exc:
        raise TemplateError(f"SQL template {name} does not transpile to Spark: {exc}") from exc
    if len(statements) != 1:
        raise TemplateError(f"SQL template {name} must hold one statement, not {len(statements)}")
    return statements[0]
