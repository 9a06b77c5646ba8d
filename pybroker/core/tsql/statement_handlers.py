"""The handler of each DDL statement a batch runs (``Database.run_statements``): a table from
statement type to a function ``(database, statement) -> None`` that calls the database's
public methods, so a statement does exactly what the same call from Python does.

Route DDL (R10), MESSAGE TYPE, CONTRACT, QUEUE and SERVICE DDL (C2, C3) run on the database
the batch runs on; ALTER DATABASE ... SET PARTNER (R9) on the database it names; the
ENDPOINT and CERTIFICATE statements (P2) belong to the whole instance and go to the runner
of those the batch was given (pybroker.kernel.broker_endpoint.ddl.ServerBatch.run). A statement of
a type the table does not hold raises BrokerError, running nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, get_args

from pybroker.core.tsql import object_ddl as ddl
from pybroker.core.tsql.database_ddl import AlterDatabasePartner
from pybroker.core.tsql.endpoint_ddl import EndpointStatement
from pybroker.core.tsql.principal_ddl import PrincipalStatement
from pybroker.core.tsql.priority_ddl import PriorityStatement
from pybroker.core.tsql.route_ddl import AlterRoute, CreateRoute, DropRoute
from pybroker.errors import BrokerError


class DDLDatabase(Protocol):
    """The methods of a Database (pybroker.api.instance) the DDL handlers call."""

    @property
    def mirroring_role(self) -> str | None: ...

    def create_route(self, name: str, *, service_name: str | None = None,
                     broker_instance: str | None = None, address: str,
                     mirror_address: str | None = None, lifetime: int | None = None) -> Any: ...

    def alter_route(self, name: str, **changes: Any) -> Any: ...

    def drop_route(self, name: str) -> None: ...

    def create_message_type(self, name: str, validation: str = "NONE") -> Any: ...

    def alter_message_type(self, name: str, validation: str) -> Any: ...

    def drop_message_type(self, name: str) -> None: ...

    def create_contract(self, name: str,
                        messages: Mapping[str, str] | Iterable[tuple[str, str]]) -> Any: ...

    def drop_contract(self, name: str) -> None: ...

    def create_queue(self, name: str, status: bool = True, *, retention: bool = False,
                     poison_message_handling: bool = True,
                     activation_procedure: str | None = None,
                     activation_status: bool | None = None,
                     max_queue_readers: int | None = None,
                     execute_as: str | None = None) -> Any: ...

    def alter_queue(self, name: str, status: bool | None = None, *,
                    retention: bool | None = None,
                    poison_message_handling: bool | None = None,
                    activation_procedure: str | None = None,
                    activation_status: bool | None = None,
                    max_queue_readers: int | None = None, execute_as: str | None = None,
                    drop_activation: bool = False) -> Any: ...

    def drop_queue(self, name: str) -> None: ...

    def create_service(self, name: str, queue: str,
                       contracts: Iterable[str] | None = None) -> Any: ...

    def alter_service(self, name: str, queue: str | None = None, *,
                      add_contracts: Iterable[str] = (),
                      drop_contracts: Iterable[str] = ()) -> Any: ...

    def drop_service(self, name: str) -> None: ...

    def set_mirroring(self, role: str | None, partner: str | None = None) -> None: ...

    def fail_over(self) -> str: ...

    def run_broker_priority(self, statement: PriorityStatement) -> None: ...


Handler = Callable[[DDLDatabase, Any], None]

# -- route DDL (R10) -------------------------------------------------------------------------


def _create_route(database: DDLDatabase, s: CreateRoute) -> None:
    database.create_route(s.name, service_name=s.service_name,
                          broker_instance=s.broker_instance, address=s.address,
                          mirror_address=s.mirror_address, lifetime=s.lifetime)


def _alter_route(database: DDLDatabase, s: AlterRoute) -> None:
    database.alter_route(s.name, **dict(s.changes))


def _drop_route(database: DDLDatabase, s: DropRoute) -> None:
    database.drop_route(s.name)


# -- MESSAGE TYPE, CONTRACT, QUEUE and SERVICE (C2, C3) --------------------------------------


def _create_message_type(database: DDLDatabase, s: ddl.CreateMessageType) -> None:
    database.create_message_type(s.name, s.validation)


def _alter_message_type(database: DDLDatabase, s: ddl.AlterMessageType) -> None:
    database.alter_message_type(s.name, s.validation)


def _drop_message_type(database: DDLDatabase, s: ddl.DropMessageType) -> None:
    database.drop_message_type(s.name)


def _create_contract(database: DDLDatabase, s: ddl.CreateContract) -> None:
    database.create_contract(s.name, s.messages)


def _drop_contract(database: DDLDatabase, s: ddl.DropContract) -> None:
    database.drop_contract(s.name)


def _create_queue(database: DDLDatabase, s: ddl.CreateQueue) -> None:
    database.create_queue(
        s.name, s.status, retention=s.retention,
        poison_message_handling=s.poison_message_handling,
        activation_procedure=s.activation_procedure, activation_status=s.activation_status,
        max_queue_readers=s.max_queue_readers, execute_as=s.execute_as)


def _alter_queue(database: DDLDatabase, s: ddl.AlterQueue) -> None:
    database.alter_queue(
        s.name, s.status, retention=s.retention,
        poison_message_handling=s.poison_message_handling,
        activation_procedure=s.activation_procedure, activation_status=s.activation_status,
        max_queue_readers=s.max_queue_readers, execute_as=s.execute_as,
        drop_activation=s.drop_activation)


def _drop_queue(database: DDLDatabase, s: ddl.DropQueue) -> None:
    database.drop_queue(s.name)


def _create_service(database: DDLDatabase, s: ddl.CreateService) -> None:
    database.create_service(s.name, s.queue, s.contracts)


def _alter_service(database: DDLDatabase, s: ddl.AlterService) -> None:
    database.alter_service(s.name, s.queue, add_contracts=s.add_contracts,
                           drop_contracts=s.drop_contracts)


def _drop_service(database: DDLDatabase, s: ddl.DropService) -> None:
    database.drop_service(s.name)


# -- ALTER DATABASE ... SET PARTNER (R9), on the database it names ---------------------------


def _set_partner(database: DDLDatabase, s: AlterDatabasePartner) -> None:
    """pybroker.core.tsql.database_ddl says what each form does."""
    if s.action == "OFF":
        database.set_mirroring(None)
    elif s.action == "FAILOVER":
        database.fail_over()
    else:
        database.set_mirroring(database.mirroring_role or "PRINCIPAL", s.partner)


# The handler of each statement a database runs itself, by statement type.
HANDLERS: dict[type, Handler] = {
    CreateRoute: _create_route, AlterRoute: _alter_route, DropRoute: _drop_route,
    ddl.CreateMessageType: _create_message_type, ddl.AlterMessageType: _alter_message_type,
    ddl.DropMessageType: _drop_message_type,
    ddl.CreateContract: _create_contract, ddl.DropContract: _drop_contract,
    ddl.CreateQueue: _create_queue, ddl.AlterQueue: _alter_queue, ddl.DropQueue: _drop_queue,
    ddl.CreateService: _create_service, ddl.AlterService: _alter_service,
    ddl.DropService: _drop_service,
    **dict.fromkeys(get_args(PriorityStatement), lambda db, s: db.run_broker_priority(s)),
}  # fmt: skip

# The statements of the whole instance (P2): the broker endpoint and its certificates, and
# the principals and permissions around them (run by the same ServerBatch).
SERVER_STATEMENTS: tuple[type, ...] = (*get_args(EndpointStatement),
                                       *get_args(PrincipalStatement))


class StatementRunner:
    """The handlers of one batch's DDL statements: ``run()`` each statement in order.

    ``database`` runs the database statements; ``server`` runs an ENDPOINT or CERTIFICATE
    statement (the batch's ServerBatch.run); ``database_named`` gives the database an
    ALTER DATABASE statement names (Instance.database)."""

    def __init__(self, database: DDLDatabase, *, server: Callable[[Any], None],
                 database_named: Callable[[str], DDLDatabase]) -> None:
        self.database = database
        self.handlers: dict[type, Handler] = {
            **HANDLERS,
            **dict.fromkeys(SERVER_STATEMENTS, lambda _, s: server(s)),
            AlterDatabasePartner: lambda _, s: _set_partner(database_named(s.database), s),
        }

    def handler(self, statement: object) -> Handler:
        """The handler of ``statement``'s type (or of the nearest type it derives from)."""
        for kind in type(statement).__mro__:
            handler = self.handlers.get(kind)
            if handler is not None:
                return handler
        raise BrokerError(f"execute() cannot run {statement!r}")

    def run(self, statement: object) -> None:
        self.handler(statement)(self.database, statement)
