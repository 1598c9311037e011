"""Huge pages: memory a node sets aside at boot, shared by every team's pods on it and charged by no KAI queue. The
pod policy lets a container ask for them (tests/test_resource_names.py), so the tenant namespace's quota is what
bounds them: none unless the site grants them (``vcluster.resourceQuota.hugepages2Mi`` and ``hugepages1Gi``)."""

from __future__ import annotations

import re

import pytest

from components.tenant_quota import resource_quota_hard
from config.errors import ConfigError
from config.key_types import quantity_value
from components.admission_devices import ALLOWED_RESOURCES
from ops.sites import platform_of as site_platform
from tests.conftest import COMMITTED_STACKS, MIRRORED_TAGS, dev_config, git, mirrored_tag, stack_config
from tests.tenant_sim import container, platform_of
from tests.test_admission_attacks import mixed_run, on_kai, rules, tenant  # noqa: F401 (fixtures)
from tests.tenant_namespace import tenant_objects
from tools.charts.cache import chart_cache_dir
from tools.deployability import quota
from tools.plan.document import build_plan

NO_DEFAULTS = ({}, {})  # the host pod has been through the LimitRanger already


def asking(amount: str, size: str = "2Mi") -> dict:
    """A container asking for huge pages of ``size`` (a request equals its limit, as the API server requires)."""
    entry = container("dpdk")
    for kind in ("limits", "requests"):
        entry["resources"].setdefault(kind, {}).update({f"hugepages-{size}": amount, "memory": "256Mi"})
    return entry


def refused_by_quota(hard: dict, host_pod: dict) -> list[str]:
    """What the namespace's ResourceQuota refuses of the pod, as the quota admission charges it (the pod alone)."""
    usage, _ = quota.pod_usage(host_pod["spec"], NO_DEFAULTS)
    return quota.exceeded({key: quantity_value(str(value)) for key, value in hard.items() if value is not None}, usage)


def test_a_tenants_huge_page_pod_passes_the_pod_policy_and_the_quota_refuses_it(tenant):
    pod = on_kai(tenant, containers=[asking("64Mi")])
    assert "resource-names" not in rules(tenant.create(pod))  # the platform lets the name through...
    hard = resource_quota_hard(tenant.team.vcluster)
    # ... and the namespace grants no huge page, so the quota refuses the pod as vCluster syncs it to the host.
    assert refused_by_quota(hard, tenant.host_pod(pod)) == ["requests.hugepages-2Mi 0 < 6.71089e+07"]
    one_gibibyte_page = on_kai(tenant, containers=[asking("1Gi", "1Gi")])
    assert refused_by_quota(hard, tenant.host_pod(one_gibibyte_page)) == ["requests.hugepages-1Gi 0 < 1.07374e+09"]
    # An ordinary pod is not charged any.
    assert refused_by_quota(hard, tenant.host_pod(on_kai(tenant, containers=[container("trainer", gpus="1")]))) == []


def test_huge_pages_asked_another_way_are_refused_too(tenant):
    # From an init container or a sidecar (an init container that keeps running) the quota charges them as from a
    # container; at the pod level (spec.resources) the pod policy refuses the field itself.
    hard = resource_quota_hard(tenant.team.vcluster)
    for restart_policy in (None, "Always"):
        pod = on_kai(tenant, containers=[container("trainer")])
        init = asking("64Mi")
        if restart_policy:
            init["restartPolicy"] = restart_policy
        pod["spec"]["initContainers"] = [init]
        assert "resource-names" not in rules(tenant.create(pod))
        assert refused_by_quota(hard, tenant.host_pod(pod)) == ["requests.hugepages-2Mi 0 < 6.71089e+07"]
    pod_level = on_kai(tenant, containers=[container("trainer")])
    pod_level["spec"]["resources"] = {kind: {"hugepages-2Mi": "64Mi", "memory": "256Mi"}
                                      for kind in ("requests", "limits")}
    assert "pod-resources" in rules(tenant.create(pod_level))


@pytest.mark.parametrize("stack", COMMITTED_STACKS)
def test_each_teams_quota_holds_the_huge_pages_its_site_grants_and_none_otherwise(stack):
    config = stack_config(stack)
    stack_grant = (config.get("gpu-tenancy:vcluster") or {}).get("resourceQuota") or {}
    for team, written in zip(site_platform(config, stack).teams, config["gpu-tenancy:teams"]):
        grant = {**stack_grant, **((written.get("vcluster") or {}).get("resourceQuota") or {})}
        hard = resource_quota_hard(team.vcluster)
        assert hard["requests.hugepages-2Mi"] == str(grant.get("hugepages2Mi", "0"))
        assert hard["requests.hugepages-1Gi"] == str(grant.get("hugepages1Gi", "0"))


def test_a_site_grants_huge_pages_for_every_team_or_one():
    config = dev_config()
    config["gpu-tenancy:vcluster"].setdefault("resourceQuota", {})["hugepages2Mi"] = "1Gi"
    config["gpu-tenancy:teams"][1].setdefault("vcluster", {}).setdefault("resourceQuota", {})["hugepages1Gi"] = "2Gi"
    teams = platform_of(config).teams
    granted = [resource_quota_hard(team.vcluster) for team in teams]
    assert {hard["requests.hugepages-2Mi"] for hard in granted} == {"1Gi"}
    assert [hard["requests.hugepages-1Gi"] for hard in granted] == ["0", "2Gi"] + ["0"] * (len(teams) - 2)
    within = {"spec": {"containers": [asking("512Mi"), asking("1Gi", "1Gi")]}}
    assert refused_by_quota(granted[1], within) == []
    assert refused_by_quota(granted[0], within) == ["requests.hugepages-1Gi 0 < 1.07374e+09"]
    assert refused_by_quota(granted[1], {"spec": {"containers": [asking("2Gi")]}}) == [
        "requests.hugepages-2Mi 1.07374e+09 < 2.14748e+09"]


def test_a_grant_that_is_not_a_quantity_is_refused_naming_the_key():
    config = dev_config()
    config["gpu-tenancy:vcluster"].setdefault("resourceQuota", {})["hugepages2Mi"] = "lots"
    with pytest.raises(ConfigError, match=r"vcluster\.resourceQuota\.hugepages2Mi = 'lots'"):
        platform_of(config)


def test_the_real_chart_renders_the_grant_into_each_tenant_namespaces_quota(dev_run):
    objects, _ = tenant_objects(build_plan(dev_run, "dev"), chart_cache_dir())  # skips without the chart cached
    quotas = [o for o in objects if o.kind == "ResourceQuota"]
    assert len(quotas) == len(platform_of(dev_config()).teams)
    for resource_quota in quotas:
        hard = resource_quota.manifest["spec"]["hard"]
        assert (str(hard["requests.hugepages-2Mi"]), str(hard["requests.hugepages-1Gi"])) == ("0", "0")


@pytest.mark.parametrize("tag", MIRRORED_TAGS["kubernetes/api"])
def test_the_quota_keys_are_the_api_servers_names_for_each_huge_page_size_a_pod_may_ask_for(tag):
    # k8s.io/api core/v1 at each release: a huge page resource is "hugepages-<size>", and a quota holds its request
    # as "requests.hugepages-<size>" (only the request: huge pages cannot burst past it).
    types = git("kubernetes/api", "show", f"{mirrored_tag('kubernetes/api', tag)}:core/v1/types.go")
    assert 'ResourceHugePagesPrefix = "hugepages-"' in types
    quota_prefix = re.search(r'(?s)// As burst is not supported for HugePages, we would only quota its request.*?\n'
                             r'\s*ResourceRequestsHugePagesPrefix = "([^"]+)"', types)
    assert quota_prefix and quota_prefix.group(1) == "requests.hugepages-"
    # Every huge page size the pod policy lets through has its key in every team's quota, and no other size, and the
    # deployability check's quota model charges each.
    sizes = {name for name in ALLOWED_RESOURCES if name.startswith("hugepages-")}
    assert set(quota.HUGE_PAGES) == sizes
    hard = resource_quota_hard(platform_of(dev_config()).teams[0].vcluster)
    assert {key.removeprefix(quota_prefix.group(1)) for key in hard if key.startswith(quota_prefix.group(1))} == \
        {name.removeprefix("hugepages-") for name in sizes} == {"2Mi", "1Gi"}
