"""Growth between two readings (D-CNV-003, D-CNV-004): each target with an earlier reading
(``diagnose --since SNAPSHOT``) is compared with it, database by database; a database is
reported when its conversation endpoints, or its transmission queue, grew by ``leak_count``
or more. An earlier reading belongs to the target whose msdb has its msdb's broker
identifier (every instance's msdb gets its own), and was taken when its file was last
written (a snapshot is never written after it is taken)."""

from __future__ import annotations

import datetime as dt
from collections import Counter

from pybroker.apps.diagnose.network import Network, Node


def check(net: Network) -> None:
    for node in net.nodes:
        if node.name in net.earlier:
            _grown(net, node, *net.earlier[node.name])


def _interval(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} hour(s)"
    return f"{seconds:.0f} s"


def _counts(rows: list[dict], key: str, value: str) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for r in rows:
        out.setdefault(r["database_name"], Counter())[r[key] or "(blank)"] += r[value]
    return out


def _grown(net: Network, node: Node, earlier, taken: dt.datetime) -> None:
    interval = _interval(max((net.now - taken).total_seconds(), 0))
    since = f"{earlier.name} ({taken:%Y-%m-%d %H:%M:%S})"
    endpoints = [(_counts(t.rows("count_conversation_endpoints", created_before=net.now),
                          "state_desc", "endpoints")) for t in (earlier, node.target)]
    queued = [_counts(t.rows("count_transmission_queue"), "transmission_status", "messages")
              for t in (earlier, node.target)]
    for code, (then, now), shown in (("D-CNV-003", endpoints, "conversation endpoints"),
                                     ("D-CNV-004", queued, "transmission queue")):
        for database in sorted(now):
            before = sum(then.get(database, Counter()).values())
            after = sum(now[database].values())
            if after - before < net.leak_count:
                continue
            old = then.get(database, Counter())
            by = ", ".join(f"{k} {now[database][k] - old.get(k, 0):+,}"
                           for k in sorted(set(now[database]) | set(old))
                           if now[database][k] != old.get(k, 0))
            net.add(code, node, database, [shown], before=f"{before:,}", after=f"{after:,}",
                    growth=f"{after - before:,}", interval=interval, since=since, states=by,
                    statuses=by)
