"""The HTTP adapter of a served instance (``pybroker serve FILE --http-port N``):
``/metrics`` in the Prometheus text format, ``/healthz`` (the instance file takes and
commits a transaction), ``/readyz`` (the broker endpoint listens) and the read-only web
console under ``/console`` (console.py). It listens on 127.0.0.1 unless told otherwise;
every answer is read from the kernel when it is asked.

The console asks for the client token (FILE.token) once, on a sign-in page, and keeps it in
a cookie of the browser (HttpOnly, SameSite=Strict); ``token=None`` (``--http-no-auth``)
opens it to whoever reaches the port. ``/metrics``, ``/healthz`` and ``/readyz`` are open, as
a Prometheus target's are: they show counts and catalog names, never message bodies.
"""

from __future__ import annotations

import contextlib
import hmac
import threading
from collections.abc import Callable
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pybroker import arguments
from pybroker.api.instance import Instance
from pybroker.apps.diagnose import drawing
from pybroker.apps.diagnose.report import diagnose
from pybroker.apps.diagnose.topology import topology
from pybroker.errors import BrokerError, InvalidArgumentError
from pybroker.kernel.kernel import Kernel
from pybroker.server import console
from pybroker.server.metrics import (
    CONTENT_TYPE,
    LOCK_WAIT,
    ClientTotals,
    MetricsBusyError,
    read_families,
    render,
)

COOKIE = "pybroker_console"
HTML = "text/html; charset=utf-8"


class HttpServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` of one instance, on a thread of its own."""

    def __init__(self, kernel: Kernel, host: str = "127.0.0.1", port: int = 0, *,
                 clients: Callable[[], ClientTotals] | None = None,
                 token: str | None = None, name: str = "instance",
                 instance: Instance | None = None) -> None:
        self.kernel = kernel
        self.clients = clients
        self.token = token  # the console's sign-in; None: open
        self.name = name  # the instance as the console's pages title it
        # the instance the kernel serves: its findings on the console (pybroker diagnose)
        self.instance = instance
        self.console = console.Console(kernel, self._read,
                                       None if instance is None else self._findings)
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

    def _read(self, template: str, params: dict[str, Any] | None
              ) -> tuple[list[str], list[tuple[Any, ...]]]:
        store = self.kernel.store
        if not store.lock.acquire(True, LOCK_WAIT):
            raise MetricsBusyError(
                f"a transaction held the instance for {LOCK_WAIT:g} s; the page asks again")
        try:
            return store.query(template, params)
        finally:
            store.lock.release()

    def _findings(self) -> tuple[list[dict[str, Any]], str]:
        """pybroker diagnose over the served instance alone, and its picture."""
        assert self.instance is not None
        found = [f.as_dict() for f in diagnose([self.instance])]
        return found, drawing.dot(topology([self.instance]))

    def signed_in(self, cookie_header: str | None) -> bool:
        if self.token is None:
            return True
        cookie = SimpleCookie()
        with contextlib.suppress(Exception):
            cookie.load(cookie_header or "")
        given = cookie.get(COOKIE)
        return given is not None and hmac.compare_digest(given.value, self.token)

    def sign_in(self, form: str) -> tuple[int, dict[str, str], str]:
        """The answer to the sign-in page's POST: a redirect with the cookie, or the page
        again saying why."""
        fields = console.parse_query(form)
        next_path = fields.get("next", "/console")
        if not next_path.startswith("/console"):
            next_path = "/console"
        if self.token is not None and hmac.compare_digest(fields.get("token", ""),
                                                           self.token):
            return 303, {"Location": next_path, "Set-Cookie":
                         f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/console"}, ""
        return 401, {"Content-Type": HTML}, console.login_page(
            "the token was not right: give the one in FILE.token", next_path)

    def answer_console(self, path: str, cookie_header: str | None
                       ) -> tuple[int, str, str]:
        route, _, raw = path.partition("?")
        query = console.parse_query(raw)
        if not self.signed_in(cookie_header):
            return 401, HTML, console.login_page("sign in with the client token", path)
        try:
            page = self.console.page(route.rstrip("/") or "/console", query)
        except MetricsBusyError as exc:
            return 503, "text/plain; charset=utf-8", f"{exc}\n"
        if page is None:
            return 404, HTML, '<p>no such page: <a href="/console">the console</a></p>'
        console.arrange(page, query)
        if query.get("format") == "json":
            return 200, "application/json", console.to_json(page)
        return 200, HTML, console.to_html(page, query, self.name)

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
        return 404, text, ("not found: this server answers /metrics, /healthz, /readyz and "
                           "/console\n")

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


def serve_metrics(instance: Instance, port: int = 0, host: str = "127.0.0.1", *,
                  token: str | None = None) -> HttpServer:
    """Serve ``/metrics``, ``/healthz``, ``/readyz`` and the console of an instance this
    process holds (``pybroker.connect(FILE)``, with ``serve=True`` or not) until it closes;
    what ``pybroker serve FILE --http-port N`` does. ``token``: the console's sign-in (None:
    the console is open, which only a loopback ``host`` allows). ``server.address`` says
    where."""
    if not isinstance(instance, Instance):
        raise InvalidArgumentError(
            "serve_metrics needs an instance this process holds, not a client of a server "
            "(the serving process serves its metrics: pybroker serve FILE --http-port N)")
    arguments.whole_number("port", port, minimum=0, maximum=65535)
    arguments.text("host", host, limit=255)
    if token is None:
        check_open_console(host)
    else:
        arguments.text("token", token, limit=256)
    name = "in-memory instance" if instance.path is None else instance.path.name
    server = HttpServer(instance.kernel, host, port, token=token, name=name,
                        instance=instance).start()
    instance.on_close(server.stop)
    return server


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def check_open_console(host: str) -> None:
    """A console without sign-in listens on this machine's loopback address only."""
    if host.strip().lower() not in LOOPBACK and not host.strip().startswith("127."):
        raise InvalidArgumentError(
            f"a console without sign-in listens on 127.0.0.1 only, not {host}: give a "
            "token (serve: leave out --http-no-auth), or listen on 127.0.0.1")


def _handler_for(server: HttpServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the name http.server calls
            if self.path.startswith("/console"):
                status, content_type, body = server.answer_console(
                    self.path, self.headers.get("Cookie"))
            else:
                status, content_type, body = server.answer(self.path)
            self._reply(status, {"Content-Type": content_type}, body)

        def do_POST(self) -> None:  # the name http.server calls
            if self.path.split("?", 1)[0] != "/console/login":
                self._reply(405, {"Content-Type": "text/plain; charset=utf-8"},
                            "only the console's sign-in takes a POST\n")
                return
            length = min(int(self.headers.get("Content-Length") or 0), 64 * 1024)
            form = self.rfile.read(length).decode("utf-8", "replace")
            self._reply(*server.sign_in(form))

        def _reply(self, status: int, headers: dict[str, str], body: str) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass  # a scrape a second is no line for the operator's terminal

    return Handler
