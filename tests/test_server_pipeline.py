"""A client's SENDs inside a transaction are pipelined (pybroker.api.served.client): they
return the same sequence numbers as embedded, run in order, and a failed one dooms the
transaction (the same error class and message, at the next call or at COMMIT, nothing of
it committed), as does a client that leaves in the middle. The server runs in this process
(``serve_clients`` on a file in tmp_path); the embedded twin is an in-memory instance
built the same way."""

from __future__ import annotations

import os
import socket
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.api.served import protocol
from pybroker.api.served.paths import socket_path_for, unix_address
from pybroker.errors import BrokerError, NotFoundError
from pybroker.server.server import serve_clients

CONVERSATIONS = 3
SENDS = 100


def build(inst: pybroker.Instance) -> list[pybroker.Conversation]:
    db = inst.create_database("A", broker_instance="11111111-2222-3333-4444-555555555555")
    db.create_queue("SenderQueue")
    db.create_queue("ReceiverQueue")
    db.create_service("Sender", "SenderQueue")
    db.create_service("Receiver", "ReceiverQueue", ["DEFAULT"])
    return [db.begin_dialog("Sender", "Receiver") for _ in range(CONVERSATIONS)]


class Served:
    """The owner (embedded, serving), a client of it, and the client's conversations."""

    def __init__(self, path) -> None:
        self.path = path
        self.owner = pybroker.connect(path, worker=False)
        handles = [c.handle for c in build(self.owner)]
        self.server = serve_clients(self.owner)
        self.client = pybroker.connect(path)
        assert self.client.is_client
        db = self.client.database("A")
        self.convs = [db.conversation(h) for h in handles]

    def close(self) -> None:
        self.client.close()
        self.server.close()
        self.owner.close()


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path / "broker.duckdb")
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def twin():
    inst = pybroker.connect(worker=False)
    convs = build(inst)
    try:
        yield inst, convs
    finally:
        inst.close()


def drain(db: pybroker.Database) -> list[pybroker.Message]:
    got: list[pybroker.Message] = []
    for _ in range(SENDS * 4):  # bounded: one conversation group per receive
        batch = db.receive("ReceiverQueue", max_messages=SENDS)
        if not batch:
            break
        got += batch
    return got


def send_round_robin(convs, count: int, start: int = 0) -> list[int]:
    return [convs[i % len(convs)].send(f"m{i}") for i in range(start, start + count)]


def pipelining(client: pybroker.Instance) -> bool:
    """Whether this thread's connection holds pipelined calls not written yet."""
    return bool(client._local.link.ahead)  # type: ignore[attr-defined]


def test_pipelined_sends_return_the_embedded_numbers_and_arrive_in_order(served, twin):
    twin_inst, twin_convs = twin
    db = served.client.database("A")
    numbers = []
    for round_ in range(3):
        with db.transaction():
            numbers.append(send_round_robin(served.convs, SENDS, round_ * SENDS))
            if round_:  # the conversations are known: their SENDs wait for nothing
                assert pipelining(served.client)
    with twin_inst.database("A").transaction():
        expected = [send_round_robin(twin_convs, SENDS, r * SENDS) for r in range(3)]
    assert numbers == expected
    got = drain(served.owner.database("A"))
    assert len(got) == 3 * SENDS
    by_conversation: dict[str, list[pybroker.Message]] = {}
    for m in got:
        by_conversation.setdefault(m.conversation_handle, []).append(m)
    assert len(by_conversation) == CONVERSATIONS
    for messages in by_conversation.values():
        assert [m.message_sequence_number for m in messages] == list(range(len(messages)))
        bodies = [int(m.text[1:]) for m in messages]
        assert bodies == sorted(bodies)
    assert sorted(int(m.text[1:]) for m in got) == list(range(3 * SENDS))


def outcome(run):
    try:
        run()
    except BrokerError as exc:
        return type(exc), str(exc), {k: v for k, v in vars(exc).items()}
    return None


relaxed = settings(max_examples=12, deadline=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture])


@relaxed
@given(st.integers(0, SENDS - 1), st.sampled_from(["NoSuchType", "", "x" * 200]))
def test_a_failed_send_raises_the_embedded_error_and_commits_nothing(tmp_path_factory,
                                                                     failing, message_type):
    served = Served(tmp_path_factory.mktemp("served") / "broker.duckdb")
    twin_inst = pybroker.connect(worker=False)
    try:
        twin_convs = build(twin_inst)
        db = served.client.database("A")
        with db.transaction():  # the conversations become known to the client
            first = send_round_robin(served.convs, CONVERSATIONS)

        def run(convs, database, after):
            with database.transaction():
                for i in range(SENDS):
                    conv = convs[i % len(convs)]
                    if i == failing:
                        conv.send(b"bad", message_type=message_type)
                    else:
                        conv.send(b"good")
                after(database)

        twin_error = outcome(lambda: run(twin_convs, twin_inst.database("A"), lambda d: 0))
        # what the embedded twin raised at the SEND, the client raises (a pipelined one at
        # the next call that waits, here the routes() after the SENDs) with the same class
        # and message
        seen = []
        client_error = outcome(lambda: run(served.convs, db, lambda d: seen.append(
            outcome(d.routes))))
        assert twin_error is not None and client_error == twin_error
        # the first SEND on each other conversation in the transaction is not pipelined
        # (its number holds only once its group is taken): a failure among the first
        # round is raised by the first of those at or after it; the rest are pipelined
        assert seen == ([] if failing < CONVERSATIONS else [twin_error])
        # nothing of it was committed: only the first transaction's messages, and the
        # next SEND of each conversation gets the number after them
        assert len(drain(served.owner.database("A"))) == CONVERSATIONS
        with db.transaction():
            again = send_round_robin(served.convs, CONVERSATIONS)
        assert again == [n + 1 for n in first]
        # the session goes on
        assert [q.name for q in db.queues()] == ["ReceiverQueue", "SenderQueue"]
    finally:
        twin_inst.close()
        served.close()


def test_a_pipelined_failure_dooms_every_later_call_and_commit(served):
    db = served.client.database("A")
    with db.transaction():
        send_round_robin(served.convs, CONVERSATIONS)
    with (pytest.raises(NotFoundError, match="message type 'Nope' does not exist") as at_call,
          db.transaction()):
        send_round_robin(served.convs, 50)
        served.convs[0].send(b"x", message_type="Nope")
        send_round_robin(served.convs, 49)  # not run by the server
        assert pipelining(served.client)
        db.queues()
    with pytest.raises(NotFoundError) as at_commit, db.transaction():
        send_round_robin(served.convs, 50)
        served.convs[0].send(b"x", message_type="Nope")
    assert str(at_commit.value) == str(at_call.value)
    assert len(drain(served.owner.database("A"))) == CONVERSATIONS


def test_a_client_that_leaves_mid_pipeline_is_rolled_back(served):
    db = served.client.database("A")
    with db.transaction():
        first = send_round_robin(served.convs, CONVERSATIONS)
    with pytest.raises(BrokerError, match="closed"), db.transaction():
        send_round_robin(served.convs, SENDS)
        db.queues()  # the pipelined SENDs are written before it and run
        served.client.close()
    # the owner waits for the session's lock, which the rollback releases
    owner_db = served.owner.database("A")
    assert len(drain(owner_db)) == CONVERSATIONS
    assert [owner_db.conversation(c.handle).send(b"after") for c in served.convs] == [
        n + 1 for n in first]


def test_nested_transactions_end_every_level_of_a_doomed_one(served):
    db = served.client.database("A")
    with db.transaction():
        send_round_robin(served.convs, CONVERSATIONS)
    with pytest.raises(NotFoundError), db.transaction():
        served.convs[1].send(b"kept?")
        with db.transaction():
            served.convs[0].send(b"x", message_type="Nope")
    assert len(drain(served.owner.database("A"))) == CONVERSATIONS
    with db.transaction():
        assert served.convs[0].send(b"fine") == 1


# -- the server's side, in raw frames ---------------------------------------------------


class Raw:
    """A client connection in frames, for what the client proxies never send."""

    def __init__(self, path) -> None:
        address, fd = unix_address(socket_path_for(path))
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10.0)
        try:
            self.sock.connect(address)
        finally:
            if fd is not None:
                os.close(fd)
        self.reader = protocol.FrameReader()
        self.sock.sendall(protocol.hello(None, False, "raw"))
        assert isinstance(self.next(), protocol.Welcome)

    def next(self) -> protocol.Event | None:
        """The next event, or None when the server closed the connection."""
        deadline = time.monotonic() + 10
        while (event := self.reader.next_event()) is None:
            assert time.monotonic() < deadline
            data = self.sock.recv(65536)
            if not data:
                return None
            self.reader.feed(data)
        return event

    def close(self) -> None:
        self.sock.close()


def test_a_wrong_prediction_dooms_the_transaction(served):
    handle = served.convs[0].handle
    raw = Raw(served.path)
    try:
        raw.sock.sendall(
            protocol.call(1, ("database", "A"), "transaction", "begin")
            + protocol.call(2, ("database", "A"), "transaction", "sequences", ([handle],)))
        assert isinstance(raw.next(), protocol.Result)
        answer = raw.next()
        assert isinstance(answer, protocol.Result) and answer.value == [0]
        target = ("conversation", "A", handle)
        raw.sock.sendall(
            protocol.pipelined(3, target, "call", "send", (b"a",), {}, 0)
            + protocol.pipelined(4, target, "call", "send", (b"b",), {}, 7)  # it is 1
            + protocol.call(5, ("database", "A"), "transaction", "commit"))
        failure = raw.next()
        assert isinstance(failure, protocol.Failure) and failure.call_id == 5
        assert failure.error_class == "ServerError"
        assert "predicted 7" in failure.message and "rolled back" in failure.message
    finally:
        raw.close()
    assert drain(served.owner.database("A")) == []


@pytest.mark.parametrize("frames", [
    # outside a transaction
    [protocol.pipelined(1, ("database", "A"), "call", "routes", (), {}, [])],
    # inside one, but not a SEND
    [protocol.call(1, ("database", "A"), "transaction", "begin"),
     protocol.pipelined(2, ("database", "A"), "call", "routes", (), {}, [])],
])
def test_the_server_ends_a_connection_that_pipelines_what_it_may_not(served, frames):
    raw = Raw(served.path)
    try:
        raw.sock.sendall(b"".join(frames))
        events = [raw.next() for _ in frames]
        assert events[-1] is None
        assert all(isinstance(e, protocol.Result) for e in events[:-1])
    finally:
        raw.close()
    assert [q.name for q in served.client.database("A").queues()] == [
        "ReceiverQueue", "SenderQueue"]  # the others are served on
