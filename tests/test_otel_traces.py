"""OpenTelemetry spans of messages (pybroker/docs/otel.md): one trace from SEND on A through
a forwarder F to RECEIVE on B over 127.0.0.1, a SEND -> RECEIVE inside one instance, an
activated reader's ``process`` span, a message without a trace context (or with a
malformed one) still flowing, and no OpenTelemetry imported by an instance that does not
trace."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import activation_handlers as handlers
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind

import pybroker
from pybroker.core.wire.trace_context import format_traceparent
from pybroker.kernel.tracing import message_id
from tests.test_wire_forwarding_instances import trio
from tests.wire_helpers import CONTRACT, ORDER, define_objects, drain, instance_pair, wait_for


def _provider(exporter: InMemorySpanExporter, name: str) -> TracerProvider:
    """A tracer provider of its own per instance (as each process would have), all
    exporting to one in-memory exporter, told apart by service.name."""
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _spans(exporter: InMemorySpanExporter, name: str, where: str | None = None
           ) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name and (
        where is None or s.resource.attributes["service.name"] == where)]


def _common(span: ReadableSpan, operation: str, destination: str) -> None:
    assert span.attributes["messaging.system"] == "pybroker"
    assert span.attributes["messaging.operation.name"] == operation
    assert span.attributes["messaging.destination.name"] == destination


def test_one_trace_holds_send_on_a_forward_on_f_and_receive_on_b(tmp_path):
    exporter = InMemorySpanExporter()
    a, f, b, shop, stock = trio(tmp_path)
    try:
        for inst, name in ((a, "A"), (f, "F"), (b, "B")):
            inst.enable_tracing(_provider(exporter, name))
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<order n='1'/>", message_type=ORDER)
        (got,) = drain(stock, "StockQueue", 1)
        assert got.message_body == b"<order n='1'/>"

        (send,) = _spans(exporter, "send StockService", "A")
        forwards = _spans(exporter, "forward StockService", "F")
        (receive,) = _spans(exporter, "receive StockQueue", "B")
        assert forwards  # once, or once per copy A sent again before B acknowledged
        trace_id = send.context.trace_id
        assert {s.context.trace_id for s in [send, receive, *forwards]} == {trace_id}
        assert send.parent is None and send.kind == SpanKind.PRODUCER
        for forward in forwards:  # each copy F passed on is the child of A's send
            assert forward.parent.span_id == send.context.span_id
            assert forward.parent.is_remote
            _common(forward, "forward", "StockService")
        # B's receive is the child of the forward span whose copy B took
        assert receive.parent.span_id in {s.context.span_id for s in forwards}
        assert receive.kind == SpanKind.CLIENT
        _common(send, "send", "StockService")
        _common(receive, "receive", "StockQueue")
        expected_id = message_id(conv.conversation_id, True, 0)
        assert {s.attributes["messaging.message.id"] for s in [send, receive, *forwards]} == {
            expected_id}
        assert send.attributes["messaging.message.conversation_id"] == conv.handle
        assert receive.attributes["messaging.message.conversation_id"] == (
            got.conversation_handle)
    finally:
        for inst in (a, f, b):
            inst.close()


def test_a_send_received_in_the_same_instance_is_one_trace(tmp_path):
    exporter = InMemorySpanExporter()
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        inst.enable_tracing(_provider(exporter, "I"))
        assert inst.tracing
        db = inst.create_database("D")
        db.create_queue("From")
        db.create_queue("To")
        db.create_service("FromService", queue="From")
        db.create_service("ToService", queue="To", contracts=["DEFAULT"])
        conv = db.begin_dialog("FromService", "ToService")
        with db.transaction():
            conv.send(b"one")
            conv.send(b"two")
        got = db.receive("To", max_messages=10, timeout=1)
        assert [m.message_body for m in got] == [b"one", b"two"]
        sends = _spans(exporter, "send ToService")
        receives = _spans(exporter, "receive To")
        assert len(sends) == len(receives) == 2
        by_id = {s.attributes["messaging.message.id"]: s for s in sends}
        assert set(by_id) == {message_id(conv.conversation_id, True, n) for n in (0, 1)}
        for receive in receives:
            send = by_id[receive.attributes["messaging.message.id"]]
            assert receive.context.trace_id == send.context.trace_id
            assert receive.parent.span_id == send.context.span_id
        assert sends[0].context.trace_id != sends[1].context.trace_id  # a trace per SEND
        assert inst.kernel.messaging.tracing.kept() == 0  # RECEIVE took what SEND kept



def test_t_sql_send_and_receive_are_traced_as_the_api_s_are(tmp_path):
    exporter = InMemorySpanExporter()
    with pybroker.connect(None) as inst:
        inst.enable_tracing(_provider(exporter, "I"))
        db = inst.create_database("D")
        db.execute("CREATE QUEUE FromQ; CREATE QUEUE ToQ; CREATE SERVICE FromS ON QUEUE FromQ; "
                   "CREATE SERVICE ToS ON QUEUE ToQ ([DEFAULT])")
        conv = db.begin_dialog("FromS", "ToS")
        db.execute(f"SEND ON CONVERSATION '{conv.handle}' (N'hello')")
        (result,) = db.execute("RECEIVE TOP (1) message_body FROM ToQ")
        assert result.rows == [(b"hello",)]
    (send,) = _spans(exporter, "send ToS")
    (receive,) = _spans(exporter, "receive ToQ")
    assert receive.parent.span_id == send.context.span_id

def test_an_activated_reader_runs_in_a_process_span_its_receives_link_to(tmp_path):
    handlers.received.clear()
    exporter = InMemorySpanExporter()
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        inst.enable_tracing(_provider(exporter, "I"))
        a = inst.create_database("A")
        b = inst.create_database("B")
        a.create_queue("SenderQueue")
        a.create_service("Sender", "SenderQueue")
        b.create_queue(handlers.QUEUE, activation_procedure="activation_handlers:record")
        b.create_service("Target", handlers.QUEUE, ["DEFAULT"])
        inst.start_activation(check_interval=0.05)
        a.begin_dialog("Sender", "Target").send(b"activated")
        wait_for(lambda: handlers.received == [b"activated"], what="the reader to take it")
        wait_for(lambda: _spans(exporter, f"process {handlers.QUEUE}"),
                 what="the reader to return")
    (process,) = _spans(exporter, f"process {handlers.QUEUE}")
    assert process.kind == SpanKind.CONSUMER
    _common(process, "process", handlers.QUEUE)
    (receive,) = [s for s in _spans(exporter, f"receive {handlers.QUEUE}")
                  if s.attributes["pybroker.message_type"] == "DEFAULT"]
    (send,) = _spans(exporter, "send Target")
    assert receive.parent.span_id == send.context.span_id  # the message's own trace
    assert [link.context.span_id for link in receive.links] == [process.context.span_id]


def test_messages_without_a_trace_context_or_with_a_malformed_one_still_flow(tmp_path):
    exporter = InMemorySpanExporter()
    a, b, shop, stock = instance_pair(tmp_path)
    try:
        b.enable_tracing(_provider(exporter, "B"))
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<plain/>", message_type=ORDER)  # A does not trace: no trace context
        assert [m.message_body for m in drain(stock, "StockQueue", 1)] == [b"<plain/>"]
        (plain,) = _spans(exporter, "receive StockQueue")
        assert plain.parent is None  # a trace of its own, begun at B

        a.enable_tracing(_provider(exporter, "A"))
        # what A puts on the wire is not a traceparent: B ignores it, takes the message
        a.kernel.messaging.tracing.context_of = lambda *key: "00-not-a-trace-context"
        conv.send(b"<odd/>", message_type=ORDER)
        assert [m.message_body for m in drain(stock, "StockQueue", 1)] == [b"<odd/>"]
        odd = [s for s in _spans(exporter, "receive StockQueue") if s is not plain]
        assert len(odd) == 1 and odd[0].parent is None
        (send,) = _spans(exporter, "send StockService", "A")
        assert odd[0].context.trace_id != send.context.trace_id
    finally:
        a.close()
        b.close()


def test_an_instance_that_does_not_trace_imports_no_opentelemetry(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        import pybroker
        with pybroker.connect({str(tmp_path / "i.duckdb")!r}) as inst:
            db = inst.create_database("D")
            db.create_queue("Q")
            db.create_service("S", queue="Q", contracts=["DEFAULT"])
            db.begin_dialog("S", "S").send(b"x")
            assert [m.message_body for m in db.receive("Q", timeout=1)] == [b"x"]
            assert not inst.tracing
        loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
        print("loaded:", loaded)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert "loaded: []" in out


def test_otel_must_be_true_or_false_and_tracer_provider_a_provider(tmp_path):
    with pytest.raises(pybroker.InvalidArgumentError, match="otel must be True or False"):
        pybroker.connect(None, otel="yes")  # type: ignore[arg-type]
    with pybroker.connect(None) as inst:
        with pytest.raises(pybroker.InvalidArgumentError, match="TracerProvider"):
            inst.enable_tracing(object())
        assert not inst.tracing
    with pybroker.connect(None, otel=True) as inst:
        assert inst.tracing


def test_a_message_sent_again_after_a_restart_carries_the_trace_it_was_sent_in(tmp_path):
    exporter = InMemorySpanExporter()
    a = pybroker.connect(tmp_path / "a.duckdb", retry_scale=0.01)
    b = pybroker.connect(tmp_path / "b.duckdb", retry_scale=0.01)
    try:
        a.trust("B", b.certificate)
        b.trust("A", a.certificate)
        b.enable_tracing(_provider(exporter, "B"))
        eb = b.start_endpoint(0)
        shop, stock = a.create_database("Shop"), b.create_database("Stock")
        for db in (shop, stock):
            define_objects(db)
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
        stock.create_queue("StockQueue")
        stock.create_service("StockService", queue="StockQueue", contracts=[CONTRACT])
        shop.create_route("ToStock", service_name="StockService", address=eb.address)
        a.enable_tracing(_provider(exporter, "A"))
        # A has no endpoint running: the message waits in its transmission queue
        shop.begin_dialog("ShopService", "StockService", contract=CONTRACT).send(
            b"<waited/>", message_type=ORDER)
        (send,) = _spans(exporter, "send StockService", "A")
        assert a.sql("SELECT traceparent FROM transmission_queue").fetchall() == [(
            format_traceparent(send.context.trace_id, send.context.span_id,
                               int(send.context.trace_flags)),)]
        a.close()
        a = pybroker.connect(tmp_path / "a.duckdb", retry_scale=0.01, otel=False)
        a.enable_tracing(_provider(exporter, "A again"))  # nothing kept in memory
        a.start_endpoint(0)  # what waited leaves now
        assert [m.message_body for m in drain(stock, "StockQueue", 1)] == [b"<waited/>"]
        (receive,) = _spans(exporter, "receive StockQueue", "B")
        assert receive.context.trace_id == send.context.trace_id
        assert receive.parent.span_id == send.context.span_id
    finally:
        a.close()
        b.close()
