"""``pybroker diagnose`` on instances that `pybroker serve` processes hold: read through
their servers (the files stay theirs), a forwarding loop found before any message is sent."""

from __future__ import annotations

import pybroker
from pybroker.api.served.paths import token_path_for
from tests.cli_helpers import run
from tests.process_helpers import Served, free_ports, start_all, trust_each_other, wait_until


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
        result = run("diagnose", *files)  # no loop; f2 now drops what f1 passes it on
        assert result.returncode == 1 and "D-RTE-001" not in result.stdout, result.stdout
        assert "D-RTE-008" in result.stdout
    finally:
        for child in served:
            child.close()


def test_a_server_reached_by_its_tcp_address_with_its_token(tmp_path):
    file = tmp_path / "stock.duckdb"
    with pybroker.connect(file, worker=False) as inst:
        db = inst.create_database("Stock")
        db.create_queue("StockQueue", status=False)
    child = Served(file, free_ports(1)[0], "--client-port", "0")
    try:
        child.start()
        child.ready()
        wait_until(lambda: any(x.startswith("clients on pybroker://") for x in child.lines()),
                   what="the server's TCP address for clients")
        url = next(x for x in child.lines() if x.startswith("clients on pybroker://")).split()[-1]
        token = token_path_for(file).read_text().strip()
        findings = pybroker.diagnose([url], tokens={url: token})
        assert [(f.code, f.instance) for f in findings] == [("D-CFG-003", url)]
        result = run("diagnose", url, "--token", f"{url}={token}", "--json")
        assert result.returncode == 1, result.stderr
        assert '"D-CFG-003"' in result.stdout
        result = run("diagnose", url)  # no token: the server refuses, a target not read
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    finally:
        child.close()


def test_a_served_forwarder_without_a_route_on_is_found_and_fixed_through_its_server(tmp_path):
    a_file, f_file, b_file = (tmp_path / f"{n}.duckdb" for n in ("a", "f", "b"))
    f_port, b_port = free_ports(2)
    with pybroker.connect(a_file, worker=False) as a, \
            pybroker.connect(f_file, worker=False) as f, \
            pybroker.connect(b_file, worker=False) as b:
        b.database("master").execute(  # defined, not listening: diagnose reads the file
            "CREATE CERTIFICATE Own WITH SUBJECT = 'b'; CREATE ENDPOINT BrokerEndpoint STATE "
            f"= STOPPED AS TCP (LISTENER_PORT = {b_port}, LISTENER_IP = (127.0.0.1)) FOR "
            "SERVICE_BROKER (AUTHENTICATION = CERTIFICATE Own)")
        stock = b.create_database("Stock")
        stock.create_service("StockService", queue=stock.create_queue("StockQueue").name,
                             contracts=["DEFAULT"])
        shop = a.create_database("Shop")
        shop.create_service("ShopService", queue=shop.create_queue("ShopQueue").name)
        shop.create_route("ToStock", service_name="StockService",
                          address=f"tcp://127.0.0.1:{f_port}")
        f.forwarding = True  # and its msdb routes nothing on
    trust_each_other(a_file, f_file, b_file)
    served = Served(f_file, f_port)
    try:
        served.start()
        served.ready()
        findings = pybroker.diagnose([a_file, f_file, b_file])
        found = [x for x in findings if x.code == "D-RTE-008"]
        assert [(x.instance, x.objects) for x in found] == [
            (str(f_file), ("service StockService",))]
        assert f"ADDRESS = 'tcp://127.0.0.1:{b_port}'" in found[0].fix
        with served.client() as inst:  # the fix, run by the server that holds the file
            inst.database("msdb").execute(found[0].fix.partition(": ")[2].partition(" (")[0])
        assert "D-RTE-008" not in {x.code for x in pybroker.diagnose([a_file, f_file, b_file])}
    finally:
        served.close()
