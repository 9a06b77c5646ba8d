"""Stored procedures in a T-SQL batch, as SQL Server writes them: CREATE [OR ALTER] | ALTER
PROCEDURE [schema.]name [@param type [= default] [OUTPUT], ...] [WITH EXECUTE AS ...] AS
<body>, DROP PROCEDURE [IF EXISTS] name, ... and EXEC[UTE] [@rc =] [db.][schema.]name
[[@param =] value [OUTPUT], ...]; dynamic SQL: EXEC[UTE] (string [+ string ...]) and EXEC
sp_executesql (pybroker.core.tsql.dynamic_sql reads and runs its text).

As in SQL Server, CREATE/ALTER PROCEDURE is the first statement of its batch and its body
runs to the end of the batch (the next GO). The body is parsed at CREATE, so a body that is
not understood is refused then, with its line and column in the script; the text is kept
(``definition``, from CREATE to the end of the batch) and parsed again when the procedure
runs, so a runtime error names the line of the procedure (line 1: the line of CREATE).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pybroker.core.tsql.expressions import (
    Expression,
    Literal,
    Negate,
    Variable,
    is_variable,
    parse_expression,
    parse_type,
    variable_key,
)
from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.parser import Parser
from pybroker.core.tsql.values import SqlType
from pybroker.errors import TsqlSyntaxError, UnsupportedStatementError

DEFAULT_SCHEMA = "dbo"
MAX_PARAMETERS = 2100  # SQL Server's limit on a procedure's parameters
PROCEDURE_WORDS = ("PROC", "PROCEDURE")


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str  # with its @
    type: SqlType
    default: Expression | None  # None: the caller must pass it
    output: bool
    has_default: bool = False  # a default of NULL is a default too


@dataclass(frozen=True, slots=True)
class CreateProcedure:
    """CREATE, ALTER or CREATE OR ALTER PROCEDURE (``mode``)."""

    mode: str  # CREATE, ALTER or CREATE OR ALTER
    schema: str
    name: str
    parameters: tuple[Parameter, ...]
    execute_as: str | None
    body: tuple[Any, ...]
    definition: str  # the text kept, from CREATE to the end of the batch
    token: Token


@dataclass(frozen=True, slots=True)
class DropProcedure:
    names: tuple[tuple[str, str], ...]  # (schema, name)
    if_exists: bool
    token: Token


@dataclass(frozen=True, slots=True)
class Argument:
    parameter: str | None  # @name = value; None: by position
    value: Expression | None  # None: DEFAULT
    output: bool
    token: Token


@dataclass(frozen=True, slots=True)
class Execute:
    database: str | None
    schema: str | None
    name: str
    arguments: tuple[Argument, ...]
    return_code: str | None  # EXEC @rc = name: the variable that takes RETURN's value
    token: Token


@dataclass(frozen=True, slots=True)
class ExecuteDynamic:
    """EXEC[UTE] (text): the text, a batch of its own, is parsed when the statement runs."""

    text: Expression
    token: Token


PROCEDURE_STATEMENTS = (CreateProcedure, DropProcedure, Execute, ExecuteDynamic)


class ProcedureReader(Protocol):
    """What the procedure grammar reads with (pybroker.core.tsql.conversation_parser)."""

    p: Parser[Any]
    declared: set[str]
    in_procedure: bool

    def body(self, parameters: set[str]) -> tuple[Any, ...]: ...

    def source(self, start: Token, end: Token) -> str: ...


def starts_procedure_statement(p: Parser[Any]) -> bool:
    """At CREATE/ALTER/DROP PROC[EDURE] or CREATE OR ALTER PROC[EDURE]."""
    t, following = p.token, p.tokens[p.pos + 1]
    if t.is_word("CREATE") and following.is_word("OR"):
        return p.tokens[p.pos + 2].is_word("ALTER") and p.tokens[p.pos + 3].is_word(
            *PROCEDURE_WORDS)
    return t.is_word("CREATE", "ALTER", "DROP") and following.is_word(*PROCEDURE_WORDS)


def qualified_name(p: Parser[Any], what: str, parts: int) -> list[str]:
    """name, schema.name (or db.schema.name with ``parts`` 3)."""
    names = [p.name(what)]
    while p.token.is_symbol(".") and len(names) < parts:
        p.advance()
        names.append(p.name(what))
    if p.token.is_symbol("."):
        raise p.expected(f"at most {parts} parts in {what}")
    return names


def read_procedure_statement(r: ProcedureReader, first: bool) -> CreateProcedure | DropProcedure:
    """CREATE/ALTER/DROP PROCEDURE; ``first``: nothing came before it in the batch."""
    p = r.p
    t = p.advance()
    verb = t.text.upper()
    if verb == "CREATE" and p.token.is_word("OR"):
        p.advance()
        p.advance()
        verb = "CREATE OR ALTER"
    p.advance()  # PROC or PROCEDURE
    if verb == "DROP":
        return _drop(p, t)
    if r.in_procedure:
        raise TsqlSyntaxError(
            f"{verb} PROCEDURE at {t.where} is inside a procedure's body: expected it in a "
            "batch of its own (end the procedure's batch with GO first)")
    if not first:
        raise TsqlSyntaxError(
            f"{verb} PROCEDURE at {t.where} is not the first statement of its batch: "
            "expected GO before it (its body runs to the end of the batch, as in SQL Server)")
    name_token = p.token
    names = qualified_name(p, "a procedure name", 2)
    schema, name = (names if len(names) == 2 else [DEFAULT_SCHEMA, *names])
    if name.startswith("#"):
        raise TsqlSyntaxError(f"the temporary procedure {name} at {name_token.where} is not "
                              "supported: expected a procedure of the database")
    parameters = read_parameters(p)
    execute_as = None
    if p.token.is_word("WITH"):
        p.advance()
        option = p.token
        if not option.is_word("EXECUTE", "EXEC"):
            raise p.expected("EXECUTE AS after WITH", " (WITH RECOMPILE, ENCRYPTION and "
                             "NATIVE_COMPILATION are not supported)")
        p.advance()
        p.keyword("AS", "AS after WITH EXECUTE")
        if p.token.kind == "string":
            execute_as = p.advance().text
        else:
            execute_as = p.choice("CALLER, SELF, OWNER or 'user' after EXECUTE AS",
                                  "CALLER", "SELF", "OWNER")
    p.keyword("AS", f"AS and the body of procedure {name}")
    if p.token.kind == "end":
        raise p.expected(f"the body of procedure {name} after AS")
    body = r.body({variable_key(q.name) for q in parameters})
    definition = r.source(t, p.token)
    return CreateProcedure(verb, schema, name, parameters, execute_as, body, definition, t)


def read_parameters(p: Parser[Any]) -> tuple[Parameter, ...]:
    """A procedure's parameters (or sp_executesql's definition of them): @name type [=
    constant] [OUTPUT], ..., in parentheses or not."""
    parenthesized = p.accept("(")
    found: list[Parameter] = []
    seen: set[str] = set()
    while is_variable(p.token):
        t = p.advance()
        key = variable_key(t.text)
        if key in seen:
            raise TsqlSyntaxError(f"the parameter {t.text} at {t.where} is named twice: "
                                  "expected each parameter once")
        seen.add(key)
        if p.token.is_word("AS"):
            p.advance()
        sql_type = parse_type(p)
        if p.token.is_word("VARYING"):
            raise p.expected("= default, OUTPUT, ',' or AS", " (cursor parameters are not "
                             "supported)")
        default, has_default = None, False
        if p.accept("="):
            value_token = p.token
            default = parse_expression(p, set())
            if not _constant(default):
                raise TsqlSyntaxError(
                    f"the default of {t.text} at {value_token.where} is not a constant: "
                    "expected a number, a string or NULL")
            has_default = True
        output = False
        if p.token.is_word("OUT", "OUTPUT"):
            p.advance()
            output = True
        if p.token.is_word("READONLY"):
            raise p.expected("',' or AS", " (table-valued parameters are not supported)")
        found.append(Parameter(t.text, sql_type, default, output, has_default))
        if len(found) > MAX_PARAMETERS:
            raise TsqlSyntaxError(f"the procedure at {t.where} has more than "
                                  f"{MAX_PARAMETERS} parameters")
        if not p.accept(","):
            break
    if parenthesized:
        p.require(")", "')' after the parameters")
    return tuple(found)


def _constant(value: Expression) -> bool:
    return isinstance(value, Literal) or (
        isinstance(value, Negate) and isinstance(value.operand, Literal))


def _drop(p: Parser[Any], t: Token) -> DropProcedure:
    if_exists = False
    if p.token.is_word("IF") and p.tokens[p.pos + 1].is_word("EXISTS"):
        p.advance()
        p.advance()
        if_exists = True
    names: list[tuple[str, str]] = []
    while True:
        parts = qualified_name(p, "a procedure name", 2)
        names.append((parts[0], parts[1]) if len(parts) == 2 else (DEFAULT_SCHEMA, parts[0]))
        if not p.accept(","):
            break
    return DropProcedure(tuple(names), if_exists, t)


def read_execute(r: ProcedureReader, t: Token) -> Execute | ExecuteDynamic:
    """EXEC[UTE] (read already) [@rc =] [db.][schema.]name [arguments], or EXEC (text)."""
    p = r.p
    if p.token.is_symbol("("):
        p.advance()
        text = parse_expression(p, r.declared)
        p.require(")", "')' after the dynamic SQL of EXEC (text)")
        if p.token.is_word("AS", "AT"):
            raise UnsupportedStatementError(
                f"EXEC (...) {p.token.text.upper()} at {p.token.where} is not supported: "
                "dynamic SQL runs here as the batch's own user, on this instance; expected "
                "EXEC (text) alone")
        return ExecuteDynamic(text, t)
    return_code = None
    if is_variable(p.token) and p.tokens[p.pos + 1].is_symbol("="):
        v = p.advance()
        if variable_key(v.text) not in r.declared:
            raise TsqlSyntaxError(f"the variable {v.text} at {v.where} is not declared: "
                                  f"expected DECLARE {v.text} INT before it is used")
        p.advance()
        return_code = v.text
    name_token = p.token
    parts = qualified_name(p, "a procedure name after EXEC", 3)
    if parts[-1].lower() == "sp_executesql" and len(parts) > 1 and (
            parts[-2].lower() not in ("sys", DEFAULT_SCHEMA)):
        raise TsqlSyntaxError(f"EXEC {'.'.join(parts)} at {name_token.where}: expected "
                              "sp_executesql or sys.sp_executesql")
    database = parts[0] if len(parts) == 3 else None
    schema = parts[-2] if len(parts) >= 2 else None
    arguments: list[Argument] = []
    named = False
    while _argument_ahead(p, arguments):
        a = p.token
        parameter = None
        if is_variable(a) and p.tokens[p.pos + 1].is_symbol("="):
            parameter = p.advance().text
            p.advance()
            named = True
        elif named:
            raise TsqlSyntaxError(
                f"the argument at {a.where} is passed by position after one passed by name: "
                "expected @name = value for it and every later argument (SQL Server's error "
                "119)")
        value: Expression | None = None
        if p.token.is_word("DEFAULT"):
            p.advance()
        else:
            value_token = p.token
            value = parse_expression(p, r.declared)
            if not (_constant(value) or isinstance(value, Variable)):
                raise TsqlSyntaxError(
                    f"the argument at {value_token.where} is an expression: expected a "
                    "constant, a @variable or DEFAULT (set a variable to it first)")
        output = False
        if p.token.is_word("OUT", "OUTPUT"):
            out = p.advance()
            if not isinstance(value, Variable):
                raise TsqlSyntaxError(f"OUTPUT at {out.where} follows no @variable: expected "
                                      "a variable to take the parameter's value back")
            output = True
        arguments.append(Argument(parameter, value, output, a))
        if not p.accept(","):
            break
    return Execute(database, schema, parts[-1], tuple(arguments), return_code, t)


def _argument_ahead(p: Parser[Any], so_far: list[Argument]) -> bool:
    t = p.token
    if so_far:
        return True  # after a ','
    if t.kind in ("string", "number") or t.is_symbol("-"):
        return True
    return t.kind == "word" and (t.text.startswith("@") or t.is_word("NULL", "DEFAULT"))
