"""One client's session on the server: each call run on the SAME API objects an embedded
caller uses (Instance, Database, Conversation), after the whitelist (calls.CALLS) allows
it. One path for every operation: a client's SEND is ``Conversation.send``, its RECEIVE
``Database.receive``, its transaction ``Database.transaction()``.

A session belongs to one thread (the server runs each connection on its own): the
engine's unit of work is per thread and holds the conversation groups it acted on until it
ends (C7), and the store from its first change on. So a session's transaction must begin,
run and end on that thread, and ``expire()`` and ``close()`` are called there too; a
client that goes is rolled back there, which frees its groups.

Pipelined calls (protocol PIPELINED: a client's SEND inside its transaction, whose result
it predicted) run in order like the others but are not answered. The first one that fails
dooms the transaction, as SQL Server's XACT_ABORT ON does: it is rolled back at once (its
lock released), the pipelined calls after it are not run, and every later call of the
transaction, its COMMIT included, is answered with that first error, the same class and
message. So nothing of a transaction whose pipelined call failed is ever committed.
"""

from __future__ import annotations

import contextlib
from typing import Any

from pybroker.api.conversation import Conversation
from pybroker.api.database import Database
from pybroker.api.instance import Instance
from pybroker.api.served import calls
from pybroker.api.served.calls import CONVERSATION, DATABASE, INSTANCE, TRANSACTION
from pybroker.api.served.protocol import CALL_METHOD, GET_PROPERTY, Call, Record
from pybroker.errors import BrokerError, InvalidArgumentError, ServerError, StorageError


class _RolledBack(Exception):
    """Thrown into an open transaction to roll it back (the client asked, left, or the
    transaction outlived the server's time-out)."""


class Session:
    def __init__(self, instance: Instance, *, read_only: bool = False) -> None:
        self.instance = instance
        self.read_only = read_only
        self.calls = 0
        self.session_id = next(instance.kernel.session_ids)  # @@SPID of its batches
        self._databases: dict[str, Database] = {}
        self._transactions: list[Any] = []  # the open Database.transaction() contexts
        # after doom() or expire(): the levels the client still has to end, and the error
        # every call until then is answered with
        self._doomed_levels = 0
        self._doomed: BrokerError | None = None

    @property
    def in_transaction(self) -> bool:
        return bool(self._transactions)

    @property
    def doomed(self) -> bool:
        """The transaction was rolled back; the client has not ended all its levels yet."""
        return self._doomed is not None

    def _doomed_error(self) -> BrokerError:
        """The dooming error again: the same class, message and attributes."""
        assert self._doomed is not None
        return calls.rebuild_error(*calls.error_fields(self._doomed))

    # -- calls ---------------------------------------------------------------------------

    def run(self, call: Call) -> Any:
        """The call's result as the protocol carries it; a BrokerError is the call's
        failure (anything else the API raised is turned into one)."""
        self.calls += 1
        target = call.target[0] if call.target and isinstance(call.target[0], str) else ""
        writes = calls.CALLS.get((target, call.kind, call.method))
        if writes is None:
            raise calls.unknown_call(target or "?", call.kind, call.method)
        if call.kind == TRANSACTION:
            return self._transaction(call)
        if self._doomed is not None:
            raise self._doomed_error()
        if writes and self.read_only:
            raise StorageError(
                f"instance file {self.instance.path} is open read-only: reopen it without "
                "read_only=True to change it")
        obj = self._target(target, call.target[1:])
        if obj is self.instance and call.method == "execute":
            obj = self._database("master")  # Instance.execute's, with this session's @@SPID
        try:
            if call.kind == CALL_METHOD:
                value = getattr(obj, call.method)(*call.args, **call.kwargs)
            elif call.kind == GET_PROPERTY:
                value = getattr(obj, call.method)
            else:
                if call.kwargs or len(call.args) != 1:
                    raise InvalidArgumentError(f"setting {call.method} takes one value")
                setattr(obj, call.method, call.args[0])
                value = None
        except TypeError as exc:  # a call the method's signature does not take
            raise InvalidArgumentError(f"{call.method}(): {exc}") from exc
        return calls.to_wire(value, self._handle)

    def run_ahead(self, call: Call) -> None:
        """A pipelined call: run as ``run`` does, answered with nothing. If it fails, or
        gives other than the result the client predicted, the transaction is doomed
        (``doom``); once doomed, pipelined calls are not run."""
        if self._doomed is not None:
            self.calls += 1
            return
        try:
            value = self.run(call)
        except BrokerError as exc:
            self.doom(exc)
            return
        if value != call.expected:  # the client gave its caller a wrong result
            self.doom(ServerError(
                f"{call.method}() gave {value!r:.40} where this client predicted "
                f"{call.expected!r:.40}, so the transaction was rolled back; use the same "
                "pybroker on both sides"))

    def _target(self, kind: str, key: tuple[Any, ...]) -> Any:
        if kind == INSTANCE and not key:
            return self.instance
        if kind == DATABASE and len(key) == 1 and isinstance(key[0], str):
            return self._database(key[0])
        if kind == CONVERSATION and len(key) == 2 and all(isinstance(k, str) for k in key):
            return Conversation(self._database(key[0]), key[1])
        raise InvalidArgumentError(f"a call names a {kind} by {key!r:.80}, which names none")

    def _database(self, name: str) -> Database:
        found = self._databases.get(name)
        if found is None:
            found = self._databases[name] = self.instance.database(name)
            found.session_id = self.session_id
        return found

    def _handle(self, value: Any) -> Record | None:
        """The API objects that travel as handles (calls.to_wire)."""
        if isinstance(value, Database):
            self._databases[value.name] = value
            return Record(calls.DATABASE_RECORD,
                          (value.name, value.database_id, value.broker_instance))
        if isinstance(value, Conversation):
            return Record(calls.CONVERSATION_RECORD, (value._database.name, value.handle))
        return None

    # -- transactions (C3) ---------------------------------------------------------------

    def _transaction(self, call: Call) -> Any:
        if call.method == "sequences":
            return self._sequences(call)
        if self._doomed is not None and call.method != "begin":
            self._doomed_levels -= 1
            error = self._doomed_error()
            if self._doomed_levels <= 0:
                self._doomed, self._doomed_levels = None, 0
            if call.method == "commit":
                raise error
            return None
        if call.method == "begin":
            if self._doomed is not None:
                raise self._doomed_error()
            if self.read_only:
                raise StorageError(
                    f"instance file {self.instance.path} is open read-only: reopen it "
                    "without read_only=True to change it")
            context = self._target(DATABASE, call.target[1:]).transaction()
            context.__enter__()
            self._transactions.append(context)
            return None
        if not self._transactions:
            raise ServerError(f"{call.method}: this client has no open transaction")
        context = self._transactions.pop()
        if call.method == "commit":
            context.__exit__(None, None, None)
        else:
            self._roll_back(context, "the client rolled the transaction back")
        return None

    def _sequences(self, call: Call) -> list[int | None]:
        """The next SEND's sequence number of each conversation named, or None; it takes
        the instance's lock for the transaction, as its first SEND would."""
        if self._doomed is not None:
            raise self._doomed_error()
        if not self._transactions:
            raise ServerError("sequences: this client has no open transaction")
        if (len(call.args) != 1 or call.kwargs or not isinstance(call.args[0], list)
                or not all(isinstance(h, str) for h in call.args[0])):
            raise InvalidArgumentError("sequences takes one list of conversation handles")
        database = self._target(DATABASE, call.target[1:])
        return self.instance.kernel.messaging.next_send_sequences(database.database_id,
                                                            call.args[0])

    def doom(self, error: BrokerError) -> None:
        """Roll the whole transaction back now; ``error`` answers the client's next call
        and the end of each level it still has open (COMMIT raises it, ROLLBACK is fine)."""
        levels = len(self._transactions)
        self.end_transactions(str(error))
        self._doomed_levels = levels
        self._doomed = error

    def expire(self, timeout: float) -> None:
        """The transaction outlived the server's time-out: roll it all back; the client is
        told at its next call, and at the end of each level it still has open."""
        self.doom(ServerError(
            f"the transaction was open longer than the server's time-out of {timeout:g} s "
            "and was rolled back (what it received is back in the queue); keep "
            "transactions shorter, or serve with a longer --client-timeout"))

    def end_transactions(self, why: str) -> None:
        """Roll back every open transaction (the client left, or it expired)."""
        while self._transactions:
            self._roll_back(self._transactions.pop(), why)

    @staticmethod
    def _roll_back(context: Any, why: str) -> None:
        exc = _RolledBack(why)
        with contextlib.suppress(_RolledBack, BrokerError):
            context.__exit__(_RolledBack, exc, None)

    def close(self) -> None:
        self.end_transactions("the client disconnected")
