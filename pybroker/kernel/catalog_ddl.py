"""The message type, contract, queue and service DDL (SPEC C2, C3), a service composed on
the kernel: what ``Database.create_queue()`` and the rest run, and what
``Database.execute()`` runs for the statements of pybroker.core.tsql.object_ddl. Each method
takes the database it acts on."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from pybroker import arguments
from pybroker.core.activation.procedure import (
    check_execute_as,
    check_max_readers,
    check_procedure_name,
)
from pybroker.core.conversation.model import VALIDATION_CODES, VALIDATION_NAMES
from pybroker.core.conversation.system_messages import SYSTEM_PREFIX
from pybroker.core.routing.cache import NOTHING, CatalogChange
from pybroker.core.routing.definition import MAX_VALUE_LENGTH, check_name
from pybroker.errors import (
    AlreadyExistsError,
    BrokerError,
    InUseError,
    InvalidArgumentError,
    NotFoundError,
)
from pybroker.kernel.catalog_objects import Contract, MessageType, Queue, Service

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.kernel import DatabaseRef, Kernel
    from pybroker.kernel.messaging.catalog import DatabaseCatalog

_SENT_BY = ("INITIATOR", "TARGET", "ANY")


class CatalogDDL:
    """Message types, contracts, queues and services of the instance's databases."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._store = kernel.store

    # -- message types and contracts (C2) -------------------------------------------------

    def create_message_type(self, database: DatabaseRef, name: str,
                            validation: str = "NONE") -> MessageType:
        """CREATE MESSAGE TYPE name VALIDATION = NONE | EMPTY | WELL_FORMED_XML."""
        check_name("message type", name)
        code = _validation_code(validation)
        with self.kernel.write(NOTHING):
            if name in self._catalog(database).message_types:
                raise AlreadyExistsError(
                    f"message type {name!r} already exists in database {database.name!r}")
            self._store.run("instance/insert_message_type.sql", {
                "database_id": database.database_id, "name": name, "validation": code,
                "now": self.kernel.now()})
        return MessageType(name, VALIDATION_NAMES[code])

    def alter_message_type(self, database: DatabaseRef, name: str, validation: str) -> MessageType:
        """ALTER MESSAGE TYPE name VALIDATION = ..."""
        check_name("message type", name)
        code = _validation_code(validation)
        with self.kernel.write(NOTHING):
            self._user_message_type(database, name, "alter")
            self._store.run("instance/update_message_type.sql", {
                "database_id": database.database_id, "name": name, "validation": code})
        return MessageType(name, VALIDATION_NAMES[code])

    def drop_message_type(self, database: DatabaseRef, name: str) -> None:
        """DROP MESSAGE TYPE: refused while a contract uses it."""
        check_name("message type", name)
        with self.kernel.write(NOTHING):
            self._user_message_type(database, name, "drop")
            users = sorted(c for c, usages in self._catalog(database).contracts.items()
                           if name in usages)
            if users:
                raise InUseError(
                    f"message type {name!r} is used by contract(s) {', '.join(users)} in "
                    f"database {database.name!r}; drop them first")
            self._store.run("instance/delete_message_type.sql",
                            {"database_id": database.database_id, "name": name})

    def message_types(self, database: DatabaseRef) -> list[MessageType]:
        catalog = self._catalog(database)
        return [MessageType(n, VALIDATION_NAMES[v], n in catalog.system_message_types)
                for n, v in sorted(catalog.message_types.items())]

    def create_contract(
        self, database: DatabaseRef, name: str,
        messages: Mapping[str, str] | Iterable[tuple[str, str]],
    ) -> Contract:
        """The work of ``Database.create_contract`` (its docstring says what it does)."""
        check_name("contract", name)
        pairs = (list(messages.items()) if isinstance(messages, Mapping)
                 else arguments.sequence("messages", messages))
        if not pairs:
            raise InvalidArgumentError(
                f"contract {name!r} needs at least one message type (SENT BY ...)")
        usages: dict[str, tuple[bool, bool]] = {}
        for pair in pairs:
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise InvalidArgumentError(
                    f"a contract's messages are (message type, sent by) pairs, not {pair!r}")
            mtype, sent_by = pair
            check_name("message type", mtype)
            who = sent_by.upper() if isinstance(sent_by, str) else sent_by
            if who not in _SENT_BY:
                raise InvalidArgumentError(
                    f"message type {mtype!r} in contract {name!r}: SENT BY must be "
                    f"INITIATOR, TARGET or ANY, not {sent_by!r}")
            if mtype in usages:
                raise InvalidArgumentError(
                    f"message type {mtype!r} appears twice in contract {name!r}")
            if mtype.startswith(SYSTEM_PREFIX):
                raise InvalidArgumentError(
                    f"system message type {mtype!r} cannot be part of a contract (the broker "
                    "sends it on every conversation)")
            usages[mtype] = (who in ("INITIATOR", "ANY"), who in ("TARGET", "ANY"))
        with self.kernel.write(NOTHING):
            catalog = self._catalog(database)
            if name in catalog.contracts:
                raise AlreadyExistsError(
                    f"contract {name!r} already exists in database {database.name!r}")
            for mtype in usages:
                if mtype not in catalog.message_types:
                    raise NotFoundError(
                        f"message type {mtype!r} of contract {name!r} does not exist in "
                        f"database {database.name!r}; create it first")
            self._store.run("instance/insert_contract.sql", {
                "database_id": database.database_id, "name": name, "now": self.kernel.now()})
            for mtype, (by_initiator, by_target) in usages.items():
                self._store.run("instance/insert_contract_message_usage.sql", {
                    "database_id": database.database_id, "contract_name": name,
                    "message_type_name": mtype, "is_sent_by_initiator": by_initiator,
                    "is_sent_by_target": by_target})
        return self.contract(database, name)

    def drop_contract(self, database: DatabaseRef, name: str) -> None:
        """DROP CONTRACT: refused while a service accepts it."""
        check_name("contract", name)
        with self.kernel.write(NOTHING):
            catalog = self._catalog(database)
            if name not in catalog.contracts:
                raise NotFoundError(
                    f"contract {name!r} does not exist in database {database.name!r}")
            if name in catalog.system_contracts:
                raise InUseError(f"contract {name!r} is a system contract; it cannot be dropped")
            users = sorted(s for s, c in catalog.service_contracts.items() if name in c)
            if users:
                raise InUseError(
                    f"contract {name!r} is used by service(s) {', '.join(users)} in database "
                    f"{database.name!r}; ALTER SERVICE ... (DROP CONTRACT ...) or drop them first")
            params = {"database_id": database.database_id, "name": name}
            self._store.run("instance/delete_contract_message_usages.sql",
                            {"database_id": database.database_id, "contract_name": name})
            self._store.run("instance/delete_contract.sql", params)

    def contract(self, database: DatabaseRef, name: str) -> Contract:
        catalog = self._catalog(database)
        if name not in catalog.contracts:
            raise NotFoundError(
                    f"contract {name!r} does not exist in database {database.name!r}")
        return _contract(name, catalog.contracts[name], name in catalog.system_contracts)

    def contracts(self, database: DatabaseRef) -> list[Contract]:
        catalog = self._catalog(database)
        return [_contract(n, u, n in catalog.system_contracts)
                for n, u in sorted(catalog.contracts.items())]

    # -- queues and services -------------------------------------------------------------

    def create_queue(
        self, database: DatabaseRef,
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
        """The work of ``Database.create_queue`` (its docstring says what it does)."""
        check_name("queue", name)
        for what, value in (("queue status", status), ("retention", retention),
                            ("poison_message_handling", poison_message_handling)):
            if not isinstance(value, bool):
                raise BrokerError(f"{what} must be True (ON) or False (OFF), not {value!r}")
        activation = _Activation.of(None)
        if activation_procedure is None:
            if (activation_status, max_queue_readers, execute_as) != (None, None, None):
                raise InvalidArgumentError(
                    f"queue {name!r}: activation_status, max_queue_readers and execute_as "
                    "go with activation_procedure (ACTIVATION needs PROCEDURE_NAME)")
        else:
            activation = _Activation(
                True if activation_status is None else _flag("activation_status",
                                                             activation_status),
                check_procedure_name(activation_procedure),
                1 if max_queue_readers is None else check_max_readers(max_queue_readers),
                "SELF" if execute_as is None else check_execute_as(execute_as))
        with self.kernel.write(NOTHING):  # routing reads services, not queues
            for q in self.queues(database):
                if q.name.lower() == name.lower():  # queue names ignore case
                    raise AlreadyExistsError(
                        f"queue {name!r} already exists in {database.name!r}"
                        + ("" if q.name == name else f" as {q.name!r} (queue names are "
                           "unique without regard to case)"))
            self._store.run(
                "instance/insert_queue.sql",
                {"database_id": database.database_id, "name": name, "status": status,
                 "retention": retention, "poison_message_handling": poison_message_handling,
                 "now": self.kernel.now()},
            )
            if activation.procedure is not None:
                self._store.run("instance/update_queue_activation.sql",
                                activation.params(database.database_id, name))
        return Queue(name, status, retention, poison_message_handling, *activation)

    def alter_queue(
        self, database: DatabaseRef,
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
        """The work of ``Database.alter_queue`` (its docstring says what it does)."""
        check_name("queue", name)
        for what, value in (("queue status", status), ("retention", retention),
                            ("poison_message_handling", poison_message_handling)):
            if value is not None and not isinstance(value, bool):
                raise BrokerError(f"{what} must be True (ON), False (OFF) or None, not {value!r}")
        _flag("drop_activation", drop_activation)
        given = (activation_procedure, activation_status, max_queue_readers, execute_as)
        if drop_activation and given != (None, None, None, None):
            raise InvalidArgumentError(
                f"queue {name!r}: ACTIVATION (DROP) takes no other activation setting")
        if activation_procedure is not None:
            check_procedure_name(activation_procedure)
        if activation_status is not None:
            _flag("activation_status", activation_status)
        if max_queue_readers is not None:
            check_max_readers(max_queue_readers)
        if execute_as is not None:
            execute_as = check_execute_as(execute_as)
        with self.kernel.write(NOTHING):
            current = {q.name: q for q in self.queues(database)}.get(name)
            if current is None:
                raise NotFoundError(f"queue {name!r} does not exist in database {database.name!r}")
            activation = _Activation.of(current)
            if drop_activation:
                activation = _Activation.of(None)
            elif given != (None, None, None, None):
                if activation.procedure is None and activation_procedure is None:
                    raise InvalidArgumentError(
                        f"queue {name!r} has no activation procedure: give "
                        "activation_procedure (PROCEDURE_NAME) with the other activation "
                        "settings")
                fresh = activation.procedure is None
                activation = _Activation(
                    (True if fresh else activation.status) if activation_status is None
                    else activation_status,
                    activation.procedure if activation_procedure is None
                    else activation_procedure,
                    (1 if fresh else activation.max_readers) if max_queue_readers is None
                    else max_queue_readers,
                    ("SELF" if fresh else activation.execute_as) if execute_as is None
                    else execute_as)
            merged = Queue(
                name,
                current.status if status is None else status,
                current.retention if retention is None else retention,
                current.poison_message_handling if poison_message_handling is None
                else poison_message_handling,
                *activation,
            )
            self._store.run("instance/update_queue.sql", {
                "database_id": database.database_id, "name": name, "status": merged.status,
                "retention": merged.retention,
                "poison_message_handling": merged.poison_message_handling})
            if activation != _Activation.of(current):
                self._store.run("instance/update_queue_activation.sql",
                                activation.params(database.database_id, name))
        return merged

    def drop_queue(self, database: DatabaseRef, name: str) -> None:
        """DROP QUEUE: refused while a service is bound to it; its messages go with it."""
        check_name("queue", name)
        with self.kernel.write(NOTHING):
            if not any(q.name == name for q in self.queues(database)):
                raise NotFoundError(f"queue {name!r} does not exist in database {database.name!r}")
            users = sorted(s.name for s in self.services(database) if s.queue == name)
            if users:
                raise InUseError(
                    f"queue {name!r} is used by service(s) {', '.join(users)} in database "
                    f"{database.name!r}; drop them or move them (ALTER SERVICE ... ON QUEUE) first")
            params = {"database_id": database.database_id, "name": name}
            of_queue = {"database_id": database.database_id, "queue_name": name}
            self._store.run("instance/delete_queue_fragments.sql", of_queue)
            self._store.run("instance/delete_queue_messages.sql", of_queue)
            self._store.run("instance/delete_queue.sql", params)

    def queues(self, database: DatabaseRef) -> list[Queue]:
        rows = self._store.run("instance/select_queue_settings.sql",
                               {"database_id": database.database_id})
        return [Queue(n, bool(s), bool(r), p is None or bool(p), bool(a), proc, readers or 0,
                      execute_as)
                for n, s, r, p, a, proc, readers, execute_as in rows]

    def create_service(
        self, database: DatabaseRef, name: str, queue: str, contracts: Iterable[str] | None = None
    ) -> Service:
        """The work of ``Database.create_service`` (its docstring says what it does)."""
        check_name("service", name, MAX_VALUE_LENGTH)
        check_name("queue", queue)
        wanted = _contract_list(contracts)
        with self.kernel.write(CatalogChange(services=frozenset([name]))):  # R2.6, R4
            if not any(q.name == queue for q in self.queues(database)):
                raise NotFoundError(
                    f"queue {queue!r} does not exist in database {database.name!r}; create it first"
                )
            if any(s.name == name for s in self.services(database)):
                raise AlreadyExistsError(f"service {name!r} already exists in {database.name!r}")
            self._check_contracts_exist(database, wanted)
            self._store.run(
                "instance/insert_service.sql",
                {"database_id": database.database_id, "name": name, "queue_name": queue,
                 "now": self.kernel.now()},
            )
            for contract in wanted:
                self._store.run("instance/insert_service_contract_usage.sql", {
                    "database_id": database.database_id, "service_name": name,
                    "contract_name": contract})
        return Service(name, queue, tuple(sorted(wanted)))

    def alter_service(
        self, database: DatabaseRef,
        name: str,
        queue: str | None = None,
        *,
        add_contracts: Iterable[str] = (),
        drop_contracts: Iterable[str] = (),
    ) -> Service:
        """ALTER SERVICE name [ON QUEUE queue] [(ADD CONTRACT c, DROP CONTRACT c, ...)]."""
        check_name("service", name, MAX_VALUE_LENGTH)
        adding = _contract_list(add_contracts)
        dropping = _contract_list(drop_contracts)
        if set(adding) & set(dropping):
            raise InvalidArgumentError(
                f"ALTER SERVICE {name!r} both adds and drops {sorted(set(adding) & set(dropping))}")
        with self.kernel.write(NOTHING):  # routing reads service names only
            current = {s.name: s for s in self.services(database)}.get(name)
            if current is None:
                raise NotFoundError(
                    f"service {name!r} does not exist in database {database.name!r}")
            if queue is not None:
                check_name("queue", queue)
                if not any(q.name == queue for q in self.queues(database)):
                    raise NotFoundError(
                        f"queue {queue!r} does not exist in database {database.name!r}")
                self._store.run("instance/update_service_queue.sql", {
                    "database_id": database.database_id, "name": name, "queue_name": queue})
            self._check_contracts_exist(database, adding)
            for contract in adding:
                if contract in current.contracts:
                    raise AlreadyExistsError(
                        f"service {name!r} already accepts contract {contract!r}")
                self._store.run("instance/insert_service_contract_usage.sql", {
                    "database_id": database.database_id, "service_name": name,
                    "contract_name": contract})
            for contract in dropping:
                if contract not in current.contracts:
                    raise NotFoundError(
                        f"service {name!r} does not accept contract {contract!r}")
                self._store.run("instance/delete_service_contract_usage.sql", {
                    "database_id": database.database_id, "service_name": name,
                    "contract_name": contract})
        return {s.name: s for s in self.services(database)}[name]

    def drop_service(self, database: DatabaseRef, name: str) -> None:
        """The work of ``Database.drop_service`` (its docstring says what it does)."""
        check_name("service", name, MAX_VALUE_LENGTH)
        with self.kernel.write(CatalogChange(services=frozenset([name]))):  # R2.6, R4
            if not any(s.name == name for s in self.services(database)):
                raise NotFoundError(
                    f"service {name!r} does not exist in database {database.name!r}")
            self.kernel.messaging.end_service_conversations(database.database_id, name)
            params = {"database_id": database.database_id, "service_name": name}
            self._store.run("instance/delete_service_contract_usages.sql", params)
            self._store.run("instance/delete_service.sql",
                            {"database_id": database.database_id, "name": name})

    def services(self, database: DatabaseRef) -> list[Service]:
        rows = self._store.run("instance/select_services.sql",
                               {"database_id": database.database_id})
        usages = self._store.run("instance/select_service_contract_usages.sql",
                                 {"database_id": database.database_id})
        accepted: dict[str, list[str]] = {}
        for service, contract in usages:
            accepted.setdefault(service, []).append(contract)
        return [Service(n, q, tuple(sorted(accepted.get(n, ())))) for n, q in rows]

    # -- internals (conversations) ---------------------------------------------------------

    def _catalog(self, database: DatabaseRef) -> DatabaseCatalog:
        return self.kernel.messaging.catalog(database.database_id)

    def _user_message_type(self, database: DatabaseRef, name: str, verb: str) -> None:
        catalog = self._catalog(database)
        if name not in catalog.message_types:
            raise NotFoundError(
                    f"message type {name!r} does not exist in database {database.name!r}")
        if name in catalog.system_message_types:
            raise InUseError(f"message type {name!r} is a system message type; it cannot be "
                             f"{verb}ped" if verb == "drop" else
                             f"message type {name!r} is a system message type; it cannot be "
                             f"{verb}ed")

    def _check_contracts_exist(self, database: DatabaseRef, contracts: list[str]) -> None:
        catalog = self._catalog(database)
        for contract in contracts:
            if contract not in catalog.contracts:
                raise NotFoundError(
                    f"contract {contract!r} does not exist in database {database.name!r}; "
                    "create it first")


class _Activation(NamedTuple):
    """A queue's ACTIVATION settings, in the order of Queue's fields."""

    status: bool
    procedure: str | None
    max_readers: int
    execute_as: str | None

    @classmethod
    def of(cls, queue: Queue | None) -> _Activation:
        if queue is None:  # none (or ACTIVATION (DROP)): as SQL Server shows it
            return cls(False, None, 0, None)
        return cls(queue.activation_status, queue.activation_procedure,
                   queue.max_queue_readers, queue.execute_as)

    def params(self, database_id: int, name: str) -> dict[str, object]:
        return {"database_id": database_id, "name": name,
                "is_activation_enabled": self.status, "activation_procedure": self.procedure,
                "max_readers": self.max_readers, "activation_execute_as": self.execute_as}


def _flag(what: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{what} must be True (ON) or False (OFF), not {value!r}")
    return value


def _validation_code(validation: object) -> str:
    if isinstance(validation, str) and validation.upper() in VALIDATION_CODES:
        return VALIDATION_CODES[validation.upper()]
    raise InvalidArgumentError(
        f"VALIDATION must be NONE, EMPTY or WELL_FORMED_XML, not {validation!r}")


def _contract_list(contracts: Iterable[str] | None) -> list[str]:
    if contracts is None:
        return []
    if isinstance(contracts, str):
        raise InvalidArgumentError(
            f"contracts is a list of contract names, not the string {contracts!r}")
    names = arguments.sequence("contracts", contracts)
    for name in names:
        check_name("contract", name)
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"a contract is named twice: {names}")
    return names


def _contract(name: str, usages: dict[str, tuple[bool, bool]], is_system: bool) -> Contract:
    def who(by_initiator: bool, by_target: bool) -> str:
        return "ANY" if by_initiator and by_target else (
            "INITIATOR" if by_initiator else "TARGET")

    return Contract(name, tuple((t, who(*u)) for t, u in sorted(usages.items())), is_system)
