"""``pybroker diagnose TARGET...``: check a broker network before it fails (the rules of
pybroker/apps/diagnose/, every code in pybroker/docs/diagnose.md).

Exit codes: 0 no error finding, 1 at least one error finding, 2 a target that cannot be
read (one line on stderr saying which and why) or a usage error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any

from pybroker.apps.diagnose.findings import table
from pybroker.apps.diagnose.report import (
    DEFAULT_IDLE_AGE,
    DEFAULT_LEAK_AGE,
    DEFAULT_LEAK_COUNT,
    diagnose,
)
from pybroker.apps.diagnose.rules import RULES
from pybroker.apps.diagnose.targets import TargetError
from pybroker.cli.network_targets import add_target_arguments, parse_tokens, print_target_error
from pybroker.cli.topology import add_commands as add_topology_commands
from pybroker.cli.trace import add_commands as add_trace_commands

# The version of --json's form (pybroker/docs/diagnose.md describes it).
JSON_SCHEMA = 1


def add_commands(sub: Any, command: Any, usage_error: type[Exception]) -> None:
    p = command("diagnose", "check every instance named for what would make its messages "
                "fail: routes to services nobody hosts, no route back, contracts the "
                "target does not accept, queues OFF, activation that cannot start, "
                "endpoints and certificates, forwarding, forwarding loops, routes never "
                "chosen or expiring before their conversations, mirror partners, "
                "TRANSPORT names, conversation endpoints "
                "piling up, idle, ended first by their initiators, never ended by their "
                "targets, CLOSED and kept, or growing (--since), messages waiting long; "
                "each finding with its code, severity, what happens and the fix (codes: "
                "pybroker/docs/diagnose.md, or --rules). Exit code 1 when a finding is an "
                "error", cmd_diagnose)
    add_target_arguments(p)
    p.add_argument("--leak-age", type=float, default=DEFAULT_LEAK_AGE.total_seconds(),
                   metavar="SECONDS", help="a conversation endpoint older than this counts "
                   f"towards a leak (default {DEFAULT_LEAK_AGE.total_seconds():.0f})")
    p.add_argument("--leak-count", type=int, default=DEFAULT_LEAK_COUNT, metavar="N",
                   help="how many such endpoints in one state of one database are a leak "
                   f"(default {DEFAULT_LEAK_COUNT})")
    p.add_argument("--idle-age", type=float, default=DEFAULT_IDLE_AGE.total_seconds(),
                   metavar="SECONDS", help="a conversation endpoint with no traffic known for "
                   "longer than this is idle (default "
                   f"{DEFAULT_IDLE_AGE.total_seconds():.0f}, one day)")
    p.add_argument("--since", action="append", default=[], type=Path, metavar="SNAPSHOT",
                   help="an earlier reading (pybroker snapshot) of one of the targets: "
                   "report conversation endpoints and transmission queues that grew by "
                   "--leak-count or more since; repeatable, one per target")
    p.add_argument("--rules", action="store_true",
                   help="list every rule (code, severity, title) and stop")
    p.add_argument("--json", action="store_true",
                   help="print {\"schema\": 1, \"findings\": [...]} for programs")
    p.set_defaults(usage_error=usage_error)
    add_trace_commands(sub, command, usage_error)
    add_topology_commands(sub, command, usage_error)


def cmd_diagnose(args: argparse.Namespace) -> int:
    if args.rules:
        rows = [{"code": r.code, "severity": r.severity, "title": r.title} for r in RULES]
        if args.json:
            print(json.dumps({"schema": JSON_SCHEMA, "rules": rows}, indent=2))
        else:
            print("\n".join(f"{r.code}  {r.severity:<7}  {r.title}" for r in RULES))
        return 0
    if not args.targets:
        raise args.usage_error("name at least one TARGET (an instance file, a snapshot or "
                               "pybroker://HOST:PORT)")
    if not args.leak_age > 0 or not args.idle_age > 0 or args.leak_count < 1:
        raise args.usage_error("--leak-age and --idle-age must be more than 0 and "
                               "--leak-count at least 1")
    tokens = parse_tokens(args)
    try:
        findings = diagnose(args.targets, tokens=tokens,
                            leak_age=dt.timedelta(seconds=args.leak_age),
                            leak_count=args.leak_count, since=args.since,
                            idle_age=dt.timedelta(seconds=args.idle_age))
    except TargetError as exc:
        return print_target_error(exc)
    if args.json:
        print(json.dumps({"schema": JSON_SCHEMA, "targets": list(args.targets),
                          "findings": [f.as_dict() for f in findings]}, indent=2))
    else:
        print(table(findings))
    return 1 if any(f.severity == "error" for f in findings) else 0
