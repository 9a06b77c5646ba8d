"""Mirrored routes' I/O (R9): the side of the transport that asks and answers PROBEs and
moves a mirrored pair's conversations to its principal (mirrored_route.py decides).

The engine hands a mirrored route's messages to the wire under the pair's key
(``pair_key``). While the principal is known they go to its next hop, as any route's do;
until then (and after it stops serving) they wait under the pair's key, sent to nobody,
while both partners are asked (R9.2-R9.4). A question that arrives is answered by the
engine's writer thread (the database's role is in DuckDB): the sink's ``probe``, then
``answer_probe``. ``Transport`` takes these methods from ``MirroringIO``; they run on its
event loop thread (but for the public calls, which any thread may make).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pybroker.errors import WireError
from pybroker.timestamps import optional_utc_datetime
from pybroker.wire import frames
from pybroker.wire.addresses import next_hop
from pybroker.wire.dialog import Transmitter
from pybroker.wire.mirrored_route import Change, MirroredRoutes, ProbeOut
from pybroker.wire.transport_host import Conn, TransportHost

EVENT_CLASS = "Broker:Mirrored Route State Changed"  # trace event 144
STATUS_NO_PRINCIPAL = (
    "The mirrored route's principal is not known: neither {} nor {} has said it is the "
    "principal; nothing is sent until one does (both are asked again).")


class MirroringIO(TransportHost):
    """The mirrored-route methods of ``Transport`` (transport.py)."""

    # what the transport provides
    mirrors: MirroredRoutes
    transmitter: Transmitter
    _mirror_timer: asyncio.TimerHandle | None
    _probes_waiting: dict[str, list[ProbeOut]]

    if TYPE_CHECKING:  # pragma: no cover
        def _ensure_outbound(self, address: str) -> None: ...

        def _arm(self) -> None: ...

        def _corrupted(self, conn: Conn, conversation_id: str, sequence: int,
                       what: str) -> None: ...

    # -- calls from the engine (any thread) -------------------------------------------

    def answer_probe(self, connection: int, probe: frames.Probe, role: str) -> None:
        """Answer a question that came on ``connection``: ``role`` is PRINCIPAL, MIRROR, or
        "" when no database here has the service (and broker identifier)."""
        self._call(self._answer_probe, connection, probe, role)

    def mirrored_routes(self) -> list[tuple[Any, ...]]:
        """Rows of sys.dm_broker_mirrored_routes: every mirrored pair used since start."""
        if self._closed:
            return []
        future: Any = asyncio.run_coroutine_threadsafe(self._mirrored_rows(), self._loop)
        try:
            return future.result(timeout=5)
        except Exception:
            return []

    # -- event loop thread ------------------------------------------------------------

    def _submit_mirrored(self, key: str, message: frames.MessageFragment) -> str:
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

    def _forward_principal(self, key: str, message: frames.MessageFragment) -> str | None:
        """R9 on a forwarder (msdb's route is a mirrored pair): the principal's next hop,
        or None while none is known (both partners are asked now)."""
        dialog = (message.conversation_id, message.from_initiator)
        route = self.mirrors.use(key, message.to_service, message.to_broker_instance, dialog,
                                 self.clock())
        route.dialogs.discard(dialog)  # its sender's, not this instance's: nothing to move
        if route.principal_hop is None:
            self._send_probes()
        return route.principal_hop

    def _parked(self, handles: dict[str, list[str]]) -> None:
        """Say why these endpoints' messages wait (pair key -> handles), then ask."""
        for key, waiting in handles.items():
            route = self.mirrors.route(key)
            if route is not None:
                self.sink.status(waiting, STATUS_NO_PRINCIPAL.format(route.address,
                                                                     route.mirror_address))
        self._send_probes()

    def _send_probes(self) -> None:
        """The probes due, on each partner's connection (opened if need be)."""
        for probe in self.mirrors.probes_due(self.clock()):
            conn = self._outbound.get(probe.hop)
            if conn is not None and not conn.closed and conn.core is not None \
                    and conn.core.peer is not None:
                self._send_probe(conn, probe)
            else:
                self._probes_waiting.setdefault(probe.hop, []).append(probe)
                self._ensure_outbound(probe.hop)
        self._arm_mirrors()

    def _send_probe(self, conn: Conn, probe: ProbeOut) -> None:
        assert conn.core is not None
        question = frames.Probe(probe.probe_id, probe.service, probe.broker_instance, False,
                                "", self.key_id)
        try:
            conn.core.send_probe(frames.sign(question, self._key(conn, probe.probe_id, True)),
                                 self.clock())
        except WireError:  # a service name no frame can carry: it times out, and is asked
            return  # again (the route's messages cannot go either)
        self._flush(conn)

    def _probes_for(self, conn: Conn) -> None:
        """``conn`` logged in: the probes that waited for it go now."""
        if conn.address is not None:
            for probe in self._probes_waiting.pop(conn.address, []):
                self._send_probe(conn, probe)

    def _probe_received(self, conn: Conn, probe: frames.Probe) -> None:
        if probe.key_id != conn.peer_key_id or not frames.verify(
                probe, self._key(conn, probe.probe_id, not probe.is_answer)):
            self._corrupted(conn, probe.probe_id, 0, "probe")
            return
        if probe.is_answer:
            self._mirror_changes(self.mirrors.on_answer(probe.probe_id, probe.role,
                                                        self.clock()))
            self._send_probes()
        else:
            self.sink.probe(conn.conn_id, probe)

    def _answer_probe(self, connection: int, probe: frames.Probe, role: str) -> None:
        conn = self._conns.get(connection)
        if conn is None or conn.closed or conn.core is None:
            return  # gone: the question times out and is asked again
        answer = frames.Probe(probe.probe_id, probe.service, probe.broker_instance, True,
                              role, self.key_id)
        conn.core.send_probe(frames.sign(answer, self._key(conn, probe.probe_id, False)),
                             self.clock())
        self._flush(conn)

    def _mirror_unreachable(self, hop: str, why: str) -> None:
        """``hop`` could not be reached (a connection attempt or login failed)."""
        self._probes_waiting.pop(hop, None)
        self._mirror_changes(self.mirrors.on_unreachable(hop, self.clock(), why))
        self._send_probes()

    def _mirror_refused(self, conn: Conn, notice: frames.Notice) -> None:
        """A refusal from a MIRROR database: its partner may be principal now (R9.3)."""
        hop = conn.address
        if hop is None and conn.core is not None and conn.core.peer is not None:
            try:
                hop = next_hop(conn.core.peer.address)
            except WireError:
                return
        if hop is not None:
            self._mirror_changes(self.mirrors.on_not_principal(hop, self.clock(),
                                                               notice.text))
            self._send_probes()

    def _mirror_changes(self, changes: list[Change]) -> None:
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
                self._kick(c.hop)
            else:
                self.sink.status(self.transmitter.handles(c.key), STATUS_NO_PRINCIPAL.format(
                    route.address, route.mirror_address))
        if changes:
            self._arm()

    def _arm_mirrors(self) -> None:
        if self._mirror_timer is not None:
            self._mirror_timer.cancel()
            self._mirror_timer = None
        when = self.mirrors.get_timer()
        if when is not None and not self._closed:
            self._mirror_timer = self._loop.call_later(max(0.0, when - self.clock()),
                                                       self._mirror_tick)

    def _mirror_tick(self) -> None:
        self._mirror_timer = None
        self._mirror_changes(self.mirrors.handle_timer(self.clock()))
        self._send_probes()

    async def _mirrored_rows(self) -> list[tuple[Any, ...]]:
        rows = []
        for r in self.mirrors.routes():
            rows.append((
                r.address, r.mirror_address, r.service, r.broker_instance, r.state,
                r.principal_address, optional_utc_datetime(r.since),
                optional_utc_datetime(r.last_probe_time),
                r.answers.get(0), r.answers.get(1)))
        return rows
