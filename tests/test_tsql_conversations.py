"""The conversation verbs in T-SQL (``Database.execute()``): each verb against the Python
API on twin instances, the same states and rows (sys.conversation_endpoints,
sys.transmission_queue, the queues); variables, result sets, transactions, and how a batch
stops."""

from __future__ import annotations

import pytest

import pybroker
from pybroker import (
    BrokerError,
    ConversationError,
    TransactionError,
    TsqlSyntaxError,
    UnsupportedStatementError,
)
from pybroker.errors import InvalidArgumentError, NotFoundError
from tests.conftest_conversations import FakeClock

END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"
ERROR = "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
DIALOG_TIMER = "http://schemas.microsoft.com/SQL/ServiceBroker/DialogTimer"

SETUP = """
CREATE MESSAGE TYPE Request VALIDATION = WELL_FORMED_XML;
CREATE MESSAGE TYPE Reply VALIDATION = NONE;
CREATE CONTRACT Trade (Request SENT BY INITIATOR, Reply SENT BY TARGET);
"""


def _instance(clock: FakeClock) -> pybroker.Instance:
    inst = pybroker.connect(None, worker=False, clock=clock)
    shop, warehouse = inst.create_database("Shop"), inst.create_database("Warehouse")
    for db in (shop, warehouse):
        db.execute(SETUP)
    shop.execute("CREATE QUEUE OrderQueue; CREATE SERVICE OrderService ON QUEUE OrderQueue")
    warehouse.execute("CREATE QUEUE StockQueue; "
                      "CREATE SERVICE StockService ON QUEUE StockQueue (Trade, [DEFAULT])")
    return inst


@pytest.fixture
def twins():
    """Two instances built alike: one driven by the API, one by T-SQL."""
    clocks = FakeClock(), FakeClock()
    api, tsql = _instance(clocks[0]), _instance(clocks[1])
    yield api, tsql, clocks
    api.close()
    tsql.close()


def state(inst: pybroker.Instance) -> dict[str, list[tuple]]:
    """What a DBA sees, without the handles and ids that differ between instances."""
    return {
        "endpoints": inst.sql(
            "SELECT database_name, service_name, far_service, service_contract_name, "
            "is_initiator, state, send_sequence, receive_sequence FROM "
            "sys.conversation_endpoints ORDER BY ALL").fetchall(),
        "transmission_queue": inst.sql(
            "SELECT database_name, from_service_name, to_service_name, "
            "message_sequence_number, message_type_name, message_body, transmission_status "
            "FROM sys.transmission_queue ORDER BY ALL").fetchall(),
        "queues": inst.sql(
            "SELECT queue_name, status, message_sequence_number, service_name, "
            "service_contract_name, message_type_name, validation, message_body "
            "FROM queue_messages ORDER BY ALL").fetchall(),
        "groups": inst.sql(
            "SELECT COUNT(DISTINCT conversation_group_id) FROM sys.conversation_endpoints"
        ).fetchall(),
    }


def test_begin_send_receive_reply_and_end_match_the_api(twins):
    api, tsql, _ = twins
    shop, warehouse = api.database("Shop"), api.database("Warehouse")
    with shop.transaction():
        conv = shop.begin_dialog("OrderService", "StockService", contract="Trade")
        conv.send("<Request sku='A'/>", message_type="Request")
        conv.send("<Request sku='B'/>", message_type="Request")

    results = tsql.database("Shop").execute("""
        DECLARE @h UNIQUEIDENTIFIER;
        DECLARE @body NVARCHAR(100) = N'<Request sku=''A''/>';
        BEGIN TRANSACTION;
        BEGIN DIALOG CONVERSATION @h FROM SERVICE OrderService TO SERVICE 'StockService'
            ON CONTRACT Trade WITH ENCRYPTION = OFF;
        SEND ON CONVERSATION @h MESSAGE TYPE Request (@body);
        SET @body = N'<Request sku=' + N'''B''/>';
        SEND ON CONVERSATION @h MESSAGE TYPE Request (@body);
        COMMIT TRANSACTION;
        SELECT @h AS handle;
    """)
    assert state(tsql) == state(api)
    [handle] = results
    assert handle.columns == ("handle",)
    shop_handle = handle.rows[0][0]
    assert tsql.database("Shop").conversation(shop_handle).state == "CO"

    with warehouse.transaction():
        got = warehouse.receive("StockQueue", max_messages=10)
        reply = warehouse.conversation(got[0].conversation_handle)
        reply.send("done", message_type="Reply")
        reply.end()
    results = tsql.database("Warehouse").execute("""
        DECLARE @h UNIQUEIDENTIFIER;
        BEGIN TRAN;
        RECEIVE TOP (10) conversation_handle, message_sequence_number, message_type_name,
            CAST(message_body AS NVARCHAR(MAX)) AS body FROM dbo.StockQueue;
        COMMIT;
    """)
    [received] = results
    assert received.columns == ("conversation_handle", "message_sequence_number",
                                "message_type_name", "body")
    assert [r[1:] for r in received.rows] == [
        (m.message_sequence_number, m.message_type_name, m.text) for m in got]
    far = received.rows[0][0]
    tsql.database("Warehouse").execute(f"""
        DECLARE @h UNIQUEIDENTIFIER = '{far}';
        SEND ON CONVERSATION @h MESSAGE TYPE Reply (N'done');
        END CONVERSATION @h;
    """)
    assert state(tsql) == state(api)

    got = shop.receive("OrderQueue", max_messages=10)
    conv.end()
    [received] = tsql.database("Shop").execute(f"""
        DECLARE @h UNIQUEIDENTIFIER = '{shop_handle}';
        WAITFOR (RECEIVE * FROM OrderQueue WHERE conversation_handle = @h), TIMEOUT 1000;
        END CONVERSATION @h;
    """)
    assert state(tsql) == state(api)
    assert [r[10] for r in received.rows] == ["Reply", END_DIALOG]
    assert [r[13] for r in received.rows] == [b"done", None]  # EndDialog: a NULL body
    assert received.rows[0][:2] == (1, 5)  # status, priority
    assert received.rows[0][12] == "N"  # Reply's validation


def test_end_with_error_matches_the_api(twins):
    api, tsql, _ = twins
    conv = api.database("Shop").begin_dialog("OrderService", "StockService")
    conv.send("x")
    conv.end(error=42, description="out of stock")
    tsql.database("Shop").execute("""
        DECLARE @h UNIQUEIDENTIFIER, @code INT = 40;
        BEGIN DIALOG @h FROM SERVICE OrderService TO SERVICE 'StockService';
        SEND ON CONVERSATION @h (N'x');
        END CONVERSATION @h WITH ERROR = @code + 2 DESCRIPTION = 'out of stock';
    """)
    assert state(tsql) == state(api)
    [(body,)] = tsql.sql("SELECT message_body FROM queue_messages WHERE message_type_name = "
                         f"'{ERROR}'").fetchall()
    assert b"<Code>42</Code><Description>out of stock</Description>" in body


def test_end_with_cleanup_matches_the_api(twins):
    api, tsql, _ = twins
    conv = api.database("Shop").begin_dialog("OrderService", "StockService")
    conv.send("x")
    conv.end(cleanup=True)
    tsql.database("Shop").execute("""
        DECLARE @h UNIQUEIDENTIFIER;
        BEGIN DIALOG @h FROM SERVICE OrderService TO SERVICE 'StockService';
        SEND ON CONVERSATION @h (N'x');
        END CONVERSATION @h WITH CLEANUP;
    """)
    assert state(tsql) == state(api)


def test_a_conversation_timer_matches_the_api(twins):
    api, tsql, clocks = twins
    conv = api.database("Shop").begin_dialog("OrderService", "StockService")
    conv.begin_timer(60)
    tsql.database("Shop").execute("""
        DECLARE @h UNIQUEIDENTIFIER;
        BEGIN DIALOG @h FROM SERVICE OrderService TO SERVICE 'StockService'
            WITH LIFETIME = 3600;
        BEGIN CONVERSATION TIMER (@h) TIMEOUT = 60;
    """)
    for inst, clock in zip((api, tsql), clocks, strict=True):
        inst.run_pending(clock.advance(61))
    assert state(tsql)["queues"] == state(api)["queues"]
    assert [r[5] for r in state(tsql)["queues"]] == [DIALOG_TIMER]
    lifetimes = tsql.sql("SELECT lifetime - create_date FROM sys.conversation_endpoints"
                         ).fetchall()
    assert [r[0].total_seconds() for r in lifetimes] == [3600]


def test_messages_to_a_missing_service_wait_in_the_transmission_queue_alike(twins):
    api, tsql, _ = twins
    api.database("Shop").begin_dialog("OrderService", "Nowhere").send("lost")
    tsql.database("Shop").execute("""
        DECLARE @h UNIQUEIDENTIFIER, @to NVARCHAR(256) = N'Now' + N'here';
        BEGIN DIALOG @h FROM SERVICE OrderService TO SERVICE @to;
        SEND ON CONVERSATION @h (N'lost');
    """)
    assert state(tsql) == state(api)
    assert state(tsql)["transmission_queue"][0][4:6] == ("DEFAULT", b"lost")


def test_related_conversations_share_a_group_and_get_conversation_group_finds_it(twins):
    _, tsql, _ = twins
    shop, warehouse = tsql.database("Shop"), tsql.database("Warehouse")
    [result] = shop.execute("""
        DECLARE @a UNIQUEIDENTIFIER, @b UNIQUEIDENTIFIER, @c UNIQUEIDENTIFIER;
        BEGIN DIALOG @a FROM SERVICE OrderService TO SERVICE 'StockService';
        BEGIN DIALOG @b FROM SERVICE OrderService TO SERVICE 'StockService'
            WITH RELATED_CONVERSATION = @a;
        DECLARE @g UNIQUEIDENTIFIER = NEWID();
        BEGIN DIALOG @c FROM SERVICE OrderService TO SERVICE 'StockService'
            WITH RELATED_CONVERSATION_GROUP = @g;
        SEND ON CONVERSATION @a, @b, @c (N'm');
        SELECT @a AS a, @b AS b, @c AS c, @g AS g;
    """)
    a, b, c, g = result.rows[0]
    assert shop.conversation(a).conversation_group_id == shop.conversation(
        b).conversation_group_id
    assert shop.conversation(c).conversation_group_id == g
    first = warehouse.get_conversation_group("StockQueue")
    [result] = warehouse.execute("""
        DECLARE @g UNIQUEIDENTIFIER;
        WAITFOR (GET CONVERSATION GROUP @g FROM StockQueue), TIMEOUT 100;
        SELECT @g AS g;
    """)
    assert result.rows == [(first,)]
    [rows] = warehouse.execute(f"""
        RECEIVE message_sequence_number FROM StockQueue
        WHERE conversation_group_id = '{first}'
    """)
    assert len(rows) == 1
    assert warehouse.get_conversation_group("StockQueue") != first


def _two_orders(inst: pybroker.Instance) -> list[str]:
    """Two conversations Shop -> Warehouse with two requests each, interleaved; the
    Warehouse handles of the second and the first."""
    shop = inst.database("Shop")
    first, second = (shop.begin_dialog("OrderService", "StockService", contract="Trade")
                     for _ in range(2))
    for conv, sku in ((first, "A"), (second, "B"), (first, "C"), (second, "D")):
        conv.send(f"<Request sku='{sku}'/>", message_type="Request")
    far = dict(inst.sql(
        "SELECT conversation_id, conversation_handle FROM sys.conversation_endpoints "
        "WHERE database_name = 'Warehouse'").fetchall())
    return [far[second.conversation_id], far[first.conversation_id]]


def test_move_conversation_matches_the_api(twins):
    api, tsql, _ = twins
    handle, _ = _two_orders(api)
    warehouse = api.database("Warehouse")
    with warehouse.transaction():
        group = warehouse.get_conversation_group("StockQueue")
        warehouse.conversation(handle).move_to(group)
        got = warehouse.receive("StockQueue", max_messages=10, conversation_group_id=group)
    assert api.sql("SELECT COUNT(DISTINCT conversation_group_id) FROM "
                   "sys.conversation_endpoints WHERE database_name = 'Warehouse'"
                   ).fetchall() == [(1,)]

    handle, _ = _two_orders(tsql)
    [received] = tsql.database("Warehouse").execute(f"""
        DECLARE @g UNIQUEIDENTIFIER, @h UNIQUEIDENTIFIER = '{handle}';
        BEGIN TRANSACTION;
        GET CONVERSATION GROUP @g FROM StockQueue;
        MOVE CONVERSATION @h TO @g;
        RECEIVE conversation_group_id, CAST(message_body AS NVARCHAR(MAX)) AS body
            FROM StockQueue WHERE conversation_group_id = @g;
        COMMIT;
    """)
    assert state(tsql) == state(api)
    assert [r[1] for r in received.rows] == [m.text for m in got] == [
        f"<Request sku='{sku}'/>" for sku in "ABCD"]
    assert {r[0] for r in received.rows} == {tsql.database("Warehouse").conversation(
        handle).conversation_group_id}


def test_move_conversation_rolls_back_and_refuses_alike(twins):
    _, tsql, _ = twins
    handle, other = _two_orders(tsql)
    warehouse = tsql.database("Warehouse")
    group = warehouse.conversation(other).conversation_group_id
    before = state(tsql)
    warehouse.execute(f"""
        DECLARE @h UNIQUEIDENTIFIER = '{handle}';
        BEGIN TRAN;
        MOVE CONVERSATION @h TO '{group}';
        ROLLBACK;
    """)
    assert state(tsql) == before
    assert warehouse.conversation(handle).conversation_group_id != group
    unknown = "00000000-0000-0000-0000-000000000001"
    with pytest.raises(NotFoundError) as caught:
        warehouse.execute(f"MOVE CONVERSATION '{handle}' TO '{unknown}'")
    assert str(caught.value) == (
        f"MOVE CONVERSATION at line 1, column 1 failed: conversation group {unknown} does "
        "not exist: no open conversation is in it; move the conversation to the group of "
        "another conversation of queue 'StockQueue' (its conversation_group_id), or begin "
        "one in a new group (BEGIN DIALOG ... WITH RELATED_CONVERSATION_GROUP, "
        "begin_dialog(related_conversation_group=...))")
    with pytest.raises(InvalidArgumentError) as caught:
        warehouse.execute(f"DECLARE @g UNIQUEIDENTIFIER; MOVE CONVERSATION '{handle}' TO @g")
    assert str(caught.value) == (
        "MOVE CONVERSATION at line 1, column 30 failed: the conversation group at line 1, "
        "column 30 is NULL: expected a conversation group id (set the variable first, e.g. "
        "by GET CONVERSATION GROUP or from sys.conversation_endpoints); the 1 statement(s) "
        "before it ran")
    assert state(tsql) == before


def test_go_on_a_line_of_its_own_separates_batches_that_run_in_order(twins):
    api, tsql, _ = twins
    shop = api.database("Shop")
    for _ in range(2):
        shop.begin_dialog("OrderService", "StockService", contract="Trade").send(
            "<Request/>", message_type="Request")
    results = tsql.database("Shop").execute("""
        CREATE QUEUE Extra
        GO
        DECLARE @h UNIQUEIDENTIFIER;
        BEGIN DIALOG @h FROM SERVICE OrderService TO SERVICE 'StockService' ON CONTRACT Trade;
        SEND ON CONVERSATION @h MESSAGE TYPE Request (N'<Request/>');
        SELECT N'sent' AS step
          go 2   -- sqlcmd's count: the batch runs twice, declaring @h again each time
        DROP QUEUE Extra;
        SELECT N'go' AS word, N'GO
        ' AS not_a_separator /*
        GO
        */
    """)
    assert [(r.columns, r.rows) for r in results] == [
        (("step",), [("sent",)]), (("step",), [("sent",)]),
        (("word", "not_a_separator"), [("go", "GO\n        ")])]
    assert state(tsql) == state(api)
    assert [q.name for q in tsql.database("Shop").queues()] == ["OrderQueue"]


def test_each_batch_has_its_own_variables_and_a_failed_one_stops_the_script(twins):
    _, tsql, _ = twins
    shop = tsql.database("Shop")
    before = state(tsql)
    with pytest.raises(TsqlSyntaxError) as caught:
        shop.execute("DECLARE @a INT = 1;\nSELECT @a AS a\nGO\nSELECT @a AS a")
    assert str(caught.value) == ("the variable @a at line 4, column 8 is not declared: "
                                 "expected DECLARE @a <type> before it is used")
    with pytest.raises(UnsupportedStatementError) as caught:
        shop.execute("CREATE QUEUE q2; GO")
    assert str(caught.value) == (
        "GO at line 1, column 18 is not supported here: GO separates batches only on a line "
        "of its own (GO, or GO count), as sqlcmd and SSMS read it; put it on a line of its "
        "own")
    with pytest.raises(TsqlSyntaxError) as caught:
        shop.execute("CREATE QUEUE q2\nGO 0")
    assert str(caught.value) == ("GO 0 at line 2, column 1: expected a count from 1 to "
                                 "2147483647 (how many times the batch before it runs)")
    assert state(tsql) == before  # refused while parsing: no batch ran
    assert [q.name for q in shop.queues()] == ["OrderQueue"]
    with pytest.raises(ConversationError) as caught:
        shop.execute("SELECT 1 AS one\nGO\nCREATE QUEUE q2\nGO\nEND CONVERSATION NEWID()\n"
                     "GO\nDROP QUEUE q2")
    assert str(caught.value).startswith("END CONVERSATION at line 5, column 1 failed: ")
    assert str(caught.value).endswith("; the 2 batch(es) before it (up to GO) ran")
    assert [r.rows for r in caught.value.results] == [[(1,)]]
    assert [q.name for q in shop.queues()] == ["OrderQueue", "q2"]
    with pytest.raises(TransactionError, match="the batch ended inside the transaction "
                       "begun at line 1, column 1: it was rolled back"):
        shop.execute("BEGIN TRAN; DROP QUEUE q2\nGO\nCOMMIT")
    assert [q.name for q in shop.queues()] == ["OrderQueue", "q2"]


def test_receive_assigns_variables_from_its_last_row_and_fills_a_table_variable(twins):
    _, tsql, _ = twins
    shop, warehouse = tsql.database("Shop"), tsql.database("Warehouse")
    conv = shop.begin_dialog("OrderService", "StockService")
    for body in ("one", "two", "three"):
        conv.send(body)
    results = warehouse.execute("""
        DECLARE @n BIGINT = -1, @body VARBINARY(MAX);
        DECLARE @t TABLE (seq BIGINT, body NVARCHAR(MAX));
        RECEIVE TOP (2) @n = message_sequence_number, @body = message_body FROM StockQueue;
        SELECT @n AS n, CAST(@body AS NVARCHAR(10)) AS body;
        RECEIVE message_sequence_number, CAST(message_body AS NVARCHAR(MAX)) FROM StockQueue
            INTO @t;
        SELECT body, seq FROM @t;
        SELECT * FROM @t;
    """)
    assert [r.rows for r in results] == [
        [(1, "two")], [("three", 2)], [(2, "three")]]
    assert results[1].columns == ("body", "seq")


def test_nothing_received_leaves_variables_as_they_were_and_returns_no_rows(twins):
    _, tsql, _ = twins
    results = tsql.database("Warehouse").execute("""
        DECLARE @h UNIQUEIDENTIFIER = '00000000-0000-0000-0000-000000000001';
        WAITFOR (RECEIVE TOP (1) @h = conversation_handle FROM StockQueue), TIMEOUT 10;
        RECEIVE * FROM StockQueue;
        SELECT @h AS h;
    """)
    assert len(results[0]) == 0
    assert len(results[0].columns) == 14
    assert results[1].rows == [("00000000-0000-0000-0000-000000000001",)]


def test_rollback_undoes_the_transaction_and_puts_received_messages_back(twins):
    _, tsql, _ = twins
    shop, warehouse = tsql.database("Shop"), tsql.database("Warehouse")
    shop.begin_dialog("OrderService", "StockService").send("keep")
    before = state(tsql)
    results = warehouse.execute("""
        BEGIN TRAN;
        RECEIVE message_body FROM StockQueue;
        ROLLBACK;
    """)
    assert results[0].rows == [(b"keep",)]
    assert state(tsql) == before
    shop.execute("""
        DECLARE @h UNIQUEIDENTIFIER;
        BEGIN TRAN outer_one; BEGIN TRAN;
        BEGIN DIALOG @h FROM SERVICE OrderService TO SERVICE 'StockService';
        SEND ON CONVERSATION @h (N'gone');
        COMMIT; ROLLBACK TRANSACTION outer_one
    """)
    assert state(tsql) == before


def test_a_batch_that_ends_inside_a_transaction_is_rolled_back(twins):
    _, tsql, _ = twins
    before = state(tsql)
    with pytest.raises(TransactionError, match="begun at line 3, column 9: it was rolled "
                       "back") as caught:
        tsql.database("Shop").execute("""
        DECLARE @h UNIQUEIDENTIFIER;
        BEGIN TRANSACTION;
        BEGIN DIALOG @h FROM SERVICE OrderService TO SERVICE 'StockService';
        SEND ON CONVERSATION @h (N'x');
        SELECT 'seen' AS s;
        """)
    assert state(tsql) == before
    assert [r.rows for r in caught.value.results] == [[("seen",)]]
    with pytest.raises(TransactionError, match="COMMIT at line 1, column 1 failed: there is "
                       "no BEGIN TRANSACTION"):
        tsql.database("Shop").execute("COMMIT")


def test_a_failed_statement_stops_the_batch_keeping_what_committed_before_it(twins):
    _, tsql, _ = twins
    shop = tsql.database("Shop")
    with pytest.raises(ConversationError, match=r"^SEND at line 5, column 9 failed: "
                       "conversation handle .* does not exist") as caught:
        shop.execute("""
        DECLARE @h UNIQUEIDENTIFIER;
        BEGIN DIALOG @h FROM SERVICE OrderService TO SERVICE 'StockService';
        SEND ON CONVERSATION @h (N'sent'); SELECT @h AS h; SET @h = NEWID();
        SEND ON CONVERSATION @h (N'never');
        SELECT 'not reached' AS s;
        """)
    assert "statement(s) before it ran" in str(caught.value)
    assert [len(r) for r in caught.value.results] == [1]
    assert [r[7] for r in state(tsql)["queues"]] == [b"sent"]
    before = state(tsql)
    with pytest.raises(ConversationError, match="the open transaction was rolled back"):
        shop.execute(f"""
        DECLARE @h UNIQUEIDENTIFIER;
        BEGIN TRAN;
        BEGIN DIALOG @h FROM SERVICE OrderService TO SERVICE 'StockService';
        SEND ON CONVERSATION @h (N'undone');
        SEND ON CONVERSATION '{'0' * 8}-0000-0000-0000-{'0' * 12}' (N'x');
        COMMIT;
        """)
    assert state(tsql) == before


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("DECLARE @h UNIQUEIDENTIFIER; BEGIN DIALOG @h FROM SERVICE OrderService TO SERVICE "
         "'StockService'; SEND ON CONVERSATION @h (N'x'); SEND ON CONVERSATION @h (",
         TsqlSyntaxError, "expected a value"),
        ("DECLARE @h UNIQUEIDENTIFIER; BEGIN DIALOG @h FROM SERVICE OrderService TO SERVICE "
         "'StockService'; SEND ON CONVERSATION @x (N'x')",
         TsqlSyntaxError, "the variable @x at line 1, column 120 is not declared"),
        ("DECLARE @h INT; DECLARE @H INT", TsqlSyntaxError, "@H at line 1, column 25 is "
         "already declared"),
        ("CREATE QUEUE q2; MOVE CONVERSATION @h TO @g", TsqlSyntaxError,
         "the variable @h at line 1, column 36 is not declared"),
        ("DECLARE @h UNIQUEIDENTIFIER; MOVE @h TO @h", TsqlSyntaxError,
         "expected CONVERSATION after MOVE (MOVE CONVERSATION @handle TO @group) but found "
         "'@h' at line 1, column 35"),
        ("DECLARE @h UNIQUEIDENTIFIER; MOVE CONVERSATION @h INTO @h", TsqlSyntaxError,
         "expected TO and a conversation group after the conversation handle but found "
         "'INTO' at line 1, column 51"),
        ("CREATE QUEUE q2; MERGE INTO t USING u ON 1 = 1", UnsupportedStatementError,
         "MERGE at line 1, column 18 is not supported: pybroker runs only CREATE/ALTER/DROP "
         "ROUTE"),
        ("CREATE QUEUE q2; SELECT * FROM #routes", TsqlSyntaxError,
         "the statement at line 1, column 18 is not supported: the temporary table #routes"),
        ("CREATE QUEUE q2; SELECT 1 FROM t WHERE", TsqlSyntaxError,
         "the SELECT statement at line 1, column 18 is not understood"),
        ("DECLARE @g UNIQUEIDENTIFIER; WAITFOR DELAY '00:00:01'", TsqlSyntaxError,
         "WAITFOR DELAY and WAITFOR TIME are not supported"),
        ("DECLARE @h INT; RECEIVE @h = message_body, status FROM q", TsqlSyntaxError,
         "both assigns variables and returns columns"),
        ("DECLARE @t TABLE (a INT); RECEIVE status, priority FROM q INTO @t", TsqlSyntaxError,
         "returns 2 columns but @t has 1"),
        ("CREATE QUEUE q2; BEGIN TRY SELECT 1 END TRY", TsqlSyntaxError,
         "expected BEGIN CATCH right after the END TRY of the BEGIN TRY at line 1, column 18"),
        ("DECLARE @h UNIQUEIDENTIFIER; BEGIN DIALOG @h FROM SERVICE s TO SERVICE 't' WITH "
         "RELATED_CONVERSATION = @h, RELATED_CONVERSATION_GROUP = @h", TsqlSyntaxError,
         "expected one of them"),
        ("DECLARE @s NVARCHAR(MAX); SELECT @s = 1, 2", TsqlSyntaxError,
         "expected a @variable to assign"),
    ],
)
def test_a_refused_statement_runs_nothing_of_its_batch(twins, text, error, message):
    _, tsql, _ = twins
    before = state(tsql)
    queues = tsql.database("Shop").queues()
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace(".", r"\.").replace("*", r"\*")):
        tsql.database("Shop").execute(text)
    assert state(tsql) == before
    assert tsql.database("Shop").queues() == queues


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("N'a' + 'b'", "ab"),
        ("1 + 2 - 4", -1),
        ("-(2 + 3)", -5),
        ("CAST(12 AS NVARCHAR(1))", "1"),
        ("CONVERT(INT, N' 7 ')", 7),
        ("CAST(N'é' AS VARBINARY(MAX))", "é".encode()),
        ("0x4142 + 0x43", b"ABC"),
        ("CAST(0x4142 AS NVARCHAR(MAX))", "AB"),
        ("NULL + N'x'", None),
        ("CAST('{0D9C4B60-2E65-4C3B-A1C4-0C6A5F9E9A6C}' AS UNIQUEIDENTIFIER)",
         "0d9c4b60-2e65-4c3b-a1c4-0c6a5f9e9a6c"),
        ("CAST(300 AS BIT)", 1),
        ("CAST(N'<a/>' AS XML)", "<a/>"),
    ],
)
def test_the_expression_language(twins, expression, value):
    _, tsql, _ = twins
    [result] = tsql.database("Shop").execute(f"SELECT {expression} AS v")
    assert result.rows == [(value,)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("DECLARE @i TINYINT = 256", "256 is out of the range of TINYINT"),
        ("SELECT CAST(N'x' AS INT)", "conversion failed at line 1, column 8"),
        ("SELECT N'a' + 1", "Conversion failed when converting the nvarchar value 'a'"),
        ("SELECT CAST(N'<a>' AS XML)", "not well-formed XML"),
        ("DECLARE @h UNIQUEIDENTIFIER = N'nope'", "is not a UNIQUEIDENTIFIER"),
        ("DECLARE @h UNIQUEIDENTIFIER; END CONVERSATION @h", "is NULL: expected a "
         "conversation handle"),
    ],
)
def test_values_of_the_wrong_kind_are_refused_where_they_are_used(twins, text, message):
    _, tsql, _ = twins
    with pytest.raises(BrokerError, match=message):
        tsql.database("Shop").execute(text)


def test_a_ddl_batch_stays_all_or_nothing_and_returns_no_result_set(twins):
    _, tsql, _ = twins
    shop = tsql.database("Shop")
    assert shop.execute("CREATE QUEUE Q1; CREATE QUEUE Q2") == []
    with pytest.raises(BrokerError):
        shop.execute("CREATE QUEUE Q3; CREATE QUEUE Q1")
    assert "Q3" not in [q.name for q in shop.queues()]


def test_ddl_inside_begin_transaction_rolls_back_with_it(twins):
    _, tsql, _ = twins
    shop = tsql.database("Shop")
    shop.execute("BEGIN TRAN; CREATE QUEUE Q9; SELECT 1 AS one; ROLLBACK")
    assert "Q9" not in [q.name for q in shop.queues()]
    shop.execute("DECLARE @x INT; CREATE QUEUE Q9; SET @x = 1")
    assert "Q9" in [q.name for q in shop.queues()]


def test_current_database_names_the_databases_own_broker_instance(twins):
    _, tsql, _ = twins
    warehouse = tsql.database("Warehouse")
    warehouse.execute("CREATE QUEUE Back; CREATE SERVICE Back ON QUEUE Back ([DEFAULT])")
    [result] = warehouse.execute("""
        DECLARE @h UNIQUEIDENTIFIER;
        BEGIN DIALOG @h FROM SERVICE StockService TO SERVICE 'Back', 'CURRENT DATABASE';
        SEND ON CONVERSATION @h;
        RECEIVE message_type_name, message_body FROM Back;
    """)
    assert result.rows == [("DEFAULT", None)]
