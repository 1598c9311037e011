"""The policy pack's release and provider rules (policy/rules.py) and its rule set, on passing and failing data.

The queue, admission and time-slicing rules are specified in test_policy_rules_queues.py,
test_policy_rules_admission.py and test_policy_rules_time_slicing.py.
"""

from __future__ import annotations

import pytest

from policy import rules
from policy.rule_model import UNKNOWN
from tests.policy_spec import CHART_V4, DEFAULT_PROVIDER, NAMESPACE, RELEASE, release, resource, tenant_values


# --- release and provider rules -------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.36.1", "v0.16.4", "v26.3.3", "1.2.3-rc.1", "1.2.3+build.5"])
def test_exact_chart_versions_pass(version):
    assert rules.helm_version_pinned(release(version=version)) == []
    assert rules.helm_version_pinned(release(version=version, type_=CHART_V4)) == []


@pytest.mark.parametrize("version, says", [
    (None, "pins no chart version"), ("", "pins no chart version"), ("  ", "pins no chart version"),
    ("latest", "floats"), ("LATEST", "floats"),
    ("^0.36.0", "a range"), ("~0.36", "a range"), (">=1.0.0", "a range"), ("1.2.x", "a range"), ("*", "a range"),
    ("0.36", "not an exact"), ("v1", "not an exact"), (1.2, "not a version string"),
])
def test_floating_chart_versions_fail(version, says):
    for type_ in (RELEASE, CHART_V4):
        [message] = rules.helm_version_pinned(release(version=version, type_=type_))
        assert says in message and "team-a" in message


def test_version_rule_ignores_unknown_versions_and_other_resources():
    assert rules.helm_version_pinned(release(version=UNKNOWN)) == []
    assert rules.helm_version_pinned(resource(NAMESPACE, inputs={"version": "latest"})) == []


@pytest.mark.parametrize("chart", ["vcluster", "loft/vcluster", "oci://ghcr.io/loft-sh/charts/vcluster"])
def test_vcluster_with_set_owner_false_passes(chart):
    assert rules.vcluster_set_owner_disabled(release(chart=chart, values=tenant_values(set_owner=False))) == []


@pytest.mark.parametrize("values, says", [
    ({}, "unset"), ({"experimental": {"syncSettings": {}}}, "unset"),
    (tenant_values(set_owner=True), "to True"), (tenant_values(set_owner="false"), "to 'false'"),
])
def test_vcluster_that_sets_owners_fails(values, says):
    [message] = rules.vcluster_set_owner_disabled(release(values=values))
    assert says in message and "Set it to false" in message


KAI_CHART_REF = "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"


def test_a_kai_release_that_blanks_visible_devices_passes():
    values = {"global": {"gpuSharing": True, "blockNvidiaVisibleDevices": True}}
    assert rules.kai_blocks_visible_devices(release(chart=KAI_CHART_REF, version="v0.16.4", values=values)) == []
    assert rules.kai_blocks_visible_devices(release(chart=KAI_CHART_REF, version="v0.16.4",
                                                    values={"global": UNKNOWN})) == []
    assert rules.kai_blocks_visible_devices(release(values={"global": {}})) == [], "not KAI: not judged"


@pytest.mark.parametrize("values", [{"global": {"gpuSharing": True}},
                                    {"global": {"blockNvidiaVisibleDevices": False}}, {}])
def test_a_kai_release_that_lets_images_pick_their_gpus_is_refused(values):
    [message] = rules.kai_blocks_visible_devices(release(chart=KAI_CHART_REF, version="v0.16.4", values=values))
    assert "blockNvidiaVisibleDevices" in message and "Set it to true" in message


def test_set_owner_rule_skips_unknowns_and_other_charts():
    assert rules.vcluster_set_owner_disabled(release(values=tenant_values(set_owner=UNKNOWN))) == []
    assert rules.vcluster_set_owner_disabled(release(values={"experimental": UNKNOWN})) == []
    assert rules.vcluster_set_owner_disabled(release(chart="oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler",
                                                     values={})) == []


def test_explicit_provider_passes_and_non_kubernetes_resources_are_ignored():
    assert rules.explicit_kubernetes_provider(resource(NAMESPACE)) == []
    assert rules.explicit_kubernetes_provider(resource("aws:ec2/vpc:Vpc", provider=None)) == []
    assert rules.explicit_kubernetes_provider(resource("pulumi:providers:kubernetes", provider=None)) == []


@pytest.mark.parametrize("provider, says", [(None, "names no provider"), (DEFAULT_PROVIDER, "uses the default"),
                                            ("urn:pulumi:s::p::pulumi:providers:kubernetes::default", "default")])
def test_default_provider_fails(provider, says):
    [message] = rules.explicit_kubernetes_provider(resource(NAMESPACE, "ns", provider=provider))
    assert says in message and "ns" in message


def test_tenant_with_resource_quota_passes():
    assert rules.vcluster_resource_quota_enabled(release(values=tenant_values(quota=True))) == []
    assert rules.vcluster_resource_quota_enabled(release(values=tenant_values(quota=UNKNOWN))) == []


@pytest.mark.parametrize("quota", [False, "auto", None])
def test_tenant_without_resource_quota_is_flagged(quota):
    values = tenant_values(quota=quota) if quota is not None else {}
    [message] = rules.vcluster_resource_quota_enabled(release(values=values))
    assert "resourceQuota.enabled" in message


def test_rule_set_levels():
    levels = {rule.name: rule.mandatory for rule in rules.RULES}
    assert len(levels) == len(rules.RULES)
    assert [name for name, mandatory in levels.items() if not mandatory] == [
        "no-time-slicing-with-kai-sharing", "vcluster-resource-quota-enabled"]
    assert all(rule.scope in ("resource", "stack") for rule in rules.RULES)
