"""The engine's side of arrivals from the network (P4.4, P5.4), fed straight to
``RemoteDelivery.arrive`` (no sockets): messages that arrive ahead of a missing one wait in
the queue with status 2, written with the batch's other rows, and leave in order, a run of
them in one statement, once the missing one arrives, within one batch or across batches."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pybroker
from pybroker.conversation.remote import Arrival
from pybroker.wire.frames import MessageFragment

FAR_BROKER = str(uuid.UUID(int=0xFA5))


def _fragment(conversation_id: str, seq: int) -> MessageFragment:
    body = f"<m n='{seq}'/>".encode()
    return MessageFragment(
        conversation_id=conversation_id, from_initiator=True, sequence=seq, fragment_number=0,
        fragment_count=1, message_size=len(body), from_service="FarService",
        to_service="StockService", from_broker_instance=FAR_BROKER, to_broker_instance=None,
        contract="DEFAULT", message_type="DEFAULT", validation="N", is_end_of_dialog=False,
        is_error=False, priority=5, lifetime_ms=4_102_444_800_000, hops_remaining=32,
        key_id=bytes(8), body=body)


def _statuses(inst: pybroker.Instance, cid: str) -> list[tuple[int, int]]:
    return inst.sql(
        "SELECT m.message_sequence_number, m.status FROM sys.conversation_endpoints e "
        "JOIN queue_messages m ON m.conversation_handle = e.conversation_handle::VARCHAR "
        "WHERE e.conversation_id::VARCHAR = ? ORDER BY m.queuing_order", [cid]).fetchall()


@contextlib.contextmanager
def _statements(inst: pybroker.Instance) -> Iterator[list[str]]:
    """The templates the instance's store runs meanwhile, in order."""
    statements: list[str] = []
    real_run = inst._store.run

    def counting_run(template, params=None):
        statements.append(template)
        return real_run(template, params)

    inst._store.run = counting_run
    try:
        yield statements
    finally:
        del inst._store.run


def test_held_messages_are_written_and_released_in_order_set_based(tmp_path):
    with pybroker.connect(tmp_path / "b.duckdb") as inst:
        stock = inst.create_database("Stock")
        stock.create_queue("StockQueue")
        stock.create_service("StockService", queue="StockQueue", contracts=["DEFAULT"])
        remote = inst._messaging.remote
        cid = str(uuid.uuid4())

        def arrive(*seqs: int) -> None:
            remote.arrive([Arrival(1, "test", _fragment(cid, s)) for s in seqs])

        arrive(0, 2, 3, 5)
        assert _statuses(inst, cid) == [(0, 1), (2, 2), (3, 2), (5, 2)]
        arrive(4)
        assert sorted(_statuses(inst, cid)) == [(0, 1), (2, 2), (3, 2), (4, 2), (5, 2)]
        with _statements(inst) as statements:
            arrive(1)  # 1 arrives: 2, 3, 4 and 5 become receivable, in order
        assert statements.count("wire/take_held_messages.sql") == 1
        assert [s for _, s in _statuses(inst, cid)] == [1] * 6
        # within one batch: 7 is held, then 6 arrives and releases it before the commit
        arrive(7, 6)
        got = stock.receive("StockQueue", max_messages=100)
        assert [m.message_sequence_number for m in got] == list(range(8))
        assert [m.message_body for m in got] == [f"<m n='{i}'/>".encode() for i in range(8)]
        arrive(3, 7)  # duplicates: acknowledged again, not queued again (P5.4)
        assert stock.receive("StockQueue", max_messages=100) == []


def test_one_batch_finds_the_endpoints_of_many_conversations_in_one_query(tmp_path):
    with pybroker.connect(tmp_path / "b.duckdb") as inst:
        stock = inst.create_database("Stock")
        stock.create_queue("StockQueue")
        stock.create_service("StockService", queue="StockQueue", contracts=["DEFAULT"])
        remote = inst._messaging.remote
        cids = [str(uuid.uuid4()) for _ in range(20)]
        remote.arrive([Arrival(1, "test", _fragment(c, 0)) for c in cids])
        remote._index.clear()  # as after a restart: the endpoints are only in the file
        inst._messaging._endpoints.clear()
        with _statements(inst) as statements:
            remote.arrive([Arrival(1, "test", _fragment(c, 1)) for c in cids])
        assert statements.count("wire/select_endpoints_by_conversations.sql") == 1
        assert "wire/select_endpoint_by_conversation.sql" not in statements
        got = []
        while batch := stock.receive("StockQueue", max_messages=100):
            got += batch
        by_handle: dict[str, list[int]] = {}
        for m in got:
            by_handle.setdefault(str(m.conversation_handle), []).append(
                m.message_sequence_number)
        assert len(by_handle) == 20  # one endpoint per conversation, not a second one
        assert all(seqs == [0, 1] for seqs in by_handle.values())
