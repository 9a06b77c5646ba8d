"""The total-queue checker catches every kind of violation it names, and passes a clean
history; the workload's bodies say what they are."""

from __future__ import annotations

from pybroker.devtools.chaos.checker import Received, Sent, check
from pybroker.devtools.chaos.workload import check_body, make_body, split

CONV = "11111111-1111-1111-1111-111111111111"


def _rows(seqs, conv=CONV, status=1, bodies=None):
    out = []
    for order, seq in enumerate(seqs):
        b = check_body(bodies[order] if bodies else make_body(7, conv, seq, big_every=0))
        out.append(Received(conv, order, seq, status, b.conversation_id, b.sequence, b.ok))
    return out


def test_a_clean_history_is_valid():
    v = check([Sent(CONV, "A->B", 5)], _rows(range(5)))
    assert v.valid and (v.sent, v.acknowledged, v.received) == (5, 5, 5)
    assert v.as_dict()["lost"] == 0 and v.details == []


def test_planted_loss_duplicate_and_reordering_are_caught():
    lost = check([Sent(CONV, "A->B", 5)], _rows([0, 1, 3, 4]))
    assert (lost.lost, lost.duplicated, lost.out_of_order) == (1, 0, 0) and not lost.valid
    assert "[2]" in lost.details[0]
    dup = check([Sent(CONV, "A->B", 5)], _rows([0, 1, 2, 2, 3, 4]))
    assert (dup.lost, dup.duplicated, dup.out_of_order) == (0, 1, 0) and not dup.valid
    reordered = check([Sent(CONV, "A->B", 5)], _rows([0, 2, 1, 3, 4]))
    assert (reordered.lost, reordered.duplicated, reordered.out_of_order) == (0, 0, 1)
    assert not reordered.valid


def test_unexpected_corrupted_incomplete_and_undrained_are_caught():
    never_sent = check([Sent(CONV, "A->B", 2)], _rows([0, 1, 2]))
    assert never_sent.unexpected == 1 and never_sent.last_not_delivered == 0
    stranger = check([], _rows([0], conv="22222222-2222-2222-2222-222222222222"))
    assert stranger.unexpected == 1 and not stranger.valid
    body = bytearray(make_body(7, CONV, 1, big_every=0))
    body[-1] ^= 1
    corrupted = check([Sent(CONV, "A->B", 2)],
                      _rows([0, 1], bodies=[make_body(7, CONV, 0, big_every=0), bytes(body)]))
    assert corrupted.corrupted == 1 and corrupted.lost == 0
    swapped = check([Sent(CONV, "A->B", 2)],
                    _rows([0, 1], bodies=[make_body(7, CONV, 1, big_every=0)] * 2))
    assert swapped.corrupted == 1  # the body of #1 queued as #0
    incomplete = check([Sent(CONV, "A->B", 1)], _rows([0], status=2))
    assert incomplete.incomplete == 1 and not incomplete.valid
    # unacknowledged after healing: not lost (never acknowledged), but not drained either
    undrained = check([Sent(CONV, "A->B", 3, frozenset({2}))], _rows([0, 1]))
    assert (undrained.lost, undrained.unacknowledged, undrained.last_not_delivered) == (
        0, 1, 1)
    assert (undrained.acknowledged, undrained.sent) == (2, 3)


def test_bodies_are_deterministic_and_self_describing():
    a = make_body(3, CONV, 9, big_every=1, max_body=300_000)
    assert a == make_body(3, CONV, 9, big_every=1, max_body=300_000)
    assert 300_000 // 8 <= len(a) - 100 <= 300_000
    got = check_body(a)
    assert (got.conversation_id, got.sequence, got.ok) == (CONV, 9, True)
    assert check_body(a[:-1]).ok is False
    assert check_body(b"garbage").ok is False and check_body(None).ok is False
    assert split(10, 3) == [4, 3, 3] and sum(split(100_001, 7)) == 100_001


def test_a_held_message_is_not_out_of_order_but_incomplete():
    rows = _rows([0, 1, 5, 2, 3])
    held = Received(CONV, rows[2].queuing_order, 5, 2, CONV, 5, True)
    v = check([Sent(CONV, "A->B", 6, frozenset({4}))], [*rows[:2], held, *rows[3:]])
    assert (v.out_of_order, v.incomplete, v.lost) == (0, 1, 0)
    released = check([Sent(CONV, "A->B", 6)], _rows([0, 1, 2, 3, 4, 5]))
    assert released.valid
