"""A configuration service in another instance's process answers route requests (SPEC R8,
pybroker/apps/configuration_service.py, ``instances=``), with every instance in its own
process (`pybroker serve`, each its own file and endpoint on 127.0.0.1):

- A holds App, whose route to SQL/ServiceBroker/BrokerConfiguration points over the wire
  to C, and serves clients on a TCP port besides;
- C holds Config, where the ready-made configuration service runs in a process of its own
  (tests/wire_child.py configuration, a client of C), told that App's instance is served
  at A's client port (with A's token);
- B holds Orders, the service App's conversations are for.

20 conversations of App wait DELAYED for ONE route request (R8.1, R8.2); C's service
creates the route in App through A's server, with its LIFETIME, then ends the request;
when the END reaches A its conversations are routed again and all 20 are delivered to B.

Every process is started by pid and stopped by pid in a ``finally``; every wait is bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pybroker
from pybroker.api.served.paths import token_path_for
from pybroker.apps.configuration_service import route_name
from pybroker.core.conversation.system_messages import ROUTE_REQUEST_SERVICE
from tests.process_helpers import (
    Child,
    Served,
    free_ports,
    start_all,
    trust_each_other,
    wait_until,
)
from tests.wire_helpers import CONTRACT, ORDER, define_objects

DYNAMIC = "SQL/ServiceBroker/BrokerConfiguration"
CONVERSATIONS = 20
RETRY_SCALE = 0.05


def set_up(a_file: Path, b_file: Path, c_file: Path, a_address: str,
           c_address: str) -> str:
    """The three instances' objects; returns App's broker identifier."""
    trust_each_other(a_file, b_file, c_file)
    a, b, c = (pybroker.connect(f, worker=False) for f in (a_file, b_file, c_file))
    try:
        app, orders = a.create_database("App"), b.create_database("Orders")
        for db in (app, orders):
            define_objects(db)
        app.create_queue("AppQueue")
        app.create_service("AppService", queue="AppQueue")
        orders.create_queue("OrdersQueue")
        orders.create_service("Orders", queue="OrdersQueue", contracts=[CONTRACT])
        app.drop_route("AutoCreatedLocal")  # only the route C makes leads to Orders
        app.create_route("AskConfig", service_name=DYNAMIC, address=c_address)
        # the end of a request dialog goes back to the requester, as any reply does
        c.create_database("Config").create_route(
            "Back", service_name=ROUTE_REQUEST_SERVICE, address=a_address)
        return app.broker_instance
    finally:
        for inst in (a, b, c):
            inst.close()


def asked(config: Child, service: str) -> list[str]:
    return [x.split()[2] for x in config.lines() if x.startswith(f"asked {service} ")]


def test_R8_a_configuration_service_in_another_instance_makes_the_route_there(tmp_path):
    a_file, b_file, c_file = (tmp_path / f"{x}.duckdb" for x in "abc")
    a_port, b_port, c_port, a_clients = free_ports(4)
    b_address = f"tcp://127.0.0.1:{b_port}"
    app_broker = set_up(a_file, b_file, c_file, f"tcp://127.0.0.1:{a_port}",
                        f"tcp://127.0.0.1:{c_port}")
    directory, instances = tmp_path / "directory.json", tmp_path / "instances.json"
    directory.write_text(json.dumps({"Orders": b_address}))
    a = Served(a_file, a_port, "--client-port", a_clients, retry_scale=RETRY_SCALE)
    b = Served(b_file, b_port, retry_scale=RETRY_SCALE)
    c = Served(c_file, c_port, retry_scale=RETRY_SCALE)
    config = Child(tmp_path / "config.log", "configuration", c_file, "Config", directory,
                   instances)
    try:
        start_all(a, b, c)
        token = token_path_for(a_file).read_text().strip()  # made by A's server
        instances.write_text(json.dumps(
            {app_broker: [f"pybroker://127.0.0.1:{a_clients}", token]}))
        config.start()
        config.wait_for("ready", timeout=60)
        with a.client() as inst:
            app = inst.database("App")
            with app.transaction():
                for i in range(CONVERSATIONS):
                    app.begin_dialog("AppService", "Orders", contract=CONTRACT).send(
                        f"<order n='{i}'/>", message_type=ORDER)

        def delivered() -> list[str]:
            got = [body for (body,) in b.sql(
                "SELECT decode(message_body) FROM queue_contents('Orders', 'OrdersQueue') "
                "WHERE status = 1")]
            return got if len(got) == CONVERSATIONS else []

        got = wait_until(delivered, timeout=60, what="the 20 conversations delivered to B")
        assert sorted(got) == sorted(f"<order n='{i}'/>" for i in range(CONVERSATIONS))
        assert asked(config, "Orders") == ["known"]  # one request for all 20 (R8.2)
        # the route C's service made in App, through A's server, with its LIFETIME
        assert a.sql("SELECT name, address, lifetime IS NOT NULL FROM sys.routes WHERE "
                     "database_name = 'App' AND remote_service_name = 'Orders'") == [
            (route_name("Orders"), b_address, True)]
        assert a.sql("SELECT count(*) FROM sys.broker_events WHERE event_class = "
                     "'Broker:Route Request'") == [(0,)]  # ended without error
        # C answered one request, App's, and its side closes once A acknowledges the END
        wait_until(lambda: c.sql(
            "SELECT far_broker_instance, state_desc FROM sys.conversation_endpoints WHERE "
            "far_service = ?", [ROUTE_REQUEST_SERVICE]) == [(app_broker, "CLOSED")],
            timeout=30, what="C's side of the one request closed")
        for child in (config, a, b, c):
            child.stop()
    finally:
        for child in (config, a, b, c):
            child.close()
