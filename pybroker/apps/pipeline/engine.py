"""The two engines a pipeline job runs on: DuckDB (embedded, the default) and Spark.

Both run the same templates of sql/ (Spark through :func:`pybroker.storage.templates.to_spark`)
over named relations: Parquet inputs are registered under a name after their columns are
checked against :mod:`pybroker.apps.pipeline.schema`, each stage's result gets a name the next
template reads. Values never enter SQL text: paths go to the engines' Parquet readers, and
scalar inputs are rows of a registered relation.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pybroker.apps.pipeline.progress import Poller, Progress, elapsed
from pybroker.apps.pipeline.schema import Table
from pybroker.arguments import check_memory_limit
from pybroker.errors import InvalidArgumentError, PipelineError
from pybroker.storage import templates as sql_templates

ENGINES = ("duckdb", "spark")
MASTER_CONNECT_TIMEOUT_S = 5.0
# DuckDB's own default memory_limit is 80 % of RAM: a 10M-conversation resolve then peaked at
# 16 GB. The pipeline bounds it instead and lets DuckDB spill to a temporary directory;
# the process peaks somewhat above the limit (Parquet reading and writing buffers, Python).
DEFAULT_MEMORY_LIMIT = "2GB"
# The most rows of a relation of keys or options that Spark joins are told to broadcast
# (Engine.broadcastable): at ~250 bytes a row, ~250 MB copied to each executor at most. At
# 10,000,000 conversations x 100,000 routes the keys are ~516,000 rows.
BROADCAST_MAX_ROWS = 1_000_000
# The most distinct values of a text column that Engine.categorical makes a category (on
# DuckDB an ENUM). DuckDB's Parquet writer writes an ENUM's whole dictionary in every row
# group (122,880 rows): at 4,096 values of ~30 bytes, about a byte a row at most.
CATEGORY_MAX_VALUES = 4096
# JDK 17's G1 gives up on an allocation after two waits for a JNI critical section (the
# GCLocker) and throws OutOfMemoryError with most of the heap free; Spark reports it as "Not
# enough memory to build and broadcast the table" (JDK-8192647). A local driver's JVM waits
# longer instead; a user's own spark.driver.extraJavaOptions replaces this.
LOCAL_DRIVER_JAVA_OPTIONS = "-XX:+UnlockDiagnosticVMOptions -XX:GCLockerRetryAllocationCount=100"

# Accepted stored types per schema type (DuckDB's names); anything else is a wrong type.
_DUCKDB_ACCEPTS = {
    "VARCHAR": {"VARCHAR"},
    "INTEGER": {"TINYINT", "SMALLINT", "INTEGER", "UTINYINT", "USMALLINT"},
    "BIGINT": {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"},
    "BOOLEAN": {"BOOLEAN"},
    "TIMESTAMP": {"TIMESTAMP", "TIMESTAMP_NS", "TIMESTAMP_MS", "TIMESTAMP_S"},
    "BLOB": {"BLOB"},
    "DOUBLE": {"DOUBLE", "FLOAT"},
}
_SPARK_TYPE = {
    "VARCHAR": "string", "INTEGER": "int", "BIGINT": "bigint", "BOOLEAN": "boolean",
    "TIMESTAMP": "timestamp_ntz", "BLOB": "binary", "DOUBLE": "double",
}
_SPARK_ACCEPTS = {
    "VARCHAR": {"string"},
    "INTEGER": {"tinyint", "smallint", "int"},
    "BIGINT": {"tinyint", "smallint", "int", "bigint"},
    "BOOLEAN": {"boolean"},
    "TIMESTAMP": {"timestamp_ntz"},
    "BLOB": {"binary"},
    "DOUBLE": {"float", "double"},
}
_TYPE_HINT = {
    "TIMESTAMP": "a naive UTC timestamp (no time zone)",
    "VARCHAR": "text (GUIDs as lowercase strings)",
}


def _wrong_type(path: Path, column: str, expected: str, found: str) -> PipelineError:
    hint = _TYPE_HINT.get(expected, expected)
    return PipelineError(
        f"{path}: column {column} is {found}, expected {expected} ({hint})"
    )


def parquet_files(path: Path) -> list[Path]:
    """A Parquet file, or the *.parquet files of a directory (Spark writes part files)."""
    if not path.exists():
        raise PipelineError(f"no such file or directory: {path}")
    if path.is_dir():
        files = sorted(p for p in path.glob("*.parquet") if p.is_file())
        if not files:
            raise PipelineError(f"{path} holds no .parquet files")
        return files
    return [path]


def prepare_output(path: Path) -> Path:
    """An output directory: created, or emptied when it holds only a previous output
    (Parquet part files, _SUCCESS, .crc); any other existing path is refused."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise PipelineError(f"output {path} exists and is not a directory")
        for p in path.iterdir():
            ok = p.is_file() and (p.suffix in (".parquet", ".crc") or p.name.startswith(
                ("_SUCCESS", "._SUCCESS")))
            if not ok:
                raise PipelineError(
                    f"output {path} holds {p.name}, which is no previous pipeline output; "
                    "choose a new or empty directory"
                )
        for p in path.iterdir():
            p.unlink()
    path.mkdir(parents=True, exist_ok=True)
    return path


class Engine(ABC):
    name: str

    def __init__(self, progress: Progress | None = None) -> None:
        self.progress = progress or Progress(enabled=False)
        # each step this engine ran, in order: its name (a relation staged, "writing", ...)
        # and its seconds; `pybroker bench pipeline` prints them as where the time goes
        self.steps: list[tuple[str, float]] = []

    def _step_done(self, what: str, start: float, step: str | None) -> None:
        """A step of ``_running`` ended: kept in ``steps`` (as ``step``, else as ``what``)
        and shown as done."""
        self.steps.append((step or what, time.perf_counter() - start))
        self.progress.done(f"[{self.name}] {what}: done in {elapsed(start)}")

    @abstractmethod
    def read_parquet(self, name: str, path: Path, table: Table) -> None:
        """Register Parquet at ``path`` as relation ``name``, checked against ``table``."""

    @abstractmethod
    def register_rows(self, name: str, table: Table, rows: Sequence[tuple]) -> None:
        """A small relation of given rows (scalar inputs of a template)."""

    @abstractmethod
    def register_numbers(self, name: str, count: int) -> None:
        """The numbers 0 .. count - 1 as column ``n``."""

    @abstractmethod
    def stage(
        self, name: str, template: str, *, small: bool, reused: bool = False, **variables: Any
    ) -> None:
        """Run ``template`` as relation ``name``; ``small`` results are computed and kept
        now (they are read several times), large ones may stay lazy; a large ``reused``
        one is kept once computed (memory, spilling to disk)."""

    @abstractmethod
    def write(self, relation: str, path: Path) -> None:
        """Write a relation as Parquet part files in directory ``path``."""

    @abstractmethod
    def fetch(self, relation: str) -> tuple[list[str], list[tuple]]:
        """All rows of a (small) relation."""

    def categorical(self, name: str, relation: str, columns: Sequence[str]) -> str:
        """A relation of ``relation``'s rows in which each text column of ``columns`` with
        at most CATEGORY_MAX_VALUES distinct values is held as a category, for rows that are
        joined to many and written; returns its name. Values, and the Parquet written from
        it, are the same. Only DuckDB has categories (ENUM): elsewhere ``relation``."""
        return relation

    def broadcastable(self, *relations: str) -> bool:
        """Whether joins may copy these staged relations whole to every task instead of
        shuffling the other side (Spark's broadcast join). DuckDB's hash joins build on
        the smaller side by themselves: no."""
        return False

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- DuckDB ------------------------------------------------------------------------------


class DuckDBEngine(Engine):
    name = "duckdb"

    def __init__(
        self,
        progress: Progress | None = None,
        *,
        threads: int | None = None,
        memory_limit: str = DEFAULT_MEMORY_LIMIT,
        temp_directory: Path | None = None,
    ) -> None:
        super().__init__(progress)
        import duckdb

        self._duckdb = duckdb
        try:  # any size DuckDB takes: a pipeline job holds no instance's rows
            check_memory_limit(memory_limit, minimum=0)
        except InvalidArgumentError as exc:
            raise PipelineError(str(exc)) from None
        limit = memory_limit.strip()
        # Beyond the limit DuckDB spills to disk: a directory of our own, removed at close
        # (an in-memory database would otherwise spill to .tmp in the working directory).
        self._own_temp = temp_directory is None
        self.temp_directory = (Path(tempfile.mkdtemp(prefix="pybroker-spill-"))
                               if temp_directory is None else Path(temp_directory))
        self.con = duckdb.connect(config={
            "memory_limit": limit, "temp_directory": str(self.temp_directory)})
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute("SET preserve_insertion_order = false")
        # DuckDB prints its own progress bar to stdout, terminal or not; keep the tracking
        # (query_progress(), shown by _running on a terminal) and drop the printing
        self.con.execute("SET enable_progress_bar = true")
        self.con.execute("SET enable_progress_bar_print = false")
        if threads is not None:
            self.con.execute("SET threads = $n", {"n": threads})

    def read_parquet(self, name: str, path: Path, table: Table) -> None:
        duckdb = self._duckdb
        files = parquet_files(Path(path))
        try:
            rel = self.con.read_parquet([str(f) for f in files])
        except duckdb.Error as exc:
            raise PipelineError(f"{path} is not readable Parquet: {_first_line(exc)}") from exc
        found = dict(zip(rel.columns, (str(t) for t in rel.types), strict=True))
        exprs = []
        for column in table.columns:
            if column.name not in found:
                raise PipelineError(
                    f"{path}: column {column.name} is missing (a {table.name} file needs "
                    f"{', '.join(table.column_names)})"
                )
            stored = found[column.name]
            if stored not in _DUCKDB_ACCEPTS[column.type]:
                raise _wrong_type(path, column.name, column.type, stored)
            exprs.append(
                duckdb.ColumnExpression(column.name)
                .cast(duckdb.sqltype(column.type)).alias(column.name)
            )
        rel.project(*exprs).create_view(name, replace=True)

    def register_rows(self, name: str, table: Table, rows: Sequence[tuple]) -> None:
        # a table of bound values, not an Arrow table: the DuckDB engine needs no pyarrow
        # (pyarrow comes with the spark extra only)
        create = sql_templates.render("pipeline/duckdb__create_rows.sql", table=name,
                                      columns=table.columns)
        insert = sql_templates.render("pipeline/duckdb__insert_rows.sql", table=name,
                                      columns=table.columns)
        with self._failing_at(name):
            self.con.execute(create)
            if rows:
                self.con.executemany(insert, [list(r) for r in rows])

    def register_numbers(self, name: str, count: int) -> None:
        sql = sql_templates.render("pipeline/duckdb__numbers.sql")
        self._drop_table(name)
        self.con.sql(sql, params={"count": count}).to_table(name)

    def stage(
        self, name: str, template: str, *, small: bool, reused: bool = False, **variables: Any
    ) -> None:
        sql = sql_templates.render(template, **variables)
        if not small and not reused:
            # read once, by the next write: a view, so the rows stream from the inputs to
            # the Parquet writer instead of being kept (and spilled) first
            self._define_view_of(name, sql)
            return
        with self._running(name):
            self._execute_ddl_of(name, sql)

    def categorical(self, name: str, relation: str, columns: Sequence[str]) -> str:
        """Each few-valued column becomes an ENUM type of its values (``{name}_{column}``),
        and ``name`` a table of the rows with those columns cast: a join then carries one
        small integer per row for each, and the Parquet writer writes the type's values
        as the column's dictionary instead of hashing each row's text."""
        counts = sql_templates.render("pipeline/duckdb__text_value_counts.sql",
                                      relation=relation, columns=tuple(columns))
        with self._running(f"{name} (distinct values)"), self._failing_at(name):
            row = self.con.sql(counts).fetchone()
        categories = {
            column: f"{name}_{column}" for column, count in zip(columns, row, strict=True)
            if count is not None and 0 < count <= CATEGORY_MAX_VALUES
        }
        # the table of an earlier job on this engine uses the types about to be replaced
        with self._failing_at(name):
            self._drop_table(name)
        for column, type_name in categories.items():
            sql = sql_templates.render("pipeline/duckdb__create_enum.sql",
                                       type_name=type_name, column=column, relation=relation)
            with self._failing_at(name):
                self.con.execute(sql)
        self.stage(name, "pipeline/duckdb__categorical.sql", small=True, relation=relation,
                   categories=tuple(categories.items()))
        return name

    @contextlib.contextmanager
    def _failing_at(self, name: str) -> Iterator[None]:
        try:
            yield
        except self._duckdb.Error as exc:
            raise PipelineError(f"DuckDB failed at stage {name}: {_first_line(exc)}") from exc

    def _define_view_of(self, name: str, sql: str) -> None:
        with self._failing_at(name):
            self.con.sql(sql).create_view(name, replace=True)

    def _execute_ddl_of(self, name: str, sql: str) -> None:
        with self._failing_at(name):
            self._drop_table(name)
            self.con.sql(sql).to_table(name)

    def _drop_table(self, name: str) -> None:
        self.con.execute(sql_templates.render("pipeline/duckdb__drop_table.sql", table=name))

    def write(self, relation: str, path: Path) -> None:
        target = prepare_output(path) / "part-00000.parquet"
        with self._running(f"writing {path}", step="writing"):
            try:
                sql = sql_templates.render("pipeline/duckdb__write_parquet.sql",
                                           relation=relation)
                self.con.execute(sql, {"path": str(target)})
            except self._duckdb.Error as exc:
                raise PipelineError(f"DuckDB failed writing {path}: {_first_line(exc)}") from exc

    def fetch(self, relation: str) -> tuple[list[str], list[tuple]]:
        rel = self.con.table(relation)
        return list(rel.columns), rel.fetchall()

    def close(self) -> None:
        self.con.close()
        if self._own_temp:
            shutil.rmtree(self.temp_directory, ignore_errors=True)

    @contextlib.contextmanager
    def _running(self, what: str, step: str | None = None) -> Iterator[None]:
        start = time.perf_counter()

        def poll() -> None:
            pct = self.con.query_progress()
            if pct is not None and pct >= 0:
                self.progress.show(f"[duckdb] {what}: {pct:.0f}% ({elapsed(start)})")

        with Poller(poll) if self.progress.enabled else contextlib.nullcontext():
            yield
        self._step_done(what, start, step)


# -- Spark -------------------------------------------------------------------------------


_MASTER_FORMS = re.compile(
    r"^(local(\[(\*|[1-9][0-9]*)(,\s*[0-9]+)?\])?|local-cluster\[[0-9, ]+\]|yarn"
    r"|(spark|k8s|mesos)://\S+)$"
)


def check_master_form(master: str) -> None:
    """Refuse a master URL Spark cannot parse before Spark starts: Spark itself would print
    a Java stack trace first."""
    if not _MASTER_FORMS.match(master):
        raise PipelineError(
            f"--master {master!r} is not a Spark master URL: use local[*], local[N], "
            "spark://host:port, yarn or k8s://https://host:port")


def check_master_reachable(master: str, timeout: float = MASTER_CONNECT_TIMEOUT_S) -> None:
    """A spark://host:port master must accept a TCP connection within ``timeout`` seconds;
    otherwise SparkSession's own retries would hang for minutes."""
    check_master_form(master)
    if not master.startswith("spark://"):
        return
    for hostport in master.removeprefix("spark://").split(","):  # HA: several masters
        parsed = urlparse(f"spark://{hostport}")
        try:
            host, port = parsed.hostname, parsed.port or 7077
        except ValueError:
            raise PipelineError(
                f"Spark master URL {master!r}: {hostport!r} is not host:port with a port "
                "from 1 to 65535") from None
        if not host:
            raise PipelineError(f"Spark master URL {master!r} names no host")
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError:
            continue
    raise PipelineError(
        f"cannot reach Spark master {master} within {timeout:.0f} s "
        "(is the master running, and is the host:port right?)"
    )


def spark_session(master: str, conf: dict[str, str] | None = None, *, app_name: str = "pybroker"):
    """A SparkSession on ``master`` (local[*], local[N], spark://host:port, yarn, ...)."""
    check_master_reachable(master)
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - pyspark is an optional dependency
        raise PipelineError("the Spark engine needs pyspark: pip install 'pybroker[spark]'") \
            from exc
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "16")
        .config("spark.network.timeout", "60s")
    )
    host = urlparse(master.split(",")[0]).hostname if master.startswith("spark://") else None
    if master.startswith("local") or host in ("127.0.0.1", "localhost"):
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1")
    if master.startswith("local"):
        builder = builder.config("spark.driver.extraJavaOptions", LOCAL_DRIVER_JAVA_OPTIONS)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as exc:
        raise PipelineError(f"cannot start Spark on {master}: {_first_line(exc)}") from exc
    session.sparkContext.setLogLevel("ERROR")
    return session


class SparkEngine(Engine):
    name = "spark"

    def __init__(
        self,
        session=None,
        *,
        master: str = "local[*]",
        conf: dict[str, str] | None = None,
        progress: Progress | None = None,
    ) -> None:
        super().__init__(progress)
        self._owns_session = session is None
        self.spark = session if session is not None else spark_session(master, conf)
        # Spark 4.3 fails to checkpoint the routing steps (a UNION ALL whose wildcard branch
        # has anti joins: "key not found" while it propagates constraints); the steps need
        # none of the constraints it would infer.
        self.spark.conf.set("spark.sql.constraintPropagation.enabled", "false")
        self._views: list[str] = []
        self._persisted: list[Any] = []

    def read_parquet(self, name: str, path: Path, table: Table) -> None:
        from pyspark.sql import functions as F

        files = parquet_files(Path(path))
        try:
            df = self.spark.read.parquet(*(str(f.resolve()) for f in files))
        except Exception as exc:
            raise PipelineError(f"{path} is not readable Parquet: {_first_line(exc)}") from exc
        found = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        cols = []
        for column in table.columns:
            if column.name not in found:
                raise PipelineError(
                    f"{path}: column {column.name} is missing (a {table.name} file needs "
                    f"{', '.join(table.column_names)})"
                )
            if found[column.name] not in _SPARK_ACCEPTS[column.type]:
                raise _wrong_type(path, column.name, column.type, found[column.name])
            cols.append(F.col(column.name).cast(_SPARK_TYPE[column.type]).alias(column.name))
        self._view(df.select(*cols), name)

    def register_rows(self, name: str, table: Table, rows: Sequence[tuple]) -> None:
        schema = ", ".join(f"{c.name} {_SPARK_TYPE[c.type]}" for c in table.columns)
        self._view(self.spark.createDataFrame(list(rows), schema=schema), name)

    def register_numbers(self, name: str, count: int) -> None:
        self._view(self.spark.range(count).withColumnRenamed("id", "n"), name)

    def stage(
        self, name: str, template: str, *, small: bool, reused: bool = False, **variables: Any
    ) -> None:
        # Each CTE of the template runs as its own relation, and one read more than once is
        # computed once (see sql_templates.to_spark_stages: Spark inlines CTEs otherwise).
        parts = sql_templates.to_spark_stages(template, **variables)
        with self._running(name):
            try:
                for cte_name, sql, references in parts:
                    df = self.spark.sql(sql)
                    if cte_name is None:
                        if small:
                            # read several times by the next stages: computed once, with
                            # its lineage cut
                            df = df.localCheckpoint(eager=True)
                        elif reused:
                            from pyspark import StorageLevel

                            df = df.persist(StorageLevel.MEMORY_AND_DISK)
                            self._persisted.append(df)
                        self._view(df, name)
                    else:
                        if references > 1 and small:
                            df = df.localCheckpoint(eager=True)
                        self._view(df, cte_name)
            except Exception as exc:
                raise PipelineError(f"Spark failed at stage {name}: {_first_line(exc)}") \
                    from exc

    def write(self, relation: str, path: Path) -> None:
        path = Path(path)
        prepare_output(path)
        with self._running(f"writing {path}", step="writing"):
            try:
                self.spark.table(relation).write.mode("overwrite").parquet(str(path.resolve()))
            except Exception as exc:
                raise PipelineError(f"Spark failed writing {path}: {_first_line(exc)}") from exc

    def fetch(self, relation: str) -> tuple[list[str], list[tuple]]:
        df = self.spark.table(relation)
        with self._running(f"collecting {relation}"):
            rows = [tuple(r) for r in df.collect()]
        return list(df.columns), rows

    def broadcastable(self, *relations: str) -> bool:
        """Yes when each relation holds at most BROADCAST_MAX_ROWS rows, unless the session
        turned broadcast joins off (spark.sql.autoBroadcastJoinThreshold=-1). Spark cannot
        size a staged relation that came from joins (it estimates a join as the product of
        its inputs), so it would not broadcast them itself; a count of a staged relation is
        one small job."""
        threshold = self.spark.conf.get("spark.sql.autoBroadcastJoinThreshold", "10MB")
        if threshold.strip() == "-1":
            return False
        return all(self.spark.table(r).count() <= BROADCAST_MAX_ROWS for r in relations)

    def close(self) -> None:
        for df in self._persisted:
            with contextlib.suppress(Exception):
                df.unpersist()
        for name in self._views:
            with contextlib.suppress(Exception):
                self.spark.catalog.dropTempView(name)
        if self._owns_session:
            self.spark.stop()

    def _view(self, df, name: str) -> None:
        df.createOrReplaceTempView(name)
        self._views.append(name)

    @contextlib.contextmanager
    def _running(self, what: str, step: str | None = None) -> Iterator[None]:
        start = time.perf_counter()
        tracker = self.spark.sparkContext.statusTracker()

        def poll() -> None:
            parts = []
            for stage_id in sorted(tracker.getActiveStageIds()):
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    parts.append(f"stage {stage_id} {info.numCompletedTasks}/{info.numTasks}")
            if parts:
                if len(parts) > 3:
                    parts = [*parts[:3], f"+{len(parts) - 3} more"]
                self.progress.show(f"[spark] {what}: {', '.join(parts)} ({elapsed(start)})")

        with Poller(poll) if self.progress.enabled else contextlib.nullcontext():
            yield
        self._step_done(what, start, step)


def open_engine(
    engine: str,
    *,
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
    progress: Progress | None = None,
    spark=None,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
) -> Engine:
    if engine == "duckdb":
        return DuckDBEngine(progress, memory_limit=memory_limit)
    if engine == "spark":
        return SparkEngine(spark, master=master, conf=conf, progress=progress)
    raise PipelineError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:500]
