"""A Database of the instance (pybroker.api.instance): its broker identifier, routing table,
message types, contracts, queues, services and conversations, and the T-SQL it runs. A front
over the instance's kernel and the services composed on it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

from pybroker import arguments
from pybroker.api.conversation import Conversation
from pybroker.api.database_script import InstanceDatabases
from pybroker.core.conversation.model import Message
from pybroker.core.routing.cache import NOTHING
from pybroker.core.tsql import batches as script_batches
from pybroker.core.tsql.batch_interface import BatchResults
from pybroker.core.tsql.priority_ddl import PriorityStatement
from pybroker.core.tsql.script import run_batches
from pybroker.core.tsql.statement_handlers import StatementRunner
from pybroker.errors import BrokerError
from pybroker.kernel.broker_endpoint.ddl import MASTER_DATABASE_ID, ServerBatch
from pybroker.kernel.broker_priorities import BrokerPriorities
from pybroker.kernel.catalog_ddl import CatalogDDL
from pybroker.kernel.catalog_objects import Contract, MessageType, Queue, Route, Service
from pybroker.kernel.kernel import Kernel
from pybroker.kernel.mirroring import Mirroring
from pybroker.kernel.procedures import Procedure, Procedures
from pybroker.kernel.route_ddl import RouteDDL
from pybroker.kernel.user_sql import DatabaseSql, UserSql


class InstanceOfDatabase(Protocol):
    """What a Database needs of its Instance (api/instance.py, which imports this module):
    the kernel and the services composed on it, public names."""

    @property
    def kernel(self) -> Kernel: ...

    @property
    def catalog_ddl(self) -> CatalogDDL: ...

    @property
    def route_ddl(self) -> RouteDDL: ...

    @property
    def mirroring(self) -> Mirroring: ...

    @property
    def procedures(self) -> Procedures: ...

    @property
    def user_sql(self) -> UserSql: ...

    def database(self, name: str) -> Database: ...


class Database:
    """A database of the instance: its own broker identifier, routing table and services.
    Its methods run on the instance's kernel and the services composed on it."""

    def __init__(self, instance: InstanceOfDatabase, database_id: int, name: str,
                 broker_instance: str):
        self._instance = instance
        self.database_id = database_id
        self.name = name
        self.broker_instance = broker_instance
        self._session_id: int | None = None

    @property
    def instance(self) -> InstanceOfDatabase:
        """The instance this database belongs to."""
        return self._instance

    @property
    def kernel(self) -> Kernel:
        """The kernel of the instance this database belongs to."""
        return self._instance.kernel

    def __repr__(self) -> str:
        return f"Database(name={self.name!r}, broker_instance={self.broker_instance!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Database) and other.database_id == self.database_id and (
            other._instance is self._instance
        )

    def __hash__(self) -> int:
        return hash((id(self._instance), self.database_id))

    # -- conversations (C1-C5, P3) -----------------------------------------------------------

    def begin_dialog(
        self,
        from_service: str,
        to_service: str,
        *,
        contract: str = "DEFAULT",
        broker_instance: str | None = None,
        lifetime: int | None = None,
        related_conversation_group: str | None = None,
    ) -> Conversation:
        """BEGIN DIALOG: a conversation from ``from_service`` (of this database) to
        ``to_service``, routed with this database's routing table at the first send (R1.1).
        ``lifetime`` in seconds (default 2^31, C1)."""
        handle = self.kernel.messaging.begin_dialog(
            self.database_id, from_service, to_service, contract, broker_instance, lifetime,
            related_conversation_group)
        return Conversation(self, handle)

    def conversation(self, handle: str) -> Conversation:
        """The conversation endpoint of this database with that handle (e.g. to reply on a
        received message's ``conversation_handle``)."""
        arguments.text("handle", handle, limit=64)
        ep = self.kernel.messaging.endpoint(handle, self.database_id)
        return Conversation(self, ep.conversation_handle)

    def receive(
        self,
        queue: str,
        *,
        max_messages: int = 1,
        timeout: float = 0.0,
        conversation_handle: str | None = None,
        conversation_group_id: str | None = None,
    ) -> list[Message]:
        """RECEIVE TOP (max_messages) FROM queue, waiting up to ``timeout`` seconds for the
        first message (WAITFOR). Returns messages of one conversation group, in order; they
        leave the queue when the transaction commits (C3). ``conversation_handle`` or
        ``conversation_group_id`` (not both) is RECEIVE's WHERE clause: only that
        conversation's or group's messages."""
        arguments.whole_number("max_messages", max_messages, minimum=1,
                               maximum=arguments.INT32_MAX)
        arguments.real_number("timeout", timeout, minimum=0.0, maximum=arguments.MAX_SECONDS)
        return self.kernel.messaging.receive(
            self.database_id, queue, max_messages, timeout, conversation_handle,
            conversation_group_id)

    def get_conversation_group(self, queue: str, *, timeout: float = 0.0) -> str | None:
        """GET CONVERSATION GROUP FROM queue: the conversation group the next RECEIVE takes,
        waiting up to ``timeout`` seconds for a message (WAITFOR); None when none is ready."""
        arguments.real_number("timeout", timeout, minimum=0.0, maximum=arguments.MAX_SECONDS)
        return self.kernel.messaging.get_conversation_group(self.database_id, queue,
                                                                timeout)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Database]:
        """One transaction for every send, receive, begin_dialog and end inside: all commit
        together or roll back together (a rolled-back receive puts its messages back)."""
        with self.kernel.messaging.unit_of_work():
            yield self

    # -- message types, contracts, queues and services (C2, C3; kernel/catalog_ddl.py) ----

    def create_message_type(self, name: str, validation: str = "NONE") -> MessageType:
        """CREATE MESSAGE TYPE name VALIDATION = NONE | EMPTY | WELL_FORMED_XML."""
        return self.instance.catalog_ddl.create_message_type(self, name, validation)

    def alter_message_type(self, name: str, validation: str) -> MessageType:
        """ALTER MESSAGE TYPE name VALIDATION = ..."""
        return self.instance.catalog_ddl.alter_message_type(self, name, validation)

    def drop_message_type(self, name: str) -> None:
        """DROP MESSAGE TYPE: refused while a contract uses it."""
        return self.instance.catalog_ddl.drop_message_type(self, name)

    def message_types(self) -> list[MessageType]:
        return self.instance.catalog_ddl.message_types(self)

    def create_contract(
        self, name: str, messages: Mapping[str, str] | Iterable[tuple[str, str]]
    ) -> Contract:
        """CREATE CONTRACT name (message type SENT BY INITIATOR | TARGET | ANY, ...).

        ``messages`` maps message type names to "INITIATOR", "TARGET" or "ANY" (or is a
        sequence of such pairs). SQL Server has no ALTER CONTRACT; neither has pybroker.
        """
        return self.instance.catalog_ddl.create_contract(self, name, messages)

    def drop_contract(self, name: str) -> None:
        """DROP CONTRACT: refused while a service accepts it."""
        return self.instance.catalog_ddl.drop_contract(self, name)

    def contract(self, name: str) -> Contract:
        return self.instance.catalog_ddl.contract(self, name)

    def contracts(self) -> list[Contract]:
        return self.instance.catalog_ddl.contracts(self)

    def create_queue(
        self,
        name: str,
        status: bool = True,
        *,
        retention: bool = False,
        poison_message_handling: bool = True,
        activation_procedure: str | None = None,
        activation_status: bool | None = None,
        max_queue_readers: int | None = None,
        execute_as: str | None = None,
    ) -> Queue:
        """CREATE QUEUE name WITH STATUS = ON|OFF, RETENTION = ON|OFF,
        POISON_MESSAGE_HANDLING (STATUS = ON|OFF), ACTIVATION (...) (C3; SQL Server's
        defaults).

        ``activation_procedure`` ('module.path:function') gives the queue ACTIVATION:
        ``activation_status`` (default True: ON), ``max_queue_readers`` (0 to 32767,
        default 1) and ``execute_as`` ('SELF', the default, or 'OWNER') go with it. Only the
        name's form is checked here; it is imported when a reader first starts (see
        pybroker.core.activation.procedure for the callable's signature)."""
        return self.instance.catalog_ddl.create_queue(self, name, status, retention=retention,
                                                      poison_message_handling=poison_message_handling,
                                                      activation_procedure=activation_procedure,
                                                      activation_status=activation_status,
                                                      max_queue_readers=max_queue_readers,
                                                      execute_as=execute_as)

    def alter_queue(
        self,
        name: str,
        status: bool | None = None,
        *,
        retention: bool | None = None,
        poison_message_handling: bool | None = None,
        activation_procedure: str | None = None,
        activation_status: bool | None = None,
        max_queue_readers: int | None = None,
        execute_as: str | None = None,
        drop_activation: bool = False,
    ) -> Queue:
        """ALTER QUEUE: None leaves a setting as it is. Turning a queue ON delivers the
        messages that wait for it in transmission queues, in order (C3, P8).

        The activation settings are those of create_queue(); ``drop_activation=True`` is
        ACTIVATION (DROP) (and takes none of them). A queue without a procedure takes the
        others only together with ``activation_procedure``; given a procedure it had none,
        it gets create_queue()'s defaults for what is not given."""
        return self.instance.catalog_ddl.alter_queue(self, name, status, retention=retention,
                                                     poison_message_handling=poison_message_handling,
                                                     activation_procedure=activation_procedure,
                                                     activation_status=activation_status,
                                                     max_queue_readers=max_queue_readers,
                                                     execute_as=execute_as,
                                                     drop_activation=drop_activation)

    def drop_queue(self, name: str) -> None:
        """DROP QUEUE: refused while a service is bound to it; its messages go with it."""
        return self.instance.catalog_ddl.drop_queue(self, name)

    def queues(self) -> list[Queue]:
        return self.instance.catalog_ddl.queues(self)

    def create_service(
        self, name: str, queue: str, contracts: Iterable[str] | None = None
    ) -> Service:
        """CREATE SERVICE name ON QUEUE queue [(contract, ...)]. A service that lists no
        contracts can only initiate conversations; ``contracts=["DEFAULT"]`` accepts the
        default contract (as in SQL Server)."""
        return self.instance.catalog_ddl.create_service(self, name, queue, contracts)

    def alter_service(
        self,
        name: str,
        queue: str | None = None,
        *,
        add_contracts: Iterable[str] = (),
        drop_contracts: Iterable[str] = (),
    ) -> Service:
        """ALTER SERVICE name [ON QUEUE queue] [(ADD CONTRACT c, DROP CONTRACT c, ...)]."""
        return self.instance.catalog_ddl.alter_service(self, name, queue,
                                                       add_contracts=add_contracts,
                                                       drop_contracts=drop_contracts)

    def drop_service(self, name: str) -> None:
        """DROP SERVICE: its conversations end at once (their far sides in this instance
        get error -8490, C2), then the service goes."""
        return self.instance.catalog_ddl.drop_service(self, name)

    def services(self) -> list[Service]:
        return self.instance.catalog_ddl.services(self)

    # -- routes (R10; kernel/route_ddl.py) ------------------------------------------------

    def create_route(
        self,
        name: str,
        *,
        service_name: str | None = None,
        broker_instance: str | None = None,
        address: str,
        mirror_address: str | None = None,
        lifetime: int | None = None,
    ) -> Route:
        """CREATE ROUTE (R10): lifetime in seconds from now; None never expires."""
        return self.instance.route_ddl.create_route(self, name, service_name=service_name,
                                                    broker_instance=broker_instance,
                                                    address=address,
                                                    mirror_address=mirror_address,
                                                    lifetime=lifetime)

    def alter_route(self, name: str, **changes: Any) -> Route:
        """ALTER ROUTE: changes only the clauses given. '' removes SERVICE_NAME,
        BROKER_INSTANCE or MIRROR_ADDRESS, as in SQL Server; the result must obey R10.2."""
        return self.instance.route_ddl.alter_route(self, name, **changes)

    def drop_route(self, name: str) -> None:
        """DROP ROUTE; dropping a route in use is allowed (R10.5)."""
        return self.instance.route_ddl.drop_route(self, name)

    def routes(self) -> list[Route]:
        return self.instance.route_ddl.routes(self)

    def route(self, name: str) -> Route:
        return self.instance.route_ddl.route(self, name)

    # -- mirroring (R9; kernel/mirroring.py) ---------------------------------------------

    @property
    def mirroring_role(self) -> str | None:
        """'PRINCIPAL', 'MIRROR', or None when the database is not part of a mirrored pair."""
        return self.instance.mirroring.mirroring_role(self)

    @property
    def mirroring_partner(self) -> str | None:
        """The partner's address (tcp://host:port), or None when not mirrored."""
        return self.instance.mirroring.mirroring_partner(self)

    def set_mirroring(self, role: str | None, partner: str | None = None) -> None:
        """Make this database a partner of a mirrored pair (R9): ``role`` 'PRINCIPAL' or
        'MIRROR', ``partner`` the other's broker endpoint (tcp://host:port). ``role`` None
        takes it out of the pair (SET PARTNER OFF). A MIRROR database takes no message from
        the network: its senders turn to its partner (R9.3)."""
        return self.instance.mirroring.set_mirroring(self, role, partner)

    def fail_over(self) -> str:
        """SET PARTNER FAILOVER: this side's role flips (PRINCIPAL <-> MIRROR); returns the
        new role. Run it on both partners (see the module's note)."""
        return self.instance.mirroring.fail_over(self)

    def execute(self, tsql: str) -> BatchResults:
        """Run a T-SQL script; returns the result sets of its RECEIVEs and SELECTs, in order
        (an empty list when it has none), with the lines its PRINT statements wrote on
        ``messages``. pybroker/docs/tsql.md lists what a script runs: the DDL of routes,
        message types, contracts, queues and services (on master also endpoints,
        certificates and ALTER DATABASE ... SET PARTNER), the conversation verbs, control
        flow, TRY ... CATCH, stored procedures and EXEC.

        A batch of DDL only is all or nothing; otherwise each statement outside BEGIN
        TRANSACTION commits on its own, and a failed statement stops the batch, rolling back
        an open transaction (pybroker.core.tsql.script; the error carries the result sets
        returned before it as ``results``). A line holding only GO (or GO count) ends a
        batch, as in sqlcmd and SSMS: the batches run in order, each with its own variables.

        The whole script is parsed first: a statement that is not understood runs nothing.
        """
        if not isinstance(tsql, str):
            raise BrokerError(f"execute() takes T-SQL text, not {type(tsql).__name__}")
        batches = script_batches.parse_batches(
            tsql, master=self.database_id == MASTER_DATABASE_ID)
        return run_batches(self, batches, self.script_databases())  # USE switches

    def clock(self) -> float:
        """The instance clock's time, epoch seconds (what GETDATE() in a batch reads)."""
        return self.kernel.clock()

    @property
    def session_id(self) -> int:
        """@@SPID of the batches this object runs: a number of its own, taken from the
        instance (51 up) when first asked; a served client's connection gives its
        databases its own (pybroker.server.session)."""
        found = self._session_id
        if found is None:
            found = self._session_id = next(self.kernel.session_ids)
        return found

    @session_id.setter
    def session_id(self, value: int) -> None:
        self._session_id = value

    def script_databases(self) -> InstanceDatabases:
        """The instance's databases as a script sees them (USE, DB_ID(), DROP DATABASE)."""
        return InstanceDatabases(self.instance)

    # -- stored procedures (kernel/procedures.py; CREATE PROCEDURE and EXEC in execute()) --

    def procedures(self) -> list[Procedure]:
        """The stored procedures of this database, with their text (sys.procedures)."""
        return self.instance.procedures.list(self)

    def save_procedure(self, schema: str, name: str, definition: str, mode: str) -> None:
        """Keep CREATE (``mode``: or ALTER, CREATE OR ALTER) PROCEDURE text execute() parsed."""
        self.instance.procedures.save(self, schema, name, definition, mode)

    def drop_procedure(self, schema: str, name: str, *, if_exists: bool = False) -> None:
        self.instance.procedures.drop(self, schema, name, if_exists=if_exists)

    def procedure_definition(self, schema: str | None, name: str) -> tuple[str, str, str] | None:
        return self.instance.procedures.definition(self, schema, name)

    def ordinary_sql(self) -> DatabaseSql:
        """What a T-SQL batch's SELECT, INSERT, ... run on (kernel/user_sql.py)."""
        return self.instance.user_sql.of(self)

    def run_broker_priority(self, statement: PriorityStatement) -> None:
        """CREATE/ALTER/DROP BROKER PRIORITY (pybroker.kernel.broker_priorities)."""
        BrokerPriorities(self.kernel).run(self, statement)

    def run_statements(self, statements: Iterable[object]) -> None:
        """Run parsed statements (pybroker.core.tsql) in one transaction: any error, nothing
        changed (an endpoint a failed batch closed is started again)."""
        statements = list(statements)
        server = ServerBatch(self, statements)  # ENDPOINT and CERTIFICATE, on master only
        runner = StatementRunner(self, server=server.run, database_named=self.instance.database)
        with server, self.kernel.write(NOTHING):  # each statement says what it changes
            for statement in statements:
                runner.run(statement)
            server.finish()
