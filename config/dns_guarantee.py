"""Every team's DNS pod must fit in the cpu and memory quotas of its queue and of the organization's.

The tenant CoreDNS (components/tenant_dns.py) is scheduled by KAI in the team's queue and is non-preemptible, and
KAI places a non-preemptible pod only while the pods of that kind in its queue, and in every ancestor queue, stay
within the queue's quota (KAI pkg/scheduler/plugins/proportion/capacity_policy/quota_check.go, the same from
v0.16.0 to v0.17.0). A quota below it leaves the DNS Pending for ever, so nothing resolves a name in the team's vCluster.
A team's omitted cpu and memory include the DNS (config/load_teams.py); a written quota is in KAI's units,
millicores and MB, where a value meant as cores or gigabytes is the likely slip.
"""

from __future__ import annotations

from config.model import Organization, Team
from config.reader import Reader
from config.tenant_budget import DNS_REQUESTS, dns_budget

# KAI's queue units: cpu in millicores, memory in MB (10^6 bytes).
UNITS = {"cpu": ("millicores", "4000 is 4 cores"), "memory": ("MB", "16000 is 16 GB")}


def _dns_in_queue_units() -> dict[str, float]:
    dns = dns_budget()
    return {"cpu": dns.millicores, "memory": dns.memory / 1_000_000}


def dns_in_queue_units_text() -> str:
    """The DNS pod's requests in KAI's queue units, as the docs name them."""
    need = _dns_in_queue_units()
    return f"{need['cpu']:g} {UNITS['cpu'][0]}, {need['memory']:.1f} {UNITS['memory'][0]}"


def check_dns_fits_queues(reader: Reader, organization: Organization, teams: list[Team]) -> None:
    need = _dns_in_queue_units()
    for resource, floor in need.items():
        unit, example = UNITS[resource]
        for index, team in enumerate(teams):
            quota = getattr(team.resources, resource).quota
            if quota is not None and quota != -1 and quota < floor:
                reader.fail(f"teams[{index}].resources.{resource}.quota", quota,
                            f"is below what the team's DNS pod requests ({DNS_REQUESTS[resource]}, {floor:g} {unit}): "
                            "KAI runs that non-preemptible pod only within its queue's quota, so it stays Pending "
                            "and no name resolves in the team's vCluster",
                            f"write the quota in {unit} ({example}) and at least {floor:g}, set it to -1, or leave "
                            f"teams[].resources.{resource} out to follow vcluster.resourceQuota")
        org_quota = getattr(organization.resources, resource).quota
        total = floor * len(teams)
        if org_quota is not None and org_quota != -1 and org_quota < total:
            reader.fail(f"organization.resources.{resource}.quota", org_quota,
                        f"is below what the {len(teams)} teams' DNS pods request together ({total:g} {unit}): KAI "
                        "runs those non-preemptible pods only within the organization's quota too, so some stay "
                        "Pending and no name resolves in those teams' vClusters",
                        f"write the quota in {unit} ({example}) and at least {total:g}, or set it to -1")
