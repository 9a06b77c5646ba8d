"""The messaging engine's copy of the catalog (C1-C3): the message types, contracts,
services and queue settings of each database, read from the file once and kept until a
catalog write changes them, and the instance's maximum message size."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pybroker.errors import NotFoundError, QueueDisabledError
from pybroker.kernel.messaging.catalog import DatabaseCatalog, QueueSettings

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.storage.store import Store


class CatalogCache:
    """The catalog of each database of one instance as the engine reads it, from ``store``."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._catalogs: dict[int, DatabaseCatalog] = {}
        self._database_ids: dict[str, int] | None = None
        self._max_message_size: int | None = None
        self._version = 0

    @property
    def version(self) -> int:
        """Changes whenever the catalog may have changed (``changed``)."""
        return self._version

    def changed(self) -> None:
        """A catalog write committed (or rolled back): read the catalog again when asked."""
        self._catalogs.clear()
        self._database_ids = None
        self._max_message_size = None
        self._version += 1

    def catalog(self, database_id: int) -> DatabaseCatalog:
        found = self._catalogs.get(database_id)
        if found is None:
            found = self._load_catalog(database_id)
            self._catalogs[database_id] = found
        return found

    @property
    def database_ids(self) -> dict[str, int]:
        """Database name -> id, of every database of the instance."""
        if self._database_ids is None:
            with self._store.lock:
                rows = self._store.run("instance/select_databases.sql")
            self._database_ids = {row[1]: row[0] for row in rows}
        return self._database_ids

    def catalog_named(self, name: str) -> DatabaseCatalog:
        ids = self.database_ids
        if name not in ids:
            raise NotFoundError(f"database {name!r} does not exist in this instance")
        return self.catalog(ids[name])

    def _load_catalog(self, database_id: int) -> DatabaseCatalog:
        run = self._store.run
        p = {"database_id": database_id}
        with self._store.lock:
            (row,) = [r for r in run("instance/select_databases.sql") if r[0] == database_id]
            types = run("instance/select_message_types.sql", p)
            contracts = run("instance/select_contracts.sql", p)
            usages = run("instance/select_contract_message_usages.sql", p)
            services = run("instance/select_services.sql", p)
            service_contracts = run("instance/select_service_contract_usages.sql", p)
            queues = run("instance/select_queue_settings.sql", p)
            (enabled,) = run("instance/select_broker_enabled.sql", p)[0]
            priorities = run("priorities/select_priorities.sql", p)
            (honor,) = run("priorities/select_honor_broker_priority.sql", p)[0]
        contract_map: dict[str, dict[str, tuple[bool, bool]]] = {c[0]: {} for c in contracts}
        for contract, mtype, by_initiator, by_target in usages:
            contract_map.setdefault(contract, {})[mtype] = (by_initiator, by_target)
        accepted: dict[str, set[str]] = {s[0]: set() for s in services}
        for service, contract in service_contracts:
            accepted.setdefault(service, set()).add(contract)
        return DatabaseCatalog(
            database_id=database_id,
            name=row[1],
            broker_instance=row[2],
            message_types={t[0]: t[1] for t in types},
            system_message_types=frozenset(t[0] for t in types if t[2]),
            contracts=contract_map,
            system_contracts=frozenset(c[0] for c in contracts if c[1]),
            services={s[0]: s[1] for s in services},
            service_contracts={k: frozenset(v) for k, v in accepted.items()},
            queues={
                q[0]: QueueSettings(bool(q[1]), bool(q[2]), q[3] is None or bool(q[3]))
                for q in queues
            },
            broker_enabled=bool(enabled),
            priorities=tuple((contract, local, remote, int(level))
                             for _, contract, local, remote, level in priorities),
            honor_broker_priority=bool(honor),
        )

    @property
    def max_message_size(self) -> int:
        if self._max_message_size is None:
            with self._store.lock:
                row = self._store.fetchone("SELECT max_message_size FROM instance_settings")
            self._max_message_size = int(row[0]) if row and row[0] is not None else 2**31 - 1
        return self._max_message_size

    def queue_settings(self, database_id: int, queue: str) -> QueueSettings:
        catalog = self.catalog(database_id)
        settings = catalog.queues.get(queue)
        if settings is None:
            raise NotFoundError(f"queue {queue!r} does not exist in database {catalog.name!r}")
        return settings

    def enabled_queue_settings(self, database_id: int, queue: str) -> QueueSettings:
        """The queue's settings for a RECEIVE: a disabled queue is refused (C3)."""
        settings = self.queue_settings(database_id, queue)
        if not settings.status:
            raise QueueDisabledError(
                f"the service queue {queue!r} of database {self.catalog(database_id).name!r} "
                "is disabled (STATUS = OFF); ALTER QUEUE ... WITH STATUS = ON")
        return settings

