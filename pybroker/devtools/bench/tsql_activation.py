"""The T-SQL activation case of ``pybroker bench messaging`` (C8): messages handled per
second by a queue activated with a T-SQL stored procedure, against a Python callable of
the same shape, in the same run; the target is a rate of at least half the callable's.

Both readers do what a Service Broker service's procedure does: a WHILE loop of
``WAITFOR (RECEIVE TOP (100) ...)`` in a transaction, which ends when a RECEIVE waits
``WAIT`` seconds in vain, a branch on the last message's ``message_type_name`` and a reply
SEND on its conversation (END CONVERSATION for any other type), then COMMIT. Each case runs
on an instance of its own with MAX_QUEUE_READERS 1: the queue is filled first (before
activation starts), then the clock runs from ``start_activation()`` until the queue is
empty (polled every ``POLL`` seconds), so both cases count the same monitor delay; the
process's CPU time over the same span, a message, is reported beside the rate.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from pybroker.api.database import Database
from pybroker.api.instance import Instance
from pybroker.devtools.bench.objects import initiator_and_target

QUEUE = "ReplyingQueue"
BATCH = 100  # RECEIVE TOP (100)
WAIT = 0.2  # seconds a RECEIVE waits before the reader returns
CHECK_INTERVAL = 0.02  # the monitors' checks
POLL = 0.01  # how often the bench looks whether the queue is empty
TARGET_RATIO = 0.5
PROCEDURE_NAME = "dbo.BenchReader"
PYTHON_PROCEDURE = "pybroker.devtools.bench.tsql_activation:reply_reader"
PROCEDURE = f"""CREATE PROCEDURE {PROCEDURE_NAME} AS
DECLARE @handle UNIQUEIDENTIFIER, @type SYSNAME, @body VARBINARY(MAX);
WHILE 1 = 1
BEGIN
    BEGIN TRANSACTION;
    WAITFOR (RECEIVE TOP ({BATCH}) @handle = conversation_handle, @type = message_type_name,
        @body = message_body FROM {QUEUE}), TIMEOUT {int(WAIT * 1000)};
    IF @@ROWCOUNT = 0
    BEGIN
        ROLLBACK TRANSACTION;
        BREAK;
    END
    IF @type = N'DEFAULT'
        SEND ON CONVERSATION @handle (N'done');
    ELSE
        END CONVERSATION @handle;
    COMMIT TRANSACTION;
END"""

def reply_reader(db: Database) -> None:
    """The Python callable of the same shape as PROCEDURE."""
    while True:
        with db.transaction():
            got = db.receive(QUEUE, max_messages=BATCH, timeout=WAIT)
            if not got:
                return
            last = got[-1]
            conversation = db.conversation(last.conversation_handle)
            if last.message_type_name == "DEFAULT":
                conversation.send("done")
            else:
                conversation.end()


def _case(sizes: dict[str, int], body: bytes, procedure: str) -> dict[str, float]:
    total, per_tx = sizes["tsql_activation_messages"], sizes["sends_per_transaction"]
    with (
        tempfile.TemporaryDirectory(prefix="pybroker-bench-") as tmp,
        Instance(Path(tmp) / "tsql-activation.duckdb", worker=False) as inst,
    ):
        initiator, target = initiator_and_target(inst, QUEUE)
        if procedure == PROCEDURE_NAME:
            target.execute(PROCEDURE)
        target.alter_queue(QUEUE, activation_procedure=procedure, max_queue_readers=1)
        with initiator.transaction():
            convs = [initiator.begin_dialog("InitiatorService", "TargetService")
                     for _ in range(sizes["conversations"])]
        for first in range(0, total, per_tx):
            with initiator.transaction():
                for i in range(first, min(total, first + per_tx)):
                    convs[i % len(convs)].send(body)
        left = "SELECT count(*) FROM queue_messages WHERE queue_name = ?"
        start, cpu = time.perf_counter(), time.process_time()
        inst.start_activation(check_interval=CHECK_INTERVAL, close_timeout=5.0)
        deadline = time.monotonic() + 600
        while inst.sql(left, [QUEUE]).fetchone()[0]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"T-SQL activation case: {procedure} did not empty the "
                                   "queue in 600 s")
            time.sleep(POLL)
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu
        replies = inst.sql(left, ["InitiatorQueue"]).fetchone()[0]
    return {"messages": total, "handled_per_s": total / seconds,
            "cpu_us_per_message": cpu / total * 1e6, "replies": replies}


def run(sizes: dict[str, int], body: bytes) -> dict[str, Any]:
    """Both cases twice, in the order Python, T-SQL, T-SQL, Python (so that a machine
    getting slower or faster during the run favours neither); the mean of each case's two
    runs, and the ratio of the rates. The CPU a message (the whole process's, the poll
    included) is the steadier figure on a shared machine."""
    runs: dict[str, list[dict[str, float]]] = {PYTHON_PROCEDURE: [], PROCEDURE_NAME: []}
    for procedure in (PYTHON_PROCEDURE, PROCEDURE_NAME, PROCEDURE_NAME, PYTHON_PROCEDURE):
        runs[procedure].append(_case(sizes, body, procedure))
    python, tsql = (_mean(runs[p]) for p in (PYTHON_PROCEDURE, PROCEDURE_NAME))
    return {"python": python, "tsql": tsql,
            "ratio": tsql["handled_per_s"] / python["handled_per_s"],
            "cpu_ratio": python["cpu_us_per_message"] / tsql["cpu_us_per_message"],
            "target_ratio": TARGET_RATIO}


def _mean(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: (sum(r[key] for r in runs) / len(runs) if key != "messages" else
                  runs[0][key]) for key in runs[0]}


def format_case(r: dict[str, Any] | None) -> list[str]:
    if r is None:
        return []
    verdict = "met" if r["ratio"] >= r["target_ratio"] else "MISSED"
    p, t = r["python"], r["tsql"]
    return [f"activation by a T-SQL procedure (C8): WHILE of WAITFOR (RECEIVE TOP ({BATCH})), "
            f"IF on message_type_name, a reply SEND, COMMIT; {t['messages']:,} messages, "
            f"MAX_QUEUE_READERS 1: T-SQL {t['handled_per_s']:,.0f}/s, the Python callable of "
            f"the same shape {p['handled_per_s']:,.0f}/s; T-SQL/Python {r['ratio']:.0%} "
            f"(target >= {r['target_ratio']:.0%}: {verdict}); CPU a message "
            f"{t['cpu_us_per_message']:,.0f} / {p['cpu_us_per_message']:,.0f} µs "
            f"(Python/T-SQL {r['cpu_ratio']:.0%}); each case twice, Python, T-SQL, T-SQL, "
            "Python"]
