"""The demo's two instances (``pybroker demo``, last part): a dialog over TCP between two
instance files, and what it prints of the catalog (P2, P5.2, R1.2, R6, C1, C4, C6)."""

from __future__ import annotations

import pytest

from pybroker.devtools.demos.routing import run_two_instances


def _tables(lines: list[str], after: str) -> list[list[list[str]]]:
    """The tables printed after the first line that contains ``after``: each a list of
    rows (the header first), split on runs of two or more spaces."""
    import re

    start = next(i for i, line in enumerate(lines) if after in line)
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in lines[start + 1:]:
        if line.startswith("      "):
            if current is None:
                current = []
                tables.append(current)
            if line.strip() != "(no rows)":
                current.append(re.split(r"\s{2,}", line.strip()))
        else:
            current = None
    return tables


@pytest.fixture(scope="module")
def demo() -> list[str]:
    lines: list[str] = []
    run_two_instances(lines.append)
    return lines


def test_the_routes_point_each_way(demo):
    routes = _tables(demo, "the routes each way")
    a_port = demo[0].split("listens on tcp://127.0.0.1:")[1].split(",")[0]
    b_port = demo[0].split(" on tcp://127.0.0.1:")[2].split(";")[0]
    assert routes[0][1] == ["Shop", "ToWarehouse", "StockService", f"tcp://127.0.0.1:{b_port}"]
    assert routes[1][1] == ["Warehouse", "ToShop", "OrderService", f"tcp://127.0.0.1:{a_port}"]


def test_the_messages_cross_and_the_transmission_queue_drains(demo):
    out = "\n".join(demo)
    assert ("B: RECEIVE FROM StockQueue -> 3 messages, sequence 0, 1, 2: "
            '<StockRequest sku="A-100" quantity="2"/>, <StockRequest sku="B-200" '
            'quantity="1"/>, <StockRequest sku="C-300" quantity="5"/>') in out
    # before the acknowledgements: at most the three rows, in order, status blank (C4)
    before = _tables(demo, "three SENDs, COMMIT")[0]
    assert [r[:5] for r in before[1:]] == [
        ["Shop", "OrderService", "StockService", str(n), "StockRequest"]
        for n in range(3)][:len(before) - 1]
    # after: Shop's transmission queue is empty (P5.2)
    after = _tables(demo, "A deletes the acknowledged rows")[0]
    assert after == [["database_name", "from_service_name", "to_service_name",
                      "message_sequence_number", "message_type_name", "message_body",
                      "transmission_status"]]
    # the reply and the EndDialog came back to Shop (R6), and both sides closed (C1)
    assert "A: RECEIVE FROM OrderQueue -> StockReply, EndDialog" in out
    a_side, b_side = _tables(demo, "A: RECEIVE FROM OrderQueue")[:2]
    assert a_side[1] == ["Shop", "OrderService", "StockService", "True", "CLOSED", "3", "2"]
    assert b_side[1] == ["Warehouse", "StockService", "OrderService", "False", "CLOSED",
                         "2", "3"]


def test_one_connection_each_way_and_the_events(demo):
    a_conn, b_conn, events = _tables(demo, "one connection serves both ways")
    assert len(a_conn) == 2 and len(b_conn) == 2  # one connection on each side
    peer, state, is_accept, principal, encryption, sent, received = a_conn[1]
    b_address = demo[0].split(" on ")[2].split(";")[0]
    assert peer == b_address  # A opened it, to B's endpoint
    assert (state, is_accept, principal, encryption) == (
        "CONNECTED", "False", "Warehouse", "AES (TLS 1.3)")
    assert int(sent) >= 3 and int(received) >= 2  # resends possible on a busy machine
    peer, state, is_accept, principal, encryption, sent, received = b_conn[1]
    assert peer.startswith("tcp://127.0.0.1:") and peer != b_address  # A's socket
    assert (state, is_accept, principal, encryption) == (
        "CONNECTED", "True", "Shop", "AES (TLS 1.3)")
    assert int(sent) >= 2 and int(received) >= 3
    assert events[1][:2] == ["Broker:Connection", "Listening"]
    assert ["Broker:Connection", "Connected", "logged in as Shop"] in events
