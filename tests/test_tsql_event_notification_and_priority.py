"""The built-in contract and message type of event notifications (migrations/025, the
system templates of a new database), and RECEIVE's own priority column: the level its
conversation endpoint took from sys.conversation_priorities, as SQL Server matches them."""

from __future__ import annotations

import re

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.core.conversation.priorities import DEFAULT_PRIORITY
from pybroker.errors import InUseError, TsqlSyntaxError
from pybroker.storage.schema import available_migrations
from pybroker.timestamps import utc_now

POST = "http://schemas.microsoft.com/SQL/Notifications/PostEventNotification"
EVENT = "http://schemas.microsoft.com/SQL/Notifications/EventNotification"


def rows(inst, query: str, params: dict | None = None) -> list[tuple]:
    return inst.sql(query, params).fetchall() if params else inst.sql(query).fetchall()


def notification_objects(inst) -> list[tuple]:
    """Per database: the contract, its message type with who sends it, and its validation."""
    return rows(inst, """
        SELECT c.database_name, c.name, c.is_system, u.message_type_name,
            u.is_sent_by_initiator, u.is_sent_by_target, t.validation, t.is_system
        FROM sys.service_contracts AS c
        JOIN sys.service_contract_message_usages AS u
            ON u.database_name = c.database_name AND u.service_contract_name = c.name
        JOIN sys.service_message_types AS t
            ON t.database_name = c.database_name AND t.name = u.message_type_name
        WHERE c.name = $post ORDER BY 1""", {"post": POST})


def _expected(*databases: str) -> list[tuple]:
    return [(d, POST, True, EVENT, True, False, "X", True) for d in sorted(databases)]


@pytest.fixture(scope="module")
def inst():
    instance = pybroker.connect(None, worker=False)
    yield instance
    instance.close()


# -- the built-in contract -------------------------------------------------------------------


def test_every_database_has_the_event_notification_contract(inst):
    shop = inst.create_database("Notified")
    try:
        assert notification_objects(inst) == _expected("master", "msdb", "Notified")
        # a service that takes event notifications, as external activation's target does
        shop.execute(f"CREATE QUEUE NotifyQueue;\nCREATE SERVICE NotifyService ON QUEUE "
                     f"NotifyQueue ([{POST}]);\nCREATE SERVICE Poster ON QUEUE NotifyQueue")
        assert rows(inst, "SELECT service_name, service_contract_name FROM "
                    "sys.service_contract_usages WHERE database_name = 'Notified'") == [
            ("NotifyService", POST)]
        body = "<EVENT_INSTANCE><EventType>QUEUE_ACTIVATION</EventType></EVENT_INSTANCE>"
        found = shop.execute(f"""
            DECLARE @h UNIQUEIDENTIFIER;
            BEGIN DIALOG @h FROM SERVICE Poster TO SERVICE 'NotifyService'
                ON CONTRACT [{POST}] WITH ENCRYPTION = OFF;
            SEND ON CONVERSATION @h MESSAGE TYPE [{EVENT}] (N'{body}');
            RECEIVE TOP (1) message_type_name, CAST(message_body AS NVARCHAR(MAX)) AS body,
                service_contract_name FROM NotifyQueue;""")
        assert found[-1].rows == [(EVENT, body, POST)]
        # EventNotification is WELL_FORMED_XML and sent by the initiator only
        with pytest.raises(pybroker.MessageValidationError):
            shop.execute(f"""DECLARE @h UNIQUEIDENTIFIER;
                BEGIN DIALOG @h FROM SERVICE Poster TO SERVICE 'NotifyService'
                    ON CONTRACT [{POST}] WITH ENCRYPTION = OFF;
                SEND ON CONVERSATION @h MESSAGE TYPE [{EVENT}] ('<not xml');""")
    finally:
        inst.execute("DROP DATABASE Notified")
    assert notification_objects(inst) == _expected("master", "msdb")


@pytest.mark.parametrize("text", [
    f"DROP CONTRACT [{POST}]", f"DROP MESSAGE TYPE [{EVENT}]",
    f"ALTER MESSAGE TYPE [{EVENT}] VALIDATION = NONE",
])
def test_the_built_in_objects_are_refused_on_drop_and_a_refused_batch_changes_nothing(
        inst, text):
    before = rows(inst, "SELECT * FROM sys.service_queues ORDER BY ALL")
    with pytest.raises(InUseError, match="system"):
        inst.database("msdb").execute(f"CREATE QUEUE Extra;\n{text}")
    assert rows(inst, "SELECT * FROM sys.service_queues ORDER BY ALL") == before
    assert notification_objects(inst) == _expected("master", "msdb")


def test_create_event_notification_is_refused_with_its_place(inst):
    with pytest.raises(pybroker.BrokerError, match=re.escape(
            "CREATE EVENT NOTIFICATION at line 2, column 1 is not supported")):
        inst.database("msdb").execute(
            "CREATE QUEUE Extra;\nCREATE EVENT NOTIFICATION n ON QUEUE q FOR "
            "QUEUE_ACTIVATION TO SERVICE 'NotifyService', 'current database'")
    assert rows(inst, "SELECT count(*) FROM sys.service_queues WHERE name = 'Extra'") == [(0,)]


def test_a_file_made_before_025_gets_the_contract_in_every_database(tmp_path):
    path = tmp_path / "before.duckdb"
    con = duckdb.connect(str(path))
    try:
        for version, name, text in [(v, n, p.read_text()) for v, n, p in
                                    available_migrations() if v < 25]:
            con.execute(text)
            con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)",
                        [version, name, utc_now()])
        assert con.execute("SELECT count(*) FROM service_contracts WHERE name = ?",
                           [POST]).fetchone() == (0,)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    with pybroker.connect(path, worker=False) as old:
        assert notification_objects(old) == _expected("master", "msdb")


# -- RECEIVE's priority --------------------------------------------------------------------

# What a priority may name: ANY (None), the names the dialog has (in other cases, which
# compare equal for the contract and the local service) and names it has not. The dialog
# goes from Initiator to Target on [DEFAULT].
_CONTRACTS = st.sampled_from([None, "DEFAULT", "default", "//Other/Contract"])
_LOCALS = st.sampled_from([None, "Target", "TARGET", "Initiator", "//Other"])
_REMOTES = st.sampled_from([None, "Initiator", "INITIATOR", "Target", "//Other"])
_RULES = st.lists(st.tuples(_CONTRACTS, _LOCALS, _REMOTES, st.integers(1, 10)), max_size=6,
                  unique_by=lambda r: (r[0] and r[0].lower(), r[1] and r[1].lower(), r[2]))


def reference_level(rules, contract: str, local: str, remote: str) -> int:
    """SQL Server's precedence written out as a score: a named contract weighs more than
    a named local service, which weighs more than a named remote service; names of the
    database's objects without regard to case, the far service's exactly."""
    best, level = -1, DEFAULT_PRIORITY
    for rule_contract, rule_local, rule_remote, rule_level in rules:
        score = 0
        for wanted, have, weight, exact in ((rule_contract, contract, 4, False),
                                            (rule_local, local, 2, False),
                                            (rule_remote, remote, 1, True)):
            if wanted is None:
                continue
            if (wanted == have) if exact else (wanted.lower() == have.lower()):
                score += weight
            else:
                score = -1
                break
        if score > best:
            best, level = score, rule_level
    return level


@pytest.fixture(scope="module")
def ranked(inst):
    db = inst.create_database("Ranked")
    db.execute("CREATE QUEUE TargetQueue; CREATE QUEUE InitiatorQueue;\n"
               "CREATE SERVICE Target ON QUEUE TargetQueue ([DEFAULT]);\n"
               "CREATE SERVICE Initiator ON QUEUE InitiatorQueue ([DEFAULT])")
    yield db
    inst.execute("DROP DATABASE Ranked")


def _name(name: str | None, quote: bool = False) -> str:
    if name is None:
        return "ANY"
    return f"'{name}'" if quote else f"[{name}]"


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rules=_RULES, honour=st.booleans())
def test_receive_gives_the_priority_its_endpoint_matched(inst, ranked, rules, honour):
    script = [f"ALTER DATABASE Ranked SET HONOR_BROKER_PRIORITY {'ON' if honour else 'OFF'};"]
    for i, (contract, local, remote, level) in enumerate(rules):
        script.append(f"CREATE BROKER PRIORITY P{i} FOR CONVERSATION SET (CONTRACT_NAME = "
                      f"{_name(contract)}, LOCAL_SERVICE_NAME = {_name(local)}, "
                      f"REMOTE_SERVICE_NAME = {_name(remote, quote=True)}, "
                      f"PRIORITY_LEVEL = {level});")
    script.append("""
        DECLARE @h UNIQUEIDENTIFIER, @t UNIQUEIDENTIFIER;
        BEGIN DIALOG @h FROM SERVICE Initiator TO SERVICE 'Target' WITH ENCRYPTION = OFF;
        SEND ON CONVERSATION @h ('request');
        SELECT priority FROM TargetQueue;
        RECEIVE TOP (1) @t = conversation_handle FROM TargetQueue;
        SEND ON CONVERSATION @t ('reply');
        RECEIVE priority, message_type_name FROM InitiatorQueue;
        END CONVERSATION @h; END CONVERSATION @t WITH CLEANUP;""")
    script.extend(f"DROP BROKER PRIORITY P{i};" for i in range(len(rules)))
    target_level = reference_level(rules, "DEFAULT", "Target", "Initiator")
    initiator_level = reference_level(rules, "DEFAULT", "Initiator", "Target")
    results = ranked.execute("\n".join(script))
    assert results[0].rows == [(target_level,)]  # the queue's view agrees
    assert results[1].rows == [(initiator_level, "DEFAULT")]
    received = ranked.execute(
        "DECLARE @h UNIQUEIDENTIFIER;\n"
        "BEGIN DIALOG @h FROM SERVICE Initiator TO SERVICE 'Target' WITH ENCRYPTION = OFF;\n"
        "SEND ON CONVERSATION @h ('x'); END CONVERSATION @h WITH CLEANUP;\n"
        "RECEIVE priority FROM TargetQueue")  # no priority left: the default
    assert received[-1].rows == [(DEFAULT_PRIORITY,)]
    ranked.execute("RECEIVE * FROM TargetQueue")  # what cleanup left of it


def test_the_python_api_and_sys_conversation_endpoints_agree(inst, ranked):
    ranked.execute("CREATE BROKER PRIORITY Hot FOR CONVERSATION SET "
                   "(LOCAL_SERVICE_NAME = Target, PRIORITY_LEVEL = 9)")
    try:
        conv = ranked.begin_dialog("Initiator", "Target")
        conv.send(b"x")
        (message,) = ranked.receive("TargetQueue")
        assert message.priority == 9
        assert rows(inst, "SELECT priority FROM sys.conversation_endpoints WHERE "
                    "conversation_handle = $h", {"h": message.conversation_handle}) == [(9,)]
        ranked.conversation(message.conversation_handle).end(cleanup=True)
        conv.end(cleanup=True)
    finally:
        ranked.execute("DROP BROKER PRIORITY Hot")


def test_a_bad_priority_column_is_refused_with_its_place(ranked):
    with pytest.raises(TsqlSyntaxError, match="line 2, column 9"):
        ranked.execute("CREATE QUEUE Extra;\nRECEIVE priorty + FROM TargetQueue")
