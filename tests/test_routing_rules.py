"""Every routing requirement of SPEC R1-R10 that routing decides, each test citing its
number. (Network behaviour of R5-R9, such as pinning on acknowledgement, hop counts and
mirror probing, belongs to the conversation and wire issues; their routing halves are here.)
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC

import pytest

import pybroker
from pybroker import NotFoundError, RouteDefinitionError

DYNAMIC = "SQL/ServiceBroker/BrokerConfiguration"
GUID_1 = "5fb8d92b-ed69-4c80-afbb-2aa6a7d3cb2d"
GUID_2 = "81b1d3d0-288e-4d2c-b1d3-456cbb944b4f"




@pytest.fixture
def inst(clock):
    with pybroker.connect(clock=clock) as instance:
        yield instance


def service_db(inst, name, *services):
    db = inst.create_database(name)
    db.create_queue("q")
    for service in services:
        db.create_service(service, queue="q")
    return db


# -- R1: two levels of routing tables --------------------------------------------------------


def test_R1_1_a_conversation_uses_only_its_own_databases_table(inst):
    a = service_db(inst, "A")
    b = service_db(inst, "B")
    b.create_route("ToX", service_name="X", address="tcp://x:4022")
    assert inst.route("X", origin="B").outcome == "send"
    assert inst.route("X", origin="A").outcome == "delay"  # A's table has no route to X
    a.create_route("MsdbLike", service_name="Y", address="tcp://y:4022")
    assert inst.route("Y", origin="B").outcome == "delay"


def test_R1_2_messages_from_outside_use_msdbs_table_only(inst):
    a = service_db(inst, "A")
    a.create_route("ToX", service_name="X", address="tcp://x:4022")
    assert inst.route("X", origin="outside").outcome == "drop"
    inst.database("msdb").create_route("Fwd", service_name="X", address="tcp://fwd:4022")
    inst.forwarding = True
    decision = inst.route("X", origin="outside")
    assert (decision.outcome, decision.route, decision.address) == (
        "send", "Fwd", "tcp://fwd:4022")


def test_R1_3_every_database_but_master_has_AutoCreatedLocal(inst):
    inst.create_database("A")
    tables = {db.name: db.routes() for db in inst.databases()}
    assert tables["master"] == []
    for name in ("msdb", "A"):
        (route,) = tables[name]
        assert (route.name, route.remote_service_name, route.broker_instance, route.address,
                route.mirror_address, route.lifetime) == (
            "AutoCreatedLocal", None, None, "LOCAL", None, None)


def test_R1_3_AutoCreatedLocal_can_be_dropped_and_recreated(inst):
    a = service_db(inst, "A", "S")
    a.drop_route("AutoCreatedLocal")
    assert inst.route("S", origin="A").outcome == "delay"
    a.create_route("AutoCreatedLocal", address="LOCAL")
    assert inst.route("S", origin="A").outcome == "deliver"


def test_R1_4_expired_routes_are_ignored_but_stay_in_the_catalog(inst, clock):
    a = service_db(inst, "A")
    a.create_route("Short", service_name="X", address="tcp://x:4022", lifetime=60)
    assert inst.route("X", origin="A").route == "Short"
    clock.now += 59
    assert inst.route("X", origin="A").route == "Short"  # answered from memory, still live
    clock.now += 2
    assert inst.route("X", origin="A").outcome == "delay"  # the cache knew when to expire
    route = a.route("Short")
    assert route.is_expired and route.name == "Short"


def test_R1_4_expiry_in_sys_routes_view(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        inst.create_database("A").create_route("R", address="tcp://x:1", lifetime=3600)
        rows = inst.sql(
            "SELECT name, is_expired FROM sys.routes WHERE database_name = 'A' ORDER BY name"
        ).fetchall()
    assert rows == [("AutoCreatedLocal", False), ("R", False)]


# -- R2: matching --------------------------------------------------------------------------


def test_R2_1_service_and_broker_both_match(inst):
    a = service_db(inst, "A")
    a.create_route("One", service_name="S", broker_instance=GUID_1, address="tcp://one:1")
    a.create_route("Two", service_name="S", broker_instance=GUID_2, address="tcp://two:1")
    a.create_route("Any", service_name="S", address="tcp://any:1")
    decision = inst.route("S", broker_instance=GUID_2.upper(), origin="A")
    assert (decision.route, decision.match_step) == ("Two", "R2.1")


def test_R2_2_service_matches_with_no_broker_identifier(inst):
    a = service_db(inst, "A")
    a.create_route("One", service_name="S", broker_instance=GUID_1, address="tcp://one:1")
    a.create_route("Any", service_name="S", address="tcp://any:1")
    other = "00000000-0000-0000-0000-000000000001"
    assert inst.route("S", broker_instance=other, origin="A").route == "Any"
    assert inst.route("S", origin="A").route == "Any"
    assert inst.route("S", origin="A").match_step == "R2.2"


def test_R2_3_the_pick_spreads_over_all_broker_identifiers(inst):
    a = service_db(inst, "A")
    a.create_route("One", service_name="S", broker_instance=GUID_1, address="tcp://one:1")
    a.create_route("Two", service_name="S", broker_instance=GUID_2, address="tcp://two:1")
    a.create_route("Two2", service_name="S", broker_instance=GUID_2, address="tcp://two:2")
    picks = Counter(inst.route("S", origin="A").broker_instance for _ in range(4000))
    # one identifier is picked first, then a route of it: each identifier about half
    assert set(picks) == {GUID_1, GUID_2}
    assert 0.4 < picks[GUID_1] / 4000 < 0.6
    assert inst.route("S", origin="A").match_step == "R2.3"


def test_R2_3_does_not_apply_when_the_conversation_names_a_broker(inst):
    a = service_db(inst, "A")
    a.create_route("One", service_name="S", broker_instance=GUID_1, address="tcp://one:1")
    a.create_route("Wild", address="tcp://wild:1")
    decision = inst.route("S", broker_instance=GUID_2, origin="A")
    assert (decision.route, decision.match_step) == ("Wild", "R2.5")


def test_R2_4_dynamic_routing_delays_and_asks(inst):
    a = service_db(inst, "A", "Local")
    a.create_route("Dyn", service_name=DYNAMIC, address="tcp://router:4022")
    decision = inst.route("Unknown", origin="A")
    assert (decision.outcome, decision.decided_by, decision.route_request_due) == (
        "delay", "R2.4", True)
    # R8.3: R2.4 comes before R2.5, so even a local service is asked about first
    assert inst.route("Local", origin="A").decided_by == "R2.4"
    # a service with a route of its own never reaches R2.4
    a.create_route("Known", service_name="Known", address="tcp://k:1")
    assert inst.route("Known", origin="A").match_step == "R2.2"


def test_R2_4_skipped_while_a_route_request_is_pending(inst, clock):
    a = service_db(inst, "A", "Local")
    a.create_route("Dyn", service_name=DYNAMIC, address="tcp://router:4022")
    inst.kernel.store.execute(  # R8.2: the dynamic routing issue writes these rows
        "INSERT INTO route_requests VALUES (?, ?, to_timestamp(?)::TIMESTAMP)",
        [a.database_id, "Local", clock.now],
    )
    inst.kernel.routing.invalidate()
    decision = inst.route("Local", origin="A")
    assert (decision.outcome, decision.match_step, decision.route_request_due) == (
        "deliver", "R2.5", False)
    assert inst.route("Other", origin="A").decided_by == "R2.4"  # no request for Other


def test_R2_5_wildcards_match_any_service(inst):
    a = service_db(inst, "A")
    a.create_route("Wild", address="tcp://wild:4022")
    decision = inst.route("Whatever", origin="A")
    assert (decision.route, decision.match_step, decision.choose_step) == (
        "Wild", "R2.5", "R3.3")


def test_R2_6_implicit_local_route_for_a_named_broker(inst):
    a = service_db(inst, "A")
    b = service_db(inst, "B", "S")
    a.drop_route("AutoCreatedLocal")
    decision = inst.route("S", broker_instance=b.broker_instance, origin="A")
    assert (decision.outcome, decision.route, decision.database, decision.match_step) == (
        "deliver", None, "B", "R2.6")
    # without a broker identifier R2.6 does not apply: DELAYED (R2.7)
    assert inst.route("S", origin="A").decided_by == "R2.7"


def test_R2_7_no_route_is_a_delayed_result_not_an_error(inst):
    a = service_db(inst, "A")
    a.drop_route("AutoCreatedLocal")
    decision = inst.route("Nowhere", origin="A")
    assert (decision.outcome, decision.route, decision.decided_by) == ("delay", None, "R2.7")
    assert decision.trace[-1] == pybroker.TraceStep("R2.7", "delayed")


# -- R3: choosing --------------------------------------------------------------------------


def test_R3_identical_routes_count_as_one(inst):
    a = service_db(inst, "A")
    a.create_route("X1", service_name="S", address="tcp://a:1")
    a.create_route("X2", service_name="S", address="tcp://a:1")
    a.create_route("Y", service_name="S", address="tcp://b:1")
    addresses = Counter(inst.route("S", origin="A").address for _ in range(4000))
    assert 0.4 < addresses["tcp://a:1"] / 4000 < 0.6  # not 2/3


def test_R3_1_a_mirrored_route_is_chosen_first(inst):
    a = service_db(inst, "A", "S")
    a.create_route("Net", service_name="S", address="tcp://net:1")
    a.create_route("Loc", service_name="S", address="LOCAL")
    a.create_route("Mir", service_name="S", address="tcp://p1:1", mirror_address="tcp://p2:1")
    decision = inst.route("S", origin="A")
    assert (decision.route, decision.mirror_address, decision.choose_step) == (
        "Mir", "tcp://p2:1", "R3.1")


def test_R3_2_LOCAL_only_if_the_service_exists_in_the_instance(inst):
    a = service_db(inst, "A")
    a.create_route("Loc", service_name="S", address="LOCAL")
    a.create_route("Net", service_name="S", address="tcp://net:1")
    assert inst.route("S", origin="A").route == "Net"  # S exists nowhere: LOCAL skipped
    a.create_service("S", queue="q")
    decision = inst.route("S", origin="A")
    assert (decision.route, decision.choose_step, decision.database) == ("Loc", "R3.2", "A")


def test_R3_3_network_address_before_TRANSPORT(inst):
    a = service_db(inst, "A")
    a.create_route("Tr", address="TRANSPORT")
    a.create_route("Net", address="tcp://net:1")
    a.drop_route("AutoCreatedLocal")
    assert inst.route("tcp://h:4022/S", origin="A").choose_step == "R3.3"


def test_R3_4_TRANSPORT_takes_the_address_from_the_service_name(inst):
    a = service_db(inst, "A")
    a.create_route("Tr", address="TRANSPORT")
    decision = inst.route("TCP://Host.Example.com:4022/Orders/v1", origin="A")
    assert (decision.outcome, decision.route, decision.address, decision.choose_step) == (
        "send", "Tr", "TCP://Host.Example.com:4022", "R3.4")


def test_R10_6_a_service_name_without_an_address_cannot_use_TRANSPORT(inst):
    a = service_db(inst, "A")
    a.drop_route("AutoCreatedLocal")
    a.create_route("Tr", address="TRANSPORT")
    assert inst.route("Orders", origin="A").decided_by == "R3.5"


def test_R3_5_nothing_chosen_delays_local_and_drops_remote(inst):
    service_db(inst, "A")
    assert inst.route("Missing", origin="A").decided_by == "R3.5"
    assert inst.route("Missing", origin="A").outcome == "delay"
    assert inst.route("Missing", origin="outside").outcome == "drop"


def test_R3_6_forwarding_off_drops_remote_non_local(inst):
    service_db(inst, "A", "Here")
    msdb = inst.database("msdb")
    msdb.create_route("Fwd", service_name="Away", address="tcp://away:1")
    assert inst.forwarding is False  # R7.3: off by default
    decision = inst.route("Away", origin="outside")
    assert (decision.outcome, decision.route, decision.decided_by) == ("drop", "Fwd", "R3.6")
    assert inst.route("Here", origin="outside").outcome == "deliver"  # LOCAL unaffected
    inst.forwarding = True
    assert inst.route("Away", origin="outside").outcome == "send"


# -- R4: locating --------------------------------------------------------------------------


def test_R4_1_a_named_broker_locates_its_database(inst):
    service_db(inst, "A", "S")
    b = service_db(inst, "B", "S")
    decision = inst.route("S", broker_instance=b.broker_instance, origin="A")
    assert (decision.database, decision.locate_step) == ("B", "R4.1")


def test_R4_2_own_database_first_then_the_others(inst):
    service_db(inst, "A", "S")
    service_db(inst, "B", "S", "OnlyB")
    assert {inst.route("S", origin="A").database for _ in range(50)} == {"A"}
    decision = inst.route("OnlyB", origin="A")
    assert (decision.database, decision.locate_step) == ("B", "R4.2")


def test_R4_2_several_other_copies_are_picked_at_random(inst):
    service_db(inst, "A")
    service_db(inst, "B", "S")
    service_db(inst, "C", "S")
    picks = Counter(inst.route("S", origin="A").database for _ in range(2000))
    assert set(picks) == {"B", "C"} and min(picks.values()) > 600


def test_R4_3_service_not_found_returns_to_choosing(inst):
    a = service_db(inst, "A")
    service_db(inst, "B", "S")
    a.create_route("Net", address="tcp://net:1")
    # the broker names A, which lacks S: LOCAL cannot locate, so R3.3 is chosen instead
    decision = inst.route("S", broker_instance=a.broker_instance, origin="A")
    assert (decision.route, decision.choose_step) == ("Net", "R3.3")


# -- R5, R6, R8, R9: their routing halves -------------------------------------------------


def test_R5_a_pinned_conversation_matches_at_R2_1(inst):
    a = service_db(inst, "A")
    a.create_route("One", service_name="S", broker_instance=GUID_1, address="tcp://one:1")
    a.create_route("Two", service_name="S", broker_instance=GUID_2, address="tcp://two:1")
    pinned = {inst.route("S", broker_instance=GUID_1, origin="A").route for _ in range(100)}
    assert pinned == {"One"}


def test_R6_a_reply_for_a_broker_of_this_instance_is_delivered_inside(inst):
    a = service_db(inst, "A", "Initiator")
    decision = inst.route("Initiator", broker_instance=a.broker_instance, origin="outside")
    assert (decision.outcome, decision.database, decision.locate_step) == (
        "deliver", "A", "R4.1")


def test_R8_1_the_dynamic_routing_service_is_named_by_its_route(inst):
    a = service_db(inst, "A")
    a.create_route("NotDyn", service_name=DYNAMIC.lower(), address="tcp://r:1")
    assert inst.route("X", origin="A").decided_by != "R2.4"  # names compare exactly


def test_R9_1_mirrors_get_no_special_treatment_when_matching(inst):
    a = service_db(inst, "A")
    a.create_route("Mir", address="tcp://p1:1")  # wildcard
    a.create_route("Plain", service_name="S", address="tcp://plain:1")
    a.alter_route("Mir", service_name="T", mirror_address="tcp://p2:1")
    assert inst.route("S", origin="A").route == "Plain"  # R2.2 wins, mirror or not


def test_R7_3_forwarding_settings_persist(tmp_path):
    path = tmp_path / "i.duckdb"
    with pybroker.connect(path) as inst:
        assert (inst.forwarding, inst.forwarding_size_mb) == (False, 10)
        inst.forwarding = True
        inst.forwarding_size_mb = 64
    with pybroker.connect(path) as inst:
        assert (inst.forwarding, inst.forwarding_size_mb) == (True, 64)
        with pytest.raises(pybroker.BrokerError, match="positive whole number"):
            inst.forwarding_size_mb = 0
        with pytest.raises(pybroker.BrokerError, match="True or False"):
            inst.forwarding = "yes"


# -- R10: route definitions through the API ---------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"address": "tcp://a:1", "mirror_address": "tcp://b:1"}, "MIRROR_ADDRESS requires"),
        ({"service_name": "S", "address": "LOCAL", "mirror_address": "tcp://b:1"},
         "cannot be used with ADDRESS = 'LOCAL'"),
        ({"service_name": "S", "address": "tcp://a:1", "mirror_address": "TCP://A:1/"},
         "must differ"),
        ({"broker_instance": GUID_1, "address": "tcp://a:1"}, "BROKER_INSTANCE requires"),
        ({"service_name": "S", "address": "TRANSPORT"}, "TRANSPORT route must not name"),
        ({"address": "http://a:1"}, "none of 'LOCAL', 'TRANSPORT'"),
        ({"address": "tcp://a:99999"}, "none of"),
        ({"address": ""}, "must not be an empty string"),
        ({"service_name": "", "address": "LOCAL"}, "must not be an empty"),
        ({"service_name": "s" * 257, "address": "LOCAL"}, "at most 256"),
        ({"address": "tcp://a:1", "lifetime": 0}, "positive whole number"),
        ({"address": "tcp://a:1", "lifetime": -5}, "positive whole number"),
        ({"address": "tcp://a:1", "lifetime": 1.5}, "positive whole number"),
        ({"address": "tcp://a:1", "lifetime": "60"}, "positive whole number"),
        ({"service_name": "S", "broker_instance": "not-a-guid", "address": "tcp://a:1"},
         "not a GUID"),
    ],
)
def test_R10_2_rejected_definitions_name_the_rule_and_change_nothing(inst, kwargs, message):
    a = service_db(inst, "A")
    before = a.routes()
    with pytest.raises(RouteDefinitionError, match=message) as caught:
        a.create_route("Bad", **kwargs)
    assert caught.value.rule == "R10.2"
    assert a.routes() == before


def test_R10_1_only_ADDRESS_is_required_and_forms_are_accepted(inst):
    a = service_db(inst, "A")
    for i, address in enumerate(["LOCAL", "local", "Transport", "tcp://h:4022", "TCP://h:4022/",
                                 "tcp://10.0.0.1:1", "tcp://[::1]:4022"]):
        a.create_route(f"R{i}", address=address)
    stored = [r.address for r in a.routes() if r.name.startswith("R")]
    assert stored[:3] == ["LOCAL", "LOCAL", "TRANSPORT"]
    assert stored[3:] == ["tcp://h:4022", "TCP://h:4022/", "tcp://10.0.0.1:1", "tcp://[::1]:4022"]


def test_R10_1_lifetime_is_seconds_from_now(inst, clock):
    a = service_db(inst, "A")
    route = a.create_route("L", address="tcp://a:1", lifetime=90)
    expiry = route.lifetime.replace(tzinfo=UTC).timestamp()  # stored as naive UTC
    assert expiry == pytest.approx(clock.now + 90, abs=1e-3)


def test_R10_1_route_names_are_unique_per_database(inst):
    a = service_db(inst, "A")
    b = service_db(inst, "B")
    a.create_route("Same", address="tcp://a:1")
    b.create_route("Same", address="tcp://b:1")  # another database: fine
    with pytest.raises(RouteDefinitionError, match="already exists") as caught:
        a.create_route("Same", address="tcp://c:1")
    assert caught.value.rule == "R10.2"
    assert a.route("Same").address == "tcp://a:1"


def test_R10_3_a_mirrored_pair_without_broker_instance_is_accepted(inst):
    a = service_db(inst, "A")
    route = a.create_route("M", service_name="S", address="tcp://p1:1",
                           mirror_address="tcp://p2:1")
    assert (route.broker_instance, route.mirror_address) == (None, "tcp://p2:1")


def test_R10_4_alter_changes_only_what_is_given_and_can_revive_an_expired_route(inst, clock):
    a = service_db(inst, "A")
    a.create_route("R", service_name="S", address="tcp://a:1", lifetime=10)
    clock.now += 11
    assert a.route("R").is_expired
    assert inst.route("S", origin="A").outcome == "delay"
    revived = a.alter_route("R", lifetime=3600)
    assert (revived.is_expired, revived.address, revived.remote_service_name) == (
        False, "tcp://a:1", "S")
    assert inst.route("S", origin="A").route == "R"
    moved = a.alter_route("R", address="tcp://b:2")
    assert (moved.address, moved.lifetime) == ("tcp://b:2", revived.lifetime)
    cleared = a.alter_route("R", service_name="")
    assert cleared.remote_service_name is None


def test_R10_4_alter_that_would_break_a_rule_changes_nothing(inst):
    a = service_db(inst, "A")
    a.create_route("R", service_name="S", address="tcp://a:1", mirror_address="tcp://b:1")
    with pytest.raises(RouteDefinitionError, match="MIRROR_ADDRESS requires SERVICE_NAME"):
        a.alter_route("R", service_name="")
    assert a.route("R").remote_service_name == "S"


def test_R10_5_dropping_a_route_in_use_is_allowed(inst):
    a = service_db(inst, "A")
    a.create_route("R", service_name="S", address="tcp://a:1")
    assert inst.route("S", origin="A").outcome == "send"
    a.drop_route("R")
    assert inst.route("S", origin="A").outcome == "delay"  # waits for a route to appear
    with pytest.raises(NotFoundError, match="route 'R' does not exist in database 'A'"):
        a.drop_route("R")
