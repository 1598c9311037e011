"""Stack config in, validated ``Platform`` out.

``load_platform`` reads the raw values of the ``gpu-tenancy:*`` keys (plain data as YAML/JSON
gives them), checks every rule the platform depends on and either returns the settings or
raises one ``ConfigError`` listing every problem. It registers nothing, so a bad config stops
``pulumi up`` before any resource exists.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Iterable, Mapping, Optional

from config.access_rules import access_warnings, resolve_access
from config.api_endpoint import api_endpoint_warnings, local_box_warnings
from config.capacity import GPU_EPSILON, known_gpu_capacity
from config.control_plane_egress import control_plane_egress_warnings
from config.cpu_memory_capacity import cpu_memory_warnings, organization_overcommit_warnings
from config.dns_guarantee import check_dns_fits_queues
from config.errors import ConfigError, ConfigIssue
from config.eks_support import eks_support_warnings
from config.gpu_pool_capacity import gpu_pool_warnings
from config.host_networking import check_host_port_load_balancers, check_service_ranges, networking_warnings
from config.hosts import HOST_KIND_FACTS, host_profile
from config.image_volumes import check_image_volumes
from config.isolation import check_isolation, isolation_warnings, pin_teams, with_isolation
from config.keys import REQUIRED, Block, Key
from config.load_balancer_tags import check_load_balancer_tags, load_balancer_tags
from config.load_host import CI, CLUSTER, read_ci, read_cluster
from config.load_operators import (GPU_OPERATOR, KAI_SCHEDULER, cdi_warnings, check_nodes_deliver_cdi_devices,
                                   read_gpu_operator, read_kai, shared_cluster_role_warnings)
from config.load_placement import check_placement, check_pool_labels, placement_warnings
from config.load_teams import ORGANIZATION, TEAMS, VCLUSTER_NAME_CHECKS, VCLUSTER_NAME_LENGTH, read_organization, \
    read_team
from config.mig_pools import time_sliced_mig_warnings
from config.mirror_registries import check_mirrors
from config.mirrors import MIRRORS, read_mirrors
from config.load_vcluster import DEFAULT_VCLUSTER, VCLUSTER, read_vcluster
from config.virtual_cluster import check_virtual_clusters
from config.model import Cluster, GpuOperator, Organization, Platform, Team
from config.load_observability import (
    check_observability_namespace, external_notes, observability_warnings, read_observability,
)
from config.observability import OBSERVABILITY, Observability
from config.observability_alerting import alerting_warnings
from config.observability_login import check_grafana_login, grafana_login_warnings
from config.reader import Reader
from config.review_notes import review_notes, time_sliced_keys
from config.synced_data import datastore_warnings
from config.system_pool_capacity import system_pool_warnings
from config.secrets import SECRET_KEYS, Secrets, secret_command
from config.snapshots import BACKUP, SECRETS as BACKUP_SECRETS, read_backup
from config.team_alerting import check_team_alerting, team_alerting_warnings
from config.vocabulary import (
    KAI_RESERVATION_NAMESPACE, NODE_PROFILE_LABEL, OTHER_NAMESPACES, POOL_LABEL, PROJECT, ROLE_LABEL, SYSTEM_NAMESPACES,
)

# The ``gpu-tenancy:*`` keys of a stack file, secrets aside (config/secrets.py).
STACK_CONFIG = Block(keys=(
    Key("cluster", CLUSTER, REQUIRED, "The host: its kind (microk8s, eks or kubeconfig) and that kind's settings."),
    Key("gpuOperator", GPU_OPERATOR, {}, "NVIDIA GPU Operator: who runs it, its version and the GPU sharing profiles."),
    Key("kaiScheduler", KAI_SCHEDULER, {}, "KAI Scheduler: its chart version and GPU sharing."),
    Key("organization", ORGANIZATION, REQUIRED, "The organization's KAI queue, parent of every team's queue."),
    Key("teams", TEAMS, REQUIRED, "One entry per team: its leaf queue, host namespace and vCluster."),
    Key("vcluster", VCLUSTER, {}, "vCluster settings of every tenant; a team's own vcluster block overrides them."),
    Key("ci", CI, {}, "Where CI reaches this site."),
    Key("observability", OBSERVABILITY, {},
        "GPU usage metrics, alerts, dashboards and KAI's time-aware fairness."),
    Key("mirrors", MIRRORS, {}, "Where the site pulls every image and chart the platform deploys from."),
    Key("backup", BACKUP, {}, "Scheduled snapshots of every team's virtual cluster to an S3 bucket.",
        default_note="none"),
))


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
    root = reader.section("", {key: value for key, value in raw.items() if key not in SECRET_KEYS}, STACK_CONFIG)

    cluster = read_cluster(root.child("cluster"), secrets)
    host = host_profile(cluster) if cluster is not None else None
    gpu_operator = read_gpu_operator(root.child("gpuOperator"), cluster, host)
    check_nodes_deliver_cdi_devices(reader, cluster, gpu_operator)
    kai = read_kai(root.child("kaiScheduler"))
    organization = read_organization(root.child("organization"))
    # Where tenant pods may run, and what their load balancers read, depend on the host kind (config/hosts.py).
    default_vcluster = DEFAULT_VCLUSTER if host is None else dataclasses.replace(
        DEFAULT_VCLUSTER, node_labels=dict(host.tenant_node_labels), services=dataclasses.replace(
            DEFAULT_VCLUSTER.services, load_balancer_annotations=host.load_balancer_annotations))
    stack_vcluster = read_vcluster(root.child("vcluster"), default_vcluster)
    teams = [read_team(team, stack_vcluster) for team in root.entries("teams")]
    observability = read_observability(root.child("observability"), secrets)
    ci = read_ci(root.child("ci"))
    mirrors = read_mirrors(root.child("mirrors"))
    backup = read_backup(root.child("backup"))
    if backup is not None:
        for name in BACKUP_SECRETS:
            secrets.require(name, "backup is set, and each team's snapshot job needs the store's access key")

    # Cross-field rules run on whatever was read, in the same pass: a value with a problem of its own is
    # None and the rules that need it skip it, so every problem is reported at once.
    _check_names(reader, organization, teams)
    platform_namespaces = {namespace: owner for namespace, owner in (
        (kai.namespace, "KAI Scheduler"), (KAI_RESERVATION_NAMESPACE, "KAI's GPU reservation pods"),
        (gpu_operator.namespace, "the GPU Operator")) if namespace is not None}
    _check_tenant_namespaces(reader, {
        **{name: "the cluster's system components" for name in SYSTEM_NAMESPACES}, **platform_namespaces}, teams)
    _check_host_dns_namespace(reader, cluster, teams)
    _check_org_quota(reader, organization, teams)
    check_dns_fits_queues(reader, organization, teams)
    check_observability_namespace(reader, observability, {
        **platform_namespaces, **{team.namespace: f"team {team.name}" for team in teams if team.namespace}})
    _check_node_group_profiles(reader, cluster)
    _check_layout(reader, cluster, gpu_operator)
    check_virtual_clusters(reader, stack_vcluster, teams, mirrors, kai.gpu_sharing)
    check_isolation(reader, cluster, gpu_operator, kai, teams)
    check_image_volumes(reader, cluster, teams)
    check_pool_labels(reader, cluster, teams, root.raw("teams"))
    teams = pin_teams(reader, teams, cluster, gpu_operator)
    check_placement(reader, host, teams, root.raw("teams"))
    teams = resolve_access(reader, cluster, teams)
    check_grafana_login(reader, observability.grafana_login, teams)
    _check_control_plane_metrics(reader, observability, cluster)
    check_team_alerting(reader, observability.prometheus, teams, secrets)
    check_mirrors(reader, mirrors, cluster, gpu_operator, observability, teams)
    check_load_balancer_tags(reader, cluster, teams)
    check_host_port_load_balancers(reader, cluster, teams)
    check_service_ranges(reader, cluster, teams)
    if reader.issues:
        raise ConfigError(reader.issues)
    gpu_operator, kai = with_isolation(gpu_operator, kai, cluster, teams)
    kai_chart, kai_repo = mirrors.chart("kai-scheduler", kai.chart, kai.repo)
    kai = dataclasses.replace(kai, image_registry=mirrors.registry(kai.image_registry), chart=kai_chart,
                              repo=kai_repo)

    teams = [dataclasses.replace(team, vcluster=dataclasses.replace(
        team.vcluster, storage_class=host.storage_class, api_server_port=host.api_server_port,
        api_server_addresses=host.api_server_addresses, untranslated_service_ranges=host.untranslated_service_ranges,
        kubernetes_service_addresses=host.kubernetes_service_addresses,
        host_dns=host.host_dns, mirrors=mirrors, gpu_sharing=kai.gpu_sharing, backup=backup,
        services=dataclasses.replace(team.vcluster.services,
                                     load_balancer_tags=load_balancer_tags(team, cluster, stack)))) for team in teams]
    platform = Platform(project=PROJECT, stack=stack, cluster=cluster, gpu_operator=gpu_operator,
                        kai_scheduler=kai, organization=organization, teams=tuple(teams), host=host, ci=ci,
                        observability=observability,
                        missing_secrets=tuple(secrets.missing), mirrors=mirrors)
    warnings = [f"{PROJECT}:{name} is not set: a placeholder stands in for it in this offline run. Set it "
                f"before pulumi up: {secret_command(name, stack)}" for name in secrets.missing]
    warnings += _warnings(platform) + cdi_warnings(cluster, gpu_operator) + isolation_warnings(platform) \
        + shared_cluster_role_warnings(cluster, gpu_operator) \
        + access_warnings(cluster, platform.teams) \
        + placement_warnings(platform) + observability_warnings(platform.observability) \
        + grafana_login_warnings(platform.observability.grafana_login, platform.teams, secrets.set) \
        + alerting_warnings(platform.observability.alerting, platform.observability.prometheus == "install",
                            secrets.set) \
        + team_alerting_warnings(platform.observability.prometheus, platform.teams, secrets.set) \
        + datastore_warnings(platform.cluster, platform.teams) + system_pool_warnings(platform) \
        + api_endpoint_warnings(platform.cluster, platform.ci) + local_box_warnings(platform.cluster, platform.ci)
    return Platform(**{**platform.__dict__, "warnings": tuple(warnings),
                       "notes": tuple(review_notes(platform) + external_notes(
                           platform.observability, platform.kai_scheduler.gpu_sharing, platform.gpu_operator.mode))})


# --- cross-field rules ------------------------------------------------------------------------


def _check_control_plane_metrics(reader: Reader, observability: Observability, cluster: Optional[Cluster]) -> None:
    """Control-plane scrapes only where the host kind can serve them (config/hosts.py)."""
    if observability.control_plane_metrics and cluster is not None \
            and not HOST_KIND_FACTS[cluster.kind].control_plane_metrics:
        reader.fail("observability.controlPlaneMetrics", True,
                    f"cluster.kind is {cluster.kind}: the host's kube-scheduler, kube-controller-manager, etcd and "
                    "kube-proxy serve no metrics the installed Prometheus can reach, so their down alerts would fire "
                    "for ever",
                    "remove observability.controlPlaneMetrics (it is for kubeconfig hosts that opened them)")


def _check_names(reader: Reader, organization: Organization, teams: list[Team]) -> None:
    seen: dict[str, dict[str, int]] = {"name": {}, "vclusterName": {}, "namespace": {}}
    for index, team in enumerate(teams):
        reported = len(reader.issues)
        # A name that fails came from the team's name (a vclusterName written out is checked by its type).
        for check in VCLUSTER_NAME_CHECKS if team.vcluster_name is not None else ():
            if not check.passes(team.vcluster_name):
                reader.fail(f"teams[{index}].vclusterName", team.vcluster_name,
                            f"(taken from teams[{index}].name) {check.problem}",
                            f"set teams[{index}].vclusterName: {check.fix}")
        key = f"teams[{index}].name"
        if team.name is not None and team.name == organization.name:
            reader.fail(key, team.name, "is also the organization's queue name",
                        "give the team a name different from organization.name")
        for field, value in (("name", team.name), ("vclusterName", team.vcluster_name),
                             ("namespace", team.namespace)):
            if value is None:
                continue
            first = seen[field].setdefault(value, index)
            # vclusterName and namespace default from the name: one clash is reported once.
            if first != index and len(reader.issues) == reported:
                cut = field == "vclusterName" and team.name is not None and len(team.name) > VCLUSTER_NAME_LENGTH \
                    and value == team.name[:VCLUSTER_NAME_LENGTH].rstrip("-")
                # Two long team names alike in their first 52 characters: the user set no vclusterName to see.
                reader.fail(f"teams[{index}].{field}", value,
                            (f"(teams[{index}].name cut to {VCLUSTER_NAME_LENGTH} characters) " if cut else "")
                            + f"is already used by teams[{first}]",
                            f"give every team its own {field}"
                            + (f" (at most {VCLUSTER_NAME_LENGTH} characters)" if cut else ""))


def _check_tenant_namespaces(reader: Reader, platform_namespaces: dict[str, str], teams: list[Team]) -> None:
    """KAI's pod webhook skips kube-system and its own namespace, and a shared system namespace would put the
    tenant's policy on other people's pods: a tenant lives in a namespace of its own."""
    for index, team in enumerate(teams):
        owner = platform_namespaces.get(team.namespace) if team.namespace is not None else None
        if owner is not None:
            reader.fail(f"teams[{index}].namespace", team.namespace, f"is the namespace of {owner}",
                        "give the team a namespace of its own, e.g. vcluster-<team>")


def _check_host_dns_namespace(reader: Reader, cluster: Optional[Cluster], teams: list[Team]) -> None:
    """Every team's control plane may reach the host DNS pods' namespace on DNS: it must not be a team's."""
    existing = cluster.kubeconfig if cluster is not None else None
    if existing is None or not existing.dns_stated:
        return
    owners = {team.namespace: team.name for team in teams if team.namespace is not None}
    if existing.dns.namespace in owners:
        reader.fail("cluster.kubeconfig.dns.namespace", existing.dns.namespace,
                    f"is team {owners[existing.dns.namespace]}'s namespace: every tenant's control plane and DNS "
                    "could reach its pods",
                    "name the namespace the host's DNS pods run in, e.g. kube-system")


def _check_org_quota(reader: Reader, organization: Organization, teams: list[Team]) -> None:
    org_quota = organization.resources.gpu.quota
    if org_quota is None or org_quota == -1:
        return
    for index, team in enumerate(teams):
        if team.resources.gpu.quota == -1:
            reader.fail(f"teams[{index}].resources.gpu.quota", -1,
                        f"an unlimited guarantee cannot fit in the organization's gpu quota ({org_quota:g})",
                        "set the team's gpu quota to a number, or organization.resources.gpu.quota to -1")
            return
    if any(team.resources.gpu.quota is None for team in teams):
        return  # a quota with a problem of its own: the sum is not known
    total = sum(team.resources.gpu.quota for team in teams)
    if total > org_quota + GPU_EPSILON:
        reader.fail("organization.resources.gpu.quota", org_quota,
                    f"the teams' gpu quotas add up to {total:g}, more than the organization's quota",
                    f"raise organization.resources.gpu.quota to at least {total:g} or lower team quotas")


def _check_node_group_profiles(reader: Reader, cluster: Optional[Cluster]) -> None:
    if cluster is None or cluster.eks is None:
        return
    for index, group in enumerate(cluster.eks.gpu_node_groups):
        if group.labels is None:
            continue
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


def _check_layout(reader: Reader, cluster: Optional[Cluster], gpu_operator: GpuOperator) -> None:
    """Layouts that validate field by field but cannot work on the host."""
    if cluster is None or cluster.eks is None:
        return
    if gpu_operator.mode == "install" and gpu_operator.driver_enabled:
        reader.fail("gpuOperator.driverEnabled", True,
                    "EKS GPU nodes use the AL2023 NVIDIA AMI, which ships the NVIDIA driver: the operator's driver "
                    "container would fight the installed one", "remove gpuOperator.driverEnabled (false on eks)")


def _warnings(platform: Platform) -> list[str]:
    warnings = time_sliced_mig_warnings(platform.cluster, platform.gpu_operator)
    time_sliced = time_sliced_keys(platform) if platform.kai_scheduler.gpu_sharing else []
    for _, group in time_sliced:
        if group is None:
            warnings.append(
                "gpuOperator.timeSlicing.defaultProfile is time-sliced while kaiScheduler.gpuSharing is on: KAI "
                f"counts each of the {platform.gpu_operator.time_slicing.replicas} time-slice replicas as a whole "
                "GPU and then splits them again with fractions, so one card can be promised several times over. "
                "Use the exclusive profile on nodes where KAI shares GPUs.")
        else:
            warnings.append(
                f"GPU node group {group} uses the time-sliced profile while kaiScheduler.gpuSharing is "
                "on: KAI fractions on top of time-slicing oversubscribe the same card.")
    existing = platform.cluster.kubeconfig
    if existing is not None:
        warnings += networking_warnings(existing.networking)
    if existing is not None and not existing.dns_stated and any(team.vcluster.network_policy
                                                                for team in platform.teams):
        warnings.append(
            "cluster.kubeconfig.dns is not set: the program assumes the host's DNS is the Service "
            "kube-system/kube-dns answered by pods k8s-app: kube-dns in kube-system on 53, and tenant control "
            "planes, DNS and snapshot pods may reach only those. On a host running NodeLocal DNSCache (DaemonSet "
            "node-local-dns) the node answers instead and tenants lose external name resolution: set "
            "cluster.kubeconfig.dns.nodeLocalAddresses (and the Service and pods where they differ).")
    for index, team in enumerate(platform.teams):
        if team.vcluster.pod_security == "privileged":
            warnings.append(
                f"teams[{index}] ({team.name}) enforces Pod Security level privileged: its tenant can run "
                "privileged or hostPath pods on the shared GPU nodes and reach every GPU there, whatever KAI "
                "allocated, host-network pods that no NetworkPolicy applies to, and volumes of any kind (NFS, "
                "iSCSI, CSI, ...) that the node mounts for them. Use baseline or restricted "
                "unless the team is trusted with the whole node.")
    capacity = known_gpu_capacity(platform.cluster, platform.gpu_operator.time_slicing)
    org_quota = platform.organization.resources.gpu.quota
    if capacity is not None and org_quota > capacity.kai_units + GPU_EPSILON:
        warnings.append(
            f"organization.resources.gpu.quota is {org_quota:g} but the host has at most {capacity.describe()} by "
            "its config: the guarantees cannot all be met at once.")
    promised = sum(team.resources.gpu.quota for team in platform.teams)
    if capacity is not None and org_quota == -1 and all(team.resources.gpu.quota != -1 for team in platform.teams) \
            and promised > capacity.kai_units + GPU_EPSILON:
        warnings.append(
            f"the teams' gpu quotas add up to {promised:g} but the host has at most {capacity.describe()} by its "
            "config: the guarantees cannot all be met at once.")
    warnings += organization_overcommit_warnings(platform) + cpu_memory_warnings(platform) + gpu_pool_warnings(platform)
    eks = platform.cluster.eks
    if eks is not None and eks.system_node_group.scaling.may_be_empty:
        warnings.append(
            "cluster.eks.systemNodeGroup.minSize is 0: if the group scales to zero, KAI, the queue-webhook probe "
            "and the vCluster control planes have no untainted node left. Keep minSize at 1 or more.")
    if eks is not None and platform.gpu_operator.mode == "install" and platform.gpu_operator.toolkit_enabled:
        warnings.append(
            "gpuOperator.toolkitEnabled is true on EKS: the AL2023 NVIDIA AMI already ships the container toolkit "
            "and makes nvidia containerd's default runtime; the operator's toolkit rewrites that config.")
    return warnings + control_plane_egress_warnings(platform) + eks_support_warnings(platform.cluster)
