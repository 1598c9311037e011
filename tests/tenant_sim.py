"""What the host API server sees when a tenant writes a pod, built the way upstream builds it.

- ``vcluster_sync``: the host pod vCluster 0.36.1's syncer creates from a virtual pod
  (pkg/controllers/resources/pods/translate/translator.go): renamed ``P-x-N-x-<release>`` into the
  tenant's host namespace, vCluster's labels and annotations added, tenant labels, annotations, env,
  ``schedulerName``, ``runtimeClassName``, ``nodeName`` and ephemeral containers copied unchanged,
  ``priorityClassName`` reset, enforced tolerations appended, the node-sync labels turned into a
  nodeSelector, written by the syncer's service account.
- ``kai_mutate``: KAI v0.16.4's pod webhook on CREATE of a ``kai-scheduler`` pod with GPU sharing and
  ``blockNvidiaVisibleDevices`` on (pkg/admission/webhook/v1alpha2/{gpusharing,deviceaccess,
  runtimeenforcement}): the fractional container gets its device list from a ConfigMap named after the
  ``runai/shared-gpu-configmap`` annotation, every other container that requests no GPU gets
  ``NVIDIA_VISIBLE_DEVICES=void`` (its first such entry overwritten, else appended), and a fractional pod
  without a runtime class gets ``nvidia``.
- ``Admission``: the API server's part of a ValidatingAdmissionPolicy as far as these policies use it
  (match rules, namespace selector, match conditions, variables, validations), with the policy's CEL
  evaluated by cel-python.
- ``Tenant`` (``tenant_of``): one team of a program run, syncing its pods and asking its admission
  policy, as the program renders it.
"""

from __future__ import annotations

import copy
from typing import Optional

import celpy

from config import load_platform
from config.model import Platform, Team
from policy.label_selectors import selector_matches

GPU_RESOURCE = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
KAI_POD_GROUPER = "system:serviceaccount:kai-scheduler:pod-grouper"
KAI_SCHEDULER = "kai-scheduler"  # the schedulerName of KAI's pods
POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"


def virtual_pod(name: str = "model", namespace: str = "default", *, queue: Optional[str] = None,
                scheduler: Optional[str] = None, annotations: Optional[dict] = None, labels: Optional[dict] = None,
                containers: Optional[list] = None, **spec) -> dict:
    """A pod as a tenant writes it inside its vCluster."""
    pod_labels = dict(labels or {})
    if queue is not None:
        pod_labels["kai.scheduler/queue"] = queue
    pod_spec = {"containers": containers or [container()], **spec}
    if scheduler is not None:
        pod_spec["schedulerName"] = scheduler
    metadata = {"name": name, "namespace": namespace, "labels": pod_labels}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def container(name: str = "main", *, gpus: Optional[str] = None, mig: Optional[str] = None,
              env: Optional[dict] = None, env_entries: Optional[list] = None, env_from: Optional[list] = None,
              cpu: str = "500m") -> dict:
    """A container; limits only, as users write them (the API server copies them to requests)."""
    limits = {"cpu": cpu, "memory": "1Gi"}
    if gpus is not None:
        limits[GPU_RESOURCE] = gpus
    if mig is not None:
        limits[mig] = "1"
    result = {"name": name, "image": "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04",
              "resources": {"limits": limits, "requests": dict(limits)}}
    entries = [{"name": key, "value": value} for key, value in (env or {}).items()] + list(env_entries or [])
    if entries:
        result["env"] = entries
    if env_from:
        result["envFrom"] = env_from
    return result


def vcluster_sync(pod: dict, team: Team) -> dict:
    """The host pod the team's vCluster syncer creates for ``pod``."""
    host = copy.deepcopy(pod)
    virtual_name, virtual_namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    metadata = host["metadata"]
    release = team.vcluster_name
    metadata["name"] = f"{virtual_name}-x-{virtual_namespace}-x-{release}"
    metadata["namespace"] = team.namespace
    # A tenant's own vcluster.loft.sh/* labels are renamed on the host, so they cannot spoof these.
    labels = {key if not key.startswith("vcluster.loft.sh/") else f"vcluster.loft.sh/x-{key.split('/', 1)[1]}": value
              for key, value in metadata.get("labels", {}).items()}
    labels.update({"vcluster.loft.sh/managed-by": release, "vcluster.loft.sh/namespace": virtual_namespace})
    metadata["labels"] = labels
    metadata["annotations"] = {**metadata.get("annotations", {}),
                               "vcluster.loft.sh/name": virtual_name, "vcluster.loft.sh/namespace": virtual_namespace,
                               "vcluster.loft.sh/object-name": virtual_name}
    spec = host["spec"]
    spec["serviceAccountName"] = f"vc-workload-{release}"
    spec["enableServiceLinks"] = False
    spec.pop("priorityClassName", None)
    spec.pop("priority", None)
    tolerations = list(spec.get("tolerations", []))
    for entry in team.vcluster.enforce_tolerations:
        key_value, effect = entry.rsplit(":", 1)
        key, _, value = key_value.partition("=")
        toleration = {"key": key, "operator": "Equal" if value else "Exists", "effect": effect}
        if value:
            toleration["value"] = value
        tolerations.append(toleration)
    spec["tolerations"] = tolerations
    if team.vcluster.node_labels:
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **team.vcluster.node_labels}
    return host


def _requests_gpu(entry: dict) -> bool:
    requests = entry.get("resources", {}).get("requests", {})
    return any((name == GPU_RESOURCE or name.startswith(MIG_PREFIX)) and str(value) not in ("0", "0m")
               for name, value in requests.items())


def _set_env(entry: dict, name: str, value: dict) -> None:
    entry["env"] = [item for item in entry.get("env", []) if item["name"] != name] + [{"name": name, **value}]


def kai_mutate(pod: dict, *, configmap_prefix: str = "model-x-default-abcdefg-shared-gpu") -> dict:
    """KAI's pod webhook on CREATE (it only handles pods of its scheduler)."""
    mutated = copy.deepcopy(pod)
    spec = mutated["spec"]
    if spec.get("schedulerName") != KAI_SCHEDULER:
        return mutated
    annotations = mutated["metadata"].setdefault("annotations", {})
    fraction_container = None
    if "gpu-fraction" in annotations or "gpu-memory" in annotations:
        wanted = annotations.get("gpu-fraction-container-name", spec["containers"][0]["name"])
        fraction_container = next(entry for entry in spec["containers"] + spec.get("initContainers", [])
                                  if entry["name"] == wanted)
        prefix = annotations.setdefault("runai/shared-gpu-configmap", configmap_prefix)
        index = spec["containers"].index(fraction_container) if fraction_container in spec["containers"] \
            else f"i{spec['initContainers'].index(fraction_container)}"
        _set_env(fraction_container, VISIBLE_DEVICES,
                 {"valueFrom": {"configMapKeyRef": {"name": f"{prefix}-{index}", "key": VISIBLE_DEVICES}}})
        fraction_container.setdefault("envFrom", []).append({"configMapRef": {"name": f"{prefix}-{index}-evar"}})
        spec.setdefault("runtimeClassName", "nvidia")
    for entry in spec["containers"] + spec.get("initContainers", []):
        if entry is fraction_container or _requests_gpu(entry):
            continue
        existing = next((item for item in entry.get("env", []) if item["name"] == VISIBLE_DEVICES), None)
        if existing is not None:
            existing.pop("valueFrom", None)
            existing["value"] = "void"
        else:
            entry.setdefault("env", []).append({"name": VISIBLE_DEVICES, "value": "void"})
    return mutated


class Admission:
    """One ValidatingAdmissionPolicy and its binding, evaluated like the API server does."""

    def __init__(self, policy_spec: dict, binding_spec: dict):
        self.spec = policy_spec
        self.binding = binding_spec
        self.env = celpy.Environment()
        self._programs: dict = {}

    def _run(self, expression: str, activation: dict):
        if expression not in self._programs:
            self._programs[expression] = self.env.program(self.env.compile(expression))
        return self._programs[expression].evaluate(activation)

    def _activation(self, pod: dict, old: Optional[dict], request: dict, variables: dict) -> dict:
        return {"object": celpy.json_to_cel(pod), "oldObject": celpy.json_to_cel(old),
                "request": celpy.json_to_cel(request), "variables": celpy.json_to_cel(variables)}

    def matches(self, namespace: str, pod: dict, *, operation: str = "CREATE", subresource: str = "",
                old: Optional[dict] = None, user: str = "") -> bool:
        constraints = self.spec["matchConstraints"]
        resource = "pods" + (f"/{subresource}" if subresource else "")
        namespace_labels = {"kubernetes.io/metadata.name": namespace}
        selectors = [constraints.get("namespaceSelector", {}), self.binding["matchResources"]["namespaceSelector"]]
        if not any(operation in rule["operations"] and resource in rule["resources"]
                   for rule in constraints["resourceRules"]):
            return False
        if not all(selector_matches(selector, namespace_labels) for selector in selectors):
            return False
        request = _request(operation, subresource, user)
        return all(bool(self._run(condition["expression"], self._activation(pod, old, request, {})))
                   for condition in self.spec.get("matchConditions", []))

    def review(self, namespace: str, pod: dict, *, operation: str = "CREATE", subresource: str = "",
               old: Optional[dict] = None, user: str = "") -> list[str]:
        """Rejection messages; empty when admitted or not matched."""
        if not self.matches(namespace, pod, operation=operation, subresource=subresource, old=old, user=user):
            return []
        request = _request(operation, subresource, user)
        variables: dict = {}
        for variable in self.spec["variables"]:
            variables[variable["name"]] = _plain(self._run(variable["expression"],
                                                           self._activation(pod, old, request, variables)))
        activation = self._activation(pod, old, request, variables)
        messages = []
        for validation in self.spec["validations"]:
            if not bool(self._run(validation["expression"], activation)):
                messages.append(validation.get("message") or str(self._run(validation["messageExpression"],
                                                                           activation)))
        return messages


def platform_of(config: dict) -> Platform:
    """The platform of a stack's ``config:`` block (full ``gpu-tenancy:`` keys)."""
    return load_platform({key.split(":", 1)[1]: value for key, value in config.items()
                          if key.startswith("gpu-tenancy:")})


def admission_for(program, team: str) -> Admission:
    policy = next(p for p in program.of_type(POLICY) if p.inputs["metadata"]["name"] == f"gpu-tenancy-{team}")
    binding = next(b for b in program.of_type(BINDING) if b.inputs["spec"]["policyName"] == f"gpu-tenancy-{team}")
    return Admission(policy.inputs["spec"], binding.inputs["spec"])


class Tenant:
    """One team's view: sync a virtual pod as its vCluster would, then ask the host API server."""

    def __init__(self, admission: Admission, team: Team):
        self.admission = admission
        self.team = team
        self.syncer = f"system:serviceaccount:{team.namespace}:vc-{team.vcluster_name}"

    def host_pod(self, pod: dict, *, mutated: bool = True) -> dict:
        synced = vcluster_sync(pod, self.team)
        return kai_mutate(synced) if mutated else synced

    def create(self, pod: dict, *, mutated: bool = True) -> list[str]:
        return self.admission.review(self.team.namespace, self.host_pod(pod, mutated=mutated), user=self.syncer)

    def update(self, old_host: dict, new_host: dict, *, user=None, subresource: str = "") -> list[str]:
        return self.admission.review(self.team.namespace, new_host, operation="UPDATE", old=old_host,
                                     user=user or self.syncer, subresource=subresource)


def tenant_of(program, config: dict, team: str) -> Tenant:
    """Team ``team`` of a run of ``config``, with the admission policy that run rendered for it."""
    settings = next(t for t in platform_of(config).teams if t.name == team)
    return Tenant(admission_for(program, team), settings)


def _request(operation: str, subresource: str, user: str) -> dict:
    return {"operation": operation, "subResource": subresource, "userInfo": {"username": user}}


def _plain(value):
    if isinstance(value, celpy.celtypes.BoolType):
        return bool(value)
    if isinstance(value, celpy.celtypes.StringType):
        return str(value)
    return value
