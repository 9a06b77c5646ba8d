"""What the command-line tests share: the command run in this process, and what an
instance file holds, to show that a refused command changed nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb

from pybroker.cli import main


def call(argv: list[object], capsys) -> tuple[int, str, str]:
    """``pybroker ARGV`` in this process (main()): its exit code, stdout and stderr."""
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse: --help, --version and usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def rows_digest(path: Path) -> str:
    """What the instance holds: every row of every table (the file's bytes may change while
    nothing else does, as DuckDB lays out its blocks again)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY 1"
        ).fetchall()]
        rows = [con.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall() for t in tables]
    finally:
        con.close()
    return hashlib.sha256(repr((tables, rows)).encode()).hexdigest()
