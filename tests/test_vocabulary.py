"""One definition per fact: the policy pack's deliberate copies equal config/'s originals.

policy/ runs in a venv of its own with nothing of the project importable, so policy/rule_model.py
repeats a few names and the exact-version pattern; these tests fail the moment one side changes
alone. The version pattern is compared in behaviour too, on a table that covers each rule of it.
"""

from __future__ import annotations

import pytest

from config import load_platform, sharing, versions, vocabulary
from config.errors import ConfigError
from policy import rule_model, rules
from tests.config_spec import dev_config, put

VERSIONS = {
    # version: an exact SemVer 2 version (optionally "v"-prefixed)?
    "0.36.1": True, "v0.16.4": True, "v26.3.3": True, "0.36.1-rc.1": True, "1.2.3+b": True,
    "1.2.3-rc.1+build.5": True, "0.0.0": True, "10.20.30": True,
    "01.2.3": False, "1.02.3": False, "1.2.03": False, "1.2": False, "v1": False, "1.2.x": False,
    "^1.2.3": False, "~1.2.3": False, ">=1.2.3": False, "vv1.2.3": False, "1.2.3-": False, "1.2.3+": False,
    "latest": False, "": False, "1.2.3.4": False,
}


def test_the_policy_pack_copies_equal_the_config_definitions():
    assert rule_model.EXACT_VERSION.pattern == vocabulary.EXACT_VERSION.pattern
    assert rule_model.MANAGED_BY_LABEL == vocabulary.VCLUSTER_MANAGED_BY_LABEL
    assert rule_model.QUEUE_LABEL == vocabulary.QUEUE_LABEL
    assert rule_model.NAMESPACE_NAME_LABEL == vocabulary.NAMESPACE_NAME_LABEL
    assert rule_model.NODE_PROFILE_LABEL == vocabulary.NODE_PROFILE_LABEL
    assert rule_model.QUEUE_RESOURCES == vocabulary.QUEUE_RESOURCES
    assert rule_model.QUEUE_FIELDS == vocabulary.QUEUE_FIELDS
    assert vocabulary.RELEASE in rule_model.HELM_RELEASE_TYPES
    assert rule_model.kubernetes_kind(vocabulary.QUEUE) == (rule_model.QUEUE_GROUP, "v2", "Queue")
    assert rule_model.VCLUSTER_CHART == rule_model.chart_name(versions.VCLUSTER_CHART)
    assert rule_model.KAI_CHART == rule_model.chart_name(versions.KAI_CHART)
    assert rule_model.GPU_OPERATOR_CHART == rule_model.chart_name(versions.GPU_OPERATOR_CHART)
    assert rule_model.TIME_SLICED_PREFIX == sharing.TIME_SLICED + "-"


@pytest.mark.parametrize("version, exact", sorted(VERSIONS.items()))
def test_config_and_policy_agree_on_which_versions_are_exact(version, exact):
    policy_accepts = rules.helm_version_pinned(
        rule_model.Resource(type=vocabulary.RELEASE, name="r", inputs={"chart": "vcluster", "version": version})) == []
    config_accepts = bool(vocabulary.EXACT_VERSION.fullmatch(version))
    assert (config_accepts, policy_accepts) == (exact, exact)


@pytest.mark.parametrize("version", ["0.36.1+b", "0.36.1-rc.1+build.7"])
def test_a_version_with_build_metadata_is_pinned_for_config_as_for_the_policy_pack_but_is_no_release(version):
    # Exact, as the policy pack says; refused for not being one of the chart's releases, not for being unpinned.
    with pytest.raises(ConfigError) as error:
        load_platform(put(dev_config(), "vcluster.version", version))
    [issue] = [issue for issue in error.value.issues if issue.key == "vcluster.version"]
    assert issue.value == version and issue.problem.startswith("is not a release from ")


@pytest.mark.parametrize("path, version", [("vcluster.version", "00.36.1"), ("vcluster.version", "0.036.1"),
                                           ("kaiScheduler.version", "v00.17.0"), ("kaiScheduler.version", "vv0.17.0")])
def test_a_version_with_leading_zeros_is_refused_by_config_as_by_the_policy_pack(path, version):
    with pytest.raises(ConfigError) as error:
        load_platform(put(dev_config(), path, version))
    assert any(issue.key == path and issue.value == version for issue in error.value.issues)
