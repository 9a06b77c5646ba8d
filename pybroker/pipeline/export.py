"""``pybroker export FILE DIR``: an instance file's tables as Parquet, in the schema of
:mod:`pybroker.pipeline.schema`."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from pybroker import sql_templates
from pybroker.errors import PipelineError
from pybroker.pipeline.schema import EXPORT_INFO, EXPORTED_TABLES


def open_instance_read_only(path: Path) -> duckdb.DuckDBPyConnection:
    """The instance file, read-only (it may be open elsewhere for reading too)."""
    if not path.exists():
        raise PipelineError(f"no instance file at {path}")
    if path.is_dir():
        raise PipelineError(f"{path} is a directory, not an instance file")
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        from pybroker.storage_errors import explain_open_error

        raise PipelineError(explain_open_error(str(path), exc)) from exc
    con.execute("SET TimeZone = 'UTC'")  # TIMESTAMPTZ -> naive UTC TIMESTAMP
    con.execute("SET enable_progress_bar_print = false")  # never on stdout
    return con


def export_instance(file: Path, directory: Path) -> list[str]:
    """Write every exported table the file holds as ``directory/<table>.parquet``.

    Returns notes for the reader: optional tables that are absent, columns exported as NULL.
    A required (routing) table that is missing means the file is no pybroker instance.
    A file that a server holds (``pybroker serve``) is exported from a snapshot the server
    takes, so what is exported is one consistent point in time of the live instance.
    """
    from pybroker.server.client import connect_served

    client = connect_served(Path(file), read_only=True) if Path(file).is_file() else None
    if client is None:
        return _export(Path(file), file, directory)
    with client, tempfile.TemporaryDirectory(prefix="pybroker-export-") as tmp:
        copy = Path(tmp) / "snapshot.duckdb"
        client.snapshot(copy)
        return _export(copy, file, directory)


def _export(path: Path, file: Path, directory: Path) -> list[str]:
    con = open_instance_read_only(path)
    notes: list[str] = []
    try:
        present_tables = {
            row[0] for row in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'"
            ).fetchall()
        }
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for table in EXPORTED_TABLES:
            if table.name not in present_tables:
                if table.required:
                    raise PipelineError(
                        f"{file} has no table {table.name}: it is not a pybroker instance file"
                    )
                notes.append(f"{table.name}: not in this file, not exported ({table.note})")
                continue
            present = frozenset(con.table(table.name).columns)
            for column in table.columns:
                if column.name not in present:
                    notes.append(f"{table.name}.{column.name}: not in this file, exported as NULL")
            # a body kept as pieces (migrations/011) is exported whole, as the view shows it
            source = (sql_templates.render("pipeline/export_transmission_queue.sql")
                      if table.name == "transmission_queue" and "body_pieces" in present
                      else None)
            sql = sql_templates.render(
                "pipeline/export_table.sql", table=table.name, columns=table.columns,
                present=present, source=source,
            )
            target = directory / f"{table.name}.parquet"
            con.sql(sql).write_parquet(str(target))
        version = con.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
        _write_export_info(directory, int(version[0]) if version else 0)
    except duckdb.Error as exc:
        from pybroker.storage_errors import damage_reason, damaged_message

        damage = damage_reason(exc)
        if damage is not None:
            raise PipelineError(damaged_message(str(file), damage)) from exc
        raise PipelineError(f"cannot export {file}: {exc}") from exc
    finally:
        con.close()
    return notes


def _write_export_info(directory: Path, schema_version: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    now = datetime.now(UTC).replace(tzinfo=None)
    names = [c.name for c in EXPORT_INFO.columns]
    table = pa.table(
        [pa.array([now], pa.timestamp("us")), pa.array([schema_version], pa.int32())],
        names=names,
    )
    pq.write_table(table, directory / f"{EXPORT_INFO.name}.parquet")
