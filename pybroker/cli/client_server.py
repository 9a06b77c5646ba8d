"""What ``pybroker serve`` adds for clients: the options, and the server it starts."""

from __future__ import annotations

import argparse
from typing import Any

from pybroker.api.instance import Instance
from pybroker.cli.serve_log import ServeLog
from pybroker.server.server import (
    DEFAULT_MAX_CLIENTS,
    DEFAULT_TIMEOUT,
    SUMMARY_INTERVAL,
    ClientServer,
    serve_clients,
)


def add_serve_options(p: Any) -> None:
    p.add_argument("--client-port", type=int, default=None, metavar="N",
                   help="also serve clients on TCP port N (0: a free one); they connect "
                   "with pybroker.connect('pybroker://HOST:N', token=...), the token "
                   "printed once and kept in FILE.token (default: the Unix socket "
                   "FILE.sock only)")
    p.add_argument("--client-host", default="127.0.0.1",
                   help="address the client port listens on (default 127.0.0.1)")
    p.add_argument("--client-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                   help="seconds after which a client's unfinished request ends its "
                   f"connection and an open transaction is rolled back (default "
                   f"{DEFAULT_TIMEOUT:g})")
    p.add_argument("--max-clients", type=int, default=DEFAULT_MAX_CLIENTS, metavar="N",
                   help=f"clients connected at once (default {DEFAULT_MAX_CLIENTS})")
    p.add_argument("--summary-interval", type=float, default=SUMMARY_INTERVAL, metavar="S",
                   help=f"seconds between summary lines on stderr (default "
                   f"{SUMMARY_INTERVAL:g})")
    p.add_argument("--quiet", action="store_true", help="no periodic summary on stderr")


def start(instance: Instance, args: argparse.Namespace,
          log: ServeLog | None = None) -> ClientServer:
    """Serve clients as the options say; prints where (stdout), and a line per client
    connected, disconnected or refused (stderr, in ``log``'s format)."""
    log = log or ServeLog()
    server = serve_clients(
        instance, port=args.client_port, host=args.client_host,
        timeout=args.client_timeout, max_clients=args.max_clients,
        log=log.writer("clients"), summary=None if args.quiet else log.writer("summary"),
        summary_interval=args.summary_interval)
    if server.socket_path is not None:
        print(f"clients on {server.socket_path}", flush=True)
    if server.address is not None:
        print(f"clients on {server.address}", flush=True)
        if server.token_made:  # shown once; it stays in the token file
            print(f"client token: {server.token} (kept in {server.token_path})", flush=True)
        else:
            print(f"client token in {server.token_path}", flush=True)
    return server
