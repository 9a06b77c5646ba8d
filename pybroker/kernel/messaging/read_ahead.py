"""RECEIVE read-ahead (C3, P3.1): the ready messages of one queue held in memory, handed out
group by group exactly as the table would. When and how much to read is RECEIVE's
(Receiving in receive.py, READ_AHEAD_* there)."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Container
from typing import Any


class ReceiveBuffer:
    """Ready messages of one queue read ahead by RECEIVE (C3, P3.1).

    It holds the first conversation groups of the queue (in the order RECEIVE takes them:
    by their first ready message) with their ready messages in order, read by
    select_ready_messages.sql, so RECEIVE can hand out the next group exactly as
    receive_messages.sql would take it from the table, without a statement per call.
    Every ready message before ``horizon`` (a queuing order; None: no limit) is here,
    except the rest of the groups in ``beyond``, which go on after what was read. When it
    cannot answer for sure, ``take`` says so and the queue is read again. Messages
    delivered into the queue later come after everything read (queuing_order grows), so
    they only extend a group or move the horizon. It is kept across transactions
    (Receiving.read_ahead): every change to a queue's contents goes through the engine,
    which keeps it true or drops it.
    """

    __slots__ = ("beyond", "body_size", "groups", "horizon", "kept", "order", "reads")

    def __init__(self, rows: list[tuple[Any, ...]], reads: int,
                 kept: dict[int, tuple[str, int]] | None = None) -> None:
        """``kept``: queuing order -> (handle, sequence) of the messages read whose body is
        kept as fragments (message_parts.py): they leave with the message when taken."""
        self.kept = kept or {}
        self.groups: dict[str, deque[tuple[Any, ...]]] = {}
        ready: dict[str, int] = {}
        for row in rows:
            self.groups.setdefault(row[2], deque()).append(row[:8])
            ready[row[2]] = row[8]
        self.beyond = {g for g, count in ready.items() if count > len(self.groups[g])}
        self.horizon: int | None = rows[0][9] if rows else None
        # (first queuing order not yet handed out, group): the next group is the least
        self.order = [(found[0][0], g) for g, found in self.groups.items()]
        heapq.heapify(self.order)
        self.reads = reads
        bodies = sum(len(row[5] or b"") for row in rows)
        self.body_size = bodies / len(rows) if rows else 0.0  # average, bounds the next read

    def take(self, max_messages: int, may_take: Callable[[str], bool] | None = None
             ) -> list[tuple[Any, ...]] | None:
        """The next group's messages, up to ``max_messages`` in order ([]: the queue has
        no ready message); None when the messages read do not say for sure.
        ``may_take(group)``: whether this transaction may take the group (C7: it locks it
        then; False: another transaction holds it, and the group is skipped)."""
        order, groups = self.order, self.groups
        skipped: list[tuple[int, str]] = []
        try:
            while order:
                first, group = order[0]
                found = groups.get(group)
                if not found or found[0][0] != first:
                    heapq.heappop(order)  # stale: that group was handed out since
                    continue
                if self.horizon is not None and first > self.horizon:
                    return None  # an unread group may come first
                if may_take is not None and not may_take(group):
                    skipped.append(heapq.heappop(order))
                    continue
                if len(found) < max_messages and group in self.beyond:
                    return None  # more of the group is ready than was read
                heapq.heappop(order)
                out = [found.popleft() for _ in range(min(max_messages, len(found)))]
                if found:
                    heapq.heappush(order, (found[0][0], group))
                else:
                    del groups[group]
                    if group in self.beyond:  # its next ready message is after the last read
                        self.beyond.discard(group)
                        self._limit(out[-1][0])
                return out
            return [] if self.complete else None
        finally:
            for item in skipped:
                heapq.heappush(order, item)

    def has_group(self, skip: Container[str]) -> bool:
        """Whether a group read ahead is not in ``skip`` (held by other transactions)."""
        return any(group not in skip for group in self.groups)

    def release_kept(self, rows: list[tuple[Any, ...]]) -> list[tuple[str, int]]:
        """The (handle, sequence) of the messages among ``rows`` (handed out by ``take``)
        whose body is kept as fragments; they are gone from here, so no entry stays for a
        message already taken."""
        kept = self.kept
        if not kept:
            return []
        return [message for r in rows if (message := kept.pop(r[0], None)) is not None]

    @property
    def complete(self) -> bool:
        """Every ready message of the queue is here: what ``take`` finds not is not there."""
        return self.horizon is None and not self.beyond

    def delivered(self, group: str, queuing_order: int,
                  row: tuple[Any, ...] | None = None) -> None:
        """A message of ``group`` entered the queue (after every message read). ``row``: it
        is ready (status 1), as a row of select_ready_messages.sql with its body; it joins
        what was read when what was read holds every ready message of its group (then it
        is the group's next), or of the whole queue (then the group starts with it). The
        unit of work that delivers it says so when it commits (UnitOfWork.deliveries),
        so no RECEIVE sees it before."""
        found = self.groups.get(group)
        if found is not None:
            if row is not None and group not in self.beyond:
                found.append(row)
            else:
                self.beyond.add(group)
        elif row is not None and self.horizon is None:
            self.groups[group] = deque((row,))
            heapq.heappush(self.order, (queuing_order, group))
        else:
            self._limit(queuing_order)

    def _limit(self, queuing_order: int) -> None:
        if self.horizon is None or queuing_order < self.horizon:
            self.horizon = queuing_order
