"""The chaos workload, pure: what each message's body is, how big, and which conversation
sends how many. A body says what it is, so the checker catches a corrupted or misdelivered
one without keeping a copy:

    b"PBC1|" conversation_id "|" sequence "|" payload size "|" sha256(payload)[:32 hex] "|"
    payload

The payload is deterministic in (seed, conversation id, sequence): a message sent again after
a sender's crash (its transaction rolled back) has the very same body.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

MAGIC = b"PBC1|"
SMALL_MAX = 512
MEDIUM_MAX = 64 * 1024


def body_size(seed: int, conversation_id: str, sequence: int, *, big_every: int,
              max_body: int) -> int:
    """A few bytes mostly, some KB, and one message in ``big_every`` (per conversation and
    sequence, hashed) between max_body/8 and max_body (fragmented on the wire)."""
    rng = random.Random(f"{seed}:{conversation_id}:{sequence}:size")
    if big_every > 0 and rng.randrange(big_every) == 0:
        return rng.randint(max(1, max_body // 8), max_body)
    if rng.random() < 0.15:
        return rng.randint(SMALL_MAX + 1, MEDIUM_MAX)
    return rng.randint(1, SMALL_MAX)


def make_body(seed: int, conversation_id: str, sequence: int, *, big_every: int = 100,
              max_body: int = 4 * 2**20) -> bytes:
    size = body_size(seed, conversation_id, sequence, big_every=big_every, max_body=max_body)
    payload = random.Random(f"{seed}:{conversation_id}:{sequence}:body").randbytes(size)
    digest = hashlib.sha256(payload).hexdigest()[:32]
    return b"".join((MAGIC, f"{conversation_id}|{sequence}|{size}|{digest}|".encode(),
                     payload))


@dataclass(frozen=True, slots=True)
class BodyCheck:
    """What a received body says about itself; ``ok`` False: it is not a body the workload
    makes (corrupted, truncated, foreign)."""

    conversation_id: str | None
    sequence: int | None
    ok: bool


def check_body(body: bytes | None) -> BodyCheck:
    if not body or not body.startswith(MAGIC):
        return BodyCheck(None, None, False)
    parts = body[len(MAGIC):].split(b"|", 4)
    if len(parts) != 5:
        return BodyCheck(None, None, False)
    try:
        conversation_id = parts[0].decode("ascii")
        sequence = int(parts[1])
        size = int(parts[2])
        digest = parts[3].decode("ascii")
    except (UnicodeDecodeError, ValueError):
        return BodyCheck(None, None, False)
    payload = parts[4]
    ok = len(payload) == size and hashlib.sha256(payload).hexdigest()[:32] == digest
    return BodyCheck(conversation_id, sequence, ok)


def split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` near-equal counts (the first ones one larger)."""
    if parts <= 0:
        return []
    q, r = divmod(total, parts)
    return [q + (1 if i < r else 0) for i in range(parts)]


def links(instances: int) -> list[tuple[str, str]]:
    """Who begins dialogs with whom: two instances A<->B; three A->B, A->C and back."""
    if instances == 2:
        return [("A", "B"), ("B", "A")]
    if instances == 3:
        return [("A", "B"), ("A", "C"), ("B", "A"), ("C", "A")]
    raise ValueError("the chaos run takes 2 or 3 instances")
