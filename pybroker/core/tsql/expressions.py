"""The small expression language of a T-SQL conversation batch (pybroker.core.tsql.script): the
scalar types a variable is declared with, literals, variables, ``+`` (concatenation of
text or binary, addition of numbers), unary ``-``, parentheses, ``CAST(x AS type)``,
``CONVERT(type, x)``, ``NEWID()`` and, in a RECEIVE's column list, the RECEIVE columns.
It is not SQL: no functions beyond these, no comparisons, no subqueries.

Values are Python's: None (NULL), int, str and bytes; a UNIQUEIDENTIFIER is its lower-case
text, as the API and the sys.* views show handles.

**Chosen where SQL Server differs**: text becomes a message body as UTF-8 (what
``Conversation.send()`` does with a ``str``), and ``CAST(message_body AS NVARCHAR(MAX))``
decodes UTF-8, where SQL Server would use UTF-16 for NVARCHAR. So a body sent from T-SQL
reads the same from Python and back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Union
from xml.parsers import expat

from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.parser import Parser
from pybroker.errors import InvalidArgumentError, TsqlSyntaxError

Value = Union[None, int, str, bytes]  # noqa: UP007 (a runtime alias)

# The declared types and what kind of value each holds.
_INTEGERS = {
    "BIT": (0, 1), "TINYINT": (0, 255), "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1), "BIGINT": (-(2**63), 2**63 - 1),
}  # fmt: skip
_TEXT = ("NVARCHAR", "VARCHAR", "NCHAR", "CHAR", "SYSNAME", "XML")
_BINARY = ("VARBINARY", "BINARY")
TYPE_NAMES = ("UNIQUEIDENTIFIER", *_INTEGERS, *_TEXT, *_BINARY)
# The RECEIVE columns of SQL Server, in its order (RECEIVE * returns them so).
RECEIVE_COLUMNS = (
    "status", "priority", "queuing_order", "conversation_group_id", "conversation_handle",
    "message_sequence_number", "service_name", "service_id", "service_contract_name",
    "service_contract_id", "message_type_name", "message_type_id", "validation",
    "message_body",
)  # fmt: skip
NO_COLUMN_NAME = "(No column name)"


@dataclass(frozen=True, slots=True)
class SqlType:
    """A scalar type; ``length`` None is MAX (or a type without a length)."""

    name: str
    length: int | None = None

    def __str__(self) -> str:
        if self.name in (*_TEXT, *_BINARY) and self.name not in ("XML", "SYSNAME"):
            return f"{self.name}({'MAX' if self.length is None else self.length})"
        return self.name


# -- expressions ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Literal:
    value: Value
    token: Token


@dataclass(frozen=True, slots=True)
class Variable:
    name: str  # as written, with its @
    token: Token


@dataclass(frozen=True, slots=True)
class Column:
    """A RECEIVE column (only in a RECEIVE's column list)."""

    name: str  # lower case, one of RECEIVE_COLUMNS
    token: Token


@dataclass(frozen=True, slots=True)
class Binary:
    operator: str  # '+' or '-'
    left: Expression
    right: Expression
    token: Token


@dataclass(frozen=True, slots=True)
class Negate:
    operand: Expression
    token: Token


@dataclass(frozen=True, slots=True)
class Cast:
    operand: Expression
    type: SqlType
    token: Token


@dataclass(frozen=True, slots=True)
class NewId:
    token: Token


Expression = Union[Literal, Variable, Column, Binary, Negate, Cast, NewId]  # noqa: UP007


def variable_key(name: str) -> str:
    """Variables are named without regard to case, as under SQL Server's default collation."""
    return name.upper()


def is_variable(token: Token) -> bool:
    return token.kind == "word" and token.text.startswith("@") and not token.text.startswith(
        "@@") and len(token.text) > 1


def column_name(expression: Expression) -> str:
    """The name a result set gives an unnamed item: a column's or a variable's own name."""
    if isinstance(expression, Column):
        return expression.name
    if isinstance(expression, Variable):
        return expression.name[1:]
    if isinstance(expression, Cast) and isinstance(expression.operand, Column):
        return expression.operand.name
    return NO_COLUMN_NAME


# -- parsing -------------------------------------------------------------------------------


def parse_type(p: Parser[Any], *, cast: bool = False) -> SqlType:
    """A scalar type: NVARCHAR(n | MAX), INT, UNIQUEIDENTIFIER, ... A text or binary type
    without a length is 1 long in a declaration and 30 in a CAST, as in SQL Server."""
    t = p.token
    if t.kind not in ("word", "identifier") or t.text.upper() not in TYPE_NAMES:
        raise p.expected(f"a type ({', '.join(TYPE_NAMES)})")
    p.advance()
    name = t.text.upper()
    if name == "SYSNAME":
        return SqlType("NVARCHAR", 128)
    if name not in (*_TEXT, *_BINARY) or name == "XML":
        return SqlType(name)
    if not p.accept("("):
        return SqlType(name, 30 if cast else 1)
    if p.token.is_word("MAX"):
        if name in ("NCHAR", "CHAR", "BINARY"):
            raise p.expected(f"a length from 1 to 8000 for {name} (MAX is for VAR types)")
        p.advance()
        length = None
    else:
        size = p.token
        if size.kind != "number" or not size.text.isdigit() or not (
                1 <= int(size.text) <= 8000):
            raise p.expected(f"a length from 1 to 8000 or MAX for {name}")
        p.advance()
        length = int(size.text)
    p.require(")", f"')' after the length of {name}")
    return SqlType(name, length)


def parse_expression(p: Parser[Any], declared: set[str], *, columns: bool = False
                     ) -> Expression:
    """An expression; ``declared`` holds the variables declared so far (any other is an
    error, as SQL Server's "must declare the scalar variable"); ``columns``: RECEIVE
    columns may be named."""
    left = _term(p, declared, columns)
    while p.token.is_symbol("+") or p.token.is_symbol("-"):
        operator = p.advance()
        right = _term(p, declared, columns)
        left = Binary(operator.text, left, right, operator)
    return left


def _term(p: Parser[Any], declared: set[str], columns: bool) -> Expression:
    t = p.token
    if t.is_symbol("-"):
        p.advance()
        return Negate(_term(p, declared, columns), t)
    if t.is_symbol("("):
        p.advance()
        inner = parse_expression(p, declared, columns=columns)
        p.require(")", "')' to close the parenthesis")
        return inner
    if t.kind == "string":
        p.advance()
        return Literal(t.text, t)
    if t.kind == "number":
        p.advance()
        return Literal(_number(t), t)
    if t.kind == "word":
        word = t.text.upper()
        if word == "NULL":
            p.advance()
            return Literal(None, t)
        if word.startswith("@@"):
            raise p.expected("a value", f" (the system function {t.text} is not supported)")
        if is_variable(t):
            if variable_key(t.text) not in declared:
                raise TsqlSyntaxError(
                    f"the variable {t.text} at {t.where} is not declared: expected "
                    f"DECLARE {t.text} <type> before it is used")
            p.advance()
            return Variable(t.text, t)
        if word in ("CAST", "CONVERT", "NEWID") and p.tokens[p.pos + 1].is_symbol("("):
            p.advance()
            p.advance()
            if word == "NEWID":
                p.require(")", "')' after NEWID(")
                return NewId(t)
            if word == "CAST":
                operand = parse_expression(p, declared, columns=columns)
                p.keyword("AS", "AS and a type in CAST(... AS type)")
                target = parse_type(p, cast=True)
            else:
                target = parse_type(p, cast=True)
                p.require(",", "',' after the type in CONVERT(type, value)")
                operand = parse_expression(p, declared, columns=columns)
            p.require(")", f"')' to close {word}(")
            return Cast(operand, target, t)
    if columns and t.kind in ("word", "identifier") and t.text.lower() in RECEIVE_COLUMNS:
        p.advance()
        return Column(t.text.lower(), t)
    what = "a RECEIVE column, a value or a variable" if columns else (
        "a value: a 'string', a number, NULL, a @variable, CAST(...) or NEWID()")
    raise p.expected(what)


def _number(t: Token) -> int | bytes:
    text = t.text
    if text[:2].lower() == "0x":
        digits = text[2:]
        try:
            return bytes.fromhex(digits if len(digits) % 2 == 0 else "0" + digits)
        except ValueError:
            pass
    elif text.isdigit():
        value = int(text)
        if value <= _INTEGERS["BIGINT"][1]:
            return value
    raise TsqlSyntaxError(
        f"the number {text[:40]} at {t.where} is not supported: expected a whole number "
        "(up to BIGINT's 9223372036854775807) or a binary 0x... value")


# -- values --------------------------------------------------------------------------------


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
    if name in _INTEGERS:
        low, high = _INTEGERS[name]
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
    if name in _TEXT:
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


def evaluate(expression: Expression, variables: dict[str, Any],
             row: dict[str, Value] | None = None) -> Value:
    """The value of ``expression``; ``variables`` maps a variable's key to (type, value),
    ``row`` a RECEIVE column to its value."""
    if isinstance(expression, Literal):
        return expression.value
    if isinstance(expression, Variable):
        return variables[variable_key(expression.name)][1]
    if isinstance(expression, Column):
        assert row is not None  # the parser allows columns only in RECEIVE
        return row[expression.name]
    if isinstance(expression, NewId):
        return str(uuid.uuid4())
    if isinstance(expression, Cast):
        return convert(evaluate(expression.operand, variables, row), expression.type,
                       expression.token.where)
    if isinstance(expression, Negate):
        value = evaluate(expression.operand, variables, row)
        if value is None:
            return None
        if not isinstance(value, int):
            raise InvalidArgumentError(
                f"'-' at {expression.token.where} negates a number, not text or binary")
        return -value
    left = evaluate(expression.left, variables, row)
    right = evaluate(expression.right, variables, row)
    if left is None or right is None:
        return None  # NULL + anything is NULL, as with CONCAT_NULL_YIELDS_NULL ON
    where = expression.token.where
    if isinstance(left, int) and isinstance(right, int):
        result = left + right if expression.operator == "+" else left - right
        return as_whole_number(result, "the result", where, minimum=_INTEGERS["BIGINT"][0],
                               maximum=_INTEGERS["BIGINT"][1])
    if expression.operator == "+" and type(left) is type(right):
        return left + right  # type: ignore[operator]
    kinds = {int: "a number", str: "text", bytes: "binary"}
    raise InvalidArgumentError(
        f"'{expression.operator}' at {where} cannot join {kinds[type(left)]} and "
        f"{kinds[type(right)]}: CAST one side to the other's type")


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
