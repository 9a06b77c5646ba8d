"""``pipeline traffic``: analytics over what instances record (exported tables, schema of
:mod:`pybroker.apps.pipeline.schema`): message volume per service and route over time, DELAYED
conversations and how long they waited, messages stuck with their transmission_status
texts, conversation endpoints per state.

The route of each conversation is the decision of the exported routing state at its
oldest queued message's enqueue_time (resolve on the transmission queue's conversations).
"""

from __future__ import annotations

from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

from pybroker.apps.pipeline.engine import Engine
from pybroker.apps.pipeline.resolve import load_routing_state, resolve, routing_state_dir
from pybroker.apps.pipeline.schema import EXPORT_INFO, TABLES_BY_NAME, Column, Table
from pybroker.errors import PipelineError

AS_OF = Table("traffic_as_of", (Column("as_of", "TIMESTAMP"),))
REPORTS = ("volume", "delayed", "stuck")


def _exported_at(engine: Engine, directory: Path) -> datetime | None:
    path = directory / f"{EXPORT_INFO.name}.parquet"
    if not path.exists():
        return None
    # read by the job's engine (Parquet of export_info is checked like every input)
    engine.read_parquet("traffic_export_info", path, EXPORT_INFO)
    columns, rows = engine.fetch("traffic_export_info")
    values = [row[columns.index("exported_at")] for row in rows]
    return values[0] if values else None


def run_traffic(
    engine: Engine, source: Path, output: Path, *, as_of: datetime | None = None
) -> dict[str, Any]:
    """Write ``output/<report>`` for volume, delayed, stuck (and endpoints when the export
    has conversation endpoints); returns row counts and notes."""
    notes: list[str] = []
    with ExitStack() as stack:
        directory = stack.enter_context(routing_state_dir(Path(source)))
        queue_path = directory / "transmission_queue.parquet"
        if not queue_path.exists():
            raise PipelineError(
                f"{source} has no transmission queue (transmission_queue.parquet): traffic "
                "needs an instance with the conversation tables, exported by `pybroker export`"
            )
        catalog = load_routing_state(engine, directory, "traffic_state")
        engine.read_parquet("traffic_transmission_queue", queue_path,
                            TABLES_BY_NAME["transmission_queue"])
        when = as_of or _exported_at(engine, directory)
        if when is None:
            notes.append("no export time recorded: waits are measured to the latest "
                         "enqueue_time")
        engine.register_rows("traffic_as_of", AS_OF, [(when,)])
        tables = {"transmission_queue": "traffic_transmission_queue",
                  "databases": catalog["databases"], "as_of": "traffic_as_of"}
        engine.stage("traffic_conversations", "pipeline/traffic_conversations.sql",
                     small=True, **tables)
        tables["decisions"] = resolve(engine, "traffic_conversations", catalog, "traffic",
                                      small=True)
        reports = list(REPORTS)
        endpoints_path = directory / "conversation_endpoints.parquet"
        if endpoints_path.exists():
            engine.read_parquet("traffic_conversation_endpoints", endpoints_path,
                                TABLES_BY_NAME["conversation_endpoints"])
            tables["conversation_endpoints"] = "traffic_conversation_endpoints"
            reports.append("endpoints")
        else:
            notes.append("no conversation_endpoints.parquet: endpoint report skipped")
        counts = {}
        output = Path(output)
        for report in reports:
            relation = f"traffic_{report}"
            engine.stage(relation, f"pipeline/traffic_{report}.sql", small=True, **tables)
            engine.write(relation, output / report)
            counts[report] = len(engine.fetch(relation)[1])
    return {"output": str(output), "rows": counts, "as_of": when, "notes": notes}
