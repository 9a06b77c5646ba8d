"""A queue's ACTIVATION settings, checked, and its procedure imported (C3, C8).

A procedure is a stored procedure of the queue's database, named as T-SQL names it
(``proc``, ``schema.proc`` or ``db.schema.proc``, a part [bracketed] where it is no plain
identifier): pybroker.kernel.activation looks it up when a reader starts (as SQL Server
resolves the name at activation time, so the queue may name one not created yet) and runs
it with pybroker.core.tsql.script. Or it is a Python callable named
``module.path:function`` (the form of a console-script entry point; ``function`` may be
dotted, ``Class.method``). Only the form is checked when the queue is
created or altered: the module is imported when a reader first starts, in the process that
runs activation, so a queue can name a handler that only that process can import (through
its PYTHONPATH). A procedure that cannot be imported then records a broker event.

The callable is called with the ``pybroker.Database`` of its queue::

    def handler(db: pybroker.Database) -> None:
        while True:
            with db.transaction():
                messages = db.receive("ExpenseQueue", timeout=1.0)
                if not messages:
                    return
                ...
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

from pybroker.core.tsql.object_ddl import MAX_QUEUE_READERS
from pybroker.errors import BrokerError, InvalidArgumentError

MAX_PROCEDURE_NAME = 776  # SQL Server's longest three-part name (3 x 256 + separators)
EXECUTE_AS = ("SELF", "OWNER")
MAX_USER_NAME = 128  # a sysname
# A part of a T-SQL procedure name: a plain identifier, or [bracketed] (]] for one ]).
_PART = r"(?:(?:[^\W\d]|[#@])[\w@$#]*|\[(?:[^\]]|\]\])+\])"
_TSQL_NAME = re.compile(rf"{_PART}(?:\.{_PART}){{0,2}}")


def is_python_callable(name: str) -> bool:
    """``module.path:function`` (the colon), not a stored procedure's name."""
    return ":" in name and not _TSQL_NAME.fullmatch(name)


class ProcedureImportError(BrokerError):
    """The activation procedure of a queue cannot be imported or is not callable."""


def check_procedure_name(name: object) -> str:
    """A stored procedure's name ([db.][schema.]proc), or ``module.path:function``, each
    part a Python identifier."""
    if not isinstance(name, str):
        raise InvalidArgumentError(
            f"the activation procedure is named 'module.path:function', not "
            f"{type(name).__name__}")
    if len(name) <= MAX_PROCEDURE_NAME and _TSQL_NAME.fullmatch(name):
        return name
    module, sep, function = name.partition(":")
    parts = [*module.split("."), *function.split(".")]
    if not sep or len(name) > MAX_PROCEDURE_NAME or not all(p.isidentifier() for p in parts):
        raise InvalidArgumentError(
            f"the activation procedure {name[:100]!r} is not of the form "
            "'module.path:function' (a Python callable that pybroker imports when the queue "
            "is first activated, e.g. 'myapp.handlers:process_expenses'; in T-SQL write it "
            "in brackets: PROCEDURE_NAME = [myapp.handlers:process_expenses]) nor a stored "
            "procedure's name ([db.][schema.]proc)")
    return name


def check_max_readers(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not (
            0 <= value <= MAX_QUEUE_READERS):
        raise InvalidArgumentError(
            f"MAX_QUEUE_READERS must be a whole number from 0 to {MAX_QUEUE_READERS}, not "
            f"{value!r}")
    return value


def check_execute_as(value: object) -> str:
    """SELF, OWNER or a user's name (EXECUTE AS 'user'): pybroker has no principals, so
    each runs the procedure in the activating process as it is; the name is kept, as
    sys.service_queues shows it."""
    if isinstance(value, str) and value.upper() in EXECUTE_AS:
        return value.upper()
    if isinstance(value, str) and 0 < len(value) <= MAX_USER_NAME and value.strip():
        return value
    raise InvalidArgumentError(
        f"EXECUTE AS must be SELF, OWNER or a user's name (1 to {MAX_USER_NAME} "
        f"characters), not {value!r}")


def import_procedure(name: str) -> Callable[[Any], Any]:
    """The callable ``module.path:function`` names, imported now."""
    module_name, _, function = name.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # an ImportError, or whatever the module raised on import
        raise ProcedureImportError(
            f"the activation procedure {name} cannot be imported: "
            f"{type(exc).__name__}: {exc}; make module {module_name} importable by the "
            "process that runs activation (its PYTHONPATH)") from exc
    for attribute in function.split("."):
        try:
            target = getattr(target, attribute)
        except AttributeError:
            raise ProcedureImportError(
                f"the activation procedure {name} cannot be imported: module {module_name} "
                f"has no {function}") from None
    if not callable(target):
        raise ProcedureImportError(
            f"the activation procedure {name} is a {type(target).__name__}, not a callable")
    return target
