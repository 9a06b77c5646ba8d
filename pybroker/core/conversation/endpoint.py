"""A conversation endpoint in memory (C1): one row of conversation_endpoints, and the
columns that say whether a unit of work must write it in full (wide_columns)."""

from __future__ import annotations

from typing import Any

from pybroker.core.conversation.states import INITIATOR, TARGET

# -- a conversation endpoint in memory ------------------------------------------------------


class ConversationEndpoint:
    """One row of conversation_endpoints, plus what is cached to send without SQL."""

    __slots__ = (
        "conversation_group_id",
        "conversation_handle",
        "conversation_id",
        "create_date",
        "database_id",
        "dialog_timer",
        "end_dialog_sequence",
        "epoch",
        "error_code",
        "error_description",
        "far_broker_instance",
        "far_handle",
        "far_service",
        "first_unacked_send_sequence",
        "is_initiator",
        "lifetime",
        "permissions",
        "persisted",
        "priority",
        "receive_sequence",
        "receive_sequence_frag",
        "requested_broker_instance",
        "role",
        "route",
        "saved",
        "send_sequence",
        "service_contract_name",
        "service_name",
        "state",
        "transmission_next_attempt",
        "transmission_retry_count",
        "transmission_status",
    )

    def __init__(self, row: tuple[Any, ...], *, persisted: bool) -> None:
        (self.conversation_handle, self.database_id, self.conversation_id,
         self.conversation_group_id, self.is_initiator, self.service_name,
         self.service_contract_name, self.far_service, self.far_broker_instance,
         self.requested_broker_instance, self.state, self.lifetime, self.dialog_timer,
         self.send_sequence, self.first_unacked_send_sequence, self.end_dialog_sequence,
         self.receive_sequence, self.receive_sequence_frag, self.transmission_retry_count,
         self.transmission_next_attempt, self.error_code, self.error_description,
         self.priority, self.create_date, status) = row
        self.transmission_status = status or ""
        self.role = INITIATOR if self.is_initiator else TARGET
        self.persisted = persisted
        self.saved = wide_columns(self) if persisted else None  # as the file holds them
        self.epoch = -1  # the catalog epoch of route/far_handle/permissions
        self.route: Any = None
        self.far_handle: str | None = None
        self.permissions: dict[str, str] | None = None


def wide_columns(ep: ConversationEndpoint) -> tuple[Any, ...]:
    """The columns of update_conversation_endpoints.sql other than the sequence numbers of
    update_endpoint_sequences.sql."""
    return (ep.state, ep.far_broker_instance, ep.dialog_timer, ep.end_dialog_sequence,
            ep.receive_sequence_frag, ep.transmission_retry_count,
            ep.transmission_next_attempt, ep.error_code, ep.error_description)
