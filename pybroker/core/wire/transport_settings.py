"""What the transport (transport.py) is given and gives: its settings, the instance's
identity on the wire, and the ``Sink`` it hands arrivals to. No I/O here."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from pybroker.core.wire import frames
from pybroker.core.wire.dialog import Acknowledged
from pybroker.core.wire.forwarding import DEFAULT_LIMIT_MB
from pybroker.core.wire.mirrored_route import DEFAULT_PROBE_TIMEOUT

# why a connection was refused before its peer logged in (the ``reason`` of
# pybroker_broker_logins_refused_total)
TLS_HANDSHAKE = "tls_handshake"  # the TLS handshake failed (or timed out)
NOT_TRUSTED = "certificate_not_trusted"  # the peer's certificate is not trusted here
CLOSED_BEFORE_LOGIN = "closed_before_login"  # the peer closed: it does not trust us
READ_ERROR = "read_error"  # the connection failed before the peer's HELLO
LOGIN_REFUSALS = (TLS_HANDSHAKE, NOT_TRUSTED, CLOSED_BEFORE_LOGIN, READ_ERROR)


class Sink(Protocol):
    """Where the transport hands what arrives (called from the event loop thread; must
    not block)."""

    def arrived(self, connection: int, peer: str,
                fragments: list[frames.MessageFragment]) -> None:
        """Fragments received on one connection, in order (those of one read together)."""

    def acknowledged(self, acks: list[Acknowledged]) -> None: ...

    def notice(self, notice: frames.Notice, peer: str) -> None: ...

    def status(self, handles: list[str], text: str) -> None: ...

    def event(self, event_class: str, subclass: str, peer: str | None,
              conversation_id: str | None, sequence: int | None, description: str) -> None: ...

    def probe(self, connection: int, probe: frames.Probe) -> None:
        """A mirrored route's question (R9.2): answered with ``Transport.answer_probe``."""


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = 4022
    retry_scale: float = 1.0
    fragment_size: int = 1 * 2**20
    idle_timeout: float = 90.0
    keepalive_interval: float = 30.0
    connect_timeout: float = 10.0
    handshake_timeout: float = 10.0
    ack_delay: float = 0.005
    max_connections: int = 256
    max_body: int = frames.DEFAULT_MAX_BODY
    # False: SQL Server's ENCRYPTION = DISABLED: no TLS; a peer says who it is in its HELLO
    # (its certificate's key id) and proves it with every dialog frame's MAC (P6)
    encryption: bool = True
    forwarding_limit: int = DEFAULT_LIMIT_MB * 2**20  # R7.3: bytes held for forwarding
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT  # R9.2: seconds a probe's answer is awaited


@dataclass
class Identity:
    instance_id: str
    certificate: str  # PEM
    private_key: str  # PEM
    broker_instances: tuple[str, ...]


@dataclass(frozen=True)
class WireCounts:
    """What the endpoint did on the network since it started (counters of /metrics)."""

    fragments_sent: int  # message fragments sent the first time
    fragments_retransmitted: int  # ... sent again, unacknowledged (C5)
    fragments_forwarded: int  # fragments passed on to their next hop (R7)
    logins_refused: dict[str, int]  # connections refused before login, by LOGIN_REFUSALS
    connect_failures: int  # outbound connection attempts that failed
    peers: dict[str, int]  # open connections by the peer's address (logged in) or state

    def plus(self, later: WireCounts) -> WireCounts:
        """These counts and a later endpoint's (of the same instance) together; the open
        connections are the later's."""
        refused = Counter(self.logins_refused)
        refused.update(later.logins_refused)
        return WireCounts(
            self.fragments_sent + later.fragments_sent,
            self.fragments_retransmitted + later.fragments_retransmitted,
            self.fragments_forwarded + later.fragments_forwarded, dict(refused),
            self.connect_failures + later.connect_failures, later.peers)
