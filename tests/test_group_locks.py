"""Conversation group locks' table (SPEC C7; pybroker/core/conversation/group_locks.py),
held to a reference model of the rules: a group has at most one holder, a holder keeps
what it took until it ends, a wait that closes a cycle has exactly one victim."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.core.conversation.group_locks import WRITER, GroupLocks

GROUPS = [(5, "g1"), (5, "g2"), (5, "g3"), WRITER]
HOLDERS = [1, 2, 3, 4]

operations = st.lists(st.tuples(
    st.sampled_from(["take", "wait", "end"]), st.sampled_from(HOLDERS),
    st.sampled_from(GROUPS), st.booleans()), max_size=40)


def model_cycle(held: dict, waits: dict, start: int) -> list[int]:
    path, current = [start], start
    while current in waits and waits[current] in held:
        current = held[waits[current]][0]
        if current == start:
            return path
        if current in path:
            return []
        path.append(current)
    return []


@settings(max_examples=300, deadline=None)
@given(operations)
def test_c7_one_holder_per_group_and_one_victim_per_cycle(ops):
    locks = GroupLocks()
    held: dict = {}  # key -> (holder, since)
    waits: dict = {}  # holder -> key
    since: dict = {}  # holder -> when its wait began
    committing: dict = {}
    for now, (op, holder, key, commits) in enumerate(ops):
        if op == "take":
            ok = locks.try_acquire(holder, key, float(now))
            # a free WRITER goes to the holder that has waited for it longest
            first = min(((since[h], h) for h, k in waits.items() if k == key), default=None)
            want = (key in held and held[key][0] == holder) or (key not in held and (
                key != WRITER or first is None or first[1] == holder))
            assert ok == want
            if ok and key not in held:
                held[key] = (holder, float(now))
            if ok:
                waits.pop(holder, None)
                locks.stop_waiting(holder)
        elif op == "wait":
            if key not in held or held[key][0] == holder:
                continue  # a wait is only for a key another holds
            if waits.get(holder) != key:
                since[holder] = float(now)
            waits[holder] = key
            committing[holder] = commits
            cycle = model_cycle(held, waits, holder)
            victim = locks.wait(holder, key, float(now), committing=commits)
            if not cycle:
                assert victim is None
                continue
            assert victim in cycle
            assert victim == max([h for h in cycle if not committing[h]] or cycle)
            if victim == holder:
                del waits[holder]
            else:
                assert locks.is_victim(victim)
                # the victim's waiter gives up and rolls back: everything it held goes
                locks.release_all(victim)
                held = {k: v for k, v in held.items() if v[0] != victim}
                waits.pop(victim, None)
        else:
            released = locks.release_all(holder)
            assert sorted(released) == sorted(k for k, v in held.items() if v[0] == holder)
            held = {k: v for k, v in held.items() if v[0] != holder}
            waits.pop(holder, None)
        assert {row.key: (row.holder, row.since) for row in locks.holders()} == held
        assert {w.holder: w.key for w in locks.waiting()} == waits
        for w in locks.waiting():  # no wait left that closes a cycle
            assert not model_cycle(held, waits, w.holder)


def test_c7_a_deadlock_of_two_chooses_the_younger_unless_it_commits():
    locks = GroupLocks()
    assert locks.try_acquire(1, (5, "a"), 0.0) and locks.try_acquire(2, (5, "b"), 0.0)
    assert locks.wait(1, (5, "b"), 1.0) is None
    assert locks.wait(2, (5, "a"), 2.0) == 2  # the asker is the younger: it gives up
    assert [w.holder for w in locks.waiting()] == [1]
    # the older one asks last, while the younger waits to commit: the older is chosen
    locks2 = GroupLocks()
    locks2.try_acquire(1, (5, "a"), 0.0)
    locks2.try_acquire(2, WRITER, 0.0)
    assert locks2.wait(2, (5, "a"), 1.0) is None
    assert locks2.wait(1, WRITER, 2.0, committing=True) == 2
    assert locks2.is_victim(2) and not locks2.is_victim(1)
    assert locks2.release_all(2) == [WRITER]
    assert locks2.try_acquire(1, WRITER, 3.0)


def test_c7_a_holder_lets_one_key_go_and_keeps_the_rest():
    locks = GroupLocks()
    assert locks.try_acquire(1, (5, "g1"), 0.0) and locks.try_acquire(1, WRITER, 1.0)
    assert not locks.release(2, WRITER)  # not its own
    assert locks.release(1, WRITER)
    assert not locks.release(1, WRITER)  # gone already
    assert locks.holds(1, (5, "g1")) and locks.holder_of(WRITER) is None
    assert locks.release_all(1) == [(5, "g1")]
    assert locks.try_acquire(1, WRITER, 2.0) and locks.release(1, WRITER)
    assert locks.held_by(1) == [] and locks.release_all(1) == []


def test_c7_a_free_writer_goes_to_the_transaction_that_waited_longest():
    locks = GroupLocks()
    assert locks.try_acquire(1, WRITER, 0.0)
    assert locks.wait(2, WRITER, 1.0) is None
    assert locks.wait(3, WRITER, 2.0) is None
    assert locks.release_all(1) == [WRITER]
    assert not locks.try_acquire(4, WRITER, 3.0)  # a newcomer waits its turn
    assert not locks.try_acquire(3, WRITER, 3.0)  # so does the later waiter
    assert locks.try_acquire(2, WRITER, 3.0)
    locks.stop_waiting(2)
    assert locks.release_all(2) == [WRITER]
    assert locks.try_acquire(3, WRITER, 4.0)
    # groups are not handed out in turn: a RECEIVE takes any free group it finds
    assert locks.try_acquire(1, (5, "g1"), 5.0)
    assert locks.wait(2, (5, "g1"), 6.0) is None
    locks.release_all(1)
    assert locks.try_acquire(4, (5, "g1"), 7.0)


def test_c7_writer_handed_over_carries_its_holder_s_waits_into_the_graph():
    """A carrier (1) hands WRITER to the transaction it applies (3): a wait of 3's closes a
    cycle through WRITER as 3's own, and the victim is chosen among the cycle's holders."""
    locks = GroupLocks()
    assert locks.try_acquire(1, WRITER, 0.0)
    assert locks.try_acquire(2, (5, "g2"), 0.5)
    assert locks.wait(2, WRITER, 1.0, committing=True) is None  # 2 waits for 1's WRITER
    locks.hand_over(WRITER, 3)
    assert locks.holder_of(WRITER) == 3 and locks.held_by(1) == []
    assert [h.holder for h in locks.holders() if h.key == WRITER] == [3]
    # 3 (applied as the writer) waits for 2's group: 3 -> 2 -> WRITER (3's) -> a cycle
    assert locks.wait(3, (5, "g2"), 2.0) == 3  # not committing: 3 is the victim, not 2
    assert not locks.is_victim(2)
    locks.hand_over(WRITER, 1)  # back to the carrier, from the same since
    assert locks.holder_of(WRITER) == 1 and locks.held_by(3) == []
    assert next(h for h in locks.holders() if h.key == WRITER).since == 0.0
    # handed to itself: nothing changes
    locks.hand_over(WRITER, 1)
    assert locks.held_by(1) == [WRITER]
    assert locks.release_all(1) == [WRITER]
    assert locks.try_acquire(2, WRITER, 3.0)  # 2 waited longest
