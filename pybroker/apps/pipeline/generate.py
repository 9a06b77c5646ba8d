"""``pipeline generate``: a seeded synthetic workload, written as Parquet.

The output directory is a routing state in the layout of ``pybroker export`` (one
``<table>.parquet`` per routing table) plus ``conversations.parquet``, so it feeds
``pipeline resolve --routing DIR --conversations DIR/conversations.parquet`` directly.
Every value is derived from md5 of the seed and a row number (sql/pipeline/_draw.sql), so
DuckDB and Spark write the same rows for the same seed.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from pybroker.apps.pipeline.engine import Engine
from pybroker.apps.pipeline.schema import Column, Table
from pybroker.errors import PipelineError

PARAMS = Table("generate_params", (
    Column("seed", "VARCHAR"),
    Column("conversation_count", "BIGINT"),
    Column("route_count", "BIGINT"),
    Column("start_us", "BIGINT"),
    Column("span_us", "BIGINT"),
))

# exported table -> the template that generates it
TEMPLATES = {
    "instance_settings": "pipeline/generate_settings.sql",
    "databases": "pipeline/generate_databases.sql",
    "service_queues": "pipeline/generate_service_queues.sql",
    "services": "pipeline/generate_services.sql",
    "routes": "pipeline/generate_routing.sql",
    "route_requests": "pipeline/generate_route_requests.sql",
    "conversations": "pipeline/generate_conversations.sql",
}
DEFAULT_START = datetime(2026, 1, 1)


def run_generate(
    engine: Engine,
    output: Path,
    *,
    conversations: int,
    routes: int,
    seed: str = "1",
    start: datetime = DEFAULT_START,
    span_days: float = 7.0,
) -> dict[str, Any]:
    if conversations < 1 or routes < 10:
        raise PipelineError("generate needs at least 1 conversation and 10 routes")
    if span_days <= 0:
        raise PipelineError("--span-days must be positive")
    start_us = int((start - datetime(1970, 1, 1)).total_seconds()) * 1_000_000
    span_us = int(span_days * 86_400 * 1_000_000)
    engine.register_rows("generate_params", PARAMS,
                         [(str(seed), conversations, routes, start_us, span_us)])
    engine.register_numbers("generate_numbers", max(conversations, routes))
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    for table, template in TEMPLATES.items():
        relation = f"generated_{table}"
        engine.stage(relation, template, small=False, params="generate_params",
                     numbers="generate_numbers")
        engine.write(relation, output / f"{table}.parquet")
    return {"output": str(output), "conversations": conversations, "routes": routes,
            "seed": str(seed), "start": start.isoformat(), "span_days": span_days}
