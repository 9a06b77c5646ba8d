"""The route DDL (SPEC R10), a service composed on the kernel: CREATE, ALTER and DROP ROUTE
on a database's routing table, as ``Database.create_route()`` and the rest, and as
``Database.execute()`` runs the statements of pybroker.core.tsql.route_ddl."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pybroker.core.routing.cache import CatalogChange
from pybroker.core.routing.definition import (
    RouteDefinition,
    check_lifetime,
    check_name,
    validate_route,
)
from pybroker.errors import BrokerError, NotFoundError, RouteDefinitionError
from pybroker.kernel.catalog_objects import Route

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.kernel import DatabaseRef, Kernel

ROUTE_CLAUSES = ("service_name", "broker_instance", "lifetime", "address", "mirror_address")


class RouteDDL:
    """The routes of the instance's databases."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._store = kernel.store

    # -- routes --------------------------------------------------------------------------

    def create_route(
        self, database: DatabaseRef,
        name: str,
        *,
        service_name: str | None = None,
        broker_instance: str | None = None,
        address: str,
        mirror_address: str | None = None,
        lifetime: int | None = None,
    ) -> Route:
        """CREATE ROUTE (R10): lifetime in seconds from now; None never expires."""
        definition = validate_route(
            name, address=address, service_name=service_name,
            broker_instance=broker_instance, lifetime=lifetime, mirror_address=mirror_address,
        )
        with self.kernel.write(self._route_change(database, definition.service_name)):
            rows = self._store.run("instance/select_route_name_any_case.sql", {
                "database_id": database.database_id, "name": definition.name})
            if rows:
                same = rows[0][0] == definition.name
                raise RouteDefinitionError(
                    f"route {definition.name!r} already exists in database {database.name!r}"
                    + ("" if same else f" as {rows[0][0]!r}")
                    + " (route names are unique per database"
                    + (")" if same else ", without regard to case)"),
                    rule="R10.2",
                )
            self._store.run("instance/insert_route.sql", self._route_params(database, definition))
        return self.route(database, definition.name)

    def alter_route(self, database: DatabaseRef, name: str, **changes: Any) -> Route:
        """The work of ``Database.alter_route`` (its docstring says what it does)."""
        unknown = set(changes) - set(ROUTE_CLAUSES)
        if unknown:
            raise BrokerError(
                f"ALTER ROUTE cannot change {', '.join(sorted(unknown))}; "
                f"it changes {', '.join(ROUTE_CLAUSES)}"
            )
        if not changes:
            raise BrokerError("ALTER ROUTE needs at least one clause to change")
        current = self._find_route(database, name)
        if current is None:
            raise NotFoundError(f"route {name!r} does not exist in database {database.name!r}")
        new_service = changes.get("service_name", current.remote_service_name) or None
        if not isinstance(new_service, str):
            new_service = None  # refused below; meanwhile void as for a wildcard
        with self.kernel.write(
            self._route_change(database, current.remote_service_name, new_service)
        ):
            current = self._find_route(database, name)
            if current is None:
                raise NotFoundError(f"route {name!r} does not exist in database {database.name!r}")
            merged: dict[str, Any] = {
                "service_name": current.remote_service_name,
                "broker_instance": current.broker_instance,
                "address": current.address,
                "mirror_address": current.mirror_address,
            }
            for clause in ("service_name", "broker_instance", "mirror_address"):
                if clause in changes:
                    merged[clause] = changes[clause] if changes[clause] != "" else None
            if "address" in changes:
                merged["address"] = changes["address"]
            definition = validate_route(
                name, lifetime=changes.get("lifetime"), **merged
            )
            params = self._route_params(database, definition)
            del params["now"]  # an ALTER keeps create_date
            if "lifetime" not in changes:
                params["lifetime"] = current.lifetime  # R10.4: keep the expiry unless given
            self._store.run("instance/update_route.sql", params)
        return self.route(database, name)

    def drop_route(self, database: DatabaseRef, name: str) -> None:
        """DROP ROUTE; dropping a route in use is allowed (R10.5)."""
        dropped = self._find_route(database, name)
        if dropped is None:
            raise NotFoundError(f"route {name!r} does not exist in database {database.name!r}")
        with self.kernel.write(self._route_change(database, dropped.remote_service_name)):  # R10.5
            deleted = self._store.run(
                "instance/delete_route.sql", {"database_id": database.database_id, "name": name}
            )
            if not deleted:
                raise NotFoundError(f"route {name!r} does not exist in database {database.name!r}")

    def routes(self, database: DatabaseRef) -> list[Route]:
        rows = self._store.run("instance/select_routes.sql", {"database_id": database.database_id})
        return [self._route_from_row(database, row) for row in rows]

    def route(self, database: DatabaseRef, name: str) -> Route:
        found = self._find_route(database, name)
        if found is None:
            raise NotFoundError(f"route {name!r} does not exist in database {database.name!r}")
        return found

    # -- internals -----------------------------------------------------------------------

    def _route_change(self, database: DatabaseRef, *service_names: str | None) -> CatalogChange:
        """A route of this database naming these services (None: a wildcard) changed."""
        return CatalogChange(routes_of=database.name, route_services=frozenset(service_names))

    def _find_route(self, database: DatabaseRef, name: str) -> Route | None:
        check_name("route", name)
        rows = self._store.run(
            "instance/select_route.sql", {"database_id": database.database_id, "name": name}
        )
        return self._route_from_row(database, rows[0]) if rows else None

    def _route_from_row(self, database: DatabaseRef, row: tuple[Any, ...]) -> Route:
        name, route_id, service, broker, lifetime, address, mirror = row
        expired = lifetime is not None and lifetime <= self.kernel.now()
        return Route(name, route_id, service, broker, lifetime, address, mirror, expired)

    def _route_params(self, database: DatabaseRef, definition: RouteDefinition) -> dict[str, Any]:
        now = self.kernel.now()
        lifetime = check_lifetime(definition.lifetime)
        return {
            "database_id": database.database_id,
            "name": definition.name,
            "remote_service_name": definition.service_name,
            "broker_instance": definition.broker_instance,
            "lifetime": None if lifetime is None else now + timedelta(seconds=lifetime),
            "address": definition.address,
            "mirror_address": definition.mirror_address,
            "now": now,
        }
