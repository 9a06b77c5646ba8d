"""The PostgreSQL frontend/backend protocol (version 3.0), as far as a read-only server
needs it: bytes in, messages out, and the bytes of each reply. No socket, no clock, no
DuckDB: :mod:`pybroker.server.pg` does the I/O and runs the queries.

What is here: framing of the client's messages (bounded in size), decoding of the startup
packet and of Parse, Bind, Describe, Execute, Close and the SASL messages, SCRAM-SHA-256
(RFC 5802 and 7677, without channel binding), the backend messages a session sends, and the
text format of values in both directions (DuckDB's Python values to PostgreSQL's text,
parameters from PostgreSQL's text or binary form to Python values).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import hmac
import math
import struct
import unicodedata
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pybroker.errors import BrokerError

PROTOCOL_3_0 = 196608
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
MAX_STARTUP = 10_000  # bytes; PostgreSQL's own bound on the startup packet
MAX_MESSAGE = 16 * 1024 * 1024  # bytes of one message (a query text, a Bind's values)
SCRAM_ITERATIONS = 4096  # PostgreSQL's default for SCRAM-SHA-256


class PgProtocolError(BrokerError):
    """The client broke the protocol, or asked for what this server does not do.
    ``sqlstate`` is the code sent in its ErrorResponse."""

    def __init__(self, message: str, sqlstate: str = "08P01", *,
                 hint: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.hint = hint


# -- framing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """One message from the client: ``kind`` is its type byte, or None for the untyped
    packets of the startup phase (whose first four payload bytes are a request code)."""

    kind: bytes | None
    payload: bytes


class FrontendReader:
    """Feed bytes in; take whole messages out. The first message (and the one after an
    SSL or GSSAPI request is declined) is a startup packet, which has no type byte."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.startup = True

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def messages(self) -> Iterator[Message]:
        while True:
            message = self._next()
            if message is None:
                return
            yield message

    def _next(self) -> Message | None:
        buffer = self._buffer
        if self.startup:
            if len(buffer) < 4:
                return None
            (length,) = struct.unpack_from("!i", buffer)
            if not 8 <= length <= MAX_STARTUP:
                raise PgProtocolError(f"a startup packet of {length} bytes is refused")
            if len(buffer) < length:
                return None
            payload = bytes(buffer[4:length])
            del buffer[:length]
            self.startup = False
            return Message(None, payload)
        if len(buffer) < 5:
            return None
        kind = bytes(buffer[:1])
        (length,) = struct.unpack_from("!i", buffer, 1)
        if not 4 <= length <= MAX_MESSAGE:
            raise PgProtocolError(
                f"a message of {length} bytes is refused (at most {MAX_MESSAGE} are read)",
                "54000")
        if len(buffer) < 1 + length:
            return None
        payload = bytes(buffer[5:1 + length])
        del buffer[:1 + length]
        return Message(kind, payload)


class _Payload:
    """A cursor over one message's payload; running past its end is a protocol error."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def int16(self) -> int:
        return int(self._unpack("!h", 2))

    def int32(self) -> int:
        return int(self._unpack("!i", 4))

    def _unpack(self, fmt: str, size: int) -> int:
        if self._at + size > len(self._data):
            raise PgProtocolError("a message ends early")
        (value,) = struct.unpack_from(fmt, self._data, self._at)
        self._at += size
        return int(value)

    def take(self, size: int) -> bytes:
        if size < 0 or self._at + size > len(self._data):
            raise PgProtocolError("a message ends early")
        data = self._data[self._at:self._at + size]
        self._at += size
        return data

    def cstring(self) -> str:
        end = self._data.find(b"\0", self._at)
        if end < 0:
            raise PgProtocolError("a string in a message has no terminating NUL")
        raw = self._data[self._at:end]
        self._at = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise PgProtocolError("a string in a message is not UTF-8", "22021") from None

    def rest(self) -> bytes:
        data = self._data[self._at:]
        self._at = len(self._data)
        return data


def startup_code(payload: bytes) -> int:
    return _Payload(payload).int32()


def startup_parameters(payload: bytes) -> dict[str, str]:
    """The name/value pairs of a protocol 3 startup packet (user, database, ...)."""
    reader = _Payload(payload)
    reader.int32()
    params: dict[str, str] = {}
    while True:
        name = reader.cstring()
        if not name:
            return params
        params[name] = reader.cstring()


@dataclass(frozen=True)
class Parse:
    statement: str
    query: str
    param_types: tuple[int, ...]


@dataclass(frozen=True)
class Bind:
    portal: str
    statement: str
    param_formats: tuple[int, ...]
    values: tuple[bytes | None, ...]
    result_formats: tuple[int, ...]


def decode_parse(payload: bytes) -> Parse:
    reader = _Payload(payload)
    statement, query = reader.cstring(), reader.cstring()
    count = reader.int16()
    return Parse(statement, query, tuple(reader.int32() for _ in range(max(count, 0))))


def decode_bind(payload: bytes) -> Bind:
    reader = _Payload(payload)
    portal, statement = reader.cstring(), reader.cstring()
    formats = tuple(reader.int16() for _ in range(max(reader.int16(), 0)))
    values: list[bytes | None] = []
    for _ in range(max(reader.int16(), 0)):
        size = reader.int32()
        values.append(None if size == -1 else reader.take(size))
    results = tuple(reader.int16() for _ in range(max(reader.int16(), 0)))
    if len(formats) not in (0, 1, len(values)):
        raise PgProtocolError(f"Bind gives {len(formats)} parameter formats for "
                              f"{len(values)} parameters")
    return Bind(portal, statement, formats, tuple(values), results)


def decode_target(payload: bytes) -> tuple[str, str]:
    """Describe and Close: ('S' or 'P', the statement's or portal's name)."""
    reader = _Payload(payload)
    kind = reader.take(1).decode("latin-1")
    if kind not in ("S", "P"):
        raise PgProtocolError(f"Describe or Close names {kind!r}, not 'S' or 'P'")
    return kind, reader.cstring()


def decode_execute(payload: bytes) -> tuple[str, int]:
    reader = _Payload(payload)
    return reader.cstring(), reader.int32()


def decode_query(payload: bytes) -> str:
    return _Payload(payload).cstring()


def decode_sasl_initial(payload: bytes) -> tuple[str, bytes]:
    reader = _Payload(payload)
    mechanism = reader.cstring()
    size = reader.int32()
    return mechanism, b"" if size == -1 else reader.take(size)


# -- backend messages ---------------------------------------------------------------------


def _message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _cstring(text: str) -> bytes:
    return text.replace("\0", " ").encode("utf-8") + b"\0"


def authentication_ok() -> bytes:
    return _message(b"R", struct.pack("!i", 0))


def authentication_sasl(mechanisms: Sequence[str]) -> bytes:
    return _message(b"R", struct.pack("!i", 10) + b"".join(map(_cstring, mechanisms)) + b"\0")


def authentication_sasl_continue(data: bytes) -> bytes:
    return _message(b"R", struct.pack("!i", 11) + data)


def authentication_sasl_final(data: bytes) -> bytes:
    return _message(b"R", struct.pack("!i", 12) + data)


def negotiate_protocol_version(newest_minor: int, options: Sequence[str]) -> bytes:
    return _message(b"v", struct.pack("!ii", newest_minor, len(options))
                    + b"".join(map(_cstring, options)))


def parameter_status(name: str, value: str) -> bytes:
    return _message(b"S", _cstring(name) + _cstring(value))


def backend_key_data(process_id: int, secret: int) -> bytes:
    return _message(b"K", struct.pack("!iI", process_id, secret))


def ready_for_query(status: str) -> bytes:
    return _message(b"Z", status.encode("ascii"))


def row_description(fields: Sequence[tuple[str, int, int]]) -> bytes:
    """Columns as (name, type oid, type size); every one in text format."""
    body = struct.pack("!h", len(fields))
    for name, oid, size in fields:
        body += _cstring(name) + struct.pack("!ihihih", 0, 0, oid, size, -1, 0)
    return _message(b"T", body)


def data_row(values: Sequence[bytes | None]) -> bytes:
    parts = [struct.pack("!h", len(values))]
    for value in values:
        parts.append(struct.pack("!i", -1) if value is None
                     else struct.pack("!i", len(value)) + value)
    return _message(b"D", b"".join(parts))


def command_complete(tag: str) -> bytes:
    return _message(b"C", _cstring(tag))


def error_response(sqlstate: str, message: str, *, severity: str = "ERROR",
                   hint: str | None = None) -> bytes:
    body = b"S" + _cstring(severity) + b"V" + _cstring(severity) + b"C" + _cstring(sqlstate)
    body += b"M" + _cstring(message)
    if hint:
        body += b"H" + _cstring(hint)
    return _message(b"E", body + b"\0")


def parameter_description(types: Sequence[int]) -> bytes:
    return _message(b"t", struct.pack(f"!h{len(types)}i", len(types), *types))


EMPTY_QUERY_RESPONSE = _message(b"I")
PARSE_COMPLETE = _message(b"1")
BIND_COMPLETE = _message(b"2")
CLOSE_COMPLETE = _message(b"3")
NO_DATA = _message(b"n")
PORTAL_SUSPENDED = _message(b"s")


# -- SCRAM-SHA-256 --------------------------------------------------------------------------


class ScramExchange:
    """The server's side of one SCRAM-SHA-256 exchange (RFC 5802, 7677). The salt and
    the server's nonce are given, so the exchange is deterministic under test.

    Without TLS there is no channel to bind: a client may say it does not bind ('n') or
    that it could but the server did not offer it ('y'); asking to bind ('p') is refused.
    The user name in the SCRAM message is ignored, as PostgreSQL does (the startup
    packet's user is the one)."""

    def __init__(self, password: str, *, salt: bytes, nonce: str,
                 iterations: int = SCRAM_ITERATIONS) -> None:
        # SASLprep's mapping, near enough: NFKC (libpq applies SASLprep to the password)
        prepared = unicodedata.normalize("NFKC", password).encode("utf-8")
        salted = hashlib.pbkdf2_hmac("sha256", prepared, salt, iterations)
        client_key = _hmac(salted, b"Client Key")
        self._stored_key = hashlib.sha256(client_key).digest()
        self._server_key = _hmac(salted, b"Server Key")
        self._salt = salt
        self._nonce = nonce
        self._iterations = iterations
        self._first_bare = ""
        self._server_first = ""
        self._header = ""
        self._combined = ""

    def server_first(self, client_first: bytes) -> bytes:
        text = _ascii(client_first)
        flag, comma, rest = text.partition(",")
        authzid, comma2, bare = rest.partition(",")
        if not comma or not comma2 or flag not in ("n", "y"):
            if flag.startswith("p="):
                raise PgProtocolError("SCRAM channel binding is not offered (no TLS here); "
                                      "connect with channel_binding=disable", "28000")
            raise PgProtocolError("a malformed SCRAM client-first message")
        if authzid:
            raise PgProtocolError("SCRAM authorization identities are not supported", "28000")
        attributes = _attributes(bare)
        client_nonce = attributes.get("r", "")
        if not client_nonce:
            raise PgProtocolError("the SCRAM client-first message has no nonce")
        self._header = f"{flag},,"
        self._first_bare = bare
        self._combined = client_nonce + self._nonce
        salt = base64.b64encode(self._salt).decode("ascii")
        self._server_first = f"r={self._combined},s={salt},i={self._iterations}"
        return self._server_first.encode("ascii")

    def server_final(self, client_final: bytes) -> bytes | None:
        """The server-final message when the client's proof is right; None when the
        password is wrong."""
        text = _ascii(client_final)
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise PgProtocolError("the SCRAM client-final message has no proof")
        attributes = _attributes(without_proof)
        binding = base64.b64encode(self._header.encode("ascii")).decode("ascii")
        if attributes.get("c") != binding or attributes.get("r") != self._combined:
            raise PgProtocolError("the SCRAM client-final message does not match the "
                                  "exchange (channel binding or nonce)")
        try:
            proof = base64.b64decode(proof_text, validate=True)
        except ValueError:
            raise PgProtocolError("the SCRAM proof is not base64") from None
        auth_message = ",".join((self._first_bare, self._server_first,
                                 without_proof)).encode("ascii")
        signature = _hmac(self._stored_key, auth_message)
        if len(proof) != len(signature):
            return None
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), self._stored_key):
            return None
        verifier = base64.b64encode(_hmac(self._server_key, auth_message)).decode("ascii")
        return f"v={verifier}".encode("ascii")


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _ascii(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PgProtocolError("a SCRAM message is not UTF-8") from None


def _attributes(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if sep and len(name) == 1:
            out.setdefault(name, value)
    return out


# -- values ---------------------------------------------------------------------------------

# PostgreSQL type oids (pg_type.h) and sizes, by DuckDB type name; any other type (LIST,
# STRUCT, MAP, ENUM, ...) travels as text, nested values written as JSON.
TEXT_OID = 25
_TYPES: dict[str, tuple[int, int]] = {
    "BOOLEAN": (16, 1), "TINYINT": (21, 2), "SMALLINT": (21, 2), "UTINYINT": (21, 2),
    "INTEGER": (23, 4), "USMALLINT": (23, 4), "BIGINT": (20, 8), "UINTEGER": (20, 8),
    "UBIGINT": (1700, -1), "HUGEINT": (1700, -1), "UHUGEINT": (1700, -1),
    "FLOAT": (700, 4), "DOUBLE": (701, 8), "VARCHAR": (TEXT_OID, -1), "BLOB": (17, -1),
    "DATE": (1082, 4), "TIME": (1083, 8), "TIMESTAMP": (1114, 8), "TIMESTAMP_S": (1114, 8),
    "TIMESTAMP_MS": (1114, 8), "TIMESTAMP_NS": (1114, 8),
    "TIMESTAMP WITH TIME ZONE": (1184, 8), "INTERVAL": (1186, 16), "UUID": (2950, 16),
    "JSON": (114, -1),
}


def pg_type(duckdb_type: str) -> tuple[int, int]:
    """(oid, size) of the PostgreSQL type a DuckDB column is described as."""
    if duckdb_type.startswith("DECIMAL"):
        return 1700, -1
    return _TYPES.get(duckdb_type, (TEXT_OID, -1))


def text_value(value: Any) -> bytes | None:
    """A value DuckDB returned, in PostgreSQL's text format (None for NULL)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return b"t" if value else b"f"
    if isinstance(value, float):
        if math.isnan(value):
            return b"NaN"
        if math.isinf(value):
            return b"Infinity" if value > 0 else b"-Infinity"
        return repr(value).encode("ascii")
    if isinstance(value, decimal.Decimal):
        return format(value, "f").encode("ascii")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b"\\x" + bytes(value).hex().encode("ascii")
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ").encode("ascii")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat().encode("ascii")
    if isinstance(value, dt.timedelta):
        seconds = value.seconds
        return (f"{value.days} days {seconds // 3600:02d}:{seconds // 60 % 60:02d}:"
                f"{seconds % 60:02d}.{value.microseconds:06d}").encode("ascii")
    if isinstance(value, (list, tuple, dict)):
        import json

        return json.dumps(_jsonable(value), ensure_ascii=False).encode("utf-8")
    return str(value).encode("utf-8")


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    text = text_value(value)
    return None if text is None else text.decode("utf-8")


_BINARY = {16: "!?", 21: "!h", 23: "!i", 20: "!q", 700: "!f", 701: "!d"}


def parameter_value(data: bytes | None, oid: int, binary: bool) -> Any:
    """A Bind parameter as a Python value for DuckDB. Text of a type not decoded here stays
    text, which DuckDB casts to what the query needs."""
    if data is None:
        return None
    try:
        if binary:
            if oid in _BINARY:
                return struct.unpack(_BINARY[oid], data)[0]
            if oid == 17:
                return bytes(data)
            if oid in (0, TEXT_OID, 1043, 19, 18, 114):
                return data.decode("utf-8")
            if oid == 2950:
                return str(uuid.UUID(bytes=bytes(data)))
            if oid == 1700:
                return _binary_numeric(data)
            if oid == 1082:
                return _EPOCH_2000.date() + dt.timedelta(days=struct.unpack("!i", data)[0])
            if oid in (1114, 1184):
                moment = _EPOCH_2000 + dt.timedelta(microseconds=struct.unpack("!q", data)[0])
                return moment if oid == 1184 else moment.replace(tzinfo=None)
            raise PgProtocolError(f"a parameter of type oid {oid} in binary format is not "
                                  "supported; send it as text", "0A000")
        text = data.decode("utf-8")
        if oid == 16:
            return text.strip().lower() in ("t", "true", "yes", "on", "1", "y")
        if oid in (20, 21, 23):
            return int(text)
        if oid in (700, 701):
            return float(text)
        if oid == 1700:
            return decimal.Decimal(text)
        if oid == 17:
            return bytes.fromhex(text[2:]) if text.startswith("\\x") else data
        if oid == 1082:
            return dt.date.fromisoformat(text)
        if oid in (1114, 1184):
            return dt.datetime.fromisoformat(text)
        return text
    except (ValueError, ArithmeticError, struct.error, UnicodeDecodeError):
        raise PgProtocolError(f"a parameter is not a valid value of type oid {oid}",
                              "22P02") from None


_EPOCH_2000 = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)  # PostgreSQL's binary time origin


def _binary_numeric(data: bytes) -> decimal.Decimal:
    """NUMERIC in binary: digit count, weight, sign and scale, then base-10000 digits."""
    count, weight, sign, scale = struct.unpack_from("!hhHh", data)
    if sign == 0xC000:
        return decimal.Decimal("NaN")
    if sign not in (0, 0x4000) or count < 0 or len(data) != 8 + 2 * count:
        raise ValueError("not a binary NUMERIC")
    value = 0
    for digit in struct.unpack_from(f"!{count}h", data, 8):
        value = value * 10_000 + digit
    number = decimal.Decimal(value).scaleb((weight - count + 1) * 4)
    if sign == 0x4000:
        number = -number
    return number.quantize(decimal.Decimal(1).scaleb(-scale)) if scale >= 0 else number
