"""Hostile peers do not hurt an instance: garbage bytes, oversized length fields, a silent
peer that never completes the handshake, a flood of connections, an untrusted certificate.
Each is closed with an event, and a well-behaved peer keeps being served throughout."""

from __future__ import annotations

import socket
import ssl
import struct
import time

from tests.wire_helpers import CONTRACT, ORDER, drain, instance_pair, wait_for


def _events(inst, subclass: str | None = None) -> list[tuple]:
    rows = inst.sql("SELECT event_class, subclass, description FROM broker_events "
                    "ORDER BY event_id").fetchall()
    return [r for r in rows if subclass is None or r[1] == subclass]


def _flush_events(inst) -> None:
    inst.run_pending()  # writes the events gathered by the endpoint threads


def test_garbage_oversized_silent_and_flooding_peers(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path, handshake_timeout=0.5)
    try:
        port = b.endpoint.port
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<before/>", message_type=ORDER)
        assert drain(stock, "StockQueue", 1)[0].message_body == b"<before/>"

        socks = []
        # garbage instead of a TLS ClientHello
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"\x00garbage" * 1000)
        socks.append(s)
        # a TLS record header announcing an enormous record
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(struct.pack("!BHH", 22, 0x0303, 0xFFFF) + b"\x01" * 100)
        socks.append(s)
        # a silent peer: connects and says nothing (the handshake times out)
        silent = socket.create_connection(("127.0.0.1", port))
        # a TLS client without a certificate b trusts
        raw = socket.create_connection(("127.0.0.1", port))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            tls = ctx.wrap_socket(raw)
            tls.sendall(b"PB" + bytes(10))
            tls.recv(100)
        except (ssl.SSLError, OSError):
            pass
        socks.append(raw)
        # a flood of connections
        for _ in range(100):
            try:
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                break

        # the well-behaved peer is still served while all that is open
        with shop.transaction():
            for i in range(50):
                conv.send(f"<during n='{i}'/>".encode(), message_type=ORDER)
        got = drain(stock, "StockQueue", 50)
        assert [m.message_body for m in got] == [
            f"<during n='{i}'/>".encode() for i in range(50)]
        for s in socks:
            s.close()

        def timed_out():
            _flush_events(b)
            reasons = [r[2] for r in _events(b, "Authentication Failure")]
            return len(reasons) >= 4 and any("handshake" in r.lower() for r in reasons)

        wait_for(timed_out, what="the hostile connections refused, the silent one timed out")
        silent.close()
        # and still served afterwards
        conv.send(b"<after/>", message_type=ORDER)
        assert drain(stock, "StockQueue", 1)[0].message_body == b"<after/>"
        wait_for(lambda: a.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0]
                 == 0, what="every message acknowledged")
    finally:
        a.close()
        b.close()


def test_frames_with_wrong_macs_are_discarded_with_an_event(tmp_path):
    """P6: a fragment whose MAC does not match is dropped unacknowledged and recorded."""
    from pybroker.core.wire import frame_macs

    a, b, shop, stock = instance_pair(tmp_path)
    try:
        transport = a.endpoint.transport
        real = frame_macs.encode_message
        spoiled = []

        def bad_encode(f, key, ack=None):
            if f.sequence == 0 and not spoiled:  # signed under another key: a wrong MAC
                spoiled.append(f)
                return real(f, bytes(32), ack)
            return real(f, key, ack)

        frame_macs.encode_message = bad_encode  # the first copy of message 0 leaves spoiled
        try:
            conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
            conv.send(b"<x/>", message_type=ORDER)

            def corrupted():
                _flush_events(b)
                return _events(b, "MAC mismatch")

            wait_for(corrupted, what="a corrupted-message event")
        finally:
            frame_macs.encode_message = real
        # the resend (after 4 s x retry_scale) is signed properly and delivered once
        got = drain(stock, "StockQueue", 1)
        assert got[0].message_body == b"<x/>"
        time.sleep(0.3)
        assert stock.receive("StockQueue", max_messages=10) == []
        assert transport.transmitter.fragments_resent >= 1
    finally:
        a.close()
        b.close()
