"""The plan diff's "Changes a running site refuses or that lose state" for day-2 edits no Kubernetes object shows: a
MicroK8s setup step run again, Prometheus' volume grown, a tenant's vCluster moved to another backing store.
"""

from __future__ import annotations

import copy

import pytest

from tests.conftest import dev_config, eks_config, real_charts_or_skip
from tests.isolation_spec import isolation_config, prefixed
from tests.release_renders import plan_of
from tools.plan import cli as plan
from tools.plan.diff import diff_plans, render_diff
from tools.plan.replacement import pulumi_findings
from tools.plan.vcluster_store import ACCEPTED_AFTER

DEPLOYED_ETCD = {"controlPlane": {"backingStore": {"etcd": {"deploy": {"enabled": True}},
                                                   "database": {"embedded": {"enabled": False}}}}}


def _findings(base: dict, config: dict, stack: str = "dev"):
    old, new = plan_of(base, stack), plan_of(config, stack)
    diff = diff_plans(old, new)
    diff.running_site = pulumi_findings(diff, old, new)
    return diff.running_site, render_diff(diff, "a", "b")


def _edited(base: dict, edit) -> dict:
    config = copy.deepcopy(base)
    edit(config)
    return config


def _microk8s(config: dict) -> dict:
    return config["gpu-tenancy:cluster"]["microk8s"]


def _addon_site(version: str | None) -> dict:
    config = dev_config()
    _microk8s(config)["enableNvidiaAddon"] = True
    if version is not None:
        _microk8s(config)["nvidiaAddonOperatorVersion"] = version
    return config


# --- MicroK8s setup steps run again -----------------------------------------------------------------------


@pytest.mark.parametrize("new", ["v26.7.0", None], ids=["stated", "a new program default"])
def test_a_new_addon_operator_version_is_not_applied_to_a_box_whose_addon_is_enabled(new):
    found, text = _findings(_addon_site("v26.3.3"), _addon_site(new))
    [finding] = [f for f in found if f.subject.endswith(" host-enable-nvidia")]
    assert (finding.category, finding.field, finding.old, finding.new) == ("not applied", "create", "v26.3.3",
                                                                           "v26.7.0")
    assert "already enabled" in finding.why and "`microk8s disable nvidia`" in finding.fix
    assert "GPU pods" in finding.fix and "**Not applied" in text


@pytest.mark.parametrize("edit, old, new", [
    (lambda config: config["gpu-tenancy:cluster"].update(podPidsLimit=32768), "--pod-max-pids=16384",
     "--pod-max-pids=32768"),
    (lambda config: _microk8s(config).update(systemReservedMemory="8Gi"), "--system-reserved=pid=4096,memory=4Gi",
     "--system-reserved=pid=4096,memory=8Gi"),
], ids=["podPidsLimit", "systemReservedMemory"])
def test_new_kubelet_settings_restart_kubelite_and_a_larger_reserve_may_kill_pods(edit, old, new):
    found, _ = _findings(dev_config(), _edited(dev_config(), edit))
    [finding] = [f for f in found if f.subject.endswith(" host-pod-pids-limit")]
    assert (finding.category, finding.field, finding.old, finding.new) == ("disrupts", "create", old, new)
    assert "kubelite restarts" in finding.why and "OOM-kills" in finding.why


def test_new_audit_log_settings_restart_kubelite():
    found, _ = _findings(dev_config(), _edited(dev_config(), lambda config: _microk8s(config).update(
        auditLog={"maxAgeDays": 7})))
    [finding] = [f for f in found if f.subject.endswith(" host-apiserver-audit-log")]
    assert (finding.category, finding.old, finding.new) == ("disrupts", "--audit-log-maxage=30",
                                                            "--audit-log-maxage=7")
    assert "kubelite restarts" in finding.why


# --- Prometheus' volume -------------------------------------------------------------------------------------


def _prometheus_site(storage: str) -> dict:
    config = eks_config()
    config["gpu-tenancy:observability"] = {"prometheus": "install", "storage": storage}
    return config


def test_a_larger_prometheus_volume_is_not_applied_to_its_claim_while_its_retention_size_grows():
    found, _ = _findings(_prometheus_site("50Gi"), _prometheus_site("100Gi"), "eks")
    [finding] = [f for f in found if f.category == "not applied"]
    assert finding.subject.endswith(" observability-release")
    assert (finding.field.rsplit(".", 1)[-1], finding.old, finding.new) == ("storage", "50Gi", "100Gi")
    assert "retentionSize" in finding.why
    assert ("kubectl patch -n monitoring pvc prometheus-kube-prometheus-stack-prometheus-db-prometheus-kube-"
            "prometheus-stack-prometheus-0") in finding.fix


def test_a_smaller_prometheus_volume_is_not_reported():
    found, _ = _findings(_prometheus_site("100Gi"), _prometheus_site("50Gi"), "eks")
    assert not [f for f in found if f.category == "not applied"]


# --- a vCluster's backing store -----------------------------------------------------------------------------


def _store_site(team_values: dict | None) -> dict:
    config = dev_config()
    if team_values is not None:
        config["gpu-tenancy:teams"][1]["vcluster"] = {"extraValues": team_values}
    return config


def test_a_tenant_moved_from_its_embedded_database_to_a_deployed_etcd_starts_empty():
    found, text = _findings(_store_site(None), _store_site(DEPLOYED_ETCD))
    [finding] = [f for f in found if f.field == "values.controlPlane.backingStore"]
    assert (finding.category, finding.subject.split(" ")[-1], finding.old, finding.new) == (
        "lost", "tenant-team-vision-vcluster", "embedded-database", "deployed-etcd")
    assert "data-team-vision-0" in finding.why and "restore" in finding.fix


def test_a_tenant_moved_back_to_the_embedded_database_is_refused_by_vcluster():
    assert "deployed-etcd" not in ACCEPTED_AFTER.get("embedded-database", ())
    found, text = _findings(_store_site(DEPLOYED_ETCD), _store_site(None))
    [finding] = [f for f in found if f.field == "values.controlPlane.backingStore"]
    assert (finding.category, finding.old, finding.new) == ("refused", "deployed-etcd", "embedded-database")
    assert "seems like you were using deployed-etcd" in finding.why and "**Refused" in text


def test_the_diff_names_the_store_change_instead_of_the_control_planes_removed_statefulset(tmp_path):
    cache = real_charts_or_skip(plan_of(dev_config()))
    common = ["--render-charts", "--chart-cache", str(cache)]
    assert plan.main(["dev", "--out", str(tmp_path / "old"), *common], config=_store_site(None)) == 0
    assert plan.main(["dev", "--out", str(tmp_path / "new"), *common, "--diff-against",
                      str(tmp_path / "old" / "plan.json")], config=_store_site(DEPLOYED_ETCD)) == 0
    section = (tmp_path / "new" / "diff.md").read_text().split("\n## ")[1]
    assert "tenant-team-vision-vcluster: `values.controlPlane.backingStore` \"embedded-database\" -> " in section
    assert "team-vision: StatefulSet" not in section


# --- a sharing profile's new ConfigMap key -------------------------------------------------------------------


def _time_slicing(config: dict, **settings) -> dict:
    config["gpu-tenancy:gpuOperator"]["timeSlicing"].update(settings)
    return config


def _kubeconfig_site() -> dict:
    config = {key: value for key, value in dev_config().items() if key != "gpu-tenancy:cluster"}
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {"storageClass": "standard"}}
    config["gpu-tenancy:gpuOperator"] = {"mode": "install", "timeSlicing": {"replicas": 4}}
    config["gpu-tenancy:kubeconfig"] = {"secure": "v1:encrypted"}
    return config


@pytest.mark.parametrize("site, kubectl", [(dev_config, "microk8s kubectl"), (_kubeconfig_site, "kubectl")],
                         ids=["microk8s", "kubeconfig"])
def test_a_new_time_sliced_key_tells_to_relabel_the_nodes_labelled_by_hand_with_the_old_one(site, kubectl):
    old = plan_of(site())
    found, text = _findings(site(), _time_slicing(site(), replicas=2))
    keys = old["outputs"]["timeSlicing"]["profileKeys"]
    [finding] = [f for f in found if f.subject.endswith(" gpu-operator-time-slicing")]
    new_key = plan_of(_time_slicing(site(), replicas=2))["outputs"]["timeSlicing"]["profileKeys"]["time-sliced"]
    assert (finding.category, finding.field, finding.old, finding.new) == (
        "disrupts", "nvidia.com/device-plugin.config", keys["time-sliced"], new_key)
    assert "reads the label again only when it changes" in finding.why
    # The host's own command: on MicroK8s, the one its docs and other findings give.
    assert f"`{kubectl} label node N nvidia.com/device-plugin.config={new_key} --overwrite`" in finding.fix
    assert f"find the nodes with `{kubectl} get nodes -l" in finding.fix
    assert "right after `pulumi up`" in finding.fix and "nothing it holds is lost" not in text


def test_a_new_default_key_restarts_the_device_plugin_so_hand_labelled_nodes_move_to_the_plain_name_first():
    found, _ = _findings(_time_slicing(dev_config(), defaultProfile="time-sliced"),
                         _time_slicing(dev_config(), defaultProfile="time-sliced", replicas=2))
    [finding] = [f for f in found if f.field == "nvidia.com/device-plugin.config"]
    assert "during `pulumi up`" in finding.why
    assert "right before `pulumi up`" in finding.fix and "nvidia.com/device-plugin.config=time-sliced " in finding.fix
    assert "`kubectl" not in finding.fix and "find them with `microk8s kubectl get nodes -l" in finding.fix


def test_on_eks_the_node_group_label_moves_with_the_key_and_nothing_asks_to_relabel_by_hand():
    def time_sliced_group(config: dict) -> dict:
        config["gpu-tenancy:cluster"]["eks"]["gpuNodeGroups"][0]["sharingProfile"] = "time-sliced"
        config["gpu-tenancy:kaiScheduler"] = {**config.get("gpu-tenancy:kaiScheduler", {}), "gpuSharing": False}
        return config

    found, _ = _findings(time_sliced_group(eks_config()), _time_slicing(time_sliced_group(eks_config()), replicas=3),
                         "eks")
    assert not [f for f in found if f.field == "nvidia.com/device-plugin.config"]
    [finding] = [f for f in found if f.field == 'labels["nvidia.com/device-plugin.config"]']
    assert finding.category == "disrupts" and "relabels the group's nodes in place" in finding.why


# --- a team's isolation tier ----------------------------------------------------------------------------------


def _exclusive_nlp(config: dict) -> dict:
    team = config["gpu-tenancy:teams"][0]
    team["isolation"] = {"tier": "exclusive"}
    team["resources"]["gpu"]["quota"] = 0  # a whole GPU of the box's one: no fraction of it left to promise
    return config


def _isolation_site(train_tier: str) -> dict:
    config = isolation_config()
    config["teams"][3]["isolation"]["tier"] = train_tier
    return prefixed(config)


@pytest.mark.parametrize("old, new, stack, team, tiers, rules", [
    (dev_config, lambda: _exclusive_nlp(dev_config()), "dev", "team-nlp", ("shared", "exclusive"), "[whole-gpus]"),
    (lambda: _isolation_site("exclusive"), lambda: _isolation_site("memory-capped"), "isolation", "team-train",
     ("exclusive", "memory-capped"), "[no-mig], [memory-limit], [hami-core]"),
], ids=["shared to exclusive", "exclusive to memory-capped"])
def test_a_new_isolation_tier_leaves_the_teams_pending_pods_unbindable(old, new, stack, team, tiers, rules):
    found, text = _findings(old(), new(), stack)
    [finding] = [f for f in found if f.field == "teams[].isolation.tier"]
    assert (finding.category, (finding.old, finding.new)) == ("disrupts", tiers)
    assert finding.subject.endswith(f" tenant-{team}-isolation-policy") and f"({rules})" in finding.why
    assert "KAI's binder writes a pod's labels and annotations before it binds it" in finding.why
    assert "Running pods keep running" in finding.why
    assert f"tell team {team} before `pulumi up`" in finding.fix and "deletes its pending pods" in finding.fix
    assert "**Disrupts running work**" in text


def test_a_team_back_to_the_shared_tier_has_no_rules_to_refuse_its_pods():
    found, _ = _findings(_exclusive_nlp(dev_config()), dev_config())
    assert not [f for f in found if f.field == "teams[].isolation.tier"]
