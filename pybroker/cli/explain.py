"""``pybroker explain CODE``: what a step code (R2.3, P5.2, C3) that pybroker prints means,
from the document the package ships (pybroker/docs/codes.md), or a finding code of
diagnose (D-CFG-001) from pybroker/docs/diagnose.md."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable
from typing import Any

from pybroker.cli.finding_codes import describe_findings, explain_finding, is_finding_code
from pybroker.cli.step_codes import StepCode, explain, normalize, step_codes
from pybroker.errors import NotFoundError

_INDENT = {"family": "", "group": "  ", "step": "    "}


def add_commands(sub: Any, command: Callable[..., argparse.ArgumentParser],
                 usage_error: type[Exception]) -> None:
    """Add ``explain`` to the ``pybroker`` command's subparsers; an unknown code is a
    ``usage_error`` (exit code 2), as any other argument the command cannot use."""
    p = command("explain", "explain a step code that pybroker prints or cites: a step "
                "(R2.3), a group of steps (R2) or a family (R routing, P protocols, C "
                "conversations), or a finding code of diagnose (D-CFG-001; a family D-CFG, "
                "D-RTE, D-CNV; D- for them all); without a code, list the step codes",
                cmd_explain)
    p.add_argument("code", nargs="?", help="the code, in any case (r2.3 is R2.3)")
    p.set_defaults(usage_error=usage_error)


def cmd_explain(args: argparse.Namespace) -> int:
    if args.code is None:
        print(index(step_codes()))
        return 0
    wanted = normalize(args.code)
    if is_finding_code(wanted):
        try:
            print(describe_findings(explain_finding(wanted)))
        except NotFoundError as exc:
            raise args.usage_error(str(exc)) from None
        return 0
    try:
        found = explain(args.code)
    except NotFoundError as exc:
        raise args.usage_error(str(exc)) from None
    print(describe(found))
    return 0


def index(entries: tuple[StepCode, ...] | list[StepCode]) -> str:
    """One line per entry: its code and title, indented by level."""
    return "\n".join(f"{_INDENT[e.level]}{e.code:<6}{e.title}" for e in entries)


def describe(found: list[StepCode]) -> str:
    """A step or group with its text (and a group's steps with theirs); a family with its
    text and the list of its codes."""
    first, rest = found[0], found[1:]
    parts = [_entry(first, with_parent=True)]
    if first.level == "family":
        parts.append(index(rest))
    else:
        parts.extend(_entry(e, with_parent=False) for e in rest)
    return "\n\n".join(parts)


def _entry(entry: StepCode, *, with_parent: bool) -> str:
    heading = f"{entry.code}: {entry.title}"
    if with_parent and entry.parent is not None:
        parent = next(e for e in step_codes() if e.code == entry.parent)
        heading += f"  [{parent.code}: {parent.title}]"
    return heading + "\n" + textwrap.indent(entry.text, "  ")
