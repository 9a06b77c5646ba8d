"""A query's rows through a client as an Arrow table (``Rows.arrow()``).

Built on the client from what a RESULT already carries for ``sql()`` (the rows, and
DuckDB's name of each column's type): the protocol is unchanged, and the server neither
needs pyarrow nor sends a second copy of every result. Each column gets the Arrow type
DuckDB's own export gives an embedded caller for that DuckDB type (DuckDB 1.5: UUID as
text, HUGEINT as decimal128(38, 0), TIMESTAMP WITH TIME ZONE as a UTC timestamp), for the
scalar types and lists of them; any other type (STRUCT, MAP, ENUM, UNION, BIT, fixed-size
arrays) is left to pyarrow's inference from the values.

pyarrow is optional: it is imported on first use, and its absence is a BrokerError that
says how to install it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any

from pybroker.errors import BrokerError, InvalidArgumentError

_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


def pyarrow() -> Any:
    try:
        import pyarrow as pa
    except ImportError:
        raise BrokerError("Arrow results need pyarrow, which is not installed: "
                          "pip install pyarrow") from None
    return pa


def table(columns: Sequence[str], types: Sequence[str],
          rows: Sequence[Sequence[Any]]) -> Any:
    """A ``pyarrow.Table`` of ``rows``, one column per name of ``columns``."""
    pa = pyarrow()
    arrays = []
    for i, (name, type_name) in enumerate(zip(columns, types, strict=True)):
        arrow_type, convert = _column_type(pa, type_name)
        values = [row[i] for row in rows]
        if convert is not None:
            values = [None if v is None else convert(v) for v in values]
        try:
            arrays.append(pa.array(values, type=arrow_type))
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise InvalidArgumentError(
                f"column {name!r} ({type_name}) cannot be made an Arrow column: {exc}; "
                f"select it cast to VARCHAR") from None
    return pa.Table.from_arrays(arrays, names=list(columns))


Convert = Callable[[Any], Any] | None


def _column_type(pa: Any, type_name: str) -> tuple[Any, Convert]:
    """(Arrow type, or None to infer; how a value is made one Arrow takes, or None)."""
    if type_name.endswith("[]"):
        inner, convert = _column_type(pa, type_name[:-2])
        if inner is None:
            return None, None
        if convert is None:
            return pa.list_(inner), None
        inner_convert = convert
        return pa.list_(inner), lambda items: [
            None if v is None else inner_convert(v) for v in items]
    decimal = _DECIMAL.fullmatch(type_name)
    if decimal is not None:
        return pa.decimal128(int(decimal[1]), int(decimal[2])), None
    simple = {
        "BOOLEAN": pa.bool_(), "TINYINT": pa.int8(), "SMALLINT": pa.int16(),
        "INTEGER": pa.int32(), "BIGINT": pa.int64(), "UTINYINT": pa.uint8(),
        "USMALLINT": pa.uint16(), "UINTEGER": pa.uint32(), "UBIGINT": pa.uint64(),
        "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "VARCHAR": pa.string(),
        "BLOB": pa.binary(), "DATE": pa.date32(), "TIME": pa.time64("us"),
        "TIMESTAMP": pa.timestamp("us"), "TIMESTAMP_S": pa.timestamp("s"),
        "TIMESTAMP_MS": pa.timestamp("ms"), "TIMESTAMP_NS": pa.timestamp("ns"),
    }.get(type_name)
    if simple is not None:
        return simple, None
    if type_name in ("HUGEINT", "UHUGEINT"):
        return pa.decimal128(38, 0), Decimal
    if type_name == "UUID":
        return pa.string(), _uuid_text
    if type_name == "TIMESTAMP WITH TIME ZONE":
        # the instant is what travels (the server's session time zone name does not)
        return pa.timestamp("us", tz="UTC"), None
    if type_name == "INTERVAL":
        return pa.month_day_nano_interval(), _month_day_nano
    return None, None


def _uuid_text(value: Any) -> str:
    return str(value) if isinstance(value, uuid.UUID) else value


def _month_day_nano(value: Any) -> Any:
    if not isinstance(value, timedelta):
        return value
    return (0, value.days, (value.seconds * 10**6 + value.microseconds) * 1000)
