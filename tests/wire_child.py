"""One broker instance in its own process, for tests/test_wire_processes.py.

    python tests/wire_child.py ROLE FILE PORT PEER_PORT PEER_PEM [CONVERSATIONS QUOTA BATCH]

ROLE is ``sender`` (instance A, database Shop, service ShopService) or ``receiver``
(instance B, database Stock, service StockService on StockQueue), or ``replier`` /
``closer`` for the second act (the same instances), or ``forwarder`` (R7). Every start is
idempotent: the instance trusts the peer's certificate (PEER_PEM; several, comma-separated,
for a forwarder), creates its database, services and route to the peer at
tcp://127.0.0.1:PEER_PORT when they are missing, and listens on PORT (the same port after a
restart, so the peer's route stays valid).

sender    begins CONVERSATIONS dialogs once (in one transaction), then sends each one's
          QUOTA messages, BATCH per transaction, round robin; the body of message n of a
          conversation is "<conversation_id>:<n>". After a restart it continues each
          conversation from its send_sequence. Prints "sent N" after every commit, "done"
          when every quota is sent and "drained" when its transmission queue is empty.
bigsender sends one conversation's "first", a body of CONVERSATIONS MiB and "last" once.
receiver  holds everything in StockQueue (no RECEIVE) and prints "fragments N" whenever the
          count of fragments it holds for reassembly changes.
replier   RECEIVEs StockQueue in transactions; after a conversation's last message
          (n = QUOTA - 1) it replies "<conversation_id>:reply" and ends the conversation in
          the same transaction. Prints "replied K" and "done" when it replied to every one.
closer    (instance A) RECEIVEs ShopQueue: on each EndDialog it ends its side too. Prints
          "closed K" and "done" when every conversation got its reply and EndDialog, and
          "got TYPE BODY" for every other message.
forwarder holds no service: msdb routes StockService to tcp://127.0.0.1:CONVERSATIONS (the
          receiver's port) and ShopService to PEER_PORT (the sender's), forwarding on; the
          sender and receiver then name the forwarder's port as their PEER_PORT.
principal a receiver whose Stock database is the PRINCIPAL of a mirrored pair (R9), and
mirror    one that is its MIRROR: the Stock database has broker identifier WIRE_CHILD_BROKER
          and its partner listens on WIRE_CHILD_PARTNER_PORT. Started again with the other
          role, the database takes that role (a promotion).

    python tests/wire_child.py configuration FILE DATABASE DIRECTORY [INSTANCES]

configuration runs the ready-made configuration service (R8,
          pybroker/apps/configuration_service.py) on DATABASE of the instance another
          process serves at FILE, as its client, until SIGTERM; its directory is the JSON
          file DIRECTORY (read at every request), and it prints "asked SERVICE known" or
          "asked SERVICE unknown" for each route request it answers. INSTANCES, a JSON
          file, is its instances= mapping: broker identifier -> an instance file served
          by another process, or [pybroker://HOST:PORT, token].
The sender started again with more CONVERSATIONS begins the missing ones and sends their
quota, and so does a running sender on SIGUSR2 (CONVERSATIONS more each time); with
WIRE_CHILD_MIRROR_PORT its route to StockService is a mirrored route (R9) to PEER_PORT with
that port as its MIRROR_ADDRESS.
Each role that finishes prints "drained" once its transmission queue is empty.

WIRE_CHILD_FRAGMENT_SIZE in the environment sets the endpoint's fragment_size,
WIRE_CHILD_RETRY_SCALE the instance's retry_scale (default 0.01).
Runs until SIGTERM or SIGINT, then closes the instance and exits 0.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pybroker

CONTRACT = "//Shop/OrderContract"
ORDER = "//Shop/Order"
END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"

stop = threading.Event()
wave = threading.Event()  # SIGUSR2: a sender begins another CONVERSATIONS dialogs


def say(text: str) -> None:
    print(text, flush=True)


def setup_forwarder(inst: pybroker.Instance, sender_port: int, receiver_port: int) -> None:
    msdb = inst.database("msdb")
    if inst.sql("SELECT count(*) FROM sys.msdb_routes WHERE name = 'OnToStock'").fetchone()[0]:
        return
    with inst.kernel.write():
        msdb.create_route("OnToStock", service_name="StockService",
                          address=f"tcp://127.0.0.1:{receiver_port}")
        msdb.create_route("OnToShop", service_name="ShopService",
                          address=f"tcp://127.0.0.1:{sender_port}")
    inst.forwarding = True


def setup(inst: pybroker.Instance, role: str, peer_port: int) -> pybroker.Database:
    names = {db.name for db in inst.databases()}
    mine, queue, service, far = (("Shop", "ShopQueue", "ShopService", "StockService")
                                 if role in ("sender", "bigsender", "closer") else
                                 ("Stock", "StockQueue", "StockService", "ShopService"))
    if mine in names:
        db = inst.database(mine)
        if role in ("principal", "mirror") and db.mirroring_role != role.upper():
            db.set_mirroring(role.upper())  # promoted (or demoted) since the last start
        return db
    mirror_port = os.environ.get("WIRE_CHILD_MIRROR_PORT")
    with inst.kernel.write():  # one transaction: a kill leaves all of it or none of it
        db = inst.create_database(mine, broker_instance=os.environ.get("WIRE_CHILD_BROKER"))
        if role in ("principal", "mirror"):
            db.set_mirroring(role.upper(), "tcp://127.0.0.1:"
                             + os.environ["WIRE_CHILD_PARTNER_PORT"])
        db.create_message_type(ORDER)
        db.create_contract(CONTRACT, {ORDER: "ANY"})
        db.create_queue(queue)
        db.create_service(service, queue=queue,
                          contracts=[CONTRACT] if service == "StockService" else None)
        db.create_route("ToPeer", service_name=far, address=f"tcp://127.0.0.1:{peer_port}",
                        mirror_address=mirror_port and f"tcp://127.0.0.1:{mirror_port}")
    return db


def conversations(inst: pybroker.Instance) -> list[tuple[str, str, int]]:
    return inst.sql(
        "SELECT conversation_handle::VARCHAR, conversation_id::VARCHAR, send_sequence "
        "FROM sys.conversation_endpoints WHERE is_initiator ORDER BY conversation_id"
    ).fetchall()


def run_sender(inst: pybroker.Instance, db: pybroker.Database, count: int, quota: int,
               batch: int) -> None:
    convs = conversations(inst)
    if len(convs) < count:
        with db.transaction():
            for _ in range(count - len(convs)):
                db.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        # a dialog begun is local until its first send: give each its first message now
        # so that they all exist in the file together
        convs = conversations(inst)
    assert len(convs) == count, convs
    sent = sum(s for _, _, s in convs)
    pending = {h: (cid, s) for h, cid, s in convs if s < quota}
    while pending and not stop.is_set():
        for handle in list(pending):
            cid, n = pending[handle]
            k = min(batch, quota - n)
            conv = db.conversation(handle)
            with db.transaction():
                for i in range(n, n + k):
                    got = conv.send(f"{cid}:{i}".encode(), message_type=ORDER)
                    if got != i:
                        raise SystemExit(f"send returned sequence {got}, expected {i}")
            sent += k
            say(f"sent {sent}")
            if n + k >= quota:
                del pending[handle]
            else:
                pending[handle] = (cid, n + k)
            if stop.is_set():
                return
    say("done")
    drain(inst)


def drain(inst: pybroker.Instance) -> None:
    while not stop.wait(0.1):
        left = inst.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0]
        if left == 0:
            say("drained")
            return


def run_big_sender(inst: pybroker.Instance, db: pybroker.Database, size_mb: int) -> None:
    """One conversation: "first", a body of SIZE_MB MiB (bytes 0..255 repeated), "last"."""
    if not conversations(inst):
        conv = db.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        with db.transaction():
            conv.send(b"first", message_type=ORDER)
            conv.send(bytes(range(256)) * (size_mb * 2**20 // 256), message_type=ORDER)
            conv.send(b"last", message_type=ORDER)
    say("done")
    drain(inst)


def watch_fragments(inst: pybroker.Instance) -> None:
    """The receiver says how many fragments it holds whenever that changes."""
    last = -1
    while not stop.wait(0.05):
        held = inst.sql(  # each fragment is kept as pieces (migrations/010)
            "SELECT count(*) FROM (SELECT DISTINCT conversation_handle, "
            "message_sequence_number, fragment_number FROM main.message_fragments)"
        ).fetchone()[0]
        if held != last:
            say(f"fragments {held}")
            last = held


def run_replier(inst: pybroker.Instance, db: pybroker.Database, count: int,
                quota: int) -> None:
    replied = 0
    last = f":{quota - 1}".encode()
    while replied < count and not stop.is_set():
        with db.transaction():
            got = db.receive("StockQueue", max_messages=1000, timeout=0.2)
            for m in got:
                if m.message_body.endswith(last):
                    conv = db.conversation(m.conversation_handle)
                    cid = m.message_body.split(b":")[0].decode()
                    conv.send(f"{cid}:reply".encode(), message_type=ORDER)
                    conv.end()
                    replied += 1
        if got:
            say(f"replied {replied}")
    say("done")
    drain(inst)


def run_closer(inst: pybroker.Instance, db: pybroker.Database, count: int) -> None:
    closed = 0
    while closed < count and not stop.is_set():
        with db.transaction():
            got = db.receive("ShopQueue", max_messages=1000, timeout=0.2)
            for m in got:
                if m.message_type_name == END_DIALOG:
                    db.conversation(m.conversation_handle).end()
                    closed += 1
                else:
                    say(f"got {m.message_type_name} {m.message_body.decode()}")
        if got:
            say(f"closed {closed}")
    say("done")
    drain(inst)


def run_configuration(file: str, database: str, directory: str,
                      instances: str | None = None) -> int:
    from pybroker.apps.configuration_service import ConfigurationService, RouteAnswer, serve

    def lookup(service: str) -> RouteAnswer | None:
        entry = json.loads(Path(directory).read_text()).get(service)
        say(f"asked {service} {'unknown' if entry is None else 'known'}")
        return None if entry is None else RouteAnswer(entry)

    places = {} if instances is None else {
        broker: tuple(place) if isinstance(place, list) else place
        for broker, place in json.loads(Path(instances).read_text()).items()}
    inst = pybroker.connect(file)  # served by another process: a client of it
    try:
        db = inst.database(database)
        with ConfigurationService(lookup, instances=places) as service:
            service.install(db)
            say("ready")
            serve(db, service, stop=stop, poll=0.1)
    finally:
        inst.close()
    say("stopped")
    return 0


def main(argv: list[str]) -> int:
    if argv[0] == "configuration":
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        return run_configuration(*argv[1:5])
    role, file, port, peer_port, peer_pem = argv[:5]
    count, quota, batch = (int(x) for x in [*argv[5:8], "0", "0", "0"][:3])
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks when stuck
    signal.signal(signal.SIGUSR2, lambda *_: wave.set())
    inst = pybroker.connect(file, retry_scale=float(os.environ.get(
        "WIRE_CHILD_RETRY_SCALE", "0.01")))
    try:
        pems = peer_pem.split(",")
        for i, pem in enumerate(pems):
            inst.trust("peer" if len(pems) == 1 else f"peer{i + 1}", Path(pem).read_text())
        if role == "forwarder":
            setup_forwarder(inst, int(peer_port), count)
            db = inst.database("msdb")
        else:
            db = setup(inst, role, int(peer_port))
        fragment_size = int(os.environ.get("WIRE_CHILD_FRAGMENT_SIZE", "0")) or None
        endpoint = inst.start_endpoint(int(port), fragment_size=fragment_size)
        say(f"listening on {endpoint.address}")
        if role == "sender":
            run_sender(inst, db, count, quota, batch)
        elif role == "bigsender":
            run_big_sender(inst, db, count)
        elif role in ("receiver", "principal", "mirror"):
            watch_fragments(inst)
        elif role == "replier":
            run_replier(inst, db, count, quota)
        elif role == "closer":
            run_closer(inst, db, count)
        say("ready")
        total = count
        while not stop.wait(0.1):
            if wave.is_set() and role == "sender":
                wave.clear()
                total += count
                run_sender(inst, db, total, quota, batch)
    finally:
        inst.close()
    say("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
