"""A batch of the T-SQL that ``Database.execute()`` runs: route DDL (SPEC R10) and the
object DDL of MESSAGE TYPE, CONTRACT, QUEUE and SERVICE, mixed in any order; on
master also ENDPOINT and CERTIFICATE DDL (pybroker.core.tsql.endpoint_ddl) and ALTER DATABASE ...
SET PARTNER (pybroker.core.tsql.database_ddl)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pybroker.core.tsql.database_ddl import (
    DATABASE_STATEMENTS,
    OTHER_DATABASE_STATEMENTS,
    DatabaseStatement,
)
from pybroker.core.tsql.endpoint_ddl import (
    ENDPOINT_STATEMENTS,
    MASTER_ONLY_REFUSALS,
    EndpointStatement,
)
from pybroker.core.tsql.lexer import Token, tokenize
from pybroker.core.tsql.object_ddl import ObjectStatement
from pybroker.core.tsql.object_parser import OBJECT_REFUSALS, OBJECT_STATEMENTS
from pybroker.core.tsql.parser import Parser
from pybroker.core.tsql.principal_ddl import (
    MASTER_PRINCIPAL_READERS,
    MASTER_PRINCIPAL_REFUSALS,
    PRINCIPAL_STATEMENTS,
    PrincipalStatement,
)
from pybroker.core.tsql.priority_ddl import PRIORITY_STATEMENTS, PriorityStatement
from pybroker.core.tsql.route_ddl import ROUTE_STATEMENTS, RouteStatement
from pybroker.errors import TsqlSyntaxError

Statement = (RouteStatement | ObjectStatement | EndpointStatement | DatabaseStatement
             | PriorityStatement | PrincipalStatement)

# Route statements first: their order is the order messages list what execute() runs.
_STATEMENTS: dict[tuple[str, str], Callable[[Parser[Any], Token], Statement]] = {
    **ROUTE_STATEMENTS,
    **OBJECT_STATEMENTS,
    **PRIORITY_STATEMENTS,
}
_OTHER_STATEMENTS: dict[tuple[str, str], Callable[[Parser[Any], Token], Statement]] = {
    **_STATEMENTS,
    **OTHER_DATABASE_STATEMENTS,
    **PRINCIPAL_STATEMENTS,
}
_MASTER_STATEMENTS: dict[tuple[str, str], Callable[[Parser[Any], Token], Statement]] = {
    **_STATEMENTS,
    **ENDPOINT_STATEMENTS,
    **DATABASE_STATEMENTS,
    **PRINCIPAL_STATEMENTS,
    **MASTER_PRINCIPAL_READERS,
}


def parse_batch(text: str, *, master: bool = False) -> list[Statement]:
    """Parse a batch into statements, in order, without running anything.

    ``master``: the batch is for the master database, which also runs CREATE/ALTER/DROP
    ENDPOINT and CREATE/DROP CERTIFICATE (elsewhere they are refused, pointing at master).

    Raises UnsupportedStatementError for a statement of another kind (CREATE TABLE, SELECT,
    CREATE REMOTE SERVICE BINDING, ALTER CONTRACT, GO, ...), TsqlSyntaxError for text that
    is malformed or holds no statement, or that uses a clause pybroker does not run (route
    AUTHORIZATION, a queue's ON filegroup, ...; UnsupportedOptionError for an endpoint's or
    certificate's), and RouteDefinitionError for a CREATE ROUTE without ADDRESS (R10.1) or
    a LIFETIME that is not a whole number (R10.2).
    """
    if not isinstance(text, str):
        raise TsqlSyntaxError(f"T-SQL must be text, not {type(text).__name__}")
    if not isinstance(master, bool):
        raise TsqlSyntaxError(f"master must be True or False, not {master!r}")
    return ddl_parser(tokenize(text), master=master).batch()


def ddl_parser(tokens: list[Token], *, master: bool = False) -> Parser[Statement]:
    """The parser of the DDL statements over ``tokens`` (a batch of conversation statements,
    pybroker.core.tsql.conversation_parser, reads its DDL with it)."""
    return Parser(tokens, *ddl_grammar(master))


def ddl_grammar(master: bool) -> tuple[
        dict[tuple[str, str], Callable[[Parser[Any], Token], Statement]],
        dict[tuple[str, str], Any]]:
    """The DDL statements of master or of another database, and the refusals there (USE
    switches between them, Parser.use_grammar)."""
    if master:
        return _MASTER_STATEMENTS, OBJECT_REFUSALS
    return _OTHER_STATEMENTS, {**OBJECT_REFUSALS, **MASTER_ONLY_REFUSALS,
                               **MASTER_PRINCIPAL_REFUSALS}
