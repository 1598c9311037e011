"""GpuOperator: the time-slicing ConfigMap and the three ways the operator can be run."""

from __future__ import annotations

import pytest
import yaml

from config import load_platform, versions
from config.sharing import profile_keys
from config.vocabulary import project_config
from tests import config_spec
from tests.conftest import dev_config, eks_config, run

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
RELEASE = "kubernetes:helm.sh/v3:Release"
PATCH = "kubernetes:nvidia.com/v1:ClusterPolicyPatch"


def operator_release(program):
    return next(r for r in program.of_type(RELEASE) if r.inputs["name"] == "gpu-operator")


def test_config_map_holds_an_exclusive_and_a_time_sliced_profile(dev_run):
    data = dev_run.of_type(CONFIG_MAP)[0].inputs["data"]
    keys = dev_run.outputs["timeSlicing"]["profileKeys"]
    documents = {name: yaml.safe_load(data[key]) for name, key in keys.items()}
    assert documents["exclusive"] == {"version": "v1"}
    slicing = documents["time-sliced"]["sharing"]["timeSlicing"]
    assert slicing["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert slicing["renameByDefault"] is False
    assert slicing["failRequestsGreaterThanOne"] is True


def test_a_content_change_renames_the_key_so_the_device_plugin_reloads():
    platform = load_platform(project_config(dev_config()))
    before = profile_keys(platform.gpu_operator.time_slicing)
    config = dev_config()
    config["gpu-tenancy:gpuOperator"]["timeSlicing"]["replicas"] = 8
    config["gpu-tenancy:gpuOperator"]["timeSlicing"]["defaultProfile"] = "time-sliced"
    config["gpu-tenancy:kaiScheduler"]["gpuSharing"] = False
    program = run(config)
    after = program.outputs["timeSlicing"]["profileKeys"]
    assert after["time-sliced"] != before["time-sliced"]
    assert after["exclusive"] == before["exclusive"]
    patch = program.of_type(PATCH)[0].inputs["spec"]["devicePlugin"]["config"]
    assert patch["default"] == after["time-sliced"]
    assert set(program.of_type(CONFIG_MAP)[0].inputs["data"]) == set(after.values()) | set(after)


def test_microk8s_addon_mode_patches_the_addon_cluster_policy_instead_of_a_second_release(dev_run):
    assert not [r for r in dev_run.of_type(RELEASE) if r.inputs["name"] == "gpu-operator"]
    patch = dev_run.of_type(PATCH)[0]
    assert patch.inputs["metadata"]["name"] == "cluster-policy"
    assert patch.inputs["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
    config = patch.inputs["spec"]["devicePlugin"]["config"]
    assert config == {"name": "time-slicing-config", "default": dev_run.outputs["timeSlicing"]["defaultKey"]}
    config_map = dev_run.of_type(CONFIG_MAP)[0]
    assert config_map.urn in patch.dependencies
    assert config_map.inputs["metadata"]["namespace"] == "gpu-operator-resources"
    assert dev_run.of_type("kubernetes:core/v1:Namespace") and not any(
        n.inputs["metadata"]["name"] == "gpu-operator-resources" for n in dev_run.of_type("kubernetes:core/v1:Namespace"))


def test_install_on_eks_turns_driver_and_toolkit_off_and_points_at_the_config_map(eks_run):
    release = operator_release(eks_run)
    assert release.inputs["chart"] == "gpu-operator"
    assert release.inputs["repositoryOpts"]["repo"] == "https://helm.ngc.nvidia.com/nvidia"
    assert release.inputs["version"] == "v26.3.3"
    assert release.inputs["namespace"] == "gpu-operator"
    values = release.inputs["values"]
    assert values["driver"] == {"enabled": False}
    assert values["toolkit"] == {"enabled": False}
    assert values["cdi"] == {"enabled": True}
    assert values["devicePlugin"]["config"] == {
        "name": "time-slicing-config", "default": eks_run.outputs["timeSlicing"]["defaultKey"], "create": False}
    assert eks_run.of_type(CONFIG_MAP)[0].urn in release.dependencies


def test_install_on_microk8s_points_the_toolkit_at_microk8s_containerd():
    config = dev_config()
    config["gpu-tenancy:gpuOperator"]["mode"] = "install"
    release = operator_release(run(config))
    env = {entry["name"]: entry["value"] for entry in release.inputs["values"]["toolkit"]["env"]}
    assert env == {
        "CONTAINERD_CONFIG": "/var/snap/microk8s/current/args/containerd-template.toml",
        "CONTAINERD_SOCKET": "/var/snap/microk8s/common/run/containerd.sock",
        "RUNTIME_CONFIG_SOURCE": "file=/var/snap/microk8s/current/args/containerd.toml",
    }
    assert release.inputs["values"]["driver"] == {"enabled": False}


def test_operator_release_fails_cleanly_and_waits_long_enough(eks_run):
    release = operator_release(eks_run)
    assert release.inputs["atomic"] is True
    assert release.inputs["cleanupOnFail"] is True
    assert release.inputs["timeout"] >= 1200


def test_external_mode_creates_only_the_config_map_and_exports_it():
    config = eks_config()
    config["gpu-tenancy:gpuOperator"]["mode"] = "external"
    config["gpu-tenancy:gpuOperator"]["namespace"] = "nvidia-system"
    program = run(config)
    assert not [r for r in program.of_type(RELEASE) if r.inputs["name"] == "gpu-operator"]
    assert program.of_type(PATCH) == []
    config_map = program.of_type(CONFIG_MAP)[0].inputs
    assert config_map["metadata"]["namespace"] == "nvidia-system"
    exported = program.outputs["timeSlicing"]
    assert exported["namespace"] == "nvidia-system"
    assert exported["configMap"] == "time-slicing-config"
    assert set(config_map["data"]) == set(exported["profileKeys"].values()) | set(exported["profileKeys"])


def test_hand_labelled_nodes_can_use_the_plain_profile_names(dev_run):
    data = dev_run.of_type(CONFIG_MAP)[0].inputs["data"]
    for name, key in dev_run.outputs["timeSlicing"]["profileKeys"].items():
        assert data[name] == data[key]


def test_only_an_installed_operator_gets_its_namespace_created(dev_run, eks_run):
    def namespaces(program):
        return {n.inputs["metadata"]["name"] for n in program.of_type("kubernetes:core/v1:Namespace")}

    assert "gpu-operator" in namespaces(eks_run)
    assert "gpu-operator-resources" not in namespaces(dev_run)
    config = eks_config()
    config["gpu-tenancy:gpuOperator"]["mode"] = "external"
    assert "gpu-operator" not in namespaces(run(config))


# --- a release that shares the operator's cluster role -------------------------------------------------------------


def _shared_role_warnings(site: dict) -> list[str]:
    return [warning for warning in load_platform(site).warnings if "node-feature-discovery" in warning]


@pytest.mark.parametrize("release", versions.GPU_OPERATOR_RELEASES)
def test_an_installed_operator_whose_chart_binds_its_role_to_node_feature_discovery_too_is_warned(release):
    warned = _shared_role_warnings(config_spec.put(config_spec.eks_config(), "gpuOperator.version", release))
    numbers = versions.release_numbers
    if numbers(release) >= numbers(versions.GPU_OPERATOR_OWN_CLUSTER_ROLE):
        assert warned == []
        return
    [warning] = warned
    assert warning.startswith(f"gpuOperator.version {release}: ")
    assert "whose worker runs on every node" in warning and "Pod Security level" in warning
    assert f"Pin gpuOperator.version {versions.GPU_OPERATOR_OWN_CLUSTER_ROLE} or later" in warning


def test_the_microk8s_addon_is_warned_at_its_key_and_an_operator_the_program_does_not_put_there_is_not():
    site = config_spec.put(config_spec.dev_config(), "cluster.microk8s.enableNvidiaAddon", True)
    [warning] = _shared_role_warnings(config_spec.put(site, "cluster.microk8s.nvidiaAddonOperatorVersion", "v24.9.2"))
    assert warning.startswith("cluster.microk8s.nvidiaAddonOperatorVersion v24.9.2: ")
    external = config_spec.put(config_spec.eks_config(), "gpuOperator", {"mode": "external", "version": "v24.9.0"})
    assert _shared_role_warnings(external) == []
