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
from tests.tenant_sim import Admission, plain_value

VIRTUAL_KUBERNETES = "1.36.0"


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
    item on their keys (containers and env by name, mounts by path), other lists and scalars replaced."""
    schema = _resolved(schema)
    result = copy.deepcopy(target)
    for key, value in configuration.items():
        field = _resolved(schema.get("properties", {}).get(key, {}))
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = apply_configuration(result[key], value, field)
        elif isinstance(value, list) and field.get("x-kubernetes-list-type") == "map":
            keys = field["x-kubernetes-list-map-keys"]
            merged = copy.deepcopy(result.get(key) or [])
            for item in value:
                same = [index for index, existing in enumerate(merged) if all(existing.get(k) == item.get(k) for k in keys)]
                if same:
                    merged[same[0]] = apply_configuration(merged[same[0]], item, field["items"])
                else:
                    merged.append(copy.deepcopy(item))
            result[key] = merged
        else:
            result[key] = copy.deepcopy(value)
    return result


def manifests(team_settings) -> list[dict]:
    text = vcluster_values(team_settings, MOCK_CLUSTER_DNS)["experimental"]["deploy"]["vcluster"]["manifests"]
    return list(yaml.safe_load_all(text))


def named(objects: list[dict], kind: str, name: str) -> dict:
    return next(obj for obj in objects if obj["kind"] == kind and obj["metadata"]["name"] == name)


class Mutation(Admission):
    """One MutatingAdmissionPolicy and its binding: matched and its variables evaluated as tenant_sim's
    ``Admission`` does, then each apply configuration evaluated and merged into the pod."""

    def mutate(self, namespace: str, pod: dict, user: str) -> dict:
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
