"""One team's tenant cluster: a host namespace and a vCluster release in it.

The vCluster keeps its state (embedded SQLite) in that namespace, so both the namespace and
the release are protected by default: removing a team from config stops ``pulumi up`` with
Pulumi's protected-resource error instead of deleting the team's control plane.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.admission import TenantAdmission, TenantAdmissionArgs, policy_name
from components.tenant_dns import coredns_manifests
from config import versions
from config.merge import deep_merge
from config.model import Team

RELEASE_TIMEOUT_SECONDS = 900
# vCluster's default public-egress exceptions (private and loopback ranges) plus link-local, where
# cloud instance metadata services answer with the node's credentials.
EGRESS_EXCEPTIONS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "127.0.0.0/8",
                     "169.254.0.0/16")


@dataclass
class TenantClusterArgs:
    team: Team
    provider: k8s.Provider
    queue: pulumi.Resource


def vcluster_values(team: Team) -> dict:
    """Helm values of the team's vCluster release (checked against the chart's schema in tests)."""
    settings = team.vcluster
    selector = {"labels": dict(settings.node_labels)} if settings.node_labels else {"all": True}
    quota, limits = settings.resource_quota, settings.limit_range
    values = {
        # KAI's pod-grouper follows owner references to the top owner; vCluster's default owner (a
        # host Service) would hide the real Job/Deployment and its queue label.
        "experimental": {"syncSettings": {"setOwner": False}},
        "sync": {
            "fromHost": {
                "nodes": {"enabled": True, "selector": selector},
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
            "coredns": {"overwriteManifests": coredns_manifests(team)},
        },
        "policies": {
            # GPU shares are KAI's job (fractional pods request no nvidia.com/gpu); quotas bound
            # CPU, memory and object counts.
            "resourceQuota": {"enabled": True, "quota": {
                "requests.cpu": quota.cpu,
                "limits.cpu": quota.cpu,
                "requests.memory": quota.memory,
                "limits.memory": quota.memory,
                "count/pods": quota.pods,
                "count/services": quota.services,
                "count/persistentvolumeclaims": quota.persistent_volume_claims,
            }},
            "limitRange": {"enabled": True,
                           "default": {"cpu": limits.default_cpu, "memory": limits.default_memory},
                           "defaultRequest": {"cpu": limits.default_request_cpu,
                                              "memory": limits.default_request_memory}},
            "networkPolicy": {"enabled": settings.network_policy, "workload": {"publicEgress": {
                "enabled": True, "cidr": "0.0.0.0/0", "except": list(EGRESS_EXCEPTIONS)}}},
        },
    }
    return deep_merge(values, settings.extra_values)


def connect_command(team: Team) -> str:
    return f"vcluster connect {team.vcluster_name} --namespace {team.namespace}"


class TenantCluster(pulumi.ComponentResource):
    namespace: k8s.core.v1.Namespace
    admission: TenantAdmission
    release: k8s.helm.v3.Release
    kubeconfig: pulumi.Output[str]
    connect_command: str

    def __init__(self, name: str, args: TenantClusterArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("gpu-tenancy:platform:TenantCluster", name, None, opts)
        team = args.team
        protect = team.protect
        self.connect_command = connect_command(team)

        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": team.namespace, "labels": {
                "app.kubernetes.io/managed-by": "gpu-tenancy",
                "gpu-tenancy/team": team.name,
                # Synced pods run on the shared nodes: a tenant's cluster-admin must not buy it
                # privileged or host-path pods there.
                "pod-security.kubernetes.io/enforce": team.vcluster.pod_security,
            }},
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, protect=protect),
        )
        # The admission policy is in place before the vCluster can sync its first pod.
        self.admission = TenantAdmission(f"{name}-admission", TenantAdmissionArgs(team=team, provider=args.provider),
                                         opts=pulumi.ResourceOptions(parent=self))
        self.release = k8s.helm.v3.Release(
            f"{name}-vcluster",
            name=team.vcluster_name,
            chart=versions.VCLUSTER_CHART,
            version=team.vcluster.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=versions.VCLUSTER_REPO),
            namespace=self.namespace.metadata["name"],
            values=vcluster_values(team),
            atomic=True,
            cleanup_on_fail=True,
            timeout=RELEASE_TIMEOUT_SECONDS,
            # The tenant depends on its queue, so a removed team loses its queue only after its
            # control plane is gone.
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, protect=protect,
                                        depends_on=[args.queue, self.admission]),
        )
        kubeconfig_secret = k8s.core.v1.Secret.get(
            f"{name}-kubeconfig",
            self.release.status.apply(lambda _: f"{team.namespace}/vc-{team.vcluster_name}"),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
        )
        self.kubeconfig = pulumi.Output.secret(
            kubeconfig_secret.data.apply(lambda data: base64.b64decode((data or {}).get("config", "")).decode()))
        self.register_outputs({
            "namespace": team.namespace,
            "queue": team.queue_name,
            "admissionPolicy": policy_name(team),
            "connectCommand": self.connect_command,
            "kubeconfig": self.kubeconfig,
        })
