"""``pybroker trace HANDLE TARGET...``: one conversation followed across the instances
named (pybroker/apps/diagnose/trace.py; pybroker/docs/diagnose.md, "pybroker trace").

Exit codes: 0 traced, 2 a target that cannot be read, a handle that no instance named
holds, or a usage error (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from pybroker.apps.diagnose.targets import TargetError
from pybroker.apps.diagnose.trace import UnknownConversationError, timeline_text, trace
from pybroker.cli.network_targets import add_target_arguments, parse_tokens, print_target_error
from pybroker.errors import InvalidArgumentError

# The version of the JSON form (pybroker/docs/diagnose.md describes it).
JSON_SCHEMA = 1


def add_commands(sub: Any, command: Any, usage_error: type[Exception]) -> None:
    p = command("trace", "follow one conversation across the instances named: where each "
                "message is (a transmission queue and its status, a forwarder's memory, the "
                "target's queue, received), what was acknowledged, how each hop routes it "
                "and the broker events that touched it, as one timeline", cmd_trace)
    p.add_argument("handle", metavar="HANDLE", help="a conversation_handle of either side, "
                   "or the conversation_id")
    add_target_arguments(p)
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (a timeline, the default) or json (every part, for programs)")
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.set_defaults(usage_error=usage_error)


def cmd_trace(args: argparse.Namespace) -> int:
    if not args.targets:
        raise args.usage_error("name at least one TARGET after the HANDLE (an instance file, "
                               "a snapshot or pybroker://HOST:PORT)")
    try:
        result = trace(args.handle, args.targets, tokens=parse_tokens(args))
    except InvalidArgumentError as exc:
        raise args.usage_error(str(exc)) from None
    except (TargetError, UnknownConversationError) as exc:
        return print_target_error(exc)
    if args.json or args.format == "json":
        print(json.dumps({"schema": JSON_SCHEMA, "targets": list(args.targets),
                          **result.as_dict()}, indent=2))
    else:
        print(timeline_text(result))
    return 0
