"""Running the security statements of a batch (pybroker.core.tsql.principal_ddl): master
keys, logins, users, permissions, certificate backups and remote service bindings, kept in
the instance file (migrations/023), inside the batch's write.

Whom the endpoint admits follows from them (sql/wire/select_trusted_certificates.sql): a
peer's certificate bound to a login admits the peer while that login holds CONNECT on the
endpoint. The batch that runs them (ddl.ServerBatch) tells the running transport once it
commits. Names of principals and bindings compare without regard to case, as under SQL
Server's default collation; certificate names exactly, as ddl.py compares them.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from pybroker.core.tsql.principal_ddl import (
    PUBLIC,
    BackupCertificate,
    CreateLogin,
    CreateMasterKey,
    CreateRemoteServiceBinding,
    CreateUser,
    DropLogin,
    DropRemoteServiceBinding,
    DropUser,
    Grant,
    PrincipalStatement,
)
from pybroker.core.wire import certificates
from pybroker.errors import AlreadyExistsError, BrokerError, InUseError, NotFoundError, WireError

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.kernel import Kernel

MASTER_DATABASE_ID = 1  # migrations/001_catalog.sql


def changes_trust(statement: object, database_id: int) -> bool:
    """Whether the statement may change whom the endpoint admits (then it runs only outside
    Database.transaction(), whose rollback could not take it back from the transport)."""
    if isinstance(statement, (CreateLogin, DropLogin)):
        return True
    if isinstance(statement, Grant):
        return statement.class_desc == "ENDPOINT"
    return isinstance(statement, (CreateUser, DropUser)) and database_id == MASTER_DATABASE_ID


def master_only(statement: object) -> bool:
    """The statements of the whole instance: logins, the endpoint's permissions and the
    backup of its certificates."""
    if isinstance(statement, Grant):
        return statement.class_desc == "ENDPOINT"
    return isinstance(statement, (CreateLogin, DropLogin, BackupCertificate))


class Principals:
    """The security statements of one batch on one database, run in its write. Files that
    BACKUP CERTIFICATE wrote are listed in ``written``: a batch rolled back removes them
    (``remove_written``), so a refused batch leaves nothing behind."""

    def __init__(self, kernel: Kernel, database_id: int, database_name: str,
                 own_certificate: str | None) -> None:
        self._kernel = kernel
        self._store = kernel.store
        self._database_id = database_id
        self._database = database_name
        self._own_certificate = own_certificate  # the name of this instance's own, if any
        self.written: list[Path] = []

    def own_certificate_named(self, name: str | None) -> None:
        """A CREATE CERTIFICATE ... WITH SUBJECT earlier in the batch named it."""
        self._own_certificate = name

    def run(self, statement: PrincipalStatement) -> None:
        if isinstance(statement, CreateMasterKey):
            self._create_master_key()
        elif isinstance(statement, CreateLogin):
            self._create_login(statement)
        elif isinstance(statement, DropLogin):
            self._drop_login(statement.name)
        elif isinstance(statement, CreateUser):
            self._create_user(statement)
        elif isinstance(statement, DropUser):
            self._drop_user(statement)
        elif isinstance(statement, Grant):
            self._grant(statement)
        elif isinstance(statement, BackupCertificate):
            self._backup(statement)
        elif isinstance(statement, CreateRemoteServiceBinding):
            self._create_binding(statement)
        elif isinstance(statement, DropRemoteServiceBinding):
            self._drop_binding(statement.name)
        else:
            raise BrokerError(f"execute() cannot run {statement!r}")

    def remove_written(self) -> None:
        for path in self.written:
            with contextlib.suppress(OSError):
                path.unlink()
        self.written = []

    # -- MASTER KEY --------------------------------------------------------------------

    def _create_master_key(self) -> None:
        key = {"database_id": self._database_id}
        if self._store.run("principals/select_master_key.sql", key):
            raise AlreadyExistsError(
                f"there is already a master key in database {self._database!r} (SQL Server's "
                "error 15578): a database has one")
        self._store.run("principals/insert_master_key.sql",
                        {**key, "create_date": self._kernel.now()})

    # -- LOGIN -------------------------------------------------------------------------

    def _login(self, name: str) -> tuple[str, str, str | None] | None:
        rows = self._store.run("principals/select_server_principal.sql",
                               {"name_key": name.lower()})
        return rows[0] if rows else None

    def _create_login(self, s: CreateLogin) -> None:
        found = self._login(s.name)
        if found is not None:
            raise AlreadyExistsError(f"the login {found[0]!r} already exists (names compare "
                                     "without regard to case)")
        if s.name.lower() == PUBLIC:
            raise AlreadyExistsError("public is the server role every login belongs to: "
                                     "choose another login name")
        if s.certificate is not None:
            self._peer_certificate(s.certificate, "CREATE LOGIN ... FROM CERTIFICATE")
            other = self._store.run("principals/select_login_of_certificate.sql",
                                    {"certificate_name": s.certificate})
            if other:
                raise AlreadyExistsError(
                    f"certificate {s.certificate!r} is already mapped to the login "
                    f"{other[0][0]!r}: a certificate maps to one login")
        self._store.run("principals/insert_server_principal.sql", {
            "name": s.name, "name_key": s.name.lower(),
            "type_desc": "SQL_LOGIN" if s.certificate is None else "CERTIFICATE_MAPPED_LOGIN",
            "certificate_name": s.certificate, "create_date": self._kernel.now()})

    def _drop_login(self, name: str) -> None:
        if self._login(name) is None:
            raise NotFoundError(f"the login {name!r} does not exist (SQL Server's error "
                                "15151)")
        key = {"name_key": name.lower()}
        self._store.run("principals/delete_server_principal.sql", key)
        self._store.run("principals/delete_grantee_permissions.sql",
                        {**key, "database_id": MASTER_DATABASE_ID})

    # -- USER --------------------------------------------------------------------------

    def _user(self, name: str) -> tuple[str, str, str | None, str | None] | None:
        rows = self._store.run("principals/select_database_principal.sql", {
            "database_id": self._database_id, "name_key": name.lower()})
        return rows[0] if rows else None

    def _create_user(self, s: CreateUser) -> None:
        found = self._user(s.name)
        if found is not None:
            raise AlreadyExistsError(f"the user {found[0]!r} already exists in database "
                                     f"{self._database!r} (SQL Server's error 15023)")
        if s.name.lower() in ("dbo", "guest", "sys", "information_schema", PUBLIC):
            raise AlreadyExistsError(f"{s.name!r} is a principal every database has: choose "
                                     "another user name")
        login = None
        if s.login is not None:
            row = self._login(s.login)
            if row is None:
                raise NotFoundError(
                    f"the login {s.login!r} does not exist (SQL Server's error 15007): "
                    f"CREATE LOGIN {s.login} ... on master first, or CREATE USER {s.name} "
                    "WITHOUT LOGIN")
            login = row[0]
            taken = self._store.run("principals/select_user_of_login.sql", {
                "database_id": self._database_id, "login_key": login.lower()})
            if taken:
                raise AlreadyExistsError(
                    f"the login {login!r} already has the user {taken[0][0]!r} in database "
                    f"{self._database!r} (SQL Server's error 15063)")
        if s.certificate is not None:
            if self._database_id != MASTER_DATABASE_ID:
                raise NotFoundError(
                    f"certificate {s.certificate!r} does not exist in database "
                    f"{self._database!r}: pybroker keeps certificates in master only")
            self._peer_certificate(s.certificate, "CREATE USER ... FOR CERTIFICATE")
        self._store.run("principals/insert_database_principal.sql", {
            "database_id": self._database_id, "name": s.name, "name_key": s.name.lower(),
            "type_desc": "CERTIFICATE_MAPPED_USER" if s.certificate else "SQL_USER",
            "login_name": login, "certificate_name": s.certificate,
            "create_date": self._kernel.now()})

    def _drop_user(self, s: DropUser) -> None:
        if self._user(s.name) is None:
            if s.if_exists:
                return
            raise NotFoundError(f"the user {s.name!r} does not exist in database "
                                f"{self._database!r} (SQL Server's error 15151)")
        key = {"database_id": self._database_id, "name_key": s.name.lower()}
        owned = [row[0] for row in self._store.run("principals/select_owned_by_user.sql", key)]
        if owned:
            raise InUseError(
                f"the user {s.name!r} cannot be dropped: it owns or is named by "
                f"{', '.join(owned)} (SQL Server's error 15138); drop those first")
        self._store.run("principals/delete_database_principal.sql", key)
        self._store.run("principals/delete_grantee_permissions.sql", key)

    # -- GRANT -------------------------------------------------------------------------

    def _grant(self, s: Grant) -> None:
        if s.class_desc == "ENDPOINT":
            rows = self._store.run("wire/select_broker_endpoint.sql")
            if not rows or rows[0][0].lower() != s.object_name.lower():
                known = f" (the endpoint is {rows[0][0]!r})" if rows else (
                    ": CREATE ENDPOINT first")
                raise NotFoundError(f"the endpoint {s.object_name!r} does not exist{known}")
            object_name = rows[0][0]
        else:
            services = {row[0] for row in self._store.run(
                "instance/select_services.sql", {"database_id": self._database_id})}
            if s.object_name not in services:
                raise NotFoundError(f"service {s.object_name!r} does not exist in database "
                                    f"{self._database!r}")
            object_name = s.object_name
        grantees: list[str] = []
        for grantee in s.grantees:
            if grantee == PUBLIC:
                grantees.append(PUBLIC)
                continue
            row = self._login(grantee) if s.class_desc == "ENDPOINT" else self._user(grantee)
            if row is None:
                kind = "login" if s.class_desc == "ENDPOINT" else (
                    f"user of database {self._database!r}")
                raise NotFoundError(f"the {kind} {grantee!r} does not exist: GRANT ... TO "
                                    f"names a {kind.split(' ')[0]} (or PUBLIC)")
            grantees.append(row[0])
        now = self._kernel.now()
        for grantee in grantees:
            self._store.run("principals/insert_permission.sql", {
                "database_id": self._database_id, "class_desc": s.class_desc,
                "object_name": object_name, "permission_name": s.permission,
                "grantee": grantee, "grantee_key": grantee.lower(), "create_date": now})

    # -- BACKUP CERTIFICATE ------------------------------------------------------------

    def _backup(self, s: BackupCertificate) -> None:
        """The certificate's public part, as DER (what SQL Server's BACKUP CERTIFICATE
        writes, and what CREATE CERTIFICATE ... FROM FILE reads, as it reads PEM). The file
        must not exist yet, as in SQL Server."""
        if s.name == self._own_certificate:
            pem = self._store.run("wire/select_identity.sql")[0][1]
        else:
            rows = self._store.run("principals/select_peer_certificate.sql", {"name": s.name})
            if not rows:
                own = f" (this instance's is {self._own_certificate!r})" if (
                    self._own_certificate) else ""
                raise NotFoundError(f"certificate {s.name!r} does not exist{own}")
            pem = rows[0][0]
        der = certificates.der_of_pem(pem)
        path = Path(s.path)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise AlreadyExistsError(
                f"cannot write certificate file {s.path!r}: it exists already (SQL Server's "
                "error 15240); remove it or choose another path") from None
        except OSError as exc:
            raise WireError(f"cannot write certificate file {s.path!r}: "
                            f"{exc.strerror or exc}") from None
        self.written.append(path)
        with os.fdopen(fd, "wb") as out:
            out.write(der)

    # -- REMOTE SERVICE BINDING --------------------------------------------------------

    def _create_binding(self, s: CreateRemoteServiceBinding) -> None:
        rows = self._store.run("principals/select_remote_service_binding.sql", {
            "database_id": self._database_id, "name_key": s.name.lower(),
            "remote_service_name": s.service})
        for name, service in rows:
            if name.lower() == s.name.lower():
                raise AlreadyExistsError(f"the remote service binding {name!r} already "
                                         f"exists in database {self._database!r}")
            raise AlreadyExistsError(f"the remote service binding {name!r} already binds "
                                     f"service {service!r}: a far service has one binding")
        user = self._user(s.user)
        if user is None:
            raise NotFoundError(f"the user {s.user!r} does not exist in database "
                                f"{self._database!r}: CREATE USER {s.user} ... first")
        self._store.run("principals/insert_remote_service_binding.sql", {
            "database_id": self._database_id, "name": s.name, "name_key": s.name.lower(),
            "remote_service_name": s.service, "user_name": user[0],
            "is_anonymous_on": s.anonymous, "create_date": self._kernel.now()})

    def _drop_binding(self, name: str) -> None:
        if not self._store.run("principals/delete_remote_service_binding.sql", {
                "database_id": self._database_id, "name_key": name.lower()}):
            raise NotFoundError(f"the remote service binding {name!r} does not exist in "
                                f"database {self._database!r}")

    # -- certificates ------------------------------------------------------------------

    def _peer_certificate(self, name: str, statement: str) -> None:
        if self._store.run("principals/select_peer_certificate.sql", {"name": name}):
            return
        if name == self._own_certificate:
            raise InUseError(f"{statement} names {name!r}, this instance's own endpoint "
                             "certificate: it maps a peer's certificate (CREATE CERTIFICATE "
                             "... FROM FILE) to a principal")
        raise NotFoundError(f"certificate {name!r} does not exist: CREATE CERTIFICATE {name} "
                            "FROM FILE = '...' first")


def check_owner(kernel: Kernel, owner: str) -> str:
    """The user of master that AUTHORIZATION names for a peer's certificate, as written
    when it was created; NotFoundError if there is none."""
    rows = kernel.store.run("principals/select_database_principal.sql", {
        "database_id": MASTER_DATABASE_ID, "name_key": owner.lower()})
    if not rows:
        raise NotFoundError(f"the user {owner!r} does not exist in master: CREATE USER "
                            f"{owner} ... first (AUTHORIZATION names a user of master)")
    return str(rows[0][0])
