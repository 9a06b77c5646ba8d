"""The command line in its users' words: a typo in a file name never makes a new instance,
the help says what each command and argument does, and errors name what is wrong and how
to fix it from the command line (not from Python)."""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import AlreadyExistsError, MasterOnlyError, WireError
from pybroker.cli.main import build_parser
from tests.cli_helpers import call, run

pytestmark = pytest.mark.cli




def new_instance(path: Path) -> Path:
    with pybroker.connect(path, worker=False) as inst:
        inst.create_database("Shop").create_queue("Q")
    return path


# -- a missing instance file is refused --------------------------------------------------

# Every command that takes an instance FILE and whose purpose is not to create one.
NEEDS_A_FILE = {
    "create-queue": ["-d", "Shop", "Q"],
    "create-service": ["-d", "Shop", "S", "--queue", "Q"],
    "sql": ["-d", "Shop", "CREATE QUEUE Q"],
    "databases": [],
    "routes": ["-d", "Shop"],
    "create-route": ["-d", "Shop", "R", "--address", "LOCAL"],
    "alter-route": ["-d", "Shop", "R", "--address", "LOCAL"],
    "drop-route": ["-d", "Shop", "R"],
    "services": [],
    "queues": ["-d", "Shop"],
    "conversations": [],
    "messages": ["-d", "Shop", "Q"],
    "send": ["-d", "Shop", "--from", "S", "--to", "T", "x"],
    "route": ["S", "--origin", "Shop"],
    "forwarding": [],
    "forwarding on": ["--size-mb", "20"],
    "export": ["{dir}/state"],
    "serve": ["--port", "0"],
    "cert": [],
    "trust": ["Peer", "{dir}/peer.pem"],
    "untrust": ["Peer"],
}

# A file name as a user may mistype it: any printable characters but a path separator
# (whitespace is left out: the one-line error folds it).
FILE_NAMES = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), blacklist_characters="/"),
    min_size=1, max_size=24,
).filter(lambda name: name not in (".", "..") and len(name.encode()) < 200)


@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=FILE_NAMES)
def test_a_missing_instance_file_is_refused_and_never_created(capsys, name):
    for command, rest in NEEDS_A_FILE.items():
        with tempfile.TemporaryDirectory() as tmp:
            missing = Path(tmp) / name
            words = command.split()
            argv = [words[0], str(missing), *words[1:],
                    *(arg.format(dir=tmp) for arg in rest)]
            code, out, err = call(argv, capsys)
            assert (code, out) == (1, ""), (command, err)
            assert err == (f"pybroker: error: no instance file at {missing}; create one "
                           f"with: pybroker create-database {missing} NAME\n"), command
            assert list(Path(tmp).iterdir()) == [], command  # no file, no .wal, no output


@pytest.mark.parametrize("job", [
    ["resolve", "{missing}", "{dir}/c.parquet", "{dir}/out"],
    ["impact", "{missing}", "{dir}/c.parquet", "{dir}/out", "--after", "{missing}"],
    ["traffic", "{missing}", "{dir}/out"],
])
def test_pipeline_jobs_refuse_a_missing_routing_state(tmp_path, capsys, job):
    missing = tmp_path / "nosuch.duckdb"
    argv = ["pipeline", *(a.format(missing=missing, dir=tmp_path) for a in job)]
    code, _, err = call(argv, capsys)
    assert code == 1
    assert err == f"pybroker: error: no instance file or export directory at {missing}\n"
    assert list(tmp_path.iterdir()) == []


def test_serve_creates_a_missing_file_only_when_asked(tmp_path):
    missing = tmp_path / "typo.duckdb"
    refused = run("serve", missing, "--port", "0")
    assert refused.returncode == 1
    assert refused.stderr == (f"pybroker: error: no instance file at {missing}; create one "
                              f"with: pybroker create-database {missing} NAME\n")
    assert not missing.exists()
    # --create makes the file; here it then fails on an address that is not this machine's
    created = run("serve", missing, "--create", "--port", "0", "--host", "192.0.2.1")
    assert created.returncode == 1
    assert missing.exists()


# -- help --------------------------------------------------------------------------------

# SPEC numbers (R7.3, P2, C5), and words of the project's own documents.
NOT_USERS_WORDS = re.compile(r"\b[RPC]\d+(\.\d+)?\b|\bseeds\b|\bissues?\b", re.IGNORECASE)


def parsers(parser: argparse.ArgumentParser,
            path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, f"{path} {name}")


def help_texts(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str]]:
    """(what, text) for the parser's description and epilog, its commands' one-line
    helps and its arguments' helps."""
    for what, text in (("description", parser.description), ("epilog", parser.epilog)):
        if text:
            yield what, text
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                yield choice.dest, choice.help or ""
        elif action.help and action.help != argparse.SUPPRESS:
            yield action.dest, action.help % {}  # as argparse prints it ('%%' -> '%')


def test_every_help_text_is_in_users_words():
    walked = list(parsers(build_parser(), "pybroker"))
    assert {"pybroker serve", "pybroker pipeline resolve", "pybroker chaos check",
            "pybroker bench"} <= {path for path, _ in walked}
    problems = []
    for path, parser in walked:
        for what, text in help_texts(parser):
            found = NOT_USERS_WORDS.search(text)
            explain = path == "pybroker explain" or (path, what) == ("pybroker", "explain")
            if found and not (explain and found.group()[0].upper() in "RPC"):
                # explain's subject is the step codes: its help shows their forms
                problems.append(f"{path} {what}: {found.group()!r} in {text!r}")
        for action in parser._actions:
            positional = not action.option_strings and not isinstance(
                action, argparse._SubParsersAction)
            if positional and not action.help:
                problems.append(f"{path} {action.dest}: a positional argument without help")
    assert problems == []


def test_an_instance_file_argument_says_what_it_is(capsys):
    code, out, _ = call(["routes", "--help"], capsys)
    assert code == 0
    assert ("the instance file (a DuckDB database made by `pybroker create-database`)"
            in " ".join(out.split()))


# -- errors ------------------------------------------------------------------------------


@pytest.fixture
def two_instances(tmp_path) -> tuple[Path, Path]:
    """An instance file, and the PEM file of another instance's certificate."""
    other = tmp_path / "stock.duckdb"
    with pybroker.connect(other, worker=False) as inst:
        pem = tmp_path / "stock.pem"
        pem.write_text(inst.certificate)
    return new_instance(tmp_path / "shop.duckdb"), pem


def test_trusting_a_certificate_twice_names_the_name_it_has(two_instances, capsys):
    shop, pem = two_instances
    assert call(["trust", str(shop), "Stock", str(pem)], capsys)[:2] == (0, "trusted Stock\n")
    assert call(["trust", str(shop), "Stock", str(pem)], capsys)[0] == 0  # replaces itself
    code, _, err = call(["trust", str(shop), "Warehouse", str(pem)], capsys)
    assert code == 1
    assert err == ("pybroker: error: this certificate is already trusted as 'Stock' (a "
                   "certificate is trusted under one name): remove 'Stock' first to trust it "
                   "as 'Warehouse'\n")
    with pybroker.connect(shop, worker=False) as inst:
        master = inst.database("master")
        with pytest.raises(AlreadyExistsError) as caught:
            master.execute(f"CREATE CERTIFICATE Warehouse FROM FILE = '{pem}'")
        assert str(caught.value) == (
            "this certificate is already trusted as 'Stock' (a certificate is trusted under "
            "one name): remove 'Stock' first to trust it as 'Warehouse'")
        with pytest.raises(AlreadyExistsError) as caught:
            master.execute(f"CREATE CERTIFICATE Stock FROM FILE = '{pem}'")
        assert str(caught.value) == ("certificate 'Stock' already exists (a trusted peer): "
                                     "DROP CERTIFICATE Stock first to replace it")
        assert inst.sql("SELECT name FROM sys.certificates").fetchall() == [("Stock",)]


def test_a_file_another_process_holds_names_its_pid(tmp_path, capsys):
    path = new_instance(tmp_path / "held.duckdb")
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, duckdb
            con = duckdb.connect({str(path)!r})
            print("open", flush=True)
            sys.stdin.readline()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        for argv in (["create-queue", str(path), "-d", "Shop", "Q2"], ["databases", str(path)]):
            code, _, err = call(argv, capsys)
            assert code == 1
            assert err == (
                f"pybroker: error: cannot open instance file {path}: it is already open in "
                f"another process (PID {holder.pid}) (DuckDB allows one writer, or several "
                "readers, per file); close that process first\n")
    finally:
        holder.communicate("\n", timeout=30)


@pytest.mark.parametrize(("statement", "words", "reason"), [
    ("CREATE CERTIFICATE c FROM FILE = 'c.pem'", "CREATE CERTIFICATE",
     "endpoint certificates belong to the whole instance"),
    ("DROP ENDPOINT e", "DROP ENDPOINT", "the broker endpoint belongs to the whole instance"),
])
def test_master_only_statements_say_how_to_run_them_in_master(tmp_path, capsys, statement,
                                                             words, reason):
    path = new_instance(tmp_path / "i.duckdb")
    code, _, err = call(["sql", str(path), "-d", "Shop", statement], capsys)
    assert code == 1
    assert err == (f"pybroker: error: {words} at line 1, column 1 runs only in the master "
                   f"database: {reason}; run it with -d master: pybroker sql {path} -d master "
                   "...\n")
    with pybroker.connect(path, worker=False) as inst, pytest.raises(MasterOnlyError) as caught:
        inst.database("Shop").execute(statement)
    assert str(caught.value) == (
        f"{words} at line 1, column 1 runs only in the master database: {reason}; run it with "
        "the master database's execute(): inst.database('master').execute(...)")


@pytest.mark.parametrize("host", ["192.0.2.1", "10.255.255.1"])  # addresses of no machine here
def test_an_address_not_of_this_machine_is_named_as_such(tmp_path, host):
    with pybroker.connect(None, worker=False) as inst, pytest.raises(WireError) as caught:
        inst.start_endpoint(0, host)
    assert str(caught.value) == (
        f"cannot start the broker endpoint on {host}:0: {host} is not an address of this "
        "machine; listen on one of its own addresses (127.0.0.1, or 0.0.0.0 for all of them)")
    done = run("serve", new_instance(tmp_path / "s.duckdb"), "--port", "0", "--host", host)
    assert done.returncode == 1
    assert done.stderr == f"pybroker: error: {caught.value}\n"


def test_a_taken_port_is_named_as_such():
    with socket.socket() as taken, pybroker.connect(None, worker=False) as inst:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(WireError) as caught:
            inst.start_endpoint(port, "127.0.0.1")
    assert str(caught.value).startswith(f"cannot start the broker endpoint on 127.0.0.1:{port}: ")
    assert str(caught.value).endswith("address already in use (is the port taken by another "
                                      "process?)")


# -- words of the command line, not of Python -------------------------------------------


@pytest.fixture(scope="module")
def shop_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("words") / "shop.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        shop = inst.create_database("Shop")
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
    return path


@pytest.mark.parametrize(("query", "refusal"), [
    ("DELETE FROM routes", "is read-only: a DELETE statement is refused (it could change the "
     "instance file or what is outside it)"),
    ("ATTACH 'x.duckdb' AS x", "is read-only: an ATTACH statement is refused (it could change "
     "the instance file or what is outside it)"),
    ("SELECT 1; SELECT 2", "runs exactly one read-only query, not 2 statements"),
    ("SELECT nextval('s')", "is read-only: nextval() is refused, as it changes state"),
])
def test_query_refusals_name_the_commands_not_the_api(shop_file, capsys, query, refusal):
    code, _, err = call(["query", str(shop_file), query], capsys)
    assert code == 1
    assert err.startswith(f"pybroker: error: pybroker query {refusal}")
    assert "Instance.sql()" not in err and "Database.execute()" not in err
    if "statement is refused" in refusal:
        assert err.endswith(f"; change the instance with pybroker sql {shop_file} -d DATABASE "
                            "'T-SQL', or the other pybroker commands\n")
    # the API keeps its own words
    with (pybroker.connect(shop_file, read_only=True, worker=False) as inst,
          pytest.raises(pybroker.errors.ReadOnlyQueryError) as caught):
        inst.sql(query)
    assert str(caught.value).startswith(f"Instance.sql() {refusal}")


@pytest.mark.parametrize(("misspelt", "meant"), [
    ("sys.rotues", "sys.routes"), ("SYS.Rotues", "sys.routes"), ('sys."servics"', "sys.services"),
    ("sys.dm_broker_conections", "sys.dm_broker_connections"),
])
def test_a_misspelt_sys_view_suggests_the_sys_view(shop_file, capsys, misspelt, meant):
    code, _, err = call(["query", str(shop_file), f"SELECT * FROM {misspelt}"], capsys)
    assert code == 1
    assert err.endswith(f'does not exist! Did you mean "{meant}"?\n'), err
    with (pybroker.connect(shop_file, read_only=True, worker=False) as inst,
          pytest.raises(pybroker.InvalidArgumentError, match=f'Did you mean "{meant}"')):
        inst.sql(f"SELECT * FROM {misspelt}")


def test_a_sys_view_with_no_name_near_says_where_the_names_are(shop_file, capsys):
    code, _, err = call(["query", str(shop_file), "SELECT * FROM sys.xyzzy"], capsys)
    assert code == 1
    assert err.endswith("View with name sys.xyzzy does not exist! SELECT view_name FROM "
                        "duckdb_views() WHERE schema_name = 'sys' lists the views there\n")
    assert "pg_catalog" not in err  # DuckDB's own guess


def test_explain_prints_each_column_apart(shop_file, capsys):
    code, out, _ = call(["route", str(shop_file), "Elsewhere", "--origin", "Shop",
                         "--explain"], capsys)
    assert code == 0
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.strip().startswith("step "))
    table = lines[header:]
    head = table[0]
    starts = [head.index(name) for name in ("step", "result", "candidates",
                                            "what the step looks for")]
    assert starts[0] == 2
    rows = {}
    for line in table[1:]:
        for start in starts[1:]:
            assert line[start - 2:start] == "  " and line[start] != " ", line
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        rows[cells[0]] = cells[1:]
    assert rows["R3.2"] == ["no candidate fits: the service is not in this instance",
                            "AutoCreatedLocal",
                            "a LOCAL route, if the service exists in this instance (R4)"]
    assert rows["R2.5"][:2] == ["matched", "AutoCreatedLocal"]
    assert len(rows) == 13


def test_a_certificate_file_that_is_not_ascii_is_named_in_our_words(shop_file, tmp_path,
                                                                    capsys):
    pem = tmp_path / "peer.pem"
    pem.write_bytes(b"-----BEGIN CERTIFICATE-----\nMII\x94\n-----END CERTIFICATE-----\n")
    code, _, err = call(["trust", str(shop_file), "Peer", str(pem)], capsys)
    assert code == 1
    assert err == (f"pybroker: error: certificate file {pem} is not a PEM certificate: byte "
                   "0x94 at offset 31 is not ASCII (a PEM certificate is ASCII text, as "
                   "`pybroker cert` prints it)\n")
    code, _, err = call(["trust", str(shop_file), "Peer", str(tmp_path / "none.pem")], capsys)
    assert err == (f"pybroker: error: cannot read certificate file {tmp_path / 'none.pem'}: "
                   "No such file or directory\n")


@pytest.mark.parametrize("text", [
    b"hello\n",  # cryptography: "Unable to load PEM file. See https://cryptography.io/...faq"
    b"-----BEGIN CERTIFICATE-----\nabcd\n-----END CERTIFICATE-----\n",  # "ParseError {...}"
])
def test_a_pem_that_is_no_certificate_is_named_in_our_words(shop_file, tmp_path, capsys,
                                                            text):
    pem = tmp_path / "peer.pem"
    pem.write_bytes(text)
    code, _, err = call(["trust", str(shop_file), "Peer", str(pem)], capsys)
    assert code == 1
    assert err == ("pybroker: error: not a PEM certificate: expected the whole text from "
                   "-----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----, as `pybroker "
                   "cert` (or inst.certificate) gives it\n")


@pytest.mark.parametrize(("argv", "words"), [
    (["serve", "{file}", "--port", "abc"], "argument --port: 'abc' is not a whole number"),
    (["serve", "{file}", "--retry-scale", "x"], "argument --retry-scale: 'x' is not a number"),
    (["forwarding", "{file}", "on", "--size-mb", "1.5"],
     "argument --size-mb: '1.5' is not a whole number"),
])
def test_a_value_of_the_wrong_kind_names_no_python_type(shop_file, capsys, argv, words):
    code, _, err = call([a.format(file=shop_file) for a in argv], capsys)
    assert code == 2
    assert err.startswith(f"pybroker: usage error: {words} (see: pybroker ")
    assert " int " not in err and " float " not in err


@pytest.mark.parametrize(("option", "value", "words"), [
    ("--client-port", "99999", "--client-port must be a whole number from 0 to 65,535, not "
     "99999"),
    ("--client-timeout", "-1", "--client-timeout must be a number from 0.001 to 86400, "
     "not -1.0"),
    ("--max-clients", "0", "--max-clients must be a positive whole number up to "
     "2,147,483,647, not 0"),
    ("--summary-interval", "0", "--summary-interval must be a number from 0.001 to 86400, "
     "not 0.0"),
])
def test_serve_names_its_client_options_as_options(shop_file, option, value, words):
    done = run("serve", shop_file, "--port", "0", option, value)
    assert done.returncode == 1
    assert done.stdout == ""  # refused before anything started
    assert done.stderr == f"pybroker: error: {words}\n"
    assert "None" not in done.stderr


def test_a_tsql_select_of_the_catalog_reads_its_database_s_rows(shop_file, capsys):
    # a SELECT of a sys view in a batch runs (translated for DuckDB), with the rows of the
    # batch's database only, as SQL Server's views of a database hold
    code, out, _ = call(["sql", str(shop_file), "-d", "Shop",
                         "SELECT name, queue_name FROM sys.services"], capsys)
    assert code == 0
    assert "ShopService" in out and "ShopQueue" in out
    with pybroker.connect(shop_file, read_only=True, worker=False) as inst:
        [shop] = inst.database("Shop").execute("SELECT name FROM sys.services")
        assert shop.rows == [("ShopService",)]
        [master] = inst.database("master").execute("SELECT name FROM sys.services")
        assert master.rows == []


def test_a_database_a_slip_away_is_suggested_and_the_file_is_unchanged(tmp_path):
    # `pybroker sql -d Shopp`: the nearest database is named, and the open that found no
    # such database wrote nothing (an open with nothing to migrate writes nothing)
    import hashlib

    path = tmp_path / "f.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        inst.create_database("Shop")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    done = subprocess.run([sys.executable, "-m", "pybroker", "sql", str(path), "-d", "Shopp",
                           "CREATE QUEUE Q"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip() == ("pybroker: error: database 'Shopp' does not exist in this "
                                   "instance; did you mean 'Shop'?")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
