"""``pybroker.trace``: one conversation followed across the instances named (ssbdiagnose
RUNTIME's question, asked of every instance at once), by the conversation_id both sides
share: where each message is, what was acknowledged and received, how each hop routes it,
and the broker events that touched it, as one timeline.

Where a message is comes from comparing the two endpoints' sequence numbers (P3, P5): the
sender's messages are 0 .. send_sequence - 1; those below its first_unacked_send_sequence
are acknowledged (P5.2), those below the receiver's receive_sequence arrived; a row of a
transmission queue, of a forwarder's memory (sys.dm_broker_forwarded_messages, R7.3) or of
a queue says where one is now. Routing is asked of each instance's own engine
(``Instance.route`` and ``Instance.explain``), hop by hop: the sender's database first,
then msdb of each instance named that the chosen address leads to (R1.2).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pybroker.apps.diagnose.network import Network, Node, normal_address, read_node
from pybroker.apps.diagnose.targets import Target, open_target
from pybroker.core.routing.engine import OUTSIDE
from pybroker.errors import InvalidArgumentError, NotFoundError

_GUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")

# Steps of an explained decision that say nothing about this one.
_SILENT = ("not reached", "not applicable")

# The most hops a decision is followed through (R7.1 ends real loops; this ends the walk).
_MOST_HOPS = 8


class UnknownConversationError(NotFoundError):
    """No instance named holds an endpoint with the handle or conversation_id given."""


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One thing that happened to the conversation, or (``kind`` place, acknowledged,
    received, routing) what is so at ``time``, the moment ``instance`` was read. ``count``
    events alike were folded into one, from ``time`` to ``last``."""

    time: dt.datetime
    instance: str
    database: str | None
    kind: str
    sequence: int | None
    text: str
    count: int = 1
    last: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class Hop:
    """The routing decision one instance takes for the conversation's far service: from
    ``origin`` (a database, or ``outside``: msdb's table), its ``outcome``, the route and
    address chosen, the instance named that listens there (``next_instance``) and the
    steps it took."""

    direction: str
    instance: str
    origin: str
    service: str
    broker_instance: str | None
    outcome: str
    route: str | None
    address: str | None
    database: str | None
    next_instance: str | None
    steps: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MessagePlace:
    """Where one sequenced message of one direction is (P3.1): ``place`` is one of
    ``transmission queue``, ``forwarder memory``, ``inbound transmission queue``,
    ``queue``, ``received``, ``unknown``; ``where`` the instance (and database, queue);
    ``last_event`` the latest broker event that names it, while it has not arrived."""

    direction: str
    sequence: int
    message_type: str | None
    place: str
    where: str
    status: str
    acknowledged: bool
    arrived: bool
    last_event: str = ""


@dataclass(slots=True)
class ConversationTrace:
    conversation_id: str
    handle: str
    endpoints: list[dict[str, Any]]
    hops: list[Hop]
    messages: list[MessagePlace]
    timeline: list[TimelineEntry] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (pybroker/docs/diagnose.md, "pybroker trace")."""
        def plain(value: Any) -> Any:
            if isinstance(value, dt.datetime):
                return value.isoformat(sep=" ")
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [plain(v) for v in value]
            return value
        return plain({"conversation_id": self.conversation_id, "handle": self.handle,
                      "endpoints": self.endpoints, "hops": [asdict(h) for h in self.hops],
                      "messages": [asdict(m) for m in self.messages],
                      "timeline": [asdict(t) for t in self.timeline]})


def trace(
    handle: str,
    targets: Iterable[Any],
    *,
    tokens: Mapping[str, str] | None = None,
    now: dt.datetime | None = None,
) -> ConversationTrace:
    """Follow the conversation that ``handle`` (a conversation_handle of either side, or
    the conversation_id) names across the instances ``targets`` name (as
    ``pybroker.diagnose`` reads them). A handle that no instance named holds raises
    UnknownConversationError, one that is not a GUID InvalidArgumentError."""
    if not isinstance(handle, str) or _GUID.fullmatch(handle.strip()) is None:
        raise InvalidArgumentError(f"a conversation handle is a GUID "
                                   f"(xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), not {handle!r}")
    handle = handle.strip().lower()
    wanted = list(targets)
    if not wanted:
        raise InvalidArgumentError("trace needs at least one instance to read")
    now = now or dt.datetime.now(dt.UTC)
    if now.tzinfo is not None:  # the catalog's timestamps are UTC without a zone
        now = now.astimezone(dt.UTC).replace(tzinfo=None)
    opened: list[Target] = []
    try:
        for where in wanted:
            opened.append(open_target(where, tokens))
        return _trace(handle, opened, now)
    finally:
        for target in opened:
            target.close()


def _trace(handle: str, opened: list[Target], now: dt.datetime) -> ConversationTrace:
    found = {r["conversation_id"] for t in opened
             for r in t.rows("find_conversation", handle=handle)}
    if not found:
        raise UnknownConversationError(
            f"no conversation endpoint has handle or conversation_id {handle} in "
            + ", ".join(t.name for t in opened)
            + "; sys.conversation_endpoints lists the handles each instance holds")
    conversation_id = sorted(found)[0]
    net = Network([read_node(t) for t in opened], now, dt.timedelta(hours=1), 1)
    sides = [(node, e) for node in net.nodes
             for e in node.target.rows("select_conversation_endpoints",
                                       conversation_id=conversation_id)]
    builder = _Builder(net, conversation_id, sides)
    builder.route_hops()
    builder.events()
    builder.place_messages()
    endpoints = [{"instance": node.name, **e} for node, e in sides]
    return ConversationTrace(conversation_id, handle, endpoints, builder.hops, builder.messages,
                             sorted(builder.timeline, key=lambda t: (t.time, t.instance)))


def _direction(is_initiator: bool) -> str:
    return "initiator to target" if is_initiator else "target to initiator"


class _Builder:
    """The pieces of one trace, gathered from every instance named."""

    def __init__(self, net: Network, conversation_id: str,
                 sides: list[tuple[Node, dict[str, Any]]]) -> None:
        self.net = net
        self.conversation_id = conversation_id
        self.sides = sides
        self.hops: list[Hop] = []
        self.messages: list[MessagePlace] = []
        self.timeline: list[TimelineEntry] = []
        self.peers: set[str] = set()
        # the latest event that names a message (by sequence number): why it has not arrived
        self.last_event: dict[int, str] = {}
        for node, e in sides:
            role = "initiator" if e["is_initiator"] else "target"
            self.timeline.append(TimelineEntry(
                e["create_date"], node.name, e["database_name"], "endpoint", None,
                f"{role} endpoint {e['conversation_handle']} of {e['service_name']} "
                f"(to {e['far_service']}) created; now {e['state_desc']}, sent "
                f"{e['send_sequence']}, acknowledged {e['first_unacked_send_sequence']}, "
                f"received {e['receive_sequence']}" + (
                    f"; error {e['error_code']}: {e['error_description']}"
                    if e["error_code"] is not None else "")))

    # -- routing: each side's decision, hop by hop ------------------------------------------

    def route_hops(self) -> None:
        for node, e in self.sides:
            if e["state_desc"] == "CLOSED":
                continue  # nothing more is sent from a closed endpoint
            direction = _direction(e["is_initiator"])
            service, broker = e["far_service"], e["far_broker_instance"]
            here, origin, seen = node, e["database_name"], set()
            while here is not None and (here.name, origin) not in seen \
                    and len(seen) < _MOST_HOPS:
                seen.add((here.name, origin))
                hop = self._hop(here, origin, service, broker, direction)
                self.hops.append(hop)
                self.timeline.append(TimelineEntry(
                    self.net.now, here.name, None if origin == OUTSIDE else origin,
                    "routing", None, _hop_text(hop)))
                if hop.outcome != "send":
                    break
                here = next((n for n in self.net.nodes if n.name == hop.next_instance), None)
                origin = OUTSIDE

    def _hop(self, node: Node, origin: str, service: str, broker: str | None,
             direction: str) -> Hop:
        inst = node.target.instance
        decision = inst.route(service, broker_instance=broker, origin=origin)
        steps = tuple(f"{s.step} {s.result}" + (f" ({', '.join(s.candidates)})"
                                                if s.candidates else "")
                      for s in inst.explain(service, broker_instance=broker, origin=origin)
                      if s.result not in _SILENT)
        there = None
        for address in (decision.address, decision.mirror_address):
            if address:
                self.peers.update({address, normal_address(address) or address})
                node_there = self.net.at(address)
                if node_there is not None and there is None:
                    there = node_there.name
        return Hop(direction, node.name, origin, service, broker, decision.outcome,
                   decision.route, decision.address, decision.database, there, steps)

    # -- messages: where each one is ----------------------------------------------------

    def place_messages(self) -> None:
        queued = {}   # (is_initiator of the sender, sequence) -> [(node, row)]
        for node in self.net.nodes:
            for row in node.target.rows("select_conversation_transmission_queue",
                                        conversation_id=self.conversation_id):
                queued.setdefault((row["is_initiator"] != row["is_inbound"],
                                   row["message_sequence_number"]), []).append((node, row))
                state = ("waits in the inbound transmission queue (P8)" if row["is_inbound"]
                         else "queued for transmission")
                self.timeline.append(TimelineEntry(
                    row["enqueue_time"], node.name, row["database_name"], "transmission queue",
                    row["message_sequence_number"],
                    f"{row['message_type_name']} {state}; status: "
                    f"{row['transmission_status'] or _NO_STATUS}"))
        held: dict[tuple[bool, int], list[tuple[Node, dict[str, Any]]]] = {}
        for node in self.net.nodes:
            for row in node.target.rows("select_conversation_forwarded",
                                        conversation_id=self.conversation_id):
                held.setdefault((row["is_initiator"], row["message_sequence_number"]),
                                []).append((node, row))
        in_queue: dict[tuple[str, int], tuple[Node, dict[str, Any]]] = {}
        for node in self.net.nodes:
            for row in node.target.rows("select_conversation_queue_messages",
                                        conversation_id=self.conversation_id):
                in_queue[(row["conversation_handle"], row["message_sequence_number"])] = (
                    node, row)
                self.timeline.append(TimelineEntry(
                    row["message_enqueue_time"], node.name, row["database_name"], "queue",
                    row["message_sequence_number"],
                    f"{row['message_type_name']} arrived in queue {row['queue_name']} "
                    f"({row['status_desc']})"))
        for node, sender in self.sides:
            receiver = next(((n, e) for n, e in self.sides
                             if e["is_initiator"] != sender["is_initiator"]), None)
            for sequence in range(sender["send_sequence"]):
                self._place(node, sender, receiver, sequence, queued, held, in_queue)

    def _place(self, node: Node, sender: dict[str, Any],
               receiver: tuple[Node, dict[str, Any]] | None, sequence: int,
               queued: dict[Any, list[Any]], held: dict[Any, list[Any]],
               in_queue: dict[Any, Any]) -> None:
        key = (sender["is_initiator"], sequence)
        acknowledged = sequence < sender["first_unacked_send_sequence"]
        arrived = receiver is not None and sequence < receiver[1]["receive_sequence"]
        message_type, status = None, ""
        rows = queued.get(key, [])
        inbound = [(n, r) for n, r in rows if r["is_inbound"]]
        outbound = [(n, r) for n, r in rows if not r["is_inbound"]]
        if inbound:
            there, row = inbound[0]
            place, where = "inbound transmission queue", f"{there.name}/{row['database_name']}"
            message_type, status = row["message_type_name"], row["transmission_status"]
        elif receiver is not None and (receiver[1]["conversation_handle"], sequence) in in_queue:
            there, row = in_queue[(receiver[1]["conversation_handle"], sequence)]
            place = "queue"
            where = f"{there.name}/{row['database_name']}/{row['queue_name']}"
            message_type, status = row["message_type_name"], row["status_desc"]
        elif arrived:
            place, where = "received", f"{receiver[0].name}/{receiver[1]['database_name']}"
        elif key in held:
            there, row = held[key][0]
            place, where = "forwarder memory", there.name
            status = (f"forwarding to {row['adjacent_broker_address']}, "
                      f"{row['hops_remaining']} hop(s) left")
        elif outbound:
            place, where = "transmission queue", f"{node.name}/{sender['database_name']}"
        elif acknowledged:
            place, where = "received", "the far side (not among the instances named)"
        else:
            place, where = "unknown", "none of the instances named"
        if outbound:
            message_type = message_type or outbound[0][1]["message_type_name"]
            status = status or outbound[0][1]["transmission_status"] or _NO_STATUS
        shown = {"transmission queue": "waits in the transmission queue of",
                 "forwarder memory": "is held in the memory of",
                 "inbound transmission queue": "waits in the inbound transmission queue of",
                 "queue": "is in the queue", "received": "was received by",
                 "unknown": "is in"}[place]
        why = "" if arrived or acknowledged else self.last_event.get(sequence, "")
        text = f"{message_type or 'message'} {shown} {where}" + (
            f": {status}" if status else "") + (
            "; acknowledged" if acknowledged else "; not acknowledged yet") + (
            f"; last event: {why}" if why else "")
        self.messages.append(MessagePlace(_direction(sender["is_initiator"]), sequence,
                                          message_type, place, where, status or "",
                                          acknowledged, arrived, why))
        self.timeline.append(TimelineEntry(self.net.now, node.name, sender["database_name"],
                                           "place", sequence, text))

    # -- broker events ----------------------------------------------------------------------

    def events(self) -> None:
        since = min((e["create_date"] for _, e in self.sides), default=self.net.now)
        for node in self.net.nodes:
            folded: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
            for row in node.target.rows("select_conversation_events",
                                        conversation_id=self.conversation_id, since=since,
                                        peers=sorted(self.peers)):
                key = (row["event_class"], row["subclass"], row["peer_address"],
                       row["message_sequence_number"], row["description"])
                folded.setdefault(key, []).append(row)
            for (event_class, subclass, peer, sequence, description), rows in folded.items():
                if sequence is not None:
                    self.last_event[sequence] = f"{node.name}: {subclass}: {description}"
                self.timeline.append(TimelineEntry(
                    rows[0]["event_time"], node.name, None, "event", sequence,
                    f"{event_class} {subclass}" + (f" ({peer})" if peer else "")
                    + f": {description}", len(rows),
                    rows[-1]["event_time"] if len(rows) > 1 else None))


_NO_STATUS = "no status (sent; no acknowledgement yet)"


def _hop_text(hop: Hop) -> str:
    where = "msdb (from outside)" if hop.origin == OUTSIDE else hop.origin
    if hop.outcome == "send":
        then = f"send by route {hop.route} to {hop.address}" + (
            f" ({hop.next_instance})" if hop.next_instance else " (no instance named)")
    elif hop.outcome == "deliver":
        then = f"deliver to database {hop.database}"
    else:
        then = hop.outcome
    return (f"routing {hop.direction}: {where} routes {hop.service} -> {then}; "
            + "; ".join(hop.steps))


def timeline_text(result: ConversationTrace) -> str:
    """The trace as aligned lines: the conversation, then its timeline, oldest first."""
    lines = [f"conversation {result.conversation_id} (handle {result.handle})"]
    if not result.endpoints:
        lines.append("  no endpoint of it is held by the instances named")
    rows = [(f"{t.time:%Y-%m-%d %H:%M:%S.%f}", t.instance, t.database or "-",
             "-" if t.sequence is None else str(t.sequence),
             t.text + (f" (x{t.count}, until {t.last:%H:%M:%S.%f})" if t.count > 1 and
                       t.last is not None else "")) for t in result.timeline]
    head = ("time", "instance", "database", "message", "what")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    for row in [head, *rows]:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row[:4], widths, strict=True))
                     + "  " + row[4])
    return "\n".join(lines)
