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
