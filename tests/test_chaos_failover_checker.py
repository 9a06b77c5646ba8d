"""The checker's rule across a mirrored pair's failover (R9.3) and the forwarder topology's own
violation: each shape of history is classified, and each violation it names is caught."""

from __future__ import annotations

from pybroker.devtools.chaos.checker import Received, Sent, Verdict
from pybroker.devtools.chaos.checker_failover import check_failover
from pybroker.devtools.chaos.workload import check_body, make_body

BEFORE = "11111111-1111-1111-1111-111111111111"
AFTER = "22222222-2222-2222-2222-222222222222"


def _rows(conv, seqs, status=1, start=0):
    out = []
    for order, seq in enumerate(seqs, start=start):
        b = check_body(make_body(7, conv, seq, big_every=0))
        st = status(seq) if callable(status) else status
        out.append(Received(conv, order, seq, st, b.conversation_id, b.sequence, b.ok))
    return out


def test_R9_3_a_clean_failover_is_valid_and_says_how_many_of_each():
    # the old principal acknowledged 0-2, then died; the new one refused 3 and the
    # initiator ended the conversation with an error
    sent = [Sent(BEFORE, "A->pair", 4), Sent(AFTER, "A->pair", 4)]
    old = _rows(BEFORE, [0, 1, 2])
    new = _rows(AFTER, range(4), start=3)
    f = check_failover(sent, {AFTER}, old, new, errored={BEFORE})
    assert f.verdict.valid, f.verdict.details
    assert f.as_dict() == {
        "continued": 1, "continued_messages": 4, "begun_after": 1, "finished_before": 0,
        "stranded": 1, "stranded_ended": 1, "at_old_principal": 3, "undelivered": 1,
        "held_at_new_principal": 0, "in_both": 0, "ended_with_error": 1}
    assert (f.verdict.sent, f.verdict.acknowledged, f.verdict.received) == (8, 7, 7)


def test_R9_3_a_stranded_conversation_that_neither_ended_nor_arrived_whole_is_a_violation():
    sent = [Sent(BEFORE, "A->pair", 6)]
    # held at the new principal out of order (the old behaviour): never receivable
    held = check_failover(sent, set(), _rows(BEFORE, [0, 1, 2]), _rows(BEFORE, [3, 4, 5], 2))
    assert (held.stranded, held.held_at_new_principal, held.stranded_ended) == (1, 3, 0)
    assert held.verdict.extra == {"held_at_new_principal": 3} and not held.verdict.valid
    # ended with an error, yet something is held at the new principal
    both = check_failover(sent, set(), _rows(BEFORE, [0, 1, 2]), _rows(BEFORE, [4], 2),
                          errored={BEFORE})
    assert both.verdict.extra == {"held_at_new_principal": 1} and not both.verdict.valid
    # the new principal has some, receivable, but not the last, and no error
    short = check_failover([Sent(BEFORE, "A->pair", 6, frozenset({4, 5}))], set(),
                           _rows(BEFORE, [0, 1, 2]), _rows(BEFORE, [0, 1, 2, 3]))
    assert short.verdict.extra == {"stranded_not_ended": 1} and not short.verdict.valid


def test_R9_3_a_conversation_whose_first_message_reached_only_the_new_principal_continued():
    f = check_failover([Sent(BEFORE, "A->pair", 3)], set(), [], _rows(BEFORE, range(3)))
    assert (f.continued, f.begun_after, f.stranded) == (1, 0, 0) and f.verdict.valid
    done = check_failover([Sent(BEFORE, "A->pair", 3)], set(), _rows(BEFORE, range(3)), [])
    assert (done.finished_before, done.continued) == (1, 0) and done.verdict.valid


def test_R9_3_loss_duplication_and_reordering_at_the_new_principal_are_caught():
    sent = [Sent(AFTER, "A->pair", 5)]
    lost = check_failover(sent, {AFTER}, [], _rows(AFTER, [0, 1, 3, 4]))
    assert (lost.verdict.lost, lost.verdict.valid) == (1, False)
    dup = check_failover(sent, {AFTER}, [], _rows(AFTER, [0, 1, 2, 2, 3, 4]))
    assert (dup.verdict.duplicated, dup.verdict.valid) == (1, False)
    reordered = check_failover(sent, {AFTER}, [], _rows(AFTER, [0, 2, 1, 3, 4]))
    assert (reordered.verdict.out_of_order, reordered.verdict.valid) == (1, False)
    # begun after the failover, yet some at the old principal (a mirror took a message)
    stray = check_failover(sent, {AFTER}, _rows(AFTER, [0]), _rows(AFTER, range(5)))
    assert stray.verdict.extra == {"after_failover_at_old_principal": 1}
    assert not stray.verdict.valid
    errored = check_failover(sent, {AFTER}, [], _rows(AFTER, range(5)), errored={AFTER})
    assert errored.ended_with_error == 1 and not errored.verdict.valid


def test_R9_3_a_stranded_conversation_may_not_lose_nor_duplicate_within_one_partner():
    sent = [Sent(BEFORE, "A->pair", 6)]
    # message 2 acknowledged, at neither partner (the new one began it again with 0)
    lost = check_failover(sent, set(), _rows(BEFORE, [0, 1]), _rows(BEFORE, [0, 1, 3, 4, 5]))
    assert (lost.stranded, lost.verdict.lost, lost.verdict.valid) == (1, 1, False)
    twice = check_failover(sent, set(), _rows(BEFORE, [0, 1, 2, 2]), [], errored={BEFORE})
    assert (twice.stranded_ended, twice.verdict.duplicated, twice.verdict.valid) == (
        1, 1, False)
    # committed by the old principal unacknowledged, sent again to the new one, where the
    # first began it: in both, counted and allowed (nothing is replicated)
    both = check_failover(sent, set(), _rows(BEFORE, [0, 1, 2]), _rows(BEFORE, range(6)))
    assert (both.in_both, both.held_at_new_principal, both.verdict.valid) == (3, 0, True)
    undrained = check_failover([Sent(BEFORE, "A->pair", 6, frozenset({5}))], set(),
                               _rows(BEFORE, [0, 1, 2]), _rows(BEFORE, range(5)))
    assert (undrained.verdict.unacknowledged, undrained.verdict.valid) == (1, False)
    # ended with an error: what the refusal ended is undelivered, not lost
    ended = check_failover(sent, set(), _rows(BEFORE, [0, 1, 2]), [], errored={BEFORE})
    assert (ended.stranded_ended, ended.undelivered, ended.verdict.lost) == (1, 3, 0)
    assert ended.verdict.valid


def test_a_topology_violation_counts_in_the_verdict():
    v = Verdict(sent=3, acknowledged=3, received=3)
    assert v.valid and "held_by_forwarders" not in v.as_dict()
    v.extra["held_by_forwarders"] = 2  # rows in a forwarder's file (R7.3: memory only)
    assert not v.valid and v.as_dict()["held_by_forwarders"] == 2
    total = Verdict()
    total.add(v)
    assert (total.sent, total.extra, total.valid) == (3, {"held_by_forwarders": 2}, False)
