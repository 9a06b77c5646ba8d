"""Forwarding's I/O (R7): the service of the transport that moves what the ``Forwarder``
(forwarding.py, sans-I/O) holds.

The engine decides that an arrival is for another instance and hands it back
(``Transport.forward``) with the next hop; the ``Forwarder`` holds it in memory and the
transport writes it to the next hop's connection, signed again with this instance's key for
that hop (the MAC keys are per adjacent pair, see frames.py). Acknowledgements and notices
for a conversation direction it forwards go back on the return path. When msdb's route is a
mirrored pair (R9), the next hop is the pair's principal, asked for as a sender asks
(transport_mirroring.py); until one partner claims it, what arrives is dropped and its
sender sends it again. Everything here runs on the transport's event loop thread.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pybroker.core.wire import frame_macs, frames
from pybroker.core.wire.addresses import next_hop
from pybroker.core.wire.adjacent import AdjacentConnection
from pybroker.core.wire.forwarding import NO_PRINCIPAL, Dropped, Forwarder, ReturnPath
from pybroker.core.wire.mirrored_route import is_pair_key
from pybroker.core.wire.transport_connections import Connection, Connections
from pybroker.core.wire.transport_settings import Sink
from pybroker.errors import WireError

FORWARD_TICK = 1.0  # seconds between drops of what ran out of time, while anything is held


class ForwardingIO:
    """What the transport does for the messages it forwards: admit them, send them to their
    next hop, relay what comes back, drop what ran out of time (with a broker event)."""

    def __init__(self, forwarder: Forwarder, connections: Connections, sink: Sink, *,
                 key_id: bytes, clock: Callable[[], float],
                 loop: asyncio.AbstractEventLoop, closed: Callable[[], bool],
                 kick: Callable[[str], None], flush: Callable[[Connection], None],
                 principal_for: Callable[[str, frames.MessageFragment], str | None]
                 ) -> None:
        """``kick(hop)`` wakes (or opens) the connection to a next hop, ``flush(conn)``
        writes what a connection's core has to send, ``principal_for(pair_key, fragment)``
        is a mirrored pair's principal's next hop (None while none is known)."""
        self.forwarder = forwarder
        self.connections = connections
        self.sink = sink
        self.key_id = key_id
        self.clock = clock
        self.loop = loop
        self.closed = closed
        self.kick = kick
        self.flush = flush
        self.principal_for = principal_for
        self._timer: asyncio.TimerHandle | None = None

    def forward(self, items: list[tuple[int, str, frames.MessageFragment, str]]) -> None:
        """Hold arrivals for their next hops: (connection it came on, peer, fragment, next
        hop's address)."""
        now = self.clock()
        hops: set[str] = set()
        for connection, peer, fragment, address in items:
            came = self.connections.get(connection)
            adjacent = peer
            if came is not None and came.core is not None and came.core.peer is not None:
                adjacent = came.core.peer.address or peer  # its endpoint, not its socket
            try:
                hop = (self.principal_for(address, fragment) if is_pair_key(address)
                       else next_hop(address))
            except WireError as exc:
                self.forwarder.learn(fragment, connection, adjacent)
                self.dropped([Dropped(fragment, "no next hop", str(exc))])
                continue
            if hop is None:  # R9.4: a mirrored pair with no principal known
                self.forwarder.learn(fragment, connection, adjacent)
                self.dropped([Dropped(fragment, NO_PRINCIPAL, (
                    "neither partner of msdb's mirrored route has said it is the principal "
                    "yet (both are asked)"))])
                continue
            dropped = self.forwarder.admit(fragment, hop, connection, adjacent, now)
            if dropped is not None:
                self.dropped([dropped])
            else:
                hops.add(hop)
        for hop in hops:
            self.kick(hop)
        self.arm()

    def send_next(self, conn: Connection, core: AdjacentConnection, now: float) -> None:
        """The next forwarded fragment for ``conn``'s next hop, signed for that hop; its
        bytes are released once handed to the connection (R7.3)."""
        assert conn.address is not None
        f, dropped = self.forwarder.next_fragment(conn.address, now, self.key_id)
        if dropped:
            self.dropped(dropped)
        if f is None:
            return
        try:
            core.send_fragment(f, now, conn.key(f.conversation_id, f.from_initiator))
        except WireError as exc:  # over the next hop's max_body, or not encodable
            self.dropped([Dropped(f, "refused by the next hop", str(exc), conn.address)])

    def relay_notice(self, n: frames.Notice, path: ReturnPath) -> None:
        """A notice for a sender behind this forwarder, back on its return path."""
        back = self.connections.back_to(path.connection, path.address)
        if back is None or back.core is None:
            return  # the sender resends; the next copy's notice finds the way
        back.core.send_notice(frame_macs.sign(replace(n, key_id=self.key_id), back.key(
            n.conversation_id, n.about_initiator)), self.clock())
        self.flush(back)

    def dropped(self, dropped: list[Dropped]) -> None:
        """Each fragment not forwarded, as a broker event."""
        for d in dropped:
            f = d.fragment
            self.sink.event("Broker:Forwarded Message Dropped", d.reason, d.next_hop,
                            f.conversation_id, f.sequence,
                            f"fragment {f.fragment_number} of message {f.sequence} from "
                            f"{f.from_service!r} to {f.to_service!r} was not forwarded: "
                            f"{d.description}; its sender sends it again")

    def arm(self) -> None:
        """While anything is held: once a second, drop what ran out of time (R7.1) and
        wake the connections of next hops with fragments waiting."""
        if self._timer is None and self.forwarder.held_bytes and not self.closed():
            self._timer = self.loop.call_later(FORWARD_TICK, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self.dropped(self.forwarder.handle_timer(self.clock()))
        for hop in self.forwarder.next_hops():
            self.kick(hop)
        self.arm()

    def rows(self) -> list[tuple[Any, ...]]:
        """Rows of sys.dm_broker_forwarded_messages: what is held right now."""
        now = self.clock()
        rows = []
        for held in self.forwarder.held():
            f = held.fragment
            rows.append((
                f.conversation_id, f.from_initiator, f.to_service, f.to_broker_instance,
                f.from_service, f.from_broker_instance, held.next_hop, f.sequence,
                f.fragment_number, f.hops_remaining, f.time_to_live_ms,
                held.consumed_ms(now), str(uuid.uuid5(
                    uuid.UUID(f.conversation_id), f"{int(f.from_initiator)}/{f.sequence}"))))
        return rows
