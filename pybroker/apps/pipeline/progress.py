"""Progress of long jobs on a terminal: one line on stderr, rewritten in place; nothing at
all when stderr is not a TTY (logs and pipes stay clean)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    def __init__(self, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self._stream, "isatty", lambda: False)())
        self.enabled = enabled
        self._width = 0
        self._lock = threading.Lock()

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            pad = max(0, self._width - len(text))
            self._stream.write("\r" + text + " " * pad)
            self._stream.flush()
            self._width = len(text)

    def done(self, text: str) -> None:
        """A finished stage: its line stays."""
        if not self.enabled:
            return
        self.show(text)
        with self._lock:
            self._stream.write("\n")
            self._stream.flush()
            self._width = 0


class Poller:
    """Calls ``poll`` every ``interval`` seconds on a daemon thread until stopped."""

    def __init__(self, poll: Callable[[], None], interval: float = 0.5) -> None:
        self._poll = poll
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._poll()
            except Exception:  # progress must never break a job
                return


def elapsed(start: float) -> str:
    return f"{time.perf_counter() - start:.1f} s"
