"""MOVE CONVERSATION (``Conversation.move_to``): a conversation and its queued messages join
another conversation group of the same queue (C3's unit of RECEIVE), inside the current
transaction; the RECEIVE read-ahead follows; refusals say what was wrong."""

from __future__ import annotations

import threading

import pytest

import pybroker
from pybroker.errors import (
    ConversationError,
    ConversationStateError,
    InvalidArgumentError,
    NotFoundError,
)
from tests.conftest_conversations import make_broker
from tests.test_group_lock_threads import BOUND, in_thread


@pytest.fixture
def broker(tmp_path):
    b = make_broker(tmp_path / "broker.duckdb")
    b.b.create_queue("QC")
    b.b.create_service("SC", queue="QC", contracts=["DEFAULT"])
    yield b
    b.inst.close()


def targets(broker, *convs, database="B"):
    """The far sides (in ``database``) of the initiator conversations ``convs``."""
    rows = dict(broker.rows(
        "SELECT conversation_id, conversation_handle FROM sys.conversation_endpoints "
        "WHERE database_name = ?", [database]))
    db = broker.inst.database(database)
    return [db.conversation(rows[c.conversation_id]) for c in convs]


def queue_groups(broker, queue="QB"):
    """(group, body) of the queue's messages in queuing order."""
    return broker.rows(
        "SELECT conversation_group_id, CAST(message_body AS VARCHAR) FROM queue_messages "
        "WHERE queue_name = ? ORDER BY queuing_order", [queue])


def three_conversations(broker):
    c1, c2, c3 = (broker.a.begin_dialog("SA", "SB") for _ in range(3))
    for conv, body in ((c1, "x0"), (c2, "y0"), (c3, "z0"), (c1, "x1"), (c3, "z1"),
                       (c2, "y1")):
        conv.send(body)
    return (c1, c2, c3), targets(broker, c1, c2, c3)


def test_a_moved_conversation_and_its_messages_are_in_the_new_group(broker, tmp_path):
    _, (t1, t2, t3) = three_conversations(broker)
    g1, g2, g3 = (t.conversation_group_id for t in (t1, t2, t3))
    assert len({g1, g2, g3}) == 3
    t3.move_to(g1.upper())  # a UUID in any case
    assert (t1.conversation_group_id, t3.conversation_group_id) == (g1, g1)
    assert broker.rows(
        "SELECT conversation_handle, conversation_group_id FROM sys.conversation_endpoints "
        "WHERE database_name = 'B' ORDER BY conversation_handle") == sorted(
        [(t1.handle, g1), (t2.handle, g2), (t3.handle, g1)])
    assert queue_groups(broker) == [(g1, "x0"), (g2, "y0"), (g1, "z0"), (g1, "x1"),
                                    (g1, "z1"), (g2, "y1")]
    got = broker.b.receive("QB", max_messages=10, conversation_group_id=g1)
    assert [(m.conversation_handle, m.conversation_group_id, m.text) for m in got] == [
        (t1.handle, g1, "x0"), (t3.handle, g1, "z0"), (t1.handle, g1, "x1"),
        (t3.handle, g1, "z1")]
    assert [m.text for m in broker.b.receive("QB", max_messages=10)] == ["y0", "y1"]
    # it is in the file
    broker.inst.close()
    inst = pybroker.connect(tmp_path / "broker.duckdb", worker=False)
    try:
        assert inst.database("B").conversation(t3.handle).conversation_group_id == g1
    finally:
        inst.close()


def test_a_message_that_arrives_after_the_move_joins_the_new_group(broker):
    (_, c2, _), (t1, t2, _) = three_conversations(broker)
    broker.b.receive("QB", max_messages=10)  # x0, x1: the first group
    t2.move_to(t1.conversation_group_id)
    c2.send("y2")
    got = broker.b.receive("QB", max_messages=10)
    assert [(m.conversation_group_id, m.text) for m in got] == [
        (t1.conversation_group_id, t) for t in ("y0", "y1", "y2")]


def test_receive_read_ahead_follows_the_move(broker):
    _, (_, t2, t3) = three_conversations(broker)
    g2 = t2.conversation_group_id
    with broker.b.transaction():
        first = broker.b.receive("QB", max_messages=10)  # one statement: group 1
        assert [m.text for m in first] == ["x0", "x1"]
        second = broker.b.receive("QB", max_messages=1)  # reads the queue ahead
        assert [m.text for m in second] == ["y0"]
        t3.move_to(g2)
        rest = broker.b.receive("QB", max_messages=10)
        assert [(m.conversation_group_id, m.text) for m in rest] == [
            (g2, "z0"), (g2, "z1"), (g2, "y1")]
        assert broker.b.receive("QB", max_messages=10) == []


def test_a_move_rolls_back_with_its_transaction(broker):
    _, (t1, t2, _) = three_conversations(broker)
    g1, g2 = t1.conversation_group_id, t2.conversation_group_id
    before = queue_groups(broker)
    with pytest.raises(RuntimeError, match="undo"), broker.b.transaction():
        t2.move_to(g1)
        assert broker.b.receive("QB", max_messages=10, conversation_group_id=g1)
        raise RuntimeError("undo")
    assert t2.conversation_group_id == g2
    assert queue_groups(broker) == before
    assert [m.text for m in broker.b.receive(
        "QB", max_messages=10, conversation_group_id=g2)] == ["y0", "y1"]


def test_a_conversation_moves_into_a_group_begun_in_the_same_transaction(broker):
    old = broker.a.begin_dialog("SA", "SB")
    old.send("before")
    with broker.a.transaction():
        new = broker.a.begin_dialog("SA", "SB")
        old.move_to(new.conversation_group_id)
        assert old.conversation_group_id == new.conversation_group_id
    assert broker.rows(
        "SELECT COUNT(DISTINCT conversation_group_id) FROM sys.conversation_endpoints "
        "WHERE database_name = 'A'") == [(1,)]


def test_a_move_in_an_open_transaction_holds_only_its_two_groups(broker):
    """C7: the move is kept until commit; meanwhile another transaction begins, sends and
    commits, and a RECEIVE of the queue takes the one group neither holds."""
    _, (t1, t2, t3) = three_conversations(broker)
    g1, g2, g3 = (t.conversation_group_id for t in (t1, t2, t3))
    held, release = threading.Event(), threading.Event()

    def mover() -> None:
        with broker.b.transaction():
            t3.move_to(g1)
            held.set()
            assert release.wait(BOUND)

    thread, outcome = in_thread(mover)
    assert held.wait(BOUND)
    with broker.a.transaction():
        assert broker.a.begin_dialog("SA", "SB").send("bystander") == 0
    with broker.b.transaction():  # g1 and g3 are the mover's: g2 is next, then the new one
        got = broker.b.receive("QB", max_messages=10)
        assert [(m.conversation_group_id, m.text) for m in got] == [(g2, "y0"), (g2, "y1")]
    assert release.is_set() is False
    assert {g for g, _ in queue_groups(broker)} >= {g1, g3}  # not moved yet
    release.set()
    thread.join(BOUND)
    assert "error" not in outcome
    assert [g for g, body in queue_groups(broker) if body[0] in "xz"] == [g1] * 4
    assert t3.conversation_group_id == g1


def test_moving_into_its_own_group_changes_nothing(broker):
    _, (t1, _, _) = three_conversations(broker)
    before = queue_groups(broker)
    t1.move_to(t1.conversation_group_id)
    assert queue_groups(broker) == before


def test_refusals_say_what_was_wrong(broker):
    (c1, _, _), (t1, t2, _) = three_conversations(broker)
    g1 = t1.conversation_group_id
    before = queue_groups(broker)
    with pytest.raises(InvalidArgumentError) as caught:
        t2.move_to("nope")
    assert str(caught.value) == "conversation_group_id 'nope' is not a UUID"
    with pytest.raises(InvalidArgumentError) as caught:
        t2.move_to(7)  # type: ignore[arg-type]
    assert str(caught.value) == "conversation_group_id must be a UUID string, not int"

    unknown = "00000000-0000-0000-0000-000000000001"
    with pytest.raises(NotFoundError) as caught:
        t2.move_to(unknown)
    assert str(caught.value) == (
        f"conversation group {unknown} does not exist: no open conversation is in it; move "
        "the conversation to the group of another conversation of queue 'QB' (its "
        "conversation_group_id), or begin one in a new group (BEGIN DIALOG ... WITH "
        "RELATED_CONVERSATION_GROUP, begin_dialog(related_conversation_group=...))")

    with pytest.raises(ConversationError) as caught:
        t2.move_to(c1.conversation_group_id)
    assert str(caught.value) == (
        f"conversation group {c1.conversation_group_id} belongs to database 'A', not 'B': "
        "a conversation moves only to a group of its own database and queue ('QB')")

    other = broker.a.begin_dialog("SA", "SC")
    other.send("to QC")
    (tc,) = targets(broker, other)
    with pytest.raises(ConversationError) as caught:
        tc.move_to(g1)
    assert str(caught.value) == (
        f"conversation group {g1} is a group of queue 'QB', but conversation {tc.handle} "
        "is of queue 'QC': a conversation moves only between groups of the same queue")

    c1.end()
    assert c1.state == "CD"
    with pytest.raises(ConversationStateError) as caught:
        c1.move_to(other.conversation_group_id)
    assert str(caught.value) == (
        f"cannot move conversation {c1.handle} to another group: it is closed (state CD)")
    assert caught.value.event == "move"

    t2.end(cleanup=True)
    with pytest.raises(ConversationError) as caught:
        t2.move_to(g1)
    assert str(caught.value) == (
        f"conversation handle {t2.handle} does not exist in this instance (never begun, or "
        "ended WITH CLEANUP)")

    with pytest.raises(ConversationError) as caught:
        broker.a.conversation(t1.handle)
    assert "is not an endpoint of this database; use the database 'B'" in str(caught.value)
    # nothing moved: t2's messages left with END ... WITH CLEANUP, t1 got an EndDialog
    assert [r for r in queue_groups(broker) if r[1]] == [
        r for r in before if not r[1].startswith("y")]


def test_a_client_of_a_served_instance_moves_conversations_as_embedded(tmp_path):
    from pybroker.server.server import serve_clients

    path = tmp_path / "served.duckdb"
    owner = pybroker.connect(path, worker=False)
    db = owner.create_database("A")
    db.create_queue("q")
    db.create_service("s", "q", ["DEFAULT"])
    server = serve_clients(owner)
    client = pybroker.connect(path)
    try:
        served = client.database("A")
        c1, c2, c3 = (served.begin_dialog("s", "s") for _ in range(3))
        for conv, body in ((c1, "a"), (c2, "b"), (c3, "c"), (c1, "d")):
            conv.send(body)
        far = dict(client.sql(
            "SELECT conversation_id, conversation_handle FROM sys.conversation_endpoints "
            "WHERE NOT is_initiator").fetchall())
        t1, t2, t3 = (served.conversation(far[c.conversation_id]) for c in (c1, c2, c3))
        group = t1.conversation_group_id
        t2.move_to(group)
        served.execute(f"MOVE CONVERSATION '{t3.handle}' TO '{group}'")
        got = served.receive("q", max_messages=10)
        assert [(m.conversation_handle, m.conversation_group_id, m.text) for m in got] == [
            (t1.handle, group, "a"), (t2.handle, group, "b"), (t3.handle, group, "c"),
            (t1.handle, group, "d")]
        unknown = "00000000-0000-0000-0000-000000000001"
        with pytest.raises(NotFoundError, match=f"conversation group {unknown} does not "
                           "exist: no open conversation is in it"):
            c1.move_to(unknown)
    finally:
        client.close()
        server.close()
        owner.close()
