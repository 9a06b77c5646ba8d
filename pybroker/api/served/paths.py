"""Where a served instance file's client socket and TCP token live: beside the file."""

from __future__ import annotations

import os
from pathlib import Path

SOCKET_SUFFIX = ".sock"  # FILE.sock: the Unix socket of the server holding FILE
TOKEN_SUFFIX = ".token"  # FILE.token: what a TCP client must present (owner-only)
_MAX_UNIX_PATH = 107  # bytes of sun_path, less its NUL


def socket_path_for(path: str | Path) -> Path:
    """Where the server of the instance file ``path`` listens for local clients."""
    return Path(str(path) + SOCKET_SUFFIX)


def token_path_for(path: str | Path) -> Path:
    return Path(str(path) + TOKEN_SUFFIX)


def unix_address(path: Path) -> tuple[str, int | None]:
    """An AF_UNIX address for ``path``: the path itself or, when it is too long for
    sun_path, its name under /proc/self/fd/ of its opened directory (the descriptor is
    returned for the caller to close once bound or connected)."""
    if len(os.fsencode(path)) <= _MAX_UNIX_PATH:
        return str(path), None
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    return f"/proc/self/fd/{fd}/{path.name}", fd
