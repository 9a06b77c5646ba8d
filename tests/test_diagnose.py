"""``pybroker diagnose`` / ``pybroker.diagnose``: each rule's situation built in real
instance files, and the finding it gives; a healthy pair gives none."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import pytest

import pybroker
from pybroker.apps.diagnose.configuration import module_found
from pybroker.apps.diagnose.rules import RULES
from pybroker.apps.diagnose.targets import TargetError
from tests.cli_helpers import call, rows_digest
from tests.process_helpers import free_ports

# STARTED endpoints listen while their files are open: free ports, so that a test running
# beside this one on another worker cannot hold the same port
SHOP_PORT, STOCK_PORT, F1_PORT, F2_PORT = free_ports(4)


def address(port: int) -> str:
    return f"tcp://127.0.0.1:{port}"


def endpoint(inst: pybroker.Instance, port: int, state: str = "STARTED") -> None:
    """The broker endpoint defined in the file (CREATE ENDPOINT on master); nothing listens:
    diagnose reads the definition."""
    inst.database("master").execute(
        "CREATE CERTIFICATE Own WITH SUBJECT = 'endpoint';"
        f"CREATE ENDPOINT BrokerEndpoint STATE = {state} AS TCP (LISTENER_PORT = {port}, "
        "LISTENER_IP = (127.0.0.1)) FOR SERVICE_BROKER (AUTHENTICATION = CERTIFICATE Own)")


def trust_each_other(*insts: pybroker.Instance) -> None:
    pems = [inst.certificate for inst in insts]
    for i, inst in enumerate(insts):
        for j, pem in enumerate(pems):
            if i != j:
                inst.trust(f"peer{j}", pem)


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """Shop (ShopService) and Stock (StockService) in two files, each routing to the
    other's service at the other's endpoint, trusting each other: healthy."""
    shop_file, stock_file = tmp_path / "shop.duckdb", tmp_path / "stock.duckdb"
    with pybroker.connect(shop_file, worker=False) as shop_inst, \
            pybroker.connect(stock_file, worker=False) as stock_inst:
        endpoint(shop_inst, SHOP_PORT)
        endpoint(stock_inst, STOCK_PORT)
        trust_each_other(shop_inst, stock_inst)
        shop = shop_inst.create_database("Shop")
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
        stock = stock_inst.create_database("Stock")
        stock.create_queue("StockQueue")
        stock.create_service("StockService", queue="StockQueue", contracts=["DEFAULT"])
        shop.create_route("ToStock", service_name="StockService", address=address(STOCK_PORT))
        stock.create_route("ToShop", service_name="ShopService", address=address(SHOP_PORT))
    return shop_file, stock_file


def codes(findings) -> list[str]:
    return [f.code for f in findings]


def only(findings, code: str):
    found = [f for f in findings if f.code == code]
    assert len(found) == 1, findings
    return found[0]


def test_a_healthy_pair_gives_no_finding_and_is_left_as_it_was(pair, capsys):
    before = [rows_digest(p) for p in pair]
    assert pybroker.diagnose(pair) == []
    code, out, _ = call(["diagnose", *pair], capsys)
    assert (code, out.strip()) == (0, "no findings")
    assert [rows_digest(p) for p in pair] == before


def test_every_rule_has_a_code_of_its_form_and_is_documented():
    text = (Path(pybroker.__file__).parent / "docs" / "diagnose.md").read_text()
    assert len({r.code for r in RULES}) == len(RULES)
    for rule in RULES:
        assert rule.code[:6] in ("D-CFG-", "D-RTE-", "D-CNV-") and rule.code[6:].isdigit()
        assert f"### {rule.code}:" in text, rule.code


# -- configuration -----------------------------------------------------------------------


def test_a_route_to_a_service_no_instance_named_hosts(pair, capsys):
    shop_file, stock_file = pair
    with pybroker.connect(shop_file, worker=False) as inst:
        inst.database("Shop").create_route("ToBilling", service_name="BillingService",
                                           address=address(STOCK_PORT))
    found = only(pybroker.diagnose(pair), "D-CFG-001")
    assert (found.severity, found.instance, found.database) == ("error", str(shop_file), "Shop")
    assert found.objects == ("route ToBilling", "service BillingService")
    assert "CREATE SERVICE [BillingService]" in found.fix
    with pybroker.connect(stock_file, worker=False) as inst:
        inst.database("Stock").execute("CREATE SERVICE [BillingService] ON QUEUE StockQueue")
    assert pybroker.diagnose(pair) == []
    with pybroker.connect(stock_file, worker=False) as inst:
        inst.database("Stock").execute("DROP SERVICE [BillingService]")
    code, out, _ = call(["diagnose", shop_file, stock_file, "--json"], capsys)
    report = json.loads(out)
    assert code == 1 and report["schema"] == 1
    assert [f["code"] for f in report["findings"]] == ["D-CFG-001"]


def test_a_route_to_an_instance_without_the_service_another_instance_hosts(pair, tmp_path):
    """The route points at Stock, which has no BillingService; that a third instance named
    hosts it does not make the route right: D-CFG-001 until the route points there."""
    billing_file = tmp_path / "billing.duckdb"
    with pybroker.connect(billing_file, worker=False) as billing_inst:
        endpoint(billing_inst, F1_PORT)
        billing = billing_inst.create_database("Billing")
        billing.create_queue("BillingQueue")
        billing.create_service("BillingService", queue="BillingQueue", contracts=["DEFAULT"])
    with pybroker.connect(pair[0], worker=False) as inst:
        inst.database("Shop").create_route("ToBilling", service_name="BillingService",
                                           address=address(STOCK_PORT))
    targets = [*pair, billing_file]
    found = only(pybroker.diagnose(targets), "D-CFG-001")
    assert (found.instance, found.database) == (str(pair[0]), "Shop")
    assert found.objects == ("route ToBilling", "service BillingService")
    assert address(STOCK_PORT) in found.happens
    with pybroker.connect(pair[0], worker=False) as inst:  # the fix's second form
        inst.database("Shop").execute(
            f"ALTER ROUTE [ToBilling] WITH ADDRESS = '{address(F1_PORT)}'")
    assert "D-CFG-001" not in codes(pybroker.diagnose(targets))


def test_no_route_back_for_replies(pair):
    stock_file = pair[1]
    with pybroker.connect(stock_file, worker=False) as inst:
        inst.database("Stock").drop_route("ToShop")
    found = only(pybroker.diagnose(pair), "D-CFG-002")
    assert (found.instance, found.database) == (str(stock_file), "Stock")
    assert found.objects == ("service StockService", "far service ShopService")
    assert f"ADDRESS = '{address(SHOP_PORT)}'" in found.fix
    with pybroker.connect(stock_file, worker=False) as inst:  # the fix, as it is given
        inst.database("Stock").execute(found.fix.partition(": ")[2])
    assert pybroker.diagnose(pair) == []


def test_a_queue_that_is_off(pair):
    with pybroker.connect(pair[1], worker=False) as inst:
        inst.database("Stock").alter_queue("StockQueue", status=False)
    found = only(pybroker.diagnose(pair), "D-CFG-003")
    assert (found.severity, found.database, found.objects) == (
        "error", "Stock", ("queue StockQueue",))
    assert "StockService" in found.happens and "STATUS = ON" in found.fix
    with pybroker.connect(pair[1], worker=False) as inst:
        inst.database("Stock").execute("ALTER QUEUE [StockQueue] WITH STATUS = ON")
    assert pybroker.diagnose(pair) == []


def test_activation_whose_module_cannot_be_found(pair):
    with pybroker.connect(pair[1], worker=False) as inst:
        db = inst.database("Stock")
        db.create_queue("Found", activation_procedure="json:loads", activation_status=True)
        db.create_queue("Lost", activation_procedure="no_such_package_xyz.handlers:run",
                        activation_status=True)
    found = only(pybroker.diagnose(pair), "D-CFG-004")
    assert found.objects == ("queue Lost",)
    assert "no_such_package_xyz.handlers" in found.happens


def test_activation_by_a_stored_procedure_that_does_not_exist(pair):
    """An existing procedure (any case, bracketed, schema named or not) is no finding; a
    missing one, or one named in another database, is D-CFG-012 until it is created."""
    with pybroker.connect(pair[1], worker=False) as inst:
        db = inst.database("Stock")
        db.execute("CREATE PROCEDURE dbo.HandleOrders AS RETURN 0")
        db.execute("CREATE QUEUE Handled WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = "
                   "[dbo].[handleorders], MAX_QUEUE_READERS = 1, EXECUTE AS SELF);"
                   "CREATE QUEUE Unqualified WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = "
                   "HandleOrders, MAX_QUEUE_READERS = 1, EXECUTE AS OWNER);"
                   "CREATE QUEUE Missing WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = "
                   "Stock.dbo.HandleReturns, MAX_QUEUE_READERS = 1, EXECUTE AS SELF)")
    found = only(pybroker.diagnose(pair), "D-CFG-012")
    assert (found.severity, found.database) == ("error", "Stock")
    assert found.objects[0] == "queue Missing"
    assert "CREATE PROCEDURE" in found.fix
    assert "D-CFG-004" not in codes(pybroker.diagnose(pair))
    with pybroker.connect(pair[1], worker=False) as inst:  # the fix
        inst.database("Stock").execute("CREATE PROCEDURE dbo.HandleReturns AS RETURN 0")
    assert pybroker.diagnose(pair) == []


def test_the_module_is_found_without_importing_it_or_its_package(tmp_path, monkeypatch):
    package = tmp_path / "exploding_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (package / "handlers.py").write_text("def run(db): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert module_found("exploding_pkg.handlers")
    assert not module_found("exploding_pkg.missing")
    assert not module_found("not a module")
    assert "exploding_pkg" not in sys.modules


def test_an_endpoint_not_started(tmp_path):
    file = tmp_path / "stopped.duckdb"
    with pybroker.connect(file, worker=False) as inst:
        endpoint(inst, SHOP_PORT, state="STOPPED")
    found = only(pybroker.diagnose([file]), "D-CFG-005")
    assert (found.severity, found.objects) == ("warning", ("endpoint BrokerEndpoint",))
    assert "STATE = STARTED" in found.fix


def test_a_route_to_an_address_no_instance_named_listens_on(pair):
    with pybroker.connect(pair[0], worker=False) as inst:
        inst.database("Shop").create_route("Elsewhere", service_name="StockService",
                                           address="tcp://127.0.0.1:41999",
                                           broker_instance="b" * 8 + "-bbbb" * 3 + "-" + "b" * 12)
    found = only(pybroker.diagnose(pair), "D-CFG-006")
    assert found.objects == ("route Elsewhere",) and "tcp://127.0.0.1:41999" in found.happens


def test_a_peer_certificate_expiring_within_30_days_then_expired(pair):
    with pybroker.connect(pair[0], read_only=True, worker=False) as inst:
        expiry = inst.sql("SELECT min(expiry_date) FROM sys.certificates").fetchone()[0]
    soon = pybroker.diagnose(pair, now=expiry - dt.timedelta(days=10))
    assert sorted(codes(soon)) == ["D-CFG-008", "D-CFG-008"]  # each side's peer
    late = pybroker.diagnose(pair, now=expiry + dt.timedelta(days=1))
    assert sorted(codes(late)) == ["D-CFG-007", "D-CFG-007"]
    assert {f.severity for f in late} == {"error"}


def test_a_peer_not_trusted_by_the_other_side(pair):
    with pybroker.connect(pair[1], worker=False) as inst:
        inst.untrust("peer0")  # Stock no longer admits Shop
    found = only(pybroker.diagnose(pair), "D-CFG-009")
    assert (found.instance, found.objects) == (str(pair[1]), (f"peer {pair[0]}",))
    with pybroker.connect(pair[0], worker=False) as shop, \
            pybroker.connect(pair[1], worker=False) as stock:
        stock.trust("peer0", shop.certificate)
    assert pybroker.diagnose(pair) == []


def test_forwarding_needed_where_it_is_off(pair):
    with pybroker.connect(pair[1], worker=False) as inst:
        inst.database("msdb").create_route("Onwards", service_name="Archive",
                                           address=address(SHOP_PORT))
    found = only(pybroker.diagnose(pair), "D-CFG-010")
    assert (found.instance, found.database, found.objects) == (
        str(pair[1]), "msdb", ("route Onwards",))
    assert "forwarding FILE on" in found.fix
    with pybroker.connect(pair[1], worker=False) as inst:
        inst.forwarding = True
    assert "D-CFG-010" not in codes(pybroker.diagnose(pair))


# -- routing -------------------------------------------------------------------------------


def test_a_forwarding_loop_between_two_forwarders(tmp_path):
    files = [tmp_path / "f1.duckdb", tmp_path / "f2.duckdb"]
    with pybroker.connect(files[0], worker=False) as f1, \
            pybroker.connect(files[1], worker=False) as f2:
        endpoint(f1, F1_PORT)
        endpoint(f2, F2_PORT)
        trust_each_other(f1, f2)
        for inst, other in ((f1, F2_PORT), (f2, F1_PORT)):
            inst.forwarding = True
            inst.database("msdb").create_route("Onwards", service_name="Orders",
                                               address=address(other))
    found = only(pybroker.diagnose(files), "D-RTE-001")
    assert found.severity == "error" and found.database == "msdb"
    assert found.objects == ("route Onwards", "route Onwards")
    names = sorted(str(f) for f in files)
    assert f"{names[0]} -> {names[1]} -> {names[0]}" in found.happens
    with pybroker.connect(files[1], worker=False) as f2:  # one forwarder delivers: no loop
        f2.database("msdb").drop_route("Onwards")
        db = f2.create_database("Sales")
        db.create_queue("OrdersQueue")
        db.create_service("Orders", queue="OrdersQueue")
    assert "D-RTE-001" not in codes(pybroker.diagnose(files))


def test_routes_that_can_never_be_chosen(pair):
    with pybroker.connect(pair[0], worker=False) as inst:
        shop = inst.database("Shop")
        shop.create_route("Mirrored", service_name="StockService",
                          address="tcp://127.0.0.1:41997", mirror_address="tcp://127.0.0.1:41998")
        shop.create_route("AnyWhere", address=address(STOCK_PORT))
        shop.create_route("ByName", address="TRANSPORT")
    found = {f.objects: f for f in pybroker.diagnose(pair) if f.code == "D-RTE-002"}
    assert set(found) == {("route ToStock",), ("route ByName",)}
    assert "Mirrored wins at R3.1" in found[("route ToStock",)].happens
    assert "AnyWhere wins at R3.3" in found[("route ByName",)].happens


def test_dynamic_routing_catches_what_a_wildcard_would_reach(pair):
    with pybroker.connect(pair[0], worker=False) as inst:
        inst.database("Shop").create_route(
            "Config", service_name="SQL/ServiceBroker/BrokerConfiguration",
            address=address(STOCK_PORT))
    found = [f for f in pybroker.diagnose(pair) if f.code == "D-RTE-003"]
    assert len(found) == 1 and found[0].database == "Shop"
    assert "route AutoCreatedLocal" in found[0].objects
    assert "service ShopService" in found[0].objects  # local: AutoCreatedLocal reached it
    assert "service StockService" not in found[0].objects  # it has its own route


# -- conversation hygiene ----------------------------------------------------------------


def _conversations(file: Path, count: int, *, end: bool) -> None:
    """``count`` dialogs from Init to Target in one instance; ``end``: the initiator ends
    each (fire and forget) and the target receives the EndDialog without ending its side,
    leaving it DISCONNECTED_INBOUND."""
    with pybroker.connect(file, worker=False) as inst:
        db = inst.create_database("App")
        db.create_queue("InitQueue")
        db.create_service("Init", queue="InitQueue")
        db.create_queue("TargetQueue")
        db.create_service("Target", queue="TargetQueue", contracts=["DEFAULT"])
        for _ in range(count):
            conv = db.begin_dialog("Init", "Target")
            conv.send(b"x")
            if end:
                conv.end()
        while db.receive("TargetQueue", max_messages=100):
            pass


def test_disconnected_inbound_endpoints_piling_up(tmp_path):
    file = tmp_path / "leak.duckdb"
    _conversations(file, 5, end=True)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    assert "D-CNV-001" not in codes(pybroker.diagnose([file], leak_count=5))  # all young
    found = only(pybroker.diagnose([file], now=later, leak_count=5), "D-CNV-001")
    assert (found.severity, found.database) == ("warning", "App")
    assert "5 of 10 conversation endpoints" in found.happens  # the initiators: CLOSED
    assert "CLOSED 5, DISCONNECTED_INBOUND 5" in found.happens
    assert "D-CNV-001" not in codes(pybroker.diagnose([file], now=later, leak_count=6))


def test_old_conversing_endpoints_piling_up(tmp_path):
    file = tmp_path / "open.duckdb"
    _conversations(file, 3, end=False)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=2)
    found = only(pybroker.diagnose([file], now=later, leak_age=dt.timedelta(days=1),
                                   leak_count=3), "D-CNV-002")
    assert "6 of 6 conversation endpoints" in found.happens and "1 day(s)" in found.happens


# -- targets --------------------------------------------------------------------------------


def test_a_snapshot_is_read_as_the_file_it_was_taken_of(pair, tmp_path):
    with pybroker.connect(pair[1], worker=False) as inst:
        inst.database("Stock").alter_queue("StockQueue", status=False)
        snapshot = inst.snapshot(tmp_path / "stock.snapshot.duckdb")
    assert codes(pybroker.diagnose([pair[0], snapshot])) == ["D-CFG-003"]


def test_a_target_that_cannot_be_read(tmp_path, capsys):
    with pytest.raises(TargetError, match="no such instance file"):
        pybroker.diagnose([tmp_path / "missing.duckdb"])
    code, _, err = call(["diagnose", tmp_path / "missing.duckdb"], capsys)
    assert code == 2 and err.count("\n") == 1 and "missing.duckdb" in err
    code, _, err = call(["diagnose"], capsys)
    assert code == 2 and "TARGET" in err


def test_the_rules_are_listed(capsys):
    code, out, _ = call(["diagnose", "--rules", "--json"], capsys)
    assert code == 0
    assert [r["code"] for r in json.loads(out)["rules"]] == [r.code for r in RULES]


def test_the_routing_seeds_examples_give_no_error_finding(tmp_path):
    from pybroker.devtools.demos.routing import build_example, load_examples

    for example in load_examples():
        file = tmp_path / f"example{example.number}.duckdb"
        with pybroker.connect(file, worker=False) as inst:
            build_example(inst, example)
        # one instance each: the addresses its routes name are of instances not named
        assert {f.code for f in pybroker.diagnose([file])} <= {"D-CFG-006"}, example.number


def test_an_open_instance_is_read_as_it_is_and_left_open(pair):
    with pybroker.connect(pair[1], worker=False) as stock:
        stock.database("Stock").alter_queue("StockQueue", status=False)
        found = only(pybroker.diagnose([pair[0], stock]), "D-CFG-003")
        assert found.instance == str(pair[1])
        assert stock.sql("SELECT count(*) FROM sys.service_queues").fetchone() == (1,)
