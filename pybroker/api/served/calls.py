"""What a client may call, and how the API's objects and errors travel (both sides use it).

The whitelist (CALLS) names every method and property a client reaches, per target: the
instance, a database (by name) or a conversation (database name and handle). Nothing
else is called: the session looks a call up here before it looks the method up on the
API object, and the client builds its proxies from the same table, so the two sides
cannot disagree. ``writes`` marks what a read-only client is refused, with the error a
read-only embedded instance gives.

The API's frozen dataclasses (Message, Route, Service, ...) travel as protocol Records
named after their class and rebuilt from RECORDS only; a Database or a Conversation
travels as a handle the client turns into its proxy. Errors travel as their class name,
message and attributes (``rule``, ``option``, ...), and only subclasses of BrokerError
defined in pybroker.errors are rebuilt; any other name arrives as BrokerError.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pybroker import errors
from pybroker.api.served.protocol import CALL_METHOD, GET_PROPERTY, SET_PROPERTY, Record
from pybroker.core.conversation.model import Message
from pybroker.core.routing.decision import RouteDecision, TraceStep
from pybroker.core.routing.engine import ExplainStep
from pybroker.core.tsql.batch_interface import BatchResults, ResultSet
from pybroker.errors import BrokerError, InvalidArgumentError, ServerError
from pybroker.kernel.catalog_objects import Contract, MessageType, Queue, Route, Service

INSTANCE, DATABASE, CONVERSATION = "instance", "database", "conversation"
TRANSACTION = "transaction"  # a call kind of DATABASE: begin, commit, rollback

_R, _W = False, True  # writes?

# (target, kind, name) -> writes. The methods are the embedded API's own, by name.
CALLS: dict[tuple[str, str, str], bool] = {
    **{(INSTANCE, CALL_METHOD, name): w for name, w in (
        ("create_database", _W), ("drop_database", _W), ("execute", _W), ("database", _R),
        ("databases", _R), ("route", _R), ("route_many", _R), ("explain", _R),
        ("sql_rows", _R), ("snapshot", _R), ("trust", _W),
        ("untrust", _W), ("renew_certificate", _W),
        ("run_pending", _W), ("run_pending_all", _W))},
    **{(INSTANCE, GET_PROPERTY, name): w for name, w in (
        ("max_message_size", _R), ("forwarding", _R), ("forwarding_size_mb", _R),
        ("tracing", _R), ("certificate", _W))},  # made (and written) on first need
    **{(INSTANCE, SET_PROPERTY, name): _W for name in (
        "max_message_size", "forwarding", "forwarding_size_mb")},
    **{(DATABASE, CALL_METHOD, name): w for name, w in (
        ("begin_dialog", _W), ("conversation", _R), ("receive", _W),
        ("get_conversation_group", _W), ("execute", _W),
        ("create_route", _W), ("alter_route", _W), ("drop_route", _W), ("routes", _R),
        ("route", _R), ("create_message_type", _W), ("alter_message_type", _W),
        ("drop_message_type", _W), ("message_types", _R), ("create_contract", _W),
        ("drop_contract", _W), ("contract", _R), ("contracts", _R), ("create_queue", _W),
        ("alter_queue", _W), ("drop_queue", _W), ("queues", _R), ("create_service", _W),
        ("alter_service", _W), ("drop_service", _W), ("services", _R), ("clock", _R))},
    **{(DATABASE, CALL_METHOD, name): _W for name in ("set_mirroring", "fail_over")},
    **{(DATABASE, GET_PROPERTY, name): _R for name in (
        "mirroring_role", "mirroring_partner", "session_id")},  # @@SPID: the connection's
    # "sequences": inside a transaction, where the next SEND of each of its conversations
    # is (Messaging.next_send_sequences), what a client pipelines its SENDs with
    **{(DATABASE, TRANSACTION, name): _W for name in (
        "begin", "commit", "rollback", "sequences")},
    **{(CONVERSATION, GET_PROPERTY, name): _R for name in (
        "conversation_id", "conversation_group_id", "is_initiator", "state",
        "service_name", "far_service", "far_broker_instance", "service_contract_name",
        "lifetime")},
    **{(CONVERSATION, CALL_METHOD, name): _W for name in (
        "send", "end", "begin_timer", "move_to")},
}


# What a client pipelines inside its transaction (protocol PIPELINED): a SEND, whose
# result, the message's sequence number, the client predicts once the transaction holds
# the instance's lock (from its first SEND, or its "sequences" step, to its end, so
# nothing else sends on the conversation meanwhile) and it has learnt the conversation's
# next number. The server refuses any other call pipelined.
PIPELINED = frozenset({(CONVERSATION, CALL_METHOD, "send")})


# What returns a path (a file the server wrote): it travels as text, and the client makes
# it the Path the embedded call returns.
PATH_RESULTS = frozenset({(INSTANCE, CALL_METHOD, "snapshot")})


def names(target: str, kind: str,
          whitelist: Mapping[tuple[str, str, str], bool] = CALLS) -> list[str]:
    """The names ``whitelist`` gives a client for calls of ``kind`` on ``target``."""
    return [name for (t, k, name) in whitelist if t == target and k == kind]


# -- records ----------------------------------------------------------------------------

RECORDS: dict[str, type] = {cls.__name__: cls for cls in (
    Message, Route, Service, Queue, MessageType, Contract, RouteDecision, TraceStep,
    ExplainStep, ResultSet)}
DATABASE_RECORD, CONVERSATION_RECORD = "Database", "Conversation"
# execute()'s BatchResults: its result sets and the lines PRINT wrote (a list would lose them)
BATCH_RECORD = "BatchResults"


# values that travel as they are, by exact type: most of what a call gives, and every
# field of a received Message, so they skip the questions below
_PLAIN = frozenset({str, bytes, int, float, bool, type(None), datetime, uuid.UUID})
# the field names of each record class, in order
_FIELDS = {name: tuple(f.name for f in dataclasses.fields(cls)) for name, cls in RECORDS.items()}


def to_wire(value: Any, handle: Callable[[Any], Record | None]) -> Any:
    """``value`` with the API's dataclasses as Records; ``handle`` turns the other API
    objects (Database, Conversation) into Records, or says None."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is BatchResults:
        return Record(BATCH_RECORD, ([to_wire(r, handle) for r in value],
                                     [str(m) for m in value.messages]))
    if kind is list or kind is tuple or isinstance(value, (list, tuple)):
        items = [v if type(v) in _PLAIN else to_wire(v, handle) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {k: to_wire(v, handle) for k, v in value.items()}
    name = kind.__name__
    if RECORDS.get(name) is kind:
        return Record(name, tuple(
            v if type(v) in _PLAIN else to_wire(v, handle)
            for v in map(value.__getattribute__, _FIELDS[name])))
    if isinstance(value, os.PathLike):  # a file the server wrote (snapshot): its path as text
        return os.fspath(value)
    record = handle(value)
    return value if record is None else record


def from_wire(value: Any, handle: Callable[[Record], Any]) -> Any:
    """The inverse of to_wire: Records of RECORDS rebuilt, the others given to ``handle``."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is list:
        return [v if type(v) in _PLAIN else from_wire(v, handle) for v in value]
    if kind is tuple:
        return tuple(v if type(v) in _PLAIN else from_wire(v, handle) for v in value)
    if kind is dict:
        return {k: from_wire(v, handle) for k, v in value.items()}
    if kind is Record:
        if value.name == BATCH_RECORD and len(value.fields) == 2:
            results, messages = value.fields
            return BatchResults(from_wire(results, handle), messages)
        cls = RECORDS.get(value.name)
        if cls is None:
            return handle(value)
        fields = [v if type(v) in _PLAIN else from_wire(v, handle) for v in value.fields]
        try:
            return cls(*fields)
        except TypeError:
            raise ServerError(f"the server sent a {value.name} with {len(fields)} fields; "
                              "use the same pybroker on both sides") from None
    return value


def outgoing(what: str, value: Any) -> Any:
    """An argument as the protocol carries it: an iterable it has no type for (a set, a
    generator, a dict view) goes as a list, as the embedded API would iterate it once."""
    if isinstance(value, (str, bytes, bytearray, memoryview, int, float, type(None))):
        return value
    if isinstance(value, os.PathLike):  # as this process means it: the server's cwd differs
        return str(Path(value).absolute())
    if isinstance(value, (list, tuple)):
        items = [outgoing(what, v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {outgoing(what, k): outgoing(what, v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)) or hasattr(value, "__next__") or type(
            value).__name__ in ("dict_keys", "dict_values", "dict_items"):
        return [outgoing(what, v) for v in value]
    return value  # the encoder says if it cannot carry it


# -- errors -----------------------------------------------------------------------------

KNOWN_ERRORS: dict[str, type[BrokerError]] = {
    name: cls for name, cls in vars(errors).items()
    if isinstance(cls, type) and issubclass(cls, BrokerError)}


def error_fields(exc: BrokerError) -> tuple[str, str, dict[str, Any]]:
    """(class name, message, attributes) of an error the client rebuilds."""
    name = type(exc).__name__
    if KNOWN_ERRORS.get(name) is not type(exc):
        name = next((c.__name__ for c in type(exc).__mro__
                     if KNOWN_ERRORS.get(c.__name__) is c), "BrokerError")
    attributes = {k: v for k, v in vars(exc).items()
                  if not k.startswith("_")
                  and (v is None or isinstance(v, (str, int, float, bool)))}
    results = getattr(exc, "results", None)
    if isinstance(results, BatchResults):  # what a failed batch returned before it failed
        attributes["results"] = to_wire(results, lambda _: None)
    return name, str(exc), attributes


def rebuild_error(name: str, message: str, attributes: dict[str, Any]) -> BrokerError:
    """The error the server raised, as the same class with the same message and
    attributes; a class this pybroker does not know arrives as BrokerError."""
    cls = KNOWN_ERRORS.get(name, BrokerError)
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)  # the message alone, whatever the class's __init__
    for key, value in attributes.items():
        if isinstance(key, str) and key.isidentifier() and not key.startswith("_"):
            if key == "results" and isinstance(value, Record):
                value = from_wire(value, lambda _: None)
            setattr(exc, key, value)
    return exc


def unknown_call(target: str, kind: str, method: str) -> BrokerError:
    what = {CALL_METHOD: "method", GET_PROPERTY: "property", SET_PROPERTY: "property",
            TRANSACTION: "transaction step"}.get(kind, "call")
    return InvalidArgumentError(
        f"a client cannot call the {what} {method!r} of a {target} through the server "
        "(it is not one a client may reach)")
