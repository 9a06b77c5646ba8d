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
    BackupCertificate,
    CreateLogin,
    CreateMasterKey,
    CreateRemoteServiceBinding,
    CreateUser,
    DropUser,
    Grant,
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
        rows(inst, "SELECT name FROM sys.certificates ORDER BY name"),
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
     Grant("CONNECT", "ENDPOINT", "Broker", ("l", "public"))),
    ("GRANT SEND ON SERVICE::[//Shop/Service] TO PUBLIC",
     Grant("SEND", "SERVICE", "//Shop/Service", ("public",))),
    ("BACKUP CERTIFICATE c TO FILE = N'C:\\certs\\c.cer'",
     BackupCertificate("c", "C:\\certs\\c.cer")),
    ("CREATE REMOTE SERVICE BINDING b AUTHORIZATION dbo TO SERVICE N'//Far' WITH USER = u, "
     "ANONYMOUS = ON", CreateRemoteServiceBinding("b", "//Far", "u", True)),
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
        ("ENDPOINT", "Broker", "PeerLogin", "CONNECT", "GRANT")]
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
    master = inst.database("master")
    master.execute(f"""
        CREATE MASTER KEY ENCRYPTION BY PASSWORD = 'k';
        CREATE CERTIFICATE Own WITH SUBJECT = 's'; {ENDPOINT};
        CREATE LOGIN PeerLogin WITH PASSWORD = 'p'; CREATE USER PeerUser FOR LOGIN PeerLogin;
        CREATE CERTIFICATE PeerCert AUTHORIZATION PeerUser FROM FILE = '{path}';
        GRANT CONNECT ON ENDPOINT::Broker TO PeerLogin;""")
    before = state(inst)
    assert before[-1] == ["PeerCert"]
    with pytest.raises(error, match=words):  # after statements that would have changed it
        master.execute("CREATE LOGIN Extra WITH PASSWORD = 'e'; CREATE USER Extra;\n"
                       "GRANT CONNECT ON ENDPOINT::Broker TO Extra;\n"
                       + text.format(path=path))
    assert state(inst) == before


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
