"""The instance file: one DuckDB database and one transaction per write.

The file's schema (its migrations and its catalog's views and macros) is prepared when it
opens, by the Schema of storage/schema.py the store holds. An open for reading
(``read_only=True``) writes nothing: it checks that the file is an instance at this
pybroker's schema version and leaves migrations and definitions alone. Every DuckDB error
is turned into a BrokerError here, in words of our own (storage/duckdb_errors.py): a damaged file,
a write refused by a read-only open, a value the file cannot hold.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb

from pybroker.arguments import MIN_MEMORY_LIMIT, check_memory_limit
from pybroker.errors import BrokerError, InstanceClosedError, InvalidArgumentError, StorageError
from pybroker.storage import no_pandas
from pybroker.storage import recovery as storage_recovery
from pybroker.storage import templates as sql_templates
from pybroker.storage.duckdb_errors import explain_open_error, translate_error
from pybroker.storage.schema import Schema

# DuckDB checkpoints (writes the tables into the file and truncates the write-ahead log)
# when the log passes this size; DuckDB's default is 16MB. A queue's rows mostly come and go
# between two checkpoints, so a larger log means fewer checkpoints that each write little:
# 1 MiB bodies over the wire went from ~31-38 to ~43-46 MB/s (`pybroker bench wire` case d,
# 40 messages). The cost: a file reopened after a crash replays up to this much log.
CHECKPOINT_THRESHOLD = "64MiB"
# ... at most this share of the memory limit: DuckDB holds the rows of the log in memory and
# needs as much again to checkpoint them, so a 64 MiB log under a limit of 128 MiB or less
# made a commit fail for want of memory (and the file unusable until reopened)
CHECKPOINT_SHARE = 4

# The most memory DuckDB may hold for a file instance (its buffer pool: the file's blocks
# it has read or written, rows committed but not yet checkpointed, query results). DuckDB's
# own default is 80 % of the machine's memory, and it keeps every block a checkpoint wrote
# until that much is used: 1,000,000 idle conversations, each with one message waiting,
# held 175 MB of such blocks, 5,000,000 would hold ~0.9 GB (P7: memory should follow the
# active conversations, not all of them). Under a limit DuckDB lets the clean blocks go and
# reads them back from the file when needed. An in-memory instance keeps DuckDB's default:
# its rows have no file to go back to.
DEFAULT_MEMORY_LIMIT = "256MiB"
# DuckDB's worker threads for an instance opened for writing. An instance's statements are
# small (a batch of rows in, a few rows out): DuckDB's second thread, by default one per
# core, gains them nothing and costs CPU to hand work over and wait for it; with one thread
# a message over the wire cost 18 % less CPU and a local SEND -> RECEIVE 29 % less (two
# cores; `pybroker bench wire`). A file that serves analysts' large queries may be given more
# (connect(threads=), `pybroker serve --threads`); a read-only open keeps DuckDB's default.
DEFAULT_THREADS = 1
MAX_THREADS = 1024
# While a large body is read back (Store.streaming), DuckDB's limit is at least this much
# above the memory it cannot let go of: what the read itself pins (a statement's pieces,
# about 8 MiB, and its scan)
STREAM_ROOM = 32 * 2**20
# Pieces (P4.4) deleted from a table before the file is checkpointed once the table is
# empty (Store._tidy_pieces): 16 MiB of message_parts.PIECE_SIZE, one vector of them (with
# 128, every RECEIVE of a 2 MiB message that left message_fragments empty checkpointed the
# file, 15-20 ms)
TIDY_PIECES = 2048
# DuckDB holds a body in one block of its size (twice while RECEIVE reads it back), and a
# block larger than the limit is refused: a statement that binds a value of 1/32 of the
# limit or more raises the limit to leave room for BODY_ROOM times that value above it, for
# as long as the file is open (lowering it again while such a body is held unwritten would
# make DuckDB's next checkpoint fail for good).
BODY_ROOM = 3
_MAX_LENGTH = re.compile(r"Max String Length: (\d+)")
_SIZED = frozenset((bytes, bytearray, str))  # bound values that may hold a body

# seconds: how long close() keeps interrupting a statement another thread still runs after
# close's deadline before it leaves closing the connection to that statement's end
INTERRUPT_WAIT = 2.0
_LOCK_POLL = 0.05  # seconds between looks at close's deadline while waiting for the lock


def checkpoint_threshold(memory_limit: int | None) -> str:
    """CHECKPOINT_THRESHOLD, or a CHECKPOINT_SHARE of a smaller ``memory_limit`` (bytes;
    None: DuckDB's own limit, a share of the machine's memory)."""
    most = check_memory_limit(CHECKPOINT_THRESHOLD)
    if memory_limit is None or memory_limit // CHECKPOINT_SHARE >= most:
        return CHECKPOINT_THRESHOLD
    return f"{memory_limit // CHECKPOINT_SHARE}B"


def check_threads(value: object) -> int:
    """DuckDB's worker threads for an instance: a whole number from 1 to MAX_THREADS."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_THREADS:
        raise InvalidArgumentError(
            f"threads must be a whole number from 1 to {MAX_THREADS:,}, not {value!r}")
    return value


# What DuckDB answers to a user's statement that is wrong in itself (not the file's fault).
_USER_ERRORS = (duckdb.CatalogException, duckdb.BinderException, duckdb.ParserException,
                duckdb.ConstraintException, duckdb.ConversionException,
                duckdb.InvalidInputException, duckdb.OutOfRangeException)


class StoreLock:
    """The store's re-entrant lock: one thread uses the connection at a time, and holds it
    for a whole transaction. While the store closes, a thread that waits for the lock gives
    up at close's deadline (InstanceClosedError) rather than waiting for ever behind a
    transaction close is about to cut off."""

    __slots__ = ("_lock", "deadline")

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.deadline: float | None = None  # time.monotonic(); set by Store.closing()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        lock = self._lock
        if not blocking or timeout >= 0:
            return lock.acquire(blocking, timeout)
        if lock.acquire(False):
            return True
        while not lock.acquire(True, _LOCK_POLL):
            deadline = self.deadline
            if deadline is not None and time.monotonic() >= deadline:
                raise InstanceClosedError(
                    "the instance was closed while this call waited for another thread's "
                    "transaction to end: nothing of this call was written; open the file "
                    "again with pybroker.connect() to go on")
        return True

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class Store:
    """One open instance file. Not shared between processes: DuckDB locks the file."""

    def __init__(self, path: str | Path | None, *, read_only: bool = False,
                 memory_limit: str | None = None, threads: int | None = None) -> None:
        """``memory_limit`` bounds DuckDB's memory (check_memory_limit's sizes); None:
        DEFAULT_MEMORY_LIMIT for a file opened for writing, DuckDB's own default else.
        ``threads``: DuckDB's worker threads (check_threads); None: DEFAULT_THREADS unless
        read-only (DuckDB's own default, one per core)."""
        limit = None if memory_limit is None else check_memory_limit(memory_limit)
        if threads is not None:
            check_threads(threads)
        elif not read_only:
            threads = DEFAULT_THREADS
        if limit is None and path is not None and not read_only:
            limit = check_memory_limit(DEFAULT_MEMORY_LIMIT)
        self.memory_limit = limit  # bytes, or None: DuckDB's default
        self._limit_now = limit  # ... raised for large bodies (_fit)
        self.path = None if path is None else Path(path)
        self.read_only = read_only
        target = ":memory:" if path is None else str(path)
        self._target = target
        if self.path is not None and self.path.is_dir():
            raise StorageError(f"cannot open instance file {self.path}: it is a directory")
        if read_only and (self.path is None or not self.path.exists()):
            raise StorageError(f"no instance file at {target} to open read-only")
        wal_left = not read_only and Path(f"{target}.wal").exists()
        try:
            if self.path is not None and not read_only:
                self._con = storage_recovery.connect_for_writing(self.path)
            else:
                self._con = duckdb.connect(target, read_only=read_only)
        except duckdb.Error as exc:
            if read_only and storage_recovery.is_replay_failure(exc):
                raise StorageError(
                    f"cannot open instance file {target} read-only: its write-ahead log "
                    "holds changes DuckDB replays only in an open for writing; open it once "
                    "for writing (pybroker.connect(path), or a command that changes it), "
                    "then read-only") from exc
            raise StorageError(explain_open_error(target, exc)) from exc
        # no progress bar on stdout (a long query would write one into `--json` output)
        self._con.execute("SET enable_progress_bar = false")
        if threads is not None:
            no_pandas.call(self._con.execute, "SET threads = $threads", {"threads": threads})
        if not read_only:
            no_pandas.call(self._con.execute,
                           sql_templates.render("instance/set_checkpoint_threshold.sql"),
                           {"threshold": checkpoint_threshold(limit)})
        self._lock = StoreLock()
        self._schema = Schema(self._con, target, self.path, read_only=read_only,
                              transaction=self.transaction)
        # close() and the statements of other threads agree here on whether the connection
        # may still be used, and on who closes it (Store.close)
        self._state = threading.Lock()
        self._closed = False
        # statements running now: one at most under _lock, and replace_apart's (live views)
        self._running = 0
        self._close_pending = False  # the last running statement closes the connection
        self._depth = 0
        self._owner: int | None = None  # the thread whose transaction is open (in_transaction)
        self._end_callbacks: list[Callable[[bool], None]] = []
        self._apart: duckdb.DuckDBPyConnection | None = None  # commit_apart's connection
        self._live: duckdb.DuckDBPyConnection | None = None  # replace_apart's connection
        self._reader: duckdb.DuckDBPyConnection | None = None  # read_apart's connection
        self._reading = threading.Lock()  # one read_apart at a time
        # pieces deleted by the open transaction, and since their table was last found
        # empty, per table (its count template): pieces_deleted, _tidy_pieces
        self._pieces_deleting: dict[str, int] = {}
        self._pieces_deleted: dict[str, int] = {}
        self._checkpoint_wanted = False  # checkpoint_after_commit
        try:
            self._schema.check_instance()
            if limit is not None and wal_left:
                self._con.execute("CHECKPOINT")  # what the log replayed goes to the file
            if not read_only:
                self._schema.prepare()
            if limit is not None:
                self._limit_now = 0
                self._room_for(self._con, self._longest_body())
        except BaseException as exc:
            self._con.close()
            if isinstance(exc, duckdb.Error):
                raise self._translate(exc) from exc
            raise

    # -- errors --------------------------------------------------------------------------

    def check_writable(self) -> None:
        """Refuse a write on an instance opened read-only, before anything is attempted."""
        if self.read_only:
            raise StorageError(
                f"instance file {self._target} is open read-only: reopen it without "
                "read_only=True to change it")

    def _translate(self, exc: duckdb.Error) -> BrokerError:
        if self._closed:  # cut off by close(): interrupted, or the connection went
            return InstanceClosedError()
        return translate_error(exc, self._target, read_only=self.read_only)

    # -- queries -------------------------------------------------------------------------
    # Statements that bind values go through no_pandas.call: DuckDB's look for pandas on
    # every bound value is answered there without a search of sys.path (storage/no_pandas.py).

    def _begin_statement(self) -> duckdb.DuckDBPyConnection:
        """The connection for one statement (under _lock), unless the store is closed."""
        with self._state:
            if self._closed:
                raise InstanceClosedError()
            self._running += 1
        return self._con

    def _end_statement(self) -> None:
        with self._state:
            self._running -= 1
            if self._close_pending and not self._running:
                self._close_pending = False
                self._con.close()

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        with self._lock:
            con = self._begin_statement()
            try:
                if params and self._limit_now is not None:
                    self._fit(con, params)
                no_pandas.call(con.execute, sql, params)
            except duckdb.Error as exc:
                raise self._translate(exc) from exc
            finally:
                self._end_statement()

    def fetchall(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None
    ) -> list[tuple[Any, ...]]:
        return self._execute(sql, params, _all_rows)

    def fetchone(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None
    ) -> tuple[Any, ...] | None:
        return self._execute(sql, params, _one_row)

    def run(
        self, template: str, params: dict[str, Any] | None = None, **variables: Any
    ) -> list[tuple[Any, ...]]:
        """Run a statement of sql/ (rendered with ``variables``, the template's jinja
        switches; values are always bound parameters) with bound parameters."""
        return self._execute(sql_templates.render(template, **variables), params,
                             _rows_if_any)

    def _execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None,
                 fetch: Callable[[duckdb.DuckDBPyConnection], Any]) -> Any:
        """One statement under the lock, its errors translated; ``fetch`` reads its rows."""
        with self._lock:
            con = self._begin_statement()
            try:
                if params and self._limit_now is not None:
                    self._fit(con, params)
                return fetch(no_pandas.call(con.execute, sql, params))
            except duckdb.Error as exc:
                raise self._translate(exc) from exc
            finally:
                self._end_statement()

    def each_row(self, template: str, params: dict[str, Any],
                 consume: Callable[[tuple[Any, ...]], None]) -> None:
        """Run a statement of sql/ and hand its rows to ``consume`` one at a time, as they
        are fetched: large values (a message's fragments) are not all in Python at once."""
        sql = sql_templates.render(template)
        with self._lock:
            con = self._begin_statement()
            try:
                cursor = no_pandas.call(con.execute, sql, params)
                while (row := cursor.fetchone()) is not None:
                    consume(row)
                    del row
            except duckdb.Error as exc:
                raise self._translate(exc) from exc
            finally:
                self._end_statement()

    def query(self, template: str, params: dict[str, Any] | None = None, **variables: Any):
        """Run a template of sql/ with bound parameters; returns (column names, rows)."""
        return self._execute(sql_templates.render(template, **variables), params,
                             _columns_and_rows)

    def user_statement(self, sql: str, params: dict[str, Any]
                       ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """One statement of a user's own SQL (a T-SQL batch's, translated for DuckDB by
        pybroker.core.tsql.ordinary_sql): its column names and rows. What DuckDB refuses of
        what the user wrote (no such table, a duplicate key, a value of the wrong type) is
        an InvalidArgumentError with DuckDB's explanation, as Instance.sql() gives it."""
        with self._lock:
            con = self._begin_statement()
            try:
                cursor = no_pandas.call(con.execute, sql, params)
                columns = [d[0] for d in cursor.description or ()]
                return columns, cursor.fetchall() if columns else []
            except _USER_ERRORS as exc:
                if self._closed:
                    raise InstanceClosedError() from exc
                raise InvalidArgumentError(
                    f"DuckDB refused it: {str(exc).splitlines()[0]}") from exc
            except duckdb.Error as exc:
                raise self._translate(exc) from exc
            finally:
                self._end_statement()

    def _fit(self, con: duckdb.DuckDBPyConnection,
             params: Sequence[Any] | dict[str, Any]) -> None:
        """Raise the memory limit before a statement that binds a large body (BODY_ROOM)."""
        largest = 0
        for value in params.values() if isinstance(params, dict) else params:
            if type(value) in _SIZED and len(value) > largest:
                largest = len(value)
        self._room_for(con, largest)

    def room_apart(self, size: int) -> None:
        """Room for ``size`` bytes about to be committed apart (commit_apart) while the
        transaction open on the first connection has written: DuckDB can neither
        checkpoint them nor let them go from memory until that transaction ends (DuckDB
        1.5.6: 1 GB of 127 KiB pieces so committed under a 256 MiB limit failed a commit,
        and the file, for good), so the limit leaves room for them once above it, for as
        long as the file is open (as for a body bound whole, three times)."""
        if self._limit_now is None:
            return
        with self._lock:
            self._begin_statement()
            try:
                self._room_for(self._side(), size, 1)
            except duckdb.Error as exc:
                raise self._translate(exc) from exc
            finally:
                self._end_statement()

    def _room_for(self, con: duckdb.DuckDBPyConnection, body: int,
                  room: int = BODY_ROOM) -> None:
        """The memory limit, raised if a body of ``body`` bytes needs it (BODY_ROOM)."""
        base = self.memory_limit or 0
        need = base + room * body if body >= base // 32 else base
        if need > (self._limit_now or 0):
            no_pandas.call(con.execute, "SET memory_limit = $limit", {"limit": f"{need}B"})
            self._limit_now = need

    def commit_apart(self, template: str, rows: Iterable[dict[str, Any]],
                     every: int) -> None:
        """Run a statement of sql/ once per ``rows`` on a second connection to the file,
        committing after every ``every`` rows and at the end: outside the transaction the
        main connection may have open, which neither sees these rows nor is rolled back
        with them (the caller answers for them: transmission_pieces.py). DuckDB holds
        about three times what one transaction writes until it commits; this, ``every``
        rows' worth."""
        sql = sql_templates.render(template)
        with self._lock:
            self._begin_statement()
            try:
                apart = self._side()
                apart.execute("BEGIN TRANSACTION")
                try:
                    for n, params in enumerate(rows, 1):
                        if self._closed:  # close() came meanwhile: what is not committed
                            raise InstanceClosedError()  # is not (the next open sweeps)
                        no_pandas.call(apart.execute, sql, params)
                        if n % every == 0:
                            apart.execute("COMMIT")
                            apart.execute("BEGIN TRANSACTION")
                    apart.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(duckdb.Error):
                        apart.execute("ROLLBACK")
                    raise
            except duckdb.Error as exc:
                raise self._translate(exc) from exc
            finally:
                self._end_statement()

    def replace_apart(self, statements: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Run statements of sql/ in one transaction on a connection of their own, without
        the store's lock: a transaction another thread holds open on the main connection
        neither delays them nor sees them before it ends. Only for tables no statement
        of the main connection writes while threads run (kernel/live_views.py, the one caller,
        keeps them so); the caller serializes its calls."""
        rendered = [(sql_templates.render(t), params) for t, params in statements]
        con = self._begin_statement()
        try:
            if self._live is None:
                self._live = con.cursor()
            live = self._live
            live.execute("BEGIN TRANSACTION")
            try:
                for sql, params in rendered:
                    no_pandas.call(live.execute, sql, params)
                live.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(duckdb.Error):
                    live.execute("ROLLBACK")
                raise
        except duckdb.Error as exc:
            raise self._translate(exc) from exc
        finally:
            self._end_statement()

    def read_apart(self, template: str, params: dict[str, Any] | None = None,
                   **variables: Any) -> list[tuple[Any, ...]]:
        """Run a query of sql/ on a connection of its own, without the store's lock: it sees
        what the file holds as last committed, never the write transaction another thread
        holds open on the main connection (a receiving transaction reads the ready
        messages so while another writes, kernel/messaging/receive.py); ``variables`` as
        run()'s."""
        sql = sql_templates.render(template, **variables)
        with self._reading:
            con = self._begin_statement()
            try:
                if self._reader is None:
                    self._reader = con.cursor()
                return no_pandas.call(self._reader.execute, sql, params).fetchall()
            except duckdb.Error as exc:
                raise self._translate(exc) from exc
            finally:
                self._end_statement()

    @contextlib.contextmanager
    def streaming(self, limit: int) -> Iterator[None]:
        """A large read that passes each block once (a body read back from its pieces):
        DuckDB keeps at most ``limit`` bytes meanwhile, so what was read gives way to
        what comes next, rather than the whole body staying in its buffers beside the
        copy the reader makes (PostgreSQL reads a large table through a small ring of
        buffers for the same reason). Only the file's blocks may give way (DuckDB's
        BASE_TABLE memory): rows committed since the last checkpoint cannot while a
        transaction that wrote is open, as RECEIVE's has, so the limit stays STREAM_ROOM
        above all the rest (at 64 MiB flat, a 50 MiB body read back with 60 MiB of its
        fragments not yet checkpointed failed for want of memory). Never below
        MIN_MEMORY_LIMIT; if DuckDB cannot get down to it, the read goes on under the
        usual limit."""
        if self._limit_now is None:
            yield
            return
        with self._lock:
            # on the second connection: the limit is the whole file's, and a statement
            # that fails there cannot abort the transaction open on the first
            side = self._side()
            row = side.execute(sql_templates.render("instance/select_held_memory.sql")
                               ).fetchone()
            limit = max(limit, MIN_MEMORY_LIMIT, int(row[0] if row else 0) + STREAM_ROOM)
            if limit >= self._limit_now:
                yield
                return
            lowered = True
            try:
                no_pandas.call(side.execute, "SET memory_limit = $limit",
                               {"limit": f"{limit}B"})
            except duckdb.Error:
                lowered = False
            try:
                yield
            finally:
                if lowered:
                    no_pandas.call(side.execute, "SET memory_limit = $limit",
                                   {"limit": f"{self._limit_now}B"})

    def _side(self) -> duckdb.DuckDBPyConnection:
        """The second connection to the file (commit_apart, streaming), made once."""
        if self._apart is None:
            self._apart = self._con.cursor()
        return self._apart

    def release_memory(self) -> None:
        """Hand back to the system the memory DuckDB's allocator kept after large writes.
        A checkpoint of fragments (P4.4) needs about the log's size again, and DuckDB 1.5
        keeps what it freed: 100 MB of fragments committed 1 MiB at a time left the
        process ~70 MB larger than DuckDB's own count (duckdb_memory()), until setting
        the memory limit, even to the value it has, flushed it (measured, DuckDB 1.5.6)."""
        if self._limit_now is None:
            return
        with self._lock:
            con = self._begin_statement()
            try:
                no_pandas.call(con.execute, "SET memory_limit = $limit",
                               {"limit": f"{self._limit_now}B"})
            except duckdb.Error as exc:
                raise self._translate(exc) from exc
            finally:
                self._end_statement()

    def _longest_body(self) -> int:
        """The longest body the file holds, or did (select_longest_bodies.sql)."""
        sql = sql_templates.render("instance/select_longest_bodies.sql")
        row = self._con.execute(sql).fetchone() or ()
        return max((int(m.group(1)) for text in row if text
                    for m in [_MAX_LENGTH.search(text)] if m), default=0)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing: a statement that fails rolls back everything since BEGIN."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self.execute("BEGIN TRANSACTION")
            self._depth = 1
            self._owner = threading.get_ident()
            try:
                yield
            except BaseException:
                self._depth = 0
                self._pieces_deleting.clear()
                self._checkpoint_wanted = False
                with contextlib.suppress(BrokerError):  # a damaged file may refuse even this
                    self.execute("ROLLBACK")
                for callback in self._end_callbacks:
                    callback(False)
                raise
            else:
                self._depth = 0
                try:
                    self.execute("COMMIT")
                except BaseException:
                    self._pieces_deleting.clear()
                    self._checkpoint_wanted = False
                    for callback in self._end_callbacks:
                        callback(False)
                    raise
                self._tidy_pieces()
                for callback in self._end_callbacks:
                    callback(True)

    def pieces_deleted(self, count_template: str, deleted: list[tuple[Any, ...]]) -> None:
        """Note the rows a DELETE of pieces (P4.4: message_fragments,
        transmission_queue_pieces) returned, ``count_template`` saying whether their table
        still holds any. Once TIDY_PIECES of them are deleted and committed and the table
        is empty, the file is checkpointed (_tidy_pieces)."""
        count = int(deleted[0][0]) if deleted and deleted[0] else 0
        if count:
            self._pieces_deleting[count_template] = (
                self._pieces_deleting.get(count_template, 0) + count)

    def checkpoint_after_commit(self) -> None:
        """Checkpoint the file once the open transaction commits (not if it rolls back):
        it stores a large body's pieces (P4.4: a large message's fragments as they arrive,
        arrivals.py; a SEND's, transmission_pieces.py), which would otherwise stay in
        DuckDB's memory, unable to give way, until its log reaches CHECKPOINT_THRESHOLD
        (at the receiver, up to 60 MB of them while RECEIVE read the body back beside its
        copy, `pybroker bench wire --body-mb 100`)."""
        self._checkpoint_wanted = True

    def _tidy_pieces(self) -> None:
        """After a COMMIT: a table of pieces that has had TIDY_PIECES deleted since it was
        last empty at a checkpoint, and is empty now, is checkpointed, so that DuckDB drops
        the row group of its deleted rows. Kept (it cannot drop them while one row of
        the group is left, nor rewrite a group of a table with an index), they are read
        back, BLOBs and all, at each later COMMIT that adds pieces to the same vector
        (DuckDB 1.5.6 writes its log from the vector's start): a second 100 MB body in
        the same process cost the receiver 3.8x its size instead of 2.5x, and bare
        DuckDB 311 MB instead of 184 MB to store. A checkpoint that cannot run now (a
        transaction open on the second connection) waits for the next commit that deletes
        pieces of that table: only such commits pay the look. Then the checkpoint
        checkpoint_after_commit asked for, if none ran here."""
        deleting, self._pieces_deleting = self._pieces_deleting, {}
        wanted, self._checkpoint_wanted = self._checkpoint_wanted, False
        for template, count in deleting.items():
            count += self._pieces_deleted.get(template, 0)
            self._pieces_deleted[template] = count
            if count < TIDY_PIECES:
                continue
            try:
                if self._con.execute(sql_templates.render(template)).fetchone()[0]:
                    continue
                self._con.execute("CHECKPOINT")
            except duckdb.Error:
                continue
            self._pieces_deleted[template] = 0
            wanted = False
        if wanted:  # under a limit just above what DuckDB cannot let go of: what the
            # checkpoint writes gives way as it goes, rather than staying beside the rows
            # it came from (with a 100 MB body SEND stored, the sender's peak was 2.2x the
            # body instead of 1.3x in about one body of four)
            with self.streaming(MIN_MEMORY_LIMIT), contextlib.suppress(duckdb.Error):
                self._con.execute("CHECKPOINT")  # if not now, the next automatic one

    @property
    def in_transaction(self) -> bool:
        """Whether the calling thread has a transaction open (its changes are not yet
        committed). Another thread's open transaction does not count: that thread holds the
        connection, and what this thread writes waits for its end and commits on its own."""
        return self._depth > 0 and self._owner == threading.get_ident()

    @contextlib.contextmanager
    def committed_reads(self) -> Iterator[bool]:
        """Hold the connection (no other thread runs a statement meanwhile) and say whether
        no transaction is open: if so, what is read inside sees committed rows only."""
        with self._lock:
            yield self._depth == 0

    def on_transaction_end(self, callback: Callable[[bool], None]) -> None:
        """Call ``callback(committed)`` after every outermost COMMIT (True) or ROLLBACK."""
        self._end_callbacks.append(callback)

    @property
    def closed(self) -> bool:
        return self._closed

    def closing(self, deadline: float) -> None:
        """close() is coming and waits for other threads until ``deadline``
        (time.monotonic()): a thread waiting for the connection gives up then."""
        self._lock.deadline = deadline

    def close(self) -> None:
        """Close the file once the transaction another thread has open ends, or, if
        closing() gave a deadline, at that deadline at the latest: a transaction still open
        then is cut off (its running statement interrupted, the connection closed), so
        DuckDB discards it and nothing of it is written. Every statement after this raises
        InstanceClosedError."""
        lock = self._lock
        deadline = lock.deadline
        held = lock.acquire(True, -1 if deadline is None else max(
            0.0, deadline - time.monotonic()))
        try:
            with self._state:
                if self._closed:
                    return
                self._closed = True
                running = self._running
            stop = time.monotonic() + INTERRUPT_WAIT
            while running and time.monotonic() < stop:
                self._con.interrupt()  # DuckDB's way to stop a statement from another thread
                if self._apart is not None:  # pieces being committed apart (commit_apart)
                    self._apart.interrupt()
                if self._live is not None:  # kernel/live_views.py's rows (replace_apart)
                    self._live.interrupt()
                if self._reader is not None:  # a receiving transaction's read (read_apart)
                    self._reader.interrupt()
                time.sleep(0.01)
                with self._state:
                    running = self._running
            with self._state:
                if self._running:  # never close a connection under a running statement
                    self._close_pending = True
                    return
            self._con.close()
        finally:
            if held:
                lock.release()

    @property
    def connection(self) -> duckdb.DuckDBPyConnection:
        """The raw connection, for read-only analysis (writes bypass the routing cache)."""
        return self._con

    # -- schema --------------------------------------------------------------------------

    def schema_version(self) -> int:
        row = self.fetchone("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
        return int(row[0]) if row else 0

    # -- the lock ------------------------------------------------------------------------

    @property
    def lock(self) -> StoreLock:
        """The store's re-entrant lock: held by one thread at a time, for a whole
        transaction."""
        return self._lock


def _all_rows(cursor: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    return cursor.fetchall()


def _one_row(cursor: duckdb.DuckDBPyConnection) -> tuple[Any, ...] | None:
    return cursor.fetchone()


def _rows_if_any(cursor: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    """The rows of a statement that returns some (a query), none of one that does not."""
    return cursor.fetchall() if cursor.description else []


def _columns_and_rows(cursor: duckdb.DuckDBPyConnection
                      ) -> tuple[list[str], list[tuple[Any, ...]]]:
    return [d[0] for d in cursor.description], cursor.fetchall()
