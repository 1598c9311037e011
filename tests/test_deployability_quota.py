"""The deployability check's ``quota`` rule: the namespace's real ResourceQuota and LimitRange against what
the platform starts there (control plane, tenant DNS, Jobs) and the pods the quota promises the team.

Each rule is attacked with objects built for it, then with the real vCluster chart (from the chart cache)
rendered for a team whose quota cannot hold its own control plane.
"""

from __future__ import annotations

import pytest

from tests.conftest import dev_config, run
from tests.test_deployability import real_charts_or_skip
from tools.charts.render import RELEASE_TYPE, render_plan_releases
from tools.deployability import check as deployability
from tools.deployability.inputs import K8sObject, program_objects, rendered_objects
from tools.deployability.quota import amount, pod_charge
from tools.plan.document import build_plan

NAMESPACE = "tenant"


def obj(kind: str, name: str, spec: dict, api: str = "v1") -> K8sObject:
    return K8sObject({"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": NAMESPACE},
                      "spec": spec}, "test")


def quota(hard: dict) -> K8sObject:
    return obj("ResourceQuota", "quota", {"hard": hard})


def limit_range(default=None, default_request=None, maximum=None) -> K8sObject:
    item = {"type": "Container", **({"default": default} if default else {}),
            **({"defaultRequest": default_request} if default_request else {}), **({"max": maximum} if maximum else {})}
    return obj("LimitRange", "limits", {"limits": [item]})


def control_plane(resources: dict, replicas: int = 1, claim: str = "") -> K8sObject:
    template = {"metadata": {"labels": {"app": "vcluster"}},
                "spec": {"containers": [{"name": "syncer", "image": "example.invalid/s:1", "resources": resources}]}}
    claims = [{"metadata": {"name": "data"}, "spec": {"resources": {"requests": {"storage": claim}}}}] if claim else []
    return obj("StatefulSet", "cp", {"replicas": replicas, "template": template, "volumeClaimTemplates": claims},
               api="apps/v1")


def quota_findings(objects):
    return deployability.check_quotas(objects)


def test_a_pod_charges_its_limits_as_requests_when_it_states_only_limits_then_the_limit_range_defaults():
    defaults = {"default": {"cpu": "1", "memory": "1Gi"}, "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}
    charge = pod_charge({"containers": [{"name": "a", "resources": {"limits": {"cpu": "2"}}}]}, defaults)
    assert charge == {"requests.cpu": 2.0, "limits.cpu": 2.0, "requests.memory": 128 * 2 ** 20,
                      "limits.memory": 2 ** 30, "pods": 1.0}
    # Init containers run first: the pod is charged the larger of them and the sum of its containers.
    spec = {"initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}}],
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}},
                           {"name": "b", "resources": {"requests": {"cpu": "1"}}}]}
    assert pod_charge(spec, {})["requests.cpu"] == 3.0
    assert amount("500m") == 0.5 and amount("1e3") is None


def test_a_control_plane_the_quota_cannot_hold_is_an_error_naming_the_resource():
    objects = [quota({"requests.cpu": "1", "count/pods": "10"}),
               control_plane({"requests": {"cpu": "600m"}}, replicas=2)]
    [finding] = quota_findings(objects)
    assert finding.severity == deployability.ERROR and "ResourceQuota tenant/quota" in finding.object
    assert "requests.cpu 1200m of 1" in finding.message
    assert not quota_findings([quota({"requests.cpu": "2", "count/pods": "2"}), objects[1]])


def test_claim_templates_count_as_claims_and_storage():
    objects = [quota({"requests.storage": "8Gi", "count/persistentvolumeclaims": "1"}),
               control_plane({}, replicas=2, claim="5Gi")]
    [finding] = quota_findings(objects)
    assert "count/persistentvolumeclaims 2 of 1" in finding.message
    assert "requests.storage 10Gi of 8Gi" in finding.message


def test_a_pod_without_a_limit_the_quota_counts_is_refused_unless_a_limit_range_supplies_it():
    objects = [quota({"limits.memory": "4Gi"}), control_plane({"requests": {"memory": "1Gi"}})]
    [finding] = quota_findings(objects)
    assert finding.severity == deployability.ERROR and "StatefulSet tenant/cp" in finding.object
    assert "states no limits.memory" in finding.message
    assert not quota_findings(objects + [limit_range(default={"memory": "2Gi"})])


def test_a_container_above_the_limit_range_max_is_refused():
    objects = [limit_range(maximum={"cpu": "1"}), control_plane({"limits": {"cpu": "2"}})]
    [finding] = [f for f in quota_findings(objects) if "max" in f.message]
    assert finding.severity == deployability.ERROR
    assert "limits.cpu 2000m, above the LimitRange's max 1" in finding.message


def test_the_pods_a_quota_promises_must_fit_at_the_default_size():
    sized = limit_range(default={"cpu": "1"}, default_request={"cpu": "250m"})
    objects = [quota({"count/pods": "10", "limits.cpu": "5", "requests.cpu": "10"}), sized,
               control_plane({"limits": {"cpu": "1"}})]
    [finding] = quota_findings(objects)
    assert finding.severity == deployability.WARNING
    assert "promises 9 pods" in finding.message and "limits.cpu 5 holds only 4" in finding.message
    objects[0] = quota({"count/pods": "5", "limits.cpu": "5", "requests.cpu": "10"})
    assert not quota_findings(objects)


@pytest.mark.parametrize("team_quota, severity, words", [
    ({"cpu": "1"}, deployability.ERROR, "need more than it allows"),
    ({"cpu": "8", "memory": "32Gi", "pods": 1000}, deployability.WARNING, "of the LimitRange's default size"),
])
def test_the_rule_reads_the_quota_the_real_vcluster_chart_renders(team_quota, severity, words, tmp_path):
    config = dev_config()
    config["gpu-tenancy:teams"][0].setdefault("vcluster", {})["resourceQuota"] = team_quota
    plan = build_plan(run(config, stack="dev"), "dev")
    plan["resources"] = [r for r in plan["resources"]
                         if r["type"] != RELEASE_TYPE or r["inputs"].get("chart") == "vcluster"]
    cache = real_charts_or_skip(plan)
    rendered = render_plan_releases(plan["resources"], cache, tmp_path)
    objects = program_objects(plan["resources"]) + rendered_objects(rendered, tmp_path, plan["resources"])
    team = config["gpu-tenancy:teams"][0]["name"]
    found = [f for f in quota_findings(objects + deployability.tenant_pods(objects)) if team in f.object]
    assert [f.severity for f in found] == [severity] and words in found[0].message
