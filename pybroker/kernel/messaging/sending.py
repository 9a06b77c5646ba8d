"""SEND of one engine (SPEC P3, C7): a SEND of a transaction that holds no store, kept until
it does (its commit, or a verb that needs the store) and then applied in order as the writer
sends; END CONVERSATION, BEGIN CONVERSATION TIMER and MOVE CONVERSATION kept alike; the
sequence numbers a client of a served instance pipelines its SENDs with.

A kept SEND is checked against the conversation as last committed (the endpoint cached,
which only WRITER's holder changes, in place: one that a commit in progress changed is not
read, and the SEND is then made as the writer's), its group locked, its sequence number
given; nothing shared changes until it is applied. Applied, a SEND whose conversation is
as it was is only sent; one whose conversation another transaction changed so that it no
longer holds rolls its transaction back with WriteConflictError (3960).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pybroker.core.conversation.endpoint import ConversationEndpoint
from pybroker.core.conversation.states import TRANSITIONS, transition
from pybroker.core.conversation.system_messages import DIALOG_TIMER, END_DIALOG, ERROR
from pybroker.core.conversation.validation import xml_problem
from pybroker.errors import (
    BrokerError,
    ContractViolationError,
    ConversationError,
    InvalidArgumentError,
    MessageValidationError,
    NotFoundError,
    WriteConflictError,
)
from pybroker.kernel.messaging.catalog import DatabaseCatalog
from pybroker.kernel.messaging.catalog_cache import CatalogCache
from pybroker.kernel.messaging.endpoint_cache import EndpointCache
from pybroker.kernel.messaging.group_locking import GroupLocking
from pybroker.kernel.messaging.unit_of_work import UnitOfWork

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.messaging.delivery import Delivery
    from pybroker.kernel.messaging.group_commit import GroupCommit
    from pybroker.kernel.tracing import MessageTracing


class _Engine(Protocol):
    """What SEND needs of the messaging engine (engine.py's Messaging): public names."""

    endpoints: EndpointCache
    catalogs: CatalogCache
    group_locks: GroupLocking
    commits: GroupCommit
    delivery: Delivery
    tracing: MessageTracing | None

    @property
    def max_message_size(self) -> int: ...

    def unit_of_work(self) -> contextlib.AbstractContextManager[UnitOfWork]: ...

    def endpoint(self, handle: str, database_id: int | None = None) -> ConversationEndpoint: ...

    def catalog(self, database_id: int) -> DatabaseCatalog: ...

    def begin_kept(self, uow: UnitOfWork, ep: ConversationEndpoint, version: int) -> None: ...


class Sending:
    """The SENDs of one engine, kept or made as the writer's."""

    def __init__(self, messaging: _Engine) -> None:
        self.m = messaging

    def cached(self, uow: UnitOfWork, handle: str) -> ConversationEndpoint | None:
        """The endpoint of ``handle`` in memory: one ``uow`` began and keeps, or the
        engine's (as last committed, or as the writer changes it)."""
        begun = uow.begun.get(handle)
        return self.m.endpoints.get(handle) if begun is None else begun[0]

    def send(self, database_id: int, handle: str, body: Any, message_type: str) -> int:
        body = _as_bytes(body)
        with self.m.unit_of_work() as uow:
            if not uow.locked and self.m.tracing is None:
                seq = self._keep_send(uow, database_id, handle, body, message_type)
                if seq is not None:
                    return seq
            uow.activate()
            return self._send_now(uow, database_id, handle, body, message_type, None)

    def _keep_send(self, uow: UnitOfWork, database_id: int, handle: str, body: bytes,
                   message_type: str) -> int | None:
        """A SEND of a unit of work that holds no store, kept until it does (its commit,
        or a verb that needs the store: UnitOfWork.activate applies it): its group locked,
        checked against the conversation as last committed, its sequence number given.
        None when it cannot be kept so: the caller sends it as the writer does (so any
        error is said of the conversation as committed, never of another transaction's
        change in progress)."""
        ep = self.cached(uow, handle)
        if ep is None or ep.database_id != database_id:
            return None  # to be read from the file: as the writer
        group = ep.conversation_group_id
        uow.lock_group(database_id, group)  # C7
        if ep.conversation_group_id != group or self.m.commits.written_in_place(handle):
            return None  # the writer is changing it: its change is not to be read here
        if ep.permissions is None or ep.epoch != self.m.catalogs.version:
            self.m.delivery.refresh_cached(ep)  # what it caches of the catalog, no state
        kept = uow.next_sequences.get(handle)
        seq, state = (ep.send_sequence, ep.state) if kept is None else kept
        t = TRANSITIONS.get((ep.role, state, "send"))
        validation = ep.permissions.get(message_type)
        if t is None or validation is None:
            return None  # the writer's way says why
        self._validate(body, validation, message_type)
        uow.next_sequences[handle] = (seq + 1, t.state)
        uow.sends.append((ep, body, message_type, seq, state, t.state, validation))
        if uow.first_send is None:
            uow.first_send = time.monotonic()
        return seq

    def apply_sends(self, uow: UnitOfWork) -> None:
        """``uow`` holds the store now: the SENDs it kept are sent, in order, each with the
        sequence number it was given (WriteConflictError when another transaction changed
        the conversation meanwhile so that it is not). A SEND whose conversation is as it
        was when the SEND was kept (the same endpoint cached, its next sequence number and
        state, the catalog it was checked against) is not checked again: only sent."""
        begun, uow.begun = uow.begun, {}
        sends, uow.sends = uow.sends, []
        verbs, uow.verbs = uow.verbs, []
        uow.next_sequences.clear()
        for ep, begun_at in begun.values():
            self.m.begin_kept(uow, ep, begun_at)
        endpoints = self.m.endpoints
        version = self.m.catalogs.version
        dispatch = self.m.delivery.dispatch
        touch = uow.touch
        for ep, body, message_type, seq, before, after, validation in sends:
            handle = ep.conversation_handle
            if (endpoints.get(handle) is ep and ep.send_sequence == seq
                    and ep.state == before and ep.epoch == version):
                ep.send_sequence = seq + 1
                ep.state = after
                touch(ep)
                dispatch(uow, ep, [(seq, message_type, validation, body, False, False)])
                continue
            try:
                sent = self._send_now(uow, ep.database_id, handle, body, message_type,
                                      validation)
            except ConversationError as exc:
                raise WriteConflictError(
                    f"the transaction was rolled back: its SEND of message {seq} on "
                    f"conversation {handle} no longer holds at commit, because another "
                    f"transaction changed the conversation meanwhile ({exc}); run the "
                    "transaction again") from exc
            if sent != seq:
                raise WriteConflictError(
                    f"the transaction was rolled back: its SEND on conversation {handle} "
                    f"was given sequence number {seq}, but another transaction changed "
                    f"the conversation meanwhile (it is {sent} at commit); run the "
                    "transaction again")
        for verb in verbs:
            verb()

    def keep_verb(self, uow: UnitOfWork, database_id: int, handle: str, event: str | None,
                  verb: Callable[[], None]) -> bool:
        """END CONVERSATION (``event`` "end", "end_with_error" or "cleanup"), BEGIN
        CONVERSATION TIMER or MOVE CONVERSATION (``event`` None) of a unit of work that
        holds no store, kept as its SENDs are
        (_keep_send): the group locked, the verb checked against the conversation as last
        committed and as this transaction's kept verbs leave it, and ``verb`` (the writer's
        own call of it) made when the unit of work holds the store, after its SENDs kept.
        False when it cannot be kept so: the caller makes it as the writer (any error is
        then said of the conversation as committed)."""
        ep = self.cached(uow, handle)
        if ep is None or ep.database_id != database_id:
            return False
        group = ep.conversation_group_id
        uow.lock_group(database_id, group)  # C7
        if ep.conversation_group_id != group or self.m.commits.written_in_place(handle):
            return False
        kept = uow.next_sequences.get(handle)
        seq, state = (ep.send_sequence, ep.state) if kept is None else kept
        if event is None:  # a timer or a move: on any conversation not closed
            if state == "CD":
                return False
        else:
            t = TRANSITIONS.get((ep.role, state, event))
            if t is None:
                return False
            seq, state = (seq + 1 if t.notify else seq), t.state
        uow.next_sequences[handle] = (seq, state)  # a read of it applies what is kept
        uow.verbs.append(functools.partial(self._kept_verb, handle, verb))
        return True

    @staticmethod
    def _kept_verb(handle: str, verb: Callable[[], None]) -> None:
        try:
            verb()
        except (ConversationError, NotFoundError) as exc:
            raise WriteConflictError(
                f"the transaction was rolled back: its END CONVERSATION, MOVE CONVERSATION "
                f"or conversation timer on conversation {handle} no longer holds at commit, "
                f"because another transaction changed the conversation meanwhile ({exc}); "
                "run the transaction again") from exc

    def _send_now(self, uow: UnitOfWork, database_id: int, handle: str, body: bytes,
                  message_type: str, validated: str | None) -> int:
        """SEND as the writer (``uow`` holds the store); ``validated``: the validation the
        body already passed (when it is still the message type's, not checked again)."""
        ep = self.m.endpoint(handle, database_id)
        uow.lock_group(database_id, ep.conversation_group_id)  # C7
        t = TRANSITIONS.get((ep.role, ep.state, "send"))
        if t is None:
            transition(ep.role, ep.state, "send")  # raises, naming the state
        validation = self._permission(ep, message_type)
        if validation != validated:
            self._validate(body, validation, message_type)
        seq = ep.send_sequence
        ep.send_sequence = seq + 1
        ep.state = t.state
        uow.touch(ep)
        message = (seq, message_type, validation, body, False, False)
        tracing = self.m.tracing
        if tracing is None:
            self.m.delivery.dispatch(uow, ep, [message])
        else:
            tracing.send(uow, ep, seq, message_type, len(body),
                         lambda: self.m.delivery.dispatch(uow, ep, [message]))
        return seq

    def next_send_sequences(self, database_id: int, handles: list[str]) -> list[int | None]:
        """The sequence number the next SEND on each conversation gets (P3.1), or None
        where a SEND would fail for the conversation itself (unknown, another database's,
        or in a state that may not send), or where the number would not hold: inside a
        transaction, this locks the first conversation's group as its SEND would, and
        gives the others' numbers only where this transaction holds their groups already
        (it takes no group it was not asked to act on), so the numbers hold until it ends
        for every SEND that succeeds; a client of a served instance pipelines its SENDs
        with them."""
        with self.m.unit_of_work() as uow:
            found = None
            if not uow.locked:
                found = self._kept_sequences(uow, database_id, handles)
            if found is None:
                uow.activate()
                found = [self._writer_sequence(uow, database_id, handle, i == 0)
                         for i, handle in enumerate(handles)]
            return found

    def _writer_sequence(self, uow: UnitOfWork, database_id: int, handle: str,
                         first: bool) -> int | None:
        try:
            ep = self.m.endpoint(handle, database_id)
        except BrokerError:
            return None
        key = (database_id, ep.conversation_group_id)
        if first:
            uow.lock_group(*key)
        elif not self.m.group_locks.holds(uow.transaction_id, key):
            return None
        return ep.send_sequence if (ep.role, ep.state, "send") in TRANSITIONS else None

    def _kept_sequences(self, uow: UnitOfWork, database_id: int,
                        handles: list[str]) -> list[int | None] | None:
        """next_send_sequences of a unit of work that holds no store (its SENDs are kept,
        see _keep_send); None when the first must be read as the writer."""
        found: list[int | None] = []
        locks = self.m.group_locks
        for i, handle in enumerate(handles):
            ep = self.cached(uow, handle)
            if ep is None or ep.database_id != database_id:
                if i == 0:
                    return None
                found.append(None)
                continue
            group = ep.conversation_group_id
            if i == 0:
                uow.lock_group(database_id, group)  # C7: as its SEND would
            elif not locks.holds(uow.transaction_id, (database_id, group)):
                found.append(None)  # another may SEND on it before this one does
                continue
            if ep.conversation_group_id != group or self.m.commits.written_in_place(handle):
                if i == 0:
                    return None
                found.append(None)
                continue
            kept = uow.next_sequences.get(handle)
            seq, state = (ep.send_sequence, ep.state) if kept is None else kept
            found.append(seq if (ep.role, state, "send") in TRANSITIONS else None)
        return found

    def _permission(self, ep: ConversationEndpoint, message_type: str) -> str:
        """The validation of ``message_type`` if this side may send it (else raise)."""
        permissions = ep.permissions
        if permissions is None or ep.epoch != self.m.catalogs.version:
            self.m.delivery.refresh_cached(ep)
            permissions = ep.permissions
        found = permissions.get(message_type)  # type: ignore[union-attr]
        if found is None:
            if not isinstance(message_type, str):
                raise InvalidArgumentError(
                    f"message_type must be a message type name, not "
                    f"{type(message_type).__name__}")
            catalog = self.m.catalog(ep.database_id)
            if message_type in (END_DIALOG, ERROR, DIALOG_TIMER):
                raise ContractViolationError(
                    f"{message_type} is sent by the broker, not by SEND: use "
                    "Conversation.end() (EndDialog, Error) or begin_timer() (DialogTimer)")
            if message_type not in catalog.message_types:
                raise NotFoundError(
                    f"message type {message_type!r} does not exist in database "
                    f"{catalog.name!r}")
            side = "initiator" if ep.is_initiator else "target"
            raise ContractViolationError(
                f"the {side} of a conversation on contract {ep.service_contract_name!r} may "
                f"not send message type {message_type!r}; the contract allows the {side} "
                f"{sorted(permissions) or 'nothing'}")  # type: ignore[arg-type]
        return found

    def _validate(self, body: bytes, validation: str, message_type: str) -> None:
        limit = self.m.max_message_size
        if len(body) > limit:
            raise MessageValidationError(
                f"the message body is {len(body)} bytes; the instance's maximum message size "
                f"is {limit} bytes (Instance.max_message_size)")
        if validation == "N":
            return
        if validation == "E":
            if body:
                raise MessageValidationError(
                    f"message type {message_type!r} has VALIDATION = EMPTY, but the body is "
                    f"{len(body)} bytes")
            return
        # an empty body passes XML validation, as in SQL Server
        problem = xml_problem(body) if body else None
        if problem is not None:
            raise MessageValidationError(
                f"message type {message_type!r} has VALIDATION = WELL_FORMED_XML, but the "
                f"body is not well-formed XML: {problem}")


def _as_bytes(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    if body is None:
        return b""
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    raise InvalidArgumentError(
        f"a message body is bytes or str (sent as UTF-8), not {type(body).__name__}")
