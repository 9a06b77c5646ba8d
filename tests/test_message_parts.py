"""P4.4: a message that crossed the wire in fragments goes into its queue as its fragments
(migrations/010, pybroker/kernel/messaging/message_parts.py). Fed straight to
``RemoteDelivery.arrive`` (no sockets), in any order and any fragment size: RECEIVE (one
statement, read ahead, WHERE, with RETENTION) hands out the body byte for byte, the
fragments leave exactly when the message does (commit, END CONVERSATION, DROP QUEUE) and
stay on a rollback, sys.queue_messages shows the body, and a reopened instance goes on."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import random
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.core.wire.frames import MessageFragment
from pybroker.kernel.messaging import message_parts
from pybroker.kernel.messaging.arrivals import Arrival
from pybroker.storage import schema as storage_schema
from pybroker.storage import templates as sql_templates
from pybroker.storage.schema import available_migrations

FAR_BROKER = str(uuid.UUID(int=0xFA5))
KEPT = "SELECT count(*) FROM main.message_fragments"


def _fragments(cid: str, seq: int, body: bytes, size: int) -> list[MessageFragment]:
    count = max(1, -(-len(body) // size))
    return [MessageFragment(
        conversation_id=cid, from_initiator=True, sequence=seq, fragment_number=n,
        fragment_count=count, message_size=len(body), from_service="FarService",
        to_service="StockService", from_broker_instance=FAR_BROKER, to_broker_instance=None,
        contract="DEFAULT", message_type="DEFAULT", validation="N", is_end_of_dialog=False,
        is_error=False, priority=5, lifetime_ms=4_102_444_800_000, hops_remaining=32,
        key_id=bytes(8), body=body[n * size:(n + 1) * size]) for n in range(count)]


def _stock(inst: pybroker.Instance, **queue: bool) -> pybroker.Database:
    stock = inst.create_database("Stock")
    stock.create_queue("StockQueue", **queue)
    stock.create_service("StockService", queue="StockQueue", contracts=["DEFAULT"])
    return stock


def _arrive(inst: pybroker.Instance, fragments: list[MessageFragment], seed: int = 0) -> None:
    """Each fragment in a batch of its own, in an order of ``seed``, the last one last."""
    order = fragments[:-1]
    random.Random(seed).shuffle(order)
    for f in (*order, fragments[-1]):
        inst.kernel.messaging.remote.arrive([Arrival(1, "test", f)])


def _queue_row(inst: pybroker.Instance) -> list[tuple]:
    return inst.sql("SELECT status, body_fragments, message_body IS NULL "
                    "FROM main.queue_messages ORDER BY queuing_order").fetchall()


def test_any_message_in_any_fragments_is_received_byte_for_byte(monkeypatch):
    # each fragment is kept as pieces (migrations/010): small ones here, so that a fragment
    # has several, as a 1 MiB one has 128 of PIECE_SIZE
    monkeypatch.setattr(message_parts, "PIECE_SIZE", 7)
    with pybroker.connect(":memory:") as inst:  # one instance: a conversation per example
        stock = _stock(inst)

        @settings(max_examples=40, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow])
        @given(bodies=st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=4),
               size=st.integers(1, 64), seed=st.integers(0, 2**16),
               way=st.sampled_from(["one statement", "read ahead", "where"]))
        def received(bodies, size, seed, way):
            cid = str(uuid.uuid4())
            for seq, body in enumerate(bodies):
                _arrive(inst, _fragments(cid, seq, body, size), seed + seq)
            # each message is in its queue: as its fragments when there were several
            expected = [(1, c if c > 1 else None, c > 1)
                        for c in (max(1, -(-len(b) // size)) for b in bodies)]
            assert _queue_row(inst) == expected
            assert inst.sql(KEPT).fetchone() == (sum(  # the pieces of 7 bytes or fewer
                -(-len(f.body) // 7) or 1 for b in bodies if len(b) > size
                for f in _fragments(cid, 0, b, size)),)
            shown = inst.sql("SELECT status_desc, message_body FROM sys.queue_messages "
                             "ORDER BY queuing_order").fetchall()
            assert shown == [("READY", b) for b in bodies]
            with stock.transaction():
                if way == "one statement":
                    got = stock.receive("StockQueue", max_messages=len(bodies))
                elif way == "read ahead":  # one at a time: the engine reads ahead
                    got = [m for _ in bodies for m in stock.receive("StockQueue")]
                else:
                    handle = inst.sql("SELECT conversation_handle FROM main.queue_messages "
                                      "LIMIT 1").fetchone()[0]
                    got = stock.receive("StockQueue", max_messages=len(bodies),
                                        conversation_handle=handle)
            assert [m.message_body for m in got] == bodies
            assert [m.message_sequence_number for m in got] == list(range(len(bodies)))
            assert inst.sql(KEPT).fetchone() == (0,)
            assert _queue_row(inst) == []

        received()


def test_a_rollback_puts_the_message_and_its_fragments_back(tmp_path):
    body = random.Random(3).randbytes(10_000)
    cid = str(uuid.uuid4())
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        stock = _stock(inst)
        _arrive(inst, _fragments(cid, 0, body, 1_000))
        assert _queue_row(inst) == [(1, 10, True)]
        with pytest.raises(RuntimeError), stock.transaction():
            assert stock.receive("StockQueue")[0].message_body == body
            raise RuntimeError("roll back")
        assert inst.sql(KEPT).fetchone() == (10,)
    # reopened: the fragments are a whole message in the queue, not one being reassembled
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        assert inst.kernel.messaging.remote.arrivals.fragments == {}
        assert inst.sql("SELECT status_desc FROM sys.queue_messages").fetchall() == [
            ("READY",)]
        got = inst.database("Stock").receive("StockQueue")
        assert got[0].message_body == body
        assert inst.sql(KEPT).fetchone() == (0,)


def test_with_retention_the_fragments_stay_until_the_conversation_ends():
    body = bytes(range(256)) * 10
    cid = str(uuid.uuid4())
    with pybroker.connect(":memory:") as inst:
        stock = _stock(inst, retention=True)
        _arrive(inst, _fragments(cid, 0, body, 500))
        # and a message still being reassembled, which goes too
        _arrive(inst, _fragments(cid, 1, body, 500)[:2])
        got = stock.receive("StockQueue")
        assert got[0].message_body == body
        assert inst.sql("SELECT status_desc, message_body FROM sys.queue_messages "
                        "ORDER BY status").fetchall() == [("RETAINED", body),
                                                          ("INCOMPLETE", None)]
        assert inst.sql(KEPT).fetchone() == (6 + 2,)
        stock.conversation(got[0].conversation_handle).end()
        assert inst.sql(KEPT).fetchone() == (0,)
        assert inst.kernel.messaging.remote.arrivals.fragments == {}


def test_drop_queue_takes_the_fragments_of_its_messages():
    cid = str(uuid.uuid4())
    with pybroker.connect(":memory:") as inst:
        stock = _stock(inst)
        _arrive(inst, _fragments(cid, 0, b"x" * 100, 10))
        assert inst.sql(KEPT).fetchone() == (10,)
        stock.drop_service("StockService")
        stock.drop_queue("StockQueue")
        assert inst.sql(KEPT).fetchone() == (0,)


def test_for_a_queue_that_is_off_the_message_waits_whole_and_is_received_once_on():
    body = b"<big>" + b"y" * 5_000 + b"</big>"
    cid = str(uuid.uuid4())
    with pybroker.connect(":memory:") as inst:
        stock = _stock(inst, status=False)
        _arrive(inst, _fragments(cid, 0, body, 1_024))
        assert inst.sql(KEPT).fetchone() == (0,)  # made whole, into the transmission queue
        assert _queue_row(inst) == []
        stock.alter_queue("StockQueue", status=True)
        assert stock.receive("StockQueue", timeout=5)[0].message_body == body


def test_pieces_cut_to_another_size_by_an_earlier_version_still_make_the_message(
        monkeypatch):
    # PIECE_SIZE changed (128 KiB, then 127 KiB, then 8 KiB): fragments held when the
    # instance was upgraded are pieces of the old size. Kept as fragments (read_body) or,
    # arriving ahead of the message before it, held and made whole on arrival (arrivals.py
    # _reassemble), the body comes out byte for byte.
    with pybroker.connect(":memory:") as inst:
        stock = _stock(inst)

        @settings(max_examples=40, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow])
        @given(length=st.integers(2, 400), size=st.integers(2, 64),
               before=st.integers(1, 40), after=st.integers(1, 40),
               held=st.booleans(), seed=st.integers(0, 2**16))
        def received(length, size, before, after, held, seed):
            body = random.Random(seed).randbytes(length)
            cid = str(uuid.uuid4())
            first = _fragments(cid, 0, b"<first/>", 64)
            fragments = _fragments(cid, 1, body, size)
            if not held:
                inst.kernel.messaging.remote.arrive([Arrival(1, "test", first[0])])
            monkeypatch.setattr(message_parts, "PIECE_SIZE", before)
            order = fragments[:-1]
            random.Random(seed).shuffle(order)
            for f in order:
                inst.kernel.messaging.remote.arrive([Arrival(1, "test", f)])
            monkeypatch.setattr(message_parts, "PIECE_SIZE", after)
            inst.kernel.messaging.remote.arrive([Arrival(1, "test", fragments[-1])])
            if held:  # the message before it comes last: both go into the queue
                inst.kernel.messaging.remote.arrive([Arrival(1, "test", first[0])])
            got = stock.receive("StockQueue", max_messages=2)
            assert [m.message_body for m in got] == [b"<first/>", body]
            assert inst.sql(KEPT).fetchone() == (0,)

        received()


def test_fragments_of_the_wrong_sizes_are_refused_and_nothing_is_queued():
    cid = str(uuid.uuid4())
    with pybroker.connect(":memory:") as inst:
        stock = _stock(inst)
        good = _fragments(cid, 0, b"z" * 30, 10)
        short = dataclasses.replace(good[1], body=b"z" * 9)
        _arrive(inst, [good[0], good[2], short])  # the last to arrive is one byte short
        assert _queue_row(inst) == []
        assert stock.receive("StockQueue") == []
        # the sender's retry brings the right fragment: the message goes in whole
        _arrive(inst, [good[1]])
        assert stock.receive("StockQueue")[0].message_body == b"z" * 30


def test_fragments_held_across_a_restart_complete_the_message_with_their_sizes(tmp_path):
    body = random.Random(5).randbytes(7_000)
    cid = str(uuid.uuid4())
    fragments = _fragments(cid, 0, body, 1_000)
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        _stock(inst)
        _arrive(inst, fragments[:4], seed=1)
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        # read back at open with the size of each, which the last fragment is checked by
        assert inst.kernel.messaging.remote.arrivals.fragments == {
            inst.sql("SELECT conversation_handle FROM main.message_fragments LIMIT 1"
                     ).fetchone()[0]: {0: {n: 1_000 for n in range(4)}}}
        assert inst.sql("SELECT status_desc FROM sys.queue_messages").fetchall() == [
            ("INCOMPLETE",)]
        _arrive(inst, fragments[4:], seed=2)
        assert _queue_row(inst) == [(1, 7, True)]
        assert inst.database("Stock").receive("StockQueue")[0].message_body == body
        assert inst.sql(KEPT).fetchone() == (0,)


def test_a_message_larger_than_the_memory_limit_arrives_and_is_received(tmp_path):
    # 1 MiB fragments of an 80 MB message under a 64 MiB limit: kept as pieces under
    # DuckDB's block size, DuckDB can write them out (1 MiB values it could not evict made
    # a commit fail and the file unusable until reopened), and its log is checkpointed at a
    # quarter of the limit (storage.CHECKPOINT_SHARE; a 64 MiB log did not fit)
    size = 80_000_000
    cid = str(uuid.uuid4())
    rng = random.Random(6)
    template = _fragments(cid, 0, b"\0" * (2 * 2**20), 2**20)[0]
    count = -(-size // 2**20)
    digest = hashlib.sha256()
    with pybroker.connect(tmp_path / "i.duckdb", memory_limit="64MiB") as inst:
        stock = _stock(inst)
        for n in range(count):
            body = rng.randbytes(min(2**20, size - n * 2**20))
            digest.update(body)
            inst.kernel.messaging.remote.arrive([Arrival(1, "test", dataclasses.replace(
                template, fragment_number=n, fragment_count=count, message_size=size,
                body=body))])
        assert _queue_row(inst) == [(1, count, True)]
        got = stock.receive("StockQueue")
        assert hashlib.sha256(got[0].message_body).hexdigest() == digest.hexdigest()
        assert inst.sql(KEPT).fetchone() == (0,)


def test_sys_queue_messages_puts_large_kept_bodies_together_in_order(
        tmp_path):
    # 30 messages of ~1.2 MB kept as fragments under the default limit (256 MiB): the view
    # sorts each message's pieces as a list (an ordered list() of them ran out of memory
    # with 45 such messages in a chaos run). It still puts together every kept body it
    # shows at once, in memory (about four times their size: README).
    rng = random.Random(7)
    bodies = [rng.randbytes(1_200_000 + n) for n in range(30)]
    cid = str(uuid.uuid4())
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        _stock(inst)
        for seq, body in enumerate(bodies):
            _arrive(inst, _fragments(cid, seq, body, 262_144), seed=seq)
        assert inst.sql("SELECT count(body_fragments) FROM main.queue_messages").fetchone() == (
            30,)
        cur = inst.sql("SELECT message_body FROM sys.queue_messages ORDER BY queuing_order")
        while rows := cur.fetchmany(8):
            for (got,) in rows:
                assert got == bodies.pop(0)
        assert bodies == []


@pytest.mark.parametrize("limit", [64 * 2**20, 1])
def test_a_large_body_is_read_back_under_a_lowered_limit_and_the_limit_comes_back(
        tmp_path, monkeypatch, limit):
    # Store.streaming: DuckDB holds at most STREAM_LIMIT while the body is read back (never
    # below an instance's least, 64 MiB); then the limit is as it was, and the body is
    # byte for byte
    monkeypatch.setattr(message_parts, "STREAM_FROM", 10_000)
    monkeypatch.setattr(message_parts, "STREAM_LIMIT", limit)
    body = random.Random(7).randbytes(50_000)
    seen: list[int] = []
    during: list[tuple[str]] = []
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        stock = _stock(inst)
        store = inst.kernel.store
        real = store.streaming

        @contextlib.contextmanager
        def watching(value):
            seen.append(value)
            with real(value):
                during.extend(store._side().execute(
                    "SELECT current_setting('memory_limit')").fetchall())
                yield

        monkeypatch.setattr(store, "streaming", watching)
        before = inst.sql("SELECT current_setting('memory_limit')").fetchone()
        _arrive(inst, _fragments(str(uuid.uuid4()), 0, body, 4_000))
        seen.clear()  # the checkpoints of the arrival (Store.checkpoint_after_commit)
        during.clear()
        got = stock.receive("StockQueue")
        assert seen == [limit] and during == [("64.0 MiB",)]
        assert got[0].message_body == body
        assert inst.sql("SELECT current_setting('memory_limit')").fetchone() == before
        assert inst.sql(KEPT).fetchone() == (0,)


def test_a_piece_is_read_back_through_the_index_of_its_number(tmp_path):
    # migrations/012: a scan reads every BLOB of the vectors it passes, so RECEIVE reads a
    # kept body one piece at a time by piece_id, through that column's index
    body = random.Random(8).randbytes(3_000)
    cid = str(uuid.uuid4())
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        stock = _stock(inst)
        _arrive(inst, _fragments(cid, 0, body, 1_000))
        ids = inst.sql("SELECT piece_id FROM main.message_fragments "
                       "ORDER BY fragment_number, piece_number").fetchall()
        assert len(ids) == len({i for (i,) in ids}) == 3
        plan = inst.kernel.store._con.execute(
            "EXPLAIN ANALYZE " + sql_templates.render("wire/select_message_piece.sql"),
            {"piece_id": ids[1][0]}).fetchall()[0][1]
        assert "Index Scan" in plan, plan
        assert stock.receive("StockQueue")[0].message_body == body


def test_fragments_kept_before_their_pieces_were_numbered_are_received(tmp_path, monkeypatch):
    # a file at migration 011 holds a message kept as its fragments; opened by this
    # version, migration 014 numbers its pieces and RECEIVE reads them back by number
    body = random.Random(9).randbytes(5_000)
    cid = str(uuid.uuid4())
    older = tmp_path / "migrations"
    older.mkdir()
    for version, _name, source in available_migrations():
        if version <= 11:
            (older / source.name).write_text(source.read_text())
    monkeypatch.setattr("pybroker.storage.schema.migrations_dir", lambda: older)
    render = sql_templates.render

    def render_as_at_011(name: str, **variables):  # the statements of the code at 011:
        text = render(name, **variables)
        if name == "wire/insert_message_fragment_pieces.sql":  # the INSERT of before piece_id
            text = text.replace(", piece_id)", ")").replace(
                ",\n    nextval('message_fragment_piece_ids')", "")
        if name in ("wire/delete_listeners.sql",  # no broker_listeners (migrations/019),
                    "conversation/delete_group_locks.sql",  # nor migrations/021's, yet
                    "conversation/delete_lock_waits.sql"):
            text = "SELECT 1"
        text = as_at_011(text)  # a database's options (022) read as their defaults
        if name == "priorities/select_priorities.sql":  # no broker priorities (022) yet
            text = ("SELECT NULL AS name, NULL, NULL, NULL, 5 AS priority, $database_id AS d "
                    "WHERE FALSE")
        return text

    later = ("broker_listeners", "broker_conversation_group_locks", "broker_lock_waits",
             "main.procedures", "conversation_priorities",  # migrations/019, 021, 020, 022
             "server_principals", "database_principals", "broker_permissions",  # and 023's
             "database_master_keys", "remote_service_bindings",
             "sys.service_broker_endpoints", "diagnose(")  # and what reads them
    definitions = storage_schema.catalog_definitions

    def as_at_011(definition: str) -> str:  # sys.databases without 022's columns
        for column in ("is_trustworthy_on", "is_honor_broker_priority_on"):
            definition = definition.replace(f"COALESCE(d.{column}, FALSE)", "FALSE")
        # nor sys.certificates' ALTER CERTIFICATE column (025)
        return definition.replace("COALESCE(c.is_active_for_begin_dialog, TRUE)", "TRUE")

    monkeypatch.setattr(sql_templates, "render", render_as_at_011)
    monkeypatch.setattr(storage_schema, "catalog_definitions", lambda: [  # nor views of them
        as_at_011(d) for d in definitions() if not any(table in d for table in later)])
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        _stock(inst)
        _arrive(inst, _fragments(cid, 0, body, 1_000), seed=3)
        assert _queue_row(inst) == [(1, 5, True)]
        assert "piece_id" not in {c for (c,) in inst.sql(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = 'message_fragments'").fetchall()}
    monkeypatch.undo()
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        assert inst.sql("SELECT count(DISTINCT piece_id), count(*) "
                        "FROM main.message_fragments").fetchone() == (5, 5)
        got = inst.database("Stock").receive("StockQueue")
        assert got[0].message_body == body
        assert inst.sql(KEPT).fetchone() == (0,)


def test_once_a_large_kept_message_is_received_its_pieces_row_group_is_dropped(
        tmp_path, monkeypatch):
    # Store._tidy_pieces: the taken pieces would otherwise stay in their row group, read
    # back at each later COMMIT that adds pieces; with another message's fragments still
    # kept, the checkpoint could not drop it, and none is taken
    monkeypatch.setattr(message_parts, "PIECE_SIZE", 100)
    monkeypatch.setattr("pybroker.storage.store.TIDY_PIECES", 50)
    row_groups = "SELECT count(*) FROM pragma_storage_info('message_fragments')"
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        stock = _stock(inst)
        big = random.Random(10).randbytes(6_000)  # 60 pieces
        cid = str(uuid.uuid4())
        _arrive(inst, _fragments(cid, 0, big, 1_000))
        other = str(uuid.uuid4())
        _arrive(inst, _fragments(other, 0, b"y" * 3_000, 1_000)[:2])  # not all of it
        assert stock.receive("StockQueue")[0].message_body == big
        assert inst.sql(KEPT).fetchone() == (20,)  # the other's pieces: no checkpoint
        assert inst.sql(row_groups).fetchone()[0] > 0
        _arrive(inst, _fragments(other, 0, b"y" * 3_000, 1_000)[2:])
        assert stock.receive("StockQueue")[0].message_body == b"y" * 3_000
        assert inst.sql(KEPT).fetchone() == (0,)  # 90 gone, none left: checkpointed
        assert inst.sql(row_groups).fetchone() == (0,)


def _statements(monkeypatch) -> list[str]:
    """The templates of the statements RECEIVE runs from now on (UnitOfWork.sql)."""
    from pybroker.kernel.messaging.unit_of_work import UnitOfWork
    seen: list[str] = []
    real = UnitOfWork.sql

    def counting(self, template, *args, **kwargs):
        seen.append(template)
        return real(self, template, *args, **kwargs)

    monkeypatch.setattr(UnitOfWork, "sql", counting)
    return seen


@pytest.mark.parametrize("seed", [0, 1])
def test_a_fragment_s_pieces_are_numbered_in_order_and_read_back_a_run_at_a_time(
        tmp_path, monkeypatch, seed):
    # each fragment goes in as its pieces in one statement, their piece_ids following one
    # another; RECEIVE reads READ_RUN_BYTES of them per statement, a run never crossing
    # from one fragment to the next (fragments arrive in any order)
    monkeypatch.setattr(message_parts, "PIECE_SIZE", 100)
    monkeypatch.setattr(message_parts, "READ_RUN_BYTES", 500)
    body = random.Random(11).randbytes(3_000)  # 3 fragments of 10 pieces
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        stock = _stock(inst)
        _arrive(inst, _fragments(str(uuid.uuid4()), 0, body, 1_000), seed=seed)
        rows = inst.sql("SELECT fragment_number, piece_number, piece_id, "
                        "octet_length(message_body) FROM main.message_fragments "
                        "ORDER BY fragment_number, piece_number").fetchall()
        assert [(n, p) for n, p, _, _ in rows] == [(n, p) for n in range(3) for p in range(10)]
        assert {size for *_, size in rows} == {100}
        for n in range(3):
            ids = [i for f, _, i, _ in rows if f == n]
            assert ids == list(range(ids[0], ids[0] + 10))
        seen = _statements(monkeypatch)
        assert stock.receive("StockQueue")[0].message_body == body
        assert seen.count("wire/select_message_pieces.sql") == 6  # 2 runs of 5 a fragment
        assert seen.count("wire/select_message_piece.sql") == 0
        assert inst.sql(KEPT).fetchone() == (0,)


def test_pieces_larger_than_the_kept_size_are_read_one_each_through_the_index(
        tmp_path, monkeypatch):
    # pieces an earlier version cut larger (127 KiB): a range would scan their whole
    # vector, so each is read alone by its piece_id
    body = random.Random(12).randbytes(4_000)
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        stock = _stock(inst)
        monkeypatch.setattr(message_parts, "PIECE_SIZE", 500)
        _arrive(inst, _fragments(str(uuid.uuid4()), 0, body, 2_000))  # 8 pieces of 500
        monkeypatch.setattr(message_parts, "PIECE_SIZE", 100)
        seen = _statements(monkeypatch)
        assert stock.receive("StockQueue")[0].message_body == body
        assert seen.count("wire/select_message_piece.sql") == 8
        assert seen.count("wire/select_message_pieces.sql") == 0


@pytest.mark.parametrize("gone", ["first", "middle", "last"])
def test_a_piece_missing_from_a_run_is_an_error_and_the_message_stays(
        tmp_path, monkeypatch, gone):
    monkeypatch.setattr(message_parts, "PIECE_SIZE", 100)
    body = random.Random(13).randbytes(2_000)
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        stock = _stock(inst)
        _arrive(inst, _fragments(str(uuid.uuid4()), 0, body, 1_000))
        ids = sorted(i for (i,) in inst.sql(
            "SELECT piece_id FROM main.message_fragments WHERE fragment_number = 1"
        ).fetchall())
        victim = {"first": ids[0], "middle": ids[4], "last": ids[-1]}[gone]
        inst.kernel.store._con.execute("DELETE FROM main.message_fragments WHERE piece_id = $1",
                                 [victim])
        with pytest.raises(pybroker.StorageError, match="is missing from message_fragments"):
            stock.receive("StockQueue")
        assert _queue_row(inst) == [(1, 2, True)]
        assert inst.sql(KEPT).fetchone() == (19,)


@given(ids=st.lists(st.integers(0, 60), unique=True, min_size=1, max_size=40).map(sorted)
       | st.permutations(list(range(20))),
       piece=st.integers(1, 300), size_each=st.integers(1, 200))
def test_runs_are_the_longest_that_follow_one_another_within_the_bytes(
        ids, piece, size_each):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(message_parts, "PIECE_SIZE", piece)
        patch.setattr(message_parts, "READ_RUN_BYTES", 1_000)
        runs = list(message_parts._runs(ids, size_each * len(ids)))
    most = 1 if size_each > piece else max(1, 1_000 // size_each)
    assert [i for run in runs for i in run] == ids
    for run in runs:
        assert 1 <= len(run) <= most
        assert run == list(range(run[0], run[0] + len(run)))
    for before, after in itertools.pairwise(runs):  # each cut is needed
        assert after[0] != before[-1] + 1 or len(before) == most


@pytest.mark.parametrize("large", [True, False])
def test_the_file_is_checkpointed_once_a_large_kept_message_is_complete(
        tmp_path, monkeypatch, large):
    # Store.checkpoint_after_commit: the pieces of a large message go from DuckDB's memory
    # to the file before RECEIVE reads them back; a smaller one waits for the next
    # automatic checkpoint
    monkeypatch.setattr(message_parts, "STREAM_FROM", 5_000 if large else 5_001)
    body = random.Random(14).randbytes(5_000)
    wal = tmp_path / "i.duckdb.wal"
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        stock = _stock(inst)
        fragments = _fragments(str(uuid.uuid4()), 0, body, 1_000)
        _arrive(inst, fragments[:-1])
        assert wal.exists() and wal.stat().st_size > 0
        _arrive(inst, fragments[-1:])
        assert _queue_row(inst) == [(1, 5, True)]
        assert (wal.exists() and wal.stat().st_size > 0) is not large
        assert stock.receive("StockQueue")[0].message_body == body


def test_a_rolled_back_arrival_asks_for_no_checkpoint(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        store = inst.kernel.store
        with pytest.raises(RuntimeError), store.transaction():
            store.checkpoint_after_commit()
            raise RuntimeError("roll back")
        assert store._checkpoint_wanted is False


def test_fewer_pieces_than_a_vector_gone_leave_the_file_unchanged(tmp_path, monkeypatch):
    # storage.TIDY_PIECES: the checkpoint that drops the row group waits for 16 MiB of
    # pieces, not for every message received (a 2 MiB message is 256 pieces of 8 KiB)
    monkeypatch.setattr(message_parts, "PIECE_SIZE", 100)
    row_groups = "SELECT count(*) FROM pragma_storage_info('message_fragments')"
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        stock = _stock(inst)
        body = random.Random(15).randbytes(6_000)  # 60 pieces
        _arrive(inst, _fragments(str(uuid.uuid4()), 0, body, 1_000))
        inst.kernel.store._con.execute("CHECKPOINT")
        assert stock.receive("StockQueue")[0].message_body == body
        assert inst.sql(KEPT).fetchone() == (0,)
        assert inst.sql(row_groups).fetchone()[0] > 0  # not checkpointed
        assert inst.kernel.store._pieces_deleted == {"wire/count_message_fragments.sql": 60}



@given(body=st.binary(max_size=400), piece=st.integers(1, 50), per=st.integers(1, 9))
def test_piece_runs_cut_a_body_into_numbered_pieces_a_few_per_statement(body, piece, per):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(message_parts, "PIECE_SIZE", piece)
        patch.setattr(message_parts, "PIECES_PER_STATEMENT", per)
        runs = list(message_parts.piece_runs(body))
    numbers = [n for run in runs for n in run["piece_numbers"]]
    bodies = [b for run in runs for b in run["message_bodies"]]
    assert numbers == list(range(max(1, -(-len(body) // piece))))
    assert b"".join(bodies) == body and all(0 < len(b) <= piece for b in bodies if body)
    assert all(1 <= len(run["piece_numbers"]) == len(run["message_bodies"]) <= per
               for run in runs)
