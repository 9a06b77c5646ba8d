"""Where a fragment that arrived from the network goes (R1.2, R4, R6, R7, R9): a database of
this instance, another instance (forwarding), or nowhere, and why. Decided on the routing
engine's memory before a batch of arrivals enters a unit of work (arrivals.py), so that what
is only passed on touches no DuckDB (R7.3).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Protocol

from pybroker.core.conversation.model import Router
from pybroker.core.routing.cache import OUTSIDE
from pybroker.core.wire.frames import MessageFragment
from pybroker.core.wire.mirrored_route import pair_key
from pybroker.kernel.messaging.catalog_cache import CatalogCache

STATUS_FORWARDING_OFF = (
    "The target instance could not deliver the message: no service of that name is in the "
    "instance and message forwarding is off there.")
STATUS_BROKER_NOT_HERE = (
    "The target instance could not deliver the message: the service is there, but no "
    "database there has broker identifier '{}' and message forwarding is off there.")
STATUS_ROUTE_TO_ITSELF = (
    "The target instance could not forward the message: msdb's route for the service leads "
    "back to the instance itself.")
STATUS_ROUTE_REQUESTED = (  # R2.4 in msdb's table: the sender's retry finds the route
    "The target instance has no route to the service yet: it asked its dynamic routing "
    "service for one (a route request); the message is sent again later.")
STATUS_TARGET_BROKER_DISABLED = (  # ALTER DATABASE ... SET DISABLE_BROKER there
    "The target database '{}' could not take the message: Service Broker is disabled in "
    "it (ALTER DATABASE ... SET DISABLE_BROKER); the message is sent again until the "
    "broker is enabled.")
STATUS_NOT_PRINCIPAL = (  # R9.3: the sender asks the partner whether it is principal now
    "The target database is the mirror of a mirrored pair, not its principal: it takes no "
    "message; send to its partner.")


@dataclass(frozen=True, slots=True)
class Forward:
    """R7: the arrival goes on to another instance, at ``address``."""

    address: str


@dataclass(frozen=True, slots=True)
class AskRoute:
    """R2.4 in msdb's table: msdb asks the dynamic routing service for ``service``."""

    service: str


@dataclass(frozen=True, slots=True)
class Picked:
    """R4.2: no broker identifier named, the service is in ``database_id``, one of its
    databases picked arbitrarily; a database that holds the conversation and has the service
    comes first (Arrivals._holder). A pick that is a mirror (R9) is refused after that."""

    database_id: int


class _Wire(Protocol):
    def is_own_address(self, address: str) -> bool: ...


def destination_of(catalogs: CatalogCache, route: Router, wire: _Wire | None,
                   mirroring_roles: dict[int, str],
                   f: MessageFragment) -> int | str | Forward | AskRoute | Picked:
    """The database the fragment goes to (an id, or R4.2's pick), the next hop it is
    forwarded to, the route request msdb makes for it, or why it cannot be delivered (a
    STATUS_ text): routed by ``route`` (the instance's), the databases read from
    ``catalogs``. ``mirroring_roles``: database id -> PRINCIPAL or MIRROR (R9)."""
    if not f.from_initiator and f.to_broker_instance is not None:
        found = _database_of(catalogs, f.to_broker_instance)
        if found is not None:  # R6: a reply to a conversation begun here
            return STATUS_NOT_PRINCIPAL if mirroring_roles.get(found) == "MIRROR" else found
    decision = route(f.to_service, broker_instance=f.to_broker_instance,
                     origin=OUTSIDE)  # R1.2: msdb's table
    if decision.outcome == "deliver":
        found = catalogs.catalog_named(decision.database).database_id
        if decision.locate_step == "R4.2":  # a mirror is refused once _holder has looked
            return Picked(found)
        return STATUS_NOT_PRINCIPAL if mirroring_roles.get(found) == "MIRROR" else found
    if decision.route_request_due:
        return AskRoute(f.to_service)
    if decision.outcome == "send":  # R3.6 let it through: forwarding is on
        address = decision.address or ""
        if wire is not None and wire.is_own_address(address):
            return STATUS_ROUTE_TO_ITSELF
        if decision.mirror_address:  # R9: the pair's principal, as a sender's would
            return Forward(pair_key(address, decision.mirror_address))
        return Forward(address)
    if f.to_broker_instance is not None and any(
            f.to_service in catalogs.catalog(i).services for i in _database_ids(catalogs)):
        return STATUS_BROKER_NOT_HERE.format(f.to_broker_instance)
    return STATUS_FORWARDING_OFF


def _database_ids(catalogs: CatalogCache) -> list[int]:
    with contextlib.suppress(Exception):
        return list(catalogs.database_ids.values())
    return []


def _database_of(catalogs: CatalogCache, broker_instance: str) -> int | None:
    for database_id in _database_ids(catalogs):
        if catalogs.catalog(database_id).broker_instance == broker_instance:
            return database_id
    return None
