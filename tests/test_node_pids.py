"""One team's pods cannot use up a shared node's process IDs: every kubelet the program builds limits each pod's
processes and threads (cluster.podPidsLimit), keeps a share of the node's table from all pods together
(``systemReserved`` ``pid``) and evicts pods when the table runs low (``evictionHard`` ``pid.available``;
docs/security-pressure.md#node-pressure).

The kubelet limits a pod only when ``podPidsLimit`` (flag ``--pod-max-pids``, kubernetes/kubernetes
``cmd/kubelet/app/options/options.go`` ``AddKubeletConfigFlags``, read untagged) is set, and writes it as the pod
cgroup's ``pids.max`` when it creates that cgroup (``pkg/kubelet/cm/pod_container_manager_linux.go``
``EnsureExists``): pods started before a change keep what they had. What sets it on each host is tested here the
way that host reads it (tests/node_pid_readers.py): MicroK8s' args file with a real shell and GNU sed (only ``snap``,
``microk8s`` and ``sudo`` are stand-ins) and kubelite's and the kubelet's reading of the file; the EKS launch
template's user data as nodeadm parses and merges it. tests/test_node_pids_contract.py reads both from upstream at
the mirrored tags; tests/test_node_pid_pressure.py puts the settings on a simulated node under attack.
"""

from __future__ import annotations

import pytest

from components.node_pids import (
    INODE_EVICTION_THRESHOLD, MICROK8S_KUBELET_ARGS, NODECONFIG_API_VERSION, eks_node_user_data,
    remove_kubelet_settings_command, set_kubelet_settings_command,
)
from config import load_platform
from config.model_host import DEFAULT_POD_PIDS_LIMIT, PID_EVICTION_THRESHOLD, SYSTEM_PID_RESERVE
from tests.config_spec import assert_rejected, dev_config as project_dev_config, eks_config as project_eks_config, put
from tests.conftest import dev_config, eks_config, run
from tests.node_pid_readers import (
    READY, Box, eviction_hard, json_merge_patch, merged, node_configs,
    nodeadm_kubelet_base, other_args, pids_flags, system_reserved, with_eks_part,
)

# Shaped like the snap's default-args/kubelet (one flag per line, a quoted value, no process limit).
SNAP_KUBELET_ARGS = """\
--kubeconfig=${SNAP_DATA}/credentials/kubelet.config
--root-dir=${SNAP_COMMON}/var/lib/kubelet
--eviction-hard="memory.available<100Mi,nodefs.available<1Gi,imagefs.available<1Gi"
--serialize-image-pulls=false
"""
# The signals the step adds to MicroK8s' --eviction-hard.
OURS = {"nodefs.inodesFree": INODE_EVICTION_THRESHOLD, "pid.available": PID_EVICTION_THRESHOLD}

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


SNAP_KUBELET_ARGS_SET = """\
--kubeconfig=${SNAP_DATA}/credentials/kubelet.config
--root-dir=${SNAP_COMMON}/var/lib/kubelet
--eviction-hard="memory.available<100Mi,nodefs.available<1Gi,imagefs.available<1Gi,nodefs.inodesFree<5%,pid.available<10%"
--serialize-image-pulls=false
--system-reserved=pid=4096,memory=4Gi
--pod-max-pids=16384
"""


def test_setting_the_limits_writes_them_restarts_kubelite_and_waits_for_the_cluster(tmp_path):
    box = Box(tmp_path, SNAP_KUBELET_ARGS)
    result = box.set(16384)
    assert result.returncode == 0, result.stderr
    text = box.args.read_text()
    assert text == SNAP_KUBELET_ARGS_SET
    assert pids_flags(text) == ["16384"]
    assert system_reserved(text) == {"pid": "4096", "memory": "4Gi"}
    # The snap's own signals stay, and the kubelet adds the thresholds to them (tests/test_node_inodes.py).
    assert eviction_hard(text) == {**eviction_hard(SNAP_KUBELET_ARGS), **OURS}
    # The snap's other arguments are untouched and still read the same way.
    assert other_args(text) == other_args(SNAP_KUBELET_ARGS)
    assert box.restarts == 1 and box.waited


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
    assert eviction_hard(after) == {**before, **OURS}
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
                                  "--system-reserved cpu=500m,pid=100", "--system-reserved=ephemeral-storage=1Gi"])
def test_a_sites_own_system_reserved_entries_are_kept_and_ours_replace_its_pid_and_memory_entries(tmp_path, line):
    text = SNAP_KUBELET_ARGS + line + "\n"
    before = {key: value for key, value in system_reserved(text).items() if key not in ("pid", "memory")}
    box = Box(tmp_path, text)
    assert box.set(16384).returncode == 0
    after = box.args.read_text()
    assert system_reserved(after) == {**before, "pid": "4096", "memory": "4Gi"}
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
    assert step.inputs["create"] == set_kubelet_settings_command("sudo ", 16384, "4Gi", READY)
    assert step.inputs["delete"] == remove_kubelet_settings_command("sudo ", "4Gi", READY)
    assert f"test -s {MICROK8S_KUBELET_ARGS}" in step.inputs["create"]
    assert steps["hold-refresh"].urn in step.dependencies
    assert step.urn in steps["enable-dns"].dependencies


def test_a_changed_limit_changes_only_the_create_command_so_pulumi_updates_the_step_in_place():
    """pulumi-command 1.2.1 replaces a Command only when ``triggers`` change (``common/inputs.go``); a new ``create``
    is an update that runs the new ``create`` and no ``delete``, so the flag is never removed in between."""
    config = dev_config()
    config["gpu-tenancy:cluster"]["podPidsLimit"] = 65536
    changed = host_steps(run(config))["pod-pids-limit"]
    default = set_kubelet_settings_command("sudo ", 16384, "4Gi", READY)
    assert changed.inputs["create"] == default.replace("16384", "65536")
    assert changed.inputs["delete"] == remove_kubelet_settings_command("sudo ", "4Gi", READY)
    assert "triggers" not in changed.inputs and "update" not in changed.inputs


# --- EKS: the launch template's user data, as nodeadm reads it ----------------------------------------------------


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
