"""Every public API call either works or raises a BrokerError that names the
argument, and a refused call changes nothing. Inputs are generated (hypothesis): wrong
types, integers at and past the storage's bounds, lone surrogates, NULs, non-finite floats.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from conftest import FakeClock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import BrokerError, InvalidArgumentError

SETTINGS = settings(max_examples=12, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

# Values a careless or hostile caller passes where pybroker wants a name, a number, a flag.
BAD_TEXT = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1,
            max_size=3).map(lambda s: "q" + s),  # lone surrogates
    st.text(max_size=4).map(lambda s: s + "\x00" + s),  # NUL
    st.just(""),
    st.text(min_size=300, max_size=300),  # longer than any name
)
INTEGERS = st.one_of(
    st.sampled_from([0, -1, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, -(2**63) - 1,
                     10**30]),
    st.integers(),
)
FLOATS = st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324]),
                   st.floats())
WRONG_TYPES = st.one_of(
    st.none(), st.booleans(), INTEGERS, FLOATS, st.binary(max_size=4),
    st.lists(st.text(max_size=3), max_size=2), st.tuples(st.integers()),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
    st.just(object()), st.just(b"\xff"), st.just(frozenset({1})),
)
ANYTHING = st.one_of(BAD_TEXT, WRONG_TYPES, st.text(max_size=8))


@pytest.fixture(scope="module")
def world():
    """One instance with a database, objects and a conversation, shared by the module: every
    call that fails must leave it exactly as it was."""
    clock = FakeClock()
    inst = pybroker.connect(None, clock=clock, worker=False)
    db = inst.create_database("A")
    db.create_message_type("M", validation="NONE")
    db.create_contract("C", {"M": "ANY"})
    db.create_queue("Q")
    db.create_service("S", queue="Q", contracts=["C", "DEFAULT"])
    db.create_route("R", service_name="Far", address="tcp://far:4022")
    conv = db.begin_dialog("S", "S", contract="C")
    yield inst, db, conv
    _last.pop(id(inst), None)
    inst.close()


def snapshot(inst: pybroker.Instance) -> tuple[Any, ...]:
    """Every row of every table of the instance, as one hash per table (one query)."""
    tables = [r[0] for r in inst.sql(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY 1"
    ).fetchall()]
    query = "SELECT " + ", ".join(
        f"(SELECT hash(string_agg(CAST(t AS VARCHAR), '|' ORDER BY CAST(t AS VARCHAR))) "
        f"FROM {table} AS t)" for table in tables)
    return tuple(inst.sql(query).fetchone())


_last: dict[int, tuple[Any, ...]] = {}  # the instance's snapshot after the last call


def refused_or_fine(inst: pybroker.Instance, call: Callable[[], Any], *,
                    duckdb_text: bool = False) -> BrokerError | None:
    """Run ``call``: it works, or raises a BrokerError and leaves the instance unchanged.
    Only Instance.sql() may quote DuckDB (the query is DuckDB's SQL)."""
    before = _last.get(id(inst)) or snapshot(inst)
    try:
        call()
    except BrokerError as exc:
        after = snapshot(inst)
        _last[id(inst)] = after
        assert after == before, f"a refused call changed the instance: {exc}"
        if not duckdb_text:
            assert "Error:" not in str(exc), f"DuckDB's text reached the message: {exc}"
        return exc
    _last.pop(id(inst), None)  # it worked: it may have changed something
    return None


def no_wait(value: Any) -> Any:
    """A timeout that would make RECEIVE wait (real seconds) becomes 0; others stay."""
    waits = (isinstance(value, (int, float)) and not isinstance(value, bool)
             and value == value and 0 < value < math.inf)
    return 0 if waits else value


# Each public call with one argument replaced by a generated value. Calls that would
# change the instance when they work are given values that cannot work (a name that is
# not text, a wrong type), so "works" is the exception the test allows only for reads.
CALLS: dict[str, Callable[[Any, Any, Any, Any], Any]] = {
    "Instance.database": lambda i, d, c, v: i.database(v),
    "Instance.create_database": lambda i, d, c, v: i.create_database(v),
    "Instance.create_database(broker_instance)":
        lambda i, d, c, v: i.create_database("New", broker_instance=v),
    "Instance.route(service)": lambda i, d, c, v: i.route(v, origin="A"),
    "Instance.route(origin)": lambda i, d, c, v: i.route("S", origin=v),
    "Instance.route(broker_instance)":
        lambda i, d, c, v: i.route("S", origin="A", broker_instance=v),
    "Instance.route_many": lambda i, d, c, v: i.route_many(v),
    "Instance.route_many(item)": lambda i, d, c, v: i.route_many([v]),
    "Instance.route_many(origin)": lambda i, d, c, v: i.route_many([(v, "S", None)]),
    "Instance.explain": lambda i, d, c, v: i.explain(v, origin="A"),
    "Instance.run_pending": lambda i, d, c, v: i.run_pending(v),
    "Instance.forwarding": lambda i, d, c, v: setattr(i, "forwarding", v),
    "Instance.forwarding_size_mb": lambda i, d, c, v: setattr(i, "forwarding_size_mb", v),
    "Instance.max_message_size": lambda i, d, c, v: setattr(i, "max_message_size", v),
    "Instance.sql": lambda i, d, c, v: i.sql(v),
    "Instance.sql(params)": lambda i, d, c, v: i.sql("SELECT 1", params=v),
    "Database.create_queue": lambda i, d, c, v: d.create_queue(v),
    "Database.create_queue(status)": lambda i, d, c, v: d.create_queue("Q2", v),
    "Database.alter_queue(retention)": lambda i, d, c, v: d.alter_queue("Q", retention=v),
    "Database.drop_queue": lambda i, d, c, v: d.drop_queue(v),
    "Database.create_service": lambda i, d, c, v: d.create_service(v, queue="Q"),
    "Database.create_service(contracts)":
        lambda i, d, c, v: d.create_service("S2", queue="Q", contracts=v),
    "Database.alter_service(add_contracts)":
        lambda i, d, c, v: d.alter_service("S", add_contracts=v),
    "Database.drop_service": lambda i, d, c, v: d.drop_service(v),
    "Database.create_message_type": lambda i, d, c, v: d.create_message_type(v),
    "Database.create_message_type(validation)":
        lambda i, d, c, v: d.create_message_type("M2", v),
    "Database.drop_message_type": lambda i, d, c, v: d.drop_message_type(v),
    "Database.create_contract": lambda i, d, c, v: d.create_contract(v, {"M": "ANY"}),
    "Database.create_contract(messages)": lambda i, d, c, v: d.create_contract("C2", v),
    "Database.create_contract(sent_by)": lambda i, d, c, v: d.create_contract("C2", {"M": v}),
    "Database.drop_contract": lambda i, d, c, v: d.drop_contract(v),
    "Database.create_route": lambda i, d, c, v: d.create_route(v, address="LOCAL"),
    "Database.create_route(address)": lambda i, d, c, v: d.create_route("R2", address=v),
    "Database.create_route(lifetime)":
        lambda i, d, c, v: d.create_route("R2", address="LOCAL", lifetime=v),
    "Database.alter_route(service_name)":
        lambda i, d, c, v: d.alter_route("R", service_name=v),
    "Database.alter_route(mirror_address)":
        lambda i, d, c, v: d.alter_route("R", mirror_address=v),
    "Database.drop_route": lambda i, d, c, v: d.drop_route(v),
    "Database.route": lambda i, d, c, v: d.route(v),
    "Database.execute": lambda i, d, c, v: d.execute(v),
    "Database.begin_dialog(to)": lambda i, d, c, v: d.begin_dialog("S", v),
    "Database.begin_dialog(lifetime)": lambda i, d, c, v: d.begin_dialog("S", "S", lifetime=v),
    "Database.begin_dialog(broker_instance)":
        lambda i, d, c, v: d.begin_dialog("S", "S", broker_instance=v),
    "Database.begin_dialog(related_conversation_group)":
        lambda i, d, c, v: d.begin_dialog("S", "S", related_conversation_group=v),
    "Database.conversation": lambda i, d, c, v: d.conversation(v),
    "Database.receive": lambda i, d, c, v: d.receive(v),
    "Database.receive(max_messages)": lambda i, d, c, v: d.receive("Q", max_messages=v),
    "Database.receive(timeout)": lambda i, d, c, v: d.receive("Q", timeout=no_wait(v)),
    "Conversation.send(body)": lambda i, d, c, v: c.send(v, message_type="M"),
    "Conversation.send(message_type)": lambda i, d, c, v: c.send(b"", message_type=v),
    "Conversation.end(error)": lambda i, d, c, v: c.end(error=v, description="x"),
    "Conversation.end(description)": lambda i, d, c, v: c.end(error=1, description=v),
    "Conversation.end(cleanup)": lambda i, d, c, v: c.end(cleanup=v),
    "Conversation.begin_timer": lambda i, d, c, v: c.begin_timer(v),
    "Database.set_mirroring(role)":
        lambda i, d, c, v: d.set_mirroring(v, "tcp://partner:4022"),
    "Database.set_mirroring(partner)": lambda i, d, c, v: d.set_mirroring("MIRROR", v),
}

# The calls that may succeed with some generated value (reads, or values that are valid):
# for them "works" is an allowed outcome. Every other call must refuse every bad value.
MAY_WORK = {
    "Instance.route(service)", "Instance.route_many", "Instance.route_many(item)",
    "Instance.route_many(origin)", "Instance.explain", "Instance.run_pending",
    "Instance.sql(params)", "Database.receive(timeout)", "Database.receive(max_messages)",
    "Instance.route(broker_instance)", "Instance.forwarding", "Conversation.begin_timer",
    "Database.create_route(lifetime)", "Conversation.send(body)",
    "Database.create_service(contracts)", "Database.alter_service(add_contracts)",
    "Instance.forwarding_size_mb", "Instance.max_message_size",
    "Database.begin_dialog(lifetime)", "Database.begin_dialog(broker_instance)",
    "Database.begin_dialog(related_conversation_group)", "Conversation.end(error)",
    "Conversation.end(cleanup)", "Database.create_queue(status)",
    "Database.alter_queue(retention)", "Database.alter_route(service_name)",
    "Database.alter_route(mirror_address)", "Database.create_message_type(validation)",
    "Database.create_contract(messages)", "Database.create_contract(sent_by)",
    "Conversation.end(description)", "Instance.create_database(broker_instance)",
    "Database.set_mirroring(role)", "Database.set_mirroring(partner)",
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_call_refuses_bad_values_cleanly(world, name):
    inst, db, conv = world
    call = CALLS[name]

    # The world is shared: a call that works may change it (end the conversation, set a
    # smaller max_message_size), and the property holds in whatever state it leaves.
    @SETTINGS
    @given(value=BAD_TEXT if name not in MAY_WORK else ANYTHING)
    def check(value):
        refused = refused_or_fine(inst, lambda: call(inst, db, conv, value),
                                  duckdb_text=name.startswith("Instance.sql"))
        if name not in MAY_WORK:
            assert refused is not None, f"{name} accepted {value!r}"

    check()


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        # The cases of the issue, each a class the generators above cover too.
        (lambda i, d, c: i.database(123), "database name"),
        (lambda i, d, c: i.route(["X"], origin="A"), "service name"),
        (lambda i, d, c: d.conversation([1]), "handle"),
        (lambda i, d, c: d.create_contract("C3", 123), "messages"),
        (lambda i, d, c: d.create_service("S3", queue="Q", contracts=5), "contracts"),
        (lambda i, d, c: i.route_many(5), "conversations"),
        (lambda i, d, c: i.route_many([("A",)]), "conversations[0]"),
        (lambda i, d, c: c.end(error=2**31, description="x"), "error"),
        (lambda i, d, c: d.receive("Q", max_messages=2**63), "max_messages"),
        (lambda i, d, c: setattr(i, "forwarding_size_mb", 2**31), "forwarding_size_mb"),
        (lambda i, d, c: setattr(i, "max_message_size", 2**63), "max_message_size"),
        (lambda i, d, c: i.run_pending("x"), "the clock's time"),
        (lambda i, d, c: i.run_pending(float("inf")), "the clock's time"),
        (lambda i, d, c: i.run_pending(2**63), "the clock's time"),
        (lambda i, d, c: i.run_pending(float("nan")), "the clock's time"),
        (lambda i, d, c: d.create_queue("q\ud800"), "queue name"),
        (lambda i, d, c: i.route("s\ud800", origin="A"), "service name"),
        (lambda i, d, c: c.send("\ud800"), "body"),
        (lambda i, d, c: d.execute("CREATE MESSAGE TYPE [\udfff] VALIDATION = EMPTY"),
         "lone surrogate U+DFFF at line 1, column 22"),
        (lambda i, d, c: d.create_queue("a\x00b"), "NUL"),
        (lambda i, d, c: d.execute("{"), "unexpected character '{' at line 1, column 1"),
        (lambda i, d, c: d.execute("DROP ROUTE x }"), "'}' at line 1, column 14"),
    ],
)
def test_the_cases_of_the_issue(world, call, argument):
    inst, db, conv = world
    exc = refused_or_fine(inst, lambda: call(inst, db, conv))
    assert isinstance(exc, BrokerError)
    assert argument in str(exc)


def test_connect_checks_its_arguments(tmp_path):
    for kwargs, argument in [
        ({"clock": 5}, "clock"), ({"retry_scale": math.nan}, "retry_scale"),
        ({"retry_scale": -1}, "retry_scale"), ({"worker": "yes"}, "worker"),
        ({"read_only": 1}, "read_only"), ({"read_only": True}, "read_only"),
    ]:
        with pytest.raises(InvalidArgumentError, match=argument):
            pybroker.connect(None, **kwargs)
    with pytest.raises(InvalidArgumentError, match="path is not valid text"):
        pybroker.connect(str(tmp_path / "b\udcff.duckdb"))
    assert not list(tmp_path.iterdir())
    # a clock that says nonsense is refused where it is read, not deep inside DuckDB
    inst = pybroker.connect(None, clock=lambda: float("nan"), worker=False)
    with pytest.raises(InvalidArgumentError, match="the clock's time must be a finite"):
        inst.create_database("A")
    inst.close()


def test_a_write_the_file_cannot_hold_names_no_duckdb_text(world):
    """The last line of defence: a value past a column's range that no check caught
    becomes a BrokerError in pybroker's words, and the write is rolled back."""
    inst, _, _ = world
    before = snapshot(inst)
    _last.pop(id(inst), None)
    with pytest.raises(BrokerError) as caught, inst.kernel.write():
        inst.kernel.store.run("instance/update_forwarding_size.sql", {"size_mb": 2**40})
    assert "outside what the instance file can store" in str(caught.value)
    assert "Conversion Error" not in str(caught.value)
    assert snapshot(inst) == before
