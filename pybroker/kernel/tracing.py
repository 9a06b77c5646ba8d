"""OpenTelemetry spans of an instance's messages, after the messaging semantic conventions
(pybroker/docs/otel.md): ``send {service}`` (PRODUCER), ``receive {queue}`` (CLIENT),
``process {queue}`` around an activated reader (CONSUMER) and ``forward {service}`` on a
forwarder (PRODUCER), with the message's W3C traceparent carried from SEND to RECEIVE,
across instances and forwarders (the MESSAGE frame's trace context, frames.py).

This is the only module that imports OpenTelemetry, and nothing imports it but
``enable_tracing``: an instance that does not trace never loads it. The engine holds one
``MessageTracing`` in ``Messaging.tracing`` (None when off: the one check on its path).

The trace context of each message is kept here, in memory, keyed by the message's identity
on the network (conversation id, whether the initiator sent it, sequence number): SEND
puts its span's context there, an arrival from the network the one it carried, RECEIVE
takes it. The key is the same on both sides of a conversation, so a message delivered
inside the instance finds its context with no copy. What is kept is bounded
(MAX_CONTEXTS, the oldest go first); a context not kept (an instance that restarted
before the message left or was received) means a RECEIVE without a parent: a new trace.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from pybroker.core.wire.trace_context import format_traceparent, parse_traceparent
from pybroker.errors import BrokerError, InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.core.conversation.endpoint import ConversationEndpoint
    from pybroker.core.conversation.model import Message
    from pybroker.core.wire.frame_types import MessageFragment
    from pybroker.kernel.messaging.unit_of_work import UnitOfWork

SYSTEM = "pybroker"
MAX_CONTEXTS = 100_000  # trace contexts kept in memory at most (the oldest go first)

MessageKey = tuple[str, bool, int]  # conversation id, sent by the initiator, sequence


class Messaging(Protocol):
    """What tracing needs of the messaging engine (engine.py's Messaging, which holds it):
    public names."""

    tracing: MessageTracing | None
    endpoints: Any  # endpoint_cache.EndpointCache: get(handle)

    def catalog(self, database_id: int) -> Any: ...

    def current(self) -> Any: ...

    def endpoint(self, handle: str, database_id: int | None = None) -> ConversationEndpoint: ...


def message_id(conversation_id: str, from_initiator: bool, sequence: int) -> str:
    """A message's id (``messaging.message.id``): the same on every instance it passes, and
    the one sys.dm_broker_forwarded_messages shows."""
    return str(uuid.uuid5(uuid.UUID(conversation_id), f"{int(from_initiator)}/{sequence}"))


def _remote_context(traceparent: str | None) -> Any:
    """The OpenTelemetry context whose parent is ``traceparent``, or None when it is
    missing or malformed (what arrives from the network is never trusted)."""
    parsed = parse_traceparent(traceparent)
    if parsed is None:
        return None
    span_context = SpanContext(parsed.trace_id, parsed.span_id, is_remote=True,
                               trace_flags=TraceFlags(parsed.trace_flags))
    return trace.set_span_in_context(NonRecordingSpan(span_context))


def _traceparent_of(span: Any) -> str | None:
    context = span.get_span_context()
    if not context.is_valid:
        return None
    return format_traceparent(context.trace_id, context.span_id, int(context.trace_flags))


class MessageTracing:
    """The spans of one instance's messages and the trace contexts they carry."""

    def __init__(self, messaging: Messaging, tracer_provider: Any = None) -> None:
        from pybroker import __version__

        self._m = messaging
        self.tracer = trace.get_tracer("pybroker", __version__, tracer_provider=tracer_provider)
        self._contexts: OrderedDict[MessageKey, str] = OrderedDict()
        self._lock = threading.Lock()

    # -- the trace contexts kept -----------------------------------------------------------

    def keep(self, key: MessageKey, traceparent: str) -> None:
        with self._lock:
            self._contexts[key] = traceparent
            self._contexts.move_to_end(key)
            while len(self._contexts) > MAX_CONTEXTS:
                self._contexts.popitem(last=False)

    def context_of(self, conversation_id: str, from_initiator: bool, sequence: int
                   ) -> str | None:
        """The traceparent a message sent from here carries to the network."""
        with self._lock:
            return self._contexts.get((conversation_id, from_initiator, sequence))

    def _take(self, key: MessageKey) -> str | None:
        with self._lock:
            return self._contexts.pop(key, None)

    def kept(self) -> int:
        """How many trace contexts are kept now."""
        with self._lock:
            return len(self._contexts)

    # -- the spans -------------------------------------------------------------------------

    def send(self, uow: UnitOfWork, ep: ConversationEndpoint, seq: int, message_type: str,
             size: int, dispatch: Callable[[], None]) -> None:
        """``dispatch()`` (the SEND's delivery, in ``uow``) inside its ``send {service}``
        span; the message carries the span's context, which its row of the transmission
        queue keeps (written when ``uow`` flushes) for a sending after a restart."""
        attributes = {
            "messaging.system": SYSTEM,
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
            "messaging.destination.name": ep.far_service,
            "messaging.message.id": message_id(ep.conversation_id, bool(ep.is_initiator), seq),
            "messaging.message.conversation_id": ep.conversation_handle,
            "messaging.message.body.size": size,
            "pybroker.conversation_id": ep.conversation_id,
            "pybroker.message_type": message_type,
            "pybroker.database": self._m.catalog(ep.database_id).name,
        }
        with self.tracer.start_as_current_span(
                f"send {ep.far_service}", kind=SpanKind.PRODUCER, attributes=attributes) as span:
            traceparent = _traceparent_of(span)
            if traceparent is not None:
                self.keep((ep.conversation_id, bool(ep.is_initiator), seq), traceparent)
                if uow.traced is None:
                    uow.traced = []
                uow.traced.append((ep.conversation_handle, seq, traceparent))
            dispatch()

    def restore(self, uow: UnitOfWork, handles: str) -> None:
        """The trace contexts the transmission queue keeps for what the endpoints in
        ``handles`` (comma-joined) still have to send: kept again, so that what is sent
        again after a restart carries the trace it began in."""
        for conversation_id, is_initiator, seq, traceparent in uow.sql(
                "tracing/select_trace_contexts_of.sql", {"conversation_handle": handles}):
            key = (conversation_id, bool(is_initiator), int(seq))
            if self.context_of(*key) is None:
                self.keep(key, traceparent)

    def arrived(self, fragments: list[MessageFragment],
                forwards: list[tuple[int, str, MessageFragment, str]]
                ) -> list[tuple[int, str, MessageFragment, str]]:
        """A batch of arrivals: the trace context each message for this instance carries
        is kept for its RECEIVE (as it came: RECEIVE ignores a malformed one); what is
        forwarded is returned in its forward spans (``forwarded``)."""
        for f in fragments:
            if f.traceparent is not None and f.fragment_number == 0:
                self.keep((f.conversation_id, f.from_initiator, f.sequence), f.traceparent)
        return self.forwarded(forwards) if forwards else forwards

    def received(self, database_id: int, queue: str, messages: list[Message],
                 started_ns: int) -> None:
        """One ``receive {queue}`` span per message RECEIVE took (from when the RECEIVE
        began), the child of the context the message carried, linked to the span the
        receiver runs in (an activated reader's ``process`` span)."""
        if not messages:
            return
        current = trace.get_current_span().get_span_context()
        links = [Link(current)] if current.is_valid else None
        database = self._m.catalog(database_id).name
        ended = time.time_ns()
        for message in messages:
            seq = message.message_sequence_number
            ep = self._endpoint(message.conversation_handle)
            attributes: dict[str, Any] = {
                "messaging.system": SYSTEM,
                "messaging.operation.name": "receive",
                "messaging.operation.type": "receive",
                "messaging.destination.name": queue,
                "messaging.message.conversation_id": message.conversation_handle,
                "messaging.message.body.size": len(message.message_body),
                "pybroker.message_type": message.message_type_name,
                "pybroker.database": database,
            }
            parent = None
            if ep is not None and seq >= 0:
                key = (ep.conversation_id, not ep.is_initiator, seq)
                attributes["messaging.message.id"] = message_id(*key)
                attributes["pybroker.conversation_id"] = ep.conversation_id
                parent = _remote_context(self._take(key))
            span = self.tracer.start_span(
                f"receive {queue}", context=parent, kind=SpanKind.CLIENT,
                attributes=attributes, links=links, start_time=started_ns)
            span.end(end_time=ended)

    def _endpoint(self, handle: str) -> ConversationEndpoint | None:
        """The receiving endpoint of a message: from memory, or read from the file when no
        transaction of this thread holds a conversation group (a read of the store then
        waits for no one who could wait for this thread)."""
        ep = self._m.endpoints.get(handle)
        if ep is None and self._m.current() is None:
            with contextlib.suppress(BrokerError):
                ep = self._m.endpoint(handle)
        return ep

    @contextlib.contextmanager
    def process(self, database_id: int, queue: str) -> Iterator[None]:
        """An activated reader's run, as the current ``process {queue}`` span."""
        attributes = {
            "messaging.system": SYSTEM,
            "messaging.operation.name": "process",
            "messaging.operation.type": "process",
            "messaging.destination.name": queue,
            "pybroker.database": self._m.catalog(database_id).name,
        }
        with self.tracer.start_as_current_span(
                f"process {queue}", kind=SpanKind.CONSUMER, attributes=attributes):
            yield

    def forwarded(self, items: list[tuple[int, str, MessageFragment, str]]
                  ) -> list[tuple[int, str, MessageFragment, str]]:
        """Arrivals this instance forwards (R7): each message's first fragment in a
        ``forward {service}`` span, the child of the context it carried; every fragment
        goes on carrying the forward span's context."""
        out = []
        for connection, peer, f, address in items:
            parent = _remote_context(f.traceparent)
            attributes = {
                "messaging.system": SYSTEM,
                "messaging.operation.name": "forward",
                "messaging.operation.type": "send",
                "messaging.destination.name": f.to_service,
                "messaging.message.id": message_id(f.conversation_id, f.from_initiator,
                                                   f.sequence),
                "pybroker.conversation_id": f.conversation_id,
                "pybroker.fragment_number": f.fragment_number,
                "server.address": address,
            }
            span = self.tracer.start_span(f"forward {f.to_service}", context=parent,
                                          kind=SpanKind.PRODUCER, attributes=attributes)
            traceparent = _traceparent_of(span)
            span.end()
            if traceparent is not None:
                f = _with_traceparent(f, traceparent)
            out.append((connection, peer, f, address))
        return out


def _with_traceparent(f: MessageFragment, traceparent: str) -> MessageFragment:
    from dataclasses import replace

    return replace(f, traceparent=traceparent)


def enable_tracing(messaging: Messaging, tracer_provider: Any = None) -> MessageTracing:
    """Trace the messages of ``messaging`` from now (the global tracer provider unless one
    is given); the same one again if it traces already."""
    if tracer_provider is not None and not hasattr(tracer_provider, "get_tracer"):
        raise InvalidArgumentError(
            f"tracer_provider must be an OpenTelemetry TracerProvider, not "
            f"{type(tracer_provider).__name__}")
    tracing = messaging.tracing
    if tracing is None:
        tracing = messaging.tracing = MessageTracing(messaging, tracer_provider)
    return tracing
