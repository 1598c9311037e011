"""Where a pod holds text the API server does not bound in length: the paths rule ``pod-size`` counts, as data.

The API server checks most strings of a pod spec against a format with a length (names, label keys and values,
IPs) or a fixed set of values (policies, operators, effects). The ones below it checks for presence or for a shape
only (k8s.io/kubernetes pkg/apis/core/validation/validation.go: ``validateContainerCommon`` leaves an image,
working directory and termination message path unchecked, ``ValidateVolumeMounts`` and ``validateKeyToPath`` paths
to be relative or unique, ``validatePodDNSConfig`` only an option's name to be non-empty, preferred node affinity
takes any value), or bounds too loosely to matter beside a request of 3 MiB (a gMSA credential spec, 64 KiB; an
AppArmor profile path, 4 KiB). tests/test_pod_text_fields_contract.py classifies every string field of the pod
spec of every accepted Kubernetes: here, bounded by the API server (with the bound), or rewritten or refused on the
host; a release that adds a field turns it red.

A ``TextPaths`` describes the text under one object: ``strings`` (one string at each dotted path), ``string_lists``
(a list of strings at each) and ``objects`` (a list of objects at each, each described by its own ``TextPaths``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from components.admission_devices import CONTAINER_LISTS

HANDLERS = ("livenessProbe", "readinessProbe", "startupProbe", "lifecycle.postStart", "lifecycle.preStop")
PROBES = HANDLERS[:3]
# The confinement settings a container and the pod itself may carry: Pod Security baseline restricts some of their
# values (an SELinux type, Localhost profiles allowed), not their length, and a privileged team has no level.
SECURITY_STRINGS = ("securityContext.seLinuxOptions.user", "securityContext.seLinuxOptions.role",
                    "securityContext.seLinuxOptions.type", "securityContext.seLinuxOptions.level",
                    "securityContext.seccompProfile.localhostProfile",
                    "securityContext.appArmorProfile.localhostProfile",
                    "securityContext.windowsOptions.gmsaCredentialSpec")


@dataclass(frozen=True)
class TextPaths:
    strings: tuple[str, ...] = ()
    string_lists: tuple[str, ...] = ()
    objects: dict[str, "TextPaths"] = field(default_factory=dict)


KEY_TO_PATH = TextPaths(strings=("key", "path"))
# A downward-API file: its path, and a resource reference's container and resource (only checked for presence and
# a prefix: hugepages- may be followed by anything).
DOWNWARD_FILE = TextPaths(strings=("path", "resourceFieldRef.containerName", "resourceFieldRef.resource"))
PROJECTION = TextPaths(objects={"configMap.items": KEY_TO_PATH, "secret.items": KEY_TO_PATH,
                                "downwardAPI.items": DOWNWARD_FILE})
VOLUME = TextPaths(strings=("image.reference", "emptyDir.medium"),
                   objects={"configMap.items": KEY_TO_PATH, "secret.items": KEY_TO_PATH,
                            "downwardAPI.items": DOWNWARD_FILE, "projected.sources": PROJECTION})
ENV_VAR = TextPaths(strings=("name", "value", "valueFrom.resourceFieldRef.containerName",
                             "valueFrom.resourceFieldRef.resource", "valueFrom.fileKeyRef.key",
                             "valueFrom.fileKeyRef.path"))
NAMED_VALUE = TextPaths(strings=("name", "value"))
CONTAINER = TextPaths(
    strings=("image", "workingDir", "terminationMessagePath", *SECURITY_STRINGS,
             *(f"{handler}.httpGet.path" for handler in HANDLERS), *(f"{probe}.grpc.service" for probe in PROBES)),
    string_lists=("command", "args", *(f"{handler}.exec.command" for handler in HANDLERS),
                  "securityContext.capabilities.add", "securityContext.capabilities.drop"),
    objects={"env": ENV_VAR, **{f"{handler}.httpGet.httpHeaders": NAMED_VALUE for handler in HANDLERS},
             "envFrom": TextPaths(strings=("prefix",)),
             "volumeMounts": TextPaths(strings=("mountPath", "subPath", "subPathExpr")),
             "volumeDevices": TextPaths(strings=("devicePath",))})
# Preferred node affinity takes any value (its validation allows values no label could carry).
NODE_REQUIREMENT = TextPaths(string_lists=("values",))
NODE_TERM = TextPaths(objects={"matchExpressions": NODE_REQUIREMENT, "matchFields": NODE_REQUIREMENT})
POD_SPEC = TextPaths(
    strings=("hostnameOverride", *SECURITY_STRINGS),
    objects={**{containers: CONTAINER for containers in CONTAINER_LISTS},
             "volumes": VOLUME,
             "dnsConfig.options": NAMED_VALUE,
             "securityContext.sysctls": TextPaths(strings=("value",)),
             "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms": NODE_TERM,
             "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution": TextPaths(
                 objects={"preference.matchExpressions": NODE_REQUIREMENT,
                          "preference.matchFields": NODE_REQUIREMENT})})


def counted_fields(paths: TextPaths = POD_SPEC, prefix: str = "") -> set[str]:
    """Every counted path from the pod spec, lists marked ``[]``: ``containers[].env[].value``."""
    found = {f"{prefix}{path}" for path in paths.strings} | {f"{prefix}{path}[]" for path in paths.string_lists}
    for path, element in paths.objects.items():
        found |= counted_fields(element, f"{prefix}{path}[].")
    return found
