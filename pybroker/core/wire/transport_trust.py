"""Whom the transport trusts (P6): the pinned certificates of the peers, the TLS contexts
made from them and this instance's own, and the secret shared with each peer (ECDH), from
which the dialog keys are derived. No sockets here: the transport hands it certificates."""

from __future__ import annotations

import os
import ssl
import tempfile

from pybroker.core.wire import certificates
from pybroker.core.wire.transport_settings import Identity


class Trust:
    """The trusted certificates by name, with a TLS context for each side of a
    connection (``server_context``, ``client_context``)."""

    def __init__(self, identity: Identity, trusted: dict[str, str]) -> None:
        self.identity = identity
        self.trusted: dict[str, certificates.CertificateInfo] = {}
        self._secrets: dict[bytes, bytes] = {}
        self.server_context: ssl.SSLContext | None = None
        self.client_context: ssl.SSLContext | None = None
        self.replace(trusted)

    def replace(self, trusted: dict[str, str]) -> None:
        """Trust these certificates (name -> PEM) from now on, and only them."""
        self.trusted = {name: certificates.certificate_info(pem)
                        for name, pem in trusted.items()}
        self._secrets = {}
        self.server_context = self._context(server=True)
        self.client_context = self._context(server=False)

    def _context(self, *, server: bool) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_REQUIRED
        with tempfile.TemporaryDirectory() as folder:  # load_cert_chain reads files only
            path = os.path.join(folder, "endpoint.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(self.identity.private_key)
                out.write(self.identity.certificate)
            ctx.load_cert_chain(path)
        pems = "".join(info.pem for info in self.trusted.values())
        if pems:
            ctx.load_verify_locations(cadata=pems)
        return ctx

    def of_certificate(self, der: bytes | None) -> certificates.CertificateInfo | None:
        """The trusted certificate a TLS peer presented (DER), if it is one."""
        if not der:
            return None
        fingerprint = certificates.fingerprint_of_der(der)
        for info in self.trusted.values():
            if info.fingerprint == fingerprint:
                return info
        return None

    def of_key_id(self, key_id: bytes) -> certificates.CertificateInfo | None:
        """The trusted certificate whose key a HELLO names (without TLS)."""
        return next((i for i in self.trusted.values() if i.key_id == key_id), None)

    def name_of(self, info: certificates.CertificateInfo) -> str:
        return next(n for n, i in self.trusted.items() if i is info)

    def is_trusted(self, key_id: bytes) -> bool:
        """Whether a peer that logged in with the key ``key_id`` is still trusted."""
        known = {info.fingerprint for info in self.trusted.values()}
        return any(info.key_id == key_id and info.fingerprint in known
                   for info in self.trusted.values())

    def secret(self, info: certificates.CertificateInfo) -> bytes:
        """The secret this instance shares with the holder of ``info`` (P6)."""
        found = self._secrets.get(info.key_id)
        if found is None:
            found = self._secrets[info.key_id] = certificates.peer_secret(
                self.identity.private_key, info.pem)
        return found
