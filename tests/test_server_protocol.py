"""The client protocol without a socket (pybroker.api.served.protocol, pybroker.api.served.calls):
values and frames round-trip, any bytes at all are refused with ServerError only, a frame
too large is refused at its header, errors come back as the same class, message and
attributes, and the client proxies cover every public name of the embedded classes."""

from __future__ import annotations

import contextlib
import inspect
import uuid
from datetime import date, datetime, time, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import errors
from pybroker.api.served import calls, protocol
from pybroker.api.served.client import ClientConversation, ClientDatabase, ClientInstance
from pybroker.api.served.protocol import Call, Failure, FrameReader, Hello, Record, Result
from pybroker.errors import BrokerError, ServerError

scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
           | st.text() | st.binary() | st.datetimes() | st.dates() | st.times()
           | st.timedeltas() | st.uuids()
           | st.decimals(allow_nan=False, allow_infinity=False))
values = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=5) | st.lists(inner, max_size=5).map(tuple)
                   | st.dictionaries(st.text(max_size=8), inner, max_size=5)
                   | st.builds(Record, st.text(max_size=8),
                               st.lists(inner, max_size=4).map(tuple))),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(values)
def test_values_round_trip(value):
    out = bytearray()
    protocol.encode_value(value, out)
    assert protocol.decode_value(bytes(out)) == value


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_a_value_or_refused_with_server_error(data):
    with contextlib.suppress(ServerError):  # anything else fails the test
        protocol.decode_value(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(1, 17))
def test_any_bytes_fed_in_pieces_give_events_or_server_error(data, step):
    reader = FrameReader(max_frame=1024)
    try:
        for at in range(0, len(data), step):
            reader.feed(data[at:at + step])
            while reader.next_event() is not None:
                pass
    except ServerError:
        with pytest.raises(ServerError):  # and it stays refused
            reader.feed(b"x")


def test_frames_fed_byte_by_byte_give_the_events_sent():
    sent = (protocol.hello("tok", False, "me") + protocol.call(
        7, ("database", "A"), "call", "receive", ("q",), {"timeout": 1.5})
        + protocol.result(7, [Record("Message", (1, b"x"))])
        + protocol.failure(8, "NotFoundError", "no such queue", {"rule": None})
        + protocol.pipelined(9, ("conversation", "A", "h"), "call", "send", (b"x",), {}, 4))
    reader = FrameReader()
    events = []
    for byte in sent:
        reader.feed(bytes([byte]))
        while (event := reader.next_event()) is not None:
            events.append(event)
    assert events == [
        Hello(protocol.VERSION, "tok", False, "me"),
        Call(7, ("database", "A"), "call", "receive", ("q",), {"timeout": 1.5}),
        Result(7, [Record("Message", (1, b"x"))]),
        Failure(8, "NotFoundError", "no such queue", {"rule": None}),
        Call(9, ("conversation", "A", "h"), "call", "send", (b"x",), {}, pipelined=True,
             expected=4)]
    assert not reader.pending


def test_a_frame_too_large_is_refused_at_its_header():
    reader = FrameReader(max_frame=1000)
    header = protocol.HEADER.pack(protocol.MAGIC, protocol.VERSION, protocol.CALL, 1001)
    with pytest.raises(ServerError, match="larger than the largest accepted"):
        reader.feed(header)
    with pytest.raises(ServerError, match="larger than the largest"):
        protocol.frame(protocol.RESULT, b"x" * 2000, max_frame=1000)


@pytest.mark.parametrize(("header", "words"), [
    (b"HTTP/1.1 200", "wrong magic"),
    (protocol.HEADER.pack(protocol.MAGIC, 9, protocol.CALL, 1), "version 9"),
    (protocol.HEADER.pack(protocol.MAGIC, protocol.VERSION, 77, 1), "kind 77"),
])
def test_a_wrong_header_is_refused(header, words):
    with pytest.raises(ServerError, match=words):
        FrameReader().feed(header)


def test_a_frame_of_the_wrong_shape_is_refused():
    reader = FrameReader()
    reader.feed(protocol.frame(protocol.CALL, ["not an id", (), "call", "x", (), {}]))
    with pytest.raises(ServerError, match="CALL frame does not have its fields"):
        reader.next_event()


def test_a_value_nested_too_deep_or_of_an_unknown_type_is_refused():
    deep: list = []
    for _ in range(protocol.MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(ServerError, match="nests deeper"):
        protocol.frame(protocol.RESULT, deep)
    with pytest.raises(ServerError, match="cannot travel"):
        protocol.frame(protocol.RESULT, object())
    # a count larger than the bytes that follow builds nothing
    with pytest.raises(ServerError, match="ends early"):
        protocol.decode_value(b"l\xff\xff\xff\xff")


def test_the_api_dataclasses_travel_as_records_and_come_back_equal():
    message = pybroker.Message("h", "g", 3, "DEFAULT", b"body", "s", "DEFAULT", 9)
    route = pybroker.Route("r", 1, None, None, datetime(2030, 1, 1), "LOCAL", None, False)
    contract = pybroker.Contract("c", (("m", "ANY"),))
    sent = calls.to_wire([message, route, contract, {"x": uuid.UUID(int=5)}],
                         lambda v: None)
    out = bytearray()
    protocol.encode_value(sent, out)
    got = calls.from_wire(protocol.decode_value(bytes(out)), lambda r: r)
    assert got == [message, route, contract, {"x": uuid.UUID(int=5)}]


@pytest.mark.parametrize("exc", [
    errors.NotFoundError("queue 'q' does not exist in database 'A'"),
    errors.RouteDefinitionError("bad address", rule="R10.2", error_number=15405),
    errors.ConversationStateError("cannot send", role="I", state=None, event="SEND"),
    errors.UnsupportedOptionError("no WINDOWS", option="WINDOWS"),
    errors.ServerGoneError("the server for f is gone"),
])
def test_errors_come_back_as_the_same_class_message_and_attributes(exc):
    name, message, attributes = calls.error_fields(exc)
    back = calls.rebuild_error(name, message, attributes)
    assert type(back) is type(exc)
    assert str(back) == str(exc)
    assert vars(back) == vars(exc)


def test_an_unknown_error_class_arrives_as_broker_error():
    back = calls.rebuild_error("os.system", "nope", {"rule": "x"})
    assert type(back) is BrokerError and str(back) == "nope"


@pytest.mark.parametrize(("proxy", "embedded"), [
    (ClientInstance, pybroker.Instance), (ClientDatabase, pybroker.Database),
    (ClientConversation, pybroker.Conversation)])
def test_every_public_name_of_the_embedded_class_is_the_client_classs_own(proxy, embedded):
    public = {n for n in dir(embedded) if not n.startswith("_")  # data slots are the same
              and not inspect.ismemberdescriptor(getattr(embedded, n))}
    missing = sorted(n for n in public if not any(n in vars(c) for c in proxy.__mro__
                                                  if c not in embedded.__mro__))
    assert missing == []
    for name in calls.names(
            {ClientInstance: calls.INSTANCE, ClientDatabase: calls.DATABASE,
             ClientConversation: calls.CONVERSATION}[proxy], protocol.CALL_METHOD):
        assert inspect.signature(getattr(proxy, name)) == inspect.signature(
            getattr(embedded, name))


def test_outgoing_turns_iterables_without_a_type_into_lists():
    assert calls.outgoing("x", {"b"}) == ["b"]
    assert calls.outgoing("x", iter(["a", "b"])) == ["a", "b"]
    assert calls.outgoing("x", {"k": {"v"}.__iter__()}) == {"k": ["v"]}


def test_other_scalar_types_round_trip():
    value = [date(2020, 1, 2), time(3, 4, 5), timedelta(days=-1, seconds=5),
             Decimal("1.50"), 2**100, -(2**70)]
    out = bytearray()
    protocol.encode_value(value, out)
    assert protocol.decode_value(bytes(out)) == value
