"""The ``pybroker`` command: a DBA's view of an instance file.

Exit codes: 0 success, 2 usage error (argparse's convention), 1 any other error, with one
line on stderr that says what was wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pybroker.errors import BrokerError
from pybroker.instance import Instance, connect
from pybroker.routing.decision import STEP_TEXT, RouteDecision

PROG = "pybroker"


class UsageError(Exception):
    """A command line that parses but does not make sense: exit code 2."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        getattr(args, "parser", parser).print_help(sys.stderr)
        return 2
    try:
        return int(args.handler(args) or 0)
    except UsageError as exc:
        print(f"{PROG}: usage error: {exc}", file=sys.stderr)
        return 2
    except BrokerError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="SQL Server Service Broker routing with its state in a DuckDB file.",
    )
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    def command(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(handler=handler)
        return p

    p = command("demo", "build the seven routing examples of the seeds and explain each "
                "decision, then run a conversation between two databases and show its "
                "endpoints, queues and transmission queue", cmd_demo)
    p.add_argument("file", nargs="?", type=Path,
                   help="a new instance file to keep the last example built in, with the "
                   "conversation's databases Shop and Warehouse (default: all in memory)")
    p.add_argument("--example", type=int, choices=range(1, 8), metavar="N",
                   help="run only example N (1-7), without the conversation")

    p = command("create-database", "create a database (its own broker identifier and "
                "AutoCreatedLocal route); creates the file if needed", cmd_create_database)
    p.add_argument("file", type=Path)
    p.add_argument("name")
    p.add_argument("--broker-instance", help="the database's GUID (default: a new one)")

    p = command("create-queue", "create a queue in a database", cmd_create_queue)
    _file_and_database(p)
    p.add_argument("name")
    p.add_argument("--status", choices=("on", "off"), default="on")

    p = command("create-service", "create a service bound to a queue", cmd_create_service)
    _file_and_database(p)
    p.add_argument("name")
    p.add_argument("--queue", required=True)

    p = command("sql", "run T-SQL route DDL (CREATE/ALTER/DROP ROUTE) in a database, as one "
                "all-or-nothing batch", cmd_sql)
    _file_and_database(p)
    p.add_argument("tsql", help="the statements; '-' reads them from stdin")

    p = command("databases", "list the databases with their broker identifiers", cmd_databases)
    p.add_argument("file", type=Path)
    p.add_argument("--json", action="store_true")

    p = command("routes", "list routes (sys.routes), of one database or all", cmd_routes)
    p.add_argument("file", type=Path)
    p.add_argument("-d", "--database", help="only this database's routing table")
    p.add_argument("--json", action="store_true")

    p = command("route", "decide where a conversation goes", cmd_route)
    p.add_argument("file", type=Path)
    p.add_argument("service", help="the service name the conversation is for")
    p.add_argument("--origin", required=True,
                   help="database the conversation was begun in, or 'outside'")
    p.add_argument("--broker-instance", help="the broker identifier the conversation names")
    p.add_argument("--explain", action="store_true", help="show every step and its candidates")
    p.add_argument("--json", action="store_true")

    p = command("forwarding", "show or set message forwarding (R7.3)", cmd_forwarding)
    p.add_argument("file", type=Path)
    p.add_argument("state", nargs="?", choices=("on", "off"))
    p.add_argument("--size-mb", type=int, help="memory bound for forwarded messages, in MB")

    from pybroker.pipeline.cli import add_commands

    add_commands(sub, command, UsageError)

    from pybroker.wire.cli import add_commands as add_wire_commands

    add_wire_commands(sub, command, UsageError)

    from pybroker.chaos.cli import add_commands as add_chaos_commands

    add_chaos_commands(sub, command, UsageError)

    p = command("bench", "run a benchmark (results belong in README's Performance section)",
                cmd_bench)
    p.add_argument("name", choices=("routing", "messaging", "pipeline"))
    p.add_argument("--repeat", type=int, default=None,
                   help="runs to take the median of (default: 5, 3 for pipeline)")
    p.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    p.add_argument("--json", action="store_true")
    return parser


def _file_and_database(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path)
    p.add_argument("-d", "--database", required=True, help="the database to act in")


def _open_existing(path: Path) -> Instance:
    if not path.exists():
        raise BrokerError(
            f"no instance file at {path}; create one with: {PROG} create-database {path} NAME"
        )
    return connect(path)


# -- commands ----------------------------------------------------------------------------


def cmd_create_database(args: argparse.Namespace) -> int:
    with connect(args.file) as inst:
        db = inst.create_database(args.name, broker_instance=args.broker_instance)
        print(f"created database {db.name} (broker_instance {db.broker_instance})")
    return 0


def cmd_create_queue(args: argparse.Namespace) -> int:
    with _open_existing(args.file) as inst:
        inst.database(args.database).create_queue(args.name, status=args.status == "on")
        print(f"created queue {args.name} in {args.database} (STATUS = {args.status.upper()})")
    return 0


def cmd_create_service(args: argparse.Namespace) -> int:
    with _open_existing(args.file) as inst:
        inst.database(args.database).create_service(args.name, queue=args.queue)
        print(f"created service {args.name} on queue {args.queue} in {args.database}")
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.tsql == "-" else args.tsql
    with _open_existing(args.file) as inst:
        inst.database(args.database).execute(text)
        print(f"ok: the batch ran in {args.database}")
    return 0


def cmd_databases(args: argparse.Namespace) -> int:
    with _open_existing(args.file) as inst:
        rows = [{"name": d.name, "database_id": d.database_id,
                 "broker_instance": d.broker_instance} for d in inst.databases()]
    _print_rows(rows, args.json)
    return 0


def cmd_routes(args: argparse.Namespace) -> int:
    with _open_existing(args.file) as inst:
        databases = [inst.database(args.database)] if args.database else inst.databases()
        rows = []
        for db in databases:
            for r in db.routes():
                row = {"database": db.name, **asdict(r)}
                row["lifetime"] = None if r.lifetime is None else r.lifetime.isoformat() + "Z"
                rows.append(row)
    _print_rows(rows, args.json)
    return 0


def cmd_route(args: argparse.Namespace) -> int:
    with _open_existing(args.file) as inst:
        decision = inst.route(
            args.service, broker_instance=args.broker_instance, origin=args.origin
        )
        steps = (
            inst.explain(args.service, broker_instance=args.broker_instance, origin=args.origin)
            if args.explain else []
        )
    if args.json:
        out: dict[str, Any] = decision_dict(decision)
        if args.explain:
            out["explain"] = [asdict(s) for s in steps]
        print(json.dumps(out, indent=2))
        return 0
    print(describe(decision))
    print(f"  why: {why(decision)}")
    if args.explain:
        for s in steps:
            candidates = ", ".join(s.candidates) if s.candidates else "-"
            print(f"  {s.step:<5} {s.result:<18} {s.description}  [{candidates}]")
    return 0


def cmd_forwarding(args: argparse.Namespace) -> int:
    with _open_existing(args.file) as inst:
        if args.state is not None:
            inst.forwarding = args.state == "on"
        if args.size_mb is not None:
            inst.forwarding_size_mb = args.size_mb
        state = "on" if inst.forwarding else "off"
        print(f"forwarding {state} (memory bound {inst.forwarding_size_mb} MB)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from pybroker.examples import (
        build_example,
        check_case,
        decide_case,
        load_examples,
        run_conversation,
    )

    if args.file is not None and args.file.exists():
        raise UsageError(f"{args.file} already exists; the demo writes only to a new file")
    examples = [e for e in load_examples() if args.example in (None, e.number)]
    failures = 0
    for index, example in enumerate(examples):
        keep = args.file is not None and index == len(examples) - 1
        with connect(args.file if keep else None) as inst:
            build_example(inst, example)
            title = example.id.split("-", 2)[2].replace("-", " ")
            print(f"Example {example.number}: {title}")
            print(f"  forwarding {'on' if example.forwarding else 'off'}; routes: "
                  + "; ".join(f"{db}: " + ", ".join(r["name"] for r in routes)
                              for db, routes in example.routes.items()))
            for case in example.cases:
                decision = decide_case(inst, example, case)
                problems = check_case(case, decision)
                failures += bool(problems)
                forwarding = "" if case.forwarding is None else (
                    f" (forwarding {'on' if case.forwarding else 'off'})")
                broker = f" [broker {case.broker_instance}]" if case.broker_instance else ""
                print(f"  {case.origin} -> {case.service}{broker}{forwarding}")
                print(f"    {describe(decision)}")
                print(f"    why: {why(decision)}")
                verdict = "as the seeds require" if not problems else "; ".join(problems)
                print(f"    {'ok' if not problems else 'MISMATCH'}: {verdict}")
            print()
            if args.example is None and index == len(examples) - 1:
                run_conversation(inst)  # issue 3: in the last example's instance
                print()
    if args.file is not None:
        print(f"The instance of example {examples[-1].number} is kept in {args.file}; try:")
        print(f"  duckdb -readonly {args.file} \"SELECT * FROM route_decision("
              f"'{examples[-1].cases[0].origin}', '{examples[-1].cases[0].service}')\"")
        if args.example is None:
            print(f"  duckdb -readonly {args.file} \"SELECT database_name, service_name, "
                  "state_desc, far_service FROM sys.conversation_endpoints\"")
    if failures:
        print(f"{PROG}: error: {failures} case(s) differ from the seeds", file=sys.stderr)
        return 1
    total = sum(len(e.cases) for e in examples)
    print(f"All {total} conversations of {len(examples)} example(s) routed as the seeds require.")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.repeat is None:
        args.repeat = 3 if args.name == "pipeline" else 5
    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    from pybroker.bench import messaging, pipeline, routing

    bench = {"routing": routing, "messaging": messaging, "pipeline": pipeline}[args.name]
    report = bench.run(repeat=args.repeat, quick=args.quick)
    print(json.dumps(report, indent=2) if args.json else bench.format_report(report))
    return 0


# -- output ------------------------------------------------------------------------------


def decision_dict(decision: RouteDecision) -> dict[str, Any]:
    out = asdict(decision)
    out["trace"] = [asdict(s) for s in decision.trace]
    return out


def describe(decision: RouteDecision) -> str:
    route = decision.route or "(no route)"
    if decision.outcome == "deliver":
        return f"deliver via {route} to database {decision.database}"
    if decision.outcome == "send":
        mirror = f" (mirror {decision.mirror_address})" if decision.mirror_address else ""
        return f"send via {route} to {decision.address}{mirror}"
    if decision.outcome == "delay":
        return "DELAYED: routed again after a time-out"
    return f"drop{'' if decision.route is None else f' (route {route})'}: the sender retries"


def why(decision: RouteDecision) -> str:
    decisive = [s for s in decision.trace if s.result not in ("no route", "not applicable",
                                                               "no candidate fits")]
    parts = [f"{s.step} {STEP_TEXT.get(s.step, '')} -> {s.result}" for s in decisive]
    return "; ".join(parts)


def _print_rows(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        print("(none)")
        return
    columns = list(rows[0])
    cells = [[("NULL" if row[c] is None else str(row[c])) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
