"""The adjacent broker protocol's frames: encode and decode, nothing else (P1).

Service Broker's wire format is unpublished, so this one is pybroker's own. Every frame is

    magic "PB" (2) | version (1) | type (1) | flags (1) | 0 (1) | header_len (2) | body_len (4)
    header (header_len bytes, per type below) | body (body_len bytes)

all integers big-endian. Strings are a 2-byte length and UTF-8; GUIDs are 16 bytes (all zero
for "none"); a key id is the first 8 bytes of the signer's certificate fingerprint. The
header of a message fragment carries everything a forwarder needs to route (services,
broker identifiers, hops) in clear; the body is the fragment's bytes.

The types, and what their header (and body) hold:

    1 HELLO      instance id (GUID) | largest body it accepts (4) | count (2) and the
                 broker identifiers of its databases (GUIDs) | its own address (string,
                 "" if none) | key id (8). The first frame each way on a connection.
    2 MESSAGE    one fragment of a sequenced message (P3.1, P4.1). Flags: 1 from the
                 initiator, 2 end of dialog, 4 error, 8 an acknowledgement rides along,
                 16 a trace context rides along (pybroker/docs/otel.md).
                 conversation id (GUID) | sequence (8) | fragment number (4) | fragment
                 count (4) | message size (8) | from service, to service (strings) | from
                 and to broker identifiers (GUIDs) | contract, message type (strings) |
                 validation (1: N, E, X) | priority (1, 0-10) | lifetime (8, epoch ms) |
                 hops remaining (1, R7.1) | time to live (4, ms) | time consumed (4, ms,
                 R7.1) | key id (8) | [trace context (string, at most 256 bytes: a W3C
                 traceparent), flag 16] | [one ACK entry, flag 8] | MAC (16).
                 Body: the fragment's bytes.
    3 ACK        no header; body: count (2) and up to 4,096 entries. An entry (P5.1):
                 conversation id | acknowledges the initiator's messages (1) | the
                 acknowledging database's broker identifier (R5) | key id (8) | every
                 sequence below this one (8) | count (2) and up to 1,024 ranges of
                 (sequence (8), first fragment (4), last fragment (4)) | MAC (16).
    4 NOTICE     an unsequenced broker error or refusal (P3.3). Flags: 1 about a message
                 of the initiator, 2 fatal. conversation id | notifier's broker identifier
                 | sequence (8) | SQL Server error code (4, signed) | text (string) | key id
                 (8) | MAC (16).
    5 KEEPALIVE  empty.
    6 CLOSE      a reason (string, at most 1,000 characters).
    7 PROBE      a mirrored route's question (R9.2) and its answer. Flags: 1 the answer.
                 probe id (GUID) | service (string) | broker identifier (GUID, zero for
                 none) | role (string: "" in a question; PRINCIPAL, MIRROR or "" for no
                 such database in an answer) | key id (8) | MAC (16), under the key of the
                 pair of instances for the probe id (as a conversation's).

Integrity (P6) is a keyed MAC (BLAKE2b, 16 bytes) under the dialog's session key: a message
fragment's MAC covers its flags byte (without flag 8), its header up to the key id (and the
trace context, flag 16) and its body; an acknowledgement entry and a notice (with its flags
byte) carry their own.
``signed_bytes`` gives what a MAC covers; the keys live in the dialog layer.

The keys are those of the two instances at the ends of a connection (adjacent brokers), so
a forwarder (R7) checks a fragment's MAC under its key with the broker it came from and
signs it again, with its own key id, for the next hop. That is why the hops remaining and
the time consumed, which every forward changes, can stay under the MAC: each hop's MAC
covers the values that hop sent.

Decoding is incremental (``FrameDecoder.feed``) and bounded: a header over MAX_HEADER
(16 KiB) or a body over the decoder's ``max_body`` (16 MiB by default) is refused as soon as
its length field arrives. Any malformed input raises :class:`FrameError` and nothing else;
after one, the decoder refuses every later feed (the connection is closed).

This module encodes and decodes whole frames. The frames as values (their codes and
limits) are defined in ``frame_types``, the fields and headers in ``frame_fields``, the MACs
and the sending path of a fragment in ``frame_macs``.
"""

from __future__ import annotations

import struct

from pybroker.core.wire.frame_fields import (
    GUID_FIXED,
    STATIC,
    Reader,
    Writer,
    guid_at,
    guid_text,
    message_flags,
    message_header,
    notice_flags,
    notice_header,
    probe_header,
    read_ack_entry,
    text_at,
    trace_context_at,
    write_ack_entry,
)
from pybroker.core.wire.frame_types import (
    ACK,
    CLOSE,
    DEFAULT_MAX_BODY,
    FLAG_ABOUT_INITIATOR,
    FLAG_ANSWER,
    FLAG_END_OF_DIALOG,
    FLAG_ERROR,
    FLAG_FATAL,
    FLAG_FROM_INITIATOR,
    FLAG_HAS_ACK,
    FLAG_TRACE_CONTEXT,
    HELLO,
    KEEPALIVE,
    KEY_ID_SIZE,
    MAC_SIZE,
    MAGIC,
    MAX_ACK_ENTRIES,
    MAX_HEADER,
    MESSAGE,
    NO_GUID,
    NOTICE,
    PREFIX,
    PREFIX_SIZE,
    PROBE,
    TYPE_NAMES,
    VALIDATIONS,
    VERSION,
    Ack,
    Close,
    Frame,
    Hello,
    Keepalive,
    MessageFragment,
    Notice,
    Probe,
    fragment_misfit,
)
from pybroker.errors import FrameError

# -- encoding ---------------------------------------------------------------------------


def encode(frame: Frame) -> bytes:
    """The bytes of one frame. Raises FrameError for a value no frame can carry."""
    body: bytes | memoryview = b""
    flags = 0
    try:
        if isinstance(frame, MessageFragment):
            kind, flags, header, body = (
                MESSAGE, message_flags(frame), message_header(frame), frame.body)
        elif isinstance(frame, Ack):
            if len(frame.entries) > MAX_ACK_ENTRIES:
                raise FrameError(f"an ACK frame carries at most {MAX_ACK_ENTRIES} entries")
            w = Writer()
            w.u16(len(frame.entries))
            for entry in frame.entries:
                write_ack_entry(w, entry)
            kind, header, body = ACK, b"", w.value()
        elif isinstance(frame, Notice):
            kind, flags, header = NOTICE, notice_flags(frame), notice_header(frame)
        elif isinstance(frame, Hello):
            w = Writer()
            w.guid(frame.instance_id)
            w.u32(frame.max_body)
            w.u16(len(frame.broker_instances))
            for b in frame.broker_instances:
                w.guid(b)
            w.text(frame.address)
            w.raw(frame.key_id, KEY_ID_SIZE)
            kind, header = HELLO, w.value()
        elif isinstance(frame, Probe):
            kind, flags, header = PROBE, FLAG_ANSWER if frame.is_answer else 0, probe_header(frame)
        elif isinstance(frame, Keepalive):
            kind, header = KEEPALIVE, b""
        elif isinstance(frame, Close):
            w = Writer()
            w.text(frame.reason[:1000])
            kind, header = CLOSE, w.value()
        else:
            raise FrameError(f"not a frame: {type(frame).__name__}")
    except (struct.error, ValueError, AttributeError, TypeError) as exc:
        if isinstance(exc, FrameError):
            raise
        raise FrameError(f"cannot encode {type(frame).__name__}: {exc}") from None
    if len(header) > MAX_HEADER:
        raise FrameError(f"a frame header of {len(header)} bytes is over {MAX_HEADER}")
    return b"".join((PREFIX.pack(MAGIC, VERSION, kind, flags, 0, len(header), len(body)),
                     header, body))


# -- decoding ---------------------------------------------------------------------------


# The names and broker identifiers of a MESSAGE header (the part between its fixed fields
# and its static ones), as bytes -> their values: they repeat from frame to frame of a
# conversation, so a frame without an acknowledgement riding along reads them with one
# lookup. Only what the field-by-field reading accepted is kept; bounded by clearing.
_NAMES: dict[bytes, tuple[str, str, str, str | None, str, str]] = {}
_NAMES_SIZE = 4096
_TAIL = STATIC.size + KEY_ID_SIZE + MAC_SIZE  # after the names, without an acknowledgement


def _read_names(header: memoryview) -> tuple[tuple[str, str, str, str | None, str, str], int]:
    """The names and broker identifiers of a MESSAGE header, field by field, and the offset
    after them."""
    from_service, pos = text_at(header, GUID_FIXED.size)
    to_service, pos = text_at(header, pos)
    from_broker = guid_at(header, pos)
    if from_broker is None:
        raise FrameError("the sending broker instance of a frame is missing (all-zero GUID)")
    to_broker = guid_at(header, pos + 16)
    contract, pos = text_at(header, pos + 32)
    message_type, pos = text_at(header, pos)
    return (from_service, to_service, from_broker, to_broker, contract, message_type), pos


def _decode_message(flags: int, header: memoryview, body: memoryview,
                    copy_body: bool = True) -> MessageFragment:
    """A MESSAGE frame, its header read with a few fixed-layout unpacks (the hot path of
    arrivals): the same checks and errors as field by field."""
    if flags & ~(FLAG_FROM_INITIATOR | FLAG_END_OF_DIALOG | FLAG_ERROR | FLAG_HAS_ACK
                 | FLAG_TRACE_CONTEXT):
        raise FrameError(f"unknown MESSAGE flags 0x{flags:02x}")
    size = len(header)
    if size < GUID_FIXED.size:
        raise FrameError(f"a field runs past the end of its frame part (MESSAGE header of "
                         f"{size} bytes)")
    conv_raw, sequence, fragment_number, fragment_count, message_size = (
        GUID_FIXED.unpack_from(header, 0))
    if conv_raw == NO_GUID:
        raise FrameError("the conversation id of a frame is missing (all-zero GUID)")
    conversation_id = guid_text(conv_raw)
    names = None
    plain = not flags & (FLAG_HAS_ACK | FLAG_TRACE_CONTEXT)  # the tail's size is known
    if plain and size > GUID_FIXED.size + _TAIL:
        pos = size - _TAIL
        raw_names = bytes(header[GUID_FIXED.size:pos])
        names = _NAMES.get(raw_names)
    if names is None:
        names, pos = _read_names(header)
        if plain and pos == size - _TAIL:
            if len(_NAMES) >= _NAMES_SIZE:
                _NAMES.clear()
            _NAMES[bytes(header[GUID_FIXED.size:pos])] = names
    from_service, to_service, from_broker, to_broker, contract, message_type = names
    if pos + STATIC.size + KEY_ID_SIZE > size:
        raise FrameError(f"a field runs past the end of its frame part ({STATIC.size} bytes "
                         f"at offset {pos} of {size})")
    validation, priority, lifetime_ms, hops, ttl, consumed = STATIC.unpack_from(header, pos)
    pos += STATIC.size
    key_end = pos + KEY_ID_SIZE
    key_id = bytes(header[pos:key_end])
    traceparent = None
    signed_end = key_end  # the MAC covers the header up to here (with the trace context)
    if flags & FLAG_TRACE_CONTEXT:
        traceparent, signed_end = trace_context_at(header, key_end)
    if flags & FLAG_HAS_ACK:
        r = Reader(header)
        r.pos = signed_end
        ack = read_ack_entry(r)
        mac = bytes(r.take(MAC_SIZE))
        r.end("MESSAGE header")
    else:
        ack = None
        mac = bytes(header[signed_end:])
        if len(mac) != MAC_SIZE:
            raise FrameError(f"{len(mac) - MAC_SIZE} bytes left over after the MESSAGE header"
                             if len(mac) > MAC_SIZE else
                             f"a field runs past the end of its frame part ({MAC_SIZE} bytes "
                             f"at offset {signed_end} of {size})")
    if validation >= len(VALIDATIONS):
        raise FrameError(f"unknown validation code {validation}")
    if sequence < 0:
        raise FrameError(f"a message sequence number {sequence} is negative")
    if not 0 <= fragment_number < fragment_count:
        raise FrameError(f"fragment {fragment_number} of {fragment_count} is not valid")
    if not from_service or not to_service or not contract or not message_type:
        raise FrameError("a MESSAGE names an empty service, contract or message type")
    if (misfit := fragment_misfit(len(body), fragment_count, message_size)) is not None:
        raise FrameError(misfit)
    if priority > 10:
        raise FrameError(f"priority {priority} is over 10")
    fragment = MessageFragment(
        conversation_id, bool(flags & FLAG_FROM_INITIATOR), sequence, fragment_number,
        fragment_count, message_size, from_service, to_service, from_broker, to_broker,
        contract, message_type, VALIDATIONS[validation], bool(flags & FLAG_END_OF_DIALOG),
        bool(flags & FLAG_ERROR), priority, lifetime_ms, hops, key_id,
        bytes(body) if copy_body else body, ack, mac, ttl, consumed, traceparent)
    # P6: what the MAC covers before the body, as it arrived: the flags byte without the
    # acknowledgement's flag, and the header up to the key id and the trace context (see
    # frame_macs.py)
    fragment.signed = bytes((flags & ~FLAG_HAS_ACK,)) + bytes(header[:signed_end])
    return fragment


def decode_parts(kind: int, flags: int, header: memoryview, body: memoryview,
                 copy_body: bool = True) -> Frame:
    if kind == MESSAGE:
        return _decode_message(flags, header, body, copy_body)
    if flags and kind not in (NOTICE, PROBE):
        raise FrameError(f"a {TYPE_NAMES.get(kind, kind)} frame has flags 0x{flags:02x}")
    if kind == ACK:
        if len(header):
            raise FrameError("an ACK frame has a header")
        r = Reader(body)
        count = r.u16()
        if count > MAX_ACK_ENTRIES:
            raise FrameError(f"an ACK frame with {count} entries (at most {MAX_ACK_ENTRIES})")
        entries = tuple(read_ack_entry(r) for _ in range(count))
        r.end("ACK entries")
        return Ack(entries)
    if len(body):
        raise FrameError(f"a {TYPE_NAMES.get(kind, kind)} frame has a body")
    r = Reader(header)
    if kind == NOTICE:
        if flags & ~(FLAG_ABOUT_INITIATOR | FLAG_FATAL):
            raise FrameError(f"unknown NOTICE flags 0x{flags:02x}")
        conversation_id = r.required_guid("conversation id")
        broker, sequence, code, text = r.guid(), r.i64(), r.i32(), r.text()
        key_id, mac = bytes(r.take(KEY_ID_SIZE)), bytes(r.take(MAC_SIZE))
        r.end("NOTICE header")
        return Notice(conversation_id, bool(flags & FLAG_ABOUT_INITIATOR), broker, sequence, code,
                      text, bool(flags & FLAG_FATAL), key_id, mac)
    if kind == PROBE:
        if flags & ~FLAG_ANSWER:
            raise FrameError(f"unknown PROBE flags 0x{flags:02x}")
        probe_id = r.required_guid("probe id")
        service, broker, role = r.text(), r.guid(), r.text()
        key_id, mac = bytes(r.take(KEY_ID_SIZE)), bytes(r.take(MAC_SIZE))
        r.end("PROBE header")
        return Probe(probe_id, service, broker, bool(flags & FLAG_ANSWER), role, key_id, mac)
    if kind == HELLO:
        instance_id = r.required_guid("instance id")
        max_body = r.u32()
        count = r.u16()
        if count > 4096:
            raise FrameError(f"a HELLO lists {count} databases (at most 4096)")
        brokers = tuple(r.required_guid("broker instance") for _ in range(count))
        address = r.text()
        key_id = bytes(r.take(KEY_ID_SIZE))
        r.end("HELLO header")
        return Hello(instance_id, brokers, max_body, address, key_id)
    if kind == KEEPALIVE:
        r.end("KEEPALIVE header")
        return Keepalive()
    if kind == CLOSE:
        reason = r.text()
        r.end("CLOSE header")
        return Close(reason)
    raise FrameError(f"unknown frame type {kind}")


def decode(data: bytes) -> Frame:
    """Exactly one whole frame (tests and fuzzing); FrameError for anything else."""
    decoder = FrameDecoder()
    frames = decoder.feed(data)
    if len(frames) != 1 or decoder.buffered:
        raise FrameError(f"expected one whole frame, got {len(frames)} and "
                         f"{decoder.buffered} bytes more")
    return frames[0]


class FrameDecoder:
    """Bytes in, whole frames out; bounded by MAX_HEADER and ``max_body``."""

    def __init__(self, max_body: int = DEFAULT_MAX_BODY) -> None:
        self.max_body = max_body
        self._buffer = bytearray()
        self._failed: FrameError | None = None

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Frame]:
        if self._failed is not None:
            raise FrameError(f"the stream already failed: {self._failed}")
        self._buffer += data
        buffer = self._buffer
        frames: list[Frame] = []
        pos = 0  # whole frames are cut off the buffer once, at the end (not one by one)
        view = memoryview(buffer)
        try:
            while len(buffer) - pos >= PREFIX_SIZE:
                magic, version, kind, flags, zero, header_len, body_len = PREFIX.unpack_from(
                    buffer, pos)
                if magic != MAGIC:
                    raise FrameError(f"not a pybroker frame (starts {bytes(magic)!r})")
                if version != VERSION:
                    raise FrameError(f"frame version {version}; this broker speaks {VERSION}")
                if zero:
                    raise FrameError("a reserved byte of the frame prefix is not zero")
                if header_len > MAX_HEADER:
                    raise FrameError(f"a frame header of {header_len} bytes is over "
                                     f"{MAX_HEADER}")
                if body_len > self.max_body:
                    raise FrameError(f"a frame body of {body_len} bytes is over "
                                     f"{self.max_body}")
                start = pos + PREFIX_SIZE
                end = start + header_len + body_len
                if len(buffer) < end:
                    break
                frames.append(decode_parts(kind, flags, view[start:start + header_len],
                                           view[start + header_len:end]))
                pos = end
        except FrameError as exc:
            self._failed = exc  # the stream is dead: its buffer stays as it is
            raise
        view.release()
        if pos:
            del buffer[:pos]
        return frames
