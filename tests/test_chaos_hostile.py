"""A live hostile peer against an endpoint without TLS (ENCRYPTION = DISABLED, where P6's
MACs are the only proof): a half handshake, oversized frame length fields, garbage, a
valid handshake that claims a trusted peer's key and address followed by MESSAGE, ACK and
NOTICE frames with wrong MACs, and a flood of connections. The instance keeps serving the
well-behaved peer both ways throughout, records the events, and loses nothing."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import struct
import time
import uuid

from pybroker.core.wire import certificates, frame_types, frames
from tests.wire_helpers import CONTRACT, ORDER, drain, instance_pair, wait_for


def _events(inst, subclass: str) -> list[tuple]:
    inst.run_pending()
    return inst.sql("SELECT peer_address, description FROM sys.broker_events WHERE "
                    "subclass = ? ORDER BY event_id", [subclass]).fetchall()


def _read_frames(sock: socket.socket, want: int, timeout: float = 10.0) -> list:
    decoder = frames.FrameDecoder()
    got: list = []
    sock.settimeout(0.5)
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        if not data:
            break
        got += decoder.feed(data)
    return got


def test_hostile_peer_without_tls_changes_nothing(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path, encryption=False, handshake_timeout=0.5)
    socks: list[socket.socket] = []
    try:
        port = b.endpoint.port
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<m n='0'/>", message_type=ORDER)
        first = drain(stock, "StockQueue", 1)[0]
        assert first.message_body == b"<m n='0'/>"
        conv_id, a_broker = a.sql("SELECT conversation_id, far_broker_instance FROM "
                                  "sys.conversation_endpoints").fetchone()

        def connect() -> socket.socket:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            socks.append(s)
            return s

        a_key = certificates.certificate_info(a.certificate).key_id
        hello = frames.encode(frames.Hello(str(uuid.uuid4()), (), frames.DEFAULT_MAX_BODY,
                                           a.endpoint.address, a_key))
        # a half handshake: the first 20 bytes of a HELLO, then silence
        connect().sendall(hello[:20])
        # oversized length fields: a 64 KiB header, a 4 GiB body
        v = frames.VERSION
        connect().sendall(struct.pack("!2sBBBBHI", b"PB", v, 2, 0, 0, 0xFFFF, 0xFFFFFFFF))
        connect().sendall(struct.pack("!2sBBBBHI", b"PB", v, 3, 0, 0, 0, 0xFFFFFFFF))
        # garbage
        connect().sendall(b"\x00\xffgarbage" * 500)
        # a valid handshake claiming to be A (key ids are public), with A's address
        liar = connect()
        liar.sendall(hello)
        assert isinstance(_read_frames(liar, 1)[0], frames.Hello)  # logged in as "A"
        forged = frames.MessageFragment(
            conv_id, True, 1, 0, 1, 9, "ShopService", "StockService", shop.broker_instance,
            stock.broker_instance, CONTRACT, ORDER, "N", False, False, 5,
            2**62, 255, a_key, b"<forged/>", None, bytes(16))
        forged_end = dataclasses.replace(
            forged, sequence=2, is_end_of_dialog=True, message_type=(
                "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"), body=b"",
            message_size=0, mac=b"\x01" * 16)
        ack = frames.Ack((frame_types.AckEntry(conv_id, False, stock.broker_instance, a_key,
                                               1000, (), bytes(16)),))
        notice = frames.Notice(conv_id, False, a_broker, 0, -8408, "forged: contract not "
                               "supported", True, a_key, bytes(16))
        for frame in (forged, forged_end, ack, notice):
            liar.sendall(frames.encode(frame))
        # a flood of connections
        for _ in range(60):
            try:
                connect()
            except OSError:
                break

        # the well-behaved peer is served both ways while all that is open
        with shop.transaction():
            for i in range(1, 31):
                conv.send(f"<m n='{i}'/>".encode(), message_type=ORDER)
        got = drain(stock, "StockQueue", 30)
        assert [m.message_body for m in got] == [f"<m n='{i}'/>".encode()
                                                 for i in range(1, 31)]
        assert [m.message_sequence_number for m in got] == list(range(1, 31))
        reply = stock.conversation(first.conversation_handle)
        with stock.transaction():
            for i in range(10):
                reply.send(f"<r n='{i}'/>".encode(), message_type=ORDER)
        back = drain(shop, "ShopQueue", 10)
        assert [m.message_body for m in back] == [f"<r n='{i}'/>".encode()
                                                  for i in range(10)]

        corrupted = wait_for(lambda: len(_events(b, "MAC mismatch")) >= 4 and
                             _events(b, "MAC mismatch"), what="MAC mismatch events at B")
        assert len(corrupted) >= 4  # two fragments, an acknowledgement, a notice
        closing = wait_for(lambda: " ".join(d for _p, d in _events(b, "Closing"))
                           if "handshake timed out" in " ".join(
                               d for _p, d in _events(b, "Closing")) else None,
                           what="the half handshake timing out")
        assert "over 16384" in closing  # the oversized header length field
        assert "not a pybroker frame" in closing  # the garbage
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()
        wait_for(lambda: a.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0]
                 == 0 and b.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0]
                 == 0, what="every message acknowledged")
        # nothing forged got in: no extra message, both sides still conversing
        assert stock.receive("StockQueue", max_messages=10) == []
        assert shop.receive("ShopQueue", max_messages=10) == []
        states = sorted(r[0] for r in a.sql("SELECT state FROM sys.conversation_endpoints")
                        .fetchall() + b.sql("SELECT state FROM sys.conversation_endpoints")
                        .fetchall())
        assert states == ["CO", "CO"]
        # and the endpoint still serves after the storm
        conv.send(b"<after/>", message_type=ORDER)
        assert drain(stock, "StockQueue", 1)[0].message_body == b"<after/>"
    finally:
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()
        a.close()
        b.close()


def test_a_liar_without_tls_cannot_become_the_path_to_the_peer_it_names(tmp_path):
    """Without TLS a HELLO proves nothing (key ids are public): a peer that connects first,
    claiming A's key id and A's address, must not become B's way to A, or B's replies to A
    would go to it (never acknowledged, resent to it while it stays)."""
    a, b, shop, stock = instance_pair(tmp_path, encryption=False)
    liar = None
    try:
        a_key = certificates.certificate_info(a.certificate).key_id
        liar = socket.create_connection(("127.0.0.1", b.endpoint.port), timeout=5)
        liar.sendall(frames.encode(frames.Hello(str(uuid.uuid4()), (),
                                                frames.DEFAULT_MAX_BODY,
                                                a.endpoint.address, a_key)))
        assert isinstance(_read_frames(liar, 1)[0], frames.Hello)
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<order/>", message_type=ORDER)
        got = drain(stock, "StockQueue", 1)[0]
        stock.conversation(got.conversation_handle).send(b"<reply/>", message_type=ORDER)
        assert drain(shop, "ShopQueue", 1, timeout=30)[0].message_body == b"<reply/>"
    finally:
        if liar is not None:
            liar.close()
        a.close()
        b.close()
