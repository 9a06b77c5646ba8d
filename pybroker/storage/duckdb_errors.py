"""DuckDB's errors in pybroker's words (storage/store.py's Store raises them): a file that will
not open, a file whose bytes are damaged, a statement the file refused. DuckDB's own text
stays in the chained exception, for a traceback, never in the message."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable

import duckdb

from pybroker.errors import BrokerError, InvalidArgumentError, StorageError


def explain_open_error(target: str, exc: duckdb.Error) -> str:
    """Why DuckDB would not open the instance file ``target``, in pybroker's words."""
    text = str(exc)
    damage = damage_reason(exc)
    if damage is not None:
        return damaged_message(target, damage)
    if "could not set lock on file" in text.lower():
        holder = _LOCK_HOLDER.search(text)
        which = f"another process (PID {holder.group(1)})" if holder else "another process"
        return (
            f"cannot open instance file {target}: it is already open in {which} (DuckDB "
            f"allows one writer, or several readers, per file); close that process first"
        )
    if "not a valid duckdb database file" in text.lower():
        return f"cannot open instance file {target}: it is not a DuckDB database file"
    if isinstance(exc, duckdb.IOException):
        if any(words in text.lower() for words in (
                "permission denied", "read-only file system", "operation not permitted")):
            return (f"cannot open instance file {target} for writing: permission denied "
                    "(list it with the read-only commands, or fix its permissions)")
        return f"cannot open instance file {target}: the file cannot be read or written"
    return f"cannot open instance file {target}: DuckDB refused it ({type(exc).__name__})"


# DuckDB names the process holding the file's lock: "Conflicting lock is held in
# /usr/bin/python3 (PID 1234)".
_LOCK_HOLDER = re.compile(r"\(PID (\d+)\)")
_CHECKSUM = re.compile(r"does not match stored checksum \d+ in block at location (\d+)")
_SHORT_READ = re.compile(r"could not read enough bytes from file .*location (\d+)", re.I | re.S)


def damage_reason(exc: BaseException) -> str | None:
    """Our words for a DuckDB error that means the file's bytes are not what DuckDB wrote,
    or None for any other error."""
    text = str(exc)
    match = _CHECKSUM.search(text)
    if match:
        return f"the block at byte {int(match.group(1)):,} fails its checksum"
    if "corrupt database file" in text.lower():
        return "DuckDB found a corrupt block"
    match = _SHORT_READ.search(text)
    if match:
        return f"it ends early (a block at byte {int(match.group(1)):,} is missing)"
    if isinstance(exc, (duckdb.SerializationException, duckdb.InternalException)):
        return "its contents cannot be read back"
    return None


def damaged_message(target: str, reason: str) -> str:
    return f"instance file {target} is damaged: {reason}; restore it from a backup"


def translate_error(exc: duckdb.Error, target: str, *, read_only: bool) -> BrokerError:
    """A DuckDB error as a BrokerError in pybroker's words (DuckDB's text stays in the
    chained exception, for a traceback, never in the message)."""
    damage = damage_reason(exc)
    if damage is not None:
        return StorageError(damaged_message(target, damage))
    text = str(exc)
    if read_only and "read-only mode" in text:
        return StorageError(
            f"instance file {target} is open read-only: reopen it without read_only=True "
            "to change it")
    if isinstance(exc, (duckdb.ConversionException, duckdb.OutOfRangeException)):
        return InvalidArgumentError(
            "the change was not made: a value is outside what the instance file can store "
            "(a whole number too large for its column, or a time out of range)")
    if isinstance(exc, duckdb.ConstraintException):
        return StorageError(
            "the change was not made: it conflicts with what the instance file holds (a "
            "duplicate, a missing value or a missing object)")
    if isinstance(exc, duckdb.OutOfMemoryException):
        return StorageError(
            f"the change was not made: it needs more memory than instance file {target} "
            "may use (its memory_limit); open it with a larger memory_limit (at least "
            "three times the largest message body, beyond what it holds otherwise)")
    if isinstance(exc, duckdb.FatalException):
        return StorageError(
            f"instance file {target} can no longer be used after an earlier failure; "
            "close the instance and open it again")
    if isinstance(exc, duckdb.IOException):
        return StorageError(f"instance file {target} cannot be read or written: "
                            "the disk or the file system refused")
    return StorageError(f"the change was not made: the instance file {target} refused "
                        f"the operation (DuckDB {type(exc).__name__})")


# DuckDB 1.5.6 on a misspelt view of the sys schema: 'Table with name rotues does not
# exist!' and its own suggestion, a name without its schema ('Did you mean "routes"?', the
# table under the view) or another schema's ("pg_catalog.pg_type").
_NO_TABLE = re.compile(r'Table with name (\S+) does not exist!(\s*Did you mean "[^"]*"\?)?')


def query_failed(exc: duckdb.Error, query: str, sys_views: Callable[[], Iterable[str]]) -> str:
    """What a query that DuckDB refused gets: DuckDB's own explanation (the query is
    DuckDB's SQL), except that a misspelt ``sys.`` view is answered with the sys view
    nearest its name (``sys_views()``: the names of the schema's views)."""
    text = str(exc)
    missing = _NO_TABLE.search(text) if isinstance(exc, duckdb.CatalogException) else None
    if missing is not None:
        name = missing.group(1)
        qualified = re.compile(rf'\bsys\s*\.\s*"?{re.escape(name)}"?(?![\w"])', re.IGNORECASE)
        if qualified.search(query):
            views = sorted(sys_views())
            near = difflib.get_close_matches(name.lower(), [v.lower() for v in views], n=1)
            hint = (f'Did you mean "sys.{views[[v.lower() for v in views].index(near[0])]}"?'
                    if near else "SELECT view_name FROM duckdb_views() WHERE schema_name "
                    "= 'sys' lists the views there")
            text = (f"{text[:missing.start()]}View with name sys.{name} does not exist! "
                    f"{hint}{text[missing.end():]}")
    return f"the query failed: {text}"
