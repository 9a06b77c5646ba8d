"""One error root for everything pybroker raises: :class:`BrokerError`.

Each subclass also derives from the matching built-in exception where one fits,
so callers may catch either ``BrokerError`` or the familiar Python type.
"""

from __future__ import annotations


class BrokerError(Exception):
    """Root of every error pybroker raises. The message says what was wrong."""


class InvalidArgumentError(BrokerError, ValueError):
    """A value given to the API is malformed: an empty or over-long name, a bad GUID, ..."""


class ReadOnlyQueryError(InvalidArgumentError):
    """A query given to ``Instance.sql()`` is not one read-only query. ``refusal`` says what
    is refused and why, ``hint`` (when there is one) how to change the instance instead, and
    ``caller`` who refused: Python's ``Instance.sql()`` by default; another surface (the
    command line) restates the error in its own words through :meth:`restated`."""

    PYTHON_CALLER = "Instance.sql()"
    PYTHON_HINT = "change the instance through the API or Database.execute()"

    def __init__(self, refusal: str, *, hint: str = "", caller: str = PYTHON_CALLER) -> None:
        super().__init__(f"{caller} {refusal}" + (f"; {hint}" if hint else ""))
        self.refusal = refusal
        self.hint = hint
        self.caller = caller

    def restated(self, caller: str, hint: str) -> ReadOnlyQueryError:
        """The same refusal by ``caller``; ``hint`` replaces this one's if it has one."""
        return ReadOnlyQueryError(self.refusal, hint=hint if self.hint else "", caller=caller)


class NotFoundError(BrokerError, LookupError):
    """A named object (database, queue, service, route) does not exist."""


class AlreadyExistsError(BrokerError):
    """An object of that name already exists where names must be unique."""


class RouteDefinitionError(InvalidArgumentError):
    """A route definition breaks a rule of SPEC R10.2; ``rule`` names the rule broken."""

    def __init__(self, message: str, *, rule: str, error_number: int | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.error_number = error_number


class TsqlSyntaxError(BrokerError):
    """A T-SQL statement given to ``Database.execute()`` is not fully understood."""


class UnsupportedStatementError(TsqlSyntaxError):
    """``Database.execute()`` was given a statement kind pybroker does not run."""


class MasterOnlyError(UnsupportedStatementError):
    """A statement that runs only in the master database (ENDPOINT, CERTIFICATE) was given
    to another one. ``statement`` names it (and where it is), ``reason`` says why it belongs
    to master, and ``hint`` how to run it there, in the words of the caller: Python's
    ``execute()`` by default; another surface (the command line) restates the error with
    its own hint through :meth:`with_hint`."""

    PYTHON_HINT = ("run it with the master database's execute(): "
                   "inst.database('master').execute(...)")

    def __init__(self, statement: str, reason: str, *, hint: str = PYTHON_HINT) -> None:
        super().__init__(f"{statement} runs only in the master database: {reason}; {hint}")
        self.statement = statement
        self.reason = reason
        self.hint = hint

    def with_hint(self, hint: str) -> MasterOnlyError:
        """The same refusal, with ``hint`` in place of this one's."""
        return MasterOnlyError(self.statement, self.reason, hint=hint)


class CatalogInTsqlError(TsqlSyntaxError):
    """A T-SQL SELECT reads a table (``SELECT name FROM sys.routes``): ``execute()``'s SELECT
    reads values, variables and table variables only, and the catalog is read with a query.
    ``found`` says what was found where, ``hint`` how to query the catalog instead, in the
    caller's words: Python's by default; the command line restates the error with
    :meth:`with_hint`."""

    PYTHON_HINT = "query the catalog with Instance.sql() or the DuckDB CLI"

    def __init__(self, found: str, *, hint: str = PYTHON_HINT) -> None:
        super().__init__(f"{found} (SELECT reads values, variables and table variables here, "
                         f"not tables; {hint})")
        self.found = found
        self.hint = hint

    def with_hint(self, hint: str) -> CatalogInTsqlError:
        """The same refusal, with ``hint`` in place of this one's."""
        return CatalogInTsqlError(self.found, hint=hint)


class UnsupportedOptionError(TsqlSyntaxError):
    """A clause or option of a statement ``execute()`` runs is understood but not supported
    (WINDOWS authentication, MESSAGE_FORWARDING = ENABLED, ...); ``option`` names it."""

    def __init__(self, message: str, *, option: str) -> None:
        super().__init__(message)
        self.option = option


class TransactionError(BrokerError):
    """A T-SQL batch misused a transaction: COMMIT or ROLLBACK without BEGIN TRANSACTION, or
    a batch that ended inside one (it is rolled back)."""


class DeadlockVictimError(TransactionError):
    """SQL Server's error 1205: the transaction waited for a conversation group (or the
    instance's write transaction) that a transaction waiting for one of its own holds; it
    was chosen as the deadlock victim and rolled back. Run the transaction again."""

    number = 1205

    def __init__(self, transaction: int) -> None:
        super().__init__(
            f"Transaction (Process ID {transaction}) was deadlocked on lock resources with "
            "another process and has been chosen as the deadlock victim. Rerun the "
            "transaction.")
        self.transaction = transaction


class LockTimeoutError(TransactionError):
    """SQL Server's error 1222: a conversation group stayed locked by another transaction
    for longer than the call may wait; nothing of the call was done."""

    number = 1222


class WriteConflictError(TransactionError):
    """SQL Server's error 3960 in pybroker's own words: a SEND was checked inside the
    transaction against the conversation as last committed, and when the transaction
    committed, another transaction had changed that conversation so that the SEND no
    longer holds (the far side ended it, say); the whole transaction was rolled back.
    Run it again."""

    number = 3960


class StorageError(BrokerError):
    """The instance file cannot be used: not a DuckDB file, locked by another process, ..."""


class InstanceClosedError(BrokerError):
    """The instance was closed (``Instance.close()``, in this thread or another) before or
    while the call ran: nothing of the call was written, and a transaction it was part of
    was rolled back. Open the file again with ``pybroker.connect()`` to go on."""

    def __init__(self, message: str = (
            "the instance was closed (Instance.close()): nothing of this call was written; "
            "open the file again with pybroker.connect() to go on")) -> None:
        super().__init__(message)


class TemplateError(BrokerError):
    """A SQL template failed to render, parse or transpile."""


class ConversationError(BrokerError):
    """A conversation cannot do what was asked: unknown handle, sending after the far side
    ended it or after an error arrived, ..."""


class ConversationStateError(ConversationError):
    """An event is not a transition of the endpoint's state (SPEC C1's table)."""

    def __init__(self, message: str, *, role: str, state: str | None, event: str) -> None:
        super().__init__(message)
        self.role = role
        self.state = state
        self.event = event


class ContractViolationError(ConversationError):
    """The message type may not be sent by this side of the conversation's contract."""


class MessageValidationError(InvalidArgumentError):
    """A message body fails its message type's validation (EMPTY, WELL_FORMED_XML) or is
    larger than the instance's maximum message size."""


class QueueDisabledError(BrokerError):
    """RECEIVE from a queue whose status is OFF (SQL Server error 9617)."""


class InUseError(BrokerError):
    """An object cannot be dropped or changed while another uses it (a message type in a
    contract, a contract bound to a service, a queue bound to a service)."""


class PipelineError(BrokerError):
    """A pipeline job cannot run: a missing or malformed input file, a column of the wrong
    type, an unreachable Spark master, a Spark or DuckDB failure while running a job."""


class WireError(BrokerError):
    """Broker-to-broker communication failed: the endpoint cannot start (port taken,
    started twice), a certificate cannot be read, a peer is not trusted."""


class FrameError(WireError):
    """Bytes from the network are not a valid frame (P1): the only error the frame decoder
    raises, whatever it is fed. The connection that sent them is closed."""


class ServerError(BrokerError):
    """The client server refused or could not serve a client: a wrong token, too many
    clients, a request or transaction open past the server's time-out, bytes that are not
    a client frame (the only error the client frame decoder raises, whatever it is fed)."""


class ServerGoneError(ServerError, ConnectionError):
    """The server a client was connected through stopped (or the connection to it broke);
    connect again when it is back (nothing its open transaction did was committed)."""
