"""Names the platform shares with Kubernetes, KAI, vCluster and the review tools, each defined once.

config/, components/ and tools/ import them from here. policy/rule_model.py keeps its own copies on
purpose: the policy pack runs from policy/ in a venv of its own, with nothing of the project on
sys.path; tests/test_vocabulary.py proves those copies equal to these (values and behaviour).
Plain data (and the one reading of a project key), no Pulumi.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

# --- the project and its config namespaces -----------------------------------------------------
PROJECT = "gpu-tenancy"
# A stack file's project keys are namespaced (gpu-tenancy:teams); the config model names them without it.
PROJECT_PREFIX = f"{PROJECT}:"
# Config namespaces a stack may use besides the project's own: Pulumi's and the providers' the
# program runs. Any other namespace is a typo that would leave its keys silently unread.
OTHER_NAMESPACES = ("pulumi", "aws", "eks", "kubernetes", "command")
CLUSTER_KINDS = ("microk8s", "eks", "kubeconfig")
# Where MicroK8s' nvidia addon installs the GPU Operator.
MICROK8S_ADDON_NAMESPACE = "gpu-operator-resources"


def project_config(stack_config: Mapping[str, Any]) -> dict[str, Any]:
    """The project's entries of a stack's ``config:`` block (``gpu-tenancy:teams``) by their name (``teams``).

    Keys of other namespaces (``aws:region``) are left out: they are not the project's to read.
    """
    return {key[len(PROJECT_PREFIX):]: value for key, value in stack_config.items()
            if key.startswith(PROJECT_PREFIX)}


# --- an exact chart version ---------------------------------------------------------------------
# Helm reads anything but a full SemVer 2 version as a constraint ("1.2" = newest 1.2.x). Leading
# zeros are not SemVer, and build metadata (+...) is; a leading "v" is how some charts tag.
EXACT_VERSION = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")

# --- labels -------------------------------------------------------------------------------------
# Every object the program creates outside a chart carries it.
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-tenancy"}
TEAM_LABEL = "gpu-tenancy/team"
POOL_LABEL = "gpu-tenancy/pool"
# Every GPU node group carries it, so one selector can name all GPU pools at once.
ROLE_LABEL = "gpu-tenancy/role"
# KAI reads a pod's queue from it.
QUEUE_LABEL = "kai.scheduler/queue"
# vCluster's syncer marks every host object it creates with its release name.
VCLUSTER_MANAGED_BY_LABEL = "vcluster.loft.sh/managed-by"
# On a team's host namespace: the bytes of free text its pods may carry (config
# vcluster.resourceQuota.syncedPodTextBytes), read by the host policy all teams share. No tenant writes its namespace.
POD_TEXT_BYTES_ANNOTATION = "gpu-tenancy/synced-pod-text-bytes"


def syncer_account(host_namespace: str, vcluster_name: str) -> str:
    """The identity vCluster's syncer writes host objects as (the chart's ``vc-<release>`` service account)."""
    return f"system:serviceaccount:{host_namespace}:vc-{vcluster_name}"


# Grafana's dashboard sidecar (kube-prometheus-stack's defaults) loads every ConfigMap with this label.
DASHBOARD_LABEL = ("grafana_dashboard", "1")
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
POD_SECURITY_LABEL = "pod-security.kubernetes.io/enforce"
# Node label the GPU Operator reads to pick a time-slicing ConfigMap key per node.
NODE_PROFILE_LABEL = "nvidia.com/device-plugin.config"

# --- reserved names -----------------------------------------------------------------------------
KAI_RESERVED_QUEUES = ("default-queue", "default-parent-queue")
# Where the KAI chart runs (its service accounts write tenants' pods after creation).
KAI_NAMESPACE = "kai-scheduler"
# Where KAI's binder runs the pods that hold a shared GPU (its default, which the program keeps): DCGM names this
# namespace for every GPU shared under fractions, and the rules take its pods for KAI's.
KAI_RESERVATION_NAMESPACE = "kai-resource-reservation"
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "default")

# --- KAI queues ---------------------------------------------------------------------------------
QUEUE_RESOURCES = ("gpu", "cpu", "memory")
QUEUE_FIELDS = ("quota", "limit", "overQuotaWeight")

# --- resource types -----------------------------------------------------------------------------
RELEASE = "kubernetes:helm.sh/v3:Release"
# Revisions Helm keeps of each release the program creates (one Secret each, in the release namespace, where a
# tenant's count quotas would see them); without it pulumi-kubernetes keeps every revision. Enough to roll back.
HELM_MAX_HISTORY = 5
QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"
CLUSTER_POLICY_PATCH = "kubernetes:nvidia.com/v1:ClusterPolicyPatch"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
NAMESPACE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
JOB = "kubernetes:batch/v1:Job"
CRON_JOB = "kubernetes:batch/v1:CronJob"
ADMISSION_POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
ADMISSION_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
EKS_CLUSTER = "eks:index:Cluster"
EKS_NODE_GROUP = "eks:index:ManagedNodeGroup"
COMMANDS = ("command:local:Command", "command:remote:Command")
K8S_PROVIDER = "pulumi:providers:kubernetes"
AWS_PROVIDER = "pulumi:providers:aws"
VPC = "aws:ec2/vpc:Vpc"
SUBNET = "aws:ec2/subnet:Subnet"
NAT_GATEWAY = "aws:ec2/natGateway:NatGateway"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
EKS_ADDON = "aws:eks/addon:Addon"

# The program's own components (components/*.py).
HOST_COMPONENT = "gpu-tenancy:platform:HostCluster"
EKS_NETWORK_COMPONENT = "gpu-tenancy:platform:EksNetwork"
GPU_OPERATOR_COMPONENT = "gpu-tenancy:platform:GpuOperator"
KAI_COMPONENT = "gpu-tenancy:platform:KaiScheduler"
QUEUES_COMPONENT = "gpu-tenancy:platform:QueueHierarchy"
TENANT_COMPONENT = "gpu-tenancy:platform:TenantCluster"
ADMISSION_COMPONENT = "gpu-tenancy:platform:TenantAdmission"
OBSERVABILITY_COMPONENT = "gpu-tenancy:platform:Observability"
ACCESS_COMPONENT = "gpu-tenancy:platform:TenantAccess"
ISOLATION_ADMISSION_COMPONENT = "gpu-tenancy:platform:IsolationAdmission"
POD_SIZE_ADMISSION_COMPONENT = "gpu-tenancy:platform:PodSizeAdmission"

# The GPU share the reference walk-throughs give each team; the smoke test's seed pod asks for it.
SEED_GPU_FRACTION = "0.33"

# The MicroK8s setup steps a running site runs again when their command changes (components/host.py names its
# Commands `<host>-<step>`; tools/plan/host_steps.py says what each does to a running box).
NVIDIA_ADDON_STEP = "enable-nvidia"
KUBELET_ARGS_STEP = "pod-pids-limit"
AUDIT_LOG_STEP = "apiserver-audit-log"
