"""``pybroker serve``'s lines on stderr: as text (one line each, for a terminal) or, with
``--log-format json``, as one JSON object a line for log shippers:
``{"time": "2026-01-31T12:00:00.123Z", "source": "clients", "message": "..."}``."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

FORMATS = ("text", "json")
# where a line comes from: the client server, the broker endpoint, the PostgreSQL port,
# activation, or the periodic summary
SOURCES = ("clients", "broker", "postgresql", "activation", "summary")


class ServeLog:
    """Writes serve's lines to stderr in the format asked for."""

    def __init__(self, form: str = "text", clock: Callable[[], float] = time.time) -> None:
        if form not in FORMATS:
            raise ValueError(f"log format must be one of {', '.join(FORMATS)}: {form!r}")
        self.form = form
        self.clock = clock

    def line(self, source: str, message: str) -> None:
        print(self.render(source, message), file=sys.stderr, flush=True)

    def render(self, source: str, message: str) -> str:
        if self.form == "text":
            return message
        now = self.clock()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
        return json.dumps({"time": f"{stamp}.{int(now % 1 * 1000):03d}Z", "source": source,
                           "message": message}, ensure_ascii=False)

    def writer(self, source: str) -> Callable[[str], None]:
        """A function that writes a line from ``source``."""
        return lambda message: self.line(source, message)
