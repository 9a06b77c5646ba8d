"""One instance of ``pybroker bench wire``, in its own process: the sender, the receiver or
the forwarder (R7: it holds no service and passes what arrives for FORWARDED_SERVICE on to
the receiver, by a route in msdb).

``python -m pybroker.devtools.bench.wire_child ROLE FILE FOLDER`` opens (or creates) the instance
file FILE, writes its endpoint certificate to FOLDER/ROLE.pem, starts its endpoint on a free
loopback port, and answers one JSON command per line on stdin with one JSON line on stdout
(anything else the process prints goes to stderr). The parent (``pybroker.devtools.bench.wire``)
drives two of them. The workload functions here are also what the parent runs inside one
instance for the local comparison, so both measure the same code.

Times that cross processes are ``time.time()`` (one machine, one clock).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import ssl
import struct
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pybroker.api.database import Database
from pybroker.api.instance import Instance
from pybroker.core.wire import frames

INITIATOR_DB, TARGET_DB = "BenchInitiator", "BenchTarget"
INITIATOR_SERVICE, TARGET_SERVICE = "InitiatorService", "TargetService"
INITIATOR_QUEUE, TARGET_QUEUE = "InitiatorQueue", "TargetQueue"
# the receiver's second service, on the same queue: the sender routes it to the forwarder
FORWARDED_SERVICE = "ForwardedTargetService"
STAMP = struct.Struct("!d")  # the SEND time, in the first 8 bytes of a body (case c)
RECEIVES_PER_TRANSACTION = 50


# -- objects ------------------------------------------------------------------------------


def build(inst: Instance, role: str) -> Database:
    """The sender holds BenchInitiator (InitiatorService), the receiver BenchTarget
    (TargetService and FORWARDED_SERVICE on the DEFAULT contract); the local comparison
    holds both; the forwarder holds none (its msdb is returned)."""
    if role == "forwarder":
        return inst.database("msdb")
    names = {"sender": [INITIATOR_DB], "receiver": [TARGET_DB],
             "local": [INITIATOR_DB, TARGET_DB]}[role]
    existing = {d.name for d in inst.databases()}
    for name in names:
        if name in existing:
            continue
        db = inst.create_database(name)
        if name == INITIATOR_DB:
            db.create_queue(INITIATOR_QUEUE)
            db.create_service(INITIATOR_SERVICE, queue=INITIATOR_QUEUE)
        else:
            db.create_queue(TARGET_QUEUE)
            db.create_service(TARGET_SERVICE, queue=TARGET_QUEUE, contracts=["DEFAULT"])
            db.create_service(FORWARDED_SERVICE, queue=TARGET_QUEUE, contracts=["DEFAULT"])
    return inst.database(names[0] if role != "local" else INITIATOR_DB)


# -- the workload (also run by the parent inside one instance) ------------------------------


def begin(db: Database, conversations: int, to_service: str = TARGET_SERVICE) -> list[Any]:
    with db.transaction():
        return [db.begin_dialog(INITIATOR_SERVICE, to_service)
                for _ in range(conversations)]


def send_stream(db: Database, convs: list[Any], total: int, per_tx: int,
                body: bytes) -> dict[str, float]:
    """``total`` sends round robin over ``convs``, ``per_tx`` to a transaction."""
    start = time.time()
    sent = 0
    while sent < total:
        upto = min(total, sent + per_tx)
        with db.transaction():
            for i in range(sent, upto):
                convs[i % len(convs)].send(body)
        sent = upto
    return {"start": start, "sent": time.time(), "transactions": -(-total // per_tx)}


def send_paced(db: Database, conv: Any, total: int, rate: float,
               body_bytes: int) -> dict[str, Any]:
    """``rate`` sends a second, each stamped with time.time() at its SEND; a send commits
    alone, unless the sender fell behind: then the messages due meanwhile commit together.
    ``committed``: when each message's SEND committed (by sequence number, from 0)."""
    pad = os.urandom(body_bytes - STAMP.size)
    start = time.time()
    sent = transactions = 0
    committed: list[float] = []
    while sent < total:
        due = min(total, int((time.time() - start) * rate) + 1)
        if due <= sent:
            time.sleep(max(0.0, start + sent / rate - time.time()))
            continue
        with db.transaction():
            for _ in range(sent, due):
                conv.send(STAMP.pack(time.time()) + pad)
        committed += [time.time()] * (due - sent)
        transactions += 1
        sent = due
    end = time.time()
    return {"start": start, "sent": end, "transactions": transactions,
            "sent_per_s": total / (end - start), "committed": committed}


def drain(db: Database, queue_name: str, total: int, *, stamped: bool = False,
          timeout: float = 600.0) -> dict[str, Any]:
    """RECEIVE until ``total`` messages are taken and committed: a WAITFOR receive, then
    up to RECEIVES_PER_TRANSACTION batched receives in one transaction. Checks that every
    conversation's messages come once each, in order (P3.1)."""
    received = transactions = 0
    last_seen: dict[str, int] = {}
    latencies: list[float] = []
    # stamped: per message, in the order taken, (sequence, stamp, RECEIVE returned,
    # RECEIVE committed), for where the time goes (case c)
    timeline: list[list[float]] = []
    deadline = time.monotonic() + timeout

    def take(got: list[Any], stamps: list[float]) -> None:
        nonlocal received
        returned = time.time()
        for m in got:
            if m.message_sequence_number != last_seen.get(m.conversation_handle, -1) + 1:
                raise RuntimeError(f"message {m.message_sequence_number} of conversation "
                                   f"{m.conversation_handle} came out of order or twice")
            last_seen[m.conversation_handle] = m.message_sequence_number
            if stamped:
                stamps.append(STAMP.unpack_from(m.message_body)[0])
                timeline.append([m.message_sequence_number, stamps[-1], returned])
        received += len(got)

    def committed_now(stamps: list[float]) -> None:
        committed = time.time()
        latencies.extend(committed - s for s in stamps)
        for row in timeline[len(timeline) - len(stamps):]:
            row.append(committed)

    while received < total:
        if time.monotonic() > deadline:
            raise RuntimeError(f"received {received} of {total} messages in {timeout:.0f} s")
        stamps: list[float] = []
        got = db.receive(queue_name, max_messages=1000, timeout=0.5)  # its own transaction
        take(got, stamps)
        transactions += 1
        committed_now(stamps)
        if got and received < total:
            stamps = []
            with db.transaction():
                for _ in range(RECEIVES_PER_TRANSACTION):
                    more = db.receive(queue_name, max_messages=1000)
                    if not more:
                        break
                    take(more, stamps)
            transactions += 1
            committed_now(stamps)
    return {"received": received, "done": time.time(), "transactions": transactions,
            "conversations": len(last_seen), "latencies": latencies, "timeline": timeline}


@contextlib.contextmanager
def frames_sent(times: dict[int, float]) -> Iterator[None]:
    """While it lasts, when this process's transport first handed each message's MESSAGE
    frame to its connection (by sequence number; case c has one conversation): the bench
    wraps the method for the run, the broker's code is not told."""
    from pybroker.core.wire.adjacent import AdjacentConnection

    original = AdjacentConnection.send_fragment

    def send_fragment(self: Any, fragment: Any, now: float, mac_key: Any = None) -> None:
        original(self, fragment, now, mac_key)
        times.setdefault(fragment.sequence, time.time())

    AdjacentConnection.send_fragment = send_fragment  # type: ignore[method-assign]
    try:
        yield
    finally:
        AdjacentConnection.send_fragment = original  # type: ignore[method-assign]


@contextlib.contextmanager
def arrivals_committed(inst: Instance, times: dict[int, float]) -> Iterator[None]:
    """While it lasts, when each message's arrival committed here (by sequence number):
    the engine's writer applies a batch of arrivals, commits, then acknowledges."""
    remote = inst.kernel.messaging.remote
    original = remote.arrive

    def arrive(arrivals: list[Any]) -> None:
        original(arrivals)
        now = time.time()
        for arrival in arrivals:
            times.setdefault(arrival.fragment.sequence, now)

    remote.arrive = arrive  # type: ignore[method-assign]
    try:
        yield
    finally:
        del remote.arrive  # the class's method again


def wait_transmitted(inst: Instance, timeout: float = 600.0) -> float:
    """When the sender's transmission queue is empty: every row acknowledged, so the
    receiver committed it (P5.2). While the transport still holds messages in flight
    (read without a lock: only a hint) the file is not asked, so that polling does not
    take the GIL and the store from the threads being measured."""
    deadline = time.monotonic() + timeout
    while True:
        if not _in_flight(inst):
            left = inst.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0]
            if not left:
                return time.time()
        else:
            left = "some"
        if time.monotonic() > deadline:
            raise RuntimeError(f"{left} rows still in the transmission queue after "
                               f"{timeout:.0f} s")
        time.sleep(0.002)


def _in_flight(inst: Instance) -> bool:
    wire = inst.kernel.messaging.remote.wire
    transmitter = getattr(wire, "transmitter", None)
    if transmitter is None:
        return False
    try:
        return bool(transmitter.dialogs())
    except RuntimeError:  # changed while read: still busy
        return True


# -- raw framed bytes over TLS 1.3 (the comparison) -----------------------------------------


def tls_context(private_key: str, certificate: str, peer_certificate: str, *,
                server: bool) -> ssl.SSLContext:
    """Mutual TLS 1.3 pinned to the peer's certificate, as pybroker/core/wire/transport.py."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "endpoint.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(private_key)
            out.write(certificate)
        ctx.load_cert_chain(path)
    ctx.load_verify_locations(cadata=peer_certificate)
    return ctx


def sample_fragment(body: bytes, key_id: bytes) -> frames.MessageFragment:
    """A MESSAGE frame as the wire sends it (header fields of realistic size)."""
    return frames.MessageFragment(
        conversation_id="6f1c2a7e-0d4b-4c55-9a8e-5b1e2d3c4f50", from_initiator=True,
        sequence=0, fragment_number=0, fragment_count=1, message_size=len(body),
        from_service=INITIATOR_SERVICE, to_service=TARGET_SERVICE,
        from_broker_instance="0b6d9c2e-1f3a-4e5b-8c7d-9e0f1a2b3c4d",
        to_broker_instance=None, contract="DEFAULT",
        message_type="DEFAULT", validation="N", is_end_of_dialog=False, is_error=False,
        priority=5, lifetime_ms=2**41, hops_remaining=32, key_id=key_id, body=body)


class RawServer:
    """The receiving end: a TLS listener that decodes frames and counts MESSAGE frames."""

    def __init__(self, ctx: ssl.SSLContext) -> None:
        self.ctx = ctx
        self.loop = asyncio.new_event_loop()
        self.results: queue.Queue[dict[str, Any]] = queue.Queue()
        self.expected = 0
        self.stamped = False
        self.port = 0
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self.loop).result(timeout=30)

    async def _listen(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ctx)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        decoder = frames.FrameDecoder()
        count, nbytes, latencies = 0, 0, []
        expected, stamped = self.expected, self.stamped
        try:
            while count < expected:
                data = await reader.read(256 * 1024)
                if not data:
                    break
                nbytes += len(data)
                for frame in decoder.feed(data):
                    if isinstance(frame, frames.MessageFragment):
                        count += 1
                        if stamped:
                            latencies.append(time.time() - STAMP.unpack_from(frame.body)[0])
            self.results.put({"received": count, "done": time.time(), "bytes": nbytes,
                              "latencies": latencies})
        finally:
            writer.close()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


async def raw_send(port: int, ctx: ssl.SSLContext, total: int, body_bytes: int,
                   per_write: int, rate: float | None, key_id: bytes) -> dict[str, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                                   server_hostname=None)
    start = time.time()
    if rate is None:
        one = frames.encode(sample_fragment(os.urandom(body_bytes), key_id))
        sent = 0
        while sent < total:
            n = min(per_write, total - sent)
            writer.write(one * n)
            await writer.drain()
            sent += n
    else:
        pad = os.urandom(body_bytes - STAMP.size)
        for i in range(total):
            delay = start + i / rate - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            writer.write(frames.encode(sample_fragment(STAMP.pack(time.time()) + pad,
                                                       key_id)))
            await writer.drain()
    sent_at = time.time()
    await reader.read(1)  # the receiver closes once it has every frame
    writer.close()
    return {"start": start, "sent": sent_at}


# -- the child process ----------------------------------------------------------------------


class Child:
    def __init__(self, role: str, path: Path, folder: Path, retry_scale: float) -> None:
        from pybroker.kernel.broker_endpoint.runtime import endpoint_identity

        self.role = role
        self.folder = folder
        self.inst = Instance(path, retry_scale=retry_scale)
        self.db = build(self.inst, role)
        identity = endpoint_identity(self.inst.kernel)
        self.private_key, self.certificate = identity.private_key, identity.certificate
        (folder / f"{role}.pem").write_text(self.certificate, encoding="ascii")
        self.endpoint = self.inst.start_endpoint(0, "127.0.0.1")
        self.convs: list[Any] = []
        self.peer_certificate = ""
        self.raw: RawServer | None = None

    def handle(self, cmd: dict[str, Any]) -> dict[str, Any]:
        name = cmd["cmd"]
        if name == "hello":
            return {"address": self.endpoint.address, "port": self.endpoint.port,
                    "broker_instance": self.db.broker_instance, "pid": os.getpid()}
        if name == "peer":  # trust the other instance and route to its service
            self.peer_certificate = Path(cmd["pem_file"]).read_text(encoding="ascii")
            self.inst.trust(cmd["name"], self.peer_certificate)
            service = TARGET_SERVICE if self.role == "sender" else INITIATOR_SERVICE
            if not any(r.name == "ToPeer" for r in self.db.routes()):
                self.db.create_route("ToPeer", service_name=service, address=cmd["address"])
            return {"ok": True}
        if name == "via":  # the sender: FORWARDED_SERVICE goes to the forwarder (R7)
            self.inst.trust(cmd["name"], Path(cmd["pem_file"]).read_text(encoding="ascii"))
            if not any(r.name == "ViaForwarder" for r in self.db.routes()):
                self.db.create_route("ViaForwarder", service_name=FORWARDED_SERVICE,
                                     address=cmd["address"])
            return {"ok": True}
        if name == "trust":  # the receiver: admit the forwarder
            self.inst.trust(cmd["name"], Path(cmd["pem_file"]).read_text(encoding="ascii"))
            return {"ok": True}
        if name == "forward":  # the forwarder: msdb's routes on, both ways (R1.2, R7)
            for peer in ("sender", "receiver"):
                self.inst.trust(peer, Path(cmd[f"{peer}_pem"]).read_text(encoding="ascii"))
            routes = {r.name for r in self.db.routes()}
            for route, service, address in (
                    ("OnToReceiver", FORWARDED_SERVICE, cmd["receiver_address"]),
                    ("BackToSender", INITIATOR_SERVICE, cmd["sender_address"])):
                if route not in routes:
                    self.db.create_route(route, service_name=service, address=address)
            self.inst.forwarding = True
            return {"ok": True, "forwarding_size_mb": self.inst.forwarding_size_mb}
        if name == "begin":
            self.convs = begin(self.db, cmd["conversations"],
                               cmd.get("to_service", TARGET_SERVICE))
            return {"ok": True}
        if name == "send":
            body = os.urandom(cmd["body_bytes"])
            out = send_stream(self.db, self.convs, cmd["messages"], cmd["per_tx"], body)
            out["acked"] = wait_transmitted(self.inst)
            return out
        if name == "send_paced":
            sent_at: dict[int, float] = {}
            with frames_sent(sent_at):
                out = send_paced(self.db, self.convs[0], cmd["messages"], cmd["rate"],
                                 cmd["body_bytes"])
                out["acked"] = wait_transmitted(self.inst)
            out["frames_sent"] = sorted(sent_at.items())
            return out
        if name == "drain":
            arrived: dict[int, float] = {}
            with arrivals_committed(self.inst, arrived):
                out = drain(self.db, TARGET_QUEUE, cmd["messages"], stamped=cmd["stamped"])
            out["arrivals_committed"] = sorted(arrived.items())
            return out
        if name == "rows":  # what is left: the transmission queue and the target queue
            return {"transmission_queue": self.inst.sql(
                "SELECT count(*) FROM sys.transmission_queue").fetchone()[0]}
        if name == "raw_listen":
            if self.raw is None:
                self.raw = RawServer(tls_context(self.private_key, self.certificate,
                                                 self.peer_certificate, server=True))
            self.raw.expected, self.raw.stamped = cmd["messages"], cmd["stamped"]
            return {"port": self.raw.port}
        if name == "raw_wait":
            assert self.raw is not None
            return self.raw.results.get(timeout=600)
        if name == "raw_send":
            from pybroker.core.wire.certificates import certificate_info

            ctx = tls_context(self.private_key, self.certificate, self.peer_certificate,
                              server=False)
            return asyncio.run(raw_send(
                cmd["port"], ctx, cmd["messages"], cmd["body_bytes"], cmd["per_write"],
                cmd.get("rate"), certificate_info(self.certificate).key_id))
        if name == "cpu":  # every thread's, since the process started
            return {"process_cpu_seconds": time.process_time()}
        if name == "connections":
            return {"rows": [list(map(str, r)) for r in self.endpoint.connections()]}
        raise ValueError(f"unknown command {name!r}")

    def close(self) -> None:
        if self.raw is not None:
            self.raw.close()
        self.inst.close()


def main(argv: list[str], child_class: type[Child] = Child) -> int:
    role, path, folder = argv[0], Path(argv[1]), Path(argv[2])
    retry_scale = float(argv[3]) if len(argv) > 3 else 1.0
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints go to stderr, not into the replies
    profile_dir = os.environ.get("PYBROKER_BENCH_PROFILE")
    profiles = _profile_every_thread() if profile_dir else None
    child = child_class(role, path, folder, retry_scale)
    try:
        for line in sys.stdin:
            cmd = json.loads(line)
            if cmd["cmd"] == "quit":
                out.write(json.dumps({"ok": True}) + "\n")
                break
            try:
                cpu = time.process_time()  # every thread of this process
                threads = thread_cpu_seconds()
                reply = child.handle(cmd)
                reply["cpu_seconds"] = time.process_time() - cpu
                if threads:
                    reply["thread_cpu_seconds"] = {
                        part: spent - threads.get(part, 0.0)
                        for part, spent in thread_cpu_seconds().items()}
            except Exception as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}",
                         "traceback": traceback.format_exc()}
            out.write(json.dumps(reply) + "\n")
    finally:
        child.close()
        if profiles is not None and profile_dir:
            _dump_profiles(profiles, os.path.join(profile_dir, f"{role}.prof"))
    return 0


# Where an instance process's CPU goes, by the thread that spent it: the application's
# SEND or RECEIVE (the main thread here), the broker endpoint's connections (TLS, frames),
# the engine's side of the wire (arrival batches, acknowledgements); the rest (the worker,
# DuckDB's own threads) as "other".
THREAD_PARTS = {"MainThread": "api", "pybroker-endpoint": "connections",
                "pybroker-wire-engine": "engine"}


def thread_cpu_seconds() -> dict[str, float]:
    """CPU seconds this process's threads have spent, by THREAD_PARTS (every part, 0 when
    it has no thread); {} where /proc does not say (not Linux). Clock ticks: 10 ms on
    most kernels, so a case should run for seconds."""
    try:
        tids = os.listdir("/proc/self/task")
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return {}
    names = {t.native_id: t.name for t in threading.enumerate()}
    spent = dict.fromkeys((*THREAD_PARTS.values(), "other"), 0.0)
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        part = THREAD_PARTS.get(names.get(int(tid), ""), "other")
        spent[part] += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return spent


def _profile_every_thread() -> list[Any]:
    """cProfile on this thread and on every thread started from now on (the endpoint's
    event loop, its engine writer, the worker): where the process's CPU goes, not only
    the main thread's share."""
    import cProfile

    profiles: list[tuple[str, cProfile.Profile]] = []

    def start_in_thread(*_: Any) -> None:
        # called once, on a new thread's first event: a profiler of its own replaces it
        profile = cProfile.Profile()
        profiles.append((threading.current_thread().name, profile))
        profile.enable()

    threading.setprofile(start_in_thread)
    start_in_thread()
    return profiles


def _dump_profiles(profiles: list[Any], path: str) -> None:
    """Every thread's profile together in ``path`` (ROLE.prof), and each thread's alone
    beside it (ROLE-THREAD.prof)."""
    import pstats

    class Taken:  # what pstats reads of a profiler, taken without disabling it: a
        # profiler is disabled from its own thread only
        def __init__(self, profile: Any) -> None:
            profile.snapshot_stats()
            self.stats = profile.stats

        def create_stats(self) -> None:
            pass

    threading.setprofile(None)  # type: ignore[arg-type]
    profiles[0][1].disable()  # this thread's
    stats = pstats.Stats()
    seen: dict[str, int] = {}
    for name, profile in profiles:
        own = pstats.Stats(Taken(profile))
        seen[name] = seen.get(name, 0) + 1
        own.dump_stats(f"{path[:-5]}-{name}{'' if seen[name] == 1 else seen[name]}.prof")
        stats.add(own)
    stats.dump_stats(path)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
