"""Batches of rows passed to DuckDB as one bound string per column.

Binding a Python list as a DuckDB LIST parameter costs ~60 µs per element (measured with
duckdb 1.5.6: 62 ms for 1,000 integers), far more than the set-based insert it feeds
(~10 ms for 1,000 rows). One comma-joined VARCHAR per column, split and UNNESTed in SQL
(``UNNEST(string_split($column, ','))``), costs ~1 ms for 1,000 values. Values are encoded
so that no value contains a comma:

- integers and timestamps (microseconds since the epoch, naive UTC): decimal text;
- GUIDs (lowercase, generated or normalized by pybroker): as they are;
- names and other text: the hex of their UTF-8 (``decode(unhex(x))`` in SQL);
- bodies: base64 (``from_base64(x)``).

NULL is ``~`` in every encoding (SQL: ``NULLIF(x, '~')``). The SQL templates of
sql/conversation/ that take such columns say so in their header.

The widest and hottest batches (a SEND's transmission-queue rows, an arrival batch's queue
rows) bind one string for all their columns instead (``packed``): each row's fields joined
by ``,`` and the rows by ``;``, which no encoded value contains; SQL splits it once per row
(sql/conversation/_packed_rows.sql, then ``r[1]``, ``r[2]``, ...).
For 830 rows of 14 columns DuckDB takes 8.5-9.3 ms against 11.7-14.0 ms for 14 columns
UNNESTed side by side (duckdb 1.5.6, 2026-11-28), for about half a microsecond more a row in
Python (the join of each row).
"""

from __future__ import annotations

from binascii import b2a_base64
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

NULL = "~"
_EPOCH = datetime(1970, 1, 1)


def int_field(value: int | None) -> str:
    return NULL if value is None else str(int(value))


def flag_field(value: bool) -> str:
    return "1" if value else "0"


def guid_field(value: str | None) -> str:
    return NULL if value is None else value


def text_field(value: str | None) -> str:
    return NULL if value is None else value.encode("utf-8").hex()


def blob_field(value: bytes | None) -> str:
    return NULL if value is None else b2a_base64(value, newline=False).decode("ascii")


def time_field(value: datetime | None) -> str:
    return NULL if value is None else str(micros(value))


def micros(value: datetime) -> int:
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


# A column of a batch encoded, value by value (what the *_field functions give), as cheaply
# as Python allows: these run for every message sent or arrived. A batch's names and times
# repeat (one queue, one service, one clock reading), so each distinct one is encoded once.


def int_fields(values: Sequence[int | None]) -> Iterable[str]:
    return map(int_field, values) if None in values else map(str, map(int, values))


def flag_fields(values: Sequence[bool]) -> Iterable[str]:
    return map(flag_field, values)


def guid_fields(values: Sequence[str | None]) -> Iterable[str]:
    return map(guid_field, values) if None in values else values


def _each_distinct(encode: Callable[[Any], str], values: Sequence[Any]) -> Iterable[str]:
    encoded = {v: encode(v) for v in set(values)}
    return map(encoded.__getitem__, values)


def text_fields(values: Sequence[str | None]) -> Iterable[str]:
    return _each_distinct(text_field, values)


def time_fields(values: Sequence[datetime | None]) -> Iterable[str]:
    return _each_distinct(time_field, values)


def blob_fields(values: Sequence[bytes | None]) -> Iterable[str]:
    return map(blob_field, values)


# One column of a batch as one bound string.


def ints(values: Iterable[int | None]) -> str:
    return ",".join(int_fields(tuple(values)))


def flags(values: Iterable[bool]) -> str:
    return ",".join(flag_fields(tuple(values)))


def guids(values: Iterable[str | None]) -> str:
    return ",".join(guid_fields(tuple(values)))


def texts(values: Iterable[str | None]) -> str:
    return ",".join(text_fields(tuple(values)))


def blobs(values: Iterable[bytes | None]) -> str:
    return ",".join(blob_fields(tuple(values)))


def times(values: Iterable[datetime | None]) -> str:
    return ",".join(time_fields(tuple(values)))


def runs(pairs: Iterable[tuple[str, int]]) -> dict[str, str]:
    """(endpoint handle, sequence number) pairs as runs of consecutive sequence numbers of
    one endpoint, the three columns of sql/conversation/_message_runs.sql (a run's handle,
    its first and its last sequence number). Duplicates count once."""
    handles: list[str] = []
    firsts: list[int] = []
    lasts: list[int] = []
    for handle, seq in sorted(set(pairs)):
        if handles and handles[-1] == handle and lasts[-1] + 1 == seq:
            lasts[-1] = seq
        else:
            handles.append(handle)
            firsts.append(seq)
            lasts.append(seq)
    return {"conversation_handle": guids(handles), "first_sequence": ints(firsts),
            "last_sequence": ints(lasts)}


def packed(*fields: Iterable[str]) -> str:
    """Rows as one bound string: ``fields`` are the columns, each value already encoded as
    above (``int_field``, ``text_field``, ...; a GUID or a validation code as it is); each
    row's values are joined by ``,`` and the rows by ``;``. The columns must be equally
    long (ValueError otherwise) and not empty (no row is not a batch)."""
    return ";".join(map(",".join, zip(*fields, strict=True)))
