"""One instance of ``pybroker bench wire --body-mb N`` (pybroker/devtools/bench/big_body.py), in its
own process: a wire_child that also makes, sends and takes one big body and says what its
resident set grew by meanwhile.

``python -m pybroker.devtools.bench.big_body_child ROLE FILE FOLDER [RETRY_SCALE]``, spoken to in
JSON lines as wire_child is.
"""

from __future__ import annotations

import gc
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from pybroker.devtools.bench import wire_child

RECEIVE_TIMEOUT = 1800.0  # seconds for the body to arrive (1 GB on a loaded machine)


def status_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def baseline() -> int:
    """The resident set now, with the kernel's peak (VmHWM) reset to it."""
    gc.collect()
    with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
        refs.write("5")  # 5: reset the peak resident set size (Linux 4.0+)
    return status_kb("VmRSS")


class Child(wire_child.Child):
    def __init__(self, role: str, path: Path, folder: Path, retry_scale: float) -> None:
        super().__init__(role, path, folder, retry_scale)
        self.body: bytes | None = None
        self.baseline = 0

    def _duckdb_memory(self) -> int:
        row = self.inst.sql("SELECT coalesce(sum(memory_usage_bytes), 0) "
                            "FROM duckdb_memory()").fetchone()
        return int(row[0]) if row else 0

    def handle(self, cmd: dict[str, Any]) -> dict[str, Any]:
        name = cmd["cmd"]
        if name == "big_make":  # the user's body: made before the baseline, not counted
            self.body = os.urandom(cmd["body_bytes"])
            return {"sha256": hashlib.sha256(self.body).hexdigest()}
        if name == "big_baseline":
            self.baseline = baseline()
            return {"baseline": self.baseline}
        if name == "big_send":
            assert self.body is not None
            start = time.time()
            with self.db.transaction():
                self.convs[0].send(self.body)
            sent = time.time()
            acked = wire_child.wait_transmitted(self.inst, timeout=RECEIVE_TIMEOUT)
            growth = status_kb("VmHWM") - self.baseline
            self.body = None
            return {"start": start, "sent": sent, "acked": acked, "growth": growth,
                    "baseline": self.baseline, "duckdb_memory": self._duckdb_memory()}
        if name == "big_receive":
            deadline = time.monotonic() + RECEIVE_TIMEOUT
            got: list[Any] = []
            while not got:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no body arrived in {RECEIVE_TIMEOUT:.0f} s")
                got = self.db.receive(wire_child.TARGET_QUEUE, max_messages=1, timeout=1.0)
            done = time.time()
            body = got[0].message_body
            out = {"size": len(body), "sha256": hashlib.sha256(body).hexdigest(),
                   "done": done, "growth": status_kb("VmHWM") - self.baseline,
                   "baseline": self.baseline}
            del got, body
            out["duckdb_memory"] = self._duckdb_memory()
            return out
        return super().handle(cmd)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(wire_child.main(sys.argv[1:], Child))
