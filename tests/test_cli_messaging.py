"""The command line of a T-SQL user: a SQL Server-style script run by two ``pybroker sql``
invocations on one file (Shop and Warehouse, as ``pybroker demo FILE`` builds them), and
the quick commands send, receive and end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pybroker

END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"


def run(*args: object, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([sys.executable, "-m", "pybroker", *map(str, args)],
                          capture_output=True, text=True, input=stdin, timeout=120, env=env)


@pytest.fixture(scope="module")
def built_shop_file(tmp_path_factory):
    """Built once per module (a `pybroker demo` process): each test gets its own copy."""
    path = tmp_path_factory.mktemp("shop") / "shop.duckdb"
    done = run("demo", path, "--example", "1")
    assert done.returncode == 0, done.stderr
    with pybroker.connect(path, worker=False) as inst:
        from pybroker.examples import run_conversation

        run_conversation(inst, out=lambda line: None)  # Shop and Warehouse, as demo builds
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # closed: no log beside it
    return path


@pytest.fixture
def shop_file(built_shop_file, tmp_path):
    path = tmp_path / "shop.duckdb"
    shutil.copyfile(built_shop_file, path)
    return path


INITIATOR = """
DECLARE @handle UNIQUEIDENTIFIER;
DECLARE @request NVARCHAR(MAX) = N'<StockRequest sku="A-100" quantity="2"/>';
BEGIN TRANSACTION;
    BEGIN DIALOG CONVERSATION @handle
        FROM SERVICE [OrderService]
        TO SERVICE N'StockService'
        ON CONTRACT [StockContract]
        WITH ENCRYPTION = OFF;
    SEND ON CONVERSATION @handle MESSAGE TYPE [StockRequest] (@request);
COMMIT TRANSACTION;
SELECT @handle AS conversation_handle;
"""

TARGET = """
DECLARE @handle UNIQUEIDENTIFIER, @type SYSNAME, @body NVARCHAR(MAX);
BEGIN TRANSACTION;
WAITFOR (
    RECEIVE TOP (1) @handle = conversation_handle, @type = message_type_name,
        @body = CAST(message_body AS NVARCHAR(MAX))
    FROM dbo.StockQueue
), TIMEOUT 5000;
SEND ON CONVERSATION @handle MESSAGE TYPE [StockReply] (N'<StockReply reserved="2"/>');
END CONVERSATION @handle;
COMMIT TRANSACTION;
SELECT @type AS message_type_name, @body AS message_body;
"""

REPLY = """
DECLARE @handle UNIQUEIDENTIFIER = '{handle}';
WAITFOR (
    RECEIVE message_type_name, CAST(message_body AS NVARCHAR(MAX)) AS body
    FROM OrderQueue WHERE conversation_handle = @handle
), TIMEOUT 5000;
END CONVERSATION @handle;
"""


def test_a_sql_server_script_runs_from_pybroker_sql_on_both_sides(shop_file):
    done = run("sql", shop_file, "-d", "Shop", "--json", INITIATOR)
    assert done.returncode == 0, done.stderr
    [result] = json.loads(done.stdout)
    assert result["columns"] == ["conversation_handle"]
    [[handle]] = result["rows"]

    done = run("sql", shop_file, "-d", "Warehouse", "-", stdin=TARGET)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["message_type_name", "message_body"]
    assert lines[2].split() == ["StockRequest", '<StockRequest', 'sku="A-100"', 'quantity="2"/>']
    assert lines[3] == "(1 row)"

    done = run("sql", shop_file, "-d", "Shop", "--csv", REPLY.format(handle=handle))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "message_type_name,body", 'StockReply,"<StockReply reserved=""2""/>"',
        f"{END_DIALOG},"]

    with pybroker.connect(shop_file, read_only=True) as inst:
        rows = inst.sql(
            "SELECT database_name, state_desc FROM sys.conversation_endpoints "
            "WHERE conversation_handle = ? OR conversation_id = (SELECT conversation_id FROM "
            "sys.conversation_endpoints WHERE conversation_handle = ?) ORDER BY ALL",
            [handle, handle]).fetchall()
        assert rows == [("Shop", "CLOSED"), ("Warehouse", "CLOSED")]
        assert inst.sql("SELECT COUNT(*) FROM sys.transmission_queue").fetchall() == [(0,)]


def test_a_failed_script_prints_what_it_returned_and_one_error_line(shop_file):
    done = run("sql", shop_file, "-d", "Shop",
               "SELECT N'first' AS step; END CONVERSATION NEWID()")
    assert done.returncode == 1
    assert done.stdout.splitlines()[:3] == ["step", "-----", "first"]
    assert done.stderr.startswith("pybroker: error: END CONVERSATION at line 1, column 26 "
                                  "failed: conversation handle ")
    assert done.stderr.count("\n") == 1
    done = run("sql", shop_file, "-d", "Shop", "DECLARE @h INT; INSERT INTO t VALUES (1)")
    assert done.returncode == 1
    assert "INSERT at line 1, column 17 is not supported" in done.stderr
    done = run("sql", shop_file, "-d", "Shop", "DECLARE @s NVARCHAR(9) = N'first'\n"
               "SELECT @s AS step\nGO\nDECLARE @s NVARCHAR(9) = N'second'\nSELECT @s AS step")
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stdout.splitlines() if line.strip()] == [
        "step", "-----", "first", "(1 row)", "step", "------", "second", "(1 row)"]


def test_the_quick_commands_send_receive_and_end(shop_file):
    done = run("send", shop_file, "-d", "Shop", "--from", "OrderService", "--to",
               "StockService", "--contract", "StockContract", "--type", "StockRequest",
               '<StockRequest sku="Q"/>')
    assert done.returncode == 0, done.stderr
    handle = done.stdout.strip()
    assert len(handle) == 36
    done = run("send", shop_file, "-d", "Shop", "--on", handle, "--type", "StockRequest", "-",
               stdin="<StockRequest sku='R'/>")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == handle

    done = run("receive", shop_file, "-d", "Warehouse", "StockQueue", "--max", "10",
               "--wait", "5", "--json")
    assert done.returncode == 0, done.stderr
    messages = json.loads(done.stdout)
    assert [(m["message_sequence_number"], m["message_body"]) for m in messages] == [
        (0, '<StockRequest sku="Q"/>'), (1, "<StockRequest sku='R'/>")]
    far = messages[0]["conversation_handle"]

    done = run("end", shop_file, "-d", "Warehouse", far, "--error", "7", "--description",
               "no stock")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ended conversation {far} with error 7"
    done = run("receive", shop_file, "-d", "Shop", "OrderQueue")
    assert done.returncode == 0, done.stderr
    assert "http://schemas.microsoft.com/SQL/ServiceBroker/Error" in done.stdout
    assert handle in done.stdout
    done = run("end", shop_file, "-d", "Shop", handle)
    assert done.returncode == 0, done.stderr
    done = run("receive", shop_file, "-d", "Shop", "OrderQueue")
    assert done.stdout.strip() == "(no message)"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("send", "{file}", "-d", "Shop", "x"), 2, "give --from and --to"),
        (("send", "{file}", "-d", "Shop", "--on", "h", "--to", "T", "x"), 2,
         "--on continues a conversation; --to is for beginning one"),
        (("receive", "{file}", "-d", "Shop", "OrderQueue", "--max", "0"), 2,
         "--max must be at least 1"),
        (("end", "{file}", "-d", "Shop", "h", "--error", "1"), 2,
         "--error and --description go together"),
        (("end", "{missing}", "-d", "Shop", "h"), 1, "no instance file at"),
        (("receive", "{missing}", "-d", "Shop", "q"), 1, "no instance file at"),
        (("send", "{file}", "-d", "Shop", "--on", "nope", "x"), 1,
         "'nope' is not a conversation handle"),
        (("receive", "{file}", "-d", "Shop", "Nope"), 1, "queue 'Nope' does not exist"),
    ],
)
def test_quick_command_errors_exit_with_a_code_and_one_line(shop_file, args, code, message):
    missing = shop_file.parent / "missing.duckdb"
    done = run(*(a.format(file=shop_file, missing=missing) for a in args))
    assert done.returncode == code
    assert message in done.stderr
    assert done.stderr.count("\n") == 1
    assert not missing.exists()
