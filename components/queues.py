"""KAI's queue hierarchy: the organization queue and one leaf queue per team.

Every queue renders gpu, cpu and memory with quota, limit and overQuotaWeight: KAI reads an
omitted limit as a hard cap of zero and an omitted weight as "no surplus". Parents are created
before children (a child without a parent is silently dropped by the scheduler) and, because
children depend on their parent, deleted after them (KAI refuses to delete a parent with
children).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes_resources import Kind, KubernetesObject
from config.model import Organization, QueueResource, QueueResources, Team
from config.vocabulary import MANAGED_BY, QUEUE_RESOURCES, QUEUES_COMPONENT

QUEUE = Kind("scheduling.run.ai/v2", "Queue")
# KAI's admission webhook can still be starting right after its release reports ready.
QUEUE_TIMEOUTS = pulumi.CustomTimeouts(create="10m", update="10m", delete="10m")


@dataclass
class QueueHierarchyArgs:
    organization: Organization
    teams: Sequence[Team]
    provider: k8s.Provider
    # Queues are created only once this is ready: KAI's queue webhook answers.
    scheduler_ready: pulumi.Resource
    # What the teams' cpu and memory quotas guarantee on their pools against what those pools give
    # (config/cpu_memory_capacity.py), recorded for the plan's reviewer.
    cpu_memory_guarantees: Sequence[dict] = ()


def _resource(entry: QueueResource) -> dict:
    return {"quota": entry.quota, "limit": entry.limit, "overQuotaWeight": entry.over_quota_weight}


def queue_spec(display_name: str, priority: int, resources: QueueResources, parent: Optional[str] = None) -> dict:
    spec = {
        "displayName": display_name,
        "priority": priority,
        "resources": {name: _resource(getattr(resources, name)) for name in QUEUE_RESOURCES},
    }
    if parent is not None:
        spec["parentQueue"] = parent
    return spec


class QueueHierarchy(pulumi.ComponentResource):
    org_queue: KubernetesObject
    team_queues: dict[str, KubernetesObject]

    def __init__(self, name: str, args: QueueHierarchyArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(QUEUES_COMPONENT, name, None, opts)
        org = args.organization

        def queue(resource_name: str, queue_name: str, spec: dict, after: pulumi.Resource):
            return KubernetesObject(
                resource_name, QUEUE,
                metadata={"name": queue_name, "labels": dict(MANAGED_BY)},
                spec=spec,
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[after],
                                            custom_timeouts=QUEUE_TIMEOUTS),
            )

        self.org_queue = queue(f"{name}-{org.name}", org.name,
                               queue_spec(org.display_name, org.priority, org.resources), args.scheduler_ready)
        self.team_queues = {
            team.name: queue(f"{name}-{team.queue_name}", team.queue_name,
                             queue_spec(team.display_name, team.priority, team.resources, parent=org.name),
                             self.org_queue)
            for team in args.teams
        }
        self.register_outputs({"orgQueue": org.name, "teamQueues": sorted(self.team_queues),
                               "cpuMemoryGuarantees": list(args.cpu_memory_guarantees)})
