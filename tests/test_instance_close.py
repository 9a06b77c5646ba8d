"""Instance.close() while other threads use the instance: a RECEIVE that waits ends, a
transaction in flight is waited for (a bounded time) or rolled back, and every call during
or after close raises InstanceClosedError, never a DuckDB error; nothing is half-written."""

from __future__ import annotations

import threading
import time

import pytest

import pybroker
from pybroker import InstanceClosedError
from tests.wire_helpers import wait_for

BOUND = 30.0  # seconds any join or wait of these tests may take, on a loaded machine


def make(path) -> tuple[pybroker.Instance, pybroker.Database, pybroker.Database]:
    inst = pybroker.connect(path)
    a = inst.create_database("A")
    b = inst.create_database("B")
    a.create_queue("QA")
    a.create_service("SA", queue="QA")
    b.create_queue("QB")
    b.create_service("SB", queue="QB", contracts=["DEFAULT"])
    return inst, a, b


class Outcome:
    """What a thread's call returned or raised."""

    def __init__(self) -> None:
        self.value: object = None
        self.error: BaseException | None = None


def in_thread(call, outcome: Outcome) -> threading.Thread:
    def run() -> None:
        try:
            outcome.value = call()
        except BaseException as exc:
            outcome.error = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def wait_until(predicate, what: str) -> None:
    wait_for(predicate, BOUND, what, poll=0.01)


def threads_asking_for_the_store(monkeypatch) -> list[threading.Thread]:
    """From now on, every thread that asks for a store's lock, or for the store's write
    transaction (the WRITER of the group locks), noted as it asks."""
    from pybroker.kernel.messaging.group_locking import GroupLocking
    from pybroker.storage.store import StoreLock

    asking: list[threading.Thread] = []
    acquire = StoreLock.acquire
    acquire_writer = GroupLocking.acquire

    def noted(lock: StoreLock, blocking: bool = True, timeout: float = -1) -> bool:
        asking.append(threading.current_thread())
        return acquire(lock, blocking, timeout)

    def noted_writer(locks: GroupLocking, *args, **kwargs) -> None:
        asking.append(threading.current_thread())
        return acquire_writer(locks, *args, **kwargs)

    monkeypatch.setattr(StoreLock, "acquire", noted)
    monkeypatch.setattr(GroupLocking, "acquire", noted_writer)
    return asking


def queue_rows(path) -> list[tuple]:
    with pybroker.connect(path) as inst:
        return inst.sql("SELECT database_name, queue_name, status, message_body "
                        "FROM sys.queue_messages ORDER BY queuing_order").fetchall()


def test_a_waiting_receive_ends_with_instance_closed(tmp_path):
    inst, _, b = make(tmp_path / "i.duckdb")
    outcome = Outcome()
    receiver = in_thread(lambda: b.receive("QB", timeout=600), outcome)
    wait_until(lambda: inst.kernel.messaging.arrival._waiters, "the RECEIVE to wait")
    started = time.monotonic()
    inst.close(timeout=1.0)
    receiver.join(BOUND)
    assert not receiver.is_alive()
    assert time.monotonic() - started < BOUND  # not the RECEIVE's 600 s
    assert type(outcome.error) is InstanceClosedError
    assert str(outcome.error) == (
        "the instance was closed while RECEIVE waited for messages on queue 'QB': nothing "
        "was received (what the queue holds stays in the file); open the file again with "
        "pybroker.connect() to go on")


@pytest.mark.parametrize("verb", ["receive_where", "get_conversation_group"])
def test_a_waiting_filtered_receive_ends_with_instance_closed(tmp_path, verb):
    # RECEIVE ... WHERE and GET CONVERSATION GROUP wait like RECEIVE does, and end alike
    inst, _, b = make(tmp_path / "i.duckdb")
    outcome = Outcome()
    group = "6f1c2a7e-0d4b-4c55-9a8e-5b1e2d3c4f50"
    call = ((lambda: b.receive("QB", timeout=600, conversation_group_id=group))
            if verb == "receive_where" else (lambda: b.get_conversation_group("QB",
                                                                              timeout=600)))
    receiver = in_thread(call, outcome)
    wait_until(lambda: inst.kernel.messaging.arrival._waiters, "the RECEIVE to wait")
    inst.close(timeout=1.0)
    receiver.join(BOUND)
    assert not receiver.is_alive()
    assert type(outcome.error) is InstanceClosedError
    assert str(outcome.error).startswith(
        "the instance was closed while RECEIVE waited for messages on queue 'QB': nothing "
        "was received")


@pytest.mark.parametrize("shape", ["send", "receive", "two_sends"])
def test_close_waits_for_transactions_in_flight_and_they_commit(tmp_path, shape):
    # a transaction holding only its groups (a SEND kept for its commit, a RECEIVE) holds
    # no store: close() still waits for it, and for two of them, which commit one by one
    path = tmp_path / "i.duckdb"
    inst, a, b = make(path)
    convs = [a.begin_dialog("SA", "SB") for _ in range(2)]
    if shape == "receive":
        convs[0].send(b"queued")
    go_on = threading.Event()
    ready = [threading.Event() for _ in range(2)]
    got: list = []

    def transaction(n: int) -> None:
        with (b if shape == "receive" else a).transaction():
            if shape == "receive":
                got.extend(b.receive("QB"))
            else:
                convs[n].send(b"in flight %d" % n)
            ready[n].set()
            go_on.wait(BOUND)

    count = 2 if shape == "two_sends" else 1
    outcomes = [Outcome() for _ in range(count)]
    workers = [in_thread(lambda n=n: transaction(n), outcomes[n]) for n in range(count)]
    assert all(ready[n].wait(BOUND) for n in range(count))
    closed = Outcome()
    closer = in_thread(lambda: inst.close(timeout=BOUND), closed)
    wait_until(lambda: inst.kernel.closed, "close() to begin")
    closer.join(0.5)  # a close that did not wait would be over by now
    assert closer.is_alive()  # it waits for the transactions
    go_on.set()
    for worker in [*workers, closer]:
        worker.join(BOUND)
        assert not worker.is_alive()
    assert [o.error for o in outcomes] + [closed.error] == [None] * (count + 1)
    if shape == "receive":
        assert [m.message_body for m in got] == [b"queued"]
        assert queue_rows(path) == []
    else:
        assert sorted(queue_rows(path)) == [
            ("B", "QB", 1, b"in flight %d" % n) for n in range(count)]


def test_close_rolls_back_a_transaction_past_its_bound_and_nothing_is_lost(tmp_path):
    path = tmp_path / "i.duckdb"
    inst, a, b = make(path)
    a.begin_dialog("SA", "SB").send(b"kept")
    received, go_on = threading.Event(), threading.Event()
    got: list = []

    def transaction() -> None:
        with b.transaction():
            got.extend(b.receive("QB"))
            received.set()
            go_on.wait(3 * BOUND)  # open far past close's bound, unless told

    outcome = Outcome()
    worker = in_thread(transaction, outcome)
    assert received.wait(BOUND)
    assert [m.message_body for m in got] == [b"kept"]
    started = time.monotonic()
    inst.close(timeout=0.5)
    assert time.monotonic() - started < BOUND
    go_on.set()
    worker.join(BOUND)
    assert not worker.is_alive()
    assert type(outcome.error) is InstanceClosedError
    assert "the instance was closed" in str(outcome.error)
    # the RECEIVE never committed: the message is in its queue, which is still ON
    assert queue_rows(path) == [("B", "QB", 1, b"kept")]
    with pybroker.connect(path) as again:
        assert [m.message_body for m in again.database("B").receive("QB")] == [b"kept"]


@pytest.mark.parametrize("call", ["send", "begin_dialog", "transaction", "receive", "end"])
def test_calls_waiting_behind_a_transaction_when_close_gives_up_raise_instance_closed(
        tmp_path, call, monkeypatch):
    path = tmp_path / "i.duckdb"
    inst, a, b = make(path)
    conv = a.begin_dialog("SA", "SB")
    conv.send(b"first")
    holding, go_on = threading.Event(), threading.Event()

    def hold() -> None:
        with b.transaction():
            b.receive("QB")
            # a catalog write: the transaction holds the store until it ends (the WRITER)
            b.create_queue("QW")
            holding.set()
            go_on.wait(3 * BOUND)

    def blocked() -> object:
        if call == "send":
            return conv.send(b"second")
        if call == "begin_dialog":
            return a.begin_dialog("SA", "SB").send(b"second")
        if call == "transaction":
            with a.transaction():
                return conv.send(b"second")
        if call == "end":
            return conv.end()
        return b.receive("QB", timeout=0)

    holder, caller = Outcome(), Outcome()
    holder_thread = in_thread(hold, holder)
    assert holding.wait(BOUND)
    waiters = threads_asking_for_the_store(monkeypatch)
    caller_thread = in_thread(blocked, caller)
    # the caller asks for the store the holder holds: it waits behind the holder
    wait_until(lambda: caller_thread in waiters, "the call to wait behind the holder")
    inst.close(timeout=0.5)
    caller_thread.join(BOUND)
    go_on.set()
    holder_thread.join(BOUND)
    assert not caller_thread.is_alive() and not holder_thread.is_alive()
    for outcome in (caller, holder):
        assert type(outcome.error) is InstanceClosedError, outcome.error
        assert str(outcome.error).startswith("the instance was closed")
    # nothing half-written: the first message waits, nothing of the second call is there
    assert queue_rows(path) == [("B", "QB", 1, b"first")]


def test_every_call_after_close_raises_instance_closed(tmp_path):
    inst, a, b = make(tmp_path / "i.duckdb")
    conv = a.begin_dialog("SA", "SB")
    inst.close()
    inst.close()  # again: nothing to do
    calls = {
        "send": lambda: conv.send(b"x"),
        "begin_dialog": lambda: a.begin_dialog("SA", "SB"),
        "receive": lambda: b.receive("QB"),
        "receive with timeout": lambda: b.receive("QB", timeout=5),
        "end": lambda: conv.end(),
        "create_queue": lambda: a.create_queue("Q2"),
        "sql": lambda: inst.sql("SELECT 1"),
        "databases": lambda: inst.databases(),
    }
    for call in calls.values():
        with pytest.raises(InstanceClosedError, match=r"^the instance was closed"):
            call()


def test_close_timeout_is_checked(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        for bad in (-1, "5", None, float("nan")):
            with pytest.raises(pybroker.InvalidArgumentError, match="timeout"):
                inst.close(timeout=bad)


def test_store_close_interrupts_a_statement_past_the_deadline(tmp_path, monkeypatch):
    """The file closes at close's deadline even while another thread's statement runs:
    DuckDB interrupts it, its transaction is discarded, and the file opens again."""
    from pybroker.storage import no_pandas
    from pybroker.storage.store import Store

    path = tmp_path / "s.duckdb"
    pybroker.connect(path).close()
    store = Store(path)
    outcome = Outcome()
    long = "SELECT count(*) FROM range(1000000000000) AS t(x) WHERE x % 7 = 3"
    running = threading.Event()
    call = no_pandas.call

    def noted(fn, /, *args, **kwargs):  # the store hands its statements to DuckDB here
        if args and args[0] == long:
            running.set()
        return call(fn, *args, **kwargs)

    monkeypatch.setattr(no_pandas, "call", noted)

    def long_statement() -> object:
        with store.transaction():
            store.execute("CREATE TABLE scratch (x INTEGER)")
            return store.fetchall(long)

    thread = in_thread(long_statement, outcome)
    # the long statement is handed to DuckDB (counted running: close interrupts it, never
    # refuses it)
    assert running.wait(BOUND)
    store.closing(time.monotonic() + 0.2)
    store.close()
    thread.join(BOUND)
    assert not thread.is_alive()
    assert type(outcome.error) is InstanceClosedError
    with pybroker.connect(path) as inst:  # nothing of the cut-off transaction is there
        assert inst.sql("SELECT count(*) FROM duckdb_tables() "
                        "WHERE table_name = 'scratch'").fetchone() == (0,)


def test_close_with_the_broker_endpoint_running_ends_a_waiting_receive(tmp_path):
    from tests.wire_helpers import CONTRACT, ORDER, drain, instance_pair

    a, b, shop, stock = instance_pair(tmp_path)
    try:
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<one/>", message_type=ORDER)
        assert [m.message_body for m in drain(stock, "StockQueue", 1)] == [b"<one/>"]
        outcome = Outcome()
        receiver = in_thread(lambda: stock.receive("StockQueue", timeout=600), outcome)
        wait_until(lambda: b.kernel.messaging.arrival._waiters, "the RECEIVE to wait")
        b.close(timeout=1.0)
        receiver.join(BOUND)
        assert not receiver.is_alive()
        assert type(outcome.error) is InstanceClosedError
        assert b.endpoint is None
        conv.send(b"<two/>", message_type=ORDER)  # A goes on; the message waits for B
    finally:
        a.close()
        b.close()
    with pybroker.connect(tmp_path / "b.duckdb") as again:
        assert again.sql("SELECT count(*) FROM sys.queue_messages").fetchone() == (0,)
