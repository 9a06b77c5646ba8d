"""Message forwarding (R7), sans-I/O: what a forwarder decides about the fragments it passes
on. It never touches a socket or a clock (every call takes ``now``, epoch seconds) and
holds nothing durable: a forwarder that stops loses only copies its senders will send again.

A fragment to forward is *admitted* (``admit``) with the adjacent broker it came from and
the next hop routing chose (msdb's table, R1.2; the transport asks the engine). It is held
in memory, in arrival order per next hop, until the next hop's connection takes it
(``next_fragment``): then its bytes are released and it leaves with one hop fewer and the
time it spent here added to its time consumed. Fragments are passed on one by one as they
arrive, never reassembled (R7.3).

Dropped, each with a reason the transport records as a "Broker:Forwarded Message Dropped"
event (trace event 140); the sender retries (P5.3), so nothing is lost:
- no hops left (R7.1): a message arrives with ``hops_remaining`` 0, so a routing loop ends
  after at most ``DEFAULT_HOPS`` forwards;
- no time left (R7.1): its time consumed reached its time to live, on arrival or while it
  waited here for the next hop (``handle_timer``);
- over the memory bound (R7.3): holding it would take the bytes held over ``limit``;
- the next hop cannot be reached (``drop_hop``): holding it until its time runs out would
  only keep memory from fragments that can go;
- no principal known (R9): msdb's route is a mirrored pair and neither partner has said
  yet that it is principal (both are asked; R9.4 sends nothing meanwhile).

Only the final destination acknowledges (R7.3). Acknowledgements and notices find their way
back through the forwarders by the *return path*: per conversation direction (conversation
id, whether the initiator sent it), the adjacent broker the last fragment of that direction
came from. An acknowledgement entry that acknowledges the initiator's messages (or a notice
about them) goes back the way the initiator's fragments came. The table is bounded
(least recently used entries go first): an entry lost only means an acknowledgement is not
relayed, and the sender's retransmission teaches the path again (P3.3, P5.4).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterator
from dataclasses import dataclass, replace

from pybroker.core.wire.frames import MessageFragment

# R7.1: hops a message starts with. SQL Server's count is unpublished; 32 is far above any
# real chain of forwarders (one or two) and small enough that a loop ends within moments.
DEFAULT_HOPS = 32
# R7.3: SQL Server's default MESSAGE_FORWARD_SIZE, in MB
DEFAULT_LIMIT_MB = 10
# what a held fragment costs beyond its body: the header's names and numbers, and the
# bookkeeping here (counted, so that a flood of empty fragments is bounded too)
FRAGMENT_OVERHEAD = 256
RETURN_PATHS = 65_536  # conversation directions whose return path is remembered

NO_HOPS = "no hops left"
NO_TIME = "time to live spent"
OVER_LIMIT = "over the memory bound"
UNREACHABLE = "next hop unreachable"
NO_PRINCIPAL = "no principal known"


@dataclass(frozen=True, slots=True)
class ReturnPath:
    """Where acknowledgements and notices of one conversation direction go back to."""

    connection: int  # the connection the fragments came on
    address: str  # the adjacent broker (its own endpoint's address when it gave one)


@dataclass(frozen=True, slots=True)
class Dropped:
    """A fragment the forwarder did not pass on, and why (one of the reasons above)."""

    fragment: MessageFragment
    reason: str
    description: str
    next_hop: str | None = None


@dataclass(slots=True)
class Held:
    """A fragment held for its next hop (a row of sys.dm_broker_forwarded_messages)."""

    fragment: MessageFragment
    next_hop: str
    adjacent: str  # the adjacent broker it came from
    arrived: float
    size: int

    def consumed_ms(self, now: float) -> int:
        return self.fragment.time_consumed_ms + max(0, int((now - self.arrived) * 1000))

    def deadline(self) -> float:
        f = self.fragment
        return self.arrived + max(0, f.time_to_live_ms - f.time_consumed_ms) / 1000


class Forwarder:
    """The fragments one instance is forwarding, bounded by ``limit`` bytes (R7.3)."""

    def __init__(self, limit: int = DEFAULT_LIMIT_MB * 2**20,
                 return_paths: int = RETURN_PATHS) -> None:
        self.limit = limit
        self.held_bytes = 0
        self._queues: dict[str, deque[Held]] = {}
        self._held: set[tuple[str, bool, int, int]] = set()  # the fragments held, by name
        self._paths: OrderedDict[tuple[str, bool], ReturnPath] = OrderedDict()
        self._max_paths = return_paths
        self.forwarded = 0  # fragments passed on to their next hop since this started

    # -- in ---------------------------------------------------------------------------

    def admit(self, fragment: MessageFragment, next_hop: str, connection: int,
              adjacent: str, now: float) -> Dropped | None:
        """Hold ``fragment`` for ``next_hop`` (None), or say why not (nothing is held then).
        Either way the return path of its direction is learnt: an acknowledgement of an
        earlier copy still goes back. A retransmitted copy of a fragment still held is
        not held twice."""
        self.learn(fragment, connection, adjacent)
        f = fragment
        name = (f.conversation_id, f.from_initiator, f.sequence, f.fragment_number)
        if name in self._held:
            return None
        if f.hops_remaining <= 0:
            return Dropped(f, NO_HOPS, "the message has no hops left (a routing loop?)",
                           next_hop)
        if f.time_consumed_ms >= f.time_to_live_ms:
            return Dropped(f, NO_TIME, f"the message spent its time to live "
                           f"({f.time_to_live_ms} ms) in forwarders", next_hop)
        size = len(f.body) + FRAGMENT_OVERHEAD
        if self.held_bytes + size > self.limit:
            return Dropped(f, OVER_LIMIT, (
                f"holding {size} more bytes would take the forwarded messages over the "
                f"memory bound of {self.limit} bytes ({self.held_bytes} held)"), next_hop)
        self._queues.setdefault(next_hop, deque()).append(
            Held(f, next_hop, adjacent, now, size))
        self._held.add(name)
        self.held_bytes += size
        return None

    def learn(self, fragment: MessageFragment, connection: int, adjacent: str) -> None:
        key = (fragment.conversation_id, fragment.from_initiator)
        self._paths[key] = ReturnPath(connection, adjacent)
        self._paths.move_to_end(key)
        while len(self._paths) > self._max_paths:
            self._paths.popitem(last=False)

    # -- out --------------------------------------------------------------------------

    def next_fragment(self, next_hop: str, now: float, key_id: bytes | None = None
                      ) -> tuple[MessageFragment | None, list[Dropped]]:
        """The next fragment for ``next_hop``'s connection, as it leaves (one hop fewer,
        its time here added, and ``key_id``'s, the forwarder's, when given: it signs what
        it passes on), released from memory; and those found out of time."""
        queue = self._queues.get(next_hop)
        dropped: list[Dropped] = []
        while queue:
            held = queue.popleft()
            self._release(held)
            f = held.fragment
            consumed = held.consumed_ms(now)
            if consumed >= f.time_to_live_ms:
                dropped.append(Dropped(f, NO_TIME, (
                    f"the message spent its time to live ({f.time_to_live_ms} ms) waiting "
                    f"for {next_hop}"), next_hop))
                continue
            if not queue:
                del self._queues[next_hop]
            self.forwarded += 1
            return replace(f, hops_remaining=f.hops_remaining - 1,
                           time_consumed_ms=consumed, ack=None,
                           key_id=f.key_id if key_id is None else key_id), dropped
        self._queues.pop(next_hop, None)
        return None, dropped

    def has_work(self, next_hop: str) -> bool:
        return bool(self._queues.get(next_hop))

    def next_hops(self) -> list[str]:
        return [hop for hop, queue in self._queues.items() if queue]

    def drop_hop(self, next_hop: str, why: str) -> list[Dropped]:
        """Everything held for ``next_hop``, which cannot be reached, released."""
        queue = self._queues.pop(next_hop, None) or deque()
        for held in queue:
            self._release(held)
        return [Dropped(h.fragment, UNREACHABLE, f"{next_hop} cannot be reached: {why}",
                        next_hop) for h in queue]

    def _release(self, held: Held) -> None:
        f = held.fragment
        self.held_bytes -= held.size
        self._held.discard((f.conversation_id, f.from_initiator, f.sequence,
                            f.fragment_number))

    # -- time -------------------------------------------------------------------------

    def get_timer(self) -> float | None:
        """When the first held fragment runs out of time (None: nothing held)."""
        deadlines = [h.deadline() for queue in self._queues.values() for h in queue]
        return min(deadlines, default=None)

    def handle_timer(self, now: float) -> list[Dropped]:
        """Fragments whose time ran out while they waited, released."""
        dropped: list[Dropped] = []
        for hop in list(self._queues):
            queue = self._queues[hop]
            keep: deque[Held] = deque()
            for held in queue:
                if now >= held.deadline():
                    self._release(held)
                    f = held.fragment
                    dropped.append(Dropped(f, NO_TIME, (
                        f"the message spent its time to live ({f.time_to_live_ms} ms) "
                        f"waiting for {hop}"), hop))
                else:
                    keep.append(held)
            if keep:
                self._queues[hop] = keep
            else:
                del self._queues[hop]
        return dropped

    # -- acknowledgements and notices back ----------------------------------------------

    def return_path(self, conversation_id: str, toward_initiator: bool) -> ReturnPath | None:
        """Where an acknowledgement of (or a notice about) the messages one side sent goes:
        ``toward_initiator`` for those of the initiator."""
        return self._paths.get((conversation_id, toward_initiator))

    # -- what an analyst sees --------------------------------------------------------------

    def held(self) -> Iterator[Held]:
        for queue in self._queues.values():
            yield from queue
