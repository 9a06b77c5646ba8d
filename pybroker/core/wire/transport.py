"""The broker endpoint's I/O (P2): the only code that touches sockets, TLS and the clock.

asyncio runs in a background thread of the instance. The listener accepts connections from
adjacent brokers; outbound connections are opened on demand, one per next-hop address,
shared by every conversation, and closed after an idle period. Each connection upgrades to
mutual TLS 1.3 (certificates pinned to the trusted ones: only validity dates are checked,
as in SQL Server), then runs an ``AdjacentConnection`` (sans-I/O) fed with the decrypted
bytes. Fragments to send come from the ``Transmitter``, round robin across conversations.

What arrives (fragments, acknowledgements, notices, status changes, events) goes to a sink
that runs in another thread (the engine's writer): the event loop never waits for DuckDB.

The transport composes two services that run on its event loop thread: forwarding's I/O
(R7, ``ForwardingIO`` in transport_forwarding.py) and mirrored routes' (R9, ``MirroringIO``
in transport_mirroring.py). Each is given the connections, the sink and the few transport
actions it calls (wake a next hop, flush a connection, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pybroker.core.wire import certificates, frame_macs, frame_types, frames
from pybroker.core.wire.addresses import next_hop, parse_address
from pybroker.core.wire.adjacent import (
    AcksReceived,
    AdjacentConnection,
    ConnectionClosed,
    FragmentReceived,
    NoticeReceived,
    PeerHello,
    ProbeReceived,
)
from pybroker.core.wire.dialog import Acknowledged, Transmitter, backoff
from pybroker.core.wire.forwarding import Forwarder
from pybroker.core.wire.mirrored_route import NOT_PRINCIPAL_CODE, MirroredRoutes, is_pair_key
from pybroker.core.wire.transport_connections import Connection, Connections, report_corrupted
from pybroker.core.wire.transport_forwarding import ForwardingIO
from pybroker.core.wire.transport_mirroring import MirroringIO
from pybroker.core.wire.transport_settings import (
    CLOSED_BEFORE_LOGIN,
    NOT_TRUSTED,
    READ_ERROR,
    TLS_HANDSHAKE,
    Identity,
    Settings,
    Sink,
    WireCounts,
)
from pybroker.core.wire.transport_sockets import describe, peer_text, why_not_listening
from pybroker.core.wire.transport_trust import Trust
from pybroker.errors import WireError

READ_SIZE = 256 * 1024


HIGH_WATER = 4 * 2**20  # bytes buffered for a socket before the sender waits (flow control)
LIVENESS_INTERVAL = 1.0  # seconds between liveness checks while anything is in flight


class Transport:
    """A broker endpoint's sockets: ``start``, the calls the engine makes from any thread
    (``submit``, ``reply``, ``forward``, ``answer_probe``, ...), ``close``."""

    def __init__(self, sink: Sink, identity: Identity, trusted: dict[str, str],
                 settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self.sink = sink
        self.identity = identity
        self.settings = settings
        self.clock = clock
        info = certificates.certificate_info(identity.certificate)
        self.key_id = info.key_id
        self.instance_id = identity.instance_id
        self.transmitter = Transmitter(fragment_size=settings.fragment_size,
                                       retry_scale=settings.retry_scale)
        self.forwarder = Forwarder(limit=settings.forwarding_limit)
        self.mirrors = MirroredRoutes(retry_scale=settings.retry_scale,
                                      probe_timeout=settings.probe_timeout)
        self.trust_store = Trust(identity, trusted)
        self.connections = Connections()
        self._failures: dict[str, tuple[int, float]] = {}  # next hop -> (failures, until)
        self._redials: dict[str, int] = {}  # next hop -> connection attempts scheduled
        # since the start, for /metrics: logins refused by kind (LOGIN_REFUSALS), outbound
        # connection attempts that failed
        self.logins_refused: Counter[str] = Counter()
        self.connect_failures = 0
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="pybroker-endpoint",
                                        daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._closed = False
        self.port = settings.port
        self.mirroring = MirroringIO(
            self.mirrors, self.transmitter, self.connections, sink, key_id=self.key_id,
            clock=clock, loop=self._loop, closed=self._is_closed, kick=self._kick,
            flush=self._flush, dial=self._ensure_outbound, arm_retries=self._arm)
        self.forwarding = ForwardingIO(
            self.forwarder, self.connections, sink, key_id=self.key_id, clock=clock,
            loop=self._loop, closed=self._is_closed, kick=self._kick, flush=self._flush,
            principal_for=self.mirroring.forward_principal)

    @property
    def address(self) -> str:
        return f"tcp://{self.settings.host}:{self.port}"

    def _is_closed(self) -> bool:
        return self._closed

    # -- lifecycle (any thread) -------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        try:
            future.result(timeout=30)
        except OSError as exc:
            self._stop_loop()
            raise WireError(
                f"cannot start the broker endpoint on {self.settings.host}:"
                f"{self.settings.port}: {why_not_listening(self.settings.host, exc)}"
            ) from None
        except BaseException:
            self._stop_loop()
            raise

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, self.settings.host, self.settings.port, limit=READ_SIZE,
            reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
        self._stop_loop()

    def _stop_loop(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)
        with contextlib.suppress(Exception):
            self._loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections.by_id.values()):
            self._close(conn, "the endpoint is closing", error=False)
        await asyncio.sleep(0)
        # connections still logging in or connecting end here, not as "Task was destroyed
        # but it is pending!" on stderr when the loop stops
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)

    # -- calls from the engine (any thread) -------------------------------------------

    def submit(self, items: list[tuple[str, str, frames.MessageFragment]]) -> None:
        self._call(self._submit, items)

    def forget(self, conversation_id: str, from_initiator: bool) -> None:
        self._call(self._forget, conversation_id, from_initiator)

    def reply(self, connection: int, acks: list[frame_types.AckEntry],
              notices: list[frames.Notice], answered: int = 0) -> None:
        """Acknowledgements and notices for ``answered`` arrivals of ``connection``."""
        self._call(self._reply, connection, acks, notices, answered)

    def is_own_address(self, address: str) -> bool:
        """R7.2: whether ``address`` is this endpoint's own (its port, on this host)."""
        try:
            host, port = parse_address(address)
        except WireError:
            return False
        local = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
        mine = self.settings.host
        return port == self.port and (host == mine or (host in local and mine in local))

    def trust(self, trusted: dict[str, str]) -> None:
        """The trusted certificates changed: new connections use the new set, and
        connections of peers no longer trusted are closed."""
        self._call(self._retrust, trusted)

    def forward(self, items: list[tuple[int, str, frames.MessageFragment, str]]) -> None:
        """Pass arrivals on (R7): (connection it came on, peer, fragment, next hop's
        address), as the engine's routing decided (msdb's table, R1.2)."""
        self._call(self.forwarding.forward, items)

    def set_forwarding_limit(self, limit: int) -> None:
        """R7.3: the bytes forwarded messages may hold from now on."""
        self._call(setattr, self.forwarder, "limit", limit)

    def answer_probe(self, connection: int, probe: frames.Probe, role: str) -> None:
        """Answer a question that came on ``connection``: ``role`` is PRINCIPAL, MIRROR, or
        "" when no database here has the service (and broker identifier)."""
        self._call(self.mirroring.answer_probe, connection, probe, role)

    def snapshot(self) -> list[tuple[Any, ...]]:
        """Rows of sys.dm_broker_connections."""
        return self._on_loop(lambda: self.connections.rows(self.settings.encryption))

    def counts(self) -> WireCounts | None:
        """The endpoint's counters now, read on the event loop as the rows are (None once
        closed)."""
        read = self._on_loop(lambda: [(self._counts(),)])
        return read[0][0] if read else None

    def _counts(self) -> WireCounts:
        return WireCounts(
            self.transmitter.fragments_sent, self.transmitter.fragments_resent,
            self.forwarder.forwarded, dict(self.logins_refused), self.connect_failures,
            self.connections.peers())

    def forwarded(self) -> list[tuple[Any, ...]]:
        """Rows of sys.dm_broker_forwarded_messages: what is held right now."""
        return self._on_loop(self.forwarding.rows)

    def mirrored_routes(self) -> list[tuple[Any, ...]]:
        """Rows of sys.dm_broker_mirrored_routes: every mirrored pair used since start."""
        return self._on_loop(self.mirroring.rows)

    def _on_loop(self, rows: Callable[[], list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
        """``rows()`` run on the event loop thread (no rows once closed or on a timeout)."""
        if self._closed:
            return []

        async def call() -> list[tuple[Any, ...]]:
            return rows()

        future: Any = asyncio.run_coroutine_threadsafe(call(), self._loop)
        try:
            return future.result(timeout=5)
        except Exception:
            return []

    def _call(self, fn: Callable[..., Any], *args: Any) -> None:
        if not self._closed:
            with contextlib.suppress(RuntimeError):  # the loop has stopped
                self._loop.call_soon_threadsafe(fn, *args)

    # -- trust -------------------------------------------------------------------------

    def _retrust(self, trusted: dict[str, str]) -> None:
        self.trust_store.replace(trusted)
        for conn in list(self.connections.by_id.values()):
            if conn.trusted_name is not None and conn.secret and not (
                    self.trust_store.is_trusted(conn.peer_key_id)):
                self._close(conn, "the peer is no longer trusted", error=True)

    # -- connections (event loop thread) ----------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        peer = peer_text(writer)
        if len(self.connections) >= self.settings.max_connections:
            self.sink.event("Broker:Connection", "Connect Failed", peer, None, None,
                            f"refused: the endpoint already has {len(self.connections)} "
                            "connections (its limit)")
            writer.close()
            return
        conn = Connection(next(self._ids), True, peer, writer)
        self.connections.by_id[conn.conn_id] = conn
        self.sink.event("Broker:Connection", "Accept", peer, None, None,
                        "accepted a connection")
        with contextlib.suppress(asyncio.CancelledError):  # the endpoint closes (3.11's
            await self._serve(conn, reader, server=True)  # streams log a cancelled task)

    def _ensure_outbound(self, address: str) -> None:
        c = self.connections
        if address in c.outbound or address in c.connecting or self._closed:
            return
        _failures, until = self._failures.get(address, (0, 0.0))
        now = self.clock()
        if now < until:  # not hammered: back off per destination
            self._redial_later(address, until - now)
            return
        c.connecting.add(address)
        self._loop.create_task(self._connect(address))

    def _redial_later(self, address: str, wait: float) -> None:
        """A connection attempt to ``address`` in ``wait`` seconds (counted: the liveness
        check knows it is pending)."""
        self._redials[address] = self._redials.get(address, 0) + 1
        self._loop.call_later(wait, self._redial, address)

    def _redial(self, address: str) -> None:
        left = self._redials.pop(address, 1) - 1
        if left > 0:
            self._redials[address] = left
        self._ensure_outbound(address)

    async def _connect(self, address: str) -> None:
        peer = address
        self.sink.event("Broker:Connection", "Connecting", peer, None, None,
                        f"connecting to {address}")
        try:
            host, port = parse_address(address)
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=READ_SIZE),
                self.settings.connect_timeout)
        except (TimeoutError, OSError, WireError) as exc:
            self.connections.connecting.discard(address)
            self._connect_failed(address, describe(exc))
            return
        conn = Connection(next(self._ids), False, peer_text(writer), writer, address=address)
        self.connections.by_id[conn.conn_id] = conn
        self.connections.connecting.discard(address)
        self.connections.outbound[address] = conn
        await self._serve(conn, reader, server=False)

    def _connect_failed(self, address: str, reason: str) -> None:
        failures, _ = self._failures.get(address, (0, 0.0))
        failures += 1
        self.connect_failures += 1
        wait = backoff(failures - 1, self.settings.retry_scale)
        self._failures[address] = (failures, self.clock() + wait)
        self.sink.event("Broker:Connection", "Connect Failed", address, None, None, reason)
        self.forwarding.dropped(self.forwarder.drop_hop(address, reason))
        self.mirroring.unreachable(address, reason)
        self.sink.status(self.transmitter.handles(address),
                         f"Connection attempt failed with error: '{reason}'.")
        if self.transmitter.has_work(address) or self.transmitter.handles(address):
            self._redial_later(address, wait)

    async def _serve(self, conn: Connection, reader: asyncio.StreamReader, *, server: bool) -> None:
        try:
            if self.settings.encryption:
                trust = self.trust_store
                context = trust.server_context if server else trust.client_context
                assert context is not None
                try:
                    await conn.writer.start_tls(
                        context, server_hostname=None,
                        ssl_handshake_timeout=self.settings.handshake_timeout)
                except (TimeoutError, OSError, ssl.SSLError, ConnectionError) as exc:
                    self._login_failed(conn, describe(exc), TLS_HANDSHAKE)
                    return
                sslobj = conn.writer.get_extra_info("ssl_object")
                info = self.trust_store.of_certificate(
                    sslobj.getpeercert(binary_form=True) if sslobj else None)
                if info is None:
                    self._login_failed(conn, "the peer's certificate is not trusted here",
                                       NOT_TRUSTED)
                    return
                self._admit(conn, info)
            hello = frames.Hello(self.instance_id, self.identity.broker_instances,
                                 self.settings.max_body, self.address, self.key_id)
            s = self.settings
            conn.core = AdjacentConnection(
                is_accept=server, hello=hello, now=self.clock(),
                sign_ack=lambda entry, c=conn: frame_macs.sign(entry, c.key(
                    entry.conversation_id, entry.acks_initiator)),
                handshake_timeout=s.handshake_timeout, idle_timeout=s.idle_timeout,
                keepalive_interval=s.keepalive_interval, ack_delay=s.ack_delay,
                max_body=s.max_body)
            self._flush(conn)
            pump = self._loop.create_task(self._pump(conn))
            try:
                while not conn.closed:
                    try:
                        data = await reader.read(READ_SIZE)
                    except (OSError, ssl.SSLError, ConnectionError) as exc:
                        if conn.core.peer is None:
                            self._login_failed(conn, describe(exc), READ_ERROR)
                        else:
                            self.sink.event("Broker:Connection", "Receive IO Error",
                                            conn.peer_address, None, None, describe(exc))
                        data = b""
                    if not data and conn.core.peer is None and not conn.closed:
                        # TLS 1.3: the client's handshake ends before the server checks the
                        # client's certificate, so a peer that does not trust this instance
                        # shows as a close before its HELLO: a login failure (status, event,
                        # growing back-off), not an ordinary close
                        self._login_failed(conn, "the peer closed the connection before "
                                           "logging in", CLOSED_BEFORE_LOGIN)
                        break
                    conn.core.receive_data(data, self.clock())
                    self._process(conn)
                    if not data:
                        break
            finally:
                pump.cancel()
        finally:
            self._close(conn, "connection ended", error=False, quiet=True)

    def _admit(self, conn: Connection, info: certificates.CertificateInfo) -> None:
        conn.trusted_name = self.trust_store.name_of(info)
        conn.peer_key_id = info.key_id
        conn.secret = self.trust_store.secret(info)
        conn.state = "CONNECTED"

    def _login_failed(self, conn: Connection, reason: str, kind: str) -> None:
        self.logins_refused[kind] += 1
        self.sink.event("Audit Broker Login", "Authentication Failure", conn.peer_address,
                        None, None, reason)
        if conn.address is not None:
            text = (f"Connection attempt failed with error: 'the peer did not accept this "
                    f"instance or is not trusted here: {reason}'.")
            failures, _ = self._failures.get(conn.address, (0, 0.0))
            wait = backoff(failures, self.settings.retry_scale)
            self._failures[conn.address] = (failures + 1, self.clock() + wait)
            self.sink.status(self.transmitter.handles(conn.address), text)
            self.forwarding.dropped(self.forwarder.drop_hop(conn.address, reason))
            self.mirroring.unreachable(conn.address, reason)
            self._redial_later(conn.address, wait)
        self._close(conn, reason, error=True, quiet=True)

    def _close(self, conn: Connection, reason: str, *, error: bool, quiet: bool = False) -> None:
        if conn.closed:
            return
        conn.closed = True
        conn.state = "CLOSED"
        if conn.core is not None and conn.core.state != "CLOSED":
            conn.core.close(reason, self.clock())
            with contextlib.suppress(Exception):
                conn.writer.write(conn.core.data_to_send())
        with contextlib.suppress(Exception):
            conn.writer.close()
        if conn.timer is not None:
            conn.timer.cancel()
        conn.wake.set()
        self.connections.by_id.pop(conn.conn_id, None)
        if conn.address is not None and self.connections.outbound.get(conn.address) is conn:
            del self.connections.outbound[conn.address]
            if self.transmitter.has_work(conn.address) or self.transmitter.handles(
                    conn.address) or self.forwarder.has_work(conn.address):
                # reconnect for what is in flight, after the disconnect pause (scaled)
                self._redial_later(conn.address, min(15.0, backoff(0, self.settings.retry_scale)))
        if not quiet or conn.core is not None:
            self.sink.event("Broker:Connection", "Closed", conn.peer_address, None, None,
                            reason)

    def _process(self, conn: Connection) -> None:
        core = conn.core
        assert core is not None
        arrived: list[frames.MessageFragment] = []  # handed to the sink together
        while (event := core.next_event()) is not None:
            if isinstance(event, FragmentReceived):
                self._fragment(conn, event.fragment, arrived)
                continue
            if arrived:  # what came before this event is handed on before it
                self.sink.arrived(conn.conn_id, conn.peer_address, arrived)
                arrived = []
            if isinstance(event, AcksReceived):
                self._acks(conn, event.entries)
            elif isinstance(event, NoticeReceived):
                n = event.notice
                if n.key_id != conn.peer_key_id or not frame_macs.verify(
                        n, conn.key(n.conversation_id, n.about_initiator)):
                    report_corrupted(self.sink, conn, n.conversation_id, n.sequence,
                                     "notice")
                    continue
                path = self.forwarder.return_path(n.conversation_id, n.about_initiator)
                if path is not None:  # R7: for a sender behind this forwarder
                    if n.code == NOT_PRINCIPAL_CODE:  # R9.3: msdb's mirrored route learns
                        self.mirroring.refused(conn, n)
                    self.forwarding.relay_notice(n, path)
                    continue
                if n.is_fatal:
                    self._forget(n.conversation_id, n.about_initiator)
                elif n.code == NOT_PRINCIPAL_CODE:  # R9.3: the partner may be principal now
                    self.mirroring.refused(conn, n)
                self.sink.notice(n, conn.peer_address)
            elif isinstance(event, ProbeReceived):
                self.mirroring.probe_received(conn, event.probe)
            elif isinstance(event, PeerHello):
                if not self.settings.encryption:
                    info = self.trust_store.of_key_id(event.hello.key_id)
                    if info is None:
                        self._login_failed(conn, "the peer's certificate is not trusted here",
                                           NOT_TRUSTED)
                        return
                    self._admit(conn, info)
                conn.state = "CONNECTED"
                self.sink.event("Broker:Connection", "Connected", conn.peer_address, None,
                                None, f"logged in as {conn.trusted_name}")
                if conn.address is not None:
                    self._failures.pop(conn.address, None)
                elif event.hello.address and self.settings.encryption:
                    # P2: one connection per peer serves both ways. Not without TLS: there a
                    # HELLO proves nothing (key ids are public), and a liar naming a peer's
                    # address would become our path to that peer
                    with contextlib.suppress(WireError):
                        hop = next_hop(event.hello.address)
                        c = self.connections
                        if hop not in c.outbound and hop not in c.connecting:
                            conn.address = hop
                            c.outbound[hop] = conn
                            self._failures.pop(hop, None)
                self.mirroring.logged_in(conn)
                conn.wake.set()
            elif isinstance(event, ConnectionClosed):
                if event.error:
                    self.sink.event("Broker:Connection", "Closing", conn.peer_address, None,
                                    None, event.reason)
                self._close(conn, event.reason, error=event.error)
        if arrived:
            self.sink.arrived(conn.conn_id, conn.peer_address, arrived)
        self._flush(conn)

    def _fragment(self, conn: Connection, f: frames.MessageFragment,
                  arrived: list[frames.MessageFragment]) -> None:
        """A MESSAGE frame received: into ``arrived`` (for the sink) if it checks out."""
        if f.key_id != conn.peer_key_id:
            self.sink.event("Broker:Message Undeliverable", "not forwarded", conn.peer_address,
                            f.conversation_id, f.sequence,
                            "the message was signed by another instance than the adjacent "
                            "one (a forwarder signs what it passes on): discarded")
            return
        if not frame_macs.verify(f, conn.key(f.conversation_id, f.from_initiator)):
            report_corrupted(self.sink, conn, f.conversation_id, f.sequence,
                             "message fragment")
            return
        conn.core.outstanding += 1  # type: ignore[union-attr]
        arrived.append(f)

    def _acks(self, conn: Connection, entries: tuple[frame_types.AckEntry, ...]) -> None:
        done: list[Acknowledged] = []
        relayed: set[Connection] = set()
        for entry in entries:
            if entry.key_id != conn.peer_key_id or not frame_macs.verify(
                    entry, conn.key(entry.conversation_id, entry.acks_initiator)):
                report_corrupted(self.sink, conn, entry.conversation_id,
                                 entry.through_sequence, "acknowledgement")
                continue
            path = self.forwarder.return_path(entry.conversation_id, entry.acks_initiator)
            if path is not None:  # R7.3: only the final destination acknowledges; relayed
                back = self.connections.back_to(path.connection, path.address)
                if back is not None and back.core is not None:
                    # merged with what waits for that connection, signed when it leaves
                    back.core.queue_acks([replace(entry, key_id=self.key_id)], self.clock())
                    relayed.add(back)
                continue
            done += self.transmitter.on_ack(entry)
        for back in relayed:
            self._flush(back)
        if done:
            self.sink.acknowledged(done)
        for address in self.transmitter.addresses():  # the window may have opened
            if self.transmitter.has_work(address):
                self._kick(address)

    # -- sending ------------------------------------------------------------------------

    def _submit(self, items: list[tuple[str, str, frames.MessageFragment]]) -> None:
        hops: set[str] = set()
        parked: dict[str, list[str]] | None = None  # mirrored pair -> handles that wait
        for handle, address, message in items:
            try:
                if is_pair_key(address):  # R9: a mirrored route's, to its principal
                    hop = self.mirroring.submit(address, message)
                    if hop == address:
                        parked = parked or {}
                        parked.setdefault(hop, []).append(handle)
                else:
                    hop = next_hop(address)
            except WireError as exc:
                self.sink.status([handle], f"Connection attempt failed with error: '{exc}'.")
                continue
            self.transmitter.submit(handle, hop, message)
            hops.add(hop)
        for hop in hops:
            self._kick(hop)
        if parked is not None:
            self.mirroring.parked(parked)
        self._arm()

    def _forget(self, conversation_id: str, from_initiator: bool) -> None:
        self.transmitter.forget(conversation_id, from_initiator)
        for address in self.transmitter.addresses():  # its bytes in flight left the window
            if (conn := self.connections.to(address)) is not None:
                conn.wake.set()

    def _kick(self, address: str) -> None:
        if is_pair_key(address):
            return  # a mirrored pair with no principal known: its probes' timer drives it
        conn = self.connections.to(address)
        if conn is None:
            self._ensure_outbound(address)
        else:
            conn.wake.set()

    def _reply(self, connection: int, acks: list[frame_types.AckEntry],
               notices: list[frames.Notice], answered: int) -> None:
        conn = self.connections.get(connection)
        if conn is None or conn.core is None or conn.closed:
            return  # gone: the sender resends, and the next copy is acknowledged (P3.3)
        conn.core.outstanding = max(0, conn.core.outstanding - answered)
        now = self.clock()
        if acks:
            conn.core.queue_acks(acks, now)
        for notice in notices:
            conn.core.send_notice(frame_macs.sign(notice, conn.key(
                notice.conversation_id, notice.about_initiator)), now)
        self._flush(conn)

    async def _pump(self, conn: Connection) -> None:
        """Fragments to this connection's next hop, while the socket keeps up."""
        transport = conn.writer.transport
        while not conn.closed:
            await conn.wake.wait()
            conn.wake.clear()
            core = conn.core
            if core is None or core.peer is None or conn.closed or conn.address is None:
                continue
            while not conn.closed and not transport.is_closing():
                now = self.clock()
                sent = 0
                while transport.get_write_buffer_size() < HIGH_WATER:
                    if self.forwarder.has_work(conn.address):  # held in memory: first
                        self.forwarding.send_next(conn, core, now)
                        sent += 1
                        continue
                    f = self.transmitter.next_fragment(conn.address, now)
                    if f is None:
                        break
                    core.send_fragment(f, now, conn.key(  # signed while encoded
                        f.conversation_id, f.from_initiator))
                    sent += 1
                    # handed on every 64 frames, or sooner when large: fragments of 1 MiB
                    # encoded up to the window (32 MiB) before one write held the window
                    # about three times over (frames, their join, TLS's copy)
                    if sent % 64 == 0 or core.outgoing_bytes >= HIGH_WATER:
                        self._flush(conn)
                self._flush(conn)
                self._arm()
                if transport.get_write_buffer_size() < HIGH_WATER:
                    break
                conn.flow_controlled = True
                try:
                    await conn.writer.drain()
                except (OSError, ConnectionError):
                    break
                conn.flow_controlled = False

    def _flush(self, conn: Connection) -> None:
        core = conn.core
        if core is None:
            return
        if conn.address is not None:
            core.awaiting = self.transmitter.has_dialogs(conn.address)
        data = core.data_to_send()
        if data and not conn.writer.is_closing():
            conn.writer.write(data)
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None
        when = core.get_timer()
        if when is not None and not conn.closed:
            conn.timer = self._loop.call_later(max(0.0, when - self.clock()),
                                               self._conn_timer, conn)
        if core.state == "CLOSED" and not conn.closed:
            self._close(conn, "closed", error=False)

    def _conn_timer(self, conn: Connection) -> None:
        conn.timer = None
        if conn.core is not None and not conn.closed:
            conn.core.handle_timer(self.clock())
            self._process(conn)

    def _arm(self) -> None:
        """One timer for every fragment's retransmission (P5.3), and one for the liveness
        check while anything is in flight."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        when = self.transmitter.get_timer()
        if when is not None:
            self._timer = self._loop.call_later(max(0.0, when - self.clock()), self._retry)
        if self._watchdog is None and self.transmitter.dialogs():
            self._watchdog = self._loop.call_later(LIVENESS_INTERVAL, self._watch)

    def _retry(self) -> None:
        self._timer = None
        for address in self.transmitter.handle_timer(self.clock()):
            self._kick(address)
        self._arm()

    def _watch(self) -> None:
        """Liveness (P5.3, C5): a next hop with unacknowledged messages always has a
        retransmission timer, or fragments ready to send and a connection to send them on,
        open, being made or to be retried. Checked once a second while anything is in
        flight (cheap: see Transmitter.stalled_hops); a breach is recorded as a broker event
        and repaired at once, not left to stall."""
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog = None
        if self._closed:
            return
        t = self.transmitter
        for hop in t.stalled_hops():
            if is_pair_key(hop):
                continue  # waits for a principal (R9.4): its probes' timer drives it
            found = t.repair(hop) or ["no fragment was ready and none awaited its "
                                      "acknowledgement"]
            self._breach(hop, "; ".join(found))
        if self._timer is None and t.get_timer() is not None:
            self._breach(None, "a retransmission was due with no timer armed")
        for hop in t.addresses():
            conn = self.connections.to(hop)
            if is_pair_key(hop):
                continue
            if conn is None:
                if (hop not in self.connections.connecting and not self._redials.get(hop)
                        and t.ready(hop)):
                    self._breach(hop, "fragments were ready with no connection attempt")
            elif (conn.core is not None and conn.core.peer is not None and not conn.closed
                  and not conn.writer.is_closing() and not conn.flow_controlled
                  and not conn.wake.is_set() and t.ready(hop)):
                self._breach(hop, "fragments were ready and the connection's sender idle")
        self._arm()

    def _breach(self, hop: str | None, what: str) -> None:
        self.sink.event("Broker:Transmission", "Liveness Repaired", hop, None, None,
                        f"the sender would have stalled: {what}")
        if hop is not None:
            self._kick(hop)
