"""The ``pybroker`` commands of a routing table: ``create-route``, ``alter-route`` and
``drop-route``, the shell's CREATE, ALTER and DROP ROUTE (R10).

Each command hands its options to ``Database.create_route()``, ``alter_route()`` or
``drop_route()`` as they are, so a route is checked (R10.2) in one place whichever way it
comes: the API, a T-SQL batch or the shell.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pybroker.cli.support import INSTANCE_FILE_HELP, UsageError, open_existing
from pybroker.kernel.catalog_objects import Route

# (option, the API's keyword, help); ALTER ROUTE takes '' to remove the optional ones
_CLAUSES = (
    ("--service-name", "service_name",
     "SERVICE_NAME: the service the route is for (default: any service, a wildcard)"),
    ("--broker-instance", "broker_instance",
     "BROKER_INSTANCE: the GUID of the database the route leads to"),
    ("--address", "address",
     "ADDRESS: tcp://HOST:PORT, LOCAL or TRANSPORT"),
    ("--mirror-address", "mirror_address",
     "MIRROR_ADDRESS: tcp://HOST:PORT of the mirror of a mirrored database"),
)


def add_commands(sub: Any, command: Callable[..., argparse.ArgumentParser],
                 usage_error: type[Exception]) -> None:
    """Add create-route, alter-route and drop-route to the ``pybroker`` command's
    subparsers (usage_error is cli_support.UsageError, which they raise; the parameter
    keeps the shape of the other modules' add_commands)."""
    p = command("create-route", "create a route in a database's routing table (CREATE "
                "ROUTE)", cmd_create_route)
    _file_database_and_name(p, "the new route's name")
    for option, dest, help_text in _CLAUSES:
        p.add_argument(option, dest=dest, required=dest == "address", help=help_text)
    p.add_argument("--lifetime", type=int, metavar="SECONDS",
                   help="LIFETIME: the route expires SECONDS from now (default: never)")

    p = command("alter-route", "change the clauses given of a route (ALTER ROUTE); '' "
                "removes --service-name, --broker-instance or --mirror-address",
                cmd_alter_route)
    _file_database_and_name(p, "the route's name")
    for option, dest, help_text in _CLAUSES:
        p.add_argument(option, dest=dest, help=help_text)
    p.add_argument("--lifetime", type=int, metavar="SECONDS",
                   help="LIFETIME: the route expires SECONDS from now")

    p = command("drop-route", "drop a route from a database's routing table (DROP ROUTE)",
                cmd_drop_route)
    _file_database_and_name(p, "the route's name")


def _file_database_and_name(p: argparse.ArgumentParser, name_help: str) -> None:
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("-d", "--database", required=True, help="the database whose routing "
                   "table it is (msdb: the routes of messages that arrive from outside)")
    p.add_argument("name", help=name_help)


def cmd_create_route(args: argparse.Namespace) -> int:
    with open_existing(args.file) as inst:
        route = inst.database(args.database).create_route(
            args.name, service_name=args.service_name, broker_instance=args.broker_instance,
            address=args.address, mirror_address=args.mirror_address, lifetime=args.lifetime)
        print(f"created route {route.name} in {args.database}: {clauses(route)}")
    return 0


def cmd_alter_route(args: argparse.Namespace) -> int:
    changes = {dest: getattr(args, dest) for _, dest, _ in _CLAUSES
               if getattr(args, dest) is not None}
    if args.lifetime is not None:
        changes["lifetime"] = args.lifetime
    if not changes:
        raise UsageError("give at least one clause to change: "
                         + ", ".join(option for option, _, _ in _CLAUSES) + " or --lifetime")
    with open_existing(args.file) as inst:
        route = inst.database(args.database).alter_route(args.name, **changes)
        print(f"altered route {route.name} in {args.database}: {clauses(route)}")
    return 0


def cmd_drop_route(args: argparse.Namespace) -> int:
    with open_existing(args.file) as inst:
        inst.database(args.database).drop_route(args.name)
        print(f"dropped route {args.name} from {args.database}")
    return 0


def clauses(route: Route) -> str:
    """The route as the WITH clauses of its CREATE ROUTE."""
    parts = [("SERVICE_NAME", route.remote_service_name),
             ("BROKER_INSTANCE", route.broker_instance),
             ("LIFETIME", None if route.lifetime is None
              else f"until {route.lifetime.isoformat(sep=' ', timespec='seconds')} UTC"),
             ("ADDRESS", route.address), ("MIRROR_ADDRESS", route.mirror_address)]
    return ", ".join(f"{k} = {v}" if k == "LIFETIME" else f"{k} = {_quoted(v)}"
                     for k, v in parts if v is not None)


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"  # as T-SQL writes a string
