"""The control flow of a T-SQL batch or procedure body, as SQL Server writes it: BEGIN ...
END, IF ... ELSE and WHILE on conditions (pybroker.core.tsql.expressions), BREAK and
CONTINUE (only inside a WHILE), RETURN [n] (a value only in a procedure), BEGIN TRY ... END
TRY BEGIN CATCH ... END CATCH, THROW [number, message, state] (bare THROW only inside a
CATCH block) and RAISERROR (message, severity, state [, argument, ...]) [WITH ...].

The statements are read here over the reader of pybroker.core.tsql.conversation_parser
(``StatementReader``: its parser, its counts of the loops and CATCH blocks around the
statement being read, and its ``statement()`` for what a branch or a block holds);
pybroker.core.tsql.script runs them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pybroker.core.tsql.expressions import Condition, Expression, parse_condition
from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.parser import Parser
from pybroker.core.tsql.values import Value
from pybroker.errors import InvalidArgumentError, TsqlSyntaxError

# SQL Server's bounds: a user error number of THROW (error 35100 below it), a state, and the
# severities RAISERROR takes without WITH LOG (19 to 25 are for sysadmins and end the
# connection, which a pybroker batch has none of).
MIN_THROW_NUMBER = 50000
MAX_ERROR_NUMBER = 2**31 - 1
MAX_STATE = 255
MAX_RAISERROR_SEVERITY = 18
RAISERROR_OPTIONS = ("LOG", "NOWAIT", "SETERROR")


@dataclass(frozen=True, slots=True)
class Block:
    """BEGIN ... END."""

    statements: tuple[Any, ...]
    token: Token


@dataclass(frozen=True, slots=True)
class If:
    condition: Condition
    then: Any
    otherwise: Any | None  # ELSE
    token: Token


@dataclass(frozen=True, slots=True)
class While:
    condition: Condition
    body: Any
    token: Token


@dataclass(frozen=True, slots=True)
class Break:
    token: Token


@dataclass(frozen=True, slots=True)
class Continue:
    token: Token


@dataclass(frozen=True, slots=True)
class Return:
    value: Expression | None  # RETURN n: a procedure's return code
    token: Token


@dataclass(frozen=True, slots=True)
class TryCatch:
    """BEGIN TRY ... END TRY BEGIN CATCH ... END CATCH (the CATCH block may be empty)."""

    attempt: tuple[Any, ...]
    handler: tuple[Any, ...]
    token: Token


@dataclass(frozen=True, slots=True)
class Throw:
    """THROW number, message, state; or bare THROW (re-raises the error being caught)."""

    number: Expression | None
    message: Expression | None
    state: Expression | None
    token: Token


@dataclass(frozen=True, slots=True)
class Raiserror:
    """RAISERROR (message, severity, state [, argument, ...]) [WITH LOG|NOWAIT|SETERROR]."""

    message: Expression
    severity: Expression
    state: Expression
    arguments: tuple[Expression, ...]
    token: Token


CONTROL_FLOW = (Block, If, While, Break, Continue, Return, TryCatch, Throw, Raiserror)


class StatementReader(Protocol):
    """What the control flow reads with: the reader of pybroker.core.tsql.conversation_parser."""

    p: Parser[Any]
    declared: set[str]
    loops: int  # the WHILE loops around the statement being read
    catches: int  # the CATCH blocks around it
    in_procedure: bool  # a procedure's body is being read

    def statement(self) -> Any: ...

    def expression(self, *, columns: bool = False) -> Expression: ...


def declarations(statements: Sequence[object], kind: type) -> Iterator[Any]:
    """Every statement of type ``kind`` (DECLARE) among the statements, inside blocks, IF,
    WHILE, TRY and CATCH too, in the order written: a variable exists for the whole batch,
    as in SQL Server, even when the branch that declares it does not run."""
    for s in statements:
        if isinstance(s, kind):
            yield s
        elif isinstance(s, Block):
            yield from declarations(s.statements, kind)
        elif isinstance(s, If):
            yield from declarations([s.then, *([s.otherwise] if s.otherwise else [])], kind)
        elif isinstance(s, While):
            yield from declarations([s.body], kind)
        elif isinstance(s, TryCatch):
            yield from declarations([*s.attempt, *s.handler], kind)


def ends(p: Parser[Any], word: str) -> bool:
    """The parser is at END ``word`` (END TRY, END CATCH); '' for the END of BEGIN ... END
    (not END CONVERSATION, END TRY or END CATCH)."""
    if not p.token.is_word("END"):
        return False
    following = p.tokens[p.pos + 1]
    if word:
        return following.is_word(word)
    return not following.is_word("CONVERSATION", "TRY", "CATCH")


def read_break(r: StatementReader, t: Token) -> Break | Continue:
    verb = t.text.upper()
    if not r.loops:
        raise TsqlSyntaxError(
            f"{verb} at {t.where} is outside a WHILE loop: expected it inside "
            "WHILE <condition> ...")
    return Break(t) if verb == "BREAK" else Continue(t)


def read_return(r: StatementReader, t: Token) -> Return:
    p = r.p
    if p.token.kind == "end" or p.token.is_symbol(";") or p.starts_statement():
        return Return(None, t)
    if not r.in_procedure:
        raise p.expected("';' or the next statement after RETURN",
                         " (RETURN with a value is for stored procedures: a batch's RETURN "
                         "takes none)")
    return Return(r.expression(), t)


def read_if_or_while(r: StatementReader, t: Token) -> If | While:
    p = r.p
    condition = parse_condition(p, r.declared)
    if t.is_word("WHILE"):
        r.loops += 1
        try:
            return While(condition, _branch(r, t), t)
        finally:
            r.loops -= 1
    then = _branch(r, t)
    after = p.pos
    while p.accept(";"):
        pass
    if p.token.is_word("ELSE"):
        return If(condition, then, _branch(r, p.advance()), t)
    p.pos = after
    return If(condition, then, None, t)


def _branch(r: StatementReader, head: Token) -> Any:
    """The one statement IF, ELSE or WHILE runs (several in BEGIN ... END)."""
    p = r.p
    t = p.token
    if t.kind == "end" or t.is_symbol(";") or t.is_word("ELSE") or (
            t.is_word("END") and not p.tokens[p.pos + 1].is_word("CONVERSATION")):
        raise p.expected(f"a statement (or BEGIN ... END) for the {head.text.upper()} at "
                         f"{head.where}")
    return r.statement()


def _statements(r: StatementReader, t: Token, word: str, *, empty: bool = False
                ) -> tuple[Any, ...]:
    """The statements up to END ``word`` (which is read too); ``word`` '' for BEGIN ... END."""
    p = r.p
    closing = f"END {word}".strip()
    opened = f"BEGIN {word}".strip()
    statements: list[Any] = []
    while True:
        while p.accept(";"):
            pass
        if ends(p, word):
            break
        if p.token.is_word("END") and not p.tokens[p.pos + 1].is_word("CONVERSATION"):
            raise p.expected(f"{closing} to close the {opened} at {t.where}",
                             f" (END {p.tokens[p.pos + 1].text.upper()} closes no block "
                             "here)" if p.tokens[p.pos + 1].kind == "word" else "")
        if p.token.kind == "end":
            raise p.expected(f"{closing} to close the {opened} at {t.where}")
        statements.append(r.statement())
        if p.accept(";") or p.starts_statement() or p.token.kind == "end":
            continue
        raise p.expected(f"';', the next statement or {closing}")
    if not statements and not empty:
        raise p.expected(f"a statement inside the {opened} ... {closing} at {t.where}")
    p.advance()
    if word:
        p.advance()
    return tuple(statements)


def read_block(r: StatementReader, t: Token) -> Block:
    """The statements of BEGIN ... END, up to the END that closes it."""
    with r.p.nested(t):
        return Block(_statements(r, t, ""), t)


def read_try_catch(r: StatementReader, t: Token) -> TryCatch:
    """BEGIN TRY (read already) ... END TRY BEGIN CATCH ... END CATCH."""
    p = r.p
    with p.nested(t):
        attempt = _statements(r, t, "TRY")
        while p.accept(";"):
            pass
        catch = p.token
        if not (catch.is_word("BEGIN") and p.tokens[p.pos + 1].is_word("CATCH")):
            raise p.expected(f"BEGIN CATCH right after the END TRY of the BEGIN TRY at "
                             f"{t.where} (a TRY block is always followed by its CATCH block)")
        p.advance()
        p.advance()
        r.catches += 1
        try:
            handler = _statements(r, catch, "CATCH", empty=True)
        finally:
            r.catches -= 1
    return TryCatch(attempt, handler, t)


def read_throw(r: StatementReader, t: Token) -> Throw:
    p = r.p
    if p.token.kind == "end" or p.token.is_symbol(";") or p.starts_statement():
        if not r.catches:
            raise TsqlSyntaxError(
                f"THROW at {t.where} has no arguments outside a CATCH block: expected THROW "
                "number, message, state, or a bare THROW inside BEGIN CATCH ... END CATCH "
                "(SQL Server's error 10704)")
        return Throw(None, None, None, t)
    number = r.expression()
    p.require(",", "',' and the message after THROW's error number")
    message = r.expression()
    p.require(",", "',' and the state after THROW's message")
    return Throw(number, message, r.expression(), t)


def read_raiserror(r: StatementReader, t: Token) -> Raiserror:
    p = r.p
    p.require("(", "'(' after RAISERROR (RAISERROR (message, severity, state))")
    message = r.expression()
    p.require(",", "',' and the severity after RAISERROR's message")
    severity = r.expression()
    p.require(",", "',' and the state after RAISERROR's severity")
    state = r.expression()
    found: list[Expression] = []
    while p.accept(","):
        found.append(r.expression())
    p.require(")", "')' to close RAISERROR (")
    if p.token.is_word("WITH"):
        p.advance()
        while True:
            p.choice(f"{', '.join(RAISERROR_OPTIONS[:-1])} or {RAISERROR_OPTIONS[-1]} after "
                     "RAISERROR ... WITH", *RAISERROR_OPTIONS)
            if not p.accept(","):
                break
    return Raiserror(message, severity, state, tuple(found), t)


def raiserror_text(message: str, values: list[Value], where: str) -> str:
    """RAISERROR's message with its arguments in place of %d, %i, %u, %s and %x (flags,
    width and precision are read and left out); %% is one %."""
    found = iter(values)

    def one(match: re.Match[str]) -> str:
        kind = match.group(1)
        if kind == "%":
            return "%"
        try:
            value = next(found)
        except StopIteration:
            return "(null)"  # what SQL Server prints for an argument left out
        if value is None:
            return "(null)"
        if kind in "diux" and not isinstance(value, int):
            raise InvalidArgumentError(f"RAISERROR at {where}: %{kind} takes a number, not "
                                       f"{value!r}")
        return format(value, "x") if kind == "x" else str(value)

    return re.sub(r"%(?:[-+ 0#]*[0-9*]*(?:\.[0-9*]+)?(?:h|l|I64)?)?([diusxX%])",
                  lambda m: one(m) if m.group(1) != "X" else one(m).upper(), message)
