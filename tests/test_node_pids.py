"""One team's pods cannot use up a shared node's process IDs: every kubelet the program builds limits each pod's
processes and threads (cluster.podPidsLimit), keeps a share of the node's table from all pods together
(``systemReserved`` ``pid``) and evicts pods when the table runs low (``evictionHard`` ``pid.available``;
docs/security-model.md#node-pressure).

The kubelet limits a pod only when ``podPidsLimit`` (flag ``--pod-max-pids``, kubernetes/kubernetes
``cmd/kubelet/app/options/options.go`` ``AddKubeletConfigFlags``, read untagged) is set, and writes it as the pod
cgroup's ``pids.max`` when it creates that cgroup (``pkg/kubelet/cm/pod_container_manager_linux.go``
``EnsureExists``): pods started before a change keep what they had. What sets it on each host is tested here the
way that host reads it: MicroK8s' args file with a real shell and GNU sed (only ``snap``, ``microk8s`` and ``sudo``
are stand-ins) and kubelite's reading of the file; the EKS launch template's user data as nodeadm parses and merges
it. The contract tests below read both from upstream at the mirrored tags.
"""

from __future__ import annotations

import base64
import email
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest
import yaml

from components.node_pids import (
    KUBELET_DEFAULT_EVICTION_HARD, KUBELITE_SERVICE, MICROK8S_KUBELET_ARGS, NODECONFIG_API_VERSION,
    NODECONFIG_MEDIA_TYPE, eks_node_user_data, remove_kubelet_pids_command, set_kubelet_pids_command,
)
from config import load_platform
from config.model import DEFAULT_POD_PIDS_LIMIT, PID_EVICTION_THRESHOLD, SYSTEM_PID_RESERVE
from tests.config_spec import assert_rejected, dev_config as project_dev_config, eks_config as project_eks_config, put
from tests.conftest import MIRRORED_TAGS, dev_config, eks_config, git, mirrored_tag, run

MICROK8S, EKS_AMI = "canonical/microk8s", "awslabs/amazon-eks-ami"
READY = "sudo microk8s status --wait-ready --timeout 600 >/dev/null"
# Shaped like the snap's default-args/kubelet (one flag per line, a quoted value, no process limit).
SNAP_KUBELET_ARGS = """\
--kubeconfig=${SNAP_DATA}/credentials/kubelet.config
--root-dir=${SNAP_COMMON}/var/lib/kubelet
--eviction-hard="memory.available<100Mi,nodefs.available<1Gi,imagefs.available<1Gi"
--serialize-image-pulls=false
"""


# --- config ----------------------------------------------------------------------------------------------------


def test_every_built_host_limits_pod_processes_by_default():
    assert load_platform(project_dev_config()).cluster.pod_pids_limit == DEFAULT_POD_PIDS_LIMIT == 16384
    assert load_platform(project_eks_config()).cluster.pod_pids_limit == 16384


@pytest.mark.parametrize("value", [0, -1, 1023, 4194305, "16k", True])
def test_a_limit_too_small_for_honest_pods_or_past_the_kernels_is_refused(value):
    issue = assert_rejected(put(project_dev_config(), "cluster.podPidsLimit", value), "cluster.podPidsLimit", value,
                            fix="between 1024")
    assert "4194304" in issue.fix


@pytest.mark.parametrize("value", [1024, 65536, 4194304])
def test_a_limit_within_the_bounds_is_taken(value):
    assert load_platform(put(project_eks_config(), "cluster.podPidsLimit", value)).cluster.pod_pids_limit == value


# --- MicroK8s: the args file kubelite reads ----------------------------------------------------------------------


def kubelite_args(text: str) -> list[str]:
    """The arguments kubelite starts the kubelet with, read from an args file as its ReadArgsFromFile reads it."""
    args = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        args += [os.path.expandvars(part) for part in line.replace('"', "").replace("'", "").split(" ")]
    return args


def pids_flags(text: str) -> list[str]:
    args = kubelite_args(text)
    found = []
    for index, arg in enumerate(args):
        if arg == "--pod-max-pids":
            found.append(args[index + 1])
        elif arg.startswith("--pod-max-pids="):
            found.append(arg.split("=", 1)[1])
    return found


def kubelet_map(text: str, flag: str, separator: str, default: dict[str, str]) -> dict[str, str]:
    """A kubelet map flag as the kubelet ends up with it from these arguments: its default until the flag's first
    occurrence, which replaces it; later occurrences add to it, later entries winning (component-base's
    ``MapStringString`` / ``LangleSeparatedMapStringString`` ``Set``)."""
    args = kubelite_args(text)
    values = [value for index, arg in enumerate(args) for value in
              ([args[index + 1]] if arg == flag else [arg.split("=", 1)[1]] if arg.startswith(f"{flag}=") else [])]
    if not values:
        return dict(default)
    result: dict[str, str] = {}
    for value in values:
        for entry in filter(None, value.split(",")):
            key, found = entry.split(separator, 1)
            result[key.strip()] = found.strip()
    return result


def system_reserved(text: str) -> dict[str, str]:
    return kubelet_map(text, "--system-reserved", "=", {})


def eviction_hard(text: str) -> dict[str, str]:
    return kubelet_map(text, "--eviction-hard", "<", dict(entry.split("<") for entry in KUBELET_DEFAULT_EVICTION_HARD))


def other_args(text: str) -> list[str]:
    """The arguments besides the three the program sets."""
    args = kubelite_args(text)
    ours = ("--pod-max-pids", "--system-reserved", "--eviction-hard")
    skip = {index + 1 for index, arg in enumerate(args) if arg in ours}
    return [arg for index, arg in enumerate(args)
            if index not in skip and arg not in ours and not arg.startswith(tuple(f"{flag}=" for flag in ours))]


class Box:
    """A scratch MicroK8s args file and PATH stand-ins for the snap's commands, which log their calls."""

    def __init__(self, root: Path, text: str):
        self.args = root / "args-kubelet"
        self.args.write_text(text)
        self.log = root / "calls"
        self.log.write_text("")
        bin_dir = root / "bin"
        bin_dir.mkdir()
        for name, body in (("snap", f'echo "snap $*" >> {self.log}'), ("microk8s", f'echo "microk8s $*" >> {self.log}'),
                           ("sudo", 'exec "$@"')):
            (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
            (bin_dir / name).chmod(0o755)
        self.env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def run(self, command: str) -> subprocess.CompletedProcess:
        self.log.write_text("")
        return subprocess.run(["sh", "-c", command], env=self.env, capture_output=True, text=True, timeout=30)

    def set(self, limit: int) -> subprocess.CompletedProcess:
        return self.run(set_kubelet_pids_command("sudo ", limit, READY, str(self.args)))

    def remove(self) -> subprocess.CompletedProcess:
        return self.run(remove_kubelet_pids_command("sudo ", READY, str(self.args)))

    @property
    def restarts(self) -> int:
        return self.log.read_text().splitlines().count(f"snap restart {KUBELITE_SERVICE}")

    @property
    def waited(self) -> bool:
        return "microk8s status --wait-ready --timeout 600" in self.log.read_text()


# SNAP_KUBELET_ARGS after the step: the reserve a line of its own, the threshold added to the snap's signals.
SNAP_KUBELET_ARGS_SET = """\
--kubeconfig=${SNAP_DATA}/credentials/kubelet.config
--root-dir=${SNAP_COMMON}/var/lib/kubelet
--eviction-hard="memory.available<100Mi,nodefs.available<1Gi,imagefs.available<1Gi,pid.available<10%"
--serialize-image-pulls=false
--system-reserved=pid=4096
--pod-max-pids=16384
"""


def test_setting_the_limits_writes_them_restarts_kubelite_and_waits_for_the_cluster(tmp_path):
    box = Box(tmp_path, SNAP_KUBELET_ARGS)
    result = box.set(16384)
    assert result.returncode == 0, result.stderr
    text = box.args.read_text()
    assert text == SNAP_KUBELET_ARGS_SET
    assert pids_flags(text) == ["16384"]
    assert system_reserved(text) == {"pid": "4096"}
    # The snap's own signals stay, and the kubelet adds the threshold to them.
    assert eviction_hard(text) == {**eviction_hard(SNAP_KUBELET_ARGS), "pid.available": "10%"}
    # The snap's other arguments are untouched and still read the same way.
    assert other_args(text) == other_args(SNAP_KUBELET_ARGS)
    assert box.restarts == 1 and box.waited


@pytest.mark.parametrize("memory_gib", [5, 8, 16, 1024])
def test_the_threshold_is_at_least_the_reserve_on_every_node_of_5_gib_or_more(memory_gib):
    """Pods that cross the threshold are evicted before they reach their kubepods ceiling only when it is at least
    the reserve; threads-max, the smaller part of the kubelet's capacity on such nodes, is memory over 128 KiB."""
    capacity = min((memory_gib << 30) // (128 << 10), 4194304)
    assert threshold_count(PID_EVICTION_THRESHOLD, capacity) >= SYSTEM_PID_RESERVE


def threshold_count(threshold: str, capacity: int) -> int:
    """An eviction threshold in processes (a share of the capacity, as evictionapi.GetThresholdQuantity takes it)."""
    if threshold.endswith("%"):
        return int(capacity * float(threshold[:-1]) / 100)
    return int(threshold)


def test_running_the_step_again_changes_nothing_and_restarts_nothing(tmp_path):
    box = Box(tmp_path, SNAP_KUBELET_ARGS)
    box.set(16384)
    after_first = box.args.read_text()
    result = box.set(16384)
    assert result.returncode == 0, result.stderr
    assert box.args.read_text() == after_first
    assert box.restarts == 0 and box.waited


def test_a_changed_limit_replaces_the_old_one(tmp_path):
    box = Box(tmp_path, SNAP_KUBELET_ARGS)
    box.set(16384)
    result = box.set(32768)
    assert result.returncode == 0, result.stderr
    assert pids_flags(box.args.read_text()) == ["32768"]
    assert box.restarts == 1


@pytest.mark.parametrize("existing", [
    "--pod-max-pids 100\n",            # the value after a space: kubelite splits the line into flag and value
    '  --pod-max-pids="100"\n',        # leading blanks and quotes: kubelite trims and drops them
    "--pod-max-pids=100\n--pod-max-pids=200",  # twice, the last line without its newline
    "--pod-max-pids=16384\n--pod-max-pids=-1\n",  # ours, then a later one that would win
])
def test_any_spelling_kubelite_would_read_is_replaced_by_exactly_one_line(tmp_path, existing):
    box = Box(tmp_path, SNAP_KUBELET_ARGS + existing)
    assert pids_flags(box.args.read_text()), "the case must hold a flag kubelite reads"
    result = box.set(16384)
    assert result.returncode == 0, result.stderr
    assert pids_flags(box.args.read_text()) == ["16384"]
    assert box.args.read_text() == SNAP_KUBELET_ARGS_SET
    assert box.restarts == 1


def test_a_commented_flag_is_left_alone(tmp_path):
    box = Box(tmp_path, SNAP_KUBELET_ARGS + "# --pod-max-pids=100\n")
    box.set(16384)
    assert "# --pod-max-pids=100\n" in box.args.read_text()
    assert pids_flags(box.args.read_text()) == ["16384"]


@pytest.mark.parametrize("line", [
    '--eviction-hard="pid.available<5%,memory.available<100Mi"',    # first
    '--eviction-hard="memory.available<100Mi,pid.available<5%,nodefs.available<1Gi"',  # between two
    "--eviction-hard=memory.available<100Mi,pid.available<2000",     # last, unquoted
    '--eviction-hard "pid.available<5%"',                            # the only one, after a space
    '--eviction-hard=""',                                             # none: the site turned hard eviction off
])
def test_a_threshold_already_there_is_replaced_and_every_other_signal_kept(tmp_path, line):
    text = f"--root-dir=/var/lib/kubelet\n{line}\n--serialize-image-pulls=false\n"
    before = {key: value for key, value in eviction_hard(text).items() if key != "pid.available"}
    box = Box(tmp_path, text)
    assert box.set(16384).returncode == 0
    after = box.args.read_text()
    assert eviction_hard(after) == {**before, "pid.available": "10%"}
    assert after.count("pid.available") == 1 and after.count("--eviction-hard") == 1
    assert other_args(after) == other_args(text)


def test_a_second_eviction_hard_line_gets_the_threshold_too_so_no_later_line_undoes_it(tmp_path):
    text = SNAP_KUBELET_ARGS + "--eviction-hard=pid.available<100\n"
    box = Box(tmp_path, text)
    assert box.set(16384).returncode == 0
    assert eviction_hard(box.args.read_text())["pid.available"] == "10%"
    assert eviction_hard(box.args.read_text())["memory.available"] == "100Mi"


def test_a_file_without_eviction_hard_gets_the_kubelets_own_signals_restated_beside_the_threshold(tmp_path):
    """A flag of ours alone would replace the kubelet's default signals (memory, disk) with the PID one."""
    text = "--root-dir=/var/lib/kubelet\n--serialize-image-pulls=false\n"
    box = Box(tmp_path, text)
    assert box.set(16384).returncode == 0
    assert eviction_hard(box.args.read_text()) == {**eviction_hard(text), "pid.available": "10%"}
    assert box.remove().returncode == 0
    assert eviction_hard(box.args.read_text()) == eviction_hard(text)
    assert "--system-reserved" not in box.args.read_text() and "pid" not in box.args.read_text()


@pytest.mark.parametrize("line", ["--system-reserved=cpu=500m,memory=1Gi", '--system-reserved="pid=100,memory=1Gi"',
                                  "--system-reserved cpu=500m,pid=100"])
def test_a_sites_own_system_reserved_entries_are_kept_and_ours_replaces_a_pid_entry(tmp_path, line):
    text = SNAP_KUBELET_ARGS + line + "\n"
    before = {key: value for key, value in system_reserved(text).items() if key != "pid"}
    box = Box(tmp_path, text)
    assert box.set(16384).returncode == 0
    after = box.args.read_text()
    assert system_reserved(after) == {**before, "pid": "4096"}
    assert after.count("--system-reserved") == 1 and other_args(after) == other_args(text)
    # Running again changes nothing.
    assert box.set(16384).returncode == 0 and box.restarts == 0 and box.args.read_text() == after
    assert box.remove().returncode == 0
    assert system_reserved(box.args.read_text()) == before


def test_removing_the_step_restores_the_snaps_file_and_a_second_removal_does_nothing(tmp_path):
    box = Box(tmp_path, SNAP_KUBELET_ARGS)
    box.set(16384)
    result = box.remove()
    assert result.returncode == 0, result.stderr
    assert box.args.read_text() == SNAP_KUBELET_ARGS
    assert box.restarts == 1 and box.waited
    result = box.remove()
    assert result.returncode == 0 and box.restarts == 0 and not box.waited


def test_removing_the_step_after_microk8s_is_gone_succeeds(tmp_path):
    box = Box(tmp_path, SNAP_KUBELET_ARGS)
    box.args.unlink()
    result = box.remove()
    assert result.returncode == 0, result.stderr
    assert box.restarts == 0


def test_a_missing_args_file_fails_clearly_without_restarting_anything(tmp_path):
    box = Box(tmp_path, "")
    result = box.set(16384)
    assert result.returncode == 1
    assert "is missing or empty" in result.stderr and "snap list microk8s" in result.stderr
    assert box.restarts == 0 and not box.waited


def host_steps(program) -> dict:
    return {r.name.removeprefix("host-"): r for r in program.resources if r.type.startswith("command:")}


def test_the_microk8s_step_sets_the_configured_limit_before_any_addon(dev_run):
    steps = host_steps(dev_run)
    step = steps["pod-pids-limit"]
    assert step.inputs["create"] == set_kubelet_pids_command("sudo ", 16384, READY)
    assert step.inputs["delete"] == remove_kubelet_pids_command("sudo ", READY)
    assert f"test -s {MICROK8S_KUBELET_ARGS}" in step.inputs["create"]
    assert steps["hold-refresh"].urn in step.dependencies
    assert step.urn in steps["enable-dns"].dependencies


def test_a_changed_limit_changes_only_the_create_command_so_pulumi_updates_the_step_in_place():
    """pulumi-command 1.2.1 replaces a Command only when ``triggers`` change (``common/inputs.go``); a new ``create``
    is an update that runs the new ``create`` and no ``delete``, so the flag is never removed in between."""
    config = dev_config()
    config["gpu-tenancy:cluster"]["podPidsLimit"] = 65536
    changed = host_steps(run(config))["pod-pids-limit"]
    default = set_kubelet_pids_command("sudo ", 16384, READY)
    assert changed.inputs["create"] == default.replace("16384", "65536")
    assert changed.inputs["delete"] == remove_kubelet_pids_command("sudo ", READY)
    assert "triggers" not in changed.inputs and "update" not in changed.inputs


# --- EKS: the launch template's user data, as nodeadm reads it ----------------------------------------------------


def node_configs(user_data: str) -> list[dict]:
    """The NodeConfig documents nodeadm finds in a launch template's user data (the instance sees it decoded): the
    parts of a multipart MIME message whose media type is nodeadm's, in order."""
    message = email.message_from_bytes(base64.b64decode(user_data, validate=True))
    assert message.is_multipart() and message.get_content_type() == "multipart/mixed", \
        "EKS merges a launch template's user data with its own only in MIME multipart form"
    configs = []
    for part in message.get_payload():
        if part.get_content_type() == NODECONFIG_MEDIA_TYPE:
            documents = [document for document in yaml.safe_load_all(part.get_payload()) if document is not None]
            assert len(documents) == 1
            configs.append(documents[0])
    return configs


def merged(configs: list[dict]) -> dict:
    """nodeadm's merge: later parts win field by field, ``kubelet.config`` merges key by key, kubelet flags add up."""
    def merge(into: dict, other: dict, path: tuple[str, ...] = ()) -> dict:
        for key, value in other.items():
            if path + (key,) == ("spec", "kubelet", "flags"):
                into[key] = list(into.get(key) or []) + list(value)
            elif isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value, path + (key,))
            elif value not in (None, "", [], {}):
                into[key] = value
        return into
    result: dict = {}
    for config in configs:
        merge(result, config)
    return result


# What a managed node group of an EKS AMI type appends after the launch template's parts.
EKS_OWN_PART = """\
--{boundary}
Content-Type: application/node.eks.aws

---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster: {{name: vcluster-gpu, apiServerEndpoint: "https://example.eks.amazonaws.com",
            certificateAuthority: Y2E=, cidr: 172.20.0.0/16}}
  kubelet:
    config: {{maxPods: 29, clusterDNS: [172.20.0.10]}}
    flags: ["--node-labels=eks.amazonaws.com/nodegroup=gpu"]

--{boundary}--
"""


def with_eks_part(user_data: str) -> str:
    text = base64.b64decode(user_data).decode()
    boundary = re.search(r'boundary="([^"]+)"', text).group(1)
    closing = f"--{boundary}--\n"
    assert text.endswith(closing)
    return base64.b64encode((text[:-len(closing)] + EKS_OWN_PART.format(boundary=boundary)).encode()).decode()


def test_every_eks_node_group_template_limits_pod_processes_in_a_nodeconfig(eks_run):
    templates = [r for r in eks_run.resources if r.type == "aws:ec2/launchTemplate:LaunchTemplate"]
    assert len(templates) == 2  # the system pool and the GPU pool: tenants' DNS runs on GPU nodes, KAI on system
    for template in templates:
        configs = node_configs(template.inputs["userData"])
        assert [(c["apiVersion"], c["kind"]) for c in configs] == [(NODECONFIG_API_VERSION, "NodeConfig")]
        assert configs[0]["spec"] == {"kubelet": {"config": {
            "podPidsLimit": 16384, "systemReserved": {"pid": "4096"}, "evictionHard": {"pid.available": "10%"}}}}


def test_the_settings_survive_the_merge_with_the_node_groups_own_nodeconfig():
    final = merged(node_configs(with_eks_part(eks_node_user_data(32768))))
    assert final["spec"]["kubelet"]["config"] == {
        "podPidsLimit": 32768, "systemReserved": {"pid": "4096"}, "evictionHard": {"pid.available": "10%"},
        "maxPods": 29, "clusterDNS": ["172.20.0.10"]}
    assert final["spec"]["cluster"]["name"] == "vcluster-gpu"


def json_merge_patch(target, patch):
    """RFC 7386, as the kubelet applies each drop-in over its configuration (``mergeKubeletConfigurations``)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


def nodeadm_kubelet_base() -> dict:
    """The eviction and reservation maps of the KubeletConfiguration nodeadm writes itself (config.json), read from
    its source: ``defaultKubeletSubConfig`` and ``withDefaultReservedResources``."""
    source = git(EKS_AMI, "show", f"{mirrored_tag(EKS_AMI, EKS_AMI_TAG)}:nodeadm/internal/kubelet/config.go")
    defaults = source[source.index("func defaultKubeletSubConfig()"):]
    eviction = defaults[defaults.index("EvictionHard: map[string]string{"):]
    eviction = eviction[:eviction.index("},")]
    reserved = source[source.index("ksc.KubeReserved = map[string]string{"):]
    reserved = reserved[:reserved.index("}\n")]
    return {"evictionHard": dict(re.findall(r'"([^"]+)":\s*"([^"]+)"', eviction)),
            "kubeReserved": {key: "(computed)" for key in re.findall(r'"([^"]+)":', reserved)}}


def test_the_kubelet_ends_with_nodeadms_signals_and_reservations_plus_ours():
    """nodeadm's own file sets memory and disk signals and a kubeReserved without pid; our drop-in adds the PID
    signal and the system reserve to them, key by key, and takes none away."""
    base = nodeadm_kubelet_base()
    assert {"memory.available", "nodefs.available"} <= set(base["evictionHard"])
    assert "pid.available" not in base["evictionHard"] and "pid" not in base["kubeReserved"]
    assert {"cpu", "memory"} <= set(base["kubeReserved"])
    drop_in = merged(node_configs(with_eks_part(eks_node_user_data(16384))))["spec"]["kubelet"]["config"]
    kubelet = json_merge_patch(base, drop_in)
    assert kubelet["evictionHard"] == {**base["evictionHard"], "pid.available": PID_EVICTION_THRESHOLD}
    assert kubelet["kubeReserved"] == base["kubeReserved"]
    assert kubelet["systemReserved"] == {"pid": str(SYSTEM_PID_RESERVE)}


def test_a_site_part_with_its_own_signals_and_reservations_keeps_them_beside_ours():
    """nodeadm merges the maps of ``kubelet.config`` across parts key by key (``mergeInlineDocument``)."""
    site = {"apiVersion": NODECONFIG_API_VERSION, "kind": "NodeConfig", "spec": {"kubelet": {"config": {
        "evictionHard": {"memory.available": "500Mi"}, "systemReserved": {"memory": "1Gi"}}}}}
    final = merged([site, *node_configs(eks_node_user_data(16384))])["spec"]["kubelet"]["config"]
    assert final["evictionHard"] == {"memory.available": "500Mi", "pid.available": "10%"}
    assert final["systemReserved"] == {"memory": "1Gi", "pid": "4096"}


def test_a_changed_limit_changes_every_template_so_eks_rolls_the_nodes():
    config = eks_config()
    config["gpu-tenancy:cluster"]["podPidsLimit"] = 8192
    templates = [r for r in run(config).resources if r.type == "aws:ec2/launchTemplate:LaunchTemplate"]
    assert templates
    for template in templates:
        assert node_configs(template.inputs["userData"])[0]["spec"]["kubelet"]["config"]["podPidsLimit"] == 8192


# --- a node under attack: the kernel's table and the kubelet's settings as each host ends up with them ------------


@dataclass
class Pod:
    team: str
    tasks: int
    critical: bool = False
    # Every team's pod runs at priority 0 on the host (docs/security-model.md, "Eviction order cannot be bought").
    priority: int = 0


class Node:
    """A node's process table as the kernel and the kubelet keep it (kubernetes/kubernetes, read untagged).

    The kubelet's capacity is the smaller of ``pid_max`` and ``threads-max`` (``pkg/kubelet/stats/pidlimit``
    ``Stats``); the ``kubepods`` cgroup, parent of every pod, may hold that minus ``systemReserved`` and
    ``kubeReserved`` ``pid`` (``pkg/kubelet/cm/node_container_manager_linux.go``), each pod its ``podPidsLimit``.
    ``pid.available`` is the capacity minus the node's tasks (``eviction/helpers.go`` ``makeSignalObservations``);
    below the hard threshold the kubelet marks the node (the condition stays 5 minutes), admits no pod but a
    critical one (``Admit``) and evicts one pod per pass, lowest priority and then most processes first, never a
    critical one (``rankPIDPressure``, ``evictPod``)."""

    def __init__(self, kubelet: dict, threads_max: int, pid_max: int = 4194304, system_tasks: int = 1500):
        self.capacity = min(threads_max, pid_max)
        reserved = sum(int(kubelet.get(field, {}).get("pid", 0)) for field in ("systemReserved", "kubeReserved"))
        self.pods_ceiling = self.capacity - reserved
        self.pod_limit = int(kubelet.get("podPidsLimit", -1))
        threshold = kubelet.get("evictionHard", {}).get("pid.available")
        self.threshold = threshold_count(threshold, self.capacity) if threshold else None
        self.system = system_tasks
        self.pods: list[Pod] = []
        self.pressure = False

    def tasks(self) -> int:
        return self.system + sum(pod.tasks for pod in self.pods)

    def start(self, pod: Pod) -> bool:
        if self.pressure and not pod.critical:
            return False
        self.pods.append(pod)
        return True

    def fork(self, wanted: int, pod: Optional[Pod] = None) -> int:
        """How many of ``wanted`` new tasks the kernel grants the system (``pod`` None) or a pod."""
        room = self.capacity - self.tasks()
        if pod is not None:
            room = min(room, self.pods_ceiling - sum(other.tasks for other in self.pods))
            if self.pod_limit > 0:
                room = min(room, self.pod_limit - pod.tasks)
        granted = max(0, min(wanted, room))
        if pod is None:
            self.system += granted
        else:
            pod.tasks += granted
        return granted

    def eviction_pass(self) -> Optional[Pod]:
        if self.threshold is None or self.capacity - self.tasks() >= self.threshold:
            return None
        self.pressure = True
        for pod in sorted(self.pods, key=lambda pod: (pod.priority, -pod.tasks)):
            if not pod.critical:
                self.pods.remove(pod)
                return pod
        return None


def microk8s_kubelet(tmp_path) -> dict:
    """The kubelet settings kubelite starts with after the step, from the snap's own args file."""
    tag = mirrored_tag(MICROK8S, MIRRORED_TAGS[MICROK8S][-1])
    box = Box(tmp_path, git(MICROK8S, "show", f"{tag}:microk8s-resources/default-args/kubelet"))
    assert box.set(DEFAULT_POD_PIDS_LIMIT).returncode == 0
    text = box.args.read_text()
    return {"podPidsLimit": int(pids_flags(text)[-1]), "systemReserved": system_reserved(text),
            "evictionHard": eviction_hard(text)}


def eks_kubelet(tmp_path) -> dict:
    """The kubelet settings of an EKS node: nodeadm's own file with the merged user data's drop-in over it."""
    drop_in = merged(node_configs(with_eks_part(eks_node_user_data(DEFAULT_POD_PIDS_LIMIT))))
    return json_merge_patch(nodeadm_kubelet_base(), drop_in["spec"]["kubelet"]["config"])


@pytest.mark.parametrize("kubelet_of", [microk8s_kubelet, eks_kubelet], ids=["microk8s", "eks"])
def test_one_teams_pods_at_their_limit_cannot_take_what_the_system_and_another_team_need(kubelet_of, tmp_path):
    # 16 GiB (g4dn.xlarge's memory): threads-max, memory over 128 KiB, is the capacity.
    node = Node(kubelet_of(tmp_path), threads_max=131072)
    platform, victim = Pod("gpu-operator", 300, critical=True), Pod("team-b", 300)
    hog = [Pod("team-a", 1) for _ in range(10)]  # 10 × 16384 is more than the whole table
    assert all(node.start(pod) for pod in (platform, victim, *hog))
    for pod in hog:  # a fork bomb in every pod, faster than any kubelet pass
        node.fork(10**9, pod)
    assert max(pod.tasks for pod in hog) == DEFAULT_POD_PIDS_LIMIT
    # The kernel refuses the pods before the system's share: containerd starts shims, an operator logs in.
    assert node.fork(500) == 500
    # Until the kubelet's next pass (10 s) the other team's pod cannot start processes either.
    assert node.fork(1000, victim) == 0
    evicted = []
    while (pod := node.eviction_pass()) is not None:
        evicted.append(pod)
    assert evicted and all(pod.team == "team-a" for pod in evicted)
    assert victim in node.pods and platform in node.pods
    assert node.capacity - node.tasks() >= node.threshold
    # The hog's controller brings its pod back: refused while the node has PIDPressure.
    assert not node.start(Pod("team-a", 1))
    assert node.fork(1000, victim) == 1000 and node.fork(500) == 500


# --- an existing cluster: the nodes are the site's ---------------------------------------------------------------


def test_an_existing_cluster_is_told_to_set_the_limit_reserve_and_threshold_on_its_kubelets():
    config = put(put(project_dev_config(), "cluster", {"kind": "kubeconfig", "podPidsLimit": 20000}),
                 "gpuOperator.mode", "install")
    notes = load_platform(config, secrets_set={"kubeconfig"}).notes
    note = next(note for note in notes if "podPidsLimit" in note)
    assert "podPidsLimit: 20000" in note and "--pod-max-pids=20000" in note
    assert f"systemReserved pid: {SYSTEM_PID_RESERVE}" in note and f"pid={SYSTEM_PID_RESERVE}" in note
    assert f"evictionHard pid.available: {PID_EVICTION_THRESHOLD}" in note
    assert f"pid.available<{PID_EVICTION_THRESHOLD}" in note and "restated" in note
    assert "does not set" in note
    # The built hosts get no such note: the program sets the limit there.
    assert not any("podPidsLimit" in note for note in load_platform(project_dev_config()).notes)


# --- contracts: the upstream readers at the mirrored tags ---------------------------------------------------------


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
    # The reading kubelite_args() above does: trimmed lines, '#' lines skipped, quotes dropped, split at spaces.
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
    assert system_reserved(after) == {"pid": str(SYSTEM_PID_RESERVE)}
    assert eviction_hard(after) == {**snap_signals, "pid.available": PID_EVICTION_THRESHOLD}
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


EKS_AMI_TAG = "v20260724"


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
