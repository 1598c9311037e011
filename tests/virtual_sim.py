"""What a tenant's virtual API server does to a pod with the MutatingAdmissionPolicies the program ships inside it.

A policy's apply configuration is evaluated with cel-python and merged into the pod as the API server merges an apply
configuration (maps key by key, scalars replaced, list maps item by item on their keys), read from Kubernetes 1.36's
schemas, the version vCluster 0.36.1 runs inside.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import celpy
import kubernetes_validate
import yaml
from celpy import celtypes

from components.tenant import vcluster_values
from tools.offline.mocks import MOCK_CLUSTER_DNS
from tests.apiserver_pods import pull_policy_defaults
from tests.cel_judges import plain_value
from tests.tenant_sim import Admission

VIRTUAL_KUBERNETES = "1.36.0"
# Called with (policy spec, binding spec, namespace, pod, user, mutated pod) for every mutation made: tests/apiserver_map.py
# records them to send the pods to the API server's own mutating admission plugin.
MUTATION_OBSERVERS: list = []


class TypeName(celtypes.MapType):
    """``Object``, ``Object.spec``, ...: a type name in an apply configuration; calling it builds that object."""

    def __getitem__(self, key):
        return TypeName()

    def __call__(self, fields=None):
        return celtypes.MapType(fields or {})


def _schemas() -> dict:
    path = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{VIRTUAL_KUBERNETES}-local"
    return json.loads((path / "_definitions.json").read_text())["$defs"]


SCHEMAS = _schemas()
POD_SCHEMA = {"$ref": "#/$defs/io.k8s.api.core.v1.Pod"}


def _resolved(schema: dict) -> dict:
    while "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def apply_configuration(target: dict, configuration: dict, schema: dict = POD_SCHEMA) -> dict:
    """``configuration`` merged into ``target`` as the API server merges an apply configuration (structured
    merge): maps key by key, lists the Kubernetes 1.36 schema marks ``x-kubernetes-list-type: map`` item by
    item on their keys (containers and env by name, mounts by path; ``_merged_list``), other lists and scalars
    replaced."""
    schema = _resolved(schema)
    result = copy.deepcopy(target)
    for key, value in configuration.items():
        field = _resolved(schema.get("properties", {}).get(key, {}))
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = apply_configuration(result[key], value, field)
        elif isinstance(value, list) and field.get("x-kubernetes-list-type") == "map":
            result[key] = _merged_list(result.get(key) or [], value, field["x-kubernetes-list-map-keys"], field["items"])
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merged_list(live: list, patch: list, keys: list, items: dict) -> list:
    """A list map merged as structured-merge-diff merges it (sigs.k8s.io/structured-merge-diff/v6 typed/merge.go
    ``visitListItems``): items both lists hold come in the patch's order, each live-only item stays where it was
    among them, new items come where the patch has them, and a key the live list holds twice is one item, the
    patch's (the live duplicates are not merged)."""
    def key(item: dict) -> tuple:
        return tuple(json.dumps(item.get(k)) for k in keys)

    live_keys, patch_keys = [key(item) for item in live], [key(item) for item in patch]
    live_by = {k: (None if live_keys.count(k) > 1 else item) for k, item in zip(live_keys, live)}
    patch_by = dict(zip(patch_keys, patch))
    shared = iter([k for k in patch_keys if k in live_by])
    next_shared = next(shared, None)
    merged_keys: set = set()
    out = []

    def merged(k: tuple) -> dict:
        merged_keys.add(k)
        old = live_by.get(k)
        return apply_configuration(old, patch_by[k], items) if old is not None else copy.deepcopy(patch_by[k])

    at_live = at_patch = 0
    while at_live < len(live) or at_patch < len(patch):
        if at_live < len(live) and at_patch < len(patch):
            k = live_keys[at_live]
            if k == patch_keys[at_patch]:
                out.append(merged(k))
                at_live, at_patch, next_shared = at_live + 1, at_patch + 1, next(shared, None)
                continue
            if k in patch_by and next_shared is not None and next_shared != k:
                at_live += 1  # a shared item, placed when the patch reaches it
                continue
        if at_live < len(live):
            k = live_keys[at_live]
            if k not in patch_by:
                out.append(copy.deepcopy(live[at_live]))
                at_live += 1
                continue
            if k in merged_keys:
                at_live += 1
        if at_patch < len(patch):
            k = patch_keys[at_patch]
            out.append(merged(k))
            at_patch += 1
            if next_shared == k:
                next_shared = next(shared, None)
    return out


def manifests(team_settings) -> list[dict]:
    text = vcluster_values(team_settings, MOCK_CLUSTER_DNS)["experimental"]["deploy"]["vcluster"]["manifests"]
    return list(yaml.safe_load_all(text))


def named(objects: list[dict], kind: str, name: str) -> dict:
    return next(obj for obj in objects if obj["kind"] == kind and obj["metadata"]["name"] == name)


class Mutation(Admission):
    """One MutatingAdmissionPolicy and its binding: matched and its variables evaluated as tenant_sim's
    ``Admission`` does, then each apply configuration evaluated and merged into the pod."""

    def mutate(self, namespace: str, pod: dict, user: str) -> dict:
        mutated = self._mutated(namespace, pod, user)
        for observe in MUTATION_OBSERVERS:
            observe(self.spec, self.binding, namespace, copy.deepcopy(pod), user, copy.deepcopy(mutated))
        return mutated

    def _mutated(self, namespace: str, pod: dict, user: str) -> dict:
        activation = self.context(namespace, pod, user=user)
        if activation is None:
            return pod
        for mutation in self.spec["mutations"]:
            assert mutation["patchType"] == "ApplyConfiguration"
            result = self.evaluate(mutation["applyConfiguration"]["expression"], {**activation, "Object": TypeName()})
            # The API server defaults the object again after each mutation (k8s.io/apiserver
            # pkg/admission/plugin/policy/mutating/dispatcher.go): an image volume added gets its pull policy.
            pod = pull_policy_defaults(apply_configuration(pod, plain_value(result)))
            activation = {**activation, "object": celpy.json_to_cel(pod)}
        return pod
