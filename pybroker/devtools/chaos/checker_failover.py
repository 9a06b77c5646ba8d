"""The checker's rule for a mirrored pair that failed over (pure): the initiator's
conversations against what the old principal and the new one committed to their queues.

pybroker does not replicate a database, so what the new principal can continue is what its
own file holds. A conversation **exists there** when its target endpoint was begun there,
that is when its first message reached the new principal and never the old one: every
conversation the initiator began after the promotion, and any begun before whose first
message the old principal never committed. For those the whole rule holds, at the new
principal: nothing lost, duplicated, reordered, unexpected, corrupted, incomplete or
unacknowledged, the last message delivered, and nothing at the old principal.

A conversation the old principal began is **stranded**: what the old principal committed
stays in its file, and the new principal has not seen it, so it refuses the initiator's
next message and the initiator ends the conversation with an error (the README says so).
The rule for these: the initiator's conversation **ended with an error** (it sends no
more), nothing of it is held at the new principal, and what the old principal has is
there once, in order among its receivable ones, every body intact. The messages the
refusal ended (at neither partner) are counted as undelivered, not lost: the initiator was
told. A message the old principal committed but had not acknowledged when it died goes
again to the new one; if it was the first, it begins the conversation there, which then
continues at the new principal (its messages are in both files: counted, not a violation,
there is no replication to prevent it) and must have every message acknowledged, at one
partner or the other, none held. A stranded conversation that neither ended with an error
nor arrived whole is a violation, and so is one with messages held at the new principal.
A conversation wholly at the old principal (it finished before the failover) is checked as
point-to-point there.

One that continued at the new principal (begun after the promotion, or whose first message
reached only the new one) must not end with an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pybroker.devtools.chaos.checker import Received, Sent, Verdict, check, check_queue


@dataclass
class Failover:
    """How many conversations (and messages) of each kind, and the verdict over all."""

    continued: int = 0  # existed at the new principal: the whole rule held there
    continued_messages: int = 0  # received there
    begun_after: int = 0  # of the continued: begun after the promotion
    finished_before: int = 0  # wholly at the old principal
    stranded: int = 0  # begun at the old principal, later messages sent to the new one
    stranded_ended: int = 0  # of the stranded: ended with an error at the initiator
    at_old_principal: int = 0  # messages of the stranded ones the old principal holds
    undelivered: int = 0  # of those that ended so: messages at neither partner
    held_at_new_principal: int = 0  # of the stranded ones: held there (a violation)
    in_both: int = 0  # committed by the old principal unacknowledged, then by the new one
    ended_with_error: int = 0
    verdict: Verdict = field(default_factory=Verdict)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "continued", "continued_messages", "begun_after", "finished_before", "stranded",
            "stranded_ended", "at_old_principal", "undelivered", "held_at_new_principal",
            "in_both", "ended_with_error")}


def _by_conversation(rows: list[Received]) -> dict[str, list[Received]]:
    out: dict[str, list[Received]] = {}
    for r in rows:
        out.setdefault(r.conversation_id, []).append(r)
    return out


def check_failover(sent: list[Sent], after: set[str], old: list[Received],
                   new: list[Received], errored: set[str] = frozenset()) -> Failover:
    """``sent``: the initiator's conversations; ``after``: the ids of those begun after the
    promotion; ``old``/``new``: the old and the new principal's queues; ``errored``: the ids
    of the initiator's conversations that ended with an error."""
    f = Failover()
    v = f.verdict
    at_old, at_new = _by_conversation(old), _by_conversation(new)
    known = {s.conversation_id for s in sent}
    strangers = [r for r in [*old, *new] if r.conversation_id not in known]
    if strangers:
        v.add(check([], strangers))
    for s in sent:
        cid = s.conversation_id
        old_rows, new_rows = at_old.get(cid, []), at_new.get(cid, [])
        if cid in errored:
            f.ended_with_error += 1
        if cid in after or not old_rows:
            f.continued += 1
            f.begun_after += cid in after
            f.continued_messages += len(new_rows)
            v.add(check([s], new_rows))
            if old_rows:
                v.extra["after_failover_at_old_principal"] = (
                    v.extra.get("after_failover_at_old_principal", 0) + len(old_rows))
                v.received += len(old_rows)
                v.note(f"{s.link} {cid}: begun after the failover, yet {len(old_rows)} "
                       "message(s) are at the old principal")
            if cid in errored:
                v.extra["after_failover_errors"] = v.extra.get("after_failover_errors", 0) + 1
                v.note(f"{s.link} {cid}: continued at the new principal, yet ended with an "
                       "error")
        elif not new_rows and cid not in errored:
            f.finished_before += 1
            v.add(check([s], old_rows))
        else:
            f.stranded += 1
            _check_stranded(f, s, old_rows, new_rows, cid in errored)
    return f


def _check_stranded(f: Failover, s: Sent, old_rows: list[Received],
                    new_rows: list[Received], ended: bool) -> None:
    v = f.verdict
    v.conversations += 1
    v.sent += s.send_sequence
    # an error ended it: its transmission queue rows are gone, so which messages were
    # acknowledged is what the partners hold (those at neither are counted below)
    acked = ({r.sequence for r in [*old_rows, *new_rows]} & set(range(s.send_sequence))
             if ended else {q for q in range(s.send_sequence) if q not in s.unacked})
    v.acknowledged += len(acked)
    unacked = len([q for q in s.unacked if q < s.send_sequence])
    if unacked:
        v.unacknowledged += unacked
        v.note(f"{s.link} {s.conversation_id}: {unacked} message(s) still not acknowledged "
               "after healing")
    seqs: dict[str, set[int]] = {}
    for where, rows in (("old", old_rows), ("new", new_rows)):
        rows = sorted(rows, key=lambda r: r.queuing_order)
        seqs[where] = set(check_queue(v, s, rows, f" at the {where} principal"))
        if where == "new":
            f.held_at_new_principal += sum(1 for r in rows if r.status == 2)
        else:
            f.at_old_principal += len(rows)
    f.in_both += len(seqs["old"] & seqs["new"])
    held = sum(1 for r in new_rows if r.status == 2)
    if held:
        v.extra["held_at_new_principal"] = v.extra.get("held_at_new_principal", 0) + held
        v.note(f"{s.link} {s.conversation_id}: begun at the old principal, {held} "
               "message(s) held at the new one, never receivable")
    if ended:
        f.stranded_ended += 1
        f.undelivered += s.send_sequence - len(acked)
        return
    missing = sorted(acked - seqs["old"] - seqs["new"])
    if missing:
        v.lost += len(missing)
        v.note(f"{s.link} {s.conversation_id}: {len(missing)} acknowledged message(s) at "
               f"neither partner: {missing[:10]}")
    if not new_rows or max(r.sequence for r in new_rows) != s.send_sequence - 1:
        v.extra["stranded_not_ended"] = v.extra.get("stranded_not_ended", 0) + 1
        v.note(f"{s.link} {s.conversation_id}: begun at the old principal, neither ended "
               "with an error nor continued to its last message at the new one")
