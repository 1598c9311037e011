"""Builders of the neutral resources the policy specs feed the rules."""

from __future__ import annotations

from typing import Any, Optional

from policy.rule_model import Resource

RELEASE = "kubernetes:helm.sh/v3:Release"
CHART_V4 = "kubernetes:helm.sh/v4:Chart"
QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"
POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
NAMESPACE = "kubernetes:core/v1:Namespace"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
CLUSTER_POLICY_PATCH = "kubernetes:nvidia.com/v1:ClusterPolicyPatch"
K8S_PROVIDER = "urn:pulumi:dev::gpu-tenancy::pulumi:providers:kubernetes::host-k8s"
DEFAULT_PROVIDER = "urn:pulumi:dev::gpu-tenancy::pulumi:providers:kubernetes::default_4_34_2"


def resource(type_: str, name: str = "r", inputs: Optional[dict] = None, provider: Optional[str] = K8S_PROVIDER,
             ) -> Resource:
    return Resource(type=type_, name=name, urn=f"urn:pulumi:dev::gpu-tenancy::{type_}::{name}",
                    inputs=inputs or {}, provider=provider)


def release(chart: str = "vcluster", version: Any = "0.36.1", values: Optional[dict] = None, name: str = "team-a",
            namespace: str = "vcluster-team-a", type_: str = RELEASE) -> Resource:
    inputs = {"chart": chart, "version": version, "name": name, "namespace": namespace, "values": values or {}}
    if version is None:
        del inputs["version"]
    return resource(type_, f"{name}-release", inputs)


def tenant_values(set_owner: Any = False, quota: Any = True) -> dict:
    return {"experimental": {"syncSettings": {"setOwner": set_owner}},
            "policies": {"resourceQuota": {"enabled": quota}}}


def full_resources(gpu_quota: Any = 1, gpu_limit: Any = -1) -> dict:
    return {"gpu": {"quota": gpu_quota, "limit": gpu_limit, "overQuotaWeight": 1},
            "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
            "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}


def queue(name: str, parent: Optional[str] = None, gpu_quota: Any = 1, resources: Any = None) -> Resource:
    spec: dict = {"displayName": name, "priority": 100,
                  "resources": full_resources(gpu_quota) if resources is None else resources}
    if parent is not None:
        spec["parentQueue"] = parent
    return resource(QUEUE, f"queues-{name}", {"metadata": {"name": name}, "spec": spec})
