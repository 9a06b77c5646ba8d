"""The chaos commands: ``pybroker chaos fuzz`` prints its figures and exits 0 with no crash;
usage errors exit 2."""

from __future__ import annotations

import json

from pybroker.cli.main import main


def test_chaos_fuzz_prints_figures_and_exits_zero(capsys):
    assert main(["chaos", "fuzz", "--target", "notice", "--count", "300", "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("notice: 300 inputs in ") and "0 crashes" in out
    assert main(["chaos", "fuzz", "--target", "all", "--count", "50", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert [r["target"] for r in results] == ["frames", "handshake", "ack", "notice"]
    assert all(r["inputs"] == 50 and r["crashes"] == 0 for r in results)


def test_chaos_usage_errors_exit_two(capsys):
    assert main(["chaos", "fuzz", "--target", "tsql", "--count", "1"]) == 2
    assert "unknown target 'tsql'" in capsys.readouterr().err
    assert main(["chaos", "run", "--faults", "latency,meteor"]) == 2
    assert "unknown fault(s) ['meteor']" in capsys.readouterr().err
    assert main(["chaos"]) == 2  # the chaos commands' help
    assert main(["chaos", "run", "--topology", "mirror", "--instances", "3"]) == 2
    assert "--instances is for the point-to-point topology" in capsys.readouterr().err
    assert main(["chaos", "run", "--forwarders", "2"]) == 2
    assert "--forwarders is for --topology forwarder" in capsys.readouterr().err
