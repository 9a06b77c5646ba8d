"""Mirrored routes' I/O (R9): the service of the transport that asks and answers PROBEs
and moves a mirrored pair's conversations to its principal (mirrored_route.py decides).

The engine hands a mirrored route's messages to the wire under the pair's key
(``pair_key``). While the principal is known they go to its next hop, as any route's do;
until then (and after it stops serving) they wait under the pair's key, sent to nobody,
while both partners are asked (R9.2-R9.4). A question that arrives is answered by the
engine's writer thread (the database's role is in DuckDB): the sink's ``probe``, then
``Transport.answer_probe``. Everything here runs on the transport's event loop thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pybroker.core.wire import frame_macs, frames
from pybroker.core.wire.addresses import next_hop
from pybroker.core.wire.dialog import Transmitter
from pybroker.core.wire.mirrored_route import Change, MirroredRoutes, ProbeOut
from pybroker.core.wire.transport_connections import (
    Connection,
    Connections,
    report_corrupted,
)
from pybroker.core.wire.transport_settings import Sink
from pybroker.errors import WireError
from pybroker.timestamps import optional_utc_datetime

EVENT_CLASS = "Broker:Mirrored Route State Changed"  # trace event 144
STATUS_NO_PRINCIPAL = (
    "The mirrored route's principal is not known: neither {} nor {} has said it is the "
    "principal; nothing is sent until one does (both are asked again).")


class MirroringIO:
    """What the transport does for mirrored routes: send and answer probes, and move each
    pair's conversations when its principal changes."""

    def __init__(self, mirrors: MirroredRoutes, transmitter: Transmitter,
                 connections: Connections, sink: Sink, *, key_id: bytes,
                 clock: Callable[[], float], loop: asyncio.AbstractEventLoop,
                 closed: Callable[[], bool], kick: Callable[[str], None],
                 flush: Callable[[Connection], None], dial: Callable[[str], None],
                 arm_retries: Callable[[], None]) -> None:
        """``kick(hop)`` wakes (or opens) the connection to a next hop, ``flush(conn)``
        writes what a connection's core has to send, ``dial(hop)`` opens a connection to
        ``hop`` unless one is open or being made, ``arm_retries()`` re-arms the
        retransmission timer (after conversations moved)."""
        self.mirrors = mirrors
        self.transmitter = transmitter
        self.connections = connections
        self.sink = sink
        self.key_id = key_id
        self.clock = clock
        self.loop = loop
        self.closed = closed
        self.kick = kick
        self.flush = flush
        self.dial = dial
        self.arm_retries = arm_retries
        self._timer: asyncio.TimerHandle | None = None
        self._waiting: dict[str, list[ProbeOut]] = {}  # next hop -> probes for its login

    def submit(self, key: str, message: frames.MessageFragment) -> str:
        """Where a message on the pair ``key`` goes now: the principal's next hop, or the
        pair's key (it waits there, sent to nobody) while no principal is known."""
        route = self.mirrors.use(key, message.to_service, message.to_broker_instance,
                                 (message.conversation_id, message.from_initiator),
                                 self.clock())
        hop = route.principal_hop or key
        if len(route.dialogs) > route.prune_at:  # P7: memory follows what is in flight
            route.dialogs = self.transmitter.live(route.dialogs) | {
                (message.conversation_id, message.from_initiator)}
            route.prune_at = max(4096, 2 * len(route.dialogs))
        return hop

    def forward_principal(self, key: str, message: frames.MessageFragment) -> str | None:
        """R9 on a forwarder (msdb's route is a mirrored pair): the principal's next hop,
        or None while none is known (both partners are asked now)."""
        dialog = (message.conversation_id, message.from_initiator)
        route = self.mirrors.use(key, message.to_service, message.to_broker_instance, dialog,
                                 self.clock())
        route.dialogs.discard(dialog)  # its sender's, not this instance's: nothing to move
        if route.principal_hop is None:
            self.send_probes()
        return route.principal_hop

    def parked(self, handles: dict[str, list[str]]) -> None:
        """Say why these endpoints' messages wait (pair key -> handles), then ask."""
        for key, waiting in handles.items():
            route = self.mirrors.route(key)
            if route is not None:
                self.sink.status(waiting, STATUS_NO_PRINCIPAL.format(route.address,
                                                                     route.mirror_address))
        self.send_probes()

    def send_probes(self) -> None:
        """The probes due, on each partner's connection (opened if need be)."""
        for probe in self.mirrors.probes_due(self.clock()):
            conn = self.connections.to(probe.hop)
            if conn is not None and conn.logged_in:
                self._send_probe(conn, probe)
            else:
                self._waiting.setdefault(probe.hop, []).append(probe)
                self.dial(probe.hop)
        self._arm()

    def _send_probe(self, conn: Connection, probe: ProbeOut) -> None:
        assert conn.core is not None
        question = frames.Probe(probe.probe_id, probe.service, probe.broker_instance, False,
                                "", self.key_id)
        try:
            conn.core.send_probe(frame_macs.sign(question, conn.key(probe.probe_id, True)),
                                 self.clock())
        except WireError:  # a service name no frame can carry: it times out, and is asked
            return  # again (the route's messages cannot go either)
        self.flush(conn)

    def logged_in(self, conn: Connection) -> None:
        """``conn`` logged in: the probes that waited for it go now."""
        if conn.address is not None:
            for probe in self._waiting.pop(conn.address, []):
                self._send_probe(conn, probe)

    def probe_received(self, conn: Connection, probe: frames.Probe) -> None:
        """A question (for the sink: the engine knows the database's role) or an answer."""
        if probe.key_id != conn.peer_key_id or not frame_macs.verify(
                probe, conn.key(probe.probe_id, not probe.is_answer)):
            report_corrupted(self.sink, conn, probe.probe_id, 0, "probe")
            return
        if probe.is_answer:
            self._changes(self.mirrors.on_answer(probe.probe_id, probe.role, self.clock()))
            self.send_probes()
        else:
            self.sink.probe(conn.conn_id, probe)

    def answer_probe(self, connection: int, probe: frames.Probe, role: str) -> None:
        """Answer a question that came on ``connection`` with ``role``."""
        conn = self.connections.get(connection)
        if conn is None or conn.closed or conn.core is None:
            return  # gone: the question times out and is asked again
        answer = frames.Probe(probe.probe_id, probe.service, probe.broker_instance, True,
                              role, self.key_id)
        conn.core.send_probe(frame_macs.sign(answer, conn.key(probe.probe_id, False)),
                             self.clock())
        self.flush(conn)

    def unreachable(self, hop: str, why: str) -> None:
        """``hop`` could not be reached (a connection attempt or login failed)."""
        self._waiting.pop(hop, None)
        self._changes(self.mirrors.on_unreachable(hop, self.clock(), why))
        self.send_probes()

    def refused(self, conn: Connection, notice: frames.Notice) -> None:
        """A refusal from a MIRROR database: its partner may be principal now (R9.3)."""
        hop = conn.address
        if hop is None and conn.core is not None and conn.core.peer is not None:
            try:
                hop = next_hop(conn.core.peer.address)
            except WireError:
                return
        if hop is not None:
            self._changes(self.mirrors.on_not_principal(hop, self.clock(), notice.text))
            self.send_probes()

    def _changes(self, changes: list[Change]) -> None:
        """Each pair whose principal changed: its conversations go to the new one (what
        they have in flight with them), or wait under the pair's key, sent to nobody."""
        for c in changes:
            route = self.mirrors.route(c.key)
            if route is None:
                continue
            kept = self.transmitter.move(route.dialogs, c.hop or c.key)
            self.mirrors.forget_dialogs(c.key, kept)
            if c.hop is not None and kept:  # they leave now: nothing to explain any more
                self.sink.status(list(kept.values()), "")
            self.sink.event(EVENT_CLASS, c.state, c.principal, None, None,
                            f"mirrored route {route.address} / {route.mirror_address} "
                            f"(service {route.service!r}): {c.state.lower()}: {c.why}")
            if c.hop is not None:
                self.kick(c.hop)
            else:
                self.sink.status(self.transmitter.handles(c.key), STATUS_NO_PRINCIPAL.format(
                    route.address, route.mirror_address))
        if changes:
            self.arm_retries()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        when = self.mirrors.get_timer()
        if when is not None and not self.closed():
            self._timer = self.loop.call_later(max(0.0, when - self.clock()), self._tick)

    def _tick(self) -> None:
        self._timer = None
        self._changes(self.mirrors.handle_timer(self.clock()))
        self.send_probes()

    def rows(self) -> list[tuple[Any, ...]]:
        """Rows of sys.dm_broker_mirrored_routes: every mirrored pair used since start."""
        rows = []
        for r in self.mirrors.routes():
            rows.append((
                r.address, r.mirror_address, r.service, r.broker_instance, r.state,
                r.principal_address, optional_utc_datetime(r.since),
                optional_utc_datetime(r.last_probe_time),
                r.answers.get(0), r.answers.get(1)))
        return rows
