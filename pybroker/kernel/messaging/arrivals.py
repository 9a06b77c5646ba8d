"""The messaging engine's side of the wire, inbound (P3-P5, P8, R5-R7): what it keeps of
the wire (the endpoints that talk to the network, held fragments and messages, broker
events), and how a batch of arrivals is written to DuckDB. RemoteDelivery (remote.py, the
outbound side) composes it.

``arrive`` applies a batch of fragments in ONE unit of work (group commit): each is routed
with msdb's table (R1.2) or, for a reply to a conversation begun here, delivered to the
database that holds the broker identifier (R6); a duplicate is acknowledged again and not
queued (P3.2, P5.4); a fragment of a larger message is kept in message_fragments until the
message is whole (P4.4); a whole message ahead of a missing one waits in the queue with
status 2; an arrival for a queue that is OFF waits in the receiving database's transmission
queue (P8); an arrival for a database whose broker is disabled (DISABLE_BROKER) is refused
with a notice that is not fatal, so it stays in the sender's transmission queue with the
notice's text as its transmission_status and is sent again until ENABLE_BROKER. Only after
the commit are the acknowledgements handed back to the wire (P5.2).
A target that cannot take a message says why with a notice (never a silent drop) and
records a broker event.

Forwarding (R7): an arrival whose msdb decision is a network address (possible only with
forwarding on, R3.6) is handed back to the wire with that next hop, after the batch's
commit, and is neither written nor acknowledged here: only its final destination
acknowledges (R7.3).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from pybroker.core.conversation import columns
from pybroker.core.conversation.endpoint import ConversationEndpoint
from pybroker.core.conversation.handles import new_handle
from pybroker.core.conversation.model import STATUS_QUEUE_DISABLED, Router
from pybroker.core.conversation.priorities import endpoint_priority
from pybroker.core.conversation.states import TRANSITIONS, transition
from pybroker.core.conversation.system_messages import (
    CONTRACT_NOT_SUPPORTED,
    ENDPOINT_CLOSED_TEXT,
    REMOTE_ENDPOINT_CLOSED,
    parse_error,
)
from pybroker.core.wire import dialog
from pybroker.core.wire.frame_types import AckEntry
from pybroker.core.wire.frames import MessageFragment, Notice
from pybroker.core.wire.mirrored_route import NOT_PRINCIPAL_CODE
from pybroker.kernel.messaging import message_parts
from pybroker.kernel.messaging.arrival_destinations import (
    STATUS_FORWARDING_OFF,
    STATUS_NOT_PRINCIPAL,
    STATUS_ROUTE_REQUESTED,
    STATUS_TARGET_BROKER_DISABLED,
    AskRoute,
    Forward,
    Picked,
    destination_of,
)

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.messaging.catalog import DatabaseCatalog
    from pybroker.kernel.messaging.catalog_cache import CatalogCache
    from pybroker.kernel.messaging.endpoint_cache import EndpointCache
    from pybroker.kernel.messaging.route_requests import RouteRequests
    from pybroker.kernel.messaging.unit_of_work import UnitOfWork
    from pybroker.kernel.tracing import MessageTracing
    from pybroker.storage.store import Store

ALL_FRAGMENTS = 0xFFFFFFFF  # an acknowledged range's end: every fragment of the message
MAX_EVENTS = 10_000  # broker_events keeps the newest rows only
# after this many bytes of fragments stored, DuckDB gives back what it freed (Store's
# release_memory): the checkpoints of a large message's fragments otherwise stay resident
RELEASE_BYTES = 16 * 2**20
INDEX_SIZE = 65_536  # conversations whose endpoint handle is remembered for arrivals

ALREADY_ACKNOWLEDGED = -8495
_ALREADY_ACKNOWLEDGED_TEXT = (
    "The conversation has already been acknowledged by another instance.")
# R9: a principal's refusal of a later message (sequence > 0) of a conversation it has no
# endpoint for: the conversation began at the pair's former principal, and nothing is
# replicated. Not fatal on the wire: the sender decides (remote.py), ending the conversation
# only if its far side existed elsewhere, so that a first message merely overtaken by the
# second (reordered) still begins the conversation here. SQL Server has no such refusal (its
# mirror holds every endpoint): the code is pybroker's own, in SQL Server's user-defined
# range so that it is never taken for one of SQL Server's errors.
UNKNOWN_AT_PRINCIPAL = 50954
STATUS_UNKNOWN_AT_PRINCIPAL = (
    "The conversation is not known to the principal of the mirrored pair{}: it began at the "
    "pair's former principal, before a failover, and pybroker replicates nothing between "
    "partners, so it cannot continue; begin a new conversation.")


class _Delivery(Protocol):
    """What arrivals need of the engine's delivery (delivery.py's Delivery)."""

    def drop_transmissions(self, uow: UnitOfWork, ep: ConversationEndpoint) -> None: ...


class _Engine(Protocol):
    """What arrivals need of the messaging engine (engine.py's Messaging, which imports
    this module): public names."""

    store: Store
    endpoints: EndpointCache
    catalogs: CatalogCache
    route: Router
    route_requests: RouteRequests  # R2.4, R8
    delivery: _Delivery
    tracing: MessageTracing | None  # pybroker/kernel/tracing.py

    def unit_of_work(self) -> AbstractContextManager[UnitOfWork]: ...

    def endpoint(self, handle: str, database_id: int | None = None) -> ConversationEndpoint: ...

    def catalog(self, database_id: int) -> DatabaseCatalog: ...

    def catalog_named(self, name: str) -> DatabaseCatalog: ...

    def now(self) -> datetime: ...

    def next_order(self) -> int: ...

    def note_deadline(self, uow: UnitOfWork, when: datetime | None) -> None: ...


class Wire(Protocol):
    """What the engine needs of the transport (pybroker/core/wire/transport.py)."""

    instance_id: str
    key_id: bytes

    def submit(self, items: list[tuple[str, str, MessageFragment]]) -> None: ...

    def forget(self, conversation_id: str, from_initiator: bool) -> None: ...

    def reply(self, connection: int, acks: list[AckEntry], notices: list[Notice],
              answered: int = 0) -> None: ...

    def forward(self, items: list[tuple[int, str, MessageFragment, str]]) -> None: ...

    def is_own_address(self, address: str) -> bool: ...

    @property
    def address(self) -> str: ...


@dataclass(slots=True)
class Arrival:
    connection: int  # where the acknowledgement goes back
    peer: str  # for events
    fragment: MessageFragment
    received_at: float | None = None  # time.monotonic() when it was read off the network


@dataclass(slots=True)
class _Replies:
    acks: dict[tuple[int, str, bool], tuple[ConversationEndpoint, str]] = field(
        default_factory=dict)
    notices: list[tuple[int, Notice]] = field(default_factory=list)
    forwards: list[tuple[int, str, MessageFragment, str]] = field(default_factory=list)


class Arrivals:
    """The engine's inbound side of the wire: arrivals applied to DuckDB, and what both
    sides keep of the wire (RemoteDelivery, remote.py, composes it)."""

    def __init__(self, messaging: _Engine) -> None:
        self._m = messaging
        self.wire: Wire | None = None
        # told of every broker event as it is recorded (an operator's log: pybroker serve)
        self.event_listener: Callable[[str, str, str | None, str], None] | None = None
        # (conversation_id, is_initiator) -> handle of an endpoint that talks to the network
        self._index: dict[tuple[str, bool], str] = {}
        # endpoint -> sequence -> fragment number -> its size, held in message_fragments
        self.fragments: dict[str, dict[int, dict[int, int]]] = {}
        # endpoint -> sequence -> (message type, end, error) of whole messages held (status 2)
        self._held: dict[str, dict[int, tuple[str, bool, bool]]] = {}
        self.inbound_waiting = False
        # message_fragments may hold rows (END CONVERSATION then deletes an endpoint's)
        self.fragments_kept = False
        # bytes of fragments stored since DuckDB last gave back what it freed (RELEASE_BYTES)
        self.fragment_bytes = 0
        # during a batch of arrivals: what _prefetch found of the sides it names
        self._prefetched: dict[tuple[str, bool], list[tuple[str, int]]] | None = None
        self._event_id = 0
        self._lock = threading.Lock()
        self._events: list[tuple[Any, ...]] = []
        # R9: database id -> role, of the databases in a mirrored pair
        self._mirroring_roles: dict[int, str] | None = None
        # during a batch of arrivals: the conversations whose first message (sequence 0)
        # from the initiator is in it
        self._batch_starts: set[str] = set()
        # during a batch of arrivals: the time its messages arrive (message_enqueue_time)
        self._batch_now: datetime | None = None

    @property
    def mirroring_roles(self) -> dict[int, str]:
        """The role (PRINCIPAL or MIRROR) of each database in a mirrored pair (R9), read
        again after every catalog write (``mirroring_changed``)."""
        found = self._mirroring_roles
        if found is None:
            found = self._mirroring_roles = {
                row[0]: row[1] for row in self._m.store.run(
                    "instance/select_mirroring_roles.sql")}
        return found

    @mirroring_roles.setter
    def mirroring_roles(self, roles: dict[int, str] | None) -> None:
        self._mirroring_roles = roles

    def mirroring_changed(self) -> None:
        self._mirroring_roles = None

    # -- start ---------------------------------------------------------------------------

    def load(self) -> None:
        """At open: what the file holds of reassembly and held messages, and the last
        broker event's id."""
        store = self._m.store
        self.reload()
        with store.lock:
            self._event_id = int(store.run("wire/select_max_event_id.sql")[0][0])

    def reload(self) -> None:
        """Read the held fragments and messages again (at open, after a rollback)."""
        store = self._m.store
        self.fragments.clear()
        self._held.clear()
        with store.lock:
            for handle, seq, frag, size in store.run("wire/select_held_fragments.sql"):
                self.fragments.setdefault(handle, {}).setdefault(seq, {})[frag] = size
            self.fragments_kept = bool(store.run("wire/count_message_fragments.sql")[0][0])
            for handle, seq, mtype, is_end, is_error in store.run(
                    "wire/select_held_messages.sql"):
                self._held.setdefault(handle, {})[seq] = (mtype, is_end, is_error)
            self.inbound_waiting = bool(store.run("wire/count_inbound.sql")[0][0])

    # -- shared --------------------------------------------------------------------------

    def forget_index(self) -> None:
        """Forget which endpoint holds each side of a conversation (as after a restart:
        the next arrival finds it in the file)."""
        self._index.clear()

    def remember(self, conversation_id: str, is_initiator: bool, handle: str) -> None:
        """A cache, not the truth (P7: memory must not grow with idle conversations)."""
        if len(self._index) >= INDEX_SIZE:
            # forget everything but endpoints begun in a unit of work not yet written: no
            # query can find those, and a second endpoint must not be made for them
            endpoints = self._m.endpoints
            self._index = {key: h for key, h in self._index.items()
                           if (ep := endpoints.get(h)) is not None and not ep.persisted}
        self._index[(conversation_id, is_initiator)] = handle

    def drop_fragments(self, handle: str) -> None:
        """The endpoint ended: the fragments it held are deleted (end_conversation.py)."""
        self.fragments.pop(handle, None)

    def forget(self, ep: ConversationEndpoint) -> None:
        """``ep`` sends nothing more (an error, cleanup): stop its retransmissions."""
        if self.wire is not None:
            self.wire.forget(ep.conversation_id, bool(ep.is_initiator))

    # -- inbound -------------------------------------------------------------------------

    def arrive(self, arrivals: list[Arrival]) -> None:
        """Apply a batch of arrivals in one transaction; acknowledge after the commit.
        If the batch fails, each arrival is tried on its own, so one bad arrival cannot
        hold back the others (it is recorded and left unacknowledged)."""
        try:
            self._arrive_batch(arrivals)
        except Exception as exc:
            if len(arrivals) == 1:
                f = arrivals[0].fragment
                self.event("Broker:Message Undeliverable", "not applied", arrivals[0].peer,
                           f.conversation_id, f.sequence, f"the message was not taken: {exc}")
                if self.wire is not None:  # answered: nothing (the sender resends)
                    self.wire.reply(arrivals[0].connection, [], [], 1)
                return
            for arrival in arrivals:
                self.arrive([arrival])

    def _arrive_batch(self, arrivals: list[Arrival]) -> None:
        replies = _Replies()
        m = self._m
        # Where each arrival goes is decided first, on the routing engine's memory (R1.2):
        # what is forwarded never enters a unit of work, so a batch that only passes
        # through (a forwarder's) takes no lock of the store and touches no DuckDB (R7.3)
        # A conversation side's messages in one batch go to one database: routed once (its
        # first message's decision; R4.2's arbitrary pick is not drawn again per message)
        here: list[tuple[Arrival, int | str | AskRoute | Picked]] = []
        routed: dict[tuple[str, bool, str, str | None], int | Picked] = {}
        for arrival in arrivals:
            f = arrival.fragment
            side = (f.conversation_id, f.from_initiator, f.to_service, f.to_broker_instance)
            destination = routed.get(side)
            if destination is None:
                destination = destination_of(m.catalogs, m.route, self.wire,
                                             self.mirroring_roles, f)
                if type(destination) is int or type(destination) is Picked:
                    routed[side] = destination
            if isinstance(destination, Forward):
                replies.forwards.append((arrival.connection, arrival.peer, arrival.fragment,
                                         destination.address))
            else:
                here.append((arrival, destination))
        if m.tracing is not None:  # the trace contexts the messages carry (tracing.py)
            replies.forwards = m.tracing.arrived([a.fragment for a, _ in here], replies.forwards)
        if here:
            with m.unit_of_work() as uow:
                uow.activate()
                uow.arrivals = True
                self._prefetched = self._prefetch(uow, [a for a, _ in here])
                self._batch_now = m.now()  # the batch's arrival time: one commit
                self._batch_starts = {
                    f.conversation_id for f in (a.fragment for a, _ in here)
                    if f.from_initiator and f.sequence == 0}
                try:
                    for arrival, destination in here:
                        self._arrive(uow, arrival, destination, replies)
                finally:
                    self._prefetched = None
                    self._batch_starts = set()
                    self._batch_now = None
            committed = time.monotonic()  # the arrival -> commit histogram (/metrics)
            m.counters.observe_arrival_commit([committed - a.received_at for a, _ in here
                                               if a.received_at is not None])
            if self.fragment_bytes >= RELEASE_BYTES:
                self.fragment_bytes = 0
                m.store.release_memory()
        wire = self.wire
        if wire is None:
            return
        if replies.forwards:
            wire.forward(replies.forwards)
        by_connection: dict[int, tuple[list[AckEntry], list[Notice]]] = {}
        answered: dict[int, int] = {}
        for arrival in arrivals:
            answered[arrival.connection] = answered.get(arrival.connection, 0) + 1
            by_connection.setdefault(arrival.connection, ([], []))
        for (connection, _, _), (ep, broker) in replies.acks.items():
            by_connection[connection][0].append(self._ack_of(ep, broker))
        for connection, notice in replies.notices:
            by_connection[connection][1].append(notice)
        for connection, (acks, notices) in by_connection.items():
            wire.reply(connection, acks, notices, answered[connection])

    def _ack_of(self, ep: ConversationEndpoint, broker: str) -> AckEntry:
        handle = ep.conversation_handle
        held = [(seq, f) for seq, frags in self.fragments.get(handle, {}).items()
                for f in frags]
        entry = dialog.ack_entry(ep.conversation_id, not ep.is_initiator, broker,
                                 self.wire.key_id if self.wire else bytes(8),
                                 ep.receive_sequence, held)
        whole = self._held.get(handle)
        if whole:  # a whole message held (status 2) is acknowledged in every fragment
            ranges = [r for r in entry.ranges if r[0] not in whole]
            ranges += [(seq, 0, ALL_FRAGMENTS) for seq in sorted(whole)]
            entry = AckEntry(entry.conversation_id, entry.acks_initiator,
                             entry.broker_instance, entry.key_id, entry.through_sequence,
                             tuple(sorted(ranges))[:1024])
        return entry

    def _prefetch(self, uow: UnitOfWork, arrivals: list[Arrival]
                  ) -> dict[tuple[str, bool], list[tuple[str, int]]] | None:
        """The endpoints of the conversation sides a batch names that the index does not
        know, in one query (not one per conversation): side -> [(handle, database)], an
        empty list for a side this instance does not hold (yet)."""
        index, endpoints = self._index, self._m.endpoints
        wanted = {(f.conversation_id, not f.from_initiator) for f in
                  (a.fragment for a in arrivals)}
        wanted = {key for key in wanted if index.get(key) not in endpoints}
        if len(wanted) < 2:
            return None  # one side: find's own query
        keys = sorted(wanted)
        uow.ensure_tx()
        rows = self._m.store.run("wire/select_endpoints_by_conversations.sql", {
            "conversation_id": columns.guids(k[0] for k in keys),
            "is_initiator": columns.flags(k[1] for k in keys)})
        found: dict[tuple[str, bool], list[tuple[str, int]]] = {key: [] for key in keys}
        for conversation_id, is_initiator, handle, database_id in rows:
            found.setdefault((conversation_id, bool(is_initiator)), []).append(
                (handle, database_id))
        return found

    def find(self, uow: UnitOfWork, conversation_id: str, is_initiator: bool,
              database_id: int | None) -> ConversationEndpoint | None:
        m = self._m
        handle = self._index.get((conversation_id, is_initiator))
        if handle is not None:
            ep = m.endpoints.get(handle)
            if ep is None:
                with contextlib.suppress(Exception):
                    ep = m.endpoint(handle)
            if ep is not None and (database_id is None or ep.database_id == database_id):
                return ep
            self._index.pop((conversation_id, is_initiator), None)
        prefetched = self._prefetched
        rows = None if prefetched is None else prefetched.get((conversation_id, is_initiator))
        if rows is None:
            uow.ensure_tx()  # endpoints new in this unit of work are in the index already
            rows = m.store.run("wire/select_endpoint_by_conversation.sql", {
                "conversation_id": conversation_id, "is_initiator": is_initiator})
        for (found, db) in rows:
            if database_id is None or db == database_id:
                self.remember(conversation_id, is_initiator, found)
                return m.endpoint(found)
        return None

    def _arrive(self, uow: UnitOfWork, arrival: Arrival,
                database_id: int | str | AskRoute | Picked, replies: _Replies) -> None:
        """One arrival for this instance: ``database_id`` is its database (``_destination``)
        or why it cannot be delivered."""
        m = self._m
        f = arrival.fragment
        conn = arrival.connection
        if isinstance(database_id, AskRoute):
            # R2.4, R8 for a message of remote origin: msdb (whose table routed it, R1.2)
            # sends the route request, as a database does for its own conversations, and
            # the message is dropped like any of remote origin without a route (R3.5): its
            # sender sends it again and finds the route the answer made
            m.route_requests.request(uow, m.catalog_named("msdb").database_id,
                                     database_id.service)
            self._refuse(arrival, replies, STATUS_ROUTE_REQUESTED, fatal=False)
            return
        if isinstance(database_id, str):
            self._refuse(arrival, replies, database_id, fatal=False, code=(
                NOT_PRINCIPAL_CODE if database_id == STATUS_NOT_PRINCIPAL else 0))
            return
        ep = None
        if isinstance(database_id, Picked):
            database_id, ep = self._holder(uow, f, database_id.database_id)
            if ep is None and self.mirroring_roles.get(database_id) == "MIRROR":
                self._refuse(arrival, replies, STATUS_NOT_PRINCIPAL, fatal=False,
                             code=NOT_PRINCIPAL_CODE)
                return
        catalog = m.catalog(database_id)
        if not catalog.broker_enabled:  # it stays in the sender's transmission queue
            self._refuse(arrival, replies, STATUS_TARGET_BROKER_DISABLED.format(catalog.name),
                         fatal=False)
            return
        if ep is None:
            ep = self.find(uow, f.conversation_id, not f.from_initiator, database_id)
        if ep is None:
            if not f.from_initiator:
                self._refuse(arrival, replies, ENDPOINT_CLOSED_TEXT, fatal=True,
                             code=REMOTE_ENDPOINT_CLOSED, broker=catalog.broker_instance)
                return
            if f.to_service not in catalog.services:
                self._refuse(arrival, replies, STATUS_FORWARDING_OFF, fatal=False)
                return
            if f.contract not in catalog.service_contracts.get(f.to_service, frozenset()):
                self._refuse(arrival, replies, (
                    f"Target service '{f.to_service}' does not support contract "
                    f"'{f.contract}'."), fatal=True, code=CONTRACT_NOT_SUPPORTED,
                    broker=catalog.broker_instance)
                return
            if f.sequence > 0 and self._began_elsewhere(f, database_id):
                self._refuse(arrival, replies, STATUS_UNKNOWN_AT_PRINCIPAL.format(
                    f" at {self.wire.address}" if self.wire is not None else ""),
                    fatal=False, code=UNKNOWN_AT_PRINCIPAL)
                return
            ep = self._new_target(uow, f, catalog)
        elif ep.is_initiator and ep.far_broker_instance not in (None, f.from_broker_instance):
            self._refuse(arrival, replies, _ALREADY_ACKNOWLEDGED_TEXT, fatal=True,
                         code=ALREADY_ACKNOWLEDGED, broker=catalog.broker_instance)
            return
        if ep.is_initiator and ep.far_broker_instance is None:
            ep.far_broker_instance = f.from_broker_instance  # R5: a reply pins too
            ep.route = None
        handle = ep.conversation_handle
        held_frags = self.fragments.get(handle, {}).get(f.sequence, ())
        kind = dialog.classify(f, ep.receive_sequence, held_frags)
        if kind != dialog.DUPLICATE and f.sequence in self._held.get(handle, {}):
            kind = dialog.DUPLICATE
        replies.acks[(conn, f.conversation_id, f.from_initiator)] = (
            ep, catalog.broker_instance)
        if kind == dialog.DUPLICATE:
            return  # P3.2, P5.4: acknowledged again, not queued again
        now = self._batch_now or m.now()
        if kind == dialog.FRAGMENT:
            self._keep_fragment(uow, database_id, handle, f, now)
            self.fragments.setdefault(handle, {}).setdefault(f.sequence, {})[
                f.fragment_number] = len(f.body)
            if ep.state is None:  # SI: the first message is incomplete (C1)
                ep.state = transition(ep.role, None, "receive_fragment").state
            ep.receive_sequence_frag = len(self.fragments[handle][f.sequence])
            uow.touch(ep)
            return
        parts = None
        body: bytes | None
        if f.fragment_count == 1:
            body = bytes(f.body)
        else:  # the last fragment: the message is whole
            if kind != dialog.HOLD and not (f.is_end_of_dialog or f.is_error):
                # into its queue as its fragments (message_parts.py), unless _accept
                # finds it goes elsewhere
                self._check_kept(f, held_frags)
                self._keep_fragment(uow, database_id, handle, f, now)
                body, parts = None, f.fragment_count
                if f.message_size >= message_parts.STREAM_FROM:
                    uow.m.store.checkpoint_after_commit()
            else:  # held, or an end or error message (its body is read): made whole
                body = message_parts.reassemble(uow, handle, f, held_frags)
            frags = self.fragments.get(handle)
            if frags is not None:
                frags.pop(f.sequence, None)
                if not frags:
                    del self.fragments[handle]
            ep.receive_sequence_frag = 0
        if kind == dialog.HOLD:
            assert body is not None
            self._hold(uow, ep, catalog, f, body, now)
            return
        self._accept(uow, ep, catalog, f.sequence, f.message_type, f.validation, body,
                     f.is_end_of_dialog, f.is_error, now, arrival, replies, parts)
        self._release(uow, ep, catalog, now, arrival, replies)

    def _keep_fragment(self, uow: UnitOfWork, database_id: int, handle: str,
                       f: MessageFragment, now: datetime) -> None:
        """P4.4: one fragment of a message into message_fragments, durable before it is
        acknowledged; as pieces of at most PIECE_SIZE bytes (migrations/010), 1 MiB of
        them per statement."""
        row = {
            "database_id": database_id, "conversation_handle": handle,
            "message_sequence_number": f.sequence, "fragment_number": f.fragment_number,
            "fragment_count": f.fragment_count, "message_size": f.message_size,
            "message_type_name": f.message_type, "validation": f.validation,
            "is_end_of_dialog": f.is_end_of_dialog, "is_conversation_error": f.is_error,
            "arrival_time": now}
        for run in message_parts.piece_runs(f.body):
            uow.sql("wire/insert_message_fragment_pieces.sql", {**row, **run})
        self.fragments_kept = True
        self.fragment_bytes += len(f.body)

    @staticmethod
    def _check_kept(f: MessageFragment, held: dict[int, int] | tuple[()]) -> None:
        """The last fragment ``f`` and those held (number -> size) make a whole message,
        or a WireError refuses ``f``."""
        message_parts.check_whole(f, message_parts.fragment_step(f, held),
                                  {**dict(held), f.fragment_number: len(f.body)})

    def _began_elsewhere(self, f: MessageFragment, database_id: int) -> bool:
        """R9: whether a later message from an initiator, for a conversation this database
        has no endpoint for, may belong to one begun at the pair's former principal. Only
        in a database that is the principal of a pair (elsewhere it begins a target and
        waits, held, for the messages before it, P4.4); not when the conversation's first
        message is in the same batch (it begins the target first, whatever the order)."""
        return (self.mirroring_roles.get(database_id) == "PRINCIPAL"
                and f.conversation_id not in self._batch_starts)

    def _holder(self, uow: UnitOfWork, f: MessageFragment, picked: int
                ) -> tuple[int, ConversationEndpoint | None]:
        """R4.2: the database that holds the conversation (its endpoint for this side of
        it), with that endpoint, if it has the service and takes messages (not a mirror);
        else ``picked`` (and no endpoint: find looks there). So every message of a
        conversation reaches the database its first one did."""
        ep = self.find(uow, f.conversation_id, not f.from_initiator, None)
        if (ep is None or self.mirroring_roles.get(ep.database_id) == "MIRROR"
                or f.to_service not in self._m.catalog(ep.database_id).services):
            return picked, None
        return ep.database_id, ep

    def _new_target(self, uow: UnitOfWork, f: MessageFragment,
                    catalog: Any) -> ConversationEndpoint:
        now = self._m.now()
        lifetime = datetime(1970, 1, 1) + timedelta(milliseconds=f.lifetime_ms)
        level = endpoint_priority(catalog.priorities, f.contract, f.to_service, f.from_service)
        ep = ConversationEndpoint((
            new_handle(), catalog.database_id, f.conversation_id, str(uuid.uuid4()),
            False, f.to_service, f.contract, f.from_service, f.from_broker_instance, None,
            None, lifetime, None, 0, 0, None, 0, 0, 0, None, None, None, level, now, "",
        ), persisted=False)
        self._m.endpoints[ep.conversation_handle] = ep
        self.remember(f.conversation_id, False, ep.conversation_handle)
        self._m.note_deadline(uow, lifetime)
        return ep

    def _accept(self, uow: UnitOfWork, ep: ConversationEndpoint, catalog: Any, seq: int, mtype: str,
                validation: str, body: bytes | None, is_end: bool, is_error: bool,
                now: datetime, arrival: Arrival, replies: _Replies,
                parts: int | None = None) -> None:
        """The next message in sequence, whole: the endpoint's event (C1), then the queue
        (or, the queue being OFF, the receiving database's transmission queue, P8).
        ``parts``: the body is not here but kept as that many fragments (message_parts.py);
        if the message does not go into a queue, they are read back or deleted."""
        if not self._enqueue(uow, ep, catalog, seq, mtype, validation, body, is_end,
                             is_error, now, arrival, replies, parts) and parts is not None:
            message_parts.delete(uow, ep.conversation_handle, seq)

    def _enqueue(self, uow: UnitOfWork, ep: ConversationEndpoint, catalog: Any, seq: int,
                 mtype: str,
                 validation: str, body: bytes | None, is_end: bool, is_error: bool,
                 now: datetime, arrival: Arrival, replies: _Replies, parts: int | None
                 ) -> bool:
        """_accept's work; whether the message went into a queue."""
        m = self._m
        event = ("receive_end_dialog" if is_end
                 else "receive_error" if is_error else "receive_message")
        t = TRANSITIONS.get((ep.role, ep.state, event))
        if t is None:
            if ep.state == "SI":
                t = TRANSITIONS.get((ep.role, None, event))
            if t is None:
                ep.receive_sequence = seq + 1  # taken (and acknowledged), but discarded
                uow.touch(ep)
                return False
        if ep.state is None:
            self._m.endpoints[ep.conversation_handle] = ep
        ep.state = t.state
        ep.receive_sequence = seq + 1
        if is_error:
            ep.error_code, ep.error_description = parse_error(body)
            m.delivery.drop_transmissions(uow, ep)  # C4: an error ends its sending
            self.forget(ep)
        uow.touch(ep)
        if not t.enqueue:
            return False
        queue = catalog.services.get(ep.service_name)
        if queue is None:
            return False
        settings = catalog.queues.get(queue)
        if settings is not None and not settings.status:
            if parts is not None:  # waits whole in the transmission queue (P8)
                body = message_parts.read_body(uow, ep.conversation_handle, seq, parts)
            assert body is not None
            uow.inbound_rows.append((
                ep.database_id, ep.conversation_handle, seq, len(body), ep.service_name,
                catalog.broker_instance, ep.far_service, ep.service_contract_name, mtype,
                validation, is_end, is_error, ep.priority, now, body,
                STATUS_QUEUE_DISABLED))
            self.inbound_waiting = True
            return False
        if self.inbound_waiting and uow.sql("wire/count_inbound_of.sql", {
                "conversation_handle": ep.conversation_handle})[0][0]:
            # the queue was turned ON and its earlier arrivals still wait (the release runs
            # after the ALTER commits): they go into the queue first, in order (P8)
            self.release_inbound(uow)
        uow.enqueue((
            ep.database_id, queue, m.next_order(), 1, ep.priority, ep.conversation_group_id,
            ep.conversation_handle, seq, ep.service_name, ep.service_contract_name, mtype,
            validation, body, now), parts)
        return True

    def _hold(self, uow: UnitOfWork, ep: ConversationEndpoint, catalog: Any, f: MessageFragment,
              body: bytes, now: datetime) -> None:
        """P4.4: a whole message ahead of a missing one waits in the queue with status 2."""
        queue = catalog.services.get(ep.service_name)
        if queue is None:
            return
        # written with the unit of work's other queue rows (one statement for the batch);
        # not through uow.enqueue: a held message is not receivable, RECEIVE's read-ahead
        # must not count it
        uow.queue_rows.append((
            ep.database_id, queue, self._m.next_order(), 2, ep.priority,
            ep.conversation_group_id, ep.conversation_handle, f.sequence, ep.service_name,
            ep.service_contract_name, f.message_type, f.validation, body, now))
        self._held.setdefault(ep.conversation_handle, {})[f.sequence] = (
            f.message_type, f.is_end_of_dialog, f.is_error)
        if ep.state is None:
            ep.state = transition(ep.role, None, "receive_fragment").state  # SI
            self._m.endpoints[ep.conversation_handle] = ep
        uow.touch(ep)

    def _release(self, uow: UnitOfWork, ep: ConversationEndpoint, catalog: Any, now: datetime,
                 arrival: Arrival, replies: _Replies) -> None:
        """Held messages that are next in sequence now become receivable, in order."""
        held = self._held.get(ep.conversation_handle)
        if held is None or ep.receive_sequence not in held:
            if held is not None and not held:
                del self._held[ep.conversation_handle]
            return
        run = []  # the held messages next in sequence, taken out in one statement
        seq = ep.receive_sequence
        while seq in held:
            run.append(seq)
            seq += 1
        rows = uow.sql("wire/take_held_messages.sql", {
            "conversation_handle": ep.conversation_handle,
            "message_sequence_number": columns.ints(run)})
        uow.forget_read_ahead()
        taken = {r[0]: (r[1], r[2]) for r in rows}
        for seq in run:
            mtype, is_end, is_error = held.pop(seq)
            validation, body = taken.get(seq, ("N", b""))
            self._accept(uow, ep, catalog, seq, mtype, validation, body or b"", is_end,
                         is_error, now, arrival, replies)
        if held is not None and not held:
            self._held.pop(ep.conversation_handle, None)

    def release_inbound(self, uow: UnitOfWork) -> None:
        """P8: arrivals that waited for a queue turned ON go into it, in order."""
        if not self.inbound_waiting:
            return
        rows = uow.sql("wire/take_inbound.sql", {})
        rows.sort(key=lambda r: (r[6], r[1], r[2]))  # RETURNING keeps no order
        uow.forget_read_ahead()
        waiting = False
        keep: list[tuple[Any, ...]] = []
        for (database_id, handle, seq, mtype, validation, body, enqueued) in rows:
            catalog = self._m.catalog(database_id)
            ep = self._m.endpoint(handle)
            queue = catalog.services.get(ep.service_name)
            settings = None if queue is None else catalog.queues.get(queue)
            if settings is None or not settings.status:
                keep.append((database_id, handle, seq, mtype, validation, body, enqueued))
                waiting = True
                continue
            uow.enqueue((
                database_id, queue, self._m.next_order(), 1, ep.priority,
                ep.conversation_group_id, handle, seq, ep.service_name,
                ep.service_contract_name, mtype, validation, body, enqueued))
        if keep:
            for database_id, handle, seq, mtype, validation, body, enqueued in keep:
                ep = self._m.endpoint(handle)
                catalog = self._m.catalog(database_id)
                uow.inbound_rows.append((
                    database_id, handle, seq, len(body or b""), ep.service_name,
                    catalog.broker_instance, ep.far_service, ep.service_contract_name,
                    mtype, validation, False, False, ep.priority, enqueued, body or b"",
                    STATUS_QUEUE_DISABLED))
        self.inbound_waiting = waiting

    def _refuse(self, arrival: Arrival, replies: _Replies, text: str, *, fatal: bool,
                code: int = 0, broker: str | None = None) -> None:
        """No silent rejection: an event here, a notice to the sender."""
        f = arrival.fragment
        self.event("Broker:Message Undeliverable", "refused", arrival.peer,
                   f.conversation_id, f.sequence, text)
        replies.notices.append((arrival.connection, Notice(
            f.conversation_id, f.from_initiator, broker, f.sequence, code, text, fatal,
            self.wire.key_id if self.wire else bytes(8))))

    # -- events --------------------------------------------------------------------------

    def event(self, event_class: str, subclass: str, peer: str | None,
              conversation_id: str | None, sequence: int | None, description: str) -> None:
        """Record a broker event (any thread); written with the next unit of work."""
        with self._lock:
            self._event_id += 1
            self._events.append((self._event_id, self._m.now(), event_class, subclass, peer,
                                 conversation_id, sequence, description[:2000]))
        listener = self.event_listener
        if listener is not None:
            with contextlib.suppress(Exception):  # a log that fails never stops the broker
                listener(event_class, subclass, peer, description)

    def flush_events(self, uow: UnitOfWork) -> None:
        with self._lock:
            events, self._events = self._events, []
        if not events:
            return
        cols = list(zip(*events, strict=True))
        uow.sql("wire/insert_broker_events.sql", {
            "event_id": columns.ints(cols[0]), "event_time": columns.times(cols[1]),
            "event_class": columns.texts(cols[2]), "subclass": columns.texts(cols[3]),
            "peer_address": columns.texts(cols[4]), "conversation_id": columns.guids(cols[5]),
            "message_sequence_number": columns.ints(cols[6]),
            "description": columns.texts(cols[7])})
        uow.sql("wire/prune_broker_events.sql", {"keep": MAX_EVENTS})
