"""The pipeline's templates (sql/pipeline/) in Spark SQL: golden text for each, both as one
query (sql_templates.to_spark) and as the CTE stages the Spark engine runs
(sql_templates.to_spark_stages). Regenerate after a deliberate change with
``PYBROKER_UPDATE_GOLDEN=1 python -m pytest tests/test_pipeline_templates.py`` and review
the diff. Only a Spark run proves a template (test_pipeline_spark.py runs every one)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pybroker.apps.pipeline.schema import ROUTING_TABLES
from pybroker.errors import TemplateError
from pybroker.storage import templates as sql_templates
from pybroker.storage.resources import sql_dir

GOLDEN = Path(__file__).parent / "golden" / "pipeline"
UPDATE = os.environ.get("PYBROKER_UPDATE_GOLDEN") == "1"
CATALOG = {t.name: f"state_{t.name}" for t in ROUTING_TABLES}
TRAFFIC = {"transmission_queue": "tq", "databases": "db", "decisions": "decisions",
           "as_of": "as_of", "conversation_endpoints": "endpoints"}
GENERATE = {"params": "params", "numbers": "numbers"}

# Each pipeline template that runs on both engines, with the variables it gets.
TEMPLATES = {
    "route_epochs": {"routes": "state_routes", "databases": "state_databases"},
    "decision_keys": {"conversations": "conversations", "epochs": "epochs",
                      "engine": "spark", **CATALOG},
    "key_hash_shared": {"keys": "decision_keys"},
    "key_options": {"keys": "decision_keys", **CATALOG},
    "decide_conversations": {"conversations": "conversations", "keys": "decision_keys",
                             "key_options": "key_options",
                             "option_values": "key_options", "engine": "spark",
                             "broadcast": True, "by_hash": True},
    "decision_outcomes": {"decisions": "decisions"},
    "duplicate_conversations": {"conversations": "conversations", "engine": "spark"},
    "conversation_id_counts": {"conversations": "conversations", "engine": "spark"},
    "impact_changes": {"conversations": "conversations", "before": "before",
                       "after": "after"},
    "impact_summary": {"changes": "changes"},
    "traffic_conversations": TRAFFIC,
    "traffic_volume": TRAFFIC,
    "traffic_delayed": TRAFFIC,
    "traffic_stuck": TRAFFIC,
    "traffic_endpoints": TRAFFIC,
    "generate_databases": GENERATE,
    "generate_service_queues": GENERATE,
    "generate_services": GENERATE,
    "generate_routing": GENERATE,
    "generate_route_requests": GENERATE,
    "generate_settings": GENERATE,
    "generate_conversations": GENERATE,
}
# Templates that run on DuckDB only, and why.
DUCKDB_ONLY = {
    "export_table": "reads the instance file, which only DuckDB opens",
    "export_transmission_queue": "reads the instance file's view, which only DuckDB opens",
    "duckdb__numbers": "Spark builds the numbers with spark.range()",
    "duckdb__write_parquet": "Spark writes with its DataFrameWriter",
    "duckdb__text_value_counts": "for DuckDB's ENUM (Engine.categorical); Spark has none",
    "duckdb__create_enum": "DuckDB's ENUM (Engine.categorical); Spark has none",
    "duckdb__categorical": "DuckDB's ENUM (Engine.categorical); Spark has none",
    "duckdb__drop_table": "Spark's stages are views, replaced as they are made again",
    "duckdb__create_rows": "Spark builds given rows with createDataFrame",
    "duckdb__insert_rows": "Spark builds given rows with createDataFrame",
    "export_info": "written beside the instance file's tables, by DuckDB's Parquet writer",
}
MACROS = {"_draw": "jinja macros imported by other templates",
          "_id_hash": "jinja macros imported by other templates"}


def _spark_text(stem: str) -> str:
    name = f"pipeline/{stem}.sql"
    whole = sql_templates.to_spark(name, **TEMPLATES[stem])
    stages = sql_templates.to_spark_stages(name, **TEMPLATES[stem])
    parts = [f"-- as one query\n{whole}\n"]
    for cte, sql, references in stages:
        label = "final query" if cte is None else f"stage {cte} (read {references}x)"
        parts.append(f"-- {label}\n{sql}\n")
    return "\n".join(parts)


def test_every_pipeline_template_is_listed():
    on_disk = {p.stem for p in (sql_dir() / "pipeline").glob("*.sql")}
    assert on_disk == set(TEMPLATES) | set(DUCKDB_ONLY) | set(MACROS)
    assert {p.name.removesuffix(".spark.sql") for p in GOLDEN.glob("*.spark.sql")} == set(
        TEMPLATES)


@pytest.mark.parametrize("stem", sorted(TEMPLATES))
def test_pipeline_template_matches_its_golden_spark_sql(stem):
    text = _spark_text(stem)
    golden = GOLDEN / f"{stem}.spark.sql"
    if UPDATE:
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}; run with PYBROKER_UPDATE_GOLDEN=1"
    assert text == golden.read_text(), (
        f"{golden.name} differs from the transpiled template; if intended, regenerate with "
        "PYBROKER_UPDATE_GOLDEN=1 and review the diff"
    )


@pytest.mark.parametrize("stem", sorted(TEMPLATES))
def test_pipeline_template_stages_rebuild_the_query(stem):
    stages = sql_templates.to_spark_stages(f"pipeline/{stem}.sql", **TEMPLATES[stem])
    assert stages[-1][0] is None
    names = [cte for cte, _, _ in stages[:-1]]
    assert len(names) == len(set(names))
    assert all(references >= 1 for _, _, references in stages[:-1])  # no dead CTE


def test_key_options_stages_materialize_the_ctes_read_several_times():
    stages = {cte: refs for cte, _, refs in sql_templates.to_spark_stages(
        "pipeline/key_options.sql", **TEMPLATES["key_options"])}
    assert stages["conversation_key"] == 6 and stages["located"] == 2
    assert stages["route_option"] == 1


@pytest.mark.parametrize("stem", sorted(DUCKDB_ONLY))
def test_duckdb_only_templates_parse(stem):
    from pybroker.apps.pipeline.schema import ROUTING_TABLES as tables

    variables = {
        "export_table": {"table": "routes", "columns": tables[4].columns,
                         "present": frozenset(tables[4].column_names)},
        "duckdb__write_parquet": {"relation": "decisions"},
        "duckdb__drop_table": {"table": "resolve_keys"},
        "duckdb__text_value_counts": {"relation": "options", "columns": ("outcome", "route")},
        "duckdb__create_enum": {"type_name": "options_outcome", "column": "outcome",
                                "relation": "options"},
        "duckdb__categorical": {"relation": "options",
                                "categories": (("outcome", "options_outcome"),)},
        "duckdb__create_rows": {"table": "params", "columns": tables[0].columns},
        "duckdb__insert_rows": {"table": "params", "columns": tables[0].columns},
    }.get(stem, {})
    sql_templates.parse(f"pipeline/{stem}.sql", **variables)


def test_pipeline_templates_render_strictly():
    with pytest.raises(TemplateError, match="'epochs' is undefined"):
        sql_templates.render("pipeline/decision_keys.sql", conversations="c",
                             databases="d", engine="duckdb")
