"""``pybroker chaos crash``: SIGKILL a process that works on an instance file at random
instants, from its first statement on, and check after each kill that the file opens and
holds exactly what the process said it committed.

Each round starts ``pybroker.devtools.chaos.crash_child`` on one of:
  new        a file that does not exist yet (kills land inside connect(): the migrations)
  upgrade    a copy of a file at an earlier schema version, one per landed set of
             migrations (``fixtures``), and files an earlier pybroker left with its log
             not replayable by DuckDB 1.5.6 (killed before its first checkpoint)
  continue   the file of an earlier round, as that round's kill left it
The child says each operation before it starts and once it is committed (crash_child.py);
the check (``check``) reads the file back with pybroker.connect: every database, route
and message of an operation done is there, the operation under way is there whole or not
at all, nothing is there that no operation made, and no message is in two places or
twice.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

import pybroker
from pybroker.devtools.chaos.crash_child import SOURCE, TARGET
from pybroker.storage.schema import available_migrations
from pybroker.timestamps import utc_now

# seconds the driver waits for a child to say "start" before it gives up on the round
START_TIMEOUT = 60.0
# seconds a kill may land after the child says "start" (the open of a new or older file,
# its migrations, takes ~0.2-0.6 s), or after it says "opened" (among the operations)
EARLY_KILL = 0.7
LATE_KILL = 1.5


@dataclass
class Model:
    """What a file holds, as far as the driver knows: after each round, what the check
    read back (so an operation cut off by the kill is settled one way or the other)."""

    databases: set[str] = field(default_factory=set)
    routes: dict[str, str] = field(default_factory=dict)  # Src's CrashRoute... -> address
    queued: set[str] = field(default_factory=set)  # bodies in Dst's queue or on their way
    received: set[str] = field(default_factory=set)
    services: set[str] = field(default_factory=set)  # databases whose service is made


def fixtures(directory: Path) -> dict[str, Path]:
    """An instance file per landed set of migrations (schema versions 1 to the newest
    before this pybroker's), each checkpointed as its pybroker left it, and two files an
    earlier pybroker left killed before its first checkpoint (its log holding migration
    012's ADD COLUMN ... DEFAULT nextval, which DuckDB 1.5.6 does not replay): one made
    new, one upgraded from version 11."""
    directory.mkdir(parents=True, exist_ok=True)
    found: dict[str, Path] = {}
    migrations = available_migrations()
    landed = [(version, path) for version, _name, path in migrations if version <= 13]
    for upto in range(1, len(landed) + 1):
        found[f"v{upto:03d}"] = _build(directory / f"v{upto:03d}.duckdb", landed[:upto])
    # 012 as it first landed made the index 013 makes (and 013 then failed on such a file)
    found["v012+index"] = _build(directory / "v012_index.duckdb", landed[:12],
                                 extra=(landed[12][1].read_text(encoding="utf-8"),))
    found["killed-new"] = _killed(directory / "killed_new.duckdb", None, landed)
    found["killed-upgrade"] = _killed(directory / "killed_upgrade.duckdb",
                                      found["v011"], landed[11:])
    return found


def _apply(con: duckdb.DuckDBPyConnection, version: int, text: str) -> None:
    con.execute("BEGIN TRANSACTION")
    con.execute(text)
    con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)",
                [version, f"m{version:03d}", utc_now()])
    con.execute("COMMIT")


def _build(path: Path, landed: list[tuple[int, Path]], extra: tuple[str, ...] = ()) -> Path:
    for stale in (path, Path(f"{path}.wal")):
        stale.unlink(missing_ok=True)
    con = duckdb.connect(str(path))
    try:
        for version, source in landed:
            _apply(con, version, source.read_text(encoding="utf-8"))
        for text in extra:
            con.execute(text)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return path


_KILLED_CHILD = r"""
import datetime, os, signal, sys
import duckdb
path, texts = sys.argv[1], sys.argv[2:]
con = duckdb.connect(path)
for i in range(0, len(texts), 2):
    con.execute("BEGIN TRANSACTION")
    con.execute(open(texts[i + 1], encoding="utf-8").read())
    con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)",
                [int(texts[i]), "m" + texts[i], datetime.datetime(2000, 1, 1)])
    con.execute("COMMIT")
con.execute("INSERT INTO databases VALUES (5, 'Kept', 'aaaaaaaa-0000-4000-8000-000000000005', "
            "TRUE, TIMESTAMP '2000-01-01')")
os.kill(os.getpid(), signal.SIGKILL)
"""


def _killed(path: Path, start: Path | None, landed: list[tuple[int, Path]]) -> Path:
    """A file an earlier pybroker left: ``landed`` applied (after ``start``'s copy) and a
    database 'Kept' committed, then SIGKILLed before any checkpoint."""
    for stale in (path, Path(f"{path}.wal")):
        stale.unlink(missing_ok=True)
    if start is not None:
        shutil.copyfile(start, path)
    args = [str(x) for version, source in landed for x in (version, source)]
    proc = subprocess.run([sys.executable, "-c", _KILLED_CHILD, str(path), *args],
                          capture_output=True, timeout=120)
    if proc.returncode != -signal.SIGKILL:
        raise RuntimeError(f"the fixture child did not end by its kill: {proc.stderr!r}")
    return path


def child_command(path: Path, seed: int) -> list[str]:
    return [sys.executable, "-m", "pybroker.devtools.chaos.crash_child", str(path), str(seed)]


def run_round(path: Path, seed: int, delay: float, after: str = "start"
              ) -> tuple[list[dict[str, Any]], str]:
    """Start the child on ``path``, SIGKILL it ``delay`` s after it says ``after``
    ("start": before connect(), "opened": once connect() returned), and return the lines
    it said and its stderr."""
    out_path = Path(f"{path}.child-out")
    err_path = Path(f"{path}.child-err")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(child_command(path, seed), stdout=out, stderr=err)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        said = f'{{"op": "{after}"}}'
        while said not in out_path.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the child ended before it said {after}: "
                                   f"{err_path.read_text()[-2000:]}")
            time.sleep(0.005)  # polling the child's own output for that line
        # the kill's instant is the experiment: a timed pause, not a wait for an event
        time.sleep(delay)
        if proc.poll() is not None:
            raise RuntimeError(f"the child ended on its own (exit {proc.returncode}) before "
                               f"its kill: {err_path.read_text()[-2000:]}")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    lines = []
    for text in out_path.read_text().splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            break  # a line cut by the kill
    stderr = err_path.read_text()
    out_path.unlink()
    err_path.unlink()
    return lines, stderr


def read_back(path: Path) -> Model:
    """What the file holds, read through pybroker.connect (which recovers it if need be)."""
    with pybroker.connect(path, worker=False) as inst:
        model = Model(databases={d.name for d in inst.databases()} - {"master", "msdb"})
        if SOURCE in model.databases:
            src = inst.database(SOURCE)
            model.routes = {r.name: r.address for r in src.routes()
                            if r.name.startswith("CrashRoute")}
        for name in model.databases & {SOURCE, TARGET}:
            if inst.database(name).services():
                model.services.add(name)
        rows = inst.sql(
            "SELECT decode(message_body) FROM sys.queue_messages "
            "WHERE database_name = $db AND message_type_name = 'DEFAULT' "
            "UNION ALL SELECT decode(message_body) FROM sys.transmission_queue "
            "WHERE database_name = $src AND message_type_name = 'DEFAULT'",
            {"db": TARGET, "src": SOURCE}).fetchall()
        bodies = [body for (body,) in rows]
        if len(bodies) != len(set(bodies)):
            dup = sorted({b for b in bodies if bodies.count(b) > 1})
            raise CrashViolation(f"messages in two places or twice: {dup[:5]}")
        model.queued = set(bodies)
        routes_local = inst.sql(
            "SELECT d.name FROM sys.databases AS d WHERE d.name NOT IN ('master', 'Kept') "
            "AND NOT EXISTS (SELECT 1 FROM sys.routes AS r "
            "WHERE r.database_name = d.name AND r.name = 'AutoCreatedLocal')").fetchall()
        if routes_local:
            raise CrashViolation(f"databases without their AutoCreatedLocal route (half "
                                 f"made): {sorted(n for (n,) in routes_local)}")
    return model


class CrashViolation(Exception):
    """The file after a kill is not what the child said it committed."""


def check(before: Model, lines: list[dict[str, Any]], after: Model) -> None:
    """Raise CrashViolation unless ``after`` is ``before`` with every operation the child
    said done applied, and the one under way (an intent with no done) applied whole or not
    at all."""
    done = [line["done"] for line in lines if "done" in line]
    intents = [line["intent"] for line in lines if "intent" in line]
    pending = intents[len(done)] if len(intents) > len(done) else None
    want = Model(set(before.databases), dict(before.routes), set(before.queued),
                 set(before.received), set(before.services))
    for op in done:
        _apply_op(want, op)
    problems = []
    maybe = Model(set(want.databases), dict(want.routes), set(want.queued),
                  set(want.received), set(want.services))
    if pending is not None and pending["op"] != "receive":
        _apply_op(maybe, pending)
    for name, mine in (("databases", "databases"), ("services", "services")):
        got, a, b = getattr(after, mine), getattr(want, mine), getattr(maybe, mine)
        if got not in (a, b):
            problems.append(f"{name}: {sorted(got)}, where the child's reports give "
                            f"{sorted(a)}" + (f" or {sorted(b)}" if b != a else ""))
    if after.routes not in (want.routes, maybe.routes):
        problems.append(f"routes: {after.routes}, where the child's reports give "
                        f"{want.routes}" + (f" or {maybe.routes}"
                                            if maybe.routes != want.routes else ""))
    # messages: a send done is queued until a RECEIVE done takes it; one under way adds its
    # body or not; a RECEIVE under way takes one conversation group's (at most 3) or none
    if pending is not None and pending["op"] == "receive":
        gone = want.queued - after.queued
        if not after.queued <= want.queued or len(gone) > 3:
            problems.append(f"queued {sorted(after.queued)[:5]}..., where the child's "
                            f"reports give {sorted(want.queued)[:5]}... less at most the 3 "
                            "the RECEIVE under way takes")
    elif after.queued not in (want.queued, maybe.queued):
        lost = sorted(want.queued - after.queued)
        extra = sorted(after.queued - maybe.queued)
        problems.append(f"messages sent and neither queued nor received: {lost[:5]}; "
                        f"queued that no send made (or received again): {extra[:5]}")
    if problems:
        raise CrashViolation("; ".join(problems))


def _apply_op(model: Model, op: dict[str, Any]) -> None:
    kind = op["op"]
    if kind == "database":
        model.databases.add(op["name"])
    elif kind == "service":
        model.services.add(op["database"])
    elif kind in ("route", "alter_route"):
        model.routes[op["name"]] = op["address"]
    elif kind == "drop_route":
        model.routes.pop(op["name"], None)
    elif kind == "send":
        model.queued.add(op["body"])
    elif kind == "receive":
        taken = set(op.get("bodies", ()))
        model.queued -= taken
        model.received |= taken


@dataclass
class Report:
    rounds: int = 0
    by_start: dict[str, int] = field(default_factory=dict)
    killed_in_open: int = 0  # the kill landed before connect() returned
    operations_done: int = 0
    recovered_logs: int = 0  # files whose log did not replay as DuckDB opens a file
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "by_start": self.by_start,
                "killed_in_open": self.killed_in_open,
                "operations_done": self.operations_done,
                "recovered_logs": self.recovered_logs, "violations": self.violations,
                "valid": not self.violations, "seconds": round(self.seconds, 1)}


def _replays_directly(path: Path) -> bool:
    """Whether DuckDB opens ``path`` as its default database (its log replays so)."""
    if not Path(f"{path}.wal").exists():
        return True
    scratch = path.with_name(path.name + ".probe")
    shutil.copyfile(path, scratch)
    shutil.copyfile(f"{path}.wal", f"{scratch}.wal")
    try:
        duckdb.connect(str(scratch)).close()
        return True
    except duckdb.Error:
        return False
    finally:
        for leftover in (scratch, Path(f"{scratch}.wal")):
            leftover.unlink(missing_ok=True)


@dataclass(frozen=True)
class Round:
    start: str  # "new", "upgrade" or "continue"
    fixture: str | None  # the earlier file an upgrade starts from (fixtures())
    after: str  # the kill's delay counts from the child's "start" or "opened"
    delay: float


def plan(rounds: int, seed: int, fixture_names: list[str]) -> list[Round]:
    """The rounds ``seed`` draws: how each starts, and when its kill lands. Half the kills
    count from the child's first statement (most land inside connect()), half from the end
    of connect() (among the operations), whatever the machine's speed."""
    rng = random.Random(seed)
    drawn = []
    for n in range(rounds):
        start = rng.choices(("new", "upgrade", "continue"), (1, 1, 2))[0]
        if start == "continue" and n == 0:
            start = "new"
        fixture = rng.choice(sorted(fixture_names)) if start == "upgrade" else None
        after = "start" if rng.random() < 0.5 else "opened"
        delay = rng.uniform(0, EARLY_KILL if after == "start" else LATE_KILL)
        drawn.append(Round(start, fixture, after, delay))
    return drawn


def run(rounds: int, seed: int, directory: Path,
        log: Callable[[str], None] | None = None) -> Report:
    """``rounds`` kills, drawn from ``seed`` (plan); every violation is in the report."""
    directory.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    kinds = fixtures(directory / "fixtures")
    report = Report()
    current: Path | None = None
    model = Model()
    for n, drawn in enumerate(plan(rounds, seed, list(kinds))):
        start, after, delay = drawn.start, drawn.after, drawn.delay
        if start == "continue" and current is None:  # the last round's file failed
            start = "new"
        if start == "new":
            current, model = directory / f"round{n}.duckdb", Model()
        elif start == "upgrade":
            name = drawn.fixture
            assert name is not None
            current = directory / f"round{n}.duckdb"
            shutil.copyfile(kinds[name], current)
            if Path(f"{kinds[name]}.wal").exists():
                shutil.copyfile(f"{kinds[name]}.wal", f"{current}.wal")
            model = Model(databases={"Kept"} if name.startswith("killed") else set())
            start = f"upgrade {name}"
        assert current is not None
        report.by_start[start.split()[0]] = report.by_start.get(start.split()[0], 0) + 1
        lines, stderr = run_round(current, seed * 100_000 + n, delay, after)
        if not any(line.get("op") == "opened" for line in lines):
            report.killed_in_open += 1
        report.operations_done += sum(1 for line in lines if "done" in line)
        if not _replays_directly(current):
            report.recovered_logs += 1
        problem = None
        try:
            found = read_back(current)
            check(model, lines, found)
            found.received = model.received | (model.queued - found.queued)
            model = found
        except (CrashViolation, pybroker.BrokerError) as exc:
            problem = f"round {n} ({start}, killed {delay:.3f} s after {after}): {exc}"
            report.violations.append(problem)
            current = None  # the next round starts afresh
        if "Traceback" in stderr and "KeyboardInterrupt" not in stderr:
            report.violations.append(f"round {n}: the child failed before its kill: "
                                     f"{stderr[-1500:]}")
        report.rounds += 1
        if log is not None:
            log(f"round {n}: {start}, kill {delay:.3f} s after {after}, "
                f"{sum(1 for line in lines if 'done' in line)} done"
                + (f" -- {problem}" if problem else ""))
    report.seconds = time.monotonic() - started
    return report
