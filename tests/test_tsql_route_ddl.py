"""CREATE / ALTER / DROP ROUTE in SQL Server's syntax (SPEC R10): the strict parser, and
Database.execute() running it as one all-or-nothing batch."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from conftest import T0  # the fake clock's epoch seconds

import pybroker
from pybroker import RouteDefinitionError, TsqlSyntaxError, UnsupportedStatementError
from pybroker.core.tsql import AlterRoute, CreateRoute, DropRoute, parse_batch

GUID = "5fb8d92b-ed69-4c80-afbb-2aa6a7d3cb2d"


def raises(error: type[Exception], message: str):
    """pytest.raises matching ``message`` literally (the messages hold brackets, '?', ...)."""
    return pytest.raises(error, match=re.escape(message))


# -- the parser: what it accepts -------------------------------------------------------------


def test_R10_create_with_every_clause_in_any_order_and_any_case():
    (stmt,) = parse_batch(
        "create route [Balanced Route] with mirror_address = N'tcp://m:4022',\n"
        "  LIFETIME = 600, Address = 'tcp://a:4022', broker_instance = n'" + GUID + "',\n"
        "  SERVICE_NAME = N'It''s//Svc';"
    )
    assert stmt == CreateRoute(
        name="Balanced Route",
        address="tcp://a:4022",
        service_name="It's//Svc",
        broker_instance=GUID,
        lifetime=600,
        mirror_address="tcp://m:4022",
    )


def test_R10_1_only_ADDRESS_is_required():
    assert parse_batch("CREATE ROUTE r WITH ADDRESS = 'LOCAL'") == [CreateRoute("r", "LOCAL")]


def test_R10_names_plain_bracketed_and_double_quoted_with_escapes():
    statements = parse_batch('DROP ROUTE plain_1; DROP ROUTE [a]]b c]; DROP ROUTE "d""e"')
    assert statements == [DropRoute("plain_1"), DropRoute("a]b c"), DropRoute('d"e')]


def test_R10_comments_and_optional_semicolons_between_statements():
    statements = parse_batch(
        "-- set up\n"
        "CREATE ROUTE R1 WITH ADDRESS = 'LOCAL' /* block\n comment /* nested */ still */\n"
        "ALTER ROUTE R1 WITH ADDRESS = 'TRANSPORT';;\n"
        "DROP ROUTE R2 -- gone\n"
        ";"
    )
    assert statements == [
        CreateRoute("R1", "LOCAL"),
        AlterRoute("R1", (("address", "TRANSPORT"),)),
        DropRoute("R2"),
    ]


def test_R10_alter_holds_only_the_clauses_given_in_order():
    (stmt,) = parse_batch("ALTER ROUTE r WITH SERVICE_NAME = '', LIFETIME = +30, ADDRESS = N'x'")
    assert stmt == AlterRoute("r", (("service_name", ""), ("lifetime", 30), ("address", "x")))


def test_R10_2_a_negative_lifetime_parses_so_that_validation_refuses_it():
    (stmt,) = parse_batch("CREATE ROUTE r WITH LIFETIME = -0005, ADDRESS = 'LOCAL'")
    assert stmt.lifetime == -5


def test_R10_values_are_not_validated_by_the_parser():
    # R10.2 belongs to validate_route when the statement runs, not to the syntax
    (stmt,) = parse_batch("CREATE ROUTE r WITH BROKER_INSTANCE = 'nope', ADDRESS = ''")
    assert (stmt.broker_instance, stmt.address) == ("nope", "")


# -- the parser: what it refuses -------------------------------------------------------------


def test_R10_1_create_without_ADDRESS_names_the_rule_and_the_place():
    with raises(RouteDefinitionError, "at line 1, column 1 has no ADDRESS") as caught:
        parse_batch("CREATE ROUTE r WITH SERVICE_NAME = 'S'")
    assert caught.value.rule == "R10.1"
    assert "the end of the batch at line 1, column 39" in str(caught.value)


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ("1.5", "'1.5'"),
        ("'60'", "the string '60'"),
        ("N'60'", "the string N'60'"),
        ("NULL", "'NULL'"),
        ("1e3", "'1e3'"),
        ("-2.0", "'2.0'"),
        ("1" * 5000, "a number of 5000 digits"),
    ],
)
def test_R10_2_lifetime_must_be_a_whole_number(value, found):
    with raises(RouteDefinitionError, "LIFETIME must be a whole number of seconds") as caught:
        parse_batch(f"CREATE ROUTE r WITH\n  LIFETIME = {value}, ADDRESS = 'LOCAL'")
    assert caught.value.rule == "R10.2"
    assert f"found {found}" in str(caught.value)
    assert "at line 2, column 14" in str(caught.value)


def test_a_missing_lifetime_value_is_a_syntax_error():
    with raises(TsqlSyntaxError, "expected a whole number of seconds for LIFETIME but found ','"):
        parse_batch("CREATE ROUTE r WITH LIFETIME = , ADDRESS = 'LOCAL'")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no statement: expected CREATE, ALTER or DROP of a ROUTE, MESSAGE TYPE, CONTRACT, "
         "QUEUE, SERVICE, BROKER PRIORITY, DATABASE, MASTER KEY, USER or REMOTE SERVICE BINDING "
         "but found the end of the batch at line 1, "
         "column 1"),
        ("  -- only a comment\n /* and this */", "no statement"),
        (" ;\n;", "no statement"),
    ],
)  # fmt: skip
def test_an_empty_batch_holds_no_statement(text, message):
    with raises(TsqlSyntaxError, message):
        parse_batch(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SELECT 1", "SELECT at line 1, column 1 is not supported"),
        ("CREATE TABLE t (x INT)", "CREATE TABLE at line 1, column 1 is not supported"),
        ("create event notification n", "CREATE EVENT NOTIFICATION at line 1, column 1 is not "
         "supported"),
        ("\n  ALTER SCHEMA d TRANSFER x", "ALTER SCHEMA at line 2, column 3 is not supported"),
        ("DROP SYNONYM s", "pybroker runs only CREATE/ALTER/DROP ROUTE, MESSAGE TYPE, QUEUE, "
         "SERVICE, BROKER PRIORITY, DATABASE and USER, and CREATE/DROP CONTRACT"),
        ("DROP ROUTE r SELECT 1", "SELECT at line 1, column 14"),
        ("DROP ROUTE r; EXEC p", "EXEC at line 1, column 15"),
    ],
)
def test_R10_other_statements_are_unsupported(text, message):
    with raises(UnsupportedStatementError, message):
        parse_batch(text)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("GO", "line 1, column 1"),
        ("DROP ROUTE r\nGO\nDROP ROUTE s", "line 2, column 1"),
        ("DROP ROUTE r;\n  go", "line 2, column 3"),
    ],
)
def test_GO_is_refused_as_a_client_batch_separator(text, where):
    with raises(UnsupportedStatementError, f"GO at {where} is not supported: it is a batch "):
        parse_batch(text)


def test_R10_AUTHORIZATION_is_refused_because_routes_have_no_owners():
    with raises(TsqlSyntaxError, "AUTHORIZATION at line 1, column 16 is not supported") as caught:
        parse_batch("CREATE ROUTE r AUTHORIZATION dbo WITH ADDRESS = 'LOCAL'")
    assert "no owners" in str(caught.value)
    assert not isinstance(caught.value, UnsupportedStatementError)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("CREATE ROUTE r WITH ADDRESS = 'a', address = 'b'",
         "ADDRESS is given twice (first at line 1, column 21, again at line 1, column 36)"),
        ("ALTER ROUTE r WITH LIFETIME = 1, LIFETIME = 2", "LIFETIME is given twice"),
        ("CREATE ROUTE r WITH COLOUR = 'red'",
         "unknown route clause COLOUR at line 1, column 21: expected one of SERVICE_NAME"),
        ("ALTER ROUTE r WITH", "expected a route clause (SERVICE_NAME, BROKER_INSTANCE, LIFETIME, "
         "ADDRESS, MIRROR_ADDRESS) but found the end of the batch at line 1, column 19"),
        ("ALTER ROUTE r", "expected WITH but found the end of the batch at line 1, column 14"),
        ("CREATE ROUTE r ADDRESS = 'LOCAL'", "expected WITH but found 'ADDRESS' at line 1, "
         "column 16"),
        ("CREATE ROUTE r WITH ADDRESS 'LOCAL'", "expected '=' after ADDRESS but found the "
         "string 'LOCAL' at line 1, column 29"),
        ("CREATE ROUTE r WITH ADDRESS = LOCAL", "expected a string value for ADDRESS"),
        ("CREATE ROUTE r WITH ADDRESS = NULL", "but found 'NULL' at line 1, column 31"),
        ("CREATE ROUTE r WITH SERVICE_NAME = 5, ADDRESS = 'x'",
         "a string value for SERVICE_NAME, such as N'...', but found '5' at line 1, column 36"),
        ('CREATE ROUTE r WITH ADDRESS = "LOCAL"', "(strings take single quotes), but found the "
         'quoted identifier "LOCAL" at line 1, column 31'),
        ("CREATE ROUTE r WITH ADDRESS = 'a' SERVICE_NAME = 's'",
         "expected ',' before SERVICE_NAME but found 'SERVICE_NAME' at line 1, column 35"),
        ("CREATE ROUTE r WITH ADDRESS = 'LOCAL',", "expected a route clause"),
        ("CREATE ROUTE WITH ADDRESS = 'LOCAL'", "expected a route name but found 'WITH'"),
        ("DROP ROUTE 'r'", "expected a route name but found the string 'r' at line 1, column 12"),
        ("DROP ROUTE @r", "expected a route name but found '@r'"),
        ("DROP ROUTE []", "expected a route name (it must not be empty)"),
        ("DROP ROUTE", "expected a route name but found the end of the batch"),
        ("DROP ROUTE r extra", "expected ';' or the next statement but found 'extra' at line 1, "
         "column 14"),
        ("DROP ROUTE dbo.r", "but found '.' at line 1, column 15"),
        ("CREATE", "expected the kind of object to CREATE (ROUTE, MESSAGE TYPE, CONTRACT, QUEUE, "
         "SERVICE, BROKER PRIORITY, DATABASE, MASTER KEY, USER, REMOTE SERVICE BINDING) but "
         "found the end of the batch"),
        ("foo bar", "expected CREATE, ALTER or DROP of a ROUTE, MESSAGE TYPE, CONTRACT, QUEUE, "
         "SERVICE, BROKER PRIORITY, DATABASE, MASTER KEY, USER or REMOTE SERVICE BINDING but "
         "found 'foo' at line 1"),
        ("'x'", "expected CREATE, ALTER or DROP of a ROUTE, MESSAGE TYPE, CONTRACT, QUEUE, "
         "SERVICE, BROKER PRIORITY, DATABASE, MASTER KEY, USER or REMOTE SERVICE BINDING but "
         "found the string 'x'"),
        ("CREATE ROUTE r WITH\n  ADDRESS = 'tcp://a:1",
         "unterminated string starting at line 2, column 13: expected a closing '"),
        ("DROP ROUTE [r", "unterminated quoted identifier starting at line 1, column 12: "
         "expected a closing ]"),
        ('DROP ROUTE "r', "expected a closing \""),
        ("DROP ROUTE r /* open /* nested */", "unterminated /* comment starting at line 1, "
         "column 14: expected '*/'"),
        ("DROP ROUTE r ?", "unexpected character '?' at line 1, column 14: expected"),
    ],
)  # fmt: skip
def test_malformed_text_is_a_syntax_error_with_its_place(text, message):
    with raises(TsqlSyntaxError, message) as caught:
        parse_batch(text)
    assert not isinstance(caught.value, UnsupportedStatementError)


def test_errors_come_from_the_one_root():
    with pytest.raises(pybroker.BrokerError):
        parse_batch("SELECT 1")
    with pytest.raises(TsqlSyntaxError, match="must be text"):
        parse_batch(b"DROP ROUTE r")  # type: ignore[arg-type]


# -- Database.execute() ------------------------------------------------------------------------




@pytest.fixture
def inst(clock):
    with pybroker.connect(clock=clock) as instance:
        yield instance


@pytest.fixture
def db(inst):
    return inst.create_database("A")


def route_names(db) -> list[str]:
    return sorted(r.name for r in db.routes())


def test_R10_execute_creates_a_route_that_routing_uses(inst, db):
    db.execute("CREATE ROUTE r WITH SERVICE_NAME = 'S', ADDRESS = 'tcp://h:4022'")
    route = db.route("r")
    assert (route.remote_service_name, route.address, route.lifetime) == (
        "S",
        "tcp://h:4022",
        None,
    )
    decision = inst.route("S", origin="A")
    assert (decision.outcome, decision.route) == ("send", "r")


def test_R10_1_execute_lifetime_is_seconds_from_now(db):
    db.execute("CREATE ROUTE r WITH LIFETIME = 600, ADDRESS = 'tcp://h:1'")
    expected = datetime.fromtimestamp(T0, UTC) + timedelta(seconds=600)
    assert db.route("r").lifetime.replace(tzinfo=UTC) == expected


def test_R10_execute_alter_changes_only_the_clauses_given(clock, db):
    db.execute(
        f"CREATE ROUTE r WITH SERVICE_NAME = 'S', BROKER_INSTANCE = '{GUID}', LIFETIME = 600, "
        "ADDRESS = 'tcp://a:1', MIRROR_ADDRESS = 'tcp://b:1'"
    )
    before = db.route("r")
    clock.now += 100  # a lifetime kept must not be recomputed from the new now
    db.execute("ALTER ROUTE r WITH ADDRESS = 'tcp://c:1'")
    after = db.route("r")
    assert after.address == "tcp://c:1"
    assert (after.remote_service_name, after.broker_instance, after.mirror_address) == (
        "S",
        GUID,
        "tcp://b:1",
    )
    assert after.lifetime == before.lifetime
    assert after.route_id == before.route_id


def test_R10_execute_alter_lifetime_counts_from_now(clock, db):
    db.execute("CREATE ROUTE r WITH LIFETIME = 600, ADDRESS = 'tcp://a:1'")
    clock.now += 100
    db.execute("ALTER ROUTE r WITH LIFETIME = 50")
    expected = datetime.fromtimestamp(T0 + 150, UTC)
    assert db.route("r").lifetime.replace(tzinfo=UTC) == expected


def test_R10_execute_alter_removes_values_with_an_empty_string(db):
    db.execute(
        f"CREATE ROUTE r WITH SERVICE_NAME = 'S', BROKER_INSTANCE = '{GUID}', "
        "ADDRESS = 'tcp://a:1', MIRROR_ADDRESS = 'tcp://b:1'"
    )
    db.execute("ALTER ROUTE r WITH MIRROR_ADDRESS = '', BROKER_INSTANCE = N''")
    cleared = db.route("r")
    assert (cleared.remote_service_name, cleared.broker_instance, cleared.mirror_address) == (
        "S",
        None,
        None,
    )
    db.execute("ALTER ROUTE r WITH SERVICE_NAME = ''")
    assert db.route("r").remote_service_name is None


def test_R10_2_execute_alter_result_must_obey_the_rules(db):
    db.execute("CREATE ROUTE r WITH SERVICE_NAME = 'S', ADDRESS = 'tcp://a:1', "
               "MIRROR_ADDRESS = 'tcp://b:1'")  # fmt: skip
    with raises(RouteDefinitionError, "MIRROR_ADDRESS requires SERVICE_NAME") as caught:
        db.execute("ALTER ROUTE r WITH SERVICE_NAME = ''")
    assert caught.value.rule == "R10.2"
    assert db.route("r").remote_service_name == "S"


def test_R10_5_execute_drop(db):
    db.execute("CREATE ROUTE r WITH ADDRESS = 'tcp://a:1'")
    db.execute("DROP ROUTE AutoCreatedLocal; DROP ROUTE [r]")
    assert db.routes() == []
    with raises(pybroker.NotFoundError, "route 'AutoCreatedLocal' does not exist"):
        db.execute("DROP ROUTE AutoCreatedLocal")


def test_R10_execute_alter_of_a_missing_route(db):
    with raises(pybroker.NotFoundError, "route 'nope' does not exist"):
        db.execute("ALTER ROUTE nope WITH ADDRESS = 'LOCAL'")


def test_R10_2_execute_batch_failing_in_its_second_statement_changes_nothing(inst, db):
    with raises(RouteDefinitionError, "MIRROR_ADDRESS requires SERVICE_NAME") as caught:
        db.execute(
            "CREATE ROUTE one WITH SERVICE_NAME = 'S', ADDRESS = 'tcp://a:1'\n"
            "CREATE ROUTE two WITH ADDRESS = 'tcp://b:1', MIRROR_ADDRESS = 'tcp://c:1';\n"
        )
    assert caught.value.rule == "R10.2"
    assert route_names(db) == ["AutoCreatedLocal"]
    assert inst.route("S", origin="A").outcome != "send"  # the routing cache saw no 'one'


def test_R10_execute_batch_is_all_or_nothing_across_statement_kinds(db):
    with raises(pybroker.NotFoundError, "route 'missing' does not exist"):
        db.execute(
            "CREATE ROUTE one WITH ADDRESS = 'tcp://a:1';\n"
            "DROP ROUTE AutoCreatedLocal;\n"
            "ALTER ROUTE missing WITH ADDRESS = 'LOCAL';"
        )
    assert route_names(db) == ["AutoCreatedLocal"]
    assert db.route("AutoCreatedLocal").address == "LOCAL"


def test_R10_execute_parses_the_whole_batch_before_running_any_of_it(db):
    with raises(UnsupportedStatementError, "MERGE at line 1, column 46"):
        db.execute("CREATE ROUTE one WITH ADDRESS = 'tcp://a:1'; MERGE t USING u ON 1 = 1")
    with raises(TsqlSyntaxError, "unterminated string"):
        db.execute("DROP ROUTE AutoCreatedLocal; CREATE ROUTE x WITH ADDRESS = 'LOCAL")
    assert route_names(db) == ["AutoCreatedLocal"]


def test_R10_2_execute_duplicate_route_name(db):
    db.execute("CREATE ROUTE r WITH ADDRESS = 'tcp://a:1'")
    with raises(RouteDefinitionError, "route 'r' already exists") as caught:
        db.execute("CREATE ROUTE r WITH ADDRESS = 'tcp://b:1'")
    assert caught.value.rule == "R10.2"
    assert db.route("r").address == "tcp://a:1"
    with raises(RouteDefinitionError, "route 'x' already exists"):  # within one batch
        db.execute("CREATE ROUTE x WITH ADDRESS = 'LOCAL'; CREATE ROUTE x WITH ADDRESS = 'LOCAL'")
    assert route_names(db) == ["AutoCreatedLocal", "r"]


@pytest.mark.parametrize(
    ("tsql", "message"),
    [
        ("CREATE ROUTE r WITH ADDRESS = 'tcp://a:1', MIRROR_ADDRESS = 'tcp://b:1'",
         "MIRROR_ADDRESS requires SERVICE_NAME"),
        ("CREATE ROUTE r WITH SERVICE_NAME = 'S', ADDRESS = 'LOCAL', "
         "MIRROR_ADDRESS = 'tcp://b:1'", "cannot be used with ADDRESS = 'LOCAL'"),
        ("CREATE ROUTE r WITH SERVICE_NAME = 'S', ADDRESS = 'tcp://a:1', "
         "MIRROR_ADDRESS = 'TCP://A:1/'", "MIRROR_ADDRESS must differ from ADDRESS"),
        (f"CREATE ROUTE r WITH BROKER_INSTANCE = '{GUID}', ADDRESS = 'tcp://a:1'",
         "BROKER_INSTANCE requires SERVICE_NAME"),
        ("CREATE ROUTE r WITH SERVICE_NAME = 'S', BROKER_INSTANCE = 'nope', ADDRESS = 'LOCAL'",
         "not a GUID"),
        ("CREATE ROUTE r WITH SERVICE_NAME = 'S', ADDRESS = 'TRANSPORT'", "TRANSPORT route"),
        ("CREATE ROUTE r WITH ADDRESS = 'udp://a:1'", "none of 'LOCAL'"),
        ("CREATE ROUTE r WITH ADDRESS = ''", "ADDRESS must not be an empty string"),
        ("CREATE ROUTE r WITH SERVICE_NAME = '" + "s" * 257 + "', ADDRESS = 'LOCAL'",
         "at most 256"),
        ("CREATE ROUTE r WITH LIFETIME = 0, ADDRESS = 'LOCAL'", "positive whole number"),
        ("CREATE ROUTE r WITH LIFETIME = -5, ADDRESS = 'LOCAL'", "positive whole number"),
        ("CREATE ROUTE r WITH LIFETIME = 1.5, ADDRESS = 'LOCAL'", "whole number of seconds"),
        ("CREATE ROUTE AutoCreatedLocal WITH ADDRESS = 'LOCAL'", "already exists"),
    ],
)  # fmt: skip
def test_R10_2_violations_through_execute_name_the_rule_and_change_nothing(db, tsql, message):
    with raises(RouteDefinitionError, message) as caught:
        db.execute(tsql)
    assert caught.value.rule == "R10.2"
    assert route_names(db) == ["AutoCreatedLocal"]


def test_R10_1_execute_create_without_ADDRESS(db):
    with raises(RouteDefinitionError, "has no ADDRESS") as caught:
        db.execute("CREATE ROUTE r WITH SERVICE_NAME = 'S'")
    assert caught.value.rule == "R10.1"
    assert route_names(db) == ["AutoCreatedLocal"]


def test_execute_wants_text(db):
    with raises(pybroker.BrokerError, "execute() takes T-SQL text, not bytes"):
        db.execute(b"DROP ROUTE x")
