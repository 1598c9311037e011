"""A tenant's host namespace as the host holds it: the program's objects and its vCluster chart rendered from the
chart cache, and the API server's ResourceQuota admission of object counts.

- ``tenant_objects``: every object of the plan with each vCluster release rendered from the real chart, the
  tenants' DNS pods, and each tenant namespace's allowance (tools/deployability/quota.py ``tenant_allowances``).
- ``QuotaAdmission``: the ResourceQuota admission plugin (k8s.io/apiserver pkg/admission/plugin/resourcequota,
  ``CheckRequest``) for ``count/<resource>`` keys, as their object-count evaluator charges them: a CREATE of one
  object adds one to its kind's count, and is refused ("exceeded quota") when that passes the hard count. Every
  writer goes through it: vCluster's syncer, Helm, the host's controllers.
"""

from __future__ import annotations

import pytest
import yaml

from config.vocabulary import RELEASE as RELEASE_TYPE
from tools.charts.cache import CACHE_ENV, find_cached
from tools.charts.render import release_chart_key, render_release
from tools.deployability import quota
from tools.deployability.check import tenant_pods
from tools.deployability.inputs import K8sObject, Release, program_objects

COUNTED = {"ConfigMap": "count/configmaps", "Secret": "count/secrets", "Service": "count/services",
           "Endpoints": "count/endpoints", "EndpointSlice": "count/endpointslices.discovery.k8s.io",
           "Pod": "count/pods", "PersistentVolumeClaim": "count/persistentvolumeclaims"}


def tenant_objects(plan, cache) -> tuple[list[K8sObject], dict]:
    objects = program_objects(plan["resources"])
    for resource in plan["resources"]:
        inputs = resource.get("inputs") or {}
        if resource["type"] != RELEASE_TYPE or inputs.get("chart") != "vcluster":
            continue
        found, _ = find_cached(release_chart_key(inputs), cache)
        if found is None:
            pytest.skip(f"the chart cache {cache} (${CACHE_ENV}) lacks vcluster {inputs['version']}: "
                        f"`python -m tools.charts add DIR --version {inputs['version']}` with the chart directory of "
                        "loft-sh/vcluster at its tag")
        release = Release(inputs["name"], inputs["namespace"], "vcluster", inputs["version"], inputs["values"])
        for text in render_release(found, release.name, release.namespace, inputs["values"]).values():
            for document in yaml.safe_load_all(text):
                if isinstance(document, dict) and document.get("kind"):
                    document.setdefault("metadata", {}).setdefault("namespace", release.namespace)
                    objects.append(K8sObject(document, "chart", release))
    return objects + tenant_pods(objects), quota.tenant_allowances(plan)


class QuotaRefusal(Exception):
    pass


class QuotaAdmission:
    """One namespace's ResourceQuota ``hard`` counts, and the objects created in it so far."""

    def __init__(self, hard: dict):
        self.hard = {key: int(value) for key, value in hard.items() if key.startswith("count/")}
        self.used = {key: 0 for key in self.hard}

    def create(self, obj: dict) -> dict:
        key = COUNTED.get(obj["kind"])
        if key in self.hard:
            if self.used[key] + 1 > self.hard[key]:
                raise QuotaRefusal(f"exceeded quota: requested: {key}=1, used: {key}={self.used[key]}, "
                                   f"limited: {key}={self.hard[key]}")
            self.used[key] += 1
        return obj

    def room(self, key: str) -> int:
        return self.hard[key] - self.used[key]
