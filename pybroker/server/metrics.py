"""What ``/metrics`` shows of a running instance, in the Prometheus text format (0.0.4).

The format is written here rather than with the prometheus_client package: it is a few
lines of text per family, every value comes from the kernel at scrape time (nothing is
registered in a process-wide registry an application would share), and a served instance
needs no new dependency. Counters come from the kernel's MessageCounters (committed work
only) and the client server's totals; gauges are read from the instance file at scrape
time, under the store's lock for as long as the few aggregate queries take.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pybroker.core.conversation.states import STATE_DESC
from pybroker.core.wire.transport_settings import LOGIN_REFUSALS, WireCounts
from pybroker.errors import BrokerError
from pybroker.kernel.kernel import Kernel

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# how long a scrape waits for a transaction of another thread to end before answering 503
LOCK_WAIT = 5.0
# the broker events whose count is pybroker_messages_dropped_total's, by subclass
DROPPED_EVENTS = ("Broker:Message Undeliverable", "Broker:Forwarded Message Dropped")


class MetricsBusyError(BrokerError):
    """The instance's connection stayed held by a transaction for the whole wait."""


@dataclass
class Family:
    """One metric family: its name, type, help text and samples (labels, value); a
    histogram's samples are named by their suffix (_bucket, _sum, _count) in ``suffixes``."""

    name: str
    kind: str  # "counter", "gauge" or "histogram"
    help: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)
    suffixes: list[str] = field(default_factory=list)

    def add(self, value: float, suffix: str = "", **labels: str) -> None:
        self.samples.append((labels, value))
        self.suffixes.append(suffix)


@dataclass(frozen=True)
class ClientTotals:
    """What the client server counted since it started, and its connections now."""

    connected: int
    refused: int
    calls: int
    open: int


def read_families(kernel: Kernel,
                  clients: Callable[[], ClientTotals] | None = None) -> list[Family]:
    """Every family ``/metrics`` shows now."""
    store = kernel.store
    if not store.lock.acquire(True, LOCK_WAIT):
        raise MetricsBusyError(
            f"a transaction held the instance for {LOCK_WAIT:g} s; scrape again")
    try:
        names = dict(store.run("metrics/select_database_names.sql"))
        queues = store.run("metrics/select_queue_depths.sql")
        transmission = store.run("metrics/select_transmission_queue_depths.sql")
        states = store.run("metrics/select_endpoint_states.sql")
        memory = store.run("metrics/select_memory.sql")[0][0]
    finally:
        store.lock.release()
    now = kernel.now()
    families = _counter_families(kernel, names)
    depth = Family("pybroker_queue_messages", "gauge",
                   "Ready messages in the queue (RECEIVE can take them).")
    age = Family("pybroker_queue_oldest_message_age_seconds", "gauge",
                 "Seconds since the queue's oldest ready message was enqueued (0: none).")
    for database, queue, _receives, _enqueues, ready, oldest in queues:
        depth.add(ready, database=database, queue=queue)
        age.add(0.0 if oldest is None else max(0.0, (now - oldest).total_seconds()),
                database=database, queue=queue)
    waiting = Family("pybroker_transmission_queue_messages", "gauge",
                     "Messages waiting in the transmission queue, by the service they go to "
                     "and whether the last attempt failed (a transmission_status is set).")
    for database, to_service, status, count in transmission:
        waiting.add(count, database=database, to_service=to_service, status=status)
    endpoints = Family("pybroker_conversation_endpoints", "gauge",
                       "Conversation endpoints by state.")
    for database, state, count in states:
        endpoints.add(count, database=database, state=STATE_DESC.get(state, state))
    families += [depth, age, waiting, endpoints]
    families += _process_families(kernel, memory, clients)
    return families


def _counter_families(kernel: Kernel, names: dict[int, str]) -> list[Family]:
    kinds = {
        "sent": Family("pybroker_messages_sent_total", "counter",
                       "Messages sent by the service's conversations (SEND, END CONVERSATION "
                       "and errors), in committed transactions.", []),
        "delivered": Family("pybroker_messages_delivered_total", "counter",
                            "Messages put into the queue of this instance (from this instance "
                            "or from the network), in committed transactions.", []),
        "received": Family("pybroker_messages_received_total", "counter",
                           "Messages taken from the queue by RECEIVE, in committed "
                           "transactions.", []),
        "acknowledged": Family("pybroker_messages_acknowledged_total", "counter",
                               "Messages the far side acknowledged: their rows left the "
                               "transmission queue (P5.2).", []),
        "rolled_back": Family("pybroker_poison_rollbacks_total", "counter",
                              "Transactions that received from the queue and rolled back "
                              "(C3: the fifth in a row turns the queue OFF).", []),
    }
    label = {"sent": "service", "delivered": "queue", "received": "queue",
             "acknowledged": "service", "rolled_back": "queue"}
    counters = kernel.messaging.counters
    for (what, database_id, name), count in sorted(counters.snapshot().items()):
        database = names.get(database_id, str(database_id))
        kinds[what].add(count, database=database, **{label[what]: name})
    events = Family("pybroker_broker_events_total", "counter",
                    "Broker events recorded (sys.broker_events) by class and subclass: "
                    "connections, refused logins, undeliverable or corrupted messages, "
                    "activation failures.")
    dropped = Family("pybroker_messages_dropped_total", "counter",
                     "Messages (or forwarded fragments) dropped, by reason: the broker "
                     "events Broker:Message Undeliverable and Broker:Forwarded Message "
                     "Dropped, whose senders send them again.")
    for (event_class, subclass), count in sorted(counters.events().items()):
        events.add(count, event_class=event_class, subclass=subclass)
        if event_class in DROPPED_EVENTS:
            dropped.add(count, reason=subclass)
    latency = _histogram("pybroker_send_commit_seconds",
                         "Seconds from a transaction's first SEND to its commit.",
                         counters.send_commit())
    arrival = _histogram("pybroker_arrival_commit_seconds",
                         "Seconds from a message's arrival from the network to the commit "
                         "that put it in its queue.", counters.arrival_commit())
    return [*kinds.values(), events, dropped, latency, arrival]


def _histogram(name: str, help_text: str,
               read: tuple[list[tuple[float, int]], float, int]) -> Family:
    family = Family(name, "histogram", help_text)
    buckets, total, count = read
    for bound, n in buckets:
        family.add(n, "_bucket", le="+Inf" if math.isinf(bound) else repr(bound))
    family.add(total, "_sum")
    family.add(count, "_count")
    return family


def _wire_families(kernel: Kernel, running: WireCounts | None) -> list[Family]:
    """The broker endpoint's counters: of the endpoints closed since the instance opened
    and of the one running (``running``), so they never go backwards while the process
    lives."""
    counts = kernel.closed_endpoints_counts
    if running is not None:
        counts = running if counts is None else counts.plus(running)
    families = []
    for name, help_text, value in (
            ("pybroker_fragments_sent_total", "Message fragments sent to the network the "
             "first time.", counts.fragments_sent if counts else 0),
            ("pybroker_fragments_retransmitted_total", "Message fragments sent again "
             "because no acknowledgement came in time (C5).",
             counts.fragments_retransmitted if counts else 0),
            ("pybroker_fragments_forwarded_total", "Fragments this instance passed on to "
             "their next hop as a forwarder (R7).",
             counts.fragments_forwarded if counts else 0),
            ("pybroker_broker_connect_failures_total", "Outbound connection attempts "
             "that failed.", counts.connect_failures if counts else 0)):
        family = Family(name, "counter", help_text)
        family.add(value)
        families.append(family)
    refused = Family("pybroker_broker_logins_refused_total", "counter",
                     "Broker connections refused before their peer logged in, by reason "
                     "(tls_handshake: the TLS failures).")
    for reason in LOGIN_REFUSALS:
        refused.add(counts.logins_refused.get(reason, 0) if counts else 0, reason=reason)
    peers = Family("pybroker_broker_peer_connections", "gauge",
                   "Open broker connections by peer (the endpoint address it gave).")
    for peer, n in sorted((running.peers if running else {}).items()):
        peers.add(n, peer=peer)
    return [*families, refused, peers]


def _process_families(kernel: Kernel, memory: int,
                      clients: Callable[[], ClientTotals] | None) -> list[Family]:
    endpoint = kernel.endpoint
    listening = endpoint is not None and not endpoint.is_closed
    up = Family("pybroker_broker_endpoint_up", "gauge",
                "1 while the broker endpoint listens, 0 otherwise.")
    up.add(1 if listening else 0)
    connections = Family("pybroker_broker_connections", "gauge",
                         "Open network connections of the broker endpoint.")
    # one trip to the transport's loop for every wire figure: the open connections are
    # the sum of the peer gauge's
    running = endpoint.wire_counts() if listening and endpoint is not None else None
    connections.add(sum(running.peers.values()) if running is not None else 0)
    readers = Family("pybroker_activation_readers", "gauge",
                     "Activated readers running now (C3).")
    activation = kernel.activation
    readers.add(0 if activation is None else len(activation.rows()[1]))
    started = Family("pybroker_activation_readers_started_total", "counter",
                     "Activated readers started.")
    failed = Family("pybroker_activation_readers_failed_total", "counter",
                    "Activated readers that raised, or whose procedure did not resolve.")
    started.add(0 if activation is None else activation.readers_started)
    failed.add(0 if activation is None else activation.readers_failed)
    families = [up, connections, readers, started, failed, *_wire_families(kernel, running)]
    if clients is not None:
        totals = clients()
        for name, help_text, value in (
                ("pybroker_client_connections", "Client connections open now.", totals.open),
                ("pybroker_clients_connected_total", "Clients admitted.", totals.connected),
                ("pybroker_clients_refused_total", "Clients refused.", totals.refused),
                ("pybroker_client_calls_total", "Calls answered.", totals.calls)):
            family = Family(name, "counter" if name.endswith("_total") else "gauge",
                            help_text)
            family.add(value)
            families.append(family)
    path = kernel.store.path
    file_bytes = Family("pybroker_duckdb_file_bytes", "gauge", "Size of the instance file.")
    wal_bytes = Family("pybroker_duckdb_wal_bytes", "gauge",
                       "Size of the instance file's write-ahead log (0: none).")
    file_bytes.add(_size(path))
    wal_bytes.add(_size(None if path is None else Path(f"{path}.wal")))
    held = Family("pybroker_duckdb_memory_bytes", "gauge", "Memory DuckDB holds now.")
    held.add(memory)
    return [*families, file_bytes, wal_bytes, held]


def _size(path: Path | None) -> int:
    if path is None:
        return 0
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


# -- the text format -------------------------------------------------------------------------


def render(families: Iterable[Family]) -> str:
    """The families in the Prometheus text exposition format."""
    lines = []
    for family in families:
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for (labels, value), suffix in zip(family.samples, family.suffixes, strict=True):
            name = family.name + suffix
            text = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
            lines.append(f"{name}{{{text}}} {_number(value)}" if text
                         else f"{name} {_number(value)}")
    return "\n".join(lines) + "\n"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))
