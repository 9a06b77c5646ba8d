"""The forwarding core (R7), with a fake clock: hops, time to live, the memory bound, the
return path."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from pybroker.core.wire import forwarding, frames
from pybroker.core.wire.forwarding import FRAGMENT_OVERHEAD, Forwarder

CONV = str(uuid.UUID(int=7))
B = "tcp://127.0.0.1:4023"
C = "tcp://127.0.0.1:4024"
A = "tcp://127.0.0.1:4022"


def fragment(seq: int = 0, size: int = 100, *, hops: int = 32, ttl: int = 60_000,
             consumed: int = 0, from_initiator: bool = True,
             conv: str = CONV) -> frames.MessageFragment:
    return frames.MessageFragment(
        conversation_id=conv, from_initiator=from_initiator, sequence=seq,
        fragment_number=0, fragment_count=1, message_size=size, from_service="s",
        to_service="t", from_broker_instance=str(uuid.UUID(int=1)), to_broker_instance=None,
        contract="c", message_type="m", validation="N", is_end_of_dialog=False,
        is_error=False, priority=5, lifetime_ms=2**40, hops_remaining=hops,
        key_id=bytes(8), body=bytes(size), time_to_live_ms=ttl, time_consumed_ms=consumed)


def test_R7_1_each_forward_takes_one_hop_and_adds_the_time_held():
    fw = Forwarder()
    assert fw.admit(fragment(hops=5, consumed=1_000), B, 1, A, now=100.0) is None
    out, dropped = fw.next_fragment(B, now=100.25)
    assert dropped == []
    assert (out.hops_remaining, out.time_consumed_ms) == (4, 1_250)
    assert out.body == bytes(100) and out.sequence == 0  # passed on as it came
    assert fw.next_fragment(B, now=101.0) == (None, [])


def test_R7_1_no_hops_left_is_dropped_so_a_loop_ends():
    fw = Forwarder()
    dropped = fw.admit(fragment(hops=0), B, 1, A, now=0.0)
    assert dropped is not None and dropped.reason == forwarding.NO_HOPS
    assert fw.held_bytes == 0 and not fw.has_work(B)
    # a loop between two forwarders: the message comes back one hop shorter each time
    f, passes = fragment(hops=forwarding.DEFAULT_HOPS), 0
    while fw.admit(f, B, 1, A, now=0.0) is None:
        f, _ = fw.next_fragment(B, now=0.0)
        passes += 1
    assert passes == forwarding.DEFAULT_HOPS


def test_R7_1_time_to_live_spent_on_arrival_or_while_waiting():
    fw = Forwarder()
    late = fw.admit(fragment(ttl=1_000, consumed=1_000), B, 1, A, now=0.0)
    assert late is not None and late.reason == forwarding.NO_TIME
    assert fw.admit(fragment(seq=1, ttl=1_000, consumed=400), B, 1, A, now=10.0) is None
    assert fw.admit(fragment(seq=2, ttl=5_000), B, 1, A, now=10.0) is None
    assert fw.get_timer() == 10.6  # seq 1 has 600 ms left
    assert fw.handle_timer(10.5) == []
    dropped = fw.handle_timer(10.6)
    assert [(d.fragment.sequence, d.reason) for d in dropped] == [(1, forwarding.NO_TIME)]
    assert fw.held_bytes == 100 + FRAGMENT_OVERHEAD and fw.get_timer() == 15.0
    # found out of time when the connection takes it: dropped, not sent
    out, dropped = fw.next_fragment(B, now=15.0)
    assert out is None and [d.fragment.sequence for d in dropped] == [2]
    assert fw.held_bytes == 0 and fw.get_timer() is None


def test_R7_3_memory_bound_drops_and_sending_releases():
    each = 1000 + FRAGMENT_OVERHEAD
    fw = Forwarder(limit=3 * each)
    assert [fw.admit(fragment(seq, 1000), B, 1, A, 0.0) for seq in range(3)] == [None] * 3
    over = fw.admit(fragment(3, 1000), B, 1, A, 0.0)
    assert over is not None and over.reason == forwarding.OVER_LIMIT
    assert fw.held_bytes == 3 * each
    out, _ = fw.next_fragment(B, 0.0)  # the next hop's connection took it: released
    assert out.sequence == 0 and fw.held_bytes == 2 * each
    assert fw.admit(fragment(3, 1000), B, 1, A, 0.0) is None
    assert [fw.next_fragment(B, 0.0)[0].sequence for _ in range(3)] == [1, 2, 3]
    assert fw.held_bytes == 0


def test_a_copy_of_a_fragment_still_held_is_not_held_twice():
    fw = Forwarder()
    assert fw.admit(fragment(0), B, 1, A, 0.0) is None
    assert fw.admit(fragment(0), B, 2, A, 0.5) is None  # the sender's retransmission
    assert fw.held_bytes == 100 + FRAGMENT_OVERHEAD
    assert fw.return_path(CONV, True).connection == 2
    fw.next_fragment(B, 1.0)
    assert fw.admit(fragment(0), B, 2, A, 2.0) is None and fw.has_work(B)  # gone: again


def test_an_unreachable_next_hop_releases_what_waits_for_it_only():
    fw = Forwarder()
    fw.admit(fragment(0), B, 1, A, 0.0)
    fw.admit(fragment(1), C, 1, A, 0.0)
    dropped = fw.drop_hop(B, "refused")
    assert [(d.fragment.sequence, d.reason) for d in dropped] == [(0, forwarding.UNREACHABLE)]
    assert fw.next_hops() == [C] and fw.held_bytes == 100 + FRAGMENT_OVERHEAD


def test_return_path_per_conversation_direction_is_bounded():
    fw = Forwarder(return_paths=2)
    fw.admit(fragment(from_initiator=True), B, 1, A, 0.0)
    fw.admit(fragment(from_initiator=False), A, 2, B, 0.0)
    assert fw.return_path(CONV, True) == forwarding.ReturnPath(1, A)
    assert fw.return_path(CONV, False) == forwarding.ReturnPath(2, B)
    # a dropped fragment still teaches the path (an earlier copy's ack must go back)
    fw.admit(fragment(from_initiator=True, hops=0), B, 3, "tcp://127.0.0.1:9", 0.0)
    assert fw.return_path(CONV, True) == forwarding.ReturnPath(3, "tcp://127.0.0.1:9")
    other = str(uuid.UUID(int=8))
    fw.admit(fragment(conv=other), B, 4, A, 0.0)  # the least recently used goes
    assert fw.return_path(CONV, False) is None
    assert fw.return_path(other, True) == forwarding.ReturnPath(4, A)


@given(st.lists(st.tuples(st.sampled_from(["admit", "send", "tick"]),
                          st.integers(0, 5000), st.integers(0, 3)), max_size=60))
def test_held_bytes_always_match_what_is_held(steps):
    fw = Forwarder(limit=8000)
    now = 0.0
    for seq, (op, size, hops) in enumerate(steps):
        now += 0.3
        if op == "admit":
            fw.admit(fragment(seq, size, hops=hops, ttl=2_000), B, 1, A, now)
        elif op == "send":
            out, _ = fw.next_fragment(B, now)
            assert out is None or out.hops_remaining >= 0
        else:
            fw.handle_timer(now)
        assert fw.held_bytes == sum(h.size for h in fw.held()) <= 8000
