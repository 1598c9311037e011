"""What each host kind provides and what the platform must add to it, in one place.

Components and checks ask ``host_profile(cluster)`` instead of testing ``cluster.kind``:

- ``api_server_port``: the port the API server's endpoints listen on. NetworkPolicy port rules
  match it after the ``kubernetes`` Service is translated: a tenant control plane's egress to the
  API server opens this port only (components/tenant_network.py; unknown: vCluster's 443, 8443, 6443).
- ``storage_class``: the class a tenant's control-plane volume claim names (``None``: the
  cluster's default class); ``creates_storage_class``: the platform has to create it.
- ``gpu_driver_preinstalled`` / ``gpu_toolkit_preinstalled``: the nodes come with the NVIDIA
  driver / container toolkit, so the GPU Operator must not install its own.
- ``node_pools``: the groups of nodes pods can land on, with their labels and taints (``None``:
  not known from the config, an existing cluster).
- ``tenant_node_labels``: the default ``vcluster.nodeLabels``. vCluster syncs only the nodes
  carrying these labels AND pins every tenant pod (DNS included) to them with a nodeSelector.
- ``host_dns``: the cluster DNS Service the tenant DNS forwards to and where its answers come from (pods,
  node-local addresses), which a tenant's control plane, DNS and snapshot pods may reach on DNS only. EKS' CoreDNS
  add-on and MicroK8s' dns addon are the default kube-dns layout (the program installs neither NodeLocal
  DNSCache); an existing cluster states its own (``cluster.kubeconfig.dns``).

``HOST_KIND_FACTS`` holds what every host of a kind provides before the platform adds anything
(API server ports, storage classes), for checks that see a plan and not the config.

No Pulumi here.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass
from typing import Optional

from config.capacity import accelerator_label_value
from config.host_networking import untranslating_plugins
from config.load_balancer_keys import AWS_TEAM_KEYS
from config.mig import MIG_CONFIG_LABEL
from config.model import Cluster
from config.model_host import HostProfile, NodePool, Taint
from config.vocabulary import POOL_LABEL, ROLE_LABEL

# cluster-autoscaler cloudprovider/aws GPULabel (utils/gpu NodeHasGpu reads it).
AUTOSCALER_GPU_LABEL = "k8s.amazonaws.com/accelerator"
# The tag prefix by which the autoscaler learns an empty managed node group's resources (its aws_manager reads the
# group's EKS tags in buildNodeFromTemplate).
AUTOSCALER_NODE_RESOURCE_TAG = "k8s.io/cluster-autoscaler/node-template/resources/"


def _autoscaler_labels(autoscaled: bool, instance_types: tuple[str, ...]) -> dict[str, str]:
    """The Cluster Autoscaler takes a node with its GPU label for a GPU node before the device plugin advertises the
    GPUs, instead of adding more nodes for the same pending pods meanwhile."""
    return {AUTOSCALER_GPU_LABEL: accelerator_label_value(instance_types)} if autoscaled else {}

# Private ranges (vCluster's default public-egress exceptions besides loopback). Nodes and pods must take their
# addresses from them: a tenant pod's public egress leaves them out, so it reaches no node's kubelet and no pod.
PRIVATE_NETWORKS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
# What a tenant pod's public egress leaves out (components/tenant.py): those, loopback, and link-local, where
# cloud instance metadata services answer with the node's credentials.
TENANT_EGRESS_EXCEPTIONS = (*PRIVATE_NETWORKS, "127.0.0.0/8", "169.254.0.0/16")

GPU_ROLE = "gpu"
SYSTEM_ROLE = "system"
SYSTEM_POOL = "system"
# pulumi-eks passes a managed node group's nodeGroupNamePrefix to the AWS provider's aws_eks_node_group, which appends
# a 26-character unique suffix and refuses a prefix longer than 63 - 26 characters (terraform-provider-aws,
# internal/service/eks/node_group.go: node_group_name at most 63, node_group_name_prefix at most 63 minus
# id.UniqueIDSuffixLength).
NODE_GROUP_NAME_PREFIX_MAX = 37


def node_group_name_prefix(cluster_name: str, pool: str) -> str:
    """What EKS names the managed node group of ``pool`` after (plus AWS's unique suffix)."""
    return f"{cluster_name}-{pool}-"
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT = Taint(GPU_TAINT_KEY, "true", "NoSchedule")

MICROK8S_API_SERVER_PORT = 16443
MICROK8S_STORAGE_CLASS = "microk8s-hostpath"
# MicroK8s configures every node's containerd to pull localhost:32000/... over plain HTTP, for its registry addon
# (microk8s-resources/default-args/certs.d/localhost__32000/hosts.toml, v1.30 to v1.36), and kube-proxy answers a
# node port on localhost: whoever holds node port 32000 serves those images.
MICROK8S_REGISTRY_NODE_PORT = 32000
EKS_API_SERVER_PORT = 443
# Where an EKS cluster created without a Service range of its own (components/host.py sets none) takes its Services'
# addresses: one of these, the `kubernetes` Service at its first address (CreateCluster's
# kubernetesNetworkConfig.serviceIpv4Cidr, unset). The VPC CNI's policy agent judges a pod's egress at the Service's
# address and port, before kube-proxy translates them (aws/amazon-network-policy-controller-k8s,
# pkg/resolvers/endpoints.go getMatchingServiceClusterIPs), so a port opened to every address opens every Service
# listening on it, whatever pod and port stand behind it.
EKS_SERVICE_RANGES = ("10.100.0.0/16", "172.20.0.0/16")
# The port of the `kubernetes` Service, whatever port the API server itself listens on (kube-apiserver sets it).
KUBERNETES_SERVICE_PORT = 443
# Created by the platform on EKS (EBS CSI driver, gp3 volumes) and annotated as the default.
EKS_STORAGE_CLASS = "gp3"
# The ports an existing cluster's API server most often listens on, when the config names none.
COMMON_API_SERVER_PORTS = (443, 6443)
DEFAULT_STORAGE_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
# Taint effects in Kubernetes spelling -> the EKS API's spelling (node groups).
EKS_TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}


def host_profile(cluster: Cluster) -> HostProfile:
    if cluster.microk8s is not None:
        return HostProfile(
            kind="microk8s",
            api_server_port=MICROK8S_API_SERVER_PORT,
            # `microk8s enable hostpath-storage` (run by the platform) makes it the default class.
            storage_class=MICROK8S_STORAGE_CLASS,
            creates_storage_class=False,
            # A MicroK8s GPU box has its driver installed with the OS; the toolkit comes with the operator.
            gpu_driver_preinstalled=True,
            gpu_toolkit_preinstalled=False,
            # One machine: its node runs the platform and every tenant, untainted.
            node_pools=(NodePool("microk8s", {}, gpu=True),),
            tenant_node_labels={},
            trusted_node_ports=(MICROK8S_REGISTRY_NODE_PORT,),
        )
    if cluster.eks is not None:
        eks = cluster.eks
        pools = [NodePool(SYSTEM_POOL, {POOL_LABEL: SYSTEM_POOL, ROLE_LABEL: SYSTEM_ROLE})]
        pools += [NodePool(group.name, {**_autoscaler_labels(eks.autoscaled, group.instance_types),
                                        **(group.labels or {}), POOL_LABEL: group.name, ROLE_LABEL: GPU_ROLE,
                                        **({MIG_CONFIG_LABEL: group.mig_config} if group.mig_config else {})},
                           (GPU_TAINT,), gpu=True)
                  for group in eks.gpu_node_groups]
        return HostProfile(
            kind="eks",
            api_server_port=EKS_API_SERVER_PORT,
            storage_class=EKS_STORAGE_CLASS,
            creates_storage_class=True,
            # The AL2023 NVIDIA AMI ships driver and container toolkit.
            gpu_driver_preinstalled=True,
            gpu_toolkit_preinstalled=True,
            node_pools=tuple(pools),
            # Tenants run on the GPU pools only; the system pool stays for the platform (KAI,
            # operator, vCluster control planes). CPU pods and DNS of a tenant share the GPU
            # nodes; KAI hides the GPUs from containers it did not allocate one to.
            tenant_node_labels={ROLE_LABEL: GPU_ROLE},
            untranslated_service_ranges=EKS_SERVICE_RANGES,
            # The cluster took one of the two ranges as its own: either first address may be the kubernetes Service's.
            kubernetes_service_addresses=kubernetes_service_addresses(EKS_SERVICE_RANGES),
            # EKS's AWS cloud provider makes a team's LoadBalancer Services (MicroK8s' MetalLB reads no key a team
            # needs; an existing cluster's implementation is not known).
            load_balancer_annotations=AWS_TEAM_KEYS,
        )
    existing = cluster.kubeconfig
    assert existing is not None, "a validated Cluster has exactly one kind's settings"
    untranslated = (existing.service_ranges or ()) if untranslating_plugins(existing.networking) else ()
    return HostProfile(
        kind="kubeconfig",
        api_server_port=existing.api_server_port,
        api_server_addresses=existing.api_server_addresses,
        untranslated_service_ranges=untranslated,
        # The first range stated is the primary one, the kubernetes Service's (the others: the second address family,
        # ServiceCIDRs added later, where a first address is any Service's).
        kubernetes_service_addresses=kubernetes_service_addresses(untranslated[:1]),
        storage_class=existing.storage_class,
        creates_storage_class=False,
        gpu_driver_preinstalled=False,
        gpu_toolkit_preinstalled=False,
        node_pools=None,
        tenant_node_labels={},
        host_dns=existing.dns,
    )


@dataclass(frozen=True)
class HostKindFacts:
    """What every host of a kind provides before the platform adds anything, known from the kind
    alone: for checks that read a plan, where the host's own config is not at hand."""

    api_server_ports: tuple[int, ...]
    api_server_ports_known: bool  # False: common ports, the host's own may differ
    storage_classes: tuple[str, ...]
    default_storage_class: Optional[str]
    storage_known: bool  # False: whether the host has storage classes is not known
    # Whether kube-prometheus-stack's scrapes of kube-scheduler, kube-controller-manager, etcd and kube-proxy can
    # reach them. They find each by the labels of its pod in kube-system, on its metrics port.
    control_plane_metrics: bool
    # The networks the API server's endpoints listen in, where the site states them (cluster.kubeconfig.
    # apiServerAddresses); empty: not known, somewhere in the private ranges.
    api_server_addresses: tuple[str, ...] = ()
    # The network plugin judges the control plane's connection at the kubernetes Service's address and port (those
    # are then api_server_addresses and api_server_ports), before kube-proxy translates them.
    judged_at_service: bool = False


def kubernetes_service_addresses(ranges: tuple[str, ...]) -> tuple[str, ...]:
    """The first address of each range, as a network of one address: the kubernetes Service's in its range."""
    return tuple(f"{ipaddress.ip_network(block)[1]}/{ipaddress.ip_network(block).max_prefixlen}" for block in ranges)


def service_facts(facts: HostKindFacts, kubernetes_services: tuple[str, ...]) -> HostKindFacts:
    """The facts of a host whose network plugin judges egress before translation: the control planes reach the API
    server at the kubernetes Service's possible addresses, on its port."""
    return dataclasses.replace(facts, api_server_ports=(KUBERNETES_SERVICE_PORT,), api_server_ports_known=True,
                               api_server_addresses=kubernetes_services, judged_at_service=True)


# From the hosts' docs (/shared/FACTS.md): MicroK8s serves the API on 16443 and its hostpath-storage
# addon (which the platform enables) makes microk8s-hostpath the default class; EKS serves it on 443
# and, since 1.30, has no default class; an existing cluster is not known. MicroK8s runs the scheduler,
# the controller manager and kube-proxy inside one kubelite process, with dqlite instead of etcd: no pod
# to find. EKS runs the first three out of the cluster, and its kube-proxy add-on binds metrics to
# 127.0.0.1. An existing cluster may have opened them.
HOST_KIND_FACTS = {
    "microk8s": HostKindFacts((MICROK8S_API_SERVER_PORT,), True, (MICROK8S_STORAGE_CLASS,), MICROK8S_STORAGE_CLASS,
                              True, control_plane_metrics=False),
    # On EKS a control plane's connection to the API server is judged at the kubernetes Service's address.
    "eks": service_facts(HostKindFacts((EKS_API_SERVER_PORT,), True, (), None, True, control_plane_metrics=False),
                         kubernetes_service_addresses(EKS_SERVICE_RANGES)),
    "kubeconfig": HostKindFacts(COMMON_API_SERVER_PORTS, False, (), None, False, control_plane_metrics=True),
}
