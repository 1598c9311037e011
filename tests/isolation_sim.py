"""KAI's hamicore pod webhook and a team's isolation policy, next to tests/tenant_sim.py.

- ``hamicore_mutate``: what KAI's ``hamicore`` admission plugin (pkg/admission/webhook/v1alpha2/hamicore at
  v0.16.4 and v0.17.0) adds after the gpusharing plugin: the fractional container gets
  ``CUDA_DEVICE_MEMORY_LIMIT`` from the key of the same name of its device-list ConfigMap
  (``<runai/shared-gpu-configmap>-<index>``, ``i<index>`` for an init container), optional, replacing any
  entry of that name the pod had (``AddEnvVarToContainer``). The binder's hamicore plugin fills that key at
  bind time from the node's ``nvidia.com/gpu.memory`` label and the fraction.
- ``IsolationTenant``: a team of a program run whose pods go through vCluster's sync, KAI's webhook (with
  hamicore when the site turned it on) and both host policies: the tenant's own and its tier's.
"""

from __future__ import annotations

import copy
from typing import Optional

from components.isolation_admission import LIBRARY, LIBRARY_DIR
from config import versions
from tests.tenant_sim import BINDING, POLICY, Admission, Tenant, admission_for, kai_mutate, platform_of, vcluster_sync

MEMORY_LIMIT = "CUDA_DEVICE_MEMORY_LIMIT"


def hamicore_mutate(pod: dict) -> dict:
    mutated = copy.deepcopy(pod)
    annotations = mutated["metadata"].get("annotations", {})
    if mutated["spec"].get("schedulerName") != "kai-scheduler" or not (
            "gpu-fraction" in annotations or "gpu-memory" in annotations):
        return mutated
    spec = mutated["spec"]
    wanted = annotations.get("gpu-fraction-container-name", spec["containers"][0]["name"])
    if any(entry["name"] == wanted for entry in spec["containers"]):
        index = str(next(i for i, entry in enumerate(spec["containers"]) if entry["name"] == wanted))
        target = spec["containers"][int(index)]
    else:
        position = next(i for i, entry in enumerate(spec["initContainers"]) if entry["name"] == wanted)
        index, target = f"i{position}", spec["initContainers"][position]
    name = f"{annotations['runai/shared-gpu-configmap']}-{index}"
    target["env"] = [entry for entry in target.get("env", []) if entry["name"] != MEMORY_LIMIT] + [
        {"name": MEMORY_LIMIT, "valueFrom": {"configMapKeyRef": {"name": name, "key": MEMORY_LIMIT, "optional": True}}}]
    return mutated


def with_hami_core(pod: dict, container_name: Optional[str] = None) -> dict:
    """A virtual pod whose (fractional) container loads HAMi-core the way the [hami-core] rule asks."""
    loaded = copy.deepcopy(pod)
    spec = loaded["spec"]
    spec.setdefault("volumes", []).append({"name": "hami-core", "image": {"reference": versions.HAMI_CORE_IMAGE}})
    target = next(entry for entry in spec["containers"] if entry["name"] == (container_name or spec["containers"][0]["name"]))
    target.setdefault("env", []).append({"name": "LD_PRELOAD", "value": LIBRARY})
    target.setdefault("volumeMounts", []).append({"name": "hami-core", "mountPath": LIBRARY_DIR, "readOnly": True,
                                                  "subPath": versions.HAMI_CORE_IMAGE_LIBRARY_DIR})
    return loaded


class IsolationTenant(Tenant):
    """A team whose host pods pass its tenant policy and its tier policy (both messages are returned)."""

    def __init__(self, admission: Admission, tier: Admission, team, hamicore: bool):
        super().__init__(admission, team)
        self.tier = tier
        self.hamicore = hamicore

    def host_pod(self, pod: dict, *, mutated: bool = True) -> dict:
        synced = vcluster_sync(pod, self.team)
        if not mutated:
            return synced
        return hamicore_mutate(kai_mutate(synced)) if self.hamicore else kai_mutate(synced)

    def create(self, pod: dict, *, mutated: bool = True) -> list[str]:
        host = self.host_pod(pod, mutated=mutated)
        return (self.admission.review(self.team.namespace, host, user=self.syncer)
                + self.tier.review(self.team.namespace, host, user=self.syncer))

    def update(self, old_host: dict, new_host: dict, *, user=None, subresource: str = "") -> list[str]:
        arguments = dict(operation="UPDATE", old=old_host, user=user or self.syncer, subresource=subresource)
        return (self.admission.review(self.team.namespace, new_host, **arguments)
                + self.tier.review(self.team.namespace, new_host, **arguments))


def isolation_tenant_of(program, config: dict, team: str) -> IsolationTenant:
    platform = platform_of(config)
    settings = next(t for t in platform.teams if t.name == team)
    name = f"gpu-tenancy-{team}-isolation"
    policy = next(p for p in program.of_type(POLICY) if p.inputs["metadata"]["name"] == name)
    binding = next(b for b in program.of_type(BINDING) if b.inputs["spec"]["policyName"] == name)
    return IsolationTenant(admission_for(program, team), Admission(policy.inputs["spec"], binding.inputs["spec"]),
                           settings, platform.kai_scheduler.hamicore)
