"""The security statements around Service Broker's certificates (pybroker.core.tsql.
principal_ddl, pybroker.kernel.broker_endpoint.principals): master keys, certificates with
dates and their backups, logins, users, GRANT CONNECT ON ENDPOINT and SEND ON SERVICE,
remote service bindings. Each does what SQL Server's documentation says, refuses bad input,
and a refused batch changes nothing. Whom the endpoint admits follows from them."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

import pybroker
from pybroker.core.tsql.batch import parse_batch
from pybroker.core.tsql.principal_ddl import (
    AlterCertificate,
    AlterLogin,
    AlterUser,
    BackupCertificate,
    CreateLogin,
    CreateMasterKey,
    CreateRemoteServiceBinding,
    CreateUser,
    DropUser,
    Permission,
)
from pybroker.core.wire import certificates
from pybroker.errors import (
    AlreadyExistsError,
    InUseError,
    InvalidArgumentError,
    MasterOnlyError,
    NotFoundError,
    TsqlSyntaxError,
    UnsupportedOptionError,
)
from pybroker.kernel.broker_endpoint.runtime import trusted_certificates

ENDPOINT = ("CREATE ENDPOINT Broker STATE = STOPPED AS TCP (LISTENER_PORT = 0) "
            "FOR SERVICE_BROKER (AUTHENTICATION = CERTIFICATE Own)")


@pytest.fixture
def inst():
    instance = pybroker.connect(None, worker=False)
    yield instance
    instance.close()


@pytest.fixture(scope="module")
def peer_file(tmp_path_factory):
    """A peer's certificate file, as the peer's BACKUP CERTIFICATE writes it (DER)."""
    with pybroker.connect(None, worker=False) as peer:
        path = tmp_path_factory.mktemp("peer") / "peer.cer"
        peer.database("master").execute(
            "CREATE CERTIFICATE PeerOwn WITH SUBJECT = 'Peer endpoint';\n"
            f"BACKUP CERTIFICATE PeerOwn TO FILE = '{path}'")
        yield path, peer.certificate


def rows(inst, query: str) -> list[tuple]:
    return inst.sql(query).fetchall()


def state(inst) -> list:
    """Everything these statements keep (a refused batch leaves it as it was)."""
    return [rows(inst, f"SELECT COLUMNS(c -> c <> 'create_date') FROM sys.{view} ORDER BY ALL")
            for view in ("server_principals", "database_principals", "symmetric_keys",
                         "server_permissions", "database_permissions",
                         "remote_service_bindings")] + [
        rows(inst, "SELECT name, is_active_for_begin_dialog FROM sys.certificates ORDER BY 1"),
        sorted(trusted_certificates(inst.kernel))]


# -- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "statement"), [
    ("CREATE MASTER KEY ENCRYPTION BY PASSWORD = N'S3cret!'", CreateMasterKey()),
    ("CREATE LOGIN [Peer Login] FROM CERTIFICATE PeerCert", CreateLogin("Peer Login", "PeerCert")),
    ("CREATE LOGIN l WITH PASSWORD = 'p' MUST_CHANGE, CHECK_EXPIRATION = ON, "
     "CHECK_POLICY = OFF, DEFAULT_DATABASE = master", CreateLogin("l")),
    ("CREATE USER u", CreateUser("u", login="u")),
    ("CREATE USER u FROM LOGIN l WITH DEFAULT_SCHEMA = dbo", CreateUser("u", login="l")),
    ("CREATE USER u WITHOUT LOGIN", CreateUser("u")),
    ("CREATE USER u FOR CERTIFICATE c", CreateUser("u", certificate="c")),
    ("DROP USER IF EXISTS u", DropUser("u", True)),
    ("GRANT CONNECT ON ENDPOINT::[Broker] TO l, [public], l",
     Permission("CONNECT", "ENDPOINT", "Broker", ("l", "public"))),
    ("GRANT SEND ON SERVICE::[//Shop/Service] TO PUBLIC",
     Permission("SEND", "SERVICE", "//Shop/Service", ("public",))),
    ("BACKUP CERTIFICATE c TO FILE = N'C:\\certs\\c.cer'",
     BackupCertificate("c", "C:\\certs\\c.cer")),
    ("CREATE REMOTE SERVICE BINDING b AUTHORIZATION dbo TO SERVICE N'//Far' WITH USER = u, "
     "ANONYMOUS = ON", CreateRemoteServiceBinding("b", "//Far", "u", True)),
    ("REVOKE CONNECT ON ENDPOINT::Broker FROM l, PUBLIC CASCADE",
     Permission("CONNECT", "ENDPOINT", "Broker", ("l", "public"), "REVOKE")),
    ("REVOKE SEND ON SERVICE::[//s] TO u",
     Permission("SEND", "SERVICE", "//s", ("u",), "REVOKE")),
    ("DENY CONNECT ON ENDPOINT::Broker TO l, l",
     Permission("CONNECT", "ENDPOINT", "Broker", ("l",), "DENY")),
    ("DENY SEND ON SERVICE::[//s] TO public CASCADE", Permission("SEND", "SERVICE", "//s",
                                                          ("public",), "DENY")),
    ("ALTER LOGIN l DISABLE", AlterLogin("l", enabled=False)),
    ("alter login [l] enable", AlterLogin("l", enabled=True)),
    ("ALTER LOGIN l WITH NAME = m, PASSWORD = 'n' OLD_PASSWORD = 'o' UNLOCK, "
     "CHECK_POLICY = OFF", AlterLogin("l", new_name="m")),
    ("ALTER USER u WITH DEFAULT_SCHEMA = dbo, NAME = [v w]", AlterUser("u", "v w")),
    ("ALTER USER u WITH DEFAULT_SCHEMA = NULL", AlterUser("u")),
    ("ALTER CERTIFICATE c WITH ACTIVE FOR BEGIN_DIALOG = OFF",
     AlterCertificate("c", active_for_begin_dialog=False)),
    ("ALTER CERTIFICATE c REMOVE PRIVATE KEY", AlterCertificate("c", remove_private_key=True)),
])  # fmt: skip
def test_security_statements_parse(text, statement):
    assert parse_batch(text, master=True) == [statement]


@pytest.mark.parametrize(("text", "error", "words"), [
    ("CREATE MASTER KEY", TsqlSyntaxError, "ENCRYPTION BY PASSWORD = 'password' after CREATE "
     "MASTER KEY but found the end of the batch at line 1, column 18"),
    ("CREATE MASTER KEY ENCRYPTION BY PASSWORD = ''", TsqlSyntaxError, "1 to 4000 characters"),
    ("CREATE LOGIN l FROM WINDOWS", UnsupportedOptionError, "FROM WINDOWS at line 1, column 21"),
    ("CREATE LOGIN l WITH PASSWORD = 0x0100 HASHED", UnsupportedOptionError, "HASHED"),
    ("CREATE LOGIN l WITH PASSWORD = 'p', SID = 0x01", UnsupportedOptionError, "SID"),
    ("CREATE LOGIN l WITH PASSWORD = 'p', CHECK_POLICY = ON, CHECK_POLICY = OFF",
     TsqlSyntaxError, "CHECK_POLICY is given twice"),
    ("CREATE USER u WITH PASSWORD = 'p'", UnsupportedOptionError, "contained database user"),
    ("CREATE USER u FOR ASYMMETRIC KEY k", UnsupportedOptionError, "FOR ASYMMETRIC"),
    ("GRANT CONNECT ON ENDPOINT::e TO l WITH GRANT OPTION", UnsupportedOptionError,
     "GRANT ... WITH"),
    ("GRANT CONNECT ON DATABASE::d TO l", TsqlSyntaxError, "ENDPOINT:: and a name"),
    ("GRANT CONNECT ON ENDPOINT:e TO l", TsqlSyntaxError, "'::' after ENDPOINT"),
    ("GRANT SELECT ON t TO l", pybroker.BrokerError, "GRANT SELECT at line 1, column 1 is not "
     "supported"),
    ("BACKUP CERTIFICATE c TO FILE = 'c.cer' WITH PRIVATE KEY (FILE = 'k.pvk')",
     UnsupportedOptionError, "WITH PRIVATE KEY"),
    ("BACKUP DATABASE d TO DISK = 'd.bak'", pybroker.BrokerError, "BACKUP DATABASE"),
    ("CREATE REMOTE SERVICE BINDING b TO SERVICE 's' WITH ANONYMOUS = ON", TsqlSyntaxError,
     "has no USER"),
    ("CREATE REMOTE SERVICE BINDING b TO SERVICE s WITH USER = u", TsqlSyntaxError,
     "the far service's name as a string"),
    ("CREATE CERTIFICATE c WITH SUBJECT = 's', EXPIRY_DATE = 'soon'", TsqlSyntaxError,
     "a date such as '2035-12-31'"),
    ("CREATE CERTIFICATE c WITH SUBJECT = 's', START_DATE = '20300101', "
     "EXPIRY_DATE = '20290101'", TsqlSyntaxError, "EXPIRY_DATE at line 1, column 67 is not "
     "after START_DATE"),
    ("REVOKE CONNECT ON ENDPOINT::e l", TsqlSyntaxError, "expected TO or FROM and a "
     "principal after REVOKE CONNECT ON ENDPOINT::e but found 'l' at line 1, column 31"),
    ("DENY CONNECT ON ENDPOINT::e FROM l", TsqlSyntaxError, "expected TO and a principal "
     "after DENY CONNECT ON ENDPOINT::e but found 'FROM' at line 1, column 29"),
    ("DENY SEND ON SERVICE::s TO u AS dbo", UnsupportedOptionError, "DENY ... AS at line 1, "
     "column 30"),
    ("REVOKE GRANT OPTION FOR CONNECT ON ENDPOINT::e FROM l", pybroker.BrokerError,
     "REVOKE GRANT at line 1, column 1 is not supported"),
    ("DENY CONNECT ON SERVER::s TO l", TsqlSyntaxError, "ENDPOINT:: and a name after DENY "
     "CONNECT ON (pybroker keeps only CONNECT ON ENDPOINT and SEND ON SERVICE) but found "
     "'SERVER' at line 1, column 17"),
    ("ALTER LOGIN l", TsqlSyntaxError, "ENABLE, DISABLE or WITH NAME = new name after the "
     "login's name but found the end of the batch at line 1, column 14"),
    ("ALTER LOGIN l WITH NAME = a, NAME = b", TsqlSyntaxError, "NAME is given twice (first "
     "at line 1, column 20, again at line 1, column 30)"),
    ("ALTER LOGIN l WITH CREDENTIAL = c", UnsupportedOptionError, "ALTER LOGIN ... CREDENTIAL "
     "at line 1, column 20"),
    ("ALTER LOGIN l WITH SID = 0x01", TsqlSyntaxError, "a login option (NAME, PASSWORD"),
    ("ALTER USER u WITH LOGIN = l", UnsupportedOptionError, "ALTER USER ... WITH LOGIN at "
     "line 1, column 19"),
    ("ALTER USER u WITH NAME = public", TsqlSyntaxError, "PUBLIC is reserved"),
    ("ALTER USER u", TsqlSyntaxError, "WITH NAME = new name or WITH DEFAULT_SCHEMA = schema "
     "after the user's name but found the end of the batch at line 1, column 13"),
    ("ALTER CERTIFICATE c WITH ACTIVE FOR BEGIN_DIALOG = YES", TsqlSyntaxError, "ON or OFF "
     "after BEGIN_DIALOG = but found 'YES' at line 1, column 52"),
    ("ALTER CERTIFICATE c WITH PRIVATE KEY (FILE = 'k.pvk')", UnsupportedOptionError,
     "ALTER CERTIFICATE ... WITH PRIVATE KEY at line 1, column 26"),
    ("ALTER CERTIFICATE c REMOVE KEY", TsqlSyntaxError, "PRIVATE KEY after REMOVE but found "
     "'KEY' at line 1, column 28"),
])  # fmt: skip
def test_bad_security_statements_are_refused_with_their_place(text, error, words):
    with pytest.raises(error, match=re.escape(words)):
        parse_batch(text, master=True)


@pytest.mark.parametrize("text", [
    "CREATE LOGIN l WITH PASSWORD = 'p'", "DROP LOGIN l",
    "GRANT CONNECT ON ENDPOINT::e TO l", "BACKUP CERTIFICATE c TO FILE = 'c.cer'",
])
def test_instance_wide_statements_run_only_on_master(inst, text):
    inst.create_database("Shop")
    with pytest.raises(MasterOnlyError, match="runs only in the master database"):
        inst.database("Shop").execute(text)


@pytest.mark.parametrize("text", [
    "ALTER LOGIN l DISABLE", "DENY CONNECT ON ENDPOINT::e TO l",
    "REVOKE CONNECT ON ENDPOINT::e FROM l", "ALTER CERTIFICATE c REMOVE PRIVATE KEY",
])
def test_instance_wide_alter_deny_and_revoke_are_refused_outside_master(text):
    with pytest.raises(MasterOnlyError, match="runs only in the master database"):
        parse_batch(f"CREATE QUEUE q;\n{text}")


# -- what they do ------------------------------------------------------------------------------


def test_master_keys_are_one_per_database(inst):
    inst.create_database("Shop")
    inst.execute("CREATE MASTER KEY ENCRYPTION BY PASSWORD = 'a';\n"
                 "USE Shop; CREATE MASTER KEY ENCRYPTION BY PASSWORD = 'b'")
    assert rows(inst, "SELECT database_name, name FROM sys.symmetric_keys ORDER BY 1") == [
        ("Shop", "##MS_DatabaseMasterKey##"), ("master", "##MS_DatabaseMasterKey##")]
    with pytest.raises(AlreadyExistsError, match="already a master key in database 'Shop'"):
        inst.database("Shop").execute("CREATE MASTER KEY ENCRYPTION BY PASSWORD = 'c'")
    inst.execute("DROP DATABASE Shop")
    assert rows(inst, "SELECT database_name FROM sys.symmetric_keys") == [("master",)]


def test_the_own_certificate_takes_its_dates_and_backs_up_as_der(inst, tmp_path):
    master = inst.database("master")
    master.execute("CREATE CERTIFICATE Own WITH SUBJECT = 'Shop endpoint', "
                   "START_DATE = '01/02/2026', EXPIRY_DATE = '2040-12-31'")
    info = certificates.certificate_info(inst.certificate)
    assert (info.subject, info.not_before, info.not_after) == (
        "CN=Shop endpoint", datetime(2026, 1, 2), datetime(2040, 12, 31))
    path = tmp_path / "own.cer"
    master.execute(f"BACKUP CERTIFICATE Own TO FILE = '{path}'")
    data = path.read_bytes()
    assert not data.startswith(b"-----") and data[0] == 0x30  # DER: an ASN.1 SEQUENCE
    assert certificates.pem_of_file(data) == info.pem
    with pytest.raises(AlreadyExistsError, match="it exists already"):
        master.execute(f"BACKUP CERTIFICATE Own TO FILE = '{path}'")
    with pytest.raises(NotFoundError, match="certificate 'Nope' does not exist"):
        master.execute(f"BACKUP CERTIFICATE Nope TO FILE = '{tmp_path / 'nope.cer'}'")
    assert not (tmp_path / "nope.cer").exists()


def test_an_expired_endpoint_certificate_is_refused(inst):
    with pytest.raises(InvalidArgumentError, match="would have expired"):
        inst.database("master").execute(
            "CREATE CERTIFICATE Own WITH SUBJECT = 's', EXPIRY_DATE = '12/31/2010'")
    assert rows(inst, "SELECT endpoint_certificate FROM instance_settings") == [(None,)]


def test_a_refused_batch_removes_the_backup_it_wrote(inst, tmp_path):
    master = inst.database("master")
    master.execute("CREATE CERTIFICATE Own WITH SUBJECT = 's'")
    before = state(inst)
    path = tmp_path / "own.cer"
    with pytest.raises(NotFoundError, match="the login 'Nobody' does not exist"):
        master.execute(f"BACKUP CERTIFICATE Own TO FILE = '{path}';\n"
                       "CREATE USER u FOR LOGIN Nobody")
    assert not path.exists() and state(inst) == before


def test_a_peer_bound_to_a_login_is_admitted_once_that_login_may_connect(inst, peer_file):
    path, peer_pem = peer_file
    master = inst.database("master")
    master.execute("CREATE CERTIFICATE Own WITH SUBJECT = 'Shop endpoint';\n" + ENDPOINT)
    master.execute(f"""
        CREATE LOGIN PeerLogin WITH PASSWORD = 'p';
        CREATE USER PeerUser FOR LOGIN PeerLogin;
        CREATE CERTIFICATE PeerCert AUTHORIZATION PeerUser FROM FILE = '{path}';""")
    assert trusted_certificates(inst.kernel) == {}  # kept, but no CONNECT yet
    master.execute("GRANT CONNECT ON ENDPOINT::broker TO PeerLogin")
    assert list(trusted_certificates(inst.kernel)) == ["PeerCert"]
    assert certificates.certificate_info(trusted_certificates(inst.kernel)["PeerCert"]).pem \
        == certificates.certificate_info(peer_pem).pem
    assert rows(inst, "SELECT * FROM sys.server_permissions") == [
        ("ENDPOINT", "Broker", "PeerLogin", "CONNECT", "G", "GRANT")]
    with pytest.raises(InUseError, match="owns or is named by certificate PeerCert"):
        master.execute("DROP USER PeerUser")
    master.execute("DROP LOGIN PeerLogin")  # its permission goes with it
    assert trusted_certificates(inst.kernel) == {}
    assert rows(inst, "SELECT * FROM sys.server_permissions") == []


def test_a_login_from_a_certificate_and_public_connect(inst, peer_file):
    path, _ = peer_file
    master = inst.database("master")
    master.execute(f"CREATE CERTIFICATE Own WITH SUBJECT = 's';\n{ENDPOINT};\n"
                   f"CREATE CERTIFICATE PeerCert FROM FILE = '{path}'")
    assert list(trusted_certificates(inst.kernel)) == ["PeerCert"]  # bound to nobody
    master.execute("CREATE LOGIN PeerLogin FROM CERTIFICATE PeerCert")
    assert trusted_certificates(inst.kernel) == {}  # bound now: it needs CONNECT
    assert rows(inst, "SELECT name, type_desc, certificate_name FROM sys.server_principals") \
        == [("PeerLogin", "CERTIFICATE_MAPPED_LOGIN", "PeerCert")]
    master.execute("GRANT CONNECT ON ENDPOINT::Broker TO PUBLIC")
    assert list(trusted_certificates(inst.kernel)) == ["PeerCert"]
    master.execute("DROP ENDPOINT Broker")  # the permissions on it go with it
    assert trusted_certificates(inst.kernel) == {}
    with pytest.raises(AlreadyExistsError, match="already mapped to the login 'PeerLogin'"):
        master.execute("CREATE LOGIN Other FROM CERTIFICATE PeerCert")


def test_a_certificate_owned_by_a_user_without_login_admits_nobody(inst, peer_file):
    path, _ = peer_file
    master = inst.database("master")
    master.execute(f"CREATE CERTIFICATE Own WITH SUBJECT = 's';\n{ENDPOINT};\n"
                   "CREATE USER Nobody WITHOUT LOGIN;\n"
                   f"CREATE CERTIFICATE PeerCert AUTHORIZATION Nobody FROM FILE = '{path}';\n"
                   "GRANT CONNECT ON ENDPOINT::Broker TO PUBLIC")
    assert trusted_certificates(inst.kernel) == {}
    master.execute("CREATE USER CertUser FOR CERTIFICATE PeerCert")
    assert rows(inst, "SELECT name, type_desc, login_name, certificate_name FROM "
                "sys.database_principals ORDER BY name") == [
        ("CertUser", "CERTIFICATE_MAPPED_USER", None, "PeerCert"),
        ("Nobody", "SQL_USER", None, None)]


def _secured_master(inst, path, *, master_key: bool = False) -> pybroker.Database:
    """master with its endpoint, a login and its user who owns the peer's certificate and
    may connect: the peer is admitted."""
    master = inst.database("master")
    master.execute(("CREATE MASTER KEY ENCRYPTION BY PASSWORD = 'k';\n" if master_key else "")
                   + f"""CREATE CERTIFICATE Own WITH SUBJECT = 's'; {ENDPOINT};
        CREATE LOGIN PeerLogin WITH PASSWORD = 'p'; CREATE USER PeerUser FOR LOGIN PeerLogin;
        CREATE CERTIFICATE PeerCert AUTHORIZATION PeerUser FROM FILE = '{path}';
        GRANT CONNECT ON ENDPOINT::Broker TO PeerLogin;""")
    assert list(trusted_certificates(inst.kernel)) == ["PeerCert"]
    return master


@pytest.mark.parametrize(("text", "error", "words"), [
    ("CREATE LOGIN peerlogin WITH PASSWORD = 'q'", AlreadyExistsError,
     "the login 'PeerLogin' already exists"),
    ("CREATE LOGIN [public] WITH PASSWORD = 'q'", AlreadyExistsError,
     "public is the server role"),
    ("CREATE LOGIN x FROM CERTIFICATE Nope", NotFoundError, "certificate 'Nope' does not exist"),
    ("CREATE LOGIN x FROM CERTIFICATE Own", InUseError, "this instance's own"),
    ("CREATE USER u2 FOR LOGIN nobody", NotFoundError, "the login 'nobody' does not exist"),
    ("CREATE USER u2 FOR LOGIN PeerLogin", AlreadyExistsError,
     "already has the user 'PeerUser'"),
    ("CREATE USER peeruser WITHOUT LOGIN", AlreadyExistsError, "'PeerUser' already exists"),
    ("CREATE USER dbo WITHOUT LOGIN", AlreadyExistsError, "every database has"),
    ("CREATE CERTIFICATE C2 AUTHORIZATION Ghost FROM FILE = '{path}'", NotFoundError,
     "the user 'Ghost' does not exist in master"),
    ("GRANT CONNECT ON ENDPOINT::Other TO PeerLogin", NotFoundError,
     "the endpoint 'Other' does not exist \\(the endpoint is 'Broker'\\)"),
    ("GRANT CONNECT ON ENDPOINT::Broker TO PeerUser", NotFoundError,
     "the login 'PeerUser' does not exist"),
    ("DROP LOGIN Ghost", NotFoundError, "the login 'Ghost' does not exist"),
    ("DROP USER Ghost", NotFoundError, "the user 'Ghost' does not exist"),
    ("CREATE MASTER KEY ENCRYPTION BY PASSWORD = 'x'", AlreadyExistsError, "already a master"),
])
def test_bad_security_statements_change_nothing(inst, peer_file, text, error, words):
    path, _ = peer_file
    master = _secured_master(inst, path, master_key=True)
    before = state(inst)
    with pytest.raises(error, match=words):  # after statements that would have changed it
        master.execute("CREATE LOGIN Extra WITH PASSWORD = 'e'; CREATE USER Extra;\n"
                       "GRANT CONNECT ON ENDPOINT::Broker TO Extra;\n"
                       + text.format(path=path))
    assert state(inst) == before


_BAD_ALTER_DENY_REVOKE = [
    ("ALTER LOGIN Ghost DISABLE", NotFoundError, "the login 'Ghost' does not exist"),
    ("ALTER LOGIN PeerLogin WITH NAME = extra", AlreadyExistsError,
     "the login 'Extra' already exists"),
    ("ALTER LOGIN PeerLogin WITH NAME = [Public]", AlreadyExistsError, "public is the server"),
    ("ALTER USER Ghost WITH NAME = g", NotFoundError, "the user 'Ghost' does not exist"),
    ("ALTER USER PeerUser WITH NAME = EXTRA", AlreadyExistsError, "'Extra' already exists"),
    ("ALTER USER PeerUser WITH NAME = guest", AlreadyExistsError, "every database has"),
    ("ALTER CERTIFICATE Ghost WITH ACTIVE FOR BEGIN_DIALOG = OFF", NotFoundError,
     "certificate 'Ghost' does not exist"),
    ("ALTER CERTIFICATE Own REMOVE PRIVATE KEY", InUseError, "own endpoint certificate"),
    ("DENY CONNECT ON ENDPOINT::Broker TO Ghost", NotFoundError,
     "the login 'Ghost' does not exist: DENY ... TO names a login"),
    ("REVOKE CONNECT ON ENDPOINT::Other FROM PeerLogin", NotFoundError,
     "the endpoint 'Other' does not exist"),
]


def test_bad_alter_deny_and_revoke_change_nothing(inst, peer_file):
    """As test_bad_security_statements_change_nothing, on one instance for all of them."""
    master = _secured_master(inst, peer_file[0])
    before = state(inst)
    for text, error, words in _BAD_ALTER_DENY_REVOKE:
        with pytest.raises(error, match=words):  # after statements that would change it
            master.execute("CREATE LOGIN Extra WITH PASSWORD = 'e'; CREATE USER Extra;\n"
                           "DENY CONNECT ON ENDPOINT::Broker TO PeerLogin;\n"
                           "ALTER LOGIN PeerLogin DISABLE; ALTER USER PeerUser WITH NAME = U;\n"
                           "ALTER USER U WITH NAME = PeerUser;\n"
                           "ALTER CERTIFICATE PeerCert WITH ACTIVE FOR BEGIN_DIALOG = OFF;\n"
                           + text)
        assert state(inst) == before, text


def test_users_grants_and_bindings_in_a_database(inst):
    shop = inst.create_database("Shop")
    shop.execute("""
        CREATE QUEUE q; CREATE SERVICE [//Shop/Service] ON QUEUE q;
        CREATE USER FarUser WITHOUT LOGIN;
        GRANT SEND ON SERVICE::[//Shop/Service] TO FarUser, PUBLIC;
        CREATE REMOTE SERVICE BINDING ToStock TO SERVICE N'//Stock/Service'
            WITH USER = FarUser, ANONYMOUS = OFF;""")
    assert rows(inst, "SELECT database_name, name, remote_service_name, user_name, "
                "is_anonymous_on FROM sys.remote_service_bindings") == [
        ("Shop", "ToStock", "//Stock/Service", "FarUser", False)]
    assert rows(inst, "SELECT database_name, object_name, grantee, permission_name FROM "
                "sys.database_permissions ORDER BY grantee") == [
        ("Shop", "//Shop/Service", "FarUser", "SEND"), ("Shop", "//Shop/Service", "public",
                                                          "SEND")]
    # inside a batch, a database's views show its own rows, as SQL Server's do
    found = shop.execute("SELECT name, type_desc FROM sys.database_principals")
    assert [tuple(r) for rs in found for r in rs.rows] == [("FarUser", "SQL_USER")]
    for text, error, words in [
        ("CREATE REMOTE SERVICE BINDING Again TO SERVICE '//Stock/Service' WITH USER = FarUser",
         AlreadyExistsError, "already binds service '//Stock/Service'"),
        ("CREATE REMOTE SERVICE BINDING tostock TO SERVICE '//x' WITH USER = FarUser",
         AlreadyExistsError, "'ToStock' already exists"),
        ("CREATE REMOTE SERVICE BINDING B2 TO SERVICE '//x' WITH USER = Ghost",
         NotFoundError, "the user 'Ghost' does not exist in database 'Shop'"),
        ("GRANT SEND ON SERVICE::[//Nope] TO FarUser", NotFoundError,
         "service '//Nope' does not exist"),
        ("DROP USER FarUser", InUseError, "remote service binding ToStock"),
        ("DROP REMOTE SERVICE BINDING Ghost", NotFoundError, "'Ghost' does not exist"),
        ("CREATE USER c FOR CERTIFICATE PeerCert", NotFoundError, "certificates in master"),
    ]:
        before = state(inst)
        with pytest.raises(error, match=words):
            shop.execute(f"CREATE USER Extra WITHOUT LOGIN;\n{text}")
        assert state(inst) == before
    with shop.transaction():  # these change nothing the endpoint reads: a transaction may
        shop.execute("DROP REMOTE SERVICE BINDING ToStock; DROP USER FarUser")
    assert rows(inst, "SELECT count(*) FROM sys.remote_service_bindings") == [(0,)]
    assert rows(inst, "SELECT grantee FROM sys.database_permissions") == [("public",)]
    inst.execute("DROP DATABASE Shop")
    assert rows(inst, "SELECT count(*) FROM sys.database_permissions") == [(0,)]


# -- DENY, REVOKE and ALTER: what they change, and whom the endpoint admits ------------------


def _peer_login(inst, path) -> pybroker.Database:
    master = inst.database("master")
    master.execute(f"CREATE CERTIFICATE Own WITH SUBJECT = 's';\n{ENDPOINT};\n"
                   f"CREATE CERTIFICATE PeerCert FROM FILE = '{path}';\n"
                   "CREATE LOGIN PeerLogin FROM CERTIFICATE PeerCert;\n"
                   "GRANT CONNECT ON ENDPOINT::Broker TO PeerLogin")
    assert list(trusted_certificates(inst.kernel)) == ["PeerCert"]
    return master


def test_deny_beats_grant_and_revoke_removes_either(inst, peer_file):
    master = _peer_login(inst, peer_file[0])
    master.execute("DENY CONNECT ON ENDPOINT::Broker TO PeerLogin")  # replaces its GRANT
    assert trusted_certificates(inst.kernel) == {}
    assert rows(inst, "SELECT grantee, state, state_desc FROM sys.server_permissions") == [
        ("PeerLogin", "D", "DENY")]
    master.execute("GRANT CONNECT ON ENDPOINT::Broker TO PeerLogin, PUBLIC;\n"
                   "DENY CONNECT ON ENDPOINT::Broker TO PUBLIC")  # denied to every login
    assert trusted_certificates(inst.kernel) == {}
    master.execute("REVOKE CONNECT ON ENDPOINT::Broker FROM PUBLIC")  # the DENY goes
    assert list(trusted_certificates(inst.kernel)) == ["PeerCert"]
    master.execute("REVOKE CONNECT ON ENDPOINT::Broker FROM PeerLogin;\n"
                   "REVOKE CONNECT ON ENDPOINT::Broker FROM PeerLogin")  # nothing left: no-op
    assert trusted_certificates(inst.kernel) == {}
    assert rows(inst, "SELECT count(*) FROM sys.server_permissions") == [(0,)]


def test_a_disabled_login_connects_nothing_and_a_renamed_one_keeps_what_it_had(
        inst, peer_file):
    master = _peer_login(inst, peer_file[0])
    master.execute("CREATE USER PeerUser FOR LOGIN PeerLogin; ALTER LOGIN PeerLogin DISABLE")
    assert trusted_certificates(inst.kernel) == {}
    assert rows(inst, "SELECT name, is_disabled FROM sys.server_principals") == [
        ("PeerLogin", True)]
    master.execute("ALTER LOGIN peerlogin ENABLE; ALTER LOGIN PeerLogin WITH NAME = [Peer 2]")
    assert list(trusted_certificates(inst.kernel)) == ["PeerCert"]
    assert rows(inst, "SELECT name, is_disabled, certificate_name FROM "
                "sys.server_principals") == [("Peer 2", False, "PeerCert")]
    assert rows(inst, "SELECT grantee FROM sys.server_permissions") == [("Peer 2",)]
    assert rows(inst, "SELECT name, login_name FROM sys.database_principals") == [
        ("PeerUser", "Peer 2")]
    master.execute("REVOKE CONNECT ON ENDPOINT::Broker FROM [peer 2]")
    assert trusted_certificates(inst.kernel) == {}


def test_alter_user_renames_what_names_it(inst, peer_file):
    path, _ = peer_file
    master = inst.database("master")
    master.execute(f"CREATE CERTIFICATE Own WITH SUBJECT = 's';\n{ENDPOINT};\n"
                   "CREATE LOGIN PeerLogin WITH PASSWORD = 'p';\n"
                   "CREATE USER PeerUser FOR LOGIN PeerLogin;\n"
                   f"CREATE CERTIFICATE PeerCert AUTHORIZATION PeerUser FROM FILE = '{path}';\n"
                   "GRANT CONNECT ON ENDPOINT::Broker TO PeerLogin;\n"
                   "ALTER USER PeerUser WITH NAME = Owner, DEFAULT_SCHEMA = dbo")
    assert list(trusted_certificates(inst.kernel)) == ["PeerCert"]  # its owner, renamed
    with pytest.raises(InUseError, match="owns or is named by certificate PeerCert"):
        master.execute("DROP USER Owner")
    shop = inst.create_database("Shop")
    shop.execute("CREATE QUEUE q; CREATE SERVICE s ON QUEUE q; CREATE USER Far WITHOUT LOGIN;\n"
                 "GRANT SEND ON SERVICE::s TO Far; DENY SEND ON SERVICE::s TO PUBLIC;\n"
                 "CREATE REMOTE SERVICE BINDING b TO SERVICE 'far' WITH USER = Far;\n"
                 "ALTER USER far WITH NAME = Far2")
    assert rows(inst, "SELECT grantee, state_desc FROM sys.database_permissions ORDER BY 1") \
        == [("Far2", "GRANT"), ("public", "DENY")]
    assert rows(inst, "SELECT user_name FROM sys.remote_service_bindings") == [("Far2",)]
    shop.execute("REVOKE SEND ON SERVICE::s FROM Far2, PUBLIC")
    assert rows(inst, "SELECT count(*) FROM sys.database_permissions") == [(0,)]


def test_alter_certificate_keeps_active_for_begin_dialog(inst, peer_file):
    master = _peer_login(inst, peer_file[0])
    master.execute("ALTER CERTIFICATE PeerCert WITH ACTIVE FOR BEGIN_DIALOG = OFF;\n"
                   "ALTER CERTIFICATE PeerCert REMOVE PRIVATE KEY")
    assert rows(inst, "SELECT name, is_active_for_begin_dialog FROM sys.certificates") == [
        ("PeerCert", False)]
    # dialogs are secured by the endpoint certificates (P6): the peer stays admitted
    assert list(trusted_certificates(inst.kernel)) == ["PeerCert"]
    master.execute("ALTER CERTIFICATE PeerCert WITH ACTIVE FOR BEGIN_DIALOG = ON")
    assert rows(inst, "SELECT is_active_for_begin_dialog FROM sys.certificates") == [(True,)]


def test_endpoint_permissions_refuse_a_transaction(inst):
    master = inst.database("master")
    master.execute(f"CREATE CERTIFICATE Own WITH SUBJECT = 's'; {ENDPOINT}")
    with pytest.raises(pybroker.BrokerError, match="cannot run inside Database"), \
            master.transaction():
        master.execute("DENY CONNECT ON ENDPOINT::Broker TO PUBLIC")
    assert rows(inst, "SELECT count(*) FROM sys.server_permissions") == [(0,)]
