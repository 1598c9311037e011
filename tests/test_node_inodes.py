"""A tenant's empty files cannot leave a MicroK8s node out of inodes with nothing evicted: the program's MicroK8s
kubelet step (components/node_pids.py) gives the kubelet back its own inode signal, ``nodefs.inodesFree<5%``, which
the snap's ``--eviction-hard`` leaves out (docs/security-pressure.md#node-pressure, "Inodes").

The args file is edited with a real shell and GNU sed and read the way kubelite and the kubelet read it
(tests/node_pid_readers.py), at the snap's own file of each mirrored tag.
"""

from __future__ import annotations

import pytest

from components.node_pids import INODE_EVICTION_THRESHOLD, KUBELET_DEFAULT_EVICTION_HARD
from config.model_host import PID_EVICTION_THRESHOLD
from tests.conftest import MIRRORED_TAGS, git, mirrored_tag
from tests.node_pid_readers import MICROK8S, Box, eviction_hard, kubelite_args, other_args

INODES = "nodefs.inodesFree"


@pytest.mark.parametrize("tag", MIRRORED_TAGS[MICROK8S])
def test_the_snaps_kubelet_gets_the_inode_signal_beside_every_signal_of_its_own(tag, tmp_path):
    default = git(MICROK8S, "show", f"{mirrored_tag(MICROK8S, tag)}:microk8s-resources/default-args/kubelet")
    snap_signals = eviction_hard(default)
    assert "--eviction-hard" in default and "nodefs.available" in snap_signals
    assert not {INODES, "imagefs.inodesFree"} & set(snap_signals), \
        "the snap now evicts for inodes itself: weigh its threshold against the kubelet's default the step adds"
    box = Box(tmp_path, default)
    assert box.set(16384).returncode == 0 and box.restarts == 1
    after = box.args.read_text()
    assert eviction_hard(after) == {**snap_signals, INODES: INODE_EVICTION_THRESHOLD,
                                    "pid.available": PID_EVICTION_THRESHOLD}
    assert after.count(INODES) == 1 and other_args(after) == other_args(default)
    # A second run writes the same bytes and restarts nothing.
    assert box.set(16384).returncode == 0 and box.restarts == 0 and box.args.read_text() == after
    assert box.remove().returncode == 0 and box.restarts == 1
    assert box.args.read_text() == default


@pytest.mark.parametrize("tag", MIRRORED_TAGS[MICROK8S])
def test_the_snaps_images_and_pods_share_one_filesystem_so_the_nodefs_signal_covers_both(tag):
    """The kubelet watches an image filesystem of its own only when the runtime's root is on another device than
    its root directory; the snap puts both under $SNAP_COMMON/var/lib, so ``nodefs.inodesFree`` alone sees all the
    files a pod creates, and ``imagefs.inodesFree`` would read the same filesystem."""
    tag = mirrored_tag(MICROK8S, tag)

    def value(args: list[str], flag: str) -> str:
        return next(arg.split("=", 1)[1] if "=" in arg else args[index + 1]
                    for index, arg in enumerate(args) if arg == flag or arg.startswith(f"{flag}="))

    kubelet = kubelite_args(git(MICROK8S, "show", f"{tag}:microk8s-resources/default-args/kubelet"))
    containerd = kubelite_args(git(MICROK8S, "show", f"{tag}:microk8s-resources/default-args/containerd"))
    assert value(kubelet, "--root-dir") == "${SNAP_COMMON}/var/lib/kubelet"
    assert value(containerd, "--root") == "${SNAP_COMMON}/var/lib/containerd"


def test_a_file_without_eviction_hard_gets_the_kubelets_defaults_once_and_loses_the_line_on_removal(tmp_path):
    """The restated defaults already hold the inode signal: the step must not write the key twice."""
    assert f"{INODES}<{INODE_EVICTION_THRESHOLD}" in KUBELET_DEFAULT_EVICTION_HARD
    text = "--root-dir=/var/lib/kubelet\n--serialize-image-pulls=false\n"
    box = Box(tmp_path, text)
    assert box.set(16384).returncode == 0
    after = box.args.read_text()
    assert after.count("--eviction-hard") == 1 and after.count(INODES) == 1
    assert eviction_hard(after) == {**eviction_hard(text), "pid.available": PID_EVICTION_THRESHOLD}
    assert box.set(16384).returncode == 0 and box.restarts == 0 and box.args.read_text() == after
    assert box.remove().returncode == 0
    assert box.args.read_text() == text


@pytest.mark.parametrize("line, kept", [
    ('--eviction-hard="memory.available<1Gi,nodefs.inodesFree<10%"', "10%"),   # looser than ours
    ("--eviction-hard nodefs.inodesFree<1%,memory.available<1Gi", "1%"),        # stricter, after a space
    ('--eviction-hard="memory.available<1Gi"', INODE_EVICTION_THRESHOLD),       # none: ours
])
def test_a_sites_own_inode_threshold_stands_and_removal_gives_the_site_its_file_back(tmp_path, line, kept):
    text = f"--root-dir=/var/lib/kubelet\n{line}\n"
    box = Box(tmp_path, text)
    assert box.set(16384).returncode == 0
    after = box.args.read_text()
    assert eviction_hard(after)[INODES] == kept and after.count(INODES) == 1
    assert eviction_hard(after)["memory.available"] == "1Gi"
    assert box.remove().returncode == 0
    assert box.args.read_text() == text
