"""The instances diagnose reads, through the read paths analysts use: an instance file or a
snapshot opened read-only (nothing written, never migrated, beside other readers), a file
another process serves (through its server), or ``pybroker://HOST:PORT``.

Every read is a template of sql/diagnose/ run with bound parameters by ``Instance.sql``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pybroker.api.instance import Instance
from pybroker.api.served.client import URL_SCHEME, ClientInstance, connect_served, connect_url
from pybroker.errors import BrokerError
from pybroker.storage.templates import render


class TargetError(BrokerError):
    """A target diagnose cannot read (a missing file, a server that does not answer)."""


@dataclass(slots=True)
class Target:
    """One instance named to diagnose: its ``name`` as given and the open ``instance``.
    ``owned``: opened here, so closed here."""

    name: str
    instance: Any
    owned: bool = True
    _rows: dict[tuple[str, tuple[tuple[str, str], ...]], list[dict[str, Any]]] = field(
        default_factory=dict, init=False, repr=False)

    def rows(self, template: str, **params: Any) -> list[dict[str, Any]]:
        """The rows of ``sql/diagnose/<template>.sql`` (read once per target), as dicts."""
        key = (template, tuple(sorted((k, repr(v)) for k, v in params.items())))
        if key not in self._rows:
            self._rows[key] = self.query(template, **params)
        return self._rows[key]

    def query(self, template: str, **params: Any) -> list[dict[str, Any]]:
        """The rows of ``sql/diagnose/<template>.sql`` read now, as dicts."""
        relation = self.instance.sql(render(f"diagnose/{template}.sql"), params or None)
        columns = list(relation.columns)
        return [dict(zip(columns, row, strict=True)) for row in relation.fetchall()]

    def tuples(self, template: str, switches: Mapping[str, str] | None = None,
               **params: Any) -> list[tuple[Any, ...]]:
        """The rows of ``sql/diagnose/<template>.sql`` rendered with ``switches`` (the
        template's variables: names of its own, never values) read now, not kept, as
        tuples in the template's column order: for the many rows of a batch of routing
        keys."""
        sql = render(f"diagnose/{template}.sql", **(switches or {}))
        return self.instance.sql(sql, params or None).fetchall()

    def routing_now(self) -> dt.datetime:
        """The instant the instance's routing judges expiry at (R1.4), as
        ``Instance.explain`` does: an open Instance's own clock (naive UTC, the catalog's
        timestamps), else the clock of this process, which a served instance's server
        shares."""
        if isinstance(self.instance, Instance):
            return self.instance.kernel.now()
        return dt.datetime.now(dt.UTC).replace(tzinfo=None)

    def close(self) -> None:
        if self.owned:
            self.instance.close()


def open_target(where: Any, tokens: Mapping[str, str] | None = None) -> Target:
    """Open one target read-only: an open Instance (used as it is, never closed here), a
    ``pybroker://HOST:PORT`` address (its token from ``tokens``), or the path of an instance
    file or snapshot (through its server when one serves it)."""
    if isinstance(where, (Instance, ClientInstance)):
        path = getattr(where, "path", None)
        return Target(repr(where) if path is None else str(path), where, owned=False)
    text = str(where)
    try:
        if text.startswith(URL_SCHEME):
            token = (tokens or {}).get(text) or (tokens or {}).get(text.rstrip("/"))
            return Target(text, connect_url(text, token=token, read_only=True))
        path = Path(text)
        client = connect_served(path, read_only=True)
        if client is not None:
            return Target(text, client)
        if not path.is_file():
            raise TargetError(f"cannot read {text}: no such instance file or snapshot")
        return Target(text, Instance(path, read_only=True, worker=False))
    except TargetError:
        raise
    except BrokerError as exc:
        raise TargetError(f"cannot read {text}: {exc}") from exc
    except OSError as exc:
        raise TargetError(f"cannot read {text}: {exc.strerror or exc}") from exc
