"""The queue monitor of one activated queue, sans-I/O: when to start another reader (C3,
SQL Server's internal activation).

SQL Server keeps a queue monitor per queue with activation ON. It starts the activation
procedure when messages arrive and no reader is running, and while messages keep arriving
faster than the running readers take them, it starts one more at each of its periodic
checks, up to MAX_QUEUE_READERS. A reader that returns is not started again until messages
arrive (or a check finds the queue holding some).

The monitor never reads a clock, starts a thread or touches DuckDB: every input takes
``now`` (epoch seconds) and the inputs that may start readers return how many to start.
The driver (pybroker.kernel.activation) feeds it and starts the readers.

States, in the words of ``sys.dm_broker_queue_monitors``::

    INACTIVE            no reader runs (none needed, or none allowed)
      | messages arrived -> start a reader
    NOTIFIED            a reader was started; no RECEIVE of it has returned messages yet
      | a RECEIVE returned messages
    RECEIVES_OCCURRING  readers are taking messages
      | the last reader returned -> INACTIVE

The rule for one more reader, at a periodic check (``tick``): the queue still holds ready
messages, no RECEIVE came back empty since the previous check (the readers are behind),
at least ``interval`` seconds passed since the last reader was started, and fewer than
``max_readers`` run.
"""

from __future__ import annotations

from dataclasses import dataclass

from pybroker.core.tsql.object_ddl import MAX_QUEUE_READERS

INACTIVE, NOTIFIED, RECEIVES_OCCURRING = "INACTIVE", "NOTIFIED", "RECEIVES_OCCURRING"
STATES = (INACTIVE, NOTIFIED, RECEIVES_OCCURRING)

# SQL Server's queue monitor looks at its queues every few seconds; a reader is added at
# most this often (Instance.start_activation's check_interval).
DEFAULT_INTERVAL = 5.0


@dataclass
class QueueMonitor:
    """The monitor of one queue. ``readers`` counts the readers asked for and not yet
    returned (a reader being started counts: the monitor never asks twice for one)."""

    max_readers: int
    interval: float = DEFAULT_INTERVAL
    state: str = INACTIVE
    readers: int = 0
    last_activated_time: float | None = None
    last_empty_rowset_time: float | None = None
    tasks_waiting: int = 0
    # a RECEIVE came back empty since the last check: the readers keep up
    _emptied: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.max_readers <= MAX_QUEUE_READERS:
            raise ValueError(f"max_readers must be 0 to {MAX_QUEUE_READERS}: {self.max_readers}")
        if not self.interval >= 0:
            raise ValueError(f"interval must be seconds >= 0: {self.interval}")

    # -- inputs ----------------------------------------------------------------------------

    def messages_arrived(self, now: float) -> int:
        """Ready messages are in the queue (a commit put some there, or a check found some).
        Returns how many readers to start: one when none runs, else none (more come only
        from ``tick``)."""
        if self.readers == 0 and self.max_readers > 0:
            return self._start(now)
        return 0

    def reader_started(self, now: float) -> None:
        """A reader asked for is running (its callable is being called)."""
        if self.state == INACTIVE and self.readers:
            self.state = NOTIFIED

    def receive_happened(self, now: float, messages: int) -> None:
        """A RECEIVE on the queue returned ``messages`` (0: an empty rowset)."""
        if messages:
            if self.readers:
                self.state = RECEIVES_OCCURRING
        else:
            self.last_empty_rowset_time = now
            self._emptied = True

    def reader_returned(self, now: float) -> None:
        """A reader's callable returned (or raised). It is not started again here: the next
        arrival, or a check that finds messages, starts one."""
        self.readers = max(0, self.readers - 1)
        if self.readers == 0:
            self.state = INACTIVE

    def tick(self, now: float, has_messages: bool) -> int:
        """The periodic check: ``has_messages`` says whether the queue holds ready messages.
        Returns how many readers to start (0 or 1)."""
        emptied, self._emptied = self._emptied, False
        if not has_messages:
            return 0
        if self.readers == 0:
            return self.messages_arrived(now)
        if emptied or self.readers >= self.max_readers:
            return 0
        if self.last_activated_time is not None and (
                now - self.last_activated_time < self.interval):
            return 0
        return self._start(now)

    def limit(self, max_readers: int) -> None:
        """ALTER QUEUE changed MAX_QUEUE_READERS: running readers above it finish their
        work; no new one starts until fewer run."""
        if not 0 <= max_readers <= MAX_QUEUE_READERS:
            raise ValueError(f"max_readers must be 0 to {MAX_QUEUE_READERS}: {max_readers}")
        self.max_readers = max_readers

    def _start(self, now: float) -> int:
        self.readers += 1
        self.last_activated_time = now
        self._emptied = False
        if self.state == INACTIVE:
            self.state = NOTIFIED
        return 1
