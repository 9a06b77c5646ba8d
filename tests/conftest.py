"""Shared fixtures: a fake clock for the instance (tests never sleep), and one local
SparkSession for the whole run (it takes ~10 s to start)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # only ever bind to 127.0.0.1

# The suite starts several hundred Python processes (`python -m pybroker ...`, instance
# processes). With PYTHONDONTWRITEBYTECODE set, each compiled all of pybroker again (~0.6 s
# of a start's ~1.7 s); here they compile it once into a cache of the tests' own outside
# the working tree (PYTHONPYCACHEPREFIX), which keeps the tree free of bytecode as the
# setting asked.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(
        Path(tempfile.gettempdir()) / f"pybroker-tests-pycache-{os.getuid()}"))


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


# Under ``pytest -n 2`` (README), tests that share an expensive fixture run on one worker,
# so that the fixture is made once: the local SparkSession's tests (each worker that runs one
# starts a JVM of its own and warms it up: ~17 s to start, ~35 s more for its first
# resolves), and the modules whose module-scoped fixture starts instance processes or runs a
# whole bench (8-19 s each time). pytest-xdist's own way, an xdist_group mark with
# --dist loadgroup, groups nothing on pytest 9: xdist 3.8 rewrites a test's node id to carry
# the group, and pytest 9 no longer reads node ids from where xdist writes them
# (pytest-dev/pytest-xdist#1386). So the hook below gives xdist's scheduler units by module.
SPARK_SESSION_MODULES = ("tests/test_pipeline_spark.py", "tests/test_spark_templates.py")
SHARED_FIXTURE_MODULES = ("tests/test_cli.py", "tests/test_bench_serve.py",
                          "tests/test_bench_wire.py", "tests/test_demo_processes.py")


def work_unit(nodeid: str) -> str | None:
    """The unit a test is scheduled in with others (None: on its own): "spark" for the
    modules of the local SparkSession, its module for a module of SHARED_FIXTURE_MODULES."""
    module = nodeid.split("::", 1)[0]
    if module in SPARK_SESSION_MODULES:
        return "spark"
    if module in SHARED_FIXTURE_MODULES:
        return module
    return None


@pytest.hookimpl(wrapper=True, optionalhook=True)  # pytest-xdist's hook: unknown without it
def pytest_xdist_make_scheduler(config, log):
    """With --dist loadgroup (pyproject.toml's default), xdist's own scheduler, which keeps
    a work unit's tests on one worker, takes its units from work_unit first; xdist_group
    marks still make units where xdist can see them."""
    scheduler = yield
    if config.getvalue("dist") == "loadgroup":
        by_mark = scheduler._split_scope
        scheduler._split_scope = lambda nodeid: work_unit(nodeid) or by_mark(nodeid)
    return scheduler


@pytest.hookimpl(tryfirst=True)  # before the fixtures: no JVM is started for it
def pytest_runtest_setup(item) -> None:
    """A test of the local SparkSession must live in one of SPARK_SESSION_MODULES, or it
    would start a JVM of its own on the other worker."""
    if "spark" in getattr(item, "fixturenames", ()) and work_unit(item.nodeid) != "spark":
        pytest.fail(
            "a test of the local SparkSession (the spark fixture) belongs in "
            f"{' or '.join(SPARK_SESSION_MODULES)} (tests/conftest.py)", pytrace=False)


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
    from pybroker.apps.pipeline.engine import spark_session

    session = spark_session(
        "local[2]",
        {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g",
         "spark.sql.codegen.wholeStage": "false",
         "spark.sql.codegen.factoryMode": "NO_CODEGEN"},
        app_name="pybroker-tests",
    )
    yield session
    session.stop()
