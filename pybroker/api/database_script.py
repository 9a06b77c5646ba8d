"""The instance's databases as a T-SQL script sees them (pybroker.core.tsql.database_statements
says what USE, CREATE, DROP and ALTER DATABASE do): each one runs through the public API
(``Instance.create_database``, a Database's drop_ methods, ``Conversation.end``), so a
statement does what the same calls from Python do.

ALTER DATABASE ... SET, as SQL Server's does to the database's broker:

- ENABLE_BROKER / DISABLE_BROKER set ``is_broker_enabled`` (sys.databases). While it is
  off, messaging sends nothing from the database and delivers nothing of this instance to
  it (pybroker.kernel.messaging.delivery: STATUS_BROKER_DISABLED in the transmission
  queue); the catalog write of ENABLE_BROKER retries what waits. What arrives for it from
  another instance is refused with a notice that is not fatal and waits in the sender's
  transmission queue (pybroker.kernel.messaging.arrivals), sent again until it is enabled.
- NEW_BROKER gives the database a new ``service_broker_guid`` (its broker instance, R1.3)
  and removes its conversations without telling their far sides (as END CONVERSATION WITH
  CLEANUP), as SQL Server's does; the broker is enabled.
- ERROR_BROKER_CONVERSATIONS ends every conversation of the database not yet ended with an
  error (SQL Server's: "the database was attached or restored"), which the far side
  receives as an Error message.
- TRUSTWORTHY is kept and shown in sys.databases (``is_trustworthy_on``); principals are
  kept but no statement runs as one, so it changes nothing more.
- HONOR_BROKER_PRIORITY is kept (``is_honor_broker_priority_on``) and read by messaging
  with the catalog: ON, RECEIVE takes the group of the highest priority first and the
  transport sends the higher priorities first (pybroker.kernel.messaging.receive,
  pybroker.core.wire.dialog.Transmitter); the priorities themselves are matched whether it
  is ON or not, when each endpoint is made (pybroker.core.conversation.priorities).
"""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.core.tsql.database_statements import SYSTEM_DATABASES
from pybroker.errors import InvalidArgumentError

# An Instance and its Databases (pybroker.api.instance, which imports this module): Any,
# so that the two modules import each other in neither direction.
Instance = Database = Any

# What ERROR_BROKER_CONVERSATIONS ends conversations with (a code of pybroker's choosing:
# END CONVERSATION's codes are positive).
RESTORED_ERROR = 1
RESTORED_DESCRIPTION = ("the database was attached or restored: ALTER DATABASE ... SET "
                        "ERROR_BROKER_CONVERSATIONS ended the conversation")
_NOT_ENDED = ["SO", "SI", "CO", "DI"]  # states END CONVERSATION may still end
_NOT_CLOSED = ["SO", "SI", "CO", "DI", "DO", "ER"]


class InstanceDatabases:
    """``ScriptDatabases`` over an Instance: its databases, by name."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance

    def database(self, name: str) -> Database:
        return self.instance.database(name)

    def database_id(self, name: str) -> int | None:
        for db in self.instance.databases():  # names compare without regard to case
            if db.name.lower() == name.lower():
                return db.database_id
        return None

    def create_database(self, name: str) -> None:
        self.instance.create_database(name)

    def drop_database(self, name: str) -> None:
        """The database and everything it holds, in one transaction."""
        db = self.instance.database(name)
        if db.name.lower() in SYSTEM_DATABASES:
            raise InvalidArgumentError(f"cannot drop the database {db.name!r}: it is a "
                                       "system database")
        store = db.kernel.store
        key = {"database_id": db.database_id}
        with db.transaction():
            for handle in _endpoints(db, _NOT_CLOSED):
                db.conversation(handle).end(cleanup=True)
            for procedure in db.procedures():
                db.drop_procedure(procedure.schema, procedure.name)
            for service in db.services():
                db.drop_service(service.name)
            for queue in db.queues():
                db.drop_queue(queue.name)
            for contract in db.contracts():
                if not contract.is_system:
                    db.drop_contract(contract.name)
            for message_type in db.message_types():
                if not message_type.is_system:
                    db.drop_message_type(message_type.name)
            if db.mirroring_role is not None:
                db.set_mirroring(None)
            with db.kernel.write():  # every routing answer may change
                for template in ("delete_database_priorities", "delete_database_principals",
                                 "delete_database_broker_permissions",
                                 "delete_database_master_keys",
                                 "delete_database_remote_service_bindings",
                                 "delete_database_contract_message_usages",
                                 "delete_database_contracts", "delete_database_message_types",
                                 "delete_database_routes", "delete_database"):
                    store.run(f"instance/{template}.sql", key)

    def set_option(self, name: str, option: str, value: bool | None) -> None:
        db = self.instance.database(name)
        changes: dict[str, object] = {
            "database_id": db.database_id, "is_broker_enabled": None,
            "service_broker_guid": None, "is_trustworthy_on": None,
            "is_honor_broker_priority_on": None}
        if option in ("ENABLE_BROKER", "DISABLE_BROKER"):
            changes["is_broker_enabled"] = option == "ENABLE_BROKER"
        elif option == "NEW_BROKER":
            changes["is_broker_enabled"] = True
            changes["service_broker_guid"] = str(uuid.uuid4())
        elif option == "TRUSTWORTHY":
            changes["is_trustworthy_on"] = value
        elif option == "HONOR_BROKER_PRIORITY":
            changes["is_honor_broker_priority_on"] = value
        with db.transaction():
            if option == "NEW_BROKER":
                for handle in _endpoints(db, _NOT_CLOSED):
                    db.conversation(handle).end(cleanup=True)
            elif option == "ERROR_BROKER_CONVERSATIONS":
                for handle in _endpoints(db, _NOT_ENDED):
                    db.conversation(handle).end(RESTORED_ERROR, RESTORED_DESCRIPTION)
            with db.kernel.write():  # a new broker instance changes routing answers
                db.kernel.store.run("instance/update_database_option.sql", changes)


def _endpoints(db: Database, states: list[str]) -> list[str]:
    return [row[0] for row in db.kernel.store.run(
        "instance/select_database_endpoints.sql",
        {"database_id": db.database_id, "states": states})]
