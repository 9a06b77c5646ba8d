"""END CONVERSATION (C2, C4), conversation timers (C1), and what DROP SERVICE does to its
conversations (C2). The messages they send go the way of any other (Delivery.dispatch,
Delivery.bounce)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from pybroker.core.conversation.model import DEFAULT_LIFETIME, Outgoing
from pybroker.core.conversation.states import transition
from pybroker.core.conversation.system_messages import (
    END_DIALOG,
    ERROR,
    SERVICE_DROPPED,
    SERVICE_DROPPED_TEXT,
    error_body,
)
from pybroker.errors import ConversationStateError, InvalidArgumentError
from pybroker.kernel.messaging import transmission_pieces
from pybroker.kernel.messaging.delivery import Delivery
from pybroker.kernel.messaging.remote import RemoteDelivery

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.core.conversation.endpoint import ConversationEndpoint
    from pybroker.kernel.messaging.endpoint_cache import EndpointCache
    from pybroker.kernel.messaging.unit_of_work import UnitOfWork


class _Engine(Protocol):
    """What END CONVERSATION needs of the messaging engine (engine.py's Messaging)."""

    endpoints: EndpointCache
    remote: RemoteDelivery

    def unit_of_work(self) -> AbstractContextManager[UnitOfWork]: ...

    def endpoint(self, handle: str, database_id: int | None = None) -> ConversationEndpoint: ...

    def now(self) -> datetime: ...

    def note_deadline(self, uow: UnitOfWork, when: datetime | None) -> None: ...

    def keep_verb(self, uow: UnitOfWork, database_id: int, handle: str, event: str | None,
                  verb: Callable[[], None]) -> bool: ...


class EndConversation:
    """END CONVERSATION, BEGIN CONVERSATION TIMER and DROP SERVICE's endings of one
    instance's engine; what they send goes through ``delivery``."""

    def __init__(self, messaging: _Engine, delivery: Delivery) -> None:
        self._m = messaging
        self._delivery = delivery

    def end(
        self,
        database_id: int,
        handle: str,
        error: int | None,
        description: str | None,
        cleanup: bool,
    ) -> None:
        if not isinstance(cleanup, bool):
            raise InvalidArgumentError(f"cleanup must be True or False, not {cleanup!r}")
        if cleanup and (error is not None or description is not None):
            raise InvalidArgumentError(
                "END CONVERSATION takes WITH ERROR or WITH CLEANUP, not both")
        if error is not None:
            if isinstance(error, bool) or not isinstance(error, int) or error <= 0:
                raise InvalidArgumentError(
                    f"an application error code is a positive whole number (negative codes "
                    f"are the broker's, C2): {error!r}")
            if not isinstance(description, str) or not description:
                raise InvalidArgumentError(
                    "END CONVERSATION WITH ERROR needs a description (a non-empty string)")
        elif description is not None:
            raise InvalidArgumentError("a description goes with an error code")
        with self._m.unit_of_work() as uow:
            event = "cleanup" if cleanup else "end_with_error" if error is not None else "end"
            if not uow.locked and self._m.keep_verb(
                    uow, database_id, handle, event, functools.partial(
                        self.end, database_id, handle, error, description, cleanup)):
                return  # made at commit, as the writer (Messaging.keep_verb)
            uow.activate()
            ep = self._m.endpoint(handle, database_id)
            uow.lock_group(database_id, ep.conversation_group_id)  # C7
            if cleanup:
                transition(ep.role, ep.state, "cleanup")
                self._cleanup(uow, ep)
                return
            t = transition(ep.role, ep.state, event)
            if ep.persisted:  # END removes the endpoint's messages from its queue
                uow.queue_rows = [r for r in uow.queue_rows if r[6] != ep.conversation_handle]
                uow.forget_read_ahead()
                self._delete_endpoint_messages(uow, ep.conversation_handle)
            if error is not None:
                self._delivery.drop_transmissions(uow, ep)  # C4: an error drops what waits
                ep.error_code, ep.error_description = error, description
            ep.state = t.state
            uow.touch(ep)
            if t.notify:
                seq = ep.send_sequence
                ep.send_sequence = seq + 1
                ep.end_dialog_sequence = seq
                if error is None:
                    message: Outgoing = (seq, END_DIALOG, "E", b"", True, False)
                else:
                    message = (seq, ERROR, "X", error_body(error, description or ""), False,
                               True)
                self._delivery.dispatch(uow, ep, [message])

    def _delete_endpoint_messages(self, uow: UnitOfWork, handle: str) -> None:
        """END: the endpoint's messages leave its queue, and any fragments it holds (of
        messages being reassembled or kept as their fragments, P4.4) leave with them."""
        uow.sql("conversation/delete_endpoint_messages.sql", {"conversation_handle": handle})
        if self._m.remote.fragments_kept:
            uow.delete_pieces("wire/delete_endpoint_fragments.sql",
                              {"conversation_handle": handle})
            self._m.remote.drop_fragments(handle)

    def _cleanup(self, uow: UnitOfWork, ep: ConversationEndpoint) -> None:
        """WITH CLEANUP: this side goes, with its queued and waiting messages (C4)."""
        handle = ep.conversation_handle
        uow.queue_rows = [r for r in uow.queue_rows if r[6] != handle]
        uow.forget_read_ahead()
        uow.tx_rows = [r for r in uow.tx_rows if r[1] != handle]
        self._m.remote.forget(ep)
        uow.new.pop(handle, None)
        uow.dirty.pop(handle, None)
        params = {"conversation_handle": handle}
        if ep.persisted:
            self._delete_endpoint_messages(uow, handle)
            transmission_pieces.delete_transmissions_of(uow, handle)
            uow.sql("conversation/delete_conversation_endpoint.sql", params)
        self._m.endpoints.pop(handle, None)
        uow.touched.add(handle)
        ep.state = "CD"

    def begin_timer(self, database_id: int, handle: str, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (
            0 <= seconds <= DEFAULT_LIFETIME
        ):
            raise InvalidArgumentError(
                f"a conversation timer takes 0 (cancel) to {DEFAULT_LIFETIME} seconds: "
                f"{seconds!r}")
        # the timer runs from now, whenever the transaction commits
        when = None if seconds == 0 else self._m.now() + timedelta(seconds=seconds)
        with self._m.unit_of_work() as uow:
            if not uow.locked and self._m.keep_verb(
                    uow, database_id, handle, None,
                    functools.partial(self._set_timer, database_id, handle, when)):
                return  # set at commit, as the writer (Messaging.keep_verb)
            self._set_timer(database_id, handle, when)

    def _set_timer(self, database_id: int, handle: str, when: datetime | None) -> None:
        with self._m.unit_of_work() as uow:
            uow.activate()
            ep = self._m.endpoint(handle, database_id)
            uow.lock_group(database_id, ep.conversation_group_id)  # C7
            if ep.state == "CD":
                raise ConversationStateError(
                    "cannot begin a timer on a closed conversation (state CD)",
                    role=ep.role, state=ep.state, event="begin_timer")
            ep.dialog_timer = when
            uow.touch(ep)
            self._m.note_deadline(uow, ep.dialog_timer)

    # -- DROP SERVICE --------------------------------------------------------------------

    def end_service_conversations(self, database_id: int, service: str) -> None:
        """DROP SERVICE: its endpoints go (as WITH CLEANUP), and a far side in this instance
        gets error -8490 (C2)."""
        with self._m.unit_of_work() as uow:
            uow.activate()
            rows = uow.sql("instance/select_service_endpoints.sql", {
                "database_id": database_id, "service_name": service})
            for handle, conversation_id, is_initiator in rows:
                ep = self._m.endpoint(handle)
                partners = uow.sql("conversation/select_conversation_partner.sql", {
                    "conversation_id": conversation_id, "is_initiator": not is_initiator})
                self._cleanup(uow, ep)
                for (partner,) in partners:
                    far = self._m.endpoint(partner)
                    if far.state not in ("CD", "ER", "DO"):
                        self._delivery.bounce(uow, far, SERVICE_DROPPED, SERVICE_DROPPED_TEXT)

