"""Host-side admission of the syncer's pod deletions: a deleted pod is done within its own grace period.

A tenant deletes its virtual pod with a grace period of its choosing (``kubectl delete --grace-period``), and
vCluster 0.36.1's syncer deletes the host pod with that same period (pkg/controllers/resources/pods/syncer.go), which
the kubelet honours over the pod's own. KAI stops charging a deleted pod to its queue at once (a Releasing pod is
not among pod_status ``AllocatedStatus``, plugins/proportion updateQueuesCurrentResourceUsage) while the node stays
taken, and reclaims nothing from it: a pod that ignores SIGTERM would keep its GPUs, uncharged, for as long as the
tenant said, and the team could start as many again within its limit. The pod's own period is capped at creation
(``grace-period``, components/admission_pod_fields.py), so the deletion may not ask for more.

A DELETE request's ``object`` is null, which the pod policy's rules cannot read: this is a policy of its own, on the
syncer's deletions only (KAI's evictions pass no period and get the pod's own).
"""

from __future__ import annotations

from components.admission_metadata import refusal
from config.model import Team


def deletion_policy_name(team: Team) -> str:
    return f"gpu-tenancy-{team.name}-deletion"


def _within_own_grace_period() -> str:
    """The pod strategy has filled in the period before validation (the pod's own when the request named none)."""
    asked, own = "request.options.gracePeriodSeconds", "oldObject.spec.terminationGracePeriodSeconds"
    return f"!has({asked}) || !has({own}) || {asked} <= {own}"


def deletion_policy_spec(syncer: str, namespace_selector: dict) -> dict:
    """The policy on the pod deletions of ``syncer`` (the team's syncer identity) in the team's host namespace."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"],
                               "resources": ["pods"]}],
            "namespaceSelector": namespace_selector,
        },
        "matchConditions": [{"name": "deleted-by-the-syncer",
                             "expression": f"request.userInfo.username == '{syncer}'"}],
        "validations": [refusal(
            "deletion-grace-period", _within_own_grace_period(),
            "KAI stops charging a deleted pod to the team's queue while the pod runs on for its grace period, so a "
            "pod is deleted within its own terminationGracePeriodSeconds (which the platform caps)",
            "delete the pod without --grace-period, or with one no longer than its terminationGracePeriodSeconds")],
    }
