"""Endpoint certificates and dialog session keys (P6, endpoint security).

Each instance has one self-signed certificate (EC P-256) whose private key is kept in the
instance file. Peers are admitted by their certificate (``Instance.trust``); as in SQL Server
only the validity dates are checked, not a chain or a name.

Session keys: Service Broker generates a key per dialog direction and sends it wrapped with
the certificates. pybroker derives it instead: the two instances' certificate keys agree on
a shared secret (ECDH), and each dialog direction's key is HMAC(secret, conversation id,
direction). Nothing secret crosses the network, a forwarder cannot sign, and both ends
compute the same key from the certificates they already trust.

cryptography is imported by the functions that use it, not with this module: most
`pybroker` commands never touch a certificate, and its import costs ~0.15 s at each start.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pybroker.errors import WireError

if TYPE_CHECKING:
    from cryptography import x509

KEY_ID_SIZE = 8
CERTIFICATE_DAYS = 3650


@dataclass(frozen=True, slots=True)
class CertificateInfo:
    pem: str
    fingerprint: str  # SHA-256 of the DER, hex
    key_id: bytes  # the first 8 bytes of the fingerprint: names the key in frames
    subject: str
    not_before: datetime  # naive UTC
    not_after: datetime


def make_certificate(common_name: str, now: datetime, *, not_before: datetime | None = None,
                     not_after: datetime | None = None) -> tuple[str, str]:
    """A new self-signed endpoint certificate and its private key, both PEM: valid from
    ``not_before`` (default: a day before ``now``) to ``not_after`` (default: ten years
    after ``now``), naive UTC."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64] or "pybroker")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1) if not_before is None else not_before)
        .not_valid_after(now + timedelta(days=CERTIFICATE_DAYS) if not_after is None
                         else not_after)
        # a self-signed certificate that peers load as their trust anchor
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=True, key_cert_sign=True, crl_sign=False,
            encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode("ascii")
    return cert_pem, key_pem


def renewed_certificate(cert_pem: str, key_pem: str, now: datetime, *,
                        not_after: datetime | None = None) -> str:
    """The endpoint certificate ``cert_pem`` renewed: the same subject and key (so the
    secrets peers share with it, and the dialogs' keys, stay as they are), valid from a
    day before ``now`` to ``not_after`` (default: ten years after ``now``), naive UTC."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    old = _load(cert_pem)
    key = serialization.load_pem_private_key(key_pem.encode("ascii"), password=None)
    builder = (
        x509.CertificateBuilder()
        .subject_name(old.subject)
        .issuer_name(old.subject)
        .public_key(old.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=CERTIFICATE_DAYS) if not_after is None
                         else not_after))
    for extension in old.extensions:  # a trust anchor with the same key usage as before
        builder = builder.add_extension(extension.value, critical=extension.critical)
    cert = builder.sign(key, hashes.SHA256())  # type: ignore[arg-type]
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def _load(pem: str | bytes) -> x509.Certificate:
    from cryptography import x509

    if isinstance(pem, str):
        try:
            pem = pem.encode("ascii")
        except UnicodeEncodeError:
            raise WireError("a certificate PEM must be ASCII text") from None
    if not isinstance(pem, bytes):
        raise WireError(f"a certificate is PEM text, not {type(pem).__name__}")
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        # cryptography's own text points into its FAQ or names a Rust parser's error
        raise WireError(
            "not a PEM certificate: expected the whole text from -----BEGIN CERTIFICATE----- "
            "to -----END CERTIFICATE-----, as `pybroker cert` (or inst.certificate) gives "
            "it") from None


def pem_of_file(data: bytes) -> str:
    """A certificate file's bytes as PEM text: PEM as ``pybroker cert`` prints it, or DER
    as SQL Server's BACKUP CERTIFICATE writes it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    if data.lstrip().startswith(b"-----BEGIN"):
        try:
            return data.decode("ascii")
        except UnicodeDecodeError:
            raise WireError("a certificate PEM must be ASCII text") from None
    try:
        cert = x509.load_der_x509_certificate(data)
    except ValueError:
        raise WireError("not a certificate: expected PEM text (-----BEGIN CERTIFICATE-----) "
                        "or DER bytes") from None
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def der_of_pem(pem: str) -> bytes:
    """A PEM certificate as DER bytes (what BACKUP CERTIFICATE writes)."""
    from cryptography.hazmat.primitives import serialization

    return _load(pem).public_bytes(serialization.Encoding.DER)


def certificate_info(pem: str | bytes) -> CertificateInfo:
    """Read a PEM certificate; WireError if it is not one or its key is not EC P-256."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    cert = _load(pem)
    if not isinstance(cert.public_key(), ec.EllipticCurvePublicKey) or not isinstance(
        cert.public_key().curve, ec.SECP256R1  # type: ignore[union-attr]
    ):
        raise WireError("an endpoint certificate must have an EC P-256 key (pybroker cert)")
    der = cert.public_bytes(serialization.Encoding.DER)
    digest = hashlib.sha256(der).digest()
    text = cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
    return CertificateInfo(
        pem=text, fingerprint=digest.hex(), key_id=digest[:KEY_ID_SIZE],
        subject=cert.subject.rfc4514_string(),
        not_before=cert.not_valid_before_utc.replace(tzinfo=None),
        not_after=cert.not_valid_after_utc.replace(tzinfo=None))


def fingerprint_of_der(der: bytes) -> str:
    return hashlib.sha256(der).hexdigest()


def peer_secret(own_key_pem: str, peer_cert_pem: str) -> bytes:
    """The secret two instances share: ECDH of this instance's key and the peer's
    certificate key, through HKDF (the same value on both sides)."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    key = serialization.load_pem_private_key(own_key_pem.encode("ascii"), password=None)
    peer = _load(peer_cert_pem).public_key()
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(
        peer, ec.EllipticCurvePublicKey
    ):
        raise WireError("endpoint keys must be EC P-256")
    shared = key.exchange(ec.ECDH(), peer)
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=b"pybroker peer secret v1").derive(shared)


def dialog_key(secret: bytes, conversation_id: str, from_initiator: bool) -> bytes:
    """P6: the session key of one direction of one dialog."""
    return hmac.digest(
        secret, b"pybroker dialog v1" + uuid.UUID(conversation_id).bytes
        + (b"\x01" if from_initiator else b"\x00"), "sha256")
