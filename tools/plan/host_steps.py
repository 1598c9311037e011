"""What a changed MicroK8s setup step does to a running site.

components/host.py sets a MicroK8s box up with pulumi-command ``Command``s under the host. The program gives them no
``update`` and no ``triggers``, so a changed ``create`` is run again as an update (pulumi-command 1.2.1), on a box
that already ran the old one:

- ``enable-nvidia`` runs ``microk8s enable nvidia --gpu-operator-version <v>``, but ``microk8s enable`` skips an
  addon already enabled: it prints "Addon core/nvidia is already enabled" and exits 0 (canonical/microk8s v1.35 and
  v1.36, ``scripts/wrappers/common/utils.py`` ``unprotected_xable``). The step's ClusterPolicy check then passes on
  the old release's, so the box keeps the GPU Operator it had.
- ``pod-pids-limit`` (the kubelet's flags, components/node_pids.py) and ``apiserver-audit-log`` (the API server's,
  components/apiserver_audit.py) rewrite the snap's args file and restart kubelite when it changed.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from config.vocabulary import AUDIT_LOG_STEP, KUBELET_ARGS_STEP, NVIDIA_ADDON_STEP
from tools.plan.diff import MISSING, Change
from tools.plan.running_site import DISRUPTS, NOT_APPLIED, Finding

COMMAND_TYPES = ("command:local:Command", "command:remote:Command")
CREATE = "create"

_OPERATOR_VERSION = re.compile(r"--gpu-operator-version\s+(\S+)")
# A flag with its value as the step writes it into an args file (``--pod-max-pids=16384``), quotes and shell
# punctuation left out.
_FLAG = re.compile(r"--[a-z][a-z-]*=[^\s'\"\\;]+")
_RESTART = ("kubelite restarts (the box's API server, scheduler, controller manager and kubelet): the API server is "
            "away for up to a minute, so `kubectl`, the tenants' syncers and KAI wait, while running pods keep "
            "running")


def _operator_version(create: Any) -> Any:
    found = _OPERATOR_VERSION.search(str(create))
    return found.group(1) if found else MISSING


def _flags_changed(change: Change) -> tuple[Any, Any]:
    """The flags only the old ``create`` writes, and those only the new one writes (MISSING for none)."""
    old, new = set(_FLAG.findall(str(change.old))), set(_FLAG.findall(str(change.new)))
    return (", ".join(sorted(old - new)) or MISSING), (", ".join(sorted(new - old)) or MISSING)


def _nvidia_addon(subject: str, change: Change) -> Finding:
    return Finding(
        NOT_APPLIED, subject, CREATE, _operator_version(change.old), _operator_version(change.new),
        "the step runs again, but `microk8s enable nvidia` skips an addon already enabled (\"Addon core/nvidia is "
        "already enabled\", exit 0) and the step's ClusterPolicy check passes on the old one, so the box keeps "
        "its GPU Operator release",
        "to move the box to the new release, run `microk8s disable nvidia` on it right before `pulumi up` (it "
        "uninstalls the addon's GPU Operator: no GPU pod starts until `pulumi up` has installed the new one, and "
        "running GPU pods may lose their GPU if the operator's driver container ran the driver, so drain GPU work "
        "first, at a quiet time); Pulumi does not patch the new ClusterPolicy again on its own (the patch's inputs "
        "did not change), so run `pulumi up --refresh` after it and check `microk8s kubectl get clusterpolicy "
        "cluster-policy -o jsonpath='{.spec.devicePlugin.config}'` names the time-slicing ConfigMap; or keep "
        "cluster.microk8s.nvidiaAddonOperatorVersion at the release the box runs")


def _kubelet_args(subject: str, change: Change) -> Finding:
    old, new = _flags_changed(change)
    return Finding(
        DISRUPTS, subject, CREATE, old, new,
        f"the step rewrites the kubelet's flags and {_RESTART}; a larger memory reserve "
        "(cluster.microk8s.systemReservedMemory) lowers the pods' memory cap at once, so the kernel OOM-kills pods "
        "above it and the kubelet may refuse running pods whose requests no longer fit as it starts; a new "
        "podPidsLimit holds for pods created after it",
        "apply at a quiet time; before a larger reserve, check `microk8s kubectl describe node` (Allocated "
        "resources) and `microk8s kubectl top node`: the pods' memory requests and use must stay under the "
        "Allocatable less the increase "
        "(docs/operations-running.md, Changing a running site)")


def _audit_log(subject: str, change: Change) -> Finding:
    old, new = _flags_changed(change)
    return Finding(DISRUPTS, subject, CREATE, old, new,
                   f"the step rewrites the API server's audit flags and policy and {_RESTART}",
                   "apply at a quiet time and tell the teams")


_RULES = {NVIDIA_ADDON_STEP: _nvidia_addon, KUBELET_ARGS_STEP: _kubelet_args, AUDIT_LOG_STEP: _audit_log}


def host_step_findings(resource: Mapping[str, Any], subject: str,
                       changes: Iterable[Change]) -> tuple[list[Finding], list[Change]]:
    """The finding of a MicroK8s setup step whose ``create`` changed, and the changes left to judge."""
    changes = list(changes)
    name = str(resource["name"])
    rule = next((rule for step, rule in _RULES.items() if name.endswith(f"-{step}")), None)
    if resource["type"] not in COMMAND_TYPES or rule is None:
        return [], changes
    return ([rule(subject, change) for change in changes if change.path == CREATE],
            [change for change in changes if change.path != CREATE])
