"""Helpers shared by the conversation tests: a fake clock and a two-database instance."""

from __future__ import annotations

from dataclasses import dataclass

import pybroker

START = 1_800_000_000.0  # 2027-01-15, epoch seconds


class FakeClock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


@dataclass
class Broker:
    inst: pybroker.Instance
    clock: FakeClock
    a: pybroker.Database  # initiator side: service SA on queue QA
    b: pybroker.Database  # target side: service SB on queue QB (accepts DEFAULT)

    def rows(self, query: str, params=None) -> list[tuple]:
        return self.inst.sql(query, params).fetchall()


def make_broker(path, *, retry_scale: float = 1.0, target: bool = True,
                endpoint_cache: int = 10_000) -> Broker:
    clock = FakeClock()
    inst = pybroker.connect(path, clock=clock, retry_scale=retry_scale, worker=False,
                            endpoint_cache=endpoint_cache)
    a = inst.create_database("A")
    b = inst.create_database("B")
    a.create_queue("QA")
    a.create_service("SA", queue="QA")
    b.create_queue("QB")
    if target:
        b.create_service("SB", queue="QB", contracts=["DEFAULT"])
    return Broker(inst, clock, a, b)
