"""Loopback ports for processes started with a fixed ``--port`` (chaos runs restart an
instance on the port it had; tests start servers on ports they name).

A port the kernel hands out for ``bind(0)`` comes from the ephemeral range, the same range
it takes the local port of every outgoing connection from: once the probing socket closes,
any connection made on the machine (a Spark driver's, another instance's) may take that port
before the process meant for it binds, and the process fails with "address already in use".
The ports chosen here lie below the ephemeral range, where the kernel never puts an
outgoing connection, and each is checked free by binding it once.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 10_000
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_DEFAULT_EPHEMERAL_START = 32_768  # Linux's default, and the IANA range starts at 49152
_ATTEMPTS = 1_000
_rng = random.SystemRandom()


def ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range."""
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_EPHEMERAL_START


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports that were free a moment ago, below the ephemeral range
    (where nothing the kernel assigns can take them); when the range leaves too little room
    below it, the kernel's own choice."""
    high = ephemeral_start() - 1
    if high - LOWEST < 1_000:
        return _kernel_ports(n)
    ports: list[int] = []
    for _ in range(_ATTEMPTS):
        if len(ports) == n:
            return ports
        port = _rng.randint(LOWEST, high)
        if port not in ports and _bindable(port):
            ports.append(port)
    if len(ports) == n:
        return ports
    raise OSError(f"found {len(ports)} of {n} free loopback ports from {LOWEST} to {high} "
                  f"in {_ATTEMPTS} attempts")


def free_port() -> int:
    return free_ports(1)[0]


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kernel_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
