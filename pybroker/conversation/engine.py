"""The messaging engine of one instance: conversation endpoints, delivery into queues, the
transmission queue, and the delay/retry loop (SPEC C1-C5, P3, P5, P8, R4, R5).

Group commit is the design. A unit of work (``Database.transaction()``, or one API call
outside it) keeps endpoint changes in memory and buffers the rows it writes; at commit it
writes them as one set-based statement per table (columns bound as one string each, see
columns.py) in one DuckDB transaction. A ``send()`` therefore runs no SQL: the endpoint,
its route decision, its far endpoint and the contract's permissions are cached in memory.

The cache of endpoints is the state of the file after the last commit. A unit of work that
rolls back evicts every endpoint it touched, so they are read again from the file.

RECEIVE reads ahead (ReceiveBuffer): the first RECEIVE of a queue in a transaction takes its
group out of the table with one statement (receive_messages.sql); a second one reads the
first groups of the queue into memory, and from then on RECEIVE hands out groups from
memory, exactly as the table would, and the messages handed out leave the table in one
statement at the next flush (C3: when the receiving transaction commits). The read-ahead is
kept across transactions; deliveries extend it, END CONVERSATION, DROP QUEUE and any
rollback drop it.

One DuckDB connection serves the instance, so units of work are serialized: a unit of work
holds the store's lock from its first action to its end. That is also the conversation
group lock of SQL Server's RECEIVE (no other transaction of this instance can receive from
the group meanwhile). Only one process can open the file.

The parts live beside it: system_messages.py (the broker's messages and error codes),
model.py (the types and constants the parts and the API share), catalog.py and
endpoint.py (what is cached in memory), unit_of_work.py (group commit), read_ahead.py
(ReceiveBuffer), and the mixins Messaging takes its verbs from: delivery.py (routing,
delivery and the delay/retry loop), catalog_cache.py (the catalog read from the file),
end_conversation.py (END CONVERSATION, timers, DROP SERVICE's endings) and
receive_where.py (RECEIVE ... WHERE, GET CONVERSATION GROUP). The names that moved out
of this module are imported back with ``import X as X``, so importing them from here still
works. No part imports this module, and this module imports nothing of the API: the
instance gives the engine its store, clock and routing, and the API's verbs pass a database
by its id.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol
from xml.parsers import expat

from pybroker.arguments import uuid_text
from pybroker.conversation import columns, message_parts, transmission_pieces
from pybroker.conversation.catalog_cache import CatalogMixin
from pybroker.conversation.delivery import BACKOFF as BACKOFF
from pybroker.conversation.delivery import UNSEQUENCED as UNSEQUENCED
from pybroker.conversation.delivery import DeliveryMixin
from pybroker.conversation.end_conversation import EndConversationMixin
from pybroker.conversation.endpoint import Endpoint
from pybroker.conversation.endpoint import wide_columns as wide_columns
from pybroker.conversation.endpoint_cache import DEFAULT_ENDPOINT_CACHE, EndpointCache
from pybroker.conversation.handles import new_handle
from pybroker.conversation.model import DEFAULT_LIFETIME as DEFAULT_LIFETIME
from pybroker.conversation.model import STATUS_NO_ROUTE as STATUS_NO_ROUTE
from pybroker.conversation.model import STATUS_NO_TRANSPORT as STATUS_NO_TRANSPORT
from pybroker.conversation.model import STATUS_PEER_ENDED as STATUS_PEER_ENDED
from pybroker.conversation.model import STATUS_QUEUE_DISABLED as STATUS_QUEUE_DISABLED
from pybroker.conversation.model import VALIDATION_CODES as VALIDATION_CODES
from pybroker.conversation.model import VALIDATION_NAMES as VALIDATION_NAMES
from pybroker.conversation.model import Message, Router
from pybroker.conversation.read_ahead import ReceiveBuffer
from pybroker.conversation.receive_where import ReceiveWhereMixin
from pybroker.conversation.remote import RemoteDelivery
from pybroker.conversation.route_requests import RouteRequests
from pybroker.conversation.states import (
    INITIATOR,
    TRANSITIONS,
    transition,
)
from pybroker.conversation.system_messages import _ENDPOINT_CLOSED_TEXT as _ENDPOINT_CLOSED_TEXT
from pybroker.conversation.system_messages import (
    CONTRACT_NOT_SUPPORTED as CONTRACT_NOT_SUPPORTED,
)
from pybroker.conversation.system_messages import DEFAULT as DEFAULT
from pybroker.conversation.system_messages import (
    DIALOG_TIMER,
    END_DIALOG,
    ERROR,
)
from pybroker.conversation.system_messages import ERROR_NAMESPACE as ERROR_NAMESPACE
from pybroker.conversation.system_messages import LIFETIME_EXPIRED as LIFETIME_EXPIRED
from pybroker.conversation.system_messages import (
    REMOTE_ENDPOINT_CLOSED as REMOTE_ENDPOINT_CLOSED,
)
from pybroker.conversation.system_messages import SYSTEM_PREFIX as SYSTEM_PREFIX
from pybroker.conversation.system_messages import _parse_error as _parse_error
from pybroker.conversation.unit_of_work import LARGE_BODY as LARGE_BODY
from pybroker.conversation.unit_of_work import UnitOfWork
from pybroker.errors import (
    BrokerError,
    ContractViolationError,
    ConversationError,
    ConversationStateError,
    InstanceClosedError,
    InvalidArgumentError,
    MessageValidationError,
    NotFoundError,
)
from pybroker.routing.cache import CatalogChange
from pybroker.routing.definition import MAX_VALUE_LENGTH, check_name, normalize_guid
from pybroker.timestamps import to_utc_datetime

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.conversation.catalog import DatabaseCatalog
    from pybroker.storage import Store

POISON_ROLLBACKS = 5  # C3


# -- RECEIVE read ahead ---------------------------------------------------------------------

READ_AHEAD_FIRST = 256  # messages (at least max_messages) of the first read of a queue
READ_AHEAD_MAX = 16_384  # ... doubling at each read up to this many
READ_AHEAD_BYTES = 32 * 2**20  # ... and to about this many bytes of bodies (by the last read)


# -- the engine ---------------------------------------------------------------------------


@dataclass
class _PoisonCount:
    rollbacks: dict[tuple[int, str], int] = field(default_factory=dict)


class QueueWatcher(Protocol):
    """What the engine tells activation's queue monitors (pybroker.activation.runner), from
    whichever thread does it; each call returns at once."""

    def enqueued(self, queues: set[tuple[int, str]]) -> None:
        """A commit put ready messages into these (database_id, queue) queues."""

    def received(self, queue: tuple[int, str], messages: int) -> None:
        """A RECEIVE from the queue returned ``messages`` (0: an empty rowset)."""

    def waiting(self, queue: tuple[int, str], change: int) -> None:
        """A RECEIVE began (+1) or ended (-1) waiting for the queue's messages."""


class Messaging(DeliveryMixin, CatalogMixin, EndConversationMixin, ReceiveWhereMixin):
    """The engine of one instance. It is given what it needs of the instance, never the
    instance itself: the store, the clock (epoch seconds), how to route (``route``,
    Instance.route) and how to turn a queue OFF through the catalog (``disable_queue``,
    C3's poison message handling). Its verbs take a database by its id."""

    def __init__(self, store: Store, clock: Callable[[], float], route: Router,
                 disable_queue: Callable[[int, str], None], *, retry_scale: float = 1.0,
                 endpoint_cache: int = DEFAULT_ENDPOINT_CACHE,
                 routing_changed: Callable[[CatalogChange], None] | None = None) -> None:
        if isinstance(retry_scale, bool) or not isinstance(retry_scale, (int, float)) or not (
            retry_scale > 0
        ):
            raise InvalidArgumentError(f"retry_scale must be a positive number: {retry_scale!r}")
        self._store = store
        self._clock = clock
        self._route = route
        self._disable_queue = disable_queue
        self.retry_scale = float(retry_scale)
        # P7: the endpoints in use, bounded; the rest are read again from the file.
        self._endpoints = EndpointCache(endpoint_cache)
        # RECEIVE read-ahead per queue (database_id, queue): what the file holds after the
        # last commit less what the open transaction took, kept across transactions (every
        # change to queue_messages goes through this engine: a delivery extends it, END,
        # DROP QUEUE or a rollback drops it).
        self._read_ahead: dict[tuple[int, str], ReceiveBuffer] = {}
        # Queues received from by a RECEIVE in its own transaction: the next such RECEIVE
        # reads ahead too (a loop of them costs a statement and a commit per call).
        self._receive_loops: set[tuple[int, str]] = set()
        self._catalogs: dict[int, DatabaseCatalog] = {}
        self._database_ids: dict[str, int] | None = None
        self._max_message_size: int | None = None
        self._epoch = 0
        self._local = threading.local()
        self._poison = _PoisonCount()
        self._arrival = threading.Condition(threading.Lock())
        self._wake = threading.Event()
        self._closing = False  # Instance.close() began: RECEIVEs stop waiting
        self._closed = False  # ... and now refuses new units of work (Messaging.close)
        self.next_deadline: float = 0.0  # epoch seconds; the worker looks then
        self.queue_watcher: QueueWatcher | None = None  # activation, while it runs
        # the transmission queue keeps a body as pieces (transmission_pieces.py): its
        # deletes then delete pieces too (set by remote.load and by each SEND that does)
        self.transmission_pieces = False
        with self._store._lock:
            row = self._store.run("conversation/select_max_queuing_order.sql")
            deadline = self._store.run("conversation/select_next_deadline.sql")[0][0]
        self._queuing_order = int(row[0][0])
        self.remote = RemoteDelivery(self)
        self.remote.load()
        # R2.4, R8: the route requests; ``routing_changed`` tells routing that one began or
        # went (the instance passes RoutingEngine.changed)
        self.route_requests = RouteRequests(self, routing_changed or (lambda change: None))
        with self._store._lock:
            deadline = self._store.run("conversation/select_next_deadline.sql")[0][0]
            asked = self._store.run("conversation/select_route_request_dialogs.sql")
        self._set_next_deadline(deadline)
        if asked and not self.next_deadline:
            # a request dialog may have ended before the file was closed: look at once
            self.next_deadline = 1.0
        self.route_requests.active = bool(asked)

    def _set_next_deadline(self, deadline: datetime | None) -> None:
        self.next_deadline = (
            0.0 if deadline is None else (deadline - datetime(1970, 1, 1)).total_seconds())

    # -- units of work -------------------------------------------------------------------

    def current(self) -> UnitOfWork | None:
        return getattr(self._local, "uow", None)

    @contextlib.contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        outer = self.current()
        if outer is not None:
            yield outer
            return
        if self._closed:
            raise InstanceClosedError()
        uow = UnitOfWork(self)
        self._local.uow = uow
        try:
            yield uow
        except BaseException as exc:
            self._local.uow = None
            uow.rollback(exc)
            raise
        self._local.uow = None
        uow.commit()

    def _stage_pieces(self, uow: UnitOfWork, handle: str, sequence: int,
                      body: bytes | memoryview) -> int:
        return transmission_pieces.stage(uow, handle, sequence, body)

    def _unstage_pieces(self, uow: UnitOfWork) -> None:
        transmission_pieces.unstage(uow)

    def _after_commit(self, uow: UnitOfWork) -> None:
        for key in uow.received:
            self._poison.rollbacks.pop(key, None)
        for handle in uow.touched:
            ep = self._endpoints.get(handle)
            if ep is not None and ep.state == "CD":
                del self._endpoints[handle]  # closed: nothing will read it often again
        # Under the store's lock no unit of work is open, so every endpoint is as saved
        # and may go. When another thread's unit of work holds it, this one's recency and
        # the trim are skipped, not waited for: the next commit that finds the lock free
        # trims, and an endpoint let go is read back as saved. (Waiting here held a
        # committed RECEIVE up to an arrival transaction's length.)
        lock = self._store._lock
        if lock.acquire(blocking=False):
            try:
                self._endpoints.used(uow.touched)
                self._endpoints.trim()
            finally:
                lock.release()
        if uow.enqueued:
            with self._arrival:
                self._arrival.notify_all()
            watcher = self.queue_watcher
            if watcher is not None and uow.ready_queues:
                watcher.enqueued(uow.ready_queues)
        if uow.wake:
            self._wake.set()
        if uow.outbound:
            self.remote.after_commit(uow.outbound)
        if uow.retry_after_commit:
            self.run_pending(retry_all=True)
        elif uow.route_replies:  # R8.2: a route request's dialog ended; settle it now
            self.run_pending()

    def _after_rollback(self, uow: UnitOfWork) -> None:
        if self._store.closed:  # cut off by close(): no message's fault, nothing to read
            return
        if uow.arrivals:  # what the wire's maps say of held fragments never was
            self.remote.reload()
        if uow.catalog_written:  # what the catalog cache read inside never was
            self.catalog_changed()
        disable = []
        for key in uow.received:  # C3: consecutive rolled-back receives
            count = self._poison.rollbacks.get(key, 0) + 1
            self._poison.rollbacks[key] = count
            if count >= POISON_ROLLBACKS:
                disable.append(key)
        for database_id, queue in disable:
            catalog = self.catalog(database_id)
            settings = catalog.queues.get(queue)
            if settings is not None and settings.status and settings.poison_message_handling:
                self._disable_queue(database_id, queue)
            self._poison.rollbacks.pop((database_id, queue), None)

    # -- close ---------------------------------------------------------------------------

    def begin_close(self) -> None:
        """Instance.close() began: every RECEIVE that waits for messages ends now
        (InstanceClosedError); work in flight goes on (the endpoint and worker wind down)."""
        self._closing = True
        with self._arrival:
            self._arrival.notify_all()

    def close(self) -> None:
        """No new unit of work from now (InstanceClosedError); the file closes after the
        one in flight, or cuts it off at close's deadline (Store.close)."""
        self._closed = True
        self._store.close()

    # -- catalog -------------------------------------------------------------------------

    def forget_endpoints(self) -> None:
        """Drop every cached endpoint (a transaction they may have changed rolled back)."""
        self._endpoints.clear()

    def after_catalog_write(self) -> None:
        """A catalog write committed: retry every waiting transmission now."""
        uow = self.current()
        if uow is not None:
            uow.retry_after_commit = True
        else:
            self.run_pending(retry_all=True)

    # -- endpoints -----------------------------------------------------------------------

    def endpoint(self, handle: str, database_id: int | None = None) -> Endpoint:
        ep = self._endpoints.get(handle)
        if ep is None:
            if not isinstance(handle, str):
                raise InvalidArgumentError(
                    f"a conversation handle is a UUID string, not {type(handle).__name__}")
            try:
                key = str(uuid.UUID(handle))
            except ValueError:
                raise InvalidArgumentError(
                    f"{handle!r} is not a conversation handle (a UUID)") from None
            ep = self._endpoints.get(key)
            if ep is None:
                with self._store._lock:
                    rows = self._store.run(
                        "conversation/select_conversation_endpoint.sql",
                        {"conversation_handle": key})
                if not rows:
                    raise ConversationError(
                        f"conversation handle {key} does not exist in this instance (never "
                        "begun, or ended WITH CLEANUP)")
                ep = Endpoint(rows[0], persisted=True)
                if self.current() is None:  # P7: bound the cache outside units of work too
                    with self._store._lock:
                        self._endpoints[key] = ep
                        self._endpoints.trim()
                else:  # kept until the unit of work ends: callers hold what they read
                    self._endpoints[key] = ep
        if database_id is not None and ep.database_id != database_id:
            raise ConversationError(
                f"conversation handle {handle} is not an endpoint of this database; use the "
                f"database {self.catalog(ep.database_id).name!r}")
        return ep

    def _next_order(self) -> int:
        self._queuing_order += 1
        return self._queuing_order

    def _now(self) -> datetime:
        return to_utc_datetime(self._clock())

    def _note_deadline(self, uow: UnitOfWork, when: datetime | None) -> None:
        if when is None:
            return
        at = (when - datetime(1970, 1, 1)).total_seconds()
        if at < self.next_deadline or self.next_deadline == 0.0:
            self.next_deadline = at
            uow.wake = True

    # -- BEGIN DIALOG --------------------------------------------------------------------

    def begin_dialog(
        self,
        database_id: int,
        from_service: str,
        to_service: str,
        contract: str,
        broker_instance: str | None,
        lifetime: int | None,
        related_conversation_group: str | None,
    ) -> str:
        check_name("service", from_service, MAX_VALUE_LENGTH)
        check_name("service", to_service, MAX_VALUE_LENGTH)
        check_name("contract", contract, MAX_VALUE_LENGTH)
        if broker_instance is not None:
            broker_instance = normalize_guid(broker_instance)
        if lifetime is None:
            lifetime = DEFAULT_LIFETIME
        elif isinstance(lifetime, bool) or not isinstance(lifetime, int) or not (
            0 < lifetime <= DEFAULT_LIFETIME
        ):
            raise InvalidArgumentError(
                f"lifetime must be a whole number of seconds from 1 to {DEFAULT_LIFETIME}: "
                f"{lifetime!r}")
        group = None
        if related_conversation_group is not None:
            group = uuid_text("related_conversation_group", related_conversation_group)
        with self.unit_of_work() as uow:
            uow.activate()
            catalog = self.catalog(database_id)
            if from_service not in catalog.services:
                raise NotFoundError(
                    f"service {from_service!r} does not exist in database {catalog.name!r}")
            if contract not in catalog.contracts:
                raise NotFoundError(
                    f"contract {contract!r} does not exist in database {catalog.name!r}")
            now = self._now()
            handle = new_handle()  # P7: time-ordered, see handles.py
            state = transition(INITIATOR, None, "begin").state
            ep = Endpoint((
                handle, database_id, str(uuid.uuid4()), group or str(uuid.uuid4()),
                True, from_service, contract, to_service, None, broker_instance, state,
                now + timedelta(seconds=lifetime), None, 0, 0, None, 0, 0, 0, None, None, None,
                5, now, "",
            ), persisted=False)
            self._endpoints[handle] = ep
            uow.touch(ep)
            self._note_deadline(uow, ep.lifetime)
        return handle

    # -- MOVE CONVERSATION ---------------------------------------------------------------

    def move_conversation(self, database_id: int, handle: str, group_id: str) -> None:
        """MOVE CONVERSATION handle TO group_id: this side of the conversation, with its
        messages in the queue, joins the conversation group ``group_id`` (C3's unit of
        RECEIVE), inside the current unit of work.

        As SQL Server documents it, a conversation moves only between groups of the same
        queue, so the group must exist: an open conversation of this database, whose
        service uses the same queue, is in it (a new group begins with BEGIN DIALOG ...
        WITH RELATED_CONVERSATION_GROUP). SQL Server locks both groups until the
        transaction ends; here the unit of work holds the store's lock, which is stronger."""
        group = uuid_text("conversation_group_id", group_id)
        with self.unit_of_work() as uow:
            uow.activate()
            ep = self.endpoint(handle, database_id)
            if ep.state == "CD":
                raise ConversationStateError(
                    f"cannot move conversation {ep.conversation_handle} to another group: it "
                    "is closed (state CD)", role=ep.role, state=ep.state, event="move")
            if group == ep.conversation_group_id:
                return
            catalog = self.catalog(database_id)
            queue = catalog.services.get(ep.service_name)
            # the flush in uow.sql writes this transaction's new endpoints first
            found = uow.sql("conversation/select_group_services.sql",
                            {"conversation_group_id": group})
            here = [service for db, service in found if db == database_id]
            if not found:
                raise NotFoundError(
                    f"conversation group {group} does not exist: no open conversation is in "
                    f"it; move the conversation to the group of another conversation of "
                    f"queue {queue!r} (its conversation_group_id), or begin one in a new "
                    "group (BEGIN DIALOG ... WITH RELATED_CONVERSATION_GROUP, "
                    "begin_dialog(related_conversation_group=...))")
            if not here:
                other = self.catalog(found[0][0]).name
                raise ConversationError(
                    f"conversation group {group} belongs to database {other!r}, not "
                    f"{catalog.name!r}: a conversation moves only to a group of its own "
                    f"database and queue ({queue!r})")
            queues = sorted({catalog.services.get(service) or "" for service in here})
            if queue not in queues:
                raise ConversationError(
                    f"conversation group {group} is a group of queue "
                    f"{' and '.join(repr(q) for q in queues)}, but conversation "
                    f"{ep.conversation_handle} is of queue {queue!r}: a conversation moves "
                    "only between groups of the same queue")
            params = {"conversation_handle": ep.conversation_handle,
                      "conversation_group_id": group}
            uow.sql("conversation/update_conversation_group.sql", params)
            uow.sql("conversation/update_queue_messages_group.sql", params)
            ep.conversation_group_id = group
            uow.touch(ep)  # a rollback reads it back from the file, in its old group
            # RECEIVE's read-ahead holds messages by group: read the queue again
            uow.forget_read_ahead()

    # -- SEND ----------------------------------------------------------------------------

    def send(self, database_id: int, handle: str, body: Any, message_type: str) -> int:
        body = _as_bytes(body)
        with self.unit_of_work() as uow:
            uow.activate()
            ep = self.endpoint(handle, database_id)
            t = TRANSITIONS.get((ep.role, ep.state, "send"))
            if t is None:
                transition(ep.role, ep.state, "send")  # raises, naming the state
            validation = self._permission(ep, message_type)
            self._validate(body, validation, message_type)
            seq = ep.send_sequence
            ep.send_sequence = seq + 1
            ep.state = t.state
            uow.touch(ep)
            self._dispatch(uow, ep, [(seq, message_type, validation, body, False, False)])
        return seq

    def next_send_sequences(self, database_id: int, handles: list[str]) -> list[int | None]:
        """The sequence number the next SEND on each conversation gets (P3.1), or None
        where a SEND would fail for the conversation itself (unknown, another database's,
        or in a state that may not send). Inside a transaction, after this takes the lock
        as a SEND does, the numbers hold until it ends for every SEND that succeeds; a
        client of a served instance pipelines its SENDs with them."""
        with self.unit_of_work() as uow:
            uow.activate()
            found: list[int | None] = []
            for handle in handles:
                try:
                    ep = self.endpoint(handle, database_id)
                except BrokerError:
                    found.append(None)
                    continue
                sends = (ep.role, ep.state, "send") in TRANSITIONS
                found.append(ep.send_sequence if sends else None)
            return found

    def _permission(self, ep: Endpoint, message_type: str) -> str:
        """The validation of ``message_type`` if this side may send it (else raise)."""
        permissions = ep.permissions
        if permissions is None or ep.epoch != self._epoch:
            self._refresh_cached(ep)
            permissions = ep.permissions
        found = permissions.get(message_type)  # type: ignore[union-attr]
        if found is None:
            if not isinstance(message_type, str):
                raise InvalidArgumentError(
                    f"message_type must be a message type name, not "
                    f"{type(message_type).__name__}")
            catalog = self.catalog(ep.database_id)
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

    def _refresh_cached(self, ep: Endpoint) -> None:
        catalog = self.catalog(ep.database_id)
        usages = catalog.contracts.get(ep.service_contract_name, {})
        index = 0 if ep.is_initiator else 1
        ep.permissions = {
            mtype: catalog.message_types.get(mtype, "N")
            for mtype, sent_by in usages.items() if sent_by[index]
        }
        ep.route = None
        ep.far_handle = None
        ep.epoch = self._epoch

    def _validate(self, body: bytes, validation: str, message_type: str) -> None:
        limit = self.max_message_size
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
        if body:  # an empty body passes XML validation, as in SQL Server
            parser = expat.ParserCreate()
            try:
                parser.Parse(body, True)
            except expat.ExpatError as exc:
                raise MessageValidationError(
                    f"message type {message_type!r} has VALIDATION = WELL_FORMED_XML, but the "
                    f"body is not well-formed XML: {exc}") from None

    # -- RECEIVE -------------------------------------------------------------------------

    def receive(
        self, database_id: int, queue: str, max_messages: int, timeout: float,
        conversation_handle: str | None = None, conversation_group_id: str | None = None,
    ) -> list[Message]:
        check_name("queue", queue)
        if conversation_handle is not None or conversation_group_id is not None:
            return self._receive_where(database_id, queue, max_messages, timeout,
                                       conversation_handle, conversation_group_id)
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or (
            max_messages < 1
        ):
            raise InvalidArgumentError(f"max_messages must be a positive whole number: "
                                       f"{max_messages!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise InvalidArgumentError(f"timeout must be seconds >= 0: {timeout!r}")
        self._queue_settings(database_id, queue)
        deadline = time.monotonic() + timeout
        outer = self.current()
        # WAITFOR (RECEIVE): wait without holding the instance, so others can send; only
        # possible while this thread holds no open transaction.
        can_wait = timeout > 0 and (outer is None or not outer.locked)
        key = (database_id, queue)
        while True:
            if can_wait and not self._read_ahead_ready(key):
                watcher = self.queue_watcher
                if watcher is not None:
                    watcher.waiting(key, 1)
                try:
                    self._wait_ready(database_id, queue, deadline)
                finally:
                    if watcher is not None:
                        watcher.waiting(key, -1)
            with self.unit_of_work() as uow:
                uow.activate()
                settings = self._enabled_queue_settings(database_id, queue)
                if key not in uow.received and key not in self._read_ahead and not (
                        outer is None and key in self._receive_loops):
                    # The first RECEIVE from the queue in this transaction (often the only
                    # one), nothing read ahead, and not a loop of RECEIVEs each in its own
                    # transaction: one statement takes the group out.
                    if outer is None:
                        self._receive_loops.add(key)
                    template = ("conversation/retain_received_messages.sql"
                                if settings.retention else "conversation/receive_messages.sql")
                    rows = message_parts.with_bodies(uow, uow.sql(template, {
                        "database_id": database_id, "queue_name": queue,
                        "max_messages": max_messages}), taken=not settings.retention)
                    rows.sort(key=lambda r: r[0])
                else:
                    rows = self._receive_read_ahead(uow, key, max_messages, settings.retention)
                uow.received.add(key)
            if rows or not can_wait or outer is not None or time.monotonic() >= deadline:
                break
        watcher = self.queue_watcher
        if watcher is not None:
            watcher.received(key, len(rows))
        return [
            Message(r[1], r[2], r[3], r[4], r[5] if r[5] is not None else b"", r[6], r[7], r[0])
            for r in rows
        ]

    def _receive_read_ahead(
        self, uow: UnitOfWork, key: tuple[int, str], max_messages: int, retention: bool
    ) -> list[tuple[Any, ...]]:
        """RECEIVE from the messages read ahead: the next group, read again (after writing
        out what was taken) when they run out or cannot say. What is handed out leaves the
        table at the next flush, in this unit of work's DuckDB transaction, so it leaves
        exactly when the transaction commits (C3); a rollback puts it back and drops every
        read-ahead. Each read takes twice as many messages as the last, up to
        READ_AHEAD_MAX, so a long stream of receives costs a few statements."""
        buffer = self._read_ahead.get(key)
        rows = None if buffer is None else buffer.take(max_messages)
        if rows is None:
            reads = 0 if buffer is None else buffer.reads + 1
            budget = min(max(max_messages, READ_AHEAD_FIRST) << reads, READ_AHEAD_MAX)
            if buffer is not None and buffer.body_size:  # large bodies: read fewer
                budget = min(budget, int(READ_AHEAD_BYTES // buffer.body_size))
            budget = max(budget, max_messages)
            kept: dict[int, tuple[str, int]] = {}
            fetched = self._with_bodies(uow, uow.sql(
                "conversation/select_ready_messages.sql", {
                    "database_id": key[0], "queue_name": key[1], "per_group": budget,
                    "budget": budget}), kept)
            buffer = self._read_ahead[key] = ReceiveBuffer(fetched, reads, kept)
            rows = buffer.take(max_messages)
            if rows is None:  # cannot happen as the read is built; the table is sure
                del self._read_ahead[key]
                template = ("conversation/retain_received_messages.sql" if retention
                            else "conversation/receive_messages.sql")
                rows = message_parts.with_bodies(uow, uow.sql(template, {
                    "database_id": key[0], "queue_name": key[1],
                    "max_messages": max_messages}), taken=not retention)
                rows.sort(key=lambda r: r[0])
                return rows
        (uow.taken_retained if retention else uow.taken).extend(r[0] for r in rows)
        kept = buffer.kept
        if kept:  # their fragments leave with them (message_parts.py)
            for r in rows:
                message = kept.pop(r[0], None)
                if message is not None and not retention:
                    uow.taken_fragments.append(message)
        return rows

    def _with_bodies(self, uow: UnitOfWork, rows: list[tuple[Any, ...]],
                     kept: dict[int, tuple[str, int]]) -> list[tuple[Any, ...]]:
        """Rows of select_ready_messages.sql with each body in its place (column 5); a
        body kept as fragments is read back (message_parts.py), and its message noted in
        ``kept`` (the read-ahead's, dropped with it) until RECEIVE takes it."""
        if not rows:
            return rows
        orders = [r[0] for r in rows]
        bodies = {order: (body, parts) for order, body, parts in uow.sql(
            "conversation/select_message_bodies.sql", {
                "low": min(orders), "high": max(orders),
                "queuing_order": columns.ints(orders)})}
        out = []
        for r in rows:
            body, parts = bodies[r[0]]
            if parts:
                body = message_parts.read_body(uow, r[1], r[3], parts)
                kept[r[0]] = (r[1], r[3])
            out.append((*r[:5], body, *r[5:]))
        return out

    def _read_ahead_ready(self, key: tuple[int, str]) -> bool:
        """Whether messages read ahead from the queue are ready (then it has some)."""
        with self._store._lock:
            buffer = self._read_ahead.get(key)
            return buffer is not None and bool(buffer.groups)

    def _wait_ready(self, database_id: int, queue: str, deadline: float) -> None:
        params = {"database_id": database_id, "queue_name": queue}
        key = (database_id, queue)

        def is_ready() -> bool:
            # what was read ahead says when it holds every ready message of the queue
            buffer = self._read_ahead.get(key)
            if buffer is not None and buffer.groups:
                return True
            if buffer is None or not buffer.complete:
                ready = self._store.run("conversation/count_ready_messages.sql", params)
                return bool(ready and ready[0][0])
            return False

        self._wait_for_arrival(is_ready, queue, deadline)

    def _wait_for_arrival(self, is_ready: Callable[[], bool], queue: str,
                          deadline: float) -> None:
        """Wait until ``is_ready()`` (asked under the store's lock) holds or the deadline
        passes: woken by each commit that delivers (``_arrival``), and asked again at
        least every 50 ms. A close() meanwhile ends the wait with InstanceClosedError."""
        while True:
            if self._closing:
                raise InstanceClosedError(
                    f"the instance was closed while RECEIVE waited for messages on queue "
                    f"{queue!r}: nothing was received (what the queue holds stays in the "
                    "file); open the file again with pybroker.connect() to go on")
            with self._store._lock:
                if is_ready():
                    return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            with self._arrival:
                self._arrival.wait(min(remaining, 0.05))

    # -- the worker ----------------------------------------------------------------------

    def wait_for_work(self, timeout: float) -> bool:
        woken = self._wake.wait(timeout)
        self._wake.clear()
        return woken

    def wake(self) -> None:
        self._wake.set()


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
