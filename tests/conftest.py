"""Shared fixtures: a fake clock for the instance (tests never sleep), and one local
SparkSession for the whole run (it takes ~10 s to start)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # only ever bind to 127.0.0.1


T0 = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC


class FakeClock:
    """The clock an instance reads (``pybroker.connect(clock=...)``); tests move ``now``."""

    def __init__(self, start: float = T0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def spark():
    # The pipeline's own builder: 127.0.0.1 only, UTC, no UI, and the local driver's JVM
    # options (engine.LOCAL_DRIVER_JAVA_OPTIONS) that keep a broadcast from failing spuriously.
    from pybroker.pipeline.engine import spark_session

    session = spark_session(
        "local[2]",
        {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g"},
        app_name="pybroker-tests",
    )
    yield session
    session.stop()
