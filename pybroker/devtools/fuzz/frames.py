"""Fuzzing the wire's receive path (P1): whatever bytes a peer sends, the frame decoder raises
only FrameError and an adjacent connection raises nothing at all (it closes with an event).

- ``fuzz_frames(data)``: one fuzz target (for atheris, hypothesis or a plain loop; to be
  registered in a ``pybroker fuzz`` command). It returns quietly for any input the wire
  handles correctly and raises for a bug: whatever escapes the decoder other than
  FrameError, anything escaping a connection, or an :class:`AssertionError` naming a broken
  invariant.
- ``mutated_frames(seed)``: an endless, reproducible stream of mutated valid frames (bit
  flips, extreme values, inserted, deleted and duplicated bytes, truncation, random tails,
  huge length fields, spliced frames), standard library only.
- ``sample_frame(rnd, kind)`` and ``mutate(data, rnd)``: the valid frames and the mutations
  every wire fuzzer draws from (``pybroker fuzz``, ``pybroker chaos fuzz``).

Like the rest of the core it reads no clock and opens no socket.
"""

from __future__ import annotations

import contextlib
import random
import struct
import uuid
from collections.abc import Iterator
from dataclasses import replace

from pybroker.core.wire import frame_macs, frame_types, frames
from pybroker.core.wire.adjacent import (
    CLOSED,
    LOGGED_IN,
    AdjacentConnection,
    ConnectionClosed,
    PeerHello,
)
from pybroker.errors import FrameError

_T0 = 1_800_000_000.0
KEY = bytes(range(32))  # what sample frames are signed with
_ALPHABET = "abcXYZ09 _-/:.<>é中𝄞"


# -- valid frames ----------------------------------------------------------------------


def _guid(rnd: random.Random) -> str:
    return str(uuid.UUID(int=rnd.getrandbits(128) or 1))


def _text(rnd: random.Random, low: int = 0, high: int = 24) -> str:
    return "".join(rnd.choice(_ALPHABET) for _ in range(rnd.randint(low, high)))


def _ack_entry(rnd: random.Random) -> frame_types.AckEntry:
    ranges = []
    for _ in range(rnd.choice((0, 0, 1, 3))):
        first = rnd.getrandbits(rnd.choice((2, 8, 32)))
        ranges.append((rnd.getrandbits(rnd.choice((4, 63))), first,
                       min(first + rnd.getrandbits(4), 2**32 - 1)))
    entry = frame_types.AckEntry(_guid(rnd), rnd.random() < 0.5, _guid(rnd), rnd.randbytes(8),
                                 rnd.getrandbits(rnd.choice((4, 63))), tuple(ranges))
    return frame_macs.sign(entry, KEY)


def sample_frame(rnd: random.Random, kind: int | None = None) -> frames.Frame:
    """One valid frame of type ``kind`` (a random type when None) with random field
    values."""
    kind = kind or rnd.choice((frames.HELLO, frames.MESSAGE, frames.MESSAGE, frames.MESSAGE,
                               frames.ACK, frames.NOTICE, frames.KEEPALIVE, frames.CLOSE,
                               frames.PROBE))
    if kind == frames.HELLO:
        hello = frames.Hello(_guid(rnd), tuple(_guid(rnd) for _ in range(rnd.randint(0, 3))),
                             rnd.choice((65536, frames.DEFAULT_MAX_BODY, 2**32 - 1)))
        extra = {"address": _text(rnd), "key_id": rnd.randbytes(frames.KEY_ID_SIZE)}
        return replace(hello, **extra)
    if kind == frames.MESSAGE:
        body = rnd.randbytes(rnd.choice((0, 1, 17, 300)))
        count = rnd.choice((1, 1, 2, 2**32 - 1))
        fragment = frames.MessageFragment(
            conversation_id=_guid(rnd), from_initiator=rnd.random() < 0.5,
            sequence=rnd.getrandbits(rnd.choice((3, 63))),
            fragment_number=rnd.randrange(count), fragment_count=count,
            message_size=len(body) if count == 1 else len(body) + rnd.getrandbits(20),
            from_service=_text(rnd, 1), to_service=_text(rnd, 1),
            from_broker_instance=_guid(rnd),
            to_broker_instance=None if rnd.random() < 0.3 else _guid(rnd),
            contract=_text(rnd, 1), message_type=_text(rnd, 1),
            validation=rnd.choice("NEX"), is_end_of_dialog=rnd.random() < 0.2,
            is_error=rnd.random() < 0.1, priority=rnd.randint(0, 10),
            lifetime_ms=rnd.getrandbits(63) - 2**62, hops_remaining=rnd.getrandbits(8),
            key_id=rnd.randbytes(8), body=body,
            ack=_ack_entry(rnd) if rnd.random() < 0.3 else None,
            time_to_live_ms=rnd.getrandbits(32), time_consumed_ms=rnd.getrandbits(32))
        return frame_macs.sign(fragment, KEY)
    if kind == frames.ACK:
        return frames.Ack(tuple(_ack_entry(rnd) for _ in range(rnd.choice((0, 1, 2, 5)))))
    if kind == frames.NOTICE:
        notice = frames.Notice(_guid(rnd), rnd.random() < 0.5,
                               None if rnd.random() < 0.3 else _guid(rnd),
                               rnd.getrandbits(63) - 2**62, rnd.getrandbits(32) - 2**31,
                               _text(rnd, 0, 80), rnd.random() < 0.5, rnd.randbytes(8))
        return frame_macs.sign(notice, KEY)
    if kind == frames.KEEPALIVE:
        return frames.Keepalive()
    if kind == frames.PROBE:
        probe = frames.Probe(_guid(rnd), _text(rnd, 1), None if rnd.random() < 0.5
                             else _guid(rnd), rnd.random() < 0.5,
                             rnd.choice(("", "PRINCIPAL", "MIRROR")), rnd.randbytes(8))
        return frame_macs.sign(probe, KEY)
    return frames.Close(_text(rnd, 0, 40))


# -- mutations ---------------------------------------------------------------------------

_EXTREMES = (b"\x00", b"\x01", b"\x7f", b"\x80", b"\xff", b"\x00\x00", b"\xff\xff",
             b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff")


def mutate(data: bytes, rnd: random.Random) -> bytes:
    """``data`` with one to four random mutations."""
    buf = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        op = rnd.randrange(11)
        pos = rnd.randrange(len(buf)) if buf else 0
        if op == 0 and buf:  # flip a bit
            buf[pos] ^= 1 << rnd.randrange(8)
        elif op == 1 and buf:  # an extreme value over one to four bytes
            value = rnd.choice(_EXTREMES)
            buf[pos:pos + len(value)] = value
        elif op == 2:  # insert bytes
            buf[pos:pos] = rnd.randbytes(rnd.randint(1, 8))
        elif op == 3 and buf:  # delete bytes
            del buf[pos:pos + rnd.randint(1, 8)]
        elif op == 4:  # truncate
            del buf[pos:]
        elif op == 5 and buf:  # duplicate a range
            end = min(len(buf), pos + rnd.randint(1, 32))
            buf[end:end] = buf[pos:end]
        elif op == 6 and len(buf) >= frames.PREFIX_SIZE:  # the header length field
            buf[6:8] = struct.pack("!H", rnd.choice((0, 1, frames.MAX_HEADER,
                                                     frames.MAX_HEADER + 1, 0xFFFF,
                                                     rnd.getrandbits(16))))
        elif op == 7 and len(buf) >= frames.PREFIX_SIZE:  # the body length field
            buf[8:12] = struct.pack("!I", rnd.choice((0, 1, 65536, frames.DEFAULT_MAX_BODY,
                                                      frames.DEFAULT_MAX_BODY + 1,
                                                      2**32 - 1, rnd.getrandbits(32))))
        elif op == 8 and len(buf) >= pos + 2:  # a length or count inside the header
            buf[pos:pos + 2] = rnd.choice((b"\xff\xff", b"\x00\x00", b"\x10\x00"))
        elif op == 9 and len(buf) >= frames.PREFIX_SIZE:  # the type or flags byte
            buf[rnd.choice((3, 4))] = rnd.randrange(256)
        elif op == 10:  # a random tail
            buf += rnd.randbytes(rnd.randint(1, 16))
    return bytes(buf)


def mutated_frames(seed: int) -> Iterator[bytes]:
    """Endless mutated valid frames (one to three frames spliced together, mutated; one in
    ten is left valid), the same sequence for the same seed."""
    rnd = random.Random(seed)
    while True:
        data = b"".join(frames.encode(sample_frame(rnd)) for _ in range(rnd.randint(1, 3)))
        yield data if rnd.random() < 0.1 else mutate(data, rnd)


# -- the fuzz target --------------------------------------------------------------------


def _sign_ack(entry: frame_types.AckEntry) -> frame_types.AckEntry:
    return frame_macs.sign(entry, KEY)


def _connection(*, is_accept: bool, instance: int) -> AdjacentConnection:
    hello = frames.Hello(str(uuid.UUID(int=instance)), (str(uuid.UUID(int=instance + 1)),),
                         frames.DEFAULT_MAX_BODY)
    return AdjacentConnection(is_accept=is_accept, hello=hello, now=_T0, sign_ack=_sign_ack)


def _logged_in_pair() -> tuple[AdjacentConnection, AdjacentConnection]:
    a, b = _connection(is_accept=False, instance=10), _connection(is_accept=True, instance=20)
    b.receive_data(a.data_to_send(), _T0)
    a.receive_data(b.data_to_send(), _T0)
    for conn in (a, b):
        if conn.next_event() != PeerHello(conn.peer) or conn.state != LOGGED_IN:  # type: ignore[arg-type]
            raise AssertionError("the fuzzing handshake failed")
    return a, b


def _check_connection(conn: AdjacentConnection, *, logged_in: bool) -> None:
    """Invariants after the input went in: only events, at most one ConnectionClosed and last,
    the state matching it, and every byte the connection wrote decodes."""
    events = []
    while (event := conn.next_event()) is not None:
        events.append(event)
    closes = [e for e in events if isinstance(e, ConnectionClosed)]
    if conn.state == CLOSED:
        if closes != [events[-1]]:
            raise AssertionError(f"CLOSED with {len(closes)} ConnectionClosed events, not last")
    elif closes or conn.state != (LOGGED_IN if logged_in else "CONNECTED"):
        raise AssertionError(f"state {conn.state} with events {events!r}")
    if any(isinstance(e, PeerHello) for e in events) and conn.peer is None:
        raise AssertionError("PeerHello without a peer")
    conn.handle_timer(_T0 + 1000)  # whatever is pending: handshake timeout or idle close
    if conn.state != CLOSED:
        raise AssertionError(f"still {conn.state} after every deadline passed")
    out = conn.data_to_send()
    try:
        frames.FrameDecoder().feed(out)
    except FrameError as exc:
        raise AssertionError(f"the connection wrote bytes that do not decode: {exc}") from exc


def fuzz_frames(data: bytes) -> None:
    """Feed ``data`` to the decoder (whole, in pieces, and through ``decode``) and to adjacent
    connections before and after a handshake. Raises only for a bug (see the module)."""
    with contextlib.suppress(FrameError):
        frames.decode(data)
    step = (data[0] % 13 + 1) if data else 1
    for size in (len(data) or 1, step, 1):
        decoder = frames.FrameDecoder(65536)
        with contextlib.suppress(FrameError):
            for pos in range(0, len(data), size):
                decoder.feed(data[pos:pos + size])
    # after a handshake, whole and in pieces; then before it (a peer that skips its HELLO)
    for size in (len(data) or 1, step):
        _, b = _logged_in_pair()
        b.data_to_send()
        for i, pos in enumerate(range(0, len(data), size)):
            b.receive_data(data[pos:pos + size], _T0 + i * 0.001)
        _check_connection(b, logged_in=True)
    fresh = _connection(is_accept=True, instance=30)
    fresh.data_to_send()
    fresh.receive_data(data, _T0)
    _check_connection(fresh, logged_in=fresh.state == LOGGED_IN)  # LOGGED_IN: began with HELLO
