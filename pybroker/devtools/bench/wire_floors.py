"""``pybroker bench wire``'s storage floors: the rows and commits of its cases in bare
tables, with nothing of pybroker's (the wire module's docstring says what each shows).

- ``commit_floor``: (c)'s three durable commits of one message in a row;
- ``paced_floor``: the same three commits at (c)'s pace, each step batching what is due,
  the receiver's RECEIVEs on its one connection or on a connection of their own;
- ``stream_floor``: (a) and (b)'s rows, the wire's row work pipelined on two files against
  local delivery's on one.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pybroker.devtools.bench.figures import percentiles_ms


@contextlib.contextmanager
def _floor_stores(folder: Path, *names: str) -> Iterator[list[Any]]:
    """Bare instance files ``folder/<name>.duckdb``, each with the floor's table, closed
    when the floor is done."""
    from pybroker.storage.store import Store

    stores = [Store(folder / f"{name}.duckdb") for name in names]
    try:
        for store in stores:
            store.run("bench/create_messaging_floor.sql")
        yield stores
    finally:
        for store in stores:
            store.close()


def _rows(first: int, last: int, conversations: int, body: bytes,
          now: Any) -> dict[str, Any]:
    """The parameters of insert_messaging_floor.sql: queuing orders first..last-1."""
    return {"first": first, "last": last, "conversations": conversations, "body": body,
            "now": now}


def commit_floor(folder: Path, total: int, body_bytes: int) -> dict[str, float]:
    """(c)'s storage floor: per message, one row in and committed on a sender's file, one
    row in and committed on a receiver's file, that row out (DELETE ... RETURNING) and
    committed: the three durable commits of SEND, arrival and RECEIVE, nothing else."""
    from pybroker.timestamps import utc_now

    with _floor_stores(folder, "floor-sender", "floor-receiver") as (sender, receiver):
        body, now = os.urandom(body_bytes), utc_now()
        samples = []
        for i in range(total):
            row = _rows(i, i + 1, 1, body, now)
            start = time.perf_counter()
            with sender.transaction():
                sender.run("bench/insert_messaging_floor.sql", row)
            with receiver.transaction():
                receiver.run("bench/insert_messaging_floor.sql", row)
            with receiver.transaction():
                if len(receiver.run("bench/delete_messaging_floor_group.sql",
                                    {"rows": 1})) != 1:
                    raise RuntimeError("the storage floor lost a row")
            samples.append(time.perf_counter() - start)
    return percentiles_ms(samples)


def stream_floor(folder: Path, sizes: dict[str, int], body_bytes: int) -> dict[str, float]:
    """(b)'s storage floor (see the module's docstring): the wire's row work pipelined on
    two files, then local delivery's on one; rate and CPU a message of each."""
    from pybroker.timestamps import utc_now

    total, per_tx = sizes["messages"], sizes["sends_per_transaction"]
    body, now = os.urandom(body_bytes), utc_now()

    def rows(first: int, last: int) -> dict[str, Any]:
        return _rows(first, last, sizes["conversations"], body, now)

    def measured(run: Any, *names: str) -> tuple[float, float]:
        with _floor_stores(folder, *(f"stream-floor-{name}" for name in names)) as stores:
            cpu, start = time.process_time(), time.perf_counter()
            run(*stores)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        return total / wall, cpu / total * 1e6

    def local(store: Any) -> None:
        for first in range(0, total, per_tx):
            with store.transaction():
                store.run("bench/insert_messaging_floor.sql",
                          rows(first, min(total, first + per_tx)))
        _take_floor(store, total, per_tx)

    def wire(sender: Any, receiver: Any) -> None:
        _wire_floor(sender, receiver, total, per_tx, rows)

    wire_rate, wire_cpu = measured(wire, "sender", "receiver")
    local_rate, local_cpu = measured(local, "local")
    return {"wire_per_s": wire_rate, "wire_cpu_us_per_message": wire_cpu,
            "local_per_s": local_rate, "local_cpu_us_per_message": local_cpu}


def _take_floor(store: Any, total: int, per_tx: int,
                arrived: Any = None) -> None:
    """RECEIVE in the storage floor: the first rows out, at most ``per_tx`` a transaction,
    until ``total`` are out; ``arrived`` (a callable) waits until rows beyond those taken
    are in and returns how many are (None: all are in already)."""
    taken = 0
    while taken < total:
        waiting = total - taken if arrived is None else arrived(taken) - taken
        with store.transaction():
            got = store.run("bench/delete_messaging_floor.sql", {"rows": min(waiting, per_tx)})
        if not got:
            raise RuntimeError(f"the storage floor gave back {taken} of {total} rows")
        taken += len(got)


def _handed_over(handed: Any) -> Any:
    """The batches a storage floor's arrival thread commits: the range of queuing orders
    handed over first and everything handed over meanwhile (consecutive ranges, merged),
    until None is handed over."""
    import queue

    while (item := handed.get()) is not None:
        first, last = item
        while True:
            try:
                nxt = handed.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                handed.put(None)  # seen by the next get: the last batch goes first
                break
            last = nxt[1]
        yield first, last


def _wire_floor(sender: Any, receiver: Any, total: int, per_tx: int, rows: Any) -> None:
    """The wire's row work in (b)'s storage floor: the SEND's batches into the sender's
    file, each handed to an arrival thread that commits what was handed over meanwhile
    into the receiver's file and hands the batch back to an acknowledgement thread, which
    deletes it from the sender's file; a RECEIVE thread takes what arrived."""
    import queue

    handed: queue.Queue[tuple[int, int] | None] = queue.Queue()
    acked: queue.Queue[tuple[int, int] | None] = queue.Queue()
    in_queue = threading.Condition()
    state = {"arrived": 0}
    failures: list[BaseException] = []

    def arrive() -> None:
        try:
            for first, last in _handed_over(handed):
                with receiver.transaction():
                    receiver.run("bench/insert_messaging_floor.sql", rows(first, last))
                acked.put((first, last))
                with in_queue:
                    state["arrived"] = last
                    in_queue.notify()
        except BaseException as exc:
            failures.append(exc)
        finally:
            acked.put(None)
            with in_queue:
                in_queue.notify()

    def acknowledge() -> None:
        try:
            while (item := acked.get()) is not None:
                first, last = item
                with sender.transaction():
                    gone = sender.run("bench/delete_messaging_floor_range.sql",
                                      {"first": first, "last": last})
                if len(gone) != last - first:
                    raise RuntimeError("the storage floor lost an acknowledged row")
        except BaseException as exc:
            failures.append(exc)

    def arrived(taken: int) -> int:
        with in_queue:
            while state["arrived"] == taken and not failures:
                in_queue.wait(1.0)
            if failures:
                raise RuntimeError("the storage floor's arrivals failed")
            return state["arrived"]

    def take() -> None:
        try:
            _take_floor(receiver, total, per_tx, arrived)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=t) for t in (arrive, acknowledge, take)]
    for thread in threads:
        thread.start()
    try:
        for first in range(0, total, per_tx):
            if failures:
                break
            last = min(total, first + per_tx)
            with sender.transaction():
                sender.run("bench/insert_messaging_floor.sql", rows(first, last))
            handed.put((first, last))
    finally:
        handed.put(None)
        for thread in threads:
            thread.join(timeout=60)
    if failures:
        raise failures[0]


def paced_floor(folder: Path, total: int, rate: float, body_bytes: int, *,
                 connections: int = 1) -> dict[str, float]:
    """(c)'s storage floor at (c)'s pace: the SEND's, the arrival's and the RECEIVE's bare
    commits, each step in its own thread taking everything due or waiting (see the module's
    docstring). Latency: the RECEIVE's commit - the time the message was due.
    ``connections``: 1, the RECEIVE thread shares the receiver's connection with the
    arrival thread, one transaction at a time (as in an instance); 2, it has a connection
    of its own to the same file, so a RECEIVE's transaction runs beside an arrival's.
    ``cpus_busy``: this process's CPU time over the wall time of the paced run."""
    import queue

    from pybroker.timestamps import utc_now

    if connections not in (1, 2):
        raise ValueError(f"the paced floor has 1 or 2 connections, not {connections!r}")
    suffix = "" if connections == 1 else f"-{connections}"
    with _floor_stores(folder, f"paced-floor{suffix}-sender",
                       f"paced-floor{suffix}-receiver") as (sender, receiver), \
            _take_floor_rows(receiver, connections) as take_rows:
        body, now = os.urandom(body_bytes), utc_now()
        handed: queue.Queue[tuple[int, int] | None] = queue.Queue()
        arrived = threading.Condition()
        state = {"arrived": 0, "taken": 0, "transactions": 0}
        due_at = [0.0] * total
        latencies: list[float] = []
        failures: list[BaseException] = []

        def rows(first: int, last: int) -> dict[str, Any]:
            return _rows(first, last, 1, body, now)

        def arrive() -> None:
            try:
                for first, last in _handed_over(handed):
                    with receiver.transaction():
                        receiver.run("bench/insert_messaging_floor.sql", rows(first, last))
                    with arrived:
                        state["arrived"] = last
                        arrived.notify()
            except BaseException as exc:
                failures.append(exc)
                with arrived:
                    arrived.notify()

        def take() -> None:
            try:
                while state["taken"] < total and not failures:
                    with arrived:
                        while state["arrived"] == state["taken"] and not failures:
                            arrived.wait(1.0)
                        waiting = state["arrived"] - state["taken"]
                    if failures:
                        return
                    got = take_rows(waiting)
                    committed = time.time()
                    if len(got) != waiting:
                        raise RuntimeError("the paced storage floor lost a row")
                    latencies.extend(committed - due_at[r[0]] for r in got)
                    state["taken"] += waiting
                    state["transactions"] += 1
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=arrive), threading.Thread(target=take)]
        cpu_before = time.process_time()
        for thread in threads:
            thread.start()
        try:
            start, sent = time.time(), 0
            while sent < total and not failures:
                due = min(total, int((time.time() - start) * rate) + 1)
                if due <= sent:
                    time.sleep(max(0.0, start + sent / rate - time.time()))
                    continue
                stamp = time.time()
                for i in range(sent, due):
                    due_at[i] = stamp
                with sender.transaction():
                    sender.run("bench/insert_messaging_floor.sql", rows(sent, due))
                handed.put((sent, due))
                sent = due
        finally:
            handed.put(None)
            for thread in threads:
                thread.join(timeout=60)
        cpus_busy = (time.process_time() - cpu_before) / max(1e-9, time.time() - start)
        if failures:
            raise failures[0]
    figures = percentiles_ms(latencies)
    figures["messages_per_transaction"] = total / max(1, state["transactions"])
    figures["cpus_busy"] = cpus_busy
    return figures


@contextlib.contextmanager
def _take_floor_rows(receiver: Any, connections: int) -> Iterator[Any]:
    """The paced floor's RECEIVE: the first ``rows`` rows out and committed, through the
    receiver's Store (one connection, its lock shared with the arrivals) or through a
    connection of its own to the same file (a cursor: its own transactions, closed when
    the floor is done, before the files)."""
    if connections == 1:
        def take(rows: int) -> list[tuple[Any, ...]]:
            with receiver.transaction():
                return receiver.run("bench/delete_messaging_floor_group.sql", {"rows": rows})
        yield take
        return
    from pybroker.storage import templates as sql_templates

    cursor = receiver.connection.cursor()
    sql = sql_templates.render("bench/delete_messaging_floor_group.sql")

    def take_apart(rows: int) -> list[tuple[Any, ...]]:
        cursor.execute("BEGIN TRANSACTION")
        try:
            got = cursor.execute(sql, {"rows": rows}).fetchall()
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")
        return got
    try:
        yield take_apart
    finally:
        cursor.close()
