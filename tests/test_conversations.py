"""Conversations inside one instance: SPEC C1-C5, P3, P8, R2.7, R4, R5.

Real DuckDB files, a fake clock for every time-out (no test sleeps for a back-off)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

import pybroker
from pybroker.core.conversation.model import (
    STATUS_NO_ROUTE,
    STATUS_NO_TRANSPORT,
    STATUS_QUEUE_DISABLED,
)
from pybroker.errors import (
    BrokerError,
    ContractViolationError,
    ConversationError,
    ConversationStateError,
    InvalidArgumentError,
    MessageValidationError,
    NotFoundError,
    QueueDisabledError,
)
from tests.conftest_conversations import START, make_broker

END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"
ERROR = "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
DIALOG_TIMER = "http://schemas.microsoft.com/SQL/ServiceBroker/DialogTimer"


@pytest.fixture
def broker(tmp_path):
    b = make_broker(tmp_path / "broker.duckdb")
    yield b
    b.inst.close()


def endpoint(broker, handle):
    (row,) = broker.rows(
        "SELECT database_name, state, state_desc, send_sequence, receive_sequence, "
        "first_unacked_send_sequence, error_code, far_broker_instance "
        "FROM sys.conversation_endpoints WHERE conversation_handle = ?", [handle])
    return dict(zip(("database", "state", "state_desc", "send_sequence", "receive_sequence",
                     "first_unacked", "error_code", "far_broker_instance"), row, strict=True))


def transmission_queue(broker):
    return broker.rows(
        "SELECT database_name, message_sequence_number, message_type_name, is_end_of_dialog, "
        "transmission_status FROM sys.transmission_queue ORDER BY message_sequence_number")


# -- R4, P3.1, R5: a two-service conversation ------------------------------------------------


def test_r4_p3_1_two_services_in_two_databases_converse_in_order(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    assert conv.state == "SO"  # C1: begun, nothing sent
    assert [conv.send(f"m{i}") for i in range(3)] == [0, 1, 2]
    got = broker.b.receive("QB", max_messages=10)
    assert [(m.message_sequence_number, m.message_body, m.message_type_name)
            for m in got] == [(0, b"m0", "DEFAULT"), (1, b"m1", "DEFAULT"), (2, b"m2", "DEFAULT")]
    assert {(m.service_name, m.service_contract_name) for m in got} == {("SB", "DEFAULT")}
    reply_to = broker.b.conversation(got[0].conversation_handle)
    assert reply_to.conversation_id == conv.conversation_id != reply_to.handle
    assert reply_to.send(b"ack") == 0
    (answer,) = broker.a.receive("QA")
    assert (answer.conversation_handle, answer.message_body) == (conv.handle, b"ack")
    initiator, target = endpoint(broker, conv.handle), endpoint(broker, reply_to.handle)
    assert (initiator["database"], initiator["state"], initiator["send_sequence"],
            initiator["receive_sequence"], initiator["first_unacked"]) == ("A", "CO", 3, 1, 3)
    assert (target["database"], target["state"], target["send_sequence"],
            target["receive_sequence"]) == ("B", "CO", 1, 3)
    # R5: pinned to the broker identifier of the database that took the first message
    assert initiator["far_broker_instance"] == broker.b.broker_instance
    assert target["far_broker_instance"] == broker.a.broker_instance
    assert transmission_queue(broker) == []  # local delivery: acknowledged at enqueue


def test_p3_1_order_holds_across_transactions_and_single_receives(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    for batch in range(4):
        with broker.a.transaction():
            for i in range(5):
                conv.send(f"{batch}.{i}")
    bodies = []
    while got := broker.b.receive("QB"):
        assert len(got) == 1
        bodies.append(got[0].text)
    assert bodies == [f"{b}.{i}" for b in range(4) for i in range(5)]


def test_p3_2_a_duplicate_sequence_number_is_discarded(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"first")
    conv.send(b"second")
    m = broker.inst.kernel.messaging
    with m.unit_of_work() as uow:  # the same sequence numbers arrive again (a retransmission)
        uow.activate()
        ep = m.endpoint(conv.handle)
        m.delivery.deliver(uow, ep, m.delivery.target(uow, ep), [
            (0, "DEFAULT", "N", b"first again", False, False),
            (1, "DEFAULT", "N", b"second again", False, False)])
    got = broker.b.receive("QB", max_messages=10)
    assert [m.message_body for m in got] == [b"first", b"second"]


def test_a_str_body_is_sent_as_utf8_and_none_as_empty(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send("grüße")
    conv.send(None)
    got = broker.b.receive("QB", max_messages=5)
    assert [m.message_body for m in got] == ["grüße".encode(), b""]
    assert got[0].text == "grüße"


# -- C1, C2: ending -----------------------------------------------------------------------


def test_c1_end_conversation_sends_end_dialog_and_both_sides_close(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"x")
    conv.end()
    # the EndDialog was delivered and acknowledged at once: DO -> CD
    assert endpoint(broker, conv.handle)["state_desc"] == "CLOSED"
    got = broker.b.receive("QB", max_messages=5)
    assert [m.message_type_name for m in got] == ["DEFAULT", END_DIALOG]
    assert got[1].message_body == b""
    target = broker.b.conversation(got[0].conversation_handle)
    assert target.state == "DI"  # far side ended: may still receive, not send
    with pytest.raises(ConversationStateError, match="far side has ended"):
        target.send(b"too late")
    target.end()
    assert endpoint(broker, target.handle)["state"] == "CD"
    with pytest.raises(ConversationStateError, match="already closed"):
        target.end()


def test_c1_ending_before_sending_tells_nobody(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.end()
    assert endpoint(broker, conv.handle)["state"] == "CD"
    assert broker.b.receive("QB") == []
    assert broker.rows("SELECT COUNT(*) FROM sys.conversation_endpoints")[0][0] == 1


def test_c1_end_removes_this_sides_queued_messages(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"1")
    (msg,) = broker.b.receive("QB")
    target = broker.b.conversation(msg.conversation_handle)
    target.send(b"reply 1")
    target.send(b"reply 2")
    conv.end()  # the replies waiting in QA go with it
    assert broker.a.receive("QA") == []
    assert [m.message_type_name for m in broker.b.receive("QB")] == [END_DIALOG]


def test_c1_disconnected_outbound_while_the_end_dialog_waits(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"x")
    broker.b.alter_queue("QB", status=False)
    conv.end()
    assert endpoint(broker, conv.handle)["state"] == "DO"  # waiting for the acknowledgement
    assert transmission_queue(broker) == [("A", 1, END_DIALOG, True, STATUS_QUEUE_DISABLED)]
    broker.b.alter_queue("QB", status=True)
    assert endpoint(broker, conv.handle)["state"] == "CD"
    assert transmission_queue(broker) == []


def test_c2_end_with_error_sends_sql_servers_error_body(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"x")
    (msg,) = broker.b.receive("QB")
    target = broker.b.conversation(msg.conversation_handle)
    target.end(error=50001, description="no stock for <part> & co")
    (err,) = broker.a.receive("QA")
    assert err.message_type_name == ERROR
    assert err.message_body == (
        b'<Error xmlns="http://schemas.microsoft.com/SQL/ServiceBroker/Error"><Code>50001</Code>'
        b"<Description>no stock for &lt;part&gt; &amp; co</Description></Error>")
    initiator = endpoint(broker, conv.handle)
    assert (initiator["state"], initiator["error_code"]) == ("ER", 50001)
    with pytest.raises(ConversationError, match="ended with an error"):  # C2
        conv.send(b"more")
    conv.end()
    assert endpoint(broker, conv.handle)["state"] == "CD"
    assert endpoint(broker, target.handle)["state"] == "CD"


def test_c2_c4_end_with_error_drops_what_waits_in_the_transmission_queue(broker):
    broker.b.alter_queue("QB", status=False)
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"never delivered")
    assert len(transmission_queue(broker)) == 1
    conv.end(error=7, description="give up")
    # the user message is dropped; only the Error waits (the target never heard of it)
    assert [(r[2], r[4]) for r in transmission_queue(broker)] == [
        (ERROR, STATUS_QUEUE_DISABLED)]


def test_c2_with_cleanup_removes_this_side_without_telling_the_far_side(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"x")
    (msg,) = broker.b.receive("QB")
    target = broker.b.conversation(msg.conversation_handle)
    target.send(b"reply")
    conv.end(cleanup=True)
    assert broker.rows("SELECT COUNT(*) FROM sys.conversation_endpoints "
                       "WHERE conversation_handle = ?", [conv.handle]) == [(0,)]
    assert broker.rows("SELECT COUNT(*) FROM sys.queue_messages") == [(0,)]
    assert target.state == "CO"  # not told
    with pytest.raises(ConversationError, match="does not exist"):
        broker.a.conversation(conv.handle)
    # the far side's next message finds no endpoint: it gets the broker's error (C2 -8462)
    target.send(b"anyone?")
    (err,) = broker.b.receive("QB")
    assert err.message_type_name == ERROR and b"<Code>-8462</Code>" in err.message_body
    assert target.state == "ER"


def test_c2_lifetime_expiry_ends_both_sides_with_error_8489(broker):
    conv = broker.a.begin_dialog("SA", "SB", lifetime=60)
    conv.send(b"x")
    broker.clock.advance(30)
    assert broker.inst.run_pending() == 0
    broker.clock.advance(31)
    assert broker.inst.run_pending() == 2  # both sides
    for db, queue in ((broker.a, "QA"), (broker.b, "QB")):
        got = db.receive(queue, max_messages=10)
        assert got[-1].message_type_name == ERROR
        assert b"<Code>-8489</Code>" in got[-1].message_body
        assert got[-1].message_sequence_number == -1
    states = broker.rows("SELECT state, error_code FROM sys.conversation_endpoints")
    assert states == [("ER", -8489), ("ER", -8489)]
    with pytest.raises(ConversationError):
        conv.send(b"late")


def test_dialog_timer_delivers_a_dialog_timer_message(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.begin_timer(30)
    broker.clock.advance(10)
    broker.inst.run_pending()
    assert broker.a.receive("QA") == []
    broker.clock.advance(21)
    broker.inst.run_pending()
    (tick,) = broker.a.receive("QA")
    assert (tick.message_type_name, tick.message_body, tick.conversation_handle) == (
        DIALOG_TIMER, b"", conv.handle)
    broker.clock.advance(100)
    broker.inst.run_pending()
    assert broker.a.receive("QA") == []  # a timer fires once
    conv.begin_timer(5)
    conv.begin_timer(0)  # cancels
    broker.clock.advance(10)
    broker.inst.run_pending()
    assert broker.a.receive("QA") == []


# -- contracts, validation, bad input ---------------------------------------------------


def test_c2_contract_violations_are_refused_at_send(broker):
    for db in (broker.a, broker.b):
        db.create_message_type("Order", "WELL_FORMED_XML")
        db.create_message_type("Receipt", "NONE")
        db.create_contract("OrderContract", {"Order": "INITIATOR", "Receipt": "TARGET"})
    broker.b.alter_service("SB", add_contracts=["OrderContract"])
    conv = broker.a.begin_dialog("SA", "SB", contract="OrderContract")
    with pytest.raises(ContractViolationError, match="may not send message type 'Receipt'"):
        conv.send(b"r", message_type="Receipt")
    with pytest.raises(ContractViolationError):
        conv.send(b"x")  # DEFAULT is not in the contract
    with pytest.raises(ContractViolationError, match="sent by the broker"):
        conv.send(b"", message_type=END_DIALOG)
    assert conv.state == "SO"  # nothing changed
    conv.send(b"<order id='1'/>", message_type="Order")
    (msg,) = broker.b.receive("QB")
    assert (msg.message_type_name, msg.service_contract_name) == ("Order", "OrderContract")
    target = broker.b.conversation(msg.conversation_handle)
    with pytest.raises(ContractViolationError, match="target"):
        target.send(b"<o/>", message_type="Order")
    target.send(b"thanks", message_type="Receipt")
    assert broker.a.receive("QA")[0].message_type_name == "Receipt"


def test_c2_a_service_that_does_not_accept_the_contract_answers_error_8408(broker):
    broker.b.create_service("InitiatorOnly", queue="QB")  # no contracts: initiates only
    conv = broker.a.begin_dialog("SA", "InitiatorOnly")
    conv.send(b"x")
    (err,) = broker.a.receive("QA")
    assert err.message_type_name == ERROR and b"<Code>-8408</Code>" in err.message_body
    assert conv.state == "ER"
    assert broker.b.receive("QB") == []
    # P3.3: a broker-generated error is unsequenced and sent once, never retried itself
    assert err.message_sequence_number == -1
    assert transmission_queue(broker) == []
    broker.inst.kernel.messaging.run_pending(retry_all=True)
    assert broker.a.receive("QA", max_messages=10) == []


def test_message_validation_empty_xml_and_maximum_size(broker):
    broker.a.create_message_type("Ping", "EMPTY")
    broker.a.create_message_type("Doc", "WELL_FORMED_XML")
    broker.a.create_contract("C", {"Ping": "ANY", "Doc": "ANY"})
    broker.a.create_service("Local", queue="QA", contracts=["C"])
    conv = broker.a.begin_dialog("SA", "Local", contract="C")
    with pytest.raises(MessageValidationError, match="VALIDATION = EMPTY"):
        conv.send(b"x", message_type="Ping")
    with pytest.raises(MessageValidationError, match="not well-formed XML"):
        conv.send(b"<a><b></a>", message_type="Doc")
    broker.inst.max_message_size = 10
    with pytest.raises(MessageValidationError, match="maximum message size is 10"):
        conv.send(b"<a>12345</a>", message_type="Doc")
    assert conv.state == "SO" and broker.rows("SELECT COUNT(*) FROM sys.queue_messages") == [(0,)]
    conv.send(b"", message_type="Ping")
    conv.send(b"<a>1</a>", message_type="Doc")
    assert [m.message_type_name for m in broker.a.receive("QA", max_messages=5)] == [
        "Ping", "Doc"]


def test_bad_input_names_the_problem_and_changes_nothing(broker):
    with pytest.raises(NotFoundError, match="service 'Nope'"):
        broker.a.begin_dialog("Nope", "SB")
    with pytest.raises(NotFoundError, match="contract 'Nope'"):
        broker.a.begin_dialog("SA", "SB", contract="Nope")
    with pytest.raises(InvalidArgumentError, match="lifetime"):
        broker.a.begin_dialog("SA", "SB", lifetime=0)
    with pytest.raises(InvalidArgumentError, match="not a UUID"):
        broker.a.begin_dialog("SA", "SB", related_conversation_group="x")
    with pytest.raises(InvalidArgumentError, match="not a conversation handle"):
        broker.a.conversation("not-a-handle")
    with pytest.raises(ConversationError, match="does not exist"):
        broker.a.conversation("00000000-0000-0000-0000-000000000001")
    with pytest.raises(NotFoundError, match="queue 'Nope'"):
        broker.a.receive("Nope")
    with pytest.raises(InvalidArgumentError, match="max_messages"):
        broker.a.receive("QA", max_messages=0)
    conv = broker.a.begin_dialog("SA", "SB")
    with pytest.raises(ConversationError, match="not an endpoint of this database"):
        broker.b.conversation(conv.handle)
    with pytest.raises(NotFoundError, match="message type 'Nope'"):
        conv.send(b"x", message_type="Nope")
    with pytest.raises(InvalidArgumentError, match="bytes or str"):
        conv.send(12)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="positive whole number"):
        conv.end(error=-5, description="broker codes are negative")
    with pytest.raises(InvalidArgumentError, match="description"):
        conv.end(error=5)
    assert conv.state == "SO"
    assert broker.rows("SELECT COUNT(*) FROM sys.conversation_endpoints") == [(1,)]
    conv.end()
    with pytest.raises(ConversationStateError, match="closed"):
        conv.send(b"after the end")
    assert all(issubclass(e, BrokerError) for e in (
        ContractViolationError, ConversationError, MessageValidationError, QueueDisabledError))


# -- transactions, RECEIVE, queues (C3) -----------------------------------------------------


def test_c3_sends_and_receives_commit_or_roll_back_together(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"1")
    with pytest.raises(RuntimeError), broker.b.transaction():
        (msg,) = broker.b.receive("QB")
        broker.b.conversation(msg.conversation_handle).send(b"reply")
        raise RuntimeError("the application failed")
    assert broker.a.receive("QA") == []  # the reply was rolled back
    (again,) = broker.b.receive("QB")  # the rolled-back receive put the message back
    assert again.message_body == b"1"
    with broker.b.transaction():
        broker.b.conversation(again.conversation_handle).send(b"reply")
    assert broker.a.receive("QA")[0].message_body == b"reply"


def test_a_rolled_back_begin_dialog_leaves_no_endpoint(broker):
    with pytest.raises(RuntimeError), broker.a.transaction():
        conv = broker.a.begin_dialog("SA", "SB")
        conv.send(b"x")
        raise RuntimeError
    assert broker.rows("SELECT COUNT(*) FROM sys.conversation_endpoints") == [(0,)]
    with pytest.raises(ConversationError):
        conv.send(b"y")


def test_c3_receive_returns_one_conversation_group_in_order(broker):
    one = broker.a.begin_dialog("SA", "SB")
    two = broker.a.begin_dialog("SA", "SB")
    for i in range(3):
        one.send(f"one {i}")
        two.send(f"two {i}")
    first = broker.b.receive("QB", max_messages=100)
    second = broker.b.receive("QB", max_messages=100)
    assert [m.text for m in first] == ["one 0", "one 1", "one 2"]
    assert [m.text for m in second] == ["two 0", "two 1", "two 2"]
    assert len({m.conversation_group_id for m in first + second}) == 2


def test_related_conversation_group_puts_conversations_in_one_group(broker):
    group = "6f1e0b7a-59c4-4a2c-9a51-4e4b3c2d1a00"
    convs = [broker.a.begin_dialog("SA", "SB", related_conversation_group=group.upper())
             for _ in range(2)]
    assert {c.conversation_group_id for c in convs} == {group}
    for c in convs:
        c.send(b"q")
    for msg in [broker.b.receive("QB")[0], broker.b.receive("QB")[0]]:
        broker.b.conversation(msg.conversation_handle).send(b"a")
    replies = broker.a.receive("QA", max_messages=10)  # one group: both replies at once
    assert {m.conversation_handle for m in replies} == {c.handle for c in convs}


def test_c3_five_rolled_back_receives_turn_the_queue_off(broker):
    broker.a.begin_dialog("SA", "SB").send(b"poison")
    for attempt in range(5):
        assert broker.b.queues()[0].status, attempt
        with pytest.raises(RuntimeError), broker.b.transaction():
            assert broker.b.receive("QB")
            raise RuntimeError("cannot process")
    assert not broker.b.queues()[0].status
    with pytest.raises(QueueDisabledError, match="disabled"):
        broker.b.receive("QB")
    broker.b.alter_queue("QB", status=True)
    assert broker.b.receive("QB")[0].message_body == b"poison"


def test_c3_poison_message_handling_off_keeps_the_queue_on(broker):
    broker.b.alter_queue("QB", poison_message_handling=False)
    broker.a.begin_dialog("SA", "SB").send(b"poison")
    for _ in range(7):
        with pytest.raises(RuntimeError), broker.b.transaction():
            broker.b.receive("QB")
            raise RuntimeError
    assert broker.b.queues()[0].status


def test_c3_a_committed_receive_resets_the_poison_count(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    for i in range(2):
        conv.send(f"{i}")
    for _ in range(4):
        with pytest.raises(RuntimeError), broker.b.transaction():
            broker.b.receive("QB")
            raise RuntimeError
    broker.b.receive("QB")  # commits
    for _ in range(4):
        with pytest.raises(RuntimeError), broker.b.transaction():
            broker.b.receive("QB")
            raise RuntimeError
    assert broker.b.queues()[0].status


def test_receive_waits_up_to_timeout_for_a_message_from_another_thread(broker):
    conv = broker.a.begin_dialog("SA", "SB")

    def later():
        time.sleep(0.2)
        conv.send(b"late")

    sender = threading.Thread(target=later)
    sender.start()
    got = broker.b.receive("QB", timeout=30)
    sender.join()
    assert [m.message_body for m in got] == [b"late"]
    assert broker.b.receive("QB", timeout=0.05) == []


def test_retention_keeps_received_and_sent_messages_until_the_end(broker):
    broker.b.alter_queue("QB", retention=True)
    broker.a.alter_queue("QA", retention=True)
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"kept")
    (msg,) = broker.b.receive("QB")
    assert broker.b.receive("QB") == []
    rows = broker.rows("SELECT database_name, status, status_desc FROM sys.queue_messages "
                       "ORDER BY queuing_order")
    assert rows == [("B", 0, "RETAINED"), ("A", 3, "RETAINED_SENT")]
    broker.b.conversation(msg.conversation_handle).end()
    assert broker.rows("SELECT database_name, status FROM sys.queue_messages "
                       "ORDER BY queuing_order") == [("A", 3), ("A", 1)]  # + the EndDialog


# -- P8, C4, C5, R2.7: the transmission queue and the delay/retry loop ------------------------


def test_p8_c3_messages_for_a_disabled_queue_wait_and_move_when_it_is_turned_on(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"0")
    broker.b.alter_queue("QB", status=False)
    for i in range(1, 4):
        conv.send(f"{i}")
    assert transmission_queue(broker) == [
        ("A", i, "DEFAULT", False, STATUS_QUEUE_DISABLED) for i in range(1, 4)]
    assert broker.rows("SELECT COUNT(*) FROM sys.queue_messages") == [(1,)]  # holds nothing new
    with pytest.raises(QueueDisabledError):
        broker.b.receive("QB")
    broker.clock.advance(4)
    broker.inst.run_pending()  # a retry while still OFF: still waiting
    assert len(transmission_queue(broker)) == 3
    broker.b.alter_queue("QB", status=True)
    assert transmission_queue(broker) == []
    assert [m.text for m in broker.b.receive("QB", max_messages=10)] == ["0", "1", "2", "3"]


def test_r2_7_c4_a_missing_service_delays_and_its_creation_delivers_in_order(tmp_path):
    broker = make_broker(tmp_path / "b.duckdb", target=False)
    try:
        conv = broker.a.begin_dialog("SA", "SB")
        with broker.a.transaction():
            for i in range(3):
                conv.send(f"{i}")
        conv.send(b"3")
        rows = transmission_queue(broker)
        assert [r[1] for r in rows] == [0, 1, 2, 3]
        assert {r[4] for r in rows} == {STATUS_NO_ROUTE}  # C4 text
        assert conv.state == "CO"
        broker.b.create_service("SB", queue="QB", contracts=["DEFAULT"])  # prompt retry
        assert transmission_queue(broker) == []
        got = broker.b.receive("QB", max_messages=10)
        assert [m.text for m in got] == ["0", "1", "2", "3"]  # in order, once each
        broker.inst.run_pending(START + 10_000)
        assert broker.b.receive("QB") == []  # no duplicate
        assert endpoint(broker, conv.handle)["first_unacked"] == 4
    finally:
        broker.inst.close()


def test_r2_7_adding_the_missing_route_delivers(broker):
    broker.a.drop_route("AutoCreatedLocal")
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"x")
    assert transmission_queue(broker)[0][4] == STATUS_NO_ROUTE
    broker.a.create_route("ToB", service_name="SB", address="LOCAL")
    assert transmission_queue(broker) == []
    assert broker.b.receive("QB")[0].message_body == b"x"


def test_c4_a_network_route_waits_with_a_connection_status(broker):
    broker.a.create_route("Remote", service_name="Far", address="tcp://far.example:4022")
    conv = broker.a.begin_dialog("SA", "Far")
    conv.send(b"x")
    ((db, seq, mtype, is_end, status),) = transmission_queue(broker)
    assert (db, seq, mtype, is_end, status) == ("A", 0, "DEFAULT", False, STATUS_NO_TRANSPORT)
    # C4, P2: what is true here (no endpoint started) and how to start one
    assert status == (
        "Connection attempt failed with error: 'no broker endpoint is started in this "
        "process; start one with Instance.start_endpoint() from Python, CREATE ENDPOINT ... "
        "FOR SERVICE_BROKER on master, or `pybroker serve FILE` from a shell, and the "
        "message leaves then'.")
    (row,) = broker.rows("SELECT to_service_name, from_service_name, service_contract_name, "
                         "to_broker_instance, fragment_number, fragment_count, message_size, "
                         "message_body FROM sys.transmission_queue")
    assert row == ("Far", "SA", "DEFAULT", None, 0, 1, 1, b"x")


def test_c5_retry_back_off_is_4_8_16_32_then_every_64_seconds(tmp_path):
    broker = make_broker(tmp_path / "b.duckdb", target=False)
    try:
        conv = broker.a.begin_dialog("SA", "SB")
        conv.send(b"x")

        def next_attempt():
            (row,) = broker.rows("SELECT transmission_next_attempt, transmission_retry_count "
                                 "FROM sys.conversation_endpoints")
            return (row[0] - broker.inst.kernel.now()).total_seconds(), row[1]

        seen = [next_attempt()]
        for _ in range(6):
            broker.clock.advance(seen[-1][0] - 0.5)
            broker.inst.run_pending()
            assert next_attempt()[1] == seen[-1][1]  # not yet due: nothing retried
            broker.clock.advance(0.5)
            broker.inst.run_pending()
            seen.append(next_attempt())
        assert seen == [(4, 0), (8, 1), (16, 2), (32, 3), (64, 4), (64, 5), (64, 6)]
        assert transmission_queue(broker)[0][4] == STATUS_NO_ROUTE
    finally:
        broker.inst.close()


def test_c5_one_setting_scales_every_back_off(tmp_path):
    broker = make_broker(tmp_path / "b.duckdb", retry_scale=0.001, target=False)
    try:
        broker.a.begin_dialog("SA", "SB").send(b"x")
        (row,) = broker.rows("SELECT transmission_next_attempt FROM sys.conversation_endpoints")
        assert row[0] - broker.inst.kernel.now() == timedelta(milliseconds=4)
    finally:
        broker.inst.close()


def test_c5_the_retry_delivers_once_the_cause_is_gone(broker):
    """A cause removed behind the catalog API's back (no prompt retry) is found by the
    back-off retry."""
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"0")
    broker.b.alter_queue("QB", status=False)
    conv.send(b"1")
    broker.inst.kernel.store.execute("UPDATE service_queues SET is_receive_enabled = TRUE, "
                               "is_enqueue_enabled = TRUE WHERE name = 'QB'")
    broker.inst.kernel.messaging.catalog_changed()
    broker.clock.advance(3)
    broker.inst.run_pending()
    assert len(transmission_queue(broker)) == 1  # back-off not over
    broker.clock.advance(1)
    broker.inst.run_pending()
    assert transmission_queue(broker) == []
    assert [m.text for m in broker.b.receive("QB", max_messages=5)] == ["0", "1"]


def test_the_worker_thread_fires_a_timer_within_a_bounded_wait(tmp_path):
    with pybroker.connect(tmp_path / "w.duckdb") as inst:  # real clock, worker running
        db = inst.create_database("W")
        db.create_queue("Q")
        db.create_service("S", queue="Q", contracts=["DEFAULT"])
        conv = db.begin_dialog("S", "S")
        conv.begin_timer(0.2)
        got = db.receive("Q", timeout=30)
        assert [m.message_type_name for m in got] == [DIALOG_TIMER]


def test_conversation_writes_keep_the_routing_cache_warm(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"warm up")  # decides (A, SB) once
    plans = broker.inst.kernel.routing.plans
    known = set(plans)
    assert known
    with broker.b.transaction():
        broker.b.receive("QB")
    conv.send(b"again")
    broker.b.receive("QB")
    conv.end()
    assert known <= set(plans)  # nothing voided the cache
    broker.b.create_queue("Other")  # not an input of routing either
    assert known <= set(plans)
    before = {key: plans[key] for key in known}
    broker.b.create_service("Other", queue="Other")  # an input only of keys naming Other
    assert all(plans[key] is before[key] for key in known)
    broker.a.create_service("SB", queue="QA")  # R3.2, R4.2: voided, and decided again
    assert all(plans.get(key) is not before[key] for key in known)
    decision = broker.inst.route("SB", origin="A")
    assert (decision.outcome, decision.database) == ("deliver", "A")  # R4.2: own db first


def test_drop_service_ends_its_conversations_and_tells_the_far_side_8490(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"x")
    broker.b.drop_service("SB")
    (err,) = broker.a.receive("QA")
    assert b"<Code>-8490</Code>" in err.message_body
    assert conv.state == "ER"
    assert broker.rows("SELECT database_name FROM sys.conversation_endpoints") == [("A",)]


def test_state_survives_reopening_the_file(tmp_path):
    path = tmp_path / "persist.duckdb"
    broker = make_broker(path)
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send(b"0")
    handle = conv.handle
    broker.inst.close()
    with pybroker.connect(path, worker=False) as inst:
        a, b = inst.database("A"), inst.database("B")
        a.conversation(handle).send(b"1")
        assert [m.message_sequence_number for m in b.receive("QB", max_messages=5)] == [0, 1]
