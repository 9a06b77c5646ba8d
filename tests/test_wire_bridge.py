"""The engine's writer for the wire (pybroker/kernel/broker_endpoint/runtime.py ``_Bridge``): what
arrives is applied at once, acknowledgements alone at most every ACK_INTERVAL (P5.2:
deleting transmission-queue rows is never on the way of a delivery, so they can wait a
little and share a transaction)."""

from __future__ import annotations

import time
from typing import Any

from pybroker.kernel.broker_endpoint import runtime as ep_module
from pybroker.kernel.broker_endpoint.runtime import ACK_INTERVAL, _Bridge


class _Remote:
    def __init__(self) -> None:
        self.calls: list[tuple[str, float, Any]] = []

    def acknowledged(self, acks: list[Any]) -> None:
        self.calls.append(("acks", time.monotonic(), list(acks)))

    def arrive(self, batch: list[Any]) -> None:
        self.calls.append(("arrive", time.monotonic(), [a.fragment.name for a in batch]))

    def write_events(self) -> None:
        pass

    def event(self, *args: Any) -> None:
        pass


class _Fragment:
    def __init__(self, name: str) -> None:
        self.name = name
        self.body = b"x"


def _bridge() -> tuple[_Bridge, _Remote]:
    remote = _Remote()
    bridge = _Bridge(remote, lambda connection, probe: None,  # type: ignore[arg-type]
                     lambda: None)
    bridge.start()
    return bridge, remote


def _wait_for(remote: _Remote, count: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while len(remote.calls) < count and time.monotonic() < deadline:
        time.sleep(0.001)


def test_acknowledgements_close_together_are_applied_together():
    bridge, remote = _bridge()
    try:
        bridge.acknowledged(["a1"])
        _wait_for(remote, 1)
        # the first is applied at once (nothing was applied for a while); the next ones,
        # arriving within ACK_INTERVAL of it, wait for each other
        for name in ("a2", "a3", "a4"):
            bridge.acknowledged([name])
            time.sleep(ACK_INTERVAL / 10)
        _wait_for(remote, 2)
        time.sleep(ACK_INTERVAL * 3)
    finally:
        bridge.stop()
    kinds = [(kind, items) for kind, _, items in remote.calls]
    assert kinds == [("acks", ["a1"]), ("acks", ["a2", "a3", "a4"])]
    assert remote.calls[1][1] - remote.calls[0][1] >= ACK_INTERVAL * 0.9


def test_an_arrival_is_applied_at_once_with_the_acknowledgements_waiting():
    bridge, remote = _bridge()
    try:
        bridge.acknowledged(["a1"])
        _wait_for(remote, 1)
        bridge.acknowledged(["a2"])  # would wait ACK_INTERVAL alone
        bridge.arrived(1, "peer", [_Fragment("f1")])  # type: ignore[list-item]
        _wait_for(remote, 3)
    finally:
        bridge.stop()
    kinds = [(kind, items) for kind, _, items in remote.calls]
    assert kinds == [("acks", ["a1"]), ("acks", ["a2"]), ("arrive", ["f1"])]
    assert ep_module.ACK_INTERVAL == ACK_INTERVAL


def test_stopping_applies_the_acknowledgements_still_waiting():
    bridge, remote = _bridge()
    bridge.acknowledged(["a1"])
    _wait_for(remote, 1)
    bridge.acknowledged(["a2"])
    bridge.stop()
    assert [items for _, _, items in remote.calls] == [["a1"], ["a2"]]
