"""What a sharing profile's new ConfigMap key does to the nodes that name the old one.

Each profile's key in the time-slicing ConfigMap carries a hash of its content (config/sharing.py), so a new
``gpuOperator.timeSlicing.replicas`` renames the ``time-sliced`` key and the old key leaves the ConfigMap. The device
plugin's config manager reads a node's ``nvidia.com/device-plugin.config`` label when it starts and afterwards only
when that label changes (NVIDIA/k8s-device-plugin v0.20.0, the release GPU Operator v26.7.0 ships,
``cmd/config-manager/main.go``: its node informer's update handler compares old and new label); a label naming a key
the ConfigMap lacks fails it ("specified config ... does not exist"), and the device plugin's pod does not start.

- On EKS the program puts the key in each GPU node group's labels, so the label moves with the key: EKS relabels the
  group's nodes in place (UpdateNodegroupConfig) and the config manager follows.
- On MicroK8s and existing clusters the operator labels nodes by hand (docs/config-gpus-and-queues.md, Sharing
  profiles), and such a label keeps naming the removed key.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from config.vocabulary import NODE_PROFILE_LABEL
from tools.plan.diff import Change
from tools.plan.eks_upgrade import EKS_NODE_GROUP
from tools.plan.running_site import DISRUPTS, Finding

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
# Hosts whose nodes the operator labels by hand.
HAND_LABELLED = ("microk8s", "kubeconfig")
NODE_GROUP_LABEL = f'labels["{NODE_PROFILE_LABEL}"]'


def _time_slicing(plan: Mapping[str, Any]) -> Mapping[str, Any]:
    found = (plan.get("outputs") or {}).get("timeSlicing")
    return found if isinstance(found, dict) else {}


def time_slicing_config_map(plan: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The plan's time-slicing ConfigMap resource (named by the stack output ``timeSlicing``)."""
    outputs = _time_slicing(plan)
    for resource in plan.get("resources", []):
        metadata = (resource.get("inputs") or {}).get("metadata") or {}
        if (resource["type"] == CONFIG_MAP and metadata.get("name") == outputs.get("configMap")
                and metadata.get("namespace") == outputs.get("namespace")):
            return resource
    return None


def _default_handed_to_operator(plan: Mapping[str, Any], key: str) -> bool:
    """Whether the program hands ``key`` to a GPU Operator as its default (the release's values, the addon's
    ClusterPolicy patch): not so in ``external`` mode, where only the ConfigMap is the program's."""
    return any(resource["type"] != CONFIG_MAP and f'"default": {json.dumps(key)}' in json.dumps(resource.get("inputs"))
               for resource in plan.get("resources", []))


def _hand_label_finding(subject: str, profile: str, old_key: str, new_key: str, restarts: bool,
                        kubectl: str) -> Finding:
    relabel = f"`{kubectl} label node N {NODE_PROFILE_LABEL}={new_key} --overwrite`"
    why = (f"the ConfigMap no longer holds the `{profile}` profile's key {old_key} (gpuOperator.timeSlicing changed "
           f"its content, so its key is now {new_key}); a node labelled {NODE_PROFILE_LABEL}={old_key} by hand then "
           "names a missing key. The device plugin's config manager reads the label again only when it changes, so "
           "nothing happens until the device plugin restarts (a reboot, an operator upgrade), when the config "
           "manager fails on the missing key, the plugin's pod does not start and the node stops advertising "
           "nvidia.com/gpu")
    fix = (f"find the nodes with `{kubectl} get nodes -l {NODE_PROFILE_LABEL}={old_key}` and relabel each to the new "
           f"key right after `pulumi up`: {relabel} (not before: the old ConfigMap has no {new_key})")
    if restarts:
        why += (f"; here the operator's default key moves too (gpuOperator.timeSlicing.defaultProfile is "
                f"`{profile}`), which restarts the device plugin on every GPU node during `pulumi up`, so such a node "
                "fails at once")
        fix = (f"right before `pulumi up`, move those nodes to the profile's plain name, which the old and the new "
               f"ConfigMap both hold (`{kubectl} label node N {NODE_PROFILE_LABEL}={profile} --overwrite`), then "
               f"right after it to the new key: {relabel}; find them with `{kubectl} get nodes -l "
               f"{NODE_PROFILE_LABEL}={old_key}`")
    return Finding(DISRUPTS, subject, NODE_PROFILE_LABEL, old_key, new_key, why, fix)


def profile_key_findings(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Finding]:
    """One finding per sharing profile whose key leaves the ConfigMap, on hosts whose nodes are labelled by hand."""
    config_map, host = time_slicing_config_map(new), (new.get("outputs") or {}).get("hostKind")
    if host not in HAND_LABELLED or config_map is None:
        return []
    # The command the host's own docs and findings give: a MicroK8s box has its kubectl under the snap.
    kubectl = "microk8s kubectl" if host == "microk8s" else "kubectl"
    before, after = _time_slicing(old), _time_slicing(new)
    old_keys, new_keys = before.get("profileKeys") or {}, after.get("profileKeys") or {}
    subject = f"`{config_map['type']}` {config_map['name']}"
    return [_hand_label_finding(subject, profile, old_keys[profile], new_key,
                                before.get("defaultKey") == old_keys[profile]
                                and _default_handed_to_operator(new, new_key), kubectl)
            for profile, new_key in sorted(new_keys.items())
            if profile in old_keys and old_keys[profile] not in new_keys.values()]


def node_group_label_findings(resource: Mapping[str, Any], subject: str,
                              changes: Iterable[Change]) -> tuple[list[Finding], list[Change]]:
    """The finding of an EKS GPU node group whose profile key changed, and the changes left to judge."""
    changes = list(changes)
    if resource["type"] != EKS_NODE_GROUP:
        return [], changes
    return ([Finding(DISRUPTS, subject, change.path, change.old, change.new,
                     "EKS relabels the group's nodes in place (UpdateNodegroupConfig: no node is replaced), and each "
                     "node's device-plugin config manager, seeing its label change, restarts the device plugin on the "
                     "new key, so the nodes advertise nvidia.com/gpu as the profile now says; should EKS relabel "
                     "before the ConfigMap holds the new key, the config manager restarts until it does",
                     "none needed: the program moves the group's label with the key")
             for change in changes if change.path == NODE_GROUP_LABEL],
            [change for change in changes if change.path != NODE_GROUP_LABEL])
