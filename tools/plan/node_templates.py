"""What a changed launch template of an EKS node group does to a running site.

The AWS provider updates a launch template in place by making a new version (a new ``name`` alone replaces it), and
the program hands each managed node group its template's newest version (components/host.py): EKS then replaces
every node of the group with one started from the new version, a rolling update whose default strategy starts the
new instances before it terminates the old ones (the EKS API's NodegroupUpdateConfig), evicting the pods of each old
node. The program's templates carry the nodes' kubelet settings (user data), root disk, instance metadata options and
the instances' and volumes' tags.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from tools.plan.diff import Change
from tools.plan.running_site import DISRUPTS, Finding

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
# The one input whose change replaces the template instead (left to the generic rule).
NAME = "name"


def launch_template_findings(resource: Mapping[str, Any], subject: str,
                             changes: Iterable[Change]) -> tuple[list[Finding], list[Change]]:
    """The finding of a node launch template's new version, and the changes left to judge."""
    changes = list(changes)
    if resource["type"] != LAUNCH_TEMPLATE or not changes or any(change.path == NAME for change in changes):
        return [], changes
    first = changes[0]
    return [Finding(DISRUPTS, subject, ", ".join(change.path for change in changes[:5]), first.old, first.new,
                    "a new version of the node group's launch template: EKS replaces every node of the group with "
                    "one started from it, evicting each old node's pods",
                    "apply at a quiet time and tell the teams of the group's pool")], []
