"""KAI's hamicore pod webhook and a team's isolation policy, next to tests/tenant_sim.py.

- ``hamicore_mutate``: what KAI's ``hamicore`` admission plugin (pkg/admission/webhook/v1alpha2/hamicore at
  v0.16.4 and v0.17.0) adds after the gpusharing plugin: the fractional container gets
  ``CUDA_DEVICE_MEMORY_LIMIT`` from the key of the same name of its device-list ConfigMap
  (``<runai/shared-gpu-configmap>-<index>``, ``i<index>`` for an init container), optional, replacing any
  entry of that name the pod had (``AddEnvVarToContainer``). The binder's hamicore plugin fills that key at
  bind time from the node's ``nvidia.com/gpu.memory`` label and the fraction.
- ``IsolationTenant``: a team of a program run whose pods go through tests/tenant_sim.py's whole CREATE path
  (vCluster's sync, LimitRanger, KAI's webhook, then hamicore when the site turned it on, API validation) and
  both host policies: the tenant's own and its tier's.
"""

from __future__ import annotations

import copy
from typing import Optional

from components.isolation_admission import IMAGE_ROOT, LIBRARY, LIBRARY_NAMES
from config import versions
from components.pod_size_admission import POD_SIZE_POLICY
from tests.tenant_sim import BINDING, KAI_SCHEDULER, POLICY, Admission, Tenant, admission_for, platform_of
from tests.apiserver_pods import api_validate

MEMORY_LIMIT = "CUDA_DEVICE_MEMORY_LIMIT"


def hamicore_mutate(pod: dict) -> dict:
    """KAI's hamicore admission plugin, run after the gpusharing plugin on a pod KAI's webhook handles."""
    mutated = copy.deepcopy(pod)
    annotations = mutated["metadata"].get("annotations", {})
    if mutated["spec"].get("schedulerName") != KAI_SCHEDULER or not (
            "gpu-fraction" in annotations or "gpu-memory" in annotations):
        return mutated
    spec = mutated["spec"]
    containers, init = spec["containers"], spec.get("initContainers", [])
    # GetFractionContainerRef: the named container, init containers first, else the first container.
    wanted = annotations.get("gpu-fraction-container-name", containers[0]["name"])
    target = next(entry for entry in init + containers if entry["name"] == wanted)
    is_init = target in init and target not in containers
    index = (init if is_init else containers).index(target)
    name = f"{annotations['runai/shared-gpu-configmap']}-{'i' if is_init else ''}{index}"
    target["env"] = [entry for entry in target.get("env", []) if entry["name"] != MEMORY_LIMIT] + [
        {"name": MEMORY_LIMIT, "valueFrom": {"configMapKeyRef": {"name": name, "key": MEMORY_LIMIT, "optional": True}}}]
    return mutated


# The HAMi-core image of a virtual cluster without a defaultImageRegistry.
SHIPPED_HAMI_CORE = f"{versions.HAMI_CORE_REGISTRY}/{versions.HAMI_CORE_IMAGE}"


def with_hami_core(pod: dict, container_name: Optional[str] = None, image: str = SHIPPED_HAMI_CORE) -> dict:
    """A virtual pod whose (fractional) container loads HAMi-core (``image``) the way the [hami-core] rule asks."""
    loaded = copy.deepcopy(pod)
    spec = loaded["spec"]
    spec.setdefault("volumes", []).append({"name": "hami-core", "image": {"reference": image}})
    wanted = container_name or spec["containers"][0]["name"]
    target = next(entry for entry in spec["containers"] if entry["name"] == wanted)
    target.setdefault("env", []).extend({"name": name, "value": LIBRARY} for name in LIBRARY_NAMES)
    target.setdefault("volumeMounts", []).append({"name": "hami-core", "mountPath": IMAGE_ROOT, "readOnly": True})
    return loaded


class IsolationTenant(Tenant):
    """A team whose host pods pass its tenant policy, the site's pod-size policy (when given) and its tier policy
    (every message is returned)."""

    def __init__(self, admission: Admission, tier: Admission, team, hamicore: bool,
                 size_admission: Optional[Admission] = None):
        super().__init__(admission, team, size_admission)
        self.tier = tier
        self.hamicore = hamicore

    def host_webhooks(self, pod: dict, *, kai_version: str = "v0.16.4") -> dict:
        host = super().host_webhooks(pod, kai_version=kai_version)
        return hamicore_mutate(host) if self.hamicore else host

    def create_host(self, host: dict, *, user: Optional[str] = None) -> list[str]:
        user = user or self.syncer
        return api_validate(host) or (self.review(host, user=user) + self.tier.review(self.team.namespace, host,
                                                                                       user=user))

    def update(self, old_host: dict, new_host: dict, *, user=None, subresource: str = "") -> list[str]:
        return super().update(old_host, new_host, user=user, subresource=subresource) + self.tier.review(
            self.team.namespace, new_host, operation="UPDATE", old=old_host, user=user or self.syncer,
            subresource=subresource)


def isolation_tenant_of(program, config: dict, team: str) -> IsolationTenant:
    platform = platform_of(config)
    settings = next(t for t in platform.teams if t.name == team)
    name = f"gpu-tenancy-{team}-isolation"
    policy = next(p for p in program.of_type(POLICY) if p.inputs["metadata"]["name"] == name)
    binding = next(b for b in program.of_type(BINDING) if b.inputs["spec"]["policyName"] == name)
    return IsolationTenant(admission_for(program, team), Admission(policy.inputs["spec"], binding.inputs["spec"]),
                           settings, platform.kai_scheduler.hamicore, admission_for(program, team, POD_SIZE_POLICY))
