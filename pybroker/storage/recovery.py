"""An instance file whose write-ahead log DuckDB will not replay, and the marker that makes
the schema changes of an open recoverable whatever DuckDB replays.

DuckDB 1.5.6 writes some DDL to its write-ahead log in a form it cannot replay when it
opens the file as its default database (``ALTER TABLE ... ADD COLUMN ... DEFAULT
nextval(...)`` among them: "Calling DatabaseManager::GetDefaultDatabase with no default
database set"). A process killed after such a commit and before the next checkpoint left a
file that never opened again, with everything committed after its last checkpoint.

Two defences, in order:

1. ``replay_apart``: the same log replays when the file is attached to an in-memory
   database (a default database is then set); its checkpoint then writes everything the
   log holds into the file. Nothing committed is lost.
2. The migration marker (``migrating``): an open for writing checkpoints the file (the log
   is then empty), writes ``<file>.migrating``, runs the migrations and replaces the
   catalog's definitions, checkpoints again and removes the marker, all before the
   instance is handed to anyone. While the marker is there the log can hold nothing but
   that schema work, so a log that replays in neither way is set aside and the work done
   again from the checkpointed file. Without the marker the log holds an application's
   commits and is never dropped: the open fails and says what happened and what is kept.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import duckdb

from pybroker.errors import StorageError
from pybroker.storage import templates as sql_templates

MARKER_SUFFIX = ".migrating"
# what a log that held only a killed open's schema work is renamed to while that work is
# done again; removed once it is
ASIDE_SUFFIX = ".wal.migration"
_ALIAS = "replaying"


def is_replay_failure(exc: BaseException) -> bool:
    """Whether DuckDB refused to open a file because its write-ahead log does not replay."""
    return isinstance(exc, duckdb.Error) and "replaying wal" in str(exc).lower()


def log_path(target: Path) -> Path:
    return Path(f"{target}.wal")


def marker_path(target: Path) -> Path:
    return Path(f"{target}{MARKER_SUFFIX}")


def replay_apart(target: Path) -> None:
    """Replay ``target``'s log with the file attached to an in-memory database, then
    checkpoint it into the file. Raises duckdb.Error if the log does not replay so either
    (the file is then as it was)."""
    con = duckdb.connect(":memory:")
    try:
        con.execute(sql_templates.render("instance/attach_for_replay.sql",
                                         path=str(target), alias=_ALIAS))
        con.execute(sql_templates.render("instance/checkpoint_database.sql", alias=_ALIAS))
        con.execute(sql_templates.render("instance/detach_database.sql", alias=_ALIAS))
    finally:
        con.close()


def connect_for_writing(target: Path) -> duckdb.DuckDBPyConnection:
    """Open ``target`` for writing, replaying its log in whichever way replays it.

    When the log held only a killed open's schema work (the marker is there) and replays in
    no way, it is set aside: the caller, seeing the marker, does that work again and then
    clears the marker, which removes the log set aside. Raises StorageError when the log
    holds an application's commits and does not replay; any other DuckDB error as it is."""
    try:
        return duckdb.connect(str(target))
    except duckdb.Error as exc:
        if not is_replay_failure(exc):
            raise
    try:
        replay_apart(target)
        return duckdb.connect(str(target))
    except duckdb.Error as exc:
        if not is_replay_failure(exc):
            raise
    if not marker_path(target).exists():
        raise StorageError(unreplayable_message(target))
    os.replace(log_path(target), Path(f"{target}{ASIDE_SUFFIX}"))
    _sync_directory(target.parent)
    return duckdb.connect(str(target))


def unreplayable_message(target: Path) -> str:
    log = log_path(target)
    size = log.stat().st_size if log.exists() else 0
    return (
        f"cannot open instance file {target}: its write-ahead log {log} ({size:,} bytes, "
        "what was committed after the file's last checkpoint) holds a change that DuckDB "
        f"{duckdb.__version__} cannot replay, opened directly or attached. The file's bytes "
        "are intact and nothing was changed: keep both files (a copy of each is safest). "
        f"With {log.name} moved aside the file opens as of its last checkpoint, without "
        "what the log holds")


@contextlib.contextmanager
def migrating(target: Path, version: int) -> Iterator[None]:
    """The marker that the log holds only this open's schema work, for as long as the block
    runs; the caller checkpointed before (the log is empty) and checkpoints at the end of
    the block. The marker and its removal are durable before the block begins and before
    the instance is used."""
    marker = marker_path(target)
    partial = Path(f"{marker}.partial")
    with open(partial, "w", encoding="utf-8") as out:
        json.dump({"schema_version": version, "pid": os.getpid()}, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, marker)
    _sync_directory(target.parent)
    yield
    clear_marker(target)


def clear_marker(target: Path) -> None:
    """Remove the marker, once the schema work is checkpointed: this open's, or a killed
    open's whose log replayed (with what that open wrote or set aside on its way)."""
    leftovers = [marker_path(target), Path(f"{marker_path(target)}.partial"),
                 Path(f"{target}{ASIDE_SUFFIX}")]
    found = [path for path in leftovers if path.exists()]
    for path in found:
        path.unlink()
    if found:
        _sync_directory(target.parent)


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
