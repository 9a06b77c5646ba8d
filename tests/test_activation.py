"""Internal activation with real threads (C3): an activated queue's callable is started
when messages arrive, handles them, replies, and a raising one is rolled back, recorded
and, after five rollbacks, its queue turned OFF; close() does not wait for ever on a
reader that never returns. Every wait is bounded; nothing asserts on timing."""

from __future__ import annotations

import time

import activation_handlers as handlers
import pytest

import pybroker
from tests.wire_helpers import wait_for

END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"


@pytest.fixture(autouse=True)
def _fresh_handlers():
    handlers.received.clear()
    handlers.calls.clear()
    handlers.release.clear()
    handlers.together.reset()
    handlers.held_together.clear()
    handlers.alone.clear()
    yield
    handlers.release.set()  # let a held reader go


def two_databases(inst: pybroker.Instance, procedure: str | None, **activation):
    """Initiator database A (service Sender on SenderQueue) and target database B
    (service Target on TargetQueue, activated with ``procedure``)."""
    a = inst.create_database("A")
    b = inst.create_database("B")
    a.create_queue("SenderQueue")
    a.create_service("Sender", "SenderQueue")
    b.create_queue(handlers.QUEUE, activation_procedure=procedure, **activation)
    b.create_service("Target", handlers.QUEUE, ["DEFAULT"])
    return a, b


def send(a: pybroker.Database, *bodies: bytes) -> pybroker.Conversation:
    conversation = a.begin_dialog("Sender", "Target")
    with a.transaction():
        for body in bodies:
            conversation.send(body)
    return conversation


def test_messages_sent_from_another_database_are_handled_by_the_activated_callable(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        a, _ = two_databases(inst, "activation_handlers:record")
        inst.start_activation(check_interval=0.05)
        send(a, b"one", b"two")
        wait_for(lambda: len(handlers.received) == 2, what="the reader to take both")
        send(a, b"three")
        wait_for(lambda: len(handlers.received) == 3, what="a reader for the new arrival")
        assert handlers.received == [b"one", b"two", b"three"]
        assert set(handlers.calls) == {"B"}
        wait_for(lambda: inst.sql("SELECT count(*) FROM sys.queue_messages "
                                  "WHERE queue_name = 'TargetQueue'").fetchone() == (0,),
                 what="the received messages to leave the queue")


def test_messages_waiting_before_activation_starts_are_handled(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        a, _ = two_databases(inst, "activation_handlers:record")
        send(a, b"early")
        inst.start_activation(check_interval=0.05)
        wait_for(lambda: handlers.received == [b"early"], what="the first check")


def test_a_replying_handler_answers_on_the_conversation(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        a, _ = two_databases(inst, "activation_handlers:reply", max_queue_readers=2)
        inst.start_activation(check_interval=0.05)
        send(a, b"ping")
        got: list[pybroker.Message] = []
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            got += a.receive("SenderQueue", timeout=0.2)
        assert [(m.message_type_name, m.message_body) for m in got] == [
            ("DEFAULT", b"PING"), (END_DIALOG, b"")]


def test_the_monitor_and_running_readers_are_shown_in_the_dm_views(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        a, b = two_databases(inst, "activation_handlers:never_return", execute_as="OWNER")
        inst.start_activation(check_interval=0.05)
        assert inst.sql("SELECT * FROM sys.dm_broker_activated_tasks").fetchall() == []
        send(a, b"hold")
        task = wait_for(lambda: inst.sql(
            "SELECT database_id, database_name, queue_name, procedure_name, execute_as "
            "FROM sys.dm_broker_activated_tasks").fetchall(), what="the running reader")
        assert task == [(b.database_id, "B", "TargetQueue",
                         "activation_handlers:never_return", -2)]
        # the reader took the message (a RECEIVE that returned rows) and holds on
        monitor = wait_for(lambda: inst.sql(
            "SELECT database_name, queue_name, state, last_activated_time IS NOT NULL, "
            "tasks_waiting FROM sys.dm_broker_queue_monitors "
            "WHERE state = 'RECEIVES_OCCURRING'").fetchall(), what="the monitor row")
        assert monitor == [("B", "TargetQueue", "RECEIVES_OCCURRING", True, 0)]
        handlers.release.set()
        wait_for(lambda: inst.sql("SELECT state FROM sys.dm_broker_queue_monitors"
                                  ).fetchall() == [("INACTIVE",)],
                 what="the monitor to go back to INACTIVE")
        assert inst.sql("SELECT * FROM sys.dm_broker_activated_tasks").fetchall() == []


def test_a_raising_reader_rolls_back_is_recorded_and_five_disable_the_queue(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        a, b = two_databases(inst, "activation_handlers:explode")
        inst.start_activation(check_interval=0.05)
        send(a, b"poison")
        wait_for(lambda: not b.queues()[0].status, what="poison-message handling")
        # each attempt rolled back: the message is still there, the queue OFF (C3)
        assert handlers.calls == ["explode"] * 5
        assert inst.sql("SELECT count(*) FROM sys.queue_messages "
                        "WHERE queue_name = 'TargetQueue'").fetchone() == (1,)
        events = wait_for(lambda: len(rows := inst.sql(
            "SELECT subclass, description FROM sys.broker_events "
            "WHERE event_class = 'Broker:Activation' ORDER BY event_id").fetchall()) == 5
            and rows, what="the five events")
        subclass, description = events[0]
        assert subclass == "Aborted"
        assert "activation_handlers:explode of queue B.TargetQueue raised " \
            "ValueError: poison body" in description
        # /metrics counts them: five readers started and failed, five rolled-back receives
        from pybroker.server.metrics import read_families
        values = {(f.name, tuple(sorted(labels.items()))): value
                  for f in read_families(inst.kernel) for labels, value in f.samples}
        assert values["pybroker_activation_readers_started_total", ()] == 5
        assert values["pybroker_activation_readers_failed_total", ()] == 5
        assert values["pybroker_poison_rollbacks_total",
                      (("database", "B"), ("queue", "TargetQueue"))] == 5
        assert "activation_handlers.py" in description and "in explode" in description
        # a queue turned OFF starts no more readers, and turned ON again it does
        b.alter_queue(handlers.QUEUE, status=True)
        wait_for(lambda: len(handlers.calls) > 5, what="activation after STATUS = ON")


def test_an_unimportable_procedure_records_one_event_and_starts_nothing_else(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        a, b = two_databases(inst, "no_such_module_here:handler")
        b.create_queue("Other", activation_procedure="activation_handlers:not_callable")
        b.create_service("OtherService", "Other", ["DEFAULT"])
        inst.start_activation(check_interval=0.05)
        send(a, b"lost")
        other = a.begin_dialog("Sender", "OtherService")
        other.send(b"x")
        events = wait_for(lambda: len(rows := inst.sql(
            "SELECT description FROM sys.broker_events WHERE event_class = "
            "'Broker:Activation' ORDER BY description").fetchall()) == 2 and rows,
            what="two import events")
        assert "queue B.Other: the activation procedure activation_handlers:not_callable " \
            "is a int, not a callable" in events[0][0]
        assert "queue B.TargetQueue: the activation procedure no_such_module_here:handler " \
            "cannot be imported: ModuleNotFoundError" in events[1][0]
        # three checks more, each starting a reader again (its last_activated_time moves)
        # that fails to import: the same failure is not recorded again
        activated = "SELECT last_activated_time FROM sys.dm_broker_queue_monitors " \
            "WHERE queue_name = 'TargetQueue'"
        times = {inst.sql(activated).fetchone()}
        wait_for(lambda: times.add(inst.sql(activated).fetchone()) or len(times) > 3,
                 what="three more readers of TargetQueue")
        assert b.queues()[1].status  # the queue stays ON
    # closing writes the events still held (a failure of the last reader included)
    with pybroker.connect(tmp_path / "i.duckdb", read_only=True) as again:
        assert again.sql("SELECT count(*) FROM sys.broker_events WHERE event_class = "
                         "'Broker:Activation'").fetchone() == (2,)


def test_close_with_a_reader_that_never_returns_returns_within_its_bound(tmp_path):
    inst = pybroker.connect(tmp_path / "i.duckdb")
    try:
        a, _ = two_databases(inst, "activation_handlers:never_return")
        inst.start_activation(check_interval=0.05, close_timeout=0.5)
        send(a, b"hold")
        wait_for(lambda: handlers.calls == ["never"], what="the reader to start")
    finally:
        inst.close()  # gives up on the reader after 0.5 s (pytest's timeout guards)
    assert inst.stop_activation() == 0  # already stopped with the instance
    with pybroker.connect(tmp_path / "i.duckdb", read_only=True) as again:
        assert again.sql("SELECT count(*) FROM sys.dm_broker_activated_tasks").fetchone() \
            == (0,)


def test_close_ends_a_readers_waiting_receive_and_records_nothing_of_it(tmp_path):
    inst = pybroker.connect(tmp_path / "i.duckdb")
    try:
        a, _ = two_databases(inst, "activation_handlers:wait_long")
        inst.start_activation(check_interval=0.05, close_timeout=30)
        send(a, b"one")
        wait_for(lambda: inst.sql("SELECT tasks_waiting FROM sys.dm_broker_queue_monitors"
                                  ).fetchall() == [(1,)], what="the reader to wait")
        runner = inst.kernel.activation
        assert runner is not None
    finally:
        inst.close()
    # the reader saw its RECEIVE end (InstanceClosedError) and returned, well inside the
    # 30 s it was given: nothing was abandoned
    assert runner._tasks == {}
    with pybroker.connect(tmp_path / "i.duckdb", read_only=True) as again:
        assert again.sql("SELECT count(*) FROM sys.broker_events WHERE event_class = "
                         "'Broker:Activation'").fetchone() == (0,)


def test_stop_activation_says_how_many_readers_were_abandoned(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        a, _ = two_databases(inst, "activation_handlers:never_return")
        inst.start_activation(check_interval=0.05, close_timeout=0.2)
        send(a, b"hold")
        wait_for(lambda: handlers.calls == ["never"], what="the reader to start")
        assert inst.stop_activation() == 1
        handlers.release.set()


def test_readers_are_added_while_the_queue_stays_behind_up_to_max_queue_readers(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        a, b = two_databases(inst, "activation_handlers:slow", max_queue_readers=3)
        # a witness of the periodic checks: a queue whose readers take nothing gets one
        # more reader at every check (up to 32 here)
        b.create_queue("Witness", activation_procedure="activation_handlers:hold",
                       max_queue_readers=32)
        b.create_service("WitnessService", "Witness", ["DEFAULT"])
        inst.start_activation(check_interval=0.05)
        send(a, *[b"m%d" % i for i in range(200)])
        a.begin_dialog("Sender", "WitnessService").send(b"w")
        # the slow readers never empty the queue: one more per check, up to three
        tasks = "SELECT count(*) FROM sys.dm_broker_activated_tasks WHERE queue_name = ?"
        wait_for(lambda: inst.sql(tasks, ["TargetQueue"]).fetchone() == (3,),
                 what="three readers")
        # a task is listed as it is started, a moment before its callable runs
        wait_for(lambda: handlers.calls.count("slow") == 3, what="three callables")
        # three checks more: still behind, but at max_queue_readers
        (witnesses,) = inst.sql(tasks, ["Witness"]).fetchone()
        assert witnesses + 3 <= 32
        wait_for(lambda: inst.sql(tasks, ["Witness"]).fetchone()[0] >= witnesses + 3,
                 what="three more checks")
        assert inst.sql(tasks, ["TargetQueue"]).fetchone() == (3,)
        assert handlers.calls.count("slow") == 3
        handlers.release.set()


def test_c7_two_readers_of_a_queue_hold_their_groups_in_transactions_at_once(tmp_path):
    """MAX_QUEUE_READERS 2: each reader receives one message and, its transaction still
    open, waits for the other to hold a group too; run one at a time, they never would."""
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        a, _ = two_databases(inst, "activation_handlers:side_by_side", max_queue_readers=2)
        for body in (b"first", b"second"):  # two conversations: two groups
            send(a, body)
        groups = {str(g) for (g,) in inst.sql(
            "SELECT conversation_group_id FROM sys.queue_messages WHERE queue_name = ?",
            [handlers.QUEUE]).fetchall()}
        assert len(groups) == 2
        inst.start_activation(check_interval=0.05)
        wait_for(lambda: len(handlers.held_together) == 2, what="both readers together")
        assert set(handlers.held_together) == groups
        assert handlers.alone == []
        wait_for(lambda: inst.sql("SELECT count(*) FROM sys.queue_messages WHERE "
                                  "queue_name = ?", [handlers.QUEUE]).fetchone() == (0,),
                 what="both commits")
        assert inst.sql("SELECT count(*) FROM sys.dm_broker_conversation_group_locks"
                        ).fetchone() == (0,)


def test_activation_twice_or_on_a_read_only_instance_is_refused(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        inst.start_activation()
        with pytest.raises(pybroker.BrokerError, match="already running"):
            inst.start_activation()
        with pytest.raises(pybroker.InvalidArgumentError, match="check_interval"):
            inst.stop_activation() or inst.start_activation(check_interval=0)
    with pybroker.connect(tmp_path / "i.duckdb", read_only=True) as inst, \
            pytest.raises(pybroker.StorageError, match="read-only"):
        inst.start_activation()
