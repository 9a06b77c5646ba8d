"""A unit of work (group commit): the endpoint changes and buffered rows of one transaction,
written at commit as one set-based statement per table, with each column bound as one
string (columns.py); engine.py describes the design.

A unit of work is a transaction of the instance's conversation group locks (SPEC C7,
group_locking.py): it holds the groups it acted on until it ends. It holds the store (the
one DuckDB connection and its write transaction: the lock table's WRITER, then the
store's lock) only from ``activate`` on. RECEIVE and GET CONVERSATION GROUP inside a
transaction that has changed nothing yet take their messages in memory without it
(receive.py), and a SEND is kept as what to send (``sends``: checked against the
conversation as last committed, its sequence number given, nothing shared changed) while
the unit of work holds no store; such transactions run side by side, and their commit
takes the store for its short flush: ``activate`` first applies the SENDs kept, in order,
as the engine sends (Messaging.apply_sends), after the dialogs it began (``begun``) and
before its ENDs and timers kept alike (``verbs``). Every other verb that changes
something activates at once, and so does a read of a conversation this transaction kept a
verb on (it sees its own)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from pybroker.core.conversation import columns
from pybroker.core.conversation.endpoint import ConversationEndpoint, wide_columns
from pybroker.core.conversation.group_locks import WRITER
from pybroker.core.conversation.system_messages import ROUTE_REQUEST_QUEUE
from pybroker.errors import BrokerError

if TYPE_CHECKING:  # pragma: no cover
    import threading

    from pybroker.kernel.messaging.endpoint_cache import EndpointCache
    from pybroker.kernel.messaging.group_locking import GroupLocking
    from pybroker.kernel.messaging.read_ahead import ReceiveBuffer
    from pybroker.storage.store import Store

LARGE_BODY = 256 * 1024  # bytes: a body this large is inserted as its own bound row
# bytes: a body this large goes into the transmission queue as pieces written apart
# (transmission_pieces.py)
STAGE_BYTES = 4 * 2**20
# whether message_fragments holds any row: after many of its pieces are deleted, the file
# is checkpointed once it holds none (Store.pieces_deleted; message_parts.py)
COUNT_FRAGMENTS = "wire/count_message_fragments.sql"


# -- the unit of work ---------------------------------------------------------------------


class _Commits(Protocol):
    """What a unit of work's commit asks of group_commit.py's GroupCommit."""

    def commit(self, leader: UnitOfWork) -> None: ...

    def wait_carried(self, uow: UnitOfWork) -> bool: ...


class _Engine(Protocol):
    """What a unit of work needs of the messaging engine (engine.py's Messaging, which
    imports this module): public names."""

    store: Store
    endpoints: EndpointCache
    read_ahead: dict[tuple[int, str], ReceiveBuffer]
    queue_watcher: object | None  # activation's queue monitors, while they run
    transmission_pieces: bool  # the transmission queue keeps a body as pieces
    group_locks: GroupLocking  # C7
    # guards read_ahead and in_flight against transactions running side by side
    read_ahead_lock: threading.RLock
    # queuing orders received by open transactions: a read of the queue leaves them out
    in_flight: set[int]
    arrival: threading.Condition  # a waiting RECEIVE looks again when notified

    # the unit of work that holds WRITER now (what it touched may be uncommitted)
    writer: UnitOfWork | None
    commits: _Commits  # group_commit.py: a commit carries those waiting for it

    def after_commit(self, uow: UnitOfWork) -> None: ...

    def apply_sends(self, uow: UnitOfWork) -> None: ...

    def after_rollback(self, uow: UnitOfWork) -> None: ...

    def stage_pieces(self, uow: UnitOfWork, handle: str, sequence: int,
                     body: bytes | memoryview) -> int: ...

    def unstage_pieces(self, uow: UnitOfWork) -> None: ...


class UnitOfWork:
    """ConversationEndpoint changes and buffered rows of one transaction, written at commit."""

    def __init__(self, messaging: _Engine) -> None:
        self.m = messaging
        self.new: dict[str, ConversationEndpoint] = {}
        self.dirty: dict[str, ConversationEndpoint] = {}
        self.touched: set[str] = set()
        self.queue_rows: list[tuple[Any, ...]] = []
        self.tx_rows: list[tuple[Any, ...]] = []
        self.inbound_rows: list[tuple[Any, ...]] = []  # P8: arrivals for a queue that is OFF
        self.outbound: list[Any] = []  # to the wire after commit (remote.py)
        self.arrivals = False  # applied arrivals from the wire (remote.py keeps their maps)
        self.received: set[tuple[int, str]] = set()
        # what this transaction sent, delivered and received, for the instance's counters
        # when it commits (counters.py)
        self.counts: Counter[tuple[str, int, str]] = Counter()
        self.first_send: float | None = None  # time.monotonic() of its first SEND
        # RECEIVE: the queuing orders handed out from read-ahead (Messaging.read_ahead),
        # removed (or retained) at the next flush (C3).
        self.taken: list[int] = []
        self.taken_retained: list[int] = []
        # message_parts.py: the (handle, sequence) of taken messages kept as fragments, and
        # the number of fragments of each queue row to write that is kept so
        self.taken_fragments: list[tuple[str, int]] = []
        self.body_fragments: dict[int, int] = {}
        # transmission_pieces.py: the (handle, sequence) of messages whose pieces this unit
        # of work wrote apart from its transaction (a rollback deletes them)
        self.staged_pieces: list[tuple[str, int]] = []
        # tracing.py: (handle, sequence, traceparent) of traced SENDs, None while there are
        # none (an instance that does not trace never makes the list)
        self.traced: list[tuple[str, int, str]] | None = None
        self.locked = False
        self.enqueued = False
        self.ready_queues: set[tuple[int, str]] = set()  # got ready messages (activation)
        self.wake = False
        self.retry_after_commit = False
        self.catalog_written = False  # a catalog write joined this transaction
        self.route_replies = False  # something arrived for a route request (R8.2)
        # C7: this transaction's number in the lock table, and what it received there:
        # queuing orders that no read of a queue gives to another transaction until it ends
        self.transaction_id = messaging.group_locks.begin()
        self.holding: list[int] = []
        # ready messages delivered into queues, told to the read-ahead (ReceiveBuffer.
        # delivered) when this commits: before that no other transaction may see them
        self.deliveries: list[tuple[tuple[int, str], tuple[Any, ...] | None]] = []
        self.queues_written = False  # changed queue_messages other than by RECEIVE
        self.read_ahead_stale: set[tuple[int, str]] = set()  # dropped when this commits
        self.read_ahead_forgotten = False  # ... every queue's (forget_read_ahead)
        self.committing = False
        self.groups: set[tuple[int, str]] = set()  # the groups this holds (lock_group)
        # SENDs kept until this unit of work holds the store (engine.py: Messaging.send):
        # (endpoint, body, message type, sequence number, state before and after, the
        # validation checked), and by conversation handle the next sequence number and
        # state they leave
        self.sends: list[tuple[Any, bytes, str, int, str, str, str]] = []
        self.next_sequences: dict[str, tuple[int, str]] = {}
        # END CONVERSATION and BEGIN CONVERSATION TIMER kept alike (Messaging.keep_verb):
        # each the writer's own call of the verb, made after the SENDs kept
        self.verbs: list[Callable[[], None]] = []
        # BEGIN DIALOG kept (Messaging.begin_dialog): the new endpoints, by handle, with
        # the catalog version they were checked against, known to this transaction alone
        # until it holds the store (then they join the engine's endpoints, before the SENDs)
        self.begun: dict[str, tuple[ConversationEndpoint, int]] = {}
        # what ends this transaction at commit: applying its SENDs failed half-way
        self.doomed: BrokerError | None = None
        # another transaction's commit writes this one's with its own (group_commit.py):
        # set when it carried this one, and how it ended (None: committed)
        self.carried = False
        self.carried_end: threading.Event | None = None
        self.carried_outcome: object = None  # an exception, GIVEN_BACK, or None
        self._tx: Any = None

    def activate(self) -> None:
        """From here to the end this unit of work holds the store (WRITER, then the store's
        lock): it writes into the one DuckDB connection's transaction."""
        if not self.locked:
            self.m.group_locks.acquire(self.transaction_id, WRITER, committing=self.committing)
            self._hold_store()

    def _hold_store(self) -> None:
        """WRITER is this unit of work's: the store's lock too, and what it kept applied."""
        self.m.store.lock.acquire()
        self.apply_carried()

    def lead_or_be_carried(self) -> bool:
        """At commit: wait for WRITER as activate() does, unless the transaction that holds
        it meanwhile carries this one (group_commit.py): then False, and nothing held."""
        if self.locked:
            return True
        self.committing = True
        if not self.m.group_locks.acquire(self.transaction_id, WRITER, committing=True,
                                          carriable=self):
            return False  # ``carried`` was set by the carrier (group_commit.py)
        self._hold_store()
        return True

    def apply_carried(self) -> None:
        """From now on this one writes as the writer, what it kept applied first: once it
        holds the store, or when its carrier (another transaction's commit, on its thread,
        holding the store) applies it."""
        self.locked = True
        self.m.writer = self
        if self.kept:
            self._apply_sends()

    @property
    def writes_at_commit(self) -> bool:
        """Whether this unit of work's commit writes anything into the file."""
        return bool(self.kept or self.has_rows or self.taken_fragments
                    or self._tx is not None)

    def footprint(self) -> set[str]:
        """The endpoints the verbs it kept act on, and their far sides (what applying them
        may change in place), by handle."""
        handles = set(self.next_sequences)
        handles.update(self.begun)
        endpoints = self.m.endpoints
        for handle in list(handles):
            ep = endpoints.get(handle)
            if ep is not None and ep.far_handle is not None:
                handles.add(ep.far_handle)
        return handles

    @property
    def kept(self) -> bool:
        """Whether this unit of work keeps verbs to apply when it holds the store."""
        return bool(self.sends or self.verbs or self.begun)

    def _apply_sends(self) -> None:
        """The dialogs kept are begun now, then the SENDs kept are sent, then the other
        verbs kept are made (the store is this unit of work's). A failure dooms
        the transaction: some may have been applied, so its commit rolls it all back."""
        try:
            self.m.apply_sends(self)
        except BrokerError as exc:
            self.doomed = exc
            raise

    def try_activate(self) -> bool:
        """activate(), unless another transaction holds the store now: then False, and
        nothing is held (a read that writes the broker events on its way never waits)."""
        if self.locked:
            return True
        if not self.m.group_locks.try_acquire(self.transaction_id, WRITER):
            return False
        if not self.m.store.lock.acquire(True, 0.05):
            self.m.group_locks.release(self.transaction_id, WRITER)  # its groups stay held
            return False
        self.locked = True
        self.m.writer = self
        if self.kept:
            self._apply_sends()
        return True

    def lock_group(self, database_id: int, group: str, deadline: float | None = None) -> None:
        """C7: this transaction holds the conversation group until it ends (waiting for
        another that holds it, until ``deadline``: time.monotonic(), None: the default)."""
        key = (database_id, group)
        if key in self.groups:
            return  # held already: it stays this transaction's until it ends
        self.m.group_locks.acquire(self.transaction_id, key, deadline,
                                   committing=self.committing)
        self.groups.add(key)

    def hold(self, orders: Iterable[int]) -> None:
        """Received messages: no other transaction is given them until this one ends (the
        caller holds the read-ahead lock)."""
        orders = list(orders)
        self.holding.extend(orders)
        self.m.in_flight.update(orders)

    @property
    def has_changes(self) -> bool:
        """Whether this unit of work has changed anything but what it received."""
        return bool(self.locked or self.kept or self.new or self.dirty
                    or self.queue_rows or self.tx_rows or self.inbound_rows or self.outbound
                    or self.queues_written)

    def ensure_tx(self) -> None:
        self.activate()
        if self._tx is None:
            self._tx = self.m.store.transaction()
            self._tx.__enter__()

    def touch(self, ep: ConversationEndpoint) -> None:
        self.touched.add(ep.conversation_handle)
        if ep.persisted:
            self.dirty[ep.conversation_handle] = ep
        else:
            self.new[ep.conversation_handle] = ep

    def enqueue(self, row: tuple[Any, ...], body_fragments: int | None = None) -> None:
        """A message into a queue (a row of insert_queue_messages.sql), written at flush;
        ``body_fragments``: its body is kept as that many fragments (message_parts.py)."""
        self.queue_rows.append(row)
        self.queues_written = True  # a RECEIVE of this transaction reads the table now
        if row[3] != 3:  # a copy of what was sent, kept by RETENTION, is no delivery (C3)
            self.counts["delivered", row[0], row[1]] += 1
        if row[1] == ROUTE_REQUEST_QUEUE:
            self.route_replies = True  # a route request dialog ended (R8.2): settle it
        if body_fragments is not None:
            self.body_fragments[row[2]] = body_fragments
            self.read_ahead_stale.add((row[0], row[1]))  # RECEIVE reads it from the table
            return
        self.deliveries.append(((row[0], row[1]), row))

    def settle_read_ahead(self) -> None:
        """This unit of work committed (the caller holds the read-ahead lock): what it
        received is gone for good, and what it delivered joins what was read ahead."""
        m = self.m
        m.in_flight.difference_update(self.holding)
        buffers = m.read_ahead
        if self.read_ahead_forgotten:  # forget_read_ahead: the table says
            buffers.clear()
            return
        for key in self.read_ahead_stale:
            buffers.pop(key, None)
        if not buffers:
            return
        taken = set(self.holding)
        for key, row in self.deliveries:
            buffer = buffers.get(key)
            if buffer is None or row is None or row[2] in taken:
                continue
            # a ready message joins what was read (rows of select_ready_messages.sql with
            # its body), so the RECEIVE that waits for it runs no query
            body = row[12]
            buffer.delivered(row[5], row[2], (
                row[2], row[6], row[5], row[7], row[10],
                body if body is None or type(body) is bytes else bytes(body),
                row[8], row[9],
            ) if row[3] == 1 else None)

    def received_from(self, key: tuple[int, str], messages: int) -> None:
        """A RECEIVE of this transaction took ``messages`` from the queue ``key``."""
        self.received.add(key)
        self.counts["received", key[0], key[1]] += messages

    def forget_read_ahead(self) -> None:
        """Messages left queues other than by RECEIVE: read them again when needed (now,
        and again when this commits: what others read meanwhile still held them)."""
        with self.m.read_ahead_lock:
            self.m.read_ahead.clear()
        self.queues_written = True
        self.read_ahead_forgotten = True

    @property
    def has_rows(self) -> bool:
        """Whether it holds rows not yet written (flush)."""
        return bool(self.new or self.dirty or self.queue_rows or self.tx_rows or self.taken
                    or self.taken_retained or self.inbound_rows)

    def flush(self) -> None:
        if self.has_rows:
            self.ensure_tx()
            write_rows(self.m.store, [self])

    @property
    def holds_transaction(self) -> bool:
        """Whether it has the store's DuckDB transaction open (it wrote into it)."""
        return self._tx is not None

    def end_transaction(self, exc: BaseException | None = None) -> None:
        """COMMIT the store's transaction it opened (``exc``: ROLLBACK, because of it);
        nothing when it opened none."""
        if self._tx is not None:
            tx, self._tx = self._tx, None
            if exc is None:
                tx.__exit__(None, None, None)
            else:
                with contextlib.suppress(BaseException):
                    tx.__exit__(type(exc), exc, exc.__traceback__)

    def written(self) -> None:
        """What write_rows wrote of it is no longer held."""
        if self.queue_rows:
            self.enqueued = True
            if self.m.queue_watcher is not None:  # only activation asks which queues
                self.ready_queues.update((r[0], r[1]) for r in self.queue_rows if r[3] == 1)
        self.taken_fragments.clear()
        self.taken.clear()
        self.taken_retained.clear()
        if self.traced:
            self.traced.clear()
        self.inbound_rows.clear()
        self.new.clear()
        self.dirty.clear()
        self.queue_rows.clear()
        self.tx_rows.clear()
        self.body_fragments.clear()

    def staged(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Rows of the transmission queue with a large body: the body written as pieces
        apart (transmission_pieces.py) and the row with none, written here; the rest."""
        if not any(len(r[14] or b"") >= STAGE_BYTES for r in rows):
            return rows
        self.m.transmission_pieces = True
        rest = []
        for row in rows:
            body = row[14] or b""
            if len(body) < STAGE_BYTES:
                rest.append(row)
                continue
            pieces = self.m.stage_pieces(self, row[1], row[2], body)
            self.m.store.run("conversation/insert_transmission_queue_row.sql", {
                **dict(zip(_TX_COLUMNS, row, strict=True)), "message_body": None,
                "is_inbound": False, "body_pieces": pieces})
        return rest

    def sql(self, template: str, params: dict[str, Any], **variables: Any
            ) -> list[tuple[Any, ...]]:
        """Run a statement inside this unit of work's transaction (buffered rows first);
        ``variables`` as Store.run's."""
        self.flush()
        self.ensure_tx()
        return self.m.store.run(template, params, **variables)

    def delete_pieces(self, template: str, params: dict[str, Any],
                      count_template: str = COUNT_FRAGMENTS) -> None:
        """Run a DELETE of pieces (P4.4) in this unit of work's transaction, and note how
        many went for the table ``count_template`` counts (Store.pieces_deleted)."""
        self.m.store.pieces_deleted(count_template, self.sql(template, params))

    def apply_kept(self) -> None:
        """Apply the SENDs kept, as the commit's first step, while this is still its
        thread's unit of work: applying one may act in it again (a SEND to a service with no
        route begins a route request's dialog, R8), which must join this transaction, not
        wait for its WRITER as another. A commit that holds WRITER meanwhile may carry this
        one instead (group_commit.py): it then applies them, as this unit of work."""
        if self.kept:
            self.lead_or_be_carried()

    def commit(self) -> None:
        """Write what this transaction holds and COMMIT, with the commits it carries
        (group_commit.py), or wait while the commit that carries this one does."""
        self.committing = True
        while True:
            if (not self.carried and not self.locked and self.doomed is None
                    and self.writes_at_commit):
                self.lead_or_be_carried()
            if not self.carried:
                break
            if self.m.commits.wait_carried(self):  # raises what rolled it back
                self.m.after_commit(self)
                return
        self.m.commits.commit(self)
        self.m.after_commit(self)

    def rollback(self, exc: BaseException) -> None:
        try:
            self.undo(exc)
        finally:
            self.release()
        self.m.after_rollback(self)

    def undo(self, exc: BaseException) -> None:
        """What this transaction did is undone (``exc`` ended it); its locks stay held."""
        self.sends.clear()  # kept, never applied: nothing of them to undo
        self.verbs.clear()
        self.begun.clear()
        try:
            self.end_transaction(exc)
            # pieces written apart go too, before the lock is let go (else the file's
            # next open removes them: no row names them)
            with contextlib.suppress(BrokerError):
                self.m.unstage_pieces(self)
        finally:
            for handle in self.touched:
                self.m.endpoints.pop(handle, None)
            with self.m.read_ahead_lock:  # what this transaction received is back, in order
                self.m.read_ahead.clear()
                self.m.in_flight.difference_update(self.holding)

    def release(self) -> None:
        """This transaction ended: the store (unless its carrier holds it) and its groups
        are let go."""
        if self.locked:
            self.locked = False
            if self.m.writer is self:
                self.m.writer = None
            if not self.carried:
                self.m.store.lock.release()
        if self.m.group_locks.release_all(self.transaction_id):
            with self.m.arrival:  # a RECEIVE that skipped or waited for a group looks again
                self.m.arrival.notify_all()

def write_rows(store: Store, units: list[UnitOfWork]) -> None:
    """The rows ``units`` hold, written into the store's open transaction as one set-based
    statement per table for all of them together (a commit that carries others writes
    theirs with its own, group_commit.py), each column bound as one string (columns.py);
    then no unit holds them (UnitOfWork.written)."""
    run = store.run
    new: dict[str, ConversationEndpoint] = {}
    dirty: dict[str, ConversationEndpoint] = {}
    queue_rows: list[tuple[Any, ...]] = []
    parts: dict[int, int] = {}
    taken_fragments: list[tuple[str, int]] = []
    taken: list[int] = []
    taken_retained: list[int] = []
    tx_rows: list[tuple[Any, ...]] = []
    inbound_rows: list[tuple[Any, ...]] = []
    traced: list[tuple[str, int, str]] = []
    for unit in units:
        new.update(unit.new)
        dirty.update(unit.dirty)
        queue_rows += unit.queue_rows
        parts.update(unit.body_fragments)
        taken_fragments += unit.taken_fragments
        taken += unit.taken
        taken_retained += unit.taken_retained
        tx_rows += unit.staged(unit.tx_rows)
        inbound_rows += unit.inbound_rows
        traced += unit.traced or ()
    for handle in new:
        dirty.pop(handle, None)
    if new:
        run("conversation/insert_conversation_endpoints.sql", _endpoint_columns(
            list(new.values())))
        for ep in new.values():
            ep.persisted = True
            ep.saved = wide_columns(ep)
    if dirty:
        # Most endpoints of a SEND change only their sequence numbers: a narrow UPDATE.
        narrow, wide = [], []
        for ep in dirty.values():
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
    rows = queue_rows
    if parts:  # each kept as fragments on its own (message_parts.py), the rest together
        rows = [r for r in queue_rows if r[2] not in parts]
        for row in queue_rows:
            if row[2] in parts:
                run("conversation/insert_queue_message.sql", {
                    **dict(zip(_QUEUE_COLUMNS, row, strict=True)),
                    "body_fragments": parts[row[2]]})
    if len(rows) == 1 or any(len(r[12] or b"") > LARGE_BODY for r in rows):
        for row in rows:
            run("conversation/insert_queue_message.sql", {
                **dict(zip(_QUEUE_COLUMNS, row, strict=True)), "body_fragments": None})
    elif rows:
        run("conversation/insert_queue_messages.sql", _queue_columns(rows))
    # C3: received messages leave with this transaction; after the inserts, since a
    # message sent and received in one transaction is taken from the read-ahead
    # (ReceiveBuffer.delivered) before it was written
    if taken_fragments:  # message_parts.py
        store.pieces_deleted(COUNT_FRAGMENTS, run(
            "conversation/delete_received_fragments.sql", {
                "conversation_handle": columns.guids(h for h, _ in taken_fragments),
                "message_sequence_number": columns.ints(s for _, s in taken_fragments)}))
    if taken:
        run("conversation/delete_received_messages.sql",
            {"queuing_order": columns.ints(taken)})
    if taken_retained:
        run("conversation/retain_received_by_order.sql",
            {"queuing_order": columns.ints(taken_retained)})
    for rows, inbound in ((tx_rows, False), (inbound_rows, True)):
        if len(rows) == 1 or any(len(r[14] or b"") > LARGE_BODY for r in rows):
            for row in rows:
                run("conversation/insert_transmission_queue_row.sql",
                    {**dict(zip(_TX_COLUMNS, row, strict=True)), "is_inbound": inbound,
                     "body_pieces": None})
        elif rows:
            run("conversation/insert_transmission_queue.sql",
                {**_tx_columns(rows), "is_inbound": inbound})
    if traced:  # their trace contexts, kept for a sending after a restart
        run("tracing/update_trace_contexts.sql", {"rows": ";".join(
            f"{h},{seq},{tp}" for h, seq, tp in traced)})
    for unit in units:
        unit.written()


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


def _encode_endpoints(eps: list[ConversationEndpoint], names: Iterable[str]) -> dict[str, str]:
    return {name: _ENDPOINT_ENCODING[name](getattr(e, name) for e in eps) for name in names}


def _endpoint_columns(eps: list[ConversationEndpoint]) -> dict[str, str]:
    return _encode_endpoints(eps, _ENDPOINT_ENCODING)


def _endpoint_changes(eps: list[ConversationEndpoint]) -> dict[str, str]:
    return _encode_endpoints(eps, _ENDPOINT_CHANGES)


_QUEUE_COLUMNS = (
    "database_id", "queue_name", "queuing_order", "status", "priority",
    "conversation_group_id", "conversation_handle", "message_sequence_number", "service_name",
    "service_contract_name", "message_type_name", "validation", "message_body",
    "message_enqueue_time")


def _queue_columns(rows: list[tuple[Any, ...]]) -> dict[str, str]:
    """``rows`` (in _QUEUE_COLUMNS' order) packed for insert_queue_messages.sql."""
    c = list(zip(*rows, strict=True))
    ints, texts = columns.int_fields, columns.text_fields
    return {"rows": columns.packed(
        ints(c[0]), texts(c[1]), ints(c[2]), ints(c[3]), ints(c[4]),
        columns.guid_fields(c[5]), columns.guid_fields(c[6]), ints(c[7]), texts(c[8]),
        texts(c[9]), texts(c[10]), c[11], columns.blob_fields(c[12]),
        columns.time_fields(c[13]))}


_TX_COLUMNS = (
    "database_id", "conversation_handle", "message_sequence_number", "message_size",
    "to_service_name", "to_broker_instance", "from_service_name", "service_contract_name",
    "message_type_name", "validation", "is_end_of_dialog", "is_conversation_error",
    "priority", "enqueue_time", "message_body", "transmission_status")


def _tx_columns(rows: list[tuple[Any, ...]]) -> dict[str, str]:
    """``rows`` (in _TX_COLUMNS' order) packed for insert_transmission_queue.sql."""
    c = list(zip(*rows, strict=True))
    ints, texts, flags = columns.int_fields, columns.text_fields, columns.flag_fields
    return {"rows": columns.packed(
        ints(c[0]), columns.guid_fields(c[1]), ints(c[2]), ints(c[3]), texts(c[4]),
        columns.guid_fields(c[5]), texts(c[6]), texts(c[7]), texts(c[8]), c[9],
        flags(c[10]), flags(c[11]), ints(c[12]), columns.time_fields(c[13]),
        columns.blob_fields(c[14]), texts(c[15]))}
