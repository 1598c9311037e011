"""The simulators tell the truth: tests/vcluster_*.py, tests/kai_pods.py and tests/apiserver_pods.py against
vCluster's, KAI's and Kubernetes' source at the pinned tags."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ACCEPTED_TAGS, ACCEPTED_VCLUSTER_TAGS, dev_config, git, go_function
from tests.tenant_sim import KAI_SCHEDULER, container, platform_of, virtual_pod
from tests.apiserver_pods import api_validate
from tests.kai_keys import string_constants
from tests.kai_pods import (
    FRACTION, GPU_GROUP, MIG_INSTANCE, NUM_DEVICES, RECEIVED_RESOURCE_TYPE, REGULAR, device_list_prefix, kai_bind,
    kai_mutate, sanitises_sharing_names,
)
from tests.vcluster_names import host_label_key, translated_label
from tests.vcluster_pods import vcluster_sync

VCLUSTER = "loft-sh/vcluster"
KAI = "kai-scheduler/KAI-Scheduler"


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_translated_label_keys_match_vclusters_own_tests(tag):
    # vCluster's tests use the release name "suffix"; their expected keys are literals in the source.
    literals = set(re.findall(r"vcluster\.loft\.sh/label-suffix-x-[0-9a-f]{10}",
                              git(VCLUSTER, "grep", "-h", "label-suffix-x-", tag, "--", "pkg")))
    ours = {translated_label("vcluster.loft.sh/label", "suffix", key)
            for key in ("release", "vcluster.loft.sh/managed-by", "vcluster.loft.sh/namespace")}
    assert literals and literals <= ours | {translated_label("vcluster.loft.sh/label", "suffix",
                                                            "vcluster.loft.sh/controlled-by")}


def test_the_syncer_renames_exactly_four_label_keys_and_passes_the_rest():
    team = platform_of(dev_config()).teams[0]
    labels = {"release": "r", "vcluster.loft.sh/managed-by": "x", "vcluster.loft.sh/namespace": "y",
              "vcluster.loft.sh/controlled-by": "z", "vcluster.loft.sh/other": "kept", "app": "web"}
    host = vcluster_sync(virtual_pod(labels=labels), team)["metadata"]["labels"]
    assert host["vcluster.loft.sh/other"] == "kept" and host["app"] == "web"
    assert host["vcluster.loft.sh/managed-by"] == team.vcluster_name and host["vcluster.loft.sh/namespace"] == "default"
    assert {host_label_key(key, team.vcluster_name) for key in ("release", "vcluster.loft.sh/controlled-by")} <= set(host)
    assert "release" not in host and "vcluster.loft.sh/controlled-by" not in host


def test_the_syncer_takes_the_tenants_own_pod_annotations():
    team = platform_of(dev_config()).teams[0]
    pod = virtual_pod(annotations={"vcluster.loft.sh/name": "someone-else", "cluster-autoscaler.kubernetes.io/"
                                   "safe-to-evict": "false"})
    annotations = vcluster_sync(pod, team)["metadata"]["annotations"]
    assert annotations["vcluster.loft.sh/name"] == "someone-else"
    assert annotations["vcluster.loft.sh/object-name"] == "model"


def test_kais_webhook_keeps_value_from_and_the_api_server_refuses_the_result():
    reference = {"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}}
    pod = virtual_pod(scheduler=KAI_SCHEDULER, containers=[container(env_entries=[reference])])
    entry = kai_mutate(pod)["spec"]["containers"][0]["env"][0]
    assert entry == {**reference, "value": "void"}
    assert api_validate(kai_mutate(pod)) != []


def test_kais_webhook_gives_the_fraction_container_three_variables_a_volume_and_its_env_from():
    pod = virtual_pod(name="p", scheduler=KAI_SCHEDULER, annotations={"gpu-fraction": "0.5"})
    mutated = kai_mutate(pod)
    prefix = mutated["metadata"]["annotations"]["runai/shared-gpu-configmap"]
    main = mutated["spec"]["containers"][0]
    assert {e["name"]: e["valueFrom"]["configMapKeyRef"]["name"] for e in main["env"]} == {
        name: f"{prefix}-0" for name in ("NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS", "GPU_PORTION")}
    assert main["envFrom"] == [{"configMapRef": {"name": f"{prefix}-0-evar", "optional": False}}]
    assert mutated["spec"]["volumes"] == [{"name": f"{prefix}-0-vol", "configMap": {"name": f"{prefix}-0"}}]
    assert mutated["spec"]["runtimeClassName"] == "nvidia"


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_the_simulator_sanitises_sharing_names_where_kai_does(tag):
    prefix = git(KAI, "show", f"{tag}:pkg/binder/common/gpusharingconfigmap/config_map.go")
    volumes = git(KAI, "show", f"{tag}:pkg/binder/common/volumes.go")
    trims = 'strings.TrimRight(baseName, ".-")' in prefix
    assert trims == ("invalidDNSLabelChars.ReplaceAllString(volumeName" in volumes) == sanitises_sharing_names(tag)


def test_the_device_list_prefix_is_cut_as_each_kai_tag_cuts_it():
    name = "a" * 32 + "-" + "b" * 10
    assert device_list_prefix(name, 0, "v0.16.4", "bq2kd7x") == "a" * 32 + "--bq2kd7x-shared-gpu"
    assert device_list_prefix(name, 0, "v0.17.0", "bq2kd7x") == "a" * 32 + "-bq2kd7x-shared-gpu"
    assert device_list_prefix(name, 10, "v0.16.4", "bq2kd7x") == "a" * 32 + "-bq2kd7x-shared-gpu"
    assert device_list_prefix(name, 0, "v0.16.0", "bq2kd7x") == device_list_prefix(name, 0, "v0.16.4", "bq2kd7x")


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_the_simulated_binder_writes_the_keys_and_values_kais_binder_writes(tag):
    constants = string_constants(git(KAI, "show", f"{tag}:pkg/common/constants/constants.go"))
    received = string_constants(git(KAI, "show", f"{tag}:pkg/scheduler/api/pod_info/pod_info.go"))
    assert (constants["GPUGroup"], constants["ReceivedResourceType"], constants["GpuFractionsNumDevices"]) == (
        GPU_GROUP, RECEIVED_RESOURCE_TYPE, NUM_DEVICES)
    assert (received["ReceivedTypeFraction"], received["ReceivedTypeRegular"], received["ReceivedTypeMigInstance"]) \
        == (FRACTION, REGULAR, MIG_INSTANCE)
    # The multi-device key and value (updatePodGPUGroup's branch on IsMultiFraction is
    # tests/test_observability_multi_fractions.py's contract).
    sharing = git(KAI, "show", f"{tag}:pkg/common/resources/gpu_sharing.go")
    assert "return constants.MultiGpuGroupLabelPrefix + gpuGroup, gpuGroup" in go_function(
        sharing, "GetMultiFractionGpuGroupLabel"), tag
    # The scheduler picks the type MIG first, then fraction, else Regular; the binder writes it as it is.
    accepted = go_function(git(KAI, "show", f"{tag}:pkg/scheduler/api/node_info/node_info.go"),
                           "(ni *NodeInfo) setAcceptedResources")
    assert re.findall(r"pod_info\.(ReceivedType\w+)", accepted) == [
        "ReceivedTypeMigInstance", "ReceivedTypeFraction", "ReceivedTypeRegular"], tag
    binder = git(KAI, "show", f"{tag}:pkg/binder/binding/binder.go")
    assert "constants.ReceivedResourceType: bindRequest.Spec.ReceivedResourceType," in binder, tag

    def bound(containers=None, groups=(), **annotations) -> dict:
        pod = kai_bind(virtual_pod(scheduler=KAI_SCHEDULER, annotations=annotations, containers=containers),
                       groups=groups)
        return {**pod["metadata"]["labels"], **pod["metadata"]["annotations"]}

    prefix = constants["MultiGpuGroupLabelPrefix"]
    single = bound(groups=("g0",), **{"gpu-fraction": "0.5", constants["GpuFractionsNumDevices"]: "1"})
    assert single[constants["GPUGroup"]] == "g0" and not any(key.startswith(prefix) for key in single)
    assert single[constants["ReceivedResourceType"]] == received["ReceivedTypeFraction"]
    multi = bound(groups=("g0", "g1", "g2"), **{"gpu-memory": "4096", constants["GpuFractionsNumDevices"]: "3"})
    assert {key: value for key, value in multi.items() if key.startswith(constants["GPUGroup"])} == {
        f"{prefix}g0": "g0", f"{prefix}g1": "g1", f"{prefix}g2": "g2"}
    whole, mig = bound([container(gpus="2")]), bound([container(mig="nvidia.com/mig-1g.10gb")])
    assert not any(key.startswith(constants["GPUGroup"]) for key in {**whole, **mig})
    assert whole[constants["ReceivedResourceType"]] == received["ReceivedTypeRegular"]
    assert mig[constants["ReceivedResourceType"]] == received["ReceivedTypeMigInstance"]
