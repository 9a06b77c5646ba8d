"""Conversation group locks (SPEC C7), as a table with no I/O, no clock and no threads.

A transaction (a holder: a whole number, larger for a transaction begun later) locks a
conversation group, keyed (database_id, conversation_group_id), by acting on it; it keeps
every group it locked until it commits or rolls back (``release_all``). No other holder
takes a held group meanwhile. Whoever runs the transactions waits (kernel/messaging/
group_locking.py): it asks ``try_acquire``, and when the group is held says so with
``wait``, which answers whether that wait closes a cycle of the wait-for graph (a
deadlock) and who is its victim.

The victim of a deadlock is the youngest transaction of the cycle (the one begun last,
as it has usually done the least), except that a transaction waiting to commit is never
chosen while another in the cycle can be: it has done all its work. SQL Server chooses by
DEADLOCK_PRIORITY and then by the cost of the rollback; pybroker keeps no such cost, and
age is the nearest measure it has. The victim, if it is not the asker, is marked
(``is_victim``) and its waiter gives up with error 1205 (DeadlockVictimError).

Besides groups the table locks one more resource, WRITER: the one DuckDB connection's open
write transaction (a unit of work that writes into the file in the middle of its
transaction holds it until it ends). It goes through the same graph, so a transaction
that waits for it while holding a group another waits for is a deadlock found here too.
WRITER is handed out in turn: once it is free, the transaction that has waited for it
longest takes it, and no newcomer's ``try_acquire`` may take it first. Otherwise a
thread that commits one short transaction after another (a paced sender, arrivals from
the wire) could take it again before a waiter woke, for as long as it kept sending.
"""

from __future__ import annotations

from dataclasses import dataclass

GroupKey = tuple[int, str]  # (database_id, conversation_group_id)
WRITER: GroupKey = (-1, "")  # the store's one write transaction, not a group


@dataclass(frozen=True)
class HeldLock:
    """One row of sys.dm_broker_conversation_group_locks: a group, its holder, since when
    (what the caller passed as ``now``), and the holders waiting for it."""

    key: GroupKey
    holder: int
    since: float
    waiters: tuple[int, ...]


@dataclass(frozen=True)
class Waiting:
    """One waiting transaction: what it waits for, held by whom, since when."""

    holder: int
    key: GroupKey
    blocked_by: int
    since: float
    committing: bool


class GroupLocks:
    """The lock table of one instance. Not thread-safe: its caller serializes calls."""

    def __init__(self) -> None:
        self._held: dict[GroupKey, tuple[int, float]] = {}
        self._by_holder: dict[int, list[GroupKey]] = {}
        self._waits: dict[int, tuple[GroupKey, float, bool]] = {}
        self._victims: set[int] = set()

    def holder_of(self, key: GroupKey) -> int | None:
        found = self._held.get(key)
        return None if found is None else found[0]

    def held_by(self, holder: int) -> list[GroupKey]:
        return list(self._by_holder.get(holder, ()))

    def holds(self, holder: int, key: GroupKey) -> bool:
        return self.holder_of(key) == holder

    def locked_by_others(self, holder: int) -> set[GroupKey]:
        """Every key held by a holder other than ``holder``."""
        return {key for key, (h, _) in self._held.items() if h != holder}

    def try_acquire(self, holder: int, key: GroupKey, now: float) -> bool:
        """Take ``key`` for ``holder`` if it is free or already its own; WRITER, free,
        only if no other holder has waited for it longer (it is handed out in turn)."""
        found = self._held.get(key)
        if found is not None:
            return found[0] == holder
        if key == WRITER and self._first_waiter(key) not in (None, holder):
            return False
        self._held[key] = (holder, now)
        self._by_holder.setdefault(holder, []).append(key)
        return True

    def wait(self, holder: int, key: GroupKey, now: float, *,
             committing: bool = False) -> int | None:
        """``holder`` waits for ``key`` (held by another). Returns the victim when this
        wait closes a cycle (the wait is then not recorded if the victim is ``holder``),
        else None. A repeated call for the same wait keeps its first ``since``."""
        before = self._waits.get(holder)
        since = before[1] if before is not None and before[0] == key else now
        self._waits[holder] = (key, since, committing)
        cycle = self._cycle(holder)
        if not cycle:
            return None
        candidates = [h for h in cycle if not self._waits[h][2]] or cycle
        victim = max(candidates)
        if victim == holder:
            del self._waits[holder]
        else:
            self._victims.add(victim)
        return victim

    def _first_waiter(self, key: GroupKey) -> int | None:
        """Who has waited for ``key`` longest (the earlier transaction on a tie)."""
        waiting = [(since, h) for h, (k, since, _) in self._waits.items() if k == key]
        return min(waiting)[1] if waiting else None

    def _cycle(self, start: int) -> list[int]:
        """The holders of the wait-for cycle through ``start`` ([] when there is none)."""
        path = [start]
        seen = {start}
        current = start
        while True:
            waited = self._waits.get(current)
            if waited is None:
                return []
            found = self._held.get(waited[0])
            if found is None:
                return []
            current = found[0]
            if current == start:
                return path
            if current in seen:
                return []  # a cycle that does not pass through start: not this wait's
            seen.add(current)
            path.append(current)

    def hand_over(self, key: GroupKey, to: int) -> None:
        """The holder of ``key`` (held) hands it to ``to``, which holds it from the same
        ``since`` on: a commit that writes another transaction's commit with its own hands
        it WRITER while it applies that one's verbs (kernel/messaging/group_commit.py), so a
        wait of theirs goes through the graph as its own."""
        holder, since = self._held[key]
        if holder == to:
            return
        keys = self._by_holder[holder]
        keys.remove(key)
        if not keys:
            del self._by_holder[holder]
        self._held[key] = (to, since)
        self._by_holder.setdefault(to, []).append(key)

    def stop_waiting(self, holder: int) -> None:
        self._waits.pop(holder, None)

    def is_victim(self, holder: int) -> bool:
        return holder in self._victims

    def release(self, holder: int, key: GroupKey) -> bool:
        """``holder`` lets ``key`` go before it ends (whether it held it); the rest it keeps."""
        found = self._held.get(key)
        if found is None or found[0] != holder:
            return False
        del self._held[key]
        keys = self._by_holder[holder]
        keys.remove(key)
        if not keys:
            del self._by_holder[holder]
        return True

    def release_all(self, holder: int) -> list[GroupKey]:
        """``holder`` ended: every key it held is free (returned), and it waits no more."""
        keys = self._by_holder.pop(holder, [])
        for key in keys:
            del self._held[key]
        self._waits.pop(holder, None)
        self._victims.discard(holder)
        return keys

    def holders(self) -> list[HeldLock]:
        """The held keys (WRITER among them), oldest first, with who waits for each."""
        waiters: dict[GroupKey, list[int]] = {}
        for h, (key, _, _) in self._waits.items():
            waiters.setdefault(key, []).append(h)
        return sorted((HeldLock(key, h, since, tuple(sorted(waiters.get(key, ()))))
                       for key, (h, since) in self._held.items()),
                      key=lambda row: (row.since, row.key))

    def waiting(self) -> list[Waiting]:
        """The waiting holders, oldest wait first."""
        rows = []
        for h, (key, since, committing) in self._waits.items():
            found = self._held.get(key)
            rows.append(Waiting(h, key, -1 if found is None else found[0], since, committing))
        return sorted(rows, key=lambda row: (row.since, row.holder))
