"""``Instance.snapshot()``: a point-in-time copy of a live instance, for DuckDB's own tools.

DuckDB lets one process at a time hold a file for writing, so while an instance runs,
``duckdb -readonly stock.duckdb`` is refused with a lock error. A snapshot is a new DuckDB
file written by the process that holds the instance: every table, view (``sys.*``), macro
(``route_decision``, ``queue_contents``, ...) and sequence, as committed at one moment.
One transaction reads them all, so the copy is consistent (DuckDB's MVCC: what commits
meanwhile is not in it, and a transaction in progress is not half in it). It never changes
afterwards: it is as fresh as the moment it was taken, and a later look needs a new one.
The copy is itself an instance file (``pybroker.connect(path, read_only=True)`` opens it).

The file appears complete or not at all: it is written beside the target under a hidden
name, checkpointed, then moved into place.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

import duckdb

from pybroker import arguments
from pybroker.errors import AlreadyExistsError, InvalidArgumentError, StorageError
from pybroker.storage.duckdb_errors import translate_error
from pybroker.storage.store import Store
from pybroker.storage.templates import render


def write_snapshot(store: Store, path: str | Path, *, overwrite: bool = False) -> Path:
    """Copy what ``store`` holds, as committed now, to the new DuckDB file ``path``.

    An existing ``path`` is refused unless ``overwrite``; the instance's own file always is.
    Returns the path written."""
    out = _target(path)
    source = None if store.path is None else store.path.resolve()
    if source is not None and out == source:
        raise InvalidArgumentError(
            f"the snapshot path {out} is the instance file itself; give a new file name")
    wal = out.with_name(out.name + ".wal")
    if not overwrite:
        for existing in (out, wal):
            if existing.exists():
                raise AlreadyExistsError(
                    f"{existing} already exists; a snapshot writes a new file (pass "
                    "overwrite=True, or --force on the command line, to replace it)")
    if not out.parent.is_dir():
        raise StorageError(f"cannot write the snapshot {out}: the directory {out.parent} "
                           "does not exist")
    token = uuid.uuid4().hex[:16]
    partial = out.with_name(f".{out.name}.{token}.partial")
    try:
        _copy(store, partial, f"pybroker_snapshot_{token}")
        _move_into_place(partial, out, wal, overwrite=overwrite)
    finally:
        for leftover in (partial, partial.with_name(partial.name + ".wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return out


def _target(path: object) -> Path:
    if isinstance(path, str):
        arguments.text("path", path)
        path = Path(path)
    if not isinstance(path, Path):
        raise InvalidArgumentError(
            f"path must be a file path, not {type(path).__name__}")
    arguments.text("path", str(path))
    out = path.expanduser().resolve()
    if out.is_dir():
        raise InvalidArgumentError(f"the snapshot path {out} is a directory; give a file name")
    return out


def _copy(store: Store, partial: Path, alias: str) -> None:
    """ATTACH the new file, COPY FROM DATABASE in one transaction, CHECKPOINT, DETACH.

    ATTACH and COPY FROM DATABASE take no bound parameters (DuckDB's parser wants literals
    there), so their templates make the file's path a SQL string literal and the catalog
    names quoted identifiers (sql_templates' ``literal`` and ``identifier`` filters). The
    path is absolute, so no DuckDB prefix (``md:``, ``s3://``) applies."""
    cursor = store.connection.cursor()  # its own transaction: never the engine's
    target = str(store.path or ":memory:")
    try:
        row = cursor.execute("SELECT current_database()").fetchone()
        assert row is not None
        cursor.execute(render("instance/attach_snapshot.sql", path=str(partial), alias=alias))
        try:
            cursor.execute("BEGIN TRANSACTION")
            try:
                cursor.execute(render("instance/copy_database.sql", source=str(row[0]),
                                      target=alias))
                cursor.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(duckdb.Error):
                    cursor.execute("ROLLBACK")
                raise
            cursor.execute(render("instance/checkpoint_database.sql", alias=alias))
        finally:
            with contextlib.suppress(duckdb.Error):
                cursor.execute(render("instance/detach_database.sql", alias=alias))
    except duckdb.Error as exc:
        if isinstance(exc, duckdb.IOException):
            raise StorageError(
                f"cannot write the snapshot beside {partial.parent}: the disk or the file "
                "system refused (check the directory's permissions and free space)") from exc
        raise translate_error(exc, target, read_only=store.read_only) from exc
    finally:
        cursor.close()


def _move_into_place(partial: Path, out: Path, wal: Path, *, overwrite: bool) -> None:
    if overwrite:
        # a log left beside an old file would be replayed into the new one on open
        with contextlib.suppress(FileNotFoundError):
            wal.unlink()
        os.replace(partial, out)
        return
    try:
        os.link(partial, out)  # fails if out appeared meanwhile: never replace it
    except FileExistsError:
        raise AlreadyExistsError(
            f"{out} already exists (it appeared while the snapshot was written); pass "
            "overwrite=True, or --force on the command line, to replace it") from None
    except OSError:  # a file system without hard links
        if out.exists():
            raise AlreadyExistsError(f"{out} already exists") from None
        os.replace(partial, out)

