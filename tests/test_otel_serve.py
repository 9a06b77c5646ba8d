"""``pybroker serve`` with PYBROKER_OTEL=1 (pybroker/docs/otel.md): a real serve process
traces the messages it receives from an instance in this test's process, and its spans
(exported as OTEL_TRACES_EXPORTER=console says, on stderr) continue the trace the sender
began: the receive span in the served process is the child of the send span here.

The serve process is started by pid and stopped by pid in a ``finally``; every wait is
bounded."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import pybroker
from pybroker.cli import serve_otel
from pybroker.devtools.chaos.ports import free_port
from pybroker.errors import BrokerError, ServerError
from tests.process_helpers import wait_until

ROOT = Path(__file__).resolve().parents[1]


def _spans_in(text: str) -> list[dict]:
    """The JSON objects ConsoleSpanExporter wrote among serve's other lines."""
    decoder, spans, pos = json.JSONDecoder(), [], 0
    while (start := text.find("{\n", pos)) != -1:
        try:
            value, pos = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            pos = start + 1
            continue
        if isinstance(value, dict) and "context" in value:
            spans.append(value)
    return spans


def test_a_served_instance_continues_the_trace_of_a_message_sent_to_it(tmp_path):
    target_file, sender_file = tmp_path / "target.duckdb", tmp_path / "sender.duckdb"
    port = free_port()
    with pybroker.connect(target_file, worker=False) as target:
        db = target.create_database("Stock")
        db.create_queue("StockQueue")
        db.create_service("StockService", queue="StockQueue", contracts=["DEFAULT"])
        target_pem = target.certificate
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sender = pybroker.connect(sender_file, retry_scale=0.01)
    sender.enable_tracing(provider)
    (tmp_path / "sender.pem").write_text(sender.certificate)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYBROKER_OTEL": "1",
           "OTEL_TRACES_EXPORTER": "console"}
    log_path = tmp_path / "serve.log"
    log = log_path.open("w")
    serve = subprocess.Popen(
        [sys.executable, "-m", "pybroker", "serve", str(target_file), "--port", str(port),
         "--trust", f"Sender={tmp_path / 'sender.pem'}", "--retry-scale", "0.01"],
        cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_until(lambda: "listening on" in log_path.read_text() or serve.poll() is not None,
                   what="serve to listen")
        assert serve.poll() is None, log_path.read_text()
        assert "tracing: OpenTelemetry spans of every message" in log_path.read_text()
        sender.trust("Stock", target_pem)
        sender.start_endpoint(0)
        shop = sender.create_database("Shop")
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", "ShopQueue")
        shop.create_route("ToStock", service_name="StockService",
                          address=f"tcp://127.0.0.1:{port}")
        shop.begin_dialog("ShopService", "StockService").send(b"traced")
        with pybroker.connect(target_file) as client:  # through the served file's socket
            assert client.tracing  # the server's
            with pytest.raises(ServerError, match="the serving process makes the spans"):
                client.enable_tracing()
            stock = client.database("Stock")
            got = wait_until(lambda: stock.receive("StockQueue", timeout=0.2),
                             what="the message at the served instance")
        assert [m.message_body for m in got] == [b"traced"]
    finally:
        sender.close()
        if serve.poll() is None:
            os.kill(serve.pid, signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        finally:
            if serve.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(serve.pid, signal.SIGKILL)
                serve.wait(timeout=30)
            log.close()
    assert serve.returncode == 0, log_path.read_text()
    (send,) = [s for s in exporter.get_finished_spans() if s.name == "send StockService"]
    receives = [s for s in _spans_in(log_path.read_text()) if s["name"] == "receive StockQueue"]
    assert len(receives) == 1, log_path.read_text()
    (receive,) = receives
    assert receive["kind"] == "SpanKind.CLIENT"
    assert receive["context"]["trace_id"] == f"0x{send.context.trace_id:032x}"
    assert receive["parent_id"] == f"0x{send.context.span_id:016x}"
    assert receive["attributes"]["messaging.system"] == "pybroker"
    assert receive["attributes"]["messaging.message.id"] == send.attributes[
        "messaging.message.id"]
    assert receive["resource"]["attributes"]["service.name"] == "pybroker"


def test_the_environment_turns_tracing_on_and_an_unknown_exporter_is_refused(monkeypatch):
    monkeypatch.delenv(serve_otel.ENVIRONMENT, raising=False)
    assert not serve_otel.wanted(False) and serve_otel.wanted(True)
    for value, wanted in (("1", True), ("yes", True), ("0", False), ("", False)):
        monkeypatch.setenv(serve_otel.ENVIRONMENT, value)
        assert serve_otel.wanted(False) is wanted
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
    with pytest.raises(BrokerError, match="knows otlp, console and none"):
        serve_otel.tracer_provider()
