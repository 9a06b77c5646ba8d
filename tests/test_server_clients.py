"""A served instance file and its clients, in real processes: ``pybroker serve FILE`` and
client processes (tests/server_child.py) on its Unix socket in tmp_path, and TCP on
127.0.0.1 with the server's token.

Every process is started by pid and stopped by pid in a ``finally``; every wait is
bounded in count and time."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import pybroker
from pybroker.api.served import protocol
from pybroker.api.served.paths import socket_path_for, token_path_for
from pybroker.errors import ServerError, ServerGoneError

ROOT = Path(__file__).resolve().parents[1]
CHILD = ROOT / "tests" / "server_child.py"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def make_instance(path: Path) -> None:
    with pybroker.connect(path) as inst:
        db = inst.create_database("A")
        db.create_queue("SenderQueue")
        db.create_queue("ReceiverQueue")
        db.create_service("Sender", "SenderQueue")
        db.create_service("Receiver", "ReceiverQueue", ["DEFAULT"])


class Server:
    """``pybroker serve FILE ...`` in its own process; its stdout lines are collected."""

    def __init__(self, path: Path, *args: str) -> None:
        self.path = path
        self.args = args
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.stderr = path.with_name(path.name + ".stderr")
        self.proc: subprocess.Popen | None = None

    def start(self) -> Server:
        with self.stderr.open("a") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pybroker", "serve", str(self.path), "--port", "0",
                 *self.args], cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=err,
                text=True)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()
        self.wait_for_line("clients on " + str(socket_path_for(self.path)))
        return self

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            self.lines.put(line.rstrip("\n"))

    def wait_for_line(self, start: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        for line in self.seen:
            if line.startswith(start):
                return line
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, self.stderr.read_text()
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if line.startswith(start):
                return line
        raise AssertionError(f"no line {start!r} from the server: {self.seen}")

    def kill(self) -> None:
        if self.proc is not None:
            _kill(self.proc)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        finally:
            _kill(self.proc)


@pytest.fixture
def served(tmp_path):
    path = tmp_path / "broker.duckdb"
    make_instance(path)
    servers: list[Server] = []

    def start(*args: str) -> Server:
        server = Server(path, *args).start()
        servers.append(server)
        return server

    yield path, start
    for server in servers:
        server.kill()


def child(*args: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(CHILD), *map(str, args)], cwd=ROOT,
                            env=_env(), stdout=subprocess.PIPE, text=True)


def drain(db: pybroker.Database, count: int, timeout: float = 30.0) -> list[pybroker.Message]:
    got: list[pybroker.Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += db.receive("ReceiverQueue", max_messages=100, timeout=0.5)
    return got


# -- many clients -------------------------------------------------------------------------


def test_clients_in_processes_send_and_receive_every_message_once_in_order(served):
    path, start = served
    start("--quiet")
    done = path.with_name("done")
    procs = []
    try:
        senders = [child("send", path, f"s{n}", 5, 20) for n in range(2)]
        procs += senders
        outs = [path.with_name(f"received{n}.jsonl") for n in range(3)]
        receivers = [child("receive", path, out, done) for out in outs]
        procs += receivers
        for proc in senders:
            assert proc.wait(timeout=180) == 0
        done.touch()
        for proc in receivers:
            assert proc.wait(timeout=180) == 0
    finally:
        for proc in procs:
            _kill(proc)
    records = [json.loads(line) for out in outs for line in out.read_text().splitlines()]
    bodies = Counter(b for r in records for b in r["body"])
    expected = {f"s{n}:{k}:{i}" for n in range(2) for k in range(5) for i in range(20)}
    assert set(bodies) == expected and set(bodies.values()) == {1}  # each exactly once
    assert len({r["pid"] for r in records}) >= 2  # the receivers shared the work
    # in order per conversation: sequence numbers 0, 1, 2, ... in the order received
    per_conversation: dict[str, list[int]] = defaultdict(list)
    for record in sorted(records, key=lambda r: r["held"]):
        assert len(record["groups"]) == 1  # one RECEIVE, one group
        for handle, seq in zip(record["handle"], record["seq"], strict=True):
            per_conversation[handle].append(seq)
    assert len(per_conversation) == 10
    assert all(seqs == list(range(20)) for seqs in per_conversation.values())
    # no group held by two transactions at once
    by_group: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for record in records:
        by_group[record["group"]].append((record["held"], record["released"]))
    for holds in by_group.values():
        holds.sort()
        for (_, end), (begin, _) in itertools.pairwise(holds):
            assert end <= begin


# -- a client dies inside a transaction --------------------------------------------------


def test_a_client_killed_inside_a_transaction_puts_what_it_received_back(served):
    path, start = served
    start("--quiet")
    with pybroker.connect(path) as inst:
        db = inst.database("A")
        conv = db.begin_dialog("Sender", "Receiver")
        with db.transaction():
            for i in range(10):
                conv.send(f"m{i}")
        holder = child("hold", path)
        try:
            line = _read_line(holder, timeout=60)
            assert line == "held " + json.dumps(list(range(10)))
            # C7: the client holds the group; another transaction skips it, not waits
            locks = "SELECT queue_name FROM sys.dm_broker_conversation_group_locks"
            assert inst.sql(locks).fetchall() == [("ReceiverQueue",)]
            assert db.receive("ReceiverQueue", max_messages=100) == []
            # its SEND holds no instance-wide lock: a bystander's BEGIN DIALOG + SEND
            # commits meanwhile, and the uncommitted reply is nowhere to be read
            with db.transaction():
                db.begin_dialog("Sender", "Receiver").send("bystander")
            assert db.receive("SenderQueue", max_messages=100) == []
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(timeout=30)
        finally:
            _kill(holder)
        back = drain(db, 11)
        assert inst.sql(locks).fetchall() == []  # the killed client's group is free
        mine = [m for m in back if m.text != "bystander"]
        assert [m.text for m in mine] == [f"m{i}" for i in range(10)]
        assert [m.message_sequence_number for m in mine] == list(range(10))
        assert len(back) == 11  # and the bystander's message
        assert db.receive("SenderQueue", max_messages=100) == []  # the reply never was
        conv.send("after")  # the lock is free
        assert [m.text for m in drain(db, 1)] == ["after"]


def test_c7_two_clients_hold_their_groups_in_open_transactions_at_once(served):
    """Two client connections (a thread each: each thread has its own), each receiving one
    conversation's messages in a transaction that stays open until the other holds its
    group too; the server runs them side by side, each group with its own holder."""
    path, start = served
    start("--quiet")
    with pybroker.connect(path) as inst:
        db = inst.database("A")
        convs = [db.begin_dialog("Sender", "Receiver") for _ in range(2)]
        for k in range(3):  # the two groups' messages interleave in the queue
            for i, conv in enumerate(convs):
                conv.send(f"{i}:{k}")
        holding = threading.Barrier(3, timeout=30)  # the two clients and this thread
        done = threading.Barrier(3, timeout=30)
        received: dict[int, list[str]] = {}
        errors: list[BaseException] = []

        def worker(i: int) -> None:
            try:
                with db.transaction():
                    received[i] = [m.text for m in db.receive("ReceiverQueue",
                                                              max_messages=10)]
                    holding.wait()
                    done.wait()  # until this thread has read the locks
            except BaseException as exc:
                errors.append(exc)
                holding.abort()
                done.abort()

        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(2)]
        for thread in threads:
            thread.start()
        holding.wait()
        locks = inst.sql("SELECT conversation_group_id, holder FROM "
                         "sys.dm_broker_conversation_group_locks ORDER BY holder").fetchall()
        done.wait()
        for thread in threads:
            thread.join(30)
        assert errors == []
        assert len(locks) == 2 and len({h for _, h in locks}) == 2
        assert sorted(received.values()) == [[f"{i}:{k}" for k in range(3)] for i in range(2)]
        assert db.receive("ReceiverQueue", max_messages=100) == []
        assert inst.sql("SELECT count(*) FROM sys.dm_broker_conversation_group_locks"
                        ).fetchone() == (0,)


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    found: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: found.put(proc.stdout.readline()),  # type: ignore[union-attr]
                     daemon=True).start()
    return found.get(timeout=timeout).rstrip("\n")


# -- the server dies -----------------------------------------------------------------------


def test_a_killed_server_is_gone_for_its_clients_and_a_restart_serves_again(served):
    path, start = served
    server = start("--quiet")
    client = pybroker.connect(path)
    try:
        assert "through the server's socket" in repr(client)
        db = client.database("A")
        conv = db.begin_dialog("Sender", "Receiver")
        with db.transaction():
            conv.send("kept")
        server.kill()
        with pytest.raises(ServerGoneError, match=f"the server for {path} is gone"):
            db.queues()
        with pytest.raises(ServerGoneError, match="is gone"):
            conv.send("lost")
    finally:
        client.close()
    assert socket_path_for(path).exists()  # left behind by the SIGKILL
    with pybroker.connect(path) as embedded:  # nobody answers on it: the file is free
        assert "through" not in repr(embedded)
    start("--quiet")  # the stale socket is replaced
    with pybroker.connect(path) as again:
        assert "through" in repr(again)
        assert [m.text for m in drain(again.database("A"), 1)] == ["kept"]


def test_a_stopped_server_removes_its_socket_and_the_file_opens_embedded(served):
    path, start = served
    server = start("--quiet")
    assert stat.S_IMODE(socket_path_for(path).stat().st_mode) == 0o600
    assert server.stop() == 0
    assert not socket_path_for(path).exists()
    with pybroker.connect(path) as inst:
        assert "through" not in repr(inst)
        assert [d.name for d in inst.databases()] == ["master", "msdb", "A"]


# -- time-outs and hostile bytes ---------------------------------------------------------


def _raw(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(15)
    sock.connect(str(socket_path_for(path)))
    return sock


def _answer(sock: socket.socket, timeout: float = 15.0) -> list[object]:
    """Every event the server sends until it closes the connection."""
    reader = protocol.FrameReader()
    events = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not data:
            return events
        reader.feed(data)
        while (event := reader.next_event()) is not None:
            events.append(event)
    raise AssertionError(f"the server did not close the connection: {events}")


def test_garbage_oversized_and_unfinished_requests_end_only_their_connection(served):
    path, start = served
    server = start("--quiet", "--client-timeout", "2", "--max-clients", "6")
    with pybroker.connect(path) as good:
        db = good.database("A")
        sock = _raw(path)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        [refusal] = _answer(sock)
        assert isinstance(refusal, protocol.Refused) and "wrong magic" in refusal.message
        sock.close()
        sock = _raw(path)
        sock.sendall(protocol.HEADER.pack(protocol.MAGIC, protocol.VERSION, protocol.HELLO,
                                          2**31))
        [refusal] = _answer(sock)
        assert "larger than the largest accepted" in refusal.message  # type: ignore[attr-defined]
        sock.close()
        # a HELLO, then half a call: the connection ends after the time-out
        sock = _raw(path)
        sock.sendall(protocol.hello(None, False, "half"))
        call = protocol.call(1, ("instance",), "call", "databases")
        sock.sendall(call[:len(call) // 2])
        began = time.monotonic()
        assert db.queues()[0].name == "ReceiverQueue"  # others are served meanwhile
        events = _answer(sock)
        assert [type(e) for e in events] == [protocol.Welcome]
        assert time.monotonic() - began < 15
        sock.close()
        # a flood: the slots fill (the good client holds one), the rest are refused
        flood = [_raw(path) for _ in range(20)]
        try:
            refused = 0
            for sock in flood[5:]:
                events = _answer(sock)
                refused += any(isinstance(e, protocol.Refused) and "too many clients"
                               in e.message for e in events)
            assert refused == 15
            assert [q.name for q in db.queues()] == ["ReceiverQueue", "SenderQueue"]
        finally:
            for sock in flood:
                sock.close()
    # the idle ones were dropped at the handshake time-out: a new client gets in
    deadline = time.monotonic() + 30
    while True:
        try:
            with pybroker.connect(path) as late:
                assert late.database("A").name == "A"
            break
        except ServerError:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    assert server.proc is not None and server.proc.poll() is None


def test_a_transaction_open_past_the_time_out_is_rolled_back(served):
    path, start = served
    start("--quiet", "--client-timeout", "2")
    with pybroker.connect(path) as first, pybroker.connect(path) as second:
        db = first.database("A")
        db.begin_dialog("Sender", "Receiver").send("once")
        with (pytest.raises(ServerError, match="longer than the server's time-out of 2 s"),
              db.transaction()):
            assert [m.text for m in db.receive("ReceiverQueue", timeout=5)] == ["once"]
            # the other client's RECEIVE waits for this transaction, which ends
            # when the server's time-out rolls it back
            assert [m.text for m in drain(second.database("A"), 1, 30)] == ["once"]
            db.queues()
        assert db.queues()[0].name == "ReceiverQueue"  # the session goes on


# -- TCP and its token -------------------------------------------------------------------


def test_tcp_needs_the_token_and_a_refusal_is_a_broker_event(served):
    path, start = served
    server = start("--quiet", "--client-port", "0")
    address = server.wait_for_line("clients on pybroker://").split()[-1]
    token_line = server.wait_for_line("client token: ")
    token = token_line.split()[2]
    token_file = token_path_for(path)
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token_file.read_text().strip() == token
    for wrong in (None, "not-the-token", token[:-1]):
        with pytest.raises(ServerError, match="the server refused: no token or a wrong token"
                           ) as refused:
            pybroker.connect(address, token=wrong)
        assert f"keeps its token in {token_file}" in str(refused.value)  # where to look
    with pybroker.connect(address, token=token) as inst:
        assert f"through {address}" in repr(inst)
        rows = inst.sql("SELECT event_class, subclass FROM sys.broker_events "
                        "WHERE subclass = 'Client Login Failure'")
        assert rows.columns == ["event_class", "subclass"]
        assert rows.fetchall() == [("Audit Broker Login", "Client Login Failure")] * 3
    server.stop()
    # the next serve keeps the token (clients keep working) and does not print it again
    again = start("--quiet", "--client-port", "0")
    again.wait_for_line(f"client token in {token_file}")
    address = again.wait_for_line("clients on pybroker://").split()[-1]
    with pybroker.connect(address, token=token) as inst:
        assert inst.database("A").name == "A"


def test_a_read_only_client_is_refused_writes_as_embedded(served):
    path, start = served
    start("--quiet")
    with pybroker.connect(path, read_only=True) as inst:
        db = inst.database("A")
        assert [q.name for q in db.queues()] == ["ReceiverQueue", "SenderQueue"]
        with pytest.raises(pybroker.StorageError, match="is open read-only"):
            db.create_queue("Q")
        with pytest.raises(pybroker.StorageError, match="is open read-only"), db.transaction():
            pass


def test_the_commands_reach_a_served_file_through_its_server(served):
    path, start = served
    start("--quiet")

    def run(*args: object) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pybroker", *map(str, args)], cwd=ROOT,
                              env=_env(), capture_output=True, text=True, timeout=120)

    made = run("create-queue", path, "-d", "A", "Extra")
    assert made.returncode == 0, made.stderr
    listed = run("databases", path, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [d["name"] for d in json.loads(listed.stdout)] == ["master", "msdb", "A"]
    with pybroker.connect(path) as inst:
        assert "Extra" in [q.name for q in inst.database("A").queues()]


def test_an_application_serves_its_file_with_serve_true(tmp_path):
    # a directory deep enough that FILE.sock does not fit in sun_path (108 bytes)
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "app.duckdb"
    make_instance(path)
    owner = pybroker.connect(path, serve=True)
    try:
        assert stat.S_IMODE(socket_path_for(path).stat().st_mode) == 0o600
        client = pybroker.connect(path)
        assert "through the server's socket" in repr(client)
        conv = client.database("A").begin_dialog("Sender", "Receiver")
        assert conv.send("from a client") == 0
        got = owner.database("A").receive("ReceiverQueue", timeout=5)
        assert [m.text for m in got] == ["from a client"]
    finally:
        owner.close()
    assert not socket_path_for(path).exists()
    with pytest.raises(ServerGoneError, match="is gone"):
        client.databases()
    client.close()


def test_analysts_read_a_live_served_instance_with_every_read_only_command(served, tmp_path):
    """While `pybroker serve` holds the file, a client process sends, and a message waits in
    the transmission queue, `query`, `snapshot` (opened in the real DuckDB CLI), `routes`,
    `route`, `cert` and `export` all work, through the server."""
    from test_duckdb_cli import duckdb_binary

    path, start = served
    start("--quiet")
    with pybroker.connect(path) as inst:
        assert "through" in repr(inst)
        db = inst.database("A")
        db.create_route("FarRoute", service_name="FarService", address="tcp://192.0.2.1:4022")
        db.begin_dialog("Sender", "FarService").send("waiting")
    sender = child("send", path, "flow", 5, 200)  # messages flow while the analyst reads

    def run(*args: object) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "pybroker", *map(str, args)], cwd=ROOT,
                              env=_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done

    rows = json.loads(run("query", path, "SELECT to_service_name, decode(message_body) AS "
                          "body FROM sys.transmission_queue", "--json").stdout)
    assert rows == [{"to_service_name": "FarService", "body": "waiting"}]
    refused = subprocess.run([sys.executable, "-m", "pybroker", "query", str(path),
                              "DELETE FROM transmission_queue"], cwd=ROOT, env=_env(),
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "read-only" in refused.stderr, refused.stderr

    copy = tmp_path / "copy.duckdb"
    run("snapshot", path, copy)
    cli = subprocess.run([duckdb_binary(), "-readonly", "-csv", str(copy), "-c",
                          "SELECT to_service_name FROM sys.transmission_queue"],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.split() == ["to_service_name", "FarService"]

    routes = json.loads(run("routes", path, "-d", "A", "--json").stdout)
    assert sorted(r["name"] for r in routes) == ["AutoCreatedLocal", "FarRoute"]
    decision = json.loads(run("route", path, "FarService", "--origin", "A", "--json").stdout)
    assert (decision["outcome"], decision["route"]) == ("send", "FarRoute")
    assert run("cert", path).stdout.startswith("-----BEGIN CERTIFICATE-----")
    exported = tmp_path / "export"
    run("export", path, exported)
    assert (exported / "routes.parquet").is_file()
    try:
        out, _ = sender.communicate(timeout=120)
    finally:
        _kill(sender)
    assert sender.returncode == 0 and out.strip() == "sent 1000"
    copied = subprocess.run([duckdb_binary(), "-readonly", "-csv", str(copy), "-c",
                             "SELECT count(*) FROM sys.queue_messages"],
                            capture_output=True, text=True, timeout=120)
    assert copied.returncode == 0, copied.stderr
    rows = json.loads(run("query", path, "SELECT count(*) AS n FROM sys.queue_messages",
                          "--json").stdout)
    assert rows == [{"n": 1000}]  # everything sent is queued; the snapshot held a moment
    assert 0 <= int(copied.stdout.split()[-1]) <= 1000


def test_tsql_scripts_and_the_quick_commands_run_through_the_server(served):
    """A SQL Server-style script (execute() and `pybroker sql`) and `pybroker send/receive`
    on a served file: the same result sets as embedded, run in the serving process."""
    path, start = served
    start("--quiet")
    with pybroker.connect(path) as inst:
        db = inst.database("A")
        (handle,) = db.execute(
            "DECLARE @h UNIQUEIDENTIFIER; BEGIN DIALOG @h FROM SERVICE Sender TO SERVICE "
            "'Receiver'; SEND ON CONVERSATION @h (N'from a script'); SELECT @h AS h;")
        assert handle.columns == ("h",)
    sent = subprocess.run(
        [sys.executable, "-m", "pybroker", "send", str(path), "-d", "A", "--from", "Sender",
         "--to", "Receiver", "from the shell"], cwd=ROOT, env=_env(), capture_output=True,
        text=True, timeout=120)
    assert sent.returncode == 0, sent.stderr
    got = subprocess.run(
        [sys.executable, "-m", "pybroker", "sql", str(path), "-d", "A", "--json",
         "WAITFOR (RECEIVE conversation_handle, CAST(message_body AS NVARCHAR(MAX)) AS body "
         "FROM ReceiverQueue), TIMEOUT 5000;"], cwd=ROOT, env=_env(), capture_output=True,
        text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    (first,) = json.loads(got.stdout)
    assert first["columns"] == ["conversation_handle", "body"]
    assert [row[1] for row in first["rows"]] == ["from a script"]
    assert first["rows"][0][0] != handle.rows[0][0]  # the target's side of the dialog
    received = subprocess.run(
        [sys.executable, "-m", "pybroker", "receive", str(path), "-d", "A", "ReceiverQueue",
         "--wait", "5", "--json"], cwd=ROOT, env=_env(), capture_output=True, text=True,
        timeout=120)
    assert received.returncode == 0, received.stderr
    assert [row["message_body"] for row in json.loads(received.stdout)] == ["from the shell"]
