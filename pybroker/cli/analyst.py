"""The analyst's commands: ``query`` (read-only DuckDB SQL) and ``snapshot`` (a
point-in-time copy for DuckDB's own tools).

Both go through the public API (``Instance.sql()``, ``Instance.snapshot()``), so they act
the same on an instance opened here and on one a server process holds.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from pybroker.api.instance import Instance
from pybroker.cli.support import INSTANCE_FILE_HELP, PROG, require_instance_file
from pybroker.errors import InvalidArgumentError, ReadOnlyQueryError
from pybroker.server.connecting import connect  # a served file: through its server
from pybroker.storage.duckdb_errors import query_failed


def add_commands(sub: Any, command: Any, usage_error: type[Exception]) -> None:
    p = command("query", "run one read-only DuckDB query on an instance file: the sys.* "
                "views, route_decision(), route_explain(), queue_contents(); anything that "
                "writes (through a view or macro too) is refused. Prints an aligned table "
                "(also when stdout is not a terminal); --json or --csv for programs",
                cmd_query)
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("query", help="one SELECT (or FROM, WITH, VALUES, SHOW, DESCRIBE, "
                   "SUMMARIZE) in DuckDB's SQL; '-' reads it from stdin")
    p.add_argument("-p", "--param", action="append", default=[], metavar="VALUE",
                   help="a parameter value, in order for ? or $1, $2, ...; given as "
                   "text, which DuckDB casts to the type the query needs (repeatable)")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true",
                      help="a JSON list of objects, one per row (column name: value)")
    form.add_argument("--csv", action="store_true",
                      help="CSV with a header row; NULL is an empty field")
    p.set_defaults(usage_error=usage_error)

    p = command("snapshot", "write a point-in-time copy of an instance to a new DuckDB file "
                "that DuckDB's CLI opens (duckdb -readonly OUT) with the sys.* views and "
                "macros; it holds what was committed when it was taken and never changes "
                "after", cmd_snapshot)
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("out", type=Path, help="the new DuckDB file to write")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")


def _open_read_only(path: Path) -> Instance:
    return connect(require_instance_file(path), read_only=True, worker=False)


def cmd_query(args: argparse.Namespace) -> int:
    query = sys.stdin.read() if args.query == "-" else args.query
    with _open_read_only(args.file) as inst:
        try:
            relation = inst.sql(query, args.param or None)
        except ReadOnlyQueryError as exc:  # in the command line's words
            raise exc.restated(
                f"{PROG} query", f"change the instance with {PROG} sql "
                f"{shlex.quote(str(args.file))} -d DATABASE 'T-SQL', or the other {PROG} "
                "commands") from None
        columns = list(relation.columns)
        numeric = [_is_numeric(str(t)) for t in relation.types]
        try:
            rows = relation.fetchall()
        except duckdb.Error as exc:
            # a query fails as it runs too (a cast, a macro's unknown name): DuckDB's words
            raise InvalidArgumentError(query_failed(exc, query, list)) from exc
    if args.json:
        write_json(sys.stdout, columns, rows)
    elif args.csv:
        write_csv(sys.stdout, columns, rows)
    else:
        write_table(sys.stdout, columns, rows, numeric)
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    # absolute here: a server process holding FILE resolves a relative path from its own
    # working directory, not this command's
    out = args.out.expanduser().absolute()
    with _open_read_only(args.file) as inst:
        taken = dt.datetime.now(dt.UTC).replace(microsecond=0)
        written = inst.snapshot(out, overwrite=args.force)
    print(f"wrote {written}: a copy of {args.file} as committed at "
          f"{taken.isoformat().replace('+00:00', 'Z')} (it does not follow later changes); "
          f"open it with: duckdb -readonly {written}")
    return 0


# -- output --------------------------------------------------------------------------------


_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
            "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL")
# C0 controls and DEL, written as escapes in a table so a value stays on its line
_CONTROLS = {c: f"\\x{c:02X}" for c in (*range(32), 127)} | {
    ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}


def _is_numeric(type_name: str) -> bool:
    return type_name.startswith(_NUMERIC)


def blob_text(value: bytes) -> str:
    """A BLOB as DuckDB writes one as text: printable ASCII as is, every other byte (and the
    backslash) as ``\\xNN``."""
    return "".join(chr(b) if 32 <= b < 127 and b != 92 else f"\\x{b:02X}" for b in value)


def cell_text(value: Any) -> str | None:
    """A value as text (None for NULL): what the table and CSV show."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return blob_text(bytes(value))
    if isinstance(value, (dt.datetime, dt.time)):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else (
            value.isoformat())
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(json_value(value), ensure_ascii=False)
    return str(value)


def json_value(value: Any) -> Any:
    """A value as JSON holds it: numbers and booleans as themselves, a non-finite float,
    a DECIMAL, a time (ISO 8601) or a UUID as text, a BLOB as :func:`blob_text`, lists and structs
    nested."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    return cell_text(value)


def _unique(columns: Sequence[str]) -> list[str]:
    """Column names as object keys: a repeated name gets _2, _3, ..."""
    seen: dict[str, int] = {}
    out = []
    for name in columns:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return out


def write_json(stream: Any, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    keys = _unique(columns)
    objects = [dict(zip(keys, (json_value(v) for v in row), strict=True)) for row in rows]
    stream.write(json.dumps(objects, indent=2, ensure_ascii=False) + "\n")


def write_csv(stream: Any, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if (text := cell_text(v)) is None else text for v in row])


def write_table(stream: Any, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                numeric: Sequence[bool]) -> None:
    """Aligned columns (numbers to the right), NULL shown as NULL, then the row count."""
    cells = [["NULL" if (text := cell_text(v)) is None else text.translate(_CONTROLS)
              for v in row] for row in rows]
    heads = [c.translate(_CONTROLS) for c in columns]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(heads)]

    def line(values: Sequence[str], align: bool) -> str:
        parts = [v.rjust(w) if align and right else v.ljust(w)
                 for v, w, right in zip(values, widths, numeric, strict=True)]
        return " | ".join(parts).rstrip()

    stream.write(line(heads, False) + "\n")
    stream.write("-+-".join("-" * w for w in widths) + "\n")
    for r in cells:
        stream.write(line(r, True) + "\n")
    stream.write(f"({len(rows)} row{'' if len(rows) == 1 else 's'})\n")
