"""The ``fixed-requests`` rule: a pod keeps the CPU and memory requests KAI placed it with.

From a 1.35 host vCluster 0.36.1 patches a tenant's changed container resources onto the host pod through the
``pods/resize`` subresource (pkg/controllers/resources/pods/syncer.go), and the API server lets a resize change the
CPU and memory of containers and sidecars (KEP 1287: no other resource, no QoS change). KAI checks a queue's limit,
and that non-preemptible work stays within the queue's quota, only when it places a pod
(plugins/proportion/capacity_policy), while the kubelet alone admits a resize: a non-preemptible pod placed at 500m
could grow to what the namespace's ResourceQuota leaves, past a queue quota set below it, and KAI never reclaims
non-preemptible pods for another team. Judged on the host by the synced-objects policy, which matches the syncer's
``pods/resize`` writes (the syncer sends one on every sync of a pod whose host copy the LimitRanger gave defaults:
it changes nothing and passes), and inside each vCluster by a policy of its own (components/virtual_defaults.py).
"""

from __future__ import annotations

from components.admission_devices import SCHEDULED_LISTS
from components.admission_metadata import refusal

RESIZABLE = ("cpu", "memory")
PROBLEM = ("KAI charges the team's queue for the CPU and memory a pod requests when it places it, while an in-place "
           "resize (pods/resize) is admitted by the node alone, past the queue's limit and, for non-preemptible work, "
           "past the quota KAI keeps it within")
FIX = "re-create the pod to change its requests; a limit above its request may change"


def _requests(obj: str, field: str, resource: str) -> str:
    """The ``resource`` request of each container of ``field``, in order ('' where there is none)."""
    requests = "c.resources.requests"
    return (f"(has({obj}.spec.{field}) ? {obj}.spec.{field}.map(c, has(c.resources) && has({requests}) && "
            f"'{resource}' in {requests} ? string({requests}['{resource}']) : '') : [])")


def requests_kept() -> str:
    """Every container's and init container's CPU and memory request is as it was. Quantities reach a policy in
    their canonical form, so equal strings are equal amounts; lists compared in order keep the cost linear."""
    return " && ".join(f"{_requests('object', field, resource)} == {_requests('oldObject', field, resource)}"
                       for field in SCHEDULED_LISTS for resource in RESIZABLE)


def fixed_requests() -> dict:
    """The rule for a policy that matches resizes only."""
    return refusal("fixed-requests", requests_kept(), PROBLEM, FIX)
