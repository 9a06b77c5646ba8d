"""One instance of ``pybroker demo``'s last part, in its own process
(pybroker/devtools/demos/wire.py drives several of them).

``python -m pybroker.devtools.demos.wire_child FILE RETRY_SCALE`` opens (creates) the
instance file FILE and answers one JSON command per line on stdin with one JSON line on
stdout (anything else the process prints goes to stderr):

- ``endpoint``: the broker endpoint's address (CREATE ENDPOINT ... STATE = STARTED ran
  first; else it is started on a free port of 127.0.0.1), this instance's certificate and
  the process id;
- ``database`` NAME [BROKER_INSTANCE]: create a database (a partner of a mirrored pair is
  given its pair's broker identifier, R9);
- ``trust`` NAME CERTIFICATE: admit a peer instance;
- ``execute`` DATABASE TSQL: run a T-SQL batch in a database (master for ALTER ENDPOINT and
  ALTER DATABASE);
- ``sql`` QUERY: the columns and rows of a query on the sys.* views, as text;
- ``receive`` DATABASE QUEUE COUNT TIMEOUT: RECEIVE until COUNT messages are taken or
  TIMEOUT seconds pass; answers each message's sequence number, type and body;
- ``quit``.

Each command is one call of the public API, as a user would make it in that instance's own
process; the demo prints what it asks and what comes back.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from pybroker.api.instance import Instance


def handle(inst: Instance, cmd: dict[str, Any]) -> dict[str, Any]:
    name = cmd["cmd"]
    if name == "endpoint":
        endpoint = inst.endpoint or inst.start_endpoint(0, "127.0.0.1")
        return {"address": endpoint.address, "certificate": inst.certificate,
                "pid": os.getpid()}
    if name == "database":
        db = inst.create_database(cmd["name"], broker_instance=cmd.get("broker_instance"))
        return {"broker_instance": db.broker_instance}
    if name == "trust":
        inst.trust(cmd["name"], cmd["certificate"])
        return {"ok": True}
    if name == "execute":
        inst.database(cmd["database"]).execute(cmd["tsql"])
        return {"ok": True}
    if name == "sql":
        relation = inst.sql(cmd["query"])
        return {"columns": list(relation.columns),
                "rows": [[None if v is None else str(v) for v in row]
                         for row in relation.fetchall()]}
    if name == "receive":
        db = inst.database(cmd["database"])
        got: list[Any] = []
        deadline = time.monotonic() + cmd["timeout"]
        while len(got) < cmd["count"] and time.monotonic() < deadline:
            got += db.receive(cmd["queue"], max_messages=10, timeout=0.2)
        return {"messages": [[m.message_sequence_number, m.message_type_name,
                              m.message_body.decode("utf-8", "replace")] for m in got]}
    raise ValueError(f"unknown command {name!r}")


def main(argv: list[str]) -> int:
    path, retry_scale = Path(argv[0]), float(argv[1])
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints go to stderr, not into the replies
    with Instance(path, retry_scale=retry_scale) as inst:
        for line in sys.stdin:
            cmd = json.loads(line)
            if cmd["cmd"] == "quit":
                out.write(json.dumps({"ok": True}) + "\n")
                break
            try:
                reply = handle(inst, cmd)
            except Exception as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}",
                         "traceback": traceback.format_exc()}
            out.write(json.dumps(reply) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
