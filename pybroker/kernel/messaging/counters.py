"""What committed transactions did to messages, counted since the instance opened: the
counters of ``/metrics`` (pybroker/server/http.py). A unit of work counts as it goes
(UnitOfWork.counts); its counts join these only when it commits, so a rolled-back SEND or
RECEIVE is never counted."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping

# (what, database_id, label): "sent" by the sending service, "delivered" into a queue of
# this instance by queue, "received" from a queue by queue, "acknowledged" (the far side has
# the message: its row left the transmission queue, P5.2) by the sending service,
# "rolled_back" (a transaction that received from the queue rolled back: C3's poison
# message count) by queue
CountKey = tuple[str, int, str]
# upper bounds (seconds) of the SEND -> commit histogram's buckets, then +Inf
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0, 30.0, 60.0)


class Histogram:
    """Counts of observations at or below each bound (cumulative, as Prometheus keeps
    them), their sum and their number."""

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """(bound, observations at or below it) for each bound and +Inf."""
        out, running = [], 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out


class MessageCounters:
    """Counts that only grow while the instance is open."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[CountKey] = Counter()
        # broker events recorded (sys.broker_events), by class and subclass: a fixed set
        self._events: Counter[tuple[str, str]] = Counter()
        # seconds from a transaction's first SEND to its commit
        self._send_commit = Histogram()
        # seconds from a message's arrival from the network to the commit that applied it
        self._arrival_commit = Histogram()

    def add(self, counts: Mapping[CountKey, int]) -> None:
        if counts:
            with self._lock:
                self._counts.update(counts)

    def snapshot(self) -> dict[CountKey, int]:
        """Every count now, by key."""
        with self._lock:
            return dict(self._counts)

    def observe_send_commit(self, seconds: float) -> None:
        with self._lock:
            self._send_commit.observe(seconds)

    def send_commit(self) -> tuple[list[tuple[float, int]], float, int]:
        """The SEND -> commit histogram: (cumulative buckets, sum, count)."""
        with self._lock:
            h = self._send_commit
            return h.cumulative(), h.sum, h.count

    def observe_arrival_commit(self, seconds: list[float]) -> None:
        with self._lock:
            for value in seconds:
                self._arrival_commit.observe(value)

    def arrival_commit(self) -> tuple[list[tuple[float, int]], float, int]:
        """The arrival -> commit histogram: (cumulative buckets, sum, count)."""
        with self._lock:
            h = self._arrival_commit
            return h.cumulative(), h.sum, h.count

    def event(self, event_class: str, subclass: str) -> None:
        with self._lock:
            self._events[event_class, subclass] += 1

    def events(self) -> dict[tuple[str, str], int]:
        """The broker events recorded since the instance opened, by (class, subclass)."""
        with self._lock:
            return dict(self._events)
