"""X.509 certificates of the real form with made-up keys and signatures, for offline runs and tests: what vCluster's
kubeconfig holds (a client certificate valid a year) without a CA to sign it. Deterministic: the same dates give the
same bytes.
"""

from __future__ import annotations

import base64
from datetime import datetime, timezone

RSA_ENCRYPTION = "1.2.840.113549.1.1.1"
SHA256_WITH_RSA = "1.2.840.113549.1.1.11"
COMMON_NAME = "2.5.4.3"


def _tlv(tag: int, content: bytes) -> bytes:
    size = len(content)
    if size < 0x80:
        return bytes([tag, size]) + content
    length = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(length)]) + length + content


def _oid(dotted: str) -> bytes:
    first, second, *rest = (int(part) for part in dotted.split("."))
    body = bytearray([40 * first + second])
    for number in rest:
        chunk = [number & 0x7F]
        number >>= 7
        while number:
            chunk.append(0x80 | (number & 0x7F))
            number >>= 7
        body += bytes(reversed(chunk))
    return _tlv(0x06, bytes(body))


def _integer(number: int) -> bytes:
    body = number.to_bytes(number.bit_length() // 8 + 1, "big")
    return _tlv(0x02, body)


def _time(moment: datetime) -> bytes:
    moment = moment.astimezone(timezone.utc)
    # RFC 5280 4.1.2.5: UTCTime up to 2049, GeneralizedTime from 2050.
    if moment.year < 2050:
        return _tlv(0x17, moment.strftime("%y%m%d%H%M%SZ").encode())
    return _tlv(0x18, moment.strftime("%Y%m%d%H%M%SZ").encode())


def _name(common_name: str) -> bytes:
    return _tlv(0x30, _tlv(0x31, _tlv(0x30, _oid(COMMON_NAME) + _tlv(0x0C, common_name.encode()))))


def fake_certificate_der(not_before: datetime, not_after: datetime, common_name: str = "offline") -> bytes:
    algorithm = _tlv(0x30, _oid(SHA256_WITH_RSA) + _tlv(0x05, b""))
    public_key = _tlv(0x30, _integer((1 << 2047) | 1) + _integer(65537))
    key_info = _tlv(0x30, _tlv(0x30, _oid(RSA_ENCRYPTION) + _tlv(0x05, b"")) + _tlv(0x03, b"\x00" + public_key))
    tbs = _tlv(0x30, _tlv(0xA0, _integer(2)) + _integer(2019) + algorithm + _name("offline-ca")
               + _tlv(0x30, _time(not_before) + _time(not_after)) + _name(common_name) + key_info)
    return _tlv(0x30, tbs + algorithm + _tlv(0x03, b"\x00" + bytes(256)))


def fake_certificate_pem(not_before: datetime, not_after: datetime, common_name: str = "offline") -> str:
    body = base64.b64encode(fake_certificate_der(not_before, not_after, common_name)).decode()
    lines = [body[index:index + 64] for index in range(0, len(body), 64)]
    return "\n".join(["-----BEGIN CERTIFICATE-----", *lines, "-----END CERTIFICATE-----", ""])
