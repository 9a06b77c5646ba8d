"""``pybroker topology TARGET...``: the network as a picture, in Graphviz DOT or Mermaid
text (pybroker/apps/diagnose/topology.py and drawing.py; pybroker/docs/diagnose.md).

A command of its own rather than ``diagnose --draw``: its output is a picture to keep in a
file or a README, not findings to act on, and its exit status says whether it was drawn
(0), not whether the network is healthy; the findings are drawn on it all the same.
Exit codes: 0 drawn, 2 a target that cannot be read or a usage error.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pybroker.apps.diagnose.drawing import dot, mermaid
from pybroker.apps.diagnose.targets import TargetError
from pybroker.apps.diagnose.topology import topology
from pybroker.cli.network_targets import add_target_arguments, parse_tokens, print_target_error

# An --out file's suffix says its form.
_SUFFIXES = {".dot": "dot", ".gv": "dot", ".mmd": "mermaid", ".mermaid": "mermaid"}


def add_commands(sub: Any, command: Any, usage_error: type[Exception]) -> None:
    p = command("topology", "draw the instances named: their broker endpoints, databases "
                "and services, routes as arrows (LOCAL, network, forwarded through msdb, "
                "mirrored pairs, TRANSPORT, dynamic routing), with diagnose's findings "
                "marked; as Graphviz DOT or Mermaid text", cmd_topology)
    add_target_arguments(p)
    p.add_argument("--format", choices=("dot", "mermaid"), default=None,
                   help="dot (Graphviz: dot -Tsvg net.dot -o net.svg; the default) or "
                   "mermaid; with --out, the file's suffix says it (.dot, .gv, .mmd)")
    p.add_argument("--out", type=Path, metavar="FILE",
                   help="write the picture to FILE (whole, or not at all) instead of stdout")
    p.set_defaults(usage_error=usage_error)


def cmd_topology(args: argparse.Namespace) -> int:
    if not args.targets:
        raise args.usage_error("name at least one TARGET (an instance file, a snapshot or "
                               "pybroker://HOST:PORT)")
    form = args.format
    if args.out is not None and form is None:
        form = _SUFFIXES.get(args.out.suffix.lower())
        if form is None:
            raise args.usage_error(
                f"cannot tell the form of {args.out} from its suffix: give --format dot or "
                "mermaid, or a name ending .dot, .gv or .mmd (for SVG or PNG, render the "
                "DOT with Graphviz: dot -Tsvg net.dot -o net.svg)")
    try:
        picture = topology(args.targets, tokens=parse_tokens(args))
    except TargetError as exc:
        return print_target_error(exc)
    text = mermaid(picture) if form == "mermaid" else dot(picture)
    if args.out is None:
        print(text, end="")
        return 0
    partial = args.out.with_name(args.out.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(args.out)
    return 0
