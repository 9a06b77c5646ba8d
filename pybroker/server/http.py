"""The HTTP adapter of a served instance (``pybroker serve FILE --http-port N``):
``/metrics`` in the Prometheus text format, ``/healthz`` (the instance file takes and
commits a transaction) and ``/readyz`` (the broker endpoint listens). It listens on
127.0.0.1 unless told otherwise; every answer is read from the kernel when it is asked."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pybroker import arguments
from pybroker.api.instance import Instance
from pybroker.errors import BrokerError, InvalidArgumentError
from pybroker.kernel.kernel import Kernel
from pybroker.server.metrics import (
    CONTENT_TYPE,
    LOCK_WAIT,
    ClientTotals,
    MetricsBusyError,
    read_families,
    render,
)


class HttpServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` of one instance, on a thread of its own."""

    def __init__(self, kernel: Kernel, host: str = "127.0.0.1", port: int = 0, *,
                 clients: Callable[[], ClientTotals] | None = None) -> None:
        self.kernel = kernel
        self.clients = clients
        handler = _handler_for(self)
        try:
            self._server = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise BrokerError(f"cannot listen for HTTP on {host}:{port}: "
                              f"{exc.strerror or exc}") from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="pybroker-http", daemon=True)

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> HttpServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    # -- the answers ---------------------------------------------------------------------

    def answer(self, path: str) -> tuple[int, str, str]:
        """(status, content type, body) for a GET of ``path``."""
        route = path.split("?", 1)[0]
        text = "text/plain; charset=utf-8"
        if route == "/metrics":
            try:
                return 200, CONTENT_TYPE, render(read_families(self.kernel, self.clients))
            except MetricsBusyError as exc:
                return 503, text, f"{exc}\n"
        if route == "/healthz":
            return self._health()
        if route == "/readyz":
            endpoint = self.kernel.endpoint
            if endpoint is not None and not endpoint.is_closed:
                return 200, text, f"ready: the broker endpoint listens on {endpoint.address}\n"
            return 503, text, "not ready: the broker endpoint does not listen\n"
        return 404, text, "not found: this server answers /metrics, /healthz and /readyz\n"

    def _health(self) -> tuple[int, str, str]:
        text = "text/plain; charset=utf-8"
        kernel = self.kernel
        if kernel.closed:
            return 503, text, "unhealthy: the instance is closed\n"
        store = kernel.store
        if not store.lock.acquire(True, LOCK_WAIT):
            return 503, text, f"unhealthy: a transaction held the file for {LOCK_WAIT:g} s\n"
        try:
            with store.transaction():
                store.run("metrics/select_memory.sql")
        except BrokerError as exc:
            return 503, text, f"unhealthy: {exc}\n"
        finally:
            store.lock.release()
        return 200, text, "ok: the instance file takes and commits a transaction\n"


def serve_metrics(instance: Instance, port: int = 0, host: str = "127.0.0.1") -> HttpServer:
    """Serve ``/metrics``, ``/healthz`` and ``/readyz`` of an instance this process holds
    (``pybroker.connect(FILE)``, with ``serve=True`` or not) until it closes; what
    ``pybroker serve FILE --http-port N`` does. ``server.address`` says where."""
    if not isinstance(instance, Instance):
        raise InvalidArgumentError(
            "serve_metrics needs an instance this process holds, not a client of a server "
            "(the serving process serves its metrics: pybroker serve FILE --http-port N)")
    arguments.whole_number("port", port, minimum=0, maximum=65535)
    arguments.text("host", host, limit=255)
    server = HttpServer(instance.kernel, host, port).start()
    instance.on_close(server.stop)
    return server


def _handler_for(server: HttpServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the name http.server calls
            status, content_type, body = server.answer(self.path)
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass  # a scrape a second is no line for the operator's terminal

    return Handler
