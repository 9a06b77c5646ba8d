"""The PostgreSQL wire protocol, read-only: psql, psycopg and other PostgreSQL clients
query a live instance (``pybroker serve FILE --pg-port N``).

Every query goes through ``Instance.sql()``: the read-only check (one SELECT; nothing that
writes, through a ``sys.*`` view or a macro either) and the instance's own DuckDB
connection in the serving process, on a cursor of its own, so it sees what is committed and
never disturbs the engine. The SQL is DuckDB's, not PostgreSQL's: ``SELECT * FROM
sys.transmission_queue`` works, and so do DuckDB's ``pg_catalog`` views as far as DuckDB
has them; a PostgreSQL-only query (psql's ``\\d``) gets an ErrorResponse, never a crash.

What a client gets: SCRAM-SHA-256 password authentication (no TLS: listen on 127.0.0.1,
the default, or inside a trusted network), the simple and the extended query protocol
(``$1`` parameters, as psycopg sends for ``%s``), results in text format, errors with a
SQLSTATE (25006 for a refused write, 42601 a syntax error, 42P01 an unknown table, 28P01 a
wrong password). BEGIN, COMMIT and ROLLBACK are accepted and change nothing: each statement
sees what is committed when it starts. Any user and database name is accepted; the
password is the key. Like the DuckDB CLI, a query can read files the serving process can
read (``read_csv``): give the password only to whom you would give that.

The protocol's bytes are :mod:`pybroker.server.pg_protocol`; here are a session (messages
in, replies out, queries run) and :class:`PgServer`, which accepts connections and runs
each session on its own thread.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import re
import secrets
import socket
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from pybroker import arguments
from pybroker.errors import BrokerError, InvalidArgumentError, StorageError
from pybroker.server import pg_protocol as wire
from pybroker.server.pg_protocol import Message, PgProtocolError

PASSWORD_ENV = "PYBROKER_PG_PASSWORD"
# What clients are told they talk to: a recent PostgreSQL, so libpq and psql expect no
# long-gone behaviour; the SQL they send is DuckDB's all the same.
SERVER_VERSION = "15.0"
# psql's \d commands call PostgreSQL catalog functions DuckDB's pg_catalog lacks
_PG_CATALOG_HINT = ("the SQL is DuckDB's: list the tables and views with SELECT * FROM "
                    "duckdb_tables() or duckdb_views(), and query the sys.* views")
FETCH_BATCH = 1000  # rows fetched from DuckDB at a time, so a large result streams

_CONTROL = re.compile(
    r"^\s*(BEGIN|START\s+TRANSACTION|COMMIT|END|ROLLBACK|ABORT)\b(?!\s+TO\b)[^;]*;?\s*$",
    re.IGNORECASE)


class _Query:
    """What a statement runs: None (an empty query), a transaction word, or SQL."""

    def __init__(self, text: str) -> None:
        self.text = text
        control = _CONTROL.match(text)
        self.control = control.group(1).split()[0].upper() if control else None
        self.empty = not self.control and not text.strip().strip(";").strip()


@dataclass
class _Statement:
    query: _Query
    param_types: tuple[int, ...]


@dataclass
class _Portal:
    statement: _Statement
    params: list[Any] | None
    relation: Any = None
    fields: list[tuple[str, int, int]] = field(default_factory=list)
    sent: int = 0
    done: bool = False


def _sqlstate(exc: BrokerError) -> str:
    """The SQLSTATE of a refusal or failure of ``Instance.sql()``."""
    cause = exc.__cause__
    if isinstance(exc, StorageError):
        return "XX001" if "damaged" in str(exc) else "58030"
    if isinstance(cause, duckdb.ParserException):
        return "42601"  # syntax_error
    if cause is None and isinstance(exc, InvalidArgumentError):
        text = str(exc)
        if "read-only" in text:
            return "25006"  # read_only_sql_transaction: what PostgreSQL says to a write
        return "42601" if "exactly one" in text else "22023"
    if isinstance(cause, duckdb.CatalogException):
        return "42P01"  # undefined_table (or another unknown object)
    if isinstance(cause, duckdb.BinderException):
        return "42703"  # undefined_column, the binder's usual complaint
    if isinstance(cause, (duckdb.ConversionException, duckdb.OutOfRangeException,
                          duckdb.InvalidInputException)):
        return "22000"  # data_exception
    if isinstance(cause, (TypeError, ValueError)):
        return "22023"  # invalid_parameter_value
    return "XX000"


class PgSession:
    """One client connection: bytes in through :meth:`receive`, replies out through
    ``write``. Runs each query with ``instance.sql()``; touches no socket."""

    def __init__(self, instance: Any, password: str, write: Callable[[bytes], Any], *,
                 server_version: str = SERVER_VERSION, full: bool = False) -> None:
        # full: the server has all the connections it takes; the client hears so after its
        # startup packet (after declining TLS), where libpq expects a refusal
        self._full = full
        self._instance = instance
        self._password = password
        self._write = write
        self._server_version = server_version
        self._reader = wire.FrontendReader()
        self._out = bytearray()
        self._phase = "startup"  # then sasl_initial, sasl_final, ready
        self._scram: wire.ScramExchange | None = None
        self._user = ""
        self._application_name = ""
        self._tx = "I"  # ReadyForQuery's status: I idle, T in a block, E failed block
        self._skip_to_sync = False
        self._statements: dict[str, _Statement] = {}
        self._portals: dict[str, _Portal] = {}
        self.closed = False
        # why the client was refused before it logged in (a wrong password, a bad startup)
        self.refusal: str | None = None
        self.process_id = secrets.randbits(31)
        self.secret = secrets.randbits(32)

    @property
    def authenticated(self) -> bool:
        return self._phase == "ready"

    def receive(self, data: bytes) -> None:
        """Bytes from the client; every reply they call for is written before this
        returns. A broken protocol ends the session with a FATAL error."""
        self._reader.feed(data)
        try:
            for message in self._reader.messages():
                self._handle(message)
                if self.closed:
                    break
        except PgProtocolError as exc:
            self._out += wire.error_response(exc.sqlstate, str(exc), severity="FATAL")
            self.closed = True
            if not self.authenticated:
                self.refusal = str(exc)
        finally:
            self._flush()

    def _flush(self) -> None:
        if self._out:
            data, self._out = bytes(self._out), bytearray()
            self._write(data)

    # -- startup and authentication -------------------------------------------------------

    def _handle(self, message: Message) -> None:
        if self._phase == "startup":
            self._startup(message.payload)
        elif self._phase in ("sasl_initial", "sasl_final"):
            if message.kind != b"p":
                raise PgProtocolError("expected a password (SASL) message", "28000")
            self._authenticate(message.payload)
        else:
            self._ready(message)

    def _startup(self, payload: bytes) -> None:
        code = wire.startup_code(payload)
        if code in (wire.SSL_REQUEST, wire.GSSENC_REQUEST):
            self._out += b"N"  # no TLS, no GSSAPI: the client goes on in the clear or stops
            self._reader.startup = True
            return
        if code == wire.CANCEL_REQUEST:  # queries are not cancelled; the request is dropped
            self.closed = True
            return
        if code >> 16 != 3:
            raise PgProtocolError(f"protocol version {code >> 16}.{code & 0xFFFF} is not "
                                  "supported (3.0 is)", "0A000")
        if self._full:
            raise PgProtocolError("sorry, too many clients already", "53300")
        params = wire.startup_parameters(payload)
        self._user = params.get("user", "")
        if not self._user:
            raise PgProtocolError("no user name in the startup packet", "28000")
        options = [name for name in params if name.startswith("_pq_.")]
        if code & 0xFFFF or options:
            self._out += wire.negotiate_protocol_version(wire.PROTOCOL_3_0, options)
        self._application_name = params.get("application_name", "")
        nonce = base64.b64encode(secrets.token_bytes(18)).decode("ascii")
        self._scram = wire.ScramExchange(self._password, salt=secrets.token_bytes(16),
                                         nonce=nonce)
        self._out += wire.authentication_sasl(["SCRAM-SHA-256"])
        self._phase = "sasl_initial"

    def _authenticate(self, payload: bytes) -> None:
        assert self._scram is not None
        if self._phase == "sasl_initial":
            mechanism, data = wire.decode_sasl_initial(payload)
            if mechanism != "SCRAM-SHA-256":
                raise PgProtocolError(f"SASL mechanism {mechanism!r} is not offered", "28000")
            self._out += wire.authentication_sasl_continue(self._scram.server_first(data))
            self._phase = "sasl_final"
            return
        final = self._scram.server_final(payload)
        if final is None:
            raise PgProtocolError(
                f'password authentication failed for user "{self._user}"', "28P01")
        self._out += wire.authentication_sasl_final(final) + wire.authentication_ok()
        for name, value in (
            ("server_version", self._server_version), ("server_encoding", "UTF8"),
            ("client_encoding", "UTF8"), ("DateStyle", "ISO, MDY"), ("TimeZone", "UTC"),
            ("IntervalStyle", "postgres"), ("integer_datetimes", "on"),
            ("standard_conforming_strings", "on"), ("is_superuser", "off"),
            ("default_transaction_read_only", "on"), ("in_hot_standby", "off"),
            ("application_name", self._application_name),
            ("session_authorization", self._user),
        ):
            self._out += wire.parameter_status(name, value)
        self._out += wire.backend_key_data(self.process_id, self.secret)
        self._out += wire.ready_for_query(self._tx)
        self._phase = "ready"

    # -- queries --------------------------------------------------------------------------

    def _ready(self, message: Message) -> None:
        kind = message.kind
        if kind == b"X":
            self.closed = True
        elif kind == b"Q":
            self._simple_query(wire.decode_query(message.payload))
        elif kind == b"S":
            self._skip_to_sync = False
            if self._tx == "I":
                self._portals.clear()  # an implicit transaction ends at Sync, with its portals
            self._out += wire.ready_for_query(self._tx)
        elif kind == b"H":
            pass  # Flush: replies are written when the bytes at hand are handled
        elif kind in (b"P", b"B", b"D", b"E", b"C"):
            if self._skip_to_sync:
                return  # after an error the extended protocol discards up to Sync
            try:
                self._extended(kind, message.payload)
            except PgProtocolError as exc:
                self._error(exc)
                self._skip_to_sync = True
        elif kind in (b"d", b"c", b"f", b"F"):
            self._error(PgProtocolError("COPY and the function call protocol are not "
                                        "supported (read-only queries only)", "0A000"))
        else:
            raise PgProtocolError(f"unknown message type {kind!r}")

    def _error(self, exc: PgProtocolError) -> None:
        self._out += wire.error_response(exc.sqlstate, str(exc), hint=exc.hint)
        if self._tx == "T":
            self._tx = "E"

    def _simple_query(self, text: str) -> None:
        try:
            whole = _Query(text)
            if whole.empty:
                self._out += wire.EMPTY_QUERY_RESPONSE
            elif whole.control:
                self._out += wire.command_complete(self._transaction(whole.control))
            else:
                for statement in _split(text):
                    query = _Query(statement)
                    if query.control:
                        self._out += wire.command_complete(self._transaction(query.control))
                        continue
                    if query.empty:
                        continue
                    portal = _Portal(_Statement(query, ()), None)
                    self._describe_portal(portal)
                    self._execute(portal, 0)
        except PgProtocolError as exc:
            self._error(exc)
        self._out += wire.ready_for_query(self._tx)

    def _transaction(self, word: str) -> str:
        """BEGIN, COMMIT, ROLLBACK: nothing to do on a read-only session but keep the
        status clients read in ReadyForQuery, as PostgreSQL does."""
        if word in ("BEGIN", "START"):
            if self._tx == "E":
                raise _aborted()
            self._tx = "T"
            return "BEGIN"
        tag = "ROLLBACK" if word in ("ROLLBACK", "ABORT") or self._tx == "E" else "COMMIT"
        self._tx = "I"
        return tag

    def _extended(self, kind: bytes, payload: bytes) -> None:
        if kind == b"P":
            parse = wire.decode_parse(payload)
            query = _Query(parse.query)
            count = 0 if query.control or query.empty else _parameter_count(parse.query)
            # the types the client declared, then "unspecified" for the rest the query uses
            types = parse.param_types + (0,) * max(0, count - len(parse.param_types))
            self._statements[parse.statement] = _Statement(query, types)
            self._out += wire.PARSE_COMPLETE
        elif kind == b"B":
            bind = wire.decode_bind(payload)
            statement = self._statement(bind.statement)
            if len(bind.values) != len(statement.param_types):
                raise PgProtocolError(
                    f"bind message supplies {len(bind.values)} parameters, but the prepared "
                    f"statement requires {len(statement.param_types)}")
            if any(bind.result_formats):
                raise PgProtocolError("results in binary format are not supported; ask for "
                                      "text (format 0)", "0A000")
            formats = bind.param_formats or (0,)
            if len(formats) == 1:
                formats = formats * len(bind.values)
            params = [wire.parameter_value(value, oid, fmt == 1) for value, oid, fmt
                      in zip(bind.values, statement.param_types, formats, strict=True)]
            self._portals[bind.portal] = _Portal(statement, params)
            self._out += wire.BIND_COMPLETE
        elif kind == b"D":
            which, name = wire.decode_target(payload)
            if which == "S":
                statement = self._statement(name)
                self._out += wire.parameter_description(
                    [oid or wire.TEXT_OID for oid in statement.param_types])
                portal = _Portal(statement, [None] * len(statement.param_types))
            else:
                portal = self._portal(name)
            self._describe_portal(portal)
        elif kind == b"E":
            name, max_rows = wire.decode_execute(payload)
            self._execute(self._portal(name), max_rows)
        else:  # Close
            which, name = wire.decode_target(payload)
            (self._statements if which == "S" else self._portals).pop(name, None)
            self._out += wire.CLOSE_COMPLETE

    def _statement(self, name: str) -> _Statement:
        try:
            return self._statements[name]
        except KeyError:
            raise PgProtocolError(f'prepared statement "{name}" does not exist',
                                  "26000") from None

    def _portal(self, name: str) -> _Portal:
        try:
            return self._portals[name]
        except KeyError:
            raise PgProtocolError(f'portal "{name}" does not exist', "34000") from None

    def _describe_portal(self, portal: _Portal) -> None:
        """RowDescription (running the query, not yet fetching), or NoData."""
        query = portal.statement.query
        if query.control or query.empty:
            self._out += wire.NO_DATA
            return
        self._open(portal)
        self._out += wire.row_description(portal.fields)

    def _open(self, portal: _Portal) -> None:
        if portal.relation is not None:
            return
        if self._tx == "E":
            raise _aborted()
        text = portal.statement.query.text
        try:
            relation = self._instance.sql(text, portal.params)
        except BrokerError as exc:
            hint = _PG_CATALOG_HINT if "pg_catalog" in text.lower() else None
            raise PgProtocolError(str(exc), _sqlstate(exc), hint=hint) from exc
        portal.relation = relation
        portal.fields = [(name, *wire.pg_type(str(kind)))
                         for name, kind in zip(relation.columns, relation.types, strict=True)]

    def _execute(self, portal: _Portal, max_rows: int) -> None:
        query = portal.statement.query
        if query.empty:
            self._out += wire.EMPTY_QUERY_RESPONSE
            return
        if query.control:
            self._out += wire.command_complete(self._transaction(query.control))
            return
        self._open(portal)
        limit = max_rows if max_rows > 0 else None
        sent = 0
        while not portal.done and (limit is None or sent < limit):
            want = FETCH_BATCH if limit is None else min(FETCH_BATCH, limit - sent)
            try:
                rows = portal.relation.fetchmany(want)
            except duckdb.Error as exc:
                raise PgProtocolError(f"the query failed: {exc}", "XX000") from exc
            for row in rows:
                self._out += wire.data_row([wire.text_value(v) for v in row])
            sent += len(rows)
            portal.done = len(rows) < want
            if len(self._out) > 1 << 16:
                self._flush()
        portal.sent += sent
        if limit is not None and not portal.done:
            self._out += wire.PORTAL_SUSPENDED
        else:
            self._out += wire.command_complete(f"SELECT {portal.sent}")


def _aborted() -> PgProtocolError:
    return PgProtocolError("current transaction is aborted, commands ignored until end of "
                           "transaction block", "25P02")


def _split(text: str) -> list[str]:
    """The statements of a simple query, each on its own (Instance.sql() runs one)."""
    try:
        return [statement.query for statement in duckdb.extract_statements(text)]
    except duckdb.Error as exc:
        raise PgProtocolError(f"the query is not valid DuckDB SQL: {exc}", "42601") from exc


def _parameter_count(query: str) -> int:
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise PgProtocolError(f"the query is not valid DuckDB SQL: {exc}", "42601") from exc
    if len(statements) != 1:
        raise PgProtocolError("cannot insert multiple commands into a prepared statement",
                              "42601")
    names = statements[0].named_parameters
    if not all(name.isdigit() for name in names):
        raise PgProtocolError("named parameters are not supported; use $1, $2, ...",
                              "0A000")
    return max((int(name) for name in names), default=0)


# -- the server -----------------------------------------------------------------------------


class PgServer:
    """Serves ``instance`` read-only over the PostgreSQL wire protocol on ``host:port``
    (port 0: a free one, see :attr:`port` after :meth:`start`). Each connection runs on its
    own thread; at most ``max_connections`` at once (more are refused with SQLSTATE 53300),
    and one that has not authenticated within ``startup_timeout`` seconds is closed."""

    def __init__(self, instance: Any, host: str = "127.0.0.1", port: int = 5432,
                 password: str = "", *, max_connections: int = 32,
                 startup_timeout: float = 30.0,
                 log: Callable[[str], None] | None = None) -> None:
        arguments.text("host", host)
        arguments.whole_number("port", port, minimum=0, maximum=65535)
        arguments.text("password", password)
        arguments.whole_number("max_connections", max_connections, minimum=1,
                               maximum=10_000)
        arguments.real_number("startup_timeout", startup_timeout, minimum=0.001,
                              maximum=3600)
        self._instance = instance
        self.host = host
        self.port = port
        self._password = password
        self._max_connections = max_connections
        self._startup_timeout = startup_timeout
        self._log = log  # a line for each client refused before it logged in
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._connections: dict[socket.socket, threading.Thread] = {}

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> PgServer:
        if self._listener is not None:
            raise BrokerError("the PostgreSQL server is already started")
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            family, _, _, _, where = infos[0]
            listener = socket.socket(family, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(where)
            listener.listen(16)
        except OSError as exc:
            raise BrokerError(f"cannot listen for PostgreSQL clients on {self.address}: "
                              f"{exc.strerror or exc}; choose another --pg-port") from None
        listener.settimeout(0.2)  # how soon the accept loop sees stop()
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._accepting = threading.Thread(target=self._accept_loop, daemon=True,
                                           name=f"pybroker-pg-{self.port}")
        self._accepting.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, close every connection and wait (up to ``timeout`` seconds
        each) for their threads."""
        self._stopping.set()
        if self._accepting is not None:
            self._accepting.join(timeout)
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            connections = list(self._connections.items())
        for sock, _ in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for _, thread in connections:
            thread.join(timeout)

    def __enter__(self) -> PgServer:
        return self.start() if self._listener is None else self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                sock, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                open_now = len(self._connections)
                if open_now >= 2 * self._max_connections:  # refusals need threads too
                    sock.close()
                    continue
                full = open_now >= self._max_connections
                thread = threading.Thread(target=self._serve, args=(sock, full, peer),
                                          daemon=True)
                self._connections[sock] = thread
            thread.start()

    def _serve(self, sock: socket.socket, full: bool, peer: Any = None) -> None:
        session = PgSession(self._instance, self._password, sock.sendall, full=full)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(self._startup_timeout)
            while not session.closed and not self._stopping.is_set():
                data = sock.recv(1 << 16)
                if not data:
                    break
                session.receive(data)
                if session.authenticated:
                    sock.settimeout(None)
        except OSError:
            pass  # the client went away, or stop() shut the socket
        except Exception as exc:  # a bug: the client hears of it, the server goes on
            with contextlib.suppress(OSError):
                sock.sendall(wire.error_response(
                    "XX000", f"internal error in pybroker: {type(exc).__name__}",
                    severity="FATAL"))
        finally:
            with self._lock:
                self._connections.pop(sock, None)
            sock.close()
            if session.refusal is not None and self._log is not None:
                where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "unknown peer"
                self._log(f"postgresql client refused ({where}): {session.refusal}")


# -- the serve command's options ------------------------------------------------------------


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pg-port", type=int, default=None, metavar="N",
                   help="also serve read-only SQL over the PostgreSQL wire protocol on port "
                   "N (0: a free one); the password comes from --pg-password-file or "
                   f"${PASSWORD_ENV}")
    p.add_argument("--pg-host", default="127.0.0.1",
                   help="address for --pg-port (default 127.0.0.1; there is no TLS)")
    p.add_argument("--pg-password-file", type=Path, metavar="FILE",
                   help="a file whose first line is the password PostgreSQL clients give; "
                   "it must be readable by its owner only (chmod 600)")


def password_from(args: argparse.Namespace) -> str | None:
    """The PostgreSQL password the serve command was given, or None without --pg-port.
    Not a command-line value itself: other users can read a process's arguments."""
    if args.pg_port is None:
        if args.pg_password_file is not None:
            raise InvalidArgumentError("--pg-password-file goes with --pg-port")
        return None
    if not 0 <= args.pg_port <= 65535:
        raise InvalidArgumentError(f"--pg-port must be from 0 to 65535, not {args.pg_port}")
    if args.pg_password_file is not None:
        return read_password_file(args.pg_password_file)
    password = os.environ.get(PASSWORD_ENV, "")
    if not password:
        raise InvalidArgumentError(
            f"--pg-port needs a password for PostgreSQL clients: put it in a file readable "
            f"by you only and pass --pg-password-file FILE, or set ${PASSWORD_ENV}")
    return arguments.text(f"${PASSWORD_ENV}", password)


def read_password_file(path: Path) -> str:
    try:
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise InvalidArgumentError(
                f"password file {path} can be read or changed by other users (mode "
                f"{stat.S_IMODE(mode):04o}); make it the owner's only: chmod 600 {path}")
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"password file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise InvalidArgumentError(
            f"cannot read password file {path}: {exc.strerror or exc}") from None
    password = lines[0] if lines else ""
    if not password:
        raise InvalidArgumentError(f"password file {path} is empty; its first line is the "
                                   "password")
    return arguments.text("the password", password)
