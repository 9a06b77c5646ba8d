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
"""

from __future__ import annotations

import contextlib
import heapq
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from xml.parsers import expat
from xml.sax.saxutils import escape

from pybroker.conversation import columns
from pybroker.conversation.api import Message
from pybroker.conversation.endpoint_cache import DEFAULT_ENDPOINT_CACHE, EndpointCache
from pybroker.conversation.handles import new_handle
from pybroker.conversation.remote import Remote, RemoteDelivery
from pybroker.conversation.states import (
    INITIATOR,
    TARGET,
    TRANSITIONS,
    transition,
)
from pybroker.errors import (
    BrokerError,
    ContractViolationError,
    ConversationError,
    ConversationStateError,
    InvalidArgumentError,
    MessageValidationError,
    NotFoundError,
    QueueDisabledError,
)
from pybroker.routing.definition import MAX_VALUE_LENGTH, check_name, normalize_guid
from pybroker.routing.engine import to_utc_datetime

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.instance import Database, Instance

SYSTEM_PREFIX = "http://schemas.microsoft.com/SQL/ServiceBroker/"
END_DIALOG = SYSTEM_PREFIX + "EndDialog"
ERROR = SYSTEM_PREFIX + "Error"
DIALOG_TIMER = SYSTEM_PREFIX + "DialogTimer"
ERROR_NAMESPACE = SYSTEM_PREFIX + "Error"
DEFAULT = "DEFAULT"

DEFAULT_LIFETIME = 2**31  # seconds (C1)
UNSEQUENCED = -1
BACKOFF = (4.0, 8.0, 16.0, 32.0, 64.0)  # C5, seconds before scaling
POISON_ROLLBACKS = 5  # C3

# C2: broker error codes.
LIFETIME_EXPIRED = -8489
REMOTE_ENDPOINT_CLOSED = -8462
SERVICE_DROPPED = -8490
CONTRACT_NOT_SUPPORTED = -8408

# C4: why a message has not left, in the manner of SQL Server's texts.
STATUS_NO_ROUTE = (
    "The target service name could not be found. Ensure that the service name is "
    "specified correctly and/or the routing information has been supplied."
)
STATUS_QUEUE_DISABLED = "The destination queue is disabled."
STATUS_NO_TRANSPORT = (
    "Connection attempt failed with error: 'this version of pybroker has no network "
    "transport (the wire protocol comes in a later version); the message waits here "
    "until it does.'"
)
STATUS_PEER_ENDED = "The conversation has been ended by the far side"

VALIDATION_CODES = {"NONE": "N", "EMPTY": "E", "WELL_FORMED_XML": "X"}
VALIDATION_NAMES = {code: name for name, code in VALIDATION_CODES.items()}


# -- the catalog, cached per database -----------------------------------------------------


@dataclass(slots=True)
class QueueSettings:
    status: bool
    retention: bool
    poison_message_handling: bool


@dataclass(slots=True)
class DatabaseCatalog:
    """What conversations read of one database's catalog, loaded once per catalog change."""

    database_id: int
    name: str
    broker_instance: str
    message_types: dict[str, str]  # name -> validation code N/E/X
    system_message_types: frozenset[str]
    contracts: dict[str, dict[str, tuple[bool, bool]]]  # -> type -> (initiator, target)
    system_contracts: frozenset[str]
    services: dict[str, str]  # name -> queue
    service_contracts: dict[str, frozenset[str]]
    queues: dict[str, QueueSettings]


# -- a conversation endpoint in memory ------------------------------------------------------


class Endpoint:
    """One row of conversation_endpoints, plus what is cached to send without SQL."""

    __slots__ = (
        "conversation_group_id",
        "conversation_handle",
        "conversation_id",
        "create_date",
        "database_id",
        "dialog_timer",
        "end_dialog_sequence",
        "epoch",
        "error_code",
        "error_description",
        "far_broker_instance",
        "far_handle",
        "far_service",
        "first_unacked_send_sequence",
        "is_initiator",
        "lifetime",
        "permissions",
        "persisted",
        "priority",
        "receive_sequence",
        "receive_sequence_frag",
        "requested_broker_instance",
        "role",
        "route",
        "saved",
        "send_sequence",
        "service_contract_name",
        "service_name",
        "state",
        "transmission_next_attempt",
        "transmission_retry_count",
        "transmission_status",
    )

    def __init__(self, row: tuple[Any, ...], *, persisted: bool) -> None:
        (self.conversation_handle, self.database_id, self.conversation_id,
         self.conversation_group_id, self.is_initiator, self.service_name,
         self.service_contract_name, self.far_service, self.far_broker_instance,
         self.requested_broker_instance, self.state, self.lifetime, self.dialog_timer,
         self.send_sequence, self.first_unacked_send_sequence, self.end_dialog_sequence,
         self.receive_sequence, self.receive_sequence_frag, self.transmission_retry_count,
         self.transmission_next_attempt, self.error_code, self.error_description,
         self.priority, self.create_date, status) = row
        self.transmission_status = status or ""
        self.role = INITIATOR if self.is_initiator else TARGET
        self.persisted = persisted
        self.saved = wide_columns(self) if persisted else None  # as the file holds them
        self.epoch = -1  # the catalog epoch of route/far_handle/permissions
        self.route: Any = None
        self.far_handle: str | None = None
        self.permissions: dict[str, str] | None = None


def wide_columns(ep: Endpoint) -> tuple[Any, ...]:
    """The columns of update_conversation_endpoints.sql other than the sequence numbers of
    update_endpoint_sequences.sql."""
    return (ep.state, ep.far_broker_instance, ep.dialog_timer, ep.end_dialog_sequence,
            ep.receive_sequence_frag, ep.transmission_retry_count,
            ep.transmission_next_attempt, ep.error_code, ep.error_description)


@dataclass(slots=True)
class _Delivery:
    """Where a message of an endpoint goes now: a queue of this instance."""

    catalog: DatabaseCatalog
    queue_name: str
    far: Endpoint | None  # None: the first message creates the target endpoint


Outgoing = tuple[int, str, str, bytes, bool, bool]  # seq, type, validation, body, end, error


# -- RECEIVE read ahead ---------------------------------------------------------------------

READ_AHEAD_FIRST = 256  # messages (at least max_messages) of the first read of a queue
READ_AHEAD_MAX = 16_384  # ... doubling at each read up to this many
LARGE_BODY = 256 * 1024  # bytes: a body this large is inserted as its own bound row
READ_AHEAD_BYTES = 32 * 2**20  # ... and to about this many bytes of bodies (by the last read)


class ReceiveBuffer:
    """Ready messages of one queue read ahead by RECEIVE (C3, P3.1).

    It holds the first conversation groups of the queue (in the order RECEIVE takes them:
    by their first ready message) with their ready messages in order, read by
    select_ready_messages.sql, so RECEIVE can hand out the next group exactly as
    receive_messages.sql would take it from the table, without a statement per call.
    Every ready message before ``horizon`` (a queuing order; None: no limit) is here,
    except the rest of the groups in ``beyond``, which go on after what was read. When it
    cannot answer for sure, ``take`` says so and the queue is read again. Messages
    delivered into the queue later come after everything read (queuing_order grows), so
    they only extend a group or move the horizon. It is kept across transactions
    (Messaging._read_ahead): every change to a queue's contents goes through the engine,
    which keeps it true or drops it.
    """

    __slots__ = ("beyond", "body_size", "groups", "horizon", "order", "reads")

    def __init__(self, rows: list[tuple[Any, ...]], reads: int) -> None:
        self.groups: dict[str, deque[tuple[Any, ...]]] = {}
        ready: dict[str, int] = {}
        for row in rows:
            self.groups.setdefault(row[2], deque()).append(row[:8])
            ready[row[2]] = row[8]
        self.beyond = {g for g, count in ready.items() if count > len(self.groups[g])}
        self.horizon: int | None = rows[0][9] if rows else None
        # (first queuing order not yet handed out, group): the next group is the least
        self.order = [(found[0][0], g) for g, found in self.groups.items()]
        heapq.heapify(self.order)
        self.reads = reads
        bodies = sum(len(row[5] or b"") for row in rows)
        self.body_size = bodies / len(rows) if rows else 0.0  # average, bounds the next read

    def take(self, max_messages: int) -> list[tuple[Any, ...]] | None:
        """The next group's messages, up to ``max_messages`` in order ([]: the queue has
        no ready message); None when the messages read do not say for sure."""
        order, groups = self.order, self.groups
        while order:
            first, group = order[0]
            found = groups.get(group)
            if found and found[0][0] == first:
                break
            heapq.heappop(order)  # stale: that group was handed out since
        else:
            return [] if self.horizon is None and not self.beyond else None
        if self.horizon is not None and first > self.horizon:
            return None  # an unread group may come first
        if len(found) < max_messages and group in self.beyond:
            return None  # more of the group is ready than was read
        heapq.heappop(order)
        out = [found.popleft() for _ in range(min(max_messages, len(found)))]
        if found:
            heapq.heappush(order, (found[0][0], group))
        else:
            del groups[group]
            if group in self.beyond:  # its next ready message is after the last read
                self.beyond.discard(group)
                self._limit(out[-1][0])
        return out

    def delivered(self, group: str, queuing_order: int) -> None:
        """A message of ``group`` entered the queue (after every message read)."""
        if group in self.groups:
            self.beyond.add(group)
        else:
            self._limit(queuing_order)

    def _limit(self, queuing_order: int) -> None:
        if self.horizon is None or queuing_order < self.horizon:
            self.horizon = queuing_order


# -- the unit of work ---------------------------------------------------------------------


class UnitOfWork:
    """Endpoint changes and buffered rows of one transaction, written at commit."""

    def __init__(self, messaging: Messaging) -> None:
        self.m = messaging
        self.new: dict[str, Endpoint] = {}
        self.dirty: dict[str, Endpoint] = {}
        self.touched: set[str] = set()
        self.queue_rows: list[tuple[Any, ...]] = []
        self.tx_rows: list[tuple[Any, ...]] = []
        self.inbound_rows: list[tuple[Any, ...]] = []  # P8: arrivals for a queue that is OFF
        self.outbound: list[Any] = []  # to the wire after commit (remote.py)
        self.arrivals = False  # applied arrivals from the wire (remote.py keeps their maps)
        self.received: set[tuple[int, str]] = set()
        # RECEIVE: the queuing orders handed out from read-ahead (Messaging._read_ahead),
        # removed (or retained) at the next flush (C3).
        self.taken: list[int] = []
        self.taken_retained: list[int] = []
        self.locked = False
        self.enqueued = False
        self.wake = False
        self.retry_after_commit = False
        self.catalog_written = False  # a catalog write joined this transaction
        self._tx: Any = None

    def activate(self) -> None:
        if not self.locked:
            self.m._store._lock.acquire()
            self.locked = True

    def ensure_tx(self) -> None:
        self.activate()
        if self._tx is None:
            self._tx = self.m._store.transaction()
            self._tx.__enter__()

    def touch(self, ep: Endpoint) -> None:
        self.touched.add(ep.conversation_handle)
        if ep.persisted:
            self.dirty[ep.conversation_handle] = ep
        else:
            self.new[ep.conversation_handle] = ep

    def enqueue(self, row: tuple[Any, ...]) -> None:
        """A message into a queue (a row of insert_queue_messages.sql), written at flush."""
        self.queue_rows.append(row)
        buffers = self.m._read_ahead
        if buffers:
            buffer = buffers.get((row[0], row[1]))
            if buffer is not None:
                buffer.delivered(row[5], row[2])

    def forget_read_ahead(self) -> None:
        """Messages left queues other than by RECEIVE: read them again when needed."""
        self.m._read_ahead.clear()

    def flush(self) -> None:
        if not (self.new or self.dirty or self.queue_rows or self.tx_rows or self.taken
                or self.taken_retained or self.inbound_rows):
            return
        self.ensure_tx()
        run = self.m._store.run
        if self.taken:  # C3: received messages leave with this transaction
            run("conversation/delete_received_messages.sql",
                {"queuing_order": columns.ints(self.taken)})
            self.taken.clear()
        if self.taken_retained:
            run("conversation/retain_received_by_order.sql",
                {"queuing_order": columns.ints(self.taken_retained)})
            self.taken_retained.clear()
        if self.new:
            run("conversation/insert_conversation_endpoints.sql", _endpoint_columns(
                list(self.new.values())))
            for ep in self.new.values():
                ep.persisted = True
                ep.saved = wide_columns(ep)
        if self.dirty:
            # Most endpoints of a SEND change only their sequence numbers: a narrow UPDATE.
            narrow, wide = [], []
            for ep in self.dirty.values():
                now = wide_columns(ep)
                (narrow if now == ep.saved else wide).append(ep)
                ep.saved = now
            if wide:
                run("conversation/update_conversation_endpoints.sql", _endpoint_changes(wide))
            if len(narrow) == 1:
                ep = narrow[0]
                run("conversation/update_endpoint_sequence.sql", {
                    "conversation_handle": ep.conversation_handle,
                    "send_sequence": ep.send_sequence,
                    "first_unacked_send_sequence": ep.first_unacked_send_sequence,
                    "receive_sequence": ep.receive_sequence})
            elif narrow:
                run("conversation/update_endpoint_sequences.sql", {
                    "conversation_handle": columns.guids(e.conversation_handle for e in narrow),
                    "send_sequence": columns.ints(e.send_sequence for e in narrow),
                    "first_unacked_send_sequence": columns.ints(
                        e.first_unacked_send_sequence for e in narrow),
                    "receive_sequence": columns.ints(e.receive_sequence for e in narrow)})
        # One SEND, or a large body: plain bound values (the encoded columns cost more for
        # one row, and copy a large body into base64 text).
        queue_rows = self.queue_rows
        if len(queue_rows) == 1 or any(len(r[12] or b"") > LARGE_BODY for r in queue_rows):
            for row in queue_rows:
                run("conversation/insert_queue_message.sql",
                    dict(zip(_QUEUE_COLUMNS, row, strict=True)))
        elif queue_rows:
            run("conversation/insert_queue_messages.sql", _queue_columns(queue_rows))
        if queue_rows:
            self.enqueued = True
        for rows, inbound in ((self.tx_rows, False), (self.inbound_rows, True)):
            if len(rows) == 1 or any(len(r[14] or b"") > LARGE_BODY for r in rows):
                for row in rows:
                    run("conversation/insert_transmission_queue_row.sql",
                        {**dict(zip(_TX_COLUMNS, row, strict=True)), "is_inbound": inbound})
            elif rows:
                run("conversation/insert_transmission_queue.sql",
                    {**_tx_columns(rows), "is_inbound": inbound})
        self.inbound_rows.clear()
        self.new.clear()
        self.dirty.clear()
        self.queue_rows.clear()
        self.tx_rows.clear()

    def sql(self, template: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Run a statement inside this unit of work's transaction (buffered rows first)."""
        self.flush()
        self.ensure_tx()
        return self.m._store.run(template, params)

    def commit(self) -> None:
        try:
            self.flush()
            if self._tx is not None:
                tx, self._tx = self._tx, None
                tx.__exit__(None, None, None)
        except BaseException as exc:
            self.rollback(exc)
            if isinstance(exc, BrokerError):
                raise
            raise BrokerError(f"the change was not made: {exc}") from exc
        finally:
            self._release()
        self.m._after_commit(self)

    def rollback(self, exc: BaseException) -> None:
        try:
            if self._tx is not None:
                tx, self._tx = self._tx, None
                with contextlib.suppress(BaseException):
                    tx.__exit__(type(exc), exc, exc.__traceback__)
        finally:
            for handle in self.touched:
                self.m._endpoints.pop(handle, None)
            self.m._read_ahead.clear()  # what this transaction received is back
            self._release()
        self.m._after_rollback(self)

    def _release(self) -> None:
        if self.locked:
            self.locked = False
            self.m._store._lock.release()


# -- the engine ---------------------------------------------------------------------------


@dataclass
class _PoisonCount:
    rollbacks: dict[tuple[int, str], int] = field(default_factory=dict)


class Messaging:
    def __init__(self, instance: Instance, *, retry_scale: float = 1.0,
                 endpoint_cache: int = DEFAULT_ENDPOINT_CACHE) -> None:
        if isinstance(retry_scale, bool) or not isinstance(retry_scale, (int, float)) or not (
            retry_scale > 0
        ):
            raise InvalidArgumentError(f"retry_scale must be a positive number: {retry_scale!r}")
        self._instance = instance
        self._store = instance._store
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
        self.next_deadline: float = 0.0  # epoch seconds; the worker looks then
        with self._store._lock:
            row = self._store.run("conversation/select_max_queuing_order.sql")
            deadline = self._store.run("conversation/select_next_deadline.sql")[0][0]
        self._queuing_order = int(row[0][0])
        self.remote = RemoteDelivery(self)
        self.remote.load()
        with self._store._lock:
            deadline = self._store.run("conversation/select_next_deadline.sql")[0][0]
        self._set_next_deadline(deadline)

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

    def _after_commit(self, uow: UnitOfWork) -> None:
        for key in uow.received:
            self._poison.rollbacks.pop(key, None)
        for handle in uow.touched:
            ep = self._endpoints.get(handle)
            if ep is not None and ep.state == "CD":
                del self._endpoints[handle]  # closed: nothing will read it often again
        with self._store._lock:  # no unit of work is open: every endpoint is as saved
            self._endpoints.used(uow.touched)
            self._endpoints.trim()
        if uow.enqueued:
            with self._arrival:
                self._arrival.notify_all()
        if uow.wake:
            self._wake.set()
        if uow.outbound:
            self.remote.after_commit(uow.outbound)
        if uow.retry_after_commit:
            self.run_pending(retry_all=True)

    def _after_rollback(self, uow: UnitOfWork) -> None:
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
                self._instance._database_by_id(database_id).alter_queue(queue, status=False)
            self._poison.rollbacks.pop((database_id, queue), None)

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

    def catalog_changed(self) -> None:
        self._read_ahead.clear()  # e.g. DROP QUEUE took messages out: read them again
        self._catalogs.clear()
        self._database_ids = None
        self._max_message_size = None
        self._epoch += 1

    def catalog(self, database_id: int) -> DatabaseCatalog:
        found = self._catalogs.get(database_id)
        if found is None:
            found = self._load_catalog(database_id)
            self._catalogs[database_id] = found
        return found

    def catalog_named(self, name: str) -> DatabaseCatalog:
        if self._database_ids is None:
            with self._store._lock:
                rows = self._store.run("instance/select_databases.sql")
            self._database_ids = {row[1]: row[0] for row in rows}
        if name not in self._database_ids:
            raise NotFoundError(f"database {name!r} does not exist in this instance")
        return self.catalog(self._database_ids[name])

    def _load_catalog(self, database_id: int) -> DatabaseCatalog:
        run = self._store.run
        p = {"database_id": database_id}
        with self._store._lock:
            (row,) = [r for r in run("instance/select_databases.sql") if r[0] == database_id]
            types = run("instance/select_message_types.sql", p)
            contracts = run("instance/select_contracts.sql", p)
            usages = run("instance/select_contract_message_usages.sql", p)
            services = run("instance/select_services.sql", p)
            service_contracts = run("instance/select_service_contract_usages.sql", p)
            queues = run("instance/select_queue_settings.sql", p)
        contract_map: dict[str, dict[str, tuple[bool, bool]]] = {c[0]: {} for c in contracts}
        for contract, mtype, by_initiator, by_target in usages:
            contract_map.setdefault(contract, {})[mtype] = (by_initiator, by_target)
        accepted: dict[str, set[str]] = {s[0]: set() for s in services}
        for service, contract in service_contracts:
            accepted.setdefault(service, set()).add(contract)
        return DatabaseCatalog(
            database_id=database_id,
            name=row[1],
            broker_instance=row[2],
            message_types={t[0]: t[1] for t in types},
            system_message_types=frozenset(t[0] for t in types if t[2]),
            contracts=contract_map,
            system_contracts=frozenset(c[0] for c in contracts if c[1]),
            services={s[0]: s[1] for s in services},
            service_contracts={k: frozenset(v) for k, v in accepted.items()},
            queues={
                q[0]: QueueSettings(bool(q[1]), bool(q[2]), q[3] is None or bool(q[3]))
                for q in queues
            },
        )

    @property
    def max_message_size(self) -> int:
        if self._max_message_size is None:
            with self._store._lock:
                row = self._store.fetchone("SELECT max_message_size FROM instance_settings")
            self._max_message_size = int(row[0]) if row and row[0] is not None else 2**31 - 1
        return self._max_message_size

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
        return self._instance._now()

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
        database: Database,
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
            group = _uuid("related_conversation_group", related_conversation_group)
        with self.unit_of_work() as uow:
            uow.activate()
            catalog = self.catalog(database.database_id)
            if from_service not in catalog.services:
                raise NotFoundError(
                    f"service {from_service!r} does not exist in database {database.name!r}")
            if contract not in catalog.contracts:
                raise NotFoundError(
                    f"contract {contract!r} does not exist in database {database.name!r}")
            now = self._now()
            handle = new_handle()  # P7: time-ordered, see handles.py
            state = transition(INITIATOR, None, "begin").state
            ep = Endpoint((
                handle, database.database_id, str(uuid.uuid4()), group or str(uuid.uuid4()),
                True, from_service, contract, to_service, None, broker_instance, state,
                now + timedelta(seconds=lifetime), None, 0, 0, None, 0, 0, 0, None, None, None,
                5, now, "",
            ), persisted=False)
            self._endpoints[handle] = ep
            uow.touch(ep)
            self._note_deadline(uow, ep.lifetime)
        return handle

    # -- SEND ----------------------------------------------------------------------------

    def send(self, database: Database, handle: str, body: Any, message_type: str) -> int:
        body = _as_bytes(body)
        with self.unit_of_work() as uow:
            uow.activate()
            ep = self.endpoint(handle, database.database_id)
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

    # -- routing and delivery --------------------------------------------------------------

    def _dispatch(self, uow: UnitOfWork, ep: Endpoint, messages: list[Outgoing]) -> None:
        if ep.transmission_next_attempt is not None:  # earlier messages wait: keep order
            self._stage_transmission(uow, ep, messages, ep.transmission_status)
            return
        target = self._target(uow, ep)
        if target is None:
            return
        if isinstance(target, str):
            self._stage_transmission(uow, ep, messages, target)
            return
        if isinstance(target, Remote):
            self.remote.stage(uow, ep, messages, target)
            return
        self._deliver(uow, ep, target, messages)

    def _target(self, uow: UnitOfWork, ep: Endpoint) -> _Delivery | Remote | str | None:
        """Where ``ep``'s messages go now (R1.1: routed with its own database's table), or
        why they cannot go (a transmission status, C4), or None if ``ep`` was just told it
        cannot send at all (a broker error arrived in its queue)."""
        if ep.epoch != self._epoch:
            self._refresh_cached(ep)
        decision = ep.route
        if decision is None:
            # R5: once the far side has acknowledged, route with its broker identifier.
            broker = ep.far_broker_instance or ep.requested_broker_instance
            decision = self._instance.route(
                ep.far_service, broker_instance=broker,
                origin=self.catalog(ep.database_id).name)
            ep.route = decision
        if decision.outcome == "send":
            if self.remote.wire is None:
                return STATUS_NO_TRANSPORT
            return Remote(decision.address, decision.mirror_address)
        if decision.outcome != "deliver":
            return STATUS_NO_ROUTE
        catalog = self.catalog_named(decision.database)
        queue_name = catalog.services.get(ep.far_service)
        if queue_name is None:
            return STATUS_NO_ROUTE
        far = self._far_endpoint(uow, ep, catalog)
        if far is None:
            if not ep.is_initiator:
                self._bounce(uow, ep, REMOTE_ENDPOINT_CLOSED, _ENDPOINT_CLOSED_TEXT)
                return None
            if ep.service_contract_name not in catalog.service_contracts.get(
                ep.far_service, frozenset()
            ):
                self._bounce(uow, ep, CONTRACT_NOT_SUPPORTED, (
                    f"Target service '{ep.far_service}' does not support contract "
                    f"'{ep.service_contract_name}'."))
                return None
        queue = catalog.queues.get(queue_name)
        if queue is None or not queue.status:
            return STATUS_QUEUE_DISABLED  # P8, C3
        return _Delivery(catalog, queue_name, far)

    def _far_endpoint(
        self, uow: UnitOfWork, ep: Endpoint, catalog: DatabaseCatalog
    ) -> Endpoint | None:
        """The other side in ``catalog``'s database, if it exists there."""
        if ep.far_handle is not None:
            far = self._endpoints.get(ep.far_handle)
            if far is not None:
                return far
            with contextlib.suppress(ConversationError):
                return self.endpoint(ep.far_handle)
            ep.far_handle = None
        if ep.is_initiator and ep.far_broker_instance is None:
            return None  # nothing delivered yet (R5 pins at the first delivery): no target
        rows = uow.sql("conversation/select_far_endpoint.sql", {
            "conversation_id": ep.conversation_id, "is_initiator": not ep.is_initiator,
            "database_id": catalog.database_id})
        if not rows:
            return None
        ep.far_handle = rows[0][0]
        return self.endpoint(rows[0][0])

    def _deliver(
        self, uow: UnitOfWork, sender: Endpoint, target: _Delivery, messages: list[Outgoing]
    ) -> None:
        """Into the target queue in this transaction (R4): the far endpoint applies each
        message's event (C1), takes each sequence number once (P3.2), and acknowledges at
        enqueue (P5.2), so nothing stays in the transmission queue."""
        catalog = target.catalog
        far = target.far
        now = self._now()
        if far is None:
            far = Endpoint((
                new_handle(), catalog.database_id, sender.conversation_id,
                str(uuid.uuid4()), False, sender.far_service, sender.service_contract_name,
                sender.service_name, self.catalog(sender.database_id).broker_instance, None,
                None, sender.lifetime, None, 0, 0, None, 0, 0, 0, None, None, None,
                sender.priority, now, "",
            ), persisted=False)
        sender_catalog = self.catalog(sender.database_id)
        own_queue = sender_catalog.services.get(sender.service_name)
        retain = own_queue is not None and sender_catalog.queues[own_queue].retention
        for seq, mtype, validation, body, is_end, is_error in messages:
            if seq < far.receive_sequence:
                continue  # P3.2: a duplicate is discarded
            event = (
                "receive_end_dialog" if is_end
                else "receive_error" if is_error else "receive_message")
            t = TRANSITIONS.get((far.role, far.state, event))
            if t is None:  # the far side cannot take it: tell the sender (never raise here)
                self._bounce(uow, sender, REMOTE_ENDPOINT_CLOSED, _ENDPOINT_CLOSED_TEXT)
                return
            if far.state is None:  # the first message creates the target endpoint (C1)
                self._endpoints[far.conversation_handle] = far
                self._note_deadline(uow, far.lifetime)
            far.state = t.state
            far.receive_sequence = seq + 1
            if is_error:
                far.error_code, far.error_description = _parse_error(body)
                self._drop_transmissions(uow, far)  # C4: an error ends its sending
            uow.touch(far)
            if t.enqueue:
                uow.enqueue((
                    catalog.database_id, target.queue_name, self._next_order(), 1,
                    far.priority, far.conversation_group_id, far.conversation_handle, seq,
                    far.service_name, far.service_contract_name, mtype, validation, body, now))
            if retain and not (is_end or is_error):  # sent user messages are retained
                uow.enqueue((
                    sender.database_id, own_queue, self._next_order(), 3, sender.priority,
                    sender.conversation_group_id, sender.conversation_handle, seq,
                    sender.service_name, sender.service_contract_name, mtype, validation,
                    body, now))
            sender.first_unacked_send_sequence = seq + 1  # P5.2: acknowledged at enqueue
            if (is_end or is_error) and sender.state == "DO":
                sender.state = transition(sender.role, "DO", "acknowledged_end").state
        if sender.far_broker_instance != catalog.broker_instance:
            sender.far_broker_instance = catalog.broker_instance  # R5: pinned from now on
            sender.route = None
        sender.far_handle = far.conversation_handle
        far.far_handle = sender.conversation_handle
        uow.touch(sender)

    def _stage_transmission(
        self, uow: UnitOfWork, ep: Endpoint, messages: list[Outgoing], status: str
    ) -> None:
        """C4, P8: the messages wait in the sending database's transmission queue."""
        now = self._now()
        to_broker = ep.far_broker_instance or ep.requested_broker_instance
        for seq, mtype, validation, body, is_end, is_error in messages:
            uow.tx_rows.append((
                ep.database_id, ep.conversation_handle, seq, len(body), ep.far_service,
                to_broker, ep.service_name, ep.service_contract_name, mtype, validation,
                is_end, is_error, ep.priority, now, body, status))
        ep.transmission_status = status
        if ep.transmission_next_attempt is None:
            ep.transmission_retry_count = 0
            ep.transmission_next_attempt = now + timedelta(seconds=self._backoff(0))
            self._note_deadline(uow, ep.transmission_next_attempt)
        uow.touch(ep)

    def _backoff(self, retry_count: int) -> float:
        return BACKOFF[min(retry_count, len(BACKOFF) - 1)] * self.retry_scale  # C5

    def _drop_transmissions(self, uow: UnitOfWork, ep: Endpoint) -> None:
        handle = ep.conversation_handle
        uow.tx_rows = [r for r in uow.tx_rows if r[1] != handle]
        if ep.persisted:
            uow.sql("conversation/delete_transmission_queue_of.sql",
                    {"conversation_handle": handle})
        ep.transmission_next_attempt = None
        ep.transmission_retry_count = 0
        ep.transmission_status = ""
        uow.touch(ep)
        self.remote.forget(ep)

    def _bounce(self, uow: UnitOfWork, ep: Endpoint, code: int, description: str) -> None:
        """A broker error about ``ep`` (P3.3, unsequenced) arrives in its own queue."""
        t = TRANSITIONS.get((ep.role, ep.state, "receive_error"))
        self._drop_transmissions(uow, ep)
        if t is None:
            return
        ep.state = t.state
        ep.error_code, ep.error_description = code, description
        if t.enqueue:
            self._stage_local(uow, ep, ERROR, "X", error_body(code, description))
        uow.touch(ep)

    def _stage_local(
        self, uow: UnitOfWork, ep: Endpoint, mtype: str, validation: str, body: bytes
    ) -> None:
        """An unsequenced message of the broker into the endpoint's own queue."""
        catalog = self.catalog(ep.database_id)
        queue = catalog.services.get(ep.service_name)
        if queue is None:
            return  # the service is gone; nothing can receive it
        uow.enqueue((
            ep.database_id, queue, self._next_order(), 1, ep.priority,
            ep.conversation_group_id, ep.conversation_handle, UNSEQUENCED, ep.service_name,
            ep.service_contract_name, mtype, validation, body, self._now()))

    # -- END CONVERSATION, timers --------------------------------------------------------

    def end(
        self,
        database: Database,
        handle: str,
        error: int | None,
        description: str | None,
        cleanup: bool,
    ) -> None:
        if not isinstance(cleanup, bool):
            raise InvalidArgumentError(f"cleanup must be True or False, not {cleanup!r}")
        if cleanup and (error is not None or description is not None):
            raise InvalidArgumentError(
                "END CONVERSATION takes WITH ERROR or WITH CLEANUP, not both")
        if error is not None:
            if isinstance(error, bool) or not isinstance(error, int) or error <= 0:
                raise InvalidArgumentError(
                    f"an application error code is a positive whole number (negative codes "
                    f"are the broker's, C2): {error!r}")
            if not isinstance(description, str) or not description:
                raise InvalidArgumentError(
                    "END CONVERSATION WITH ERROR needs a description (a non-empty string)")
        elif description is not None:
            raise InvalidArgumentError("a description goes with an error code")
        with self.unit_of_work() as uow:
            uow.activate()
            ep = self.endpoint(handle, database.database_id)
            if cleanup:
                transition(ep.role, ep.state, "cleanup")
                self._cleanup(uow, ep)
                return
            event = "end_with_error" if error is not None else "end"
            t = transition(ep.role, ep.state, event)
            if ep.persisted:  # END removes the endpoint's messages from its queue
                uow.queue_rows = [r for r in uow.queue_rows if r[6] != ep.conversation_handle]
                uow.forget_read_ahead()
                uow.sql("conversation/delete_endpoint_messages.sql",
                        {"conversation_handle": ep.conversation_handle})
            if error is not None:
                self._drop_transmissions(uow, ep)  # C4: an error drops what waits
                ep.error_code, ep.error_description = error, description
            ep.state = t.state
            uow.touch(ep)
            if t.notify:
                seq = ep.send_sequence
                ep.send_sequence = seq + 1
                ep.end_dialog_sequence = seq
                if error is None:
                    message: Outgoing = (seq, END_DIALOG, "E", b"", True, False)
                else:
                    message = (seq, ERROR, "X", error_body(error, description or ""), False,
                               True)
                self._dispatch(uow, ep, [message])

    def _cleanup(self, uow: UnitOfWork, ep: Endpoint) -> None:
        """WITH CLEANUP: this side goes, with its queued and waiting messages (C4)."""
        handle = ep.conversation_handle
        uow.queue_rows = [r for r in uow.queue_rows if r[6] != handle]
        uow.forget_read_ahead()
        uow.tx_rows = [r for r in uow.tx_rows if r[1] != handle]
        self.remote.forget(ep)
        uow.new.pop(handle, None)
        uow.dirty.pop(handle, None)
        params = {"conversation_handle": handle}
        if ep.persisted:
            uow.sql("conversation/delete_endpoint_messages.sql", params)
            uow.sql("conversation/delete_transmission_queue_of.sql", params)
            uow.sql("conversation/delete_conversation_endpoint.sql", params)
        self._endpoints.pop(handle, None)
        uow.touched.add(handle)
        ep.state = "CD"

    def begin_timer(self, database: Database, handle: str, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (
            0 <= seconds <= DEFAULT_LIFETIME
        ):
            raise InvalidArgumentError(
                f"a conversation timer takes 0 (cancel) to {DEFAULT_LIFETIME} seconds: "
                f"{seconds!r}")
        with self.unit_of_work() as uow:
            uow.activate()
            ep = self.endpoint(handle, database.database_id)
            if ep.state == "CD":
                raise ConversationStateError(
                    "cannot begin a timer on a closed conversation (state CD)",
                    role=ep.role, state=ep.state, event="begin_timer")
            ep.dialog_timer = None if seconds == 0 else self._now() + timedelta(
                seconds=seconds)
            uow.touch(ep)
            self._note_deadline(uow, ep.dialog_timer)

    # -- RECEIVE -------------------------------------------------------------------------

    def receive(
        self, database: Database, queue: str, max_messages: int, timeout: float
    ) -> list[Message]:
        check_name("queue", queue)
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or (
            max_messages < 1
        ):
            raise InvalidArgumentError(f"max_messages must be a positive whole number: "
                                       f"{max_messages!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise InvalidArgumentError(f"timeout must be seconds >= 0: {timeout!r}")
        self._queue_settings(database, queue)
        deadline = time.monotonic() + timeout
        outer = self.current()
        # WAITFOR (RECEIVE): wait without holding the instance, so others can send; only
        # possible while this thread holds no open transaction.
        can_wait = timeout > 0 and (outer is None or not outer.locked)
        key = (database.database_id, queue)
        while True:
            if can_wait and not self._read_ahead_ready(key):
                self._wait_ready(database.database_id, queue, deadline)
            with self.unit_of_work() as uow:
                uow.activate()
                settings = self._queue_settings(database, queue)
                if not settings.status:
                    raise QueueDisabledError(
                        f"the service queue {queue!r} of database {database.name!r} is "
                        "disabled (STATUS = OFF); ALTER QUEUE ... WITH STATUS = ON")
                if key not in uow.received and key not in self._read_ahead and not (
                        outer is None and key in self._receive_loops):
                    # The first RECEIVE from the queue in this transaction (often the only
                    # one), nothing read ahead, and not a loop of RECEIVEs each in its own
                    # transaction: one statement takes the group out.
                    if outer is None:
                        self._receive_loops.add(key)
                    template = ("conversation/retain_received_messages.sql"
                                if settings.retention else "conversation/receive_messages.sql")
                    rows = uow.sql(template, {
                        "database_id": database.database_id, "queue_name": queue,
                        "max_messages": max_messages})
                    rows.sort(key=lambda r: r[0])
                else:
                    rows = self._receive_read_ahead(uow, key, max_messages, settings.retention)
                uow.received.add(key)
            if rows or not can_wait or outer is not None or time.monotonic() >= deadline:
                break
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
            fetched = self._with_bodies(uow, uow.sql(
                "conversation/select_ready_messages.sql", {
                    "database_id": key[0], "queue_name": key[1], "per_group": budget,
                    "budget": budget}))
            buffer = self._read_ahead[key] = ReceiveBuffer(fetched, reads)
            rows = buffer.take(max_messages)
            if rows is None:  # cannot happen as the read is built; the table is sure
                del self._read_ahead[key]
                template = ("conversation/retain_received_messages.sql" if retention
                            else "conversation/receive_messages.sql")
                rows = uow.sql(template, {"database_id": key[0], "queue_name": key[1],
                                          "max_messages": max_messages})
                rows.sort(key=lambda r: r[0])
                return rows
        (uow.taken_retained if retention else uow.taken).extend(r[0] for r in rows)
        return rows

    @staticmethod
    def _with_bodies(uow: UnitOfWork, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Rows of select_ready_messages.sql with each body in its place (column 5)."""
        if not rows:
            return rows
        orders = [r[0] for r in rows]
        bodies = dict(uow.sql("conversation/select_message_bodies.sql", {
            "low": min(orders), "high": max(orders), "queuing_order": columns.ints(orders)}))
        return [(*r[:5], bodies[r[0]], *r[5:]) for r in rows]

    def _read_ahead_ready(self, key: tuple[int, str]) -> bool:
        """Whether messages read ahead from the queue are ready (then it has some)."""
        with self._store._lock:
            buffer = self._read_ahead.get(key)
            return buffer is not None and bool(buffer.groups)

    def _wait_ready(self, database_id: int, queue: str, deadline: float) -> None:
        params = {"database_id": database_id, "queue_name": queue}
        while True:
            with self._store._lock:
                ready = self._store.run("conversation/count_ready_messages.sql", params)
            if ready and ready[0][0]:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            with self._arrival:
                self._arrival.wait(min(remaining, 0.05))

    def _queue_settings(self, database: Database, queue: str) -> QueueSettings:
        settings = self.catalog(database.database_id).queues.get(queue)
        if settings is None:
            raise NotFoundError(f"queue {queue!r} does not exist in database {database.name!r}")
        return settings

    # -- the delay/retry loop ------------------------------------------------------------

    def run_pending(self, now: float | None = None, *, retry_all: bool = False) -> int:
        """Do what is due at ``now`` (epoch seconds; default the instance's clock): expire
        lifetimes (C2 -8489), fire timers (DialogTimer), retry waiting transmissions (C5);
        ``retry_all`` retries every waiting transmission at once (after a catalog change).
        Returns how many endpoints it acted on."""
        at = self._instance._clock() if now is None else now
        now_dt = to_utc_datetime(at)
        with self.unit_of_work() as uow:
            uow.activate()
            rows = uow.sql("conversation/select_due_endpoints.sql",
                           {"now": now_dt, "retry_all": retry_all})
            retries: list[Endpoint] = []
            for handle, expired, timer_due, retry_due in rows:
                ep = self.endpoint(handle)
                if expired:
                    self._expire(uow, ep)
                if timer_due and ep.dialog_timer is not None:
                    ep.dialog_timer = None
                    uow.touch(ep)
                    if ep.state != "CD":
                        self._stage_local(uow, ep, DIALOG_TIMER, "E", b"")
                if retry_due and ep.transmission_next_attempt is not None:
                    retries.append(ep)
            if retries:
                self._retry(uow, retries, now_dt)
            if retry_all:
                self.remote.release_inbound(uow)
            self.remote.flush_events(uow)
            uow.flush()
            self._set_next_deadline(uow.sql("conversation/select_next_deadline.sql", {})[0][0])
        return len(rows)

    def _expire(self, uow: UnitOfWork, ep: Endpoint) -> None:
        """C2: the lifetime passed; this side ends with error -8489 (each side of a local
        conversation carries the same lifetime, so both sides end)."""
        t = transition(ep.role, ep.state, "lifetime_expired")
        self._drop_transmissions(uow, ep)
        ep.state = t.state
        if t.state == "ER":
            ep.error_code = LIFETIME_EXPIRED
            ep.error_description = _LIFETIME_TEXT
            self._stage_local(uow, ep, ERROR, "X", error_body(LIFETIME_EXPIRED, _LIFETIME_TEXT))
        uow.touch(ep)

    def _retry(self, uow: UnitOfWork, endpoints: list[Endpoint], now: datetime) -> None:
        deliverable: list[tuple[Endpoint, _Delivery]] = []
        remote: list[tuple[Endpoint, Remote]] = []
        failing: dict[str, list[str]] = {}
        for ep in endpoints:
            ep.route = None  # DELAYED and failed conversations are routed again
            waiting_status = ep.transmission_status
            ep.transmission_next_attempt = None  # let _target decide afresh
            target = self._target(uow, ep)
            if target is None:
                continue  # bounced: its transmissions were dropped
            if isinstance(target, Remote):
                remote.append((ep, target))
            elif isinstance(target, str):
                ep.transmission_retry_count += 1
                ep.transmission_next_attempt = now + timedelta(
                    seconds=self._backoff(ep.transmission_retry_count))
                ep.transmission_status = target
                uow.touch(ep)
                if target != waiting_status:
                    failing.setdefault(target, []).append(ep.conversation_handle)
            else:
                deliverable.append((ep, target))
        for status, handles in failing.items():
            uow.sql("conversation/update_transmission_status.sql", {
                "conversation_handle": columns.guids(handles), "transmission_status": status})
        if remote:
            self.remote.resubmit(uow, remote)
        if not deliverable:
            return
        handles = columns.guids(ep.conversation_handle for ep, _ in deliverable)
        rows = uow.sql("conversation/select_transmission_queue_of.sql",
                       {"conversation_handle": handles})
        uow.sql("conversation/delete_transmission_queue_of.sql", {"conversation_handle": handles})
        waiting: dict[str, list[Outgoing]] = {}
        for handle, seq, mtype, validation, body, is_end, is_error in rows:
            waiting.setdefault(handle, []).append(
                (seq, mtype, validation, body or b"", is_end, is_error))
        for ep, target in deliverable:
            ep.transmission_retry_count = 0
            ep.transmission_status = ""
            uow.touch(ep)
            messages = waiting.get(ep.conversation_handle, [])
            if messages:
                self._deliver(uow, ep, target, messages)

    # -- catalog side effects ------------------------------------------------------------

    def end_service_conversations(self, database: Database, service: str) -> None:
        """DROP SERVICE: its endpoints go (as WITH CLEANUP), and a far side in this instance
        gets error -8490 (C2)."""
        with self.unit_of_work() as uow:
            uow.activate()
            rows = uow.sql("instance/select_service_endpoints.sql", {
                "database_id": database.database_id, "service_name": service})
            for handle, conversation_id, is_initiator in rows:
                ep = self.endpoint(handle)
                partners = uow.sql("conversation/select_conversation_partner.sql", {
                    "conversation_id": conversation_id, "is_initiator": not is_initiator})
                self._cleanup(uow, ep)
                for (partner,) in partners:
                    far = self.endpoint(partner)
                    if far.state not in ("CD", "ER", "DO"):
                        self._bounce(uow, far, SERVICE_DROPPED, _SERVICE_DROPPED_TEXT)

    def wait_for_work(self, timeout: float) -> bool:
        woken = self._wake.wait(timeout)
        self._wake.clear()
        return woken

    def wake(self) -> None:
        self._wake.set()


_LIFETIME_TEXT = "The conversation lifetime has expired."
_ENDPOINT_CLOSED_TEXT = (
    "The remote conversation endpoint is either in a state where no more messages can be "
    "exchanged, or it has been dropped.")
_SERVICE_DROPPED_TEXT = "The remote service has been dropped."


def error_body(code: int, description: str) -> bytes:
    """C2: SQL Server's Error message body."""
    return (
        f'<Error xmlns="{ERROR_NAMESPACE}"><Code>{code}</Code>'
        f"<Description>{escape(description)}</Description></Error>"
    ).encode()


def _parse_error(body: bytes) -> tuple[int | None, str | None]:
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(body)
        ns = {"e": ERROR_NAMESPACE}
        code = root.findtext("e:Code", namespaces=ns)
        return (int(code) if code is not None else None,
                root.findtext("e:Description", namespaces=ns))
    except (ET.ParseError, ValueError):
        return None, None


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


def _uuid(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a UUID string, not {type(value).__name__}")
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise InvalidArgumentError(f"{what} {value!r} is not a UUID") from None


# -- rows to bound columns ----------------------------------------------------------------


# How each column of conversation_endpoints travels as one bound string (columns.py).
# "state" is two letters, never a comma: it goes as it is (columns.guids).
_ENDPOINT_ENCODING = {
    "conversation_handle": columns.guids,
    "database_id": columns.ints,
    "conversation_id": columns.guids,
    "conversation_group_id": columns.guids,
    "is_initiator": columns.flags,
    "service_name": columns.texts,
    "service_contract_name": columns.texts,
    "far_service": columns.texts,
    "far_broker_instance": columns.guids,
    "requested_broker_instance": columns.guids,
    "state": columns.guids,
    "lifetime": columns.times,
    "dialog_timer": columns.times,
    "send_sequence": columns.ints,
    "first_unacked_send_sequence": columns.ints,
    "end_dialog_sequence": columns.ints,
    "receive_sequence": columns.ints,
    "receive_sequence_frag": columns.ints,
    "transmission_retry_count": columns.ints,
    "transmission_next_attempt": columns.times,
    "error_code": columns.ints,
    "error_description": columns.texts,
    "priority": columns.ints,
    "create_date": columns.times,
}
# What an endpoint can change after it is created (update_conversation_endpoints.sql).
_ENDPOINT_CHANGES = (
    "conversation_handle", "state", "far_broker_instance", "dialog_timer", "send_sequence",
    "first_unacked_send_sequence", "end_dialog_sequence", "receive_sequence",
    "receive_sequence_frag", "transmission_retry_count", "transmission_next_attempt",
    "error_code", "error_description",
)


def _encode_endpoints(eps: list[Endpoint], names: Iterable[str]) -> dict[str, str]:
    return {name: _ENDPOINT_ENCODING[name](getattr(e, name) for e in eps) for name in names}


def _endpoint_columns(eps: list[Endpoint]) -> dict[str, str]:
    return _encode_endpoints(eps, _ENDPOINT_ENCODING)


def _endpoint_changes(eps: list[Endpoint]) -> dict[str, str]:
    return _encode_endpoints(eps, _ENDPOINT_CHANGES)


_QUEUE_COLUMNS = (
    "database_id", "queue_name", "queuing_order", "status", "priority",
    "conversation_group_id", "conversation_handle", "message_sequence_number", "service_name",
    "service_contract_name", "message_type_name", "validation", "message_body",
    "message_enqueue_time")


def _queue_columns(rows: list[tuple[Any, ...]]) -> dict[str, str]:
    cols = list(zip(*rows, strict=True))
    return {
        "database_id": columns.ints(cols[0]),
        "queue_name": columns.texts(cols[1]),
        "queuing_order": columns.ints(cols[2]),
        "status": columns.ints(cols[3]),
        "priority": columns.ints(cols[4]),
        "conversation_group_id": columns.guids(cols[5]),
        "conversation_handle": columns.guids(cols[6]),
        "message_sequence_number": columns.ints(cols[7]),
        "service_name": columns.texts(cols[8]),
        "service_contract_name": columns.texts(cols[9]),
        "message_type_name": columns.texts(cols[10]),
        "validation": ",".join(cols[11]),
        "message_body": columns.blobs(cols[12]),
        "message_enqueue_time": columns.times(cols[13]),
    }


_TX_COLUMNS = (
    "database_id", "conversation_handle", "message_sequence_number", "message_size",
    "to_service_name", "to_broker_instance", "from_service_name", "service_contract_name",
    "message_type_name", "validation", "is_end_of_dialog", "is_conversation_error",
    "priority", "enqueue_time", "message_body", "transmission_status")


def _tx_columns(rows: list[tuple[Any, ...]]) -> dict[str, str]:
    cols = list(zip(*rows, strict=True))
    return {
        "database_id": columns.ints(cols[0]),
        "conversation_handle": columns.guids(cols[1]),
        "message_sequence_number": columns.ints(cols[2]),
        "message_size": columns.ints(cols[3]),
        "to_service_name": columns.texts(cols[4]),
        "to_broker_instance": columns.guids(cols[5]),
        "from_service_name": columns.texts(cols[6]),
        "service_contract_name": columns.texts(cols[7]),
        "message_type_name": columns.texts(cols[8]),
        "validation": ",".join(cols[9]),
        "is_end_of_dialog": columns.flags(cols[10]),
        "is_conversation_error": columns.flags(cols[11]),
        "priority": columns.ints(cols[12]),
        "enqueue_time": columns.times(cols[13]),
        "message_body": columns.blobs(cols[14]),
        "transmission_status": columns.texts(cols[15]),
    }
