"""``pybroker serve FILE --http-port N``: ``/metrics`` scraped from real serve processes
while messages cross between two instances, read with prometheus_client's parser (a real
reader of the text format); ``/healthz`` and ``/readyz``."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

import pybroker
from tests.process_helpers import Served, free_ports, start_all, trust_each_other, wait_until

SENT, RECEIVED = 5, 2


def _http(child: Served) -> str:
    line = wait_until(lambda: next((x for x in child.lines()
                                    if x.startswith("metrics on http://")), None),
                      what="the metrics address")
    return line.split()[-1].removesuffix("/metrics")


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _samples(base: str) -> dict[tuple[str, frozenset], float]:
    status, text = _get(f"{base}/metrics")
    assert status == 200, text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples[name, frozenset(labels.items())]


def test_counters_and_depths_of_two_served_instances_while_messages_cross(tmp_path):
    files = {n: tmp_path / f"{n}.duckdb" for n in ("a", "b")}
    ports = dict(zip(files, free_ports(2), strict=True))
    with pybroker.connect(files["a"], worker=False) as inst:
        shop = inst.create_database("Shop")
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", "ShopQueue")
        shop.create_route("ToFar", service_name="FarService",
                          address=f"tcp://127.0.0.1:{ports['b']}")
    with pybroker.connect(files["b"], worker=False) as inst:
        far = inst.create_database("Far")
        far.create_queue("FarQueue")
        far.create_service("FarService", "FarQueue", ["DEFAULT"])
        far.create_route("ToShop", service_name="ShopService",
                         address=f"tcp://127.0.0.1:{ports['a']}")
    trust_each_other(*files.values())
    served = {"a": Served(files["a"], ports["a"], "--http-port", 0),
              "b": Served(files["b"], ports["b"], "--http-port", 0, "--log-format", "json")}
    try:
        start_all(*served.values())
        http = {n: _http(child) for n, child in served.items()}
        assert _get(f"{http['a']}/healthz")[0] == 200
        assert _get(f"{http['a']}/readyz")[0] == 200
        assert _get(f"{http['a']}/nothing")[0] == 404
        sent_at = time.time()
        with served["a"].client() as inst:
            conversation = inst.database("Shop").begin_dialog("ShopService", "FarService")
            for n in range(SENT):
                conversation.send(f"order {n}")
        wait_until(lambda: served["b"].sql(
            "SELECT count(*) FROM sys.queue_messages WHERE queue_name = 'FarQueue'")[0][0]
            == SENT, what="every message in B's queue")
        with served["b"].client() as inst:
            got = inst.database("Far").receive("FarQueue", max_messages=RECEIVED)
        assert [m.message_body for m in got] == [b"order 0", b"order 1"]
        in_queue = served["b"].sql(
            "SELECT count(*) FROM sys.queue_messages WHERE queue_name = 'FarQueue' "
            "AND status = 1")[0][0]

        # b's stderr lines are JSON objects (stdout's, the addresses, stay text)
        logged = [json.loads(x) for x in served["b"].lines() if x.startswith("{")]
        assert {"clients", "broker"} <= {x["source"] for x in logged}, logged
        assert any(x["message"].startswith("client ") for x in logged)
        a, b = _samples(http["a"]), _samples(http["b"])
        assert _value(a, "pybroker_messages_sent_total", database="Shop",
                      service="ShopService") == SENT
        assert _value(b, "pybroker_messages_delivered_total", database="Far",
                      queue="FarQueue") == SENT
        assert _value(b, "pybroker_messages_received_total", database="Far",
                      queue="FarQueue") == RECEIVED
        assert _value(b, "pybroker_queue_messages", database="Far",
                      queue="FarQueue") == in_queue == SENT - RECEIVED
        age = _value(b, "pybroker_queue_oldest_message_age_seconds", database="Far",
                     queue="FarQueue")
        assert 0 <= age <= time.time() - sent_at + 1
        assert _value(a, "pybroker_queue_messages", database="Shop", queue="ShopQueue") == 0
        assert _value(a, "pybroker_conversation_endpoints", database="Shop",
                      state="CONVERSING") == 1
        assert _value(a, "pybroker_broker_endpoint_up") == 1
        assert _value(b, "pybroker_client_calls_total") > 0
        assert _value(b, "pybroker_duckdb_file_bytes") > 0
        # no failed transmission is waiting: every message was acknowledged and left
        assert not [k for k in a if k[0] == "pybroker_transmission_queue_messages"
                    and ("status", "failing") in k[1]]
    finally:
        for child in served.values():
            child.close()
