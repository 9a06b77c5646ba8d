"""The conversation hygiene checks of diagnose (D-CNV-*): conversation endpoints that pile
up, and messages that wait. An endpoint counts when it is older than ``leak_age`` (its
create_date); a database is reported when ``leak_count`` or more such endpoints are in one
state. A message of a transmission queue counts when it was enqueued longer than
``leak_age`` ago; each status text with one or more is reported (D-CNV-005). Growth between
two readings is growth.py's."""

from __future__ import annotations

import datetime as dt

from pybroker.apps.diagnose.network import Network

# The states that pile up when a side never ends its dialogs, and the rule of each.
_PILING = {"DISCONNECTED_INBOUND": "D-CNV-001", "CONVERSING": "D-CNV-002"}


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
