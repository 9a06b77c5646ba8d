"""``pipeline impact``: the same conversations against two routing states.

The after state is a second instance file or export directory, or the before instance file
with a T-SQL script of CREATE/ALTER/DROP ROUTE applied to a temporary copy (through
``Database.execute()``, all or nothing, R10). LIFETIME in the script counts from the
moment the script is applied, as it would when run live.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from pybroker.apps.pipeline.engine import Engine
from pybroker.apps.pipeline.resolve import (
    load_conversations,
    load_routing_state,
    resolve,
    routing_state_dir,
)
from pybroker.errors import BrokerError, PipelineError

SUMMARY_COLUMNS = ("service_name", "before_outcome", "before_route", "after_outcome",
                   "after_route", "change", "conversations")


@contextmanager
def scripted_copy(instance_file: Path, script: str, database: str) -> Iterator[Path]:
    """A temporary copy of ``instance_file`` with ``script`` run in ``database``."""
    import pybroker

    instance_file = Path(instance_file)
    if not instance_file.is_file():
        raise PipelineError(
            f"--script needs the before state as an instance file; {instance_file} is not one"
        )
    with tempfile.TemporaryDirectory(prefix="pybroker-impact-") as tmp:
        copy = Path(tmp) / "after.duckdb"
        shutil.copyfile(instance_file, copy)
        wal = instance_file.with_name(instance_file.name + ".wal")
        if wal.exists():
            shutil.copyfile(wal, copy.with_name(copy.name + ".wal"))
        try:
            with pybroker.connect(copy) as inst:
                inst.database(database).execute(script)
        except PipelineError:
            raise
        except BrokerError as exc:
            raise PipelineError(f"the route script does not apply to {database}: {exc}") \
                from exc
        yield copy


def run_impact(
    engine: Engine,
    conversations: Path,
    before: Path,
    output: Path,
    *,
    after: Path | None = None,
    script: str | None = None,
    database: str | None = None,
) -> list[dict[str, Any]]:
    """Write ``output/changes`` (one row per changed conversation) and ``output/summary``;
    returns the summary rows, most conversations first."""
    if (after is None) == (script is None):
        raise PipelineError("impact needs either an after state or a route script, not both")
    with ExitStack() as stack:
        if script is not None:
            if not database:
                raise PipelineError("a route script needs --database: the database it runs in")
            after = stack.enter_context(scripted_copy(Path(before), script, database))
        before_dir = stack.enter_context(routing_state_dir(Path(before)))
        after_dir = stack.enter_context(routing_state_dir(Path(after)))
        relation = load_conversations(engine, conversations)
        before_catalog = load_routing_state(engine, before_dir, "before")
        after_catalog = load_routing_state(engine, after_dir, "after")
        before_decisions = resolve(engine, relation, before_catalog, "before")
        after_decisions = resolve(engine, relation, after_catalog, "after")
        engine.stage("impact_changes", "pipeline/impact_changes.sql", small=True,
                     conversations=relation, before=before_decisions, after=after_decisions)
        engine.stage("impact_summary", "pipeline/impact_summary.sql", small=True,
                     changes="impact_changes")
        output = Path(output)
        engine.write("impact_changes", output / "changes")
        engine.write("impact_summary", output / "summary")
        columns, rows = engine.fetch("impact_summary")
    summary = [dict(zip(columns, row, strict=True)) for row in rows]
    summary.sort(key=lambda r: (-r["conversations"], *(str(r[c]) for c in SUMMARY_COLUMNS)))
    return summary
