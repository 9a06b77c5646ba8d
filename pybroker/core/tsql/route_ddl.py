"""CREATE ROUTE, ALTER ROUTE and DROP ROUTE in SQL Server's syntax (SPEC R10).

sqlglot returns these statements as an opaque Command, so this is a small, strict parser of
its own. It understands exactly

    CREATE ROUTE name WITH clause [, clause ...] [;]
    ALTER ROUTE name WITH clause [, clause ...] [;]
    DROP ROUTE name [;]

where a clause is SERVICE_NAME, BROKER_INSTANCE, ADDRESS or MIRROR_ADDRESS = 'string'
(N'string' too), or LIFETIME = [+|-]whole number, in any order, each at most once. A batch
holds one or more statements, with or without ';' between them, and may mix them with the
object DDL of pybroker.core.tsql.object_parser (pybroker.core.tsql.batch.parse_batch). Anything else
is refused with the line and column where understanding stopped and what was expected there
(the shared pybroker.core.tsql.parser.Parser).

Only the syntax is checked here, plus the two rules the syntax alone decides: ADDRESS is
required in CREATE (R10.1) and LIFETIME is a whole number (R10.2). The values themselves
(addresses, GUIDs, combinations, lengths, signs) are checked by
pybroker.core.routing.definition.validate_route when the statement runs (R10.2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.parser import Parser
from pybroker.errors import RouteDefinitionError, TsqlSyntaxError

# Clause names as SQL Server spells them, and as Database.create_route/alter_route take them.
CLAUSES = ("SERVICE_NAME", "BROKER_INSTANCE", "LIFETIME", "ADDRESS", "MIRROR_ADDRESS")

_LONGEST_LIFETIME_DIGITS = 18  # far past 2**31 - 1; validate_route reports the range (R10.2)


@dataclass(frozen=True, slots=True)
class CreateRoute:
    """CREATE ROUTE: only ``address`` is required (R10.1); lifetime is in seconds."""

    name: str
    address: str
    service_name: str | None = None
    broker_instance: str | None = None
    lifetime: int | None = None
    mirror_address: str | None = None


@dataclass(frozen=True, slots=True)
class AlterRoute:
    """ALTER ROUTE: only the clauses given change (R10). ``changes`` holds (clause, value)
    pairs, in the order written, with the clause names Database.alter_route takes; '' as
    the value removes SERVICE_NAME, BROKER_INSTANCE or MIRROR_ADDRESS, as in SQL Server."""

    name: str
    changes: tuple[tuple[str, str | int], ...]


@dataclass(frozen=True, slots=True)
class DropRoute:
    """DROP ROUTE (R10.5: dropping a route in use is allowed)."""

    name: str


RouteStatement = CreateRoute | AlterRoute | DropRoute


def _clauses(p: Parser[Any]) -> dict[str, str | int]:
    """WITH clause [, clause ...]: each clause once, in any order (R10)."""
    if p.token.is_word("AUTHORIZATION"):
        raise TsqlSyntaxError(
            f"AUTHORIZATION at {p.token.where} is not supported: pybroker routes have "
            "no owners; expected WITH (remove the AUTHORIZATION clause)"
        )
    p.keyword("WITH", "WITH")
    found: dict[str, str | int] = {}
    first_seen: dict[str, Token] = {}
    while True:
        clause = p.token
        if clause.kind != "word":
            raise p.expected(f"a route clause ({', '.join(CLAUSES)})")
        key = clause.text.upper()
        if key not in CLAUSES:
            raise TsqlSyntaxError(
                f"unknown route clause {clause.text} at {clause.where}: expected one of "
                f"{', '.join(CLAUSES)}"
            )
        p.once(key, clause, first_seen, "clause")
        p.advance()
        p.require("=", f"'=' after {key}")
        found[key] = _lifetime(p) if key == "LIFETIME" else _string(p, key)
        if p.accept(","):
            continue
        if p.token.kind == "word" and p.token.text.upper() in CLAUSES:
            raise p.expected(f"',' before {p.token.text.upper()}")
        return found


def _string(p: Parser[Any], clause: str) -> str:
    t = p.token
    if t.kind != "string":
        hint = " (strings take single quotes)" if t.kind == "identifier" else ""
        raise p.expected(f"a string value for {clause}, such as N'...'{hint},")
    p.advance()
    return t.text


def _lifetime(p: Parser[Any]) -> int:
    """LIFETIME = [+|-]digits (R10.1). The sign is kept, so that validate_route refuses
    a lifetime that is not positive by R10.2; any other value is refused here (R10.2)."""
    start = p.token
    sign = -1 if p.accept("-") else 1
    if sign == 1:
        p.accept("+")
    t = p.token
    if t.kind == "number" and t.text.isascii() and t.text.isdigit():
        digits = t.text.lstrip("0") or "0"
        if len(digits) <= _LONGEST_LIFETIME_DIGITS:
            p.advance()
            return sign * int(digits)
        shown = f"a number of {len(digits)} digits, larger than the largest allowed"
    elif t.kind in ("symbol", "end") and not t.is_symbol("."):
        raise p.expected("a whole number of seconds for LIFETIME")
    else:
        shown = t.describe()
    raise RouteDefinitionError(
        f"LIFETIME must be a whole number of seconds: expected digits such as 600 but found "
        f"{shown} at {start.where} (R10.2)",
        rule="R10.2",
    )


def _create(p: Parser[Any], verb: Token) -> CreateRoute:
    name = p.name("a route name")
    found = _clauses(p)
    if "ADDRESS" not in found:
        t = p.token
        raise RouteDefinitionError(
            f"CREATE ROUTE {name} at {verb.where} has no ADDRESS: expected ADDRESS = 'LOCAL', "
            f"'TRANSPORT' or 'tcp://host:port' among its clauses before {t.describe()} at "
            f"{t.where} (only ADDRESS is required, R10.1)",
            rule="R10.1",
        )
    values = {clause.lower(): value for clause, value in found.items()}
    return CreateRoute(name, **values)  # type: ignore[arg-type]


def _alter(p: Parser[Any], verb: Token) -> AlterRoute:
    name = p.name("a route name")
    return AlterRoute(name, tuple((clause.lower(), value) for clause, value in _clauses(p).items()))


def _drop(p: Parser[Any], verb: Token) -> DropRoute:
    return DropRoute(p.name("a route name"))


# (verb, object) -> reader of the rest of the statement (pybroker.core.tsql.parser.Parser).
ROUTE_STATEMENTS: dict[tuple[str, str], Callable[[Parser[Any], Token], RouteStatement]] = {
    ("CREATE", "ROUTE"): _create,
    ("ALTER", "ROUTE"): _alter,
    ("DROP", "ROUTE"): _drop,
}
