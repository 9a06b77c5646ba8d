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
    AlterCertificate,
    AlterLogin,
    AlterUser,
    BackupCertificate,
    CreateLogin,
    CreateMasterKey,
    CreateRemoteServiceBinding,
    CreateUser,
    DropLogin,
    DropRemoteServiceBinding,
    DropUser,
    Permission,
    PrincipalStatement,
)
from pybroker.core.wire import certificates
from pybroker.errors import AlreadyExistsError, BrokerError, InUseError, NotFoundError, WireError

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.kernel import Kernel

MASTER_DATABASE_ID = 1  # migrations/001_catalog.sql
# The principals every database has: no user takes their names.
_DATABASE_PRINCIPALS = ("dbo", "guest", "sys", "information_schema", PUBLIC)


def changes_trust(statement: object, database_id: int) -> bool:
    """Whether the statement may change whom the endpoint admits (then it runs only outside
    Database.transaction(), whose rollback could not take it back from the transport)."""
    if isinstance(statement, (CreateLogin, DropLogin, AlterLogin)):
        return True
    if isinstance(statement, Permission):
        return statement.class_desc == "ENDPOINT"
    return isinstance(statement, (CreateUser, DropUser, AlterUser)) and (
        database_id == MASTER_DATABASE_ID)


def master_only(statement: object) -> bool:
    """The statements of the whole instance: logins, the endpoint's permissions and its
    certificates."""
    if isinstance(statement, Permission):
        return statement.class_desc == "ENDPOINT"
    return isinstance(statement, (CreateLogin, DropLogin, AlterLogin, AlterCertificate,
                                  BackupCertificate))


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
        elif isinstance(statement, AlterLogin):
            self._alter_login(statement)
        elif isinstance(statement, AlterUser):
            self._alter_user(statement)
        elif isinstance(statement, Permission):
            self._permission(statement)
        elif isinstance(statement, AlterCertificate):
            self._alter_certificate(statement)
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

    def _alter_login(self, s: AlterLogin) -> None:
        """ALTER LOGIN: a disabled login connects nothing (its peer is refused); a login
        renamed keeps its certificate, users and permissions."""
        found = self._login(s.name)
        if found is None:
            raise NotFoundError(f"the login {s.name!r} does not exist (SQL Server's error "
                                "15151)")
        key = s.name.lower()
        if s.enabled is not None:
            self._store.run("principals/update_login_enabled.sql",
                            {"name_key": key, "is_disabled": not s.enabled})
        if s.new_name is None:
            return
        new_key = s.new_name.lower()
        if new_key == PUBLIC:
            raise AlreadyExistsError("public is the server role every login belongs to: "
                                     "choose another login name")
        taken = self._login(s.new_name)
        if taken is not None and new_key != key:
            raise AlreadyExistsError(f"the login {taken[0]!r} already exists (SQL Server's "
                                     "error 15025; names compare without regard to case)")
        names = {"name": s.new_name, "new_key": new_key, "name_key": key}
        self._store.run("principals/update_login_name.sql", names)
        self._store.run("principals/update_login_of_users.sql",
                        {"name": s.new_name, "name_key": key})
        self._store.run("principals/update_grantee_name.sql", {
            **names, "database_id": MASTER_DATABASE_ID, "of_login": True})

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
        if s.name.lower() in _DATABASE_PRINCIPALS:
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

    def _alter_user(self, s: AlterUser) -> None:
        """ALTER USER ... WITH NAME: the user keeps its login, certificate, permissions,
        the certificates it owns and the bindings that name it."""
        if self._user(s.name) is None:
            raise NotFoundError(f"the user {s.name!r} does not exist in database "
                                f"{self._database!r} (SQL Server's error 15151)")
        if s.new_name is None:
            return  # DEFAULT_SCHEMA only: read, not kept
        key, new_key = s.name.lower(), s.new_name.lower()
        if new_key in _DATABASE_PRINCIPALS:
            raise AlreadyExistsError(f"{s.new_name!r} is a principal every database has: "
                                     "choose another user name")
        taken = self._user(s.new_name)
        if taken is not None and new_key != key:
            raise AlreadyExistsError(f"the user {taken[0]!r} already exists in database "
                                     f"{self._database!r} (SQL Server's error 15023)")
        names = {"name": s.new_name, "new_key": new_key, "name_key": key}
        where = {"database_id": self._database_id}
        self._store.run("principals/update_user_name.sql", {**names, **where})
        self._store.run("principals/update_grantee_name.sql",
                        {**names, **where, "of_login": False})
        self._store.run("principals/update_user_of_bindings.sql",
                        {"name": s.new_name, "name_key": key, **where})
        if self._database_id == MASTER_DATABASE_ID:
            self._store.run("principals/update_certificate_owner.sql",
                            {"name": s.new_name, "name_key": key})

    # -- GRANT, DENY, REVOKE -----------------------------------------------------------

    def _permission(self, s: Permission) -> None:
        """GRANT and DENY keep the grantees' state of the permission (DENY replaces a
        GRANT, GRANT a DENY); REVOKE removes it, and revoking what nobody holds changes
        nothing, as in SQL Server."""
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
                raise NotFoundError(f"the {kind} {grantee!r} does not exist: {s.action} ... TO "
                                    f"names a {kind.split(' ')[0]} (or PUBLIC)")
            grantees.append(row[0])
        now = self._kernel.now()
        which = {"database_id": self._database_id, "class_desc": s.class_desc,
                 "object_name": object_name, "permission_name": s.permission}
        for grantee in grantees:
            if s.action == "REVOKE":
                self._store.run("principals/delete_permission.sql",
                                {**which, "grantee_key": grantee.lower()})
                continue
            self._store.run("principals/insert_permission.sql", {
                **which, "grantee": grantee, "grantee_key": grantee.lower(),
                "create_date": now, "state": "D" if s.action == "DENY" else "G"})

    # -- ALTER, BACKUP CERTIFICATE -----------------------------------------------------

    def _alter_certificate(self, s: AlterCertificate) -> None:
        """ACTIVE FOR BEGIN_DIALOG is kept and shown (sys.certificates): pybroker secures
        dialogs with the endpoint certificates (P6), so it admits or refuses no peer. A
        peer's certificate holds no private key: REMOVE PRIVATE KEY leaves it as it is."""
        if s.name == self._own_certificate:
            raise InUseError(
                f"certificate {s.name!r} is this instance's own endpoint certificate: the "
                "endpoint authenticates with its private key, which stays in the instance "
                "file; ALTER CERTIFICATE changes a peer's certificate (CREATE CERTIFICATE ... "
                "FROM FILE)")
        if not self._store.run("principals/select_peer_certificate.sql", {"name": s.name}):
            raise NotFoundError(f"certificate {s.name!r} does not exist (SQL Server's error "
                                "15151)")
        if s.active_for_begin_dialog is not None:
            self._store.run("principals/update_certificate_active.sql",
                            {"name": s.name, "is_active": s.active_for_begin_dialog})

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
