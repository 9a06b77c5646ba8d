"""SQL templates of sql/: rendered with jinja2 (StrictUndefined), checked by sqlglot, and
transpiled from DuckDB's dialect to Spark SQL with unsupported constructs raising.

Templates only ever receive relation names and switches, never user values: values travel
as bound parameters (``$name`` in DuckDB) or as rows of an input relation. The one exception
is a statement DuckDB's parser takes no parameter in (ATTACH's path, COPY FROM DATABASE's
names): there the value goes through the ``literal`` filter, a string literal made by
sqlglot, or the ``identifier`` filter, a quoted identifier made by sqlglot.

sqlglot is imported where it is used, not with this module: rendering needs only jinja2,
and sqlglot's import (~0.2 s) would be paid by every start of every `pybroker` command.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import jinja2

from pybroker.errors import TemplateError
from pybroker.storage.resources import sql_dir

if TYPE_CHECKING:
    import sqlglot

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
    env.filters["literal"] = _literal
    env.filters["identifier"] = _identifier
    env.globals["raise_unknown_pick"] = lambda pick: _raise(f"unknown pick mode {pick!r}")
    env.globals["raise_unknown_engine"] = lambda engine: _raise(
        f"unknown engine {engine!r}: templates are written for 'duckdb' and 'spark'")
    return env


def _literal(value: object) -> str:
    """``value`` as a DuckDB string literal."""
    from sqlglot import exp

    return exp.Literal.string(str(value)).sql(dialect="duckdb")


def _identifier(value: object) -> str:
    """``value`` as a quoted DuckDB identifier."""
    from sqlglot import exp

    return exp.to_identifier(str(value), quoted=True).sql(dialect="duckdb")


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
    import sqlglot
    from sqlglot.errors import SqlglotError

    text = render(name, **variables)
    try:
        return sqlglot.parse_one(text, read="duckdb")
    except SqlglotError as exc:
        raise TemplateError(f"SQL template {name} does not parse as DuckDB SQL: {exc}") from exc


def to_spark(name: str, **variables: Any) -> str:
    """The template in Spark SQL. Unsupported constructs raise; nothing is patched after
    (a hint comment becomes the hint, see :func:`_spark_hints`)."""
    import sqlglot
    from sqlglot.errors import SqlglotError

    text = render(name, **variables)
    try:
        statements = sqlglot.parse(text, read="duckdb")
    except SqlglotError as exc:
        raise TemplateError(f"SQL template {name} does not transpile to Spark: {exc}") from exc
    if len(statements) != 1 or statements[0] is None:
        raise TemplateError(f"SQL template {name} must hold one statement, not {len(statements)}")
    return _spark_sql(name, _spark_hints(name, statements[0]))


def _spark_sql(name: str, expression: sqlglot.Expression) -> str:
    from sqlglot.errors import ErrorLevel, SqlglotError

    try:
        return expression.sql(dialect="spark", unsupported_level=ErrorLevel.RAISE, pretty=True)
    except SqlglotError as exc:
        raise TemplateError(f"SQL template {name} does not transpile to Spark: {exc}") from exc


def _spark_hints(name: str, tree: sqlglot.Expression) -> sqlglot.Expression:
    """A comment ``/*+ ... */`` right after a SELECT is a Spark hint (``BROADCAST(k)``, a
    join strategy): DuckDB reads it as the comment it is, and sqlglot keeps it as one; here
    it becomes that SELECT's hint again, so Spark reads it as a hint."""
    import sqlglot
    from sqlglot.errors import SqlglotError

    for select in tree.find_all(sqlglot.exp.Select):
        comments = select.comments or []
        hints = [c for c in comments if c.lstrip().startswith("+")]
        if not hints:
            continue
        select.comments = [c for c in comments if c not in hints] or None
        parsed = []
        for text in hints:
            try:
                hint = sqlglot.parse_one(f"SELECT /*{text}*/ 1", read="spark").args.get("hint")
            except SqlglotError as exc:
                raise TemplateError(
                    f"SQL template {name}: the hint /*{text}*/ is not Spark's: {exc}") from exc
            if hint is None:
                raise TemplateError(f"SQL template {name}: the hint /*{text}*/ is not Spark's")
            parsed += hint.expressions
        select.set("hint", sqlglot.exp.Hint(expressions=parsed))
    return tree


def to_spark_stages(name: str, **variables: Any) -> list[tuple[str | None, str, int]]:
    """The template's top-level CTEs, each in Spark SQL, then the final query.

    Returns ``(cte_name, spark_sql, references)`` per CTE in order and ``(None, spark_sql,
    0)`` last; ``references`` counts how often later parts read the CTE. Spark inlines
    every CTE at each reference, and the routing steps read some CTEs many times over, so
    its planner works on a tree many times the query's size (a parity run of 728 keys took
    ~50 s on local[2], most of it before the first task). Running the CTEs as stages, and
    materializing those read more than once, keeps each plan small. The split is done on
    sqlglot's tree of the one template; every part is transpiled with unsupported
    constructs raising, like :func:`to_spark`, and nothing is patched after.
    """
    from sqlglot import exp

    tree = parse(name, **variables)
    with_ = tree.args.get("with_")
    ctes = list(with_.expressions) if with_ is not None else []
    final = tree.copy()
    final.set("with_", None)
    parts: list[tuple[str | None, sqlglot.Expression]] = [
        (cte.alias, cte.this) for cte in ctes
    ]
    parts.append((None, final))
    out: list[tuple[str | None, str, int]] = []
    for index, (cte_name, expression) in enumerate(parts):
        references = 0
        if cte_name is not None:
            for _, later in parts[index + 1:]:
                references += sum(
                    1 for t in later.find_all(exp.Table) if t.name == cte_name
                )
        out.append((cte_name, _spark_sql(name, _spark_hints(name, expression)), references))
    return out
