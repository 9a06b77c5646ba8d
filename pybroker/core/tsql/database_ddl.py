"""ALTER DATABASE ... SET PARTNER in SQL Server's syntax: a database's part in a mirrored
pair (SPEC R9), run by the ``master`` database's ``execute()`` (Database.run_statements
runs it with ``set_mirroring`` and ``fail_over``, pybroker.kernel.mirroring).

It understands exactly

    ALTER DATABASE name SET PARTNER = 'tcp://host:port'
    ALTER DATABASE name SET PARTNER FAILOVER
    ALTER DATABASE name SET PARTNER OFF

Choices, where pybroker differs from SQL Server: there is no mirroring session, so SET
PARTNER = names the partner and makes the database PRINCIPAL unless it is already the
MIRROR (its role is kept); a mirror is made with SET PARTNER = on it, then SET PARTNER
FAILOVER. FAILOVER flips the role of this side only: run it on both partners (the sender
follows whichever says it is principal, R9.3). SET PARTNER is refused outside master; the
broker options of SET (ENABLE_BROKER, TRUSTWORTHY, ...) are
pybroker.core.tsql.database_statements', in any database, as are CREATE and DROP DATABASE.
Only the syntax is checked here; whether the database exists is checked when it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from pybroker.core.tsql.database_statements import (
    DATABASE_SCRIPT_GRAMMAR,
    AlterDatabaseSet,
    CreateDatabase,
    DropDatabase,
    alter_database_target,
    read_alter_database_set,
)
from pybroker.core.tsql.endpoint_ddl import MAX_TEXT
from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.parser import Parser
from pybroker.errors import MasterOnlyError, TsqlSyntaxError

Action = Literal["PARTNER", "FAILOVER", "OFF"]


@dataclass(frozen=True, slots=True)
class AlterDatabasePartner:
    """ALTER DATABASE ``database`` SET PARTNER ...: ``action`` PARTNER (= ``partner``),
    FAILOVER or OFF."""

    database: str
    action: Action
    partner: str | None = None


def _alter_database(p: Parser[Any], verb: Token, *, master: bool = True
                    ) -> AlterDatabasePartner | AlterDatabaseSet:
    """ALTER DATABASE name SET PARTNER ... (on master), or SET a broker option
    (pybroker.core.tsql.database_statements, in any database)."""
    target = alter_database_target(p)
    p.keyword("SET", "SET PARTNER, or SET and a broker option, after the database name")
    option = p.token
    if not option.is_word("PARTNER"):
        return read_alter_database_set(p, verb, target)
    if not master:
        raise MasterOnlyError(f"ALTER DATABASE ... SET PARTNER at {verb.where}",
                              reason="a database's mirroring partner is set from master")
    if target is None:
        raise TsqlSyntaxError(f"ALTER DATABASE CURRENT SET PARTNER at {verb.where}: "
                              "expected the database's name (it is set from master)")
    name = target
    p.advance()
    if p.accept("="):
        t = p.token
        if t.kind != "string" or not t.text or len(t.text) > MAX_TEXT:
            raise p.expected("the partner's address as a string, such as "
                             "'tcp://partner:4022',")
        p.advance()
        return AlterDatabasePartner(name, "PARTNER", t.text)
    action = p.choice("'=' and the partner's address, FAILOVER or OFF after PARTNER",
                      "FAILOVER", "OFF")
    return AlterDatabasePartner(name, "FAILOVER" if action == "FAILOVER" else "OFF")


DatabaseStatement = AlterDatabasePartner | AlterDatabaseSet | CreateDatabase | DropDatabase
DATABASE_STATEMENTS: dict[tuple[str, str],
                          Callable[[Parser[Any], Token], DatabaseStatement]] = {
    ("ALTER", "DATABASE"): _alter_database,
    **DATABASE_SCRIPT_GRAMMAR,
}
# Outside master: SET PARTNER refused as master's, the broker options run.
OTHER_DATABASE_STATEMENTS: dict[tuple[str, str],
                                Callable[[Parser[Any], Token], DatabaseStatement]] = {
    ("ALTER", "DATABASE"): partial(_alter_database, master=False),
    **DATABASE_SCRIPT_GRAMMAR,
}
