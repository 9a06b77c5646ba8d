"""Group commit (SPEC C7; kernel/messaging/group_commit.py): the commit that takes WRITER
carries the commits waiting for it, writes all their rows with its own and commits once.
Each transaction's outcome is its own: a carried one whose verbs fail rolls back alone;
one that writes into the file while it is applied ends its group, and those after it
commit in the next; transactions on the two sides of one conversation are never carried
together.

Each test holds WRITER itself (a transaction number of the lock table that holds it)
until every committing thread waits for it, so which commit carries which is known."""

from __future__ import annotations

import threading

import pytest

from pybroker.core.conversation.group_locks import WRITER
from pybroker.errors import WriteConflictError
from tests.conftest_conversations import make_broker
from tests.test_group_lock_threads import BOUND, in_thread, wait_until


@pytest.fixture
def broker(tmp_path):
    b = make_broker(tmp_path / "broker.duckdb")
    yield b
    b.inst.close()


class Commits:
    """The store's outermost COMMITs and ROLLBACKs from now on."""

    def __init__(self, broker) -> None:
        self.ended: list[bool] = []
        broker.inst.kernel.store.on_transaction_end(self.ended.append)

    @property
    def commits(self) -> int:
        return self.ended.count(True)


class HeldWriter:
    """WRITER held by a transaction of the test's own until ``release``."""

    def __init__(self, broker) -> None:
        self.locks = broker.inst.kernel.messaging.group_locks
        self.number = self.locks.begin()
        assert self.locks.acquire(self.number, WRITER)

    def waiting(self) -> int:
        """How many commits wait for WRITER."""
        return sum(1 for row, _ in self.locks.waiting() if row.key == WRITER and row.committing)

    def release(self) -> None:
        self.locks.release_all(self.number)


def committing(broker, held: HeldWriter, transactions, before: int = 0) -> list[dict]:
    """Each of ``transactions`` (a function of no arguments that runs one transaction) in a
    thread of its own, started one after another once the one before waits for WRITER
    (after ``before`` that wait already); then WRITER is let go. Their outcomes, in that
    order."""
    threads = []
    for i, transaction in enumerate(transactions):
        threads.append(in_thread(transaction))
        wait_until(lambda n=before + i + 1: held.waiting() == n, f"{i + 1} commits to wait")
    held.release()
    for thread, _ in threads:
        thread.join(BOUND)
    assert not any(thread.is_alive() for thread, _ in threads)
    return [outcome for _, outcome in threads]


def sender(broker, conv, texts: list[str]):
    def run() -> list[int]:
        with broker.a.transaction():
            return [conv.send(text) for text in texts]
    return run


def texts_in(broker, queue: str) -> dict[str, list[str]]:
    """The bodies in ``queue`` by conversation_id, in order."""
    rows = broker.rows(
        "SELECT conversation_id, message_body FROM sys.queue_messages q JOIN "
        "sys.conversation_endpoints e USING (conversation_handle) WHERE q.queue_name = ? "
        "ORDER BY queuing_order", [queue])
    found: dict[str, list[str]] = {}
    for conversation, body in rows:
        found.setdefault(str(conversation), []).append(bytes(body).decode())
    return found


def conversation_id(broker, conv) -> str:
    return str(broker.rows("SELECT conversation_id FROM sys.conversation_endpoints WHERE "
                           "conversation_handle = ?", [conv.handle])[0][0])


def send_sequence(broker, conv) -> int:
    return broker.rows("SELECT send_sequence FROM sys.conversation_endpoints WHERE "
                       "conversation_handle = ?", [conv.handle])[0][0]


def test_c7_commits_waiting_together_are_written_by_one_commit(broker):
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(4)]
    ids = [conversation_id(broker, c) for c in convs]
    held, commits = HeldWriter(broker), Commits(broker)
    outcomes = committing(broker, held, [
        sender(broker, conv, [f"{i}:{k}" for k in range(3)]) for i, conv in enumerate(convs)])
    assert [o.get("result") for o in outcomes] == [[0, 1, 2]] * 4
    assert commits.ended == [True]  # the first to wait carried the three others
    assert texts_in(broker, "QB") == {ids[i]: [f"{i}:{k}" for k in range(3)]
                                      for i in range(4)}
    assert [send_sequence(broker, c) for c in convs] == [3] * 4
    # their endpoints are as the file says: the next SENDs go on from there
    assert [c.send("next") for c in convs] == [3] * 4


def test_c7_receiving_and_sending_commits_are_carried_together(broker):
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(3)]
    for i, conv in enumerate(convs[:2]):
        conv.send(f"request {i}")
    got: list[list[str]] = [[], []]
    taken = threading.Barrier(2, timeout=BOUND)

    def receiver(i: int):
        def run() -> None:
            with broker.b.transaction():
                got[i] = [m.text for m in broker.b.receive("QB", max_messages=10)]
                taken.wait()  # each holds one group: the other's is the other's
        return run

    held, commits = HeldWriter(broker), Commits(broker)
    threads = [in_thread(receiver(i)) for i in range(2)]
    wait_until(lambda: held.waiting() == 2, "2 commits to wait")
    outcomes = committing(broker, held, [sender(broker, convs[2], ["new"])], before=2)
    for thread, outcome in threads:
        thread.join(BOUND)
        assert "error" not in outcome
    assert "error" not in outcomes[0]
    assert sorted(got) == [["request 0"], ["request 1"]]
    assert commits.ended == [True]
    assert texts_in(broker, "QB") == {conversation_id(broker, convs[2]): ["new"]}


def test_c7_receives_each_in_its_own_transaction_take_beside_others_and_are_carried(broker):
    """A loop of RECEIVE calls outside a transaction (a worker's, a served client's) takes
    in memory while another transaction holds WRITER: each waits for WRITER only at its
    commit, and one commit writes them with a sender's."""
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(4)]
    for i, conv in enumerate(convs[:3]):
        conv.send(f"request {i}")
    # the loop's first RECEIVE: the table's, in one statement
    assert [m.text for m in broker.b.receive("QB", max_messages=10)] == ["request 0"]

    def receiver() -> list[str]:
        return [m.text for m in broker.b.receive("QB", max_messages=10)]

    held, commits = HeldWriter(broker), Commits(broker)
    outcomes = committing(broker, held, [receiver, receiver, sender(broker, convs[3], ["new"])])
    assert sorted(o.get("result") for o in outcomes[:2]) == [["request 1"], ["request 2"]]
    assert outcomes[2].get("result") == [0]
    assert commits.ended == [True]  # the first to wait carried the two others
    assert texts_in(broker, "QB") == {conversation_id(broker, convs[3]): ["new"]}
    assert broker.rows("SELECT count(*) FROM sys.queue_messages WHERE queue_name = 'QB'"
                       ) == [(1,)]


def failing_apply(broker, fails: str, *, touch=None):
    """The engine's apply of kept SENDs, made to fail (after applying them, so that what it
    changed in memory must be undone) for the transaction whose SENDs include ``fails``;
    with ``touch``, that one changes that endpoint too first."""
    messaging = broker.inst.kernel.messaging
    original = messaging.apply_sends

    def apply(uow) -> None:
        doomed = any(body == fails.encode() for _, body, *_ in uow.sends)
        original(uow)
        if doomed:
            if touch is not None:
                ep = messaging.endpoint(touch.handle)
                ep.receive_sequence += 100
                uow.touch(ep)
            raise WriteConflictError("the transaction was rolled back: a test said so")

    messaging.apply_sends = apply


def test_c7_a_carried_commit_whose_sends_fail_rolls_back_alone(broker):
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(3)]
    ids = [conversation_id(broker, c) for c in convs]
    failing_apply(broker, "1:fail")
    held, commits = HeldWriter(broker), Commits(broker)
    outcomes = committing(broker, held, [
        sender(broker, convs[0], ["0:a", "0:b"]),
        sender(broker, convs[1], ["1:a", "1:fail"]),
        sender(broker, convs[2], ["2:a"])])
    assert outcomes[0].get("result") == [0, 1]
    assert isinstance(outcomes[1].get("error"), WriteConflictError)
    assert outcomes[2].get("result") == [0]
    assert commits.ended == [True]
    assert texts_in(broker, "QB") == {ids[0]: ["0:a", "0:b"], ids[2]: ["2:a"]}
    # nothing of the failed one stayed, in the file or in memory
    assert send_sequence(broker, convs[1]) == 0
    assert convs[1].send("1:again") == 0
    assert texts_in(broker, "QB")[ids[1]] == ["1:again"]


def test_c7_a_failing_commit_that_touched_another_of_its_group_rolls_back_the_group(broker):
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(2)]
    failing_apply(broker, "1:fail", touch=convs[0])
    held, commits = HeldWriter(broker), Commits(broker)
    outcomes = committing(broker, held, [sender(broker, convs[0], ["0:a"]),
                                         sender(broker, convs[1], ["1:fail"])])
    assert all(isinstance(o.get("error"), WriteConflictError) for o in outcomes), outcomes
    assert "committed together with another transaction" in str(outcomes[0]["error"])
    assert commits.commits == 0
    assert texts_in(broker, "QB") == {}
    assert [send_sequence(broker, c) for c in convs] == [0, 0]
    assert [c.send("again") for c in convs] == [0, 0]


def test_c7_a_carried_commit_that_writes_while_applied_ends_its_group(broker):
    convs = [broker.a.begin_dialog("SA", "SB") for _ in range(3)]
    ids = [conversation_id(broker, c) for c in convs]
    messaging = broker.inst.kernel.messaging
    original = messaging.apply_sends

    def apply(uow) -> None:
        writes = any(body == b"1:writes" for _, body, *_ in uow.sends)
        original(uow)
        if writes:  # as a route request or a far endpoint read from the file does
            uow.sql("conversation/select_max_queuing_order.sql", {})

    messaging.apply_sends = apply
    held, commits = HeldWriter(broker), Commits(broker)
    outcomes = committing(broker, held, [sender(broker, convs[0], ["0:a"]),
                                         sender(broker, convs[1], ["1:writes"]),
                                         sender(broker, convs[2], ["2:a"])])
    assert [o.get("result") for o in outcomes] == [[0], [0], [0]]
    # the first two in one commit; the third given back, committed after them
    assert commits.ended == [True, True]
    assert texts_in(broker, "QB") == {ids[0]: ["0:a"], ids[1]: ["1:writes"],
                                      ids[2]: ["2:a"]}


def test_c7_the_two_sides_of_one_conversation_are_not_carried_together(broker):
    conv = broker.a.begin_dialog("SA", "SB")
    conv.send("hello")
    [m] = broker.b.receive("QB")
    reply = broker.b.conversation(m.conversation_handle)
    other = broker.a.begin_dialog("SA", "SB")
    held, commits = HeldWriter(broker), Commits(broker)

    def replier() -> list[int]:
        with broker.b.transaction():
            return [reply.send("reply")]

    outcomes = committing(broker, held, [sender(broker, conv, ["more"]), replier,
                                         sender(broker, other, ["other"])])
    assert [o.get("result") for o in outcomes] == [[1], [0], [0]]
    # the first carried the third; the reply, on the far side of its conversation, waited
    assert commits.ended == [True, True]
    assert [m.text for m in broker.a.receive("QA")] == ["reply"]
    assert sorted(texts_in(broker, "QB").values()) == [["more"], ["other"]]
