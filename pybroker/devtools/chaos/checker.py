"""The total-queue checker (pure), in the style of Jepsen's: per conversation, what the
sender recorded as sent and acknowledged against what the receiver committed.

- sent: every sequence below the sender's ``send_sequence`` (each was committed);
- acknowledged: sent and no longer in the sender's transmission queue;
- received: the rows of the receiver's queue for that conversation, in queuing order.

Violations: **lost** (acknowledged, never received), **duplicated** (received twice),
**out of order** (a ready message queued after a higher sequence of its conversation: the
order RECEIVE gives; a message held with status 2 is not receivable and takes a new place
when released), **unexpected** (received but never sent, of an unknown conversation, or a
body that is not what was sent: **corrupted**), **incomplete** (still status 2 after
healing), **unacknowledged** (still in the sender's transmission queue after healing) and
**last not delivered** (the last message a conversation sent is not in the receiver's queue
after healing).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

MAX_DETAILS = 50


@dataclass(frozen=True, slots=True)
class Sent:
    """One conversation as its sender's file has it after the run."""

    conversation_id: str
    link: str  # "A->B"
    send_sequence: int  # sequences 0 .. send_sequence-1 were committed
    unacked: frozenset[int] = frozenset()  # still in the transmission queue


@dataclass(frozen=True, slots=True)
class Received:
    """One row of a receiver's queue: its conversation, sequence, status and what its
    body says about itself."""

    conversation_id: str
    queuing_order: int
    sequence: int
    status: int  # 1 ready (0 retained), 2 incomplete
    body_conversation: str | None
    body_sequence: int | None
    body_ok: bool


@dataclass
class Verdict:
    conversations: int = 0
    sent: int = 0
    acknowledged: int = 0
    received: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    unexpected: int = 0
    corrupted: int = 0
    incomplete: int = 0
    unacknowledged: int = 0
    last_not_delivered: int = 0
    # a topology's own violations by name (held_by_forwarders, ...): counted in ``valid``
    extra: dict[str, int] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)

    VIOLATIONS = ("lost", "duplicated", "out_of_order", "unexpected", "corrupted",
                  "incomplete", "unacknowledged", "last_not_delivered")

    @property
    def valid(self) -> bool:
        return all(getattr(self, k) == 0 for k in self.VIOLATIONS) and not any(
            self.extra.values())

    def note(self, text: str) -> None:
        if len(self.details) < MAX_DETAILS:
            self.details.append(text)

    def as_dict(self) -> dict[str, Any]:
        totals = {k: getattr(self, k) for k in (
            "conversations", "sent", "acknowledged", "received", *self.VIOLATIONS)}
        return {"valid": self.valid, **totals, **self.extra, "details": list(self.details)}

    def add(self, other: Verdict) -> None:
        """Count ``other``'s conversations, messages and violations in this one too."""
        for k in ("conversations", "sent", "acknowledged", "received", *self.VIOLATIONS):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        for k, n in other.extra.items():
            self.extra[k] = self.extra.get(k, 0) + n
        for d in other.details:
            self.note(d)


def check(sent: list[Sent], received: list[Received]) -> Verdict:
    v = Verdict()
    by_conv: dict[str, list[Received]] = {}
    for r in received:
        by_conv.setdefault(r.conversation_id, []).append(r)
    known = {s.conversation_id for s in sent}
    for conv_id, rows in by_conv.items():
        if conv_id not in known:
            v.unexpected += len(rows)
            v.received += len(rows)
            v.note(f"{len(rows)} message(s) of conversation {conv_id}, which no sender began")
    for s in sent:
        v.conversations += 1
        rows = sorted(by_conv.get(s.conversation_id, []), key=lambda r: r.queuing_order)
        v.sent += s.send_sequence
        acked = {q for q in range(s.send_sequence) if q not in s.unacked}
        v.acknowledged += len(acked)
        unacked = len([q for q in s.unacked if q < s.send_sequence])
        if unacked:
            v.unacknowledged += unacked
            v.note(f"{s.link} {s.conversation_id}: {unacked} message(s) still not "
                   f"acknowledged after healing (lowest {min(s.unacked)})")
        counts = check_queue(v, s, rows)
        for r in rows:
            if r.status == 2:
                v.incomplete += 1
                v.note(f"{s.link} {s.conversation_id}: sequence {r.sequence} still "
                       f"incomplete (status 2)")
        missing = sorted(acked - counts.keys())
        if missing:
            v.lost += len(missing)
            v.note(f"{s.link} {s.conversation_id}: {len(missing)} acknowledged message(s) "
                   f"never received: {missing[:10]}")
        if s.send_sequence and (s.send_sequence - 1) not in counts:
            v.last_not_delivered += 1
            v.note(f"{s.link} {s.conversation_id}: its last message "
                   f"({s.send_sequence - 1}) was not delivered")
    return v


def check_queue(v: Verdict, s: Sent, rows: list[Received], where: str = "") -> Counter[int]:
    """What one queue holds of conversation ``s`` (``rows`` in queuing order), added to
    ``v``: received, duplicated, out of order, unexpected and corrupted messages. ``where``
    says which queue in the notes (' at the new principal'). Returns how often each
    sequence number is there."""
    v.received += len(rows)
    counts = Counter(r.sequence for r in rows)
    for q, n in sorted(counts.items()):
        if n > 1:
            v.duplicated += n - 1
            v.note(f"{s.link} {s.conversation_id}: sequence {q} received {n} times{where}")
    highest = -1
    for r in rows:
        # a message held with status 2 (it arrived ahead of a missing one) is not
        # receivable; it enters the order when it is released (a new queuing order)
        if r.status != 2:
            if r.sequence < highest:
                v.out_of_order += 1
                v.note(f"{s.link} {s.conversation_id}: sequence {r.sequence} queued "
                       f"after {highest}{where}")
            highest = max(highest, r.sequence)
        if not 0 <= r.sequence < s.send_sequence:
            v.unexpected += 1
            v.note(f"{s.link} {s.conversation_id}: sequence {r.sequence} received{where} but "
                   f"only 0..{s.send_sequence - 1} were sent")
        elif not r.body_ok or r.body_conversation != s.conversation_id or (
                r.body_sequence != r.sequence):
            v.corrupted += 1
            v.note(f"{s.link} {s.conversation_id}: sequence {r.sequence}{where} has a body "
                   f"that is not the one sent (says {r.body_conversation} "
                   f"#{r.body_sequence}, intact={r.body_ok})")
    return counts
