"""Dynamic routing (SPEC R2.4, R8): the route requests the messaging engine sends, and what
happens when their dialogs end.

When routing answers R2.4 for a conversation (a route to the dynamic routing service
``SQL/ServiceBroker/BrokerConfiguration`` exists and nothing is pending for the service),
the conversation waits DELAYED like any other (R2.7) and :meth:`RouteRequests.request`
sends one route request in the same transaction:

- a row of ``route_requests`` (what routing reads: from now on R2.4 does not ask again for
  that service of that database, R8.2, however many conversations wait), and its dialog in
  ``route_request_dialogs`` (migrations/007); both survive a restart;
- a dialog from the system service ``SQL/ServiceBroker/BrokerConfigurationRequest`` (on the
  queue ``sys.BrokerConfigurationRequestQueue``, created in the database the first time it
  asks; both then show in sys.services and sys.service_queues) to the dynamic routing
  service on the contract ``.../BrokerConfigurationNotice``, carrying one ``MissingRoute``
  message that names the service (R8.1). It is routed like any conversation, so the
  configuration service may be in this instance or across the wire.

The configuration service answers by creating a route and ending the dialog, or ending it
WITH ERROR (pybroker/apps/configuration_service.py is a ready-made one). The dialog also
ends, with error -8489, if no answer comes within its lifetime (REQUEST_LIFETIME). Its end
lands in the system queue, and :meth:`RouteRequests.run` (from the delay/retry loop, which
runs at once when something arrives in that queue) then:

- ends this side of the dialog; an error (the service's, or the lifetime's) is recorded
  in sys.broker_events;
- keeps the route_requests row for a time-out (ANSWERED_TIMEOUT: C5's longest back-off,
  64 s scaled by retry_scale) and routes every waiting conversation again at once: with
  the route now there they leave; without one they stay DELAYED (during the time-out R2.4
  is skipped, so they meet R2.5 as when a request is pending);
- when the time-out has passed, drops the row and routes the waiting conversations again:
  those still without a route ask again (a new request, R8.2).

It imports nothing of the API: the engine hands it what it needs (the ``_Engine`` shape).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from pybroker.core.conversation.system_messages import (
    BROKER_CONFIGURATION_NOTICE,
    MISSING_ROUTE,
    ROUTE_REQUEST_QUEUE,
    ROUTE_REQUEST_SERVICE,
    missing_route_body,
)
from pybroker.core.routing.cache import DYNAMIC_ROUTING_SERVICE, CatalogChange
from pybroker.errors import ConversationError

if TYPE_CHECKING:  # pragma: no cover
    from contextlib import AbstractContextManager

    from pybroker.core.conversation.endpoint import ConversationEndpoint
    from pybroker.kernel.messaging.catalog import DatabaseCatalog
    from pybroker.kernel.messaging.unit_of_work import UnitOfWork

# Seconds, before retry_scale: how long a request dialog waits for its answer (then it ends
# with -8489 and counts as unanswered), and how long after an answer a service still
# without a route waits before it is asked about again (C5's longest back-off).
REQUEST_LIFETIME = 300.0
ANSWERED_TIMEOUT = 64.0

EVENT_CLASS = "Broker:Route Request"


class _Remote(Protocol):
    def event(self, event_class: str, subclass: str, peer: str | None,
              conversation_id: str | None, sequence: int | None, description: str) -> None: ...


class _Engine(Protocol):
    """What route requests need of the messaging engine (engine.py's Messaging): public
    names."""

    retry_scale: float
    remote: _Remote

    def unit_of_work(self) -> AbstractContextManager[UnitOfWork]: ...

    def catalog(self, database_id: int) -> DatabaseCatalog: ...

    def catalog_changed(self) -> None: ...

    def endpoint(self, handle: str, database_id: int | None = None) -> ConversationEndpoint: ...

    def begin_dialog(self, database_id: int, from_service: str, to_service: str,
                     contract: str, broker_instance: str | None, lifetime: int | None,
                     related_conversation_group: str | None) -> str: ...

    def send(self, database_id: int, handle: str, body: Any, message_type: str) -> int: ...

    def end(self, database_id: int, handle: str, error: int | None, description: str | None,
            cleanup: bool) -> None: ...

    def now(self) -> datetime: ...

    def note_deadline(self, uow: UnitOfWork, when: datetime | None) -> None: ...


class RouteRequests:
    """The route requests of one instance (see the module)."""

    def __init__(self, messaging: _Engine,
                 routing_changed: Callable[[CatalogChange], None]) -> None:
        self.m = messaging
        self._routing_changed = routing_changed
        # Whether route_request_dialogs may hold a row: the delay/retry loop reads the table
        # only then (an instance that never uses dynamic routing pays nothing).
        self.active = True

    def request(self, uow: UnitOfWork, database_id: int, service_name: str) -> None:
        """R2.4: ask the dynamic routing service for a route to ``service_name`` on behalf
        of database ``database_id``, unless a request for it is already outstanding."""
        if service_name == DYNAMIC_ROUTING_SERVICE:
            return  # never reached (R2.2 matches that route first); asking would loop
        m = self.m
        catalog = m.catalog(database_id)
        now = m.now()
        inserted = uow.sql("conversation/insert_route_request.sql", {
            "database_id": database_id, "service_name": service_name, "now": now})
        if not inserted:
            return  # R8.2: one outstanding request per service and database
        self.active = True
        self._routing_changed(CatalogChange(
            routes_of=catalog.name, route_services=frozenset([service_name])))
        self._ensure_requester(uow, catalog)
        lifetime = max(1, math.ceil(REQUEST_LIFETIME * m.retry_scale))
        handle = m.begin_dialog(database_id, ROUTE_REQUEST_SERVICE, DYNAMIC_ROUTING_SERVICE,
                                BROKER_CONFIGURATION_NOTICE, None, lifetime, None)
        uow.sql("conversation/insert_route_request_dialog.sql", {
            "database_id": database_id, "service_name": service_name,
            "conversation_handle": handle})
        m.send(database_id, handle, missing_route_body(service_name), MISSING_ROUTE)

    def _ensure_requester(self, uow: UnitOfWork, catalog: DatabaseCatalog) -> None:
        """The system service that sends route requests, and its queue, in the database
        (made the first time it asks, so databases that never do show neither)."""
        if ROUTE_REQUEST_SERVICE in catalog.services:
            return
        params = {"database_id": catalog.database_id, "now": self.m.now()}
        if ROUTE_REQUEST_QUEUE not in catalog.queues:
            uow.sql("instance/insert_queue.sql", {
                **params, "name": ROUTE_REQUEST_QUEUE, "status": True, "retention": False,
                "poison_message_handling": False})
        uow.sql("instance/insert_service.sql", {
            **params, "name": ROUTE_REQUEST_SERVICE, "queue_name": ROUTE_REQUEST_QUEUE})
        uow.catalog_written = True  # a rollback drops the catalog cache read meanwhile
        self.m.catalog_changed()
        self._routing_changed(CatalogChange(services=frozenset([ROUTE_REQUEST_SERVICE])))

    def run(self, uow: UnitOfWork, now: datetime) -> None:
        """R8.2, from the delay/retry loop: settle the request dialogs that ended, and drop
        the requests whose time-out passed; either way the waiting conversations are
        routed again when the loop's transaction commits."""
        if not self.active:
            return
        rows = uow.sql("conversation/select_route_request_dialogs.sql", {})
        self.active = bool(rows)
        for database_id, database_name, service_name, handle, retry_at in rows:
            key = {"database_id": database_id, "service_name": service_name}
            if handle is None:
                if retry_at is not None and retry_at <= now:
                    uow.sql("conversation/delete_route_request.sql", key)
                    uow.sql("conversation/delete_route_request_dialog.sql", key)
                    self._routing_changed(CatalogChange(
                        routes_of=database_name, route_services=frozenset([service_name])))
                    uow.retry_after_commit = True
                continue
            if self._settle(uow, database_id, database_name, service_name, handle):
                retry_at = now + timedelta(seconds=ANSWERED_TIMEOUT * self.m.retry_scale)
                uow.sql("conversation/update_route_request_ended.sql", {
                    **key, "retry_at": retry_at})
                self.m.note_deadline(uow, retry_at)
                uow.retry_after_commit = True

    def _settle(self, uow: UnitOfWork, database_id: int, database_name: str,
                service_name: str, handle: str) -> bool:
        """Whether the request dialog ``handle`` has ended; if so this side ends too, and
        an error is recorded as a broker event."""
        try:
            ep = self.m.endpoint(handle)
        except ConversationError:
            return True  # gone (cleaned up): nothing will answer it
        if ep.state not in ("DI", "ER", "CD"):
            return False  # still outstanding
        if ep.state == "ER":
            self.m.remote.event(
                EVENT_CLASS, "ended with error", None, ep.conversation_id, None,
                f"the route request of database {database_name!r} for service "
                f"{service_name!r} ended with error {ep.error_code}: "
                f"{ep.error_description}; conversations to the service stay DELAYED and "
                "it is asked about again after the time-out")
        if ep.state != "CD":
            self.m.end(database_id, handle, None, None, False)
        return True
