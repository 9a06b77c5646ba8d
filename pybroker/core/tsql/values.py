"""The values of a T-SQL batch: the scalar types scripts declare, and the conversions
among them with SQL Server's rules (CAST, CONVERT, assignment, comparison, LIKE), apart from
the expressions (expressions.py) that compute them."""

from __future__ import annotations

import math
import re
import struct
import uuid
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext
from typing import Union

from pybroker.core.conversation.validation import xml_problem
from pybroker.core.tsql import temporal
from pybroker.core.tsql.error_numbers import TsqlValueError
from pybroker.core.tsql.temporal import Moment
from pybroker.errors import InvalidArgumentError

# None is NULL; a FLOAT or REAL is a float, a DECIMAL or NUMERIC a Decimal, a date and time
# a Moment (pybroker.core.tsql.temporal), a UNIQUEIDENTIFIER its lower-case text.
Value = Union[None, int, str, bytes, float, Decimal, Moment]  # noqa: UP007 (a runtime alias)

# The declared types and what kind of value each holds.
INTEGER_RANGES = {
    "BIT": (0, 1), "TINYINT": (0, 255), "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1), "BIGINT": (-(2**63), 2**63 - 1),
}  # fmt: skip
TEXT_TYPES = ("NVARCHAR", "VARCHAR", "NCHAR", "CHAR", "SYSNAME", "XML")
BINARY_TYPES = ("VARBINARY", "BINARY")
FLOAT_TYPES = ("FLOAT", "REAL")
DECIMAL_TYPES = ("DECIMAL", "NUMERIC")
TYPE_NAMES = ("UNIQUEIDENTIFIER", *INTEGER_RANGES, *TEXT_TYPES, *BINARY_TYPES, *FLOAT_TYPES,
              *DECIMAL_TYPES, *temporal.DATE_TYPES)
MAX_PRECISION = 38  # of DECIMAL, as SQL Server's
_INTEGER_TEXT = re.compile(r"\s*[+-]?\d+\s*")
_DECIMAL_TEXT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)\s*")
_FLOAT_TEXT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


@dataclass(frozen=True, slots=True)
class SqlType:
    """A scalar type; ``length`` None is MAX (or a type without a length); a DECIMAL's
    precision is its ``length`` and its scale ``scale``; DATETIME2, DATETIMEOFFSET and TIME
    keep ``scale`` digits of the second."""

    name: str
    length: int | None = None
    scale: int | None = None

    def __str__(self) -> str:
        if self.name in (*TEXT_TYPES, *BINARY_TYPES) and self.name not in ("XML", "SYSNAME"):
            return f"{self.name}({'MAX' if self.length is None else self.length})"
        if self.name in DECIMAL_TYPES:
            return f"{self.name}({self.length}, {self.scale})"
        if self.name in temporal.SCALED_TYPES:
            return f"{self.name}({self.scale})"
        return self.name


def kind_of(value: Value) -> str:
    """The SQL Server type name a value's error messages use."""
    if isinstance(value, Moment):
        return temporal.type_name(value)
    return {int: "int", str: "nvarchar", bytes: "varbinary", float: "float",
            Decimal: "numeric"}.get(type(value), "sql_variant")


def plain(value: Value) -> object:
    """What a result set, a parameter of a query and the API show for a value: a date and
    time as Python's datetime, date or time."""
    return value.value if isinstance(value, Moment) else value


def convert(value: Value, target: SqlType, where: str, style: int | None = None) -> Value:
    """``value`` as ``target`` holds it (SET, a declaration's initial value, CAST, CONVERT
    with ``style``); text and binary are cut to the type's length, as SQL Server does on
    assignment; a number too large for its type is error 8115, text that is no number 245
    or 8114, text that is no date 241."""
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
        return _to_integer(value, target, where)
    if name in FLOAT_TYPES:
        return _to_float(value, target, where)
    if name in DECIMAL_TYPES:
        return _to_decimal(value, target, where)
    if name in temporal.DATE_TYPES:
        return _to_moment(value, target, where, style)
    if name in TEXT_TYPES:
        if isinstance(value, bytes):
            text = value.decode("utf-8", "replace")
        elif isinstance(value, Moment):
            text = temporal.to_text(value, style, where)
        elif isinstance(value, float):
            text = float_text(value, style or 0)
        elif isinstance(value, Decimal):
            text = format(value, "f")
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
    elif isinstance(value, bytes):
        data = value
    else:
        raise temporal.not_allowed(kind_of(value), name.lower(), where)
    if target.length is None:
        return data
    if name == "BINARY":
        return data[: target.length].ljust(target.length, b"\0")
    return data[: target.length]


def _to_integer(value: Value, target: SqlType, where: str) -> int:
    name = target.name
    low, high = INTEGER_RANGES[name]
    number: int
    if isinstance(value, bool):
        number = int(value)
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float | Decimal):
        if isinstance(value, float) and not math.isfinite(value):
            raise _overflowed(value, name, where)
        number = int(value)  # toward zero, as SQL Server truncates
    elif isinstance(value, str):
        number = int(_number_text(value, _INTEGER_TEXT, name, where))
    elif isinstance(value, bytes):
        number = int.from_bytes(value, "big") if value else 0
    elif isinstance(value, Moment) and value.type == "DATETIME":
        number = round(temporal.to_days(value))  # CAST(GETDATE() AS INT) rounds the day
    else:
        raise temporal.not_allowed(kind_of(value), name.lower(), where)
    if name == "BIT":
        return 1 if number else 0
    if not low <= number <= high:
        raise TsqlValueError(
            f"Arithmetic overflow error converting {kind_of(value)} to data type "
            f"{name.lower()} ({number} is out of the range of {name}, {low} to {high}, at "
            f"{where})", 8115 if not isinstance(value, int) else 220)
    return number


def _number_text(text: str, pattern: re.Pattern[str], name: str, where: str) -> str:
    """``text`` stripped, when it is a number of the form ``pattern`` takes; else SQL
    Server's error: 245 for an integer type, 8114 for FLOAT and DECIMAL."""
    if pattern.fullmatch(text):
        return text.strip()
    if pattern is _INTEGER_TEXT:
        raise TsqlValueError(
            f"Conversion failed when converting the nvarchar value {text[:40]!r} to data "
            f"type {name.lower()} (conversion failed at {where})", 245)
    raise TsqlValueError(
        f"Error converting data type nvarchar to {name} ({text.strip()[:40]!r} at {where})",
        8114)


def _overflowed(value: Value, name: str, where: str) -> TsqlValueError:
    return TsqlValueError(
        f"Arithmetic overflow error converting {kind_of(value)} to data type {name.lower()} "
        f"(at {where})", 8115)


def _to_float(value: Value, target: SqlType, where: str) -> float:
    number: float
    if isinstance(value, int | float | Decimal):
        number = float(value)
    elif isinstance(value, str):
        number = float(_number_text(value, _FLOAT_TEXT, "float", where))
    elif isinstance(value, Moment) and value.type == "DATETIME":
        number = temporal.to_days(value)
    else:
        raise temporal.not_allowed(kind_of(value), target.name.lower(), where)
    if not math.isfinite(number):
        raise _overflowed(value, target.name, where)
    if target.name == "REAL":
        try:
            number = struct.unpack("f", struct.pack("f", number))[0]
        except OverflowError:
            raise _overflowed(value, "real", where) from None
    return number


def decimal_digits(value: Decimal) -> tuple[int, int]:
    """(precision, scale) of a Decimal value as SQL Server would type it."""
    _, digits, exponent = value.as_tuple()
    scale = max(0, -int(exponent))
    return max(len(digits), scale, 1), scale


def _to_decimal(value: Value, target: SqlType, where: str) -> Decimal:
    precision = target.length or 18
    scale = target.scale or 0
    number: Decimal
    if isinstance(value, bool):
        number = Decimal(int(value))
    elif isinstance(value, int | Decimal):
        number = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise _overflowed(value, "numeric", where)
        number = Decimal(repr(value))
    elif isinstance(value, str):
        number = Decimal(_number_text(value, _DECIMAL_TEXT, "numeric", where))
    else:
        raise temporal.not_allowed(kind_of(value), target.name.lower(), where)
    return _rounded_to(number, precision, scale, kind_of(value), where)


def _rounded_to(number: Decimal, precision: int, scale: int, source: str, where: str
                ) -> Decimal:
    """``number`` as DECIMAL(precision, scale): rounded half away from zero (no -0.00, as
    in SQL Server); too many whole digits: error 8115."""
    with localcontext() as context:
        context.prec = MAX_PRECISION + 40
        try:
            rounded = number.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
        except InvalidOperation:
            rounded = Decimal(10) ** precision
    rounded = rounded if rounded else abs(rounded)
    if abs(rounded) >= Decimal(10) ** (precision - scale):
        raise TsqlValueError(
            f"Arithmetic overflow error converting {source} to data type numeric "
            f"({format(number, 'f')[:40]} does not fit DECIMAL({precision}, {scale}), at "
            f"{where})", 8115)
    return rounded


def _to_moment(value: Value, target: SqlType, where: str, style: int | None) -> Moment:
    scale = 7 if target.scale is None else target.scale
    if isinstance(value, Moment):
        return temporal.convert_moment(value, target.name, scale, where)
    if isinstance(value, str):
        return temporal.from_text(value, target.name, scale, where, style)
    if target.name == "DATETIME" and isinstance(value, int | float | Decimal):
        return temporal.from_days(float(value), where)
    raise temporal.not_allowed(kind_of(value), target.name.lower(), where)


def float_text(value: float, style: int = 0) -> str:
    """A FLOAT as text: style 0 six significant digits (SQL Server's 1e+010 form past
    them), 1 eight and 2 sixteen in scientific form, 3 seventeen (every bit kept)."""
    if style not in (0, 1, 2, 3):
        raise TsqlValueError(
            f"{style} is not a valid style number when converting from float to a character "
            "string", 281)
    if style in (1, 2, 3):
        digits = {1: 8, 2: 16, 3: 17}[style]
        mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
        return f"{mantissa}e{exponent[0]}{int(exponent[1:]):03}"
    text = f"{value:.6g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{mantissa}e{exponent[0]}{int(exponent[1:]):03}"
    return text


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



# The precedence of SQL Server's types, highest first: in a comparison or an arithmetic
# operator the value of the lower type is converted to the higher one.
_PRECEDENCE = (*temporal.DATE_TYPES, "FLOAT", "DECIMAL", "BIGINT", "NVARCHAR", "VARBINARY")


def _rank(value: Value) -> str:
    if isinstance(value, Moment):
        return value.type
    return {float: "FLOAT", Decimal: "DECIMAL", int: "BIGINT", str: "NVARCHAR",
            bytes: "VARBINARY"}[type(value)]


def _higher(value: Value, other: Value) -> SqlType:
    """The type ``value`` converts to beside ``other``: the higher of the two."""
    mine, theirs = _rank(value), _rank(other)
    top = min(_PRECEDENCE.index(mine), _PRECEDENCE.index(theirs))
    name = _PRECEDENCE[top]
    if name == "DECIMAL":
        return SqlType("DECIMAL", MAX_PRECISION, 18 if isinstance(value, str) else (
            decimal_digits(value)[1] if isinstance(value, Decimal) else 0))
    return SqlType(name, None, 7)


def compare(left: Value, right: Value, where: str) -> int | None:
    """-1, 0 or 1; None when either side is NULL. Text compares as under SQL Server's
    default collation: without regard to case, and trailing spaces do not count. Values of
    two types compare as the higher type of SQL Server's precedence (a date and time above
    FLOAT above DECIMAL above the integers above text): text beside a number converted to
    that number's type, as SQL Server converts it."""
    if left is None or right is None:
        return None
    if type(left) is int and type(right) is int:
        return (left > right) - (left < right)
    if isinstance(left, str) and isinstance(right, str):
        left, right = left.rstrip(" ").casefold(), right.rstrip(" ").casefold()
    elif isinstance(left, bytes) != isinstance(right, bytes) and not (
            isinstance(left, int) or isinstance(right, int)):
        raise InvalidArgumentError(
            f"the comparison at {where} compares {kind_of(left)} and {kind_of(right)}: "
            "CAST one side to the other's type")
    elif type(left) is not type(right) or (
            isinstance(left, Moment) and isinstance(right, Moment) and left.type != right.type):
        if isinstance(left, Moment) and isinstance(right, Moment) and {
                left.type, right.type} == {"DATE", "TIME"}:
            raise TsqlValueError(
                f"Operand type clash: {kind_of(left)} is incompatible with {kind_of(right)} "
                f"(at {where})", 206)
        left, right = (convert(left, _higher(left, right), where),
                       convert(right, _higher(right, left), where))
    if isinstance(left, Moment) and isinstance(right, Moment):
        left, right = left.value, right.value  # type: ignore[assignment]
    return (left > right) - (left < right)  # type: ignore[operator]


def negate(value: Value, where: str) -> Value:
    """Unary minus, of a number."""
    if value is None:
        return None
    if isinstance(value, int | float | Decimal):
        return -value if value else value  # -0.00 is 0.00, as in SQL Server
    raise TsqlValueError(
        f"Operand data type {kind_of(value)} is invalid for minus operator (at {where})", 8117)


_OPERATOR_NAMES = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "%": "modulo"}


def arithmetic(operator: str, left: Value, right: Value, where: str) -> Value:
    """``left operator right`` as SQL Server works it out: NULL with NULL; text + text and
    binary + binary join; numbers of two types in the higher type (INT + DECIMAL is
    DECIMAL, DECIMAL + FLOAT is FLOAT) and text beside a number converted to it; DATETIME
    plus or minus a number of days. Integer / and % truncate toward zero."""
    if left is None or right is None:
        return None  # NULL + anything is NULL, as with CONCAT_NULL_YIELDS_NULL ON
    if operator == "+" and type(left) is type(right) and isinstance(left, str | bytes):
        return left + right  # type: ignore[operator]
    if isinstance(left, Moment) or isinstance(right, Moment):
        return _date_arithmetic(operator, left, right, where)
    if isinstance(left, str | bytes) and isinstance(right, str | bytes):
        kinds = {str: "text", bytes: "binary"}
        verb = "join" if operator == "+" else "take"
        raise InvalidArgumentError(
            f"'{operator}' at {where} cannot {verb} {kinds[type(left)]} and "
            f"{kinds[type(right)]}: CAST one side to the other's type")
    if isinstance(left, str | bytes):
        left = convert(left, _higher(left, right), where)
    if isinstance(right, str | bytes):
        right = convert(right, _higher(right, left), where)
    if isinstance(left, float) or isinstance(right, float):
        return _float_arithmetic(operator, float(left), float(right), where)  # type: ignore
    if isinstance(left, Decimal) or isinstance(right, Decimal):
        return _decimal_arithmetic(operator, left, right, where)  # type: ignore[arg-type]
    assert isinstance(left, int) and isinstance(right, int)
    result = _integer_arithmetic(operator, left, right, where)
    low, high = INTEGER_RANGES["BIGINT"]
    if not low <= result <= high:
        raise TsqlValueError(
            f"Arithmetic overflow error converting expression to data type bigint (the "
            f"result at {where} is out of its range)", 8115)
    return result


def _divide_by_zero(where: str) -> TsqlValueError:
    return TsqlValueError(f"Divide by zero error encountered (divide by zero at {where})",
                          8134)


def _integer_arithmetic(operator: str, left: int, right: int, where: str) -> int:
    if operator == "+":
        return left + right
    if operator == "-":
        return left - right
    if operator == "*":
        return left * right
    if right == 0:
        raise _divide_by_zero(where)
    quotient = abs(left) // abs(right) * (1 if (left < 0) == (right < 0) else -1)
    return quotient if operator == "/" else left - quotient * right


def _float_arithmetic(operator: str, left: float, right: float, where: str) -> float:
    if operator in "/%" and right == 0:
        raise _divide_by_zero(where)
    if operator == "%":
        raise TsqlValueError(
            f"The data types float and float are incompatible in the modulo operator (at "
            f"{where})", 402)
    result = {"+": left + right, "-": left - right, "*": left * right}.get(operator)
    if result is None:
        result = left / right
    if not math.isfinite(result):
        raise TsqlValueError(
            f"Arithmetic overflow error converting expression to data type float (at "
            f"{where})", 8115)
    return result


def _typed_digits(value: Decimal | int) -> tuple[int, int]:
    """(precision, scale) of an operand: an integer as INT's DECIMAL(10, 0) (BIGINT's 19)."""
    if isinstance(value, int):
        return (10 if -(2**31) <= value < 2**31 else 19), 0
    return decimal_digits(value)


def _decimal_arithmetic(operator: str, left: Decimal | int, right: Decimal | int, where: str
                        ) -> Decimal:
    """DECIMAL arithmetic with SQL Server's scale of the result (s1 + s2 for *, max(6,
    s1 + p2 + 1) for /, the larger for + and -), 38 digits at most."""
    (p1, s1), (p2, s2) = (_typed_digits(v) for v in (left, right))
    left, right = Decimal(left), Decimal(right)
    if operator in "/%" and right == 0:
        raise _divide_by_zero(where)
    with localcontext() as context:
        context.prec = MAX_PRECISION + 40
        if operator == "+":
            result, scale = left + right, max(s1, s2)
        elif operator == "-":
            result, scale = left - right, max(s1, s2)
        elif operator == "*":
            result, scale = left * right, s1 + s2
        elif operator == "%":
            result, scale = left % right, max(s1, s2)
        else:
            result, scale = left / right, max(6, s1 + p2 + 1)
            whole = p1 - s1 + s2
            if whole + scale > MAX_PRECISION:  # SQL Server keeps the whole digits first
                scale = max(min(scale, 6), MAX_PRECISION - whole)
    return _rounded_to(result, MAX_PRECISION, min(scale, MAX_PRECISION), "expression", where)


def _date_arithmetic(operator: str, left: Value, right: Value, where: str) -> Value:
    """DATETIME + or - a number of days (or another DATETIME, as days from 1900-01-01);
    the other date and time types take no arithmetic operator, as in SQL Server."""
    for side in (left, right):
        if (isinstance(side, Moment) and side.type != "DATETIME") or operator not in "+-":
            raise TsqlValueError(
                f"Operand data type {kind_of(side if isinstance(side, Moment) else left)} is "
                f"invalid for {_OPERATOR_NAMES[operator]} operator (at {where})", 8117)
    if isinstance(left, str):
        left = convert(left, SqlType("DATETIME"), where)
    if isinstance(right, str):
        right = convert(right, SqlType("DATETIME"), where)
    days = [temporal.to_days(v) if isinstance(v, Moment) else float(v)  # type: ignore
            for v in (left, right)]
    if isinstance(left, bytes) or isinstance(right, bytes):
        raise temporal.not_allowed("varbinary", "datetime", where)
    total = days[0] + days[1] if operator == "+" else days[0] - days[1]
    return temporal.from_days(total, where)


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
    return TsqlValueError(
        f"Conversion failed when converting from a character string to uniqueidentifier "
        f"(conversion failed at {where}: {shown:.60} is not a {target})", 8169)


def _well_formed(text: str, where: str) -> str:
    problem = xml_problem(text) if text.strip() else None
    if problem is not None:
        raise InvalidArgumentError(
            f"conversion failed at {where}: the text is not well-formed XML ({problem})")
    return text
