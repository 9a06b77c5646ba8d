"""Found by the chaos run (seed 100, 2 instances, 100,000 messages): after a SIGKILL every
unacknowledged message of a conversation went out again at once, and a single dropped frame
made the receiver hold thousands of later messages one by one (status 2): acknowledgements
fell behind, the senders resent everything again, and the run stopped making progress.
A conversation direction now has at most WINDOW messages in flight past its lowest
unacknowledged one."""

from __future__ import annotations

import uuid

from pybroker.wire import dialog
from pybroker.wire.dialog import WINDOW, Transmitter
from pybroker.wire.frames import AckEntry, MessageFragment

HOP = "tcp://127.0.0.1:4022"
CONV = str(uuid.UUID(int=7))
BROKER = str(uuid.UUID(int=8))


def _message(seq: int) -> MessageFragment:
    return MessageFragment(CONV, True, seq, 0, 1, 3, "s", "t", BROKER, None, "c", "m", "N",
                           False, False, 5, 0, 255, bytes(8), b"abc")


def test_a_conversation_has_at_most_a_window_of_messages_in_flight():
    t = Transmitter(fragment_size=1024, retry_scale=1.0)
    for seq in range(1000):
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
    assert dialog.WINDOW == 512
