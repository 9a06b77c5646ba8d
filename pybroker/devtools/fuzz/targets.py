"""``pybroker fuzz TARGET``: feed a decoder many generated inputs and count what escapes.

A target is a name in :data:`TARGETS` mapping to a :class:`Target`: ``generate(rng)`` makes
one input from a seeded ``random.Random``, ``run(input)`` decodes it. Refusing the input
with a :class:`~pybroker.errors.BrokerError` is a clean outcome; any other exception is a
**crash**, and an input that takes longer than the time-out is a **hang**. Other decoders
register themselves with :func:`register` (for example the wire's frame decoder as
``frames``); the command lists whatever is registered.

The ``tsql`` target mutates valid Service Broker DDL (route, message type, contract, queue
and service statements, the principals' statements: logins, users, GRANT, DENY, REVOKE,
ALTER CERTIFICATE) and T-SQL programs (control flow, TRY ... CATCH, THROW, RAISERROR,
procedures, EXEC, dynamic SQL whose literal texts are parsed as their EXEC parses them,
the SQL sqlglot translates, USE and the DATABASE statements; programs are parsed only): it
deletes, duplicates, swaps and truncates
pieces, and inserts characters T-SQL treats specially (quotes, brackets, comment markers,
braces) as well as text that is not text at all (NUL, lone surrogates, a byte order mark).
Every input is parsed, and a refusal (``TsqlSyntaxError``) that does not say the line and
column is counted a crash; one in ``execute_every`` of the inputs that parse is also run in
an in-memory instance, and a rejected batch must leave its catalog exactly as it was.
"""

from __future__ import annotations

import random
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pybroker.errors import BrokerError, TsqlSyntaxError


class Hang(Exception):
    """An input ran past the time-out."""


@dataclass(frozen=True, slots=True)
class Target:
    description: str
    generate: Callable[[random.Random], Any]
    run: Callable[[Any], Any]
    # Called once before a run (e.g. to open an in-memory instance) and once after.
    setup: Callable[[], None] = lambda: None
    teardown: Callable[[], None] = lambda: None


TARGETS: dict[str, Target] = {}


def register(name: str, target: Target) -> None:
    """Make ``target`` available as ``pybroker fuzz NAME``."""
    TARGETS[name] = target


@dataclass
class Report:
    target: str
    seed: int
    count: int = 0
    refused: int = 0  # a BrokerError: the clean refusal
    accepted: int = 0
    crashes: int = 0
    hangs: int = 0
    seconds: float = 0.0
    examples: list[dict[str, str]] = field(default_factory=list)  # the first crashes / hangs

    @property
    def inputs_per_second(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target, "seed": self.seed, "inputs": self.count,
            "seconds": round(self.seconds, 3), "inputs_per_second": round(self.inputs_per_second),
            "refused": self.refused, "accepted": self.accepted, "crashes": self.crashes,
            "hangs": self.hangs, "examples": self.examples,
        }


def run(
    name: str,
    *,
    count: int,
    seed: int,
    timeout: float = 5.0,
    progress: Callable[[Report], None] | None = None,
) -> Report:
    """Run ``count`` generated inputs through target ``name``."""
    target = TARGETS[name]
    rng = random.Random(seed)
    report = Report(name, seed)
    use_alarm = hasattr(signal, "setitimer") and _in_main_thread()
    previous = signal.signal(signal.SIGALRM, _alarm) if use_alarm else None
    target.setup()
    started = time.perf_counter()
    try:
        for index in range(count):
            data = target.generate(rng)
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                target.run(data)
                report.accepted += 1
            except BrokerError:
                report.refused += 1
            except Hang:
                report.hangs += 1
                _note(report, "hang", data, f"ran longer than {timeout} s")
            except Exception as exc:  # counting what escapes is the point
                report.crashes += 1
                _note(report, "crash", data, f"{type(exc).__name__}: {exc}")
            finally:
                if use_alarm:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            report.count = index + 1
            if progress is not None and index % 10_000 == 9_999:
                report.seconds = time.perf_counter() - started
                progress(report)
    finally:
        report.seconds = time.perf_counter() - started
        if use_alarm:
            signal.signal(signal.SIGALRM, previous)
        target.teardown()
    return report


def format_report(report: Report) -> str:
    lines = [
        f"fuzz {report.target}: {report.count:,} inputs in {report.seconds:.1f} s "
        f"({report.inputs_per_second:,.0f} inputs/s), seed {report.seed}",
        f"  refused with a BrokerError: {report.refused:,}; accepted: {report.accepted:,}",
        f"  crashes: {report.crashes:,}; hangs: {report.hangs:,}",
    ]
    for example in report.examples:
        lines.append(f"  {example['kind']}: {example['input']} -> {example['outcome']}")
    return "\n".join(lines)


def _alarm(signum: int, frame: Any) -> None:
    raise Hang


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _note(report: Report, kind: str, data: Any, outcome: str) -> None:
    if len(report.examples) < 10:
        shown = ascii(data)
        report.examples.append({
            "kind": kind, "input": shown if len(shown) <= 300 else shown[:297] + "...",
            "outcome": outcome[:300]})


# -- the tsql target ---------------------------------------------------------------------

TSQL_CORPUS = (
    "CREATE ROUTE R WITH ADDRESS = 'LOCAL'",
    "CREATE ROUTE [Expense Route] WITH SERVICE_NAME = '//Adventure-Works.com/Expenses', "
    "BROKER_INSTANCE = 'D8D4D268-00A3-4C62-8F91-634B89C1E315', LIFETIME = 259200, "
    "ADDRESS = 'TCP://www.Adventure-Works.com:1234'",
    "CREATE ROUTE M WITH SERVICE_NAME = 'S', ADDRESS = 'tcp://a:4022/', "
    "MIRROR_ADDRESS = N'tcp://b:4022'",
    "CREATE ROUTE T WITH ADDRESS = 'TRANSPORT'",
    "ALTER ROUTE R WITH LIFETIME = 60, ADDRESS = 'tcp://[::1]:4022'",
    "ALTER ROUTE R WITH SERVICE_NAME = '', BROKER_INSTANCE = ''",
    "DROP ROUTE R; DROP ROUTE \"q\"\"x\"",
    "CREATE MESSAGE TYPE [//Shop/Order] AUTHORIZATION dbo VALIDATION = WELL_FORMED_XML",
    "ALTER MESSAGE TYPE m VALIDATION = EMPTY",
    "DROP MESSAGE TYPE [m]",
    "CREATE CONTRACT [//Shop/C] ([//Shop/Order] SENT BY INITIATOR, [DEFAULT] SENT BY ANY)",
    "DROP CONTRACT c",
    "CREATE QUEUE dbo.Q WITH STATUS = ON, RETENTION = OFF, "
    "POISON_MESSAGE_HANDLING (STATUS = OFF)",
    "ALTER QUEUE Q WITH STATUS = OFF",
    "DROP QUEUE [dbo].[Q]",
    "CREATE SERVICE [//Shop/S] ON QUEUE dbo.Q ([//Shop/C], [DEFAULT])",
    "ALTER SERVICE S ON QUEUE Q2 (ADD CONTRACT c2, DROP CONTRACT c)",
    "DROP SERVICE S",
    "/* block /* nested */ */ CREATE QUEUE q -- line\n; DROP QUEUE q",
    "CREATE BROKER PRIORITY p FOR CONVERSATION SET (CONTRACT_NAME = c LOCAL_SERVICE_NAME = "
    "ANY, REMOTE_SERVICE_NAME = N's', PRIORITY_LEVEL = 7); "
    "ALTER BROKER PRIORITY p FOR CONVERSATION SET (PRIORITY_LEVEL = DEFAULT); "
    "DROP BROKER PRIORITY p",
    # the principals of a database around a service (s, made by the last entry)
    "CREATE USER u WITHOUT LOGIN; CREATE USER v FOR LOGIN l WITH DEFAULT_SCHEMA = dbo; "
    "GRANT SEND ON SERVICE::s TO u, PUBLIC; DENY SEND ON SERVICE::[s] TO u CASCADE; "
    "REVOKE SEND ON SERVICE::s FROM PUBLIC; ALTER USER u WITH NAME = [w x], "
    "DEFAULT_SCHEMA = NULL; REVOKE SEND ON SERVICE::s TO [w x]; DROP USER IF EXISTS [w x]",
    "CREATE MASTER KEY ENCRYPTION BY PASSWORD = N'p''w'; CREATE USER u WITHOUT LOGIN; "
    "CREATE REMOTE SERVICE BINDING b AUTHORIZATION dbo TO SERVICE N'//Far' WITH USER = u, "
    "ANONYMOUS = ON; DROP REMOTE SERVICE BINDING b",
    "CREATE MESSAGE TYPE m VALIDATION = NONE; CREATE CONTRACT c (m SENT BY TARGET); "
    "CREATE QUEUE q; CREATE SERVICE s ON QUEUE q (c); "
    "CREATE ROUTE r WITH SERVICE_NAME = 's', ADDRESS = 'LOCAL'",
)

# T-SQL programs: control flow, TRY ... CATCH, THROW, RAISERROR, procedures and EXEC. They
# are parsed only (a mutated WHILE may never end).
PROGRAM_CORPUS = (
    "DECLARE @i INT = 0; WHILE @i < 3 BEGIN SET @i = @i + 1; IF @i = 2 CONTINUE; "
    "IF @i > 5 BREAK ELSE PRINT @i END",
    "BEGIN TRY THROW 50001, N'x', 1 END TRY BEGIN CATCH PRINT ERROR_MESSAGE(); "
    "IF XACT_STATE() <> 0 ROLLBACK; THROW END CATCH",
    "RAISERROR(N'%s and %d', 16, 1, N'a', 2) WITH NOWAIT; PRINT @@ERROR",
    "CREATE OR ALTER PROCEDURE dbo.P @a INT, @b NVARCHAR(10) = N'x' OUTPUT\nAS\nBEGIN\n"
    "  SET @b = CAST(@a AS NVARCHAR(10)); RETURN @a * 2\nEND\nGO\n"
    "DECLARE @rc INT, @o NVARCHAR(10); EXEC @rc = dbo.P 1, @b = @o OUTPUT; DROP PROC P",
    "CREATE PROCEDURE Reader AS\nDECLARE @h UNIQUEIDENTIFIER, @t SYSNAME;\nWHILE 1 = 1\n"
    "BEGIN\n  BEGIN TRANSACTION;\n  WAITFOR (RECEIVE TOP (1) @h = conversation_handle, "
    "@t = message_type_name FROM q), TIMEOUT 100;\n  IF @@ROWCOUNT = 0 BEGIN ROLLBACK; "
    "BREAK END\n  END CONVERSATION @h;\n  COMMIT\nEND\nGO\nALTER QUEUE q WITH ACTIVATION "
    "(STATUS = ON, PROCEDURE_NAME = db.dbo.Reader, MAX_QUEUE_READERS = 2, EXECUTE AS 'u')",
    # the SQL around the verbs (translated by sqlglot) and the XML methods on a body
    "IF OBJECT_ID(N'dbo.Log', 'U') IS NULL CREATE TABLE dbo.Log (id INT IDENTITY(1, 1) "
    "PRIMARY KEY, kind SYSNAME, body NVARCHAR(MAX), at DATETIME DEFAULT GETDATE());\n"
    "DECLARE @x XML = N'<a id=\"1\"><b>2</b></a>', @n INT;\n"
    "IF NOT EXISTS (SELECT * FROM sys.services AS s WHERE s.name = N'S') PRINT 'none';\n"
    "INSERT INTO Log (kind, body) VALUES (N'k', CAST(@x AS NVARCHAR(MAX)));\n"
    "SELECT @n = count(*) FROM dbo.Log WHERE kind IN (SELECT kind FROM Log) UNION ALL SELECT 1;"
    "\nUPDATE Log SET body = body + N'!' WHERE id = @n; DELETE FROM Log WHERE id < 0;\n"
    "SELECT TOP (1) message_body FROM q ORDER BY queuing_order; DROP TABLE IF EXISTS Log",
    "DECLARE @x XML; SET @x = CAST(0x3C612F3E AS XML); PRINT @x.value('(/a/b/text())[1]', "
    "'int'); IF @x.exist('declare default element namespace \"u\"; /a[@b=\"1\"]') = 1 "
    "PRINT @x.query('/*:a//c[last()]')",
    "USE master;\nGO\nIF DB_ID(N'x') IS NOT NULL DROP DATABASE x;\nCREATE DATABASE x;\nGO\n"
    "ALTER DATABASE x SET TRUSTWORTHY ON; ALTER DATABASE CURRENT SET NEW_BROKER WITH "
    "ROLLBACK IMMEDIATE;\nUSE [x]; DROP DATABASE IF EXISTS y, z",
    # dynamic SQL: the literal texts are parsed too, as their EXEC would parse them
    "DECLARE @s NVARCHAR(MAX) = N'PRINT 1'; EXEC (@s); EXEC (N'SELECT ' + N'1');\n"
    "EXECUTE (N'BEGIN TRY\n  THROW 50001, N''x'', 1\nEND TRY\nBEGIN CATCH\n  PRINT "
    "ERROR_LINE()\nEND CATCH'); EXEC (N'IF @@TRANCOUNT = 0 PRINT ''none'' ELSE ROLLBACK')",
    "DECLARE @o INT, @t NVARCHAR(10);\nEXEC sp_executesql N'SET @q = @p * 2; RETURN', "
    "N'@p INT, @q INT OUTPUT', @p = 21, @q = @o OUTPUT;\nEXEC sys.sp_executesql @stmt = "
    "N'SELECT @r = name FROM sys.services WHERE name = @a', @params = N'@a SYSNAME, "
    "@r NVARCHAR(10) OUT', @a = N'S', @r = @t OUTPUT;\nEXEC sp_executesql N'EXEC (N''CREATE "
    "PROCEDURE P @v INT = 1 AS PRINT @v'')'",
    # master's principals and the endpoint's permissions (after USE: parsed only, so no
    # certificate file is read or written)
    "USE master;\nCREATE LOGIN l WITH PASSWORD = 'p' MUST_CHANGE, CHECK_POLICY = OFF, "
    "DEFAULT_DATABASE = master; ALTER LOGIN l DISABLE; ALTER LOGIN [l] WITH NAME = m, "
    "PASSWORD = 'q' OLD_PASSWORD = 'p' UNLOCK, CHECK_EXPIRATION = OFF; ALTER LOGIN m ENABLE;"
    "\nCREATE USER mu FOR LOGIN m; GRANT CONNECT ON ENDPOINT::Broker TO m, PUBLIC;\n"
    "DENY CONNECT ON ENDPOINT::[Broker] TO m; REVOKE CONNECT ON ENDPOINT::Broker FROM "
    "PUBLIC CASCADE; DROP USER mu; DROP LOGIN m",
    "USE master;\nCREATE CERTIFICATE c WITH SUBJECT = 's', START_DATE = '20300101', "
    "EXPIRY_DATE = '12/31/2040';\nCREATE LOGIN cl FROM CERTIFICATE pc; CREATE USER cu FOR "
    "CERTIFICATE pc; ALTER CERTIFICATE pc WITH ACTIVE FOR BEGIN_DIALOG = OFF;\n"
    "ALTER CERTIFICATE [pc] REMOVE PRIVATE KEY; BACKUP CERTIFICATE c TO FILE = N'c.cer'",
    "CREATE QUEUE q; CREATE SERVICE NotifyService ON QUEUE q "
    "([http://schemas.microsoft.com/SQL/Notifications/PostEventNotification]);\n"
    "DECLARE @h UNIQUEIDENTIFIER, @p TINYINT;\n"
    "RECEIVE TOP (1) @h = conversation_handle, @p = priority FROM q",
    # the numeric and date and time types, CONVERT's styles and the date functions
    "DECLARE @f FLOAT(53) = 1.5e-3, @r REAL = 0.1, @d DECIMAL(5, 2) = 3.14159, @n NUMERIC(38) "
    "= 99999999999999999999, @t DATETIME = '2026-12-02 16:40:34.123', @u DATETIME2(3) = "
    "SYSUTCDATETIME(), @o DATETIMEOFFSET(7) = '2026-12-02T10:00:00+02:00', @day DATE, "
    "@at TIME(0) = '16:05';\nSET @day = CONVERT(DATE, '15/03/2026', 103); PRINT @d / 3 + @f;"
    "\nPRINT CONVERT(VARCHAR(30), @t, 121) + CONVERT(VARCHAR(30), @o, 127); PRINT @t + 1.5;"
    "\nIF DATEDIFF(day, @t, GETUTCDATE()) > 0 AND DATEPART(weekday, @day) = 1 PRINT "
    "DATENAME(month, DATEADD(mm, -1, @u)); PRINT CAST(@f AS INT) + @@SPID",
    # table variables in the SQL around the verbs
    "DECLARE @b TABLE (n BIGINT, h UNIQUEIDENTIFIER NOT NULL, body VARBINARY(MAX) NULL, at "
    "DATETIME2);\nDECLARE @n BIGINT, @h UNIQUEIDENTIFIER;\nWAITFOR (RECEIVE TOP (10) "
    "queuing_order, conversation_handle, message_body, GETDATE() FROM q INTO @b), TIMEOUT 10;"
    "\nWHILE EXISTS (SELECT * FROM @b) BEGIN SELECT TOP (1) @n = n, @h = h FROM @b ORDER BY "
    "n; INSERT INTO @b (n, h) SELECT n + 100, h FROM @b AS x JOIN sys.services s ON 1 = 0; "
    "DELETE FROM @b WHERE n = @n END; SELECT * FROM @b",
)

_SPECIAL = (
    "'", "''", "N'", "[", "]", "]]", '"', "(", ")", ",", ";", "=", ".", "-", "+", "--", "/*",
    "*/", "{", "}", "{0}", "{where}", "%s", "\\", "\n", "\r\n", "\t", " ", "0", "-1", "1e3",
    "0x1F", "2147483648", "99999999999999999999", "\x00", "\ud800", "\udfff", "\ufeff",
    "\u200b", "\u00e9", "\U0001f600", "\x7f", "GO", "WITH", "CREATE", "ALTER", "DROP",
    "ROUTE", "QUEUE", "SERVICE", "CONTRACT", "MESSAGE TYPE", "ADDRESS", "LIFETIME",
    "SERVICE_NAME", "BROKER_INSTANCE", "MIRROR_ADDRESS", "'LOCAL'", "'TRANSPORT'",
    "'tcp://x:1'", "'tcp://x'", "'tcp://x:0'", "SENT BY", "ANY", "ON", "OFF", "STATUS",
    "AUTHORIZATION", "dbo.", "SELECT", "EXEC", "@v", "#t", "$", "\u0130", "\u212a",
    "BEGIN TRY", "END TRY", "BEGIN CATCH", "END CATCH", "THROW", "PROC", "OUTPUT", "RETURN",
    "GRANT", "DENY", "REVOKE", "FROM", "TO", "PUBLIC", "::", "ENDPOINT::", "SERVICE::",
    "LOGIN", "USER", "CERTIFICATE", "ENABLE", "DISABLE", "NAME =", "CASCADE",
    "EXEC (", "sp_executesql", "N'@p INT OUTPUT'", "''", "N''PRINT 1''", "WHILE", "IF", "ELSE",
    "1.5", "1e-3", "DECIMAL(38, 38)", "DATETIME2(7)", "CONVERT(", "DATEADD(", "TABLE (",
    "'2026-02-30'", "@@SPID",
)


def generate_tsql(rng: random.Random) -> str:
    """One mutated batch: 1-4 mutations of one or two corpus statements (or of a program)."""
    text = rng.choice(PROGRAM_CORPUS if rng.random() < 0.25 else TSQL_CORPUS)
    if rng.random() < 0.2:
        text = text + rng.choice(("; ", "\n", " ")) + rng.choice(TSQL_CORPUS)
    for _ in range(rng.randint(1, 4)):
        text = _mutate(rng, text)
    return text


def _mutate(rng: random.Random, text: str) -> str:
    n = len(text)
    at = rng.randint(0, n)
    end = min(n, at + rng.randint(1, 12))
    kind = rng.randrange(8)
    if kind == 0:  # insert a special piece
        return text[:at] + rng.choice(_SPECIAL) + text[at:]
    if kind == 1:  # delete a piece
        return text[:at] + text[end:]
    if kind == 2:  # duplicate a piece
        return text[:end] + text[at:end] + text[end:]
    if kind == 3:  # replace one character by any code point
        code = rng.choice((rng.randrange(0x80), rng.randrange(0x800), rng.randrange(0x110000)))
        return text[:at] + chr(code) + text[at + 1:]
    if kind == 4:  # truncate
        return text[:at]
    if kind == 5:  # swap two pieces
        other = rng.randint(0, n)
        a, b = sorted((at, other))
        return text[:a] + text[b:b + 6] + text[a + 6:b] + text[a:a + 6] + text[b + 6:]
    if kind == 6:  # change the case of a piece
        piece = text[at:end]
        return text[:at] + (piece.swapcase() if rng.random() < 0.5 else piece.upper()) + text[end:]
    # repeat a piece many times (long names, deep nesting)
    return text[:at] + text[at:end] * rng.randint(2, 60) + text[end:]


class _TsqlRunner:
    """Parses every input; runs one in ``execute_every`` of those that parse in an
    in-memory instance and checks that a refused batch changed nothing."""

    def __init__(self, execute_every: int = 50) -> None:
        self.execute_every = execute_every
        self.parsed = 0
        self.instance: Any = None
        self.database: Any = None

    def setup(self) -> None:
        import pybroker

        self.instance = pybroker.connect(None, worker=False)
        self.database = self.instance.create_database("Fuzz")
        self.database.execute(TSQL_CORPUS[-1])

    def teardown(self) -> None:
        if self.instance is not None:
            self.instance.close()
            self.instance = self.database = None

    def __call__(self, text: str) -> None:
        from pybroker.core.tsql import parse_batch
        from pybroker.core.tsql.batches import parse_batches
        from pybroker.core.tsql.conversation_parser import is_conversation_statement

        try:
            batches = parse_batches(text)  # the whole grammar, programs and procedures too
            for batch in batches:
                _parse_dynamic_texts(batch.statements)
        except TsqlSyntaxError as exc:
            if not _PLACE.search(str(exc)):
                raise AssertionError(f"a refusal without its line and column: {exc}") from None
            raise
        if any(is_conversation_statement(s) for b in batches for s in b.statements):
            self.parsed += 1
            return  # a program: parsed only
        statements = parse_batch(text)
        self.parsed += 1
        if self.database is None or self.parsed % self.execute_every:
            return
        before = catalog_snapshot(self.database)
        try:
            self.database.run_statements(statements)
        except BrokerError:
            after = catalog_snapshot(self.database)
            if after != before:
                raise AssertionError(f"a refused batch changed the catalog: {text!r}") from None
            raise


_PLACE = re.compile(r"line [0-9]+, column [0-9]+")


def _parse_dynamic_texts(statements: Sequence[Any]) -> None:
    """Parse the literal texts of dynamic SQL (EXEC (N'...'), sp_executesql N'...', N'@p
    ...'), as the EXEC parses them when it runs, nested ones too."""
    from pybroker.core.tsql import control_flow, dynamic_sql
    from pybroker.core.tsql.expressions import Literal
    from pybroker.core.tsql.procedure_parser import CreateProcedure, Execute, ExecuteDynamic

    found: list[Any] = []
    for kind in (ExecuteDynamic, Execute, CreateProcedure):
        found.extend(control_flow.declarations(statements, kind))
    for s in found:
        if isinstance(s, CreateProcedure):
            _parse_dynamic_texts(s.body)
            continue
        declared: tuple[str, ...] = ()
        if isinstance(s, ExecuteDynamic):
            text = s.text
        elif dynamic_sql.is_executesql(s) and s.arguments:
            text = s.arguments[0].value
            params = s.arguments[1].value if len(s.arguments) > 1 else None
            if isinstance(params, Literal) and isinstance(params.value, str):
                declared = dynamic_sql.declared_keys(
                    dynamic_sql.parameter_list(params.value, s.token.where))
        else:
            continue
        if isinstance(text, Literal) and isinstance(text.value, str):
            _parse_dynamic_texts(dynamic_sql.parse(text.value, s.token.where, declared, False))


def catalog_snapshot(database: Any) -> tuple[Any, ...]:
    """Everything a T-SQL batch can change in a database, for comparing before and after."""
    return (
        tuple(database.routes()),
        tuple(database.message_types()),
        tuple(database.contracts()),
        tuple(database.queues()),
        tuple(database.services()),
        tuple(tuple(r.rows) for r in database.execute(_PRINCIPALS)),
    )


# What the principals' statements of a database change (sys.* views of the batch's database).
_PRINCIPALS = (
    "SELECT name, type_desc, login_name FROM sys.database_principals ORDER BY name;\n"
    "SELECT object_name, grantee, permission_name, state FROM sys.database_permissions "
    "ORDER BY 1, 2, 3;\nSELECT name, user_name FROM sys.remote_service_bindings ORDER BY name;\n"
    "SELECT name FROM sys.symmetric_keys")


_tsql_runner = _TsqlRunner()
register("tsql", Target(
    "mutated Service Broker T-SQL DDL through the parser (and some through an instance)",
    generate_tsql, _tsql_runner, _tsql_runner.setup, _tsql_runner.teardown,
))


def generate_frames(rng: random.Random) -> bytes:
    """Mutated valid frames (any type: HELLO, the handshake; MESSAGE; ACK and NOTICE
    payloads; one to three spliced, one in ten left valid), or arbitrary bytes."""
    from pybroker.core.wire import frames
    from pybroker.devtools.fuzz import frames as fuzzing

    if rng.random() < 0.1:
        return rng.randbytes(rng.randint(0, 64))
    data = b"".join(frames.encode(fuzzing.sample_frame(rng)) for _ in range(rng.randint(1, 3)))
    return data if rng.random() < 0.1 else fuzzing.mutate(data, rng)


def _decode_frames(data: bytes) -> int:
    """The network's decoder, whole and byte by byte: frames out or FrameError."""
    from pybroker.core.wire import frames

    decoder = frames.FrameDecoder(65536)
    count = len(decoder.feed(data))
    piecewise = frames.FrameDecoder(65536)
    for i in range(len(data)):
        piecewise.feed(data[i:i + 1])
    return count


register("frames", Target(
    "mutated and arbitrary wire frames (HELLO, MESSAGE, ACK, NOTICE, ...) through the frame "
    "decoder, whole and byte by byte",
    generate_frames, _decode_frames,
))


def print_progress(report: Report) -> None:
    if sys.stderr.isatty():
        print(f"\r{report.count:,} inputs, {report.inputs_per_second:,.0f}/s, "
              f"{report.crashes} crashes, {report.hangs} hangs", end="", file=sys.stderr,
              flush=True)


def _wire_target(name: str) -> Target:
    """A decoder of pybroker.devtools.fuzz.wire: its own arbitrary and mutated valid inputs."""
    from pybroker.devtools.fuzz import wire as fuzz_wire
    from pybroker.devtools.fuzz.frames import mutate

    def generate(rng: random.Random) -> bytes:
        if rng.random() < 0.2:
            return rng.randbytes(rng.randint(0, 256))
        return mutate(fuzz_wire.valid_input(name, rng), rng)

    return Target(fuzz_wire.TARGETS[name].__doc__ or f"the wire's {name} decoder",
                  generate, fuzz_wire.TARGETS[name])


for _name in ("handshake", "ack", "notice"):
    register(_name, _wire_target(_name))
