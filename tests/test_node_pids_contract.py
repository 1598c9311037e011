"""Contracts of the node process limits: how each host's upstream code reads what tests/test_node_pids.py checks
the program writes, read at the mirrored tags.

MicroK8s (canonical/microk8s): kubelite reads the kubelet's flags from the args file the step edits, the snap's
own file sets no limit and round-trips through the step, and the snap's argument clean-up keeps the flags. EKS
(awslabs/amazon-eks-ami, nodeadm): the user data's NodeConfig parts are parsed and merged in order, and the
NodeConfig uses only fields nodeadm declares, its kubelet drop-in carrying the settings.
"""

from __future__ import annotations

import re

import pytest
import yaml

from components.node_pids import KUBELITE_SERVICE, MICROK8S_KUBELET_ARGS, NODECONFIG_API_VERSION, eks_node_user_data
from config.model_host import DEFAULT_SYSTEM_MEMORY_RESERVE, SYSTEM_PID_RESERVE
from tests.conftest import MIRRORED_TAGS, git, mirrored_tag
from tests.node_pid_readers import (
    EKS_AMI, EKS_AMI_TAG, MICROK8S, Box, eviction_hard, node_configs, other_args, pids_flags, system_reserved,
)
from tests.test_node_pids import OURS


@pytest.mark.parametrize("tag", MIRRORED_TAGS[MICROK8S])
def test_microk8s_reads_the_kubelets_flags_from_the_file_the_step_edits(tag):
    tag = mirrored_tag(MICROK8S, tag)
    kubelite = git(MICROK8S, "show", f"{tag}:microk8s-resources/default-args/kubelite")
    # The step edits $SNAP_DATA/args/kubelet, SNAP_DATA being /var/snap/microk8s/current for the microk8s snap.
    assert "--kubelet-args-file=$SNAP_DATA/args/kubelet" in kubelite.splitlines()
    assert MICROK8S_KUBELET_ARGS.endswith("/current/args/kubelet")
    patches = git(MICROK8S, "ls-tree", "-r", "--name-only", tag, "build-scripts/components/kubernetes/patches")
    patch_path = sorted(p for p in patches.split() if p.endswith("Kubelite-integration.patch"))[-1]
    patch = git(MICROK8S, "show", f"{tag}:{patch_path}")
    reader = patch[patch.index("func ReadArgsFromFile("):]
    reader = reader[:reader.index("\n+}\n")]
    # The reading node_pid_readers.kubelite_args does: trimmed lines, '#' lines skipped, quotes dropped, split at spaces.
    for shape in ("strings.TrimSpace(line)", 'strings.HasPrefix(line, "#")', "\"\\\"'\"",
                  'strings.Split(line, " ")', "os.ExpandEnv(part)"):
        assert shape in reader, shape
    assert "kubeletArgs := options.ReadArgsFromFile(opts.KubeletArgsFile)" in patch  # once, when kubelite starts


@pytest.mark.parametrize("tag", MIRRORED_TAGS[MICROK8S])
def test_the_snaps_own_kubelet_args_set_no_limit_and_the_step_round_trips_them(tag, tmp_path):
    tag = mirrored_tag(MICROK8S, tag)
    default = git(MICROK8S, "show", f"{tag}:microk8s-resources/default-args/kubelet")
    assert pids_flags(default) == [], "the snap now sets a limit of its own: say so in cluster.podPidsLimit"
    assert system_reserved(default) == {}, "the snap now reserves for its system: weigh it against ours"
    # The snap replaces the kubelet's default signals with its own, and none of them is the PID one.
    snap_signals = eviction_hard(default)
    assert "--eviction-hard" in default and "memory.available" in snap_signals and "pid.available" not in snap_signals
    box = Box(tmp_path, default)
    assert box.set(16384).returncode == 0 and box.restarts == 1
    after = box.args.read_text()
    assert pids_flags(after) == ["16384"]
    assert system_reserved(after) == {"pid": str(SYSTEM_PID_RESERVE), "memory": DEFAULT_SYSTEM_MEMORY_RESERVE}
    assert eviction_hard(after) == {**snap_signals, **OURS}
    assert other_args(after) == other_args(default)
    assert box.set(16384).returncode == 0 and box.restarts == 0 and box.args.read_text() == after
    assert box.remove().returncode == 0 and box.restarts == 1
    assert box.args.read_text() == default


@pytest.mark.parametrize("tag", MIRRORED_TAGS[MICROK8S])
def test_microk8s_keeps_the_flags_across_its_own_argument_clean_up_and_restarts_the_kubelet_as_kubelite(tag):
    tag = mirrored_tag(MICROK8S, tag)
    utils = git(MICROK8S, "show", f"{tag}:microk8s-resources/actions/common/utils.sh")
    sanitise = utils[utils.index("sanitise_args_kubelet() {"):]
    sanitise = sanitise[:sanitise.index("\n}\n")]
    removed = re.findall(r'^\s*"([a-z0-9-]+)"', sanitise, re.MULTILINE)
    assert "docker-endpoint" in removed
    assert not {"pod-max-pids", "system-reserved", "eviction-hard"} & set(removed)
    restart = utils[utils.index("restart_service() {"):]
    restart = restart[:restart.index("\n}\n")]
    assert '"$1" == "kubelet"' in restart and f'restart "{KUBELITE_SERVICE}"' in restart
    # Starting kubelite and configuring the snap edit the kubelet's file in place, never copy the default over it.
    configure = git(MICROK8S, "show", f"{tag}:snap/hooks/configure")
    assert not re.search(r"cp \S*default-args/kubelet\s", configure)


def test_nodeadm_reads_the_user_datas_nodeconfig_parts_and_merges_them_in_order():
    tag = mirrored_tag(EKS_AMI, EKS_AMI_TAG)
    core = git(EKS_AMI, "show", f"{tag}:nodeadm/api/core.go")
    assert re.search(r'GroupName\s*=\s*"node\.eks\.aws"', core)
    assert re.search(r'KindNodeConfig\s*=\s*"NodeConfig"', core)
    version = git(EKS_AMI, "show", f"{tag}:nodeadm/api/v1alpha1/groupversion_info.go")
    assert 'Version: "v1alpha1"' in version and NODECONFIG_API_VERSION == "node.eks.aws/v1alpha1"
    userdata = git(EKS_AMI, "show", f"{tag}:nodeadm/internal/configprovider/userdata.go")
    assert 'nodeConfigMediaType        = "application/" + api.GroupName' in userdata
    assert 'multipartContentTypePrefix = "multipart/"' in userdata
    mime = git(EKS_AMI, "show", f"{tag}:nodeadm/internal/configprovider/mime.go")
    assert "if mediaType == nodeConfigMediaType {" in mime
    assert "return internalapi.MergeNodeConfigs(nodeConfigs)" in mime
    merge = git(EKS_AMI, "show", f"{tag}:nodeadm/internal/api/merge.go")
    assert "mergo.WithOverride" in merge and "case reflect.TypeOf(InlineDocument{}):" in merge
    assert "dst.Set(reflect.AppendSlice(dst, src))" in merge  # kubelet flags add up, as merged() does


def crd_schema() -> dict:
    tag = mirrored_tag(EKS_AMI, EKS_AMI_TAG)
    crd = yaml.safe_load(git(EKS_AMI, "show", f"{tag}:nodeadm/crds/node.eks.aws_nodeconfigs.yaml"))
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")


def unknown_fields(document, schema: dict, path: str = "") -> list[str]:
    """Fields of ``document`` the schema does not declare: nodeadm's decoder drops them without a word."""
    if not isinstance(document, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    properties = schema.get("properties") or {}
    found = []
    for key, value in document.items():
        if key in properties:
            found += unknown_fields(value, properties[key], f"{path}.{key}")
        elif isinstance(schema.get("additionalProperties"), dict):
            found += unknown_fields(value, schema["additionalProperties"], f"{path}.{key}")
        else:
            found.append(f"{path}.{key}")
    return found


def test_the_nodeconfig_uses_only_fields_nodeadm_declares_and_its_kubelet_drop_in_carries_the_settings():
    schema = crd_schema()
    document = node_configs(eks_node_user_data(16384))[0]
    assert unknown_fields(document, schema) == []
    assert unknown_fields({"spec": {"kubelet": {"confg": {}}}}, schema) == [".spec.kubelet.confg"]  # a typo is seen
    tag = mirrored_tag(EKS_AMI, EKS_AMI_TAG)
    kubelet = git(EKS_AMI, "show", f"{tag}:nodeadm/internal/kubelet/config.go")
    write = kubelet[kubelet.index("func (k *kubelet) writeKubeletConfig("):]
    write = write[:write.index("\n}\n")]
    assert "len(cfg.Spec.Kubelet.Config) > 0" in write and "kubeletConfigDir" in write
    # nodeadm's own kubelet configuration sets no process limit and no system reserve: without ours there is none.
    assert "PidsLimit" not in kubelet
    assert not re.search(r"\bSystemReserved\s+map", kubelet)
    types = git(EKS_AMI, "show", f"{tag}:nodeadm/vendor/k8s.io/kubelet/config/v1beta1/types.go")
    assert re.search(r'PodPidsLimit \*int64 `json:"podPidsLimit,omitempty"`', types)
    assert re.search(r'SystemReserved map\[string\]string `json:"systemReserved,omitempty"`', types)
    assert re.search(r'EvictionHard map\[string\]string `json:"evictionHard,omitempty"`', types)
