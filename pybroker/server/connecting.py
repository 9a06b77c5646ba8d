"""``pybroker.connect``: an instance file opened here (embedded), or reached through the
process that serves it (a client), with the same API either way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pybroker.api.instance import Instance
from pybroker.api.served.client import URL_SCHEME, connect_served, connect_url
from pybroker.errors import InvalidArgumentError
from pybroker.kernel.messaging.endpoint_cache import DEFAULT_ENDPOINT_CACHE


def connect(
    path: str | Path | None = None,
    *,
    clock: Callable[[], float] | None = None,
    retry_scale: float = 1.0,
    worker: bool = True,
    endpoint_cache: int = DEFAULT_ENDPOINT_CACHE,
    read_only: bool = False,
    memory_limit: str | None = None,
    threads: int | None = None,
    token: str | None = None,
    serve: bool = False,
    otel: bool = False,
) -> Instance:
    """Open (or create) the instance file at ``path``; ``None`` keeps the instance in memory.

    When another process serves the file (``pybroker serve FILE``, or an application that
    connected with ``serve=True``), this connects through it instead: the Instance returned
    has the same methods, errors and transactions, run in that process (its ``repr`` says
    so). ``"pybroker://HOST:PORT"`` connects to a server's TCP port, with ``token`` (the
    one the server printed and keeps in FILE.token).

    ``serve=True`` opens the file here and serves other processes' clients on the Unix
    socket FILE.sock beside it until the instance closes (pybroker.server.server.
    serve_clients takes more options: TCP, time-out, a log).

    ``read_only=True`` opens an existing instance file for reading only: nothing is written
    (not even the catalog views), so it works on a read-only file and beside other read-only
    readers (the DuckDB CLI with ``-readonly``); every write raises StorageError. A DuckDB
    file that is not an instance is refused either way (pybroker never adds its tables to
    someone else's database), and so is a damaged file. Through a server, a read-only
    client is refused every write the same way.

    ``clock`` returns the current time as epoch seconds (tests pass a fake one).
    ``retry_scale`` multiplies every retry time-out of the transmission queue (C5: 4, 8, 16,
    32, then every 64 s; 0.001 makes that milliseconds). ``worker=False`` starts no
    background worker: the delay/retry loop then runs only when ``Instance.run_pending()``
    is called (tests drive it step by step with their clock). ``endpoint_cache`` is how
    many conversation endpoints stay in memory (the most recently used; P7): idle ones are
    read again from the file when used. ``memory_limit`` bounds DuckDB's memory, a size
    such as '256MiB' or '1GB' (default: pybroker.storage.store.DEFAULT_MEMORY_LIMIT for a file
    opened for writing, DuckDB's own otherwise); it grows by itself to hold a large body
    (three times the body). ``threads`` is how many worker threads DuckDB runs the file's
    statements on: default 1 for an instance opened for writing, whose statements are small
    (a second thread costs CPU and gains them nothing), DuckDB's own (one per core) for a
    read-only one; give more to a file that serves analysts' large queries. These six
    belong to the process that holds the file: a client has the server's (``clock`` or
    ``retry_scale`` given to a client is refused). Queues WITH ACTIVATION start their
    callables only once ``Instance.start_activation()`` is called (``pybroker serve`` calls
    it).

    ``otel=True`` makes OpenTelemetry spans of the instance's messages with the global
    tracer provider (``Instance.enable_tracing``, which takes a provider of your own;
    pybroker/docs/otel.md): it needs the ``pybroker[otel]`` extra, and an instance opened
    here (a client's spans are the server's, ``pybroker serve --otel``).
    """
    if not isinstance(otel, bool):
        raise InvalidArgumentError(f"otel must be True or False, not {otel!r}")
    if not isinstance(serve, bool):
        raise InvalidArgumentError(f"serve must be True or False, not {serve!r}")
    if isinstance(path, str) and path.startswith(URL_SCHEME):
        _client_tracing(path, otel)
        if serve:
            raise InvalidArgumentError("serve=True needs an instance file, not a server address")
        _client_options(path, clock, retry_scale)
        return connect_url(path, token=token, read_only=read_only)
    if token is not None:
        raise InvalidArgumentError(
            "token is for a server's TCP address (pybroker://HOST:PORT); a file served on "
            "this machine is reached through its socket without one")
    if isinstance(path, (str, Path)) and str(path) and not serve:
        client = connect_served(path, read_only=read_only)
        if client is not None:
            try:
                _client_options(str(path), clock, retry_scale)
                _client_tracing(str(path), otel)
            except BaseException:
                client.close()
                raise
            return client
    instance = Instance(path, clock=clock, retry_scale=retry_scale, worker=worker,
                        endpoint_cache=endpoint_cache, read_only=read_only,
                        memory_limit=memory_limit, threads=threads)
    if otel:
        try:
            instance.enable_tracing()
        except BaseException:
            instance.close()
            raise
    if serve:
        from pybroker.server.server import serve_clients

        try:
            serve_clients(instance)
        except BaseException:
            instance.close()
            raise
    return instance


def _client_options(where: str, clock: object, retry_scale: object) -> None:
    if clock is not None or retry_scale != 1.0:
        raise InvalidArgumentError(
            f"{where} is served by another process: its clock and retry_scale are the "
            "server's; connect without them (or stop the server to open the file here)")


def _client_tracing(where: str, otel: bool) -> None:
    if otel:
        raise InvalidArgumentError(
            f"{where} is served by another process: its spans are the server's (pybroker "
            "serve --otel, or connect(FILE, serve=True, otel=True) in the serving process)")
