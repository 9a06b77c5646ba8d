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
                 initiator, 2 end of dialog, 4 error, 8 an acknowledgement rides along.
                 conversation id (GUID) | sequence (8) | fragment number (4) | fragment
                 count (4) | message size (8) | from service, to service (strings) | from
                 and to broker identifiers (GUIDs) | contract, message type (strings) |
                 validation (1: N, E, X) | priority (1, 0-10) | lifetime (8, epoch ms) |
                 hops remaining (1, R7.1) | time to live (4, ms) | time consumed (4, ms,
                 R7.1) | key id (8) | [one ACK entry, flag 8] | MAC (16).
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
fragment's MAC covers its flags byte (without flag 8), its header up to the key id and its
body; an acknowledgement entry and a notice (with its flags byte) carry their own.
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
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pybroker.errors import FrameError

MAGIC = b"PB"
VERSION = 2  # 2: MESSAGE headers carry the time to live and time consumed (R7.1)
PREFIX = struct.Struct("!2sBBBBHI")
PREFIX_SIZE = PREFIX.size  # 12
MAX_HEADER = 16 * 1024
DEFAULT_MAX_BODY = 16 * 2**20  # bytes of one frame's body; a fragment is at most this
MAX_ACK_ENTRIES = 4096
MAX_ACK_RANGES = 1024
MAC_SIZE = 16
KEY_ID_SIZE = 8
NO_GUID = bytes(16)
# R7.1: a message's time to live in forwarders (ms). Longer than the sender's longest
# retransmission interval (C5, 64 s unscaled) would keep a copy in memory that a fresher
# copy has already replaced, so it is 60 s.
DEFAULT_TIME_TO_LIVE_MS = 60_000

HELLO, MESSAGE, ACK, NOTICE, KEEPALIVE, CLOSE, PROBE = 1, 2, 3, 4, 5, 6, 7
TYPE_NAMES = {HELLO: "HELLO", MESSAGE: "MESSAGE", ACK: "ACK", NOTICE: "NOTICE",
              KEEPALIVE: "KEEPALIVE", CLOSE: "CLOSE", PROBE: "PROBE"}

# MESSAGE flags
_FROM_INITIATOR, _END_OF_DIALOG, _ERROR, _HAS_ACK = 1, 2, 4, 8
# NOTICE flags
_ABOUT_INITIATOR, _FATAL = 1, 2
# PROBE flags
_ANSWER = 1
_VALIDATIONS = ("N", "E", "X")


# -- the frames -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    """The first frame each way on a connection (after TLS): who is talking."""

    instance_id: str  # the instance's GUID
    broker_instances: tuple[str, ...]  # the databases it holds (R6, R7.2)
    max_body: int  # the largest frame body it accepts
    address: str = ""  # its own endpoint's address (tcp://host:port), "" if none: the
    # other side may send on this connection instead of opening one back
    key_id: bytes = bytes(KEY_ID_SIZE)  # its certificate's key id: who it says it is on a
    # connection without TLS (every dialog frame's MAC then proves it)


@dataclass(frozen=True, slots=True)
class AckEntry:
    """P5.1: one conversation direction's acknowledgement, covering many fragments:
    every message below ``through_sequence`` and the (sequence, first, last fragment)
    ``ranges``. ``broker_instance`` is the acknowledging database's identifier (R5 pins the
    conversation to it)."""

    conversation_id: str
    acks_initiator: bool  # acknowledges what the initiator sent
    broker_instance: str
    key_id: bytes
    through_sequence: int
    ranges: tuple[tuple[int, int, int], ...] = ()
    mac: bytes = bytes(MAC_SIZE)


@dataclass(frozen=True, slots=True)
class MessageFragment:
    """One fragment of a sequenced message (P3.1, P4.1), with an acknowledgement for the
    other direction riding in its header when there is one (P5.1)."""

    conversation_id: str
    from_initiator: bool
    sequence: int
    fragment_number: int
    fragment_count: int
    message_size: int
    from_service: str
    to_service: str
    from_broker_instance: str
    to_broker_instance: str | None
    contract: str
    message_type: str
    validation: str  # N, E or X
    is_end_of_dialog: bool
    is_error: bool
    priority: int
    lifetime_ms: int  # the conversation's expiry, epoch milliseconds (both sides share it)
    hops_remaining: int  # R7.1
    key_id: bytes  # which instance's key signs it (the originator's certificate)
    body: bytes | memoryview
    ack: AckEntry | None = None
    mac: bytes = bytes(MAC_SIZE)
    # R7.1: how long the message may spend in forwarders, and how long it has spent (ms);
    # the originator sets the first, each forwarder adds to the second
    time_to_live_ms: int = DEFAULT_TIME_TO_LIVE_MS
    time_consumed_ms: int = 0


@dataclass(frozen=True, slots=True)
class Notice:
    """An unsequenced broker error or refusal about a message (P3.3): fatal ones end the
    conversation (``code`` is SQL Server's error number), the others say why the target
    cannot take it now, and the sender keeps retrying."""

    conversation_id: str
    about_initiator: bool  # about a message the initiator sent (so it goes to the initiator)
    broker_instance: str | None  # the notifier's database, if it has one
    sequence: int
    code: int
    text: str
    is_fatal: bool
    key_id: bytes
    mac: bytes = bytes(MAC_SIZE)


@dataclass(frozen=True, slots=True)
class Ack:
    """A dedicated acknowledgement frame (P5.1): entries for many conversations."""

    entries: tuple[AckEntry, ...]


@dataclass(frozen=True, slots=True)
class Keepalive:
    pass


@dataclass(frozen=True, slots=True)
class Close:
    reason: str


@dataclass(frozen=True, slots=True)
class Probe:
    """R9.2: "is the database of ``service`` (with ``broker_instance``, when named)
    principal here?", asked of both addresses of a mirrored route, and the answer
    (``is_answer``, ``role``: PRINCIPAL, MIRROR, or "" when no such database is here)."""

    probe_id: str
    service: str
    broker_instance: str | None
    is_answer: bool
    role: str
    key_id: bytes
    mac: bytes = bytes(MAC_SIZE)


Frame = Hello | MessageFragment | Ack | Notice | Keepalive | Close | Probe


# -- writing ----------------------------------------------------------------------------


class _Writer:
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
        self.parts.append(NO_GUID if v is None else _guid_bytes(v))

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


def _write_ack_entry(w: _Writer, e: AckEntry, *, with_mac: bool = True) -> None:
    w.guid(e.conversation_id)
    w.u8(1 if e.acks_initiator else 0)
    w.guid(e.broker_instance)
    w.raw(e.key_id, KEY_ID_SIZE)
    w.i64(e.through_sequence)
    if len(e.ranges) > MAX_ACK_RANGES:
        raise FrameError(f"an acknowledgement carries at most {MAX_ACK_RANGES} ranges")
    w.u16(len(e.ranges))
    for seq, first, last in e.ranges:
        w.i64(seq)
        w.u32(first)
        w.u32(last)
    if with_mac:
        w.raw(e.mac, MAC_SIZE)


@functools.lru_cache(maxsize=65536)
def _guid_bytes(v: str) -> bytes:
    return uuid.UUID(v).bytes


@functools.lru_cache(maxsize=65536)
def _guid_text(raw: bytes) -> str:
    return str(uuid.UUID(bytes=raw))


_FIXED = struct.Struct("!qIIQ")


def _message_header(f: MessageFragment, *, with_mac: bool = True,
                    with_ack: bool = True) -> bytes:
    w = _Writer()
    w.guid(f.conversation_id)
    w.parts.append(_FIXED.pack(f.sequence, f.fragment_number, f.fragment_count,
                               f.message_size))
    w.text(f.from_service)
    w.text(f.to_service)
    w.guid(f.from_broker_instance)
    w.guid(f.to_broker_instance)
    w.text(f.contract)
    w.text(f.message_type)
    w.u8(_VALIDATIONS.index(f.validation) if f.validation in _VALIDATIONS else 255)
    w.u8(f.priority)
    w.i64(f.lifetime_ms)
    w.u8(f.hops_remaining)
    w.u32(f.time_to_live_ms)
    w.u32(f.time_consumed_ms)
    w.raw(f.key_id, KEY_ID_SIZE)
    if f.ack is not None and with_ack:
        _write_ack_entry(w, f.ack)
    if with_mac:
        w.raw(f.mac, MAC_SIZE)
    return w.value()


def _message_flags(f: MessageFragment) -> int:
    return ((_FROM_INITIATOR if f.from_initiator else 0)
            | (_END_OF_DIALOG if f.is_end_of_dialog else 0)
            | (_ERROR if f.is_error else 0)
            | (_HAS_ACK if f.ack is not None else 0))


def _notice_header(n: Notice, *, with_mac: bool = True) -> bytes:
    w = _Writer()
    w.guid(n.conversation_id)
    w.guid(n.broker_instance)
    w.i64(n.sequence)
    w.i32(n.code)
    w.text(n.text)
    w.raw(n.key_id, KEY_ID_SIZE)
    if with_mac:
        w.raw(n.mac, MAC_SIZE)
    return w.value()


def _notice_flags(n: Notice) -> int:
    return (_ABOUT_INITIATOR if n.about_initiator else 0) | (_FATAL if n.is_fatal else 0)


def _probe_header(p: Probe, *, with_mac: bool = True) -> bytes:
    w = _Writer()
    w.guid(p.probe_id)
    w.text(p.service)
    w.guid(p.broker_instance)
    w.text(p.role)
    w.raw(p.key_id, KEY_ID_SIZE)
    if with_mac:
        w.raw(p.mac, MAC_SIZE)
    return w.value()


def encode(frame: Frame) -> bytes:
    """The bytes of one frame. Raises FrameError for a value no frame can carry."""
    body: bytes | memoryview = b""
    flags = 0
    try:
        if isinstance(frame, MessageFragment):
            kind, flags, header, body = (
                MESSAGE, _message_flags(frame), _message_header(frame), frame.body)
        elif isinstance(frame, Ack):
            if len(frame.entries) > MAX_ACK_ENTRIES:
                raise FrameError(f"an ACK frame carries at most {MAX_ACK_ENTRIES} entries")
            w = _Writer()
            w.u16(len(frame.entries))
            for entry in frame.entries:
                _write_ack_entry(w, entry)
            kind, header, body = ACK, b"", w.value()
        elif isinstance(frame, Notice):
            kind, flags, header = NOTICE, _notice_flags(frame), _notice_header(frame)
        elif isinstance(frame, Hello):
            w = _Writer()
            w.guid(frame.instance_id)
            w.u32(frame.max_body)
            w.u16(len(frame.broker_instances))
            for b in frame.broker_instances:
                w.guid(b)
            w.text(frame.address)
            w.raw(frame.key_id, KEY_ID_SIZE)
            kind, header = HELLO, w.value()
        elif isinstance(frame, Probe):
            kind, flags, header = PROBE, _ANSWER if frame.is_answer else 0, _probe_header(frame)
        elif isinstance(frame, Keepalive):
            kind, header = KEEPALIVE, b""
        elif isinstance(frame, Close):
            w = _Writer()
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


# -- MACs (P6) --------------------------------------------------------------------------


def signed_bytes(item: MessageFragment | AckEntry | Notice | Probe) -> bytes:
    """What the MAC of ``item`` covers: every field but the MAC (a fragment's body too;
    not the acknowledgement riding in its header, which has a MAC of its own)."""
    if isinstance(item, MessageFragment):
        return _signed_header(item) + bytes(item.body)
    if isinstance(item, AckEntry):
        w = _Writer()
        _write_ack_entry(w, item, with_mac=False)
        return w.value()
    if isinstance(item, Probe):
        return bytes((int(item.is_answer),)) + _probe_header(item, with_mac=False)
    return bytes((_notice_flags(item),)) + _notice_header(item, with_mac=False)


def _signed_header(f: MessageFragment) -> bytes:
    """The flags byte and the header up to the MAC, without the acknowledgement (what the
    MAC covers before the body): built as ``encode_message`` builds it, without its checks
    (a decoded fragment passed the decoder's)."""
    if len(f.key_id) != KEY_ID_SIZE:
        raise FrameError(f"a {KEY_ID_SIZE}-byte field was given {len(f.key_id)} bytes")
    code = _VALIDATIONS.index(f.validation) if f.validation in _VALIDATIONS else 255
    return bytes((_message_flags(f) & ~_HAS_ACK,)) + _message_core(
        f, _text_raw, _guid_or_zero, code)


def _message_core(f: MessageFragment, text: Callable[[str, str], bytes],
                  guid: Callable[[Any, str], bytes], validation: int) -> bytes:
    """A MESSAGE header's fields from the conversation id to the key id, in order: the part
    the MAC covers. ``text`` and ``guid`` write the named fields (checked on the sending
    path, as they are; unchecked to verify a decoded fragment)."""
    return b"".join((
        guid(f.conversation_id, "conversation id"),
        _FIXED.pack(f.sequence, f.fragment_number, f.fragment_count, f.message_size),
        text(f.from_service, "sending service"),
        text(f.to_service, "target service"),
        guid(f.from_broker_instance, "sending broker instance"),
        NO_GUID if f.to_broker_instance is None else _guid_bytes(f.to_broker_instance),
        text(f.contract, "contract"),
        text(f.message_type, "message type"),
        _STATIC.pack(validation, f.priority, f.lifetime_ms, f.hops_remaining,
                     f.time_to_live_ms, f.time_consumed_ms),
        bytes(f.key_id),
    ))


@functools.lru_cache(maxsize=4096)
def _text_raw(value: str, what: str = "") -> bytes:
    """A string field as written (length and UTF-8), unchecked but for its length."""
    data = value.encode("utf-8")
    if len(data) > 0xFFFF:
        raise FrameError(f"a string of {len(data)} bytes does not fit a frame field")
    return struct.pack("!H", len(data)) + data


def _guid_or_zero(value: str | None, what: str = "") -> bytes:
    return NO_GUID if value is None else _guid_bytes(value)


def compute_mac(key: bytes, data: bytes) -> bytes:
    return hashlib.blake2b(data, key=key, digest_size=MAC_SIZE).digest()


def _mac(item: MessageFragment | AckEntry | Notice | Probe, key: bytes) -> bytes:
    if isinstance(item, MessageFragment):  # the body is hashed where it lies, not copied
        h = hashlib.blake2b(_signed_header(item), key=key, digest_size=MAC_SIZE)
        h.update(item.body)
        return h.digest()
    return compute_mac(key, signed_bytes(item))


def sign(item, key: bytes):  # type: ignore[no-untyped-def]
    """``item`` with its MAC set under ``key``."""
    return replace(item, mac=_mac(item, key))


def verify(item: MessageFragment | AckEntry | Notice | Probe, key: bytes) -> bool:
    return hmac.compare_digest(item.mac, _mac(item, key))


# -- the sending path of a message fragment: checked, signed and encoded in one go --------


@functools.lru_cache(maxsize=4096)
def _text_field(value: str, what: str) -> bytes:
    """A string field as written (length and UTF-8), checked as the peer's decoder checks
    it; names repeat from message to message, so this is cached."""
    data = value.encode("utf-8")
    if len(data) > 0xFFFF:
        raise FrameError(f"a string of {len(data)} bytes does not fit a frame field")
    if "\x00" in value:
        raise FrameError(f"not sent, the peer would refuse it: the {what} holds a NUL character")
    if not value:
        raise FrameError("not sent, the peer would refuse it: a MESSAGE names an empty "
                         "service, contract or message type")
    return struct.pack("!H", len(data)) + data


def _required_guid_field(value: str, what: str) -> bytes:
    raw = _guid_bytes(value)
    if raw == NO_GUID:
        raise FrameError(f"not sent, the peer would refuse it: the {what} of a frame is "
                         "missing (all-zero GUID)")
    return raw


# validation, priority, lifetime_ms, hops_remaining, time_to_live_ms, time_consumed_ms
_STATIC = struct.Struct("!BBqBII")


def encode_message(f: MessageFragment, key: bytes, ack: AckEntry | None = None) -> bytes:
    """The MESSAGE frame of ``f``, its MAC computed under ``key`` (P6), with ``ack`` (signed)
    riding in its header: what ``encode(replace(sign(f, key), ack=ack))`` gives, with the
    header built once and no copies of the fragment. Values the peer's decoder would refuse
    raise FrameError here (``encode`` alone writes some of them), so a frame that leaves is
    one the peer accepts."""
    try:
        if f.sequence < 0:
            raise FrameError(f"not sent, the peer would refuse it: a message sequence number "
                             f"{f.sequence} is negative")
        if not 0 <= f.fragment_number < f.fragment_count:
            raise FrameError(f"not sent, the peer would refuse it: fragment "
                             f"{f.fragment_number} of {f.fragment_count} is not valid")
        size = len(f.body)
        if size > f.message_size or (f.fragment_count == 1 and size != f.message_size):
            raise FrameError(f"not sent, the peer would refuse it: a fragment of {size} bytes "
                             f"does not fit a message of {f.message_size} bytes")
        if f.validation not in _VALIDATIONS:
            raise FrameError(f"not sent, the peer would refuse it: unknown validation "
                             f"{f.validation!r}")
        if not 0 <= f.priority <= 10:
            raise FrameError(f"not sent, the peer would refuse it: priority {f.priority} is "
                             "not from 0 to 10")
        if len(f.key_id) != KEY_ID_SIZE:
            raise FrameError(f"a {KEY_ID_SIZE}-byte field was given {len(f.key_id)} bytes")
        core = _message_core(f, _text_field, _required_guid_field,
                             _VALIDATIONS.index(f.validation))
        flags = _message_flags(f) & ~_HAS_ACK
        h = hashlib.blake2b(bytes((flags,)), key=key, digest_size=MAC_SIZE)
        h.update(core)
        h.update(f.body)
        mac = h.digest()
        if ack is not None:
            check_ack_entry(ack)
            w = _Writer()
            _write_ack_entry(w, ack)
            header = b"".join((core, w.value(), mac))
            flags |= _HAS_ACK
        else:
            header = core + mac
    except (struct.error, ValueError, AttributeError, TypeError) as exc:
        if isinstance(exc, FrameError):
            raise
        raise FrameError(f"cannot encode MessageFragment: {exc}") from None
    if len(header) > MAX_HEADER:
        raise FrameError(f"a frame header of {len(header)} bytes is over {MAX_HEADER}")
    return b"".join((PREFIX.pack(MAGIC, VERSION, MESSAGE, flags, 0, len(header), size),
                     header, f.body))


def check_ack_entry(e: AckEntry) -> None:
    """FrameError if the peer's decoder would refuse this acknowledgement entry."""
    if e.through_sequence < 0:
        raise FrameError(f"not sent, the peer would refuse it: an acknowledgement through "
                         f"sequence {e.through_sequence} is negative")
    if len(e.ranges) > MAX_ACK_RANGES:
        raise FrameError(f"an acknowledgement carries at most {MAX_ACK_RANGES} ranges")
    for seq, first, last in e.ranges:
        if first > last or seq < 0:
            raise FrameError(f"not sent, the peer would refuse it: an acknowledged range "
                             f"({seq}, {first}-{last}) is not valid")
    _required_guid_field(e.conversation_id, "conversation id")
    _required_guid_field(e.broker_instance, "acknowledging broker instance")


# -- reading ----------------------------------------------------------------------------


class _Reader:
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
        return None if raw == NO_GUID else _guid_text(raw)

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


def _read_ack_entry(r: _Reader) -> AckEntry:
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


_GUID_FIXED = struct.Struct("!16sqIIQ")  # conversation id, then _FIXED
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


def _text_at(header: memoryview, pos: int) -> tuple[str, int]:
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


def _guid_at(header: memoryview, pos: int) -> str | None:
    raw = bytes(header[pos:pos + 16])
    if len(raw) != 16:
        raise FrameError(f"a field runs past the end of its frame part (16 bytes at offset "
                         f"{pos} of {len(header)})")
    return None if raw == NO_GUID else _guid_text(raw)


def _decode_message(flags: int, header: memoryview, body: memoryview,
                    copy_body: bool = True) -> MessageFragment:
    """A MESSAGE frame, its header read with a few fixed-layout unpacks (the hot path of
    arrivals): the same checks and errors as field by field."""
    if flags & ~(_FROM_INITIATOR | _END_OF_DIALOG | _ERROR | _HAS_ACK):
        raise FrameError(f"unknown MESSAGE flags 0x{flags:02x}")
    size = len(header)
    if size < _GUID_FIXED.size:
        raise FrameError(f"a field runs past the end of its frame part (MESSAGE header of "
                         f"{size} bytes)")
    conv_raw, sequence, fragment_number, fragment_count, message_size = (
        _GUID_FIXED.unpack_from(header, 0))
    if conv_raw == NO_GUID:
        raise FrameError("the conversation id of a frame is missing (all-zero GUID)")
    conversation_id = _guid_text(conv_raw)
    from_service, pos = _text_at(header, _GUID_FIXED.size)
    to_service, pos = _text_at(header, pos)
    from_broker = _guid_at(header, pos)
    if from_broker is None:
        raise FrameError("the sending broker instance of a frame is missing (all-zero GUID)")
    to_broker = _guid_at(header, pos + 16)
    contract, pos = _text_at(header, pos + 32)
    message_type, pos = _text_at(header, pos)
    if pos + _STATIC.size + KEY_ID_SIZE > size:
        raise FrameError(f"a field runs past the end of its frame part ({_STATIC.size} bytes "
                         f"at offset {pos} of {size})")
    validation, priority, lifetime_ms, hops, ttl, consumed = _STATIC.unpack_from(header, pos)
    pos += _STATIC.size
    key_id = bytes(header[pos:pos + KEY_ID_SIZE])
    r = _Reader(header)
    r.pos = pos + KEY_ID_SIZE
    ack = _read_ack_entry(r) if flags & _HAS_ACK else None
    mac = bytes(r.take(MAC_SIZE))
    r.end("MESSAGE header")
    if validation >= len(_VALIDATIONS):
        raise FrameError(f"unknown validation code {validation}")
    if sequence < 0:
        raise FrameError(f"a message sequence number {sequence} is negative")
    if not 0 <= fragment_number < fragment_count:
        raise FrameError(f"fragment {fragment_number} of {fragment_count} is not valid")
    if not from_service or not to_service or not contract or not message_type:
        raise FrameError("a MESSAGE names an empty service, contract or message type")
    if len(body) > message_size or (fragment_count == 1 and len(body) != message_size):
        raise FrameError(f"a fragment of {len(body)} bytes does not fit a message of "
                         f"{message_size} bytes")
    if priority > 10:
        raise FrameError(f"priority {priority} is over 10")
    return MessageFragment(
        conversation_id, bool(flags & _FROM_INITIATOR), sequence, fragment_number,
        fragment_count, message_size, from_service, to_service, from_broker, to_broker,
        contract, message_type, _VALIDATIONS[validation], bool(flags & _END_OF_DIALOG),
        bool(flags & _ERROR), priority, lifetime_ms, hops, key_id,
        bytes(body) if copy_body else body, ack, mac, ttl, consumed)


def _decode(kind: int, flags: int, header: memoryview, body: memoryview,
            copy_body: bool = True) -> Frame:
    if kind == MESSAGE:
        return _decode_message(flags, header, body, copy_body)
    if flags and kind not in (NOTICE, PROBE):
        raise FrameError(f"a {TYPE_NAMES.get(kind, kind)} frame has flags 0x{flags:02x}")
    if kind == ACK:
        if len(header):
            raise FrameError("an ACK frame has a header")
        r = _Reader(body)
        count = r.u16()
        if count > MAX_ACK_ENTRIES:
            raise FrameError(f"an ACK frame with {count} entries (at most {MAX_ACK_ENTRIES})")
        entries = tuple(_read_ack_entry(r) for _ in range(count))
        r.end("ACK entries")
        return Ack(entries)
    if len(body):
        raise FrameError(f"a {TYPE_NAMES.get(kind, kind)} frame has a body")
    r = _Reader(header)
    if kind == NOTICE:
        if flags & ~(_ABOUT_INITIATOR | _FATAL):
            raise FrameError(f"unknown NOTICE flags 0x{flags:02x}")
        conversation_id = r.required_guid("conversation id")
        broker, sequence, code, text = r.guid(), r.i64(), r.i32(), r.text()
        key_id, mac = bytes(r.take(KEY_ID_SIZE)), bytes(r.take(MAC_SIZE))
        r.end("NOTICE header")
        return Notice(conversation_id, bool(flags & _ABOUT_INITIATOR), broker, sequence, code,
                      text, bool(flags & _FATAL), key_id, mac)
    if kind == PROBE:
        if flags & ~_ANSWER:
            raise FrameError(f"unknown PROBE flags 0x{flags:02x}")
        probe_id = r.required_guid("probe id")
        service, broker, role = r.text(), r.guid(), r.text()
        key_id, mac = bytes(r.take(KEY_ID_SIZE)), bytes(r.take(MAC_SIZE))
        r.end("PROBE header")
        return Probe(probe_id, service, broker, bool(flags & _ANSWER), role, key_id, mac)
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
                frames.append(_decode(kind, flags, view[start:start + header_len],
                                      view[start + header_len:end]))
                pos = end
        except FrameError as exc:
            self._failed = exc  # the stream is dead: its buffer stays as it is
            raise
        view.release()
        if pos:
            del buffer[:pos]
        return frames
