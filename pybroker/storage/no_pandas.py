"""pybroker's calls into DuckDB that bind Python values, without a search for pandas.

DuckDB's Python client asks for ``import pandas`` twice for every Python value it binds
(duckdb 1.5.6: it checks whether the value is pandas' NA or NaT), and it keeps no memory
of a failed import: without pandas imported, each ask is a full import that fails, and
Python caches no failure, so each walks every entry of sys.path again (0.1 ms or more). A
SEND binds dozens of values. None of DuckDB's settings turns the ask off.

:func:`call` is the way pybroker makes such a call: ``call(con.execute, sql, params)``.
Its globals hold a ``__builtins__`` of their own, whose ``__import__`` answers an import
of pandas at once with "No module named 'pandas'" unless pandas is already in
``sys.modules``, and hands every other import to ``builtins.__import__``. DuckDB imports
through ``PyImport_Import``, which takes the import hook from the ``__builtins__`` of the
calling frame's globals (Python's C API documents it so): only imports that DuckDB's C
code makes directly under ``call``'s frame take the short cut. A Python function called
from there runs in a frame of its own, with its own module's builtins.

Nothing of the process changes, at ``import pybroker`` or at any later time: no finder on
``sys.meta_path``, ``builtins`` as it is, no entry in ``sys.modules``, no module's
``__builtins__`` replaced. The short cut is taken only where pybroker's code asks for
it, call by call, by going through ``call``. An application that imports
pandas, before pybroker or after, gets pandas; once it has, DuckDB's asks under ``call``
get that same module (the short cut hands them on), so a pandas value the application
binds through pybroker converts as it would through DuckDB alone. Before pandas is
imported no pandas value can exist, so "not there" is the true answer to DuckDB's check
even when pandas is installed: pybroker's own statements never make the process import
pandas, which would cost the application the import's time and memory without its
asking.

An application's own calls into DuckDB are left as DuckDB makes them: a finder on
``sys.meta_path`` or an entry in ``sys.modules`` would answer the application's imports
of pandas too, and a module whose ``__builtins__`` were replaced would give the short cut
to whatever its frames call. DuckDB has no setting for it.

Measured on a shared two-core machine (medians of interleaved rounds, noisy): a statement
binding three values took 0.5-0.9 ms through ``call`` and 1.8-2.1 ms through DuckDB alone.
"""

from __future__ import annotations

import builtins
import functools
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


def _import(name: str, globals: Any = None, locals: Any = None,
            fromlist: Sequence[str] | None = (), level: int = 0) -> Any:
    """``__import__`` for DuckDB's asks under :func:`call` (see the module's docstring)."""
    if (level == 0 and name.partition(".")[0] == "pandas"
            and "pandas" not in sys.modules):
        raise ModuleNotFoundError("No module named 'pandas'", name="pandas")
    return builtins.__import__(name, globals, locals, fromlist, level)  # as it is now


# every builtin is the interpreter's own object; only __import__ differs
_BUILTINS = {**builtins.__dict__, "__import__": _import}


def _under_short_cut(function: Callable[P, T]) -> Callable[P, T]:
    """``function`` remade with globals whose ``__builtins__`` is _BUILTINS: C code called
    from its frame imports through _import. ``function`` must name no global."""
    scoped = types.FunctionType(function.__code__,
                                {"__builtins__": _BUILTINS, "__name__": __name__},
                                function.__name__, function.__defaults__,
                                function.__closure__)
    return functools.update_wrapper(scoped, function)


@_under_short_cut
def call(_pybroker_function: Callable[P, T], /,
         *_pybroker_args: P.args, **_pybroker_kwargs: P.kwargs) -> T:
    """``function(*args, **kwargs)``, for a DuckDB function or method that binds Python
    values (``execute``, ``sql`` with params, ``ConstantExpression``): DuckDB's asks for
    pandas are answered at once unless pandas is imported."""
    # DuckDB looks up a table name it does not know among the names of the calling frame
    # (its replacement scans): names no query's table has keep its "does not exist"
    return _pybroker_function(*_pybroker_args, **_pybroker_kwargs)
