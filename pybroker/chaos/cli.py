"""``pybroker chaos run`` (the chaos soak) and ``pybroker chaos fuzz`` (the wire decoders'
fuzz runs)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_commands(sub: Any, command: Any, usage_error: type[Exception]) -> None:
    p = command("chaos", "prove exactly-once, in-order delivery under faults: 'chaos run' "
                "(instances as processes, a fault proxy, SIGKILLs, a checker) and "
                "'chaos fuzz' (the wire decoders)", None)
    p.set_defaults(parser=p)
    chaos = p.add_subparsers(title="chaos commands", metavar="WHAT")

    def sub_command(name: str, help_text: str, handler: Any) -> argparse.ArgumentParser:
        q = chaos.add_parser(name, help=help_text, description=help_text)
        q.set_defaults(handler=handler, usage_error=usage_error)
        return q

    from pybroker.chaos.proxy import FAULTS

    q = sub_command("run", "start 2 or 3 instances as processes with fault proxies between "
                    "them, send a workload while a nemesis faults, kills (SIGKILL) and "
                    "pauses them, heal, and check every conversation: nothing lost, "
                    "duplicated, reordered or unexpected. Exit 1 on any violation.", cmd_run)
    q.add_argument("--seed", type=int, default=1,
                   help="seed of the workload's and the faults' random choices; the same seed "
                   "makes the same choices (default 1)")
    q.add_argument("--instances", type=int, choices=(2, 3), default=2,
                   help="instance processes (default 2)")
    q.add_argument("--messages", type=int, default=1000, help="in all (default 1000)")
    q.add_argument("--duration", type=float, default=60.0,
                   help="seconds of nemesis; sending is paced over 70%% of it (default 60)")
    q.add_argument("--conversations", type=int, default=10, help="per sender->target link")
    q.add_argument("--kills", type=int, default=2, help="SIGKILLs of each instance")
    q.add_argument("--pauses", type=int, default=1, help="SIGSTOP/SIGCONT of each instance")
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

    q = sub_command("fuzz", "feed the wire decoders arbitrary and mutated valid inputs: only "
                    "FrameError may come out (0 crashes, 0 hangs)", cmd_fuzz)
    q.add_argument("--target", default="all",
                   help="frames, handshake, ack, notice or all (default)")
    q.add_argument("--count", type=int, default=100_000, help="inputs per target")
    q.add_argument("--seed", type=int, default=0,
                   help="seed of the input generator (default 0)")
    q.add_argument("--json", action="store_true", help="print the results as JSON")


def cmd_run(args: argparse.Namespace) -> int:
    from pybroker.chaos import runner
    from pybroker.chaos.proxy import FAULTS

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
    options = runner.Options(
        seed=args.seed, instances=args.instances, messages=args.messages,
        duration=args.duration, conversations=args.conversations, kills=args.kills,
        pauses=args.pauses, faults=faults, fault_rate=args.fault_rate,
        fault_direction=args.fault_direction,
        max_body=args.max_body, big_every=args.big_every, fragment_size=args.fragment_size,
        batch=args.batch, retry_scale=args.retry_scale, drain_timeout=args.drain_timeout,
        directory=args.dir)
    import signal

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt  # the run stops its processes on the way out

    signal.signal(signal.SIGTERM, interrupted)
    report = runner.run(options, log=(lambda _t: None) if args.json else None)
    print(json.dumps(report, indent=1) if args.json else runner.summary(report))
    return 0 if report["verdict"]["valid"] else 1


def cmd_check(args: argparse.Namespace) -> int:
    from pybroker.chaos import runner

    verdict = runner.check_directory(args.dir)
    print(json.dumps(verdict, indent=1))
    return 0 if verdict["valid"] else 1


def cmd_fuzz(args: argparse.Namespace) -> int:
    from pybroker.chaos import fuzz_wire

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
