"""The device rules of a tenant's host pod policy: which GPUs and host devices the NVIDIA stack gives a container.

The container runtime learns a container's devices from the container itself: the device plugin's (or KAI's) device
list in ``NVIDIA_VISIBLE_DEVICES``, a volume-mount device list, CDI annotations, and environment variables the NVIDIA
Container Toolkit reads from the container's whole environment, the image's ``ENV`` included. So the host refuses a
device list KAI did not write (``device-env``, ``gpu-env-from``), mounts that name devices (``device-paths``), and
asks every container that holds a GPU to switch the toolkit's device features off itself (``device-features``): with
a GPU in the container, ``NVIDIA_MOFED=enabled``, ``NVIDIA_GDS``, ``NVIDIA_GDRCOPY`` and ``NVIDIA_NVSWITCH`` add
the node's RDMA (``/dev/infiniband``), GPUDirect Storage, GDRCopy and NVSwitch device nodes, and
``NVIDIA_IMEX_CHANNELS`` the node's IMEX channels, to the container (nvidia-container-toolkit v1.17.0 to v1.20.0,
``internal/modifier/gated.go`` and ``cdi.go`` in the legacy and jit-cdi modes, the hook's ``--imex-channel`` in
legacy mode; ``auto`` resolves to jit-cdi from v1.18.0). The policy cannot read an image's ``ENV``; an entry of the
pod's own ``env`` overrides it (and ``envFrom``), so the pod must carry one. The in-vCluster defaults add them
(components/virtual_defaults.py). tests/test_toolkit_env_contract.py classifies every variable the toolkit reads.
"""

from __future__ import annotations

from components.admission_metadata import has_key, refusal

GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
# The one value with which the toolkit sees no device request. "none" is a request for no GPU (its list holds one
# empty id, internal/config/image/devices.go), which passes the toolkit's "no devices requested" gate: the container
# gets the driver's libraries and, with the feature variables set to enabled, the node's RDMA, GPUDirect, GDRCopy and
# NVSwitch devices and IMEX channels, and toolkit v1.18.0 and v1.18.1 in jit-cdi mode turn it into a CDI request for
# every GPU of the node (fixed in v1.18.2; tests/test_toolkit_env_contract.py).
BLANK_VISIBLE_DEVICES = "void"
# KAI names the ConfigMap that carries a fractional container's device list in this annotation,
# with a "-shared-gpu" suffix, and references it as "<name>-<container index>".
SHARED_GPU_CONFIGMAP_ANNOTATION = "runai/shared-gpu-configmap"
# The toolkit's volume-mount device list (off in the GPU Operator's default toolkit settings, refused
# anyway); CDI device annotations are a reserved key space (components/admission_keys.py).
DEVICE_LIST_MOUNT_DIR = "/var/run/nvidia-container-devices"
# The toolkit's device features, each with the value that keeps it off: a feature is on only for the exact value
# "enabled", and an IMEX channel list of "void" names none.
TOOLKIT_FEATURES = {"NVIDIA_GDS": "disabled", "NVIDIA_MOFED": "disabled", "NVIDIA_GDRCOPY": "disabled",
                    "NVIDIA_NVSWITCH": "disabled", "NVIDIA_IMEX_CHANNELS": "void"}
# Every other variable the toolkit reads from a container, with why the host needs no rule for it (the contract test
# fails when a toolkit release reads one more): a ``*`` ends a family.
TOOLKIT_UNGUARDED = {
    "NVIDIA_DRIVER_CAPABILITIES": "which driver libraries of the container's own GPUs it gets; graphics adds the DRM "
                                  "nodes of those GPUs only (internal/modifier/graphics.go)",
    "NVIDIA_REQUIRE_*": "driver, CUDA and architecture constraints: a container that does not meet them fails to start",
    "NVIDIA_DISABLE_REQUIRE": "turns those constraints off",
    "NVIDIA_MIG_CONFIG_DEVICES": "the hook refuses it in an unprivileged container, which is all a team below Pod "
                                 "Security privileged runs (cmd/nvidia-container-runtime-hook container_config.go)",
    "NVIDIA_MIG_MONITOR_DEVICES": "refused in an unprivileged container like NVIDIA_MIG_CONFIG_DEVICES",
    "NVIDIA_CTK_LIBCUDA_DIR": "written by the toolkit into the container's CDI edits, never read from the container",
    "NVIDIA_CTK_CONFIG_FILE_PATH": "v1.18: the toolkit's own configuration file, read from the runtime's environment on "
                                   "the node (internal/config/config.go), not the container's",
    "CUDA_VERSION": f"marks a legacy CUDA image, for which an unset {VISIBLE_DEVICES} means every GPU: KAI sets it in "
                    "every container without a GPU (device-env), and in one holding a GPU the device plugin's list "
                    "or CDI request, which the toolkit prefers (internal/config/image/cuda_image.go VisibleDevices), "
                    "names the devices",
}
# The MIG slices KAI charges a queue for: it reads a slice's compute units from the resource name with the pattern
# ^nvidia.com/mig-(\d+)g\.(\d+)gb$ and counts any other name as zero GPUs (pkg/scheduler/api/common_info/resources/mig.go,
# GetGpusQuota in resource_info/gpu_resource_requirment.go, v0.16.4 to v0.17.0), while the device plugin also offers the
# GPU Operator's media-extension profiles (``1g.10gb+me``, ``1g.24gb+me.all``: its default MIG manager config).
# Compute 1 to 7 (a GPU has seven slices), memory in whole GB below 1,000 (the largest card's slice is 180gb).
KAI_MIG_NAME = "^nvidia\\\\.com/mig-[1-7]g\\\\.[1-9][0-9]{0,2}gb$"  # backslashes doubled for the CEL string
# What a container may request besides MIG slices (rule mig-names): what KAI charges a queue for, ephemeral storage
# (the LimitRange and the quota bound it) and huge pages of the two x86-64 sizes. KAI's scheduler gives every resource
# name any pod requests a dimension of every pod's and node's vector on every cycle, and charges no queue for the rest.
ALLOWED_RESOURCES = ("cpu", "memory", "ephemeral-storage", GPU_RESOURCE, "hugepages-2Mi", "hugepages-1Gi")
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
# The containers a pod is sized and scheduled with: ephemeral containers have no resources and KAI never mutates them.
SCHEDULED_LISTS = CONTAINER_LISTS[:2]

WHOLE_GPU = f"r == '{GPU_RESOURCE}'"
MIG_SLICE = f"r.startsWith('{MIG_RESOURCE_PREFIX}')"


def holds_gpu(container: str, resource: str = f"({WHOLE_GPU} || {MIG_SLICE})") -> str:
    """A container the device plugin gives GPUs to: a non-zero request or limit of a resource ``r`` for which
    ``resource`` holds (by default whole GPUs and MIG slices)."""
    kinds = []
    for kind in ("requests", "limits"):
        resources = f"{container}.resources.{kind}"
        kinds.append(f"(has({container}.resources.{kind}) && {resources}.exists(r, "
                     f"{resource} && !string({resources}[r]).matches('^[0.]+[a-zA-Z]*$')))")
    return f"(has({container}.resources) && ({' || '.join(kinds)}))"


def with_gpu(container: str) -> str:
    """A container the runtime gives a GPU to: one holding whole GPUs or MIG slices, or the fractional container
    (``variables.fractionContainer`` is empty on a pod without a fraction, and no container is named so)."""
    return f"({holds_gpu(container)} || {container}.name == variables.fractionContainer)"


def every_container(lists: tuple[str, ...], condition: str) -> str:
    """``condition`` (over ``c``) holds for every container of the named lists."""
    return " && ".join(f"(!has(object.spec.{field}) || object.spec.{field}.all(c, {condition}))" for field in lists)


def pod_holds(resource: str) -> str:
    """A container or init container of the pod holds a non-zero amount of a resource ``r`` matching ``resource``."""
    holds = " || ".join(f"(has(object.spec.{field}) && object.spec.{field}.exists(c, {holds_gpu('c', resource)}))"
                        for field in SCHEDULED_LISTS)
    return f"({holds})"


def _env_entries(container: str, condition: str, quantifier: str) -> str:
    default = "true" if quantifier == "all" else "false"
    return f"(has({container}.env) ? {container}.env.{quantifier}(e, {condition}) : {default})"


def _blank_literal(entry: str) -> str:
    return f"(has({entry}.value) && {entry}.value == '{BLANK_VISIBLE_DEVICES}')"


def _kai_device_list(entry: str) -> str:
    """The fractional container's device list: KAI's ConfigMap for one container of this pod, nothing else
    (the prefix itself is checked by rule device-list-name)."""
    ref = f"{entry}.valueFrom.configMapKeyRef"
    return (f"(has({entry}.valueFrom) && has({entry}.valueFrom.configMapKeyRef) && {ref}.key == '{VISIBLE_DEVICES}'"
            f" && {has_key('object', 'annotations', SHARED_GPU_CONFIGMAP_ANNOTATION)}"
            f" && object.metadata.annotations['{SHARED_GPU_CONFIGMAP_ANNOTATION}'].endsWith('-shared-gpu')"
            f" && {ref}.name.startsWith(object.metadata.annotations['{SHARED_GPU_CONFIGMAP_ANNOTATION}'] + '-')"
            f" && {ref}.name.substring(size(object.metadata.annotations['{SHARED_GPU_CONFIGMAP_ANNOTATION}']))"
            f".matches('^-i?[0-9]+$'))")


def _device_env_ok(container: str, mutated_by_kai: bool) -> str:
    """No literal device list but void, and a reference only as KAI's, only in the fractional container.

    KAI's pod webhook (failurePolicy Fail, every kai-scheduler pod CREATE) writes void into each container
    that holds no GPU, image ENV or not. Ephemeral containers are added later through a subresource the
    webhook never sees, so they must carry the blank value themselves.
    """
    entry_ok = f"e.name != '{VISIBLE_DEVICES}' || {_blank_literal('e')}"
    if mutated_by_kai:
        entry_ok += f" || ({container}.name == variables.fractionContainer && {_kai_device_list('e')})"
        return _env_entries(container, entry_ok, "all")
    blank = _env_entries(container, f"e.name == '{VISIBLE_DEVICES}' && {_blank_literal('e')}", "exists")
    return f"({_env_entries(container, entry_ok, 'all')} && {blank})"


def env_from_prefix_safe(stems: list[str]) -> str:
    """envFrom source ``f`` has a prefix with which none of ``stems`` starts: no key of the source, whatever the
    tenant puts in its ConfigMap or Secret, can complete the prefix to a name beginning with a stem."""
    return f"has(f.prefix) && f.prefix != '' && !{stems}.exists(s, s.startsWith(f.prefix))"


def _env_from_prefixed(container: str) -> str:
    """A whole-GPU container's env overrides the device plugin's list: no envFrom source may spell its name."""
    return (f"(!{holds_gpu(container)} || !has({container}.envFrom) || "
            f"{container}.envFrom.all(f, {env_from_prefix_safe([VISIBLE_DEVICES])}))")


def toolkit_features_off(container: str) -> str:
    """Every toolkit feature variable is in ``container``'s env, each entry of it a literal that keeps it off: the
    pod's env overrides the image's ENV and envFrom, and a reference could resolve to "enabled"."""
    names = list(TOOLKIT_FEATURES)
    return (f"(has({container}.env) && {names}.all(n, {container}.env.exists(e, e.name == n)) && "
            f"{container}.env.all(e, !(e.name in {names}) || (has(e.value) && !has(e.valueFrom) && "
            f"e.value == {TOOLKIT_FEATURES}[e.name])))")


def device_env() -> dict:
    expression = (f"{every_container(SCHEDULED_LISTS, _device_env_ok('c', mutated_by_kai=True))} && "
                  f"{every_container(('ephemeralContainers',), _device_env_ok('c', mutated_by_kai=False))}")
    return refusal("device-env", expression,
                   f"{VISIBLE_DEVICES} may only be set to void (none still asks the NVIDIA runtime for the node's "
                   "driver and device features), only KAI may point a fractional container at its device list, and an "
                   "ephemeral container must carry the blank value itself",
                   f"remove your own {VISIBLE_DEVICES} settings; for an ephemeral debug container add the env "
                   f"{VISIBLE_DEVICES}=void")


def gpu_env_from() -> dict:
    return refusal("gpu-env-from", every_container(SCHEDULED_LISTS, _env_from_prefixed('c')),
                   "a container holding whole GPUs or a MIG slice takes envFrom variables only under a prefix that "
                   f"cannot spell {VISIBLE_DEVICES} (none, or a start of that name such as NVIDIA_, would let a key "
                   "override the device plugin's list)",
                   "give each envFrom source a prefix such as APP_, or list the keys you need under env")


def device_features() -> dict:
    settings = ", ".join(f"{name}={value}" for name, value in TOOLKIT_FEATURES.items())
    return refusal("device-features", every_container(SCHEDULED_LISTS, f"!{with_gpu('c')} || {toolkit_features_off('c')}"),
                   "a container holding a GPU switches the NVIDIA container toolkit's device features off in its own "
                   "env, whatever its image's ENV says: with a GPU, NVIDIA_MOFED, NVIDIA_GDS, NVIDIA_GDRCOPY and "
                   "NVIDIA_NVSWITCH set to enabled add the node's RDMA, GPUDirect Storage, GDRCopy and NVSwitch "
                   "devices, and NVIDIA_IMEX_CHANNELS the node's IMEX channels, outside what KAI allocated",
                   f"set the env {settings} as literal values in each container that requests nvidia.com/gpu, a MIG "
                   "slice or the fraction (the vCluster adds them to new pods)")


def device_paths() -> dict:
    mounts = (f"(!has(c.volumeMounts) || c.volumeMounts.all(m, !m.mountPath.startsWith('{DEVICE_LIST_MOUNT_DIR}')"
              f" && !m.mountPath.startsWith('{DEVICE_LIST_MOUNT_DIR.replace('/var/run', '/run')}')))")
    return refusal("device-paths", every_container(CONTAINER_LISTS, mounts),
                   f"pods may not name devices to the container runtime themselves (mounts under {DEVICE_LIST_MOUNT_DIR})",
                   "remove them; request GPUs with gpu-fraction, gpu-memory or nvidia.com/gpu")


def _requested_names(container: str, condition: str) -> str:
    """``condition`` (over a resource name ``r``) holds for every resource ``container`` requests or limits."""
    return " && ".join(f"(!has({container}.resources) || !has({container}.resources.{kind}) || "
                       f"{container}.resources.{kind}.all(r, {condition}))" for kind in ("requests", "limits"))


def mig_names() -> dict:
    """On CREATE: resource names cannot change afterwards (a resize changes CPU and memory only)."""
    names = every_container(SCHEDULED_LISTS, _requested_names("c", f"!{MIG_SLICE} || r.matches('{KAI_MIG_NAME}')"))
    return refusal("mig-names", f"request.operation != 'CREATE' || ({names})",
                   "KAI charges a queue for a MIG slice by the compute units it reads from a name of the form "
                   "nvidia.com/mig-<n>g.<m>gb and counts any other MIG name (the +me profiles, 1g.10gb+me) as zero "
                   "GPUs",
                   "request a profile of the form nvidia.com/mig-<n>g.<m>gb, such as nvidia.com/mig-1g.10gb")


def resource_names() -> dict:
    """On CREATE, as mig-names."""
    names = every_container(SCHEDULED_LISTS, _requested_names("c", f"{MIG_SLICE} || r in {list(ALLOWED_RESOURCES)}"))
    return refusal("resource-names", f"request.operation != 'CREATE' || ({names})",
                   "KAI's scheduler adds every resource name a pod requests to the vectors of every pod and node it "
                   "schedules, on every cycle, and no queue charges an extended resource: a container may request "
                   f"only {', '.join(ALLOWED_RESOURCES)} and MIG slices",
                   "remove the other resources from the containers' requests and limits")
