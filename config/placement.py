"""Where tenant pods can run, checked from the config alone, before any chart is rendered.

vCluster pins every synced pod (the tenant's DNS included) to ``vcluster.nodeLabels`` and adds
``vcluster.enforceTolerations``; config/hosts.py knows the node pools of a host whose nodes the
program creates. A selector that no pool matches, or whose pools all carry a taint the tenant does
not tolerate, leaves every tenant pod Pending: the loader refuses it, naming the key that decides.

A node carries labels the config does not list: the kubelet's (``kubernetes.io/...``), EKS's, and
those the GPU Operator's feature discovery sets (``nvidia.com/...``). A selector on such a label is
not refuted here. On MicroK8s the one node may also carry labels its admin set by hand, so only the
program's own labels (``gpu-tenancy/...``) are decided there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from config.model_host import HostProfile, NodePool, Taint
from config.vocabulary import PROJECT

# Label prefixes (before the '/') set on nodes by the kubelet, the cloud or operators, not by the config.
_OTHERS_PREFIXES = ("kubernetes.io", "k8s.io", "eks.amazonaws.com", "nvidia.com")


def set_by_others(label: str, host_kind: str) -> bool:
    """Whether a node may carry ``label`` with a value the config cannot know."""
    prefix = label.split("/", 1)[0] if "/" in label else ""
    if host_kind != "eks":
        return prefix != PROJECT
    return any(prefix == known or prefix.endswith("." + known) for known in _OTHERS_PREFIXES)


@dataclass(frozen=True)
class Toleration:
    """One ``enforceTolerations`` entry as vCluster parses it: ``*``, ``key[=value][:Effect]``."""

    key: str
    value: str
    effect: str
    exists: bool  # operator Exists (no value given with an effect, or ``*``)

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.exists:
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


def parse_toleration(text: str) -> Toleration:
    if text == "*":
        return Toleration("", "", "", exists=True)
    head, colon, effect = text.partition(":")
    key, equals, value = head.partition("=")
    # Without an effect vCluster leaves the operator empty, which Kubernetes reads as Equal.
    return Toleration(key, value, effect, exists=bool(colon) and not equals)


@dataclass(frozen=True)
class Placement:
    """The pools a tenant's pods can land on: ``matching`` by labels, ``runnable`` by labels and taints."""

    matching: tuple[NodePool, ...]
    runnable: tuple[NodePool, ...]


def placement(host: HostProfile, node_labels: Mapping[str, str], tolerations: Sequence[str]) -> Optional[Placement]:
    """Where pods with this nodeSelector and these tolerations can run; None when the pools are not known."""
    return None if host.node_pools is None else place(host.kind, host.node_pools, node_labels, tolerations)


def place(host_kind: str, pools: Sequence[NodePool], node_labels: Mapping[str, str],
          tolerations: Sequence[str]) -> Placement:
    """The pools of a host of this kind that pods with this nodeSelector and these tolerations can land on."""
    matching = tuple(pool for pool in pools
                     if all(set_by_others(key, host_kind) or pool.labels.get(key) == value
                            for key, value in node_labels.items()))
    parsed = [parse_toleration(text) for text in tolerations]
    runnable = tuple(pool for pool in matching
                     if all(taint.effect not in ("NoSchedule", "NoExecute")
                            or any(toleration.tolerates(taint) for toleration in parsed) for taint in pool.taints))
    return Placement(matching, runnable)


def pool_labels(host: HostProfile) -> str:
    """The node pools and the labels a selector can match them by, for a fix."""
    if not host.node_pools:
        return "none"
    return "; ".join(f"{pool.name}: {dict(pool.labels) or '{} (no labels of its own)'}" for pool in host.node_pools)
