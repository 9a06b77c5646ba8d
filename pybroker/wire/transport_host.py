"""What the parts of the transport (transport_forwarding.py, transport_mirroring.py) rely
on of the ``Transport`` (transport.py) they are mixed into: its connections, its sink,
its event loop and the few methods they call. Declarations only: no I/O, no state."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pybroker.wire.transport_settings import Sink

if TYPE_CHECKING:  # pragma: no cover
    import asyncio

    from pybroker.wire.adjacent import AdjacentConnection


class Conn(Protocol):
    """What the transport's parts use of one of its connections."""

    conn_id: int
    closed: bool
    core: AdjacentConnection | None
    address: str | None  # the next hop it serves (an outbound connection's)
    peer_key_id: bytes


class TransportHost:
    """The host of the transport's parts: its attributes and methods they use."""

    sink: Sink
    key_id: bytes
    clock: Callable[[], float]
    _conns: Mapping[int, Conn]
    _outbound: Mapping[str, Conn]
    _loop: asyncio.AbstractEventLoop
    _closed: bool

    if TYPE_CHECKING:  # pragma: no cover
        def _call(self, fn: Callable[..., Any], *args: Any) -> None: ...

        def _kick(self, address: str) -> None: ...

        def _flush(self, conn: Conn) -> None: ...

        def _key(self, conn: Conn, conversation_id: str, from_initiator: bool) -> bytes: ...
