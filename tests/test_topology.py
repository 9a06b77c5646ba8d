"""``pybroker topology``: a network of three instance files (A -> forwarder F -> B) drawn as
Graphviz DOT and Mermaid: the decisive arrows and the findings marked on what they name."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

import pybroker
from pybroker.apps.diagnose.drawing import dot, mermaid
from pybroker.apps.diagnose.topology import topology
from tests.cli_helpers import call
from tests.process_helpers import free_ports
from tests.test_diagnose import address, endpoint, trust_each_other

# free ports, taken when the module is read: a STARTED endpoint listens while its file is
# open (the golden file holds them as 41211, 41212 and 41213)
A, F, B = free_ports(3)
GOLDEN_PORTS = {A: 41211, F: 41212, B: 41213}


@pytest.fixture(scope="module")
def network(tmp_path_factory) -> list[Path]:
    """A (Shop) and B (Stock) route each other's service to F; F's msdb routes them on,
    forwarding on; B's queue is OFF (D-CFG-003). Made once: the tests only read it."""
    tmp_path = tmp_path_factory.mktemp("network")
    files = [tmp_path / "a.duckdb", tmp_path / "f.duckdb", tmp_path / "b.duckdb"]
    insts = [pybroker.connect(file, worker=False) for file in files]
    try:
        a, f, b = insts
        for inst, port in zip(insts, (A, F, B), strict=True):
            endpoint(inst, port)
        trust_each_other(*insts)
        shop, stock = a.create_database("Shop"), b.create_database("Stock")
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
        stock.create_queue("StockQueue", status=False)
        stock.create_service("StockService", queue="StockQueue", contracts=["DEFAULT"])
        shop.create_route("ToStock", service_name="StockService", address=address(F))
        stock.create_route("ToShop", service_name="ShopService", address=address(F))
        f.database("msdb").create_route("OnToStock", service_name="StockService",
                                        address=address(B))
        f.database("msdb").create_route("OnToShop", service_name="ShopService",
                                        address=address(A))
        f.forwarding = True
    finally:
        for inst in insts:
            inst.close()
    return files


def _ids(picture) -> dict[str, str]:
    """Element label's first line (and instance) -> id."""
    return {f"{e.parent}:{e.label.splitlines()[0]}": e.id for e in picture.elements}


def test_a_forwarder_between_two_instances_as_dot_and_mermaid(network):
    picture = topology(network)
    ids = _ids(picture)
    shop, stock = ids["i0:Shop"], ids["i2:Stock"]
    msdb_f = ids["i1:msdb"]
    ep_a, ep_f, ep_b = (ids[f"{i}:endpoint BrokerEndpoint"] for i in ("i0", "i1", "i2"))
    edges = {(e.source, e.target, e.kind, e.route) for e in picture.edges}
    assert {(shop, ep_f, "network", "ToStock"), (stock, ep_f, "network", "ToShop"),
            (msdb_f, ep_b, "forwarded", "OnToStock"), (msdb_f, ep_a, "forwarded", "OnToShop"),
            (ep_f, msdb_f, "arrivals", None)} <= edges
    text = dot(picture)
    assert f'{shop} -> {ep_f} [label="ToStock [StockService]"];' in text
    assert re.search(rf'{msdb_f} -> {ep_b} \[label="OnToStock \[StockService\]"', text)
    assert f"tcp://127.0.0.1:{F}" in text and "forwarding on" in text
    service = ids["i2:StockService"]  # the finding on the queue marks the service on it
    assert re.search(rf'{service} \[shape=ellipse, label="StockService\\nqueue StockQueue'
                     rf'\\nD-CFG-003", color="#d62728"', text)
    chart = mermaid(picture)
    assert chart.startswith("flowchart LR\n")
    assert f'{shop} -->|"ToStock [StockService]"| {ep_f}' in chart
    assert f'{msdb_f} ==>|"OnToStock [StockService]"| {ep_b}' in chart
    assert f"class {service} error" in chart


def test_a_loop_is_drawn_red_and_an_untrusted_link_dashed(tmp_path):
    files = [tmp_path / "f1.duckdb", tmp_path / "f2.duckdb"]
    with pybroker.connect(files[0], worker=False) as f1, \
            pybroker.connect(files[1], worker=False) as f2:
        endpoint(f1, A)
        endpoint(f2, F)
        trust_each_other(f1, f2)
        for inst, other in ((f1, F), (f2, A)):
            inst.forwarding = True
            inst.database("msdb").create_route("Onwards", service_name="Orders",
                                               address=address(other))
        f2.untrust("peer0")
    picture = topology(files)
    loop = [e for e in picture.edges if e.route == "Onwards"]
    assert len(loop) == 2 and all("D-RTE-001" in e.codes and e.severity == "error"
                                  for e in loop)
    assert all(e.dashed and "D-CFG-009" in e.codes for e in loop)
    text = dot(picture)
    assert text.count('style=dashed, penwidth=1.5, color="#d62728"') == 2


def test_the_command_writes_the_form_its_suffix_names(network, tmp_path, capsys):
    out = tmp_path / "net.mmd"
    code, _, _ = call(["topology", *network, "--out", out], capsys)
    assert code == 0 and out.read_text().startswith("flowchart LR")
    code, text, _ = call(["topology", *network], capsys)
    assert code == 0 and text.startswith("digraph broker_network {")
    code, _, err = call(["topology", *network, "--out", tmp_path / "net.txt"], capsys)
    assert code == 2 and "cannot tell the form" in err
    code, _, err = call(["topology", tmp_path / "missing.duckdb"], capsys)
    assert code == 2 and "missing.duckdb" in err


def test_svg_and_png_are_drawn_by_graphviz(network, tmp_path, capsys):
    svg, png = tmp_path / "net.svg", tmp_path / "net.png"
    for out in (svg, png):
        code, _, err = call(["topology", *network, "--out", out], capsys)
        assert code == 0, err
    drawn = svg.read_text()
    assert drawn.lstrip().startswith("<?xml") and "<svg" in drawn
    for name in ("Shop", "Stock", "OnToStock", "OnToShop", "ToStock"):
        assert f">{name}" in drawn, name  # every element and route has its label
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    code, _, err = call(["topology", *network, "--format", "png"], capsys)
    assert code == 2 and "--out net.png" in err
    if os.environ.get("PYBROKER_UPDATE_SCREENSHOTS"):  # README's picture
        shutil.copy(svg, Path(pybroker.__file__).parent / "docs" / "topology-forwarder.svg")


def test_the_forwarders_network_is_drawn_as_its_golden_file(network):
    """The DOT of A -> F -> B, held to tests/golden/topology_forwarder.dot so that a change
    of the picture shows in review (PYBROKER_UPDATE_GOLDEN=1 writes it again)."""
    text = dot(topology(network))
    for n, file in enumerate(network):  # the instances' files are the test's temporary ones
        text = text.replace(str(file), f"instance{n}.duckdb").replace(file.name,
                                                                      f"instance{n}.duckdb")
    for port, golden_port in GOLDEN_PORTS.items():  # the ports are free ones of this run
        text = text.replace(f"127.0.0.1:{port}", f"127.0.0.1:{golden_port}")
    # and each database's broker identifier is new with each file: its first 8 digits go
    text = re.sub(r'(shape=folder, label="[^"\\]+)\\n[0-9a-f]{8}"', r'\1\\nGUID"', text)
    golden = Path(__file__).parent / "golden" / "topology_forwarder.dot"
    if os.environ.get("PYBROKER_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_the_picture_as_json(network, tmp_path, capsys):
    code, out, _ = call(["topology", *network, "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["schema"] == 1 and report["targets"] == [str(t) for t in network]
    kinds = {e["kind"] for e in report["elements"]}
    assert {"instance", "endpoint", "database", "service"} <= kinds
    assert set(report["elements"][0]) == {"id", "kind", "label", "parent", "codes", "severity"}
    assert {"source", "target", "kind", "label", "route", "dashed"} <= set(report["edges"][0])
    ids = {e["id"] for e in report["elements"]}
    assert all(e["source"] in ids and e["target"] in ids for e in report["edges"])
    out_file = tmp_path / "net.json"
    code, _, _ = call(["topology", *network, "--out", out_file], capsys)
    assert code == 0 and json.loads(out_file.read_text()) == report
