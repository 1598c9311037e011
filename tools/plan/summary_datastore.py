"""summary.md: what the teams' vClusters may write into the host's datastore at most (config/synced_data.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from config.synced_data import DATASTORE_LIMITS, ETCD_DEFAULT_QUOTA, gibibytes
from config.tenant_budget import bytes_quantity
from config.vocabulary import (
    ADMISSION_COMPONENT, HOST_COMPONENT, NAMESPACE, POD_TEXT_BYTES_ANNOTATION, RELEASE, TENANT_COMPONENT,
)
from tools.plan.lookup import PlanIndex, dig
from tools.plan.markdown import code, table

COUNTS = ("count/configmaps", "count/secrets")
# The other kinds the syncer writes, whose labels and annotations alone are capped (rule metadata-size).
METADATA_COUNTS = ("count/pods", "count/services", "count/endpoints", "count/persistentvolumeclaims",
                   "count/endpointslices.discovery.k8s.io")


def mebibytes(amount: int) -> str:
    return f"{amount / 2 ** 20:,.1f} MiB"


@dataclass(frozen=True)
class TeamDatastore:
    team: str
    config_maps: int
    secrets: int
    object_cap: int
    other_objects: int
    metadata_cap: int
    pods: int
    pod_text_cap: int
    pod_conditions_cap: int
    pod_lists_cap: int
    services: int
    service_cap: int
    endpoints: int
    endpoints_cap: int
    slices: int
    slice_cap: int

    @property
    def worst_case(self) -> int:
        return (self.config_maps + self.secrets) * self.object_cap + self.other_objects * self.metadata_cap + \
            self.pods * (self.pod_text_cap + self.pod_conditions_cap + self.pod_lists_cap) + \
            self.services * self.service_cap + self.endpoints * self.endpoints_cap + self.slices * self.slice_cap


def _team_row(index: PlanIndex, component: dict[str, Any]) -> Optional[TeamDatastore]:
    """The team's quota counts from its release, the synced-objects policy's caps, the pod policy's, and the pod
    text cap its namespace states for the site's pod-size policy (none stated: no synced pod is admitted)."""
    children = index.descendants(component)
    release = next((r for r in children if r["type"] == RELEASE), None)
    namespace = next((r for r in children if r["type"] == NAMESPACE), None)

    def policy_with(output: str) -> Optional[dict[str, Any]]:
        return next((r for r in children
                     if r["type"] == ADMISSION_COMPONENT and dig(r, "outputs", output) is not None), None)
    policy, pod_policy = policy_with("objectBytes"), policy_with("podListBytes")
    quota = dig(release, "inputs", "values", "policies", "resourceQuota", "quota") or {}
    counts = [quota.get(key) for key in COUNTS + METADATA_COUNTS]
    if policy is None or not all(isinstance(count, int) for count in counts):
        return None
    pods, services, endpoints, _, slices = counts[len(COUNTS):]
    return TeamDatastore(str(dig(component, "outputs", "team") or component["name"]), counts[0], counts[1],
                         dig(policy, "outputs", "objectBytes"), sum(counts[len(COUNTS):]),
                         dig(policy, "outputs", "metadataBytes") or 0, pods,
                         int(dig(namespace, "inputs", "metadata", "annotations", POD_TEXT_BYTES_ANNOTATION) or 0),
                         dig(policy, "outputs", "podConditionBytes") or 0,
                         dig(pod_policy, "outputs", "podListBytes") or 0, services,
                         dig(policy, "outputs", "serviceBytes") or 0, endpoints,
                         dig(policy, "outputs", "endpointsBytes") or 0, slices,
                         dig(policy, "outputs", "endpointSliceBytes") or 0)


def datastore_section(index: PlanIndex) -> list[str]:
    teams = [row for component in sorted(index.of_type(TENANT_COMPONENT), key=lambda r: r["name"])
             if (row := _team_row(index, component)) is not None]
    if not teams:
        return []
    rows = [[code(row.team), str(row.config_maps), str(row.secrets), code(bytes_quantity(row.object_cap)),
             str(row.other_objects), code(bytes_quantity(row.metadata_cap)), str(row.pods),
             code(bytes_quantity(row.pod_text_cap)), code(bytes_quantity(row.pod_conditions_cap)),
             f"{row.pod_lists_cap:,} B", f"{row.service_cap:,} B", f"{row.endpoints_cap:,} B", f"{row.slice_cap:,} B",
             mebibytes(row.worst_case)]
            for row in teams]
    total = sum(row.worst_case for row in teams)
    kind = index.registered(HOST_COMPONENT, "kind")
    limit = DATASTORE_LIMITS.get(kind)
    if limit is not None:
        verdict = f"the {kind} host's etcd holds {gibibytes(limit)} (the program warns of a site past it)"
    else:
        verdict = (f"the program cannot read this {kind or 'unknown'} host's datastore limit; an etcd at its default "
                   f"quota holds {gibibytes(ETCD_DEFAULT_QUOTA)}")
    lines = ["## Host datastore", "",
             "What each team's vCluster may write into the host's datastore at most: every ConfigMap and Secret its "
             "namespace's quota allows, each at the cap the synced-objects policy holds copies to in keys and values, "
             "labels and annotations included (rule `object-size`, vcluster.resourceQuota.syncedObjectBytes), and "
             "every pod, Service, Endpoints, claim and EndpointSlice it allows with its labels and annotations at "
             "their cap (rule `metadata-size`), and every pod with the free text of its spec (env, commands, args, "
             "images, paths, ...) at theirs (rule `pod-size`, vcluster.resourceQuota.syncedPodTextBytes) and its status "
             "conditions at theirs (rule `pod-conditions`) and its tolerations, containers' ports and ConfigMap and "
             "Secret references at their counts (rules `tolerations`, `ports`, `object-references`) and the other "
             "entries of its lists at what they store beside their text (rule `pod-entry-size`) and its containers' "
             "and its own fields at their largest, every Service with its ports, selector and source ranges at theirs "
             "(rules `service-ports`, `service-size`) and every Endpoints and EndpointSlice with its endpoint ports at "
             "theirs (rules `endpoint-size`, `endpoint-text`), each entry at the most the API server stores of it "
             "(docs/security-object-sizes.md, Sizes).", ""]
    lines += table(["Team", "ConfigMaps", "Secrets", "Per-object cap", "Other synced objects", "Metadata cap", "Pods",
                    "Pod text cap", "Conditions cap", "Pod lists", "Service", "Endpoints", "EndpointSlice",
                    "Worst case"], rows)
    return lines + ["", f"Site total: **{mebibytes(total)}**; {verdict}.", ""]
