"""What a tenant's vCluster moved to another backing store does to a running site.

vCluster records the store its control plane runs on in the annotation ``vcluster.loft.sh/store`` of its config
Secret ``vc-config-<name>``, and checks every later start against it (``pkg/setup/config/config.go``
``EnsureBackingStoreChanges``, then ``config/config.go`` ``ValidateStoreChanges``; the same from v0.35.0 to v0.36.1).
A switch it refuses stops the new control plane ("seems like you were using ... as a store before and now have
switched to ..."), so the release's pods never get ready, the atomic Helm upgrade times out and rolls back, and
``pulumi up`` stops on the release. A switch it accepts moves no data, but for one: a deployed etcd read into an
embedded one (``etcd.embedded.migrateFromDeployedEtcd``, ``pkg/setup/initialize.go``). Any other starts the virtual
cluster on the new store, empty.
"""

from __future__ import annotations

from typing import Any, Mapping

from config.backing_store import EMBEDDED_DATABASE, store_type
from config.vocabulary import RELEASE
from tools.charts.render import release_chart_key
from tools.plan.running_site import LOST, REFUSED, Finding

STORE_FIELD = "values.controlPlane.backingStore"
# ValidateStoreChanges: each store, and the stores a vCluster may have run on before it. A store missing here
# follows only itself.
ACCEPTED_AFTER = {
    "deployed-etcd": frozenset({"external-etcd", "deployed-etcd", "embedded-database"}),
    "embedded-etcd": frozenset({"external-etcd", "deployed-etcd", "embedded-database"}),
    # vCluster accepts it for sites an older release labelled embedded while it used their external database.
    "external-database": frozenset({"embedded-database"}),
}
_MIGRATES = "controlPlane.backingStore.etcd.embedded.migrateFromDeployedEtcd"
_FIX = ("set the store back; to move the team to another store, snapshot its virtual cluster, create the team anew "
        "on the new store and restore the snapshot there (docs/operations-data.md, Backing up and restoring a team)")


def _values(resource: Mapping[str, Any]) -> dict:
    values = (resource.get("inputs") or {}).get("values")
    return values if isinstance(values, dict) else {}


def _migrated(values: dict) -> bool:
    node: Any = values
    for key in _MIGRATES.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node is True


def moved_store(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, str] | None:
    """The old and new store of a vCluster release whose store changes, as vCluster names them; None otherwise."""
    if new["type"] != RELEASE:
        return None
    try:
        if release_chart_key(new.get("inputs") or {}).name != "vcluster":
            return None
    except ValueError:
        return None  # a chart reference that names no release: the config refuses it
    before, after = store_type(_values(old)), store_type(_values(new))
    return None if before == after else (before, after)


def store_change_findings(old: Mapping[str, Any], new: Mapping[str, Any], subject: str) -> list[Finding]:
    """The finding of a vCluster release moved to another backing store: refused by vCluster, or started empty."""
    moved = moved_store(old, new)
    if moved is None:
        return []
    before, after = moved
    release = str((new.get("inputs") or {}).get("name") or new["name"])
    if before not in ACCEPTED_AFTER.get(after, frozenset()):
        return [Finding(REFUSED, subject, STORE_FIELD, before, after,
                        f"vCluster refuses to start on another store than it first ran on (the annotation "
                        f"vcluster.loft.sh/store of its Secret vc-config-{release}; \"seems like you were using "
                        f"{before} as a store before and now have switched to {after}\"): the control plane's pod "
                        "fails, the atomic Helm upgrade times out and rolls back, and `pulumi up` stops on the "
                        "release (the objects the upgrade would remove are kept)", _FIX)]
    if before == "deployed-etcd" and after == "embedded-etcd" and _migrated(_values(new)):
        return []
    left = (f"on the claim data-{release}-0, which the StatefulSet the upgrade removes leaves behind"
            if before == EMBEDDED_DATABASE else "where it was")
    return [Finding(LOST, subject, STORE_FIELD, before, after,
                    "vCluster accepts the switch but moves no data: the control plane starts on the new, empty "
                    "store, so the team's virtual cluster comes up empty and its syncer deletes the host pods it "
                    f"had synced, while the old store's data stays {left}", _FIX)]


def moved_store_releases(old_plan: Mapping[str, Any], new_plan: Mapping[str, Any]) -> frozenset[str]:
    """The Helm release names of the vClusters whose store changes between two plans."""
    before = {resource["urn"]: resource for resource in old_plan.get("resources", [])}
    return frozenset(str((resource.get("inputs") or {}).get("name") or resource["name"])
                     for resource in new_plan.get("resources", [])
                     if resource["urn"] in before and moved_store(before[resource["urn"]], resource) is not None)


def told_by_store_change(finding: Finding, moved: frozenset[str]) -> bool:
    """Whether a chart finding is an object a moved vCluster's upgrade removes, which its store finding tells better:
    a refused switch rolls back and removes nothing, an accepted one names the data left behind."""
    return finding.category == LOST and finding.subject.split(": ", 1)[0] in moved
