"""Dynamic routing (R8) with every instance in its own process (`pybroker serve`, each its
own file and endpoint on 127.0.0.1), and the ready-made configuration service running in a
process of its own (tests/wire_child.py configuration, a client of instance A) with a JSON
directory the test edits:

- R8.1, R8.2: 100 conversations of A's App to Orders (in instance B) wait DELAYED for ONE
  route request; the service cannot answer yet and ends it WITH ERROR (an event in A); they
  stay DELAYED, a new request goes out after the time-out, and with the directory now
  knowing Orders its route is made and all 100 are delivered to B;
- a message of remote origin for a service msdb has no route to (B -> A -> B, A
  forwarding): A's msdb asks the same service (R2.4 from msdb's table) and forwards the
  sender's next retry along the route made in msdb;
- R8.3: a service of A's own reached only through the wildcard route is asked about first;
  one with an explicit LOCAL route is not.

Every process is started by pid and stopped by pid in a ``finally``; every wait is bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pybroker
from pybroker.apps.configuration_service import NO_ROUTE_KNOWN
from pybroker.core.conversation.model import STATUS_NO_ROUTE
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
CONVERSATIONS = 100
RETRY_SCALE = 0.05  # a request's answer time-out: 64 s * 0.05 = 3.2 s


def add_service(db: pybroker.Database, service: str) -> None:
    db.create_queue(f"{service}Queue")
    db.create_service(service, queue=f"{service}Queue", contracts=[CONTRACT])


def set_up(a_file: Path, b_file: Path, b_address: str, a_address: str) -> None:
    trust_each_other(a_file, b_file)
    a, b = pybroker.connect(a_file, worker=False), pybroker.connect(b_file, worker=False)
    try:
        app, billing = a.create_database("App"), a.create_database("Billing")
        a.create_database("Config")
        orders, reports = b.create_database("Orders"), b.create_database("Reports")
        for db in (app, billing, orders, reports):
            define_objects(db)
        add_service(app, "AppService")
        add_service(billing, "Billing")
        add_service(billing, "Audit")
        add_service(orders, "Orders")
        add_service(reports, "ReportService")
        for db in (app, a.database("msdb")):  # both ask the configuration service (LOCAL)
            db.create_route("AskConfig", service_name=DYNAMIC, address="LOCAL")
        app.create_route("AuditHere", service_name="Audit", address="LOCAL")  # R8.3's fix
        orders.create_route("ToReports", service_name="ReportService", address=a_address)
        a.forwarding = True
    finally:
        a.close()
        b.close()


def asked(config: Child, service: str) -> list[str]:
    """What the configuration service answered for ``service``, in order."""
    return [x.split()[2] for x in config.lines() if x.startswith(f"asked {service} ")]


def request_errors(a: Served) -> list[str]:
    return [d for (d,) in a.sql("SELECT description FROM sys.broker_events WHERE "
                                "event_class = 'Broker:Route Request' ORDER BY event_id")]


def queued(server: Served, database: str, queue: str) -> list[str]:
    return [body for (body,) in server.sql(
        f"SELECT decode(message_body) FROM queue_contents('{database}', '{queue}') "
        "WHERE status = 1")]


def test_R8_1_R8_2_R8_3_one_request_for_100_conversations_then_delivered(tmp_path):
    a_file, b_file = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    a_port, b_port = free_ports(2)
    b_address = f"tcp://127.0.0.1:{b_port}"
    set_up(a_file, b_file, b_address, f"tcp://127.0.0.1:{a_port}")
    directory = tmp_path / "directory.json"
    directory.write_text("{}")
    a = Served(a_file, a_port, retry_scale=RETRY_SCALE)
    b = Served(b_file, b_port, retry_scale=RETRY_SCALE)
    config = Child(tmp_path / "config.log", "configuration", a_file, "Config", directory)
    try:
        start_all(a, b)
        config.start()
        config.wait_for("ready", timeout=60)
        with a.client() as inst:
            app = inst.database("App")
            with app.transaction():
                for i in range(CONVERSATIONS):
                    app.begin_dialog("AppService", "Orders", contract=CONTRACT).send(
                        f"<order n='{i}'/>", message_type=ORDER)

        # R8.1, R8.2: one request for all 100; unanswerable yet, so it ends WITH ERROR
        errors = wait_until(lambda: request_errors(a), what="the first request's error")
        assert asked(config, "Orders") == ["unknown"]
        assert f"ended with error {NO_ROUTE_KNOWN}:" in errors[0] and "'Orders'" in errors[0]
        statuses = a.sql("SELECT transmission_status, count(*) FROM sys.transmission_queue "
                         "WHERE to_service_name = 'Orders' GROUP BY ALL")
        assert statuses == [(STATUS_NO_ROUTE, CONVERSATIONS)]  # still DELAYED, all of them
        directory.write_text(json.dumps({"Orders": b_address, "ReportService": b_address}))

        # after the time-out a new request: answered with a route, and all 100 leave
        got = wait_until(lambda: len(queued(b, "Orders", "OrdersQueue")) == CONVERSATIONS
                         and queued(b, "Orders", "OrdersQueue"), timeout=90,
                         what="the 100 conversations delivered once the route exists")
        assert sorted(got) == sorted(f"<order n='{i}'/>" for i in range(CONVERSATIONS))
        answers = asked(config, "Orders")
        assert answers[0] == "unknown" and answers[-1] == "known", answers
        assert len(answers) < 5, answers  # one request at a time, never one per conversation
        routes = a.sql("SELECT address, lifetime IS NOT NULL FROM sys.routes "
                       "WHERE database_name = 'App' AND remote_service_name = 'Orders'")
        assert routes == [(b_address, True)]  # the service's route, with a LIFETIME

        # a message of remote origin: B -> A (msdb asks; forwards the retry) -> B
        with b.client() as inst:
            inst.database("Orders").begin_dialog("Orders", "ReportService",
                                                 contract=CONTRACT).send(
                "<report/>", message_type=ORDER)
        # R8.3: Billing is A's own, found only through the wildcard route: asked first;
        # Audit, with an explicit LOCAL route, is not asked about
        with a.client() as inst:
            app = inst.database("App")
            for service in ("Billing", "Audit"):
                app.begin_dialog("AppService", service, contract=CONTRACT).send(
                    f"<to service='{service}'/>", message_type=ORDER)
        wait_until(lambda: queued(b, "Reports", "ReportServiceQueue") == ["<report/>"],
                   what="the message of remote origin forwarded along msdb's new route")
        assert asked(config, "ReportService") == ["known"]
        assert a.sql("SELECT address FROM sys.msdb_routes WHERE remote_service_name = "
                     "'ReportService'") == [(b_address,)]
        for service in ("Billing", "Audit"):
            wait_until(lambda s=service: queued(a, "Billing", f"{s}Queue"),
                       what=f"the conversation to {service} delivered in A")
        assert asked(config, "Billing") == ["unknown"] and asked(config, "Audit") == []
        for child in (config, a, b):
            child.stop()
    finally:
        for child in (config, a, b):
            child.close()
