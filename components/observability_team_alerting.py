"""Each team's own alerts to the team's own receiver (``teams[].alerting``), as well as to the site's.

Only the program's alerts that name a team go there, matched by name and by their ``team`` label. That label comes
from ``gpu_tenancy_team_info``, the series the platform writes from stack config (components/observability_rules.py),
joined on the namespace, queue or admission policy of the metric; the join copies the team from that series over any
``team`` label the metric had, and the installed Prometheus scrapes nothing a tenant runs. So a tenant cannot make
an alert carry another team's name, and its own alerts do not reach another team. Plain data, no resources.
"""

from __future__ import annotations

from typing import Sequence

from components.observability_receivers import RECEIVER_SECRET, SECRETS_DIR, receiver_config, severity_matcher
from config.model import Team

# The program's alerts labelled with one team (components/observability_rules.py): a team under its guarantee
# with pending pods, idle GPUs, its pods refused by its admission policy, a non-fatal XID on a GPU its pods use.
# A test holds this list to the alerts promtool sees firing with a team label.
TEAM_ALERTS = ("GpuTenancyTeamStarved", "GpuTenancyAllocatedGpuIdle", "GpuTenancyAdmissionRejections",
               "GpuTenancyGpuXidNonFatal")
TEAM_ALERTS_MATCHER = f'alertname =~ "{"|".join(TEAM_ALERTS)}"'


def team_receiver_name(team: str) -> str:
    return f"gpu-tenancy-team-{team}"


def team_secret_key(team: str) -> str:
    """The team's key in the receivers' Secret (a team name is a DNS label, a valid Secret key)."""
    return f"team-{team}"


def team_address_file(team: str) -> str:
    return f"{SECRETS_DIR}/{RECEIVER_SECRET}/{team_secret_key(team)}"


def team_routes(teams: Sequence[Team]) -> list[dict]:
    """One route per team with a receiver. ``continue``: the alert goes on to the site receiver's route too, so
    the platform's on-call sees what the team is told."""
    return [{"receiver": team_receiver_name(team.name), "group_by": ["alertname", "team"], "continue": True,
             "matchers": [TEAM_ALERTS_MATCHER, f'team = "{team.name}"', *severity_matcher(team.alerting.severity)]}
            for team in teams if team.alerting.delivers]


def team_receivers(teams: Sequence[Team]) -> list[dict]:
    return [receiver_config(team_receiver_name(team.name), team.alerting.receiver, team_address_file(team.name),
                            team.alerting.slack_channel) for team in teams if team.alerting.delivers]
