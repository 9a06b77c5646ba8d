"""What a conversation looks like to the application: ``Conversation`` (its messages are
``pybroker.core.conversation.model.Message``)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from pybroker import arguments
from pybroker.arguments import text_problem
from pybroker.core.routing.definition import MAX_VALUE_LENGTH, check_name
from pybroker.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.core.conversation.endpoint import ConversationEndpoint
    from pybroker.kernel.messaging.engine import Messaging


MAX_DESCRIPTION_LENGTH = 3000  # SQL Server's END CONVERSATION ... DESCRIPTION nvarchar(3000)


class _Kernel(Protocol):
    messaging: Messaging


class _Database(Protocol):
    """What a Conversation needs of its Database (api/database.py, which imports this module):
    the shape only."""

    name: str
    database_id: int

    @property
    def kernel(self) -> _Kernel: ...


class Conversation:
    """This side of a dialog (a conversation endpoint), addressed by its handle.

    The object is a handle: its methods act on the endpoint's current state, so several
    ``Conversation`` objects for one handle behave the same.
    """

    __slots__ = ("_database", "_messaging", "handle")

    def __init__(self, database: _Database, handle: str) -> None:
        self._database = database
        self._messaging = database.kernel.messaging
        self.handle = handle

    def __repr__(self) -> str:
        return f"Conversation(handle={self.handle!r}, database={self._database.name!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Conversation)
            and other.handle == self.handle
            and other._database == self._database
        )

    def __hash__(self) -> int:
        return hash(self.handle)

    # -- the endpoint's columns (sys.conversation_endpoints) -----------------------------

    @property
    def conversation_id(self) -> str:
        return self._endpoint().conversation_id

    @property
    def conversation_group_id(self) -> str:
        return self._endpoint().conversation_group_id

    @property
    def is_initiator(self) -> bool:
        return self._endpoint().is_initiator

    @property
    def state(self) -> str:
        """SO, SI, CO, DI, DO, ER or CD (SPEC C1)."""
        return self._endpoint().state

    @property
    def service_name(self) -> str:
        return self._endpoint().service_name

    @property
    def far_service(self) -> str:
        return self._endpoint().far_service

    @property
    def far_broker_instance(self) -> str | None:
        """The broker identifier of the far side's database, once known (R5: the first
        acknowledgement pins it; a target knows its initiator's from the first message)."""
        return self._endpoint().far_broker_instance

    @property
    def service_contract_name(self) -> str:
        return self._endpoint().service_contract_name

    @property
    def lifetime(self) -> datetime:
        """When the conversation expires (naive UTC)."""
        return self._endpoint().lifetime

    # -- verbs ---------------------------------------------------------------------------

    def send(self, body: bytes | str | None = b"", message_type: str = "DEFAULT") -> int:
        """SEND ON CONVERSATION: returns the message's sequence number (P3.1).

        ``body`` is bytes (or bytearray/memoryview); a ``str`` is sent as its UTF-8 bytes;
        None is an empty body.
        """
        if isinstance(body, str) and (problem := text_problem(body.replace("\0", ""))):
            raise InvalidArgumentError(f"body is not valid text: {problem}")
        check_name("message type", message_type, MAX_VALUE_LENGTH)
        return self._messaging.send(self._database.database_id, self.handle, body,
                                    message_type)

    def end(
        self,
        error: int | None = None,
        description: str | None = None,
        cleanup: bool = False,
    ) -> None:
        """END CONVERSATION [WITH ERROR = error DESCRIPTION = description | WITH CLEANUP]."""
        if error is not None:
            arguments.whole_number(
                "error (an application error code; negative codes are the broker's, C2)",
                error, minimum=1, maximum=arguments.INT32_MAX)
        if description is not None:
            arguments.text("description", description, limit=MAX_DESCRIPTION_LENGTH)
        arguments.flag("cleanup", cleanup)
        self._messaging.end(self._database.database_id, self.handle, error, description,
                            cleanup)

    def begin_timer(self, seconds: float) -> None:
        """BEGIN CONVERSATION TIMER: a DialogTimer message arrives in this side's queue
        after ``seconds``; 0 cancels the timer."""
        self._messaging.begin_timer(self._database.database_id, self.handle, seconds)

    def move_to(self, group_id: str) -> None:
        """MOVE CONVERSATION ... TO group_id: this side of the conversation, with its
        messages in the queue, joins the conversation group ``group_id`` (a UUID string)
        within the current transaction, so a RECEIVE of that group gets them too.

        The group must exist in this database and queue: it is the
        ``conversation_group_id`` of another open conversation whose service uses the same
        queue, as SQL Server requires (a new group begins with ``begin_dialog(...,
        related_conversation_group=...)``)."""
        self._messaging.move_conversation(self._database.database_id, self.handle, group_id)

    def _endpoint(self) -> ConversationEndpoint:
        return self._messaging.endpoint(self.handle, self._database.database_id)
