"""Each finding of ``pybroker diagnose`` gone once the fix it gives is applied, for the rules
whose tests elsewhere only produce the finding (test_diagnose.py): the situation built in
real instance files, the finding, its fix run as written, and diagnose asked again."""

from __future__ import annotations

import datetime as dt

import pybroker
from tests import test_diagnose
from tests.test_diagnose import (
    STOCK_PORT,
    _conversations,
    address,
    codes,
    endpoint,
    only,
)

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
