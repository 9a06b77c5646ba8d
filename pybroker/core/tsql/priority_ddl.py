"""CREATE / ALTER / DROP BROKER PRIORITY in SQL Server's syntax:

    CREATE BROKER PRIORITY name FOR CONVERSATION
        [SET ([CONTRACT_NAME = contract | ANY] [[,] LOCAL_SERVICE_NAME = service | ANY]
              [[,] REMOTE_SERVICE_NAME = 'service' | ANY] [[,] PRIORITY_LEVEL = 1..10 | DEFAULT])]
    ALTER BROKER PRIORITY name FOR CONVERSATION SET (<the same, at least one>)
    DROP BROKER PRIORITY name

A priority is kept per database (sys.conversation_priorities, pybroker.kernel.broker_priorities).
As in SQL Server, ANY (or an option left out of CREATE) matches every contract or service,
DEFAULT is level 5, and the names need not exist yet (they are compared when a conversation
is matched). ALTER changes only the options it gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.parser import Parser
from pybroker.errors import TsqlSyntaxError

DEFAULT_LEVEL = 5
_OPTIONS = ("CONTRACT_NAME", "LOCAL_SERVICE_NAME", "REMOTE_SERVICE_NAME", "PRIORITY_LEVEL")
Field = Literal["service_contract_name", "local_service_name", "remote_service_name",
                "priority"]
_FIELDS: dict[str, Field] = dict(zip(_OPTIONS, (
    "service_contract_name", "local_service_name", "remote_service_name", "priority"),
    strict=True))


@dataclass(frozen=True, slots=True)
class CreateBrokerPriority:
    """CREATE BROKER PRIORITY: None for a name matches any (ANY)."""

    name: str
    service_contract_name: str | None = None
    local_service_name: str | None = None
    remote_service_name: str | None = None
    priority: int = DEFAULT_LEVEL


@dataclass(frozen=True, slots=True)
class AlterBrokerPriority:
    """ALTER BROKER PRIORITY: ``changes`` holds (field, value) for each option given."""

    name: str
    changes: tuple[tuple[Field, str | int | None], ...]


@dataclass(frozen=True, slots=True)
class DropBrokerPriority:
    name: str


PriorityStatement = CreateBrokerPriority | AlterBrokerPriority | DropBrokerPriority


def _options(p: Parser[Any], verb: str) -> dict[Field, str | int | None]:
    p.keyword("FOR", f"FOR CONVERSATION after the priority's name ({verb} BROKER PRIORITY "
              "name FOR CONVERSATION SET (...))")
    p.keyword("CONVERSATION", "CONVERSATION after FOR")
    found: dict[Field, str | int | None] = {}
    if not p.token.is_word("SET"):
        if verb == "ALTER":
            raise p.expected("SET (...) with at least one option after FOR CONVERSATION")
        return found
    p.advance()
    p.require("(", "'(' after SET")
    seen: dict[str, Token] = {}
    while True:
        option = p.token
        word = p.choice(", ".join(_OPTIONS), *_OPTIONS)
        p.once(word, option, seen, "option of BROKER PRIORITY")
        p.require("=", f"'=' after {word}")
        found[_FIELDS[word]] = _value(p, word)
        if p.accept(")"):
            return found
        if not p.accept(",") and not p.token.is_word(*_OPTIONS):
            raise p.expected("',', another option or ')'")


def _value(p: Parser[Any], word: str) -> str | int | None:
    t = p.token
    if word == "PRIORITY_LEVEL":
        if t.is_word("DEFAULT"):
            p.advance()
            return DEFAULT_LEVEL
        if t.kind != "number" or not t.text.isdigit() or not 1 <= int(t.text) <= 10:
            raise p.expected("a priority level from 1 to 10, or DEFAULT, after PRIORITY_LEVEL =")
        p.advance()
        return int(t.text)
    if t.is_word("ANY"):
        p.advance()
        return None
    if word == "REMOTE_SERVICE_NAME":  # a string, as the far service's name may be any text
        if t.kind != "string" or not t.text:
            raise p.expected("the far service's name as a string, or ANY, after "
                             "REMOTE_SERVICE_NAME =")
        p.advance()
        return t.text
    return p.name(f"a {'contract' if word == 'CONTRACT_NAME' else 'service'} name, or ANY, "
                  f"after {word} =")


def _create(p: Parser[Any], verb: Token) -> CreateBrokerPriority:
    name = p.name("a broker priority name")
    return CreateBrokerPriority(name, **_options(p, "CREATE"))  # type: ignore[arg-type]


def _alter(p: Parser[Any], verb: Token) -> AlterBrokerPriority:
    name = p.name("a broker priority name")
    changes = _options(p, "ALTER")
    if not changes:  # pragma: no cover - _options refuses ALTER without SET
        raise TsqlSyntaxError(f"ALTER BROKER PRIORITY at {verb.where} changes nothing")
    return AlterBrokerPriority(name, tuple(changes.items()))


def _drop(p: Parser[Any], verb: Token) -> DropBrokerPriority:
    return DropBrokerPriority(p.name("a broker priority name"))


PRIORITY_STATEMENTS: dict[tuple[str, str], Callable[[Parser[Any], Token], PriorityStatement]] = {
    ("CREATE", "BROKER PRIORITY"): _create,
    ("ALTER", "BROKER PRIORITY"): _alter,
    ("DROP", "BROKER PRIORITY"): _drop,
}
