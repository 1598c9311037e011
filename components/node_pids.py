"""The per-pod process limit (kubelet ``podPidsLimit``, ``cluster.podPidsLimit``) on the nodes the program builds.

MicroK8s runs the kubelet inside kubelite, which reads the kubelet's flags from the snap's args file once, when it
starts: one flag per line, blank and ``#`` lines skipped, quotes dropped, each line split at spaces (canonical/
microk8s v1.35 and v1.36, ``ReadArgsFromFile`` in the kubelite patch; ``default-args/kubelite`` names the file).
The snap's own file sets no ``--pod-max-pids``, so removing the line restores the snap's default: no limit.

AL2023 EKS nodes are set up by nodeadm, which reads ``NodeConfig`` documents from the MIME parts of type
``application/node.eks.aws`` of the instance's user data and merges them in order, later values winning; a managed
node group of an EKS AMI type appends its own part (cluster coordinates) to the launch template's user data, which
must therefore be MIME multipart. nodeadm writes ``spec.kubelet.config`` as a drop-in KubeletConfiguration
(awslabs/amazon-eks-ami v20260724: ``nodeadm/internal/configprovider/mime.go``, ``internal/api/merge.go``,
``internal/kubelet/config.go`` ``writeKubeletConfig``). tests/test_node_pids.py parses what this module writes the
way each reader does.

No Pulumi here.
"""

from __future__ import annotations

import base64

import yaml

MICROK8S_KUBELET_ARGS = "/var/snap/microk8s/current/args/kubelet"
KUBELITE_SERVICE = "microk8s.daemon-kubelite"
KUBELET_PIDS_FLAG = "--pod-max-pids"
# The flag's lines as kubelite would read them (leading blanks trimmed, value after "=" or a space).
_FLAG_LINES = rf"^[[:space:]]*{KUBELET_PIDS_FLAG}([=[:space:]]|$)"

NODECONFIG_MEDIA_TYPE = "application/node.eks.aws"
NODECONFIG_API_VERSION = "node.eks.aws/v1alpha1"
USER_DATA_BOUNDARY = "gpu-tenancy-node-settings"


def set_kubelet_pids_command(sudo: str, limit: int, ready: str, args_file: str = MICROK8S_KUBELET_ARGS) -> str:
    """Shell that leaves exactly one ``--pod-max-pids=<limit>`` line in MicroK8s' kubelet args and restarts
    kubelite when that changed anything, then waits for the cluster.

    Run again with the same limit, it changes nothing and restarts nothing; with another limit it replaces the
    old line (every spelling kubelite would read) instead of adding one. GNU sed queues the appended line before
    the last line may be deleted, so it lands once even when the old flag was the last line or the file lacks a
    final newline.
    """
    line = f"{KUBELET_PIDS_FLAG}={limit}"
    missing = (f"{args_file} is missing or empty: the kubelet's arguments of the MicroK8s snap are not where "
               "this program expects them. Check 'snap list microk8s'.")
    return (f"if ! {sudo}test -s {args_file}; then echo \"{missing}\" >&2; exit 1; fi; "
            f"if [ \"$({sudo}grep -E '{_FLAG_LINES}' {args_file})\" != '{line}' ]; then "
            f"{sudo}sed -i -E -e '$a {line}' -e '/{_FLAG_LINES}/d' {args_file} && "
            f"{sudo}snap restart {KUBELITE_SERVICE}; fi && {ready}")


def remove_kubelet_pids_command(sudo: str, ready: str, args_file: str = MICROK8S_KUBELET_ARGS) -> str:
    """Shell that takes the flag out of MicroK8s' kubelet args again (the snap's default: no limit) and restarts
    kubelite; nothing when the flag or the snap is gone."""
    return (f"if {sudo}grep -qE '{_FLAG_LINES}' {args_file} 2>/dev/null; then "
            f"{sudo}sed -i -E '/{_FLAG_LINES}/d' {args_file} && {sudo}snap restart {KUBELITE_SERVICE} && {ready}; fi")


def eks_node_user_data(limit: int) -> str:
    """A launch template's user data (base64, as EC2 takes it): one NodeConfig part setting the limit."""
    node_config = yaml.safe_dump({"apiVersion": NODECONFIG_API_VERSION, "kind": "NodeConfig",
                                  "spec": {"kubelet": {"config": {"podPidsLimit": limit}}}}, sort_keys=False)
    text = (f"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{USER_DATA_BOUNDARY}\"\n\n"
            f"--{USER_DATA_BOUNDARY}\nContent-Type: {NODECONFIG_MEDIA_TYPE}\n\n---\n{node_config}\n"
            f"--{USER_DATA_BOUNDARY}--\n")
    return base64.b64encode(text.encode()).decode()
