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
(a list of strings at each) and ``objects`` (a list of objects at each, each described by its own ``TextPaths``), and
what its entries store beside their text (``entry_bytes``, ``present_bytes``: config/pod_entry_bytes.py), which the
rule sums apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from components.admission_devices import CONTAINER_LISTS
from config.pod_entry_bytes import ENTRY_BYTES, ENV_REFERENCE_BYTES

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
    # What one entry of each list or map at a path stores beside its text (config/pod_entry_bytes.py): the lists
    # above, and lists and maps of entries of a fixed size only (resources, gates, host aliases' names).
    entry_bytes: dict[str, int] = field(default_factory=dict)
    # What a message at a path stores, beside its text, where present.
    present_bytes: dict[str, int] = field(default_factory=dict)


def _entries(holder: str, *paths: str) -> dict[str, int]:
    """The bytes of an entry at each of ``paths``, whose lists are fields of message ``holder``."""
    return {path: ENTRY_BYTES[f"{holder}.{path.rsplit('.', 1)[-1]}"] for path in paths}


KEY_TO_PATH = TextPaths(strings=("key", "path"))
# A downward-API file: its path, and a resource reference's container and resource (only checked for presence and
# a prefix: hugepages- may be followed by anything).
DOWNWARD_FILE = TextPaths(strings=("path", "resourceFieldRef.containerName", "resourceFieldRef.resource"))
PROJECTION = TextPaths(objects={"configMap.items": KEY_TO_PATH, "secret.items": KEY_TO_PATH,
                                "downwardAPI.items": DOWNWARD_FILE},
                       entry_bytes={**_entries("ConfigMapProjection", "configMap.items"),
                                    **_entries("SecretProjection", "secret.items"),
                                    **_entries("DownwardAPIProjection", "downwardAPI.items")})
VOLUME = TextPaths(strings=("image.reference", "emptyDir.medium"),
                   objects={"configMap.items": KEY_TO_PATH, "secret.items": KEY_TO_PATH,
                            "downwardAPI.items": DOWNWARD_FILE, "projected.sources": PROJECTION},
                   entry_bytes={**_entries("ConfigMapVolumeSource", "configMap.items"),
                                **_entries("SecretVolumeSource", "secret.items"),
                                **_entries("DownwardAPIVolumeSource", "downwardAPI.items"),
                                **_entries("ProjectedVolumeSource", "projected.sources")})
ENV_VAR = TextPaths(strings=("name", "value", "valueFrom.resourceFieldRef.containerName",
                             "valueFrom.resourceFieldRef.resource", "valueFrom.fileKeyRef.key",
                             "valueFrom.fileKeyRef.path"),
                    present_bytes={"valueFrom": ENV_REFERENCE_BYTES})
NAMED_VALUE = TextPaths(strings=("name", "value"))
HANDLER_HEADERS = {f"{handler}.httpGet.httpHeaders": NAMED_VALUE for handler in HANDLERS}
HANDLER_COMMANDS = tuple(f"{handler}.exec.command" for handler in HANDLERS)
CONTAINER = TextPaths(
    strings=("image", "workingDir", "terminationMessagePath", *SECURITY_STRINGS,
             *(f"{handler}.httpGet.path" for handler in HANDLERS), *(f"{probe}.grpc.service" for probe in PROBES)),
    string_lists=("command", "args", *HANDLER_COMMANDS, "securityContext.capabilities.add",
                  "securityContext.capabilities.drop"),
    objects={"env": ENV_VAR, **HANDLER_HEADERS,
             "envFrom": TextPaths(strings=("prefix",)),
             "volumeMounts": TextPaths(strings=("mountPath", "subPath", "subPathExpr")),
             "volumeDevices": TextPaths(strings=("devicePath",)),
             "restartPolicyRules": TextPaths(entry_bytes=_entries("ContainerRestartRuleOnExitCodes",
                                                                  "exitCodes.values"))},
    entry_bytes={**_entries("Container", "command", "args", "env", "envFrom", "volumeMounts", "volumeDevices",
                            "resizePolicy", "restartPolicyRules"),
                 **_entries("ResourceRequirements", "resources.limits", "resources.requests"),
                 **_entries("ExecAction", *HANDLER_COMMANDS), **_entries("HTTPGetAction", *HANDLER_HEADERS),
                 **_entries("Capabilities", "securityContext.capabilities.add", "securityContext.capabilities.drop")})
# Preferred node affinity takes any value (its validation allows values no label could carry).
NODE_REQUIREMENT = TextPaths(string_lists=("values",), entry_bytes=_entries("NodeSelectorRequirement", "values"))
NODE_TERM = TextPaths(objects={"matchExpressions": NODE_REQUIREMENT, "matchFields": NODE_REQUIREMENT},
                      entry_bytes=_entries("NodeSelectorTerm", "matchExpressions", "matchFields"))
SELECTOR_REQUIREMENT = TextPaths(entry_bytes=_entries("LabelSelectorRequirement", "values"))


def _selectors(*selectors: str, lists: dict[str, int]) -> TextPaths:
    """The label selectors at ``selectors`` (their labels and their requirements' values, entries of fixed size),
    beside the ``lists`` of fixed-size entries of the object holding them."""
    return TextPaths(objects={f"{selector}.matchExpressions": SELECTOR_REQUIREMENT for selector in selectors},
                     entry_bytes={**{path: each for selector in selectors for path, each in _entries(
                         "LabelSelector", f"{selector}.matchLabels", f"{selector}.matchExpressions").items()},
                                  **lists})


def _affinity_term(prefix: str) -> TextPaths:
    return _selectors(f"{prefix}labelSelector", f"{prefix}namespaceSelector", lists=_entries(
        "PodAffinityTerm", f"{prefix}namespaces", f"{prefix}matchLabelKeys", f"{prefix}mismatchLabelKeys"))


SPREAD = _selectors("labelSelector", lists=_entries("TopologySpreadConstraint", "matchLabelKeys"))
AFFINITY_TERMS = (("required", _affinity_term("")), ("preferred", _affinity_term("podAffinityTerm.")))
POD_AFFINITIES = {f"affinity.{kind}.{when}DuringSchedulingIgnoredDuringExecution": (holder, term)
                  for kind, holder in (("podAffinity", "PodAffinity"), ("podAntiAffinity", "PodAntiAffinity"))
                  for when, term in AFFINITY_TERMS}
NODE_AFFINITY = "affinity.nodeAffinity."
REQUIRED_TERMS = f"{NODE_AFFINITY}requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
PREFERRED_TERMS = f"{NODE_AFFINITY}preferredDuringSchedulingIgnoredDuringExecution"
POD_SPEC = TextPaths(
    strings=("hostnameOverride", *SECURITY_STRINGS),
    objects={**{containers: CONTAINER for containers in CONTAINER_LISTS},
             "volumes": VOLUME,
             "dnsConfig.options": NAMED_VALUE,
             "securityContext.sysctls": TextPaths(strings=("value",)),
             REQUIRED_TERMS: NODE_TERM,
             PREFERRED_TERMS: TextPaths(
                 objects={"preference.matchExpressions": NODE_REQUIREMENT,
                          "preference.matchFields": NODE_REQUIREMENT},
                 entry_bytes=_entries("NodeSelectorTerm", "preference.matchExpressions", "preference.matchFields")),
             "hostAliases": TextPaths(entry_bytes=_entries("HostAlias", "hostnames")),
             "topologySpreadConstraints": SPREAD,
             **{path: term for path, (_, term) in POD_AFFINITIES.items()}},
    entry_bytes={**_entries("PodSpec", "volumes", "nodeSelector", "hostAliases", "readinessGates",
                            "schedulingGates", "topologySpreadConstraints"),
                 **{path: each for path, (holder, _) in POD_AFFINITIES.items()
                    for each in _entries(holder, path).values()},
                 **_entries("PodSpec", "overhead"),
                 **_entries("PodDNSConfig", "dnsConfig.options", "dnsConfig.nameservers", "dnsConfig.searches"),
                 **_entries("PodSecurityContext", "securityContext.sysctls", "securityContext.supplementalGroups"),
                 **_entries("NodeSelector", REQUIRED_TERMS), **_entries("NodeAffinity", PREFERRED_TERMS),
                 # Every container list holds its containers' own fields: rule containers bounds how many
                 # (config/synced_data.py counts them at their largest).
                 **{containers: 0 for containers in CONTAINER_LISTS}})


def counted_fields(paths: TextPaths = POD_SPEC, prefix: str = "") -> set[str]:
    """Every counted path from the pod spec, lists marked ``[]``: ``containers[].env[].value``."""
    found = {f"{prefix}{path}" for path in paths.strings} | {f"{prefix}{path}[]" for path in paths.string_lists}
    for path, element in paths.objects.items():
        found |= counted_fields(element, f"{prefix}{path}[].")
    return found
