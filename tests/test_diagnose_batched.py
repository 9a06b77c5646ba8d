"""The routing rules of diagnose ask every route and every group of conversations of an
instance in one query (apps/diagnose/explained.py, sql/diagnose/explain_keys.sql): on
generated routing tables, each batched answer is the one ``Instance.explain`` gives for that
key alone, and the rules decide the same from either."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.apps.diagnose import route_targets, routing
from pybroker.apps.diagnose.explained import (
    Step,
    chosen_step,
    explain_endpoint_groups,
    explain_keys,
    explain_routes,
    key,
    route_key,
)
from pybroker.apps.diagnose.network import Network, read_node
from pybroker.apps.diagnose.targets import Target
from pybroker.core.routing.cache import DYNAMIC_ROUTING_SERVICE
from tests.routing_helpers import drop_routes

T0 = float(int(time.time()))  # the instance's clock stands still here
GUIDS = ("0b9bcbb0-0f1a-4c4e-9d4a-31c2a3b8e001", "7f3e2c10-5a6b-4d7e-8f90-a1b2c3d4e002")
SERVICES = ("S1", "S2", "tcp://127.0.0.1:4022/S3", DYNAMIC_ROUTING_SERVICE)
ADDRESSES = ("LOCAL", "TRANSPORT", "tcp://hosta:4022", "tcp://hostb:4022")

route = st.fixed_dictionaries({
    "database": st.sampled_from(("Db", "msdb")),
    # mostly S1, so that routes meet each other at the R2 and R3 steps (D-RTE-002)
    "service_name": st.sampled_from((None, "S1", "S1", "S1", *SERVICES)),
    "broker_instance": st.none() | st.sampled_from(GUIDS),
    "address": st.sampled_from(ADDRESSES),
    "mirror": st.booleans(),
    "lifetime": st.none() | st.sampled_from((3600, 7200)),
})
dialog = st.fixed_dictionaries({
    "to_service": st.sampled_from(("S1", "S1", "S2", "tcp://127.0.0.1:4022/S3")),
    "broker_instance": st.none() | st.sampled_from(GUIDS),
    "lifetime": st.none() | st.sampled_from((1800, 5400, 10_000)),
})


@pytest.fixture(scope="module")
def file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("batched") / "routing.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        db = inst.create_database("Db")
        db.create_queue("Q")
        db.create_service("S1", queue="Q", contracts=["DEFAULT"])
    return path


def _build(inst: pybroker.Instance, routes: list[dict], dialogs: list[dict]) -> None:
    """The generated routes, made anew (a route the DDL refuses is left out), and dialogs
    begun from S1 (endpoints routed at their first send, which never comes here)."""
    drop_routes(inst)
    for n, r in enumerate(routes):
        mirror = "tcp://mirror:4022" if r["mirror"] and r["address"].startswith("tcp") \
            else None
        with contextlib.suppress(pybroker.BrokerError):
            inst.database(r["database"]).create_route(
                f"R{n}", service_name=r["service_name"], broker_instance=r["broker_instance"],
                address=r["address"], mirror_address=mirror, lifetime=r["lifetime"])
    db = inst.database("Db")
    for d in dialogs:
        db.begin_dialog("S1", d["to_service"], broker_instance=d["broker_instance"],
                        lifetime=d["lifetime"])


def _alone(inst: pybroker.Instance, k: tuple) -> list[Step]:
    """Instance.explain for one key, less the steps explain_keys.sql leaves out."""
    origin, service, broker, _ = k
    return [Step(s.step, s.candidates, s.result) for s in
            inst.explain(service, broker_instance=broker, origin=origin)
            if s.candidates or s.result in ("delayed", "dropped")]


def _full(inst: pybroker.Instance, k: tuple) -> list:
    origin, service, broker, _ = k
    return inst.explain(service, broker_instance=broker, origin=origin)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(routes=st.lists(route, min_size=1, max_size=10), dialogs=st.lists(dialog, max_size=4))
def test_the_batched_answers_are_explains_one_key_at_a_time(file, routes, dialogs):
    now = [T0]
    with pybroker.connect(file, worker=False, clock=lambda: now[0]) as inst:
        _build(inst, routes, dialogs)
        target = Target("routing.duckdb", inst, owned=False)
        node = read_node(target)
        at = target.routing_now()
        assert at == dt.datetime.fromtimestamp(T0, dt.UTC).replace(tzinfo=None)

        # D-RTE-002's question: every route that has not expired, in one query
        batched = explain_routes(target, at)
        live = [r for r in node.routes if not r["is_expired"]]
        assert set(batched) == {route_key(r, at) for r in live}
        one_net, alone_net = (Network([node], at, dt.timedelta(hours=1), 100)
                              for _ in range(2))
        for r in live:
            k = route_key(r, at)
            assert batched[k] == _alone(inst, k), (r, k)
            routing.shadowed(one_net, node, r, batched[k])
            routing.shadowed(alone_net, node, r, _full(inst, k))  # every step, unfiltered
        assert one_net.findings == alone_net.findings

        # D-RTE-004's questions: each group of conversations, then each just past the
        # expiry of a route it takes
        groups = target.rows("select_endpoint_lifetimes")
        by_group = explain_endpoint_groups(target, at)
        group_keys = [key(g["database_name"], g["far_service"], g["far_broker_instance"], at)
                      for g in groups]
        assert set(by_group) == set(group_keys)
        later = []
        for g, k in zip(groups, group_keys, strict=True):
            assert by_group[k] == _alone(inst, k)
            chosen = chosen_step(by_group[k])
            for name in chosen.candidates if chosen is not None else ():
                expiring = next((r for r in live if r["name"] == name
                                 and r["database_name"] == g["database_name"]
                                 and r["lifetime"] is not None), None)
                if expiring is not None:
                    just_after = expiring["lifetime"] + dt.timedelta(milliseconds=1)
                    later.append((expiring, (*k[:3], just_after)))
        after = explain_keys(target, [k for _, k in later])
        others = {(r["database_name"], r["name"]): r for r in node.routes}
        for expiring, k in later:
            now[0] = k[3].replace(tzinfo=dt.UTC).timestamp()  # explain as the route expired
            assert after[k] == _alone(inst, k), k
            database = expiring["database_name"]
            assert route_targets.after_expiry(others, database, expiring, after[k]) == \
                route_targets.after_expiry(others, database, expiring, _full(inst, k))
        now[0] = T0
        event(f"D-RTE-002 findings: {min(len(one_net.findings), 2)}")
        event(f"routes past expiry asked: {min(len(later), 2)}")
