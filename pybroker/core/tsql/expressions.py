"""The small expression language of a T-SQL conversation batch (pybroker.core.tsql.script): the
scalar types a variable is declared with, literals, variables, the system variables
@@ROWCOUNT, @@TRANCOUNT and @@ERROR, ``+`` (concatenation of text or binary, addition of
numbers), ``-``, ``*``, ``/`` and ``%`` of numbers, unary ``-``, parentheses,
``CAST(x AS type)``, ``CONVERT(type, x)``, ``NEWID()``, ``ISNULL``, ``COALESCE``, ``LEN``,
``GETDATE()`` and, in a RECEIVE's column list, the RECEIVE columns; and the conditions of
IF and WHILE (comparisons, IS [NOT] NULL, [NOT] IN (...), [NOT] LIKE, NOT, AND, OR), which
are True, False or UNKNOWN (None) as in SQL. EXISTS (subquery) and OBJECT_ID() are asked of
the database (pybroker.core.tsql.ordinary_sql translates the subquery); nothing else reads a table.

Values are Python's: None (NULL), int, str and bytes; a UNIQUEIDENTIFIER is its lower-case
text, as the API and the sys.* views show handles.

**Chosen where SQL Server differs**: text becomes a message body as UTF-8 (what
``Conversation.send()`` does with a ``str``), and ``CAST(message_body AS NVARCHAR(MAX))``
decodes UTF-8, where SQL Server would use UTF-16 for NVARCHAR. So a body sent from T-SQL
reads the same from Python and back.
"""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Union

from pybroker.core.tsql import temporal
from pybroker.core.tsql import xml_methods as xml
from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.ordinary_sql import Exists, read_exists, source_of
from pybroker.core.tsql.parser import Parser
from pybroker.core.tsql.values import (
    BINARY_TYPES,
    DECIMAL_TYPES,
    INTEGER_RANGES,
    MAX_PRECISION,
    TEXT_TYPES,
    TYPE_NAMES,
    SqlType,
    Value,
    arithmetic,
    as_text,
    compare,
    convert,
    like_pattern,
    negate,
)
from pybroker.errors import InvalidArgumentError, TsqlSyntaxError

# The RECEIVE columns of SQL Server, in its order (RECEIVE * returns them so).
RECEIVE_COLUMNS = (
    "status", "priority", "queuing_order", "conversation_group_id", "conversation_handle",
    "message_sequence_number", "service_name", "service_id", "service_contract_name",
    "service_contract_id", "message_type_name", "message_type_id", "validation",
    "message_body",
)  # fmt: skip
NO_COLUMN_NAME = "(No column name)"


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
class SystemVariable:
    """@@ROWCOUNT, @@TRANCOUNT or @@ERROR: the runner keeps their values among the
    variables, under their own upper-case names."""

    name: str  # upper case, with its @@
    token: Token


@dataclass(frozen=True, slots=True)
class Function:
    """ISNULL(a, b), COALESCE(a, b, ...), LEN(a) or GETDATE()."""

    name: str  # upper case
    arguments: tuple[Expression, ...]
    token: Token


@dataclass(frozen=True, slots=True)
class Binary:
    operator: str  # '+', '-', '*', '/' or '%'
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
    style: Expression | None = None  # CONVERT(type, value, style)


@dataclass(frozen=True, slots=True)
class NewId:
    token: Token


Expression = Union[  # noqa: UP007 (a runtime alias)
    Literal, Variable, Column, Binary, Negate, Cast, NewId, SystemVariable, Function,
    xml.XmlMethod]

# -- conditions (IF, WHILE) -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Comparison:
    operator: str  # =, <>, <, >, <=, >= (!= is <>, !< is >=, !> is <=)
    left: Expression
    right: Expression
    token: Token


@dataclass(frozen=True, slots=True)
class IsNull:
    operand: Expression
    negated: bool  # IS NOT NULL
    token: Token


@dataclass(frozen=True, slots=True)
class InList:
    operand: Expression
    items: tuple[Expression, ...]
    negated: bool
    token: Token


@dataclass(frozen=True, slots=True)
class Like:
    operand: Expression
    pattern: Expression
    negated: bool
    token: Token


@dataclass(frozen=True, slots=True)
class Logical:
    operator: str  # AND or OR
    left: Condition
    right: Condition
    token: Token


@dataclass(frozen=True, slots=True)
class Not:
    operand: Condition
    token: Token


Condition = Union[Comparison, IsNull, InList, Like, Logical, Not, Exists]  # noqa: UP007

SYSTEM_VARIABLES = ("@@ROWCOUNT", "@@TRANCOUNT", "@@ERROR", "@@SPID")
# The functions of the instance clock's time: the runner keeps the clock (epoch seconds)
# among the variables, as "NOW()" (pybroker.core.tsql.temporal.now_as).
CLOCK_FUNCTIONS = ("GETDATE", "GETUTCDATE", "SYSDATETIME", "SYSUTCDATETIME",
                   "SYSDATETIMEOFFSET")
# The functions whose first argument is a datepart (a word: day, month, ...).
DATEPART_FUNCTIONS = {"DATEADD": 3, "DATEDIFF": 3, "DATEPART": 2, "DATENAME": 2}
# The functions of the error being handled (in a CATCH block; NULL elsewhere) and
# XACT_STATE(): the runner keeps their values among the variables, as "NAME()".
SESSION_FUNCTIONS = ("ERROR_NUMBER", "ERROR_MESSAGE", "ERROR_LINE", "ERROR_PROCEDURE",
                     "ERROR_SEVERITY", "ERROR_STATE", "XACT_STATE")
# DB_ID([name]): the runner keeps a function from a name (None: the database in use) to
# the database's id, or None, among the variables as "DB_ID()".
_FUNCTIONS = {"ISNULL": (2, 2), "COALESCE": (2, None), "LEN": (1, 1),
              "OBJECT_ID": (1, 2), "DB_ID": (0, 1),
              **dict.fromkeys(CLOCK_FUNCTIONS, (0, 0)),
              **{name: (count, count) for name, count in DATEPART_FUNCTIONS.items()},
              **dict.fromkeys(SESSION_FUNCTIONS, (0, 0))}
# What the database answers (the runner keeps a function of it among the variables, as
# "NAME()"): OBJECT_ID(name [, type]) and EXISTS (subquery).
DATABASE_FUNCTIONS = ("OBJECT_ID", "EXISTS")


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
    if name in DECIMAL_TYPES:
        return _decimal_type(p, name)
    if name == "FLOAT":
        bits = _sizes(p, name, 1, 53, 1)
        return SqlType("REAL" if bits and bits[0] <= 24 else "FLOAT")
    if name in temporal.SCALED_TYPES:
        scale = _sizes(p, name, 0, 7, 1)
        return SqlType(name, None, scale[0] if scale else 7)
    if name not in (*TEXT_TYPES, *BINARY_TYPES) or name == "XML":
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
        if size.kind != "number" or not _digits(size.text) or not (
                1 <= int(size.text) <= 8000):
            raise p.expected(f"a length from 1 to 8000 or MAX for {name}")
        p.advance()
        length = int(size.text)
    p.require(")", f"')' after the length of {name}")
    return SqlType(name, length)


def _sizes(p: Parser[Any], name: str, low: int, high: int, most: int) -> list[int]:
    """The (n[, m]) after a type's name, each from ``low`` to ``high``; none: []."""
    if not p.accept("("):
        return []
    sizes: list[int] = []
    while True:
        size = p.token
        if size.kind != "number" or not _digits(size.text) or not (
                low <= int(size.text) <= high):
            raise p.expected(f"a whole number from {low} to {high} for {name}")
        p.advance()
        sizes.append(int(size.text))
        if len(sizes) == most or not p.accept(","):
            break
    p.require(")", f"')' after the size of {name}")
    return sizes


def _decimal_type(p: Parser[Any], name: str) -> SqlType:
    """DECIMAL[(p[, s])]: precision 1 to 38 (18 without one), scale 0 to p (0)."""
    sizes = _sizes(p, name, 0, MAX_PRECISION, 2)
    precision = sizes[0] if sizes else 18
    scale = sizes[1] if len(sizes) > 1 else 0
    if precision < 1 or scale > precision:
        raise TsqlSyntaxError(
            f"the precision and scale of {name} before {p.token.where} are not valid: "
            f"expected a precision from 1 to {MAX_PRECISION} and a scale from 0 to it "
            f"(error 1002: the scale must be less than or equal to the precision)")
    return SqlType(name, precision, scale)


def parse_expression(p: Parser[Any], declared: set[str], *, columns: bool = False
                     ) -> Expression:
    """An expression; ``declared`` holds the variables declared so far (any other is an
    error, as SQL Server's "must declare the scalar variable"); ``columns``: RECEIVE
    columns may be named."""
    left = _product(p, declared, columns)
    links = 0  # each operator nests the expression one level deeper
    try:
        while p.token.is_symbol("+") or p.token.is_symbol("-"):
            operator = p.advance()
            p.deeper(operator)
            links += 1
            right = _product(p, declared, columns)
            left = Binary(operator.text, left, right, operator)
    finally:
        p.depth -= links
    return left


def _product(p: Parser[Any], declared: set[str], columns: bool) -> Expression:
    left = _term(p, declared, columns)
    links = 0
    try:
        while p.token.is_symbol("*") or p.token.is_symbol("/") or p.token.is_symbol("%"):
            operator = p.advance()
            p.deeper(operator)
            links += 1
            right = _term(p, declared, columns)
            left = Binary(operator.text, left, right, operator)
    finally:
        p.depth -= links
    return left


def _term(p: Parser[Any], declared: set[str], columns: bool) -> Expression:
    operand = _operand(p, declared, columns)
    while xml.starts_method(p):  # x.value('path', 'type'), .exist(), .query()
        operand = xml.read_method(p, operand, parse_type)
    return operand


def _operand(p: Parser[Any], declared: set[str], columns: bool) -> Expression:
    t = p.token
    if t.is_symbol("-"):
        p.advance()
        with p.nested(t):
            return Negate(_term(p, declared, columns), t)
    if t.is_symbol("("):
        p.advance()
        with p.nested(t):
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
            if word not in SYSTEM_VARIABLES:
                raise p.expected("a value", f" (the system function {t.text} is not "
                                 f"supported; {', '.join(SYSTEM_VARIABLES)} are)")
            p.advance()
            return SystemVariable(word, t)
        if word in DATEPART_FUNCTIONS and p.tokens[p.pos + 1].is_symbol("("):
            return _datepart_function(p, declared, columns)
        if word in _FUNCTIONS and p.tokens[p.pos + 1].is_symbol("("):
            return _function(p, declared, columns)
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
                with p.nested(t):
                    operand = parse_expression(p, declared, columns=columns)
                p.keyword("AS", "AS and a type in CAST(... AS type)")
                target = parse_type(p, cast=True)
            else:
                target = parse_type(p, cast=True)
                p.require(",", "',' after the type in CONVERT(type, value)")
                with p.nested(t):
                    operand = parse_expression(p, declared, columns=columns)
                    if p.accept(","):
                        style = parse_expression(p, declared, columns=columns)
                        p.require(")", "')' to close CONVERT(type, value, style)")
                        return Cast(operand, target, t, style)
            p.require(")", f"')' to close {word}(")
            return Cast(operand, target, t)
    if columns and t.kind in ("word", "identifier") and t.text.lower() in RECEIVE_COLUMNS:
        p.advance()
        return Column(t.text.lower(), t)
    what = "a RECEIVE column, a value or a variable" if columns else (
        "a value: a 'string', a number, NULL, a @variable, CAST(...), NEWID(), ISNULL(...), "
        "COALESCE(...), LEN(...), GETDATE() and the other date functions, ERROR_MESSAGE() and "
        "the other ERROR_ functions or XACT_STATE()")
    raise p.expected(what)


def _function(p: Parser[Any], declared: set[str], columns: bool) -> Function:
    t = p.advance()
    name = t.text.upper()
    p.advance()  # (
    fewest, most = _FUNCTIONS[name]
    arguments: list[Expression] = []
    if not p.token.is_symbol(")"):
        while True:
            with p.nested(t):
                arguments.append(parse_expression(p, declared, columns=columns))
            if not p.accept(","):
                break
    if len(arguments) < fewest or (most is not None and len(arguments) > most):
        counted = f"{fewest}" if fewest == most else f"at least {fewest}"
        raise TsqlSyntaxError(
            f"{name} at {t.where} takes {counted} argument(s), not {len(arguments)}")
    p.require(")", f"')' to close {name}(")
    return Function(name, tuple(arguments), t)


def _datepart_function(p: Parser[Any], declared: set[str], columns: bool) -> Function:
    """DATEADD(part, n, d), DATEDIFF(part, a, b), DATEPART(part, d), DATENAME(part, d): the
    part a word (day, dd, month, ...), kept as a Literal of its full name."""
    t = p.advance()
    name = t.text.upper()
    p.advance()  # (
    part_token = p.token
    part = temporal.DATEPART_WORDS.get(part_token.text.lower()) if part_token.kind in (
        "word", "identifier") else None
    if part is None:
        raise p.expected(f"a datepart for {name} (year, quarter, month, dayofyear, day, week, "
                         "weekday, hour, minute, second, millisecond, microsecond, nanosecond, "
                         "tzoffset, iso_week or their abbreviations)")
    p.advance()
    arguments: list[Expression] = [Literal(part, part_token)]
    for _ in range(DATEPART_FUNCTIONS[name] - 1):
        p.require(",", f"',' and the next argument of {name}(")
        with p.nested(t):
            arguments.append(parse_expression(p, declared, columns=columns))
    p.require(")", f"')' to close {name}(")
    return Function(name, tuple(arguments), t)


def parse_condition(p: Parser[Any], declared: set[str]) -> Condition:
    """A condition of IF or WHILE: comparisons, IS [NOT] NULL, [NOT] IN (...), [NOT] LIKE,
    joined by NOT, AND and OR (in that order of precedence) and parentheses."""
    left = _conjunction(p, declared)
    links = 0
    try:
        while p.token.is_word("OR"):
            operator = p.advance()
            p.deeper(operator)
            links += 1
            left = Logical("OR", left, _conjunction(p, declared), operator)
    finally:
        p.depth -= links
    return left


def _conjunction(p: Parser[Any], declared: set[str]) -> Condition:
    left = _negation(p, declared)
    links = 0
    try:
        while p.token.is_word("AND"):
            operator = p.advance()
            p.deeper(operator)
            links += 1
            left = Logical("AND", left, _negation(p, declared), operator)
    finally:
        p.depth -= links
    return left


def _negation(p: Parser[Any], declared: set[str]) -> Condition:
    if p.token.is_word("NOT"):
        t = p.advance()
        with p.nested(t):
            return Not(_negation(p, declared), t)
    return _predicate(p, declared)


def _predicate(p: Parser[Any], declared: set[str]) -> Condition:
    t = p.token
    if t.is_word("EXISTS"):  # its subquery is ordinary SQL, run on the database
        return read_exists(p, declared, source_of(p))
    if not t.is_symbol("("):
        return _comparison(p, declared)
    # A parenthesis opens either a condition, (@a = 1 OR @b = 2), or a value, (@a + 1) > 2:
    # try the condition first, then the value; the error is the one that read further.
    start = p.pos
    try:
        p.advance()
        with p.nested(t):
            inner = parse_condition(p, declared)
        p.require(")", "')' to close the parenthesis")
        return inner
    except TsqlSyntaxError as as_condition:
        reached, p.pos = p.pos, start
        try:
            return _comparison(p, declared)
        except TsqlSyntaxError:
            if p.pos < reached:
                raise as_condition from None
            raise


_COMPARISONS = {"=": "=", "<>": "<>", "!=": "<>", "<": "<", ">": ">", "<=": "<=", ">=": ">=",
                "!<": ">=", "!>": "<="}


def _comparison_operator(p: Parser[Any]) -> str | None:
    first = p.token
    if first.kind != "symbol" or first.text not in "=<>!":
        return None
    second = p.tokens[p.pos + 1]
    pair = first.text + second.text
    if (second.kind == "symbol" and pair in _COMPARISONS and second.line == first.line
            and second.column == first.column + 1):
        p.advance()
        p.advance()
        return _COMPARISONS[pair]
    if first.text in _COMPARISONS:
        p.advance()
        return first.text
    return None


def _comparison(p: Parser[Any], declared: set[str]) -> Condition:
    left = parse_expression(p, declared)
    t = p.token
    if t.is_word("IS"):
        p.advance()
        negated = p.token.is_word("NOT")
        if negated:
            p.advance()
        p.keyword("NULL", "NULL after IS (IS NULL, IS NOT NULL)")
        return IsNull(left, negated, t)
    negated = False
    if t.is_word("NOT"):
        p.advance()
        negated = True
        if not p.token.is_word("IN", "LIKE"):
            raise p.expected("IN or LIKE after NOT")
    if p.token.is_word("IN"):
        p.advance()
        p.require("(", "'(' and a list of values after IN")
        if p.token.is_word("SELECT"):
            raise p.expected("a list of values", " (IN (subquery) is not supported)")
        items = [parse_expression(p, declared)]
        while p.accept(","):
            items.append(parse_expression(p, declared))
        p.require(")", "',' or ')' after a value of the IN list")
        return InList(left, tuple(items), negated, t)
    if p.token.is_word("LIKE"):
        p.advance()
        pattern = parse_expression(p, declared)
        if p.token.is_word("ESCAPE"):
            raise p.expected("the end of the condition", " (LIKE ... ESCAPE is not supported)")
        return Like(left, pattern, negated, t)
    operator = _comparison_operator(p)
    if operator is None:
        raise p.expected("a comparison (=, <>, !=, <, >, <=, >=), IS [NOT] NULL, [NOT] IN "
                         "(...) or [NOT] LIKE")
    return Comparison(operator, left, parse_expression(p, declared), t)


def _digits(text: str) -> bool:
    """Only the digits 0 to 9 (str.isdigit() takes other scripts' digits and ¹ too)."""
    return text.isascii() and text.isdigit()


_DECIMAL_LITERAL = re.compile(r"([0-9]+)\.([0-9]*)")
_FLOAT_LITERAL = re.compile(r"[0-9]+(\.[0-9]*)?[eE][+-]?[0-9]+")


def _number(t: Token) -> int | bytes | Decimal | float:
    """A number as SQL Server types it: a whole number INT or BIGINT (DECIMAL past BIGINT),
    1.50 a DECIMAL (of precision 3, scale 2), 1.5e3 a FLOAT, 0x... binary."""
    text = t.text
    if text[:2].lower() == "0x":
        digits = text[2:]
        try:
            return bytes.fromhex(digits if len(digits) % 2 == 0 else "0" + digits)
        except ValueError:
            pass
    elif _digits(text):
        value = int(text)
        if value <= INTEGER_RANGES["BIGINT"][1]:
            return value
        if len(text.lstrip("0")) <= MAX_PRECISION:
            return Decimal(text)
    elif _DECIMAL_LITERAL.fullmatch(text) and len(text) - 1 <= MAX_PRECISION:
        return Decimal(text)
    elif _FLOAT_LITERAL.fullmatch(text):
        value = float(text)
        if math.isfinite(value):
            return value
    raise TsqlSyntaxError(
        f"the number {text[:40]} at {t.where} is not supported: expected a whole number, a "
        "decimal (1.50, up to 38 digits), a float (1.5e3) or a binary 0x... value")


# -- values --------------------------------------------------------------------------------


def evaluate(expression: Expression, variables: dict[str, Any],
             row: dict[str, Value] | None = None) -> Value:
    """The value of ``expression``; ``variables`` maps a variable's key to (type, value)
    (and a system variable's name to (None, value)), ``row`` a RECEIVE column to its
    value."""
    if isinstance(expression, Literal):
        return expression.value
    if isinstance(expression, Variable):
        return variables[variable_key(expression.name)][1]
    if isinstance(expression, SystemVariable):
        return variables.get(expression.name, (None, 0))[1]
    if isinstance(expression, Column):
        assert row is not None  # the parser allows columns only in RECEIVE
        return row[expression.name]
    if isinstance(expression, NewId):
        return str(uuid.uuid4())
    if isinstance(expression, Function):
        if expression.name in SESSION_FUNCTIONS:
            return variables.get(f"{expression.name}()", (None, None))[1]
        if expression.name == "DB_ID":
            names = [evaluate(a, variables, row) for a in expression.arguments]
            if names and names[0] is None:
                return None
            name = as_text(names[0], "DB_ID's database name", expression.token.where) if (
                names) else None
            return variables["DB_ID()"][1](name)
        if expression.name in DATABASE_FUNCTIONS:
            return variables[f"{expression.name}()"][1](
                *(evaluate(a, variables, row) for a in expression.arguments))
        return _call(expression, [evaluate(a, variables, row) for a in expression.arguments],
                     variables)
    if isinstance(expression, Cast):
        style = None
        if expression.style is not None:
            found_style = evaluate(expression.style, variables, row)
            if found_style is not None:
                style = _style(found_style, expression)
        return convert(evaluate(expression.operand, variables, row), expression.type,
                       expression.token.where, style)
    if isinstance(expression, xml.XmlMethod):
        found = xml.call(expression, evaluate(expression.operand, variables, row))
        return found if expression.type is None or found is None else convert(
            found, expression.type, expression.token.where)
    if isinstance(expression, Negate):
        return negate(evaluate(expression.operand, variables, row), expression.token.where)
    left = evaluate(expression.left, variables, row)
    right = evaluate(expression.right, variables, row)
    if type(left) is int and type(right) is int and expression.operator in _EXACT:
        result = _EXACT[expression.operator](left, right)  # the common case, made short
        if _BIGINT_LOW <= result <= _BIGINT_HIGH:
            return result
    return arithmetic(expression.operator, left, right, expression.token.where)


_EXACT = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__}
_BIGINT_LOW, _BIGINT_HIGH = INTEGER_RANGES["BIGINT"]


def _style(value: Value, cast: Cast) -> int:
    """CONVERT's style: a whole number; which styles a conversion takes it checks itself
    (error 281 for another)."""
    if not isinstance(value, int):
        raise InvalidArgumentError(
            f"the style of CONVERT at {cast.token.where} must be a whole number, not "
            f"{value!r:.40}")
    return value


def _call(function: Function, values: list[Value], variables: dict[str, Any]) -> Value:
    name = function.name
    where = function.token.where
    if name in ("ISNULL", "COALESCE"):
        return next((v for v in values if v is not None), None)
    if name == "LEN":
        [value] = values
        if value is None:
            return None
        if isinstance(value, bytes):
            return len(value)
        return len(str(convert(value, SqlType("NVARCHAR"), where)).rstrip(" "))
    if name in CLOCK_FUNCTIONS:  # the instance clock's time, read by the runner
        return temporal.now_as(name, variables["NOW()"][1]())
    part = str(values[0])
    moments = [_moment(v, name, where) for v in values[2 if name == "DATEADD" else 1:]]
    if None in moments:
        return None
    if name == "DATEADD":
        number = values[1]
        if number is None:
            return None
        count = convert(number, SqlType("INT"), where)
        return temporal.dateadd(part, count, moments[0], where)  # type: ignore[arg-type]
    if name == "DATEDIFF":
        return temporal.datediff(part, moments[0], moments[1], where)  # type: ignore
    if name == "DATEPART":
        return temporal.datepart(part, moments[0], where)  # type: ignore[arg-type]
    return temporal.datename(part, moments[0], where)  # type: ignore[arg-type]


_OFFSET_TEXT = re.compile(r"(Z|\d[+-]\d{1,2}:\d{2}|\s[+-]\d{1,2}:\d{2})\s*$")


def _moment(value: Value, function: str, where: str) -> temporal.Moment | None:
    """A date argument: text converted (to DATETIME for DATEADD, as SQL Server's result
    type is; DATETIME2 for the others, to keep its digits), a number as DATETIME days."""
    if value is None or isinstance(value, temporal.Moment):
        return value
    if isinstance(value, str):
        target = SqlType("DATETIME") if function == "DATEADD" else SqlType(
            "DATETIMEOFFSET" if _OFFSET_TEXT.search(value) else "DATETIME2", None, 7)
        return convert(value, target, where)  # type: ignore[return-value]
    if isinstance(value, bytes):
        raise InvalidArgumentError(
            f"{function} at {where} takes a date, not binary (error 8116: argument data type "
            "varbinary is invalid)")
    return convert(value, SqlType("DATETIME"), where)  # type: ignore[return-value]


def evaluate_condition(condition: Condition, variables: dict[str, Any]) -> bool | None:
    """True, False or None (UNKNOWN, as a comparison with NULL is): IF runs its ELSE and
    WHILE stops unless the condition is True."""
    if isinstance(condition, Logical):
        left = evaluate_condition(condition.left, variables)
        if condition.operator == "AND" and left is False:
            return False
        if condition.operator == "OR" and left is True:
            return True
        right = evaluate_condition(condition.right, variables)
        if condition.operator == "AND":
            return False if right is False else (None if None in (left, right) else True)
        return True if right is True else (None if None in (left, right) else False)
    if isinstance(condition, Not):
        inner = evaluate_condition(condition.operand, variables)
        return None if inner is None else not inner
    if isinstance(condition, Exists):
        return bool(variables["EXISTS()"][1](condition.query))
    value = evaluate(condition.operand if not isinstance(condition, Comparison)
                     else condition.left, variables)
    where = condition.token.where
    if isinstance(condition, IsNull):
        return (value is not None) if condition.negated else (value is None)
    if isinstance(condition, Comparison):
        order = compare(value, evaluate(condition.right, variables), where)
        if order is None:
            return None
        return {"=": order == 0, "<>": order != 0, "<": order < 0, ">": order > 0,
                "<=": order <= 0, ">=": order >= 0}[condition.operator]
    if isinstance(condition, InList):
        found: bool | None = False
        for item in condition.items:
            order = compare(value, evaluate(item, variables), where)
            if order == 0:
                found = True
                break
            if order is None:
                found = None
        return found if not condition.negated or found is None else not found
    pattern = evaluate(condition.pattern, variables)
    if value is None or pattern is None:
        return None
    text = convert(value, SqlType("NVARCHAR"), where)
    matched = like_pattern(str(convert(pattern, SqlType("NVARCHAR"), where))).fullmatch(
        str(text)) is not None
    return matched != condition.negated
