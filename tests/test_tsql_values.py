"""The numeric and date and time types of a T-SQL batch (FLOAT, REAL, DECIMAL/NUMERIC,
DATETIME, DATETIME2, DATETIMEOFFSET, DATE, TIME), their conversions with SQL Server's rules
and error numbers, the date functions (on the instance clock), @@SPID, and table variables
in the SQL around the verbs (INSERT, DELETE, SELECT ... FROM @t, RECEIVE ... INTO @t)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pybroker
from pybroker.errors import TsqlSyntaxError
from tests.tsql_helpers import printed, program_database

NOW = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC, the instance clock of these tests


@pytest.fixture(scope="module")
def db():
    yield from program_database("Values")


@pytest.fixture(scope="module")
def clocked():
    with pybroker.connect(None, worker=False, clock=lambda: NOW) as inst:
        yield inst.create_database("Clocked")


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        # FLOAT and REAL: six significant digits when printed (CAST's style 0)
        ("DECLARE @f FLOAT = 1.5e3, @r REAL = 0.1; PRINT @f; PRINT @r; PRINT 1e10; "
         "PRINT CAST(123456789 AS FLOAT); PRINT CONVERT(VARCHAR(30), 0.1e0, 3)",
         ["1500", "0.1", "1e+010", "1.23457e+008", "1.0000000000000001e-001"]),
        ("DECLARE @f FLOAT(24) = 1.0 / 3; PRINT CONVERT(VARCHAR(30), @f, 2)",
         ["3.333333432674408e-001"]),  # FLOAT(24) is REAL
        # DECIMAL: rounded half away from zero to its scale; its scale shown
        ("DECLARE @d DECIMAL(5, 2) = 3.14159, @n NUMERIC(4, 0) = -2.5; PRINT @d; PRINT @n; "
         "PRINT CAST(1 AS DECIMAL(5, 3)); PRINT CAST('12.345' AS DECIMAL(6, 2))",
         ["3.14", "-3", "1.000", "12.35"]),
        # SQL Server's scale of a result: s1 + s2 for *, max(6, s1 + p2 + 1) for /
        ("DECLARE @d DECIMAL(5, 2) = 3.14; PRINT @d * 2.5; PRINT @d / 3; PRINT @d + 1; "
         "PRINT 7 / 2; PRINT 7 / 2.0", ["7.850", "1.0466666666667", "4.14", "3", "3.500000"]),
        # to integers: truncated toward zero
        ("PRINT CAST(2.7 AS INT); PRINT CAST(-2.7 AS INT); PRINT CAST(2.99e0 AS BIGINT)",
         ["2", "-2", "2"]),
        # implicit conversion: the higher type of SQL Server's precedence
        ("PRINT '5' + 1; PRINT 1 + 2.50; PRINT 2.5 + 1e0; IF '10' > 9 PRINT 'number'; "
         "IF 1.0 = 1 PRINT 'equal'; IF 0.1e0 < 0.2 PRINT 'float'",
         ["6", "3.50", "3.5", "number", "equal", "float"]),
        # DATETIME: style 0 when printed, 1/300 s, CONVERT's styles
        ("DECLARE @t DATETIME = '2026-12-02 16:40:34.123'; PRINT @t; "
         "PRINT CONVERT(VARCHAR(30), @t, 121); PRINT CONVERT(VARCHAR(30), @t, 120); "
         "PRINT CONVERT(VARCHAR(30), @t, 126); PRINT CONVERT(VARCHAR(30), @t, 101); "
         "PRINT CONVERT(VARCHAR(30), @t, 103); PRINT CONVERT(VARCHAR(30), @t, 112); "
         "PRINT CONVERT(VARCHAR(30), @t, 108); PRINT CONVERT(VARCHAR(30), @t, 100)",
         ["Dec  2 2026  4:40PM", "2026-12-02 16:40:34.123", "2026-12-02 16:40:34",
          "2026-12-02T16:40:34.123", "12/02/2026", "02/12/2026", "20261202", "16:40:34",
          "Dec  2 2026  4:40PM"]),
        ("DECLARE @t DATETIME = '2026-01-01 00:00:00.001'; "
         "PRINT CONVERT(VARCHAR(30), @t, 121); SET @t = '2026-01-01 00:00:00.005'; "
         "PRINT CONVERT(VARCHAR(30), @t, 121)",
         ["2026-01-01 00:00:00.000", "2026-01-01 00:00:00.007"]),
        # the forms of text a date is read from
        ("PRINT CAST('20260315' AS DATE); PRINT CAST('03/15/2026' AS DATE); "
         "PRINT CONVERT(DATE, '15/03/2026', 103); PRINT CAST('Mar 15 2026 4:05PM' AS "
         "DATETIME2(0)); PRINT CAST('2026-03-15T16:05:00' AS DATETIME2(3)); "
         "PRINT CAST('16:05' AS TIME(0))",
         ["2026-03-15", "2026-03-15", "2026-03-15", "2026-03-15 16:05:00",
          "2026-03-15 16:05:00.000", "16:05:00"]),
        # DATETIME2(n), DATETIMEOFFSET(n): n digits of the second; 127 is UTC with Z
        ("DECLARE @a DATETIME2 = '2026-01-01 10:00:00.1234567', @b DATETIME2(2) = "
         "'2026-01-01 10:00:00.126', @o DATETIMEOFFSET(0) = '2026-12-02T10:00:00+02:00'; "
         "PRINT @a; PRINT @b; PRINT @o; PRINT CONVERT(NVARCHAR(40), @o, 127); "
         "PRINT CAST(@o AS DATETIME2(0)); PRINT DATEPART(tzoffset, @o)",
         ["2026-01-01 10:00:00.1234570", "2026-01-01 10:00:00.13", "2026-12-02 10:00:00 +02:00",
          "2026-12-02T08:00:00Z", "2026-12-02 10:00:00", "120"]),
        # comparisons: text converted to the date; DATETIMEOFFSET compared in UTC
        ("IF CAST('2026-01-02' AS DATE) > '2026-01-01' PRINT 'later'; "
         "IF CAST('2026-01-01T10:00:00+02:00' AS DATETIMEOFFSET) = "
         "CAST('2026-01-01T08:00:00Z' AS DATETIMEOFFSET) PRINT 'same instant'; "
         "IF CAST('2026-01-01' AS DATETIME) = CAST('2026-01-01' AS DATETIME2) PRINT 'equal'",
         ["later", "same instant", "equal"]),
        # DATETIME arithmetic: days; numbers as days from 1900-01-01
        ("DECLARE @t DATETIME = '2026-01-31 12:00'; PRINT @t + 1; PRINT @t - 0.5; "
         "PRINT CAST(1 AS DATETIME); PRINT CAST(CAST('1900-01-03 12:00' AS DATETIME) AS FLOAT)",
         ["Feb  1 2026 12:00PM", "Jan 31 2026 12:00AM", "Jan  2 1900 12:00AM", "2.5"]),
        # DATEADD keeps the month's end; DATEDIFF counts boundaries
        ("PRINT DATEADD(month, 1, '2026-01-31'); PRINT DATEADD(dd, -1, CAST('2026-03-01' AS "
         "DATE)); PRINT DATEADD(hour, 25, CAST('2026-01-01' AS DATETIME2(0))); "
         "PRINT DATEDIFF(year, '2025-12-31', '2026-01-01'); "
         "PRINT DATEDIFF(day, '2026-01-01 23:59', '2026-01-02 00:01'); "
         "PRINT DATEDIFF(minute, '2026-01-01 10:00', '2026-01-01 09:58:30'); "
         "PRINT DATEDIFF(week, '2026-01-03', '2026-01-04')",
         ["Feb 28 2026 12:00AM", "2026-02-28", "2026-01-02 01:00:00", "1", "1", "-2", "1"]),
        ("DECLARE @d DATE = '2026-12-02'; PRINT DATEPART(year, @d); PRINT DATEPART(month, @d); "
         "PRINT DATEPART(dayofyear, @d); PRINT DATEPART(weekday, @d); PRINT DATEPART(week, @d); "
         "PRINT DATEPART(quarter, @d); PRINT DATENAME(month, @d); PRINT DATENAME(dw, @d)",
         ["2026", "12", "336", "4", "49", "4", "December", "Wednesday"]),
        ("PRINT LEN(CAST(1.50 AS DECIMAL(4, 2))); PRINT N'at ' + CONVERT(NVARCHAR(10), "
         "CAST('2026-05-06' AS DATE), 23); PRINT ISNULL(CAST(NULL AS FLOAT), 2.5)",
         ["4", "at 2026-05-06", "2.5"]),
    ],
)
def test_each_type_converts_compares_and_prints_as_sql_server_does(db, text, lines):
    assert printed(db, text) == lines


@pytest.mark.parametrize(
    ("text", "number", "message"),
    [
        ("DECLARE @d DECIMAL(3, 1) = 99.96", 8115,
         "Arithmetic overflow error converting numeric to data type numeric"),
        ("PRINT CAST(12345 AS DECIMAL(4, 0))", 8115,
         "Arithmetic overflow error converting int to data type numeric"),
        ("PRINT CAST(3e9 AS INT)", 8115, "Arithmetic overflow error converting float to data "
         "type int"),
        ("PRINT CAST('2.5' AS INT)", 245, "Conversion failed when converting the nvarchar "
         "value '2.5' to data type int"),
        ("PRINT CAST('abc' AS DECIMAL(5, 2))", 8114, "Error converting data type nvarchar to "
         "numeric"),
        ("PRINT CAST('x1' AS FLOAT)", 8114, "Error converting data type nvarchar to float"),
        ("DECLARE @t DATETIME = 'not a date'", 241, "Conversion failed when converting date "
         "and/or time from character string"),
        ("DECLARE @t DATETIME2 = '2026-02-30'", 241, "Conversion failed when converting date"),
        ("DECLARE @t DATETIME = '2026-02-30'", 242, "resulted in an out-of-range value"),
        ("DECLARE @t DATETIME = '1700-01-01'", 242, "resulted in an out-of-range value"),
        ("PRINT CONVERT(VARCHAR(30), CAST('2026-01-01' AS DATETIME), 7)", 281,
         "7 is not a valid style number"),
        ("PRINT 1.5 / 0", 8134, "Divide by zero error encountered"),
        ("PRINT 1e0 / 0", 8134, "Divide by zero error encountered"),
        ("PRINT CAST(CAST('2026-01-01' AS DATE) AS TIME)", 529,
         "Explicit conversion from data type date to time is not allowed"),
        ("PRINT CAST(SYSDATETIME() AS INT)", 529,
         "Explicit conversion from data type datetime2 to int is not allowed"),
        ("PRINT SYSDATETIME() + 1", 8117, "Operand data type datetime2 is invalid for add"),
        ("PRINT DATEADD(year, 9000, CAST('2026-01-01' AS DATE))", 517,
         "Adding a value to a 'date' column caused an overflow"),
        ("PRINT DATEDIFF(millisecond, '1900-01-01', '2026-01-01')", 535,
         "The datediff function resulted in an overflow"),
        ("PRINT DATEPART(hour, CAST('2026-01-01' AS DATE))", 9810,
         "The datepart hour is not supported by date function datepart for data type date"),
        ("IF CAST('2026-01-01' AS DATE) = CAST('10:00' AS TIME) PRINT 'x'", 206,
         "Operand type clash: date is incompatible with time"),
    ],
)
def test_bad_values_fail_with_sql_server_numbers(db, text, number, message):
    with pytest.raises(pybroker.BrokerError) as caught:
        db.execute(text)
    assert caught.value.number == number  # type: ignore[attr-defined]
    assert message in str(caught.value)


def test_a_catch_block_sees_the_conversion_error_number(db):
    assert printed(db, "BEGIN TRY DECLARE @t DATETIME = 'soon' END TRY BEGIN CATCH "
                       "PRINT ERROR_NUMBER() END CATCH") == ["241"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("DECLARE @d DECIMAL(39, 2)", "a whole number from 0 to 38 for DECIMAL"),
        ("DECLARE @d DECIMAL(4, 5)", "the scale must be less than or equal to the precision"),
        ("DECLARE @t DATETIME2(8)", "a whole number from 0 to 7 for DATETIME2"),
        ("DECLARE @f FLOAT(54)", "a whole number from 1 to 53 for FLOAT"),
        ("PRINT DATEADD(fortnight, 1, GETDATE())", "expected a datepart for DATEADD"),
        ("PRINT DATEDIFF(day, GETDATE())", "',' and the next argument of DATEDIFF("),
        ("PRINT 1.5.5", "the number 1.5.5 at line 1, column 7 is not supported"),
        ("PRINT CONVERT(DATE, '2026-01-01', 103", "')' to close CONVERT(type, value, style)"),
        ("PRINT 12\u00b93", "the number 12\u00b93 at line 1, column 7 is not supported"),
        ("DECLARE @d DECIMAL(1\u00b9)", "a whole number from 0 to 38 for DECIMAL"),
        ("DECLARE @t TABLE (a INT); INSERT INTO @t DEFAULT VALUES",
         "INSERT INTO @t without VALUES or a SELECT"),
        ("SELECT * FROM a" + " JOIN b" * 7 + " ON 1 = 1",
         "JOIN at line 1, column 59 follows 6 JOINs without their ON"),
    ],
)
def test_bad_types_and_calls_are_refused_with_line_and_column(db, text, message):
    with pytest.raises(TsqlSyntaxError, match="line 1, column") as caught:
        db.execute(text)
    assert message in str(caught.value)


def test_a_refused_batch_changes_nothing(db):
    before = db.execute("SELECT name FROM sys.service_queues ORDER BY name")[0].rows
    with pytest.raises(TsqlSyntaxError, match="line 2, column"):
        db.execute("CREATE QUEUE Qnever;\nDECLARE @d DECIMAL(4, 5) = 1")
    with pytest.raises(TsqlSyntaxError, match="line 2, column"):
        db.execute("CREATE QUEUE Qnever;\nDECLARE @t TABLE (a INT); UPDATE @t SET a = 1")
    assert db.execute("SELECT name FROM sys.service_queues ORDER BY name")[0].rows == before


def test_the_date_functions_read_the_instance_clock(clocked):
    assert printed(clocked, "PRINT GETUTCDATE(); PRINT SYSUTCDATETIME(); "
                            "PRINT CONVERT(VARCHAR(30), SYSDATETIMEOFFSET(), 127); "
                            "PRINT DATEDIFF(second, GETUTCDATE(), SYSUTCDATETIME())") == [
        "Jan 15 2027  8:00AM", "2027-01-15 08:00:00.0000000", "2027-01-15T08:00:00.0000000Z",
        "0"]
    local = dt.datetime.fromtimestamp(NOW).replace(tzinfo=None)  # the process's zone
    [row] = clocked.execute("SELECT GETDATE() AS local, SYSDATETIME() AS precise")[0].rows
    assert row == (local, local)


def test_variables_of_the_new_types_go_through_queries_and_procedures(db):
    db.execute("CREATE TABLE ledger (id INT, at DATETIME2, amount DECIMAL(10, 2), "
               "rate FLOAT, day DATE)")
    results = db.execute(
        "DECLARE @at DATETIME2(0) = '2026-01-01 10:00:00', @amount DECIMAL(10, 2) = 12.5, "
        "@rate FLOAT = 0.25, @day DATE = '2026-01-01';\n"
        "INSERT INTO ledger VALUES (1, @at, @amount, @rate, @day);\n"
        "SELECT id, amount * 2 AS twice FROM ledger WHERE at = @at AND rate = @rate "
        "AND day = @day;\n"
        "DECLARE @seen DATETIME2(0), @total DECIMAL(10, 2);\n"
        "SELECT @seen = at, @total = amount + 1 FROM ledger;\n"
        "SELECT @seen AS seen, @total AS total, @rate AS rate, @day AS day")
    assert results[0].rows == [(1, 25)]  # a whole DECIMAL from a query is an int
    assert db.execute("SELECT at, day FROM ledger")[0].rows == [
        (dt.datetime(2026, 1, 1, 10), dt.date(2026, 1, 1))]  # as Python's, as the batch's own
    assert results[1].rows == [(dt.datetime(2026, 1, 1, 10), Decimal("13.50"), 0.25,
                                dt.date(2026, 1, 1))]
    db.execute("CREATE PROCEDURE dbo.later @d DATETIME2(0), @days FLOAT = 1.5, "
               "@out DATETIME2(0) OUTPUT, @amt DECIMAL(6, 2) OUTPUT AS\n"
               "SET @out = DATEADD(hour, CAST(@days * 24 AS INT), @d);\n"
               "SET @amt = @days * 2;")
    assert printed(db, "DECLARE @o DATETIME2(0), @a DECIMAL(6, 2);\n"
                       "EXEC dbo.later '2026-01-01 00:00:00', 2.25, @o OUTPUT, @a OUTPUT;\n"
                       "PRINT @o; PRINT @a") == ["2026-01-03 06:00:00", "4.50"]


def test_spid_is_the_session_number(db):
    [first] = printed(db, "PRINT @@SPID")
    assert int(first) >= 51
    assert printed(db, "PRINT @@SPID") == [first]  # the same Database object: one session
    other = db.instance.database(db.name)
    assert printed(other, "PRINT @@SPID") != [first]


# -- table variables --------------------------------------------------------------------


def test_table_variables_insert_select_join_and_delete(db):
    db.execute("CREATE TABLE shelf (id INT, name NVARCHAR(20)); "
               "INSERT INTO shelf VALUES (1, N'atlas'), (2, N'bible')")
    results = db.execute(
        "DECLARE @t TABLE (id INT, name NVARCHAR(20), at DATETIME, price DECIMAL(5, 2));\n"
        "INSERT INTO @t (id, name, price) VALUES (1, N'x', 1.005), (3, N'z', 2);\n"
        "PRINT @@ROWCOUNT;\n"
        "INSERT INTO @t (id, name, at) SELECT id, name, '2026-01-01' FROM shelf;\n"
        "PRINT @@ROWCOUNT;\n"
        "SELECT * FROM @t;\n"
        "SELECT t.id, s.name FROM @t AS t JOIN shelf s ON s.id = t.id ORDER BY t.id, "
        "t.name;\n"
        "DELETE FROM @t WHERE id = 1;\n"
        "PRINT @@ROWCOUNT;\n"
        "SELECT id FROM @t WHERE id > 1 ORDER BY id;\n"
        "BEGIN TRAN; INSERT INTO @t (id) VALUES (9); ROLLBACK;\n"
        "DECLARE @n INT; SELECT TOP 1 @n = id FROM @t ORDER BY id DESC; PRINT @n;\n"
        "DELETE FROM @t; PRINT @@ROWCOUNT;\n"
        "IF NOT EXISTS (SELECT * FROM @t) PRINT 'empty'")
    assert results.messages == ["2", "2", "2", "9", "3", "empty"]
    assert results[0].rows == [(1, "x", None, Decimal("1.01")), (3, "z", None, Decimal("2.00")),
                               (1, "atlas", dt.datetime(2026, 1, 1), None),
                               (2, "bible", dt.datetime(2026, 1, 1), None)]
    assert results[1].rows == [(1, "atlas"), (1, "atlas"), (2, "bible")]
    assert results[2].rows == [(2,), (3,)]


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("DECLARE @t TABLE (a INT); UPDATE @t SET a = 1", TsqlSyntaxError,
         "UPDATE of a table variable"),
        ("DECLARE @t TABLE (a INT); INSERT INTO @t VALUES (1, 2)", pybroker.BrokerError,
         "column name or number of supplied values does not match table definition"),
        ("DECLARE @t TABLE (a INT); INSERT INTO @t VALUES ('x')", pybroker.BrokerError,
         "Conversion failed when converting the nvarchar value 'x' to data type int"),
        ("DECLARE @t TABLE (a INT); INSERT INTO @t (b) VALUES (1)", pybroker.BrokerError,
         "the column b is not a column of @t"),
        ("INSERT INTO @nowhere VALUES (1)", TsqlSyntaxError,
         "the variable @nowhere in the statement at line 1, column 1 is not declared"),
        ("DECLARE @v INT; SELECT * FROM @v WHERE 1 = 1", pybroker.BrokerError,
         "@v at line 1, column 17 is not a table variable"),
    ],
)
def test_bad_table_variable_statements_are_refused(db, text, error, message):
    with pytest.raises(error) as caught:
        db.execute(text)
    assert message in str(caught.value)


ACTIVATION_LOOP = """
DECLARE @batch TABLE (queuing_order BIGINT, handle UNIQUEIDENTIFIER, message_type SYSNAME,
                      body VARBINARY(MAX));
DECLARE @order BIGINT, @handle UNIQUEIDENTIFIER, @type SYSNAME, @body VARBINARY(MAX);
WHILE 1 = 1
BEGIN
    BEGIN TRANSACTION;
    WAITFOR (RECEIVE TOP (10) queuing_order, conversation_handle, message_type_name,
             message_body FROM TargetQueue INTO @batch), TIMEOUT 100;
    IF @@ROWCOUNT = 0
    BEGIN
        ROLLBACK TRANSACTION;
        BREAK;
    END
    WHILE EXISTS (SELECT * FROM @batch)
    BEGIN
        SELECT TOP (1) @order = queuing_order, @handle = handle, @type = message_type,
               @body = body FROM @batch ORDER BY queuing_order;
        IF @type = N'DEFAULT'
            SEND ON CONVERSATION @handle (CAST(N'done: ' AS VARBINARY(MAX)) + @body);
        DELETE FROM @batch WHERE queuing_order = @order;
    END
    COMMIT TRANSACTION;
END
"""


def test_an_activation_style_loop_receives_into_a_table_variable_and_replies(db):
    db.execute("CREATE QUEUE InitiatorQueue; CREATE QUEUE TargetQueue;\n"
               "CREATE SERVICE Asker ON QUEUE InitiatorQueue;\n"
               "CREATE SERVICE Answerer ON QUEUE TargetQueue ([DEFAULT])")
    db.execute("DECLARE @h UNIQUEIDENTIFIER, @i INT = 0;\n"
               "BEGIN DIALOG @h FROM SERVICE Asker TO SERVICE 'Answerer' WITH "
               "ENCRYPTION = OFF;\n"
               "WHILE @i < 12 BEGIN SET @i = @i + 1; "
               "SEND ON CONVERSATION @h (CAST(N'q' + CAST(@i AS NVARCHAR(3)) AS "
               "VARBINARY(MAX))); END")
    db.execute(ACTIVATION_LOOP)
    replies = db.execute("RECEIVE CAST(message_body AS NVARCHAR(MAX)) AS body FROM "
                         "InitiatorQueue")[0].rows
    assert replies == [(f"done: q{i}",) for i in range(1, 13)]
    assert db.execute("SELECT COUNT(*) AS n FROM TargetQueue")[0].rows == [(0,)]


# -- generated values against Python's own arithmetic ---------------------------------------


@given(a=st.decimals(min_value=-999, max_value=999, places=2),
       b=st.decimals(min_value=-999, max_value=999, places=2))
def test_generated_decimals_add_multiply_and_compare_exactly(db, a, b):
    text = (f"DECLARE @a DECIMAL(5, 2) = {a}, @b DECIMAL(5, 2) = {b};\n"
            "PRINT @a + @b; PRINT @a * @b; IF @a < @b PRINT 'less' ELSE IF @a = @b "
            "PRINT 'equal' ELSE PRINT 'more'")
    relation = "less" if a < b else "equal" if a == b else "more"
    def shown(d: Decimal) -> str:
        return str(d if d else abs(d))  # SQL Server prints no -0.00

    assert printed(db, text) == [shown(a + b), shown(a * b), relation]
