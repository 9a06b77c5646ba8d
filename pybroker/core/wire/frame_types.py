"""The frames of the adjacent broker protocol as values (P1): their type codes, flags and
limits, and one dataclass per frame type. The layout of the bytes is in frames.py's
docstring.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

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
FLAG_FROM_INITIATOR, FLAG_END_OF_DIALOG, FLAG_ERROR, FLAG_HAS_ACK = 1, 2, 4, 8
# a W3C trace context rides in the header (pybroker/docs/otel.md): a peer that does not
# know the flag refuses the frame by name ("unknown MESSAGE flags 0x10")
FLAG_TRACE_CONTEXT = 16
# bytes of a trace context field at most (a W3C traceparent is 55 characters)
MAX_TRACE_CONTEXT = 256
# NOTICE flags
FLAG_ABOUT_INITIATOR, FLAG_FATAL = 1, 2
# PROBE flags
FLAG_ANSWER = 1
VALIDATIONS = ("N", "E", "X")


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


# Not frozen, unlike the other frames: one is built for every fragment sent and every one
# received, and a frozen dataclass's constructor (a call per field) costs 8x a plain one's
# at 25 fields. Treated as a value all the same: nothing changes a fragment in place
# (dataclasses.replace makes a changed copy), and it hashes by value (``unsafe_hash``).
@dataclass(slots=True, unsafe_hash=True)
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
    # the message's W3C traceparent (pybroker/docs/otel.md), None when it carries none: as
    # it came from the network, checked only for its size (tracing ignores a malformed one)
    traceparent: str | None = field(default=None, compare=False)
    # what the MAC covers before the body, as it arrived (the decoder sets it, the only
    # field set after construction): verified as received, not encoded again. Not a
    # constructor argument, so a copy made with dataclasses.replace (a forwarder's, whose
    # hops and time consumed change) has None and is encoded again when signed.
    signed: bytes | None = field(default=None, init=False, repr=False, compare=False)


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


def fragment_misfit(body_size: int, fragment_count: int, message_size: int) -> str | None:
    """Why a fragment of ``body_size`` bytes cannot be one of ``fragment_count`` of a
    message of ``message_size`` bytes (the sender checks before it sends, the receiver when
    it decodes), or None when it can."""
    if body_size > message_size or (fragment_count == 1 and body_size != message_size):
        return f"a fragment of {body_size} bytes does not fit a message of {message_size} bytes"
    return None
