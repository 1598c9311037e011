"""Stack config: the queue keys (``organization``, ``teams[]`` and their ``resources``), declared and read."""

from __future__ import annotations

import math
from typing import Optional

from config.key_types import READ_AS_TEXT_BY_HELM, Boolean, Check, Integer, Number, Text, refuse_names
from config.dns_guarantee import dns_in_queue_units_text
from config.keys import REQUIRED, Block, Derived, Key, ListOf, Retired
from config.load_tenant_limits import DEFAULT_QUOTA
from config.load_vcluster import VCLUSTER, read_vcluster
from config.model import (
    ISOLATION_TIERS, SHARED, Isolation, Organization, QueueResource, QueueResources, Team, TenantResourceQuota,
    VClusterSettings,
)
from config.reader import Section
from config.team_alerting import TEAM_ALERTING, read_team_alerting
from config.tenant_budget import queue_budget
from config.vocabulary import KAI_RESERVED_QUEUES

QUEUE_ENTRY = Block(title="queue resource entry", intro="""\
An omitted field takes `-1` / `-1` / `1`. The program always renders all three resources with all
three fields, because KAI itself would read a missing limit as a cap of zero.""", keys=(
    Key("quota", Number(minimum=0, unlimited=True), QueueResource.quota, "Guaranteed share; `-1` means unlimited.",
        example="0.33"),
    Key("limit", Number(minimum=0, unlimited=True), QueueResource.limit, "Hard cap; `-1` means unlimited.",
        example="1", details="It must be ≥ `quota`, and it must be `-1` when `quota` is `-1`."),
    Key("overQuotaWeight", Number(minimum=0), QueueResource.over_quota_weight,
        "Weight for sharing surplus capacity beyond the quota.", example="2"),
))

def _cpu_memory_from_quota(quota: TenantResourceQuota) -> dict[str, QueueResource]:
    """KAI schedules every tenant pod, CPU pods included: by default a team's queue guarantees, and is capped
    at, the CPU and memory its workloads and its DNS may request in its namespace (the control plane is not
    scheduled by KAI), so the two never disagree."""
    if quota.cpu is None or quota.memory is None:
        return {}
    millicores, memory = queue_budget(quota)
    # Rounded up: a queue a fraction of a MB short of the namespace's quota would leave its last pod Pending.
    megabytes = math.ceil(memory / 1_000_000)
    return {"cpu": QueueResource(quota=millicores, limit=millicores),
            "memory": QueueResource(quota=megabytes, limit=megabytes)}


# What a team's omitted cpu and memory become at the default vcluster.resourceQuota, for the docs.
_DEFAULT_QUEUE = _cpu_memory_from_quota(DEFAULT_QUOTA)

QUEUE_RESOURCES = Block(title="queue resources", intro=f"""\
`organization.resources` and `teams[].resources` hold up to three entries, `gpu`, `cpu` and `memory`.
The units are KAI's, and `-1` means unlimited. Every tenant pod, CPU pods and the tenant's DNS
included, is scheduled by KAI in its team's queue, so a team's omitted `cpu` and `memory` follow what
its workloads may request (`vcluster.resourceQuota.cpu` / `.memory`) plus its DNS pod's requests: quota
and limit both equal that amount, weight `1` (the default {DEFAULT_QUOTA.cpu} CPU and {DEFAULT_QUOTA.memory}
become `cpu: {_DEFAULT_QUEUE['cpu'].quota:g}` and `memory: {_DEFAULT_QUEUE['memory'].quota:g}`). Queue and
ResourceQuota then never disagree. The organization's omitted resources become quota `-1`, limit
`-1`, weight `1`; a team's omitted `gpu` too. A written `cpu` or `memory` quota must hold the team's DNS pod
({dns_in_queue_units_text()}; the organization's, every team's): KAI runs that non-preemptible pod only
within quota.""", keys=(
    Key("gpu", QUEUE_ENTRY, {}, "GPUs, counted in devices; fractions are allowed (`0.33` is a third of a GPU).",
        example="{quota: 0.33, limit: 1}"),
    Key("cpu", QUEUE_ENTRY, {}, "CPU in millicores (`4000` is 4 cores).", example="{quota: 4000}"),
    Key("memory", QUEUE_ENTRY, {}, "Memory in MB, 10^6 bytes (`16000` is 16 GB).", example="{quota: 16000}"),
))

# Queues KAI creates on install: neither the organization nor a team may take their names.
NOT_A_KAI_QUEUE = refuse_names(KAI_RESERVED_QUEUES, "collides with a queue KAI creates on install",
                               "choose another name, e.g. ml-org or team-nlp")
# vCluster names a tenant's ConfigMaps on the host "<name>-x-<namespace>-x-<vclusterName>": with this ending
# one could pass for the ConfigMap KAI keeps a fractional pod's device list in.
VCLUSTER_NAME_LENGTH = 52
KAI_DEVICE_LIST_ENDING = Check(".*shared-gpu-i?[0-9]+", "ends like the name of a KAI device-list ConfigMap "
                               "(shared-gpu-<n>)", "choose a vCluster name that does not end in shared-gpu-<number>",
                               refuse=True)
# The vCluster chart names the control plane's Services after the release, and a Service name is a DNS-1035 label:
# with a name starting with a digit the API server refuses them and the tenant never starts.
SERVICE_NAME_START = Check("[a-z].*", "starts with a digit, but the vCluster chart names its Services after it and "
                           "a Service name must start with a letter (DNS-1035)",
                           "choose a vCluster name that starts with a letter")
# A derived vclusterName is not read by its type: the name it is cut from may pass where the cut does not.
VCLUSTER_NAME_CHECKS = (SERVICE_NAME_START, KAI_DEVICE_LIST_ENDING, READ_AS_TEXT_BY_HELM)

ORGANIZATION = Block(title="the parent queue", keys=(
    Key("name", Text(dns_label=True, checks=(NOT_A_KAI_QUEUE,)), REQUIRED, "Name of the org KAI queue.",
        example="ml-org",
        details="It can't be `default-queue` or `default-parent-queue`.", fix="set organization.name, e.g. ml-org"),
    Key("displayName", Text(), Derived("same as `name`"), "Queue `displayName`.", example="ML organization"),
    Key("priority", Integer(minimum=0), 100, "Queue `priority`.", example="100"),
    Key("resources", QUEUE_RESOURCES, Derived("all unlimited"), "The organization's share.",
        example="{gpu: {quota: 1, limit: -1, overQuotaWeight: 1}}"),
))

ISOLATION = Block(title="GPU isolation tier", intro="""\
How hard a team's share of the GPUs is; [the isolation tiers](isolation.md) compare what each tier
isolates, what hardware it needs and what it costs. The host's admission policy holds each team to its
tier (`[memory-limit]`, `[hami-core]`, `[mig-profile]`, `[whole-gpus]` rules).""", keys=(
    Key("tier", Text(choices=ISOLATION_TIERS), SHARED, "The team's isolation tier.", example="mig",
        details="`shared`: KAI fractions or time-slicing, no memory isolation. `memory-capped`: KAI fractions with "
                "a GPU memory limit enforced in the container by HAMi-core (KAI's `hamicore` plugins). `mig`: MIG "
                "slices of `migProfile` on a MIG-split pool. `exclusive`: whole GPUs only."),
    Key("migProfile", Text(form="MIG profile `<n>g.<m>gb`"), None, "The only MIG profile a `mig` team's pods may "
        "request.", example="1g.10gb", default_note="required for `mig`, refused otherwise",
        details="It must be a slice of the `migConfig` layout of the team's `nodePool`. The team's `resources.gpu` "
                "is counted in KAI's MIG units: a slice of `3g.40gb` costs 3.",
        fix="set it to a profile of the pool's MIG layout, e.g. 1g.10gb"),
    Key("nodePool", Text(dns_label=True), None, "GPU node pool (`cluster.eks.gpuNodeGroups[].name`) the team's pods "
        "are pinned to.", example="a100", default_note="every GPU pool; for `mig` the only MIG-split pool",
        details="Adds `gpu-tenancy/pool: <nodePool>` to the team's `vcluster.nodeLabels`, so vCluster syncs only that "
                "pool's nodes and pins every pod of the team there. A `gpu-tenancy/pool` in the team's own "
                "`vcluster.nodeLabels` naming another pool is refused; one in the stack's is a default it refines.",
        fix="set it to the name of one of cluster.eks.gpuNodeGroups"),
))

TEAM = Block(title="one entry per team", retired=(
    Retired("strict", "was retired: every pod a tenant's vCluster syncs, its DNS included, must now be scheduled by "
            "KAI in the team's queue, so there is nothing left to switch",
            "remove the key; see the pod admission rules (docs/security-admission.md)"),
), keys=(
    Key("name", Text(dns_label=True, checks=(NOT_A_KAI_QUEUE,)), REQUIRED,
        "Team name, unique; also the name of the team's leaf queue.",
        example="team-nlp", details="So it can't be a KAI reserved queue or equal to `organization.name`. Creation-only "
                                    "on a running site: the team's resources are named after it, so a new name "
                                    "removes the protected tenant and `pulumi up` stops (the plan diff says so).",
        fix="give the team a DNS-1123 name, e.g. team-nlp"),
    Key("displayName", Text(), Derived("same as `name`"), "Queue `displayName`.", example="NLP research"),
    Key("priority", Integer(minimum=0), 100, "Queue `priority`.", example="100",
        details="Surplus capacity goes by priority first, then by `overQuotaWeight`."),
    Key("resources", QUEUE_RESOURCES, Derived("gpu unlimited; cpu and memory from the team's "
                                              "`vcluster.resourceQuota`"),
        "The team's share.", example="{gpu: {quota: 0.33, limit: 1, overQuotaWeight: 1}}",
        details="In practice `gpu` is required whenever the org gpu quota is finite (see the rules)."),
    # The vCluster name is a Helm release name (at most 53 characters) and the name of the chart's StatefulSet,
    # whose controller labels each pod with "<name>-<revision hash of up to 10 characters>", at most 63 characters:
    # so at most 52 (tools/deployability/names.py).
    Key("vclusterName", Text(dns_label=True, max_length=VCLUSTER_NAME_LENGTH, checks=VCLUSTER_NAME_CHECKS),
        Derived(f"same as `name` (cut to {VCLUSTER_NAME_LENGTH} characters)"),
        "vCluster (Helm release) name, unique.", example="rag-legal",
        details=f"At most {VCLUSTER_NAME_LENGTH} characters: the vCluster's StatefulSet is named after it, and its "
                "controller labels each pod with the name and a revision hash, a label of at most 63 characters. It "
                "starts with a letter: the chart names its Services after it, and a Service name is a DNS-1035 label "
                "(a team whose name starts with a digit sets one). Creation-only on a running site: a new name "
                "replaces the team's protected release (and, with the default `namespace`, its namespace), so "
                "`pulumi up` stops."),
    Key("namespace", Text(dns_label=True), Derived("`vcluster-<vclusterName>` (cut to 63 characters)"),
        "Host namespace of the tenant, unique.", example="team-legal",
        details="This default matches what `vcluster create` would use. Creation-only on a running site: a new "
                "namespace replaces the team's protected namespace and release, so `pulumi up` stops."),
    Key("protect", Boolean(), True, "Pulumi `protect` on the team's namespace and vCluster release.",
        example="false", details="See [Data safety](operations-data.md#data-safety-and-decommissioning-a-team)."),
    Key("vcluster", VCLUSTER, Derived("the stack's `vcluster` settings"),
        "Per-team overrides, merged over the stack's `vcluster` block.", example="{resourceQuota: {pods: 10}}"),
    Key("isolation", ISOLATION, {}, "The team's GPU isolation tier; see [GPU isolation tier](#teamsisolation--gpu-isolation-tier).",
        example="{tier: mig, migProfile: 1g.10gb, nodePool: a100}"),
    Key("alerting", TEAM_ALERTING, {}, "The team's own alert receiver; see [the team's own alert receiver]"
        "(#teamsalerting--the-teams-own-alert-receiver).", example="{receiver: slack, slackChannel: '#team-nlp'}"),
))

TEAMS = ListOf(TEAM, empty=("no teams are defined", "add at least one team with a name and resources"))


def _queue_resources(section: Section, defaults: Optional[dict[str, QueueResource]] = None) -> QueueResources:
    """Read gpu/cpu/memory; a resource left out entirely takes its entry from ``defaults``."""
    resources = {}
    for name in section.block.names:
        if defaults and name in defaults and not section.has(name):
            resources[name] = defaults[name]
            continue
        entry = section.child(name)
        # A misspelt quota or limit is reported as unknown; its default must not add misleading follow-on problems
        # (here or in the cross-field rules, which skip a None).
        checked = not entry.unknown
        quota, limit, weight = (entry.read(field) if checked or entry.has(field) else None
                                for field in ("quota", "limit", "overQuotaWeight"))
        if checked and quota == -1 and limit not in (None, -1):
            entry.fail("limit", limit, "caps a queue whose quota is -1 (unlimited)",
                       "set limit to -1, or give quota a number no larger than the limit")
        elif checked and quota is not None and limit is not None and limit != -1 and limit < quota:
            entry.fail("limit", limit, f"is below the quota ({quota:g})",
                       "raise limit to at least the quota, or set it to -1 (unlimited)")
        resources[name] = QueueResource(quota, limit, weight)
    return QueueResources(**resources)


def read_organization(section: Section) -> Organization:
    name = section.read("name")
    return Organization(
        name=name,
        display_name=section.read("displayName", name or ""),
        priority=section.read("priority"),
        resources=_queue_resources(section.child("resources")),
    )


def read_team(section: Section, stack_vcluster: VClusterSettings) -> Team:
    name = section.read("name")
    vcluster_name = section.read("vclusterName", name[:VCLUSTER_NAME_LENGTH].rstrip("-") if name else name)
    vcluster = read_vcluster(section.child("vcluster"), stack_vcluster, team=True)
    return Team(
        name=name,
        display_name=section.read("displayName", name or ""),
        priority=section.read("priority"),
        resources=_queue_resources(section.child("resources"), _cpu_memory_from_quota(vcluster.resource_quota)),
        vcluster_name=vcluster_name,
        namespace=section.read("namespace", f"vcluster-{vcluster_name}"[:63].rstrip("-")),
        protect=section.read("protect"),
        vcluster=vcluster,
        isolation=_isolation(section.child("isolation")),
        alerting=read_team_alerting(section.child("alerting")),
    )


def _isolation(section: Section) -> Isolation:
    """The tier as written; config/isolation.py checks it against the pools, KAI and the quotas."""
    return Isolation(tier=section.read("tier"), mig_profile=section.read("migProfile"),
                     node_pool=section.read("nodePool"))
