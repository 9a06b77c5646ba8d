"""Writers side by side (SPEC C7; engine.py, unit_of_work.py): a SEND inside a transaction
holds its conversation's group and no instance-wide lock until the transaction commits;
only the commit's flush is serialized. What it sent is private to it until then; a
rollback leaves nothing; a deadlock through the commit's wait for the store has one
victim; a SEND whose conversation another transaction changed meanwhile ends the
transaction with WriteConflictError (3960) at commit. END CONVERSATION and BEGIN
CONVERSATION TIMER are kept alike: made at commit, seen by the transaction's own reads."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from pybroker.errors import (
    ConversationError,
    ConversationStateError,
    DeadlockVictimError,
    WriteConflictError,
)
from tests.conftest_conversations import make_broker
from tests.test_group_lock_threads import BOUND, in_thread, wait_until


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One instance for the module: each test begins conversations of its own and leaves
    the queues as it found them."""
    b = make_broker(tmp_path_factory.mktemp("writers") / "broker.duckdb")
    yield b
    b.inst.close()


def queued(broker, queue: str) -> int:
    return broker.rows(
        f"SELECT COUNT(*) FROM sys.queue_messages WHERE queue_name = '{queue}'")[0][0]


def send_sequence(broker, handle: str) -> int:
    return broker.rows("SELECT send_sequence FROM sys.conversation_endpoints "
                       f"WHERE conversation_handle = '{handle}'")[0][0]


def test_c7_two_transactions_that_sent_on_different_groups_hold_their_sends_at_once(broker):
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(2)]
    sent = [threading.Event(), threading.Event()]

    def writer(i: int) -> tuple[int, bool]:
        with broker.a.transaction():
            seq = convs[i].send(f"w{i}")
            sent[i].set()
            # the other holds its SEND while this one holds its own
            return seq, sent[1 - i].wait(BOUND)

    threads = [in_thread(lambda i=i: writer(i)) for i in range(2)]
    for thread, _ in threads:
        thread.join(BOUND)
    assert [outcome.get("result") for _, outcome in threads] == [(0, True), (0, True)]
    got = broker.b.receive("QB", max_messages=10) + broker.b.receive("QB", max_messages=10)
    assert sorted(m.text for m in got) == ["w0", "w1"]


def test_c7_a_bystander_begins_and_sends_while_a_transaction_that_sent_is_open(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send("first")
    held, release = threading.Event(), threading.Event()

    def holder() -> int:
        with broker.a.transaction():
            seq = conv.send("held")
            held.set()
            assert release.wait(BOUND)
        return seq

    thread, outcome = in_thread(holder)
    assert held.wait(BOUND)
    with broker.a.transaction():
        other = broker.a.begin_dialog("SA", "SB")
        assert other.send("bystander") == 0
    # committed while the holder is still open: what it sent is there, the holder's not
    assert release.is_set() is False
    assert sorted(m.text for m in broker.b.receive("QB", max_messages=10)
                  + broker.b.receive("QB", max_messages=10)) == ["bystander", "first"]
    release.set()
    thread.join(BOUND)
    assert outcome.get("result") == 1
    assert [m.text for m in broker.b.receive("QB", max_messages=10)] == ["held"]


def test_c7_no_other_transaction_reads_an_uncommitted_send(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send("committed")
    assert [m.text for m in broker.b.receive("QB")] == ["committed"]
    before = (conv.state, send_sequence(broker, conv.handle))
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with broker.a.transaction():
            conv.send("uncommitted")
            assert conv.state == "CO"  # its own SEND it reads
            held.set()
            assert release.wait(BOUND)

    thread, outcome = in_thread(holder)
    assert held.wait(BOUND)
    # neither the endpoint's change nor the message, by any read of another transaction
    assert (conv.state, send_sequence(broker, conv.handle)) == before
    assert queued(broker, "QB") == 0
    with broker.b.transaction():
        assert broker.b.receive("QB", max_messages=10) == []
    release.set()
    thread.join(BOUND)
    assert "error" not in outcome
    assert send_sequence(broker, conv.handle) == before[1] + 1
    assert [m.text for m in broker.b.receive("QB")] == ["uncommitted"]


def test_c7_a_rolled_back_send_leaves_nothing(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send("kept")

    class Undo(Exception):
        pass

    with pytest.raises(Undo), broker.a.transaction():
        assert conv.send("undone") == 1
        assert conv.send("undone too") == 2
        raise Undo
    assert send_sequence(broker, conv.handle) == 1
    assert broker.rows("SELECT COUNT(*) FROM sys.dm_broker_conversation_group_locks") == [
        (0,)]
    assert conv.send("next") == 1  # the number the rolled-back SEND had
    assert [m.text for m in broker.b.receive("QB", max_messages=10)] == ["kept", "next"]


def test_c7_a_writer_waiting_for_a_group_whose_sender_commits_is_the_one_victim(broker):
    """The one sending holds its group and, at commit, waits for the store's write
    transaction; the writer holding it waits for that group: one deadlock, whose victim
    is the writer (1205), never the commit, which goes on."""
    x = broker.a.begin_dialog("SA", "SB")
    endpoints = ("SELECT COUNT(*), COUNT(dialog_timer) FROM sys.conversation_endpoints "
                 "WHERE is_initiator")
    before = broker.rows(endpoints)
    assert before[0][1] == 0
    sent, go = threading.Event(), threading.Event()

    def sender() -> None:
        with broker.a.transaction():
            x.send("from the sender")
            sent.set()
            assert go.wait(BOUND)

    def writer() -> None:
        assert sent.wait(BOUND)
        with broker.a.transaction():
            broker.a.begin_dialog("SA", "SB").begin_timer(600)
            # a catalog write: the store's write transaction is this one's from here
            broker.a.create_queue("QW")
            x.send("from the writer")  # waits for the sender's group

    one, first = in_thread(sender)
    two, second = in_thread(writer)
    wait_until(lambda: broker.rows(
        "SELECT COUNT(*) FROM sys.dm_broker_waits WHERE wait_type = 'BROKER_GROUP_LOCK'"
    ) == [(1,)])
    go.set()
    one.join(BOUND)
    two.join(BOUND)
    assert "error" not in first
    assert isinstance(second.get("error"), DeadlockVictimError)
    assert [m.text for m in broker.b.receive("QB", max_messages=10)] == ["from the sender"]
    # nothing of the victim: its dialog and timer are gone with it
    assert broker.rows(endpoints) == before


def test_c7_a_send_whose_conversation_changed_before_commit_is_a_write_conflict(broker):
    """The target's worker receives and replies; before it commits, the initiator ends
    the conversation (its own group, not the worker's): the reply no longer holds, so the
    worker's transaction is rolled back whole with 3960, its message back in the queue."""
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send("request")
    replied, ended = threading.Event(), threading.Event()

    def worker() -> None:
        with broker.b.transaction():
            got = broker.b.receive("QB")
            broker.b.conversation(got[0].conversation_handle).send("reply")
            replied.set()
            assert ended.wait(BOUND)

    thread, outcome = in_thread(worker)
    assert replied.wait(BOUND)
    conv.end()
    ended.set()
    thread.join(BOUND)
    error = outcome.get("error")
    assert isinstance(error, WriteConflictError) and error.number == 3960
    assert "run the transaction again" in str(error)
    assert [m.message_type_name for m in broker.b.receive("QB", max_messages=10)] == [
        "DEFAULT", "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"]
    assert queued(broker, "QA") == 0  # no reply


def test_c7_the_next_sequence_numbers_lock_only_the_conversation_asked_for(broker):
    """A served client asks the numbers of the conversation it sends on and of others it
    sent on lately (to pipeline its SENDs): only the first's group is taken; the others'
    numbers come only where this transaction holds their groups already."""
    x, y = broker.a.begin_dialog("SA", "SB"), broker.a.begin_dialog("SA", "SB")
    messaging = broker.inst.kernel.messaging
    with broker.a.transaction():
        assert messaging.next_send_sequences(broker.a.database_id, [x.handle, y.handle]
                                             ) == [0, None]
        assert [str(r[0]) for r in broker.rows(
            "SELECT conversation_group_id FROM sys.dm_broker_conversation_group_locks")
        ] == [x.conversation_group_id]
        assert x.send("x") == 0
        assert messaging.next_send_sequences(broker.a.database_id, [y.handle, x.handle]
                                             ) == [0, 1]
    assert broker.rows("SELECT COUNT(*) FROM sys.dm_broker_conversation_group_locks") == [
        (0,)]
    assert [m.text for m in broker.b.receive("QB", max_messages=10)] == ["x"]


END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"


class Undo(Exception):
    """Raised inside a transaction to roll it back."""


def endpoint(broker, handle: str) -> tuple:
    return broker.rows("SELECT state, dialog_timer FROM sys.conversation_endpoints "
                       f"WHERE conversation_handle = '{handle}'")[0]


def requested(broker, *texts: str) -> list:
    """A conversation into QB with ``texts`` sent on it: its initiator and its target."""
    conv = broker.a.begin_dialog("SA", "SB")
    for text in texts:
        conv.send(text)
    handle = broker.rows("SELECT conversation_handle FROM sys.conversation_endpoints "
                         f"WHERE conversation_id = '{conv.conversation_id}' "
                         "AND NOT is_initiator")[0][0]
    return [conv, broker.b.conversation(str(handle))]


def test_c7_an_end_and_a_timer_in_an_open_transaction_hold_only_their_group(broker):
    _, target = requested(broker, "request")
    assert [m.text for m in broker.b.receive("QB")] == ["request"]
    held, release = threading.Event(), threading.Event()
    called_at = broker.clock.now

    def holder() -> None:
        with broker.b.transaction():
            target.send("reply")
            target.begin_timer(600)
            target.end()
            held.set()
            assert release.wait(BOUND)

    thread, outcome = in_thread(holder)
    assert held.wait(BOUND)
    # a bystander begins, sends and commits while the holder is open: no store is held
    with broker.a.transaction():
        assert broker.a.begin_dialog("SA", "SB").send("bystander") == 0
    assert release.is_set() is False
    # nothing of the holder is seen meanwhile
    assert endpoint(broker, target.handle) == ("CO", None)
    assert queued(broker, "QA") == 0
    broker.clock.advance(100)  # the commit comes later than the timer's call
    try:
        release.set()
        thread.join(BOUND)
    finally:
        broker.clock.advance(-100)
    assert "error" not in outcome
    # made at commit, in order: the reply, then the end (the initiator has it: this side
    # is closed); the timer runs from its call
    timer = datetime.fromtimestamp(called_at, UTC).replace(tzinfo=None)
    assert endpoint(broker, target.handle) == ("CD", timer + timedelta(seconds=600))
    assert [m.message_type_name for m in broker.a.receive("QA", max_messages=10)] == [
        "DEFAULT", END_DIALOG]
    assert [m.text for m in broker.b.receive("QB", max_messages=10)] == ["bystander"]


def test_c7_a_rolled_back_end_leaves_the_conversation_and_its_messages(broker):
    _, target = requested(broker, "one", "two")
    with pytest.raises(Undo), broker.b.transaction():
        target.end()
        target.begin_timer(60)  # on the conversation as its END leaves it
        raise Undo
    assert endpoint(broker, target.handle) == ("CO", None)
    assert queued(broker, "QB") == 2 and queued(broker, "QA") == 0
    target.end()  # for real: its messages go, the initiator hears of it
    assert queued(broker, "QB") == 0
    assert [m.message_type_name for m in broker.a.receive("QA")] == [END_DIALOG]


def test_c7_a_transaction_reads_its_own_kept_end(broker):
    """After its END, the transaction's RECEIVE has none of the conversation's messages,
    and its SEND or second END on it fails as on an ended conversation; rolled back,
    everything is as it was."""
    (_, ended), (_, other) = requested(broker, "e1", "e2"), requested(broker, "o1")
    with pytest.raises(Undo), broker.b.transaction():
        ended.end()
        got = broker.b.receive("QB", max_messages=10)
        assert [m.text for m in got] == ["o1"]
        with pytest.raises(ConversationStateError):
            ended.send("after the end")
        with pytest.raises(ConversationStateError):
            ended.end()
        raise Undo
    assert endpoint(broker, ended.handle)[0] == "CO"
    assert sorted(m.text for m in broker.b.receive("QB", max_messages=10)
                  + broker.b.receive("QB", max_messages=10)) == ["e1", "e2", "o1"]
    for target in (ended, other):
        target.end()
    assert [m.message_type_name for m in broker.a.receive("QA")
            + broker.a.receive("QA")] == [END_DIALOG, END_DIALOG]


def test_c7_a_dialog_begun_in_an_open_transaction_is_its_own_until_commit(broker):
    held, release = threading.Event(), threading.Event()
    begun: list = []

    def holder() -> None:
        with broker.a.transaction():
            conv = broker.a.begin_dialog("SA", "SB")
            begun.append(conv.handle)
            assert conv.send("from a new dialog") == 0
            held.set()
            assert release.wait(BOUND)

    thread, outcome = in_thread(holder)
    assert held.wait(BOUND)
    # a bystander begins, sends and commits meanwhile; the held dialog is not in the file
    with broker.a.transaction():
        assert broker.a.begin_dialog("SA", "SB").send("bystander") == 0
    assert release.is_set() is False
    assert broker.rows("SELECT COUNT(*) FROM sys.conversation_endpoints "
                       f"WHERE conversation_handle = '{begun[0]}'") == [(0,)]
    assert [m.text for m in broker.b.receive("QB", max_messages=10)] == ["bystander"]
    release.set()
    thread.join(BOUND)
    assert "error" not in outcome
    got = broker.b.receive("QB", max_messages=10)
    assert [m.text for m in got] == ["from a new dialog"]
    assert endpoint(broker, begun[0])[0] == "CO"


def test_c7_a_rolled_back_dialog_leaves_nothing(broker):
    with pytest.raises(Undo), broker.a.transaction():
        conv = broker.a.begin_dialog("SA", "SB")
        conv.send("undone")
        assert conv.state == "CO"  # its own dialog and SEND it reads
        raise Undo
    assert broker.rows("SELECT COUNT(*) FROM sys.conversation_endpoints "
                       f"WHERE conversation_handle = '{conv.handle}'") == [(0,)]
    assert queued(broker, "QB") == 0 and queued(broker, "QA") == 0
    with pytest.raises(ConversationError, match="does not exist"):
        conv.send("after the rollback")


def test_c7_a_dialog_whose_service_was_dropped_before_commit_is_a_write_conflict(broker):
    broker.a.create_service("SX", queue="QA")
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with broker.a.transaction():
            broker.a.begin_dialog("SX", "SB").send("from a dropped service")
            held.set()
            assert release.wait(BOUND)

    thread, outcome = in_thread(holder)
    assert held.wait(BOUND)
    broker.a.drop_service("SX")  # a catalog write, committed while the holder is open
    release.set()
    thread.join(BOUND)
    error = outcome.get("error")
    assert isinstance(error, WriteConflictError) and error.number == 3960
    assert "dropped the service 'SX'" in str(error)
    assert queued(broker, "QB") == 0
    assert broker.rows("SELECT COUNT(*) FROM sys.conversation_endpoints "
                       "WHERE service_name = 'SX'") == [(0,)]


def test_c7_an_end_with_cleanup_in_an_open_transaction_is_made_at_commit(broker):
    _, target = requested(broker, "left")
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with broker.b.transaction():
            target.end(cleanup=True)
            held.set()
            assert release.wait(BOUND)

    thread, outcome = in_thread(holder)
    assert held.wait(BOUND)
    with broker.a.transaction():  # meanwhile: no store is held
        bystander = broker.a.begin_dialog("SA", "SB")
        bystander.send("bystander")
    assert endpoint(broker, target.handle)[0] == "CO" and queued(broker, "QB") == 2
    release.set()
    thread.join(BOUND)
    assert "error" not in outcome
    # this side and its message are gone, as WITH CLEANUP says; the bystander's stays
    assert broker.rows("SELECT COUNT(*) FROM sys.conversation_endpoints "
                       f"WHERE conversation_handle = '{target.handle}'") == [(0,)]
    assert [m.text for m in broker.b.receive("QB", max_messages=10)] == ["bystander"]
