"""``pybroker demo``'s last part (pybroker/devtools/demos/wire.py): example 6 through a forwarder,
dynamic routing and example 3's mirrored pair, each across real instance processes on
127.0.0.1 (R7, R8, R9). The children are stopped by pid and every wait is bounded inside
the demo itself; here, what arrived where."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pybroker.devtools.demos.wire import run_across_processes


@pytest.fixture(scope="module")
def demo() -> tuple[dict, list[str]]:
    lines: list[str] = []
    result = run_across_processes(out=lines.append)
    return result, lines


def test_R7_example_6_the_message_arrives_at_b_through_the_forwarder(demo):
    result, lines = demo
    f = result["forwarding"]
    assert f["received_at_b"] == "<Shipment id='6'/>"
    assert f["far_broker_instance"] == f["b_broker_instance"]  # acknowledged by B (R5)
    assert f["a_transmission_queue"] == 0  # B's acknowledgement came back through F
    assert f["f_queue_rows"] == 0  # F holds ElsewhereService too, but kept nothing (R1.2)
    # F's connections: to B the fragment went out, from A it came in; acknowledgements
    # are not fragments. More than one only if a copy was sent again (P5.3, a busy machine)
    rows = f["f_fragments"]
    assert sum(sent for peer, sent, _ in rows if peer == f["b_address"]) >= 1
    assert sum(got for peer, _, got in rows if peer != f["b_address"]) >= 1
    assert sum(got for peer, _, got in rows if peer == f["b_address"]) == 0
    assert sum(sent for peer, sent, _ in rows if peer != f["b_address"]) == 0
    out = "\n".join(lines)
    assert ("F: msdb: CREATE ROUTE ForwardingRoute WITH SERVICE_NAME = 'ElsewhereService', "
            f"ADDRESS = '{f['b_address']}'") in out
    assert "B: RECEIVE FROM ElsewhereQueue -> <Shipment id='6'/>" in out


def test_R8_the_route_request_is_answered_and_the_conversation_delivered(demo):
    result, lines = demo
    d = result["dynamic"]
    assert d["requests"] == 1  # one MissingRoute for the waiting conversation (R8.1)
    assert d["route"] == "BrokerConfiguration:RemoteOnlyService"  # made by the handler
    assert d["route_address"] == d["b_address"]  # from its directory
    assert d["received_at_b"] == "<Order id='8'/>"
    assert d["a_transmission_queue"] == 0
    out = "\n".join(lines)
    assert "B: RECEIVE FROM RemoteOnlyQueue -> <Order id='8'/>" in out
    # before the answer the message waited DELAYED, with its reason (R2.7, C4)
    waiting = out[out.index("one MissingRoute request goes"):]
    assert "Orders         RemoteOnlyService  0" in waiting.split("the configuration service "
                                                                  "RECEIVEs")[0]


def test_R9_after_the_failover_the_message_arrives_at_the_new_principal(demo):
    result, lines = demo
    m = result["mirror"]
    assert m["first_at_p"] == "<PartsOrder n='1'/>"
    assert m["second_at_m"] == "<PartsOrder n='2'/>"
    assert m["principal_after"] == m["m_address"] != m["p_address"]
    assert m["left_at_p"] == 0  # nothing more went to the old principal
    # first P, then (P refused: the mirror now) asked again, then M (R9.2, R9.3)
    assert m["states"][0] == "PRINCIPAL" and m["states"][-1] == "PRINCIPAL"
    assert "PROBING" in m["states"]
    out = "\n".join(lines)
    assert "P: RECEIVE FROM PartsQueue -> <PartsOrder n='1'/>" in out
    assert "M: RECEIVE FROM PartsQueue -> <PartsOrder n='2'/>" in out


def test_every_child_process_was_stopped(demo):
    result, _ = demo
    assert result["stopped"] == {"F": 0, "B": 0, "P": 0, "M": 0}


@pytest.mark.cli
def test_demo_example_3_runs_its_part_across_processes_only():
    done = subprocess.run([sys.executable, "-m", "pybroker", "demo", "--example", "3"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("Example 3: ") < out.index("Example 3 across processes")
    assert "M: RECEIVE FROM PartsQueue -> <PartsOrder n='2'/>" in out
    assert "Example 6 across processes" not in out and "Dynamic routing" not in out
    assert "Two instances, each in its own file" not in out
    assert out.rstrip().endswith("All 4 conversations of 1 example(s) routed as the seeds "
                                 "require.")
