"""The sys views of what a process holds in memory, as it is when they are read.

``sys.dm_broker_connections``, ``sys.dm_broker_forwarded_messages`` (R7),
``sys.dm_broker_mirrored_routes`` (R9), ``sys.dm_broker_queue_monitors`` and
``sys.dm_broker_activated_tasks`` (C3), ``sys.dm_broker_conversation_group_locks`` and
``sys.dm_broker_waits`` (C7: the locks of open transactions), and the listening endpoint of
``sys.service_broker_endpoints`` and ``sys.tcp_endpoints`` (P2) show the state of the
transport and of activation, which live in Python objects. Their tables are written here,
right before a query that names one of them runs (``Instance.sql()``, and so a client's,
the PostgreSQL wire's and ``pybroker query``'s; ``Instance.snapshot()``), so a read sees
the state at that moment and nothing is written while nobody reads.

Why tables rewritten on read, and not a view over Python: a view in the file has to be
plain SQL, since the DuckDB CLI and a snapshot open the file without this process (a Python
function in a view would break them), and DuckDB's Python client has no table functions.
Why on a connection of its own: the rows are written outside any transaction the instance's
connection has open (one another thread may hold for long), so a read never waits for one.
Every write of these tables goes through here (apart from emptying them at open, before
any thread runs), so two writers never conflict in DuckDB.

A file whose process ended shows none of it: the tables are emptied when an instance opens
the file for writing and when it closes.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pybroker.core.conversation import columns
from pybroker.errors import BrokerError

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.storage.store import Store

# a query naming one of these reads what this module writes
_NAMED = re.compile(
    r"dm_broker_(connections|forwarded_messages|mirrored_routes|queue_monitors|"
    r"activated_tasks|conversation_group_locks|waits)|service_broker_endpoints|"
    r"tcp_endpoints", re.IGNORECASE)

_CONNECTION_COLUMNS = (
    "connection_id", "peer_address", "state_desc", "is_accept", "connect_time", "login_time",
    "last_activity_time", "authentication_method", "principal_name", "login_state_desc",
    "encryption_algorithm_desc", "total_bytes_sent", "total_bytes_received",
    "total_fragments_sent", "total_fragments_received", "total_sends", "total_receives",
    "is_send_flow_controlled")
_MIRRORED_COLUMNS = (
    "address", "mirror_address", "service_name", "broker_instance", "state_desc",
    "principal_address", "since", "last_probe_time", "address_answer",
    "mirror_address_answer")
_MONITOR_COLUMNS = ("database_id", "queue_name", "state", "last_empty_rowset_time",
                    "last_activated_time", "tasks_waiting")
_TASK_COLUMNS = ("spid", "database_id", "queue_name", "procedure_name", "execute_as",
                 "start_time")
_LOCK_COLUMNS = ("database_id", "conversation_group_id", "transaction_id", "thread_name",
                 "since", "waiting_transactions")
_WAIT_COLUMNS = ("transaction_id", "thread_name", "database_id", "conversation_group_id",
                 "blocking_transaction_id", "wait_started", "is_committing")


@dataclass
class LiveRows:
    """What the process holds now, as the rows of the tables behind the views."""

    listener: tuple[str, bool, datetime] | None = None  # (address, encrypted, since)
    connections: Sequence[tuple[Any, ...]] = ()
    forwarded: Sequence[tuple[Any, ...]] = ()
    mirrored: Sequence[tuple[Any, ...]] = ()
    monitors: Sequence[tuple[Any, ...]] = ()
    tasks: Sequence[tuple[Any, ...]] = ()
    group_locks: Sequence[tuple[Any, ...]] = ()  # in _LOCK_COLUMNS' order (C7)
    lock_waits: Sequence[tuple[Any, ...]] = ()  # in _WAIT_COLUMNS' order
    empty: bool = field(init=False)

    def __post_init__(self) -> None:
        self.empty = not (self.listener or self.connections or self.forwarded
                          or self.mirrored or self.monitors or self.tasks
                          or self.group_locks or self.lock_waits)


_EVENTS = re.compile(r"broker_events", re.IGNORECASE)


def names_live_view(query: str) -> bool:
    """Whether ``query`` names one of the views of in-memory state."""
    return _NAMED.search(query) is not None


def names_broker_events(query: str) -> bool:
    """Whether ``query`` names sys.broker_events, whose newest events wait in memory for
    the next unit of work (at most a second)."""
    return _EVENTS.search(query) is not None


class LiveViews:
    """Writes ``rows()`` (what the process holds now) to the tables behind the views."""

    def __init__(self, store: Store, rows: Callable[[], LiveRows]) -> None:
        self._store = store
        self._rows = rows
        self._lock = threading.Lock()
        self._written_empty = True  # the tables hold nothing (emptied at open)

    def refresh(self) -> None:
        """Write the state of this moment; nothing when the tables are empty and so is
        the state. A failure here never stops the read that asked: it reads what the
        tables held."""
        if self._store.read_only or self._store.closed:
            return
        with self._lock:
            live = self._rows()
            if live.empty and self._written_empty:
                return
            try:
                self._store.replace_apart(_statements(live))
            except BrokerError:
                return
            self._written_empty = live.empty

    def clear(self) -> None:
        """Empty the tables (the instance closes: what this process held goes with it)."""
        self._rows = LiveRows
        self.refresh()


def _statements(live: LiveRows) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = [("wire/delete_listeners.sql", {}),
                                              ("wire/delete_connections.sql", {})]
    if live.listener is not None:
        address, encrypted, since = live.listener
        out.append(("wire/insert_listener.sql", {
            "address": address, "is_encryption_enabled": encrypted, "since": since}))
    out += [("wire/insert_connection.sql", dict(zip(_CONNECTION_COLUMNS, row, strict=True)))
            for row in live.connections]
    out.append(("wire/delete_forwarded_messages.sql", {}))
    if live.forwarded:
        out.append(("wire/insert_forwarded_messages.sql", _forwarded_columns(live.forwarded)))
    out.append(("wire/delete_mirrored_routes.sql", {}))
    out += [("wire/insert_mirrored_route.sql", dict(zip(_MIRRORED_COLUMNS, row, strict=True)))
            for row in live.mirrored]
    out.append(("activation/delete_queue_monitors.sql", {}))
    out += [("activation/insert_queue_monitor.sql",
             dict(zip(_MONITOR_COLUMNS, row, strict=True))) for row in live.monitors]
    out.append(("activation/delete_activated_tasks.sql", {}))
    out += [("activation/insert_activated_task.sql",
             dict(zip(_TASK_COLUMNS, row, strict=True))) for row in live.tasks]
    out.append(("conversation/delete_group_locks.sql", {}))
    out += [("conversation/insert_group_lock.sql",
             dict(zip(_LOCK_COLUMNS, row, strict=True))) for row in live.group_locks]
    out.append(("conversation/delete_lock_waits.sql", {}))
    out += [("conversation/insert_lock_wait.sql",
             dict(zip(_WAIT_COLUMNS, row, strict=True))) for row in live.lock_waits]
    return out


def _forwarded_columns(rows: Sequence[tuple[Any, ...]]) -> dict[str, str]:
    """Transport.forwarded()'s rows as the bound columns of insert_forwarded_messages.sql."""
    c = list(zip(*rows, strict=True))
    return {
        "conversation_id": columns.guids(c[0]), "is_initiator": columns.flags(c[1]),
        "to_service_name": columns.texts(c[2]), "to_broker_instance": columns.guids(c[3]),
        "from_service_name": columns.texts(c[4]), "from_broker_instance": columns.guids(c[5]),
        "adjacent_broker_address": columns.texts(c[6]),
        "message_sequence_number": columns.ints(c[7]),
        "message_fragment_number": columns.ints(c[8]), "hops_remaining": columns.ints(c[9]),
        "time_to_live": columns.ints(c[10]), "time_consumed": columns.ints(c[11]),
        "message_id": columns.guids(c[12])}
