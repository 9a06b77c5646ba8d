"""CREATE ROUTE, ALTER ROUTE and DROP ROUTE in SQL Server's syntax (SPEC R10).

sqlglot returns these statements as an opaque Command, so this is a small, strict parser of
its own. It understands exactly

    CREATE ROUTE name WITH clause [, clause ...] [;]
    ALTER ROUTE name WITH clause [, clause ...] [;]
    DROP ROUTE name [;]

where a clause is SERVICE_NAME, BROKER_INSTANCE, ADDRESS or MIRROR_ADDRESS = 'string'
(N'string' too), or LIFETIME = [+|-]whole number, in any order, each at most once. A batch
holds one or more statements, with or without ';' between them. Anything else is refused
with the line and column where understanding stopped and what was expected there.

Only the syntax is checked here, plus the two rules the syntax alone decides: ADDRESS is
required in CREATE (R10.1) and LIFETIME is a whole number (R10.2). The values themselves
(addresses, GUIDs, combinations, lengths, signs) are checked by
pybroker.routing.definition.validate_route when the statement runs (R10.2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pybroker.errors import RouteDefinitionError, TsqlSyntaxError, UnsupportedStatementError
from pybroker.tsql.lexer import Token, tokenize

# Clause names as SQL Server spells them, and as Database.create_route/alter_route take them.
CLAUSES = ("SERVICE_NAME", "BROKER_INSTANCE", "LIFETIME", "ADDRESS", "MIRROR_ADDRESS")

# Words that begin a T-SQL statement pybroker does not run: refused as unsupported rather
# than as malformed, and, after a route statement, taken as the start of the next statement.
_OTHER_STATEMENT_TEXT = """
    SELECT INSERT UPDATE DELETE MERGE TRUNCATE EXEC EXECUTE DECLARE SET USE PRINT RAISERROR
    THROW IF WHILE BEGIN END COMMIT ROLLBACK SAVE RETURN GRANT REVOKE DENY BACKUP RESTORE DBCC
    WAITFOR SEND RECEIVE MOVE GET ENABLE DISABLE BULK OPEN CLOSE FETCH DEALLOCATE CHECKPOINT
    KILL SHUTDOWN RECONFIGURE
"""
_OTHER_STATEMENT_WORDS = frozenset(_OTHER_STATEMENT_TEXT.split())
_VERBS = ("CREATE", "ALTER", "DROP")
_ROUTE_ONLY = "execute() runs CREATE/ALTER/DROP ROUTE only"
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


Statement = CreateRoute | AlterRoute | DropRoute


def parse_batch(text: str) -> list[Statement]:
    """Parse a batch of route DDL into statements, in order, without running anything.

    Raises UnsupportedStatementError for a statement of another kind (CREATE QUEUE, SELECT,
    GO, ...), TsqlSyntaxError for text that is malformed or holds no statement, and
    RouteDefinitionError for a CREATE without ADDRESS (R10.1) or a LIFETIME that is not a
    whole number (R10.2).
    """
    if not isinstance(text, str):
        raise TsqlSyntaxError(f"T-SQL must be text, not {type(text).__name__}")
    return _Parser(tokenize(text)).batch()


class _Parser:
    """Recursive descent over the tokens; ``pos`` is the token being looked at."""

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

    def accept(self, symbol: str) -> bool:
        if self.token.is_symbol(symbol):
            self.advance()
            return True
        return False

    def expected(self, what: str) -> TsqlSyntaxError:
        t = self.token
        return TsqlSyntaxError(f"expected {what} but found {t.describe()} at {t.where}")

    def starts_statement(self) -> bool:
        return self.token.is_word(*_VERBS, "GO", *_OTHER_STATEMENT_WORDS)

    # -- grammar -----------------------------------------------------------------------

    def batch(self) -> list[Statement]:
        statements: list[Statement] = []
        while True:
            while self.accept(";"):
                pass
            if self.token.kind == "end":
                break
            statements.append(self.statement())
            if self.token.kind == "end" or self.accept(";") or self.starts_statement():
                continue
            raise self.expected("';' or the next statement")
        if not statements:
            end = self.token
            raise TsqlSyntaxError(
                f"the batch holds no statement: expected CREATE ROUTE, ALTER ROUTE or DROP ROUTE "
                f"but found {end.describe()} at {end.where}"
            )
        return statements

    def statement(self) -> Statement:
        verb = self.token
        if verb.is_word("GO"):
            raise UnsupportedStatementError(
                f"GO at {verb.where} is not supported: it is a batch separator of client tools "
                "(sqlcmd, SSMS), not T-SQL; expected ';' or the next statement. Pass each batch "
                "to execute() on its own"
            )
        if verb.is_word(*_OTHER_STATEMENT_WORDS):
            raise UnsupportedStatementError(
                f"{verb.text.upper()} at {verb.where} is not supported: {_ROUTE_ONLY}"
            )
        if not verb.is_word(*_VERBS):
            raise self.expected("CREATE ROUTE, ALTER ROUTE or DROP ROUTE")
        self.advance()
        kind = self.token
        if kind.kind != "word":
            raise self.expected(f"the kind of object to {verb.text.upper()} (ROUTE)")
        handler = _STATEMENTS.get((verb.text.upper(), kind.text.upper()))
        if handler is None:
            raise UnsupportedStatementError(
                f"{verb.text.upper()} {kind.text.upper()} at {verb.where} is not supported: "
                f"{_ROUTE_ONLY}"
            )
        self.advance()
        return handler(self, verb)

    def name(self) -> str:
        """A route name: plain, [bracketed] or "quoted"; never WITH, a variable or a temp."""
        t = self.token
        if t.kind == "identifier":
            if not t.text:
                raise self.expected("a route name (it must not be empty)")
        elif t.kind != "word" or t.is_word("WITH") or t.text[0] in "@#":
            raise self.expected("a route name")
        self.advance()
        return t.text

    def clauses(self) -> dict[str, str | int]:
        """WITH clause [, clause ...]: each clause once, in any order (R10)."""
        if self.token.is_word("AUTHORIZATION"):
            raise TsqlSyntaxError(
                f"AUTHORIZATION at {self.token.where} is not supported: pybroker routes have "
                "no owners; expected WITH (remove the AUTHORIZATION clause)"
            )
        if not self.token.is_word("WITH"):
            raise self.expected("WITH")
        self.advance()
        found: dict[str, str | int] = {}
        first_seen: dict[str, Token] = {}
        while True:
            clause = self.token
            if clause.kind != "word":
                raise self.expected(f"a route clause ({', '.join(CLAUSES)})")
            key = clause.text.upper()
            if key not in CLAUSES:
                raise TsqlSyntaxError(
                    f"unknown route clause {clause.text} at {clause.where}: expected one of "
                    f"{', '.join(CLAUSES)}"
                )
            if key in first_seen:
                raise TsqlSyntaxError(
                    f"{key} is given twice (first at {first_seen[key].where}, again at "
                    f"{clause.where}): expected each clause at most once"
                )
            first_seen[key] = clause
            self.advance()
            if not self.accept("="):
                raise self.expected(f"'=' after {key}")
            found[key] = self.lifetime() if key == "LIFETIME" else self.string(key)
            if self.accept(","):
                continue
            if self.token.kind == "word" and self.token.text.upper() in CLAUSES:
                raise self.expected(f"',' before {self.token.text.upper()}")
            return found

    def string(self, clause: str) -> str:
        t = self.token
        if t.kind != "string":
            hint = " (strings take single quotes)" if t.kind == "identifier" else ""
            raise self.expected(f"a string value for {clause}, such as N'...'{hint},")
        self.advance()
        return t.text

    def lifetime(self) -> int:
        """LIFETIME = [+|-]digits (R10.1). The sign is kept, so that validate_route refuses
        a lifetime that is not positive by R10.2; any other value is refused here (R10.2)."""
        start = self.token
        sign = -1 if self.accept("-") else 1
        if sign == 1:
            self.accept("+")
        t = self.token
        if t.kind == "number" and t.text.isascii() and t.text.isdigit():
            digits = t.text.lstrip("0") or "0"
            if len(digits) <= _LONGEST_LIFETIME_DIGITS:
                self.advance()
                return sign * int(digits)
            shown = f"a number of {len(digits)} digits, larger than the largest allowed"
        elif t.kind in ("symbol", "end") and not t.is_symbol("."):
            raise self.expected("a whole number of seconds for LIFETIME")
        else:
            shown = t.describe()
        raise RouteDefinitionError(
            f"LIFETIME must be a whole number of seconds: expected digits such as 600 but found "
            f"{shown} at {start.where} (R10.2)",
            rule="R10.2",
        )


def _create(p: _Parser, verb: Token) -> CreateRoute:
    name = p.name()
    found = p.clauses()
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


def _alter(p: _Parser, verb: Token) -> AlterRoute:
    name = p.name()
    return AlterRoute(name, tuple((clause.lower(), value) for clause, value in p.clauses().items()))


def _drop(p: _Parser, verb: Token) -> DropRoute:
    return DropRoute(p.name())


# (verb, object) -> parser of the rest of the statement; any other pair is unsupported.
_STATEMENTS: dict[tuple[str, str], Callable[[_Parser, Token], Statement]] = {
    ("CREATE", "ROUTE"): _create,
    ("ALTER", "ROUTE"): _alter,
    ("DROP", "ROUTE"): _drop,
}
