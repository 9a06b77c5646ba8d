"""Routing tables rewritten by the generated-network tests (diagnose's batched and set-based
answers against one question at a time)."""

from __future__ import annotations

import pybroker


def drop_routes(inst: pybroker.Instance, databases: tuple[str, ...] = ("Db", "msdb")) -> None:
    """Every route of ``databases`` dropped but AutoCreatedLocal, for an example's own."""
    for name in databases:
        db = inst.database(name)
        for old in db.routes():
            if old.name != "AutoCreatedLocal":
                db.drop_route(old.name)
