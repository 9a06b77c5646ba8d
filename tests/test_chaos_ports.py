"""Ports for processes started on a fixed port (pybroker.devtools.chaos.ports): free, distinct, and
below the kernel's ephemeral range, where no outgoing connection can take them between
the choice and the bind."""

from __future__ import annotations

import socket

from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.devtools.chaos import ports


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=1, max_value=12))
def test_the_ports_are_distinct_free_and_below_the_ephemeral_range(n):
    chosen = ports.free_ports(n)
    assert len(chosen) == len(set(chosen)) == n
    start = ports.ephemeral_start()
    for port in chosen:
        assert ports.LOWEST <= port < start
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_chosen(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        picks = iter([busy, busy, busy + 1 if busy + 1 < 65536 else busy - 1])
        monkeypatch.setattr(ports, "ephemeral_start", lambda: 65_535)
        monkeypatch.setattr(ports._rng, "randint", lambda low, high: next(picks))
        assert ports.free_ports(1) != [busy]


def test_a_range_with_no_room_below_it_falls_back_to_the_kernels_choice(monkeypatch):
    monkeypatch.setattr(ports, "ephemeral_start", lambda: ports.LOWEST + 10)
    chosen = ports.free_ports(3)
    assert len(set(chosen)) == 3 and all(0 < p < 65536 for p in chosen)
