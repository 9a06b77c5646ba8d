"""CREATE ROUTE, ALTER ROUTE and DROP ROUTE in SQL Server's syntax (SPEC R10).

sqlglot returns these statements as an opaque Command, so this is a small, strict parser of
its own: it understands exactly

    CREATE ROUTE name WITH clause [, clause ...]
    ALTER ROUTE name WITH clause [, clause ...]
    DROP ROUTE name

where a clause is SERVICE_NAME, BROKER_INSTANCE, ADDRESS or MIRROR_ADDRESS = 'string', or
LIFETIME = [+|-]whole number; statements may end with ';'. Anything else is refused with the
line and column where understanding stopped. The values themselves are checked by
pybroker.routing.definition.validate_route (R10.2) when the statement runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pybroker.errors import RouteDefinitionError, TsqlSyntaxError, UnsupportedStatementError
from pybroker.tsql.lexer import Token, tokenize

STRING_CLAUSES = ("SERVICE_NAME", "BROKER_INSTANCE", "ADDRESS", "MIRROR_ADDRESS")
CLAUSES = (*STRING_CLAUSES, "LIFETIME")
_VERBS = ("CREATE", "ALTER", "DROP")


@dataclass(frozen=True, slots=True)
class CreateRoute:
    name: str
    address: str
    service_name: str | None = None
    broker_instance: str | None = None
    lifetime: int | None = None
    mirror_address: str | None = None


@dataclass(frozen=True, slots=True)
class AlterRoute:
    """Only the clauses given change; ``changes`` holds (clause, value) pairs with the
    clause names of Database.alter_route ('' removes a value, as in SQL Server)."""

    name: str
    changes: tuple[tuple[str, str | int], ...]


@dataclass(frozen=True, slots=True)
class DropRoute:
    name: str


Statement = CreateRoute | AlterRoute | DropRoute


def parse_batch(text: str) -> list[Statement]:
    """Parse a batch of route DDL; raise TsqlSyntaxError (or a subclass) on anything else."""
    if not isinstance(text, str):
        raise TsqlSyntaxError(f"T-SQL must be text, not {type(text).__name__}")
    parser = _Parser(tokenize(text))
    statements = parser.batch()
    if not statements:
        raise TsqlSyntaxError("the batch holds no statement")
    return statements


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    @property
    def token(self) -> Token:
        return self.tokens[self.pos]

    def advance(self) -> Token:
        token = self.tokens[self.pos]
        if token.kind != "end":
            self.pos += 1
        return token

    def expected(self, what: str) -> TsqlSyntaxError:
        t = self.token
        return TsqlSyntaxError(f"expected {what} but found {t.describe()} at {t.where}")

    def symbol(self, ch: str) -> bool:
        if self.token.kind == "symbol" and self.token.text == ch:
            self.advance()
            return True
        return False

    # -- grammar -----------------------------------------------------------------------

    def batch(self) -> list[Statement]:
        statements: list[Statement] = []
        while self.token.kind != "end":
            if self.symbol(";"):
                continue
            statements.append(self.statement())
            if self.token.kind != "end" and not self.symbol(";") and not self.token.is_word(
                *_VERBS
            ):
                raise self.expected("';' or the next statement")
        return statements

    def statement(self) -> Statement:
        verb = self.token
        if verb.is_word("GO"):
            raise UnsupportedStatementError(
                f"GO at {verb.where} is a client batch separator, not T-SQL; "
                "send each batch to execute() on its own"
            )
        if not verb.is_word(*_VERBS):
            raise UnsupportedStatementError(
                f"{verb.describe()} at {verb.where} does not start a statement execute() runs; "
                "it runs CREATE/ALTER/DROP ROUTE only"
            )
        self.advance()
        kind = self.token
        handler = _STATEMENTS.get((verb.text.upper(), kind.text.upper() if kind.kind == "word"
                                   else ""))
        if handler is None:
            raise UnsupportedStatementError(
                f"{verb.text.upper()} {kind.text.upper() or kind.describe()} at {verb.where} is "
                "not supported: execute() runs CREATE/ALTER/DROP ROUTE only"
            )
        self.advance()
        return handler(self)

    def name(self) -> str:
        t = self.token
        if t.kind == "identifier" or (t.kind == "word" and not t.is_word("WITH")):
            self.advance()
            if t.kind == "identifier" and not t.text:
                raise TsqlSyntaxError(f"an empty route name at {t.where}")
            return t.text
        raise self.expected("a route name")

    def clauses(self) -> dict[str, tuple[Token, str | int]]:
        if self.token.is_word("AUTHORIZATION"):
            raise TsqlSyntaxError(
                f"AUTHORIZATION at {self.token.where} is not supported: pybroker routes have "
                "no owners"
            )
        if not self.token.is_word("WITH"):
            raise self.expected("WITH")
        self.advance()
        found: dict[str, tuple[Token, str | int]] = {}
        while True:
            clause = self.token
            if clause.kind != "word" or clause.text.upper() not in CLAUSES:
                raise self.expected(f"a route clause ({', '.join(CLAUSES)})")
            key = clause.text.upper()
            if key in found:
                raise TsqlSyntaxError(f"{key} is given twice (again at {clause.where})")
            self.advance()
            if not self.symbol("="):
                raise self.expected(f"'=' after {key}")
            found[key] = (clause, self.lifetime() if key == "LIFETIME" else self.string(key))
            if not self.symbol(","):
                return found

    def string(self, clause: str) -> str:
        t = self.token
        if t.kind != "string":
            raise self.expected(f"a string value for {clause} (e.g. N'...')")
        self.advance()
        return t.text

    def lifetime(self) -> int:
        """R10.1: LIFETIME is a whole number of seconds (the sign is checked by R10.2)."""
        start = self.token
        sign = -1 if self.symbol("-") else 1
        if sign == 1:
            self.symbol("+")
        t = self.token
        if t.kind == "number" and t.text.isdigit() and not (
            self.tokens[self.pos + 1].kind == "symbol" and self.tokens[self.pos + 1].text == "."
        ):
            self.advance()
            return sign * int(t.text)
        shown = t.describe()
        raise RouteDefinitionError(
            f"LIFETIME at {start.where} must be a whole number of seconds, not {shown}",
            rule="R10.2",
        )


def _create(p: _Parser) -> CreateRoute:
    name = p.name()
    found = p.clauses()
    if "ADDRESS" not in found:
        raise RouteDefinitionError(
            f"CREATE ROUTE {name} needs ADDRESS (the only clause required)", rule="R10.1"
        )
    values = {k.lower(): v for k, (_, v) in found.items()}
    return CreateRoute(name, **values)  # type: ignore[arg-type]


def _alter(p: _Parser) -> AlterRoute:
    name = p.name()
    found = p.clauses()
    return AlterRoute(name, tuple((k.lower(), v) for k, (_, v) in found.items()))


def _drop(p: _Parser) -> DropRoute:
    return DropRoute(p.name())


_STATEMENTS: dict[tuple[str, str], Callable[[_Parser], Statement]] = {
    ("CREATE", "ROUTE"): _create,
    ("ALTER", "ROUTE"): _alter,
    ("DROP", "ROUTE"): _drop,
}
