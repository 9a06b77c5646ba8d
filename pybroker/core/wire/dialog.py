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
import itertools
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from pybroker.core.wire.frame_types import AckEntry
from pybroker.core.wire.frames import MessageFragment

DEFAULT_FRAGMENT_SIZE = 1 * 2**20  # bytes; larger messages travel as fragments (P4.1)
# bytes in flight (sent, unacknowledged) per next hop at most: a round trip is a receiver's
# commit and an acknowledgement, so this bounds a hop's rate to a window per commit; 8 MiB
# held 1 MiB bodies near 26-37 MB/s, 32 MiB lets them reach ~43-62 MB/s (bench wire case d)
DEFAULT_WINDOW = 32 * 2**20
# A conversation direction starts a message only while it is within this many of its lowest
# unacknowledged one: a lost fragment then holds back (status 2 at the receiver) and brings
# again at most this many, not the whole backlog a restart or an outage piled up. It also
# bounds one conversation's rate to WINDOW messages per round trip (the receiver's commit
# included): 64 capped a single conversation near 3,000 messages/s, 512 near 8,000 (idle
# machine, `pybroker bench wire` case a); 2,048 lets one conversation reach ~11,000. The
# receiver holds and releases out-of-order messages set-based, so a wider window costs it
# little; a lost fragment holds back at most this many messages (status 2).
WINDOW = 2048
BACKOFF = (4.0, 8.0, 16.0, 32.0, 64.0)  # C5, seconds before scaling
# the priority of a message whose database does not honour broker priorities (and SQL
# Server's default level): conversations of this priority only take turns
NEUTRAL_PRIORITY = 5


def backoff(retry_count: int, retry_scale: float) -> float:
    return BACKOFF[min(retry_count, len(BACKOFF) - 1)] * retry_scale


class Acknowledged(NamedTuple):
    """Every fragment of this message is acknowledged: its row may leave (P5.2). A named
    tuple, not a frozen dataclass: one is made for every message sent, at a fifth of the
    cost (0.22 against 1.1 us)."""

    handle: str  # the sending conversation endpoint
    sequence: int
    broker_instance: str  # who acknowledged (R5 pins the conversation to it)
    is_end_of_dialog: bool
    is_error: bool


def _fragment(h: MessageFragment, number: int, count: int, size: int,
              body: bytes | memoryview) -> MessageFragment:
    """``h`` as fragment ``number`` of ``count`` of a ``size``-byte message (what
    dataclasses.replace does, at a third of its cost: this runs for every fragment sent)."""
    return MessageFragment(
        h.conversation_id, h.from_initiator, h.sequence, number, count, size, h.from_service,
        h.to_service, h.from_broker_instance, h.to_broker_instance, h.contract,
        h.message_type, h.validation, h.is_end_of_dialog, h.is_error, h.priority,
        h.lifetime_ms, h.hops_remaining, h.key_id, body, h.ack, h.mac, h.time_to_live_ms,
        h.time_consumed_ms, h.traceparent)


class _Message:
    """One message in flight. Kept small (P7): fragments are sent in order, so what has
    not been sent is one number; what is unacknowledged is a bit mask."""

    __slots__ = ("body", "count", "header", "retries", "sent", "unacked", "unsent", "whole")

    def __init__(self, header: MessageFragment, fragment_size: int) -> None:
        size = len(header.body)
        self.count = max(1, -(-size // fragment_size))
        # a message of one fragment, submitted as that fragment (what SEND stages): sent as
        # it is, every time, with no copy of its 24 fields
        self.whole = (self.count == 1 and header.fragment_count == 1
                      and header.fragment_number == 0 and header.message_size == size)
        self.header = header if self.whole else _fragment(header, 0, self.count, size, b"")
        self.body = header.body
        self.unsent = 0  # the next fragment never sent (count: all were sent)
        self.unacked = (1 << self.count) - 1  # bit n: fragment n not acknowledged
        self.retries: dict[int, int] | None = None  # fragment -> times resent
        self.sent: dict[int, float] | float | None = None  # when due again (per fragment)

    def due(self, frag: int) -> float | None:
        sent = self.sent
        if isinstance(sent, dict):
            return sent.get(frag)
        return sent if frag == 0 else None

    def set_due(self, frag: int, when: float | None) -> None:
        if self.count == 1:  # most messages: one number, no dict
            self.sent = when
        elif when is None:
            if isinstance(self.sent, dict):
                self.sent.pop(frag, None)
        else:
            if not isinstance(self.sent, dict):
                self.sent = {}
            self.sent[frag] = when

    def is_unacked(self, frag: int) -> bool:
        return bool(self.unacked >> frag & 1)

    def in_flight(self) -> int:
        """Bytes sent and not acknowledged (fragments taken at their average size)."""
        sent = self.unacked & ((1 << self.unsent) - 1)
        if not sent:
            return 0
        return sent.bit_count() * max(1, -(-self.header.message_size // self.count))

    def acknowledge(self, first: int, last: int) -> None:
        last = min(last, self.count - 1)
        if first <= last:
            self.unacked &= ~(((1 << (last - first + 1)) - 1) << first)


class _Dialog:
    """The transmission object of one conversation direction (P7)."""

    __slots__ = ("address", "handle", "head", "key", "last", "messages", "priority", "resend",
                 "unsent")

    def __init__(self, key: tuple[str, bool], handle: str, address: str,
                 priority: int = NEUTRAL_PRIORITY) -> None:
        self.key = key
        self.handle = handle
        self.address = address
        self.priority = priority  # its messages' header priority (a conversation has one)
        self.messages: dict[int, _Message] = {}  # in sequence order
        self.last = -1  # the highest sequence submitted
        # sequences whose messages have fragments never sent, in order, from ``head``: the
        # next new fragment is found at once, however many messages are in flight
        self.unsent: list[int] = []
        self.head = 0
        self.resend: list[tuple[int, int]] | None = None  # (sequence, fragment) due again


class Transmitter:
    """Every conversation's messages in flight to the network, sans-I/O."""

    def __init__(self, *, fragment_size: int = DEFAULT_FRAGMENT_SIZE,
                 retry_scale: float = 1.0, window: int = DEFAULT_WINDOW) -> None:
        if fragment_size < 1:
            raise ValueError("fragment_size must be positive")
        self.fragment_size = fragment_size
        self.retry_scale = retry_scale
        # Flow control: new fragments wait while this many bytes to one next hop are
        # unacknowledged (resends do not), so a receiver slower than the first retry
        # time-out is not sent everything twice.
        self.window = max(window, fragment_size)
        self._flight: dict[str, int] = {}  # next hop -> bytes sent, not acknowledged
        self._dialogs: dict[tuple[str, bool], _Dialog] = {}
        self._by_address: dict[str, deque[_Dialog]] = {}
        # next hop -> priority -> its dialogs of that priority, in the order they take turns
        self._levels: dict[str, dict[int, deque[_Dialog]]] = {}
        # Where priorities differ, the levels found with nothing to send, and when: (next
        # hop, priority) -> (changes, allow_new) as of that scan. ``changes`` counts what
        # may give a dialog something to send (a message, a resend due, an
        # acknowledgement that opens the window, a dialog coming or going), so a level
        # found idle is not scanned again until one happens.
        self._idle: dict[tuple[str, int], tuple[int, bool]] = {}
        self._changes = 0
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
        self._changes += 1
        dialog = self._dialogs.get(key)
        if dialog is None:
            dialog = self._dialogs[key] = _Dialog(key, handle, address, message.priority)
            self._link(dialog)
        elif dialog.address != address:  # routed elsewhere since: later fragments go there
            self._readdress(dialog, address)
        seq = message.sequence
        if seq in dialog.messages:
            return False
        dialog.messages[seq] = _Message(message, self.fragment_size)
        dialog.unsent.append(seq)
        if seq < dialog.last:  # out of order (loaded again after a restart): sort
            dialog.messages = dict(sorted(dialog.messages.items()))
            dialog.unsent = sorted(dialog.unsent[dialog.head:])
            dialog.head = 0
        else:
            dialog.last = seq
        return True

    def move(self, keys: Iterable[tuple[str, bool]], address: str
             ) -> dict[tuple[str, bool], str]:
        """These conversation directions go to ``address`` from now on, with everything
        they have in flight (a mirrored route's principal changed, R9.3); the ones still in
        flight are returned, with their endpoints' handles."""
        kept = {}
        for key in keys:
            dialog = self._dialogs.get(key)
            if dialog is not None:
                kept[key] = dialog.handle
                if dialog.address != address:
                    self._readdress(dialog, address)
        return kept

    def live(self, keys: Iterable[tuple[str, bool]]) -> set[tuple[str, bool]]:
        """Which of these conversation directions still have messages in flight."""
        return {key for key in keys if key in self._dialogs}

    def _readdress(self, dialog: _Dialog, address: str) -> None:
        moved = sum(m.in_flight() for m in dialog.messages.values())
        self._release(dialog.address, moved)
        self._unlink(dialog)
        dialog.address = address
        if moved:  # their acknowledgements now release them from the new next hop
            self._flight[address] = self._flight.get(address, 0) + moved
        self._link(dialog)

    def on_ack(self, entry: AckEntry) -> list[Acknowledged]:
        """An acknowledgement arrived: forget what it covers; the messages now wholly
        acknowledged."""
        dialog = self._dialogs.get((entry.conversation_id, entry.acks_initiator))
        if dialog is None:
            return []
        done: list[Acknowledged] = []
        messages = dialog.messages
        through = entry.through_sequence
        released = 0
        # everything below ``through`` (a prefix of the messages, in order), then the ranges
        covered = list(itertools.takewhile(lambda seq: seq < through, messages))
        for seq, first, last in entry.ranges:
            msg = messages.get(seq)
            if msg is not None and seq >= through:
                before = msg.in_flight()
                msg.acknowledge(first, last)  # bounded by the message's count
                released += before - msg.in_flight()  # all of it when now whole
                if not msg.unacked:
                    covered.append(seq)
        for seq in covered:
            msg = messages.pop(seq, None)
            if msg is not None:
                released += msg.in_flight()
                h = msg.header
                done.append(Acknowledged(dialog.handle, seq, entry.broker_instance,
                                         h.is_end_of_dialog, h.is_error))
        if released:
            self._release(dialog.address, released)
        if not messages:
            self._drop(dialog)
        return done

    def _release(self, address: str, size: int) -> None:
        self._changes += 1
        left = self._flight.get(address, 0) - size
        if left > 0:
            self._flight[address] = left
        else:
            self._flight.pop(address, None)

    def forget(self, conversation_id: str, from_initiator: bool) -> None:
        """Stop sending this conversation direction (it ended with an error, or cleanup)."""
        dialog = self._dialogs.get((conversation_id, from_initiator))
        if dialog is not None:
            self._drop(dialog)

    def _drop(self, dialog: _Dialog) -> None:
        self._release(dialog.address, sum(m.in_flight() for m in dialog.messages.values()))
        del self._dialogs[dialog.key]
        self._unlink(dialog)

    def _link(self, dialog: _Dialog) -> None:
        self._changes += 1
        self._by_address.setdefault(dialog.address, deque()).append(dialog)
        self._levels.setdefault(dialog.address, {}).setdefault(
            dialog.priority, deque()).append(dialog)

    def _unlink(self, dialog: _Dialog) -> None:
        self._changes += 1
        peers = self._by_address.get(dialog.address)
        if peers is not None:
            peers.remove(dialog)
            levels = self._levels[dialog.address]
            level = levels[dialog.priority]
            level.remove(dialog)
            if not level:
                del levels[dialog.priority]
            if not peers:  # a next hop is kept only while something goes to it (P7)
                del self._by_address[dialog.address]
                del self._levels[dialog.address]
                if self._idle:
                    self._idle = {k: v for k, v in self._idle.items()
                                  if k[0] != dialog.address}

    # -- output --------------------------------------------------------------------------

    def addresses(self) -> list[str]:
        """The next hops that have messages in flight."""
        return list(self._by_address)

    def has_work(self, address: str) -> bool:
        open_window = self._flight.get(address, 0) < self.window
        for dialog in self._by_address.get(address, ()):
            if dialog.resend or (open_window and dialog.head < len(dialog.unsent)):
                return True
        return False

    def in_flight_bytes(self, address: str) -> int:
        return self._flight.get(address, 0)

    def has_dialogs(self, address: str) -> bool:
        """Something is in flight to ``address`` (sent or not, not yet acknowledged)."""
        return address in self._by_address

    def handles(self, address: str) -> list[str]:
        return [d.handle for d in self._by_address.get(address, ())]

    def next_fragment(self, address: str, now: float) -> MessageFragment | None:
        """The next fragment to send to ``address`` (unsigned; the connection signs it), or
        None. Conversations take turns, one fragment each (P4.3), except that where
        conversations of a higher priority than others have a fragment to send, they go
        first (HONOR_BROKER_PRIORITY: their header's priority); within one, fragments due
        again come first, then new ones in sequence order."""
        peers = self._by_address.get(address)
        if not peers:
            return None
        allow_new = self._flight.get(address, 0) < self.window
        levels = self._levels[address]
        if len(levels) == 1:  # all alike (nothing honours priorities): plain turns
            return self._in_turn(address, peers, allow_new, now)
        # HONOR_BROKER_PRIORITY: the highest first, in turns among equals
        return self._next_by_priority(address, levels, allow_new, now)

    def _in_turn(self, address: str, dialogs: deque[_Dialog], allow_new: bool,
                 now: float) -> MessageFragment | None:
        """The next fragment of ``dialogs``, each asked in turn (the one asked goes last)."""
        for _ in range(len(dialogs)):
            dialog = dialogs[0]
            dialogs.rotate(-1)
            picked = self._pick(dialog, allow_new)
            if picked is not None:
                return self._sent(address, dialog, picked, now)
        return None

    def _next_by_priority(self, address: str, levels: dict[int, deque[_Dialog]],
                          allow_new: bool, now: float) -> MessageFragment | None:
        idle = self._idle
        for level in sorted(levels, reverse=True):
            if idle.get((address, level)) == (self._changes, allow_new):
                continue  # found with nothing to send, and nothing changed since
            fragment = self._in_turn(address, levels[level], allow_new, now)
            if fragment is not None:
                return fragment
            idle[(address, level)] = (self._changes, allow_new)
        return None

    def _sent(self, address: str, dialog: _Dialog, picked: tuple[_Message, int, int, bool],
              now: float) -> MessageFragment:
        """The fragment ``picked`` of ``dialog`` goes now: its retry time armed, counted in
        flight if new."""
        msg, seq, frag, again = picked
        h = msg.header
        if again:
            if msg.retries is None:
                msg.retries = {}
            count = msg.retries[frag] = msg.retries.get(frag, 0) + 1
            self.fragments_resent += 1
            due = now + backoff(count, self.retry_scale)
        else:
            due = now + BACKOFF[0] * self.retry_scale
            self._flight[address] = self._flight.get(address, 0) + max(
                1, -(-h.message_size // msg.count))
        self.fragments_sent += 1
        if msg.count == 1:  # set_due's own first case, inline: most messages
            msg.sent = due
        else:
            msg.set_due(frag, due)
        self._tick += 1
        heapq.heappush(self._timers, (due, self._tick, dialog.key, seq, frag))
        if msg.whole:
            return h
        start = frag * self.fragment_size
        body = msg.body if msg.count == 1 else memoryview(msg.body)[
            start:start + self.fragment_size]
        return _fragment(h, frag, h.fragment_count, h.message_size, body)

    def _pick(self, dialog: _Dialog, allow_new: bool) -> tuple[_Message, int, int, bool] | None:
        resend = dialog.resend
        while resend:
            seq, frag = resend.pop(0)
            msg = dialog.messages.get(seq)
            if msg is not None and msg.is_unacked(frag):
                return msg, seq, frag, True
        if not allow_new:
            return None
        unsent = dialog.unsent
        lowest = next(iter(dialog.messages), None)
        while dialog.head < len(unsent):
            seq = unsent[dialog.head]
            msg = dialog.messages.get(seq)
            if msg is not None and msg.unsent < msg.count:
                if lowest is not None and seq - lowest >= WINDOW:
                    return None  # far enough ahead of the lowest unacknowledged message
                msg.unsent += 1
                if not msg.is_unacked(msg.unsent - 1):
                    # acknowledged before it was sent (the receiver kept it from before a
                    # restart of this sender): nothing to send, and nothing to count in
                    # flight, since no acknowledgement will ever release it
                    continue
                return msg, seq, msg.unsent - 1, False
            dialog.head += 1
            if dialog.head > 64 and dialog.head * 2 > len(unsent):
                del unsent[:dialog.head]
                dialog.head = 0
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
        return msg is not None and msg.is_unacked(frag) and msg.due(frag) == due

    def handle_timer(self, now: float) -> set[str]:
        """Fragments whose retry time passed are due again (P4.2: only those). Returns the
        next hops that now have something to resend."""
        ready: set[str] = set()
        timers = self._timers
        while timers and timers[0][0] <= now:
            due, _, key, seq, frag = heapq.heappop(timers)
            if self._live(due, key, seq, frag):
                dialog = self._dialogs[key]
                dialog.messages[seq].set_due(frag, None)
                if dialog.resend is None:
                    dialog.resend = []
                dialog.resend.append((seq, frag))
                self._changes += 1
                ready.add(dialog.address)
        return ready

    # -- liveness (P5.3, C5, P7) ---------------------------------------------------------
    #
    # The invariant: a next hop with unacknowledged messages always has a fragment ready to
    # send now (``ready``) or a fragment sent and awaiting its acknowledgement, which then
    # has a retransmission deadline in ``get_timer()`` or is queued to go again. It rests on
    # two accounts that ``audit`` recomputes from the messages themselves:
    #   L1 the bytes counted in flight to a next hop are the sizes of its fragments sent and
    #      not acknowledged (no more: a count that never comes back closes the window for
    #      good, the stall of 160abf9; no less: the window would not hold);
    #   L2 every fragment sent and not acknowledged has a live timer or a place in its
    #      dialog's resend queue (P5.3: it goes again until acknowledged).
    # With L1 and L2, every next hop is live: a closed window means bytes truly in flight,
    # hence timers; an open one lets an unsent fragment go or all were sent (timers again).

    def ready(self, address: str) -> bool:
        """``next_fragment(address, now)`` would hand out a fragment (nothing is changed)."""
        allow_new = self._flight.get(address, 0) < self.window
        for dialog in self._by_address.get(address, ()):
            for seq, frag in dialog.resend or ():
                msg = dialog.messages.get(seq)
                if msg is not None and msg.is_unacked(frag):
                    return True
            if allow_new and self._has_new(dialog):
                return True
        return False

    @staticmethod
    def _has_new(dialog: _Dialog) -> bool:
        """What ``_pick`` finds new in ``dialog``: the first unsent, unacknowledged fragment
        of a message within WINDOW of the lowest unacknowledged one."""
        lowest = next(iter(dialog.messages), None)
        for seq in itertools.islice(dialog.unsent, dialog.head, None):
            msg = dialog.messages.get(seq)
            if msg is not None and msg.unsent < msg.count:
                if lowest is not None and seq - lowest >= WINDOW:
                    return False
                if msg.unacked >> msg.unsent:
                    return True
        return False

    @staticmethod
    def _awaits_ack(dialog: _Dialog, *, quick: bool) -> bool:
        """A fragment of ``dialog`` was sent, is not acknowledged, and has a retransmission
        deadline (one queued to go again is ``ready``). ``quick`` stops at the first message
        never sent: fragments go in sequence order, so those after it were not sent either,
        except after a message submitted out of order (then ``quick`` may say False)."""
        for msg in dialog.messages.values():
            if msg.unsent == 0:
                if quick:
                    return False
                continue
            sent = msg.unacked & ((1 << msg.unsent) - 1)
            if sent and any(msg.due(frag) is not None for frag in _bits(sent)):
                return True
        return False

    def stalled_hops(self) -> list[str]:
        """Next hops with unacknowledged messages that nothing will move: no fragment ready
        now and none sent awaiting acknowledgement, so no retransmission timer will fire
        and no acknowledgement come. Empty while the invariant holds. Cheap: in the usual
        case one look at the first dialog of each next hop; a next hop that looks stalled is
        looked at again in full before it is named."""
        timer = self.get_timer() is not None  # a deadline with no timer behind it is none
        return [address for address, peers in self._by_address.items()
                if not (timer and any(self._awaits_ack(d, quick=True) for d in peers))
                and not self.ready(address)
                and not (timer and any(self._awaits_ack(d, quick=False) for d in peers))]

    def repair(self, address: str) -> list[str]:
        """After a breach (only then: O(messages to ``address``)): recount the bytes in flight
        to ``address`` from its messages (L1) and queue again every fragment sent, not
        acknowledged, with no timer (L2). What was wrong, in words (empty: nothing)."""
        found: list[str] = []
        self._changes += 1
        peers = self._by_address.get(address, ())
        actual = sum(m.in_flight() for d in peers for m in d.messages.values())
        counted = self._flight.get(address, 0)
        if counted != actual:
            found.append(f"{counted} bytes were counted in flight to {address}, "
                         f"{actual} were sent and not acknowledged")
            if actual:
                self._flight[address] = actual
            else:
                self._flight.pop(address, None)
        orphans = 0
        live = {(key, seq, frag, due) for due, _, key, seq, frag in self._timers}
        for dialog in peers:
            queued = set(dialog.resend or ())
            for seq, msg in dialog.messages.items():
                for frag in _bits(msg.unacked & ((1 << msg.unsent) - 1)):
                    due = msg.due(frag)
                    if (seq, frag) not in queued and (dialog.key, seq, frag, due) not in live:
                        msg.set_due(frag, None)
                        if dialog.resend is None:
                            dialog.resend = []
                        dialog.resend.append((seq, frag))
                        orphans += 1
        if orphans:
            found.append(f"{orphans} fragments sent and not acknowledged had no "
                         "retransmission timer: queued to go again")
        return found

    def audit(self) -> list[str]:
        """Every breach of the invariant and of L1, L2 and the indexes, recomputed from
        scratch: O(fragments in flight + timers). For tests and debugging, not the hot path.
        Empty while all holds."""
        found: list[str] = []
        live = {(key, seq, frag, due) for due, _, key, seq, frag in self._timers}
        listed = [d for peers in self._by_address.values() for d in peers]
        if sorted(map(id, listed)) != sorted(map(id, self._dialogs.values())):
            found.append("the next hops do not list exactly the dialogs in flight")
        for address, peers in self._by_address.items():
            if not peers or any(d.address != address for d in peers):
                found.append(f"{address} lists no dialog, or one going elsewhere")
            actual = sum(m.in_flight() for d in peers for m in d.messages.values())
            if self._flight.get(address, 0) != actual:
                found.append(f"L1: {self._flight.get(address, 0)} bytes counted in flight "
                             f"to {address}, {actual} sent and not acknowledged")
        for address in self._flight.keys() - self._by_address.keys():
            found.append(f"L1: {self._flight[address]} bytes counted in flight to "
                         f"{address}, which has nothing in flight")
        for dialog in self._dialogs.values():
            queued = set(dialog.resend or ())
            for seq, msg in dialog.messages.items():
                if not msg.unacked:
                    found.append(f"{dialog.key} {seq} is acknowledged but kept (P7)")
                for frag in _bits(msg.unacked & ((1 << msg.unsent) - 1)):
                    due = msg.due(frag)
                    if (seq, frag) not in queued and (dialog.key, seq, frag, due) not in live:
                        found.append(f"L2: fragment {frag} of {dialog.key} {seq} was sent, "
                                     "is not acknowledged, and will not go again")
        found += [f"{address} is stalled" for address in self.stalled_hops()]
        return found

    # -- what an analyst asks ------------------------------------------------------------

    def in_flight(self) -> int:
        return sum(len(d.messages) for d in self._dialogs.values())

    def dialogs(self) -> int:
        return len(self._dialogs)


def _bits(mask: int) -> Iterable[int]:
    """The numbers of the bits set in ``mask`` (fragment numbers)."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


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
