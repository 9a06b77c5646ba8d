"""What the ``pybroker`` command's modules share: the usage error, the check that an
instance file exists, and reading a T-SQL batch from an argument or stdin.

It sits below ``pybroker.cli`` and the modules that add subcommands to it
(``pybroker.pipeline.cli``, the endpoint's and the chaos commands), so that they import it
and never ``pybroker.cli`` itself.
"""

from __future__ import annotations

import codecs
import sys
from pathlib import Path

from pybroker.errors import BrokerError

PROG = "pybroker"

# How the help describes an instance FILE argument, the same for every command.
INSTANCE_FILE_HELP = f"the instance file (a DuckDB database made by `{PROG} create-database`)"


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
