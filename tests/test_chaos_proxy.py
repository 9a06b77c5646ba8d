"""The fault-injection proxy: pass-through is exact, every frame fault replays from its seed,
a refused connection and a cut one are seen as such."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from pybroker.devtools.chaos.proxy import NONE, Faults, ProxyGroup, preset
from pybroker.errors import BrokerError


class Sink:
    """A TCP server on a free port that keeps what each connection sent (until EOF)."""

    def __init__(self, reply: bytes = b"") -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(10)
        self.port = self.sock.getsockname()[1]
        self.got: list[bytes] = []
        self.reply = reply
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(10)
            if self.reply:
                conn.sendall(self.reply)
            data = bytearray()
            try:
                while chunk := conn.recv(65536):
                    data += chunk
            except OSError:
                pass
            self.got.append(bytes(data))

    def close(self) -> bytes:
        self.thread.join(timeout=15)
        self.sock.close()
        return self.got[0] if self.got else b""


def _frame(i: int) -> bytes:
    body = struct.pack("!I", i) * 4
    return struct.pack("!2sBBBBHI", b"PB", 1, 3, 0, 0, 0, len(body)) + body


def _send_through(group: ProxyGroup, name: str, faults: Faults, data: bytes,
                  reply: bytes = b"") -> tuple[bytes, bytes]:
    sink = Sink(reply)
    p = group.add(name, sink.port, faults=faults)
    back = bytearray()
    with socket.create_connection(("127.0.0.1", p.listen_port), timeout=10) as c:
        try:
            c.sendall(data)
            c.shutdown(socket.SHUT_WR)
            while chunk := c.recv(65536):
                back += chunk
        except OSError:
            pass
    return sink.close(), bytes(back)


def _indices(data: bytes) -> list[int]:
    out = []
    while data:
        (n,) = struct.unpack_from("!I", data, 12)
        out.append(n)
        data = data[12 + 16:]
    return out


def test_pass_through_is_exact_both_ways():
    data = bytes(range(256)) * 4000
    with ProxyGroup(seed=1) as group:
        got, back = _send_through(group, "p", NONE, data, reply=b"pong" * 1000)
    assert got == data and back == b"pong" * 1000


def test_frame_faults_replay_from_the_seed():
    frames = b"".join(_frame(i) for i in range(500))
    faults = Faults(drop=0.1, duplicate=0.1, reorder=0.1)
    runs = []
    for seed in (5, 5, 6):
        with ProxyGroup(seed=seed) as group:
            got, _ = _send_through(group, "p", faults, frames)
            counts = group.counts()
        runs.append((_indices(got), counts["drop"], counts["duplicate"], counts["reorder"]))
    assert runs[0] == runs[1]  # the same seed, the same faults
    assert runs[0][0] != runs[2][0]
    seen, drops, dups, reorders = runs[0]
    assert len(seen) == 500 - drops + dups and drops and dups and reorders
    assert seen != sorted(seen)


def test_a_flipped_bit_is_after_the_prefix_and_tls_bytes_are_not_parsed():
    frames = b"".join(_frame(i) for i in range(50))
    with ProxyGroup(seed=2) as group:
        got, _ = _send_through(group, "p", Faults(flip=1.0), frames)
        opaque, _ = _send_through(group, "q", Faults(flip=1.0, drop=1.0), b"\x16\x03" + frames)
    assert len(got) == len(frames)
    diff = [i for i in range(len(got)) if got[i] != frames[i]]
    assert len(diff) == 50 and all(i % 28 >= 12 for i in diff)
    assert opaque == b"\x16\x03" + frames  # not frames in clear: untouched


def test_refused_and_cut_connections():
    data = b"x" * 200_000
    with ProxyGroup(seed=3) as group:
        sink = Sink()
        p = group.add("refuser", sink.port, faults=Faults(refuse=1.0, refuse_time=30))
        try:  # reset at once (even before connect returns) or closed: never served
            with socket.create_connection(("127.0.0.1", p.listen_port), timeout=10) as c:
                c.sendall(b"hello")
                assert c.recv(10) == b""
        except OSError:
            pass
        assert group.counts()["refuse"] == 1
        group.heal()  # no refusal window any more
        got, _ = _send_through(group, "p", NONE, b"after")
        assert got == b"after"
        sink.sock.close()
        got, _ = _send_through(group, "cut", Faults(reset=1.0), data)
        assert len(got) < len(data) and group.counts()["reset"] >= 1


def test_presets_name_every_fault_and_refuse_unknown_ones():
    every = preset()
    assert every.latency and every.drop and every.flip and every.refuse and every.blackhole
    only = preset({"latency"})
    assert only.latency and not only.drop and not only.reset
    with pytest.raises(BrokerError, match="unknown fault"):
        preset({"meteor"})
