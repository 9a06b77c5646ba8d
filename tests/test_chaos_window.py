"""Found by the chaos run (seed 100, 2 instances, 100,000 messages): after a SIGKILL every
unacknowledged message of a conversation went out again at once, and a single dropped frame
made the receiver hold thousands of later messages one by one (status 2): acknowledgements
fell behind, the senders resent everything again, and the run stopped making progress.
A conversation direction now has at most WINDOW messages in flight past its lowest
unacknowledged one."""

from __future__ import annotations

import uuid

from pybroker.core.wire import dialog
from pybroker.core.wire.dialog import WINDOW, Transmitter
from pybroker.core.wire.frame_types import AckEntry
from pybroker.core.wire.frames import MessageFragment

HOP = "tcp://127.0.0.1:4022"
CONV = str(uuid.UUID(int=7))
BROKER = str(uuid.UUID(int=8))


def _message(seq: int) -> MessageFragment:
    return MessageFragment(CONV, True, seq, 0, 1, 3, "s", "t", BROKER, None, "c", "m", "N",
                           False, False, 5, 0, 255, bytes(8), b"abc")


def test_a_conversation_has_at_most_a_window_of_messages_in_flight():
    t = Transmitter(fragment_size=1024, retry_scale=1.0)
    for seq in range(WINDOW + 500):
        assert t.submit("h", HOP, _message(seq))
    sent = []
    while (f := t.next_fragment(HOP, 0.0)) is not None:
        sent.append(f.sequence)
    assert sent == list(range(WINDOW))
    done = t.on_ack(AckEntry(CONV, True, BROKER, bytes(8), 10))
    assert [d.sequence for d in done] == list(range(10))
    more = []
    while (f := t.next_fragment(HOP, 0.0)) is not None:
        more.append(f.sequence)
    assert more == list(range(WINDOW, WINDOW + 10))
    # a lost message 10 comes again after its timeout; those after it wait in the window
    assert t.handle_timer(4.0) == {HOP}
    again = [f.sequence for f in iter(lambda: t.next_fragment(HOP, 4.0), None)]
    assert 10 in again and max(again) < 10 + WINDOW
    assert dialog.WINDOW == 2048


def test_fragments_acknowledged_before_they_are_sent_are_not_sent_nor_counted_in_flight():
    """After a restart of the sender the receiver may already hold some fragments of a
    message and acknowledge them before the new transmitter sends them: those are skipped,
    and the bytes counted in flight come back to 0 once the rest is acknowledged (a count
    that never came back would close the next hop's window for good)."""
    t = Transmitter(fragment_size=1, retry_scale=1.0)
    big = MessageFragment(CONV, True, 0, 0, 1, 4, "s", "t", BROKER, None, "c", "m", "N",
                          False, False, 5, 0, 255, bytes(8), b"abcd")
    assert t.submit("h", HOP, big)
    first = t.next_fragment(HOP, 0.0)
    assert first.fragment_number == 0
    # the receiver holds fragments 2 and 3 from before: acknowledged, fragment 0 too
    assert t.on_ack(AckEntry(CONV, True, BROKER, bytes(8), 0, ((0, 0, 0), (0, 2, 3)))) == []
    sent = [f.fragment_number for f in iter(lambda: t.next_fragment(HOP, 0.0), None)]
    assert sent == [1]
    assert t.in_flight_bytes(HOP) == 1
    done = t.on_ack(AckEntry(CONV, True, BROKER, bytes(8), 0, ((0, 1, 1),)))
    assert [d.sequence for d in done] == [0]
    assert t.in_flight_bytes(HOP) == 0


def test_a_message_acknowledged_whole_by_a_range_gives_its_bytes_back():
    """A message the receiver holds (status 2, out of order) is acknowledged by a range, not
    by through_sequence. Its bytes must leave the next hop's in-flight count then: they did
    not, so every held message narrowed the window for good, and after enough of them (a
    kill, drops) no new message could start: the sender stalled with messages unsent and
    nothing to retransmit."""
    t = Transmitter(fragment_size=1024, retry_scale=1.0)
    for seq in range(3):
        assert t.submit("h", HOP, _message(seq))
    assert [f.sequence for f in iter(lambda: t.next_fragment(HOP, 0.0), None)] == [0, 1, 2]
    assert t.in_flight_bytes(HOP) == 9
    # 0 was lost; 1 and 2 are held at the receiver and acknowledged whole by ranges
    done = t.on_ack(AckEntry(CONV, True, BROKER, bytes(8), 0, ((1, 0, 0xFFFFFFFF),
                                                               (2, 0, 0xFFFFFFFF))))
    assert [d.sequence for d in done] == [1, 2]
    assert t.in_flight_bytes(HOP) == 3
    assert [d.sequence for d in t.on_ack(AckEntry(CONV, True, BROKER, bytes(8), 3))] == [0]
    assert t.in_flight_bytes(HOP) == 0
