"""The ordinary SQL of T-SQL batches, a service composed on the kernel: it runs what
pybroker.core.tsql.ordinary_sql translated for DuckDB, in the database's own schema of the
instance file, and answers what the translation asks of a database (its queues, the sys
views of one database, OBJECT_ID). The T-SQL runner (a core) calls it through the
database's ``ordinary_sql()``, never DuckDB itself.

A statement outside BEGIN TRANSACTION commits on its own; inside, it joins the batch's
transaction (Database.transaction), so ROLLBACK undoes a user table's rows with the
messages received beside them. A SELECT that writes nothing runs without a write
transaction, so a file open read-only answers it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.core.routing.cache import NOTHING
from pybroker.core.tsql.ordinary_sql_statement import (
    DEFAULT_SCHEMA,
    Rendered,
    SqlNames,
    schema_of,
)
from pybroker.errors import InvalidArgumentError
from pybroker.kernel.live_views import names_broker_events, names_live_view

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.kernel import DatabaseRef, Kernel


class UserSql:
    """The ordinary SQL of the instance's databases."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._database_views: frozenset[str] | None = None  # fixed by the file's catalog
        self._catalog: str | None = None

    def of(self, database: DatabaseRef) -> DatabaseSql:
        return DatabaseSql(self, database)

    def catalog(self) -> str:
        """DuckDB's name of the instance file's catalog, which user tables are named in."""
        if self._catalog is None:
            self._catalog = str(self.kernel.store.run("user_sql/select_catalog.sql")[0][0])
        return self._catalog

    def database_views(self) -> frozenset[str]:
        """The sys views with a row per database (read once: the catalog's definitions
        are this pybroker's for as long as the file is open)."""
        if self._database_views is None:
            rows = self.kernel.store.run("user_sql/select_database_views.sql")
            self._database_views = frozenset(str(name).lower() for (name,) in rows)
        return self._database_views


class DatabaseSql:
    """The ordinary SQL of one database (pybroker.core.tsql.batch_interface.SqlDatabase)."""

    def __init__(self, service: UserSql, database: DatabaseRef) -> None:
        self.service = service
        self.database = database

    def names(self) -> SqlNames:
        store = self.service.kernel.store
        queues = store.run("user_sql/select_queue_names.sql",
                           {"database_id": self.database.database_id})
        return SqlNames(frozenset(str(name) for (name,) in queues),
                        self.service.database_views(), self.service.catalog())

    def run(self, rendered: Rendered, parameters: dict[str, Any]
            ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one translated statement (and what it needs first); its columns and rows
        (INSERT, UPDATE and DELETE: one row holding how many rows they changed). DuckDB's
        refusal names the database's schema as the batch does: by the database's name."""
        try:
            return self._run(rendered, parameters)
        except InvalidArgumentError as exc:
            schema = schema_of(self.database.name)
            text = str(exc).replace(
                f' because schema "{schema}" does not exist.',
                f" in database {self.database.name} (CREATE TABLE makes it).").replace(
                f'"{schema}.', '"')
            if text == str(exc):
                raise
            raise InvalidArgumentError(text) from exc

    def _run(self, rendered: Rendered, parameters: dict[str, Any]
             ) -> tuple[list[str], list[tuple[Any, ...]]]:
        kernel = self.service.kernel
        kernel.check_open()
        store = kernel.store
        reads = not rendered.writes and not store.in_transaction
        if names_live_view(rendered.sql) and not store.in_transaction:
            kernel.live.refresh()  # what the process holds, as of now
        if names_broker_events(rendered.sql):
            kernel.write_events()
        if reads:
            return store.user_statement(rendered.sql, parameters)
        with kernel.write(NOTHING):  # user tables change no routing answer
            for statement in rendered.before:
                store.user_statement(statement, {})
            return store.user_statement(rendered.sql, parameters)

    def object_id(self, name: str, kind: str | None = None) -> int | None:
        """OBJECT_ID(name [, type]): [database.][schema.]name of a user table (U), stored
        procedure (P) or queue (SQ); NULL when there is none (or the name is another
        database's that does not exist)."""
        parts = _name_parts(name)
        if parts is None or not 1 <= len(parts) <= 3:
            return None
        *qualifiers, object_name = parts
        schema = (qualifiers[-1] if qualifiers else "") or DEFAULT_SCHEMA
        database = self.database
        kernel = self.service.kernel
        if len(qualifiers) == 2 and qualifiers[0].lower() != database.name.lower():
            rows = kernel.store.run("instance/select_database.sql", {"name": qualifiers[0]})
            if not rows:
                return None
            database_id, database_name = rows[0][0], qualifiers[0]
        else:
            database_id, database_name = database.database_id, database.name
        rows = kernel.store.run("user_sql/select_object_id.sql", {
            "database_id": database_id, "schema_name": schema_of(database_name),
            "name": object_name,
            "schema_key": schema.lower(), "type": kind})
        return int(rows[0][0]) if rows else None


def _name_parts(name: str) -> list[str] | None:
    """The parts of a dotted name, each plain or [bracketed] (]] is one ])."""
    parts: list[str] = []
    i = 0
    while True:
        if name[i : i + 1] == "[":
            end = i + 1
            part = ""
            while True:
                close = name.find("]", end)
                if close < 0:
                    return None
                part += name[end:close]
                if name[close + 1 : close + 2] != "]":
                    break
                part += "]"
                end = close + 2
            parts.append(part)
            i = close + 1
        else:
            dot = name.find(".", i)
            parts.append((name[i:] if dot < 0 else name[i:dot]).strip())
            i = len(name) if dot < 0 else dot
        if i >= len(name):
            return parts
        if name[i] != ".":
            return None
        i += 1
