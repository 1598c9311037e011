"""When the certificates of a kubeconfig expire, read from the kubeconfig itself (the standard library parses no
X.509, and the stack's kubeconfigs are all the program and ops/expiry.py have).

Only the validity of a DER certificate is read: its signature is not checked, which is the API server's job.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional, Sequence

import yaml

# libyaml where installed: the program reads every team's kubeconfig, and the pure-Python loader took half a second
# of a 300-team run (of ten); both read YAML alike.
_KUBECONFIG_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SEQUENCE = 0x30
EXPLICIT_VERSION = 0xA0
UTC_TIME = 0x17
GENERALIZED_TIME = 0x18
PEM_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", re.S)


class CertificateError(ValueError):
    """Bytes that are not the X.509 certificate they were said to be."""


@dataclass(frozen=True)
class Validity:
    not_before: datetime
    not_after: datetime


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _element(data: bytes, offset: int) -> tuple[int, int, int]:
    """(tag, start of the content, end of the content) of the DER element at ``offset``."""
    if offset + 2 > len(data):
        raise CertificateError("truncated DER element")
    tag, length = data[offset], data[offset + 1]
    start = offset + 2
    if length & 0x80:
        size = length & 0x7F
        if not 0 < size <= 4 or start + size > len(data):
            raise CertificateError("bad DER length")
        length = int.from_bytes(data[start:start + size], "big")
        start += size
    if start + length > len(data):
        raise CertificateError("truncated DER element")
    return tag, start, start + length


def _time(tag: int, text: bytes) -> datetime:
    value = text.decode("ascii", "replace")
    if tag == UTC_TIME:
        # RFC 5280 4.1.2.5.1: two-digit years 50-99 are 19xx.
        year = int(value[:2])
        value = f"{1900 + year if year >= 50 else 2000 + year}{value[2:]}"
    elif tag != GENERALIZED_TIME:
        raise CertificateError("validity is not a time")
    try:
        return datetime.strptime(value, "%Y%m%d%H%M%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        raise CertificateError(f"bad certificate time {value!r}") from None


def validity(der: bytes) -> Validity:
    """notBefore and notAfter of a DER X.509 certificate (RFC 5280 4.1)."""
    tag, start, _ = _element(der, 0)
    if tag != SEQUENCE:
        raise CertificateError("not a certificate")
    tag, offset, _ = _element(der, start)
    if tag != SEQUENCE:
        raise CertificateError("no TBSCertificate")
    tag, _, end = _element(der, offset)
    if tag == EXPLICIT_VERSION:
        offset = end
    # serialNumber, signature and issuer come before validity.
    for _ in range(3):
        _, _, offset = _element(der, offset)
    tag, offset, _ = _element(der, offset)
    if tag != SEQUENCE:
        raise CertificateError("no validity")
    times = []
    for _ in range(2):
        tag, start, offset = _element(der, offset)
        times.append(_time(tag, der[start:offset]))
    return Validity(*times)


def pem_validities(pem: bytes) -> list[Validity]:
    """The validity of every certificate of a PEM bundle."""
    blocks = PEM_CERTIFICATE.findall(pem)
    if not blocks:
        raise CertificateError("no PEM certificate")
    try:
        return [validity(base64.b64decode(b"".join(block.split()), validate=True)) for block in blocks]
    except binascii.Error:
        raise CertificateError("PEM certificate is not base64") from None


def _pem_data(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise CertificateError("kubeconfig certificate data is not base64") from None


@dataclass(frozen=True)
class KubeconfigCertificates:
    """The current context's client certificate (None: it signs in otherwise, by token or exec) and the CA it
    trusts (None: none embedded)."""
    client: Optional[Validity]
    authority: Optional[Validity]


def _current_entries(kubeconfig: str) -> tuple[dict, dict]:
    """The user and the cluster of the kubeconfig's current context (else of its first)."""
    try:
        config = yaml.load(kubeconfig or "", Loader=_KUBECONFIG_LOADER) or {}
    except yaml.YAMLError:
        raise CertificateError("not a kubeconfig (YAML does not parse)") from None
    if not isinstance(config, dict):
        raise CertificateError("not a kubeconfig")
    contexts = {entry.get("name"): entry.get("context") or {} for entry in config.get("contexts") or []}
    context = contexts.get(config.get("current-context")) or next(iter(contexts.values()), {})
    users = {entry.get("name"): entry.get("user") or {} for entry in config.get("users") or []}
    clusters = {entry.get("name"): entry.get("cluster") or {} for entry in config.get("clusters") or []}
    return users.get(context.get("user")) or {}, clusters.get(context.get("cluster")) or {}


def _client(user: dict) -> Optional[Validity]:
    data = user.get("client-certificate-data")
    return pem_validities(_pem_data(data))[0] if data else None


def kubeconfig_certificates(kubeconfig: str) -> KubeconfigCertificates:
    user, cluster = _current_entries(kubeconfig)
    authority = cluster.get("certificate-authority-data")
    # A bundle is trusted while any of its CAs is: the latest end counts.
    return KubeconfigCertificates(
        client=_client(user),
        authority=max(pem_validities(_pem_data(authority)), key=lambda v: v.not_after) if authority else None)


def client_certificate_expiry(kubeconfig: str) -> Optional[str]:
    """When the kubeconfig's client certificate ends (ISO 8601, UTC), or None if it holds none or none that parses
    (what the program exports: a kubeconfig it cannot read is not its to refuse)."""
    try:
        client = _client(_current_entries(kubeconfig)[0])
    except CertificateError:
        return None
    return _iso(client.not_after) if client else None


def bundle_expiry(pem: str, names: Sequence[str]) -> dict[str, Optional[str]]:
    """When each certificate of a PEM bundle ends (ISO 8601, UTC), keyed by ``names`` in the bundle's order; None for
    every name when the bundle does not hold exactly one parsable certificate per name (what the program exports: a
    host it cannot read is not its to refuse, and ops/expiry.py says the end is unknown)."""
    try:
        found = pem_validities((pem or "").encode())
    except CertificateError:
        found = []
    if len(found) != len(names):
        return dict.fromkeys(names)
    return {name: _iso(validity.not_after) for name, validity in zip(names, found)}
