"""The messaging engine of one instance: conversation endpoints, delivery into queues, the
transmission queue, and the delay/retry loop (SPEC C1-C5, P3, P5, P8, R4, R5).

Group commit is the design. A unit of work (``Database.transaction()``, or one API call
outside it) keeps endpoint changes in memory and buffers the rows it writes; at commit it
writes them as one set-based statement per table (columns bound as one string each, see
columns.py) in one DuckDB transaction. A ``send()`` therefore runs no SQL: the endpoint,
its route decision, its far endpoint and the contract's permissions are cached in memory.

The cache of endpoints is the state of the file after the last commit. A unit of work that
rolls back evicts every endpoint it touched, so they are read again from the file.

Conversation group locks (SPEC C7, group_locking.py) are the unit of concurrency, as in
SQL Server: each verb locks the group it acts on (SEND, END CONVERSATION, BEGIN
CONVERSATION TIMER and MOVE CONVERSATION the conversation's, BEGIN DIALOG its new or
related group, RECEIVE and GET CONVERSATION GROUP the group they take) until its
transaction ends; a RECEIVE skips groups other transactions hold, a RECEIVE ... WHERE on
one waits for it. One DuckDB connection serves the instance, and a unit of work that
writes into it holds it (the WRITER of the lock table, then the store's lock, as the unit
of work's ``activate``); WRITER is all that is serialized. A transaction that has only
received and sent (the worker's RECEIVE, reply, processing, COMMIT) holds no store until
its commit, which takes it for the short flush: such transactions run side by side, with
each other and with the one that holds WRITER. Its RECEIVE reads the queue on a connection
of its own (Store.read_apart: what was last committed), leaves out what other open
transactions received (``in_flight``), and takes its messages in memory (so does each
RECEIVE of a loop of them outside a transaction, after the first); what a
transaction delivers joins the read-ahead only when it commits (UnitOfWork.deliveries).
Its SEND is kept (sending.py): the conversation's group locked, checked against the
endpoint as last committed (the cached one, which only the WRITER's holder changes, in
place: an endpoint that holder touched is not read, the SEND then waits for WRITER as
before), its sequence number given, nothing shared changed, so no other transaction reads
it; the commit applies the kept SENDs in order as the writer sends
(``Sending.apply_sends``) and writes them with the rest. A conflict is optimistic: when the
endpoint changed meanwhile so that the SEND no longer holds (the far side ended the
conversation, a lifetime expired), the commit rolls the whole transaction back with
WriteConflictError (3960).
Transactions on different conversations never conflict: a SEND's own group, held, keeps
every other verb of the lock table off its endpoint, and only the far side's messages and
the worker's timers reach it otherwise. END CONVERSATION and BEGIN CONVERSATION TIMER are
kept alike (``Sending.keep_verb``: checked as the SEND is, made at commit by the writer's
own call after the kept SENDs), and BEGIN DIALOG keeps its new endpoint in the unit of work
(``UnitOfWork.begun``: no other transaction can know its handle) until the commit adds it
to the endpoints, before the SENDs; MOVE (``_keep_move``) and END WITH CLEANUP are kept
too. A transaction that makes another change (a catalog write joining it, large bodies
staged as pieces, a RECEIVE after its own kept verb, a read of a conversation it kept a
verb on, a verb on an endpoint not in memory) becomes the writer from then until it ends,
what it kept applied first.
Arrivals from the wire and the worker's retries and timers lock no group: their changes
are the writer's, serialized with every other change, and what they deliver is seen when
they commit. The writer waiting for a group whose holder then commits (which needs the
writer's place for its flush) is a deadlock the lock table finds: the writer is its victim
(1205), never the commit. Only one process can open the file.

``Messaging`` keeps the endpoints, the units of work and the verbs of BEGIN DIALOG and MOVE
CONVERSATION, and composes the services that do the rest, each given what it needs:
``catalogs`` (catalog_cache.py), ``delivery`` (delivery.py: routing, delivery and the
delay/retry loop), ``ending`` (end_conversation.py: END CONVERSATION, timers, DROP
SERVICE's endings), ``sending`` (sending.py: SEND, and the verbs kept until commit),
``receiving`` (receive.py: RECEIVE and its read-ahead),
``receive_where`` (receive_where.py: RECEIVE ... WHERE, GET CONVERSATION GROUP),
``remote`` (remote.py: the side of the wire), ``route_requests`` (route_requests.py) and
``commits`` (group_commit.py: the commit that takes WRITER writes those waiting for it with
its own, one set of statements and one COMMIT).
It imports nothing of the API: the instance gives it its store, clock and routing, and the
API's verbs pass a database by its id.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from pybroker.arguments import uuid_text
from pybroker.core.conversation.endpoint import ConversationEndpoint
from pybroker.core.conversation.handles import new_handle
from pybroker.core.conversation.model import DEFAULT_LIFETIME, Message, Router
from pybroker.core.conversation.priorities import endpoint_priority
from pybroker.core.conversation.states import INITIATOR, transition
from pybroker.core.routing.cache import CatalogChange
from pybroker.core.routing.definition import MAX_VALUE_LENGTH, check_name, normalize_guid
from pybroker.errors import (
    ConversationError,
    ConversationStateError,
    InstanceClosedError,
    InvalidArgumentError,
    NotFoundError,
    WriteConflictError,
)
from pybroker.kernel.messaging import transmission_pieces
from pybroker.kernel.messaging.catalog import DatabaseCatalog
from pybroker.kernel.messaging.catalog_cache import CatalogCache
from pybroker.kernel.messaging.counters import MessageCounters
from pybroker.kernel.messaging.delivery import Delivery
from pybroker.kernel.messaging.end_conversation import EndConversation
from pybroker.kernel.messaging.endpoint_cache import DEFAULT_ENDPOINT_CACHE, EndpointCache
from pybroker.kernel.messaging.group_commit import GroupCommit
from pybroker.kernel.messaging.group_locking import GroupLocking
from pybroker.kernel.messaging.read_ahead import ReceiveBuffer
from pybroker.kernel.messaging.receive import Receiving
from pybroker.kernel.messaging.receive_where import ReceiveWhere
from pybroker.kernel.messaging.remote import RemoteDelivery
from pybroker.kernel.messaging.route_requests import RouteRequests
from pybroker.kernel.messaging.sending import Sending
from pybroker.kernel.messaging.unit_of_work import UnitOfWork
from pybroker.timestamps import to_utc_datetime

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.tracing import MessageTracing
    from pybroker.storage.store import Store

POISON_ROLLBACKS = 5  # C3


@dataclass
class _PoisonCount:
    rollbacks: dict[tuple[int, str], int] = field(default_factory=dict)


class QueueWatcher(Protocol):
    """What the engine tells activation's queue monitors (pybroker.kernel.activation), from
    whichever thread does it; each call returns at once."""

    def enqueued(self, queues: set[tuple[int, str]]) -> None:
        """A commit put ready messages into these (database_id, queue) queues."""

    def received(self, queue: tuple[int, str], messages: int) -> None:
        """A RECEIVE from the queue returned ``messages`` (0: an empty rowset)."""

    def waiting(self, queue: tuple[int, str], change: int) -> None:
        """A RECEIVE began (+1) or ended (-1) waiting for the queue's messages."""


class Messaging:
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
        self.store = store
        self.clock = clock
        self.route = route
        self._disable_queue = disable_queue
        self.retry_scale = float(retry_scale)
        # P7: the endpoints in use, bounded; the rest are read again from the file.
        self.endpoints = EndpointCache(endpoint_cache)
        self.catalogs = CatalogCache(store)
        # RECEIVE read-ahead per queue (database_id, queue), kept across transactions
        # (every change to queue_messages goes through this engine: a delivery extends it,
        # END, DROP QUEUE or a rollback drops it).
        self.read_ahead: dict[tuple[int, str], ReceiveBuffer] = {}
        # C7: the conversation group locks; what open transactions received (a read of a
        # queue leaves it out); the lock of both with the read-ahead (unit_of_work.py)
        self.group_locks = GroupLocking(clock, lambda: self.closing)
        self.in_flight: set[int] = set()
        self.read_ahead_lock = threading.RLock()
        self.writer: UnitOfWork | None = None  # the unit of work that holds WRITER now
        self.commits = GroupCommit(self)  # a commit carries those that wait for it
        self._local = threading.local()
        self._poison = _PoisonCount()
        # notified by each commit that delivers: a waiting RECEIVE looks again
        self.arrival = threading.Condition(threading.Lock())
        self._wake = threading.Event()
        self.closing = False  # Instance.close() began: RECEIVEs stop waiting
        self._closed = False  # ... and now refuses new units of work (Messaging.close)
        self.next_deadline: float = 0.0  # epoch seconds; the worker looks then
        self.queue_watcher: QueueWatcher | None = None  # activation, while it runs
        # the transmission queue keeps a body as pieces (transmission_pieces.py): its
        # deletes then delete pieces too (set by remote.load and by each SEND that does)
        self.transmission_pieces = False
        self.counters = MessageCounters()  # what committed transactions did (/metrics)
        # OpenTelemetry spans of the messages (pybroker/kernel/tracing.py), None when off:
        # the only cost of tracing to an instance that does not trace is this None check
        self.tracing: MessageTracing | None = None
        with self.store.lock:
            row = self.store.run("conversation/select_max_queuing_order.sql")
        self._queuing_order = int(row[0][0])
        self.receiving = Receiving(self, store, self.catalogs, self.read_ahead, self.arrival)
        self.receive_where = ReceiveWhere(self.receiving, store, self.catalogs,
                                          lambda: self.queue_watcher)
        self.remote = RemoteDelivery(self)
        self.delivery = Delivery(self, self.catalogs, route)
        self.ending = EndConversation(self, self.delivery)
        self.sending = Sending(self)
        self.remote.load()
        # R2.4, R8: the route requests; ``routing_changed`` tells routing that one began or
        # went (the instance passes RoutingEngine.changed)
        self.route_requests = RouteRequests(self, routing_changed or (lambda change: None))
        with self.store.lock:
            deadline = self.store.run("conversation/select_next_deadline.sql")[0][0]
            asked = self.store.run("conversation/select_route_request_dialogs.sql")
        self.set_next_deadline(deadline)
        if asked and not self.next_deadline:
            # a request dialog may have ended before the file was closed: look at once
            self.next_deadline = 1.0
        self.route_requests.active = bool(asked)

    def set_next_deadline(self, deadline: datetime | None) -> None:
        """The worker looks next at ``deadline`` (the file's earliest; None: nothing due)."""
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
            uow.apply_kept()
        except BaseException as exc:
            self._local.uow = None
            uow.rollback(exc)
            raise
        self._local.uow = None
        uow.commit()

    @contextlib.contextmanager
    def acting_as(self, uow: UnitOfWork) -> Iterator[None]:
        """This thread acts in ``uow`` for the block (a commit applies what a transaction it
        carries kept, group_commit.py: what those verbs begin joins that transaction)."""
        outer = self.current()
        self._local.uow = uow
        try:
            yield
        finally:
            self._local.uow = outer

    # What a unit of work calls back (unit_of_work.py).

    def stage_pieces(self, uow: UnitOfWork, handle: str, sequence: int,
                     body: bytes | memoryview) -> int:
        """A large body of the transmission queue written as pieces apart (how many)."""
        return transmission_pieces.stage(uow, handle, sequence, body)

    def unstage_pieces(self, uow: UnitOfWork) -> None:
        """The pieces ``uow`` wrote apart go (it rolled back)."""
        transmission_pieces.unstage(uow)

    def after_commit(self, uow: UnitOfWork) -> None:
        """``uow`` committed: its endpoints, waiting RECEIVEs, the worker and the wire
        are told."""
        self.counters.add(uow.counts)
        if uow.first_send is not None:
            self.counters.observe_send_commit(time.monotonic() - uow.first_send)
        for key in uow.received:
            self._poison.rollbacks.pop(key, None)
        for handle in uow.touched:
            ep = self.endpoints.get(handle)
            if ep is not None and ep.state == "CD":
                del self.endpoints[handle]  # closed: nothing will read it often again
        # Under the store's lock no unit of work that changed an endpoint is open (those
        # hold it to their end), so every endpoint is as saved
        # and may go. When another thread's unit of work holds it, this one's recency and
        # the trim are skipped, not waited for: the next commit that finds the lock free
        # trims, and an endpoint let go is read back as saved. (Waiting here held a
        # committed RECEIVE up to an arrival transaction's length.)
        lock = self.store.lock
        if lock.acquire(blocking=False):
            try:
                self.endpoints.used(uow.touched)
                self.endpoints.trim()
            finally:
                lock.release()
        if uow.enqueued:
            with self.arrival:
                self.arrival.notify_all()
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

    def after_rollback(self, uow: UnitOfWork) -> None:
        """``uow`` rolled back: what was read inside it is read again; C3's poison
        message handling counts the RECEIVEs it undid."""
        if self.store.closed:  # cut off by close(): no message's fault, nothing to read
            return
        if uow.arrivals:  # what the wire's maps say of held fragments never was
            self.remote.reload()
        if uow.catalog_written:  # what the catalog cache read inside never was
            self.catalog_changed()
        self.counters.add({("rolled_back", key[0], key[1]): 1 for key in uow.received})
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
        self.closing = True
        with self.arrival:
            self.arrival.notify_all()

    def close(self, deadline: float) -> None:
        """No new unit of work from now (InstanceClosedError); the file closes once the
        units of work in flight end (a transaction holding only its groups and kept SENDs
        holds no store, so the store's lock alone would not wait for it), or cuts them off
        at ``deadline`` (time.monotonic(); Store.close)."""
        self._closed = True
        own = self.current()
        self.group_locks.wait_ended(deadline, but=None if own is None else own.transaction_id)
        self.group_locks.cut_off()
        self.store.close()

    # -- catalog -------------------------------------------------------------------------

    @property
    def catalog_version(self) -> int:
        """Changes whenever the catalog may have changed (activation reloads its queues)."""
        return self.catalogs.version

    def catalog_changed(self) -> None:
        """A catalog write committed or rolled back: what was read of it is read again."""
        with self.read_ahead_lock:  # e.g. DROP QUEUE took messages out: read them again
            self.read_ahead.clear()
        self.remote.mirroring_changed()  # e.g. ALTER DATABASE ... SET PARTNER FAILOVER
        self.catalogs.changed()

    def catalog(self, database_id: int) -> DatabaseCatalog:
        return self.catalogs.catalog(database_id)

    def catalog_named(self, name: str) -> DatabaseCatalog:
        return self.catalogs.catalog_named(name)

    @property
    def max_message_size(self) -> int:
        return self.catalogs.max_message_size

    def forget_endpoints(self) -> None:
        """Drop every cached endpoint (a transaction they may have changed rolled back)."""
        self.endpoints.clear()

    def after_catalog_write(self) -> None:
        """A catalog write committed: retry every waiting transmission now."""
        uow = self.current()
        if uow is not None:
            uow.retry_after_commit = True
        else:
            self.run_pending(retry_all=True)

    def endpoint(self, handle: str, database_id: int | None = None) -> ConversationEndpoint:
        uow = self.current()
        if uow is not None and not uow.locked and handle in uow.next_sequences:
            uow.activate()  # this transaction kept SENDs on it: what it reads has them
        ep = self.endpoints.get(handle)
        if ep is None:
            if not isinstance(handle, str):
                raise InvalidArgumentError(
                    f"a conversation handle is a UUID string, not {type(handle).__name__}")
            try:
                key = str(uuid.UUID(handle))
            except ValueError:
                raise InvalidArgumentError(
                    f"{handle!r} is not a conversation handle (a UUID)") from None
            ep = self.endpoints.get(key)
            if ep is None:
                with self.store.lock:
                    rows = self.store.run(
                        "conversation/select_conversation_endpoint.sql",
                        {"conversation_handle": key})
                if not rows:
                    raise ConversationError(
                        f"conversation handle {key} does not exist in this instance (never "
                        "begun, or ended WITH CLEANUP)")
                ep = ConversationEndpoint(rows[0], persisted=True)
                if self.current() is None:  # P7: bound the cache outside units of work too
                    with self.store.lock:
                        self.endpoints[key] = ep
                        self.endpoints.trim()
                else:  # kept until the unit of work ends: callers hold what they read
                    self.endpoints[key] = ep
        if database_id is not None and ep.database_id != database_id:
            raise ConversationError(
                f"conversation handle {handle} is not an endpoint of this database; use the "
                f"database {self.catalog(ep.database_id).name!r}")
        return ep

    def next_order(self) -> int:
        """The queuing order of the next message into any queue of the instance."""
        self._queuing_order += 1
        return self._queuing_order

    def now(self) -> datetime:
        """The instance's clock as a naive UTC datetime (the form every stored time has)."""
        return to_utc_datetime(self.clock())

    def note_deadline(self, uow: UnitOfWork, when: datetime | None) -> None:
        """Something is due at ``when`` (a lifetime, timer or retry): the worker wakes for
        it after ``uow`` commits if it is earlier than what it waits for."""
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
            if group is not None:  # C7: the related group, waited for before the store
                uow.lock_group(database_id, group)
            # C7: a unit of work that holds no store keeps the new dialog, known to it
            # alone, until it does (apply_sends); nothing shared changes before then
            keep = not uow.locked
            if not keep:
                uow.activate()
            version = self.catalogs.version
            catalog = self.catalog(database_id)
            if from_service not in catalog.services:
                raise NotFoundError(
                    f"service {from_service!r} does not exist in database {catalog.name!r}")
            if contract not in catalog.contracts:
                raise NotFoundError(
                    f"contract {contract!r} does not exist in database {catalog.name!r}")
            now = self.now()
            handle = new_handle()  # P7: time-ordered, see handles.py
            state = transition(INITIATOR, None, "begin").state
            ep = ConversationEndpoint((
                handle, database_id, str(uuid.uuid4()), group or str(uuid.uuid4()),
                True, from_service, contract, to_service, None, broker_instance, state,
                now + timedelta(seconds=lifetime), None, 0, 0, None, 0, 0, 0, None, None, None,
                endpoint_priority(catalog.priorities, contract, from_service, to_service),
                now, "",
            ), persisted=False)
            uow.lock_group(database_id, ep.conversation_group_id)
            if keep:
                uow.begun[handle] = (ep, version)
                uow.next_sequences[handle] = (ep.send_sequence, ep.state)  # a read applies it
            else:
                self._begun(uow, ep)
        return handle

    def _begun(self, uow: UnitOfWork, ep: ConversationEndpoint) -> None:
        self.endpoints[ep.conversation_handle] = ep
        uow.touch(ep)
        self.note_deadline(uow, ep.lifetime)

    def begin_kept(self, uow: UnitOfWork, ep: ConversationEndpoint, version: int) -> None:
        """A dialog ``uow`` kept joins the endpoints (it holds the store now): its
        service and contract checked again if the catalog changed since it was begun."""
        if version != self.catalogs.version:
            catalog = self.catalog(ep.database_id)
            for kind, name, names in (("service", ep.service_name, catalog.services),
                                      ("contract", ep.service_contract_name,
                                       catalog.contracts)):
                if name not in names:
                    raise WriteConflictError(
                        f"the transaction was rolled back: its BEGIN DIALOG of conversation "
                        f"{ep.conversation_handle} no longer holds at commit, because "
                        f"another transaction dropped the {kind} {name!r} meanwhile; run "
                        "the transaction again")
        self._begun(uow, ep)

    # -- MOVE CONVERSATION ---------------------------------------------------------------

    def move_conversation(self, database_id: int, handle: str, group_id: str) -> None:
        """MOVE CONVERSATION handle TO group_id: this side of the conversation, with its
        messages in the queue, joins the conversation group ``group_id`` (C3's unit of
        RECEIVE), inside the current unit of work.

        As SQL Server documents it, a conversation moves only between groups of the same
        queue, so the group must exist: an open conversation of this database, whose
        service uses the same queue, is in it (a new group begins with BEGIN DIALOG ...
        WITH RELATED_CONVERSATION_GROUP). SQL Server locks both groups until the
        transaction ends (C7), here too."""
        group = uuid_text("conversation_group_id", group_id)
        with self.unit_of_work() as uow:
            if not uow.locked and self._keep_move(uow, database_id, handle, group):
                return  # made at commit, as the writer (keep_verb)
            uow.activate()
            ep = self.endpoint(handle, database_id)
            uow.lock_group(database_id, ep.conversation_group_id)
            uow.lock_group(database_id, group)
            if ep.state == "CD":
                raise ConversationStateError(
                    f"cannot move conversation {ep.conversation_handle} to another group: it "
                    "is closed (state CD)", role=ep.role, state=ep.state, event="move")
            if group == ep.conversation_group_id:
                return
            # the flush in uow.sql writes this transaction's new endpoints first
            found = uow.sql("conversation/select_group_services.sql",
                            {"conversation_group_id": group})
            self._check_move(database_id, ep, group, found)
            params = {"conversation_handle": ep.conversation_handle,
                      "conversation_group_id": group}
            uow.sql("conversation/update_conversation_group.sql", params)
            uow.sql("conversation/update_queue_messages_group.sql", params)
            ep.conversation_group_id = group
            uow.touch(ep)  # a rollback reads it back from the file, in its old group
            # RECEIVE's read-ahead holds messages by group: read the queue again
            uow.forget_read_ahead()

    def _keep_move(self, uow: UnitOfWork, database_id: int, handle: str, group: str) -> bool:
        """MOVE CONVERSATION of a unit of work that holds no store, kept (keep_verb): both
        groups locked, and the group checked as the file last committed it, with the
        dialogs this transaction began and keeps. False: the caller moves it as the
        writer."""
        ep = self.sending.cached(uow, handle)
        if ep is None or ep.database_id != database_id or ep.state == "CD" or (
                uow.next_sequences.get(handle, (0, ""))[1] == "CD"):
            return False
        uow.lock_group(database_id, ep.conversation_group_id)
        uow.lock_group(database_id, group)
        if group == ep.conversation_group_id:
            return True  # nothing to move (as the writer's MOVE)
        found = set(self.store.read_apart("conversation/select_group_services.sql",
                                          {"conversation_group_id": group}))
        found.update((kept.database_id, kept.service_name) for kept, _ in uow.begun.values()
                     if kept.conversation_group_id == group)
        self._check_move(database_id, ep, group, sorted(found))
        return self.keep_verb(uow, database_id, handle, None, functools.partial(
            self.move_conversation, database_id, handle, group))

    def _check_move(self, database_id: int, ep: ConversationEndpoint, group: str,
                    found: list[tuple[int, str]]) -> None:
        """MOVE's rule (SQL Server's): ``group`` (whose open endpoints are ``found``, as
        database and service) is a group of the conversation's own database and queue."""
        catalog = self.catalog(database_id)
        queue = catalog.services.get(ep.service_name)
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

    # -- SEND ----------------------------------------------------------------------------

    def send(self, database_id: int, handle: str, body: Any, message_type: str) -> int:
        return self.sending.send(database_id, handle, body, message_type)

    def apply_sends(self, uow: UnitOfWork) -> None:
        """``uow`` holds the store now: what it kept is applied (Sending.apply_sends)."""
        self.sending.apply_sends(uow)

    def keep_verb(self, uow: UnitOfWork, database_id: int, handle: str, event: str | None,
                  verb: Callable[[], None]) -> bool:
        return self.sending.keep_verb(uow, database_id, handle, event, verb)

    def next_send_sequences(self, database_id: int, handles: list[str]) -> list[int | None]:
        return self.sending.next_send_sequences(database_id, handles)

    # -- the services' verbs -------------------------------------------------------------

    def run_pending(self, now: float | None = None, *, retry_all: bool = False) -> int:
        """Do what is due at ``now`` (Delivery.run_pending)."""
        return self.delivery.run_pending(now, retry_all=retry_all)

    def end(self, database_id: int, handle: str, error: int | None,
            description: str | None, cleanup: bool) -> None:
        self.ending.end(database_id, handle, error, description, cleanup)

    def begin_timer(self, database_id: int, handle: str, seconds: float) -> None:
        self.ending.begin_timer(database_id, handle, seconds)

    def end_service_conversations(self, database_id: int, service: str) -> None:
        self.ending.end_service_conversations(database_id, service)

    def receive(
        self, database_id: int, queue: str, max_messages: int, timeout: float,
        conversation_handle: str | None = None, conversation_group_id: str | None = None,
    ) -> list[Message]:
        tracing = self.tracing
        started = 0 if tracing is None else time.time_ns()
        if conversation_handle is not None or conversation_group_id is not None:
            check_name("queue", queue)
            messages = self.receive_where.receive(database_id, queue, max_messages, timeout,
                                                  conversation_handle, conversation_group_id)
        else:
            messages = self.receiving.receive(database_id, queue, max_messages, timeout)
        if tracing is not None:
            tracing.received(database_id, queue, messages, started)
        return messages

    def get_conversation_group(
        self, database_id: int, queue: str, timeout: float
    ) -> str | None:
        return self.receive_where.get_conversation_group(database_id, queue, timeout)

    # -- the worker ----------------------------------------------------------------------

    def wait_for_work(self, timeout: float) -> bool:
        woken = self._wake.wait(timeout)
        self._wake.clear()
        return woken

    def wake(self) -> None:
        self._wake.set()
