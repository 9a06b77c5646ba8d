"""The routing templates in Spark SQL: golden text for each (sqlglot, DuckDB -> Spark, with
unsupported constructs raising), and one parity run of resolve_route_options.sql on a local
SparkSession against DuckDB on the same rows."""

from __future__ import annotations

import math
import os
from datetime import datetime
from pathlib import Path

import pytest

import pybroker
from pybroker import sql_templates
from pybroker.errors import TemplateError
from pybroker.resources import sql_dir

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
}


def test_every_routing_query_template_has_a_golden_case():
    on_disk = {p.stem for p in (sql_dir() / "routing").glob("*.sql")
               if not p.name.startswith("_")}
    assert on_disk == set(TEMPLATES)


@pytest.mark.parametrize("stem", sorted(TEMPLATES))
def test_template_parses_and_matches_its_golden_spark_sql(stem):
    name = f"routing/{stem}.sql"
    sql_templates.parse(name, **TEMPLATES[stem])
    spark_sql = sql_templates.to_spark(name, **TEMPLATES[stem]) + "\n"
    golden = GOLDEN / f"{stem}.spark.sql"
    if UPDATE:
        golden.write_text(spark_sql)
    assert golden.exists(), f"no golden file {golden}; run with PYBROKER_UPDATE_GOLDEN=1"
    assert spark_sql == golden.read_text()


def test_templates_render_strictly():
    with pytest.raises(TemplateError, match="'conversations' is undefined"):
        sql_templates.render("routing/resolve_route_options.sql")
    with pytest.raises(TemplateError, match="unknown pick mode 'sometimes'"):
        sql_templates.render("routing/decide_route.sql", conversations="c", pick="sometimes")


def test_an_unsupported_construct_raises_instead_of_transpiling(monkeypatch):
    # Spark's max_by has no count argument. (sqlglot passes some DuckDB-only syntax through
    # unchanged, e.g. POSITIONAL JOIN, so only the Spark run itself proves a template.)
    monkeypatch.setattr(sql_templates, "render",
                        lambda name, **v: "SELECT arg_max(a, b, 2) FROM t")
    with pytest.raises(TemplateError, match="does not transpile to Spark"):
        sql_templates.to_spark("routing/anything.sql")


# -- parity on a local SparkSession -------------------------------------------------------------

GUID_1 = "5fb8d92b-ed69-4c80-afbb-2aa6a7d3cb2d"
GUID_2 = "81b1d3d0-288e-4d2c-b1d3-456cbb944b4f"
CATALOG = ("databases", "services", "routes", "route_requests", "instance_settings")


def _build_instance(inst) -> None:
    """One instance exercising every matching, choosing and locating branch."""
    a = inst.create_database("A")
    b = inst.create_database("B", broker_instance="0f0f0f0f-0000-4000-8000-000000000001")
    c = inst.create_database("C")
    for db, services in ((a, ["Inventory", "Both"]), (b, ["Both", "OnlyB", "Pinned", "Pending"]),
                         (c, ["OnlyB"])):
        db.create_queue("q")
        for service in services:
            db.create_service(service, queue="q")
    a.create_route("Parts", service_name="OrderParts", address="tcp://parts:4022/")
    a.create_route("Mirrored", service_name="Mirrored", address="tcp://p1:4022",
                   mirror_address="tcp://p2:4022")
    a.create_route("BalOne", service_name="Balanced", broker_instance=GUID_1,
                   address="tcp://s1:4022")
    a.create_route("BalTwo", service_name="Balanced", broker_instance=GUID_2,
                   address="tcp://s2:4022")
    a.create_route("BalTwoCopy", service_name="Balanced", broker_instance=GUID_2,
                   address="tcp://s2:4022")  # identical: counts as one
    a.create_route("Expired", service_name="Gone", address="tcp://gone:1", lifetime=1)
    a.create_route("Wild", address="tcp://wild:4022")
    b.drop_route("AutoCreatedLocal")
    b.create_route("Transport", address="TRANSPORT")
    c.drop_route("AutoCreatedLocal")
    c.create_route("Dyn", service_name="SQL/ServiceBroker/BrokerConfiguration",
                   address="tcp://router:4022")
    msdb = inst.database("msdb")
    msdb.create_route("Fwd", service_name="Elsewhere", address="tcp://elsewhere:4022")
    inst._store.execute(
        "INSERT INTO route_requests VALUES (?, 'Pending', TIMESTAMP '2026-01-01 00:00:00')",
        [c.database_id],
    )


def _conversations(guids: list[str]) -> list[tuple]:
    services = ["Inventory", "Both", "OnlyB", "Pinned", "OrderParts", "Mirrored", "Balanced",
                "Gone", "Elsewhere", "Nowhere", "Pending", "tcp://h:4022/Svc", "TCP://X:1/y"]
    brokers = [None, GUID_1, GUID_2, *guids, "00000000-0000-4000-8000-000000000000"]
    times = [datetime(2026, 6, 1, 12, 0, 0), datetime(2099, 1, 1)]
    rows = []
    for origin in ("A", "B", "C", "outside"):
        for service in services:
            for broker in brokers:
                for at in times:
                    rows.append((origin, service, broker, at))
    return rows


def _normalize(rows) -> list[tuple]:
    out = []
    for row in rows:
        values = []
        for v in row:
            if isinstance(v, float):
                v = round(v, 9)
                assert math.isfinite(v)
            values.append(v)
        out.append(tuple(values))
    return sorted(out, key=lambda r: tuple((x is None, str(x)) for x in r))


@pytest.mark.spark
def test_resolve_route_options_gives_identical_rows_on_spark_and_duckdb(spark, tmp_path):
    with pybroker.connect(clock=lambda: datetime(2026, 1, 1).timestamp()) as inst:
        _build_instance(inst)  # forwarding off: R3.6 decides for 'outside' too
        guids = [d.broker_instance for d in inst.databases()]
        con = inst._store.connection
        con.execute("CREATE TEMP TABLE conversations (origin VARCHAR, service_name VARCHAR, "
                    "broker_instance VARCHAR, routed_at TIMESTAMP)")
        con.executemany("INSERT INTO conversations VALUES (?, ?, ?, ?)", _conversations(guids))
        columns, duck_rows = inst._store.query(
            "routing/resolve_route_options.sql", conversations="conversations"
        )
        for table in (*CATALOG, "conversations"):
            target = tmp_path / f"{table}.parquet"
            con.execute(f"COPY {table} TO '{target}' (FORMAT parquet)")
            spark.read.parquet(str(target)).createOrReplaceTempView(table)

    spark_sql = sql_templates.to_spark(
        "routing/resolve_route_options.sql", conversations="conversations"
    )
    result = spark.sql(spark_sql)
    assert result.columns == columns
    spark_rows = [tuple(r) for r in result.collect()]

    outcomes = {r[columns.index("decided_by")] for r in duck_rows}
    # the run covers every way a decision is made
    assert {"R2.4", "R2.7", "R3.1", "R3.2", "R3.3", "R3.4", "R3.5", "R3.6"} <= outcomes
    assert {"R2.3", "R2.6"} <= {r[columns.index("match_step")] for r in duck_rows}
    assert len(duck_rows) > 700
    duck, on_spark = _normalize(duck_rows), _normalize(spark_rows)
    assert [r for r in duck if r not in on_spark] == []
    assert on_spark == duck
