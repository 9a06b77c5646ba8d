"""The instance's background worker: runs the delay/retry loop (``Messaging.run_pending``)
when something is due: a waiting transmission's retry (C5), a conversation timer, a
lifetime. It sleeps until the earliest deadline the engine knows (woken early when a
sooner one appears), at most ``poll`` seconds at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol


class _Engine(Protocol):
    """What the worker needs of the messaging engine (engine.py's Messaging)."""

    next_deadline: float  # epoch seconds

    def run_pending(self, now: float | None = None) -> int: ...

    def wait_for_work(self, timeout: float) -> bool: ...

    def wake(self) -> None: ...


class Worker:
    def __init__(
        self, messaging: _Engine, clock: Callable[[], float], *, poll: float = 1.0
    ) -> None:
        self._messaging = messaging
        self._clock = clock
        self._poll = poll
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pybroker-worker", daemon=True)
        self.last_error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._messaging.wake()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        deadline = self._messaging.next_deadline  # read from the file when it opened
        due = bool(deadline) and self._clock() >= deadline
        while not self._stopped.is_set():
            if due:
                try:
                    self._messaging.run_pending()
                except Exception as exc:  # never let the loop die; the next round retries
                    self.last_error = exc
            deadline = self._messaging.next_deadline
            wait = self._poll if not deadline else min(
                self._poll, max(0.0, deadline - self._clock()))
            self._messaging.wait_for_work(wait)
            deadline = self._messaging.next_deadline
            due = bool(deadline) and self._clock() >= deadline
