"""The W3C Trace Context ``traceparent`` a message carries (pybroker/docs/otel.md): read and
written here, with no OpenTelemetry (tracing itself lives in pybroker/kernel/tracing.py).

A traceparent is ``VERSION-TRACE_ID-PARENT_ID-FLAGS`` in lower-case hex: ``00``, 32 digits,
16 digits and 2 digits (https://www.w3.org/TR/trace-context/#traceparent-header). A trace
id or parent id of all zeros is not valid, nor is version ``ff``. A version above 00 may
carry more fields after the four, which a reader of version 00 leaves aside (the
specification's rule for forward compatibility).

What arrives from the network is never trusted: ``parse_traceparent`` gives None for
anything that is not a valid traceparent, and raises nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEX = re.compile(r"[0-9a-f]+")
TRACEPARENT_LENGTH = 55  # version 00's length


@dataclass(frozen=True, slots=True)
class TraceParent:
    """A valid traceparent's values: ids as integers, as OpenTelemetry keeps them."""

    trace_id: int  # 128 bits, not 0
    span_id: int  # 64 bits, not 0: the parent's
    sampled: bool  # flag 01 of trace-flags
    trace_flags: int = 0  # every flag as it came (8 bits)

    def text(self) -> str:
        """The traceparent of version 00."""
        return format_traceparent(self.trace_id, self.span_id, self.trace_flags)


def format_traceparent(trace_id: int, span_id: int, trace_flags: int) -> str:
    """The version-00 traceparent of these ids; ValueError for ids out of range or zero."""
    if not 0 < trace_id < 2**128 or not 0 < span_id < 2**64 or not 0 <= trace_flags < 256:
        raise ValueError(
            f"not a valid trace context: trace id {trace_id:#x}, span id {span_id:#x}, "
            f"flags {trace_flags:#x}")
    return f"00-{trace_id:032x}-{span_id:016x}-{trace_flags:02x}"


def parse_traceparent(text: object) -> TraceParent | None:
    """The values of a traceparent, or None when ``text`` is not a valid one."""
    if not isinstance(text, str) or len(text) < TRACEPARENT_LENGTH or len(text) > 512:
        return None
    version = text[:2]
    if not _is_hex(version) or version == "ff":
        return None
    if version == "00" and len(text) != TRACEPARENT_LENGTH:
        return None
    if len(text) > TRACEPARENT_LENGTH and text[TRACEPARENT_LENGTH] != "-":
        return None  # a later version's fields follow a dash
    if text[2] != "-" or text[35] != "-" or text[52] != "-":
        return None
    trace_hex, span_hex, flags_hex = text[3:35], text[36:52], text[53:55]
    if not (_is_hex(trace_hex) and _is_hex(span_hex) and _is_hex(flags_hex)):
        return None
    trace_id, span_id, flags = int(trace_hex, 16), int(span_hex, 16), int(flags_hex, 16)
    if not trace_id or not span_id:
        return None
    return TraceParent(trace_id, span_id, bool(flags & 1), flags)


def _is_hex(text: str) -> bool:
    return _HEX.fullmatch(text) is not None
