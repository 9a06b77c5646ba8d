"""The fuzz target and the mutation generator of pybroker.devtools.fuzz.frames."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.core.wire import adjacent, frames
from pybroker.devtools.fuzz.frames import fuzz_frames, mutate, mutated_frames, sample_frame
from pybroker.errors import FrameError


def test_mutated_frames_are_reproducible_and_varied() -> None:
    first = list(itertools.islice(mutated_frames(7), 200))
    assert first == list(itertools.islice(mutated_frames(7), 200))
    assert first != list(itertools.islice(mutated_frames(8), 200))
    assert len(set(first)) > 190
    valid = 0
    for data in first:
        try:
            frames.FrameDecoder().feed(data)
        except FrameError:
            continue
        valid += 1
    assert 10 <= valid <= 150  # most mutations break the frame, a few leave it whole


def test_sample_frames_are_valid_and_of_every_type() -> None:
    rnd = random.Random(3)
    sample = [sample_frame(rnd) for _ in range(300)]
    assert {type(f) for f in sample} == {frames.Hello, frames.MessageFragment, frames.Ack,
                                         frames.Notice, frames.Keepalive, frames.Close,
                                         frames.Probe}
    for frame in sample:
        assert frames.decode(frames.encode(frame)) == frame
    assert mutate(b"", rnd) is not None


def test_fuzz_frames_passes_on_mutated_frames() -> None:
    for data in itertools.islice(mutated_frames(2026), 300):
        fuzz_frames(data)


@settings(max_examples=100, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_fuzz_frames_passes_on_arbitrary_bytes(data: bytes) -> None:
    fuzz_frames(data)


def test_fuzz_frames_reports_a_decoder_that_raises_something_else(monkeypatch) -> None:
    def broken_feed(self, data: bytes) -> list:
        raise ValueError("a bug")

    monkeypatch.setattr(frames.FrameDecoder, "feed", broken_feed)
    with pytest.raises(ValueError, match="a bug"):
        fuzz_frames(b"PB\x01")


def test_fuzz_frames_reports_a_connection_that_raises(monkeypatch) -> None:
    def broken(self, frame, now) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(adjacent.AdjacentConnection, "_frame_received", broken)
    with pytest.raises(KeyError):
        fuzz_frames(frames.encode(frames.Keepalive()))


def test_pybroker_fuzz_frames_finds_nothing_in_a_short_fixed_run():
    """The short version of `pybroker fuzz frames --count 1000000` (README, Reliability)."""
    from pybroker.devtools.fuzz import targets as fuzz

    report = fuzz.run("frames", count=3000, seed=7)
    assert report.count == 3000 and report.crashes == 0 and report.hangs == 0
    assert report.refused > 0 and report.accepted > 0  # both outcomes are exercised
