"""A client of a served instance: proxies with the API of Instance, Database and
Conversation whose every call runs in the serving process (pybroker.server.session).

``pybroker.connect(FILE)`` returns a ClientInstance when another process serves FILE
(``pybroker serve FILE``, or pybroker.server.server.serve_clients), and
``pybroker.connect("pybroker://host:port", token=...)`` one over TCP. The proxies are
classes of their own with the shapes the embedded classes have too (pybroker.api.protocols:
BrokerInstance, BrokerDatabase, BrokerConversation), and each method is built from the
whitelist (calls.CALLS) with the embedded method's signature and docstring: a call the
embedded API would refuse for its arguments' shape raises the same TypeError here, before
anything is sent. A public name of the embedded class that the client cannot run (the
broker endpoint, activation) or that the whitelist does not name raises ServerError
saying so. Received Messages, Routes,
decisions and the rest are the embedded dataclasses, and ``sql()`` gives a DuckDB relation
as embedded (pybroker.api.served.rows); errors are the same BrokerError subclasses with the
same messages.

Each thread of the client has its own connection, so its own session and transaction,
as each thread of an embedded application has its own transaction. When the server goes
away every call raises ServerGoneError; a new ``connect`` works when it is back.

Every call is one round trip, except a SEND inside a transaction on a conversation that
already sent in that transaction: its sequence number is the last one plus one (the
transaction holds the instance's lock from its first SEND to its end, so nothing else
sends on the conversation meanwhile), so the client returns it at once and pipelines the
call (protocol PIPELINED), buffered and written with the next call that waits for an
answer. The server runs the calls in order and checks each predicted number; an error of
such a SEND surfaces at the next call or at COMMIT, and the whole transaction is rolled
back (pybroker.server.session).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import itertools
import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb

from pybroker.api.conversation import Conversation
from pybroker.api.database import Database
from pybroker.api.instance import Instance
from pybroker.api.served import calls, protocol, rows
from pybroker.api.served.calls import CONVERSATION, DATABASE, INSTANCE, TRANSACTION
from pybroker.api.served.paths import socket_path_for, unix_address
from pybroker.api.served.protocol import (
    CALL_METHOD,
    GET_PROPERTY,
    SET_PROPERTY,
    Failure,
    FrameReader,
    Record,
    Refused,
    Result,
    Welcome,
)
from pybroker.errors import BrokerError, InvalidArgumentError, ServerError, ServerGoneError

URL_SCHEME = "pybroker://"
AHEAD_BYTES = 256 * 1024  # pipelined frames buffered before they are written anyway
KNOWN_CONVERSATIONS = 256  # the conversations sent on lately whose numbers a client asks


class _Link:
    """One connection to the server: one session, one call at a time."""

    def __init__(self, sock: socket.socket, where: str, token: str | None,
                 read_only: bool) -> None:
        self.sock = sock
        self.where = where
        self.reader = FrameReader()
        self.ids = itertools.count(1)
        self.broken: str | None = None
        self.depth = 0  # transaction levels this client began and did not end yet
        # inside a transaction: the sequence number of each conversation's next SEND,
        # (database name, handle) -> number, from the server's "sequences" step or the
        # conversation's last SEND in the transaction; and the databases asked already
        self.next_sequence: dict[tuple[Any, ...], int] = {}
        self.asked: set[Any] = set()
        # the conversations this client sent on lately, the ones it asks about
        self.known: dict[tuple[Any, ...], None] = {}
        self.ahead = bytearray()  # pipelined frames not written yet
        try:
            sock.settimeout(30.0)  # the handshake; calls then wait as long as they run
            sock.sendall(protocol.hello(token, read_only, f"pybroker client pid {os.getpid()}"))
            event = self._next()
        except OSError as exc:
            sock.close()
            raise ServerGoneError(f"the server for {where} did not answer: {exc}") from None
        except BaseException:
            sock.close()
            raise
        if isinstance(event, Refused):
            sock.close()
            raise calls.rebuild_error(event.error_class, event.message, {})
        if not isinstance(event, Welcome):
            sock.close()
            raise ServerError(f"the server for {where} did not welcome this client")
        self.welcome = event
        self.reader.max_frame = max(event.max_frame, protocol.DEFAULT_MAX_FRAME)
        sock.settimeout(None)

    def _next(self) -> protocol.Event:
        while (event := self.reader.next_event()) is None:
            data = self.sock.recv(protocol.RECV_BYTES)
            if not data:
                raise ConnectionResetError("the server closed the connection")
            self.reader.feed(data)
        return event

    def call(self, target: tuple[Any, ...], kind: str, method: str,
             args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        if self.broken is not None:
            raise ServerGoneError(self.broken)
        call_id = next(self.ids)
        try:
            data = protocol.call(call_id, target, kind, method, args, kwargs,
                                 self.welcome.max_frame)
        except ServerError as exc:  # nothing was sent: an argument it cannot carry
            raise InvalidArgumentError(f"{method}(): {exc}") from None
        if self.ahead:  # the pipelined calls first, in one write with this one
            self.ahead += data
            data, self.ahead = bytes(self.ahead), bytearray()
        done = False
        try:
            self.sock.sendall(data)
            event = self._next()
            done = True
        except (OSError, ServerError) as exc:
            raise self._gone(exc) from None
        finally:
            if not done and self.broken is None:
                self._interrupted()
        if isinstance(event, Result) and event.call_id == call_id:
            return event.value
        if isinstance(event, Failure) and event.call_id == call_id:
            raise calls.rebuild_error(event.error_class, event.message, event.attributes)
        if isinstance(event, Refused):  # the server ended this session
            self.fail(f"the server for {self.where} ended this client: {event.message}")
            raise calls.rebuild_error(event.error_class, event.message, {})
        self.fail(f"the server for {self.where} answered out of turn; connect again")
        raise ServerError(self.broken)

    def forget(self) -> None:
        """The next numbers are no longer known (a call that may change them)."""
        self.next_sequence.clear()
        self.asked.clear()

    def sent_on(self, key: tuple[Any, ...]) -> None:
        self.known.pop(key, None)
        self.known[key] = None
        if len(self.known) > KNOWN_CONVERSATIONS:
            del self.known[next(iter(self.known))]

    def call_ahead(self, target: tuple[Any, ...], kind: str, method: str,
                   args: tuple[Any, ...], kwargs: dict[str, Any], expected: Any) -> None:
        """A call whose result is ``expected``, pipelined: buffered, not waited for."""
        if self.broken is not None:
            raise ServerGoneError(self.broken)
        try:
            self.ahead += protocol.pipelined(next(self.ids), target, kind, method, args,
                                             kwargs, expected, self.welcome.max_frame)
        except ServerError as exc:  # nothing was sent: an argument it cannot carry
            raise InvalidArgumentError(f"{method}(): {exc}") from None
        if len(self.ahead) < AHEAD_BYTES:
            return
        data, self.ahead = bytes(self.ahead), bytearray()
        done = False
        try:
            self.sock.sendall(data)
            done = True
        except OSError as exc:
            raise self._gone(exc) from None
        finally:
            if not done and self.broken is None:
                self._interrupted()

    def _gone(self, exc: BaseException) -> ServerGoneError:
        self.fail(f"the server for {self.where} is gone ({_reason(exc)}); what this "
                  "client's open transaction did is rolled back; connect again when it "
                  "is back")
        assert self.broken is not None
        return ServerGoneError(self.broken)

    def _interrupted(self) -> None:  # mid-call (Ctrl-C): the stream is out of step
        self.fail(f"the connection to the server for {self.where} was interrupted in the "
                  "middle of a call; connect again")

    def fail(self, why: str) -> None:
        self.broken = why
        with contextlib.suppress(OSError):
            self.sock.close()

    def close(self) -> None:
        if self.broken is None:
            self.fail(f"this client of {self.where} is closed")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


def _open_unix(path: Path, where: str, token: str | None, read_only: bool) -> _Link:
    address, fd = unix_address(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    finally:
        if fd is not None:
            os.close(fd)
    return _Link(sock, where, token, read_only)


def _open_tcp(host: str, port: int, where: str, token: str | None, read_only: bool) -> _Link:
    try:
        sock = socket.create_connection((host, port), timeout=30.0)
    except OSError as exc:
        raise ServerGoneError(f"no server answers at {where}: {_reason(exc)}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return _Link(sock, where, token, read_only)


def connect_served(path: str | Path, *, read_only: bool = False) -> ClientInstance | None:
    """A client of the server holding the instance file ``path``, or None when no server
    answers on its socket (none runs, or one died and left it: the file is free)."""
    sock_path = socket_path_for(Path(path))
    if not sock_path.exists():
        return None
    where = str(path)
    opener = functools.partial(_open_unix, sock_path, where, None, read_only)
    try:
        first = opener()
    except (ConnectionRefusedError, FileNotFoundError):
        return None
    except OSError as exc:
        raise ServerGoneError(f"the server for {where} did not answer on {sock_path}: "
                              f"{_reason(exc)}") from None
    return ClientInstance(where, first, opener, f"the server's socket {sock_path}")


def connect_url(url: str, *, token: str | None, read_only: bool = False) -> ClientInstance:
    """A client of the server at ``pybroker://host:port`` (``token``: the server's)."""
    rest = url[len(URL_SCHEME):].rstrip("/")
    host, sep, port_text = rest.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise InvalidArgumentError(
            f"{url!r} is not a server address; write pybroker://HOST:PORT")
    if token is not None and not isinstance(token, str):
        raise InvalidArgumentError(f"token must be text, not {type(token).__name__}")
    opener = functools.partial(_open_tcp, host, int(port_text), url, token, read_only)
    return ClientInstance(url, opener(), opener, url)


# -- the proxies --------------------------------------------------------------------------


def _remote_method(embedded: type, name: str) -> Callable[..., Any]:
    original = getattr(embedded, name)
    signature = inspect.signature(original)

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        signature.bind(self, *args, **kwargs)  # the embedded method's TypeError, if any
        return self._run(CALL_METHOD, name, args, kwargs)

    functools.update_wrapper(method, original)
    return method


def _remote_property(embedded: type, name: str, settable: bool) -> property:
    original = getattr(embedded, name)

    def get(self: Any) -> Any:
        return self._run(GET_PROPERTY, name)

    def put(self: Any, value: Any) -> None:
        self._run(SET_PROPERTY, name, (value,))

    return property(get, put if settable else None, doc=original.__doc__)


def _not_here(name: str, why: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise ServerError(f"{name} is not available to a client of a served instance: {why}")

    method.__name__ = name
    return method


def public_names(embedded: type) -> list[str]:
    """The public methods and properties of an embedded class (its data slots, such as a
    Conversation's ``handle``, are each object's own)."""
    return [name for name in dir(embedded) if not name.startswith("_")
            and not inspect.ismemberdescriptor(inspect.getattr_static(embedded, name))]


def add_calls(cls: type, embedded: type, target: str,
              whitelist: Mapping[tuple[str, str, str], bool] = calls.CALLS) -> None:
    """Give the proxy ``cls`` every public name of ``embedded``: what ``whitelist`` names
    for ``target`` runs in the serving process, with the embedded method's signature and
    docstring; what ``cls`` defines itself stays; any other name refuses with ServerError,
    saying that the whitelist does not name it (a property when the embedded one is)."""
    methods = set(calls.names(target, CALL_METHOD, whitelist))
    gettable = set(calls.names(target, GET_PROPERTY, whitelist))
    settable = set(calls.names(target, SET_PROPERTY, whitelist))
    for name in sorted(methods | gettable | set(public_names(embedded))):
        if name in vars(cls):
            continue
        if name in methods:
            setattr(cls, name, _remote_method(embedded, name))
        elif name in gettable:
            setattr(cls, name, _remote_property(embedded, name, name in settable))
        else:
            refusal = _not_here(name, f"the server's whitelist (pybroker.api.served.calls.CALLS) "
                                      f"does not name it for a {target}")
            is_property = isinstance(inspect.getattr_static(embedded, name), property)
            setattr(cls, name, property(refusal) if is_property else refusal)


class ClientInstance:
    """An instance served by another process (``repr`` says which): the methods of
    pybroker.Instance (api_protocols.BrokerInstance), run there. ``close()`` disconnects;
    what a transaction left open did is rolled back."""

    def __init__(self, where: str, first: _Link, opener: Callable[[], _Link],
                 via: str) -> None:
        self._where = where
        self._via = via
        self._opener = opener
        self._welcome = first.welcome
        self._links: list[_Link] = [first]
        self._local = threading.local()
        self._local.link = first
        self._links_lock = threading.Lock()
        self._closed = False
        self._on_close: list[Callable[[], None]] = []
        self._duckdb: duckdb.DuckDBPyConnection | None = None  # holds sql()'s results

    def _results(self) -> duckdb.DuckDBPyConnection:
        """The in-memory DuckDB that holds this client's query results (rows.py), made on
        first need, closed with the client (as an embedded result ends with its instance)."""
        with self._links_lock:
            if self._duckdb is None:
                self._duckdb = duckdb.connect(":memory:")
            return self._duckdb

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return (f"<pybroker Instance {self._welcome.path} through {self._via} "
                f"({self._welcome.server}){state}>")

    def __enter__(self) -> ClientInstance:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, kind: str, method: str, args: tuple[Any, ...] = (),
             kwargs: dict[str, Any] | None = None) -> Any:
        return self.call((INSTANCE,), kind, method, args, kwargs)

    def _link(self) -> _Link:
        if self._closed:
            raise BrokerError("the instance is closed")
        link = getattr(self._local, "link", None)
        if link is None:  # this thread's own session (its own transaction)
            try:
                link = self._opener()
            except (ConnectionRefusedError, FileNotFoundError) as exc:
                raise ServerGoneError(
                    f"the server for {self._where} is gone ({_reason(exc)}); connect "
                    "again when it is back") from None
            with self._links_lock:
                self._links.append(link)
            self._local.link = link
        return link

    def call(self, target: tuple[Any, ...], kind: str, method: str,
             args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        """One call of the whitelist (calls.CALLS) on ``target`` (the instance, a database
        or a conversation), run in the serving process on this thread's connection; the
        proxies' methods and properties are made of it."""
        what = f"{method}()"
        args = tuple(calls.outgoing(what, a) for a in args)
        kwargs = {k: calls.outgoing(what, v) for k, v in (kwargs or {}).items()}
        link = self._link()
        if (target[0], kind, method) in calls.PIPELINED:
            return self._send(link, target, kind, method, args, kwargs)
        link.forget()  # any other call may SEND or END, so change what the numbers are
        if kind != TRANSACTION:
            value = link.call(target, kind, method, args, kwargs)
            if (target[0], kind, method) in calls.PATH_RESULTS and isinstance(value, str):
                return Path(value)
            return calls.from_wire(value, self._from_record)
        try:
            link.call(target, kind, method, args, kwargs)
        except BrokerError:
            if method != "begin":  # the server ended the level, failing or not
                link.depth = max(0, link.depth - 1)
            raise
        link.depth = link.depth + 1 if method == "begin" else max(0, link.depth - 1)
        return None

    def _send(self, link: _Link, target: tuple[Any, ...], kind: str, method: str,
              args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """SEND: pipelined when its sequence number is known (the module says why)."""
        key = target[1:]  # (database name, handle)
        expected = None
        if link.depth:
            expected = link.next_sequence.get(key)
            if expected is None and key[0] not in link.asked:
                link.asked.add(key[0])
                self._ask_sequences(link, key)
                expected = link.next_sequence.get(key)
        if expected is not None:
            link.call_ahead(target, kind, method, args, kwargs, expected)
            link.next_sequence[key] = expected + 1
            link.sent_on(key)
            return expected
        link.next_sequence.pop(key, None)
        value = calls.from_wire(link.call(target, kind, method, args, kwargs),
                                self._from_record)
        if link.depth and type(value) is int:
            link.next_sequence[key] = value + 1
        link.sent_on(key)
        return value

    def _ask_sequences(self, link: _Link, key: tuple[Any, ...]) -> None:
        """The next numbers of this conversation and of the others of its database this
        client sent on lately, in one round trip (which takes the instance's lock for
        the transaction, as its first SEND would); only when there are others, since
        for one alone the SEND itself is the round trip. If it fails, the SEND is sent
        as it is and says why."""
        others = [k for k in link.known if k[0] == key[0] and k != key]
        if not others:
            return
        keys = [key, *others]
        with contextlib.suppress(BrokerError):
            found = link.call((DATABASE, key[0]), TRANSACTION, "sequences",
                              ([k[1] for k in keys],))
            if isinstance(found, list) and len(found) == len(keys):
                for k, number in zip(keys, found, strict=True):
                    if type(number) is int:
                        link.next_sequence[k] = number

    def _from_record(self, record: Record) -> Any:
        fields = record.fields
        if record.name == calls.DATABASE_RECORD and len(fields) == 3:
            return ClientDatabase(self, fields[1], fields[0], fields[2])
        if record.name == calls.CONVERSATION_RECORD and len(fields) == 2:
            return ClientConversation(self, ClientDatabase(self, None, fields[0], None),
                                      fields[1])
        raise ServerError(f"the server sent a {record.name!r} this client does not know; "
                          "use the same pybroker on both sides")

    def sql(self, query: str, params: Any = None) -> duckdb.DuckDBPyRelation:
        # the serving process runs the query once and sends its rows (Instance.sql_rows);
        # they are rebuilt here as the relation an embedded sql() gives (rows.py)
        found = self._run(CALL_METHOD, "sql_rows", (query, params))
        if not (isinstance(found, (list, tuple)) and len(found) == 3):
            raise ServerError("the server sent a query's rows in a shape this client does "
                              "not know; use the same pybroker on both sides")
        return rows.relation(self._results(), *found)

    sql.__doc__ = Instance.sql.__doc__

    # -- what stays local ----------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        """The instance file, as the server holds it."""
        return Path(self._welcome.path)

    @property
    def read_only(self) -> bool:
        return self._welcome.read_only

    @property
    def is_client(self) -> bool:
        """True: calls run in the serving process."""
        return True

    def on_close(self, callback: Callable[[], None]) -> None:
        self._on_close.append(callback)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for callback in reversed(self._on_close):
            callback()
        with self._links_lock:
            links, self._links = self._links, []
        for link in links:
            link.close()
        if self._duckdb is not None:
            self._duckdb.close()

    start_endpoint = _not_here(
        "start_endpoint()", "the serving process runs the broker endpoint "
        "(pybroker serve FILE --port N)")
    endpoint = property(_not_here(
        "endpoint", "the serving process runs the broker endpoint"))
    start_activation = _not_here(
        "start_activation()", "the serving process runs activation (pybroker serve does)")
    stop_activation = _not_here(
        "stop_activation()", "the serving process runs activation (pybroker serve does)")
    enable_tracing = _not_here(
        "enable_tracing()", "the serving process makes the spans of its messages (pybroker "
        "serve --otel, or connect(FILE, serve=True, otel=True))")
    watch_broker_events = _not_here(
        "watch_broker_events()", "the serving process records the broker events (pybroker "
        "serve prints the connection events; query sys.broker_events)")


@dataclasses.dataclass(init=False, repr=False)  # equal: of the same client, by name
class ClientDatabase:
    """A database of a served instance: the methods of pybroker.Database
    (api_protocols.BrokerDatabase), run in the serving process."""

    name: str
    _instance: ClientInstance  # the instance it belongs to, as a Database's
    database_id: int | None = dataclasses.field(compare=False)
    broker_instance: str | None = dataclasses.field(compare=False)

    def __init__(self, client: ClientInstance, database_id: int | None, name: str,
                 broker_instance: str | None) -> None:
        self._instance = client
        self.database_id = database_id
        self.name = name
        self.broker_instance = broker_instance

    def __repr__(self) -> str:
        return f"Database(name={self.name!r}, broker_instance={self.broker_instance!r})"

    @property
    def instance(self) -> ClientInstance:
        """The client instance this database is reached through."""
        return self._instance

    def __hash__(self) -> int:
        return hash((id(self._instance), self.name))

    def _target(self) -> tuple[Any, ...]:
        return (DATABASE, self.name)

    def _run(self, kind: str, method: str, args: tuple[Any, ...] = (),
             kwargs: dict[str, Any] | None = None) -> Any:
        return self._instance.call(self._target(), kind, method, args, kwargs)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[ClientDatabase]:
        """One transaction, in the serving process, for every send, receive,
        begin_dialog and end inside (of this thread's connection): all commit together or
        roll back together (a rolled-back receive puts its messages back). If this client
        disconnects or dies inside, or the transaction stays open longer than the
        server's time-out, it is rolled back.

        A SEND inside is pipelined once its conversation sent in this transaction (the
        module says how): its error, the same class and message as embedded, may surface
        at the next call or at COMMIT instead, and then the whole transaction is rolled
        back, as SQL Server's XACT_ABORT ON would."""
        self._run(TRANSACTION, "begin")
        try:
            yield self
        except BaseException:
            with contextlib.suppress(BrokerError):
                self._run(TRANSACTION, "rollback")
            raise
        self._run(TRANSACTION, "commit")

    run_statements = _not_here(
        "run_statements()", "parsed statements do not travel; give the T-SQL text to "
        "execute()")


@dataclasses.dataclass(init=False, repr=False)  # equal: the same handle and database
class ClientConversation:
    """A conversation endpoint of a served instance, addressed by its handle: the methods
    of pybroker.Conversation (api_protocols.BrokerConversation), run in the serving
    process."""

    __slots__ = ("_client", "_database", "handle")

    handle: str
    _database: ClientDatabase

    def __init__(self, client: ClientInstance, database: ClientDatabase, handle: str) -> None:
        self._client = client
        self._database = database
        self.handle = handle

    def __repr__(self) -> str:
        return f"Conversation(handle={self.handle!r}, database={self._database.name!r})"

    def __hash__(self) -> int:
        return hash(self.handle)

    def _target(self) -> tuple[Any, ...]:
        return (CONVERSATION, self._database.name, self.handle)

    def _run(self, kind: str, method: str, args: tuple[Any, ...] = (),
             kwargs: dict[str, Any] | None = None) -> Any:
        return self._client.call(self._target(), kind, method, args, kwargs)


add_calls(ClientInstance, Instance, INSTANCE)
add_calls(ClientDatabase, Database, DATABASE)
add_calls(ClientConversation, Conversation, CONVERSATION)
