"""The dialog protocol's sending and receiving decisions, sans-I/O (P3, P4, P5, P7).

``Transmitter`` holds the transmission objects (P7) of every conversation direction that
has messages in flight: it cuts messages into fragments (P4.1), hands them out round robin
across the conversations of one next hop so that small messages pass between the fragments
of a large one (P4.3), keeps every fragment until it is acknowledged (P5.2), and resends
only the fragments not acknowledged, 4, 8, 16, 32 and then every 64 seconds after they
were sent, times ``retry_scale`` (P4.2, P5.3, C5). A transmission object lives only while
its conversation has something unacknowledged: memory follows the messages in flight, not
the conversations (P7).

The receiving side's decisions are pure functions: ``classify`` says what an arriving
fragment is (a duplicate, the next message complete, a message to hold until those before
it arrive, a fragment to keep), and ``ack_entry`` builds the acknowledgement that covers
everything held (P5.1).

Nothing here reads a clock: ``now`` is a parameter, ``get_timer()`` the next deadline.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace

from pybroker.wire.frames import AckEntry, MessageFragment

DEFAULT_FRAGMENT_SIZE = 1 * 2**20  # bytes; larger messages travel as fragments (P4.1)
# A conversation direction starts a message only while it is within this many of its lowest
# unacknowledged one: a lost fragment then holds back (status 2 at the receiver) and brings
# again at most this many, not the whole backlog a restart or an outage piled up.
WINDOW = 64
BACKOFF = (4.0, 8.0, 16.0, 32.0, 64.0)  # C5, seconds before scaling


def backoff(retry_count: int, retry_scale: float) -> float:
    return BACKOFF[min(retry_count, len(BACKOFF) - 1)] * retry_scale


@dataclass(frozen=True, slots=True)
class Acknowledged:
    """Every fragment of this message is acknowledged: its row may leave (P5.2)."""

    handle: str  # the sending conversation endpoint
    sequence: int
    broker_instance: str  # who acknowledged (R5 pins the conversation to it)
    is_end_of_dialog: bool
    is_error: bool


class _Message:
    __slots__ = ("body", "count", "header", "retries", "sent", "unacked", "unsent")

    def __init__(self, header: MessageFragment, fragment_size: int) -> None:
        size = len(header.body)
        self.count = max(1, -(-size // fragment_size))
        self.header = replace(header, body=b"", fragment_count=self.count, message_size=size)
        self.body = memoryview(header.body)
        self.unsent: deque[int] = deque(range(self.count))
        self.unacked: set[int] = set(range(self.count))
        self.retries: dict[int, int] = {}  # fragment -> times resent
        self.sent: dict[int, float] = {}  # fragment -> when it is due again


class _Dialog:
    """The transmission object of one conversation direction (P7)."""

    __slots__ = ("address", "handle", "key", "messages", "resend")

    def __init__(self, key: tuple[str, bool], handle: str, address: str) -> None:
        self.key = key
        self.handle = handle
        self.address = address
        self.messages: dict[int, _Message] = {}  # in sequence order (inserted in order)
        self.resend: deque[tuple[int, int]] = deque()  # (sequence, fragment) due again


class Transmitter:
    """Every conversation's messages in flight to the network, sans-I/O."""

    def __init__(self, *, fragment_size: int = DEFAULT_FRAGMENT_SIZE,
                 retry_scale: float = 1.0) -> None:
        if fragment_size < 1:
            raise ValueError("fragment_size must be positive")
        self.fragment_size = fragment_size
        self.retry_scale = retry_scale
        self._dialogs: dict[tuple[str, bool], _Dialog] = {}
        self._by_address: dict[str, deque[_Dialog]] = {}
        self._timers: list[tuple[float, int, tuple[str, bool], int, int]] = []
        self._tick = 0
        self.fragments_sent = 0
        self.fragments_resent = 0

    # -- input ---------------------------------------------------------------------------

    def submit(self, handle: str, address: str, message: MessageFragment) -> bool:
        """Send ``message`` (its body whole; fragment fields are filled in here) to the next
        hop ``address``. False if that message is already in flight (a restart loaded it
        again, say)."""
        key = (message.conversation_id, message.from_initiator)
        dialog = self._dialogs.get(key)
        if dialog is None:
            dialog = self._dialogs[key] = _Dialog(key, handle, address)
            self._by_address.setdefault(address, deque()).append(dialog)
        elif dialog.address != address:  # routed elsewhere since: later fragments go there
            self._by_address[dialog.address].remove(dialog)
            dialog.address = address
            self._by_address.setdefault(address, deque()).append(dialog)
        if message.sequence in dialog.messages:
            return False
        dialog.messages[message.sequence] = _Message(message, self.fragment_size)
        if len(dialog.messages) > 1 and message.sequence < max(dialog.messages):
            dialog.messages = dict(sorted(dialog.messages.items()))
        return True

    def on_ack(self, entry: AckEntry) -> list[Acknowledged]:
        """An acknowledgement arrived: forget what it covers; the messages now wholly
        acknowledged."""
        dialog = self._dialogs.get((entry.conversation_id, entry.acks_initiator))
        if dialog is None:
            return []
        done: list[Acknowledged] = []
        ranges: dict[int, list[tuple[int, int]]] = {}
        for seq, first, last in entry.ranges:
            ranges.setdefault(seq, []).append((first, last))
        for seq, msg in list(dialog.messages.items()):
            if seq < entry.through_sequence:
                msg.unacked.clear()
            else:
                for first, last in ranges.get(seq, ()):  # bounded by the message's count
                    msg.unacked.difference_update(range(first, min(last, msg.count - 1) + 1))
            if not msg.unacked:
                del dialog.messages[seq]
                h = msg.header
                done.append(Acknowledged(dialog.handle, seq, entry.broker_instance,
                                         h.is_end_of_dialog, h.is_error))
        if not dialog.messages:
            self._drop(dialog)
        return done

    def forget(self, conversation_id: str, from_initiator: bool) -> None:
        """Stop sending this conversation direction (it ended with an error, or cleanup)."""
        dialog = self._dialogs.get((conversation_id, from_initiator))
        if dialog is not None:
            self._drop(dialog)

    def _drop(self, dialog: _Dialog) -> None:
        del self._dialogs[dialog.key]
        peers = self._by_address.get(dialog.address)
        if peers is not None:
            peers.remove(dialog)
            if not peers:
                del self._by_address[dialog.address]

    # -- output --------------------------------------------------------------------------

    def addresses(self) -> list[str]:
        """The next hops that have messages in flight."""
        return list(self._by_address)

    def has_work(self, address: str) -> bool:
        for dialog in self._by_address.get(address, ()):
            if dialog.resend or any(m.unsent for m in dialog.messages.values()):
                return True
        return False

    def handles(self, address: str) -> list[str]:
        return [d.handle for d in self._by_address.get(address, ())]

    def next_fragment(self, address: str, now: float) -> MessageFragment | None:
        """The next fragment to send to ``address`` (unsigned; the connection signs it), or
        None. Conversations take turns, one fragment each (P4.3); within one, fragments due
        again come first, then new ones in sequence order."""
        peers = self._by_address.get(address)
        if not peers:
            return None
        for _ in range(len(peers)):
            dialog = peers[0]
            peers.rotate(-1)
            picked = self._pick(dialog)
            if picked is not None:
                msg, seq, frag, again = picked
                count = msg.retries.get(frag, 0) + 1 if again else 0
                if again:
                    msg.retries[frag] = count
                    self.fragments_resent += 1
                self.fragments_sent += 1
                due = now + backoff(count, self.retry_scale)
                msg.sent[frag] = due
                self._tick += 1
                heapq.heappush(self._timers, (due, self._tick, dialog.key, seq, frag))
                start = frag * self.fragment_size
                return replace(msg.header, fragment_number=frag,
                               body=msg.body[start:start + self.fragment_size])
        return None

    def _pick(self, dialog: _Dialog) -> tuple[_Message, int, int, bool] | None:
        while dialog.resend:
            seq, frag = dialog.resend.popleft()
            msg = dialog.messages.get(seq)
            if msg is not None and frag in msg.unacked:
                return msg, seq, frag, True
        lowest = None
        for seq, msg in dialog.messages.items():
            if lowest is None:
                lowest = seq
            elif seq - lowest >= WINDOW:
                break
            if msg.unsent:
                return msg, seq, msg.unsent.popleft(), False
        return None

    # -- timers --------------------------------------------------------------------------

    def get_timer(self) -> float | None:
        timers = self._timers
        while timers:
            due, _, key, seq, frag = timers[0]
            if self._live(due, key, seq, frag):
                return due
            heapq.heappop(timers)
        return None

    def _live(self, due: float, key: tuple[str, bool], seq: int, frag: int) -> bool:
        dialog = self._dialogs.get(key)
        msg = None if dialog is None else dialog.messages.get(seq)
        return msg is not None and frag in msg.unacked and msg.sent.get(frag) == due

    def handle_timer(self, now: float) -> set[str]:
        """Fragments whose retry time passed are due again (P4.2: only those). Returns the
        next hops that now have something to resend."""
        ready: set[str] = set()
        timers = self._timers
        while timers and timers[0][0] <= now:
            due, _, key, seq, frag = heapq.heappop(timers)
            if self._live(due, key, seq, frag):
                dialog = self._dialogs[key]
                dialog.messages[seq].sent.pop(frag)
                dialog.resend.append((seq, frag))
                ready.add(dialog.address)
        return ready

    # -- what an analyst asks ------------------------------------------------------------

    def in_flight(self) -> int:
        return sum(len(d.messages) for d in self._dialogs.values())

    def dialogs(self) -> int:
        return len(self._dialogs)


# -- the receiving side ---------------------------------------------------------------------

DUPLICATE = "duplicate"  # P3.2, P5.4: acknowledged again, not queued again
DELIVER = "deliver"  # a whole message, the next in sequence: into the queue
HOLD = "hold"  # a whole message ahead of one missing: status 2 until those before arrive
FRAGMENT = "fragment"  # part of a message; kept until the message is whole (P4.4)


def classify(fragment: MessageFragment, receive_sequence: int,
             held_fragments: Iterable[int] = ()) -> str:
    """What an arriving fragment is to an endpoint that expects ``receive_sequence`` next
    and holds ``held_fragments`` of the fragment's message already."""
    if fragment.sequence < receive_sequence:
        return DUPLICATE
    held = set(held_fragments)
    if fragment.fragment_number in held:
        return DUPLICATE
    if len(held) + 1 < fragment.fragment_count:
        return FRAGMENT
    return DELIVER if fragment.sequence == receive_sequence else HOLD


def ack_entry(conversation_id: str, acks_initiator: bool, broker_instance: str,
              key_id: bytes, receive_sequence: int,
              held: Iterable[tuple[int, int]] = ()) -> AckEntry:
    """P5.1: one acknowledgement for everything below ``receive_sequence`` and the
    (sequence, fragment) pairs ``held`` beyond it, as ranges (unsigned)."""
    ranges: list[tuple[int, int, int]] = []
    for seq, frag in sorted(set(held)):
        if seq < receive_sequence:
            continue
        if ranges and ranges[-1][0] == seq and ranges[-1][2] + 1 == frag:
            ranges[-1] = (seq, ranges[-1][1], frag)
        else:
            ranges.append((seq, frag, frag))
    return AckEntry(conversation_id, acks_initiator, broker_instance, key_id,
                    receive_sequence, tuple(ranges[-1024:]))
