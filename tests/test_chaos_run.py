"""The short chaos run (fixed seed): two instances as processes, every proxy fault on, each
instance SIGKILLed twice and paused once while ~400 messages of mixed sizes (some
fragmented) cross both ways; the nemesis kills from the first second (each file first made
by a process SIGKILLed inside its connect(), one kill of each instance in its start). The
long version is ``pybroker chaos run`` (README, Reliability). Deselect with ``-m 'not chaos'``."""

from __future__ import annotations

import json

import pytest

from pybroker.devtools.chaos import runner
from pybroker.devtools.chaos.proxy import FAULTS

pytestmark = pytest.mark.chaos


def test_short_chaos_run_loses_nothing(tmp_path):
    options = runner.Options(
        seed=20261123, instances=2, messages=400, duration=25.0, conversations=8,
        kills=1, early_kills=1, pauses=1, faults=FAULTS, max_body=512 * 1024, big_every=40,
        fragment_size=64 * 1024, batch=20, retry_scale=0.1, drain_timeout=150.0,
        directory=str(tmp_path / "run"))
    report = runner.run(options, log=lambda _text: None)
    v = report["verdict"]
    assert report["drained"] is True, runner.summary(report)
    assert (v["sent"], v["acknowledged"], v["received"]) == (400, 400, 400), v
    assert (v["lost"], v["duplicated"], v["out_of_order"], v["unexpected"],
            v["corrupted"], v["incomplete"], v["last_not_delivered"]) == (0,) * 7, v
    assert v["valid"] is True
    assert {n: d["sigkills"] for n, d in report["nodes"].items()} == {"A": 2, "B": 2}
    assert sum(report["creations_killed"].values()) == 2
    assert all(d["unexpected_exits"] == [] for d in report["nodes"].values())
    assert report["options"]["encryption"] is False  # frame faults need frames in clear
    assert report["faults_injected"]["connections"] >= 2
    saved = json.loads((tmp_path / "run" / "report.json").read_text())
    assert saved["verdict"] == v


def test_short_chaos_run_with_receiving_workers_loses_nothing(tmp_path):
    """C7: four receiving worker processes per queue, each RECEIVE of one message processed
    inside its transaction, recorded and committed; the nemesis SIGKILLs them among them
    (and each instance once). The record, in commit order, is what the checker reads."""
    options = runner.Options(
        seed=20261202, instances=2, messages=200, duration=10.0, conversations=6,
        kills=1, pauses=0, faults=("latency", "reset", "slice"), max_body=256 * 1024,
        big_every=40, batch=10, retry_scale=0.1, drain_timeout=120.0, workers=4,
        worker_kills=3, processing=0.02, directory=str(tmp_path / "run"))
    report = runner.run(options, log=lambda _text: None)
    v = report["verdict"]
    assert report["drained"] is True, runner.summary(report)  # every queue processed too
    assert (v["sent"], v["acknowledged"], v["received"]) == (200, 200, 200), v
    assert (v["lost"], v["duplicated"], v["out_of_order"], v["unexpected"],
            v["corrupted"], v["incomplete"], v["last_not_delivered"]) == (0,) * 7, v
    assert v["valid"] is True
    workers = {n: d["workers"] for n, d in report["nodes"].items()}
    assert {n: (w["count"], w["sigkills"], w["unexpected_exits"])
            for n, w in workers.items()} == {"A": (4, 3, []), "B": (4, 3, [])}
    assert sum(w["sigkills_holding_a_message"] for w in workers.values()) >= 1
    assert {n: d["sigkills"] for n, d in report["nodes"].items()} == {"A": 1, "B": 1}
    # every message was taken by a worker: the receiving queues are empty, the records full
    from pybroker.api.instance import Instance

    for n in "AB":
        with Instance(tmp_path / "run" / f"{n}.duckdb", worker=False) as inst:
            assert dict(inst.sql("SELECT queue_name, count(*) FROM main.queue_messages "
                                 "GROUP BY ALL").fetchall()) == {f"R{n}": 100}


def test_a_worker_record_says_what_the_body_said():
    from pybroker.devtools.chaos.worker import read_record, record
    from pybroker.devtools.chaos.workload import make_body

    body = make_body(3, "conv-1", 7, big_every=0)
    assert read_record(record("h-1", 7, body)) == {"h": "h-1", "q": 7, "c": "conv-1",
                                                   "s": 7, "ok": True}
    assert read_record(record("h-1", 7, body[:-1]))["ok"] is False  # truncated
    assert read_record(b"not a record") is None
    assert read_record(b"[1, 2]") is None
