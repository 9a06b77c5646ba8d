"""The broker endpoint's side of mirrored routes (R9) that needs DuckDB: answering a probe
(the role here of the database it asks about) and writing the snapshot behind
sys.dm_broker_mirrored_routes. Called on the engine's writer thread (runtime.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.wire.frames import Probe

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.conversation.engine import Messaging

_COLUMNS = ("address", "mirror_address", "service_name", "broker_instance", "state_desc",
            "principal_address", "since", "last_probe_time", "address_answer",
            "mirror_address_answer")


def probe_role(messaging: Messaging, probe: Probe) -> str:
    """R9.2: PRINCIPAL, MIRROR, or "" when no database here has the probe's service (and
    broker identifier). A database that is not mirrored serves, as a principal does."""
    store = messaging._store
    with store._lock:
        rows = store.run("instance/select_probe_role.sql", {
            "service_name": probe.service, "broker_instance": probe.broker_instance})
    return rows[0][0] if rows else ""


def write_mirrored_routes(messaging: Messaging, rows: list[tuple[Any, ...]]) -> None:
    """Replace the snapshot behind sys.dm_broker_mirrored_routes with ``rows``
    (``Transport.mirrored_routes()``)."""
    with messaging.unit_of_work() as uow:
        uow.activate()
        uow.sql("wire/delete_mirrored_routes.sql", {})
        for row in rows:
            uow.sql("wire/insert_mirrored_route.sql", dict(zip(_COLUMNS, row, strict=True)))
