"""What ``sql()`` returns through a client: a ``duckdb.DuckDBPyRelation``, the type an
embedded ``Instance.sql()`` returns, so every method (``show()``, ``fetchall()``,
``df()``, ``arrow()``, ``filter()``, ...) and every error is DuckDB's own on both paths.

The server runs the query once and sends what ``Instance.sql_rows()`` gives: the column
names, DuckDB's name of each column's type, and the rows. The client rebuilds the relation
in an in-memory DuckDB of its own (one per ClientInstance, closed with it, as an embedded
relation ends with its instance): each column is one constant list cast to the column's
type and unnested beside the others; no rows, one row of typed NULLs limited to none. No
text from the server becomes SQL: each type name is parsed as a type (``duckdb.sqltype``)
and each column name is an alias.

DuckDB makes a Python value its own one by one, about 6 µs each (duckdb 1.5.6), asking
``import pandas`` for every one: the values go to DuckDB through no_pandas.call, which
answers that at once (pybroker/storage/no_pandas.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb

from pybroker.errors import InvalidArgumentError, ServerError
from pybroker.storage import no_pandas


def relation(con: duckdb.DuckDBPyConnection, columns: Sequence[str], types: Sequence[str],
             rows: Sequence[Sequence[Any]]) -> duckdb.DuckDBPyRelation:
    """The rows as a relation of ``con`` with the columns' names and types."""
    if len(columns) != len(types) or not columns:
        raise ServerError("the server sent a query's rows without matching columns and "
                          "types; use the same pybroker on both sides")
    column_types = [_column_type(name, type_name)
                    for name, type_name in zip(columns, types, strict=True)]
    if not rows:  # a third of the time of the lists
        return con.cursor().values(*(
            duckdb.ConstantExpression(None).cast(column_type).alias(name)
            for name, column_type in zip(columns, column_types, strict=True))).limit(0)
    lists = []
    for i, (name, type_name) in enumerate(zip(columns, types, strict=True)):
        column_type = column_types[i]
        try:
            lists.append(no_pandas.call(duckdb.ConstantExpression, [row[i] for row in rows])
                         .cast(duckdb.list_type(column_type)).alias(f"c{i}"))
        except (duckdb.Error, TypeError, ValueError, OverflowError) as exc:
            raise InvalidArgumentError(
                f"column {name!r} ({type_name}) cannot be rebuilt through a client: {exc}; "
                "select it cast to VARCHAR") from None
    return con.cursor().values(*lists).select(*(
        duckdb.FunctionExpression("unnest", duckdb.ColumnExpression(f"c{i}")).alias(name)
        for i, name in enumerate(columns)))


def _column_type(name: str, type_name: str) -> duckdb.typing.DuckDBPyType:
    try:
        return duckdb.sqltype(type_name)
    except (duckdb.Error, TypeError, ValueError):
        raise ServerError(f"column {name!r} has the type {type_name!r}, which this "
                          "client's DuckDB does not know; use the same pybroker (and "
                          "DuckDB) on both sides") from None
