"""The storage floor of ``pybroker bench wire --body-mb N``: what DuckDB alone costs in
memory to keep one big body durably and hand it back, measured in the same run as the
wire's figures.

Each way runs in a fresh process (``python -m pybroker.devtools.bench.big_body_floor WAY FOLDER
BYTES``), which makes the body (os.urandom, before the baseline, as the wire's sender
does), takes its baseline (its resident set, the kernel's peak reset to it), and opens a
bare DuckDB file set as an instance file is for such a body: one worker thread, and the
memory limit an instance raises itself to before it binds the body
(storage.DEFAULT_MEMORY_LIMIT + storage.BODY_ROOM x the body). No engine, no wire, no
column encoding: one table of (part number, BLOB).

- ``whole``: the body as one BLOB in one INSERT and COMMIT (as a SEND stores it, and as
  arrivals store a message made whole), then read back with one SELECT (as RECEIVE
  does): what pybroker's path costs before anything of its own;
- ``send``: the body as rows of 1 MiB (the wire's fragment size) in ONE transaction, as
  an atomic SEND of it in parts would be, read back part by part: what no SEND that
  commits its body in one DuckDB transaction gets under (DuckDB's COMMIT writes the
  transaction's rows to its log in one go);
- ``parts``: the same rows, each INSERT committed on its own (as fragments arrive), read
  back part by part (one point query each) into one buffer of the body's size: the least
  a receiver that kept a message as its fragments would pay;
- ``pieces``: as the receiver keeps them: pieces of message_parts.PIECE_SIZE, a
  primary key on their number, 1 MiB of them per statement and transaction, under the
  memory limit of an instance that binds no large value (storage.DEFAULT_MEMORY_LIMIT),
  checkpointed once all are in (Store.checkpoint_after_commit), read back 1 MiB of them
  per statement (message_parts.READ_RUN_BYTES) under the limit RECEIVE lowers it to
  (Store.streaming). The index costs: once the table is checkpointed, each COMMIT that
  adds rows reads back the rows stored before them in the same vector of 2,048, BLOBs and
  all (DuckDB 1.5.6 writes its log from the vector's start), and without one DuckDB
  rewrites the table's last row group at every checkpoint and fails once it outgrows the
  limit (migrations/012).

Reported per way: the peak growth once the body is stored, and the peak growth once it is
read back too (the copy read back, 1x, counted as RECEIVE's is).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb

from pybroker.arguments import check_memory_limit
from pybroker.core.wire.dialog import DEFAULT_FRAGMENT_SIZE
from pybroker.devtools.bench.big_body_child import baseline, status_kb
from pybroker.kernel.messaging.message_parts import (
    PIECE_SIZE,
    READ_RUN_BYTES,
    STREAM_LIMIT,
)
from pybroker.storage import templates as sql_templates
from pybroker.storage.store import BODY_ROOM, CHECKPOINT_THRESHOLD, DEFAULT_MEMORY_LIMIT

WAYS = ("whole", "send", "parts", "pieces")


def _sql(template: str) -> str:
    return sql_templates.render(f"bench/{template}.sql")


def measure(way: str, folder: Path, size: int) -> dict[str, Any]:
    """One way of storing and reading back a body of ``size`` bytes, in this process."""
    if way not in WAYS:
        raise ValueError(f"unknown way {way!r}: choose one of {', '.join(WAYS)}")
    body = os.urandom(size)
    limit = check_memory_limit(DEFAULT_MEMORY_LIMIT)
    if way != "pieces":
        limit += BODY_ROOM * size
    with tempfile.TemporaryDirectory(dir=folder, prefix=f"body-floor-{way}-") as tmp:
        con = duckdb.connect(str(Path(tmp) / "floor.duckdb"))
        try:
            con.execute("SET threads = 1")
            con.execute(sql_templates.render("instance/set_checkpoint_threshold.sql"),
                        {"threshold": CHECKPOINT_THRESHOLD})
            con.execute("SET memory_limit = $limit", {"limit": f"{limit}B"})
            con.execute(_sql("create_body_floor_keyed" if way == "pieces"
                             else "create_body_floor"))
            start = baseline()
            # "whole" is one part of the body's size; "pieces", pieces of PIECE_SIZE
            # 1 MiB in a statement and commit; the other ways, parts of 1 MiB
            step = {"whole": max(size, 1), "pieces": PIECE_SIZE}.get(
                way, DEFAULT_FRAGMENT_SIZE)
            count = -(-size // step)
            per_commit = {"parts": 1, "pieces": max(1, DEFAULT_FRAGMENT_SIZE // step)
                          }.get(way, count)
            view = memoryview(body)
            if way == "pieces":
                for first in range(0, count, per_commit):
                    numbers = list(range(first, min(first + per_commit, count)))
                    con.execute(_sql("insert_body_floor_pieces"), {
                        "part_numbers": numbers,
                        "parts": [view[n * step:(n + 1) * step].tobytes() for n in numbers]})
                con.execute("CHECKPOINT")
            else:
                for number in range(count):
                    if number % per_commit == 0:
                        con.execute("BEGIN TRANSACTION")
                    con.execute(_sql("insert_body_floor"), {
                        "part_number": number,
                        "part": body if count == 1
                        else view[number * step:(number + 1) * step].tobytes()})
                    if number % per_commit == per_commit - 1 or number == count - 1:
                        con.execute("COMMIT")
            del view
            stored = status_kb("VmHWM") - start
            del body
            gc.collect()
            if way == "pieces":
                con.execute("SET memory_limit = $limit", {"limit": f"{STREAM_LIMIT}B"})
            out = bytearray(size)
            offset = 0
            per_read = max(1, READ_RUN_BYTES // step) if way == "pieces" else 1
            for first in range(0, count, per_read):
                if per_read == 1:
                    read, params = "select_body_floor_part", {"part_number": first}
                else:
                    read, params = "select_body_floor_parts", {
                        "first_part_number": first, "last_part_number": first + per_read - 1}
                rows = con.execute(_sql(read), params).fetchall()
                for (part,) in rows:
                    out[offset:offset + len(part)] = part
                    offset += len(part)
                del rows
            read_back = status_kb("VmHWM") - start
            if offset != size:
                raise RuntimeError(f"the floor read back {offset} bytes of {size}")
        finally:
            con.close()
    return {"way": way, "stored": stored, "read_back": read_back, "memory_limit": limit}


def run_children(folder: Path, size: int) -> dict[str, dict[str, Any]]:
    """Each way in its own fresh process (a clean baseline each)."""
    results: dict[str, dict[str, Any]] = {}
    for way in WAYS:
        done = subprocess.run(
            [sys.executable, "-m", "pybroker.devtools.bench.big_body_floor", way, str(folder),
             str(size)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the storage floor ({way}) failed: "
                               f"{done.stderr.strip()[-2000:]}")
        results[way] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


if __name__ == "__main__":  # pragma: no cover
    way_arg, folder_arg, size_arg = sys.argv[1:4]
    print(json.dumps(measure(way_arg, Path(folder_arg), int(size_arg))))
