"""The ``pybroker`` command: a DBA's view of an instance file.

Exit codes: 0 success, 2 usage error (argparse's convention), 1 any other error, with one
line on stderr that says what was wrong. When the reader of stdout goes away (``pybroker
demo | head -5``) the command stops quietly with exit code 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pybroker.api.instance import Instance
from pybroker.api.served.client import URL_SCHEME
from pybroker.cli.support import (
    INSTANCE_FILE_HELP,
    JSON_HELP,
    PROG,
    UsageError,
    open_existing,
    print_rows,
    read_tsql,
)
from pybroker.core.routing.decision import STEP_TEXT, RouteDecision
from pybroker.errors import BrokerError, CatalogInTsqlError, MasterOnlyError
from pybroker.server.connecting import connect  # a served file: through its server


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error (the usage itself is in ``--help``)."""

    def error(self, message: str):  # type: ignore[override]
        _complain(f"usage error: {_users_words(message)} (see: {self.prog} --help)")
        sys.exit(2)


# argparse names a value of the wrong type by its Python type: "invalid int value: 'x'"
_INVALID_VALUE = re.compile(r"invalid (int|float) value: (.*)$")
_KIND_OF_VALUE = {"int": "a whole number", "float": "a number"}


def _users_words(message: str) -> str:
    return _INVALID_VALUE.sub(
        lambda m: f"{m.group(2)} is not {_KIND_OF_VALUE[m.group(1)]}", message)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        # The reader went away (| head): stop quietly. Point stdout at /dev/null so the
        # interpreter's own flush at exit finds nothing to complain about.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        getattr(args, "parser", parser).print_help(sys.stderr)
        return 2
    try:
        return int(args.handler(args) or 0)
    except BrokenPipeError:
        raise
    except UsageError as exc:
        _complain(f"usage error: {exc}")
        return 2
    except BrokerError as exc:
        _complain(f"error: {exc}")
        return 1
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        where = f": {exc.filename}" if exc.filename else ""
        _complain(f"error: {reason}{where}")
        return 1
    except KeyboardInterrupt:
        _complain("interrupted")
        return 1
    except Exception as exc:  # a bug: still one line, never a traceback
        _complain(f"error: unexpected {type(exc).__name__} (a bug in pybroker; please report "
                  f"the command line): {exc}")
        return 1


def _complain(message: str) -> None:
    """One line on stderr, whatever the message holds (newlines, surrogates)."""
    line = " ".join(str(message).split())
    stream = sys.stderr
    data = f"{PROG}: {line}\n".encode(stream.encoding or "utf-8", "backslashreplace")
    stream.flush()
    stream.buffer.write(data) if hasattr(stream, "buffer") else stream.write(
        data.decode(stream.encoding or "utf-8"))
    stream.flush()


def build_parser() -> argparse.ArgumentParser:
    from pybroker import __version__

    parser = _Parser(
        prog=PROG,
        description="SQL Server Service Broker routing with its state in a DuckDB file.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    def command(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(handler=handler)
        return p

    p = command("demo", "build seven example routing tables, route conversations through "
                "them and explain each decision, checking it against the expected one; then "
                "run a conversation between two databases and show its endpoints, queues and "
                "transmission queue, then a dialog between two instances over TCP (each in "
                "its own file in a temporary directory); last, example 6 (a forwarder), "
                "dynamic routing and example 3 (a mirrored pair) across instance processes",
                cmd_demo)
    p.add_argument("file", nargs="?", type=Path,
                   help="a new instance file to keep the last example built in, with the "
                   "conversation's databases Shop and Warehouse (default: all in memory)")
    p.add_argument("--example", type=int, choices=range(1, 8), metavar="N",
                   help="run only example N (1-7), without the conversation; for 6 and 3 "
                   "also its run across instance processes")
    p.add_argument("--network", type=Path, metavar="DIR",
                   help="instead, write the network of the forwarding part (A -> forwarder "
                   "F -> B, example 6) as instance files A.duckdb, F.duckdb and B.duckdb in "
                   "DIR, to read with pybroker diagnose and draw with pybroker topology")
    p.add_argument("--first-port", type=int, default=4022, metavar="PORT",
                   help="with --network: the port A's endpoint is defined on; F and B take "
                   "the next two (default 4022; free while the files are written)")

    p = command("create-database", "create a database (its own broker identifier and "
                "AutoCreatedLocal route); creates the file if needed", cmd_create_database)
    p.add_argument("file", type=Path, help="the instance file (a DuckDB database); created "
                   "if there is none")
    p.add_argument("name", help="the new database's name")
    p.add_argument("--broker-instance", help="the database's GUID (default: a new one)")

    p = command("create-queue", "create a queue in a database", cmd_create_queue)
    _file_and_database(p)
    p.add_argument("name", help="the new queue's name")
    p.add_argument("--status", choices=("on", "off"), default="on",
                   help="off: RECEIVE from the queue is refused and messages for it wait "
                   "in the sender's transmission queue (default on)")

    p = command("create-service", "create a service bound to a queue; without --contract "
                "it accepts the DEFAULT contract, so that `send` to it works as it is (T-SQL's "
                "CREATE SERVICE and the Python API's create_service accept only the contracts "
                "they list, none: it only begins dialogs, as --initiator-only makes it here)",
                cmd_create_service)
    _file_and_database(p)
    p.add_argument("name", help="the new service's name")
    p.add_argument("--queue", required=True, help="the queue the service's messages go to")
    accepts = p.add_mutually_exclusive_group()
    accepts.add_argument("--contract", action="append", metavar="NAME", dest="contracts",
                         help="a contract the service accepts dialogs on, as their target "
                         "(repeatable; it must exist, DEFAULT always does)")
    accepts.add_argument("--initiator-only", action="store_true",
                         help="accept no contract: the service only begins dialogs")

    from pybroker.cli.routes import add_commands as add_route_commands

    add_route_commands(sub, command, UsageError)

    p = command("sql", "run a T-SQL batch in a database: DDL as one all-or-nothing batch "
                "(CREATE/ALTER/DROP ROUTE, MESSAGE TYPE, QUEUE and SERVICE, CREATE/DROP "
                "CONTRACT), and conversations (DECLARE, BEGIN DIALOG, SEND, RECEIVE, WAITFOR, END "
                "CONVERSATION, BEGIN/COMMIT TRANSACTION, ...), printing what RECEIVE and "
                "SELECT return", cmd_sql)
    p.add_argument("file", type=_file_or_address, help=INSTANCE_FILE_HELP + ", or a "
                   "server's pybroker://HOST:PORT (with --token)")
    p.add_argument("--token", help="the token of a pybroker://HOST:PORT server (it prints "
                   "it and keeps it in FILE.token)")
    p.add_argument("-d", "--database", default="master",
                   help="the database the script begins in (default master, as a login's "
                   "session does); USE switches it")
    p.add_argument("tsql", help="the statements; '-' reads them from stdin (UTF-8, or "
                   "UTF-16 with a byte order mark); a line holding only GO ends a batch, "
                   "as in sqlcmd")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print the result sets as JSON")
    shown.add_argument("--csv", action="store_true", help="print the result sets as CSV")

    from pybroker.cli.messaging import add_commands as add_messaging_commands

    add_messaging_commands(sub, command, UsageError)

    p = command("databases", "list the databases with their broker identifiers", cmd_databases)
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("--json", action="store_true", help=JSON_HELP)

    p = command("routes", "list routes (sys.routes), of one database or all", cmd_routes)
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("-d", "--database", help="only this database's routing table")
    p.add_argument("--json", action="store_true", help=JSON_HELP)

    from pybroker.cli.listing import add_commands as add_listing_commands

    add_listing_commands(sub, command, UsageError)

    p = command("route", "decide where a conversation goes", cmd_route)
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("service", help="the service name the conversation is for")
    p.add_argument("--origin", required=True,
                   help="database the conversation was begun in, or 'outside'")
    p.add_argument("--broker-instance", help="the broker identifier the conversation names")
    p.add_argument("--explain", action="store_true", help="show every step and its candidates")
    p.add_argument("--json", action="store_true", help=JSON_HELP)

    p = command("forwarding", "show or set message forwarding: whether this instance passes "
                "on messages for services it does not hold, and how much memory those "
                "messages may take", cmd_forwarding)
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("state", nargs="?", choices=("on", "off"),
                   help="turn forwarding on or off (without it: show the setting)")
    p.add_argument("--size-mb", type=int, help="memory bound for forwarded messages, in MB")

    from pybroker.cli.pipeline import add_commands

    add_commands(sub, command, UsageError)

    from pybroker.cli.serve import add_commands as add_wire_commands

    add_wire_commands(sub, command, UsageError)

    from pybroker.cli.analyst import add_commands as add_analyst_commands

    add_analyst_commands(sub, command, UsageError)

    from pybroker.cli.chaos import add_commands as add_chaos_commands

    add_chaos_commands(sub, command, UsageError)

    from pybroker.cli.explain import add_commands as add_explain_commands

    add_explain_commands(sub, command, UsageError)

    from pybroker.cli.diagnose import add_commands as add_diagnose_commands

    add_diagnose_commands(sub, command, UsageError)

    p = command("bench", "measure how fast this machine routes, sends and receives, runs "
                "the pipeline, crosses the wire between two instances or serves client "
                "processes", cmd_bench)
    p.add_argument("name", choices=("routing", "messaging", "pipeline", "wire", "serve",
                                     "diagnose", "metrics"),
                   help="what to measure: routing decisions, messaging in one instance, the "
                   "pipeline's jobs, messages between two instance processes over TCP, "
                   "client processes of one served instance file, diagnose over three "
                   "large instance files, or one /metrics scrape of a large instance")
    p.add_argument("--repeat", type=int, default=None,
                   help="runs to take the median of (default: 5, 3 for pipeline, wire, serve "
                   "and diagnose)")
    p.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    p.add_argument("--idle-conversations", type=int, default=None, metavar="N",
                   help="messaging: conversations of the idle case (default 100,000, "
                        "5,000 with --quick; 0 skips it)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.add_argument("--retry-scale", type=float, default=1.0,
                   help="wire: multiply the two instances' waits before an unacknowledged "
                   "message is sent again by this")
    p.add_argument("--profile", type=Path, metavar="DIR",
                   help="wire: run the instance processes under cProfile, leaving "
                   "sender.prof, receiver.prof and forwarder.prof in DIR")
    p.add_argument("--body-mb", type=float, default=None, metavar="N",
                   help="wire: instead of the usual cases, send one body of N MB (10^6 bytes) "
                   "and report each process's peak memory growth against the body's size")

    from pybroker.devtools.fuzz.targets import TARGETS

    p = command("fuzz", "feed a decoder generated inputs and count crashes and hangs "
                "(anything but a clean BrokerError refusal)", cmd_fuzz)
    p.add_argument("target", choices=sorted(TARGETS), help="what to feed: "
                   + "; ".join(f"{n}: {t.description}" for n, t in sorted(TARGETS.items())))
    p.add_argument("--count", type=int, default=100_000, help="inputs (default 100,000)")
    p.add_argument("--seed", type=int, default=1, help="seed of the generator (default 1)")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds after which one input counts as a hang (default 5)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    return parser


def _file_and_database(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("-d", "--database", required=True, help="the database to act in")


# -- commands ----------------------------------------------------------------------------


def cmd_create_database(args: argparse.Namespace) -> int:
    with connect(args.file) as inst:
        db = inst.create_database(args.name, broker_instance=args.broker_instance)
        print(f"created database {db.name} (broker_instance {db.broker_instance})")
    return 0


def cmd_create_queue(args: argparse.Namespace) -> int:
    with open_existing(args.file) as inst:
        inst.database(args.database).create_queue(args.name, status=args.status == "on")
        print(f"created queue {args.name} in {args.database} (STATUS = {args.status.upper()})")
    return 0


def cmd_create_service(args: argparse.Namespace) -> int:
    contracts = [] if args.initiator_only else args.contracts or ["DEFAULT"]
    with open_existing(args.file) as inst:
        service = inst.database(args.database).create_service(
            args.name, queue=args.queue, contracts=contracts)
        accepts = (f"accepts {', '.join(service.contracts)}" if service.contracts
                   else "only begins dialogs")
        print(f"created service {args.name} on queue {args.queue} in {args.database} "
              f"({accepts})")
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    text = read_tsql(args.tsql)
    from pybroker.cli.messaging import print_messages, print_result_sets
    from pybroker.core.tsql.batches import parse_batches

    def run_in_master(exc: MasterOnlyError) -> MasterOnlyError:
        return exc.with_hint(f"run it with -d master: {PROG} sql {args.file} -d master ...")

    try:
        # parsed before the file is opened for writing (which rewrites its views and
        # macros): a batch that is not understood leaves the file's bytes as they were
        parse_batches(text, master=args.database == "master")
    except MasterOnlyError as exc:
        raise run_in_master(exc) from None
    except CatalogInTsqlError as exc:
        raise exc.with_hint(_query_instead(args.file, text)) from None
    if isinstance(args.file, str):  # a server's TCP address
        opened = connect(args.file, token=args.token)
    elif args.token is not None:
        raise UsageError("--token is for a pybroker://HOST:PORT server, not a file")
    else:
        opened = open_existing(args.file)
    with opened as inst:
        # Internal activation runs while the script does (C8), as in the SQL Server it was
        # written for: a queue's procedure starts when messages arrive for it. A served
        # file's server runs its activation already.
        if isinstance(inst, Instance):
            inst.start_activation()
        try:
            results = inst.database(args.database).execute(text)
        except MasterOnlyError as exc:  # the command line's way to run it in master
            raise run_in_master(exc) from None
        except BrokerError as exc:  # what the batch returned before it stopped is shown
            print_messages(getattr(exc, "results", []))
            if getattr(exc, "results", None):
                print_result_sets(exc.results, as_json=args.json, as_csv=args.csv)
            raise
        print_messages(results)
        if results or args.json or args.csv:
            print_result_sets(results, as_json=args.json, as_csv=args.csv)
        else:
            print(f"ok: the batch ran in {args.database}")
    return 0


def _file_or_address(text: str) -> Path | str:
    """An instance file, or a server's pybroker://HOST:PORT (as text: a Path would fold
    its //)."""
    return text if text.startswith(URL_SCHEME) else Path(text)


def _query_instead(file: Path | str, tsql: str) -> str:
    """How to read the catalog from the command line: the batch itself, when it is one
    short line, as a ``pybroker query`` of it."""
    single = tsql.strip().rstrip(";").strip()
    query = single if "\n" not in single and len(single) <= 120 else "SELECT ..."
    return (f"read the catalog with {PROG} query: {PROG} query {shlex.quote(str(file))} "
            f"{shlex.quote(query)}")


def cmd_databases(args: argparse.Namespace) -> int:
    with open_existing(args.file, read_only=True) as inst:
        rows = [{"name": d.name, "database_id": d.database_id,
                 "broker_instance": d.broker_instance} for d in inst.databases()]
    print_rows(rows, args.json)
    return 0


def cmd_routes(args: argparse.Namespace) -> int:
    with open_existing(args.file, read_only=True) as inst:
        databases = [inst.database(args.database)] if args.database else inst.databases()
        rows = []
        for db in databases:
            for r in db.routes():
                row = {"database": db.name, **asdict(r)}
                row["lifetime"] = None if r.lifetime is None else r.lifetime.isoformat() + "Z"
                rows.append(row)
    print_rows(rows, args.json)
    return 0


def cmd_route(args: argparse.Namespace) -> int:
    with open_existing(args.file, read_only=True) as inst:
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
        print(explain_table(steps))
    return 0


def explain_table(steps: Sequence[Any]) -> str:
    """The routing steps as aligned columns (step, result, candidates, what the step looks
    for), each as wide as its widest value, two spaces apart."""
    rows = [("step", "result", "candidates", "what the step looks for")]
    rows += [(s.step, s.result, ", ".join(s.candidates) if s.candidates else "-",
              s.description) for s in steps]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(
        "  " + "  ".join(v.ljust(w) for v, w in zip(row[:3], widths, strict=True))
        + f"  {row[3]}" for row in rows)


def cmd_forwarding(args: argparse.Namespace) -> int:
    changing = args.state is not None or args.size_mb is not None
    with open_existing(args.file, read_only=not changing) as inst:
        if args.state is not None:
            inst.forwarding = args.state == "on"
        if args.size_mb is not None:
            inst.forwarding_size_mb = args.size_mb
        state = "on" if inst.forwarding else "off"
        print(f"forwarding {state} (memory bound {inst.forwarding_size_mb} MB)")
    return 0


def _demo_network(args: argparse.Namespace) -> int:
    from pybroker.devtools.demos.network import build_network

    if args.file is not None or args.example is not None:
        raise UsageError("--network writes the network's files only: give it without FILE "
                         "and --example")
    if not 1 <= args.first_port <= 65533:
        raise UsageError(f"--first-port must be a port from 1 to 65533, not {args.first_port}")
    try:
        paths = build_network(args.network, [args.first_port + i for i in range(3)])
    except FileExistsError as exc:
        raise UsageError(str(exc)) from None
    names = " ".join(str(p) for p in paths)
    print(f"wrote {names}")
    print(f"  pybroker diagnose {names}")
    print(f"  pybroker topology {names} --out network.svg")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from pybroker.devtools.demos.routing import (
        build_example,
        check_case,
        decide_case,
        load_examples,
        run_conversation,
        run_two_instances,
    )
    from pybroker.devtools.demos.wire import EXAMPLE_PARTS, PARTS, run_across_processes

    if args.network is not None:
        return _demo_network(args)
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
                run_conversation(inst)  # in the last example's instance
                print()
    if args.example is None:
        run_two_instances()  # the wire: two instances, two files, TCP on 127.0.0.1
        print()
    parts = PARTS if args.example is None else [
        p for n, p in EXAMPLE_PARTS.items() if n == args.example]
    if parts:  # forwarding, dynamic routing, a mirrored pair: instances in processes
        run_across_processes(parts)
    if args.file is not None:
        print(f"The instance of example {examples[-1].number} is kept in {args.file}; try:")
        print(f"  duckdb -readonly {args.file} \"SELECT * FROM route_decision("
              f"'{examples[-1].cases[0].origin}', '{examples[-1].cases[0].service}')\"")
        if args.example is None:
            print(f"  duckdb -readonly {args.file} \"SELECT database_name, service_name, "
                  "state_desc, far_service FROM sys.conversation_endpoints\"")
    print(f"Step codes such as R2.3 are explained by: {PROG} explain R2.3 (a group: "
          f"{PROG} explain R2)")
    if failures:
        print(f"{PROG}: error: {failures} case(s) differ from the seeds", file=sys.stderr)
        return 1
    total = sum(len(e.cases) for e in examples)
    print(f"All {total} conversations of {len(examples)} example(s) routed as the seeds require.")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.repeat is None:
        args.repeat = 3 if args.name in ("pipeline", "wire", "serve", "diagnose") else 5
    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    from pybroker.devtools.bench import (
        diagnose,
        messaging,
        metrics,
        pipeline,
        routing,
        serve,
        wire,
    )

    bench: Any = {"routing": routing, "messaging": messaging, "pipeline": pipeline,
                  "wire": wire, "serve": serve, "diagnose": diagnose,
                  "metrics": metrics}[args.name]
    if args.body_mb is not None and args.name != "wire":
        raise UsageError("--body-mb goes with bench wire")
    if args.idle_conversations is not None and args.name != "messaging":
        raise UsageError("--idle-conversations goes with bench messaging")
    if args.name == "wire":
        if not args.retry_scale > 0:
            raise UsageError("--retry-scale must be a positive number")
        profile = None
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
            profile = str(args.profile.resolve())
        if args.body_mb is not None:
            from pybroker.devtools.bench import big_body

            if not 0 < args.body_mb <= 2147:
                raise UsageError("--body-mb must be more than 0 and at most 2147 (a "
                                 "message body is at most 2^31 - 1 bytes)")
            report = big_body.run(body_mb=args.body_mb, repeat=args.repeat,
                                  retry_scale=args.retry_scale)
            print(json.dumps(report, indent=2) if args.json
                  else big_body.format_report(report))
            return 0
        report = wire.run(repeat=args.repeat, quick=args.quick,
                          retry_scale=args.retry_scale, profile_dir=profile)
    elif args.idle_conversations is not None:
        if args.idle_conversations < 0:
            raise UsageError("--idle-conversations must be 0 or more")
        report = messaging.run(repeat=args.repeat, quick=args.quick,
                               idle_conversations=args.idle_conversations)
    else:
        report = bench.run(repeat=args.repeat, quick=args.quick)
    print(json.dumps(report, indent=2) if args.json else bench.format_report(report))
    return 0


def cmd_fuzz(args: argparse.Namespace) -> int:
    from pybroker.devtools.fuzz import targets as fuzz

    if args.count < 1:
        raise UsageError("--count must be at least 1")
    if not 0 < args.timeout < 3600:
        raise UsageError("--timeout must be more than 0 and less than 3600 seconds")
    report = fuzz.run(args.target, count=args.count, seed=args.seed, timeout=args.timeout,
                      progress=fuzz.print_progress)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(json.dumps(report.as_dict(), indent=2) if args.json else fuzz.format_report(report))
    if report.crashes or report.hangs:
        print(f"{PROG}: error: {report.crashes} crash(es) and {report.hangs} hang(s) in "
              f"{report.count:,} inputs", file=sys.stderr)
        return 1
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
