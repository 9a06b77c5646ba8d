"""What the transport says of its sockets (transport.py): the peer's address, and the
words for what went wrong, in SQL Server's manner where it has one. Importing this module
also quiets asyncio's own warnings about writes to a lost connection (see below)."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import ssl


class _QuietLostWrites(logging.Filter):
    """asyncio warns on stderr when bytes are written to a connection already lost; the
    transport records that as a broker event and reconnects, so the warning only adds noise
    to the output of the programs that embed an instance."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("socket.send() raised exception",
                                               "SSL error in data received"))


logging.getLogger("asyncio").addFilter(_QuietLostWrites())


def peer_text(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"tcp://{peer[0]}:{peer[1]}"
    return str(peer)


def describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or exc}"
    if isinstance(exc, OSError) and exc.errno:
        # SQL Server's form, e.g. '10061(No connection could be made ...)': the system's
        # words for the error number, not asyncio's "Connect call failed (host, port)"
        return f"{exc.errno}({os.strerror(exc.errno)}.)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def why_not_listening(host: str, exc: OSError) -> str:
    """Why the listening socket could not be bound, saying what to change."""
    if isinstance(exc, socket.gaierror):
        return f"{host!r} is not a host name this machine can resolve ({exc.strerror})"
    if exc.errno == errno.EADDRNOTAVAIL:
        return (f"{host} is not an address of this machine; listen on one of its own "
                "addresses (127.0.0.1, or 0.0.0.0 for all of them)")
    if exc.errno == errno.EADDRINUSE:
        return f"{exc.strerror or exc} (is the port taken by another process?)"
    return str(exc.strerror or exc)
