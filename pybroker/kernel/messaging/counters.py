"""What committed transactions did to messages, counted since the instance opened: the
counters of ``/metrics`` (pybroker/server/http.py). A unit of work counts as it goes
(UnitOfWork.counts); its counts join these only when it commits, so a rolled-back SEND or
RECEIVE is never counted."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping

# (what, database_id, label): "sent" by the sending service, "delivered" into a queue of
# this instance by queue, "received" from a queue by queue
CountKey = tuple[str, int, str]


class MessageCounters:
    """Counts that only grow while the instance is open."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[CountKey] = Counter()

    def add(self, counts: Mapping[CountKey, int]) -> None:
        if counts:
            with self._lock:
                self._counts.update(counts)

    def snapshot(self) -> dict[CountKey, int]:
        """Every count now, by key."""
        with self._lock:
            return dict(self._counts)
