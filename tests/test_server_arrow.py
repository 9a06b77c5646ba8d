"""``sql(...).arrow()`` through a client gives the Arrow data an embedded caller gets from
DuckDB for the same query: the same columns, types and values (both are DuckDB relations,
pybroker.api.served.rows). The server runs in this
process (``serve_clients`` on a file in tmp_path); the embedded side is the very instance
it serves, so both read the same rows."""

from __future__ import annotations

import sys
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.server.server import serve_clients

pa = pytest.importorskip("pyarrow")

ENDPOINTS = "SELECT * FROM sys.conversation_endpoints ORDER BY conversation_handle"
TRANSMISSION = ("SELECT * FROM sys.transmission_queue "
                "ORDER BY conversation_handle, message_sequence_number")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("served") / "broker.duckdb"
    owner = pybroker.connect(path, worker=False)  # nothing is sent on: rows stay queued
    db = owner.create_database("A", broker_instance="11111111-2222-3333-4444-555555555555")
    db.create_queue("q")
    db.create_service("s", "q", ["DEFAULT"])
    db.create_route("r", service_name="far", address="tcp://127.0.0.1:9")
    with db.transaction():
        for i in range(3):
            db.begin_dialog("s", "far").send(bytes([i]) * 40)
        db.begin_dialog("s", "s").send("local")
    server = serve_clients(owner)
    client = pybroker.connect(path)
    try:
        yield client, owner
    finally:
        client.close()
        server.close()
        owner.close()


def embedded_table(inst, query, params=None):
    result = inst.sql(query, params).arrow()
    # DuckDB 1.5 gives a RecordBatchReader, older versions a Table
    return result.read_all() if hasattr(result, "read_all") else result


client_table = embedded_table  # the same call on a client


def test_the_catalog_views_come_as_the_embedded_arrow_table(pair):
    client, owner = pair
    for query, rows in ((ENDPOINTS, 5), (TRANSMISSION, 3)):
        got, want = client_table(client, query), embedded_table(owner, query)
        assert isinstance(got, pa.Table)
        assert got.num_rows == rows, query  # the fixture's conversations and messages
        assert got.schema == want.schema, query
        assert got.to_pylist() == want.to_pylist(), query
    body = client_table(client, TRANSMISSION).column("message_body").to_pylist()
    assert sorted(body) == [bytes([i]) * 40 for i in range(3)]


def test_no_rows_still_have_their_column_types(pair):
    client, owner = pair
    query = "SELECT * FROM sys.transmission_queue WHERE false"
    got, want = client_table(client, query), embedded_table(owner, query)
    assert got.num_rows == 0
    assert got.schema == want.schema


def test_arrow_after_a_fetch_is_as_embedded(pair):
    client, owner = pair
    got, want = client.sql(ENDPOINTS), owner.sql(ENDPOINTS)
    assert got.fetchone() == want.fetchone()
    assert got.to_arrow_table().num_rows == want.to_arrow_table().num_rows


SCALARS = """SELECT 1::TINYINT a, 2::SMALLINT b, 3::INTEGER c, 4::BIGINT d,
    -12345678901234567890123456789::HUGEINT e, 6::UTINYINT f, 7::UBIGINT g,
    1.5::FLOAT h, 2.5::DOUBLE i, 1.25::DECIMAL(10,2) j, 'x' k, 'ab'::BLOB l,
    DATE '2020-01-02' m, TIME '01:02:03' n, TIMESTAMP '2020-01-02 03:04:05.123456' o,
    '6e8a6a3c-7a5f-4a8e-9d1e-0c3f4b5a6d7e'::UUID q, INTERVAL 3 DAY r, [1, NULL, 2] s,
    [['a'], []] t, TRUE u, NULL::VARCHAR v, TIMESTAMP_MS '2020-01-01 00:00:01' y,
    ['6e8a6a3c-7a5f-4a8e-9d1e-0c3f4b5a6d7e'::UUID] w, NULL::UUID x"""


def test_scalar_types_and_lists_of_them_match_the_embedded_export(pair):
    client, owner = pair
    got, want = client_table(client, SCALARS), embedded_table(owner, SCALARS)
    assert got.schema == want.schema
    assert got.to_pylist() == want.to_pylist()


def test_a_time_zone_column_holds_the_same_instants(pair):
    client, owner = pair
    query = "SELECT TIMESTAMPTZ '2020-01-02 03:04:05.5+02' AS at"
    got, want = client_table(client, query), embedded_table(owner, query)
    assert pa.types.is_timestamp(got.schema.field("at").type)
    assert got.schema.field("at").type.tz is not None
    assert got.to_pylist() == want.to_pylist()


values = st.tuples(
    st.none() | st.integers(-(2**63), 2**63 - 1),
    st.none() | st.text(st.characters(blacklist_categories=("Cs",)), max_size=30),
    st.none() | st.binary(max_size=30),
    st.none() | st.booleans(),
    st.none() | st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)),
    st.none() | st.floats(allow_nan=False),
)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(values, max_size=4))
def test_any_values_come_as_embedded(pair, rows):
    client, owner = pair
    if rows:
        query = "FROM (VALUES " + ", ".join(
            "(?::BIGINT, ?::VARCHAR, ?::BLOB, ?::BOOLEAN, ?::TIMESTAMP, ?::DOUBLE)"
            for _ in rows) + ") AS v(i, t, b, f, ts, d)"
        params = [v for row in rows for v in row]
    else:
        query, params = "SELECT 1::BIGINT AS i WHERE false", None
    got, want = client_table(client, query, params), embedded_table(owner, query, params)
    assert got.schema == want.schema
    assert got.to_pylist() == want.to_pylist()


def test_without_pyarrow_the_error_is_the_embedded_one(pair, monkeypatch):
    client, owner = pair
    got, want = client.sql(ENDPOINTS), owner.sql(ENDPOINTS)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # what an import of it finds: none
    errors = []
    for rows in (got, want):
        with pytest.raises(Exception) as raised:
            rows.arrow()
        errors.append((type(raised.value), str(raised.value)))
    assert errors[0] == errors[1]
    assert len(got.fetchall()) == 5  # the rows are still there
