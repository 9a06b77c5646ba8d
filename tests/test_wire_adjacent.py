"""The adjacent broker connection (P2, P5.1), sans-I/O: two connections linked in memory with a
virtual clock, in the manner of aioquic's tests (exact timer values, no sleeping)."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pybroker.core.wire import frame_macs, frame_types, frames
from pybroker.core.wire.adjacent import (
    MIN_PEER_MAX_BODY,
    AcksReceived,
    AdjacentConnection,
    ConnectionClosed,
    FragmentReceived,
    NoticeReceived,
    PeerHello,
    merge_ack,
)
from pybroker.errors import FrameError, WireError

T0 = 1_800_000_000.0
KEY = b"k" * 32
KEY_ID = b"keyid-01"
A_ID, B_ID = str(uuid.UUID(int=0xA)), str(uuid.UUID(int=0xB))
DB_A, DB_B = str(uuid.UUID(int=0xA1)), str(uuid.UUID(int=0xB1))
CONV = str(uuid.UUID(int=0xC0))
CONV2 = str(uuid.UUID(int=0xC1))


def sign_ack(entry: frame_types.AckEntry) -> frame_types.AckEntry:
    return frame_macs.sign(entry, KEY)


def hello(instance_id: str = A_ID, db: str = DB_A,
          max_body: int = frames.DEFAULT_MAX_BODY) -> frames.Hello:
    return frames.Hello(instance_id, (db,), max_body)


def connection(*, is_accept: bool = False, now: float = T0, **kw) -> AdjacentConnection:
    h = kw.pop("hello", None) or (hello(B_ID, DB_B) if is_accept else hello())
    return AdjacentConnection(is_accept=is_accept, hello=h, now=now, sign_ack=sign_ack, **kw)


def fragment(seq: int = 1, *, conv: str = CONV, from_initiator: bool = True,
             body: bytes = b"<hello/>") -> frames.MessageFragment:
    f = frames.MessageFragment(
        conversation_id=conv, from_initiator=from_initiator, sequence=seq, fragment_number=0,
        fragment_count=1, message_size=len(body), from_service="Initiator" if from_initiator
        else "Target", to_service="Target" if from_initiator else "Initiator",
        from_broker_instance=DB_A if from_initiator else DB_B,
        to_broker_instance=DB_B if from_initiator else DB_A, contract="C",
        message_type="M", validation="N", is_end_of_dialog=False, is_error=False, priority=5,
        lifetime_ms=2**40, hops_remaining=32, key_id=KEY_ID, body=body)
    return frame_macs.sign(f, KEY)


def ack(through: int, ranges=(), *, conv: str = CONV, acks_initiator: bool = True,
        broker: str = DB_B, key_id: bytes = KEY_ID) -> frame_types.AckEntry:
    return frame_types.AckEntry(conv, acks_initiator, broker, key_id, through, tuple(ranges))


def notice() -> frames.Notice:
    n = frames.Notice(CONV, True, DB_B, 3, -8490, "The remote service has been dropped.",
                      True, KEY_ID)
    return frame_macs.sign(n, KEY)


def events(conn: AdjacentConnection) -> list:
    out = []
    while (e := conn.next_event()) is not None:
        out.append(e)
    return out


def decode_all(data: bytes) -> list[frames.Frame]:
    decoder = frames.FrameDecoder()
    out = decoder.feed(data)
    assert decoder.buffered == 0
    return out


class Link:
    """Two connections and the wire between them; counts the bytes moved each way."""

    def __init__(self, now: float = T0, **kw) -> None:
        self.a = connection(now=now, **kw)
        self.b = connection(is_accept=True, now=now, **kw)
        self.moved = {"a->b": 0, "b->a": 0}
        self.now = now

    def transfer(self, now: float | None = None) -> None:
        now = self.now if now is None else now
        while True:
            ab, ba = self.a.data_to_send(), self.b.data_to_send()
            if not ab and not ba:
                return
            if ab:
                self.moved["a->b"] += len(ab)
                self.b.receive_data(ab, now)
            if ba:
                self.moved["b->a"] += len(ba)
                self.a.receive_data(ba, now)

    def handshake(self) -> None:
        self.transfer()
        assert [type(e) for e in events(self.a)] == [PeerHello]
        assert [type(e) for e in events(self.b)] == [PeerHello]

    def run_until(self, end: float) -> list[float]:
        """Fire both connections' timers in time order up to ``end``; the times they fired."""
        fired: list[float] = []
        while True:
            assert len(fired) < 10_000, "timers that do not move on when handled"
            timers = [t for t in (self.a.get_timer(), self.b.get_timer()) if t is not None]
            if not timers or min(timers) > end:
                self.now = end
                return fired
            self.now = min(timers)
            fired.append(self.now)
            for conn in (self.a, self.b):
                timer = conn.get_timer()
                if timer is not None and timer <= self.now:
                    conn.handle_timer(self.now)
            self.transfer()


# -- handshake ---------------------------------------------------------------------------


def test_handshake_both_ways() -> None:
    link = Link()
    a, b = link.a, link.b
    assert (a.state, a.login_state_desc, a.peer, a.login_time) == (
        "CONNECTED", "WAIT LOGIN NEGOTIATE", None, None)
    assert not a.is_accept and b.is_accept
    assert a.get_timer() == T0 + 10.0
    out = a.data_to_send()
    assert decode_all(out) == [hello()]
    link.b.receive_data(out, T0 + 1)
    assert events(b) == [PeerHello(hello())]
    assert (b.state, b.login_state_desc, b.login_time, b.peer) == (
        "LOGGED_IN", "ONLINE", T0 + 1, hello())
    a.receive_data(b.data_to_send(), T0 + 2)
    assert events(a) == [PeerHello(hello(B_ID, DB_B))]
    assert (a.state, a.login_state_desc, a.login_time) == ("LOGGED_IN", "ONLINE", T0 + 2)
    # once logged in, the handshake time-out is gone: the next deadline is the keepalive
    assert a.get_timer() == T0 + 30.0
    a.handle_timer(T0 + 10.0)
    assert a.state == "LOGGED_IN" and a.data_to_send() == b""


def test_handshake_timeout() -> None:
    a = connection()
    a.data_to_send()
    a.handle_timer(T0 + 9.999)
    assert a.state == "CONNECTED" and events(a) == []
    a.handle_timer(T0 + 10.0)
    assert events(a) == [ConnectionClosed("handshake timed out after 10 s", True)]
    assert (a.state, a.login_state_desc, a.get_timer()) == ("CLOSED", "ERROR", None)
    assert decode_all(a.data_to_send()) == [frames.Close("handshake timed out after 10 s")]


def test_hello_is_validated_at_construction() -> None:
    with pytest.raises(WireError):
        connection(hello=hello(max_body=2**20), max_body=2**16)
    with pytest.raises(WireError):
        connection(hello=hello(max_body=MIN_PEER_MAX_BODY - 1), max_body=MIN_PEER_MAX_BODY - 1)


@pytest.mark.parametrize("first", [
    frames.Keepalive(), frames.Ack(()), frames.Close("bye"), None])
def test_frames_before_hello_are_a_login_protocol_error(first) -> None:
    a = connection()
    a.data_to_send()
    data = frames.encode(fragment() if first is None else first)
    a.receive_data(data + frames.encode(hello(B_ID, DB_B)), T0 + 1)
    (closed,) = events(a)
    assert closed.error is True
    assert closed.reason.startswith("protocol error: Login Protocol Error: a ")
    assert a.state == "CLOSED" and a.login_state_desc == "ERROR" and a.peer is None
    assert decode_all(a.data_to_send()) == [frames.Close(closed.reason)]


def test_second_hello_and_small_max_body_are_refused() -> None:
    a = connection()
    a.receive_data(frames.encode(hello(B_ID, DB_B)) * 2, T0)
    assert events(a) == [PeerHello(hello(B_ID, DB_B)),
                         ConnectionClosed("protocol error: Login Protocol Error: a second "
                                          "HELLO", True)]
    b = connection()
    b.receive_data(frames.encode(hello(B_ID, DB_B, max_body=65535)), T0)
    (closed,) = events(b)
    assert closed.error and "max_body 65535" in closed.reason and b.state == "CLOSED"
    c = connection()
    c.receive_data(frames.encode(hello(B_ID, DB_B, max_body=65536)), T0)
    assert [type(e) for e in events(c)] == [PeerHello]


# -- fragments, notices, acknowledgements ---------------------------------------------


def test_fragments_flow_in_order_both_ways() -> None:
    link = Link()
    link.handshake()
    sent = [fragment(i, body=bytes([i]) * (i * 100)) for i in range(1, 8)]
    for f in sent:
        link.a.send_fragment(f, T0 + 1)
    replies = [fragment(i, from_initiator=False) for i in range(1, 3)]
    for f in replies:
        link.b.send_fragment(f, T0 + 1)
    link.transfer(T0 + 1)
    got = events(link.b)
    assert got == [FragmentReceived(f) for f in sent]
    assert all(frame_macs.verify(e.fragment, KEY) for e in got)
    assert events(link.a) == [FragmentReceived(f) for f in replies]


def test_notice_is_sent_at_once() -> None:
    link = Link()
    link.handshake()
    link.b.send_notice(notice(), T0 + 1)
    link.transfer(T0 + 1)
    assert events(link.a) == [NoticeReceived(notice())]


def test_frames_sent_before_login_are_held_until_the_peers_hello() -> None:
    a, b = connection(), connection(is_accept=True)
    a.send_fragment(fragment(1), T0)
    a.send_notice(notice(), T0)
    assert decode_all(a.data_to_send()) == [hello()]
    assert not a.is_idle
    with pytest.raises(WireError):  # the peer's limit is unknown: only MIN_PEER_MAX_BODY fits
        a.send_fragment(fragment(2, body=bytes(MIN_PEER_MAX_BODY + 1)), T0)
    b.data_to_send()
    a.receive_data(frames.encode(hello(B_ID, DB_B)), T0 + 1)
    assert decode_all(a.data_to_send()) == [fragment(1), notice()]
    assert a.is_idle and a.total_fragments_sent == 1


def test_fragment_over_the_peers_max_body_is_refused() -> None:
    a = connection()
    a.receive_data(frames.encode(hello(B_ID, DB_B, max_body=70000)), T0)
    a.send_fragment(fragment(1, body=bytes(70000)), T0)
    with pytest.raises(WireError, match="over the peer's limit of 70000"):
        a.send_fragment(fragment(2, body=bytes(70001)), T0)


def test_ack_is_piggybacked_on_a_fragment_going_the_other_way() -> None:
    link = Link()
    link.handshake()
    link.a.send_fragment(fragment(1), T0 + 1)
    link.transfer(T0 + 1)
    assert events(link.b) == [FragmentReceived(fragment(1))]
    link.b.queue_acks([ack(2)], T0 + 1)  # b acknowledges what the initiator sent
    assert link.b.get_timer() == T0 + 1 + 0.005
    # a reply on the same conversation within ack_delay carries it
    link.b.send_fragment(fragment(1, from_initiator=False), T0 + 1.004)
    assert link.b.is_idle is False and link.b.pending_ack_count == 0
    link.transfer(T0 + 1.004)
    signed = sign_ack(ack(2))
    assert events(link.a) == [AcksReceived((signed,)),
                              FragmentReceived(fragment(1, from_initiator=False))]
    assert frame_macs.verify(signed, KEY)
    # nothing left to flush: the next deadline is the keepalive, and no ACK frame follows
    assert link.b.get_timer() == T0 + 1.004 + 30.0
    link.b.handle_timer(T0 + 1.005)
    assert link.b.data_to_send() == b""


def test_ack_is_not_piggybacked_on_the_same_direction_or_another_conversation() -> None:
    link = Link()
    link.handshake()
    link.b.queue_acks([ack(2)], T0 + 1)
    link.b.send_fragment(fragment(1, from_initiator=True), T0 + 1)  # same direction
    link.b.send_fragment(fragment(1, conv=CONV2, from_initiator=False), T0 + 1)
    assert link.b.pending_ack_count == 1
    frames_out = decode_all(link.b.data_to_send())
    assert [f.ack for f in frames_out] == [None, None]


def test_dedicated_ack_frame_exactly_after_ack_delay() -> None:
    link = Link(ack_delay=0.05)
    link.handshake()
    t1 = T0 + 3.25
    link.b.queue_acks([ack(2)], t1)
    link.b.queue_acks([ack(1, conv=CONV2, acks_initiator=False)], t1 + 0.01)
    assert link.b.get_timer() == t1 + 0.05
    link.b.handle_timer(t1 + 0.049)
    assert link.b.data_to_send() == b""
    link.b.handle_timer(link.b.get_timer())
    (frame,) = decode_all(link.b.data_to_send())
    assert frame == frames.Ack((sign_ack(ack(2)),
                                sign_ack(ack(1, conv=CONV2, acks_initiator=False))))
    assert all(frame_macs.verify(e, KEY) for e in frame.entries)
    assert link.b.is_idle and link.b.get_timer() == t1 + 0.05 + 30.0
    link.a.receive_data(frames.encode(frame), t1 + 0.06)
    assert events(link.a) == [AcksReceived(frame.entries)]


def test_pending_acks_merge_per_conversation_direction() -> None:
    link = Link()
    link.handshake()
    link.b.queue_acks([ack(3, [(5, 0, 2), (7, 1, 1), (9, 4, 4)])], T0 + 1)
    link.b.queue_acks([ack(5, [(5, 3, 4), (6, 0, 0), (7, 2, 3), (4, 0, 0), (9, 0, 2)],
                           broker=DB_A, key_id=b"keyid-02")], T0 + 1.003)
    link.b.queue_acks([ack(4, [(9, 3, 3)])], T0 + 1.004)
    assert link.b.pending_ack_count == 1
    assert link.b.get_timer() == T0 + 1.005  # from the first queue time
    link.b.handle_timer(T0 + 1.005)
    (frame,) = decode_all(link.b.data_to_send())
    (entry,) = frame.entries
    # the newest broker/key id (from the third entry, which named DB_B and KEY_ID again)
    assert entry == sign_ack(ack(5, [(5, 0, 4), (6, 0, 0), (7, 1, 3), (9, 0, 4)]))


def test_merge_ack_rules() -> None:
    assert merge_ack(None, ack(3, [(2, 0, 1), (3, 5, 6), (3, 0, 4)])) == ack(3, [(3, 0, 6)])
    old = ack(10, [(12, 0, 0), (15, 3, 9)])
    new = ack(13, [(12, 1, 1), (15, 0, 1), (15, 11, 12)], broker=DB_A)
    assert merge_ack(old, new) == ack(13, [(15, 0, 1), (15, 3, 9), (15, 11, 12)], broker=DB_A)
    # the through sequence never goes back; ranges beyond MAX_ACK_RANGES are left out
    assert merge_ack(ack(8), ack(2)).through_sequence == 8
    many = ack(0, [(s, 0, 0) for s in range(frame_types.MAX_ACK_RANGES + 10)])
    assert merge_ack(None, many).ranges == tuple(
        (s, 0, 0) for s in range(frame_types.MAX_ACK_RANGES))


def test_many_acks_split_into_frames_the_peer_accepts() -> None:
    link = Link(hello=None)
    link.a = connection(hello=hello(max_body=MIN_PEER_MAX_BODY), max_body=MIN_PEER_MAX_BODY)
    link.handshake()
    entries = [ack(7, conv=str(uuid.UUID(int=1000 + i))) for i in range(2000)]
    link.b.queue_acks(entries, T0 + 1)
    link.b.handle_timer(T0 + 1.005)
    data = link.b.data_to_send()
    out = decode_all(data)
    # 67 bytes an entry, 65536 a body: 978 entries a frame
    assert [len(f.entries) for f in out] == [978, 978, 44]
    link.a.receive_data(data, T0 + 1.01)
    got = events(link.a)
    assert [len(e.entries) for e in got] == [978, 978, 44] and link.a.state == "LOGGED_IN"
    assert [e.conversation_id for ev in got for e in ev.entries] == [
        e.conversation_id for e in entries]


def test_more_than_max_ack_entries_is_several_frames() -> None:
    link = Link()
    link.handshake()
    n = frames.MAX_ACK_ENTRIES + 5
    link.b.queue_acks([ack(1, conv=str(uuid.UUID(int=5000 + i))) for i in range(n)], T0)
    link.b.handle_timer(T0 + 1)
    assert [len(f.entries) for f in decode_all(link.b.data_to_send())] == [
        frames.MAX_ACK_ENTRIES, 5]


# -- keepalive, idle ---------------------------------------------------------------------


def test_keepalive_at_exactly_the_interval_and_idle_close_at_exactly_the_timeout() -> None:
    link = Link()
    link.handshake()
    assert link.a.get_timer() == T0 + 30.0
    fired = link.run_until(T0 + 29.999)
    assert fired == [] and link.a.data_to_send() == b""
    link.a.handle_timer(T0 + 30.0)
    assert decode_all(link.a.data_to_send()) == [frames.Keepalive()]
    assert link.a.last_activity_time == T0 + 30.0 and link.a.get_timer() == T0 + 60.0
    # keepalives do not count as activity: idle close 90 s after the handshake
    link.b.handle_timer(T0 + 30.0)
    link.transfer(T0 + 30.0)
    assert events(link.a) == events(link.b) == []
    fired = link.run_until(T0 + 200)
    assert fired == [T0 + 60.0, T0 + 90.0]
    # both ends go idle at the same moment; each closes and queues a CLOSE for the other
    assert events(link.a) == events(link.b) == [ConnectionClosed("idle for 90 s", False)]
    assert link.a.state == link.b.state == "CLOSED"
    assert link.a.login_state_desc == "ONLINE"


def test_idle_close_sends_a_close_frame() -> None:
    link = Link()
    link.handshake()
    link.b.idle_timeout = 1000.0
    link.a.handle_timer(T0 + 89.999)
    link.a.data_to_send()
    link.a.handle_timer(T0 + 90.0)
    data = link.a.data_to_send()
    assert decode_all(data) == [frames.Close("idle for 90 s")]
    link.b.receive_data(data, T0 + 90.0)
    assert events(link.b) == [ConnectionClosed("closed by peer: idle for 90 s", False)]


def test_traffic_postpones_idle_close() -> None:
    link = Link(idle_timeout=20.0, keepalive_interval=7.0)
    link.handshake()
    assert link.run_until(T0 + 12.0) == [T0 + 7.0]
    link.a.send_fragment(fragment(1), T0 + 12.0)
    link.transfer(T0 + 12.0)
    link.b.queue_acks([ack(2)], T0 + 12.0)
    fired = link.run_until(T0 + 100)
    # b's ACK at 12.005; keepalives 7 s after each one's last frame; both close at 32.005,
    # 20 s after the ACK (b sent it, a received it)
    assert fired == [T0 + 12.005, T0 + 19.0, T0 + 19.005, T0 + 26.0, T0 + 26.005,
                     T0 + 32.005]
    assert [type(e) for e in events(link.b)] == [FragmentReceived, ConnectionClosed]
    closed_a = events(link.a)[-1]
    assert isinstance(closed_a, ConnectionClosed) and link.a.state == "CLOSED"


def test_no_idle_close_while_an_ack_is_pending() -> None:
    link = Link(idle_timeout=5.0, ack_delay=10.0, keepalive_interval=100.0)
    link.handshake()
    link.b.queue_acks([ack(1)], T0 + 4.0)
    assert link.b.get_timer() == T0 + 14.0
    link.b.handle_timer(T0 + 5.0)
    assert link.b.state == "LOGGED_IN"
    link.b.handle_timer(T0 + 14.0)
    assert [type(f) for f in decode_all(link.b.data_to_send())] == [frames.Ack]
    assert link.b.get_timer() == T0 + 19.0


# -- closing, errors ---------------------------------------------------------------------


def test_close_and_peer_close() -> None:
    link = Link()
    link.handshake()
    link.b.queue_acks([ack(1)], T0)
    link.a.close("shutting down", T0 + 1)
    assert events(link.a) == [ConnectionClosed("shutting down", False)]
    link.transfer(T0 + 1)
    assert events(link.b) == [ConnectionClosed("closed by peer: shutting down", False)]
    # after the end: nothing emitted, input ignored, sends are no-ops
    for conn in (link.a, link.b):
        conn.receive_data(b"garbage", T0 + 2)
        conn.send_fragment(fragment(9), T0 + 2)
        conn.send_notice(notice(), T0 + 2)
        conn.queue_acks([ack(3)], T0 + 2)
        conn.handle_timer(T0 + 1000)
        conn.close("again", T0 + 2)
        assert (conn.get_timer(), conn.next_event(), conn.data_to_send()) == (None, None, b"")
        assert conn.is_idle and conn.state == "CLOSED"


@pytest.mark.parametrize(("logged_in", "partial", "error"), [
    (True, False, False), (True, True, True), (False, False, True)])
def test_eof(logged_in: bool, partial: bool, error: bool) -> None:
    a = connection()
    if logged_in:
        a.receive_data(frames.encode(hello(B_ID, DB_B)), T0)
        events(a)
    if partial:
        a.receive_data(frames.encode(fragment(1))[:20], T0)
    a.receive_data(b"", T0 + 1)
    (closed,) = events(a)
    assert closed.reason.startswith("connection closed by peer (EOF)")
    assert closed.error is error and a.state == "CLOSED"


def test_garbage_closes_with_an_error_and_tells_the_peer() -> None:
    link = Link()
    link.handshake()
    link.b.receive_data(b"GET / HTTP/1.1\r\n\r\n", T0 + 1)
    (closed,) = events(link.b)
    assert closed.error and closed.reason.startswith("protocol error: not a pybroker frame")
    assert link.b.login_state_desc == "ERROR"
    data = link.b.data_to_send()
    assert decode_all(data) == [frames.Close(closed.reason)]
    link.a.receive_data(data, T0 + 1)
    assert events(link.a) == [ConnectionClosed(f"closed by peer: {closed.reason}", False)]


def test_oversized_body_is_refused_from_the_prefix() -> None:
    link = Link(hello=None)
    link.b = connection(is_accept=True, hello=hello(B_ID, DB_B, max_body=2**16),
                        max_body=2**16)
    link.handshake()
    prefix = frames.PREFIX.pack(frames.MAGIC, frames.VERSION, frames.MESSAGE, 0, 0, 10, 2**16 + 1)
    link.b.receive_data(prefix, T0)
    (closed,) = events(link.b)
    assert closed.error and "65537" in closed.reason


def test_counters_equal_what_was_moved() -> None:
    link = Link()
    link.handshake()
    for i in range(1, 6):
        link.a.send_fragment(fragment(i, body=bytes(i * 1000)), T0 + i)
    link.b.send_fragment(fragment(1, from_initiator=False), T0 + 6)
    link.b.send_notice(notice(), T0 + 6)
    link.transfer(T0 + 6)
    link.b.queue_acks([ack(6)], T0 + 6)
    link.run_until(T0 + 31)
    a, b = link.a, link.b
    assert a.total_bytes_sent == b.total_bytes_received == link.moved["a->b"]
    assert b.total_bytes_sent == a.total_bytes_received == link.moved["b->a"]
    assert (a.total_fragments_sent, b.total_fragments_received) == (5, 5)
    assert (b.total_fragments_sent, a.total_fragments_received) == (1, 1)
    # a: HELLO, 5 MESSAGE, keepalive at 36? no: last sent at 5, keepalive due at 35
    assert (a.total_sends, b.total_receives) == (6, 6)
    # b: HELLO, MESSAGE, NOTICE, ACK at 6.005
    assert (b.total_sends, a.total_receives) == (4, 4)
    assert a.last_activity_time == T0 + 6.005 and b.last_activity_time == T0 + 6.005
    assert a.connect_time == T0 and a.login_time == T0


# -- arbitrary bytes after a handshake ---------------------------------------------------


def _valid_frames() -> st.SearchStrategy[bytes]:
    return st.sampled_from([
        frames.encode(fragment(1)), frames.encode(fragment(2, from_initiator=False)),
        frames.encode(frames.Ack((sign_ack(ack(3)),))), frames.encode(notice()),
        frames.encode(frames.Keepalive()), frames.encode(frames.Close("bye")),
        frames.encode(hello(B_ID, DB_B))])


@settings(max_examples=300, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.binary(max_size=64), _valid_frames()), max_size=8),
       st.booleans())
def test_arbitrary_bytes_after_a_handshake_only_give_events(chunks: list[bytes],
                                                            eof: bool) -> None:
    link = Link()
    link.handshake()
    for i, chunk in enumerate(chunks):
        link.b.receive_data(chunk, T0 + i)
        link.b.handle_timer(T0 + i)
    if eof:
        link.b.receive_data(b"", T0 + 100)
    got = events(link.b)
    assert all(isinstance(e, (FragmentReceived, AcksReceived, NoticeReceived,
                              ConnectionClosed)) for e in got)
    closes = [e for e in got if isinstance(e, ConnectionClosed)]
    assert link.b.state in ("CLOSED", "LOGGED_IN")
    if link.b.state == "CLOSED":
        assert closes == [got[-1]]
    else:
        assert closes == [] and not eof
    link.b.data_to_send()


def test_an_ack_too_big_for_a_header_goes_in_an_ack_frame() -> None:
    link = Link()
    link.handshake()
    big = ack(0, [(s, 0, 0) for s in range(frame_types.MAX_ACK_RANGES)])
    link.b.queue_acks([big], T0 + 1)
    link.b.send_fragment(fragment(1, from_initiator=False), T0 + 1)
    assert link.b.pending_ack_count == 1
    link.b.handle_timer(T0 + 1.005)
    out = decode_all(link.b.data_to_send())
    assert [type(f) for f in out] == [frames.MessageFragment, frames.Ack]
    assert out[0].ack is None and out[1].entries == (sign_ack(big),)


def test_acks_queued_before_login_leave_once_logged_in() -> None:
    a = connection()
    a.queue_acks([ack(4)], T0 + 0.5)
    assert a.get_timer() == T0 + 10.0  # only the handshake until the peer's HELLO
    a.handle_timer(T0 + 0.6)
    assert decode_all(a.data_to_send()) == [hello()]
    a.receive_data(frames.encode(hello(B_ID, DB_B)), T0 + 2)
    assert a.get_timer() == T0 + 0.505  # overdue: the I/O layer fires it at once
    a.handle_timer(T0 + 2)
    assert decode_all(a.data_to_send()) == [frames.Ack((sign_ack(ack(4)),))]


def test_an_empty_ack_frame_gives_no_event_but_counts_as_activity() -> None:
    link = Link(idle_timeout=10.0)
    link.handshake()
    link.b.receive_data(frames.encode(frames.Ack(())), T0 + 5)
    assert events(link.b) == [] and link.b.get_timer() == T0 + 15.0


@pytest.mark.parametrize("change", [
    {"from_service": "Init\x00iator"}, {"priority": 11}, {"sequence": -1},
    {"fragment_number": 1}, {"contract": ""}, {"message_size": 99},
    {"conversation_id": "00000000-0000-0000-0000-000000000000"}, {"validation": "Q"}])
def test_a_fragment_the_peer_would_refuse_is_refused_here(change: dict) -> None:
    link = Link()
    link.handshake()
    link.b.queue_acks([ack(1, acks_initiator=False)], T0)
    with pytest.raises(FrameError, match="not sent, the peer would refuse it"):
        link.a.send_fragment(replace(fragment(1), **change), T0)
    with pytest.raises(FrameError, match="not sent"):
        link.b.send_fragment(replace(fragment(1, from_initiator=False), **change), T0)
    # nothing was queued, the pending ack was not used up, and the connection is intact
    assert link.a.data_to_send() == link.b.data_to_send() == b""
    assert link.b.pending_ack_count == 1 and link.a.state == "LOGGED_IN"


def test_an_ack_or_notice_the_peer_would_refuse_is_refused_here() -> None:
    link = Link()
    link.handshake()
    with pytest.raises(FrameError, match="not sent"):
        link.b.queue_acks([ack(2), ack(-1, conv=CONV2)], T0)
    with pytest.raises(FrameError, match="not sent"):
        link.b.queue_acks([ack(2, [(3, 5, 1)], conv=CONV2)], T0)
    assert link.b.pending_ack_count == 1  # the valid one before the bad one is kept
    with pytest.raises(FrameError, match="not sent"):
        link.b.send_notice(replace(notice(), text="bad\x00"), T0)
    assert link.b.data_to_send() == b""


def test_conversation_ids_match_whatever_their_case() -> None:
    link = Link()
    link.handshake()
    link.b.queue_acks([ack(2, conv=CONV.upper())], T0)
    link.b.send_fragment(fragment(1, from_initiator=False), T0)
    assert link.b.pending_ack_count == 0


def test_peer_timeout_closes_a_silent_peer_and_keepalives_keep_it_open() -> None:
    link = Link(peer_timeout=70.0)
    link.handshake()
    # both send keepalives every 30 s: nobody is silent, idle close comes first at 90
    assert link.run_until(T0 + 200) == [T0 + 30.0, T0 + 60.0, T0 + 90.0]
    assert events(link.a) == [ConnectionClosed("idle for 90 s", False)]
    silent = connection(peer_timeout=70.0, idle_timeout=1000.0)
    silent.receive_data(frames.encode(hello(B_ID, DB_B)), T0 + 1)
    assert silent.get_timer() == T0 + 30.0
    silent.handle_timer(T0 + 30.0)
    silent.handle_timer(T0 + 60.0)
    assert silent.get_timer() == T0 + 71.0
    silent.handle_timer(T0 + 71.0)
    assert events(silent)[-1] == ConnectionClosed("no frame from the peer for 70 s", True)
    assert decode_all(silent.data_to_send())[-1] == frames.Close(
        "no frame from the peer for 70 s")


# -- a stateful run of the pair ----------------------------------------------------------


class PairMachine(RuleBasedStateMachine):
    """Random interleavings of sends, acknowledgements, time and transfers: every fragment
    arrives once and in order, and every acknowledgement arrives (merged) exactly when its
    ack_delay is up or with a fragment going the other way."""

    def __init__(self) -> None:
        super().__init__()
        self.link = Link()
        self.link.handshake()
        self.sent: dict[str, list] = {"a": [], "b": []}
        self.got: dict[str, list] = {"a": [], "b": []}
        self.acked_through: dict[tuple[str, bool], int] = {}
        self.ack_seen: dict[tuple[str, bool], int] = {}
        self.seq = 0

    def _conn(self, side: str) -> AdjacentConnection:
        return self.link.a if side == "a" else self.link.b

    def _drain(self) -> None:
        for side in ("a", "b"):
            for event in events(self._conn(side)):
                if isinstance(event, FragmentReceived):
                    self.got[side].append(event.fragment)
                elif isinstance(event, AcksReceived):
                    for e in event.entries:
                        assert frame_macs.verify(e, KEY)
                        key = (e.conversation_id, e.acks_initiator)
                        self.ack_seen[key] = max(self.ack_seen.get(key, 0), e.through_sequence)
                else:
                    raise AssertionError(f"unexpected {event!r}")

    @rule(side=st.sampled_from("ab"), conv=st.sampled_from([CONV, CONV2]))
    def send(self, side: str, conv: str) -> None:
        self.seq += 1
        f = fragment(self.seq, conv=conv, from_initiator=side == "a")
        self._conn(side).send_fragment(f, self.link.now)
        self.sent[side].append(f)

    @rule(side=st.sampled_from("ab"), conv=st.sampled_from([CONV, CONV2]),
          through=st.integers(1, 50))
    def queue_ack(self, side: str, conv: str, through: int) -> None:
        key = (conv, side == "b")  # b acknowledges the initiator (a), a the target (b)
        self._conn(side).queue_acks([ack(through, conv=conv, acks_initiator=key[1])],
                                    self.link.now)
        self.acked_through[key] = max(self.acked_through.get(key, 0), through)

    @rule(dt=st.sampled_from([0.0, 0.001, 0.004, 0.005, 0.02, 1.0]))
    def advance(self, dt: float) -> None:
        self.link.run_until(self.link.now + dt)
        self._drain()

    @rule()
    def transfer(self) -> None:
        self.link.transfer()
        self._drain()

    @invariant()
    def in_order_and_logged_in(self) -> None:
        for side, other in (("a", "b"), ("b", "a")):
            got = [replace(f, ack=None) for f in self.got[other]]
            assert got == [replace(f, ack=None) for f in self.sent[side]][:len(got)]
        assert self.link.a.state == self.link.b.state == "LOGGED_IN"

    def teardown(self) -> None:
        self.link.transfer()
        self.link.run_until(self.link.now + 0.005)
        self._drain()
        assert [len(self.got["b"]), len(self.got["a"])] == [len(self.sent["a"]),
                                                             len(self.sent["b"])]
        assert self.ack_seen == self.acked_through
        assert self.link.a.is_idle and self.link.b.is_idle


TestPair = PairMachine.TestCase
TestPair.settings = settings(max_examples=40, stateful_step_count=30, derandomize=True,
                             deadline=None, suppress_health_check=[HealthCheck.too_slow])
