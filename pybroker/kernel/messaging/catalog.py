"""What conversations read of a database's catalog (message types, contracts, services,
queues); the engine loads it once per catalog change (Messaging.catalog)."""

from __future__ import annotations

from dataclasses import dataclass

from pybroker.core.conversation.priorities import PriorityRule

# -- the catalog, cached per database -----------------------------------------------------


@dataclass(slots=True)
class QueueSettings:
    status: bool
    retention: bool
    poison_message_handling: bool


@dataclass(slots=True)
class DatabaseCatalog:
    """What conversations read of one database's catalog, loaded once per catalog change."""

    database_id: int
    name: str
    broker_instance: str
    message_types: dict[str, str]  # name -> validation code N/E/X
    system_message_types: frozenset[str]
    contracts: dict[str, dict[str, tuple[bool, bool]]]  # -> type -> (initiator, target)
    system_contracts: frozenset[str]
    services: dict[str, str]  # name -> queue
    service_contracts: dict[str, frozenset[str]]
    queues: dict[str, QueueSettings]
    broker_enabled: bool = True  # sys.databases.is_broker_enabled (ALTER DATABASE SET)
    # CREATE BROKER PRIORITY (sys.conversation_priorities): what a new endpoint matches
    priorities: tuple[PriorityRule, ...] = ()
    # HONOR_BROKER_PRIORITY ON: RECEIVE and transmission go by priority
    honor_broker_priority: bool = False
