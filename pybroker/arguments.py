"""The boundary where the public API checks its arguments.

Every value a caller hands to pybroker passes one of these checks before it reaches the
routing engine, the messaging engine or DuckDB, so a call either works or raises an
:class:`~pybroker.errors.InvalidArgumentError` that names the argument and says what it
must be. The ranges are those the instance file can hold (``INTEGER`` columns are 32-bit,
``BIGINT`` 64-bit); text must encode as UTF-8 (no lone surrogates, which Python allows in a
``str`` and DuckDB refuses) and hold no NUL character (which no SQL Server name or
nvarchar value of Service Broker's catalog holds either).
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from pybroker.errors import InvalidArgumentError, ReadOnlyQueryError

INT32_MAX = 2**31 - 1  # an INTEGER column: error codes, forwarding_size_mb
INT64_MAX = 2**63 - 1  # a BIGINT column: max_message_size, sequence numbers
MAX_SECONDS = 2**31  # C1: the default and longest conversation lifetime, in seconds
MAX_EPOCH_SECONDS = 253_402_300_799.0  # 9999-12-31T23:59:59Z, the last time DuckDB stores

# The least an instance's memory limit may be: rows committed since the last checkpoint stay
# in memory, up to about storage.CHECKPOINT_THRESHOLD of them.
MIN_MEMORY_LIMIT = 64 * 2**20
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$",
                   re.IGNORECASE)
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10,
          "mib": 2**20, "gib": 2**30, "tib": 2**40}

_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """Why ``value`` is not text pybroker can store, or None when it is."""
    bad = _NOT_TEXT.search(value)
    if bad is None:
        return None
    ch = bad.group()
    if ch == "\x00":
        return f"it contains a NUL character (at position {bad.start()})"
    return (f"it contains the lone surrogate U+{ord(ch):04X} (at position {bad.start()}), "
            "which is not valid Unicode and cannot be encoded as UTF-8 (on the command line "
            "this is an argument that is not UTF-8)")


def text(argument: str, value: object, *, limit: int | None = None,
         empty: bool = False) -> str:
    """A string that encodes as UTF-8, holds no NUL, and is at most ``limit`` characters."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{argument} must be a string, not {_type(value)}")
    if not empty and not value:
        raise InvalidArgumentError(f"{argument} must not be empty")
    if limit is not None and len(value) > limit:
        raise InvalidArgumentError(
            f"{argument} is {len(value)} characters long; at most {limit} are allowed")
    problem = text_problem(value)
    if problem is not None:
        raise InvalidArgumentError(f"{argument} is not valid text: {problem}")
    return value


def optional_text(argument: str, value: object, *, limit: int | None = None) -> str | None:
    return None if value is None else text(argument, value, limit=limit)


def whole_number(argument: str, value: object, *, minimum: int, maximum: int) -> int:
    """An ``int`` (not a bool) from ``minimum`` to ``maximum``, both included."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(
            f"{argument} must be a whole number from {minimum:,} to {maximum:,}, "
            f"not {_type(value)}")
    if not minimum <= value <= maximum:
        wanted = (f"a positive whole number up to {maximum:,}" if minimum == 1
                  else f"a whole number from {minimum:,} to {maximum:,}")
        raise InvalidArgumentError(f"{argument} must be {wanted}, not {_short(value)}")
    return value


def uuid_text(argument: str, value: object) -> str:
    """A UUID given as text (a conversation handle, a conversation group), in its canonical
    lowercase form."""
    if not isinstance(value, str):
        raise InvalidArgumentError(
            f"{argument} must be a UUID string, not {type(value).__name__}")
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise InvalidArgumentError(f"{argument} {value!r} is not a UUID") from None


def check_memory_limit(value: object, *, minimum: int = MIN_MEMORY_LIMIT) -> int:
    """A memory size such as 256MiB, 512MB or 2GB (DuckDB's units: KB, MB, GB are powers of
    1000, KiB, MiB, GiB of 1024), in bytes, at least ``minimum``; anything else is refused."""
    match = _SIZE.match(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidArgumentError(
            f"memory_limit must be a size with its unit, such as '256MiB', '512MB' or '2GB', "
            f"not {value!r}")
    size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if size < minimum:
        raise InvalidArgumentError(
            f"memory_limit {value!r} is too small: an instance needs at least "
            f"{minimum // 2**20} MiB (the rows it has not yet checkpointed stay "
            "in memory)")
    return size


def real_number(argument: str, value: object, *, minimum: float, maximum: float) -> float:
    """A finite ``int`` or ``float`` (not a bool, not NaN) from ``minimum`` to ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentError(
            f"{argument} must be a number from {minimum:g} to {maximum:g}, not {_type(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgumentError(f"{argument} must be a finite number, not {value!r}")
    if not minimum <= value <= maximum:
        raise InvalidArgumentError(
            f"{argument} must be a number from {minimum:g} to {maximum:g}, not {_short(value)}")
    return float(value)


def flag(argument: str, value: object, *, none: bool = False) -> bool | None:
    """True or False (and None when ``none`` allows it); 1 and 0 are not flags."""
    if value is None and none:
        return None
    if not isinstance(value, bool):
        allowed = "True, False or None" if none else "True or False"
        raise InvalidArgumentError(f"{argument} must be {allowed}, not {_short(value)}")
    return value


def sequence(argument: str, value: object) -> list[Any]:
    """A list, tuple or other iterable of items, but not a string or bytes (a common slip:
    a single name where a list of names is wanted)."""
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        raise InvalidArgumentError(
            f"{argument} must be a list, not the {_type(value)} {_short(value)}")
    if isinstance(value, dict) or not isinstance(value, Iterable):
        raise InvalidArgumentError(f"{argument} must be a list, not {_type(value)}")
    return list(value)


def clock(value: object) -> Callable[[], float] | None:
    """``connect(clock=...)``: None or a callable returning epoch seconds."""
    if value is not None and not callable(value):
        raise InvalidArgumentError(
            f"clock must be a function returning epoch seconds (or None), not {_type(value)}")
    return value  # type: ignore[return-value]


def now(value: object) -> float:
    """What a clock says, checked: epoch seconds DuckDB can store as a time."""
    return real_number("the clock's time", value, minimum=0.0, maximum=MAX_EPOCH_SECONDS)


# Functions a SELECT may call that change state: a sequence, the random seed, a checkpoint
# of the file, DuckDB's log and profiling settings (which every connection shares), or a
# serialized plan run as is. A name may be double-quoted in DuckDB's SQL.
_SIDE_EFFECT_FUNCTIONS = re.compile(
    r'(?<![\w$])"?(nextval|setseed|checkpoint|force_checkpoint|enable_logging|disable_logging'
    r'|enable_profiling|disable_profiling|truncate_duckdb_logs|write_log'
    r'|json_execute_serialized_sql)"?\s*\(', re.IGNORECASE)


def check_read_only_query(query: object) -> str:
    """``Instance.sql()``: one SELECT, nothing that writes (see its docstring)."""
    import duckdb

    text("query", query)
    assert isinstance(query, str)
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise InvalidArgumentError(f"the query is not valid DuckDB SQL: {exc}") from exc
    if len(statements) != 1:
        raise ReadOnlyQueryError(
            f"runs exactly one read-only query, not {len(statements)} statements")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        article = "an" if kind.name[:1] in "AEIOU" else "a"
        raise ReadOnlyQueryError(
            f"is read-only: {article} {kind.name} statement is refused (it could change the "
            "instance file or what is outside it)", hint=ReadOnlyQueryError.PYTHON_HINT)
    called = _SIDE_EFFECT_FUNCTIONS.search(query)
    if called:
        raise ReadOnlyQueryError(
            f"is read-only: {called.group(1).lower()}() is refused, as it changes state (a "
            "sequence, the random seed, a checkpoint of the file, logging or profiling)")
    return query


def _type(value: object) -> str:
    return type(value).__name__


def _short(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
