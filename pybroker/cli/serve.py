"""The broker endpoint's commands: ``serve``, ``cert``, ``trust``, ``untrust``."""

from __future__ import annotations

import argparse
import datetime as dt
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from pybroker import arguments
from pybroker.api.served.paths import token_path_for
from pybroker.cli import serve_otel
from pybroker.cli.serve_log import FORMATS, ServeLog
from pybroker.cli.support import INSTANCE_FILE_HELP, UsageError, require_instance_file
from pybroker.errors import BrokerError
from pybroker.server.http import HttpServer, check_open_console
from pybroker.server.metrics import ClientTotals
from pybroker.server.pg import PgServer, password_from
from pybroker.server.pg import add_serve_arguments as add_pg_arguments
from pybroker.server.server import read_or_make_token


def add_commands(sub: Any, command: Any, usage_error: type[Exception]) -> None:
    p = command("serve", "run the instance with its broker endpoint, worker and activation "
                "(queues WITH ACTIVATION start their Python callables, importable through "
                "PYTHONPATH) until SIGINT or SIGTERM, and serve other processes' clients on "
                "FILE.sock (and TCP when asked); prints the addresses it listens on",
                cmd_serve)
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("--create", action="store_true",
                   help="create the instance file if there is none (without this, a missing "
                   "file is refused, so that a typo never serves a new, empty instance)")
    p.add_argument("--port", type=int, default=None, help="TCP port (0: a free one); "
                   "overrides, for this run, the LISTENER_PORT of the endpoint the file "
                   "defines (CREATE ENDPOINT on master) and starts it even if it is STOPPED "
                   "or DISABLED; default: the file's endpoint as defined (not started unless "
                   "STATE = STARTED), or 4022 if the file defines none")
    p.add_argument("--host", default=None, help="address of this machine to listen on "
                   "(0.0.0.0 for all of its addresses); overrides the file's LISTENER_IP "
                   "for this run as --port does; default: the file's, or 127.0.0.1")
    p.add_argument("--trust", action="append", default=[], metavar="NAME=PEM_FILE",
                   help="admit a peer by its certificate (repeatable; kept in the file)")
    p.add_argument("--retry-scale", type=float, default=1.0,
                   help="multiply the waits before an unacknowledged message is sent "
                   "again (4, 8, 16, 32, then every 64 seconds) by this (default 1)")
    p.add_argument("--idle-timeout", type=float, default=None,
                   help="seconds before an idle connection closes (default 90)")
    p.add_argument("--probe-timeout", type=float, default=None,
                   help="seconds a mirrored route waits for a partner's answer to its probe "
                   "before counting the partner unreachable (default 10)")
    p.add_argument("--memory-limit", default=None, metavar="SIZE",
                   help="the most memory DuckDB may use for the file, such as 512MiB or 2GB "
                   "(default 256MiB; it grows by itself to hold the largest message body)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="DuckDB's worker threads for the file (default 1: an instance's "
                   "statements are small; give more for analysts' large queries)")
    from pybroker.cli.client_server import add_serve_options

    add_serve_options(p)  # and clients of other processes, on FILE.sock (and TCP)
    add_pg_arguments(p)
    p.add_argument("--http-port", type=int, default=None, metavar="N",
                   help="serve /metrics (Prometheus), /healthz and /readyz over HTTP on this "
                   "port (0: a free one); default: no HTTP")
    p.add_argument("--http-host", default="127.0.0.1",
                   help="address to serve HTTP on (default 127.0.0.1)")
    p.add_argument("--http-no-auth", action="store_true",
                   help="open the console under /console without the client token's "
                   "sign-in (only with --http-host 127.0.0.1)")
    p.add_argument("--otel", action="store_true",
                   help="OpenTelemetry spans of the messages (send, receive, process, "
                   "forward; also PYBROKER_OTEL=1), exported as OTEL_TRACES_EXPORTER says "
                   "(otlp, console, none); needs pybroker[otel]")
    p.add_argument("--log-format", choices=FORMATS, default="text",
                   help="stderr's lines as text (default) or as one JSON object a line "
                   '({"time", "source", "message"}) for log shippers')
    p.set_defaults(usage_error=usage_error)

    p = command("cert", "print this instance's endpoint certificate (PEM), making it on "
                "first need", cmd_cert)
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("--renew", action="store_true",
                   help="renew it first (the same subject and key, valid from now; not while "
                   "the endpoint runs) and print the new one, for each peer to trust")
    p.add_argument("--days", type=int, default=None, metavar="N",
                   help="with --renew: valid for N days (default 3650)")

    p = command("trust", "admit a peer instance by its endpoint certificate", cmd_trust)
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("name", help="the name the peer is known by here")
    p.add_argument("pem_file", type=Path, help="the peer's certificate, as `pybroker cert` "
                   "prints it ('-': stdin)")

    p = command("untrust", "stop admitting a peer instance", cmd_untrust)
    p.add_argument("file", type=Path, help=INSTANCE_FILE_HELP)
    p.add_argument("name", help="the name the peer was trusted under")


def _read_pem(path: Path) -> str:
    """A certificate file's text (stdin for '-'); PEM is ASCII, so any other byte is
    refused here, naming where it is."""
    try:
        if str(path) == "-":
            stream = getattr(sys.stdin, "buffer", None)
            data = sys.stdin.read().encode("utf-8", "surrogateescape") if stream is None \
                else stream.read()
        else:
            data = path.read_bytes()
    except OSError as exc:
        raise BrokerError(f"cannot read certificate file {path}: "
                          f"{exc.strerror or type(exc).__name__}") from None
    try:
        return data.decode("ascii")
    except UnicodeDecodeError as exc:
        where = "stdin" if str(path) == "-" else f"certificate file {path}"
        raise BrokerError(
            f"{where} is not a PEM certificate: byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start} is not ASCII (a PEM certificate is ASCII text, as `pybroker cert` "
            "prints it)") from None


def _check_serve_arguments(args: argparse.Namespace) -> list[tuple[str, str]]:
    """Every option of ``serve`` checked, before the file is opened (or made) and anything
    listens: a bad one is refused with nothing started or written. Returns the peers of
    --trust, their certificates read and checked."""
    from pybroker.arguments import check_memory_limit
    from pybroker.core.wire import certificates
    from pybroker.kernel.broker_endpoint.runtime import settings_for
    from pybroker.storage.store import check_threads

    def port(option: str, value: int | None) -> None:
        if value is not None:
            arguments.whole_number(option, value, minimum=0, maximum=65535)

    port("--port", args.port)
    port("--client-port", args.client_port)
    port("--pg-port", args.pg_port)
    port("--http-port", args.http_port)
    if args.http_no_auth:
        check_open_console(args.http_host)
    for option, host in (("--host", args.host), ("--client-host", args.client_host),
                         ("--pg-host", args.pg_host), ("--http-host", args.http_host)):
        if host is not None:
            arguments.text(option, host.strip(), limit=255)
    arguments.real_number("--retry-scale", args.retry_scale, minimum=1e-9, maximum=1e9)
    for option, value in (("--idle-timeout", args.idle_timeout),
                          ("--probe-timeout", args.probe_timeout)):
        if value is not None:
            arguments.real_number(option, value, minimum=1e-3, maximum=arguments.MAX_SECONDS)
    settings_for(0 if args.port is None else args.port, args.host or "127.0.0.1",
                 args.retry_scale, idle_timeout=args.idle_timeout,
                 probe_timeout=args.probe_timeout)
    arguments.real_number("--client-timeout", args.client_timeout, minimum=1e-3,
                          maximum=86_400)
    arguments.whole_number("--max-clients", args.max_clients, minimum=1,
                           maximum=arguments.INT32_MAX)
    arguments.real_number("--summary-interval", args.summary_interval, minimum=1e-3,
                          maximum=86_400)
    if args.memory_limit is not None:
        check_memory_limit(args.memory_limit)
    if args.threads is not None:
        check_threads(args.threads)
    peers = []
    for item in args.trust:
        name, sep, pem_file = item.partition("=")
        if not sep or not name or not pem_file:
            raise args.usage_error(f"--trust takes NAME=PEM_FILE, not {item!r}")
        pem = _read_pem(Path(pem_file))
        try:
            certificates.certificate_info(pem)
        except BrokerError as exc:
            raise BrokerError(f"--trust {name}={pem_file}: {exc}") from None
        peers.append((name, pem))
    return peers


def cmd_serve(args: argparse.Namespace) -> int:
    from pybroker.api.instance import Instance

    if not args.create:
        require_instance_file(args.file)
    peers = _check_serve_arguments(args)
    pg_password = password_from(args)
    provider = None
    if serve_otel.wanted(args.otel):
        provider = serve_otel.tracer_provider()
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with Instance(args.file, retry_scale=args.retry_scale,
                 memory_limit=args.memory_limit, threads=args.threads) as inst:
        if provider is not None:
            inst.enable_tracing(provider)
            print("tracing: OpenTelemetry spans of every message", flush=True)
        for name, pem in peers:
            inst.trust(name, pem)
        log = ServeLog(args.log_format)
        inst.watch_broker_events(lambda *event: _log_event(*event, log=log))
        print(_start_endpoint(inst, args), flush=True)
        inst.start_activation()  # C3: closing gives running readers a bounded time
        from pybroker.cli.client_server import start as serve_clients

        clients = serve_clients(inst, args, log)  # stops when the instance closes
        pg = None
        if pg_password is not None:
            pg = PgServer(inst, args.pg_host, args.pg_port, pg_password,
                          log=log.writer("postgresql")).start()
            print(f"postgresql wire (read-only) on {pg.address}", flush=True)
        http = None
        if args.http_port is not None:
            token_path = token_path_for(args.file)
            token = None if args.http_no_auth else read_or_make_token(token_path)[0]
            http = HttpServer(inst.kernel, args.http_host, args.http_port, token=token,
                              name=args.file.name, instance=inst,
                              clients=lambda: ClientTotals(**clients.totals(),
                                                           open=clients.clients)).start()
            print(f"metrics on {http.address}/metrics", flush=True)
            print(f"console on {http.address}/console"
                  + ("" if token is None else f" (sign in with the token in "
                     f"{token_path})"), flush=True)
        try:
            while not stop.wait(0.5):
                pass
        finally:
            if http is not None:
                http.stop()
            if pg is not None:
                pg.stop()
    if provider is not None:  # the spans still batched are exported before the exit
        provider.shutdown()
    print("stopped", flush=True)
    return 0


# the broker events an operator watching `serve` sees, one stderr line each
_WATCHED_EVENTS = {
    ("Broker:Connection", "Accept"): "broker connection accepted",
    ("Broker:Connection", "Connected"): "broker connection logged in",
    ("Broker:Connection", "Connect Failed"): "broker connection failed",
    ("Broker:Connection", "Closed"): "broker connection closed",
    ("Audit Broker Login", "Authentication Failure"): "broker connection refused",
    ("Broker:Activation", "Aborted"): "activation failed",
}


def _log_event(event_class: str, subclass: str, peer: str | None, description: str, *,
               log: ServeLog) -> None:
    what = _WATCHED_EVENTS.get((event_class, subclass))
    if what is None:
        return
    if event_class == "Broker:Activation":
        log.line("activation", f"{what}: {description}")
    else:  # a connection's line names its peer
        log.line("broker", f"{what} ({peer or 'unknown peer'}): {description}")


def _start_endpoint(inst: Any, args: argparse.Namespace) -> str:
    """Start the broker endpoint the file defines if it is STARTED, or --port/--host say
    so (P2), and say where it listens; with no definition, as start_endpoint() does."""
    from pybroker.kernel.broker_endpoint.ddl import stored_endpoint

    defined = stored_endpoint(inst.kernel)
    if args.port is None and args.host is None and defined is not None and (
            defined.state != "STARTED"):
        return (f"not listening: the broker endpoint {defined.name} is {defined.state} "
                f"(ALTER ENDPOINT {defined.name} STATE = STARTED on master, or --port, "
                "starts it)")
    endpoint = inst.start_endpoint(args.port, args.host, idle_timeout=args.idle_timeout,
                                   probe_timeout=args.probe_timeout)
    return f"listening on {endpoint.address}"


def cmd_cert(args: argparse.Namespace) -> int:
    from pybroker.server.connecting import connect  # a served file: through its server

    if args.days is not None and not args.renew:
        raise UsageError("--days goes with --renew")
    if args.days is not None and args.days < 1:
        raise UsageError(f"--days is a whole number of at least 1, not {args.days}")
    with connect(require_instance_file(args.file), worker=False) as inst:
        if args.renew:
            not_after = None if args.days is None else (
                dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(days=args.days))
            sys.stdout.write(inst.renew_certificate(not_after))
        else:
            sys.stdout.write(inst.certificate)
    return 0


def cmd_trust(args: argparse.Namespace) -> int:
    from pybroker.server.connecting import connect  # a served file: through its server

    require_instance_file(args.file)
    pem = _read_pem(args.pem_file)
    with connect(args.file, worker=False) as inst:
        inst.trust(args.name, pem)
    print(f"trusted {args.name}")
    return 0


def cmd_untrust(args: argparse.Namespace) -> int:
    from pybroker.server.connecting import connect  # a served file: through its server

    with connect(require_instance_file(args.file), worker=False) as inst:
        inst.untrust(args.name)
    print(f"no longer trusted: {args.name}")
    return 0
