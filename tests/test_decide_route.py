"""decide_route.sql, the batch decision: exactly one decision per conversation, and the
arbitrary picks (R2.3, R3 'identical routes count as one', R4.2) drawn per conversation with
the right probabilities."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pybroker
from pybroker.storage.templates import render

GUID_1 = "5fb8d92b-ed69-4c80-afbb-2aa6a7d3cb2d"
GUID_2 = "81b1d3d0-288e-4d2c-b1d3-456cbb944b4f"


def test_one_decision_per_conversation_with_the_right_spread():
    with pybroker.connect() as inst:
        a = inst.create_database("A")
        a.create_route("X1", service_name="S", address="tcp://a:1")
        a.create_route("X2", service_name="S", address="tcp://a:1")  # identical to X1
        a.create_route("Y", service_name="S", address="tcp://b:1")
        a.create_route("B1", service_name="T", broker_instance=GUID_1, address="tcp://c:1")
        a.create_route("B2", service_name="T", broker_instance=GUID_2, address="tcp://d:1")
        a.create_route("B3", service_name="T", broker_instance=GUID_2, address="tcp://e:1")
        con = inst.kernel.store.connection
        con.execute(
            "CREATE TEMP TABLE conv AS SELECT range AS conversation_id, 'A' AS origin, "
            "CASE range % 3 WHEN 0 THEN 'S' WHEN 1 THEN 'T' ELSE 'Missing' END AS service_name,"
            " CAST(NULL AS VARCHAR) AS broker_instance, CAST(? AS TIMESTAMP) AS routed_at "
            "FROM range(30000)",
            [datetime(2030, 1, 1)],
        )
        sql = render("routing/decide_route.sql", conversations="conv", pick="random")
        rows = con.execute(
            f"SELECT conversation_id, service_name, outcome, address FROM ({sql})"
        ).fetchall()
    assert sorted(r[0] for r in rows) == list(range(30000))
    counts = Counter((r[1], r[2], r[3]) for r in rows)
    assert counts[("Missing", "delay", None)] == 10000
    s_a, s_b = counts[("S", "send", "tcp://a:1")], counts[("S", "send", "tcp://b:1")]
    assert s_a + s_b == 10000 and 4500 < s_a < 5500  # X1 and X2 count as one
    t_c = counts[("T", "send", "tcp://c:1")]
    t_d, t_e = counts[("T", "send", "tcp://d:1")], counts[("T", "send", "tcp://e:1")]
    assert t_c + t_d + t_e == 10000
    assert 4500 < t_c < 5500 and 2000 < t_d < 3000 and 2000 < t_e < 3000  # identifier first
