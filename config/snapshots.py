"""Where a team's vCluster snapshot may go, as the pinned vCluster reads a snapshot URL.

vCluster takes a snapshot of a team's virtual cluster (every key of its embedded database: objects, CRDs, RBAC,
Secrets; no volume data) and restores one, through its CLI and its control plane's snapshot controller
(docs/operations.md, "Backing up and restoring a team"). At every accepted release it parses the URL the same way
(pkg/snapshot/options.go ``Parse``, held by tests/test_snapshot_contract.py): the scheme picks the store and the
rest of the URL names the object. Plain data: ops/backup.py builds its commands from it.
"""

from __future__ import annotations

import base64
import binascii
from typing import Optional
from urllib.parse import parse_qs, urlsplit

# The schemes vCluster's Parse accepts, in its order; https is Azure Blob Storage.
SNAPSHOT_SCHEMES = ("oci", "s3", "container", "https")
# container:// writes into the control plane's own filesystem: its data volume is the one a snapshot must outlive.
ON_THE_VOLUME = "container"
# The port each store answers on when its URL names none.
DEFAULT_PORTS = {"s3": 443, "oci": 443, "https": 443}


def snapshot_url_problem(url: str) -> Optional[tuple[str, str]]:
    """Why ``url`` cannot hold a team's snapshot, as (problem, fix), or None. vCluster's own refusals first, in its
    words' sense (a missing bucket, key, registry or repository), then a store that dies with the volume."""
    example = "s3://BUCKET/KEY, oci://REGISTRY/REPOSITORY:TAG or an https:// Azure blob URL"
    if not isinstance(url, str) or "://" not in url:
        return "is not a URL", f"write it as {example}"
    parts = urlsplit(url)
    if parts.scheme not in SNAPSHOT_SCHEMES:
        return (f"has the scheme {parts.scheme!r}; vCluster takes {', '.join(SNAPSHOT_SCHEMES)} only",
                f"write it as {example}")
    if parts.scheme == ON_THE_VOLUME:
        return ("writes the snapshot into the control plane's container, on the data volume whose loss it must "
                "outlive", f"write it as {example}")
    if not parts.hostname:
        return "names no bucket, registry or storage account", f"write it as {example}"
    if not parts.path.strip("/"):
        return "names no key or repository after the host", f"write it as {example}"
    return None


def store_port(url: str) -> int:
    """The port the control plane and vCluster's snapshot pod open to reach the store ``url`` names."""
    parts = urlsplit(url)
    if parts.scheme == "s3":
        # s3://BUCKET/KEY names a bucket, not a host: AWS answers on 443. An S3-compatible store is named by the
        # ``url`` query option, base64-encoded (the S3 options' url tag), and its port is that endpoint's.
        endpoint = s3_endpoint(url)
        if endpoint:
            found = urlsplit(endpoint)
            return found.port or (80 if found.scheme == "http" else 443)
        return DEFAULT_PORTS["s3"]
    return parts.port or DEFAULT_PORTS[parts.scheme]


def s3_endpoint(url: str) -> Optional[str]:
    """The S3-compatible endpoint an s3:// URL names in its ``url`` option, decoded, or None."""
    values = parse_qs(urlsplit(url).query).get("url")
    if not values:
        return None
    try:
        return base64.b64decode(values[0].replace(" ", "+").strip(), validate=True).decode().strip()
    except (binascii.Error, UnicodeDecodeError):
        return None
