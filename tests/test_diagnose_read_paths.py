"""diagnose, trace and topology read an instance the three ways analysts do: the file, a
snapshot of it (``pybroker snapshot``) and the file while ``pybroker serve`` holds it (read
through its server): the same answers from each. One served process for the module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import pybroker
from pybroker.apps.diagnose.drawing import dot
from pybroker.apps.diagnose.topology import topology
from tests.cli_helpers import run
from tests.process_helpers import Served, free_ports


def _places(result) -> list[tuple[int, str, str]]:
    return [(m.sequence, m.place, m.where.rpartition("/App")[2]) for m in result.messages]


@pytest.fixture(scope="module")
def readings(tmp_path_factory) -> Iterator[dict]:
    """One file with a conversation inside it (message 0 received, message 1 in the target's
    queue) and a queue OFF (D-CFG-003); what each read path gives of it before it is served,
    its snapshot, and the served process."""
    folder = tmp_path_factory.mktemp("paths")
    file = folder / "app.duckdb"
    with pybroker.connect(file, worker=False) as inst:
        db = inst.create_database("App")
        db.create_service("Init", queue=db.create_queue("InitQueue").name)
        db.create_service("Target", queue=db.create_queue("TargetQueue").name,
                          contracts=["DEFAULT"])
        db.create_queue("Spare", status=False)
        conv = db.begin_dialog("Init", "Target")
        conv.send(b"first")
        assert len(db.receive("TargetQueue", max_messages=1)) == 1
        conv.send(b"second")
        snapshot = inst.snapshot(folder / "app.snapshot.duckdb")
    made = {"file": file, "snapshot": snapshot, "handle": conv.handle,
            "findings": [(f.code, f.objects) for f in pybroker.diagnose([file])],
            "trace": _places(pybroker.trace(conv.handle, [file])),
            "dot": dot(topology([file])).replace(str(file), "INSTANCE")}
    served = Served(file, free_ports(1)[0])
    try:
        served.start()
        served.ready()
        yield {**made, "served": served}
    finally:
        served.close()


def test_the_file_gives_a_finding_a_trace_and_a_picture(readings):
    assert readings["findings"] == [("D-CFG-003", ("queue Spare",))]
    assert readings["trace"] == [(0, "received", ""), (1, "queue", "/TargetQueue")]
    assert 'label="Target\\nqueue TargetQueue"' in readings["dot"]


def test_a_snapshot_gives_what_the_file_gave(readings):
    snapshot, handle = readings["snapshot"], readings["handle"]
    assert [(f.code, f.objects) for f in pybroker.diagnose([snapshot])] == readings["findings"]
    assert _places(pybroker.trace(handle, [snapshot])) == readings["trace"]
    assert dot(topology([snapshot])).replace(str(snapshot), "INSTANCE") == readings["dot"]


def test_a_served_file_gives_what_the_file_gave_through_its_server(readings):
    file, handle, served = readings["file"], readings["handle"], readings["served"]
    assert [(f.code, f.objects) for f in pybroker.diagnose([file])] == readings["findings"]
    assert _places(pybroker.trace(handle, [file])) == readings["trace"]
    drawn = dot(topology([file])).replace(str(file), "INSTANCE")
    # the same picture, but for the endpoint, which is the one the server runs
    running = f'label="endpoint DefaultBrokerEndpoint\\n{served.address}\\nSTARTED"'
    assert running in drawn
    assert drawn.replace(running, 'label="no broker endpoint"') == readings["dot"]
    result = run("trace", handle, file, "--format", "json")  # the command, too
    assert result.returncode == 0 and '"place": "queue"' in result.stdout, result.stderr

