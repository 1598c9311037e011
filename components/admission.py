"""Host-side admission for one tenant: its synced pods may only use its own GPU share.

vCluster copies a tenant pod's labels, annotations and ``schedulerName`` to the host unchanged,
and no open-source vCluster setting can force them. Without a host-side check a tenant could
label pods with another team's queue, or skip KAI (and its queue) with the default scheduler.
This ValidatingAdmissionPolicy, bound to the tenant's host namespace and to the pods its
vCluster syncs there, closes that:

- a pod that names a KAI queue must name this team's leaf queue;
- a pod that uses GPUs (``gpu-fraction`` / ``gpu-memory`` annotations, or an ``nvidia.com/gpu``
  request or limit) must use ``schedulerName: kai-scheduler`` and this team's queue;
- with ``strict``, every pod must, except CPU pods of the vCluster's own kube-system (its DNS).

The vCluster control-plane pod carries no ``vcluster.loft.sh/managed-by`` label, so it is never
matched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.kai import SCHEDULER_NAME
from config.model import Team

QUEUE_LABEL = "kai.scheduler/queue"
MANAGED_BY_LABEL = "vcluster.loft.sh/managed-by"
VIRTUAL_NAMESPACE_LABEL = "vcluster.loft.sh/namespace"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_ANNOTATIONS = ("gpu-fraction", "gpu-memory")


@dataclass
class TenantAdmissionArgs:
    team: Team
    provider: k8s.Provider


def _container_uses_gpu(field: str) -> str:
    uses = " || ".join(f"(has(c.resources.{kind}) && '{GPU_RESOURCE}' in c.resources.{kind})"
                       for kind in ("requests", "limits"))
    return f"(has(object.spec.{field}) && object.spec.{field}.exists(c, has(c.resources) && ({uses})))"


def policy_variables() -> list[dict]:
    annotations = " || ".join(f"'{name}' in object.metadata.annotations" for name in GPU_ANNOTATIONS)
    return [
        {"name": "queue",
         "expression": f"has(object.metadata.labels) && '{QUEUE_LABEL}' in object.metadata.labels"
                       f" ? object.metadata.labels['{QUEUE_LABEL}'] : ''"},
        {"name": "virtualNamespace",
         "expression": f"has(object.metadata.labels) && '{VIRTUAL_NAMESPACE_LABEL}' in object.metadata.labels"
                       f" ? object.metadata.labels['{VIRTUAL_NAMESPACE_LABEL}'] : ''"},
        {"name": "scheduler",
         "expression": "has(object.spec.schedulerName) ? object.spec.schedulerName : 'default-scheduler'"},
        {"name": "usesGpu",
         "expression": f"(has(object.metadata.annotations) && ({annotations}))"
                       f" || {_container_uses_gpu('containers')} || {_container_uses_gpu('initContainers')}"},
    ]


def policy_validations(team: Team) -> list[dict]:
    queue = team.queue_name
    on_kai = f"variables.scheduler == '{SCHEDULER_NAME}' && variables.queue == '{queue}'"
    fix = f"set spec.schedulerName: {SCHEDULER_NAME} and the label {QUEUE_LABEL}: {queue}"
    validations = [
        {"expression": f"variables.queue == '' || variables.queue == '{queue}'",
         "messageExpression": f"'pods of team {team.name} may only use the KAI queue {queue}, not ' + "
                              f"variables.queue + ': set the label {QUEUE_LABEL}: {queue}'",
         "reason": "Forbidden"},
        {"expression": f"!variables.usesGpu || ({on_kai})",
         "message": f"pods of team {team.name} that use GPUs must be scheduled by KAI in queue {queue}: {fix}",
         "reason": "Forbidden"},
    ]
    if team.strict:
        # The vCluster's own CoreDNS runs as a synced pod in its kube-system: strict mode leaves
        # that namespace's CPU pods alone so tenant DNS keeps working.
        validations.append({
            "expression": f"variables.virtualNamespace == 'kube-system' || ({on_kai})",
            "message": f"team {team.name} is strict: every pod must be scheduled by KAI in queue {queue}: {fix}",
            "reason": "Forbidden",
        })
    return validations


def policy_spec(team: Team) -> dict:
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                               "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: team.namespace}},
            "objectSelector": {"matchLabels": {MANAGED_BY_LABEL: team.vcluster_name}},
        },
        "variables": policy_variables(),
        "validations": policy_validations(team),
    }


def policy_name(team: Team) -> str:
    return f"gpu-tenancy-{team.name}"


class TenantAdmission(pulumi.ComponentResource):
    policy: k8s.admissionregistration.v1.ValidatingAdmissionPolicy
    binding: k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding

    def __init__(self, name: str, args: TenantAdmissionArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("gpu-tenancy:platform:TenantAdmission", name, None, opts)
        team = args.team
        labels = {"app.kubernetes.io/managed-by": "gpu-tenancy", "gpu-tenancy/team": team.name}
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-policy",
            metadata={"name": policy_name(team), "labels": labels},
            spec=policy_spec(team),
            opts=child,
        )
        self.binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-binding",
            metadata={"name": policy_name(team), "labels": labels},
            spec={
                "policyName": policy_name(team),
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: team.namespace}}},
            },
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.policy])),
        )
        self.register_outputs({"policy": policy_name(team), "strict": team.strict})
