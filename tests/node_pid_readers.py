"""How each host reads the kubelet's process settings the program writes, for tests/test_node_pids.py,
tests/test_node_pids_contract.py and tests/test_node_pid_pressure.py: kubelite's reading of MicroK8s' args file and
the kubelet's map flags; nodeadm's reading and merging of an EKS launch template's user data and the kubelet's merging of its drop-in over nodeadm's
own configuration. A stand-in MicroK8s box runs the program's shell against a scratch args file."""

from __future__ import annotations

import base64
import email
import os
import re
import subprocess
from pathlib import Path

import yaml

from components.node_pids import (
    KUBELET_DEFAULT_EVICTION_HARD, KUBELITE_SERVICE, NODECONFIG_MEDIA_TYPE, remove_kubelet_settings_command,
    set_kubelet_settings_command,
)
from config.model_host import DEFAULT_SYSTEM_MEMORY_RESERVE
from tests.conftest import git, mirrored_tag

MICROK8S, EKS_AMI = "canonical/microk8s", "awslabs/amazon-eks-ami"
EKS_AMI_TAG = "v20260724"
READY = "sudo microk8s status --wait-ready --timeout 600 >/dev/null"


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

    def set(self, limit: int, reserve: str = DEFAULT_SYSTEM_MEMORY_RESERVE) -> subprocess.CompletedProcess:
        return self.run(set_kubelet_settings_command("sudo ", limit, reserve, READY, str(self.args)))

    def remove(self, reserve: str = DEFAULT_SYSTEM_MEMORY_RESERVE) -> subprocess.CompletedProcess:
        return self.run(remove_kubelet_settings_command("sudo ", reserve, READY, str(self.args)))

    @property
    def restarts(self) -> int:
        return self.log.read_text().splitlines().count(f"snap restart {KUBELITE_SERVICE}")

    @property
    def waited(self) -> bool:
        return "microk8s status --wait-ready --timeout 600" in self.log.read_text()


# SNAP_KUBELET_ARGS after the step: the reserve a line of its own, the threshold added to the snap's signals.


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
