"""The types and constants the messaging engine's modules share with each other and with
the API: a received Message, a message on its way out (Outgoing), the validation codes of
message types, the transmission statuses (C4), and a conversation's default lifetime (C1).

It imports nothing of the engine or the API, so any of them can import it: engine.py,
delivery.py and remote.py take their shared names from here instead of from each other,
and the API (api/instance.py, database_objects.py, api/conversation.py) from here instead of
from the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pybroker.core.conversation.priorities import DEFAULT_PRIORITY

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.core.routing.decision import RouteDecision


@dataclass(frozen=True, slots=True)
class Message:
    """One received message, with the columns of SQL Server's RECEIVE.

    ``message_sequence_number`` is the far side's number (P3.1, from 0); messages the broker
    puts in the queue itself (DialogTimer, an Error about this side: lifetime expired, the
    far side unreachable) are unsequenced and carry -1.
    """

    conversation_handle: str
    conversation_group_id: str
    message_sequence_number: int
    message_type_name: str
    message_body: bytes
    service_name: str
    service_contract_name: str
    queuing_order: int
    # the conversation endpoint's priority level (CREATE BROKER PRIORITY; 5 when none
    # matched it: pybroker.core.conversation.priorities), as RECEIVE's priority column
    priority: int = DEFAULT_PRIORITY

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (the encoding ``send()`` gives a ``str`` body)."""
        return self.message_body.decode("utf-8")


Outgoing = tuple[int, str, str, bytes, bool, bool]  # seq, type, validation, body, end, error

# A message type's VALIDATION as the catalog keeps it (C2).
DEFAULT_LIFETIME = 2**31  # seconds (C1)

VALIDATION_CODES = {"NONE": "N", "EMPTY": "E", "WELL_FORMED_XML": "X"}
VALIDATION_NAMES = {code: name for name, code in VALIDATION_CODES.items()}

# C4: why a message has not left, in the manner of SQL Server's texts.
STATUS_NO_ROUTE = (
    "The target service name could not be found. Ensure that the service name is "
    "specified correctly and/or the routing information has been supplied."
)
STATUS_QUEUE_DISABLED = "The destination queue is disabled."
# ALTER DATABASE ... SET DISABLE_BROKER on the sending or the receiving database: messages
# wait in the transmission queue until ENABLE_BROKER, as in SQL Server.
STATUS_BROKER_DISABLED = "Service Broker is disabled in the database."
STATUS_NO_TRANSPORT = (
    "Connection attempt failed with error: 'no broker endpoint is started in this "
    "process; start one with Instance.start_endpoint() from Python, CREATE ENDPOINT ... "
    "FOR SERVICE_BROKER on master, or `pybroker serve FILE` from a shell, and the message "
    "leaves then'."
)
STATUS_PEER_ENDED = "The conversation has been ended by the far side"


class Router(Protocol):
    """How the engine asks where a conversation goes (R1-R4): ``Instance.route``, which
    the instance hands to the engine, so the engine never imports the API."""

    def __call__(self, service_name: str, *, broker_instance: str | None,
                 origin: str) -> RouteDecision: ...
