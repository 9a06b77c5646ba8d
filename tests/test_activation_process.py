"""Activation in `pybroker serve` (C3): a real serve process holds a queue WITH ACTIVATION
whose handler is importable through its PYTHONPATH; messages arriving over the wire from a
second instance (this test's process) are handled by it, and sys.dm_broker_* show it.

The serve process is started by pid and stopped by pid in a ``finally``; every wait is
bounded."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pybroker
from pybroker.devtools.chaos.ports import free_port
from tests.process_helpers import wait_until

ROOT = Path(__file__).resolve().parents[1]
COUNT = 20


def test_serve_activates_a_queue_for_messages_from_another_instance(tmp_path):
    target_file, sender_file = tmp_path / "target.duckdb", tmp_path / "sender.duckdb"
    record = tmp_path / "handled.txt"
    port = free_port()
    with pybroker.connect(target_file, worker=False) as target:
        db = target.create_database("Stock")
        db.execute("CREATE QUEUE StockQueue WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = "
                   "[activation_handlers:to_file], MAX_QUEUE_READERS = 2, EXECUTE AS SELF)")
        db.execute("CREATE SERVICE StockService ON QUEUE StockQueue ([DEFAULT])")
        target_pem = target.certificate
    sender = pybroker.connect(sender_file, retry_scale=0.01)
    (tmp_path / "sender.pem").write_text(sender.certificate)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
           "PYBROKER_TEST_RECORD": str(record), "PYBROKER_TEST_QUEUE": "StockQueue"}
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen(
        [sys.executable, "-m", "pybroker", "serve", str(target_file), "--port", str(port),
         "--trust", f"Sender={tmp_path / 'sender.pem'}", "--retry-scale", "0.01"],
        cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_until(lambda: "listening on" in (tmp_path / "serve.log").read_text()
                 or serve.poll() is not None, what="serve to listen")
        assert serve.poll() is None, (tmp_path / "serve.log").read_text()
        sender.trust("Stock", target_pem)
        sender.start_endpoint(0)
        shop = sender.create_database("Shop")
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", "ShopQueue")
        shop.create_route("ToStock", service_name="StockService",
                          address=f"tcp://127.0.0.1:{port}")
        conversation = shop.begin_dialog("ShopService", "StockService")
        with shop.transaction():
            for i in range(COUNT):
                conversation.send(b"order %d" % i)
        lines = wait_until(lambda: len(got := (record.read_bytes().splitlines()
                                             if record.exists() else [])) >= COUNT and got,
                         what="the activated handler to record every message")
        assert lines == [b"order %d" % i for i in range(COUNT)]  # once each, in order
        # the sender's messages were acknowledged: they reached the queue and were taken
        wait_until(lambda: sender.sql("SELECT count(*) FROM sys.transmission_queue"
                                    ).fetchone() == (0,), what="the acknowledgements")
    finally:
        sender.close()
        if serve.poll() is None:
            os.kill(serve.pid, signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        finally:
            if serve.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(serve.pid, signal.SIGKILL)
                serve.wait(timeout=30)
            log.close()
    assert serve.returncode == 0, (tmp_path / "serve.log").read_text()
    with pybroker.connect(target_file, read_only=True) as target:
        # the queue was emptied by the handler, and activation's snapshot by stopping
        assert target.sql("SELECT count(*) FROM sys.queue_messages").fetchone() == (0,)
        assert target.sql("SELECT count(*) FROM sys.dm_broker_activated_tasks"
                          ).fetchone() == (0,)
        assert target.sql("SELECT count(*) FROM sys.broker_events WHERE event_class = "
                          "'Broker:Activation'").fetchone() == (0,)
