"""The rules of diagnose about what routes lead to (D-RTE-004 to D-RTE-007) and about
growth and waiting (D-CNV-003 to D-CNV-005): each situation built in real instance files,
its finding, and the finding gone once the fix is applied."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path

import pytest

import pybroker
from pybroker.apps.diagnose.targets import TargetError
from tests.cli_helpers import call
from tests.process_helpers import free_ports
from tests.test_diagnose import (
    SHOP_PORT,
    STOCK_PORT,
    _conversations,
    address,
    codes,
    endpoint,
    only,
    trust_each_other,
)
from tests.test_topology import network  # noqa: F401  (a fixture: A -> forwarder F -> B)

M_PORT = free_ports(1)[0]
while M_PORT in (SHOP_PORT, STOCK_PORT):
    M_PORT = free_ports(1)[0]
LATER = dt.timedelta(hours=2)


def _shop_and_stock(tmp_path: Path) -> tuple[Path, Path]:
    """Shop routes StockService to Stock's endpoint and back; each trusts the other."""
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


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A pair made once; each test works on a copy of its files (copying is cheaper than
    making instances and their certificates again)."""
    where = tmp_path_factory.mktemp("pair")
    _shop_and_stock(where)
    return where


@pytest.fixture
def pair(made: Path, tmp_path: Path) -> tuple[Path, Path]:
    files = []
    for name in ("shop.duckdb", "stock.duckdb"):
        (tmp_path / name).write_bytes((made / name).read_bytes())
        files.append(tmp_path / name)
    return files[0], files[1]


# -- D-RTE-004 ---------------------------------------------------------------------------------


def test_a_route_that_expires_before_the_conversations_it_routes(pair):
    shop_file = pair[0]
    with pybroker.connect(shop_file, worker=False) as inst:
        shop = inst.database("Shop")
        shop.execute("ALTER ROUTE ToStock WITH LIFETIME = 3600")
        shop.begin_dialog("ShopService", "StockService").send(b"x")  # lives 2^31 s (C1)
    found = only(pybroker.diagnose(pair), "D-RTE-004")
    assert (found.severity, found.database, found.objects) == (
        "warning", "Shop", ("route ToStock", "service StockService"))
    assert "1 conversation endpoint(s)" in found.happens and "DELAYED" in found.happens
    assert "DROP ROUTE [ToStock]; CREATE ROUTE [ToStock] WITH SERVICE_NAME" in found.fix
    with pybroker.connect(shop_file, worker=False) as inst:  # the fix, as it is given
        inst.database("Shop").execute(found.fix.partition(": ")[2].partition(" (or")[0])
    assert "D-RTE-004" not in codes(pybroker.diagnose(pair))


def test_a_route_that_expires_before_a_shorter_conversation_is_given_a_lifetime(pair):
    with pybroker.connect(pair[0], worker=False) as inst:
        shop = inst.database("Shop")
        shop.execute("ALTER ROUTE ToStock WITH LIFETIME = 3600")
        shop.begin_dialog("ShopService", "StockService", lifetime=7200).send(b"x")
    found = only(pybroker.diagnose(pair), "D-RTE-004")
    statement = found.fix.partition(": ")[2].partition(" (or")[0]
    assert statement.startswith("ALTER ROUTE [ToStock] WITH LIFETIME = 7")
    with pybroker.connect(pair[0], worker=False) as inst:
        inst.database("Shop").execute(statement)
    assert "D-RTE-004" not in codes(pybroker.diagnose(pair))


def test_an_expiring_route_with_another_to_the_same_address_is_not_reported(pair):
    with pybroker.connect(pair[0], worker=False) as inst:
        shop = inst.database("Shop")
        shop.execute("ALTER ROUTE ToStock WITH LIFETIME = 3600")
        shop.create_route("AnyToStock", address=address(STOCK_PORT))  # takes over after
        shop.begin_dialog("ShopService", "StockService").send(b"x")
    assert "D-RTE-004" not in codes(pybroker.diagnose(pair))


# -- D-RTE-005, D-RTE-006 -------------------------------------------------------------------


def test_mirror_partners_that_do_not_claim_the_database(pair, tmp_path):
    shop_file, p_file = pair  # Stock, with StockService, is the principal P
    files = [shop_file, p_file, tmp_path / "m.duckdb"]
    with pybroker.connect(shop_file, worker=False) as shop_inst, \
            pybroker.connect(p_file, worker=False) as p_inst, \
            pybroker.connect(files[2], worker=False) as m_inst:
        endpoint(m_inst, M_PORT)
        trust_each_other(shop_inst, p_inst, m_inst)
        shop_inst.database("Shop").create_route(
            "ToStockPair", service_name="StockService", address=address(STOCK_PORT),
            mirror_address=address(M_PORT))
        p = p_inst.database("Stock")
        m = m_inst.create_database("Stock", broker_instance=p.broker_instance)
        p.set_mirroring("PRINCIPAL", address(M_PORT))
        m.set_mirroring("MIRROR", address(STOCK_PORT))
    found = only(pybroker.diagnose(files), "D-RTE-005")  # M has no StockService
    assert (found.instance, found.database) == (str(files[0]), "Shop")
    assert found.objects == ("route ToStockPair", f"peer {files[2]}")
    assert "D-RTE-006" not in codes(pybroker.diagnose(files))
    with pybroker.connect(files[2], worker=False) as m_inst:
        m = m_inst.database("Stock")
        m.create_queue("StockQueue")
        m.create_service("StockService", queue="StockQueue", contracts=["DEFAULT"])
    assert not {"D-RTE-005", "D-RTE-006"} & set(codes(pybroker.diagnose(files)))
    with pybroker.connect(files[1], worker=False) as p_inst:  # both say MIRROR: R9.4
        p_inst.database("Stock").set_mirroring("MIRROR", address(M_PORT))
    found = only(pybroker.diagnose(files), "D-RTE-006")
    assert found.severity == "error" and "MIRROR" in found.happens
    assert "Database.set_mirroring('PRINCIPAL', partner)" in found.fix
    with pybroker.connect(files[1], worker=False) as p_inst:  # the fix: P serves again
        p_inst.database("Stock").set_mirroring("PRINCIPAL", address(M_PORT))
    assert not {"D-RTE-005", "D-RTE-006"} & set(codes(pybroker.diagnose(files)))


# -- D-RTE-007 ------------------------------------------------------------------------------


def test_transport_names_that_do_not_resolve(pair):
    shop_file, stock_file = pair
    named = f"tcp://127.0.0.1:{STOCK_PORT}/Archive"
    with pybroker.connect(shop_file, worker=False) as inst:
        shop = inst.database("Shop")
        shop.create_route("ByName", address="TRANSPORT")
        shop.begin_dialog("ShopService", "Archive").send(b"x")  # not an address
        shop.begin_dialog("ShopService", named).send(b"y")  # Stock has no such service
    found = {f.objects: f for f in pybroker.diagnose(pair) if f.code == "D-RTE-007"}
    assert set(found) == {("route ByName", "service Archive"),
                          ("route ByName", f"service {named}")}
    assert "does not begin with an address" in found[("route ByName", "service Archive")
                                                      ].happens
    assert str(stock_file) in found[("route ByName", f"service {named}")].happens
    with pybroker.connect(stock_file, worker=False) as inst:  # the named service exists
        inst.database("Stock").create_service(named, queue="StockQueue", contracts=["DEFAULT"])
    left = [f for f in pybroker.diagnose(pair) if f.code == "D-RTE-007"]
    assert [f.objects for f in left] == [("route ByName", "service Archive")]
    statement = left[0].fix.partition("in Shop: ")[2]  # its own route, to where it is hosted
    assert statement == ("CREATE ROUTE ... WITH SERVICE_NAME = 'Archive', ADDRESS = "
                         "'tcp://HOST:PORT'")
    with pybroker.connect(stock_file, worker=False) as inst:
        inst.database("Stock").create_service("Archive", queue="StockQueue",
                                              contracts=["DEFAULT"])
    with pybroker.connect(shop_file, worker=False) as inst:
        inst.database("Shop").execute(statement.replace("...", "ToArchive").replace(
            "tcp://HOST:PORT", address(STOCK_PORT)))
    assert "D-RTE-007" not in codes(pybroker.diagnose(pair))


# -- D-CNV-005 --------------------------------------------------------------------------------


def test_messages_waiting_long_grouped_by_status(tmp_path):
    file = tmp_path / "waiting.duckdb"
    with pybroker.connect(file, worker=False) as inst:
        db = inst.create_database("App")
        db.create_queue("Q")
        db.create_service("Init", queue="Q")
        db.drop_route("AutoCreatedLocal")  # nothing routes: DELAYED (R2.7)
        for _ in range(2):
            conv = db.begin_dialog("Init", "Elsewhere")
            conv.send(b"a")
            conv.send(b"b")
    assert "D-CNV-005" not in codes(pybroker.diagnose([file]))  # young
    found = only(pybroker.diagnose([file], now=dt.datetime.now(dt.UTC) + LATER), "D-CNV-005")
    assert (found.database, found.objects) == ("App", ("transmission queue (4 message(s))",))
    assert "target service name could not be found" in found.happens


# -- D-CNV-003, D-CNV-004 ---------------------------------------------------------------------


def grown_since(file: Path, earlier: Path) -> None:
    """Three fire-and-forget dialogs in ``file``, a reading of it as ``earlier`` an hour
    ago, then five dialogs more whose messages wait (AutoCreatedLocal dropped)."""
    _conversations(file, 3, end=True)
    with pybroker.connect(file, worker=False) as inst:
        inst.snapshot(earlier)
        db = inst.database("App")
        db.drop_route("AutoCreatedLocal")
        for _ in range(5):
            conv = db.begin_dialog("Init", "Target")  # nothing routes: each one waits
            conv.send(b"x")
    hour_ago = time.time() - 3600
    os.utime(earlier, (hour_ago, hour_ago))


def test_growth_since_an_earlier_reading(tmp_path, capsys):
    file, earlier = tmp_path / "leak.duckdb", tmp_path / "earlier.duckdb"
    grown_since(file, earlier)
    findings = pybroker.diagnose([file], since=[earlier], leak_count=5)
    grown = only(findings, "D-CNV-003")
    assert "grew from 6 to 11 (+5)" in grown.happens and "1.0 hour(s)" in grown.happens
    assert "STARTED_OUTBOUND +5" in grown.happens or "CONVERSING +5" in grown.happens
    queued = only(findings, "D-CNV-004")
    assert "grew from 0 to 5 (+5)" in queued.happens
    assert not {"D-CNV-003", "D-CNV-004"} & set(codes(
        pybroker.diagnose([file], since=[earlier], leak_count=6)))
    code, out, _ = call(["diagnose", file, "--since", earlier, "--leak-count", "5",
                         "--json"], capsys)
    assert code == 0 and {"D-CNV-003", "D-CNV-004"} <= {
        f["code"] for f in json.loads(out)["findings"]}
    other = tmp_path / "other.duckdb"
    _conversations(other, 1, end=False)
    with pytest.raises(TargetError, match="reading of none of the targets"):
        pybroker.diagnose([file], since=[other])
    code, _, err = call(["diagnose", file, "--since", other], capsys)
    assert code == 2 and err.count("\n") == 1


# -- D-CFG-011 --------------------------------------------------------------------------------


def _order_contract(db) -> None:
    db.create_message_type("Order")
    db.create_contract("OrderContract", {"Order": "INITIATOR"})


def test_a_contract_the_target_service_does_not_accept(pair):
    shop_file, stock_file = pair
    with pybroker.connect(shop_file, worker=False) as inst:
        shop = inst.database("Shop")
        _order_contract(shop)
        for _ in range(2):  # routed by ToStock to Stock, which is not served: they wait
            shop.begin_dialog("ShopService", "StockService", contract="OrderContract").send(
                b"<order/>", message_type="Order")
        shop.begin_dialog("ShopService", "StockService").send(b"x")  # DEFAULT: accepted
    found = only(pybroker.diagnose(pair), "D-CFG-011")
    assert (found.severity, found.instance, found.database) == ("error", str(shop_file), "Shop")
    assert found.objects == ("service ShopService", "far service StockService",
                             "contract OrderContract")
    assert "2 dialog(s)" in found.happens and f"Stock of {stock_file}" in found.happens
    assert "accepts the contracts DEFAULT" in found.happens and "-8408" in found.happens
    assert "ALTER SERVICE [StockService] (ADD CONTRACT [OrderContract])" in found.fix
    with pybroker.connect(stock_file, worker=False) as inst:  # the fix, where it is hosted
        stock = inst.database("Stock")
        _order_contract(stock)
        stock.execute(found.fix.partition(": ")[2].partition(";")[0])
    assert "D-CFG-011" not in codes(pybroker.diagnose(pair))


def _copied(made_files: list[Path], tmp_path: Path) -> list[Path]:
    """A copy of the fixture's files, which other tests read."""
    files = []
    for made_file in made_files:
        files.append(tmp_path / made_file.name)
        files[-1].write_bytes(made_file.read_bytes())
    return files


def test_a_contract_is_checked_where_a_forwarder_delivers(network, tmp_path):  # noqa: F811
    files = _copied(network, tmp_path)
    a_file, _, b_file = files
    with pybroker.connect(a_file, worker=False) as inst:
        shop = inst.database("Shop")
        _order_contract(shop)
        shop.begin_dialog("ShopService", "StockService", contract="OrderContract").send(
            b"<order/>", message_type="Order")  # A -> F (forwarding on) -> B
    found = only(pybroker.diagnose(files), "D-CFG-011")
    assert (found.instance, found.database) == (str(a_file), "Shop")
    assert f"Stock of {b_file}" in found.happens
    with pybroker.connect(b_file, worker=False) as inst:
        stock = inst.database("Stock")
        _order_contract(stock)
        stock.alter_service("StockService", add_contracts=["OrderContract"])
    assert "D-CFG-011" not in codes(pybroker.diagnose(files))


# -- D-RTE-008 ------------------------------------------------------------------------------


def test_a_forwarder_without_a_route_on_for_a_service_sent_to_it(network, tmp_path):  # noqa: F811
    files = _copied(network, tmp_path)
    a_file, f_file, b_file = files
    with pybroker.connect(f_file, worker=False) as inst:  # F forwards, but no longer on to B
        inst.database("msdb").drop_route("OnToStock")
    found = only(pybroker.diagnose(files), "D-RTE-008")
    assert (found.severity, found.instance, found.database, found.objects) == (
        "error", str(f_file), "msdb", ("service StockService",))
    assert f"{a_file} (route ToStock of Shop)" in found.happens and "R3.5" in found.happens
    assert "D-CFG-001" not in codes(pybroker.diagnose(files))  # F forwards: it is this rule's
    statement = found.fix.partition(": ")[2].partition(" (the instance")[0]
    with pybroker.connect(b_file, read_only=True, worker=False) as inst:
        b_address = inst.sql("SELECT 'tcp://127.0.0.1:' || port FROM "
                             "sys.tcp_endpoints WHERE type_desc = 'SERVICE_BROKER'").fetchone()[0]
    assert statement == ("CREATE ROUTE [StockService_onwards] WITH SERVICE_NAME = "
                         f"'StockService', ADDRESS = '{b_address}'")
    with pybroker.connect(f_file, worker=False) as inst:  # the fix, as it is given
        inst.database("msdb").execute(statement)
    assert "D-RTE-008" not in codes(pybroker.diagnose(files))
