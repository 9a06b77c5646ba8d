"""CREATE / ALTER / DROP ENDPOINT and CREATE / DROP CERTIFICATE in SQL Server's syntax: the
broker endpoint of an instance (P2) and the certificates that admit peers, run by the
``master`` database's ``execute()`` (pybroker.kernel.broker_endpoint.ddl runs them).

It understands exactly

    CREATE ENDPOINT name [AUTHORIZATION login] [STATE = STARTED | STOPPED | DISABLED]
        AS TCP (LISTENER_PORT = port [[,] LISTENER_IP = ALL | (ipv4 address)])
        FOR SERVICE_BROKER ([option [[,] option ...]])
    ALTER ENDPOINT name [STATE = ...] [AS TCP (...)] [FOR SERVICE_BROKER (...)]
    DROP ENDPOINT name
    CREATE CERTIFICATE name [AUTHORIZATION user] FROM FILE = 'path'
    CREATE CERTIFICATE name [AUTHORIZATION user] WITH SUBJECT = 'subject'
        [, START_DATE = 'date'] [, EXPIRY_DATE = 'date']
    DROP CERTIFICATE name

where a Service Broker option is AUTHENTICATION = CERTIFICATE name, ENCRYPTION = REQUIRED
[ALGORITHM AES] | DISABLED, MESSAGE_FORWARDING = ENABLED | DISABLED or MESSAGE_FORWARD_SIZE =
MB, each at most once, the commas optional as in SQL Server's grammar. In ALTER ENDPOINT the TCP
settings may be given alone (LISTENER_IP without LISTENER_PORT keeps the port).

Choices, where pybroker differs from SQL Server (each refusal is an UnsupportedOptionError
naming the option):
- LISTENER_PORT may be 0 (a free port, as ``start_endpoint(0)``) up to 65535; LISTENER_IP =
  ALL (the default) listens where ``start_endpoint()`` does by default, 127.0.0.1; name an
  IPv4 address to listen elsewhere ((0.0.0.0): every interface). IPv6 is refused.
- Authentication is by certificate only: WINDOWS (NTLM, KERBEROS, NEGOTIATE) is refused.
  Without AUTHENTICATION the endpoint uses this instance's own certificate, as with
  CERTIFICATE name.
- ENCRYPTION = SUPPORTED is refused (the transport cannot negotiate: an endpoint speaks TLS
  1.3 or does not), and so is ALGORITHM RC4 (in any combination).
- MESSAGE_FORWARDING and MESSAGE_FORWARD_SIZE set the instance's forwarding (R7.3,
  ``Instance.forwarding`` and ``forwarding_size_mb``); left out, the setting stays as it is.
- CREATE CERTIFICATE refuses a private key (WITH PRIVATE KEY), a password (ENCRYPTION BY
  PASSWORD), ACTIVE FOR BEGIN_DIALOG and FROM BINARY, ASSEMBLY or EXECUTABLE FILE. With
  FROM FILE, AUTHORIZATION names the user of master who owns the peer's certificate (it
  then admits the peer only through that user's login: pybroker/docs/tsql.md); with
  SUBJECT it is read and ignored. START_DATE and EXPIRY_DATE (UTC) are the validity of
  this instance's endpoint certificate when this statement makes it.

What the statements mean when they run (pybroker.kernel.broker_endpoint.ddl):
- The endpoint is the instance's one Service Broker endpoint (a second CREATE ENDPOINT is
  refused). STATE = STARTED starts it as ``start_endpoint(port, host)`` does; STOPPED (the
  default) and DISABLED mean neither listening nor sending. ENCRYPTION = REQUIRED [ALGORITHM
  AES] is mutual TLS 1.3; DISABLED is ``start_endpoint(encryption=False)``, and both peers
  must say so. ALTER changes only what is given and restarts a started endpoint whose port,
  address or encryption changes.
- CREATE CERTIFICATE name FROM FILE = 'path' (PEM, or DER as SQL Server's BACKUP
  CERTIFICATE writes it) admits a peer, as ``Instance.trust()``; DROP CERTIFICATE stops
  admitting it. WITH SUBJECT names this instance's own certificate: made now if it does not
  exist yet, otherwise kept as it is, since peers may trust it.
- CREATE LOGIN, CREATE USER, GRANT CONNECT ON ENDPOINT and BACKUP CERTIFICATE are
  pybroker.core.tsql.principal_ddl's: a peer's certificate bound to a login admits the peer
  while that login holds CONNECT on the endpoint.
- A batch that holds these statements is all or nothing like any other (a port that cannot
  be bound rolls the whole batch back), and is refused inside ``Database.transaction()``,
  whose rollback could not undo a listener.
- The definition is kept in the instance file and changes with the batch that changes it.
  Opening a file never binds a port: ``pybroker serve FILE`` starts the endpoint the file
  defines if its STATE = STARTED, on its LISTENER_PORT and LISTENER_IP (``--port`` and
  ``--host`` override them for that run and start it even if STOPPED or DISABLED; with no
  definition, serve listens on 127.0.0.1:4022). ``Instance.start_endpoint()`` takes what it
  is not given from the definition, and the endpoint it starts is then the definition's
  (ALTER and DROP ENDPOINT stop or move it). ``sys.service_broker_endpoints`` and
  ``sys.tcp_endpoints`` show the definition: ``state_desc`` is the defined state, not
  whether some process listens now.

Only the syntax is checked here; whether names exist, and reading the file, happen when the
statement runs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Literal, cast

from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.parser import Parser, Refusal
from pybroker.errors import MasterOnlyError, TsqlSyntaxError, UnsupportedOptionError

State = Literal["STARTED", "STOPPED", "DISABLED"]
STATES = ("STARTED", "STOPPED", "DISABLED")
DEFAULT_HOST = "127.0.0.1"  # what LISTENER_IP = ALL means: start_endpoint()'s default host
MAX_PORT = 65535
MAX_FORWARD_SIZE_DIGITS = 10  # the instance setting checks the range (R7.3)
MAX_TEXT = 4000  # a path or subject longer than this is not one

_BROKER_OPTIONS = ("AUTHENTICATION", "ENCRYPTION", "MESSAGE_FORWARDING", "MESSAGE_FORWARD_SIZE")
_TCP_OPTIONS = ("LISTENER_PORT", "LISTENER_IP")
_WINDOWS_KINDS = ("NTLM", "KERBEROS", "NEGOTIATE")


@dataclass(frozen=True, slots=True)
class CreateEndpoint:
    """CREATE ENDPOINT ... FOR SERVICE_BROKER (P2). ``state`` defaults to STOPPED, as in
    SQL Server; ``listener_ip`` None is ALL; ``certificate`` None uses this instance's own
    endpoint certificate; ``encryption`` False is ENCRYPTION = DISABLED;
    ``message_forwarding`` (R7.3) and ``message_forward_size`` (MB) None leave the
    instance's settings as they are."""

    name: str
    port: int
    state: State = "STOPPED"
    listener_ip: str | None = None
    certificate: str | None = None
    encryption: bool = True
    message_forward_size: int | None = None
    message_forwarding: bool | None = None

    @property
    def host(self) -> str:
        return DEFAULT_HOST if self.listener_ip is None else self.listener_ip


@dataclass(frozen=True, slots=True)
class AlterEndpoint:
    """ALTER ENDPOINT: ``changes`` holds (field of CreateEndpoint, value) pairs in the order
    written; only those change."""

    name: str
    changes: tuple[tuple[str, Any], ...]


@dataclass(frozen=True, slots=True)
class DropEndpoint:
    name: str


@dataclass(frozen=True, slots=True)
class CreateCertificateFromFile:
    """CREATE CERTIFICATE name [AUTHORIZATION user] FROM FILE = 'path': the peer's endpoint
    certificate (PEM or DER). Without an owner it admits the peer, as ``Instance.trust(name,
    pem)``; owned by ``owner`` (a user of master), through that user's login only."""

    name: str
    path: str
    owner: str | None = None


@dataclass(frozen=True, slots=True)
class CreateCertificateWithSubject:
    """CREATE CERTIFICATE name WITH SUBJECT = '...': names this instance's own endpoint
    certificate (made now with this subject if it is not made yet)."""

    name: str
    subject: str
    start_date: datetime | None = None  # None: the day before it is made
    expiry_date: datetime | None = None  # None: ten years after it is made


@dataclass(frozen=True, slots=True)
class DropCertificate:
    name: str


EndpointStatement = (
    CreateEndpoint | AlterEndpoint | DropEndpoint
    | CreateCertificateFromFile | CreateCertificateWithSubject | DropCertificate
)


def refuse(option: str, token: Token, why: str) -> UnsupportedOptionError:
    """The refusal of an option pybroker does not run, at ``token``, saying why."""
    return UnsupportedOptionError(f"{option} at {token.where} is not supported: {why}",
                                  option=option)


def _authorization(p: Parser[Any]) -> None:
    """[AUTHORIZATION owner]: read and ignored, pybroker has no logins or users."""
    if p.token.is_word("AUTHORIZATION"):
        p.advance()
        p.name("a login or user name after AUTHORIZATION")


def _whole(p: Parser[Any], what: str, digits: int) -> int:
    t = p.token
    if t.kind == "number" and t.text.isascii() and t.text.isdigit():
        value = t.text.lstrip("0") or "0"
        if len(value) <= digits:
            p.advance()
            return int(value)
    raise p.expected(what)


def option_text(p: Parser[Any], what: str) -> str:
    """A string option's text (1 to MAX_TEXT characters), or the refusal naming ``what``."""
    t = p.token
    if t.kind != "string":
        hint = " (strings take single quotes)" if t.kind == "identifier" else ""
        raise p.expected(f"{what}{hint}")
    if not t.text or len(t.text) > MAX_TEXT:
        raise TsqlSyntaxError(f"{what} at {t.where} must hold 1 to {MAX_TEXT} characters")
    p.advance()
    return t.text


def _state(p: Parser[Any]) -> State:
    p.advance()  # STATE
    p.require("=", "'=' after STATE")
    return cast(State, p.choice("STARTED, STOPPED or DISABLED after STATE =", *STATES))


# -- AS TCP (...) --------------------------------------------------------------------------


def _tcp(p: Parser[Any], *, port_required: bool) -> dict[str, Any]:
    """AS TCP (LISTENER_PORT = n [[,] LISTENER_IP = ALL | (a.b.c.d)])."""
    protocol = p.token
    p.keyword("AS", "AS TCP")
    if not p.token.is_word("TCP"):
        if p.token.is_word("HTTP"):
            raise refuse("AS HTTP", p.token, "a Service Broker endpoint listens on TCP; "
                          "expected AS TCP")
        raise p.expected("TCP after AS")
    p.advance()
    p.require("(", "'(' and LISTENER_PORT after AS TCP")
    found: dict[str, Any] = {}
    seen: dict[str, Token] = {}
    while True:
        t = p.token
        if not t.is_word(*_TCP_OPTIONS):
            raise p.expected("LISTENER_PORT or LISTENER_IP")
        key = t.text.upper()
        p.once(key, t, seen, "TCP setting")
        p.advance()
        p.require("=", f"'=' after {key}")
        if key == "LISTENER_PORT":
            port = _whole(p, f"a port number from 0 to {MAX_PORT} for LISTENER_PORT", 5)
            if port > MAX_PORT:
                raise TsqlSyntaxError(f"LISTENER_PORT = {port} at {t.where}: expected a port "
                                      f"number from 0 (a free port) to {MAX_PORT}")
            found["port"] = port
        else:
            found["listener_ip"] = _listener_ip(p)
        if p.accept(")"):
            break
        p.accept(",")
    if port_required and "port" not in found:
        raise TsqlSyntaxError(f"AS TCP at {protocol.where} has no LISTENER_PORT: expected "
                              "LISTENER_PORT = port (0: a free port)")
    return found


def _listener_ip(p: Parser[Any]) -> str | None:
    """ALL (None) or (a.b.c.d)."""
    if p.token.is_word("ALL"):
        p.advance()
        return None
    p.require("(", "ALL or '(' and an IPv4 address for LISTENER_IP")
    t = p.token
    if t.kind in ("identifier", "string") or t.is_symbol(":"):
        raise refuse("an IPv6 LISTENER_IP", t, "pybroker's endpoint listens on IPv4; "
                      "expected ALL or an IPv4 address such as (127.0.0.1)")
    address = None
    if t.kind == "number":
        try:
            address = str(ipaddress.IPv4Address(t.text))
        except ValueError:
            address = None
    if address is None:
        raise p.expected("an IPv4 address such as 127.0.0.1 for LISTENER_IP")
    p.advance()
    p.require(")", f"')' after the address {address}")
    return address


# -- FOR SERVICE_BROKER (...) --------------------------------------------------------------


def _service_broker(p: Parser[Any]) -> dict[str, Any]:
    """FOR SERVICE_BROKER ([option [[,] option ...]])."""
    p.keyword("FOR", "FOR SERVICE_BROKER")
    payload = p.token
    if not payload.is_word("SERVICE_BROKER"):
        if payload.kind == "word" and payload.text[0].isalpha():
            raise refuse(f"FOR {payload.text.upper()}", payload, "pybroker runs only Service "
                          "Broker endpoints; expected FOR SERVICE_BROKER")
        raise p.expected("SERVICE_BROKER after FOR")
    p.advance()
    p.require("(", "'(' after FOR SERVICE_BROKER")
    found: dict[str, Any] = {}
    seen: dict[str, Token] = {}
    while not p.accept(")"):  # FOR SERVICE_BROKER () takes every default
        t = p.token
        if not t.is_word(*_BROKER_OPTIONS):
            raise p.expected(f"a Service Broker option ({', '.join(_BROKER_OPTIONS)}) or ')'")
        key = t.text.upper()
        p.once(key, t, seen, "Service Broker option")
        p.advance()
        p.require("=", f"'=' after {key}")
        if key == "AUTHENTICATION":
            found["certificate"] = _authentication(p)
        elif key == "ENCRYPTION":
            found["encryption"] = _encryption(p)
        elif key == "MESSAGE_FORWARDING":
            found["message_forwarding"] = p.choice(
                "ENABLED or DISABLED", "ENABLED", "DISABLED") == "ENABLED"
        else:
            found["message_forward_size"] = _whole(
                p, "a whole number of megabytes for MESSAGE_FORWARD_SIZE",
                MAX_FORWARD_SIZE_DIGITS)
        if p.accept(")"):
            break
        p.accept(",")
    return found


def _authentication(p: Parser[Any]) -> str:
    """CERTIFICATE name; any WINDOWS form is refused."""
    t = p.token
    if t.is_word("WINDOWS"):
        raise refuse("AUTHENTICATION = WINDOWS", t, "pybroker authenticates endpoints by "
                      "certificate only; expected AUTHENTICATION = CERTIFICATE name")
    p.keyword("CERTIFICATE", "CERTIFICATE and a certificate name after AUTHENTICATION =")
    name = p.name("a certificate name after AUTHENTICATION = CERTIFICATE")
    after = p.token
    if after.is_word("WINDOWS", *_WINDOWS_KINDS):
        raise refuse("AUTHENTICATION = CERTIFICATE ... WINDOWS", after, "pybroker "
                      "authenticates endpoints by certificate only; remove WINDOWS")
    return name


def _encryption(p: Parser[Any]) -> bool:
    """REQUIRED [ALGORITHM AES] (True) or DISABLED (False)."""
    t = p.token
    if t.is_word("SUPPORTED"):
        raise refuse("ENCRYPTION = SUPPORTED", t, "pybroker's endpoint cannot negotiate "
                      "encryption with a peer (it speaks TLS 1.3 or does not); expected "
                      "REQUIRED or DISABLED")
    value = p.choice("REQUIRED or DISABLED after ENCRYPTION =", "REQUIRED", "DISABLED")
    if value == "DISABLED":
        return False
    if p.token.is_word("ALGORITHM"):
        p.advance()
        algorithm = p.token
        if algorithm.is_word("RC4"):
            raise refuse("ALGORITHM RC4", algorithm, "pybroker encrypts with TLS 1.3 (AES); "
                          "expected ALGORITHM AES")
        p.keyword("AES", "AES after ALGORITHM")
        if p.token.is_word("RC4"):
            raise refuse("ALGORITHM AES RC4", p.token, "pybroker encrypts with TLS 1.3 "
                          "(AES) only; expected ALGORITHM AES")
    return True


# -- ENDPOINT ------------------------------------------------------------------------------


def _create_endpoint(p: Parser[Any], verb: Token) -> CreateEndpoint:
    name = p.name("an endpoint name")
    _authorization(p)
    values: dict[str, Any] = {}
    if p.token.is_word("STATE"):
        values["state"] = _state(p)
    values.update(_tcp(p, port_required=True))
    values.update(_service_broker(p))
    return CreateEndpoint(name, **values)


def _alter_endpoint(p: Parser[Any], verb: Token) -> AlterEndpoint:
    name = p.name("an endpoint name")
    changes: list[tuple[str, Any]] = []
    if p.token.is_word("STATE"):
        changes.append(("state", _state(p)))
    if p.token.is_word("AS"):
        changes += _tcp(p, port_required=False).items()
    if p.token.is_word("FOR"):
        changes += _service_broker(p).items()
    if not changes:
        raise p.expected("STATE =, AS TCP (...) or FOR SERVICE_BROKER (...)")
    return AlterEndpoint(name, tuple(changes))


def _drop_endpoint(p: Parser[Any], verb: Token) -> DropEndpoint:
    return DropEndpoint(p.name("an endpoint name"))


# -- CERTIFICATE ---------------------------------------------------------------------------


def _create_certificate(
    p: Parser[Any], verb: Token
) -> CreateCertificateFromFile | CreateCertificateWithSubject:
    name = p.name("a certificate name")
    owner = None
    if p.token.is_word("AUTHORIZATION"):
        p.advance()
        owner = p.name("a user name after AUTHORIZATION")
    t = p.token
    if t.is_word("FROM"):
        p.advance()
        source = p.token
        if source.is_word("BINARY", "ASSEMBLY", "EXECUTABLE"):
            raise refuse(f"FROM {source.text.upper()}", source, "expected FROM FILE = "
                          "'path' naming the peer's certificate file (PEM or DER)")
        p.keyword("FILE", "FILE = 'path' after FROM")
        p.require("=", "'=' after FILE")
        path = option_text(p, "the certificate file's path as a string, such as 'peer.pem',")
        if p.token.is_word("WITH"):
            raise refuse("WITH PRIVATE KEY", p.token, "a certificate created FROM FILE "
                          "admits a peer, whose private key stays with the peer")
        _refuse_active_for(p)
        return CreateCertificateFromFile(name, path, owner)
    if t.is_word("ENCRYPTION"):
        raise refuse("ENCRYPTION BY PASSWORD", t, "pybroker keeps the endpoint "
                      "certificate's private key in the instance file; remove the clause")
    p.keyword("WITH", "FROM FILE = 'path' or WITH SUBJECT = 'subject'")
    p.keyword("SUBJECT", "SUBJECT after WITH")
    p.require("=", "'=' after SUBJECT")
    subject = option_text(p, "the certificate's subject as a string, such as 'Shop endpoint',")
    dates: dict[str, datetime] = {}
    seen: dict[str, Token] = {}
    while p.accept(","):
        option = p.token
        if not option.is_word("START_DATE", "EXPIRY_DATE"):
            raise p.expected("START_DATE or EXPIRY_DATE after ','")
        key = option.text.upper()
        p.once(key, option, seen, "certificate date")
        p.advance()
        p.require("=", f"'=' after {key}")
        dates[key.lower()] = _date(p, key)
    start, expiry = dates.get("start_date"), dates.get("expiry_date")
    if start is not None and expiry is not None and expiry <= start:
        raise TsqlSyntaxError(f"EXPIRY_DATE at {seen['EXPIRY_DATE'].where} is not after "
                              f"START_DATE ({start:%Y-%m-%d %H:%M:%S})")
    _refuse_active_for(p)
    return CreateCertificateWithSubject(name, subject, start, expiry)


# the forms of a date SQL Server's CREATE CERTIFICATE takes that scripts write
_DATE_FORMATS = ("%Y-%m-%d", "%Y%m%d", "%m/%d/%Y", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S",
                 "%Y%m%d %H:%M:%S", "%m/%d/%Y %H:%M:%S")


def _date(p: Parser[Any], key: str) -> datetime:
    """A date as a string: 'yyyy-mm-dd', 'yyyymmdd' or 'mm/dd/yyyy', with a time
    'hh:mm:ss' or without (midnight), in UTC."""
    t = p.token
    if t.kind == "string":
        for form in _DATE_FORMATS:
            try:
                when = datetime.strptime(t.text.strip(), form)
            except ValueError:
                continue
            p.advance()
            return when
    raise p.expected(f"a date such as '2035-12-31' (or '20351231', '12/31/2035') after "
                     f"{key} =")


def _refuse_active_for(p: Parser[Any]) -> None:
    if p.token.is_word("ACTIVE"):
        raise refuse("ACTIVE FOR BEGIN_DIALOG", p.token, "pybroker has no dialog security "
                      "certificates; remove the clause")


def _drop_certificate(p: Parser[Any], verb: Token) -> DropCertificate:
    return DropCertificate(p.name("a certificate name"))


# (verb, object) -> reader of the rest of the statement (pybroker.core.tsql.parser.Parser).
ENDPOINT_STATEMENTS: dict[tuple[str, str], Callable[[Parser[Any], Token], EndpointStatement]] = {
    ("CREATE", "ENDPOINT"): _create_endpoint,
    ("ALTER", "ENDPOINT"): _alter_endpoint,
    ("DROP", "ENDPOINT"): _drop_endpoint,
    ("CREATE", "CERTIFICATE"): _create_certificate,
    ("DROP", "CERTIFICATE"): _drop_certificate,
}

# In a database other than master: why these are refused there (the error's hint says
# how to run them on master, in the caller's words: MasterOnlyError.with_hint).
_ENDPOINT_ON_MASTER = partial(MasterOnlyError,
                              reason="the broker endpoint belongs to the whole instance")
_CERTIFICATE_ON_MASTER = partial(MasterOnlyError,
                                 reason="endpoint certificates belong to the whole instance")
MASTER_ONLY_REFUSALS: dict[tuple[str, str], Refusal] = {
    ("CREATE", "ENDPOINT"): _ENDPOINT_ON_MASTER,
    ("ALTER", "ENDPOINT"): _ENDPOINT_ON_MASTER,
    ("DROP", "ENDPOINT"): _ENDPOINT_ON_MASTER,
    ("CREATE", "CERTIFICATE"): _CERTIFICATE_ON_MASTER,
    ("DROP", "CERTIFICATE"): _CERTIFICATE_ON_MASTER,
}
