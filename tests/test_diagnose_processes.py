"""``pybroker diagnose`` on instances that `pybroker serve` processes hold: read through
their servers (the files stay theirs), a forwarding loop found before any message is sent."""

from __future__ import annotations

import pybroker
from tests.cli_helpers import run
from tests.process_helpers import Served, free_ports, start_all, trust_each_other


def test_a_loop_between_two_served_forwarders_is_found_through_their_servers(tmp_path):
    files = [tmp_path / "f1.duckdb", tmp_path / "f2.duckdb"]
    ports = free_ports(2)
    for file, other in zip(files, reversed(ports), strict=True):
        with pybroker.connect(file, worker=False) as inst:
            inst.forwarding = True
            inst.database("msdb").create_route("Onwards", service_name="Orders",
                                               address=f"tcp://127.0.0.1:{other}")
    trust_each_other(*files)
    served = [Served(file, port) for file, port in zip(files, ports, strict=True)]
    try:
        start_all(*served)
        findings = pybroker.diagnose(files)  # each file is served: read through its server
        assert [f.code for f in findings] == ["D-RTE-001"]
        assert findings[0].objects == ("route Onwards", "route Onwards")
        result = run("diagnose", *files)
        assert result.returncode == 1 and "D-RTE-001" in result.stdout, result.stderr
        with served[1].client() as inst:  # the servers still hold their files, unharmed
            inst.database("msdb").drop_route("Onwards")
        result = run("diagnose", *files)
        assert result.returncode == 0 and "D-RTE-001" not in result.stdout, result.stdout
    finally:
        for child in served:
            child.close()
