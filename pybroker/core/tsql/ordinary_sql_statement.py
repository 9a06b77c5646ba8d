"""An ordinary SQL statement of a T-SQL batch as the interpreter keeps it, and what it asks
of the database to run it: what the reading of a batch (ordinary_sql.py), the translation by
sqlglot (ordinary_sql_translation.py) and the runner (script.py) share. Imports no sqlglot:
a batch without ordinary SQL never loads it."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.temporal import Moment
from pybroker.core.tsql.values import (
    BINARY_TYPES,
    DECIMAL_TYPES,
    INTEGER_RANGES,
    SqlType,
    convert,
    plain,
)

if TYPE_CHECKING:  # pragma: no cover
    from sqlglot import exp

DEFAULT_SCHEMA = "dbo"
TEXT_TYPE_NAMES = ("NVARCHAR", "VARCHAR", "NCHAR", "CHAR", "SYSNAME", "XML")
DATABASE_PARAMETER = "database_name"
# The columns of SELECT ... FROM <queue>, SQL Server's, in its order; pybroker keeps
# services, contracts and message types by name, so their ids are NULL.
QUEUE_COLUMNS = (
    "status", "priority", "queuing_order", "conversation_group_id", "conversation_handle",
    "message_sequence_number", "service_name", "service_id", "service_contract_name",
    "service_contract_id", "message_type_name", "message_type_id", "validation",
    "message_body", "message_enqueue_time",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class OrdinarySql:
    """One statement of ordinary SQL: ``kind`` (SELECT, INSERT, UPDATE, DELETE, CREATE
    TABLE, DROP TABLE), its tree as sqlglot read it, the variables its parameters stand
    for (``parameters``: parameter name -> variable key) and, for SELECT @v = ..., the
    variables it assigns, in the order of its columns."""

    kind: str
    tree: exp.Expression
    parameters: tuple[tuple[str, str], ...]
    assigns: tuple[str, ...]
    token: Token
    tables: tuple[str, ...] = ()  # the keys of the table variables it names


@dataclass(slots=True)
class TableVariable:
    """DECLARE @t TABLE (column type, ...): its rows, kept by the batch, not the database
    (so ROLLBACK leaves them, as SQL Server's table variables are left); a query that
    names it reads them as a derived table of its columns, bound as parameters."""

    columns: tuple[str, ...]
    types: tuple[SqlType, ...]
    rows: list[tuple[Any, ...]]

    def add(self, row: Mapping[str, Any] | tuple[Any, ...], where: str) -> None:
        """A row (values in column order, or by column name; a missing column NULL),
        each value converted to its column's type."""
        values = tuple(row.get(c) for c in self.columns) if isinstance(row, Mapping) else row
        self.rows.append(tuple(convert(v, t, where) for v, t in zip(
            values, self.types, strict=True)))

    def duckdb_types(self) -> tuple[str, ...]:
        return tuple(duckdb_type(t) for t in self.types)


def duckdb_type(sql_type: SqlType) -> str:
    """The DuckDB type that holds a value of ``sql_type`` (a table variable's column)."""
    name = sql_type.name
    if name in INTEGER_RANGES:
        return "BIGINT" if name == "BIGINT" else "INTEGER"
    if name in BINARY_TYPES:
        return "BLOB"
    if name in DECIMAL_TYPES:
        return f"DECIMAL({sql_type.length}, {sql_type.scale})"
    return {"FLOAT": "DOUBLE", "REAL": "FLOAT", "UNIQUEIDENTIFIER": "UUID",
            "DATETIME": "TIMESTAMP", "DATETIME2": "TIMESTAMP",
            "DATETIMEOFFSET": "TIMESTAMPTZ", "DATE": "DATE", "TIME": "TIME"}.get(
        name, "VARCHAR")


@dataclass(frozen=True, slots=True)
class SqlNames:
    """What a statement's names mean in its database, asked of it when the statement runs:
    its queues, and the sys views that hold a row per database (a database_name column)."""

    queues: frozenset[str] = frozenset()
    database_views: frozenset[str] = frozenset()
    catalog: str | None = None  # DuckDB's name of the instance file (its tables' catalog)


def schema_of(database: str) -> str:
    """The DuckDB schema of a database's user tables: SQL Server's database.dbo, written
    database_dbo (a schema named as the database alone would be ambiguous in DuckDB with
    a file named after it, counter.duckdb holding database Counter)."""
    return f"{database}_{DEFAULT_SCHEMA}"


@dataclass(frozen=True, slots=True)
class Rendered:
    """A statement as DuckDB runs it: ``sql`` with named parameters, the values fixed by
    the translation (``values``: the database's name, a queue's) and the variables to bind
    (``variables``: parameter name -> variable key). ``before``: what runs first in the
    same transaction (CREATE TABLE: its schema, the sequences of its IDENTITY columns)."""

    sql: str
    values: dict[str, Any]
    variables: tuple[tuple[str, str], ...]
    before: tuple[str, ...] = ()
    writes: bool = True  # SELECT writes nothing
    # The table variables' columns it reads, bound as lists: (parameter, table variable's
    # key, column index; -1 the rows' numbers)
    table_columns: tuple[tuple[str, str, int], ...] = ()
    into: tuple[str, tuple[int, ...]] | None = None  # INSERT INTO @t: its key, the columns
    deletes: str | None = None  # DELETE FROM @t: its key (the query gives rows' numbers)


def value_of(found: Any) -> Any:
    """A value DuckDB returned, as the batch's values are: a UNIQUEIDENTIFIER its lower-case
    text, a BIT 0 or 1, a date and time a DATETIME2, DATETIMEOFFSET, DATE or TIME value
    (result sets show Python's datetime, pybroker.core.tsql.values.plain), an exact number
    a whole number when it is one."""
    if isinstance(found, bool):
        return int(found)
    if isinstance(found, uuid.UUID):
        return str(found)
    if isinstance(found, dt.datetime):  # TIMESTAMP, TIMESTAMPTZ (microseconds)
        return Moment("DATETIME2" if found.tzinfo is None else "DATETIMEOFFSET", found, 7)
    if isinstance(found, dt.date):
        return Moment("DATE", found, 0)
    if isinstance(found, dt.time):
        return Moment("TIME", found, 7)
    if isinstance(found, decimal.Decimal):
        return int(found) if found == found.to_integral_value() else str(found)
    if isinstance(found, bytearray | memoryview):
        return bytes(found)
    return found


def bound(rendered: Rendered, variables: Mapping[str, tuple[Any, Any]]) -> dict[str, Any]:
    """The parameters of ``rendered`` with the variables' values now."""
    lists: dict[str, Any] = {}
    for name, key, index in rendered.table_columns:
        table: TableVariable = variables[key][1]
        lists[name] = list(range(len(table.rows))) if index < 0 else [
            _parameter(plain(row[index])) for row in table.rows]
    return {**rendered.values, **lists,
            **{name: _parameter(variables[key][1]) for name, key in rendered.variables}}


def _parameter(value: Any) -> Any:
    """A variable's value as DuckDB takes it: a date and time as Python's datetime, date
    or time (pybroker.core.tsql.temporal.Moment.value)."""
    inner = getattr(value, "value", None)
    return inner if isinstance(inner, dt.datetime | dt.date | dt.time) else value
