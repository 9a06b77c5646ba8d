"""The rules diagnose answers set-based, against the answers they gave one question at a
time, on small generated networks: D-CFG-011's dialog groups routed for every group in one
query (contracts.targets through sql/diagnose/decide_keys.sql) against ``Instance.route``
asked per group and hop; D-RTE-004's groups asked about only when a route could outlive
them (route_targets.outlivable) against every group asked; D-RTE-002 read from traces
without the wildcards of R2.5 listed for keys that never reach it."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.apps.diagnose import contracts, route_targets, routing
from pybroker.apps.diagnose.explained import (
    chosen_step,
    explain_endpoint_groups,
    explain_routes,
    key,
    route_key,
)
from pybroker.apps.diagnose.network import Network, Node, read_node
from pybroker.apps.diagnose.targets import Target
from tests.process_helpers import free_ports
from tests.routing_helpers import drop_routes

A_PORT, B_PORT = free_ports(2)
GUID = "0b9bcbb0-0f1a-4c4e-9d4a-31c2a3b8e001"
SERVICES = ("S1", "S2", "S3", f"tcp://127.0.0.1:{B_PORT}/S2")
ADDRESSES = ("LOCAL", "TRANSPORT", f"tcp://127.0.0.1:{B_PORT}", f"tcp://127.0.0.1:{A_PORT}",
             "tcp://nobody.example.com:4022")

route = st.fixed_dictionaries({
    # mostly A's own and B's msdb (what a forwarder B routes by)
    "place": st.sampled_from((("A", "Db"), ("A", "Db"), ("B", "msdb"), ("B", "msdb"),
                              ("A", "msdb"), ("B", "Db"))),
    # mostly S1 and S2, so that routes meet at the R2 and R3 steps (several choices)
    "service_name": st.sampled_from((None, "S1", "S1", "S2", *SERVICES)),
    "broker_instance": st.none() | st.just(GUID),
    "address": st.sampled_from(ADDRESSES),
    "lifetime": st.none() | st.sampled_from((3600, 7200)),
})
dialog = st.fixed_dictionaries({
    "far_service": st.sampled_from(SERVICES),
    "far_broker_instance": st.none() | st.just(GUID),
    "database_name": st.sampled_from(("Db", "Db", "msdb")),
})


def _route(place: tuple[str, str], service: str | None, address: str) -> dict:
    return {"place": place, "service_name": service, "broker_instance": None,
            "address": address, "lifetime": None}


def _endpoint(inst: pybroker.Instance, port: int) -> None:
    inst.database("master").execute(
        "CREATE CERTIFICATE Own WITH SUBJECT = 'endpoint';"
        f"CREATE ENDPOINT BrokerEndpoint STATE = STARTED AS TCP (LISTENER_PORT = {port}, "
        "LISTENER_IP = (127.0.0.1)) FOR SERVICE_BROKER (AUTHENTICATION = CERTIFICATE Own)")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Iterator[tuple[tuple[Path, Path], dict[str, pybroker.Instance]]]:
    """The two instance files, open for the module (the examples rewrite their routes)."""
    where = tmp_path_factory.mktemp("set_based")
    paths = (where / "a.duckdb", where / "b.duckdb")
    for path, port, hosted in ((paths[0], A_PORT, ("S1", "S3")), (paths[1], B_PORT, ("S1", "S2"))):
        with pybroker.connect(path, worker=False) as inst:
            _endpoint(inst, port)
            db = inst.create_database("Db")
            db.create_queue("Q")
            for service in hosted:
                db.create_service(service, queue="Q", contracts=["DEFAULT"])
    with pybroker.connect(paths[0], worker=False) as a, \
            pybroker.connect(paths[1], worker=False) as b:
        yield paths, {"A": a, "B": b}


def _build(insts: dict[str, pybroker.Instance], routes: list[dict], forwarding: bool) -> None:
    for inst in insts.values():
        drop_routes(inst)
    for n, r in enumerate(routes):
        with contextlib.suppress(pybroker.BrokerError):  # a route the DDL refuses
            insts[r["place"][0]].database(r["place"][1]).create_route(
                f"R{n}", service_name=r["service_name"], broker_instance=r["broker_instance"],
                address=r["address"], lifetime=r["lifetime"])
    insts["B"].forwarding = forwarding


def _one_at_a_time(net: Network, node: Node, d: dict) -> tuple[str, str] | None:
    """Where D-CFG-011 found a dialog's target asking ``Instance.route`` once per group and
    hop (one draw where routing may choose among several)."""
    service, broker = d["far_service"], d["far_broker_instance"]
    here: Node | None = node
    origin = d["database_name"]
    seen: set[str] = set()
    while here is not None and here.name not in seen:
        seen.add(here.name)
        try:
            decision = here.target.instance.route(service, broker_instance=broker,
                                                  origin=origin)
        except pybroker.BrokerError:
            return None
        if decision.outcome == "deliver":
            return (here.name, decision.database) \
                if decision.database in here.hosts(service) else None
        if decision.outcome != "send":
            return None
        there = net.at(decision.address)
        if there is not None and not there.forwarding:
            hosting = [h for h in there.hosts(service)
                       if broker is None or there.databases.get(h) == broker]
            return (there.name, hosting[0]) if hosting else None
        here, origin = there, "outside"
    return None


@settings(max_examples=12, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(routes=st.lists(route, max_size=10), forwarding=st.booleans() | st.just(True),
       dialogs=st.lists(dialog, min_size=1, max_size=6))
@example(  # S3: A -> forwarder B -> back to A; S1: to either instance (R3.3)
    routes=[_route(("A", "Db"), "S3", f"tcp://127.0.0.1:{B_PORT}"),
            _route(("B", "msdb"), "S3", f"tcp://127.0.0.1:{A_PORT}"),
            _route(("A", "Db"), "S1", f"tcp://127.0.0.1:{A_PORT}"),
            _route(("A", "Db"), "S1", f"tcp://127.0.0.1:{B_PORT}")],
    forwarding=True, dialogs=[{"far_service": s, "far_broker_instance": None,
                               "database_name": "Db"} for s in ("S1", "S3")])
def test_dialog_groups_routed_at_once_go_where_routing_sends_them_one_by_one(
        files, routes, forwarding, dialogs):
    paths, insts = files
    _build(insts, routes, forwarding)
    nodes = [read_node(Target(str(path), insts[name], owned=False))
             for path, name in zip(paths, "AB", strict=True)]
    net = Network(nodes, dt.datetime(2030, 1, 1), dt.timedelta(hours=1), 100)
    asked = [(nodes[0], d) for d in dialogs]
    at_once = contracts.targets(net, asked)
    several = forwarded = False
    for (node, d), found in zip(asked, at_once, strict=True):
        names = [(there.name, database) for there, database in found]
        assert len(set(names)) == len(names)
        drawn = {_one_at_a_time(net, node, d) for _ in range(8)}
        # each draw is one of the targets found at once (or reaches none of them) ...
        assert drawn - {None} <= set(names), (d, drawn, names)
        # ... and where routing has one answer at every hop, the draws are that answer
        if len(drawn) == 1 and len(names) <= 1:
            assert names == ([] if drawn == {None} else list(drawn)), (d, names)
        several = several or len(names) > 1
        forwarded = forwarded or (d["far_service"] == "S3" and bool(names))
    event(f"several targets for a group: {several}")
    event(f"S3 reached (only A hosts it; B may forward it): {forwarded}")


@settings(max_examples=8, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(routes=st.lists(route, min_size=1, max_size=10),
       lifetimes=st.lists(st.sampled_from((1800, 5400, 10_000)), min_size=1, max_size=4),
       far=st.lists(st.sampled_from(SERVICES), min_size=1, max_size=4))
def test_the_rules_read_the_same_from_fewer_questions(files, routes, lifetimes, far):
    paths, insts = files
    _build(insts, [{**r, "place": ("A", r["place"][1])} for r in routes], False)
    a = insts["A"]
    db = a.database("Db")
    for n, lifetime in enumerate(lifetimes):
        db.begin_dialog("S1", far[n % len(far)], lifetime=lifetime)
    target = Target(str(paths[0]), a, owned=False)
    node = read_node(target)
    at = target.routing_now()
    # D-RTE-004: the groups left out are those no route they take could outlive
    live = {(r["database_name"], r["name"]): r for r in node.routes if not r["is_expired"]}
    groups = target.rows("select_endpoint_lifetimes")
    kept = route_targets.outlivable(live, groups)
    every = explain_endpoint_groups(target, at)
    for g in groups:
        if g in kept:
            continue
        chosen = chosen_step(every[key(g["database_name"], g["far_service"],
                                       g["far_broker_instance"], at)])
        for name in chosen.candidates if chosen is not None else ():
            r = live.get((g["database_name"], name))
            assert r is None or r["lifetime"] is None or r["lifetime"] >= g["latest"]
    # D-RTE-002: the same findings from traces without the unreached wildcards
    full, reached = explain_routes(target, at), explain_routes(
        target, at, reached_wildcards_only=True)
    assert set(full) == set(reached)
    nets = [Network([node], at, dt.timedelta(hours=1), 100) for _ in range(2)]
    for r in live.values():
        k = route_key(r, at)
        routing.shadowed(nets[0], node, r, full[k])
        routing.shadowed(nets[1], node, r, reached[k])
    assert nets[0].findings == nets[1].findings
    event(f"groups asked: {min(len(kept), 2)} of {min(len(groups), 2)}")
