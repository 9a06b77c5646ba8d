"""Dynamic routing across two instances in one process (SPEC R8): the route request is
routed like any conversation, here over TCP on 127.0.0.1 to a configuration service in
the other instance. That service is not told where the requester's instance is served
(no ``instances=``), so it cannot create a route there (pybroker/core/routing/
configuration_service.py says why): it ends the request WITH ERROR, and the requester
records it and keeps its conversation DELAYED (tests/test_dynamic_routing_remote.py has
the service that is told)."""

from __future__ import annotations

from pybroker.apps.configuration_service import NOT_IN_THIS_INSTANCE, ConfigurationService
from pybroker.core.conversation.system_messages import ROUTE_REQUEST_SERVICE
from tests.wire_helpers import instance_pair, wait_for

DYNAMIC = "SQL/ServiceBroker/BrokerConfiguration"


def test_a_request_crosses_the_wire_and_a_remote_refusal_is_an_event(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path, retry_scale=0.05)  # request lifetime 15 s
    try:
        service = ConfigurationService({"Missing": "LOCAL"})
        service.install(stock)
        shop.create_route("Dyn", service_name=DYNAMIC, address=b.endpoint.address)
        # the answer (the end of the request dialog) needs a route back, as any reply does
        stock.create_route("Back", service_name=ROUTE_REQUEST_SERVICE,
                           address=a.endpoint.address)
        shop.begin_dialog("ShopService", "Missing").send("waits")

        def answered() -> bool:
            service(stock)
            return bool(a.sql("SELECT count(*) FROM sys.broker_events WHERE event_class = "
                              "'Broker:Route Request'").fetchone()[0])

        wait_for(answered, what="the remote configuration service's answer")
        (description,) = a.sql("SELECT description FROM sys.broker_events WHERE "
                               "event_class = 'Broker:Route Request'").fetchone()
        assert f"error {NOT_IN_THIS_INSTANCE}:" in description
        assert shop.broker_instance in description
        # no route was made anywhere; the conversation still waits in A
        assert not any(r.remote_service_name == "Missing" for r in shop.routes())
        assert a.sql("SELECT count(*) FROM sys.transmission_queue WHERE to_service_name = "
                     "'Missing'").fetchone()[0] == 1
    finally:
        a.close()
        b.close()
