"""Broker priorities honoured (CREATE BROKER PRIORITY, ALTER DATABASE ... SET
HONOR_BROKER_PRIORITY): the level an endpoint takes when its dialog begins, RECEIVE taking
the highest-priority group first, and the transport sending the highest first."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from process_helpers import free_ports, wait_until

import pybroker
from pybroker.core.conversation.priorities import DEFAULT_PRIORITY, endpoint_priority
from pybroker.core.wire import frames
from pybroker.core.wire.dialog import Transmitter

C, LOCAL, REMOTE = "//Shop/Contract", "//Shop/Local", "//Stock/Remote"


# -- the matching, as SQL Server's docs order it ------------------------------------------


@pytest.mark.parametrize(("rules", "level"), [
    ([], DEFAULT_PRIORITY),
    ([(None, None, None, 2)], 2),
    # each more specific rule wins over every less specific one, whatever the order
    ([(None, None, REMOTE, 3), (None, LOCAL, None, 4)], 4),
    ([(None, LOCAL, REMOTE, 6), (C, None, None, 7)], 7),
    ([(C, None, REMOTE, 8), (C, LOCAL, None, 9)], 9),
    ([(C, LOCAL, None, 9), (C, LOCAL, REMOTE, 10), (None, None, None, 1)], 10),
    # a rule that names something else does not match
    ([(C, LOCAL, "//Other", 10), ("other", None, None, 9)], DEFAULT_PRIORITY),
    # object names without regard to case; the far service's name exactly
    ([(C.upper(), LOCAL.lower(), None, 3)], 3),
    ([(None, None, REMOTE.upper(), 3)], DEFAULT_PRIORITY),
])
def test_the_most_specific_priority_wins(rules, level):
    assert endpoint_priority(rules, C, LOCAL, REMOTE) == level


# -- an instance -----------------------------------------------------------------------------


@pytest.fixture
def inst():
    instance = pybroker.connect(None, worker=False)
    yield instance
    instance.close()


def shop_with_targets(inst: pybroker.Instance, levels: list[int], *, honour: bool):
    """Database Shop: InitiatorService on InitiatorQueue, and a target service T<i> per
    level, all on TargetQueue, each matched by a broker priority of that level."""
    shop = inst.create_database("Shop")
    script = ["CREATE QUEUE InitiatorQueue; CREATE QUEUE TargetQueue;",
              "CREATE SERVICE InitiatorService ON QUEUE InitiatorQueue;"]
    for i, level in enumerate(levels):
        script.append(f"CREATE SERVICE T{i} ON QUEUE TargetQueue ([DEFAULT]);")
        script.append(f"CREATE BROKER PRIORITY P{i} FOR CONVERSATION SET "
                      f"(LOCAL_SERVICE_NAME = T{i}, PRIORITY_LEVEL = {level});")
    if honour:
        script.append("ALTER DATABASE Shop SET HONOR_BROKER_PRIORITY ON;")
    shop.execute("\n".join(script))
    return shop


def test_each_endpoint_takes_the_priority_of_its_own_side(inst):
    shop = inst.create_database("Shop")
    stock = inst.create_database("Stock")
    shop.execute("""
        CREATE QUEUE ShopQueue; CREATE SERVICE ShopService ON QUEUE ShopQueue;
        CREATE BROKER PRIORITY Outgoing FOR CONVERSATION
            SET (LOCAL_SERVICE_NAME = ShopService, REMOTE_SERVICE_NAME = 'StockService',
                 PRIORITY_LEVEL = 8);""")
    stock.execute("""
        CREATE QUEUE StockQueue; CREATE SERVICE StockService ON QUEUE StockQueue ([DEFAULT]);
        CREATE BROKER PRIORITY Incoming FOR CONVERSATION
            SET (CONTRACT_NAME = [DEFAULT], PRIORITY_LEVEL = 3);""")
    conv = shop.begin_dialog("ShopService", "StockService")
    conv.send(b"x")
    shop.begin_dialog("ShopService", "ShopService")  # no priority matches it
    rows = inst.sql("SELECT database_name, is_initiator, far_service, priority "
                    "FROM sys.conversation_endpoints ORDER BY database_name, "
                    "is_initiator, far_service").fetchall()
    assert rows == [("Shop", True, "ShopService", DEFAULT_PRIORITY),
                    ("Shop", True, "StockService", 8), ("Stock", False, "ShopService", 3)]


def send_each(shop, targets: list[int]) -> dict[str, int]:
    """One dialog per entry of ``targets`` (the index of its target service), in order,
    each sending its number; handle -> the number of its dialog."""
    handles = {}
    for n, target in enumerate(targets):
        conv = shop.begin_dialog("InitiatorService", f"T{target}")
        conv.send(str(n).encode())
        handles[conv.handle] = n
    return handles


def receive_all(shop, top: int = 100) -> list[list[bytes]]:
    """RECEIVE from TargetQueue until it is empty: the bodies of each call."""
    out = []
    for _ in range(200):  # bounded: more calls than any test sends groups
        found = shop.receive("TargetQueue", max_messages=top)
        if not found:
            return out
        out.append([m.message_body for m in found])
    raise AssertionError("TargetQueue did not empty")


def test_priorities_off_leave_the_order_of_arrival(inst):
    shop = shop_with_targets(inst, [1, 10], honour=False)
    send_each(shop, [0, 1])  # the priority 1 conversation's message first
    assert receive_all(shop) == [[b"0"], [b"1"]]
    assert inst.sql("SELECT is_honor_broker_priority_on FROM sys.databases "
                    "WHERE name = 'Shop'").fetchone() == (False,)


def test_priorities_on_receive_the_higher_first(inst):
    shop = shop_with_targets(inst, [1, 10], honour=True)
    send_each(shop, [0, 1])
    assert receive_all(shop) == [[b"1"], [b"0"]]


def test_t_sql_receive_and_get_conversation_group_go_by_priority(inst):
    shop = shop_with_targets(inst, [2, 9, 5], honour=True)
    handles = send_each(shop, [0, 1, 2])
    by_number = {n: h for h, n in handles.items()}
    results = shop.execute("""
        DECLARE @g UNIQUEIDENTIFIER, @body VARBINARY(MAX);
        BEGIN TRANSACTION;
        GET CONVERSATION GROUP @g FROM TargetQueue;
        RECEIVE TOP (1) @body = message_body FROM TargetQueue WHERE conversation_group_id = @g;
        COMMIT;
        SELECT @body AS body;
        WAITFOR (RECEIVE TOP (1) message_body FROM TargetQueue), TIMEOUT 1000;""")
    bodies = [row[0] for rs in results for row in rs.rows]
    assert bodies == [b"1", b"2"]  # priority 9, then 5; the priority 2 one is left
    remaining = shop.receive("TargetQueue", max_messages=10)
    assert [m.message_body for m in remaining] == [b"0"]
    target_handle = remaining[0].conversation_handle
    assert target_handle != by_number[0]  # the target's endpoint, not the initiator's


def test_a_group_another_transaction_holds_is_passed_over(inst):
    import threading

    shop = shop_with_targets(inst, [1, 10], honour=True)
    send_each(shop, [0, 1])
    held, release, done = threading.Event(), threading.Event(), threading.Event()
    first: list[bytes] = []

    def holder():
        with shop.transaction():
            first.extend(m.message_body for m in shop.receive("TargetQueue", max_messages=10))
            held.set()
            release.wait(30)
        done.set()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(30)
        with shop.transaction():  # the priority 10 group is held: the next one
            assert [m.message_body for m in shop.receive("TargetQueue", max_messages=10)] == [b"0"]
    finally:
        release.set()
        thread.join(30)
    assert done.is_set() and first == [b"1"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(levels=st.lists(st.integers(1, 10), min_size=1, max_size=4),
       picks=st.lists(st.integers(0, 3), min_size=1, max_size=8),
       extra=st.lists(st.integers(0, 7), max_size=6),
       top=st.integers(1, 3), honour=st.booleans())
def test_receive_order_matches_a_reference_model(levels, picks, extra, top, honour):
    """Dialogs to services of given priorities, some sending more than once, in any order:
    RECEIVE TOP (top) returns what a model of SQL Server's rule says. Each dialog is its
    own group: with HONOR_BROKER_PRIORITY ON the group of the highest priority with ready
    messages comes first, the one whose first ready message is oldest among equals; OFF,
    the oldest first."""
    targets = [p % len(levels) for p in picks]
    with pybroker.connect(None, worker=False) as inst:
        shop = shop_with_targets(inst, levels, honour=honour)
        convs = []
        queue: list[tuple[int, bytes]] = []  # (dialog, body) in the order sent
        for n, target in enumerate(targets):
            conv = shop.begin_dialog("InitiatorService", f"T{target}")
            convs.append(conv)
            conv.send(f"{n}.0".encode())
            queue.append((n, f"{n}.0".encode()))
        for k, e in enumerate(extra):  # more messages on some dialogs, later
            n = e % len(convs)
            convs[n].send(f"{n}.{k + 1}".encode())
            queue.append((n, f"{n}.{k + 1}".encode()))

        expected = []
        while queue:
            first_of = {}
            for position, (n, _) in enumerate(queue):
                first_of.setdefault(n, position)
            if honour:
                n = min(first_of, key=lambda d: (-levels[targets[d]], first_of[d]))
            else:
                n = min(first_of, key=first_of.get)
            taken = [body for d, body in queue if d == n][:top]
            expected.append(taken)
            for body in taken:
                queue.remove((n, body))
        assert receive_all(shop, top) == expected


# -- transmission: the transport sends the higher priority first -----------------------------


def fragment(conversation_id: str, priority: int, body: bytes) -> frames.MessageFragment:
    return frames.MessageFragment(
        conversation_id, True, 0, 0, 1, len(body), "From", "To", str(uuid.UUID(int=7)), None,
        "C", "T", "N", False, False, priority, 0, 32, b"12345678", body)


@pytest.mark.parametrize(("priorities", "order"), [
    ([5, 5, 5], [0, 1, 2]),  # alike: in turns, as submitted (P4.3)
    ([1, 10, 5], [1, 2, 0]),
    ([3, 7, 7, 3], [1, 2, 0, 3]),  # equals keep their turns
])
def test_the_transmitter_sends_the_highest_priority_first(priorities, order):
    t = Transmitter()
    for i, priority in enumerate(priorities):
        t.submit(f"h{i}", "tcp://peer:4022", fragment(str(uuid.UUID(int=i + 1)), priority,
                                                       str(i).encode()))
    sent = []
    while (f := t.next_fragment("tcp://peer:4022", 0.0)) is not None:
        sent.append(int(f.body))
    assert sent == order


@pytest.mark.parametrize("honour", [True, False])
def test_a_stopped_peer_gets_the_higher_priority_first_when_it_starts(tmp_path, honour):
    """Shop sends a priority 1 dialog's message, then a priority 10 one's, while Stock's
    endpoint is down; once Stock listens, Stock's queue (which does not honour priorities:
    the order of arrival) has the priority 10 message first when Shop honours them, the
    priority 1 one first when it does not."""
    (port,) = free_ports(1)
    shop_inst = pybroker.connect(tmp_path / "shop.duckdb", retry_scale=0.001)
    stock_inst = pybroker.connect(tmp_path / "stock.duckdb", retry_scale=0.001)
    try:
        shop_inst.trust("Stock", stock_inst.certificate)
        stock_inst.trust("Shop", shop_inst.certificate)
        shop_ep = shop_inst.start_endpoint(0)
        shop = shop_inst.create_database("Shop")
        stock = stock_inst.create_database("Stock")
        shop.execute(f"""
            CREATE QUEUE ShopQueue; CREATE SERVICE ShopService ON QUEUE ShopQueue;
            CREATE BROKER PRIORITY Low FOR CONVERSATION
                SET (REMOTE_SERVICE_NAME = 'Slow', PRIORITY_LEVEL = 1);
            CREATE BROKER PRIORITY High FOR CONVERSATION
                SET (REMOTE_SERVICE_NAME = 'Fast', PRIORITY_LEVEL = 10);
            CREATE ROUTE ToStock WITH ADDRESS = 'tcp://127.0.0.1:{port}';
            ALTER DATABASE Shop SET HONOR_BROKER_PRIORITY {'ON' if honour else 'OFF'};""")
        stock.execute(f"""
            CREATE QUEUE StockQueue;
            CREATE SERVICE Slow ON QUEUE StockQueue ([DEFAULT]);
            CREATE SERVICE Fast ON QUEUE StockQueue ([DEFAULT]);
            CREATE ROUTE ToShop WITH ADDRESS = '{shop_ep.address}';""")
        shop.begin_dialog("ShopService", "Slow").send(b"low")
        shop.begin_dialog("ShopService", "Fast").send(b"high")
        assert shop_inst.sql("SELECT priority FROM sys.transmission_queue ORDER BY priority"
                             ).fetchall() == [(1,), (10,)]
        stock_inst.start_endpoint(port)
        got = []
        for _ in range(2):
            found = stock.receive("StockQueue", max_messages=10, timeout=30)
            got += [m.message_body for m in found]
        assert got == ([b"high", b"low"] if honour else [b"low", b"high"])
        wait_until(lambda: not shop_inst.sql("SELECT 1 FROM sys.transmission_queue")
                   .fetchall(), 30, "Shop's transmission queue emptied (acknowledged)")
        assert shop_inst.sql("SELECT count(*) FROM sys.transmission_queue").fetchone() == (0,)
    finally:
        shop_inst.close()
        stock_inst.close()


def test_a_level_with_nothing_to_send_goes_first_again_once_it_has_something():
    t = Transmitter()
    hop = "tcp://peer:4022"
    ids = [str(uuid.UUID(int=i + 1)) for i in range(3)]
    for i, priority in enumerate([10, 1, 1]):
        t.submit(f"h{i}", hop, fragment(ids[i], priority, str(i).encode()))
    assert t.next_fragment(hop, 0.0).body == b"0"
    assert t.next_fragment(hop, 0.0).body == b"1"  # priority 10 has nothing more: 1's turn
    t.submit("h0", hop, dataclasses.replace(fragment(ids[0], 10, b"0+"), sequence=1))
    assert t.next_fragment(hop, 0.0).body == b"0+"  # a new message at 10: first again
    assert t.next_fragment(hop, 0.0).body == b"2"
    assert t.next_fragment(hop, 0.0) is None
