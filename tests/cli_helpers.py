"""What the command-line tests share: the command run in this process or as a process of
its own, and what an instance file holds, to show that a refused command changed
nothing."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import duckdb

from pybroker.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def run(*args: object, stdin: str | bytes | None = None, text: bool = True,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m pybroker ARGS`` as a process of its own, this tree's pybroker (for what
    only a process shows: its exit status, its streams' bytes, a signal); ``text=False``
    keeps stdin, stdout and stderr as bytes and passes bytes arguments as they are."""
    argv = [a if isinstance(a, bytes) else str(a) for a in args]
    return subprocess.run([sys.executable, "-m", "pybroker", *argv], cwd=ROOT,
                          capture_output=True, text=text, input=stdin, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


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
