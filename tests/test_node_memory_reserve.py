"""A MicroK8s box keeps memory from all pods together for its own services (cluster.microk8s.systemReservedMemory;
docs/security-pressure.md#node-pressure, "Memory").

The snap reserves none, so without the program's entry a tenant's memory that no process holds (a memory-backed
emptyDir, shared memory) could run the box out of memory and have the kernel's OOM killer go past every pod to
k8s-dqlite, the platform's datastore. The entry the program writes is read as kubelite and the kubelet read it
(tests/node_pid_readers.py), and a box is simulated under that attack from the kubelet's and the kernel's rules
(kubernetes/kubernetes ``pkg/kubelet/cm/node_container_manager_linux.go``, read untagged: the ``kubepods`` cgroup's
``memory.max`` is the capacity less ``systemReserved`` and ``kubeReserved`` memory when node allocatable is enforced
on pods, the kubelet's default and the snap's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from components.node_pids import remove_kubelet_settings_command, set_kubelet_settings_command
from config import load_platform
from config.key_types import quantity_value
from config.model_host import DEFAULT_SYSTEM_MEMORY_RESERVE
from tests.config_spec import assert_rejected, dev_config as project_dev_config, put
from tests.conftest import dev_config, run
from tests.node_pid_readers import READY, Box, other_args, system_reserved
from tests.test_node_pids import SNAP_KUBELET_ARGS, host_steps
from tools.plan.document import build_plan
from tools.plan.summary import render_summary

KEY = "cluster.microk8s.systemReservedMemory"
GIB = 2 ** 30

# --- config ----------------------------------------------------------------------------------------------------


def test_a_microk8s_box_reserves_memory_for_its_own_services_by_default():
    host = load_platform(project_dev_config()).cluster.microk8s
    assert host.system_reserved_memory == DEFAULT_SYSTEM_MEMORY_RESERVE == "4Gi"


@pytest.mark.parametrize("value", ["8Gi", "6144Mi", 6442450944, "0", 0])
def test_a_stated_reserve_or_none_is_taken(value):
    host = load_platform(put(project_dev_config(), KEY, value)).cluster.microk8s
    assert quantity_value(host.system_reserved_memory) == quantity_value(str(value))


@pytest.mark.parametrize("value, bytes_", [(4, "4"), ("4096", "4096"), ("100Mi", "104857600"), ("1e6", "1000000")])
def test_a_reserve_written_without_its_unit_or_too_small_to_protect_anything_is_refused(value, bytes_):
    issue = assert_rejected(put(project_dev_config(), KEY, value), KEY, value, fix="0 to reserve nothing")
    assert f"is {bytes_} bytes" in issue.problem and "a number without a unit is bytes" in issue.problem
    assert "4Gi" in issue.fix


@pytest.mark.parametrize("value", [-1, "four", "4 GiB", True])
def test_a_reserve_that_is_no_quantity_is_refused(value):
    assert_rejected(put(project_dev_config(), KEY, value), KEY, value)


# --- what the box's kubelet ends up with ---------------------------------------------------------------------------


def test_the_step_writes_the_configured_reserve_and_a_change_updates_it_in_place():
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["systemReservedMemory"] = "12Gi"
    step = host_steps(run(config))["pod-pids-limit"]
    assert step.inputs["create"] == set_kubelet_settings_command("sudo ", 16384, "12Gi", READY)
    assert step.inputs["delete"] == remove_kubelet_settings_command("sudo ", "12Gi", READY)
    # pulumi-command runs a new `create` as an update, with no `delete` in between (tests/test_node_pids.py).
    assert "triggers" not in step.inputs and "update" not in step.inputs


def test_a_changed_reserve_replaces_the_old_one_and_restarts_kubelite_once(tmp_path):
    box = Box(tmp_path, SNAP_KUBELET_ARGS)
    assert box.set(16384, "4Gi").returncode == 0
    result = box.set(16384, "12Gi")
    assert result.returncode == 0, result.stderr
    after = box.args.read_text()
    assert system_reserved(after) == {"pid": "4096", "memory": "12Gi"} and after.count("memory=") == 1
    assert box.restarts == 1 and other_args(after) == other_args(SNAP_KUBELET_ARGS)
    assert box.set(16384, "12Gi").returncode == 0 and box.restarts == 0 and box.args.read_text() == after
    assert box.remove("12Gi").returncode == 0 and box.args.read_text() == SNAP_KUBELET_ARGS


def test_no_reserve_is_written_as_zero_which_takes_a_former_one_out(tmp_path):
    box = Box(tmp_path, SNAP_KUBELET_ARGS)
    box.set(16384)
    assert box.set(16384, "0").returncode == 0
    assert system_reserved(box.args.read_text()) == {"pid": "4096", "memory": "0"}
    assert box.remove("0").returncode == 0 and box.args.read_text() == SNAP_KUBELET_ARGS


# --- the attack: memory no kill frees ---------------------------------------------------------------------------


@dataclass
class MemoryBox:
    """A MicroK8s box's memory as the kubelet and the kernel keep it. The kubelet caps ``kubepods`` at the capacity
    less its reserves. A write charged to a cgroup at its cap makes the kernel OOM-kill inside that cgroup; a write
    past the box's memory makes it kill anywhere, the highest score first: pods' processes (the kubelet gives
    Burstable and BestEffort containers an ``oom_score_adj`` above the snap's services, which run at 0), then the
    services. Memory in a tmpfs or a SysV segment stays charged when its writer dies. Other teams' processes are the
    first to go; the simulation starts where they are gone and the tenant's writer, restarted, writes on."""

    capacity: int
    kubepods_max: int
    # k8s-dqlite, kubelite, containerd and its shims: what they hold now.
    system: int = 3 * GIB
    held_without_process: int = 0
    killed: list[str] = field(default_factory=list)

    @classmethod
    def from_args(cls, args: str, capacity: int) -> "MemoryBox":
        reserved = quantity_value(system_reserved(args).get("memory", "0"))
        return cls(capacity=capacity, kubepods_max=int(capacity - reserved))

    def tenant_fills_tmpfs(self) -> None:
        """A tenant pod writes a memory-backed emptyDir until the kernel stops it by killing the writer, whose pages
        stay: at kubepods' cap, or at the box's memory."""
        room = min(self.kubepods_max, self.capacity - self.system) - self.held_without_process
        self.held_without_process += max(room, 0)
        self.killed.append("tenant writer")

    def system_allocates(self, size: int, who: str = "k8s-dqlite") -> bool:
        """The snap's services grow (a compaction, a burst of watches); past the box's memory, with no pod process
        left whose death frees anything, the kernel kills the service itself."""
        if self.system + size + self.held_without_process <= self.capacity:
            self.system += size
            return True
        self.killed.append(who)
        return False


@pytest.mark.parametrize("capacity_gib", [32, 64, 512])
def test_a_tenants_memory_no_kill_frees_leaves_the_datastore_its_reserve(tmp_path, capacity_gib):
    box = Box(tmp_path, SNAP_KUBELET_ARGS)
    assert box.set(16384).returncode == 0
    node = MemoryBox.from_args(box.args.read_text(), capacity_gib * GIB)
    node.tenant_fills_tmpfs()
    reserve = quantity_value(DEFAULT_SYSTEM_MEMORY_RESERVE)
    # The pods are held to the capacity less the reserve, so the services may grow into all of the reserve.
    assert node.held_without_process == capacity_gib * GIB - reserve
    assert node.system_allocates(int(reserve) - node.system)
    assert node.killed == ["tenant writer"]


@pytest.mark.parametrize("reserve", [None, "0"])
def test_without_a_reserve_the_same_tenant_gets_the_datastore_killed(tmp_path, reserve):
    """What the snap's own arguments, or a reserve of 0, leave: the attack reaches k8s-dqlite."""
    box = Box(tmp_path, SNAP_KUBELET_ARGS)
    if reserve is not None:
        assert box.set(16384, reserve).returncode == 0
    node = MemoryBox.from_args(box.args.read_text(), 64 * GIB)
    node.tenant_fills_tmpfs()
    assert not node.system_allocates(256 * 2 ** 20)
    assert node.killed == ["tenant writer", "k8s-dqlite"]


def test_the_plan_summary_shows_the_boxs_reserve_and_what_a_change_does(eks_run):
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["systemReservedMemory"] = "12Gi"
    summary = render_summary(build_plan(run(config), "test"))
    line = next(line for line in summary.splitlines() if "`systemReserved` `memory`" in line)
    assert "**12Gi**" in line and "restarts kubelite" in line and "Allocatable" in line
    # EKS nodes keep nodeadm's kubeReserved memory (tests/test_node_pids.py); the program writes no reserve there.
    assert "`systemReserved` `memory`" not in render_summary(build_plan(eks_run, "test"))


def test_an_existing_cluster_is_told_its_kubelets_keep_no_memory_from_pods_unless_the_site_reserves_it():
    config = put(put(project_dev_config(), "cluster", {"kind": "kubeconfig"}), "gpuOperator.mode", "install")
    notes = load_platform(config, secrets_set={"kubeconfig"}).notes
    note = next(note for note in notes if "keep any of the nodes' memory" in note)
    assert "systemReserved or kubeReserved memory" in note and DEFAULT_SYSTEM_MEMORY_RESERVE in note
    assert "enforceNodeAllocatable" in note and "memory-backed emptyDir" in note
    # A MicroK8s box gets its reserve from the program, an EKS node from nodeadm: no such note there.
    assert not any("keep any of the nodes' memory" in note for note in load_platform(project_dev_config()).notes)
