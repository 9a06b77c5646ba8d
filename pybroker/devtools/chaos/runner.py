"""``pybroker chaos run``: instances as separate processes, proxies between them, a workload,
a nemesis, healing, and the checker's verdict.

1. Set-up (here, before any child starts): one file per instance (A, B and maybe C), each
   with a database, a queue, a service and the contract; every instance trusts the others;
   routes name the PROXIES' addresses; each sender begins its conversations.
2. The instances run as ``python -m pybroker.devtools.chaos.node`` processes on fixed ports (a
   restart reuses its port), each sending its share paced over 70 % of the duration.
3. The nemesis, driven by the seed: the proxies' faults all the time, SIGKILL of each
   instance at random moments (restarted after a short pause), SIGSTOP/SIGCONT pauses.
4. Healing: no more faults, every process alive and running, and a bounded wait until every
   sender has sent everything and its transmission queue is empty. Then SIGTERM (SIGKILL if
   it does not stop) by pid, and the files are read: what each sender recorded as sent and
   acknowledged, what each receiver committed to its queue (no one RECEIVEs: the queue is
   the record). The checker gives the verdict.

With ``workers`` (C7), each receiving instance also serves its file to that many receiving
worker processes (``worker.py``): each RECEIVEs one message a transaction, processes it
(``processing`` seconds inside the transaction), records it in its instance's record
queue and COMMITs; the nemesis SIGKILLs them too (``worker_kills`` of each instance's, at
random), healing waits until they have taken every message, and the record, in the order
the workers committed, followed by what is left in the queue, is what the checker reads
as received: per conversation nothing lost, twice or out of order, since the group lock
lets one worker at a time take a conversation's messages.

Other shapes (forwarders between the ends, a mirrored pair that fails over) are this run
with its set-up, nemesis and check overridden: ``topology.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pybroker.devtools.chaos import checker, proxy
from pybroker.devtools.chaos.ports import free_port
from pybroker.devtools.chaos.worker import read_record
from pybroker.devtools.chaos.workload import check_body, links, split
from pybroker.errors import BrokerError
from pybroker.storage.templates import render

CONTRACT = "//Chaos/Contract"
MESSAGE_TYPE = "//Chaos/Message"


WORKER_KILL_TRIES = 30  # looks, 50 ms apart, for a worker holding a message to SIGKILL


def record_service(name: str) -> str:
    """The service of instance ``name``'s record queue (``--workers``)."""
    return f"Rec{name}"


@dataclass
class Options:
    seed: int = 1
    instances: int = 2
    messages: int = 1000
    duration: float = 60.0  # seconds of nemesis (the workload is paced over 70 % of it)
    conversations: int = 10  # per link (sender -> target)
    kills: int = 2  # SIGKILLs of each instance during the run
    pauses: int = 1  # SIGSTOP/SIGCONT pauses of each instance
    faults: tuple[str, ...] = proxy.FAULTS
    fault_rate: float = 1.0
    fault_direction: str = "both"  # up | down | both
    max_body: int = 2 * 2**20  # the largest body; one in big_every is between /8 and this
    big_every: int = 100
    fragment_size: int = 64 * 1024
    batch: int = 20  # messages per sending transaction
    retry_scale: float = 0.05
    drain_timeout: float = 300.0
    directory: str | None = None
    frame_faults_in_clear: bool = True  # encryption=False when a frame fault is asked
    topology: str = "point-to-point"  # | forwarder | mirror (pybroker/devtools/chaos/topology.py)
    forwarders: int = 1  # the forwarder topology's chain: A -> F1 [-> F2] -> B
    # each instance's file is first made by a process SIGKILLed inside connect(), and
    # each instance is SIGKILLed this many times more in its first seconds (its start)
    early_kills: int = 0
    # receiving workers per queue, each a process: RECEIVE one message, process, record,
    # COMMIT (worker.py); 0: no one receives, the queue is the record
    workers: int = 0
    worker_kills: int = 4  # SIGKILLs of each receiving instance's workers, one at random
    processing: float = 0.02  # seconds a worker spends on a message inside its transaction

    @property
    def encryption(self) -> bool:
        frame_faults = {"drop", "duplicate", "reorder", "flip"}
        return not (self.frame_faults_in_clear and frame_faults & set(self.faults))


@dataclass
class Node:
    name: str
    file: Path
    port: int
    proxy_port: int
    database: str
    service: str
    proc: subprocess.Popen | None = None
    paused: bool = False
    kills: int = 0
    pauses: int = 0
    starts: int = 0
    unexpected_exits: list[int] = field(default_factory=list)
    workers: list[subprocess.Popen | None] = field(default_factory=list)
    worker_kills: int = 0
    worker_kills_holding: int = 0  # of them, while the worker held a message
    worker_exits: list[int] = field(default_factory=list)  # unexpected, as above


def _child_env() -> dict[str, str]:
    import pybroker

    root = str(Path(pybroker.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get(
        "PYTHONPATH") else "")
    return env


class ChaosRun:
    def __init__(self, options: Options, log: Any = None) -> None:
        self.o = options
        self.log = log or (lambda text: print(text, flush=True))
        self.dir = Path(options.directory or tempfile.mkdtemp(prefix="pybroker-chaos-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.rng = random.Random(f"{options.seed}:nemesis")
        names = ["A", "B", "C"][:options.instances]
        self.nodes = {n: Node(n, self.dir / f"{n}.duckdb", free_port(), free_port(),
                              f"Db{n}", f"Svc{n}") for n in names}
        self.links = links(options.instances)
        self.proxies: proxy.ProxyGroup | None = None
        self.timeline: list[str] = []
        self.started = 0.0
        self.early_creations: dict[str, int] = {}  # creating processes killed inside/after

    # -- 1. set-up ----------------------------------------------------------------------

    def setup(self) -> dict[str, Any]:
        from pybroker.api.instance import Instance

        o = self.o
        if o.early_kills:
            for node in self.nodes.values():
                self.create_killed(node)
        insts = {n: Instance(node.file, worker=False) for n, node in self.nodes.items()}
        try:
            pems = {n: inst.certificate for n, inst in insts.items()}
            for n, inst in insts.items():
                for peer, pem in pems.items():
                    if peer != n:
                        inst.trust(peer, pem)
            plans = self.build(insts)
        finally:
            for inst in insts.values():
                inst.close()
        config = {
            "seed": o.seed, "start": time.time(), "send_window": 0.7 * o.duration,
            "big_every": o.big_every, "max_body": o.max_body, "batch": o.batch,
            "retry_scale": o.retry_scale, "encryption": o.encryption,
            "fragment_size": o.fragment_size, "message_type": MESSAGE_TYPE,
            "idle_timeout": None, "topology": o.topology, "forwarders": o.forwarders,
            "workers": o.workers, "processing": o.processing,
            "nodes": {n: {"file": str(node.file), "port": node.port,
                          "database": node.database, "service": node.service,
                          "plan": plans[n], **self.worker_config(n), **self.node_config(n)}
                      for n, node in self.nodes.items()}}
        (self.dir / "config.json").write_text(json.dumps(config, indent=1))
        return config

    def create_killed(self, node: Node) -> None:
        """A process that creates ``node``'s file, SIGKILLed at a random instant of its
        connect() (the migrations of a new file): the set-up then opens what it left."""
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys, pybroker; print('start', flush=True); "
             "pybroker.connect(sys.argv[1], worker=False); print('opened', flush=True); "
             "sys.stdin.read()", str(node.file)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_child_env())
        try:
            assert proc.stdout is not None
            proc.stdout.readline()  # "start": its first statement comes next
            # the kill's instant is the experiment: a timed pause, not a wait for an event
            time.sleep(self.rng.uniform(0.0, 0.6))
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        where = "after" if proc.stdout.read().startswith(b"opened") else "inside"
        self.early_creations[where] = self.early_creations.get(where, 0) + 1
        self._note(f"SIGKILL {node.name}'s creating process (pid {proc.pid}) {where} its "
                   "connect()")

    def create_objects(self, name: str, inst: Any, broker_instance: str | None = None) -> Any:
        """The database, message type, contract, queue and service of an end instance."""
        node = self.nodes[name]
        db = inst.create_database(node.database, broker_instance=broker_instance)
        db.create_message_type(MESSAGE_TYPE)
        db.create_contract(CONTRACT, {MESSAGE_TYPE: "ANY"})
        db.create_queue(f"Q{name}")
        db.create_service(node.service, queue=f"Q{name}", contracts=[CONTRACT])
        if self.o.workers and name in self.receivers():
            db.create_queue(f"R{name}")  # the workers' record
            db.create_service(record_service(name), queue=f"R{name}", contracts=["DEFAULT"])
        return db

    def receivers(self) -> list[str]:
        """The instances whose queue receiving workers take (``--workers``): the targets."""
        return sorted({b for _, b in self.links})

    def worker_config(self, name: str) -> dict[str, Any]:
        if not (self.o.workers and name in self.receivers()):
            return {}
        return {"workers": self.o.workers, "queue": f"Q{name}", "record_queue": f"R{name}",
                "record_service": record_service(name)}

    def begin(self, db: Any, link: tuple[str, str], count: int) -> dict[str, int]:
        """A link's conversations, begun in one transaction: handle -> messages to send."""
        plan = {}
        with db.transaction():
            for share in split(count, self.o.conversations):
                conv = db.begin_dialog(self.nodes[link[0]].service,
                                       self.nodes[link[1]].service, contract=CONTRACT)
                plan[conv.handle] = share
        return plan

    def build(self, insts: dict[str, Any]) -> dict[str, dict[str, int]]:
        """Objects, routes to the proxies and the conversations; returns each instance's
        plan (conversation handle -> messages to send)."""
        dbs = {n: self.create_objects(n, inst) for n, inst in insts.items()}
        peers = {(a, b) for a, b in self.links} | {(b, a) for a, b in self.links}
        for a, b in sorted(peers):
            dbs[a].create_route(f"To{b}", service_name=self.nodes[b].service,
                                address=f"tcp://127.0.0.1:{self.nodes[b].proxy_port}")
        plans: dict[str, dict[str, int]] = {n: {} for n in self.nodes}
        per_link = split(self.o.messages, len(self.links))
        for link, count in zip(self.links, per_link, strict=True):
            plans[link[0]].update(self.begin(dbs[link[0]], link, count))
        return plans

    def node_config(self, name: str) -> dict[str, Any]:
        """What a topology tells an instance process beyond its file, port and plan."""
        return {}

    # -- processes ----------------------------------------------------------------------

    def _note(self, text: str) -> None:
        line = f"{time.monotonic() - self.started:8.2f}s {text}"
        self.timeline.append(line)
        with contextlib.suppress(OSError), (self.dir / "timeline.log").open("a") as f:
            f.write(line + "\n")

    def start(self, node: Node) -> None:
        log = (self.dir / f"{node.name}.log").open("ab")
        try:
            node.proc = subprocess.Popen(
                [sys.executable, "-m", "pybroker.devtools.chaos.node",
                 str(self.dir / "config.json"), node.name], stdout=log,
                stderr=subprocess.STDOUT, env=_child_env(), cwd=str(self.dir),
                start_new_session=True)
        finally:
            log.close()
        node.starts += 1
        node.paused = False
        self._note(f"start {node.name} pid {node.proc.pid}")

    def alive(self, node: Node) -> bool:
        return node.proc is not None and node.proc.poll() is None

    def kill(self, node: Node) -> None:
        if node.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(node.proc.pid, signal.SIGKILL)
        node.proc.wait(timeout=30)
        node.kills += 1
        node.paused = False
        self._note(f"SIGKILL {node.name} pid {node.proc.pid}")
        node.proc = None

    def pause(self, node: Node) -> None:
        if self.alive(node) and not node.paused:
            os.kill(node.proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]
            node.paused = True
            node.pauses += 1
            self._note(f"SIGSTOP {node.name}")

    def resume(self, node: Node) -> None:
        if self.alive(node) and node.paused:
            os.kill(node.proc.pid, signal.SIGCONT)  # type: ignore[union-attr]
            self._note(f"SIGCONT {node.name}")
        node.paused = False

    def stop(self, node: Node, timeout: float = 30.0) -> None:
        if node.proc is None:
            return
        self.resume(node)
        if node.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(node.proc.pid, signal.SIGTERM)
            try:
                node.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(node.proc.pid, signal.SIGKILL)
                node.proc.wait(timeout=30)
                self._note(f"{node.name} did not stop on SIGTERM: SIGKILL")
        node.proc = None

    def check_exits(self) -> None:
        """A process that died without our SIGKILL is a finding: noted, restarted."""
        for node in self.nodes.values():
            if node.proc is not None and node.proc.poll() is not None:
                code = node.proc.returncode
                node.unexpected_exits.append(code)
                self._note(f"{node.name} exited by itself with code {code}; restarting")
                node.proc = None
                self.start(node)
            for i, proc in enumerate(node.workers):
                if proc is not None and proc.poll() is not None:
                    node.worker_exits.append(proc.returncode)
                    self._note(f"{node.name}.w{i} exited by itself with code "
                               f"{proc.returncode}; restarting")
                    node.workers[i] = None
                    self.start_worker(node, i)

    # -- receiving workers (worker.py) ----------------------------------------------------

    def start_worker(self, node: Node, index: int) -> None:
        while len(node.workers) <= index:
            node.workers.append(None)
        log = (self.dir / f"{node.name}.workers.log").open("ab")
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pybroker.devtools.chaos.worker",
                 str(self.dir / "config.json"), node.name, str(index)], stdout=log,
                stderr=subprocess.STDOUT, env=_child_env(), cwd=str(self.dir),
                start_new_session=True)
        finally:
            log.close()
        node.workers[index] = proc
        self._note(f"start {node.name}.w{index} pid {proc.pid}")

    def holding(self, node: Node, index: int) -> bool:
        """Whether worker ``index`` of ``node`` holds a message now (its state file)."""
        try:
            return (self.dir / f"{node.name}.w{index}.state").read_bytes()[:1] == b"1"
        except OSError:
            return False

    def kill_worker(self, node: Node, index: int) -> None:
        proc = node.workers[index]
        if proc is None:
            return
        holding = self.holding(node, index)  # for the report
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        node.workers[index] = None
        node.worker_kills += 1
        node.worker_kills_holding += holding
        self._note(f"SIGKILL {node.name}.w{index} pid {proc.pid}"
                   + (" holding a message" if holding else ""))

    def stop_worker(self, node: Node, index: int) -> None:
        proc = node.workers[index]
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        node.workers[index] = None

    def status(self, node: Node) -> dict[str, Any] | None:
        try:
            return json.loads((self.dir / f"{node.name}.status.json").read_text())
        except (OSError, ValueError):
            return None

    # -- 2-4. the run -------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        o = self.o
        t0 = time.monotonic()
        self.started = t0
        config = self.setup()
        faults = proxy.preset(set(o.faults), o.fault_rate) if o.faults else proxy.NONE
        faults = replace(faults, direction=o.fault_direction)
        self.proxies = proxy.ProxyGroup(o.seed)
        report: dict[str, Any] = {}
        try:
            for n, node in self.nodes.items():
                self.proxies.add(f"to{n}", node.port, node.proxy_port, faults)
            config["start"] = time.time()
            (self.dir / "config.json").write_text(json.dumps(config, indent=1))
            for node in self.nodes.values():
                self.start(node)
            for n in self.receivers() if o.workers else []:
                for i in range(o.workers):
                    self.start_worker(self.nodes[n], i)
            self._note(f"nemesis on: faults {', '.join(o.faults) or 'none'}, "
                       f"encryption {o.encryption}")
            nemesis_end = self.nemesis()
            heal_start = time.monotonic()
            drained = self.heal()
            heal_end = time.monotonic()
        finally:
            with _signals_ignored():  # a second ^C must not leave children behind
                for node in self.nodes.values():
                    for i in range(len(node.workers)):
                        self.stop_worker(node, i)
                for node in self.nodes.values():
                    self.stop(node)
                if self.proxies is not None:
                    fault_counts = self.proxies.counts()
                    self.proxies.close()
        verdict = self.check()
        report = {
            "options": {**asdict(o), "faults": list(o.faults), "encryption": o.encryption},
            "directory": str(self.dir),
            "verdict": verdict.as_dict(),
            "drained": drained,
            "seconds": {"nemesis": round(nemesis_end - t0, 1),
                        "healing": round(heal_end - heal_start, 1),
                        "total": round(time.monotonic() - t0, 1)},
            "nodes": {n: {"sigkills": node.kills, "pauses": node.pauses,
                          "starts": node.starts, "unexpected_exits": node.unexpected_exits,
                          **({"workers": {
                              "count": len(node.workers), "sigkills": node.worker_kills,
                              "sigkills_holding_a_message": node.worker_kills_holding,
                              "unexpected_exits": node.worker_exits}}
                             if node.workers else {})}
                      for n, node in self.nodes.items()},
            "faults_injected": fault_counts,
            "creations_killed": self.early_creations,
            **self.report_extra(),
        }
        (self.dir / "report.json").write_text(json.dumps(report, indent=1))
        return report

    def nemesis(self) -> float:
        """Kills and pauses at random moments of the duration (seeded); returns when the
        duration is over and every sender has sent its share (bounded)."""
        o = self.o
        events = sorted(self.plan_events())
        pending: list[tuple[float, str, str]] = []  # (at, restart|resume, node)
        t0 = time.monotonic()
        hard_end = t0 + 3 * o.duration + 300
        while True:
            now = time.monotonic() - t0
            while events and events[0][0] <= now:
                _, action, n = events.pop(0)
                node = self.nodes[n]
                if action == "kill" and node.proc is not None:
                    self.kill(node)
                    pending.append((now + self.rng.uniform(0.2, 2.0), "restart", n))
                elif action == "kill":
                    # still down from the last kill: kill it again just after its restart
                    events.append((now + 2.5, "kill", n))
                    events.sort()
                elif action == "pause" and self.alive(node):
                    self.pause(node)
                    pending.append((now + self.rng.uniform(0.5, 3.0), "resume", n))
                elif action not in ("kill", "pause"):
                    self.act(action, node, now, pending)
            for item in sorted(pending):
                if item[0] <= now:
                    pending.remove(item)
                    node = self.nodes[item[2]]
                    if item[1] == "restart" and node.proc is None:
                        self.start(node)
                    elif item[1] == "resume":
                        self.resume(node)
                    elif item[1] not in ("restart", "resume"):
                        self.act(item[1], node, now, pending)
            self.check_exits()
            if not events and not pending and now >= o.duration and self._all_sent():
                break
            if time.monotonic() > hard_end:
                self._note("the workload did not finish within the nemesis' time limit")
                break
            time.sleep(0.05)
        return time.monotonic()

    def plan_events(self) -> list[tuple[float, str, str]]:
        """(seconds into the run, kill | pause | a topology's own action, node name)."""
        o = self.o
        events: list[tuple[float, str, str]] = []
        for n in self.nodes:
            for _ in range(o.kills):
                events.append((self.rng.uniform(0.05, 0.9) * o.duration, "kill", n))
            for _ in range(o.early_kills):  # inside the start: connect(), the endpoint
                events.append((self.rng.uniform(0.3, 2.5), "kill", n))
            for _ in range(o.pauses):
                events.append((self.rng.uniform(0.05, 0.9) * o.duration, "pause", n))
        return events + self.worker_events()

    def worker_events(self) -> list[tuple[float, str, str]]:
        """The SIGKILLs of receiving workers: ``worker_kills`` of each receiving instance's,
        each of one picked at random when it comes."""
        o = self.o
        if not o.workers:
            return []
        return [(self.rng.uniform(0.05, 0.9) * o.duration, "kill-worker", n)
                for n in self.receivers() for _ in range(o.worker_kills)]

    def act(self, action: str, node: Node, now: float,
            pending: list[tuple[float, str, str]]) -> None:
        """A topology's own nemesis action (a failover); may add (at, action, node) to
        ``pending``."""
        if action.startswith("kill-worker"):
            # a worker holding a message (inside its transaction, processing) if one does
            # within a second or so; else one picked at random
            tries = int(action.partition(":")[2] or 0)
            alive = [i for i, p in enumerate(node.workers) if p is not None]
            holding = [i for i in alive if self.holding(node, i)]
            if not holding and tries < WORKER_KILL_TRIES:
                pending.append((now + 0.05, f"kill-worker:{tries + 1}", node.name))
                return
            index = self.rng.choice(holding or alive) if alive else None
            if index is not None:
                self.kill_worker(node, index)
                pending.append((now + self.rng.uniform(0.2, 2.0), f"restart-worker:{index}",
                                node.name))
            return
        if action.startswith("restart-worker:"):
            index = int(action.partition(":")[2])
            if node.workers[index] is None:
                self.start_worker(node, index)
            return
        raise BrokerError(f"the chaos run has no nemesis action {action!r}")

    def report_extra(self) -> dict[str, Any]:
        """What a topology adds to the report (after check())."""
        return {}

    def _all_sent(self, since: float = 0.0) -> bool:
        for node in self.nodes.values():
            st = self.status(node)
            if st is None or st["time"] < since or st["sent"] < st["planned"]:
                return False
        return True

    def heal(self) -> bool:
        """No more faults, everyone alive; wait (bounded) until everything is sent and
        acknowledged. True when it drained."""
        assert self.proxies is not None
        self.proxies.heal()
        self._note("healing: proxies pass-through")
        for node in self.nodes.values():
            self.resume(node)
            if node.proc is None:
                self.start(node)
            for i, proc in enumerate(node.workers):
                if proc is None:
                    self.start_worker(node, i)
        since = time.time()
        deadline = time.monotonic() + self.o.drain_timeout
        while time.monotonic() < deadline:
            self.check_exits()
            sts = [self.status(n) for n in self.nodes.values()]
            # with workers, also every queue taken (but a mirror's: its workers wait)
            if all(st is not None and st["time"] > since + 1.0 and st["sent"] >= st["planned"]
                   and st["tq"] == 0 and (not st.get("unprocessed") or st.get("role") == (
                       "MIRROR")) for st in sts):
                self._note("drained: every transmission queue is empty"
                           + (", every queue processed" if self.o.workers else ""))
                return True
            time.sleep(0.2)
        self._note(f"not drained after {self.o.drain_timeout} s")
        return False

    # -- the record ---------------------------------------------------------------------

    def check(self) -> checker.Verdict:
        from pybroker.api.instance import Instance

        sent: list[checker.Sent] = []
        received: list[checker.Received] = []
        for n, node in self.nodes.items():
            with Instance(node.file, worker=False) as inst:
                node_sent, node_received = self.read(n, inst)
            sent += node_sent
            received += node_received
        return checker.check(sent, received)

    def read(self, name: str, inst: Any) -> tuple[list[checker.Sent], list[checker.Received]]:
        """What one stopped instance's file says it sent (its initiator conversations) and
        committed to its queues."""
        service_node = {node.service: n for n, node in self.nodes.items()}
        workers = bool(self.worker_config(name))
        sent: list[checker.Sent] = []
        received: list[checker.Received] = []
        unacked: dict[str, set[int]] = {}
        for handle, seq in inst.sql(
                "SELECT DISTINCT conversation_handle, message_sequence_number "
                "FROM sys.transmission_queue").fetchall():
            unacked.setdefault(handle, set()).add(seq)
        targets: dict[str, str] = {}
        for handle, conv_id, is_init, send_seq, far in inst.sql(
                "SELECT conversation_handle, conversation_id, is_initiator, "
                "send_sequence, far_service FROM sys.conversation_endpoints"
        ).fetchall():
            if is_init and workers and far == record_service(name):
                continue  # a worker's record dialog: read below, as the record
            if is_init:
                sent.append(checker.Sent(conv_id, f"{name}->{service_node.get(far)}",
                                         send_seq, frozenset(unacked.get(handle, ()))))
            else:
                targets[handle] = conv_id
        # a body kept as its fragments (migrations/010) is put together here, one message
        # at a time (sys.queue_messages would put them all together at once)
        kept = {}
        for handle, seq in inst.sql(
                "SELECT conversation_handle, message_sequence_number "
                "FROM main.queue_messages WHERE body_fragments IS NOT NULL").fetchall():
            pieces = inst.sql(
                "SELECT message_body FROM main.message_fragments "
                "WHERE conversation_handle = $handle AND message_sequence_number = $seq "
                "ORDER BY fragment_number, piece_number",
                {"handle": handle, "seq": seq}).fetchall()
            kept[handle, seq] = check_body(b"".join(p[0] or b"" for p in pieces))
            del pieces
        if workers:
            # what the workers processed, in the order they committed it, then what they
            # had not taken (it comes after, in each conversation)
            received += self.read_records(inst, name, targets)
            cur = inst.sql(render("chaos/select_queue_rows.sql"), {"queue": f"Q{name}"})
        else:
            cur = inst.sql("SELECT conversation_handle, queuing_order, "
                           "message_sequence_number, status, message_body, body_fragments "
                           "FROM main.queue_messages ORDER BY queuing_order")
        after = len(received)
        while rows := cur.fetchmany(500):
            for handle, order, seq, status, body, fragments in rows:
                b = kept[handle, seq] if fragments is not None else check_body(body)
                received.append(checker.Received(
                    targets.get(handle, f"unknown handle {handle}"), after + order, seq,
                    status, b.conversation_id, b.sequence, b.ok))
        return sent, received

    def read_records(self, inst: Any, name: str, targets: dict[str, str]
                     ) -> list[checker.Received]:
        """The workers' record queue as the messages they received, in commit order (a
        body that is no record is an unexpected message)."""
        out = []
        cur = inst.sql(render("chaos/select_queue_rows.sql"), {"queue": f"R{name}"})
        while rows := cur.fetchmany(500):
            for handle, _order, _seq, _status, body, _fragments in rows:
                r = read_record(body or b"")
                if r is None:
                    out.append(checker.Received(f"unknown record on {handle}", len(out), -1,
                                                1, None, None, False))
                    continue
                out.append(checker.Received(
                    targets.get(r["h"], f"unknown handle {r['h']}"), len(out), r["q"], 1,
                    r["c"], r["s"], bool(r["ok"])))
        return out


@contextlib.contextmanager
def _signals_ignored():
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def summary(report: dict[str, Any]) -> str:
    v = report["verdict"]
    topology = report.get("topology")
    lines = [
        f"chaos run: {len(report['nodes'])} instances"
        + (f" ({topology['shape']})" if topology else "") + ", seed "
        f"{report['options']['seed']}, {report['seconds']['total']} s "
        f"(nemesis {report['seconds']['nemesis']} s, healing {report['seconds']['healing']} s)",
        "  " + ", ".join(f"{n}: {d['sigkills']} SIGKILL, {d['pauses']} pauses, "
                         f"{len(d['unexpected_exits'])} unexpected exits"
                         for n, d in report["nodes"].items()),
        "  faults injected: " + (", ".join(f"{k} {c}" for k, c in
                                           report["faults_injected"].items()) or "none"),
        f"  conversations {v['conversations']}, sent {v['sent']}, acknowledged "
        f"{v['acknowledged']}, received {v['received']}",
        f"  lost {v['lost']}, duplicated {v['duplicated']}, out of order {v['out_of_order']}, "
        f"unexpected {v['unexpected']}, corrupted {v['corrupted']}, incomplete "
        f"{v['incomplete']}, unacknowledged {v['unacknowledged']}, last not delivered "
        f"{v['last_not_delivered']}",
        *(f"  {line}" for line in (topology or {}).get("lines", [])),
        *([f"  receiving workers, {report['options']['workers']} per queue: " + ", ".join(
            f"{n}: {d['workers']['sigkills']} SIGKILL ({d['workers']['sigkills_holding_a_message']}"
            f" holding a message), {len(d['workers']['unexpected_exits'])} unexpected exits"
            for n, d in report["nodes"].items() if "workers" in d)]
          if report["options"].get("workers") else []),
        *(f"  ! {d}" for d in v["details"][:20]),
        f"  verdict: {'VALID' if v['valid'] else 'INVALID'}; report: "
        f"{report['directory']}/report.json",
    ]
    return "\n".join(lines)


def check_directory(directory: str | Path) -> dict[str, Any]:
    """The checker's verdict over the files of a run directory whose processes are stopped
    (a run that was interrupted, or one to look at again)."""
    directory = Path(directory)
    try:
        config = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise BrokerError(f"{directory} is not a chaos run directory: {exc}") from None
    o = Options(instances=len(config["nodes"]), directory=str(directory),
                workers=config.get("workers", 0))
    verdict = ChaosRun(o).check()
    return verdict.as_dict()


def run(options: Options, log: Any = None) -> dict[str, Any]:
    if options.instances not in (2, 3):
        raise BrokerError("a chaos run takes 2 or 3 instances")
    return ChaosRun(options, log).run()
