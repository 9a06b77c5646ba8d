"""The routing templates in Spark SQL: golden text for each (sqlglot, DuckDB -> Spark, with
unsupported constructs raising), and one parity run of resolve_route_options.sql on a local
SparkSession against DuckDB on the same rows.

Regenerate the golden files after a deliberate change with
``PYBROKER_UPDATE_GOLDEN=1 python -m pytest tests/test_spark_templates.py`` and review the
diff: a change in translation must show up in review (STYLE.md, sqlglot and SQLMesh).
"""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import sqlglot

import pybroker
from pybroker.apps.pipeline.engine import SparkEngine
from pybroker.devtools.demos.routing import load_examples
from pybroker.errors import TemplateError
from pybroker.storage import templates as sql_templates
from pybroker.storage.resources import sql_dir

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("PYBROKER_UPDATE_GOLDEN") == "1"

# Each routing query template with the variables it is rendered with for the golden text.
TEMPLATES = {
    "resolve_route_options": {"conversations": "conversations"},
    "decide_route": {"conversations": "conversations", "pick": "random"},
    "explain_route": {"conversations": "conversations"},
    "resolve_bound_keys": {},
    "explain_bound_key": {},
    "next_route_expiry": {},
    "select_key_inputs": {},
    "select_mirror_routes": {},
    "select_mirror_route_requests": {},
    "select_mirror_services": {},
    "select_mirror_forwarding": {},
}

# Templates sqlglot cannot read as one DuckDB query, and why. The macros wrap
# decide_route.sql / explain_route.sql, which are parsed and transpiled on their own.
NOT_ONE_QUERY = {
    "routing/_route_steps.sql": "a partial: the body of a WITH, included by others",
    "catalog/21_route_decision.sql": "CREATE MACRO ... AS TABLE is DuckDB-only DDL",
    "catalog/22_route_explain.sql": "CREATE MACRO ... AS TABLE is DuckDB-only DDL",
    "catalog/44_diagnose.sql": "CREATE MACRO ... AS TABLE is DuckDB-only DDL",
    "catalog/_known_names.sql": "a partial: jinja macros the catalog's macros import",
}
# Templates that take variables of their own (no user value: a path made a literal by the
# `literal` filter, a name made a quoted identifier by the `identifier` filter)
VARIABLES = {
    "instance/attach_for_replay.sql": {"path": "/tmp/i.duckdb", "alias": "replaying"},
    "instance/attach_snapshot.sql": {"path": "/tmp/.s.duckdb.partial", "alias": "snapshot"},
    "instance/copy_database.sql": {"source": "i", "target": "snapshot"},
    "instance/checkpoint_database.sql": {"alias": "snapshot"},
    "instance/detach_database.sql": {"alias": "snapshot"},
    # a jinja switch (HONOR_BROKER_PRIORITY); the other branch: test_broker_priorities_honoured
    "conversation/select_next_ready_group.sql": {"by_priority": True},
}


def _all_templates() -> list[str]:
    # sql/pipeline/ has its own golden and parse tests (test_pipeline_templates.py)
    return sorted(f"{p.parent.name}/{p.name}" for p in sql_dir().glob("*/*.sql")
                  if p.parent.name != "pipeline")


def _check_golden(stem: str, directory: Path, update: bool) -> None:
    name = f"routing/{stem}.sql"
    spark_sql = sql_templates.to_spark(name, **TEMPLATES[stem]) + "\n"
    golden = directory / f"{stem}.spark.sql"
    if update:
        golden.write_text(spark_sql)
    assert golden.exists(), f"no golden file {golden}; run with PYBROKER_UPDATE_GOLDEN=1"
    assert spark_sql == golden.read_text(), (
        f"{golden.name} differs from the transpiled template; if the change is intended, "
        "regenerate with PYBROKER_UPDATE_GOLDEN=1 and review the diff"
    )


def test_every_routing_query_template_has_a_golden_case():
    on_disk = {p.stem for p in (sql_dir() / "routing").glob("*.sql")
               if not p.name.startswith("_")}
    assert on_disk == set(TEMPLATES)
    assert {p.name.removesuffix(".spark.sql") for p in GOLDEN.glob("*.spark.sql")} == set(
        TEMPLATES)


@pytest.mark.parametrize("stem", sorted(TEMPLATES))
def test_template_matches_its_golden_spark_sql(stem):
    _check_golden(stem, GOLDEN, UPDATE)


def test_update_mode_writes_golden_files_that_then_compare_equal(tmp_path):
    for stem in TEMPLATES:
        _check_golden(stem, tmp_path, update=True)
        _check_golden(stem, tmp_path, update=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{stem}.spark.sql" for stem in TEMPLATES)


@pytest.mark.parametrize("name", _all_templates())
def test_every_template_parses_with_sqlglot(name):
    # The bench templates include decide_route.sql; instance/ and catalog/ take no variables.
    variables = TEMPLATES["decide_route"] if name.startswith(("routing/", "bench/")) else (
        VARIABLES.get(name, {}))
    if name in NOT_ONE_QUERY:
        if name.startswith("catalog/") and "partial" not in NOT_ONE_QUERY[name]:
            assert sql_templates.render(name).lstrip().startswith("CREATE OR REPLACE MACRO")
        return
    sql_templates.parse(name, **variables)


def test_templates_render_strictly():
    with pytest.raises(TemplateError, match="'conversations' is undefined"):
        sql_templates.render("routing/resolve_route_options.sql")
    with pytest.raises(TemplateError, match="unknown pick mode 'sometimes'"):
        sql_templates.render("routing/decide_route.sql", conversations="c", pick="sometimes")


def test_a_missing_template_raises_template_error():
    with pytest.raises(TemplateError, match=r"routing/no_such_template\.sql"):
        sql_templates.to_spark("routing/no_such_template.sql")


def test_an_unsupported_construct_raises_instead_of_transpiling(monkeypatch):
    # Spark's max_by has no count argument. (sqlglot passes some DuckDB-only syntax through
    # unchanged, e.g. POSITIONAL JOIN, so only the Spark run itself proves a template.)
    monkeypatch.setattr(sql_templates, "render",
                        lambda name, **v: "SELECT arg_max(a, b, 2) FROM t")
    with pytest.raises(TemplateError, match="does not transpile to Spark"):
        sql_templates.to_spark("routing/anything.sql")


@pytest.mark.parametrize("duckdb_sql, spark_sql", [
    ("SELECT /*+ BROADCAST(k) */ c.a FROM c LEFT JOIN k ON k.a = c.a",
     "SELECT /*+ BROADCAST(k) */ c.a FROM c LEFT JOIN k ON k.a = c.a"),
    ("WITH x AS (SELECT /*+ BROADCAST(k) */ k.a FROM c JOIN k ON k.a = c.a) SELECT a FROM x",
     "WITH x AS (SELECT /*+ BROADCAST(k) */ k.a FROM c JOIN k ON k.a = c.a) SELECT a FROM x"),
    ("SELECT /* a plain comment */ 1", "/* a plain comment */ SELECT 1"),
])
def test_a_hint_comment_becomes_sparks_hint_and_a_plain_comment_stays(duckdb_sql, spark_sql):
    # DuckDB reads /*+ ... */ as a comment; sqlglot keeps it as one (written "/* + ... */",
    # which Spark would ignore), so the templates' hints are made hints again for Spark
    tree = sqlglot.parse_one(duckdb_sql, read="duckdb")
    assert ("/* +" in tree.sql(dialect="spark")) == ("/*+" in duckdb_sql)
    assert sql_templates._spark_hints("t", tree).sql(dialect="spark") == spark_sql


def test_an_empty_hint_is_refused_by_name():
    with pytest.raises(TemplateError, match=r"the hint /\*\+ \*/ is not Spark's"):
        sql_templates._spark_hints("t", sqlglot.parse_one("SELECT /*+ */ 1", read="duckdb"))


# -- parity on a local SparkSession -------------------------------------------------------------

NOW = datetime(2026, 1, 1, tzinfo=UTC)
HOUR = 3600
GUID_1 = "5fb8d92b-ed69-4c80-afbb-2aa6a7d3cb2d"  # example 5's BalancedRouteOne
GUID_2 = "81b1d3d0-288e-4d2c-b1d3-456cbb944b4f"  # example 5's BalancedRouteTwo
PINNED = "0f0f0f0f-0000-4000-8000-000000000001"
AW = "AdventureWorks2008R2"
CATALOG = ("databases", "services", "routes", "route_requests", "instance_settings")

# routed_at instants: before the 1-hour routes expire, exactly at their expiry (expired:
# lifetime > routed_at is false), after them but before the 12-hour routes, after all.
ROUTED_AT = [
    NOW.replace(tzinfo=None) + timedelta(minutes=30),
    NOW.replace(tzinfo=None) + timedelta(hours=1),
    NOW.replace(tzinfo=None) + timedelta(hours=6),
    NOW.replace(tzinfo=None) + timedelta(days=1),
]
SERVICES = [
    "InventoryService", "ElsewhereService", "PinnedService", "PendingService", "OrderParts",
    "BalancedService", "GoneService", "RemoteOnlyService", "NoSuchService",
    "tcp://h:1/x", "TCP://Host.Example:4022/svc", "tcp://noport/x",
    "SQL/ServiceBroker/BrokerConfiguration",
]


def _example_route(db, route: dict) -> None:
    db.create_route(route["name"], service_name=route["remote_service_name"],
                    broker_instance=route["broker_instance"], address=route["address"],
                    mirror_address=route["mirror_address"])


def _build_instance(inst) -> None:
    """The routing tables of the seven examples merged into one instance, plus what they
    leave out. An example whose table would mask another's gets a database of its own;
    msdb's routes of examples 1-7 expire in turn, so 'outside' sees each version of it."""
    ex = {e.number: e for e in load_examples()}

    aw = inst.create_database(AW)  # examples 1, 2, 5 and 6
    aw.create_queue("q")
    for service in ex[6].services[AW]:  # InventoryService, ElsewhereService
        aw.create_service(service, queue="q")
    for number in (2, 5):
        for route in ex[number].routes[AW][1:]:  # [0] is AutoCreatedLocal
            _example_route(aw, route)
    # R3: an identical route counts once; a second address for one identifier splits it.
    aw.create_route("BalancedRouteTwoCopy", service_name="BalancedService",
                    broker_instance=GUID_2, address="tcp://server2.Adventure-Works.com:4022/")
    aw.create_route("BalancedRouteTwoSpare", service_name="BalancedService",
                    broker_instance=GUID_2, address="tcp://server3.Adventure-Works.com:4022/")
    aw.create_route("GoneRoute", service_name="GoneService", address="tcp://gone:4022",
                    lifetime=HOUR)  # R1.4
    aw.create_route("TransportRoute", address="TRANSPORT")  # R3.4 / R10.6

    mirror = inst.create_database("MirrorWorks")  # example 3, and R3.1 over R3.3
    for route in ex[3].routes[AW][1:]:
        _example_route(mirror, route)
    mirror.create_route("OrderPartsPlainRoute", service_name="OrderParts",
                        address="tcp://host2.Adventure-Works.com:4022/")

    external = inst.create_database("ExternalWorks")  # example 4
    for route in ex[4].routes[AW][1:]:
        _example_route(external, route)

    pinned = inst.create_database("PinnedWorks", broker_instance=PINNED)  # R4.1, R4.2
    pinned.create_queue("q")
    for service in ("InventoryService", "PinnedService", "PendingService"):
        pinned.create_service(service, queue="q")

    bare = inst.create_database("BareWorks")  # R2.6 implicit LOCAL, R2.7
    bare.drop_route("AutoCreatedLocal")

    dyn = inst.create_database("DynWorks")  # R2.4, and R2.2 before it
    dyn.create_route("DynamicRoute", service_name="SQL/ServiceBroker/BrokerConfiguration",
                     address="tcp://router.Adventure-Works.com:4022/", lifetime=12 * HOUR)
    _example_route(dyn, ex[2].routes[AW][1])
    inst.kernel.store.execute(  # a pending R8.2 request: R2.4 is skipped for that service
        "INSERT INTO route_requests VALUES (?, 'PendingService', ?)",
        [dyn.database_id, NOW.replace(tzinfo=None)],
    )

    msdb = inst.database("msdb")
    _example_route(msdb, ex[6].routes["msdb"][1])  # ForwardingRoute for ElsewhereService
    forward_all = dict(ex[7].routes["msdb"][1], name="ForwardAllRoute")
    msdb.create_route(forward_all["name"], address=forward_all["address"],
                      lifetime=HOUR)  # example 7 for the first hour
    msdb.drop_route("AutoCreatedLocal")
    msdb.create_route("AutoCreatedLocal", address="LOCAL", lifetime=12 * HOUR)  # then R2.7


def _conversations(inst) -> list[tuple]:
    own = inst.database(AW).broker_instance
    brokers = [None, GUID_1, GUID_2, GUID_2.upper(), PINNED, own,
               "00000000-0000-4000-8000-000000000000"]
    origins = [d.name for d in inst.databases()] + ["outside"]
    return [(origin, service, broker, at)
            for origin in origins for service in SERVICES for broker in brokers
            for at in ROUTED_AT]


def _normalize(rows) -> list[tuple]:
    out = []
    for row in rows:
        values = []
        for v in row:
            if isinstance(v, Decimal):
                v = float(v)
            if isinstance(v, float):
                assert math.isfinite(v)
                v = round(v, 9)
            if isinstance(v, datetime) and v.tzinfo is not None:
                v = v.astimezone(UTC).replace(tzinfo=None)
            values.append(v)
        out.append(tuple(values))
    return sorted(out, key=lambda r: tuple((x is None, str(x)) for x in r))


@pytest.mark.spark
def test_resolve_route_options_gives_identical_rows_on_spark_and_duckdb(spark, tmp_path):
    # On Spark the template runs as the pipeline runs its templates: each CTE a stage, those
    # read more than once computed once (sql_templates.to_spark_stages). As one query, Spark
    # would plan every CTE again at each reference: the same rows, taking twice as long.
    # (sql_templates.to_spark, the one-query text, is what the golden files check.)
    seen: dict[str, set] = {}
    with pybroker.connect(clock=NOW.timestamp) as inst:
        _build_instance(inst)
        con = inst.kernel.store.connection
        con.execute("CREATE TEMP TABLE conversations (origin VARCHAR, service_name VARCHAR, "
                    "broker_instance VARCHAR, routed_at TIMESTAMP)")
        con.executemany("INSERT INTO conversations VALUES (?, ?, ?, ?)", _conversations(inst))

        for forwarding in (False, True):  # R3.6 / R7
            inst.forwarding = forwarding
            columns, duck_rows = inst.kernel.store.query(
                "routing/resolve_route_options.sql", conversations="conversations"
            )
            export = tmp_path / f"forwarding_{forwarding}"
            export.mkdir()
            for table in (*CATALOG, "conversations"):
                target = export / f"{table}.parquet"
                con.execute(f"COPY {table} TO '{target}' (FORMAT parquet)")
                spark.read.parquet(str(target)).createOrReplaceTempView(table)

            engine = SparkEngine(spark)
            try:
                engine.stage("options", "routing/resolve_route_options.sql", small=True,
                             conversations="conversations")
                spark_columns, spark_rows = engine.fetch("options")
            finally:
                engine.close()
            assert spark_columns == columns
            duck, on_spark = _normalize(duck_rows), _normalize(spark_rows)
            assert [r for r in duck if r not in on_spark] == [], f"forwarding={forwarding}"
            assert [r for r in on_spark if r not in duck] == [], f"forwarding={forwarding}"
            assert on_spark == duck

            for column in ("outcome", "match_step", "choose_step", "locate_step",
                           "decided_by"):
                i = columns.index(column)
                seen.setdefault(column, set()).update(r[i] for r in duck_rows)
            outside = {r[columns.index("decided_by")] for r in duck_rows
                       if r[columns.index("origin")] == "outside"}
            assert ("R3.6" in outside) is not forwarding

    # the run covers every way a decision is made
    assert seen["outcome"] == {"deliver", "send", "delay", "drop"}
    assert seen["match_step"] == {f"R2.{i}" for i in range(1, 8)}
    assert seen["choose_step"] == {None, *(f"R3.{i}" for i in range(1, 6))}
    assert seen["locate_step"] == {None, "R4.1", "R4.2"}
    assert seen["decided_by"] == {"R2.4", "R2.7", *(f"R3.{i}" for i in range(1, 7))}
    weights = {round(float(r[columns.index("weight")]), 9) for r in duck_rows}
    assert {1.0, 0.5, 0.25} <= weights  # R2.3, R3 and R4.2 picks split the probability
