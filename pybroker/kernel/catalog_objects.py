"""The catalog objects a Database hands out: rows of its routing table (sys.routes), its
services, queues, message types and contracts. Frozen: a change goes through the Database
(or T-SQL), which returns the new row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Route:
    """A row of a routing table (sys.routes)."""

    name: str
    route_id: int
    remote_service_name: str | None
    broker_instance: str | None
    lifetime: datetime | None  # UTC expiry; None never expires
    address: str
    mirror_address: str | None
    is_expired: bool


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    queue: str
    contracts: tuple[str, ...] = ()  # the contracts it accepts as a target


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    status: bool  # ON (True) or OFF
    retention: bool = False
    poison_message_handling: bool = True
    # ACTIVATION (C3, pybroker.core.activation): STATUS, the callable (module.path:function),
    # MAX_QUEUE_READERS and EXECUTE AS (SELF or OWNER); no procedure: no activation
    activation_status: bool = False
    activation_procedure: str | None = None
    max_queue_readers: int = 0
    execute_as: str | None = None


@dataclass(frozen=True, slots=True)
class MessageType:
    name: str
    validation: str  # NONE, EMPTY or WELL_FORMED_XML
    is_system: bool = False


@dataclass(frozen=True, slots=True)
class Contract:
    name: str
    messages: tuple[tuple[str, str], ...]  # (message type, INITIATOR / TARGET / ANY)
    is_system: bool = False
