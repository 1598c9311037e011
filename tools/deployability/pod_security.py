"""Pod Security Standards (Kubernetes docs, "Pod Security Standards"), checked on a pod spec.

Each violation names the control as the standard does ("Privileged Containers", "Running as
Non-root"...), the field at fault and what to set instead. ``baseline`` holds the baseline
controls; ``restricted`` holds both sets; ``privileged`` holds none. Written from the published
standard (the latest version of each control), not from the admission plugin's code.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Mapping

from config.versions import KUBERNETES_MINIMUM_VERSION, release_numbers
from tools.deployability.inputs import CONTAINER_LISTS

LEVELS = ("privileged", "baseline", "restricted")

_BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
_SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes"})
_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
_RESTRICTED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                                 "persistentVolumeClaim", "projected", "secret"})
# restricted takes image volumes from Kubernetes 1.33 on (k8s.io/pod-security-admission v0.33.0, the restrictedVolumes
# check; tests/test_deployability_pod_security_contract.py). The API server's own copy of the check decides, whatever
# enforce-version a namespace pins, so the site's Kubernetes version is what counts.
_IMAGE_VOLUMES_RESTRICTED_FROM = (1, 33)
_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


@dataclasses.dataclass(frozen=True)
class Violation:
    level: str    # the lowest level the control belongs to
    control: str  # the control's name in the standard
    field: str    # where in the pod spec
    fix: str

    def __str__(self) -> str:
        return f"{self.level} control \"{self.control}\": {self.field}: {self.fix}"


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for group in CONTAINER_LISTS:
        for index, container in enumerate(spec.get(group) or []):
            yield f"{group}[{index}]({container.get('name', '?')})", container


def _baseline(spec: Mapping[str, Any], annotations: Mapping[str, Any]) -> Iterator[Violation]:
    def v(control: str, field: str, fix: str) -> Violation:
        return Violation("baseline", control, field, fix)

    pod_context = spec.get("securityContext") or {}
    if (pod_context.get("windowsOptions") or {}).get("hostProcess"):
        yield v("HostProcess", "securityContext.windowsOptions.hostProcess", "remove it (no HostProcess pods)")
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            yield v("Host Namespaces", field, f"remove {field} (host namespaces are not allowed)")
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            yield v("HostPath Volumes", f"volumes[{volume.get('name')}].hostPath",
                    "use a persistentVolumeClaim, emptyDir or configMap volume instead")
    for sysctl in pod_context.get("sysctls") or []:
        if sysctl.get("name") not in _SAFE_SYSCTLS:
            yield v("Sysctls", f"securityContext.sysctls[{sysctl.get('name')}]", "only the safe sysctl set is allowed")
    yield from _baseline_context(pod_context, "securityContext", v)
    for where, container in _containers(spec):
        context = container.get("securityContext") or {}
        if (context.get("windowsOptions") or {}).get("hostProcess"):
            yield v("HostProcess", f"{where}.securityContext.windowsOptions.hostProcess", "remove it")
        if context.get("privileged"):
            yield v("Privileged Containers", f"{where}.securityContext.privileged", "set false or remove it")
        added = set((context.get("capabilities") or {}).get("add") or []) - _BASELINE_CAPABILITIES
        if added:
            yield v("Capabilities", f"{where}.securityContext.capabilities.add",
                    f"do not add {', '.join(sorted(added))} (beyond the baseline set)")
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                yield v("Host Ports", f"{where}.ports[{port.get('containerPort')}].hostPort",
                        "remove hostPort (use a Service)")
        if context.get("procMount") not in (None, "Default"):
            yield v("/proc Mount Type", f"{where}.securityContext.procMount", "use Default")
        yield from _baseline_context(context, f"{where}.securityContext", v)
        profile = annotations.get(_APPARMOR_ANNOTATION + str(container.get("name")))
        if profile is not None and profile != "runtime/default" and not str(profile).startswith("localhost/"):
            yield v("AppArmor", f"annotation {_APPARMOR_ANNOTATION}{container.get('name')}",
                    "use runtime/default or a localhost/ profile")


def _baseline_context(context: Mapping[str, Any], where: str, v) -> Iterator[Violation]:
    apparmor = (context.get("appArmorProfile") or {}).get("type")
    if apparmor not in (None, "RuntimeDefault", "Localhost"):
        yield v("AppArmor", f"{where}.appArmorProfile.type", "use RuntimeDefault or Localhost")
    selinux = context.get("seLinuxOptions") or {}
    if selinux.get("type", "") not in _SELINUX_TYPES:
        yield v("SELinux", f"{where}.seLinuxOptions.type", "use container_t (or leave it unset)")
    if selinux.get("user") or selinux.get("role"):
        yield v("SELinux", f"{where}.seLinuxOptions", "leave user and role unset")
    if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
        yield v("Seccomp", f"{where}.seccompProfile.type", "use RuntimeDefault (Unconfined is not allowed)")


def _restricted(spec: Mapping[str, Any], volume_types: frozenset[str]) -> Iterator[Violation]:
    def v(control: str, field: str, fix: str) -> Violation:
        return Violation("restricted", control, field, fix)

    pod_context = spec.get("securityContext") or {}
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if kinds and not kinds <= volume_types:
            yield v("Volume Types", f"volumes[{volume.get('name')}]",
                    f"{', '.join(sorted(kinds))} is not an allowed volume type")
    pod_non_root = pod_context.get("runAsNonRoot")
    pod_seccomp = (pod_context.get("seccompProfile") or {}).get("type")
    if pod_context.get("runAsUser") == 0:
        yield v("Running as Non-root user", "securityContext.runAsUser", "use a non-zero user id")
    for where, container in _containers(spec):
        context = container.get("securityContext") or {}
        if context.get("allowPrivilegeEscalation") is not False:
            yield v("Privilege Escalation", f"{where}.securityContext.allowPrivilegeEscalation", "set it to false")
        non_root = context.get("runAsNonRoot")
        if non_root is False or (non_root is None and pod_non_root is not True):
            yield v("Running as Non-root", f"{where}.securityContext.runAsNonRoot",
                    "set runAsNonRoot: true (on the pod or the container)")
        if context.get("runAsUser") == 0:
            yield v("Running as Non-root user", f"{where}.securityContext.runAsUser", "use a non-zero user id")
        seccomp = (context.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost") and not (seccomp is None and pod_seccomp in (
                "RuntimeDefault", "Localhost")):
            yield v("Seccomp", f"{where}.securityContext.seccompProfile",
                    "set seccompProfile.type: RuntimeDefault (on the pod or the container)")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            yield v("Capabilities", f"{where}.securityContext.capabilities.drop", "drop ALL")
        added = set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}
        if added:
            yield v("Capabilities", f"{where}.securityContext.capabilities.add",
                    f"do not add {', '.join(sorted(added))} (only NET_BIND_SERVICE may be added)")


def restricted_volume_types(kubernetes_version: str) -> frozenset[str]:
    """The volume types restricted allows on an API server of ``kubernetes_version`` (``1.NN``)."""
    if release_numbers(kubernetes_version)[:2] >= _IMAGE_VOLUMES_RESTRICTED_FROM:
        return _RESTRICTED_VOLUMES | {"image"}
    return _RESTRICTED_VOLUMES


def violations(spec: Mapping[str, Any], level: str, annotations: Mapping[str, Any] | None = None,
               kubernetes_version: str = KUBERNETES_MINIMUM_VERSION) -> list[Violation]:
    """The controls of ``level`` (and the levels below it) that the pod spec breaks on an API server of
    ``kubernetes_version`` (the oldest the program supports unless told)."""
    if level not in LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r}; one of {', '.join(LEVELS)}")
    found: list[Violation] = []
    if level in ("baseline", "restricted"):
        found.extend(_baseline(spec, annotations or {}))
    if level == "restricted":
        found.extend(_restricted(spec, restricted_volume_types(kubernetes_version)))
    return found
