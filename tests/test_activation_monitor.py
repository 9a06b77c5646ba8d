"""The queue monitor core (pybroker.core.activation.monitor) with a fake ``now``: its states and
how many readers it starts as arrivals, receives, returns and checks come in (C3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.core.activation.monitor import (
    INACTIVE,
    NOTIFIED,
    RECEIVES_OCCURRING,
    STATES,
    QueueMonitor,
)

T0 = 1_800_000_000.0


def test_an_arrival_with_no_reader_starts_one_and_the_first_receive_shows_it_working():
    m = QueueMonitor(max_readers=4, interval=5.0)
    assert (m.state, m.readers) == (INACTIVE, 0)
    assert m.messages_arrived(T0) == 1
    assert (m.state, m.readers, m.last_activated_time) == (NOTIFIED, 1, T0)
    assert m.messages_arrived(T0 + 0.1) == 0  # one reader runs: arrivals add none
    m.reader_started(T0 + 0.1)
    assert m.state == NOTIFIED
    m.receive_happened(T0 + 0.2, messages=3)
    assert m.state == RECEIVES_OCCURRING


def test_arrivals_faster_than_receives_add_a_reader_per_interval_up_to_the_maximum():
    m = QueueMonitor(max_readers=3, interval=5.0)
    started = [m.messages_arrived(T0)]
    m.receive_happened(T0 + 0.5, 1)
    # checks every second; the queue never empties and no RECEIVE comes back empty
    for second in range(1, 31):
        started.append(m.tick(T0 + second, has_messages=True))
    assert sum(started) == 3 == m.readers
    # the second reader at the first check 5 s after the first, the third 5 s later
    assert [i for i, n in enumerate(started) if n] == [0, 5, 10]
    assert m.last_activated_time == T0 + 10
    assert m.state == RECEIVES_OCCURRING


def test_no_reader_is_added_while_the_readers_keep_up():
    m = QueueMonitor(max_readers=3, interval=5.0)
    m.messages_arrived(T0)
    added = 0
    for second in range(1, 31):
        m.receive_happened(T0 + second - 0.5, 0)  # an empty rowset since the last check
        added += m.tick(T0 + second, has_messages=True)
    assert added == 0 and m.readers == 1
    assert m.last_empty_rowset_time == T0 + 29.5


def test_an_empty_queue_at_the_check_adds_no_reader():
    m = QueueMonitor(max_readers=3, interval=1.0)
    m.messages_arrived(T0)
    assert [m.tick(T0 + s, has_messages=False) for s in range(2, 10)] == [0] * 8
    assert m.readers == 1


def test_a_returned_reader_is_not_restarted_until_messages_arrive_again():
    m = QueueMonitor(max_readers=2, interval=1.0)
    m.messages_arrived(T0)
    m.reader_started(T0)
    m.receive_happened(T0 + 0.1, 2)
    m.receive_happened(T0 + 0.2, 0)
    m.reader_returned(T0 + 0.3)
    assert (m.state, m.readers) == (INACTIVE, 0)
    assert [m.tick(T0 + s, has_messages=False) for s in range(1, 6)] == [0] * 5
    assert m.messages_arrived(T0 + 6) == 1
    assert (m.state, m.readers, m.last_activated_time) == (NOTIFIED, 1, T0 + 6)


def test_a_check_that_finds_messages_left_behind_starts_a_reader():
    """A reader that returned (or rolled back) with messages left: the next check sees
    them, as SQL Server's monitor does."""
    m = QueueMonitor(max_readers=1, interval=1.0)
    m.messages_arrived(T0)
    m.reader_returned(T0 + 0.5)
    assert m.tick(T0 + 1, has_messages=True) == 1
    assert m.readers == 1


def test_max_readers_zero_starts_nothing_and_a_lower_limit_stops_additions():
    m = QueueMonitor(max_readers=0)
    assert m.messages_arrived(T0) == 0 and m.tick(T0 + 10, True) == 0
    assert m.state == INACTIVE
    m = QueueMonitor(max_readers=5, interval=1.0)
    m.messages_arrived(T0)
    assert m.tick(T0 + 1, True) == 1
    m.limit(2)
    assert [m.tick(T0 + s, True) for s in range(2, 8)] == [0] * 6
    assert m.readers == 2
    m.reader_returned(T0 + 8)
    assert m.tick(T0 + 9, True) == 1


@pytest.mark.parametrize("bad", [-1, 32768])
def test_max_readers_outside_sql_servers_range_is_refused(bad):
    with pytest.raises(ValueError, match="0 to 32767"):
        QueueMonitor(max_readers=bad)
    with pytest.raises(ValueError, match="0 to 32767"):
        QueueMonitor(max_readers=1).limit(bad)


_inputs = st.lists(st.tuples(
    st.sampled_from(["arrive", "start", "receive", "empty", "return", "tick", "tick_empty"]),
    st.floats(min_value=0.0, max_value=3.0)), max_size=80)


@settings(max_examples=300, deadline=None)
@given(max_readers=st.integers(0, 6), interval=st.floats(0.0, 5.0), inputs=_inputs)
def test_any_sequence_keeps_readers_within_bounds_and_spaced_by_the_interval(
        max_readers, interval, inputs):
    m = QueueMonitor(max_readers=max_readers, interval=interval)
    now = T0
    running = 0  # readers asked for and not returned, as the driver counts them
    starts: list[float] = []
    for what, step in inputs:
        now += step
        asked = 0
        if what == "arrive":
            asked = m.messages_arrived(now)
        elif what == "start":
            m.reader_started(now)
        elif what in ("receive", "empty"):
            m.receive_happened(now, 1 if what == "receive" else 0)
        elif what == "return":
            if running:
                running -= 1
                m.reader_returned(now)
        else:
            asked = m.tick(now, has_messages=what == "tick")
        assert asked in (0, 1)
        if asked:
            # a reader is added beside running ones only after the interval
            if running:
                assert now - starts[-1] >= interval
            starts.append(now)
        running += asked
        assert m.readers == running <= max_readers
        assert m.state in STATES
        assert (m.state == INACTIVE) == (running == 0)
