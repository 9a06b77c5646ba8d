"""Integrity of the frames (P6): what a MAC covers, signing and verifying, and the sending
path of a message fragment, checked, signed and encoded in one go.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import struct
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pybroker.core.wire.frame_fields import (
    FIXED,
    STATIC,
    Writer,
    guid_bytes,
    message_flags,
    notice_flags,
    notice_header,
    probe_header,
    trace_context_field,
    write_ack_entry,
)
from pybroker.core.wire.frame_types import (
    FLAG_HAS_ACK,
    KEY_ID_SIZE,
    MAC_SIZE,
    MAGIC,
    MAX_ACK_RANGES,
    MAX_HEADER,
    MESSAGE,
    NO_GUID,
    PREFIX,
    VALIDATIONS,
    VERSION,
    AckEntry,
    MessageFragment,
    Notice,
    Probe,
    fragment_misfit,
)
from pybroker.errors import FrameError

# -- MACs (P6) --------------------------------------------------------------------------


def signed_bytes(item: MessageFragment | AckEntry | Notice | Probe) -> bytes:
    """What the MAC of ``item`` covers: every field but the MAC (a fragment's body too;
    not the acknowledgement riding in its header, which has a MAC of its own)."""
    if isinstance(item, MessageFragment):
        signed = item.signed
        return (_signed_header(item) if signed is None else signed) + bytes(item.body)
    if isinstance(item, AckEntry):
        w = Writer()
        write_ack_entry(w, item, with_mac=False)
        return w.value()
    if isinstance(item, Probe):
        return bytes((int(item.is_answer),)) + probe_header(item, with_mac=False)
    return bytes((notice_flags(item),)) + notice_header(item, with_mac=False)


def _signed_header(f: MessageFragment) -> bytes:
    """The flags byte and the header up to the MAC, without the acknowledgement (what the
    MAC covers before the body): built as ``encode_message`` builds it, without its checks
    (a decoded fragment passed the decoder's)."""
    if len(f.key_id) != KEY_ID_SIZE:
        raise FrameError(f"a {KEY_ID_SIZE}-byte field was given {len(f.key_id)} bytes")
    code = VALIDATIONS.index(f.validation) if f.validation in VALIDATIONS else 255
    signed = bytes((message_flags(f) & ~FLAG_HAS_ACK,)) + _message_core(
        f, _names_unchecked, _guid_or_zero, code)
    if f.traceparent is not None:
        signed += trace_context_field(f.traceparent)
    return signed


def _message_core(f: MessageFragment, names: Callable[..., bytes],
                  guid: Callable[[Any, str], bytes], validation: int) -> bytes:
    """A MESSAGE header's fields from the conversation id to the key id, in order: the part
    the MAC covers. ``guid`` writes the conversation id, ``names`` the fields after the
    fixed ones (``_names_checked`` on the sending path, ``_names_unchecked`` to sign or
    verify a fragment as it is)."""
    return b"".join((
        guid(f.conversation_id, "conversation id"),
        FIXED.pack(f.sequence, f.fragment_number, f.fragment_count, f.message_size),
        names(f.from_service, f.to_service, f.from_broker_instance, f.to_broker_instance,
              f.contract, f.message_type, validation, f.priority, f.lifetime_ms,
              f.hops_remaining, f.time_to_live_ms, f.time_consumed_ms, bytes(f.key_id)),
    ))


def _names(text: Callable[[str, str], bytes], guid: Callable[[Any, str], bytes],
           from_service: str, to_service: str, from_broker: str, to_broker: str | None,
           contract: str, message_type: str, validation: int, priority: int,
           lifetime_ms: int, hops: int, time_to_live_ms: int, time_consumed_ms: int,
           key_id: bytes) -> bytes:
    """A MESSAGE header's fields after its fixed ones, to the key id: the same for every
    message of a conversation direction, so the two callers below are cached. ``text`` and
    ``guid`` write the named fields (checked as the peer's decoder checks them on the
    sending path; as they are otherwise)."""
    return b"".join((
        text(from_service, "sending service"),
        text(to_service, "target service"),
        guid(from_broker, "sending broker instance"),
        NO_GUID if to_broker is None else guid_bytes(to_broker),
        text(contract, "contract"),
        text(message_type, "message type"),
        STATIC.pack(validation, priority, lifetime_ms, hops, time_to_live_ms,
                    time_consumed_ms),
        key_id,
    ))


@functools.lru_cache(maxsize=4096)
def _names_unchecked(*fields: Any) -> bytes:
    return _names(_text_raw, _guid_or_zero, *fields)


@functools.lru_cache(maxsize=4096)
def _text_raw(value: str, what: str = "") -> bytes:
    """A string field as written (length and UTF-8), unchecked but for its length."""
    data = value.encode("utf-8")
    if len(data) > 0xFFFF:
        raise FrameError(f"a string of {len(data)} bytes does not fit a frame field")
    return struct.pack("!H", len(data)) + data


def _guid_or_zero(value: str | None, what: str = "") -> bytes:
    return NO_GUID if value is None else guid_bytes(value)


# Keyed BLAKE2b hashers with no data yet, one per key (a dialog's key per conversation
# direction): a MAC starts from a copy, which costs a third less than a new keyed hasher
# (that compresses the key's block first). Bounded by clearing, as the keys' own cache is.
_KEYED: dict[bytes, Any] = {}
_KEYED_SIZE = 8192


def _hasher(key: bytes) -> Any:
    """A keyed BLAKE2b of MAC_SIZE bytes under ``key``, with nothing hashed yet."""
    base = _KEYED.get(key)
    if base is None:
        if len(_KEYED) >= _KEYED_SIZE:
            _KEYED.clear()
        base = _KEYED[bytes(key)] = hashlib.blake2b(key=key, digest_size=MAC_SIZE)
    return base.copy()


def compute_mac(key: bytes, data: bytes) -> bytes:
    h = _hasher(key)
    h.update(data)
    return h.digest()


def _mac(item: MessageFragment | AckEntry | Notice | Probe, key: bytes) -> bytes:
    if isinstance(item, MessageFragment):  # the body is hashed where it lies, not copied
        signed = item.signed
        h = _hasher(key)
        h.update(_signed_header(item) if signed is None else signed)
        h.update(item.body)
        return h.digest()
    return compute_mac(key, signed_bytes(item))


def sign(item, key: bytes):  # type: ignore[no-untyped-def]
    """``item`` with its MAC set under ``key``."""
    if type(item) is AckEntry:  # every entry that leaves: built directly, not by replace
        return AckEntry(item.conversation_id, item.acks_initiator, item.broker_instance,
                        item.key_id, item.through_sequence, item.ranges, _mac(item, key))
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
    raw = guid_bytes(value)
    if raw == NO_GUID:
        raise FrameError(f"not sent, the peer would refuse it: the {what} of a frame is "
                         "missing (all-zero GUID)")
    return raw


@functools.lru_cache(maxsize=4096)
def _names_checked(*fields: Any) -> bytes:
    return _names(_text_field, _required_guid_field, *fields)


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
        if (misfit := fragment_misfit(size, f.fragment_count, f.message_size)) is not None:
            raise FrameError(f"not sent, the peer would refuse it: {misfit}")
        if f.validation not in VALIDATIONS:
            raise FrameError(f"not sent, the peer would refuse it: unknown validation "
                             f"{f.validation!r}")
        if not 0 <= f.priority <= 10:
            raise FrameError(f"not sent, the peer would refuse it: priority {f.priority} is "
                             "not from 0 to 10")
        if len(f.key_id) != KEY_ID_SIZE:
            raise FrameError(f"a {KEY_ID_SIZE}-byte field was given {len(f.key_id)} bytes")
        core = _message_core(f, _names_checked, _required_guid_field,
                             VALIDATIONS.index(f.validation))
        if f.traceparent is not None:  # under the MAC, after the key id (frames.py)
            core += trace_context_field(f.traceparent)
        flags = message_flags(f) & ~FLAG_HAS_ACK
        h = _hasher(key)
        h.update(bytes((flags,)))
        h.update(core)
        h.update(f.body)
        mac = h.digest()
        if ack is not None:
            check_ack_entry(ack)
            w = Writer()
            write_ack_entry(w, ack)
            header = b"".join((core, w.value(), mac))
            flags |= FLAG_HAS_ACK
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
    """FrameError if this acknowledgement entry could not be written or the peer's decoder
    would refuse it: exactly what encoding it in an ACK frame and decoding that refuses
    (tests/test_wire_encode_message.py holds the two against each other), without either."""
    try:
        if e.through_sequence < 0:
            raise FrameError(f"not sent, the peer would refuse it: an acknowledgement through "
                             f"sequence {e.through_sequence} is negative")
        if len(e.ranges) > MAX_ACK_RANGES:
            raise FrameError(f"an acknowledgement carries at most {MAX_ACK_RANGES} ranges")
        for seq, first, last in e.ranges:
            if first > last or seq < 0:
                raise FrameError(f"not sent, the peer would refuse it: an acknowledged range "
                                 f"({seq}, {first}-{last}) is not valid")
            if seq > _I64_MAX or first < 0 or last > _U32_MAX:
                raise FrameError(f"an acknowledged range ({seq}, {first}-{last}) does not fit "
                                 "its fields")
        if e.through_sequence > _I64_MAX:
            raise FrameError(f"an acknowledgement through sequence {e.through_sequence} does "
                             "not fit its field")
        if len(e.key_id) != KEY_ID_SIZE or len(e.mac) != MAC_SIZE:
            raise FrameError(f"an acknowledgement's key id ({len(e.key_id)} bytes) or MAC "
                             f"({len(e.mac)} bytes) is not {KEY_ID_SIZE} or {MAC_SIZE} bytes")
        if e.conversation_id is None or e.broker_instance is None:
            raise FrameError("not sent, the peer would refuse it: an acknowledgement names no "
                             "conversation or no acknowledging broker instance")
        _required_guid_field(e.conversation_id, "conversation id")
        _required_guid_field(e.broker_instance, "acknowledging broker instance")
    except (ValueError, TypeError, AttributeError) as exc:
        if isinstance(exc, FrameError):
            raise
        raise FrameError(f"cannot encode AckEntry: {exc}") from None


_I64_MAX = 2**63 - 1
_U32_MAX = 2**32 - 1

