"""Batches of rows bound as one string (pybroker/core/conversation/columns.py): whatever the
values, a batch written through its template on a real DuckDB file reads back as it went
(the queue rows of a SEND or an arrival batch, the transmission-queue rows of a SEND)."""

from __future__ import annotations

import base64
import uuid
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.core.conversation import columns
from pybroker.kernel.messaging.unit_of_work import (
    _QUEUE_COLUMNS,
    _TX_COLUMNS,
    _queue_columns,
    _tx_columns,
)
from pybroker.storage.store import Store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    opened = Store(tmp_path_factory.mktemp("columns") / "i.duckdb")
    yield opened
    opened.close()


# what no encoding may trip over: the separators, NULL's mark, quotes, any code point
NAMES = st.text(min_size=0, max_size=12) | st.sampled_from([",", ";", "~", ",;~", "'\""])
BODIES = st.none() | st.binary(max_size=300)
GUIDS = st.builds(lambda: str(uuid.uuid4()))
TIMES = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1))
BIGINTS = st.integers(-2**63, 2**63 - 1)
TINY = st.integers(-128, 127)
VALIDATION = st.sampled_from(["N", "E", "X"])

QUEUE_ROWS = st.lists(st.tuples(
    st.integers(-2**31, 2**31 - 1), NAMES, BIGINTS, TINY, TINY, GUIDS, GUIDS, BIGINTS,
    NAMES, NAMES, NAMES, VALIDATION, BODIES, TIMES), min_size=1, max_size=8)
TX_ROWS = st.lists(st.tuples(
    st.integers(-2**31, 2**31 - 1), GUIDS, BIGINTS, BIGINTS, NAMES, st.none() | GUIDS,
    NAMES, NAMES, NAMES, VALIDATION, st.booleans(), st.booleans(), TINY, TIMES, BODIES,
    NAMES), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(rows=QUEUE_ROWS)
def test_queue_rows_packed_in_one_string_read_back_as_they_went(store, rows):
    with store.transaction():
        store.run("conversation/insert_queue_messages.sql", _queue_columns(rows))
        back = store.fetchall(
            f"SELECT {', '.join(_QUEUE_COLUMNS)} FROM queue_messages "
            "ORDER BY rowid")
        store.execute("DELETE FROM queue_messages")
    assert back == rows


@settings(max_examples=150, deadline=None)
@given(rows=TX_ROWS, inbound=st.booleans())
def test_transmission_rows_packed_in_one_string_read_back_as_they_went(store, rows, inbound):
    with store.transaction():
        store.run("conversation/insert_transmission_queue.sql",
                  {**_tx_columns(rows), "is_inbound": inbound})
        back = store.fetchall(
            f"SELECT {', '.join(_TX_COLUMNS[:-1])}, transmission_status, is_inbound, "
            "fragment_number, fragment_count FROM transmission_queue ORDER BY rowid")
        store.execute("DELETE FROM transmission_queue")
    assert back == [(*row, inbound, 0, 1) for row in rows]


def test_packed_joins_each_rows_values_and_then_the_rows():
    assert columns.packed(["1", "2"], ["a", "b"], ["~", "x"]) == "1,a,~;2,b,x"


def test_columns_of_different_lengths_are_refused_not_cut_short():
    with pytest.raises(ValueError):
        columns.packed(["1", "2"], ["a"])


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.none() | st.booleans() | BIGINTS, max_size=20))
def test_a_column_of_integers_encodes_each_value_as_one_at_a_time(values):
    assert list(columns.int_fields(values)) == [columns.int_field(v) for v in values]
    assert columns.ints(iter(values)) == ",".join(map(columns.int_field, values))


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.none() | NAMES, max_size=20),
       times=st.lists(st.none() | TIMES, max_size=20),
       guids=st.lists(st.none() | GUIDS, max_size=20),
       bodies=st.lists(BODIES, max_size=20))
def test_the_other_columns_encode_each_value_as_one_at_a_time(texts, times, guids, bodies):
    assert list(columns.text_fields(texts)) == [columns.text_field(v) for v in texts]
    assert list(columns.time_fields(times)) == [columns.time_field(v) for v in times]
    assert list(columns.guid_fields(guids)) == [columns.guid_field(v) for v in guids]
    assert list(columns.blob_fields(bodies)) == [columns.blob_field(v) for v in bodies]
    assert columns.texts(iter(texts)) == ",".join(map(columns.text_field, texts))
    assert columns.blobs(iter(bodies)) == ",".join(
        "~" if b is None else base64.b64encode(b).decode("ascii") for b in bodies)


POOL = [str(uuid.UUID(int=i)) for i in (1, 2, 3)]
PAIRS = st.sets(st.tuples(st.sampled_from(POOL), st.integers(0, 40)), max_size=40)


@settings(max_examples=100, deadline=None)
@given(sent=PAIRS, acked=PAIRS, inbound=st.booleans())
def test_acknowledged_messages_leave_as_runs_exactly_those(store, sent, acked, inbound):
    """P5.2: columns.runs makes runs of consecutive sequence numbers per endpoint of the
    acknowledged pairs (each pair once, whatever their order); the DELETE of
    wire/delete_acknowledged.sql takes exactly those messages, not an inbound one."""
    pairs = sorted(acked) + sorted(acked)[:3]  # repeated pairs count once
    runs = columns.runs(reversed(pairs))
    firsts = [int(x) for x in runs["first_sequence"].split(",")] if acked else []
    lasts = [int(x) for x in runs["last_sequence"].split(",")] if acked else []
    assert sum(b - a + 1 for a, b in zip(firsts, lasts, strict=True)) == len(acked)
    rows = [(1, h, s, 3, "T", None, "F", "C", "M", "N", False, False, 5,
             datetime(2026, 1, 1), b"abc", "") for h, s in sorted(sent)]
    with store.transaction():
        if rows:
            store.run("conversation/insert_transmission_queue.sql",
                      {**_tx_columns(rows), "is_inbound": inbound})
        if acked:
            store.run("wire/delete_acknowledged.sql", runs)
        left = set(store.fetchall("SELECT conversation_handle::VARCHAR, "
                                  "message_sequence_number FROM transmission_queue"))
        store.execute("DELETE FROM transmission_queue")
    assert left == (sent if inbound else sent - acked)
