"""``pybroker topology TARGET...``: the network as a picture, in Graphviz DOT or Mermaid
text (pybroker/apps/diagnose/topology.py and drawing.py; pybroker/docs/diagnose.md).

A command of its own rather than ``diagnose --draw``: its output is a picture to keep in a
file or a README, not findings to act on, and its exit status says whether it was drawn
(0), not whether the network is healthy; the findings are drawn on it all the same.
Exit codes: 0 drawn, 2 a target that cannot be read or a usage error.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from pybroker.apps.diagnose.drawing import as_json, dot, mermaid
from pybroker.apps.diagnose.targets import TargetError
from pybroker.apps.diagnose.topology import topology
from pybroker.cli.network_targets import add_target_arguments, parse_tokens, print_target_error
from pybroker.errors import BrokerError

# An --out file's suffix says its form; svg and png are the DOT drawn by Graphviz's `dot`
# (Debian's graphviz package), the renderer the DOT is written for
_SUFFIXES = {".dot": "dot", ".gv": "dot", ".mmd": "mermaid", ".mermaid": "mermaid",
             ".svg": "svg", ".png": "png", ".json": "json"}
RENDER_TIMEOUT = 60.0  # seconds Graphviz may take to draw
# The version of --format json's form (pybroker/docs/diagnose.md describes it).
JSON_SCHEMA = 1


def render(dot_text: str, form: str) -> bytes:
    """The DOT drawn as ``form`` (svg or png) by Graphviz's ``dot``."""
    program = shutil.which("dot")
    if program is None:
        raise BrokerError(
            f"drawing {form.upper()} needs Graphviz's dot program, which is not installed "
            "(Debian: apt install graphviz); or write the DOT (--out net.dot) and draw it "
            "elsewhere")
    try:
        done = subprocess.run([program, f"-T{form}"], input=dot_text.encode("utf-8"),
                              capture_output=True, timeout=RENDER_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise BrokerError(f"Graphviz took longer than {RENDER_TIMEOUT:g} s to draw "
                          "the picture") from None
    if done.returncode != 0 or not done.stdout:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise BrokerError(f"Graphviz could not draw the picture: "
                          f"{why[-1] if why else f'exit status {done.returncode}'}")
    return done.stdout


def add_commands(sub: Any, command: Any, usage_error: type[Exception]) -> None:
    p = command("topology", "draw the instances named: their broker endpoints, databases "
                "and services, routes as arrows (LOCAL, network, forwarded through msdb, "
                "mirrored pairs, TRANSPORT, dynamic routing), with diagnose's findings "
                "marked; as Graphviz DOT or Mermaid text, SVG or PNG, or as JSON", cmd_topology)
    add_target_arguments(p)
    p.add_argument("--format", choices=("dot", "mermaid", "svg", "png", "json"), default=None,
                   help="dot (Graphviz's text; the default), mermaid, svg / png (drawn by "
                   "Graphviz's dot program), or json (the picture as data, for programs); "
                   "with --out, the file's suffix says it (.dot, .gv, .mmd, .svg, .png, "
                   ".json)")
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument("--out", type=Path, metavar="FILE",
                   help="write the picture to FILE (whole, or not at all) instead of stdout")
    p.set_defaults(usage_error=usage_error)


def cmd_topology(args: argparse.Namespace) -> int:
    if not args.targets:
        raise args.usage_error("name at least one TARGET (an instance file, a snapshot or "
                               "pybroker://HOST:PORT)")
    form = "json" if args.json else args.format
    if args.out is not None and form is None:
        form = _SUFFIXES.get(args.out.suffix.lower())
        if form is None:
            raise args.usage_error(
                f"cannot tell the form of {args.out} from its suffix: give --format (dot, "
                "mermaid, svg, png or json), or a name ending .dot, .gv, .mmd, .svg, .png or "
                ".json")
    if args.out is None and form == "png":
        raise args.usage_error("a PNG is no text for the terminal: give --out net.png")
    try:
        picture = topology(args.targets, tokens=parse_tokens(args))
    except TargetError as exc:
        return print_target_error(exc)
    if form == "json":
        text = json.dumps({"schema": JSON_SCHEMA, "targets": list(args.targets),
                           **as_json(picture)}, indent=2) + "\n"
    else:
        text = mermaid(picture) if form == "mermaid" else dot(picture)
    data = render(text, form) if form in ("svg", "png") else text.encode("utf-8")
    if args.out is None:
        print(data.decode("utf-8"), end="")
        return 0
    partial = args.out.with_name(args.out.name + ".partial")
    partial.write_bytes(data)
    partial.replace(args.out)
    return 0
