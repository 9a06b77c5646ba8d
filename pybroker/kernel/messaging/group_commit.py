"""Group commit (SPEC C7): a commit that holds WRITER writes the commits waiting for it
with its own, in one DuckDB transaction.

Transactions run side by side (group_locking.py) until they commit; a commit then needs
WRITER, the one DuckDB connection's write transaction, for its short flush. Most of that
flush is the same whatever it writes: each set-based statement costs about as much for
800 rows as for 100, and so does a COMMIT, so eight clients committing one after another
spent most of their time on what one commit of all their rows spends once. So the commit
that takes WRITER (the carrier) carries the commits that wait for it meanwhile (at most
GROUP_LIMIT of them, in the order they began to wait): it applies what each kept (its
SENDs, dialogs, ENDs, timers, moves, as that transaction, which holds WRITER while its
verbs are applied, so a wait of theirs is in the lock table's graph as its own), writes
the rows of all of them as one set of statements (unit_of_work.write_rows), commits once,
and ends each. Each carried transaction's thread waits meanwhile and then does what
follows its commit (Messaging.after_commit) or rollback itself.

What a failure does:
- A carried transaction whose verbs fail when applied (WriteConflictError, say) rolls
  back alone, as it would have alone, and the others go on. Nothing of it was written
  yet; what it changed in memory is undone (its endpoints read again from the file), which
  is safe because a commit carries only transactions whose endpoints (those its verbs act
  on, and their far sides) no other of the group touches (``_select``). Should one still
  have touched an endpoint another of the group touched, the whole group rolls back, each
  with WriteConflictError ("run the transaction again"): nothing is half-written.
- A carried transaction that has to write into the file while its verbs are applied (a
  large body staged, a route request) is the last one applied: those after it wait for
  WRITER again (given back), so its failure rolls back its own writes alone.
- A commit that holds the DuckDB transaction open already (it wrote in the middle of its
  transaction, a catalog write among them) carries none.
- Writing the group's rows or its COMMIT failing (the file's fault: disk, memory, close's
  deadline) rolls back every transaction of the group, each told the same error.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from typing import TYPE_CHECKING, Any, Protocol

from pybroker.errors import BrokerError, WriteConflictError
from pybroker.kernel.messaging.unit_of_work import write_rows

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.messaging.group_locking import GroupLocking
    from pybroker.kernel.messaging.unit_of_work import UnitOfWork
    from pybroker.storage.store import Store

GROUP_LIMIT = 16  # transactions one commit carries at most


class _Engine(Protocol):
    """What the group commit needs of the messaging engine (engine.py's Messaging)."""

    store: Store
    group_locks: GroupLocking
    read_ahead_lock: threading.RLock
    writer: UnitOfWork | None

    def acting_as(self, uow: UnitOfWork) -> contextlib.AbstractContextManager[None]: ...

    def after_rollback(self, uow: UnitOfWork) -> None: ...


class _GivenBack:
    """The outcome of a carried transaction its carrier did not apply: it waits for WRITER
    again."""


GIVEN_BACK = _GivenBack()


class GroupCommit:
    """The commits of one engine, each carrying those that wait for it."""

    def __init__(self, messaging: _Engine) -> None:
        self.m = messaging
        # the transactions of the group being committed now, applied and not yet ended:
        # their endpoints are changed in place but not committed (written_in_place)
        self.pending: tuple[UnitOfWork, ...] = ()

    def written_in_place(self, handle: str) -> bool:
        """Whether a commit in progress changed the endpoint ``handle`` in place (so a
        SEND kept now must not read it as last committed)."""
        writer = self.m.writer
        if writer is not None and handle in writer.touched:
            return True
        return any(handle in u.touched for u in self.pending)

    # -- the carried side -------------------------------------------------------------

    def wait_carried(self, uow: UnitOfWork) -> bool:
        """``uow`` was carried: wait until its carrier ends it. True: committed; False:
        given back (it waits for WRITER again); a rollback raises what caused it, once
        after_rollback has run on this thread."""
        end = uow.carried_end
        assert end is not None
        end.wait()  # the carrier ends every transaction it carries, whatever happens
        outcome = uow.carried_outcome
        uow.carried_end = None
        uow.carried_outcome = None
        if outcome is GIVEN_BACK:
            uow.carried = False
            return False
        if isinstance(outcome, BaseException):
            self.m.after_rollback(uow)
            raise outcome
        return True

    # -- the carrier's side -----------------------------------------------------------

    def commit(self, leader: UnitOfWork) -> None:
        """Commit ``leader`` (which holds WRITER when it has anything to write), with the
        commits it carries; raises what rolled ``leader`` back."""
        members = [leader]
        carried: list[UnitOfWork] = []
        try:
            if leader.doomed is not None:
                raise leader.doomed
            if leader.kept:
                leader.activate()  # applies them
            if leader.locked and not leader.holds_transaction and not leader.catalog_written:
                carried = self._carry(leader)
                self._apply_carried(members, carried)
            holder = next((u for u in members if u.holds_transaction), leader)
            writing = [u for u in members if u.has_rows]
            if writing:
                holder.ensure_tx()
                write_rows(self.m.store, writing)
            # one lock with the reads of the queues (receive.py): a read sees this commit
            # and what it delivered whole, or neither
            with self.m.read_ahead_lock:
                holder.end_transaction()
                for u in members:
                    u.settle_read_ahead()
        except BaseException as exc:
            failure = exc if isinstance(exc, BrokerError) else BrokerError(
                f"the change was not made: {exc}")
            for u in reversed(members):
                with contextlib.suppress(BaseException):
                    u.undo(exc)
            self._end_all(members, carried, failure)
            leader.release()
            self.m.after_rollback(leader)
            if failure is exc:
                raise
            raise failure from exc
        self._end_all(members, carried, None)
        leader.release()

    def _end_all(self, members: list[UnitOfWork], carried: list[UnitOfWork],
                 outcome: BaseException | None) -> None:
        """Every carried transaction not yet ended ends: those of ``members`` with
        ``outcome`` (None: committed), the rest given back."""
        self.pending = ()
        applied = {id(u) for u in members}
        for u in carried:
            end = u.carried_end
            if end is not None and not end.is_set():
                self._end(u, outcome if id(u) in applied else GIVEN_BACK)

    def _carry(self, leader: UnitOfWork) -> list[UnitOfWork]:
        """The commits waiting for WRITER that ``leader`` carries (_select)."""
        busy = set(leader.touched) | leader.footprint()

        def select(waiting: list[Any]) -> list[Any]:
            return _select(waiting, busy)

        return self.m.group_locks.carry(leader.transaction_id, select)

    def _apply_carried(self, members: list[UnitOfWork], carried: list[UnitOfWork]) -> None:
        """Apply each carried transaction's kept verbs, as it; those applied join
        ``members``. After one that wrote into the file, the rest are given back (by
        the caller, which ends every carried one it did not apply so)."""
        leader = members[0]
        locks = self.m.group_locks
        touched = set(leader.touched)
        for u in carried:
            if any(m.holds_transaction for m in members):
                return
            failed: BaseException | None = None
            locks.hand_writer(u.transaction_id)
            try:
                with self.m.acting_as(u):
                    u.apply_carried()
            except BaseException as exc:
                failed = exc
            finally:
                self.m.writer = leader
                locks.hand_writer(leader.transaction_id)
            if failed is None:
                members.append(u)
                touched |= u.touched
                self.pending = tuple(members[1:])
                continue
            if u.touched & touched:  # undoing it alone would undo another's change
                members.append(u)
                raise WriteConflictError(
                    "the transaction was rolled back: it was committed together with "
                    "another transaction on the same conversations, whose commit "
                    f"failed ({failed}); run the transaction again") from failed
            with contextlib.suppress(BaseException):
                u.undo(failed)
            self._end(u, failed if isinstance(failed, BrokerError) else BrokerError(
                f"the change was not made: {failed}"))

    def _end(self, uow: UnitOfWork, outcome: BaseException | _GivenBack | None) -> None:
        """A carried transaction ends (None: committed) or is given back; its thread goes on,
        raising an error of its own (a copy of ``outcome``) when it rolled back."""
        if outcome is not GIVEN_BACK:
            uow.release()
        if isinstance(outcome, BaseException):
            outcome = _own(outcome)
        uow.carried_outcome = outcome
        end = uow.carried_end
        assert end is not None
        end.set()


def _own(exc: BaseException) -> BaseException:
    """``exc`` for another thread to raise: a copy caused by it (one exception raised by
    two threads at once would mix their tracebacks), or itself if it cannot be copied."""
    try:
        own = copy.copy(exc)
    except Exception:
        return exc
    if type(own) is not type(exc) or own.args != exc.args:
        return exc
    own.__cause__ = exc
    own.__traceback__ = None
    return own


def _select(waiting: list[Any], busy: set[str]) -> list[Any]:
    """Of the commits ``waiting`` (in the order they began to wait), those a carrier takes:
    at most GROUP_LIMIT, each acting on no endpoint (its footprint) that the carrier or
    another taken one acts on; ``busy`` grows by what each takes."""
    chosen = []
    for uow in waiting:
        if len(chosen) >= GROUP_LIMIT:
            break
        if uow.doomed is not None:
            continue
        footprint = uow.footprint()
        if footprint & busy:
            continue
        busy |= footprint
        uow.carried_end = threading.Event()
        uow.carried = True  # here, before the carrier may end it: its own thread may not
        chosen.append(uow)  # have seen its acquire return yet
    return chosen
