"""The statements of SQL Server's Service Broker object DDL that ``Database.execute()`` runs
besides route DDL: MESSAGE TYPE, CONTRACT, QUEUE and SERVICE (SPEC C2-C3).

These dataclasses are what the parser (pybroker.core.tsql) returns and what
``Database.execute()`` runs; they say nothing about whether the named objects exist
(that is checked when the statement runs). Names are unquoted and case-preserved: message
type, contract and service names compare exactly, as in SQL Server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# ACTIVATION's MAX_QUEUE_READERS is at most SQL Server's limit (a smallint): the parser
# refuses more, and the queue monitor never starts more.
MAX_QUEUE_READERS = 32767

Validation = Literal["NONE", "EMPTY", "WELL_FORMED_XML"]
SentBy = Literal["INITIATOR", "TARGET", "ANY"]


@dataclass(frozen=True, slots=True)
class CreateMessageType:
    """CREATE MESSAGE TYPE name [AUTHORIZATION owner] [VALIDATION = ...]."""

    name: str
    validation: Validation = "NONE"


@dataclass(frozen=True, slots=True)
class AlterMessageType:
    """ALTER MESSAGE TYPE name VALIDATION = ..."""

    name: str
    validation: Validation


@dataclass(frozen=True, slots=True)
class DropMessageType:
    name: str


@dataclass(frozen=True, slots=True)
class CreateContract:
    """CREATE CONTRACT name [AUTHORIZATION owner] (type SENT BY who [, ...]).

    ``messages`` holds (message type name, sent by) in the order written; [DEFAULT] is the
    message type named 'DEFAULT'. SQL Server has no ALTER CONTRACT.
    """

    name: str
    messages: tuple[tuple[str, SentBy], ...]


@dataclass(frozen=True, slots=True)
class DropContract:
    name: str


@dataclass(frozen=True, slots=True)
class CreateQueue:
    """CREATE QUEUE name [WITH STATUS = ON|OFF, RETENTION = ON|OFF,
    POISON_MESSAGE_HANDLING (STATUS = ON|OFF), ACTIVATION (...)]; SQL Server's defaults."""

    name: str
    status: bool = True
    retention: bool = False
    poison_message_handling: bool = True
    # ACTIVATION (...): None where not given (no activation, or Database.create_queue's
    # defaults for what goes with PROCEDURE_NAME)
    activation_procedure: str | None = None
    activation_status: bool | None = None
    max_queue_readers: int | None = None
    execute_as: str | None = None


@dataclass(frozen=True, slots=True)
class AlterQueue:
    """ALTER QUEUE name WITH ...: None leaves a setting as it is; ``drop_activation`` is
    ACTIVATION (DROP)."""

    name: str
    status: bool | None = None
    retention: bool | None = None
    poison_message_handling: bool | None = None
    activation_procedure: str | None = None
    activation_status: bool | None = None
    max_queue_readers: int | None = None
    execute_as: str | None = None
    drop_activation: bool = False


@dataclass(frozen=True, slots=True)
class DropQueue:
    name: str


@dataclass(frozen=True, slots=True)
class CreateService:
    """CREATE SERVICE name [AUTHORIZATION owner] ON QUEUE queue [(contract [, ...])].

    No contracts: the service can only initiate conversations, as in SQL Server.
    """

    name: str
    queue: str
    contracts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AlterService:
    """ALTER SERVICE name [ON QUEUE queue] [(ADD CONTRACT c | DROP CONTRACT c [, ...])]."""

    name: str
    queue: str | None = None
    add_contracts: tuple[str, ...] = ()
    drop_contracts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DropService:
    name: str


ObjectStatement = (
    CreateMessageType | AlterMessageType | DropMessageType
    | CreateContract | DropContract
    | CreateQueue | AlterQueue | DropQueue
    | CreateService | AlterService | DropService
)
