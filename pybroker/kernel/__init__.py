"""The kernel of an instance and the services composed on it (catalog DDL, route DDL,
mirroring, the broker endpoint's certificate and trust)."""

from pybroker.kernel.kernel import Kernel

__all__ = ["Kernel"]
