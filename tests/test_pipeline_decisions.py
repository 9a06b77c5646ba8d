"""``pipeline resolve`` against the point engine, conversation by conversation.

Random routing states (routes with and without service, broker identifier, expiry, mirror;
services; route requests; forwarding) and conversations (known and unknown services, with
and without broker identifiers in any case, begin times on and around the expiry instants)
are resolved by the pipeline on DuckDB. Each conversation is then decided on its own by the
live engine's point path (pybroker/core/routing/point.py over select_key_inputs.sql, expiry
judged at the conversation's begin_time, R1.4), and its arbitrary pick taken by the rule
the pipeline documents: the options ranked by pick group (R2.3), route name (R3) and
database (R4.2), one mixed-radix digit each from the first 12 hex digits of
md5(conversation_id). Nothing of the pipeline's SQL takes part in that answer, so epochs,
key numbering and wildcard classes must all be invisible in the output."""

from __future__ import annotations

import hashlib
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.apps.pipeline.engine import DuckDBEngine
from pybroker.apps.pipeline.schema import CONVERSATIONS, DECISIONS, ROUTING_TABLES
from pybroker.core.routing.point import route_option_rows
from pybroker.storage import templates as sql_templates
from tests.pipeline_fixtures import read_rows, resolve_to_rows, write_rows

T0 = datetime(2030, 1, 1)
LIFETIMES = [T0 + timedelta(hours=h) for h in (1, 2, 3)]
BEGIN_TIMES = [T0, *LIFETIMES, LIFETIMES[0] - timedelta(microseconds=1),
               LIFETIMES[1] + timedelta(microseconds=1), T0 + timedelta(days=9)]
GUID = {"Sales": "5fb8d92b-ed69-4c80-afbb-2aa6a7d3cb2d",
        "Inventory": "81b1d3d0-288e-4d2c-b1d3-456cbb944b4f",
        "other": "0c2f7b5e-9d1a-4e3b-8f6a-1b2c3d4e5f60"}
DATABASES = [(1, "master", "c03e5d30-f24f-4e8e-8640-7d8c89781a04"),
             (4, "msdb", "d94903af-634c-4848-8e7b-a5d1a7c692b7"),
             (5, "Sales", GUID["Sales"]), (6, "Inventory", GUID["Inventory"])]
DYNAMIC = "SQL/ServiceBroker/BrokerConfiguration"
SERVICES = ["S1", "S2", "S3", "tcp://h:4022/S4"]  # routes and services draw from these
UNKNOWN = ["U1", "U2", "U3", "tcp:/h/U4"]  # conversations also name these
TABLES = {t.name: t for t in ROUTING_TABLES}

route = st.fixed_dictionaries({
    "database_id": st.sampled_from([4, 5, 6]),
    "name": st.sampled_from(["R1", "R2", "R3", "R4", "AutoCreatedLocal"]),
    "remote_service_name": st.sampled_from([None, None, *SERVICES, DYNAMIC]),
    "broker_instance": st.sampled_from([None, None, *GUID.values()]),
    "lifetime": st.sampled_from([None, None, *LIFETIMES]),
    "address": st.sampled_from(["LOCAL", "TRANSPORT", "tcp://a:1", "tcp://b:2"]),
    "mirror": st.booleans(),
})
state = st.fixed_dictionaries({
    "routes": st.lists(route, max_size=12),
    "services": st.sets(st.tuples(st.sampled_from([5, 6]), st.sampled_from(
        [*SERVICES, "U1"]))),
    "requests": st.sets(st.tuples(st.sampled_from([4, 5, 6]), st.sampled_from(
        [*SERVICES, "U2"]))),
    "forwarding": st.booleans(),
})
conversation = st.tuples(
    st.sampled_from(["Sales", "Inventory", "outside", "Nowhere"]),
    st.sampled_from([*SERVICES, *UNKNOWN]),
    st.sampled_from([None, None, *GUID.values(), GUID["Sales"].upper()]),
    st.sampled_from([*BEGIN_TIMES, None]),
)


def _write_state(directory: Path, drawn: dict) -> None:
    directory.mkdir()
    seen, routes = set(), []
    for i, r in enumerate(drawn["routes"]):
        if (r["database_id"], r["name"]) in seen:
            continue  # route names are unique per database
        seen.add((r["database_id"], r["name"]))
        network = r["address"].startswith("tcp://")
        routes.append({
            "database_id": r["database_id"], "route_id": 65536 + i, "name": r["name"],
            "remote_service_name": r["remote_service_name"],
            "broker_instance": r["broker_instance"], "lifetime": r["lifetime"],
            "address": r["address"],
            "mirror_address": "tcp://m:1" if r["mirror"] and network else None,
            "create_date": T0})
    rows = {
        "instance_settings": [{"is_forwarding_enabled": drawn["forwarding"],
                               "forwarding_size_mb": 1}],
        "databases": [{"database_id": i, "name": n, "service_broker_guid": g,
                       "is_broker_enabled": True, "create_date": T0}
                      for i, n, g in DATABASES],
        "service_queues": [{"database_id": d, "name": f"{s}Queue", "is_receive_enabled": True,
                            "is_enqueue_enabled": True, "create_date": T0}
                           for d, s in sorted(drawn["services"])],
        "services": [{"database_id": d, "name": s, "queue_name": f"{s}Queue",
                      "create_date": T0} for d, s in sorted(drawn["services"])],
        "routes": routes,
        "route_requests": [{"database_id": d, "service_name": s, "requested_at": T0}
                           for d, s in sorted(drawn["requests"])],
    }
    for name, table_rows in rows.items():
        write_rows(directory / f"{name}.parquet", TABLES[name], table_rows)


def _expected(directory: Path, conversations: list[dict]) -> list[tuple]:
    """Each conversation decided alone by the point engine, picked by the documented rule."""
    con = duckdb.connect()
    try:
        for table in ROUTING_TABLES:
            con.read_parquet(str(directory / f"{table.name}.parquet")).create_view(table.name)
        names = {d[1] for d in DATABASES}
        query = sql_templates.render("routing/select_key_inputs.sql")
        out = []
        for c in conversations:
            broker = c["broker_instance"].lower() if c["broker_instance"] else None
            if c["origin"] not in names | {"outside"} or c["begin_time"] is None:
                out.append((c["conversation_id"], *[None] * 10))
                continue
            params = {"origin": c["origin"], "service_name": c["service_name"],
                      "routed_at": c["begin_time"]}
            inputs = con.execute(query, params).fetchall()
            options = route_option_rows((c["origin"], c["service_name"], broker),
                                        c["begin_time"], inputs)
            out.append((c["conversation_id"], *_pick(options, c["conversation_id"])))
        return sorted(out, key=lambda r: tuple((v is None, str(v)) for v in r))
    finally:
        con.close()


def _pick(options: list[tuple], conversation_id: str) -> tuple:
    """The option the draw of ``conversation_id`` picks: rows of resolve_route_options.sql
    (pick_group at 4, route_name at 6, database_name at 9), decision columns 5..14."""
    draw = int(hashlib.md5(conversation_id.encode()).hexdigest()[:12], 16)
    groups = sorted({o[4] for o in options})
    group = groups[draw % len(groups)]
    draw //= len(groups)
    in_group = [o for o in options if o[4] == group]
    routes = sorted({o[6] or "" for o in in_group})
    name = routes[draw % len(routes)]
    draw //= len(routes)
    in_route = sorted((o for o in in_group if (o[6] or "") == name),
                      key=lambda o: o[9] or "")
    chosen = in_route[draw % len(in_route)]
    return chosen[5:15]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(drawn=state, keys=st.lists(conversation, min_size=1, max_size=40),
       salt=st.integers(0, 10**6))
def test_resolve_decides_each_conversation_as_the_point_engine(drawn, keys, salt):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _write_state(tmp / "state", drawn)
        conversations = [
            {"conversation_id": f"c{salt}-{i}", "origin": o, "service_name": s,
             "broker_instance": b, "begin_time": t}
            for i, (o, s, b, t) in enumerate(keys)]
        path = write_rows(tmp / "conversations.parquet", CONVERSATIONS, conversations)
        with DuckDBEngine(memory_limit="256MB") as engine:
            got = resolve_to_rows(engine, path, tmp / "state", tmp / "out")
        expected = _expected(tmp / "state", conversations)
        assert len(got) == len(conversations)
        for row, want in zip(got, expected, strict=True):
            assert row == want, dict(zip(DECISIONS.column_names, zip(row, want, strict=True),
                                         strict=True))


def test_a_wildcard_class_keeps_each_conversations_broker_identifier(tmp_path):
    """Unknown services decided through one class still name their own identifier."""
    drawn = {"routes": [{"database_id": 5, "name": "R1", "remote_service_name": None,
                         "broker_instance": None, "lifetime": None, "address": "tcp://a:1",
                         "mirror": False}],
             "services": set(), "requests": set(), "forwarding": True}
    _write_state(tmp_path / "state", drawn)
    conversations = [{"conversation_id": f"w{i}", "origin": "Sales", "service_name": f"U{i}",
                      "broker_instance": b, "begin_time": T0}
                     for i, b in enumerate([GUID["other"], GUID["Inventory"], None])]
    path = write_rows(tmp_path / "c.parquet", CONVERSATIONS, conversations)
    with DuckDBEngine() as engine:
        got = resolve_to_rows(engine, path, tmp_path / "state", tmp_path / "out")
    by_id = {r[0]: dict(zip(DECISIONS.column_names, r, strict=True)) for r in got}
    assert by_id["w0"]["broker_instance"] == GUID["other"]
    assert by_id["w1"]["broker_instance"] == GUID["Inventory"]
    assert by_id["w2"]["broker_instance"] is None
    assert {d["route"] for d in by_id.values()} == {"R1"}
    assert {d["match_step"] for d in by_id.values()} == {"R2.5"}
    assert read_rows(tmp_path / "out") == got


def test_keys_whose_pick_groups_differ_in_size(tmp_path):
    """R2.3 with one route for one identifier and three for another: the route count of
    the picked group is looked up per conversation; every option is reached."""
    def r(name, broker, address):
        return {"database_id": 5, "name": name, "remote_service_name": "S1",
                "broker_instance": broker, "lifetime": None, "address": address,
                "mirror": False}
    drawn = {"routes": [r("R1", GUID["Sales"], "tcp://a:1"),
                        r("R2", GUID["Inventory"], "tcp://a:1"),
                        r("R3", GUID["Inventory"], "tcp://b:2"),
                        r("R4", GUID["Inventory"], "tcp://c:3")],
             "services": {(6, "S1")}, "requests": set(), "forwarding": True}
    _write_state(tmp_path / "state", drawn)
    conversations = [{"conversation_id": f"g{i}", "origin": "Sales", "service_name": "S1",
                      "broker_instance": None, "begin_time": T0} for i in range(200)]
    path = write_rows(tmp_path / "c.parquet", CONVERSATIONS, conversations)
    with DuckDBEngine() as engine:
        got = resolve_to_rows(engine, path, tmp_path / "state", tmp_path / "out")
    assert got == _expected(tmp_path / "state", conversations)
    assert {row[2] for row in got} == {"R1", "R2", "R3", "R4"}
