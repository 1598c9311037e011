"""The API server's own MutatingAdmissionPolicy plugin, run: tests/apiserver_map/main.go built inside vCluster's
source at v0.36.1, whose vendor/ holds k8s.io/apiserver v0.36.0, the Kubernetes a tenant's vCluster runs.

tests/virtual_sim.py's ``Mutation`` evaluates the in-vCluster policies' apply configurations with cel-python and
merges them with a Python re-implementation of the structured merge. This module sends pods (and Services) to the
real plugin, the policies and bindings loaded through informers, the plugin in the admission chain's reinvocation
handler, each apply configuration compiled by its compiler and merged by its structured-merge-diff patcher with
Kubernetes 1.36's schemas (``Mutated``: the object it ends with, or its error).

Needs the mirror of loft-sh/vcluster and a Go toolchain (tests/go_toolchain.py); without them the tests skip and
say which is missing. The first build takes minutes; the binary is kept under ``$GPU_TENANCY_GO_CACHE``.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import NamedTuple, Optional

import kubernetes_validate

from tests.conftest import mirror, mirrored_tag
from tests.apiserver_vap import PLUGIN_START
from tests.go_toolchain import built_in_tree
from tests.tenant_sim import recording
from tests.virtual_sim import MUTATION_OBSERVERS

VCLUSTER = "loft-sh/vcluster"
TAG = "v0.36.1"
HARNESS = Path(__file__).with_name("apiserver_map") / "main.go"
PACKAGE = "cmd/gpu-tenancy-map-real"
# The substitute for k8s.io/kubernetes' generated OpenAPI (not vendored): the definitions of the same Kubernetes.
SCHEMAS = (Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / "v1.36.0-local" /
           "_definitions.json")


def harness() -> Path:
    repository = mirror(VCLUSTER)
    return built_in_tree(repository, mirrored_tag(VCLUSTER, TAG), {HARNESS: PACKAGE, PLUGIN_START: PACKAGE}, PACKAGE,
                         "apiserver-map")


def _registry_defaults(spec: dict, resources: str) -> dict:
    """``spec`` with the defaults the API server's registry gives a policy (``resources``: matchConstraints) or a
    binding (matchResources) on create, as k8s.io/api's admissionregistration/v1 types.go documents them:
    failurePolicy Fail, reinvocationPolicy Never, matchPolicy Equivalent, empty selectors, every scope."""
    spec = copy.deepcopy(spec)
    if resources == "matchConstraints":
        spec.setdefault("failurePolicy", "Fail")
        spec.setdefault("reinvocationPolicy", "Never")
    match = spec.get(resources)
    if match is not None:
        match.setdefault("matchPolicy", "Equivalent")
        match.setdefault("namespaceSelector", {})
        match.setdefault("objectSelector", {})
        for rule in match.get("resourceRules", []) + match.get("excludeResourceRules", []):
            rule.setdefault("scope", "*")
    return spec


class Mutated(NamedTuple):
    pod: dict  # the pod the plugin ends with (the pod sent when it refused)
    expected: Optional[dict]  # the request's expected pod, read back as the plugin's pod is
    error: str


def mutate(policies: dict[str, tuple[dict, dict]], requests: list[dict]) -> list[Mutated]:
    """Each request ({namespace, user, object, expected}; ``kind`` Service and an UPDATE's ``old`` object if need be)
    created (or updated) with every policy of ``policies`` (name -> (policy spec, binding spec)) loaded; every
    namespace a request names exists with the API server's label."""
    namespaces = sorted({request["namespace"] for request in requests})
    payload = {"policies": [{"name": name, "spec": _registry_defaults(spec, "matchConstraints")}
                            for name, (spec, _) in policies.items()],
               "bindings": [{"name": name, "spec": _registry_defaults({"policyName": name, **binding},
                                                                      "matchResources")}
                            for name, (_, binding) in policies.items()],
               "namespaces": [{"name": name, "labels": {"kubernetes.io/metadata.name": name}} for name in namespaces],
               "schemas": str(SCHEMAS), "requests": requests}
    ran = subprocess.run([str(harness())], input=json.dumps(payload), capture_output=True, text=True, timeout=1200)
    assert ran.returncode == 0, f"the mutating admission harness failed:\n{ran.stderr[-4000:]}"
    return [Mutated(answer["object"], answer["expected"], answer.get("error", "")) for answer in json.loads(ran.stdout)]


def policies_of(objects: list[dict]) -> dict[str, tuple[dict, dict]]:
    """Every MutatingAdmissionPolicy of a vCluster's manifests, by name, with its binding's spec."""
    bindings = {obj["metadata"]["name"]: obj["spec"] for obj in objects if obj["kind"] == "MutatingAdmissionPolicyBinding"}
    return {obj["metadata"]["name"]: (obj["spec"], bindings[obj["metadata"]["name"]])
            for obj in objects if obj["kind"] == "MutatingAdmissionPolicy"}


class Recorded(NamedTuple):
    policy: dict
    binding: dict
    namespace: str
    pod: dict
    user: str
    mutated: dict


def recorded():
    """Every mutation tests/virtual_sim.py's Mutation makes inside the block."""
    return recording(MUTATION_OBSERVERS, Recorded)
