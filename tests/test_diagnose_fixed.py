"""Each finding of ``pybroker diagnose`` gone once the fix it gives is applied, for the rules
whose tests elsewhere only produce the finding (test_diagnose.py): the situation built in
real instance files, the finding, its fix run as written, and diagnose asked again."""

from __future__ import annotations

import datetime as dt
import re
import time

import pytest

import pybroker
from tests import test_diagnose
from tests.cli_helpers import call
from tests.test_diagnose import (
    STOCK_PORT,
    _conversations,
    address,
    codes,
    endpoint,
    only,
)
from tests.test_diagnose_more import grown_since

pair = test_diagnose.pair  # the fixture: Shop and Stock, healthy


def _statement(fix: str) -> str:
    """The T-SQL of a fix written "in DATABASE: STATEMENT" (up to an "(or ...)" choice)."""
    return fix.partition(": ")[2].partition(" (or")[0].partition(", then ")[0]


def test_activation_that_cannot_be_found_is_fixed_by_altering_the_queue(pair):
    with pybroker.connect(pair[1], worker=False) as inst:
        inst.database("Stock").create_queue(
            "Lost", activation_procedure="no_such_package_xyz.handlers:run",
            activation_status=True)
    found = only(pybroker.diagnose(pair), "D-CFG-004")
    statement = _statement(found.fix)
    assert statement == ("ALTER QUEUE [Lost] WITH ACTIVATION (PROCEDURE_NAME = "
                         "[module.path:function])")
    with pybroker.connect(pair[1], worker=False) as inst:  # a module that is found
        inst.database("Stock").execute(statement.replace("module.path:function", "json:loads"))
    assert pybroker.diagnose(pair) == []


def test_an_endpoint_not_started_is_fixed_by_starting_it(tmp_path):
    file = tmp_path / "stopped.duckdb"
    with pybroker.connect(file, worker=False) as inst:
        endpoint(inst, STOCK_PORT, state="STOPPED")
    found = only(pybroker.diagnose([file]), "D-CFG-005")
    statement = _statement(found.fix)
    assert statement == "ALTER ENDPOINT [BrokerEndpoint] STATE = STARTED"
    with pybroker.connect(file, worker=False) as inst:
        inst.database("master").execute(statement)
    assert "D-CFG-005" not in codes(pybroker.diagnose([file]))


def test_a_route_to_an_address_nobody_named_listens_on_is_fixed_by_its_address(pair):
    with pybroker.connect(pair[0], worker=False) as inst:
        inst.database("Shop").alter_route("ToStock", address="tcp://127.0.0.1:41999")
    found = only(pybroker.diagnose(pair), "D-CFG-006")
    statement = _statement(found.fix).replace("tcp://HOST:PORT", address(STOCK_PORT))
    assert statement.startswith("ALTER ROUTE [ToStock] WITH ADDRESS = ")
    with pybroker.connect(pair[0], worker=False) as inst:
        inst.database("Shop").execute(statement)
    assert pybroker.diagnose(pair) == []


def test_a_route_never_chosen_is_fixed_by_dropping_it(pair):
    with pybroker.connect(pair[0], worker=False) as inst:
        inst.database("Shop").create_route("AnyWhere", address=address(STOCK_PORT))
        inst.database("Shop").create_route("ByName", address="TRANSPORT")
    found = only(pybroker.diagnose(pair), "D-RTE-002")
    assert found.objects == ("route ByName",)
    statement = _statement(found.fix).partition(", or ")[0]
    assert statement == "DROP ROUTE [ByName]"
    with pybroker.connect(pair[0], worker=False) as inst:
        inst.database("Shop").execute(statement)
    assert "D-RTE-002" not in codes(pybroker.diagnose(pair))


def test_dynamic_routing_before_wildcards_is_fixed_by_dropping_its_route(pair):
    with pybroker.connect(pair[0], worker=False) as inst:
        inst.database("Shop").create_route(
            "Config", service_name="SQL/ServiceBroker/BrokerConfiguration",
            address=address(STOCK_PORT))
    found = only(pybroker.diagnose(pair), "D-RTE-003")
    assert "drop the route to the configuration service" in found.fix
    with pybroker.connect(pair[0], worker=False) as inst:
        inst.database("Shop").execute("DROP ROUTE [Config]")
    assert pybroker.diagnose(pair) == []


def test_old_conversing_endpoints_are_fixed_by_ending_the_dialogs(tmp_path):
    file = tmp_path / "open.duckdb"
    _conversations(file, 3, end=False)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=2)

    def diagnosed():
        return pybroker.diagnose([file], now=later, leak_age=dt.timedelta(days=1),
                                 leak_count=3)

    assert "END CONVERSATION @handle on both sides" in only(diagnosed(), "D-CNV-002").fix
    with pybroker.connect(file, worker=False) as inst:  # each side ends its endpoint
        db = inst.database("App")
        handles = [r[0] for r in inst.sql("SELECT conversation_handle FROM "
                                          "sys.conversation_endpoints").fetchall()]
        for handle in handles:
            db.conversation(handle).end()
    assert "D-CNV-002" not in codes(diagnosed())


# -- D-CFG-007, D-CFG-008: the fix is a renewal of the certificate -------------------------


def _expiring_pair(tmp_path, days: int) -> tuple:
    """Shop and Stock as ``pair`` gives them, but Shop's endpoint certificate (which Stock
    trusts) made to expire ``days`` days from now."""
    shop_file, stock_file = tmp_path / "shop.duckdb", tmp_path / "stock.duckdb"
    expiry = dt.datetime.now(dt.UTC) + dt.timedelta(days=days)
    with pybroker.connect(shop_file, worker=False) as shop_inst, \
            pybroker.connect(stock_file, worker=False) as stock_inst:
        shop_inst.database("master").execute(
            f"CREATE CERTIFICATE Own WITH SUBJECT = 'shop', EXPIRY_DATE = '{expiry:%Y-%m-%d}';"
            f"CREATE ENDPOINT BrokerEndpoint STATE = STARTED AS TCP (LISTENER_PORT = "
            f"{test_diagnose.SHOP_PORT}, LISTENER_IP = (127.0.0.1)) FOR SERVICE_BROKER "
            "(AUTHENTICATION = CERTIFICATE Own)")
        endpoint(stock_inst, STOCK_PORT)
        test_diagnose.trust_each_other(shop_inst, stock_inst)
        shop = shop_inst.create_database("Shop")
        shop.create_service("ShopService", queue=shop.create_queue("ShopQueue").name)
        stock = stock_inst.create_database("Stock")
        stock.create_service("StockService", queue=stock.create_queue("StockQueue").name,
                             contracts=["DEFAULT"])
        shop.create_route("ToStock", service_name="StockService", address=address(STOCK_PORT))
        stock.create_route("ToShop", service_name="ShopService",
                           address=address(test_diagnose.SHOP_PORT))
    return shop_file, stock_file


@pytest.fixture(scope="module")
def expiring(tmp_path_factory):
    """The pair of _expiring_pair with 10 days left, made once; each test takes a copy."""
    return _expiring_pair(tmp_path_factory.mktemp("expiring"), 10)


def _copy(files, tmp_path) -> tuple:
    for made in files:
        (tmp_path / made.name).write_bytes(made.read_bytes())
    return tuple(tmp_path / made.name for made in files)


def _renew_and_trust(fix: str, tmp_path, capsys) -> None:
    """Run a certificate finding's fix as written: `pybroker cert OWNER --renew > NAME.pem`
    where the certificate is the endpoint's own, then `pybroker trust ...` of that file."""
    renew = re.search(r"pybroker (cert \S+ --renew) > (\S+)", fix)
    trust = re.search(r"pybroker (trust \S+ \S+ \S+)$", fix)
    assert renew is not None and trust is not None, fix
    code, pem, err = call(renew.group(1).split(), capsys)
    assert code == 0 and pem.startswith("-----BEGIN CERTIFICATE-----"), err
    pem_file = tmp_path / renew.group(2)
    pem_file.write_text(pem)
    argv = trust.group(1).split()
    code, _, err = call([*argv[:-1], pem_file], capsys)
    assert code == 0, err


def test_a_certificate_expiring_within_30_days_is_fixed_by_renewing_it(expiring, tmp_path,
                                                                       capsys):
    shop_file, stock_file = pair = _copy(expiring, tmp_path)
    found = only(pybroker.diagnose(pair), "D-CFG-008")
    assert (found.instance, found.objects) == (str(stock_file), ("certificate peer0",))
    assert f"pybroker cert {shop_file} --renew > peer0.pem" in found.fix
    assert found.fix.endswith(f"pybroker trust {stock_file} peer0 peer0.pem")
    _renew_and_trust(found.fix, tmp_path, capsys)
    assert pybroker.diagnose(pair) == []  # renewed for ten years, and trusted as the new one


def test_an_expired_certificate_is_fixed_by_renewing_it(expiring, tmp_path, capsys):
    pair = _copy(expiring, tmp_path)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=11)  # Shop's certificate expired
    found = only(pybroker.diagnose(pair, now=later), "D-CFG-007")
    assert (found.severity, found.instance) == ("error", str(pair[1]))
    _renew_and_trust(found.fix, tmp_path, capsys)
    assert pybroker.diagnose(pair, now=later) == []
    code, _, err = call(["cert", pair[0], "--days", "5"], capsys)  # --days needs --renew
    assert code == 2 and "--days goes with --renew" in err


def test_renewing_keeps_the_subject_and_key_and_is_refused_while_the_endpoint_runs(tmp_path):
    from pybroker.core.wire.certificates import certificate_info

    with pybroker.connect(tmp_path / "one.duckdb", worker=False) as inst:
        old = certificate_info(inst.certificate)
        new = certificate_info(inst.renew_certificate(
            dt.datetime.now(dt.UTC) + dt.timedelta(days=20)))
        assert new.subject == old.subject and new.fingerprint != old.fingerprint
        assert (new.not_after - dt.datetime.now(dt.UTC).replace(tzinfo=None)).days == 19
        assert certificate_info(inst.certificate).fingerprint == new.fingerprint
        with pytest.raises(pybroker.BrokerError, match="must expire after now"):
            inst.renew_certificate(dt.datetime(2000, 1, 1))
        inst.start_endpoint(0)
        with pytest.raises(pybroker.BrokerError, match=r"close it .*before renewing"):
            inst.renew_certificate()


# -- conversation hygiene: the fixes of D-CNV-001, D-CNV-003, D-CNV-004, D-CNV-005 ---------


def test_disconnected_inbound_endpoints_are_fixed_by_ending_them(tmp_path):
    file = tmp_path / "leak.duckdb"
    _conversations(file, 5, end=True)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    found = only(pybroker.diagnose([file], now=later, leak_count=5), "D-CNV-001")
    assert "END CONVERSATION @handle" in found.fix
    with pybroker.connect(file, worker=False) as inst:  # the target ends what it received
        db = inst.database("App")
        for (handle,) in inst.sql("SELECT conversation_handle FROM sys.conversation_endpoints"
                                  " WHERE state_desc = 'DISCONNECTED_INBOUND'").fetchall():
            db.execute(f"END CONVERSATION '{handle}'")
    assert "D-CNV-001" not in codes(pybroker.diagnose([file], now=later, leak_count=5))


def test_growth_and_waiting_messages_are_fixed_by_a_route_and_ending_the_dialogs(tmp_path):
    file, earlier = tmp_path / "grows.duckdb", tmp_path / "earlier.duckdb"
    grown_since(file, earlier)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)

    def diagnosed():
        return {f.code: f for f in pybroker.diagnose([file], since=[earlier], now=later,
                                                     leak_count=5)}

    found = diagnosed()
    assert {"D-CNV-003", "D-CNV-004", "D-CNV-005"} <= set(found)
    assert "a route (CREATE ROUTE)" in found["D-CNV-005"].fix
    with pybroker.connect(file, worker=False) as inst:  # D-CNV-005's fix: the route back
        inst.database("App").execute("CREATE ROUTE AutoCreatedLocal WITH ADDRESS = 'LOCAL'")
        inst.run_pending(time.time() + 3600)  # the senders' next retry (C5)
        assert inst.sql("SELECT count(*) FROM sys.transmission_queue").fetchone() == (0,)
    found = diagnosed()
    assert not {"D-CNV-004", "D-CNV-005"} & set(found) and "D-CNV-003" in found
    assert "WITH CLEANUP" in found["D-CNV-003"].fix
    with pybroker.connect(file, worker=False) as inst:  # D-CNV-003's: end both sides, clean up
        db = inst.database("App")
        for queue in ("TargetQueue", "InitQueue"):  # one conversation group a RECEIVE (C7)
            while batch := db.receive(queue, max_messages=100):
                for message in batch:
                    db.conversation(message.conversation_handle).end()
        for (handle,) in inst.sql("SELECT conversation_handle FROM sys.conversation_endpoints"
                                  " WHERE state_desc = 'CLOSED'").fetchall():
            db.execute(f"END CONVERSATION '{handle}' WITH CLEANUP")
    assert not {"D-CNV-003", "D-CNV-004", "D-CNV-005"} & set(diagnosed())


def test_a_renewed_certificate_carries_messages_once_the_peer_trusts_it(tmp_path):
    shop_inst = pybroker.connect(tmp_path / "shop.duckdb", retry_scale=0.01)
    stock_inst = pybroker.connect(tmp_path / "stock.duckdb", retry_scale=0.01)
    try:
        stock_inst.trust("Shop", shop_inst.certificate)
        shop_inst.trust("Stock", stock_inst.certificate)
        # in place of the old one: Stock admits only the renewed certificate from here on
        stock_inst.trust("Shop", shop_inst.renew_certificate())
        shop_ep, stock_ep = shop_inst.start_endpoint(0), stock_inst.start_endpoint(0)
        shop, stock = shop_inst.create_database("Shop"), stock_inst.create_database("Stock")
        shop.create_service("ShopService", queue=shop.create_queue("ShopQueue").name)
        stock.create_service("StockService", queue=stock.create_queue("StockQueue").name,
                             contracts=["DEFAULT"])
        shop.create_route("ToStock", service_name="StockService", address=stock_ep.address)
        stock.create_route("ToShop", service_name="ShopService", address=shop_ep.address)
        shop.begin_dialog("ShopService", "StockService").send(b"<order/>")
        got = stock.receive("StockQueue", max_messages=10, timeout=30)
        assert [m.message_body for m in got] == [b"<order/>"]  # signed with the same key
    finally:
        shop_inst.close()
        stock_inst.close()
