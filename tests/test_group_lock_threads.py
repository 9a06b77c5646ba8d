"""Conversation group locks between threads of one process (SPEC C7): transactions on
different groups run side by side; a RECEIVE skips a group another transaction holds and
a RECEIVE ... WHERE waits for it; a deadlock ends one transaction with error 1205; a
rollback returns its messages in order; no group is ever given to two transactions."""

from __future__ import annotations

import random
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.errors import DeadlockVictimError
from tests.conftest_conversations import make_broker

BOUND = 10.0  # seconds: how long a test waits for what must happen at once


@pytest.fixture
def broker(tmp_path):
    b = make_broker(tmp_path / "broker.duckdb")
    yield b
    b.inst.close()


def two_groups(broker, per_group: int = 2) -> list[tuple[str, list[str]]]:
    """Two conversations into QB, their messages sent in turn (the groups interleave):
    the target side's (group, handle) and texts of each."""
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(2)]
    for k in range(per_group):
        for i, conv in enumerate(convs):
            conv.send(f"{i}:{k}")
    rows = broker.rows("SELECT conversation_group_id, conversation_handle, "
                       "message_body FROM sys.queue_messages WHERE queue_name = 'QB' "
                       "ORDER BY queuing_order")
    groups: dict[str, list[str]] = {}
    for group, _, body in rows:
        groups.setdefault(str(group), []).append(bytes(body).decode())
    return list(groups.items())


def in_thread(target) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = target()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def run_together(target, arguments: list[tuple]) -> None:
    """``target(*args)`` for each of ``arguments``, each in a thread of its own, all at once;
    every thread ends within 4 x BOUND seconds."""
    threads = [threading.Thread(target=target, args=args, daemon=True) for args in arguments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(4 * BOUND)
    assert not any(thread.is_alive() for thread in threads)


def test_c7_transactions_on_different_groups_hold_their_messages_at_once(broker):
    (_, texts1), (_, texts2) = two_groups(broker)
    holding = [threading.Event(), threading.Event()]
    received: dict[int, list[str]] = {}

    def worker(i: int) -> bool:
        with broker.b.transaction():
            got = broker.b.receive("QB", max_messages=10)
            received[i] = [m.text for m in got]
            holding[i].set()
            # the other holds its group while this one holds its own
            return holding[1 - i].wait(BOUND)

    threads = [in_thread(lambda i=i: worker(i)) for i in range(2)]
    for thread, _ in threads:
        thread.join(BOUND)
    assert [outcome.get("result") for _, outcome in threads] == [True, True]
    assert sorted(received.values()) == sorted([texts1, texts2])
    assert broker.rows("SELECT COUNT(*) FROM sys.queue_messages WHERE queue_name = 'QB'"
                       ) == [(0,)]


def test_c7_receive_skips_a_held_group_and_takes_the_next(broker):
    (g1, texts1), (_, texts2) = two_groups(broker)
    held, done = threading.Event(), threading.Event()

    def holder() -> list[str]:
        with broker.b.transaction():
            got = [m.text for m in broker.b.receive("QB", max_messages=1)]
            held.set()
            done.wait(BOUND)
        return got

    thread, outcome = in_thread(holder)
    assert held.wait(BOUND)
    rows = broker.rows("SELECT conversation_group_id, holder FROM "
                       "sys.dm_broker_conversation_group_locks WHERE queue_name = 'QB'")
    assert [str(r[0]) for r in rows] == [g1]
    with broker.b.transaction():
        # g1's second message is ready, but its group is held: g2 comes instead, whole
        assert [m.text for m in broker.b.receive("QB", max_messages=10)] == texts2
        assert broker.b.receive("QB", max_messages=10) == []  # nothing else is free
    done.set()
    thread.join(BOUND)
    assert outcome["result"] == texts1[:1]
    assert [m.text for m in broker.b.receive("QB", max_messages=10)] == texts1[1:]


def test_c7_receive_where_waits_for_a_held_group_then_takes_it_or_times_out(broker):
    (g1, texts1), _ = two_groups(broker)
    held, commit = threading.Event(), threading.Event()

    def holder() -> None:
        with broker.b.transaction():
            broker.b.receive("QB", max_messages=1)
            held.set()
            commit.wait(BOUND)

    thread, _ = in_thread(holder)
    assert held.wait(BOUND)
    # WAITFOR runs out while the group stays held: nothing, as a WAITFOR that found none
    with broker.b.transaction():
        assert broker.b.receive("QB", timeout=0.2, conversation_group_id=g1) == []
    asking = threading.Event()

    def waiter() -> list[str]:
        with broker.b.transaction():
            asking.set()
            return [m.text for m in broker.b.receive(
                "QB", max_messages=10, timeout=BOUND, conversation_group_id=g1)]

    waiting_thread, outcome = in_thread(waiter)
    assert asking.wait(BOUND)
    wait_until(lambda: broker.rows(
        "SELECT COUNT(*) FROM sys.dm_broker_waits WHERE wait_type = 'BROKER_GROUP_LOCK'"
    ) == [(1,)])
    commit.set()
    thread.join(BOUND)
    waiting_thread.join(BOUND)
    assert outcome["result"] == texts1[1:]


def test_c7_a_deadlock_ends_one_transaction_with_1205_and_the_other_goes_on(broker):
    (g1, _), (g2, texts2) = two_groups(broker, per_group=1)
    first_holds, second_holds, first_waits = (threading.Event(), threading.Event(),
                                              threading.Event())

    def first() -> list[str]:
        with broker.b.transaction():
            broker.b.receive("QB")  # g1
            first_holds.set()
            assert second_holds.wait(BOUND)
            first_waits.set()
            return [m.text for m in broker.b.receive(
                "QB", timeout=BOUND, conversation_group_id=g2)]

    def second() -> None:
        assert first_holds.wait(BOUND)
        with broker.b.transaction():
            broker.b.receive("QB")  # g2
            second_holds.set()
            assert first_waits.wait(BOUND)
            wait_until(lambda: broker.rows(
                "SELECT COUNT(*) FROM sys.dm_broker_waits "
                "WHERE wait_type = 'BROKER_GROUP_LOCK'") == [(1,)])
            broker.b.receive("QB", timeout=BOUND, conversation_group_id=g1)

    one, first_outcome = in_thread(first)
    two, second_outcome = in_thread(second)
    one.join(BOUND)
    two.join(BOUND)
    error = second_outcome.get("error")
    assert isinstance(error, DeadlockVictimError) and error.number == 1205
    assert "chosen as the deadlock victim. Rerun the transaction." in str(error)
    # the victim rolled back: g2's message went to the first, which committed both
    assert first_outcome.get("result") == texts2
    assert broker.rows("SELECT COUNT(*) FROM sys.queue_messages WHERE queue_name = 'QB'"
                       ) == [(0,)]


def test_c7_a_rollback_returns_its_messages_in_order_while_another_commits(broker):
    (_, texts1), (_, texts2) = two_groups(broker, per_group=3)
    held, other_done = threading.Event(), threading.Event()

    class Undo(Exception):
        pass

    def rolled_back() -> None:
        with pytest.raises(Undo), broker.b.transaction():
            broker.b.receive("QB", max_messages=2)  # g1's first two
            held.set()
            other_done.wait(BOUND)
            raise Undo

    thread, outcome = in_thread(rolled_back)
    assert held.wait(BOUND)
    with broker.b.transaction():
        assert [m.text for m in broker.b.receive("QB", max_messages=10)] == texts2
    other_done.set()
    thread.join(BOUND)
    assert "error" not in outcome
    assert [m.text for m in broker.b.receive("QB", max_messages=10)] == texts1


def test_c7_no_group_is_ever_given_to_two_transactions(broker):
    """Four threads receive their own groups' messages and send a reply on them, and
    commit or roll back at random: each message is received and committed exactly once,
    each committed reply arrives once, and no group is held by two transactions at any
    moment."""
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(6)]
    sent = []
    for k in range(8):
        for i, conv in enumerate(convs):
            conv.send(f"{i}:{k}")
            sent.append(f"{i}:{k}")
    owner: dict[str, int] = {}
    guard = threading.Lock()
    committed: list[str] = []
    clashes: list[str] = []

    def worker(n: int) -> None:
        rng = random.Random(n)
        while True:
            undo = rng.random() < 0.3
            got: list[str] = []
            try:
                with broker.b.transaction():
                    messages = broker.b.receive("QB", max_messages=rng.choice((1, 2, 3)))
                    if not messages:
                        return
                    group = str(messages[0].conversation_group_id)
                    with guard:
                        if owner.setdefault(group, n) != n:
                            clashes.append(group)
                    got = [m.text for m in messages]
                    # a write in the group it holds: its reply, kept until it commits
                    broker.b.conversation(messages[0].conversation_handle).send(
                        "re:" + ",".join(got))
                    with guard:
                        del owner[group]
                    if undo:
                        raise KeyError("rolled back")
            except KeyError:
                continue
            with guard:
                committed.extend(got)

    run_together(worker, [(n,) for n in range(4)])
    assert not clashes
    assert sorted(committed) == sorted(sent)
    # each committed handling's reply once, none of a rolled-back one
    replies: list[str] = []
    for _ in range(len(convs) + 1):  # a RECEIVE returns one group's messages
        replies += [m.text[3:] for m in broker.a.receive("QA", max_messages=1000)]
    assert sorted(t for r in replies for t in r.split(",")) == sorted(sent)


def test_c7_kept_ends_and_dialogs_of_random_transactions_take_effect_once_at_commit(broker):
    """Four threads receive, and in the same transaction reply, begin a dialog in the
    group they hold and send on it, or END the conversation once its last message is
    theirs; a third of them roll back. Every message is received and committed once; what
    a committed transaction kept arrives once, nothing of a rolled-back one; a committed
    END closed its conversation, and no other conversation is closed."""
    broker.a.create_service("SA2", queue="QA", contracts=["DEFAULT"])
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(6)]
    last = 3
    sent = []
    for k in range(last + 1):
        for i, conv in enumerate(convs):
            conv.send(f"{i}:{k}")
            sent.append(f"{i}:{k}")
    guard = threading.Lock()
    committed: list[str] = []
    kept: list[str] = []  # what committed transactions sent on to A, by its text
    ended: list[int] = []  # the conversations a committed END closed
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        rng = random.Random(100 + n)
        while True:
            undo = rng.random() < 0.3
            try:
                with broker.b.transaction():
                    messages = [m for m in broker.b.receive(
                        "QB", max_messages=rng.choice((1, 2, 3))) if m.text]
                    if not messages:
                        return
                    got = [m.text for m in messages]
                    handle = messages[0].conversation_handle
                    i = int(got[0].split(":")[0])
                    action = rng.choice(("reply", "dialog", "end"))
                    if action == "end" and got[-1] != f"{i}:{last}":
                        action = "reply"  # END only once the rest of it is received
                    if action == "reply":
                        broker.b.conversation(handle).send("re:" + ",".join(got))
                    elif action == "dialog":
                        new = broker.b.begin_dialog(
                            "SB", "SA2",
                            related_conversation_group=str(messages[0].conversation_group_id))
                        new.send("new:" + ",".join(got))
                    else:
                        broker.b.conversation(handle).end()
                    if undo:
                        raise KeyError("rolled back")
            except KeyError:
                continue
            except BaseException as exc:
                errors.append(exc)
                return
            with guard:
                committed.extend(got)
                if action == "end":
                    ended.append(i)
                else:
                    kept.extend(got)

    run_together(worker, [(n,) for n in range(4)])
    assert errors == []
    assert sorted(committed) == sorted(sent)
    arrived: list[str] = []
    end_dialogs = 0
    for _ in range(4 * len(convs)):  # a RECEIVE returns one group's messages
        for m in broker.a.receive("QA", max_messages=1000):
            if m.message_type_name.endswith("/EndDialog"):
                end_dialogs += 1
            else:
                arrived += m.text.split(":", 1)[1].split(",")
    assert sorted(arrived) == sorted(kept)
    assert end_dialogs == len(ended)
    states = dict(broker.rows(
        "SELECT conversation_handle, state_desc FROM sys.conversation_endpoints "
        "WHERE is_initiator AND far_service = 'SB'"))
    assert sorted(i for i, c in enumerate(convs)
                  if states[c.handle] == "DISCONNECTED_INBOUND") == sorted(ended)
    assert {states[c.handle] for i, c in enumerate(convs) if i not in ended} == {
        "CONVERSING"}


# A worker's script: transactions, each RECEIVE of up to n messages, a reply SEND on what
# it received or none, then COMMIT or ROLLBACK. Four ROLLBACKs at most in all: the fifth in
# a row would turn the queue OFF (poison message handling, as SQL Server's).
ROLLBACKS = 4


def _at_most_rollbacks(workers: list) -> list:
    left = ROLLBACKS
    out = []
    for script in workers:
        steps = []
        for want, reply, outcome in script:
            if outcome == "rollback":
                if left == 0:
                    outcome = "commit"
                left -= outcome == "rollback"
            steps.append((want, reply, outcome))
        out.append(steps)
    return out


scripts = st.lists(st.lists(st.tuples(st.integers(1, 3), st.booleans(),
                                      st.sampled_from(["commit", "rollback"])),
                            min_size=1, max_size=8), min_size=2, max_size=4
                   ).map(_at_most_rollbacks)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts, st.integers(2, 5), st.integers(1, 4))
def test_c7_random_interleavings_of_transactions_in_threads_hold_to_the_lock_rules(
        workers, conversations, per_conversation):
    """Threads run generated scripts of RECEIVE / reply SEND / COMMIT or ROLLBACK over
    several groups at once, held to a reference model: a group is held by one transaction
    at a time, each holder receives its conversation's messages from where the last commit
    left them, in order; every message is committed exactly once (what the scripts left is
    still in the queue, in order) and each committed reply arrives once, nothing of a
    rolled-back transaction."""
    broker = make_broker(None)
    try:
        convs = [broker.a.begin_dialog("SA", "SB") for _ in range(conversations)]
        for k in range(per_conversation):
            for conv in convs:
                conv.send(f"{k}")
        far = {str(h): i for i, (h,) in enumerate(broker.rows(
            "SELECT conversation_handle FROM sys.conversation_endpoints WHERE NOT "
            "is_initiator ORDER BY create_date, conversation_id"))}
        guard = threading.Lock()
        owner: dict[str, int] = {}  # the model: group -> the transaction holding it
        done: dict[str, int] = {}  # conversation -> messages committed as received
        committed: list[tuple[str, int]] = []
        replies: list[str] = []
        problems: list[str] = []
        processing = threading.Event()  # never set

        def run(n: int, script) -> None:
            for want, reply, outcome in script:
                try:
                    with broker.b.transaction():
                        got = broker.b.receive("QB", max_messages=want)
                        if not got:
                            continue
                        group, handle = str(got[0].conversation_group_id), str(
                            got[0].conversation_handle)
                        seqs = [m.message_sequence_number for m in got]
                        with guard:
                            if owner.setdefault(group, n) != n:
                                problems.append(f"{group} held by {owner[group]} and {n}")
                            if {str(m.conversation_handle) for m in got} != {handle}:
                                problems.append(f"one RECEIVE gave two conversations: {got}")
                            first = done.get(handle, 0)
                            if seqs != list(range(first, first + len(seqs))):
                                problems.append(f"{handle}: {seqs} after {first}")
                        # the work of a worker, its group held (others run meanwhile)
                        processing.wait(0.002)
                        with guard:
                            if reply:
                                broker.b.conversation(handle).send(
                                    f"{handle}:{seqs[0]}:{len(seqs)}")
                            # the model's change is made while the group is still held
                            del owner[group]
                            if outcome == "commit":
                                done[handle] = first + len(seqs)
                                committed.extend((handle, s) for s in seqs)
                                if reply:
                                    replies.append(f"{handle}:{seqs[0]}:{len(seqs)}")
                        if outcome == "rollback":
                            raise KeyError("rolled back")
                except KeyError:
                    continue
                except BaseException as exc:
                    problems.append(f"worker {n}: {type(exc).__name__}: {exc}")
                    return

        run_together(run, list(enumerate(workers)))
        assert problems == []
        # what is left is in the queue, in order, after what was committed
        left: list[tuple[str, int]] = []
        while more := broker.b.receive("QB", max_messages=100):
            left += [(str(m.conversation_handle), m.message_sequence_number) for m in more]
        for handle in far:
            mine = [s for h, s in left if h == handle]
            assert mine == list(range(done.get(handle, 0), per_conversation))
        assert sorted(committed + left) == sorted(
            (h, s) for h in far for s in range(per_conversation))
        arrived: list[str] = []
        while more := broker.a.receive("QA", max_messages=100):
            arrived += [m.text for m in more]
        assert sorted(arrived) == sorted(replies)
    finally:
        broker.inst.close()


def wait_until(condition, what: str = "the condition") -> None:
    done = threading.Event()
    for _ in range(int(BOUND / 0.01)):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_c7_a_change_waiting_for_a_group_whose_holder_commits_is_the_victim(broker):
    """A transaction that changes something holds the store's write transaction; when it
    waits for a group held by one that has only received, and that one commits (it needs
    the write transaction for its flush), the waiting one is the victim, never the
    commit, and is woken with 1205 at once."""
    (_, texts1), _ = two_groups(broker, per_group=1)
    held, commit = threading.Event(), threading.Event()
    got: list = []

    def receiver() -> None:
        with broker.b.transaction():
            got.extend(broker.b.receive("QB"))
            held.set()
            assert commit.wait(BOUND)

    def changer() -> None:
        with broker.b.transaction():
            # a catalog write holds the store's write transaction from here
            broker.b.create_queue("QW")
            broker.b.conversation(got[0].conversation_handle).begin_timer(600)

    one, first_outcome = in_thread(receiver)
    assert held.wait(BOUND)
    two, second_outcome = in_thread(changer)
    wait_until(lambda: broker.rows(
        "SELECT COUNT(*) FROM sys.dm_broker_waits WHERE wait_type = 'BROKER_GROUP_LOCK'"
    ) == [(1,)])
    commit.set()
    one.join(BOUND)
    two.join(BOUND)
    assert "error" not in first_outcome and [m.text for m in got] == texts1
    assert isinstance(second_outcome.get("error"), DeadlockVictimError)
    assert broker.rows("SELECT COUNT(*) FROM sys.queue_messages WHERE conversation_group_id "
                       f"= '{got[0].conversation_group_id}'") == [(0,)]
    assert broker.rows("SELECT COUNT(*) FROM sys.dm_broker_conversation_group_locks") == [
        (0,)]


def test_c7_get_conversation_group_then_receive_where_run_side_by_side(broker):
    """The worker of GET CONVERSATION GROUP, then RECEIVE ... WHERE conversation_group_id
    on it: two such transactions take different groups and hold them at once."""
    (g1, texts1), (g2, texts2) = two_groups(broker)
    holding = [threading.Event(), threading.Event()]

    def worker(i: int) -> tuple[str, list[str], bool]:
        with broker.b.transaction():
            group = broker.b.get_conversation_group("QB")
            got = broker.b.receive("QB", max_messages=10, conversation_group_id=group)
            holding[i].set()
            return str(group), [m.text for m in got], holding[1 - i].wait(BOUND)

    threads = [in_thread(lambda i=i: worker(i)) for i in range(2)]
    for thread, _ in threads:
        thread.join(BOUND)
    results = sorted(outcome["result"] for _, outcome in threads)
    assert results == sorted([(g1, texts1, True), (g2, texts2, True)])


def test_c7_workers_reply_while_requests_arrive_each_exactly_once(broker):
    """Workers receive a request, reply on its conversation and commit (or roll back and
    leave it for another) while the initiator keeps sending: every request is handled
    once, and every committed handling's reply arrives once."""
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(5)]
    handled: list[str] = []
    guard = threading.Lock()
    sending_done = threading.Event()

    def worker(n: int) -> None:
        rng = random.Random(n)
        while True:
            try:
                with broker.b.transaction():
                    got = broker.b.receive("QB", max_messages=1, timeout=0.05)
                    if not got:
                        if sending_done.is_set():
                            return
                        continue
                    broker.b.conversation(got[0].conversation_handle).send(
                        b"re:" + got[0].message_body)
                    if rng.random() < 0.25:
                        raise KeyError("rolled back")
                with guard:
                    handled.append(got[0].text)
            except (KeyError, DeadlockVictimError):
                continue

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(4)]
    for thread in threads:
        thread.start()
    sent = []
    for k in range(6):
        for i, conv in enumerate(convs):
            conv.send(f"{i}:{k}")
            sent.append(f"{i}:{k}")
    sending_done.set()
    for thread in threads:
        thread.join(4 * BOUND)
    assert sorted(handled) == sorted(sent)
    replies = broker.a.receive("QA", max_messages=1000)
    while True:
        more = broker.a.receive("QA", max_messages=1000)
        if not more:
            break
        replies += more
    assert sorted(m.text for m in replies) == sorted(f"re:{t}" for t in sent)
