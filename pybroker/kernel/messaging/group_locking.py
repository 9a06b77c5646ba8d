"""The conversation group locks of one instance (SPEC C7): the lock table of
core/conversation/group_locks.py, with the waiting its callers do.

Every unit of work is a transaction with a number (``begin``); each verb locks the group
it acts on (``acquire``, waiting while another transaction holds it) and the unit of work
lets all of them go when it ends (``release_all``). A wait that closes a cycle ends one
transaction of the cycle with DeadlockVictimError (1205); a wait that outlasts its
deadline ends with LockTimeoutError (1222). A verb with no time-out of its own (SEND, END
CONVERSATION, a RECEIVE ... WHERE without WAITFOR: SQL Server waits for ever there) waits
at most LOCK_WAIT_LIMIT seconds, as long as a served client's call may take by default
(pybroker serve --client-timeout), so one held transaction cannot hang another for good.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pybroker.core.conversation.group_locks import (
    WRITER,
    GroupKey,
    GroupLocks,
    HeldLock,
    Waiting,
)
from pybroker.errors import DeadlockVictimError, InstanceClosedError, LockTimeoutError
from pybroker.timestamps import to_utc_datetime

LOCK_WAIT_LIMIT = 60.0  # seconds; see the module's docstring
LOOK_EVERY = 0.05  # seconds: a waiter looks at the instance's close at least this often


@dataclass(frozen=True)
class Transaction:
    """Who a transaction is, for the DMVs: its number, its thread, when it began."""

    transaction_id: int
    thread: str
    begun: float  # epoch seconds


class GroupLocking:
    """The lock table of one instance and its waiters. ``clock``: epoch seconds (the
    instance's, for the DMVs' times); ``closing``: whether the instance is closing (a
    waiting verb then gives up with InstanceClosedError; a waiting commit goes on until
    cut_off)."""

    def __init__(self, clock: Callable[[], float], closing: Callable[[], bool]) -> None:
        self._clock = clock
        self._closing = closing
        self._table = GroupLocks()
        self._changed = threading.Condition(threading.Lock())
        self._numbers = itertools.count(1)
        self._transactions: dict[int, Transaction] = {}
        self._cut_off = False  # close's deadline passed: every waiter gives up (cut_off)
        # commits waiting for WRITER that its holder may carry (carry), by number; and
        # those it carried, whose acquire has not yet returned False
        self._carriable: dict[int, object] = {}
        self._carried: set[int] = set()

    def begin(self) -> int:
        """A new transaction's number (larger than every earlier one's)."""
        number = next(self._numbers)
        with self._changed:
            self._transactions[number] = Transaction(
                number, threading.current_thread().name, self._clock())
        return number

    def try_acquire(self, holder: int, key: GroupKey) -> bool:
        with self._changed:
            return self._table.try_acquire(holder, key, self._clock())

    def acquire(self, holder: int, key: GroupKey, deadline: float | None = None, *,
                committing: bool = False, carriable: object | None = None) -> bool:
        """Take ``key`` for ``holder``, waiting until ``deadline`` (time.monotonic();
        None: LOCK_WAIT_LIMIT from now) while another transaction holds it. With
        ``carriable`` (a commit waiting for WRITER: its unit of work), the holder of WRITER
        may carry it meanwhile (``carry``): then this returns False at once, WRITER not
        taken, and the carrier writes and ends that transaction; else True."""
        if deadline is None:
            deadline = time.monotonic() + LOCK_WAIT_LIMIT
        with self._changed:
            try:
                return self._acquire(holder, key, deadline, committing, carriable)
            finally:
                self._carriable.pop(holder, None)

    def _acquire(self, holder: int, key: GroupKey, deadline: float, committing: bool,
                 carriable: object | None) -> bool:
        table = self._table
        while True:
            if holder in self._carried:
                self._carried.discard(holder)
                return False
            if table.is_victim(holder):
                table.stop_waiting(holder)
                raise DeadlockVictimError(holder)
            if table.try_acquire(holder, key, self._clock()):
                table.stop_waiting(holder)
                return True
            if carriable is not None:
                self._carriable[holder] = carriable
            victim = table.wait(holder, key, self._clock(), committing=committing)
            if victim == holder:
                raise DeadlockVictimError(holder)
            if victim is not None:
                self._changed.notify_all()  # the victim's waiter gives up
            remaining = deadline - time.monotonic()
            # closing: a verb that waits gives up, a commit waits on (close() lets the
            # transactions in flight commit) until close's deadline cuts them off
            if remaining <= 0 or self._gives_up(committing):
                table.stop_waiting(holder)
                if self._gives_up(committing):
                    raise InstanceClosedError()
                raise LockTimeoutError(_timeout_text(key))
            self._changed.wait(min(remaining, LOOK_EVERY))

    def carry(self, holder: int, select: Callable[[list[Any]], list[Any]]) -> list[Any]:
        """``holder``, which holds WRITER, carries commits that wait for it: ``select`` is
        given their units of work (those passed to ``acquire`` as ``carriable``), in the
        order they began to wait, and returns those it takes. They wait no more (their
        ``acquire`` returns False) and hold their groups until the carrier ends them."""
        with self._changed:
            if not self._table.holds(holder, WRITER):
                return []
            chosen = select(list(self._carriable.values())) if self._carriable else []
            if chosen:
                taken = {id(c) for c in chosen}
                for number, unit in list(self._carriable.items()):
                    if id(unit) in taken:
                        del self._carriable[number]
                        self._carried.add(number)
                        self._table.stop_waiting(number)
                self._changed.notify_all()
            return chosen

    def hand_writer(self, to: int) -> None:
        """WRITER's holder hands it to ``to`` (and back): while a carrier applies a carried
        transaction's verbs, that transaction is the writer (a wait of it for a group goes
        through the graph as its own)."""
        with self._changed:
            self._table.hand_over(WRITER, to)

    def holds(self, holder: int, key: GroupKey) -> bool:
        with self._changed:
            return self._table.holds(holder, key)

    def held_by_others(self, holder: int, database_id: int) -> set[str]:
        """The groups of the database that transactions other than ``holder`` hold."""
        with self._changed:
            return {g for db, g in self._table.locked_by_others(holder) if db == database_id}

    def release(self, holder: int, key: GroupKey) -> None:
        """``holder`` lets ``key`` go and keeps the rest; its waiters look again."""
        with self._changed:
            if self._table.release(holder, key):
                self._changed.notify_all()

    def release_all(self, holder: int) -> bool:
        """``holder`` ended: its locks go, its waiters look again. Whether it held any."""
        with self._changed:
            released = self._table.release_all(holder)
            self._transactions.pop(holder, None)
            self._changed.notify_all()  # its waiters, and a close() waiting for it to end
            return bool(released)

    def _gives_up(self, committing: bool) -> bool:
        return self._cut_off or (not committing and self._closing())

    def cut_off(self) -> None:
        """Instance.close() waited as long as it may: every waiter, a commit's too, gives
        up now with InstanceClosedError."""
        with self._changed:
            self._cut_off = True
            self._changed.notify_all()

    def wait_ended(self, deadline: float, but: int | None = None) -> bool:
        """Wait until every transaction other than ``but`` has ended (committed or rolled
        back), until ``deadline`` (time.monotonic()) at most: Instance.close() lets the
        transactions in flight finish. Whether they all did."""
        with self._changed:
            while any(number != but for number in self._transactions):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, LOOK_EVERY))
            return True

    def holders(self) -> list[tuple[HeldLock, Transaction | None]]:
        """sys.dm_broker_conversation_group_locks' rows (WRITER among them)."""
        with self._changed:
            return [(row, self._transactions.get(row.holder)) for row in self._table.holders()]

    def waiting(self) -> list[tuple[Waiting, Transaction | None]]:
        """The transactions waiting for a lock (sys.dm_broker_waits' rows of them)."""
        with self._changed:
            return [(row, self._transactions.get(row.holder))
                    for row in self._table.waiting()]


    def live_rows(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The rows of sys.dm_broker_conversation_group_locks and sys.dm_broker_waits
        (kernel/live_views.py), times as naive UTC."""
        locks = [(row.key[0], row.key[1], row.holder, None if who is None else who.thread,
                  to_utc_datetime(row.since), len(row.waiters))
                 for row, who in self.holders()]
        waits = [(row.holder, None if who is None else who.thread, row.key[0], row.key[1],
                  row.blocked_by, to_utc_datetime(row.since), row.committing)
                 for row, who in self.waiting()]
        return locks, waits


def _timeout_text(key: GroupKey) -> str:
    if key == WRITER:
        return ("Lock request time out period exceeded: another transaction kept the "
                "instance's write transaction; nothing of this call was done")
    return (f"Lock request time out period exceeded: conversation group {key[1]} stayed "
            "locked by another transaction (until it commits or rolls back); nothing of "
            "this call was done")
