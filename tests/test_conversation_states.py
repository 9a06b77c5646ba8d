"""SPEC C1: the conversation endpoint state table, transition by transition (sans-I/O)."""

from __future__ import annotations

import pytest

from pybroker.core.conversation.states import (
    EVENTS,
    INITIATOR,
    STATE_DESC,
    TARGET,
    TRANSITIONS,
    Transition,
    transition,
)
from pybroker.errors import BrokerError, ConversationStateError

STATES = [None, "SO", "SI", "CO", "DI", "DO", "ER", "CD"]

# Every allowed (state, event) -> (next state, enqueue, notify), for both roles: the C1
# semantics written out once more, independently of the module's table.
EXPECTED = {
    ("SO", "send"): ("CO", False, False),
    ("SO", "end"): ("CD", False, False),
    ("SO", "end_with_error"): ("CD", False, False),
    ("SO", "cleanup"): ("CD", False, False),
    ("SO", "lifetime_expired"): ("ER", False, False),
    ("SI", "receive_fragment"): ("SI", False, False),
    ("SI", "receive_message"): ("CO", True, False),
    ("SI", "cleanup"): ("CD", False, False),
    ("SI", "lifetime_expired"): ("ER", False, False),
    ("CO", "send"): ("CO", False, False),
    ("CO", "receive_message"): ("CO", True, False),
    ("CO", "receive_end_dialog"): ("DI", True, False),
    ("CO", "receive_error"): ("ER", True, False),
    ("CO", "end"): ("DO", False, True),
    ("CO", "end_with_error"): ("DO", False, True),
    ("CO", "cleanup"): ("CD", False, False),
    ("CO", "lifetime_expired"): ("ER", False, False),
    ("DI", "end"): ("CD", False, False),
    ("DI", "end_with_error"): ("CD", False, False),
    ("DI", "cleanup"): ("CD", False, False),
    ("DI", "lifetime_expired"): ("ER", False, False),
    ("DO", "acknowledged_end"): ("CD", False, False),
    ("DO", "receive_message"): ("DO", False, False),
    ("DO", "receive_end_dialog"): ("CD", False, False),
    ("DO", "receive_error"): ("CD", False, False),
    ("DO", "cleanup"): ("CD", False, False),
    ("DO", "lifetime_expired"): ("CD", False, False),
    ("ER", "end"): ("CD", False, False),
    ("ER", "end_with_error"): ("CD", False, False),
    ("ER", "cleanup"): ("CD", False, False),
    ("ER", "receive_message"): ("ER", False, False),
    ("ER", "receive_end_dialog"): ("ER", False, False),
    ("ER", "receive_error"): ("ER", False, False),
    ("ER", "acknowledged_end"): ("ER", False, False),
    ("ER", "lifetime_expired"): ("ER", False, False),
    ("CD", "cleanup"): ("CD", False, False),
}
BIRTHS = {
    (INITIATOR, None, "begin"): ("SO", False, False),
    (TARGET, None, "receive_fragment"): ("SI", False, False),
    (TARGET, None, "receive_message"): ("CO", True, False),
}


def _expected(role, state, event):
    if state is None:
        return BIRTHS.get((role, state, event))
    return EXPECTED.get((state, event))


CASES = [(role, state, event) for role in (INITIATOR, TARGET) for state in STATES
         for event in EVENTS]


@pytest.mark.parametrize(("role", "state", "event"), CASES)
def test_c1_every_role_state_event(role, state, event):
    """C1: each (role, state, event) either moves as the table says or is refused."""
    expected = _expected(role, state, event)
    if expected is None:
        with pytest.raises(ConversationStateError) as info:
            transition(role, state, event)
        assert (info.value.role, info.value.state, info.value.event) == (role, state, event)
        assert isinstance(info.value, BrokerError)
    else:
        assert transition(role, state, event) == Transition(*expected)


def test_c1_the_table_holds_exactly_the_expected_transitions():
    expected = {(r, s, e) for r, s, e in CASES if _expected(r, s, e) is not None}
    assert set(TRANSITIONS) == expected


def test_c1_state_descriptions_are_sql_servers():
    assert STATE_DESC == {
        "SO": "STARTED_OUTBOUND", "SI": "STARTED_INBOUND", "CO": "CONVERSING",
        "DI": "DISCONNECTED_INBOUND", "DO": "DISCONNECTED_OUTBOUND", "ER": "ERROR",
        "CD": "CLOSED",
    }


def test_c1_refusals_say_why():
    with pytest.raises(ConversationStateError, match="far side has ended"):
        transition(INITIATOR, "DI", "send")
    with pytest.raises(ConversationStateError, match="ended with an error"):
        transition(TARGET, "ER", "send")
    with pytest.raises(ConversationStateError, match="already closed"):
        transition(TARGET, "CD", "end")
    with pytest.raises(ConversationStateError, match="no endpoint"):
        transition(TARGET, None, "begin")  # only an initiator begins
