"""Several pods of one team cannot take a shared node's process table: the system keeps its reserve, and the kubelet
evicts the team's pods, not another team's (docs/security-pressure.md#node-pressure, "Process IDs").

A node's table as the kernel and the kubelet keep it is simulated from the kubelet's source (read untagged), and
takes the settings each host ends up with after the program's step or user data, read as tests/node_pid_readers.py
reads them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pytest

from components.node_pids import eks_node_user_data
from config.model_host import DEFAULT_POD_PIDS_LIMIT, PID_EVICTION_THRESHOLD, SYSTEM_PID_RESERVE
from tests.conftest import MIRRORED_TAGS, git, mirrored_tag
from tests.node_pid_readers import (
    MICROK8S, Box, eviction_hard, json_merge_patch, merged, node_configs, nodeadm_kubelet_base, pids_flags,
    system_reserved, with_eks_part,
)


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


@dataclass
class Pod:
    team: str
    tasks: int
    critical: bool = False
    # Every team's pod runs at priority 0 on the host (docs/security-pressure.md, "Eviction order cannot be bought").
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
