"""One connection to an adjacent broker (P1, P2), sans-I/O: handshake, framing, batching of
acknowledgements (P5.1), keepalive and idle close.

The I/O module makes one :class:`AdjacentConnection` per TCP connection once TLS is up, feeds
it the decrypted bytes (``receive_data``), writes out what ``data_to_send`` gives, re-arms
one timer at ``get_timer()`` and calls ``handle_timer(now)`` when it fires. The core never
reads a clock: every input takes ``now`` (epoch seconds). It imports neither asyncio, ssl,
sockets nor duckdb.

Life of a connection (the words of SQL Server's ``sys.dm_broker_connections``):

    CONNECTED  (login_state_desc "WAIT LOGIN NEGOTIATE")  our HELLO is queued at once
      | the peer's HELLO arrives -> PeerHello
    LOGGED_IN  (login_state_desc "ONLINE")
      | close(), the peer's CLOSE, EOF, a protocol error, handshake timeout, idle
    CLOSED     (login_state_desc "ERROR" when it ended in error) -> ConnectionClosed

Errors on the receive path never raise: the connection moves to CLOSED and emits
``ConnectionClosed(reason, error=True)``, with a CLOSE frame for the peer when the peer broke
the protocol. After ``ConnectionClosed`` nothing more is emitted, ``receive_data`` and
``handle_timer`` are ignored and the ``send_*`` calls are no-ops: a fragment or notice that
never left is retransmitted by the dialog layer on another connection (P5.3), and an
acknowledgement still pending is sent again when the original is retransmitted (P3.3, P5.4).

Sending before the peer's HELLO is allowed: the frames are held and written, in order, the
moment the HELLO arrives (we do not know the peer's ``max_body`` before, so a fragment sent
then must fit the smallest limit any peer may announce, MIN_PEER_MAX_BODY).

The send path does raise, for the caller's mistakes only: WireError for a fragment over the
peer's ``max_body``, FrameError for a value no frame carries or that the peer's decoder would
refuse (nothing is queued then, and the connection stays up). Whatever ``sign_ack`` raises
comes out of ``send_fragment`` or ``handle_timer``.

Both ends behave alike (``is_accept`` is recorded for the catalog only): each sends its HELLO
at once, and either may send fragments, acknowledgements and notices once logged in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from pybroker.core.wire import frame_macs, frame_types, frames
from pybroker.errors import FrameError, WireError

MIN_PEER_MAX_BODY = 65536  # a HELLO announcing less is refused

CONNECTED, LOGGED_IN, CLOSED = "CONNECTED", "LOGGED_IN", "CLOSED"
WAIT_LOGIN, ONLINE, LOGIN_ERROR = "WAIT LOGIN NEGOTIATE", "ONLINE", "ERROR"

# What one ACK entry costs in an ACK frame's body, measured on the encoding itself: the
# count (2 bytes), then per entry a fixed part and 16 bytes a range.
def _measure_ack_entry(ranges: int) -> int:
    entry = frame_types.AckEntry("00000000-0000-0000-0000-000000000001", True,
                                 "00000000-0000-0000-0000-000000000001", bytes(frames.KEY_ID_SIZE),
                                 0, ((0, 0, 0),) * ranges)
    return len(frames.encode(frames.Ack((entry,)))) - frames.PREFIX_SIZE - 2


_ACK_ENTRY_FIXED = _measure_ack_entry(0)
_ACK_RANGE_SIZE = _measure_ack_entry(1) - _ACK_ENTRY_FIXED


# -- events -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeerHello:
    """The peer's HELLO arrived: the connection is LOGGED_IN."""

    hello: frames.Hello


@dataclass(frozen=True, slots=True)
class FragmentReceived:
    """A MESSAGE frame; its piggybacked acknowledgement (if any) came just before as
    :class:`AcksReceived`, and ``fragment.ack`` is None."""

    fragment: frames.MessageFragment


@dataclass(frozen=True, slots=True)
class AcksReceived:
    """Acknowledgements, from an ACK frame or from a fragment's header (P5.1). Their MACs
    are not checked here (the dialog layer holds the keys, P6)."""

    entries: tuple[frame_types.AckEntry, ...]


@dataclass(frozen=True, slots=True)
class NoticeReceived:
    notice: frames.Notice


@dataclass(frozen=True, slots=True)
class ProbeReceived:
    """A mirrored route's question or answer (R9.2); its MAC is checked by the caller."""

    probe: frames.Probe


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The last event of a connection. ``error`` is True when it ended abnormally (protocol
    error, handshake timeout, EOF in the middle of a frame or before login)."""

    reason: str
    error: bool


Event = (PeerHello | FragmentReceived | AcksReceived | NoticeReceived | ProbeReceived
         | ConnectionClosed)


# -- acknowledgement merging (P5.1) -----------------------------------------------------


_NO_MAC = bytes(frames.MAC_SIZE)


def merge_ack(old: frame_types.AckEntry | None, new: frame_types.AckEntry) -> frame_types.AckEntry:
    """One pending acknowledgement out of two for the same conversation direction: the
    larger ``through_sequence``, the union of the ranges not below it (overlapping or
    adjacent ranges of one sequence joined; at most MAX_ACK_RANGES, lowest first: a range
    left out only means a retransmission that is acknowledged again, P5.4), the newer
    broker_instance and key_id, and no MAC (it is signed when it leaves)."""
    if old is None and not new.ranges and new.mac == _NO_MAC:
        return new  # most entries (nothing held beyond the next sequence): already merged
    through = new.through_sequence if old is None else max(old.through_sequence,
                                                           new.through_sequence)
    ranges = sorted(r for r in (*(old.ranges if old else ()), *new.ranges) if r[0] >= through)
    merged: list[tuple[int, int, int]] = []
    for seq, first, last in ranges:
        if merged and merged[-1][0] == seq and first <= merged[-1][2] + 1:
            if last > merged[-1][2]:
                merged[-1] = (seq, merged[-1][1], last)
        else:
            merged.append((seq, first, last))
    return replace(new, through_sequence=through, ranges=tuple(merged[:frame_types.MAX_ACK_RANGES]),
                   mac=bytes(frames.MAC_SIZE))


def _ack_entry_size(entry: frame_types.AckEntry) -> int:
    return _ACK_ENTRY_FIXED + _ACK_RANGE_SIZE * len(entry.ranges)


def _check_peer_accepts(data: bytes) -> None:
    """Raise FrameError if the peer's decoder would refuse this encoded frame. ``encode``
    writes some values that ``decode`` refuses (a NUL in a string, priority over 10, an
    all-zero conversation id, a fragment number not below the count, ...); sent, such a
    frame would close the connection at the peer, and its retransmission would close the
    next one, for ever. Refused here, the error reaches the caller that made it."""
    header_end = frames.PREFIX_SIZE + frames.PREFIX.unpack_from(data)[5]
    view = memoryview(data)
    try:  # the decoder's own checks, on memoryviews (no copy of the buffer)
        frames.decode_parts(data[3], data[4], view[frames.PREFIX_SIZE:header_end],
                            view[header_end:], copy_body=False)
    except FrameError as exc:
        raise FrameError(f"not sent, the peer would refuse it: {exc}") from None


def _kind(frame: frames.Frame) -> str:
    return {frames.MessageFragment: "MESSAGE", frames.Ack: "ACK", frames.Notice: "NOTICE",
            frames.Keepalive: "KEEPALIVE", frames.Close: "CLOSE",
            frames.Probe: "PROBE"}.get(type(frame), "HELLO")


def _fmt(seconds: float) -> str:
    return f"{seconds:g}"


# -- the connection ---------------------------------------------------------------------


class AdjacentConnection:
    """One connection to an adjacent broker (see the module's docstring)."""

    def __init__(self, *, is_accept: bool, hello: frames.Hello, now: float,
                 sign_ack: Callable[[frame_types.AckEntry], frame_types.AckEntry],
                 handshake_timeout: float = 10.0, idle_timeout: float = 90.0,
                 keepalive_interval: float = 30.0, ack_delay: float = 0.005,
                 max_body: int = frames.DEFAULT_MAX_BODY,
                 peer_timeout: float | None = None) -> None:
        """``peer_timeout``: close (error) once logged in when no frame at all, keepalives
        included, has come from the peer for that long: a peer that crashed without a TCP
        reset. Off by default; a few ``keepalive_interval`` of the peer suit it."""
        if max_body < MIN_PEER_MAX_BODY:
            raise WireError(f"max_body {max_body} is below {MIN_PEER_MAX_BODY}: every peer "
                            f"refuses such a HELLO")
        if hello.max_body > max_body:
            raise WireError(f"our HELLO announces max_body {hello.max_body} but the "
                            f"connection decodes at most {max_body}; make them equal")
        if hello.max_body < MIN_PEER_MAX_BODY:
            raise WireError(f"our HELLO announces max_body {hello.max_body}, below "
                            f"{MIN_PEER_MAX_BODY}: every peer refuses it")
        self.is_accept = is_accept
        self.hello = hello
        self.peer: frames.Hello | None = None
        self.state = CONNECTED
        self.login_state_desc = WAIT_LOGIN
        self.close_reason: str | None = None
        self.handshake_timeout = handshake_timeout
        self.idle_timeout = idle_timeout
        self.keepalive_interval = keepalive_interval
        self.ack_delay = ack_delay
        self.max_body = max_body
        self._sign_ack = sign_ack
        self._decoder = frames.FrameDecoder(max_body)
        self._events: deque[Event] = deque()
        self._outgoing: list[bytes] = []
        self.outgoing_bytes = 0  # of _outgoing: the transport hands them on before too many
        self._held: list[tuple[int, bytes]] = []  # (frame type, bytes) sent before login
        # P5.1: (conversation_id, acks_initiator) -> (merged entry, first queued at)
        self._pending_acks: dict[tuple[str, bool], tuple[frame_types.AckEntry, float]] = {}
        # C6 counters (sys.dm_broker_connections)
        self.connect_time = now
        self.login_time: float | None = None
        self.last_activity_time = now
        self.total_bytes_sent = 0
        self.total_bytes_received = 0
        self.total_fragments_sent = 0
        self.total_fragments_received = 0
        self.total_sends = 0
        self.total_receives = 0
        self._last_sent = now  # any frame (keepalive deadline)
        self._last_traffic = now  # MESSAGE, ACK or NOTICE sent or received (idle deadline)
        # fragments handed to the application and not answered yet (its acknowledgement
        # comes after a commit): the connection is not idle while any is outstanding
        self.outstanding = 0
        # fragments sent on it and not acknowledged yet (set by the transport): not idle
        self.awaiting = False
        self._last_received = now  # any frame (peer_timeout)
        self.peer_timeout = peer_timeout
        self._write(frames.HELLO, frames.encode(hello), now)

    # -- state ----------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        return self.state == CLOSED

    @property
    def is_idle(self) -> bool:
        """Nothing pending: no acknowledgement waiting, no frame held for login, no bytes
        waiting for ``data_to_send``."""
        return not (self._pending_acks or self._held or self._outgoing)

    @property
    def pending_ack_count(self) -> int:
        return len(self._pending_acks)

    # -- input ----------------------------------------------------------------------

    def receive_data(self, data: bytes, now: float) -> None:
        """Bytes from the peer; ``b""`` means EOF. Never raises for anything the peer sent."""
        if self.state == CLOSED:
            return
        if not data:
            incomplete = self._decoder.buffered > 0
            error = incomplete or self.state != LOGGED_IN
            reason = "connection closed by peer (EOF)"
            if incomplete:
                reason += f" in the middle of a frame ({self._decoder.buffered} bytes)"
            elif self.state != LOGGED_IN:
                reason += " before its HELLO"
            self._closed(reason, error=error, notify_peer=False, now=now)
            return
        self.total_bytes_received += len(data)
        try:
            received = self._decoder.feed(data)
        except FrameError as exc:
            self._protocol_error(str(exc), now)
            return
        for frame in received:
            self._frame_received(frame, now)
            if self.state == CLOSED:
                return

    def _frame_received(self, frame: frames.Frame, now: float) -> None:
        self.total_receives += 1
        self._last_received = now
        self.last_activity_time = now
        if self.state == CONNECTED:
            if not isinstance(frame, frames.Hello):
                self._protocol_error(f"Login Protocol Error: a {_kind(frame)} frame before "
                                     f"the peer's HELLO", now)
                return
            if frame.max_body < MIN_PEER_MAX_BODY:
                self._protocol_error(f"Login Protocol Error: the peer's HELLO announces "
                                     f"max_body {frame.max_body}, below {MIN_PEER_MAX_BODY}", now)
                return
            self.peer = frame
            self.state = LOGGED_IN
            self.login_state_desc = ONLINE
            self.login_time = now
            self._events.append(PeerHello(frame))
            held, self._held = self._held, []
            for kind, data in held:
                self._write(kind, data, now)
            return
        if isinstance(frame, frames.MessageFragment):
            self.total_fragments_received += 1
            self._last_traffic = now
            if frame.ack is not None:
                self._events.append(AcksReceived((frame.ack,)))
                frame = replace(frame, ack=None)
            self._events.append(FragmentReceived(frame))
        elif isinstance(frame, frames.Ack):
            self._last_traffic = now
            if frame.entries:
                self._events.append(AcksReceived(frame.entries))
        elif isinstance(frame, frames.Notice):
            self._last_traffic = now
            self._events.append(NoticeReceived(frame))
        elif isinstance(frame, frames.Probe):
            self._last_traffic = now
            self._events.append(ProbeReceived(frame))
        elif isinstance(frame, frames.Keepalive):
            pass
        elif isinstance(frame, frames.Close):
            self._closed(f"closed by peer: {frame.reason}", error=False, notify_peer=False,
                         now=now)
        else:  # a second HELLO
            self._protocol_error("Login Protocol Error: a second HELLO", now)

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    # -- output ---------------------------------------------------------------------

    def send_fragment(self, fragment: frames.MessageFragment, now: float,
                      mac_key: bytes | None = None) -> None:
        """Queue a MESSAGE frame, with the pending acknowledgement of the same conversation's
        other direction riding in its header (P5.1). With ``mac_key`` the fragment is signed
        here, while it is encoded (the sending path); without, it must already be signed
        (its MAC does not cover the acknowledgement). A no-op once CLOSED.

        Raises WireError (FrameError for a value no frame can carry) if the fragment's body
        is over the peer's ``max_body`` (MIN_PEER_MAX_BODY before the peer's HELLO)."""
        if self.state == CLOSED:
            return
        limit = self.peer.max_body if self.peer is not None else MIN_PEER_MAX_BODY
        if len(fragment.body) > limit:
            raise WireError(f"a fragment of {len(fragment.body)} bytes is over the peer's "
                            f"limit of {limit} bytes; fragment messages to fit it")
        pending_acks = self._pending_acks
        key = None
        pending = None
        if pending_acks and fragment.ack is None:  # none, at a sender that only sends
            key = (fragment.conversation_id.lower(), not fragment.from_initiator)
            pending = pending_acks.get(key)
        data = None
        if mac_key is not None:
            ack = None if pending is None else self._sign_ack(pending[0])
            try:
                data = frame_macs.encode_message(fragment, mac_key, ack)
            except FrameError:
                if ack is None:
                    raise
                pending = None  # the ack's ranges do not fit a header: it goes in an ACK
                data = frame_macs.encode_message(fragment, mac_key)
            if pending is not None:
                del self._pending_acks[key]
            self._send(frames.MESSAGE, data, now)
            return
        if pending is not None:
            try:
                data = frames.encode(replace(fragment, ack=self._sign_ack(pending[0])))
            except FrameError:  # the ack's ranges do not fit a header: it goes in an ACK
                data = None
        if data is None:
            pending = None
            data = frames.encode(fragment)
        _check_peer_accepts(data)
        if pending is not None:
            del self._pending_acks[key]
        self._send(frames.MESSAGE, data, now)

    def queue_acks(self, entries: Iterable[frame_types.AckEntry], now: float) -> None:
        """Acknowledgements to send (unsigned): merged per conversation direction, they leave
        in the header of the next fragment going the other way, or in one ACK frame once the
        earliest has waited ``ack_delay``. A no-op once CLOSED. Raises FrameError for an
        entry the peer would refuse (negative sequence, a range whose first fragment is
        after its last, ...), keeping the ones before it."""
        if self.state == CLOSED:
            return
        for entry in entries:
            entry = merge_ack(None, entry)
            frame_macs.check_ack_entry(entry)  # what the peer's decoder would refuse
            key = (entry.conversation_id.lower(), entry.acks_initiator)
            old = self._pending_acks.get(key)
            if old is None:
                self._pending_acks[key] = (entry, now)
            else:
                self._pending_acks[key] = (merge_ack(old[0], entry), old[1])

    def send_notice(self, notice: frames.Notice, now: float) -> None:
        """Queue a NOTICE frame (already signed) at once. A no-op once CLOSED."""
        if self.state == CLOSED:
            return
        data = frames.encode(notice)
        _check_peer_accepts(data)
        self._send(frames.NOTICE, data, now)

    def send_probe(self, probe: frames.Probe, now: float) -> None:
        """Queue a PROBE frame (already signed); held until the peer's HELLO. A no-op once
        CLOSED."""
        if self.state == CLOSED:
            return
        self._send(frames.PROBE, frames.encode(probe), now)

    def data_to_send(self) -> bytes:
        """Everything queued since the last call (then cleared)."""
        data = b"".join(self._outgoing)
        self._outgoing.clear()
        self.outgoing_bytes = 0
        return data

    def close(self, reason: str, now: float) -> None:
        """Queue a CLOSE frame and end the connection (``ConnectionClosed(reason, False)``).
        Pending acknowledgements are dropped (P3.3: the retransmission triggers new ones)."""
        if self.state == CLOSED:
            return
        self._closed(reason, error=False, notify_peer=True, now=now)

    # -- timers ---------------------------------------------------------------------

    def _ack_deadline(self) -> float | None:
        if not self._pending_acks:
            return None
        return min(t for _, t in self._pending_acks.values()) + self.ack_delay

    def get_timer(self) -> float | None:
        """The earliest deadline: handshake timeout (until LOGGED_IN); once logged in, the
        acknowledgement flush, the keepalive, the idle close and the peer time-out (if set).
        None once CLOSED."""
        if self.state == CLOSED:
            return None
        if self.state == CONNECTED:
            return self.connect_time + self.handshake_timeout
        deadlines = [self._last_sent + self.keepalive_interval]
        ack = self._ack_deadline()
        if ack is not None:
            deadlines.append(ack)
        elif not self._held and not self.outstanding and not self.awaiting:
            deadlines.append(self._last_traffic + self.idle_timeout)
        if self.peer_timeout is not None:
            deadlines.append(self._last_received + self.peer_timeout)
        return min(deadlines)

    def handle_timer(self, now: float) -> None:
        """Do whatever is due at ``now`` (a no-op when nothing is)."""
        if self.state == CLOSED:
            return
        if self.state == CONNECTED:
            if now >= self.connect_time + self.handshake_timeout:
                reason = f"handshake timed out after {_fmt(self.handshake_timeout)} s"
                self._closed(reason, error=True, notify_peer=True, now=now)
            return
        if self.peer_timeout is not None and now >= self._last_received + self.peer_timeout:
            self._closed(f"no frame from the peer for {_fmt(self.peer_timeout)} s", error=True,
                         notify_peer=True, now=now)
            return
        ack = self._ack_deadline()
        if ack is not None and now >= ack:
            self._flush_acks(now)
        if (not self._pending_acks and not self._held and not self.outstanding
                and not self.awaiting and now >= self._last_traffic + self.idle_timeout):
            self._closed(f"idle for {_fmt(self.idle_timeout)} s", error=False,
                         notify_peer=True, now=now)
            return
        if now >= self._last_sent + self.keepalive_interval:
            self._write(frames.KEEPALIVE, frames.encode(frames.Keepalive()), now)

    def _flush_acks(self, now: float) -> None:
        """Every pending acknowledgement, signed, in as few ACK frames as fit the peer."""
        entries = [self._sign_ack(entry) for entry, _ in self._pending_acks.values()]
        self._pending_acks.clear()
        assert self.peer is not None
        limit = self.peer.max_body
        batch: list[frame_types.AckEntry] = []
        size = 2  # the entry count
        for entry in entries:
            cost = _ack_entry_size(entry)
            if batch and (len(batch) >= frames.MAX_ACK_ENTRIES or size + cost > limit):
                self._send(frames.ACK, frames.encode(frames.Ack(tuple(batch))), now)
                batch, size = [], 2
            batch.append(entry)
            size += cost
        if batch:
            self._send(frames.ACK, frames.encode(frames.Ack(tuple(batch))), now)

    # -- internals ------------------------------------------------------------------

    def _send(self, kind: int, data: bytes, now: float) -> None:
        """A MESSAGE, ACK or NOTICE frame: written, or held until the peer's HELLO."""
        if self.state == CONNECTED:
            self._held.append((kind, data))
        else:
            self._write(kind, data, now)

    def _write(self, kind: int, data: bytes, now: float) -> None:
        self._outgoing.append(data)
        self.outgoing_bytes += len(data)
        self.total_sends += 1
        self.total_bytes_sent += len(data)
        self.last_activity_time = now
        self._last_sent = now
        if kind == frames.MESSAGE:
            self.total_fragments_sent += 1
        if kind in (frames.MESSAGE, frames.ACK, frames.NOTICE, frames.PROBE):
            self._last_traffic = now

    def _protocol_error(self, message: str, now: float) -> None:
        self._closed(f"protocol error: {message}", error=True, notify_peer=True, now=now)

    def _closed(self, reason: str, *, error: bool, notify_peer: bool, now: float) -> None:
        if notify_peer:
            self._write(frames.CLOSE, frames.encode(frames.Close(reason)), now)
        self.state = CLOSED
        if error:
            self.login_state_desc = LOGIN_ERROR
        self.close_reason = reason
        self._pending_acks.clear()
        self._held.clear()
        self._events.append(ConnectionClosed(reason, error))
