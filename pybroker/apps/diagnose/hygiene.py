"""The conversation hygiene checks of diagnose (D-CNV-*): conversation endpoints that pile
up, and messages that wait. An endpoint counts when it is older than ``leak_age`` (its
create_date); a database is reported when ``leak_count`` or more such endpoints are in one
state (D-CNV-001, D-CNV-002, D-CNV-009 for CLOSED ones) or are targets of one service not
ended (D-CNV-008). A message of a transmission queue counts when it was enqueued longer
than ``leak_age`` ago; each status text with one or more is reported (D-CNV-005). Endpoints
idle for longer than ``idle_age`` (D-CNV-006) and dialogs their initiator ended first
(D-CNV-007) are reported from one. Growth between two readings is growth.py's."""

from __future__ import annotations

import datetime as dt

from pybroker.apps.diagnose.network import Network

# The states that pile up when a side never ends its dialogs, and the rule of each.
_PILING = {"DISCONNECTED_INBOUND": "D-CNV-001", "CONVERSING": "D-CNV-002",
           "CLOSED": "D-CNV-009"}


def check(net: Network) -> None:
    before = net.now - net.leak_age
    for node in net.nodes:
        rows = node.target.rows("count_conversation_endpoints", created_before=before)
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
        _waiting(net, node)
        _idle(net, node)
        _ended_first(net, node)
        _unended_targets(net, node)


def _idle(net: Network, node) -> None:
    before = net.now - net.idle_age
    for row in node.target.rows("select_idle_endpoints", idle_before=before):
        net.add("D-CNV-006", node, row["database_name"],
                [f"{row['state_desc']} endpoints ({row['endpoints']:,} idle)"],
                endpoints=f"{row['endpoints']:,}", state=row["state_desc"],
                age=_age(net.idle_age), oldest=f"{row['oldest']:%Y-%m-%d %H:%M:%S}")


def _ended_first(net: Network, node) -> None:
    for row in node.target.rows("count_ended_first"):
        closed = (f", and {row['initiators_closed']:,} of their initiators CLOSED here"
                  if row["initiators_closed"] else "")
        net.add("D-CNV-007", node, row["database_name"],
                [f"service {row['service_name']}", f"far service {row['far_service']}",
                 f"DISCONNECTED_INBOUND endpoints ({row['endpoints']:,})"],
                endpoints=f"{row['endpoints']:,}", service=row["service_name"],
                far_service=row["far_service"], closed=closed,
                oldest=f"{row['oldest']:%Y-%m-%d %H:%M:%S}")


def _unended_targets(net: Network, node) -> None:
    before = net.now - net.leak_age
    for row in node.target.rows("count_unended_targets", created_before=before):
        if row["older"] >= net.leak_count:
            net.add("D-CNV-008", node, row["database_name"],
                    [f"service {row['service_name']}"], service=row["service_name"],
                    older=f"{row['older']:,}", endpoints=f"{row['endpoints']:,}",
                    disconnected=f"{row['disconnected']:,}", age=_age(net.leak_age))


def _waiting(net: Network, node) -> None:
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
