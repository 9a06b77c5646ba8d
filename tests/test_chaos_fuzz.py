"""Every decoder that reads bytes from the network raises only FrameError (the handshake's
connection nothing at all) for arbitrary bytes and for mutated valid inputs (hypothesis);
the seeded fuzz runner of ``pybroker chaos fuzz`` finds no crash in a short run."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.core.wire import frames
from pybroker.devtools.fuzz import frames as fuzzing
from pybroker.devtools.fuzz import wire as fuzz_wire

FAST = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", sorted(fuzz_wire.TARGETS))
@FAST
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes_raise_only_frame_error(name, data):
    fuzz_wire.TARGETS[name](data)  # anything but FrameError escapes and fails the test


@pytest.mark.parametrize("name", sorted(fuzz_wire.TARGETS))
@FAST
@given(seed=st.integers(0, 2**32), mutations=st.integers(0, 3))
def test_mutated_valid_inputs_raise_only_frame_error(name, seed, mutations):
    rng = random.Random(seed)
    data = fuzz_wire.valid_input(name, rng)
    for _ in range(mutations):
        data = fuzzing.mutate(data, rng)
    fuzz_wire.TARGETS[name](data)


@FAST
@given(seed=st.integers(0, 2**32))
def test_valid_frames_round_trip(seed):
    frame = fuzzing.sample_frame(random.Random(seed))
    assert frames.decode(frames.encode(frame)) == frame


@pytest.mark.parametrize("name", sorted(fuzz_wire.TARGETS))
def test_the_fuzz_runner_replays_its_seed_and_finds_no_crash(name):
    first = fuzz_wire.run(name, 1000, seed=11)
    assert first["crashes"] == 0 and first["inputs"] == 1000
    assert first["decoded"] > 0 and first["rejected"] > 0  # reaches past the prefix
    again = fuzz_wire.run(name, 1000, seed=11)
    assert (again["decoded"], again["rejected"]) == (first["decoded"], first["rejected"])


def test_a_crash_is_reported_not_raised(monkeypatch):
    def boom(data: bytes) -> bool:
        raise IndexError("planted")

    monkeypatch.setitem(fuzz_wire._COUNTING, "frames", boom)
    result = fuzz_wire.run("frames", 10, seed=1)
    assert result["crashes"] == 10 and "IndexError: planted" in result["examples"][0]
