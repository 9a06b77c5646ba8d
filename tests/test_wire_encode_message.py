"""The sending path's encoder (P1, P6): ``frames.encode_message`` signs and encodes a fragment
in one go. It must give exactly the bytes of the general path (sign, attach the riding
acknowledgement, encode) and refuse exactly what the peer's decoder would refuse."""

from __future__ import annotations

import struct
import uuid
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_wire_frames import KEY, ack_entries, fragments

from pybroker.errors import FrameError
from pybroker.wire import frames
from pybroker.wire.adjacent import _check_peer_accepts

FAST = settings(max_examples=40, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
ZERO = str(uuid.UUID(int=0))


def _general(f: frames.MessageFragment, ack: frames.AckEntry | None) -> bytes:
    data = frames.encode(replace(frames.sign(f, KEY), ack=ack))
    _check_peer_accepts(data)
    return data


@FAST
@given(fragments(with_ack=False), st.none() | ack_entries)
def test_encode_message_is_sign_then_encode(f: frames.MessageFragment,
                                            ack: frames.AckEntry | None) -> None:
    data = frames.encode_message(f, KEY, ack)
    assert data == _general(f, ack)
    decoded = frames.decode(data)
    assert decoded.ack == ack
    assert frames.verify(decoded, KEY)
    assert not frames.verify(decoded, b"t" * 32)


# one field at a time set to a value the encoder may write but the decoder refuses (or not)
_BAD = st.sampled_from([
    ("sequence", -1), ("priority", 11), ("priority", 255), ("priority", -1),
    ("from_service", ""), ("to_service", "a\x00b"), ("contract", ""), ("message_type", "\x00"),
    ("conversation_id", ZERO), ("from_broker_instance", ZERO), ("to_broker_instance", ZERO),
    ("validation", "Q"), ("key_id", b"short"), ("hops_remaining", 256),
    ("fragment_number", 2**32), ("lifetime_ms", 2**63), ("conversation_id", "not a guid"),
    ("from_service", "\ud800"), ("message_size", 0), ("fragment_count", 0),
])


@FAST
@given(fragments(with_ack=False), _BAD, st.none() | ack_entries)
def test_encode_message_refuses_what_the_peer_would(f: frames.MessageFragment, bad,
                                                    ack: frames.AckEntry | None) -> None:
    field, value = bad
    f = replace(f, **{field: value})
    try:
        expected = _general(f, ack)
    except (FrameError, ValueError, TypeError, struct.error):  # the general path's signing
        expected = None  # does not check its values (struct.error, a bad GUID's ValueError)
    try:
        got = frames.encode_message(f, KEY, ack)
    except FrameError:
        got = None
    assert got == expected
    if got is not None:
        assert frames.verify(frames.decode(got), KEY)


@FAST
@given(fragments(with_ack=False), ack_entries, st.sampled_from([
    ("through_sequence", -5), ("ranges", ((3, 5, 4),)), ("ranges", ((-1, 0, 0),)),
    ("conversation_id", ZERO), ("broker_instance", ZERO)]))
def test_a_riding_acknowledgement_the_peer_would_refuse_is_refused(f, ack, bad) -> None:
    ack = replace(ack, **{bad[0]: bad[1]})
    try:
        frames.encode_message(f, KEY, ack)
    except FrameError:
        pass
    else:
        raise AssertionError("an acknowledgement the peer refuses was encoded")
    frames.encode_message(f, KEY)  # the fragment alone goes
