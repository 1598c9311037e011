"""Stack config: ``teams[].alerting``, a team's own alert receiver, and the secret holding every team's address.

The site receiver (``observability.alerting``) tells the platform's on-call; a team whose GPUs sit idle or whose
pods are refused learns it only through them. With a receiver of its own, the program's per-team alerts (those
labelled with the team, components/observability_team_alerting.py) also go to the team's channel.

The addresses are one secret key, ``teamAlertReceivers``: a YAML (or JSON) map of team name to its Slack or
webhook URL or PagerDuty routing key. The loader learns only whether it is set; ``team_addresses`` judges its
content where config/source.py reads it, naming the team and never the value. No Pulumi here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

import yaml

from config.errors import MISSING, ConfigError, ConfigIssue
from config.key_types import HTTP_URL_PATTERN, Text
from config.keys import Block, Condition, Derived, Key
from config.observability_alerting import (
    ADDRESS_KINDS, MOUNTED, RECEIVERS, SCOPES, SECRET_MEANING, SEVERITIES, SLACK_CHANNEL, slack_only,
)
from config.reader import Reader, Section
from config.secrets import ENCRYPTED, Secrets, secret_command

SECRET = "teamAlertReceivers"
# PagerDuty Events API v2 integration keys are 32 letters and digits.
ROUTING_KEY_PATTERN = r"[A-Za-z0-9]{32}"
# A team's name is a DNS label (teams[].name).
TEAM_NAME = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
SECRET_EXAMPLE = "team-nlp: https://hooks.slack.com/services/...\nteam-vision: <routing key>"


@dataclass(frozen=True)
class TeamAlerting:
    receiver: str = "none"
    scope: str = "platform"
    severity: str = "info"
    slack_channel: Optional[str] = None

    @property
    def delivers(self) -> bool:
        return self.receiver != "none"


_TEAM_ALERTING = TeamAlerting()
TEAM_ALERTING = Block(title="the team's own alert receiver", intro="""\
Where the team's own alerts go, besides the site receiver (`observability.alerting`), with
`observability.prometheus: install`. The program's alerts labelled with the team go there (a team under its GPU
guarantee with pending pods, idle GPUs, its pods refused by its admission policy, a non-fatal XID on a GPU it
uses) and, with `alerts: all`, the chart's alerts about the team's own host namespace. Every address is in the
secret key `teamAlertReceivers`, a YAML map of team name to address.""",
                      conditions=(
    slack_only("remove the team's alerting.slackChannel"),
    Condition("receiver", ("none",), "only shapes a receiver, and receiver is none",
              "set the team's alerting.receiver, or remove its alerting.{name}",
              forbidden=("alerts", "severity", "slackChannel")),
), keys=(
    Key("receiver", Text(choices=RECEIVERS), _TEAM_ALERTING.receiver,
        "Where the team's own alerts go (`install` only), as well as to the site receiver.", example="slack",
        default_note="`none`: the team's alerts go to the site receiver only",
        details=f"The address or key is the team's entry in the secret key `{SECRET}` (a YAML map of team name to "
                f"address): {ADDRESS_KINDS}. {MOUNTED}"),
    Key("alerts", Text(choices=SCOPES), _TEAM_ALERTING.scope, "Which alerts go to the team's receiver.",
        example="all",
        details="`platform`: the program's alerts labelled with the team (`GpuTenancyTeamStarved`, "
                "`GpuTenancyAllocatedGpuIdle`, `GpuTenancyAdmissionRejections`, `GpuTenancyGpuXidNonFatal`, "
                "`GpuTenancyTeamGpuFailed`). `all`: "
                "also kube-prometheus-stack's alerts about what the tenant runs in its host namespace (its pods "
                "crash-looping or not ready, jobs failing, volumes filling up: vCluster runs the tenant's workloads "
                "there), which the site receiver never gets; not those about its virtual cluster's control plane, "
                "which are the platform's."),
    Key("severity", Text(choices=SEVERITIES), Derived("`critical` for `pagerduty`, `info` otherwise"),
        "The least severe of the team's alerts that goes to its receiver.", example="warning"),
    Key("slackChannel", Text(form="Slack channel", checks=(SLACK_CHANNEL,)), _TEAM_ALERTING.slack_channel,
        "Channel to post to (`receiver: slack`).", example="#team-nlp-alerts",
        default_note="the incoming webhook's own channel"),
))


def read_team_alerting(section: Section) -> TeamAlerting:
    receiver = section.read("receiver") or _TEAM_ALERTING.receiver
    return TeamAlerting(receiver=receiver, scope=section.read("alerts") or _TEAM_ALERTING.scope,
                        severity=section.read("severity", "critical" if receiver == "pagerduty" else "info")
                        or _TEAM_ALERTING.severity,
                        slack_channel=section.read("slackChannel"))


def check_team_alerting(reader: Reader, prometheus: Optional[str], teams: Sequence, secrets: Secrets) -> None:
    """A team receiver needs the Alertmanager the program installs, and the secret holding the addresses."""
    receiving = [(index, team) for index, team in enumerate(teams) if team.alerting.delivers]
    for index, team in receiving:
        if prometheus != "install":
            reader.fail(f"teams[{index}].alerting.receiver", team.alerting.receiver,
                        f"team receivers are set in the Alertmanager the program installs, and "
                        f"observability.prometheus is {prometheus or 'off'}",
                        "set observability.prometheus: install, or remove the team's alerting block (a site's own "
                        "Alertmanager routes its alerts, by the team label)")
    if receiving and prometheus == "install":
        names = ", ".join(team.name or f"teams[{index}]" for index, team in receiving)
        secrets.require(SECRET, f"teams {names} have an alerting.receiver, and Alertmanager needs each one's "
                                "address (a YAML map of team name to address)")


def team_alerting_warnings(prometheus: str, teams: Sequence, secrets_set: set[str]) -> list[str]:
    if SECRET in secrets_set and not (prometheus == "install" and any(team.alerting.delivers for team in teams)):
        return [f"{SECRET} is set but nothing reads it: no team has an alerting.receiver (or prometheus is not "
                "install). Give a team a receiver, or remove the secret."]
    return []


def team_addresses(text: str, teams: Sequence) -> dict[str, str]:
    """Each receiving team's address from the secret's decrypted ``text``; a ConfigError naming every problem (the
    key, the team and the fix) and never the value or any part of it."""
    def issue(key: str, problem: str, fix: str, value: object = ENCRYPTED) -> ConfigIssue:
        return ConfigIssue(key, value, problem, fix)

    try:
        found = yaml.safe_load(text)
    except yaml.YAMLError:
        found = None
    if not isinstance(found, dict) or not all(isinstance(name, str) for name in found):
        raise ConfigError([issue(SECRET, "is not a YAML map of team name to address",
                                 f"write one line per team, e.g. {SECRET_EXAMPLE!r}, then run: {secret_command(SECRET)}")])
    receivers = {team.name: team.alerting.receiver for team in teams if team.alerting.delivers}
    issues = []
    known = {team.name for team in teams}
    for name in sorted(set(found) - set(receivers)):
        if not re.fullmatch(TEAM_NAME, name):
            # Not a name a team can have: perhaps an address written where the name goes, so it is not shown.
            issues.append(issue(SECRET, "has an entry whose name is not a team name (not shown: it may be an "
                                        "address)", f"key every entry by a team's name, e.g. {SECRET_EXAMPLE!r}"))
            continue
        why = "has no alerting.receiver" if name in known else "is not a team of this stack"
        issues.append(issue(f"{SECRET}.{name}", f"names a team that {why}",
                            f"remove {name} from the map, or give team {name} an alerting.receiver", value=name))
    addresses = {}
    for name, receiver in receivers.items():
        address = found.get(name)
        address = address.strip() if isinstance(address, str) else None
        if name not in found or not address:
            issues.append(issue(f"{SECRET}.{name}", f"is missing: team {name}'s alerting.receiver is {receiver}, "
                                f"and Alertmanager needs {SECRET_MEANING[receiver]}",
                                f"add a line '{name}: <address>' to the map, then run: {secret_command(SECRET)}",
                                value=MISSING))
        elif receiver == "pagerduty" and not re.fullmatch(ROUTING_KEY_PATTERN, address):
            issues.append(issue(f"{SECRET}.{name}", "is not a PagerDuty routing key (32 letters and digits)",
                                f"copy the Events API v2 integration key of team {name}'s PagerDuty service"))
        elif receiver != "pagerduty" and not re.fullmatch(HTTP_URL_PATTERN, address):
            issues.append(issue(f"{SECRET}.{name}", f"is not an http(s) URL (team {name}'s receiver is {receiver})",
                                f"set team {name}'s entry to {SECRET_MEANING[receiver]}"))
        else:
            addresses[name] = address
    if issues:
        raise ConfigError(issues)
    return addresses
