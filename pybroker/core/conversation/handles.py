"""Conversation handles that grow with time (SPEC P7: memory follows active conversations).

A handle is a UUID string, as in SQL Server. pybroker makes it time-ordered (the layout of
UUID version 7: 48 bits of milliseconds since the epoch, then 74 random bits), so new
endpoints sort after old ones in the primary key of conversation_endpoints. DuckDB's index
of that key (an adaptive radix tree) is then written out at each checkpoint and read back
only along the paths in use: inserts touch the newest path, and idle conversations' parts
stay on disk. With random (version 4) handles every insert lands somewhere else in the tree,
so all of it is read back into memory, about 90 bytes per endpoint for ever.
"""

from __future__ import annotations

import secrets
import time
import uuid

_VERSION_7 = 0x7 << 76
_VARIANT = 0x2 << 62


def new_handle() -> str:
    """A new time-ordered UUID (version 7 layout)."""
    ms = time.time_ns() // 1_000_000
    rand = secrets.randbits(74)
    return str(uuid.UUID(int=(ms & (2**48 - 1)) << 80 | _VERSION_7 | (rand >> 62) << 64
                         | _VARIANT | rand & (2**62 - 1)))
