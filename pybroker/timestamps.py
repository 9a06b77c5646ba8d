"""Times as the naive UTC ``datetime`` DuckDB's TIMESTAMP columns hold: epoch seconds
converted, and the wall clock now.

The one conversion every layer uses (routing, delivery, the wire's transport, activation,
storage): it imports nothing of pybroker, so any module may import it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1)


def to_utc_datetime(epoch_seconds: float) -> datetime:
    """Naive UTC, to the microsecond rounded half to even: what
    ``datetime.fromtimestamp(epoch_seconds, UTC).replace(tzinfo=None)`` gives, at half its
    cost (the ``replace`` is the dear part). Every SEND and every arrival takes one."""
    return _EPOCH + timedelta(seconds=epoch_seconds)


def optional_utc_datetime(epoch_seconds: float | None) -> datetime | None:
    """``to_utc_datetime``, with None (a time not yet known) kept as None."""
    return None if epoch_seconds is None else to_utc_datetime(epoch_seconds)


def utc_now() -> datetime:
    """The wall clock as a naive UTC datetime (the form every stored time has)."""
    return datetime.now(UTC).replace(tzinfo=None)
