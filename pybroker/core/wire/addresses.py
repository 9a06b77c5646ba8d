"""Network addresses of broker endpoints (``tcp://host:port``), as routes name them."""

from __future__ import annotations

import functools

from pybroker.errors import WireError


def parse_address(address: str) -> tuple[str, int]:
    """``tcp://host:port[/...]`` -> (host, port)."""
    rest = address.strip()
    if rest[:6].lower() != "tcp://":
        raise WireError(f"{address!r} is not a network address (tcp://host:port)")
    rest = rest[6:].split("/", 1)[0]
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise WireError(f"{address!r} does not name a host and a port from 1 to 65535")
    return host.strip("[]"), int(port)


@functools.lru_cache(maxsize=1024)  # every message sent asks (a refusal is not kept)
def next_hop(address: str) -> str:
    host, port = parse_address(address)
    return f"tcp://{host}:{port}"
