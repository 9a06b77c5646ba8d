"""A batch of the T-SQL that ``Database.execute()`` runs: route DDL (SPEC R10) and the
object DDL of MESSAGE TYPE, CONTRACT, QUEUE and SERVICE (issue 3), mixed in any order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pybroker.errors import TsqlSyntaxError
from pybroker.tsql.lexer import Token, tokenize
from pybroker.tsql.object_ddl import ObjectStatement
from pybroker.tsql.object_parser import OBJECT_REFUSALS, OBJECT_STATEMENTS
from pybroker.tsql.parser import Parser
from pybroker.tsql.route_ddl import ROUTE_STATEMENTS, RouteStatement

Statement = RouteStatement | ObjectStatement

# Route statements first: their order is the order messages list what execute() runs.
_STATEMENTS: dict[tuple[str, str], Callable[[Parser[Any], Token], Statement]] = {
    **ROUTE_STATEMENTS,
    **OBJECT_STATEMENTS,
}


def parse_batch(text: str) -> list[Statement]:
    """Parse a batch into statements, in order, without running anything.

    Raises UnsupportedStatementError for a statement of another kind (CREATE TABLE, SELECT,
    CREATE REMOTE SERVICE BINDING, ALTER CONTRACT, GO, ...), TsqlSyntaxError for text that
    is malformed or holds no statement, or that uses a clause pybroker does not run (route
    AUTHORIZATION, queue ACTIVATION, ...), and RouteDefinitionError for a CREATE ROUTE
    without ADDRESS (R10.1) or a LIFETIME that is not a whole number (R10.2).
    """
    if not isinstance(text, str):
        raise TsqlSyntaxError(f"T-SQL must be text, not {type(text).__name__}")
    return Parser(tokenize(text), _STATEMENTS, OBJECT_REFUSALS).batch()
