"""A site whose EKS Kubernetes is past Amazon EKS's extended support (config/versions.py
EKS_END_OF_EXTENDED_SUPPORT), as of the day the config is read.

A warning, not a refusal: the stack cannot tell a new site, which EKS would refuse to create at that version, from a
running one, whose control plane EKS has moved or will move on by itself while its node groups stay behind. Either
way the stated version no longer describes what runs, and the plan of a running site is still worth reviewing: the
warning says what EKS does and which version to state instead.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Optional

from config import versions
from config.model import Cluster


def today() -> date:
    """The day (UTC, as the calendar's dates are) the check is made for."""
    return datetime.now(timezone.utc).date()


def eks_support_warnings(cluster: Cluster, on: Optional[date] = None) -> list[str]:
    """The warning for an EKS site whose ``cluster.eks.kubernetesVersion`` left extended support by ``on`` (today)."""
    if cluster.eks is None:
        return []
    on = on or today()
    version = cluster.eks.kubernetes_version
    ended = versions.EKS_END_OF_EXTENDED_SUPPORT.get(version)
    if ended is None or date.fromisoformat(ended) > on:
        return []
    supported = [minor for minor, end in versions.EKS_END_OF_EXTENDED_SUPPORT.items()
                 if date.fromisoformat(end) > on]
    oldest = min(supported, key=versions.release_order) if supported else None
    last = max(versions.EKS_END_OF_EXTENDED_SUPPORT, key=versions.release_order)
    newer = f"{oldest} or later" if oldest else f"a minor newer than {last}"
    return [f"cluster.eks.kubernetesVersion is {version}, whose Amazon EKS extended support ended on {ended}: EKS "
            f"creates no cluster of {version} any more, and moves a running cluster's control plane to the oldest "
            f"version it still supports by itself, leaving the node groups on {version} (and this stack's kubectl "
            f"Jobs pinned for {version}). Set cluster.eks.kubernetesVersion to the version the cluster runs now "
            "(`aws eks describe-cluster --name <cluster> --query cluster.version`), or on a new site to "
            f"{newer}, and go on one minor version per `pulumi up`."]
