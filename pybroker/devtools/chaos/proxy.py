"""A fault-injection TCP proxy (asyncio, no dependency): put it between two instances on
127.0.0.1 by giving the routes its address. Every fault has a probability and a direction
(``up``: from the connecting side to the listening side, ``down``: back, or ``both``), and
every decision comes from a ``random.Random`` seeded with (seed, proxy name, connection
number, direction): a failing run's faults replay in the same order (the scheduling of the
event loop and of the processes is not replayed).

Stream faults (work on TLS too, the bytes are opaque): added latency and jitter (order kept),
a bandwidth limit, cutting the connection with a TCP reset in the middle of a chunk,
black-holing (accepting bytes and delivering none for a while, then a reset: the stream lost
bytes), slicing writes into pieces of 1-16 bytes, and refusing new connections for a while.

Frame faults need the frames in clear: when a stream starts with pybroker's frame magic
(an endpoint started with ``encryption=False``, SQL Server's ENCRYPTION = DISABLED) the proxy
cuts it into frames (``pybroker.core.wire.frames``' 12-byte prefix) and drops, duplicates,
reorders (holds one back behind the next) or flips one bit of whole MESSAGE, ACK and NOTICE
frames. HELLO, KEEPALIVE and CLOSE go through untouched. We chose that over terminating TLS
in the proxy: the proxy needs no keys, and the endpoint then relies on P6 alone (every
dialog frame's keyed MAC), which is what a flipped bit must meet.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from typing import Any

from pybroker.errors import BrokerError

_PREFIX = struct.Struct("!2sBBBBHI")
_FRAME_MAGIC = b"PB"
_FAULTABLE = {2, 3, 4}  # MESSAGE, ACK, NOTICE
_READ = 256 * 1024
_MAX_FRAME = 64 * 2**20

FAULTS = ("latency", "bandwidth", "reset", "blackhole", "slice", "refuse", "drop",
          "duplicate", "reorder", "flip")


@dataclass(frozen=True)
class Faults:
    """What a proxy does to the bytes; probabilities are per chunk read (stream faults), per
    frame (frame faults) or per accepted connection (``refuse``)."""

    direction: str = "both"  # up | down | both
    latency: float = 0.0  # seconds added to every chunk ...
    jitter: float = 0.0  # ... plus uniform(0, jitter); order is kept
    bandwidth: float = 0.0  # bytes per second, 0: unlimited
    reset: float = 0.0  # cut the connection (RST) in the middle of a chunk
    blackhole: float = 0.0  # deliver nothing for blackhole_time, then reset
    blackhole_time: float = 1.0
    slice: float = 0.0  # write the chunk's first 4 KiB in pieces of 1-16 bytes
    refuse: float = 0.0  # refuse new connections (accept, reset) for refuse_time
    refuse_time: float = 1.0
    drop: float = 0.0  # frames, when in clear
    duplicate: float = 0.0
    reorder: float = 0.0
    flip: float = 0.0

    def applies(self, direction: str) -> bool:
        return self.direction in ("both", direction)

    @property
    def any_frame_fault(self) -> bool:
        return bool(self.drop or self.duplicate or self.reorder or self.flip)


NONE = Faults()


def preset(names: set[str] | None = None, rate: float = 1.0) -> Faults:
    """Every fault named (default: all of FAULTS) at the chaos run's usual rates, times
    ``rate``."""
    names = set(FAULTS) if names is None else names
    unknown = names - set(FAULTS)
    if unknown:
        raise BrokerError(f"unknown fault(s) {sorted(unknown)}; the faults are "
                          f"{', '.join(FAULTS)}")
    p = min(1.0, rate)
    values: dict[str, Any] = {
        "latency": 0.002, "jitter": 0.01, "bandwidth": 20 * 2**20, "reset": 0.002 * p,
        "blackhole": 0.001 * p, "blackhole_time": 1.5, "slice": 0.02 * p,
        "refuse": 0.05 * p, "refuse_time": 1.0, "drop": 0.002 * p, "duplicate": 0.002 * p,
        "reorder": 0.002 * p, "flip": 0.001 * p}
    keep = {"latency": ("latency", "jitter"), "bandwidth": ("bandwidth",),
            "blackhole": ("blackhole", "blackhole_time"), "refuse": ("refuse", "refuse_time")}
    chosen: dict[str, Any] = {}
    for name in names:
        for key in keep.get(name, (name,)):
            chosen[key] = values[key]
    return Faults(**chosen)


@dataclass
class _Link:
    """One proxied connection: two pumps, two sockets."""

    number: int
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    closed: bool = False
    tasks: list[asyncio.Task] = field(default_factory=list)


class Proxy:
    """Listens on ``listen_port`` (0: a free one) and forwards to ``target_port``."""

    def __init__(self, group: ProxyGroup, name: str, target_port: int, listen_port: int,
                 faults: Faults) -> None:
        self.group = group
        self.name = name
        self.target_port = target_port
        self.listen_port = listen_port
        self.faults = faults
        self.counts: Counter[str] = Counter()
        self.refusing_until = 0.0
        self._links: dict[int, _Link] = {}
        self._next = 0
        self._server: asyncio.base_events.Server | None = None
        self._rng = random.Random(f"{group.seed}:{name}:accept")

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.listen_port}"

    async def start(self) -> None:
        """Listen (on the group's event loop)."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.listen_port,
                                                  limit=_READ)
        self.listen_port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and close every open connection."""
        if self._server is not None:
            self._server.close()
        self.cut_all(reset=False)

    def cut_all(self, *, reset: bool) -> None:
        """Close every open connection, with a TCP reset when ``reset`` (on the group's
        event loop)."""
        for link in list(self._links.values()):
            self._cut(link, reset=reset)

    def _cut(self, link: _Link, *, reset: bool) -> None:
        if link.closed:
            return
        link.closed = True
        for w in (link.client, link.server):
            if w is None:
                continue
            if reset:
                _reset(w)
            else:
                with contextlib.suppress(Exception):
                    w.close()
        for t in link.tasks:
            if t is not asyncio.current_task():
                t.cancel()
        self._links.pop(link.number, None)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._next += 1
        link = _Link(self._next, writer)
        now = time.monotonic()
        f = self.faults
        if now < self.refusing_until or (f.refuse and self._rng.random() < f.refuse):
            if now >= self.refusing_until:
                self.refusing_until = now + f.refuse_time
                self.counts["refuse"] += 1
            self.counts["refused_connections"] += 1
            _reset(writer)
            return
        try:
            s_reader, s_writer = await asyncio.open_connection("127.0.0.1", self.target_port,
                                                               limit=_READ)
        except OSError:
            self.counts["target_down"] += 1
            _reset(writer)
            return
        link.server = s_writer
        self.counts["connections"] += 1
        self._links[link.number] = link
        loop = asyncio.get_running_loop()
        link.tasks = [loop.create_task(self._pump(link, reader, s_writer, "up")),
                      loop.create_task(self._pump(link, s_reader, writer, "down"))]

    async def _pump(self, link: _Link, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter, direction: str) -> None:
        rng = random.Random(f"{self.group.seed}:{self.name}:{link.number}:{direction}")
        out: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(maxsize=64)
        writer_task = asyncio.get_running_loop().create_task(
            self._deliver(link, writer, out, rng, direction))
        link.tasks.append(writer_task)
        framing: bool | None = None
        buffer = bytearray()
        held: bytes | None = None
        last_at = 0.0
        try:
            while not link.closed:
                try:
                    data = await reader.read(_READ)
                except (OSError, ConnectionError):
                    data = b""
                if not data:
                    break
                f = self.faults if self.faults.applies(direction) else NONE
                pieces: list[bytes]
                if framing is None and (len(buffer) + len(data) >= 2):
                    framing = bytes(buffer + data)[:2] == _FRAME_MAGIC
                if framing and f.any_frame_fault:
                    buffer += data
                    pieces = []
                    while len(buffer) >= _PREFIX.size:
                        _m, _v, kind, _fl, _z, hlen, blen = _PREFIX.unpack_from(buffer)
                        end = _PREFIX.size + hlen + blen
                        if end > _MAX_FRAME:
                            framing = False  # not frames after all: pass the rest as is
                            pieces.append(bytes(buffer))
                            buffer.clear()
                            break
                        if len(buffer) < end:
                            break
                        frame = bytes(buffer[:end])
                        del buffer[:end]
                        if kind not in _FAULTABLE:
                            pieces.append(frame)
                            continue
                        if rng.random() < f.drop:
                            self.counts["drop"] += 1
                            continue
                        if rng.random() < f.flip:
                            self.counts["flip"] += 1
                            frame = _flip(frame, rng)
                        if rng.random() < f.duplicate:
                            self.counts["duplicate"] += 1
                            pieces.append(frame)
                        if held is None and rng.random() < f.reorder:
                            self.counts["reorder"] += 1
                            held = frame  # goes out after the next frame
                            continue
                        pieces.append(frame)
                        if held is not None:
                            pieces.append(held)
                            held = None
                    if not pieces:
                        continue
                else:
                    if buffer:  # frame faults were switched off meanwhile
                        data = bytes(buffer) + data
                        buffer.clear()
                    if held is not None:
                        data = held + data
                        held = None
                    pieces = [data]
                chunk = b"".join(pieces)
                delay = f.latency + (rng.random() * f.jitter if f.jitter else 0.0)
                at = max(time.monotonic() + delay, last_at)
                last_at = at
                await out.put((at, chunk))
        finally:
            if not link.closed:
                await out.put(None)

    async def _deliver(self, link: _Link, writer: asyncio.StreamWriter,
                       out: asyncio.Queue[tuple[float, bytes] | None], rng: random.Random,
                       direction: str) -> None:
        blackhole_until = 0.0
        try:
            while not link.closed:
                item = await out.get()
                if item is None:
                    break
                at, chunk = item
                wait = at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                f = self.faults if self.faults.applies(direction) else NONE
                now = time.monotonic()
                if blackhole_until:
                    if now < blackhole_until:
                        continue  # swallowed
                    self._cut(link, reset=True)  # the stream lost bytes: it cannot go on
                    return
                if f.blackhole and rng.random() < f.blackhole:
                    self.counts["blackhole"] += 1
                    blackhole_until = now + f.blackhole_time
                    # the stream lost bytes: it is cut when the black hole ends
                    asyncio.get_running_loop().call_later(
                        f.blackhole_time, lambda: self._cut(link, reset=True))
                    continue
                if f.reset and rng.random() < f.reset:
                    self.counts["reset"] += 1
                    cut = rng.randrange(len(chunk))
                    with contextlib.suppress(Exception):
                        writer.write(chunk[:cut])
                    self._cut(link, reset=True)
                    return
                if f.slice and rng.random() < f.slice:
                    self.counts["slice"] += 1
                    head, chunk = chunk[:4096], chunk[4096:]
                    pos = 0
                    while pos < len(head) and not link.closed:
                        n = rng.randint(1, 16)
                        writer.write(head[pos:pos + n])
                        pos += n
                        await writer.drain()
                        await asyncio.sleep(0)
                if chunk and not link.closed:
                    writer.write(chunk)
                    await writer.drain()
                    if f.bandwidth:
                        await asyncio.sleep(len(chunk) / f.bandwidth)
                self.counts["bytes_" + direction] += len(chunk)
            if not link.closed:
                with contextlib.suppress(Exception):
                    writer.write_eof()
                # both halves done: close the link
                if all(t.done() or t is asyncio.current_task() for t in link.tasks):
                    self._cut(link, reset=False)
        except (OSError, ConnectionError):
            self._cut(link, reset=False)
        except asyncio.CancelledError:
            raise


def _flip(frame: bytes, rng: random.Random) -> bytes:
    """One bit flipped after the prefix (a flipped prefix is a FrameError, not P6's case),
    or anywhere when there is nothing after it."""
    start = _PREFIX.size if len(frame) > _PREFIX.size else 0
    pos = rng.randrange(start, len(frame))
    out = bytearray(frame)
    out[pos] ^= 1 << rng.randrange(8)
    return bytes(out)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), not a FIN."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(Exception):
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(Exception):
        writer.transport.abort()


class ProxyGroup:
    """Proxies on one event loop in a background thread: ``add`` them, ``set_faults`` or
    ``heal`` them while they run, ``close`` at the end. ``seed`` drives every decision."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.proxies: dict[str, Proxy] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxy",
                                        daemon=True)
        self._thread.start()

    def _call(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def add(self, name: str, target_port: int, listen_port: int = 0,
            faults: Faults = NONE) -> Proxy:
        proxy = Proxy(self, name, target_port, listen_port, faults)
        self._call(proxy.start())
        self.proxies[name] = proxy
        return proxy

    def set_faults(self, faults: Faults, name: str | None = None) -> None:
        for p in self.proxies.values():
            if name is None or p.name == name:
                p.faults = faults

    def heal(self) -> None:
        """Pass-through from now on: no fault, no refusal window."""
        for p in self.proxies.values():
            p.faults = NONE
            p.refusing_until = 0.0

    def cut_all(self, name: str | None = None) -> None:
        """Reset every open connection (of one proxy or all)."""

        async def cut() -> None:
            for p in self.proxies.values():
                if name is None or p.name == name:
                    p.cut_all(reset=True)

        self._call(cut())

    def counts(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for p in self.proxies.values():
            total.update(p.counts)
        return dict(sorted(total.items()))

    def close(self) -> None:
        if self._loop.is_closed():
            return

        async def stop() -> None:
            for p in self.proxies.values():
                await p.stop()

        with contextlib.suppress(Exception):
            self._call(stop(), timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> ProxyGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def faults_from_dict(values: dict[str, Any]) -> Faults:
    names = {f.name for f in fields(Faults)}
    return replace(NONE, **{k: v for k, v in values.items() if k in names})
