"""The transport's connections to adjacent brokers (P2): one ``Connection`` per socket,
and ``Connections``, the table the transport and its services (forwarding's and mirrored
routes' I/O) look them up in. No I/O here: the transport reads and writes the sockets."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pybroker.core.wire import certificates
from pybroker.core.wire.addresses import next_hop
from pybroker.core.wire.adjacent import AdjacentConnection
from pybroker.core.wire.transport_settings import Sink
from pybroker.errors import WireError
from pybroker.timestamps import optional_utc_datetime

MAX_DIALOG_KEYS = 4096  # per connection; past it the cache starts again


@dataclass(eq=False)
class Connection:
    """One connection to an adjacent broker: its socket's writer, its sans-I/O core once
    TLS is up, who the peer is and the dialog keys (P6) shared with it."""

    conn_id: int
    is_accept: bool
    peer_address: str  # the remote socket's host:port
    writer: asyncio.StreamWriter
    core: AdjacentConnection | None = None
    address: str | None = None  # the next hop it serves (outbound)
    trusted_name: str | None = None
    peer_key_id: bytes = b""
    secret: bytes = b""
    timer: asyncio.TimerHandle | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    connect_time: datetime = field(default_factory=lambda: datetime.now(UTC).replace(
        tzinfo=None))
    state: str = "CONNECTING"
    flow_controlled: bool = False
    closed: bool = False
    keys: dict[tuple[str, bool], bytes] = field(default_factory=dict)

    @property
    def logged_in(self) -> bool:
        """Whether the peer's HELLO has arrived (and the connection is not closed)."""
        return not self.closed and self.core is not None and self.core.peer is not None

    def key(self, conversation_id: str, from_initiator: bool) -> bytes:
        """The MAC key (P6) of one dialog direction with this peer."""
        k = (conversation_id, from_initiator)
        key = self.keys.get(k)
        if key is None:
            if len(self.keys) > MAX_DIALOG_KEYS:
                self.keys.clear()
            key = self.keys[k] = certificates.dialog_key(self.secret, conversation_id,
                                                         from_initiator)
        return key


class Connections:
    """Every open connection by id, the outbound one serving each next hop, and the next
    hops a connection is being made to."""

    def __init__(self) -> None:
        self.by_id: dict[int, Connection] = {}
        self.outbound: dict[str, Connection] = {}  # next hop -> its connection
        self.connecting: set[str] = set()

    def __len__(self) -> int:
        return len(self.by_id)

    def get(self, conn_id: int) -> Connection | None:
        return self.by_id.get(conn_id)

    def to(self, hop: str) -> Connection | None:
        """The outbound connection serving ``hop``, if any."""
        return self.outbound.get(hop)

    def back_to(self, conn_id: int, address: str) -> Connection | None:
        """The connection back to an adjacent broker: the one something came on
        (``conn_id``), else one to that broker's endpoint ``address`` (None: the sender
        resends, and the next copy finds the way)."""
        conn = self.by_id.get(conn_id)
        if conn is not None and not conn.closed:
            return conn
        with contextlib.suppress(WireError):
            conn = self.outbound.get(next_hop(address))
            if conn is not None and not conn.closed:
                return conn
        return None

    def peers(self) -> dict[str, int]:
        """Open connections by peer: the endpoint address its HELLO gave (or the next hop
        an outbound connection serves), else ``not logged in``; bounded by the peers."""
        out: dict[str, int] = {}
        for conn in self.by_id.values():
            if conn.closed:
                continue
            hello = conn.core.peer if conn.core is not None else None
            peer = (hello.address if hello is not None and hello.address else None) \
                or conn.address or ("logged in" if hello is not None else "not logged in")
            out[peer] = out.get(peer, 0) + 1
        return out

    def rows(self, encryption: bool) -> list[tuple[Any, ...]]:
        """Rows of sys.dm_broker_connections."""
        rows = []
        for conn in self.by_id.values():
            core = conn.core
            logged_in = core is not None and core.peer is not None
            rows.append((
                str(uuid.UUID(int=conn.conn_id)), conn.peer_address,
                "CONNECTED" if logged_in else conn.state, conn.is_accept, conn.connect_time,
                optional_utc_datetime(core.login_time) if core else None,
                optional_utc_datetime(core.last_activity_time) if core else None,
                "CERTIFICATE" if conn.trusted_name else None, conn.trusted_name,
                core.login_state_desc if core else "WAIT LOGIN NEGOTIATE",
                "AES (TLS 1.3)" if conn.trusted_name and encryption else "NONE",
                core.total_bytes_sent if core else 0,
                core.total_bytes_received if core else 0,
                core.total_fragments_sent if core else 0,
                core.total_fragments_received if core else 0,
                core.total_sends if core else 0, core.total_receives if core else 0,
                conn.flow_controlled))
        return rows


def report_corrupted(sink: Sink, conn: Connection, conversation_id: str, sequence: int,
                     what: str) -> None:
    """A frame that failed its MAC (P6): discarded, recorded as a broker event."""
    sink.event("Broker:Corrupted Message", "MAC mismatch", conn.peer_address,
               conversation_id, sequence,
               f"a {what} failed its integrity check (P6) and was discarded")
