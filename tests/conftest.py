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


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items) -> None:
    """The tests of the one local SparkSession run on one worker, and first.

    Under ``pytest -n 2`` each worker that runs a test of the ``spark`` fixture starts a JVM
    of its own and warms it up (~15 s to start, ~20 s more for its first resolve): one
    group (``--dist loadgroup``, pyproject.toml) starts one. Sent first, the group's few
    minutes run beside the other worker's many short tests rather than at the end."""
    def on_spark(item) -> bool:
        return "spark" in getattr(item, "fixturenames", ())

    for item in filter(on_spark, items):
        item.add_marker(pytest.mark.xdist_group("spark"))
    items.sort(key=lambda item: not on_spark(item))  # stable: each part keeps its order


@pytest.fixture(scope="session")
def spark():
    # The pipeline's own builder: 127.0.0.1 only, UTC, no UI, and the local driver's JVM
    # options (engine.LOCAL_DRIVER_JAVA_OPTIONS) that keep a broadcast from failing spuriously.
    # The tests' relations are small (a few thousand rows; the largest test, 100,000
    # conversations), and compiling each query's generated Java cost more than running it:
    # here Spark evaluates expressions interpreted (factoryMode NO_CODEGEN, wholeStage off),
    # with the same results (Spark's own tests check its expressions both ways). A seed
    # state's resolve took 6.2-7.7 s so against 8.3-10.9 s with generated code. The
    # standalone-cluster test (test_pipeline_spark) runs the CLI's session with Spark's
    # defaults, so the generated-code path is still tested end to end.
    from pybroker.pipeline.engine import spark_session

    session = spark_session(
        "local[2]",
        {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g",
         "spark.sql.codegen.wholeStage": "false",
         "spark.sql.codegen.factoryMode": "NO_CODEGEN"},
        app_name="pybroker-tests",
    )
    yield session
    session.stop()
