"""Where a team's vCluster snapshot may go, as the pinned vCluster reads a snapshot URL.

vCluster takes a snapshot of a team's virtual cluster (every key of its embedded database: objects, CRDs, RBAC,
Secrets; no volume data) and restores one, through its CLI and its control plane's snapshot controller
(docs/operations-data.md, "Backing up and restoring a team"). At every accepted release it parses the URL the same way
(pkg/snapshot/options.go ``Parse``, held by tests/test_snapshot_contract.py): the scheme picks the store and the
rest of the URL names the object. Plain data: ops/backup.py builds its commands from it, and the site's
``backup`` block (scheduled snapshots, components/tenant_backup.py) is read here.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
from dataclasses import dataclass
from typing import Optional, Protocol
from urllib.parse import parse_qs, urlsplit

from config.errors import MISSING
from config.key_types import Check, Integer, Text
from config.keys import REQUIRED, Block, Key
from config.reader import Section

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


# --- scheduled snapshots (gpu-tenancy:backup) -------------------------------------------------------------------

# How often each team's virtual cluster is snapshotted: divisors of a day, so that every run falls on the same hour
# of each day and its slot (below) follows the previous run's.
INTERVALS = {"1h": 1, "2h": 2, "3h": 3, "4h": 4, "6h": 6, "8h": 8, "12h": 12, "24h": 24}
# A finished request's ConfigMap stays in the team's namespace until the controller reconciles it past
# DefaultRequestTTL (loft-sh/api pkg/snapshot/constants.go, 24h; vCluster pkg/snapshot/controllerbase.go
# reconcileDoneRequest), which takes up to one resync more (controller-runtime's default SyncPeriod, 10h).
REQUEST_LIFETIME_HOURS = 24 + 10
SECRETS = ("backupAccessKeyId", "backupSecretAccessKey")
# The snapshot job's one container (components/tenant_backup.py), paid out of the team namespace's quota.
JOB_REQUESTS = {"cpu": "10m", "memory": "64Mi", "ephemeral-storage": "16Mi"}
JOB_LIMITS = {"cpu": "250m", "memory": "256Mi", "ephemeral-storage": "64Mi"}
# Its sidecar, the kubectl proxy through which it reads the request's outcome back.
PROXY_REQUESTS = {"cpu": "10m", "memory": "32Mi", "ephemeral-storage": "16Mi"}
PROXY_LIMITS = {"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "64Mi"}
# Secrets the snapshots keep in the namespace: every slot's options, and the request of the run under way (the
# controller deletes it when the request is done; runs do not overlap).
JOB_SECRETS = 2
BUCKET = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"

# How the snapshot pods are named, which the alert routing tells from a tenant's pods by (components/
# observability_team_alerting.py): the CronJob names a Job "<cronjob>-<scheduled minute since the epoch>" (eight
# digits until 2160; a Job made by hand, docs/operations-data.md, takes the same form), the Job controller names its pods
# "<job>-" plus a random suffix, and the API server cuts that prefix to MAX_GENERATED_NAME characters before adding
# GENERATED_SUFFIX_LENGTH characters of GENERATED_SUFFIX_ALPHABET (k8s.io/apiserver pkg/storage/names,
# k8s.io/apimachinery pkg/util/rand). A CronJob name of at most BACKUP_NAME_MAX keeps the prefix whole.
SCHEDULED_MINUTE_DIGITS = 8
MAX_GENERATED_NAME = 58
GENERATED_SUFFIX_LENGTH = 5
GENERATED_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
BACKUP_NAME_MAX = MAX_GENERATED_NAME - len("-") - SCHEDULED_MINUTE_DIGITS - len("-")


class VClusterNamed(Protocol):
    """A team (config/model.py Team, which imports this module) as far as its objects' names go."""

    vcluster_name: str


def backup_name(team: VClusterNamed) -> str:
    """The CronJob's (and its identity's) name, short enough that its pods' names are never cut (BACKUP_NAME_MAX)."""
    return f"{team.vcluster_name[:BACKUP_NAME_MAX - len('-backup')].rstrip('-')}-backup"


@dataclass(frozen=True)
class Backup:
    """Scheduled snapshots of every team's virtual cluster to one S3 bucket (docs/operations-data.md)."""

    bucket: str
    # Key prefix under the bucket, without slashes at either end ("" for the bucket's root).
    prefix: str
    every_hours: int
    keep: int
    # An S3-compatible store's endpoint (MinIO, Ceph), or None for AWS S3.
    endpoint: Optional[str] = None
    region: Optional[str] = None

    @property
    def port(self) -> int:
        if self.endpoint is None:
            return DEFAULT_PORTS["s3"]
        parts = urlsplit(self.endpoint)
        return parts.port or (80 if parts.scheme == "http" else 443)

    @property
    def endpoint_address(self) -> Optional[str]:
        """The endpoint's IP address when the URL names one (a store the NetworkPolicy can name), else None."""
        if self.endpoint is None:
            return None
        try:
            return str(ipaddress.ip_address(urlsplit(self.endpoint).hostname or ""))
        except ValueError:
            return None

    def team_prefix(self, namespace: str, vcluster: str) -> str:
        """Where one team's snapshots are kept: one key per slot under it."""
        return "/".join(part for part in (self.prefix, namespace, vcluster) if part)

    def slot_key(self, namespace: str, vcluster: str, slot: int) -> str:
        return f"{self.team_prefix(namespace, vcluster)}/{slot}.tar.gz"

    def slot_url(self, namespace: str, vcluster: str, slot: int) -> str:
        """The slot as a URL vCluster's CLI takes (``vcluster restore``): the store's options in its query, the
        endpoint base64-encoded as the S3 options' url tag reads it."""
        query = [f"region={self.region}"] if self.region else []
        if self.endpoint:
            query += [f"url={base64.b64encode(self.endpoint.encode()).decode()}", "force-path-style=true"]
        url = f"s3://{self.bucket}/{self.slot_key(namespace, vcluster, slot)}"
        return f"{url}?{'&'.join(query)}" if query else url

    @property
    def request_config_maps(self) -> int:
        """The most snapshot-request ConfigMaps a team's namespace holds at once."""
        return -(-REQUEST_LIFETIME_HOURS // self.every_hours) + 1


BACKUP = Block(title="scheduled snapshots of every team", optional_when_empty=True, intro=(
    "Opt-in (left out or `{}`: none). Every team's virtual cluster is snapshotted on a schedule into one S3 bucket, "
    "with the access key set as the secrets `backupAccessKeyId` and `backupSecretAccessKey`. What a snapshot holds and how a team is "
    "restored: [operations](operations-data.md#backing-up-and-restoring-a-team)."), keys=(
    Key("url", Text(form="s3://BUCKET[/PREFIX]", max_length=1024, checks=(
        Check("s3://.*", "is not an s3:// bucket URL: vCluster's snapshots go to S3 (or an S3-compatible store, "
              "`endpoint`); container:// would write onto the volume the snapshot must outlive",
              "write it as s3://BUCKET or s3://BUCKET/PREFIX (no query; the store's endpoint is `endpoint`)"),
        Check(rf"s3://{BUCKET}(/.*)?", "names a bucket S3 does not accept: a bucket's name is 3 to 63 lowercase "
              "letters, digits, dots and hyphens, beginning and ending with a letter or digit",
              "write the bucket's name as S3 shows it, e.g. s3://corp-gpu-backups/lab"),
        Check(rf"s3://{BUCKET}(/[A-Za-z0-9!_.*'()/-]*)?", "has a key prefix with characters other than letters, "
              "digits and ! _ . * ' ( ) / -, the ones a key is written with unencoded",
              "name the prefix with those characters only, e.g. s3://corp-gpu-backups/lab-2 (no query; the store's "
              "endpoint is `endpoint`)"))),
        REQUIRED, "The bucket, and the key prefix under which each team's snapshots are kept.",
        example="s3://corp-gpu-backups/lab", details=(
            "Each team's snapshots are `PREFIX/<namespace>/<vclusterName>/<slot>.tar.gz`, `keep` slots taken in "
            "turn.")),
    Key("endpoint", Text(form="http(s)://HOST[:PORT]", max_length=253, checks=(Check(
        r"https?://[A-Za-z0-9.:\[\]-]+/?", "is not an endpoint URL",
        "write it as https://HOST[:PORT], e.g. http://192.168.1.20:9000"),)), None,
        "An S3-compatible store's endpoint (MinIO, Ceph), reached with path-style requests.",
        example="http://192.168.1.20:9000", default_note="AWS S3",
        details="Named by its IP address, only that address and port are opened to the team's control plane and "
                "restore pod; named by a host name, the port is opened to the public internet. Requires `region`: "
                "requests are signed for a region, and vCluster looks the bucket's up only on AWS (without an "
                "endpoint)."),
    Key("region", Text(form="AWS region", checks=(Check(
        r"[a-z]{2}(-[a-z]+)+-[0-9]", "is not an AWS region", "write it as e.g. us-east-2"),)), None,
        "The bucket's region; required with `endpoint`.", example="us-east-2",
        default_note="found from the bucket on AWS S3"),
    Key("every", Text(choices=tuple(INTERVALS)), "24h", "How often each team is snapshotted."),
    Key("keep", Integer(minimum=1, maximum=1000), 7, "How many snapshots of each team are kept.",
        details="The newest `keep` runs' snapshots: each run overwrites the slot of the run `keep` runs before."),
))


def read_backup(section: Section) -> Optional[Backup]:
    """The site's scheduled snapshots, or None when the block is left out."""
    if not section.present or not section.values:
        return None
    url, endpoint, region = section.read("url"), section.read("endpoint"), section.read("region")
    every, keep = section.read("every"), section.read("keep")
    if None in (url, every, keep):
        return None
    if endpoint and not region:
        # vCluster looks a bucket's region up on AWS only (loft-sh/api s3 store.go Init); any other store's requests
        # are signed for the region the options name, and with none the upload fails at every run.
        section.fail("region", MISSING, "an S3-compatible store (backup.endpoint) needs the region its requests are "
                     "signed for: vCluster looks one up on AWS only, and every snapshot upload would fail",
                     "set backup.region to the store's region (MinIO's default is us-east-1)")
        return None
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    return Backup(bucket=bucket, prefix=prefix.strip("/"), every_hours=INTERVALS[every], keep=keep,
                  endpoint=endpoint.rstrip("/") if endpoint else None, region=region)
