"""The broker endpoint's side of mirrored routes (R9) that needs DuckDB: answering a probe
(the role here of the database it asks about). Called on the engine's writer thread
(runtime.py); sys.dm_broker_mirrored_routes is written when read (kernel/live_views.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pybroker.core.wire.frames import Probe

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.storage.store import Store


def probe_role(store: Store, probe: Probe) -> str:
    """R9.2: PRINCIPAL, MIRROR, or "" when no database here has the probe's service (and
    broker identifier). A database that is not mirrored serves, as a principal does."""
    with store.lock:
        rows = store.run("instance/select_probe_role.sql", {
            "service_name": probe.service, "broker_instance": probe.broker_instance})
    return rows[0][0] if rows else ""
