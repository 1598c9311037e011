"""Names and labels the API server and its controllers accept, which no OpenAPI schema states.

The API server checks each object's name by its kind (a Namespace's is a DNS-1123 label, a Service's a DNS-1035
label, an RBAC object's a path segment, the others' a DNS-1123 subdomain), every label key and value, each
container's name (a DNS-1123 label), each container port's (an IANA service name: at most 15 characters) and each
Service port's (a DNS-1123 label). Some
controllers then put the name into a label of what they create, so a valid name can still leave a workload with
no pods: a StatefulSet labels each pod with its revision, ``<name>-<hash>`` with a hash of up to 10 characters,
and a Job labels its pods with its name; label values hold at most 63 characters. ``check_names`` reports each
as (object, problem, fix).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Optional, Sequence

from config.key_types import DNS_LABEL
from tools.deployability.inputs import CONTAINER_LISTS, K8sObject, pod_templates
from tools.offline.recording import REDACTED, UNKNOWN

DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
# An IANA service name: lower-case letters, digits and single '-' between them, at least one letter.
PORT_NAME = re.compile(r"(?=.*[a-z])[a-z0-9]+(-[a-z0-9]+)*")
# The longest hash the StatefulSet controller appends to its name in the revision label of each pod (a 32-bit
# number in decimal), and the Job controller's label of its pods holds the Job's name whole.
REVISION_HASH_LENGTH = 10
LABEL_VALUE_LENGTH = 63
# The longest name whose controller's pod label still fits, by kind (the API server itself holds a CronJob's to
# 52, as its Jobs add an 11-character suffix).
LONGEST_NAME = {"StatefulSet": LABEL_VALUE_LENGTH - 1 - REVISION_HASH_LENGTH, "Job": LABEL_VALUE_LENGTH,
                "CronJob": 52}
RBAC_KINDS = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
DNS_LABEL_KINDS = {"Namespace"}
DNS_1035_KINDS = {"Service"}


def _name_problem(kind: str, name: str) -> Optional[str]:
    if name in (UNKNOWN, REDACTED):
        return None  # a value the plan cannot know (another resource's output, a secret)
    if kind in RBAC_KINDS:
        return None if name not in (".", "..") and not any(c in name for c in "/%") else "is not a path segment"
    if kind in DNS_1035_KINDS:
        return None if len(name) <= 63 and DNS_1035_LABEL.fullmatch(name) else \
            "is not a DNS-1035 label (at most 63 lower-case letters, digits or '-', starting with a letter)"
    if kind in DNS_LABEL_KINDS:
        return None if len(name) <= 63 and DNS_LABEL.fullmatch(name) else \
            "is not a DNS-1123 label (at most 63 lower-case letters, digits or '-')"
    if len(name) > 253 or not DNS_SUBDOMAIN.fullmatch(name):
        return "is not a DNS-1123 subdomain (at most 253 lower-case letters, digits, '-' or '.')"
    longest = LONGEST_NAME.get(kind)
    if longest is not None and len(name) > longest:
        return (f"is {len(name)} characters long: the {kind} controller puts it in a label of each pod it makes, "
                f"which holds at most {LABEL_VALUE_LENGTH}, so a {kind} name may have at most {longest}")
    return None


def _label_problem(key: str, value: Any) -> Optional[str]:
    if value in (UNKNOWN, REDACTED):
        return None
    prefix, _, name = key.rpartition("/")
    if (prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix))) or len(name) > 63 \
            or not LABEL_NAME.fullmatch(name):
        return f"label key {key!r} is not a valid label name"
    if not isinstance(value, str) or len(value) > LABEL_VALUE_LENGTH or not LABEL_VALUE.fullmatch(value):
        return f"label {key}={value!r} is not a valid label value (at most 63 letters, digits, '-', '_' or '.')"
    return None


def _pod_problems(labels: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterable[str]:
    for key, value in labels.items():
        problem = _label_problem(str(key), value)
        if problem:
            yield f"pod template: {problem}"
    for field in CONTAINER_LISTS:
        for container in spec.get(field) or []:
            name = str(container.get("name", ""))
            if len(name) > 63 or not DNS_LABEL.fullmatch(name):
                yield f"{field}: container name {name!r} is not a DNS-1123 label"
            for port in container.get("ports") or []:
                if "name" in port and (len(str(port["name"])) > 15 or not PORT_NAME.fullmatch(str(port["name"]))):
                    yield (f"{field}: port name {port['name']!r} of container {name!r} is not an IANA service name "
                           "(at most 15 lower-case letters, digits or single '-', one letter at least)")


def _object_problems(obj: K8sObject) -> Iterable[str]:
    problem = _name_problem(obj.kind, obj.name) if obj.name else None
    if problem:
        yield f"name {obj.name!r} {problem}"
    for key, value in ((obj.manifest.get("metadata") or {}).get("labels") or {}).items():
        problem = _label_problem(str(key), value)
        if problem:
            yield f"metadata.labels: {problem}"
    if obj.kind == "Service":
        for port in (obj.manifest.get("spec") or {}).get("ports") or []:
            if "name" in port and (len(str(port["name"])) > 63 or not DNS_LABEL.fullmatch(str(port["name"]))):
                yield f"port name {port['name']!r} is not a DNS-1123 label"


def check_names(objects: Sequence[K8sObject]) -> list[tuple[K8sObject, str, str]]:
    mine = [obj for obj in objects if not obj.patch]  # a patch keeps the names and labels someone else chose
    found = [(obj, problem) for obj in mine for problem in _object_problems(obj)]
    found += [(obj, problem) for obj, metadata, spec in pod_templates(mine)
              for problem in _pod_problems(metadata.get("labels") or {}, spec)]
    return [(obj, problem, "choose a valid or shorter name or label (the config key that sets it, e.g. "
                           "teams[].vclusterName, or the chart value)") for obj, problem in found]
