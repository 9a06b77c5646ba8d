"""The network of ``pybroker demo``'s forwarding part (example 6 across processes, wire.py),
written as instance files to read with ``pybroker diagnose`` and draw with ``pybroker
topology`` (``pybroker demo --network DIR``; README's picture is drawn from it).

- A.duckdb: database Sales (SalesService), its route ToForwarder sends ElsewhereService to F.
- F.duckdb: example 6's instance, forwarding on: AdventureWorks2008R2 holds the example's
  services, msdb's ForwardingRoute sends ElsewhereService on to B (R7) and BackToSales
  sends SalesService back to A.
- B.duckdb: database Elsewhere (ElsewhereService), its route ToSales sends replies to
  SalesService back through F (R6).

Each file defines its broker endpoint on a port of 127.0.0.1 (``ports``: A's, F's and B's),
and trusts the others' certificates. Databases are given fixed broker
identifiers, so the files and their picture are the same each time they are written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pybroker.api.instance import Instance
from pybroker.devtools.demos.routing import load_examples

PORTS = (4022, 4023, 4024)  # Service Broker's customary port, and the two after it
NAMES = ("A", "F", "B")
# fixed, so that each writing of the network is the same
BROKER_INSTANCES = {
    "Sales": "5a1e5000-0000-4000-8000-00000000000a",
    "AdventureWorks2008R2": "ad7e0000-0000-4000-8000-00000000000f",
    "Elsewhere": "e15e0000-0000-4000-8000-00000000000b",
}
FORWARDED = "ElsewhereService"


def _endpoint(inst: Instance, port: int) -> None:
    inst.database("master").execute(
        "CREATE CERTIFICATE Own WITH SUBJECT = 'endpoint';"
        f"CREATE ENDPOINT BrokerEndpoint STATE = STARTED AS TCP (LISTENER_PORT = {port}, "
        "LISTENER_IP = (127.0.0.1)) FOR SERVICE_BROKER (AUTHENTICATION = CERTIFICATE Own)")


def build_network(folder: Path, ports: Sequence[int] = PORTS) -> list[Path]:
    """Write A.duckdb, F.duckdb and B.duckdb into ``folder`` (new files), their endpoints
    defined on ``ports`` (listened on while the files are written, so they must be free),
    and return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.duckdb" for name in NAMES]
    for path in paths:
        if path.exists():
            raise FileExistsError(f"{path} already exists; the network is written to new files")
    address = {name: f"tcp://127.0.0.1:{port}" for name, port in zip(NAMES, ports, strict=True)}
    insts: list[Instance] = []
    try:
        for path in paths:
            insts.append(Instance(path, worker=False))
        a, f, b = insts
        for inst, port in zip(insts, ports, strict=True):
            _endpoint(inst, port)
        for inst in insts:
            for other, other_name in zip(insts, NAMES, strict=True):
                if other is not inst:
                    inst.trust(other_name, other.certificate)

        sales = a.create_database("Sales", broker_instance=BROKER_INSTANCES["Sales"])
        sales.create_queue("SalesQueue")
        sales.create_service("SalesService", queue="SalesQueue")
        sales.create_route("ToForwarder", service_name=FORWARDED, address=address["F"])

        example = next(e for e in load_examples() if e.number == 6)
        works = f.create_database("AdventureWorks2008R2",
                                  broker_instance=BROKER_INSTANCES["AdventureWorks2008R2"])
        for service in example.services["AdventureWorks2008R2"]:
            works.create_queue(f"{service}Queue")
            works.create_service(service, queue=f"{service}Queue", contracts=["DEFAULT"])
        msdb = f.database("msdb")
        msdb.create_route("ForwardingRoute", service_name=FORWARDED, address=address["B"])
        msdb.create_route("BackToSales", service_name="SalesService", address=address["A"])
        f.forwarding = True

        elsewhere = b.create_database("Elsewhere", broker_instance=BROKER_INSTANCES["Elsewhere"])
        elsewhere.create_queue("ElsewhereQueue")
        elsewhere.create_service(FORWARDED, queue="ElsewhereQueue", contracts=["DEFAULT"])
        elsewhere.create_route("ToSales", service_name="SalesService", address=address["F"])
    finally:
        for inst in insts:
            inst.close()
    return paths
