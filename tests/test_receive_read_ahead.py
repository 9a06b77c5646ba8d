"""RECEIVE inside a transaction reads ahead (pybroker/kernel/messaging/receive.py, ReceiveBuffer):
the second and later receives from a queue in one transaction hand out conversation groups
from memory, and the messages handed out leave the table in one statement at commit.

These tests hold it to what the table would answer (C3: one conversation group per RECEIVE,
the group of the first ready message; P3.1: in order, exactly once; C3: a received message
leaves the queue exactly when the receiving transaction commits), against a model of the
queue, with read-ahead sizes small enough that every way of reading again is taken."""

from __future__ import annotations

import random

import pytest

from pybroker.errors import QueueDisabledError
from pybroker.kernel.messaging import receive
from pybroker.kernel.messaging.unit_of_work import UnitOfWork
from tests.conftest_conversations import make_broker


@pytest.fixture
def broker(tmp_path):
    b = make_broker(tmp_path / "broker.duckdb")
    yield b
    b.inst.close()


@pytest.fixture
def reads(monkeypatch):
    """Counts the read-aheads, so a test knows it exercised them."""
    made = []
    real = receive.ReceiveBuffer.__init__

    def counting(self, rows, reads_before, kept=None):
        made.append(len(rows))
        real(self, rows, reads_before, kept)

    monkeypatch.setattr(receive.ReceiveBuffer, "__init__", counting)
    return made


class QueueModel:
    """QB as the table holds it: (conversation, number) in queuing order. Each conversation
    is its own group on the target side."""

    def __init__(self) -> None:
        self.ready: list[tuple[int, int]] = []
        self.sent: dict[int, int] = {}
        self.received: dict[int, list[int]] = {}

    def send(self, conv: int) -> str:
        k = self.sent.get(conv, 0)
        self.sent[conv] = k + 1
        self.ready.append((conv, k))
        return f"{conv}:{k}"

    def receive(self, max_messages: int) -> list[str]:
        if not self.ready:
            return []
        group = self.ready[0][0]
        taken = [m for m in self.ready if m[0] == group][:max_messages]
        for m in taken:
            self.ready.remove(m)
            self.received.setdefault(m[0], []).append(m[1])
        return [f"{c}:{k}" for c, k in taken]

    def snapshot(self):
        return (list(self.ready), dict(self.sent),
                {c: list(ks) for c, ks in self.received.items()})

    def restore(self, snap) -> None:
        self.ready, self.sent, self.received = snap


class Rollback(Exception):
    pass


@pytest.mark.parametrize(("first", "most", "seed"), [(1, 4, 1), (2, 8, 2), (3, 3, 3),
                                                      (256, 16_384, 4)])
def test_c3_p3_1_read_ahead_answers_as_the_table_would(broker, reads, monkeypatch, first,
                                                       most, seed):
    """Many conversations, sends into the queue being received inside the receiving
    transactions, replies to the other queue, rolled-back transactions: every RECEIVE
    returns exactly the model's group and messages; in the end every committed send was
    received exactly once, in order, and the queue is empty."""
    monkeypatch.setattr(receive, "READ_AHEAD_FIRST", first)
    monkeypatch.setattr(receive, "READ_AHEAD_MAX", most)
    rng = random.Random(seed)
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(12)]
    model = QueueModel()
    with broker.a.transaction():
        for _ in range(60):
            c = rng.randrange(len(convs))
            convs[c].send(model.send(c))
    for tx in range(40):
        snap = model.snapshot()
        rollback = rng.random() < 0.25
        try:
            with broker.b.transaction():
                for _ in range(rng.randrange(1, 12)):
                    if rng.random() < 0.3:
                        c = rng.randrange(len(convs))
                        for _ in range(rng.randrange(1, 4)):
                            convs[c].send(model.send(c))
                        continue
                    max_messages = rng.choice((1, 1, 2, 3, 5, 50))
                    got = broker.b.receive("QB", max_messages=max_messages)
                    want = model.receive(max_messages)
                    assert [m.text for m in got] == want, (tx, max_messages)
                    if got and rng.random() < 0.3:  # a reply into another queue, taken
                        broker.b.conversation(got[0].conversation_handle).send(b"reply")
                        answers = broker.a.receive("QA", max_messages=100)
                        assert answers and {m.text for m in answers} == {"reply"}
                if rollback:
                    raise Rollback
        except Rollback:
            model.restore(snap)
    assert reads, "no RECEIVE read ahead: the test did not exercise it"
    while got := broker.b.receive("QB", max_messages=7):
        assert [m.text for m in got] == model.receive(7)
    assert model.ready == []
    assert {c: ks for c, ks in model.received.items()} == {
        c: list(range(n)) for c, n in model.sent.items()}
    assert broker.rows("SELECT COUNT(*) FROM sys.queue_messages WHERE queue_name = 'QB'") == [
        (0,)]


def test_c3_a_rolled_back_transaction_of_many_receives_puts_every_message_back(broker,
                                                                               reads):
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(30)]
    with broker.a.transaction():
        for i in range(5):
            for n, conv in enumerate(convs):
                conv.send(f"{n}:{i}")
    with pytest.raises(Rollback), broker.b.transaction():
        first = [broker.b.receive("QB", max_messages=3) for _ in range(40)]
        raise Rollback
    assert reads
    again = [broker.b.receive("QB", max_messages=3) for _ in range(40)]
    assert [[m.text for m in g] for g in again] == [[m.text for m in g] for g in first]
    assert [m.text for m in first[0]] == ["0:0", "0:1", "0:2"]
    # the group whose first ready message is first: conversation 1 before the rest of 0
    assert [m.text for m in first[1]] == ["1:0", "1:1", "1:2"]
    assert [m.text for m in first[30]] == ["0:3", "0:4"]
    everything = [m.text for g in again for m in g]
    while rest := broker.b.receive("QB", max_messages=1000):
        everything += [m.text for m in rest]
    assert sorted(everything) == sorted(f"{n}:{i}" for n in range(30) for i in range(5))
    assert len(everything) == len(set(everything))


def test_c3_received_messages_leave_the_table_only_at_commit(broker, reads):
    conv = broker.a.begin_dialog("SA", "SB")
    for i in range(4):
        conv.send(f"{i}")
    count = "SELECT COUNT(*) FROM sys.queue_messages WHERE queue_name = 'QB'"
    with broker.b.transaction():
        assert [m.text for m in broker.b.receive("QB")] == ["0"]
        assert [m.text for m in broker.b.receive("QB", max_messages=2)] == ["1", "2"]
        assert broker.rows(count) == [(4,)]  # another cursor sees what is committed
    assert reads
    assert broker.rows(count) == [(1,)]
    assert [m.text for m in broker.b.receive("QB", max_messages=9)] == ["3"]


def test_c3_a_message_delivered_after_the_read_joins_it_and_the_receive_runs_no_query(
        broker, reads, monkeypatch):
    """A ready message delivered into a queue whose read-ahead holds every ready message
    joins it (ReceiveBuffer.delivered) when its transaction commits: the RECEIVE waiting
    for it runs no query. One sent and received inside one transaction is read from the
    table (no other transaction may see it in the read-ahead before it commits, C7) and
    leaves the table at commit (written, then deleted, in that order)."""
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send("0")
    with broker.b.transaction():
        assert [m.text for m in broker.b.receive("QB")] == ["0"]
        assert broker.b.receive("QB") == []  # the second reads ahead: the queue is empty
    made = len(reads)
    assert made == 1
    queries = []
    real_sql = UnitOfWork.sql
    monkeypatch.setattr(UnitOfWork, "sql", lambda self, template, params, **variables: (
        queries.append(template), real_sql(self, template, params, **variables))[1])
    conv.send("1")
    got = broker.b.receive("QB")
    assert [m.text for m in got] == ["1"] and isinstance(got[0].message_body, bytes)
    assert not [q for q in queries if "select_ready" in q or "receive_messages" in q]
    with broker.b.transaction():
        conv.send("2")
        conv.send("3")
        assert [m.text for m in broker.b.receive("QB", max_messages=5)] == ["2", "3"]
    assert len(reads) == made
    assert broker.rows("SELECT COUNT(*) FROM sys.queue_messages WHERE queue_name = 'QB'") == [
        (0,)]
    assert broker.b.receive("QB") == []


def test_c3_end_conversation_inside_the_transaction_drops_its_read_ahead_messages(broker,
                                                                                  reads):
    one, two, three = (broker.a.begin_dialog("SA", "SB") for _ in range(3))
    for name, conv in (("one", one), ("two", two), ("three", three)):
        for i in range(3):
            conv.send(f"{name} {i}")
    with broker.b.transaction():
        (first,) = broker.b.receive("QB")
        assert first.text == "one 0"
        (second,) = broker.b.receive("QB")  # read ahead: one 1, one 2, two ..., three ...
        assert second.text == "one 1"
        broker.b.conversation(first.conversation_handle).end()  # one 2 leaves with it
        assert [m.text for m in broker.b.receive("QB", max_messages=5)] == [
            "two 0", "two 1", "two 2"]
    assert [m.text for m in broker.b.receive("QB", max_messages=5)] == [
        "three 0", "three 1", "three 2"]
    assert broker.b.receive("QB") == []
    assert reads


def test_c3_messages_delivered_inside_the_transaction_come_after_what_was_read(broker,
                                                                              reads):
    one, two = broker.a.begin_dialog("SA", "SB"), broker.a.begin_dialog("SA", "SB")
    one.send("one 0")
    two.send("two 0")
    with broker.b.transaction():
        assert [m.text for m in broker.b.receive("QB")] == ["one 0"]
        assert [m.text for m in broker.b.receive("QB")] == ["two 0"]  # read ahead
        one.send("one 1")  # a group taken out entirely gets a new message
        two.send("two 1")
        three = broker.a.begin_dialog("SA", "SB")
        three.send("three 0")  # a new group
        assert [m.text for m in broker.b.receive("QB", max_messages=9)] == ["one 1"]
        assert [m.text for m in broker.b.receive("QB", max_messages=9)] == ["two 1"]
        assert [m.text for m in broker.b.receive("QB", max_messages=9)] == ["three 0"]
        assert broker.b.receive("QB", max_messages=9) == []
        three.send("three 1")
        assert [m.text for m in broker.b.receive("QB", max_messages=9)] == ["three 1"]
    assert broker.b.receive("QB") == []
    assert reads


def test_c3_read_ahead_on_a_retention_queue_retains_what_it_hands_out(broker, reads):
    broker.b.alter_queue("QB", retention=True)
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(3)]
    for n, conv in enumerate(convs):
        conv.send(f"{n}")
    with broker.b.transaction():
        got = [broker.b.receive("QB", max_messages=10) for _ in range(4)]
    assert [[m.text for m in g] for g in got] == [["0"], ["1"], ["2"], []]
    assert reads
    assert broker.rows("SELECT status_desc, COUNT(*) FROM sys.queue_messages "
                       "WHERE queue_name = 'QB' GROUP BY ALL") == [("RETAINED", 3)]
    assert broker.b.receive("QB") == []


def test_c3_five_rolled_back_read_ahead_receives_turn_the_queue_off(broker, reads):
    for n in range(3):
        broker.a.begin_dialog("SA", "SB").send(f"poison {n}")
    for attempt in range(5):
        assert broker.b.queues()[0].status, attempt
        with pytest.raises(Rollback), broker.b.transaction():
            assert broker.b.receive("QB")
            assert broker.b.receive("QB")  # read ahead
            raise Rollback
    assert reads
    assert not broker.b.queues()[0].status
    with pytest.raises(QueueDisabledError):
        broker.b.receive("QB")
    broker.b.alter_queue("QB", status=True)
    got = broker.b.receive("QB"), broker.b.receive("QB"), broker.b.receive("QB")
    assert [g[0].text for g in got] == ["poison 0", "poison 1", "poison 2"]


def test_c3_a_queue_turned_off_inside_the_transaction_refuses_the_next_receive(broker):
    for n in range(2):
        broker.a.begin_dialog("SA", "SB").send(f"{n}")
    with pytest.raises(QueueDisabledError), broker.b.transaction():
        assert broker.b.receive("QB")
        assert broker.b.receive("QB")
        broker.b.alter_queue("QB", status=False)
        broker.b.receive("QB")
    broker.b.alter_queue("QB", status=True)
    assert [broker.b.receive("QB")[0].text for _ in range(2)] == ["0", "1"]


def test_c3_read_ahead_kept_across_transactions_sees_later_deliveries_and_rollbacks(broker,
                                                                                   reads):
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(4)]
    for n, conv in enumerate(convs):
        conv.send(f"{n}:0")
    with broker.b.transaction():
        assert [m.text for m in broker.b.receive("QB")] == ["0:0"]
        assert [m.text for m in broker.b.receive("QB")] == ["1:0"]  # reads ahead 2:0, 3:0
    assert len(reads) == 1
    convs[0].send("0:1")  # own transaction: after 2:0 and 3:0
    with pytest.raises(Rollback), broker.a.transaction():
        convs[1].send("1:1")  # rolled back: must never be received
        raise Rollback
    convs[3].send("3:1")
    got = [[m.text for m in broker.b.receive("QB", max_messages=5)] for _ in range(4)]
    assert got == [["2:0"], ["3:0", "3:1"], ["0:1"], []]
    convs[1].send("1:1 again")
    assert [m.text for m in broker.b.receive("QB")] == ["1:1 again"]
    assert broker.b.receive("QB") == []


def test_read_ahead_of_large_bodies_reads_fewer_messages(broker, reads, monkeypatch):
    monkeypatch.setattr(receive, "READ_AHEAD_FIRST", 4)
    monkeypatch.setattr(receive, "READ_AHEAD_BYTES", 3_000)
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(12)]
    with broker.a.transaction():
        for n, conv in enumerate(convs):
            conv.send(f"{n:02d}".encode() * 500)  # 1,000 bytes
    with broker.b.transaction():
        got = [broker.b.receive("QB") for _ in range(12)]
    assert [g[0].message_body[:2] for g in got] == [f"{n:02d}".encode() for n in range(12)]
    assert reads[:2] == [4, 3]  # then about 3,000 bytes a read, not 8 messages


# -- RECEIVE in its own transaction: a loop of them reads ahead too ------------


def test_c3_a_loop_of_receives_each_in_its_own_transaction_reads_ahead(broker, reads):
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(5)]
    with broker.a.transaction():
        for i in range(3):
            for n, conv in enumerate(convs):
                conv.send(f"{n}:{i}")
    count = "SELECT COUNT(*) FROM sys.queue_messages WHERE queue_name = 'QB'"
    first = broker.b.receive("QB", max_messages=10)  # one statement: no read-ahead yet
    assert [m.text for m in first] == ["0:0", "0:1", "0:2"]
    assert reads == []
    left = 12
    for n in range(1, 5):  # the loop: read ahead, and each call commits its group
        got = broker.b.receive("QB", max_messages=10, timeout=5)
        assert [m.text for m in got] == [f"{n}:0", f"{n}:1", f"{n}:2"]
        left -= 3
        assert broker.rows(count) == [(left,)]  # C3: gone when the call returned
    assert reads
    assert broker.b.receive("QB", max_messages=10) == []


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_c3_p3_1_receives_in_their_own_transactions_answer_as_the_table_would(
        broker, reads, monkeypatch, seed):
    """RECEIVE calls each in its own transaction, mixed with sends in their own or in
    rolled-back transactions, batched receives in transactions (some rolled back) and END
    CONVERSATION: every RECEIVE returns the model's group; nothing is lost or doubled."""
    monkeypatch.setattr(receive, "READ_AHEAD_FIRST", 2)
    monkeypatch.setattr(receive, "READ_AHEAD_MAX", 8)
    rng = random.Random(seed)
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(10)]
    model = QueueModel()
    with broker.a.transaction():
        for _ in range(40):
            c = rng.randrange(len(convs))
            convs[c].send(model.send(c))
    for step in range(150):
        action = rng.random()
        if action < 0.45:
            max_messages = rng.choice((1, 2, 3, 50))
            got = broker.b.receive("QB", max_messages=max_messages,
                                   timeout=rng.choice((0, 0.5)) if model.ready else 0)
            assert [m.text for m in got] == model.receive(max_messages), step
        elif action < 0.75:
            c = rng.randrange(len(convs))
            convs[c].send(model.send(c))
        elif action < 0.85:
            snap = model.snapshot()
            with pytest.raises(Rollback), broker.b.transaction():
                c = rng.randrange(len(convs))
                convs[c].send(model.send(c))
                got = broker.b.receive("QB", max_messages=2)
                assert [m.text for m in got] == model.receive(2), step
                raise Rollback
            model.restore(snap)
        elif action < 0.95:
            with broker.b.transaction():
                for _ in range(3):
                    got = broker.b.receive("QB", max_messages=2)
                    assert [m.text for m in got] == model.receive(2), step
        else:  # the target ends a conversation: its messages leave the queue
            c = rng.randrange(len(convs))
            ready = [m for m in model.ready if m[0] == c]
            if not ready:
                continue
            handle = broker.rows(
                "SELECT conversation_handle FROM sys.queue_messages WHERE queue_name = 'QB' "
                "AND CAST(message_body AS VARCHAR) = ?", [f"{c}:{ready[0][1]}"])[0][0]
            broker.b.conversation(handle).end()
            model.ready = [m for m in model.ready if m[0] != c]
            convs[c] = broker.a.begin_dialog("SA", "SB")
            model.sent[c + 1000 * (step + 1)] = 0  # a fresh conversation in slot c
            model.sent[c] = 0
    assert reads, "no RECEIVE read ahead: the test did not exercise it"
    while got := broker.b.receive("QB", max_messages=4):
        assert [m.text for m in got] == model.receive(4)
    assert model.ready == []
    assert broker.rows("SELECT COUNT(*) FROM sys.queue_messages WHERE queue_name = 'QB'") == [
        (0,)]
