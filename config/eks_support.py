"""A site whose EKS Kubernetes minor is past Amazon EKS's support for it (config/versions.py
EKS_END_OF_STANDARD_SUPPORT and EKS_END_OF_EXTENDED_SUPPORT), as of the day the config is read.

A minor gets 14 months of standard support, then 12 of extended support billed at a higher rate per cluster hour,
unless the cluster's upgrade policy takes none (``cluster.eks.supportType: standard``). When the support a site takes
ends, EKS moves the control plane on by itself and leaves the node groups behind, and creates no cluster of that minor
any more. That is a warning, not a refusal: the stack cannot tell a new site, which EKS would refuse, from a running
one, whose stated version no longer describes what runs and whose plan is still worth reviewing; the warning says
what EKS does and which version to state instead. A site in extended support is only noted: it runs as stated, at the
higher rate. EKS takes no change to ``standard`` for a cluster already in extended support.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Mapping, Optional

from config import versions
from config.model import Cluster
from config.model_host import EksHost

KEY = "cluster.eks.kubernetesVersion"


def today() -> date:
    """The day (UTC, as the calendar's dates are) the check is made for."""
    return datetime.now(timezone.utc).date()


def _takes_extended_support(eks: EksHost) -> bool:
    return eks.support_type == "extended"


def _ends(eks: EksHost) -> Mapping[str, str]:
    """The day EKS stops keeping each minor for this site: the end of extended support, or of standard support for a
    site that takes no extended support."""
    if _takes_extended_support(eks):
        return versions.EKS_END_OF_EXTENDED_SUPPORT
    return versions.EKS_END_OF_STANDARD_SUPPORT


def _passed(day: Optional[str], on: date) -> bool:
    return day is not None and date.fromisoformat(day) <= on


def _still_supported(ends: Mapping[str, str], on: date) -> str:
    """The minors to move to: the oldest whose support has not ended by ``on``, or one newer than the calendar's."""
    supported = [minor for minor, end in ends.items() if not _passed(end, on)]
    if supported:
        return f"{min(supported, key=versions.release_order)} or later"
    return f"a minor newer than {max(ends, key=versions.release_order)}"


def eks_support_warnings(cluster: Cluster, on: Optional[date] = None) -> list[str]:
    """The warning for an EKS site whose ``cluster.eks.kubernetesVersion`` left the support it takes by ``on``."""
    eks = cluster.eks
    if eks is None:
        return []
    on = on or today()
    version = eks.kubernetes_version
    ends = _ends(eks)
    ended = ends.get(version)
    if not _passed(ended, on):
        return []
    newer = _still_supported(ends, on)
    if _takes_extended_support(eks):
        what = (f"whose Amazon EKS extended support ended on {ended}: EKS creates no cluster of {version} any more, "
                "and moves a running cluster's control plane to the oldest version it still supports by itself")
    else:
        what = (f"whose Amazon EKS standard support ended on {ended}, and cluster.eks.supportType is standard (no "
                "extended support): EKS moves a running cluster of that policy to the next minor by itself, and takes "
                "that policy for no cluster already in extended support")
    return [f"{KEY} is {version}, {what}, leaving the node groups on {version} (and this stack's kubectl Jobs pinned "
            f"for {version}). Set {KEY} to the version the cluster runs now "
            f"(`aws eks describe-cluster --name <cluster> --query cluster.version`), or on a new site to {newer}, and "
            "go on one minor version per `pulumi up`."]


def eks_support_notes(cluster: Cluster, on: Optional[date] = None) -> list[str]:
    """The note for an EKS site whose minor is in extended support by ``on``: it runs, at the higher rate."""
    eks = cluster.eks
    if eks is None or not _takes_extended_support(eks):
        return []
    on = on or today()
    version = eks.kubernetes_version
    standard_ended = versions.EKS_END_OF_STANDARD_SUPPORT.get(version)
    extended_ends = versions.EKS_END_OF_EXTENDED_SUPPORT.get(version)
    if not _passed(standard_ended, on) or _passed(extended_ends, on):
        return []
    newer = _still_supported(versions.EKS_END_OF_STANDARD_SUPPORT, on)
    return [f"{KEY} is {version}, which left Amazon EKS standard support on {standard_ended}: EKS bills the cluster "
            f"at its extended-support rate per cluster hour until it runs a minor in standard support ({newer}), and "
            f"moves its control plane on by itself after {extended_ends}. Upgrade one minor version per `pulumi up`; "
            "extended support cannot be turned off for a cluster already in it (cluster.eks.supportType: standard "
            "takes effect on a minor in standard support)."]
