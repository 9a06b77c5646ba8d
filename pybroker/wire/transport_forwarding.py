"""Forwarding's I/O (R7): the side of the transport that moves what the ``Forwarder``
(forwarding.py, sans-I/O) holds.

The engine decides that an arrival is for another instance and hands it back
(``forward``) with the next hop; the ``Forwarder`` holds it in memory and the transport
writes it to the next hop's connection, signed again with this instance's key for that hop
(the MAC keys are per adjacent pair, see frames.py). Acknowledgements and notices for a
conversation direction it forwards go back on the return path. When msdb's route is a
mirrored pair (R9), the next hop is the pair's principal, asked for as a sender asks
(transport_mirroring.py); until one partner claims it, what arrives is dropped and its
sender sends it again. ``Transport`` takes these
methods from ``ForwardingIO``; they run on its event loop thread (but for the public calls,
which any thread may make).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pybroker.errors import WireError
from pybroker.wire import frames
from pybroker.wire.addresses import next_hop
from pybroker.wire.adjacent import AdjacentConnection
from pybroker.wire.forwarding import NO_PRINCIPAL, Dropped, Forwarder, ReturnPath
from pybroker.wire.mirrored_route import is_pair_key
from pybroker.wire.transport_host import Conn, TransportHost

FORWARD_TICK = 1.0  # seconds between drops of what ran out of time, while anything is held


class ForwardingIO(TransportHost):
    """The forwarding methods of ``Transport`` (transport.py)."""

    # what the transport provides
    forwarder: Forwarder
    _forward_timer: asyncio.TimerHandle | None

    if TYPE_CHECKING:  # pragma: no cover
        def _forward_principal(self, key: str, fragment: frames.MessageFragment
                               ) -> str | None: ...

    def forward(self, items: list[tuple[int, str, frames.MessageFragment, str]]) -> None:
        """Pass arrivals on (R7): (connection it came on, peer, fragment, next hop's
        address), as the engine's routing decided (msdb's table, R1.2)."""
        self._call(self._forward, items)

    def set_forwarding_limit(self, limit: int) -> None:
        """R7.3: the bytes forwarded messages may hold from now on."""
        self._call(setattr, self.forwarder, "limit", limit)

    def forwarded(self) -> list[tuple[Any, ...]]:
        """Rows of sys.dm_broker_forwarded_messages: what is held right now."""
        if self._closed:
            return []
        future: Any = asyncio.run_coroutine_threadsafe(self._forwarded(), self._loop)
        try:
            return future.result(timeout=5)
        except Exception:
            return []

    def _forward(self, items: list[tuple[int, str, frames.MessageFragment, str]]) -> None:
        now = self.clock()
        hops: set[str] = set()
        for connection, peer, fragment, address in items:
            came = self._conns.get(connection)
            adjacent = peer
            if came is not None and came.core is not None and came.core.peer is not None:
                adjacent = came.core.peer.address or peer  # its endpoint, not its socket
            try:
                hop = (self._forward_principal(address, fragment) if is_pair_key(address)
                       else next_hop(address))
            except WireError as exc:
                self.forwarder.learn(fragment, connection, adjacent)
                self._dropped([Dropped(fragment, "no next hop", str(exc))])
                continue
            if hop is None:  # R9.4: a mirrored pair with no principal known
                self.forwarder.learn(fragment, connection, adjacent)
                self._dropped([Dropped(fragment, NO_PRINCIPAL, (
                    "neither partner of msdb's mirrored route has said it is the principal "
                    "yet (both are asked)"))])
                continue
            dropped = self.forwarder.admit(fragment, hop, connection, adjacent, now)
            if dropped is not None:
                self._dropped([dropped])
            else:
                hops.add(hop)
        for hop in hops:
            self._kick(hop)
        self._arm_forwarding()

    def _send_forwarded(self, conn: Conn, core: AdjacentConnection, now: float) -> None:
        """The next forwarded fragment for ``conn``'s next hop, signed for that hop; its
        bytes are released once handed to the connection (R7.3)."""
        assert conn.address is not None
        f, dropped = self.forwarder.next_fragment(conn.address, now, self.key_id)
        if dropped:
            self._dropped(dropped)
        if f is None:
            return
        try:
            core.send_fragment(f, now,
                               self._key(conn, f.conversation_id, f.from_initiator))
        except WireError as exc:  # over the next hop's max_body, or not encodable
            self._dropped([Dropped(f, "refused by the next hop", str(exc), conn.address)])

    def _relay_notice(self, n: frames.Notice, path: ReturnPath) -> None:
        back = self._return_connection(path)
        if back is None or back.core is None:
            return  # the sender resends; the next copy's notice finds the way
        back.core.send_notice(frames.sign(replace(n, key_id=self.key_id), self._key(
            back, n.conversation_id, n.about_initiator)), self.clock())
        self._flush(back)

    def _return_connection(self, path: ReturnPath) -> Conn | None:
        """The connection back to the adjacent broker of a return path: the one the
        fragments came on, else one to that broker's endpoint (None: the sender resends,
        and the next copy finds the way)."""
        conn = self._conns.get(path.connection)
        if conn is not None and not conn.closed:
            return conn
        with contextlib.suppress(WireError):
            conn = self._outbound.get(next_hop(path.address))
            if conn is not None and not conn.closed:
                return conn
        return None

    def _dropped(self, dropped: list[Dropped]) -> None:
        for d in dropped:
            f = d.fragment
            self.sink.event("Broker:Forwarded Message Dropped", d.reason, d.next_hop,
                            f.conversation_id, f.sequence,
                            f"fragment {f.fragment_number} of message {f.sequence} from "
                            f"{f.from_service!r} to {f.to_service!r} was not forwarded: "
                            f"{d.description}; its sender sends it again")

    def _arm_forwarding(self) -> None:
        """While anything is held: once a second, drop what ran out of time (R7.1) and
        wake the connections of next hops with fragments waiting."""
        if self._forward_timer is None and self.forwarder.held_bytes and not self._closed:
            self._forward_timer = self._loop.call_later(FORWARD_TICK, self._forward_tick)

    def _forward_tick(self) -> None:
        self._forward_timer = None
        self._dropped(self.forwarder.handle_timer(self.clock()))
        for hop in self.forwarder.next_hops():
            self._kick(hop)
        self._arm_forwarding()

    async def _forwarded(self) -> list[tuple[Any, ...]]:
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
