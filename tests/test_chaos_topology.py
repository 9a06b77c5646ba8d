"""The short chaos runs of the other topologies (fixed seed), through the command and its
--json report: A -> F1 -> F2 -> B with every instance, forwarders included, SIGKILLed and
paused and every proxy fault on (R7.3); and a mirrored pair whose principal is SIGKILLed
mid-stream and whose mirror is promoted (R9.3): the conversations begun at the principal end
with an error at the initiator. The long versions are ``pybroker chaos run
--topology forwarder|mirror`` with more messages. Deselect with ``-m 'not chaos'``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pybroker.devtools.chaos import topology as chaos_topology

pytestmark = pytest.mark.chaos

ROOT = Path(__file__).resolve().parents[1]
SHORT = ["--messages", "300", "--duration", "12", "--conversations", "6", "--kills", "2",
         "--pauses", "1", "--max-body", "262144", "--big-every", "40", "--retry-scale", "0.1",
         "--drain-timeout", "120"]
VIOLATIONS = ("lost", "duplicated", "out_of_order", "unexpected", "corrupted", "incomplete",
              "unacknowledged", "last_not_delivered")


def chaos_run(tmp_path: Path, *args: str) -> dict:
    """``pybroker chaos run ... --json``; the run stops every process it starts by pid, and
    this bound is for a machine shared with others, not a speed requirement."""
    done = subprocess.run(
        [sys.executable, "-m", "pybroker", "chaos", "run", *SHORT, *args, "--dir",
         str(tmp_path / "run"), "--json"], cwd=ROOT, capture_output=True, text=True,
        timeout=400)
    report = json.loads(done.stdout)
    assert done.returncode == (0 if report["verdict"]["valid"] else 1), done.stderr
    return report


def test_R7_3_forwarders_killed_mid_stream_lose_duplicate_and_hold_nothing(tmp_path):
    report = chaos_run(tmp_path, "--topology", "forwarder", "--forwarders", "2",
                       "--seed", "20261125")
    v = report["verdict"]
    assert report["drained"] is True, v["details"]
    assert (v["sent"], v["acknowledged"], v["received"]) == (300, 300, 300), v
    assert [v[k] for k in VIOLATIONS] == [0] * len(VIOLATIONS), v["details"]
    assert v["held_by_forwarders"] == 0 and v["valid"] is True
    topology = report["topology"]
    assert topology["shape"] == "A -> F1 -> F2 -> B"
    assert topology["forwarder_sigkills"] == {"F1": 2, "F2": 2}
    assert all(sum(held.values()) == 0 for held in topology["held_by_forwarders"].values())
    assert all(n["unexpected_exits"] == [] for n in report["nodes"].values())
    assert report["faults_injected"]["connections"] >= 4  # both hops went through proxies
    assert chaos_topology.check_directory(tmp_path / "run") == v  # 'chaos check DIR'


def test_R9_3_principal_killed_mirror_promoted_the_new_principal_gets_all_once_in_order(
        tmp_path):
    report = chaos_run(tmp_path, "--topology", "mirror", "--seed", "20261125")
    v, topology = report["verdict"], report["topology"]
    assert topology["failed_over"] is True, topology["failover"]
    # P was killed holding messages while A still had more to send on conversations begun
    # at P (the run waits for both): the stranded ones below exist
    assert topology["failover"]["initiator_sending"] is True, topology["failover"]
    assert report["nodes"]["P"]["sigkills"] == 1 and report["nodes"]["M"]["sigkills"] == 2
    assert report["drained"] is True, v["details"]
    # every conversation begun after the promotion (and any whose first message reached
    # only the new principal) arrived there whole, once and in order
    assert topology["begun_after"] == 6
    assert topology["continued"] + topology["stranded"] + topology["finished_before"] == 12
    # P was killed holding messages (the run waits for one): those conversations stay P's
    assert topology["stranded"] + topology["finished_before"] >= 1
    assert topology["continued_messages"] >= 150  # half the messages: those begun after
    assert [v[k] for k in VIOLATIONS] == [0] * len(VIOLATIONS), v["details"]
    assert v["valid"] is True
    # M refused the next message of the conversations begun at P: they ended with an error
    # at A, holding nothing at M (one whose first message P had not acknowledged began
    # again at M and continued there), and only those did
    assert topology["stranded_ended"] >= 1
    assert topology["stranded_ended"] == topology["ended_with_error"]
    assert topology["held_at_new_principal"] == 0
    # what the errors ended is undelivered (A was told); A sent no more on them
    assert v["sent"] == v["acknowledged"] + topology["undelivered"] <= 300
    # nothing received twice but what the old principal kept unacknowledged
    assert v["received"] == v["acknowledged"] + topology["in_both"]
    assert chaos_topology.check_directory(tmp_path / "run") == v  # 'chaos check DIR'
