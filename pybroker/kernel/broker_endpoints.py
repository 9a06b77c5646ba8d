"""The instance's broker endpoint (P2), a service composed on the kernel: starting it, its
certificate and the peers it admits. The running endpoint is
pybroker/kernel/broker_endpoint/runtime.py; the kernel holds it in its endpoint slot."""

from __future__ import annotations

from datetime import datetime

from pybroker.errors import WireError
from pybroker.kernel.broker_endpoint.ddl import stored_endpoint
from pybroker.kernel.broker_endpoint.runtime import (
    BrokerEndpoint,
    endpoint_identity,
    renew_identity,
    settings_for,
    trust,
    untrust,
)
from pybroker.kernel.kernel import Kernel


class BrokerEndpoints:
    """Start the broker endpoint, make its certificate, trust and untrust peers."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

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
    ) -> BrokerEndpoint:
        """Instance.start_endpoint() says what each argument does."""
        kernel = self.kernel
        kernel.check_open()
        running = kernel.endpoint
        if running is not None and not running.is_closed:
            raise WireError(
                f"the broker endpoint of this instance is already started, on "
                f"{running.address}; close it first")
        defined = stored_endpoint(kernel)  # P2
        if defined is not None:
            port = defined.port if port is None else port
            host = defined.host if host is None else host
            encryption = defined.encryption if encryption is None else encryption
        settings = settings_for(
            4022 if port is None else port, "127.0.0.1" if host is None else host,
            kernel.messaging.retry_scale, idle_timeout=idle_timeout,
            fragment_size=fragment_size, connect_timeout=connect_timeout,
            handshake_timeout=handshake_timeout, max_connections=max_connections,
            encryption=encryption, probe_timeout=probe_timeout)
        endpoint = BrokerEndpoint(kernel, settings)
        kernel.endpoint = endpoint
        kernel.defined_endpoint = endpoint if defined is not None else None
        return endpoint

    def certificate(self) -> str:
        """This instance's endpoint certificate (PEM), made on first need."""
        return endpoint_identity(self.kernel).certificate

    def renew_certificate(self, not_after: datetime | None = None) -> str:
        """Instance.renew_certificate() says what it does."""
        self.kernel.check_open()
        return renew_identity(self.kernel, not_after)

    def trust(self, name: str, pem: str) -> None:
        trust(self.kernel, name, pem)

    def untrust(self, name: str) -> None:
        untrust(self.kernel, name)
