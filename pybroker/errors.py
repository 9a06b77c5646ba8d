"""One error root for everything pybroker raises: :class:`BrokerError`.

Each subclass also derives from the matching built-in exception where one fits,
so callers may catch either ``BrokerError`` or the familiar Python type.
"""

from __future__ import annotations


class BrokerError(Exception):
    """Root of every error pybroker raises. The message says what was wrong."""


class InvalidArgumentError(BrokerError, ValueError):
    """A value given to the API is malformed: an empty or over-long name, a bad GUID, ..."""


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


class StorageError(BrokerError):
    """The instance file cannot be used: not a DuckDB file, locked by another process, ..."""


class TemplateError(BrokerError):
    """A SQL template failed to render, parse or transpile."""


class PipelineError(BrokerError):
    """A pipeline job cannot run: a missing or malformed input file, a column of the wrong
    type, an unreachable Spark master, a Spark or DuckDB failure while running a job."""
