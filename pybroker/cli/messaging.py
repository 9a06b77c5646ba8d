"""The ``pybroker`` commands of a messaging user: ``send``, ``receive`` and ``end`` (a
conversation from the command line, without writing T-SQL), and how ``pybroker sql``
prints the result sets of a batch (a table, ``--json`` or ``--csv``) and what its PRINT
statements wrote (to stderr). What became of a
message ``send`` sent is pybroker.cli.sent_message's.

Each command opens the instance file with ``pybroker.connect``, the way a program does.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pybroker.cli.support import INSTANCE_FILE_HELP, PROG, UsageError, require_instance_file
from pybroker.core.tsql.batch_interface import ResultSet
from pybroker.errors import ConversationError

# How long `send` watches the message it sent, in seconds: a message for this instance is
# delivered or refused as it commits; one for another instance goes through the process that
# serves the file (pybroker serve), whose acknowledgement takes the wire's round trip.
BRIEF_WAIT, DELIVERED_WAIT, MAX_WAIT = 2.0, 30.0, 3600


def add_commands(sub: Any, command: Callable[..., argparse.ArgumentParser],
                 usage_error: type[Exception]) -> None:
    """Add send, receive and end to the ``pybroker`` command's subparsers (usage_error is
    cli_support.UsageError, which they raise; the parameter keeps the shape of the other
    modules' add_commands)."""

    p = command("send", "send one message: begin a dialog (or continue one with --on), "
                "print its conversation handle, and say if the message was refused (the "
                "error, exit 1) or waits to leave (why, on stderr)", cmd_send)
    _file_and_database(p)
    p.add_argument("body", help="the message body (sent as UTF-8); '-' reads it from stdin "
                   "as it is")
    p.add_argument("--from", dest="from_service", metavar="SERVICE",
                   help="the service the dialog begins from (a service of the database)")
    p.add_argument("--to", dest="to_service", metavar="SERVICE",
                   help="the service the dialog is for")
    p.add_argument("--contract", default="DEFAULT", help="the dialog's contract (DEFAULT)")
    p.add_argument("--broker-instance", help="the broker identifier of the target's database")
    p.add_argument("--on", metavar="HANDLE",
                   help="send on this conversation instead of beginning one")
    p.add_argument("--type", default="DEFAULT", help="the message type (DEFAULT)")
    p.add_argument("--wait-delivered", action="store_true",
                   help="wait until the message is delivered: exit 1 if it is not within "
                   "--timeout")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help=f"how long to watch the message (default {BRIEF_WAIT:g} s, "
                   f"{DELIVERED_WAIT:g} s with --wait-delivered; at most {MAX_WAIT} s; 0 "
                   "looks once)")

    p = command("receive", "receive the next messages of one conversation group from a "
                "queue, in one transaction, and print them", cmd_receive)
    _file_and_database(p)
    p.add_argument("queue", help="the queue to receive from")
    p.add_argument("--max", type=int, default=1, metavar="N",
                   help="receive up to N messages (default 1)")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="wait up to SECONDS for a message (WAITFOR; default: do not wait)")
    p.add_argument("--json", action="store_true", help="print the messages as JSON")

    p = command("end", "end a conversation (END CONVERSATION)", cmd_end)
    _file_and_database(p)
    p.add_argument("handle", help="the conversation handle of this database's side")
    p.add_argument("--error", type=int, metavar="N",
                   help="end with an application error code (a positive number)")
    p.add_argument("--description", help="the error's description (with --error)")
    p.add_argument("--cleanup", action="store_true",
                   help="WITH CLEANUP: remove this side at once, telling the far side nothing")


def _file_and_database(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("-d", "--database", required=True, help="the database to act in")


def _open(args: argparse.Namespace) -> Any:
    from pybroker import connect

    return connect(require_instance_file(args.file))


def cmd_send(args: argparse.Namespace) -> int:
    if args.on is not None:
        given = [f"--{n}" for n, v in (("from", args.from_service), ("to", args.to_service),
                                       ("broker-instance", args.broker_instance)) if v]
        if given or args.contract != "DEFAULT":
            raise UsageError(f"--on continues a conversation; {', '.join(given) or '--contract'} "
                              "is for beginning one")
    elif args.from_service is None or args.to_service is None:
        raise UsageError("give --from and --to to begin a dialog, or --on HANDLE to continue "
                          "one")
    timeout = args.timeout
    if timeout is None:
        timeout = DELIVERED_WAIT if args.wait_delivered else BRIEF_WAIT
    if not 0 <= timeout <= MAX_WAIT:
        raise UsageError(f"--timeout must be seconds from 0 to {MAX_WAIT}, not {timeout:g}")
    body: bytes | str = sys.stdin.buffer.read() if args.body == "-" else args.body
    from pybroker.cli import sent_message

    with _open(args) as inst:
        db = inst.database(args.database)
        with db.transaction():  # the dialog begins only if the message goes
            if args.on is not None:
                conversation = db.conversation(args.on)
            else:
                conversation = db.begin_dialog(
                    args.from_service, args.to_service, contract=args.contract,
                    broker_instance=args.broker_instance)
            sequence = conversation.send(body, message_type=args.type)
        print(conversation.handle, flush=True)  # whatever follows: the handle to end it
        result = sent_message.watch(inst, db.name, conversation.handle, sequence,
                                    timeout=timeout, until_delivered=args.wait_delivered)
    if result.kind == "refused":
        raise ConversationError(result.text)
    if result.kind != "delivered" and args.wait_delivered:
        raise ConversationError(f"not delivered within {timeout:g} s: {result.text}")
    if result.text:  # waiting, on its way, or delivered and then ended by the far side
        print(f"{PROG}: {result.kind}: {' '.join(result.text.split())}", file=sys.stderr)
    return 0


def cmd_receive(args: argparse.Namespace) -> int:
    if args.max < 1:
        raise UsageError(f"--max must be at least 1, not {args.max}")
    if not args.wait >= 0:
        raise UsageError(f"--wait must be seconds >= 0, not {args.wait}")
    with _open(args) as inst:
        db = inst.database(args.database)
        with db.transaction():
            messages = db.receive(args.queue, max_messages=args.max, timeout=args.wait)
    rows = [{
        "conversation_handle": m.conversation_handle,
        "conversation_group_id": m.conversation_group_id,
        "message_sequence_number": m.message_sequence_number,
        "service_name": m.service_name,
        "service_contract_name": m.service_contract_name,
        "message_type_name": m.message_type_name,
        "message_body": _body(m.message_body) if m.message_body else None,
    } for m in messages]
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print("(no message)")
    else:
        print_result_sets([ResultSet(tuple(rows[0]), [tuple(r.values()) for r in rows])])
    return 0


def cmd_end(args: argparse.Namespace) -> int:
    if (args.error is None) != (args.description is None):
        raise UsageError("--error and --description go together")
    if args.cleanup and args.error is not None:
        raise UsageError("--cleanup ends without an error; give one or the other")
    with _open(args) as inst:
        inst.database(args.database).conversation(args.handle).end(
            args.error, args.description, cleanup=args.cleanup)
        print(f"ended conversation {args.handle}"
              + (f" with error {args.error}" if args.error is not None else "")
              + (" with cleanup" if args.cleanup else ""))
    return 0


# -- printing result sets --------------------------------------------------------------------


def _body(body: bytes) -> str:
    """A message body as text when it is UTF-8, else as SQL Server shows binary (0x...)."""
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + body.hex().upper()


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return "0x" + value.hex().upper()
    return str(value)


def _json_value(value: Any) -> Any:
    return "0x" + value.hex().upper() if isinstance(value, bytes) else value


def print_messages(results: Sequence[ResultSet]) -> None:
    """The lines a batch's PRINT statements wrote (``BatchResults.messages``), to stderr, as
    sqlcmd writes its messages apart from the result sets."""
    for line in getattr(results, "messages", ()):
        print(line, file=sys.stderr)


def print_result_sets(results: Sequence[ResultSet], *, as_json: bool = False,
                      as_csv: bool = False) -> None:
    """Each result set as a table (binary as 0x..., NULL as NULL), one blank line between;
    or all as JSON (a list of {"columns": [...], "rows": [[...]]}); or as CSV, each with its
    header, a blank line between."""
    if as_json:
        print(json.dumps([{"columns": list(r.columns),
                           "rows": [[_json_value(v) for v in row] for row in r.rows]}
                          for r in results], indent=2))
        return
    for index, result in enumerate(results):
        if index:
            print()
        if as_csv:
            writer = csv.writer(sys.stdout, lineterminator="\n")
            writer.writerow(result.columns)
            writer.writerows([["" if v is None else _cell(v) for v in row]
                              for row in result.rows])
            continue
        cells = [[" ".join(_cell(v).split()) for v in row] for row in result.rows]
        widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c)
                  for i, c in enumerate(result.columns)]
        print("  ".join(c.ljust(w) for c, w in zip(result.columns, widths, strict=True))
              .rstrip())
        print("  ".join("-" * w for w in widths))
        for r in cells:
            print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
        print(f"({len(cells)} row{'s' if len(cells) != 1 else ''})")
