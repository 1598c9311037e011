"""What a new ``cluster.eks.kubernetesVersion`` does to a running EKS site.

EKS moves a cluster's control plane up by one minor version per update and never down (UpdateClusterVersion; the
EKS user guide's "Update existing cluster to new Kubernetes version"), and only while every managed node group runs
the cluster's own minor. The program pins each node group to the cluster's version, so the same ``pulumi up`` then
updates every group, which replaces each of its nodes with one of the new minor.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from tools.plan.diff import MISSING, Change
from tools.plan.running_site import DISRUPTS, STOPS, Finding

EKS_CLUSTER = "eks:index:Cluster"
EKS_NODE_GROUP = "eks:index:ManagedNodeGroup"
VERSION = "version"


def _minor(version: Any) -> tuple[int, int] | None:
    try:
        major, minor = str(version).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def _cluster_finding(subject: str, change: Change) -> Finding:
    old, new = _minor(change.old), _minor(change.new)
    if old is not None and new is not None and new < old:
        return Finding(STOPS, subject, change.path, change.old, change.new,
                       "EKS never downgrades a cluster: the update is refused and `pulumi up` stops there",
                       f"set cluster.eks.kubernetesVersion back to {change.old}; going back means a new cluster")
    if old is not None and new is not None and new > (old[0], old[1] + 1):
        step = f"{old[0]}.{old[1] + 1}"
        return Finding(STOPS, subject, change.path, change.old, change.new,
                       "EKS upgrades a cluster one minor version at a time: the update is refused and `pulumi up` "
                       "stops there",
                       f"set cluster.eks.kubernetesVersion to {step}, run `pulumi up`, and go on one minor version "
                       "per `pulumi up`")
    return Finding(DISRUPTS, subject, change.path, change.old, change.new,
                   "EKS upgrades the control plane in place (the API server stays up), then every node group "
                   "follows in the same `pulumi up`",
                   "check the workloads against the new minor's removed APIs first; the node groups' entries say "
                   "what their nodes go through")


def _node_group_finding(subject: str, change: Change) -> Finding:
    if change.old is MISSING:
        why = ("the group is pinned to the cluster's minor from now on: if it still runs the minor it was created "
               "with and the cluster was upgraded since, EKS replaces every node of it, so its pods are evicted and "
               "start again on the new nodes (otherwise nothing changes)")
    else:
        why = (f"the group moves from {change.old} to the cluster's minor: EKS replaces every node of it, so its "
               "pods are evicted and start again on the new nodes")
    return Finding(DISRUPTS, subject, change.path, change.old, change.new, why,
                   "apply at a quiet time and tell the teams of the group's pool")


def eks_version_findings(resource: Mapping[str, Any], subject: str,
                         changes: Iterable[Change]) -> tuple[list[Finding], list[Change]]:
    """The findings of an EKS cluster's or node group's version change, and the other changes, left to judge."""
    rule = {EKS_CLUSTER: _cluster_finding, EKS_NODE_GROUP: _node_group_finding}.get(resource["type"])
    findings: list[Finding] = []
    rest: list[Change] = []
    for change in changes:
        if rule is not None and change.path == VERSION:
            findings.append(rule(subject, change))
        else:
            rest.append(change)
    return findings, rest
