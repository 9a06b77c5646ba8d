"""The instance file: one DuckDB database, its migrations, and one transaction per write.

Tables come from the numbered files of migrations/ (applied once each, recorded in
schema_migrations). Views and macros come from sql/catalog/ and are replaced on every open,
so a file always carries the definitions of the pybroker that last opened it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from pybroker import sql_templates
from pybroker.errors import StorageError
from pybroker.resources import migrations_dir, sql_dir

# DuckDB's Python client tries to import pandas at every execute with parameters; when
# pandas is not installed the failed import searches the disk each time (14 % of the wire's
# writer thread in a profile). A module known missing fails at once.
if importlib.util.find_spec("pandas") is None:
    sys.modules.setdefault("pandas", None)  # type: ignore[arg-type]

_MIGRATION_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


def utc_now() -> datetime:
    """The wall clock as a naive UTC datetime (the form every stored time has)."""
    return datetime.now(UTC).replace(tzinfo=None)


class Store:
    """One open instance file. Not shared between processes: DuckDB locks the file."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        target = ":memory:" if path is None else str(path)
        if self.path is not None and self.path.is_dir():
            raise StorageError(f"cannot open instance file {self.path}: it is a directory")
        try:
            self._con = duckdb.connect(target)
        except duckdb.Error as exc:
            raise StorageError(_explain_open_error(target, exc)) from exc
        # no progress bar on stdout (a long query would write one into `--json` output)
        self._con.execute("SET enable_progress_bar = false")
        self._lock = threading.RLock()
        self._depth = 0
        self._end_callbacks: list[Callable[[bool], None]] = []
        try:
            self._migrate()
            self._install_definitions()
        except duckdb.Error as exc:
            self._con.close()
            raise StorageError(f"cannot prepare instance file {target}: {exc}") from exc

    # -- queries -------------------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        with self._lock:
            self._con.execute(sql, params)

    def fetchall(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None
    ) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._con.execute(sql, params).fetchall()

    def fetchone(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None
    ) -> tuple[Any, ...] | None:
        with self._lock:
            return self._con.execute(sql, params).fetchone()

    def run(
        self, template: str, params: dict[str, Any] | None = None
    ) -> list[tuple[Any, ...]]:
        """Run a statement of sql/ (rendered without variables) with bound parameters."""
        sql = sql_templates.render(template)
        with self._lock:
            cursor = self._con.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def query(self, template: str, params: dict[str, Any] | None = None, **variables: Any):
        """Run a template of sql/ with bound parameters; returns (column names, rows)."""
        sql = sql_templates.render(template, **variables)
        with self._lock:
            cursor = self._con.execute(sql, params)
            columns = [d[0] for d in cursor.description]
            return columns, cursor.fetchall()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing: a statement that fails rolls back everything since BEGIN."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._con.execute("BEGIN TRANSACTION")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._depth = 0
                self._con.execute("ROLLBACK")
                for callback in self._end_callbacks:
                    callback(False)
                raise
            else:
                self._depth = 0
                self._con.execute("COMMIT")
                for callback in self._end_callbacks:
                    callback(True)

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (its changes are not yet committed)."""
        return self._depth > 0

    def on_transaction_end(self, callback: Callable[[bool], None]) -> None:
        """Call ``callback(committed)`` after every outermost COMMIT (True) or ROLLBACK."""
        self._end_callbacks.append(callback)

    def close(self) -> None:
        with self._lock:
            self._con.close()

    @property
    def connection(self) -> duckdb.DuckDBPyConnection:
        """The raw connection, for read-only analysis (writes bypass the routing cache)."""
        return self._con

    # -- schema --------------------------------------------------------------------------

    def schema_version(self) -> int:
        row = self.fetchone("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        has_table = self._con.execute(
            "SELECT COUNT(*) FROM duckdb_tables() "
            "WHERE table_name = 'schema_migrations' AND schema_name = 'main'"
        ).fetchone()
        current = 0
        if has_table and has_table[0]:
            current = int(
                self._con.execute(
                    "SELECT COALESCE(MAX(version), 0) FROM schema_migrations"
                ).fetchone()[0]
            )
        for version, name, path in available_migrations():
            if version <= current:
                continue
            with self.transaction():
                self._con.execute(path.read_text(encoding="utf-8"))
                self._con.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, name, utc_now()]
                )

    def _install_definitions(self) -> None:
        with self.transaction():
            self._con.execute("CREATE SCHEMA IF NOT EXISTS sys")
            for path in sorted((sql_dir() / "catalog").glob("*.sql")):
                self._con.execute(sql_templates.render(f"catalog/{path.name}"))


def available_migrations() -> list[tuple[int, str, Path]]:
    found = []
    for path in sorted(migrations_dir().glob("*.sql")):
        match = _MIGRATION_NAME.match(path.name)
        if not match:
            raise StorageError(f"migration file {path.name} is not named NNN_name.sql")
        found.append((int(match.group(1)), match.group(2), path))
    versions = [v for v, _, _ in found]
    if versions != list(range(1, len(versions) + 1)):
        raise StorageError(f"migrations must be numbered 001, 002, ... without gaps: {versions}")
    return found


def _explain_open_error(target: str, exc: duckdb.Error) -> str:
    text = str(exc)
    if "lock" in text.lower():
        return (
            f"cannot open instance file {target}: it is already open in another process "
            f"(DuckDB allows one writer per file); close that process first"
        )
    if "not a valid duckdb" in text.lower() or "database file" in text.lower():
        return f"cannot open instance file {target}: it is not a DuckDB database file"
    return f"cannot open instance file {target}: {text}"
