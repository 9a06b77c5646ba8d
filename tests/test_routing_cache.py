"""The routing engine's memory (pybroker/core/routing/cache.py): a write voids only the answers
it can alter, keys in use are decided again after the write, and service names the catalog
does not know share one answer per origin. The decisive check is differential: after every
step of a random sequence of catalog changes, the engine's remembered answer for each key
equals a fresh run of the routing query (SPEC R1-R4, R1.4 expiry, R3.6 forwarding)."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.core.routing.cache import EVERYTHING, CatalogChange, is_class_member
from pybroker.storage.templates import render
from pybroker.timestamps import to_utc_datetime

GUID_A = "5fb8d92b-ed69-4c80-afbb-2aa6a7d3cb2d"
GUID_B = "81b1d3d0-288e-4d2c-b1d3-456cbb944b4f"
GUID_C = "0d9f2a34-7c1e-4b8a-9e21-3f5a6b7c8d90"  # no database of the test has it




@pytest.fixture
def inst(clock):
    with pybroker.connect(clock=clock) as instance:
        a = instance.create_database("A", broker_instance=GUID_A)
        b = instance.create_database("B", broker_instance=GUID_B)
        for db in (a, b):
            db.create_queue("q")
        a.create_service("Known", queue="q")
        yield instance


def options(decisions) -> set[tuple]:
    return {(d.outcome, d.route, d.address, d.mirror_address, d.database, d.broker_instance,
             d.decided_by) for d in decisions}


def fresh(inst, key) -> set[tuple]:
    """What the routing query says now, bypassing every remembered answer."""
    engine = inst.kernel.routing
    key = engine.normalize_key(key)
    return options(engine.decide_plans([key], inst.kernel.clock(), point=False)[key].decisions)


def remembered(inst, key) -> set[tuple]:
    origin, service, broker = key
    inst.route(service, broker_instance=broker, origin=origin)
    engine = inst.kernel.routing
    return options(engine.plans[engine.normalize_key(key)].decisions)


def test_a_route_change_voids_only_the_keys_of_its_service_and_database(inst):
    a = inst.database("A")
    for service in ("S1", "S2"):
        a.create_route(f"To{service}", service_name=service, address=f"tcp://{service}:1")
    inst.route("S1", origin="A")
    inst.route("S2", origin="A")
    inst.route("S1", origin="B")
    engine = inst.kernel.routing
    kept = engine.plans[("A", "S2", None)]
    a.alter_route("ToS1", address="tcp://moved:1")
    assert engine.plans[("A", "S2", None)] is kept  # not voided: another service
    assert ("B", "S1", None) in engine.plans  # B routes with its own table (R1.1)
    # the voided key in use was decided again by the write: warm, and with the new address
    assert engine.plans[("A", "S1", None)].only.address == "tcp://moved:1"
    assert inst.route("S1", origin="A").address == "tcp://moved:1"


def test_a_wildcard_change_voids_every_key_of_its_database(inst):
    a = inst.database("A")
    inst.route("S1", origin="A")
    inst.route("S1", origin="B")
    b_plan = inst.kernel.routing.plans[("B", "S1", None)]
    a.create_route("Wild", address="tcp://wild:1")  # R2.5 decides for every service
    assert inst.kernel.routing.plans[("B", "S1", None)] is b_plan
    assert inst.route("S1", origin="A").route == "Wild"


def test_unknown_services_share_one_answer_per_origin(inst):
    a = inst.database("A")
    a.create_route("Wild", address="tcp://wild:1")
    first = inst.route("NeverHeardOf1", origin="A")
    engine = inst.kernel.routing
    assert "A" in engine.class_plans
    calls = []
    original = engine.resolve_by_query
    engine.resolve_by_query = lambda keys, now: calls.append(keys) or original(keys, now)
    second = inst.route("NeverHeardOf2", origin="A")
    assert calls == []  # answered from the class answer, no query
    assert (second.route, second.address) == (first.route, first.address) == (
        "Wild", "tcp://wild:1")
    # a name with a TRANSPORT address in it (R10.6) or a named broker never shares it
    assert not is_class_member(("A", "tcp://h:1/x", None), set())
    assert not is_class_member(("A", "x", GUID_A), set())
    # once a route names it, a service is no longer unknown: its own answer is decided
    a.create_route("ToNew", service_name="NeverHeardOf3", address="tcp://new:1")
    assert inst.route("NeverHeardOf3", origin="A").route == "ToNew"


def test_a_rolled_back_batch_leaves_no_remembered_answer_from_inside_it(inst):
    a = inst.database("A")
    inst.route("S1", origin="A")
    with pytest.raises(pybroker.BrokerError):
        a.execute("CREATE ROUTE ToS1 WITH SERVICE_NAME = 'S1', ADDRESS = 'tcp://s1:1';"
                  "DROP ROUTE NoSuchRoute")
    assert inst.route("S1", origin="A").outcome == "delay"  # the route never existed
    assert remembered(inst, ("A", "S1", None)) == fresh(inst, ("A", "S1", None))


def test_answers_decided_inside_a_rolled_back_transaction_are_voided(inst):
    a = inst.database("A")
    with pytest.raises(RuntimeError, match="roll back"), a.transaction():
        a.create_route("ToS1", service_name="S1", address="tcp://s1:1")
        assert inst.route("S1", origin="A").outcome == "send"  # the uncommitted route
        raise RuntimeError("roll back")
    assert inst.route("S1", origin="A").outcome == "delay"  # R2.7: the route never was
    assert "ToS1" not in {r.name for r in a.routes()}  # the write joined the transaction


def test_a_rolled_back_transaction_without_a_catalog_change_keeps_every_answer(inst):
    a = inst.database("A")
    a.create_service("Receiver", queue="q", contracts=["DEFAULT"])
    conversation = a.begin_dialog("Known", "Receiver")
    conversation.send(b"first")  # routes (A, Receiver, None)
    plans = dict(inst.kernel.routing.plans)
    assert ("A", "Receiver", None) in plans
    with pytest.raises(RuntimeError, match="roll back"), a.transaction():
        assert [m.message_body for m in a.receive("q")] == [b"first"]
        conversation.send(b"undone")
        raise RuntimeError("roll back")
    after = inst.kernel.routing.plans
    assert all(after.get(key) is plan for key, plan in plans.items())  # none voided
    # C3: the rollback put the received message back, and the send never happened
    assert [m.message_body for m in a.receive("q", max_messages=10)] == [b"first"]


class _CountingConnection:
    """The store's DuckDB connection, recording every statement run through it."""

    def __init__(self, connection, executed: list[tuple[str, object]]) -> None:
        self._connection = connection
        self._executed = executed

    def execute(self, sql, params=None):
        self._executed.append((sql, params))
        return self._connection.execute(sql, params)

    def __getattr__(self, name):
        return getattr(self._connection, name)


def _count_statements(inst, monkeypatch) -> list[tuple[str, object]]:
    executed: list[tuple[str, object]] = []
    store = inst.kernel.store
    monkeypatch.setattr(store, "_con", _CountingConnection(store._con, executed))
    return executed


def _key_input_queries(executed) -> int:
    key_inputs = render("routing/select_key_inputs.sql")
    return sum(sql == key_inputs for sql, _ in executed)


def test_a_cold_decision_runs_no_sql_once_the_mirror_is_loaded(inst, monkeypatch, tmp_path):
    """The first decision of a key of a known service, right after a catalog
    change (a database created: everything; a route altered: the R1.4 horizon closes),
    is answered from the catalog mirror, with no statement at all."""
    a = inst.database("A")
    a.create_route("ToS1", service_name="S1", address="tcp://s1:1", lifetime=60)
    inst.create_database("C", broker_instance=GUID_C).create_queue("q")
    inst.database("C").create_service("Known", queue="q")
    a.alter_route("ToS1", address="tcp://moved:1")
    executed = _count_statements(inst, monkeypatch)
    assert inst.route("S1", origin="A").address == "tcp://moved:1"  # R2.2
    assert inst.route("Known", origin="A").database == "A"  # R4.2: its own database first
    assert inst.route("Known", origin="outside", broker_instance=GUID_C).database == "C"
    assert inst.route("Known", origin="C").outcome == "deliver"
    assert inst.route("S1", origin="B").decided_by == "R3.5"  # LOCAL, but no service S1
    assert executed == []

    # a change inside a transaction still open: what it touched is read with SQL (the
    # transaction's own rows must be seen), what it did not touch still from memory
    with a.transaction():
        a.create_route("ToS2", service_name="S2", address="tcp://s2:1")
        executed.clear()
        assert inst.route("S2", origin="A").address == "tcp://s2:1"
        assert _key_input_queries(executed) == 1
        executed.clear()
        assert inst.route("Known", origin="B").database in {"A", "C"}  # R2.5, R4.2
        assert _key_input_queries(executed) == 0
    executed.clear()
    inst.kernel.routing.plans.clear()
    assert inst.route("S2", origin="A").address == "tcp://s2:1"  # committed: from memory
    assert executed == []

    # the first decision after opening an instance file: loaded when it opened
    with pybroker.connect(tmp_path / "i.duckdb", clock=inst.kernel.clock) as opened:
        opened.create_database("A").create_route("ToS1", service_name="S1",
                                                 address="tcp://s1:1")
    with pybroker.connect(tmp_path / "i.duckdb", clock=inst.kernel.clock) as opened:
        executed = _count_statements(opened, monkeypatch)
        assert opened.route("S1", origin="A").address == "tcp://s1:1"
        assert executed == []


def test_a_write_reads_again_only_the_routes_it_changed(inst, monkeypatch):
    """A route change re-reads the routes of its database naming its services, not the
    whole table (one bound query with the names as a list)."""
    a = inst.database("A")
    inst.kernel.store.execute(
        "INSERT INTO routes SELECT ?, nextval('route_id_seq'), 'Route' || r.range, "
        "'svc' || r.range, NULL, NULL, 'tcp://h:1', NULL, now()::TIMESTAMP FROM range(300) r",
        [a.database_id])
    inst.kernel.routing.invalidate()  # a write without a CatalogChange: everything read again
    assert inst.route("svc7", origin="A").address == "tcp://h:1"
    executed = _count_statements(inst, monkeypatch)
    results: list[list] = []
    fetchall = inst.kernel.store.fetchall

    def recording(sql, params=None):
        rows = fetchall(sql, params)
        results.append([sql, params, rows])
        return rows

    monkeypatch.setattr(inst.kernel.store, "fetchall", recording)
    a.alter_route("Route7", address="tcp://moved:1")
    mirror_routes = [(params, rows) for sql, params, rows in results
                     if sql == render("routing/select_mirror_routes.sql")]
    assert len(mirror_routes) == 1
    params, rows = mirror_routes[0]
    assert params == {"database_ids": [a.database_id], "service_names": ["svc7"],
                      "wildcards": False}
    assert [r[2] for r in rows] == ["Route7"]
    executed.clear()
    assert inst.route("svc7", origin="A").address == "tcp://moved:1"
    assert inst.route("svc8", origin="A").address == "tcp://h:1"
    assert executed == []


def test_cold_decisions_on_other_threads_during_writes(inst):
    """Threads deciding cold keys (from the mirror, or SQL while a part is stale) while
    another writes routes, services and transactions that roll back: no error, and after
    the writes the mirror holds what the catalog holds."""
    a = inst.database("A")
    stop = threading.Event()
    errors: list[BaseException] = []
    decided = [0]

    def router(seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            try:
                inst.kernel.routing.plans.clear()  # every decision cold
                inst.route(f"S{rng.randrange(12)}", origin=rng.choice(["A", "outside"]))
                decided[0] += 1
            except BaseException as exc:
                errors.append(exc)
            time.sleep(0.0002)  # leave the writer the interpreter now and then

    routers = [threading.Thread(target=router, args=(seed,)) for seed in (1, 2)]
    for thread in routers:
        thread.start()
    rng = random.Random(3)
    try:
        for step in range(120):
            k = rng.randrange(12)
            with contextlib.suppress(pybroker.BrokerError, RuntimeError):
                action = rng.random()
                if action < 0.4:
                    a.create_route(f"R{k}", service_name=f"S{rng.randrange(12)}",
                                   address="tcp://h:1", lifetime=rng.choice([None, 50]))
                elif action < 0.6:
                    a.alter_route(f"R{k}", address=f"tcp://h{step}:1")
                elif action < 0.75:
                    a.drop_route(f"R{k}")
                elif action < 0.9:
                    with a.transaction():
                        a.create_route(f"T{step}", service_name=f"S{k}", address="LOCAL")
                        if rng.random() < 0.5:
                            raise RuntimeError("roll back")
                else:
                    a.create_service(f"S{k}", queue="q")
    finally:
        stop.set()
        for thread in routers:
            thread.join()
    assert errors == [] and decided[0] > 0
    keys = _sorted_keys({(origin, f"S{k}", None) for origin in ("A", "outside")
                         for k in range(12)})
    assert _check_mirror(inst, keys, in_transaction=False) == (len(keys), 0)


def test_a_change_marked_while_the_mirror_reads_leaves_its_part_stale(inst, monkeypatch):
    """Another thread's write commits and marks its change while a refresh is reading: what
    the refresh read may predate it, so it is not installed; the part stays stale (the
    query decides) until a refresh after the mark."""
    engine = inst.kernel.routing
    mirror = engine.mirror
    a = inst.database("A")
    mirror.mark(CatalogChange(routes_of="A", route_services=frozenset(["S1"])))
    fetchall = inst.kernel.store.fetchall
    raced: list[bool] = []

    def racing(sql, params=None):
        rows = fetchall(sql, params)
        if not raced:  # the other write, committed and marked right after this read
            raced.append(True)
            inst.kernel.store.execute(
                "INSERT INTO routes VALUES (?, nextval('route_id_seq'), 'ToS1', 'S1', NULL, "
                "NULL, 'tcp://s1:1', NULL, now()::TIMESTAMP)", [a.database_id])
            mirror.mark(CatalogChange(routes_of="A", route_services=frozenset(["S1"])))
        return rows

    monkeypatch.setattr(inst.kernel.store, "fetchall", racing)
    assert mirror.refresh(inst.kernel.store) is False
    routed_at = to_utc_datetime(inst.kernel.clock())
    assert mirror.key_inputs("A", "S1", routed_at) is None
    monkeypatch.undo()
    assert mirror.refresh(inst.kernel.store) is True
    assert inst.route("S1", origin="A").route == "ToS1"
    assert Counter(mirror.key_inputs("A", "S1", routed_at)) == Counter(
        engine.key_inputs_by_query(("A", "S1", None), routed_at))


def test_catalog_change_rules():

    change = CatalogChange(routes_of="msdb", route_services=frozenset(["S"]))
    assert change.affects(("outside", "S", None))  # R1.2: outside routes with msdb's table
    assert change.affects(("msdb", "S", None))
    assert not change.affects(("A", "S", None))
    assert not change.affects(("outside", "T", None))
    assert not change.affects_unknown_services("outside")
    dynamic = CatalogChange(routes_of="A", route_services=frozenset(
        ["SQL/ServiceBroker/BrokerConfiguration"]))
    assert dynamic.affects(("A", "T", None)) and dynamic.affects_unknown_services("A")  # R2.4
    assert CatalogChange(services=frozenset(["S"])).affects(("B", "S", GUID_A))  # R2.6, R4
    assert CatalogChange(forwarding=True).affects(("outside", "T", None))  # R3.6
    assert not CatalogChange(forwarding=True).affects(("A", "T", None))
    assert EVERYTHING.affects(("A", "T", None))


DYNAMIC = "SQL/ServiceBroker/BrokerConfiguration"  # R2.4, R8.1
SERVICES = ["S1", "S2", "Known", "tcp://far:4022/S3", DYNAMIC]
ROUTE_NAMES = [f"R{i}" for i in range(10)]
ADDRESSES = ["LOCAL", "TRANSPORT", "tcp://one:1", "tcp://two:2"]


def _sorted_keys(keys):
    return sorted(keys, key=lambda k: (k[0], k[1], k[2] or ""))


def _one_change(inst, clock, rng, db, step) -> None:
    """One random catalog change through the API (it may be refused: BrokerError)."""
    action = rng.random()
    if action < 0.35:
        service = rng.choice([None, *SERVICES])
        db.create_route(
            rng.choice(ROUTE_NAMES), service_name=service, address=rng.choice(ADDRESSES),
            # R2.1, R2.3: routes naming a broker identifier
            broker_instance=rng.choice([None, None, GUID_A, GUID_B, GUID_C])
            if service else None,
            lifetime=rng.choice([None, None, 5, 50]))
    elif action < 0.55:
        db.alter_route(rng.choice(ROUTE_NAMES), **rng.choice([
            {"address": rng.choice(ADDRESSES)},
            {"service_name": rng.choice(["", *SERVICES[:3], DYNAMIC])},
            {"lifetime": rng.choice([3, 30])},
            {"mirror_address": rng.choice(["tcp://mirror:9", "tcp://mirror:8"])},
        ]))
    elif action < 0.7:
        db.drop_route(rng.choice([*ROUTE_NAMES, "AutoCreatedLocal"]))
    elif action < 0.77:
        if not any(q.name == "q" for q in db.queues()):
            db.create_queue("q")
        db.create_service(f"Svc{step}" if rng.random() < 0.5 else rng.choice(SERVICES),
                          queue="q")
    elif action < 0.8:
        db.drop_service(rng.choice(["Known", *SERVICES]))
    elif action < 0.85:
        inst.forwarding = not inst.forwarding
    elif action < 0.9:  # a T-SQL batch: all or nothing (the second statement may fail)
        db.execute(f"CREATE ROUTE {rng.choice(ROUTE_NAMES)} WITH SERVICE_NAME = "
                   f"'{rng.choice(SERVICES[:3])}', ADDRESS = 'tcp://batch:1'; "
                   f"DROP ROUTE {rng.choice(ROUTE_NAMES)}")
    elif action < 0.93:  # R2.4: a route request pending (the R8 issue writes these)
        inst.kernel.store.execute(
            "INSERT OR IGNORE INTO route_requests VALUES (?, ?, to_timestamp(?)::TIMESTAMP)",
            [db.database_id, rng.choice(SERVICES[:3]), clock.now])
        inst.kernel.routing.invalidate()  # a write without a CatalogChange must say so
    else:
        clock.now += rng.choice([1, 4, 20, 60])  # R1.4: routes expire on their own


def _check_mirror(inst, keys, *, in_transaction: bool) -> tuple[int, int]:
    """The mirror's rows for each key are select_key_inputs.sql's (as a multiset; the query
    sees what the open transaction wrote), or None, only inside a transaction, while a part
    the key reads is stale. Returns (keys the mirror answered, keys it left to SQL)."""
    engine = inst.kernel.routing
    mirror = engine.mirror
    routed_at = to_utc_datetime(inst.kernel.clock())
    if not in_transaction:
        assert mirror.fresh
        expiry = inst.kernel.store.fetchone(
            render("routing/next_route_expiry.sql"), {"now": routed_at})[0]
        assert mirror.next_expiry(routed_at) == (True, expiry)  # R1.4
        names = inst.kernel.store.fetchall(render("instance/select_database_names.sql"))
        assert mirror.database_names() == frozenset(r[0] for r in names)
        mentioned = inst.kernel.store.fetchall(render("instance/select_known_service_names.sql"))
        assert mirror.known_services() >= {r[0] for r in mentioned}
    answered = left = 0
    for key in keys:
        by_query = engine.key_inputs_by_query(key, routed_at)
        by_mirror = mirror.key_inputs(key[0], key[1], routed_at)
        if by_mirror is None:
            assert in_transaction, key
            left += 1
        else:
            assert Counter(by_mirror) == Counter(by_query), key
            answered += 1
    return answered, left


def test_random_changes_never_leave_a_stale_answer(inst, clock):
    """Differential: after each random catalog change, every remembered answer equals a
    fresh decision by the routing query, and so does the point path's (keys not yet known
    are decided in Python, pybroker/core/routing/point.py): the same rows, in the same order,
    with the same weights. The point path reads the catalog mirror
    (pybroker/core/routing/mirror.py): its rows for each key equal select_key_inputs.sql's,
    after every change, inside explicit transactions (where it must leave what the
    transaction changed to the query) and after they commit or roll back, as routes expire,
    and as databases come and go."""
    rng = random.Random(20261123)
    db_names = ["A", "B", "msdb"]
    created: list[str] = []
    point_rng = random.Random(7)
    steps_seen: set[tuple] = set()
    checked = 0
    mirror_answered = mirror_left = rolled_back = committed = dropped = 0
    engine = inst.kernel.routing
    for step in range(90):
        keys = [(origin, service, broker)
                for origin in ["A", "B", "outside", *created[-2:]]
                for service in [*SERVICES, "Unknown1", "Unknown2"]
                for broker in (None, GUID_A, GUID_B.upper())]
        db = inst.database(rng.choice(db_names + created[-2:]))
        kind = rng.random()
        try:
            if kind < 0.2:  # an explicit transaction: several changes, then commit or not
                try:
                    with db.transaction():
                        for _ in range(rng.randint(1, 3)):
                            if rng.random() < 0.5:  # a refusal inside, caught: it goes on
                                with contextlib.suppress(pybroker.NotFoundError,
                                                         pybroker.AlreadyExistsError,
                                                         pybroker.RouteDefinitionError):
                                    _one_change(inst, clock, rng, db, step)
                            else:
                                _one_change(inst, clock, rng, db, step)
                            inside = _sorted_keys({engine.normalize_key(k)
                                                   for k in point_rng.sample(keys, 10)})
                            answered, left = _check_mirror(inst, inside, in_transaction=True)
                            mirror_answered += answered
                            mirror_left += left
                            # the decisions inside see the uncommitted rows, like the query
                            assert (engine.resolve_by_point(inside, clock.now)
                                    == engine.resolve_by_query(inside, clock.now)), step
                            inst.route_many(rng.sample(keys, 6))  # remembered, for now
                        if rng.random() < 0.4:
                            raise RuntimeError("roll back")
                    committed += 1
                except (pybroker.BrokerError, RuntimeError) as exc:  # a refused change too
                    assert not isinstance(exc, RuntimeError) or str(exc) == "roll back"
                    rolled_back += 1
            elif kind < 0.25:
                name = f"D{step}"
                inst.create_database(name).create_queue("q")  # everything: a full reload
                created.append(name)
            elif kind < 0.29 and created:
                # pybroker has no DROP DATABASE: a database's rows deleted behind the API's
                # back, then invalidate(), as such writes must
                gone = inst.database(created.pop())
                for table in ("routes", "services", "route_requests", "databases"):
                    inst.kernel.store.execute(f"DELETE FROM {table} WHERE database_id = ?",
                                        [gone.database_id])
                inst.kernel.routing.invalidate()
                dropped += 1
            else:
                _one_change(inst, clock, rng, db, step)
        except pybroker.BrokerError:
            pass  # refused changes change nothing; the check below still runs
        keys = [k for k in keys if k[0] in {"A", "B", "outside", *created}]
        sample = rng.sample(keys, 12)
        inst.route_many(sample)  # remembered now (decided, or answered from memory)
        # the point path against the query, row for row, for a sample of keys, and the
        # mirror's rows against select_key_inputs.sql's
        compare = _sorted_keys({engine.normalize_key(k) for k in point_rng.sample(keys, 16)})
        answered, _ = _check_mirror(inst, compare, in_transaction=False)
        mirror_answered += answered
        by_query = engine.resolve_by_query(compare, clock.now)
        by_point = engine.resolve_by_point(compare, clock.now)
        assert by_point == by_query, step
        steps_seen.update((r[11], r[12], r[13], r[14]) for r in by_point)
        if clock.now >= engine.valid_until:
            continue  # a route has expired: nothing remembered is used before a refresh
        # every answer the engine remembers, the sample's included, is the query's answer
        remembered = {engine.normalize_key(k): options(p.decisions)
                      for k, p in engine.plans.items()}
        now_fresh = engine.decide_plans(_sorted_keys(remembered), clock.now, point=False)
        for key, answer in remembered.items():
            assert answer == options(now_fresh[key].decisions), (step, key)
        checked += len(remembered)
    assert checked > 90 * 12
    assert len(steps_seen) >= 10  # many kinds of decision compared (every kind: below)
    assert {m for m, _, _, _ in steps_seen} == {f"R2.{i}" for i in range(1, 8)}
    # both ways inside transactions: the mirror answered what they left alone, and left
    # what they changed to the query
    assert mirror_left > 0 and mirror_answered > 90 * 16
    assert rolled_back > 0 and committed > 0 and dropped > 0


def test_the_point_path_decides_every_rule_like_the_query(inst, clock):
    """A catalog that reaches every matching (R2.1-R2.7), choosing (R3.1-R3.6) and locating
    (R4.1, R4.2) step: the point path gives the query's rows, in order, with the weights,
    on the mirror's rows (equal to select_key_inputs.sql's)."""
    a, b, msdb = inst.database("A"), inst.database("B"), inst.database("msdb")
    b.create_service("Known", queue="q")  # in A and B: R4.2 picks
    a.create_route("ByBroker", service_name="S1", broker_instance=GUID_A, address="LOCAL")
    a.create_route("ByOther", service_name="S1", broker_instance=GUID_C, address="tcp://c:1")
    a.create_route("Mirrored", service_name="S2", address="tcp://m:1",
                   mirror_address="tcp://m:2")
    a.create_route("Plain", service_name="S2", address="tcp://p:1")
    a.create_route("Group1", service_name="S3", broker_instance=GUID_A, address="tcp://g:1")
    a.create_route("Group2", service_name="S3", broker_instance=GUID_B, address="tcp://g:2")
    a.create_route("Group3", service_name="S3", broker_instance=GUID_B, address="tcp://g:3")
    a.create_route("Same1", service_name="S4", address="tcp://same:1")
    a.create_route("Same2", service_name="S4", address="tcp://same:1")
    a.create_route("Expiring", service_name="S4", address="tcp://x:1", lifetime=5)
    a.create_route("LocalKnown", service_name="Known", address="LOCAL")
    a.create_route("LocalGone", service_name="Gone", address="LOCAL")
    a.create_route("Transport", address="TRANSPORT")
    b.create_route("Dyn", service_name="SQL/ServiceBroker/BrokerConfiguration",
                   address="tcp://router:1")
    inst.kernel.store.execute("INSERT INTO route_requests VALUES (?, 'Asked', "
                        "to_timestamp(?)::TIMESTAMP)", [b.database_id, clock.now])
    msdb.create_route("Forward", service_name="S2", address="tcp://fwd:1")
    b.drop_route("AutoCreatedLocal")
    msdb.drop_route("AutoCreatedLocal")  # outside: R2.6, R2.7
    inst.kernel.routing.invalidate()
    engine = inst.kernel.routing
    services = ["S1", "S2", "S3", "S4", "Known", "Gone", "Asked", "Nothing",
                "tcp://far:4022/S5", "SQL/ServiceBroker/BrokerConfiguration"]
    keys = sorted({engine.normalize_key((origin, service, broker))
                   for origin in ("A", "B", "outside") for service in services
                   for broker in (None, GUID_A, GUID_B)},
                  key=lambda k: (k[0], k[1], k[2] or ""))
    seen: set[tuple] = set()
    for forwarding, later in ((False, 0), (True, 0), (True, 10)):
        inst.forwarding = forwarding
        clock.now += later  # R1.4: Expiring has expired
        by_query = engine.resolve_by_query(keys, clock.now)
        assert _check_mirror(inst, keys, in_transaction=False) == (len(keys), 0)
        assert engine.resolve_by_point(keys, clock.now) == by_query
        seen.update((r[11], r[12], r[13], r[14]) for r in by_query)
    assert {m for m, _, _, _ in seen} == {f"R2.{i}" for i in range(1, 8)}
    assert {d for _, _, _, d in seen} >= {f"R3.{i}" for i in range(1, 7)}
    assert {loc for _, _, loc, _ in seen} == {None, "R4.1", "R4.2"}


@settings(max_examples=500, deadline=None)
@given(seconds=st.floats(min_value=-2e9, max_value=6e10, allow_nan=False)
       | st.integers(0, 4 * 10**9).map(lambda s: s + 0.5e-6))
def test_to_utc_datetime_is_fromtimestamps_naive_utc_to_the_microsecond(seconds):
    """The cheaper arithmetic rounds as datetime.fromtimestamp does (half to even), at
    half-microsecond ties too."""
    assert to_utc_datetime(seconds) == datetime.fromtimestamp(seconds, UTC).replace(
        tzinfo=None)
