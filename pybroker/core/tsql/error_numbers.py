"""The SQL Server error number, severity and state of an error a T-SQL batch meets: what
ERROR_NUMBER(), ERROR_SEVERITY() and ERROR_STATE() return in a CATCH block and what the
"Msg n, Level l, State s" of a failed procedure says (pybroker/docs/tsql.md has the table).

An error THROW or RAISERROR raised (``TsqlError``) carries its own; any other error of
pybroker is mapped by its class to the number SQL Server gives the same failure, and to
50000 (the number of a user message) where SQL Server has none of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from pybroker.errors import (
    AlreadyExistsError,
    BrokerError,
    ContractViolationError,
    ConversationError,
    ConversationStateError,
    InUseError,
    InvalidArgumentError,
    MessageValidationError,
    NotFoundError,
    QueueDisabledError,
    TransactionError,
)

USER_ERROR = 50000  # RAISERROR with a message text; THROW needs at least this number
SEVERITY = 16  # what SQL Server gives the errors of a statement (and THROW)


class TsqlError(BrokerError):
    """An error a T-SQL batch raised itself (THROW, RAISERROR) or one of SQL Server's errors
    of running T-SQL (a procedure that does not exist, a missing argument, ...), with its
    SQL Server number, severity and state."""

    def __init__(self, message: str, number: int = USER_ERROR, severity: int = SEVERITY,
                 state: int = 1) -> None:
        super().__init__(message)
        self.number = number
        self.severity = severity
        self.state = state


class TsqlValueError(TsqlError, InvalidArgumentError):
    """A value that cannot be what a statement asks (a conversion, an overflow, a divide by
    zero), with SQL Server's number for it: 241, 242, 245, 8114, 8115, 8134, ..."""


# Most derived first: the first class an error is an instance of gives its number.
NUMBERS: tuple[tuple[type[BaseException], int, str], ...] = (
    (ContractViolationError, 8431, "the message type is not part of the contract"),
    (ConversationStateError, 8429, "the endpoint is not in a valid state for the verb"),
    (ConversationError, 8426, "the conversation handle is not found"),
    (MessageValidationError, 9615, "the message body fails its message type's validation"),
    (QueueDisabledError, 9617, "the queue is disabled"),
    (AlreadyExistsError, 2714, "there is already an object of that name"),
    (InUseError, 3729, "the object cannot be dropped while another references it"),
    (NotFoundError, 208, "the object name is not valid (it does not exist)"),
    (TransactionError, 3902, "COMMIT or ROLLBACK has no BEGIN TRANSACTION"),
)


@dataclass(slots=True)
class ErrorInfo:
    """An error being handled: what the ERROR_ functions return about it."""

    number: int
    message: str
    severity: int
    state: int
    line: int | None
    procedure: str | None
    reported: bool = False  # its message already says where it was raised


def classify(exc: BaseException) -> tuple[int, int, int]:
    """(number, severity, state) of ``exc``."""
    if isinstance(exc, TsqlError):
        return exc.number, exc.severity, exc.state
    for kind, number, _ in NUMBERS:
        if isinstance(exc, kind):
            return number, SEVERITY, 1
    return USER_ERROR, SEVERITY, 1
