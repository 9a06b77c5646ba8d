"""A ready-made dynamic routing service (SPEC R8): answers route requests from a directory.

When a database has a route to ``SQL/ServiceBroker/BrokerConfiguration`` and a
conversation of it finds no route of its own, the broker sends that service a
``MissingRoute`` message naming the missing service (R2.4, R8.1;
pybroker/kernel/messaging/route_requests.py). :class:`ConfigurationService` is a handler for
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

    # a configuration service for databases of other instances too (below)
    ConfigurationService(directory, instances={
        app_broker_id: "/srv/app.duckdb",                  # served by `pybroker serve`
        shop_broker_id: ("pybroker://10.0.0.7:4100", token),   # a server's TCP port
    })

Where the route goes. As SQL Server's configuration services do, the handler creates the
route in the database that asked, found by the request dialog's far broker identifier:

- in a database of its own instance (wherever there the configuration service's own
  database is), through that instance's API, in the transaction that receives the request;
- in a database of another instance, through pybroker's client protocol, when
  ``instances`` says where that instance is served. It maps the requester's broker
  identifier (a mapping, or a callable from it; None or no entry: unknown) to an instance
  file served by another process on this machine (``pybroker serve FILE``: reached through
  FILE.sock), a ``pybroker://HOST:PORT`` address with its token as a pair
  ``(address, token)`` (the token is in the server's FILE.token), or an open
  :class:`~pybroker.Instance` (used as it is, never closed here). The service connects
  once per place and keeps the connection (``close()`` ends them); when the server went
  away since, it connects again once. It never opens a requester's file itself: that would
  lock its owner out of it, so a file nobody serves is unreachable;
- a request from an instance ``instances`` knows nothing of is ended WITH ERROR
  (NOT_IN_THIS_INSTANCE), which the requester records in sys.broker_events: the contract
  lets the configuration service send no reply but the end of the dialog, so without a way
  into the requester's routing table it cannot answer.

Order matters for R8.2: the requester routes its waiting conversations again when the
request dialog ends, so the route is committed in the requester's instance first (one
call through its server, its own transaction) and the END is committed after it, with
the receive, in the service's own transaction. If the route cannot be made there, the
dialog is ended WITH ERROR saying why (ROUTE_REFUSED: the requester's instance refused it;
REQUESTER_UNREACHABLE: no server answers where ``instances`` says, or the requesting
database is not in that instance), and the conversations wait for the next request. A
connection lost in the middle of the route's creation leaves the route made or not made
(the requester's transaction), never half made; when it was made and the dialog still
ends WITH ERROR, the requester's conversations leave along it when it routes them again.
While it waits for the requester's server, the service holds its own transaction open:
the requester's server should be near (a client connection waits up to 30 s).

The directory is one of: a mapping of service names to an address (``'LOCAL'``,
``'TRANSPORT'`` or ``tcp://host:port``) or to a mapping with ``address`` and optionally
``broker_instance`` and ``mirror_address``; the path of a JSON file holding such a mapping
(read again at every call, so edits apply); a Database (of any instance) whose routes that
name the service are copied (the first live one by name); or a callable from a service name
to a :class:`RouteAnswer` or None.

The handler has the shape of an activation procedure (``handler(db) -> None``): it
receives in a transaction, one conversation group at a time, until the queue is empty, and
each request's end commits with its receive (and, for a database of its own instance, its
route too).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pybroker.api.instance import Instance
from pybroker.api.served.client import URL_SCHEME, ClientInstance, connect_served, connect_url
from pybroker.core.conversation.system_messages import (
    BROKER_CONFIGURATION_NOTICE,
    END_DIALOG,
    ERROR,
    MISSING_ROUTE,
    parse_missing_route,
)
from pybroker.core.routing.cache import DYNAMIC_ROUTING_SERVICE
from pybroker.core.routing.definition import MAX_NAME_LENGTH, check_lifetime, validate_route
from pybroker.errors import BrokerError, InvalidArgumentError, ServerGoneError

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.api.database import Database

DEFAULT_QUEUE = "BrokerConfigurationQueue"
DEFAULT_LIFETIME = 3600  # seconds: the LIFETIME of a route the handler creates
ROUTE_NAME_PREFIX = "BrokerConfiguration:"

# Application error codes of an unanswered request (C2: positive).
NO_SERVICE_NAMED = 1  # the message names no service
NOT_IN_THIS_INSTANCE = 2  # the requesting database is in an instance ``instances`` lacks
NO_ROUTE_KNOWN = 3  # the directory knows no route to the service
ROUTE_REFUSED = 4  # the route breaks a rule of R10.2, or the requester's instance refused it
REQUESTER_UNREACHABLE = 5  # no server answers where ``instances`` says, or no such database

__all__ = [
    "DEFAULT_LIFETIME",
    "DEFAULT_QUEUE",
    "DYNAMIC_ROUTING_SERVICE",
    "ConfigurationService",
    "Requester",
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
# Where another instance is served: its file (FILE.sock beside it), (pybroker://HOST:PORT,
# token), or an open Instance.
Requester = str | Path | tuple[str, str | None] | Instance
OPEN_INSTANCES = (Instance, ClientInstance)  # an open instance: embedded, or a client's
Instances = Mapping[str, Requester] | Callable[[str], Requester | None]


class ConfigurationService:
    """A dynamic routing service's handler: ``handler(db)`` answers every route request
    queued on ``queue`` of ``db`` (see the module for the directory's forms).
    ``lifetime`` is the LIFETIME, in seconds, of each route it creates (None: never
    expires); when it passes, the next conversation to the service asks again.
    ``instances`` says where the instances of other requesting databases are served
    (the module says how); ``close()`` ends the connections made to them."""

    def __init__(self, directory: Directory, *, queue: str = DEFAULT_QUEUE,
                 lifetime: int | None = DEFAULT_LIFETIME,
                 instances: Instances | None = None) -> None:
        self._lookup = _directory(directory)
        self.queue = queue
        self.lifetime = check_lifetime(lifetime)
        self._where = _instances(instances)
        self._connections: dict[Any, Instance] = {}  # place -> the client connected there
        self._connections_lock = threading.Lock()

    def close(self) -> None:
        """End the connections made to other instances (open Instances given in
        ``instances`` stay open: they are the caller's)."""
        with self._connections_lock:
            connections, self._connections = self._connections, {}
        for client in connections.values():
            client.close()

    def __enter__(self) -> ConfigurationService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        broker_instance = conversation.far_broker_instance
        requester = _database_of(db.instance, broker_instance)
        place = None
        if requester is None:
            try:
                place = self._place(broker_instance)
            except BrokerError as exc:  # instances= that cannot say: this request fails only
                conversation.end(REQUESTER_UNREACHABLE, (
                    f"cannot create a route to {service_name!r} for database "
                    f"{broker_instance}: instances= cannot say where it is served: {exc}"))
                return
            if place is None:
                conversation.end(NOT_IN_THIS_INSTANCE, (
                    f"cannot create a route to {service_name!r} for database "
                    f"{broker_instance}: it is not in the configuration service's "
                    "instance, and the service's instances= does not say where it is "
                    "served; add it there, or run a configuration service in the "
                    "requester's own instance"))
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
        if requester is not None:
            self._put_route(requester, name, service_name, answer)
        else:
            assert place is not None and broker_instance is not None
            problem = self._put_route_there(place, broker_instance, name, service_name,
                                            answer)
            if problem is not None:  # R8.2: the requester hears why, and asks again
                conversation.end(*problem)
                return
        conversation.end()

    def _put_route(self, requester: Database, name: str, service_name: str,
                   answer: RouteAnswer) -> None:
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

    # -- requesters in other instances -------------------------------------------------

    def _place(self, broker_instance: str | None) -> Requester | None:
        if broker_instance is None:
            return None
        place = self._where(broker_instance)
        if place is None or isinstance(place, OPEN_INSTANCES):
            return place
        return _checked_place(place, f"instances[{broker_instance!r}]")

    def _put_route_there(self, place: Requester, broker_instance: str, name: str,
                         service_name: str, answer: RouteAnswer) -> tuple[int, str] | None:
        """Create the route in the requesting database of the instance served at
        ``place`` (committed there before this returns); None when done, or the error
        code and description to end the request with."""
        where = _describe(place)
        for attempt in (1, 2):  # a server restarted since the last request: once again
            try:
                instance = self._connection(place, fresh=attempt == 2)
            except BrokerError as exc:
                return REQUESTER_UNREACHABLE, (
                    f"cannot create a route to {service_name!r} for database "
                    f"{broker_instance}: cannot connect to its instance at {where}: {exc}")
            try:
                requester = _database_of(instance, broker_instance)
                if requester is None:
                    return REQUESTER_UNREACHABLE, (
                        f"cannot create a route to {service_name!r} for database "
                        f"{broker_instance}: the instance at {where} holds no database "
                        "with that broker identifier; correct the configuration "
                        "service's instances=")
                self._put_route(requester, name, service_name, answer)
                return None
            except ServerGoneError as exc:
                gone = exc
                if isinstance(place, OPEN_INSTANCES):  # the caller's: not this service's to renew
                    break
            except BrokerError as exc:
                return ROUTE_REFUSED, (
                    f"the instance at {where} refused the route to {service_name!r} for "
                    f"database {broker_instance}: {exc}")
        return REQUESTER_UNREACHABLE, (
            f"cannot create a route to {service_name!r} for database {broker_instance}: "
            f"the connection to its instance at {where} is gone: {gone}")

    def _connection(self, place: Requester, *, fresh: bool) -> Instance:
        if isinstance(place, OPEN_INSTANCES):
            return place
        key = _place_key(place)
        with self._connections_lock:
            client = self._connections.pop(key, None) if fresh else self._connections.get(key)
        if client is not None:
            if not fresh:
                return client
            client.close()
        client = _connect(place)
        with self._connections_lock:
            earlier = self._connections.setdefault(key, client)
        if earlier is not client:  # another thread connected meanwhile: keep one
            client.close()
        return earlier


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


def _database_of(instance: Instance, broker_instance: str | None) -> Database | None:
    if broker_instance is None:
        return None
    for candidate in instance.databases():
        if str(candidate.broker_instance).lower() == broker_instance.lower():
            return candidate
    return None


def _instances(instances: Instances | None) -> Callable[[str], Requester | None]:
    if instances is None:
        return lambda broker_instance: None
    if isinstance(instances, Mapping):
        entries = {}
        for key, place in instances.items():
            if not isinstance(key, str):
                raise InvalidArgumentError(
                    "instances maps broker identifiers (text, as in "
                    f"sys.databases.service_broker_guid) to where they are served; not {key!r}")
            entries[key.lower()] = place if isinstance(place, OPEN_INSTANCES) else (
                _checked_place(place, f"instances[{key!r}]"))
        return lambda broker_instance: entries.get(broker_instance.lower())
    if callable(instances):
        return instances
    raise InvalidArgumentError(
        "instances is a mapping of broker identifiers to where their instance is served, "
        f"or a callable from a broker identifier to that; not {instances!r:.60}")


def _checked_place(place: Any, what: str) -> Requester:
    """``place`` as the service connects to it, or InvalidArgumentError saying why not."""
    if isinstance(place, Path) or (isinstance(place, str) and place):
        return place
    if (isinstance(place, (tuple, list)) and len(place) == 2 and isinstance(place[0], str)
            and place[0].startswith(URL_SCHEME)
            and (place[1] is None or isinstance(place[1], str))):
        return (place[0], place[1])
    if isinstance(place, (tuple, list)):  # never the token: this may end up in an event
        place = f"a {len(place)}-item {type(place).__name__} beginning {place[:1]!r:.60}"
    else:
        place = f"{place!r:.80}"
    raise InvalidArgumentError(
        f"{what} is {place}; it is an instance file served by another process, a pair "
        "(pybroker://HOST:PORT, token), or an open Instance")


def _place_key(place: Requester) -> Any:
    if isinstance(place, tuple):
        return place
    text = str(place)
    return text if text.startswith(URL_SCHEME) else str(Path(text).absolute())


def _describe(place: Requester) -> str:
    if isinstance(place, tuple):
        return place[0]
    return repr(place) if isinstance(place, OPEN_INSTANCES) else str(place)


def _connect(place: Requester) -> Instance:
    """A client of the server at ``place``; never the file itself opened here."""
    if isinstance(place, tuple):
        return connect_url(place[0], token=place[1])
    if str(place).startswith(URL_SCHEME):
        return connect_url(str(place), token=None)
    client = connect_served(place)
    if client is None:
        raise ServerGoneError(
            f"no process serves {str(place)!r} (start `pybroker serve {place}`, or give "
            "its pybroker://HOST:PORT address and token)")
    return client


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
