"""The two databases every messaging bench sends between: BenchInitiator's InitiatorService
to BenchTarget's TargetService (contract DEFAULT), each on its own queue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.api.database import Database
    from pybroker.api.instance import Instance


def initiator_and_target(inst: Instance, queue: str = "TargetQueue",
                         **queue_options: Any) -> tuple[Database, Database]:
    """Create both databases; ``queue_options`` go to the target's queue (activation, say)."""
    initiator = inst.create_database("BenchInitiator")
    target = inst.create_database("BenchTarget")
    initiator.create_queue("InitiatorQueue")
    initiator.create_service("InitiatorService", queue="InitiatorQueue")
    target.create_queue(queue, **queue_options)
    target.create_service("TargetService", queue=queue, contracts=["DEFAULT"])
    return initiator, target
