"""The NVIDIA GPU Operator and its time-slicing ConfigMap of named sharing profiles.

Three modes (``gpuOperator.mode``):
- ``install``: this program owns a Helm release of the operator, pointed at the ConfigMap;
- ``microk8s-addon``: MicroK8s' nvidia addon already runs the operator; the ConfigMap is created
  beside it and the addon's ClusterPolicy is patched to use it and to run the DCGM exporter (a
  second release would fight over the cluster-scoped ClusterPolicy);
- ``external``: someone else runs the operator; only the ConfigMap is created.

``install`` and ``microk8s-addon`` also get the DCGM exporter's collector list
(components/observability_dcgm.py) beside the time-slicing ConfigMap, and point the exporter at it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
from components.kubernetes_resources import CONFIG_MAP, NAMESPACE, HelmRelease, KubernetesObject

from components import observability_dcgm
from config import sharing, versions
from config.merge import deep_merge
from config.mirrors import Mirrors, gpu_operator_repositories, mirrored_values
from config.model import GpuOperator as GpuOperatorSettings
from config.vocabulary import GPU_OPERATOR_COMPONENT, HELM_MAX_HISTORY, MANAGED_BY

ADDON_CLUSTER_POLICY = "cluster-policy"
# The operator rolls out drivers and validators node by node; a first install takes a while.
RELEASE_TIMEOUT_SECONDS = 1800

# Where MicroK8s keeps containerd's config and socket, for the operator's toolkit.
MICROK8S_TOOLKIT_ENV = [
    {"name": "CONTAINERD_CONFIG", "value": "/var/snap/microk8s/current/args/containerd-template.toml"},
    {"name": "CONTAINERD_SOCKET", "value": "/var/snap/microk8s/common/run/containerd.sock"},
    {"name": "RUNTIME_CONFIG_SOURCE", "value": "file=/var/snap/microk8s/current/args/containerd.toml"},
]


# Per-GPU utilisation, memory, XID and ECC errors for the per-team accounting (components/observability.py),
# with the platform's collector list. The exporter maps each GPU to the pod holding it (namespace, pod labels)
# by default; an addon or site install that turned it off gets it back.
DCGM_EXPORTER = {"dcgmExporter": {"enabled": True, "config": {"name": observability_dcgm.CONFIG_MAP}}}
# The chart's values whose image is tagged as the release (config/versions.py): the operator (and its pre-upgrade
# CRD hook, which runs the operator's image), the validator and the node status exporter.
RELEASE_TAGGED = ("operator", "validator", "nodeStatusExporter")


@dataclass
class GpuOperatorArgs:
    settings: GpuOperatorSettings
    host_kind: str
    provider: k8s.Provider
    mirrors: Mirrors = Mirrors()


def operator_values(settings: GpuOperatorSettings, host_kind: str, mirrors: Mirrors = Mirrors()) -> dict:
    """Helm values of the operator release for this host."""
    toolkit: dict = {"enabled": settings.toolkit_enabled}
    if host_kind == "microk8s" and settings.toolkit_enabled:
        toolkit["env"] = MICROK8S_TOOLKIT_ENV
    # Every image repository of the chart (the operator, its ClusterPolicy's operands, node-feature-discovery) under
    # the site's mirror of its registry.
    return deep_merge(mirrored_values(gpu_operator_repositories(settings.version), "repository", mirrors), {
        **{component: {"version": settings.version} for component in RELEASE_TAGGED},
        "cdi": {"enabled": True},
        "driver": {"enabled": settings.driver_enabled},
        "toolkit": toolkit,
        "devicePlugin": {
            "config": {
                "name": settings.time_slicing.config_map_name,
                "default": sharing.default_key(settings.time_slicing),
                "create": False,
            }
        },
        **DCGM_EXPORTER,
        # A MIG-split pool: the device plugin names the slices by this strategy; the MIG manager (on by
        # default) applies each node's nvidia.com/mig.config layout.
        **({"mig": {"strategy": settings.mig_strategy}, "migManager": {"enabled": True}} if settings.mig_split else {}),
    })


class GpuOperator(pulumi.ComponentResource):
    config_map_name: str
    namespace: str
    profile_keys: dict[str, str]
    default_profile_key: str
    release: Optional[HelmRelease]

    def __init__(self, name: str, args: GpuOperatorArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(GPU_OPERATOR_COMPONENT, name, None, opts)
        settings = args.settings
        time_slicing = settings.time_slicing
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)

        self.namespace = settings.namespace
        self.config_map_name = time_slicing.config_map_name
        self.profile_keys = sharing.profile_keys(time_slicing)
        self.default_profile_key = sharing.default_key(time_slicing)
        self.release = None

        # Only an operator this program installs gets its namespace from here: the addon's and an
        # external operator's namespaces already exist.
        namespace_ready: list[pulumi.Resource] = []
        if settings.mode == "install":
            namespace_ready.append(KubernetesObject(
                f"{name}-namespace", NAMESPACE, metadata={"name": settings.namespace}, opts=child))
        config_map = KubernetesObject(
            f"{name}-time-slicing", CONFIG_MAP,
            metadata={"name": time_slicing.config_map_name, "namespace": settings.namespace,
                      "labels": dict(MANAGED_BY)},
            data=sharing.config_map_data(time_slicing),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=namespace_ready)),
        )
        # Only an operator this program configures reads it.
        dcgm_metrics = None if settings.mode == "external" else KubernetesObject(
            f"{name}-usage-metrics", CONFIG_MAP,
            metadata={"name": observability_dcgm.CONFIG_MAP, "namespace": settings.namespace,
                      "labels": MANAGED_BY},
            data={observability_dcgm.CONFIG_KEY: observability_dcgm.collectors_csv()},
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=namespace_ready)),
        )

        if settings.mode == "install":
            chart, repo = args.mirrors.chart(versions.GPU_OPERATOR_CHART, versions.GPU_OPERATOR_CHART,
                                             versions.GPU_OPERATOR_REPO)
            self.release = HelmRelease(
                f"{name}-release",
                name="gpu-operator",
                chart=chart,
                version=settings.version,
                repository_opts={"repo": repo} if repo else None,
                namespace=settings.namespace,
                values=operator_values(settings, args.host_kind, args.mirrors),
                atomic=True,
                max_history=HELM_MAX_HISTORY,
                cleanup_on_fail=True,
                timeout=RELEASE_TIMEOUT_SECONDS,
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                    depends_on=[config_map, dcgm_metrics])),
            )
        elif settings.mode == "microk8s-addon":
            k8s.apiextensions.CustomResourcePatch(
                f"{name}-cluster-policy",
                api_version="nvidia.com/v1",
                kind="ClusterPolicy",
                metadata={
                    "name": ADDON_CLUSTER_POLICY,
                    # The addon's Helm release owns the other fields; take over only those set here.
                    "annotations": {"pulumi.com/patchForce": "true"},
                },
                spec={"devicePlugin": {"config": {"name": time_slicing.config_map_name,
                                                  "default": self.default_profile_key}},
                      **DCGM_EXPORTER},
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                    depends_on=[config_map, dcgm_metrics])),
            )

        self.register_outputs({
            "mode": settings.mode,
            "namespace": self.namespace,
            "configMapName": self.config_map_name,
            "profileKeys": self.profile_keys,
            "defaultProfileKey": self.default_profile_key,
        })
