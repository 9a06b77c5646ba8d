"""CREATE / ALTER / DROP ROUTE in SQL Server's syntax (SPEC R10): the strict parser, and
Database.execute() running it as one all-or-nothing batch."""

from __future__ import annotations

import pytest

import pybroker
from pybroker import RouteDefinitionError, TsqlSyntaxError, UnsupportedStatementError
from pybroker.tsql import AlterRoute, CreateRoute, DropRoute, parse_batch

GUID = "5fb8d92b-ed69-4c80-afbb-2aa6a7d3cb2d"


# -- the parser ------------------------------------------------------------------------------


def test_R10_create_with_every_clause_in_any_order_and_case():
    (stmt,) = parse_batch(
        "create route [Balanced Route] with mirror_address = N'tcp://m:4022',\n"
        "  LIFETIME = 600, Address = 'tcp://a:4022', broker_instance = '" + GUID + "',\n"
        "  SERVICE_NAME = N'It''s//Svc';"
    )
    assert stmt == CreateRoute(
        name="Balanced Route", address="tcp://a:4022", service_name="It's//Svc",
        broker_instance=GUID, lifetime=600, mirror_address="tcp://m:4022",
    )


def test_R10_comments_quoted_names_and_optional_semicolons():
    statements = parse_batch(
        "-- set up\n"
        "CREATE ROUTE \"R1\" WITH ADDRESS = 'LOCAL' /* block\n comment */\n"
        "ALTER ROUTE [R]]1] WITH ADDRESS = 'TRANSPORT';;\n"
        "DROP ROUTE R2 -- gone\n"
    )
    assert statements == [
        CreateRoute("R1", "LOCAL"),
        AlterRoute("R]1", (("address", "TRANSPORT"),)),
        DropRoute("R2"),
    ]


def test_R10_alter_keeps_only_the_clauses_given():
    (stmt,) = parse_batch("ALTER ROUTE r WITH SERVICE_NAME = '', LIFETIME = +30")
    assert stmt.changes == (("service_name", ""), ("lifetime", 30))


def test_R10_1_create_without_ADDRESS_names_the_rule():
    with pytest.raises(RouteDefinitionError, match="needs ADDRESS") as caught:
        parse_batch("CREATE ROUTE r WITH SERVICE_NAME = 'S'")
    assert caught.value.rule == "R10.1"


@pytest.mark.parametrize("value", ["1.5", "'60'", "NULL", "1e3", "ten"])
def test_R10_2_lifetime_must_be_a_whole_number(value):
    with pytest.raises(RouteDefinitionError, match="whole number of seconds") as caught:
        parse_batch(f"CREATE ROUTE r WITH LIFETIME = {value}, ADDRESS = 'LOCAL'")
    assert caught.value.rule == "R10.2"
    assert "line 1, column 32" in str(caught.value)


def test_R10_2_a_negative_lifetime_parses_and_is_refused_when_run():
    (stmt,) = parse_batch("CREATE ROUTE r WITH LIFETIME = -5, ADDRESS = 'LOCAL'")
    assert stmt.lifetime == -5
    with pybroker.connect() as inst:
        db = inst.create_database("A")
        with pytest.raises(RouteDefinitionError, match="positive whole number") as caught:
            db.execute("CREATE ROUTE r WITH LIFETIME = -5, ADDRESS = 'LOCAL'")
        assert caught.value.rule == "R10.2"


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("", TsqlSyntaxError, "no statement"),
        ("  -- only a comment\n", TsqlSyntaxError, "no statement"),
        ("SELECT 1", UnsupportedStatementError, "'SELECT' at line 1, column 1"),
        ("CREATE TABLE t (x INT)", UnsupportedStatementError, "CREATE TABLE at line 1"),
        ("CREATE QUEUE q", UnsupportedStatementError, "CREATE/ALTER/DROP ROUTE only"),
        ("ALTER DATABASE d SET x", UnsupportedStatementError, "ALTER DATABASE"),
        ("GO", UnsupportedStatementError, "client batch separator"),
        ("CREATE ROUTE r AUTHORIZATION dbo WITH ADDRESS = 'LOCAL'", TsqlSyntaxError,
         "AUTHORIZATION at line 1, column 16"),
        ("CREATE ROUTE r WITH ADDRESS = 'a', ADDRESS = 'b'", TsqlSyntaxError,
         "ADDRESS is given twice (again at line 1, column 36)"),
        ("CREATE ROUTE r WITH COLOUR = 'red'", TsqlSyntaxError, "expected a route clause"),
        ("CREATE ROUTE r WITH ADDRESS 'LOCAL'", TsqlSyntaxError, "expected '=' after ADDRESS"),
        ("CREATE ROUTE r WITH ADDRESS = LOCAL", TsqlSyntaxError, "a string value for ADDRESS"),
        ("CREATE ROUTE r ADDRESS = 'LOCAL'", TsqlSyntaxError, "expected WITH"),
        ("CREATE ROUTE WITH ADDRESS = 'LOCAL'", TsqlSyntaxError, "expected a route name"),
        ("DROP ROUTE r extra", TsqlSyntaxError, "found 'extra' at line 1, column 14"),
        ("CREATE ROUTE r WITH ADDRESS = 'LOCAL',", TsqlSyntaxError, "the end of the batch"),
        ("CREATE ROUTE r WITH\n  ADDRESS = 'tcp://a:1", TsqlSyntaxError,
         "unterminated string at line 2, column 13"),
        ("DROP ROUTE [r", TsqlSyntaxError, "unterminated [identifier"),
        ("DROP ROUTE r /* open", TsqlSyntaxError, "unterminated /* comment"),
        ("DROP ROUTE r ?", TsqlSyntaxError, "unexpected character '?'"),
        ("DROP ROUTE []", TsqlSyntaxError, "an empty route name"),
    ],
)
def test_anything_not_fully_understood_is_refused(text, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("?", r"\?").replace("*", r"\*")):
        parse_batch(text)


# -- Database.execute() ------------------------------------------------------------------------


@pytest.fixture
def db():
    with pybroker.connect() as inst:
        yield inst.create_database("A")


def test_execute_creates_a_route_that_routing_uses(db):
    inst = db._instance
    db.execute("CREATE ROUTE ToS WITH SERVICE_NAME = 'S', ADDRESS = 'tcp://h:4022'")
    route = db.route("ToS")
    assert (route.remote_service_name, route.address) == ("S", "tcp://h:4022")
    assert inst.route("S", origin="A").outcome == "send"


def test_execute_alter_changes_only_the_clauses_given(db):
    db.execute(
        f"CREATE ROUTE r WITH SERVICE_NAME = 'S', BROKER_INSTANCE = '{GUID}', LIFETIME = 600, "
        "ADDRESS = 'tcp://a:1', MIRROR_ADDRESS = 'tcp://b:1'"
    )
    before = db.route("r")
    db.execute("ALTER ROUTE r WITH ADDRESS = 'tcp://c:1'")
    after = db.route("r")
    assert after.address == "tcp://c:1"
    assert (after.remote_service_name, after.broker_instance, after.mirror_address,
            after.lifetime) == ("S", GUID, "tcp://b:1", before.lifetime)
    db.execute("ALTER ROUTE r WITH MIRROR_ADDRESS = '', BROKER_INSTANCE = ''")
    cleared = db.route("r")
    assert (cleared.mirror_address, cleared.broker_instance) == (None, None)
    db.execute("ALTER ROUTE r WITH SERVICE_NAME = ''")
    assert db.route("r").remote_service_name is None


def test_execute_drop(db):
    db.execute("DROP ROUTE AutoCreatedLocal")
    assert db.routes() == []
    with pytest.raises(pybroker.NotFoundError, match="AutoCreatedLocal"):
        db.execute("DROP ROUTE AutoCreatedLocal")


def test_execute_batch_is_all_or_nothing(db):
    with pytest.raises(RouteDefinitionError, match="MIRROR_ADDRESS requires SERVICE_NAME"):
        db.execute(
            "CREATE ROUTE one WITH ADDRESS = 'tcp://a:1';\n"
            "DROP ROUTE AutoCreatedLocal;\n"
            "CREATE ROUTE two WITH ADDRESS = 'tcp://b:1', MIRROR_ADDRESS = 'tcp://c:1';"
        )
    assert [r.name for r in db.routes()] == ["AutoCreatedLocal"]
    with pytest.raises(TsqlSyntaxError):  # a syntax error anywhere: nothing runs
        db.execute("CREATE ROUTE one WITH ADDRESS = 'tcp://a:1'; SELECT 1")
    assert [r.name for r in db.routes()] == ["AutoCreatedLocal"]


@pytest.mark.parametrize(
    ("tsql", "message"),
    [
        ("CREATE ROUTE r WITH ADDRESS = 'tcp://a:1', MIRROR_ADDRESS = 'tcp://b:1'",
         "MIRROR_ADDRESS requires SERVICE_NAME"),
        ("CREATE ROUTE r WITH SERVICE_NAME = 'S', ADDRESS = 'LOCAL', "
         "MIRROR_ADDRESS = 'tcp://b:1'", "cannot be used with ADDRESS = 'LOCAL'"),
        (f"CREATE ROUTE r WITH BROKER_INSTANCE = '{GUID}', ADDRESS = 'tcp://a:1'",
         "BROKER_INSTANCE requires SERVICE_NAME"),
        ("CREATE ROUTE r WITH SERVICE_NAME = 'S', ADDRESS = 'TRANSPORT'", "TRANSPORT route"),
        ("CREATE ROUTE r WITH ADDRESS = 'udp://a:1'", "none of 'LOCAL'"),
        ("CREATE ROUTE r WITH ADDRESS = ''", "empty"),
        ("CREATE ROUTE r WITH SERVICE_NAME = '" + "s" * 257 + "', ADDRESS = 'LOCAL'",
         "at most 256"),
        ("CREATE ROUTE AutoCreatedLocal WITH ADDRESS = 'LOCAL'", "already exists"),
        ("CREATE ROUTE r WITH LIFETIME = 0, ADDRESS = 'LOCAL'", "positive whole number"),
    ],
)
def test_R10_2_violations_through_execute_name_the_rule(db, tsql, message):
    with pytest.raises(RouteDefinitionError, match=message) as caught:
        db.execute(tsql)
    assert caught.value.rule == "R10.2"
    assert [r.name for r in db.routes()] == ["AutoCreatedLocal"]


def test_execute_wants_text(db):
    with pytest.raises(pybroker.BrokerError, match="T-SQL text"):
        db.execute(b"DROP ROUTE x")
