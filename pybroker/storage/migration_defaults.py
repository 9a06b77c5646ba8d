"""A migration's ``ALTER TABLE ... ADD COLUMN ... DEFAULT <constant>`` in the form DuckDB
1.5.6 commits on a table that has rows.

DuckDB fills an added column's default into the table's rows as it adds the column, and
then refuses to commit a transaction that alters the same table again ("Attempting to
modify table ... but another transaction has altered this table"). Migrations 002 and 006
add two and four columns to service_queues, some with defaults: a file whose queues table
had rows could not reach 006 (and, made at 001, not 002). Added without their defaults, the
columns are filled by one UPDATE after the migration's last ADD COLUMN to their table, and
given their defaults after it: the same columns, values and defaults, in one transaction
(so as atomic, and as replayable after a kill, as the migration's own form: checked by
tests/test_landed_migrations.py). Migrations are never edited, so the runner tries a
migration as written first and this form only when DuckDB refuses that one.

sqlglot is imported only when a migration was refused (by the functions below), not with
the store that imports this module: opening a file never needs it otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb

if TYPE_CHECKING:
    from sqlglot import exp

_REFUSAL = "another transaction has altered this table"


def is_refused_alter(exc: BaseException | None) -> bool:
    """Whether DuckDB refused a commit because its transaction altered a table again."""
    return isinstance(exc, duckdb.Error) and _REFUSAL in str(exc)


def statements(text: str) -> list[str]:
    """The statements of a migration, each as written (comments between them left out)."""
    from sqlglot.dialects.duckdb import DuckDB
    from sqlglot.tokens import TokenType

    found, start = [], None
    for token in DuckDB().tokenize(text):
        if token.token_type == TokenType.SEMICOLON:
            if start is not None:
                found.append(text[start:token.start].strip())
            start = None
        elif start is None:
            start = token.start
    if start is not None:
        found.append(text[start:].strip())
    return found


def _constant_default(statement: exp.Expression) -> tuple[exp.Table, exp.ColumnDef,
                                                           exp.Expression] | None:
    """(table, column, default) of ``ALTER TABLE t ADD COLUMN c T DEFAULT k``, k a
    constant; None for any other statement."""
    from sqlglot import exp

    if not isinstance(statement, exp.Alter) or statement.args.get("kind") != "TABLE":
        return None
    actions = statement.args.get("actions") or []
    if len(actions) != 1 or not isinstance(actions[0], exp.ColumnDef):
        return None
    column = actions[0]
    constraints = column.args.get("constraints") or []
    defaults = [c for c in constraints if isinstance(c.args.get("kind"),
                                                     exp.DefaultColumnConstraint)]
    if len(defaults) != 1 or len(constraints) != 1:
        return None
    default = defaults[0].args["kind"].this
    if not isinstance(default, (exp.Literal, exp.Boolean, exp.Null, exp.Neg)) or any(
            not isinstance(node, (exp.Literal, exp.Boolean, exp.Null, exp.Neg))
            for node in default.walk()):
        return None
    return statement.this, column, default


def split_column_defaults(text: str) -> list[str] | None:
    """``text``'s statements in the form DuckDB commits on tables with rows (see above), or
    None when it adds no column with a constant default (there is nothing to split)."""
    import sqlglot
    from sqlglot import exp

    written = statements(text)
    parsed = [sqlglot.parse_one(s, read="duckdb") for s in written]
    found = [_constant_default(p) for p in parsed]
    if not any(found):
        return None
    last: dict[str, int] = {}  # table -> index of the migration's last ADD COLUMN to it
    for n, statement in enumerate(parsed):
        if isinstance(statement, exp.Alter) and any(
                isinstance(a, exp.ColumnDef) for a in statement.args.get("actions") or []):
            last[statement.this.sql("duckdb")] = n
    pending: dict[str, list[tuple[str, str]]] = {}  # table -> (column, default)
    out: list[str] = []
    for n, (source, split) in enumerate(zip(written, found, strict=True)):
        if split is None:
            out.append(source)
        else:
            table, column, default = split
            bare = column.copy()
            bare.set("constraints", [])
            out.append(f"ALTER TABLE {table.sql('duckdb')} ADD COLUMN {bare.sql('duckdb')}")
            pending.setdefault(table.sql("duckdb"), []).append(
                (column.this.sql("duckdb"), default.sql("duckdb")))
        for name, columns in list(pending.items()):
            if last.get(name) != n:
                continue
            values = ", ".join(f"{c} = {d}" for c, d in columns)
            out.append(f"UPDATE {name} SET {values}")
            out.extend(f"ALTER TABLE {name} ALTER COLUMN {c} SET DEFAULT {d}"
                       for c, d in columns)
            del pending[name]
    return out
