"""The network's counters of ``/metrics`` from two instances in one process over 127.0.0.1:
fragments, acknowledgements, the arrival -> commit histogram, connections by peer, and
counters that go on across an endpoint stopped and started again."""

from __future__ import annotations

import pybroker
from pybroker.server.metrics import read_families
from tests.wire_helpers import CONTRACT, ORDER, drain, instance_pair, wait_for

SENT = 5


def _values(inst: pybroker.Instance) -> dict[tuple[str, tuple], float]:
    return {(f.name + suffix, tuple(sorted(labels.items()))): value
            for f in read_families(inst.kernel)
            for (labels, value), suffix in zip(f.samples, f.suffixes, strict=True)}


def test_wire_counters_follow_messages_acknowledgements_and_endpoint_restarts(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path, retry_scale=1.0)
    try:
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        with shop.transaction():
            for i in range(SENT):
                conv.send(f"<order n='{i}'/>".encode(), message_type=ORDER)
        assert len(drain(stock, "StockQueue", SENT)) == SENT
        acked = ("pybroker_messages_acknowledged_total",
                 (("database", "Shop"), ("service", "ShopService")))
        sent_a = wait_for(lambda: (v := _values(a)).get(acked) == SENT and v,
                          what="every message acknowledged at A")
        resent = sent_a["pybroker_fragments_retransmitted_total", ()]
        assert sent_a["pybroker_fragments_sent_total", ()] == SENT
        assert sent_a["pybroker_broker_peer_connections",
                      (("peer", b.endpoint.address),)] == 1
        at_b = _values(b)
        # each arrival applied was observed once (a resent copy is an arrival too)
        arrivals = at_b["pybroker_arrival_commit_seconds_count", ()]
        assert SENT <= arrivals <= SENT + resent
        assert at_b["pybroker_arrival_commit_seconds_bucket", (("le", "+Inf"),)] == arrivals
        assert 0 < at_b["pybroker_arrival_commit_seconds_sum", ()] < 60 * arrivals
        assert at_b["pybroker_broker_logins_refused_total",
                    (("reason", "certificate_not_trusted"),)] == 0
        # A's endpoint stops and starts again: its counters go on from where they were
        a.endpoint.close()
        stopped = _values(a)
        assert stopped["pybroker_fragments_sent_total", ()] == SENT
        assert not [k for k in stopped if k[0] == "pybroker_broker_peer_connections"]
        a.start_endpoint(0)
        assert _values(a)["pybroker_fragments_sent_total", ()] == SENT
    finally:
        a.close()
        b.close()


def test_a_peer_that_is_not_trusted_is_counted_as_a_refused_login(tmp_path):
    a, b, _, _ = instance_pair(tmp_path, retry_scale=1.0)
    stranger = pybroker.connect(tmp_path / "c.duckdb", retry_scale=1.0)
    try:
        stranger.trust("B", b.certificate)  # C trusts B; B does not know C
        stranger.start_endpoint(0)
        db = stranger.create_database("Stranger")
        db.create_queue("Q")
        db.create_service("StrangerService", queue="Q")
        db.create_route("ToStock", service_name="StockService", address=b.endpoint.address)
        db.begin_dialog("StrangerService", "StockService").send(b"let me in")

        def refused() -> float:
            return sum(v for k, v in _values(b).items()
                       if k[0] == "pybroker_broker_logins_refused_total")

        assert wait_for(refused, what="B to refuse C's login") >= 1
        assert wait_for(lambda: sum(
            v for k, v in _values(stranger).items()
            if k[0] in ("pybroker_broker_logins_refused_total",
                        "pybroker_broker_connect_failures_total")) >= 1,
            what="C to count its refused connection")
    finally:
        stranger.close()
        a.close()
        b.close()
