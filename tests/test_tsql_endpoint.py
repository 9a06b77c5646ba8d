"""CREATE / ALTER / DROP ENDPOINT and CREATE / DROP CERTIFICATE on master's execute() (P2):
the strict parser, generated input, and real instances on 127.0.0.1 that define their
endpoint and admit each other in T-SQL."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import (
    AlreadyExistsError,
    BrokerError,
    InUseError,
    InvalidArgumentError,
    NotFoundError,
    TsqlSyntaxError,
    UnsupportedOptionError,
    UnsupportedStatementError,
    WireError,
)
from pybroker.core.tsql import (
    AlterEndpoint,
    CreateCertificateFromFile,
    CreateCertificateWithSubject,
    CreateEndpoint,
    CreateRoute,
    DropCertificate,
    DropEndpoint,
    parse_batch,
)
from tests.thread_helpers import held_open
from tests.wire_helpers import CONTRACT, ORDER, define_objects, drain, wait_for

SETTINGS = settings(derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

BROKER_ENDPOINT = ("CREATE ENDPOINT BrokerEndpoint STATE = STARTED AS TCP (LISTENER_PORT = 0, "
                   "LISTENER_IP = (127.0.0.1)) FOR SERVICE_BROKER (AUTHENTICATION = "
                   "CERTIFICATE {cert}, ENCRYPTION = REQUIRED ALGORITHM AES)")


def raises(error: type[Exception], message: str):
    return pytest.raises(error, match=re.escape(message))


def master_parse(text: str) -> list:
    return parse_batch(text, master=True)


# -- what it accepts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "statement"),
    [
        ("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 4022) FOR SERVICE_BROKER ()",
         CreateEndpoint("e", 4022)),
        ("create endpoint [My EP] authorization sa state = started\n"
         "  as tcp (listener_ip = all, listener_port = 0)\n"
         "  for service_broker (authentication = certificate MyCert\n"
         "    encryption = required algorithm aes\n"
         "    message_forwarding = disabled, message_forward_size = 20)",
         CreateEndpoint("My EP", 0, "STARTED", None, "MyCert", True, 20, False)),
        ("CREATE ENDPOINT e STATE = DISABLED AS TCP (LISTENER_PORT = 4023 LISTENER_IP = "
         "(0.0.0.0)) FOR SERVICE_BROKER (ENCRYPTION = DISABLED)",
         CreateEndpoint("e", 4023, "DISABLED", "0.0.0.0", encryption=False)),
        ("ALTER ENDPOINT e STATE = STOPPED", AlterEndpoint("e", (("state", "STOPPED"),))),
        ("ALTER ENDPOINT e STATE = STARTED AS TCP (LISTENER_IP = (127.0.0.1)) "
         "FOR SERVICE_BROKER (MESSAGE_FORWARD_SIZE = 5)",
         AlterEndpoint("e", (("state", "STARTED"), ("listener_ip", "127.0.0.1"),
                             ("message_forward_size", 5)))),
        ("DROP ENDPOINT e", DropEndpoint("e")),
        ("CREATE CERTIFICATE Peer AUTHORIZATION PeerUser FROM FILE = N'c:\\certs\\peer.cer'",
         CreateCertificateFromFile("Peer", "c:\\certs\\peer.cer", "PeerUser")),
        ("CREATE CERTIFICATE Me WITH SUBJECT = 'Shop''s endpoint'",
         CreateCertificateWithSubject("Me", "Shop's endpoint")),
        ("DROP CERTIFICATE Peer", DropCertificate("Peer")),
    ],
)  # fmt: skip
def test_P2_endpoint_and_certificate_statements_parse(text, statement):
    assert master_parse(text) == [statement]


def test_they_mix_with_route_ddl_in_one_batch():
    assert master_parse(
        "CREATE CERTIFICATE B FROM FILE = 'b.pem'\n"
        "CREATE ROUTE r WITH ADDRESS = 'LOCAL';\n"
        "DROP ENDPOINT e"
    ) == [CreateCertificateFromFile("B", "b.pem"), CreateRoute("r", "LOCAL"), DropEndpoint("e")]


def render(e: CreateEndpoint) -> str:
    """The statement as a script would write it (the round trip's other half)."""
    ip = "ALL" if e.listener_ip is None else f"({e.listener_ip})"
    options = []
    if e.certificate is not None:
        options.append(f"AUTHENTICATION = CERTIFICATE [{e.certificate.replace(']', ']]')}]")
    options.append("ENCRYPTION = " + ("REQUIRED ALGORITHM AES" if e.encryption else "DISABLED"))
    if e.message_forward_size is not None:
        options.append(f"MESSAGE_FORWARD_SIZE = {e.message_forward_size}")
    return (f"CREATE ENDPOINT [{e.name.replace(']', ']]')}] STATE = {e.state} AS TCP "
            f"(LISTENER_PORT = {e.port}, LISTENER_IP = {ip}) FOR SERVICE_BROKER "
            f"({', '.join(options)})")


NAMES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                min_size=1, max_size=20)
ENDPOINTS = st.builds(
    CreateEndpoint, name=NAMES, port=st.integers(0, 65535),
    state=st.sampled_from(["STARTED", "STOPPED", "DISABLED"]),
    listener_ip=st.one_of(st.none(), st.ip_addresses(v=4).map(str)),
    certificate=st.one_of(st.none(), NAMES), encryption=st.booleans(),
    message_forward_size=st.one_of(st.none(), st.integers(1, 2**31 - 1)))


@SETTINGS
@given(endpoint=ENDPOINTS)
def test_create_endpoint_round_trips(endpoint):
    assert master_parse(render(endpoint)) == [endpoint]


# -- what it refuses ---------------------------------------------------------------------------

TCP = "AS TCP (LISTENER_PORT = 4022)"


@pytest.mark.parametrize(
    ("text", "option"),
    [
        (f"CREATE ENDPOINT e {TCP} FOR SERVICE_BROKER (AUTHENTICATION = WINDOWS KERBEROS)",
         "AUTHENTICATION = WINDOWS"),
        (f"CREATE ENDPOINT e {TCP} FOR SERVICE_BROKER (AUTHENTICATION = CERTIFICATE c "
         "WINDOWS)", "AUTHENTICATION = CERTIFICATE ... WINDOWS"),
        (f"CREATE ENDPOINT e {TCP} FOR SERVICE_BROKER (ENCRYPTION = SUPPORTED)",
         "ENCRYPTION = SUPPORTED"),
        (f"CREATE ENDPOINT e {TCP} FOR SERVICE_BROKER (ENCRYPTION = REQUIRED ALGORITHM RC4)",
         "ALGORITHM RC4"),
        (f"CREATE ENDPOINT e {TCP} FOR SERVICE_BROKER (ENCRYPTION = REQUIRED ALGORITHM AES "
         "RC4)", "ALGORITHM AES RC4"),
        (f"CREATE ENDPOINT e {TCP} FOR DATABASE_MIRRORING (ROLE = ALL)",
         "FOR DATABASE_MIRRORING"),
        ("CREATE ENDPOINT e AS HTTP (PATH = '/x') FOR SOAP ()", "AS HTTP"),
        ("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 1, LISTENER_IP = (\"::1\")) "
         "FOR SERVICE_BROKER ()", "an IPv6 LISTENER_IP"),
        ("CREATE CERTIFICATE c FROM FILE = 'c.cer' WITH PRIVATE KEY (FILE = 'k')",
         "WITH PRIVATE KEY"),
        ("CREATE CERTIFICATE c FROM BINARY = 0x30", "FROM BINARY"),
        ("CREATE CERTIFICATE c ENCRYPTION BY PASSWORD = 'p' WITH SUBJECT = 's'",
         "ENCRYPTION BY PASSWORD"),
        ("CREATE CERTIFICATE c WITH SUBJECT = 's' ACTIVE FOR BEGIN_DIALOG = ON",
         "ACTIVE FOR BEGIN_DIALOG"),
    ],
)  # fmt: skip
def test_options_pybroker_does_not_run_are_refused_by_name(text, option):
    with pytest.raises(UnsupportedOptionError) as caught:
        master_parse(text)
    assert caught.value.option == option
    assert f"{option} at line 1" in str(caught.value)
    assert "is not supported" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("CREATE ENDPOINT e FOR SERVICE_BROKER ()", "expected AS TCP but found 'FOR'"),
        ("CREATE ENDPOINT e AS TCP (LISTENER_IP = ALL) FOR SERVICE_BROKER ()",
         "AS TCP at line 1, column 19 has no LISTENER_PORT"),
        ("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 65536) FOR SERVICE_BROKER ()",
         "LISTENER_PORT = 65536 at line 1, column 27: expected a port number from 0"),
        ("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 1.5) FOR SERVICE_BROKER ()",
         "expected a port number from 0 to 65535 for LISTENER_PORT but found '1.5'"),
        ("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 1, LISTENER_PORT = 2) FOR "
         "SERVICE_BROKER ()", "LISTENER_PORT is given twice"),
        ("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 1, LISTENER_IP = (300.1.1.1)) FOR "
         "SERVICE_BROKER ()", "expected an IPv4 address such as 127.0.0.1"),
        ("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 1,) FOR SERVICE_BROKER ()",
         "expected LISTENER_PORT or LISTENER_IP but found ')'"),
        ("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 1) FOR SERVICE_BROKER",
         "expected '(' after FOR SERVICE_BROKER"),
        ("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 1) FOR SERVICE_BROKER (ENCRYPTION = "
         "REQUIRED, ENCRYPTION = DISABLED)", "ENCRYPTION is given twice"),
        ("CREATE ENDPOINT e STATE = RUNNING AS TCP (LISTENER_PORT = 1) FOR SERVICE_BROKER ()",
         "expected STARTED, STOPPED or DISABLED after STATE = but found 'RUNNING'"),
        ("ALTER ENDPOINT e", "expected STATE =, AS TCP (...) or FOR SERVICE_BROKER (...)"),
        ("CREATE CERTIFICATE c", "expected FROM FILE = 'path' or WITH SUBJECT = 'subject'"),
        ("CREATE CERTIFICATE c FROM FILE = ''", "must hold 1 to 4000 characters"),
        ("CREATE CERTIFICATE c FROM FILE = \"c.pem\"", "(strings take single quotes)"),
    ],
)  # fmt: skip
def test_malformed_statements_say_where_and_what_was_expected(text, message):
    with raises(TsqlSyntaxError, message):
        master_parse(text)


@pytest.mark.parametrize("text", [
    "CREATE ENDPOINT e AS TCP (LISTENER_PORT = 0) FOR SERVICE_BROKER ()",
    "ALTER ENDPOINT e STATE = STOPPED", "DROP ENDPOINT e",
    "CREATE CERTIFICATE c FROM FILE = 'c.pem'", "DROP CERTIFICATE c",
])
def test_other_databases_refuse_them_pointing_at_master(text):
    with pytest.raises(UnsupportedStatementError, match=r"master database's execute\(\)"):
        parse_batch(text)
    with pybroker.connect(None, worker=False) as inst:
        db = inst.create_database("Shop")
        with pytest.raises(UnsupportedStatementError, match="master"):
            db.execute(text)


VOCABULARY = st.sampled_from([
    "CREATE", "ALTER", "DROP", "ENDPOINT", "CERTIFICATE", "e", "STATE", "=", "STARTED",
    "AS", "TCP", "(", ")", ",", "LISTENER_PORT", "LISTENER_IP", "ALL", "0", "4022",
    "127.0.0.1", "FOR", "SERVICE_BROKER", "AUTHENTICATION", "ENCRYPTION", "REQUIRED",
    "DISABLED", "ALGORITHM", "AES", "RC4", "WINDOWS", "MESSAGE_FORWARDING",
    "MESSAGE_FORWARD_SIZE", "FROM", "FILE", "'x.pem'", "WITH", "SUBJECT", "'s'",
    "AUTHORIZATION", ";", "[", "]", "N'", "/*", "--", "\n",
])


@SETTINGS
@given(text=st.one_of(st.lists(VOCABULARY, max_size=30).map(" ".join),
                      st.text(max_size=60),
                      st.builds(lambda e, cut: render(e)[:cut], ENDPOINTS, st.integers(0, 200))))
def test_any_text_raises_nothing_but_broker_errors(text):
    for master in (True, False):
        try:
            statements = parse_batch(text, master=master)
        except BrokerError:
            continue
        assert statements


# -- real instances ----------------------------------------------------------------------------


def write_pem(inst: pybroker.Instance, path: Path) -> Path:
    path.write_text(inst.certificate, encoding="ascii")
    return path


def write_der(inst: pybroker.Instance, path: Path) -> Path:
    """As SQL Server's BACKUP CERTIFICATE ... TO FILE writes it."""
    cert = x509.load_pem_x509_certificate(inst.certificate.encode("ascii"))
    path.write_bytes(cert.public_bytes(serialization.Encoding.DER))
    return path


def started(inst: pybroker.Instance) -> pybroker.BrokerEndpoint:
    endpoint = inst.endpoint
    assert endpoint is not None and not endpoint.is_closed
    return endpoint


def certificate_names(inst: pybroker.Instance) -> list[str]:
    return [row[0] for row in inst.sql("SELECT name FROM sys.certificates ORDER BY name")
            .fetchall()]


def test_P2_create_endpoint_starts_a_reachable_listener(tmp_path):
    with pybroker.connect(tmp_path / "a.duckdb") as inst:
        master = inst.database("master")
        master.execute("CREATE ENDPOINT BrokerEndpoint STATE = STARTED AS TCP "
                       "(LISTENER_PORT = 0) FOR SERVICE_BROKER ()")  # ALL: 127.0.0.1
        endpoint = started(inst)
        assert endpoint.address == f"tcp://127.0.0.1:{endpoint.port}" and endpoint.port > 0
        with socket.create_connection(("127.0.0.1", endpoint.port), timeout=5):
            pass
        master.execute("ALTER ENDPOINT brokerendpoint STATE = STOPPED")  # names ignore case
        assert inst.endpoint is None and endpoint.is_closed
        master.execute("ALTER ENDPOINT BrokerEndpoint STATE = STARTED")
        again = started(inst)
        master.execute("DROP ENDPOINT BrokerEndpoint")
        assert inst.endpoint is None and again.is_closed
        with pytest.raises(NotFoundError, match="endpoint 'BrokerEndpoint' does not exist"):
            master.execute("DROP ENDPOINT BrokerEndpoint")


def test_P2_a_stopped_endpoint_does_not_listen_and_options_apply(tmp_path):
    with pybroker.connect(tmp_path / "a.duckdb") as inst:
        master = inst.database("master")
        master.execute("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 0) FOR SERVICE_BROKER "
                       "(ENCRYPTION = DISABLED, MESSAGE_FORWARD_SIZE = 25)")  # STOPPED
        assert inst.endpoint is None
        assert inst.forwarding_size_mb == 25  # R7.3
        master.execute("ALTER ENDPOINT e STATE = STARTED")
        assert started(inst)._transport.settings.encryption is False
        with raises(AlreadyExistsError, "endpoint 'e' already exists: an instance has one"):
            master.execute("CREATE ENDPOINT f AS TCP (LISTENER_PORT = 0) FOR SERVICE_BROKER ()")
        with raises(InvalidArgumentError, "forwarding_size_mb"):
            master.execute("ALTER ENDPOINT e FOR SERVICE_BROKER (MESSAGE_FORWARD_SIZE = 0)")
        assert inst.forwarding_size_mb == 25


def test_P2_two_instances_admit_each_other_in_tsql_and_talk(tmp_path):
    a = pybroker.connect(tmp_path / "a.duckdb", retry_scale=0.01)
    b = pybroker.connect(tmp_path / "b.duckdb", retry_scale=0.01)
    try:
        a_master, b_master = a.database("master"), b.database("master")
        a_master.execute("CREATE CERTIFICATE ShopCert WITH SUBJECT = 'Shop endpoint'")
        assert "CN=Shop endpoint" in pybroker.core.wire.certificates.certificate_info(
            a.certificate).subject  # made with the subject given
        b_pem = write_pem(b, tmp_path / "b.pem")
        a_der = write_der(a, tmp_path / "a.cer")
        a_master.execute(  # owned by a user whose login may connect, as in SQL Server
            "CREATE LOGIN StockLogin WITH PASSWORD = 'p'; CREATE USER StockUser FOR LOGIN "
            f"StockLogin; CREATE CERTIFICATE StockCert AUTHORIZATION StockUser FROM FILE = "
            f"'{b_pem}';\n" + BROKER_ENDPOINT.format(cert="ShopCert")
            + "; GRANT CONNECT ON ENDPOINT::BrokerEndpoint TO StockLogin")
        b_master.execute(f"CREATE CERTIFICATE ShopCert FROM FILE = '{a_der}'\n"
                         "CREATE ENDPOINT StockEndpoint STATE = STARTED AS TCP "
                         "(LISTENER_PORT = 0) FOR SERVICE_BROKER (ENCRYPTION = REQUIRED)")
        assert certificate_names(a) == ["StockCert"] and certificate_names(b) == ["ShopCert"]
        ea, eb = started(a), started(b)
        shop, stock = a.create_database("Shop"), b.create_database("Stock")
        for db in (shop, stock):
            define_objects(db)
        shop.execute(f"CREATE QUEUE ShopQueue; CREATE SERVICE ShopService ON QUEUE ShopQueue;"
                     f"CREATE ROUTE ToStock WITH SERVICE_NAME = 'StockService', "
                     f"ADDRESS = '{eb.address}'")
        stock.execute(f"CREATE QUEUE StockQueue; CREATE SERVICE StockService ON QUEUE "
                      f"StockQueue ([{CONTRACT}]); CREATE ROUTE ToShop WITH SERVICE_NAME = "
                      f"'ShopService', ADDRESS = '{ea.address}'")
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<order n='1'/>", message_type=ORDER)
        got = drain(stock, "StockQueue", 1)
        assert [m.message_body for m in got] == [b"<order n='1'/>"]
        wait_for(lambda: ("ShopCert",) in b.sql(
            "SELECT principal_name FROM sys.dm_broker_connections").fetchall(),
            timeout=10, what="Shop's connection, logged in as the certificate's name")

        b_master.execute("DROP CERTIFICATE ShopCert")
        assert certificate_names(b) == []
        with raises(InUseError, "'ShopCert' is this instance's own endpoint certificate"):
            a_master.execute("DROP CERTIFICATE ShopCert")
    finally:
        a.close()
        b.close()


def test_the_certificate_name_and_the_endpoint_are_kept_but_opening_starts_nothing(tmp_path):
    path = tmp_path / "a.duckdb"
    with pybroker.connect(path) as inst:
        pem = inst.certificate  # made before T-SQL names it: kept as it is (peers trust it)
        master = inst.database("master")
        master.execute("CREATE CERTIFICATE Me WITH SUBJECT = 'ignored, the certificate exists'")
        assert inst.certificate == pem
        master.execute(BROKER_ENDPOINT.format(cert="Me"))
        started(inst)
    with pybroker.connect(path) as inst:
        assert inst.endpoint is None  # defined STARTED, but opening a file binds no port
        master = inst.database("master")
        with raises(AlreadyExistsError, "already exists as 'Me'"):
            master.execute("CREATE CERTIFICATE Other WITH SUBJECT = 's'")
        with raises(AlreadyExistsError, "endpoint 'BrokerEndpoint' already exists"):
            master.execute(BROKER_ENDPOINT.format(cert="Me"))
        with raises(NotFoundError, "certificate 'Nope' does not exist: this instance's "
                    "endpoint certificate is 'Me'"):
            master.execute("ALTER ENDPOINT BrokerEndpoint FOR SERVICE_BROKER "
                           "(AUTHENTICATION = CERTIFICATE Nope)")
        master.execute("ALTER ENDPOINT BrokerEndpoint STATE = STARTED")  # as it was
        started(inst)


def test_certificate_errors(tmp_path):
    with pybroker.connect(tmp_path / "a.duckdb") as a, \
            pybroker.connect(tmp_path / "b.duckdb") as b:
        master = a.database("master")
        with raises(NotFoundError, "name this instance's endpoint certificate with CREATE "
                    "CERTIFICATE Me WITH SUBJECT"):
            master.execute(BROKER_ENDPOINT.format(cert="Me"))
        with raises(WireError, "cannot read certificate file"):
            master.execute(f"CREATE CERTIFICATE B FROM FILE = '{tmp_path / 'missing.pem'}'")
        (tmp_path / "junk.pem").write_bytes(b"not a certificate")
        with raises(WireError, "not a certificate"):
            master.execute(f"CREATE CERTIFICATE B FROM FILE = '{tmp_path / 'junk.pem'}'")
        b_pem = write_pem(b, tmp_path / "b.pem")
        master.execute(f"CREATE CERTIFICATE B FROM FILE = '{b_pem}'")
        with raises(AlreadyExistsError, "certificate 'B' already exists (a trusted peer)"):
            master.execute(f"CREATE CERTIFICATE B FROM FILE = '{b_pem}'")
        with raises(InvalidArgumentError, "certificate 'B' is a trusted peer's"):
            master.execute(BROKER_ENDPOINT.format(cert="B"))
        with raises(NotFoundError, "no trusted peer is called 'C'"):
            master.execute("DROP CERTIFICATE C")


# -- all or nothing ----------------------------------------------------------------------------


def test_a_batch_that_cannot_bind_its_port_changes_nothing(tmp_path):
    with pybroker.connect(tmp_path / "a.duckdb") as a, \
            pybroker.connect(tmp_path / "b.duckdb") as b, socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        b_pem = write_pem(b, tmp_path / "b.pem")
        master = a.database("master")
        with pytest.raises(WireError, match="cannot start the broker endpoint"):
            master.execute(f"CREATE CERTIFICATE B FROM FILE = '{b_pem}';"
                           "CREATE CERTIFICATE Me WITH SUBJECT = 'me';"
                           "CREATE ENDPOINT e STATE = STARTED AS TCP (LISTENER_PORT = "
                           f"{port}) FOR SERVICE_BROKER (MESSAGE_FORWARD_SIZE = 30)")
        assert certificate_names(a) == [] and a.forwarding_size_mb == 10
        assert a.endpoint is None
        # nothing was defined or named: the same names are free
        master.execute("CREATE CERTIFICATE Me WITH SUBJECT = 'me'; CREATE ENDPOINT e STATE = "
                       "STARTED AS TCP (LISTENER_PORT = 0) FOR SERVICE_BROKER ()")
        started(a)


def test_a_failed_batch_restarts_the_endpoint_it_closed(tmp_path):
    with pybroker.connect(tmp_path / "a.duckdb") as inst:
        master = inst.database("master")
        master.execute("CREATE ENDPOINT e STATE = STARTED AS TCP (LISTENER_PORT = 0) "
                       "FOR SERVICE_BROKER ()")
        port = started(inst).port
        with raises(pybroker.RouteDefinitionError, "ADDRESS 'nowhere' is none of"):
            master.execute("DROP ENDPOINT e; CREATE ROUTE r WITH ADDRESS = 'nowhere'")
        assert started(inst).port == port  # the same endpoint, listening again
        with pytest.raises(NotFoundError):
            master.execute("ALTER ENDPOINT e STATE = STOPPED; DROP ENDPOINT other")
        assert started(inst).port == port  # refused before anything was closed
        with pytest.raises(pybroker.RouteDefinitionError):
            master.execute("CREATE CERTIFICATE Me WITH SUBJECT = 's'; "
                           "CREATE ROUTE r WITH ADDRESS = 'nowhere'")
        master.execute("CREATE CERTIFICATE Me WITH SUBJECT = 's'")  # the name was not kept


def test_a_batch_that_starts_an_endpoint_then_fails_leaves_none(tmp_path):
    with pybroker.connect(tmp_path / "a.duckdb") as inst:
        master = inst.database("master")
        with pytest.raises(pybroker.RouteDefinitionError):
            master.execute("CREATE ENDPOINT e STATE = STARTED AS TCP (LISTENER_PORT = 0) "
                           "FOR SERVICE_BROKER (); CREATE ROUTE r WITH ADDRESS = 'nowhere'")
        assert inst.endpoint is None
        master.execute("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 0) FOR SERVICE_BROKER ()")


def test_one_endpoint_per_instance_and_not_inside_a_transaction(tmp_path):
    with pybroker.connect(tmp_path / "a.duckdb") as inst:
        master = inst.database("master")
        api = inst.start_endpoint(0)
        with raises(WireError, "was started by start_endpoint() on"):
            master.execute("CREATE ENDPOINT e STATE = STARTED AS TCP (LISTENER_PORT = 0) "
                           "FOR SERVICE_BROKER ()")
        assert not api.is_closed
        api.close()
        with master.transaction(), raises(WireError, "inside Database.transaction()"):
            master.execute("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 0) FOR SERVICE_BROKER ()")


# -- kept in the instance file -----------------------------------------------------------------


def endpoint_rows(inst: pybroker.Instance) -> tuple[list, list]:
    broker = inst.sql(
        "SELECT name, endpoint_id, protocol_desc, type_desc, state, state_desc, "
        "is_message_forwarding_enabled, message_forwarding_size, connection_auth_desc, "
        "certificate_name, encryption_algorithm, encryption_algorithm_desc "
        "FROM sys.service_broker_endpoints").fetchall()
    tcp = inst.sql("SELECT name, endpoint_id, protocol_desc, type_desc, state_desc, port, "
                   "is_dynamic_port, ip_address FROM sys.tcp_endpoints").fetchall()
    return broker, tcp


def test_P2_create_alter_drop_endpoint_are_kept_in_the_file(tmp_path):
    path = tmp_path / "a.duckdb"
    with pybroker.connect(path) as inst:
        inst.database("master").execute(
            "CREATE CERTIFICATE Me WITH SUBJECT = 'me';"
            "CREATE ENDPOINT BrokerEndpoint STATE = DISABLED AS TCP (LISTENER_PORT = 4022, "
            "LISTENER_IP = (10.1.2.3)) FOR SERVICE_BROKER (AUTHENTICATION = CERTIFICATE Me, "
            "ENCRYPTION = DISABLED, MESSAGE_FORWARDING = DISABLED, MESSAGE_FORWARD_SIZE = 25)")
    with pybroker.connect(path) as inst:
        assert inst.endpoint is None
        assert endpoint_rows(inst) == (
            [("BrokerEndpoint", 65536, "TCP", "SERVICE_BROKER", 2, "DISABLED", False, 25,
              "CERTIFICATE", "Me", 0, "NONE")],
            [("BrokerEndpoint", 65536, "TCP", "SERVICE_BROKER", "DISABLED", 4022, False,
              "10.1.2.3")])
        inst.database("master").execute(
            "ALTER ENDPOINT brokerendpoint STATE = STOPPED AS TCP (LISTENER_PORT = 0, "
            "LISTENER_IP = ALL) FOR SERVICE_BROKER (ENCRYPTION = REQUIRED ALGORITHM AES)")
        assert inst.endpoint is None  # STOPPED: nothing listens
    with pybroker.connect(path) as inst:
        assert endpoint_rows(inst) == (
            [("BrokerEndpoint", 65536, "TCP", "SERVICE_BROKER", 1, "STOPPED", False, 25,
              "CERTIFICATE", "Me", 2, "AES")],
            [("BrokerEndpoint", 65536, "TCP", "SERVICE_BROKER", "STOPPED", 0, True, None)])
        inst.database("master").execute("DROP ENDPOINT BrokerEndpoint")
    with pybroker.connect(path) as inst:
        assert endpoint_rows(inst) == ([], [])
        inst.database("master").execute(
            "CREATE ENDPOINT Again STATE = STARTED AS TCP (LISTENER_PORT = 0) "
            "FOR SERVICE_BROKER ()")
        port = started(inst).port
        assert endpoint_rows(inst) == (  # listening, and the file still says port 0
            [("Again", 65537, "TCP", "SERVICE_BROKER", 0, "STARTED", False, 25,
              "CERTIFICATE", None, 2, "AES")],
            [("Again", 65537, "TCP", "SERVICE_BROKER", "STARTED", 0, True, None)])
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass


def test_a_refused_batch_leaves_the_stored_definition_as_it_was(tmp_path):
    path = tmp_path / "a.duckdb"
    bad_route = "CREATE ROUTE r WITH ADDRESS = 'nowhere'"
    with pybroker.connect(path) as inst, socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        master = inst.database("master")
        with pytest.raises(pybroker.RouteDefinitionError):
            master.execute("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 0) FOR SERVICE_BROKER ();"
                           + bad_route)
        assert endpoint_rows(inst) == ([], [])
        master.execute("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 5000) FOR SERVICE_BROKER ()")
        before = endpoint_rows(inst)
        for batch in (f"ALTER ENDPOINT e AS TCP (LISTENER_PORT = 5001); {bad_route}",
                      f"DROP ENDPOINT e; {bad_route}",
                      f"DROP ENDPOINT e; CREATE ENDPOINT f AS TCP (LISTENER_PORT = 1) "
                      f"FOR SERVICE_BROKER (); {bad_route}"):
            with pytest.raises(pybroker.RouteDefinitionError):
                master.execute(batch)
            assert endpoint_rows(inst) == before, batch
        with pytest.raises(WireError, match="cannot start the broker endpoint"):
            master.execute(f"ALTER ENDPOINT e STATE = STARTED AS TCP (LISTENER_PORT = "
                           f"{taken.getsockname()[1]})")
        assert endpoint_rows(inst) == before and inst.endpoint is None
    with pybroker.connect(path) as inst:
        assert endpoint_rows(inst) == before


def test_start_endpoint_takes_what_it_is_not_given_from_the_file(tmp_path):
    with pybroker.connect(tmp_path / "a.duckdb") as inst:
        master = inst.database("master")
        master.execute("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 0) "
                       "FOR SERVICE_BROKER (ENCRYPTION = DISABLED)")  # STOPPED
        defined = inst.start_endpoint()  # this call starts it, whatever its STATE
        assert defined.address == f"tcp://127.0.0.1:{defined.port}"
        assert defined._transport.settings.encryption is False
        master.execute("ALTER ENDPOINT e FOR SERVICE_BROKER (ENCRYPTION = DISABLED)")
        assert defined.is_closed and inst.endpoint is None  # the definition says STOPPED
        override = inst.start_endpoint(0, encryption=True)
        assert override._transport.settings.encryption is True
        master.execute("DROP ENDPOINT e")  # it is the definition's: it goes with it
        assert override.is_closed and inst.endpoint is None
        plain = inst.start_endpoint(0)  # no definition: start_endpoint()'s own
        assert plain._transport.settings.encryption is True
        with raises(WireError, "was started by start_endpoint() on"):
            master.execute("CREATE ENDPOINT e STATE = STARTED AS TCP (LISTENER_PORT = 0) "
                           "FOR SERVICE_BROKER ()")
        assert not plain.is_closed


def test_a_definition_changed_between_the_check_and_the_write_is_refused(tmp_path):
    from pybroker.core.routing.cache import NOTHING
    from pybroker.kernel.broker_endpoint.ddl import ServerBatch

    with pybroker.connect(tmp_path / "a.duckdb") as inst:
        master = inst.database("master")
        master.execute("CREATE ENDPOINT e AS TCP (LISTENER_PORT = 5000) FOR SERVICE_BROKER ()")
        alter = AlterEndpoint("e", (("state", "DISABLED"),))
        batch = ServerBatch(master, [alter])
        with batch:  # step 1 checked the definition
            # another thread's batch, between this one's check and its write
            master.execute("ALTER ENDPOINT e AS TCP (LISTENER_PORT = 5001)")
            with pytest.raises(WireError, match="changed while this batch ran"), \
                    inst.kernel.write(NOTHING):
                batch.run(alter)
                batch.finish()
        assert endpoint_rows(inst)[1][0][4:6] == ("STOPPED", 5001)


@settings(SETTINGS, max_examples=30)  # each opens a real file twice
@given(endpoint=ENDPOINTS.filter(lambda e: e.state != "STARTED"))
def test_any_definition_reads_back_from_the_file_as_written(tmp_path, endpoint):
    from pybroker.kernel.broker_endpoint.ddl import stored_endpoint

    path = tmp_path / "round.duckdb"
    endpoint = CreateEndpoint(endpoint.name, endpoint.port, endpoint.state,
                              endpoint.listener_ip, None, endpoint.encryption,
                              endpoint.message_forward_size)  # no certificate to name
    with pybroker.connect(path, worker=False) as inst:
        inst.database("master").execute(render(endpoint))
    with pybroker.connect(path, worker=False) as inst:
        stored = stored_endpoint(inst.kernel)
        assert stored == CreateEndpoint(endpoint.name, endpoint.port, endpoint.state,
                                        endpoint.listener_ip, None, endpoint.encryption)
        tcp = inst.sql("SELECT name, port, ip_address FROM sys.tcp_endpoints").fetchall()
        assert tcp == [(endpoint.name, endpoint.port, endpoint.listener_ip)]
        inst.database("master").execute(f"DROP ENDPOINT [{endpoint.name.replace(']', ']]')}]")


def test_R7_3_message_forwarding_enabled_and_disabled_set_the_instance_setting(tmp_path):
    with pybroker.connect(tmp_path / "f.duckdb") as inst:
        master = inst.database("master")
        master.execute(f"CREATE ENDPOINT e STATE = STOPPED {TCP} FOR SERVICE_BROKER "
                       "(MESSAGE_FORWARDING = ENABLED, MESSAGE_FORWARD_SIZE = 3)")
        assert (inst.forwarding, inst.forwarding_size_mb) == (True, 3)
        assert inst.sql("SELECT is_message_forwarding_enabled, message_forwarding_size "
                        "FROM sys.service_broker_endpoints").fetchone() == (True, 3)
        master.execute("ALTER ENDPOINT e FOR SERVICE_BROKER (MESSAGE_FORWARD_SIZE = 4)")
        assert (inst.forwarding, inst.forwarding_size_mb) == (True, 4)  # left as it was
        master.execute("ALTER ENDPOINT e FOR SERVICE_BROKER (MESSAGE_FORWARDING = DISABLED)")
        assert inst.forwarding is False


def test_an_endpoint_statement_waits_for_another_threads_transaction(tmp_path):
    """ENDPOINT statements are refused inside the caller's own Database.transaction(), not
    while another thread has one open: then the statement waits for it and runs."""
    import threading

    with pybroker.connect(tmp_path / "a.duckdb") as inst:
        master = inst.database("master")
        with held_open(master.transaction, lambda: master.execute("CREATE QUEUE held")) \
                as release:
            threading.Timer(0.2, release.set).start()
            master.execute("CREATE ENDPOINT e STATE = STARTED AS TCP (LISTENER_PORT = 0) "
                           "FOR SERVICE_BROKER (ENCRYPTION = DISABLED)")
        assert inst.endpoint is not None and not inst.endpoint.is_closed
        assert [q.name for q in master.queues()] == ["held"]  # the other thread's commit
