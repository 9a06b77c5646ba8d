"""The security statements Service Broker scripts wrap around certificates, in SQL Server's
syntax: master keys, logins, users, the permissions Service Broker reads, the backup of a
certificate and remote service bindings. pybroker.kernel.broker_endpoint.principals runs
them; what they mean there is in pybroker/docs/tsql.md.

It understands exactly

    CREATE MASTER KEY ENCRYPTION BY PASSWORD = 'password'
    CREATE LOGIN name FROM CERTIFICATE certificate                          (master)
    CREATE LOGIN name WITH PASSWORD = 'password' [MUST_CHANGE]
        [, CHECK_POLICY = ON | OFF | CHECK_EXPIRATION = ON | OFF
         | DEFAULT_DATABASE = db | DEFAULT_LANGUAGE = language ...]               (master)
    DROP LOGIN name                                                          (master)
    CREATE USER name [{FOR | FROM} LOGIN login | WITHOUT LOGIN
        | {FOR | FROM} CERTIFICATE certificate] [WITH DEFAULT_SCHEMA = schema]
    DROP USER [IF EXISTS] name
    ALTER LOGIN name {ENABLE | DISABLE | WITH NAME = new
        | WITH PASSWORD = 'password' [OLD_PASSWORD = 'old'] [MUST_CHANGE | UNLOCK]
        | WITH CHECK_POLICY | CHECK_EXPIRATION | DEFAULT_DATABASE | DEFAULT_LANGUAGE = ...
        [, ...]}                                                              (master)
    ALTER USER name WITH {NAME = new | DEFAULT_SCHEMA = schema} [, ...]
    ALTER CERTIFICATE name {WITH ACTIVE FOR BEGIN_DIALOG = ON | OFF
        | REMOVE PRIVATE KEY}                                                 (master)
    GRANT | DENY CONNECT ON ENDPOINT::endpoint TO principal [, ...] [CASCADE] (master)
    REVOKE CONNECT ON ENDPOINT::endpoint {TO | FROM} principal [, ...] [CASCADE]
    GRANT | DENY SEND ON SERVICE::[service] TO principal [, ...] [CASCADE]
    REVOKE SEND ON SERVICE::[service] {TO | FROM} principal [, ...] [CASCADE]
    BACKUP CERTIFICATE name TO FILE = 'path'                                 (master)
    CREATE REMOTE SERVICE BINDING name [AUTHORIZATION owner]
        TO SERVICE 'service' WITH USER = user [, ANONYMOUS = ON | OFF]
    DROP REMOTE SERVICE BINDING name

A principal is a name, or PUBLIC (everyone). Refused, each with its line and column:
CREATE LOGIN FROM WINDOWS or ASYMMETRIC KEY and a HASHED password (an UnsupportedOption
Error naming the option), CREATE USER FOR ASYMMETRIC KEY or WITH PASSWORD (contained
users), GRANT ... WITH GRANT OPTION or AS, other permissions and classes, BACKUP
CERTIFICATE ... WITH PRIVATE KEY (the private key of the endpoint certificate stays in the
instance file), REVOKE GRANT OPTION FOR, ALTER LOGIN ... CREDENTIAL, ALTER USER ... WITH
LOGIN and ALTER CERTIFICATE ... WITH PRIVATE KEY. CASCADE is read and changes nothing:
pybroker keeps no grant options, so no permission was granted on from another's. Only the
syntax is checked here; whether names exist is checked when the statement runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from pybroker.core.tsql.endpoint_ddl import option_text, refuse
from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.parser import Parser, Refusal
from pybroker.errors import MasterOnlyError, TsqlSyntaxError

PUBLIC = "public"  # the principal every login and user belongs to
_LOGIN_OPTIONS = ("CHECK_POLICY", "CHECK_EXPIRATION", "DEFAULT_DATABASE", "DEFAULT_LANGUAGE")


@dataclass(frozen=True, slots=True)
class CreateMasterKey:
    """CREATE MASTER KEY ENCRYPTION BY PASSWORD: the database has one (the password is
    checked to be given, never kept)."""


@dataclass(frozen=True, slots=True)
class CreateLogin:
    """CREATE LOGIN: ``certificate`` names the certificate it is mapped to (FROM
    CERTIFICATE); None is a login WITH PASSWORD."""

    name: str
    certificate: str | None = None


@dataclass(frozen=True, slots=True)
class DropLogin:
    name: str


@dataclass(frozen=True, slots=True)
class CreateUser:
    """CREATE USER: of ``login`` (FOR LOGIN, or the user's own name when nothing is said),
    of ``certificate`` (FOR CERTIFICATE), or of neither (WITHOUT LOGIN)."""

    name: str
    login: str | None = None
    certificate: str | None = None


@dataclass(frozen=True, slots=True)
class DropUser:
    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class Permission:
    """GRANT, DENY or REVOKE (``action``) of CONNECT ON ENDPOINT::e or SEND ON SERVICE::s,
    to or from grantees (``public`` for PUBLIC). A principal holds a GRANT or a DENY of a
    permission: DENY replaces its GRANT and beats every GRANT (to it or to PUBLIC), GRANT
    replaces its DENY, REVOKE removes either, as in SQL Server."""

    permission: str  # CONNECT | SEND
    class_desc: str  # ENDPOINT | SERVICE
    object_name: str
    grantees: tuple[str, ...]
    action: str = "GRANT"  # GRANT | DENY | REVOKE


@dataclass(frozen=True, slots=True)
class AlterLogin:
    """ALTER LOGIN: ``enabled`` True (ENABLE), False (DISABLE) or None (unchanged);
    ``new_name`` (WITH NAME =) or None."""

    name: str
    enabled: bool | None = None
    new_name: str | None = None


@dataclass(frozen=True, slots=True)
class AlterUser:
    """ALTER USER ... WITH NAME = (``new_name``; None: unchanged; DEFAULT_SCHEMA is read
    and not kept, as CREATE USER's)."""

    name: str
    new_name: str | None = None


@dataclass(frozen=True, slots=True)
class AlterCertificate:
    """ALTER CERTIFICATE: ``active_for_begin_dialog`` (WITH ACTIVE FOR BEGIN_DIALOG =),
    or ``remove_private_key`` (REMOVE PRIVATE KEY)."""

    name: str
    active_for_begin_dialog: bool | None = None
    remove_private_key: bool = False


@dataclass(frozen=True, slots=True)
class BackupCertificate:
    """BACKUP CERTIFICATE name TO FILE: its public part, written as DER (docs/tsql.md)."""

    name: str
    path: str


@dataclass(frozen=True, slots=True)
class CreateRemoteServiceBinding:
    name: str
    service: str
    user: str
    anonymous: bool = False


@dataclass(frozen=True, slots=True)
class DropRemoteServiceBinding:
    name: str


PrincipalStatement = (
    CreateMasterKey | CreateLogin | DropLogin | AlterLogin | CreateUser | DropUser | AlterUser
    | Permission | AlterCertificate | BackupCertificate | CreateRemoteServiceBinding
    | DropRemoteServiceBinding
)
# The statements that change whom the endpoint admits, or write a file: master's only.
MASTER_PRINCIPAL_STATEMENTS: tuple[type, ...] = (
    CreateLogin, DropLogin, AlterLogin, AlterCertificate, BackupCertificate)


def _password(p: Parser[Any]) -> None:
    p.keyword("PASSWORD", "PASSWORD after BY" if p.tokens[p.pos - 1].is_word("BY")
              else "PASSWORD after WITH")
    p.require("=", "'=' after PASSWORD")
    if p.token.is_word("HASHED") or (p.token.kind == "number" and p.token.text.startswith("0x")):
        raise refuse("a HASHED password", p.token, "give the password as a string")
    option_text(p, "the password as a string")
    if p.token.is_word("HASHED"):
        raise refuse("HASHED", p.token, "give the password as a string, without HASHED")


def _principal(p: Parser[Any], what: str) -> str:
    """A principal's name, or PUBLIC (a reserved word: everyone)."""
    if p.token.is_word("PUBLIC"):
        p.advance()
        return PUBLIC
    return p.name(what)


# -- MASTER KEY ----------------------------------------------------------------------------


def _create_master_key(p: Parser[Any], verb: Token) -> CreateMasterKey:
    p.keyword("ENCRYPTION", "ENCRYPTION BY PASSWORD = 'password' after CREATE MASTER KEY")
    p.keyword("BY", "BY after ENCRYPTION")
    _password(p)
    return CreateMasterKey()


# -- LOGIN ---------------------------------------------------------------------------------


def _create_login(p: Parser[Any], verb: Token) -> CreateLogin:
    name = p.name("a login name")
    if p.token.is_word("FROM"):
        p.advance()
        source = p.token
        if source.is_word("WINDOWS", "EXTERNAL", "ASYMMETRIC"):
            raise refuse(f"FROM {source.text.upper()}", source, "a Service Broker endpoint "
                          "admits peers by certificate; expected FROM CERTIFICATE name or "
                          "WITH PASSWORD = '...'")
        p.keyword("CERTIFICATE", "CERTIFICATE after FROM")
        return CreateLogin(name, p.name("a certificate name after FROM CERTIFICATE"))
    p.keyword("WITH", "FROM CERTIFICATE name or WITH PASSWORD = 'password'")
    _password(p)
    if p.token.is_word("MUST_CHANGE"):
        p.advance()
    seen: dict[str, Token] = {}
    while p.accept(","):
        option = p.token
        if option.is_word("SID", "CREDENTIAL"):
            raise refuse(option.text.upper(), option, "pybroker keeps no security "
                          "identifiers or credentials; remove the option")
        if not option.is_word(*_LOGIN_OPTIONS):
            raise p.expected(f"a login option ({', '.join(_LOGIN_OPTIONS)})")
        _login_option(p, seen)
    return CreateLogin(name)


def _login_option(p: Parser[Any], seen: dict[str, Token]) -> None:
    """One of _LOGIN_OPTIONS and its value: read, not kept (no client logs in)."""
    option = p.advance()
    key = option.text.upper()
    p.once(key, option, seen, "login option")
    p.require("=", f"'=' after {key}")
    if key in ("CHECK_POLICY", "CHECK_EXPIRATION"):
        p.choice(f"ON or OFF after {key} =", "ON", "OFF")
    else:
        p.name(f"a name after {key} =")


def _drop_login(p: Parser[Any], verb: Token) -> DropLogin:
    return DropLogin(p.name("a login name"))


# -- USER ----------------------------------------------------------------------------------


def _create_user(p: Parser[Any], verb: Token) -> CreateUser:
    name = p.name("a user name")
    user = CreateUser(name, login=name)  # nothing said: the login of the same name
    t = p.token
    if t.is_word("WITHOUT"):
        p.advance()
        p.keyword("LOGIN", "LOGIN after WITHOUT")
        user = CreateUser(name)
    elif t.is_word("FOR", "FROM"):
        p.advance()
        kind = p.token
        if kind.is_word("ASYMMETRIC", "EXTERNAL"):
            raise refuse(f"{t.text.upper()} {kind.text.upper()}", kind, "expected FOR LOGIN "
                          "name, FOR CERTIFICATE name or WITHOUT LOGIN")
        which = p.choice("LOGIN or CERTIFICATE", "LOGIN", "CERTIFICATE")
        if which == "LOGIN":
            user = CreateUser(name, login=p.name("a login name after LOGIN"))
        else:
            user = CreateUser(name, certificate=p.name("a certificate name after CERTIFICATE"))
    if p.token.is_word("WITH"):
        p.advance()
        option = p.token
        if option.is_word("PASSWORD"):
            raise refuse("CREATE USER ... WITH PASSWORD", option, "a contained database "
                          "user; create a login and a user FOR LOGIN it")
        p.keyword("DEFAULT_SCHEMA", "DEFAULT_SCHEMA after WITH")
        p.require("=", "'=' after DEFAULT_SCHEMA")
        p.name("a schema name after DEFAULT_SCHEMA =")
    return user


def _drop_user(p: Parser[Any], verb: Token) -> DropUser:
    if_exists = False
    if p.token.is_word("IF"):
        p.advance()
        p.keyword("EXISTS", "EXISTS after IF")
        if_exists = True
    return DropUser(p.name("a user name"), if_exists)


# -- GRANT ---------------------------------------------------------------------------------


def _permission(p: Parser[Any], verb: Token, permission: str,
                class_desc: str) -> Permission:
    """GRANT | DENY | REVOKE permission ON class::name {TO | FROM} principals [CASCADE]."""
    action = verb.text.upper()
    p.keyword("ON", f"ON {class_desc}::name after {action} {permission}")
    t = p.token
    if not t.is_word(class_desc):
        raise p.expected(f"{class_desc}:: and a name after {action} {permission} ON (pybroker "
                         f"keeps only CONNECT ON ENDPOINT and SEND ON SERVICE)")
    p.advance()
    p.require(":", f"'::' after {class_desc}")
    p.require(":", f"'::' after {class_desc}")
    name = p.name(f"the {class_desc.lower()}'s name after {class_desc}::")
    to = ("TO", "FROM") if action == "REVOKE" else ("TO",)
    p.choice(f"{' or '.join(to)} and a principal after {action} {permission} ON "
             f"{class_desc}::{name}", *to)
    grantees = [_principal(p, f"a login or user name (or PUBLIC) after {to[0]}")]
    while p.accept(","):
        grantees.append(_principal(p, "a login or user name (or PUBLIC) after ','"))
    if action != "GRANT" and p.token.is_word("CASCADE"):
        p.advance()  # no grant options are kept: nothing was granted on from theirs
    if p.token.is_word("WITH", "AS"):
        raise refuse(f"{action} ... {p.token.text.upper()}", p.token, "pybroker keeps the "
                      "permission only; remove the clause")
    return Permission(permission, class_desc, name, tuple(dict.fromkeys(grantees)), action)


# -- ALTER LOGIN, USER, CERTIFICATE --------------------------------------------------------


def _new_name(p: Parser[Any], what: str, seen: dict[str, Token]) -> str:
    p.once("NAME", p.token, seen, f"{what} option")
    p.advance()
    p.require("=", "'=' after NAME")
    return p.name(f"the {what}'s new name after NAME =")


def _alter_login(p: Parser[Any], verb: Token) -> AlterLogin:
    name = p.name("a login name")
    if p.token.is_word("ENABLE", "DISABLE"):
        return AlterLogin(name, enabled=p.advance().text.upper() == "ENABLE")
    p.keyword("WITH", "ENABLE, DISABLE or WITH NAME = new name after the login's name")
    seen: dict[str, Token] = {}
    new_name: str | None = None
    while True:
        option = p.token
        if option.is_word("NAME"):
            new_name = _new_name(p, "login", seen)
        elif option.is_word("PASSWORD"):
            p.once("PASSWORD", option, seen, "login option")
            _password(p)
            if p.token.is_word("OLD_PASSWORD"):
                p.advance()
                p.require("=", "'=' after OLD_PASSWORD")
                option_text(p, "the old password as a string")
            while p.token.is_word("MUST_CHANGE", "UNLOCK"):
                p.advance()
        elif option.is_word(*_LOGIN_OPTIONS):
            _login_option(p, seen)
        elif option.is_word("CREDENTIAL", "NO"):
            raise refuse(f"ALTER LOGIN ... {option.text.upper()}", option,
                         "pybroker keeps no credentials")
        else:
            raise p.expected(f"a login option (NAME, PASSWORD, {', '.join(_LOGIN_OPTIONS)})")
        if not p.accept(","):
            return AlterLogin(name, new_name=new_name)


def _alter_user(p: Parser[Any], verb: Token) -> AlterUser:
    name = p.name("a user name")
    p.keyword("WITH", "WITH NAME = new name or WITH DEFAULT_SCHEMA = schema after the "
                      "user's name")
    seen: dict[str, Token] = {}
    new_name: str | None = None
    while True:
        option = p.token
        if option.is_word("NAME"):
            new_name = _new_name(p, "user", seen)
        elif option.is_word("DEFAULT_SCHEMA"):
            p.once("DEFAULT_SCHEMA", option, seen, "user option")
            p.advance()
            p.require("=", "'=' after DEFAULT_SCHEMA")
            if p.token.is_word("NULL"):
                p.advance()
            else:
                p.name("a schema name after DEFAULT_SCHEMA =")
        elif option.is_word("LOGIN", "PASSWORD", "DEFAULT_LANGUAGE"):
            raise refuse(f"ALTER USER ... WITH {option.text.upper()}", option, "pybroker "
                         "renames a user (NAME) and reads DEFAULT_SCHEMA; drop the user and "
                         "create it FOR LOGIN another login instead")
        else:
            raise p.expected("a user option (NAME or DEFAULT_SCHEMA)")
        if not p.accept(","):
            return AlterUser(name, new_name)


def _alter_certificate(p: Parser[Any], verb: Token) -> AlterCertificate:
    name = p.name("a certificate name")
    if p.token.is_word("REMOVE"):
        p.advance()
        which = p.token
        if which.is_word("ATTESTED"):
            raise refuse("REMOVE ATTESTED OPTION", which, "expected REMOVE PRIVATE KEY")
        p.keyword("PRIVATE", "PRIVATE KEY after REMOVE")
        p.keyword("KEY", "KEY after PRIVATE")
        return AlterCertificate(name, remove_private_key=True)
    p.keyword("WITH", "WITH ACTIVE FOR BEGIN_DIALOG = ON | OFF or REMOVE PRIVATE KEY after "
                      "the certificate's name")
    if p.token.is_word("PRIVATE"):
        raise refuse("ALTER CERTIFICATE ... WITH PRIVATE KEY", p.token, "the private key of "
                     "the endpoint certificate is made with it and stays in the instance file")
    p.keyword("ACTIVE", "ACTIVE FOR BEGIN_DIALOG = ON | OFF after WITH")
    p.keyword("FOR", "FOR BEGIN_DIALOG after ACTIVE")
    p.keyword("BEGIN_DIALOG", "BEGIN_DIALOG after ACTIVE FOR")
    p.require("=", "'=' after BEGIN_DIALOG")
    on = p.choice("ON or OFF after BEGIN_DIALOG =", "ON", "OFF") == "ON"
    return AlterCertificate(name, active_for_begin_dialog=on)


# -- BACKUP CERTIFICATE --------------------------------------------------------------------


def _backup_certificate(p: Parser[Any], verb: Token) -> BackupCertificate:
    name = p.name("a certificate name")
    p.keyword("TO", "TO FILE = 'path' after the certificate's name")
    p.keyword("FILE", "FILE = 'path' after TO")
    p.require("=", "'=' after FILE")
    path = option_text(p, "the file's path as a string, such as 'shop.cer',")
    if p.token.is_word("WITH"):
        raise refuse("WITH PRIVATE KEY", p.token, "the private key of the endpoint "
                      "certificate stays in the instance file; BACKUP CERTIFICATE writes "
                      "the certificate a peer needs")
    return BackupCertificate(name, path)


# -- REMOTE SERVICE BINDING ----------------------------------------------------------------


def _create_binding(p: Parser[Any], verb: Token) -> CreateRemoteServiceBinding:
    name = p.name("a remote service binding name")
    if p.token.is_word("AUTHORIZATION"):
        p.advance()
        p.name("an owner's name after AUTHORIZATION")
    p.keyword("TO", "TO SERVICE 'service' after the binding's name")
    p.keyword("SERVICE", "SERVICE after TO")
    service = option_text(p, "the far service's name as a string")
    p.keyword("WITH", "WITH USER = user after the service's name")
    seen: dict[str, Token] = {}
    user: str | None = None
    anonymous = False
    while True:
        option = p.token
        key = p.choice("USER or ANONYMOUS", "USER", "ANONYMOUS")
        p.once(key, option, seen, "remote service binding option")
        p.require("=", f"'=' after {key}")
        if key == "USER":
            user = p.name("a user name after USER =")
        else:
            anonymous = p.choice("ON or OFF after ANONYMOUS =", "ON", "OFF") == "ON"
        if not p.accept(","):
            break
    if user is None:
        raise TsqlSyntaxError(f"CREATE REMOTE SERVICE BINDING at {verb.where} has no "
                              "USER: expected WITH USER = user")
    return CreateRemoteServiceBinding(name, service, user, anonymous)


def _drop_binding(p: Parser[Any], verb: Token) -> DropRemoteServiceBinding:
    return DropRemoteServiceBinding(p.name("a remote service binding name"))


Reader = Callable[[Parser[Any], Token], PrincipalStatement]

# (verb, object) -> reader of the rest of the statement, in every database ...
PRINCIPAL_STATEMENTS: dict[tuple[str, str], Reader] = {
    ("CREATE", "MASTER KEY"): _create_master_key,
    ("CREATE", "USER"): _create_user,
    ("DROP", "USER"): _drop_user,
    ("CREATE", "REMOTE SERVICE BINDING"): _create_binding,
    ("DROP", "REMOTE SERVICE BINDING"): _drop_binding,
    ("ALTER", "USER"): _alter_user,
    ("GRANT", "SEND"): partial(_permission, permission="SEND", class_desc="SERVICE"),
    ("DENY", "SEND"): partial(_permission, permission="SEND", class_desc="SERVICE"),
    ("REVOKE", "SEND"): partial(_permission, permission="SEND", class_desc="SERVICE"),
}
# ... and in master only.
MASTER_PRINCIPAL_READERS: dict[tuple[str, str], Reader] = {
    ("CREATE", "LOGIN"): _create_login,
    ("DROP", "LOGIN"): _drop_login,
    ("ALTER", "LOGIN"): _alter_login,
    ("ALTER", "CERTIFICATE"): _alter_certificate,
    ("GRANT", "CONNECT"): partial(_permission, permission="CONNECT", class_desc="ENDPOINT"),
    ("DENY", "CONNECT"): partial(_permission, permission="CONNECT", class_desc="ENDPOINT"),
    ("REVOKE", "CONNECT"): partial(_permission, permission="CONNECT", class_desc="ENDPOINT"),
    ("BACKUP", "CERTIFICATE"): _backup_certificate,
}
_ON_MASTER = partial(MasterOnlyError, reason="logins, endpoint permissions and the endpoint's "
                     "certificates belong to the whole instance")
MASTER_PRINCIPAL_REFUSALS: dict[tuple[str, str], Refusal] = dict.fromkeys(
    MASTER_PRINCIPAL_READERS, _ON_MASTER)
