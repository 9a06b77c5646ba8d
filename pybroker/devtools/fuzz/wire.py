"""Fuzz targets for every decoder that reads bytes from the network, and a seeded generator
of arbitrary and mutated valid inputs for each.

A target is ``def target(data: bytes) -> None``: it feeds ``data`` to a decoder and returns
when the decoder accepted it or refused it with its documented error (``FrameError``); any
other exception escapes (a crash). Valid inputs are built from the sample frames of
``pybroker.devtools.fuzz.frames`` and changed by its mutations. ``run(name, count, seed)`` drives
one target with ``count`` inputs from ``inputs(name, seed)`` and reports crashes and the
slowest input.

- ``frames``: a whole frame through ``frames.decode`` and, cut in two, through a
  ``FrameDecoder``;
- ``handshake``: a connection's first bytes (the peer's HELLO and what follows) through the
  sans-I/O ``AdjacentConnection``, which must never raise (it closes with an event);
- ``ack``: an ACK frame's body (the acknowledgement entries), then each entry's MAC check
  and the merge of pending acknowledgements;
- ``notice``: a NOTICE frame's header and flags, then its MAC check.
"""

from __future__ import annotations

import random
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from pybroker.core.wire import adjacent, frame_macs, frame_types, frames
from pybroker.devtools.fuzz.frames import KEY, mutate, sample_frame
from pybroker.errors import FrameError

# -- what each target decodes -------------------------------------------------------------


def _prefix(kind: int, flags: int, header: bytes, body: bytes) -> bytes:
    return frames.PREFIX.pack(frames.MAGIC, frames.VERSION, kind, flags, 0, len(header),
                              len(body))


def _parts(frame: frames.Frame) -> tuple[int, bytes, bytes]:
    raw = frames.encode(frame)
    _m, _v, _k, flags, _z, hlen, _blen = frames.PREFIX.unpack_from(raw)
    return flags, raw[12:12 + hlen], raw[12 + hlen:]


def _frames(data: bytes) -> bool:
    decoder = frames.FrameDecoder()
    cut = data[0] % (len(data) + 1) if data else 0
    try:
        decoder.feed(data[:cut])
        decoder.feed(data[cut:])
    except FrameError:
        pass
    try:
        frames.decode(data)
    except FrameError:
        return False
    return True


def _handshake(data: bytes) -> bool:
    hello = frames.Hello(str(uuid.UUID(int=1)), (), frames.DEFAULT_MAX_BODY, "",
                         bytes(frames.KEY_ID_SIZE))
    conn = adjacent.AdjacentConnection(is_accept=True, hello=hello, now=0.0,
                                       sign_ack=lambda e: e, handshake_timeout=10.0)
    # the first byte says where the bytes that follow are cut in two
    cut, data = (data[0] % len(data), data[1:]) if data else (0, b"")
    if cut:
        conn.receive_data(data[:cut], 1.0)
    conn.receive_data(data[cut:], 2.0)
    conn.handle_timer(20.0)  # past the handshake deadline
    for _ in range(10_000):
        if conn.next_event() is None:
            break
    conn.data_to_send()
    return conn.peer is not None


def _ack(data: bytes) -> bool:
    """``data`` is an ACK frame's body."""
    try:
        frame = frames.decode(_prefix(frames.ACK, 0, b"", data) + data)
    except FrameError:
        return False
    assert isinstance(frame, frames.Ack)
    pending: frame_types.AckEntry | None = None
    for entry in frame.entries:
        frame_macs.verify(entry, KEY)
        if pending is None or pending.conversation_id == entry.conversation_id:
            pending = adjacent.merge_ack(pending, entry)
    return True


def _notice(data: bytes) -> bool:
    """``data`` is one flags byte and a NOTICE frame's header."""
    flags, header = (data[0], data[1:]) if data else (0, b"")
    try:
        frame = frames.decode(_prefix(frames.NOTICE, flags, header, b"") + header)
    except FrameError:
        return False
    assert isinstance(frame, frames.Notice)
    frame_macs.verify(frame, KEY)
    return True


def target_frames(data: bytes) -> None:
    """A whole frame through ``frames.decode``, and cut in two through a FrameDecoder."""
    _frames(data)


def target_handshake(data: bytes) -> None:
    """A connection's first bytes through AdjacentConnection (which never raises)."""
    _handshake(data)


def target_ack(data: bytes) -> None:
    """An ACK frame's body: its entries, their MAC checks, their merge."""
    _ack(data)


def target_notice(data: bytes) -> None:
    """A flags byte and a NOTICE header: the notice and its MAC check."""
    _notice(data)


def valid_input(name: str, rng: random.Random) -> bytes:
    if name == "frames":
        return frames.encode(sample_frame(rng))
    if name == "handshake":
        first = frames.encode(sample_frame(rng, frames.HELLO))
        more = b"".join(frames.encode(sample_frame(rng)) for _ in range(rng.randint(0, 2)))
        return bytes((rng.randrange(256),)) + first + more
    if name == "ack":
        return _parts(sample_frame(rng, frames.ACK))[2]
    flags, header, _ = _parts(sample_frame(rng, frames.NOTICE))
    return bytes((flags,)) + header


TARGETS: dict[str, Callable[[bytes], None]] = {
    "frames": target_frames, "handshake": target_handshake, "ack": target_ack,
    "notice": target_notice}
_COUNTING: dict[str, Callable[[bytes], bool]] = {
    "frames": _frames, "handshake": _handshake, "ack": _ack, "notice": _notice}


def inputs(name: str, seed: int = 0) -> Iterator[bytes]:
    """Endless seeded inputs for target ``name``: one in five arbitrary bytes (0-256 long,
    sometimes behind a valid frame prefix), the rest valid inputs mutated."""
    if name not in TARGETS:
        raise KeyError(name)
    rng = random.Random(f"{seed}:{name}")
    corpus = [valid_input(name, rng) for _ in range(64)]
    while True:
        r = rng.random()
        if r < 0.1:
            yield rng.randbytes(rng.randint(0, 256))
        elif r < 0.2:
            body = rng.randbytes(rng.randint(0, 128))
            yield struct.pack("!2sBBBBHI", b"PB", frames.VERSION, rng.randint(0, 7),
                              rng.randrange(16), 0,
                              len(body) if rng.random() < 0.5 else 0,
                              0 if rng.random() < 0.5 else len(body)) + body
        elif r < 0.25:
            fresh = valid_input(name, rng)
            corpus[rng.randrange(len(corpus))] = fresh
            yield fresh
        else:
            yield mutate(rng.choice(corpus), rng)


def run(name: str, count: int, seed: int = 0, *, hang_seconds: float = 1.0) -> dict[str, Any]:
    """``count`` inputs through target ``name`` (per-input time is CPU time; over
    ``hang_seconds`` counts as a hang): how many were accepted (decoded; for the
    handshake: logged in), how many refused (FrameError; a connection closed), crashes
    (anything else) with examples, and the slowest input."""
    target = _COUNTING[name]
    started = time.perf_counter()
    crashes, hangs, slowest, slowest_input = 0, 0, 0.0, 0
    examples: list[str] = []
    decoded = rejected = 0
    for i, data in enumerate(inputs(name, seed)):
        if i >= count:
            break
        t = time.process_time()  # CPU time: a busy machine's scheduling is not a hang
        try:
            if target(data):
                decoded += 1
            else:
                rejected += 1
        except Exception as exc:  # a crash: the decoder let something else out
            crashes += 1
            if len(examples) < 5:
                examples.append(f"input {i} ({data[:64].hex()}...): "
                                f"{type(exc).__name__}: {exc}")
        took = time.process_time() - t
        if took > slowest:
            slowest, slowest_input = took, i
        if took > hang_seconds:
            hangs += 1
    return {"target": name, "inputs": count, "seed": seed,
            "seconds": round(time.perf_counter() - started, 1), "decoded": decoded,
            "rejected": rejected, "crashes": crashes, "hangs": hangs,
            "slowest_ms": round(slowest * 1000, 2), "slowest_input": slowest_input,
            "examples": examples}
