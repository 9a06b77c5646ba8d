"""The shell's route DDL (create-route, alter-route, drop-route) and its listings of what
an instance holds (services, queues, conversations, messages QUEUE), as real processes and
through main(): what they print, as a table and as JSON, their one-line errors, that a
route is checked exactly as the API checks it, and that a listing opens the file
read-only."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.core.conversation.model import STATUS_NO_ROUTE
from tests.cli_helpers import call, rows_digest, run

pytestmark = pytest.mark.cli

ERROR = "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
GENERATED = settings(max_examples=20, derandomize=True, deadline=None, database=None,
                     phases=[Phase.explicit, Phase.generate],  # each example changes a file
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])






def build(path: Path, *, waiting: bool = True) -> dict[str, str]:
    """Shop's ShopService sends to Stock's StockService (one message in StockQueue), to a
    service that accepts no contract (refused: an Error in ShopQueue) and, if ``waiting``,
    to a misspelt one (waiting in Shop's transmission queue, to be retried when a process
    opens the file for writing). Returns the handles by what befell them."""
    with pybroker.connect(path, worker=False) as inst:
        shop, stock = inst.create_database("Shop"), inst.create_database("Stock")
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
        stock.create_queue("StockQueue")
        stock.create_queue("Idle", status=False)
        stock.create_service("StockService", queue="StockQueue", contracts=["DEFAULT"])
        stock.create_service("Starter", queue="Idle")
        handles = {}
        for what, to, body in (("delivered", "StockService", "hello"),
                               ("refused", "Starter", "no"),
                               ("waiting", "StockSevice", b"\x94binary")):
            if what == "waiting" and not waiting:
                break
            conversation = shop.begin_dialog("ShopService", to)
            conversation.send(body)
            handles[what] = conversation.handle
    return handles


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("catalog") / "f.duckdb"
    return path, build(path)


@pytest.fixture(scope="module")
def settled(tmp_path_factory) -> Path:
    """As built, but with nothing due: opening it for writing changes nothing by itself."""
    path = tmp_path_factory.mktemp("settled") / "f.duckdb"
    build(path, waiting=False)
    return path


# -- routes ------------------------------------------------------------------------------


def test_routes_made_changed_and_dropped_from_the_shell(tmp_path):
    path = tmp_path / "f.duckdb"
    build(path)
    guid = "5fb8d92b-ed69-4c80-afbb-2aa6a7d3cb2d"
    done = run("create-route", path, "-d", "Shop", "Parts", "--service-name", "Parts",
               "--broker-instance", guid, "--address", "tcp://parts:4022")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (f"created route Parts in Shop: SERVICE_NAME = 'Parts', "
                           f"BROKER_INSTANCE = '{guid}', ADDRESS = 'tcp://parts:4022'\n")
    done = run("alter-route", path, "-d", "Shop", "Parts", "--address", "tcp://p2:4022",
               "--broker-instance", "")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == ("altered route Parts in Shop: SERVICE_NAME = 'Parts', "
                           "ADDRESS = 'tcp://p2:4022'\n")
    listed = run("routes", path, "-d", "Shop", "--json")
    parts = [r for r in json.loads(listed.stdout) if r["name"] == "Parts"]
    assert [(r["remote_service_name"], r["broker_instance"], r["address"]) for r in parts] == [
        ("Parts", None, "tcp://p2:4022")]
    decided = json.loads(run("route", path, "Parts", "--origin", "Shop", "--json").stdout)
    assert (decided["outcome"], decided["route"], decided["address"]) == (
        "send", "Parts", "tcp://p2:4022")
    done = run("drop-route", path, "-d", "Shop", "Parts")
    assert (done.returncode, done.stdout, done.stderr) == (0, "dropped route Parts from "
                                                           "Shop\n", "")
    listed = run("routes", path, "-d", "Shop", "--json")
    assert [r["name"] for r in json.loads(listed.stdout)] == ["AutoCreatedLocal"]


def test_a_route_with_a_lifetime_shows_when_it_expires(tmp_path, capsys):
    path = tmp_path / "f.duckdb"
    build(path)
    code, out, err = call(["create-route", path, "-d", "msdb", "Out", "--address",
                           "TRANSPORT", "--lifetime", "3600"], capsys)
    assert (code, err) == (0, "")
    with pybroker.connect(path, read_only=True) as inst:
        route = inst.database("msdb").route("Out")
    assert route.lifetime is not None and not route.is_expired
    assert out == (f"created route Out in msdb: LIFETIME = until "
                   f"{route.lifetime.isoformat(sep=' ', timespec='seconds')} UTC, "
                   "ADDRESS = 'TRANSPORT'\n")


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["create-route", "{file}", "-d", "Nope", "R", "--address", "LOCAL"], 1,
     "error: database 'Nope' does not exist in this instance"),
    (["create-route", "{file}", "-d", "Shop", "R", "--address", "http://parts"], 1,
     "error: ADDRESS 'http://parts' is none of 'LOCAL', 'TRANSPORT' or tcp://host:port: a "
     "network address begins with tcp://"),
    (["create-route", "{file}", "-d", "Shop", "AutoCreatedLocal", "--address", "LOCAL"], 1,
     "error: route 'AutoCreatedLocal' already exists in database 'Shop' (route names are "
     "unique per database)"),
    (["create-route", "{file}", "-d", "Shop", "R"], 2,
     "the following arguments are required: --address"),
    (["create-route", "{file}", "-d", "Shop", "R", "--address", "LOCAL", "--lifetime", "x"],
     2, "argument --lifetime: 'x' is not a whole number"),
    (["alter-route", "{file}", "-d", "Shop", "Nope", "--address", "LOCAL"], 1,
     "error: route 'Nope' does not exist in database 'Shop'"),
    (["alter-route", "{file}", "-d", "Shop", "AutoCreatedLocal", "--address", "tcp://x"], 1,
     "error: ADDRESS 'tcp://x' is none of"),
    (["alter-route", "{file}", "-d", "Shop", "AutoCreatedLocal"], 2,
     "usage error: give at least one clause to change: --service-name, --broker-instance, "
     "--address, --mirror-address or --lifetime"),
    (["drop-route", "{file}", "-d", "Shop", "Nope"], 1,
     "error: route 'Nope' does not exist in database 'Shop'"),
    (["drop-route", "{file}", "-d", "Nope", "R"], 1, "error: database 'Nope' does not exist"),
    (["services", "{file}", "-d", "Nope"], 1, "error: database 'Nope' does not exist"),
    (["queues", "{file}", "-d", "Nope"], 1, "error: database 'Nope' does not exist"),
    (["conversations", "{file}", "-d", "Nope"], 1, "error: database 'Nope' does not exist"),
    (["messages", "{file}", "-d", "Nope", "StockQueue"], 1,
     "error: database 'Nope' does not exist"),
    (["messages", "{file}", "-d", "Stock", "StockQueu"], 1,
     "error: queue 'StockQueu' does not exist in database 'Stock' (did you mean "
     "'StockQueue'?); see its queues: pybroker queues {file} -d Stock"),
    (["messages", "{file}", "-d", "Shop", "StockQueue"], 1,
     "error: queue 'StockQueue' does not exist in database 'Shop'; see its queues"),
    (["messages", "{file}", "StockQueue"], 2, "the following arguments are required: -d"),
])
def test_errors_are_one_line_and_change_nothing(settled, capsys, argv, code, message):
    path = settled
    before = rows_digest(path)
    done = call([a.format(file=path) for a in argv], capsys)
    assert done[:2] == (code, "")
    assert done[2].startswith("pybroker: ") and done[2].count("\n") == 1, done[2]
    assert message.format(file=path) in done[2]
    assert rows_digest(path) == before


# Route names and addresses as a user may type them; the address mostly near a good one.
NAMES = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
ADDRESSES = st.one_of(
    st.sampled_from(["LOCAL", "TRANSPORT", "local", "tcp://", "tcp://h", "tcp://h:0"]),
    st.builds(lambda host, port: f"tcp://{host}:{port}",
              st.text(st.characters(whitelist_categories=("L", "Nd", "P")), max_size=12),
              st.integers(-1, 70000)),
    st.text(max_size=20))


@pytest.fixture(scope="module")
def route_pair(tmp_path_factory):
    """A file the shell changes, and an instance in memory the API changes alike."""
    path = tmp_path_factory.mktemp("routes") / "f.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        inst.create_database("Shop")
    with pybroker.connect(None, worker=False) as api:
        api.create_database("Shop")
        yield path, api.database("Shop")


@GENERATED
@given(name=NAMES, address=ADDRESSES, service=st.one_of(st.none(), NAMES))
def test_create_route_checks_a_route_as_the_api_does(route_pair, capsys, name, address,
                                                     service):
    path, api = route_pair
    try:
        made = api.create_route(name, service_name=service, address=address)
        refused = None
    except pybroker.BrokerError as exc:
        refused = " ".join(str(exc).split())
    before = rows_digest(path)
    options = [f"--address={address}"] + ([] if service is None else [
        f"--service-name={service}"])
    code, out, err = call(["create-route", *options, "-d", "Shop", "--", path, name], capsys)
    if refused is not None:
        assert (code, out, err) == (1, "", f"pybroker: error: {refused}\n")
        assert rows_digest(path) == before
        return
    assert (code, err) == (0, ""), err
    assert out.startswith(f"created route {name} in Shop: ")
    code, out, _ = call(["routes", path, "-d", "Shop", "--json"], capsys)
    [row] = [r for r in json.loads(out) if r["name"] == name]
    assert (row["address"], row["remote_service_name"]) == (
        made.address, made.remote_service_name)


# -- listings ----------------------------------------------------------------------------


def test_services_and_queues_as_a_table_and_as_json(built, capsys):
    path, _ = built
    code, out, err = call(["services", path], capsys)
    assert (code, err) == (0, "")
    assert [line.split() for line in out.splitlines()] == [
        ["database", "name", "queue", "contracts"],
        ["Shop", "ShopService", "ShopQueue", "-"],
        ["Stock", "Starter", "Idle", "-"],
        ["Stock", "StockService", "StockQueue", "DEFAULT"]]
    code, out, _ = call(["services", path, "-d", "Stock", "--json"], capsys)
    assert json.loads(out) == [
        {"database": "Stock", "name": "Starter", "queue": "Idle", "contracts": []},
        {"database": "Stock", "name": "StockService", "queue": "StockQueue",
         "contracts": ["DEFAULT"]}]
    code, out, _ = call(["queues", path, "--json"], capsys)
    assert [(q["database"], q["name"], q["status"], q["ready"], q["messages"])
            for q in json.loads(out)] == [
        ("Shop", "ShopQueue", "ON", 1, 1),  # the refusal's Error
        ("Stock", "Idle", "OFF", 0, 0), ("Stock", "StockQueue", "ON", 1, 1)]
    code, out, _ = call(["queues", path, "-d", "Stock"], capsys)
    assert out.splitlines()[0].split() == [
        "database", "name", "status", "retention", "activation", "activation_procedure",
        "max_queue_readers", "ready", "messages"]
    assert out.splitlines()[1].split() == ["Stock", "Idle", "OFF", "OFF", "OFF", "NULL", "0",
                                           "0", "0"]


def test_conversations_show_state_error_and_what_waits(built, capsys):
    path, handles = built
    code, out, err = call(["conversations", path, "-d", "Shop", "--json"], capsys)
    assert (code, err) == (0, "")
    rows = {r["conversation_handle"]: r for r in json.loads(out)}
    assert set(rows) == set(handles.values())
    seen = {what: (rows[h]["far_service"], rows[h]["state"], rows[h]["error_code"],
                   rows[h]["waiting"], rows[h]["transmission_status"])
            for what, h in handles.items()}
    assert seen == {
        "delivered": ("StockService", "CONVERSING", None, 0, None),
        "refused": ("Starter", "ERROR", -8408, 0, None),
        "waiting": ("StockSevice", "CONVERSING", None, 1, STATUS_NO_ROUTE)}
    code, out, _ = call(["conversations", path], capsys)
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["database", "conversation_handle", "is_initiator",
                                    "service"]
    assert [line.split()[0] for line in lines[1:]] == ["Shop"] * 3 + ["Stock"]


def test_messages_of_a_queue_with_bodies_as_text_or_hex(built, capsys):
    path, handles = built
    code, out, err = call(["messages", path, "-d", "Stock", "StockQueue", "--json"], capsys)
    assert (code, err) == (0, "")
    [message] = json.loads(out)
    assert (message["status"], message["message_sequence_number"], message["message_body"],
            message["message_size"]) == ("READY", 0, "hello", 5)
    code, out, _ = call(["messages", path, "-d", "Shop", "ShopQueue", "--json"], capsys)
    [error] = json.loads(out)
    assert (error["conversation_handle"], error["message_type_name"]) == (
        handles["refused"], ERROR)
    assert "<Code>-8408</Code>" in error["message_body"]
    code, out, _ = call(["messages", path, "-d", "Shop", "ShopQueue"], capsys)
    body = out.splitlines()[1].split("  ")[-1].strip()
    assert len(body) == 60 and body.endswith("...")  # a table shows the start of a body
    assert error["message_body"].startswith(body[:-3])
    code, out, _ = call(["messages", path, "-d", "Stock", "Idle"], capsys)
    assert (code, out) == (0, "(none)\n")


def test_a_binary_body_shows_as_hex(tmp_path, capsys):
    path = tmp_path / "f.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        db = inst.create_database("Shop")
        db.create_queue("Q")
        db.create_service("S", queue="Q", contracts=["DEFAULT"])
        db.begin_dialog("S", "S").send(b"\x94\x00")
    code, out, _ = call(["messages", path, "-d", "Shop", "Q", "--json"], capsys)
    assert code == 0
    assert [m["message_body"] for m in json.loads(out)] == ["0x9400"]


def test_listings_open_the_file_read_only(built):
    path, _ = built
    reader = duckdb.connect(str(path), read_only=True)  # a writer would be refused now
    try:
        refused = run("create-queue", path, "-d", "Shop", "Another")
        assert refused.returncode == 1 and "already open in another process" in refused.stderr
        for argv in (["services", path], ["queues", path], ["conversations", path],
                     ["messages", path, "-d", "Stock", "StockQueue"]):
            done = run(*argv)
            assert (done.returncode, done.stderr) == (0, ""), argv
            assert done.stdout.startswith(("database", "status")), argv
    finally:
        reader.close()


def test_a_listing_prints_one_table_line_per_row_whatever_a_value_holds():
    from pybroker.cli.support import print_rows

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_rows([{"a": "two\nlines", "b": ["x", "y"], "c": None}], as_json=False)
    assert out.getvalue().splitlines() == ["a          b     c", "two lines  x, y  NULL"]
