"""Running the ENDPOINT and CERTIFICATE statements of a master batch (pybroker.core.tsql.
endpoint_ddl): the broker endpoint (P2) and the certificates that admit peers.

The endpoint's definition is kept in the instance file (``broker_endpoints``, one row at
most: an instance has one Service Broker endpoint, as in SQL Server), and so are the
certificates. Whether the endpoint listens is the process's business: opening the file
starts nothing; ``pybroker serve FILE`` and ``Instance.start_endpoint()`` start the endpoint
the file defines, and the kernel remembers which running endpoint is the definition's
(``Kernel.defined_endpoint``), so that ALTER and DROP ENDPOINT stop, move or keep it.

A batch is all or nothing, but starting and stopping a listener is not a row a rollback
can undo, so a batch runs in three steps (``Database.run_statements``):

1. before its write: the endpoint statements are checked against the definition the file
   holds, and a running endpoint the batch stops or changes is closed (outside the write,
   so that the endpoint's writer thread never waits on the write's lock while it is being
   stopped);
2. in the write: each statement's rows (the endpoint's definition, trusted certificates,
   the name of this instance's certificate, the forwarding bound) in order, then the
   endpoint the batch leaves STARTED is started, so that a port that cannot be bound rolls
   the whole batch back;
3. after the commit the endpoint started or kept is the definition's; after a rollback the
   endpoint started in step 2 is closed and the one closed in step 1 is started again.
   Either way the running transport is told the trusted certificates the file now holds.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, get_args

from pybroker.core.tsql.endpoint_ddl import (
    AlterEndpoint,
    CreateCertificateFromFile,
    CreateCertificateWithSubject,
    CreateEndpoint,
    DropCertificate,
    DropEndpoint,
    EndpointStatement,
)
from pybroker.core.tsql.principal_ddl import PrincipalStatement
from pybroker.core.wire import certificates
from pybroker.errors import (
    AlreadyExistsError,
    BrokerError,
    InUseError,
    InvalidArgumentError,
    MasterOnlyError,
    NotFoundError,
    WireError,
)
from pybroker.kernel.broker_endpoint.principals import (
    Principals,
    changes_trust,
    check_owner,
    master_only,
)
from pybroker.kernel.broker_endpoint.runtime import (
    admit,
    endpoint_identity,
    forget,
    retrust,
)

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.kernel import Kernel, RunningEndpoint

MASTER_DATABASE_ID = 1  # migrations/001_catalog.sql
MAX_CERTIFICATE_FILE = 1 * 2**20
ENDPOINT_STATEMENTS = (
    CreateEndpoint, AlterEndpoint, DropEndpoint,
    CreateCertificateFromFile, CreateCertificateWithSubject, DropCertificate,
)  # fmt: skip
PRINCIPAL_STATEMENTS: tuple[type, ...] = get_args(PrincipalStatement)
SERVER_STATEMENTS = (*ENDPOINT_STATEMENTS, *PRINCIPAL_STATEMENTS)


class _Instance(Protocol):
    """What a batch needs of the Instance (api/instance.py, which imports this module)."""

    kernel: Kernel
    forwarding_size_mb: int
    forwarding: bool

    def start_endpoint(self, port: int | None = None, host: str | None = None, *,
                       encryption: bool | None = None) -> RunningEndpoint: ...


class _Database(Protocol):
    """What a batch needs of the Database running it."""

    name: str
    database_id: int

    @property
    def instance(self) -> _Instance: ...


def stored_endpoint(kernel: Kernel) -> CreateEndpoint | None:
    """The broker endpoint the instance file defines (CREATE ENDPOINT on master), as the
    statement that would define it again; None if there is none. Read inside a write, it
    includes the write's own changes."""
    rows = kernel.store.run("wire/select_broker_endpoint.sql")
    if not rows:
        return None
    name, state, port, listener_ip, certificate, encryption = rows[0]
    return CreateEndpoint(name, port, state, listener_ip, certificate, encryption)


def running_defined_endpoint(kernel: Kernel) -> RunningEndpoint | None:
    """The endpoint running in this process for the file's definition, if one is."""
    endpoint = kernel.defined_endpoint
    return endpoint if endpoint is not None and not endpoint.is_closed else None


class ServerBatch:
    """The ENDPOINT and CERTIFICATE statements of one batch: ``with`` it around the batch's
    write, ``run()`` each statement in the write, ``finish()`` after the last one."""

    def __init__(self, database: _Database, statements: list[object]) -> None:
        self._instance = database.instance
        self._kernel = self._instance.kernel
        self._statements: list[EndpointStatement | PrincipalStatement] = [
            s for s in statements if isinstance(s, SERVER_STATEMENTS)]
        self._defines = any(isinstance(s, (CreateEndpoint, AlterEndpoint, DropEndpoint))
                            for s in self._statements)
        database_id = database.database_id
        for s in self._statements:
            if database_id != MASTER_DATABASE_ID and (
                    isinstance(s, ENDPOINT_STATEMENTS) or master_only(s)):
                raise MasterOnlyError(
                    f"{type(s).__name__} (in database {database.name!r})",
                    reason="the broker endpoint, its certificates and permissions and the "
                           "logins belong to the whole instance")
        # what may change whom the endpoint admits: never inside Database.transaction()
        self._server_wide = any(isinstance(s, ENDPOINT_STATEMENTS) or changes_trust(
            s, database_id) for s in self._statements)
        self._principals = Principals(self._kernel, database_id, database.name,
                                      None)  # the own certificate's name: read in __enter__
        self._final: CreateEndpoint | None = None
        self._start: CreateEndpoint | None = None
        self._kept: RunningEndpoint | None = None
        # the listener closed in step 1 (port, host, encryption), started again on failure
        self._closed: tuple[int, str, bool] | None = None
        self._started: RunningEndpoint | None = None
        self._certificates_changed = False

    # -- step 1: before the write ----------------------------------------------------------

    def __enter__(self) -> ServerBatch:
        if not self._statements:
            return self
        kernel = self._kernel
        if self._server_wide and (
                kernel.store.in_transaction or kernel.messaging.current() is not None):
            raise WireError(
                "ENDPOINT and CERTIFICATE statements cannot run inside Database.transaction(): "
                "they start and stop the broker endpoint, which a rollback cannot undo; run "
                "them in a batch of their own")
        if not self._defines:
            return self  # certificates only: the endpoint stays as it is
        current = stored_endpoint(kernel)
        definition = current
        for statement in self._statements:
            if isinstance(statement, CreateEndpoint):
                if definition is not None:
                    raise AlreadyExistsError(
                        f"endpoint {definition.name!r} already exists: an instance has one "
                        f"Service Broker endpoint (ALTER ENDPOINT {definition.name}, or DROP "
                        f"ENDPOINT {definition.name} first)")
                definition = statement
            elif isinstance(statement, (AlterEndpoint, DropEndpoint)):
                if definition is None or definition.name.lower() != statement.name.lower():
                    known = f": the endpoint is {definition.name!r}" if definition else (
                        ": CREATE ENDPOINT first")
                    raise NotFoundError(f"endpoint {statement.name!r} does not exist{known}")
                if isinstance(statement, DropEndpoint):
                    definition = None
                else:
                    definition = dataclasses.replace(definition, **dict(statement.changes))
        self._final = definition
        running = running_defined_endpoint(kernel)
        wanted = definition if definition is not None and definition.state == "STARTED" \
            else None
        other = kernel.endpoint
        if wanted is not None and other is not None and not other.is_closed and (
                other is not running):
            raise WireError(
                f"the broker endpoint of this instance was started by start_endpoint() on "
                f"{other.address} before the instance file defined one: an instance has one "
                "Service Broker endpoint; close it first (instance.endpoint.close())")
        if running is not None and wanted is not None and current is not None and (
                _same_listener(current, wanted)):
            self._kept = running
        else:
            self._start = wanted
            if running is not None:
                settings = running.settings
                self._closed = (running.port, settings.host, settings.encryption)
                running.close()  # step 1: see the module's docstring
                kernel.defined_endpoint = None
        return self

    # -- step 2: in the write --------------------------------------------------------------

    def run(self, statement: object) -> None:
        kernel = self._kernel
        if isinstance(statement, PRINCIPAL_STATEMENTS):
            self._principals.own_certificate_named(self._own_certificate_name())
            self._principals.run(statement)  # type: ignore[arg-type]
            self._certificates_changed = self._certificates_changed or self._server_wide
        elif isinstance(statement, CreateEndpoint):
            self._endpoint_options(statement.certificate, statement.message_forward_size,
                                   statement.message_forwarding)
            kernel.store.run("wire/insert_broker_endpoint.sql",
                                {"name": statement.name, **_row(statement)})
        elif isinstance(statement, AlterEndpoint):
            changes = dict(statement.changes)
            self._endpoint_options(changes.get("certificate"),
                                   changes.get("message_forward_size"),
                                   changes.get("message_forwarding"))
            current = stored_endpoint(kernel)  # with this batch's earlier statements
            if current is None:
                raise NotFoundError(f"endpoint {statement.name!r} does not exist: CREATE "
                                    "ENDPOINT first")
            kernel.store.run("wire/update_broker_endpoint.sql",
                                _row(dataclasses.replace(current, **changes)))
        elif isinstance(statement, DropEndpoint):
            kernel.store.run("wire/delete_broker_endpoint.sql")  # closed in step 1
            kernel.store.run("principals/delete_endpoint_permissions.sql")
            self._certificates_changed = True  # GRANT CONNECT ON it went with it
        elif isinstance(statement, CreateCertificateFromFile):
            self._check_new_certificate_name(statement.name)
            owner = None if statement.owner is None else check_owner(kernel, statement.owner)
            admit(kernel, statement.name, _read_certificate_file(statement.path), owner)
            self._certificates_changed = True
        elif isinstance(statement, CreateCertificateWithSubject):
            self._name_own_certificate(statement)
        elif isinstance(statement, DropCertificate):
            own = self._own_certificate_name()
            if own is not None and own == statement.name:
                raise InUseError(
                    f"certificate {own!r} is this instance's own endpoint certificate: pybroker "
                    "keeps one for the instance (peers trust it; `pybroker cert FILE --renew` "
                    "renews it); DROP CERTIFICATE drops a peer's certificate")
            forget(kernel, statement.name)
            self._certificates_changed = True
        else:
            raise BrokerError(f"execute() cannot run {statement!r}")

    def finish(self) -> None:
        """After the last statement, still in the write: start the endpoint the batch leaves
        STARTED (a port that cannot be bound rolls the batch back)."""
        if not self._defines:
            return
        final = self._final
        if stored_endpoint(self._kernel) != (
                None if final is None else dataclasses.replace(
                    final, message_forward_size=None, message_forwarding=None)):
            raise WireError(  # step 1 decided on a definition another thread changed since
                "the broker endpoint's definition changed while this batch ran (ENDPOINT "
                "statements in another thread): run the batch again")
        start = self._start
        if start is not None:
            self._started = self._instance.start_endpoint(
                start.port, start.host, encryption=start.encryption)

    # -- step 3: after the commit or the rollback ------------------------------------------

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._statements:
            return
        instance = self._instance
        try:
            if exc is None:
                if self._defines:
                    self._kernel.defined_endpoint = self._started or self._kept
                return
            self._principals.remove_written()  # BACKUP CERTIFICATE's files: nothing stays
            if self._started is not None:
                self._started.close()
            if self._closed is not None:
                port, host, encryption = self._closed
                try:  # the definition is the file's again: the endpoint is its
                    instance.start_endpoint(port, host, encryption=encryption)
                except BrokerError as failed:
                    exc.add_note(f"the broker endpoint closed for this batch could not start "
                                 f"again on {host}:{port}: {failed}")
        finally:
            if self._certificates_changed:
                retrust(self._kernel)  # what the file holds now, committed or rolled back

    # -- internals -------------------------------------------------------------------------

    def _own_certificate_name(self) -> str | None:
        rows = self._kernel.store.run("wire/select_endpoint_certificate_name.sql")
        return rows[0][0] if rows else None

    def _peer_names(self) -> set[str]:
        return {name for (name,) in self._kernel.store.run(
            "wire/select_peer_certificate_names.sql")}

    def _check_new_certificate_name(self, name: str) -> None:
        own = self._own_certificate_name()
        if name == own:
            raise AlreadyExistsError(
                f"certificate {name!r} already exists: it is this instance's own endpoint "
                "certificate")
        if name in self._peer_names():
            raise AlreadyExistsError(
                f"certificate {name!r} already exists (a trusted peer): DROP CERTIFICATE "
                f"{name} first to replace it")

    def _name_own_certificate(self, statement: CreateCertificateWithSubject) -> None:
        """WITH SUBJECT: this instance's own endpoint certificate, made now with the subject
        as its common name (and START_DATE and EXPIRY_DATE, if given) if it is not made yet;
        if it is, it is kept as it is (peers may trust it already) and only gets the
        name."""
        name, subject = statement.name, statement.subject
        expiry = statement.expiry_date
        if expiry is not None and expiry <= self._kernel.now():
            raise InvalidArgumentError(
                f"certificate {name!r} would have expired (EXPIRY_DATE = {expiry:%Y-%m-%d}): "
                "peers refuse an expired endpoint certificate; give a date to come")
        own = self._own_certificate_name()
        if own is not None:
            raise AlreadyExistsError(
                f"certificate {name!r} cannot be created: this instance's endpoint "
                f"certificate already exists as {own!r}, and pybroker keeps one per instance "
                f"(name it in AUTHENTICATION = CERTIFICATE {own})")
        self._check_new_certificate_name(name)
        if not name.strip() or len(name) > 128:
            raise InvalidArgumentError(
                f"a certificate name is a non-empty string of at most 128 characters: {name!r}")
        endpoint_identity(self._kernel, subject, not_before=statement.start_date,
                          not_after=expiry)
        self._kernel.store.run("wire/update_endpoint_certificate_name.sql", {"name": name})

    def _endpoint_options(self, certificate: str | None, forward_size: int | None,
                          forwarding: bool | None = None) -> None:
        if certificate is not None:
            own = self._own_certificate_name()
            if certificate != own:
                if certificate in self._peer_names():
                    raise InvalidArgumentError(
                        f"certificate {certificate!r} is a trusted peer's (created FROM FILE): "
                        "an endpoint authenticates with this instance's own certificate, "
                        "named by CREATE CERTIFICATE name WITH SUBJECT = '...'")
                hint = (f"this instance's endpoint certificate is {own!r}" if own else
                        f"name this instance's endpoint certificate with CREATE CERTIFICATE "
                        f"{certificate} WITH SUBJECT = '...' first, or leave AUTHENTICATION "
                        "out to use it unnamed")
                raise NotFoundError(f"certificate {certificate!r} does not exist: {hint}")
        if forward_size is not None:
            self._instance.forwarding_size_mb = forward_size  # R7.3: MESSAGE_FORWARD_SIZE
        if forwarding is not None:
            self._instance.forwarding = forwarding  # R7.3: MESSAGE_FORWARDING


def _same_listener(a: CreateEndpoint, b: CreateEndpoint) -> bool:
    return (a.port, a.host, a.encryption) == (b.port, b.host, b.encryption)


def _row(definition: CreateEndpoint) -> dict[str, Any]:
    """The columns of ``broker_endpoints`` that ALTER ENDPOINT may change."""
    return {"state_desc": definition.state, "listener_port": definition.port,
            "listener_ip": definition.listener_ip, "certificate_name": definition.certificate,
            "is_encryption_enabled": definition.encryption}


def _read_certificate_file(path: str) -> str:
    """The peer's certificate (PEM or DER) as PEM; a relative path is from the current
    directory of the process."""
    try:
        with Path(path).open("rb") as f:
            data = f.read(MAX_CERTIFICATE_FILE + 1)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise WireError(f"cannot read certificate file {path!r}: {why}") from None
    if len(data) > MAX_CERTIFICATE_FILE:
        raise WireError(f"certificate file {path!r} is larger than "
                        f"{MAX_CERTIFICATE_FILE} bytes: not a certificate")
    try:
        return certificates.pem_of_file(data)
    except WireError as exc:
        raise WireError(f"certificate file {path!r}: {exc}") from None
