"""Every kind of result a client gets is the embedded one's: the same type (or, for the
handles of a database and a conversation, a class of the client's own with the same public
attributes), and the main ones behave alike, errors included. The server runs in this process
(``serve_clients`` on a file in tmp_path), and the embedded side is the very instance it
serves, so both read the same state."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import duckdb
import pytest

import pybroker
from pybroker.api.served.client import ClientConversation, ClientDatabase
from pybroker.server.server import serve_clients

# the handles of a database and a conversation: the client's own classes
HANDLES = {"database": ClientDatabase, "databases": ClientDatabase,
           "begin_dialog": ClientConversation}


def public(value: object) -> set[str]:
    return {name for name in dir(value) if not name.startswith("_")}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("served") / "broker.duckdb"
    owner = pybroker.connect(path, worker=False)
    db = owner.create_database("A")
    db.create_queue("q")
    db.create_service("s", "q", ["DEFAULT"])
    db.create_route("r", service_name="far", address="tcp://127.0.0.1:9")
    server = serve_clients(owner)
    client = pybroker.connect(path)
    try:
        yield client, owner
    finally:
        client.close()
        server.close()
        owner.close()


def results(inst: pybroker.Instance, tmp: Path) -> dict[str, object]:
    """One result of each call that returns something, on ``inst``."""
    db = inst.database("A")
    conv = db.begin_dialog("s", "s")
    conv.send(b"hello")
    return {
        "sql": inst.sql("SELECT 1 AS one"),
        "database": db,
        "databases": inst.databases()[0],
        "route": inst.route("s", origin="A"),
        "route_many": inst.route_many([("A", "s", None)])[0],
        "explain": inst.explain("s", origin="A")[0],
        "routes": db.routes()[0],
        "queues": db.queues()[0],
        "services": db.services()[0],
        "message_types": db.message_types()[0],
        "contracts": db.contracts()[0],
        "begin_dialog": conv,
        "receive": db.receive("q", timeout=5)[0],
        "execute": db.execute("DECLARE @x INT = 1; SELECT @x AS x")[0],
        "snapshot": inst.snapshot(tmp / f"{type(inst).__name__}.duckdb", overwrite=True),
        "forwarding": inst.forwarding,
        "max_message_size": inst.max_message_size,
    }


def test_every_result_has_the_embedded_type_and_attributes(pair, tmp_path):
    client, owner = pair
    got, want = results(client, tmp_path), results(owner, tmp_path)
    assert got.keys() == want.keys()
    for call, embedded in want.items():
        through = got[call]
        assert type(through) is HANDLES.get(call, type(embedded)), call
        assert public(through) == public(embedded), call
    assert type(got["sql"]) is duckdb.DuckDBPyRelation


QUERY = ("SELECT name, database_id, is_broker_enabled, service_broker_guid::UUID AS guid "
         "FROM sys.databases ORDER BY database_id")


def shown(relation: duckdb.DuckDBPyRelation) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        relation.show()
    return out.getvalue()


def test_a_query_result_behaves_as_embedded(pair):
    client, owner = pair
    got, want = client.sql(QUERY), owner.sql(QUERY)
    assert got.columns == want.columns and got.types == want.types
    assert got.fetchone() == want.fetchone()
    assert got.fetchall() == want.fetchall()
    assert got.fetchall() == want.fetchall()  # run again, as embedded runs it again
    assert len(got) == len(want) == 3
    assert shown(got) == shown(want)
    assert shown(client.sql("SELECT 1")) == shown(owner.sql("SELECT 1"))
    assert got.filter("database_id > 1").order("name").fetchall() == want.filter(
        "database_id > 1").order("name").fetchall()
    assert got.aggregate("count(*)").fetchall() == want.aggregate("count(*)").fetchall()
    assert str(got.limit(1)) == str(want.limit(1))  # repr: the table as DuckDB prints it


EMPTY = [  # no rows: what a client gets has the embedded columns and types all the same
    "SELECT * FROM sys.transmission_queue",
    "SELECT 1.5::DECIMAL(18, 3) AS d, [1, 2] AS l, {'a': 1} AS s, NULL AS n, "
    "'x'::BLOB AS b, TIMESTAMP '2026-01-02 03:04:05' AS t WHERE false",
    "SELECT * FROM sys.databases WHERE name = ?",
]


@pytest.mark.parametrize("query", EMPTY)
def test_an_empty_result_behaves_as_embedded(pair, query):
    client, owner = pair
    params = ["none"] if "?" in query else None
    got, want = client.sql(query, params), owner.sql(query, params)
    assert got.columns == want.columns and got.types == want.types
    assert got.fetchall() == want.fetchall() == []
    assert shown(got) == shown(want)
    assert str(got) == str(want)
    assert got.filter("true").aggregate("count(*)").fetchall() == [(0,)]


def test_sql_rows_are_what_sql_gives_fetched(pair):
    client, owner = pair
    for query in (QUERY, EMPTY[1], "SELECT 1 AS one, 'a' AS two"):
        columns, types, rows = owner.sql_rows(query)
        assert client.sql_rows(query) == (columns, types, rows)
        relation = owner.sql(query)
        assert columns == relation.columns
        assert types == [str(t) for t in relation.types]
        assert rows == relation.fetchall()
    refused = []
    for run in (owner.sql, owner.sql_rows):  # refused alike, with the same words
        with pytest.raises(pybroker.InvalidArgumentError) as raised:
            run("DELETE FROM routes")
        refused.append(str(raised.value))
    assert refused[0] == refused[1]


def test_a_failure_while_fetching_is_the_same_refusal_through_a_client(pair):
    client, owner = pair
    failing = "SELECT CAST(name AS INTEGER) FROM sys.databases"  # fails as it runs
    with pytest.raises(duckdb.Error):
        owner.sql(failing).fetchall()
    with pytest.raises(pybroker.InvalidArgumentError, match="the query failed: Conversion"):
        client.sql(failing)
    with pytest.raises(pybroker.InvalidArgumentError, match="the query failed: Conversion"):
        owner.sql_rows(failing)


def test_a_query_result_fails_as_embedded(pair):
    client, owner = pair
    errors = []
    for inst in (client, owner):
        with pytest.raises(duckdb.Error) as raised:
            inst.sql(QUERY).filter("no_such_column > 1").fetchall()
        errors.append((type(raised.value), str(raised.value).splitlines()[0]))
    assert errors[0] == errors[1]
    for inst in (client, owner):  # what Instance.sql refuses, refused alike
        with pytest.raises(pybroker.InvalidArgumentError, match="the query failed"):
            inst.sql("SELECT no_such_column FROM sys.databases")


def test_a_result_ends_with_its_instance_as_embedded(tmp_path):
    path = tmp_path / "ends.duckdb"
    owner = pybroker.connect(path, worker=False)
    server = serve_clients(owner)
    client = pybroker.connect(path)
    got = client.sql("SELECT 1")
    client.close()
    with pytest.raises(duckdb.ConnectionException):
        got.fetchall()
    server.close()
    want = owner.sql("SELECT 1")
    owner.close()
    with pytest.raises(duckdb.ConnectionException):
        want.fetchall()


def test_a_parameter_duckdb_cannot_bind_is_refused_alike(pair):
    client, owner = pair
    query = "SELECT ? AS x"
    for run in (owner.sql, owner.sql_rows):  # a lone surrogate is no UTF-8
        with pytest.raises(pybroker.InvalidArgumentError,
                           match="params cannot be bound to the query"):
            run(query, ["\ud800"])
    with pytest.raises(pybroker.InvalidArgumentError, match="params must be a list"):
        client.sql(query, "x")
