"""RECEIVE (C3, P3.1) from a queue of one instance, with its read-ahead, and the waiting of
WAITFOR (RECEIVE ...) that RECEIVE ... WHERE and GET CONVERSATION GROUP share.

The first RECEIVE of a queue in a transaction takes its group out of the table with one
statement (receive_messages.sql); a second one reads the first groups of the queue into
memory (ReceiveBuffer, read_ahead.py), and from then on RECEIVE hands out groups from
memory, exactly as the table would, and the messages handed out leave the table in one
statement at the next flush (C3: when the receiving transaction commits). The read-ahead is
kept across transactions; deliveries extend it when they commit, END CONVERSATION, DROP
QUEUE and any rollback drop it (UnitOfWork.forget_read_ahead).

Conversation group locks (C7): RECEIVE takes the first group with ready messages that no
other transaction holds, and holds it (ReceiveBuffer.take's ``may_take``; the table's
select_next_ready_group.sql with the held groups left out). With HONOR_BROKER_PRIORITY
ON the table always answers, by priority first (that template's by_priority): what is
read ahead knows no priorities. Otherwise, inside a transaction that has
changed nothing yet, RECEIVE takes no store: it reads the queue on a connection of its own
(Store.read_apart, what was last committed, less what other open transactions received:
Messaging.in_flight) under the read-ahead lock, and takes its messages in memory; a
message whose body is kept as fragments, or a RECEIVE in a transaction that has written,
goes the writer's way (UnitOfWork.activate) as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from pybroker.core.conversation import columns
from pybroker.core.conversation.model import Message
from pybroker.core.conversation.priorities import DEFAULT_PRIORITY
from pybroker.core.routing.definition import check_name
from pybroker.errors import BrokerError, InstanceClosedError, InvalidArgumentError
from pybroker.kernel.messaging import message_parts
from pybroker.kernel.messaging.catalog_cache import CatalogCache
from pybroker.kernel.messaging.read_ahead import ReceiveBuffer

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.core.conversation.endpoint import ConversationEndpoint
    from pybroker.kernel.messaging.group_locking import GroupLocking
    from pybroker.kernel.messaging.unit_of_work import UnitOfWork
    from pybroker.storage.store import Store

READ_AHEAD_FIRST = 256  # messages (at least max_messages) of the first read of a queue
READ_AHEAD_MAX = 16_384  # ... doubling at each read up to this many
READ_AHEAD_BYTES = 32 * 2**20  # ... and to about this many bytes of bodies (by the last read)
WAKE_EVERY = 0.05  # seconds: a waiting RECEIVE asks again at least this often
# the query of the group the next RECEIVE takes (Receiving.ready_group_order its variables)
READY_GROUP = "conversation/select_next_ready_group.sql"


class _Engine(Protocol):
    """What RECEIVE needs of the messaging engine (engine.py's Messaging): public names."""

    queue_watcher: Any  # engine.py's QueueWatcher (activation), while it runs
    closing: bool  # Instance.close() began: waiting RECEIVEs end
    group_locks: GroupLocking  # C7
    read_ahead_lock: threading.RLock  # with read_ahead and in_flight
    in_flight: set[int]  # queuing orders received by open transactions

    def current(self) -> UnitOfWork | None: ...

    def endpoint(self, handle: str, database_id: int | None = None) -> ConversationEndpoint: ...

    def unit_of_work(self) -> AbstractContextManager[UnitOfWork]: ...


def check_receive(max_messages: int, timeout: float) -> None:
    """RECEIVE TOP (max_messages) ..., WAITFOR (...), TIMEOUT timeout (seconds)."""
    if isinstance(max_messages, bool) or not isinstance(max_messages, int) or (
        max_messages < 1
    ):
        raise InvalidArgumentError(f"max_messages must be a positive whole number: "
                                   f"{max_messages!r}")
    check_timeout(timeout)


def check_timeout(timeout: float) -> None:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise InvalidArgumentError(f"timeout must be seconds >= 0: {timeout!r}")


def messages_of(rows: list[tuple[Any, ...]],
                priority_of: Callable[[str], int]) -> list[Message]:
    """Rows of the receive_messages*.sql templates (with their bodies) as messages, each
    with the priority level of its conversation endpoint (``priority_of(handle)``)."""
    levels: dict[str, int] = {}
    messages = []
    for r in rows:
        level = levels.get(r[1])
        if level is None:
            level = levels[r[1]] = priority_of(r[1])
        messages.append(Message(r[1], r[2], r[3], r[4], r[5] if r[5] is not None else b"",
                                r[6], r[7], r[0], level))
    return messages


class Receiving:
    """RECEIVE of one instance's engine, reading ``store`` under its lock, the queues'
    settings from ``catalogs``, and woken by ``arrival`` (notified by each commit that
    delivers). ``read_ahead`` holds what was read ahead per queue (database_id, queue): what
    the file holds after the last commit less what the open transaction took."""

    def __init__(self, messaging: _Engine, store: Store, catalogs: CatalogCache,
                 read_ahead: dict[tuple[int, str], ReceiveBuffer],
                 arrival: threading.Condition) -> None:
        self._m = messaging
        self._store = store
        self._catalogs = catalogs
        self.read_ahead = read_ahead
        self._arrival = arrival
        # Queues received from by a RECEIVE in its own transaction: the next such RECEIVE
        # reads ahead too (a loop of them costs a statement and a commit per call).
        self._receive_loops: set[tuple[int, str]] = set()

    def receive(self, database_id: int, queue: str, max_messages: int,
                timeout: float) -> list[Message]:
        check_name("queue", queue)
        check_receive(max_messages, timeout)
        self._catalogs.queue_settings(database_id, queue)
        outer = self._m.current()
        key = (database_id, queue)

        def wait(deadline: float) -> None:
            if self._read_ahead_ready(key):
                return
            watcher = self._m.queue_watcher
            if watcher is not None:
                watcher.waiting(key, 1)
            try:
                self._wait_ready(database_id, queue, deadline)
            finally:
                if watcher is not None:
                    watcher.waiting(key, -1)

        def take(uow: UnitOfWork) -> list[tuple[Any, ...]]:
            settings = self._catalogs.enabled_queue_settings(database_id, queue)
            if self._catalogs.catalog(database_id).honor_broker_priority:
                # the table orders groups by priority; what is read ahead does not
                rows = None
                if outer is not None and not uow.has_changes:
                    rows = self._take_priority_apart(uow, key, max_messages,
                                                     settings.retention)
                if rows is None:
                    uow.activate()
                    rows = self._take_group(uow, key, max_messages, settings.retention)
                uow.received_from(key, len(rows))
                return rows
            if not uow.has_changes and (outer is not None or key in self._receive_loops):
                # a transaction that has only received, or a loop of RECEIVEs each in its
                # own transaction: in memory, beside the others (its commit waits for
                # WRITER only to delete what it took, and is carried with other commits)
                found = self._take_apart(uow, key, max_messages, settings.retention)
                if found is not None:
                    uow.received_from(key, len(found))
                    return found
            uow.activate()
            if uow.queues_written or (
                    key not in uow.received and key not in self.read_ahead and not (
                        outer is None and key in self._receive_loops)):
                # The first RECEIVE from the queue in this transaction (often the only
                # one), nothing read ahead, and not a loop of RECEIVEs each in its own
                # transaction: the table says (and after this transaction's own changes
                # to the queues, only the table can).
                if outer is None:
                    self._receive_loops.add(key)
                rows = self._take_group(uow, key, max_messages, settings.retention)
            else:
                rows = self._receive_read_ahead(uow, key, max_messages, settings.retention)
            uow.received_from(key, len(rows))
            return rows

        rows = self.take_when_ready(timeout, wait, take)
        watcher = self._m.queue_watcher
        if watcher is not None:
            watcher.received(key, len(rows))
        return messages_of(rows, self.priority_of(database_id))

    def priority_of(self, database_id: int) -> Callable[[str], int]:
        """The priority level of a conversation endpoint of the database by its handle,
        as it took it when it was made (sys.conversation_endpoints.priority)."""
        def level(handle: str) -> int:
            try:
                return self._m.endpoint(handle, database_id).priority
            except BrokerError:  # ended meanwhile by another thread (END ... WITH CLEANUP)
                return DEFAULT_PRIORITY

        return level

    def take_when_ready(
        self, timeout: float, wait: Callable[[float], None],
        take: Callable[[UnitOfWork], list[tuple[Any, ...]]],
    ) -> list[tuple[Any, ...]]:
        """Run ``take`` in a unit of work (joining the caller's transaction), first waiting
        (``wait(deadline)``) up to ``timeout`` seconds, again while it takes nothing.
        WAITFOR waits without holding the instance, so others can send: only possible
        while this thread holds no open transaction; inside one that has already done work
        there is no waiting (the store stays held)."""
        deadline = time.monotonic() + timeout
        outer = self._m.current()
        while True:
            # a transaction that holds the store cannot wait: nothing could arrive
            can_wait = timeout > 0 and (outer is None or not outer.locked)
            if can_wait:
                wait(deadline)
            with self._m.unit_of_work() as uow:
                rows = take(uow)
            if rows or not can_wait or time.monotonic() >= deadline:
                return rows

    def hold(self, uow: UnitOfWork, orders: list[int]) -> None:
        """``uow`` took these messages from the table: no read gives them to another."""
        with self._m.read_ahead_lock:
            uow.hold(orders)

    def group_of(self, handle: str | None, database_id: int) -> str | None:
        """The conversation group of ``handle`` (None: no such conversation here)."""
        if handle is None:
            return None
        try:
            return self._m.endpoint(handle, database_id).conversation_group_id
        except BrokerError:
            return None

    def ready_group_order(self, database_id: int) -> dict[str, bool]:
        """The variables of READY_GROUP, the query of the group the next
        RECEIVE takes: the first ready one, or with HONOR_BROKER_PRIORITY ON the one of the
        highest priority, then the first."""
        return {"by_priority": self._catalogs.catalog(database_id).honor_broker_priority}

    def may_take(self, uow: UnitOfWork, database_id: int) -> Callable[[str], bool]:
        """Whether ``uow`` may take a group of the database, locking it if so (C7)."""
        locks, holder = self._m.group_locks, uow.transaction_id
        return lambda group: locks.try_acquire(holder, (database_id, group))

    def lock_filters(self, uow: UnitOfWork | None, database_id: int) -> dict[str, str]:
        """What a read of the table leaves out (C7): the groups of the database other
        transactions hold, and the messages open transactions received, for SQL."""
        holder = -1 if uow is None else uow.transaction_id
        with self._m.read_ahead_lock:
            return {"held_groups": columns.guids(sorted(
                        self._m.group_locks.held_by_others(holder, database_id))),
                    "in_flight": columns.ints(self._m.in_flight)}

    def wait_for_arrival(self, is_ready: Callable[[], bool], queue: str,
                         deadline: float) -> None:
        """Wait until ``is_ready()`` (asked under the read-ahead lock) holds or the deadline
        passes: woken by each commit that delivers, and asked again at least every
        WAKE_EVERY seconds. A close() meanwhile ends the wait with InstanceClosedError.
        ``is_ready`` runs under the read-ahead lock, never the store's: a waiting
        transaction may hold a group the writer waits for (C7)."""
        while True:
            if self._m.closing:
                raise InstanceClosedError(
                    f"the instance was closed while RECEIVE waited for messages on queue "
                    f"{queue!r}: nothing was received (what the queue holds stays in the "
                    "file); open the file again with pybroker.connect() to go on")
            with self._m.read_ahead_lock:
                if is_ready():
                    return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            with self._arrival:
                self._arrival.wait(min(remaining, WAKE_EVERY))

    def _receive_read_ahead(
        self, uow: UnitOfWork, key: tuple[int, str], max_messages: int, retention: bool
    ) -> list[tuple[Any, ...]]:
        """RECEIVE from the messages read ahead: the next group, read again (after writing
        out what was taken) when they run out or cannot say. What is handed out leaves the
        table at the next flush, in this unit of work's DuckDB transaction, so it leaves
        exactly when the transaction commits (C3); a rollback puts it back and drops every
        read-ahead. Each read takes twice as many messages as the last, up to
        READ_AHEAD_MAX, so a long stream of receives costs a few statements."""
        with self._m.read_ahead_lock:
            return self._take_read_ahead(uow, key, max_messages, retention)

    def _take_read_ahead(
        self, uow: UnitOfWork, key: tuple[int, str], max_messages: int, retention: bool
    ) -> list[tuple[Any, ...]]:
        may_take = self.may_take(uow, key[0])
        buffer = self.read_ahead.get(key)
        rows = None if buffer is None else buffer.take(max_messages, may_take)
        if rows is None:
            reads = 0 if buffer is None else buffer.reads + 1
            budget = min(max(max_messages, READ_AHEAD_FIRST) << reads, READ_AHEAD_MAX)
            if buffer is not None and buffer.body_size:  # large bodies: read fewer
                budget = min(budget, int(READ_AHEAD_BYTES // buffer.body_size))
            budget = max(budget, max_messages)
            kept: dict[int, tuple[str, int]] = {}
            fetched = _with_bodies(uow, uow.sql(
                "conversation/select_ready_messages.sql", {
                    "database_id": key[0], "queue_name": key[1], "per_group": budget,
                    "budget": budget, "in_flight": columns.ints(self._m.in_flight)}), kept)
            buffer = self.read_ahead[key] = ReceiveBuffer(fetched, reads, kept)
            rows = buffer.take(max_messages, may_take)
            if rows is None:  # every group read is held, or cannot say: the table is sure
                del self.read_ahead[key]
                return self._take_group(uow, key, max_messages, retention)
        self._taken(uow, buffer, rows, retention)
        return rows

    @staticmethod
    def _taken(uow: UnitOfWork, buffer: ReceiveBuffer, rows: list[tuple[Any, ...]],
               retention: bool) -> None:
        """``rows`` handed out of ``buffer`` to ``uow``: they leave (or are retained) at
        its flush, and no read gives them to another transaction meanwhile."""
        (uow.taken_retained if retention else uow.taken).extend(r[0] for r in rows)
        uow.hold(r[0] for r in rows)
        released = buffer.release_kept(rows)  # their fragments leave with them
        if not retention:
            uow.taken_fragments.extend(released)

    def _take_apart(
        self, uow: UnitOfWork, key: tuple[int, str], max_messages: int, retention: bool
    ) -> list[tuple[Any, ...]] | None:
        """RECEIVE in a transaction that has changed nothing: from the read-ahead, read on
        the store's reading connection (what was last committed, less what open
        transactions received), never the store itself. None: the writer's way must
        answer (a body kept as fragments, or the read cannot say)."""
        store = self._store
        with self._m.read_ahead_lock:
            may_take = self.may_take(uow, key[0])
            buffer = self.read_ahead.get(key)
            rows = None if buffer is None else buffer.take(max_messages, may_take)
            if rows is None:
                reads = 0 if buffer is None else buffer.reads + 1
                budget = min(max(max_messages, READ_AHEAD_FIRST) << reads, READ_AHEAD_MAX)
                if buffer is not None and buffer.body_size:
                    budget = min(budget, int(READ_AHEAD_BYTES // buffer.body_size))
                budget = max(budget, max_messages)
                found = store.read_apart("conversation/select_ready_messages.sql", {
                    "database_id": key[0], "queue_name": key[1], "per_group": budget,
                    "budget": budget, "in_flight": columns.ints(self._m.in_flight)})
                fetched = []
                if found:
                    orders = [r[0] for r in found]
                    bodies = {order: (body, parts) for order, body, parts in store.read_apart(
                        "conversation/select_message_bodies.sql", {
                            "low": min(orders), "high": max(orders),
                            "queuing_order": columns.ints(orders)})}
                    if any(bodies[o][1] for o in orders):
                        return None  # kept as fragments (message_parts.py): the writer's
                    fetched = [(*r[:5], bodies[r[0]][0], *r[5:]) for r in found]
                buffer = self.read_ahead[key] = ReceiveBuffer(fetched, reads)
                rows = buffer.take(max_messages, may_take)
                if rows is None:
                    return None
            self._taken(uow, buffer, rows, retention)
            return rows

    def _take_priority_apart(self, uow: UnitOfWork, key: tuple[int, str], max_messages: int,
                             retention: bool) -> list[tuple[Any, ...]] | None:
        """RECEIVE with HONOR_BROKER_PRIORITY ON in a transaction that has changed nothing:
        the group of the highest priority no other transaction holds, read on the store's
        reading connection and locked (C7), then its messages as RECEIVE ... WHERE takes
        them apart. None: the writer's way must answer (a body kept as fragments)."""
        params = {"database_id": key[0], "queue_name": key[1]}
        may_take = self.may_take(uow, key[0])
        with self._m.read_ahead_lock:
            while True:
                found = self._store.read_apart(READY_GROUP, {
                    **params, **self.lock_filters(uow, key[0])}, by_priority=True)
                if not found:
                    return []
                group = str(found[0][0])
                if may_take(group):
                    break
            return self.take_where_apart(uow, key, {
                **params, "conversation_handle": None, "conversation_group_id": group,
                "max_messages": max_messages}, retention)

    def take_where_apart(self, uow: UnitOfWork, key: tuple[int, str],
                         params: dict[str, Any], retention: bool
                         ) -> list[tuple[Any, ...]] | None:
        """RECEIVE ... WHERE on a group ``uow`` holds, in a transaction that has changed
        nothing: read on the store's reading connection, taken in memory (as _take_apart).
        What was read ahead of the queue goes (it may hold them). None: a body is kept as
        fragments, the writer's way must answer."""
        with self._m.read_ahead_lock:
            rows = self._store.read_apart("conversation/select_ready_messages_where.sql", {
                **params, "in_flight": columns.ints(self._m.in_flight)})
            if any(r[8] for r in rows):
                return None
            self.read_ahead.pop(key, None)
            rows = [r[:8] for r in rows]
            (uow.taken_retained if retention else uow.taken).extend(r[0] for r in rows)
            uow.hold(r[0] for r in rows)
            uow.read_ahead_stale.add(key)
            return rows

    def _take_group(self, uow: UnitOfWork, key: tuple[int, str], max_messages: int,
                    retention: bool) -> list[tuple[Any, ...]]:
        """The writer's RECEIVE from the table: the first group no other transaction
        holds, locked (C7), then its messages taken out in one statement (or retained).
        What was read ahead of the queue may hold them: it goes when this commits, and
        until then the group's lock keeps others from them."""
        params = {"database_id": key[0], "queue_name": key[1]}
        may_take = self.may_take(uow, key[0])
        while True:
            found = uow.sql(READY_GROUP, {**params, **self.lock_filters(uow, key[0])},
                            **self.ready_group_order(key[0]))
            if not found:
                return []
            group = str(found[0][0])
            if may_take(group):
                break
        template = ("conversation/retain_received_messages_where.sql" if retention
                    else "conversation/receive_messages_where.sql")
        rows = message_parts.with_bodies(uow, uow.sql(template, {
            **params, "conversation_handle": None, "conversation_group_id": group,
            "max_messages": max_messages}), taken=not retention)
        rows.sort(key=lambda r: r[0])
        self.hold(uow, [r[0] for r in rows])
        uow.read_ahead_stale.add(key)
        return rows

    def _read_ahead_ready(self, key: tuple[int, str]) -> bool:
        """Whether messages read ahead from the queue are ready in a group no other
        transaction holds (C7)."""
        uow = self._m.current()
        with self._m.read_ahead_lock:
            buffer = self.read_ahead.get(key)
            if buffer is None or not buffer.groups:
                return False
            holder = -1 if uow is None else uow.transaction_id
            return buffer.has_group(self._m.group_locks.held_by_others(holder, key[0]))

    def _wait_ready(self, database_id: int, queue: str, deadline: float) -> None:
        params = {"database_id": database_id, "queue_name": queue}
        key = (database_id, queue)
        uow = self._m.current()
        holder = -1 if uow is None else uow.transaction_id

        def is_ready() -> bool:
            # what was read ahead says when it holds every ready message of the queue
            held = self._m.group_locks.held_by_others(holder, database_id)
            buffer = self.read_ahead.get(key)
            if buffer is not None and buffer.has_group(held):
                return True
            if buffer is None or not buffer.complete:
                ready = self._store.read_apart("conversation/count_ready_messages.sql", {
                    **params, "held_groups": columns.guids(sorted(held)),
                    "in_flight": columns.ints(self._m.in_flight)})
                return bool(ready and ready[0][0])
            return False

        self.wait_for_arrival(is_ready, queue, deadline)


def _with_bodies(uow: UnitOfWork, rows: list[tuple[Any, ...]],
                 kept: dict[int, tuple[str, int]]) -> list[tuple[Any, ...]]:
    """Rows of select_ready_messages.sql with each body in its place (column 5); a body
    kept as fragments is read back (message_parts.py), and its message noted in ``kept``
    (the read-ahead's, dropped with it) until RECEIVE takes it."""
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
