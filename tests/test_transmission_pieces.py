"""P5.2, P4.4: a large body SEND puts in the transmission queue is kept as pieces, written
and committed apart before the SEND's own transaction writes its row
(pybroker/kernel/messaging/transmission_pieces.py, migrations/011). The body crosses byte for
byte, the pieces leave with their row (acknowledged, delivered after a delay, dropped),
a rollback or a stop before the commit leaves none behind, and sys.transmission_queue
shows the body whole. Sizes are made small here (STAGE_BYTES, PIECE_SIZE) so that the
cases are quick and every body has many pieces."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.kernel.messaging import message_parts, unit_of_work
from tests.wire_helpers import CONTRACT, ORDER, drain, instance_pair, wait_for

PIECES = "SELECT count(*) FROM main.transmission_queue_pieces"
ROWS = "SELECT body_pieces, message_body IS NULL FROM main.transmission_queue ORDER BY 1"


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(unit_of_work, "STAGE_BYTES", 1_000)
    monkeypatch.setattr(message_parts, "PIECE_SIZE", 97)
    monkeypatch.setattr(message_parts, "PIECES_PER_STATEMENT", 5)  # several runs a body


def _shop(inst: pybroker.Instance) -> pybroker.Database:
    shop = inst.create_database("Shop")
    shop.create_queue("ShopQueue")
    shop.create_service("ShopService", queue="ShopQueue", contracts=["DEFAULT"])
    return shop


def test_a_large_body_crosses_as_pieces_and_they_leave_when_acknowledged(tmp_path, small):
    a, b, shop, stock = instance_pair(tmp_path)
    try:
        bodies = [random.Random(n).randbytes(size) for n, size in enumerate(
            (999, 1_000, 5_000, 1_000 * 97 + 1))]
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        a.endpoint.close()  # nothing leaves: the rows stay to be looked at
        with shop.transaction():
            for body in bodies:
                conv.send(body, message_type=ORDER)
        # the three of 1,000 bytes or more are kept as pieces of 97 bytes, not in the row
        assert a.sql(ROWS).fetchall() == [(11, True), (52, True), (1001, True),
                                          (None, False)]
        assert a.sql(PIECES).fetchone() == (11 + 52 + 1001,)
        assert a.sql("SELECT message_body FROM sys.transmission_queue ORDER BY "
                     "message_sequence_number").fetchall() == [(b,) for b in bodies]
        a.close()
        # reopened, the rows go again (the resubmission reads the pieces back), whole, in
        # order
        a = pybroker.connect(tmp_path / "a.duckdb", retry_scale=0.01)
        a.start_endpoint(0)
        got = drain(stock, "StockQueue", len(bodies))
        assert [m.message_body for m in got] == bodies
        wait_for(lambda: a.sql("SELECT count(*) FROM main.transmission_queue").fetchone()
                 == (0,), what="A's transmission queue to empty")
        assert a.sql(PIECES).fetchone() == (0,)
    finally:
        a.close()
        b.close()


def test_a_send_that_rolls_back_leaves_no_pieces(tmp_path, small):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        shop = _shop(inst)
        conv = shop.begin_dialog("ShopService", "FarService", contract="DEFAULT")
        kept = random.Random(1).randbytes(3_000)
        conv.send(kept)
        with pytest.raises(RuntimeError), shop.transaction():
            conv.send(random.Random(2).randbytes(4_000))
            shop.receive("ShopQueue")  # a statement: the SEND's rows are written first
            assert inst.sql(PIECES).fetchone() == (31 + 42,)
            raise RuntimeError("roll back")
        assert inst.sql(PIECES).fetchone() == (31,)
        assert inst.sql(ROWS).fetchall() == [(31, True)]
        # the same sequence number goes again, with another body
        again = random.Random(3).randbytes(2_000)
        conv.send(again)
        assert inst.sql("SELECT message_body FROM sys.transmission_queue ORDER BY "
                        "message_sequence_number").fetchall() == [(kept,), (again,)]


def test_pieces_no_row_names_are_deleted_at_open(tmp_path, small):
    path = tmp_path / "i.duckdb"
    with pybroker.connect(path) as inst:
        shop = _shop(inst)
        conv = shop.begin_dialog("ShopService", "FarService", contract="DEFAULT")
        body = random.Random(4).randbytes(1_500)
        conv.send(body)
        # what a SEND wrote before the process stopped, its row never committed
        inst.kernel.store.commit_apart("transmission/insert_pieces.sql", [
            {"conversation_handle": conv.handle, "message_sequence_number": 1,
             "piece_numbers": [0, 1], "message_bodies": [b"x", b"x"]}], 10)
        assert inst.sql(PIECES).fetchone() == (16 + 2,)
    with pybroker.connect(path) as inst:
        assert inst.sql(PIECES).fetchone() == (16,)
        assert inst.sql("SELECT message_body FROM sys.transmission_queue").fetchall() == [
            (body,)]


def test_a_delayed_message_kept_as_pieces_is_delivered_whole_when_its_service_appears(
        tmp_path, small):
    with pybroker.connect(tmp_path / "i.duckdb", retry_scale=0.01) as inst:
        shop = _shop(inst)
        conv = shop.begin_dialog("ShopService", "StockService", contract="DEFAULT")
        body = random.Random(5).randbytes(9_999)
        conv.send(body)
        assert inst.sql(ROWS).fetchall() == [(104, True)]
        stock = inst.create_database("Stock")  # the service appears: delivered here
        stock.create_queue("StockQueue")
        stock.create_service("StockService", queue="StockQueue", contracts=["DEFAULT"])
        got = drain(stock, "StockQueue", 1)
        assert got[0].message_body == body
        assert inst.sql(PIECES).fetchone() == (0,)
        assert inst.sql("SELECT count(*) FROM main.transmission_queue").fetchone() == (0,)


def test_ending_with_an_error_drops_the_pieces_with_the_rows(tmp_path, small):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        shop = _shop(inst)
        conv = shop.begin_dialog("ShopService", "FarService", contract="DEFAULT")
        conv.send(random.Random(6).randbytes(2_000))
        conv.end(error=50_001, description="given up")
        assert inst.sql(PIECES).fetchone() == (0,)


def test_any_body_round_trips_through_its_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(unit_of_work, "STAGE_BYTES", 1)
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        shop = _shop(inst)
        conv = shop.begin_dialog("ShopService", "FarService", contract="DEFAULT")

        @settings(max_examples=30, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow,
                                         HealthCheck.function_scoped_fixture])
        @given(body=st.binary(min_size=1, max_size=600), piece=st.integers(1, 50))
        def round_trip(body, piece):
            monkeypatch.setattr(message_parts, "PIECE_SIZE", piece)
            seq = conv.send(body)
            assert inst.sql(
                "SELECT t.body_pieces, s.message_body FROM sys.transmission_queue AS s JOIN "
                "main.transmission_queue AS t USING (conversation_handle, "
                "message_sequence_number) WHERE message_sequence_number = ?", [seq]
            ).fetchone() == (-(-len(body) // piece), body)

        round_trip()


def test_export_writes_a_body_kept_as_pieces_whole(tmp_path, small):
    import duckdb

    from pybroker.apps.pipeline.export import export_instance

    path = tmp_path / "i.duckdb"
    body = random.Random(8).randbytes(2_500)
    with pybroker.connect(path) as inst:
        shop = _shop(inst)
        conv = shop.begin_dialog("ShopService", "FarService", contract="DEFAULT")
        conv.send(body)
        conv.send(b"<small/>")
        assert inst.sql(ROWS).fetchall() == [(26, True), (None, False)]
    export_instance(path, tmp_path / "out")
    assert duckdb.sql(
        f"SELECT message_sequence_number, message_body, database_id FROM "
        f"'{tmp_path / 'out' / 'transmission_queue.parquet'}' ORDER BY 1").fetchall() == [
        (0, body, 5), (1, b"<small/>", 5)]


def test_a_body_larger_than_the_memory_limit_is_sent_in_a_transaction_that_wrote(tmp_path):
    # DuckDB can neither checkpoint nor let go of rows committed apart while a transaction
    # that wrote is open: the limit makes room for the body first (Store.room_apart), else
    # the commit of its pieces failed, and the file with it, for good
    body = random.Random(9).randbytes(80 * 2**20)
    path = tmp_path / "i.duckdb"
    with pybroker.connect(path, memory_limit="64MiB") as inst:
        shop = _shop(inst)
        with shop.transaction():
            conv = shop.begin_dialog("ShopService", "FarService", contract="DEFAULT")
            shop.receive("ShopQueue")  # a statement: the new endpoint is written first
            conv.send(body)
        assert inst.sql("SELECT message_size, body_pieces FROM main.transmission_queue"
                        ).fetchall() == [(len(body), -(-len(body) // message_parts.PIECE_SIZE))]
    del body
    with pybroker.connect(path) as inst:  # and the file opens again, whole
        assert inst.sql(PIECES).fetchone() == (-(-80 * 2**20 // message_parts.PIECE_SIZE),)


def test_close_during_a_send_stops_its_pieces_and_the_next_open_sweeps_them(tmp_path):
    # Store.close() while pieces are committed apart: they stop (InstanceClosedError); the
    # batches already committed are pieces no row names, gone when the file opens again
    import threading

    from pybroker.storage.store import Store

    path = tmp_path / "i.duckdb"
    with pybroker.connect(path) as inst:
        handle = _shop(inst).begin_dialog("ShopService", "FarService",
                                          contract="DEFAULT").handle
    store = Store(path)
    started = threading.Event()

    def rows():
        for n in range(10_000):
            if n == 20:
                started.set()
            yield {"conversation_handle": handle, "message_sequence_number": 0,
                   "piece_numbers": [n], "message_bodies": [b"p" * 1_000]}

    failed: list[BaseException] = []

    def send():
        try:
            store.commit_apart("transmission/insert_pieces.sql", rows(), 10)
        except BaseException as exc:
            failed.append(exc)

    worker = threading.Thread(target=send)
    worker.start()
    assert started.wait(30)
    store.closing(time.monotonic())
    store.close()
    worker.join(30)
    assert not worker.is_alive()
    assert [type(e) for e in failed] == [pybroker.InstanceClosedError]
    with pybroker.connect(path) as inst:
        assert inst.sql(PIECES).fetchone() == (0,)


ROW_GROUPS = "SELECT count(*) FROM pragma_storage_info('transmission_queue_pieces')"


def _far(shop: pybroker.Database, seed: int) -> pybroker.Conversation:
    """A conversation to a service of no route, its 2,000-byte body kept as 21 pieces."""
    conv = shop.begin_dialog("ShopService", "FarService", contract="DEFAULT")
    conv.send(random.Random(seed).randbytes(2_000))
    return conv


def test_once_many_pieces_are_gone_and_none_is_left_the_file_is_checkpointed(
        tmp_path, small, monkeypatch):
    # Store._tidy_pieces: deleted pieces otherwise stay in their row group, read back at
    # each later COMMIT that adds pieces, until a checkpoint finds none left and drops it
    monkeypatch.setattr("pybroker.storage.store.TIDY_PIECES", 30)
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        shop = _shop(inst)
        conv, other = _far(shop, 7), _far(shop, 8)
        assert inst.sql(PIECES).fetchone() == (42,)
        conv.end(error=50_001, description="given up")  # 21 gone: not yet 30
        assert inst.sql(ROW_GROUPS).fetchone()[0] > 0
        # 42 gone, none left: checkpointed, the row group of the deleted pieces dropped
        other.end(error=50_001, description="given up")
        assert inst.sql(PIECES).fetchone() == (0,)
        assert inst.sql(ROW_GROUPS).fetchone() == (0,)


def test_pieces_deleted_by_a_transaction_that_rolls_back_count_for_nothing(
        tmp_path, small, monkeypatch):
    monkeypatch.setattr("pybroker.storage.store.TIDY_PIECES", 20)
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        shop = _shop(inst)
        conv = _far(shop, 9)
        with pytest.raises(RuntimeError), shop.transaction():
            conv.end(error=50_001, description="given up")
            raise RuntimeError("changed my mind")
        assert inst.sql(PIECES).fetchone() == (21,)
        assert inst.kernel.store._pieces_deleted == {}  # the rolled-back deletes not counted
        assert inst.sql(ROW_GROUPS).fetchone()[0] > 0


def test_a_send_that_stored_pieces_is_checkpointed_once_it_commits(tmp_path, small):
    # Store.checkpoint_after_commit: DuckDB cannot checkpoint the pieces while the SEND's
    # transaction is open; once it commits they go to the file instead of staying in
    # DuckDB's memory until its log reaches its threshold
    wal = tmp_path / "i.duckdb.wal"
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        shop = _shop(inst)
        conv = shop.begin_dialog("ShopService", "FarService", contract="DEFAULT")
        conv.send(b"<small/>")
        assert wal.exists() and wal.stat().st_size > 0
        conv.send(random.Random(17).randbytes(1_500))
        assert not wal.exists() or wal.stat().st_size == 0
        assert inst.sql(PIECES).fetchone() == (16,)
