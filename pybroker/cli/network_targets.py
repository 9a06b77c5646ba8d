"""The TARGET... arguments that diagnose, trace and topology share: instance files,
snapshots, served files and ``pybroker://HOST:PORT`` with their tokens."""

from __future__ import annotations

import argparse
import sys

from pybroker.cli.support import PROG
from pybroker.errors import BrokerError


def add_target_arguments(p: argparse.ArgumentParser) -> None:
    """TARGET... and --token, as diagnose, trace and topology take them."""
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="an instance file or a snapshot (read-only, never changed), a file "
                   "another process serves (read through its server) or pybroker://HOST:PORT")
    p.add_argument("--token", action="append", default=[], metavar="ADDRESS=TOKEN",
                   help="the token of a pybroker://HOST:PORT target (in the server's "
                   "FILE.token); repeatable")


def parse_tokens(args: argparse.Namespace) -> dict[str, str]:
    """--token ADDRESS=TOKEN given, as ``tokens`` for open_target."""
    tokens = {}
    for given in args.token:
        address, sep, token = given.partition("=")
        if not sep or not address or not token:
            raise args.usage_error(f"--token takes ADDRESS=TOKEN, not {given!r}")
        tokens[address.rstrip("/")] = token
    return tokens


def print_target_error(exc: BrokerError) -> int:
    """A target that cannot be read (or a handle none holds): one line, exit code 2."""
    print(f"{PROG}: error: {' '.join(str(exc).split())}", file=sys.stderr)
    return 2
