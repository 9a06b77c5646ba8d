"""The families of ``/metrics`` read from an embedded instance, and the text format they
are written in, read back by prometheus_client's parser."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

import pybroker
from pybroker.server.metrics import ClientTotals, Family, read_families, render


def _values(families: list[Family]) -> dict[tuple[str, tuple], float]:
    return {(f.name, tuple(sorted(labels.items()))): value
            for f in families for labels, value in f.samples}


@pytest.fixture
def shop(tmp_path):
    with pybroker.connect(tmp_path / "shop.duckdb", worker=False) as inst:
        db = inst.create_database("Shop")
        db.create_queue("Orders")
        db.create_service("OrderService", "Orders", ["DEFAULT"])
        yield inst, db


def test_a_rolled_back_send_or_receive_is_not_counted(shop):
    inst, db = shop
    conversation = db.begin_dialog("OrderService", "OrderService")
    conversation.send("one")
    with pytest.raises(RuntimeError), db.transaction():
        conversation.send("undone")
        raise RuntimeError("roll back")
    with pytest.raises(RuntimeError), db.transaction():
        assert len(db.receive("Orders")) == 1
        raise RuntimeError("roll back")
    values = _values(read_families(inst.kernel))
    assert values["pybroker_messages_sent_total",
                  (("database", "Shop"), ("service", "OrderService"))] == 1
    assert values["pybroker_messages_delivered_total",
                  (("database", "Shop"), ("queue", "Orders"))] == 1
    assert ("pybroker_messages_received_total",
            (("database", "Shop"), ("queue", "Orders"))) not in values
    assert values["pybroker_queue_messages", (("database", "Shop"), ("queue", "Orders"))] == 1
    [message] = db.receive("Orders")
    assert message.message_body == b"one"
    values = _values(read_families(inst.kernel))
    assert values["pybroker_messages_received_total",
                  (("database", "Shop"), ("queue", "Orders"))] == 1
    assert values["pybroker_queue_messages", (("database", "Shop"), ("queue", "Orders"))] == 0
    assert values["pybroker_queue_oldest_message_age_seconds",
                  (("database", "Shop"), ("queue", "Orders"))] == 0
    assert values["pybroker_broker_endpoint_up", ()] == 0
    # one transaction sent and committed (the rolled-back one is not observed)
    [latency] = [f for f in text_string_to_metric_families(render(read_families(inst.kernel)))
                 if f.name == "pybroker_send_commit_seconds"]
    assert latency.type == "histogram"
    samples = {(s.name, s.labels.get("le")): s.value for s in latency.samples}
    assert samples["pybroker_send_commit_seconds_count", None] == 1
    assert samples["pybroker_send_commit_seconds_bucket", "+Inf"] == 1
    assert 0 <= samples["pybroker_send_commit_seconds_sum", None] < 60


@settings(max_examples=60, deadline=None)
@given(labels=st.dictionaries(st.sampled_from(["database", "queue", "service"]),
                              st.text(max_size=12), max_size=3),
       value=st.one_of(st.integers(min_value=0, max_value=2**53),
                       st.floats(min_value=0, max_value=1e12)),
       help_text=st.text(max_size=30))
def test_any_label_text_reads_back_as_written(labels, value, help_text):
    family = Family("pybroker_queue_messages", "gauge", help_text)
    family.add(value, **labels)
    [parsed] = text_string_to_metric_families(render([family]))
    [sample] = parsed.samples
    assert (parsed.name, parsed.type) == ("pybroker_queue_messages", "gauge")
    assert sample.labels == labels
    assert sample.value == pytest.approx(value)


def test_the_summary_line_says_what_moved_since_the_last_and_what_waits(tmp_path):
    import threading

    from pybroker.server.server import serve_clients
    from tests.process_helpers import wait_until

    lines: list[str] = []
    seen = threading.Event()

    def summary(line: str) -> None:
        lines.append(line)
        seen.set()

    with pybroker.connect(tmp_path / "shop.duckdb", worker=False) as inst:
        db = inst.create_database("Shop")
        db.create_queue("Orders")
        db.create_service("OrderService", "Orders", ["DEFAULT"])
        conversation = db.begin_dialog("OrderService", "OrderService")
        for n in range(3):
            conversation.send(f"order {n}")
        db.receive("Orders")
        serve_clients(inst, summary=summary, summary_interval=0.05)
        assert seen.wait(30)
        first = lines[0]
        assert "messages: 3 sent, 3 delivered, 1 received;" in first, first
        assert first.endswith("waiting: 2 ready in queues, 0 in transmission queues"), first
        count = len(lines)
        line = wait_until(lambda: lines[count] if len(lines) > count else None,
                          what="the next summary line")
        assert "messages: 0 sent, 0 delivered, 0 received;" in line, line  # since the last


def test_an_application_serves_its_own_metrics_until_it_closes(tmp_path):
    import urllib.error
    import urllib.request

    app = pybroker.connect(tmp_path / "app.duckdb", serve=True, worker=False)
    try:
        db = app.create_database("Shop")
        db.create_queue("Orders")
        db.create_service("OrderService", "Orders", ["DEFAULT"])
        db.begin_dialog("OrderService", "OrderService").send("one")
        server = pybroker.serve_metrics(app)
        with urllib.request.urlopen(f"{server.address}/metrics", timeout=30) as answer:
            text = answer.read().decode()
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for f in text_string_to_metric_families(text) for s in f.samples}
        assert samples["pybroker_queue_messages",
                       (("database", "Shop"), ("queue", "Orders"))] == 1
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{server.address}/readyz", timeout=30)
        assert refused.value.code == 503  # no broker endpoint listens
        client = pybroker.connect(tmp_path / "app.duckdb")  # through the app's socket
        with client, pytest.raises(pybroker.InvalidArgumentError, match="serve_metrics"):
            pybroker.serve_metrics(client)
    finally:
        app.close()
    with pytest.raises(OSError):  # it stopped with the instance
        urllib.request.urlopen(f"{server.address}/metrics", timeout=5)


def test_the_dashboard_draws_only_metrics_the_instance_serves(shop):
    import json
    import re
    from pathlib import Path

    docs = Path(pybroker.__file__).parent / "docs"
    dashboard = json.loads((docs / "grafana-dashboard.json").read_text())
    drawn = {name for panel in dashboard["panels"] for target in panel["targets"]
             for name in re.findall(r"\bpybroker_[a-z_]+", target["expr"])}
    drawn = {name.removesuffix("_bucket") for name in drawn}  # a histogram's buckets
    inst, _ = shop
    served = {f.name for f in read_families(inst.kernel, lambda: ClientTotals(0, 0, 0, 0))}
    documented = set(re.findall(r"^\| `(pybroker_[a-z_]+)` \|",
                                (docs / "metrics.md").read_text(), re.MULTILINE))
    assert drawn and drawn <= served
    assert served == documented  # the table in metrics.md names every metric, and no other


def test_serve_prints_a_failing_activation_and_a_refused_broker_login(capsys):
    import json

    from pybroker.cli.serve import _log_event
    from pybroker.cli.serve_log import ServeLog

    for log in (ServeLog(), ServeLog("json", clock=lambda: 1769860800.25)):
        _log_event("Broker:Activation", "Aborted", None,
                   "queue Shop.dbo.Orders: the activation procedure raised KeyError", log=log)
        _log_event("Audit Broker Login", "Authentication Failure", "tcp://127.0.0.1:4022",
                   "untrusted certificate", log=log)
        _log_event("Broker:Message Undeliverable", "refused", None, "not an operator's line",
                   log=log)
    lines = capsys.readouterr().err.splitlines()
    text = ["activation failed: queue Shop.dbo.Orders: the activation procedure raised "
            "KeyError", "broker connection refused (tcp://127.0.0.1:4022): untrusted "
            "certificate"]
    assert lines[:2] == text
    assert [json.loads(line) for line in lines[2:]] == [
        {"time": "2026-01-31T12:00:00.250Z", "source": "activation", "message": text[0]},
        {"time": "2026-01-31T12:00:00.250Z", "source": "broker", "message": text[1]}]


def test_the_scrape_bench_instance_reads_as_it_was_built(tmp_path):
    from pybroker.devtools.bench.metrics import DATABASE, MESSAGES, _build

    inst = _build(tmp_path / "bench.duckdb", queues=10, endpoints=1_000)
    try:
        values = _values(read_families(inst.kernel))
    finally:
        inst.close()
    db = ("database", DATABASE)
    # the generated endpoints by k mod 10 (sql/bench/...), and the two of the bench's dialog
    assert values["pybroker_conversation_endpoints", (db, ("state", "CONVERSING"))] == 402
    assert values["pybroker_conversation_endpoints",
                  (db, ("state", "DISCONNECTED_INBOUND"))] == 300
    assert values["pybroker_conversation_endpoints", (db, ("state", "CLOSED"))] == 300
    depths = {k[1][1][1]: v for k, v in values.items() if k[0] == "pybroker_queue_messages"}
    assert len(depths) == 11 and depths["BenchQueue"] == MESSAGES
    assert sum(depths.values()) == MESSAGES
