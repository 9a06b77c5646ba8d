"""Through a client, the API answers as embedded: the same results, and for arguments it
refuses the same error class with the same message and attributes. The server runs in
this process (``serve_clients`` on a file in tmp_path); the embedded twin is an
in-memory instance built the same way."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.errors import BrokerError, InvalidArgumentError
from pybroker.server.server import serve_clients


def build(inst: pybroker.Instance) -> None:
    db = inst.create_database("A", broker_instance="11111111-2222-3333-4444-555555555555")
    db.create_queue("q")
    db.create_service("s", "q", ["DEFAULT"])
    db.create_route("r", service_name="far", address="tcp://example.com:4022")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("served") / "broker.duckdb"
    owner = pybroker.connect(path, worker=False)
    build(owner)
    server = serve_clients(owner)
    client = pybroker.connect(path)
    twin = pybroker.connect(worker=False)
    build(twin)
    try:
        yield client, twin
    finally:
        client.close()
        server.close()
        owner.close()
        twin.close()


def outcome(call):
    """What a call gives: ("ok", result) or ("error", class, message, attributes)."""
    try:
        return ("ok", call())
    except BrokerError as exc:
        return ("error", type(exc), str(exc), {k: v for k, v in vars(exc).items()})


def same(client, twin, call) -> None:
    assert outcome(lambda: call(client)) == outcome(lambda: call(twin))


names = st.text(max_size=140) | st.sampled_from(["q", "Q", "s", "A", "a", "r", "", " "])
relaxed = settings(max_examples=40, deadline=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture])


@relaxed
@given(names)
def test_database_lookup(pair, name):
    client, twin = pair
    assert outcome(lambda: client.database(name).name) == outcome(
        lambda: twin.database(name).name)


@relaxed
@given(names, st.integers(-5, 3) | st.just(2**40), st.floats(-1, 0.01) | st.just(float("inf")))
def test_receive_arguments(pair, queue, max_messages, timeout):
    client, twin = pair
    same(client, twin, lambda i: i.database("A").receive(
        queue, max_messages=max_messages, timeout=timeout))


@relaxed
@given(names, names)
def test_route_decisions_and_their_refusals(pair, service, origin):
    client, twin = pair
    same(client, twin, lambda i: i.route(service, origin=origin))
    same(client, twin, lambda i: [s.step for s in i.explain(service, origin=origin)])


@relaxed
@given(names, st.text(max_size=40))
def test_route_definitions(pair, name, address):
    client, twin = pair
    same(client, twin, lambda i: i.database("A").create_route(name, address=address))


@relaxed
@given(st.text(max_size=200))
def test_tsql(pair, tsql):
    client, twin = pair
    same(client, twin, lambda i: i.database("A").execute(tsql))


def test_conversation_errors_and_states(pair):
    client, twin = pair
    for inst in pair:
        db = inst.database("A")
        conv = db.begin_dialog("s", "s")
        assert conv.state == "SO" and conv.is_initiator
        conv.end()
        assert conv.state == "CD"
    same(client, twin, lambda i: i.database("A").conversation("no-such-handle"))
    same(client, twin, lambda i: i.database("A").begin_dialog("s", "nowhere", contract="X"))
    same(client, twin, lambda i: i.database("A").begin_dialog("s", "s").send(
        b"x", message_type="nope"))


def test_wrong_arguments_raise_the_embedded_type_error_before_anything_is_sent(pair):
    client, _ = pair
    with pytest.raises(TypeError):
        client.database("A").receive()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        client.route("s", "A")  # type: ignore[misc]
    with pytest.raises(InvalidArgumentError, match="cannot travel"):
        client.database("A").create_queue(object())  # type: ignore[arg-type]


def test_sql_gives_rows_with_their_columns(pair):
    client, twin = pair
    query = "SELECT name, database_id FROM sys.databases ORDER BY database_id"
    rows = client.sql(query)
    assert rows.columns == ["name", "database_id"]
    assert rows.fetchall() == twin.sql(query).fetchall()
    same(client, twin, lambda i: i.sql("DELETE FROM sys.databases"))
    same(client, twin, lambda i: i.sql("SELECT * FROM no_such_table").fetchall())
