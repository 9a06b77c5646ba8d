"""The client protocol's frames and values: bytes in, events out, nothing else.

A client process talks to the process that holds an instance file (``pybroker serve``, or
an application that connected with ``serve=True``) in frames of its own, unrelated
to the broker wire (pybroker.core.wire.frames). Every frame is

    magic "PBCS" (4) | version (1) | kind (1) | payload_len (4) | payload (payload_len)

all integers big-endian. The payload is one value in the typed encoding below. Kinds:

    HELLO    client -> server, first: {"version", "token", "read_only", "client"}
    WELCOME  server -> client: {"path", "server", "max_frame", "read_only", "timeout"}
    REFUSED  server -> client, then the server closes: [error class, message]
    CALL     client -> server: [call id, target, kind, method, args, kwargs]
    RESULT   server -> client: [call id, value]
    ERROR    server -> client: [call id, error class, message, attributes]
    PIPELINED client -> server, only inside a transaction: [call id, target, kind, method,
             args, kwargs, expected]; a call whose result the client has already given its
             caller (``expected``), so it does not wait for it. It is run in order, like a
             CALL, and never answered: if it fails, or its result is not ``expected``, the
             server rolls the session's transaction back and answers every later call of
             it (and its COMMIT) with that error (pybroker.server.session).

Values are typed, tag first: None, bool, int (64-bit, or a longer two's complement),
float, str, bytes, list, tuple, dict, datetime, date, time, timedelta, Decimal, UUID and
``Record`` (a name and a tuple of values: what the calls layer makes of the API's frozen
dataclasses and of Database and Conversation handles). Decoding builds only these types;
nothing in a frame names code to run (no pickle), and a record's name means something only
to the calls layer's whitelist.

Decoding is incremental (``FrameReader.feed``) and bounded: a payload over the reader's
``max_frame`` is refused as soon as its length arrives, values nest at most MAX_DEPTH
deep, and every length is checked against the bytes that are there. Any malformed input
raises :class:`ServerError` and nothing else; after one the reader refuses every later
feed (the connection is closed).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from pybroker.errors import ServerError

MAGIC = b"PBCS"
VERSION = 2  # 2: PIPELINED
HEADER = struct.Struct("!4sBBI")
HEADER_SIZE = HEADER.size  # 10
DEFAULT_MAX_FRAME = 64 * 2**20  # bytes of one payload: a message body sent is at most this
MAX_DEPTH = 32
# bytes asked of one recv(): a larger request costs a large allocation on every call
# (about 20 us for 1 MiB, ten times a small read), most of them to read a small frame
RECV_BYTES = 65536

HELLO, WELCOME, REFUSED, CALL, RESULT, ERROR, PIPELINED = 1, 2, 3, 4, 5, 6, 7
KIND_NAMES = {HELLO: "HELLO", WELCOME: "WELCOME", REFUSED: "REFUSED", CALL: "CALL",
              RESULT: "RESULT", ERROR: "ERROR", PIPELINED: "PIPELINED"}

# call kinds: a method call, a property read, a property write
CALL_METHOD, GET_PROPERTY, SET_PROPERTY = "call", "get", "set"


@dataclass(frozen=True, slots=True)
class Record:
    """A named tuple of values; what the name means is the calls layer's to say."""

    name: str
    fields: tuple[Any, ...]


# -- events (what a decoded frame says) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    version: int
    token: str | None
    read_only: bool
    client: str


@dataclass(frozen=True, slots=True)
class Welcome:
    path: str
    server: str
    max_frame: int
    read_only: bool
    timeout: float


@dataclass(frozen=True, slots=True)
class Refused:
    error_class: str
    message: str


@dataclass(frozen=True, slots=True)
class Call:
    call_id: int
    target: tuple[Any, ...]
    kind: str
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    pipelined: bool = False  # a PIPELINED frame: not answered, its result is ``expected``
    expected: Any = None


@dataclass(frozen=True, slots=True)
class Result:
    call_id: int
    value: Any


@dataclass(frozen=True, slots=True)
class Failure:
    call_id: int
    error_class: str
    message: str
    attributes: dict[str, Any]


Event = Hello | Welcome | Refused | Call | Result | Failure


# -- frames -----------------------------------------------------------------------------


def frame(kind: int, value: Any, max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    """One frame carrying ``value``; a payload over ``max_frame`` raises ServerError."""
    if kind not in KIND_NAMES:
        raise ServerError(f"unknown client frame kind {kind}")
    out = bytearray(HEADER_SIZE)
    encode_value(value, out)
    size = len(out) - HEADER_SIZE
    if size > max_frame:
        raise ServerError(
            f"a {KIND_NAMES[kind]} frame of {size:,} bytes is larger than the largest the "
            f"client protocol carries ({max_frame:,} bytes); send less at once (a smaller "
            "body, fewer rows: LIMIT)")
    HEADER.pack_into(out, 0, MAGIC, VERSION, kind, size)
    return bytes(out)


def hello(token: str | None, read_only: bool, client: str) -> bytes:
    return frame(HELLO, {"version": VERSION, "token": token, "read_only": read_only,
                         "client": client})


def welcome(path: str, server: str, max_frame: int, read_only: bool, timeout: float) -> bytes:
    return frame(WELCOME, {"path": path, "server": server, "max_frame": max_frame,
                           "read_only": read_only, "timeout": timeout})


def refused(error_class: str, message: str) -> bytes:
    return frame(REFUSED, [error_class, message])


def call(call_id: int, target: tuple[Any, ...], kind: str, method: str,
         args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None,
         max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    return frame(CALL, [call_id, tuple(target), kind, method, tuple(args), kwargs or {}],
                 max_frame)


def pipelined(call_id: int, target: tuple[Any, ...], kind: str, method: str,
              args: tuple[Any, ...], kwargs: dict[str, Any] | None, expected: Any,
              max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    return frame(PIPELINED, [call_id, tuple(target), kind, method, tuple(args),
                             kwargs or {}, expected], max_frame)


def result(call_id: int, value: Any, max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    return frame(RESULT, [call_id, value], max_frame)


def failure(call_id: int, error_class: str, message: str,
            attributes: dict[str, Any] | None = None) -> bytes:
    return frame(ERROR, [call_id, error_class, message, attributes or {}])


class FrameReader:
    """Bytes in (``feed``), events out (``next_event``). ``pending`` says whether part of a
    frame is waiting for the rest (the server's time-out for an unfinished request)."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._failed: ServerError | None = None

    @property
    def pending(self) -> bool:
        return bool(self._buffer)

    def feed(self, data: bytes) -> None:
        if self._failed is not None:
            raise self._failed
        self._buffer += data
        if len(self._buffer) >= HEADER_SIZE:
            self._check_header()

    def next_event(self) -> Event | None:
        """The next whole frame's event, or None until more bytes arrive."""
        if self._failed is not None:
            raise self._failed
        if len(self._buffer) < HEADER_SIZE:
            return None
        _, _, kind, size = self._check_header()
        end = HEADER_SIZE + size
        if len(self._buffer) < end:
            return None
        payload = bytes(self._buffer[HEADER_SIZE:end])
        del self._buffer[:end]
        try:
            return _event(kind, decode_value(payload))
        except ServerError as exc:
            self._failed = exc
            raise

    def _check_header(self) -> tuple[bytes, int, int, int]:
        magic, version, kind, size = HEADER.unpack_from(self._buffer, 0)
        problem = None
        if magic != MAGIC:
            problem = "they are not a pybroker client frame (wrong magic)"
        elif version != VERSION:
            problem = (f"they are client protocol version {version}; this pybroker speaks "
                       f"version {VERSION} (use the same pybroker on both sides)")
        elif kind not in KIND_NAMES:
            problem = f"the frame kind {kind} is unknown"
        elif size > self.max_frame:
            problem = (f"the frame of {size:,} bytes is larger than the largest accepted "
                       f"({self.max_frame:,} bytes)")
        if problem is not None:
            self._failed = ServerError(f"bytes received were refused: {problem}")
            raise self._failed
        return magic, version, kind, size


def _event(kind: int, value: Any) -> Event:
    """A decoded payload checked against its kind's shape."""
    def bad() -> ServerError:
        return ServerError(f"a {KIND_NAMES[kind]} frame does not have its fields")

    # a call, the most frequent frame, by exact types (the decoder builds no subclasses)
    if kind in (CALL, PIPELINED) and type(value) is list and len(value) == (
            6 if kind == CALL else 7) and type(value[0]) is int and type(
            value[1]) is tuple and type(value[2]) is str and type(value[3]) is str and type(
            value[4]) is tuple and type(value[5]) is dict:
        if value[5] and not all(type(k) is str for k in value[5]):
            raise bad()
        if kind == PIPELINED:
            return Call(*value[:6], pipelined=True, expected=value[6])
        return Call(*value)

    if kind in (HELLO, WELCOME):
        if not isinstance(value, dict):
            raise bad()
        try:
            if kind == HELLO:
                event: Event = Hello(value["version"], value["token"], value["read_only"],
                                     value["client"])
                ok = (_is_int(event.version) and isinstance(event.read_only, bool)
                      and isinstance(event.client, str)
                      and (event.token is None or isinstance(event.token, str)))
            else:
                event = Welcome(value["path"], value["server"], value["max_frame"],
                                value["read_only"], value["timeout"])
                ok = (isinstance(event.path, str) and isinstance(event.server, str)
                      and _is_int(event.max_frame) and isinstance(event.read_only, bool)
                      and isinstance(event.timeout, (int, float)))
        except (KeyError, TypeError):
            raise bad() from None
        if not ok:
            raise bad()
        return event
    shapes = {REFUSED: (str, str), CALL: (int, tuple, str, str, tuple, dict),
              PIPELINED: (int, tuple, str, str, tuple, dict, object),
              RESULT: (int, object), ERROR: (int, str, str, dict)}
    shape = shapes[kind]
    if not (isinstance(value, list) and len(value) == len(shape) and all(
            isinstance(v, t) and not (t is int and isinstance(v, bool))
            for v, t in zip(value, shape, strict=True))):
        raise bad()
    if kind == REFUSED:
        return Refused(*value)
    if kind in (CALL, PIPELINED):
        if not all(isinstance(k, str) for k in value[5]):
            raise bad()
        if kind == PIPELINED:
            return Call(*value[:6], pipelined=True, expected=value[6])
        return Call(*value)
    if kind == RESULT:
        return Result(*value)
    return Failure(*value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- values -----------------------------------------------------------------------------

_U32 = struct.Struct("!I")
_I64 = struct.Struct("!q")
_F64 = struct.Struct("!d")
_I64_RANGE = range(-(2**63), 2**63)
_I64_LIMIT = 2**63


def encode_value(value: Any, out: bytearray, depth: int = 0) -> None:
    """Append ``value`` in the typed encoding; a type it cannot carry raises ServerError."""
    if depth > MAX_DEPTH:
        raise ServerError(f"a value nests deeper than {MAX_DEPTH} levels")
    # the types of nearly every value first, by exact type (a SEND's body, a message's
    # fields); subclasses and the rest go the long way below
    kind = type(value)
    if kind is str:
        raw = value.encode("utf-8", "surrogatepass")
        out += b"s" + _U32.pack(len(raw)) + raw
    elif kind is bytes:
        out += b"b" + _U32.pack(len(value)) + value
    elif kind is int and -_I64_LIMIT <= value < _I64_LIMIT:
        out += b"i" + _I64.pack(value)
    elif kind is tuple or kind is list:
        out += (b"t" if kind is tuple else b"l") + _U32.pack(len(value))
        for item in value:
            encode_value(item, out, depth + 1)
    elif value is None:
        out += b"N"
    else:
        _encode_other(value, out, depth)


def _encode_other(value: Any, out: bytearray, depth: int) -> None:
    if value is True:
        out += b"T"
    elif value is False:
        out += b"F"
    elif isinstance(value, int):
        if value in _I64_RANGE:
            out += b"i" + _I64.pack(value)
        else:
            raw = value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)
            out += b"I" + _U32.pack(len(raw)) + raw
    elif isinstance(value, float):
        out += b"f" + _F64.pack(value)
    elif isinstance(value, str):
        raw = value.encode("utf-8", "surrogatepass")
        out += b"s" + _U32.pack(len(raw)) + raw
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        out += b"b" + _U32.pack(len(raw)) + raw
    elif isinstance(value, (list, tuple)):
        out += (b"l" if isinstance(value, list) else b"t") + _U32.pack(len(value))
        for item in value:
            encode_value(item, out, depth + 1)
    elif isinstance(value, dict):
        out += b"d" + _U32.pack(len(value))
        for key, item in value.items():
            encode_value(key, out, depth + 1)
            encode_value(item, out, depth + 1)
    elif isinstance(value, datetime):  # before date: a datetime is a date
        _text(out, b"D", value.isoformat())
    elif isinstance(value, date):
        _text(out, b"a", value.isoformat())
    elif isinstance(value, time):
        _text(out, b"h", value.isoformat())
    elif isinstance(value, timedelta):
        out += b"e" + _I64.pack(value.days) + _I64.pack(value.seconds) + _I64.pack(
            value.microseconds)
    elif isinstance(value, Decimal):
        _text(out, b"m", str(value))
    elif isinstance(value, uuid.UUID):
        out += b"U" + value.bytes
    elif isinstance(value, Record):
        _text(out, b"r", value.name)
        encode_value(tuple(value.fields), out, depth + 1)
    else:
        raise ServerError(
            f"a value of type {type(value).__name__} cannot travel between a client and "
            "the server (str, int, float, bool, None, bytes, lists, dicts, datetimes, "
            "UUIDs and the API's own objects can)")


def _text(out: bytearray, tag: bytes, text: str) -> None:
    raw = text.encode("utf-8")
    out += tag + _U32.pack(len(raw)) + raw


def decode_value(data: bytes) -> Any:
    """The one value ``data`` holds, all of it; anything else raises ServerError."""
    if type(data) is not bytes:
        data = bytes(data)
    try:
        value, end = _decode(data, 0, 0)
    except (struct.error, UnicodeDecodeError, ValueError, InvalidOperation,
            OverflowError, TypeError) as exc:  # TypeError: an unhashable dict key
        raise ServerError(f"a client frame's value cannot be decoded: {type(exc).__name__}") \
            from None
    if end != len(data):
        raise ServerError(f"a client frame holds {len(data) - end} bytes after its value")
    return value


# the tags as the integers indexing bytes gives
(_TAG_NONE, _TAG_TRUE, _TAG_FALSE, _TAG_INT, _TAG_FLOAT, _TAG_STR, _TAG_BYTES, _TAG_LIST,
 _TAG_TUPLE, _TAG_DICT) = b"NTFifsbltd"
_TAGS_SIZED = frozenset((_TAG_STR, _TAG_BYTES))
_TAGS_COUNTED = frozenset((_TAG_LIST, _TAG_TUPLE, _TAG_DICT))


def _decode(data: bytes, at: int, depth: int) -> tuple[Any, int]:
    if depth > MAX_DEPTH:
        raise ServerError(f"a client frame's value nests deeper than {MAX_DEPTH} levels")
    if at >= len(data):
        raise ServerError("a client frame's value ends early")
    tag = data[at]
    at += 1
    # the common tags first (a CALL's fields, a SEND's body, a message's fields)
    if tag in _TAGS_SIZED:
        size = _U32.unpack_from(data, at)[0]
        at += 4
        end = at + size
        if end > len(data):
            raise ServerError("a client frame's value ends early")
        if tag == _TAG_BYTES:
            return data[at:end], end
        return data[at:end].decode("utf-8", "surrogatepass"), end
    if tag == _TAG_INT:
        return _I64.unpack_from(data, at)[0], at + 8
    if tag in _TAGS_COUNTED:
        count = _U32.unpack_from(data, at)[0]
        at += 4
        # every item takes at least one byte: a count the frame cannot hold is refused
        # before anything is built for it
        if count * (2 if tag == _TAG_DICT else 1) > len(data) - at:
            raise ServerError("a client frame's value ends early")
        if tag == _TAG_DICT:
            mapping: dict[Any, Any] = {}
            for _ in range(count):
                key, at = _decode(data, at, depth + 1)
                mapping[key], at = _decode(data, at, depth + 1)
            return mapping, at
        items = []
        for _ in range(count):
            item, at = _decode(data, at, depth + 1)
            items.append(item)
        return (items if tag == _TAG_LIST else tuple(items)), at
    if tag == _TAG_NONE:
        return None, at
    if tag == _TAG_TRUE:
        return True, at
    if tag == _TAG_FALSE:
        return False, at
    if tag == _TAG_FLOAT:
        return _F64.unpack_from(data, at)[0], at + 8
    return _decode_other(data, bytes([tag]), at, depth)


def _decode_other(data: bytes, tag: bytes, at: int, depth: int) -> tuple[Any, int]:
    if tag == b"e":
        days, seconds, micros = struct.unpack_from("!qqq", data, at)
        return timedelta(days=days, seconds=seconds, microseconds=micros), at + 24
    if tag == b"U":
        raw = _take(data, at, 16)
        return uuid.UUID(bytes=raw), at + 16
    size = _U32.unpack_from(data, at)[0]
    at += 4
    raw = _take(data, at, size)
    at += size
    if tag == b"I":
        return int.from_bytes(raw, "big", signed=True), at
    text = raw.decode("utf-8")
    if tag == b"D":
        return datetime.fromisoformat(text), at
    if tag == b"a":
        return date.fromisoformat(text), at
    if tag == b"h":
        return time.fromisoformat(text), at
    if tag == b"m":
        return Decimal(text), at
    if tag == b"r":
        fields, at = _decode(data, at, depth + 1)
        if not isinstance(fields, tuple):
            raise ServerError("a client frame's record has no fields")
        return Record(text, fields), at
    raise ServerError(f"a client frame's value has an unknown tag {tag!r}")


def _take(data: bytes, at: int, size: int) -> bytes:
    if at + size > len(data):
        raise ServerError("a client frame's value ends early")
    return data[at:at + size]
