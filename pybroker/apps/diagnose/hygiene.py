"""The conversation hygiene checks of diagnose (D-CNV-*): conversation endpoints that pile
up, and messages that wait. An endpoint counts when it is older than ``leak_age`` (its
create_date); a database is reported when ``leak_count`` or more such endpoints are in one
state (D-CNV-001, D-CNV-002, D-CNV-009 for CLOSED ones) or are targets of one service not
ended (D-CNV-008). A message of a transmission queue counts when it was enqueued longer
than ``leak_age`` ago; each status text with one or more is reported (D-CNV-005). Endpoints
idle for longer than ``idle_age`` (D-CNV-006) and dialogs their initiator ended first
(D-CNV-007) are reported from one. Every count of endpoints is read in one pass over them
(count_endpoint_hygiene.sql), added up here by what each rule groups by. Growth between two
readings is growth.py's."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pybroker.apps.diagnose.network import Network, Node

# The states that pile up when a side never ends its dialogs, and the rule of each.
_PILING = {"DISCONNECTED_INBOUND": "D-CNV-001", "CONVERSING": "D-CNV-002",
           "CLOSED": "D-CNV-009"}


def check(net: Network) -> None:
    before = net.now - net.leak_age
    for node in net.nodes:
        counts = node.target.rows("count_endpoint_hygiene", created_before=before)
        _piling(net, node, counts)
        _waiting(net, node)
        _idle(net, node)
        _ended_first(net, node, counts)
        _unended_targets(net, node, counts)


def _summed(rows: list[dict[str, Any]], by: tuple[str, ...], values: tuple[str, ...]
            ) -> list[dict[str, Any]]:
    """``rows`` (of count_endpoint_hygiene.sql) added up by the columns ``by``, in their
    order: each with the sums of ``values`` and the oldest create_date."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        group = tuple(r[c] for c in by)
        got = out.get(group)
        if got is None:
            out[group] = {**{c: r[c] for c in by}, **{v: r[v] for v in values},
                          "oldest": r["oldest"]}
            continue
        for v in values:
            got[v] += r[v]
        got["oldest"] = min(got["oldest"], r["oldest"])
    return [out[k] for k in sorted(out)]


def _piling(net: Network, node: Node, counts: list[dict[str, Any]]) -> None:
    rows = _summed(counts, ("database_name", "state_desc"), ("endpoints", "older"))
    for database in sorted({r["database_name"] for r in rows}):
        mine = [r for r in rows if r["database_name"] == database]
        states = ", ".join(f"{r['state_desc']} {r['endpoints']:,}" for r in mine)
        total = sum(r["endpoints"] for r in mine)
        for row in mine:
            code = _PILING.get(row["state_desc"])
            if code is not None and row["older"] >= net.leak_count:
                net.add(code, node, database, [f"{row['state_desc']} endpoints"],
                        older=f"{row['older']:,}", endpoints=f"{total:,}",
                        age=_age(net.leak_age), states=states)


def _idle(net: Network, node: Node) -> None:
    before = net.now - net.idle_age
    for row in node.target.rows("select_idle_endpoints", idle_before=before):
        net.add("D-CNV-006", node, row["database_name"],
                [f"{row['state_desc']} endpoints ({row['endpoints']:,} idle)"],
                endpoints=f"{row['endpoints']:,}", state=row["state_desc"],
                age=_age(net.idle_age), oldest=f"{row['oldest']:%Y-%m-%d %H:%M:%S}")


def _ended_first(net: Network, node: Node, counts: list[dict[str, Any]]) -> None:
    rows = _summed([r for r in counts if r["ended_first_from"] is not None],
                   ("database_name", "service_name", "ended_first_from"), ("endpoints",))
    if not rows:
        return
    closed_here = {(r["database_name"], r["service_name"], r["far_service"]):
                   r["initiators_closed"] for r in node.target.rows("count_closed_initiators")}
    for row in rows:
        far_service = row["ended_first_from"]
        initiators_closed = closed_here.get(
            (row["database_name"], row["service_name"], far_service), 0)
        closed = (f", and {initiators_closed:,} of their initiators CLOSED here"
                  if initiators_closed else "")
        net.add("D-CNV-007", node, row["database_name"],
                [f"service {row['service_name']}", f"far service {far_service}",
                 f"DISCONNECTED_INBOUND endpoints ({row['endpoints']:,})"],
                endpoints=f"{row['endpoints']:,}", service=row["service_name"],
                far_service=far_service, closed=closed,
                oldest=f"{row['oldest']:%Y-%m-%d %H:%M:%S}")


def _unended_targets(net: Network, node: Node, counts: list[dict[str, Any]]) -> None:
    targets = [{**r, "disconnected": r["older"] if r["state_desc"] == "DISCONNECTED_INBOUND"
                else 0} for r in counts if not r["is_initiator"]
               and r["state_desc"] in ("CONVERSING", "DISCONNECTED_INBOUND")]
    for row in _summed(targets, ("database_name", "service_name"),
                       ("endpoints", "older", "disconnected")):
        if row["older"] >= net.leak_count:
            net.add("D-CNV-008", node, row["database_name"],
                    [f"service {row['service_name']}"], service=row["service_name"],
                    older=f"{row['older']:,}", endpoints=f"{row['endpoints']:,}",
                    disconnected=f"{row['disconnected']:,}", age=_age(net.leak_age))


def _waiting(net: Network, node: Node) -> None:
    before = net.now - net.leak_age
    for row in node.target.rows("count_waiting_messages", waiting_before=before):
        status = row["transmission_status"] or ("none (blank: sent, or about to be, and not "
                                                "acknowledged yet)")
        net.add("D-CNV-005", node, row["database_name"],
                [f"transmission queue ({row['messages']:,} message(s))"],
                count=f"{row['messages']:,}", age=_age(net.leak_age),
                oldest=f"{row['oldest']:%Y-%m-%d %H:%M:%S}", status=status)


def _age(age: dt.timedelta) -> str:
    seconds = int(age.total_seconds())
    if seconds % 86400 == 0:
        return f"{seconds // 86400} day(s)"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} hour(s)"
    return f"{seconds} s"
