"""KAI's admission survives the restart of one replica: more than one admission pod, and a
PodDisruptionBudget that lets only one go at a time, set the way KAI's operator reads them."""

from __future__ import annotations

import re

import pytest
import yaml

from components.kai import ADMISSION_MAX_UNAVAILABLE, ADMISSION_REPLICAS, KAI_CONFIG, kai_values
from config.merge import deep_merge
from config.system_pods import KAI_ADMISSION_CPU_LIMIT, KAI_OPERATOR_SERVICES
from ops.sites import platform_of
from tests.conftest import ACCEPTED_TAGS, dev_config, git, go_function, mirror_chart
from tools.charts.render import render_release

KAI_REPOSITORY = "kai-scheduler/KAI-Scheduler"
PATCH = "kubernetes:kai.scheduler/v1:ConfigPatch"


def test_kai_config_gets_more_than_one_admission_replica_after_the_release(dev_run):
    [patch] = dev_run.of_type(PATCH)
    release = next(r for r in dev_run.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kai-scheduler")
    assert patch.inputs["metadata"]["name"] == KAI_CONFIG["name"] and "namespace" not in patch.inputs["metadata"]
    assert patch.inputs["spec"] == {"admission": {"replicas": ADMISSION_REPLICAS}}
    assert release.urn in patch.dependencies, "kai-config exists only once the chart's post-install hook ran"
    budget = release.inputs["values"]["admission"]["podDisruptionBudget"]
    assert budget == {"enabled": True, "maxUnavailable": ADMISSION_MAX_UNAVAILABLE}


def test_one_admission_replica_may_go_while_another_answers():
    assert ADMISSION_REPLICAS > 1, "the operator creates no PodDisruptionBudget for a single replica"
    assert 1 <= ADMISSION_MAX_UNAVAILABLE <= ADMISSION_REPLICAS - 1


def _operator_admission(config: dict) -> tuple[int, bool, int]:
    """What KAI's operator (pkg/operator/operands) derives from a kai-config spec: the admission
    replica count (admission.replicas, else global.replicaCount, else 1) and whether it creates the
    admission PodDisruptionBudget (more than one replica and podDisruptionBudget.enabled)."""
    spec = config["spec"]
    admission = spec.get("admission") or {}
    replicas = admission.get("replicas", (spec.get("global") or {}).get("replicaCount", 1))
    budget = (admission.get("service") or {}).get("podDisruptionBudget") or {}
    return replicas, replicas > 1 and bool(budget.get("enabled")), budget.get("maxUnavailable", 1)


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI_REPOSITORY])
def test_the_rendered_kai_config_with_the_patch_keeps_two_admission_pods_and_a_budget(tag, tmp_path):
    chart = mirror_chart(KAI_REPOSITORY, tag, "deployments/kai-scheduler", tmp_path)
    rendered = render_release(chart, "kai-scheduler", "kai-scheduler", kai_values(platform_of(dev_config(), stack="dev").kai_scheduler))
    manifests = [document for text in rendered.values() for document in yaml.safe_load_all(text) if document]
    [holder] = [m for m in manifests if m.get("kind") == "ConfigMap" and m["metadata"]["name"] == "kai-config-manifest"]
    applied = yaml.safe_load(holder["data"]["kai-config.yaml"])
    assert applied["kind"] == KAI_CONFIG["kind"] and applied["metadata"]["name"] == KAI_CONFIG["name"]
    # The chart's hook force-applies only the fields it renders; the replica count is not one of them.
    assert "replicas" not in applied["spec"]["admission"]
    assert _operator_admission(applied)[:2] == (1, False), "without the patch: one replica, no budget"
    replicas, budget, max_unavailable = _operator_admission(
        deep_merge(applied, {"spec": {"admission": {"replicas": ADMISSION_REPLICAS}}}))
    assert (replicas, budget, max_unavailable) == (ADMISSION_REPLICAS, True, ADMISSION_MAX_UNAVAILABLE)


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI_REPOSITORY])
def test_the_operator_reads_admission_replicas_and_budgets_only_several_replicas(tag):
    """Keeps ``_operator_admission`` derived from the operator's code at every accepted tag."""
    api = git(KAI_REPOSITORY, "show", f"{tag}:pkg/apis/kai/v1/admission/admission.go")
    assert 'Replicas *int32 `json:"replicas,omitempty"`' in api
    assert re.search(r"b\.Replicas = common\.SetDefault\(b\.Replicas, ptr\.To\(ptr\.Deref\(replicaCount, 1\)\)\)", api)
    common = git(KAI_REPOSITORY, "show", f"{tag}:pkg/operator/operands/common/common.go")
    body = go_function(common, "ShouldCreatePodDisruptionBudget")
    assert "*replicas <= 1" in body and "return *service.PodDisruptionBudget.Enabled" in body
    resources = git(KAI_REPOSITORY, "show", f"{tag}:pkg/operator/operands/admission/resources.go")
    assert "config.Replicas" in resources and "PodDisruptionBudgetForKAIConfig" in resources
    crd = yaml.safe_load(git(KAI_REPOSITORY, "show", f"{tag}:deployments/kai-scheduler/crds/kai.scheduler_configs.yaml"))
    assert crd["spec"]["scope"] == "Cluster"
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["admission"]
    assert schema["properties"]["replicas"]["type"] == "integer"


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI_REPOSITORY])
def test_each_admission_pod_may_use_a_whole_cpu_and_requests_what_the_capacity_figures_count(tag, tmp_path):
    """The chart writes admission.resources into kai-config's admission service; the operator fills what is left
    from its defaults and gives the webhook pods exactly that (pkg/apis/kai/v1/common/resources.go,
    pkg/operator/operands/common/common.go). A flood of one team's pods would throttle a pod held to 100m."""
    chart = mirror_chart(KAI_REPOSITORY, tag, "deployments/kai-scheduler", tmp_path)
    rendered = render_release(chart, "kai-scheduler", "kai-scheduler", kai_values(platform_of(dev_config(), stack="dev").kai_scheduler))
    manifests = [document for text in rendered.values() for document in yaml.safe_load_all(text) if document]
    [holder] = [m for m in manifests if m.get("kind") == "ConfigMap" and m["metadata"]["name"] == "kai-config-manifest"]
    resources = yaml.safe_load(holder["data"]["kai-config.yaml"])["spec"]["admission"]["service"]["resources"]
    assert resources == {"limits": {"cpu": KAI_ADMISSION_CPU_LIMIT}}
    defaults = git(KAI_REPOSITORY, "show", f"{tag}:pkg/apis/kai/v1/common/resources.go")
    requested = re.search(r'r\.Requests\[v1\.ResourceCPU\] = resource\.MustParse\("(\d+)m"\)', defaults)
    _, counted = KAI_OPERATOR_SERVICES["admission"]
    assert requested and int(requested.group(1)) == counted.millicores
    assert "r.Limits[v1.ResourceCPU]; !found" in defaults, "a stated limit is kept"
    common = git(KAI_REPOSITORY, "show", f"{tag}:pkg/operator/operands/common/common.go")
    assert "Resources:       v1.ResourceRequirements(*service.Resources)" in common
