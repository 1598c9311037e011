"""Each team's own alerts to the team's own receiver (``teams[].alerting``), as well as to the site's.

The program's alerts that name a team go there, matched by name and by their ``team`` label; with
``alerts: all`` also the chart's alerts about what the tenant runs in its own host namespace (its pods, jobs and
volumes, never its virtual cluster's control plane nor its snapshot Jobs and their pods), matched by that
namespace. That label comes from ``gpu_tenancy_team_info``, the series the platform writes from stack config
(components/observability_rules.py), joined on the namespace, queue or admission policy of the metric; the join
copies the team from that series over any ``team`` label the metric had, and the installed Prometheus scrapes
nothing a tenant runs. So a tenant cannot make an alert carry another team's name, and its own alerts do not reach
another team, but for a non-fatal XID on a GPU teams share: the driver does not say whose application faulted, so
it goes to every team with pods on the GPU, worded so. Plain data, no resources.
"""

from __future__ import annotations

from typing import Sequence

from components.observability_receivers import RECEIVER_SECRET, SECRETS_DIR, receiver_config, severity_matcher
from components.tenant_backup import job_name_pattern, pod_name_pattern
from config.model import Team
from config.snapshots import backup_name
from config.virtual_cluster import control_plane_claim_prefixes, control_plane_workloads

# Every alert the program defines is named so (components/observability_rules.py).
PLATFORM_ALERT_NAMES = "GpuTenancy.+"

# The program's alerts labelled with one team (components/observability_rules.py): a team under its guarantee
# with pending pods, idle GPUs, its pods refused by its admission policy, a non-fatal XID on a GPU its pods use,
# a GPU its pods use failing. A test holds this list to the alerts promtool sees firing with a team label.
TEAM_ALERTS = ("GpuTenancyTeamStarved", "GpuTenancyAllocatedGpuIdle", "GpuTenancyAdmissionRejections",
               "GpuTenancyGpuXidNonFatal", "GpuTenancyTeamGpuFailed")
TEAM_ALERTS_MATCHER = f'alertname =~ "{"|".join(TEAM_ALERTS)}"'


def team_receiver_name(team: str) -> str:
    return f"gpu-tenancy-team-{team}"


def team_secret_key(team: str) -> str:
    """The team's key in the receivers' Secret (a team name is a DNS label, a valid Secret key)."""
    return f"team-{team}"


def team_address_file(team: str) -> str:
    return f"{SECRETS_DIR}/{RECEIVER_SECRET}/{team_secret_key(team)}"


def tenants_own_alerts(teams: Sequence[Team]) -> list[str]:
    """Matchers of the chart's alerts about what the tenants run in their host namespaces: their pods and volumes.
    Those are the team's own, and a tenant drives them at will (a volume filled up is critical), so they do not go
    to the platform's receiver, and may go to the team's. Its virtual cluster's control plane (the vCluster
    StatefulSet, its pods, their data volumes; an external etcd's too) lives there as well and is the platform's;
    the program's alerts carry a namespace too (an XID names the pod's) and are not matched. A tenant's pod or
    claim reaches the host named ``<name>-x-<namespace>-x-<vcluster>``, or cut to 63 characters with a hash: never
    a control-plane name, which is at most 61 characters long (vclusterName at most 53) and has no ``-x-``."""
    workloads = [workload for team in teams for workload in control_plane_workloads(team.vcluster_name)]
    claims = "|".join(prefix for team in teams for prefix in control_plane_claim_prefixes(team.vcluster_name,
                                                                                          team.vcluster))
    matchers = [f'namespace =~ "{"|".join(team.namespace for team in teams)}"', f'alertname !~ "{PLATFORM_ALERT_NAMES}"',
                f'statefulset !~ "{"|".join(workloads)}"', f'pod !~ "({"|".join(workloads)})-[0-9]{{1,2}}"',
                f'persistentvolumeclaim !~ "({claims})[0-9]{{1,2}}"']
    # The snapshot CronJob's Jobs and their pods are the platform's. A tenant's Jobs stay in its virtual cluster, so
    # no host Job but the platform's is in the namespace; its pods reach the host as <name>-x-<namespace>-x-<vcluster>
    # (more dashes than a snapshot pod's name has after the CronJob's) or, past 63 characters, a 52-character prefix,
    # a dash and a 10-character hash (a last part twice as long as a snapshot pod's suffix): never a snapshot pod's
    # name (components/tenant_backup.py pod_name_pattern).
    backups = [backup_name(team) for team in teams if team.vcluster.backup]
    if backups:
        matchers += [f'job_name !~ "{"|".join(f"({job_name_pattern(name)})" for name in backups)}"',
                     f'pod !~ "{"|".join(f"({pod_name_pattern(name)})" for name in backups)}"']
    return matchers


def team_routes(teams: Sequence[Team]) -> list[dict]:
    """Per team with a receiver, a route for its program alerts and, with ``alerts: all``, one for the chart's
    alerts about its own namespace. ``continue``: the alert goes on to the site receiver's routes too, so the
    platform's on-call sees what the team is told (and the site's own choice decides whether it does)."""
    routes = []
    for team in teams:
        if not team.alerting.delivers:
            continue
        severity = severity_matcher(team.alerting.severity)
        receiver = {"receiver": team_receiver_name(team.name), "continue": True}
        routes.append({**receiver, "group_by": ["alertname", "team"],
                       "matchers": [TEAM_ALERTS_MATCHER, f'team = "{team.name}"', *severity]})
        if team.alerting.scope == "all":
            routes.append({**receiver, "group_by": ["alertname", "namespace"],
                           "matchers": [*tenants_own_alerts([team]), *severity]})
    return routes


def team_receivers(teams: Sequence[Team]) -> list[dict]:
    return [receiver_config(team_receiver_name(team.name), team.alerting.receiver, team_address_file(team.name),
                            team.alerting.slack_channel) for team in teams if team.alerting.delivers]
