"""The fields of a frame (P1): writing and reading integers, GUIDs and strings, the
acknowledgement entries, and the headers of MESSAGE, NOTICE and PROBE frames (what
frames.py's ``encode`` and the MACs of frame_macs.py are built from). The layout is in
frames.py's docstring.
"""

from __future__ import annotations

import functools
import struct
import uuid

from pybroker.core.wire.frame_types import (
    FLAG_ABOUT_INITIATOR,
    FLAG_END_OF_DIALOG,
    FLAG_ERROR,
    FLAG_FATAL,
    FLAG_FROM_INITIATOR,
    FLAG_HAS_ACK,
    FLAG_TRACE_CONTEXT,
    KEY_ID_SIZE,
    MAC_SIZE,
    MAX_ACK_RANGES,
    MAX_TRACE_CONTEXT,
    NO_GUID,
    VALIDATIONS,
    AckEntry,
    MessageFragment,
    Notice,
    Probe,
)
from pybroker.errors import FrameError

# -- writing ----------------------------------------------------------------------------


class Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def u8(self, v: int) -> None:
        self.parts.append(struct.pack("!B", v))

    def u16(self, v: int) -> None:
        self.parts.append(struct.pack("!H", v))

    def u32(self, v: int) -> None:
        self.parts.append(struct.pack("!I", v))

    def i32(self, v: int) -> None:
        self.parts.append(struct.pack("!i", v))

    def i64(self, v: int) -> None:
        self.parts.append(struct.pack("!q", v))

    def u64(self, v: int) -> None:
        self.parts.append(struct.pack("!Q", v))

    def guid(self, v: str | None) -> None:
        self.parts.append(NO_GUID if v is None else guid_bytes(v))

    def text(self, v: str) -> None:
        data = v.encode("utf-8")
        if len(data) > 0xFFFF:
            raise FrameError(f"a string of {len(data)} bytes does not fit a frame field")
        self.u16(len(data))
        self.parts.append(data)

    def raw(self, v: bytes, size: int) -> None:
        if len(v) != size:
            raise FrameError(f"a {size}-byte field was given {len(v)} bytes")
        self.parts.append(bytes(v))

    def value(self) -> bytes:
        return b"".join(self.parts)


# An acknowledgement entry's fields up to its ranges (conversation id, direction, broker
# instance, key id, through sequence, range count), and one range (sequence, first and last
# fragment): written and read a struct at a time, for an entry goes both ways per batch of
# arrivals and is written twice more to sign and check it.
_ACK_HEAD = struct.Struct("!16sB16s8sqH")
_ACK_RANGE = struct.Struct("!qII")


def write_ack_entry(w: Writer, e: AckEntry, *, with_mac: bool = True) -> None:
    if len(e.key_id) != KEY_ID_SIZE:
        raise FrameError(f"a {KEY_ID_SIZE}-byte field was given {len(e.key_id)} bytes")
    ranges = e.ranges
    if len(ranges) > MAX_ACK_RANGES:
        raise FrameError(f"an acknowledgement carries at most {MAX_ACK_RANGES} ranges")
    parts = w.parts
    parts.append(_ACK_HEAD.pack(
        NO_GUID if e.conversation_id is None else guid_bytes(e.conversation_id),
        1 if e.acks_initiator else 0,
        NO_GUID if e.broker_instance is None else guid_bytes(e.broker_instance),
        bytes(e.key_id), e.through_sequence, len(ranges)))
    for seq, first, last in ranges:
        parts.append(_ACK_RANGE.pack(seq, first, last))
    if with_mac:
        w.raw(e.mac, MAC_SIZE)


@functools.lru_cache(maxsize=65536)
def guid_bytes(v: str) -> bytes:
    return uuid.UUID(v).bytes


@functools.lru_cache(maxsize=65536)
def guid_text(raw: bytes) -> str:
    return str(uuid.UUID(bytes=raw))


FIXED = struct.Struct("!qIIQ")
# validation, priority, lifetime_ms, hops_remaining, time_to_live_ms, time_consumed_ms
STATIC = struct.Struct("!BBqBII")


def message_header(f: MessageFragment, *, with_mac: bool = True,
                   with_ack: bool = True) -> bytes:
    w = Writer()
    w.guid(f.conversation_id)
    w.parts.append(FIXED.pack(f.sequence, f.fragment_number, f.fragment_count,
                              f.message_size))
    w.text(f.from_service)
    w.text(f.to_service)
    w.guid(f.from_broker_instance)
    w.guid(f.to_broker_instance)
    w.text(f.contract)
    w.text(f.message_type)
    w.u8(VALIDATIONS.index(f.validation) if f.validation in VALIDATIONS else 255)
    w.u8(f.priority)
    w.i64(f.lifetime_ms)
    w.u8(f.hops_remaining)
    w.u32(f.time_to_live_ms)
    w.u32(f.time_consumed_ms)
    w.raw(f.key_id, KEY_ID_SIZE)
    if f.traceparent is not None:
        w.parts.append(trace_context_field(f.traceparent))
    if f.ack is not None and with_ack:
        write_ack_entry(w, f.ack)
    if with_mac:
        w.raw(f.mac, MAC_SIZE)
    return w.value()


def message_flags(f: MessageFragment) -> int:
    return ((FLAG_FROM_INITIATOR if f.from_initiator else 0)
            | (FLAG_END_OF_DIALOG if f.is_end_of_dialog else 0)
            | (FLAG_ERROR if f.is_error else 0)
            | (FLAG_HAS_ACK if f.ack is not None else 0)
            | (FLAG_TRACE_CONTEXT if f.traceparent is not None else 0))


def trace_context_field(traceparent: str) -> bytes:
    """A MESSAGE header's trace context (flag 16): a string field of at most
    MAX_TRACE_CONTEXT bytes, right after the key id (so under the MAC)."""
    if not isinstance(traceparent, str):
        raise FrameError(f"a trace context must be text, not {type(traceparent).__name__}")
    data = traceparent.encode("utf-8")
    if len(data) > MAX_TRACE_CONTEXT:
        raise FrameError(f"a trace context of {len(data)} bytes is over {MAX_TRACE_CONTEXT}")
    if "\x00" in traceparent:
        raise FrameError("not sent, the peer would refuse it: the trace context holds a NUL "
                         "character")
    return struct.pack("!H", len(data)) + data


def trace_context_at(header: memoryview, pos: int) -> tuple[str, int]:
    """The trace context field at ``pos`` of a MESSAGE header and the offset after it."""
    if pos + 2 <= len(header):
        (n,) = _U16.unpack_from(header, pos)
        if n > MAX_TRACE_CONTEXT:
            raise FrameError(f"a trace context of {n} bytes is over {MAX_TRACE_CONTEXT}")
    return text_at(header, pos)


def notice_header(n: Notice, *, with_mac: bool = True) -> bytes:
    w = Writer()
    w.guid(n.conversation_id)
    w.guid(n.broker_instance)
    w.i64(n.sequence)
    w.i32(n.code)
    w.text(n.text)
    w.raw(n.key_id, KEY_ID_SIZE)
    if with_mac:
        w.raw(n.mac, MAC_SIZE)
    return w.value()


def notice_flags(n: Notice) -> int:
    return (FLAG_ABOUT_INITIATOR if n.about_initiator else 0) | (FLAG_FATAL if n.is_fatal else 0)


def probe_header(p: Probe, *, with_mac: bool = True) -> bytes:
    w = Writer()
    w.guid(p.probe_id)
    w.text(p.service)
    w.guid(p.broker_instance)
    w.text(p.role)
    w.raw(p.key_id, KEY_ID_SIZE)
    if with_mac:
        w.raw(p.mac, MAC_SIZE)
    return w.value()



# -- reading ----------------------------------------------------------------------------


class Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        end = self.pos + n
        if end > len(self.data):
            raise FrameError(f"a field runs past the end of its frame part ({n} bytes at "
                             f"offset {self.pos} of {len(self.data)})")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return struct.unpack("!H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack("!I", self.take(4))[0]

    def i32(self) -> int:
        return struct.unpack("!i", self.take(4))[0]

    def i64(self) -> int:
        return struct.unpack("!q", self.take(8))[0]

    def u64(self) -> int:
        return struct.unpack("!Q", self.take(8))[0]

    def guid(self) -> str | None:
        raw = bytes(self.take(16))
        return None if raw == NO_GUID else guid_text(raw)

    def required_guid(self, what: str) -> str:
        value = self.guid()
        if value is None:
            raise FrameError(f"the {what} of a frame is missing (all-zero GUID)")
        return value

    def text(self) -> str:
        return _text_value(bytes(self.take(self.u16())))

    def end(self, what: str) -> None:
        if self.pos != len(self.data):
            raise FrameError(f"{len(self.data) - self.pos} bytes left over after the {what}")


def read_ack_entry(r: Reader) -> AckEntry:
    """One acknowledgement entry at the reader's position: its fixed fields and ranges
    unpacked a struct at a time when they are all there and valid, else read field by field
    (``read_ack_entry_fields``), which says what is wrong, in the same order of checks."""
    data, pos = r.data, r.pos
    end = pos + _ACK_HEAD.size
    if end <= len(data):
        conversation, role, broker, key_id, through, count = _ACK_HEAD.unpack_from(data, pos)
        stop = end + count * _ACK_RANGE.size
        if (count <= MAX_ACK_RANGES and stop + MAC_SIZE <= len(data) and role <= 1
                and conversation != NO_GUID and broker != NO_GUID):
            ranges = tuple(_ACK_RANGE.iter_unpack(data[end:stop]))
            for seq, first, last in ranges:
                if first > last or seq < 0:
                    raise FrameError(
                        f"an acknowledged range ({seq}, {first}-{last}) is not valid")
            if through < 0:
                raise FrameError(f"an acknowledgement through sequence {through} is negative")
            r.pos = stop + MAC_SIZE
            return AckEntry(guid_text(conversation), role == 1, guid_text(broker), key_id,
                            through, ranges, bytes(data[stop:stop + MAC_SIZE]))
    return read_ack_entry_fields(r)


def read_ack_entry_fields(r: Reader) -> AckEntry:
    conversation_id = r.required_guid("conversation id")
    role = r.u8()
    if role > 1:
        raise FrameError(f"an acknowledgement's direction byte is {role}, not 0 or 1")
    broker = r.required_guid("acknowledging broker instance")
    key_id = bytes(r.take(KEY_ID_SIZE))
    through = r.i64()
    count = r.u16()
    if count > MAX_ACK_RANGES:
        raise FrameError(f"an acknowledgement with {count} ranges (at most {MAX_ACK_RANGES})")
    ranges = []
    for _ in range(count):
        seq, first, last = r.i64(), r.u32(), r.u32()
        if first > last or seq < 0:
            raise FrameError(f"an acknowledged range ({seq}, {first}-{last}) is not valid")
        ranges.append((seq, first, last))
    mac = bytes(r.take(MAC_SIZE))
    if through < 0:
        raise FrameError(f"an acknowledgement through sequence {through} is negative")
    return AckEntry(conversation_id, role == 1, broker, key_id, through, tuple(ranges), mac)


GUID_FIXED = struct.Struct("!16sqIIQ")  # conversation id, then FIXED
_U16 = struct.Struct("!H")


@functools.lru_cache(maxsize=4096)
def _text_value(raw: bytes) -> str:
    """A string field's text, checked (names repeat: cached)."""
    try:
        value = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError("a string field is not valid UTF-8") from None
    if "\x00" in value:
        raise FrameError("a string field holds a NUL character")
    return value


def text_at(header: memoryview, pos: int) -> tuple[str, int]:
    """The string field at ``pos`` and the offset after it."""
    end = pos + 2
    if end > len(header):
        raise FrameError(f"a field runs past the end of its frame part (2 bytes at offset "
                         f"{pos} of {len(header)})")
    (n,) = _U16.unpack_from(header, pos)
    if end + n > len(header):
        raise FrameError(f"a field runs past the end of its frame part ({n} bytes at offset "
                         f"{end} of {len(header)})")
    return _text_value(bytes(header[end:end + n])), end + n


def guid_at(header: memoryview, pos: int) -> str | None:
    raw = bytes(header[pos:pos + 16])
    if len(raw) != 16:
        raise FrameError(f"a field runs past the end of its frame part (16 bytes at offset "
                         f"{pos} of {len(header)})")
    return None if raw == NO_GUID else guid_text(raw)


