"""The sending path's encoder (P1, P6): ``frame_macs.encode_message`` signs and encodes a fragment
in one go. It must give exactly the bytes of the general path (sign, attach the riding
acknowledgement, encode) and refuse exactly what the peer's decoder would refuse."""

from __future__ import annotations

import struct
import uuid
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_wire_frames import KEY, ack_entries, fragments

from pybroker.core.wire import frame_fields, frame_macs, frame_types, frames
from pybroker.core.wire.adjacent import _check_peer_accepts
from pybroker.errors import FrameError

FAST = settings(max_examples=40, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
ZERO = str(uuid.UUID(int=0))


def _general(f: frames.MessageFragment, ack: frame_types.AckEntry | None) -> bytes:
    data = frames.encode(replace(frame_macs.sign(f, KEY), ack=ack))
    _check_peer_accepts(data)
    return data


@FAST
@given(fragments(with_ack=False), st.none() | ack_entries)
def test_encode_message_is_sign_then_encode(f: frames.MessageFragment,
                                            ack: frame_types.AckEntry | None) -> None:
    data = frame_macs.encode_message(f, KEY, ack)
    assert data == _general(f, ack)
    decoded = frames.decode(data)
    assert decoded.ack == ack
    assert frame_macs.verify(decoded, KEY)
    assert not frame_macs.verify(decoded, b"t" * 32)


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
                                                    ack: frame_types.AckEntry | None) -> None:
    field, value = bad
    f = replace(f, **{field: value})
    try:
        expected = _general(f, ack)
    except (FrameError, ValueError, TypeError, struct.error):  # the general path's signing
        expected = None  # does not check its values (struct.error, a bad GUID's ValueError)
    try:
        got = frame_macs.encode_message(f, KEY, ack)
    except FrameError:
        got = None
    assert got == expected
    if got is not None:
        assert frame_macs.verify(frames.decode(got), KEY)


@FAST
@given(fragments(with_ack=False), ack_entries, st.sampled_from([
    ("through_sequence", -5), ("ranges", ((3, 5, 4),)), ("ranges", ((-1, 0, 0),)),
    ("conversation_id", ZERO), ("broker_instance", ZERO)]))
def test_a_riding_acknowledgement_the_peer_would_refuse_is_refused(f, ack, bad) -> None:
    ack = replace(ack, **{bad[0]: bad[1]})
    try:
        frame_macs.encode_message(f, KEY, ack)
    except FrameError:
        pass
    else:
        raise AssertionError("an acknowledgement the peer refuses was encoded")
    frame_macs.encode_message(f, KEY)  # the fragment alone goes


# -- acknowledgement entries: checked without a round trip, read a struct at a time ------

# one field at a time set to a value the encoder may refuse, or write and the decoder refuse
_BAD_ACK = st.sampled_from([
    ("through_sequence", -1), ("through_sequence", 2**63), ("ranges", ((3, 5, 4),)),
    ("ranges", ((-1, 0, 0),)), ("ranges", ((2**63, 0, 0),)), ("ranges", ((1, 0, 2**32),)),
    ("ranges", ((1, -1, 0),)), ("ranges", ((1, 0, 0),) * (frame_types.MAX_ACK_RANGES + 1)),
    ("key_id", b"short"), ("mac", b"\x01" * 15), ("conversation_id", ZERO),
    ("broker_instance", ZERO), ("conversation_id", "not a guid"), ("broker_instance", None),
    ("conversation_id", None), ("key_id", None),
])


def _round_trip_refuses(entry: frame_types.AckEntry) -> bool:
    """What queue_acks checked before: the entry alone in an ACK frame, encoded and
    decoded."""
    try:
        _check_peer_accepts(frames.encode(frames.Ack((entry,))))
    except FrameError:
        return True
    return False


@FAST
@given(ack_entries, st.none() | _BAD_ACK)
def test_check_ack_entry_refuses_what_an_ack_frame_round_trip_refuses(
        entry: frame_types.AckEntry, bad) -> None:
    if bad is not None:
        entry = replace(entry, **{bad[0]: bad[1]})
    try:
        frame_macs.check_ack_entry(entry)
    except FrameError:
        refused = True
    else:
        refused = False
    assert refused == _round_trip_refuses(entry)
    assert refused == (bad is not None)  # every value in _BAD_ACK is refused


# an entry's checked fields made wrong where they lie: the conversation id or broker
# identifier zeroed, the direction byte over 1, the through sequence or the first range's
# sequence negative, the first range's first fragment after its last
_CORRUPT = st.sampled_from([
    (0, bytes(16)), (16, b"\x02"), (17, bytes(16)), (41, b"\xff"), (51, b"\x80"),
    (59, b"\xff\xff\xff\xff"),
])
_AT = st.sampled_from([0, 15, 16, 17, 32, 49, 51, 59]) | st.integers(0, 400)


def _read(reader, data: bytes):  # type: ignore[no-untyped-def]
    r = frame_fields.Reader(data)
    try:
        return reader(r), r.pos
    except FrameError as exc:
        return str(exc), None


@settings(max_examples=300, derandomize=True, deadline=None)
@given(ack_entries, st.lists(_CORRUPT | st.tuples(_AT, st.binary(min_size=1, max_size=2)),
                             max_size=3), st.integers(0, 400), st.booleans())
def test_an_ack_entry_is_read_by_struct_as_field_by_field(
        entry: frame_types.AckEntry, edits, cut: int, cut_it: bool) -> None:
    """The struct reader gives the field reader's entry, or its error, for an entry's bytes
    with some bytes changed and maybe cut short (a zeroed GUID, a direction byte over 1, a
    range count over the limit, a negative sequence, a truncated MAC, ...)."""
    w = frame_fields.Writer()
    frame_fields.write_ack_entry(w, entry)
    data = bytearray(w.value() + b"tail")
    for at, value in edits:
        data[at:at + len(value)] = value[:max(0, len(data) - at)]
    if cut_it:
        data = data[:cut]
    fast = _read(frame_fields.read_ack_entry, bytes(data))
    assert fast == _read(frame_fields.read_ack_entry_fields, bytes(data))
    if not edits and not cut_it:
        assert fast == (entry, len(data) - 4)


def test_an_ack_entry_with_too_many_ranges_is_refused_whole() -> None:
    """Over MAX_ACK_RANGES ranges, every one of them present: refused, not read."""
    entry = frame_types.AckEntry(str(uuid.uuid4()), True, str(uuid.uuid4()), bytes(8), 1)
    w = frame_fields.Writer()
    frame_fields.write_ack_entry(w, entry, with_mac=False)
    count = frame_types.MAX_ACK_RANGES + 1
    data = w.value()[:-2] + struct.pack("!H", count) + struct.pack("!qII", 5, 0, 0) * count
    data += bytes(frames.MAC_SIZE)
    fast = _read(frame_fields.read_ack_entry, data)
    assert fast == _read(frame_fields.read_ack_entry_fields, data)
    assert "1025 ranges" in fast[0]
