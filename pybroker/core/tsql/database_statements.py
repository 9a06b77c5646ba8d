"""The statements of a script that name databases, as SQL Server writes them: USE name,
CREATE DATABASE name, DROP DATABASE [IF EXISTS] name, ... and ALTER DATABASE name | CURRENT
SET <broker option> [WITH ROLLBACK IMMEDIATE | ROLLBACK AFTER n [SECONDS] | NO_WAIT], where
the broker option is ENABLE_BROKER, DISABLE_BROKER, NEW_BROKER, ERROR_BROKER_CONVERSATIONS,
TRUSTWORTHY ON|OFF or HONOR_BROKER_PRIORITY ON|OFF (SET PARTNER is
pybroker.core.tsql.database_ddl's, on master).

The script runner (pybroker.core.tsql.script) runs them with ``run_database_statement``
through a ``ScriptDatabases``: the instance's databases, by name. What each does, and
where pybroker differs from SQL Server (pybroker/docs/tsql.md says the same):

- USE switches the database the statements after it run in, to the end of the script
  (across GO); only at the top level of a batch (SQL Server refuses it in a procedure,
  error 154; pybroker in any block too). A database that does not exist: error 911.
- CREATE DATABASE makes a database as ``Instance.create_database`` does (its own broker
  identifier, its broker enabled, AutoCreatedLocal); file, collation and WITH options are
  refused. DROP DATABASE removes a user database and all it holds: conversations are
  cleaned up without telling the far side (as WITH CLEANUP), then procedures, services,
  queues, contracts, message types and routes go. The database in use (3702), master and
  msdb (3708) are refused.
- CREATE, DROP and ALTER DATABASE are refused inside BEGIN TRANSACTION, as SQL Server
  refuses them (error 226). The WITH termination clause is read and changes nothing:
  there are no other sessions to roll back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pybroker.core.tsql.error_numbers import TsqlError
from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.parser import Parser
from pybroker.errors import TsqlSyntaxError, UnsupportedOptionError

# ALTER DATABASE ... SET options about the database's broker, and whether each takes ON|OFF.
BROKER_OPTIONS = {"ENABLE_BROKER": False, "DISABLE_BROKER": False, "NEW_BROKER": False,
                  "ERROR_BROKER_CONVERSATIONS": False, "TRUSTWORTHY": True,
                  "HONOR_BROKER_PRIORITY": True}
SYSTEM_DATABASES = ("master", "tempdb", "model", "msdb")


@dataclass(frozen=True, slots=True)
class Use:
    """USE ``database``."""

    database: str
    token: Token


@dataclass(frozen=True, slots=True)
class CreateDatabase:
    name: str
    token: Token


@dataclass(frozen=True, slots=True)
class DropDatabase:
    names: tuple[str, ...]
    if_exists: bool
    token: Token


@dataclass(frozen=True, slots=True)
class AlterDatabaseSet:
    """ALTER DATABASE ``database`` (None: CURRENT) SET ``option`` [ON|OFF: ``value``]."""

    database: str | None
    option: str
    value: bool | None
    token: Token


DATABASE_SCRIPT_STATEMENTS = (Use, CreateDatabase, DropDatabase, AlterDatabaseSet)


def read_use(p: Parser[Any]) -> Use:
    t = p.advance()  # USE
    return Use(p.name("a database name after USE"), t)


def _create_database(p: Parser[Any], verb: Token) -> CreateDatabase:
    name = p.name("a database name")
    t = p.token
    if t.is_word("CONTAINMENT", "ON", "COLLATE", "WITH", "AS", "FOR"):
        raise UnsupportedOptionError(
            f"CREATE DATABASE ... {t.text.upper()} at {t.where} is not supported: a "
            "database is part of the instance file, with SQL Server's default collation; "
            "expected CREATE DATABASE name alone", option=t.text.upper())
    return CreateDatabase(name, verb)


def _drop_database(p: Parser[Any], verb: Token) -> DropDatabase:
    if_exists = p.token.is_word("IF") and p.tokens[p.pos + 1].is_word("EXISTS")
    if if_exists:
        p.advance()
        p.advance()
    names = [p.name("a database name")]
    while p.accept(","):
        names.append(p.name("a database name after ','"))
    return DropDatabase(tuple(names), if_exists, verb)


def read_alter_database_set(p: Parser[Any], verb: Token, database: str | None
                            ) -> AlterDatabaseSet:
    """The rest of ALTER DATABASE name SET, at the option (not PARTNER)."""
    option = p.token
    word = option.text.upper()
    if option.kind != "word" or word not in BROKER_OPTIONS:
        raise UnsupportedOptionError(
            f"ALTER DATABASE ... SET {option.text.upper() or option.describe()} at "
            f"{option.where} is not supported: pybroker sets "
            f"{', '.join(BROKER_OPTIONS)} (and, on master, PARTNER)", option=word)
    p.advance()
    value = None
    if BROKER_OPTIONS[word]:
        value = p.choice(f"ON or OFF after {word}", "ON", "OFF") == "ON"
    if p.token.is_word("WITH"):
        p.advance()
        if p.token.is_word("NO_WAIT"):
            p.advance()
        else:
            p.keyword("ROLLBACK", "ROLLBACK IMMEDIATE, ROLLBACK AFTER n or NO_WAIT after WITH")
            if p.choice("IMMEDIATE or AFTER after ROLLBACK", "IMMEDIATE", "AFTER") == "AFTER":
                if p.token.kind != "number":
                    raise p.expected("a number of seconds after ROLLBACK AFTER")
                p.advance()
                if p.token.is_word("SECONDS"):
                    p.advance()
    elif p.accept(","):
        raise TsqlSyntaxError(
            f"ALTER DATABASE ... SET {word}, at {p.tokens[p.pos - 1].where}: expected one "
            "option per ALTER DATABASE statement here")
    return AlterDatabaseSet(database, word, value, verb)


def alter_database_target(p: Parser[Any]) -> str | None:
    """The database ALTER DATABASE names: a name, or None for CURRENT."""
    if p.token.is_word("CURRENT"):
        p.advance()
        return None
    return p.name("a database name (or CURRENT)")


DATABASE_SCRIPT_GRAMMAR = {
    ("CREATE", "DATABASE"): _create_database,
    ("DROP", "DATABASE"): _drop_database,
}


# -- running them -------------------------------------------------------------------------


class ScriptDatabases(Protocol):
    """The instance's databases, as a script sees them (pybroker.api.database_script)."""

    def database(self, name: str) -> Any: ...

    def database_id(self, name: str) -> int | None: ...

    def create_database(self, name: str) -> None: ...

    def drop_database(self, name: str) -> None: ...

    def set_option(self, name: str, option: str, value: bool | None) -> None: ...


def run_database_statement(databases: ScriptDatabases, statement: object, current: Any,
                           in_transaction: bool) -> Any:
    """Run USE, CREATE, DROP or ALTER DATABASE; returns the database the script is in
    after it (``current``: the one it was in, with its ``name``)."""
    if isinstance(statement, Use):
        if databases.database_id(statement.database) is None:
            raise TsqlError(f"database '{statement.database}' does not exist: make sure "
                            "that the name is entered correctly", 911)
        return databases.database(statement.database)
    verb = {CreateDatabase: "CREATE", DropDatabase: "DROP", AlterDatabaseSet: "ALTER"}[
        type(statement)]
    if in_transaction:
        raise TsqlError(f"{verb} DATABASE statement not allowed within a multi-statement "
                        "transaction: COMMIT or ROLLBACK first", 226)
    if isinstance(statement, CreateDatabase):
        databases.create_database(statement.name)
    elif isinstance(statement, DropDatabase):
        for name in statement.names:
            if databases.database_id(name) is None:
                if statement.if_exists:
                    continue
                raise TsqlError(f"cannot drop the database '{name}', because it does not "
                                "exist", 3701)
            if name.lower() in SYSTEM_DATABASES:
                raise TsqlError(f"cannot drop the database '{name}' because it is a "
                                "system database", 3708)
            if name.lower() == current.name.lower():
                raise TsqlError(f"cannot drop database '{name}' because it is currently in "
                                "use: USE another database first", 3702)
            databases.drop_database(name)
    else:
        assert isinstance(statement, AlterDatabaseSet)
        name = current.name if statement.database is None else statement.database
        if databases.database_id(name) is None:
            raise TsqlError(f"database '{name}' does not exist: make sure that the name "
                            "is entered correctly", 911)
        databases.set_option(name, statement.option, statement.value)
        if name.lower() == current.name.lower():
            return databases.database(name)  # NEW_BROKER gives it a new broker identifier
    return current
