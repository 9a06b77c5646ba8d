"""Conversation endpoint states and their transitions (SPEC C1), in one table.

Sans-I/O in the manner of h11: no storage, no clock. ``transition(role, state, event)``
answers the next state and whether a message arriving with the event goes into the queue;
any (role, state, event) not in the table is a protocol error (``ConversationStateError``).

States (C1): SO started outbound, SI started inbound, CO conversing, DI disconnected
inbound, DO disconnected outbound, ER error, CD closed. ``None`` is "no endpoint yet".

Events:
- ``begin``: BEGIN DIALOG creates the initiator's endpoint.
- ``send``: the application sends a user message.
- ``end`` / ``end_with_error``: END CONVERSATION [WITH ERROR]; the endpoint sends an
  EndDialog / Error message to the far side (nothing when the far side never heard of the
  conversation, SO, or has already ended it, DI).
- ``cleanup``: END CONVERSATION WITH CLEANUP; this side is removed, the far side not told.
- ``receive_fragment``: part of a first message arrived (P4; the wire protocol's case).
- ``receive_message`` / ``receive_end_dialog`` / ``receive_error``: a sequenced message
  from the far side arrived at this endpoint (P3.1).
- ``acknowledged_end``: the far side acknowledged this side's EndDialog/Error (P5); local
  delivery acknowledges at enqueue.
- ``lifetime_expired``: the conversation's lifetime passed (C2: error -8489).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pybroker.errors import ConversationStateError

Role = Literal["initiator", "target"]
State = Literal["SO", "SI", "CO", "DI", "DO", "ER", "CD"]

INITIATOR: Role = "initiator"
TARGET: Role = "target"

STATE_DESC: dict[str, str] = {
    "SO": "STARTED_OUTBOUND",
    "SI": "STARTED_INBOUND",
    "CO": "CONVERSING",
    "DI": "DISCONNECTED_INBOUND",
    "DO": "DISCONNECTED_OUTBOUND",
    "ER": "ERROR",
    "CD": "CLOSED",
}

EVENTS = (
    "begin", "send", "end", "end_with_error", "cleanup", "receive_fragment",
    "receive_message", "receive_end_dialog", "receive_error", "acknowledged_end",
    "lifetime_expired",
)


@dataclass(frozen=True, slots=True)
class Transition:
    """The next state; ``enqueue``: an arriving message goes into the queue (else it is
    discarded, the endpoint having ended); ``notify``: END sends a message to the far side."""

    state: State
    enqueue: bool = False
    notify: bool = False


_BOTH: tuple[Role, ...] = (INITIATOR, TARGET)

# (state, event) -> Transition, for both roles, then the role-specific births.
_COMMON: dict[tuple[State, str], Transition] = {
    # SO: begun, nothing sent; the far side does not know the conversation yet.
    ("SO", "send"): Transition("CO"),
    ("SO", "end"): Transition("CD"),
    ("SO", "end_with_error"): Transition("CD"),
    ("SO", "cleanup"): Transition("CD"),
    ("SO", "lifetime_expired"): Transition("ER"),
    # SI: the first message is still incomplete (only over the wire).
    ("SI", "receive_fragment"): Transition("SI"),
    ("SI", "receive_message"): Transition("CO", enqueue=True),
    ("SI", "cleanup"): Transition("CD"),
    ("SI", "lifetime_expired"): Transition("ER"),
    # CO: both sides may send.
    ("CO", "send"): Transition("CO"),
    ("CO", "receive_message"): Transition("CO", enqueue=True),
    ("CO", "receive_end_dialog"): Transition("DI", enqueue=True),
    ("CO", "receive_error"): Transition("ER", enqueue=True),
    ("CO", "end"): Transition("DO", notify=True),
    ("CO", "end_with_error"): Transition("DO", notify=True),
    ("CO", "cleanup"): Transition("CD"),
    ("CO", "lifetime_expired"): Transition("ER"),
    # DI: the far side ended; this side may still receive what is queued, not send.
    ("DI", "end"): Transition("CD"),
    ("DI", "end_with_error"): Transition("CD"),
    ("DI", "cleanup"): Transition("CD"),
    ("DI", "lifetime_expired"): Transition("ER"),
    # DO: this side ended; waiting for the far side to acknowledge. What the far side sent
    # before it learnt of the end is discarded.
    ("DO", "acknowledged_end"): Transition("CD"),
    ("DO", "receive_message"): Transition("DO"),
    ("DO", "receive_end_dialog"): Transition("CD"),
    ("DO", "receive_error"): Transition("CD"),
    ("DO", "cleanup"): Transition("CD"),
    ("DO", "lifetime_expired"): Transition("CD"),
    # ER: an error ended the conversation; the application ENDs it.
    ("ER", "end"): Transition("CD"),
    ("ER", "end_with_error"): Transition("CD"),
    ("ER", "cleanup"): Transition("CD"),
    ("ER", "receive_message"): Transition("ER"),
    ("ER", "receive_end_dialog"): Transition("ER"),
    ("ER", "receive_error"): Transition("ER"),
    ("ER", "acknowledged_end"): Transition("ER"),
    ("ER", "lifetime_expired"): Transition("ER"),
    # CD: closed. Only cleanup (removing the row) is still allowed.
    ("CD", "cleanup"): Transition("CD"),
}

TRANSITIONS: dict[tuple[Role, State | None, str], Transition] = {
    (INITIATOR, None, "begin"): Transition("SO"),
    (TARGET, None, "receive_fragment"): Transition("SI"),
    (TARGET, None, "receive_message"): Transition("CO", enqueue=True),
    **{(role, state, event): t for role in _BOTH for (state, event), t in _COMMON.items()},
}

# What to tell the application when an event is refused in a state (the error's message).
_REFUSALS: dict[tuple[str | None, str], str] = {
    ("DI", "send"): "the far side has ended the conversation; receive what is left and END it",
    ("ER", "send"): (
        "the conversation has ended with an error (receive the Error message and END it)"
    ),
    ("DO", "send"): "this side has ended the conversation",
    ("CD", "send"): "the conversation is closed",
    ("DO", "end"): "this side has already ended the conversation",
    ("DO", "end_with_error"): "this side has already ended the conversation",
    ("CD", "end"): "the conversation is already closed",
    ("CD", "end_with_error"): "the conversation is already closed",
}


def transition(role: Role, state: State | None, event: str) -> Transition:
    """The table lookup; anything not in the table raises ConversationStateError."""
    found = TRANSITIONS.get((role, state, event))
    if found is None:
        why = _REFUSALS.get((state, event),
                            "not a transition of the state table (C1: pybroker explain C1)")
        shown = "no endpoint" if state is None else f"{state} ({STATE_DESC[state]})"
        raise ConversationStateError(
            f"cannot {event.replace('_', ' ')} on a conversation endpoint in state {shown} "
            f"({role}): {why}",
            role=role, state=state, event=event,
        )
    return found
