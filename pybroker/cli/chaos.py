"""``pybroker chaos run`` (the chaos soak), ``pybroker chaos crash`` (kills of a process
working on an instance file) and ``pybroker chaos fuzz`` (the wire decoders' fuzz runs)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

RUN_EPILOG = """\
what a run does (pybroker/devtools/chaos/):
  instances     2 (A<->B) or 3 (A->B, A->C, B->A, C->A), each a process
                (python -m pybroker.devtools.chaos.node) with its own file and its endpoint
                on a fixed 127.0.0.1 port; every route names a fault proxy in
                front of its target, so every byte between instances crosses one
  --topology    point-to-point: the instances above. forwarder: A -> F -> B
                and back (--forwarders 2: A -> F1 -> F2 -> B); the forwarders
                host no service, pass messages on from memory and are killed
                and paused like the others; the report also counts the rows a
                forwarder holds in its file (there must be none). mirror: A
                sends to a mirrored pair, principal P and mirror M (one
                database, one broker identifier); at a moment between 25% and
                50% of --duration (or later, once P holds a message) P is
                killed (its only kill: --kills are A's and, once it is
                principal, M's) and M made principal, P returns as the mirror
                and A begins as many conversations again (half the messages).
                Nothing is copied between P and M, so only the conversations
                whose first message reached M must arrive there whole, once
                and in order (all those begun after the failover); those begun
                at P end with an error at A when M refuses their next message,
                and are counted: what P kept, what the error ended, what both
                have
  workload      --conversations per link; bodies from a few bytes up: about one
                in --big-every is large (max-body/8 .. --max-body, travelling in
                --fragment-size fragments); --batch messages per transaction,
                paced over 70% of --duration. Each body names its conversation,
                its sequence and its SHA-256; a killed sender goes on from its
                own file (send_sequence)
  nemesis       all from --seed (the run directory keeps timeline.log): the
                proxies' faults the whole time, each with a probability and a
                direction: latency (2 ms) and jitter (0-10 ms), a 20 MiB/s
                bandwidth limit, a TCP reset mid-chunk, black holes (bytes
                accepted, none delivered for 1.5 s, then a reset), writes sliced
                into 1-16-byte pieces, new connections refused for 1 s, and whole
                frames dropped, duplicated, reordered or with one bit flipped;
                --kills SIGKILLs of every instance (restarted 0.2-2 s later on
                the same port) and --pauses SIGSTOP/SIGCONT of 0.5-3 s
  frame faults  drop, duplicate, reorder and flip need the frames in clear: the
                instances then run with encryption=False (SQL Server's
                ENCRYPTION = DISABLED), where the dialog MACs (keyed integrity) are the only
                protection a flipped bit meets; the proxy holds no keys. With
                stream faults only, the endpoints use TLS and the proxy forwards
                opaque bytes
  healing       faults stop, every instance runs; the run waits (at most
                --drain-timeout) until every sender has sent its share and its
                transmission queue is empty, stops the processes by pid (SIGTERM,
                then SIGKILL) and reads their files. No instance RECEIVEs: its
                queue is the record of what it committed
  --workers     N receiving workers per queue, each a process and a client
                of its instance (which serves its file to them): a loop of one
                transaction that RECEIVEs one message, processes it for
                --processing seconds, records it (a SEND to its instance's record
                queue, in the same transaction) and COMMITs. Several take one
                queue side by side, one conversation group each; the nemesis
                SIGKILLs --worker-kills of each instance's workers, choosing one
                that holds a message if one does within 1.5 s, and restarts it
                0.2-2 s later. Healing also waits until every message is taken;
                the record, in the order the workers committed, then what is
                left in the queue, is what the checker reads as received. The
                default, 0, is the runs above: no worker, the queue is the record

the report (printed; report.json in the run directory), over every conversation:
  sent, acknowledged, received   committed by the sender (below its
                send_sequence); no longer in its transmission queue; in the
                receiver's queue
  lost          acknowledged, never received
  duplicated    received twice
  out of order  a message queued (with --workers: recorded) after a higher
                sequence of its conversation
  unexpected    never sent, or of an unknown conversation
  corrupted     a body that is not what was sent
  incomplete    still status 2 (being reassembled, or held behind a gap)
  unacknowledged  still in a sender's transmission queue after healing
  last not delivered  a conversation's last message is not in the receiver's queue
  held by forwarders  (forwarder) rows of conversations, fragments, queues or
                transmission queue in a forwarder's file: there must be none
  failover      (mirror) how many conversations continued at the new principal
                (checked as above, there), how many were stranded (begun at the
                old one, which keeps what it took): each must end with an error
                at the initiator, holding nothing at the new principal (the
                messages the error ended are counted as undelivered), or, if
                its first message began it at the new one, arrive there to its
                last; twice in one queue or out of order among the receivable
                ones of one queue is a violation. One begun after the failover
                that ends with an error or has a message at the old principal
                is a violation
  verdict       VALID when every count from lost on is 0 (exit 0), else INVALID
                (exit 1). 'pybroker chaos check DIR' gives it again for a stopped
                run's directory

examples (two instances, 100,000 messages, about 30 minutes; a forwarder; a failover):
  pybroker chaos run --instances 2 --messages 100000 --duration 1800 --kills 10 \\
      --pauses 3 --conversations 50 --big-every 1000 --batch 50 --retry-scale 0.5 \\
      --seed 102 --drain-timeout 600
  pybroker chaos run --topology forwarder --messages 2000 --duration 60
  pybroker chaos run --topology mirror --messages 2000 --duration 60
  pybroker chaos run --messages 2000 --duration 60 --workers 4    # receiving workers
"""


def add_commands(sub: Any, command: Any, usage_error: type[Exception]) -> None:
    p = command("chaos", "prove exactly-once, in-order delivery under faults: 'chaos run' "
                "(instances as processes, a fault proxy, SIGKILLs, a checker) and "
                "'chaos fuzz' (the wire decoders)", None)
    p.set_defaults(parser=p)
    chaos = p.add_subparsers(title="chaos commands", metavar="WHAT")

    def sub_command(name: str, help_text: str, handler: Any,
                    epilog: str | None = None) -> argparse.ArgumentParser:
        if epilog is None:
            q = chaos.add_parser(name, help=help_text, description=help_text)
        else:  # the epilog is laid out by hand, so the description is wrapped here
            q = chaos.add_parser(name, help=help_text, description=textwrap.fill(help_text),
                                 epilog=epilog,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
        q.set_defaults(handler=handler, usage_error=usage_error)
        return q

    from pybroker.devtools.chaos.proxy import FAULTS

    q = sub_command("run", "start 2 or 3 instances as processes with fault proxies between "
                    "them (directly, through forwarders, or to a mirrored pair that fails "
                    "over), send a workload while a nemesis faults, kills (SIGKILL) and "
                    "pauses them, heal, and check every conversation: nothing lost, "
                    "duplicated, reordered or unexpected. Exit 1 on any violation.", cmd_run,
                    RUN_EPILOG)
    q.add_argument("--seed", type=int, default=1,
                   help="seed of the workload's and the faults' random choices; the same seed "
                   "makes the same choices (default 1)")
    q.add_argument("--instances", type=int, choices=(2, 3), default=None,
                   help="instance processes talking directly (default 2; point-to-point "
                   "only)")
    q.add_argument("--topology", choices=("point-to-point", "forwarder", "mirror"),
                   default="point-to-point",
                   help="how the instances are connected: directly (default), through "
                   "forwarders, or to a mirrored pair whose principal is killed and whose "
                   "mirror takes over")
    q.add_argument("--forwarders", type=int, choices=(1, 2), default=1,
                   help="forwarders in a line between the two ends (forwarder topology; "
                   "default 1)")
    q.add_argument("--messages", type=int, default=1000, help="in all (default 1000)")
    q.add_argument("--duration", type=float, default=60.0,
                   help="seconds of nemesis; sending is paced over 70%% of it (default 60)")
    q.add_argument("--conversations", type=int, default=10, help="per sender->target link")
    q.add_argument("--kills", type=int, default=2, help="SIGKILLs of each instance")
    q.add_argument("--early-kills", type=int, default=0,
                   help="the nemesis kills from the first second: each instance's file is "
                   "first made by a process SIGKILLed inside its connect(), and each "
                   "instance is SIGKILLed this many times more in its first 2.5 s (its "
                   "start: connect(), the endpoint) (default 0)")
    q.add_argument("--pauses", type=int, default=1, help="SIGSTOP/SIGCONT of each instance")
    q.add_argument("--workers", type=int, default=0,
                   help="receiving workers per queue, each a process: RECEIVE one message, "
                   "process it for --processing seconds inside the transaction, record it, "
                   "COMMIT, holding the group; the nemesis SIGKILLs them too "
                   "(--worker-kills). Default 0: no one receives, the queue is the record")
    q.add_argument("--worker-kills", type=int, default=4,
                   help="SIGKILLs of each receiving instance's workers, one picked at random "
                   "each time (with --workers; default 4)")
    q.add_argument("--processing", type=float, default=0.02,
                   help="seconds a worker spends on each message inside its transaction "
                   "(default 0.02)")
    q.add_argument("--faults", default="all",
                   help=f"comma-separated, 'all' or 'none': {','.join(FAULTS)}. A frame fault "
                   "(drop, duplicate, reorder, flip) runs the endpoints without TLS")
    q.add_argument("--fault-direction", choices=("both", "up", "down"), default="both",
                   help="faults on the bytes toward the listening instance (up), back "
                   "(down) or both (default)")
    q.add_argument("--fault-rate", type=float, default=1.0,
                   help="multiply the faults' probabilities")
    q.add_argument("--max-body", type=int, default=2 * 2**20,
                   help="largest body in bytes (default 2 MiB)")
    q.add_argument("--big-every", type=int, default=100,
                   help="about one message in N is large (max-body/8 .. max-body)")
    q.add_argument("--fragment-size", type=int, default=64 * 1024,
                   help="bytes per fragment a large message is cut into (default 65536)")
    q.add_argument("--batch", type=int, default=20, help="messages per sending transaction")
    q.add_argument("--retry-scale", type=float, default=0.05,
                   help="multiply the waits before an unacknowledged message is sent again "
                   "(default 0.05: 20 times sooner than a real instance)")
    q.add_argument("--drain-timeout", type=float, default=300.0,
                   help="seconds to wait, after the faults heal, for every message to be sent "
                   "and acknowledged (default 300)")
    q.add_argument("--dir", default=None, help="run directory (default: a new temporary one)")
    q.add_argument("--json", action="store_true", help="print the report as JSON")

    q = sub_command("check", "run the checker again over a run directory whose processes "
                    "are stopped (an interrupted run, say)", cmd_check)
    q.add_argument("dir", help="the run directory of an earlier 'chaos run' (its --dir)")

    q = sub_command("crash", "SIGKILL a process working on an instance file at random "
                    "instants from its first statement on (inside connect() of a new file, "
                    "inside an upgrade from each earlier schema version, among routes, "
                    "databases, sends and receives), and check after each kill that the file "
                    "opens and holds exactly what the process said it committed. Exit 1 on "
                    "any violation.", cmd_crash)
    q.add_argument("--rounds", type=int, default=300, help="kills (default 300)")
    q.add_argument("--seed", type=int, default=1,
                   help="seed of the starts, the kills' instants and the work (default 1)")
    q.add_argument("--dir", default=None, help="directory of the files (default: a new "
                   "temporary one, removed after a valid run)")
    q.add_argument("--json", action="store_true", help="print the report as JSON")

    q = sub_command("fuzz", "feed the wire decoders arbitrary and mutated valid inputs: only "
                    "FrameError may come out (0 crashes, 0 hangs)", cmd_fuzz)
    q.add_argument("--target", default="all",
                   help="frames, handshake, ack, notice or all (default)")
    q.add_argument("--count", type=int, default=100_000, help="inputs per target")
    q.add_argument("--seed", type=int, default=0,
                   help="seed of the input generator (default 0)")
    q.add_argument("--json", action="store_true", help="print the results as JSON")


def cmd_run(args: argparse.Namespace) -> int:
    from pybroker.devtools.chaos import runner, topology
    from pybroker.devtools.chaos.proxy import FAULTS

    if args.faults == "all":
        faults = FAULTS
    elif args.faults == "none":
        faults = ()
    else:
        faults = tuple(f.strip() for f in args.faults.split(",") if f.strip())
        unknown = set(faults) - set(FAULTS)
        if unknown:
            raise args.usage_error(f"unknown fault(s) {sorted(unknown)}; choose from "
                                   f"{', '.join(FAULTS)}")
    if args.messages < 0 or args.duration <= 0 or args.conversations < 1:
        raise args.usage_error("--messages >= 0, --duration > 0 and --conversations >= 1")
    if args.early_kills < 0 or args.kills < 0 or args.workers < 0 or args.worker_kills < 0:
        raise args.usage_error("--kills, --early-kills, --workers and --worker-kills are "
                               "counts: 0 or more")
    if not 0 <= args.processing <= 60:
        raise args.usage_error("--processing is seconds, from 0 to 60")
    if args.instances is not None and args.topology != "point-to-point":
        raise args.usage_error(f"--instances is for the point-to-point topology; the "
                               f"{args.topology} topology has its own instances (see --help)")
    if args.forwarders != 1 and args.topology != "forwarder":
        raise args.usage_error("--forwarders is for --topology forwarder")
    options = runner.Options(
        seed=args.seed, instances=args.instances or 2, messages=args.messages,
        topology=args.topology, forwarders=args.forwarders,
        duration=args.duration, conversations=args.conversations, kills=args.kills,
        early_kills=args.early_kills, workers=args.workers, worker_kills=args.worker_kills,
        processing=args.processing,
        pauses=args.pauses, faults=faults, fault_rate=args.fault_rate,
        fault_direction=args.fault_direction,
        max_body=args.max_body, big_every=args.big_every, fragment_size=args.fragment_size,
        batch=args.batch, retry_scale=args.retry_scale, drain_timeout=args.drain_timeout,
        directory=args.dir)
    import signal

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt  # the run stops its processes on the way out

    signal.signal(signal.SIGTERM, interrupted)
    report = topology.run(options, log=(lambda _t: None) if args.json else None)
    print(json.dumps(report, indent=1) if args.json else runner.summary(report))
    return 0 if report["verdict"]["valid"] else 1


def cmd_check(args: argparse.Namespace) -> int:
    from pybroker.devtools.chaos import topology

    verdict = topology.check_directory(args.dir)
    print(json.dumps(verdict, indent=1))
    return 0 if verdict["valid"] else 1


def cmd_crash(args: argparse.Namespace) -> int:
    import shutil
    import tempfile
    from pathlib import Path

    from pybroker.devtools.chaos import crash

    if args.rounds < 1:
        raise args.usage_error("--rounds must be at least 1")
    directory = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="pybroker-crash-"))
    log = None if args.json else (lambda text: print(text, flush=True))
    report = crash.run(args.rounds, args.seed, directory, log=log).as_dict()
    report["directory"] = str(directory)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"{report['rounds']} kills ({report['killed_in_open']} inside connect()), "
              f"{report['operations_done']} operations committed, "
              f"{report['recovered_logs']} logs DuckDB would not replay directly, "
              f"{len(report['violations'])} violations in {report['seconds']} s: "
              + ("VALID" if report["valid"] else "INVALID"))
        for violation in report["violations"]:
            print(f"  ! {violation}")
    if report["valid"] and not args.dir:
        shutil.rmtree(directory, ignore_errors=True)
    return 0 if report["valid"] else 1


def cmd_fuzz(args: argparse.Namespace) -> int:
    from pybroker.devtools.fuzz import wire as fuzz_wire

    names = list(fuzz_wire.TARGETS) if args.target == "all" else [args.target]
    for name in names:
        if name not in fuzz_wire.TARGETS:
            raise args.usage_error(f"unknown target {name!r}; choose from "
                                   f"{', '.join(fuzz_wire.TARGETS)} or all")
    failed = False
    results = []
    for name in names:
        result = fuzz_wire.run(name, args.count, args.seed)
        results.append(result)
        failed |= bool(result["crashes"])
        if not args.json:
            print(f"{name}: {result['inputs']} inputs in {result['seconds']} s, "
                  f"{result['decoded']} accepted, {result['rejected']} refused, "
                  f"{result['crashes']} crashes, slowest {result['slowest_ms']} ms",
                  flush=True)
            for c in result["examples"]:
                print(f"  ! {c}", file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=1))
    return 1 if failed else 0
