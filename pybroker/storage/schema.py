"""The schema of an instance file: its migrations and its catalog's definitions.

Tables come from the numbered files of migrations/ (applied once each, recorded in
schema_migrations). Views and macros come from sql/catalog/ and are replaced by an open for
writing whose pybroker's differ from those the file holds (their digest, migration 016), so
a file always carries the definitions of the pybroker that last wrote it. That schema work
runs under the migration marker between two checkpoints (storage/recovery.py): a process
killed at any instant leaves a file that opens, with everything it committed.

:class:`Schema` does that work on one open connection; :class:`pybroker.storage.store.Store`
holds one and calls it while it opens the file.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import duckdb

from pybroker.errors import BrokerError, StorageError
from pybroker.storage import (
    migration_defaults,
    no_pandas,
)
from pybroker.storage import (
    recovery as storage_recovery,
)
from pybroker.storage import (
    templates as sql_templates,
)
from pybroker.storage.resources import migrations_dir, sql_dir
from pybroker.timestamps import utc_now

_MIGRATION_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")
_SUPERSEDES = re.compile(r"^--\s*supersedes:\s*(\d{3}(?:\s*,\s*\d{3})*)\s*$")

Migration = tuple[int, str, Path]  # version, name, file


class Schema:
    """The schema work of one open instance file: ``con`` its connection, ``target`` its
    path as given (":memory:" for none), ``transaction`` the store's write transaction."""

    def __init__(self, con: duckdb.DuckDBPyConnection, target: str, path: Path | None, *,
                 read_only: bool,
                 transaction: Callable[[], AbstractContextManager[None]]) -> None:
        self._con = con
        self._target = target
        self._path = path
        self._read_only = read_only
        self._transaction = transaction

    def version(self) -> int:
        """The highest migration the file has run."""
        row = self._con.execute(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
        return int(row[0]) if row else 0

    def check_instance(self) -> None:
        """Refuse a file that is not an instance of this pybroker's schema (before anything
        is written): a DuckDB database of someone else's, a newer schema, and for a
        read-only open also an older one or an empty file."""
        objects = self._con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT internal "
            "UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal"
        ).fetchall()
        names = {row[0] for row in objects}
        latest = len(available_migrations())
        if "schema_migrations" not in names:
            if names or self._read_only:
                what = "holds no tables" if not names else (
                    f"holds {len(names)} table(s) or view(s) of its own, and no "
                    "schema_migrations table")
                raise StorageError(
                    f"{self._target} is a DuckDB database but not a pybroker instance file "
                    f"(it {what}); pybroker never adds its tables to another database: "
                    "give a new file name to create an instance")
            return  # a new file: the migrations make it an instance
        current = self.version()
        if current > latest:
            raise StorageError(
                f"instance file {self._target} has schema version {current}, newer than this "
                f"pybroker's {latest}: open it with the pybroker that wrote it")
        if self._read_only and current < latest:
            raise StorageError(
                f"instance file {self._target} has schema version {current} and needs "
                f"migration to {latest}; a read-only open never migrates: open it once for "
                "writing first (pybroker.connect(path), or a command that changes it)")

    def prepare(self) -> None:
        """Run the migrations this file lacks and replace the catalog's definitions if they
        are not this pybroker's. In a file, under the migration marker and between two
        checkpoints (storage/recovery.py), so that a kill at any instant leaves a file that
        opens: the schema work is done whole or done again, and the log never holds it
        beside an application's commits."""
        current = self.version() if self._has_table("schema_migrations") else 0
        pending = [(version, name, path) for version, name, path in available_migrations()
                   if version > current and version not in superseded_migrations()]
        digest = catalog_digest()
        if self._path is None:
            self.migrate(pending)
            self._install_definitions(digest)
            return
        marker = storage_recovery.marker_path(self._path).exists()
        if not pending and not marker and self._installed_digest() == digest:
            return  # an open that changes nothing writes nothing
        self._con.execute("CHECKPOINT")  # the log is empty: what follows in it is ours
        with storage_recovery.migrating(self._path, current):
            self.migrate(pending)
            if self._installed_digest() != digest:
                self._install_definitions(digest)
            self._con.execute("CHECKPOINT")  # before the marker goes

    def migrate(self, pending: list[Migration]) -> None:
        """Each migration in a transaction of its own, with its row in schema_migrations.
        One that DuckDB refuses to commit for adding columns with defaults to a table that
        has rows is done again in the form it commits (storage/migration_defaults.py)."""
        for version, name, path in pending:
            text = path.read_text(encoding="utf-8")
            try:
                self._apply_migration(version, name, [text])
            except BrokerError as exc:
                split = migration_defaults.split_column_defaults(text)
                if split is None or not migration_defaults.is_refused_alter(exc.__cause__):
                    raise
                try:
                    self._apply_migration(version, name, split)
                except BrokerError as again:
                    raise StorageError(
                        f"cannot upgrade instance file {self._target} from schema version "
                        f"{self.version()}: DuckDB {duckdb.__version__} refused "
                        f"migration {path.name} on the rows the file holds ({again}). "
                        "Nothing was changed: the file opens as it was with the pybroker "
                        "that last wrote it") from again

    def _has_table(self, name: str) -> bool:
        row = no_pandas.call(
            self._con.execute, "SELECT COUNT(*) FROM duckdb_tables() WHERE table_name = $name "
            "AND schema_name = 'main'", {"name": name}).fetchone()
        return bool(row and row[0])

    def _apply_migration(self, version: int, name: str, statements: list[str]) -> None:
        with self._transaction():
            for statement in statements:
                self._con.execute(statement)
            no_pandas.call(self._con.execute, "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                           [version, name, utc_now()])

    def _installed_digest(self) -> str | None:
        if not self._has_table("catalog_definitions"):
            return None
        row = self._con.execute(sql_templates.render(
            "instance/select_catalog_digest.sql")).fetchone()
        return None if row is None else str(row[0])

    def _install_definitions(self, digest: str) -> None:
        with self._transaction():
            for statement in catalog_definitions():
                self._con.execute(statement)
            if self._has_table("catalog_definitions"):  # not before migration 016
                no_pandas.call(self._con.execute,
                               sql_templates.render("instance/upsert_catalog_digest.sql"),
                               {"digest": digest, "installed_at": utc_now()})


def catalog_definitions() -> list[str]:
    """The DDL that gives a file this pybroker's views and macros (sql/catalog/), in order."""
    return ["CREATE SCHEMA IF NOT EXISTS sys"] + [
        sql_templates.render(f"catalog/{path.name}")
        for path in sorted((sql_dir() / "catalog").glob("*.sql"))
        if not path.name.startswith("_")]  # jinja macros the others import


def catalog_digest() -> str:
    """SHA-256 of catalog_definitions(): whether a file holds this pybroker's definitions."""
    digest = hashlib.sha256()
    for statement in catalog_definitions():
        digest.update(statement.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def superseded_migrations() -> frozenset[int]:
    """The migrations a later one supersedes (its first line ``-- supersedes: NNN``;
    migrations/README.md): never run on a file that has not run them."""
    found = set()
    for _version, _name, path in available_migrations():
        with open(path, encoding="utf-8") as source:
            first = source.readline()
        match = _SUPERSEDES.match(first)
        if match:
            found.update(int(n) for n in match.group(1).split(","))
    return frozenset(found)


def available_migrations() -> list[Migration]:
    """Every migration of migrations/, in order; a misnamed file or a gap is refused."""
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
