"""A bench's child process, spoken to in JSON lines on its stdin and stdout: one request
per line (``{"cmd": ..., ...}``), one reply per line (``{"error": ..., "traceback": ...}``
on failure). Stopped by its pid: asked to quit, then SIGTERM, then SIGKILL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class JsonLinesChild:
    def __init__(self, name: str, argv: Sequence[str], stderr_path: Path, *,
                 env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        self.name = name
        self.stderr_path = stderr_path
        with open(stderr_path, "w") as err:
            self.proc = subprocess.Popen(
                list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                text=True, cwd=cwd, env=env)

    def post(self, cmd: str, **args: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": cmd, **args}) + "\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} ended: {self._stderr_tail()}")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.name} failed: {reply['error']}\n"
                               f"{reply.get('traceback', '')}")
        return reply

    def ask(self, cmd: str, **args: Any) -> dict[str, Any]:
        self.post(cmd, **args)
        return self.answer()

    def _stderr_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.stderr_path.read_text()[-2000:]
        return ""

    def stop(self) -> None:
        """Ask it to quit; after 30 s, terminate it, then kill it (by its pid)."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                self.post("quit")
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
