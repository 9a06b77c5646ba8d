"""The messaging engine's side of the wire (P3-P5, P8, R5, R6): what leaves for the network
and what arrives from it, written to DuckDB by the engine and nowhere else.

Outbound: a message whose route says ``send`` waits in the sending database's transmission
queue with an empty status while it is in flight; after the transaction commits it is
handed to the wire (``Wire.submit``), which fragments, sends, and resends it until every
fragment is acknowledged. Then ``acknowledged`` deletes its row (P5.2), pins the
conversation to the broker identifier that acknowledged (R5) and closes a side whose
EndDialog was acknowledged (DO -> CD). An endpoint with rows in flight has no
``transmission_next_attempt``; one whose route does not say ``send`` keeps the engine's
C5 retry loop, which hands its rows to the wire once the route appears.

Inbound (arrivals applied in one unit of work, acknowledged after the commit) and forwarding
(R7) are Arrivals' (arrivals.py; where each arrival goes: arrival_destinations.py), which
RemoteDelivery composes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from pybroker.core.conversation import columns
from pybroker.core.conversation.endpoint import ConversationEndpoint
from pybroker.core.conversation.model import Outgoing
from pybroker.core.conversation.priorities import DEFAULT_PRIORITY
from pybroker.core.conversation.states import transition
from pybroker.core.conversation.system_messages import REMOTE_ENDPOINT_CLOSED
from pybroker.core.wire import dialog
from pybroker.core.wire.forwarding import DEFAULT_HOPS
from pybroker.core.wire.frames import MessageFragment, Notice
from pybroker.core.wire.mirrored_route import pair_key
from pybroker.kernel.messaging import transmission_pieces
from pybroker.kernel.messaging.arrivals import UNKNOWN_AT_PRINCIPAL, Arrival, Arrivals, Wire

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.messaging.catalog import DatabaseCatalog
    from pybroker.kernel.messaging.catalog_cache import CatalogCache
    from pybroker.kernel.messaging.counters import MessageCounters
    from pybroker.kernel.messaging.endpoint_cache import EndpointCache
    from pybroker.kernel.messaging.route_requests import RouteRequests
    from pybroker.kernel.messaging.unit_of_work import UnitOfWork
    from pybroker.kernel.tracing import MessageTracing
    from pybroker.storage.store import Store

HOPS = DEFAULT_HOPS  # R7.1: hops a message starts with (see core/wire/forwarding.py)
_EPOCH = datetime(1970, 1, 1)


@functools.lru_cache(maxsize=4096)
def _epoch_ms(when: datetime) -> int:
    """A conversation's lifetime (naive UTC) as the frame carries it: epoch milliseconds."""
    return int((when - _EPOCH).total_seconds() * 1000)


@dataclass(slots=True)
class Remote:
    """A next hop on the network (the route said ``send``)."""

    address: str
    mirror_address: str | None

    @property
    def hop(self) -> str:
        """What the wire is handed: the address, or a mirrored pair's key (R9: the wire
        finds which partner is principal)."""
        if self.mirror_address is None:
            return self.address
        return pair_key(self.address, self.mirror_address)


class _Delivery(Protocol):
    """What the side of the wire needs of the engine's delivery (delivery.py's Delivery)."""

    def drop_transmissions(self, uow: UnitOfWork, ep: ConversationEndpoint) -> None: ...

    def bounce(self, uow: UnitOfWork, ep: ConversationEndpoint, code: int,
               description: str) -> None: ...

    def retained_queue(self, ep: ConversationEndpoint) -> str | None: ...

    def retain_sent(self, uow: UnitOfWork, ep: ConversationEndpoint, queue: str, seq: int,
                    mtype: str, validation: str, body: bytes, now: datetime) -> None: ...


class _Engine(Protocol):
    """What the side of the wire needs of the messaging engine (engine.py's Messaging,
    which imports this module): public names."""

    store: Store
    endpoints: EndpointCache
    catalogs: CatalogCache
    route: Callable[..., Any]
    route_requests: RouteRequests  # R2.4, R8
    delivery: _Delivery
    transmission_pieces: bool
    counters: MessageCounters
    tracing: MessageTracing | None  # pybroker/kernel/tracing.py

    def unit_of_work(self) -> AbstractContextManager[UnitOfWork]: ...

    def endpoint(self, handle: str, database_id: int | None = None) -> ConversationEndpoint: ...

    def catalog(self, database_id: int) -> DatabaseCatalog: ...

    def catalog_named(self, name: str) -> DatabaseCatalog: ...

    def now(self) -> datetime: ...

    def next_order(self) -> int: ...

    def note_deadline(self, uow: UnitOfWork, when: datetime | None) -> None: ...


class RemoteDelivery:
    """The engine's side of the wire: the outbound side here, the inbound side and what both
    keep of the wire in ``arrivals`` (arrivals.py)."""

    def __init__(self, messaging: _Engine) -> None:
        self._m = messaging
        self.arrivals = Arrivals(messaging)

    # -- what both sides keep ------------------------------------------------------------

    @property
    def wire(self) -> Wire | None:
        """The transport (pybroker/core/wire/transport.py), while the instance has one."""
        return self.arrivals.wire

    @wire.setter
    def wire(self, wire: Wire | None) -> None:
        self.arrivals.wire = wire

    @property
    def event_listener(self) -> Callable[[str, str, str | None, str], None] | None:
        """Told of every broker event as it is recorded (an operator's log)."""
        return self.arrivals.event_listener

    @event_listener.setter
    def event_listener(self, listener: Callable[[str, str, str | None, str], None] | None
                       ) -> None:
        self.arrivals.event_listener = listener

    @property
    def fragments_kept(self) -> bool:
        """message_fragments may hold rows (END CONVERSATION then deletes an endpoint's)."""
        return self.arrivals.fragments_kept

    @property
    def mirroring_roles(self) -> dict[int, str]:
        return self.arrivals.mirroring_roles

    def mirroring_changed(self) -> None:
        self.arrivals.mirroring_changed()

    def arrive(self, arrivals: list[Arrival]) -> None:
        """Apply a batch of arrivals (Arrivals.arrive)."""
        self.arrivals.arrive(arrivals)

    def release_inbound(self, uow: UnitOfWork) -> None:
        self.arrivals.release_inbound(uow)

    def drop_fragments(self, handle: str) -> None:
        self.arrivals.drop_fragments(handle)

    def forget(self, ep: ConversationEndpoint) -> None:
        self.arrivals.forget(ep)

    def event(self, event_class: str, subclass: str, peer: str | None,
              conversation_id: str | None, sequence: int | None, description: str) -> None:
        self._m.counters.event(event_class, subclass)
        self.arrivals.event(event_class, subclass, peer, conversation_id, sequence,
                            description)

    def flush_events(self, uow: UnitOfWork) -> None:
        self.arrivals.flush_events(uow)

    def reload(self) -> None:
        self.arrivals.reload()

    # -- start ---------------------------------------------------------------------------

    def load(self) -> None:
        """At open: what the file holds of reassembly and held messages, and the rows
        that were in flight when the process stopped."""
        store = self._m.store
        self.arrivals.load()
        with store.lock:
            if store.read_only:
                return
            # Rows in flight when the process stopped go again: the retry loop routes them
            # and hands them to the wire (or says why they cannot leave).
            store.run("wire/reschedule_in_flight.sql")
            # pieces of a SEND that did not commit (transmission_pieces.py)
            store.run("transmission/delete_orphan_pieces.sql")
            self._m.transmission_pieces = bool(
                store.run("transmission/count_pieces.sql")[0][0])
            store.run("wire/delete_connections.sql")
            store.run("wire/delete_listeners.sql")
            store.run("wire/delete_forwarded_messages.sql")
            store.run("wire/delete_mirrored_routes.sql")
            store.run("conversation/delete_group_locks.sql")  # C7 (live_views.py)
            store.run("conversation/delete_lock_waits.sql")

    # -- outbound ------------------------------------------------------------------------

    def stage(self, uow: UnitOfWork, ep: ConversationEndpoint, messages: list[Outgoing],
              target: Remote) -> None:
        """The messages go to the network: into the transmission queue (status '') and,
        after commit, to the wire. A sender whose queue has RETENTION = ON keeps a copy of
        each user message in this transaction (C3), as a delivery inside the instance does."""
        now = self._m.now()
        to_broker = ep.far_broker_instance or ep.requested_broker_instance
        retained_queue = self._m.delivery.retained_queue(ep)
        for seq, mtype, validation, body, is_end, is_error in messages:
            uow.tx_rows.append((
                ep.database_id, ep.conversation_handle, seq, len(body), ep.far_service,
                to_broker, ep.service_name, ep.service_contract_name, mtype, validation,
                is_end, is_error, ep.priority, now, body, ""))
            if retained_queue is not None and not (is_end or is_error):
                self._m.delivery.retain_sent(uow, ep, retained_queue, seq, mtype, validation, body,
                                    now)
            uow.outbound.append((ep.conversation_handle, target.hop,
                                 self.fragment(ep, seq, mtype, validation, body, is_end,
                                               is_error)))
        self.arrivals.remember(ep.conversation_id, bool(ep.is_initiator), ep.conversation_handle)
        uow.touch(ep)

    def fragment(self, ep: ConversationEndpoint, seq: int, mtype: str, validation: str, body: bytes,
                 is_end: bool, is_error: bool) -> MessageFragment:
        wire = self.wire
        catalog = self._m.catalog(ep.database_id)
        # the transport sends the higher priorities first (Transmitter.next_fragment): the
        # conversation's own where its database honours them, else all alike
        priority = ep.priority if catalog.honor_broker_priority else DEFAULT_PRIORITY
        # every SEND to the network makes one: positional (a third of the keywords' cost),
        # in MessageFragment's field order, the lifetime's milliseconds computed once
        f = MessageFragment(
            ep.conversation_id, bool(ep.is_initiator), seq, 0, 1, len(body), ep.service_name,
            ep.far_service, catalog.broker_instance,
            ep.far_broker_instance or ep.requested_broker_instance, ep.service_contract_name,
            mtype, validation, is_end, is_error, priority, _epoch_ms(ep.lifetime), HOPS,
            wire.key_id if wire else bytes(8), body)
        tracing = self._m.tracing
        if tracing is not None:  # the SEND's span context goes with it (tracing.py)
            f.traceparent = tracing.context_of(ep.conversation_id, bool(ep.is_initiator), seq)
        return f

    def resubmit(self, uow: UnitOfWork, targets: list[tuple[ConversationEndpoint, Remote]]) -> None:
        """The retry loop found a next hop for endpoints whose messages waited: they go
        to the wire, their rows stay until acknowledged."""
        handles = columns.guids(ep.conversation_handle for ep, _ in targets)
        rows = transmission_pieces.with_bodies(uow, uow.sql(
            "conversation/select_transmission_queue_of.sql", {"conversation_handle": handles}))
        if self._m.tracing is not None:  # what waited carries the trace it was sent in
            self._m.tracing.restore(uow, handles)
        uow.sql("conversation/update_transmission_status.sql",
                {"conversation_handle": handles, "transmission_status": ""})
        by_handle = {ep.conversation_handle: (ep, target) for ep, target in targets}
        for handle, seq, mtype, validation, body, is_end, is_error in rows:
            ep, target = by_handle[handle]
            uow.outbound.append((handle, target.hop, self.fragment(
                ep, seq, mtype, validation, body or b"", is_end, is_error)))
        self._retain_resubmitted(uow, [ep for ep, _ in targets], rows)
        for ep, _ in targets:
            self.arrivals.remember(ep.conversation_id, bool(ep.is_initiator),
                                   ep.conversation_handle)
            ep.transmission_retry_count = 0
            ep.transmission_status = ""
            uow.touch(ep)

    def _retain_resubmitted(self, uow: UnitOfWork, endpoints: list[ConversationEndpoint],
                            rows: list[tuple[Any, ...]]) -> None:
        """C3: messages that waited leave now, and a sender whose queue has RETENTION = ON
        keeps them from now (as Delivery.deliver does for a delivery that waited). Rows in flight
        when the process stopped go again too, and were kept when they first left: a
        message is kept once. A side that ended has given up what it kept (END removes
        it), so nothing of it is kept again."""
        m = self._m
        queues = {ep.conversation_handle: queue for ep in endpoints
                  if ep.state not in ("DO", "ER", "CD")
                  and (queue := m.delivery.retained_queue(ep)) is not None}
        wanted = [r for r in rows if r[0] in queues and not (r[5] or r[6])]
        if not wanted:
            return
        kept = set(map(tuple, uow.sql("conversation/select_retained_sent.sql", {
            "conversation_handle": columns.guids(queues)})))
        now = m.now()
        by_handle = {ep.conversation_handle: ep for ep in endpoints}
        for handle, seq, mtype, validation, body, _, _ in wanted:
            if (handle, seq) not in kept:
                m.delivery.retain_sent(uow, by_handle[handle], queues[handle], seq, mtype,
                               validation, body or b"", now)

    def after_commit(self, outbound: list[tuple[str, str, MessageFragment]]) -> None:
        if self.wire is not None:
            self.wire.submit(outbound)

    def acknowledged(self, acks: list[dialog.Acknowledged]) -> None:
        """P5.2: the far side has these messages; their rows leave."""
        m = self._m
        with m.unit_of_work() as uow:
            uow.activate()
            handles, seqs, cleared = [], [], []
            for ack in acks:
                try:
                    ep = m.endpoint(ack.handle)
                except Exception:  # ended WITH CLEANUP meanwhile: nothing to do
                    continue
                handles.append(ack.handle)
                seqs.append(ack.sequence)
                uow.counts["acknowledged", ep.database_id, ep.service_name] += 1
                if ep.first_unacked_send_sequence <= ack.sequence:
                    ep.first_unacked_send_sequence = ack.sequence + 1
                if ep.far_broker_instance is None:  # R5: pinned from now on
                    ep.far_broker_instance = ack.broker_instance
                    ep.route = None
                if (ack.is_end_of_dialog or ack.is_error) and ep.state == "DO":
                    ep.state = transition(ep.role, "DO", "acknowledged_end").state
                if ep.transmission_status:  # the far side takes them now: no reason left
                    ep.transmission_status = ""
                    cleared.append(ack.handle)
                uow.touch(ep)
            if handles:
                acked = columns.runs(zip(handles, seqs, strict=True))
                uow.sql("wire/delete_acknowledged.sql", acked)
                transmission_pieces.delete_acknowledged(uow, acked)
            if cleared:
                uow.sql("conversation/update_transmission_status.sql", {
                    "conversation_handle": columns.guids(cleared), "transmission_status": ""})

    def notice(self, notice: Notice, peer: str) -> None:
        """A notice about a message this instance sent: a fatal one ends the conversation
        with that error (C2); any other says why the far side cannot take it yet (C4)."""
        m = self._m
        with m.unit_of_work() as uow:
            uow.activate()
            ep = self.arrivals.find(uow, notice.conversation_id, notice.about_initiator, None)
            if ep is None or ep.state == "CD":
                return
            if notice.is_fatal:
                self.arrivals.forget(ep)
                m.delivery.bounce(uow, ep, notice.code, notice.text)
            elif notice.code == UNKNOWN_AT_PRINCIPAL:
                self._unknown_at_principal(uow, ep, notice, peer)
            else:
                ep.transmission_status = notice.text
                uow.touch(ep)
                uow.sql("conversation/update_transmission_status.sql", {
                    "conversation_handle": ep.conversation_handle,
                    "transmission_status": notice.text})

    def _unknown_at_principal(self, uow: UnitOfWork, ep: ConversationEndpoint, notice: Notice,
                              peer: str) -> None:
        """R9: a mirrored pair's principal has no endpoint for this conversation and refused
        a later message of it. If the far side acknowledged a message or sent one, its
        endpoint exists, but at the pair's former principal: nothing is replicated, so the
        conversation cannot continue and ends here with an error (-8462, as for a far
        endpoint that is gone), saying why. Otherwise the first message has not reached the
        principal yet (the second overtook it): the retries bring it, and then the rest."""
        if ep.state == "ER":
            return  # ended already (a notice about another of its messages)
        if ep.first_unacked_send_sequence == 0 and ep.receive_sequence == 0:
            return
        self._m.delivery.bounce(uow, ep, REMOTE_ENDPOINT_CLOSED, notice.text)  # C4: its rows go
        self.arrivals.event("Broker:Conversation", "Broker Initiated Error", peer,
                   notice.conversation_id, notice.sequence, notice.text)

    def transmission_status(self, handles: Iterable[str], status: str) -> None:
        """Why these endpoints' messages have not left (a connection failed, C4)."""
        handles = list(handles)
        if not handles:
            return
        with self._m.unit_of_work() as uow:
            uow.activate()
            for handle in handles:
                ep = self._m.endpoints.get(handle)
                if ep is not None:
                    ep.transmission_status = status
            uow.sql("conversation/update_transmission_status.sql", {
                "conversation_handle": columns.guids(handles), "transmission_status": status})

    # -- events --------------------------------------------------------------------------

    def write_events(self, *, wait: bool = True) -> None:
        """The broker events recorded since the last unit of work (``wait=False``: only if
        no other transaction holds the store now; else they come with the next one)."""
        with self._m.unit_of_work() as uow:
            if wait:
                uow.activate()
            elif not uow.try_activate():
                return
            self.arrivals.flush_events(uow)

