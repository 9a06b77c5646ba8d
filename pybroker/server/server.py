"""The client server's I/O: a Unix socket beside the instance file (and TCP when asked),
one thread per connected client. ``serve_clients(instance)`` starts it.

Threads, not asyncio, and why: the engine's transaction is per thread (a unit of work is
thread-local and holds its conversation groups, C7, until it ends), so a client's
transaction must begin, run and end on one thread of its own, and a call that waits
(RECEIVE ... WAITFOR, a transaction waiting for another's lock) must not stall the other
clients. A thread per connection gives both with no hand-off; the protocol itself is the
sans-I/O pybroker.api.served.protocol, fed here with what ``recv`` returns.

Time-outs (``timeout``, default 60 s): a frame begun and not finished, a HELLO that does
not come, and a transaction left open longer end the connection or the transaction (rolled
back: what it received is back in the queue, in order). A client that disconnects or dies
inside a transaction is rolled back the same way. At most ``max_clients`` are connected;
one more is refused with a REFUSED frame, as is a TCP client without the server's token
(recorded in sys.broker_events as an Audit Broker Login event).
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import itertools
import os
import secrets
import selectors
import socket
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pybroker.api.instance import Instance
from pybroker.api.served import calls, protocol
from pybroker.api.served.paths import socket_path_for, token_path_for, unix_address
from pybroker.api.served.protocol import Call, FrameReader, Hello
from pybroker.errors import BrokerError, InvalidArgumentError, ServerError
from pybroker.server.session import Session

DEFAULT_TIMEOUT = 60.0  # seconds
DEFAULT_MAX_CLIENTS = 64
HANDSHAKE_TIMEOUT = 10.0  # seconds for a new connection's HELLO (at most ``timeout``)
POLL = 0.25  # seconds between looks at the stop flag and the time-outs
SUMMARY_INTERVAL = 60.0  # seconds between summary lines


def read_or_make_token(path: Path) -> tuple[str, bool]:
    """The token kept in ``path`` (owner-only), made on first need; (token, made now)."""
    with contextlib.suppress(FileNotFoundError):
        info = path.stat()
        if info.st_mode & 0o077:
            raise ServerError(
                f"the client token file {path} can be read by others (mode "
                f"{stat.S_IMODE(info.st_mode):o}); remove it and serve again for a new one")
        token = path.read_text(encoding="ascii").strip()
        if token:
            return token, False
    token = new_token()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # an empty one
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(token + "\n")
    return token, True


def new_token() -> str:
    """A client token for TCP: 32 random bytes, URL-safe, never starting with "-" (so that
    ``--token TOKEN`` on a command line is read as the option's value, not an option)."""
    while (token := secrets.token_urlsafe(32)).startswith("-"):
        pass
    return token


class ClientServer:
    """A running client server: ``socket_path``, ``address`` (TCP, or None), ``token``,
    ``clients`` (how many are connected) and ``close()``."""

    def __init__(
        self,
        instance: Instance,
        *,
        socket_path: str | Path | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        timeout: float = DEFAULT_TIMEOUT,
        max_clients: int = DEFAULT_MAX_CLIENTS,
        max_frame: int = protocol.DEFAULT_MAX_FRAME,
        log: Callable[[str], None] | None = None,
        summary: Callable[[str], None] | None = None,
        summary_interval: float = SUMMARY_INTERVAL,
    ) -> None:
        if not (isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
                and 0 < timeout <= 86_400):
            raise InvalidArgumentError(f"timeout must be seconds in (0, 86400], not {timeout!r}")
        if isinstance(max_clients, bool) or not isinstance(max_clients, int) or max_clients < 1:
            raise InvalidArgumentError(f"max_clients must be a whole number >= 1: {max_clients!r}")
        if port is not None and (isinstance(port, bool) or not isinstance(port, int)
                                 or not 0 <= port <= 65535):
            raise InvalidArgumentError(f"port must be 0-65535 or None, not {port!r}")
        self.instance = instance
        self.timeout = float(timeout)
        self.max_clients = max_clients
        self.max_frame = max_frame
        self.log = log or (lambda line: None)  # one line per event
        self._summary = summary
        self._summary_interval = summary_interval
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._connections: dict[int, _Connection] = {}
        self._ids = itertools.count(1)
        self._stats = {"connected": 0, "refused": 0, "calls": 0}
        # the same counts since the server started (/metrics): they never go back
        self._totals = dict(self._stats)
        # the instance's message counts at the last summary line (what moved since)
        self._counted: dict[str, int] = {}
        self._listeners: list[tuple[socket.socket, str]] = []
        self.socket_path: Path | None = None
        self.address: str | None = None
        self.token: str | None = None
        self.token_path: Path | None = None
        self.token_made = False
        if socket_path is None and instance.path is not None:
            socket_path = socket_path_for(instance.path)
        try:
            if socket_path is not None:
                self._listen_unix(Path(socket_path))
            if port is not None:
                self._listen_tcp(host, port)
        except BaseException:
            self._close_listeners()
            raise
        if not self._listeners:
            raise InvalidArgumentError(
                "serve clients on what? an in-memory instance needs socket_path or port")
        self._thread = threading.Thread(target=self._accept_loop, name="pybroker-clients",
                                        daemon=True)
        self._thread.start()

    # -- listening -----------------------------------------------------------------------

    def _listen_unix(self, path: Path) -> None:
        self._replace_stale(path)
        address, fd = unix_address(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(address)
            # owner-only before listen(): until then a connect is refused, so nobody else
            # ever reaches it
            os.chmod(path, 0o600)
            sock.listen(64)
        except OSError as exc:
            sock.close()
            raise ServerError(f"cannot listen for clients on {path}: {exc.strerror}") from None
        finally:
            if fd is not None:
                os.close(fd)
        self.socket_path = path
        self._listeners.append((sock, "unix"))

    @staticmethod
    def _replace_stale(path: Path) -> None:
        """A socket left by a server that died (SIGKILL) answers nobody: remove it. One
        that answers belongs to a live server, which cannot be (this process holds the
        instance file), unless another file's server put it there."""
        if not path.exists() and not path.is_symlink():
            return
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise ServerError(f"{path} exists and is not a socket; remove it or move it away")
        address, fd = unix_address(path)
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(2.0)
            probe.connect(address)
        except OSError:
            path.unlink(missing_ok=True)  # stale
            return
        finally:
            probe.close()
            if fd is not None:
                os.close(fd)
        raise ServerError(f"another server answers on {path}; stop it first")

    def _listen_tcp(self, host: str, port: int) -> None:
        instance_path = self.instance.path
        if instance_path is not None:
            self.token_path = token_path_for(instance_path)
            self.token, self.token_made = read_or_make_token(self.token_path)
        else:
            self.token, self.token_made = new_token(), True
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(64)
        except OSError as exc:
            sock.close()
            raise ServerError(
                f"cannot listen for clients on {host}:{port}: {exc.strerror}") from None
        bound = sock.getsockname()
        self.address = f"pybroker://{host if ':' not in host else f'[{host}]'}:{bound[1]}"
        self._listeners.append((sock, "tcp"))

    @property
    def port(self) -> int | None:
        for sock, kind in self._listeners:
            if kind == "tcp":
                return sock.getsockname()[1]
        return None

    @property
    def clients(self) -> int:
        with self._lock:
            return len(self._connections)

    def _accept_loop(self) -> None:
        selector = selectors.DefaultSelector()
        for sock, kind in self._listeners:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ, kind)
        next_summary = time.monotonic() + self._summary_interval
        try:
            while not self._stop.is_set():
                for key, _ in selector.select(POLL):
                    try:
                        conn, peer = key.fileobj.accept()  # type: ignore[union-attr]
                    except OSError:
                        continue  # the client gave up already, or no descriptor free
                    self._admit(conn, peer, key.data)
                if self._summary is not None and time.monotonic() >= next_summary:
                    next_summary = time.monotonic() + self._summary_interval
                    self._summary(self._summary_line())
        finally:
            selector.close()

    def _summary_line(self) -> str:
        """Clients now and since the last line; messages sent, delivered and received since
        the last line; what waits in queues and transmission queues now (when the file is
        free within a moment: the line never waits behind a transaction)."""
        with self._lock:
            stats, self._stats = self._stats, {"connected": 0, "refused": 0, "calls": 0}
            now = len(self._connections)
        totals: dict[str, int] = {"sent": 0, "delivered": 0, "received": 0}
        for (what, _, _), count in self.instance.kernel.messaging.counters.snapshot().items():
            if what in totals:
                totals[what] += count
        moved = {what: count - self._counted.get(what, 0) for what, count in totals.items()}
        self._counted = totals
        return (f"clients: {now} connected; in the last {self._summary_interval:g} s "
                f"{stats['connected']} connected, {stats['refused']} refused, "
                f"{stats['calls']} calls; messages: {moved['sent']} sent, "
                f"{moved['delivered']} delivered, {moved['received']} received; "
                f"{self._waiting()}")

    def _waiting(self) -> str:
        store = self.instance.kernel.store
        if not store.lock.acquire(True, 0.05):
            return "waiting: not read (a transaction holds the file)"
        try:
            [(ready, transmission)] = store.run("metrics/select_waiting_totals.sql")
        except BrokerError as exc:
            return f"waiting: not read ({exc})"
        finally:
            store.lock.release()
        return f"waiting: {ready} ready in queues, {transmission} in transmission queues"

    def _admit(self, conn: socket.socket, peer: Any, kind: str) -> None:
        conn.setblocking(True)
        who = _describe_peer(conn, peer, kind)
        with self._lock:
            full = len(self._connections) >= self.max_clients
            if not full:
                number = next(self._ids)
                connection = _Connection(self, number, conn, kind, who)
                self._connections[number] = connection
        if full:
            self.refuse(conn, who, f"too many clients ({self.max_clients} connected); "
                         "try again later, or serve with a higher --max-clients",
                         event=False)
            return
        connection.start()

    def refuse(self, conn: socket.socket, who: str, why: str, *, event: bool) -> None:
        if event:  # first: once refused, the client may look for it
            self._record_refusal(who, why)
        with contextlib.suppress(OSError):
            conn.settimeout(1.0)
            conn.sendall(protocol.refused("ServerError", f"the server refused: {why}"))
        with contextlib.suppress(OSError):
            conn.close()
        self.count("refused")
        self.log(f"client refused ({who}): {why}")

    def _record_refusal(self, who: str, why: str) -> None:
        """An Audit Broker Login event in sys.broker_events, as the wire records a login
        it refuses."""
        messaging = self.instance.kernel.messaging
        with contextlib.suppress(BrokerError):
            messaging.remote.event("Audit Broker Login", "Client Login Failure", who, None,
                                   None, f"a client was refused: {why}")
            with messaging.unit_of_work() as uow:
                uow.activate()
                messaging.remote.flush_events(uow)

    # -- stopping ------------------------------------------------------------------------

    def close(self) -> None:
        """Stop listening, roll back every client's open transaction, disconnect them and
        remove the socket."""
        if self._stop.is_set():
            return
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)
        self._close_listeners()
        with self._lock:
            connections = list(self._connections.values())
        for connection in connections:
            connection.join(self.timeout + 5)

    def _close_listeners(self) -> None:
        for sock, _ in self._listeners:
            with contextlib.suppress(OSError):
                sock.close()
        self._listeners = []
        if self.socket_path is not None:
            with contextlib.suppress(OSError):
                self.socket_path.unlink()

    def __enter__(self) -> ClientServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def stopping(self) -> bool:
        """Whether stop() was called: every connection ends at its next poll."""
        return self._stop.is_set()

    def count(self, what: str, number: int = 1) -> None:
        """Add ``number`` to the summary's count of ``what`` (connected, refused, calls)."""
        with self._lock:
            self._stats[what] += number
            self._totals[what] += number

    def totals(self) -> dict[str, int]:
        """Clients connected, refused and calls answered since the server started."""
        with self._lock:
            return dict(self._totals)

    def forget(self, number: int) -> None:
        """Free the slot of client ``number`` (its connection has ended or been refused)."""
        with self._lock:
            self._connections.pop(number, None)


    def __repr__(self) -> str:
        where = ", ".join(str(w) for w in (self.socket_path, self.address) if w)
        return f"<ClientServer {where}{' closed' if self._stop.is_set() else ''}>"


def _describe_peer(conn: socket.socket, peer: Any, kind: str) -> str:
    if kind == "tcp":
        return f"tcp {peer[0]}:{peer[1]}"
    with contextlib.suppress(OSError, AttributeError):
        pid, uid, _ = struct.unpack("3i", conn.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        return f"unix socket, pid {pid}, uid {uid}"
    return "unix socket"


def _peer_uid(conn: socket.socket) -> int | None:
    with contextlib.suppress(OSError, AttributeError):
        return struct.unpack("3i", conn.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
    return None


class _Connection:
    """One connected client, on a thread of its own (its session's thread)."""

    def __init__(self, server: ClientServer, number: int, sock: socket.socket, kind: str,
                 who: str) -> None:
        self.server = server
        self.number = number
        self.sock = sock
        self.kind = kind
        self.who = who
        self.session: Session | None = None
        self._timeout: float | None = None  # the socket's, as _set_timeout last set it
        self._thread = threading.Thread(target=self._run, name=f"pybroker-client-{number}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        server = self.server
        reason = "it disconnected"
        try:
            reader = FrameReader(server.max_frame)
            hello = self._handshake(reader)
            if hello is None:
                return
            server.count("connected")
            server.log(f"client {self.number} connected ({self.who}"
                        f"{', read-only' if hello.read_only else ''}; {hello.client})")
            reason = self._serve(reader)
        except (OSError, ServerError) as exc:
            reason = f"connection ended: {exc}"
        finally:
            session = self.session
            if session is not None:
                with contextlib.suppress(BrokerError):
                    session.close()  # a transaction left open is rolled back
            server.forget(self.number)  # the slot is free before the client sees the close
            if session is not None:
                server.count("calls", session.calls)
            with contextlib.suppress(OSError):
                self.sock.close()
            if session is not None:
                server.log(f"client {self.number} disconnected ({reason}; "
                            f"{session.calls} calls)")

    def _handshake(self, reader: FrameReader) -> Hello | None:
        server = self.server
        deadline = time.monotonic() + min(server.timeout, HANDSHAKE_TIMEOUT)
        event = None
        try:
            while event is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or server.stopping:
                    raise ServerError("no HELLO within the handshake time-out")
                self._set_timeout(min(remaining, POLL))
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    raise ServerError("it disconnected before its HELLO")
                reader.feed(data)
                event = reader.next_event()
        except ServerError as exc:
            self._refuse(str(exc), event=self.kind == "tcp")
            return None
        problem = None
        if not isinstance(event, Hello):
            problem = "its first frame is not a HELLO"
        elif event.version != protocol.VERSION:
            problem = f"it speaks client protocol version {event.version}"
        elif self.kind == "tcp" and not (
                isinstance(event.token, str) and server.token is not None
                and hmac.compare_digest(event.token.encode(), server.token.encode())):
            problem = "no token or a wrong token" + (
                f" (the server keeps its token in {server.token_path}: pass what it holds "
                "as connect(..., token=...))" if server.token_path is not None else
                " (the token was printed when the server started)")
        elif self.kind == "unix" and (uid := _peer_uid(self.sock)) is not None and (
                uid != os.getuid()):
            problem = f"uid {uid} is not the server's"
        if problem is not None:
            self._refuse(problem, event=True)
            return None
        assert isinstance(event, Hello)
        from pybroker import __version__ as version  # the package is imported by now

        self.session = Session(server.instance, read_only=event.read_only)
        self._send(protocol.welcome(
            str(server.instance.path or ":memory:"), f"pybroker {version} pid {os.getpid()}",
            server.max_frame, event.read_only, server.timeout))
        return event

    def _refuse(self, why: str, *, event: bool) -> None:
        self.server.forget(self.number)
        self.server.refuse(self.sock, self.who, why, event=event)

    def _serve(self, reader: FrameReader) -> str:
        server, session = self.server, self.session
        assert session is not None
        partial_since: float | None = None
        transaction_since: float | None = None
        while True:
            while (event := reader.next_event()) is not None:
                partial_since = None
                if not isinstance(event, Call):
                    raise ServerError(f"a client sends calls, not {type(event).__name__}")
                if event.pipelined:
                    self._run_ahead(session, event)
                else:
                    self._send(self._answer(session, event))
                if session.in_transaction:
                    transaction_since = transaction_since or time.monotonic()
                else:
                    transaction_since = None
            now = time.monotonic()
            if reader.pending:
                partial_since = partial_since or now
                if now - partial_since > server.timeout:
                    return f"a request was not finished within {server.timeout:g} s"
            if transaction_since is not None and now - transaction_since > server.timeout:
                session.expire(server.timeout)
                transaction_since = None
                server.log(f"client {self.number}: transaction open longer than "
                            f"{server.timeout:g} s, rolled back")
            if server.stopping:
                return "the server stopped"
            self._set_timeout(POLL)
            try:
                data = self.sock.recv(protocol.RECV_BYTES)
            except TimeoutError:
                continue
            if not data:
                return "it disconnected"
            reader.feed(data)

    def _answer(self, session: Session, call: Call) -> bytes:
        try:
            value = session.run(call)
            return protocol.result(call.call_id, value, self.server.max_frame)
        except BrokerError as exc:
            return protocol.failure(call.call_id, *calls.error_fields(exc))
        except Exception as exc:  # a fault of the server's: the client still gets an answer
            print(f"pybroker serve: client {self.number}: {call.method} failed: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            return protocol.failure(call.call_id, "BrokerError",
                                    f"the server failed running {call.method}: "
                                    f"{type(exc).__name__}: {exc}")

    def _run_ahead(self, session: Session, call: Call) -> None:
        """A pipelined call: no answer; a failure dooms the transaction (Session)."""
        target = call.target[0] if call.target else None
        if (target, call.kind, call.method) not in calls.PIPELINED or not (
                session.in_transaction or session.doomed):
            raise ServerError(
                f"a client pipelines only a conversation's send() and only inside a "
                f"transaction, not {target!r:.20} {call.kind} {call.method!r:.40} "
                f"{'inside' if session.in_transaction else 'outside'} one")
        try:
            session.run_ahead(call)
        except Exception as exc:  # a fault of the server's: the client hears of it at its
            # next call, as of any failed pipelined call
            print(f"pybroker serve: client {self.number}: {call.method} failed: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            session.doom(BrokerError(f"the server failed running {call.method}: "
                                     f"{type(exc).__name__}: {exc}"))

    def _set_timeout(self, seconds: float) -> None:
        # only when it changes: each change is system calls, twice per call answered
        if self._timeout != seconds:
            self.sock.settimeout(seconds)
            self._timeout = seconds

    def _send(self, data: bytes) -> None:
        self._set_timeout(self.server.timeout)  # a client that stops reading is dropped
        try:
            self.sock.sendall(data)
        except OSError as exc:
            if exc.errno in (errno.EPIPE, errno.ECONNRESET) or isinstance(exc, TimeoutError):
                raise ServerError("the client stopped reading") from None
            raise


def serve_clients(
    instance: Instance,
    *,
    socket_path: str | Path | None = None,
    port: int | None = None,
    host: str = "127.0.0.1",
    timeout: float = DEFAULT_TIMEOUT,
    max_clients: int = DEFAULT_MAX_CLIENTS,
    log: Callable[[str], None] | None = None,
    summary: Callable[[str], None] | None = None,
    summary_interval: float = SUMMARY_INTERVAL,
) -> ClientServer:
    """Serve other processes' clients from this process, which holds ``instance``: on
    the Unix socket FILE.sock beside its file (owner-only), and on TCP ``host:port`` when
    ``port`` is given (0: a free one; clients then need the token kept in FILE.token).
    A client (``pybroker.connect(FILE)`` in another process, or
    ``pybroker.connect("pybroker://host:port", token=...)``) gets the same API, errors and
    transactions as an embedded caller. ``timeout`` (seconds) ends a request not finished
    and rolls back a transaction open longer. ``log`` gets one line per client
    connected, disconnected or refused; ``summary`` a line every ``summary_interval``
    seconds. The server stops when the instance closes, or with ``close()``."""
    server = ClientServer(instance, socket_path=socket_path, port=port, host=host,
                          timeout=timeout, max_clients=max_clients, log=log,
                          summary=summary, summary_interval=summary_interval)
    instance.on_close(server.close)
    return server
