"""CREATE / ALTER / DROP MESSAGE TYPE, CONTRACT, QUEUE and SERVICE in SQL Server's syntax
(SPEC C2-C3): the strict parser, alone and mixed with route DDL (SPEC R10)."""

from __future__ import annotations

import re

import pytest

import pybroker
from pybroker import TsqlSyntaxError, UnsupportedStatementError
from pybroker.core.tsql import (
    AlterMessageType,
    AlterQueue,
    AlterRoute,
    AlterService,
    CreateContract,
    CreateMessageType,
    CreateQueue,
    CreateRoute,
    CreateService,
    DropContract,
    DropMessageType,
    DropQueue,
    DropRoute,
    DropService,
    parse_batch,
)

AW = "//Adventure-Works.com/Expenses"


def raises(error: type[Exception], message: str):
    """pytest.raises matching ``message`` literally (the messages hold brackets, '?', ...)."""
    return pytest.raises(error, match=re.escape(message))


# -- what it accepts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "statement"),
    [
        # MESSAGE TYPE
        ("CREATE MESSAGE TYPE m", CreateMessageType("m")),
        ("create message type m validation = none", CreateMessageType("m", "NONE")),
        ("CREATE MESSAGE TYPE m VALIDATION = EMPTY", CreateMessageType("m", "EMPTY")),
        ("CREATE MESSAGE TYPE m VALIDATION = Well_Formed_Xml",
         CreateMessageType("m", "WELL_FORMED_XML")),
        ("CREATE MESSAGE TYPE [m] AUTHORIZATION dbo", CreateMessageType("m")),
        ('CREATE MESSAGE TYPE "m" AUTHORIZATION [some user] VALIDATION = EMPTY',
         CreateMessageType("m", "EMPTY")),
        ("ALTER MESSAGE TYPE m VALIDATION = WELL_FORMED_XML",
         AlterMessageType("m", "WELL_FORMED_XML")),
        ("ALTER MESSAGE TYPE [m] VALIDATION = NONE", AlterMessageType("m", "NONE")),
        ("DROP MESSAGE TYPE [//x/y]", DropMessageType("//x/y")),
        ("DROP MESSAGE TYPE [DEFAULT]", DropMessageType("DEFAULT")),
        # CONTRACT
        ("CREATE CONTRACT c (m SENT BY INITIATOR)", CreateContract("c", (("m", "INITIATOR"),))),
        ("create contract c authorization dbo ([DEFAULT] sent by any, [a]]b] Sent By Target)",
         CreateContract("c", (("DEFAULT", "ANY"), ("a]b", "TARGET")))),
        ("DROP CONTRACT [//c]", DropContract("//c")),
        # QUEUE
        ("CREATE QUEUE q", CreateQueue("q")),
        ("CREATE QUEUE dbo.q", CreateQueue("q")),
        ("CREATE QUEUE [dbo].[my queue]", CreateQueue("my queue")),
        ('CREATE QUEUE DBO . "q"', CreateQueue("q")),
        ("CREATE QUEUE q WITH STATUS = OFF", CreateQueue("q", status=False)),
        ("CREATE QUEUE q WITH RETENTION = ON, STATUS = ON",
         CreateQueue("q", status=True, retention=True)),
        ("CREATE QUEUE q WITH POISON_MESSAGE_HANDLING (STATUS = OFF) RETENTION = ON",
         CreateQueue("q", retention=True, poison_message_handling=False)),
        ("ALTER QUEUE q WITH STATUS = ON", AlterQueue("q", status=True)),
        ("alter queue [dbo].q with poison_message_handling (status = on), retention = off",
         AlterQueue("q", retention=False, poison_message_handling=True)),
        ("ALTER QUEUE q WITH STATUS = OFF RETENTION = ON POISON_MESSAGE_HANDLING (STATUS = OFF)",
         AlterQueue("q", status=False, retention=True, poison_message_handling=False)),
        ("DROP QUEUE q", DropQueue("q")),
        ("DROP QUEUE dbo.[q]", DropQueue("q")),
        # SERVICE
        ("CREATE SERVICE s ON QUEUE q", CreateService("s", "q")),
        ("CREATE SERVICE [//s] AUTHORIZATION dbo ON QUEUE dbo.q ([DEFAULT], [//c])",
         CreateService("//s", "q", ("DEFAULT", "//c"))),
        ("ALTER SERVICE s ON QUEUE [dbo].[q2]", AlterService("s", queue="q2")),
        ("ALTER SERVICE s (ADD CONTRACT a)", AlterService("s", add_contracts=("a",))),
        ("ALTER SERVICE s ON QUEUE q (drop contract [DEFAULT], add contract b, add contract c)",
         AlterService("s", "q", ("b", "c"), ("DEFAULT",))),
        ("DROP SERVICE [//s]", DropService("//s")),
    ],
)  # fmt: skip
def test_each_statement_form_parses_to_its_dataclass(text, statement):
    assert parse_batch(text) == [statement]


def test_alter_queue_leaves_the_settings_not_given_as_None():
    (stmt,) = parse_batch("ALTER QUEUE q WITH RETENTION = ON")
    assert (stmt.status, stmt.retention, stmt.poison_message_handling) == (None, True, None)


def test_create_queue_defaults_are_SQL_Servers():
    # C3: ON, no retention, poison-message handling on
    assert parse_batch("CREATE QUEUE q") == [
        CreateQueue("q", status=True, retention=False, poison_message_handling=True)
    ]


# -- SQL Server documentation examples -------------------------------------------------------


def test_docs_CREATE_MESSAGE_TYPE():
    assert parse_batch(
        f"CREATE MESSAGE TYPE\n    [{AW}/SubmitExpense]\n    VALIDATION = WELL_FORMED_XML ;"
    ) == [CreateMessageType(f"{AW}/SubmitExpense", "WELL_FORMED_XML")]
    assert parse_batch(f"CREATE MESSAGE TYPE [{AW}/SubmitExpense] VALIDATION = EMPTY ;") == [
        CreateMessageType(f"{AW}/SubmitExpense", "EMPTY")
    ]


def test_docs_CREATE_CONTRACT():
    text = f"""
        CREATE CONTRACT [{AW}/ExpenseSubmission]
            ( [{AW}/SubmitExpense]
                  SENT BY INITIATOR,
              [{AW}/ExpenseApprovedOrDenied]
                  SENT BY TARGET,
              [{AW}/ExpenseReimbursed]
                  SENT BY TARGET
            ) ;
    """
    assert parse_batch(text) == [
        CreateContract(
            f"{AW}/ExpenseSubmission",
            (
                (f"{AW}/SubmitExpense", "INITIATOR"),
                (f"{AW}/ExpenseApprovedOrDenied", "TARGET"),
                (f"{AW}/ExpenseReimbursed", "TARGET"),
            ),
        )
    ]


def test_docs_CREATE_QUEUE():
    assert parse_batch(
        "CREATE QUEUE ExpenseQueue\n"
        "    WITH STATUS = OFF,\n"
        "      RETENTION = ON,\n"
        "      POISON_MESSAGE_HANDLING (STATUS = OFF) ;"
    ) == [CreateQueue("ExpenseQueue", status=False, retention=True, poison_message_handling=False)]
    assert parse_batch("CREATE QUEUE ExpenseQueue WITH STATUS = OFF ;") == [
        CreateQueue("ExpenseQueue", status=False)
    ]


def test_docs_ALTER_QUEUE():
    assert parse_batch("ALTER QUEUE ExpenseQueue WITH STATUS = OFF ;") == [
        AlterQueue("ExpenseQueue", status=False)
    ]


def test_docs_CREATE_SERVICE():
    assert parse_batch(
        f"CREATE SERVICE [{AW}]\n    ON QUEUE [dbo].[ExpenseQueue]\n"
        f"    ([{AW}/ExpenseSubmission]) ;"
    ) == [CreateService(AW, "ExpenseQueue", (f"{AW}/ExpenseSubmission",))]
    assert parse_batch(
        f"CREATE SERVICE [{AW}] ON QUEUE ExpenseQueue\n"
        f"    ([{AW}/ExpenseSubmission],\n     [{AW}/ExpenseProcessing]) ;"
    ) == [
        CreateService(AW, "ExpenseQueue", (f"{AW}/ExpenseSubmission", f"{AW}/ExpenseProcessing"))
    ]
    assert parse_batch(f"CREATE SERVICE [{AW}/Expenses] ON QUEUE ExpenseQueue ;") == [
        CreateService(f"{AW}/Expenses", "ExpenseQueue")
    ]


def test_docs_ALTER_SERVICE():
    assert parse_batch(f"ALTER SERVICE [{AW}]\n    ON QUEUE NewQueue ;") == [
        AlterService(AW, queue="NewQueue")
    ]
    assert parse_batch(
        f"ALTER SERVICE [{AW}]\n    (ADD CONTRACT [{AW}/ExpenseSubmission]) ;"
    ) == [AlterService(AW, add_contracts=(f"{AW}/ExpenseSubmission",))]
    assert parse_batch(
        f"ALTER SERVICE [{AW}]\n"
        f"    (ADD CONTRACT [{AW}/ExpenseSubmissionV2],\n"
        f"     DROP CONTRACT [{AW}/ExpenseSubmission]) ;"
    ) == [AlterService(AW, None, (f"{AW}/ExpenseSubmissionV2",), (f"{AW}/ExpenseSubmission",))]


def test_docs_DROP_statements():
    assert parse_batch(
        f"DROP SERVICE [{AW}] ;\nDROP QUEUE ExpenseQueue ;\n"
        f"DROP CONTRACT [{AW}/ExpenseSubmission] ;\nDROP MESSAGE TYPE [{AW}/SubmitExpense] ;"
    ) == [
        DropService(AW),
        DropQueue("ExpenseQueue"),
        DropContract(f"{AW}/ExpenseSubmission"),
        DropMessageType(f"{AW}/SubmitExpense"),
    ]


# -- batches ---------------------------------------------------------------------------------


def test_a_batch_mixes_object_and_route_statements_with_or_without_semicolons():
    statements = parse_batch(
        "-- the objects of a two-service conversation\n"
        "CREATE MESSAGE TYPE [//req] VALIDATION = WELL_FORMED_XML\n"
        "CREATE CONTRACT [//c] ([//req] SENT BY INITIATOR, [DEFAULT] SENT BY ANY);\n"
        "CREATE QUEUE TargetQueue /* comment /* nested */ */ WITH STATUS = ON\n"
        "CREATE SERVICE [//target] ON QUEUE TargetQueue ([//c])\n"
        "CREATE ROUTE r WITH SERVICE_NAME = '//target', ADDRESS = 'LOCAL';;\n"
        "ALTER QUEUE TargetQueue WITH RETENTION = OFF\n"
        "ALTER ROUTE r WITH ADDRESS = 'TRANSPORT'\n"
        "ALTER SERVICE [//target] (DROP CONTRACT [//c])\n"
        "DROP ROUTE r DROP SERVICE [//target] DROP QUEUE TargetQueue\n"
        "DROP CONTRACT [//c] DROP MESSAGE TYPE [//req]"
    )
    assert statements == [
        CreateMessageType("//req", "WELL_FORMED_XML"),
        CreateContract("//c", (("//req", "INITIATOR"), ("DEFAULT", "ANY"))),
        CreateQueue("TargetQueue", status=True),
        CreateService("//target", "TargetQueue", ("//c",)),
        CreateRoute("r", "LOCAL", service_name="//target"),
        AlterQueue("TargetQueue", retention=False),
        AlterRoute("r", (("address", "TRANSPORT"),)),
        AlterService("//target", drop_contracts=("//c",)),
        DropRoute("r"),
        DropService("//target"),
        DropQueue("TargetQueue"),
        DropContract("//c"),
        DropMessageType("//req"),
    ]


def test_names_keep_their_case_and_keywords_take_any_case():
    assert parse_batch("cReAtE sErViCe MySvc On QuEuE MyQ") == [CreateService("MySvc", "MyQ")]


def test_a_service_named_like_a_keyword_phrase_is_still_a_service():
    # ALTER SERVICE MASTER KEY is another statement; ALTER SERVICE master ON QUEUE is not
    assert parse_batch("ALTER SERVICE master ON QUEUE q") == [AlterService("master", "q")]


# -- what it refuses -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("CREATE TABLE t (x INT)", "CREATE TABLE at line 1, column 1 is not supported: pybroker "
         "runs only CREATE/ALTER/DROP ROUTE, MESSAGE TYPE, QUEUE, SERVICE, BROKER PRIORITY, "
             "DATABASE and USER, and "
             "CREATE/DROP "
         "CONTRACT"),
        ("CREATE EVENT NOTIFICATION n ON QUEUE q FOR QUEUE_ACTIVATION TO SERVICE 's', 'x'",
         "CREATE EVENT NOTIFICATION at line 1, column 1 is not supported"),
        ("DROP QUEUE q;\n CREATE SYMMETRIC KEY k",
         "CREATE SYMMETRIC at line 2, column 2 is not supported"),
        ("ALTER SERVICE MASTER KEY REGENERATE",
         "ALTER SERVICE MASTER KEY at line 1, column 1 is not supported"),
        ("CREATE XML SCHEMA COLLECTION x AS N'<a/>'",
         "CREATE XML SCHEMA COLLECTION at line 1, column 1 is not supported"),
        ("ALTER CONTRACT c", "ALTER CONTRACT at line 1, column 1 is not supported: SQL Server "
         "has no ALTER CONTRACT; DROP CONTRACT and CREATE CONTRACT again"),
        ("CREATE QUEUE q; SEND ON CONVERSATION @h (N'x')",
         "SEND at line 1, column 17 is not supported"),
        ("CREATE QUEUE q\nGO", "GO at line 2, column 1 is not supported"),
    ],
)  # fmt: skip
def test_other_statements_are_unsupported_and_named(text, message):
    with raises(UnsupportedStatementError, message):
        parse_batch(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # object kinds and names
        ("CREATE MESSAGE foo", "expected TYPE after MESSAGE (CREATE MESSAGE TYPE) but found "
         "'foo' at line 1, column 16"),
        ("DROP MESSAGE", "expected TYPE after MESSAGE (DROP MESSAGE TYPE) but found the end"),
        ("ALTER", "expected the kind of object to ALTER (ROUTE, MESSAGE TYPE, QUEUE, SERVICE, "
         "BROKER PRIORITY, DATABASE, USER) "
         "but found the end of the batch at line 1, column 6"),
        ("DROP MESSAGE TYPE", "expected a message type name but found the end of the batch at "
         "line 1, column 18"),
        ("DROP CONTRACT 'c'", "expected a contract name but found the string 'c' at line 1, "
         "column 15"),
        ("DROP SERVICE []", "expected a service name (it must not be empty)"),
        ("DROP QUEUE @q", "expected a queue name but found '@q' at line 1, column 12"),
        ("CREATE QUEUE #q", "expected a queue name but found '#q'"),
        ("CREATE QUEUE WITH STATUS = ON", "expected a queue name but found 'WITH' at line 1, "
         "column 14 (WITH is reserved: write [WITH] for a name)"),
        ("DROP SERVICE a.b", "expected ';' or the next statement but found '.' at line 1, "
         "column 15"),
        # two-part queue names
        ("CREATE QUEUE sales.q", "the schema sales at line 1, column 14 is not supported: "
         "pybroker has one schema, dbo; expected q or dbo.q"),
        ("CREATE SERVICE s ON QUEUE [Sales].[q]", "the schema Sales at line 1, column 27 is not "
         "supported"),
        ("DROP QUEUE db.dbo.q", "the three-part queue name db.dbo.… at line 1, column 12 is not "
         "supported"),
        ("DROP QUEUE dbo.", "expected a queue name after dbo. but found the end of the batch"),
        ("DROP QUEUE dbo..q", "expected a queue name after dbo. but found '.' at line 1, "
         "column 16"),
        # AUTHORIZATION
        ("CREATE MESSAGE TYPE m AUTHORIZATION", "expected an owner name after AUTHORIZATION but "
         "found the end of the batch at line 1, column 36"),
        ("CREATE CONTRACT c AUTHORIZATION 'me' (m SENT BY ANY)", "expected an owner name after "
         "AUTHORIZATION but found the string 'me'"),
        ("ALTER MESSAGE TYPE m AUTHORIZATION dbo VALIDATION = NONE", "expected VALIDATION but "
         "found 'AUTHORIZATION' at line 1, column 22"),
        # MESSAGE TYPE
        ("CREATE MESSAGE TYPE m VALIDATION = VALID_XML WITH SCHEMA COLLECTION s",
         "VALIDATION = VALID_XML WITH SCHEMA COLLECTION at line 1, column 36 is not supported: "
         "pybroker has no XML schema collections"),
        ("ALTER MESSAGE TYPE m VALIDATION = valid_xml WITH SCHEMA COLLECTION s",
         "no XML schema collections"),
        ("CREATE MESSAGE TYPE m VALIDATION = XML", "expected NONE, EMPTY or WELL_FORMED_XML but "
         "found 'XML' at line 1, column 36"),
        ("CREATE MESSAGE TYPE m VALIDATION = 'NONE'", "expected NONE, EMPTY or WELL_FORMED_XML "
         "but found the string 'NONE'"),
        ("CREATE MESSAGE TYPE m VALIDATION NONE", "expected '=' after VALIDATION but found "
         "'NONE' at line 1, column 34"),
        ("ALTER MESSAGE TYPE m", "expected VALIDATION but found the end of the batch"),
        ("CREATE MESSAGE TYPE m VALIDATION = NONE VALIDATION = EMPTY",
         "expected ';' or the next statement but found 'VALIDATION' at line 1, column 41"),
        # CONTRACT
        ("CREATE CONTRACT c", "expected '(' and the message types of the contract but found the "
         "end of the batch at line 1, column 18"),
        ("CREATE CONTRACT c ()", "expected a message type name ([DEFAULT] for the default type) "
         "but found ')' at line 1, column 20"),
        ("CREATE CONTRACT c (DEFAULT SENT BY ANY)", "but found 'DEFAULT' at line 1, column 20 "
         "(DEFAULT is reserved: write [DEFAULT] for a name)"),
        ("CREATE CONTRACT c (m SENT BY ANY, [m] SENT BY TARGET)", "the message type [m] is given "
         "twice (first at line 1, column 20, again at line 1, column 35): expected each message "
         "type at most once"),
        ("CREATE CONTRACT c (m)", "expected SENT BY after the message type [m] but found ')' at "
         "line 1, column 21"),
        ("CREATE CONTRACT c (m SENT INITIATOR)", "expected BY after SENT but found 'INITIATOR'"),
        ("CREATE CONTRACT c (m SENT BY ME)", "expected INITIATOR, TARGET or ANY after SENT BY but "
         "found 'ME' at line 1, column 30"),
        ("CREATE CONTRACT c (m SENT BY ANY", "expected ',' or ')' after the message type [m] but "
         "found the end of the batch"),
        ("CREATE CONTRACT c (m SENT BY ANY n SENT BY ANY)", "expected ',' or ')' after the "
         "message type [m] but found 'n' at line 1, column 34"),
        ("CREATE CONTRACT c (m SENT BY ANY,)", "expected a message type name"),
        ("DROP CONTRACT c (m SENT BY ANY)", "expected ';' or the next statement but found '('"),
        # QUEUE
        ("CREATE QUEUE q WITH", "expected a queue setting (STATUS, RETENTION, "
         "POISON_MESSAGE_HANDLING or ACTIVATION) but found the end of the batch at line 1, "
         "column 20"),
        ("ALTER QUEUE q WITH STATUS = ON,", "expected a queue setting"),
        ("ALTER QUEUE q", "expected WITH but found the end of the batch at line 1, column 14"),
        ("ALTER QUEUE q STATUS = ON", "expected WITH but found 'STATUS' at line 1, column 15"),
        ("CREATE QUEUE q WITH STATUS = ON, RETENTION = OFF, status = off",
         "STATUS is given twice (first at line 1, column 21, again at line 1, column 51): "
         "expected each queue setting at most once"),
        ("CREATE QUEUE q WITH COLOUR = RED", "expected a queue setting (STATUS, RETENTION, "
         "POISON_MESSAGE_HANDLING or ACTIVATION) but found 'COLOUR' at line 1, column 21"),
        ("CREATE QUEUE q WITH STATUS ON", "expected '=' after STATUS but found 'ON' at line 1, "
         "column 28"),
        ("CREATE QUEUE q WITH STATUS = 1", "expected ON or OFF for STATUS but found '1'"),
        ("CREATE QUEUE q WITH RETENTION = TRUE", "expected ON or OFF for RETENTION but found "
         "'TRUE'"),
        ("CREATE QUEUE q WITH POISON_MESSAGE_HANDLING = OFF", "expected '(' after "
         "POISON_MESSAGE_HANDLING but found '='"),
        ("CREATE QUEUE q WITH POISON_MESSAGE_HANDLING ()", "expected STATUS in "
         "POISON_MESSAGE_HANDLING (STATUS = ON|OFF) but found ')'"),
        ("CREATE QUEUE q WITH POISON_MESSAGE_HANDLING (STATUS = OFF", "expected ')' closing "
         "POISON_MESSAGE_HANDLING but found the end of the batch"),
        ("CREATE QUEUE q WITH POISON_MESSAGE_HANDLING (STATUS = NO)", "expected ON or OFF for "
         "POISON_MESSAGE_HANDLING STATUS but found 'NO'"),
        ("CREATE QUEUE q WITH STATUS = ON,\n  ACTIVATION (STATUS = ON, PROCEDURE_NAME = "
         "db.dbo.p.q, MAX_QUEUE_READERS = 1, EXECUTE AS SELF)",
         "expected ',' or ')' after the procedure's name but found '.' at line 2, column 53 "
         "(a procedure's name has at most 3 parts: db.schema.proc)"),
        ("CREATE QUEUE q WITH ACTIVATION (DROP)", "ACTIVATION (DROP) at line 1, column 33 is "
         "for ALTER QUEUE"),
        ("CREATE QUEUE q WITH ACTIVATION (STATUS = ON, MAX_QUEUE_READERS = 1)",
         "ACTIVATION at line 1, column 21 has no PROCEDURE_NAME: CREATE QUEUE ... WITH "
         "ACTIVATION needs PROCEDURE_NAME and MAX_QUEUE_READERS, as in SQL Server"),
        ("CREATE QUEUE q WITH ACTIVATION (PROCEDURE_NAME = [m:f])", "ACTIVATION at line 1, "
         "column 21 has no MAX_QUEUE_READERS"),
        ("ALTER QUEUE q WITH ACTIVATION (MAX_QUEUE_READERS = 32768)", "MAX_QUEUE_READERS = "
         "32768 at line 1, column 52 is out of range: expected a whole number from 0 to 32767"),
        ("ALTER QUEUE q WITH ACTIVATION (MAX_QUEUE_READERS = -1)", "expected a whole number "
         "from 0 to 32767 for MAX_QUEUE_READERS but found '-'"),
        ("ALTER QUEUE q WITH ACTIVATION (EXECUTE AS '')", "expected a user's name of 1 to "
         "128 characters after EXECUTE AS but found the string '' at line 1, column 43"),
        ("ALTER QUEUE q WITH ACTIVATION (EXECUTE AS CALLER)", "EXECUTE AS CALLER at line 1, "
         "column 43 is not supported"),
        ("ALTER QUEUE q WITH ACTIVATION (EXECUTE SELF)", "expected AS after EXECUTE but found "
         "'SELF'"),
        ("ALTER QUEUE q WITH ACTIVATION (STATUS = ON, STATUS = OFF)", "ACTIVATION STATUS is "
         "given twice (first at line 1, column 32, again at line 1, column 45)"),
        ("ALTER QUEUE q WITH ACTIVATION (STATUS = ON,)", "expected an activation setting "
         "after ',' but found ')'"),
        ("ALTER QUEUE q WITH ACTIVATION (DROP, STATUS = ON)", "expected ')' after ACTIVATION "
         "(DROP) but found ','"),
        ("ALTER QUEUE q WITH ACTIVATION STATUS = ON", "expected '(' after ACTIVATION but "
         "found 'STATUS'"),
        ("ALTER QUEUE q WITH ACTIVATION (RETENTION = ON)", "expected an activation setting "
         "(STATUS, PROCEDURE_NAME, MAX_QUEUE_READERS or EXECUTE AS) but found 'RETENTION'"),
        ("CREATE QUEUE q ON ExpenseWorkFileGroup", "ON filegroup at line 1, column 16 is not "
         "supported: pybroker keeps every queue in its DuckDB file"),
        ("CREATE QUEUE q WITH STATUS = ON ON [DEFAULT]", "ON filegroup at line 1, column 33 is "
         "not supported"),
        ("ALTER QUEUE q REBUILD", "ALTER QUEUE q REBUILD at line 1, column 15 is not supported"),
        ("ALTER QUEUE q REORGANIZE", "ALTER QUEUE q REORGANIZE at line 1, column 15 is not "
         "supported"),
        ("ALTER QUEUE q MOVE TO fg", "ALTER QUEUE q MOVE at line 1, column 15 is not supported"),
        # SERVICE
        ("CREATE SERVICE s", "expected ON QUEUE but found the end of the batch at line 1, "
         "column 17"),
        ("CREATE SERVICE s ON q", "expected QUEUE after ON but found 'q' at line 1, column 21"),
        ("CREATE SERVICE s ON QUEUE", "expected a queue name but found the end of the batch"),
        ("CREATE SERVICE s ON QUEUE q ()", "expected a contract name ([DEFAULT] for the default "
         "contract) but found ')' at line 1, column 30"),
        ("CREATE SERVICE s ON QUEUE q (DEFAULT)", "(DEFAULT is reserved: write [DEFAULT] for a "
         "name)"),
        ("CREATE SERVICE s ON QUEUE q ([c], c)", "the contract [c] is given twice (first at "
         "line 1, column 30, again at line 1, column 35): expected each contract at most once"),
        ("CREATE SERVICE s ON QUEUE q (c d)", "expected ',' or ')' after the contract [c] but "
         "found 'd' at line 1, column 32"),
        ("ALTER SERVICE s", "expected ON QUEUE or '(' with ADD CONTRACT or DROP CONTRACT but "
         "found the end of the batch at line 1, column 16"),
        ("ALTER SERVICE s AUTHORIZATION dbo", "expected ON QUEUE or '(' with ADD CONTRACT or "
         "DROP CONTRACT but found 'AUTHORIZATION'"),
        ("ALTER SERVICE s (c)", "expected ADD CONTRACT or DROP CONTRACT but found 'c' at line 1, "
         "column 18"),
        ("ALTER SERVICE s (ADD c)", "expected CONTRACT after ADD but found 'c'"),
        ("ALTER SERVICE s ()", "expected ADD CONTRACT or DROP CONTRACT but found ')'"),
        ("ALTER SERVICE s (ADD CONTRACT c, DROP CONTRACT c)", "the contract [c] is given twice "
         "(first at line 1, column 18, again at line 1, column 34)"),
        ("ALTER SERVICE s ON QUEUE q WITH (MIGRATE_MESSAGES = ON)", "WITH (MIGRATE_MESSAGES ...) "
         "at line 1, column 28 is not supported: ON QUEUE always moves the service's messages"),
        ("ALTER SERVICE s ON QUEUE sales.q", "the schema sales at line 1, column 26 is not "
         "supported"),
        # lexing still points at the text
        ("CREATE CONTRACT [c (m SENT BY ANY)", "unterminated quoted identifier starting at "
         "line 1, column 17"),
    ],
)  # fmt: skip
def test_malformed_object_ddl_is_a_syntax_error_with_its_place(text, message):
    with raises(TsqlSyntaxError, message) as caught:
        parse_batch(text)
    assert not isinstance(caught.value, UnsupportedStatementError)


def test_a_batch_fails_as_a_whole_on_its_first_error():
    with raises(TsqlSyntaxError, "ACTIVATION at line 3, column 21 has no PROCEDURE_NAME"):
        parse_batch(
            "CREATE QUEUE a\nCREATE ROUTE r WITH ADDRESS = 'LOCAL'\n"
            "CREATE QUEUE b WITH ACTIVATION (STATUS = OFF)"
        )


def test_errors_come_from_the_one_root():
    with pytest.raises(pybroker.BrokerError):
        parse_batch("ALTER CONTRACT c")
    with pytest.raises(pybroker.BrokerError):
        parse_batch("CREATE QUEUE q ON fg")
