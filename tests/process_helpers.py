"""Instances in real processes on 127.0.0.1, for the tests that need them: free ports,
certificates made by `pybroker cert`, and ``Child`` (a process started, killed, restarted
and stopped by pid, its output in a log file): tests/wire_child.py by default, or
``pybroker serve FILE`` (``Served``), whose instance a test reaches as a client through
the socket beside the file (``client()``), with the same API as an embedded one.

Every wait is bounded; ``close()`` in a ``finally`` kills what is still running."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pybroker
from pybroker.devtools.chaos.ports import free_ports  # noqa: F401 (re-exported: ports below the ephemeral range)
from tests.wire_helpers import wait_for

ROOT = Path(__file__).resolve().parents[1]
WIRE_CHILD = ROOT / "tests" / "wire_child.py"


def certificates(*files: Path) -> list[Path]:
    """Each instance's certificate, from ``pybroker cert FILE`` (one process per file)."""
    pems = [f.with_suffix(".pem") for f in files]
    for file in files:  # `pybroker cert` refuses a missing file
        if not file.exists():
            pybroker.connect(file, worker=False).close()
    procs = []
    try:
        for file, pem in zip(files, pems, strict=True):
            with pem.open("w") as out:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "pybroker", "cert", str(file)], cwd=ROOT,
                    stdout=out, env=child_env()))
        for proc in procs:
            assert proc.wait(timeout=60) == 0
    finally:
        for proc in procs:
            kill(proc)
    for pem in pems:
        assert pem.read_text().startswith("-----BEGIN CERTIFICATE-----")
    return pems


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def wait_until(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "",
               poll: float = 0.05) -> Any:
    """``predicate()``'s first true value, polled until ``timeout`` seconds pass."""
    return wait_for(predicate, timeout, what, poll)


class Child:
    """One instance's process: started again with the same file and port after a kill.
    ``command`` runs with ``args`` appended (default: tests/wire_child.py)."""

    command: ClassVar[tuple[str, ...]] = (sys.executable, str(WIRE_CHILD))

    def __init__(self, log: Path, *args: object, env: dict[str, str] | None = None) -> None:
        self.log = log
        self.env = {**child_env(), **(env or {})}
        self.args = [str(a) for a in args]
        self.proc: subprocess.Popen | None = None
        self.mark = 0
        self.starts = 0

    def start(self, *args: object) -> None:
        assert self.proc is None or self.proc.poll() is not None
        if args:
            self.args = [str(a) for a in args]
        self.mark = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("a") as out:
            self.proc = subprocess.Popen([*self.command, *self.args], cwd=ROOT,
                                         stdout=out, stderr=subprocess.STDOUT, env=self.env)
        self.starts += 1

    def lines(self) -> list[str]:
        """What this run of the process printed."""
        with self.log.open() as f:
            f.seek(self.mark)
            return f.read().splitlines()

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.lines():
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.args[0]} exited with {self.proc.returncode} "
                                     f"before {text!r}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} from {self.args[0]} in {timeout} s:\n"
                                     f"{self.stacks()}")
            time.sleep(0.05)

    def listening(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(x.startswith("listening on tcp://127.0.0.1:") for x in self.lines()):
            assert self.proc is not None and self.proc.poll() is None, self.tail()
            assert time.monotonic() < deadline, f"not listening in {timeout} s: {self.tail()}"
            time.sleep(0.05)

    def fragments(self) -> int:
        """How many fragments the receiver holds (its last "fragments N" line)."""
        counts = [int(x.split()[1]) for x in self.lines() if x.startswith("fragments ")]
        return counts[-1] if counts else -1

    def sent(self) -> int:
        counts = [int(x.split()[1]) for x in self.lines() if x.startswith("sent ")]
        return counts[-1] if counts else 0

    def kill(self) -> None:
        assert self.proc is not None
        kill(self.proc)
        assert self.proc.returncode == -signal.SIGKILL

    def stop(self) -> None:
        """SIGTERM, a bounded wait, and a clean exit."""
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                where = self.stacks()  # every thread's stack: where the close is stuck
                kill(self.proc)
                raise AssertionError(f"{self.args[0]} ignored SIGTERM: {where}") from None
        assert self.proc.returncode == 0, self.tail()

    def close(self) -> None:
        if self.proc is not None:
            kill(self.proc)

    def stacks(self) -> str:
        """Every thread's stack (faulthandler on SIGUSR1), for a child that seems stuck."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            return self.tail()
        size = self.log.stat().st_size
        os.kill(self.proc.pid, signal.SIGUSR1)
        time.sleep(1)
        with self.log.open() as f:
            f.seek(size)
            return f"{self.args[0]} (pid {self.proc.pid}):\n{f.read()}"

    def tail(self) -> str:
        return "\n".join(self.log.read_text().splitlines()[-15:]) if self.log.exists() else ""


class Served(Child):
    """``pybroker serve FILE`` on 127.0.0.1:``port``: the instance file is made (and set
    up) beforehand by the test, which then reaches the running instance as a client."""

    command: ClassVar[tuple[str, ...]] = (sys.executable, "-m", "pybroker", "serve")

    def __init__(self, file: Path, port: int, *options: object,
                 retry_scale: float = 0.01) -> None:
        super().__init__(file.with_suffix(".log"), file, "--port", port, "--retry-scale",
                         retry_scale, "--quiet", *options)
        self.file = file
        self.port = port
        self.address = f"tcp://127.0.0.1:{port}"

    def stacks(self) -> str:
        return self.tail()  # `pybroker serve` dumps no stacks on SIGUSR1

    def ready(self, timeout: float = 60) -> None:
        """Listening for brokers and for clients."""
        self.listening(timeout)
        self.wait_for(f"clients on {self.file}.sock", timeout)

    @contextlib.contextmanager
    def client(self) -> Iterator[pybroker.Instance]:
        inst = pybroker.connect(self.file)
        try:
            yield inst
        finally:
            inst.close()

    def sql(self, query: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Rows of ``query`` run in the serving process."""
        with self.client() as inst:
            return inst.sql(query, params or []).fetchall()


def start_all(*children: Served) -> None:
    """Start every process first, then wait for each (they start in parallel)."""
    for child in children:
        child.start()
    for child in children:
        child.ready()


def trust_each_other(*files: Path) -> None:
    """Every instance file trusts every other one's certificate (made on first need)."""
    insts = [pybroker.connect(f, worker=False) for f in files]
    try:
        pems = [inst.certificate for inst in insts]
        for i, inst in enumerate(insts):
            for j, pem in enumerate(pems):
                if i != j:
                    inst.trust(files[j].stem, pem)
    finally:
        for inst in insts:
            inst.close()
