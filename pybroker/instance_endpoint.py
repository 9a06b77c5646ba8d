"""The broker endpoint's part of an Instance (P2): starting it, its certificate and the
peers it admits. A mixin of :class:`pybroker.instance.Instance`, as the Database's DDL
mixins are of Database; the endpoint itself is pybroker/broker_endpoint/runtime.py."""

from __future__ import annotations

from typing import Any

from pybroker.broker_endpoint.ddl import stored_endpoint
from pybroker.broker_endpoint.runtime import (
    Endpoint,
    endpoint_identity,
    settings_for,
    trust,
    untrust,
)
from pybroker.errors import InstanceClosedError, WireError


class EndpointMixin:
    """Instance methods of the broker endpoint; the instance holds ``_endpoint``,
    ``_defined_endpoint``, ``_closed`` and ``_messaging``."""

    _endpoint: Endpoint | None
    _defined_endpoint: Endpoint | None
    _closed: bool
    _messaging: Any

    def start_endpoint(
        self,
        port: int | None = None,
        host: str | None = None,
        *,
        idle_timeout: float | None = None,
        fragment_size: int | None = None,
        connect_timeout: float | None = None,
        handshake_timeout: float | None = None,
        max_connections: int | None = None,
        encryption: bool | None = None,
        probe_timeout: float | None = None,
    ) -> Endpoint:
        """Listen for adjacent brokers on ``host:port`` (``port=0``: a free port) and send
        the messages whose route names a network address. Mutual TLS with this instance's
        certificate; only peers admitted with ``trust()`` can connect, either way.
        ``idle_timeout`` (default 90 s) closes a connection nothing flowed on;
        ``fragment_size`` (default 1 MiB) is the largest fragment a message travels in.
        ``encryption=False`` (SQL Server's ENCRYPTION = DISABLED) speaks without TLS: peers
        still must be trusted, and every dialog frame is still signed (P6).
        ``probe_timeout`` (default 10 s) is how long a mirrored route waits for a partner's
        answer to its PROBE before it counts that partner as unreachable (R9.2-R9.4).

        If the instance file defines the broker endpoint (CREATE ENDPOINT on master), what
        is left out comes from its definition (LISTENER_PORT, LISTENER_IP, ENCRYPTION),
        whatever its STATE, since this call is what starts it; what is given overrides the
        definition for this endpoint only. The endpoint started is then the definition's:
        ALTER and DROP ENDPOINT stop or move it. With no definition the defaults are port
        4022, host 127.0.0.1 and encryption on."""
        if self._closed:
            raise InstanceClosedError()
        if self._endpoint is not None and not self._endpoint.is_closed:
            raise WireError(
                f"the broker endpoint of this instance is already started, on "
                f"{self._endpoint.address}; close it first")
        defined = stored_endpoint(self)  # P2
        if defined is not None:
            port = defined.port if port is None else port
            host = defined.host if host is None else host
            encryption = defined.encryption if encryption is None else encryption
        settings = settings_for(
            4022 if port is None else port, "127.0.0.1" if host is None else host,
            self._messaging.retry_scale, idle_timeout=idle_timeout,
            fragment_size=fragment_size, connect_timeout=connect_timeout,
            handshake_timeout=handshake_timeout, max_connections=max_connections,
            encryption=encryption, probe_timeout=probe_timeout)
        self._endpoint = Endpoint(self, settings)
        self._defined_endpoint = self._endpoint if defined is not None else None
        return self._endpoint

    @property
    def endpoint(self) -> Endpoint | None:
        """The running broker endpoint, if started."""
        return self._endpoint

    @property
    def certificate(self) -> str:
        """This instance's endpoint certificate (PEM), made on first need; its private
        key stays in the instance file."""
        return endpoint_identity(self).certificate

    def trust(self, name: str, pem: str) -> None:
        """Admit the peer instance whose endpoint certificate is ``pem`` as ``name``
        (replacing a certificate of that name)."""
        trust(self, name, pem)

    def untrust(self, name: str) -> None:
        """Stop admitting the peer ``name``; its connections are closed."""
        untrust(self, name)
