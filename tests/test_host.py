"""HostCluster: MicroK8s over SSH or locally, or an existing cluster (EKS: test_host_eks.py)."""

from __future__ import annotations

import os
import subprocess

import pytest

from config import ConfigError
from tests.conftest import dev_config, run
from tests.test_tenant import api_server_rules
from tools.offline.mockrun import run_program
from tools.offline.recording import REDACTED

SECRET = {"secure": "v1:encrypted"}


def commands(program):
    return {r.name.removeprefix("host-"): r for r in program.resources if r.type.startswith("command:")}


# --- MicroK8s ------------------------------------------------------------------------------------


def test_local_microk8s_runs_the_seed_steps_in_order_on_this_machine(dev_run):
    steps = commands(dev_run)
    assert {r.type for r in steps.values()} == {"command:local:Command"}
    assert steps["hold-refresh"].inputs["create"] == "sudo snap refresh --hold microk8s"
    assert steps["hold-refresh"].inputs["delete"] == "sudo snap refresh --unhold microk8s"
    assert steps["enable-dns"].inputs["create"].endswith("sudo microk8s enable dns")
    assert steps["enable-hostpath-storage"].inputs["create"].endswith("sudo microk8s enable hostpath-storage")
    assert steps["read-kubeconfig"].inputs["create"] == "sudo microk8s config"
    # The kubelet's per-pod process limit is set (and kubelite restarted) before any addon starts a pod.
    order = [("pod-pids-limit", "hold-refresh"), ("enable-dns", "pod-pids-limit"),
             ("enable-hostpath-storage", "enable-dns"), ("read-kubeconfig", "enable-hostpath-storage")]
    for step, before in order:
        assert steps[before].urn in steps[step].dependencies
    assert "enable-nvidia" not in steps, "the dev site's addon is already enabled"


def test_reading_the_kubeconfig_keeps_it_out_of_logs_and_state(dev_run):
    read = commands(dev_run)["read-kubeconfig"]
    assert read.options["additionalSecretOutputs"] == ["stdout"]
    assert read.inputs["logging"] == "none"


def test_the_microk8s_serving_certificates_are_read_in_the_clear_once_the_addons_are_on(dev_run):
    read = commands(dev_run)["read-serving-certificates"]
    # A host where they cannot be read still deploys: their end is exported as unknown (ops.expiry reports it due).
    assert read.inputs["create"] == ("sudo cat /var/snap/microk8s/current/certs/server.crt "
                                     "/var/snap/microk8s/current/certs/front-proxy-client.crt || true")
    # Reading changes nothing on the host, so destroy has nothing to undo.
    assert "delete" not in read.inputs
    # Certificates are what every TLS client is shown: public, unlike the kubeconfig beside them.
    assert not read.options.get("additionalSecretOutputs")
    assert read.inputs.get("logging") != "none"
    assert commands(dev_run)["enable-hostpath-storage"].urn in read.dependencies


def test_setup_commands_only_run_on_create_so_a_rerun_runs_nothing(dev_run):
    for step in commands(dev_run).values():
        assert "update" not in step.inputs
        assert "triggers" not in step.inputs


def test_remote_microk8s_connects_over_ssh_with_the_secret_key():
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"].update(host="gpu-box.lab", user="ops", port=2222, useSudo=False)
    config["gpu-tenancy:sshPrivateKey"] = SECRET
    program = run(config)
    steps = commands(program)
    assert {r.type for r in steps.values()} == {"command:remote:Command"}
    assert steps["read-kubeconfig"].inputs["connection"] == REDACTED
    connection = steps["read-kubeconfig"].raw_inputs["connection"]
    assert connection["host"] == "gpu-box.lab"
    assert connection["user"] == "ops"
    assert connection["port"] == 2222
    assert connection["privateKey"] == "offline-plan-placeholder"
    assert steps["read-kubeconfig"].inputs["create"] == "microk8s config"
    assert steps["read-serving-certificates"].inputs["create"].startswith("cat /var/snap/microk8s/current/certs/")
    assert steps["read-serving-certificates"].raw_inputs["connection"]["host"] == "gpu-box.lab"


def test_remote_microk8s_without_a_key_is_a_config_error():
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["host"] = "gpu-box.lab"
    with pytest.raises(ConfigError) as error:
        # As `pulumi up` runs it: no offline placeholder for the unset secret.
        run_program(config, stack="test", secret_placeholders=False)
    assert "sshPrivateKey" in error.value.keys


def test_a_secret_set_in_plain_text_is_refused():
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["host"] = "gpu-box.lab"
    config["gpu-tenancy:sshPrivateKey"] = "-----BEGIN OPENSSH PRIVATE KEY-----"
    with pytest.raises(ConfigError) as error:
        run(config)
    assert "--secret" in str(error.value)
    assert "BEGIN OPENSSH" not in str(error.value)


def test_the_nvidia_addon_is_enabled_with_a_pinned_operator_version_when_asked():
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["enableNvidiaAddon"] = True
    steps = commands(run(config))
    assert "sudo microk8s enable nvidia --gpu-operator-version v26.7.0 && " in steps["enable-nvidia"].inputs["create"]
    assert steps["enable-nvidia"].urn in steps["read-kubeconfig"].dependencies
    assert steps["enable-nvidia"].urn in steps["read-serving-certificates"].dependencies


def fake_microk8s(tmp_path, exit_code: int) -> dict:
    """A PATH whose ``microk8s`` records its arguments and exits with ``exit_code``."""
    script = tmp_path / "microk8s"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/calls\nexit {exit_code}\n")
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}


def test_enabling_the_nvidia_addon_fails_clearly_when_no_operator_appears(tmp_path, monkeypatch):
    from components import host

    monkeypatch.setattr(host, "ADDON_CHECK_ATTEMPTS", 3)
    monkeypatch.setattr(host, "ADDON_CHECK_INTERVAL_SECONDS", 0)
    result = subprocess.run(["sh", "-c", host.addon_operator_check("")], env=fake_microk8s(tmp_path, 1),
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "no GPU Operator ClusterPolicy cluster-policy" in result.stderr
    assert "microk8s disable nvidia" in result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == ["kubectl get clusterpolicies.nvidia.com cluster-policy"] * 3


def test_enabling_the_nvidia_addon_passes_once_its_cluster_policy_exists(tmp_path):
    from components import host

    result = subprocess.run(["sh", "-c", host.addon_operator_check("")], env=fake_microk8s(tmp_path, 0),
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def test_api_server_url_rewrites_the_kubeconfig_server():
    from components.host import kubeconfig_with_server
    from tools.offline.mocks import fake_kubeconfig

    rewritten = kubeconfig_with_server(fake_kubeconfig("microk8s", "https://10.0.0.10:16443"),
                                       "https://gpu-box.lab:16443")
    assert "https://gpu-box.lab:16443" in rewritten
    assert "10.0.0.10" not in rewritten


# --- existing cluster ------------------------------------------------------------------------------


def test_existing_cluster_uses_the_secret_kubeconfig_and_context():
    config = dev_config()
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {"context": "gke-prod", "gpus": 4}}
    config["gpu-tenancy:gpuOperator"]["mode"] = "external"
    config["gpu-tenancy:kubeconfig"] = SECRET
    program = run(config)
    provider = program.of_type("pulumi:providers:kubernetes")[0].inputs
    assert provider["kubeconfig"] == REDACTED
    assert provider["context"] == "gke-prod"
    assert not any(r.type.startswith(("command:", "aws:", "eks:")) for r in program.resources)


def test_existing_cluster_storage_class_and_api_port_reach_the_tenants():
    config = dev_config()
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig",
                                     "kubeconfig": {"storageClass": "fast.ssd-1", "apiServerPort": 16443}}
    config["gpu-tenancy:gpuOperator"]["mode"] = "external"
    config["gpu-tenancy:kubeconfig"] = SECRET
    program = run(config)
    values = program.named("tenant-team-nlp-vcluster").inputs["values"]
    assert values["controlPlane"]["statefulSet"]["persistence"]["volumeClaim"]["storageClass"] == "fast.ssd-1"
    assert api_server_rules(program, "vcluster-team-nlp", "team-nlp") == [{"ports": [{"port": 16443, "protocol": "TCP"}]}]
    assert program.of_type("kubernetes:storage.k8s.io/v1:StorageClass") == []


def test_existing_cluster_without_a_storage_class_uses_the_clusters_default():
    config = dev_config()
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {}}
    config["gpu-tenancy:gpuOperator"]["mode"] = "external"
    config["gpu-tenancy:kubeconfig"] = SECRET
    program = run(config)
    values = program.named("tenant-team-nlp-vcluster").inputs["values"]
    assert "persistence" not in values["controlPlane"]["statefulSet"]
    # An API server port nobody stated: vCluster's three common ones, as its own rule.
    assert api_server_rules(program, "vcluster-team-nlp", "team-nlp") == [
        {"ports": [{"port": port, "protocol": "TCP"} for port in (443, 8443, 6443)]}]


@pytest.mark.parametrize("key, value", [("storageClass", "Fast_SSD"), ("storageClass", "-x"),
                                        ("apiServerPort", 0), ("apiServerPort", 70000)])
def test_existing_cluster_host_settings_are_checked(key, value):
    config = dev_config()
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {key: value}}
    config["gpu-tenancy:gpuOperator"]["mode"] = "external"
    config["gpu-tenancy:kubeconfig"] = SECRET
    with pytest.raises(ConfigError) as error:
        run(config)
    assert f"cluster.kubeconfig.{key}" in error.value.keys


# --- what each host kind provides (config/hosts.py) --------------------------------------------------


def test_host_profiles_say_what_each_kind_provides():
    from config import load_platform
    from config.hosts import GPU_TAINT, host_profile
    from config.vocabulary import project_config
    from tools.offline.mockrun import load_stack_file

    def platform(stack):
        return load_platform(project_config(load_stack_file(stack)), stack=stack)

    microk8s = platform("dev").host
    assert (microk8s.kind, microk8s.api_server_port, microk8s.storage_class) == ("microk8s", 16443, "microk8s-hostpath")
    assert not microk8s.creates_storage_class and microk8s.gpu_driver_preinstalled
    eks = platform("eks")
    assert eks.host == host_profile(eks.cluster)
    assert (eks.host.api_server_port, eks.host.storage_class, eks.host.creates_storage_class) == (443, "gp3", True)
    assert eks.gpu_operator.driver_enabled is False and eks.gpu_operator.toolkit_enabled is False
    pools = {pool.name: pool for pool in eks.host.node_pools}
    assert pools["system"].taints == () and not pools["system"].gpu
    assert pools["gpu"].taints == (GPU_TAINT,) and pools["gpu"].gpu
    assert [name for name, pool in pools.items() if pool.admits(eks.host.tenant_node_labels)] == ["gpu"]
    assert pools["gpu"].admits({"gpu-tenancy/pool": "gpu"}) and not pools["system"].admits({"gpu-tenancy/pool": "gpu"})


def test_an_existing_cluster_profile_knows_only_what_the_config_says():
    from config.hosts import host_profile
    from config.model import Cluster
    from config.model_host import KubeconfigHost

    profile = host_profile(Cluster("kubeconfig", kubeconfig=KubeconfigHost(context=None, gpus=None)))
    assert profile.node_pools is None
    assert profile.storage_class is None and profile.api_server_port is None
    assert not profile.gpu_driver_preinstalled and dict(profile.tenant_node_labels) == {}
