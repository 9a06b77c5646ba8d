"""A ready-made dynamic routing service (SPEC R8): answers route requests from a directory.

When a database has a route to ``SQL/ServiceBroker/BrokerConfiguration`` and a
conversation of it finds no route of its own, the broker sends that service a
``MissingRoute`` message naming the missing service (R2.4, R8.1;
pybroker/conversation/route_requests.py). :class:`ConfigurationService` is a handler for
the queue of that service: for each request it looks the service up in a directory the
user supplies, creates a route with a LIFETIME in the database that asked, and ends the
request dialog; when the directory knows no route it ends the dialog WITH ERROR, and the
conversations that wait stay DELAYED until the broker asks again (R8.2)::

    config = inst.create_database("config")
    service = ConfigurationService({"Orders": "tcp://orders.example:4022"})
    service.install(config)                 # queue + service, accepting the contract
    app.create_route("RouteRequests", service_name=DYNAMIC_ROUTING_SERVICE,
                     address="LOCAL")       # app's missing services: ask config
    ...
    service(config)                         # answer what is queued (an activation body)
    serve(config, service, stop=event)      # or: keep answering until ``stop`` is set

Where the route goes. As SQL Server's configuration services do, the handler creates the
route in the database that asked, through the API of its own instance: so it answers only
requests from databases of the instance it runs in (found by the request dialog's far
broker identifier), wherever in that instance the configuration service's own database is.
A request from another instance cannot be answered that way (that instance's routing table
is out of reach, and the contract lets the configuration service send no reply but the
end of the dialog): it is ended WITH ERROR (NOT_IN_THIS_INSTANCE), which the requester
records in sys.broker_events. So run a configuration service in every instance that routes
dynamically (its directory may be shared: a JSON file, or another instance's routes).

The directory is one of: a mapping of service names to an address (``'LOCAL'``,
``'TRANSPORT'`` or ``tcp://host:port``) or to a mapping with ``address`` and optionally
``broker_instance`` and ``mirror_address``; the path of a JSON file holding such a mapping
(read again at every call, so edits apply); a Database (of any instance) whose routes that
name the service are copied (the first live one by name); or a callable from a service name
to a :class:`RouteAnswer` or None.

The handler has the shape of an activation procedure (``handler(db) -> None``): it
receives in a transaction, one conversation group at a time, until the queue is empty, and
each request's route and end commit together with its receive.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pybroker.conversation.system_messages import (
    BROKER_CONFIGURATION_NOTICE,
    END_DIALOG,
    ERROR,
    MISSING_ROUTE,
    parse_missing_route,
)
from pybroker.errors import BrokerError, InvalidArgumentError
from pybroker.routing.cache import DYNAMIC_ROUTING_SERVICE
from pybroker.routing.definition import MAX_NAME_LENGTH, check_lifetime, validate_route

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.instance import Database

DEFAULT_QUEUE = "BrokerConfigurationQueue"
DEFAULT_LIFETIME = 3600  # seconds: the LIFETIME of a route the handler creates
ROUTE_NAME_PREFIX = "BrokerConfiguration:"

# Application error codes of an unanswered request (C2: positive).
NO_SERVICE_NAMED = 1  # the message names no service
NOT_IN_THIS_INSTANCE = 2  # the requesting database is in another instance
NO_ROUTE_KNOWN = 3  # the directory knows no route to the service
ROUTE_REFUSED = 4  # the directory's route breaks a rule of R10.2

__all__ = [
    "DEFAULT_LIFETIME",
    "DEFAULT_QUEUE",
    "DYNAMIC_ROUTING_SERVICE",
    "ConfigurationService",
    "RouteAnswer",
    "serve",
]


@dataclass(frozen=True, slots=True)
class RouteAnswer:
    """What the directory says of a service: the route to create for it."""

    address: str
    broker_instance: str | None = None
    mirror_address: str | None = None


Directory = (
    Mapping[str, Any] | str | Path | Callable[[str], RouteAnswer | None] | Any
)


class ConfigurationService:
    """A dynamic routing service's handler: ``handler(db)`` answers every route request
    queued on ``queue`` of ``db`` (see the module for the directory's forms).
    ``lifetime`` is the LIFETIME, in seconds, of each route it creates (None: never
    expires); when it passes, the next conversation to the service asks again."""

    def __init__(self, directory: Directory, *, queue: str = DEFAULT_QUEUE,
                 lifetime: int | None = DEFAULT_LIFETIME) -> None:
        self._lookup = _directory(directory)
        self.queue = queue
        self.lifetime = check_lifetime(lifetime)

    def install(self, db: Database) -> None:
        """Create the queue and the service ``SQL/ServiceBroker/BrokerConfiguration`` (on
        the contract ``.../BrokerConfigurationNotice``) in ``db``, unless they exist."""
        if not any(q.name == self.queue for q in db.queues()):
            db.create_queue(self.queue)
        if not any(s.name == DYNAMIC_ROUTING_SERVICE for s in db.services()):
            db.create_service(DYNAMIC_ROUTING_SERVICE, self.queue,
                              [BROKER_CONFIGURATION_NOTICE])

    def lookup(self, service_name: str) -> RouteAnswer | None:
        """The directory's answer for ``service_name``."""
        return self._lookup(service_name)

    def __call__(self, db: Database) -> None:
        """Answer every request queued now, each group in its own transaction."""
        while self.answer_one(db):
            pass

    def answer_one(self, db: Database) -> bool:
        """Receive one conversation group and answer it; False when the queue was empty."""
        with db.transaction():
            messages = db.receive(self.queue, max_messages=100)
            for message in messages:
                conversation = db.conversation(message.conversation_handle)
                if message.message_type_name == MISSING_ROUTE:
                    self._answer(db, conversation, message.message_body)
                elif message.message_type_name in (END_DIALOG, ERROR) and (
                        conversation.state not in ("CD", "DO")):
                    conversation.end()
        return bool(messages)

    def _answer(self, db: Database, conversation: Any, body: bytes) -> None:
        """Create the route the request asks for and end its dialog, or end it WITH
        ERROR saying why not (R8.2)."""
        if conversation.state in ("CD", "DO", "ER"):
            return
        service_name = parse_missing_route(body)
        if service_name is None:
            conversation.end(NO_SERVICE_NAMED, "the MissingRoute message names no service "
                             "(<SERVICE_NAME> is missing or empty)")
            return
        requester = _database_of(db, conversation.far_broker_instance)
        if requester is None:
            conversation.end(NOT_IN_THIS_INSTANCE, (
                f"cannot create a route to {service_name!r} for database "
                f"{conversation.far_broker_instance}: it is not in the configuration "
                "service's instance; run a configuration service in the requester's own "
                "instance"))
            return
        try:
            answer = self._lookup(service_name)
        except BrokerError as exc:  # a directory that cannot say: this request fails only
            conversation.end(NO_ROUTE_KNOWN, f"the directory cannot say: {exc}")
            return
        if answer is None:
            conversation.end(NO_ROUTE_KNOWN,
                             f"the directory knows no route to service {service_name!r}")
            return
        name = route_name(service_name)
        try:
            validate_route(name, address=answer.address, service_name=service_name,
                           broker_instance=answer.broker_instance,
                           mirror_address=answer.mirror_address, lifetime=self.lifetime)
        except BrokerError as exc:
            conversation.end(ROUTE_REFUSED,
                             f"the directory's route to {service_name!r} is refused: {exc}")
            return
        clauses = {"service_name": service_name, "address": answer.address,
                   "broker_instance": answer.broker_instance or "",
                   "mirror_address": answer.mirror_address or ""}
        if any(r.name == name for r in requester.routes()):
            if self.lifetime is not None:
                clauses["lifetime"] = self.lifetime
            requester.alter_route(name, **clauses)
        else:
            requester.create_route(
                name, service_name=service_name, address=answer.address,
                broker_instance=answer.broker_instance,
                mirror_address=answer.mirror_address, lifetime=self.lifetime)
        conversation.end()


def route_name(service_name: str) -> str:
    """The name of the route the handler creates for ``service_name`` (a digest of it when
    the name would be too long)."""
    name = ROUTE_NAME_PREFIX + service_name
    if len(name) <= MAX_NAME_LENGTH:
        return name
    return ROUTE_NAME_PREFIX + hashlib.sha256(service_name.encode()).hexdigest()


def serve(db: Database, handler: Callable[[Database], None], *,
          stop: threading.Event | None = None, poll: float = 1.0,
          rounds: int | None = None) -> int:
    """Run ``handler(db)`` until ``stop`` is set (or ``rounds`` times), waiting up to
    ``poll`` seconds between rounds; returns the rounds run."""
    done = 0
    while (stop is None or not stop.is_set()) and (rounds is None or done < rounds):
        handler(db)
        done += 1
        if stop is not None:
            stop.wait(poll)
        elif rounds is None or done < rounds:
            threading.Event().wait(poll)
    return done


def _database_of(db: Database, broker_instance: str | None) -> Database | None:
    if broker_instance is None:
        return None
    for candidate in db._instance.databases():
        if candidate.broker_instance == broker_instance:
            return candidate
    return None


def _directory(directory: Directory) -> Callable[[str], RouteAnswer | None]:
    if isinstance(directory, Mapping):
        entries = dict(directory)
        return lambda service: _answer_from(service, entries.get(service))
    if isinstance(directory, (str, Path)):
        path = Path(directory)
        return lambda service: _answer_from(service, _read_json(path).get(service))
    if hasattr(directory, "routes") and hasattr(directory, "broker_instance"):
        return lambda service: _answer_from_routes(directory, service)
    if callable(directory):
        return directory
    raise InvalidArgumentError(
        "a directory is a mapping of service names to addresses, the path of a JSON file "
        f"holding one, a Database whose routes to copy, or a callable; not {directory!r:.60}")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(
            f"cannot read the directory {str(path)!r}: {exc}; it is a JSON object of service "
            "names to addresses") from exc
    if not isinstance(found, dict):
        raise InvalidArgumentError(
            f"the directory {str(path)!r} holds a JSON {type(found).__name__}; it is an "
            "object of service names to addresses")
    return found


def _answer_from(service: str, entry: Any) -> RouteAnswer | None:
    if entry is None:
        return None
    if isinstance(entry, RouteAnswer):
        return entry
    if isinstance(entry, str):
        return RouteAnswer(entry)
    if isinstance(entry, Mapping) and isinstance(entry.get("address"), str):
        return RouteAnswer(entry["address"], entry.get("broker_instance"),
                           entry.get("mirror_address"))
    raise InvalidArgumentError(
        f"the directory's entry for {service!r} is neither an address nor a mapping with "
        f"'address': {entry!r:.80}")


def _answer_from_routes(db: Database, service: str) -> RouteAnswer | None:
    for route in sorted(db.routes(), key=lambda r: r.name):
        if route.remote_service_name == service and not route.is_expired:
            return RouteAnswer(route.address, route.broker_instance, route.mirror_address)
    return None
