"""KaiScheduler release, the KAI versions the config accepts, and the KAI queue hierarchy."""

from __future__ import annotations

import re

import pytest
import yaml

from config import load_platform, versions
from tests import config_spec
from tests.conftest import ACCEPTED_TAGS, dev_config, git, run

QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"
KAI_REPOSITORY = "kai-scheduler/KAI-Scheduler"


def kai_release(program):
    return next(r for r in program.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kai-scheduler")


@pytest.mark.parametrize("version", ["v0.16.0", "v0.16.4", "v0.17.0"])
def test_kai_chart_is_pulled_from_its_oci_registry_at_the_pinned_tag(version):
    config = dev_config()
    config["gpu-tenancy:kaiScheduler"]["version"] = version
    release = kai_release(run(config))
    assert release.inputs["chart"] == "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
    assert release.inputs["version"] == version


def test_kai_release_turns_gpu_sharing_on_under_global(dev_run):
    release = kai_release(dev_run).inputs
    assert release["values"]["global"] == {"gpuSharing": True, "blockNvidiaVisibleDevices": True,
                                           "registry": "ghcr.io/kai-scheduler/kai-scheduler", "tag": release["version"]}
    assert release["namespace"] == "kai-scheduler"
    assert release["createNamespace"] is True
    assert release["atomic"] is True


def test_kai_gpu_sharing_follows_config():
    config = dev_config()
    config["gpu-tenancy:kaiScheduler"]["gpuSharing"] = False
    assert kai_release(run(config)).inputs["values"]["global"]["gpuSharing"] is False


# --- which KAI releases the config accepts -------------------------------------------------------


@pytest.mark.parametrize("version", ["v0.8.4", "v0.13.0", "v0.15.3"])
def test_kai_releases_that_cannot_blank_visible_devices_are_refused(version):
    config = config_spec.put(config_spec.dev_config(), "kaiScheduler.version", version)
    found = config_spec.assert_rejected(config, "kaiScheduler.version", version, fix="v0.16.0 or later")
    assert "NVIDIA_VISIBLE_DEVICES" in found.problem


@pytest.mark.parametrize("version", ["v0.16.0", "v0.16.4", "v0.17.0"])
def test_kai_releases_with_blocking_pass(version):
    config = config_spec.put(config_spec.dev_config(), "kaiScheduler.version", version)
    assert load_platform(config).kai_scheduler.version == version


# --- queues --------------------------------------------------------------------------------------


def queues(program):
    return {q.inputs["metadata"]["name"]: q for q in program.of_type(QUEUE)}


def test_every_queue_renders_all_resources_with_all_fields(dev_run):
    for queue in queues(dev_run).values():
        spec = queue.inputs["spec"]
        assert set(spec["resources"]) == {"gpu", "cpu", "memory"}
        for resource in spec["resources"].values():
            assert set(resource) == {"quota", "limit", "overQuotaWeight"}
        assert "displayName" in spec and "priority" in spec


def test_omitted_cpu_and_memory_are_never_zero(dev_run):
    """KAI reads an omitted limit as zero; every tenant pod goes through KAI, so a zero would starve them all."""
    by_name = queues(dev_run)
    assert by_name["ml-org"].inputs["spec"]["resources"]["cpu"] == {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    team = by_name["team-nlp"].inputs["spec"]["resources"]
    # The team's 16 CPU and 64Gi plus its DNS pod (50m, 64Mi), which KAI schedules in the same queue.
    assert team["cpu"] == {"quota": 16050, "limit": 16050, "overQuotaWeight": 1}
    assert team["memory"] == {"quota": 68787, "limit": 68787, "overQuotaWeight": 1}


def test_queues_wait_for_kais_webhook_and_team_queues_wait_for_the_org_queue(dev_run):
    by_name = queues(dev_run)
    probe = dev_run.named("kai-queue-webhook-probe")
    assert probe.urn in by_name["ml-org"].dependencies
    assert kai_release(dev_run).urn in probe.dependencies
    for team in ("team-nlp", "team-vision", "team-recommender"):
        assert by_name["ml-org"].urn in by_name[team].dependencies


def test_queues_tolerate_a_slow_admission_webhook(dev_run):
    for queue in queues(dev_run).values():
        assert queue.options["customTimeouts"]["create"] == "10m"


def test_queues_are_cluster_scoped(dev_run):
    assert all("namespace" not in q.inputs["metadata"] for q in dev_run.of_type(QUEUE))


def test_team_queue_carries_its_priority_weights_and_display_name():
    config = dev_config()
    team = config["gpu-tenancy:teams"][0]
    team.update(priority=150, displayName="NLP research")
    team["resources"]["cpu"] = {"quota": 8000, "limit": 16000, "overQuotaWeight": 2}
    spec = queues(run(config))["team-nlp"].inputs["spec"]
    assert spec["priority"] == 150
    assert spec["displayName"] == "NLP research"
    assert spec["resources"]["cpu"] == {"quota": 8000, "limit": 16000, "overQuotaWeight": 2}


def test_the_webhook_probe_dry_runs_a_queue_until_kai_admits_it(dev_run):
    probe = dev_run.named("kai-queue-webhook-probe").inputs
    assert probe["metadata"]["namespace"] == "kai-scheduler"
    pod = probe["spec"]["template"]["spec"]
    container = pod["containers"][0]
    stated = dev_config()["gpu-tenancy:cluster"]["microk8s"]["kubernetesVersion"]
    assert container["image"] == versions.KUBECTL_IMAGES[stated]
    assert container["args"] == ["create", "--dry-run=server", "-f", "/probe/queue.yaml"]
    assert pod["restartPolicy"] == "Never" and probe["spec"]["backoffLimit"] >= 5
    manifest = yaml.safe_load(dev_run.named("kai-probe-queue").inputs["data"]["queue.yaml"])
    assert manifest["kind"] == "Queue" and set(manifest["spec"]["resources"]) == {"gpu", "cpu", "memory"}
    role = dev_run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")[0].inputs
    assert role["rules"][0] == {"apiGroups": ["scheduling.run.ai"], "resources": ["queues"], "verbs": ["create"]}
    binding = dev_run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")[0].inputs
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": pod["serviceAccountName"],
                                    "namespace": "kai-scheduler"}]


def test_the_probe_queue_is_a_valid_queue(dev_run):
    from tests.conftest import upstream_file
    import jsonschema

    crd = yaml.safe_load(upstream_file("kai-scheduler", "queues.crd.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    manifest = yaml.safe_load(dev_run.named("kai-probe-queue").inputs["data"]["queue.yaml"])
    jsonschema.validate(manifest, schema)


def test_the_probe_first_waits_for_kais_queue_webhook_configuration(dev_run):
    probe = dev_run.named("kai-queue-webhook-probe").inputs
    pod = probe["spec"]["template"]["spec"]
    (wait,) = pod["initContainers"]
    # KAI's operator names it webhookConfigurationNamePrefix + the Queue API version.
    assert wait["args"] == ["wait", "--for=create", "validatingwebhookconfigurations/kai-queue-validation-v2",
                            "--timeout=300s"]
    role = dev_run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")[0].inputs
    assert {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
            "resourceNames": ["kai-queue-validation-v2"], "verbs": ["get", "list", "watch"]} in role["rules"]
    # Bounded: the wait and the retries end at the Job's deadline, before Pulumi's own timeout.
    assert probe["spec"]["activeDeadlineSeconds"] < 25 * 60


def test_kais_queue_webhook_name_is_the_one_the_operator_registers_at_the_accepted_tags():
    """The operator names the queue webhook configuration <prefix><version> for each validated Queue
    version: the prefix is the queue controller's default, the versions come from KAI's constants."""
    from components.kai import QUEUE_WEBHOOK

    for tag in ACCEPTED_TAGS[KAI_REPOSITORY]:
        defaults = git(KAI_REPOSITORY, "show", f"{tag}:pkg/apis/kai/v1/queue_controller/queue_controller.go")
        [prefix] = re.findall(r'defaultValidatingWebhookPrefix\s*=\s*"([^"]+)"', defaults)
        constants = git(KAI_REPOSITORY, "show", f"{tag}:pkg/common/constants/constants.go")
        [versions_list] = re.findall(r"func QueueValidatedVersions\(\) \[\]string \{\s*return \[\]string\{([^}]*)\}",
                                     constants)
        names = {prefix + version for version in re.findall(r'"([^"]+)"', versions_list)}
        resources = git(KAI_REPOSITORY, "show", f"{tag}:pkg/operator/operands/queue_controller/resources.go")
        assert "WebhookConfigurationNamePrefix, version" in resources, f"{tag}: the operator names its webhook differently"
        assert QUEUE_WEBHOOK in names, f"{tag} registers {sorted(names)}"


def test_a_new_stack_gets_the_newest_kai_and_gpu_operator():
    from config import versions

    config = dev_config()
    del config["gpu-tenancy:kaiScheduler"]["version"]
    assert kai_release(run(config)).inputs["version"] == versions.KAI_VERSION == "v0.17.0"
    assert versions.GPU_OPERATOR_VERSION == versions.MICROK8S_ADDON_GPU_OPERATOR_VERSION == "v26.7.0"
