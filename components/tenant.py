"""One team's tenant cluster: a host namespace and a vCluster release in it.

The vCluster keeps its state (embedded SQLite) in that namespace, so both the namespace and
the release are protected by default: removing a team from config stops ``pulumi up`` with
Pulumi's protected-resource error instead of deleting the team's control plane.

vCluster writes the tenant's kubeconfig Secret (``vc-<name>``) from a background task after its
controllers start, later than the readiness Helm waits for; a Job waits for that Secret before
the program reads it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.admission import TenantAdmission, TenantAdmissionArgs, policy_name
from components.pod_size_admission import PodSizeAdmission, namespace_annotations
from components.isolation_admission import isolation_admission, isolation_outputs
from components.synced_objects_admission import (
    SyncedObjectsAdmission, SyncedObjectsAdmissionArgs, synced_objects_policy_name,
)
from components.tenant_access import TeamAccess, TenantAccessArgs, with_access
from components.tenant_backup import backup_resources
from components.tenant_dns import coredns_manifests
from components.tenant_network import tenant_network_policies
from components.virtual_defaults import virtual_defaults_values
from components.tenant_quota import policy_values
from components.kubernetes_resources import JOB, NAMESPACE, NETWORK_POLICY, HelmRelease, KubernetesObject
from components.kubectl_job import (
    HOME_VOLUME, POD_SECURITY_CONTEXT, job_identity, kubectl_container, wait_for_create_args,
)
from config import versions
from config.certificates import client_certificate_expiry
from config.merge import deep_merge
from config.vcluster_images import image_values
from config.model import Team, VClusterSettings
from config.tenant_budget import team_objects
from config.vocabulary import HELM_MAX_HISTORY, MANAGED_BY, POD_SECURITY_LABEL, TEAM_LABEL, TENANT_COMPONENT

RELEASE_TIMEOUT_SECONDS = 900
# Non-root identity of a restricted tenant's control plane (and owner of its data volume).
CONTROL_PLANE_USER = 12345
# Each pod attempt waits this long for vc-<name>; two attempts before the Job fails.
KUBECONFIG_WAIT_SECONDS = 300
KUBECONFIG_WAIT_ATTEMPTS = 2


@dataclass
class TenantClusterArgs:
    team: Team
    provider: k8s.Provider
    queue: pulumi.Resource
    # The host cluster DNS Service's IP, where the tenant's DNS forwards (components/tenant_dns.py).
    cluster_dns: pulumi.Input[str]
    # The node ports of the site's vCluster endpoints, which no team's Service may take.
    endpoint_node_ports: Sequence[int]
    # The node ports the host's nodes pull images from, which no team's Service may take either.
    trusted_node_ports: Sequence[int]
    # The site's kubectl (config/model.py Cluster.kubectl_image), which runs the kubeconfig wait.
    kubectl_image: str
    # The host policy judging every team's pod sizes (components/pod_size_admission.py).
    pod_size_admission: PodSizeAdmission
    # What the host must have before a control plane can start (e.g. its default StorageClass).
    prerequisites: Sequence[pulumi.Resource] = ()
    # The backup bucket's access key ID and secret (the secrets of config/snapshots.py), with team.vcluster.backup.
    backup_credentials: Sequence[pulumi.Input[str]] = ()


def host_values(settings: VClusterSettings) -> dict:
    """vCluster values the host kind needs (config/hosts.py): a volume claim class that exists. (The control plane's
    egress to the host API server's port is components/tenant_network.py's.)"""
    if not settings.storage_class:
        return {}
    return {"controlPlane": {"statefulSet": {"persistence": {"volumeClaim": {"storageClass": settings.storage_class}}}}}


def vcluster_values(team: Team, host_dns: str) -> dict:
    """Helm values of the team's vCluster release (checked against the chart's schema in tests);
    ``host_dns`` is the host cluster DNS Service's IP."""
    settings = team.vcluster
    selector = {"labels": dict(settings.node_labels)} if settings.node_labels else {"all": True}
    values = {
        # KAI's pod-grouper follows owner references to the top owner; vCluster's default owner (a
        # host Service) would hide the real Job/Deployment and its queue label.
        "experimental": {"syncSettings": {"setOwner": False}},
        # Both kubelet proxies off, so the chart grants the syncer no nodes/proxy, nodes/stats or nodes/metrics on
        # the host. vCluster's API proxy forwards a tenant's node-proxy requests to the host with the syncer's own
        # credentials and only a suffix match on the path in between (pkg/server/filters/metrics.go): dot segments
        # sent percent-encoded after one of the tenant's own containerLogs paths reach any kubelet path of any
        # node (every pod's spec, every team's logs), and a path ending in /healthz is forwarded unfiltered. With
        # no grant the host API server refuses them all. byIP would also create a host Service per node.
        "networking": {"advanced": {"proxyKubelets": {"byIP": False, "byHostname": False}}},
        "sync": {
            "fromHost": {
                # The node's status.images lists every image on the node with its digest: other teams' private
                # images, which a pod could then start from the node's cache (without vcluster.alwaysPullImages).
                "nodes": {"enabled": True, "selector": selector, "clearImageStatus": True},
                "runtimeClasses": {"enabled": settings.sync_runtime_classes},
            },
            "toHost": {"pods": {"enforceTolerations": list(settings.enforce_tolerations)}},
        },
        "controlPlane": {
            # No backingStore other than embedded SQLite: embedded etcd and external databases are
            # vCluster Pro features.
            "backingStore": {"database": {"embedded": {"enabled": True}}},
            "statefulSet": {"resources": {
                "requests": dict(settings.control_plane_resources.requests),
                "limits": dict(settings.control_plane_resources.limits),
            }},
            # The tenant's DNS pods go through KAI in the team's queue like every other synced pod.
            "coredns": {"overwriteManifests": coredns_manifests(team, host_dns)},
        },
        "policies": {
            # GPU shares are KAI's job (fractional pods request no nvidia.com/gpu); quotas bound
            # CPU, memory and object counts, with nothing left to the chart's defaults.
            **policy_values(settings),
            # The program renders the namespace's NetworkPolicies (components/tenant_network.py): vCluster's own
            # open the control plane's egress to every address on 443, 8443 and 6443, and values cannot narrow it.
            "networkPolicy": {"enabled": False},
        },
    }
    if versions.release_order(settings.version) < versions.release_order(versions.VCLUSTER_WITHOUT_SNAPSHOT_RULES):
        # Such a chart grants the syncer, by default, writes on VolumeSnapshots and the cluster-wide
        # VolumeSnapshotContents (for volume snapshots the program never takes), which no host policy checks: a
        # VolumeSnapshotContent can name any snapshot in the storage backend. Later charts refuse the value.
        values["rbac"] = {"enableVolumeSnapshotRules": {"enabled": False}}
    values = deep_merge(values, host_values(settings))
    values = deep_merge(values, image_values(settings))
    # Every pod inside gets KAI's scheduler and the team's queue; bad pods fail at kubectl apply.
    values = deep_merge(values, virtual_defaults_values(team))
    if settings.pod_security == "restricted":
        values = deep_merge(values, restricted_control_plane_values())
    values = with_access(values, team)
    return deep_merge(values, without_network_policy(settings.extra_values))


def without_network_policy(extra_values: dict) -> dict:
    """The site's extraValues without ``policies.networkPolicy``, which components/tenant_network.py applies to the
    program's policies (the chart's own stay off)."""
    policies = {key: value for key, value in (extra_values.get("policies") or {}).items() if key != "networkPolicy"}
    rest = {key: value for key, value in extra_values.items() if key != "policies"}
    return {**rest, "policies": policies} if policies else rest


def restricted_control_plane_values() -> dict:
    """The control plane runs as root by default; the restricted Pod Security level refuses that pod.

    vCluster runs unprivileged when told to: a non-root user on the syncer and the distro init
    container, the data volume group-owned by that user, no capabilities, the runtime's seccomp profile.
    """
    container = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": CONTROL_PLANE_USER,
                 "runAsGroup": CONTROL_PLANE_USER, "capabilities": {"drop": ["ALL"]},
                 "seccompProfile": {"type": "RuntimeDefault"}}
    return {"controlPlane": {
        "statefulSet": {"security": {
            "podSecurityContext": {"runAsNonRoot": True, "fsGroup": CONTROL_PLANE_USER,
                                   "seccompProfile": {"type": "RuntimeDefault"}},
            "containerSecurityContext": container}},
        "distro": {"k8s": {"securityContext": dict(container)}},
    }}


def connect_command(team: Team) -> str:
    return f"vcluster connect {team.vcluster_name} --namespace {team.namespace}"


class TenantCluster(pulumi.ComponentResource):
    namespace: KubernetesObject
    admission: TenantAdmission
    synced_objects_admission: SyncedObjectsAdmission
    network_policies: list[KubernetesObject]
    release: HelmRelease
    kubeconfig_ready: KubernetesObject
    # The scheduled snapshots' options Secret, identity and CronJob (components/tenant_backup.py); none without.
    backup: list[pulumi.Resource]
    kubeconfig: pulumi.Output[str]
    # When the admin kubeconfig's client certificate ends (None if it signs in otherwise): public, unlike the key.
    kubeconfig_expiry: pulumi.Output[Optional[str]]
    # Per-team OIDC kubeconfig without secrets (None without OIDC).
    member_kubeconfig: Optional[pulumi.Output[str]]
    connect_command: str

    def __init__(self, name: str, args: TenantClusterArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TENANT_COMPONENT, name, None, opts)
        team = args.team
        protect = team.protect
        self.connect_command = connect_command(team)

        self.namespace = KubernetesObject(
            f"{name}-namespace", NAMESPACE,
            metadata={"name": team.namespace, "labels": {
                **MANAGED_BY,
                TEAM_LABEL: team.name,
                # Synced pods run on the shared nodes: a tenant's cluster-admin must not buy it
                # privileged or host-path pods there.
                POD_SECURITY_LABEL: team.vcluster.pod_security,
            }, "annotations": namespace_annotations(team)},
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, protect=protect),
        )
        # The admission policy is in place before the vCluster can sync its first pod.
        self.admission = TenantAdmission(
            f"{name}-admission",
            TenantAdmissionArgs(team=team, provider=args.provider,
                                prerequisites=[self.namespace, *args.pod_size_admission.judging(team)]),
            opts=pulumi.ResourceOptions(parent=self))
        self.synced_objects_admission = SyncedObjectsAdmission(
            f"{name}-synced-objects-admission",
            SyncedObjectsAdmissionArgs(team=team, provider=args.provider, cluster_dns=args.cluster_dns,
                                       endpoint_node_ports=args.endpoint_node_ports,
                                       trusted_node_ports=args.trusted_node_ports),
            opts=pulumi.ResourceOptions(parent=self))
        tier_admission = isolation_admission(name, team, args.provider, self)
        self.access = TeamAccess(f"{name}-access", TenantAccessArgs(team, args.provider, self.namespace), self)
        # In place before the release: on a site upgraded from vCluster's own policies, Helm removes those only
        # after these isolate the namespace.
        self.network_policies = [
            KubernetesObject(
                f"{name}-{role}-network-policy", NETWORK_POLICY, metadata=policy["metadata"], spec=policy["spec"],
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[self.namespace]))
            for role, policy in tenant_network_policies(team).items()]
        chart, repo = team.vcluster.mirrors.chart("vcluster", versions.VCLUSTER_CHART, versions.VCLUSTER_REPO)
        self.release = HelmRelease(
            f"{name}-vcluster",
            name=team.vcluster_name,
            chart=chart,
            version=team.vcluster.version,
            repository_opts={"repo": repo} if repo else None,
            namespace=self.namespace.metadata["name"],
            values=pulumi.Output.from_input(args.cluster_dns).apply(lambda host_dns: vcluster_values(team, host_dns)),
            atomic=True,
            max_history=HELM_MAX_HISTORY,
            cleanup_on_fail=True,
            timeout=RELEASE_TIMEOUT_SECONDS,
            # The tenant depends on its queue, so a removed team loses its queue only after its
            # control plane is gone.
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, protect=protect,
                                        depends_on=[args.queue, self.admission, self.synced_objects_admission,
                                                    *tier_admission, *args.prerequisites,
                                                    *self.access.prerequisites, *self.network_policies]),
        )
        self.kubeconfig_ready = self._wait_for_kubeconfig(name, team, args.provider, args.kubectl_image)
        self.backup = backup_resources(name, team, args.backup_credentials, args.kubectl_image, args.provider, self,
                                       self.release)
        kubeconfig_secret = k8s.core.v1.Secret.get(
            f"{name}-kubeconfig",
            # The id is known only once the wait Job completed: the read cannot run before it.
            pulumi.Output.all(self.release.status, self.kubeconfig_ready.id).apply(
                lambda _: f"{team.namespace}/{kubeconfig_secret_name(team)}"),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[self.kubeconfig_ready]),
        )
        self.kubeconfig = self.access.admin_kubeconfig(
            kubeconfig_secret.data.apply(lambda data: base64.b64decode((data or {}).get("config", "")).decode()))
        self.member_kubeconfig = self.access.member_kubeconfig(self.kubeconfig)
        self.kubeconfig_expiry = pulumi.Output.unsecret(self.kubeconfig.apply(client_certificate_expiry))
        self.register_outputs({
            "team": team.name,
            "namespace": team.namespace,
            "queue": team.queue_name,
            "admissionPolicy": policy_name(team),
            "syncedObjectsPolicy": synced_objects_policy_name(team),
            # What the team's own workloads were promised (the namespace's quota adds its control plane and DNS).
            "workloadQuota": workload_quota(team.vcluster),
            "isolation": isolation_outputs(team),
            "connectCommand": self.connect_command,
            "kubeconfig": self.kubeconfig,
            "kubeconfigExpiry": self.kubeconfig_expiry,
            **self.access.outputs(),
        })

    def _wait_for_kubeconfig(self, name: str, team: Team, provider: k8s.Provider,
                             kubectl_image: str) -> KubernetesObject:
        """A Job that ends once ``vc-<name>`` exists; it may read that one Secret and nothing else."""
        secret = kubeconfig_secret_name(team)
        job_name = f"{secret}-wait"[:63].rstrip("-")
        labels = {**MANAGED_BY, "app.kubernetes.io/name": "kubeconfig-wait"}
        metadata = {"name": job_name, "namespace": team.namespace, "labels": labels}
        after_release = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.release])
        identity = job_identity(f"{name}-kubeconfig-wait", metadata, [
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret],
             "verbs": ["get", "list", "watch"]}], cluster_wide=False, opts=after_release)
        return KubernetesObject(
            f"{name}-kubeconfig-wait", JOB,
            metadata=metadata,
            spec={
                "backoffLimit": KUBECONFIG_WAIT_ATTEMPTS - 1,
                "activeDeadlineSeconds": KUBECONFIG_WAIT_SECONDS * KUBECONFIG_WAIT_ATTEMPTS + 120,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "restartPolicy": "Never",
                        "serviceAccountName": job_name,
                        "securityContext": POD_SECURITY_CONTEXT,
                        "containers": [kubectl_container("wait", kubectl_image, wait_for_create_args(
                            "secrets", secret, KUBECONFIG_WAIT_SECONDS, namespace=team.namespace))],
                        "volumes": [HOME_VOLUME],
                    },
                },
            },
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.release, *identity],
                                        custom_timeouts=pulumi.CustomTimeouts(create="15m")),
        )


def workload_quota(settings: VClusterSettings) -> dict:
    """What the team's own workloads were promised (the namespace's quota adds its control plane, its DNS and the
    platform's objects), with the object allowances resolved."""
    quota = settings.resource_quota
    config_maps, secrets, endpoint_slices = team_objects(settings)
    return {"cpu": quota.cpu, "memory": quota.memory, "pods": quota.pods, "services": quota.services,
            "persistentVolumeClaims": quota.persistent_volume_claims, "storage": quota.storage,
            "configMaps": config_maps, "secrets": secrets, "endpointSlices": endpoint_slices}


def kubeconfig_secret_name(team: Team) -> str:
    """vCluster writes the tenant's kubeconfig to ``vc-<release>`` in the release namespace."""
    return f"vc-{team.vcluster_name}"
