"""The broker endpoint of an instance (P2): ``Instance.start_endpoint()`` returns one.

It owns the transport (the event loop thread that does all network I/O) and the engine's
writer for the wire: a thread that takes what arrives from the transport and applies it
through the messaging engine, the only code that writes DuckDB. Arrivals of many
conversations that are waiting together are applied in one transaction and acknowledged
together after it commits (P5.2, group commit). Once a second it writes the broker events
gathered meanwhile; the views of what the transport holds (connections, forwarded
messages, mirrored routes) are written when they are read (pybroker/kernel/live_views.py).

Also here: the instance's endpoint certificate and the peers it trusts, kept in the file.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pybroker.core.wire import certificates
from pybroker.core.wire.dialog import DEFAULT_FRAGMENT_SIZE, Acknowledged
from pybroker.core.wire.frames import MessageFragment, Notice, Probe
from pybroker.core.wire.transport import Transport
from pybroker.core.wire.transport_settings import Identity, Settings, WireCounts
from pybroker.errors import (
    AlreadyExistsError,
    BrokerError,
    InvalidArgumentError,
    NotFoundError,
    WireError,
)
from pybroker.kernel.broker_endpoint.mirroring import probe_role
from pybroker.kernel.messaging.arrivals import Arrival
from pybroker.kernel.messaging.remote import RemoteDelivery

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.kernel import Kernel

MAX_BATCH = 4096  # arrivals applied in one transaction at most
# ... and bytes of bodies: a transaction holds what it writes about three times over until it
# commits, so a batch of 27 fragments of 1 MiB (36 MB) grew the receiver of a 100 MB body by
# ~90 MB for the moment; at 8 MiB a batch still commits 8 fragments of 1 MiB at once
MAX_BATCH_BYTES = 8 * 2**20
EVENTS_INTERVAL = 1.0  # seconds: sys.broker_events is at most this late
# seconds: acknowledgements alone (nothing else waiting) are applied at most this often, so
# that a sender acknowledged message by message does not spend a DuckDB transaction on each
# acknowledgement (deleting transmission-queue rows is never on the way of a delivery)
ACK_INTERVAL = 0.02


class BrokerEndpoint:
    """A running broker endpoint (SQL Server's Service Broker endpoint): ``port``,
    ``address`` and ``close()``. It takes the kernel of its instance and holds itself in
    the kernel's endpoint slot while it runs."""

    def __init__(self, kernel: Kernel, settings: Settings) -> None:
        self._kernel = kernel
        self._remote = kernel.messaging.remote
        identity = endpoint_identity(kernel)
        store = kernel.store
        with store.lock:  # R7.3: the memory bound forwarding may hold
            size_mb = store.run("instance/select_settings.sql")[0][1]
        settings.forwarding_limit = int(size_mb) * 2**20
        self._bridge = _Bridge(self._remote, self.answer_probe, self.refresh_forwarding_limit)
        self._transport = Transport(self._bridge, identity, trusted_certificates(kernel),
                                    settings, clock=kernel.clock)
        self._closed = False
        self.started = kernel.now()  # since when it listens (sys.service_broker_endpoints)
        self._transport.start()
        self._remote.wire = self._transport
        self._bridge.start()
        self._remote.event("Broker:Connection", "Listening", None, None, None,
                           f"the broker endpoint listens on {self.address}")
        if not store.in_transaction:
            kernel.run_pending_all()  # what waited for a transport goes now
        # else started by T-SQL inside a batch's write: its commit retries every waiting
        # transmission (Messaging.after_catalog_write)

    @property
    def port(self) -> int:
        return self._transport.port

    @property
    def address(self) -> str:
        return f"tcp://{self._transport.settings.host}:{self.port}"

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def transport(self) -> Transport:
        """The I/O of this endpoint: its sockets, TLS and event loop thread."""
        return self._transport

    @property
    def settings(self) -> Settings:
        """What the endpoint was started with (host, port, encryption, time-outs...)."""
        return self._transport.settings

    @property
    def encryption(self) -> bool:
        """Whether connections speak TLS (ENCRYPTION = REQUIRED) or not (DISABLED)."""
        return self._transport.settings.encryption

    def connections(self) -> list[tuple[Any, ...]]:
        return self._transport.snapshot()

    def wire_counts(self) -> WireCounts | None:
        """What the endpoint did on the network since it started (None once closed)."""
        return self._transport.counts()

    def forwarded(self) -> list[tuple[Any, ...]]:
        """What the forwarder holds now (rows of sys.dm_broker_forwarded_messages)."""
        return self._transport.forwarded()

    def mirrored_routes(self) -> list[tuple[Any, ...]]:
        """What is known of each mirrored pair (rows of sys.dm_broker_mirrored_routes)."""
        return self._transport.mirrored_routes()

    def refresh_forwarding_limit(self) -> None:
        """R7.3: the memory bound as the file says now (MESSAGE_FORWARD_SIZE or
        ``Instance.forwarding_size_mb`` may change it while the endpoint serves)."""
        size_mb = int(self._kernel.store.run("instance/select_settings.sql")[0][1])
        if size_mb * 2**20 != self._transport.forwarder.limit:
            self._transport.set_forwarding_limit(size_mb * 2**20)

    def trust(self, trusted: dict[str, str]) -> None:
        """Admit exactly these peers (name -> certificate PEM) from now on; connections of
        peers no longer trusted are closed."""
        self._transport.trust(trusted)

    def answer_probe(self, connection: int, probe: Probe) -> None:
        """R9.2: answer a mirrored route's probe with the role here of the database it
        asks about (on the engine's writer thread)."""
        self._transport.answer_probe(connection, probe, probe_role(self._kernel.store, probe))

    def close(self) -> None:
        """Stop listening, close every connection, write the last events. Messages in
        flight stay in the transmission queue and go again at the next start."""
        if self._closed:
            return
        self._closed = True
        self._remote.wire = None
        final = self._transport.counts()
        if final is not None:  # the instance's counters go on from there (/metrics)
            before = self._kernel.closed_endpoints_counts
            self._kernel.closed_endpoints_counts = (
                final if before is None else before.plus(final))
        self._transport.close()
        self._bridge.stop()
        with contextlib.suppress(BrokerError):
            self._remote.write_events()
        if self._kernel.endpoint is self:
            self._kernel.endpoint = None

    def __repr__(self) -> str:
        return f"<BrokerEndpoint {self.address}{' closed' if self._closed else ''}>"


class _Bridge:
    """What the transport hands over, applied by one thread through the engine."""

    def __init__(self, remote: RemoteDelivery, answer_probe: Callable[[int, Probe], None],
                 refresh_forwarding_limit: Callable[[], None]) -> None:
        self._remote = remote
        self._answer_probe = answer_probe
        self._refresh_forwarding_limit = refresh_forwarding_limit
        self._items: deque[tuple[str, Any]] = deque()
        self._ready = threading.Condition()
        self._stopped = False
        self._urgent = 0  # items waiting that are not acknowledgements
        self._acks_applied = 0.0  # time.monotonic() when acknowledgements were last applied
        self._thread = threading.Thread(target=self._run, name="pybroker-wire-engine",
                                        daemon=True)
        self.last_error: BaseException | None = None

    # the Sink of transport.py: called on the event loop thread, never blocks
    def arrived(self, connection: int, peer: str, fragments: list[MessageFragment]) -> None:
        self._put("arrivals", (connection, peer, fragments, time.monotonic()))

    def acknowledged(self, acks: list[Acknowledged]) -> None:
        self._put("acks", acks)

    def notice(self, notice: Notice, peer: str) -> None:
        self._put("notice", (notice, peer))

    def status(self, handles: list[str], text: str) -> None:
        if handles:
            self._put("status", (handles, text))

    def event(self, event_class: str, subclass: str, peer: str | None,
              conversation_id: str | None, sequence: int | None, description: str) -> None:
        self._remote.event(event_class, subclass, peer, conversation_id, sequence,
                           description)

    def probe(self, connection: int, probe: Probe) -> None:
        self._put("probe", (connection, probe))

    def _put(self, kind: str, item: Any) -> None:
        with self._ready:
            self._items.append((kind, item))
            if kind != "acks":
                self._urgent += 1
            self._ready.notify()

    # the writer thread
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._ready:
            self._stopped = True
            self._ready.notify()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        next_snapshot = time.monotonic()
        while True:
            with self._ready:
                while not self._stopped:
                    now = time.monotonic()
                    if self._items and (self._urgent or now >= self._acks_applied
                                        + ACK_INTERVAL):
                        break
                    wait = next_snapshot - now
                    if self._items:
                        wait = min(wait, self._acks_applied + ACK_INTERVAL - now)
                    if wait <= 0:
                        break
                    self._ready.wait(wait)
                if self._stopped and not self._items:
                    return
                items = list(self._items)
                self._items.clear()
                self._urgent = 0
            if any(kind == "acks" for kind, _ in items):
                self._acks_applied = time.monotonic()
            try:
                self._apply(items, Arrival)
            except Exception as exc:  # never let the writer die; the senders resend
                self.last_error = exc
                self._remote.event("Broker:Message Undeliverable", "engine error", None, None,
                                   None, f"arrivals were not applied: {exc}")
            if time.monotonic() >= next_snapshot:
                next_snapshot = time.monotonic() + EVENTS_INTERVAL
                try:
                    self._remote.write_events()
                    self._refresh_forwarding_limit()
                except Exception as exc:
                    self.last_error = exc

    def _apply(self, items: list[tuple[str, Any]], arrival_type: Any) -> None:
        remote = self._remote
        batch: list[Any] = []
        size = 0
        acks: list[Acknowledged] = []

        def flush() -> None:
            nonlocal batch, size, acks
            if acks:
                remote.acknowledged(acks)
                acks = []
            if batch:
                remote.arrive(batch)
                batch, size = [], 0

        for kind, item in items:
            if kind == "arrivals":
                connection, peer, fragments, received_at = item
                for fragment in fragments:
                    batch.append(arrival_type(connection, peer, fragment, received_at))
                    size += len(fragment.body)
                    if len(batch) >= MAX_BATCH or size >= MAX_BATCH_BYTES:
                        flush()
            elif kind == "acks":
                acks += item
            else:
                flush()
                if kind == "notice":
                    remote.notice(*item)
                elif kind == "status":
                    remote.transmission_status(*item)
                elif kind == "probe":  # R9.2: the role here of the database it asks about
                    self._answer_probe(*item)
        flush()


# -- identity and trust, kept in the instance file -----------------------------------------


def endpoint_identity(kernel: Kernel, subject: str | None = None, *,
                      not_before: datetime | None = None,
                      not_after: datetime | None = None) -> Identity:
    """This instance's identity on the wire; its certificate is made on first need (with
    ``subject`` as its common name and the validity dates when given)."""
    store = kernel.store
    with kernel.write():
        row = store.run("wire/select_identity.sql")[0]
        instance_id, cert, key = row
        if instance_id is None or cert is None or key is None:
            instance_id = instance_id or str(uuid.uuid4())
            name = kernel.store.path.stem if kernel.store.path is not None else "pybroker"
            cert, key = certificates.make_certificate(
                subject or f"pybroker {name} {instance_id[:8]}", kernel.now(),
                not_before=not_before, not_after=not_after)
            store.run("wire/update_identity.sql", {
                "instance_id": instance_id, "certificate": cert, "private_key": key})
    brokers = tuple(db.broker_instance for db in kernel.databases())
    return Identity(instance_id, cert, key, brokers)


def renew_identity(kernel: Kernel, not_after: datetime | None = None) -> str:
    """Renew this instance's endpoint certificate (made first if it is not yet): the same
    subject and key, valid from now to ``not_after`` (default ten years on); the new PEM,
    which peers trust in place of the old one. Refused while the endpoint runs, since its
    connections present the certificate it started with."""
    running = kernel.endpoint
    if isinstance(running, BrokerEndpoint) and not running.is_closed:
        raise WireError(
            f"the broker endpoint of this instance runs on {running.address}: close it (stop "
            "`pybroker serve`) before renewing its certificate, then start it again")
    now = kernel.now()
    if not_after is not None and not isinstance(not_after, datetime):
        raise InvalidArgumentError(
            f"not_after is a datetime (naive UTC) or None, not {type(not_after).__name__}")
    if not_after is not None and not_after.tzinfo is not None:
        not_after = not_after.astimezone(UTC).replace(tzinfo=None)
    if not_after is not None and not_after <= now:
        raise InvalidArgumentError(
            f"a renewed certificate must expire after now, not on {not_after:%Y-%m-%d %H:%M} "
            "(UTC): peers refuse an expired endpoint certificate")
    identity = endpoint_identity(kernel)
    pem = certificates.renewed_certificate(identity.certificate, identity.private_key, now,
                                           not_after=not_after)
    with kernel.write():
        kernel.store.run("wire/update_identity.sql", {
            "instance_id": identity.instance_id, "certificate": pem,
            "private_key": identity.private_key})
    return pem


def trusted_certificates(kernel: Kernel) -> dict[str, str]:
    with kernel.store.lock:
        return dict(kernel.store.run("wire/select_trusted_certificates.sql"))


def trust(kernel: Kernel, name: str, pem: str | bytes) -> None:
    admit(kernel, name, pem)
    retrust(kernel)


def admit(kernel: Kernel, name: str, pem: str | bytes, owner: str | None = None) -> None:
    """Keep the peer's certificate in the file (replacing one of that name), owned by the
    user ``owner`` of master if given; the running transport learns whether it admits the
    peer from ``retrust`` (once the change is committed)."""
    if not isinstance(name, str) or not name.strip() or len(name) > 128:
        raise InvalidArgumentError(
            f"a trusted peer's name is a non-empty string of at most 128 characters: {name!r}")
    if not isinstance(pem, (str, bytes)):
        raise InvalidArgumentError(f"a certificate is PEM text, not {type(pem).__name__}")
    info = certificates.certificate_info(pem)
    if info.not_after < kernel.now():
        raise WireError(f"the certificate for {name!r} expired on {info.not_after:%Y-%m-%d}")
    with kernel.write():
        kernel.store.run("wire/delete_trusted_certificate.sql", {"name": name})
        trusted_as = kernel.store.run("wire/select_trusted_name_by_thumbprint.sql",
                                         {"thumbprint": info.fingerprint})
        if trusted_as:  # a peer is known by one name: say which, not "a duplicate"
            other = trusted_as[0][0]
            raise AlreadyExistsError(
                f"this certificate is already trusted as {other!r} (a certificate is "
                f"trusted under one name): remove {other!r} first to trust it as {name!r}")
        kernel.store.run("wire/insert_trusted_certificate.sql", {
            "name": name, "certificate": info.pem, "thumbprint": info.fingerprint,
            "subject": info.subject, "start_date": info.not_before,
            "expiry_date": info.not_after, "create_date": kernel.now(),
            "principal_name": owner})


def untrust(kernel: Kernel, name: str) -> None:
    forget(kernel, name)
    retrust(kernel)


def forget(kernel: Kernel, name: str) -> None:
    """Take the peer's certificate out of the file (``retrust`` tells the transport)."""
    with kernel.write():
        gone = kernel.store.run("wire/delete_trusted_certificate.sql", {"name": name})
    if not gone:
        raise NotFoundError(f"no trusted peer is called {name!r}")


def retrust(kernel: Kernel) -> None:
    """Give the running transport the trusted certificates the file holds now (it closes
    the connections of peers no longer trusted)."""
    endpoint = kernel.endpoint
    if isinstance(endpoint, BrokerEndpoint) and not endpoint.is_closed:
        endpoint.trust(trusted_certificates(kernel))


def settings_for(port: int, host: str, retry_scale: float, **options: Any) -> Settings:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InvalidArgumentError(f"port must be a whole number from 0 to 65535: {port!r}")
    if not isinstance(host, str) or not host:
        raise InvalidArgumentError(f"host must be a host name or address: {host!r}")
    settings = Settings(host=host, port=port, retry_scale=retry_scale)
    for name, value in options.items():
        if value is None:
            continue
        if name == "encryption":
            if not isinstance(value, bool):
                raise InvalidArgumentError(f"encryption must be True or False: {value!r}")
            settings.encryption = value
            continue
        if not hasattr(settings, name) or isinstance(value, bool) or not isinstance(
                value, (int, float)) or not value > 0:
            raise InvalidArgumentError(f"{name} must be a positive number: {value!r}")
        setattr(settings, name, type(getattr(settings, name))(value))
    if settings.fragment_size > settings.max_body:
        raise InvalidArgumentError(
            f"fragment_size is at most {settings.max_body} bytes: {settings.fragment_size}")
    return settings


__all__ = ["DEFAULT_FRAGMENT_SIZE", "BrokerEndpoint"]
