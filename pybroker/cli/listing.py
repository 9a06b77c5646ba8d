"""The ``pybroker`` commands that list what an instance holds besides its databases and
routes (those are in pybroker.cli.main): ``services``, ``queues``, ``conversations`` and
``messages QUEUE``, each as an aligned table or, with ``--json``, a list of objects.

They open the file read-only (a served file: through its server) and read the catalog
through the API and the sys.* views (sql/shell/), as an analyst's query would.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pybroker.api.database import Database
from pybroker.api.instance import Instance
from pybroker.cli.support import (
    INSTANCE_FILE_HELP,
    JSON_HELP,
    PROG,
    did_you_mean,
    open_existing,
    print_rows,
)
from pybroker.errors import NotFoundError
from pybroker.storage.templates import render

TABLE_BODY = 60  # characters of a body a table shows (--json shows it all)


def add_commands(sub: Any, command: Callable[..., argparse.ArgumentParser],
                 usage_error: type[Exception]) -> None:
    """Add services, queues, conversations and messages to the ``pybroker`` command's
    subparsers (the parameters keep the shape of the other modules' add_commands)."""
    p = command("services", "list services (sys.services): their queue and the contracts "
                "they accept, of one database or all", cmd_services)
    _file_and_some_database(p)

    p = command("queues", "list queues (sys.service_queues): status, activation and how "
                "many messages each holds, of one database or all", cmd_queues)
    _file_and_some_database(p)

    p = command("conversations", "list conversation endpoints (sys.conversation_endpoints): "
                "state, error, and the messages waiting to leave with why, of one database "
                "or all", cmd_conversations)
    _file_and_some_database(p)

    p = command("messages", "list the messages in a queue, in queuing order, as SELECT * "
                "FROM the queue shows them (RECEIVE takes them: `pybroker receive`)",
                cmd_messages)
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("-d", "--database", required=True, help="the queue's database")
    p.add_argument("queue", help="the queue")
    p.add_argument("--json", action="store_true",
                   help=f"print the result as JSON (with whole bodies; a table shows "
                   f"{TABLE_BODY} characters of each)")


def _file_and_some_database(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("-d", "--database", help="only this database's")
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def _databases(inst: Instance, name: str | None) -> list[Database]:
    return [inst.database(name)] if name is not None else inst.databases()


def cmd_services(args: argparse.Namespace) -> int:
    with open_existing(args.file, read_only=True) as inst:
        rows = [{"database": db.name, "name": s.name, "queue": s.queue,
                 "contracts": list(s.contracts)}
                for db in _databases(inst, args.database) for s in db.services()]
    print_rows(rows, args.json)
    return 0


def cmd_queues(args: argparse.Namespace) -> int:
    with open_existing(args.file, read_only=True) as inst:
        databases = _databases(inst, args.database)
        counts = {(d, q): (ready, total) for d, q, ready, total in
                  inst.sql(render("shell/count_queue_messages.sql")).fetchall()}
        rows = []
        for db in databases:
            for q in db.queues():
                ready, total = counts.get((db.name, q.name), (0, 0))
                rows.append({
                    "database": db.name, "name": q.name, "status": _on(q.status),
                    "retention": _on(q.retention), "activation": _on(q.activation_status),
                    "activation_procedure": q.activation_procedure,
                    "max_queue_readers": q.max_queue_readers, "ready": ready,
                    "messages": total})
    print_rows(rows, args.json)
    return 0


def cmd_conversations(args: argparse.Namespace) -> int:
    with open_existing(args.file, read_only=True) as inst:
        if args.database is not None:
            inst.database(args.database)  # an unknown one is refused, naming the others
        rows = _dicts(inst.sql(render("shell/list_conversations.sql"),
                               {"database": args.database}))
    for row in rows:
        row["conversation_handle"] = str(row["conversation_handle"])
    print_rows(rows, args.json)
    return 0


def cmd_messages(args: argparse.Namespace) -> int:
    with open_existing(args.file, read_only=True) as inst:
        queues = [q.name for q in inst.database(args.database).queues()]
        if args.queue not in queues:
            raise NotFoundError(
                f"queue {args.queue!r} does not exist in database {args.database!r}"
                f"{did_you_mean(args.queue, queues)}; see its queues: "
                f"{PROG} queues {args.file} -d {args.database}")
        rows = _dicts(inst.sql(render("shell/list_queue_messages.sql"),
                               {"database": args.database, "queue": args.queue}))
    for row in rows:
        row["conversation_handle"] = str(row["conversation_handle"])
        body = row["message_body"]
        if not args.json and body is not None and len(body) > TABLE_BODY:
            row["message_body"] = body[:TABLE_BODY - 3] + "..."
    print_rows(rows, args.json)
    return 0


def _on(flag: bool) -> str:
    return "ON" if flag else "OFF"


def _dicts(relation: Any) -> list[dict[str, Any]]:
    columns = list(relation.columns)
    return [dict(zip(columns, row, strict=True)) for row in relation.fetchall()]
