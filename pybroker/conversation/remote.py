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
(R7) are the base class's, in arrivals.py (where each arrival goes: arrival_destinations.py);
every name of it is importable from here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pybroker.conversation import columns, transmission_pieces
from pybroker.conversation.arrival_destinations import (
    STATUS_BROKER_NOT_HERE as STATUS_BROKER_NOT_HERE,
)
from pybroker.conversation.arrival_destinations import (
    STATUS_FORWARDING_OFF as STATUS_FORWARDING_OFF,
)
from pybroker.conversation.arrival_destinations import (
    STATUS_NOT_PRINCIPAL as STATUS_NOT_PRINCIPAL,
)
from pybroker.conversation.arrival_destinations import (
    STATUS_ROUTE_TO_ITSELF as STATUS_ROUTE_TO_ITSELF,
)
from pybroker.conversation.arrivals import ALL_FRAGMENTS as ALL_FRAGMENTS
from pybroker.conversation.arrivals import ALREADY_ACKNOWLEDGED as ALREADY_ACKNOWLEDGED
from pybroker.conversation.arrivals import INDEX_SIZE as INDEX_SIZE
from pybroker.conversation.arrivals import MAX_EVENTS as MAX_EVENTS
from pybroker.conversation.arrivals import UNKNOWN_AT_PRINCIPAL, Arrivals
from pybroker.conversation.arrivals import Arrival as Arrival
from pybroker.conversation.arrivals import Wire as Wire
from pybroker.conversation.endpoint import Endpoint
from pybroker.conversation.model import Outgoing
from pybroker.conversation.states import transition
from pybroker.conversation.system_messages import REMOTE_ENDPOINT_CLOSED
from pybroker.wire import dialog
from pybroker.wire.forwarding import DEFAULT_HOPS
from pybroker.wire.frames import MessageFragment, Notice
from pybroker.wire.mirrored_route import pair_key

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.conversation.unit_of_work import UnitOfWork

HOPS = DEFAULT_HOPS  # R7.1: hops a message starts with (see wire/forwarding.py)
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


class RemoteDelivery(Arrivals):
    """The engine's side of the wire: the outbound side here, the state and the inbound side
    in Arrivals (arrivals.py)."""

    # -- start ---------------------------------------------------------------------------

    def load(self) -> None:
        """At open: what the file holds of reassembly and held messages, and the rows
        that were in flight when the process stopped."""
        store = self.m._store
        self.reload()
        with store._lock:
            self._event_id = int(store.run("wire/select_max_event_id.sql")[0][0])
            if store.read_only:
                return
            # Rows in flight when the process stopped go again: the retry loop routes them
            # and hands them to the wire (or says why they cannot leave).
            store.run("wire/reschedule_in_flight.sql")
            # pieces of a SEND that did not commit (transmission_pieces.py)
            store.run("transmission/delete_orphan_pieces.sql")
            self.m.transmission_pieces = bool(
                store.run("transmission/count_pieces.sql")[0][0])
            store.run("wire/delete_connections.sql")
            store.run("wire/delete_listeners.sql")
            store.run("wire/delete_forwarded_messages.sql")
            store.run("wire/delete_mirrored_routes.sql")

    def reload(self) -> None:
        """Read the held fragments and messages again (at open, after a rollback)."""
        store = self.m._store
        self._fragments.clear()
        self._held.clear()
        with store._lock:
            for handle, seq, frag, size in store.run("wire/select_held_fragments.sql"):
                self._fragments.setdefault(handle, {}).setdefault(seq, {})[frag] = size
            self.fragments_kept = bool(store.run("wire/count_message_fragments.sql")[0][0])
            for handle, seq, mtype, is_end, is_error in store.run(
                    "wire/select_held_messages.sql"):
                self._held.setdefault(handle, {})[seq] = (mtype, is_end, is_error)
            self.inbound_waiting = bool(store.run("wire/count_inbound.sql")[0][0])

    # -- outbound ------------------------------------------------------------------------

    def stage(self, uow: UnitOfWork, ep: Endpoint, messages: list[Outgoing],
              target: Remote) -> None:
        """The messages go to the network: into the transmission queue (status '') and,
        after commit, to the wire. A sender whose queue has RETENTION = ON keeps a copy of
        each user message in this transaction (C3), as a delivery inside the instance does."""
        now = self.m._now()
        to_broker = ep.far_broker_instance or ep.requested_broker_instance
        retained_queue = self.m._retained_queue(ep)
        for seq, mtype, validation, body, is_end, is_error in messages:
            uow.tx_rows.append((
                ep.database_id, ep.conversation_handle, seq, len(body), ep.far_service,
                to_broker, ep.service_name, ep.service_contract_name, mtype, validation,
                is_end, is_error, ep.priority, now, body, ""))
            if retained_queue is not None and not (is_end or is_error):
                self.m._retain_sent(uow, ep, retained_queue, seq, mtype, validation, body,
                                    now)
            uow.outbound.append((ep.conversation_handle, target.hop,
                                 self.fragment(ep, seq, mtype, validation, body, is_end,
                                               is_error)))
        self._remember(ep.conversation_id, bool(ep.is_initiator), ep.conversation_handle)
        uow.touch(ep)

    def fragment(self, ep: Endpoint, seq: int, mtype: str, validation: str, body: bytes,
                 is_end: bool, is_error: bool) -> MessageFragment:
        wire = self.wire
        # every SEND to the network makes one: positional (a third of the keywords' cost),
        # in MessageFragment's field order, the lifetime's milliseconds computed once
        return MessageFragment(
            ep.conversation_id, bool(ep.is_initiator), seq, 0, 1, len(body), ep.service_name,
            ep.far_service, self.m.catalog(ep.database_id).broker_instance,
            ep.far_broker_instance or ep.requested_broker_instance, ep.service_contract_name,
            mtype, validation, is_end, is_error, ep.priority, _epoch_ms(ep.lifetime), HOPS,
            wire.key_id if wire else bytes(8), body)

    def resubmit(self, uow: UnitOfWork, targets: list[tuple[Endpoint, Remote]]) -> None:
        """The retry loop found a next hop for endpoints whose messages waited: they go
        to the wire, their rows stay until acknowledged."""
        handles = columns.guids(ep.conversation_handle for ep, _ in targets)
        rows = transmission_pieces.with_bodies(uow, uow.sql(
            "conversation/select_transmission_queue_of.sql", {"conversation_handle": handles}))
        uow.sql("conversation/update_transmission_status.sql",
                {"conversation_handle": handles, "transmission_status": ""})
        by_handle = {ep.conversation_handle: (ep, target) for ep, target in targets}
        for handle, seq, mtype, validation, body, is_end, is_error in rows:
            ep, target = by_handle[handle]
            uow.outbound.append((handle, target.hop, self.fragment(
                ep, seq, mtype, validation, body or b"", is_end, is_error)))
        self._retain_resubmitted(uow, [ep for ep, _ in targets], rows)
        for ep, _ in targets:
            self._remember(ep.conversation_id, bool(ep.is_initiator), ep.conversation_handle)
            ep.transmission_retry_count = 0
            ep.transmission_status = ""
            uow.touch(ep)

    def _retain_resubmitted(self, uow: UnitOfWork, endpoints: list[Endpoint],
                            rows: list[tuple[Any, ...]]) -> None:
        """C3: messages that waited leave now, and a sender whose queue has RETENTION = ON
        keeps them from now (as _deliver does for a delivery that waited). Rows in flight
        when the process stopped go again too, and were kept when they first left: a
        message is kept once. A side that ended has given up what it kept (END removes
        it), so nothing of it is kept again."""
        m = self.m
        queues = {ep.conversation_handle: queue for ep in endpoints
                  if ep.state not in ("DO", "ER", "CD")
                  and (queue := m._retained_queue(ep)) is not None}
        wanted = [r for r in rows if r[0] in queues and not (r[5] or r[6])]
        if not wanted:
            return
        kept = set(map(tuple, uow.sql("conversation/select_retained_sent.sql", {
            "conversation_handle": columns.guids(queues)})))
        now = m._now()
        by_handle = {ep.conversation_handle: ep for ep in endpoints}
        for handle, seq, mtype, validation, body, _, _ in wanted:
            if (handle, seq) not in kept:
                m._retain_sent(uow, by_handle[handle], queues[handle], seq, mtype,
                               validation, body or b"", now)

    def after_commit(self, outbound: list[tuple[str, str, MessageFragment]]) -> None:
        if self.wire is not None:
            self.wire.submit(outbound)

    def acknowledged(self, acks: list[dialog.Acknowledged]) -> None:
        """P5.2: the far side has these messages; their rows leave."""
        m = self.m
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
        m = self.m
        with m.unit_of_work() as uow:
            uow.activate()
            ep = self._find(uow, notice.conversation_id, notice.about_initiator, None)
            if ep is None or ep.state == "CD":
                return
            if notice.is_fatal:
                self.forget(ep)
                m._bounce(uow, ep, notice.code, notice.text)
            elif notice.code == UNKNOWN_AT_PRINCIPAL:
                self._unknown_at_principal(uow, ep, notice, peer)
            else:
                ep.transmission_status = notice.text
                uow.touch(ep)
                uow.sql("conversation/update_transmission_status.sql", {
                    "conversation_handle": ep.conversation_handle,
                    "transmission_status": notice.text})

    def _unknown_at_principal(self, uow: UnitOfWork, ep: Endpoint, notice: Notice,
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
        self.m._bounce(uow, ep, REMOTE_ENDPOINT_CLOSED, notice.text)  # C4: its rows go
        self.event("Broker:Conversation", "Broker Initiated Error", peer,
                   notice.conversation_id, notice.sequence, notice.text)

    def transmission_status(self, handles: Iterable[str], status: str) -> None:
        """Why these endpoints' messages have not left (a connection failed, C4)."""
        handles = list(handles)
        if not handles:
            return
        with self.m.unit_of_work() as uow:
            uow.activate()
            for handle in handles:
                ep = self.m._endpoints.get(handle)
                if ep is not None:
                    ep.transmission_status = status
            uow.sql("conversation/update_transmission_status.sql", {
                "conversation_handle": columns.guids(handles), "transmission_status": status})

    # -- events --------------------------------------------------------------------------

    def write_events(self) -> None:
        """The broker events recorded since the last unit of work."""
        with self.m.unit_of_work() as uow:
            uow.activate()
            self.flush_events(uow)

