"""What a team is promised is what its namespace enforces: the chart's quota defaults are all set or removed,
the summary shows the merge, and the control plane, the DNS and the team's pods fit in it."""

from __future__ import annotations

import copy
import shutil

import pytest
import yaml

from components.tenant_quota import REMOVED_QUOTA_KEYS, limit_range_values, resource_quota_hard
from config import versions
from config.tenant_budget import DNS_REPLICAS
from ops.sites import platform_of
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, COMMITTED_STACKS, dev_config, git, mirror_chart, run
from tests.tenant_namespace import tenant_objects
from tests.generated_sites import GENERATED_SITES, generated_sites, site_config  # noqa: F401 (fixture)
from tools.charts.cache import cache_chart, chart_cache_dir
from tools.charts.values import ChartValues
from tools.deployability import quota
from tools.deployability.findings import Finding
from tools.deployability.inputs import K8sObject
from tools.plan.document import build_plan
from tools.plan.summary import render_summary

VCLUSTER = "loft-sh/vcluster"


def finding(severity, obj, message, fix):
    return Finding(severity, "tenant-quota", obj, message, fix)


def dev_config_platform():
    return platform_of(dev_config(), stack="dev")


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_every_quota_and_limit_default_of_the_chart_is_set_or_removed(tag):
    policies = yaml.safe_load(git(VCLUSTER, "show", f"{tag}:chart/values.yaml"))["policies"]
    settings = dev_config_platform().teams[0].vcluster
    assert set(policies["resourceQuota"]["quota"]) <= set(resource_quota_hard(settings))
    limit_range = limit_range_values(settings)
    for block in ("default", "defaultRequest", "min", "max"):
        assert set(policies["limitRange"][block]) <= set(limit_range.get(block, {}))
    assert set(REMOVED_QUOTA_KEYS) <= set(policies["resourceQuota"]["quota"]), "nothing removed needlessly"


@pytest.fixture(scope="module")
def mirrored_cache(tmp_path_factory):
    """A chart cache holding vCluster 0.36.1 from the mirror, and a copy whose quota defaults gained a key."""
    root = tmp_path_factory.mktemp("vcluster-charts")
    chart = mirror_chart(VCLUSTER, "v0.36.1", "chart", root / "src")
    cache_chart(chart, "vcluster", versions.VCLUSTER_REPO, "0.36.1", cache_dir=root / "cache", stamp_version=True)
    grown = root / "grown" / "chart"
    shutil.copytree(chart, grown)
    values = yaml.safe_load((grown / "values.yaml").read_text())
    values["policies"]["resourceQuota"]["quota"]["count/jobs.batch"] = 7
    (grown / "values.yaml").write_text(yaml.safe_dump(values))
    cache_chart(grown, "vcluster", versions.VCLUSTER_REPO, "0.36.1", cache_dir=root / "grown-cache", stamp_version=True)
    return root


def _guardrails(summary: str) -> str:
    return summary.split("### Guardrails per tenant", 1)[1].split("## Jobs", 1)[0]


def test_the_summary_shows_the_quota_merged_with_the_charts_defaults(mirrored_cache, dev_run):
    plan = build_plan(dev_run, "dev")
    with ChartValues(mirrored_cache / "cache") as charts:
        exact = _guardrails(render_summary(plan, charts))
    with ChartValues(mirrored_cache / "grown-cache") as charts:
        grown = _guardrails(render_summary(plan, charts))
    unread = _guardrails(render_summary(plan))
    assert "requests.cpu=16250m" in exact and "count/pods=25" in exact and "requests.ephemeral-storage" not in exact
    # Every container's ephemeral-storage limit, its maximum and the team's pooled total, as the namespace gets them.
    assert "limits.ephemeral-storage=202Gi" in exact and "ephemeral-storage=8Gi" in exact
    assert "max ephemeral-storage=20Gi" in exact
    # The objects vCluster copies for the team's 23 pods (the dev stack's), with the platform's own: 46 ConfigMaps,
    # 3 root CAs, the DNS's config and KAI's 2 per fractional pod (sharing is on); 46 Secrets, the chart's, the
    # syncer's 2 and Helm's 5; 40 slices and 2 per Service and IP family; one Endpoints per Service.
    assert "count/configmaps=96" in exact and "count/secrets=54" in exact
    assert "count/endpointslices.discovery.k8s.io=86" in exact and "count/endpoints=23" in exact
    assert "from the chart cache" in exact and "were not read" not in exact
    # A default the program does not name reaches the namespace, and the summary says so.
    assert "count/jobs.batch=7" in grown and "count/jobs.batch" not in exact
    assert "were not read (no chart cache consulted)" in unread and "count/jobs.batch" not in unread
    with ChartValues(mirrored_cache / "absent") as charts:
        assert "is not in the chart cache" in _guardrails(render_summary(plan, charts))


@pytest.mark.parametrize("stack", COMMITTED_STACKS + sorted(GENERATED_SITES))
def test_the_control_plane_the_dns_and_the_teams_pods_fit_in_every_sites_quota(stack, generated_sites):
    plan = build_plan(run(site_config(stack), stack=stack), stack)
    objects, allowances = tenant_objects(plan, chart_cache_dir())
    quotas = [o for o in objects if o.kind == "ResourceQuota"]
    assert {q.namespace for q in quotas} == set(allowances), "every tenant namespace gets its quota"
    # A team may state its queue's cpu or memory (teams[].resources) instead of having them derived from its
    # namespace's quota: the check then warns that the two disagree, naming that team's queue, and that is all.
    stated = {team["name"] for team in site_config(stack)["gpu-tenancy:teams"]
              if {"cpu", "memory"} & set(team.get("resources") or {})}
    assert [f for f in quota.check_tenant_quotas(objects, allowances, finding)
            if not (f.severity == "warning" and f.object.split(" ")[:2] in (["Queue", team] for team in stated))] == []
    for resource_quota in quotas:
        hard = resource_quota.manifest["spec"]["hard"]
        # Exactly the team's pods, the DNS, the control plane's pods as the chart runs them (one, or a site's
        # replicas and a deployed etcd's: config/backing_store.py) and a site's snapshot job (one run at a time), no
        # more.
        control_plane = sum(o.manifest["spec"].get("replicas", 1) for o in objects
                            if o.origin == "chart" and o.namespace == resource_quota.namespace
                            and o.kind in ("StatefulSet", "Deployment"))
        snapshots = sum(1 for o in objects if o.kind == "CronJob" and o.namespace == resource_quota.namespace)
        assert int(hard["count/pods"]) == \
            allowances[resource_quota.namespace]["pods"] + DNS_REPLICAS + control_plane + snapshots
        assert not {"limits.cpu", "requests.ephemeral-storage"} & set(hard)
        # The object counts are the program's (the rule above proved the platform's objects fit with the team's
        # allowance), and one Endpoints per Service.
        allowance = allowances[resource_quota.namespace]
        assert int(hard["count/configmaps"]) > allowance["configMaps"]
        assert int(hard["count/secrets"]) > allowance["secrets"]
        assert int(hard["count/endpointslices.discovery.k8s.io"]) > allowance["endpointSlices"]
        assert int(hard["count/endpoints"]) == int(hard["count/services"])


def test_the_rendered_limit_range_and_quota_bound_every_containers_ephemeral_storage(dev_run):
    """The effective objects, read from the LimitRange and ResourceQuota the real vCluster chart renders: every
    container gets a limit the kubelet enforces, none may set one above the max, and the team's limits are pooled."""
    objects, _ = tenant_objects(build_plan(dev_run, "dev"), chart_cache_dir())
    [limit_range] = [o.manifest for o in objects if o.kind == "LimitRange" and o.namespace == "vcluster-team-nlp"]
    [quota_object] = [o.manifest for o in objects if o.kind == "ResourceQuota" and o.namespace == "vcluster-team-nlp"]
    [item] = limit_range["spec"]["limits"]
    assert item["type"] == "Container"
    assert item["default"] == {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "8Gi"}
    assert item["defaultRequest"] == {"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "0"}
    assert item["max"] == {"ephemeral-storage": "20Gi"} and "min" not in item
    hard = quota_object["spec"]["hard"]
    # The dev stack's 23 pods at 8Gi, the control plane's own 10Gi (the chart's) and the DNS's default 8Gi.
    assert hard["limits.ephemeral-storage"] == "202Gi" and "requests.ephemeral-storage" not in hard


def test_a_teams_ephemeral_storage_settings_reach_its_namespace():
    config = dev_config()
    config["gpu-tenancy:teams"][0]["vcluster"] = {
        "resourceQuota": {"pods": 10, "ephemeralStorage": "100Gi"},
        "limitRange": {"defaultEphemeralStorage": "4Gi", "defaultRequestEphemeralStorage": "1Gi",
                       "maxEphemeralStorage": "50Gi"}}
    objects, allowances = tenant_objects(build_plan(run(config, stack="dev"), "dev"), chart_cache_dir())
    team = config["gpu-tenancy:teams"][0]["name"]
    [item] = [o.manifest["spec"]["limits"][0] for o in objects if o.kind == "LimitRange" and team in o.namespace]
    [hard] = [o.manifest["spec"]["hard"] for o in objects if o.kind == "ResourceQuota" and team in o.namespace]
    assert (item["default"]["ephemeral-storage"], item["defaultRequest"]["ephemeral-storage"],
            item["max"]["ephemeral-storage"]) == ("4Gi", "1Gi", "50Gi")
    assert hard["limits.ephemeral-storage"] == "114Gi"  # 100Gi, the control plane's 10Gi, the DNS's default 4Gi
    assert not [f for f in quota.check_tenant_quotas(objects, allowances, finding) if team in f.object]


# --- the rule finds what it should -----------------------------------------------------------------


def _namespace(hard: dict, limits: dict, queue_cpu: int = 16050) -> list[K8sObject]:
    namespace = "vcluster-t"
    control_plane = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "t", "namespace": namespace},
                     "spec": {"replicas": 1, "template": {"metadata": {}, "spec": {"containers": [
                         {"name": "syncer", "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}]}},
                              "volumeClaimTemplates": [{"spec": {"resources": {"requests": {"storage": "5Gi"}}}}]}}
    dns = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dns", "namespace": namespace,
                                                            "labels": {"kai.scheduler/queue": "t"}},
           "spec": {"schedulerName": "kai-scheduler", "containers": [
               {"name": "coredns", "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]}}
    services = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": n, "namespace": namespace}}
                for n in ("t", "t-headless")]
    queue = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "t"},
             "spec": {"resources": {"cpu": {"quota": queue_cpu}, "memory": {"quota": -1}}}}
    return [K8sObject(m, "test") for m in (control_plane, dns, *services, queue,
            {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": namespace},
             "spec": {"hard": hard}},
            {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l", "namespace": namespace},
             "spec": {"limits": [{"type": "Container", **limits}]}})]


DEFAULTS = {"default": {"cpu": "1", "memory": "1Gi"}, "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}
ALLOWANCE = {"vcluster-t": {"pods": 100, "services": 20, "persistentVolumeClaims": 20, "storage": "100Gi"}}
FITTING = {"requests.cpu": "16250m", "requests.memory": "65856Mi", "count/pods": "102", "count/services": "23",
           "count/persistentvolumeclaims": "21", "requests.storage": "105Gi"}


OBJECTS = {"vcluster-t": {**ALLOWANCE["vcluster-t"], "configMaps": 10, "secrets": 10, "endpointSlices": 4,
                           "helmHistory": [5]}}
# 10 ConfigMaps and the 3 root CAs (the host's, kube-system's and default's copies); 10 Secrets and Helm's 5 revisions; an Endpoints per Service (2 + 20); a slice per
# Service and IP family (2 x 22) and the team's 4.
FITTING_COUNTS = {**FITTING, "count/configmaps": "13", "count/secrets": "15", "count/endpoints": "22",
                  "count/endpointslices.discovery.k8s.io": "48"}


def test_a_quota_that_fits_passes():
    assert quota.check_tenant_quotas(_namespace(FITTING, DEFAULTS), ALLOWANCE, finding) == []


def test_object_counts_that_hold_the_platforms_objects_and_the_teams_stated_ones_pass():
    assert quota.check_tenant_quotas(_namespace(FITTING_COUNTS, DEFAULTS), OBJECTS, finding) == []


@pytest.mark.parametrize("key", ["count/configmaps", "count/secrets", "count/endpoints",
                                 "count/endpointslices.discovery.k8s.io"])
def test_an_object_count_short_of_the_platforms_and_the_teams_is_caught(key):
    short = {**FITTING_COUNTS, key: str(int(FITTING_COUNTS[key]) - 1)}
    [error] = quota.check_tenant_quotas(_namespace(short, DEFAULTS), OBJECTS, finding)
    assert error.severity == "error" and f"{key} {int(short[key])} < {int(short[key]) + 1}" in error.message


def test_a_release_that_keeps_every_revision_is_caught():
    unbounded = {"vcluster-t": {**OBJECTS["vcluster-t"], "helmHistory": [0]}}
    [error] = quota.check_tenant_quotas(_namespace(FITTING_COUNTS, DEFAULTS), unbounded, finding)
    assert "keeps every revision" in error.message and "max_history" in error.fix


@pytest.mark.parametrize("key, value", [("count/pods", "100"), ("requests.cpu", "10"), ("count/services", "20"),
                                        ("requests.storage", "100Gi")])
def test_the_charts_old_sizing_is_caught(key, value):
    found = quota.check_tenant_quotas(_namespace({**FITTING, key: value}, DEFAULTS), ALLOWANCE, finding)
    [error] = [f for f in found if f.severity == "error"]
    assert key in error.message


def test_limits_tracked_by_the_quota_count_default_limits_or_refuse_the_pod():
    # The chart's old shape: limits.cpu equal to requests.cpu, every container limited to 1 CPU by default.
    found = quota.check_tenant_quotas(_namespace({**FITTING, "limits.cpu": "16"}, DEFAULTS), ALLOWANCE, finding)
    assert [f.severity for f in found] == ["error"] and "limits.cpu 16 < 102" in found[0].message
    no_default = copy.deepcopy(DEFAULTS)
    del no_default["default"]["cpu"], no_default["defaultRequest"]["cpu"]
    found = quota.check_tenant_quotas(_namespace({**FITTING, "limits.cpu": "160"}, no_default), ALLOWANCE, finding)
    assert any("refuses them" in f.message for f in found)


def test_a_queue_that_disagrees_with_the_quota_is_reported():
    [found] = quota.check_tenant_quotas(_namespace(FITTING, DEFAULTS, queue_cpu=16000), ALLOWANCE, finding)
    assert found.severity == "warning" and "cpu quota 16000, namespace leaves 16050" in found.message


def test_a_control_plane_and_dns_the_quota_cannot_hold_alone_are_an_error_of_their_own():
    found = quota.check_tenant_quotas(_namespace({**FITTING, "requests.cpu": "200m"}, DEFAULTS), ALLOWANCE, finding)
    [found] = [f for f in found if f.severity == "error"]
    assert "alone need more than it allows" in found.message
    assert "requests.cpu 0.2 < 0.25" in found.message and "vcluster.resourceQuota" in found.fix


def test_a_container_above_the_limit_ranges_max_is_refused():
    capped = {**DEFAULTS, "max": {"cpu": "150m"}}
    found = quota.check_tenant_quotas(_namespace(FITTING, capped), ALLOWANCE, finding)
    refused = {f.object.split(" (")[0]: f for f in found if "max" in f.message}
    assert set(refused) == {"StatefulSet vcluster-t/t", "Pod vcluster-t/dns"}
    assert all(f.severity == "error" for f in refused.values())
    # The API server compares the limit with the max (the syncer's is the LimitRange's default of 1)...
    assert "container syncer has limits.cpu 1, above the max 0.15" in refused["StatefulSet vcluster-t/t"].message
    # ... and the request where there is no limit to compare.
    no_default_cpu = {"default": {"memory": "1Gi"}, "defaultRequest": {"memory": "128Mi"}, "max": {"cpu": "150m"}}
    found = quota.check_tenant_quotas(_namespace(FITTING, no_default_cpu), ALLOWANCE, finding)
    assert any("container syncer has requests.cpu 0.2, above the max 0.15" in f.message for f in found)
    assert not [f for f in quota.check_tenant_quotas(_namespace(FITTING, {**DEFAULTS, "max": {"cpu": "2"}}),
                                                     ALLOWANCE, finding) if "max" in f.message]


def test_a_pod_is_charged_the_larger_of_its_init_containers_and_the_sum_of_its_containers():
    spec = {"initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}}],
            "containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}, {"name": "b"}]}
    usage, unset = quota.pod_usage(spec, quota.container_defaults([{"spec": {"limits": [{"type": "Container",
                                                                                         **DEFAULTS}]}}]))
    assert usage["requests.cpu"] == 3.0  # the init container's 3 over the containers' 1 (limit as request) + 0.1
    assert usage["limits.cpu"] == 2.0  # the containers' 1 + 1 (the default) over the init container's default 1
    assert usage["limits.memory"] == 2 * 2 ** 30 and unset == {"limits.ephemeral-storage"}


def test_a_sidecar_is_charged_beside_the_containers_and_the_init_containers_after_it():
    """Kubernetes' sidecars (init containers with ``restartPolicy: Always``) run on beside what starts after them."""
    spec = {"initContainers": [{"name": "early", "resources": {"requests": {"cpu": "2"}}},
                               {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                               {"name": "late", "resources": {"requests": {"cpu": "1500m"}}}],
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}
    usage, _ = quota.pod_usage(spec, ({}, {}))
    assert usage["requests.cpu"] == 2.5  # the late init container beside the proxy, over the early one alone
    spec["containers"][0]["resources"]["requests"]["cpu"] = "2"
    assert quota.pod_usage(spec, ({}, {}))[0]["requests.cpu"] == 3.0  # the container and the proxy


@pytest.mark.parametrize("vcluster, words", [
    # The program sizes the quota for the control plane and the DNS; a site overriding it can undercut them.
    ({"extraValues": {"policies": {"resourceQuota": {"quota": {"requests.cpu": "100m"}}}}},
     "alone need more than it allows"),
    ({"resourceQuota": {"pods": 100},
      "extraValues": {"policies": {"limitRange": {"defaultRequest": {"memory": "1Gi"}}}}},
     "default-sized pods do not fit"),
])
def test_the_rule_reads_the_quota_the_real_vcluster_chart_renders_for_a_team_it_cannot_hold(vcluster, words):
    config = dev_config()
    config["gpu-tenancy:teams"][0]["vcluster"] = vcluster
    objects, allowances = tenant_objects(build_plan(run(config, stack="dev"), "dev"), chart_cache_dir())
    team = config["gpu-tenancy:teams"][0]["name"]
    found = [f for f in quota.check_tenant_quotas(objects, allowances, finding)
             if team in f.object and f.severity == "error"]
    assert len(found) == 1 and words in found[0].message
