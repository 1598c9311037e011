"""Stack config in, validated ``Platform`` out.

``load_platform`` reads the raw values of the ``gpu-tenancy:*`` keys (plain data as YAML/JSON
gives them), checks every rule the platform depends on and either returns the settings or
raises one ``ConfigError`` listing every problem. It registers nothing, so a bad config stops
``pulumi up`` before any resource exists.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Any, Iterable, Mapping, Optional

from config import versions
from config.capacity import known_gpu_capacity
from config.errors import MISSING, ConfigError, ConfigIssue
from config.hosts import HostProfile, host_profile
from config.model import (
    Cluster,
    ControlPlaneResources,
    GpuOperator,
    KaiScheduler,
    Organization,
    Platform,
    QueueResource,
    QueueResources,
    Team,
    TenantLimitRange,
    TenantResourceQuota,
    TimeSlicing,
    VClusterSettings,
)
from config.merge import deep_merge
from config.load_host import read_ci, read_cluster
from config.reader import Reader, Section, is_number, pinned_version
from config.sharing import PROFILES, TIME_SLICED
from config.vocabulary import (
    KAI_RESERVED_QUEUES, NODE_PROFILE_LABEL, POOL_LABEL, QUEUE_FIELDS, QUEUE_RESOURCES, ROLE_LABEL,
    SYSTEM_NAMESPACES,
)

PROJECT = "gpu-tenancy"

TOP_LEVEL_KEYS = ("cluster", "gpuOperator", "kaiScheduler", "organization", "teams", "vcluster", "ci")
SECRET_KEYS = ("sshPrivateKey", "kubeconfig")
# Where each secret's value usually comes from, for the command that sets it.
SECRET_SOURCES = {"sshPrivateKey": "~/.ssh/id_ed25519", "kubeconfig": "path/to/kubeconfig"}
# Config namespaces a stack may use besides the project's own: Pulumi's and the providers' the
# program runs. Any other namespace is a typo that would leave its keys silently unread.
OTHER_NAMESPACES = ("pulumi", "aws", "eks", "kubernetes", "command")
OPERATOR_MODES = ("install", "microk8s-addon", "external")
MICROK8S_ADDON_NAMESPACE = "gpu-operator-resources"

VCLUSTER_FIELDS = ("version", "nodeLabels", "syncRuntimeClasses", "enforceTolerations",
                   "controlPlaneResources", "resourceQuota", "limitRange", "networkPolicy", "podSecurity",
                   "extraValues")
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
TEAM_FIELDS = ("name", "displayName", "priority", "resources", "vclusterName", "namespace", "protect", "vcluster")
# Keys a stack may still carry from an older release: each names what replaced it.
RETIRED_TEAM_FIELDS = {
    "strict": ("was retired: every pod a tenant's vCluster syncs, its DNS included, must now be scheduled by KAI in "
               "the team's queue, so there is nothing left to switch",
               "remove the key; see the README's tenant security model"),
}
# The first KAI release whose pod webhook can neutralise NVIDIA_VISIBLE_DEVICES (global.blockNvidiaVisibleDevices).
KAI_MINIMUM_VERSION = (0, 16, 0)

_EPSILON = 1e-9

DEFAULT_VCLUSTER = VClusterSettings(
    version=versions.VCLUSTER_VERSION,
    node_labels={},
    sync_runtime_classes=True,
    enforce_tolerations=("nvidia.com/gpu:NoSchedule",),
    control_plane_resources=ControlPlaneResources(
        requests={"cpu": "200m", "memory": "256Mi"},
        limits={"memory": "2Gi"},
    ),
    resource_quota=TenantResourceQuota(cpu="16", memory="64Gi", pods=100, services=20,
                                       persistent_volume_claims=20),
    limit_range=TenantLimitRange(default_cpu="1", default_memory="1Gi",
                                 default_request_cpu="100m", default_request_memory="128Mi"),
    network_policy=True,
    pod_security="baseline",
    extra_values={},
)


def namespace_issues(keys: Iterable[str]) -> list[ConfigIssue]:
    """One issue per config key (``namespace:name``) whose namespace nothing reads."""
    known = (PROJECT, *OTHER_NAMESPACES)
    issues = []
    for key in sorted(keys):
        namespace, colon, name = key.partition(":")
        if colon and namespace not in known:
            close = difflib.get_close_matches(namespace, known, n=1, cutoff=0.6)
            fix = f"did you mean '{close[0]}:{name}'?" if close else \
                f"use the {PROJECT} namespace (or one of {', '.join(OTHER_NAMESPACES)}), or remove it"
            issues.append(ConfigIssue(key, "...", f"unknown config namespace '{namespace}': nothing reads this key",
                                      fix))
    return issues


def secret_command(name: str, stack: Optional[str] = None) -> str:
    """The command that sets one secret key, encrypted."""
    target = f" --stack {stack}" if stack else ""
    return f"pulumi config set --secret {PROJECT}:{name}{target} < {SECRET_SOURCES[name]}"


def load_platform(raw: Mapping[str, Any], *, secrets_set: Iterable[str] = (), stack: str = "dev",
                  placeholders: Iterable[str] = ()) -> Platform:
    """Validate raw ``gpu-tenancy:*`` config values (key without the project prefix -> value).

    ``secrets_set`` names the secret keys that are set; their values never reach this module.
    ``placeholders`` names unset secret keys that may stand in for a set one (offline plans, a new
    site's file before its secrets are set): a required one is then a warning naming the command
    that sets it, not an error, and is listed in ``Platform.missing_secrets``.
    """
    reader = Reader()
    secrets = Secrets(reader, set(secrets_set), set(placeholders))
    root = reader.section("", {key: value for key, value in raw.items() if key not in SECRET_KEYS},
                          TOP_LEVEL_KEYS)

    cluster = read_cluster(root.child("cluster", ("kind", "microk8s", "eks", "kubeconfig")), secrets)
    host = host_profile(cluster) if cluster is not None else None
    gpu_operator = _gpu_operator(root.child("gpuOperator", ("mode", "version", "namespace", "driverEnabled",
                                                            "toolkitEnabled", "timeSlicing")), cluster, host)
    kai = _kai(root.child("kaiScheduler", ("version", "gpuSharing")))
    organization = _organization(root.child("organization", ("name", "displayName", "priority", "resources")))
    # Where tenant pods may run depends on the host kind (config/hosts.py).
    default_vcluster = DEFAULT_VCLUSTER if host is None else \
        dataclasses.replace(DEFAULT_VCLUSTER, node_labels=dict(host.tenant_node_labels))
    stack_vcluster = _vcluster(root.child("vcluster", VCLUSTER_FIELDS), default_vcluster)
    teams = [_team(reader.section(path, _without_retired(reader, path, value), TEAM_FIELDS),
                   stack_vcluster or default_vcluster)
             for path, value in root.items("teams", required=True)]
    if root.has("teams") and isinstance(root.raw("teams"), list) and not root.raw("teams"):
        reader.fail("teams", [], "no teams are defined", "add at least one team with a name and resources")

    ci = read_ci(root.child("ci", ("runner",)))
    if reader.issues:
        raise ConfigError(reader.issues)

    _check_names(reader, organization, teams)
    _check_tenant_namespaces(reader, {
        **{name: "the cluster's system components" for name in SYSTEM_NAMESPACES},
        kai.namespace: "KAI Scheduler", gpu_operator.namespace: "the GPU Operator"}, teams)
    _check_org_quota(reader, organization, teams)
    _check_node_group_profiles(reader, cluster)
    _check_layout(reader, cluster, gpu_operator)
    if reader.issues:
        raise ConfigError(reader.issues)

    teams = [dataclasses.replace(team, vcluster=dataclasses.replace(
        team.vcluster, storage_class=host.storage_class, api_server_port=host.api_server_port)) for team in teams]
    platform = Platform(project=PROJECT, stack=stack, cluster=cluster, gpu_operator=gpu_operator,
                        kai_scheduler=kai, organization=organization, teams=tuple(teams), host=host, ci=ci,
                        missing_secrets=tuple(secrets.missing))
    warnings = [f"{PROJECT}:{name} is not set: a placeholder stands in for it in this offline run. Set it "
                f"before pulumi up: {secret_command(name, stack)}" for name in secrets.missing]
    return Platform(**{**platform.__dict__, "warnings": tuple(warnings + _warnings(platform)),
                       "notes": tuple(_notes(platform))})


class Secrets:
    """Which secret keys are set, and which required ones are missing."""

    def __init__(self, reader: Reader, set_: set[str], placeholders: set[str]):
        self.reader, self.set, self.placeholders = reader, set_, placeholders
        self.missing: list[str] = []

    def require(self, name: str, problem: str) -> None:
        if name in self.set:
            return
        if name in self.placeholders:
            self.missing.append(name)
            return
        self.reader.fail(name, MISSING, problem, f"run: {secret_command(name)}")


# --- GPU operator and KAI ---------------------------------------------------------------------


def _gpu_operator(section: Section, cluster: Optional[Cluster], host: Optional[HostProfile]) -> GpuOperator:
    mode = section.string("mode", "install", choices=OPERATOR_MODES)
    kind = cluster.kind if cluster else None
    if mode == "microk8s-addon" and kind not in (None, "microk8s"):
        section._fail("mode", mode, f"the MicroK8s addon only exists on a microk8s host, not on {kind}",
                      "use gpuOperator.mode install or external")
    addon_enabled = cluster is not None and cluster.microk8s is not None and cluster.microk8s.enable_nvidia_addon
    if addon_enabled and mode in ("install", "external"):
        section._fail("mode", mode, "cluster.microk8s.enableNvidiaAddon installs a GPU Operator too, and two "
                      "operators fight over the cluster-wide ClusterPolicy",
                      "set gpuOperator.mode to microk8s-addon, or turn enableNvidiaAddon off")
    if mode == "microk8s-addon":
        namespace = section.string("namespace", MICROK8S_ADDON_NAMESPACE)
        if namespace not in (None, MICROK8S_ADDON_NAMESPACE):
            section._fail("namespace", namespace, "the MicroK8s addon installs the operator in "
                          f"{MICROK8S_ADDON_NAMESPACE}", "remove gpuOperator.namespace")
    else:
        namespace = section.string("namespace", "gpu-operator", dns_label=True)
    time_slicing = section.child("timeSlicing", ("replicas", "defaultProfile", "configMapName"))
    version = section.string("version", versions.GPU_OPERATOR_VERSION)
    return GpuOperator(
        mode=mode,
        version=pinned_version(section, "version", version, prefix="v"),
        namespace=namespace,
        # The operator installs what the host's nodes do not already have (config/hosts.py).
        driver_enabled=section.boolean("driverEnabled", not (host and host.gpu_driver_preinstalled)),
        toolkit_enabled=section.boolean("toolkitEnabled", not (host and host.gpu_toolkit_preinstalled)),
        time_slicing=TimeSlicing(
            replicas=time_slicing.integer("replicas", 4, minimum=2, maximum=64,
                                          fix="set it to a whole number >= 2 (1 would mean no sharing: "
                                              "use the exclusive profile instead)"),
            default_profile=time_slicing.string("defaultProfile", "exclusive", choices=PROFILES),
            config_map_name=time_slicing.string("configMapName", "time-slicing-config", dns_label=True),
        ),
    )


def _kai(section: Section) -> KaiScheduler:
    version = pinned_version(section, "version", section.string("version", versions.KAI_VERSION), prefix="v")
    if version is not None and versions.release_numbers(version) < KAI_MINIMUM_VERSION:
        minimum = "v" + ".".join(map(str, KAI_MINIMUM_VERSION))
        section._fail("version", version,
                      f"KAI releases before {minimum} cannot blank NVIDIA_VISIBLE_DEVICES in containers that hold no "
                      "GPU, so a tenant could reach every GPU of a node",
                      f"pin {minimum} or later, e.g. {versions.KAI_VERSION}")
        version = None
    return KaiScheduler(version=version, gpu_sharing=section.boolean("gpuSharing", True))


# --- queues and teams -------------------------------------------------------------------------


def _queue_resources(section: Section, defaults: Optional[dict[str, QueueResource]] = None) -> QueueResources:
    """Read gpu/cpu/memory; a resource left out entirely takes its entry from ``defaults``."""
    resources = {}
    for name in QUEUE_RESOURCES:
        if defaults and name in defaults and not section.has(name):
            resources[name] = defaults[name]
            continue
        entry = section.child(name, QUEUE_FIELDS)
        quota = entry.number("quota", -1, minimum=0, allow_unlimited=True)
        limit = entry.number("limit", -1, minimum=0, allow_unlimited=True)
        weight = entry.number("overQuotaWeight", 1, minimum=0)
        # A misspelt quota or limit is reported as unknown; its default must not add a misleading second problem.
        checked = not entry.unknown
        if checked and quota == -1 and limit not in (None, -1):
            entry._fail("limit", limit, "caps a queue whose quota is -1 (unlimited)",
                        "set limit to -1, or give quota a number no larger than the limit")
        elif checked and quota is not None and limit is not None and limit != -1 and limit < quota:
            entry._fail("limit", limit, f"is below the quota ({quota:g})",
                        "raise limit to at least the quota, or set it to -1 (unlimited)")
        resources[name] = QueueResource(quota, limit, weight)
    return QueueResources(**resources)


def _organization(section: Section) -> Organization:
    name = section.string("name", dns_label=True, fix="set organization.name, e.g. ml-org")
    return Organization(
        name=name,
        display_name=section.string("displayName", name or ""),
        priority=section.integer("priority", 100, minimum=0),
        resources=_queue_resources(section.child("resources", QUEUE_RESOURCES)),
    )


def _without_retired(reader: Reader, path: str, value: object) -> object:
    """Report retired team keys once, then read the team as if they were absent."""
    if not isinstance(value, dict):
        return value
    for key, (problem, fix) in RETIRED_TEAM_FIELDS.items():
        if key in value:
            reader.fail(f"{path}.{key}", value[key], problem, fix)
    return {key: item for key, item in value.items() if key not in RETIRED_TEAM_FIELDS}


def _team(section: Section, stack_vcluster: VClusterSettings) -> Team:
    name = section.string("name", dns_label=True, fix="give the team a DNS-1123 name, e.g. team-nlp")
    # The vCluster name is a Helm release name: at most 53 characters.
    vcluster_name = section.string("vclusterName", name[:53].rstrip("-") if name else name, dns_label=True,
                                   max_length=53)
    vcluster = _vcluster(section.child("vcluster", VCLUSTER_FIELDS), stack_vcluster) or stack_vcluster
    return Team(
        name=name,
        display_name=section.string("displayName", name or ""),
        priority=section.integer("priority", 100, minimum=0),
        resources=_queue_resources(section.child("resources", QUEUE_RESOURCES),
                                   _cpu_memory_from_quota(vcluster.resource_quota)),
        vcluster_name=vcluster_name,
        namespace=section.string("namespace", f"vcluster-{vcluster_name}"[:63].rstrip("-"), dns_label=True),
        protect=section.boolean("protect", True),
        vcluster=vcluster,
    )


def _cpu_memory_from_quota(quota: TenantResourceQuota) -> dict[str, QueueResource]:
    """KAI schedules every tenant pod, CPU pods included: by default a team's queue guarantees, and is capped
    at, the CPU and memory its namespace's ResourceQuota allows, so the two never disagree."""
    if quota.cpu is None or quota.memory is None:
        return {}
    millicores = quantity_value(quota.cpu) * 1000
    megabytes = quantity_value(quota.memory) / 1_000_000
    return {"cpu": QueueResource(quota=round(millicores), limit=round(millicores)),
            "memory": QueueResource(quota=int(megabytes), limit=int(megabytes))}


def _vcluster(section: Section, base: VClusterSettings) -> VClusterSettings:
    """Read a ``vcluster`` block; every key left out keeps its value from ``base``."""
    version = pinned_version(section, "version", section.string("version", base.version), prefix="")
    resources = section.child("controlPlaneResources", ("requests", "limits"))
    quota = section.child("resourceQuota", ("cpu", "memory", "pods", "services", "persistentVolumeClaims"))
    limits = section.child("limitRange", ("defaultCpu", "defaultMemory", "defaultRequestCpu", "defaultRequestMemory"))
    base_quota, base_limits = base.resource_quota, base.limit_range
    extra = section.mapping("extraValues", {})
    return VClusterSettings(
        version=version,
        node_labels=section.string_map("nodeLabels", base.node_labels),
        sync_runtime_classes=section.boolean("syncRuntimeClasses", base.sync_runtime_classes),
        enforce_tolerations=section.string_list("enforceTolerations", base.enforce_tolerations),
        control_plane_resources=ControlPlaneResources(
            requests={**base.control_plane_resources.requests, **(resources.string_map("requests", {}) or {})},
            limits={**base.control_plane_resources.limits, **(resources.string_map("limits", {}) or {})},
        ),
        resource_quota=TenantResourceQuota(
            cpu=_quantity(quota, "cpu", base_quota.cpu),
            memory=_quantity(quota, "memory", base_quota.memory),
            pods=quota.integer("pods", base_quota.pods, minimum=1),
            services=quota.integer("services", base_quota.services, minimum=0),
            persistent_volume_claims=quota.integer("persistentVolumeClaims", base_quota.persistent_volume_claims,
                                                   minimum=0),
        ),
        limit_range=TenantLimitRange(
            default_cpu=_quantity(limits, "defaultCpu", base_limits.default_cpu),
            default_memory=_quantity(limits, "defaultMemory", base_limits.default_memory),
            default_request_cpu=_quantity(limits, "defaultRequestCpu", base_limits.default_request_cpu),
            default_request_memory=_quantity(limits, "defaultRequestMemory", base_limits.default_request_memory),
        ),
        network_policy=section.boolean("networkPolicy", base.network_policy),
        pod_security=section.string("podSecurity", base.pod_security, choices=POD_SECURITY_LEVELS),
        extra_values=deep_merge(base.extra_values, extra or {}),
    )


_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_QUANTITY_FACTORS = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
                     "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}


def quantity_value(quantity: str) -> float:
    """A validated Kubernetes quantity (``500m``, ``16``, ``64Gi``) as a plain number of base units."""
    match = _QUANTITY.fullmatch(quantity)
    assert match is not None, quantity
    suffix = match.group(2) or ""
    return float(quantity[:len(quantity) - len(suffix)]) * _QUANTITY_FACTORS[suffix]


def _quantity(section: Section, name: str, default: str) -> Optional[str]:
    section._declare(name, {"type": ["string", "number"], "pattern": _QUANTITY.pattern})
    value = section.raw(name)
    if is_number(value) and value >= 0:
        value = f"{value:g}"
    elif value is MISSING:
        return default
    if not isinstance(value, str) or not _QUANTITY.fullmatch(value):
        section._fail(name, value, "is not a Kubernetes quantity", "use a value such as 500m, 4, 512Mi or 16Gi")
        return None
    return value


# --- cross-field rules ------------------------------------------------------------------------


def _check_names(reader: Reader, organization: Organization, teams: list[Team]) -> None:
    if organization.name in KAI_RESERVED_QUEUES:
        reader.fail("organization.name", organization.name, "collides with a queue KAI creates on install",
                    "choose another name, e.g. ml-org")
    seen: dict[str, dict[str, int]] = {"name": {}, "vclusterName": {}, "namespace": {}}
    for index, team in enumerate(teams):
        reported = len(reader.issues)
        key = f"teams[{index}].name"
        if team.name in KAI_RESERVED_QUEUES:
            reader.fail(key, team.name, "collides with a queue KAI creates on install",
                        "choose another team name")
        if team.name == organization.name:
            reader.fail(key, team.name, "is also the organization's queue name",
                        "give the team a name different from organization.name")
        for field, value in (("name", team.name), ("vclusterName", team.vcluster_name),
                             ("namespace", team.namespace)):
            first = seen[field].setdefault(value, index)
            # vclusterName and namespace default from the name: one clash is reported once.
            if first != index and len(reader.issues) == reported:
                reader.fail(f"teams[{index}].{field}", value, f"is already used by teams[{first}]",
                            f"give every team its own {field}")


def _check_tenant_namespaces(reader: Reader, platform_namespaces: dict[str, str], teams: list[Team]) -> None:
    """KAI's pod webhook skips kube-system and its own namespace, and a shared system namespace would put the
    tenant's policy on other people's pods: a tenant lives in a namespace of its own."""
    for index, team in enumerate(teams):
        owner = platform_namespaces.get(team.namespace)
        if owner is not None:
            reader.fail(f"teams[{index}].namespace", team.namespace, f"is the namespace of {owner}",
                        "give the team a namespace of its own, e.g. vcluster-<team>")


def _check_org_quota(reader: Reader, organization: Organization, teams: list[Team]) -> None:
    org_quota = organization.resources.gpu.quota
    if org_quota == -1:
        return
    for index, team in enumerate(teams):
        if team.resources.gpu.quota == -1:
            reader.fail(f"teams[{index}].resources.gpu.quota", -1,
                        f"an unlimited guarantee cannot fit in the organization's gpu quota ({org_quota:g})",
                        "set the team's gpu quota to a number, or organization.resources.gpu.quota to -1")
            return
    total = sum(team.resources.gpu.quota for team in teams)
    if total > org_quota + _EPSILON:
        reader.fail("organization.resources.gpu.quota", org_quota,
                    f"the teams' gpu quotas add up to {total:g}, more than the organization's quota",
                    f"raise organization.resources.gpu.quota to at least {total:g} or lower team quotas")


def _check_node_group_profiles(reader: Reader, cluster: Cluster) -> None:
    if cluster.eks is None:
        return
    for index, group in enumerate(cluster.eks.gpu_node_groups):
        if NODE_PROFILE_LABEL in group.labels:
            reader.fail(f"cluster.eks.gpuNodeGroups[{index}].labels", group.labels,
                        "sets the device-plugin config label by hand", "use sharingProfile instead")
        if POOL_LABEL in group.labels:
            reader.fail(f"cluster.eks.gpuNodeGroups[{index}].labels", group.labels,
                        f"sets {POOL_LABEL}, which the program sets to the node group's name",
                        f"remove {POOL_LABEL} from labels (tenants select the pool by it)")
        if ROLE_LABEL in group.labels:
            reader.fail(f"cluster.eks.gpuNodeGroups[{index}].labels", group.labels,
                        f"sets {ROLE_LABEL}, which the program sets to gpu on every GPU node group",
                        f"remove {ROLE_LABEL} from labels (tenants select GPU nodes by it)")


def _check_layout(reader: Reader, cluster: Cluster, gpu_operator: GpuOperator) -> None:
    """Layouts that validate field by field but cannot work on the host."""
    if cluster.eks is None:
        return
    if cluster.eks.system_node_group.scaling.desired_size == 0:
        reader.fail("cluster.eks.systemNodeGroup.desiredSize", 0,
                    "the system node group holds the only untainted nodes: KAI, the queue-webhook probe Job and "
                    "every vCluster control plane would have nowhere to run",
                    "set desiredSize (and minSize) to at least 1")
    if gpu_operator.mode == "install" and gpu_operator.driver_enabled:
        reader.fail("gpuOperator.driverEnabled", True,
                    "EKS GPU nodes use the AL2023 NVIDIA AMI, which ships the NVIDIA driver: the operator's driver "
                    "container would fight the installed one", "remove gpuOperator.driverEnabled (false on eks)")


def _notes(platform: Platform) -> list[str]:
    """Information for the reviewer: not wrong, but maybe not what was meant."""
    capacity = known_gpu_capacity(platform.cluster)
    guaranteed = sum(max(team.resources.gpu.quota, 0) for team in platform.teams)
    if capacity and all(team.resources.gpu.quota != -1 for team in platform.teams) \
            and capacity - guaranteed >= 0.5:
        return [f"{capacity - guaranteed:g} of {capacity:g} GPU(s) are guaranteed to no team (the teams' gpu quotas "
                f"add up to {guaranteed:g}): teams only get them over quota, by priority and overQuotaWeight."]
    return []


def _warnings(platform: Platform) -> list[str]:
    warnings = []
    time_slicing = platform.gpu_operator.time_slicing
    if platform.kai_scheduler.gpu_sharing and time_slicing.default_profile == TIME_SLICED:
        warnings.append(
            "gpuOperator.timeSlicing.defaultProfile is time-sliced while kaiScheduler.gpuSharing is on: KAI "
            f"counts each of the {time_slicing.replicas} time-slice replicas as a whole GPU and then splits "
            "them again with fractions, so one card can be promised several times over. Use the exclusive "
            "profile on nodes where KAI shares GPUs.")
    if platform.cluster.eks is not None and platform.kai_scheduler.gpu_sharing:
        for group in platform.cluster.eks.gpu_node_groups:
            if group.sharing_profile == TIME_SLICED:
                warnings.append(
                    f"GPU node group {group.name} uses the time-sliced profile while kaiScheduler.gpuSharing is "
                    "on: KAI fractions on top of time-slicing oversubscribe the same card.")
    for index, team in enumerate(platform.teams):
        if team.vcluster.pod_security == "privileged":
            warnings.append(
                f"teams[{index}] ({team.name}) enforces Pod Security level privileged: its tenant can run "
                "privileged or hostPath pods on the shared GPU nodes and reach every GPU there, whatever KAI "
                "allocated. Use baseline or restricted unless the team is trusted with the whole node.")
    capacity = known_gpu_capacity(platform.cluster)
    org_quota = platform.organization.resources.gpu.quota
    if capacity is not None and org_quota > capacity + _EPSILON:
        warnings.append(
            f"organization.resources.gpu.quota is {org_quota:g} but the host has at most {capacity:g} GPU(s) by "
            "its config: the guarantees cannot all be met at once.")
    promised = sum(team.resources.gpu.quota for team in platform.teams)
    if capacity is not None and org_quota == -1 and all(team.resources.gpu.quota != -1 for team in platform.teams) \
            and promised > capacity + _EPSILON:
        warnings.append(
            f"the teams' gpu quotas add up to {promised:g} but the host has at most {capacity:g} GPU(s) by its "
            "config: the guarantees cannot all be met at once.")
    eks = platform.cluster.eks
    if eks is not None and eks.system_node_group.scaling.min_size == 0:
        warnings.append(
            "cluster.eks.systemNodeGroup.minSize is 0: if the group scales to zero, KAI, the queue-webhook probe "
            "and the vCluster control planes have no untainted node left. Keep minSize at 1 or more.")
    if eks is not None and platform.gpu_operator.mode == "install" and platform.gpu_operator.toolkit_enabled:
        warnings.append(
            "gpuOperator.toolkitEnabled is true on EKS: the AL2023 NVIDIA AMI already ships the container toolkit "
            "and makes nvidia containerd's default runtime; the operator's toolkit rewrites that config.")
    return warnings
