"""The engine's side of arrivals from the network (P4.4, P5.4), fed straight to
``RemoteDelivery.arrive`` (no sockets): messages that arrive ahead of a missing one wait in
the queue with status 2, written with the batch's other rows, and leave in order, a run of
them in one statement, once the missing one arrives, within one batch or across batches.

At a mirrored pair's principal (R9) a later message of a conversation it has no endpoint
for is refused with a notice that is not fatal; its sender ends the conversation with an
error only if the far side had acknowledged or sent a message (it began at the former
principal), and otherwise waits for its first message to begin it (one merely overtaken)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pybroker
from pybroker.core.wire.dialog import Acknowledged
from pybroker.core.wire.frame_types import AckEntry
from pybroker.core.wire.frames import MessageFragment, Notice
from pybroker.core.wire.mirrored_route import NOT_PRINCIPAL_CODE
from pybroker.kernel.messaging.arrivals import UNKNOWN_AT_PRINCIPAL, Arrival

FAR_BROKER = str(uuid.UUID(int=0xFA5))
ERROR = "http://schemas.microsoft.com/SQL/ServiceBroker/Error"


class FakeWire:
    """The transport's side as the engine sees it: what it is handed is kept."""

    instance_id = "fake"
    key_id = bytes(8)
    address = "tcp://127.0.0.1:4022"

    def __init__(self) -> None:
        self.acks: list[AckEntry] = []
        self.notices: list[Notice] = []
        self.submitted: list[tuple[str, str, MessageFragment]] = []
        self.forgotten: list[tuple[str, bool]] = []

    def submit(self, items):
        self.submitted += items

    def forget(self, conversation_id, from_initiator):
        self.forgotten.append((conversation_id, from_initiator))

    def reply(self, connection, acks, notices, answered=0):
        self.acks += acks
        self.notices += notices

    def forward(self, items):
        raise AssertionError("nothing is forwarded here")

    def is_own_address(self, address):
        return False


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
    real_run = inst.kernel.store.run

    def counting_run(template, params=None, **variables):
        statements.append(template)
        return real_run(template, params, **variables)

    inst.kernel.store.run = counting_run
    try:
        yield statements
    finally:
        del inst.kernel.store.run


def test_held_messages_are_written_and_released_in_order_set_based(tmp_path):
    with pybroker.connect(tmp_path / "b.duckdb") as inst:
        stock = inst.create_database("Stock")
        stock.create_queue("StockQueue")
        stock.create_service("StockService", queue="StockQueue", contracts=["DEFAULT"])
        remote = inst.kernel.messaging.remote
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
        remote = inst.kernel.messaging.remote
        cids = [str(uuid.uuid4()) for _ in range(20)]
        remote.arrive([Arrival(1, "test", _fragment(c, 0)) for c in cids])
        remote.arrivals.forget_index()  # as after a restart: the endpoints are only in the file
        inst.kernel.messaging.endpoints.clear()
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


def _endpoints(inst: pybroker.Instance, cid: str) -> int:
    return inst.sql("SELECT count(*) FROM sys.conversation_endpoints WHERE "
                    "conversation_id::VARCHAR = ?", [cid]).fetchone()[0]


def test_R9_at_a_principal_an_unknown_conversation_is_refused_until_its_first_message(
        tmp_path):
    with pybroker.connect(tmp_path / "m.duckdb") as inst:
        stock = inst.create_database("Stock")
        stock.create_queue("StockQueue")
        stock.create_service("StockService", queue="StockQueue", contracts=["DEFAULT"])
        stock.set_mirroring("PRINCIPAL", "tcp://partner:4022")
        remote = inst.kernel.messaging.remote
        wire = remote.wire = FakeWire()

        def arrive(cid: str, *seqs: int) -> None:
            remote.arrive([Arrival(1, "test", _fragment(cid, s)) for s in seqs])

        # sequence 1 overtook sequence 0: refused, not fatally, nothing kept, no ack
        cid = str(uuid.uuid4())
        arrive(cid, 1)
        (notice,) = wire.notices
        assert (notice.conversation_id, notice.about_initiator, notice.sequence,
                notice.code, notice.is_fatal) == (cid, True, 1, UNKNOWN_AT_PRINCIPAL, False)
        assert f"principal of the mirrored pair at {FakeWire.address}" in notice.text
        assert wire.acks == [] and _endpoints(inst, cid) == 0
        assert _statuses(inst, cid) == []
        # sequence 0 begins it; the retry of 1 follows; both received, in order
        arrive(cid, 0)
        arrive(cid, 2, 1)
        got = stock.receive("StockQueue", max_messages=10)
        assert [m.message_sequence_number for m in got] == [0, 1, 2]
        assert len(wire.notices) == 1 and _endpoints(inst, cid) == 1
        assert {a.conversation_id for a in wire.acks} == {cid}
        # in one batch, sequence 0 after 1: it begins the conversation, nothing refused
        other = str(uuid.uuid4())
        arrive(other, 1, 0)
        got = stock.receive("StockQueue", max_messages=10)
        assert [m.message_sequence_number for m in got] == [0, 1]
        assert len(wire.notices) == 1
        # not in a pair: a later message begins a target and waits for the first (P4.4)
        stock.set_mirroring(None)
        alone = str(uuid.uuid4())
        arrive(alone, 1)
        assert _statuses(inst, alone) == [(1, 2)] and len(wire.notices) == 1


def test_R9_the_sender_ends_a_conversation_its_principal_lost_and_waits_for_one_overtaken(
        tmp_path):
    with pybroker.connect(tmp_path / "a.duckdb") as inst:
        shop = inst.create_database("Shop")
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
        shop.create_route("ToStock", service_name="StockService",
                          address="tcp://127.0.0.1:4022")
        remote = inst.kernel.messaging.remote
        wire = remote.wire = FakeWire()
        conv = shop.begin_dialog("ShopService", "StockService")
        conv.send(b"<a/>")
        conv.send(b"<b/>")
        assert [f.sequence for _, _, f in wire.submitted] == [0, 1]

        def refused(seq: int) -> None:
            remote.notice(Notice(conv.conversation_id, True, None, seq, UNKNOWN_AT_PRINCIPAL,
                                 "The conversation is not known to the principal.", False,
                                 bytes(8)), "127.0.0.1:4022")

        def in_flight() -> list[int]:
            return [s for (s,) in inst.sql(
                "SELECT message_sequence_number FROM sys.transmission_queue "
                "ORDER BY 1").fetchall()]

        # nothing acknowledged: sequence 0 has not reached the principal yet; kept
        refused(1)
        assert conv.state == "CO" and in_flight() == [0, 1]
        assert shop.receive("ShopQueue") == [] and wire.forgotten == []
        # the far side acknowledged 0 (at the former principal): 1 cannot go on
        remote.acknowledged([Acknowledged(conv.handle, 0, FAR_BROKER, False, False)])
        assert in_flight() == [1]
        refused(1)
        assert conv.state == "ER" and in_flight() == []
        assert wire.forgotten == [(conv.conversation_id, True)]
        (error,) = shop.receive("ShopQueue")
        assert (error.message_type_name, error.message_sequence_number) == (ERROR, -1)
        assert error.message_body.startswith(
            b'<Error xmlns="http://schemas.microsoft.com/SQL/ServiceBroker/Error">'
            b"<Code>-8462</Code><Description>The conversation is not known to the principal."
            b"</Description>")
        refused(1)  # another of its messages: it has ended already, nothing more
        inst.run_pending()
        assert inst.sql("SELECT subclass, peer_address, message_sequence_number FROM "
                        "sys.broker_events WHERE event_class = 'Broker:Conversation'"
                        ).fetchall() == [("Broker Initiated Error", "127.0.0.1:4022", 1)]


def test_R4_2_a_conversations_messages_go_to_the_database_that_holds_it(tmp_path):
    """The service in two databases (R4.2: the pick is arbitrary, but the database that holds
    the conversation comes first): each conversation side's messages in one batch are
    routed once, and a later batch's go where the first went, the endpoints remembered or
    only in the file (as after a restart), so all of them reach one database and one
    endpoint there, in order. A batch's messages share one arrival time."""
    with pybroker.connect(tmp_path / "b.duckdb") as inst:
        databases = []
        for name in ("StockA", "StockB"):
            db = inst.create_database(name)
            db.create_queue("StockQueue")
            db.create_service("StockService", queue="StockQueue", contracts=["DEFAULT"])
            databases.append(db)
        remote = inst.kernel.messaging.remote
        cids = [str(uuid.uuid4()) for _ in range(20)]
        remote.arrive([Arrival(1, "test", _fragment(c, s)) for s in range(5) for c in cids])
        (times,) = inst.sql("SELECT count(DISTINCT message_enqueue_time) FROM "
                            "queue_messages").fetchone()
        assert times == 1
        remote.arrive([Arrival(1, "test", _fragment(c, s)) for s in (5, 6) for c in cids])
        remote.arrivals.forget_index()  # as after a restart: the endpoints are only in the file
        inst.kernel.messaging.endpoints.clear()
        remote.arrive([Arrival(1, "test", _fragment(c, s)) for s in (7, 8) for c in cids])
        remote.arrivals.forget_index()
        inst.kernel.messaging.endpoints.clear()
        for c in cids:  # one side at a time: _find's own query, not the batch's
            remote.arrive([Arrival(1, "test", _fragment(c, 9))])
        conversation_of = dict(inst.sql(
            "SELECT conversation_handle::VARCHAR, conversation_id::VARCHAR "
            "FROM sys.conversation_endpoints").fetchall())
        assert sorted(conversation_of.values()) == sorted(cids)  # one endpoint each
        where: dict[str, set[str]] = {}
        for db in databases:
            seqs: dict[str, list[int]] = {}
            while got := db.receive("StockQueue", max_messages=1000):  # a group at a time
                m = got[0]
                cid = conversation_of[str(m.conversation_handle)]
                assert {str(x.conversation_handle) for x in got} == {str(m.conversation_handle)}
                seqs.setdefault(cid, []).extend(x.message_sequence_number for x in got)
                where.setdefault(cid, set()).add(db.name)
            assert all(got == list(range(10)) for got in seqs.values())
        assert sorted(where) == sorted(cids)
        assert all(len(names) == 1 for names in where.values())
        assert {name for names in where.values() for name in names} == {"StockA", "StockB"}


def test_R4_2_a_conversation_held_by_a_principal_is_not_refused_for_a_mirror_picked(tmp_path):
    """The service in two databases, one of them a mirror (R9): a first message whose
    arbitrary pick is the mirror is refused (not principal; its sender tries again), but a
    later message of a conversation the principal's database holds goes there, whatever
    the pick."""
    with pybroker.connect(tmp_path / "b.duckdb") as inst:
        for name in ("StockA", "StockB"):
            db = inst.create_database(name)
            db.create_queue("StockQueue")
            db.create_service("StockService", queue="StockQueue", contracts=["DEFAULT"])
        remote = inst.kernel.messaging.remote
        wire = remote.wire = FakeWire()
        mirror = inst.kernel.messaging.catalog_named("StockB").database_id
        remote.arrivals.mirroring_roles = {mirror: "MIRROR"}
        cids = [str(uuid.uuid4()) for _ in range(40)]
        remote.arrive([Arrival(1, "test", _fragment(c, 0)) for c in cids])
        refused = {n.conversation_id for n in wire.notices}
        assert {n.code for n in wire.notices} == {NOT_PRINCIPAL_CODE}
        began = [c for c in cids if c not in refused]
        assert refused and began  # both picks happened
        assert {_endpoints(inst, c) for c in began} == {1}
        assert {_endpoints(inst, c) for c in refused} == {0}
        wire.notices.clear()
        for seq in (1, 2, 3):
            remote.arrive([Arrival(1, "test", _fragment(c, seq)) for c in began])
        assert wire.notices == []
        stock_a = inst.database("StockA")
        got = 0
        while batch := stock_a.receive("StockQueue", max_messages=1000):
            assert [m.message_sequence_number for m in batch] == [0, 1, 2, 3]
            got += 1
        assert got == len(began)
