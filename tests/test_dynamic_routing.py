"""Dynamic routing end to end (SPEC R2.4, R8): route requests sent by the broker, answered
by the ready-made configuration service (pybroker/apps/configuration_service.py), in
one instance with a fake clock and no worker (the tests drive the delay/retry loop)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pybroker
from pybroker.apps.configuration_service import (
    NO_ROUTE_KNOWN,
    ConfigurationService,
    RouteAnswer,
    route_name,
)
from pybroker.core.conversation.system_messages import (
    BROKER_CONFIGURATION_NOTICE,
    MISSING_ROUTE,
    ROUTE_REQUEST_QUEUE,
    ROUTE_REQUEST_SERVICE,
    missing_route_body,
    parse_missing_route,
)
from pybroker.kernel.messaging.route_requests import ANSWERED_TIMEOUT

DYNAMIC = "SQL/ServiceBroker/BrokerConfiguration"
SCALE = 0.001
TIMEOUT = ANSWERED_TIMEOUT * SCALE  # seconds after an answer before asking again


@pytest.fixture
def inst(clock):
    with pybroker.connect(clock=clock, worker=False, retry_scale=SCALE) as instance:
        yield instance


def build(inst, directory, *, wildcard=False):
    """A (asks, routes dynamically), B (holds the missing services), C (configuration
    service). Without ``wildcard`` A has no AutoCreatedLocal, so only a route the
    configuration service creates leads to B."""
    a = inst.create_database("A")
    b = inst.create_database("B")
    c = inst.create_database("C")
    a.create_queue("q")
    a.create_service("Init", "q")
    b.create_queue("q")
    for name in ("Missing", "Other"):
        b.create_service(name, "q", ["DEFAULT"])
    if not wildcard:
        a.drop_route("AutoCreatedLocal")
    service = ConfigurationService(directory, lifetime=600)
    service.install(c)
    a.create_route("Dyn", service_name=DYNAMIC, address="LOCAL")
    return a, b, c, service


def begin(a, service, count):
    for i in range(count):
        a.begin_dialog("Init", service).send(f"m{i}")


def count(inst, query, *params):
    return inst.sql(query, list(params)).fetchall()[0][0]


def requests_queued(inst):
    """Route requests that reached the configuration service's queue and wait there."""
    return count(inst, "SELECT count(*) FROM sys.queue_messages WHERE message_type_name = ?",
                 MISSING_ROUTE)


def waiting(inst, service):
    return count(inst, "SELECT count(*) FROM sys.transmission_queue WHERE to_service_name = ?",
                 service)


def delivered(inst, service):
    return count(inst, "SELECT count(*) FROM sys.queue_messages WHERE service_name = ? "
                 "AND message_type_name = 'DEFAULT'", service)


def test_many_waiting_conversations_make_one_request_and_the_answer_delivers_them(inst):
    a, _b, c, service = build(inst, {"Missing": "LOCAL"})
    begin(a, "Missing", 100)
    # R2.4 / R8.2: one request however many conversations wait; all of them DELAYED
    assert requests_queued(inst) == 1
    assert waiting(inst, "Missing") == 100
    assert inst.sql("SELECT service_name FROM route_requests").fetchall() == [("Missing",)]
    (body,) = inst.sql("SELECT message_body FROM sys.queue_messages WHERE "
                       "message_type_name = ?", [MISSING_ROUTE]).fetchall()[0]
    assert parse_missing_route(bytes(body)) == "Missing"
    # the requesting service and its queue are system objects of A, made at the first ask
    assert (ROUTE_REQUEST_SERVICE, ROUTE_REQUEST_QUEUE) in {
        (s.name, s.queue) for s in a.services()}

    service(c)  # the configuration service creates the route and ends the request

    route = a.route(route_name("Missing"))
    assert (route.remote_service_name, route.address) == ("Missing", "LOCAL")
    assert route.lifetime is not None  # created with a LIFETIME
    assert waiting(inst, "Missing") == 0
    assert delivered(inst, "Missing") == 100
    # both sides of the request dialog are closed, and nothing was recorded as an error
    states = inst.sql("SELECT DISTINCT state FROM sys.conversation_endpoints WHERE "
                      "service_contract_name = ?", [BROKER_CONFIGURATION_NOTICE]).fetchall()
    assert states == [("CD",)]
    assert count(inst, "SELECT count(*) FROM sys.broker_events") == 0


def test_c7_a_send_kept_in_a_transaction_asks_for_its_route_in_that_transaction(inst):
    """A SEND inside a transaction is applied at its commit (C7): the route request it
    causes is begun in the same transaction, not as a second one waiting for the first's
    write transaction (which would end in error 1222 after the lock wait)."""
    a, _b, c, service = build(inst, {"Missing": "LOCAL"})
    conv = a.begin_dialog("Init", "Missing")
    with a.transaction():
        assert conv.send("kept") == 0
        assert requests_queued(inst) == 0  # nothing applied before the commit
    assert requests_queued(inst) == 1
    assert waiting(inst, "Missing") == 1
    service(c)
    assert delivered(inst, "Missing") == 1


def test_a_second_missing_service_gets_its_own_request(inst):
    a, _b, c, service = build(inst, {"Missing": "LOCAL", "Other": "LOCAL"})
    begin(a, "Missing", 3)
    begin(a, "Other", 3)
    begin(a, "Missing", 2)
    assert requests_queued(inst) == 2
    assert sorted(inst.sql("SELECT service_name FROM route_requests").fetchall()) == [
        ("Missing",), ("Other",)]
    service(c)
    assert (delivered(inst, "Missing"), delivered(inst, "Other")) == (5, 3)


def test_end_with_error_is_an_event_conversations_stay_delayed_then_ask_again(inst, clock):
    a, _b, c, service = build(inst, {})  # the directory knows nothing
    begin(a, "Missing", 5)
    service(c)  # END WITH ERROR: no route known

    (event,) = inst.sql("SELECT event_class, subclass, description FROM sys.broker_events"
                        ).fetchall()
    assert event[:2] == ("Broker:Route Request", "ended with error")
    assert f"error {NO_ROUTE_KNOWN}:" in event[2] and "'Missing'" in event[2]
    assert waiting(inst, "Missing") == 5  # still DELAYED
    assert requests_queued(inst) == 0
    # during the time-out no new request goes out, however often the loop runs
    clock.now += TIMEOUT / 2
    inst.run_pending()
    inst.run_pending(clock.now)
    begin(a, "Missing", 1)
    assert requests_queued(inst) == 0
    # after it, the waiting conversations ask again: one new request
    clock.now += TIMEOUT
    inst.run_pending()
    assert requests_queued(inst) == 1
    assert waiting(inst, "Missing") == 6


def test_an_answer_that_creates_no_route_leaves_them_delayed_until_the_time_out(inst, clock):
    a, _b, c, service = build(inst, {"Missing": "LOCAL"})
    begin(a, "Missing", 2)
    # a configuration service that ends the request without creating any route
    with c.transaction():
        (message,) = c.receive(service.queue)
        c.conversation(message.conversation_handle).end()
    assert waiting(inst, "Missing") == 2
    assert count(inst, "SELECT count(*) FROM sys.broker_events") == 0
    clock.now += TIMEOUT * 2
    inst.run_pending()
    assert requests_queued(inst) == 1  # asked again after the time-out
    service(c)
    assert delivered(inst, "Missing") == 2


def test_an_unanswered_request_ends_at_its_lifetime_and_is_asked_again(inst, clock):
    a, _b, c, service = build(inst, {"Missing": "LOCAL"})
    c.alter_queue(service.queue, status=False)  # the configuration service never reads
    begin(a, "Missing", 1)
    clock.now += 1  # REQUEST_LIFETIME (300 s) scaled: 0.3 s, a lifetime of 1 s
    inst.run_pending()
    (event,) = inst.sql("SELECT description FROM sys.broker_events").fetchall()
    assert "-8489" in event[0]
    clock.now += TIMEOUT * 2
    inst.run_pending()
    assert count(inst, "SELECT count(*) FROM route_request_dialogs "
                 "WHERE conversation_handle IS NOT NULL") == 1  # a new request


def test_reopening_the_file_does_not_send_a_second_request(tmp_path, clock):
    path = tmp_path / "dyn.duckdb"
    with pybroker.connect(path, clock=clock, worker=False, retry_scale=SCALE) as inst:
        a, _b, _c, service = build(inst, {"Missing": "LOCAL"})
        begin(a, "Missing", 3)
        assert requests_queued(inst) == 1
    with pybroker.connect(path, clock=clock, worker=False, retry_scale=SCALE) as inst:
        a = inst.database("A")
        begin(a, "Missing", 3)
        clock.now += 0.5
        inst.run_pending()
        assert requests_queued(inst) == 1  # the outstanding request still stands
        assert waiting(inst, "Missing") == 6
        service(inst.database("C"))
        assert delivered(inst, "Missing") == 6


def test_an_answer_that_ended_before_a_restart_is_settled_after_it(tmp_path, clock):
    path = tmp_path / "dyn.duckdb"
    with pybroker.connect(path, clock=clock, worker=False, retry_scale=SCALE) as inst:
        a, _b, c, service = build(inst, {})
        begin(a, "Missing", 1)
        # the request dialog ends with an error, and the file closes before the loop runs
        with c.transaction():
            (message,) = c.receive(service.queue)
            c.conversation(message.conversation_handle).end(7, "not now")
    with pybroker.connect(path, clock=clock, worker=False, retry_scale=SCALE) as inst:
        inst.run_pending()
        assert count(inst, "SELECT count(*) FROM route_request_dialogs WHERE "
                     "conversation_handle IS NULL AND retry_at IS NOT NULL") == 1
        assert "error 7: not now" in inst.sql(
            "SELECT description FROM sys.broker_events").fetchall()[0][0]


def test_R8_3_a_service_reached_through_a_wildcard_is_asked_about_first(inst):
    a, _b, c, service = build(inst, {"Missing": "LOCAL"}, wildcard=True)
    # R2.4 comes before R2.5: even with AutoCreatedLocal, the first conversation waits
    # for the routing service; while that request is pending, R2.4 is skipped and the
    # wildcard takes the next ones
    assert inst.route("Missing", origin="A").decided_by == "R2.4"
    begin(a, "Missing", 1)
    assert (waiting(inst, "Missing"), requests_queued(inst)) == (1, 1)
    begin(a, "Missing", 1)
    assert (waiting(inst, "Missing"), delivered(inst, "Missing")) == (1, 1)
    service(c)
    assert (waiting(inst, "Missing"), delivered(inst, "Missing")) == (0, 2)
    # the fix: an explicit LOCAL route for services of this instance is never asked about
    a.create_route("OtherLocal", service_name="Other", address="LOCAL")
    begin(a, "Other", 1)
    assert (delivered(inst, "Other"), requests_queued(inst)) == (1, 0)


def test_the_directory_can_be_a_json_file_or_another_instances_routes(inst, tmp_path):
    directory = tmp_path / "routes.json"
    directory.write_text(json.dumps({"Missing": {"address": "LOCAL"}}))
    a, _b, c, service = build(inst, directory)
    begin(a, "Missing", 2)
    service(c)
    assert delivered(inst, "Missing") == 2
    with pybroker.connect() as other:
        registry = other.create_database("Registry")
        registry.create_route("ToOther", service_name="Other", address="tcp://other:4022")
        from_routes = ConfigurationService(registry)
        assert from_routes.lookup("Other") == RouteAnswer("tcp://other:4022")
        assert from_routes.lookup("Missing") is None


def test_seed_example_4_with_a_dynamic_routing_service(inst):
    """The seed's example 4 (a wildcard network route for every remote service) with a
    route to a dynamic routing service added: R2.4 now asks before the wildcard sends."""
    db = inst.create_database("AdventureWorks2008R2")
    db.create_queue("q")
    db.create_service("Init", "q")
    db.create_route("ExternalRoute", address="tcp://forwarding.Adventure-Works.com:4022/")
    config = inst.create_database("Config")
    service = ConfigurationService({"OrderParts": "tcp://host2.Adventure-Works.com:4022/"})
    service.install(config)
    assert inst.route("OrderParts", origin="AdventureWorks2008R2").route == "ExternalRoute"
    db.create_route("Dyn", service_name=DYNAMIC, address="LOCAL")
    assert inst.route("OrderParts", origin="AdventureWorks2008R2").decided_by == "R2.4"
    db.begin_dialog("Init", "OrderParts").send("part 1")
    assert requests_queued(inst) == 1
    service(config)
    decision = inst.route("OrderParts", origin="AdventureWorks2008R2")
    assert (decision.route, decision.address, decision.match_step) == (
        route_name("OrderParts"), "tcp://host2.Adventure-Works.com:4022/", "R2.2")


@given(st.text(min_size=1, max_size=256).filter(lambda s: s.strip() and "\0" not in s))
def test_a_missing_route_body_names_its_service(service_name):
    try:
        body = missing_route_body(service_name)
    except ValueError:
        return
    parsed = parse_missing_route(body)
    # XML cannot carry every character (control characters): those parse as no service
    assert parsed in (service_name, None)


def test_a_body_that_names_no_service_parses_as_none():
    assert parse_missing_route(b"<MissingRoute/>") is None
    assert parse_missing_route(b"not xml") is None
