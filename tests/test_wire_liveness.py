"""The liveness invariant of the Transmitter (P5.3, C5, P7), on a virtual clock: a next hop
with unacknowledged messages always has a fragment ready to send or one awaiting its
acknowledgement with a retransmission deadline; the bytes counted in flight per next hop are
those sent and not acknowledged (L1); every fragment sent and not acknowledged will go again
(L2). Random sequences of submits, sends, acknowledgements (by range, of fragments never
sent, duplicates), timer expiries, re-routes and forgets keep all of it after every step;
breaking the accounting on purpose is caught and repaired; and transport.py checks it once
a second, records a breach as a broker event and repairs it."""

from __future__ import annotations

import asyncio
import heapq
import socket
import time
import types
import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from wire_helpers import wait_for

from pybroker.core.wire import (
    adjacent,
    certificates,
    dialog,
    frame_macs,
    frames,
    transport,
    transport_connections,
    transport_settings,
)
from pybroker.core.wire.dialog import Transmitter
from pybroker.core.wire.frame_types import AckEntry
from pybroker.core.wire.frames import MessageFragment

HOPS = ("tcp://127.0.0.1:4022", "tcp://127.0.0.1:4023")
CONVS = tuple(str(uuid.UUID(int=i + 1)) for i in range(3))
BROKER = str(uuid.UUID(int=9))
ALL = 0xFFFFFFFF


def message(conv: int, seq: int, size: int) -> MessageFragment:
    return MessageFragment(CONVS[conv], True, seq, 0, 1, size, "s", "t", BROKER, None, "c",
                           "m", "N", False, False, 5, 0, 255, bytes(8), bytes(size))


def ack(conv: int, through: int, ranges=()) -> AckEntry:
    return AckEntry(CONVS[conv], True, BROKER, bytes(8), through, tuple(ranges))


def assert_live(t: Transmitter) -> None:
    assert t.audit() == []


KINDS = ("submit",) * 3 + ("send",) * 3 + ("ack",) * 3 + ("time", "forget")
OPS = st.tuples(
    st.sampled_from(KINDS), st.integers(0, len(CONVS) - 1),
    st.sampled_from([0, 0, 0, 1]),  # the next hop; mostly the first: few re-routes
    st.integers(0, 40),  # a message's size
    st.sampled_from([0, 0, 0, 0, 1, -1, -3]),  # its sequence past the last (<0: again)
    st.integers(1, 12),  # fragments to send
    st.sampled_from([0, 0, 0, 1, -1]),  # acknowledged through: on, or an old one again
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0, 0, 1, 2, 5]),
                       st.sampled_from([0, 1, 3, ALL])), max_size=3),  # ranges past it
    st.floats(0, 70))  # seconds that pass


def play(t: Transmitter, ops, check=assert_live) -> dict[int, int]:
    """Apply ``ops`` with the invariant checked after each; the next sequence per
    conversation."""
    now = 0.0
    next_seq = dict.fromkeys(range(len(CONVS)), 0)
    through = dict.fromkeys(range(len(CONVS)), 0)  # acknowledged below this, at most
    for kind, conv, hop, size, offset, n, moved, ranges, dt in ops:
        if kind == "submit":
            seq = max(0, next_seq[conv] + offset)
            t.submit(f"h{conv}", HOPS[hop], message(conv, seq, size))
            next_seq[conv] = max(next_seq[conv], seq + 1)
        elif kind == "send":
            for _ in range(n):
                ready = t.ready(HOPS[hop])  # what next_fragment will do, without doing it
                if (t.next_fragment(HOPS[hop], now) is not None) != ready:
                    raise AssertionError(f"ready() said {ready}, next_fragment did not")
                if not ready:
                    break
        elif kind == "ack":  # ranges may name fragments never sent, or past the message
            through[conv] = max(0, through[conv] + moved)
            t.on_ack(ack(conv, through[conv],
                         [(through[conv] + s, first, first + last if last != ALL else ALL)
                          for s, first, last in ranges]))
        elif kind == "time":
            now += dt
            t.handle_timer(now)
        else:
            t.forget(CONVS[conv], True)
        check(t)
    return next_seq


SEQUENCES = {"ops": st.lists(OPS, min_size=20, max_size=80),
             "fragment_size": st.integers(1, 8), "window": st.integers(1, 40)}


def check_sequence(ops, fragment_size, window) -> None:
    t = Transmitter(fragment_size=fragment_size, window=window, retry_scale=1.0)
    next_seq = play(t, ops)
    for conv, through in next_seq.items():  # everything acknowledged: nothing in flight
        t.on_ack(ack(conv, through))
        assert_live(t)
    assert all(t.in_flight_bytes(hop) == 0 for hop in HOPS)
    assert t.dialogs() == 0 and t.addresses() == [] and t.get_timer() is None


test_any_sequence_keeps_the_invariant_and_gives_every_byte_back = settings(
    max_examples=200, derandomize=True, deadline=None)(given(**SEQUENCES)(check_sequence))


@settings(max_examples=100, derandomize=True, deadline=None)
@given(ops=st.lists(OPS, min_size=10, max_size=50), fragment_size=st.integers(1, 8),
       window=st.integers(1, 40), drop=st.integers(0, 3))
def test_a_sender_always_finishes_when_what_it_sends_is_acknowledged(ops, fragment_size,
                                                                     window, drop):
    """Liveness itself: from any state, a receiver that acknowledges every fragment that
    arrives (every ``drop``-th is lost) gets everything; the sender never waits on nothing."""
    t = Transmitter(fragment_size=fragment_size, window=window, retry_scale=1.0)
    play(t, ops)
    now, n = 1000.0, 0
    for _ in range(10_000):
        sent = False
        for hop in HOPS:
            while (f := t.next_fragment(hop, now)) is not None:
                sent, n = True, n + 1
                if drop and n % (drop + 2) == 0:
                    continue
                conv = CONVS.index(f.conversation_id)
                t.on_ack(ack(conv, 0, [(f.sequence, f.fragment_number,
                                        f.fragment_number)]))
        assert t.stalled_hops() == []
        if not sent:
            due = t.get_timer()
            if due is None:
                break
            now = max(now, due)
            t.handle_timer(now)
    assert t.dialogs() == 0 and t.audit() == []
    assert all(t.in_flight_bytes(hop) == 0 for hop in HOPS)


def test_bytes_never_given_back_are_caught_and_repaired(monkeypatch):
    """The leak class of 160abf9: acknowledgements that give no bytes back. The window to the
    next hop closes for good, nothing is left unacknowledged on the wire, and no timer will
    wake the sender: ``stalled_hops`` names the next hop, ``audit`` the miscount, and
    ``repair`` recounts and opens the window again."""
    hop = HOPS[0]
    t = Transmitter(fragment_size=10, window=30, retry_scale=1.0)
    for seq in range(5):
        t.submit("h", hop, message(0, seq, 10))
    monkeypatch.setattr(Transmitter, "_release", lambda self, address, size: None)
    assert [t.next_fragment(hop, 0.0).sequence for _ in range(3)] == [0, 1, 2]
    assert t.next_fragment(hop, 0.0) is None  # the window (30 bytes) is full
    assert [d.sequence for d in t.on_ack(ack(0, 0, [(1, 0, ALL)]))] == [1]  # held: a range
    t.on_ack(ack(0, 3))
    monkeypatch.undo()
    assert t.in_flight_bytes(hop) == 30 and t.get_timer() is None
    assert not t.ready(hop) and t.stalled_hops() == [hop]
    assert any(p.startswith("L1: 30 bytes counted in flight") for p in t.audit())
    assert t.repair(hop) == [f"30 bytes were counted in flight to {hop}, 0 were sent and "
                             "not acknowledged"]
    assert t.audit() == [] and t.ready(hop)
    assert [t.next_fragment(hop, 0.0).sequence for _ in range(2)] == [3, 4]


def test_the_random_sequences_catch_a_leak(monkeypatch):
    """The random test is not blind: with acknowledgements of whole messages by a range
    giving nothing back (what 160abf9 fixed), the first such acknowledgement breaks L1."""
    real = Transmitter.on_ack

    def leaky(self, entry):
        before = dict(self._flight)
        done = real(self, entry)
        whole = {seq for seq, first, last in entry.ranges if first == 0 and last == ALL}
        if any(d.sequence in whole for d in done):
            self._flight = before  # the bytes of everything acknowledged stay counted
        return done

    monkeypatch.setattr(Transmitter, "on_ack", leaky)
    t = Transmitter(fragment_size=4, window=12)
    ops = [("submit", 0, 0, 8, 0, 0, 0, [], 0.0), ("submit", 0, 0, 8, 0, 0, 0, [], 0.0),
           ("send", 0, 0, 0, 0, 4, 0, [], 0.0), ("ack", 0, 0, 0, 0, 0, 0, [(0, 0, ALL)], 0.0)]
    breaches: list[str] = []
    play(t, ops, check=lambda t: breaches.extend(t.audit()))
    assert breaches[0].startswith("L1: 12 bytes counted in flight to tcp://127.0.0.1:4022, "
                                  "4 sent")
    search = settings(max_examples=200, derandomize=True, deadline=None, database=None,
                      phases=[Phase.generate])(given(**SEQUENCES)(check_sequence))
    with pytest.raises(AssertionError, match="L1: "):  # and the random test finds it alone
        search()


def test_a_lost_retransmission_timer_is_caught(monkeypatch):
    """L2: a fragment sent with no timer behind it would wait for an acknowledgement that
    may never come (P5.3); the audit names it and repair queues it to go again."""
    hop = HOPS[0]
    t = Transmitter(fragment_size=10, retry_scale=1.0)
    t.submit("h", hop, message(0, 0, 10))
    monkeypatch.setattr(dialog, "heapq", types.SimpleNamespace(
        heappush=lambda heap, item: None, heappop=heapq.heappop))
    assert t.next_fragment(hop, 0.0) is not None
    monkeypatch.undo()
    assert t.get_timer() is None
    assert t.audit() == [f"L2: fragment 0 of {(CONVS[0], True)} 0 was sent, is not "
                         "acknowledged, and will not go again", f"{hop} is stalled"]
    t.handle_timer(1e9)  # no timer: nothing happens
    assert not t.ready(hop) and t.stalled_hops() == [hop]
    assert t.repair(hop) == ["1 fragments sent and not acknowledged had no retransmission "
                             "timer: queued to go again"]
    assert t.ready(hop) and t.next_fragment(hop, 5.0).sequence == 0 and t.audit() == []


def test_a_conversation_routed_elsewhere_takes_its_bytes_in_flight_along():
    """L1 across a re-route: the bytes in flight leave the old next hop's count and join the
    new one's, where their acknowledgement gives them back (the old next hop kept nothing)."""
    t = Transmitter(fragment_size=4, window=100)
    t.submit("h", HOPS[0], message(0, 0, 8))
    assert t.next_fragment(HOPS[0], 0.0) is not None
    t.submit("h", HOPS[1], message(0, 1, 8))
    assert t.in_flight_bytes(HOPS[0]) == 0 and t.in_flight_bytes(HOPS[1]) == 4
    assert t.addresses() == [HOPS[1]] and t.audit() == []
    t.on_ack(ack(0, 2))
    assert t.in_flight_bytes(HOPS[1]) == 0 and t.dialogs() == 0


def count_calls(monkeypatch, obj: object, name: str) -> list[float]:
    """``obj.name`` wrapped to note each call (its monotonic time) in the list returned."""
    calls: list[float] = []
    method = getattr(obj, name)

    def counted(*args, **kwargs):
        calls.append(time.monotonic())
        return method(*args, **kwargs)

    monkeypatch.setattr(obj, name, counted)
    return calls


class _Sink:
    """The transport's sink, keeping only the broker events."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str | None, str]] = []

    def arrived(self, connection, peer, fragments) -> None: ...

    def acknowledged(self, acks) -> None: ...

    def notice(self, notice, peer) -> None: ...

    def status(self, handles, text) -> None: ...

    def event(self, event_class, subclass, peer, conversation_id, sequence, description):
        self.events.append((event_class, subclass, peer, description))

    def repaired(self) -> list[str]:
        return [e[3] for e in self.events if e[1] == "Liveness Repaired"]


def test_the_transport_records_and_repairs_a_breach_within_a_second(monkeypatch):
    """transport.py checks the invariant once a second while anything is in flight: a
    window closed by bytes never given back, and a next hop with fragments ready and no
    connection attempt pending, each become a broker event and are repaired."""
    with socket.socket() as s:  # a port nothing listens on: connections are refused
        s.bind(("127.0.0.1", 0))
        hop = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    cert, key = certificates.make_certificate("liveness", datetime.now(UTC).replace(
        tzinfo=None))
    sink = _Sink()
    identity = transport_settings.Identity(str(uuid.uuid4()), cert, key, (BROKER,))
    tr = transport.Transport(sink, identity, {},
                             transport_settings.Settings(port=0, retry_scale=100.0))

    def on_loop(fn):
        async def call():
            return fn()
        return asyncio.run_coroutine_threadsafe(call(), tr._loop).result(5)

    tr.start()
    try:
        tr.submit([("h", hop, message(0, seq, 10)) for seq in range(3)])
        wait_for(lambda: any(e[1] == "Connect Failed" for e in sink.events), 10, "refusal")
        assert on_loop(lambda: tr._redials.get(hop)) == 1  # next attempt in 400 s (C5)
        on_loop(lambda: tr.transmitter._flight.__setitem__(hop, tr.transmitter.window))
        wait_for(sink.repaired, 5, "the liveness check")
        assert sink.repaired() == [f"the sender would have stalled: {tr.transmitter.window} "
                                   f"bytes were counted in flight to {hop}, 0 were sent "
                                   "and not acknowledged"]
        assert on_loop(lambda: (tr.transmitter.in_flight_bytes(hop), tr.transmitter.audit())
                       ) == (0, [])
        on_loop(tr._redials.clear)  # as if the attempt were lost: the check starts one
        wait_for(lambda: len(sink.repaired()) == 2, 5, "the liveness check")
        assert sink.repaired()[1] == ("the sender would have stalled: fragments were ready "
                                      "with no connection attempt")
        assert on_loop(lambda: tr._redials.get(hop) or hop in tr.connections.connecting)
        # repaired: nothing more to say, at three whole checks more (each check asks the
        # transmitter for its stalled hops once, first; checks armed from now on come at
        # 0.05 s, not 1 s)
        checks = count_calls(monkeypatch, tr.transmitter, "stalled_hops")
        monkeypatch.setattr(transport, "LIVENESS_INTERVAL", 0.05)
        seen = len(checks)
        wait_for(lambda: len(checks) >= seen + 4, 10, "three more liveness checks")
        assert len(sink.repaired()) == 2
    finally:
        tr.close()


class _Recorder(_Sink):
    """The sink, keeping what it is handed, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, object]] = []

    def arrived(self, connection, peer, fragments) -> None:
        self.calls.append(("arrived", [f.sequence for f in fragments]))

    def notice(self, notice, peer) -> None:
        self.calls.append(("notice", notice.sequence))


def test_a_reads_fragments_go_to_the_sink_together_in_order_with_what_comes_between():
    """The fragments of one read are handed on in one call, those before another event
    (a notice here) before it, and one that fails its MAC (P6) is left out, recorded."""
    cert, key = certificates.make_certificate("together", datetime.now(UTC).replace(
        tzinfo=None))
    sink = _Recorder()
    identity = transport_settings.Identity(str(uuid.uuid4()), cert, key, (BROKER,))
    tr = transport.Transport(sink, identity, {}, transport_settings.Settings(port=0))
    peer_key_id, secret = b"peer-key", b"s" * 32
    events: list[object] = []
    core = types.SimpleNamespace(outstanding=0, next_event=lambda: (
        events.pop(0) if events else None))
    conn = transport_connections.Connection(7, True, "127.0.0.1:1", None,  # type: ignore[arg-type]
                                            core=core, peer_key_id=peer_key_id, secret=secret)

    def signed(seq: int, good: bool = True) -> MessageFragment:
        f = message(0, seq, 10)
        f.key_id = peer_key_id
        k = certificates.dialog_key(secret, f.conversation_id, f.from_initiator)
        return frame_macs.sign(f, k if good else b"x" * 32)

    notice = frames.Notice(CONVS[0], True, None, 3, 0, "later", False, peer_key_id)
    notice = frame_macs.sign(notice, certificates.dialog_key(secret, CONVS[0], True))
    events += [adjacent.FragmentReceived(signed(0)), adjacent.FragmentReceived(signed(1)),
               adjacent.NoticeReceived(notice), adjacent.FragmentReceived(signed(2, False)),
               adjacent.FragmentReceived(signed(3)), adjacent.FragmentReceived(signed(4))]
    tr._flush = lambda conn: None  # no socket here
    try:
        tr._process(conn)
    finally:
        tr._loop.close()  # never started
    assert sink.calls == [("arrived", [0, 1]), ("notice", 3), ("arrived", [3, 4])]
    assert core.outstanding == 4
    assert [e[1] for e in sink.events] == ["MAC mismatch"]
