"""The process ``pybroker chaos crash`` kills: ``python -m pybroker.devtools.chaos.crash_child FILE
SEED`` opens (creates, or upgrades) the instance file and works on it until it is killed,
saying on stdout, one JSON line each, what it is about to do (``intent``) and what it has
committed (``done``). The driver (crash.py) checks the file against those lines after the
kill: every operation done is there, the one under way when the kill landed is there
whole or not at all, nothing else.

The work, drawn from SEED: databases made; in database Src routes made, altered and
dropped; dialogs begun from Src's service to Dst's with one message each (its body names
the round and the operation), and RECEIVEs of Dst's queue.
"""

from __future__ import annotations

import json
import random
import sys

import pybroker

SOURCE, TARGET = "Src", "Dst"
OPERATIONS = ("database", "route", "alter_route", "drop_route", "send", "send", "send",
              "receive")


def _say(**line: object) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def _setup(inst: pybroker.Instance) -> None:
    """The two databases and their services, each step one transaction, said as any other."""
    names = {d.name for d in inst.databases()}
    for name in (SOURCE, TARGET):
        if name not in names:
            _say(intent={"op": "database", "name": name})
            inst.create_database(name)
            _say(done={"op": "database", "name": name})
    for name, contracts in ((SOURCE, None), (TARGET, ["DEFAULT"])):
        db = inst.database(name)
        if not db.services():
            _say(intent={"op": "service", "database": name})
            with db.transaction():
                db.create_queue(f"{name}Queue")
                db.create_service(f"{name}Service", queue=f"{name}Queue", contracts=contracts)
            _say(done={"op": "service", "database": name})


def main(argv: list[str]) -> int:
    path, seed = argv[0], int(argv[1])
    rng = random.Random(seed)
    _say(op="start")
    inst = pybroker.connect(path, worker=False)
    _say(op="opened")
    _setup(inst)
    src, dst = inst.database(SOURCE), inst.database(TARGET)
    for n in range(1, 1_000_000):
        op = rng.choice(OPERATIONS)
        tag = f"r{seed}n{n}"
        routes = sorted(r.name for r in src.routes() if r.name.startswith("CrashRoute"))
        if op in ("alter_route", "drop_route") and not routes:
            op = "route"
        if op == "database":
            line = {"op": op, "name": f"D{tag}"}
            _say(intent=line)
            inst.create_database(line["name"])
        elif op == "route":
            line = {"op": op, "name": f"CrashRoute{tag}",
                    "address": f"tcp://{tag}.example:4022"}
            _say(intent=line)
            src.create_route(line["name"], service_name=f"Far{tag}", address=line["address"])
        elif op == "alter_route":
            line = {"op": op, "name": rng.choice(routes),
                    "address": f"tcp://{tag}.altered:4022"}
            _say(intent=line)
            src.alter_route(line["name"], address=line["address"])
        elif op == "drop_route":
            line = {"op": op, "name": rng.choice(routes)}
            _say(intent=line)
            src.drop_route(line["name"])
        elif op == "send":
            line = {"op": op, "body": tag}
            _say(intent=line)
            with src.transaction():
                src.begin_dialog(f"{SOURCE}Service", f"{TARGET}Service").send(tag)
        else:
            line = {"op": op}
            _say(intent=line)
            got = dst.receive(f"{TARGET}Queue", max_messages=rng.randint(1, 3))
            line["bodies"] = [bytes(m.message_body).decode() for m in got
                              if m.message_type_name == "DEFAULT"]
        _say(done=line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
