"""The seven routing examples of the seeds (shared/conformance/routing_examples.json), through
the public API and through the SQL macro route_decision() of the instance file: both must
give the decision the seeds require (SPEC R1-R4, R3.6)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import pybroker
from pybroker.devtools.demos.routing import (
    EXAMPLES_FILE,
    build_example,
    check_case,
    decide_case,
    iter_cases,
    load_examples,
)

EXAMPLES = load_examples()
CASES = list(iter_cases(EXAMPLES))
SHARED_COPY = Path(__file__).resolve().parents[2] / "shared/conformance/routing_examples.json"


def _case_id(pair) -> str:
    example, case = pair
    broker = f"[{case.broker_instance[:8]}]" if case.broker_instance else ""
    forwarding = {None: "", True: "+fwd", False: "-fwd"}[case.forwarding]
    return f"ex{example.number}:{case.origin}->{case.service}{broker}{forwarding}"


def test_all_seven_examples_and_their_cases_are_loaded():
    assert [e.number for e in EXAMPLES] == [1, 2, 3, 4, 5, 6, 7]
    assert len(CASES) == 33


# sha256 of shared/conformance/routing_examples.json as the project received it: a checkout
# without ../shared (CI's clean clone) still proves the shipped copy is that file.
SHARED_SHA256 = "d2167a64ce29f1108b107331c2803fb37d04dd2dbfee3f411d9a02f2e640d163"


def test_shipped_copy_is_the_shared_conformance_file():
    assert hashlib.sha256(EXAMPLES_FILE.read_bytes()).hexdigest() == SHARED_SHA256
    if SHARED_COPY.exists():  # beside the checkout (the developers' machine): the same file
        assert json.loads(EXAMPLES_FILE.read_text()) == json.loads(SHARED_COPY.read_text())


@pytest.fixture(scope="module")
def instances():
    built = {}
    for example in EXAMPLES:
        inst = pybroker.connect()
        build_example(inst, example)
        built[example.id] = inst
    yield built
    for inst in built.values():
        inst.close()


@pytest.mark.parametrize("pair", CASES, ids=[_case_id(p) for p in CASES])
def test_example_case_through_the_python_api(instances, pair):
    example, case = pair
    decision = decide_case(instances[example.id], example, case)
    assert check_case(case, decision) == []
    assert decision.outcome == case.expect["outcome"]


@pytest.mark.parametrize("pair", CASES, ids=[_case_id(p) for p in CASES])
def test_example_case_through_the_route_decision_macro(instances, pair):
    example, case = pair
    inst = instances[example.id]
    inst.forwarding = example.forwarding if case.forwarding is None else case.forwarding
    try:
        rows = inst.sql(
            "SELECT outcome, route, address, mirror_address, database "
            "FROM route_decision($origin, $service, broker_instance := $broker)",
            {"origin": case.origin, "service": case.service, "broker": case.broker_instance},
        ).fetchall()
    finally:
        inst.forwarding = example.forwarding
    assert len(rows) == 1
    outcome, route, address, mirror, database = rows[0]
    decision = SimpleNamespace(
        outcome=outcome, route=route, address=address, mirror_address=mirror, database=database
    )
    assert check_case(case, decision) == []


def test_example_5_api_and_macro_both_spread_over_the_two_broker_identifiers(instances):
    """R2.3 / example 5: the arbitrary pick must use every identifier, in Python and SQL."""
    inst = instances["example-5-network-routes-to-instances-of-one-service"]
    api = {inst.route("BalancedService", origin="AdventureWorks2008R2").route for _ in range(200)}
    sql = {
        inst.sql(
            "SELECT route FROM route_decision('AdventureWorks2008R2', 'BalancedService')"
        ).fetchone()[0]
        for _ in range(60)
    }
    assert api == {"BalancedRouteOne", "BalancedRouteTwo"}
    assert sql == {"BalancedRouteOne", "BalancedRouteTwo"}


def test_check_case_reports_a_wrong_decision():
    _example, case = CASES[0]
    wrong = SimpleNamespace(outcome="drop", route=None, address=None, mirror_address=None,
                            database=None)
    problems = check_case(case, wrong)
    assert any(p.startswith("outcome is 'drop'") for p in problems)
