"""The views of what a process holds in memory show it as it is when they are read
(pybroker/kernel/live_views.py): each test waits on the state itself (the endpoint's connections,
the running reader, the forwarder holding fragments), then reads the view once, with no
wait, and finds the row; and once the state is gone, a read at once finds none."""

from __future__ import annotations

import os
import signal
import socket
import threading

import pybroker
from tests.process_helpers import Served, free_ports, start_all, trust_each_other, wait_until
from tests.test_wire_forwarding_instances import close, trio
from tests.wire_helpers import CONTRACT, ORDER, define_objects, drain, instance_pair, wait_for

CONNECTIONS = ("SELECT peer_address, state_desc, principal_name, total_fragments_sent "
               "FROM sys.dm_broker_connections")


def test_a_connection_is_in_the_view_the_moment_it_is_read(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path, retry_scale=1.0)
    try:
        assert a.sql(CONNECTIONS).fetchall() == []
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<one/>", message_type=ORDER)
        drain(stock, "StockQueue", 1)
        wait_for(lambda: any(r[2] == "CONNECTED" for r in a.endpoint.connections()),
                 what="the transport to hold the connection")
        assert a.sql(CONNECTIONS).fetchall() == [(b.endpoint.address, "CONNECTED", "B", 1)]
        # the listening endpoint is not a connection, and the endpoint views name it
        assert a.sql("SELECT name, endpoint_id, state_desc FROM sys.service_broker_endpoints"
                     ).fetchall() == [("DefaultBrokerEndpoint", None, "STARTED")]
        assert a.sql("SELECT port, ip_address FROM sys.tcp_endpoints").fetchall() == [
            (a.endpoint.port, "127.0.0.1")]
        a.endpoint.close()
        assert a.sql(CONNECTIONS).fetchall() == []  # closed: gone at the next read
        assert a.sql("SELECT count(*) FROM sys.service_broker_endpoints").fetchone() == (0,)
    finally:
        a.close()
        b.close()
    with pybroker.connect(tmp_path / "a.duckdb", read_only=True) as after:  # nothing stale
        assert after.sql("SELECT count(*) FROM main.broker_connections").fetchone() == (0,)


def test_a_mirrored_route_is_in_the_view_the_moment_it_is_read(tmp_path):
    a, b, shop, _ = instance_pair(tmp_path, retry_scale=1.0)
    try:
        (unused,) = free_ports(1)
        shop.alter_route("ToStock", mirror_address=f"tcp://127.0.0.1:{unused}")
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<one/>", message_type=ORDER)
        wait_for(lambda: a.endpoint.mirrored_routes(), what="the transport to use the pair")
        rows = a.sql("SELECT route_name, address, mirror_address "
                     "FROM sys.dm_broker_mirrored_routes").fetchall()
        assert rows == [("ToStock", b.endpoint.address, f"tcp://127.0.0.1:{unused}")]
    finally:
        a.close()
        b.close()


STARTED = threading.Event()
RELEASE = threading.Event()


def blocking_reader(db: pybroker.Database) -> None:
    """An activation procedure that holds its reader until the test lets it go."""
    STARTED.set()
    RELEASE.wait(30)


def test_a_running_reader_is_in_the_views_the_moment_they_are_read(tmp_path):
    STARTED.clear()
    RELEASE.clear()
    inst = pybroker.connect(tmp_path / "act.duckdb")
    try:
        db = inst.create_database("Work")
        db.create_queue("Q", activation_procedure=f"{__name__}:blocking_reader",
                        activation_status=True, max_queue_readers=1)
        db.create_service("S", "Q", ["DEFAULT"])
        inst.start_activation(check_interval=0.05)
        db.begin_dialog("S", "S").send(b"go")
        assert STARTED.wait(30)
        assert inst.sql("SELECT queue_name, procedure_name FROM sys.dm_broker_activated_tasks"
                        ).fetchall() == [("Q", f"{__name__}:blocking_reader")]
        assert inst.sql("SELECT queue_name FROM sys.dm_broker_queue_monitors").fetchall() == [
            ("Q",)]
        RELEASE.set()
        wait_for(lambda: not inst.kernel.activation.rows()[1], what="the reader to return")
        assert inst.sql("SELECT count(*) FROM sys.dm_broker_activated_tasks").fetchone() == (0,)
    finally:
        RELEASE.set()
        inst.close()


def test_R7_a_held_fragment_is_in_the_view_the_moment_it_is_read(tmp_path):
    a, f, b, shop, _ = trio(tmp_path)
    with socket.socket() as silent:  # a next hop that never answers: F holds the fragment
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        try:
            address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
            shop.create_route("ToF", service_name="Far", address=f.endpoint.address)
            f.database("msdb").create_route("OnToFar", service_name="Far", address=address)
            conv = shop.begin_dialog("ShopService", "Far", contract=CONTRACT)
            conv.send(b"<held/>", message_type=ORDER)
            wait_for(lambda: f.endpoint.forwarded(), what="the forwarder to hold it")
            assert f.sql("SELECT conversation_id, adjacent_broker_address FROM "
                         "sys.dm_broker_forwarded_messages").fetchall() == [
                (conv.conversation_id, address)]
        finally:
            close(a, f, b)


BIG = 8 * 2**20  # eight fragments of 1 MiB


def set_up_forwarding(files, ports) -> None:
    address = {name: f"tcp://127.0.0.1:{port}" for name, port in ports.items()}
    trust_each_other(*files.values())
    with pybroker.connect(files["a"], worker=False) as a, \
            pybroker.connect(files["b"], worker=False) as b:
        shop, stock = a.create_database("Shop"), b.create_database("Stock")
        for db in (shop, stock):
            define_objects(db)
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
        stock.create_queue("StockQueue")
        stock.create_service("StockService", queue="StockQueue", contracts=[CONTRACT])
        shop.create_route("ToStock", service_name="StockService", address=address["f"])
        stock.create_route("ToShop", service_name="ShopService", address=address["f"])
    with pybroker.connect(files["f"], worker=False) as f:
        msdb = f.database("msdb")
        msdb.create_route("OnStock", service_name="StockService", address=address["b"])
        msdb.create_route("OnShop", service_name="ShopService", address=address["a"])
        f.forwarding = True
        f.forwarding_size_mb = 64  # the whole message fits: nothing dropped, nothing resent


def test_R7_a_forwarder_streaming_a_large_message_shows_what_it_holds(tmp_path):
    names = ["a", "f", "b"]
    files = {n: tmp_path / f"{n}.duckdb" for n in names}
    ports = dict(zip(names, free_ports(3), strict=True))
    set_up_forwarding(files, ports)
    # retries only after minutes: what the forwarder holds is the one stream
    served = {n: Served(files[n], ports[n], retry_scale=30) for n in names}
    a, f, b = (served[n] for n in names)
    stopped = False
    try:
        start_all(a, f, b)
        view = "SELECT message_sequence_number, to_service_name FROM " \
               "sys.dm_broker_forwarded_messages"
        assert f.sql(view) == []
        assert b.proc is not None
        os.kill(b.proc.pid, signal.SIGSTOP)  # B takes nothing: the stream stays in F
        stopped = True
        with a.client() as inst:
            shop = inst.database("Shop")
            shop.begin_dialog("ShopService", "StockService", contract=CONTRACT).send(
                b"x" * BIG, message_type=ORDER)
        held = wait_until(lambda: f.sql(view), timeout=60, what="F to hold fragments")
        assert {row for row in held} == {(0, "StockService")}
        os.kill(b.proc.pid, signal.SIGCONT)
        stopped = False
        with b.client() as inst:
            stock = inst.database("Stock")
            got = drain(stock, "StockQueue", 1)
            assert len(got[0].message_body) == BIG
        # every fragment left F before B could have the message: none is shown any more
        assert f.sql(view) == []
    finally:
        if stopped and b.proc is not None:
            os.kill(b.proc.pid, signal.SIGCONT)
        for child in served.values():
            child.close()
