"""The endpoint cache is bounded (P7): only the most recently used conversation
endpoints stay in memory; an endpoint touched by an open unit of work is never let go, and
one that went is read back from the file exactly as it was."""

from __future__ import annotations

import contextlib
import random

import pytest

import pybroker
from pybroker.errors import ConversationError, ConversationStateError
from pybroker.kernel.messaging.endpoint_cache import EndpointCache
from tests.conftest_conversations import make_broker


@pytest.fixture
def small(tmp_path):
    b = make_broker(tmp_path / "broker.duckdb", endpoint_cache=3)
    yield b
    b.inst.close()


def cached(broker) -> int:
    return len(broker.inst.kernel.messaging.endpoints)


def test_trim_lets_the_least_recently_used_go_and_keeps_what_it_is_told():
    cache = EndpointCache(2)
    for handle in "abcde":
        cache[handle] = handle  # type: ignore[assignment]
    cache.used(["a"])  # a is now the most recent
    assert cache.trim(keep={"b"}) == 3
    assert list(cache) == ["a", "b"]  # b, kept, counts as just used
    cache["f"] = "f"  # type: ignore[assignment]
    assert cache.trim(keep={"a", "b", "f"}) == 0  # nothing may go: it stays over its bound
    assert len(cache) == 3


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_the_bound_is_a_positive_whole_number(tmp_path, bad):
    with pytest.raises(pybroker.BrokerError, match="endpoint_cache"):
        pybroker.connect(None, endpoint_cache=bad, worker=False)


def test_p7_idle_conversations_leave_memory_and_come_back_as_they_were(small):
    convs = []
    for n in range(20):
        conv = small.a.begin_dialog("SA", "SB")
        conv.send(f"{n}:0")
        convs.append(conv)
        assert cached(small) <= 3
    for n, conv in enumerate(convs):  # read back from the file: the numbering goes on
        assert conv.send(f"{n}:1") == 1
    got = {}
    while msgs := small.b.receive("QB", max_messages=10):
        for m in msgs:
            got.setdefault(m.conversation_handle, []).append(
                (m.message_sequence_number, m.text))
    assert sorted(got.values()) == sorted(
        [(0, f"{n}:0"), (1, f"{n}:1")] for n in range(20))
    assert cached(small) <= 3


def test_p7_a_transaction_keeps_every_endpoint_it_touched_until_it_ends(small):
    """Two sends on each of 10 conversations in one transaction, with room for 3: had an
    endpoint gone mid-transaction, its second send would read the file's stale copy and
    number the message 0 again."""
    convs = [small.a.begin_dialog("SA", "SB") for _ in range(10)]
    with small.a.transaction():
        for conv in convs:
            conv.send("first")
        for conv in convs:
            small.a.conversation(conv.handle)  # lookups inside do not push anyone out
            conv.send("second")
        assert cached(small) >= 20  # both sides of every conversation
    assert cached(small) <= 3
    rows = small.rows("SELECT conversation_handle, list(message_sequence_number ORDER BY "
                      "message_sequence_number) FROM sys.queue_messages WHERE queue_name = "
                      "'QB' GROUP BY ALL")
    assert sorted(r[1] for r in rows) == [[0, 1]] * 10


def test_p7_a_rollback_after_many_endpoints_leaves_the_file_and_cache_agreeing(small):
    convs = [small.a.begin_dialog("SA", "SB") for _ in range(8)]
    for conv in convs:
        conv.send("kept")

    class Undo(Exception):
        pass

    with pytest.raises(Undo), small.a.transaction():
        for conv in convs:
            conv.send("undone")
        raise Undo
    for conv in convs:
        assert conv.send("after") == 1
    texts = sorted(m.text for _ in range(8) for m in small.b.receive("QB", max_messages=5))
    assert texts == ["after"] * 8 + ["kept"] * 8


def test_p7_retries_of_many_waiting_conversations_with_a_small_cache(small):
    """The delay/retry loop reads every waiting endpoint in one unit of work."""
    small.b.alter_queue("QB", status=False)
    convs = [small.a.begin_dialog("SA", "SB") for _ in range(12)]
    for round_ in range(2):
        for n, conv in enumerate(convs):
            conv.send(f"{n}:{round_}")
    small.b.alter_queue("QB", status=True)  # retries every waiting transmission at once
    assert small.rows("SELECT COUNT(*) FROM sys.transmission_queue") == [(0,)]
    got = {}
    while msgs := small.b.receive("QB", max_messages=10):
        for m in msgs:
            got.setdefault(m.conversation_handle, []).append(m.text)
    assert sorted(got.values()) == sorted([f"{n}:0", f"{n}:1"] for n in range(12))
    assert cached(small) <= 3


def act(broker, rng, convs, action, step) -> None:
    if action < 0.2 or not convs:
        convs.append(broker.a.begin_dialog("SA", "SB"))
    elif action < 0.6:
        rng.choice(convs).send(f"s{step}")
    elif action < 0.8:
        for m in broker.b.receive("QB", max_messages=3):
            if m.message_type_name.endswith("EndDialog"):
                broker.b.conversation(m.conversation_handle).end()
            else:
                broker.b.conversation(m.conversation_handle).send(
                    f"r{m.text}")
    elif action < 0.9:
        broker.a.receive("QA", max_messages=5)
    else:
        conv = convs.pop(rng.randrange(len(convs)))
        if conv.state not in ("CD", "DO"):
            conv.end()


def test_p7_the_same_random_workload_gives_the_same_file_with_any_cache_size(tmp_path):
    """A differential check: conversations begun, sent on, received, replied to and ended
    at random, some transactions rolled back, with room for 2 endpoints and for all."""

    def play(endpoint_cache: int) -> list[tuple]:
        broker = make_broker(tmp_path / f"cache{endpoint_cache}.duckdb",
                             endpoint_cache=endpoint_cache)
        rng = random.Random(7)
        convs = []
        try:
            for step in range(60):
                try:
                    with broker.a.transaction(), broker.b.transaction():
                        for _ in range(rng.randrange(1, 6)):
                            action = rng.random()
                            with contextlib.suppress(ConversationError, ConversationStateError):
                                act(broker, rng, convs, action, step)
                        if rng.random() < 0.2:
                            raise KeyError("roll back")
                except KeyError:
                    pass
            return broker.rows(
                "SELECT e.database_name, e.is_initiator, e.state, e.send_sequence, "
                "e.receive_sequence FROM sys.conversation_endpoints e "
                "ORDER BY ALL") + broker.rows(
                "SELECT queue_name, message_sequence_number, message_body "
                "FROM sys.queue_messages ORDER BY ALL")
        finally:
            broker.inst.close()

    small, large = play(2), play(10_000)
    assert len(small) > 30
    assert small == large


def test_p7_handles_are_time_ordered_uuids(small):
    """New endpoints sort after old ones in conversation_endpoints' primary key (handles.py:
    DuckDB's index of it then stays on disk for idle conversations)."""
    import uuid

    handles = []
    for _ in range(3):
        conv = small.a.begin_dialog("SA", "SB")
        conv.send("x")
        handles.append(conv.handle)
        small.clock.advance(1)
    target = [r[0] for r in small.rows(
        "SELECT conversation_handle FROM sys.conversation_endpoints WHERE NOT is_initiator")]
    for handle in handles + target:
        assert uuid.UUID(handle).version == 7, handle
    prefixes = [h[:13] for h in handles]  # 48 bits of milliseconds
    assert prefixes == sorted(prefixes)


def test_a_commit_does_not_wait_for_another_threads_unit_of_work_to_trim(small):
    """After its commit a unit of work bumps and trims the cache only if the store's lock is
    free: waiting for another thread's transaction held a committed RECEIVE up to that
    transaction's length. What it skipped, the next commit that finds the lock free does."""
    import threading

    from pybroker.kernel.messaging.unit_of_work import UnitOfWork

    m = small.inst.kernel.messaging
    convs = [small.a.begin_dialog("SA", "SB") for _ in range(12)]
    for conv in convs:
        conv.send(b"x")  # more endpoints than the cache holds, trimmed at each commit
    assert cached(small) <= m.endpoints.capacity
    m.endpoints.capacity = 2  # now over capacity: the next free commit trims
    held, timed_out = threading.Event(), []
    done = threading.Event()

    def hold() -> None:
        with m.store._lock:  # another thread's unit of work
            held.set()
            timed_out.append(not done.wait(10))

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(10)
    m.after_commit(UnitOfWork(m))  # returns while the lock is held elsewhere
    done.set()
    thread.join(10)
    assert timed_out == [False]
    assert cached(small) > 2  # the trim was skipped, not waited for
    m.after_commit(UnitOfWork(m))  # the lock is free: trimmed now
    assert cached(small) == 2
