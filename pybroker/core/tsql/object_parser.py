"""MESSAGE TYPE, CONTRACT, QUEUE and SERVICE DDL in SQL Server's syntax (SPEC C2-C3).

Read with the shared strict parser (pybroker.core.tsql.parser.Parser) into the dataclasses of
pybroker.core.tsql.object_ddl. It understands exactly

    CREATE MESSAGE TYPE name [AUTHORIZATION owner] [VALIDATION = NONE | EMPTY | WELL_FORMED_XML]
    ALTER MESSAGE TYPE name VALIDATION = NONE | EMPTY | WELL_FORMED_XML
    DROP MESSAGE TYPE name
    CREATE CONTRACT name [AUTHORIZATION owner]
        (message_type SENT BY INITIATOR | TARGET | ANY [, ...])
    DROP CONTRACT name
    CREATE QUEUE queue [WITH setting [[,] setting ...]]
    ALTER QUEUE queue WITH setting [[,] setting ...]
    DROP QUEUE queue
    CREATE SERVICE name [AUTHORIZATION owner] ON QUEUE queue [(contract [, ...])]
    ALTER SERVICE name [ON QUEUE queue] [(ADD CONTRACT c | DROP CONTRACT c [, ...])]
    DROP SERVICE name

where a queue setting is STATUS = ON|OFF, RETENTION = ON|OFF, POISON_MESSAGE_HANDLING
(STATUS = ON|OFF) or ACTIVATION (...), in any order, each at most once, the commas between
them optional as in SQL Server's grammar. ACTIVATION takes STATUS = ON|OFF,
PROCEDURE_NAME = [db.][schema.]proc (a stored procedure) or [module.path:function] (a
Python callable, pybroker.core.activation), MAX_QUEUE_READERS = 0..32767 and EXECUTE AS
SELF|OWNER|'user', in any order, each at most once;
CREATE QUEUE needs PROCEDURE_NAME and MAX_QUEUE_READERS, and ALTER QUEUE also takes
ACTIVATION (DROP). Names are plain, [bracketed] or "quoted" ([//Adventure-Works.com/
Expenses/SubmitExpense] is one name); the default message type and contract are written
[DEFAULT], DEFAULT being a reserved word. A message type in a contract, and a contract in a
service's list, is named at most once. ALTER SERVICE takes ON QUEUE, a contract list or both.

Choices, where pybroker differs from SQL Server:
- AUTHORIZATION owner is read and ignored: pybroker has no database principals, so every
  object belongs to its database (scripts written for SQL Server run unchanged).
- A queue name may be two-part, but pybroker has one schema: ``dbo.q`` and ``[dbo].[q]``
  are the queue ``q`` (dbo in any case, as SQL Server's default collation compares it);
  another schema, or a three-part name, is refused.
- EXECUTE AS may be left out of ACTIVATION (SELF is meant), where SQL Server requires it:
  pybroker has no principals, so SELF, OWNER and 'user' all run the procedure in the
  process that runs activation ('user' is kept, as shown); CALLER is refused, as in SQL
  Server.
- Refused, each with a message naming it: VALIDATION = VALID_XML WITH SCHEMA COLLECTION (no
  XML schema collections), ON filegroup (a queue lives in the DuckDB file), ALTER QUEUE
  REBUILD, REORGANIZE and MOVE TO (nothing to rebuild or move), ALTER SERVICE ... WITH
  (MIGRATE_MESSAGES ...), and ALTER CONTRACT, which SQL Server does not have either.

Only the syntax is checked here; whether the named objects exist, and name lengths, are
checked when the statement runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar, cast

import pybroker.core.tsql.object_ddl as ddl
from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.object_ddl import MAX_QUEUE_READERS
from pybroker.core.tsql.parser import Parser
from pybroker.errors import TsqlSyntaxError

_VALIDATIONS = ("NONE", "EMPTY", "WELL_FORMED_XML")
_SENDERS = ("INITIATOR", "TARGET", "ANY")
_QUEUE_SETTINGS = ("STATUS", "RETENTION", "POISON_MESSAGE_HANDLING", "ACTIVATION")
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_@$#]*")  # a name part that needs no brackets
_ACTIVATION_SETTINGS = ("STATUS", "PROCEDURE_NAME", "MAX_QUEUE_READERS", "EXECUTE")
_ON_OFF = ("ON", "OFF")
T = TypeVar("T")


# -- pieces shared by several statements ---------------------------------------------------


def _authorization(p: Parser[Any]) -> None:
    """[AUTHORIZATION owner]: read and ignored, pybroker has no principals."""
    if p.token.is_word("AUTHORIZATION"):
        p.advance()
        p.name("an owner name after AUTHORIZATION")


def queue_name(p: Parser[Any]) -> str:
    """queue or schema.queue, where the only schema is dbo."""
    first = p.token
    name = p.name("a queue name")
    if not p.accept("."):
        return name
    queue = p.name(f"a queue name after {name}.")
    if p.token.is_symbol("."):
        raise TsqlSyntaxError(
            f"the three-part queue name {name}.{queue}.… at {first.where} is not supported: "
            "a queue lives in the Database it is created in; expected the queue name alone "
            "or as dbo.name"
        )
    if name.upper() != "DBO":
        raise TsqlSyntaxError(
            f"the schema {name} at {first.where} is not supported: pybroker has one schema, "
            f"dbo; expected {queue} or dbo.{queue}"
        )
    return queue


def _contract(p: Parser[Any]) -> str:
    return p.name("a contract name ([DEFAULT] for the default contract)")


def _validation(p: Parser[Any]) -> ddl.Validation:
    """VALIDATION = NONE | EMPTY | WELL_FORMED_XML."""
    p.keyword("VALIDATION", "VALIDATION")
    p.require("=", "'=' after VALIDATION")
    if p.token.is_word("VALID_XML"):
        raise TsqlSyntaxError(
            f"VALIDATION = VALID_XML WITH SCHEMA COLLECTION at {p.token.where} is not "
            "supported: pybroker has no XML schema collections; expected NONE, EMPTY or "
            "WELL_FORMED_XML"
        )
    return cast(ddl.Validation, p.choice("NONE, EMPTY or WELL_FORMED_XML", *_VALIDATIONS))


def _on_off(p: Parser[Any], setting: str) -> bool:
    return p.choice(f"ON or OFF for {setting}", *_ON_OFF) == "ON"


def _queue_settings(p: Parser[Any], verb: str) -> dict[str, Any]:
    """WITH setting [[,] setting ...] (commas optional, as SQL Server's grammar has them);
    keys are the dataclass fields."""
    p.keyword("WITH", "WITH")
    found: dict[str, Any] = {}
    seen: dict[str, Token] = {}
    while True:
        t = p.token
        if not t.is_word(*_QUEUE_SETTINGS):
            raise p.expected("a queue setting (STATUS, RETENTION, POISON_MESSAGE_HANDLING or "
                             "ACTIVATION)")
        key = t.text.upper()
        p.once(key, t, seen, "queue setting")
        p.advance()
        if key == "POISON_MESSAGE_HANDLING":
            p.require("(", "'(' after POISON_MESSAGE_HANDLING")
            p.keyword("STATUS", "STATUS in POISON_MESSAGE_HANDLING (STATUS = ON|OFF)")
            p.require("=", "'=' after STATUS")
            found[key.lower()] = _on_off(p, "POISON_MESSAGE_HANDLING STATUS")
            p.require(")", "')' closing POISON_MESSAGE_HANDLING")
        elif key == "ACTIVATION":
            found.update(_activation(p, t, verb))
        else:
            p.require("=", f"'=' after {key}")
            found[key.lower()] = _on_off(p, key)
        if not p.accept(",") and not p.token.is_word(*_QUEUE_SETTINGS):
            return found


def _activation(p: Parser[Any], at: Token, verb: str) -> dict[str, Any]:
    """ACTIVATION ( [STATUS = ON|OFF] [,] PROCEDURE_NAME = [module.path:function] [,]
    MAX_QUEUE_READERS = n [,] EXECUTE AS SELF|OWNER ) or, in ALTER QUEUE, ACTIVATION (DROP).
    CREATE QUEUE needs PROCEDURE_NAME and MAX_QUEUE_READERS, as in SQL Server."""
    p.require("(", "'(' after ACTIVATION")
    if p.token.is_word("DROP"):
        drop = p.advance()
        if verb == "CREATE":
            raise TsqlSyntaxError(
                f"ACTIVATION (DROP) at {drop.where} is for ALTER QUEUE: a queue being created "
                "has no activation to drop; expected STATUS, PROCEDURE_NAME, "
                "MAX_QUEUE_READERS or EXECUTE AS")
        p.require(")", "')' after ACTIVATION (DROP)")
        return {"drop_activation": True}
    found: dict[str, Any] = {}
    seen: dict[str, Token] = {}
    while True:
        t = p.token
        if not t.is_word(*_ACTIVATION_SETTINGS):
            raise p.expected("an activation setting (STATUS, PROCEDURE_NAME, "
                             "MAX_QUEUE_READERS or EXECUTE AS)")
        key = t.text.upper()
        p.once(f"ACTIVATION {key}", t, seen, "activation setting")
        p.advance()
        if key == "EXECUTE":
            p.keyword("AS", "AS after EXECUTE")
            found["execute_as"] = _execute_as(p)
        else:
            p.require("=", f"'=' after {key}")
            if key == "STATUS":
                found["activation_status"] = _on_off(p, "ACTIVATION STATUS")
            elif key == "PROCEDURE_NAME":
                found["activation_procedure"] = _procedure_name(p)
            else:
                found["max_queue_readers"] = _max_queue_readers(p)
        if p.accept(")"):
            break
        p.accept(",")
        if p.token.is_symbol(")"):  # ACTIVATION (..., ) reads as a setting left out
            raise p.expected("an activation setting after ','")
    if verb == "CREATE":
        for key, field in (("PROCEDURE_NAME", "activation_procedure"),
                           ("MAX_QUEUE_READERS", "max_queue_readers")):
            if field not in found:
                raise TsqlSyntaxError(
                    f"ACTIVATION at {at.where} has no {key}: CREATE QUEUE ... WITH ACTIVATION "
                    "needs PROCEDURE_NAME and MAX_QUEUE_READERS, as in SQL Server")
    return found


def _procedure_name(p: Parser[Any]) -> str:
    """[db.][schema.]proc: a stored procedure of the queue's database, kept as T-SQL
    writes it (a part bracketed where it is no plain identifier); or
    [module.path:function]: a Python callable, written as one bracketed or quoted name (its
    dots and colon are not T-SQL's name separators)."""
    parts = [p.name("the activation procedure: a stored procedure ([db.][schema.]proc) or "
                    "a Python callable as [module.path:function]")]
    while p.token.is_symbol(".") and len(parts) < 3:
        p.advance()
        parts.append(p.name("a part of the procedure's name after '.'"))
    if p.token.is_symbol("."):
        raise p.expected("',' or ')' after the procedure's name",
                         " (a procedure's name has at most 3 parts: db.schema.proc)")
    if len(parts) == 1 and ":" in parts[0]:
        return parts[0]  # a Python callable
    return ".".join(part if _PLAIN.fullmatch(part) else "[" + part.replace("]", "]]") + "]"
                    for part in parts)


def _max_queue_readers(p: Parser[Any]) -> int:
    t = p.token
    if t.kind == "number" and t.text.isascii() and t.text.isdigit():
        if len(t.text) <= 5 and int(t.text) <= MAX_QUEUE_READERS:
            p.advance()
            return int(t.text)
        raise TsqlSyntaxError(
            f"MAX_QUEUE_READERS = {t.text[:20]} at {t.where} is out of range: expected a "
            f"whole number from 0 to {MAX_QUEUE_READERS}")
    raise p.expected(f"a whole number from 0 to {MAX_QUEUE_READERS} for MAX_QUEUE_READERS")


def _execute_as(p: Parser[Any]) -> str:
    """SELF, OWNER or 'user' (kept: pybroker has no principals to be, and runs the
    procedure in the process that runs activation); CALLER is refused, as SQL Server
    refuses it for a queue."""
    t = p.token
    if t.kind == "string":
        if not t.text.strip() or len(t.text) > 128:
            raise p.expected("a user's name of 1 to 128 characters after EXECUTE AS")
        return p.advance().text
    if t.is_word("CALLER"):
        raise TsqlSyntaxError(
            f"EXECUTE AS CALLER at {t.where} is not supported: a queue's activation runs as "
            "SELF, OWNER or 'user', as in SQL Server")
    return p.choice("SELF, OWNER or 'user' after EXECUTE AS", "SELF", "OWNER")


def _refuse_filegroup(p: Parser[Any]) -> None:
    if p.token.is_word("ON"):
        raise TsqlSyntaxError(
            f"ON filegroup at {p.token.where} is not supported: pybroker keeps every queue in "
            "its DuckDB file; expected ';' or the next statement (remove the ON clause)"
        )


def _items(p: Parser[Any], what: str, read: Callable[[], T], name: Callable[[T], str]) -> list[T]:
    """item [, item ...] ) after the '(': the items in the order written, at least one,
    and no item's ``name`` (of a ``what``) twice: SQL Server refuses a message type listed
    twice in a contract, and a service's contract list is held to the same."""
    items: list[T] = []
    seen: dict[str, Token] = {}
    while True:
        t = p.token
        items.append(read())
        p.once(f"the {what} [{name(items[-1])}]", t, seen, what)
        if not p.accept(","):
            p.require(")", f"',' or ')' after the {what} [{name(items[-1])}]")
            return items


# -- MESSAGE TYPE --------------------------------------------------------------------------


def _create_message_type(p: Parser[Any], verb: Token) -> ddl.CreateMessageType:
    name = p.name("a message type name")
    _authorization(p)
    if p.token.is_word("VALIDATION"):
        return ddl.CreateMessageType(name, _validation(p))
    return ddl.CreateMessageType(name)


def _alter_message_type(p: Parser[Any], verb: Token) -> ddl.AlterMessageType:
    name = p.name("a message type name")
    return ddl.AlterMessageType(name, _validation(p))


def _drop_message_type(p: Parser[Any], verb: Token) -> ddl.DropMessageType:
    return ddl.DropMessageType(p.name("a message type name"))


# -- CONTRACT ------------------------------------------------------------------------------


def _create_contract(p: Parser[Any], verb: Token) -> ddl.CreateContract:
    name = p.name("a contract name")
    _authorization(p)
    p.require("(", "'(' and the message types of the contract")

    def message() -> tuple[str, ddl.SentBy]:
        message_type = p.name("a message type name ([DEFAULT] for the default type)")
        p.keyword("SENT", f"SENT BY after the message type [{message_type}]")
        p.keyword("BY", "BY after SENT")
        sender = p.choice("INITIATOR, TARGET or ANY after SENT BY", *_SENDERS)
        return message_type, cast(ddl.SentBy, sender)

    messages = _items(p, "message type", message, lambda m: m[0])
    return ddl.CreateContract(name, tuple(messages))


def _drop_contract(p: Parser[Any], verb: Token) -> ddl.DropContract:
    return ddl.DropContract(p.name("a contract name"))


# -- QUEUE ---------------------------------------------------------------------------------


def _create_queue(p: Parser[Any], verb: Token) -> ddl.CreateQueue:
    name = queue_name(p)
    settings = _queue_settings(p, "CREATE") if p.token.is_word("WITH") else {}
    _refuse_filegroup(p)
    return ddl.CreateQueue(name, **settings)


def _alter_queue(p: Parser[Any], verb: Token) -> ddl.AlterQueue:
    name = queue_name(p)
    t = p.token
    if t.is_word("REBUILD", "REORGANIZE", "MOVE"):
        raise TsqlSyntaxError(
            f"ALTER QUEUE {name} {t.text.upper()} at {t.where} is not supported: a pybroker "
            "queue has no indexes to rebuild or reorganize and no filegroup to move to; "
            "expected WITH"
        )
    return ddl.AlterQueue(name, **_queue_settings(p, "ALTER"))


def _drop_queue(p: Parser[Any], verb: Token) -> ddl.DropQueue:
    return ddl.DropQueue(queue_name(p))


# -- SERVICE -------------------------------------------------------------------------------


def _create_service(p: Parser[Any], verb: Token) -> ddl.CreateService:
    name = p.name("a service name")
    _authorization(p)
    p.keyword("ON", "ON QUEUE")
    p.keyword("QUEUE", "QUEUE after ON")
    queue = queue_name(p)
    contracts = _items(p, "contract", lambda: _contract(p), str) if p.accept("(") else []
    return ddl.CreateService(name, queue, tuple(contracts))


def _alter_service(p: Parser[Any], verb: Token) -> ddl.AlterService:
    name = p.name("a service name")
    queue = None
    if p.token.is_word("ON"):
        p.advance()
        p.keyword("QUEUE", "QUEUE after ON")
        queue = queue_name(p)
        if p.token.is_word("WITH"):
            raise TsqlSyntaxError(
                f"WITH (MIGRATE_MESSAGES ...) at {p.token.where} is not supported: ON QUEUE "
                "always moves the service's messages to the new queue, as SQL Server documents; "
                "expected '(' with ADD CONTRACT or DROP CONTRACT, ';' or the next statement"
            )

    def change() -> tuple[str, str]:
        action = p.choice("ADD CONTRACT or DROP CONTRACT", "ADD", "DROP")
        p.keyword("CONTRACT", f"CONTRACT after {action}")
        return action, _contract(p)

    changes = _items(p, "contract", change, lambda c: c[1]) if p.accept("(") else []
    if not changes and queue is None:
        raise p.expected("ON QUEUE or '(' with ADD CONTRACT or DROP CONTRACT")
    added = tuple(c for action, c in changes if action == "ADD")
    dropped = tuple(c for action, c in changes if action == "DROP")
    return ddl.AlterService(name, queue, added, dropped)


def _drop_service(p: Parser[Any], verb: Token) -> ddl.DropService:
    return ddl.DropService(p.name("a service name"))


# (verb, object) -> reader of the rest of the statement (pybroker.core.tsql.parser.Parser).
OBJECT_STATEMENTS: dict[tuple[str, str], Callable[[Parser[Any], Token], ddl.ObjectStatement]] = {
    ("CREATE", "MESSAGE TYPE"): _create_message_type,
    ("ALTER", "MESSAGE TYPE"): _alter_message_type,
    ("DROP", "MESSAGE TYPE"): _drop_message_type,
    ("CREATE", "CONTRACT"): _create_contract,
    ("DROP", "CONTRACT"): _drop_contract,
    ("CREATE", "QUEUE"): _create_queue,
    ("ALTER", "QUEUE"): _alter_queue,
    ("DROP", "QUEUE"): _drop_queue,
    ("CREATE", "SERVICE"): _create_service,
    ("ALTER", "SERVICE"): _alter_service,
    ("DROP", "SERVICE"): _drop_service,
}

# Pairs SQL Server itself does not have: why they are refused.
OBJECT_REFUSALS = {
    ("ALTER", "CONTRACT"): "SQL Server has no ALTER CONTRACT; DROP CONTRACT and CREATE "
    "CONTRACT again (after dropping or altering the services that use it)",
}
