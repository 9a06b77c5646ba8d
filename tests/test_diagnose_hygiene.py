"""The conversation hygiene rules of diagnose (D-CNV-006 to D-CNV-009): each situation built
in a real instance file (under a fake clock where time matters), its finding, and the
finding gone once the fix is applied; and a leak of 10,000 fire-and-forget conversations
reported with its count and its growth since an earlier reading."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path

import duckdb

import pybroker
from tests.cli_helpers import call
from tests.test_diagnose import _conversations, codes, only

DAY = 86400.0


class Clock:
    """A clock the test moves (epoch seconds)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def at(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.now, dt.UTC)


def _app(inst: pybroker.Instance):
    db = inst.create_database("App")
    db.create_queue("InitQueue")
    db.create_service("Init", queue="InitQueue")
    db.create_queue("TargetQueue")
    db.create_service("Target", queue="TargetQueue", contracts=["DEFAULT"])
    return db


def _drain(db) -> list:
    got = []
    while batch := db.receive("TargetQueue", max_messages=100):
        got.extend(batch)
    return got


# -- D-CNV-006 ------------------------------------------------------------------------------


def test_endpoints_with_no_traffic_for_long(tmp_path):
    clock = Clock()
    file = tmp_path / "idle.duckdb"
    with pybroker.connect(file, worker=False, clock=clock) as inst:
        db = _app(inst)
        quiet = db.begin_dialog("Init", "Target")
        quiet.send(b"x")
        _drain(db)  # received: nothing of it is left to show traffic
        clock.now += 2 * DAY
        busy = db.begin_dialog("Init", "Target")
        busy.send(b"y")  # waits in the target's queue: traffic now
        clock.now += 0.5 * DAY
    assert "D-CNV-006" not in codes(pybroker.diagnose([file], now=clock.at(),
                                                      idle_age=dt.timedelta(days=3)))
    found = [f for f in pybroker.diagnose([file], now=clock.at()) if f.code == "D-CNV-006"]
    # the quiet dialog's two sides (2.5 days); the busy one's message is half a day old
    assert [(f.database, f.objects) for f in found] == [
        ("App", ("CONVERSING endpoints (2 idle)",))]
    assert "longer than 1 day(s)" in found[0].happens
    with pybroker.connect(file, worker=False, clock=clock) as inst:  # the fix: end them
        db = inst.database("App")
        target = next(m for m in db.receive("TargetQueue", max_messages=10))
        db.conversation(target.conversation_handle).end()
        db.conversation(quiet.handle).end()
        for handle in [r[0] for r in inst.sql(
                "SELECT conversation_handle FROM sys.conversation_endpoints "
                "WHERE state_desc <> 'CLOSED' AND NOT is_initiator").fetchall()]:
            db.conversation(handle).end()
    assert "D-CNV-006" not in codes(pybroker.diagnose([file], now=clock.at()))


def test_a_dialog_timer_to_come_is_not_idle(tmp_path):
    clock = Clock()
    file = tmp_path / "timer.duckdb"
    with pybroker.connect(file, worker=False, clock=clock) as inst:
        db = _app(inst)
        conv = db.begin_dialog("Init", "Target")
        conv.send(b"x")
        _drain(db)
        conv.begin_timer(5 * DAY)  # waits by design
    later = clock.at() + dt.timedelta(days=2)
    found = only(pybroker.diagnose([file], now=later), "D-CNV-006")
    assert found.objects == ("CONVERSING endpoints (1 idle)",)  # the target side only


# -- D-CNV-007, D-CNV-008 --------------------------------------------------------------------


def test_initiators_that_end_before_their_targets(tmp_path):
    file = tmp_path / "forget.duckdb"
    _conversations(file, 3, end=True)
    found = only(pybroker.diagnose([file]), "D-CNV-007")  # a pattern: no age, no count
    assert (found.severity, found.database) == ("warning", "App")
    assert found.objects == ("service Target", "far service Init",
                             "DISCONNECTED_INBOUND endpoints (3)")
    assert "3 dialog(s) from Init to Target" in found.happens
    assert "3 of their initiators CLOSED here" in found.happens
    with pybroker.connect(file, worker=False) as inst:  # the fix: the target ends its side
        db = inst.database("App")
        for (handle,) in inst.sql("SELECT conversation_handle FROM sys.conversation_endpoints"
                                  " WHERE state_desc = 'DISCONNECTED_INBOUND'").fetchall():
            db.conversation(handle).end()
    assert "D-CNV-007" not in codes(pybroker.diagnose([file]))


def test_a_target_service_that_never_ends_its_dialogs(tmp_path):
    clock = Clock()
    file = tmp_path / "never.duckdb"
    with pybroker.connect(file, worker=False, clock=clock) as inst:
        db = _app(inst)
        for _ in range(3):
            db.begin_dialog("Init", "Target").send(b"x")
        got = _drain(db)
    later = clock.at() + dt.timedelta(hours=2)
    assert "D-CNV-008" not in codes(pybroker.diagnose([file], leak_count=3))  # young
    found = only(pybroker.diagnose([file], now=later, leak_count=3), "D-CNV-008")
    assert (found.database, found.objects) == ("App", ("service Target",))
    assert "3 of 3 target endpoint(s) of Target" in found.happens
    assert "0 of them DISCONNECTED_INBOUND" in found.happens
    with pybroker.connect(file, worker=False, clock=clock) as inst:  # the fix: it answers, ends
        db = inst.database("App")
        for message in got:
            db.conversation(message.conversation_handle).end()
    assert "D-CNV-008" not in codes(pybroker.diagnose([file], now=later, leak_count=3))


# -- D-CNV-009 -------------------------------------------------------------------------------


def test_closed_endpoints_kept_long(tmp_path):
    file = tmp_path / "closed.duckdb"
    with pybroker.connect(file, worker=False) as inst:
        db = _app(inst)
        for _ in range(3):
            db.begin_dialog("Init", "Target").send(b"x")
        for message in _drain(db):  # the target answers by ending; the initiator ends too
            db.conversation(message.conversation_handle).end()
        while batch := db.receive("InitQueue", max_messages=100):
            for message in batch:
                db.conversation(message.conversation_handle).end()
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    findings = pybroker.diagnose([file], now=later, leak_count=6)
    found = only(findings, "D-CNV-009")
    assert (found.severity, found.objects) == ("info", ("CLOSED endpoints",))
    assert "6 CLOSED conversation endpoint(s) of App" in found.happens
    assert not {"D-CNV-007", "D-CNV-008", "D-CNV-006"} & set(codes(findings))
    with pybroker.connect(file, worker=False) as inst:  # the fix, as it is given
        db = inst.database("App")
        for (handle,) in inst.sql("SELECT conversation_handle FROM sys.conversation_endpoints"
                                  " WHERE state_desc = 'CLOSED'").fetchall():
            db.execute(f"END CONVERSATION '{handle}' WITH CLEANUP")
    assert "D-CNV-009" not in codes(pybroker.diagnose([file], now=later, leak_count=6))


# -- the leak of 10,000 ----------------------------------------------------------------------


def _copies(file: Path, count: int) -> None:
    """``count`` copies of the file's one fire-and-forget conversation (its two endpoint
    rows, each with a new handle and a new conversation id), in one INSERT: what 10,000
    conversations ended by the initiator and never by the target leave behind."""
    con = duckdb.connect(str(file))
    try:
        con.execute("""
            INSERT INTO conversation_endpoints
            SELECT e.* REPLACE (
                format('{:08x}-{:04x}-4{:03x}-8000-{:012x}', n.range, 1 + e.is_initiator::INT,
                       0, n.range) AS conversation_handle,
                format('{:08x}-0000-4000-9000-{:012x}', n.range, n.range) AS conversation_id)
            FROM conversation_endpoints AS e, range(?) AS n""", [count])
    finally:
        con.close()


def test_a_leak_of_ten_thousand_fire_and_forget_conversations(tmp_path):
    file = tmp_path / "leak.duckdb"
    _conversations(file, 1, end=True)
    with pybroker.connect(file, worker=False) as inst:
        earlier = inst.snapshot(tmp_path / "monday.duckdb")
    hour_ago = time.time() - 3600
    os.utime(earlier, (hour_ago, hour_ago))
    _copies(file, 10_000)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    findings = pybroker.diagnose([file], now=later, since=[earlier])
    forgotten = only(findings, "D-CNV-007")
    assert "10,001 dialog(s) from Init to Target" in forgotten.happens
    assert "10,001 of their initiators CLOSED here" in forgotten.happens
    grown = only(findings, "D-CNV-003")
    assert "grew from 2 to 20,002 (+20,000)" in grown.happens
    assert "CLOSED +10,000, DISCONNECTED_INBOUND +10,000" in grown.happens
    assert "10,001 of 20,002 conversation endpoints" in only(findings, "D-CNV-001").happens
    assert "10,001 of 10,001 target endpoint(s) of Target" in only(findings,
                                                                   "D-CNV-008").happens


def test_the_command_takes_the_idle_age(tmp_path, capsys):
    file = tmp_path / "idle.duckdb"
    _conversations(file, 1, end=False)  # young: idle only for a threshold of a second
    time_passes = pybroker.diagnose([file], idle_age=dt.timedelta(days=1))
    assert "D-CNV-006" not in codes(time_passes)
    code, out, _ = call(["diagnose", file, "--idle-age", "1e-6", "--json"], capsys)
    assert code == 0 and "D-CNV-006" in {f["code"] for f in json.loads(out)["findings"]}
    code, _, err = call(["diagnose", file, "--idle-age", "0"], capsys)
    assert code == 2 and "--idle-age" in err and err.count("\n") == 1
