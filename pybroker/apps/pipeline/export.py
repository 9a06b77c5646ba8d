"""``pybroker export FILE DIR``: an instance file's tables as Parquet, in the schema of
:mod:`pybroker.apps.pipeline.schema`."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from pybroker.apps.pipeline.schema import EXPORT_INFO, EXPORTED_TABLES
from pybroker.errors import PipelineError
from pybroker.storage import templates as sql_templates


def open_instance_read_only(path: Path) -> duckdb.DuckDBPyConnection:
    """The instance file, read-only (it may be open elsewhere for reading too)."""
    if not path.exists():
        raise PipelineError(f"no instance file at {path}")
    if path.is_dir():
        raise PipelineError(f"{path} is a directory, not an instance file")
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        from pybroker.storage.duckdb_errors import explain_open_error

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
    from pybroker.api.served.client import connect_served

    client = connect_served(Path(file), read_only=True) if Path(file).is_file() else None
    if client is None:
        return _export(Path(file), file, directory)
    with client, tempfile.TemporaryDirectory(prefix="pybroker-export-") as tmp:
        copy = Path(tmp) / "snapshot.duckdb"
        client.snapshot(copy)
        return _export(copy, file, directory)


# The files an export writes: what a directory may hold to be replaced by a new export.
_EXPORT_FILES = frozenset(f"{t.name}.parquet" for t in (*EXPORTED_TABLES, EXPORT_INFO))


def _export(path: Path, file: Path, directory: Path) -> list[str]:
    """Write the export into a new directory beside ``directory`` and rename it into place
    at the end: a failure part way leaves neither the target nor the temporary one."""
    directory = Path(directory)
    previous = _previous_export(directory)
    created = _make_parents(directory.parent)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.export-",
                                    dir=directory.parent))
    try:
        notes = _write_tables(path, file, staging)
        _move_into_place(staging, directory, previous)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for parent in reversed(created):
            with contextlib.suppress(OSError):
                parent.rmdir()
        raise
    return notes


def _previous_export(directory: Path) -> bool:
    """Whether ``directory`` holds files of an earlier export (which the new one replaces
    whole); checked before anything is written. A directory holding anything else is
    refused: its files are not the export's to remove."""
    if not directory.exists():
        return False
    if not directory.is_dir():
        raise PipelineError(f"{directory} exists and is not a directory: give a directory "
                            "for the export")
    entries = list(directory.iterdir())
    for entry in entries:
        if entry.name not in _EXPORT_FILES or not entry.is_file():
            raise PipelineError(
                f"{directory} holds {entry.name}, which is no file of an export; give a new "
                "or empty directory, or one an earlier export wrote (it is replaced)")
    return bool(entries)


def _make_parents(parent: Path) -> list[Path]:
    """Create the missing directories above the export's; returns them, outermost first,
    to be removed again if the export fails."""
    missing = []
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for each in reversed(missing):
        each.mkdir()
    return list(reversed(missing))


def _move_into_place(staging: Path, directory: Path, previous: bool) -> None:
    if not previous:
        # onto nothing, or onto an empty directory (rename replaces an empty one)
        os.replace(staging, directory)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.replaced-", dir=directory.parent))
    os.replace(directory, old)
    try:
        os.replace(staging, directory)
    except BaseException:
        os.replace(old, directory)  # the earlier export stays as it was
        raise
    shutil.rmtree(old, ignore_errors=True)


def _write_tables(path: Path, file: Path, directory: Path) -> list[str]:
    con = open_instance_read_only(path)
    notes: list[str] = []
    try:
        present_tables = {
            row[0] for row in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'"
            ).fetchall()
        }
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
        _write_export_info(con, directory, int(version[0]) if version else 0)
    except duckdb.Error as exc:
        from pybroker.storage.duckdb_errors import damage_reason, damaged_message

        damage = damage_reason(exc)
        if damage is not None:
            raise PipelineError(damaged_message(str(file), damage)) from exc
        raise PipelineError(f"cannot export {file}: {exc}") from exc
    finally:
        con.close()
    return notes


def _write_export_info(con: duckdb.DuckDBPyConnection, directory: Path,
                       schema_version: int) -> None:
    # DuckDB's own Parquet writer: export needs no pyarrow (only the spark extra brings it)
    now = datetime.now(UTC).replace(tzinfo=None)
    con.execute(sql_templates.render("pipeline/export_info.sql"), {
        "exported_at": now, "schema_version": schema_version,
        "path": str(directory / f"{EXPORT_INFO.name}.parquet")})
