"""The frame format (P1, P6): round trips of every frame type, incremental decoding in any
chunking, MACs, and a decoder that raises only FrameError whatever it is fed."""

from __future__ import annotations

import contextlib
import random
import struct
import uuid
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.core.wire import frame_macs, frame_types, frames
from pybroker.devtools.fuzz.frames import sample_frame
from pybroker.errors import FrameError

# modest numbers: the machine is shared (generating one fragment costs ~20 ms under load)
FAST = settings(max_examples=60, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
KEY, OTHER_KEY = b"s" * 32, b"t" * 32

# -- strategies ----------------------------------------------------------------------------

guids = st.binary(min_size=16, max_size=16).filter(any).map(lambda b: str(uuid.UUID(bytes=b)))
# NUL is refused by the decoder (see frames.Reader.text), surrogates cannot be UTF-8
texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                max_size=30)
names = texts.filter(bool)
key_ids = st.binary(min_size=frames.KEY_ID_SIZE, max_size=frames.KEY_ID_SIZE)
macs = st.binary(min_size=frames.MAC_SIZE, max_size=frames.MAC_SIZE)
u32 = st.integers(0, 2**32 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
seqs = st.integers(0, 2**63 - 1)


@st.composite
def ranges(draw) -> tuple[int, int, int]:
    first = draw(u32)
    return draw(seqs), first, draw(st.integers(first, 2**32 - 1))


ack_entries = st.builds(
    frame_types.AckEntry, conversation_id=guids, acks_initiator=st.booleans(),
    broker_instance=guids, key_id=key_ids, through_sequence=seqs,
    ranges=st.lists(ranges(), max_size=5).map(tuple), mac=macs)


@st.composite
def fragments(draw, with_ack: bool | None = None) -> frames.MessageFragment:
    body = draw(st.binary(max_size=300))
    count = draw(st.one_of(st.just(1), st.integers(1, 2**32 - 1)))
    size = len(body) if count == 1 else draw(st.integers(len(body), 2**64 - 1))
    ack = {None: st.none() | ack_entries, True: ack_entries, False: st.none()}[with_ack]
    return frames.MessageFragment(
        conversation_id=draw(guids), from_initiator=draw(st.booleans()), sequence=draw(seqs),
        fragment_number=draw(st.integers(0, count - 1)), fragment_count=count,
        message_size=size, from_service=draw(names), to_service=draw(names),
        from_broker_instance=draw(guids), to_broker_instance=draw(st.none() | guids),
        contract=draw(names), message_type=draw(names),
        validation=draw(st.sampled_from("NEX")), is_end_of_dialog=draw(st.booleans()),
        is_error=draw(st.booleans()), priority=draw(st.integers(0, 10)),
        lifetime_ms=draw(i64), hops_remaining=draw(st.integers(0, 255)), key_id=draw(key_ids),
        body=body, ack=draw(ack), mac=draw(macs), time_to_live_ms=draw(u32),
        time_consumed_ms=draw(u32))


notices = st.builds(
    frames.Notice, conversation_id=guids, about_initiator=st.booleans(),
    broker_instance=st.none() | guids, sequence=i64, code=st.integers(-(2**31), 2**31 - 1),
    text=texts, is_fatal=st.booleans(), key_id=key_ids, mac=macs)
hellos = st.builds(frames.Hello, instance_id=guids,
                   broker_instances=st.lists(guids, max_size=8).map(tuple), max_body=u32,
                   address=texts, key_id=key_ids)
acks = st.builds(frames.Ack, entries=st.lists(ack_entries, max_size=12).map(tuple))
closes = st.builds(frames.Close, reason=st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=1000))
any_frame = st.one_of(hellos, fragments(), acks, notices, st.just(frames.Keepalive()), closes)


# -- round trips ---------------------------------------------------------------------------


@FAST
@given(st.one_of(hellos, fragments(with_ack=False), fragments(with_ack=True), acks, notices,
                 st.just(frames.Keepalive()), closes))
def test_every_frame_type_round_trips(frame: frames.Frame) -> None:
    data = frames.encode(frame)
    assert data[:2] == b"PB" and data[2] == frames.VERSION
    assert frames.decode(data) == frame
    assert frames.encode(frames.decode(data)) == data


def test_ack_with_many_entries_round_trips() -> None:
    entries = tuple(frame_types.AckEntry(str(uuid.UUID(int=i + 1)), i % 2 == 0,
                                         str(uuid.UUID(int=7)), b"12345678", i,
                                         tuple((i + j, j, j + 3) for j in range(i % 4)))
                    for i in range(frames.MAX_ACK_ENTRIES))
    frame = frames.Ack(entries)
    assert frames.decode(frames.encode(frame)) == frame
    with pytest.raises(FrameError):
        frames.encode(frames.Ack((*entries, entries[0])))


def test_the_type_byte_names_the_frame() -> None:
    kinds = {frames.Hello("00000000-0000-0000-0000-000000000001", (), 65536): frames.HELLO,
             frames.Keepalive(): frames.KEEPALIVE, frames.Close("x"): frames.CLOSE,
             frames.Ack(()): frames.ACK}
    for frame, kind in kinds.items():
        assert frames.encode(frame)[3] == kind


@settings(FAST, max_examples=30)
@given(st.lists(any_frame, min_size=1, max_size=3), st.randoms(use_true_random=False))
def test_incremental_feeding_gives_the_same_frames(stream: list[frames.Frame],
                                                   rnd: random.Random) -> None:
    data = b"".join(frames.encode(f) for f in stream)
    whole = frames.FrameDecoder()
    assert whole.feed(data) == stream and whole.buffered == 0
    bytewise = frames.FrameDecoder()
    got = [f for i in range(len(data)) for f in bytewise.feed(data[i:i + 1])]
    assert got == stream and bytewise.buffered == 0
    chunked, got, pos = frames.FrameDecoder(), [], 0
    while pos < len(data):
        step = rnd.randint(0, 64)
        got += chunked.feed(data[pos:pos + step])
        pos += step
    assert got == stream and chunked.buffered == 0


# -- MACs ----------------------------------------------------------------------------------


@FAST
@given(fragments(), st.data())
def test_mac_signs_and_a_flipped_bit_anywhere_fails(fragment: frames.MessageFragment,
                                                    data: st.DataObject) -> None:
    signed = frame_macs.sign(fragment, KEY)
    if signed.ack is not None:
        signed = replace(signed, ack=frame_macs.sign(signed.ack, KEY))
    assert frame_macs.verify(signed, KEY) and not frame_macs.verify(signed, OTHER_KEY)
    # attaching or removing a piggybacked ack leaves the fragment's own MAC valid (P5.1)
    assert frame_macs.verify(replace(signed, ack=None), KEY)
    encoded = frames.encode(signed)
    bit = data.draw(st.integers(0, len(encoded) * 8 - 1), label="bit")
    tampered = bytearray(encoded)
    tampered[bit // 8] ^= 1 << (bit % 8)
    try:
        decoded = frames.decode(bytes(tampered))
    except FrameError:
        return
    assert isinstance(decoded, frames.MessageFragment)
    assert not frame_macs.verify(decoded, KEY) or (
        decoded.ack is not None and not frame_macs.verify(decoded.ack, KEY))


@FAST
@given(fragments(), st.integers(0, 255))
def test_a_decoded_fragment_is_verified_as_it_arrived_and_a_changed_copy_as_it_is_now(
        fragment: frames.MessageFragment, hops: int) -> None:
    signed = frame_macs.sign(fragment, KEY)
    decoded = frames.decode(frames.encode(signed))
    assert decoded.signed is not None and signed.signed is None
    assert frame_macs.signed_bytes(decoded) == frame_macs.signed_bytes(signed)
    assert frame_macs.verify(decoded, KEY) and not frame_macs.verify(decoded, OTHER_KEY)
    # a forwarder's copy (hops changed) is not verified with what arrived: encoded again
    moved = replace(decoded, hops_remaining=hops)
    assert moved.signed is None
    assert frame_macs.verify(moved, KEY) == (hops == fragment.hops_remaining)
    assert frame_macs.verify(frame_macs.sign(moved, KEY), KEY)


def test_repeated_names_are_read_again_when_they_differ_in_one_byte() -> None:
    """The names of a MESSAGE header are looked up by their bytes: a frame whose names
    differ from a known one's in one byte, at the same length, reads its own."""
    base = frames.MessageFragment(
        str(uuid.uuid4()), True, 0, 0, 1, 3, "ServiceA", "ServiceB", str(uuid.uuid4()),
        None, "Contract", "Type", "N", False, False, 5, 0, 32, b"k" * 8, b"abc")
    seen = set()
    for service in ("ServiceA", "ServiceC", "ServiceA", "ServiceD"):
        f = replace(base, from_service=service, to_broker_instance=(
            None if service == "ServiceA" else str(uuid.uuid4())))
        got = frames.decode(frames.encode(frame_macs.sign(f, KEY)))
        assert (got.from_service, got.to_broker_instance) == (
            service, f.to_broker_instance)
        assert frame_macs.verify(got, KEY)
        seen.add(got.from_service)
    assert seen == {"ServiceA", "ServiceC", "ServiceD"}


@FAST
@given(ack_entries, notices)
def test_ack_entries_and_notices_carry_their_own_mac(entry: frame_types.AckEntry,
                                                     notice: frames.Notice) -> None:
    for item, field, value in ((entry, "through_sequence", entry.through_sequence ^ 1),
                               (entry, "acks_initiator", not entry.acks_initiator),
                               (notice, "code", notice.code ^ 1),
                               (notice, "is_fatal", not notice.is_fatal),
                               (notice, "about_initiator", not notice.about_initiator)):
        signed = frame_macs.sign(item, KEY)
        assert frame_macs.verify(signed, KEY) and not frame_macs.verify(signed, OTHER_KEY)
        assert not frame_macs.verify(replace(signed, **{field: value}), KEY)


# -- hostile input: only FrameError, never a hang -----------------------------------------


def _only_frame_errors(data: bytes, chunk: int = 0) -> None:
    """Feed ``data`` to ``decode`` and to a FrameDecoder (in pieces of ``chunk``, or whole);
    anything but FrameError escapes and fails the test."""
    with contextlib.suppress(FrameError):
        frames.decode(data)
    decoder = frames.FrameDecoder()
    step = chunk or len(data) or 1
    for pos in range(0, len(data), step):
        try:
            decoder.feed(data[pos:pos + step])
        except FrameError:
            with pytest.raises(FrameError):  # a failed stream stays failed
                decoder.feed(b"PB")
            return


@settings(FAST, max_examples=200)
@given(st.binary(max_size=400), st.integers(0, 40))
def test_arbitrary_bytes_raise_only_frame_error(data: bytes, chunk: int) -> None:
    _only_frame_errors(data, chunk)


@FAST
@given(st.sampled_from(sorted(frames.TYPE_NAMES)), st.integers(0, 255),
       st.binary(max_size=300), st.integers(0, 40))
def test_arbitrary_bodies_behind_a_valid_prefix_raise_only_frame_error(
        kind: int, flags: int, rest: bytes, chunk: int) -> None:
    cut = len(rest) // 2
    data = frames.PREFIX.pack(frames.MAGIC, frames.VERSION, kind, flags, 0, cut,
                              len(rest) - cut) + rest
    _only_frame_errors(data, chunk)


def _decodes_all(data: bytes) -> bool:
    try:
        frames.FrameDecoder().feed(data)
    except FrameError:
        return False
    return True


def _mutate(data: bytes, op: str, pos: int, value: int) -> bytes:
    buf = bytearray(data)
    pos %= max(len(buf), 1)
    if op == "flip" and buf:
        buf[pos] ^= 1 << (value % 8)
    elif op == "set" and buf:
        buf[pos] = value % 256
    elif op == "insert":
        buf.insert(pos, value % 256)
    elif op == "delete" and buf:
        del buf[pos]
    elif op == "truncate":
        del buf[pos:]
    elif op == "header_len" and len(buf) >= frames.PREFIX_SIZE:
        buf[6:8] = struct.pack("!H", value % 2**16)
    elif op == "body_len" and len(buf) >= frames.PREFIX_SIZE:
        buf[8:12] = struct.pack("!I", value % 2**32)
    elif op == "huge_len":  # a string or count length inside the header
        buf[pos:pos + 2] = b"\xff\xff"
    return bytes(buf)


mutations = st.lists(st.tuples(
    st.sampled_from(["flip", "set", "insert", "delete", "truncate", "header_len", "body_len",
                     "huge_len"]), st.integers(0, 2**16), st.integers(0, 2**32 - 1)),
    min_size=1, max_size=4)


# valid frames of every type from a seeded generator (cheaper than drawing each with
# hypothesis), spliced and mutated by hypothesis
_rnd = random.Random(1)
CORPUS = [frames.encode(sample_frame(_rnd)) for _ in range(200)]


@settings(FAST, max_examples=300)
@given(st.lists(st.sampled_from(CORPUS), min_size=1, max_size=3), mutations,
       st.integers(0, 40))
def test_mutated_valid_frames_raise_only_frame_error(stream: list[bytes], ops: list,
                                                     chunk: int) -> None:
    data = b"".join(stream)
    assert _decodes_all(data)
    for op, pos, value in ops:
        data = _mutate(data, op, pos, value)
    _only_frame_errors(data, chunk)


# -- bounds ----------------------------------------------------------------------------------


def _prefix(header_len: int, body_len: int, kind: int = frames.MESSAGE) -> bytes:
    return frames.PREFIX.pack(frames.MAGIC, frames.VERSION, kind, 0, 0, header_len, body_len)


@pytest.mark.parametrize("max_body", [2**16, frames.DEFAULT_MAX_BODY])
def test_oversized_lengths_are_refused_from_the_prefix_alone(max_body: int) -> None:
    at_limit = frames.FrameDecoder(max_body)
    assert at_limit.feed(_prefix(frames.MAX_HEADER, max_body)) == []
    assert at_limit.buffered == frames.PREFIX_SIZE  # waits for the bytes
    for header_len, body_len, what in ((frames.MAX_HEADER + 1, 0, "header"),
                                       (0, max_body + 1, "body"),
                                       (0, 2**32 - 1, "body")):
        decoder = frames.FrameDecoder(max_body)
        assert decoder.feed(_prefix(header_len, body_len)[:-1]) == []
        with pytest.raises(FrameError, match=f"frame {what} of"):
            decoder.feed(_prefix(header_len, body_len)[-1:])
        with pytest.raises(FrameError, match="already failed"):
            decoder.feed(b"")


@pytest.mark.parametrize(("frame", "match"), [
    (frames.Close("x"), None),
    (frames.Notice(str(uuid.UUID(int=1)), True, None, 1, 1, "x" * 70000, False, b"12345678"),
     "does not fit"),
    (frames.Notice(str(uuid.UUID(int=1)), True, None, 1, 1, "x" * 17000, False, b"12345678"),
     "over"),
    (frames.Notice(str(uuid.UUID(int=1)), True, None, 1, 1, "x", False, b"123"), "8-byte"),
    (frames.Hello("not a guid", (), 1), "cannot encode"),
    (frames.Hello(str(uuid.UUID(int=1)), (), 2**32), "cannot encode"),
])
def test_encode_refuses_what_no_frame_can_carry(frame: frames.Frame, match: str | None) -> None:
    if match is None:
        frames.encode(frame)
        return
    with pytest.raises(FrameError, match=match):
        frames.encode(frame)
