"""One resolve job submitted to a real standalone Spark cluster (a master and a worker
started from the pyspark installation, stopped by pid) gives the rows DuckDB gives. Its own
module: it starts JVMs of its own, not the local SparkSession, so it runs beside the
SparkSession's tests on the other worker."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from pybroker.apps.pipeline.engine import DuckDBEngine
from pybroker.devtools.chaos.ports import free_ports
from tests.pipeline_fixtures import read_rows, resolve_to_rows, seed_states

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]


def _wait_for(check, what: str, timeout: float, procs) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"{p.args[1]} exited with {p.returncode} before {what}")
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextmanager
def _daemon(args: list[str], log: Path, env: dict[str, str]):
    """A Spark daemon in the foreground of its own process; stopped by its pid."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except (OSError, ValueError):  # not up yet, or a page cut short while it starts
        return 0


def test_resolve_on_a_standalone_cluster(tmp_path):
    import pyspark

    spark_home = Path(pyspark.__file__).resolve().parent
    spark_class = str(spark_home / "bin" / "spark-class")
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_NO_DAEMONIZE": "1"}
    port, ui, worker_ui = free_ports(3)
    master_url = f"spark://127.0.0.1:{port}"
    [state] = seed_states(tmp_path, {"ex5_fwd0"})  # example 5: the R2.3 and R2.1 picks
    with DuckDBEngine() as duck:
        expected = resolve_to_rows(duck, state.conversations, state.file, tmp_path / "duck")

    with ExitStack() as stack:
        master = stack.enter_context(_daemon(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(ui)], tmp_path / "master.log", env))
        _wait_for(lambda: _alive_workers(ui) == 0 and _port_open(port), "the master", 90,
                  [master])
        worker = stack.enter_context(_daemon(
            [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
             "--webui-port", str(worker_ui), "--cores", "1", "--memory", "1g",
             "--work-dir", str(tmp_path / "work"), master_url],
            tmp_path / "worker.log", env))
        _wait_for(lambda: _alive_workers(ui) == 1, "the worker to register", 90,
                  [master, worker])
        job = subprocess.run(
            [sys.executable, "-m", "pybroker", "pipeline", "resolve", str(state.file),
             str(state.conversations), str(tmp_path / "cluster"), "--engine", "spark",
             "--master", master_url, "--conf", "spark.executor.memory=512m",
             "--conf", "spark.cores.max=1", "--json"],
            capture_output=True, text=True, cwd=ROOT, env=env, timeout=420,
        )
        assert job.returncode == 0, job.stderr[-3000:]
        result = json.loads(job.stdout[job.stdout.index("{"):])
        assert result["engine"] == "spark"
        assert result["conversations"] == len(state.expect)
    assert read_rows(tmp_path / "cluster") == expected
    assert master.returncode is not None and worker.returncode is not None  # both stopped


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
