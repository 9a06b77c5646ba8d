"""What the ``pybroker`` command's modules share: the usage error, the check that an
instance file exists and opening it, reading a T-SQL batch from an argument or stdin, how a
listing prints its rows, and the hint that names a close known name.

It sits below ``pybroker.cli.main`` and the modules that add subcommands to it
(``pybroker.cli.pipeline``, the endpoint's and the chaos commands), so that they import it
and never ``pybroker.cli.main`` itself.
"""

from __future__ import annotations

import codecs
import difflib
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pybroker.api.instance import Instance
from pybroker.errors import BrokerError
from pybroker.server.connecting import connect  # a served file: through its server

PROG = "pybroker"

# How the help describes an instance FILE argument, the same for every command.
INSTANCE_FILE_HELP = f"the instance file (a DuckDB database made by `{PROG} create-database`)"
JSON_HELP = "print the result as JSON"


class UsageError(Exception):
    """A command line that parses but does not make sense: exit code 2."""


def require_instance_file(path: Path) -> Path:
    """``path`` if an instance file may be there; a missing one is refused, so that a typo
    in a file name never makes a new, empty instance. Only the commands whose purpose is to
    create one (``create-database``, ``demo FILE``, ``serve --create``) skip this check."""
    if not path.exists():
        raise BrokerError(
            f"no instance file at {path}; create one with: {PROG} create-database {path} NAME"
        )
    return path


def open_existing(path: Path, *, read_only: bool = False) -> Instance:
    """An instance file that exists; ``read_only`` for the commands that only look (they
    then work on a read-only file and beside other readers, and never write)."""
    return connect(require_instance_file(path), read_only=read_only, worker=not read_only)


def print_rows(rows: list[dict[str, Any]], as_json: bool) -> None:
    """A listing: a JSON list of objects, or an aligned table (NULL for None, a list as its
    items joined by commas), "(none)" when there are no rows."""
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        print("(none)")
        return
    columns = list(rows[0])
    cells = [[_cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "-"
    return " ".join(str(value).split())  # one table line, whatever the value holds


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """" (did you mean 'X'?)" for the known name nearest to ``name`` (the same but for case
    first: names are compared as they were created), or "" when none is near."""
    known = [k for k in known if k != name]
    nearest = [k for k in known if k.casefold() == name.casefold()] or \
        difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return f" (did you mean {nearest[0]!r}?)" if nearest else ""


def read_tsql(source: str) -> str:
    """The T-SQL of ``pybroker sql``: the argument itself, or stdin for '-'. Stdin is read as
    bytes and decoded as UTF-8 (a UTF-8 byte order mark is dropped); a UTF-16 script is
    recognised by its byte order mark. Anything else that is not UTF-8 is refused, naming
    the first bad byte."""
    if source != "-":
        return source
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # stdin replaced by a text stream (a test, an embedding program)
        return sys.stdin.read()
    data = stream.read()
    for bom, encoding in ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
                          (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            data, name = data[len(bom):], encoding
            break
    else:
        name = "utf-8"
    try:
        return data.decode(name)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BrokerError(
            f"stdin is not {name.upper()} text: byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start} (line {line}) cannot be decoded; save the script as UTF-8") from None
