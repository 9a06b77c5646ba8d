"""A configuration service answering route requests from another instance (SPEC R8,
pybroker/apps/configuration_service.py, ``instances=``): two instances in one process,
talking over TCP on 127.0.0.1. Instance A (database Shop) asks the configuration service
in instance B (database Stock) about the services it has no route to; the service creates
the route in Shop through A's API (an open Instance, or a client of A's server), then
ends the request, and Shop's conversation leaves along it. Where the route cannot be
made, the request ends WITH ERROR saying why (an event in A), and nothing is made."""

from __future__ import annotations

import pytest

import pybroker
from pybroker.apps import configuration_service
from pybroker.apps.configuration_service import (
    DEFAULT_QUEUE,
    NOT_IN_THIS_INSTANCE,
    REQUESTER_UNREACHABLE,
    ROUTE_REFUSED,
    ConfigurationService,
    route_name,
)
from pybroker.core.conversation.system_messages import ROUTE_REQUEST_SERVICE
from pybroker.server.server import serve_clients
from tests.process_helpers import free_ports
from tests.wire_helpers import instance_pair, wait_for

DYNAMIC = "SQL/ServiceBroker/BrokerConfiguration"
LIFETIME = 600
SERVICES = ("Missing", "Other", "Third", "Fourth")


@pytest.fixture
def pair(tmp_path):
    """A (Shop asks B about what it has no route to) and B (Stock holds the services
    SERVICES on StockQueue, and the configuration service's queue)."""
    a, b, shop, stock = instance_pair(tmp_path, retry_scale=0.05)
    try:
        for name in SERVICES:
            stock.create_service(name, queue="StockQueue", contracts=["DEFAULT"])
        shop.drop_route("AutoCreatedLocal")  # only the routes the service makes lead anywhere
        shop.create_route("Dyn", service_name=DYNAMIC, address=b.endpoint.address)
        # the end of a request dialog needs a route back, as any reply does
        stock.create_route("Back", service_name=ROUTE_REQUEST_SERVICE,
                           address=a.endpoint.address)
        yield a, b, shop, stock
    finally:
        a.close()
        b.close()


def make_service(b, stock, instances) -> ConfigurationService:
    service = ConfigurationService({name: b.endpoint.address for name in SERVICES},
                                   lifetime=LIFETIME, instances=instances)
    service.install(stock)
    return service


def request_events(a) -> list[str]:
    return [d for (d,) in a.sql("SELECT description FROM sys.broker_events WHERE "
                                "event_class = 'Broker:Route Request' ORDER BY event_id"
                                ).fetchall()]


def ask(shop, service_name: str) -> None:
    shop.begin_dialog("ShopService", service_name).send(f"to {service_name}")


def delivered(a, b, service, stock, service_name: str) -> list[bytes]:
    """Answer requests until Shop's message to ``service_name`` is in StockQueue."""
    def arrived() -> list[bytes]:
        service(stock)
        return [body for (body,) in b.sql(
            "SELECT message_body FROM queue_contents('Stock', 'StockQueue') WHERE "
            "service_name = ?", [service_name]).fetchall()]
    return wait_for(arrived, what=f"the message to {service_name} delivered")


def refused(a, service, stock, count: int) -> str:
    """Answer requests until A has recorded ``count`` request errors; the last one."""
    def recorded() -> list[str]:
        service(stock)
        found = request_events(a)
        return found if len(found) >= count else []
    return wait_for(recorded, what="the request's error recorded in A")[-1]


def dynamic_routes(shop) -> dict[str, tuple[str, bool]]:
    return {r.remote_service_name: (r.address, r.lifetime is not None)
            for r in shop.routes() if r.name.startswith("BrokerConfiguration:")}


def nothing_left(b, stock) -> bool:
    """The service's side of every request is received and ended (nothing half done)."""
    queued = b.sql(f"SELECT count(*) FROM queue_contents('Stock', '{DEFAULT_QUEUE}')"
                   ).fetchone()[0]
    open_requests = b.sql(
        "SELECT count(*) FROM sys.conversation_endpoints WHERE far_service = ? AND "
        "state_desc NOT IN ('CLOSED', 'DISCONNECTED_OUTBOUND')", [ROUTE_REQUEST_SERVICE]
    ).fetchone()[0]
    return queued == 0 and open_requests == 0


def test_a_request_from_a_mapped_instance_makes_the_route_there(pair):
    a, b, shop, stock = pair
    service = make_service(b, stock, {shop.broker_instance.upper(): a})  # any case
    ask(shop, "Missing")
    assert delivered(a, b, service, stock, "Missing") == [b"to Missing"]
    assert dynamic_routes(shop) == {"Missing": (b.endpoint.address, True)}
    assert route_name("Missing") in {r.name for r in shop.routes()}
    assert request_events(a) == []
    service.close()
    assert shop.routes()  # an open Instance given in instances is the caller's: still open


def test_through_the_requesters_server_reconnecting_once_it_is_back(pair, tmp_path,
                                                                     monkeypatch):
    a, b, shop, stock = pair
    connections = []  # every client the service opened
    real_connect = configuration_service._connect
    monkeypatch.setattr(configuration_service, "_connect",
                        lambda place: connections.append(real_connect(place)) or connections[-1])
    server = serve_clients(a)
    with make_service(b, stock, lambda broker: (
            tmp_path / "a.duckdb" if broker == shop.broker_instance else None)) as service:
        for name in ("Missing", "Other"):  # one connection, kept
            ask(shop, name)
            assert delivered(a, b, service, stock, name) == [f"to {name}".encode()]
        assert len(connections) == 1
        server.close()  # the service's connection is gone; the server comes back
        server = serve_clients(a)
        ask(shop, "Third")
        assert delivered(a, b, service, stock, "Third") == [b"to Third"]
        assert len(connections) == 2
        assert dynamic_routes(shop) == {name: (b.endpoint.address, True)
                                        for name in ("Missing", "Other", "Third")}
        assert request_events(a) == []

        server.close()  # and now it stays away: the request ends WITH ERROR
        ask(shop, "Fourth")
        description = refused(a, service, stock, 1)
        assert f"ended with error {REQUESTER_UNREACHABLE}:" in description
        assert "'Fourth'" in description and "no process serves" in description
        assert "Fourth" not in dynamic_routes(shop)
        assert a.sql("SELECT count(*) FROM sys.transmission_queue WHERE to_service_name "
                     "= 'Fourth'").fetchone()[0] == 1  # it waits for the next request
        assert wait_for(lambda: nothing_left(b, stock), what="the request ended in B")
    assert all(repr(c).endswith(" closed>") for c in connections)  # close() ended them


def test_a_route_the_requesters_instance_refuses_ends_the_request_with_error(pair, tmp_path):
    a, b, shop, stock = pair
    server = serve_clients(a)
    reader = pybroker.connect(tmp_path / "a.duckdb", read_only=True)  # refuses every write
    try:
        service = make_service(b, stock, {shop.broker_instance: reader})
        ask(shop, "Missing")
        description = refused(a, service, stock, 1)
        assert f"ended with error {ROUTE_REFUSED}:" in description
        assert "refused the route to 'Missing'" in description
        assert dynamic_routes(shop) == {}
        assert wait_for(lambda: nothing_left(b, stock), what="the request ended in B")
    finally:
        reader.close()
        server.close()


def test_an_instance_without_an_entry_keeps_the_refusal(pair):
    a, b, shop, stock = pair
    service = make_service(b, stock, {"00000000-0000-0000-0000-000000000001": a})
    ask(shop, "Missing")
    description = refused(a, service, stock, 1)
    assert f"ended with error {NOT_IN_THIS_INSTANCE}:" in description
    assert shop.broker_instance in description and "instances=" in description
    assert dynamic_routes(shop) == {}


def test_a_server_that_answers_nobody_is_unreachable(pair, tmp_path):
    a, b, shop, stock = pair
    (port,) = free_ports(1)  # nothing listens there
    nobody = (f"pybroker://127.0.0.1:{port}", "no token")
    with make_service(b, stock, {shop.broker_instance: nobody}) as service:
        ask(shop, "Missing")
        description = refused(a, service, stock, 1)
    assert f"ended with error {REQUESTER_UNREACHABLE}:" in description
    assert nobody[0] in description
    assert dynamic_routes(shop) == {}


@pytest.mark.parametrize("instances", [
    5,
    {"id": 5},
    {"id": ""},
    {"id": ("tcp://127.0.0.1:4022", "SECRET")},  # a broker endpoint, not a client server
    {"id": ("pybroker://127.0.0.1:4100",)},
    {"id": ["pybroker://127.0.0.1:4100", "SECRET", "more"]},
    {1: "a.duckdb"},
])
def test_instances_that_say_nowhere_are_refused_at_once(instances):
    with pytest.raises(pybroker.BrokerError, match="instances") as refusal:
        ConfigurationService({}, instances=instances)
    assert "SECRET" not in str(refusal.value)  # a token is never repeated


def test_a_callable_that_says_nowhere_ends_the_request_not_the_service(pair):
    a, b, shop, stock = pair
    service = make_service(b, stock, lambda broker: 5)
    ask(shop, "Missing")
    description = refused(a, service, stock, 1)
    assert f"ended with error {REQUESTER_UNREACHABLE}:" in description
    assert "instances= cannot say" in description
    assert wait_for(lambda: nothing_left(b, stock), what="the request ended in B")
