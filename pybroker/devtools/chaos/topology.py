"""``pybroker chaos run --topology``: the chaos run over more than two instances in a line.

forwarder  A -> F1 [-> F2] -> B, and B -> ... -> A back (R7): the forwarders host no
           service and have forwarding on, with msdb routes toward B and toward A; A's route
           to B's service, and B's to A's, name the nearest forwarder. Every instance has a
           fault proxy in front of it, so both hops are faulted; the nemesis SIGKILLs and
           pauses every instance, forwarders included. The checker is point-to-point's
           (A's and B's files), plus: a forwarder holds nothing durable (R7.3), no
           conversation endpoint, fragment, queued or transmission-queue row in its file.
mirror     initiator A, principal P, mirror M (R9): P and M share the database DbB, with one
           broker identifier, and A routes B's service to P with M as MIRROR_ADDRESS. At a
           moment of the stream (once P has committed a message) the nemesis SIGKILLs P
           and promotes M (its role file: the process calls set_mirroring('PRINCIPAL') on
           the survivor, R9.3); once M says it is principal, P's file is made MIRROR
           (SET PARTNER FAILOVER), P comes back as the mirror and A begins as many
           conversations again. Half the messages go to the conversations begun before,
           half to those begun after the promotion. The rule is checker_failover's: the
           conversations that exist at the new principal lose, duplicate and reorder
           nothing; the stranded ones (begun at P) end with an error at A and hold nothing
           at M, and are counted.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pybroker.devtools.chaos import checker, runner
from pybroker.devtools.chaos.checker_failover import Failover, check_failover
from pybroker.devtools.chaos.ports import free_port
from pybroker.devtools.chaos.runner import ChaosRun, Node, Options
from pybroker.devtools.chaos.workload import split
from pybroker.errors import BrokerError
from pybroker.storage.templates import render

TOPOLOGIES = ("point-to-point", "forwarder", "mirror")
FAILOVER_WINDOW = (0.25, 0.5)  # of the duration: P is killed while A is still sending


def _node(run: ChaosRun, name: str, database: str, service: str) -> Node:
    return Node(name, run.dir / f"{name}.duckdb", free_port(), free_port(), database,
                service)


def _address(node: Node) -> str:
    return f"tcp://127.0.0.1:{node.proxy_port}"


class ForwarderRun(ChaosRun):
    """A -> F1 [-> F2] -> B and back, every forwarder SIGKILLed and paused mid-stream."""

    def __init__(self, options: Options, log: Any = None) -> None:
        super().__init__(replace(options, instances=2), log)
        self.chain = ["A", *(f"F{i + 1}" for i in range(options.forwarders)), "B"]
        self.nodes = {}
        for n in self.chain:
            forwarder = n.startswith("F")
            self.nodes[n] = _node(self, n, "msdb" if forwarder else f"Db{n}",
                                  "" if forwarder else f"Svc{n}")
        self.links = [("A", "B"), ("B", "A")]
        self.held: dict[str, dict[str, int]] = {}

    @property
    def forwarders(self) -> list[str]:
        return self.chain[1:-1]

    def build(self, insts: dict[str, Any]) -> dict[str, dict[str, int]]:
        a, b = self.nodes["A"], self.nodes["B"]
        dbs = {n: self.create_objects(n, insts[n]) for n in ("A", "B")}
        # each end names its neighbour in the chain, the forwarder
        dbs["A"].create_route("ToB", service_name=b.service,
                              address=_address(self.nodes[self.chain[1]]))
        dbs["B"].create_route("ToA", service_name=a.service,
                              address=_address(self.nodes[self.chain[-2]]))
        for i, f in enumerate(self.chain[1:-1], start=1):
            msdb = insts[f].database("msdb")  # R7: a forwarder's routes are msdb's
            msdb.create_route("OnToB", service_name=b.service,
                              address=_address(self.nodes[self.chain[i + 1]]))
            msdb.create_route("OnToA", service_name=a.service,
                              address=_address(self.nodes[self.chain[i - 1]]))
            insts[f].forwarding = True
        count_ab, count_ba = split(self.o.messages, 2)
        return {**{f: {} for f in self.forwarders},
                "A": self.begin(dbs["A"], ("A", "B"), count_ab),
                "B": self.begin(dbs["B"], ("B", "A"), count_ba)}

    def check(self) -> checker.Verdict:
        from pybroker.api.instance import Instance

        sent: list[checker.Sent] = []
        received: list[checker.Received] = []
        for n in ("A", "B"):
            with Instance(self.nodes[n].file, worker=False) as inst:
                node_sent, node_received = self.read(n, inst)
            sent += node_sent
            received += node_received
        verdict = checker.check(sent, received)
        held_in_all = 0
        for f in self.forwarders:
            with Instance(self.nodes[f].file, worker=False) as inst:
                held = self.held[f] = held_by(inst)
            for what, count in held.items():
                if count:
                    held_in_all += count
                    verdict.note(f"forwarder {f} holds {count} row(s) of {what} in its file")
        verdict.extra["held_by_forwarders"] = held_in_all
        return verdict

    def report_extra(self) -> dict[str, Any]:
        kills = {f: self.nodes[f].kills for f in self.forwarders}
        return {"topology": {
            "name": "forwarder", "shape": " -> ".join(self.chain),
            "forwarder_sigkills": kills, "held_by_forwarders": self.held,
            "lines": [f"forwarders {', '.join(self.forwarders)}: "
                      f"{sum(kills.values())} SIGKILL in all; rows in their files: "
                      + ", ".join(f"{f} {sum(h.values())}" for f, h in self.held.items())]}}


def held_by(inst: Any) -> dict[str, int]:
    """What a forwarder's file holds of the dialogs it passed on: all 0 (R7.3, memory only)."""
    return dict(inst.sql(render("chaos/select_held_by_forwarder.sql")).fetchall())


class MirrorRun(ChaosRun):
    """Initiator A, principal P and mirror M; P SIGKILLed mid-stream and M promoted."""

    def __init__(self, options: Options, log: Any = None) -> None:
        super().__init__(replace(options, instances=2), log)
        self.nodes = {"A": _node(self, "A", "DbA", "SvcA"),
                      "P": _node(self, "P", "DbB", "SvcB"),
                      "M": _node(self, "M", "DbB", "SvcB")}
        self.links = [("A", "P")]
        self.after_plan = split(options.messages - options.messages // 2, options.conversations)
        self.failover: dict[str, Any] = {"principal_killed_at": None, "promoted_at": None,
                                          "old_principal_back_at": None}
        self.outcome: Failover | None = None

    def build(self, insts: dict[str, Any]) -> dict[str, dict[str, int]]:
        a, p, m = (self.nodes[n] for n in "APM")
        dbs = {n: self.create_objects(n, insts[n]) for n in "AP"}
        # one database in two files, with one broker identifier, as SQL Server's partners
        dbs["M"] = self.create_objects("M", insts["M"], dbs["P"].broker_instance)
        dbs["P"].set_mirroring("PRINCIPAL", _address(m))
        dbs["M"].set_mirroring("MIRROR", _address(p))
        for n, role in (("P", "PRINCIPAL"), ("M", "MIRROR")):
            (self.dir / f"{n}.role").write_text(role)
            dbs[n].create_route("ToA", service_name=a.service, address=_address(a))
        dbs["A"].create_route("ToB", service_name=p.service, address=_address(p),
                              mirror_address=_address(m))  # R9
        return {"A": self.begin(dbs["A"], ("A", "P"), self.o.messages // 2), "P": {},
                "M": {}}

    def node_config(self, name: str) -> dict[str, Any]:
        if name == "A":
            return {"after": {"to": self.nodes["P"].service, "contract": runner.CONTRACT,
                              "plan": self.after_plan}}
        return {"mirrored": True}

    def plan_events(self) -> list[tuple[float, str, str]]:
        o = self.o
        at = self.rng.uniform(*FAILOVER_WINDOW) * o.duration
        events = [(at, "failover", "P")]
        for _ in range(o.kills):
            events.append((self.rng.uniform(0.05, 0.9) * o.duration, "kill", "A"))
            # the new principal too, once it is one
            events.append((self.rng.uniform(at / o.duration + 0.05, 0.9) * o.duration,
                           "kill", "M"))
        for n in self.nodes:
            for _ in range(o.pauses):
                end = at - 0.5 if n == "P" else 0.9 * o.duration
                events.append((self.rng.uniform(0.05 * o.duration, max(0.1, end)),
                               "pause", n))
        return events + self.worker_events()

    def receivers(self) -> list[str]:
        return ["M", "P"]  # a mirror's workers wait until it is principal

    def act(self, action: str, node: Node, now: float,
            pending: list[tuple[float, str, str]]) -> None:
        p, m = self.nodes["P"], self.nodes["M"]
        at = round(time.monotonic() - self.started, 2)  # the timeline's clock
        if action == "failover":
            st, sender = self.status(p), self.status(self.nodes["A"])
            holding = st is not None and st["queued"]
            sending = sender is not None and sender.get("unsent", 0) > 0
            if not (holding and sending) and now < 0.9 * self.o.duration:
                # a failover is worth proving once P holds messages while A still has more
                # to send on the conversations begun at P (R9.3: the new principal refuses
                # those): wait for both
                pending.append((now + 0.25, "failover", "P"))
                return
            self.failover["initiator_sending"] = bool(sending)
            self.kill(p)
            self.failover["principal_killed_at"] = at
            (self.dir / "M.role").write_text("PRINCIPAL")  # R9.3: the survivor promoted
            self._note("failover: P killed, M asked to be PRINCIPAL")
            pending.append((now + 0.2, "promoted?", "M"))
        elif action == "promoted?":
            st = self.status(m)
            if st is None or st.get("role") != "PRINCIPAL":
                pending.append((now + 0.2, "promoted?", "M"))
                return
            self.demote_old_principal()
            self.failover["promoted_at"] = at
            (self.dir / "failed_over").write_text(json.dumps({"at": now}))
            self._note("M is PRINCIPAL; P's file made MIRROR; A begins the conversations "
                       "after the failover")
            pending.append((now + self.rng.uniform(0.5, 2.0), "back", "P"))
        elif action == "back":
            if p.proc is None:
                self.start(p)
            self.failover["old_principal_back_at"] = at
        else:
            super().act(action, node, now, pending)

    def demote_old_principal(self) -> None:
        """SET PARTNER FAILOVER on the side that died, before it serves again."""
        from pybroker.api.instance import Instance

        (self.dir / "P.role").write_text("MIRROR")
        with Instance(self.nodes["P"].file, worker=False) as inst:
            db = inst.database(self.nodes["P"].database)
            if db.mirroring_role != "MIRROR":
                db.fail_over()

    def check(self) -> checker.Verdict:
        from pybroker.api.instance import Instance

        plan = self._config()["nodes"]["A"]["plan"]
        with Instance(self.nodes["A"].file, worker=False) as inst:
            sent, _ = self.read("A", inst)
            ids = dict(inst.sql("SELECT conversation_handle, conversation_id FROM "
                                "sys.conversation_endpoints WHERE is_initiator").fetchall())
            errored = {cid for (cid,) in inst.sql(
                "SELECT conversation_id FROM sys.conversation_endpoints "
                "WHERE is_initiator AND state = 'ER'").fetchall()}
        after = {cid for h, cid in ids.items() if h not in plan}
        rows = {}
        for n in ("P", "M"):
            with Instance(self.nodes[n].file, worker=False) as inst:
                rows[n] = self.read(n, inst)[1]
        sent = [replace(s, link="A->pair") for s in sent]
        self.outcome = check_failover(sent, after, rows["P"], rows["M"], errored)
        if self.failover["principal_killed_at"] is not None and (
                self.failover["promoted_at"] is None):
            self.outcome.verdict.extra["not_promoted"] = 1
            self.outcome.verdict.note("M never said it was principal after P was killed")
        return self.outcome.verdict

    def _config(self) -> dict[str, Any]:
        return json.loads((self.dir / "config.json").read_text())

    def report_extra(self) -> dict[str, Any]:
        outcome = self.outcome.as_dict() if self.outcome else {}
        f = self.failover
        lines = [
            f"failover: P SIGKILLed at {f['principal_killed_at']} s, M principal at "
            f"{f['promoted_at']} s, P back as the mirror at {f['old_principal_back_at']} s"]
        if outcome:
            lines += [
                f"continued at the new principal: {outcome['continued']} conversations "
                f"({outcome['begun_after']} begun after the failover), "
                f"{outcome['continued_messages']} messages received there",
                f"stranded (begun at the old principal): {outcome['stranded']} conversations, "
                f"{outcome['stranded_ended']} ended with an error at the initiator: "
                f"{outcome['at_old_principal']} messages at the old principal, "
                f"{outcome['undelivered']} undelivered (the error ended them), "
                f"{outcome['held_at_new_principal']} held at the new one, "
                f"{outcome['in_both']} in both; finished before the failover "
                f"{outcome['finished_before']}; ended with an error "
                f"{outcome['ended_with_error']}"]
        return {"topology": {"name": "mirror", "shape": "A -> P | M", "failover": f,
                             "failed_over": f["promoted_at"] is not None, **outcome,
                             "lines": lines}}


RUNS: dict[str, type[ChaosRun]] = {"point-to-point": ChaosRun, "forwarder": ForwarderRun,
                                    "mirror": MirrorRun}


def run(options: Options, log: Any = None) -> dict[str, Any]:
    """A chaos run of ``options.topology``."""
    if options.topology not in RUNS:
        raise BrokerError(f"unknown topology {options.topology!r}; choose from "
                          f"{', '.join(TOPOLOGIES)}")
    if options.topology == "point-to-point":
        return runner.run(options, log)
    if options.forwarders not in (1, 2):
        raise BrokerError("the forwarder topology takes 1 or 2 forwarders")
    return RUNS[options.topology](options, log).run()


def check_directory(directory: str | Path) -> dict[str, Any]:
    """The checker's verdict over a stopped run's directory, whatever its topology."""
    directory = Path(directory)
    try:
        config = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise BrokerError(f"{directory} is not a chaos run directory: {exc}") from None
    topology = config.get("topology", "point-to-point")
    if topology == "point-to-point":
        return runner.check_directory(directory)
    o = Options(topology=topology, forwarders=config.get("forwarders", 1),
                directory=str(directory), workers=config.get("workers", 0))
    run = RUNS[topology](o)
    with contextlib.suppress(OSError, ValueError):  # what the run knew of its failover
        failover = json.loads((directory / "report.json").read_text())["topology"]
        if "failover" in failover:
            run.failover = failover["failover"]  # type: ignore[attr-defined]
    return run.check().as_dict()
