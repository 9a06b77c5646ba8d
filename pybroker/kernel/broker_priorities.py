"""Broker priorities, a service composed on the kernel: what CREATE/ALTER/DROP BROKER
PRIORITY of a T-SQL batch keep per database (migration 022, sys.conversation_priorities).
Names compare without regard to case, as under SQL Server's default collation. A new
conversation endpoint takes the level of the most specific one that matches it (messaging's
catalog holds them: pybroker.core.conversation.priorities); with HONOR_BROKER_PRIORITY ON
its database receives and sends by that level (docs/tsql.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from pybroker.core.routing.cache import NOTHING
from pybroker.core.tsql.priority_ddl import (
    AlterBrokerPriority,
    CreateBrokerPriority,
    DropBrokerPriority,
    PriorityStatement,
)
from pybroker.errors import AlreadyExistsError, NotFoundError

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.kernel import DatabaseRef, Kernel


class BrokerPriority(NamedTuple):
    """A row of sys.conversation_priorities: None for a name that matches any."""

    name: str
    service_contract_name: str | None
    local_service_name: str | None
    remote_service_name: str | None
    priority: int


class BrokerPriorities:
    """The broker priorities of the instance's databases."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    def list(self, database: DatabaseRef) -> list[BrokerPriority]:
        return [BrokerPriority(*row) for row in self.kernel.store.run(
            "priorities/select_priorities.sql", {"database_id": database.database_id})]

    def run(self, database: DatabaseRef, statement: PriorityStatement) -> None:
        """CREATE (refused if the name is taken), ALTER or DROP (refused if it is not)."""
        store = self.kernel.store
        key = {"database_id": database.database_id, "name_key": statement.name.lower()}
        with self.kernel.write(NOTHING):  # routing does not read priorities
            rows = store.run("priorities/select_priority.sql", key)
            if isinstance(statement, CreateBrokerPriority):
                if rows:
                    raise AlreadyExistsError(
                        f"the broker priority {rows[0][0]!r} already exists in database "
                        f"{database.name!r} (names compare without regard to case)")
                store.run("priorities/insert_priority.sql", {
                    **key, "name": statement.name,
                    "service_contract_name": statement.service_contract_name,
                    "local_service_name": statement.local_service_name,
                    "remote_service_name": statement.remote_service_name,
                    "priority": statement.priority})
                return
            if not rows:
                raise NotFoundError(f"the broker priority {statement.name!r} does not exist "
                                    f"in database {database.name!r}")
            if isinstance(statement, DropBrokerPriority):
                store.run("priorities/delete_priority.sql", key)
                return
            assert isinstance(statement, AlterBrokerPriority)
            current = BrokerPriority(*rows[0])._asdict()
            current.update(dict(statement.changes))
            del current["name"]
            store.run("priorities/update_priority.sql", {**key, **current})
