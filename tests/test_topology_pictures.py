"""The pictures of ``pybroker topology``: the Graphviz source of the demo's network and of a
loop of two forwarders held to golden files (tests/golden/; PYBROKER_UPDATE_GOLDEN=1 writes
them again), drawn as PNG and SVG by Graphviz's ``dot`` (installed by .ci/run), and README's
picture, pybroker/docs/demo-network.svg, held to what the command draws today."""

from __future__ import annotations

import os
import re
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import pybroker
from pybroker.apps.diagnose.drawing import dot, mermaid
from pybroker.apps.diagnose.topology import topology
from pybroker.cli.topology import render
from pybroker.devtools.demos.network import NAMES, PORTS, build_network
from tests.cli_helpers import call
from tests.process_helpers import free_ports
from tests.test_diagnose import address, endpoint, trust_each_other

GOLDEN = Path(__file__).parent / "golden"
SHIPPED = Path(pybroker.__file__).parent / "docs" / "demo-network.svg"
UPDATE = bool(os.environ.get("PYBROKER_UPDATE_GOLDEN"))
# README's picture is drawn from the files `pybroker demo --network demo-network` writes
SHOWN_FOLDER = "demo-network"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SVG = "{http://www.w3.org/2000/svg}"


def _stable(text: str, files: list[Path], names: list[str], ports: dict[int, int]) -> str:
    """The DOT with what changes between runs made stable: the files' paths (as the
    instances' names), free ports (as fixed ones) and the broker identifiers a new file
    gives its databases (msdb's, and any not fixed by the builder) as GUID."""
    for file, name in zip(files, names, strict=True):
        text = text.replace(str(file), name)
    for port, shown in ports.items():
        text = text.replace(f"127.0.0.1:{port}", f"127.0.0.1:{shown}")
    return re.sub(r'(label="msdb)\\n[0-9a-f]{8}"', r'\1\\nGUID"', text)


def _golden(name: str, text: str) -> str:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    return path.read_text()


@pytest.fixture(scope="module")
def demo_network(tmp_path_factory) -> tuple[list[Path], dict[int, int]]:
    """`pybroker demo --network`'s files, on free ports (and the ports they stand for)."""
    folder = tmp_path_factory.mktemp("demo") / SHOWN_FOLDER
    ports = free_ports(3)
    return build_network(folder, ports), dict(zip(ports, PORTS, strict=True))


def _demo_dot(demo_network) -> str:
    files, ports = demo_network
    names = [f"{SHOWN_FOLDER}/{n}.duckdb" for n in NAMES]
    return _stable(dot(topology(files)), files, names, ports)


def test_the_demo_network_is_healthy_and_drawn_as_its_golden_file(demo_network):
    files, _ = demo_network
    assert pybroker.diagnose(files) == []  # no finding at all: nothing is marked
    text = _demo_dot(demo_network)
    assert text == _golden("topology_demo.dot", text)
    # the decisive arrows: A to the forwarder, msdb of F on to B and back to A, B to F
    for arrow in ('i0_d0 -> i1_ep [label="ToForwarder [ElsewhereService]"];',
                  'i1_d2 -> i2_ep [label="ForwardingRoute [ElsewhereService]", penwidth=1.5, '
                  'color="#1f77b4"];',
                  'i1_d2 -> i0_ep [label="BackToSales [SalesService]", penwidth=1.5, '
                  'color="#1f77b4"];',
                  'i2_d0 -> i1_ep [label="ToSales [SalesService]"];'):
        assert arrow in text
    assert "#d62728" not in text and "dashed" not in text


@pytest.fixture(scope="module")
def loop(tmp_path_factory) -> tuple[list[Path], dict[int, int]]:
    """Two forwarders whose msdb routes send Orders to each other (D-RTE-001); the second
    no longer trusts the first (D-CFG-009)."""
    folder = tmp_path_factory.mktemp("loop")
    files = [folder / "f1.duckdb", folder / "f2.duckdb"]
    ports = free_ports(2)
    with pybroker.connect(files[0], worker=False) as f1, \
            pybroker.connect(files[1], worker=False) as f2:
        endpoint(f1, ports[0])
        endpoint(f2, ports[1])
        trust_each_other(f1, f2)
        for inst, other in ((f1, ports[1]), (f2, ports[0])):
            inst.forwarding = True
            inst.database("msdb").create_route("Onwards", service_name="Orders",
                                               address=address(other))
        f2.untrust("peer0")
    return files, dict(zip(ports, (4122, 4123), strict=True))


def test_a_loop_of_two_forwarders_is_drawn_red_and_dashed_as_its_golden_file(loop):
    files, ports = loop
    text = _stable(dot(topology(files)), files, ["f1.duckdb", "f2.duckdb"], ports)
    assert text == _golden("topology_loop.dot", text)
    arrows = [line for line in text.splitlines() if "Onwards" in line]
    assert len(arrows) == 2
    for arrow in arrows:  # the loop's red, the untrusted link's dashes, both codes named
        assert 'color="#d62728"' in arrow and "style=dashed" in arrow
        assert "D-RTE-001" in arrow and "D-CFG-009" in arrow


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _svg_texts(text: str) -> list[str]:
    """Every text an SVG shows, in order (what Graphviz draws, not where)."""
    return [t.text or "" for t in ET.fromstring(text).iter(f"{SVG}text")]


def test_the_pictures_are_rendered_by_graphviz_as_png_and_svg(loop, tmp_path, capsys):
    files, _ = loop
    png, svg = tmp_path / "loop.png", tmp_path / "loop.svg"
    for out in (png, svg):
        code, _, err = call(["topology", *files, "--out", out], capsys)
        assert code == 0, err
    data = png.read_bytes()
    width, height = _png_size(data)
    # two instance clusters side by side, their labels legible: some hundreds of pixels
    assert 200 <= width <= 4000 and 100 <= height <= 4000, (width, height)
    assert 5_000 <= len(data) <= 2_000_000
    drawn = svg.read_text()
    root = ET.fromstring(drawn)
    assert root.tag == f"{SVG}svg" and 5_000 <= len(drawn) <= 2_000_000
    nodes = [g for g in root.iter(f"{SVG}g") if g.get("class") == "node"]
    edges = [g for g in root.iter(f"{SVG}g") if g.get("class") == "edge"]
    picture = topology(files)
    assert len(nodes) == sum(e.kind != "instance" for e in picture.elements)
    assert len(edges) == len(picture.edges)
    assert "Onwards [Orders]" in _svg_texts(drawn)


def test_the_shipped_demo_picture_is_what_the_command_draws_today(demo_network):
    """pybroker/docs/demo-network.svg was drawn by `pybroker topology demo-network/A.duckdb
    demo-network/F.duckdb demo-network/B.duckdb --out pybroker/docs/demo-network.svg` (after
    `pybroker demo --network demo-network`): the texts it shows are the ones Graphviz draws
    from today's DOT of that network (layout coordinates may differ between Graphviz
    versions; the texts may not)."""
    guid = re.compile(r"^[0-9a-f]{8}$")  # a broker identifier's line (msdb's: new each time)

    def texts(svg: str) -> list[str]:
        return ["GUID" if guid.match(t) else t for t in _svg_texts(svg)]

    today = texts(render(_demo_dot(demo_network), "svg").decode("utf-8"))
    shipped = texts(SHIPPED.read_text())
    assert "ForwardingRoute [ElsewhereService]" in shipped
    assert shipped == today


@pytest.fixture(scope="module")
def every_kind(tmp_path_factory) -> tuple[list[Path], dict[int, int]]:
    """Shop (instance S) routes StockService to a mirrored pair P (PRINCIPAL) / M (MIRROR)
    and names a service of P by its address through a TRANSPORT route; S's Orders database
    has only a route to the dynamic routing service on C. Healthy: no finding."""
    folder = tmp_path_factory.mktemp("kinds")
    files = [folder / f"{name}.duckdb" for name in ("s", "p", "m", "c")]
    ports = free_ports(4)
    insts = [pybroker.connect(file, worker=False) for file in files]
    try:
        s, p, m, c = insts
        for inst, port in zip(insts, ports, strict=True):
            endpoint(inst, port)
        trust_each_other(*insts)
        shop = s.create_database("Shop", broker_instance="5b000000-0000-4000-8000-000000000001")
        shop.create_service("ShopService", queue=shop.create_queue("ShopQueue").name)
        pair = "57000000-0000-4000-8000-000000000002"
        named = f"tcp://127.0.0.1:{ports[1]}/Archive"
        for inst, partner in ((p, ports[2]), (m, ports[1])):
            stock = inst.create_database("Stock", broker_instance=pair)
            stock.create_service("StockService", queue=stock.create_queue("StockQueue").name,
                                 contracts=["DEFAULT"])
            stock.create_route("ToShop", service_name="ShopService", address=address(ports[0]))
            stock.set_mirroring("PRINCIPAL" if inst is p else "MIRROR", address(partner))
        p.database("Stock").create_service(named, queue="StockQueue", contracts=["DEFAULT"])
        shop.create_route("ToStockPair", service_name="StockService", address=address(ports[1]),
                          mirror_address=address(ports[2]))
        shop.create_route("ByName", address="TRANSPORT")
        shop.begin_dialog("ShopService", named).send(b"<archive/>")  # routed by ByName
        orders = s.create_database("Orders", broker_instance="0d000000-0000-4000-8000-000000000003")
        orders.drop_route("AutoCreatedLocal")  # no wildcard for R2.4 to come before (R8.3)
        orders.create_route("Config", service_name="SQL/ServiceBroker/BrokerConfiguration",
                            address=address(ports[3]))
        config = c.create_database("Config", broker_instance="cf000000-0000-4000-8000-000000000004")
        config.create_service("SQL/ServiceBroker/BrokerConfiguration",
                              queue=config.create_queue("ConfigQueue").name, contracts=["DEFAULT"])
    finally:
        for inst in insts:
            inst.close()
    return files, dict(zip(ports, (4131, 4132, 4133, 4134), strict=True))


def test_a_mirrored_pair_transport_and_dynamic_routing_are_drawn_as_their_golden_file(
        every_kind):
    files, ports = every_kind
    picture = topology(files)
    assert picture.findings == []  # diagnose's own: nothing is marked
    text = _stable(dot(picture), files, ["s.duckdb", "p.duckdb", "m.duckdb", "c.duckdb"], ports)
    assert text == _golden("topology_kinds.dot", text)
    kinds = {(e.route, e.kind) for e in picture.edges}
    assert {("ToStockPair", "mirror"), ("ByName", "transport"), ("Config", "dynamic"),
            (None, "partner")} <= kinds
    # the pair between the partners' databases, each labelled with its role
    assert 'i1_d0 -> i2_d0 [label="mirrored pair (R9)", dir=none' in text
    assert 'label="Stock\\n57000000\\nPRINCIPAL (R9)"' in text
    assert 'label="Stock\\n57000000\\nMIRROR (R9)"' in text
    # TRANSPORT to the instance its service name's address is, named on the arrow
    assert ('-> i1_ep [label="ByName [TRANSPORT: tcp://127.0.0.1:4132/Archive]", '
            'color="#8c564b"];') in text
    assert "TRANSPORT\\n(the address in the service name)" not in text  # nothing unresolved
    chart = mermaid(picture)
    assert 'i1_d0 ===|"mirrored pair (R9)"| i2_d0' in chart
