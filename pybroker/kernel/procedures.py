"""Stored procedures, a service composed on the kernel: what CREATE/ALTER/DROP PROCEDURE of
a T-SQL batch keep in the instance file (migration 020, sys.procedures and
sys.sql_modules) and what EXEC and activation (C8) read back. The text is parsed and run by
pybroker.core.tsql; this service only keeps it. Names compare without regard to case, as
under SQL Server's default collation."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from pybroker.core.routing.cache import NOTHING
from pybroker.core.routing.definition import check_name
from pybroker.core.tsql.procedure_parser import DEFAULT_SCHEMA
from pybroker.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError

if TYPE_CHECKING:  # pragma: no cover
    from datetime import datetime

    from pybroker.kernel.kernel import DatabaseRef, Kernel

_MODES = ("CREATE", "ALTER", "CREATE OR ALTER")


class Procedure(NamedTuple):
    """A stored procedure of a database (a row of sys.procedures with its text)."""

    schema: str
    name: str
    definition: str
    create_date: datetime
    modify_date: datetime


def _key(schema: str, name: str) -> str:
    return f"{schema}.{name}".lower()


class Procedures:
    """The stored procedures of the instance's databases."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._store = kernel.store

    def save(self, database: DatabaseRef, schema: str, name: str, definition: str,
             mode: str) -> None:
        """CREATE (refused if it exists), ALTER (refused if it does not) or CREATE OR
        ALTER the procedure ``schema.name`` with its text."""
        check_name("procedure schema", schema)
        check_name("procedure", name)
        if mode not in _MODES:
            raise InvalidArgumentError(f"mode must be one of {', '.join(_MODES)}, not {mode!r}")
        if not isinstance(definition, str) or not definition.strip():
            raise InvalidArgumentError("a procedure's definition is its CREATE PROCEDURE text")
        values = {"database_id": database.database_id, "name_key": _key(schema, name),
                  "definition": definition, "now": self.kernel.now()}
        with self.kernel.write(NOTHING):
            rows = self._store.run("procedures/select_procedure.sql", {
                "database_id": database.database_id, "name_key": values["name_key"]})
            exists = bool(rows)
            if exists and mode == "CREATE":
                raise AlreadyExistsError(
                    f"there is already an object named {rows[0][0]}.{rows[0][1]} in database "
                    f"{database.name!r}: ALTER PROCEDURE (or CREATE OR ALTER) changes it")
            if not exists and mode == "ALTER":
                raise NotFoundError(
                    f"procedure {schema}.{name} does not exist in database {database.name!r}: "
                    "CREATE PROCEDURE makes it")
            if exists:
                self._store.run("procedures/update_procedure.sql", values)
            else:
                self._store.run("procedures/insert_procedure.sql", {
                    **values, "schema_name": schema, "name": name})

    def drop(self, database: DatabaseRef, schema: str, name: str, *,
             if_exists: bool = False) -> None:
        """DROP PROCEDURE [IF EXISTS]."""
        key = {"database_id": database.database_id, "name_key": _key(schema, name)}
        with self.kernel.write(NOTHING):
            if not self._store.run("procedures/select_procedure.sql", key):
                if if_exists:
                    return
                raise NotFoundError(
                    f"cannot drop the procedure {schema}.{name}: it does not exist in "
                    f"database {database.name!r}")
            self._store.run("procedures/delete_procedure.sql", key)

    def definition(self, database: DatabaseRef, schema: str | None, name: str
                   ) -> tuple[str, str, str] | None:
        """(schema, name, text) of the procedure, None when there is none; without a
        schema, the procedure of schema dbo (the default schema of every caller here)."""
        rows = self._store.run("procedures/select_procedure.sql", {
            "database_id": database.database_id,
            "name_key": _key(schema or DEFAULT_SCHEMA, name)})
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    def list(self, database: DatabaseRef) -> list[Procedure]:
        return [Procedure(*row) for row in self._store.run(
            "procedures/select_procedures.sql", {"database_id": database.database_id})]
