"""Host-side admission for one team's isolation tier (config/isolation.py), next to its TenantAdmission.

A second ValidatingAdmissionPolicy on the team's host namespace, matched exactly like the tenant's own
(vCluster's syncer account, the managed-by label) and sharing its variables, so the pod it sees is the one
vCluster synced and KAI's pod webhook mutated. Each rule is named in its message:

- ``[mig-profile]`` (mig): no fractions, and the only GPU resource is the team's slice:
  ``nvidia.com/mig-<profile>`` under the ``mixed`` strategy; under ``single`` every slice is a plain
  ``nvidia.com/gpu``, so GPU pods must stay pinned to the team's pool.
- ``[whole-gpus]`` (exclusive): no ``gpu-fraction``/``gpu-memory`` annotations and no MIG slices.
- ``[no-mig]`` (memory-capped; shared, on a site with a MIG-split pool): no MIG slices (they are the mig
  teams', and carry no HAMi-core limit).
- ``[memory-limit]`` (memory-capped): the fractional container carries KAI's ``CUDA_DEVICE_MEMORY_LIMIT``
  reference (written by KAI's hamicore pod webhook, so the plugin must be on) and nothing else may set what
  HAMi-core reads to size or skip the limit: per-device ``CUDA_DEVICE_MEMORY_LIMIT_<n>`` (which beats the
  plain one), ``CUDA_DEVICE_MEMORY_SHARED_CACHE``, ``ACTIVE_OOM_KILLER``; ``LD_PRELOAD`` and ``CUDA_REDIRECT``
  only as the library. Not through ``env``, nor through ``envFrom`` (an unprefixed source, or a prefix that
  could spell one of those names), in any container, ephemeral ones included.
- ``[hami-core]`` (memory-capped): the fractional container loads HAMi-core: the pinned image (an image
  volume) is mounted whole, without ``subPath``, at ``/usr/local/vgpu``, with nothing mounted over or around
  it, and both ``LD_PRELOAD`` and ``CUDA_REDIRECT`` (where HAMi-core dlopens itself from) name the library in
  it. A whole-image mount is what every containerd with image volumes does alike: v2.1 ignores a mount's
  ``subPath`` and mounts the whole image, v2.2 honours it (internal/cri/server/container_image_mount.go), so a
  ``subPath`` would put the library somewhere else on one of them and HAMi-core would silently not load.

Rules hold on CREATE and on every UPDATE (ephemeral containers are added by an update of the
``pods/ephemeralcontainers`` subresource). HAMi-core is a user-space library: a process that unsets
``LD_PRELOAD`` for its children or talks to the driver directly escapes it (docs/isolation.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.admission import FRACTION_ANNOTATIONS, pod_policy_spec, policy_name, policy_with_deny_binding
from components.admission_devices import (
    CONTAINER_LISTS, GPU_RESOURCE, MIG_RESOURCE_PREFIX, SCHEDULED_LISTS, SHARED_GPU_CONFIGMAP_ANNOTATION,
    env_from_prefix_safe, every_container,
)
from components.admission_metadata import refusal
from components.kubernetes_resources import KubernetesObject
from config import versions
from config.mig import resource_name
from config.model import EXCLUSIVE, MEMORY_CAPPED, MIG, Team
from config.vcluster_images import hami_core_image
from config.vocabulary import ISOLATION_ADMISSION_COMPONENT, POOL_LABEL

MEMORY_LIMIT = "CUDA_DEVICE_MEMORY_LIMIT"
PRELOAD = "LD_PRELOAD"
# HAMi-core dlopens itself from the path CUDA_REDIRECT names, else from /usr/local/vgpu/libvgpu.so (src/libvgpu.c,
# its only hard-coded path). The image is mounted whole there, so the library is one directory down.
REDIRECT = "CUDA_REDIRECT"
IMAGE_ROOT = "/usr/local/vgpu"
LIBRARY = f"{IMAGE_ROOT}/{versions.HAMI_CORE_IMAGE_LIBRARY}"
# The variables that must name the library (in the fractional container) or be absent (anywhere else).
LIBRARY_NAMES = (PRELOAD, REDIRECT)
# Names HAMi-core reads to size, share or skip the memory limit, and the stems an envFrom prefix must not spell.
PROTECTED_PREFIX = "CUDA_DEVICE_MEMORY_"
PROTECTED_NAMES = (*LIBRARY_NAMES, "ACTIVE_OOM_KILLER")


@dataclass
class IsolationAdmissionArgs:
    team: Team
    provider: k8s.Provider


def isolation_policy_name(team: Team) -> str:
    return f"{policy_name(team)}-isolation"


# --- CEL building blocks --------------------------------------------------------------------


def _resources_all(condition: str) -> str:
    """``condition`` (over resource name ``r``) holds for every requested or limited resource of ``c``."""
    kinds = [f"(!has(c.resources.{kind}) || c.resources.{kind}.all(r, {condition}))" for kind in ("requests", "limits")]
    return f"(!has(c.resources) || ({' && '.join(kinds)}))"


def _annotation_prefix() -> str:
    return f"object.metadata.annotations['{SHARED_GPU_CONFIGMAP_ANNOTATION}']"


def _kai_configmap(ref: str, suffix: str) -> str:
    """``ref`` names KAI's per-container ConfigMap of this pod (the device-list one, or its ``-evar`` twin)."""
    annotated = (f"(has(object.metadata.annotations) && '{SHARED_GPU_CONFIGMAP_ANNOTATION}' in "
                 f"object.metadata.annotations && {_annotation_prefix()}.endsWith('-shared-gpu'))")
    return (f"({annotated} && {ref}.name.startsWith({_annotation_prefix()} + '-') && "
            f"{ref}.name.matches('-shared-gpu-i?[0-9]+{suffix}$'))")


def _kai_memory_limit(entry: str) -> str:
    ref = f"{entry}.valueFrom.configMapKeyRef"
    return (f"(has({entry}.valueFrom) && has({entry}.valueFrom.configMapKeyRef) && {ref}.key == '{MEMORY_LIMIT}' && "
            f"{_kai_configmap(ref, '')})")


def _protected(name: str) -> str:
    return f"({name}.startsWith('{PROTECTED_PREFIX}') || {name} in {list(PROTECTED_NAMES)})"


def _env_entry_ok() -> str:
    """An env entry of container ``c``: KAI's limit in the fractional container, the library as LD_PRELOAD or
    CUDA_REDIRECT."""
    return (f"!{_protected('e.name')} || "
            f"(e.name == '{MEMORY_LIMIT}' && c.name == variables.fractionContainer && {_kai_memory_limit('e')}) || "
            f"(e.name in {list(LIBRARY_NAMES)} && has(e.value) && e.value == '{LIBRARY}')")


def _env_from_ok() -> str:
    """An envFrom source of ``c``: prefixed so that no key can spell a protected name, or KAI's own -evar map."""
    safe_prefix = (f"({env_from_prefix_safe([PROTECTED_PREFIX, *PROTECTED_NAMES])} && "
                   f"!f.prefix.startsWith('{PROTECTED_PREFIX}'))")
    kai_evar = (f"(c.name == variables.fractionContainer && has(f.configMapRef) && "
                f"{_kai_configmap('f.configMapRef', '-evar')})")
    return f"{safe_prefix} || {kai_evar}"


def _whole(mount: str) -> str:
    """``mount`` mounts its volume whole: no subPath, no subPathExpr (an empty one is the same as none)."""
    return " && ".join(f"(!has({mount}.{field}) || {mount}.{field} == '')" for field in ("subPath", "subPathExpr"))


def _loads_library(volume: str) -> str:
    """Container ``c`` preloads HAMi-core from the pinned image, mounted whole at the image root, and tells
    HAMi-core where the library is; nothing else is mounted at, under or over that root."""
    named = " && ".join(f"c.env.exists(e, e.name == '{name}' && has(e.value) && e.value == '{LIBRARY}')"
                        for name in LIBRARY_NAMES)
    mounted = (f"(has(c.volumeMounts) && c.volumeMounts.exists(m, m.mountPath == '{IMAGE_ROOT}' && m.name == {volume}) "
               f"&& c.volumeMounts.all(m, m.mountPath == '{IMAGE_ROOT}' ? (m.name == {volume} && {_whole('m')}) : "
               f"!(m.mountPath.startsWith('{IMAGE_ROOT}/') || '{IMAGE_ROOT}'.startsWith(m.mountPath + '/') "
               f"|| m.mountPath == '/')))")
    return f"(has(c.env) && {named} && {mounted})"


# --- the rules, per tier --------------------------------------------------------------------------


def _no_mig(team: Team) -> dict:
    no_slices = _resources_all(f"!r.startsWith('{MIG_RESOURCE_PREFIX}')")
    return refusal("no-mig", every_container(SCHEDULED_LISTS, no_slices),
                   f"team {team.name} is {team.isolation.tier} and gets no MIG slices",
                   "request gpu-fraction, gpu-memory or nvidia.com/gpu instead")


def _mig_rules(team: Team) -> list[dict]:
    profile = team.isolation.mig_profile
    if team.isolation.mig_strategy == "single":
        gpus = _resources_all(f"!r.startsWith('{MIG_RESOURCE_PREFIX}')")
        pinned = (f"!variables.usesGpu || (has(object.spec.nodeSelector) && '{POOL_LABEL}' in object.spec.nodeSelector "
                  f"&& object.spec.nodeSelector['{POOL_LABEL}'] == '{team.isolation.node_pool}')")
        fix = (f"request whole nvidia.com/gpu (each is one {profile} slice of pool {team.isolation.node_pool}) "
               "and keep the pod on that pool")
        expression = f"!variables.fractional && {every_container(SCHEDULED_LISTS, gpus)} && ({pinned})"
    else:
        wanted = resource_name(profile)
        slices = _resources_all(f"r != '{GPU_RESOURCE}' && (!r.startsWith('{MIG_RESOURCE_PREFIX}') || r == '{wanted}')")
        fix = f"request {wanted} only (no gpu-fraction, gpu-memory or nvidia.com/gpu)"
        expression = f"!variables.fractional && {every_container(SCHEDULED_LISTS, slices)}"
    return [refusal("mig-profile", expression, f"team {team.name} gets MIG slices of profile {profile} only", fix)]


def _exclusive_rules(team: Team) -> list[dict]:
    whole = _resources_all(f"!r.startsWith('{MIG_RESOURCE_PREFIX}')")
    return [refusal("whole-gpus", f"!variables.fractional && {every_container(SCHEDULED_LISTS, whole)}",
                    f"team {team.name} gets whole GPUs only (no {', '.join(FRACTION_ANNOTATIONS)}, no MIG slices)",
                    f"request whole {GPU_RESOURCE} and remove the fraction annotations")]


def _memory_capped_rules(team: Team, mutated_by_kai: bool) -> list[dict]:
    env = every_container(CONTAINER_LISTS, f"!has(c.env) || c.env.all(e, {_env_entry_ok()})")
    env_from = every_container(CONTAINER_LISTS, f"!has(c.envFrom) || c.envFrom.all(f, {_env_from_ok()})")
    kai_limit = every_container(SCHEDULED_LISTS, f"c.name != variables.fractionContainer || "
                                                 f"(has(c.env) && c.env.exists(e, e.name == '{MEMORY_LIMIT}' && "
                                                 f"{_kai_memory_limit('e')}))")
    image = hami_core_image(team.vcluster)
    image_volume = (f"(has(object.spec.volumes) ? object.spec.volumes.filter(v, has(v.image) && "
                    f"v.image.reference == '{image}').map(v, v.name) : [])")
    library = every_container(SCHEDULED_LISTS, f"c.name != variables.fractionContainer || "
                                               f"{image_volume}.exists(name, {_loads_library('name')})")
    return [
        _no_mig(team),
        # Before KAI's webhook (inside the vCluster) the fractional container has no limit yet: KAI adds it.
        refusal("memory-limit", f"(!variables.fractional || ({kai_limit})) && {env} && {env_from}" if mutated_by_kai
                else f"{env} && {env_from}",
                f"team {team.name} is memory-capped: its fractional container keeps KAI's {MEMORY_LIMIT}, and no "
                f"container may set {PROTECTED_PREFIX}*, {', '.join(PROTECTED_NAMES)} (other than {PRELOAD} and "
                f"{REDIRECT} as {LIBRARY}) by env or by an envFrom source without a safe prefix",
                "remove those variables; give each envFrom source a prefix that does not start a HAMi-core name"),
        refusal("hami-core", f"!variables.fractional || ({library})",
                f"the fractional container of memory-capped team {team.name} must load HAMi-core, which enforces its "
                "memory limit",
                f"add the env {PRELOAD}={LIBRARY} and {REDIRECT}={LIBRARY}, a volume {{image: {{reference: {image}}}}} "
                f"and mount it whole (no subPath) at {IMAGE_ROOT}, nothing else there"),
    ]


def isolation_validations(team: Team, *, mutated_by_kai: bool = True) -> list[dict]:
    """The tier's rules for the pod KAI's webhook mutated (the host), or for the pod as the tenant wrote it."""
    tier = team.isolation.tier
    if tier == MIG:
        return _mig_rules(team)
    if tier == EXCLUSIVE:
        return _exclusive_rules(team)
    if tier == MEMORY_CAPPED:
        return _memory_capped_rules(team, mutated_by_kai)
    # A shared team on a site with a MIG-split pool: a slice it asks for inside its own quota is one a mig team's
    # quota promised (KAI charges both queues alike).
    return [_no_mig(team)] if team.isolation.mig_strategy is not None else []


def has_tier_policy(team: Team) -> bool:
    """The team's tier has rules of its own, so a policy of its own (a shared team's are the tenant admission's
    alone, but for [no-mig] where a pool is split)."""
    return bool(isolation_validations(team))


def isolation_policy_spec(team: Team) -> dict:
    return pod_policy_spec(team, isolation_validations(team))


class IsolationAdmission(pulumi.ComponentResource):
    policy: KubernetesObject
    binding: KubernetesObject

    def __init__(self, name: str, args: IsolationAdmissionArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(ISOLATION_ADMISSION_COMPONENT, name, None, opts)
        team = args.team
        self.policy, self.binding = policy_with_deny_binding(self, name, team, args.provider,
                                                             isolation_policy_name(team), isolation_policy_spec(team))
        self.register_outputs({"policy": isolation_policy_name(team), "tier": team.isolation.tier})


def isolation_outputs(team: Team) -> dict:
    """What the tenant registers about its tier, for the plan summary, and the stack exports per tenant, for the smoke
    test's pods (config/gpu_asks.py): a mig team's strategy names its slices, and a memory-capped team's pods load
    the HAMi-core image its vCluster adds."""
    isolation = team.isolation
    strategy = isolation.mig_strategy if isolation.tier == MIG else None
    hami_core = hami_core_image(team.vcluster) if isolation.tier == MEMORY_CAPPED else None
    return {key: value for key, value in (("tier", isolation.tier), ("migProfile", isolation.mig_profile),
                                          ("migStrategy", strategy), ("nodePool", isolation.node_pool),
                                          ("hamiCoreImage", hami_core)) if value is not None}


def isolation_admission(name: str, team: Team, provider: k8s.Provider,
                        parent: pulumi.Resource) -> list[IsolationAdmission]:
    """The team's tier policy, or nothing for a shared team on a site without a MIG-split pool."""
    if not has_tier_policy(team):
        return []
    return [IsolationAdmission(f"{name}-isolation", IsolationAdmissionArgs(team=team, provider=provider),
                               opts=pulumi.ResourceOptions(parent=parent))]
