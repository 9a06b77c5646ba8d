"""The values of a T-SQL batch: the scalar types scripts declare, and the conversions
among them with SQL Server's rules (CAST, CONVERT, assignment, comparison, LIKE), apart from
the expressions (expressions.py) that compute them."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Union
from xml.parsers import expat

from pybroker.errors import InvalidArgumentError

Value = Union[None, int, str, bytes]  # noqa: UP007 (a runtime alias)

# The declared types and what kind of value each holds.
INTEGER_RANGES = {
    "BIT": (0, 1), "TINYINT": (0, 255), "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1), "BIGINT": (-(2**63), 2**63 - 1),
}  # fmt: skip
TEXT_TYPES = ("NVARCHAR", "VARCHAR", "NCHAR", "CHAR", "SYSNAME", "XML")
BINARY_TYPES = ("VARBINARY", "BINARY")
TYPE_NAMES = ("UNIQUEIDENTIFIER", *INTEGER_RANGES, *TEXT_TYPES, *BINARY_TYPES)

@dataclass(frozen=True, slots=True)
class SqlType:
    """A scalar type; ``length`` None is MAX (or a type without a length)."""

    name: str
    length: int | None = None

    def __str__(self) -> str:
        if self.name in (*TEXT_TYPES, *BINARY_TYPES) and self.name not in ("XML", "SYSNAME"):
            return f"{self.name}({'MAX' if self.length is None else self.length})"
        return self.name



def convert(value: Value, target: SqlType, where: str) -> Value:
    """``value`` as ``target`` holds it (SET, a declaration's initial value, CAST); text and
    binary are cut to the type's length, as SQL Server does on assignment."""
    if value is None:
        return None
    name = target.name
    if name == "UNIQUEIDENTIFIER":
        if isinstance(value, str):
            try:
                return str(uuid.UUID(value.strip()))
            except ValueError:
                pass
        elif isinstance(value, bytes) and len(value) == 16:
            return str(uuid.UUID(bytes_le=value))
        raise _failed(value, target, where)
    if name in INTEGER_RANGES:
        low, high = INTEGER_RANGES[name]
        number: int
        if isinstance(value, int):
            number = value
        elif isinstance(value, str):
            try:
                number = int(value.strip())
            except ValueError:
                raise _failed(value, target, where) from None
        elif isinstance(value, bytes):
            number = int.from_bytes(value, "big") if value else 0
        else:
            raise _failed(value, target, where)
        if name == "BIT":
            return 1 if number else 0
        if not low <= number <= high:
            raise InvalidArgumentError(
                f"{number} is out of the range of {name} ({low} to {high}) at {where}")
        return number
    if name in TEXT_TYPES:
        if isinstance(value, bytes):
            text = value.decode("utf-8", "replace")
        elif isinstance(value, int):
            text = str(value)
        else:
            text = value
        if name == "XML":
            return _well_formed(text, where)
        if name in ("NCHAR", "CHAR") and target.length is not None:
            return text[: target.length].ljust(target.length)
        return text if target.length is None else text[: target.length]
    data: bytes
    if isinstance(value, str):
        data = value.encode("utf-8")
    elif isinstance(value, int):
        data = value.to_bytes(8 if not -(2**31) <= value < 2**31 else 4, "big", signed=True)
    else:
        data = value
    if target.length is None:
        return data
    if name == "BINARY":
        return data[: target.length].ljust(target.length, b"\0")
    return data[: target.length]


def as_body(value: Value, where: str) -> bytes:
    """A SEND's message body: text as UTF-8 (module docstring), NULL as an empty body."""
    body = convert(value, SqlType("VARBINARY"), where)
    return b"" if body is None else body  # type: ignore[return-value]


def as_text(value: Value, what: str, where: str) -> str:
    if value is None or isinstance(value, bytes):
        raise InvalidArgumentError(
            f"{what} at {where} must be text, not {'NULL' if value is None else 'binary'}")
    return str(value)


def as_whole_number(value: Value, what: str, where: str, *, minimum: int, maximum: int) -> int:
    if isinstance(value, str):
        value = convert(value, SqlType("BIGINT"), where)
    if not isinstance(value, int) or not minimum <= value <= maximum:
        shown = "NULL" if value is None else repr(value)
        raise InvalidArgumentError(
            f"{what} at {where} must be a whole number from {minimum} to {maximum}, not "
            f"{shown:.60}")
    return value


def as_guid(value: Value, what: str, where: str) -> str:
    if value is None:
        raise InvalidArgumentError(
            f"{what} at {where} is NULL: expected a conversation handle (set the variable "
            "first, e.g. by BEGIN DIALOG or RECEIVE)")
    return convert(value, SqlType("UNIQUEIDENTIFIER"), where)  # type: ignore[return-value]



def compare(left: Value, right: Value, where: str) -> int | None:
    """-1, 0 or 1; None when either side is NULL. Text compares as under SQL Server's
    default collation: without regard to case, and trailing spaces do not count. A number
    and text compare as numbers (the text converted, as SQL Server converts it)."""
    if left is None or right is None:
        return None
    if isinstance(left, int) != isinstance(right, int):
        left, right = (convert(v, SqlType("BIGINT"), where) for v in (left, right))
    elif isinstance(left, str) and isinstance(right, str):
        left, right = left.rstrip(" ").casefold(), right.rstrip(" ").casefold()
    elif type(left) is not type(right):
        raise InvalidArgumentError(
            f"the comparison at {where} compares text and binary: CAST one side to the "
            "other's type")
    return (left > right) - (left < right)  # type: ignore[operator]


def like_pattern(pattern: str) -> re.Pattern[str]:
    """LIKE's pattern as a regular expression: % any text, _ one character, [abc], [a-c]
    and [^abc] one character of (or not of) a set; without regard to case."""
    parts: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        close = pattern.find("]", i + 2) if ch == "[" else -1
        if ch == "%":
            parts.append(".*")
        elif ch == "_":
            parts.append(".")
        elif close > 0:
            inside = pattern[i + 1 : close]
            negated = inside.startswith("^")
            body = "".join(c if c == "-" else re.escape(c) for c in inside[negated:])
            parts.append(f"[{'^' if negated else ''}{body}]")
            i = close
        else:
            parts.append(re.escape(ch))
        i += 1
    try:
        return re.compile("".join(parts), re.IGNORECASE | re.DOTALL)
    except re.error as exc:  # a range written backwards, [z-a]
        raise InvalidArgumentError(
            f"the LIKE pattern {pattern[:40]!r} is not valid ({exc}): write a range as "
            "[a-z]") from None


def _failed(value: Value, target: SqlType, where: str) -> InvalidArgumentError:
    shown = value.hex() if isinstance(value, bytes) else repr(value)
    return InvalidArgumentError(
        f"conversion failed at {where}: {shown:.60} is not a {target}")


def _well_formed(text: str, where: str) -> str:
    if text.strip():
        parser = expat.ParserCreate()
        try:
            parser.Parse(text, True)
        except expat.ExpatError as exc:
            raise InvalidArgumentError(
                f"conversion failed at {where}: the text is not well-formed XML ({exc})"
            ) from None
    return text
