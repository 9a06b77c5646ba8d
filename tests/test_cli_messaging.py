"""The command line of a T-SQL user: a SQL Server-style script run by two ``pybroker sql``
invocations on one file (Shop and Warehouse, as ``pybroker demo FILE`` builds them), and
the quick commands send, receive and end, with what send says of the message it sent
(delivered, refused, or waiting and why), and create-service's contracts."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.cli import sent_message
from pybroker.cli.main import main
from pybroker.core.conversation.model import (
    STATUS_NO_ROUTE,
    STATUS_NO_TRANSPORT,
    STATUS_QUEUE_DISABLED,
)
from tests.cli_helpers import call, run
from tests.process_helpers import Served, free_ports, start_all, trust_each_other

END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"


@pytest.fixture(scope="module")
def built_shop_file(tmp_path_factory):
    """Built once per module (a `pybroker demo` process): each test gets its own copy."""
    path = tmp_path_factory.mktemp("shop") / "shop.duckdb"
    done = run("demo", path, "--example", "1")
    assert done.returncode == 0, done.stderr
    with pybroker.connect(path, worker=False) as inst:
        from pybroker.devtools.demos.routing import run_conversation

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
    # ordinary SQL runs on DuckDB: a table that is not there stops the batch there
    assert done.stderr.startswith("pybroker: error: INSERT at line 1, column 17 failed: ")
    assert 'Table with name "t" does not exist in database Shop' in done.stderr
    assert done.stderr.count("\n") == 1
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


# -- what `send` says of the message it sent ---------------------------------------------

GENERATED = settings(max_examples=15, derandomize=True, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])



def shell_built(path: Path, *target_options: str, processes: bool = False) -> Path:
    """What a new user builds from the shell: Stock's StockService (created with
    ``target_options``) on StockQueue, and Shop's ShopService to send from; each command
    its own process with ``processes``, else main() in this process (quicker)."""
    for args in (("create-database", path, "Stock"), ("create-database", path, "Shop"),
                 ("create-queue", path, "-d", "Stock", "StockQueue"),
                 ("create-service", path, "-d", "Stock", "StockService", "--queue",
                  "StockQueue", *target_options),
                 ("create-queue", path, "-d", "Shop", "ShopQueue"),
                 ("create-service", path, "-d", "Shop", "ShopService", "--queue", "ShopQueue")):
        if processes:
            done = run(*args)
            assert done.returncode == 0, done.stderr
        else:
            with contextlib.redirect_stdout(io.StringIO()):
                assert main([str(a) for a in args]) == 0
    return path


def transmission_queue(path: Path) -> list[tuple]:
    with pybroker.connect(path, read_only=True) as inst:
        return inst.sql("SELECT to_service_name, transmission_status FROM "
                        "sys.transmission_queue ORDER BY enqueue_time").fetchall()


def test_a_target_built_from_the_shell_receives_what_send_sends(tmp_path):
    path = shell_built(tmp_path / "f.duckdb", processes=True)
    with pybroker.connect(path, read_only=True) as inst:
        assert inst.database("Stock").services()[0].contracts == ("DEFAULT",)
        assert inst.database("Shop").services()[0].contracts == ("DEFAULT",)
    done = run("send", path, "-d", "Shop", "--from", "ShopService", "--to", "StockService",
               "hello")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    handle = done.stdout.strip()
    done = run("receive", path, "-d", "Stock", "StockQueue", "--json")
    assert done.returncode == 0, done.stderr
    [message] = json.loads(done.stdout)
    assert (message["message_body"], message["service_name"]) == ("hello", "StockService")
    with pybroker.connect(path, read_only=True) as inst:
        assert inst.database("Shop").conversation(handle).state == "CO"


def test_send_to_a_service_that_only_begins_dialogs_says_it_was_refused(tmp_path):
    path = shell_built(tmp_path / "f.duckdb", "--initiator-only")
    for wait in ([], ["--wait-delivered"]):
        done = run("send", path, "-d", "Shop", "--from", "ShopService", "--to",
                   "StockService", "hello", *wait)
        assert done.returncode == 1
        handle = done.stdout.strip()
        assert len(handle) == 36  # printed first: the conversation to end
        assert done.stderr == (
            "pybroker: error: the message was refused: error -8408: Target service "
            "'StockService' does not support contract 'DEFAULT'. Make the target accept it: "
            "ALTER SERVICE [StockService] (ADD CONTRACT [DEFAULT]) in its database, or "
            "create the service with `pybroker create-service ... --contract DEFAULT`.\n")
        with pybroker.connect(path, read_only=True) as inst:
            conversation = inst.database("Shop").conversation(handle)
            assert conversation.state == "ER"
    assert transmission_queue(path) == []


def test_send_to_a_misspelt_service_says_why_it_waits_and_which_name_is_near(tmp_path):
    path = shell_built(tmp_path / "f.duckdb")
    done = run("send", path, "-d", "Shop", "--from", "ShopService", "--to", "StockSevice",
               "hello")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.strip()) == 36
    assert done.stderr == (
        "pybroker: waiting: no route to service 'StockSevice' (did you mean "
        "'StockService'?): the message waits in Shop's transmission queue (DELAYED) and is "
        "routed again after a time-out; create the service or a route to it (`pybroker "
        "create-route`)\n")
    assert transmission_queue(path) == [("StockSevice", STATUS_NO_ROUTE)]
    # asked to wait for delivery, it does not come: exit 1, with why
    done = run("send", path, "-d", "Shop", "--from", "ShopService", "--to", "StockSevice",
               "again", "--wait-delivered", "--timeout", "0")
    assert done.returncode == 1
    assert done.stderr.startswith("pybroker: error: not delivered within 0 s: no route to "
                                  "service 'StockSevice' (did you mean 'StockService'?)")
    assert done.stderr.count("\n") == 1
    assert len(transmission_queue(path)) == 2


def test_send_says_when_the_target_queue_is_off_or_no_endpoint_can_send(tmp_path):
    path = shell_built(tmp_path / "f.duckdb")
    for args in (("create-queue", path, "-d", "Stock", "OffQueue", "--status", "off"),
                 ("create-service", path, "-d", "Stock", "Paused", "--queue", "OffQueue"),
                 ("create-route", path, "-d", "Shop", "ToParts", "--service-name", "Parts",
                  "--address", "tcp://127.0.0.1:4999")):
        done = run(*args)
        assert done.returncode == 0, done.stderr
    done = run("send", path, "-d", "Shop", "--from", "ShopService", "--to", "Paused", "x")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ("pybroker: waiting: the queue of service 'Paused' is disabled "
                           "(STATUS = OFF): the message waits in Shop's transmission "
                           "queue until it is on\n")
    done = run("send", path, "-d", "Shop", "--from", "ShopService", "--to", "Parts", "x")
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "pybroker: waiting: service 'Parts' is at tcp://127.0.0.1:4999, and no broker "
        "endpoint runs where the file is open: the message waits in Shop's transmission "
        "queue and leaves when `pybroker serve FILE` runs\n")
    assert transmission_queue(path) == [("Paused", STATUS_QUEUE_DISABLED),
                                        ("Parts", STATUS_NO_TRANSPORT)]


def test_create_service_takes_contracts_or_none(tmp_path, capsys):
    path = shell_built(tmp_path / "f.duckdb")
    done = run("sql", path, "-d", "Stock", "CREATE MESSAGE TYPE [Ask] VALIDATION = NONE; "
               "CREATE CONTRACT [AskContract] ([Ask] SENT BY ANY)")
    assert done.returncode == 0, done.stderr
    assert call(["create-service", str(path), "-d", "Stock", "Both", "--queue", "StockQueue",
                 "--contract", "AskContract", "--contract", "DEFAULT"], capsys) == (
        0, "created service Both on queue StockQueue in Stock (accepts AskContract, "
        "DEFAULT)\n", "")
    assert call(["create-service", str(path), "-d", "Stock", "Asks", "--queue", "StockQueue",
                 "--contract", "AskContract"], capsys)[:2] == (
        0, "created service Asks on queue StockQueue in Stock (accepts AskContract)\n")
    assert call(["create-service", str(path), "-d", "Stock", "Starter", "--queue",
                 "StockQueue", "--initiator-only"], capsys)[:2] == (
        0, "created service Starter on queue StockQueue in Stock (only begins dialogs)\n")
    code, out, err = call(["create-service", str(path), "-d", "Stock", "Nope", "--queue",
                           "StockQueue", "--contract", "Missing"], capsys)
    assert (code, out, err) == (1, "", "pybroker: error: contract 'Missing' does not exist "
                                "in database 'Stock'; create it first\n")
    code, _, err = call(["create-service", str(path), "-d", "Stock", "Nope", "--queue",
                         "StockQueue", "--contract", "DEFAULT", "--initiator-only"], capsys)
    assert code == 2 and "not allowed with argument" in err
    code, _, err = call(["create-service", str(path), "-d", "Stok", "Nope", "--queue",
                         "StockQueue"], capsys)
    assert (code, err) == (1, "pybroker: error: database 'Stok' does not exist in this "
                           "instance; did you mean 'Stock'?\n")
    with pybroker.connect(path, read_only=True) as inst:
        assert {s.name: s.contracts for s in inst.database("Stock").services()} == {
            "StockService": ("DEFAULT",), "Both": ("AskContract", "DEFAULT"),
            "Asks": ("AskContract",), "Starter": ()}
    # the Python API keeps SQL Server's meaning: no contracts listed, initiating only
    with pybroker.connect(path) as inst:
        assert inst.database("Stock").create_service("Api", queue="StockQueue").contracts == ()


@pytest.mark.parametrize("timeout", ["-1", "3601", "nan"])
def test_send_refuses_a_timeout_out_of_bounds_before_it_sends(built_by_shell, capsys,
                                                             timeout):
    before = conversation_count(built_by_shell)
    code, out, err = call(["send", str(built_by_shell), "-d", "Shop", "--from", "ShopService",
                           "--to", "StockService", "x", "--timeout", timeout], capsys)
    assert (code, out) == (2, "")
    assert err == (f"pybroker: usage error: --timeout must be seconds from 0 to 3600, not "
                   f"{float(timeout):g}\n")
    assert conversation_count(built_by_shell) == before


def conversation_count(path: Path) -> int:
    with pybroker.connect(path, read_only=True) as inst:
        return inst.sql("SELECT count(*) FROM sys.conversation_endpoints").fetchall()[0][0]


@pytest.fixture(scope="module")
def built_by_shell(tmp_path_factory) -> Path:
    return shell_built(tmp_path_factory.mktemp("typed") / "f.duckdb")


# A service name as a user may type it: any text argparse passes on (given as --to=NAME)
SERVICE_NAMES = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@GENERATED
@given(name=SERVICE_NAMES)
def test_send_to_any_name_is_refused_in_one_line_or_says_why_it_waits(built_by_shell, capsys,
                                                                      name):
    assume(name not in ("StockService", "ShopService"))
    before = transmission_queue(built_by_shell)
    code, out, err = call(["send", str(built_by_shell), "-d", "Shop", "--from",
                           "ShopService", f"--to={name}", "x"], capsys)
    after = transmission_queue(built_by_shell)
    assert err.count("\n") == 1 and err.startswith("pybroker: "), err
    if code == 1:  # a name no service can have: refused before anything is written
        assert (out, after) == ("", before)
        assert err.startswith("pybroker: error: service name ")
        return
    assert code == 0, err
    assert len(out.strip()) == 36
    assert after == [*before, (name, STATUS_NO_ROUTE)]
    folded = " ".join(f"no route to service {name!r}".split())
    assert err.startswith(f"pybroker: waiting: {folded}")


@settings(GENERATED, max_examples=10)
@given(at=st.integers(0, len("StockService") - 1), how=st.sampled_from(["drop", "case"]))
def test_send_to_a_name_one_slip_from_a_service_names_that_service(built_by_shell, capsys, at,
                                                                  how):
    name = "StockService"
    typed = name[:at] + name[at + 1:] if how == "drop" else name[:at] + name[at].swapcase() + (
        name[at + 1:])
    code, _, err = call(["send", str(built_by_shell), "-d", "Shop", "--from", "ShopService",
                         "--to", typed, "x"], capsys)
    assert code == 0, err
    assert err.startswith(f"pybroker: waiting: no route to service {typed!r} (did you mean "
                          "'StockService'?)")


def test_send_waits_for_delivery_to_another_instance_through_the_served_file(tmp_path):
    files = {n: tmp_path / f"{n}.duckdb" for n in ("a", "b")}
    ports = dict(zip(files, free_ports(2), strict=True))
    trust_each_other(*files.values())
    shell_built(files["a"])  # a's own Stock is not the one the route leads to
    for args in (("create-database", files["b"], "Far"),
                 ("create-queue", files["b"], "-d", "Far", "FarQueue"),
                 ("create-service", files["b"], "-d", "Far", "FarService", "--queue",
                  "FarQueue"),
                 ("create-route", files["a"], "-d", "Shop", "ToFar", "--service-name",
                  "FarService", "--address", f"tcp://127.0.0.1:{ports['b']}"),
                 ("create-route", files["b"], "-d", "Far", "ToShop", "--service-name",
                  "ShopService", "--address", f"tcp://127.0.0.1:{ports['a']}")):
        done = run(*args)
        assert done.returncode == 0, done.stderr
    served = [Served(files[n], ports[n]) for n in files]
    try:
        start_all(*served)
        done = run("send", files["a"], "-d", "Shop", "--from", "ShopService", "--to",
                   "FarService", "over the wire", "--wait-delivered")
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        assert transmission_queue(files["a"]) == []  # through the server, read-only
        done = run("messages", files["b"], "-d", "Far", "FarQueue", "--json")
        assert done.returncode == 0, done.stderr
        assert [m["message_body"] for m in json.loads(done.stdout)] == ["over the wire"]
    finally:
        for child in served:
            child.close()


# -- sent_message on its own: one reading's outcome, and the watch under a fake clock ------

def reading(**changes: object) -> sent_message.Reading:
    fields = {"state": "CO", "error_code": None, "error_description": None,
              "far_service": "Far", "far_broker_instance": None, "contract": "DEFAULT",
              "is_waiting": True, "transmission_status": ""}
    return sent_message.Reading(**{**fields, **changes})


@pytest.mark.parametrize(("seen", "kind", "text"), [
    (None, "refused", "the conversation is gone (ended with cleanup)"),
    (reading(state="ER", error_code=-8489, error_description="Lifetime expired.",
             is_waiting=False), "refused",
     "the message was refused: error -8489: Lifetime expired."),
    (reading(state="ER", error_code=7, error_description="no stock", is_waiting=False),
     "delivered", "the far side then ended the conversation with error 7: no stock"),
    (reading(is_waiting=False), "delivered", ""),
    (reading(transmission_status="Connection attempt failed with error: 'refused'."),
     "waiting", "the message to 'Far' waits in Shop's transmission queue: Connection "
     "attempt failed with error: 'refused'."),
    (reading(), "on its way",
     "the message to 'Far' was sent to tcp://far:4022 and is not acknowledged yet"),
])
def test_a_reading_of_a_sent_message_says_what_became_of_it(seen, kind, text):
    asked: list[str] = []

    def known() -> list[str]:
        asked.append("services")
        return []

    def address(r: sent_message.Reading) -> str:
        asked.append("address")
        return "tcp://far:4022"

    assert sent_message.outcome(seen, "Shop", known_services=known, address=address) == (
        sent_message.Outcome(kind, text))
    assert "services" not in asked  # only a message without a route looks for names


class _Rows:
    def __init__(self, rows: list[tuple]) -> None:
        self._rows = rows

    def fetchall(self) -> list[tuple]:
        return self._rows


class _OnItsWay:
    """An instance whose message stays on its way until ``acknowledged_at`` (fake clock)."""

    def __init__(self, clock: list[float], acknowledged_at: float) -> None:
        self.clock, self.acknowledged_at, self.reads = clock, acknowledged_at, 0

    def sql(self, query: str, params: object = None) -> _Rows:
        self.reads += 1
        waiting = self.clock[0] < self.acknowledged_at
        return _Rows([("CO", "CONVERSING", None, None, "Far", None, "DEFAULT", waiting, "")])

    def route(self, service: str, *, origin: str, broker_instance: str | None) -> object:
        return SimpleNamespace(address="tcp://far:4022")


@pytest.mark.parametrize(("acknowledged_at", "kind"), [(0.5, "delivered"),
                                                      (99.0, "on its way")])
def test_the_watch_reads_again_until_delivery_or_the_time_is_up(acknowledged_at, kind):
    now = [0.0]
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        now[0] += seconds

    inst = _OnItsWay(now, acknowledged_at)
    result = sent_message.watch(inst, "Shop", "h", 0, timeout=2.0, until_delivered=False,
                                clock=lambda: now[0], pause=pause)
    assert result.kind == kind
    assert inst.reads == len(pauses) + 1
    assert pauses[0] == sent_message.FIRST_PAUSE
    assert max(pauses) <= sent_message.LONGEST_PAUSE
    assert sum(pauses) <= 2.0  # never past the time-out
    if kind == "on its way":
        assert sum(pauses) == pytest.approx(2.0)
